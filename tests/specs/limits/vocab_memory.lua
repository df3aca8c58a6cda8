-- expect: memory_gib = 0.25: the largest arena, 611.15 MiB for the ranks of class (i=0, j=0), does not fit in 0.25 GiB per rank
-- model.vocab: the arena counts the token embedding block [ceil(V/q), C/q], its gradient and AdamW moments do not
-- apply (inference), and the logits block [T/(q*d), ceil(V/q)]: 500000 x 128 floats of wte alone are 244 MiB
return { mesh = { q = 2 }, memory_gib = 0.25,
  model = { layers = 1, hidden = 256, heads = 4, ffn = 1024, seq = 16, batch = 4, vocab = 1000000, positions = 16 } }
