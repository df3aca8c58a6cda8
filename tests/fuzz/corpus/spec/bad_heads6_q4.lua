-- expect: model.heads = 6 is not divisible by mesh.q = 4: heads are split across the q columns; use q in {1,2,3,6}
return {
  mesh  = { q = 4 },
  model = { layers = 1, hidden = 48, heads = 6, ffn = 192, seq = 8, batch = 4 },
}
