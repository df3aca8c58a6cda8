#!/usr/bin/env bash
# tests/cuda/decode_check.sh OUTDIR [run|bench]: text generation's kernels (runtime/cuda/trk_gen_kernels.cuh: the KV
# write, the decode step's attention and position add, the argmax; docs/GENERATE.md) outside any schedule. Compiles
# tests/cuda/decode_check.cu for sm_80 and sm_90 with warnings as errors and spills reported, links
# OUTDIR/decode_check; with `run`, runs the checks, with `bench` the checks and the microbenchmark (needs a GPU).
set -euo pipefail
out=$1
name=decode_check
# shellcheck source=tests/cuda/check_build.sh
. "$(dirname "$0")/check_build.sh"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/tests/cuda/decode_check.cu" -o "$out/decode_check.o"
# shellcheck disable=SC2086
$nvcc $arch -ccbin mpicxx "$out/decode_check.o" -o "$out/decode_check"
case ${2:-} in
run) "$out/decode_check" ;;
bench) "$out/decode_check" bench ;;
esac
