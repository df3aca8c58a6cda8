-- gpt2-tiny: a small GPT-2 style stack on a [2,2,2] mesh (8 ranks), the README's demo.
-- Every key is documented in README.md ("The spec").
return {
  name  = "gpt2-tiny",
  mesh  = { q = 2, d = 2 },
  model = {
    layers = 2,     -- transformer blocks
    hidden = 64,    -- C
    heads  = 4,     -- head dim 16; heads % q == 0
    ffn    = 256,   -- F = 4C
    seq    = 16,    -- tokens per sequence
    batch  = 4,     -- sequences; batch % (q*d) == 0
    eps    = 1e-5,  -- layernorm epsilon
  },
  dtype = "fp32",
}
