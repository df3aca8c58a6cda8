#!/usr/bin/env python3
"""torch_bench.py - PyTorch on the same GPU and the same shapes as tessgen's benchmark (tests/gpu/bench.sh):
a stack of GPT-2 blocks exactly as tessgen computes them (pre-LN; QKV in Hugging Face's [C, 3C] layout; causal
softmax attention; GeLU, tanh form; no final ln_f), fp32 weights, timed as

  forward      y = blocks(x), no autograd
  train step   forward, loss = mean((y - target)^2), backward, one AdamW step (torch.optim.AdamW, fused)

in eager mode and under torch.compile (default mode), each with fp32 GEMMs and with TF32 tensor cores
(torch.backends.cuda.matmul.allow_tf32). Attention is F.scaled_dot_product_attention(is_causal=True), what a
PyTorch user would write. Times are CUDA-event medians over --reps runs after --warmup runs.

Before timing, --check runs the same stack in float64 on the CPU against tests/ref/tessref.py's forward at a
small shape (it must agree to 1e-10), so the two programs are known to compute the same function.

Writes one JSON object to --out (and stdout). Without torch, or without a CUDA device, it prints why, writes
{"skipped": "..."} and exits 0: the timing is then simply absent from the report.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))


def skip(out, why):
    print(f"torch_bench: skip: {why}")
    if out:
        with open(out, "w") as f:
            json.dump({"skipped": why}, f)
    return 0


def make_params(torch, L, C, F, dtype, device, gen):
    """Hugging Face GPT-2 names and [in, out] layouts; N(0, 0.02) matrices, small biases, gammas near 1."""
    p = {}
    for l in range(L):
        def mat(n, rows, cols):
            p[f"h.{l}.{n}"] = torch.randn(rows, cols, generator=gen, dtype=dtype) * 0.02
        def vec(n, size, base):
            p[f"h.{l}.{n}"] = base + torch.randn(size, generator=gen, dtype=dtype) * 0.02
        vec("ln_1.weight", C, 1.0); vec("ln_1.bias", C, 0.0)
        mat("attn.c_attn.weight", C, 3 * C); vec("attn.c_attn.bias", 3 * C, 0.0)
        mat("attn.c_proj.weight", C, C); vec("attn.c_proj.bias", C, 0.0)
        vec("ln_2.weight", C, 1.0); vec("ln_2.bias", C, 0.0)
        mat("mlp.c_fc.weight", C, F); vec("mlp.c_fc.bias", F, 0.0)
        mat("mlp.c_proj.weight", F, C); vec("mlp.c_proj.bias", C, 0.0)
    return {k: v.to(device) for k, v in p.items()}


def blocks(torch, x, p, L, H, eps):
    """x: [B, S, C] -> the last block's output, tessgen's function."""
    import torch.nn.functional as Fn
    B, S, C = x.shape
    D = C // H
    for l in range(L):
        w = lambda n: p[f"h.{l}.{n}"]  # noqa: E731
        h = Fn.layer_norm(x, (C,), w("ln_1.weight"), w("ln_1.bias"), eps)
        qkv = torch.addmm(w("attn.c_attn.bias"), h.reshape(B * S, C), w("attn.c_attn.weight")).view(B, S, 3, H, D)
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # [B, H, S, D]
        a = Fn.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B * S, C)
        x = x + torch.addmm(w("attn.c_proj.bias"), a, w("attn.c_proj.weight")).view(B, S, C)
        h = Fn.layer_norm(x, (C,), w("ln_2.weight"), w("ln_2.bias"), eps)
        u = torch.addmm(w("mlp.c_fc.bias"), h.reshape(B * S, C), w("mlp.c_fc.weight"))
        g = Fn.gelu(u, approximate="tanh")
        x = x + torch.addmm(w("mlp.c_proj.bias"), g, w("mlp.c_proj.weight")).view(B, S, C)
    return x


def check_against_tessref(torch):
    """float64, CPU: this file's blocks() against tessref.forward on tessref's own weights and input."""
    import numpy as np
    import tessref
    L, C, H, F, S, B, eps = 2, 48, 4, 96, 10, 2, 1e-5
    w = {n: t for n, t in tessref.make_weights(L, C, F, 5, True)}
    x = tessref.make_input(B, S, C, 5, True)
    ref = tessref.forward(x, w, L, H, eps, np.float64)
    p = {n: torch.from_numpy(np.asarray(t, dtype=np.float64)) for n, t in w.items()}
    got = blocks(torch, torch.from_numpy(np.asarray(x, dtype=np.float64)), p, L, H, eps).numpy()
    err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
    return err


def timed(torch, fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts), min(ts), max(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--modes", default="eager,compile", help="eager, compile, or both")
    ap.add_argument("--check-only", action="store_true", help="only the float64 check against tessref")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        return skip(a.out, f"torch is not installed ({e})")
    err = check_against_tessref(torch)
    print(f"torch_bench: blocks() vs tessref.forward, float64: rel_err={err:.3e} (must be below 1e-10)")
    if not err < 1e-10:
        print("torch_bench: the PyTorch stack does not compute tessgen's function; no timing", file=sys.stderr)
        return 1
    if a.check_only:
        return 0
    if not torch.cuda.is_available():
        return skip(a.out, "torch sees no CUDA device")
    L, C, H, F, S, B = a.layers, a.hidden, a.heads, a.ffn, a.seq, a.batch
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(1)
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "shape": {"layers": L, "hidden": C, "heads": H, "ffn": F, "seq": S, "batch": B},
           "check_rel_err": err, "runs": {}}
    p0 = make_params(torch, L, C, F, torch.float32, dev, gen)
    x = torch.randn(B, S, C, generator=gen).to(dev)
    target = torch.randn(B, S, C, generator=gen).to(dev)
    for mode in [m for m in ("eager", "compile") if m in a.modes.split(",")]:
        for prec in ("fp32", "tf32"):
            torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
            torch.backends.cudnn.allow_tf32 = prec == "tf32"
            torch._dynamo.reset()
            key = f"{mode}_{prec}"
            r = {}
            t0 = time.perf_counter()
            fwd = (lambda xx, pp: blocks(torch, xx, pp, L, H, a.eps))
            if mode == "compile":
                fwd = torch.compile(fwd)
            with torch.no_grad():
                r["forward_ms"], r["forward_min_ms"], r["forward_max_ms"] = timed(
                    torch, lambda: fwd(x, p0), a.warmup, a.reps)
            params = {k: v.clone().requires_grad_(True) for k, v in p0.items()}
            opt = torch.optim.AdamW(list(params.values()), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                    weight_decay=0.01, fused=True)

            def step():
                opt.zero_grad(set_to_none=True)
                y = fwd(x, params)
                loss = ((y - target) ** 2).mean()
                loss.backward()
                opt.step()

            r["step_ms"], r["step_min_ms"], r["step_max_ms"] = timed(torch, step, a.warmup, a.reps)
            r["wall_s_incl_compile"] = time.perf_counter() - t0
            res["runs"][key] = r
            print(f"torch_bench: {key}: forward {r['forward_ms']:.3f} ms, train step {r['step_ms']:.3f} ms "
                  f"(medians of {a.reps}; {r['wall_s_incl_compile']:.0f} s with warm-up and compilation)", flush=True)
            del params, opt
            torch.cuda.empty_cache()
    s = json.dumps(res, indent=1)
    print(s)
    if a.out:
        with open(a.out, "w") as f:
            f.write(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
