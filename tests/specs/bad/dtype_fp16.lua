-- expect: dtype = "fp16" is not supported: use "fp32" or "bf16"
return {
  mesh  = { q = 1 },
  model = { layers = 1, hidden = 8, heads = 1, ffn = 8, seq = 1, batch = 1 },
  dtype = "fp16",
}
