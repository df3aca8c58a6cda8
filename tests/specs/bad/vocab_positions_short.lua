-- expect: model.positions = 8 is smaller than model.seq = 16: every token position needs a learned embedding; use positions >= 16
return { mesh = { q = 2 }, model = { layers = 1, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4,
  vocab = 100, positions = 8 } }
