-- expect: model.ffn = 190 is not divisible by mesh.p = 4: the megatron scheme splits the MLP columns across the p ranks; use ffn = 192, or p in {1,2,5,10,19,38,95,190}
return {
  scheme = "megatron",
  mesh  = { p = 4 },
  model = { layers = 1, hidden = 48, heads = 12, ffn = 190, seq = 8, batch = 4 },
}
