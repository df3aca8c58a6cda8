#!/usr/bin/env python3
"""bench/llmc_files.py - the inputs of llm.c's CPU trainer (train_gpt2.c) for bench/lm_cpu.sh, from the same
random model and batch tessgen and PyTorch train.

llm.c's train_gpt2.c reads its model from "gpt2_124M.bin" and its batches from token shards, which its Python
script would download and convert; here nothing is downloaded. This writes, into --dir:
  gpt2_124M.bin   llm.c's checkpoint (train_gpt2.c, gpt2_build_from_checkpoint): 256 int32 of header (magic
                  20240326, version 3, max_seq_len, vocab_size, num_layers, num_heads, channels,
                  padded_vocab_size), then every parameter in float32 in llm.c's order (wte [Vp, C] with zero pad
                  rows, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb,
                  lnfw, lnfb; each over all layers), the matrices as [out, in] (the Hugging Face Conv1D weights
                  of --weights are [in, out]: transposed)
  dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin
                  llm.c's token shards (llmc/dataloader.h: 256 int32 of header, magic 20240520, version 1, the
                  token count; then uint16 ids): B*T+1 tokens, exactly one batch, so every step trains on it
(the checkpoint only with --checkpoint) and, beside them, the batch as tessgen and PyTorch read it: tok.npy = stream[:-1] and tgt.npy = stream[1:] as
int32 [B, T] (llm.c's targets are its inputs shifted by one), so all three train the same model on the same
batch and their first losses agree.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import tessref  # noqa: E402  (read_safetensors)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", required=True, help="tessref.py lm-weights safetensors (Hugging Face names)")
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--padded-vocab", type=int, default=50304, help="llm.c pads GPT-2's 50257 to 50304")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--checkpoint", action="store_true", help="also write llm.c's checkpoint and shards")
    a = ap.parse_args()
    w = {k: np.asarray(v, dtype=np.float32) for k, v in tessref.read_safetensors(a.weights).items()}
    wte, wpe = w["wte.weight"], w["wpe.weight"]
    V, C = wte.shape
    maxT, L, Vp = wpe.shape[0], a.layers, a.padded_vocab
    if Vp < V:
        sys.exit(f"llmc_files.py: --padded-vocab {Vp} is below the vocabulary {V}")
    n = a.batch * a.seq
    stream = np.random.default_rng(a.seed).integers(0, V, size=n + 1)
    if V > 65536:
        sys.exit("llmc_files.py: llm.c's shards hold uint16 ids: vocabulary above 65536")
    os.makedirs(a.dir, exist_ok=True)
    if a.checkpoint:
        wte_p = np.zeros((Vp, C), np.float32)
        wte_p[:V] = wte

        def per_layer(name, transpose=False):
            return np.stack([w[f"h.{l}.{name}"].T if transpose else w[f"h.{l}.{name}"] for l in range(L)])

        tensors = [wte_p, wpe, per_layer("ln_1.weight"), per_layer("ln_1.bias"),
                   per_layer("attn.c_attn.weight", True), per_layer("attn.c_attn.bias"),
                   per_layer("attn.c_proj.weight", True), per_layer("attn.c_proj.bias"),
                   per_layer("ln_2.weight"), per_layer("ln_2.bias"),
                   per_layer("mlp.c_fc.weight", True), per_layer("mlp.c_fc.bias"),
                   per_layer("mlp.c_proj.weight", True), per_layer("mlp.c_proj.bias"),
                   w["ln_f.weight"], w["ln_f.bias"]]
        header = np.zeros(256, np.int32)
        header[:8] = [20240326, 3, maxT, V, L, a.heads, C, Vp]
        with open(os.path.join(a.dir, "gpt2_124M.bin"), "wb") as f:
            f.write(header.tobytes())
            for t in tensors:
                f.write(np.ascontiguousarray(t, dtype=np.float32).tobytes())
        th = np.zeros(256, np.int32)
        th[:3] = [20240520, 1, n + 1]
        os.makedirs(os.path.join(a.dir, "dev/data/tinyshakespeare"), exist_ok=True)
        for part in ("train", "val"):
            with open(os.path.join(a.dir, f"dev/data/tinyshakespeare/tiny_shakespeare_{part}.bin"), "wb") as f:
                f.write(th.tobytes())
                f.write(stream.astype(np.uint16).tobytes())
    np.save(os.path.join(a.dir, "tok.npy"), stream[:-1].reshape(a.batch, a.seq).astype(np.int32))
    np.save(os.path.join(a.dir, "tgt.npy"), stream[1:].reshape(a.batch, a.seq).astype(np.int32))
    return 0


if __name__ == "__main__":
    sys.exit(main())
