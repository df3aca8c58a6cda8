-- expect: recompute is given without mode = "train": it trades the backward's flops for the activations a training step keeps; add mode = "train" or drop recompute
return {
  mesh  = { q = 1 },
  model = { layers = 2, hidden = 16, heads = 2, ffn = 16, seq = 4, batch = 1 },
  recompute = "full",
}
