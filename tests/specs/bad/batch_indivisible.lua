-- expect: model.batch = 6 is not divisible by q*d = 8 (mesh.q = 4, mesh.d = 2): each of the q*d row blocks holds whole sequences; use batch = 8, 16, ...
return {
  mesh  = { q = 4, d = 2 },
  model = { layers = 1, hidden = 64, heads = 4, ffn = 256, seq = 8, batch = 6 },
}
