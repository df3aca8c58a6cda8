-- advise.lua - tests/advise.sh's model: small, and valid on every [q,q,d] with q*q*d = 16 except where
-- heads or batch forbid it, so the advisor has both timed and refused candidates.
return {
  name = "advise",
  mesh = { q = 2, d = 2 },
  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 16 },
}
