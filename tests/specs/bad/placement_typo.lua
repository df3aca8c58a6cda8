-- expect: mesh.placement = "rows" is not a placement: it names the group whose ranks are numbered consecutively
return {
  mesh = { q = 2, d = 2, placement = "rows" },
  model = { layers = 2, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4 },
}
