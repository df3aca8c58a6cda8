-- GPT-2 small (124M) shapes on a [2,2,2] mesh; Lua arithmetic is allowed.
local C = 768
return {
  mesh  = { q = 2, d = 2 },
  model = { layers = 12, hidden = C, heads = 12, ffn = 4 * C, seq = 1024, batch = 8 },
}
