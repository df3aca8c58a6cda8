-- expect: each of the 65536 rank programs would have
-- issue 12.2: 65536 ranks in 65536 classes (q = 256) passed 12 GB; now refused up front
return {
  mesh  = { q = 256, d = 1 },
  model = { layers = 1, hidden = 256, heads = 256, ffn = 256, seq = 1, batch = 256 },
}
