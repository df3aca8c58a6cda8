-- expect: optimizer.beta2 = 1 is out of range: beta2 must be >= 0 and < 1; use beta2 = 0.999
return {
  mode = "train",
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  optimizer = { beta2 = 1 },
}
