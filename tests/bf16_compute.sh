# tests/bf16_compute.sh - sourced by tests/run.sh when the filter names "bf16" (or is empty): dtype = "bf16"
# programs (docs/BF16.md) against two independent references, tests/ref/tessref.py in float64 with and without
# --bf16 (--bf16 rounds to bf16, round to nearest even, exactly where docs/BF16.md says the program does, and
# computes everything else in float64).
#
# The model of tests/e2e.sh (2 layers, hidden 48, 12 heads, ffn 192, seq 8, batch 12). For each mesh of
# BF16_MESHES (by default the fp32 matrix, E2E_MESHES):
#   forward  an inference program (bf16 matrices, rounded on load): y within BF16_TOL_EMU of the --bf16
#            reference and within BF16_TOL_F64 of float64; measured bytes equal to the plan (--bytes)
#   grads    a training program, one forward + backward with --dy: dL/dx and every weight gradient within
#            BF16_TOL_EMU_G of the --bf16 reference and BF16_TOL_F64_G of float64; bytes as planned
#   replicas 5 AdamW steps with --replica-check: every shard bitwise identical to its replicas
#   half     the plan's broadcast bytes of every class are exactly half of the same spec in fp32, its all-reduce
#            and reduce bytes equal (manifest.json)
# then: 20 training steps on [1,1,1], [2,2,1], [2,2,2] track the --bf16 reference and the float64 one; the
# inference program's output equals the training program's forward bit for bit (rounded on load = cast before
# use); the whole GPT-2 (model.vocab) on [1,1,1] and [2,2,1] and the megatron scheme (p = 2) against --bf16;
# --weights-out from a bf16 inference program is refused.
#
# The tolerances (docs/BF16.md, "Tolerances"): a bf16 rounding has relative error at most u = 2^-8 = 3.9e-3, about
# u/sqrt(3) = 2.3e-3 in the norm of a large array, and the float64 reference without rounding differs from the --bf16
# one by 3.5e-3 (forward) and up to 8.4e-3 (one gradient) on this model (attention's GEMM operands rounded too,
# docs/BF16.md "Attention"): BF16_TOL_F64 = 1e-2 and BF16_TOL_F64_G = 2e-2 leave a factor of 2 to 3 while a schedule
# error (a wrong block, a missing bias, a wrong root) moves the result by far more. Against --bf16 the program differs
# only where its fp32 sums (instead of float64) push a value across a bf16 rounding boundary, one bf16 ulp on those
# elements, and the backward's casts of dY carry such flips into every gradient below: measured 1.9e-4 (forward;
# 1.5e-7 since attention rounds as --bf16 does) and up to 4.5e-4 (dL/dx) and 6.7e-4 (a layer-0 gradient) since the
# kept pre-activation u is bf16 on both sides (9.2e-4 and 1.4e-3 before); BF16_TOL_EMU = 1e-3 and BF16_TOL_EMU_G =
# 3e-3. The gradient checks see the backward's rounding points: a --bf16 that kept u unrounded is 3.1e-3 (dL/dx)
# and 4.8e-3 (h.0.ln_1.weight) from the program. The forward check is the sharp one (a rounding point missed or
# added moves the forward by ~2e-3); the LM's logits match --bf16 to 3e-8.
. tests/e2e_ref.sh # tests/e2e.sh's DIMS, REF, E2E_MESHES, poison (this file also runs alone)
. tests/lm_ref.sh  # tests/lm.sh's lm_spec, lm_poison, lm_ref_files, LM_DIMS, LM_REF (the whole GPT-2 checks)
BF16_MESHES=${TESS_BF16_MESHES:-$E2E_MESHES}
BF16_TOL_EMU=${TESS_BF16_TOL_EMU:-1e-3}
BF16_TOL_EMU_G=${TESS_BF16_TOL_EMU_G:-3e-3}
BF16_TOL_F64=${TESS_BF16_TOL_F64:-1e-2}
BF16_TOL_F64_G=${TESS_BF16_TOL_F64_G:-2e-2}
BW16="$WORK/bf16c"

bf16c_spec() { # q d mode [extra model keys] [scheme line]
    cat <<SPEC
return {
  name = "bf16c_q$1_d$2_$3", mode = "$3", dtype = "bf16",
  mesh = { q = $1, d = $2 },${5:+
  $5}
  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 12, eps = 1e-5${4:+, $4} },
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },
}
SPEC
}

bf16c_setup() {
    mkdir -p "$BW16" &&
        "$PY" $REF bf16-selftest >/dev/null &&
        "$PY" $REF weights $DIMS --seed 11 --out "$BW16/w.st" &&
        "$PY" $REF input $DIMS --seed 11 --out "$BW16/x.npy" &&
        "$PY" $REF dy $DIMS --seed 3 --out "$BW16/dy.npy" &&
        "$PY" $REF input $DIMS --seed 4 --out "$BW16/target.npy" &&
        for b in "" --bf16; do
            local t=${b:+emu}
            t=${t:-f64}
            "$PY" $REF forward $DIMS $b --weights "$BW16/w.st" --input "$BW16/x.npy" --out "$BW16/y_$t.npy" &&
                "$PY" $REF backward $DIMS $b --weights "$BW16/w.st" --input "$BW16/x.npy" --dy "$BW16/dy.npy" \
                    --dx-out "$BW16/dx_$t.npy" --grads-out "$BW16/g_$t.st" &&
                "$PY" $REF train $DIMS $b --weights "$BW16/w.st" --input "$BW16/x.npy" \
                    --target "$BW16/target.npy" --steps 20 --lr 1e-3 --beta1 0.9 --beta2 0.999 --adam-eps 1e-8 \
                    --weight-decay 0.01 >"$BW16/loss_$t.txt" || return 1
        done
}

bf16c_build() { # q d mode
    local dir="$BW16/$3_$1_$2"
    bf16c_spec "$1" "$2" "$3" >"$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null
}

# the inference program's forward, output poisoned first, into infer_Q_D/y.npy
bf16c_infer_run() { # q d
    local dir="$BW16/infer_$1_$2"
    poison "$dir/y.npy" &&
        "$dir/run" --weights "$BW16/w.st" --input "$BW16/x.npy" --output "$dir/y.npy" --bytes --quiet
}

# forward of the inference program against both references
bf16c_forward() { # q d
    local dir="$BW16/infer_$1_$2"
    bf16c_infer_run "$1" "$2" &&
        "$PY" $REF compare --ref "$BW16/y_emu.npy" --got "$dir/y.npy" --tol "$BF16_TOL_EMU" --expect-f32 \
            --label "bf16 [$1,$1,$2] forward vs --bf16" &&
        "$PY" $REF compare --ref "$BW16/y_f64.npy" --got "$dir/y.npy" --tol "$BF16_TOL_F64" --expect-f32 \
            --label "bf16 [$1,$1,$2] forward vs float64"
}

bf16c_grads() { # q d
    local dir="$BW16/train_$1_$2"
    poison "$dir/dx.npy" && rm -f "$dir/g.st" &&
        "$dir/run" --weights "$BW16/w.st" --input "$BW16/x.npy" --dy "$BW16/dy.npy" --dx-out "$dir/dx.npy" \
            --grads-out "$dir/g.st" --bytes --quiet &&
        "$PY" $REF compare --ref "$BW16/dx_emu.npy" --got "$dir/dx.npy" --tol "$BF16_TOL_EMU_G" --expect-f32 \
            --label "bf16 [$1,$1,$2] dx vs --bf16" &&
        "$PY" $REF compare --ref "$BW16/dx_f64.npy" --got "$dir/dx.npy" --tol "$BF16_TOL_F64_G" --expect-f32 \
            --label "bf16 [$1,$1,$2] dx vs float64" &&
        "$PY" $REF compare-grads --ref "$BW16/g_emu.st" --got "$dir/g.st" --tol "$BF16_TOL_EMU_G" \
            --label "bf16 [$1,$1,$2] vs --bf16" &&
        "$PY" $REF compare-grads --ref "$BW16/g_f64.st" --got "$dir/g.st" --tol "$BF16_TOL_F64_G" \
            --label "bf16 [$1,$1,$2] vs float64"
}

# the megatron scheme's bf16 inference program (its own planner: fc1's bias read from its bf16 copy, rounded once after
# loading, no cast of a weight in the forward; the GeLU output bf16 out of place, docs/BF16.md) against both
# references, output poisoned first
bf16c_megatron_infer() {
    local dir="$BW16/infer_mg2"
    bf16c_spec 2 1 infer "" 'scheme = "megatron",' | sed 's/mesh = { q = 2, d = 1 },/mesh = { p = 2 },/' >"$dir.lua" &&
        grep -q 'mesh = { p = 2 }' "$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null &&
        grep -q "bf16_w_h_[0-9]*_mlp_c_fc_bias" "$dir"/rank_i*_j0.c && ! grep -q "tr_cast_bf16(c, w_" "$dir"/rank_i*_j0.c &&
        poison "$dir/y.npy" &&
        "$dir/run" --weights "$BW16/w.st" --input "$BW16/x.npy" --output "$dir/y.npy" --bytes --quiet &&
        "$PY" $REF compare --ref "$BW16/y_emu.npy" --got "$dir/y.npy" --tol "$BF16_TOL_EMU" --expect-f32 \
            --label "bf16 megatron p=2 forward vs --bf16" &&
        "$PY" $REF compare --ref "$BW16/y_f64.npy" --got "$dir/y.npy" --tol "$BF16_TOL_F64" --expect-f32 \
            --label "bf16 megatron p=2 forward vs float64"
}

bf16c_replicas() { # q d
    local dir="$BW16/train_$1_$2"
    "$dir/run" --weights "$BW16/w.st" --input "$BW16/x.npy" --target "$BW16/target.npy" --steps 5 \
        --replica-check | tee "$BW16/rep.out" && grep -q "bitwise identical" "$BW16/rep.out"
}

# broadcast bytes of every class exactly half of the fp32 plan of the same spec; all-reduces and reduces equal
bf16c_half() { # q d mode
    local dir="$BW16/$3_$1_$2" f32="$BW16/$3_$1_$2_fp32"
    sed 's/dtype = "bf16"/dtype = "fp32"/' "$dir.lua" >"$f32.lua" && bin/tessgen "$f32.lua" -o "$f32" --quiet &&
        "$PY" - "$dir/manifest.json" "$f32/manifest.json" <<'PYEOF'
import json, sys
b, f = (json.load(open(p)) for p in sys.argv[1:3])
cb, cf = b["classes"], f["classes"]
ok = len(cb) == len(cf) and len(cb) > 0
for x, y in zip(cb, cf):
    for k in ("bcast_recv_bytes", "bcast_sent_bytes"):
        for g in x[k]:
            if 2 * x[k][g] != y[k][g]:
                print("class %s %s %s: bf16 %d, fp32 %d (want half)" % (x.get("program"), k, g, x[k][g], y[k][g])); ok = False
    for k in x:
        if k.endswith("_bytes") and k.startswith(("allreduce", "reduce", "bwd_allreduce", "bwd_reduce")) and x[k] != y[k]:
            print("class %s %s: bf16 %s, fp32 %s (want equal)" % (x.get("program"), k, x[k], y[k])); ok = False
print("broadcast bytes of class 0: bf16", cb[0]["bcast_recv_bytes"], "fp32", cf[0]["bcast_recv_bytes"])
sys.exit(0 if ok else 1)
PYEOF
}

# 20 steps on three meshes: equal across meshes (1e-3), within 1e-3 of the --bf16 reference and 1e-2 of float64
# at every step, falling. Why 1e-3 between meshes: their fp32 sums differ in order, and a bf16 rounding that one
# mesh takes and another does not moves that step's result by ~1e-4 (above); the AdamW steps carry it on.
bf16c_losses() {
    local m
    for m in 1_1 2_1 2_2; do
        "$BW16/train_$m/run" --weights "$BW16/w.st" --input "$BW16/x.npy" --target "$BW16/target.npy" \
            --steps 20 | grep '^step ' >"$BW16/loss_run_$m.txt" || return 1
    done
    "$PY" $REF compare-losses --label "bf16 losses" --mesh-tol 1e-3 --falling \
        --run "[1,1,1]=$BW16/loss_run_1_1.txt" --run "[2,2,1]=$BW16/loss_run_2_1.txt" \
        --run "[2,2,2]=$BW16/loss_run_2_2.txt" --ref "tessref --bf16=$BW16/loss_emu.txt=1e-3" \
        --ref "float64=$BW16/loss_f64.txt=1e-2"
}

# the inference program (matrices rounded on load) and the training program (fp32 masters cast before each use)
# compute the same forward: the same bits (the inference program's output of bf16c_forward, run here when that check
# did not)
bf16c_same_forward() {
    local dir="$BW16/train_2_1"
    { [ -s "$BW16/infer_2_1/y.npy" ] || bf16c_infer_run 2 1; } &&
        poison "$dir/y.npy" &&
        "$dir/run" --weights "$BW16/w.st" --input "$BW16/x.npy" --output "$dir/y.npy" --quiet &&
        cmp "$dir/y.npy" "$BW16/infer_2_1/y.npy"
}

# --stats plans each step with its element size: a bf16 broadcast 2 bytes an element (forward + backward)
bf16c_stats() {
    "$BW16/train_2_2/run" --weights "$BW16/w.st" --input "$BW16/x.npy" --dy "$BW16/dy.npy" --stats \
        >"$BW16/stats.out" 2>&1
    local rc=$?
    cat "$BW16/stats.out"
    [ $rc -eq 0 ] && grep -q "every step of every rank moved exactly its planned bytes" "$BW16/stats.out"
}

bf16c_refuses_weights_out() {
    local dir="$BW16/infer_2_1"
    rm -f "$BW16/never.st"
    "$dir/run" --weights "$BW16/w.st" --input "$BW16/x.npy" --weights-out "$BW16/never.st" --quiet \
        2>"$BW16/wo.err"
    local rc=$?
    cat "$BW16/wo.err"
    [ $rc -ne 0 ] && grep -q 'bf16-rounded' "$BW16/wo.err" && [ ! -e "$BW16/never.st" ]
}

bf16c_half_both() { bf16c_half "$1" "$2" infer && bf16c_half "$1" "$2" train; }

# the whole GPT-2 in bf16 (tests/lm.sh's model): logits and gradients against lm-forward/lm-backward --bf16
bf16c_lm() { # q d [mesh line that replaces the Tesseract one]
    local W="$BW16/lm" dir="$BW16/lm/train_$1_$2${3:+_mg}" mesh="mesh = { q = $1, d = $2 },"
    [ -n "${3:-}" ] && mesh=$3
    mkdir -p "$W" &&
        { [ -f "$W/w.st" ] || lm_ref_files "$W"; } &&
        { [ -f "$W/logits_emu.npy" ] ||
            { "$PY" $LM_REF lm-forward $LM_DIMS --bf16 --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" \
                --logits-out "$W/logits_emu.npy" >/dev/null &&
                "$PY" $LM_REF lm-backward $LM_DIMS --bf16 --weights "$W/w.st" --tokens "$W/tok.npy" \
                    --targets "$W/tgt.npy" --grads-out "$W/g_emu.st" >/dev/null; }; } &&
        lm_spec "$1" "$2" train | sed 's/mode = "train",/mode = "train", dtype = "bf16",/' |
        sed "s/mesh = { q = $1, d = $2 },/$mesh/" >"$dir.lua" &&
        grep -q 'dtype = "bf16"' "$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null &&
        lm_poison "$dir/logits.npy" &&
        "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --logits-out "$dir/logits.npy" \
            --bytes --quiet &&
        "$PY" $LM_REF compare --ref "$W/logits_emu.npy" --got "$dir/logits.npy" --tol "$BF16_TOL_EMU" \
            --label "bf16 LM [$1,$1,$2]${3:+ megatron} logits vs --bf16" &&
        "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --grads-out "$dir/g.st" --bytes \
            --quiet &&
        "$PY" $LM_REF compare-grads --ref "$W/g_emu.st" --got "$dir/g.st" --tol "$BF16_TOL_EMU_G" \
            --label "bf16 LM [$1,$1,$2]${3:+ megatron} vs --bf16"
}

# the whole GPT-2's bf16 inference program: its logits against lm-forward --bf16 (the training program's check made
# the reference), and no weight cast in its forward: the tied head reads wte's bf16 copy and fc1 its bias's, both
# rounded once after loading (the embedding reads the fp32 wte)
bf16c_lm_infer() { # q d [mesh line that replaces the Tesseract one]
    local W="$BW16/lm" dir="$BW16/lm/infer_$1_$2${3:+_mg}" mesh="mesh = { q = $1, d = $2 },"
    [ -n "${3:-}" ] && mesh=$3
    [ -f "$W/logits_emu.npy" ] &&
        lm_spec "$1" "$2" train | sed 's/mode = "train",/mode = "infer", dtype = "bf16",/' |
        sed "s/mesh = { q = $1, d = $2 },/$mesh/" >"$dir.lua" &&
        grep -q 'mode = "infer", dtype = "bf16"' "$dir.lua" && bin/tessgen "$dir.lua" -o "$dir" --quiet &&
        ninja -C "$dir" >/dev/null &&
        grep -q "bf16_w_wte_weight" "$dir"/rank_i0_j0.c && ! grep -q "tr_cast_bf16(c, w_" "$dir"/rank_i*_j*.c &&
        lm_poison "$dir/logits.npy" &&
        "$dir/run" --weights "$W/w.st" --tokens "$W/tok.npy" --targets "$W/tgt.npy" --logits-out "$dir/logits.npy" \
            --bytes --quiet &&
        "$PY" $LM_REF compare --ref "$W/logits_emu.npy" --got "$dir/logits.npy" --tol "$BF16_TOL_EMU" \
            --label "bf16 LM inference [$1,$1,$2]${3:+ megatron} logits vs --bf16"
}

if wanted "bf16"; then
    if [ -n "$PY" ] && bf16c_setup >"$WORK/bf16c_setup.log" 2>&1; then
        ok "bf16 compute: references (tessref --bf16 self-test, forward, backward, 20 steps; with and without --bf16)"
        for m in $BF16_MESHES; do
            q=${m%,*} d=${m#*,}
            if bf16c_build "$q" "$d" infer >"$WORK/log" 2>&1 && bf16c_build "$q" "$d" train >>"$WORK/log" 2>&1; then
                check "bf16 compute: [$q,$q,$d] forward within $BF16_TOL_EMU of --bf16 and $BF16_TOL_F64 of float64, bytes as planned" bf16c_forward "$q" "$d"
                check "bf16 compute: [$q,$q,$d] dL/dx and every weight gradient within $BF16_TOL_EMU_G of --bf16 and $BF16_TOL_F64_G of float64, bytes as planned" bf16c_grads "$q" "$d"
                check "bf16 compute: [$q,$q,$d] 5 AdamW steps, replicas bitwise identical" bf16c_replicas "$q" "$d"
                check "bf16 compute: [$q,$q,$d] broadcast bytes half of fp32 (inference and training), other collectives equal" bf16c_half_both "$q" "$d"
            else
                notok "bf16 compute: [$q,$q,$d] generate and build (inference and training)" "$WORK/log"
            fi
        done
        check "bf16 compute: 20-step losses on [1,1,1] [2,2,1] [2,2,2] equal across meshes, within 1e-3 of --bf16 and 1e-2 of float64" bf16c_losses
        check "bf16 compute: the inference program's output equals the training program's forward, bit for bit" bf16c_same_forward
        check "bf16 compute: megatron p=2 inference (fc1's bias from its bf16 copy, no cast of a weight) within $BF16_TOL_EMU of --bf16 and $BF16_TOL_F64 of float64, bytes as planned" bf16c_megatron_infer
        check "bf16 compute: --weights-out of a bf16 inference program is refused, nothing written" bf16c_refuses_weights_out
        check "bf16 compute: --stats of [2,2,2] forward + backward: every step moved its planned bytes (bf16 broadcasts 2 per element)" bf16c_stats
        check "bf16 compute: whole GPT-2 [1,1,1] logits and gradients against --bf16, bytes as planned" bf16c_lm 1 1
        check "bf16 compute: whole GPT-2 [2,2,1] logits and gradients against --bf16, bytes as planned" bf16c_lm 2 1
        check "bf16 compute: whole GPT-2, megatron p=2, logits and gradients against --bf16, bytes as planned" bf16c_lm 2 1 'scheme = "megatron", mesh = { p = 2 },'
        check "bf16 compute: whole GPT-2 inference [2,2,1] logits against --bf16, bytes as planned; its forward casts no weight (wte's and fc1's bias's bf16 copies rounded once after loading)" bf16c_lm_infer 2 1
        check "bf16 compute: whole GPT-2 inference, megatron p=2, logits against --bf16, bytes as planned; its forward casts no weight" bf16c_lm_infer 2 1 'scheme = "megatron", mesh = { p = 2 },'
    else
        notok "bf16 compute: references (tessref --bf16)" "$WORK/bf16c_setup.log"
    fi
fi
