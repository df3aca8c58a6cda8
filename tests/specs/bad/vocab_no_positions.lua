-- expect: model.positions is missing (the learned positions P, at least seq)
return { mesh = { q = 2 }, model = { layers = 1, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4, vocab = 100 } }
