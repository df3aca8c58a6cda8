-- expect: memory_gib = 0.0001: the largest arena, 433.0 KiB for the ranks of class (i=0, j=0), does not fit in 0.0001 GiB per rank; what fits: layers = 1 or fewer on this mesh (85.6 KiB)
-- issue 13.4: every rank's arena is checked against the memory of a rank; the message says what fits
return {
  mesh  = { q = 2, d = 2 },
  model = { layers = 8, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4 },
  memory_gib = 0.0001,
}
