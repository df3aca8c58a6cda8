# tests/bf16.sh - sourced by tests/e2e.sh after its reference inputs exist: BF16
# safetensors files (issue 9 item 3) against the numpy reference, which rounds
# float32 bits to bf16 with its own integer arithmetic (tessref.py bf16).
#   loading   BF16 weights (all tensors, and a mixed F32/BF16 file) give
#             bitwise the output of the F32 file holding the same values, and
#             the float64 reference's output for them within 1e-4, on [1,1,1]
#             and [2,2,2]; F16 and a BF16 tensor with an F32-sized byte span
#             are refused
#   writing   --weights-out after 3 AdamW steps and --grads-out of one
#             backward with --out-dtype bf16 equal, bit for bit, the
#             reference's rounding of the same run's F32 file
# It builds what it needs that the checks before it did not ([1,1,1] and
# [2,2,2] inference programs, a [2,2,2] training program).
BW="$WORK/bf16"
mkdir -p "$BW"

bf16_setup() {
    "$PY" $REF bf16 --in "$WORK/w.safetensors" --out "$BW/w16.st" --f32-out "$BW/w16f.st" &&
        "$PY" $REF bf16 --in "$WORK/w.safetensors" --out "$BW/wmix.st" --f32-out "$BW/wmixf.st" \
            --only h.0.attn.c_attn.weight h.0.ln_1.bias h.1.mlp.c_proj.weight h.1.ln_2.weight &&
        "$PY" $REF forward $DIMS --weights "$BW/w16.st" --input "$WORK/x.npy" --out "$BW/ref16.npy" &&
        "$PY" $REF forward $DIMS --weights "$BW/wmix.st" --input "$WORK/x.npy" --out "$BW/refmix.npy" &&
        "$PY" $REF input $DIMS --seed 4 --out "$BW/target.npy" &&
        "$PY" $REF dy $DIMS --seed 3 --out "$BW/dy.npy" &&
        { [ -x "$WORK/e2e_1_1/bin/model" ] || e2e_build 1 1; } &&
        { [ -x "$WORK/e2e_2_2/bin/model" ] || e2e_build 2 2; } &&
        if [ -x "$WORK/train_2_2/bin/model" ]; then
            ln -sfn "$WORK/train_2_2" "$BW/train"
        else
            cat >"$BW/train.lua" <<SPEC &&
return {
  name = "bf16_train", mode = "train",
  mesh = { q = 2, d = 2 },
  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 12, eps = 1e-5 },
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },
}
SPEC
                bin/tessgen "$BW/train.lua" -o "$BW/train" --quiet && ninja -C "$BW/train" >/dev/null
        fi
}

# the files differ where the rounding bites, so equal outputs below mean the BF16 bits were read
bf16_rounded() {
    ! cmp -s "$WORK/w.safetensors" "$BW/w16f.st" &&
        ! "$PY" $REF compare --ref "$WORK/ref.npy" --got "$BW/ref16.npy" --tol 1e-6 --label "f32 vs bf16 weights"
}

# bf16_same q d NAME: weights NAME.st (BF16 tensors) and NAMEf.st (F32, the same values) give bitwise the same
# output, and that output is the float64 reference's for those values
bf16_same() {
    local dir="$WORK/e2e_$1_$2"
    poison "$BW/y_$3.npy" && poison "$BW/yf_$3.npy" &&
        "$dir/run" --weights "$BW/$3.st" --input "$WORK/x.npy" --output "$BW/y_$3.npy" --quiet &&
        "$dir/run" --weights "$BW/$3f.st" --input "$WORK/x.npy" --output "$BW/yf_$3.npy" --quiet &&
        "$PY" $REF compare --ref "$BW/ref${3#w}.npy" --got "$BW/y_$3.npy" --tol 1e-4 --expect-f32 \
            --label "[$1,$1,$2] $3" &&
        cmp "$BW/y_$3.npy" "$BW/yf_$3.npy"
}

# bf16_refused RC WANT ARGS...: the [2,2,2] run exits RC, says WANT, writes no output
bf16_refused() {
    local want_rc=$1 want=$2
    shift 2
    rm -f "$BW/never.npy"
    "$WORK/e2e_2_2/run" --output "$BW/never.npy" --quiet "$@" >"$BW/run.out" 2>"$BW/run.err"
    local rc=$?
    cat "$BW/run.err"
    [ $rc -eq "$want_rc" ] || { echo "exit $rc, want $want_rc"; return 1; }
    grep -qF -- "$want" "$BW/run.err" || { echo "message lacks: $want"; return 1; }
    [ ! -e "$BW/never.npy" ] || { echo "an output was written"; return 1; }
}

# bf16_out OPTION ARGS...: the run with OPTION F.st, then with --out-dtype bf16 OPTION F16.st; the second file
# is the reference's rounding of the first, bit for bit
bf16_out() {
    local opt=$1
    shift
    rm -f "$BW/o32.st" "$BW/o16.st" "$BW/o16ref.st"
    "$BW/train/run" --weights "$WORK/w.safetensors" --input "$WORK/x.npy" "$@" "$opt" "$BW/o32.st" --quiet &&
        "$BW/train/run" --weights "$WORK/w.safetensors" --input "$WORK/x.npy" "$@" "$opt" "$BW/o16.st" \
            --out-dtype bf16 --quiet &&
        "$PY" $REF bf16 --in "$BW/o32.st" --out "$BW/o16ref.st" &&
        "$PY" $REF same-bits "$BW/o16.st" "$BW/o16ref.st" | tee "$BW/same.out" &&
        grep -q "same-bits: 24 tensors (BF16), 0 differ OK" "$BW/same.out" &&
        [ "$(stat -c %s "$BW/o16.st")" -lt "$(stat -c %s "$BW/o32.st")" ]
}

# the BF16 weights written after training load again and run
bf16_reload() {
    poison "$BW/yr.npy" &&
        "$BW/train/run" --weights "$BW/o16.st" --input "$WORK/x.npy" --output "$BW/yr.npy" --quiet &&
        "$PY" -c "import numpy as np, sys; y = np.load(sys.argv[1]); sys.exit(0 if np.isfinite(y).all() else 1)" \
            "$BW/yr.npy"
}

if wanted "bf16"; then
    if bf16_setup >"$WORK/log" 2>&1; then
        ok "bf16: reference BF16 weights (all tensors, and mixed), their forward, programs built"
        check "bf16: the reference's BF16 rounding changes the weights and the output" bf16_rounded
        check "bf16: mesh [1,1,1] BF16 weights give bitwise the output of the F32 file of the same values, and the float64 reference's" \
            bf16_same 1 1 w16
        check "bf16: mesh [2,2,2] BF16 weights give bitwise the output of the F32 file of the same values, and the float64 reference's" \
            bf16_same 2 2 w16
        check "bf16: mesh [2,2,2] a mixed F32/BF16 file gives bitwise the output of the F32 file of the same values" \
            bf16_same 2 2 wmix
        "$PY" tests/ref/mkbad.py f16 "$WORK/w.safetensors" "$BW/f16.st" h.0.attn.c_proj.weight
        check "bf16: an F16 tensor is refused, naming the tensor, its dtype and what is accepted" bf16_refused 1 \
            "tensor h.0.attn.c_proj.weight has dtype F16; only F32 and BF16 are accepted" --weights "$BW/f16.st" \
            --input "$WORK/x.npy"
        "$PY" tests/ref/mkbad.py bf16-span "$WORK/w.safetensors" "$BW/span.st" h.1.ln_1.weight
        check "bf16: a BF16 tensor whose data_offsets span 4 bytes per element is refused" bf16_refused 1 \
            "tensor h.1.ln_1.weight: header lies: data_offsets" --weights "$BW/span.st" --input "$WORK/x.npy"
        check "bf16: --out-dtype takes f32 or bf16 only" bf16_refused 2 "--out-dtype f16: expected f32 or bf16" \
            --weights-out "$BW/never.st" --out-dtype f16
        check "bf16: --out-dtype without --weights-out or --grads-out is refused" bf16_refused 2 \
            "--out-dtype sets the dtype of --weights-out and --grads-out" --out-dtype bf16
        check "bf16: mesh [2,2,2] --weights-out --out-dtype bf16 after 3 AdamW steps is the reference rounding of the F32 file, bit for bit" \
            bf16_out --weights-out --target "$BW/target.npy" --steps 3
        check "bf16: mesh [2,2,2] the BF16 weights written after training load and run" bf16_reload
        check "bf16: mesh [2,2,2] --grads-out --out-dtype bf16 is the reference rounding of the F32 gradients, bit for bit" \
            bf16_out --grads-out --dy "$BW/dy.npy"
    else
        notok "bf16: reference BF16 weights (all tensors, and mixed), their forward, programs built" "$WORK/log"
    fi
fi
