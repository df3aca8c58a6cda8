# tests/fuzz.sh - sourced by tests/run.sh: each libFuzzer harness of tests/fuzz (spec and machine file loaders,
# safetensors, .npy and JSON readers, writer-reader round trip, token-shard loader, checkpoint reader, the Hugging Face config.json reader) runs for a short fixed budget,
# TESS_FUZZ_SUITE_SECONDS (default 4) each, under ASan+UBSan, starting from the committed seeds;
# a crash, leak, undefined behaviour, failed property or an input running over 10 s fails its
# check, and the input is kept in build/fuzz/artifacts. A long campaign is `ninja fuzz` with
# TESS_FUZZ_SECONDS (tests/fuzz/README.md). Where clang with libFuzzer cannot be had (not root,
# and not installed) each harness prints "ok - ... # skip"; scripts/deps.sh --fuzz installs it.
FUZZ_SECONDS=${TESS_FUZZ_SUITE_SECONDS:-4}
FUZZ_HARNESSES="json safetensors npy roundtrip spec machine data stindex ckpt hfconfig"

fuzz_available() {
    command -v clang >/dev/null 2>&1 &&
        printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' |
        clang -x c -fsanitize=fuzzer - -o "$WORK/fuzz_probe" >/dev/null 2>&1
}

fuzz_one() {
    TESS_FUZZ_SECONDS=$FUZZ_SECONDS TESS_FUZZ_HARNESSES=$1 TESS_FUZZ_CORPUS="$WORK/fuzz_corpus" tests/fuzz/run.sh
}

if wanted "fuzz"; then
    if ! fuzz_available && [ "$(id -u)" = 0 ]; then
        scripts/deps.sh --fuzz >"$WORK/log" 2>&1
    fi
    if ! fuzz_available; then
        for h in $FUZZ_HARNESSES; do
            ok "fuzz: $h # skip clang with libFuzzer not found (scripts/deps.sh --fuzz installs clang libclang-rt-dev)"
        done
    elif ! ninja fuzz-build >"$WORK/log" 2>&1; then
        notok "fuzz: build the harnesses (ninja fuzz-build)" "$WORK/log"
    else
        # two harnesses at a time (each one process, CI has two cores): the next one starts while a check waits for
        # its own, which is then reported with its output and exit status, in the list's order
        fuzz_name() { echo "fuzz: $1, ${FUZZ_SECONDS} s under ASan+UBSan from the committed seeds, nothing found"; }
        fuzz_hs=()
        for h in $FUZZ_HARNESSES; do wanted "$(fuzz_name "$h")" && fuzz_hs+=("$h"); done
        fuzz_pids=()
        fuzz_start() { # index into fuzz_hs
            [ "$1" -lt ${#fuzz_hs[@]} ] || return 0
            fuzz_one "${fuzz_hs[$1]}" >"$WORK/fuzz_${fuzz_hs[$1]}.log" 2>&1 &
            fuzz_pids[$1]=$!
        }
        fuzz_result() { # index: the harness's output, and its exit status
            local rc=0
            wait "${fuzz_pids[$1]}" || rc=$?
            cat "$WORK/fuzz_${fuzz_hs[$1]}.log"
            return $rc
        }
        fuzz_start 0
        for i in "${!fuzz_hs[@]}"; do
            fuzz_start $((i + 1))
            check "$(fuzz_name "${fuzz_hs[i]}")" fuzz_result "$i"
        done
    fi
fi
