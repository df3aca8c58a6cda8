# tests/sched.sh - sourced by tests/e2e.sh (after its reference inputs exist): the learning-rate schedule,
# clipping by global gradient norm and the training log line (docs/TRAINING.md), against the float64
# reference's own implementation (tests/ref/tessref.py train --warmup --decay-steps --lr-min --clip).
#   trajectory  for each mesh: 8 steps of a spec with warmup 2, cosine decay over 6 steps to lr_min and
#               clip 0.05 (below every step's norm, so every step is clipped): each step's lr equal to the
#               reference's within 1e-8 (the log prints 9 digits), the norm and the loss within 1e-4 (the
#               gradient tolerance of tests/train.sh: float32 sums against float64; measured on [2,2,1]:
#               norm 3e-6, loss 2e-6 by step 8), and the plain constant-lr, unclipped reference off by
#               more than 1e-2 (so the comparison can fail)
#   replicas    bitwise identical after 4 clipped steps on [2,2,2] (dep and coldep replicas)
# It also defines sched_build, whose outputs tests/ckpt.sh uses.
SC_MESHES=${TESS_SCHED_MESHES:-"1,1 2,1 2,2 1,2"}

sched_spec() { # q d
    cat <<SPEC
return {
  name = "sched_q$1_d$2", mode = "train",
  mesh = { q = $1, d = $2 },
  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 12, eps = 1e-5 },
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01,
                warmup = 2, decay_steps = 6, lr_min = 1e-4, clip = 0.05 },
}
SPEC
}
SC_REFOPT="--lr 1e-3 --beta1 0.9 --beta2 0.999 --adam-eps 1e-8 --weight-decay 0.01"

sched_build() { # q d -> $WORK/sc_q_d built
    local dir="$WORK/sc_$1_$2"
    [ -x "$dir/bin/model" ] && return 0
    sched_spec "$1" "$2" >"$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null
}

sched_setup() {
    "$PY" $REF input $DIMS --seed 4 --out "$WORK/sc_target.npy" &&
        "$PY" $REF train $DIMS --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --target "$WORK/sc_target.npy" \
            --steps 8 $SC_REFOPT --warmup 2 --decay-steps 6 --lr-min 1e-4 --clip 0.05 >"$WORK/sc_ref.txt" &&
        "$PY" $REF train $DIMS --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --target "$WORK/sc_target.npy" \
            --steps 8 $SC_REFOPT >"$WORK/sc_plain.txt"
}

sched_trajectory() { # q d
    local dir="$WORK/sc_$1_$2"
    "$dir/run" --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --target "$WORK/sc_target.npy" --steps 8 \
        >"$dir.out" || return 1
    cat "$dir.out"
    "$PY" - "$dir.out" "$WORK/sc_ref.txt" "$WORK/sc_plain.txt" <<'PYEOF'
import sys
def parse(f):
    out = []
    for l in open(f):
        if l.startswith("step "):
            t = l.split()
            out.append({t[i]: float(t[i + 1]) for i in range(0, len(t) - 1, 2)})
    return out
got, ref, plain = (parse(f) for f in sys.argv[1:4])
ok = len(got) == len(ref) == len(plain) == 8
rel = lambda a, b: abs(a - b) / abs(b)
for g, r in zip(got, ref):
    k = int(g["step"])
    if k != int(r["step"]) or not all(f in g for f in ("loss", "lr", "norm", "tok/s")) or not g["tok/s"] > 0:
        print("step %d: want the fields step, loss, lr, norm, tok/s > 0: %s" % (k, g)); ok = False; continue
    for f, tol in (("lr", 1e-8), ("norm", 1e-4), ("loss", 1e-4)):
        if rel(g[f], r[f]) > tol:
            print("step %d: %s %.9g vs float64 reference %.9g (rel %.2e > %g)" % (k, f, g[f], r[f], rel(g[f], r[f]), tol)); ok = False
    if not r["norm"] > 0.05:
        print("step %d: reference norm %.3g is not above clip 0.05: the step is not clipped" % (k, r["norm"])); ok = False
far = max(rel(g["loss"], p["loss"]) for g, p in zip(got, plain))
if far < 1e-2:
    print("the constant-lr unclipped reference is within %.2e of the run: the check could not tell them apart" % far); ok = False
print("lr/norm/loss match the float64 reference; step 8 loss %.6g (unclipped constant-lr reference: %.6g)" % (got[-1]["loss"], plain[-1]["loss"]))
sys.exit(0 if ok else 1)
PYEOF
}

sched_replicas() {
    local dir="$WORK/sc_2_2"
    "$dir/run" --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --target "$WORK/sc_target.npy" --steps 4 \
        --replica-check | tee "$WORK/sc_rep.out" && grep -q "norm" "$WORK/sc_rep.out" &&
        grep -q "bitwise identical" "$WORK/sc_rep.out"
}

if sched_setup >"$WORK/log" 2>&1; then
    wanted "sched" && ok "sched: float64 reference with the schedule and clipping"
    for m in $SC_MESHES; do
        q=${m%,*}
        d=${m#*,}
        if sched_build "$q" "$d" >"$WORK/log" 2>&1; then
            check "sched: mesh [$q,$q,$d] 8 clipped steps with warmup and cosine decay: lr, norm and loss match the float64 reference" \
                sched_trajectory "$q" "$d"
        else
            notok "sched: mesh [$q,$q,$d] generate and build" "$WORK/log"
        fi
    done
    [ -x "$WORK/sc_2_2/bin/model" ] &&
        check "sched: replicas bitwise identical after 4 clipped steps on [2,2,2]" sched_replicas
else
    notok "sched: float64 reference with the schedule and clipping" "$WORK/log"
fi
