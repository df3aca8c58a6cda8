# tests/data.sh - sourced by tests/run.sh: the shipped training corpus data/tiny (data/README.md).
# scripts/mkshard.py, run without site-packages (standard library only), must rewrite
# data/tiny/train.bin and val.bin byte for byte from the texts data/tiny/SOURCES lists; its
# --help and its refusals; the corpus stays small. The loader's reading of the same files is
# test_data's "shipped:" case.

data_regen() {
    python3 -S scripts/mkshard.py --train "$WORK/train.bin" --val "$WORK/val.bin" --val-fraction 0.1 \
        --sources data/tiny/SOURCES || return 1
    cmp "$WORK/train.bin" data/tiny/train.bin && cmp "$WORK/val.bin" data/tiny/val.bin
}

data_help() {
    python3 -S scripts/mkshard.py --help >"$WORK/mkshard.help" || return 1
    cat "$WORK/mkshard.help"
    grep -q "20240520" "$WORK/mkshard.help" && grep -q -- "--val-fraction" "$WORK/mkshard.help"
}

# refused WANT_TEXT ARGS...: exit 2 (usage) or 1, with the text, and no shard written
data_refused() {
    local want=$1
    shift
    rm -f "$WORK/never.bin"
    python3 -S scripts/mkshard.py "$@" >"$WORK/mk.out" 2>&1
    local rc=$?
    cat "$WORK/mk.out"
    [ $rc -ne 0 ] && grep -qF -- "$want" "$WORK/mk.out" && [ ! -e "$WORK/never.bin" ]
}

data_small() {
    local n
    n=$(cat data/tiny/SOURCES data/tiny/text/* data/tiny/*.bin | wc -c)
    echo "data/tiny: $n bytes"
    [ "$n" -lt 200000 ]
}

check "data: scripts/mkshard.py (standard library only) rewrites data/tiny/train.bin and val.bin byte for byte" data_regen
check "data: scripts/mkshard.py --help names the format and the options" data_help
check "data: scripts/mkshard.py refuses -o with --train" data_refused "either -o OUT" -o "$WORK/never.bin" --train x data/tiny/SOURCES
check "data: scripts/mkshard.py refuses a missing text, naming it" data_refused "$WORK/none.txt" -o "$WORK/never.bin" "$WORK/none.txt"
check "data: scripts/mkshard.py refuses --val-fraction outside (0, 1)" data_refused "outside (0, 1)" --train "$WORK/never.bin" --val "$WORK/v.bin" --val-fraction 1.5 data/tiny/SOURCES
check "data: data/tiny is under 200 KB" data_small
