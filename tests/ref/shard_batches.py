#!/usr/bin/env python3
"""shard_batches.py DIR --seed S --batch B --seq T --vocab V - a token shard and its batches, for the --data checks.

Writes DIR/train.bin in llm.c's .bin format (a header of 256 int32: magic 20240520, version 1, the token count; then
uint16 tokens) holding 3*B*T + 1 + 5 ids drawn by numpy's default_rng(S) in [0, V), and for each of the 3 batches b
the ids the loader must hand out by llm.c's rule, DIR/tok_b.npy and DIR/tgt_b.npy ([B, T] int32: the ids at b*B*T and
the same shifted by one). The checks run the --data program against --tokens/--targets programs fed these files, so
the two paths are compared on ids worked out here, not by the loader under test.
"""
import argparse
import struct

import numpy as np

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("dir")
ap.add_argument("--seed", type=int, required=True)
ap.add_argument("--batch", type=int, required=True)
ap.add_argument("--seq", type=int, required=True)
ap.add_argument("--vocab", type=int, required=True)
a = ap.parse_args()
B, S = a.batch, a.seq
tok = np.random.default_rng(a.seed).integers(0, a.vocab, 3 * B * S + 1 + 5).astype(np.uint16)
with open(a.dir + "/train.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tok), *([0] * 253)))
    f.write(tok.astype("<u2").tobytes())
for b in range(3):
    o = b * B * S
    np.save("%s/tok_%d.npy" % (a.dir, b), tok[o:o + B * S].astype(np.int32).reshape(B, S))
    np.save("%s/tgt_%d.npy" % (a.dir, b), tok[o + 1:o + B * S + 1].astype(np.int32).reshape(B, S))
