# tests/generate.sh - sourced by tests/run.sh: text generation (mode = "generate"; docs/GENERATE.md). Greedy ids of
# the prefill + KV-cache decode programs against the float64 reference that runs the whole forward on the growing
# sequence (tests/ref/tessref.py generate), token for token, with every new token's logits within 1e-4, on [1,1,1],
# [2,2,1] and [2,2,2] with prompts of mixed lengths and --bytes on; bad prompts refused with nothing written; the
# KV cache's size in the plan.
GEN_DIMS="--layers 2 --hidden 16 --heads 4 --ffn 32 --vocab 23 --positions 12 --seq 4 --batch 2"
GEN_REF=tests/ref/tessref.py

gen_spec() { # q d batch
    cat <<SPEC
return { name = "gen_q$1_d$2", mesh = { q = $1, d = $2 }, mode = "generate",
  model = { layers = 2, hidden = 16, heads = 4, ffn = 32, seq = 4, batch = $3, vocab = 23, positions = 12,
            context = 10 } }
SPEC
}

gen_setup() {
    local W="$WORK/gen"
    mkdir -p "$W" &&
        "$PY" $GEN_REF lm-weights $GEN_DIMS --seed 3 --out "$W/w.st" &&
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.array([[3, 7, 1, -1], [5, 2, 9, 11]], np.int32))" \
            "$W/p.npy" &&
        "$PY" $GEN_REF generate $GEN_DIMS --weights "$W/w.st" --prompt-tokens "$W/p.npy" --max-new 6 \
            --out "$W/t_ref.npy" --logits-out "$W/l_ref.npy"
}

gen_mesh() { # q d batch
    local W="$WORK/gen" dir="$WORK/gen/o_$1_$2"
    [ -e "$W/l_ref.npy" ] || gen_setup || return 1
    gen_spec "$@" >"$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null &&
        "$dir/run" --weights "$W/w.st" --generate --prompt-tokens "$W/p.npy" --max-new 6 --output "$dir/t.npy" \
            --logits-out "$dir/l.npy" --bytes --quiet &&
        "$PY" $GEN_REF compare-generate "$dir/t.npy" "$W/t_ref.npy" "$dir/l.npy" "$W/l_ref.npy" --tol 1e-4
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

if true; then
    check "generate: the float64 reference generates (tessref generate)" gen_setup
    check "generate: [1,1,1] greedy ids equal the reference token for token, logits within 1e-4, bytes as planned" \
        gen_mesh 1 1 2
    check "generate: [2,2,1] greedy ids equal the reference token for token, logits within 1e-4, bytes as planned" \
        gen_mesh 2 1 2
    check "generate: [2,2,2] greedy ids equal the reference token for token, logits within 1e-4, bytes as planned" \
        gen_mesh 2 2 4
    check "generate: the KV cache is layers x [sequences per rank * context, 2*hidden/q] persistent floats" gen_kv_bytes
    check "generate: a token id out of range is refused, nothing written" gen_bad id "[[3, 23, -1, -1]]" 2 \
        "is not a token id"
    check "generate: a prompt longer than model.seq is refused, nothing written" gen_bad long "[[1, 2, 3, 4, 5]]" 2 \
        "L <= model.seq = 4"
    check "generate: prompt + --max-new beyond model.context is refused, nothing written" gen_bad ctx "[[1, 2, 3]]" 8 \
        "exceed model.context = 10"
fi
