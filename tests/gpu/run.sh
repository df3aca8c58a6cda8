#!/usr/bin/env bash
# tests/gpu/run.sh - the CUDA backend on a machine with an NVIDIA GPU. Not part of tests/run.sh (CI has no
# GPU). Written without access to a GPU: it has been read, syntax-checked and dry-run on the CPU
# (see docs/CUDA.md), never run end to end.
#
#   tests/gpu/run.sh            correctness, then the timing report
#   tests/gpu/run.sh --quick    correctness only
#
# 1. Correctness. Two models (the e2e test's shapes, and one with head dim 64 and 256 tokens per sequence,
#    so attention runs several key tiles), each for mesh [1,1,1] and for [2,2,2] as 8 ranks sharing one
#    GPU over the MPI collective backend (TESS_COMM=mpi; NCCL refuses two ranks on one GPU), and over NCCL
#    as well when the machine has 8 GPUs. Each run checks its bytes against the plan (--bytes) and its
#    output against the float64 numpy reference (tests/ref/tessref.py compare, fp32 tolerance 1e-4).
# 2. Timing, in one run (TESS_PROFILE=1 --repeat 20) of GPT-2 small's block shapes (C=768, 12 heads,
#    F=3072, 8 sequences of 1024 tokens, 2 layers) on [1,1,1]: for each step of layer 0 its time, each
#    GEMM's TFLOP/s against cuBLAS alone on the same shape, each fused kernel's GB/s against a
#    device-to-device copy of as many bytes, and per layer the wall time against the sum of its steps.
#
# Needs: nvcc (CUDA 12 or 13), NCCL and cuBLAS, mpicc/mpicxx/mpirun (Open MPI), liblua5.4-dev (tessgen),
# python3 with numpy, ninja. As root on Debian, scripts/deps.sh installs the Debian ones where a network is
# reachable. Results and logs go to $TESS_GPU_OUT (default /tmp/tessgen-gpu). Exit 0 when all passed.
set -u
cd "$(dirname "$0")/../.." || exit 2
OUT=${TESS_GPU_OUT:-/tmp/tessgen-gpu}
QUICK=0
[ "${1:-}" = --quick ] && QUICK=1
mkdir -p "$OUT"
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
notok() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && sed 's/^/    # /' "$2" | tail -30; }
check() {
    local name=$1
    shift
    if "$@" >"$OUT/log" 2>&1; then ok "$name"; else notok "$name" "$OUT/log"; fi
}

# ---- prerequisites -------------------------------------------------------------------------------
missing=""
for t in nvidia-smi mpicc mpicxx mpirun ninja; do
    command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
done
NVCC=${TESS_NVCC:-$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })}
[ -n "$NVCC" ] || missing="$missing nvcc"
[ -f /usr/include/lua5.4/lua.h ] || missing="$missing liblua5.4-dev"
PY=$(scripts/python.sh 2>/dev/null) || missing="$missing python3-numpy"
if [ -n "$missing" ]; then
    echo "tests/gpu/run.sh: missing:$missing. On Debian as root: scripts/deps.sh (Open MPI, Lua, numpy, ninja);" >&2
    echo "nvcc, cuBLAS and NCCL come with the CUDA toolkit and libnccl-dev. Then run this again." >&2
    exit 2
fi
PATH="$(dirname "$NVCC"):$PATH"
export PATH
ngpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
if [ "$ngpu" -lt 1 ] || [ -z "$cc" ]; then
    echo "tests/gpu/run.sh: nvidia-smi sees no GPU" >&2
    exit 2
fi
export TESS_CUDA_ARCH=$cc # build for this GPU only: quicker, and what runs here
export TESS_BACKENDS=cpu,cuda
export OMPI_MCA_rmaps_base_oversubscribe=1
echo "# $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1); $ngpu GPU(s);" \
    "sm_$cc; $("$NVCC" --version | tail -1)"
if ! ninja bin/tessgen >"$OUT/build.log" 2>&1; then
    notok "build tessgen" "$OUT/build.log"
    echo "$pass passed, $fail failed"
    exit 1
fi

# ---- correctness ------------------------------------------------------------------------------------
spec() { # name q d layers hidden heads ffn seq batch
    cat <<SPEC
return {
  name = "$1",
  mesh = { q = $2, d = $3 },
  model = { layers = $4, hidden = $5, heads = $6, ffn = $7, seq = $8, batch = $9 },
  backends = { "cpu", "cuda" },
}
SPEC
}

# shellcheck disable=SC2086 # $dims and the table rows below are split into words on purpose
model_data() { # tag layers hidden heads ffn seq batch -> $OUT/<tag>.{safetensors,npy} and the reference
    local tag=$1 dims="--layers $2 --hidden $3 --heads $4 --ffn $5 --seq $6 --batch $7"
    [ -s "$OUT/$tag.ref.npy" ] && return 0
    "$PY" tests/ref/tessref.py weights $dims --seed 7 --out "$OUT/$tag.w.safetensors" &&
        "$PY" tests/ref/tessref.py input $dims --seed 7 --out "$OUT/$tag.x.npy" &&
        "$PY" tests/ref/tessref.py forward $dims --weights "$OUT/$tag.w.safetensors" --input "$OUT/$tag.x.npy" \
            --out "$OUT/$tag.ref.npy"
}

build() { # tag q d layers hidden heads ffn seq batch -> $OUT/<tag>_q_d/bin/model-cuda
    local dir="$OUT/$1_$2_$3"
    spec "$1_q$2_d$3" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" >"$dir.lua" &&
        bin/tessgen "$dir.lua" -o "$dir" --quiet &&
        ninja -C "$dir" cuda
}

correct() { # tag q d comm shape(B S C)
    local dir="$OUT/$1_$2_$3"
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full(tuple(map(int, sys.argv[2:])), np.nan, np.float32))" \
        "$dir/y.npy" "$5" "$6" "$7" &&
        TESS_BACKEND=cuda TESS_COMM=$4 "$dir/run" --weights "$OUT/$1.w.safetensors" --input "$OUT/$1.x.npy" \
            --output "$dir/y.npy" --bytes &&
        "$PY" tests/ref/tessref.py compare --ref "$OUT/$1.ref.npy" --got "$dir/y.npy" --tol 1e-4 --expect-f32 \
            --label "cuda $1 [$2,$2,$3] TESS_COMM=$4"
}

#        tag    layers hidden heads ffn  seq batch
MODELS=("small  2      48     12    192  8   8"
        "medium 2      256    4     1024 256 4")
for m in "${MODELS[@]}"; do
    # shellcheck disable=SC2086
    set -- $m
    tag=$1 L=$2 C=$3 H=$4 F=$5 S=$6 B=$7
    if ! model_data "$tag" "$L" "$C" "$H" "$F" "$S" "$B" >"$OUT/log" 2>&1; then
        notok "reference data for $tag" "$OUT/log"
        continue
    fi
    for mesh in "1 1" "2 2"; do
        # shellcheck disable=SC2086
        set -- $mesh
        q=$1 d=$2 np=$(($1 * $1 * $2))
        if ! build "$tag" "$q" "$d" "$L" "$C" "$H" "$F" "$S" "$B" >"$OUT/log" 2>&1; then
            notok "build $tag [$q,$q,$d] (bin/model-cuda)" "$OUT/log"
            continue
        fi
        if [ "$np" -eq 1 ]; then
            check "$tag [1,1,1] on one GPU matches the float64 reference (1e-4), planned bytes" \
                correct "$tag" 1 1 auto "$B" "$S" "$C"
        else
            check "$tag [$q,$q,$d]: $np ranks share one GPU (TESS_COMM=mpi), float64 reference, planned bytes" \
                correct "$tag" "$q" "$d" mpi "$B" "$S" "$C"
            if [ "$ngpu" -ge "$np" ]; then
                check "$tag [$q,$q,$d]: $np GPUs over NCCL, float64 reference, planned bytes" \
                    correct "$tag" "$q" "$d" nccl "$B" "$S" "$C"
            else
                echo "ok - $tag [$q,$q,$d] over NCCL # skip $ngpu GPU(s), NCCL needs one per rank"
                pass=$((pass + 1))
            fi
        fi
    done
done

# ---- timing --------------------------------------------------------------------------------------------
timing() {
    local dir="$OUT/gpt2s_1_1"
    build gpt2s 1 1 2 768 12 3072 1024 8 &&
        TESS_BACKEND=cuda TESS_PROFILE=1 "$dir/run" --repeat 20 | tee "$OUT/profile.txt" &&
        grep -q "profile_layer1_wall_ms=" "$OUT/profile.txt"
}
if [ $QUICK -eq 0 ]; then
    echo "# timing: GPT-2 small block shapes, [1,1,1], TESS_PROFILE=1 --repeat 20 (report in $OUT/profile.txt)"
    if timing >"$OUT/timing.log" 2>&1; then
        ok "timing report (GPT-2 small shapes, 2 layers, 8 x 1024 tokens)"
        sed 's/^/    /' "$OUT/profile.txt"
    else
        notok "timing report" "$OUT/timing.log"
    fi
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
