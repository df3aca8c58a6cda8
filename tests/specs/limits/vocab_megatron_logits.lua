-- expect: the per-rank logits block batch*seq*ceil(vocab/p) = 3293642752 elements does not fit in a 32-bit int
-- the megatron scheme's logits block holds every token and 1/p of the vocabulary (plan_megatron_lm.c); p = 2 fits
return { scheme = "megatron", mesh = { p = 1 }, model = { layers = 1, hidden = 64, heads = 4, ffn = 256, seq = 1024,
  batch = 64, vocab = 50257, positions = 1024 } }
