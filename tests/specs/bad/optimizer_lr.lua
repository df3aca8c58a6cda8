-- expect: optimizer.lr = -0.001 is out of range: the learning rate must be >= 1e-10 and a finite float32
return {
  mode = "train",
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  optimizer = { lr = -1e-3 },
}
