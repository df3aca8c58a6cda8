#!/usr/bin/env python3
"""bench_report.py --dir DIR --device NAME --shape DIMS --profile-shape DIMS --out FILE.md - the markdown report of
tests/gpu/bench.sh from the files its parts left in DIR:

  profile_{fp32,tf32}.txt   TESS_PROFILE=1 output of bin/model-cuda: "profile_step id= op= t= kind= ms= bytes= m= n=
                            k= ref_ms=" per step of layer 0 (runtime/cuda/trc_profile.cu)
  forward_{fp32,tf32}.txt   --repeat output: forward_seconds_median=
  step_{fp32,tf32}.txt      --steps --timing output: step_seconds_median=
  torch.json                tests/gpu/torch_bench.py's results (or {"skipped": why})

Tables: per GEMM, its time and cuBLAS alone at the same shape (fraction = cuBLAS alone / in the schedule); per
fused kernel, its bandwidth and a device-to-device copy of as many bytes (fraction of copy bandwidth); the 12
blocks' forward and training step against PyTorch eager and torch.compile, fp32 and TF32. A part that did not
run is reported as missing, never guessed."""
import argparse
import json
import os
import re
import sys


def kv(path, key):
    try:
        with open(path) as f:
            vals = [l.split("=", 1)[1].strip() for l in f if l.startswith(key + "=")]
        return float(vals[-1]) if vals else None
    except OSError:
        return None


def profile(path):
    steps = []
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("profile_step "):
                    d = dict(re.findall(r"(\w+)=(\S+)", line))
                    steps.append(d)
    except OSError:
        return None
    return steps or None


def fmt(v, unit="", nd=3):
    return "missing" if v is None else f"{v:.{nd}f}{unit}"


def gemm_table(steps, prec):
    rows = [f"| step | op | t | m x n x k | ms | TFLOP/s | cuBLAS alone ms | cuBLAS alone TFLOP/s | fraction |",
            "|---:|---|---:|---|---:|---:|---:|---:|---:|"]
    for s in steps:
        if s["kind"] != "gemm":
            continue
        m, n, k = int(s["m"]), int(s["n"]), int(s["k"])
        ms, ref = float(s["ms"]), float(s["ref_ms"])
        fl = 2.0 * m * n * k
        rows.append(f"| {s['id']} | {s['op']} | {s['t']} | {m} x {n} x {k} | {ms:.4f} | {fl / ms / 1e9:.1f} | "
                    f"{ref:.4f} | {fl / ref / 1e9:.1f} | {100 * ref / ms:.0f}% |")
    return [f"GEMMs of layer 0, cuBLAS {prec} (fraction = time of cuBLAS alone / time in the schedule):", ""] + rows


def kernel_table(steps, prec):
    rows = ["| step | op | kind | bytes | ms | GB/s | copy ms | copy GB/s | fraction |",
            "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for s in steps:
        if s["kind"] in ("gemm", "bcast", "allreduce", "reduce") or float(s["ref_ms"]) <= 0:
            continue
        b, ms, ref = int(s["bytes"]), float(s["ms"]), float(s["ref_ms"])
        rows.append(f"| {s['id']} | {s['op']} | {s['kind']} | {b} | {ms:.4f} | {b / ms / 1e6:.0f} | {ref:.4f} | "
                    f"{b / ref / 1e6:.0f} | {100 * ref / ms:.0f}% |")
    return [f"Fused kernels of layer 0 ({prec} run; fraction = time of a device-to-device copy moving the same bytes "
            "/ the kernel's time, i.e. the fraction of copy bandwidth):", ""] + rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--shape", required=True, help="layers hidden heads ffn seq batch of the 12-block runs")
    ap.add_argument("--profile-shape", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    d = a.dir
    L, C, H, F, S, B = a.shape.split()
    pL, pC, pH, pF, pS, pB = a.profile_shape.split()
    out = [f"# tessgen CUDA backend on {a.device}", "",
           "Written by tests/gpu/bench.sh (tests/gpu/bench_report.py); every figure below is from one run on that "
           "device.", ""]
    if "STAND-IN" in a.device:
        out += ["**STAND-IN run: no GPU; the tessgen figures are the CPU emulation's (tests/cuda/emu.cc) and say "
                "nothing about a GPU.**", ""]
    for prec in ("fp32", "tf32"):
        steps = profile(os.path.join(d, f"profile_{prec}.txt"))
        out += [f"## Layer 0 of {pL} blocks, {prec.upper() if prec == 'tf32' else prec}: C={pC}, "
                f"{pH} heads, F={pF}, {pB} x {pS} tokens, mesh [1,1,1], TESS_PROFILE=1 --repeat 20", ""]
        if steps is None:
            out += [f"missing: no profile_step lines in profile_{prec}.txt", ""]
            continue
        out += gemm_table(steps, prec) + [""] + kernel_table(steps, prec) + [""]
    t = None
    try:
        with open(os.path.join(d, "torch.json")) as f:
            t = json.load(f)
    except (OSError, ValueError):
        t = None
    out += [f"## {L} blocks, C={C}, {H} heads, F={F}, {B} x {S} tokens: milliseconds (median)", ""]
    if t is not None and "skipped" in t:
        out += [f"PyTorch: skipped ({t['skipped']})", ""]
    elif t is not None:
        out += [f"PyTorch {t.get('torch')} (CUDA {t.get('cuda')}) on {t.get('device')}; its stack matches "
                f"tessref.forward in float64 to {t.get('check_rel_err', float('nan')):.1e}.", ""]
    runs = (t or {}).get("runs", {})
    out += ["| | tessgen [1,1,1] | PyTorch eager | torch.compile |", "|---|---:|---:|---:|"]
    for prec in ("fp32", "tf32"):
        fwd = kv(os.path.join(d, f"forward_{prec}.txt"), "forward_seconds_median")
        stp = kv(os.path.join(d, f"step_{prec}.txt"), "step_seconds_median")
        ef, cf = runs.get(f"eager_{prec}", {}), runs.get(f"compile_{prec}", {})
        name = "TF32" if prec == "tf32" else "fp32"
        out.append(f"| forward, {name} | {fmt(fwd and fwd * 1e3)} | {fmt(ef.get('forward_ms'))} | "
                   f"{fmt(cf.get('forward_ms'))} |")
        out.append(f"| training step, {name} | {fmt(stp and stp * 1e3)} | {fmt(ef.get('step_ms'))} | "
                   f"{fmt(cf.get('step_ms'))} |")
    out += ["", "tessgen's training step includes copying y to the host, the loss and dL/dy there, and dL/dy back "
            "(2 x B x S x C floats over PCIe); PyTorch's computes the loss on the GPU. Both use AdamW "
            "(PyTorch: fused=True). PyTorch's attention is scaled_dot_product_attention(is_causal=True).", ""]
    with open(a.out, "w") as f:
        f.write("\n".join(out))
    missing = sum(l.count("missing") for l in out)
    print(f"bench_report: wrote {a.out} ({missing} missing figure(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
