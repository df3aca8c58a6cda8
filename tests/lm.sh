# tests/lm.sh - sourced by tests/run.sh when the filter names "lm" (or is empty): the whole GPT-2 (model.vocab,
# docs/MODEL.md) against the independent float64 reference (tests/ref/tessref.py lm-*).
#
# One model: 2 layers, hidden 24, 6 heads, ffn 48, seq 4, batch 12, vocab 49, positions 6. vocab 49 is padded on
# every mesh with q > 1 (q = 2: Vq = 25, one pad row; q = 3: Vq = 17, two pad rows), and positions > seq leaves
# wpe rows without gradient. For each mesh of LM_MESHES (a training program: it also runs the forward alone):
#   logits   poisoned first; --logits-out [B,S,V] within 1e-5 (relative Frobenius) of lm-forward, the printed
#            loss within 1e-6, measured bytes of the forward equal to the plan (--bytes)
#   grads    --grads-out (one backward of the loss): every tensor (wte, wpe, ln_f, the blocks) within 1e-4 of
#            lm-backward, measured bytes of forward + backward equal to the plan
#   replicas after 3 AdamW steps every shard is bitwise identical to its replicas (wte over dep, wpe over coldep)
# then with 2 micro-batches per step (pipeline.microbatches) on LM_MB_MESHES: logits, loss and every gradient against
# the reference of the whole batch (bytes planned), replicas bitwise and losses within 1e-5 of one micro-batch's;
# then: 20-step losses equal across the meshes and tracking lm-train; the docs/MODEL.md byte formula of the
# embedding, head and loss equals the measured difference between this model and the same stack without vocab;
# an inference program prints the loss and writes the same logits; synthetic tokens are deterministic; bad token
# files (id >= V, negative, float32, wrong shape) are refused naming file, index and value, nothing written;
# and training from token shards (--data, --val-data; tests/lmdata.sh). A mesh's program is built only when
# TESS_TEST_FILTER wants one of its checks or a later check runs it (lm_train builds on first use): a filter for one
# mesh builds that mesh alone; without a filter every mesh is built in the loop, as the checks list them.
LM_MESHES=${TESS_LM_MESHES:-"1,1 1,2 2,1 2,2 3,1"}
LM_MB_MESHES=${TESS_LM_MB_MESHES:-"1,1 2,1"} # the meshes of the micro-batch checks
. tests/lm_ref.sh # LM_DIMS, LM_REF, lm_spec, lm_poison, lm_ref_files (tests/megatron_lm.sh and bf16_compute.sh use them)

lm_setup() { "$PY" $LM_REF lm-fdcheck && lm_ref_files "$WORK/lm"; }

lm_build() { # q d mode [novocab]
    local dir="$WORK/lm/$3_$1_$2${4:+_novocab}"
    lm_spec "$@" >"$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null
}

# lm_prog MODE Q D [novocab]: the program of mesh [Q,Q,D] in $WORK/lm/MODE_Q_D[_novocab], built on first use. The mesh
# loop builds a mesh only when TESS_TEST_FILTER wants one of its checks; every check after the loop that runs a program
# calls this first, so it also runs alone. A failed build leaves DIR.failed and is not tried again (lm_mesh_ok).
lm_prog() {
    local dir="$WORK/lm/$1_$2_$3${4:+_novocab}"
    [ -x "$dir/bin/model" ] && return 0
    [ -e "$dir.failed" ] && { echo "the program $dir (mesh [$2,$2,$3]) did not build (the first check that built it)"; return 1; }
    lm_build "$2" "$3" "$1" ${4:+"$4"} || { touch "$dir.failed"; return 1; }
}

# lm_train Q D: the training program of mesh [Q,Q,D] in $WORK/lm/train_Q_D, built on first use
lm_train() { lm_prog train "$1" "$2"; }

# lm_mesh_ok Q D: mesh [Q,Q,D] is one of LM_MESHES and its build has not failed: the checks guarded by it ran on the
# loop's builds before they were built on demand, and still run exactly when they did
lm_mesh_ok() {
    case " $LM_MESHES " in *" $1,$2 "*) ;; *) return 1 ;; esac
    [ ! -e "$WORK/lm/train_$1_$2.failed" ]
}

lm_logits() { # q d [mode]
    local W="$WORK/lm" dir="$WORK/lm/${3:-train}_$1_$2"
    lm_poison "$dir/logits.npy" &&
        "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --logits-out "$dir/logits.npy" \
            --bytes >"$dir/fwd.out" &&
        "$PY" $LM_REF compare --ref "$W/logits_ref.npy" --got "$dir/logits.npy" --tol 1e-5 --label "logits [$1,$1,$2]" &&
        "$PY" - "$W/loss_ref.txt" "$dir/fwd.out" <<'PYEOF'
import sys
ref = float(open(sys.argv[1]).read().split()[1])
got = [float(l.split()[1]) for l in open(sys.argv[2]) if l.startswith("loss ")]
rel = abs(got[0] - ref) / ref if got else 1.0
print("loss", got, "reference", ref, "rel %.2e" % rel)
sys.exit(0 if got and rel <= 1e-6 else 1)
PYEOF
}

lm_grads() { # q d [prefix of the program's directory: train]
    local W="$WORK/lm" dir="$WORK/lm/${3:-train}_$1_$2"
    rm -f "$dir/g.st"
    "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --grads-out "$dir/g.st" --bytes \
        --quiet >"$dir/bwd.out" &&
        "$PY" $LM_REF compare-grads --ref "$W/g_ref.st" --got "$dir/g.st" --tol 1e-4 --label "[$1,$1,$2]"
}

lm_replicas() { # q d
    local W="$WORK/lm" dir="$WORK/lm/train_$1_$2"
    "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --steps 3 --replica-check |
        tee "$W/rep.out" && grep -q "bitwise identical" "$W/rep.out"
}

# Micro-batches (pipeline.microbatches, docs/TRAINING.md "Micro-batches"): the program of mesh q, d with m micro-batches
# per step in $WORK/lm/mbM_q_d (the model's 12 sequences: 6 per rank on [2,2,1], 3 per micro-batch)
lm_build_mb() { # q d m
    local dir="$WORK/lm/mb$3_$1_$2"
    lm_spec "$1" "$2" train | sed -e "s/name = \"lm_q$1_d$2_train\"/name = \"lm_q$1_d$2_mb$3\"/" \
        -e "\$i\\  pipeline = { microbatches = $3 }," >"$dir.lua" &&
        grep -q "microbatches = $3" "$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null
}

# 3 AdamW steps with m micro-batches: replicas bitwise identical, every loss within 1e-5 of the program without them
# (the same model: the gradients differ only by the order of float32 sums, measured ~1e-7)
lm_mb_steps() { # q d m
    local W="$WORK/lm" dir="$WORK/lm/mb$3_$1_$2" one="$WORK/lm/train_$1_$2"
    lm_train "$1" "$2" || return 1
    "$one/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --steps 3 |
        grep -E '^(step|after) ' >"$dir/loss1.txt" &&
        "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --steps 3 --replica-check \
            >"$dir/steps.out" &&
        cat "$dir/steps.out" && grep -q "bitwise identical" "$dir/steps.out" &&
        grep -E '^(step|after) ' "$dir/steps.out" >"$dir/lossm.txt" &&
        "$PY" - "$dir/loss1.txt" "$dir/lossm.txt" <<'PYEOF'
import sys
def losses(f):
    return [float(l.split()[3] if l.startswith("step ") else l.split()[4]) for l in open(f)]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
ok = len(a) == 4 and len(b) == 4
for k, (x, y) in enumerate(zip(a, b)):
    rel = abs(x - y) / abs(x)
    print("loss %d: one micro-batch %.9g, micro-batches %.9g (rel %.2e, tol 1e-5)" % (k + 1, x, y, rel))
    ok = ok and rel <= 1e-5
sys.exit(0 if ok else 1)
PYEOF
}

# --timing: the vocab cross-entropy (row max, exp sums, loss, dlogits) is its own kind, "loss", with time in it,
# and the generated step table files the loss steps under it (not under "layernorm")
lm_timing_kind() { # q d
    local W="$WORK/lm" dir="$WORK/lm/train_$1_$2"
    "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --steps 2 --timing >"$W/timing.out" ||
        return 1
    cat "$W/timing.out"
    awk -F= '$1 == "loss_seconds" { found = 1; if ($2 + 0 > 0) pos = 1 } END { exit !(found && pos) }' \
        "$W/timing.out" || { echo "no loss_seconds > 0 in the --timing report"; return 1; }
    if grep '"loss", TR_K_' "$dir"/rank_i0_j0.c | grep -Ev '"loss", TR_K_(LOSS|ALLREDUCE|BCAST|REDUCE),'; then
        echo "rank_i0_j0.c's step table files a loss step under another kind (above)"
        return 1
    fi
    grep -q '"loss", TR_K_LOSS,' "$dir"/rank_i0_j0.c || { echo "rank_i0_j0.c has no TR_K_LOSS step"; return 1; }
}

# --timing with --trace: the recorded last step resets the byte counts (--stats shows that step alone), not the
# seconds of the steps before it; the kinds' seconds per step stay those of a run without --trace (they were one
# step's in eight: gemm_seconds 1/8 of the untraced run's)
lm_timing_trace() { # q d
    local W="$WORK/lm" dir="$WORK/lm/train_$1_$2" a b
    "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --steps 8 --timing >"$W/t0.out" &&
        "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --steps 8 --timing \
            --trace "$W/t1.json" >"$W/t1.out" || return 1
    a=$(sed -n 's/^gemm_seconds=//p' "$W/t0.out") b=$(sed -n 's/^gemm_seconds=//p' "$W/t1.out")
    echo "gemm seconds per step: $a without --trace, $b with it"
    awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > 0 && b / a > 0.3) }'
}

# --timing's seconds per step kind leave the warm-up step out (on a GPU its spans hold cuDNN's graph builds and
# cuBLASLt's first calls: 98 ms of "attention" a step in a 19.7 ms step on an H200): the test hook adds 100 s of
# GEMM time to the first step; the mean over the other three steps stays far below it (it was 25 s)
lm_timing_warmup() { # q d
    local W="$WORK/lm" dir="$WORK/lm/train_$1_$2" a
    TESS_TEST_WARMUP_SECONDS=100 "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" \
        --steps 4 --timing >"$W/tw.out" || return 1
    a=$(sed -n 's/^gemm_seconds=//p' "$W/tw.out")
    echo "gemm seconds per step with 100 s added to the warm-up step: $a"
    awk -v a="$a" 'BEGIN { exit !(a > 0 && a < 10) }'
}

# The CPU kernels on the rank's threads (docs/ARCHITECTURE.md, "CPU kernels: threads and vectors"): 2 AdamW steps
# of a model large enough that every threaded kernel splits its work (256 token rows x hidden 128 and ffn 512,
# 32 (sequence, head) pairs of 32 x 32 scores, vocab 1000: each above the kernels' one-thread limit) write the same
# weights, bit for bit, on 1, 2 and 3 OpenMP threads. OPENBLAS_NUM_THREADS stays 1: OpenBLAS's GEMM bits follow
# its own thread count, which is not what this checks.
lm_threads_bitwise() {
    local dir="$WORK/lm/threads" n
    mkdir -p "$dir" && cat >"$dir.lua" <<'SPEC'
return { name = "lm_threads", mode = "train", mesh = { q = 1, d = 1 },
         model = { layers = 1, hidden = 128, heads = 4, ffn = 512, seq = 32, batch = 8, eps = 1e-5,
                   vocab = 1000, positions = 32 },
         optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 } }
SPEC
    bin/tessgen "$dir.lua" -o "$dir/prog" --quiet && ninja -C "$dir/prog" cpu >/dev/null || return 1
    for n in 1 2 3; do
        rm -f "$dir/w$n.st"
        OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=$n "$dir/prog/run" --seed 5 --steps 2 --weights-out "$dir/w$n.st" \
            >"$dir/run$n.out" || { cat "$dir/run$n.out"; return 1; }
    done
    cmp "$dir/w1.st" "$dir/w2.st" && cmp "$dir/w1.st" "$dir/w3.st" && grep "^step 2 " "$dir/run1.out"
}

# 20 steps: every mesh within 2e-5 of [1,1,1] and within 1e-4 of the float64 reference at every step (the loss
# falls from 4.74 to 2.36). Why: the meshes differ only in the order of float32 sums (SUMMA partial products,
# reductions over row and col), measured <= 6e-8 relative over the 20 steps on [3,3,1] and [2,2,2]; float32 against
# float64 drifts to 3.6e-6 by step 20 (the AdamW updates of lr 1e-3 amplify rounding). 2e-5 and 1e-4 leave factors
# of ~300 and ~25 while a wrong gradient (even one tensor off by a few percent) moves the losses by far more.
lm_losses() {
    local W="$WORK/lm" m
    for m in $LM_MESHES; do
        lm_train "${m%,*}" "${m#*,}" || return 1
    done
    for m in $LM_MESHES; do
        "$WORK/lm/train_${m%,*}_${m#*,}/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" \
            --steps 20 | grep '^step ' >"$W/loss_${m%,*}_${m#*,}.txt" || return 1
    done
    "$PY" - "$W" $LM_MESHES <<'PYEOF'
import sys
w = sys.argv[1]
def losses(f):
    return [float(l.split()[3]) for l in open(f) if l.startswith("step ")]
ref = losses(w + "/train_ref.txt")
runs = {m: losses("%s/loss_%s.txt" % (w, m.replace(",", "_"))) for m in sys.argv[2:]}
base = runs["1,1"]
ok = len(ref) == 20 and all(len(v) == 20 for v in runs.values())
worst_mesh = worst_ref = 0.0
for m, v in runs.items():
    for k in range(min(20, len(v))):
        a = abs(v[k] - base[k]) / abs(base[k]); b = abs(v[k] - ref[k]) / abs(ref[k])
        worst_mesh, worst_ref = max(worst_mesh, a), max(worst_ref, b)
        if a > 2e-5:
            print("mesh %s step %d: loss %.9g vs [1,1,1] %.9g (rel %.2e > 2e-5)" % (m, k + 1, v[k], base[k], a)); ok = False
        if b > 1e-4:
            print("mesh %s step %d: loss %.9g vs float64 %.9g (rel %.2e > 1e-4)" % (m, k + 1, v[k], ref[k], b)); ok = False
    if not v or not v[-1] < v[0]:
        print("mesh %s: the loss does not fall: %s" % (m, v)); ok = False
print("step 1 and 20:", {m: (v[0], v[-1]) for m, v in runs.items()}, "reference", (ref[0], ref[-1]))
print("worst relative difference: between meshes %.2e, against float64 %.2e" % (worst_mesh, worst_ref))
sys.exit(0 if ok else 1)
PYEOF
}

# docs/MODEL.md's per-rank elements of the embedding, head and loss (forward) and their backward, against what
# --bytes measured for this model minus what it measured for the same stack without vocab (forward + backward)
lm_bytes_formula() { # q d
    local W="$WORK/lm" q=$1 d=$2 lmdir="$WORK/lm/train_$1_$2" bdir="$WORK/lm/train_$1_$2_novocab"
    lm_train "$q" "$d" && lm_prog train "$q" "$d" novocab || return 1
    "$PY" $LM_REF dy --layers 2 --hidden 24 --heads 6 --ffn 48 --seq 4 --batch 12 --seed 3 --out "$W/dy.npy" &&
        "$bdir/run" --dy "$W/dy.npy" --bytes >"$W/bytes_blocks.txt" &&
        "$lmdir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --grads-out "$W/gb.st" --bytes \
            >"$W/bytes_lm.txt" || return 1
    "$PY" - "$W/bytes_blocks.txt" "$W/bytes_lm.txt" "$q" "$d" <<'PYEOF'
import sys
def table(f):
    rows = {}
    for l in open(f):
        t = l.split()
        if t and t[0].isdigit() and "/" in l:
            rows[int(t[0])] = [int(x.split("/")[0]) for x in t[1:9]]
    return rows
blocks, lm = table(sys.argv[1]), table(sys.argv[2])
q, d = int(sys.argv[3]), int(sys.argv[4])
B, S, C, V, P = 12, 4, 24, 49, 6
R, Cq, Vq = B * S // (d * q), C // q, -(-V // q)
one = q > 1
# columns: bcast recv row, bcast recv col, bcast sent row, bcast sent col, allreduce row, allreduce dep+coldep,
# reduce recv, reduce sent (elements; the table prints bytes = 4 x elements)
fwd = [0, (q - 1) * Vq * Cq, 0, Vq * Cq if one else 0, 5 * R if one else 0, 0,
       (q - 1) * (R * Cq + R * Vq), (q - 1) * (R * Cq + R * Vq)]
bwd = [(q - 1) * R * Vq, (q - 1) * (Vq * Cq + R * Cq), R * Vq if one else 0, (Vq * Cq + R * Cq) if one else 0,
       2 * R if one else 0, (2 * Cq + P * Cq if q * d > 1 else 0) + (Vq * Cq if d > 1 else 0),
       (q - 1) * Vq * Cq, (q - 1) * Vq * Cq]
want = [4 * (a + b) for a, b in zip(fwd, bwd)]
ok = len(lm) == q * q * d and len(blocks) == len(lm)
for r in sorted(lm):
    got = [a - b for a, b in zip(lm[r], blocks.get(r, [0] * 8))]
    if got != want:
        print("rank %d: measured LM bytes %s, docs/MODEL.md formula %s" % (r, got, want)); ok = False
print("LM bytes per rank (fwd + bwd):", want, "OK" if ok else "FAIL")
sys.exit(0 if ok else 1)
PYEOF
}

# model.vocab_align = 8 (docs/MODEL.md "Padding"): every rank's vocab block a multiple of 8 rows, so more pad than
# q alone gives ([1,1,1]: Vq = 56, 7 pad rows; [2,2,1]: Vq = 32, 15 pad rows, 17 real ids in block 1). The program's
# table says that Vq; one run (the CPU build) checks the poisoned logits and the loss against lm-forward, every
# gradient against lm-backward and the bytes against the plan (--bytes), and --weights-out and --hf-out write the
# V = 49 rows of wte it read (no pad rows), bit for bit
lm_align() { # q d Vq
    local W="$WORK/lm" dir="$WORK/lm/align8_$1_$2"
    lm_spec "$1" "$2" train | sed "s/positions = 6 },/positions = 6, vocab_align = 8 },/" >"$dir.lua" &&
        grep -q "vocab_align = 8" "$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet &&
        ninja -C "$dir" cpu >/dev/null || return 1
    grep -q "\.vocab = 49, \.vq = $3," "$dir/rank_i0_j0.c" || { grep -n "\.vq =" "$dir/rank_i0_j0.c"; return 1; }
    lm_poison "$dir/logits.npy" && rm -rf "$dir/g.st" "$dir/w.st" "$dir/hf" &&
        "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --logits-out "$dir/logits.npy" \
            --grads-out "$dir/g.st" --weights-out "$dir/w.st" --hf-out "$dir/hf" --bytes >"$dir/fwd.out" &&
        cat "$dir/fwd.out" &&
        "$PY" $LM_REF compare --ref "$W/logits_ref.npy" --got "$dir/logits.npy" --tol 1e-5 --label "logits [$1,$1,$2]" &&
        "$PY" $LM_REF compare-grads --ref "$W/g_ref.st" --got "$dir/g.st" --tol 1e-4 --label "[$1,$1,$2]" &&
        "$PY" - "$W/loss_ref.txt" "$dir/fwd.out" "$W/w.st" "$dir/w.st" "$dir/hf/model.safetensors" <<'PYEOF'
import sys
import numpy as np
sys.path.insert(0, "tests/ref")
import tessref
ref = float(open(sys.argv[1]).read().split()[1])
got = [float(l.split()[1]) for l in open(sys.argv[2]) if l.startswith("loss ")]
rel = abs(got[0] - ref) / ref if got else 1.0
print("loss", got, "reference", ref, "rel %.2e" % rel)
ok = bool(got) and rel <= 1e-6
w, wo, hf = (tessref.read_safetensors(f) for f in sys.argv[3:6])
for n, t in w.items():
    for label, g in (("--weights-out", wo.get(n)), ("--hf-out", hf.get("transformer." + n))):
        if g is None or g.shape != t.shape or not np.array_equal(g, t):
            print("%s %s: %s, not the %s read" % (label, n, None if g is None else g.shape, t.shape)); ok = False
print("wte rows written:", wo["wte.weight"].shape[0], hf["transformer.wte.weight"].shape[0])
sys.exit(0 if ok and len(wo) == len(w) and len(hf) == len(w) else 1)
PYEOF
}

# an inference program prints the loss and writes the same logits (no backward, no optimizer state)
# lm_placed PLACEMENT: the whole model on [2,2,2] with mesh.placement col or dep (other global ranks for the same
# classes): logits against the reference, bytes planned
lm_placed() {
    local W="$WORK/lm" dir="$WORK/lm/placed_$1"
    lm_spec 2 2 train | sed "s/mesh = { q = 2, d = 2 }/mesh = { q = 2, d = 2, placement = \"$1\" }/" >"$dir.lua" &&
        grep -q "placement = \"$1\"" "$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null &&
        lm_poison "$dir/logits.npy" &&
        "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --logits-out "$dir/logits.npy" \
            --bytes --quiet &&
        "$PY" $LM_REF compare --ref "$W/logits_ref.npy" --got "$dir/logits.npy" --tol 1e-5 --label "logits placement $1"
}

lm_infer() {
    lm_prog infer 2 1 && lm_logits 2 1 infer && grep -q "^loss " "$WORK/lm/infer_2_1/fwd.out"
}

# without --tokens/--targets: synthetic ids from --seed, deterministic, different for another seed
lm_synthetic() {
    local dir="$WORK/lm/train_2_1"
    lm_train 2 1 || return 1
    "$dir/run" --seed 3 --logits-out "$WORK/lm/s3a.npy" --quiet && "$dir/run" --seed 3 --logits-out "$WORK/lm/s3b.npy" --quiet &&
        "$dir/run" --seed 4 --logits-out "$WORK/lm/s4.npy" --quiet && cmp "$WORK/lm/s3a.npy" "$WORK/lm/s3b.npy" &&
        ! cmp -s "$WORK/lm/s3a.npy" "$WORK/lm/s4.npy"
}

lm_refused_one() { # as lm_refused, and the message is one line (not one per tensor)
    lm_refused "$@" || return 1
    [ "$(grep -c . "$WORK/lm/bad.err")" -eq 1 ] || { echo "more than one line"; return 1; }
}

lm_refused() { # OPTION FILE WANT
    local dir="$WORK/lm/train_2_1"
    lm_train 2 1 || return 1
    rm -f "$WORK/lm/never.npy"
    "$dir/run" --weights "$WORK/lm/w.st" --tokens "$WORK/lm/tok.npy" --targets "$WORK/lm/tgt.npy" "$1" "$2" \
        --logits-out "$WORK/lm/never.npy" --quiet >"$WORK/lm/bad.out" 2>"$WORK/lm/bad.err"
    local rc=$?
    cat "$WORK/lm/bad.err"
    [ $rc -eq 1 ] || { echo "exit $rc, want 1"; return 1; }
    grep -qF -- "$3" "$WORK/lm/bad.err" || { echo "message lacks: $3"; return 1; }
    [ ! -e "$WORK/lm/never.npy" ] && ! ls "$WORK/lm"/never.npy.* >/dev/null 2>&1 || { echo "an output was written"; return 1; }
}

# the LM program of [2,2,2] built with ASan+UBSan: gradients against the reference, bytes, --stats, a bad token
# file refused cleanly
lm_asan() {
    local W="$WORK/lm" M="$WORK/lm/train_2_2"
    lm_train 2 2 || return 1
    ninja -C "$M" asan >/dev/null && rm -f "$M/ga.st" &&
        TESS_VARIANT=asan "$M/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --grads-out \
            "$M/ga.st" --bytes --stats >"$W/asan.out" 2>"$W/asan.err" &&
        grep -q "every step of every rank moved exactly its planned bytes" "$W/asan.out" &&
        "$PY" $LM_REF compare-grads --ref "$W/g_ref.st" --got "$M/ga.st" --tol 1e-4 --label "asan [2,2,2]" &&
        { TESS_VARIANT=asan "$M/run" --weights "$W/w.st" --tokens "$W/tok_big.npy" --quiet 2>"$W/asan.err"
          [ $? -eq 1 ] && ! grep -q "Sanitizer" "$W/asan.err"; }
}

# options of the other kind of program are refused with exit 2 and a message that says what to do
lm_wrong_options() {
    local W="$WORK/lm"
    lm_train 2 1 && lm_prog train 2 1 novocab || return 1
    "$W/train_2_1_novocab/run" --tokens "$W/tok.npy" --quiet 2>"$W/opt.err"
    [ $? -eq 2 ] && grep -q "need a language model: this program was generated without model.vocab" "$W/opt.err" ||
        { cat "$W/opt.err"; return 1; }
    "$W/train_2_1/run" --input "$W/tok.npy" --quiet 2>"$W/opt.err"
    [ $? -eq 2 ] && grep -q "this program is a language model (model.vocab = 49): give --tokens" "$W/opt.err" ||
        { cat "$W/opt.err"; return 1; }
}

# a GPT2LMHeadModel-style file (transformer. prefix on every name, an lm_head.weight that is not read) gives the
# same logits; --weights-out after 3 steps, read back, gives the loss printed after step 3
lm_hf_roundtrip() {
    local W="$WORK/lm" dir="$WORK/lm/train_2_1"
    lm_train 2 1 || return 1
    "$PY" - "$W/w.st" "$W/w_hf.st" <<'PYEOF' || return 1
import sys
sys.path.insert(0, "tests/ref")
import tessref
w = tessref.read_safetensors(sys.argv[1])
out = [("transformer." + n, t) for n, t in sorted(w.items())] + [("lm_head.weight", w["wte.weight"] * 0 + 7)]
tessref.write_safetensors(sys.argv[2], out)
PYEOF
    lm_poison "$dir/logits_hf.npy" &&
        "$dir/run" --weights "$W/w_hf.st" --tokens "$W/tok.npy" --logits-out "$dir/logits_hf.npy" --quiet &&
        "$PY" $LM_REF compare --ref "$W/logits_ref.npy" --got "$dir/logits_hf.npy" --tol 1e-5 --label "transformer. names" &&
        "$dir/run" --weights "$W/w_hf.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --steps 3 \
            --weights-out "$W/w3.st" >"$W/s3.out" &&
        "$dir/run" --weights "$W/w3.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" >"$W/s3b.out" || return 1
    local a b
    a=$(sed -n 's/^after step 3: loss //p' "$W/s3.out")
    b=$(sed -n 's/^loss //p' "$W/s3b.out")
    echo "after step 3: $a; read back: $b"
    [ -n "$a" ] && [ "$a" = "$b" ]
}

# --hf-out of a language model: a GPT2LMHeadModel directory with transformer.wte/wpe/ln_f (wte without its pad
# rows) holding the tensors --weights-out wrote, and config.json's vocab_size and n_positions
lm_hf_out() {
    local W="$WORK/lm" dir="$WORK/lm/train_2_1"
    lm_train 2 1 || return 1
    rm -rf "$W/hfout"
    "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --steps 2 --weights-out "$W/w2.st" \
        --hf-out "$W/hfout" --quiet || return 1
    "$PY" - "$W/w2.st" "$W/hfout" <<'PYEOF'
import json, sys
import numpy as np
sys.path.insert(0, "tests/ref")
import tessref
w = tessref.read_safetensors(sys.argv[1])
h = tessref.read_safetensors(sys.argv[2] + "/model.safetensors")
cfg = json.load(open(sys.argv[2] + "/config.json"))
ok = cfg.get("vocab_size") == 49 and cfg.get("n_positions") == 6 and "lm_head.weight" not in h
for n, t in w.items():
    g = h.get("transformer." + n)
    if g is None or g.shape != t.shape or not np.array_equal(g, t):
        print("transformer.%s differs from --weights-out's %s" % (n, n)); ok = False
print("tensors", len(h), "of", len(w), "vocab_size", cfg.get("vocab_size"), "n_positions", cfg.get("n_positions"))
sys.exit(0 if ok and len(h) == len(w) else 1)
PYEOF
}

lm_bad_files() {
    "$PY" - "$WORK/lm" <<'PYEOF'
import sys, numpy as np
w = sys.argv[1]
t = np.load(w + "/tok.npy")
a = t.copy(); a[3, 2] = 49; np.save(w + "/tok_big.npy", a)
a = t.copy(); a[0, 1] = -1; np.save(w + "/tok_neg.npy", a)
np.save(w + "/tok_f32.npy", t.astype(np.float32))
np.save(w + "/tok_shape.npy", t[:6])
PYEOF
}

# the block runs when the filter names lm, or help (tests/help.sh's checks, sourced at its end, run on its programs)
if [ -z "$filter" ] || [[ "$filter" == *lm* ]] || [[ "$filter" == *help* ]]; then
    if lm_setup >"$WORK/log" 2>&1; then
        ok "lm: float64 reference (its backward checked against central differences), weights and tokens"
        for m in $LM_MESHES; do # a mesh none of whose checks is wanted is not built here (lm_train builds it on demand)
            q=${m%,*}
            d=${m#*,}
            n1="lm: mesh [$q,$q,$d] logits and loss match the float64 reference, planned bytes"
            n2="lm: mesh [$q,$q,$d] every gradient (wte, wpe, ln_f, blocks) matches lm-backward, planned bytes"
            n3="lm: mesh [$q,$q,$d] replicas bitwise identical after 3 AdamW steps"
            t1="lm: --timing files the vocab loss under its own kind, loss"
            t2="lm: --timing with --trace reports every step's kinds, not the recorded step's alone"
            t3="lm: --timing's seconds per step kind leave the warm-up step out"
            wanted "$n1" || wanted "$n2" || wanted "$n3" ||
                { [ "$q,$d" = 1,1 ] && { wanted "$t1" || wanted "$t2" || wanted "$t3"; }; } || continue
            if lm_train "$q" "$d" >"$WORK/log" 2>&1; then
                check "$n1" lm_logits "$q" "$d"
                check "$n2" lm_grads "$q" "$d"
                check "$n3" lm_replicas "$q" "$d"
                [ "$q,$d" = 1,1 ] && check "$t1" lm_timing_kind "$q" "$d"
                [ "$q,$d" = 1,1 ] && check "$t2" lm_timing_trace "$q" "$d"
                [ "$q,$d" = 1,1 ] && check "$t3" lm_timing_warmup "$q" "$d"
            else
                notok "lm: mesh [$q,$q,$d] generate and build" "$WORK/log"
            fi
        done
        for m in $LM_MB_MESHES; do # 2 micro-batches per step
            q=${m%,*}
            d=${m#*,}
            n1="lm: 2 micro-batches on [$q,$q,$d]: logits and loss match the float64 reference, planned bytes"
            n2="lm: 2 micro-batches on [$q,$q,$d]: every gradient matches lm-backward of the whole batch, planned bytes"
            n3="lm: 2 micro-batches on [$q,$q,$d]: replicas bitwise after 3 AdamW steps, losses within 1e-5 of one micro-batch's"
            wanted "$n1" || wanted "$n2" || wanted "$n3" || continue
            if lm_build_mb "$q" "$d" 2 >"$WORK/log" 2>&1; then
                check "$n1" lm_logits "$q" "$d" mb2
                check "$n2" lm_grads "$q" "$d" mb2
                check "$n3" lm_mb_steps "$q" "$d" 2
            else
                notok "lm: 2 micro-batches on [$q,$q,$d]: generate and build" "$WORK/log"
            fi
        done
        check "lm: 20-step losses equal across meshes, falling, tracking the float64 reference" lm_losses
        check "lm: 2 training steps write the same weights bit for bit on 1, 2 and 3 kernel threads" \
            lm_threads_bitwise
        for m in 2,1 2,2 3,1; do
            check "lm: mesh [${m%,*},${m%,*},${m#*,}] measured bytes of embedding, head and loss equal docs/MODEL.md" \
                lm_bytes_formula "${m%,*}" "${m#*,}"
        done
        check "lm: --tokens refused by a block stack, --input by a language model" lm_wrong_options
        check "lm: an inference program prints the loss and writes the reference logits" lm_infer
        check "lm: vocab_align = 8 on [1,1,1] (Vq 56): logits, loss and every gradient match the reference, planned bytes, V rows written" \
            lm_align 1 1 56
        check "lm: vocab_align = 8 on [2,2,1] (Vq 32): logits, loss and every gradient match the reference, planned bytes, V rows written" \
            lm_align 2 1 32
        check "lm: mesh [2,2,2] placement col: logits match the reference, planned bytes" lm_placed col
        check "lm: mesh [2,2,2] placement dep: logits match the reference, planned bytes" lm_placed dep
        check "lm: transformer.-prefixed names load (lm_head unread); --weights-out read back gives the same loss" \
            lm_hf_roundtrip
        check "lm: synthetic tokens from --seed are deterministic" lm_synthetic
        check "lm: --hf-out writes wte, wpe, ln_f as transformer.* with vocab_size and n_positions" lm_hf_out
        if lm_bad_files >"$WORK/log" 2>&1; then
            check "lm: a token id >= vocab is refused naming file, index and value" lm_refused --tokens \
                "$WORK/lm/tok_big.npy" "tok_big.npy: tokens[3, 2] = 49 is not a token id: every id must be in [0, 49)"
            check "lm: a negative target id is refused" lm_refused --targets "$WORK/lm/tok_neg.npy" \
                "tok_neg.npy: targets[0, 1] = -1 is not a token id"
            check "lm: float32 token ids are refused (int32 only)" lm_refused --tokens "$WORK/lm/tok_f32.npy" \
                "only '<i4' (little-endian int32) is supported"
            check "lm: token ids of the wrong shape are refused" lm_refused --tokens "$WORK/lm/tok_shape.npy" \
                "expected (batch, seq) = (12, 4)"
            "$PY" $LM_REF weights --layers 2 --hidden 24 --heads 6 --ffn 48 --seq 4 --batch 12 --seed 1 \
                --out "$WORK/lm/blocks.st" >/dev/null
            check "lm: weights of a block stack are refused in one line naming both models" lm_refused_one --weights \
                "$WORK/lm/blocks.st" "blocks.st: these weights are another model: the file holds 2 layers, hidden 24, ffn 48 (blocks only, no embedding); this program (lm_q2_d1_train) was built for 2 layers, hidden 24, ffn 48, vocab 49, 6 positions"
            "$PY" $LM_REF lm-weights --layers 3 --hidden 24 --heads 6 --ffn 48 --seq 4 --batch 12 --vocab 50 \
                --positions 6 --seed 1 --out "$WORK/lm/v50.st" >/dev/null
            check "lm: weights of a larger vocabulary and depth are refused in one line" lm_refused_one --weights \
                "$WORK/lm/v50.st" "the file holds 3 layers, hidden 24, ffn 48, vocab 50, 6 positions; this program"
            lm_mesh_ok 2 2 &&
                check "lm: mesh [2,2,2] under ASan+UBSan: gradients, bytes, --stats; a bad token file exits cleanly" lm_asan
        else
            notok "lm: bad token files" "$WORK/log"
        fi
        . tests/lmdata.sh # training from token shards, on the builds above
        . tests/help.sh   # each program's --help, on the builds above and e2e's and train's
    else
        notok "lm: float64 reference (its backward checked against central differences), weights and tokens" "$WORK/log"
    fi
fi
