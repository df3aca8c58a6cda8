-- Only the required fields: name defaults to the file stem ("minimal"), d to 1,
-- eps to 1e-5, dtype to "fp32".
return {
  mesh  = { q = 2 },
  model = { layers = 1, hidden = 32, heads = 2, ffn = 128, seq = 8, batch = 2 },
}
