"""mkckpt.py - writes the seeds of the checkpoint harness (tests/fuzz/fuzz_ckpt.c) into
tests/fuzz/corpus/ckpt: checkpoints of its tiny model (h.0.ln_1.weight [4], h.0.attn.c_attn.weight
[4, 12], each with adam_m. and adam_v.), as tessgen's writer lays them out (runtime/tr_ckpt.c): F32
tensors, string metadata, the FNV-1a 64 checksum over the tensors in model order. Variants: accepted
as they are, one trained on --data with its position, one of another dtype and mesh, and one of an
earlier tessgen without "data" and "dtype". Standard library only; run from the repository root."""
import json
import os
import struct

PARAMS = [("h.0.ln_1.weight", [4]), ("h.0.attn.c_attn.weight", [4, 12])]


def fnv(h, b):
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def checkpoint(extra, drop=()):
    tensors, h = [], 0xCBF29CE484222325
    for i, (name, shape) in enumerate(PARAMS):
        n = shape[0] * (shape[1] if len(shape) > 1 else 1)
        for k, pre in enumerate(("", "adam_m.", "adam_v.")):
            vals = [0.25 * (i + 1) * ((e % 7) - 3) if k < 2 else 0.01 * (e + 1) for e in range(n)]
            raw = struct.pack("<%df" % n, *vals)
            h = fnv(h, raw)
            tensors.append((pre + name, shape, raw))
    meta = {"model.layers": "1", "model.hidden": "4", "model.heads": "1", "model.ffn": "16", "model.seq": "2",
            "model.batch": "1", "model.eps": "1.0000000000000001e-05", "optimizer.lr": "0.001",
            "optimizer.beta1": "0.90000000000000002", "optimizer.beta2": "0.999", "optimizer.eps": "1e-08",
            "optimizer.weight_decay": "0", "optimizer.warmup": "0", "optimizer.decay_steps": "0",
            "optimizer.lr_min": "0", "optimizer.clip": "0", "mesh": "[1,1,1]", "mesh.strides": "1,1,1",
            "dtype": "fp32", "fingerprint": "0123456789abcdef", "name": "fuzz_ckpt", "tessgen": "0",
            "format": "tessgen-checkpoint-1", "step": "3", "seed": "1", "checksum": "fnv1a64:%016x" % h,
            "data_pos": "", "data": "synthetic"}
    meta.update(extra)
    for k in drop:
        del meta[k]
    header, off, body = {"__metadata__": meta}, 0, b""
    for name, shape, raw in tensors:
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        body += raw
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    return struct.pack("<Q", len(hj)) + hj + body


SEEDS = {
    "plain.st": checkpoint({}),
    "data.st": checkpoint({"data": "--data train.bin",
                           "data_pos": "data v1 shards=1 fp=0123456789abcdef shard=0 offset=96 epoch=0 batches=2"}),
    "bf16_mesh.st": checkpoint({"dtype": "bf16", "mesh": "[2,2,1]", "mesh.strides": "2,1,4"}),
    "earlier.st": checkpoint({}, drop=("data", "dtype")),
}
os.makedirs("tests/fuzz/corpus/ckpt", exist_ok=True)
for name, raw in SEEDS.items():
    with open("tests/fuzz/corpus/ckpt/" + name, "wb") as f:
        f.write(raw)
