-- expect: optimizer.warmup = -5 is out of range: warmup is a number of steps
return {
  mode = "train",
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  optimizer = { warmup = -5 },
}
