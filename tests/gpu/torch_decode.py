#!/usr/bin/env python3
"""torch_decode.py - PyTorch's greedy KV-cache decode of the whole GPT-2 on the same GPU and shapes as tessgen's
mode = "generate" program (tests/gpu/bench.sh part decode; docs/GENERATE.md), the peer a PyTorch user would write:

  prefill  the prompts [B, PL] through the model (scaled_dot_product_attention, causal), K and V of every layer into
           a static cache [L, B, H, context, D]
  decode   one token a sequence: embedding + wpe[pos], each layer's q, k, v, k and v into the cache row pos, attention
           over cache rows 0..pos (a mask over the whole static cache, so the shapes never change), the tied head,
           argmax (the lowest id of a tie)

in eager mode and under torch.compile(mode="reduce-overhead") (CUDA graphs: the static-cache recipe of
gpt-fast and of transformers' generate with a static cache), in each --precs of fp32 (TF32 off) and bf16 (the
weights and the cache in bf16, what a bf16 serving stack keeps). Times: the median decode step (CUDA events, one
step a measurement, --steps steps after the prefill and 3 warm-up steps); tokens/s = B / step.

Before timing, the float64 check runs decode() on the CPU against tests/ref/tessref.py generate (the whole forward on
the growing sequence, no cache) on a small model: the greedy ids must be equal token for token and the logits within
1e-10, so the program timed is known to compute tessgen's function. Writes one JSON object to --out: "runs" keyed
"{mode}_{prec}", each with step_ms (median), min, max and tokens_s; without torch or a CUDA device it writes
{"skipped": "..."} and exits 0.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
sys.path.insert(0, HERE)
from torch_bench import skip  # noqa: E402  (the same skip record as torch_bench.py's)


def layer(torch, x, p, l, H, eps, ck, cv, pos, mask):
    """x [B, S, C] at positions pos..pos+S-1 (pos a 0-d tensor); K, V written into ck, cv [B, H, N, D] there;
    attention of each row over the cache rows its mask [S, N] keeps."""
    import torch.nn.functional as Fn
    B, S, C = x.shape
    D = C // H
    w = lambda n: p[f"h.{l}.{n}"]  # noqa: E731
    h = Fn.layer_norm(x, (C,), w("ln_1.weight"), w("ln_1.bias"), eps)
    qkv = (h.reshape(B * S, C) @ w("attn.c_attn.weight") + w("attn.c_attn.bias")).view(B, S, 3, H, D)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # [B, H, S, D]
    idx = pos + torch.arange(S, device=x.device)
    ck.index_copy_(2, idx, k)
    cv.index_copy_(2, idx, v)
    a = Fn.scaled_dot_product_attention(q, ck, cv, attn_mask=mask).transpose(1, 2).reshape(B * S, C)
    x = x + (a @ w("attn.c_proj.weight") + w("attn.c_proj.bias")).view(B, S, C)
    h = Fn.layer_norm(x, (C,), w("ln_2.weight"), w("ln_2.bias"), eps)
    g = Fn.gelu(h.reshape(B * S, C) @ w("mlp.c_fc.weight") + w("mlp.c_fc.bias"), approximate="tanh")
    return x + (g @ w("mlp.c_proj.weight") + w("mlp.c_proj.bias")).view(B, S, C)


def step(torch, tok, pos, p, L, H, eps, ck, cv):
    """tok [B, S] at positions pos.. (0-d tensor) -> the last row's logits [B, V]; the caches ck, cv [L, B, H, N, D]
    written. The mask keeps cache row n for query row s when n <= pos + s."""
    import torch.nn.functional as Fn
    B, S = tok.shape
    N = ck.shape[3]
    idx = pos + torch.arange(S, device=tok.device)
    x = Fn.embedding(tok, p["wte.weight"]) + p["wpe.weight"][idx]
    mask = torch.arange(N, device=tok.device)[None, :] <= idx[:, None]
    for l in range(L):
        x = layer(torch, x, p, l, H, eps, ck[l], cv[l], pos, mask)
    x = Fn.layer_norm(x[:, -1], (x.shape[-1],), p["ln_f.weight"], p["ln_f.bias"], eps)
    return x @ p["wte.weight"].t()


def generate(torch, prompts, new, p, L, H, eps, context, dtype, device, decode=None):
    """Greedy: prompts [B, PL] (one length) -> (ids [B, PL + new], logits [B, new, V]); decode: the step function of
    one token (step itself, or its compiled form)."""
    B, PL = prompts.shape
    C = p["wte.weight"].shape[1]
    ck = torch.zeros(L, B, H, context, C // H, dtype=dtype, device=device)
    cv = torch.zeros_like(ck)
    dec = decode or (lambda t, q: step(torch, t, q, p, L, H, eps, ck, cv))
    lg = step(torch, prompts, torch.tensor(0, device=device), p, L, H, eps, ck, cv)
    out, logs = [prompts], []
    for m in range(new):
        logs.append(lg)
        nxt = torch.argmax(lg, dim=-1, keepdim=True)  # the first maximum: the lowest id of a tie
        out.append(nxt)
        if m + 1 < new:
            lg = dec(nxt, torch.tensor(PL + m, device=device))
    return torch.cat(out, dim=1), torch.stack(logs, dim=1)


def check_against_tessref(torch):
    """float64, CPU: generate() against tessref's generate (the whole forward on the growing sequence) -> (ids equal,
    max |logit difference|)."""
    import numpy as np
    import tessref
    L, C, H, F, V, P, B, PL, new, eps = 2, 48, 4, 96, 37, 24, 2, 5, 6, 1e-5
    w = tessref.to_f64(dict(tessref.make_lm_weights(L, C, F, V, P, 5)))
    rng = np.random.default_rng(3)
    prompts = rng.integers(0, V, size=(B, PL))
    ref_ids, ref_lg = [], []
    for b in range(B):
        seq, lg = [int(t) for t in prompts[b]], []
        for _ in range(new):
            logits, _, _ = tessref.lm_forward(np.array([seq], np.int64), None, w, L, H, eps)
            lg.append(logits[0, -1])
            seq.append(int(np.argmax(logits[0, -1])))
        ref_ids.append(seq)
        ref_lg.append(lg)
    p = {n: torch.from_numpy(np.asarray(t, dtype=np.float64)) for n, t in w.items()}
    ids, lg = generate(torch, torch.from_numpy(prompts), new, p, L, H, eps, PL + new, torch.float64, "cpu")
    return ids.numpy().tolist() == ref_ids, float(np.max(np.abs(lg.numpy() - np.array(ref_lg))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for n in ("layers", "hidden", "heads", "ffn", "vocab", "positions", "batch", "prompt", "context"):
        ap.add_argument("--" + n, type=int, required=True)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--precs", default="fp32,bf16")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        return skip(a.out, f"torch not importable ({e})", "torch_decode")
    same, worst = check_against_tessref(torch)
    print(f"torch_decode: float64 check against tessref generate: ids equal {same}, max logit difference {worst:.3g}")
    if not same or worst > 1e-10:
        print("torch_decode: the decode does not compute tessgen's function")
        return 1
    if not torch.cuda.is_available():
        return skip(a.out, "no CUDA device", "torch_decode")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda"
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "runs": {}}
    gen = torch.Generator().manual_seed(1)
    from torch_bench import make_params
    base = make_params(torch, a.layers, a.hidden, a.ffn, torch.float32, "cpu", gen, a.vocab, a.positions)
    prompts = torch.randint(0, a.vocab, (a.batch, a.prompt), generator=gen).to(dev)
    for prec in a.precs.split(","):
        dtype = torch.float32 if prec == "fp32" else torch.bfloat16
        p = {k: v.to(dev, dtype) for k, v in base.items()}
        for mode in a.modes.split(","):
            L, H = a.layers, a.heads
            ck = torch.zeros(L, a.batch, H, a.context, a.hidden // H, dtype=dtype, device=dev)
            cv = torch.zeros_like(ck)
            fn = lambda t, q: step(torch, t, q, p, L, H, a.eps, ck, cv)  # noqa: E731
            if mode == "compile":
                fn = torch.compile(fn, mode="reduce-overhead", fullgraph=True)
            with torch.no_grad():
                step(torch, prompts, torch.tensor(0, device=dev), p, L, H, a.eps, ck, cv)  # the prefill
                tok = prompts[:, -1:].contiguous()
                times = []
                for m in range(a.steps + 3):
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    lg = fn(tok, torch.tensor(a.prompt + m, device=dev))
                    tok = torch.argmax(lg, dim=-1, keepdim=True)
                    e1.record()
                    torch.cuda.synchronize()
                    if m >= 3:
                        times.append(e0.elapsed_time(e1))
            med = statistics.median(times)
            res["runs"][f"{mode}_{prec}"] = {"step_ms": med, "min_ms": min(times), "max_ms": max(times),
                                             "tokens_s": a.batch / med * 1e3}
            print(f"torch_decode: {mode} {prec}: decode step {med:.3f} ms (min {min(times):.3f}, max "
                  f"{max(times):.3f}), {a.batch / med * 1e3:.0f} tokens/s")
            if a.out:
                with open(a.out, "w") as f:
                    json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
