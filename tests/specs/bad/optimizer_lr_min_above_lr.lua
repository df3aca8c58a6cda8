-- expect: optimizer.lr_min = 0.01 is larger than optimizer.lr = 0.001
return {
  mode = "train",
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  optimizer = { lr = 1e-3, lr_min = 1e-2, decay_steps = 100 },
}
