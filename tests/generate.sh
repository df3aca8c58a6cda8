# tests/generate.sh - sourced by tests/run.sh: text generation (mode = "generate"; docs/GENERATE.md). Greedy ids of
# the prefill + KV-cache decode programs against the float64 reference that runs the whole forward on the growing
# sequence (tests/ref/tessref.py generate), token for token, with every new token's logits within 1e-4, on [1,1,1],
# [2,2,1], [2,2,2] and [3,3,1] with prompts of mixed lengths and --bytes on; bad prompts refused with nothing written;
# the KV cache's size in the plan; seeded sampling (temperature, top-k, top-p) equal to the reference's with the same
# seed on three meshes and, over 2000 sequences, to the float64 distribution by chi-square; the usage refusals;
# bf16 programs (a bf16 KV cache) against the reference that rounds at the same points (generate --bf16); where
# transformers and torch import (TESS_HF_PYTHON), greedy ids against GPT2LMHeadModel.generate on the four meshes.
GEN_DIMS="--layers 2 --hidden 16 --heads 4 --ffn 32 --vocab 23 --positions 12 --seq 4 --batch 2"
GEN_REF=tests/ref/tessref.py
GEN_HFPY=${TESS_HF_PYTHON:-$PY}

gen_spec() { # q d batch [decode_layout]: q = 3 takes the model of GEN3_DIMS (hidden, heads and ffn divide by 3);
    # GEN_DTYPE=bf16 in the environment: a bf16 program
    local dims="layers = 2, hidden = 16, heads = 4, ffn = 32" lay="" dt=""
    [ "$1" = 3 ] && dims="layers = 2, hidden = 24, heads = 6, ffn = 48"
    [ -n "${4:-}" ] && lay="decode_layout = \"$4\", "
    [ -n "${GEN_DTYPE:-}" ] && dt="dtype = \"$GEN_DTYPE\", "
    cat <<SPEC
return { name = "gen_q$1_d$2", mesh = { q = $1, d = $2 }, mode = "generate", $lay$dt
  model = { $dims, seq = 4, batch = $3, vocab = 23, positions = 12,
            context = 10 } }
SPEC
}
GEN3_DIMS="--layers 2 --hidden 24 --heads 6 --ffn 48 --vocab 23 --positions 12 --seq 4 --batch 3"

gen_setup() {
    local W="$WORK/gen"
    mkdir -p "$W" &&
        "$PY" $GEN_REF lm-weights $GEN_DIMS --seed 3 --out "$W/w.st" &&
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.array([[3, 7, 1, -1], [5, 2, 9, 11]], np.int32))" \
            "$W/p.npy" &&
        "$PY" $GEN_REF generate $GEN_DIMS --weights "$W/w.st" --prompt-tokens "$W/p.npy" --max-new 6 \
            --out "$W/t_ref.npy" --logits-out "$W/l_ref.npy" &&
        "$PY" $GEN_REF generate $GEN_DIMS --weights "$W/w.st" --prompt-tokens "$W/p.npy" --max-new 6 \
            --out "$W/t_ref_kp.npy" --logits-out "$W/l_ref_kp.npy" $GEN_SAMPLE_KP &&
        "$PY" $GEN_REF generate $GEN_DIMS --weights "$W/w.st" --prompt-tokens "$W/p.npy" --max-new 6 \
            --out "$W/t_ref_t.npy" --logits-out "$W/l_ref_t.npy" $GEN_SAMPLE_T &&
        "$PY" $GEN_REF generate $GEN_DIMS --bf16 --weights "$W/w.st" --prompt-tokens "$W/p.npy" --max-new 6 \
            --out "$W/t_ref16.npy" --logits-out "$W/l_ref16.npy"
}

gen_setup3() { # the [3,3,1] model (GEN3_DIMS): its weights and the float64 reference's greedy ids and logits
    local W="$WORK/gen"
    [ -e "$W/p.npy" ] || gen_setup || return 1
    "$PY" $GEN_REF lm-weights $GEN3_DIMS --seed 13 --out "$W/w3.st" &&
        "$PY" $GEN_REF generate $GEN3_DIMS --weights "$W/w3.st" --prompt-tokens "$W/p.npy" --max-new 6 \
            --out "$W/t_ref3.npy" --logits-out "$W/l_ref3.npy" &&
        "$PY" $GEN_REF generate $GEN3_DIMS --bf16 --weights "$W/w3.st" --prompt-tokens "$W/p.npy" --max-new 6 \
            --out "$W/t_ref163.npy" --logits-out "$W/l_ref163.npy"
}

# sampling: top-k and top-p (each block's candidates all-gathered), temperature alone (a max all-reduce)
GEN_SAMPLE_KP="--temperature 1.5 --top-k 9 --top-p 0.8 --seed 7"
GEN_SAMPLE_T="--temperature 2 --seed 11"

gen_sampled() { # q d tag: the program built by gen_mesh q d, sampling as the reference did with the same seed
    local W="$WORK/gen" dir="$WORK/gen/o_$1_$2" args
    [ -x "$dir/run" ] || gen_mesh "$1" "$2" $(($1 * $1 * $2 > 2 ? $1 * $1 * $2 : 2)) >/dev/null || return 1
    [ "$3" = kp ] && args=$GEN_SAMPLE_KP || args=$GEN_SAMPLE_T
    # shellcheck disable=SC2086
    "$dir/run" --weights "$W/w.st" --generate --prompt-tokens "$W/p.npy" --max-new 6 --output "$dir/t_$3.npy" \
        --logits-out "$dir/l_$3.npy" --bytes --quiet $args &&
        "$PY" $GEN_REF compare-generate "$dir/t_$3.npy" "$W/t_ref_$3.npy" "$dir/l_$3.npy" "$W/l_ref_$3.npy" --tol 1e-4 &&
        ! cmp -s "$dir/t_$3.npy" "$W/t_ref.npy" || { echo "sampled ids equal the greedy ones"; return 1; }
}

# The first sampled id of 2000 sequences of one prompt (each its own key) against the float64 distribution: Pearson's
# chi-square, failing at survival probability 1e-6 (a sampler that follows the distribution fails one run in a
# million; the ids are a fixed function of the seed, so the check is reproducible).
gen_chisq() { # tag alpha
    local W="$WORK/gen" dir="$WORK/gen/o_chisq" args
    [ -e "$W/w.st" ] || gen_setup || return 1
    if [ ! -x "$dir/run" ]; then
        gen_spec 1 1 2000 >"$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null &&
            "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.tile(np.array([[3, 7, 1]], np.int32), (2000, 1)))" \
                "$W/p2000.npy" || return 1
    fi
    [ "$1" = kp ] && args="--temperature 1.5 --top-k 9 --top-p 0.8" || args="--temperature 2"
    # shellcheck disable=SC2086
    "$dir/run" --weights "$W/w.st" --generate --prompt-tokens "$W/p2000.npy" --max-new 1 --output "$dir/t_$1.npy" \
        --seed 5 --quiet $args &&
        "$PY" $GEN_REF sample-chisq $GEN_DIMS --weights "$W/w.st" --prompt-tokens "$W/p2000.npy" \
            --samples "$dir/t_$1.npy" --alpha "$2" $args
}

gen_mesh() { # q d batch [decode_layout]: the greedy run of o[16]_Q_D[_LAYOUT] against the float64 reference, --bytes
    # on; GEN_DTYPE=bf16: the bf16 program against --bf16, and more than 1e-2 from the float64 reference without
    # rounding (0.033 measured: a program that left a rounding point out would sit nearer it)
    local t=${GEN_DTYPE:+16}
    local W="$WORK/gen" dir="$WORK/gen/o${t}_$1_$2${4:+_$4}" m=""
    [ -e "$W/l_ref.npy" ] || gen_setup || return 1
    [ "$1" = 3 ] && m=3
    [ -z "$m" ] || [ -e "$W/l_ref3.npy" ] || gen_setup3 || return 1
    gen_spec "$@" >"$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null &&
        "$dir/run" --weights "$W/w$m.st" --generate --prompt-tokens "$W/p.npy" --max-new 6 --output "$dir/t.npy" \
            --logits-out "$dir/l.npy" --bytes --quiet &&
        "$PY" $GEN_REF compare-generate "$dir/t.npy" "$W/t_ref$t$m.npy" "$dir/l.npy" "$W/l_ref$t$m.npy" --tol 1e-4 || return 1
    [ -z "$t" ] || ! "$PY" $GEN_REF compare-generate "$dir/t.npy" "$W/t_ref$m.npy" "$dir/l.npy" "$W/l_ref$m.npy" \
        --tol 1e-2 || { echo "the bf16 program is within 1e-2 of the float64 reference without rounding"; return 1; }
}

# The decode layouts (docs/GENERATE.md "The weight-stationary layout"): the default program (decode_layout "auto",
# which picks the weight-stationary decode on these meshes) and one with decode_layout = "summa" give the same ids and
# logits within 1e-5, each with --bytes exact; the default's decode step plans all-gathers and reduce-scatters, the
# summa one none (so a plan that ignored the key fails); the bytes the busiest rank (class (0,1)) receives in one
# decode step (the four linears and the head, docs/GENERATE.md "The head") differ between the two by summa -
# stationary of the formula, worked out by hand:
#   [2,2,1] (C 16, F 32, R 1, 2 layers, V 23 so Vq 12): the linears summa 4*2*(1*80/2 + (4*256 + 2*512)/4) = 4416,
#           stationary 4*2*1*(3*80/2 + 1*112/2) = 1408; the head summa 4*1*12*8 + 4*1*1*12 = 432, stationary
#           4*1*1*8 + 4*1*1*12 = 80: 4848 against 1488
#   [3,3,1] (C 24, F 48, Vq 8): the linears summa 4*2*2*(120/3 + (4*576 + 2*1152)/9) = 8832, stationary
#           4*2*1*(5*120/3 + 2*168/3) = 2496; the head summa 4*2*8*8 + 4*2*1*8 = 576, stationary 4*2*1*8 + 4*2*1*8 =
#           128: 9408 against 2624
# bf16 (2 bytes an operand element, 4 a partial sum): [2,2,1] the linears summa 2*2*(1*80/2 + 2048/4) = 2208,
#           stationary 2*1*(2*3*80/2 + 4*1*112/2) = 928, the head 2*1*12*8 + 48 = 240 against 2*1*1*8 + 48 = 64: 2448
#           against 992; [3,3,1] summa 2*2*2*(120/3 + 4608/9) = 4416, stationary 2*1*(2*5*120/3 + 4*2*168/3) = 1696,
#           the head 2*2*8*8 + 64 = 320 against 2*2*1*8 + 64 = 96: 4736 against 1792
gen_layouts() { # q d batch summa-bytes stationary-bytes (GEN_DTYPE=bf16: of the bf16 programs)
    local t=${GEN_DTYPE:+16}
    local W="$WORK/gen" auto="$WORK/gen/o${t}_$1_$2" su="$WORK/gen/o${t}_$1_$2_summa"
    [ -e "$auto/l.npy" ] || gen_mesh "$1" "$2" "$3" >/dev/null || return 1
    gen_mesh "$1" "$2" "$3" summa >/dev/null || { echo "the summa program fails its own greedy check"; return 1; }
    "$PY" $GEN_REF compare-generate "$auto/t.npy" "$su/t.npy" "$auto/l.npy" "$su/l.npy" --tol 1e-5 || return 1
    bin/tessgen "$auto.lua" --summary >"$auto.summary" && bin/tessgen "$su.lua" --summary >"$su.summary" || return 1
    grep -F "decode step (R = 1 row a rank)" "$auto.summary" "$su.summary"
    "$PY" - "$auto" "$su" "$4" "$5" <<'PYEOF'
import re, sys
auto, su, hs, hw = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def plan(d):  # class (0,1)'s planned bytes received in one decode step (what run --bytes checked)
    prog = open(d + "/rank_i0_j1.c").read()
    f = {k: sum(int(v) for v in re.search(r"\.plan_dec_%s = \{([^}]*)\}" % k, prog).group(1).split(","))
         for k in ("bcast_recv", "reduce_recv", "ws_allgather", "ws_rscatter")}
    return f, sum(f.values())
def summ(d):
    t = open(d + ".summary").read()
    m = re.search(r"decode step \(R = 1 row a rank\): layout (\w+) \(([^)]*)\); summa (\d+), stationary (\d+) bytes", t)
    r = re.search(r"decode step, class [^:]*\(0,1\)[^:]*: received (\d+),", t)
    assert m and r, "no decode layout or class (0,1) line in " + d
    return m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), int(r.group(1))
fa, ra = plan(auto)
fs, rs = plan(su)
assert fa["ws_allgather"] > 0 and fa["ws_rscatter"] > 0, ("the default decode step has no all-gather", fa)
assert fs["ws_allgather"] == 0 and fs["ws_rscatter"] == 0, ("decode_layout = summa ignored", fs)
la, why_a, sa, wa, suma = summ(auto)
ls, why_s, ss, ws, sums = summ(su)
assert (la, why_a, ls, why_s) == ("stationary", "fewer bytes", "summa", 'decode_layout = "summa"'), (la, why_a, ls, why_s)
assert (sa, wa) == (hs, hw) == (ss, ws), ("formula", sa, wa, hs, hw)
assert wa < sa
assert (suma, sums) == (ra, rs), ("summary against plan", suma, ra, sums, rs)
assert rs - ra == hs - hw, ("summa - stationary received", rs - ra, hs - hw)
print("class (0,1) receives %d bytes a decode step stationary, %d summa: %d less = %d - %d" % (ra, rs, rs - ra, hs, hw))
PYEOF
}

gen16() { # fn args...: fn for the bf16 programs
    local GEN_DTYPE=bf16
    "$@"
}

gen_layout_forced() { # [2,2,1] with 6 sequences a rank: "auto" keeps SUMMA (fewer bytes), "stationary" is obeyed;
    # by hand: the linears summa 4*2*(6*80/2 + 2048/4) = 6016, stationary 4*2*6*(3*80/2 + 112/2) = 8448; the head
    # summa 4*12*8 + 4*6*12 = 672, stationary 4*6*8 + 4*6*12 = 480 (with 4 sequences the two are equal, 5952: SUMMA)
    local W="$WORK/gen" d="$WORK/gen/o_forced"
    mkdir -p "$W" && gen_spec 2 1 12 >"$d.lua" && gen_spec 2 1 12 stationary >"${d}_ws.lua" || return 1
    bin/tessgen "$d.lua" --summary >"$d.txt" && bin/tessgen "${d}_ws.lua" --summary >"${d}_ws.txt" || return 1
    grep -F "decode step (R = 6 rows a rank)" "$d.txt" "${d}_ws.txt"
    grep -qF "decode step (R = 6 rows a rank): layout summa (fewer bytes); summa 6688, stationary 8928 bytes" "$d.txt" &&
        grep -qF 'decode step (R = 6 rows a rank): layout stationary (decode_layout = "stationary"); summa 6688' \
            "${d}_ws.txt"
}

# Text in and out: prompts encoded by scripts/tokens.py with the 23-token BPE of tests/ref/tiny_bpe.py (the model's
# vocab is 23), generated on [1,1,1], the output decoded by tokens.py: each row is its prompt's text, and the whole
# equals tiny_bpe.py's own decoding of the ids (written without the tokenizers library); --stream prints each step's
# new ids (T's columns) and tokens.py stream turns them into the same text
gen_text() {
    local W="$WORK/gen" dir="$WORK/gen/o_1_1" T="$WORK/gen/tok"
    [ -x "$dir/run" ] || gen_mesh 1 1 2 >/dev/null || return 1
    mkdir -p "$T" && python3 tests/ref/tiny_bpe.py "$T" &&
        python3 scripts/tokens.py encode "$T" -o "$T/p.npy" --text "hello wo" --text "Hi!" &&
        "$dir/run" --weights "$W/w.st" --generate --prompt-tokens "$T/p.npy" --max-new 6 --output "$T/t.npy" \
            --stream --quiet >"$T/stream.out" &&
        python3 scripts/tokens.py decode "$T" "$T/t.npy" --json >"$T/dec.json" &&
        python3 scripts/tokens.py stream "$T" --prompt "$T/p.npy" <"$T/stream.out" >"$T/text.out" || return 1
    cat "$T/stream.out" "$T/text.out"
    "$PY" - "$T" <<'PYEOF'
import json, sys
import numpy as np
sys.path.insert(0, "tests/ref")
import tiny_bpe
d = sys.argv[1]
t = np.load(d + "/t.npy")
got = json.load(open(d + "/dec.json", encoding="utf-8"))
want = [tiny_bpe.decode([int(x) for x in row if x >= 0]) for row in t]
print(t, got, want, sep="\n")
ok = got == want and got[0].startswith("hello wo") and got[1].startswith("Hi!") and t.shape == (2, 9)
# --stream: a line per step, each the new id of every sequence (T's column prompt + m); streamed text as decoded
lines = [l.split() for l in open(d + "/stream.out") if l.startswith("tokens ")]
ok = ok and len(lines) == 6 and all(l[1] == str(m) and [int(x) for x in l[2:]] == list(t[:, 3 + m]) for m, l in enumerate(lines))
text = ["", ""]
for l in open(d + "/text.out", encoding="utf-8"):
    b, _, rest = l.rstrip("\n").partition("] ")
    text[int(b.lstrip("["))] += rest.replace("\\n", "\n")
print("streamed:", text)
sys.exit(0 if ok and text == want else 1)
PYEOF
}

# --stream on a mesh with two depths: every step's line holds each sequence's new id (its T row at prompt length + m),
# gathered from the depth that decodes it; the ids equal the run's --output
gen_stream() { # q d
    local W="$WORK/gen" dir="$WORK/gen/o_$1_$2"
    [ -x "$dir/run" ] || gen_mesh "$1" "$2" $(($1 * $1 * $2 > 2 ? $1 * $1 * $2 : 2)) >/dev/null || return 1
    "$dir/run" --weights "$W/w.st" --generate --prompt-tokens "$W/p.npy" --max-new 6 --output "$dir/ts.npy" \
        --stream --quiet >"$dir/stream.out" || return 1
    cat "$dir/stream.out"
    "$PY" - "$dir/stream.out" "$dir/ts.npy" "$W/p.npy" "$W/t_ref.npy" <<'PYEOF'
import sys
import numpy as np
t, p, ref = np.load(sys.argv[2]), np.load(sys.argv[3]), np.load(sys.argv[4])
lens = [(r >= 0).sum() for r in p]
lines = [l.split() for l in open(sys.argv[1]) if l.startswith("tokens ")]
ok = (t == ref).all() and len(lines) == 6
for m, l in enumerate(lines):
    ok = ok and l[1] == str(m) and [int(x) for x in l[2:]] == [int(t[b, lens[b] + m]) for b in range(len(p))]
sys.exit(0 if ok else 1)
PYEOF
}

gen_bad() { # name prompt-python-expr max-new want
    local W="$WORK/gen" dir="$WORK/gen/o_1_1"
    [ -x "$dir/run" ] || gen_mesh 1 1 2 >/dev/null || return 1
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.array($2, np.int32))" "$W/bad.npy" || return 1
    rm -f "$W/bad_out.npy"
    "$dir/run" --weights "$W/w.st" --generate --prompt-tokens "$W/bad.npy" --max-new "$3" --output "$W/bad_out.npy" \
        >"$W/bad.log" 2>&1
    local rc=$?
    cat "$W/bad.log"
    [ $rc -eq 1 ] || { echo "exit $rc, want 1"; return 1; }
    grep -qF -- "$4" "$W/bad.log" || { echo "message lacks: $4"; return 1; }
    [ ! -e "$W/bad_out.npy" ] || { echo "an output was written"; return 1; }
}

gen_kv_bytes() { # the KV cache of [2,2,1]: per layer [nseq*context, 2*hidden/q] = [1*10, 16] floats, persistent
    local f="$WORK/gen/o_2_1/rank_i0_j0.c"
    [ -e "$f" ] || gen_mesh 2 1 2 >/dev/null || return 1
    grep -q 'float \*const L0_kv = A + [0-9]*; /\* \[10,16\] KV cache of layer 0' "$f" &&
        grep -q 'float \*const L1_kv = A + [0-9]*; /\* \[10,16\] KV cache of layer 1' "$f" &&
        grep -q '\.kv_elems = 320,' "$f"
}

gen_kv_bf16() { # the bf16 program of [2,2,1]: its KV cache is bf16 ([10,16] a layer, half the bytes), --summary says
    # so with its formula, which equals the program's kv_elems at 2 bytes; the tied head's wte and fc1's bias have
    # persistent bf16 copies (rounded once after loading) and no cast step in the decode step
    local dir="$WORK/gen/o16_2_1" f="$WORK/gen/o16_2_1/rank_i0_j1.c"
    [ -e "$f" ] || gen16 gen_mesh 2 1 2 >/dev/null || return 1
    bin/tessgen "$dir.lua" --summary >"$dir.summary" || return 1
    grep 'KV cache per rank' "$dir.summary"
    grep -q 'tr_bf16 \*const L0_kv = (tr_bf16 \*)(A + [0-9]*); /\* \[10,16\] bf16 KV cache of layer 0' "$f" &&
        grep -q 'tr_bf16 \*const L1_kv = (tr_bf16 \*)(A + [0-9]*); /\* \[10,16\] bf16 KV cache of layer 1' "$f" &&
        grep -q '\.kv_elems = 320,' "$f" &&
        grep -qF 'KV cache per rank: layers * (batch/(q*d)) * context * 2 * (hidden/q) * 2 = 2 * 1 * 10 * 2 * 8 * 2 = 640 bytes (bf16' \
            "$dir.summary" &&
        grep -q 'bf16_w_wte_weight = .*written by the runtime after loading' "$f" &&
        grep -q 'bf16_w_h_0_mlp_c_fc_bias = .*written by the runtime after loading' "$f" || return 1
    if sed -n '/^static void dec_/,/^}/p' "$f" | grep 'tr_cast_bf16'; then echo "the decode step casts"; return 1; fi
}

gen_not_recomputed() { # the decode step's comments describe its steps, none as "recomputed" (that is training's)
    local f="$WORK/gen/o_2_1/rank_i0_j1.c"
    [ -e "$f" ] || gen_mesh 2 1 2 >/dev/null || return 1
    grep -q 'TR_STEP(c, [0-9]*); /\* L0 qkv: all-gather X(:,j)' "$f" || { echo "no decode all-gather described"; return 1; }
    ! grep -n 'recomputed' "$f" | head -3 | grep .
}

gen_help() { # --help of a generate program lists generation's options, each one its parser takes; the run script too
    local dir="$WORK/gen/o_1_1" h="$WORK/gen/help.txt" opt
    [ -x "$dir/run" ] || gen_mesh 1 1 2 >/dev/null || return 1
    "$dir/run" --help >"$h" 2>&1 || { cat "$h"; return 1; }
    cat "$h"
    for opt in "--generate" "--prompt-tokens P" "--max-new N" "--eos ID" "--output T" "--logits-out L" \
        "--temperature T" "--top-k K" "--top-p P"; do
        grep -qF -- "  $opt" "$h" || { echo "help lacks: $opt"; return 1; }
        case $opt in *" N" | *" ID" | *" K" | *"e T" | *"p P") opt="${opt%% *} 1" ;; esac
        "$dir/run" ${opt%% *} ${opt#* } --help >/dev/null 2>&1 || { echo "$opt is listed but not taken"; return 1; }
    done
    grep -q '^#   ./run --weights W.safetensors --generate --prompt-tokens P.npy --max-new N' "$dir/run" ||
        { echo "the run script's header lacks --generate"; return 1; }
}

gen_typo() { # a mistyped generation option: did you mean, exit 2
    local dir="$WORK/gen/o_1_1" opt want out
    [ -x "$dir/run" ] || gen_mesh 1 1 2 >/dev/null || return 1
    for opt in --max-nw:--max-new --prompt-token:--prompt-tokens --generat:--generate --eso:--eos \
        --temprature:--temperature --topk:--top-k; do
        out=$("$dir/run" "${opt%%:*}" 3 2>&1)
        [ $? -eq 2 ] || { echo "$out"; echo "${opt%%:*}: exit not 2"; return 1; }
        grep -qF -- "did you mean ${opt#*:}?" <<<"$out" || { echo "$out"; echo "no suggestion of ${opt#*:}"; return 1; }
    done
}

gen_usage() { # program-dir want-message args...: exit 2, the message, no output written
    local dir=$1 want=$2 W="$WORK/gen"
    shift 2
    rm -f "$W/usage_out.npy"
    "$dir/run" --weights "$W/w.st" "$@" --output "$W/usage_out.npy" >"$W/usage.log" 2>&1
    local rc=$?
    cat "$W/usage.log"
    [ $rc -eq 2 ] || { echo "exit $rc, want 2"; return 1; }
    grep -qF -- "$want" "$W/usage.log" || { echo "message lacks: $want"; return 1; }
    [ ! -e "$W/usage_out.npy" ] || { echo "an output was written"; return 1; }
}

gen_usage_gen() { # the generate program of [1,1,1]
    [ -x "$WORK/gen/o_1_1/run" ] || gen_mesh 1 1 2 >/dev/null || return 1
    gen_usage "$WORK/gen/o_1_1" "$@"
}

gen_usage_infer() { # an inference program of the same model (mode = "infer", no KV cache)
    local W="$WORK/gen" dir="$WORK/gen/infer"
    [ -e "$W/p.npy" ] || gen_setup || return 1
    if [ ! -x "$dir/run" ]; then
        printf '%s\n' 'return { name = "gen_infer", mesh = { q = 1, d = 1 },' \
            '  model = { layers = 2, hidden = 16, heads = 4, ffn = 32, seq = 4, batch = 2, vocab = 23, positions = 12 } }' \
            >"$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null || return 1
    fi
    gen_usage "$dir" "not generated with mode = \"generate\"" --generate --prompt-tokens "$W/p.npy" --max-new 2
}

gen_summary() { # --summary of [2,2,1]: the KV cache line equals the program's kv_elems, the decode step's bytes its plan
    local dir="$WORK/gen/o_2_1"
    [ -e "$dir/rank_i0_j0.c" ] || gen_mesh 2 1 2 >/dev/null || return 1
    bin/tessgen "$dir.lua" --summary >"$WORK/gen/summary.txt" || return 1
    grep -A2 '^generation' "$WORK/gen/summary.txt"
    "$PY" - "$WORK/gen/summary.txt" "$dir/rank_i0_j0.c" <<'PYEOF'
import re, sys
summ, prog = open(sys.argv[1]).read(), open(sys.argv[2]).read()
kv = re.search(r"KV cache per rank: .* = 2 \* 1 \* 10 \* 2 \* 8 \* 4 = (\d+) bytes", summ)
assert kv and int(kv.group(1)) == 4 * int(re.search(r"\.kv_elems = (\d+)", prog).group(1)), "KV cache line"
plan = {k: sum(int(v) for v in re.search(r"\.plan_dec_%s = \{([^}]*)\}" % k, prog).group(1).split(","))
        for k in ("bcast_recv", "bcast_sent", "allreduce", "reduce_recv", "reduce_sent", "ws_allgather", "ws_rscatter")}
dec = re.search(r"decode step, class \(0,0\)[^:]*: received (\d+), sent (\d+), reduced (\d+) bytes", summ)
assert dec, "no decode step line"
ws = plan["ws_allgather"] + plan["ws_rscatter"]  # the weight-stationary layout's: received = sent
want = (plan["bcast_recv"] + plan["reduce_recv"] + ws, plan["bcast_sent"] + plan["reduce_sent"] + ws, plan["allreduce"])
assert tuple(int(g) for g in dec.groups()) == want, (dec.groups(), want)
PYEOF
}

gen_from_hf() { # tessgen --from-hf DIR --mode generate --context N prints a spec the loader takes, with the KV cache
    local W="$WORK/gen"
    "$PY" $GEN_REF hf-dir --layers 2 --hidden 16 --heads 4 --ffn 32 --seq 4 --batch 2 --seed 4 --vocab 23 \
        --n-positions 12 --out "$W/hf" >/dev/null &&
        bin/tessgen --from-hf "$W/hf" --mesh 2,1 --seq 4 --batch 2 --mode generate --context 10 >"$W/hf.lua" || return 1
    cat "$W/hf.lua"
    grep -q 'mode = "generate"' "$W/hf.lua" && grep -q 'context = 10' "$W/hf.lua" || { echo "no mode or context"; return 1; }
    bin/tessgen "$W/hf.lua" --summary | grep -F "= 2 * 1 * 10 * 2 * 8 * 4 = 1280 bytes" || { echo "no KV line"; return 1; }
    local out rc
    out=$(bin/tessgen --from-hf "$W/hf" --mesh 2,1 --seq 4 --batch 2 --mode generate 2>&1)
    rc=$?
    [ $rc -eq 2 ] && grep -qF -- "--mode generate needs --context N" <<<"$out" || { echo "$out (exit $rc)"; return 1; }
    out=$(bin/tessgen --from-hf "$W/hf" --mesh 2,1 --seq 4 --batch 2 --context 10 2>&1)
    rc=$?
    [ $rc -eq 2 ] && grep -qF -- "--context goes with --mode generate" <<<"$out" || { echo "$out (exit $rc)"; return 1; }
    out=$(bin/tessgen --from-hf "$W/hf" --mesh 2,1 --seq 4 --batch 2 --mode generate --context 13 2>&1)
    rc=$?
    [ $rc -eq 1 ] && grep -qF "model.context = 13 is larger than model.positions = 12" <<<"$out" ||
        { echo "$out (exit $rc)"; return 1; }
}

# Hugging Face itself: a save_pretrained directory of a random model (tessref hf-dir, transformer.* names, tied head)
# and GPT2LMHeadModel.generate(do_sample=False) of it, each prompt alone with its own KV cache (tests/ref/hf_generate.py,
# run by TESS_HF_PYTHON: an interpreter with transformers and torch)
gen_hf_setup() { # [3]: the model of GEN3_DIMS (hidden, heads and ffn divide by 3) in hfgen3, its ids t_hf3.npy
    local W="$WORK/gen" m=${1:-} dims="--hidden 16 --heads 4 --ffn 32 --batch 2"
    [ "$m" = 3 ] && dims="--hidden 24 --heads 6 --ffn 48 --batch 3"
    [ -e "$W/p.npy" ] || gen_setup || return 1
    # shellcheck disable=SC2086
    "$PY" $GEN_REF hf-dir --layers 2 $dims --seq 4 --seed 8 --vocab 23 --n-positions 12 --out "$W/hfgen$m" &&
        "$GEN_HFPY" tests/ref/hf_generate.py --dir "$W/hfgen$m" --prompt-tokens "$W/p.npy" --max-new 6 \
            --out "$W/t_hf$m.npy" --logits-out "$W/l_hf$m.npy"
}

# the same prompts (lengths 3 and 4) in one left-padded transformers call with an attention mask, as users batch
# ragged prompts there, against the [1,1,1] program's ids and logits of its own ragged batch
gen_hf_batched() {
    local W="$WORK/gen" dir="$WORK/gen/o_1_1"
    [ -e "$W/l_hf.npy" ] || gen_hf_setup || return 1
    [ -x "$dir/run" ] || gen_mesh 1 1 2 >/dev/null || return 1
    "$GEN_HFPY" tests/ref/hf_generate.py --dir "$W/hfgen" --prompt-tokens "$W/p.npy" --max-new 6 --batched \
        --out "$W/t_hfb.npy" --logits-out "$W/l_hfb.npy" &&
        "$dir/run" --weights "$W/hfgen/model.safetensors" --generate --prompt-tokens "$W/p.npy" --max-new 6 \
            --output "$dir/t_hfb.npy" --logits-out "$dir/l_hfb.npy" --quiet &&
        "$PY" $GEN_REF compare-generate "$dir/t_hfb.npy" "$W/t_hfb.npy" "$dir/l_hfb.npy" "$W/l_hfb.npy" --tol 1e-4
}

gen_hf() { # q d batch: the program of gen_mesh run on the directory's weights, greedy, against transformers' generate
    # (q = 3: the GEN3_DIMS model, whose widths divide by 3)
    local W="$WORK/gen" dir="$WORK/gen/o_$1_$2" m=""
    [ "$1" = 3 ] && m=3
    [ -e "$W/l_hf$m.npy" ] || gen_hf_setup $m || return 1
    [ -x "$dir/run" ] || gen_mesh "$@" >/dev/null || return 1
    "$dir/run" --weights "$W/hfgen$m/model.safetensors" --generate --prompt-tokens "$W/p.npy" --max-new 6 \
        --output "$dir/t_hf.npy" --logits-out "$dir/l_hf.npy" --bytes --quiet &&
        "$PY" $GEN_REF compare-generate "$dir/t_hf.npy" "$W/t_hf$m.npy" "$dir/l_hf.npy" "$W/l_hf$m.npy" --tol 1e-4
}

gen_timing() { # --timing with --generate: the prefill's time, the median of the 5 decode steps, their step kinds
    local W="$WORK/gen" dir="$WORK/gen/o_1_1" t="$WORK/gen/timing.txt"
    [ -x "$dir/run" ] || gen_mesh 1 1 2 >/dev/null || return 1
    "$dir/run" --weights "$W/w.st" --generate --prompt-tokens "$W/p.npy" --max-new 6 --timing --quiet >"$t" || return 1
    cat "$t"
    grep -q '^prefill_seconds=[0-9.]*$' "$t" && grep -q '^decode: median [0-9.]* s over 5 runs' "$t" &&
        grep -q '^decode_seconds_median=[0-9.]*$' "$t" && grep -q '^per decode, slowest rank, by step kind:' "$t" &&
        grep -q '^gemm_seconds=[0-9.]*$' "$t"
}

if true; then
    check "generate: the float64 reference generates (tessref generate)" gen_setup
    check "generate: [1,1,1] greedy ids equal the reference token for token, logits within 1e-4, bytes as planned" \
        gen_mesh 1 1 2
    check "generate: [2,2,1] greedy ids equal the reference token for token, logits within 1e-4, bytes as planned" \
        gen_mesh 2 1 2
    check "generate: [2,2,2] greedy ids equal the reference token for token, logits within 1e-4, bytes as planned" \
        gen_mesh 2 2 4
    check "generate: [3,3,1] greedy ids equal the reference token for token, logits within 1e-4, bytes as planned" \
        gen_mesh 3 1 3
    for m in "1 1 2" "2 1 2" "2 2 4" "3 1 3"; do
        set -- $m
        check "generate: bf16 [$1,$1,$2] (bf16 KV cache) greedy ids equal the --bf16 reference token for token, logits within 1e-4, over 1e-2 from the float64 one; bytes as planned" \
            gen16 gen_mesh $1 $2 $3
    done
    check "generate: [2,2,1] decode_layout summa and the default weight-stationary decode give the same ids, logits within 1e-5; their decode bytes differ by the formula" \
        gen_layouts 2 1 2 4848 1488
    check "generate: bf16 [2,2,1] decode_layout summa and the default weight-stationary decode give the same ids, logits within 1e-5; their decode bytes differ by the bf16 formula" \
        gen16 gen_layouts 2 1 2 2448 992
    check "generate: bf16 [3,3,1] decode_layout summa and the default weight-stationary decode give the same ids, logits within 1e-5; their decode bytes differ by the bf16 formula" \
        gen16 gen_layouts 3 1 3 4736 1792
    check "generate: bf16: the KV cache is bf16 (half the bytes, in --summary with its formula); wte and fc1's bias are rounded once after loading, never cast in a decode step" \
        gen_kv_bf16
    check "generate: [3,3,1] decode_layout summa and the default weight-stationary decode give the same ids, logits within 1e-5; their decode bytes differ by the formula" \
        gen_layouts 3 1 3 9408 2624
    check "generate: decode_layout auto keeps SUMMA where it moves fewer bytes, and decode_layout stationary is obeyed there" \
        gen_layout_forced
    for m in "1 1" "2 1" "2 2"; do
        set -- $m
        check "generate: [$1,$1,$2] samples with top-k and top-p as the reference does with the same seed, token for token" \
            gen_sampled $1 $2 kp
        check "generate: [$1,$1,$2] samples with a temperature as the reference does with the same seed, token for token" \
            gen_sampled $1 $2 t
    done
    check "generate: top-k and top-p samples follow the float64 distribution (chi-square, 1e-6 false failures)" \
        gen_chisq kp 1e-6
    check "generate: temperature samples follow the float64 distribution (chi-square, 1e-6 false failures)" \
        gen_chisq t 1e-6
    for m in "1 1 2" "2 1 2" "2 2 4" "3 1 3"; do
        set -- $m
        gen_hf_name="generate: [$1,$1,$2] greedy ids equal transformers' GPT2LMHeadModel.generate token for token, logits within 1e-4"
        if "$GEN_HFPY" -c "import transformers, torch" >/dev/null 2>&1; then
            check "$gen_hf_name" gen_hf $1 $2 $3
        elif wanted "$gen_hf_name"; then
            ok "$gen_hf_name # skip transformers and torch not importable by $GEN_HFPY (set TESS_HF_PYTHON)"
        fi
    done
    gen_hf_name="generate: [1,1,1] greedy ids equal one left-padded, masked transformers generate call of the ragged prompts, logits within 1e-4"
    if "$GEN_HFPY" -c "import transformers, torch" >/dev/null 2>&1; then
        check "$gen_hf_name" gen_hf_batched
    elif wanted "$gen_hf_name"; then
        ok "$gen_hf_name # skip transformers and torch not importable by $GEN_HFPY (set TESS_HF_PYTHON)"
    fi
    if python3 -c 'import sys; sys.path.insert(0, "scripts"); import tokenizer; tokenizer._import()' >"$WORK/log" 2>&1; then
        check "generate: text in and out: prompts encoded by scripts/tokens.py run on [1,1,1], the ids decode to each prompt's text and its continuation; --stream's lines are each step's ids, streamed text the same" \
            gen_text
    else
        ok "generate: text in and out # skip the tokenizers wheel could not be installed ($(tail -1 "$WORK/log"))"
    fi
    check "generate: [2,2,2] --stream prints every decode step's new id of each sequence, gathered over the depths, as --output has them" \
        gen_stream 2 2
    check "generate: run --generate --timing prints the prefill's time and the median decode step by step kind" gen_timing
    check "generate: --summary shows the KV cache per rank with its formula and the decode step's planned bytes" \
        gen_summary
    check "generate: tessgen --from-hf --mode generate --context N prints a spec with the KV cache; without one refused" \
        gen_from_hf
    check "generate: no step of the prefill or the decode step is described as recomputed" gen_not_recomputed
    check "generate: the KV cache is layers x [sequences per rank * context, 2*hidden/q] persistent floats" gen_kv_bytes
    check "generate: run --help lists the generation options and the run script's header shows --generate" gen_help
    check "generate: a mistyped generation option gets did you mean, exit 2" gen_typo
    check "generate: --generate on an inference program is refused with exit 2, nothing written" gen_usage_infer
    check "generate: --prompt-tokens without --generate is refused with exit 2, nothing written" gen_usage_gen \
        "belong to --generate" --prompt-tokens "$WORK/gen/p.npy" --max-new 2
    check "generate: --generate without --max-new is refused with exit 2, nothing written" gen_usage_gen \
        "needs --prompt-tokens P.npy and --max-new N" --generate --prompt-tokens "$WORK/gen/p.npy"
    check "generate: --eos not below model.vocab is refused with exit 2, nothing written" gen_usage_gen \
        "below model.vocab" --generate --prompt-tokens "$WORK/gen/p.npy" --max-new 2 --eos 23
    check "generate: --temperature 0 is refused with exit 2, nothing written" gen_usage_gen \
        "expected a number > 0" --generate --prompt-tokens "$WORK/gen/p.npy" --max-new 2 --temperature 0
    check "generate: --top-p above 1 is refused with exit 2, nothing written" gen_usage_gen \
        "expected a number in (0, 1]" --generate --prompt-tokens "$WORK/gen/p.npy" --max-new 2 --top-p 1.5
    check "generate: --top-k without --generate is refused with exit 2, nothing written" gen_usage_gen \
        "belong to --generate" --top-k 3
    check "generate: a token id out of range is refused, nothing written" gen_bad id "[[3, 23, -1, -1]]" 2 \
        "is not a token id"
    check "generate: a prompt longer than model.seq is refused, nothing written" gen_bad long "[[1, 2, 3, 4, 5]]" 2 \
        "L <= model.seq = 4"
    check "generate: prompt + --max-new beyond model.context is refused, nothing written" gen_bad ctx "[[1, 2, 3]]" 8 \
        "exceed model.context = 10"
fi
