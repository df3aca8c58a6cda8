-- expect: model.vocab = 1 is too small: a language model predicts one of at least 2 tokens; use vocab >= 2
return { mesh = { q = 2 }, model = { layers = 1, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4,
  vocab = 1, positions = 16 } }
