-- The emitter golden-text spec: small enough that every emitted file can be read in full.
return {
  name  = "golden",
  mesh  = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
}
