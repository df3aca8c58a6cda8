#!/usr/bin/env bash
# tests/harness_test.sh - the self-test of the suite's counting (tests/harness.sh, run by tests/run.sh as a unit
# check): its functions are called on a known mix of passes, failures and skips and the counts compared with the
# ones worked out by hand; tests/cuda.sh's "every generated .cu" compile check is run with nvcc hidden and must count
# one skip and no pass; and no other file of tests/ sets a counter (pass, fail, skip) itself, the way a skip line once
# counted a pass as well as a skip. Prints what it compared; exit status 1 on any difference.
set -u
cd "$(dirname "$0")/.." || exit 1
T=$(mktemp -d /tmp/tessgen-harness.XXXXXX)
trap 'rm -rf "$T"' EXIT
bad=0
same() { # what want got
    if [ "$2" = "$3" ]; then echo "$1: $3"; else echo "$1: want '$2', got '$3'"; bad=1; fi
}

# the functions: ok (pass, skip), notok, check (true, false, filtered out), unit (its pass, skip and failure lines)
printf '#!/bin/sh\necho "ok - u1"\necho "ok - u2 # skip no device"\necho "not ok - u3"\nexit 1\n' >"$T/unit_bin"
chmod +x "$T/unit_bin"
(
    WORK=$T TESS_TEST_FILTER='^(a|b|c|d|e|unit u)$'
    # shellcheck source=tests/harness.sh
    . tests/harness.sh
    ok a
    ok "b # skip no tool here"
    notok c
    check d true
    check e false
    check f true # not wanted: neither run nor counted
    unit "$T/unit_bin" u
    echo "$pass $fail $skip" >"$T/counts"
) >"$T/out"
cat "$T/out"
same "harness: passed failed skipped" "3 3 2" "$(cat "$T/counts" 2>/dev/null)"
same "harness: the skip's line" "ok - b # skip no tool here" "$(grep -x 'ok - b.*' "$T/out")"
same "harness: the unit binary's skip line" "ok - unit u: u2 # skip no device" "$(grep -x 'ok - unit u: u2.*' "$T/out")"

# a group's skip line: tests/cuda.sh's compile check of every generated .cu, sourced as run.sh sources it, with nvcc
# hidden (TESS_NVCC names no program) and a filter that reaches that check alone
(
    mkdir -p "$T/cuda"
    WORK=$T/cuda TESS_TEST_FILTER='^cuda: compile($|: every generated)' TESS_NVCC=tessgen-test-no-nvcc PY=python3
    # shellcheck source=tests/harness.sh
    . tests/harness.sh
    # shellcheck source=tests/cuda.sh
    . tests/cuda.sh
    echo "$pass $fail $skip" >"$T/cuda_counts"
) >"$T/cuda_out" 2>&1
cat "$T/cuda_out"
same "cuda.sh without nvcc: passed failed skipped" "0 0 1" "$(cat "$T/cuda_counts" 2>/dev/null)"

# no file of tests/ but harness.sh sets a counter: pass=, fail=, skip= (a local variable of those names included)
# shellcheck disable=SC2016 # the \$ are the text searched for
sets=$(grep -nE '(^|[^A-Za-z0-9_.$-])(pass|fail|skip)(=|\+=)' tests/*.sh tests/*/*.sh | grep -v '^tests/harness\(_test\)\?.sh:' |
    grep -v '^tests/run.sh:.*\(pass=0 fail=0 skip=0\|pass=\$((pass + p)) fail=\$((fail + f)) skip=\$((skip + s))\)')
same "files of tests/ that set pass, fail or skip (tests/run.sh's lane 2 aside)" "" "$sets"
exit $bad
