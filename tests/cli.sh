# tests/cli.sh - sourced by tests/run.sh: tessgen's command line (options,
# exit codes, messages). Uses the ASan+UBSan build of tessgen.
TG=build/asan/tessgen

cli_help() { $TG --help | grep -q "usage: tessgen SPEC.lua"; }
cli_version() { $TG --version | grep -Eq "^tessgen [0-9]+\.[0-9]+\.[0-9]+$"; }
cli_noargs() { $TG >/dev/null 2>&1; [ $? -eq 2 ]; }
cli_unknown_option() { $TG --frobnicate specs/gpt2-tiny.lua 2>"$WORK/e"; [ $? -eq 2 ] && grep -q -- "--frobnicate" "$WORK/e"; }
cli_missing_spec() {
    $TG "$WORK/nope.lua" -o "$WORK/nope" 2>"$WORK/e"
    [ $? -eq 1 ] && grep -q "nope.lua" "$WORK/e" && [ ! -e "$WORK/nope" ]
}
# outputs are deterministic and rewritten only when their content changes
cli_deterministic() {
    $TG specs/gpt2-tiny.lua -o "$WORK/det1" --quiet &&
        $TG specs/gpt2-tiny.lua -o "$WORK/det2" --quiet &&
        diff -r "$WORK/det1" "$WORK/det2" &&
        touch -d '2001-01-01' "$WORK/det1"/* &&
        $TG specs/gpt2-tiny.lua -o "$WORK/det1" | grep -Eq "wrote 0 of [0-9]+ files" &&
        [ -z "$(find "$WORK/det1" -newermt '2001-01-02' -type f)" ]
}
# a smaller mesh into the same directory removes the stale rank files
cli_stale_ranks() {
    sed 's/d = 2/d = 1/' specs/gpt2-tiny.lua >"$WORK/d1.lua" &&
        $TG specs/gpt2-tiny.lua -o "$WORK/stale" --quiet &&
        $TG "$WORK/d1.lua" -o "$WORK/stale" --quiet &&
        [ "$(ls "$WORK/stale"/rank_*.c | wc -l)" -eq 4 ]
}
check "cli: --help" cli_help
check "cli: --version" cli_version
check "cli: no arguments is a usage error (exit 2)" cli_noargs
check "cli: unknown option is named (exit 2)" cli_unknown_option
check "cli: missing spec file is named, nothing written (exit 1)" cli_missing_spec
check "cli: output is deterministic and rewritten only when changed" cli_deterministic
check "cli: regenerating with fewer ranks removes stale rank files" cli_stale_ranks
