#!/usr/bin/env bash
# tests/cuda/rows_check.sh OUTDIR [run|bench]: the float row statistics (layernorm's row sums and centred squares,
# templates/kernels_rows.cu.in) and the vocabulary loss kernels (runtime/cuda/trk_lm_kernels.cuh), outside any schedule
# (docs/CUDA.md "FP64 and tensor cores in the kernels"). Fills kernels.cu.in and kernels_rows.cu.in with no instances into
# OUTDIR/kernels_rows.cu (tests/cuda/rows_check.cu includes it and instantiates what it calls), compiles for sm_80
# and sm_90 with warnings as errors and spills reported, links OUTDIR/rows_check; with `run`, runs the checks,
# with `bench` the checks and the microbenchmark (needs a GPU).
set -euo pipefail
out=$1
name=rows_check
# shellcheck source=tests/cuda/check_build.sh
. "$(dirname "$0")/check_build.sh"
{ fill "$repo/templates/kernels.cu.in" && fill "$repo/templates/kernels_rows.cu.in"; } >"$out/kernels_rows.cu"
fill "$repo/templates/kernels.cuh.in" >"$out/kernels.cuh"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/tests/cuda/rows_check.cu" -o "$out/rows_check.o"
# shellcheck disable=SC2086
$nvcc $arch -ccbin mpicxx "$out/rows_check.o" -o "$out/rows_check"
case ${2:-} in
run) "$out/rows_check" ;;
bench) "$out/rows_check" bench ;;
esac
