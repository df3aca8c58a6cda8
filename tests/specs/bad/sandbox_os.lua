-- expect: attempt to index a nil value (global 'os')
os.execute("touch /tmp/tessgen_sandbox_os_was_escaped")
return {
  mesh  = { q = 1 },
  model = { layers = 1, hidden = 8, heads = 1, ffn = 8, seq = 1, batch = 1 },
}
