-- expect: mode = string "trian" is not a mode: use mode = "infer" (forward only), mode = "train"
return {
  mode = "trian",
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 },
}
