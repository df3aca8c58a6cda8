-- expect: attempt to call a nil value (global 'require')
local os = require("os")
return {
  mesh  = { q = 1 },
  model = { layers = 1, hidden = 8, heads = 1, ffn = 8, seq = 1, batch = 1 },
}
