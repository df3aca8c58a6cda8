-- expect: pipeline.microbatches = 3 does not divide the 2 sequences of each rank
return {
  mode = "train",
  mesh = { q = 2, d = 2 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 8 },
  pipeline = { microbatches = 3 },
}
