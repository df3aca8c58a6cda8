-- expect: epilogues must be true or false, got string "off"; use epilogues = false to run every bias, GeLU and gradient step as its own kernel
return {
  mesh  = { q = 1 },
  model = { layers = 1, hidden = 16, heads = 2, ffn = 16, seq = 4, batch = 1 },
  epilogues = "off",
}
