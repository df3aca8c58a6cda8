-- expect: decode_layout is given without mode = "generate"
return {
  mesh = { q = 2, d = 1 }, decode_layout = "stationary",
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 4, batch = 2, vocab = 11, positions = 8 },
}
