-- expect: mode = "generate" is not built with attention = "cudnn"
return {
  mesh = { q = 1, d = 1 }, mode = "generate", dtype = "bf16", attention = "cudnn",
  model = { layers = 1, hidden = 16, heads = 2, ffn = 16, seq = 4, batch = 2, vocab = 11, positions = 8, context = 8 },
}
