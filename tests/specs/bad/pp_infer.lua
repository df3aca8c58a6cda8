-- expect: mesh.pp = 2 is given without mode = "train": pipeline stages are built for training steps only
return {
  mesh = { q = 1, pp = 2 },
  model = { layers = 2, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 4 },
}
