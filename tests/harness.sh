# shellcheck shell=bash
# tests/harness.sh - sourced by tests/run.sh (and by tests/harness_test.sh, its self-test): how a check reports its
# result and how the suite counts it. Every group file of tests/ reports through these functions only:
#   ok NAME               a pass; a skip when NAME holds "# skip <why>" (a check that cannot run here, e.g. without
#                         nvcc): "ok - NAME" either way, as TAP writes a skip
#   notok NAME [LOG]      a failure, with the last 25 lines of LOG
#   check NAME CMD...     ok or notok by CMD's exit status (its output in $WORK/log)
#   unit BINARY LABEL     each "ok -"/"not ok -" line BINARY prints is one check, a "# skip" line a skip
#   wanted NAME           whether NAME matches TESS_TEST_FILTER (a check whose name does not is not run)
# The counters pass, fail and skip, set to 0 here, are the sourcing shell's; run.sh prints them last as "N passed,
# N failed, N skipped". A group never sets one itself: a skip it counted as a pass as well was counted twice
# (tests/harness_test.sh holds tests/ to that). Needs $WORK, a folder for the logs.
pass=0
fail=0
skip=0
filter=${TESS_TEST_FILTER:-}

# a result 10 s or more after the previous one (the check and any build before it) says so on its own line,
# so where the suite's time goes can be read from its output
last_result=$SECONDS
took() {
    [ $((SECONDS - last_result)) -lt 10 ] || echo "#   $((SECONDS - last_result))s since the previous result"
    last_result=$SECONDS
}
ok() {
    took
    case "$1" in
    *"# skip"*) skip=$((skip + 1)) ;;
    *) pass=$((pass + 1)) ;;
    esac
    echo "ok - $1"
}
notok() { took; fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && sed 's/^/    # /' "$2" | tail -25; }
wanted() { [ -z "$filter" ] || echo "$1" | grep -Eq "$filter"; }

# check NAME CMD...: passes when CMD exits 0
check() {
    local name=$1
    shift
    wanted "$name" || return 0
    if "$@" >"$WORK/log" 2>&1; then ok "$name"; else notok "$name" "$WORK/log"; fi
}

# unit BINARY: each "ok -"/"not ok -" line it prints is one check
unit() {
    local bin=$1 label=$2
    wanted "unit $label" || return 0
    "$bin" >"$WORK/unit.log" 2>&1
    local rc=$?
    took
    local n=0
    while IFS= read -r line; do
        case "$line" in
        "ok - "*"# skip"*) skip=$((skip + 1)); n=$((n + 1)); echo "ok - unit $label: ${line#ok - }" ;;
        "ok - "*) pass=$((pass + 1)); n=$((n + 1)); echo "ok - unit $label: ${line#ok - }" ;;
        "not ok - "*) fail=$((fail + 1)); n=$((n + 1)); echo "not ok - unit $label: ${line#not ok - }" ;;
        esac
    done <"$WORK/unit.log"
    if [ $rc -ne 0 ] && ! grep -q "^not ok" "$WORK/unit.log"; then
        notok "unit $label exited $rc without reporting a failure" "$WORK/unit.log"
    elif [ $n -eq 0 ]; then
        notok "unit $label ran no case" "$WORK/unit.log"
    fi
}
