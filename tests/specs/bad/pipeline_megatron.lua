-- expect: pipeline.microbatches = 2 is not supported with scheme = "megatron"
return {
  scheme = "megatron",
  mode = "train",
  mesh = { p = 2 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 4 },
  pipeline = { microbatches = 2 },
}
