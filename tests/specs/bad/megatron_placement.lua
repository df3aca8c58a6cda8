-- expect: mesh.placement is a key of the tesseract mesh only: the megatron scheme's p ranks form one group, numbered in order; drop mesh.placement
return {
  scheme = "megatron",
  mesh = { p = 2, placement = "col" },
  model = { layers = 2, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4 },
}
