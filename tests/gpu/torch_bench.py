#!/usr/bin/env python3
"""torch_bench.py - PyTorch on the same GPU and the same shapes as tessgen's benchmark (tests/gpu/bench.sh), in
two models computed exactly as tessgen computes them:

  blocks   a stack of GPT-2 blocks (pre-LN; QKV in Hugging Face's [C, 3C] layout; causal softmax attention; GeLU,
           tanh form; no final ln_f) on hidden states; training loss mean((y - target)^2)
  gpt2     the whole GPT-2 (--vocab, --positions; docs/MODEL.md): token + position embeddings, the blocks, ln_f,
           the LM head tied to wte; training loss the mean cross-entropy over all batch*seq tokens

timed as

  forward      blocks: y = blocks(x); gpt2: the logits; no autograd
  train step   forward, loss, backward, one AdamW step (torch.optim.AdamW, fused=True)

in eager mode and under torch.compile (default mode), in each --precs of
  fp32   fp32 GEMMs
  tf32   TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32)
  bf16   torch.autocast("cuda", dtype=torch.bfloat16) around the forward: fp32 master weights, bf16 GEMMs and
         attention, layernorm and the loss in fp32 (autocast's own lists), the backward outside autocast
Attention is F.scaled_dot_product_attention(is_causal=True), what a PyTorch user would write; PyTorch picks its
backend, and each run records which one ran ("sdpa": flash, efficient, cudnn or math), read from the operators
and kernels the profiler sees in one training step. Times are CUDA-event medians over --reps runs after --warmup
runs.

Before timing, the float64 check runs both functions on the CPU against tests/ref/tessref.py at small shapes:
blocks() against tessref.forward, gpt2() against tessref.lm_forward (logits and loss); each must agree to 1e-10,
so the programs timed are known to compute tessgen's functions.

Writes one JSON object to --out (and stdout): "runs" keyed "{mode}_{prec}" for blocks and "gpt2_{mode}_{prec}"
for gpt2, each with forward_ms and step_ms (medians), their min and max, and sdpa; --out is rewritten after every
run with "complete": false until the last (a run stopped at a time limit keeps what it measured). Without torch, or without a
CUDA device, it prints why, writes {"skipped": "..."} and exits 0: the timing is then simply absent from the
report.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))


def skip(out, why, who="torch_bench"):
    print(f"{who}: skip: {why}")
    if out:
        with open(out, "w") as f:
            json.dump({"skipped": why}, f)
    return 0


def make_params(torch, L, C, F, dtype, device, gen, V=0, P=0):
    """Hugging Face GPT-2 names and [in, out] layouts; N(0, 0.02) matrices, small biases, gammas near 1; with V,
    the embeddings wte [V, C] (also the LM head) and wpe [P, C], and ln_f."""
    p = {}
    def mat(n, rows, cols):
        p[n] = torch.randn(rows, cols, generator=gen, dtype=dtype) * 0.02
    def vec(n, size, base):
        p[n] = base + torch.randn(size, generator=gen, dtype=dtype) * 0.02
    if V:
        mat("wte.weight", V, C); mat("wpe.weight", P, C)
    for l in range(L):
        h = f"h.{l}."
        vec(h + "ln_1.weight", C, 1.0); vec(h + "ln_1.bias", C, 0.0)
        mat(h + "attn.c_attn.weight", C, 3 * C); vec(h + "attn.c_attn.bias", 3 * C, 0.0)
        mat(h + "attn.c_proj.weight", C, C); vec(h + "attn.c_proj.bias", C, 0.0)
        vec(h + "ln_2.weight", C, 1.0); vec(h + "ln_2.bias", C, 0.0)
        mat(h + "mlp.c_fc.weight", C, F); vec(h + "mlp.c_fc.bias", F, 0.0)
        mat(h + "mlp.c_proj.weight", F, C); vec(h + "mlp.c_proj.bias", C, 0.0)
    if V:
        vec("ln_f.weight", C, 1.0); vec("ln_f.bias", C, 0.0)
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


def gpt2(torch, tok, tgt, p, L, H, eps):
    """tok, tgt: int64 [B, S] -> (logits [B, S, V], mean cross-entropy or None without tgt): tessgen's language
    model (docs/MODEL.md), the function of tessref.lm_forward."""
    import torch.nn.functional as Fn
    S = tok.shape[1]
    wte = p["wte.weight"]
    x = Fn.embedding(tok, wte) + p["wpe.weight"][:S]
    x = blocks(torch, x, p, L, H, eps)
    x = Fn.layer_norm(x, (x.shape[-1],), p["ln_f.weight"], p["ln_f.bias"], eps)
    logits = x @ wte.t()  # the head, tied to the embedding
    loss = None if tgt is None else Fn.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
    return logits, loss


def rel_err(np, got, ref):
    return float(np.linalg.norm(np.asarray(got) - ref) / np.linalg.norm(ref))


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
    return rel_err(np, got, ref)


def check_gpt2_against_tessref(torch):
    """float64, CPU: gpt2() against tessref.lm_forward on tessref's language-model weights (positions > seq, so
    the slice of wpe matters) -> (relative error of the logits, of the loss)."""
    import numpy as np
    import tessref
    L, C, H, F, S, B, V, P, eps = 2, 48, 4, 96, 10, 2, 37, 12, 1e-5
    w = tessref.to_f64(dict(tessref.make_lm_weights(L, C, F, V, P, 5)))
    rng = np.random.default_rng(3)
    tok, tgt = (rng.integers(0, V, size=(B, S)) for _ in range(2))
    ref_logits, ref_loss, _ = tessref.lm_forward(tok, tgt, w, L, H, eps)
    p = {n: torch.from_numpy(np.asarray(t, dtype=np.float64)) for n, t in w.items()}
    logits, loss = gpt2(torch, torch.from_numpy(tok), torch.from_numpy(tgt), p, L, H, eps)
    return rel_err(np, logits.numpy(), ref_logits), abs(float(loss) - ref_loss) / abs(ref_loss)


def sdpa_backend(names):
    """The SDPA backend that ran, from the profiler's operator and kernel names of one step: cudnn, flash,
    efficient, math, or "none seen" (e.g. torch.compile decomposed attention into its own kernels)."""
    low = [n.lower() for n in names]
    def seen(*keys):
        return any(k in n for n in low for k in keys)
    if seen("_scaled_dot_product_cudnn_attention", "cudnn_generated_fort_native_sdpa"):
        return "cudnn"
    if seen("_scaled_dot_product_flash_attention", "_flash_attention_forward", "flash_fwd"):
        return "flash"
    if seen("_scaled_dot_product_efficient_attention", "_efficient_attention_forward", "fmha_cutlass"):
        return "efficient"
    if seen("_scaled_dot_product_attention_math"):
        return "math"
    return "none seen"


def profiled_sdpa(torch, fn):
    """Run fn once under the profiler -> sdpa_backend of what it saw (or why it could not tell)."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        return sdpa_backend([e.key for e in prof.key_averages()])
    except Exception as e:  # noqa: BLE001 - the benchmark goes on without the backend's name
        return f"unknown (profiler: {type(e).__name__}: {e})"


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


def bench_one(torch, a, model, mode, prec, p0, inp, target):
    """One configuration: forward and training step timed, the SDPA backend of the step -> results dict."""
    L, H, eps = a.layers, a.heads, a.eps
    torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
    torch.backends.cudnn.allow_tf32 = prec == "tf32"
    torch._dynamo.reset()
    bf16 = prec == "bf16"

    if model == "gpt2":
        def fwd(xx, pp, tt):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
                return gpt2(torch, xx, tt, pp, L, H, eps)

        def loss_of(out):
            return out[1]
    else:
        def fwd(xx, pp, tt):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
                return blocks(torch, xx, pp, L, H, eps), None

        def loss_of(out):
            return ((out[0].float() - target) ** 2).mean()
    if mode == "compile":
        fwd = torch.compile(fwd)
    r = {}
    t0 = time.perf_counter()
    with torch.no_grad():
        r["forward_ms"], r["forward_min_ms"], r["forward_max_ms"] = timed(
            torch, lambda: fwd(inp, p0, None), a.warmup, a.reps)
    params = {k: v.clone().requires_grad_(True) for k, v in p0.items()}  # fp32: the master weights
    opt = torch.optim.AdamW(list(params.values()), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                            fused=True)
    tgt = target if model == "gpt2" else None

    def step():
        opt.zero_grad(set_to_none=True)
        loss_of(fwd(inp, params, tgt)).backward()
        opt.step()

    r["step_ms"], r["step_min_ms"], r["step_max_ms"] = timed(torch, step, a.warmup, a.reps)
    r["sdpa"] = profiled_sdpa(torch, step)
    r["wall_s_incl_compile"] = time.perf_counter() - t0
    del params, opt
    torch.cuda.empty_cache()
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=50257, help="gpt2's vocabulary (GPT-2 small: 50257)")
    ap.add_argument("--positions", type=int, default=1024, help="gpt2's positions (>= --seq)")
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--modes", default="eager,compile", help="eager, compile, or both")
    ap.add_argument("--precs", default="fp32,tf32", help="any of fp32, tf32, bf16")
    ap.add_argument("--models", default="blocks", help="blocks, gpt2, or both")
    ap.add_argument("--check-only", action="store_true", help="only the float64 checks against tessref")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    modes, precs, models = a.modes.split(","), a.precs.split(","), a.models.split(",")
    for got, allowed, opt in ((modes, ("eager", "compile"), "--modes"), (precs, ("fp32", "tf32", "bf16"), "--precs"),
                              (models, ("blocks", "gpt2"), "--models")):
        bad = [v for v in got if v not in allowed]
        if bad:
            ap.error(f"{opt} {','.join(bad)}: expected a comma-separated list of {', '.join(allowed)}")
    if "gpt2" in models and a.positions < a.seq:
        ap.error(f"--positions {a.positions} is below --seq {a.seq}: every position needs a row of wpe")
    try:
        import torch
    except ImportError as e:
        return skip(a.out, f"torch is not installed ({e})")
    err = check_against_tessref(torch)
    print(f"torch_bench: blocks() vs tessref.forward, float64: rel_err={err:.3e} (must be below 1e-10)")
    lm_err, lm_loss_err = check_gpt2_against_tessref(torch)
    print(f"torch_bench: gpt2() vs tessref.lm_forward, float64: logits rel_err={lm_err:.3e}, "
          f"loss rel_err={lm_loss_err:.3e} (each must be below 1e-10)")
    if not (err < 1e-10 and lm_err < 1e-10 and lm_loss_err < 1e-10):
        print("torch_bench: the PyTorch functions do not compute tessgen's; no timing", file=sys.stderr)
        return 1
    if a.check_only:
        return 0
    if not torch.cuda.is_available():
        return skip(a.out, "torch sees no CUDA device")
    L, C, H, F, S, B, V, P = a.layers, a.hidden, a.heads, a.ffn, a.seq, a.batch, a.vocab, a.positions
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(1)
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "shape": {"layers": L, "hidden": C, "heads": H, "ffn": F, "seq": S, "batch": B, "vocab": V,
                     "positions": P},
           "check_rel_err": err, "lm_check_rel_err": lm_err, "lm_check_loss_rel_err": lm_loss_err, "runs": {}}
    for model in models:
        if model == "gpt2":
            p0 = make_params(torch, L, C, F, torch.float32, dev, gen, V, P)
            inp = torch.randint(0, V, (B, S), generator=gen).to(dev)
            target = torch.randint(0, V, (B, S), generator=gen).to(dev)
        else:
            p0 = make_params(torch, L, C, F, torch.float32, dev, gen)
            inp = torch.randn(B, S, C, generator=gen).to(dev)
            target = torch.randn(B, S, C, generator=gen).to(dev)
        for mode in [m for m in ("eager", "compile") if m in modes]:
            for prec in [q for q in ("fp32", "tf32", "bf16") if q in precs]:
                key = ("gpt2_" if model == "gpt2" else "") + f"{mode}_{prec}"
                r = bench_one(torch, a, model, mode, prec, p0, inp, target)
                res["runs"][key] = r
                write_out(a.out, res, False)  # so that a run stopped at its time limit keeps what it measured
                print(f"torch_bench: {key}: forward {r['forward_ms']:.3f} ms, train step {r['step_ms']:.3f} ms, "
                      f"sdpa {r['sdpa']} (medians of {a.reps}; {r['wall_s_incl_compile']:.0f} s with warm-up and "
                      "compilation)", flush=True)
        del p0, inp, target
        torch.cuda.empty_cache()
    print(json.dumps(res, indent=1))
    write_out(a.out, res, True)
    return 0


def write_out(path, res, complete):
    """--out, rewritten whole after every timed run (through a temporary file and a rename, so it is never half
    written): "complete" false until the last run, so that a lease that stops torch_bench at its time limit still
    reports the runs it finished."""
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(dict(res, complete=complete), indent=1))
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
