#!/usr/bin/env bash
# tests/cuda/adamw_check.sh OUTDIR [run|bench|host]: the multi-tensor AdamW step (runtime/cuda/trc_adamw.cu;
# docs/CUDA.md) outside any schedule. Compiles runtime/cuda/trc_adamw.cu and tests/cuda/adamw_check.cu for sm_80 and
# sm_90 with warnings as errors and spills reported, links OUTDIR/adamw_check; with `run`, runs the checks (bit for
# bit a CPU loop with tr_adamw's arithmetic), with `bench` the checks and the microbenchmark (both need a GPU); with
# `host`, its host part (adamw_check --host: the kernel's 16-byte and scalar per-thread code on the CPU, no GPU).
set -euo pipefail
out=$1
name=adamw_check
# shellcheck source=tests/cuda/check_build.sh
. "$(dirname "$0")/check_build.sh"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/runtime/cuda/trc_adamw.cu" -o "$out/trc_adamw.o"
# shellcheck disable=SC2086
$nvcc $flags -c "$repo/tests/cuda/adamw_check.cu" -o "$out/adamw_check.o"
# shellcheck disable=SC2086
$nvcc $arch -ccbin mpicxx "$out/adamw_check.o" "$out/trc_adamw.o" -o "$out/adamw_check"
case ${2:-} in
run) "$out/adamw_check" ;;
bench) "$out/adamw_check" bench ;;
host) "$out/adamw_check" --host ;;
esac
