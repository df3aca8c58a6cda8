-- expect: optimizer.eps = 1e-46 is out of range: eps must be >= 1e-30 and a finite float32 (<= 3.4e38): a smaller eps is 0 or subnormal in float32 and a zero gradient gives 0/0; use eps = 1e-8
-- 1e-46 is 0 in float32: a weight whose gradient is zero got 0/0
return {
  mode = "train",
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
  optimizer = { eps = 1e-46 },
}
