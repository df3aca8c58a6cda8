-- expect: mesh.p is a key of the megatron scheme only: the tesseract mesh is [q,q,d] with p = q*q*d ranks; write mesh = { q = ..., d = ... }, or add scheme = "megatron" for a 1-D mesh of p ranks
return {
  mesh  = { q = 2, p = 4 },
  model = { layers = 1, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 4 },
}
