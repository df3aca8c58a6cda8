-- expect: model.vocab_align is given without model.vocab: it pads the LM head's vocabulary blocks, which exist only with a vocabulary; add vocab = <V> or drop vocab_align
return { mesh = { q = 2 }, model = { layers = 1, hidden = 64, heads = 4, ffn = 256, seq = 16, batch = 4, vocab_align = 64 } }
