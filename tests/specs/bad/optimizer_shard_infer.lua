-- expect: optimizer.shard = true is given without mode = "train"
return {
  mesh = { q = 1, d = 2 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  optimizer = { shard = true },
}
