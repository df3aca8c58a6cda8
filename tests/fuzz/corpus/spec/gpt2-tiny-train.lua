-- gpt2-tiny-train: the demo model as a training program (forward, backward, AdamW) on [2,2,2].
local tiny = { layers = 2, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4, eps = 1e-5 }
return {
  name  = "gpt2-tiny-train",
  mode  = "train",
  mesh  = { q = 2, d = 2 },
  model = tiny,
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },
}
