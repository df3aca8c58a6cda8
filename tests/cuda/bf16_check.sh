#!/usr/bin/env bash
# tests/cuda/bf16_check.sh OUTDIR [run|host]: the bf16 side of the CUDA runtime and kernels (docs/BF16.md), outside
# any schedule. Makes OUTDIR/kernels.cu and kernels.cuh from templates/kernels.cu.in and kernels.cuh.in with
# the instances of tests/cuda/bf16_check.cu (each changed kernel with a float and a tr_bf16 output, in the
# text the generator prints), each in its family (kernels_rows.cu.in, kernels_gelu.cu.in), compiles them, tests/cuda/bf16_check.cu and runtime/cuda/trc_gemm.cu for sm_80
# and sm_90 with warnings as errors, links OUTDIR/bf16_check; with `run`, runs it (needs a GPU); with `host`, runs its host part
# (bf16_check --host: runtime/cuda/trk_elt.cuh's 16-byte and scalar bodies on the CPU, no GPU needed).
set -euo pipefail
out=$1
name=bf16_check
# shellcheck source=tests/cuda/check_build.sh
. "$(dirname "$0")/check_build.sh"
rows=$(cat <<'INST'
template void ln_rowsum<37, 64>(cudaStream_t, const float *, float *);
template void ln_apply<37, 64, 128>(cudaStream_t, const float *, const float *, const float *,
                                  const float *, const float *, float, float *);
template void ln_apply<37, 64, 128>(cudaStream_t, const float *, const float *, const float *,
                                  const float *, const float *, float, tr_bf16 *);
template void ln_apply<37, 36, 72>(cudaStream_t, const float *, const float *, const float *,
                                  const float *, const float *, float, float *);
template void ln_apply<37, 36, 72>(cudaStream_t, const float *, const float *, const float *,
                                  const float *, const float *, float, tr_bf16 *);
template void ln_apply<37, 30, 60>(cudaStream_t, const float *, const float *, const float *,
                                  const float *, const float *, float, float *);
template void ln_apply<37, 30, 60>(cudaStream_t, const float *, const float *, const float *,
                                  const float *, const float *, float, tr_bf16 *);
INST
)
gelu=$(cat <<'INST'
template void bias_gelu_save<19, 96>(cudaStream_t, float *, const float *, float *);
template void bias_gelu_save<19, 96>(cudaStream_t, float *, const tr_bf16 *, tr_bf16 *);
template void bias_gelu_save<7, 33>(cudaStream_t, float *, const float *, float *);
template void bias_gelu_save<7, 33>(cudaStream_t, float *, const tr_bf16 *, tr_bf16 *);
template void bias_gelu_save<19, 96>(cudaStream_t, const float *, const tr_bf16 *, tr_bf16 *, tr_bf16 *);
template void bias_gelu_save<7, 33>(cudaStream_t, const float *, const tr_bf16 *, tr_bf16 *, tr_bf16 *);
template void gelu_bwd<19, 96>(cudaStream_t, float *, const tr_bf16 *);
template void gelu_bwd<7, 33>(cudaStream_t, float *, const tr_bf16 *);
template void gelu_bwd<19, 96>(cudaStream_t, float *, const float *);
template void gelu_bwd<7, 33>(cudaStream_t, float *, const float *);
INST
)
{
    fill "$repo/templates/kernels.cu.in"
    INST=$rows fill "$repo/templates/kernels_rows.cu.in"
    INST=$gelu fill "$repo/templates/kernels_gelu.cu.in"
} >"$out/kernels.cu"
fill "$repo/templates/kernels.cuh.in" >"$out/kernels.cuh"
# shellcheck disable=SC2086
$nvcc $flags -c "$out/kernels.cu" -o "$out/kernels.o"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/runtime/cuda/trc_gemm.cu" -o "$out/trc_gemm.o"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/tests/cuda/bf16_check.cu" -o "$out/bf16_check.o"
# shellcheck disable=SC2086
$nvcc $arch -ccbin mpicxx "$out/bf16_check.o" "$out/kernels.o" "$out/trc_gemm.o" -o "$out/bf16_check" -lcublas
case "${2:-}" in
run) "$out/bf16_check" ;;
host) "$out/bf16_check" --host ;;
esac
