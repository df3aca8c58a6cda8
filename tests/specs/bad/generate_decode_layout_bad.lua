-- expect: decode_layout = "sumaa" is not a decode layout: use "auto"
return {
  mesh = { q = 2, d = 1 }, mode = "generate", decode_layout = "sumaa",
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 4, batch = 2, vocab = 11, positions = 8, context = 8 },
}
