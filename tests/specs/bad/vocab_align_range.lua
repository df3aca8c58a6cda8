-- expect: model.vocab_align = 4096 is larger than 1024: every rank's vocab block would carry up to 4095 rows of zero pad; use vocab_align <= 1024
return { mesh = { q = 2 }, model = { layers = 1, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4,
  vocab = 50257, positions = 16, vocab_align = 4096 } }
