-- gpt2-tiny-lm: a whole GPT-2 (token and position embeddings, 4 blocks, ln_f, the tied LM head) trained on
-- the byte-level corpus data/tiny (vocab 256, docs/TRAINING.md "Training from token shards") on mesh [2,2,1].
return {
  name  = "gpt2-tiny-lm",
  mode  = "train",
  mesh  = { q = 2, d = 1 },
  model = { layers = 4, hidden = 64, heads = 4, ffn = 256, seq = 64, batch = 8, eps = 1e-5,
            vocab = 256, positions = 64 },
  optimizer = { lr = 3e-3, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1,
                warmup = 10, decay_steps = 150, lr_min = 3e-4, clip = 1.0 },
}
