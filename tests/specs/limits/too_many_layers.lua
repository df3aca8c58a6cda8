-- expect: model.layers = 10000 on mesh [8,8,8]: each of the 64 rank programs would have 1080001 steps (69120064 in all), beyond tessgen's limits of 1000000 steps per program and 40000000 in all, which bound its time, its memory and what it writes; use layers = 5787 or fewer on this mesh
-- issue 12.2: 10000 layers was accepted and planned for hours; now refused up front, before any class is planned
return {
  mesh  = { q = 8, d = 8 },
  model = { layers = 10000, hidden = 512, heads = 8, ffn = 2048, seq = 16, batch = 64 },
}
