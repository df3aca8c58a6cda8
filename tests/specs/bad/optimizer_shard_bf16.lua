-- expect: optimizer.shard = true is not built for dtype = "bf16"
return {
  mode = "train", dtype = "bf16",
  mesh = { q = 1, d = 2 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  optimizer = { shard = true },
}
