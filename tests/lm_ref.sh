# tests/lm_ref.sh - sourced by tests/lm.sh, tests/megatron_lm.sh and tests/bf16_compute.sh (each also runs alone:
# TESS_TEST_GROUPS=megatron_lm): the language model they check, its dimensions for tests/ref/tessref.py, its spec
# (lm_spec), lm_poison, and lm_ref_files, which writes its weights, tokens, targets and the float64 reference's
# results. Definitions only: sourcing it twice changes nothing.
LM_DIMS="--layers 2 --hidden 24 --heads 6 --ffn 48 --seq 4 --batch 12 --vocab 49 --positions 6"
LM_REF=tests/ref/tessref.py

lm_spec() { # q d mode [novocab]
    local lm=", vocab = 49, positions = 6"
    [ -n "${4:-}" ] && lm=""
    cat <<SPEC
return {
  name = "lm_q$1_d$2_$3", mode = "$3",
  mesh = { q = $1, d = $2 },
  model = { layers = 2, hidden = 24, heads = 6, ffn = 48, seq = 4, batch = 12, eps = 1e-5$lm },
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },
}
SPEC
}

lm_poison() { "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((12, 4, 49), np.nan, np.float32))" "$1"; }

# lm_ref_files DIR: the model's weights, tokens and targets, and the reference's logits, loss, gradients and
# 20-step losses into DIR
lm_ref_files() {
    local W=$1
    mkdir -p "$W" &&
        "$PY" $LM_REF lm-weights $LM_DIMS --seed 21 --out "$W/w.st" &&
        "$PY" $LM_REF tokens --batch 12 --seq 4 --vocab 49 --seed 1 --out "$W/tok.npy" &&
        "$PY" $LM_REF tokens --batch 12 --seq 4 --vocab 49 --seed 2 --out "$W/tgt.npy" &&
        "$PY" $LM_REF lm-forward $LM_DIMS --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" \
            --logits-out "$W/logits_ref.npy" >"$W/loss_ref.txt" &&
        "$PY" $LM_REF lm-backward $LM_DIMS --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" \
            --grads-out "$W/g_ref.st" >/dev/null &&
        "$PY" $LM_REF lm-train $LM_DIMS --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" \
            --steps 20 --lr 1e-3 >"$W/train_ref.txt"
}
