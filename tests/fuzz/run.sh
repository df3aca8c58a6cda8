#!/bin/sh
# tests/fuzz/run.sh - run each libFuzzer harness for a fixed time (what `ninja fuzz` runs).
#   TESS_FUZZ_SECONDS    seconds per harness (default 60)
#   TESS_FUZZ_HARNESSES  which ones (default: json safetensors npy roundtrip spec machine data stindex ckpt hfconfig)
#   TESS_FUZZ_JOBS       parallel fuzzing processes per harness (default 1; libFuzzer -fork=N)
#   TESS_FUZZ_CORPUS     where new inputs are kept (default build/fuzz/corpus; the committed
#                        seeds in tests/fuzz/corpus are read, never written)
# Crashes, leaks, undefined behaviour, property failures and inputs running over 10 s are
# written to build/fuzz/artifacts/<harness>-crash-... (or leak-, timeout-, oom-); reproduce one
# with build/fuzz/fuzz_<harness> FILE. Exit status 1 if any harness found something.
# Run from the repository root after `ninja fuzz-build` (ninja fuzz does both).
set -u
cd "$(dirname "$0")/../.."
secs=${TESS_FUZZ_SECONDS:-60}
corpus=${TESS_FUZZ_CORPUS:-build/fuzz/corpus}
jobs=${TESS_FUZZ_JOBS:-1}
arts=build/fuzz/artifacts
mkdir -p "$arts"
status=0
for h in ${TESS_FUZZ_HARNESSES:-json safetensors npy roundtrip spec machine data stindex ckpt hfconfig}; do
    bin=build/fuzz/fuzz_$h
    [ -x "$bin" ] || { echo "fuzz: $bin is not built (ninja fuzz-build)"; status=1; continue; }
    dict=""
    case $h in
    json | safetensors | stindex | ckpt) dict=-dict=tests/fuzz/json.dict ;;
    npy) dict=-dict=tests/fuzz/npy.dict ;;
    spec) dict=-dict=tests/fuzz/spec.dict ;;
    machine) dict=-dict=tests/fuzz/machine.dict ;;
    data) dict=-dict=tests/fuzz/data.dict ;;
    hfconfig) dict=-dict=tests/fuzz/hfconfig.dict ;;
    esac
    fork=""
    [ "$jobs" -gt 1 ] && fork="-fork=$jobs -ignore_crashes=0"
    mkdir -p "$corpus/$h"
    log=build/fuzz/$h.log
    # shellcheck disable=SC2086
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 $dict $fork \
        -artifact_prefix="$arts/$h-" "$corpus/$h" "tests/fuzz/corpus/$h" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    [ -n "$runs" ] || runs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
    if [ $rc -eq 0 ]; then
        echo "fuzz $h: ${runs:-?} runs in ${secs}s, corpus $(ls "$corpus/$h" | wc -l) files, nothing found"
    else
        status=1
        echo "fuzz $h: FOUND SOMETHING (exit $rc) after ${runs:-?} runs; log $log, input in $arts/:"
        grep -E "ERROR|SUMMARY|fuzz property failed|runtime error|Test unit written" "$log" | head -8 | sed 's/^/    /'
    fi
done
exit $status
