-- expect: model.positions is given without model.vocab
return { mesh = { q = 2 }, model = { layers = 1, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4, positions = 16 } }
