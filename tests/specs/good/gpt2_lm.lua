-- The whole GPT-2 small (124M: embedding, ln_f, the tied LM head) on a [3,3,1] mesh: V = 50257 is padded to
-- 50259 (a multiple of q = 3); docs/MODEL.md.
local C = 768
return {
  mesh  = { q = 3, d = 1 },
  model = { layers = 12, hidden = C, heads = 12, ffn = 4 * C, seq = 1024, batch = 9, vocab = 50257, positions = 1024,
            tie = true },
}
