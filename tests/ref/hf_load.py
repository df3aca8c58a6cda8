#!/usr/bin/env python3
"""hf_load.py -- load a directory with Hugging Face transformers and run it.

    PYTHON hf_load.py --dir DIR --tokens T.npy --out LOGITS.npy

PYTHON is an interpreter with transformers and torch (tests/hf_io.sh uses
TESS_HF_PYTHON).  Loads DIR with GPT2LMHeadModel.from_pretrained(DIR,
output_loading_info=True) in float32, eval mode (no dropout), and prints the
missing, unexpected and mismatched keys: any of them is a failure (exit 1),
since a key transformers does not find is one it initialises at random.  Then
runs the token batch T (integer ids [B, S]) and writes the logits [B, S, V]
as float64 .npy.  Prints the versions of transformers and torch it ran with.
"""
import argparse
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    import torch
    import transformers
    from transformers import GPT2LMHeadModel

    print(f"hf_load: transformers {transformers.__version__}, torch {torch.__version__}")
    model, info = GPT2LMHeadModel.from_pretrained(a.dir, output_loading_info=True, torch_dtype=torch.float32)
    bad = False
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        keys = list(info.get(kind) or [])
        print(f"hf_load: {kind}: {keys if keys else 'none'}")
        bad = bad or bool(keys)
    model.eval()
    tokens = np.load(a.tokens)
    if tokens.ndim != 2 or tokens.dtype.kind not in "iu":
        print(f"hf_load: {a.tokens}: expected integer token ids [B, S], got {tokens.dtype} {list(tokens.shape)}")
        return 1
    with torch.no_grad():
        logits = model(torch.from_numpy(tokens.astype(np.int64))).logits
    out = logits.double().numpy()
    np.save(a.out, out)
    print(f"hf_load: logits {list(out.shape)} written to {a.out}")
    if bad:
        print("hf_load: FAIL: the directory's keys do not match GPT2LMHeadModel's")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
