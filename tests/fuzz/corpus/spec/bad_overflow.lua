-- expect: the per-rank attention scores (batch/(q*d))*(heads/q)*seq*seq = 4294967296 elements does not fit in a 32-bit int
return {
  mesh  = { q = 1 },
  model = { layers = 1, hidden = 64, heads = 4, ffn = 256, seq = 32768, batch = 1 },
}
