-- gpt2-tiny on the Megatron-LM 1-D scheme: 4 ranks, each with 3 of the 12 heads and a quarter of the MLP
-- columns; the residual stream is whole on every rank (docs/MEGATRON.md)
return {
  name   = "gpt2-tiny-megatron",
  scheme = "megatron",
  mesh   = { p = 4 },
  model  = { layers = 2, hidden = 96, heads = 12, ffn = 384, seq = 16, batch = 4 },
  mode   = "train",
}
