#!/usr/bin/env python3
"""gen_hf.py -- part "gencpu" of `ninja bench` (bench/gen_cpu.sh): Hugging Face `generate`'s greedy decode timed.

    PYTHON gen_hf.py --dir DIR --prompt-tokens P.npy --max-new N --reps R --threads T --out IDS.npy

Loads DIR (a save_pretrained directory) with GPT2LMHeadModel in float32, eval mode, torch.set_num_threads(T), and
runs the batch P (int32 [B, L], every prompt of length L: no padding) through generate(do_sample=False,
use_cache=True) with no end-of-text id, twice a repetition: max_new_tokens=1 (the prefill and the first id) and
max_new_tokens=N. The decode step is (t_N - t_1) / (N - 1), the same count as tessgen's decode steps (its first id
comes from the prefill). One warm-up repetition, then the median of R. Prints key=value lines (hf_prefill_seconds,
hf_decode_seconds, versions) and writes the ids [B, L + N] as int32, for the caller to compare with tessgen's.
"""
import argparse
import statistics
import sys
import time

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--prompt-tokens", required=True)
    ap.add_argument("--max-new", type=int, required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    import torch
    import transformers
    from transformers import GPT2LMHeadModel

    torch.set_num_threads(a.threads)
    model = GPT2LMHeadModel.from_pretrained(a.dir, torch_dtype=torch.float32)
    model.eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    p = np.load(a.prompt_tokens)
    if p.ndim != 2 or (p < 0).any():
        print(f"gen_hf: {a.prompt_tokens}: expected [B, L] prompts of one length")
        return 1
    ids = torch.from_numpy(p.astype(np.int64))
    mask = torch.ones_like(ids)

    def run(n):
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, attention_mask=mask, do_sample=False, use_cache=True, max_new_tokens=n)
        return time.perf_counter() - t0, out

    run(a.max_new)  # warm-up
    t1, tn = [], []
    for _ in range(a.reps):
        t1.append(run(1)[0])
        dt, out = run(a.max_new)
        tn.append(dt)
    np.save(a.out, out.numpy().astype(np.int32))
    m1, mn = statistics.median(t1), statistics.median(tn)
    print(f"hf_versions=transformers {transformers.__version__}, torch {torch.__version__}")
    print(f"hf_prefill_seconds={m1:.9f}")
    print(f"hf_decode_seconds={(mn - m1) / (a.max_new - 1):.9f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
