-- expect: attempt to index a nil value (global 'io')
local f = io.open("/tmp/tessgen_sandbox_io_was_escaped", "w")
return {
  mesh  = { q = 1 },
  model = { layers = 1, hidden = 8, heads = 1, ffn = 8, seq = 1, batch = 1 },
}
