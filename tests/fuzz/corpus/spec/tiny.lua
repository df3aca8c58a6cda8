-- A tiny GPT-2 block stack on a 2x2x2 mesh (8 ranks); every field set.
return {
  name  = "gpt2-tiny",
  mesh  = { q = 2, d = 2 },
  model = { layers = 2, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4, eps = 1e-5 },
  dtype = "fp32",
}
