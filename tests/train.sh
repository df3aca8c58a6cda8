# tests/train.sh - sourced by tests/e2e.sh (after its reference inputs exist):
# training programs (mode = "train") against the float64 numpy reference.
#   gradients  for every mesh of the matrix: one forward and backward with a
#              given dL/dy; dL/dx and all 24 weight gradients within 1e-4
#              (relative Frobenius) of tessref.py backward; measured bytes of
#              forward + backward equal the plan (--bytes)
#   replicas   after 5 AdamW steps every parameter shard is bitwise identical
#              to its replicas (dep for matrices, coldep for vectors); the
#              check is shown able to fail by perturbing one replica
#   loss       20 steps on [1,1,1], [2,2,1], [2,2,2]: the same losses within
#              1e-4 relative, falling, and within 1e-3 of the float64 reference
TRAIN_MESHES=${TESS_TRAIN_MESHES:-$E2E_MESHES}

train_spec() { # q d [placement]
    cat <<SPEC
return {
  name = "train_q$1_d$2", mode = "train",
  mesh = { q = $1, d = $2${3:+, placement = \"$3\"} },
  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 12, eps = 1e-5 },
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },
}
SPEC
}

train_setup() {
    "$PY" $REF dy $DIMS --seed 3 --out "$WORK/dy.npy" &&
        "$PY" $REF backward $DIMS --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --dy "$WORK/dy.npy" \
            --dx-out "$WORK/dx_ref.npy" --grads-out "$WORK/g_ref.safetensors" &&
        "$PY" $REF input $DIMS --seed 4 --out "$WORK/target.npy" &&
        "$PY" $REF train $DIMS --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --target "$WORK/target.npy" \
            --steps 20 --lr 1e-3 --beta1 0.9 --beta2 0.999 --adam-eps 1e-8 --weight-decay 0.01 \
            >"$WORK/loss_ref.txt"
}

train_build() { # q d [placement]
    local dir="$WORK/train_$1_$2${3:+_$3}"
    train_spec "$1" "$2" "${3:-}" >"$dir.lua" &&
        bin/tessgen "$dir.lua" -o "$dir" --quiet &&
        ninja -C "$dir" >/dev/null
}

train_grads() { # q d [placement]
    local dir="$WORK/train_$1_$2${3:+_$3}"
    poison "$dir/dx.npy" && rm -f "$dir/g.safetensors" &&
        "$dir/run" --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --dy "$WORK/dy.npy" \
            --dx-out "$dir/dx.npy" --grads-out "$dir/g.safetensors" --bytes --quiet &&
        "$PY" $REF compare --ref "$WORK/dx_ref.npy" --got "$dir/dx.npy" --tol 1e-4 --expect-f32 --label "dx [$1,$1,$2]" &&
        "$PY" $REF compare-grads --ref "$WORK/g_ref.safetensors" --got "$dir/g.safetensors" --tol 1e-4 \
            --label "[$1,$1,$2]"
}

train_replicas() { # q d [placement]
    local dir="$WORK/train_$1_$2${3:+_$3}"
    "$dir/run" --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --target "$WORK/target.npy" --steps 5 \
        --replica-check | tee "$WORK/rep.out" && grep -q "bitwise identical" "$WORK/rep.out"
}

# the check itself can fail: one replica nudged by one ulp must be caught (exit 4)
train_replica_check_fails() {
    local dir="$WORK/train_2_2"
    TESS_TEST_PERTURB_REPLICA=5 "$dir/run" --weights "$WORK/w.safetensors" --input "$WORK/x.npy" \
        --target "$WORK/target.npy" --steps 1 --replica-check --quiet >"$WORK/pert.out" 2>&1
    local rc=$?
    cat "$WORK/pert.out"
    [ $rc -ne 0 ] && grep -q "differs from its replica" "$WORK/pert.out"
}

train_losses() {
    for m in 1_1 2_1 2_2; do
        "$WORK/train_$m/run" --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --target "$WORK/target.npy" \
            --steps 20 | grep '^step ' >"$WORK/loss_$m.txt" || return 1
    done
    "$PY" - "$WORK" <<'PYEOF'
import sys
w = sys.argv[1]
def losses(f):
    return [float(l.split()[3]) for l in open(f) if l.startswith("step ")]
ref = losses(w + "/loss_ref.txt")
runs = {m: losses("%s/loss_%s.txt" % (w, m)) for m in ("1_1", "2_1", "2_2")}
ok = len(ref) == 20 and all(len(v) == 20 for v in runs.values())
base = runs["1_1"]
for m, v in runs.items():
    for k in range(min(20, len(v))):
        rel = abs(v[k] - base[k]) / abs(base[k])
        if rel > 1e-4:
            print("mesh %s step %d: loss %.9g vs [1,1,1] %.9g (rel %.2e > 1e-4)" % (m, k + 1, v[k], base[k], rel)); ok = False
        rel = abs(v[k] - ref[k]) / abs(ref[k])
        if rel > 1e-3:
            print("mesh %s step %d: loss %.9g vs float64 reference %.9g (rel %.2e > 1e-3)" % (m, k + 1, v[k], ref[k], rel)); ok = False
    if not (v[-1] < 0.5 * v[0] and all(b < a for a, b in zip(v, v[1:]))):
        print("mesh %s: loss does not fall steadily: %s" % (m, v)); ok = False
print("losses step 1 and 20:", {m: (v[0], v[-1]) for m, v in runs.items()}, "reference", (ref[0], ref[-1]))
sys.exit(0 if ok else 1)
PYEOF
}

train_infer_refuses() {
    "$WORK/e2e_2_2/run" --dy "$WORK/dy.npy" --quiet 2>"$WORK/tr.err"
    local rc=$?
    cat "$WORK/tr.err"
    [ $rc -eq 2 ] && grep -q 'mode = "train"' "$WORK/tr.err"
}

# issue 12.3: a diverging run stops at the first non-finite loss or gradient, exit 5, and writes nothing
train_diverge() {
    local dir="$WORK/train_div"
    sed 's/lr = 1e-3/lr = 1e30/; s/name = "train_q2_d1"/name = "train_div"/' "$WORK/train_2_1.lua" >"$WORK/train_div.lua" &&
        bin/tessgen "$WORK/train_div.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null || return 1
    cp "$WORK/w.safetensors" "$WORK/wdiv.st"
    "$dir/run" --weights "$WORK/wdiv.st" --input "$WORK/x.npy" --target "$WORK/target.npy" --steps 10 \
        --weights-out "$WORK/wdiv.st" --output "$WORK/ydiv.npy" >"$WORK/div.out" 2>"$WORK/div.err"
    local rc=$?
    cat "$WORK/div.out" "$WORK/div.err"
    [ $rc -eq 5 ] || { echo "exit $rc, want 5"; return 1; }
    grep -Eq "^error: training stopped at step [0-9]+: the loss is (nan|inf|-inf)" "$WORK/div.err" ||
        { echo "no 'training stopped at step N: the loss is ...' message"; return 1; }
    grep -Eq "h\.[0-9]+\.[a-z_0-9.]+" "$WORK/div.err" || { echo "no tensor named"; return 1; }
    grep -q "nothing was written" "$WORK/div.err" || { echo "message does not say nothing was written"; return 1; }
    cmp "$WORK/w.safetensors" "$WORK/wdiv.st" || { echo "the previous weights file was replaced"; return 1; }
    [ ! -e "$WORK/ydiv.npy" ] || { echo "an output was written"; return 1; }
    ! ls "$WORK"/wdiv.st.tmp.* >/dev/null 2>&1 || { echo "a temp file was left"; return 1; }
}

# issue 12.3: a non-finite gradient with a finite loss stops before that step's update (the hook puts a
# NaN into the last element of rank RANK's shard of the last gradient, h.1.mlp.c_proj.bias, at step 3). Rank 3
# of [2,2,2] is (1,1,0); rank 7, (1,1,1), holds a depth replica, whose squares the norm does not count: the
# finiteness scan must find it there
train_nan_gradient() { # RANK
    local dir="$WORK/train_2_2"
    cp "$WORK/w.safetensors" "$WORK/wgrad.st"
    TESS_TEST_NAN_GRADIENT=3,$1 "$dir/run" --weights "$WORK/wgrad.st" --input "$WORK/x.npy" \
        --target "$WORK/target.npy" --steps 6 --weights-out "$WORK/wgrad.st" >"$WORK/grad.out" 2>"$WORK/grad.err"
    local rc=$?
    cat "$WORK/grad.out" "$WORK/grad.err"
    [ $rc -eq 5 ] || { echo "exit $rc, want 5"; return 1; }
    grep -q "^error: training stopped at step 3: the loss [0-9.e+-]* is finite but the gradient is not: the gradient of tensor h.1.mlp.c_proj.bias holds 1 non-finite value" "$WORK/grad.err" ||
        { echo "message does not name step 3 and h.1.mlp.c_proj.bias"; return 1; }
    [ "$(grep -c '^step ' "$WORK/grad.out")" = 2 ] || { echo "want the losses of steps 1 and 2 only"; return 1; }
    cmp "$WORK/w.safetensors" "$WORK/wgrad.st" || { echo "the previous weights file was replaced"; return 1; }
}

# issue 12.4: training outputs are checked before step 1
train_outputs_first() { # OPTION PATH WANT ARGS...
    local opt=$1 path=$2 want=$3
    shift 3
    "$WORK/train_2_2/run" --weights "$WORK/w.safetensors" --input "$WORK/x.npy" "$@" "$opt" "$path" \
        >"$WORK/tof.out" 2>"$WORK/tof.err"
    local rc=$?
    cat "$WORK/tof.out" "$WORK/tof.err"
    [ $rc -eq 1 ] && grep -qF -- "$opt $path: $want" "$WORK/tof.err" && ! grep -q "^step 1 " "$WORK/tof.out"
}

if train_setup >"$WORK/log" 2>&1; then
    ok "train: float64 reference gradients and losses"
    for m in $TRAIN_MESHES; do
        q=${m%,*}
        d=${m#*,}
        if train_build "$q" "$d" >"$WORK/log" 2>&1; then
            check "train: mesh [$q,$q,$d] dL/dx and 24 weight gradients match the float64 reference, planned bytes" \
                train_grads "$q" "$d"
            check "train: mesh [$q,$q,$d] replicas bitwise identical after 5 AdamW steps" train_replicas "$q" "$d"
        else
            notok "train: mesh [$q,$q,$d] generate and build" "$WORK/log"
        fi
    done
    for m in $E2E_PLACED; do
        IFS=, read -r q d pl <<<"$m"
        if train_build "$q" "$d" "$pl" >"$WORK/log" 2>&1; then
            check "train: mesh [$q,$q,$d] placement $pl dL/dx and 24 weight gradients match the float64 reference" \
                train_grads "$q" "$d" "$pl"
            check "train: mesh [$q,$q,$d] placement $pl replicas bitwise identical after 5 AdamW steps" \
                train_replicas "$q" "$d" "$pl"
        else
            notok "train: mesh [$q,$q,$d] placement $pl generate and build" "$WORK/log"
        fi
    done
    if [ -x "$WORK/train_1_1/bin/model" ] && [ -x "$WORK/train_2_1/bin/model" ] && [ -x "$WORK/train_2_2/bin/model" ]; then
        check "train: 20-step losses equal on [1,1,1] [2,2,1] [2,2,2], falling, match float64" train_losses
        check "train: the replica check catches a replica one ulp off" train_replica_check_fails
    fi
    check "train: an inference program refuses --dy and names mode = \"train\"" train_infer_refuses
    if [ -x "$WORK/train_2_2/bin/model" ] && [ -f "$WORK/train_2_1.lua" ]; then
        check "train: issue 12.3, lr = 1e30 stops at the first non-finite loss (exit 5), the previous weights kept" \
            train_diverge
        check "train: issue 12.3, a non-finite gradient stops before its update, naming step and tensor" \
            train_nan_gradient 3
        check "train: a non-finite gradient in a depth replica only (rank 7 of [2,2,2]), which the norm does not count, stops the run too" \
            train_nan_gradient 7
        check "train: issue 12.4, --weights-out into a missing directory is refused before step 1" \
            train_outputs_first --weights-out "$WORK/nodir/w.safetensors" "directory $WORK/nodir does not exist" \
            --steps 10
        check "train: issue 12.4, --grads-out naming a directory is refused before the backward" \
            train_outputs_first --grads-out "$WORK" "is a directory" --dy "$WORK/dy.npy"
        check "train: issue 12.4, --dx-out into a missing directory is refused before the backward" \
            train_outputs_first --dx-out "$WORK/nodir/dx.npy" "directory $WORK/nodir does not exist" --dy "$WORK/dy.npy"
    fi
    if [ -x "$WORK/train_2_2/bin/model" ] && declare -F refused >/dev/null; then # refused, $MK: tests/files.sh
        M="$WORK/train_2_2"
        $MK npy-nan "$WORK/target.npy" "$WORK/tnan.npy" nan 11 7 47
        check "train: issue 12.7, a NaN target is refused before step 1" refused 1 \
            "tnan.npy: target holds 1 non-finite value (NaN or inf), the first at [11, 7, 47]" --weights "$W" \
            --input "$X" --steps 2 --target "$WORK/tnan.npy"
        $MK npy-nan "$WORK/dy.npy" "$WORK/dynan.npy" -inf 0 0 0
        check "train: issue 12.7, a non-finite dy is refused" refused 1 \
            "dynan.npy: dy holds 1 non-finite value (NaN or inf), the first at [0, 0, 0]" --weights "$W" \
            --input "$X" --dy "$WORK/dynan.npy"
    fi
    if [ -x "$WORK/train_2_2/bin/model" ] && declare -F refused >/dev/null; then
        M="$WORK/train_2_2"
        check "train: dy of the wrong shape is refused" refused 1 "dy" --weights "$W" --input "$X" --dy "$WORK/x_b6.npy"
    fi
else
    notok "train: float64 reference gradients and losses" "$WORK/log"
fi

# ---- micro-batches (spec pipeline.microbatches; docs/TRAINING.md "Micro-batches") ----------------------------------
# batch 16, so that m = 2 and m = 4 divide the sequences of a rank on [1,1,1], [2,2,1] and [2,2,2]
MB_DIMS="--layers 2 --hidden 48 --heads 12 --ffn 192 --seq 8 --batch 16"
mb_setup() {
    mkdir -p "$WORK/mb" &&
        "$PY" $REF weights $MB_DIMS --seed 11 --out "$WORK/mb/w.safetensors" &&
        "$PY" $REF input $MB_DIMS --seed 11 --out "$WORK/mb/x.npy" &&
        "$PY" $REF dy $MB_DIMS --seed 3 --out "$WORK/mb/dy.npy" &&
        "$PY" $REF backward $MB_DIMS --weights "$WORK/mb/w.safetensors" --input "$WORK/mb/x.npy" \
            --dy "$WORK/mb/dy.npy" --dx-out "$WORK/mb/dx_ref.npy" --grads-out "$WORK/mb/g_ref.safetensors" &&
        "$PY" $REF input $MB_DIMS --seed 4 --out "$WORK/mb/target.npy"
}
mb_build() { # q d m
    local dir="$WORK/mb/p_$1_$2_$3"
    cat >"$dir.lua" <<SPEC
return {
  name = "mb_q$1_d$2_m$3", mode = "train",
  mesh = { q = $1, d = $2 },
  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 16, eps = 1e-5 },
  pipeline = { microbatches = $3 },
}
SPEC
    TESS_BACKENDS=cpu bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null
}
mb_grads() { # q d m: one forward and backward of every micro-batch against the float64 full batch
    local dir="$WORK/mb/p_$1_$2_$3"
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((16, 8, 48), np.nan, np.float32))" "$dir/dx.npy" &&
        rm -f "$dir/g.safetensors" &&
        "$dir/run" --weights "$WORK/mb/w.safetensors" --input "$WORK/mb/x.npy" --dy "$WORK/mb/dy.npy" \
            --dx-out "$dir/dx.npy" --grads-out "$dir/g.safetensors" --bytes --quiet &&
        "$PY" $REF compare --ref "$WORK/mb/dx_ref.npy" --got "$dir/dx.npy" --tol 1e-4 --expect-f32 \
            --label "dx [$1,$1,$2] m=$3" &&
        "$PY" $REF compare-grads --ref "$WORK/mb/g_ref.safetensors" --got "$dir/g.safetensors" --tol 1e-4 \
            --label "[$1,$1,$2] m=$3"
}
mb_steps() { # q d m: 4 AdamW steps: losses within 1e-5 of the m = 1 program's, replicas bitwise identical
    local dir="$WORK/mb/p_$1_$2_$3" one="$WORK/mb/p_$1_$2_1"
    "$one/run" --weights "$WORK/mb/w.safetensors" --input "$WORK/mb/x.npy" --target "$WORK/mb/target.npy" \
        --steps 4 | grep -E '^(step|after) ' >"$dir.loss1" &&
        "$dir/run" --weights "$WORK/mb/w.safetensors" --input "$WORK/mb/x.npy" --target "$WORK/mb/target.npy" \
            --steps 4 --replica-check --bytes >"$dir.out" &&
        cat "$dir.out" && grep -q "bitwise identical" "$dir.out" &&
        grep -E '^(step|after) ' "$dir.out" >"$dir.lossm" &&
        "$PY" - "$dir.loss1" "$dir.lossm" <<'PYEOF'
import sys
def losses(f):
    return [float(l.split()[3] if l.startswith("step ") else l.split()[4]) for l in open(f)]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
ok = len(a) == 5 and len(b) == 5
for k, (x, y) in enumerate(zip(a, b)):
    rel = abs(x - y) / abs(x)
    print("loss %d: m=1 %.9g, micro-batches %.9g (rel %.2e)" % (k + 1, x, y, rel))
    ok = ok and rel <= 1e-5
sys.exit(0 if ok else 1)
PYEOF
}
mb_dep_bytes() { # q d m: the planned backward all-reduces (dep: dW; coldep: biases, layernorms) equal the m = 1
    # program's: once per step, not once per micro-batch (--bytes checks the run against this plan); each runs inside
    # its own layer's backward function, right after that layer's last accumulation, guarded to the last micro-batch
    # (so on the CUDA backend it overlaps the backward of the layers before)
    local a b
    a=$(grep -h '\.plan_bwd_allreduce' "$WORK/mb/p_$1_$2_1"/rank_i*_j*.c)
    b=$(grep -h '\.plan_bwd_allreduce' "$WORK/mb/p_$1_$2_$3"/rank_i*_j*.c)
    echo "m=1: $a"
    echo "m=$3: $b"
    [ -n "$a" ] && [ "$a" = "$b" ] || return 1
    "$PY" - "$WORK/mb/p_$1_$2_$3/rank_i0_j0.c" "$(($3 - 1))" <<'PYEOF'
import re, sys
src, last = open(sys.argv[1]).read(), sys.argv[2]
funcs = dict(re.findall(r"static void (\w+)\(struct tr_ctx \*c, float \*A\)\n\{\n(.*?)\n\}\n", src, re.S))
assert "bwd_grads" not in funcs, "a separate bwd_grads function"
n = 0
for name, body in funcs.items():
    calls = re.findall(r"tr_allreduce_exact\(", body)
    guarded = re.findall(r"    if \(tr_mb\(c\) == %s\) \{[^\n]*\n        TR_STEP\(c, \d+\);[^\n]*\n        tr_allreduce_exact\(" % last, body)
    assert len(calls) == len(guarded), (name, len(calls), len(guarded))
    assert not calls or re.fullmatch(r"bwd_(L\d+|embed|head)", name), name
    n += len(calls)
assert n > 0, "no all-reduce of a gradient"
print(n, "gradient all-reduces, each in its layer's backward, on the last micro-batch only")
PYEOF
}

if mb_setup >"$WORK/log" 2>&1; then
    for t in 1,1,1 1,1,2 1,1,4 2,1,1 2,1,2 2,2,1 2,2,2; do
        IFS=, read -r q d m <<<"$t"
        mb_build "$q" "$d" "$m" >"$WORK/log" 2>&1 || notok "train: micro-batches [$q,$q,$d] m=$m generate and build" "$WORK/log"
    done
    for t in 1,1,2 1,1,4 2,1,2 2,2,2; do
        IFS=, read -r q d m <<<"$t"
        [ -x "$WORK/mb/p_${q}_${d}_$m/bin/model" ] || continue
        check "train: $m micro-batches on [$q,$q,$d], dL/dx and 24 weight gradients match the float64 full batch" \
            mb_grads "$q" "$d" "$m"
        check "train: $m micro-batches on [$q,$q,$d], 4 AdamW steps lose as the whole batch, replicas bitwise" \
            mb_steps "$q" "$d" "$m"
        [ $((q * q * d)) -gt 1 ] && # one rank: no all-reduce
            check "train: $m micro-batches on [$q,$q,$d] all-reduce the gradients once per step, as the whole batch" \
                mb_dep_bytes "$q" "$d" "$m"
    done
else
    notok "train: micro-batches float64 reference" "$WORK/log"
fi

# ---- recomputation (spec recompute; docs/TRAINING.md "Recomputation") ---------------------------------------------
# the program that recomputes N layers' forward in the backward against the one that keeps them (the micro-batch
# section's programs, same model, weights and batches): the same arithmetic on the same inputs, so dL/dx, every
# gradient and every loss are bitwise the same; the backward moves exactly the recomputed layers' extra bytes
rc_build() { # q d m r [dtype]: recompute = r (a number or "full"); with dtype bf16, also the bf16 program that keeps
    local dir="$WORK/mb/rc_$1_$2_$3_$4${5:+_$5}" pipe="" dt=""
    [ "$3" -gt 1 ] && pipe="pipeline = { microbatches = $3 },"
    local r=$4
    [ "$r" = full ] && r='"full"'
    [ -n "${5:-}" ] && dt="dtype = \"$5\","
    cat >"$dir.lua" <<SPEC
return {
  name = "rc_q$1_d$2_m$3", mode = "train", $dt
  mesh = { q = $1, d = $2 },
  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 16, eps = 1e-5 },
  $pipe recompute = $r,
}
SPEC
    TESS_BACKENDS=cpu bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null || return 1
    if [ -n "${5:-}" ]; then # the program that keeps, in that dtype
        sed 's/recompute = .*,$//' "$dir.lua" >"$WORK/mb/p_$1_$2_$3_$5.lua" &&
            TESS_BACKENDS=cpu bin/tessgen "$WORK/mb/p_$1_$2_$3_$5.lua" -o "$WORK/mb/p_$1_$2_$3_$5" --quiet &&
            ninja -C "$WORK/mb/p_$1_$2_$3_$5" >/dev/null
    fi
}
rc_same() { # q d m r [dtype]: one step's dL/dx and gradients, then 3 AdamW steps, bitwise those of the program that
    # keeps (bf16: dL/dx against the float64 reference at bf16's tolerance, docs/BF16.md)
    local dir="$WORK/mb/rc_$1_$2_$3_$4${5:+_$5}" keep="$WORK/mb/p_$1_$2_$3${5:+_$5}" tol=1e-4
    [ -n "${5:-}" ] && tol=3e-2
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((16, 8, 48), np.nan, np.float32))" "$dir/dx.npy" &&
        rm -f "$dir/g.safetensors" &&
        "$dir/run" --weights "$WORK/mb/w.safetensors" --input "$WORK/mb/x.npy" --dy "$WORK/mb/dy.npy" \
            --dx-out "$dir/dx.npy" --grads-out "$dir/g.safetensors" --bytes --quiet &&
        "$keep/run" --weights "$WORK/mb/w.safetensors" --input "$WORK/mb/x.npy" --dy "$WORK/mb/dy.npy" \
            --dx-out "$dir/dx_keep.npy" --grads-out "$dir/g_keep.safetensors" --quiet &&
        "$PY" $REF compare --ref "$WORK/mb/dx_ref.npy" --got "$dir/dx.npy" --tol $tol --expect-f32 \
            --label "dx [$1,$1,$2] m=$3 recompute=$4 ${5:-}" &&
        cmp "$dir/dx.npy" "$dir/dx_keep.npy" && cmp "$dir/g.safetensors" "$dir/g_keep.safetensors" &&
        echo "dL/dx and gradients: bitwise those of the program without recomputation" &&
        "$keep/run" --weights "$WORK/mb/w.safetensors" --input "$WORK/mb/x.npy" --target "$WORK/mb/target.npy" \
            --steps 3 | grep -E '^(step|after) ' | sed 's/ tok\/s.*//' >"$dir.loss_keep" &&
        "$dir/run" --weights "$WORK/mb/w.safetensors" --input "$WORK/mb/x.npy" --target "$WORK/mb/target.npy" \
            --steps 3 --replica-check >"$dir.out" && cat "$dir.out" &&
        { [ "$1$2" = 11 ] || grep -q "bitwise identical" "$dir.out"; } &&
        grep -E '^(step|after) ' "$dir.out" | sed 's/ tok\/s.*//' | diff "$dir.loss_keep" - &&
        [ "$(wc -l <"$dir.loss_keep")" = 4 ]
}
rc_bytes() { # q d m r n: the backward's planned broadcasts and row all-reduces grow by exactly the n recomputed
    # layers' forward: the row broadcasts of the qkv, proj and fc1 inputs (R x C/q each) and the column broadcasts
    # of their weight blocks, q-1 received and one sent per SUMMA, and ln2's two row sums (R each); ln1's statistics
    # are kept. Per step: R is the rank's rows of all m micro-batches, and each micro-batch broadcasts the weights
    local q=$1 m=$3 n=$5 R=$((16 * 8 / ($1 * $2))) Cq=$((48 / $1)) Fq=$((192 / $1))
    local f="$WORK/mb/rc_$1_$2_$3_$4/rank_i0_j0.c" k="$WORK/mb/p_$1_$2_$3/rank_i0_j0.c"
    local row=$((n * 3 * R * Cq * 4)) col=$((m * n * (4 * Cq * Cq + Cq * Fq) * 4)) ar=$((n * 2 * R * 4))
    "$PY" - "$k" "$f" "$row" "$col" "$ar" "$q" <<'PYEOF'
import re, sys
def plan(path):
    t = open(path).read()
    return {k: [int(x) for x in v.split(",")] for k, v in re.findall(r"\.(plan_bwd_\w+) = \{([^}]*)\}", t)}
keep, rc = plan(sys.argv[1]), plan(sys.argv[2])
row, col, ar, q = (int(a) for a in sys.argv[3:7])
want = dict(keep)
for k, times in (("plan_bwd_bcast_recv", q - 1), ("plan_bwd_bcast_sent", 1)):
    want[k] = [keep[k][0] + times * row, keep[k][1] + times * col] + keep[k][2:]
want["plan_bwd_allreduce"] = [keep["plan_bwd_allreduce"][0] + ar] + keep["plan_bwd_allreduce"][1:]
for k in sorted(want):
    print(k, "keep", keep[k], "recompute", rc.get(k), "want", want[k])
sys.exit(0 if all(rc.get(k) == want[k] for k in want) else 1)
PYEOF
}
rc_arena() { # q d m r: --summary of the recomputing program says so and its largest arena is smaller
    bin/tessgen "$WORK/mb/p_$1_$2_$3.lua" --summary >"$WORK/mb/rc_keep.sum" &&
        bin/tessgen "$WORK/mb/rc_$1_$2_$3_$4.lua" --summary >"$WORK/mb/rc.sum" &&
        head -1 "$WORK/mb/rc.sum" && head -1 "$WORK/mb/rc.sum" | grep -q ", recompute: " &&
        "$PY" - "$WORK/mb/rc_keep.sum" "$WORK/mb/rc.sum" <<'PYEOF'
import sys
def arena(path):
    lines = open(path).read().split("\n")
    k = next(i for i, l in enumerate(lines) if l.startswith("memory per rank"))
    return max(int(l.split()[1]) for l in lines[k + 2:] if l.strip() and l.split()[1].isdigit())
a, b = arena(sys.argv[1]), arena(sys.argv[2])
print("largest arena: keeps the activations %d bytes, recomputes %d" % (a, b))
sys.exit(0 if b < a else 1)
PYEOF
}
if [ -x "$WORK/mb/p_2_2_2/bin/model" ]; then
    for t in 1,1,1,full 2,1,1,1 2,2,2,full; do
        IFS=, read -r q d m r <<<"$t"
        n=$r
        [ "$r" = full ] && n=2
        if rc_build "$q" "$d" "$m" "$r" >"$WORK/log" 2>&1; then
            check "train: recompute = $r on [$q,$q,$d] (m=$m): dL/dx, gradients and 3 AdamW losses bitwise those of the program that keeps the activations" \
                rc_same "$q" "$d" "$m" "$r"
            [ "$t" = 1,1,1,full ] && if rc_build 1 1 1 full bf16 >"$WORK/log" 2>&1; then
                check "train: recompute = full on [1,1,1] in bf16 (the bf16 pre-activation u recomputed): bitwise the bf16 program that keeps the activations" \
                    rc_same 1 1 1 full bf16
            else
                notok "train: recompute = full on [1,1,1] in bf16 generate and build" "$WORK/log"
            fi
            [ "$q" -gt 1 ] &&
                check "train: recompute = $r on [$q,$q,$d] (m=$m) moves exactly the recomputed layers' broadcasts and row sums more" \
                    rc_bytes "$q" "$d" "$m" "$r" "$n"
            [ "$r" = full ] &&
                check "train: recompute = full on [$q,$q,$d] (m=$m): --summary says so, and the largest arena is smaller" \
                    rc_arena "$q" "$d" "$m" "$r"
        else
            notok "train: recompute = $r on [$q,$q,$d] generate and build" "$WORK/log"
        fi
    done
fi

# ---- optimizer state sharded over depth (spec optimizer.shard; docs/TRAINING.md) -------------------------------------
# the micro-batch section's model and files; clip = 0.05 is below every step's norm, so clipping acts on every step
zero_build() { # q d shard(true|false) m
    local dir="$WORK/mb/z_$1_$2_$3_$4"
    cat >"$dir.lua" <<SPEC
return {
  name = "zero", mode = "train",
  mesh = { q = $1, d = $2 },
  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 16, eps = 1e-5 },
  optimizer = { lr = 1e-3, weight_decay = 0.01, clip = 0.05, shard = $3 },
  pipeline = { microbatches = $4 },
}
SPEC
    TESS_BACKENDS=cpu bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null
}
zero_steps() { # q d m: 4 AdamW steps with clipping, sharded against unsharded; d = 2: losses and weights bitwise
    # (the reduce-scatter's one addition per element is the exact all-reduce's, AdamW the same arithmetic on the same
    # bits); d > 2: losses within 1e-6 relative, weights within 1e-5 (1% of lr; the all-reduce adds in MPI_Reduce's
    # order, the reduce-scatter in member order, and AdamW's m/sqrt(v) magnifies a last-bit difference of a tiny
    # gradient up to lr)
    local one="$WORK/mb/z_$1_$2_false_$3" sh="$WORK/mb/z_$1_$2_true_$3" r
    for r in "$one" "$sh"; do
        poison "$r.w.safetensors" &&
            "$r/run" --weights "$WORK/mb/w.safetensors" --input "$WORK/mb/x.npy" --target "$WORK/mb/target.npy" \
                --steps 4 --replica-check --bytes --weights-out "$r.w.safetensors" >"$r.out" || return 1
        grep -q "bitwise identical" "$r.out" || return 1
    done
    cat "$sh.out"
    grep -q "reduce-scatters and all-gathers moved exactly the planned bytes" "$sh.out" || return 1
    "$PY" - "$one.out" "$sh.out" "$one.w.safetensors" "$sh.w.safetensors" "$2" <<'PYEOF'
import sys, json, struct
import numpy as np
def losses(f):
    return [l.split()[3] if l.startswith("step ") else l.split()[4] for l in open(f) if l.startswith(("step ", "after "))]
def tensors(f):
    b = open(f, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32)
            for k, v in h.items() if k != "__metadata__"}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
wa, wb = tensors(sys.argv[3]), tensors(sys.argv[4])
bitwise = sys.argv[5] == "2"
ok = len(a) == 5 and a == b if bitwise else len(a) == 5 and all(abs(float(x) - float(y)) <= 1e-6 * abs(float(x)) for x, y in zip(a, b))
print("losses unsharded", a, "sharded", b, "bitwise" if a == b else "")
ok = ok and sorted(wa) == sorted(wb) and len(wa) == 24
for k in sorted(wa):
    d = float(np.max(np.abs(wa[k].astype(np.float64) - wb[k]))) if wa[k].size else 0.0
    same = wa[k].tobytes() == wb[k].tobytes()
    ok = ok and (same if bitwise else d <= 1e-5)  # d > 2: 1% of lr, one step's largest change
    if not same:
        print("weight %s: max diff %.3g" % (k, d))
sys.exit(0 if ok else 1)
PYEOF
}
zero_memory() { # q d: every matrix's AdamW step covers ceil(elems/d) elements (its moments' size), vectors stay whole,
    # and --summary says so
    local sh="$WORK/mb/z_$1_$2_true_1"
    grep -q "optimizer.shard: the matrices' AdamW moments / d = $2" <(bin/tessgen "$sh.lua" --summary) &&
        "$PY" - "$sh/schedule/rank_i0_j0.txt" "$2" <<'PYEOF'
import re, sys
d, n, ok = int(sys.argv[2]), 0, True
for l in open(sys.argv[1]):
    m = re.search(r"AdamW on slice k of (\S+) \((\d+) of its (\d+) elements", l)
    if m:
        n += 1
        ok = ok and m.group(1).endswith(".weight") and int(m.group(2)) == -(-int(m.group(3)) // d)
    elif "AdamW on" in l:
        ok = ok and not re.search(r"AdamW on h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight", l)
print("sliced AdamW steps:", n)
sys.exit(0 if ok and n > 0 else 1)
PYEOF
}
# checkpoints of a sharded program are today's format: each moment gathered whole from its slices on save, each
# member taking its slice on resume
zero_tensors() { # A B [same|report]: the tensors of two safetensors files (metadata aside) byte for byte
    "$PY" - "$1" "$2" <<'PYEOF'
import sys, json, struct
def tensors(f):
    b = open(f, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
bad = sorted(k for k in a if a[k] != b.get(k))
print(len(a), "tensors;", "differ:" if bad else "all bitwise equal", " ".join(bad[:8]))
sys.exit(0 if a and sorted(a) == sorted(b) and not bad else 1)
PYEOF
}
zero_losses() { # OUT: the losses of steps 3, 4 and after step 4, one a line
    awk '/^step [34] loss/ {print $4} /^after step 4: loss/ {print $5}' "$1"
}
zero_ckpt() { # q d: sharded 2 steps + checkpoint + 2 resumed = 4 straight steps bitwise; the checkpoint's tensors are
    # the unsharded program's; each program resumes the other's checkpoint bitwise (d = 2: the two run the same bits)
    local one="$WORK/mb/z_$1_$2_false_1" sh="$WORK/mb/z_$1_$2_true_1" r
    local in=(--input "$WORK/mb/x.npy" --target "$WORK/mb/target.npy")
    for r in "$one" "$sh"; do
        rm -f "$r.ck2" "$r.w4" &&
            "$r/run" --weights "$WORK/mb/w.safetensors" "${in[@]}" --steps 4 --weights-out "$r.w4" >"$r.s4" &&
            "$r/run" --weights "$WORK/mb/w.safetensors" "${in[@]}" --steps 2 --checkpoint-out "$r.ck2" >/dev/null ||
            return 1
    done
    zero_tensors "$one.ck2" "$sh.ck2" || return 1 # gathered moments: the unsharded program's bits
    zero_losses "$sh.s4" >"$sh.l4" && [ "$(wc -l <"$sh.l4")" = 3 ] && cmp "$one.w4" "$sh.w4" || return 1
    local from to
    for from in "$sh" "$one"; do
        for to in "$sh" "$one"; do
            rm -f "$to.w4r" && "$to/run" --resume "$from.ck2" "${in[@]}" --steps 2 --weights-out "$to.w4r" >"$to.r" &&
                zero_losses "$to.r" | cmp - "$sh.l4" && cmp "$to.w4r" "$sh.w4" || {
                echo "resuming ${from##*/}'s checkpoint in ${to##*/}: not the 4 straight steps"
                cat "$to.r"
                return 1
            }
        done
    done
    echo "losses of steps 3, 4 and after:" $(cat "$sh.l4")
}
zero_reshard() { # q d Q D: the [q,q,d] sharded checkpoint resumed with --reshard on the sharded [Q,Q,D] for 0 steps
    # writes the same tensors (its slices of other sizes taken and gathered back bitwise); without --reshard refused,
    # nothing written
    local sh="$WORK/mb/z_$1_$2_true_1" to="$WORK/mb/z_$3_$4_true_1"
    rm -f "$to.ckr" "$sh.ck2" && "$sh/run" --weights "$WORK/mb/w.safetensors" --input "$WORK/mb/x.npy" \
        --target "$WORK/mb/target.npy" --steps 2 --checkpoint-out "$sh.ck2" >/dev/null &&
        ! "$to/run" --resume "$sh.ck2" --input "$WORK/mb/x.npy" --checkpoint-out "$to.ckr" \
        >"$to.ref" 2>&1 && grep -q "add --reshard" "$to.ref" && [ ! -e "$to.ckr" ] &&
        "$to/run" --resume "$sh.ck2" --reshard --input "$WORK/mb/x.npy" --checkpoint-out "$to.ckr" &&
        zero_tensors "$sh.ck2" "$to.ckr"
}
zero_grads() { # q d: --grads-out of a sharded program (each summed slice gathered from its owner) is the unsharded
    # program's file (d = 2: bitwise)
    local one="$WORK/mb/z_$1_$2_false_1" sh="$WORK/mb/z_$1_$2_true_1" r
    for r in "$one" "$sh"; do
        rm -f "$r.g" && "$r/run" --weights "$WORK/mb/w.safetensors" --input "$WORK/mb/x.npy" --dy "$WORK/mb/dy.npy" \
            --grads-out "$r.g" >/dev/null || return 1
    done
    cmp "$one.g" "$sh.g"
}
if [ -f "$WORK/mb/w.safetensors" ]; then
    for t in 2,2,1 1,2,1 1,4,1 2,2,2; do
        IFS=, read -r q d m <<<"$t"
        zero_build "$q" "$d" false "$m" >"$WORK/log" 2>&1 && zero_build "$q" "$d" true "$m" >>"$WORK/log" 2>&1 ||
            notok "train: optimizer.shard [$q,$q,$d] m=$m generates and builds" "$WORK/log"
        check "train: AdamW state sharded over depth on [$q,$q,$d] with $m micro-batch(es) trains as the unsharded program" \
            zero_steps "$q" "$d" "$m"
    done
    check "train: sharded AdamW moments are 1/d of each matrix's on [2,2,2], and the summary says so" zero_memory 2 2
    check "train: a sharded run's checkpoint holds the unsharded program's tensors and resumes bitwise in either program, 2 + 2 steps equal 4" \
        zero_ckpt 2 2
    check "train: a sharded [2,2,2] checkpoint resumed with --reshard on the sharded [1,1,4] writes it back bitwise" \
        zero_reshard 2 2 1 4
    check "train: --grads-out of a sharded program gathers the summed slices into the unsharded program's file" \
        zero_grads 2 2
fi

# Pipeline stages (docs/TRAINING.md "Pipeline stages"): 2 stages of one block each against the pp = 1 program with the
# same micro-batches: 3 AdamW steps' losses and the loss after them within 1e-6 relative (the stages split only where
# the row sums of a stage's first layernorm are taken), every rank's point-to-point bytes as planned, replicas bitwise
pipe_build() { # q d pp m schedule [clip]
    local dir="$WORK/pipe_$1_$2_$3_$4_$5${6:+_clip}"
    cat >"$dir.lua" <<SPEC
return {
  name = "pipe", mode = "train",
  mesh = { q = $1, d = $2, pp = $3 },
  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 4, eps = 1e-5 },
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01${6:+, clip = $6} },
  pipeline = { microbatches = $4, schedule = "$5" },
}
SPEC
    [ -x "$dir/bin/model" ] || { bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null; }
}

pipe_losses() { # q d m schedule
    local one="$WORK/pipe_$1_$2_1_$3_$4" two="$WORK/pipe_$1_$2_2_$3_$4"
    pipe_build "$1" "$2" 1 "$3" "$4" && pipe_build "$1" "$2" 2 "$3" "$4" || return 1
    "$one/run" --steps 3 >"$WORK/pipe1.out" && "$two/run" --steps 3 --bytes --replica-check >"$WORK/pipe2.out" ||
        return 1
    cat "$WORK/pipe1.out" "$WORK/pipe2.out"
    grep -q "moved exactly the planned bytes" "$WORK/pipe2.out" &&
        grep -q "^bytes: every rank's sends and receives between stages moved exactly the planned bytes$" \
            "$WORK/pipe2.out" && grep -q "bitwise identical to its replicas" "$WORK/pipe2.out" &&
        paste <(grep -E "^(step [0-9]+|after step [0-9]+:) loss" "$WORK/pipe1.out" | sed 's/.*loss \([^ ]*\).*/\1/') \
            <(grep -E "^(step [0-9]+|after step [0-9]+:) loss" "$WORK/pipe2.out" | sed 's/.*loss \([^ ]*\).*/\1/') |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * $1 || $2 == "") bad = 1; n++ }
             END { print n " losses compared"; exit (bad || n != 4) }'
}

# the p2p bytes: 3 steps of 2 micro-batch blocks of R/m x C/q floats each way, plus the final forward's
pipe_bytes() {
    local two="$WORK/pipe_1_1_2_2_1f1b"
    pipe_build 1 1 2 2 1f1b && "$two/run" --steps 3 --bytes >"$WORK/pipe2.out" || return 1
    cat "$WORK/pipe2.out"
    # R = 32 rows, C = 48: a block of R/m = 16 rows is 768 floats = 3072 bytes; stage 0 sends 2 per step + 2 in the
    # final forward = 8 * 3072, receives 2 per step = 6 * 3072; stage 1 the other way round
    grep -Eq "^ +0 +24576/24576 +18432/18432 *$" "$WORK/pipe2.out" &&
        grep -Eq "^ +1 +18432/18432 +24576/24576 *$" "$WORK/pipe2.out"
}

# clipping: the global gradient norm sums the squares of every stage's gradients (a norm over stage 0's or the
# last stage's alone would be smaller, clip less and drift from the pp = 1 losses); clip = 0.05 is below the norm of
# every step, so each of the 3 steps is scaled
pipe_clip() {
    local one="$WORK/pipe_1_1_1_2_1f1b_clip" two="$WORK/pipe_1_1_2_2_1f1b_clip"
    pipe_build 1 1 1 2 1f1b 0.05 && pipe_build 1 1 2 2 1f1b 0.05 || return 1
    "$one/run" --steps 3 >"$WORK/pipe1.out" && "$two/run" --steps 3 --replica-check >"$WORK/pipe2.out" || return 1
    cat "$WORK/pipe1.out" "$WORK/pipe2.out"
    grep -q "bitwise identical to its replicas" "$WORK/pipe2.out" &&
        paste <(grep -E "^step [0-9]+ loss" "$WORK/pipe1.out" | sed 's/.*loss \([^ ]*\).* norm \([^ ]*\).*/\1 \2/') \
            <(grep -E "^step [0-9]+ loss" "$WORK/pipe2.out" | sed 's/.*loss \([^ ]*\).* norm \([^ ]*\).*/\1 \2/') |
        awk '{ for (c = 1; c <= 2; c++) { d = $c - $(c + 2); if (d < 0) d = -d; if (d > 1e-6 * $c || $(c + 2) == "") bad = 1 }
               if ($2 <= 0.05) bad = 1; n++ }
             END { print n " steps compared (loss, norm)"; exit (bad || n != 3) }' &&
        paste <(grep -E "^after step [0-9]+: loss" "$WORK/pipe1.out" | sed 's/.*loss \([^ ]*\).*/\1/') \
            <(grep -E "^after step [0-9]+: loss" "$WORK/pipe2.out" | sed 's/.*loss \([^ ]*\).*/\1/') |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * $1 || $2 == "") bad = 1; n++ } END { exit (bad || n != 1) }'
}

# the stage programs under ASan+UBSan: 1f1b with 4 micro-batches reuses stash slots (u mod stash) and has every kind
# of point-to-point step (send, receive, joint exchange); a sanitizer report fails the check even with exit 0
pipe_asan() {
    local two="$WORK/pipe_1_1_2_4_1f1b"
    pipe_build 1 1 2 4 1f1b && ninja -C "$two" asan >/dev/null || return 1
    TESS_VARIANT=asan "$two/run" --steps 2 --bytes --replica-check >"$WORK/pipe_asan.out" 2>"$WORK/pipe_asan.err"
    local rc=$?
    cat "$WORK/pipe_asan.out" "$WORK/pipe_asan.err"
    [ $rc -eq 0 ] && ! grep -Eq "Sanitizer|runtime error" "$WORK/pipe_asan.err" &&
        grep -q "^bytes: every rank's sends and receives between stages moved exactly the planned bytes$" \
            "$WORK/pipe_asan.out" && grep -q "bitwise identical to its replicas" "$WORK/pipe_asan.out"
}

# a forward that overflows with every weight finite names the largest weight as the rank holding it names it: here
# one element of h.1.ln_2.weight (stage 1's) set to 3e38, so that layernorm's output overflows; rank 0 (stage 0) used
# to print its own tensor at that index, h.0.ln_2.weight
pipe_overflow_named() {
    local two="$WORK/pipe_1_1_2_2_1f1b" w="$WORK/pipe_big.st"
    pipe_build 1 1 2 2 1f1b || return 1
    "$PY" tests/ref/tessref.py weights --layers 2 --hidden 48 --heads 12 --ffn 192 --seq 8 --batch 4 --seed 3 \
        --out "$w" && "$PY" - "$w" <<'PY' || return 1
import json, struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
t = json.loads(data[8:8 + n])["h.1.ln_2.weight"]
assert t["dtype"] == "F32"
at = 8 + n + t["data_offsets"][0] + 4 * 5
data[at:at + 4] = struct.pack("<f", 3e38)
open(path, "wb").write(bytes(data))
PY
    "$two/run" --weights "$w" --steps 2 >"$WORK/pipe_big.out" 2>&1
    local rc=$?
    cat "$WORK/pipe_big.out"
    [ $rc -ne 0 ] && grep -q "although every weight is finite: the forward overflowed; the largest weight is h.1.ln_2.weight with |w| = 3e+38" \
        "$WORK/pipe_big.out"
}

# The stash each rank allocates is the plan's: --stats' "stash allocated/planned" per rank against --summary's stage
# memory (stash count x one micro-batch's kept buffers, each 64-byte aligned); the GPT-2's stages keep row statistics
# of 8 floats, which the alignment pads to 16, so an allocation of the raw sizes would differ
pipe_stash_stats() {
    local two="$WORK/pipe_lm_1_1_2"
    pipe_lm_build 1 1 2 && bin/tessgen "$two.lua" --summary >"$two.summary" &&
        "$two/run" --steps 1 --stats >"$two/stats.out" || return 1
    grep "memory:" "$two.summary"
    grep -A3 "^stats: memory" "$two/stats.out"
    local s0 s1 r0 r1
    s0=$(sed -n 's/^  stage 0 memory: .* + stash \([0-9]*\) x \([0-9]*\) = .*/\1*\2/p' "$two.summary")
    s1=$(sed -n 's/^  stage 1 memory: .* + stash \([0-9]*\) x \([0-9]*\) = .*/\1*\2/p' "$two.summary")
    r0=$(sed -n '/^stats: memory/,$p' "$two/stats.out" | awk '$1 == 0 && NF == 4 { print $3 }')
    r1=$(sed -n '/^stats: memory/,$p' "$two/stats.out" | awk '$1 == 1 && NF == 4 { print $3 }')
    echo "stage 0: $s0 planned, rank 0 $r0; stage 1: $s1, rank 1 $r1"
    [ -n "$s0" ] && [ -n "$s1" ] && [ "$r0" = "$((s0))/$((s0))" ] && [ "$r1" = "$((s1))/$((s1))" ] &&
        ! grep -q MISMATCH "$two/stats.out"
}

# --repeat, --trace and --stats with stages: --repeat times the stages' chain of forwards (each stage receiving its
# micro-batches' x and sending their y) and leaves y as a forward alone writes it (byte for byte); --trace writes every
# rank's steps (a process each: the stages' exchanges are the time between a stage's steps), --stats their planned
# bytes
pipe_run_opts() {
    local two="$WORK/pipe_1_1_2_2_1f1b"
    pipe_build 1 1 2 2 1f1b || return 1
    rm -f "$two"/yr.npy "$two"/yf.npy "$two"/tr.json
    "$two/run" --output "$two/yf.npy" --quiet && "$two/run" --repeat 3 --output "$two/yr.npy" >"$two/rep.out" &&
        "$two/run" --steps 2 --trace "$two/tr.json" --stats >"$two/st.out" || return 1
    cat "$two/rep.out" "$two/st.out"
    cmp "$two/yf.npy" "$two/yr.npy" && grep -q "^forward: median [0-9.e-]* s over 3 runs" "$two/rep.out" &&
        grep -q "^stats: every step of every rank moved exactly its planned bytes$" "$two/st.out" &&
        "$PY" - "$two/tr.json" <<'PYEOF'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"] if isinstance(t, dict) else t
pids = {e["pid"] for e in ev if e.get("ph") == "X"}
assert pids == {0, 1}, pids
print(len(ev), "events, ranks", sorted(pids))
PYEOF
}

# One backward through the stages (--dy, --dx-out, --grads-out without --steps): the stage schedule with the last
# stage keeping the given dL/dy instead of the objective; dL/dx (stage 0's) and every gradient byte for byte the pp = 1
# program's, the point-to-point bytes of one step without the forward after it. The language model's --grads-out
# alone (its own objective, dL/dy 0): every gradient within 1e-5 of the pp = 1 program's (the tied sum's order)
pipe_dy() {
    local one="$WORK/pipe_1_1_1_2_1f1b" two="$WORK/pipe_1_1_2_2_1f1b" l1="$WORK/pipe_lm_1_1_1" l2="$WORK/pipe_lm_1_1_2"
    pipe_build 1 1 1 2 1f1b && pipe_build 1 1 2 2 1f1b && pipe_lm_build 1 1 1 && pipe_lm_build 1 1 2 || return 1
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(4).standard_normal((4, 8, 48)).astype(np.float32))" \
        "$WORK/pipe_dy.npy" || return 1
    local k
    for k in 1 2; do
        local dir=$one
        [ $k = 2 ] && dir=$two
        rm -f "$dir/dx.npy" "$dir/g.st"
        "$dir/run" --dy "$WORK/pipe_dy.npy" --dx-out "$dir/dx.npy" --grads-out "$dir/g.st" --bytes >"$dir/dy.out" ||
            { cat "$dir/dy.out"; return 1; }
    done
    cat "$two/dy.out"
    grep -q "^bytes: every rank's sends and receives between stages moved exactly the planned bytes$" "$two/dy.out" &&
        cmp "$one/dx.npy" "$two/dx.npy" && cmp "$one/g.st" "$two/g.st" &&
        "$l1/run" --grads-out "$l1/g1.st" --quiet && "$l2/run" --grads-out "$l2/g1.st" --bytes >"$l2/g1.out" &&
        grep -q "^bytes: every rank's sends and receives between stages moved exactly the planned bytes$" "$l2/g1.out" &&
        "$PY" $REF compare-grads --ref "$l1/g1.st" --got "$l2/g1.st" --tol 1e-5 --label "LM gradients of one backward"
}

# --output with stages: the last stage's ranks hold y (tr_gather_block_npy takes their blocks only), after the steps
# (the final forward, a chain of the stages) and in a forward alone: byte for byte the pp = 1 program's y, on
# [1,1,1] and on [2,2,1] (8 ranks: four blocks of the last stage among the others' activations)
pipe_output() { # q d
    local one="$WORK/pipe_$1_$2_1_2_1f1b" two="$WORK/pipe_$1_$2_2_2_1f1b" k
    pipe_build "$1" "$2" 1 2 1f1b && pipe_build "$1" "$2" 2 2 1f1b || return 1
    for k in 1 2; do
        rm -f "$one/y$k.npy" "$two/y$k.npy"
    done
    "$one/run" --steps 2 --output "$one/y1.npy" --quiet && "$two/run" --steps 2 --output "$two/y1.npy" --quiet &&
        "$one/run" --output "$one/y2.npy" --quiet && "$two/run" --output "$two/y2.npy" --quiet &&
        cmp "$one/y1.npy" "$two/y1.npy" && cmp "$one/y2.npy" "$two/y2.npy" && ! cmp -s "$one/y1.npy" "$one/y2.npy" &&
        "$PY" -c "import numpy as np, sys; y = np.load(sys.argv[1]); assert y.shape == (4, 8, 48) and np.isfinite(y).all()" \
            "$two/y1.npy"
}

# The whole GPT-2 (model.vocab = 64) on 2 stages: the embedding on stage 0, ln_f, the tied head and the loss on stage 1,
# the tied wte gradient summed between them after the last backward.
pipe_lm_build() { # q d pp [m]: m micro-batches (default 2; another m has a directory of its own)
    local dir="$WORK/pipe_lm_$1_$2_$3${4:+_m$4}"
    cat >"$dir.lua" <<SPEC
return {
  name = "pipe_lm", mode = "train",
  mesh = { q = $1, d = $2, pp = $3 },
  model = { layers = 2, hidden = 24, heads = 6, ffn = 48, seq = 4, batch = 4, eps = 1e-5, vocab = 64, positions = 4 },
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },
  pipeline = { microbatches = ${4:-2} },
}
SPEC
    [ -x "$dir/bin/model" ] || { bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null; }
}

# the losses of two runs' logs (3 steps and the one after them) within 1e-6 relative: exit 0; n and the worst printed
pipe_lm_same() {
    paste <(grep -E "^(step [0-9]+|after step [0-9]+:) loss" "$1" | sed 's/.*loss \([^ ]*\).*/\1/') \
        <(grep -E "^(step [0-9]+|after step [0-9]+:) loss" "$2" | sed 's/.*loss \([^ ]*\).*/\1/') |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > w) w = d; if (d > 1e-6 * $1 || $2 == "") bad = 1; n++ }
             END { print n " losses compared, largest difference " w; exit (bad || n != 4) }'
}

# against the pp = 1 program on [1,1,1] (on [2,2,1] too: the meshes' losses agree within 1e-7, and it saves a build)
pipe_lm_losses() { # q d
    local one="$WORK/pipe_lm_1_1_1" two="$WORK/pipe_lm_$1_$2_2"
    pipe_lm_build 1 1 1 && pipe_lm_build "$1" "$2" 2 || return 1
    "$one/run" --steps 3 >"$WORK/pipe_lm1.out" && "$two/run" --steps 3 --bytes --replica-check >"$WORK/pipe_lm2.out" ||
        return 1
    cat "$WORK/pipe_lm1.out" "$WORK/pipe_lm2.out"
    grep -q "^bytes: every rank moved exactly the planned bytes$" "$WORK/pipe_lm2.out" &&
        grep -q "^bytes: every rank's sends and receives between stages moved exactly the planned bytes$" \
            "$WORK/pipe_lm2.out" && grep -q "bitwise identical to its replicas" "$WORK/pipe_lm2.out" &&
        pipe_lm_same "$WORK/pipe_lm1.out" "$WORK/pipe_lm2.out" || return 1
    [ "$1" != 1 ] && return 0
    # [1,1,1]: R = 16 rows, C = 24: a micro-batch block is 8 x 24 floats = 768 bytes, 2 each way per step; the tied
    # wte gradient Vq x C = 64 x 24 floats = 6144 bytes each way per step; stage 0 also sends the final forward's 2
    # blocks: sent 3 * (1536 + 6144) + 1536 = 24576, received 3 * (1536 + 6144) = 23040 (stage 1 the other way round)
    grep -Eq "^ +0 +24576/24576 +23040/23040 *$" "$WORK/pipe_lm2.out" &&
        grep -Eq "^ +1 +23040/23040 +24576/24576 *$" "$WORK/pipe_lm2.out" || return 1
    # without the sum (test hook) each stage steps its copy with half the gradient: the losses leave the pp = 1
    # program's after the first step and the copies differ (exit 4, both ranks named)
    TESS_TEST_SKIP_TIED_SUM=1 "$two/run" --steps 3 --replica-check >"$WORK/pipe_lm3.out" 2>"$WORK/pipe_lm3.err"
    local rc=$?
    cat "$WORK/pipe_lm3.out" "$WORK/pipe_lm3.err"
    [ $rc -eq 4 ] && ! pipe_lm_same "$WORK/pipe_lm1.out" "$WORK/pipe_lm3.out" &&
        grep -q "^rank 1: wte.weight (stage 1's copy for the tied head) differs from rank 0's on stage 0$" \
            "$WORK/pipe_lm3.err" &&
        [ "$(grep -E "^step 1 loss" "$WORK/pipe_lm1.out" | cut -d' ' -f4)" = "$(grep -E "^step 1 loss" "$WORK/pipe_lm3.out" | cut -d' ' -f4)" ]
}

# --replica-check compares the two stages' copies of wte: one changed bit on stage 1's copy fails it (exit 4)
pipe_lm_tied_check() {
    local two="$WORK/pipe_lm_1_1_2"
    pipe_lm_build 1 1 2 || return 1
    TESS_TEST_PERTURB_REPLICA=1 "$two/run" --steps 1 --replica-check >"$WORK/pipe_lm4.out" 2>"$WORK/pipe_lm4.err"
    local rc=$?
    cat "$WORK/pipe_lm4.out" "$WORK/pipe_lm4.err"
    [ $rc -eq 4 ] && grep -q "^rank 0: wte.weight (stage 0's copy for the tied embedding) differs from rank 1's on stage 1$" \
        "$WORK/pipe_lm4.err"
}

# --weights-out and --grads-out with stages: each stage gathers its tensors to its first rank, which sends them to
# rank 0, one file in the pp = 1 program's format. The block stack's weights after 2 steps are the pp = 1 file byte
# for byte (its losses are bitwise too); the language model's file has the same header (names, order, shapes: the
# last stage's copy of wte left out) and values within float rounding (its tied gradient is summed in another order;
# the gradients within 1e-5, the weights within 1e-4: the key part of c_attn.bias has a gradient of rounding noise
# only, which AdamW's m/sqrt(v) scales up to a full step, 8e-6 relative to that bias after 2 steps)
pipe_outputs() {
    local one="$WORK/pipe_1_1_1_2_1f1b" two="$WORK/pipe_1_1_2_2_1f1b" l1="$WORK/pipe_lm_1_1_1" l2="$WORK/pipe_lm_1_1_2"
    pipe_build 1 1 1 2 1f1b && pipe_build 1 1 2 2 1f1b && pipe_lm_build 1 1 1 && pipe_lm_build 1 1 2 || return 1
    rm -f "$WORK"/pipe_o*.st
    "$one/run" --steps 2 --weights-out "$WORK/pipe_ow1.st" --quiet &&
        "$two/run" --steps 2 --weights-out "$WORK/pipe_ow2.st" --quiet && cmp "$WORK/pipe_ow1.st" "$WORK/pipe_ow2.st" &&
        "$l1/run" --steps 2 --weights-out "$WORK/pipe_olw1.st" --grads-out "$WORK/pipe_olg1.st" --quiet &&
        "$l2/run" --steps 2 --weights-out "$WORK/pipe_olw2.st" --grads-out "$WORK/pipe_olg2.st" --quiet || return 1
    "$PY" - "$WORK"/pipe_olw1.st "$WORK"/pipe_olw2.st "$WORK"/pipe_olg1.st "$WORK"/pipe_olg2.st <<'PYEOF' &&
import struct, sys
def header(p):
    b = open(p, "rb").read()
    return b[:8 + struct.unpack("<Q", b[:8])[0]]
ok = header(sys.argv[1]) == header(sys.argv[2]) and header(sys.argv[3]) == header(sys.argv[4])
print("headers identical:", ok)
sys.exit(0 if ok else 1)
PYEOF
        "$PY" $REF compare-grads --ref "$WORK/pipe_olw1.st" --got "$WORK/pipe_olw2.st" --tol 1e-4 --label "LM weights" &&
        "$PY" $REF compare-grads --ref "$WORK/pipe_olg1.st" --got "$WORK/pipe_olg2.st" --tol 1e-5 --label "LM gradients"
}

# The whole GPT-2's outputs of a forward with stages: --logits-out (the last stage's ranks hold the logits; the other
# stages send nothing that is used) within 1e-6 of the pp = 1 program's after 2 steps and in a forward alone, and
# --hf-out (every stage's weights gathered as --weights-out does, written as a GPT2LMHeadModel directory) with the
# pp = 1 directory's config byte for byte and every tensor within 1e-4 (the tied gradient's order, above)
pipe_lm_forward_outs() {
    local l1="$WORK/pipe_lm_1_1_1" l2="$WORK/pipe_lm_1_1_2" k
    pipe_lm_build 1 1 1 && pipe_lm_build 1 1 2 || return 1
    rm -rf "$WORK"/pipe_hf1 "$WORK"/pipe_hf2 "$WORK"/pipe_lg*.npy
    for k in 1 2; do
        local dir="$WORK/pipe_lm_1_1_$k"
        "$dir/run" --steps 2 --logits-out "$WORK/pipe_lg$k.npy" --hf-out "$WORK/pipe_hf$k" --quiet &&
            "$dir/run" --logits-out "$WORK/pipe_lga$k.npy" --quiet || return 1
    done
    cmp "$WORK/pipe_hf1/config.json" "$WORK/pipe_hf2/config.json" &&
        "$PY" $REF compare-grads --ref "$WORK/pipe_hf1/model.safetensors" --got "$WORK/pipe_hf2/model.safetensors" \
            --tol 1e-4 --label "--hf-out tensors" &&
        "$PY" $REF compare --ref "$WORK/pipe_lg1.npy" --got "$WORK/pipe_lg2.npy" --tol 1e-6 --expect-f32 \
            --label "logits after 2 steps" &&
        "$PY" $REF compare --ref "$WORK/pipe_lga1.npy" --got "$WORK/pipe_lga2.npy" --tol 1e-6 --expect-f32 \
            --label "logits of a forward" && ! cmp -s "$WORK/pipe_lg2.npy" "$WORK/pipe_lga2.npy"
}

# Checkpoints with stages (docs/TRAINING.md "Checkpoints"): rank 0 writes one file of every stage's tensors (the last
# stage's tied copy of wte left out), in the pp = 1 program's format with mesh.pp and each stage's blocks recorded;
# --resume has each stage read its own tensors (the tied wte and its moments on the last stage too). Same program:
# 2 steps + checkpoint + 2 resumed steps print the straight run's step lines bitwise (weights, moments and the step
# are restored bitwise, and the program and its inputs are the same). Across pp (--reshard): the block stack's pp = 1
# and pp = 2 programs step bitwise alike already, the GPT-2's within float rounding (its tied gradient is summed in
# another order): the resumed losses within 1e-6 relative of the straight run of the resuming program.
pipe_ck_losses() { # log log: step and after-step losses within 1e-6 relative, 3 of them (steps 3, 4 and after 4)
    paste <(grep -E "^(step [34]|after step 4:) loss" "$1" | sed 's/.*loss \([^ ]*\).*/\1/') \
        <(grep -E "^(step [34]|after step 4:) loss" "$2" | sed 's/.*loss \([^ ]*\).*/\1/') |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > w) w = d; if (d > 1e-6 * $1 || $2 == "") bad = 1; n++ }
             END { print n " losses compared, largest difference " w; exit (bad || n != 3) }'
}

pipe_ckpt() { # one two: the pp = 1 and pp = 2 programs' directories
    local one=$1 two=$2 c="$WORK/pipe_ck"
    rm -f "$c".*
    "$one/run" --steps 4 >"$c.1s.out" && "$two/run" --steps 4 >"$c.2s.out" &&
        "$two/run" --steps 2 --checkpoint-out "$c.2.st" >"$c.2a.out" &&
        "$two/run" --resume "$c.2.st" --steps 2 --replica-check >"$c.2b.out" &&
        "$one/run" --steps 2 --checkpoint-out "$c.1.st" >"$c.1a.out" &&
        "$two/run" --resume "$c.1.st" --reshard --steps 2 >"$c.12.out" &&
        "$one/run" --resume "$c.2.st" --reshard --steps 2 >"$c.21.out" || return 1
    cat "$c".*.out
    grep -q "^resumed from $c.2.st after step 2" "$c.2b.out" && grep -q "bitwise identical to its replicas" "$c.2b.out" ||
        { echo "no 'resumed from ... after step 2' or replica check"; return 1; }
    diff <(grep -E "^(step [34]|after step 4:) loss" "$c.2s.out" | sed 's| tok/s.*||') \
        <(grep -E "^(step [34]|after step 4:) loss" "$c.2b.out" | sed 's| tok/s.*||') ||
        { echo "the pp = 2 program's resumed steps differ from its straight run"; return 1; }
    [ "$(grep -cE "^step [34] loss" "$c.2b.out")" = 2 ] || { echo "want 2 resumed step lines"; return 1; }
    "$PY" - "$c.2.st" "$c.1.st" <<'PYEOF' || return 1
import json, struct, sys
def load(p):
    raw = open(p, "rb").read(); (n,) = struct.unpack("<Q", raw[:8]); h = json.loads(raw[8:8 + n])
    return h.pop("__metadata__", {}), h
m2, t2 = load(sys.argv[1]); m1, t1 = load(sys.argv[2])
ok = sorted(t2) == sorted(t1) and all(t2[k]["shape"] == t1[k]["shape"] for k in t1)
print("same tensor names and shapes as the pp = 1 checkpoint:", ok, len(t1))
for key, want in (("mesh.pp", "2"), ("mesh.stages", "0-0,1-1")):
    if m2.get(key) != want: print("pp = 2 metadata %s = %r, want %r" % (key, m2.get(key), want)); ok = False
for key, want in (("mesh.pp", "1"), ("mesh.stages", "0-1")):
    if m1.get(key) != want: print("pp = 1 metadata %s = %r, want %r" % (key, m1.get(key), want)); ok = False
sys.exit(0 if ok else 1)
PYEOF
    pipe_ck_losses "$c.2s.out" "$c.12.out" && pipe_ck_losses "$c.1s.out" "$c.21.out" || return 1
    # a pp = 2 checkpoint on the pp = 1 program without --reshard: refused (exit 1), naming mesh.pp and the fix
    "$one/run" --resume "$c.2.st" --steps 1 --weights-out "$c.w.st" >"$c.r.out" 2>"$c.r.err"
    local rc=$?
    cat "$c.r.err"
    [ $rc -eq 1 ] && [ ! -e "$c.w.st" ] && ! grep -q "^step " "$c.r.out" &&
        grep -q "the checkpoint was written on mesh \[1,1,1\] with mesh.pp = 2 (the stages' blocks 0-0,1-1), this program runs mesh \[1,1,1\] with mesh.pp = 1 (blocks 0-1): add --reshard" "$c.r.err"
}

pipe_ckpt_stack() {
    pipe_build 1 1 1 2 1f1b && pipe_build 1 1 2 2 1f1b && pipe_ckpt "$WORK/pipe_1_1_1_2_1f1b" "$WORK/pipe_1_1_2_2_1f1b"
}

pipe_ckpt_lm() {
    pipe_lm_build 1 1 1 && pipe_lm_build 1 1 2 && pipe_ckpt "$WORK/pipe_lm_1_1_1" "$WORK/pipe_lm_1_1_2"
}

# Sharded checkpoints (--checkpoint-shards): C is a directory of shard files, each written by the rank that gathered
# its tensors (every rank of a stage takes some, the least loaded first), and model.safetensors.index.json, written
# last. Written on 2 stages of [2,2,1] (8 writers, --checkpoint-every 1: the pending index promoted, the step-1 shards
# removed), its tensors are bitwise the unsharded checkpoint's of the same run; it resumes on the same layout and on
# [1,1,1] pp = 1 (--reshard), each writing the unsharded checkpoint bitwise again. A run killed with its shards
# written and its index not (test hook TESS_TEST_CKPT_STOP) leaves the index as it was and the checkpoint readable;
# the next write removes the killed run's shards.
pipe_ck_tensors() { # DIR-or-file...: every checkpoint's tensors (through an index when a directory) bitwise the first's
    "$PY" - "$@" <<'PYEOF'
import json, os, struct, sys
def tensors(p):
    files = {}
    def load(f):
        if f not in files:
            raw = open(f, "rb").read(); (n,) = struct.unpack("<Q", raw[:8]); h = json.loads(raw[8:8 + n])
            h.pop("__metadata__", None)
            files[f] = {k: (v["dtype"], v["shape"], raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
        return files[f]
    if not os.path.isdir(p):
        return load(p), 1
    idx = json.load(open(os.path.join(p, "model.safetensors.index.json")))
    out = {k: load(os.path.join(p, f))[k] for k, f in idx["weight_map"].items()}
    held = sum(len(load(os.path.join(p, f))) for f in set(idx["weight_map"].values()))
    if held != len(out): print("the shards hold %d tensors, the index maps %d" % (held, len(out))); sys.exit(1)
    return out, len(set(idx["weight_map"].values()))
ref, _ = tensors(sys.argv[1])
ok = len(ref) == 72
for p in sys.argv[2:]:
    t, nf = tensors(p)
    same = sorted(t) == sorted(ref) and all(t[k] == ref[k] for k in ref)
    print("%s: %d tensors in %d file(s), bitwise the first's: %s" % (os.path.basename(p), len(t), nf, same))
    ok = ok and same
sys.exit(0 if ok else 1)
PYEOF
}

pipe_ckpt_sharded() {
    local one="$WORK/pipe_1_1_1_2_1f1b" two="$WORK/pipe_2_1_2_2_1f1b" c="$WORK/pipe_cks"
    pipe_build 1 1 1 2 1f1b && pipe_build 2 1 2 2 1f1b || return 1
    rm -rf "$c".*
    "$two/run" --steps 2 --checkpoint-out "$c.u.st" --quiet &&
        "$two/run" --steps 2 --checkpoint-out "$c.d" --checkpoint-shards --checkpoint-every 1 >"$c.w.out" &&
        "$two/run" --resume "$c.d" --checkpoint-out "$c.r2.st" >"$c.r2.out" &&
        "$one/run" --resume "$c.d" --reshard --checkpoint-out "$c.r1.st" >"$c.r1.out" || return 1
    cat "$c".*.out
    grep -q "^wrote $c.d/model.safetensors.index.json (checkpoint after step 1)$" "$c.w.out" &&
        grep -q "^resumed from $c.d after step 2 (seed 1; re-sharded from mesh \[2,2,1\])" "$c.r1.out" || return 1
    # the directory: the index and the 8 shards it names, nothing else (the step-1 checkpoint's shards removed)
    [ "$(ls "$c.d" | wc -l)" = 9 ] && [ "$(ls "$c.d" | grep -c '^ckpt-s2-.*\.safetensors$')" = 8 ] ||
        { ls -la "$c.d"; echo "want the index and 8 shards of step 2"; return 1; }
    pipe_ck_tensors "$c.u.st" "$c.d" "$c.r2.st" "$c.r1.st" || return 1
    # one changed data bit in a shard: refused by the index's checksum of the tensors' checksums
    cp -r "$c.d" "$c.bad" && "$PY" -c "import glob,sys; f=sorted(glob.glob(sys.argv[1]+'/ckpt-*'))[0]; b=bytearray(open(f,'rb').read()); b[-1]^=1; open(f,'wb').write(b)" "$c.bad" &&
        ! "$one/run" --resume "$c.bad" --reshard --quiet 2>"$c.bad.err" && cat "$c.bad.err" &&
        grep -q "^$c.bad: the tensors' checksum is fnv1a64-tensors:[0-9a-f]* but the checkpoint recorded fnv1a64-tensors:" "$c.bad.err" ||
        { echo "a changed bit in a shard was not refused by the checksum"; return 1; }
    # a directory without the index: refused naming it and what --resume takes
    mkdir -p "$c.empty" && ! "$one/run" --resume "$c.empty" --quiet 2>"$c.empty.err" && cat "$c.empty.err" &&
        grep -q "^$c.empty: is a directory without model.safetensors.index.json: --resume takes a checkpoint file, or the directory" "$c.empty.err" ||
        { echo "a directory without an index was not refused"; return 1; }
    # killed half-way: the index and the checkpoint as they were; the next write cleans up
    cp "$c.d/model.safetensors.index.json" "$c.idx"
    TESS_TEST_CKPT_STOP=1 "$two/run" --resume "$c.d" --steps 1 --checkpoint-out "$c.d" --checkpoint-shards \
        >"$c.k.out" 2>&1 && { echo "the stopped run exited 0"; return 1; }
    [ "$(ls "$c.d" | wc -l)" -gt 9 ] && cmp "$c.idx" "$c.d/model.safetensors.index.json" &&
        "$one/run" --resume "$c.d" --reshard --checkpoint-out "$c.r1k.st" --quiet && pipe_ck_tensors "$c.u.st" "$c.r1k.st" ||
        { ls -la "$c.d"; echo "the killed write changed the checkpoint"; return 1; }
    "$two/run" --resume "$c.d" --steps 1 --checkpoint-out "$c.d" --checkpoint-shards --quiet &&
        [ "$(ls "$c.d" | wc -l)" = 9 ] && [ "$(ls "$c.d" | grep -c '^ckpt-s3-.*\.safetensors$')" = 8 ] ||
        { ls -la "$c.d"; echo "the next write left other files"; return 1; }
}

# Token shards with stages (--data, --val-data; docs/TRAINING.md "Training from token shards"): every stage reads the
# batch a pp = 1 run reads, stage 0's ranks its token ids, the last stage's its targets. The shard is written here by
# hand in llm.c's format (batch 4 x seq 4, 3 batches an epoch and a tail of 5 tokens never read), its batches sliced
# here by llm.c's rule into --tokens/--targets files. Against the pp = 1 program with the same m: the validation loss
# before the first step bitwise (a forward: the same arithmetic), the step losses, the loss after them and the
# validation after step 3 within 1e-6, the --weights-out files' headers the same and their values within 1e-4 (the
# language model's tied wte gradient is summed in another order with stages, "Pipeline stages" below: not bitwise).
# Bitwise: the pp = 2 run on --data against a chain of three one-step pp = 2 runs on the sliced batches'
# --tokens/--targets files (each resuming the previous one's checkpoint), its losses and weights; and 2 steps +
# --checkpoint-out (holding the loader's position) + --resume 1 step against the straight 3 steps' weights.
pipe_data_setup() {
    local W="$WORK/pipe_data"
    [ -e "$W/train.bin" ] && return 0
    mkdir -p "$W" && "$PY" tests/ref/shard_batches.py "$W" --seed 11 --batch 4 --seq 4 --vocab 64
}

pipe_lm_data() { # q d m
    local one="$WORK/pipe_lm_$1_$2_1_m$3" two="$WORK/pipe_lm_$1_$2_2_m$3" W="$WORK/pipe_data" t="$WORK/pipe_data/m$3_$1_$2"
    pipe_data_setup && pipe_lm_build "$1" "$2" 1 "$3" && pipe_lm_build "$1" "$2" 2 "$3" || return 1
    rm -f "$t".*
    local run="--data $W/train.bin --val-data $W/train.bin --val-batches 3 --val-every 2 --steps 3"
    # shellcheck disable=SC2086
    "$one/run" $run --weights-out "$t.w1.st" >"$t.1.out" && "$two/run" $run --weights-out "$t.w2.st" >"$t.2.out" ||
        { cat "$t.1.out" "$t.2.out"; return 1; }
    cat "$t.1.out" "$t.2.out"
    [ "$(grep -c '^step ' "$t.2.out")" = 3 ] && [ "$(grep -c '^val step ' "$t.2.out")" = 3 ] || return 1
    [ "$(grep '^val step 0 ' "$t.1.out")" = "$(grep '^val step 0 ' "$t.2.out")" ] ||
        { echo "the validation loss before the first step differs from the pp = 1 program's"; return 1; }
    pipe_lm_same "$t.1.out" "$t.2.out" &&
        paste <(grep '^val step [23] ' "$t.1.out" | cut -d' ' -f5) <(grep '^val step [23] ' "$t.2.out" | cut -d' ' -f5) |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * $1 || $2 == "") bad = 1; n++ }
             END { print n " validation losses compared"; exit (bad || n != 2) }' || return 1
    "$PY" - "$t.w1.st" "$t.w2.st" <<'PYEOF' &&
import struct, sys
def header(p):
    b = open(p, "rb").read()
    return b[:8 + struct.unpack("<Q", b[:8])[0]]
ok = header(sys.argv[1]) == header(sys.argv[2])
print("weights headers identical:", ok)
sys.exit(0 if ok else 1)
PYEOF
        "$PY" $REF compare-grads --ref "$t.w1.st" --got "$t.w2.st" --tol 1e-4 --label "pp = 2 --data weights" ||
        return 1
    # the chain: each step on its batch's files, bitwise the --data run's losses and weights
    local s prev="" start last
    : >"$t.c.out"
    for s in 0 1 2; do
        start="" last=""
        [ -n "$prev" ] && start="--resume $prev --data-change"
        [ "$s" = 2 ] && last="--weights-out $t.wc.st"
        # shellcheck disable=SC2086
        "$two/run" $start --tokens "$W/tok_$s.npy" --targets "$W/tgt_$s.npy" --steps 1 --checkpoint-out "$t.c$s.st" \
            $last >>"$t.c.out" || return 1
        prev="$t.c$s.st"
    done
    diff <(awk '/^step /{print $2, $4}' "$t.2.out") <(awk '/^step /{print $2, $4}' "$t.c.out") &&
        cmp "$t.w2.st" "$t.wc.st" || { echo "the pp = 2 --data run is not the chain on the sliced batches"; return 1; }
    # resume: 2 steps, a checkpoint at the loader's position, 1 more step: the straight run's weights bitwise
    "$two/run" --data "$W/train.bin" --steps 2 --checkpoint-out "$t.r2.st" --quiet &&
        "$two/run" --resume "$t.r2.st" --data "$W/train.bin" --steps 1 --weights-out "$t.wr.st" --quiet &&
        grep -aq 'offset=32 epoch=0 batches=2' "$t.r2.st" && cmp "$t.w2.st" "$t.wr.st" ||
        { echo "the resumed pp = 2 --data run differs from the straight one"; return 1; }
}

# Stages with the memory options (docs/TRAINING.md "Pipeline stages"): recompute = N recomputes the first N layers of
# each stage, optimizer.shard shards each stage's AdamW state over its depth. Neither changes the arithmetic, so the
# trained weights are the plain stages' byte for byte; recompute shrinks the stash (what a micro-batch's forward keeps
# for its backward), shard leaves it alone and moves the reduce-scatter and all-gather bytes the plan says.
pipe_opt_build() { # name lm(0|1) d extra-lines -> $WORK/pipeopt_name: 2 stages of [1,1,d], 2 micro-batches, clip 0.05
    local dir="$WORK/pipeopt_$1" model="layers = 4, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 4"
    [ "$2" = 1 ] && model="layers = 2, hidden = 24, heads = 6, ffn = 48, seq = 4, batch = 4, vocab = 64, positions = 4"
    cat >"$dir.lua" <<SPEC
return {
  name = "pipeopt_$1", mode = "train",
  mesh = { q = 1, d = $3, pp = 2 },
  model = { $model, eps = 1e-5 },
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01, clip = 0.05$4 },
  pipeline = { microbatches = 2 },$5
}
SPEC
    [ -x "$dir/bin/model" ] || { bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null; }
}
pipe_opt_stash() { # spec -> stage 0's stash bytes of one micro-batch (--summary)
    bin/tessgen "$1" --summary | sed -n 's/^  stage 0 memory: .* + stash [0-9]* x \([0-9]*\) = .*/\1/p'
}
pipe_opt_same() { # plain variant lm d: 3 clipped steps of both, weights byte for byte, bytes as planned, replicas bitwise
    local a="$WORK/pipeopt_$1" b="$WORK/pipeopt_$2"
    "$a/run" --steps 3 --weights-out "$a/w.st" --quiet &&
        "$b/run" --steps 3 --weights-out "$b/w.st" --bytes --replica-check >"$b/run.out" || return 1
    cat "$b/run.out"
    cmp "$a/w.st" "$b/w.st" && grep -q "^bytes: every rank moved exactly the planned bytes$" "$b/run.out" &&
        grep -q "^bytes: every rank's sends and receives between stages moved exactly the planned bytes$" "$b/run.out" &&
        grep -q "bitwise identical to its replicas" "$b/run.out"
}
pipe_recompute() {
    pipe_opt_build plain 0 1 "" "" && pipe_opt_build rc 0 1 "" " recompute = 1," || return 1
    pipe_opt_same plain rc || return 1
    local s0 s1
    s0=$(pipe_opt_stash "$WORK/pipeopt_plain.lua") s1=$(pipe_opt_stash "$WORK/pipeopt_rc.lua")
    echo "stash of one micro-batch on stage 0: $s0 bytes without recompute, $s1 with"
    [ -n "$s0" ] && [ -n "$s1" ] && [ "$s1" -lt "$s0" ]
}
pipe_shard() {
    pipe_opt_build plain2 0 2 "" "" && pipe_opt_build sh 0 2 ", shard = true" "" || return 1
    pipe_opt_same plain2 sh && grep -q "reduce-scatters and all-gathers moved exactly the planned bytes" \
        "$WORK/pipeopt_sh/run.out"
}
# the whole GPT-2 with both: the tied wte gradient's sum between the stages and the sharded AdamW of both copies; a
# checkpoint of the sharded stages resumes bitwise on the unsharded program
pipe_lm_opts() {
    pipe_opt_build lm 1 2 "" " recompute = 1," && pipe_opt_build lmsh 1 2 ", shard = true" " recompute = 1," || return 1
    pipe_opt_same lm lmsh || return 1
    local a="$WORK/pipeopt_lm" b="$WORK/pipeopt_lmsh"
    "$b/run" --steps 2 --checkpoint-out "$b/ck.st" --quiet && "$a/run" --resume "$b/ck.st" --steps 1 \
        --weights-out "$a/wr.st" --quiet && cmp "$a/wr.st" "$a/w.st"
}
check "train: pipeline, recompute = 1 on 2 stages (each stage's first layer) with clipping: 3 steps' weights byte for byte the stages' without it, bytes as planned, replicas bitwise; stage 0's stash a micro-batch smaller" pipe_recompute
check "train: pipeline, optimizer.shard on 2 stages of [1,1,2] with clipping: 3 steps' weights byte for byte the unsharded stages', reduce-scatter, all-gather and point-to-point bytes as planned, replicas bitwise" pipe_shard
check "train: pipeline, the whole GPT-2 on 2 stages of [1,1,2] with recompute and optimizer.shard: weights byte for byte the unsharded stages', tied copies bitwise; a checkpoint of the sharded stages resumes bitwise on the unsharded program" pipe_lm_opts

check "train: pipeline, 2 stages of [1,1,1], 2 micro-batches 1f1b: the losses of 3 steps equal the pp = 1 program's, planned point-to-point bytes, replicas bitwise" pipe_losses 1 1 2 1f1b
check "train: pipeline, 2 stages of [1,1,1], 4 micro-batches 1f1b: the losses equal the pp = 1 program's" pipe_losses 1 1 4 1f1b
check "train: pipeline, 2 stages of [1,1,1], 2 micro-batches gpipe: the losses equal the pp = 1 program's" pipe_losses 1 1 2 gpipe
check "train: pipeline, 2 stages of [1,1,1], 4 micro-batches gpipe: the losses equal the pp = 1 program's" pipe_losses 1 1 4 gpipe
check "train: pipeline, 2 stages of [2,2,1] (8 ranks), 2 micro-batches 1f1b: the losses equal the pp = 1 program's, planned bytes, replicas bitwise" pipe_losses 2 1 2 1f1b
check "train: pipeline, the point-to-point bytes of 3 steps and the final forward are 2 x m x R/m x C/q floats per boundary and direction" pipe_bytes
check "train: pipeline, optimizer.clip: the global gradient norm sums every stage's gradients; 3 clipped steps' norms and losses equal the pp = 1 program's" pipe_clip
check "train: pipeline, 2 stages of [1,1,1] with 4 micro-batches 1f1b run clean under ASan+UBSan, planned bytes, replicas bitwise" pipe_asan
check "train: pipeline, --repeat, --trace and --stats on 2 stages: the repeated forwards leave y byte for byte a forward's, the trace has every rank, the planned bytes" pipe_run_opts
check "train: pipeline, --stats: the stash each rank of the GPT-2's 2 stages allocates equals --summary's (stash x the kept buffers, 64-byte aligned)" pipe_stash_stats
check "train: pipeline, one backward through 2 stages (--dy, --dx-out, --grads-out): dL/dx and every gradient byte for byte the pp = 1 program's, point-to-point bytes as planned; the GPT-2's --grads-out alone within 1e-5" pipe_dy
check "train: pipeline, --output on 2 stages of [1,1,1]: y after 2 steps and of a forward alone byte for byte the pp = 1 program's" pipe_output 1 1
check "train: pipeline, --output on 2 stages of [2,2,1] (8 ranks): y byte for byte the pp = 1 program's" pipe_output 2 1
check "train: pipeline, the whole GPT-2 on 2 stages: --logits-out after 2 steps and of a forward alone within 1e-6 of the pp = 1 program's, --hf-out's directory the pp = 1 one's (config byte for byte, tensors within 1e-4)" pipe_lm_forward_outs
check "train: pipeline, a forward that overflows with finite weights names the largest weight as the stage holding it names it" pipe_overflow_named
check "train: pipeline, the whole GPT-2 on 2 stages of [1,1,1], 2 micro-batches: 3 AdamW steps' losses equal the pp = 1 program's, the tied wte gradient's bytes as planned, both copies bitwise; unsummed, the losses leave pp = 1's after step 1" pipe_lm_losses 1 1
check "train: pipeline, the whole GPT-2 on 2 stages of [2,2,1] (8 ranks): the losses equal the pp = 1 program's on [1,1,1], planned bytes, replicas and tied copies bitwise" pipe_lm_losses 2 1
check "train: pipeline, --replica-check compares the first and last stage's copies of the tied wte" pipe_lm_tied_check
check "train: pipeline, the whole GPT-2 on 2 stages of [1,1,1] trained 3 steps on token shards (--data, --val-data): validation loss bitwise the pp = 1 program's, losses within 1e-6, weights within 1e-4; bitwise a chain of one-step runs on the sliced batches' --tokens/--targets, and resumed from a checkpoint at the loader's position" pipe_lm_data 1 1 1
check "train: pipeline, the whole GPT-2 on 2 stages of [1,1,1], 2 micro-batches, trained 3 steps on token shards (--data, --val-data): validation loss bitwise the pp = 1 program's, losses within 1e-6, weights within 1e-4; bitwise a chain of one-step runs on the sliced batches' --tokens/--targets, and resumed from a checkpoint at the loader's position" pipe_lm_data 1 1 2
check "train: pipeline, the whole GPT-2 on 2 stages of [1,1,2] (4 ranks, each depth its own sequences), 2 micro-batches, trained 3 steps on token shards (--data, --val-data): as on [1,1,1]" pipe_lm_data 1 2 2
check "train: pipeline, --weights-out and --grads-out gather every stage into one file: the block stack's weights byte for byte the pp = 1 program's, the GPT-2's header the same, gradients within 1e-5 and weights within 1e-4" pipe_outputs
check "train: pipeline, checkpoint of 2 stages of the block stack: 2 steps + --checkpoint-out + --resume 2 steps print the straight run's losses bitwise; a pp = 1 checkpoint resumes on pp = 2 with --reshard and back within 1e-6; without --reshard a pp = 2 checkpoint is refused by the pp = 1 program" pipe_ckpt_stack
check "train: pipeline, checkpoint of the whole GPT-2 on 2 stages: resumed losses bitwise the straight run's, resharded across pp within 1e-6, refused across pp without --reshard" pipe_ckpt_lm
check "train: pipeline, sharded checkpoint (--checkpoint-shards) of 2 stages of [2,2,1]: 8 shards and an index, tensors bitwise the unsharded checkpoint's; resumed on the same layout and on [1,1,1] pp = 1 bitwise; a changed bit in a shard fails the checksum, a directory without an index is refused; a write killed before its index leaves the previous checkpoint readable, the next write removes its shards" pipe_ckpt_sharded
