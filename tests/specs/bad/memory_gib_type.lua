-- expect: memory_gib must be a number of GiB such as 80 (an H100's memory), got string "80GB"
return {
  mesh  = { q = 2 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  memory_gib = "80GB",
}
