-- expect: scheme = string "megatorn" is not a scheme: use scheme = "tesseract" (the [q,q,d] mesh, the default) or scheme = "megatron" (Megatron-LM 1-D tensor parallelism, mesh = { p = N })
return {
  scheme = "megatorn",
  mesh  = { q = 2 },
  model = { layers = 1, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 4 },
}
