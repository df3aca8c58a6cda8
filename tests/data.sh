# tests/data.sh - sourced by tests/run.sh: the shipped training corpus data/tiny (data/README.md).
# scripts/mkshard.py, run without site-packages (standard library only), must rewrite
# data/tiny/train.bin and val.bin byte for byte from the texts data/tiny/SOURCES lists; its
# --help and its refusals; the corpus stays small. The loader's reading of the same files is
# test_data's "shipped:" case. Text to ids and back with a model directory's tokenizer (scripts/tokens.py,
# mkshard.py --tokenizer) on a 23-token byte-level BPE written here, whose ids are worked out by hand.

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

# the 23-token byte-level BPE of tests/ref/tiny_bpe.py, whose ids are worked out by hand there
data_tok_dir() { # DIR
    mkdir -p "$1" && python3 tests/ref/tiny_bpe.py "$1"
}

data_tokens() {
    local T="$WORK/tok"
    rm -f "$T/p.npy" &&
        python3 scripts/tokens.py encode "$T" -o "$T/p.npy" --text "hello wo" --text "Hi!" --text "é" --text "he" &&
        "$PY" -c '
import numpy as np, sys
got = np.load(sys.argv[1])
want = np.array([[10, 3, 12], [13, 14, 15], [16, 17, -1], [8, -1, -1]], np.int32)
print(got)
sys.exit(0 if got.dtype == np.int32 and got.shape == want.shape and (got == want).all() else 1)' "$T/p.npy" &&
        python3 scripts/tokens.py decode "$T" "$T/p.npy" --json >"$T/dec.json" && cat "$T/dec.json" &&
        [ "$(cat "$T/dec.json")" = '["hello wo", "Hi!", "é", "he"]' ]
}

data_tok_shard() {
    local T="$WORK/tok"
    printf 'hello wo' >"$T/a.txt" && printf 'Hi!' >"$T/b.txt" &&
        python3 -S scripts/mkshard.py --tokenizer "$T" -o "$T/s.bin" "$T/a.txt" "$T/b.txt" &&
        [ "$(od -A n -t u2 -j 1024 -v "$T/s.bin" | tr -s ' \n' ' ')" = " 22 10 3 12 22 13 14 15 " ] &&
        [ "$(od -A n -t d4 -j 8 -N 4 "$T/s.bin" | tr -d ' ')" = 8 ]
}

# refused WANT_TEXT ARGS...: tokens.py exits non-zero with the text, and P.npy is not written
data_tok_refused() {
    local want=$1
    shift
    rm -f "$WORK/tok/never.npy"
    python3 scripts/tokens.py "$@" >"$WORK/tk.out" 2>&1
    local rc=$?
    cat "$WORK/tk.out"
    [ $rc -ne 0 ] && grep -qF -- "$want" "$WORK/tk.out" && [ ! -e "$WORK/tok/never.npy" ]
}

check "data: scripts/mkshard.py (standard library only) rewrites data/tiny/train.bin and val.bin byte for byte" data_regen
check "data: scripts/mkshard.py --help names the format and the options" data_help
check "data: scripts/mkshard.py refuses -o with --train" data_refused "either -o OUT" -o "$WORK/never.bin" --train x data/tiny/SOURCES
check "data: scripts/mkshard.py refuses a missing text, naming it" data_refused "$WORK/none.txt" -o "$WORK/never.bin" "$WORK/none.txt"
check "data: scripts/mkshard.py refuses --val-fraction outside (0, 1)" data_refused "outside (0, 1)" --train "$WORK/never.bin" --val "$WORK/v.bin" --val-fraction 1.5 data/tiny/SOURCES
check "data: data/tiny is under 200 KB" data_small
if data_tok_dir "$WORK/tok" && python3 -c 'import sys; sys.path.insert(0, "scripts"); import tokenizer; tokenizer._import()' \
    >"$WORK/tk_install.log" 2>&1; then
    check "data: scripts/tokens.py encodes prompts with a model directory's byte-level BPE (vocab.json, merges.txt) as worked out by hand, ragged rows padded with -1, and decodes them back to the texts" data_tokens
    check "data: scripts/mkshard.py --tokenizer writes each file as <|endoftext|> and its BPE ids, as worked out by hand" data_tok_shard
    check "data: scripts/tokens.py refuses an empty prompt, naming it; nothing written" \
        data_tok_refused "the prompt has no tokens" encode "$WORK/tok" -o "$WORK/tok/never.npy" --text "hi" --text ""
    check "data: scripts/tokens.py refuses a directory without tokenizer files, naming what it holds" \
        data_tok_refused "no tokenizer.json and no vocab.json + merges.txt" encode data/tiny -o "$WORK/tok/never.npy" --text "hi"
    "$PY" -c 'import numpy as np, sys; np.save(sys.argv[1] + "/f32.npy", np.zeros((2, 3), np.float32)); np.save(sys.argv[1] + "/big.npy", np.array([[1, 23, -1]], np.int32))' "$WORK/tok"
    check "data: scripts/tokens.py decode refuses a float32 .npy" \
        data_tok_refused "float32" decode "$WORK/tok" "$WORK/tok/f32.npy"
    check "data: scripts/tokens.py decode refuses an id outside the tokenizer's vocabulary, naming row and id" \
        data_tok_refused "row 0 holds id 23, outside the tokenizer's vocabulary [0, 23)" decode "$WORK/tok" "$WORK/tok/big.npy"
else
    ok "data: scripts/tokens.py and mkshard.py --tokenizer # skip the tokenizers wheel could not be installed ($(tail -1 "$WORK/tk_install.log"))"
fi
