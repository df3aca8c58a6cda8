-- expect: pipeline is given without mode = "train"
return {
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 4 },
  pipeline = { microbatches = 2 },
}
