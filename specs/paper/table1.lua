-- table1.lua - the strong-scaling model of the Tesseract paper's Table 1 (ICPP '22, section 4.1):
-- hidden 3072, 64 attention heads, 24 layers (the issue's reading of the setup; the paper does not
-- print the depth), MLP width 4 x hidden, on 64 ranks as [4,4,4]. The paper ran batch 12 on every
-- layout except [4,4,4] (batch 16, for batch % (q*d) == 0); tessgen needs batch % (q*d) == 0 on every
-- Tesseract layout, so all layouts use batch 16 here. The paper does not state the sequence length:
-- bench/paper.py tries 128 to 2048 (TESS_PAPER_SEQ); this file says 512.
local seq = 512
return {
  name = "paper-table1",
  mesh = { q = 4, d = 4 },
  model = { layers = 24, hidden = 3072, heads = 64, ffn = 4 * 3072, seq = seq, batch = 16 },
  mode = "train",
}
