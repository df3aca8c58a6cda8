# tests/docs.sh - sourced by tests/run.sh: the documents a user reads (README.md, docs/, the READMEs
# under data/, specs/, tests/, bench/) point only at what a clone has: every relative link resolves to
# a file of the repository and every #anchor to one of its headings, nothing points outside the
# repository (../shared, a workstation's paths), no prose cites internal issue numbers, and README
# starts with its status table (tools/doccheck.py). The checker is first shown to find each kind of
# problem in a fixture, so that a clean report means something.

docs_selftest() {
    local d="$WORK/doccheck"
    rm -rf "$d" && mkdir -p "$d"
    cat >"$d/a.md" <<'MD'
# Title

## A heading with `code` (and more)

See [the heading](#a-heading-with-code-and-more) and [b](b.md#there).
A [missing file](nothere.md), a [missing anchor](#nowhere), a [bad anchor](b.md#elsewhere).
The design is in `../shared/DESIGN.md` (issue 10.4), fixed by issue 12.
```
[inside a code block](ignored.md) issue 99
```
MD
    printf '# B\n\n## There\n' >"$d/b.md"
    python3 tools/doccheck.py --root "$d" "$d/a.md" "$d/b.md" >"$d/out" 2>&1
    local rc=$?
    cat "$d/out"
    [ $rc -eq 1 ] || return 1
    grep -q "^a.md:6: link nothere.md names" "$d/out" &&
        grep -q "a.md:6: link #nowhere: .*no heading with anchor #nowhere" "$d/out" &&
        grep -q "a.md:6: link b.md#elsewhere" "$d/out" &&
        grep -q "a.md:7: points outside the repository (../shared)" "$d/out" &&
        grep -q "a.md:7: cites an internal issue number" "$d/out" &&
        grep -q "doccheck: 2 files, 5 problems" "$d/out"
}

check "docs: tools/doccheck.py finds a missing file, a missing anchor, a path outside the repository and an issue number" docs_selftest
check "docs: every link of README.md and docs/ resolves in the repository, no issue numbers, README starts with its status" python3 tools/doccheck.py
