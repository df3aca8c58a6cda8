-- expect: name = "my model" is not a valid name
return {
  name  = "my model",
  mesh  = { q = 1 },
  model = { layers = 1, hidden = 8, heads = 1, ffn = 8, seq = 1, batch = 1 },
}
