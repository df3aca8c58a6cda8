-- expect: optimizer.weight_decy is not a known key; did you mean optimizer.weight_decay?
return {
  mode = "train",
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  optimizer = { lr = 1e-3, weight_decy = 0.1 },
}
