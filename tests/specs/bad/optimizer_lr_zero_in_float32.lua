-- expect: optimizer.lr = 1e-50 is out of range: the learning rate must be >= 1e-10 and a finite float32 (<= 3.4e38): below 1e-10 AdamW's step, about lr per weight, is under the rounding of float32 weights and training does nothing; use lr = 1e-3
-- 1e-50 is 0 in float32: the run trained nothing, silently
return {
  mode = "train",
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  optimizer = { lr = 1e-50 },
}
