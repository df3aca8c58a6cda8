-- expect: model.context is missing: mode = "generate" needs the KV-cache length
return {
  mesh = { q = 1, d = 1 }, mode = "generate",
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 4, batch = 2, vocab = 11, positions = 8 },
}
