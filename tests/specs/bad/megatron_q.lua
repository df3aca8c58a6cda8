-- expect: mesh.q is not a key of the megatron scheme: it splits the model over p ranks in one dimension; write mesh = { p = N } (or drop scheme = "megatron" for the [q,q,d] mesh)
return {
  scheme = "megatron",
  mesh  = { q = 2, p = 4 },
  model = { layers = 1, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 4 },
}
