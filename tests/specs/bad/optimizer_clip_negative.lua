-- expect: optimizer.clip = -1 is out of range: clip is the largest global gradient norm
return {
  mode = "train",
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  optimizer = { clip = -1.0 },
}
