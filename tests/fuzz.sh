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
        for h in $FUZZ_HARNESSES; do
            check "fuzz: $h, ${FUZZ_SECONDS} s under ASan+UBSan from the committed seeds, nothing found" fuzz_one "$h"
        done
    fi
fi
