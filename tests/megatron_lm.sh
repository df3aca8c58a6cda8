# tests/megatron_lm.sh - sourced by tests/run.sh: the whole GPT-2 (model.vocab) on the megatron scheme
# (gen/plan_megatron_lm.c, docs/MEGATRON.md "The language model") against the independent float64 reference
# (tests/ref/tessref.py lm-*), CPU backend. tests/lm.sh's model: 2 layers, hidden 24, 6 heads, ffn 48, seq 4,
# batch 12, vocab 49, positions 6; vocab 49 pads on p = 2 (Vq = 25, one pad row) and p = 3 (Vq = 17, two).
# For p = 1, 2, 3 (a training program):
#   logits   poisoned first; --logits-out within 1e-5 of lm-forward, the loss within 1e-6, --bytes as planned
#   grads    --grads-out: every tensor within 1e-4 of lm-backward, --bytes as planned
#   bytes    every rank's measured row of --bytes (forward; forward + backward) equals the docs/MEGATRON.md formula,
#            computed here from T, C, L and p: (2L+1)*T*C + 3*T elements forward, (4L+2)*T*C + 3*T with the
#            backward, all in the world all-reduce column; nothing for p = 1
#   replicas p = 2, 3: after 3 AdamW steps every whole tensor (wpe, ln_f, the blocks' vectors) bitwise identical
# then: 20-step losses of p = 1, 2, 3 within 2e-5 of the Tesseract meshes [1,1,1] and [2,2,1] and 1e-4 of lm-train;
# --data training (the validation loss before the first step equals the mean of lm-forward over the shard's 3
# batches); p = 3 under ASan+UBSan; and a mutation (rank 1's target-logit range shifted by one in the generated
# code) caught by the logits check; and p = 2 with model.vocab_align = 8 (logits, loss, gradients, bytes).
# A p's program (and the Tesseract meshes of the losses check) is built only when TESS_TEST_FILTER wants a check
# that runs it (mgl_prog builds on first use); without a filter all are built in the p loop.
MGL=$WORK/mglm
MGL_PS=${TESS_MEGATRON_LM_PS:-"1 2 3"}
. tests/lm_ref.sh # lm_ref_files: tests/lm.sh's model, weights and reference files (this file also runs alone)
MGL_DIMS="--layers 2 --hidden 24 --heads 6 --ffn 48 --seq 4 --batch 12 --vocab 49 --positions 6"
MGL_REF=tests/ref/tessref.py

mgl_spec() { # name mesh-line
    cat <<SPEC
return {
  name = "$1", mode = "train",
  $2,
  model = { layers = 2, hidden = 24, heads = 6, ffn = 48, seq = 4, batch = 12, eps = 1e-5, vocab = 49, positions = 6 },
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },
}
SPEC
}

mgl_build() { # name mesh-line
    mgl_spec "$1" "$2" >"$MGL/$1.lua" && bin/tessgen "$MGL/$1.lua" -o "$MGL/$1" --quiet && ninja -C "$MGL/$1" >/dev/null
}

# mgl_prog P: the training program of p = P in $MGL/mg_pP, built on first use: the p loop builds one only when
# TESS_TEST_FILTER wants one of its checks, and each check after the loop that runs it calls this first, so it also
# runs alone. A failed build leaves mg_pP.failed and is not tried again (mgl_p_ok).
mgl_prog() {
    local dir="$MGL/mg_p$1"
    [ -x "$dir/bin/model" ] && return 0
    [ -e "$dir.failed" ] && { echo "the program of megatron p=$1 did not build (its generate and build check)"; return 1; }
    mgl_build "mg_p$1" "scheme = \"megatron\", mesh = { p = $1 }" || { touch "$dir.failed"; return 1; }
}

# mgl_p_ok P: p = P is one of MGL_PS and its build has not failed (the checks guarded by it run exactly when they did
# on the loop's builds)
mgl_p_ok() {
    case " $MGL_PS " in *" $1 "*) ;; *) return 1 ;; esac
    [ ! -e "$MGL/mg_p$1.failed" ]
}

mgl_setup() { lm_ref_files "$MGL"; } # tests/lm_ref.sh: tests/lm.sh's model, weights and reference files

mgl_poison() { "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((12, 4, 49), np.nan, np.float32))" "$1"; }

mgl_loss_ok() { # fwd.out: its "loss" line within 1e-6 of the float64 reference's
    "$PY" - "$MGL/loss_ref.txt" "$1" <<'PYEOF'
import sys
ref = float(open(sys.argv[1]).read().split()[1])
got = [float(l.split()[1]) for l in open(sys.argv[2]) if l.startswith("loss ")]
rel = abs(got[0] - ref) / ref if got else 1.0
print("loss", got, "reference", ref, "rel %.2e" % rel)
sys.exit(0 if got and rel <= 1e-6 else 1)
PYEOF
}

# mgl_fwd DIR: the forward of $MGL/DIR's program, logits poisoned first, --bytes into DIR/fwd.out
mgl_fwd() {
    local d="$MGL/$1"
    mgl_poison "$d/logits.npy" &&
        "$d/run" --weights "$MGL/w.st" --tokens "$MGL/tok.npy" --targets "$MGL/tgt.npy" --logits-out "$d/logits.npy" \
            --bytes >"$d/fwd.out"
}

# mgl_bwd P: one backward of p = P's program, --grads-out g.st, --bytes into bwd.out
mgl_bwd() {
    local d="$MGL/mg_p$1"
    rm -f "$d/g.st"
    "$d/run" --weights "$MGL/w.st" --tokens "$MGL/tok.npy" --targets "$MGL/tgt.npy" --grads-out "$d/g.st" --bytes \
        >"$d/bwd.out"
}

mgl_logits() { # dir label
    local d="$MGL/$1"
    mgl_fwd "$1" &&
        grep -q "every rank moved exactly the planned bytes" "$d/fwd.out" &&
        "$PY" $MGL_REF compare --ref "$MGL/logits_ref.npy" --got "$d/logits.npy" --tol 1e-5 --label "logits $2" &&
        mgl_loss_ok "$d/fwd.out"
}

mgl_grads() { # p
    local d="$MGL/mg_p$1"
    mgl_bwd "$1" && grep -q "every rank moved exactly the planned bytes" "$d/bwd.out" &&
        "$PY" $MGL_REF compare-grads --ref "$MGL/g_ref.st" --got "$d/g.st" --tol 1e-4 --label "megatron p=$1"
}

# docs/MEGATRON.md's formula, derived here from the model and p alone, against every rank's measured row (of the runs
# the logits and gradient checks made; run here when those checks did not)
mgl_bytes() { # p
    local d="$MGL/mg_p$1"
    { [ -s "$d/fwd.out" ] || mgl_fwd "mg_p$1"; } && { [ -s "$d/bwd.out" ] || mgl_bwd "$1"; } || return 1
    "$PY" - "$d/fwd.out" "$d/bwd.out" "$1" <<'PYEOF'
import re, sys
fwd_out, bwd_out, p = sys.argv[1], sys.argv[2], int(sys.argv[3])
L, T, C = 2, 12 * 4, 24
want = {fwd_out: (2 * L + 1) * T * C + 3 * T, bwd_out: (4 * L + 2) * T * C + 3 * T}
ok = True
for f, elems in want.items():
    b = 4 * elems if p > 1 else 0
    rows = [l.split() for l in open(f) if re.match(r"^\s*\d+\s+\d+/", l)]
    ok = ok and len(rows) == p
    for r in rows:
        pairs = [tuple(int(x) for x in c.split("/")) for c in r[1:9]]
        meas = [a for a, _ in pairs]
        # columns: bcast recv row, col; bcast sent row, col; allreduce world; allreduce dep+coldep; reduce recv, sent
        if meas[4] != b or any(meas[k] for k in (0, 1, 2, 3, 5, 6, 7)):
            print("%s rank %s: %s, want %d bytes all-reduced over world and nothing else" % (f, r[0], pairs, b)); ok = False
    print("p=%d %s: %d ranks, %d bytes per rank (formula)" % (p, "forward" if f == fwd_out else "forward+backward", len(rows), b))
sys.exit(0 if ok else 1)
PYEOF
}

mgl_replicas() { # p
    "$MGL/mg_p$1/run" --weights "$MGL/w.st" --tokens "$MGL/tok.npy" --targets "$MGL/tgt.npy" --steps 3 \
        --replica-check >"$MGL/rep.out" && cat "$MGL/rep.out" && grep -q "bitwise identical" "$MGL/rep.out"
}

mgl_losses() {
    local m
    for m in $MGL_PS; do
        mgl_prog "$m" || return 1
    done
    for m in $MGL_PS tess_1_1 tess_2_1; do
        local dir="$MGL/mg_p$m"
        case $m in tess_*) dir="$MGL/$m" ;; esac
        "$dir/run" --weights "$MGL/w.st" --tokens "$MGL/tok.npy" --targets "$MGL/tgt.npy" --steps 20 |
            grep '^step ' >"$MGL/loss_$m.txt" || return 1
    done
    "$PY" - "$MGL" $MGL_PS <<'PYEOF'
import sys
w = sys.argv[1]
def losses(f):
    return [float(l.split()[3]) for l in open(f) if l.startswith("step ")]
ref = losses(w + "/train_ref.txt")
tess = {t: losses("%s/loss_%s.txt" % (w, t)) for t in ("tess_1_1", "tess_2_1")}
runs = {p: losses("%s/loss_%s.txt" % (w, p)) for p in sys.argv[2:]}
ok = len(ref) == 20 and all(len(v) == 20 for v in list(runs.values()) + list(tess.values()))
worst_t = worst_r = 0.0
for p, v in runs.items():
    for k in range(min(20, len(v))):
        for t, tv in tess.items():
            a = abs(v[k] - tv[k]) / abs(tv[k]) if k < len(tv) else 1.0
            worst_t = max(worst_t, a)
            if a > 2e-5:
                print("p=%s step %d: loss %.9g vs %s %.9g (rel %.2e > 2e-5)" % (p, k + 1, v[k], t, tv[k], a)); ok = False
        b = abs(v[k] - ref[k]) / abs(ref[k]) if k < len(ref) else 1.0
        worst_r = max(worst_r, b)
        if b > 1e-4:
            print("p=%s step %d: loss %.9g vs float64 %.9g (rel %.2e > 1e-4)" % (p, k + 1, v[k], ref[k], b)); ok = False
    if not v or not v[-1] < v[0]:
        print("p=%s: the loss does not fall: %s" % (p, v)); ok = False
print("step 1 and 20:", {p: (v[0], v[-1]) for p, v in runs.items()}, "reference", (ref[0], ref[-1]))
print("worst relative difference: against tesseract %.2e, against float64 %.2e" % (worst_t, worst_r))
sys.exit(0 if ok else 1)
PYEOF
}

# --data: a shard in llm.c's format written here by hand; the validation loss before the first step on p = 3 equals
# the mean of lm-forward's loss over its 3 batches (sliced here by llm.c's rule: inputs b*B*S.., targets shifted)
mgl_data() {
    local D="$MGL/data" b
    mgl_prog 3 || return 1
    mkdir -p "$D" && "$PY" tests/ref/shard_batches.py "$D" --seed 8 --batch 12 --seq 4 --vocab 49 || return 1
    for b in 0 1 2; do
        "$PY" $MGL_REF lm-forward $MGL_DIMS --weights "$MGL/w.st" --tokens "$D/tok_$b.npy" --targets "$D/tgt_$b.npy" \
            --logits-out "$D/ref_logits_$b.npy" >"$D/ref_loss_$b.txt" || return 1
    done
    "$MGL/mg_p3/run" --weights "$MGL/w.st" --data "$D/train.bin" --val-data "$D/train.bin" --val-batches 3 --steps 2 \
        >"$D/val.out" || { cat "$D/val.out"; return 1; }
    "$PY" - "$D" <<'PYEOF'
import re, sys
d = sys.argv[1]
out = open(d + "/val.out").read()
ref = [float(open("%s/ref_loss_%d.txt" % (d, b)).read().split()[1]) for b in range(3)]
want = sum(ref) / 3
m = re.search(r"^val step 0 loss (\S+)$", out, re.M)
steps = [float(x) for x in re.findall(r"^step \d+ .*loss (\S+)", out, re.M)]
got = float(m.group(1)) if m else float("nan")
rel = abs(got - want) / want
print("val step 0 loss", got, "reference mean", want, "rel %.2e" % rel, "training steps", steps)
sys.exit(0 if rel <= 1e-6 and len(steps) == 2 else 1)
PYEOF
}

# p = 3 built with ASan+UBSan: every gradient against the reference, planned bytes, --stats, no sanitizer report
mgl_asan() {
    local M="$MGL/mg_p3"
    mgl_prog 3 || return 1
    ninja -C "$M" asan >/dev/null && rm -f "$M/ga.st" &&
        TESS_VARIANT=asan "$M/run" --weights "$MGL/w.st" --tokens "$MGL/tok.npy" --targets "$MGL/tgt.npy" \
            --grads-out "$M/ga.st" --bytes --stats >"$MGL/asan.out" 2>"$MGL/asan.err" &&
        grep -q "every step of every rank moved exactly its planned bytes" "$MGL/asan.out" &&
        ! grep -q "Sanitizer\|runtime error" "$MGL/asan.err" &&
        "$PY" $MGL_REF compare-grads --ref "$MGL/g_ref.st" --got "$M/ga.st" --tol 1e-4 --label "asan megatron p=3"
}

# A mutation the checks must catch: in a copy of p = 2's program, rank 1 looks for the target's logit one id too
# low (vocab0 25 -> 24 in its tr_lm_sums call); the logits are unchanged but the loss is wrong.
mgl_mutation() {
    local M="$MGL/mut_p2"
    mgl_prog 2 || return 1
    rm -rf "$M" && cp -r "$MGL/mg_p2" "$M" || return 1
    grep -q "tr_lm_sums(c, .*, 25, " "$M/rank_i1_j0.c" || { echo "tr_lm_sums of rank 1 not found"; return 1; }
    sed -i 's/\(tr_lm_sums(c, .*\), 25, /\1, 24, /' "$M/rank_i1_j0.c" && ninja -C "$M" >/dev/null || return 1
    if mgl_logits mut_p2 "mutated p=2"; then
        echo "the mutated program passed the logits and loss check"
        return 1
    fi
    echo "the mutated program fails the logits and loss check, as it must"
}

# model.vocab_align = 8 on p = 2 (docs/MODEL.md "Padding"): Vq = 32 (15 pad rows, 17 real ids on rank 1) in the
# program's table; one run: the poisoned logits and the loss against lm-forward, every gradient against lm-backward,
# --bytes as planned
mgl_align() {
    local d="$MGL/mg_align8_p2"
    mgl_spec mg_align8_p2 "scheme = \"megatron\", mesh = { p = 2 }" |
        sed "s/positions = 6 },/positions = 6, vocab_align = 8 },/" >"$d.lua" &&
        grep -q "vocab_align = 8" "$d.lua" && bin/tessgen "$d.lua" -o "$d" --quiet && ninja -C "$d" cpu >/dev/null &&
        grep -q "\.vocab = 49, \.vq = 32," "$d/rank_i0_j0.c" && mgl_poison "$d/logits.npy" && rm -f "$d/g.st" &&
        "$d/run" --weights "$MGL/w.st" --tokens "$MGL/tok.npy" --targets "$MGL/tgt.npy" --logits-out "$d/logits.npy" \
            --grads-out "$d/g.st" --bytes >"$d/fwd.out" &&
        cat "$d/fwd.out" && grep -q "every rank moved exactly the planned bytes" "$d/fwd.out" &&
        "$PY" $MGL_REF compare --ref "$MGL/logits_ref.npy" --got "$d/logits.npy" --tol 1e-5 --label "logits" &&
        "$PY" $MGL_REF compare-grads --ref "$MGL/g_ref.st" --got "$d/g.st" --tol 1e-4 --label "p=2 vocab_align 8" &&
        mgl_loss_ok "$d/fwd.out"
}

if [ -z "$filter" ] || [[ "$filter" == *lm* ]] || [[ "$filter" == *megatron* ]]; then # checks filter themselves
    if mgl_setup >"$WORK/log" 2>&1; then
        ok "lm: megatron float64 reference (weights, tokens, logits, gradients, 20 steps)"
        for p in $MGL_PS; do # a p none of whose checks is wanted is not built here (mgl_prog builds it on demand)
            n1="lm: megatron p=$p logits and loss match the float64 reference, planned bytes"
            n2="lm: megatron p=$p every gradient (wte, wpe, ln_f, blocks) matches lm-backward, planned bytes"
            n3="lm: megatron p=$p bytes per rank equal the docs/MEGATRON.md formula"
            n4="lm: megatron p=$p replicas bitwise identical after 3 AdamW steps"
            wanted "$n1" || wanted "$n2" || wanted "$n3" || { [ "$p" -gt 1 ] && wanted "$n4"; } || continue
            if mgl_prog "$p" >"$WORK/log" 2>&1; then
                check "$n1" mgl_logits "mg_p$p" "megatron p=$p"
                check "$n2" mgl_grads "$p"
                check "$n3" mgl_bytes "$p"
                [ "$p" -gt 1 ] && check "$n4" mgl_replicas "$p"
            else
                notok "lm: megatron p=$p generate and build" "$WORK/log"
            fi
        done
        check "lm: megatron p=2 vocab_align = 8 (Vq 32): logits, loss and every gradient match the reference, planned bytes" \
            mgl_align
        n1="lm: megatron 20-step losses equal tesseract [1,1,1] and [2,2,1], falling, tracking float64"
        if ! wanted "$n1"; then
            : # the Tesseract meshes below are built for this check alone
        elif mgl_build tess_1_1 "mesh = { q = 1, d = 1 }" >"$WORK/log" 2>&1 &&
            mgl_build tess_2_1 "mesh = { q = 2, d = 1 }" >"$WORK/log" 2>&1; then
            check "$n1" mgl_losses
        else
            notok "lm: megatron tesseract meshes for the losses: generate and build" "$WORK/log"
        fi
        mgl_p_ok 3 &&
            check "lm: megatron p=3 trains from a token shard (--data): validation loss equals the reference" mgl_data
        mgl_p_ok 3 &&
            check "lm: megatron p=3 under ASan+UBSan: every gradient, planned bytes, --stats" mgl_asan
        mgl_p_ok 2 &&
            check "lm: megatron a mutated target-logit range fails the logits and loss check" mgl_mutation
    else
        notok "lm: megatron float64 reference (weights, tokens, logits, gradients, 20 steps)" "$WORK/log"
    fi
fi
