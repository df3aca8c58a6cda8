#!/usr/bin/env bash
# tests/cuda/attn_check.sh OUTDIR [run|bench]: attention's kernels and launchers (templates/kernels_attention.cu.in,
# docs/CUDA.md) outside any schedule. Fills the template into OUTDIR/kernels_attention.cu and kernels.cuh (no
# instances: tests/cuda/attn_check.cu includes the kernels and instantiates what it calls), compiles it with
# runtime/cuda/trc_gemm.cu for sm_80 and sm_90 with warnings as errors and spills reported, links
# OUTDIR/attn_check; with `run`, runs the checks, with `bench` the checks and the microbenchmark (needs a GPU).
set -euo pipefail
out=$1
name=attn_check
# shellcheck source=tests/cuda/check_build.sh
. "$(dirname "$0")/check_build.sh"
fill "$repo/templates/kernels_attention.cu.in" >"$out/kernels_attention.cu"
fill "$repo/templates/kernels.cuh.in" >"$out/kernels.cuh"
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
