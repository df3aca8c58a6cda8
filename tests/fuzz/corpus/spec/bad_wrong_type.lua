-- expect: model.heads must be a positive integer, got string "12"
return {
  mesh  = { q = 2 },
  model = { layers = 1, hidden = 768, heads = "12", ffn = 3072, seq = 8, batch = 2 },
}
