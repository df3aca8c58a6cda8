#!/usr/bin/env python3
"""bench/paper.py - the advisor against the Tesseract paper's measurements (ICPP '22, Tables 1 and 2).

Prints a markdown section (part "paper" of `ninja bench`; docs/COST.md keeps a copy):

Table 1 (strong scaling, 64 A100s of MeluXina, hidden 3072, 64 heads, 24 layers): the advisor's
predicted forward time for [4,4,4], Megatron-LM 1-D over 64 and [8,8,1] (Optimus [8,8] is the same
layout) with specs/machines/meluxina.lua, for each sequence length tried (the paper does not state
it), in every placement; the predicted order and ratios next to the paper's (2.07 for
[8,8,1]/[4,4,4], 1.38 for Megatron/[4,4,4]).

Table 2 (weak scaling): each row's model on its layout, the predicted forward time next to the
paper's, and the ratio to the smallest layout of the same scheme.

Batch: tessgen needs batch % (q*d) == 0, so Table 1 runs batch 16 on every layout (the paper: 12,
and 16 for [4,4,4]); Table 2's batches are used as printed.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.environ.get("TESS_BENCH_WORK", os.path.join(ROOT, "out", "bench", "paper"))
MACHINE = os.path.join(ROOT, "specs", "machines", "meluxina.lua")
# the same cluster with fp32 GEMMs on the tensor cores (TF32): the paper does not say which math ran, and
# Table 2's times are beyond the A100's FP32 peak (see implied rates below)
MACHINE_TF32 = os.path.join(WORK, "meluxina-tf32.lua")
SEQS = [int(x) for x in os.environ.get("TESS_PAPER_SEQ", "128 256 512 1024 2048").split()]
LAYERS = 24

# Table 1, forward time per batch (s)
T1 = {("tesseract", (4, 4, 4)): 0.0869, ("megatron", (64,)): 0.1195, ("tesseract", (8, 8, 1)): 0.1799}
# Table 2: (scheme, layout, batch, hidden, heads, forward s)
T2 = [
    ("megatron", (4,), 60, 2048, 32, 0.0793), ("megatron", (16,), 60, 4096, 64, 0.2081),
    ("megatron", (64,), 30, 8192, 128, 0.4638),
    ("optimus", (2, 2, 1), 96, 2048, 32, 0.0827), ("optimus", (4, 4, 1), 192, 4096, 64, 0.1829),
    ("optimus", (8, 8, 1), 384, 8192, 128, 0.1962),
    ("tesseract", (1, 1, 1), 48, 1024, 16, 0.0603), ("tesseract", (2, 2, 1), 96, 2048, 32, 0.0867),
    ("tesseract", (2, 2, 2), 192, 2048, 32, 0.0864), ("tesseract", (4, 4, 1), 192, 4096, 64, 0.1177),
    ("tesseract", (4, 4, 2), 384, 4096, 64, 0.1173), ("tesseract", (4, 4, 4), 768, 4096, 64, 0.1155),
    ("tesseract", (8, 8, 1), 384, 8192, 128, 0.1799),
]


def tessgen(*args):
    r = subprocess.run([os.path.join(ROOT, "bin", "tessgen")] + list(args), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    return r.stdout


def spec(name, layout, scheme, batch, hidden, heads, seq, placement="row"):
    path = os.path.join(WORK, name + ".lua")
    if scheme == "megatron":
        mesh = "scheme = \"megatron\", mesh = { p = %d }," % layout[0]
    else:
        mesh = "mesh = { q = %d, d = %d, placement = \"%s\" }," % (layout[0], layout[2], placement)
    with open(path, "w") as f:
        f.write("return { name = \"%s\", %s model = { layers = %d, hidden = %d, heads = %d, ffn = %d, seq = %d, "
                "batch = %d }, mode = \"train\", memory_gib = 1e6 }\n"
                % (name, mesh, LAYERS, hidden, heads, 4 * hidden, seq, batch))
    return path


def table1(machine, label):
    print("#### Table 1: strong scaling on 64 ranks (hidden 3072, 64 heads, %d layers, batch 16), %s\n"
          % (LAYERS, label))
    print("| seq | layout (placement) | predicted forward s | predicted train step s | forward dominated by | "
          "paper forward s |")
    print("|---|---|---|---|---|---|")
    summary = []
    for seq in SEQS:
        s = spec("t1_s%d" % seq, (4, 4, 4), "tesseract", 16, 3072, 64, seq)
        adv = json.loads(tessgen(s, "--advise", "--json", "--machine", machine, "--ranks", "64"))
        best = {}
        for c in adv["candidates"]:
            key = (c["scheme"], tuple(c["mesh"]))
            if key not in T1 or c["pp"] != 1 or c["microbatches"] != 1:   # the paper's runs: one group, m = 1
                continue
            pl = c["placement"] or "-"
            print("| %d | %s %s (%s) | %.4f | %.4f | %s | %s |" % (seq, c["scheme"], c["mesh"], pl, c["forward_s"],
                                                                 c["train_step_s"], c["dominant"], T1[key]))
            if key not in best or c["forward_s"] < best[key][0]:
                best[key] = (c["forward_s"], pl)
        summary.append((seq, best))
    print("\nBest placement of each layout, the predicted order and ratios against the paper's measured ones:\n")
    print("| seq | predicted order (fastest first) | [8,8,1] / [4,4,4] (paper 2.07) | "
          "Megatron / [4,4,4] (paper 1.38) | paper order |")
    print("|---|---|---|---|---|")
    paper_order = " < ".join("%s%s" % (k[0][:3], list(k[1])) for k in sorted(T1, key=T1.get))
    for seq, best in summary:
        if len(best) < 3:
            print("| %d | (missing: %s) | | | |" % (seq, [k for k in T1 if k not in best]))
            continue
        order = " < ".join("%s%s" % (k[0][:3], list(k[1])) for k in sorted(best, key=lambda k: best[k][0]))
        t444 = best[("tesseract", (4, 4, 4))][0]
        print("| %d | %s | %.2f | %.2f | %s |" % (seq, order, best[("tesseract", (8, 8, 1))][0] / t444,
                                                  best[("megatron", (64,))][0] / t444, paper_order))
    print()


def table2(machine, label):
    for seq in SEQS[:1]:
        print("#### Table 2: weak scaling (seq %d, %d layers; placement: the best the advisor finds), %s\n"
              % (seq, LAYERS, label))
        print("| scheme | layout | batch | hidden | heads | predicted forward s | vs first of scheme | paper s | "
              "paper vs first | GEMM TFLOPS the paper's time implies |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        first = {}
        for scheme, layout, batch, hidden, heads, paper in T2:
            sch = "megatron" if scheme == "megatron" else "tesseract"
            best = None
            for pl in (["-"] if sch == "megatron" else ["row", "col", "dep"]):
                name = "t2_%s_%s_%s" % (scheme, "x".join(map(str, layout)), pl)
                s = spec(name, layout, sch, batch, hidden, heads, seq, pl)
                try:
                    cost = json.loads(tessgen(s, "--cost", "--json", "--machine", machine))
                except RuntimeError as e:
                    best = best or (None, str(e).splitlines()[0][:120])
                    continue
                t = cost["phases"]["forward"]["streams_s"]
                if best is None or best[0] is None or t < best[0]:
                    best = (t, pl)
            if best[0] is None:
                print("| %s | %s | %d | %d | %d | refused: %s | | %.4f | |" % (scheme, list(layout), batch, hidden,
                                                                               heads, best[1], paper))
                continue
            f = first.setdefault(scheme, (best[0], paper))
            p = 1
            for x in layout:
                p *= x
            if sch == "tesseract":
                p = layout[0] * layout[0] * layout[2]
            # the forward's GEMM flops per rank (24 layers of 2 T (12 C^2) / p) over the paper's time
            T = batch * seq
            implied = LAYERS * 2.0 * T * 12.0 * hidden * hidden / p / paper / 1e12
            print("| %s | %s %s | %d | %d | %d | %.4f | %.2f | %.4f | %.2f | %.0f |" % (
                scheme, list(layout), best[1], batch, hidden, heads, best[0], best[0] / f[0], paper, paper / f[1],
                implied))
        print()


def main():
    os.makedirs(WORK, exist_ok=True)
    subprocess.run(["ninja", "-C", ROOT, "bin/tessgen"], check=True, capture_output=True)
    print("### The advisor against the Tesseract paper (specs/machines/meluxina.lua)\n")
    print("Command: `python3 bench/paper.py` (part of `ninja bench`); sequence lengths %s (the paper does not "
          "state it).\n" % SEQS)
    with open(MACHINE) as f:
        text = f.read()
    with open(MACHINE_TF32, "w") as f:
        f.write(text.replace('fp32_gemm = "fp32"', 'fp32_gemm = "tf32"').replace('name = "meluxina"',
                                                                                 'name = "meluxina-tf32"'))
    table1(MACHINE, "fp32 GEMMs (meluxina.lua)")
    table1(MACHINE_TF32, "TF32 GEMMs (meluxina.lua with fp32_gemm = \"tf32\")")
    table2(MACHINE, "fp32 GEMMs")
    table2(MACHINE_TF32, "TF32 GEMMs")


if __name__ == "__main__":
    main()
