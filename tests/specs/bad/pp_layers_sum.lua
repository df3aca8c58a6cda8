-- expect: pipeline.layers sums to 3, not model.layers = 4: the stages hold contiguous runs of all the layers; use e.g. layers = { 2, 2 }
return {
  mode = "train",
  mesh = { q = 1, pp = 2 },
  model = { layers = 4, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 4 },
  pipeline = { microbatches = 2, layers = { 2, 1 } },
}
