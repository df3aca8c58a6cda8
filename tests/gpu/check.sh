#!/usr/bin/env bash
# tests/gpu/check.sh STAGE... - the CUDA backend's correctness on a machine with one NVIDIA GPU, as the device
# machines are (nvcc, cuBLAS, python3 with numpy; no Open MPI, no Lua): tests/gpu/env.sh sets it up from
# build/gpu-carry (tests/gpu/prepare.sh). Every comparison is against the float64 numpy reference
# tests/ref/tessref.py, relative Frobenius error; several ranks share the GPU through MPI-staged collectives.
#
#   env        what is there (GPU, driver, nvcc, host compiler, NCCL, MPI, Python); a 2-rank MPI program; the
#              tiny model built and run on [1,1,1] against the reference
#   inference  head dim 64 (m64: C=256, 4 heads, seq 100) and 128 (m128: C=512, 4 heads, seq 72; neither seq a
#              multiple of the kernels' tiles) on [1,1,1], [2,2,1], [2,2,2]: output within 1e-4, bytes as planned
#   training   the same models and meshes, mode = "train": one forward + backward with --dy, dL/dx and all weight
#              gradients within 1e-4, bytes as planned; 5 AdamW steps with --replica-check (bitwise identical
#              replicas); m64's 20-step losses equal on the three meshes (1e-4), within 1e-3 of float64, falling;
#              m64 [1,1,1] 10 steps replayed from CUDA graphs against TESS_CUDA_GRAPH=0: losses and weights
#              bitwise equal, both step times printed side by side; m64 on 2 pipeline stages of [1,1,1] with 2
#              micro-batches: 5 steps' losses within 1e-5 of the pp = 1 program's, bytes as planned, replicas bitwise;
#              the column sums and layernorm backward outside any schedule (tests/cuda/lnb_check.sh bench: bits
#              equal to the emulation's, 1e-5 of double, repeatable, microbenchmark printed); attention outside
#              any schedule (tests/cuda/attn_check.sh bench: softmax kernels and launchers against double, timed);
#              the float layernorm statistics and vocabulary loss kernels (tests/cuda/rows_check.sh bench: 1e-6 of
#              double, repeatable, timed);
#              the multi-tensor AdamW step outside any schedule (tests/cuda/adamw_check.sh bench: bit for bit a
#              CPU loop, bf16 weight copies included; GPT-2 small's 85M parameters timed);
#              the cuBLASLt epilogues (tests/cuda/lt_check.sh bench: against double and GEMM + kernel, timed)
#   races      runs repeated, and repeated under CUDA_LAUNCH_BLOCKING=1 (every launch serialised): outputs,
#              gradients and trained weights bitwise identical (a missing stream wait shows up as a difference)
#   sanitizer  compute-sanitizer memcheck, racecheck, initcheck and synccheck on the tiny model, inference and
#              forward + backward, [1,1,1] and (memcheck, racecheck) [2,2,1]: no error, output still correct
#   tf32       TESS_TF32=1: m64 forward on [1,1,1] and [2,2,1] within 5e-3, gradients on [2,2,1] within 1e-2 of
#              float64 (TF32 rounds GEMM inputs to 10 mantissa bits, about 5e-4 each); the fp32 error beside it
#   bf16       dtype = "bf16" (docs/BF16.md): the bf16 kernels, cast, GEMM and their outputs outside any schedule
#              (tests/cuda/bf16_check.sh run); m64 on [1,1,1], [2,2,1], [2,2,2]: forward within 3e-3 of tessref
#              --bf16 and 1e-2 of float64, bytes as planned; dL/dx and every gradient within 1e-2 of --bf16 and
#              2e-2 of float64; 5 AdamW steps, replicas bitwise identical; 20-step losses equal across the meshes
#              (1e-3), within 1e-3 of --bf16 and 1e-2 of float64, falling (the tolerances: docs/BF16.md)
#              Then attention = "cudnn" (docs/CUDA.md), where cuDNN is found (tests/gpu/env.sh; else a skip line):
#              tests/cuda/sdpa_check.sh bench (cuDNN's fused attention against the cuBLAS path and double, timed)
#              and m64 on [1,1,1], [2,2,1] with the same tolerances, replicas bitwise identical
#   lm         the whole GPT-2 (model.vocab 999, padded on q = 2; lm64: the m64 blocks, positions 128), training
#              programs: on [1,1,1] and [2,2,1] the logits (--logits-out) within 1e-4 and the loss within 1e-5 of
#              float64, every gradient (wte, wpe, ln_f, blocks) within 1e-4, bytes as planned; [2,2,2]: 3 AdamW
#              steps, replicas bitwise identical; in bf16 on [2,2,1]: logits within 3e-3 of --bf16 and 1e-2 of
#              float64, gradients within 1e-2 of --bf16 and 2e-2 of float64
#   generate   text generation (docs/GENERATE.md): the generation kernels outside any schedule (tests/cuda/decode_check.sh
#              bench: against double and a host scan, timed); lm64 with mode = "generate" on [1,1,1] and [2,2,1], 8
#              prompts of 1 to 100 tokens and 20 new tokens each: greedy ids token for token and every new token's
#              logits within 1e-4 of tessref.py generate (float64), bytes as planned; the same in bf16 (generate16)
#              against generate --bf16 (gen16_ok says why its tolerance)
#   all        every stage above, in this order
#
# Output: ok / not ok lines, "N passed, N failed, N skipped" last, exit 0 when none failed; the same lines in
# $OUT/check.txt and every log in $OUT/logs.tar.gz. Each stage ends well inside the device tool's 10 minutes
# on an H100 (builds for this GPU's architecture only, 16 cores); runs are limited to 240 s each.
set -u
# shellcheck source=tests/gpu/env.sh
. "$(dirname "$0")/env.sh"
[ $# -ge 1 ] || { sed -n '2,/^set -u$/{/^set -u$/!p}' "$0"; exit 2; } # the header above, whole
stages=("$@")
[ "$*" = all ] && stages=(env inference training races sanitizer tf32 bf16 lm generate)
for s in "${stages[@]}"; do
    case "$s" in env | inference | training | races | sanitizer | tf32 | bf16 | lm | generate) ;; *) echo "check.sh: unknown stage $s" >&2; exit 2 ;; esac
done
TG_TIMEOUT=${TESS_GPU_RUN_TIMEOUT:-240}
REF=$TG_REPO/tests/ref/tessref.py
MESHES=${TESS_GPU_MESHES:-"1,1 2,1 2,2"} # a second lease may narrow it (tests/gpu/lease.sh)

if ! tg_setup >"$TG_OUT/setup.log" 2>&1; then
    cat "$TG_OUT/setup.log"
    tg_notok "set up the machine from build/gpu-carry (tests/gpu/env.sh)" "$TG_OUT/setup.log"
    tg_summary
    exit 1
fi
tg_say "# check.sh ${stages[*]}: $TG_GPU; sm_$TESS_CUDA_ARCH; $("$TG_NVCC" --version | tail -1)$([ "$TG_STANDIN" = 1 ] && echo "; STAND-IN: no GPU code runs")"

# run with the per-run time limit (a hang must not eat the device tool's 10 minutes)
run() { timeout -k 10 "$TG_TIMEOUT" "$@"; }

# ---- checks ------------------------------------------------------------------------------------------------
forward_ok() { # model q d tol [env...]: output vs the float64 forward, bytes as planned
    local m=$1 q=$2 d=$3 tol=$4 dir
    shift 4
    dir=$(tg_dir "$m" infer "$q" "$d")
    # shellcheck disable=SC2046
    tg_poison "$dir/y.npy" $(tg_bsc "$m") &&
        run env "$@" TESS_BACKEND=cuda TESS_COMM="$(comm_of "$q" "$d")" "$dir/run" \
            --weights "$TG_WORK/ref_$m/w.safetensors" --input "$TG_WORK/ref_$m/x.npy" --output "$dir/y.npy" --bytes &&
        "$PY" "$REF" compare --ref "$TG_WORK/ref_$m/y.npy" --got "$dir/y.npy" --tol "$tol" --expect-f32 \
            --label "$m [$q,$q,$d] forward${*:+ ($*)}"
}
comm_of() { [ $(($1 * $1 * $2)) -gt 1 ] && echo mpi || echo auto; }

grads_ok() { # model q d tol [env...]: dL/dx and every weight gradient vs the float64 backward, bytes as planned
    local m=$1 q=$2 d=$3 tol=$4 dir
    shift 4
    dir=$(tg_dir "$m" train "$q" "$d")
    # shellcheck disable=SC2046
    tg_poison "$dir/dx.npy" $(tg_bsc "$m") && rm -f "$dir/g.safetensors" &&
        run env "$@" TESS_BACKEND=cuda TESS_COMM="$(comm_of "$q" "$d")" "$dir/run" \
            --weights "$TG_WORK/ref_$m/w.safetensors" --input "$TG_WORK/ref_$m/x.npy" --dy "$TG_WORK/ref_$m/dy.npy" \
            --dx-out "$dir/dx.npy" --grads-out "$dir/g.safetensors" --bytes &&
        "$PY" "$REF" compare --ref "$TG_WORK/ref_$m/dx.npy" --got "$dir/dx.npy" --tol "$tol" --expect-f32 \
            --label "$m [$q,$q,$d] dL/dx${*:+ ($*)}" &&
        "$PY" "$REF" compare-grads --ref "$TG_WORK/ref_$m/g.safetensors" --got "$dir/g.safetensors" --tol "$tol" \
            --label "$m [$q,$q,$d]${*:+ ($*)}"
}

# replicas_run MODEL MODE q d ARGS...: a run with --replica-check, every replicated shard bitwise identical
replicas_run() {
    local dir
    dir=$(tg_dir "$1" "$2" "$3" "$4")
    tg_run "$@" --replica-check | tee "$dir/replicas.out" && grep -q "bitwise identical" "$dir/replicas.out"
}
replicas_ok() { # model q d [mode]: 5 AdamW steps
    replicas_run "$1" "${4:-train}" "$2" "$3" --weights "$TG_WORK/ref_$1/w.safetensors" --input "$TG_WORK/ref_$1/x.npy" \
        --target "$TG_WORK/ref_$1/target.npy" --steps 5
}

stages_ok() { # model: 5 AdamW steps on 2 pipeline stages of [1,1,1] with 2 micro-batches (MODE trainpp2) against the
    # pp = 1 program without micro-batches: the losses within 1e-5 (the micro-batches' GEMMs have other shapes), every
    # rank's collective and point-to-point bytes as planned, replicas bitwise; the two stages share the GPU (MPI staging)
    local m=$1 args dir
    dir=$(tg_dir "$m" trainpp2 1 1)
    args=(--weights "$TG_WORK/ref_$m/w.safetensors" --input "$TG_WORK/ref_$m/x.npy" --target "$TG_WORK/ref_$m/target.npy"
        --steps 5)
    tg_run "$m" train 1 1 "${args[@]}" | grep -E '^(step|after) ' >"$dir.pp1.txt" &&
        tg_run "$m" trainpp2 1 1 "${args[@]}" --bytes --replica-check >"$dir.pp2.out" || return 1
    cat "$dir.pp2.out"
    grep -q "^bytes: every rank moved exactly the planned bytes$" "$dir.pp2.out" &&
        grep -q "^bytes: every rank's sends and receives between stages moved exactly the planned bytes$" "$dir.pp2.out" &&
        grep -q "bitwise identical to its replicas" "$dir.pp2.out" || return 1
    "$PY" "$REF" compare-step-losses "$dir.pp1.txt" "$dir.pp2.out" --tol 1e-5 --count 6 --labels "pp = 1,2 stages"
}

losses_ok() { # model: 20 steps on the three meshes, equal, falling, close to float64
    local m=$1 q d
    for qd in $MESHES; do
        q=${qd%,*} d=${qd#*,}
        tg_run "$m" train "$q" "$d" --weights "$TG_WORK/ref_$m/w.safetensors" --input "$TG_WORK/ref_$m/x.npy" \
            --target "$TG_WORK/ref_$m/target.npy" --steps 20 | grep '^step ' >"$TG_WORK/loss_${m}_${q}_$d.txt" ||
            return 1
    done
    "$PY" - "$TG_WORK" "$m" <<'PYEOF'
import sys
w, m = sys.argv[1], sys.argv[2]
def losses(f):
    return [float(l.split()[3]) for l in open(f) if l.startswith("step ")]
ref = losses(f"{w}/ref_{m}/loss.txt")
runs = {qd: losses(f"{w}/loss_{m}_{qd}.txt") for qd in ("1_1", "2_1", "2_2")}
ok = len(ref) == 20 and all(len(v) == 20 for v in runs.values())
base = runs["1_1"]
worst_mesh = worst_ref = 0.0
for qd, v in runs.items():
    for k in range(min(20, len(v))):
        a = abs(v[k] - base[k]) / abs(base[k]); worst_mesh = max(worst_mesh, a)
        b = abs(v[k] - ref[k]) / abs(ref[k]); worst_ref = max(worst_ref, b)
        if a > 1e-4:
            print(f"mesh {qd} step {k + 1}: loss {v[k]:.9g} vs [1,1,1] {base[k]:.9g} (rel {a:.2e} > 1e-4)"); ok = False
        if b > 1e-3:
            print(f"mesh {qd} step {k + 1}: loss {v[k]:.9g} vs float64 {ref[k]:.9g} (rel {b:.2e} > 1e-3)"); ok = False
    if not (len(v) == 20 and v[-1] < v[0] and all(b < a for a, b in zip(v, v[1:]))):
        print(f"mesh {qd}: loss does not fall at every step: {v}"); ok = False
print(f"losses: worst rel difference between meshes {worst_mesh:.2e} (tol 1e-4), to float64 {worst_ref:.2e} "
      f"(tol 1e-3); step 1 {base[0]:.6g}, step 20 {base[-1]:.6g}")
sys.exit(0 if ok else 1)
PYEOF
}

graph_ok() { # model: 10 steps on [1,1,1] replayed from CUDA graphs and issued one by one (TESS_CUDA_GRAPH=0): the
    # same losses and weights bitwise; both step times, side by side
    local m=$1 dir g
    dir=$(tg_dir "$m" train 1 1)
    for g in 1 0; do
        TESS_CUDA_GRAPH=$g tg_run "$m" train 1 1 --weights "$TG_WORK/ref_$m/w.safetensors" \
            --input "$TG_WORK/ref_$m/x.npy" --target "$TG_WORK/ref_$m/target.npy" --steps 10 --timing \
            --weights-out "$dir/graph$g.safetensors" >"$dir/graph$g.out" 2>&1 || { tail -5 "$dir/graph$g.out"; return 1; }
    done
    { grep -qx "step_graph_replays=2" "$dir/graph1.out" && grep -qx "step_graph_replays=0" "$dir/graph0.out"; } ||
        { grep -E "^(CUDA graphs|step_graph)" "$dir/graph"[01].out; echo "want 2 graph replays per step, and none with TESS_CUDA_GRAPH=0"; return 1; }
    diff <(grep -E '^(step [0-9]|after)' "$dir/graph1.out" | sed 's/ tok\/s.*//') \
        <(grep -E '^(step [0-9]|after)' "$dir/graph0.out" | sed 's/ tok\/s.*//') || { echo "losses differ"; return 1; }
    cmp "$dir/graph1.safetensors" "$dir/graph0.safetensors" || { echo "weights differ"; return 1; }
    echo "graph: step median $(sed -n 's/^step_seconds_median=//p' "$dir/graph1.out") s with CUDA graphs," \
        "$(sed -n 's/^step_seconds_median=//p' "$dir/graph0.out") s with TESS_CUDA_GRAPH=0; launches a step" \
        "$(sed -n 's/^step_launches=//p' "$dir/graph1.out"), issued one by one" \
        "$(sed -n 's/^step_launches_issued=//p' "$dir/graph1.out") and $(sed -n 's/^step_launches_issued=//p' "$dir/graph0.out")"
}

# ---- races: bitwise identical outputs, with and without serialised launches --------------------------------
same_bits() { # label file...: every file equals the first, byte for byte
    local label=$1 first=$2 f
    shift 2
    for f in "$@"; do
        cmp -s "$first" "$f" || { echo "$label: $f differs from $first"; cmp "$first" "$f" | head -3; return 1; }
    done
    echo "$label: $(($# + 1)) runs bitwise identical ($(wc -c <"$first") bytes)"
}
race_infer() { # model q d
    local m=$1 q=$2 d=$3 dir k
    dir=$(tg_dir "$m" infer "$q" "$d")
    for k in a b c; do
        # shellcheck disable=SC2046
        tg_poison "$dir/y_$k.npy" $(tg_bsc "$m") || return 1
        local clb=0
        [ $k = c ] && clb=1
        CUDA_LAUNCH_BLOCKING=$clb TESS_MPIRUN_ARGS="-x CUDA_LAUNCH_BLOCKING" tg_run "$m" infer "$q" "$d" \
            --weights "$TG_WORK/ref_$m/w.safetensors" --input "$TG_WORK/ref_$m/x.npy" --output "$dir/y_$k.npy" \
            --quiet || return 1
    done
    same_bits "$m [$q,$q,$d] forward (c: CUDA_LAUNCH_BLOCKING=1)" "$dir/y_a.npy" "$dir/y_b.npy" "$dir/y_c.npy"
}
race_grads() { # model q d
    local m=$1 q=$2 d=$3 dir k
    dir=$(tg_dir "$m" train "$q" "$d")
    for k in a b c; do
        local clb=0
        [ $k = c ] && clb=1
        rm -f "$dir/dx_$k.npy" "$dir/g_$k.safetensors"
        CUDA_LAUNCH_BLOCKING=$clb TESS_MPIRUN_ARGS="-x CUDA_LAUNCH_BLOCKING" tg_run "$m" train "$q" "$d" \
            --weights "$TG_WORK/ref_$m/w.safetensors" --input "$TG_WORK/ref_$m/x.npy" --dy "$TG_WORK/ref_$m/dy.npy" \
            --dx-out "$dir/dx_$k.npy" --grads-out "$dir/g_$k.safetensors" --quiet || return 1
    done
    same_bits "$m [$q,$q,$d] dL/dx" "$dir/dx_a.npy" "$dir/dx_b.npy" "$dir/dx_c.npy" &&
        same_bits "$m [$q,$q,$d] weight gradients" "$dir/g_a.safetensors" "$dir/g_b.safetensors" "$dir/g_c.safetensors"
}
race_steps() { # model q d: 5 AdamW steps, the trained weights
    local m=$1 q=$2 d=$3 dir k
    dir=$(tg_dir "$m" train "$q" "$d")
    for k in a b c; do
        local clb=0
        [ $k = c ] && clb=1
        rm -f "$dir/w_$k.safetensors"
        CUDA_LAUNCH_BLOCKING=$clb TESS_MPIRUN_ARGS="-x CUDA_LAUNCH_BLOCKING" tg_run "$m" train "$q" "$d" \
            --weights "$TG_WORK/ref_$m/w.safetensors" --input "$TG_WORK/ref_$m/x.npy" \
            --target "$TG_WORK/ref_$m/target.npy" --steps 5 --weights-out "$dir/w_$k.safetensors" --quiet || return 1
    done
    same_bits "$m [$q,$q,$d] weights after 5 AdamW steps" "$dir/w_a.safetensors" "$dir/w_b.safetensors" \
        "$dir/w_c.safetensors"
}

# ---- sanitizer --------------------------------------------------------------------------------------------
sanitizer_bin() {
    command -v compute-sanitizer 2>/dev/null && return
    local c
    for c in "$(dirname "$TG_NVCC")/compute-sanitizer" "$(dirname "$TG_NVCC")/../compute-sanitizer/compute-sanitizer"; do
        [ -x "$c" ] && { echo "$c"; return; }
    done
    return 1
}
sanitize() { # tool mode q d: the tiny model under compute-sanitizer --tool TOOL, every rank
    local tool=$1 mode=$2 q=$3 d=$4 np dir san flags="" TG_TIMEOUT=360 # the sanitizer slows the tiny model down
    np=$((q * q * d))
    dir=$(tg_dir tiny "$mode" "$q" "$d")
    san=$(sanitizer_bin) || { echo "compute-sanitizer not found"; return 1; }
    [ "$(id -u)" = 0 ] && flags="--allow-run-as-root"
    local launcher="mpirun $flags --oversubscribe --bind-to none -np $np $san --tool $tool --error-exitcode 86 --print-limit 20"
    [ "$tool" = racecheck ] && launcher="$launcher --racecheck-report all"
    if [ "$mode" = infer ]; then
        # shellcheck disable=SC2046
        tg_poison "$dir/y.npy" $(tg_bsc tiny) &&
            TESS_LAUNCHER=$launcher tg_run tiny infer "$q" "$d" --weights "$TG_WORK/ref_tiny/w.safetensors" \
                --input "$TG_WORK/ref_tiny/x.npy" --output "$dir/y.npy" &&
            "$PY" "$REF" compare --ref "$TG_WORK/ref_tiny/y.npy" --got "$dir/y.npy" --tol 1e-4 --expect-f32 \
                --label "tiny [$q,$q,$d] forward under $tool"
    else
        # shellcheck disable=SC2046
        tg_poison "$dir/dx.npy" $(tg_bsc tiny) &&
            TESS_LAUNCHER=$launcher tg_run tiny train "$q" "$d" --weights "$TG_WORK/ref_tiny/w.safetensors" \
                --input "$TG_WORK/ref_tiny/x.npy" --dy "$TG_WORK/ref_tiny/dy.npy" --dx-out "$dir/dx.npy" &&
            "$PY" "$REF" compare --ref "$TG_WORK/ref_tiny/dx.npy" --got "$dir/dx.npy" --tol 1e-4 --expect-f32 \
                --label "tiny [$q,$q,$d] dL/dx under $tool"
    fi
}

# ---- stages -----------------------------------------------------------------------------------------------
# kernel_check NAME MODE: tests/cuda/NAME_check.sh OUTDIR MODE (compile, then run or bench), or only its run where
# tests/gpu/lease.sh compiled it already (TESS_GPU_PREBUILT=1 and the binary is there)
kernel_check() {
    local bin=$TG_WORK/${1}k/${1}_check
    if [ "${TESS_GPU_PREBUILT:-0}" = 1 ] && [ -x "$bin" ]; then
        if [ "$2" = bench ]; then "$bin" bench; else "$bin"; fi
    else
        env TESS_NVCC="$TG_NVCC" "$TG_REPO/tests/cuda/${1}_check.sh" "$TG_WORK/${1}k" "$2"
    fi
}
build_check() { # model mode q d: one check line when the build fails, silence when it works
    tg_built "$@" && [ "${TESS_GPU_REBUILD:-0}" != 1 ] && return 0
    local log=$TG_WORK/build_$1_$2_$3_$4.log
    if tg_build "$@" >"$log" 2>&1; then
        grep -h "compiler warning lines" "$log" | sed 's/^/# /' | tee -a "$TG_LOG"
        return 0
    fi
    tg_notok "build $1 ($2) [$3,$3,$4]: bin/model-cuda" "$log"
    return 1
}
ref_check() { # model
    tg_refdata "$1" >"$TG_WORK/ref_$1.log" 2>&1 && return 0
    tg_notok "float64 reference data for $1 (tests/ref/tessref.py)" "$TG_WORK/ref_$1.log"
    return 1
}
mpi_hello() {
    local d=$TG_WORK/hello
    mkdir -p "$d" && cat >"$d/hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    int r, s, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d: sum of ranks %d\n", r, s, sum);
    MPI_Finalize();
    return sum == s * (s - 1) / 2 ? 0 : 1;
}
EOF
    command -v mpicc mpirun && mpicc "$d/hello.c" -o "$d/hello" && ldd "$d/hello" | grep -E "libmpi|open-(rte|pal)" &&
        run mpirun --oversubscribe -np 2 "$d/hello"
}

stage_env() {
    {
        echo "GPU:      $TG_GPU (sm_$TESS_CUDA_ARCH)"
        echo "nvcc:     $TG_NVCC ($("$TG_NVCC" --version | tail -1))"
        echo "host c++: $(g++ --version 2>/dev/null | head -1 || echo 'g++ not found')"
        echo "cuBLAS:   ${TG_CUDALIB:-not found next to nvcc} (rpath: ${TESS_CUDA_LDFLAGS:-none})"
        echo "NCCL:     ${TESS_NCCL_HOME:-none set: the compiler search paths} $(sed -n 's/^#define NCCL_VERSION_CODE *//p' "${TESS_NCCL_HOME:-/nonexistent}/include/nccl.h" 2>/dev/null)"
        echo "MPI:      ${TG_MPI_ROOT:-system} ($(mpirun --version 2>&1 | head -1))"
        echo "python:   $PY ($("$PY" -c 'import numpy, sys; print(sys.version.split()[0], "numpy", numpy.__version__)'))"
        echo "torch:    $("$PY" -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null || echo 'not installed')"
        echo "tessgen:  $TG_TESSGEN ($("$TG_TESSGEN" --version 2>&1 | head -1))"
        echo "sanitizer: $(sanitizer_bin || echo 'not found')"
    } | tee "$TG_OUT/env.txt" | sed 's/^/# /' | tee -a "$TG_LOG"
    tg_check "env: Open MPI from the carried packages compiles and runs a 2-rank program" mpi_hello
    ref_check tiny || return
    build_check tiny infer 1 1 || return
    tg_check "env: tiny [1,1,1] built with nvcc, cuBLAS, NCCL; its forward matches the float64 reference (1e-4)" \
        forward_ok tiny 1 1 1e-4
}

stage_inference() {
    local m qd q d
    for m in m64 m128; do
        ref_check "$m" || continue
        for qd in $MESHES; do
            q=${qd%,*} d=${qd#*,}
            build_check "$m" infer "$q" "$d" || continue
            tg_check "inference: $m [$q,$q,$d] ($(tg_dims "$m" | awk '{print "head dim " $2/$3 ", seq " $5}'); $((q * q * d)) rank(s), $(comm_of "$q" "$d")): output within 1e-4 of float64, bytes as planned" \
                forward_ok "$m" "$q" "$d" 1e-4
        done
    done
}

stage_training() {
    local m qd q d
    if [ "$TG_STANDIN" != 1 ]; then
        tg_check "training: column sums and layernorm backward bit for bit the emulation's arithmetic, within 1e-5 of double, repeatable; timed (tests/cuda/lnb_check.cu)" \
            kernel_check lnb bench
        tg_check "training: attention (softmax kernels, cuBLAS strided-batched forward and backward, fp32 and bf16) against double; timed (tests/cuda/attn_check.cu)" \
            kernel_check attn bench
        tg_check "training: float row statistics and vocabulary loss kernels (no FP64) within 1e-6 of double, repeatable; timed (tests/cuda/rows_check.cu)" \
            kernel_check rows bench
        tg_check "training: multi-tensor AdamW (one launch, bf16 weight copies) bit for bit a CPU loop with tr_adamw's arithmetic; timed (tests/cuda/adamw_check.cu)" \
            kernel_check adamw bench
        tg_check "training: cuBLASLt GEMMs with bias, bias + GeLU and bias + GeLU + pre-activation epilogues (trc_gemm_lt) against double and the unfused path; timed against GEMM + kernel (tests/cuda/lt_check.cu)" \
            kernel_check lt bench
    fi
    for m in m64 m128; do
        ref_check "$m" || continue
        for qd in $MESHES; do
            q=${qd%,*} d=${qd#*,}
            build_check "$m" train "$q" "$d" || continue
            tg_check "training: $m [$q,$q,$d]: dL/dx and every weight gradient within 1e-4 of float64, bytes as planned" \
                grads_ok "$m" "$q" "$d" 1e-4
            tg_check "training: $m [$q,$q,$d]: 5 AdamW steps, replicas bitwise identical" replicas_ok "$m" "$q" "$d"
        done
    done
    if tg_built m64 train 1 1; then
        TG_SHOW="^graph:" tg_check "training: m64 [1,1,1] 10 steps replayed from CUDA graphs: losses and weights bitwise those issued one by one (TESS_CUDA_GRAPH=0); both step times" \
            graph_ok m64
    fi
    if tg_built m64 train 1 1 && build_check m64 trainpp2 1 1; then
        tg_check "training: m64 on 2 pipeline stages of [1,1,1] (2 micro-batches, 1f1b, sharing the GPU): 5 AdamW steps' losses within 1e-5 of the pp = 1 program's, collective and point-to-point bytes as planned, replicas bitwise" \
            stages_ok m64
    fi
    if tg_built m64 train 1 1 && tg_built m64 train 2 1 && tg_built m64 train 2 2; then
        tg_check "training: m64 20-step losses equal on [1,1,1] [2,2,1] [2,2,2] (1e-4), falling, within 1e-3 of float64" \
            losses_ok m64
    fi
}

stage_races() {
    ref_check m64 && ref_check m128 || return
    build_check m64 infer 2 2 && tg_check "races: m64 [2,2,2] forward: 3 runs bitwise identical, one under CUDA_LAUNCH_BLOCKING=1" \
        race_infer m64 2 2
    build_check m128 infer 1 1 && tg_check "races: m128 [1,1,1] forward: 3 runs bitwise identical, one under CUDA_LAUNCH_BLOCKING=1" \
        race_infer m128 1 1
    build_check m64 train 2 2 && tg_check "races: m64 [2,2,2] forward + backward: dL/dx and gradients bitwise identical over 3 runs, one serialised" \
        race_grads m64 2 2
    build_check m128 train 1 1 && tg_check "races: m128 [1,1,1] forward + backward: dL/dx and gradients bitwise identical over 3 runs, one serialised" \
        race_grads m128 1 1
    build_check m64 train 2 1 && tg_check "races: m64 [2,2,1] 5 AdamW steps: weights bitwise identical over 3 runs, one serialised" \
        race_steps m64 2 1
}

stage_sanitizer() {
    ref_check tiny || return
    if ! sanitizer_bin >/dev/null; then
        tg_ok "sanitizer: compute-sanitizer # skip not found next to nvcc or on PATH"
        return
    fi
    local t
    build_check tiny infer 1 1 && build_check tiny train 1 1 &&
        for t in memcheck racecheck initcheck synccheck; do
            tg_check "sanitizer: $t, tiny [1,1,1] forward: no error, output within 1e-4" sanitize "$t" infer 1 1
            tg_check "sanitizer: $t, tiny [1,1,1] forward + backward: no error, dL/dx within 1e-4" sanitize "$t" train 1 1
        done
    build_check tiny infer 2 1 && build_check tiny train 2 1 &&
        for t in memcheck racecheck; do
            tg_check "sanitizer: $t, tiny [2,2,1] (4 ranks on the GPU) forward: no error, output within 1e-4" sanitize "$t" infer 2 1
            tg_check "sanitizer: $t, tiny [2,2,1] forward + backward: no error, dL/dx within 1e-4" sanitize "$t" train 2 1
        done
}

tf32_forward() { # q d: the fp32 error, then TF32's
    forward_ok m64 "$1" "$2" 1e-4 && forward_ok m64 "$1" "$2" 5e-3 TESS_TF32=1
}
stage_tf32() {
    ref_check m64 || return
    local qd q d
    for qd in 1,1 2,1; do
        q=${qd%,*} d=${qd#*,}
        build_check m64 infer "$q" "$d" || continue
        tg_check "tf32: m64 [$q,$q,$d] forward, TESS_TF32=1: within 5e-3 of float64 (after the fp32 run, within 1e-4)" \
            tf32_forward "$q" "$d"
    done
    build_check m64 train 2 1 &&
        tg_check "tf32: m64 [2,2,1] forward + backward, TESS_TF32=1: dL/dx and every weight gradient within 1e-2 of float64" \
            grads_ok m64 2 1 1e-2 TESS_TF32=1
}

# ---- bf16 ------------------------------------------------------------------------------------------------------
bf16_forward() { # q d [16cudnn]: m64 in bf16 against tessref --bf16 and float64, bytes as planned
    local dir r=$TG_WORK/ref_m64
    dir=$(tg_dir m64 "infer${3:-16}" "$1" "$2")
    # shellcheck disable=SC2046
    tg_poison "$dir/y.npy" $(tg_bsc m64) &&
        tg_run m64 "infer${3:-16}" "$1" "$2" --weights "$r/w.safetensors" --input "$r/x.npy" --output "$dir/y.npy" --bytes &&
        "$PY" "$REF" compare --ref "$r/y16.npy" --got "$dir/y.npy" --tol 3e-3 --expect-f32 --label "m64 bf16 [$1,$1,$2] vs --bf16" &&
        "$PY" "$REF" compare --ref "$r/y.npy" --got "$dir/y.npy" --tol 1e-2 --expect-f32 --label "m64 bf16 [$1,$1,$2] vs float64"
}
bf16_grads() { # q d [16cudnn]
    local dir r=$TG_WORK/ref_m64
    dir=$(tg_dir m64 "train${3:-16}" "$1" "$2")
    # shellcheck disable=SC2046
    tg_poison "$dir/dx.npy" $(tg_bsc m64) && rm -f "$dir/g.safetensors" &&
        tg_run m64 "train${3:-16}" "$1" "$2" --weights "$r/w.safetensors" --input "$r/x.npy" --dy "$r/dy.npy" \
            --dx-out "$dir/dx.npy" --grads-out "$dir/g.safetensors" --bytes &&
        "$PY" "$REF" compare --ref "$r/dx16.npy" --got "$dir/dx.npy" --tol 1e-2 --expect-f32 --label "m64 bf16 [$1,$1,$2] dL/dx vs --bf16" &&
        "$PY" "$REF" compare --ref "$r/dx.npy" --got "$dir/dx.npy" --tol 2e-2 --expect-f32 --label "m64 bf16 [$1,$1,$2] dL/dx vs float64" &&
        "$PY" "$REF" compare-grads --ref "$r/g16.safetensors" --got "$dir/g.safetensors" --tol 1e-2 --label "m64 bf16 [$1,$1,$2] vs --bf16" &&
        "$PY" "$REF" compare-grads --ref "$r/g.safetensors" --got "$dir/g.safetensors" --tol 2e-2 --label "m64 bf16 [$1,$1,$2] vs float64"
}
bf16_losses() {
    local q d r=$TG_WORK/ref_m64
    for qd in $MESHES; do
        q=${qd%,*} d=${qd#*,}
        tg_run m64 train16 "$q" "$d" --weights "$r/w.safetensors" --input "$r/x.npy" --target "$r/target.npy" \
            --steps 20 | grep '^step ' >"$TG_WORK/loss16_${q}_$d.txt" || return 1
    done
    "$PY" "$REF" compare-losses --label "bf16 losses" --mesh-tol 1e-3 --falling \
        --run "[1,1,1]=$TG_WORK/loss16_1_1.txt" --run "[2,2,1]=$TG_WORK/loss16_2_1.txt" \
        --run "[2,2,2]=$TG_WORK/loss16_2_2.txt" --ref "tessref --bf16=$r/loss16.txt=1e-3" --ref "float64=$r/loss.txt=1e-2"
}
stage_bf16() {
    if [ "$TG_STANDIN" != 1 ]; then
        tg_check "bf16: kernels with bf16 outputs bitwise RNE of their fp32 outputs, trc_cast_bf16, trc_gemm_bf16 (tests/cuda/bf16_check.cu)" \
            kernel_check bf16 run
    fi
    if ! tg_refdata16 m64 >"$TG_WORK/ref_m64_bf16.log" 2>&1; then
        tg_notok "bf16 reference data for m64 (tests/ref/tessref.py --bf16)" "$TG_WORK/ref_m64_bf16.log"
        return
    fi
    local qd q d
    for qd in $MESHES; do
        q=${qd%,*} d=${qd#*,}
        build_check m64 infer16 "$q" "$d" &&
            tg_check "bf16: m64 [$q,$q,$d] forward within 3e-3 of --bf16 and 1e-2 of float64, bytes as planned" \
                bf16_forward "$q" "$d"
        build_check m64 train16 "$q" "$d" || continue
        tg_check "bf16: m64 [$q,$q,$d] dL/dx and every weight gradient within 1e-2 of --bf16 and 2e-2 of float64, bytes as planned" \
            bf16_grads "$q" "$d"
        tg_check "bf16: m64 [$q,$q,$d] 5 AdamW steps, replicas bitwise identical" replicas_ok m64 "$q" "$d" train16
    done
    if tg_built m64 train16 1 1 && tg_built m64 train16 2 1 && tg_built m64 train16 2 2; then
        tg_check "bf16: m64 20-step losses equal on [1,1,1] [2,2,1] [2,2,2] (1e-3), within 1e-3 of --bf16 and 1e-2 of float64, falling" \
            bf16_losses
    fi
    bf16_cudnn
}
# attention = "cudnn" (docs/CUDA.md, "Fused attention through cuDNN"): cuDNN's fused attention against the cuBLAS path
# and double, timed (tests/cuda/sdpa_check.cu; it also builds build/cuda/trc_sdpa.o here once); then m64 with that
# attention on [1,1,1] and [2,2,1] with the bf16 tolerances above (cuDNN writes dQ, dK, dV in bf16: one rounding more)
bf16_cudnn() {
    if [ -z "$TG_CUDNN" ]; then
        tg_ok "bf16: attention = \"cudnn\" (cuDNN fused attention) # skip $TG_CUDNN_WHY"
        return
    fi
    if [ "$TG_STANDIN" != 1 ]; then
        tg_check "bf16: cuDNN fused attention (trc_attn_cudnn, trc_attn_cudnn_bwd) against the cuBLAS path and double, statistics, deterministic backward; timed (tests/cuda/sdpa_check.cu)" \
            kernel_check sdpa bench
    fi
    local qd q d
    for qd in 1,1 2,1; do
        q=${qd%,*} d=${qd#*,}
        build_check m64 infer16cudnn "$q" "$d" &&
            tg_check "bf16: attention = \"cudnn\": m64 [$q,$q,$d] forward within 3e-3 of --bf16 and 1e-2 of float64, bytes as planned" \
                bf16_forward "$q" "$d" 16cudnn
        build_check m64 train16cudnn "$q" "$d" || continue
        tg_check "bf16: attention = \"cudnn\": m64 [$q,$q,$d] dL/dx and every weight gradient within 1e-2 of --bf16 and 2e-2 of float64, bytes as planned" \
            bf16_grads "$q" "$d" 16cudnn
        tg_check "bf16: attention = \"cudnn\": m64 [$q,$q,$d] 5 AdamW steps, replicas bitwise identical" \
            replicas_ok m64 "$q" "$d" train16cudnn
    done
}

# ---- the whole GPT-2 ----------------------------------------------------------------------------------------------
lm_fwd() { # mode q d tol-logits [ref suffix: 16 for --bf16] [tol-float64]
    local mode=$1 q=$2 d=$3 tol=$4 sfx=${5:-} r=$TG_WORK/ref_lm64 dir L C H F S B V P
    dir=$(tg_dir lm64 "$mode" "$q" "$d")
    read -r L C H F S B <<<"$(tg_dims lm64)"
    read -r V P <<<"$(tg_lmdims lm64)"
    tg_poison "$dir/logits.npy" "$B" "$S" "$V" &&
        tg_run lm64 "$mode" "$q" "$d" --weights "$r/w.st" --tokens "$r/tok.npy" --targets "$r/tgt.npy" \
            --logits-out "$dir/logits.npy" --bytes >"$dir/fwd.out" && cat "$dir/fwd.out" &&
        "$PY" "$REF" compare --ref "$r/logits$sfx.npy" --got "$dir/logits.npy" --tol "$tol" --label "lm64 $mode [$q,$q,$d] logits${sfx:+ vs --bf16}" &&
        if [ -n "$sfx" ]; then
            "$PY" "$REF" compare --ref "$r/logits.npy" --got "$dir/logits.npy" --tol "$6" --label "lm64 $mode [$q,$q,$d] logits vs float64"
        else
            "$PY" - "$r/loss.txt" "$dir/fwd.out" <<'PYEOF'
import sys
ref = float(open(sys.argv[1]).read().split()[1])
got = [float(l.split()[1]) for l in open(sys.argv[2]) if l.startswith("loss ")]
rel = abs(got[0] - ref) / ref if got else 1.0
print("loss %s vs float64 %.9g: rel_err=%.3e (tol 1e-5)" % (got, ref, rel))
sys.exit(0 if got and rel <= 1e-5 else 1)
PYEOF
        fi
}
lm_grads() { # mode q d tol [ref suffix] [tol-float64]
    local mode=$1 q=$2 d=$3 tol=$4 sfx=${5:-} r=$TG_WORK/ref_lm64 dir
    dir=$(tg_dir lm64 "$mode" "$q" "$d")
    rm -f "$dir/g.st"
    tg_run lm64 "$mode" "$q" "$d" --weights "$r/w.st" --tokens "$r/tok.npy" --targets "$r/tgt.npy" --grads-out "$dir/g.st" \
        --bytes --quiet &&
        "$PY" "$REF" compare-grads --ref "$r/g$sfx.st" --got "$dir/g.st" --tol "$tol" --label "lm64 $mode [$q,$q,$d]${sfx:+ vs --bf16}" &&
        if [ -n "$sfx" ]; then
            "$PY" "$REF" compare-grads --ref "$r/g.st" --got "$dir/g.st" --tol "$6" --label "lm64 $mode [$q,$q,$d] vs float64"
        fi
}
stage_lm() {
    if ! tg_lmref lm64 >"$TG_WORK/ref_lm64.log" 2>&1; then
        tg_notok "float64 reference data for lm64 (tests/ref/tessref.py lm-*)" "$TG_WORK/ref_lm64.log"
        return
    fi
    local qd q d
    for qd in 1,1 2,1; do
        q=${qd%,*} d=${qd#*,}
        build_check lm64 train "$q" "$d" || continue
        tg_check "lm: lm64 [$q,$q,$d] logits within 1e-4 and loss within 1e-5 of float64, bytes as planned" lm_fwd train "$q" "$d" 1e-4
        tg_check "lm: lm64 [$q,$q,$d] every gradient (wte, wpe, ln_f, blocks) within 1e-4 of float64, bytes as planned" \
            lm_grads train "$q" "$d" 1e-4
    done
    build_check lm64 train 2 2 &&
        tg_check "lm: lm64 [2,2,2] 3 AdamW steps, replicas bitwise identical" replicas_run lm64 train 2 2 \
            --weights "$TG_WORK/ref_lm64/w.st" --tokens "$TG_WORK/ref_lm64/tok.npy" --targets "$TG_WORK/ref_lm64/tgt.npy" --steps 3
    build_check lm64 train16 2 1 && {
        tg_check "lm: lm64 bf16 [2,2,1] logits within 3e-3 of --bf16 and 1e-2 of float64, bytes as planned" \
            lm_fwd train16 2 1 3e-3 16 1e-2
        tg_check "lm: lm64 bf16 [2,2,1] every gradient within 1e-2 of --bf16 and 2e-2 of float64, bytes as planned" \
            lm_grads train16 2 1 1e-2 16 2e-2
    }
}

# generate: the whole GPT-2 of stage lm (lm64) generating: 8 prompts of mixed lengths (1 to 100 tokens), 20 new tokens
gen_ref() { # the prompts and the float64 reference's greedy ids and logits
    local d=$TG_WORK/ref_lm64 R=$TG_REPO/tests/ref/tessref.py
    [ -s "$d/gen_l.npy" ] && return 0
    tg_lmref lm64 || return 1
    "$PY" - "$d/tok.npy" "$d/gen_p.npy" <<'PYEOF' || return 1
import sys
import numpy as np
tok = np.load(sys.argv[1])
lens = [100, 37, 5, 64, 1, 99, 12, 50]
p = np.full((len(lens), max(lens)), -1, np.int32)
for b, n in enumerate(lens):
    p[b, :n] = tok[b, :n]
np.save(sys.argv[2], p)
PYEOF
    # shellcheck disable=SC2046
    "$PY" "$R" generate $(tg_refargs lm64) --vocab 999 --positions 128 --weights "$d/w.st" --prompt-tokens "$d/gen_p.npy" \
        --max-new 20 --out "$d/gen_t.npy" --logits-out "$d/gen_l.npy" &&
        "$PY" "$R" generate $(tg_refargs lm64) --vocab 999 --positions 128 --weights "$d/w.st" \
            --prompt-tokens "$d/gen_p.npy" --max-new 20 --bf16 --out "$d/gen_t16.npy" --logits-out "$d/gen_l16.npy"
}
# bf16 (docs/GENERATE.md "bf16"): against generate --bf16. A program summing in fp32 lands an element now and then on
# the other side of a bf16 rounding boundary, and at lm64's size (C 256, prompts up to 100 tokens, 20 steps) those
# flips carry on: the CPU program (the stand-in) is 2.7e-3 from --bf16 in relative norm over every new token's logits
# (max 0.07 at logits up to 36) and 5.0e-3 from float64, ids equal; the tolerance, 4e-3, lies between (a thin
# margin both ways: the GPU's first run will say). A sequence may part from the reference where the reference's two
# best logits are within 0.2 (about 3 times that largest difference; --tie-tol) and is compared up to there. The
# small model of tests/generate.sh holds the CPU program to 1e-4.
gen16_ok() { # q d
    local dir d=$TG_WORK/ref_lm64
    dir=$(tg_dir lm64 generate16 "$1" "$2")
    rm -f "$dir/t.npy" "$dir/l.npy"
    tg_run lm64 generate16 "$1" "$2" --weights "$d/w.st" --generate --prompt-tokens "$d/gen_p.npy" --max-new 20 \
        --output "$dir/t.npy" --logits-out "$dir/l.npy" --bytes --timing &&
        "$PY" "$REF" compare-generate "$dir/t.npy" "$d/gen_t16.npy" "$dir/l.npy" "$d/gen_l16.npy" --rel-tol 4e-3 \
            --tie-tol 0.2
}
gen_ok() { # q d: greedy ids token for token, every new token's logits within 1e-4 of float64, bytes as planned
    local dir d=$TG_WORK/ref_lm64
    dir=$(tg_dir lm64 generate "$1" "$2")
    rm -f "$dir/t.npy" "$dir/l.npy"
    tg_run lm64 generate "$1" "$2" --weights "$d/w.st" --generate --prompt-tokens "$d/gen_p.npy" --max-new 20 \
        --output "$dir/t.npy" --logits-out "$dir/l.npy" --bytes --timing &&
        "$PY" "$REF" compare-generate "$dir/t.npy" "$d/gen_t.npy" "$dir/l.npy" "$d/gen_l.npy" --tol 1e-4
}
stage_generate() {
    if [ "$TG_STANDIN" != 1 ]; then
        tg_check "generate: decode attention, KV write, position add and argmax against double and a host scan, repeatable; timed (tests/cuda/decode_check.cu)" \
            kernel_check decode bench
    fi
    if ! gen_ref >"$TG_WORK/ref_gen.log" 2>&1; then
        tg_notok "float64 reference of generation for lm64 (tests/ref/tessref.py generate)" "$TG_WORK/ref_gen.log"
        return
    fi
    local qd q d
    for qd in 1,1 2,1; do
        q=${qd%,*} d=${qd#*,}
        build_check lm64 generate "$q" "$d" || continue
        tg_check "generate: lm64 [$q,$q,$d], 8 prompts of 1 to 100 tokens, 20 new each: greedy ids token for token and every new token's logits within 1e-4 of float64, bytes as planned" \
            gen_ok "$q" "$d"
        build_check lm64 generate16 "$q" "$d" || continue
        tg_check "generate: bf16 lm64 [$q,$q,$d] (bf16 KV cache), the same prompts: greedy ids token for token (or parted at a near tie) and logits within 4e-3 of --bf16 (relative norm), bytes as planned" \
            gen16_ok "$q" "$d"
    done
}

for s in "${stages[@]}"; do
    tg_say "# stage $s"
    "stage_$s"
done
(cd "$TG_WORK" && find . -maxdepth 2 -name '*.log' -print0 | tar -czf "$TG_OUT/logs.tar.gz" --null -T -) 2>/dev/null
tg_summary
