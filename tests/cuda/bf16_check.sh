#!/usr/bin/env bash
# tests/cuda/bf16_check.sh OUTDIR [run]: the bf16 side of the CUDA runtime and kernels (docs/BF16.md), outside
# any schedule. Makes OUTDIR/kernels.cu and kernels.cuh from templates/kernels.cu.in and kernels.cuh.in with
# the instances of tests/cuda/bf16_check.cu (each changed kernel with a float and a tr_bf16 output, in the
# text the generator prints), compiles them, tests/cuda/bf16_check.cu and runtime/cuda/trc_gemm.cu for sm_80
# and sm_90 with warnings as errors, links OUTDIR/bf16_check; with `run`, runs it (needs a GPU).
set -euo pipefail
out=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
nvcc=${TESS_NVCC:-nvcc}
mkdir -p "$out"
inst=$(cat <<'INST'
template void ln_rowsum<37, 64>(cudaStream_t, const float *, float *);
template void ln_apply<37, 64, 128>(cudaStream_t, const float *, const float *, const float *,
                                  const float *, const float *, float, float *);
template void ln_apply<37, 64, 128>(cudaStream_t, const float *, const float *, const float *,
                                  const float *, const float *, float, tr_bf16 *);
template void ln_apply<37, 30, 60>(cudaStream_t, const float *, const float *, const float *,
                                  const float *, const float *, float, float *);
template void ln_apply<37, 30, 60>(cudaStream_t, const float *, const float *, const float *,
                                  const float *, const float *, float, tr_bf16 *);
template void bias_gelu_save<19, 96>(cudaStream_t, float *, const float *, float *);
template void bias_gelu_save<19, 96>(cudaStream_t, float *, const float *, tr_bf16 *);
template void bias_gelu_save<7, 33>(cudaStream_t, float *, const float *, float *);
template void bias_gelu_save<7, 33>(cudaStream_t, float *, const float *, tr_bf16 *);
INST
)
fill() { # template -> stdout, the placeholders of gen/ filled with fixed text
    INST="$inst" python3 - "$1" <<'PY'
import os, re, sys
t = open(sys.argv[1]).read().replace("@@INSTANCES@@", os.environ["INST"] + "\n")
sys.stdout.write(re.sub(r"@@[A-Z_]+@@", "bf16_check", t))
PY
}
fill "$repo/templates/kernels.cu.in" >"$out/kernels.cu"
fill "$repo/templates/kernels.cuh.in" >"$out/kernels.cuh"
arch="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"
# shellcheck disable=SC2046,SC2086
flags="-std=c++20 -O3 $arch -ccbin mpicxx -Xcompiler -Wall,-Wextra -Xcompiler -Werror -Werror all-warnings
    -Xptxas -warn-spills -I$out -I$repo/runtime -I$repo/runtime/cuda $(mpicc --showme:compile 2>/dev/null || true)"
# shellcheck disable=SC2086
$nvcc $flags -c "$out/kernels.cu" -o "$out/kernels.o"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/runtime/cuda/trc_gemm.cu" -o "$out/trc_gemm.o"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/tests/cuda/bf16_check.cu" -o "$out/bf16_check.o"
# shellcheck disable=SC2086
$nvcc $arch -ccbin mpicxx "$out/bf16_check.o" "$out/kernels.o" "$out/trc_gemm.o" -o "$out/bf16_check" -lcublas
if [ "${2:-}" = run ]; then
    "$out/bf16_check"
fi
