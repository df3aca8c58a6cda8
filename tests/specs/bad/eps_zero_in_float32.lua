-- expect: model.eps = 1e-46 is out of range: the layernorm epsilon must be >= 1e-30 and < 1 (a smaller one is 0 or subnormal in float32, and a constant row gives 0/0); use eps = 1e-5
-- 1e-46 was accepted and printed as the float literal 1e-46f, which the C compiler refuses
return {
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2, eps = 1e-46 },
}
