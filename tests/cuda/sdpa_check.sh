#!/usr/bin/env bash
# tests/cuda/sdpa_check.sh OUTDIR [run|bench]: cuDNN's fused attention (attention = "cudnn"; runtime/cuda/trc_sdpa.cpp,
# trc_attn_cudnn.cu; docs/CUDA.md) outside any schedule, against the cuBLAS path and a double reference
# (tests/cuda/sdpa_check.cu). Fills templates/kernels_attention.cu.in into OUTDIR as attn_check.sh does, compiles
# sdpa_check.cu, runtime/cuda/trc_gemm.cu and trc_attn_cudnn.cu for sm_80 and sm_90 with warnings as errors and
# spills reported, links them with build/cuda/trc_sdpa.o (built here by `ninja sdpa` when missing, or
# TESS_SDPA_OBJ) and cuDNN (TESS_CUDNN_LIBS, default -l:libcudnn.so.9) into OUTDIR/sdpa_check; with `run`, runs
# the checks, with `bench` the checks and the microbenchmark (needs a GPU and cuDNN 9).
set -euo pipefail
out=$1
name=sdpa_check
# shellcheck source=tests/cuda/check_build.sh
. "$(dirname "$0")/check_build.sh"
obj=${TESS_SDPA_OBJ:-$repo/build/cuda/trc_sdpa.o}
[ -n "${TESS_SDPA_OBJ:-}" ] || ninja -C "$repo" build/cuda/trc_sdpa.o >"$out/sdpa_obj.log" 2>&1 ||
    { tail -3 "$out/sdpa_obj.log" >&2; exit 1; }
fill "$repo/templates/kernels_attention.cu.in" >"$out/kernels_attention.cu"
fill "$repo/templates/kernels.cuh.in" >"$out/kernels.cuh"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/runtime/cuda/trc_gemm.cu" -o "$out/trc_gemm.o"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/runtime/cuda/trc_attn_cudnn.cu" -o "$out/trc_attn_cudnn.o"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/tests/cuda/sdpa_check.cu" -o "$out/sdpa_check.o"
# shellcheck disable=SC2086
$nvcc $arch -ccbin mpicxx "$out/sdpa_check.o" "$out/trc_gemm.o" "$out/trc_attn_cudnn.o" "$obj" -o "$out/sdpa_check" \
    -lcublas ${TESS_CUDNN_LIBS:--l:libcudnn.so.9} -lnvrtc
case ${2:-} in
run) "$out/sdpa_check" ;;
bench) "$out/sdpa_check" bench ;;
esac
