#!/usr/bin/env bash
# tests/cuda/lt_check.sh OUTDIR [run|bench]: trc_gemm_lt and trc_gemm_lt_bwd (cuBLASLt GEMMs with bias, bias + GeLU
# and bias + GeLU + pre-activation epilogues; GeLU-gradient and bias-gradient epilogues, runtime/cuda/trc_gemm_lt.cu)
# outside any schedule. Makes OUTDIR/kernels.cu and kernels.cuh from templates/kernels.cu.in, the families
# kernels_rows.cu.in, kernels_gelu.cu.in and kernels_colsum.cu.in, and kernels.cuh.in with the bias + GeLU, GeLU
# gradient and column-sum kernels it is compared with,
# compiles them, tests/cuda/lt_check.cu, runtime/cuda/trc_gemm.cu and trc_gemm_lt.cu for sm_80 and sm_90 with
# warnings as errors, links OUTDIR/lt_check; with `run`, runs the checks, with `bench` also the microbenchmark
# (both need a GPU).
set -euo pipefail
out=$1
name=lt_check
# shellcheck source=tests/cuda/check_build.sh
. "$(dirname "$0")/check_build.sh"
# ln_rowsum only so that the template's shared helpers are used (nvcc warns of unused ones)
inst=$(cat <<'INST'
template void ln_rowsum<37, 64>(cudaStream_t, const float *, float *);
template void bias_gelu<37, 96>(cudaStream_t, float *, const float *);
template void bias_gelu_save<37, 96>(cudaStream_t, float *, const float *, float *);
template void bias_gelu<8192, 3072>(cudaStream_t, float *, const float *);
template void bias_gelu_save<8192, 3072>(cudaStream_t, float *, const float *, float *);
template void bias_gelu_save<37, 96>(cudaStream_t, float *, const tr_bf16 *, tr_bf16 *);
template void bias_gelu_save<37, 96>(cudaStream_t, const float *, const tr_bf16 *, tr_bf16 *, tr_bf16 *);
template void bias_gelu_save<8192, 3072>(cudaStream_t, const float *, const tr_bf16 *, tr_bf16 *, tr_bf16 *);
template void gelu_bwd<37, 96>(cudaStream_t, float *, const float *);
template void gelu_bwd<8192, 3072>(cudaStream_t, float *, const float *);
template void gelu_bwd<37, 96>(cudaStream_t, const float *, const tr_bf16 *, tr_bf16 *);
template void gelu_bwd<8192, 3072>(cudaStream_t, const float *, const tr_bf16 *, tr_bf16 *);
template void colsum<37, 96>(cudaStream_t, const float *, float *);
template void colsum<8192, 3072>(cudaStream_t, const float *, float *);
INST
)
{
    fill "$repo/templates/kernels.cu.in"
    INST=$(grep '^template void ln_' <<<"$inst") fill "$repo/templates/kernels_rows.cu.in"
    INST=$(grep -E '^template void (bias_|gelu_)' <<<"$inst") fill "$repo/templates/kernels_gelu.cu.in"
    INST=$(grep '^template void colsum' <<<"$inst") fill "$repo/templates/kernels_colsum.cu.in"
} >"$out/kernels.cu"
fill "$repo/templates/kernels.cuh.in" >"$out/kernels.cuh"
# shellcheck disable=SC2086
$nvcc $flags -c "$out/kernels.cu" -o "$out/kernels.o"
for f in trc_gemm trc_gemm_lt; do
    # shellcheck disable=SC2086
    $nvcc $flags -c "$repo/runtime/cuda/$f.cu" -o "$out/$f.o"
done
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/tests/cuda/lt_check.cu" -o "$out/lt_check.o"
# shellcheck disable=SC2086
$nvcc $arch -ccbin mpicxx "$out/lt_check.o" "$out/kernels.o" "$out/trc_gemm.o" "$out/trc_gemm_lt.o" \
    -o "$out/lt_check" -lcublasLt -lcublas
case "${2:-}" in
run) "$out/lt_check" ;;
bench) "$out/lt_check" bench ;;
esac
