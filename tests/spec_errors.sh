# tests/spec_errors.sh - sourced by tests/run.sh: every spec in tests/specs/bad
# (refused by the spec loader) and in tests/specs/limits (valid specs beyond
# tessgen's work limits or their memory budget, refused before any output) must
# be refused by tessgen (ASan build) with exit 1, a message containing the text
# on its first line ("-- expect: ..."), and no output directory created.
bad_spec() {
    local f=$1 want out
    want=$(sed -n '1s/^-- expect: //p' "$f")
    [ -n "$want" ] || { echo "$f: first line must be '-- expect: <text>'"; return 1; }
    out="$WORK/badspec_out"
    rm -rf "$out"
    build/asan/tessgen "$f" -o "$out" >"$WORK/bad.out" 2>"$WORK/bad.err"
    local rc=$?
    cat "$WORK/bad.err"
    [ $rc -eq 1 ] || { echo "exit $rc, want 1"; return 1; }
    grep -qF -- "$want" "$WORK/bad.err" || { echo "message lacks: $want"; return 1; }
    [ ! -e "$out" ] || { echo "$out was created"; return 1; }
}
for f in tests/specs/bad/*.lua tests/specs/limits/*.lua; do
    check "spec: $(basename "$f") refused with its message" bad_spec "$f"
done
