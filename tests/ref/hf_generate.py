#!/usr/bin/env python3
"""hf_generate.py -- greedy generation by Hugging Face transformers itself, for tessgen's run --generate to equal.

    PYTHON hf_generate.py --dir DIR --prompt-tokens P.npy --max-new N --out T.npy --logits-out L.npy [--batched]

PYTHON is an interpreter with transformers and torch (TESS_HF_PYTHON, as tests/ref/hf_load.py).  Loads DIR with
GPT2LMHeadModel.from_pretrained in float32, eval mode; any missing, unexpected or mismatched key is a failure
(exit 1: transformers would initialise it at random).  P is tessgen's prompt file (int32 [n, L], each row a
prompt left-aligned, then -1 pads; docs/GENERATE.md).  Each prompt is run alone through
model.generate(do_sample=False, max_new_tokens=N) with its own KV cache (no padding, so no attention mask or
position question arises), no end-of-text id, and the raw logits of every step (output_logits).  --batched: all
prompts in one model.generate call instead, left-padded (pad id 0) with an attention mask of zeros over the pads, as
users batch ragged prompts in transformers (its GPT-2 takes the positions from the mask's running sum).  Writes what
tessgen's run writes: T int32 [n, L + N] (prompt, new ids, -1 pads) and L float64 [n, N, V], so that
`tessref.py compare-generate` compares the two token for token and logit for logit.
"""
import argparse
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--prompt-tokens", required=True)
    ap.add_argument("--max-new", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--logits-out", required=True)
    ap.add_argument("--batched", action="store_true", help="one left-padded generate call for all prompts")
    a = ap.parse_args(argv)

    import torch
    import transformers
    from transformers import GPT2LMHeadModel

    print(f"hf_generate: transformers {transformers.__version__}, torch {torch.__version__}")
    model, info = GPT2LMHeadModel.from_pretrained(a.dir, output_loading_info=True, torch_dtype=torch.float32)
    bad = [k for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs")
           for k in (info.get(kind) or [])]
    if bad:
        print(f"hf_generate: FAIL: the directory's keys do not match GPT2LMHeadModel's: {bad}")
        return 1
    model.eval()
    # tessgen's run goes without --eos: the config's eos_token_id (tessref hf-dir writes vocab - 1) must not stop HF
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    prompts = np.load(a.prompt_tokens)
    if prompts.ndim != 2 or prompts.dtype != np.int32:
        print(f"hf_generate: {a.prompt_tokens}: expected int32 [n, L], got {prompts.dtype} {list(prompts.shape)}")
        return 1
    n, L = prompts.shape
    V = model.config.vocab_size
    toks = np.full((n, L + a.max_new), -1, np.int32)
    logits = np.zeros((n, a.max_new, V), np.float64)
    if a.batched:
        lens = [int((r >= 0).sum()) for r in prompts]
        ids = torch.zeros((n, L), dtype=torch.int64)
        mask = torch.zeros((n, L), dtype=torch.int64)
        for b in range(n):
            ids[b, L - lens[b]:] = torch.from_numpy(prompts[b][: lens[b]].astype(np.int64))
            mask[b, L - lens[b]:] = 1
        with torch.no_grad():
            out = model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=a.max_new,
                                 output_logits=True, return_dict_in_generate=True)
        for b in range(n):
            seq = out.sequences[b].numpy()
            toks[b, : lens[b]] = prompts[b][: lens[b]]
            toks[b, lens[b]: lens[b] + a.max_new] = seq[L:]
            for t, lg in enumerate(out.logits):
                logits[b, t] = lg[b].double().numpy()
        np.save(a.out, toks)
        np.save(a.logits_out, logits)
        print(f"hf_generate: {n} prompts in one left-padded call, {a.max_new} new tokens each: ids {list(toks.shape)}")
        return 0
    for b in range(n):
        p = prompts[b][prompts[b] >= 0].astype(np.int64)
        ids = torch.from_numpy(p)[None, :]
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=a.max_new, output_logits=True,
                                 return_dict_in_generate=True)
        seq = out.sequences[0].numpy()
        toks[b, :len(seq)] = seq
        for t, lg in enumerate(out.logits):
            logits[b, t] = lg[0].double().numpy()
    np.save(a.out, toks)
    np.save(a.logits_out, logits)
    print(f"hf_generate: {n} prompts, {a.max_new} new tokens each: ids {list(toks.shape)} written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
