-- expect: mode = "generate" is not built for scheme = "megatron"
return {
  scheme = "megatron", mesh = { p = 2 }, mode = "generate",
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 4, batch = 2, vocab = 11, positions = 8, context = 8 },
}
