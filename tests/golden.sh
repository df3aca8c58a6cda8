# tests/golden.sh - sourced by tests/run.sh: the emitted text of
# tests/specs/golden.lua, file by file, against tests/golden/. The tessgen
# checkout path in build.ninja is replaced by @TESSROOT@. After a deliberate
# change to the emitters, review the diff and rewrite with
#   TESS_UPDATE_GOLDEN=1 tests/run.sh
golden_gen() {
    rm -rf "$WORK/golden" && build/asan/tessgen tests/specs/golden.lua -o "$WORK/golden" --quiet &&
        sed -i "s#$ROOT#@TESSROOT@#g" "$WORK/golden/build.ninja"
}
golden_file() {
    local f=$1
    if [ -n "${TESS_UPDATE_GOLDEN:-}" ]; then
        mkdir -p "$(dirname "tests/golden/$f")" && cp "$WORK/golden/$f" "tests/golden/$f"
    fi
    diff -u "tests/golden/$f" "$WORK/golden/$f"
}
if wanted "golden"; then
    if golden_gen >"$WORK/log" 2>&1; then
        for f in rank_i0_j0.c rank_i1_j1.c model.c build.ninja manifest.json schedule.txt run schedule.json \
            schedule.html summary.txt; do
            check "golden: $f" golden_file "$f"
        done
        check "golden: no other files emitted (4 class programs, 8 files, schedule/)" \
            test "$(ls "$WORK/golden" | wc -l)" -eq 13
        check "golden: schedule/ holds the text, JSON and script of each class" \
            test "$(ls "$WORK/golden/schedule" | wc -l)" -eq 12
        for f in schedule/rank_i0_j1.txt schedule/rank_i1_j1.json; do
            check "golden: $f" golden_file "$f"
        done
    else
        notok "golden: generate tests/specs/golden.lua" "$WORK/log"
    fi
fi
