-- expect: model.hiden is not a known key; did you mean model.hidden?
return {
  mesh  = { q = 2 },
  model = { layers = 1, hiden = 64, heads = 4, ffn = 256, seq = 8, batch = 2 },
}
