-- expect: recompute = 3 is out of range: it counts the layers whose activations the backward recomputes, 0 to model.layers = 2; use recompute = "full" for all of them
return {
  mesh  = { q = 1 },
  mode  = "train",
  model = { layers = 2, hidden = 16, heads = 2, ffn = 16, seq = 4, batch = 1 },
  recompute = 3,
}
