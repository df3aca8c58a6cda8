#!/usr/bin/env python3
"""bench_report.py --dir DIR --device NAME --shape DIMS --profile-shape DIMS --out FILE.md - the markdown report of
tests/gpu/bench.sh from the files its parts left in DIR:

  profile_{fp32,tf32}.txt   TESS_PROFILE=1 output of bin/model-cuda: "profile_step id= op= t= kind= ms= bytes= m= n=
                            k= ref_ms=" per step of layer 0 (runtime/cuda/trc_profile.cu)
  forward_{fp32,tf32}.txt   --repeat output: forward_seconds_median=
  step_{fp32,tf32}.txt      --steps --timing output: step_seconds_median=
  torch.json                tests/gpu/torch_bench.py's results (or {"skipped": why})
  cmp_{blocks,lm}_forward.txt  the compare part: tessgen's bf16 forward (--repeat) of the blocks and the whole GPT-2
  cmp_{blocks,lm}_step.txt  its bf16 training step (--steps --timing): step_seconds_median= and <kind>_seconds=
  cmp_{blocks,lm}cudnn_{forward,step}.txt  the same with attention = "cudnn", where cuDNN was found
  cmp_serial[cudnn]_step.txt  the blocks' step serialised (CUDA_LAUNCH_BLOCKING=1, no graph): per-kind times
                            without overlap across the streams
  torch_bf16.json           torch_bench.py --precs bf16 --models blocks,gpt2

Tables: per GEMM, its time and cuBLAS alone at the same shape (fraction = cuBLAS alone / in the schedule); per
fused kernel, its bandwidth and a device-to-device copy of as many bytes (fraction of copy bandwidth); the 12
blocks' forward and training step against PyTorch eager and torch.compile, fp32 and TF32; the bf16 comparison
(blocks and the whole GPT-2: milliseconds, tokens/s, MFU, tessgen's time per step kind). A part that did not
run is reported as missing, never guessed.

MFU (docs/COST.md): model FLOPs per forward = L x (2T(4C^2 + 2CF) + 2BS^2C) + 2TCV, T = B x S tokens, the last
term (the LM head) only for the whole model; a training step is 3 x the forward. MFU = model FLOPs / (seconds x
the device's dense bf16 peak), the peak from the device's name (bf16_peak); an unknown device gets no MFU."""
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


def bf16_peak(device):
    """nvidia-smi's product name -> (what it is, dense bf16 TFLOP/s), or None when not known here."""
    n = device.upper()
    if "H100" in n and "PCIE" in n:
        return "H100 PCIe", 756.0
    if "H100" in n and ("HBM3" in n or "SXM" in n):  # "NVIDIA H100 80GB HBM3" is the SXM part
        return "H100 SXM", 989.4
    if "H200" in n and "NVL" not in n:
        return "H200", 989.4
    if "A100" in n:
        return "A100", 312.0
    return None


def model_flops(L, C, F, B, S, V=0):
    """docs/COST.md's model FLOPs -> (forward, training step)."""
    T = B * S
    fwd = L * (2 * T * (4 * C * C + 2 * C * F) + 2 * B * S * S * C) + 2 * T * C * V
    return fwd, 3 * fwd


def lm_params(L, C, F, V, P):
    """Parameters of the whole GPT-2 (tied head): wte, wpe, the blocks, ln_f."""
    return V * C + P * C + L * (4 * C * C + 2 * C * F + 9 * C + F) + 2 * C


KINDS = ("gemm", "attention", "layernorm", "residual", "gelu", "cast", "optimizer", "reduce", "allreduce", "bcast")


def compare_section(d, device, shape, lm):
    """The bf16 comparison: tessgen's programs beside PyTorch's autocast bf16, eager and torch.compile."""
    L, C, H, F, S, B = (int(v) for v in shape.split())
    V, P = (int(v) for v in lm.split())
    T = B * S
    peak = bf16_peak(device)
    out = [f"## bf16: tessgen beside PyTorch, {L} blocks and the whole GPT-2 (C={C}, {H} heads, F={F}, "
           f"{B} x {S} tokens)", ""]
    files = [f"cmp_{m}_{w}.txt" for m in ("blocks", "lm") for w in ("forward", "step")] + ["torch_bf16.json"]
    if not any(os.path.exists(os.path.join(d, f)) for f in files):
        return out + ["missing: the compare part did not run (tests/gpu/bench.sh compare)", ""]
    out += [f"tessgen: the generated programs in dtype \"bf16\" on [1,1,1] (forward: the inference program, "
            "--repeat 20; training step: --steps 10 --timing; medians). PyTorch: torch_bench.py, "
            "torch.autocast(dtype=torch.bfloat16) with fp32 master weights and fused AdamW, "
            "F.scaled_dot_product_attention(is_causal=True); SDPA is the backend PyTorch ran (profiler).", "",
            "Model FLOPs (docs/COST.md): forward = L x (2T(4C^2 + 2CF) + 2BS^2C) + 2TCV, T = B x S tokens, the LM "
            "head 2TCV only for the whole model; training step = 3 x forward. tokens/s = T / step time. "
            "MFU = model FLOPs / (time x dense bf16 peak).", ""]
    if peak is None:
        out += [f"MFU left out: no dense bf16 peak is known for this device ({device}); bench_report.py knows "
                "H100 SXM 989.4, H100 PCIe 756, H200 989.4 and A100 312 TFLOP/s.", ""]
    else:
        out += [f"Peak: {peak[0]}, {peak[1]:g} TFLOP/s dense bf16.", ""]
    t = None
    try:
        with open(os.path.join(d, "torch_bf16.json")) as f:
            t = json.load(f)
    except (OSError, ValueError):
        t = None
    if t is None:
        out += ["PyTorch: missing (no torch_bf16.json)", ""]
    elif "skipped" in t:
        out += [f"PyTorch: skipped ({t['skipped']})", ""]
    else:
        out += [f"PyTorch {t.get('torch')} (CUDA {t.get('cuda')}) on {t.get('device')}; float64 checks against "
                f"tessref: blocks {t.get('check_rel_err', float('nan')):.1e}, whole GPT-2 logits "
                f"{t.get('lm_check_rel_err', float('nan')):.1e}, loss {t.get('lm_check_loss_rel_err', float('nan')):.1e}."
                + ("" if t.get("complete", True) else " It stopped at its time limit: only the runs it finished "
                   "are below, the others are missing."),
                ""]
    runs = (t or {}).get("runs", {})

    def mfu(flops, ms):
        if peak is None or ms is None or ms <= 0:
            return "-" if peak is None else "missing"
        return f"{100 * flops / (ms * 1e-3 * peak[1] * 1e12):.1f}%"

    def tps(ms):
        return "missing" if ms is None or ms <= 0 else f"{T / (ms * 1e-3):.0f}"

    for m, name, v, prefix in (("blocks", f"{L} blocks", 0, ""),
                               ("lm", f"whole GPT-2, vocab {V}, {lm_params(L, C, F, V, P) / 1e6:.1f}M parameters",
                                V, "gpt2_")):
        ffl, sfl = model_flops(L, C, F, B, S, v)
        out += [f"{name}: model FLOPs {ffl / 1e9:.5g} G a forward, {sfl / 1e9:.5g} G a training step", "",
                "| | forward ms | forward MFU | training step ms | tokens/s | training step MFU | SDPA |",
                "|---|---:|---:|---:|---:|---:|---|"]
        fwd = kv(os.path.join(d, f"cmp_{m}_forward.txt"), "forward_seconds_median")
        stp = kv(os.path.join(d, f"cmp_{m}_step.txt"), "step_seconds_median")
        rows = [("tessgen bf16 [1,1,1], attention = \"cublas\"", fwd and fwd * 1e3, stp and stp * 1e3, "tessgen's own")]
        if os.path.exists(os.path.join(d, f"cmp_{m}cudnn_step.txt")):
            cf = kv(os.path.join(d, f"cmp_{m}cudnn_forward.txt"), "forward_seconds_median")
            cs = kv(os.path.join(d, f"cmp_{m}cudnn_step.txt"), "step_seconds_median")
            rows.append(("tessgen bf16 [1,1,1], attention = \"cudnn\"", cf and cf * 1e3, cs and cs * 1e3,
                         "cuDNN fused"))
        for mode, label in (("eager", "PyTorch eager, autocast bf16"), ("compile", "torch.compile, autocast bf16")):
            r = runs.get(f"{prefix}{mode}_bf16", {})
            rows.append((label, r.get("forward_ms"), r.get("step_ms"), r.get("sdpa", "missing")))
        for label, fms, sms, sdpa in rows:
            out.append(f"| {label} | {fmt(fms)} | {mfu(ffl, fms)} | {fmt(sms)} | {tps(sms)} | {mfu(sfl, sms)} | "
                       f"{sdpa} |")
        out.append("")
    # attention = "cudnn" (bench.sh compare, where cuDNN is found) and the serialised step (CUDA_LAUNCH_BLOCKING=1,
    # no graph: the kinds' spans do not overlap, each launch's latency included) as further columns
    extra = [(h, os.path.join(d, f)) for h, f in (
        (f"{L} blocks step, cudnn", "cmp_blockscudnn_step.txt"), ("whole GPT-2 step, cudnn", "cmp_lmcudnn_step.txt"),
        (f"{L} blocks step, cudnn, serialised", "cmp_serialcudnn_step.txt"),
        (f"{L} blocks step, serialised", "cmp_serial_step.txt")) if os.path.exists(os.path.join(d, f))]
    out += ["tessgen's time per step kind (milliseconds; the mean over the timed runs of the slowest rank, so "
            "the kinds need not add up to the median; \"other\" = median - their sum: host work, "
            "synchronisation, gaps between launches):", "",
            f"| kind | {L} blocks forward | {L} blocks training step | whole GPT-2 forward | whole GPT-2 training step |"
            + "".join(f" {h} |" for h, _ in extra),
            "|---|---:|---:|---:|---:|" + "---:|" * len(extra)]
    paths = [os.path.join(d, f"cmp_{m}_{w}.txt") for m in ("blocks", "lm") for w in ("forward", "step")]
    paths += [p for _, p in extra]
    meds = [kv(p, f"{w}_seconds_median") for p, w in zip(paths, ("forward", "step") * 2 + ("step",) * len(extra))]
    per = {k: [kv(p, f"{k}_seconds") for p in paths] for k in KINDS}
    for k in KINDS:
        out.append(f"| {k} | " + " | ".join(fmt(v and v * 1e3) for v in per[k]) + " |")
    other = []
    for i, med in enumerate(meds):
        ks = [per[k][i] for k in KINDS]
        other.append(None if med is None or any(v is None for v in ks) else med - sum(ks))
    out.append("| other | " + " | ".join(fmt(v if v is None else v * 1e3) for v in other) + " |")
    out.append("| median | " + " | ".join(fmt(v and v * 1e3) for v in meds) + " |")
    return out + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--shape", required=True, help="layers hidden heads ffn seq batch of the 12-block runs")
    ap.add_argument("--profile-shape", required=True)
    ap.add_argument("--cmp-shape", help="layers hidden heads ffn seq batch of the bf16 comparison (default --shape)")
    ap.add_argument("--cmp-lm", default="50257 1024", help="vocab positions of the comparison's whole GPT-2")
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
    out += ["", "Both compute the loss and dL/dy on the GPU (tessgen: one pinned read of the loss and the gradient "
            "norm per step, docs/CUDA.md) and use AdamW (PyTorch: fused=True). PyTorch's attention is "
            "scaled_dot_product_attention(is_causal=True).", ""]
    out += compare_section(d, a.device, a.cmp_shape or a.shape, a.cmp_lm)
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out))
    os.replace(tmp, a.out)
    missing = sum(l.count("missing") for l in out)
    print(f"bench_report: wrote {a.out} ({missing} missing figure(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
