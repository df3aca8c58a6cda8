#!/usr/bin/env bash
# tests/gpu/lease.sh [PART...] - what a lent GPU is for, in ONE call of the device tool, most important first, so
# that a call stopped at its limit still returns everything that ran before (docs/CUDA.md, "On a machine with a
# GPU"). A lease is 15 minutes of device time, the machine's start included, and the machine goes back 30 s after a
# call: separate calls per stage (check.sh, bench.sh) would each pay a fresh start. Parts, in this order:
#
#   build    every program the later parts run, generated and compiled at once on all cores before anything is
#            timed (at most TESS_LEASE_JOBS = 8 builds at a time, the benchmark's first): the benchmark's bf16
#            programs (12 GPT-2 small blocks and the whole GPT-2 small, forward and training step, [1,1,1]), the
#            check's models, the standalone kernel checks (for this GPU's architecture only: TESS_CHECK_GENCODE),
#            the float64 reference data, and cuDNN's runtime object where cuDNN is found
#   compare  tests/gpu/bench.sh compare-tessgen: the bf16 forward and training step, timed on a quiet machine
#   check    tests/gpu/check.sh env training bf16 lm (TESS_GPU_PREBUILT=1: the kernel checks' binaries from `build`)
#   torch    tests/gpu/bench.sh compare-torch report: PyTorch bf16 eager and torch.compile (within the time left:
#            TESS_TORCH_TIMEOUT); bench.md
#   more     tests/gpu/check.sh inference races, then tests/gpu/bench.sh bf16 (fp32 | bf16 | bf16 + cuDNN attention)
# Also, when named: kernels (every kernel check `build` compiled, run with its microbenchmark, its whole output in
# kernel_NAME.txt), bf16bench (bench.sh bf16 alone), fusion (bench.sh fusion: epilogues on and off,
# alternated) and decode (bench.sh decode: greedy decode of GPT-2 small and medium against PyTorch's static-cache loop;
# its programs are built by the part itself unless TESS_LEASE_BUILDS names them: gpt2g1, gpt2g, gpt2mg with modes
# generate and generate16). For a second, shorter lease: TESS_LEASE_BUILDS (the programs to build, model:mode:q:d, instead of
# the list below), TESS_LEASE_KCHECKS (the kernel checks),
# TESS_LEASE_CHECK (check.sh's stages) and TESS_GPU_MESHES (check.sh's meshes, e.g. "1,1").
#
# Default: all five. Before each part the time left is compared with TESS_LEASE_BUDGET (seconds from the start,
# default 540): a part that cannot start with 30 s left is skipped with a line saying so.
# $OUT receives lease.txt (every ok / not ok line and the summaries, as they come) and lease.tgz (every file the
# parts leave in their results folder, every log), rewritten every 20 s and at the end: the device tool returns at
# most 8 files, so the parts' own files travel inside the archive.
set -u
cd "$(dirname "$0")/../.." || exit 2
REPO=$(pwd)
parts=("$@")
[ $# -eq 0 ] && parts=(build compare check torch more)
for p in "${parts[@]}"; do
    case "$p" in build | kernels | compare | check | torch | more | bf16bench | fusion | decode) ;; *) echo "lease.sh: unknown part $p" >&2; exit 2 ;; esac
done
FINAL=${OUT:-/tmp/tessgen-lease}
mkdir -p "$FINAL"
unset OUT
export TESS_GPU_OUT=${TESS_GPU_OUT:-/tmp/tessgen-lease-out}
mkdir -p "$TESS_GPU_OUT"
# shellcheck source=tests/gpu/env.sh
. tests/gpu/env.sh
START=$SECONDS
BUDGET=${TESS_LEASE_BUDGET:-540}
JOBS=${TESS_LEASE_JOBS:-8}
LT=$FINAL/lease.txt
: >"$LT"
say() { echo "$*" | tee -a "$LT"; }

snapshot() {
    local tmp=$FINAL/.lease.tgz.tmp
    # the parts' results folder, and from the work folder its logs, the checks' logs and the benchmark's files
    # (not the generated programs)
    local files
    mapfile -t files < <(cd / && find "${TESS_GPU_OUT#/}" "${TG_WORK#/}" -maxdepth 1 -type f -size -2M 2>/dev/null
        cd / && find "${TG_WORK#/}/logs" "${TG_WORK#/}/bench" -maxdepth 1 -type f -size -2M 2>/dev/null)
    (cd / && tar -czf "$tmp" --ignore-failed-read "${files[@]}") 2>/dev/null && mv -f "$tmp" "$FINAL/lease.tgz"
}
(while sleep 20; do snapshot; done) &
SNAP=$!
trap 'kill $SNAP 2>/dev/null; snapshot' EXIT

if ! tg_setup >"$TESS_GPU_OUT/setup.log" 2>&1; then
    cat "$TESS_GPU_OUT/setup.log"
    say "not ok - set up the machine from build/gpu-carry (tests/gpu/env.sh)"
    exit 1
fi
say "# lease: $TG_GPU; sm_$TESS_CUDA_ARCH; $(nproc) cores; parts ${parts[*]}; budget ${BUDGET}s"
export TESS_CHECK_GENCODE="-gencode=arch=compute_$TESS_CUDA_ARCH,code=sm_$TESS_CUDA_ARCH"
export TESS_GPU_PREBUILT=1 PYTHONUNBUFFERED=1

left() { echo $((BUDGET - (SECONDS - START))); }
# part NAME CMD...: run one part with its output into lease.txt, unless too little time is left
part() {
    local name=$1
    shift
    if [ "$(left)" -lt 30 ]; then
        say "# lease: part $name skipped: $(left) s of the ${BUDGET} s budget left"
        return
    fi
    say "# lease: part $name at $((SECONDS - START)) s"
    "$@" 2>&1 | tee -a "$LT"
    say "# lease: part $name done at $((SECONDS - START)) s"
}

# ---- build: everything at once -----------------------------------------------------------------------------------
C12=gpt2s CLM=gpt2lm # bench.sh's compare models (its small shapes with TESS_BENCH_SMALL=1)
[ "${TESS_BENCH_SMALL:-0}" = 1 ] && C12=tiny CLM=lmtiny
BUILDS="$C12:infer16:1:1 $C12:train16:1:1 $CLM:infer16:1:1 $CLM:train16:1:1 tiny:infer:1:1
m64:train:1:1 m64:trainpp2:1:1 m64:train:2:1 m64:train:2:2 m128:train:1:1 m128:train:2:1 m128:train:2:2
m64:infer16:1:1 m64:infer16:2:1 m64:infer16:2:2 m64:train16:1:1 m64:train16:2:1 m64:train16:2:2
lm64:train:1:1 lm64:train:2:1 lm64:train:2:2 lm64:train16:2:1 lm64:generate:1:1 lm64:generate:2:1 lm64:generate16:1:1 lm64:generate16:2:1
m64:infer:1:1 m64:infer:2:1 m64:infer:2:2 m128:infer:1:1 m128:infer:2:1 m128:infer:2:2"
CUDNN_BUILDS="m64:infer16cudnn:1:1 m64:infer16cudnn:2:1 m64:train16cudnn:1:1 m64:train16cudnn:2:1"
KCHECKS=${TESS_LEASE_KCHECKS:-"lnb attn rows adamw lt bf16 decode"}
BUILDS=${TESS_LEASE_BUILDS:-$BUILDS}

build_one() { # model:mode:q:d
    local m mode q d
    IFS=: read -r m mode q d <<<"$1"
    tg_built "$m" "$mode" "$q" "$d" && return 0
    tg_build "$m" "$mode" "$q" "$d" >"$TG_WORK/build_${m}_${mode}_${q}_$d.log" 2>&1
}
throttle() { while [ "$(jobs -rp | wc -l)" -gt "$JOBS" ]; do wait -n; done; }
part_build() {
    local b k pids=() names=() i fails=0
    # the float64 references (numpy, one core each)
    for m in tiny m64 m128; do
        (tg_refdata "$m" >"$TG_WORK/ref_$m.log" 2>&1) &
    done
    (tg_refdata16 m64 >"$TG_WORK/ref_m64_bf16.log" 2>&1; tg_lmref lm64 >"$TG_WORK/ref_lm64.log" 2>&1) &
    # the first build alone compiles the shared CUDA runtime (scripts/rt_shared.sh locks; this avoids 8 waiters)
    build_one "$C12:infer16:1:1" || fails=$((fails + 1))
    [ "$TG_STANDIN" = 1 ] && KCHECKS="" # check.sh runs no kernel check on the stand-in
    for k in $KCHECKS; do
        throttle
        (env TESS_NVCC="$TG_NVCC" "$REPO/tests/cuda/${k}_check.sh" "$TG_WORK/${k}k" >"$TG_WORK/kbuild_$k.log" 2>&1) &
        pids+=($!) names+=("kernel check $k")
    done
    local all=$BUILDS
    [ -n "$TG_CUDNN" ] && [ -z "${TESS_LEASE_BUILDS:-}" ] && all="$all $CUDNN_BUILDS"
    for b in $all; do
        throttle
        (build_one "$b") &
        pids+=($!) names+=("build $b")
    done
    if [ -n "$TG_CUDNN" ] && [ "$TG_STANDIN" != 1 ]; then
        (env TESS_NVCC="$TG_NVCC" "$REPO/tests/cuda/sdpa_check.sh" "$TG_WORK/sdpak" >"$TG_WORK/kbuild_sdpa.log" 2>&1) &
        pids+=($!) names+=("kernel check sdpa")
    fi
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || { fails=$((fails + 1)); echo "# build failed: ${names[$i]} (its log: build/gpu-work)"; }
    done
    wait
    echo "# built: $(find "$TG_WORK" -mindepth 3 -maxdepth 3 -path '*/bin/model-cuda' | wc -l) programs, $fails failures"
}

# kernels: each standalone kernel check `build` compiled, with its microbenchmark, its whole output kept in
# kernel_NAME.txt (check.sh keeps only a failure's last 40 lines)
part_kernels() {
    local k bin mode
    for k in $KCHECKS sdpa; do
        bin=$TG_WORK/${k}k/${k}_check
        [ -x "$bin" ] || { echo "not ok - kernel check $k: not built (build/gpu-work/kbuild_$k.log)"; continue; }
        mode=bench
        [ "$k" = bf16 ] && mode=""
        # shellcheck disable=SC2086
        if timeout -k 5 120 "$bin" $mode >"$TESS_GPU_OUT/kernel_$k.txt" 2>&1; then
            echo "ok - kernel check $k ($(grep -c '^ok' "$TESS_GPU_OUT/kernel_$k.txt") ok lines)"
        else
            echo "not ok - kernel check $k (exit $?): kernel_$k.txt"
            grep -v '^ok' "$TESS_GPU_OUT/kernel_$k.txt" | head -30 | sed 's/^/    # /'
        fi
        grep -iE 'bench|ms|GB/s' "$TESS_GPU_OUT/kernel_$k.txt" | grep -v '^ok\|^not ok' | head -12 | sed 's/^/    # /'
    done
}

for p in "${parts[@]}"; do
    case "$p" in
    build) part build part_build ;;
    kernels) part kernels part_kernels ;;
    compare) part compare tests/gpu/bench.sh compare-tessgen ;;
    check)
        read -r -a stages <<<"${TESS_LEASE_CHECK:-env training bf16 lm generate}"
        part check tests/gpu/check.sh "${stages[@]}"
        ;;
    torch) TESS_TORCH_TIMEOUT=$(($(left) - 10)) part torch tests/gpu/bench.sh compare-torch report ;;
    more)
        part inference tests/gpu/check.sh inference races
        part bf16bench tests/gpu/bench.sh bf16
        ;;
    bf16bench) part bf16bench tests/gpu/bench.sh bf16 ;;
    fusion) part fusion tests/gpu/bench.sh fusion ;;
    decode) TESS_TORCH_TIMEOUT=$(($(left) - 10)) part decode tests/gpu/bench.sh decode ;;
    esac
    snapshot
done
say "# lease: done at $((SECONDS - START)) s"
