#!/usr/bin/env bash
# tests/cuda/attn_check.sh OUTDIR [run|bench]: attention's kernels and launchers (templates/kernels_attention.cu.in,
# docs/CUDA.md) outside any schedule. Fills the template into OUTDIR/kernels_attention.cu and kernels.cuh (no
# instances: tests/cuda/attn_check.cu includes the kernels and instantiates what it calls), compiles it with
# runtime/cuda/trc_gemm.cu for sm_80 and sm_90 with warnings as errors and spills reported, links
# OUTDIR/attn_check; with `run`, runs the checks, with `bench` the checks and the microbenchmark (needs a GPU).
set -euo pipefail
out=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
nvcc=${TESS_NVCC:-nvcc}
mkdir -p "$out"
fill() { # template -> stdout, the placeholders of gen/ filled with fixed text
    python3 - "$1" <<'PY'
import re, sys
t = open(sys.argv[1]).read().replace("@@INSTANCES@@", "")
sys.stdout.write(re.sub(r"@@[A-Z_]+@@", "attn_check", t))
PY
}
fill "$repo/templates/kernels_attention.cu.in" >"$out/kernels_attention.cu"
fill "$repo/templates/kernels.cuh.in" >"$out/kernels.cuh"
arch="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"
# shellcheck disable=SC2046,SC2086
flags="-std=c++20 -O3 $arch -ccbin mpicxx -Xcompiler -Wall,-Wextra -Xcompiler -Werror -Werror all-warnings
    -Xptxas -warn-spills -I$out -I$repo/runtime -I$repo/runtime/cuda $(mpicc --showme:compile 2>/dev/null || true)"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/runtime/cuda/trc_gemm.cu" -o "$out/trc_gemm.o"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/tests/cuda/attn_check.cu" -o "$out/attn_check.o"
# shellcheck disable=SC2086
$nvcc $arch -ccbin mpicxx "$out/attn_check.o" "$out/trc_gemm.o" -o "$out/attn_check" -lcublas
case ${2:-} in
run) "$out/attn_check" ;;
bench) "$out/attn_check" bench ;;
esac
