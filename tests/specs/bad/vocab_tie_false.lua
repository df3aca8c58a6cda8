-- expect: model.tie = false is not supported: only the tied LM head is supported
return { mesh = { q = 2 }, model = { layers = 1, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4,
  vocab = 100, positions = 16, tie = false } }
