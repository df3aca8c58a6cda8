-- expect: model.heads = 12 is not divisible by mesh.p = 5: the megatron scheme splits the heads across the p ranks; use p in {1,2,3,4,6,12}
return {
  scheme = "megatron",
  mesh  = { p = 5 },
  model = { layers = 1, hidden = 48, heads = 12, ffn = 200, seq = 8, batch = 4 },
}
