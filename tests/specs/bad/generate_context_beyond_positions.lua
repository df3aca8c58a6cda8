-- expect: model.context = 9 is larger than model.positions = 8
return {
  mesh = { q = 1, d = 1 }, mode = "generate",
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 4, batch = 2, vocab = 11, positions = 8, context = 9 },
}
