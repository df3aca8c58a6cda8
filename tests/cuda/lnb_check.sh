#!/usr/bin/env bash
# tests/cuda/lnb_check.sh OUTDIR [run|bench]: the column sums and layernorm backward (templates/kernels_colsum.cu.in,
# kernels_layernorm.cu.in; docs/CUDA.md) outside any schedule. Fills both templates, in the order kernels.cu has
# them, into OUTDIR/kernels_lnb.cu and kernels.cuh into OUTDIR (no instances: tests/cuda/lnb_check.cu includes the
# kernels and instantiates what it calls), compiles it for sm_80 and sm_90 with warnings as errors and spills
# reported, links OUTDIR/lnb_check; with `run`, runs the checks, with `bench` the checks and the microbenchmark
# (needs a GPU).
set -euo pipefail
out=$1
name=lnb_check
# shellcheck source=tests/cuda/check_build.sh
. "$(dirname "$0")/check_build.sh"
{ fill "$repo/templates/kernels_colsum.cu.in" && fill "$repo/templates/kernels_layernorm.cu.in"; } >"$out/kernels_lnb.cu"
fill "$repo/templates/kernels.cuh.in" >"$out/kernels.cuh"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/tests/cuda/lnb_check.cu" -o "$out/lnb_check.o"
# shellcheck disable=SC2086
$nvcc $arch -ccbin mpicxx "$out/lnb_check.o" -o "$out/lnb_check"
case ${2:-} in
run) "$out/lnb_check" ;;
bench) "$out/lnb_check" bench ;;
esac
