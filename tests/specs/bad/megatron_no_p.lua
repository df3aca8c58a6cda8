-- expect: mesh.p is missing (the ranks of the megatron scheme's 1-D mesh); add p = <n> to mesh
return {
  scheme = "megatron",
  mesh  = { },
  model = { layers = 1, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 4 },
}
