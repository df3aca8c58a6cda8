-- expect: optimizer.shard must be true or false, got
return {
  mode = "train",
  mesh = { q = 1, d = 2 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  optimizer = { shard = 1 },
}
