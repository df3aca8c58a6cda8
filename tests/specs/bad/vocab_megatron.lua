-- expect: model.vocab with scheme = "megatron" is not supported yet
return { scheme = "megatron", mesh = { p = 2 }, model = { layers = 1, hidden = 64, heads = 4, ffn = 256, seq = 16,
  batch = 4, vocab = 100, positions = 16 } }
