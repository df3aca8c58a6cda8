-- tests/inspect.sh: 16 ranks whose model fits every [q,q,d] with q*q*d = 16, so --summary
-- compares three possible meshes ([4,4,1], [2,2,4] here, [1,1,16]).
return {
  name  = "inspect16",
  mesh  = { q = 2, d = 4 },
  model = { layers = 2, hidden = 16, heads = 4, ffn = 32, seq = 2, batch = 16 },
}
