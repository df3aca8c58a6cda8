#!/usr/bin/env bash
# tests/gpu/bench.sh [tessgen] [torch] [compare] [report] - what the CUDA backend achieves on this GPU, side by side with
# cuBLAS alone, the device's copy bandwidth and PyTorch on the same GPU at the same shapes (set up as check.sh
# is: tests/gpu/env.sh, from build/gpu-carry). With no argument: tessgen, torch, compare and report, in one run.
#
#   tessgen  1. TESS_PROFILE=1 --repeat 20 of GPT-2 small's block (C=768, 12 heads, F=3072, 8 x 1024 tokens,
#               2 layers) on [1,1,1], fp32 and TF32: per GEMM of layer 0 its time and the time of cuBLAS alone
#               at the same shape (the fraction: cuBLAS alone / in the schedule); per fused kernel its time and
#               that of a device-to-device copy moving as many bytes (the fraction of copy bandwidth)
#            2. 12 GPT-2 small blocks on [1,1,1]: the forward (--repeat 20, median) and a training step
#               (--steps 10 --timing, median: forward, loss and dL/dy, backward, gradient norm, AdamW), fp32 and TF32,
#               replayed from CUDA graphs (the default) and issued launch by launch (TESS_CUDA_GRAPH=0), side by
#               side in $OUT/graph.md
#   torch    tests/gpu/torch_bench.py: the same 12 blocks and shapes in PyTorch, eager and torch.compile, fp32
#            and TF32, forward and training step (after checking in float64 that it computes tessgen's function)
#   compare  the comparison users make, in bf16, for the 12 GPT-2 small blocks and for the whole GPT-2 small
#            (vocab 50257, positions 1024: 124M parameters): tessgen's generated programs in dtype "bf16" on
#            [1,1,1] (infer16: the forward, --repeat 20; train16: the training step, --steps 10 --timing, with its
#            time per step kind) beside tests/gpu/torch_bench.py --precs bf16 --models blocks,gpt2 (autocast bf16,
#            fp32 master weights, fused AdamW, scaled_dot_product_attention; eager and torch.compile; the SDPA
#            backend that ran). The report turns them into tokens/s and MFU (docs/COST.md's model FLOPs over
#            time x the device's dense bf16 peak, known from nvidia-smi's name; bench_report.py).
#            compare-tessgen and compare-torch are its two halves, for two calls on one machine
#   report   tests/gpu/bench_report.py: one markdown file, $OUT/bench.md, every figure with the device named
#   bf16     (not in the default set) the 12 blocks in dtype "bf16" (docs/BF16.md) beside fp32, in one command:
#            forward (--repeat 20) and training step (--steps 10 --timing), medians and the time per step kind,
#            into $OUT/bf16.md; and TESS_PROFILE of the 2-layer block in bf16 ($OUT/profile_bf16.txt: its
#            "cuBLAS alone" reference GEMMs are fp32, so only its milliseconds and TFLOP/s are bf16's)
#            Where cuDNN is found (tests/gpu/env.sh), the bf16 blocks with attention = "cudnn" in a third column
#            (cuDNN's fused attention, docs/CUDA.md)
#   fusion   (not in the default set) the 12 blocks' bf16 training step and forward with the spec's cuBLASLt epilogues
#            and with epilogues = false, alternated three times, into $OUT/fusion.md (the control of a fusion)
#
# Files in $OUT: bench.md, profile_fp32.txt, profile_tf32.txt, tessgen_timing.txt, torch.json, cmp_*.txt,
# torch_bf16.json, bench.log. Each part
# also keeps its results in $TESS_GPU_WORK/bench, so the parts may run as separate commands on one machine.
# TESS_BENCH_SMALL=1 swaps in small shapes (for checking the flow without a GPU: TESS_GPU_STANDIN=1).
set -u
# shellcheck source=tests/gpu/env.sh
. "$(dirname "$0")/env.sh"
parts=("$@")
[ $# -eq 0 ] && parts=(tessgen torch compare report)
B=$TG_WORK/bench
mkdir -p "$B"
TG_LOG=$TG_OUT/bench.log
export TG_TIMEOUT=${TESS_GPU_RUN_TIMEOUT:-300}
P2=gpt2s2 P12=gpt2s
C12=gpt2s CLM=gpt2lm # compare: the blocks and the whole model of the same dimensions (torch_bench.py takes one shape)
if [ "${TESS_BENCH_SMALL:-0}" = 1 ]; then
    P2=tiny P12=m64
    C12=tiny CLM=lmtiny
fi

if ! tg_setup >"$TG_OUT/setup.log" 2>&1; then
    cat "$TG_OUT/setup.log"
    tg_notok "set up the machine from build/gpu-carry (tests/gpu/env.sh)" "$TG_OUT/setup.log"
    tg_summary
    exit 1
fi
tg_say "# bench.sh ${parts[*]}: $TG_GPU; sm_$TESS_CUDA_ARCH$([ "$TG_STANDIN" = 1 ] && echo "; STAND-IN: no GPU code runs")"

value() { sed -n "s/^$1=//p" "$2" | tail -1; } # key file

bench_profile() { # prec: TESS_PROFILE report of the 2-layer block
    local prec=$1 tf=0
    [ "$prec" = tf32 ] && tf=1
    TESS_TF32=$tf TESS_PROFILE=1 tg_run "$P2" infer 1 1 --repeat 20 >"$B/profile_$prec.txt" 2>&1 &&
        grep -q "^profile_step " "$B/profile_$prec.txt" && cp "$B/profile_$prec.txt" "$TG_OUT/"
}
bench_forward() { # prec
    local prec=$1 tf=0
    [ "$prec" = tf32 ] && tf=1
    TESS_TF32=$tf tg_run "$P12" infer 1 1 --repeat 20 >"$B/forward_$prec.txt" 2>&1 &&
        [ -n "$(value forward_seconds_median "$B/forward_$prec.txt")" ]
}
bench_step() { # prec: the step replayed from CUDA graphs (the default on one rank), then issued launch by launch
    local prec=$1 tf=0
    [ "$prec" = tf32 ] && tf=1
    TESS_TF32=$tf tg_run "$P12" train 1 1 --steps 10 --timing >"$B/step_$prec.txt" 2>&1 &&
        [ -n "$(value step_seconds_median "$B/step_$prec.txt")" ] &&
        TESS_CUDA_GRAPH=0 TESS_TF32=$tf tg_run "$P12" train 1 1 --steps 10 --timing >"$B/nograph_$prec.txt" 2>&1 &&
        [ -n "$(value step_seconds_median "$B/nograph_$prec.txt")" ]
}
graph_table() { # the step with and without CUDA graphs, side by side
    echo "| $P12 training step [1,1,1] | CUDA graphs | TESS_CUDA_GRAPH=0 | launches a step | issued one by one (graphs / off) |"
    echo "|---|---:|---:|---:|---:|"
    local prec
    for prec in fp32 tf32; do
        { [ -f "$B/step_$prec.txt" ] && [ -f "$B/nograph_$prec.txt" ]; } || continue
        awk -v p="$prec" -v a="$(value step_seconds_median "$B/step_$prec.txt")" \
            -v b="$(value step_seconds_median "$B/nograph_$prec.txt")" -v n="$(value step_launches "$B/step_$prec.txt")" \
            -v i="$(value step_launches_issued "$B/step_$prec.txt")" -v j="$(value step_launches_issued "$B/nograph_$prec.txt")" \
            'BEGIN { printf "| %s, median ms | %.3f | %.3f | %s | %s / %s |\n", p, 1e3 * a, 1e3 * b, n, i, j }'
    done
}

part_tessgen() {
    local prec log
    for spec in "$P2 infer" "$P12 infer" "$P12 train"; do
        # shellcheck disable=SC2086
        set -- $spec
        log=$B/build_$1_$2.log
        if ! tg_build "$1" "$2" 1 1 >"$log" 2>&1; then
            tg_notok "build $1 ($2) [1,1,1]" "$log"
            return
        fi
    done
    for prec in fp32 tf32; do
        if [ "$TG_STANDIN" = 1 ]; then
            tg_ok "tessgen: TESS_PROFILE report, $P2, $prec # skip stand-in: the CUDA emulation has no profile"
        else
            tg_check "tessgen: TESS_PROFILE report, $P2 [1,1,1], $prec (GEMMs vs cuBLAS alone, kernels vs copy)" \
                bench_profile "$prec"
        fi
        tg_check "tessgen: $P12 forward [1,1,1], $prec, --repeat 20" bench_forward "$prec"
        tg_check "tessgen: $P12 training step [1,1,1], $prec, --steps 10, with CUDA graphs and TESS_CUDA_GRAPH=0" \
            bench_step "$prec"
    done
    (cd "$B" && tail -n +1 forward_*.txt step_*.txt nograph_*.txt) >"$TG_OUT/tessgen_timing.txt" 2>&1
    graph_table | tee "$TG_OUT/graph.md" | tee -a "$TG_LOG"
}

# torch_check NAME JSON ARGS...: tests/gpu/torch_bench.py ARGS --out JSON (TORCH_SCRIPT=torch_decode: that script);
# a skip (no torch, no CUDA device) is reported as one, with its reason
torch_check() {
    local name=$1 json=$2 log script=${TORCH_SCRIPT:-torch_bench}
    shift 2
    rm -f "$json"
    mkdir -p "$TG_WORK/logs"
    log=$TG_WORK/logs/torch_$(basename "$json" .json).log
    if ! timeout -k 10 "${TESS_TORCH_TIMEOUT:-540}" "$PY" "$TG_REPO/tests/gpu/$script.py" "$@" --out "$json" >"$log" 2>&1; then
        tg_notok "$name" "$log"
    elif grep -q '"skipped"' "$json" 2>/dev/null; then
        tg_ok "$name # skip $(sed -n "s/^$script: skip: //p" "$log" | head -1)"
    else
        tg_ok "$name"
        grep -E "rel_err=|^$script: [a-z0-9_]+: forward|^torch_decode: " "$log" | sed 's/^/    # /' | tee -a "$TG_LOG"
    fi
    [ -f "$json" ] && cp "$json" "$TG_OUT/"
}

part_torch() {
    local L C H F S Bt
    read -r L C H F S Bt <<<"$(tg_dims "$P12")"
    torch_check "torch: $P12 in PyTorch (check vs tessref in float64; eager and torch.compile, fp32 and TF32)" \
        "$B/torch.json" --layers "$L" --hidden "$C" --heads "$H" --ffn "$F" --seq "$S" --batch "$Bt"
}

cmp_forward() { # model name [attention]: the bf16 forward of the inference program
    tg_run "$1" "infer16$3" 1 1 --repeat 20 >"$B/cmp_$2$3_forward.txt" 2>&1 &&
        [ -n "$(value forward_seconds_median "$B/cmp_$2$3_forward.txt")" ]
}
cmp_step() { # model name [attention]: the bf16 training step, its time per step kind
    tg_run "$1" "train16$3" 1 1 --steps 10 --timing >"$B/cmp_$2$3_step.txt" 2>&1 &&
        [ -n "$(value step_seconds_median "$B/cmp_$2$3_step.txt")" ] && [ -n "$(value gemm_seconds "$B/cmp_$2$3_step.txt")" ]
}
cmp_serial() { # model [attention]
    CUDA_LAUNCH_BLOCKING=1 TESS_CUDA_GRAPH=0 tg_run "$1" "train16$2" 1 1 --steps 5 --timing >"$B/cmp_serial$2_step.txt" 2>&1 &&
        [ -n "$(value attention_seconds "$B/cmp_serial$2_step.txt")" ]
}
part_compare_tessgen() {
    local spec log a
    local atts=("")
    [ -n "$TG_CUDNN" ] && atts+=(cudnn) # attention = "cudnn" beside "cublas" (train16 names it) where cuDNN is found
    rm -f "$B"/cmp_*.txt
    for a in "${atts[@]}"; do
        for spec in "$C12 infer16$a" "$C12 train16$a" "$CLM infer16$a" "$CLM train16$a"; do
            # shellcheck disable=SC2086
            set -- $spec
            tg_built "$1" "$2" 1 1 && continue
            log=$B/build_$1_$2.log
            tg_build "$1" "$2" 1 1 >"$log" 2>&1 || { tg_notok "build $1 ($2) [1,1,1]" "$log"; return; }
        done
    done
    for a in "${atts[@]}"; do
        for spec in "$C12 blocks" "$CLM lm"; do
            # shellcheck disable=SC2086
            set -- $spec
            tg_check "compare: tessgen $1 forward [1,1,1], bf16${a:+, attention = $a}, --repeat 20" cmp_forward "$1" "$2" "$a"
            tg_check "compare: tessgen $1 training step [1,1,1], bf16${a:+, attention = $a}, --steps 10 --timing" \
                cmp_step "$1" "$2" "$a"
        done
    done
    # the step's time per kind without overlap: every launch waits for the previous one (CUDA_LAUNCH_BLOCKING=1, no
    # CUDA graph), so the kinds' spans no longer overlap across the two streams; each launch's latency is included
    tg_check "compare: tessgen $C12 training step [1,1,1], bf16${atts[-1]:+, attention = ${atts[-1]}}, serialised (CUDA_LAUNCH_BLOCKING=1 TESS_CUDA_GRAPH=0): time per kind without overlap" \
        cmp_serial "$C12" "${atts[-1]}"
    cp "$B"/cmp_*.txt "$TG_OUT/" 2>/dev/null
}
# fusion: the 12 blocks' bf16 training step and forward ([1,1,1], attention = "cudnn" where cuDNN is found) with the
# spec's epilogues (the default) and with epilogues = false (every bias, GeLU and gradient step a kernel of its own:
# the side-by-side control of a fusion), alternated three times so that drift hits both; medians of each run's
# median into $OUT/fusion.md
fusion_one() { # mode round
    local f=$B/fusion_$1_$2.txt
    case $1 in
    infer*) tg_run "$C12" "$1" 1 1 --repeat 20 >"$f" 2>&1 && [ -n "$(value forward_seconds_median "$f")" ] ;;
    *) tg_run "$C12" "$1" 1 1 --steps 10 --timing >"$f" 2>&1 && [ -n "$(value step_seconds_median "$f")" ] ;;
    esac
}
part_fusion() {
    local a="" m r log
    [ -n "$TG_CUDNN" ] && a=cudnn
    local modes=("train16$a" "train16${a}noepi" "infer16$a" "infer16${a}noepi")
    rm -f "$B"/fusion_*.txt
    for m in "${modes[@]}"; do
        tg_built "$C12" "$m" 1 1 && continue
        log=$B/build_${C12}_$m.log
        tg_build "$C12" "$m" 1 1 >"$log" 2>&1 || { tg_notok "build $C12 ($m) [1,1,1]" "$log"; return; }
    done
    for r in 1 2 3; do
        for m in "${modes[@]}"; do
            tg_check "fusion: tessgen $C12 [1,1,1] $m, round $r" fusion_one "$m" "$r"
        done
    done
    {
        echo "| $C12 [1,1,1], bf16${a:+, attention = $a}: median of 3 runs' medians, ms | epilogues (default) | epilogues = false | ratio |"
        echo "|---|---:|---:|---:|"
        for k in train16 infer16; do
            local key=step_seconds_median
            [ "$k" = infer16 ] && key=forward_seconds_median
            local x y
            x=$(for r in 1 2 3; do value $key "$B/fusion_$k${a}_$r.txt"; done | sort -g | sed -n 2p)
            y=$(for r in 1 2 3; do value $key "$B/fusion_$k${a}noepi_$r.txt"; done | sort -g | sed -n 2p)
            [ -n "$x" ] && [ -n "$y" ] && awk -v k="$k" -v x="$x" -v y="$y" \
                'BEGIN { printf "| %s | %.3f | %.3f | %.3f |\n", k == "train16" ? "training step" : "forward", 1e3 * x, 1e3 * y, y / x }'
        done
    } | tee "$TG_OUT/fusion.md" | tee -a "$TG_LOG"
    cp "$B"/fusion_*.txt "$TG_OUT/" 2>/dev/null
}
part_compare_torch() {
    local L C H F S Bt V P
    if [ "$(tg_dims "$C12")" != "$(tg_dims "$CLM")" ]; then
        tg_notok "compare: $C12 and $CLM have other dimensions (tests/gpu/env.sh); torch_bench.py takes one shape"
        return
    fi
    read -r L C H F S Bt <<<"$(tg_dims "$C12")"
    read -r V P <<<"$(tg_lmdims "$CLM")"
    torch_check "compare: $C12 and $CLM in PyTorch, autocast bf16 (check vs tessref in float64; eager and torch.compile)" \
        "$B/torch_bf16.json" --layers "$L" --hidden "$C" --heads "$H" --ffn "$F" --seq "$S" --batch "$Bt" \
        --vocab "$V" --positions "$P" --precs bf16 --models blocks,gpt2
}

bf16_forward() { tg_run "$P12" "infer$1" 1 1 --repeat 20 >"$B/forward_dt${1:-32}.txt" 2>&1; } # "" or 16
bf16_step() { tg_run "$P12" "train$1" 1 1 --steps 10 --timing >"$B/step_dt${1:-32}.txt" 2>&1; }
bf16_profile() {
    TESS_PROFILE=1 tg_run "$P2" infer16 1 1 --repeat 20 >"$B/profile_bf16.txt" 2>&1 && cp "$B/profile_bf16.txt" "$TG_OUT/"
}
part_bf16() {
    local spec log dt
    local specs=("$P2 infer16" "$P12 infer" "$P12 train" "$P12 infer16" "$P12 train16") dts=("" 16)
    if [ -n "$TG_CUDNN" ]; then # attention = "cudnn" beside them where cuDNN is found (tests/gpu/env.sh)
        specs+=("$P12 infer16cudnn" "$P12 train16cudnn")
        dts+=(16cudnn)
    fi
    for spec in "${specs[@]}"; do
        # shellcheck disable=SC2086
        set -- $spec
        tg_built "$1" "$2" 1 1 && continue
        log=$B/build_$1_$2.log
        tg_build "$1" "$2" 1 1 >"$log" 2>&1 || { tg_notok "build $1 ($2) [1,1,1]" "$log"; return; }
    done
    for dt in "${dts[@]}"; do # side by side: fp32, then bf16 (then bf16 with attention = "cudnn")
        local name=fp32
        [ -n "$dt" ] && name=bf16
        [ "$dt" = 16cudnn ] && name="bf16, attention = cudnn"
        tg_check "bf16: $P12 forward [1,1,1], $name, --repeat 20" bf16_forward "$dt"
        tg_check "bf16: $P12 training step [1,1,1], $name, --steps 10" bf16_step "$dt"
    done
    if [ "$TG_STANDIN" != 1 ]; then
        tg_check "bf16: TESS_PROFILE report, $P2 [1,1,1], bf16" bf16_profile
    fi
    {
        echo "# tessgen bf16 against fp32 on $TG_GPU"
        echo
        echo "$P12 ($(tg_dims "$P12")) on [1,1,1], one run of tests/gpu/bench.sh bf16: medians in milliseconds."
        echo
        echo "| | fp32 | bf16 | bf16/fp32 | bf16, attention = \"cudnn\" |"
        echo "|---|---:|---:|---:|---:|"
        local k f32 f16 fdn
        for k in forward_seconds_median step_seconds_median gemm_seconds attention_seconds layernorm_seconds \
            residual_seconds gelu_seconds cast_seconds optimizer_seconds; do
            for f in forward step; do
                f32=$(value "$k" "$B/${f}_dt32.txt") f16=$(value "$k" "$B/${f}_dt16.txt")
                fdn=$(value "$k" "$B/${f}_dt16cudnn.txt" 2>/dev/null)
                if [ -z "$f32" ] || [ -z "$f16" ]; then continue; fi
                local label="$f: ${k%_seconds*}"
                case $k in forward_seconds_median) label="forward (median)" ;; step_seconds_median) label="training step (median)" ;; esac
                awk -v k="$label" -v a="$f32" -v b="$f16" -v c="$fdn" -v dn="$TG_CUDNN" \
                    'BEGIN { printf "| %s | %.3f | %.3f | %s | %s |\n", k, 1e3 * a, 1e3 * b, (a > 0 ? sprintf("%.2f", b / a) : "-"),
                             (c != "" ? sprintf("%.3f", 1e3 * c) : (dn == "" ? "not run" : "-")) }'
            done
        done
    } >"$TG_OUT/bf16.md"
    cat "$TG_OUT/bf16.md"
    cp "$B"/forward_dt*.txt "$B"/step_dt*.txt "$TG_OUT/" 2>/dev/null
}

# decode: greedy decode of the whole GPT-2 (small with 1 and 8 sequences, medium with 8) on [1,1,1], fp32 and bf16:
# tessgen's mode = "generate" program (synthetic weights, prompts of 64 random ids, 128 new, run --generate --timing:
# the median decode step) beside PyTorch's static-cache decode loop, eager and torch.compile(mode="reduce-overhead")
# (tests/gpu/torch_decode.py, checked against tessref generate in float64 first); table $OUT/decode.md
DEC_MODELS="gpt2g1 gpt2g gpt2mg"
[ "${TESS_BENCH_SMALL:-0}" = 1 ] && DEC_MODELS=lmtinyg
decode_one() { # model mode
    local f=$B/decode_$1_$2.txt L C H F S Bt
    read -r L C H F S Bt <<<"$(tg_dims "$1")"
    [ -f "$B/decode_p_$Bt.npy" ] || "$PY" -c "import numpy as np, sys; np.save(sys.argv[1],
np.random.default_rng(7).integers(0, 999, size=(int(sys.argv[2]), int(sys.argv[3]))).astype(np.int32))" \
        "$B/decode_p_$Bt.npy" "$Bt" "$((S / 2))" || return 1
    tg_run "$1" "$2" 1 1 --generate --prompt-tokens "$B/decode_p_$Bt.npy" --max-new "$S" --timing \
        --output "$B/decode_$1_$2.npy" >"$f" 2>&1 && [ -n "$(value decode_seconds_median "$f")" ]
}
part_decode() {
    local m mode log L C H F S Bt V P
    for m in $DEC_MODELS; do
        for mode in generate generate16; do
            tg_built "$m" "$mode" 1 1 && continue
            log=$B/build_${m}_$mode.log
            tg_build "$m" "$mode" 1 1 >"$log" 2>&1 || { tg_notok "build $m ($mode) [1,1,1]" "$log"; continue; }
        done
        read -r L C H F S Bt <<<"$(tg_dims "$m")"
        read -r V P <<<"$(tg_lmdims "$m")"
        for mode in generate generate16; do
            tg_check "decode: tessgen $m [1,1,1] $mode, $Bt sequences, prompts of $((S / 2)), $S new: median decode step" \
                decode_one "$m" "$mode"
        done
        TORCH_SCRIPT=torch_decode torch_check "torch: $m greedy decode, static cache, eager and torch.compile, fp32 and bf16 (checked against tessref generate in float64)" \
            "$B/torch_decode_$m.json" --layers "$L" --hidden "$C" --heads "$H" --ffn "$F" --vocab "$V" \
            --positions "$P" --batch "$Bt" --prompt "$((S / 2))" --context "$P" --steps 64
    done
    local mb=""
    for m in $DEC_MODELS; do mb="$mb $m:$(tg_dims "$m" | cut -d' ' -f6)"; done
    "$PY" - "$B" "$mb" <<'PYEOF' | tee "$TG_OUT/decode.md" | tee -a "$TG_LOG"
import json, os, sys
B, models = sys.argv[1], [x.split(":") for x in sys.argv[2].split()]
def val(f, k):
    try:
        return float([l.split("=", 1)[1] for l in open(f) if l.startswith(k + "=")][-1])
    except (OSError, IndexError, ValueError):
        return None
print("| model | sequences | dtype | tessgen decode step ms | tessgen tokens/s | torch eager ms | torch compile ms | tessgen / torch compile tokens/s |")
print("|---|---|---|---|---|---|---|---|")
for m, bt in models:
    bt = int(bt)
    try:
        tj = json.load(open(os.path.join(B, f"torch_decode_{m}.json"))).get("runs", {})
    except (OSError, ValueError):
        tj = {}
    for mode, prec in (("generate", "fp32"), ("generate16", "bf16")):
        t = val(os.path.join(B, f"decode_{m}_{mode}.txt"), "decode_seconds_median")
        e, c = tj.get(f"eager_{prec}", {}).get("step_ms"), tj.get(f"compile_{prec}", {}).get("step_ms")
        f = lambda x: "-" if x is None else "%.3f" % x
        print(f"| {m} | {bt} | {prec} | {f(t and t * 1e3)} | {'-' if not t else '%.0f' % (bt / t)} | {f(e)} | {f(c)} | "
              f"{'-' if not (t and c) else '%.2f' % (c / (t * 1e3))} |")
PYEOF
}

part_report() {
    tg_check "report: $TG_OUT/bench.md" "$PY" "$TG_REPO/tests/gpu/bench_report.py" --dir "$B" --device "$TG_GPU" \
        --shape "$(tg_dims "$P12")" --profile-shape "$(tg_dims "$P2")" --cmp-shape "$(tg_dims "$C12")" \
        --cmp-lm "$(tg_lmdims "$CLM")" --out "$TG_OUT/bench.md"
    [ -f "$TG_OUT/bench.md" ] && cat "$TG_OUT/bench.md"
}

for p in "${parts[@]}"; do
    case "$p" in
    tessgen) part_tessgen ;;
    torch) part_torch ;;
    report) part_report ;;
    bf16) part_bf16 ;;
    compare) part_compare_tessgen; part_compare_torch ;;
    compare-tessgen) part_compare_tessgen ;;
    compare-torch) part_compare_torch ;;
    fusion) part_fusion ;;
    decode) part_decode ;;
    *) echo "bench.sh: unknown part $p (tessgen, torch, compare, compare-tessgen, compare-torch, report, bf16, fusion, decode)" >&2
       exit 2 ;;
    esac
done
tg_summary
