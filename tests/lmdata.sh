# tests/lmdata.sh - sourced by tests/lm.sh (its model, weights and builds): a language model trained from token
# shards, `run --data P [--val-data P --val-every N --val-batches M]` (runtime/tr_lmdata.c, docs/TRAINING.md).
# The shard is written here by hand in llm.c's format (not by scripts/mkshard.py or the loader's code), and each
# batch is sliced here from the raw stream by llm.c's rule (batch b of an epoch: tokens b*B*S .. b*B*S+B*S as
# inputs, shifted by one as targets; 3 batches per epoch and a 5-token tail that is never read):
#   val      the validation loss before the first step ("val step 0") equals the mean of the float64 reference's
#            loss (lm-forward) over the first 3 batches sliced here, on [1,1,1], [2,2,1], [2,2,2], [3,3,1]
#   batches  4 steps with --data (the 4th wraps to the next epoch) give bitwise the losses and weights of a
#            chain of 4 one-step runs on --tokens/--targets files of the batches sliced here (each resuming the
#            previous one's checkpoint): every rank reads exactly its sequences of exactly llm.c's batches
#   resume   4 steps straight = 2 steps, checkpoint (holding the loader's position), resume 2 steps: bitwise
#   refused  a shard with a bad magic, a token id >= vocab inside a shard, a checkpoint of another shard set,
#            a checkpoint resumed on other data than it recorded (without --data, with other token files) unless
#            --data-change, --tokens without --targets, and options that do not fit: each exits non-zero with its
#            message and writes nothing
LMD_B=12
LMD_S=4

lmd_setup() {
    local W="$WORK/lm/data"
    mkdir -p "$W" && "$PY" - "$W" "$LMD_B" "$LMD_S" <<'PYEOF'
import struct, sys
import numpy as np
w, B, S = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = 3 * B * S + 1 + 5                      # 3 batches per epoch, a tail of 5 tokens the rule skips
rng = np.random.default_rng(7)
tok = rng.integers(0, 49, n).astype(np.uint16)
def shard(path, t, magic=20240520):
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", magic, 1, len(t), *([0] * 253)))
        f.write(t.astype("<u2").tobytes())
shard(w + "/train.bin", tok)
shard(w + "/other.bin", tok[::-1].copy())
shard(w + "/badmagic.bin", tok, magic=20240521)
big = tok.copy(); big[2 * B * S + 7] = 60   # inside batch 2: read at step 3
shard(w + "/bigtok.bin", big)
for e in range(2):                          # the batches of two epochs, llm.c's rule
    for b in range(3):
        o = b * B * S
        np.save("%s/tok_%d.npy" % (w, 3 * e + b), tok[o:o + B * S].astype(np.int32).reshape(B, S))
        np.save("%s/tgt_%d.npy" % (w, 3 * e + b), tok[o + 1:o + B * S + 1].astype(np.int32).reshape(B, S))
PYEOF
    local b
    for b in 0 1 2; do
        "$PY" $LM_REF lm-forward $LM_DIMS --weights "$WORK/lm/w.st" --tokens "$W/tok_$b.npy" --targets "$W/tgt_$b.npy" \
            --logits-out "$W/ref_logits_$b.npy" >"$W/ref_loss_$b.txt" || return 1
    done
}

lmd_val() { # q d
    local W="$WORK/lm/data" dir="$WORK/lm/train_$1_$2"
    lm_train "$1" "$2" || return 1 # tests/lm.sh: built on first use
    "$dir/run" --weights "$WORK/lm/w.st" --data "$W/train.bin" --val-data "$W/train.bin" --val-batches 3 \
        --steps 1 >"$W/val_$1_$2.out" &&
        "$PY" - "$W" "$W/val_$1_$2.out" <<'PYEOF'
import re, sys
w, out = sys.argv[1], open(sys.argv[2]).read()
ref = []
for b in range(3):
    m = re.search(r"loss\s+([-+0-9.eE]+)", open("%s/ref_loss_%d.txt" % (w, b)).read())
    ref.append(float(m.group(1)))
want = sum(ref) / 3
got = float(re.search(r"^val step 0 loss (\S+)$", out, re.M).group(1))
err = abs(got - want) / abs(want)
print("val loss %.9g, reference mean over 3 batches %.9g, rel err %.2e" % (got, want, err))
sys.exit(0 if err < 1e-5 else 1)
PYEOF
}

# The runs whose files later checks read, each also made there when the check that makes it did not run (a filter),
# so that every check runs alone: 4 steps on --data (the weights wd_Q_D.st: lmd_batches, lmd_resume)
lmd_data4() { # q d
    local W="$WORK/lm/data"
    lm_train "$1" "$2" &&
        "$WORK/lm/train_$1_$2/run" --weights "$WORK/lm/w.st" --data "$W/train.bin" --steps 4 \
            --weights-out "$W/wd_$1_$2.st" >"$W/d_$1_$2.out"
}

# 2 steps on --data and their checkpoint r2_Q_D.st (lmd_resume; on [2,2,1] the refusals and --data-change)
lmd_ckpt2() { # q d
    local W="$WORK/lm/data"
    lm_train "$1" "$2" &&
        "$WORK/lm/train_$1_$2/run" --weights "$WORK/lm/w.st" --data "$W/train.bin" --steps 2 \
            --checkpoint-out "$W/r2_$1_$2.st" --quiet
}

# the first link of lmd_batches's chain: one step on the files of batch 0 and its checkpoint c0_Q_D.st
lmd_chain0() { # q d
    local W="$WORK/lm/data"
    lm_train "$1" "$2" &&
        "$WORK/lm/train_$1_$2/run" --weights "$WORK/lm/w.st" --tokens "$W/tok_0.npy" --targets "$W/tgt_0.npy" \
            --steps 1 --checkpoint-out "$W/c0_$1_$2.st"
}

# lmd_with_r2 CMD... / lmd_with_c0 CMD...: CMD once [2,2,1]'s checkpoint r2 / c0 exists
lmd_with_r2() { { [ -s "$WORK/lm/data/r2_2_1.st" ] || lmd_ckpt2 2 1; } && "$@"; }
lmd_with_c0() { { [ -s "$WORK/lm/data/c0_2_1.st" ] || lmd_chain0 2 1; } && "$@"; }

lmd_batches() { # q d
    local W="$WORK/lm/data" dir="$WORK/lm/train_$1_$2" s prev=""
    lmd_data4 "$1" "$2" || return 1
    : >"$W/chain_$1_$2.out"
    for s in 0 1 2 3; do
        local start="--weights $WORK/lm/w.st" last=""
        [ -n "$prev" ] && start="--resume $prev"
        [ "$s" = 3 ] && last="--weights-out $W/wc_$1_$2.st"
        # shellcheck disable=SC2086
        [ -n "$prev" ] && start="$start --data-change" # each step on the next batch's files
        "$dir/run" $start --tokens "$W/tok_$s.npy" --targets "$W/tgt_$s.npy" --steps 1 \
            --checkpoint-out "$W/c${s}_$1_$2.st" $last >>"$W/chain_$1_$2.out" || return 1
        prev="$W/c${s}_$1_$2.st"
    done
    diff <(awk '/^step /{print $2, $4}' "$W/d_$1_$2.out") <(awk '/^step /{print $2, $4}' "$W/chain_$1_$2.out") &&
        [ "$(grep -c '^step ' "$W/d_$1_$2.out")" = 4 ] && cmp "$W/wd_$1_$2.st" "$W/wc_$1_$2.st"
}

lmd_resume() { # q d
    local W="$WORK/lm/data" dir="$WORK/lm/train_$1_$2"
    lmd_ckpt2 "$1" "$2" && { [ -s "$W/wd_$1_$2.st" ] || lmd_data4 "$1" "$2"; } &&
        "$dir/run" --resume "$W/r2_$1_$2.st" --data "$W/train.bin" --steps 2 --weights-out "$W/wr_$1_$2.st" \
            --quiet &&
        grep -aq 'offset=96 epoch=0 batches=2' "$W/r2_$1_$2.st" && grep -aqF "\"data\":\"--data $W/train.bin\"" "$W/r2_$1_$2.st" &&
        cmp "$W/wd_$1_$2.st" "$W/wr_$1_$2.st"
}

# lmd_refused WANT ARGS...: exits non-zero, prints WANT, writes no --weights-out
lmd_refused() {
    local want=$1 dir="$WORK/lm/train_2_1" out="$WORK/lm/data/refused.st"
    shift
    lm_train 2 1 || return 1
    rm -f "$out"
    if "$dir/run" "$@" --weights-out "$out" >"$WORK/lm/data/refused.out" 2>&1; then
        echo "accepted: $*"
        return 1
    fi
    cat "$WORK/lm/data/refused.out"
    grep -qF -- "$want" "$WORK/lm/data/refused.out" && [ ! -e "$out" ]
}

# --data-change: the override is said, and the checkpoint written records this run's data
lmd_data_change() {
    local W="$WORK/lm/data" dir="$WORK/lm/train_2_1"
    lm_train 2 1 || return 1
    "$dir/run" --resume "$W/r2_2_1.st" --steps 1 --data-change --checkpoint-out "$W/dc.st" >"$W/dc.out" || return 1
    cat "$W/dc.out"
    grep -qF "note: --data-change: the checkpoint was trained on --data $W/train.bin; this run trains on synthetic data" \
        "$W/dc.out" && grep -aqF '"data":"synthetic"' "$W/dc.st"
}

if lmd_setup >"$WORK/log" 2>&1; then
    ok "lm data: a shard written by hand, its batches sliced by llm.c's rule, the reference's loss of each"
    for m in 1,1 2,1 2,2 3,1; do
        lm_mesh_ok "${m%,*}" "${m#*,}" || continue
        check "lm data: mesh [${m%,*},${m%,*},${m#*,}] validation loss = the reference's mean over 3 batches" \
            lmd_val "${m%,*}" "${m#*,}"
    done
    for m in 1,1 2,1 2,2; do
        lm_mesh_ok "${m%,*}" "${m#*,}" || continue
        check "lm data: mesh [${m%,*},${m%,*},${m#*,}] 4 steps on --data = 4 one-step runs on the sliced batches, bitwise" \
            lmd_batches "${m%,*}" "${m#*,}"
        check "lm data: mesh [${m%,*},${m%,*},${m#*,}] resume keeps the loader's position: bitwise" \
            lmd_resume "${m%,*}" "${m#*,}"
    done
    if lm_mesh_ok 2 1; then
        D="$WORK/lm/data"
        check "lm data: a shard with a bad magic is refused" lmd_refused "badmagic.bin" \
            --weights "$WORK/lm/w.st" --data "$D/badmagic.bin" --steps 1
        check "lm data: a token id >= vocab inside a shard is refused naming file, index and value" lmd_refused \
            "bigtok.bin" --weights "$WORK/lm/w.st" --data "$D/bigtok.bin" --steps 3
        check "lm data: a checkpoint's position on another shard set is refused" lmd_with_r2 lmd_refused "other.bin" \
            --resume "$D/r2_2_1.st" --data "$D/other.bin" --steps 1
        check "lm data: a checkpoint trained on --data, resumed without it, is refused naming the option to pass" \
            lmd_with_r2 lmd_refused "r2_2_1.st: the checkpoint was trained on --data $D/train.bin, but this run would train on synthetic data from the seed (no data option): pass --data $D/train.bin" \
            --resume "$D/r2_2_1.st" --steps 1
        check "lm data: a checkpoint trained on token files, resumed on others, is refused naming them" \
            lmd_with_c0 lmd_refused "c0_2_1.st: the checkpoint was trained on --tokens $D/tok_0.npy --targets $D/tgt_0.npy, but this run would train on --tokens $D/tok_1.npy" \
            --resume "$D/c0_2_1.st" --tokens "$D/tok_1.npy" --targets "$D/tgt_1.npy" --steps 1
        check "lm data: --data-change resumes a --data checkpoint on synthetic tokens, saying so" \
            lmd_with_r2 lmd_data_change
        check "lm data: --tokens without --targets is refused for training, naming --targets" lmd_refused \
            "--tokens without --targets: the training loss reads the token ids and their targets" \
            --weights "$WORK/lm/w.st" --tokens "$D/tok_0.npy" --steps 1
        check "lm data: --data without --steps is refused" lmd_refused "--data P with --steps N" \
            --weights "$WORK/lm/w.st" --data "$D/train.bin"
        check "lm data: --data with --tokens is refused" lmd_refused "exclude each other" \
            --weights "$WORK/lm/w.st" --data "$D/train.bin" --tokens "$D/tok_0.npy" --steps 1
        check "lm data: --val-every without --val-data is refused" lmd_refused "add --val-data" \
            --weights "$WORK/lm/w.st" --data "$D/train.bin" --val-every 2 --steps 1
        unset D
    fi
else
    notok "lm data: a shard written by hand, its batches sliced by llm.c's rule, the reference's loss of each" \
        "$WORK/log"
fi
