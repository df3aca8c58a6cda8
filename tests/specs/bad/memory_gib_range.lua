-- expect: memory_gib = 0 is out of range: the memory of one rank in GiB, > 0 and at most 1048576
return {
  mesh  = { q = 2 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  memory_gib = 0,
}
