# tests/hf.sh - sourced by tests/run.sh: Hugging Face in (issue 10 item 4).
#
# The float64 reference (tests/ref/tessref.py hf-dir) writes what
# GPT2LMHeadModel.save_pretrained writes: config.json with GPT-2's keys and
# model.safetensors with transformer.* names, wte, wpe and ln_f (tied LM head,
# so no lm_head.weight). tessgen --from-hf prints a spec for it; the spec is
# generated, built and run with --weights DIR/model.safetensors on two meshes
# and compared with the reference forward (outputs poisoned first). A config
# with layer_norm_epsilon 1e-6 and an input whose variance is near 1e-6 shows
# the eps is read: the run matches the reference at 1e-6 and not at 1e-5.
# Then every config value tessgen refuses (one case per rule), a weights file
# mixing the two name forms, and the command line's misuse. The block runs when
# TESS_TEST_FILTER (if set) matches the text "hf:".
HF_TG=build/asan/tessgen
HF_DIMS="--layers 2 --hidden 48 --heads 12 --ffn 192 --seq 8 --batch 12"
HF_REF=tests/ref/tessref.py
HF_HFPY=${TESS_HF_PYTHON:-$PY}

hf_poison() { "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((12, 8, 48), np.nan, np.float32))" "$1"; }

# hf_build DIR MESH OUT [--from-hf options...]: spec of the block stack (--blocks-only: input and output are
# hidden states, compared with the reference's block forward) from DIR, then generate and build into OUT
hf_build() {
    local dir=$1 mesh=$2 out=$3
    shift 3
    $HF_TG --from-hf "$dir" --mesh "$mesh" --seq 8 --batch 12 --blocks-only "$@" >"$out.lua" &&
        bin/tessgen "$out.lua" -o "$out" --quiet && ninja -C "$out" >/dev/null
}

hf_setup() {
    "$PY" $HF_REF hf-dir $HF_DIMS --seed 21 --out "$WORK/hf/gpt2-hf" &&
        "$PY" $HF_REF hf-dir $HF_DIMS --seed 22 --unprefixed --old-buffers --out "$WORK/hf/gpt2-base" &&
        "$PY" $HF_REF input $HF_DIMS --seed 21 --out "$WORK/hf/x.npy" &&
        "$PY" $HF_REF forward $HF_DIMS --weights "$WORK/hf/gpt2-hf/model.safetensors" --input "$WORK/hf/x.npy" \
            --out "$WORK/hf/ref.npy" &&
        "$PY" $HF_REF forward $HF_DIMS --weights "$WORK/hf/gpt2-base/model.safetensors" --input "$WORK/hf/x.npy" \
            --out "$WORK/hf/ref_base.npy"
}

# hf_run OUT WEIGHTS REF: poisoned output, run, compare with the reference
hf_run() {
    hf_poison "$1/y.npy" &&
        "$1/run" --weights "$2" --input "$WORK/hf/x.npy" --output "$1/y.npy" --bytes --quiet &&
        "$PY" $HF_REF compare --ref "$3" --got "$1/y.npy" --tol 1e-4 --expect-f32 --label "$1"
}

hf_spec_text() { # the printed spec has the config's dimensions, the directory's name, the mesh
    local s="$WORK/hf/s_1_1.lua"
    hf_have_1_1 && cat "$s"
    grep -q 'name = "gpt2-hf"' "$s" && grep -q "mesh = { q = 1, d = 1 }" "$s" &&
        grep -q "model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 12, eps = 1e-05 }" "$s" &&
        grep -q "Computed: the blocks only (--blocks-only): wte, wpe, ln_f and the LM head are not" "$s" &&
        grep -q "n_ctx = 32" "$s"
}

# the whole model (no --blocks-only): vocab and positions from the config; tessgen's logits of the
# save_pretrained file equal the float64 reference's GPT2LMHeadModel forward of the same directory
hf_whole() { # q d
    local out="$WORK/hf/w_$1_$2" w="$WORK/hf"
    $HF_TG --from-hf "$w/gpt2-hf" --mesh "$1,$2" --seq 8 --batch 12 --mode train >"$out.lua" &&
        grep -q "vocab = 96, positions = 32" "$out.lua" && grep -q "Computed: wte, wpe, the blocks, ln_f" "$out.lua" &&
        bin/tessgen "$out.lua" -o "$out" --quiet && ninja -C "$out" >/dev/null &&
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(9).integers(0, 96, (12, 8)).astype(np.int32))" \
            "$w/tok.npy" &&
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((12, 8, 96), np.nan, np.float32))" "$out/logits.npy" &&
        "$out/run" --weights "$w/gpt2-hf/model.safetensors" --tokens "$w/tok.npy" --logits-out "$out/logits.npy" \
            --quiet &&
        "$PY" $HF_REF lm-forward $HF_DIMS --dir "$w/gpt2-hf" --tokens "$w/tok.npy" --out "$w/ref_logits.npy" &&
        "$PY" $HF_REF compare --ref "$w/ref_logits.npy" --got "$out/logits.npy" --tol 1e-5 --label "whole model [$1,$1,$2]"
}

# --hf-out carries what save_pretrained of the tokenizer and the generation config wrote beside the weights (here the
# 23-token BPE of tests/ref/tiny_bpe.py and a generation_config.json), byte for byte, and names them; the same
# weights copied out of that directory carry nothing; an export holding carried files is replaced by the next
hf_carry() {
    local out="$WORK/hf/w_2_1" w="$WORK/hf" src="$WORK/hf/carry_src" e="$WORK/hf/carry_out" f
    [ -x "$out/run" ] || return 1
    rm -rf "$src" "$e" && mkdir -p "$src" && cp "$w/gpt2-hf/config.json" "$w/gpt2-hf/model.safetensors" "$src/" &&
        python3 tests/ref/tiny_bpe.py "$src" && printf '{"bos_token_id": 22, "eos_token_id": 22}\n' \
        >"$src/generation_config.json" && printf 'x' >"$src/training_args.bin" || return 1
    "$out/run" --weights "$src/model.safetensors" --steps 1 --tokens "$w/tok.npy" --targets "$w/tok.npy" \
        --hf-out "$e" >"$w/carry.out" || return 1
    cat "$w/carry.out"
    grep -qF "carried from $src: vocab.json, merges.txt, generation_config.json" "$w/carry.out" || return 1
    for f in vocab.json merges.txt generation_config.json; do cmp "$src/$f" "$e/$f" || return 1; done
    [ ! -e "$e/training_args.bin" ] || { echo "a file that is not the tokenizer's was carried"; return 1; }
    cp "$src/model.safetensors" "$w/elsewhere.safetensors" &&
        "$out/run" --weights "$w/elsewhere.safetensors" --steps 1 --tokens "$w/tok.npy" --targets "$w/tok.npy" \
            --hf-out "$e" >"$w/carry2.out" || { echo "the second export (onto one holding carried files) failed"; return 1; }
    cat "$w/carry2.out"
    ! grep -q "carried" "$w/carry2.out" && [ ! -e "$e/vocab.json" ] && [ -s "$e/model.safetensors" ]
}

# a file --hf-out would carry that cannot be carried (here tokenizer.json a directory) is refused before the first
# step, naming it, with nothing written: not after the training it would have ended
hf_carry_refused() {
    local out="$WORK/hf/w_2_1" w="$WORK/hf" src="$WORK/hf/carry_bad" e="$WORK/hf/carry_bad_out"
    [ -x "$out/run" ] || return 1
    rm -rf "$src" "$e" "$w/bad_w.st" && mkdir -p "$src/tokenizer.json" &&
        cp "$w/gpt2-hf/config.json" "$w/gpt2-hf/model.safetensors" "$src/" || return 1
    if "$out/run" --weights "$src/model.safetensors" --steps 2 --tokens "$w/tok.npy" --targets "$w/tok.npy" \
        --weights-out "$w/bad_w.st" --hf-out "$e" >"$w/carry_bad.out" 2>&1; then
        echo "an uncarryable tokenizer.json was accepted"; return 1
    fi
    cat "$w/carry_bad.out"
    grep -qF "$src/tokenizer.json is not a regular file: it cannot be carried into the export" "$w/carry_bad.out" &&
        grep -q "nothing was run" "$w/carry_bad.out" && ! grep -q "^step " "$w/carry_bad.out" &&
        [ ! -e "$e" ] && [ ! -e "$w/bad_w.st" ]
}

# in and out: the whole model from the save_pretrained directory, 3 AdamW steps, --hf-out; tessgen's logits of
# the export (read back as --weights DIR/model.safetensors) equal the reference's forward of that directory and,
# where transformers can be imported (TESS_HF_PYTHON), GPT2LMHeadModel.from_pretrained's logits of it
hf_roundtrip() {
    local out="$WORK/hf/w_2_1" w="$WORK/hf" e="$WORK/hf/export"
    [ -x "$out/run" ] || return 1
    rm -rf "$e" && "$out/run" --weights "$w/gpt2-hf/model.safetensors" --tokens "$w/tok.npy" --targets "$w/tok.npy" \
        --steps 3 --hf-out "$e" --quiet &&
        "$out/run" --weights "$e/model.safetensors" --tokens "$w/tok.npy" --logits-out "$e/tessgen_logits.npy" --quiet &&
        "$PY" $HF_REF lm-forward $HF_DIMS --dir "$e" --tokens "$w/tok.npy" --out "$e/ref_logits.npy" &&
        "$PY" $HF_REF compare --ref "$e/ref_logits.npy" --got "$e/tessgen_logits.npy" --tol 1e-5 --label "exported" &&
        ! cmp -s "$e/ref_logits.npy" "$w/ref_logits.npy" || return 1
    if "$HF_HFPY" -c "import transformers, torch" >/dev/null 2>&1; then
        "$HF_HFPY" tests/ref/hf_load.py --dir "$e" --tokens "$w/tok.npy" --out "$e/hf_logits.npy" &&
            "$PY" $HF_REF compare --ref "$e/hf_logits.npy" --got "$e/tessgen_logits.npy" --tol 1e-5 \
                --label "transformers vs tessgen"
    fi
}

hf_mesh() { # q d
    local out="$WORK/hf/s_$1_$2"
    hf_build "$WORK/hf/gpt2-hf" "$1,$2" "$out" && hf_run "$out" "$WORK/hf/gpt2-hf/model.safetensors" "$WORK/hf/ref.npy"
}

hf_base_names() { # GPT2Model names (no prefix) with the attn.bias buffers older versions saved: read as well
    hf_have_1_1 && hf_run "$WORK/hf/s_1_1" "$WORK/hf/gpt2-base/model.safetensors" "$WORK/hf/ref_base.npy"
}

hf_eps() { # layer_norm_epsilon 1e-6 reaches the spec and the run; an input of variance ~1e-6 makes eps matter
    local d="$WORK/hf/eps6" out="$WORK/hf/eps6_2_1"
    "$PY" $HF_REF hf-dir $HF_DIMS --eps 1e-6 --seed 23 --out "$d" &&
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[2], (np.load(sys.argv[1]) * 1e-3).astype(np.float32))" \
            "$WORK/hf/x.npy" "$WORK/hf/x_small.npy" &&
        "$PY" $HF_REF forward $HF_DIMS --eps 1e-6 --weights "$d/model.safetensors" --input "$WORK/hf/x_small.npy" \
            --out "$WORK/hf/ref_eps6.npy" &&
        "$PY" $HF_REF forward $HF_DIMS --eps 1e-5 --weights "$d/model.safetensors" --input "$WORK/hf/x_small.npy" \
            --out "$WORK/hf/ref_eps5.npy" &&
        hf_build "$d" 2,1 "$out" && grep -q "eps = 1e-06 }" "$out.lua" &&
        hf_poison "$out/y.npy" &&
        "$out/run" --weights "$d/model.safetensors" --input "$WORK/hf/x_small.npy" --output "$out/y.npy" --quiet &&
        "$PY" $HF_REF compare --ref "$WORK/hf/ref_eps6.npy" --got "$out/y.npy" --tol 1e-4 --expect-f32 \
            --label "eps 1e-6" &&
        ! "$PY" $HF_REF compare --ref "$WORK/hf/ref_eps5.npy" --got "$out/y.npy" --tol 1e-4 --label "eps 1e-5 (must differ)"
}

hf_have_1_1() { [ -x "$WORK/hf/s_1_1/run" ] || hf_build "$WORK/hf/gpt2-hf" 1,1 "$WORK/hf/s_1_1"; }

# a weights file mixing the two name forms, or holding one tensor under both, is refused naming them
hf_mixed() { # want mkbad-op tensor-args...
    local st="$WORK/hf/mixed.st" want=$1
    shift
    hf_have_1_1 && "$PY" tests/ref/mkbad.py "$1" "$WORK/hf/gpt2-hf/model.safetensors" "$st" "${@:2}" || return 1
    rm -f "$WORK/hf/never.npy"
    "$WORK/hf/s_1_1/run" --weights "$st" --input "$WORK/hf/x.npy" --output "$WORK/hf/never.npy" --quiet \
        >/dev/null 2>"$WORK/hf/mixed.err"
    local rc=$?
    cat "$WORK/hf/mixed.err"
    [ $rc -eq 1 ] && grep -qF -- "$want" "$WORK/hf/mixed.err" && [ ! -e "$WORK/hf/never.npy" ]
}

hf_nan_named() { # a NaN in a transformer.* file: the message names the tensor and its name in the file
    hf_have_1_1 &&
        "$PY" tests/ref/mkbad.py nan "$WORK/hf/gpt2-hf/model.safetensors" "$WORK/hf/nan.st" \
            transformer.h.1.mlp.c_fc.weight nan 3 5 || return 1
    "$WORK/hf/s_1_1/run" --weights "$WORK/hf/nan.st" --input "$WORK/hf/x.npy" --quiet >/dev/null 2>"$WORK/hf/nan.err"
    local rc=$?
    cat "$WORK/hf/nan.err"
    [ $rc -eq 1 ] && grep -qF "tensor h.1.mlp.c_fc.weight holds 1 non-finite value (NaN or inf), the first at [3, 5] (in the file: transformer.h.1.mlp.c_fc.weight)" "$WORK/hf/nan.err"
}

hf_train_names() { # a training run from a transformer.* file writes --weights-out with tessgen's names (h.*)
    local out="$WORK/hf/t_1_1"
    hf_build "$WORK/hf/gpt2-hf" 1,1 "$out" --mode train 2>"$WORK/hf/train.err" &&
        grep -q 'mode = "train"' "$out.lua" && grep -q "trains without dropout" "$WORK/hf/train.err" &&
        "$out/run" --weights "$WORK/hf/gpt2-hf/model.safetensors" --input "$WORK/hf/x.npy" --steps 1 \
            --weights-out "$WORK/hf/w_out.st" --quiet &&
        "$PY" -c "
import sys; sys.path.insert(0, 'tests/ref'); import tessref
names = sorted(tessref.read_safetensors(sys.argv[1]))
want = sorted(n for n, _ in tessref.tensor_specs(2, 48, 192))
print(names[:3]); sys.exit(names != want)" "$WORK/hf/w_out.st"
}

hf_megatron() { # the megatron form prints a spec the loader accepts
    $HF_TG --from-hf "$WORK/hf/gpt2-hf" --scheme megatron --mesh 4 --seq 8 --batch 12 >"$WORK/hf/mg.lua" &&
        grep -q 'scheme = "megatron"' "$WORK/hf/mg.lua" && grep -q "mesh = { p = 4 }" "$WORK/hf/mg.lua" &&
        bin/tessgen "$WORK/hf/mg.lua" --summary | head -1 | grep -q "megatron"
}

# hf_refused RC WANT ARGS...: tessgen exits RC, stderr has WANT, nothing on stdout
hf_refused() {
    local want_rc=$1 want=$2
    shift 2
    $HF_TG "$@" >"$WORK/hf/ref.out" 2>"$WORK/hf/ref.err"
    local rc=$?
    cat "$WORK/hf/ref.err"
    [ $rc -eq "$want_rc" ] || { echo "exit $rc, want $want_rc"; return 1; }
    grep -qF -- "$want" "$WORK/hf/ref.err" || { echo "message lacks: $want"; return 1; }
    [ ! -s "$WORK/hf/ref.out" ] || { echo "something was printed on stdout"; return 1; }
}

# hf_bad NAME WANT [--mesh M] -- HF-DIR-OPTIONS...: a config written with those options is refused (exit 1)
hf_bad() {
    local name=$1 want=$2 mesh=1,1
    shift 2
    if [ "$1" = --mesh ]; then mesh=$2; shift 2; fi
    "$PY" $HF_REF hf-dir $HF_DIMS --seed 1 --out "$WORK/hf/bad_$name" "$@" &&
        hf_refused 1 "$want" --from-hf "$WORK/hf/bad_$name" --mesh "$mesh" --seq 8 --batch 12
}

if wanted "hf:"; then
    rm -rf "$WORK/hf" && mkdir -p "$WORK/hf"
    if hf_setup >"$WORK/log" 2>&1; then
        ok "hf: reference save_pretrained directories, input and forward"
        check "hf: mesh [1,1,1] from --from-hf, --weights DIR/model.safetensors (transformer.*) matches the reference" \
            hf_mesh 1 1
        check "hf: spec printed by --from-hf has the config's dimensions, eps, the directory's name" hf_spec_text
        check "hf: mesh [2,2,2] from --from-hf matches the reference, planned bytes" hf_mesh 2 2
        check "hf: GPT2Model names (no prefix) with the old attn.bias buffers are read too" hf_base_names
        check "hf: layer_norm_epsilon 1e-6 gives eps 1e-6 and the run matches the reference at 1e-6, not 1e-5" hf_eps
        check "hf: mixed weights: prefixed and unprefixed block tensors are refused naming them" hf_mixed \
            "mixes block tensor names with and without the \"transformer.\" prefix (e.g. transformer.h.0.attn.c_attn.bias and h.1.ln_2.bias)" \
            rename transformer.h.1.ln_2.bias h.1.ln_2.bias
        check "hf: mixed weights: one tensor under both names is refused naming both" hf_mixed \
            "holds both h.0.mlp.c_fc.weight and transformer.h.0.mlp.c_fc.weight" \
            dup transformer.h.0.mlp.c_fc.weight h.0.mlp.c_fc.weight
        check "hf: a NaN weight in a transformer.* file is named as the file names it" hf_nan_named
        check "hf: --mode train prints mode train, warns about dropout; --weights-out keeps tessgen's names h.*" \
            hf_train_names
        check "hf: --scheme megatron --mesh P prints a megatron spec the loader accepts" hf_megatron
        check "hf: the whole model from --from-hf on [1,1,1]: logits equal the reference's GPT2LMHeadModel forward" \
            hf_whole 1 1
        check "hf: the whole model from --from-hf on [2,2,1]: logits equal the reference's GPT2LMHeadModel forward" \
            hf_whole 2 1
        check "hf: --hf-out carries the tokenizer and generation-config files of the weights' directory byte for byte; weights from elsewhere carry none" \
            hf_carry
        check "hf: a file --hf-out would carry but cannot (tokenizer.json a directory) is refused before the first step, naming it; nothing written" \
            hf_carry_refused
        if "$HF_HFPY" -c "import transformers, torch" >/dev/null 2>&1; then
            check "hf: in, 3 AdamW steps, --hf-out: the export's logits equal the reference's and transformers' (from_pretrained)" \
                hf_roundtrip
        else
            check "hf: in, 3 AdamW steps, --hf-out: the export's logits equal the reference's (transformers not importable: not compared)" \
                hf_roundtrip
        fi
    else
        notok "hf: reference save_pretrained directories, input and forward" "$WORK/log"
    fi

    # every config value tessgen cannot compute: exit 1, the key and the value named, nothing printed
    check "hf: refused: activation_function gelu (exact erf)" hf_bad act \
        'activation_function = "gelu" is not computed by tessgen' --set 'activation_function="gelu"'
    check "hf: refused: activation_function relu" hf_bad relu 'activation_function = "relu"' \
        --set 'activation_function="relu"'
    check "hf: refused: scale_attn_weights false" hf_bad scale 'scale_attn_weights = false is not computed' \
        --set scale_attn_weights=false
    check "hf: refused: scale_attn_by_inverse_layer_idx true" hf_bad inv \
        'scale_attn_by_inverse_layer_idx = true is not computed' --set scale_attn_by_inverse_layer_idx=true
    check "hf: refused: add_cross_attention true" hf_bad cross 'add_cross_attention = true is not computed' \
        --set add_cross_attention=true
    check "hf: refused: model_type other than gpt2" hf_bad mt 'model_type = "gpt_neo" is not "gpt2"' \
        --set 'model_type="gpt_neo"'
    check "hf: refused: pruned_heads not empty" hf_bad pruned 'pruned_heads = {...} is not computed' \
        --set 'pruned_heads={"0":[1]}'
    check "hf: refused: auto_map (custom modeling code)" hf_bad automap 'auto_map = {...} is refused' \
        --set 'auto_map={"AutoModel":"modeling_x.GPT2Model"}'
    check "hf: refused: quantization_config" hf_bad quant 'quantization_config = {...} is refused' \
        --set 'quantization_config={"quant_method":"gptq"}'
    check "hf: refused: n_inner not divisible as the mesh needs (the loader's message)" hf_bad ninner \
        'model.ffn = 190 is not divisible by mesh.q = 4' --mesh 4,1 --set n_inner=190
    check "hf: refused: seq beyond n_positions names both" hf_bad npos \
        '--seq 8 is more than n_positions = 6' --set n_positions=6
    check "hf: refused: n_layer that is not an integer" hf_bad nlayer 'n_layer = "2" must be a positive integer' \
        --set 'n_layer="2"'
    check "hf: refused: layer_norm_epsilon 0" hf_bad eps0 'layer_norm_epsilon = 0 must be a positive number' \
        --set layer_norm_epsilon=0
    check "hf: refused: attn_pdrop outside [0, 1]" hf_bad pdrop 'attn_pdrop = 1.5 must be a probability' \
        --set attn_pdrop=1.5
    check "hf: refused: n_head missing" hf_bad nohead 'n_head is missing' --drop n_head
    check "hf: refused: tie_word_embeddings false (the whole model; tessgen's head is tied)" hf_bad untied \
        '"tie_word_embeddings": false: this model'"'"'s LM head has its own weights' --set tie_word_embeddings=false
    check "hf: refused: vocab_size missing (the whole model)" hf_bad novocab 'vocab_size is missing' --drop vocab_size
    check "hf: refused: every problem named at once" hf_bad many 'tessgen: 3 problems' \
        --set 'activation_function="gelu"' --set add_cross_attention=true --set 'model_type="bert"'
    hf_dup_key() {
        mkdir -p "$WORK/hf/dupkey" &&
            printf '{"model_type": "gpt2", "n_layer": 2, "n_layer": 3, "n_embd": 48, "n_head": 12, "n_positions": 32}\n' \
                >"$WORK/hf/dupkey/config.json" &&
            hf_refused 1 'key "n_layer" appears twice' --from-hf "$WORK/hf/dupkey" --mesh 1 --seq 8 --batch 12
    }
    check "hf: refused: a key given twice" hf_dup_key
    hf_dup_empty_key() { # an empty key, twice: named as "" (the message never prints a NULL)
        mkdir -p "$WORK/hf/dupempty" &&
            printf '{"": 1, "model_type": "gpt2", "": 2}\n' >"$WORK/hf/dupempty/config.json" &&
            hf_refused 1 'key "" appears twice' --from-hf "$WORK/hf/dupempty" --mesh 1 --seq 8 --batch 12
    }
    check "hf: refused: an empty key given twice" hf_dup_empty_key
    # 300 000 keys (5 MB), three of them repeated at the end: refused naming the repeats within 30 s under ASan
    # (0.7 s measured; the scan that compared each key with every earlier one took 43 s for 80 000 keys, so about
    # 10 minutes here); more than 8 repeated keys are named 8 and counted
    hf_dup_many_keys() {
        mkdir -p "$WORK/hf/dupmany" "$WORK/hf/dupcount" &&
            "$PY" -c 'import sys
head = ["\"model_type\": \"gpt2\"", "\"n_layer\": 2", "\"n_embd\": 48", "\"n_head\": 12", "\"n_positions\": 32"]
keys = ["\"k%d\": %d" % (i, i) for i in range(300000)]
open(sys.argv[1], "w").write("{" + ", ".join(head + keys + ["\"k7\": 1", "\"n_head\": 12", "\"k7\": 2"]) + "}\n")
open(sys.argv[2], "w").write("{" + ", ".join(head + keys[:20] + keys[:10]) + "}\n")' \
                "$WORK/hf/dupmany/config.json" "$WORK/hf/dupcount/config.json" &&
            timeout 30 $HF_TG --from-hf "$WORK/hf/dupmany" --mesh 1 --seq 8 --batch 12 >"$WORK/hf/ref.out" 2>"$WORK/hf/ref.err"
        local rc=$?
        head -c 2000 "$WORK/hf/ref.err"
        [ $rc -eq 1 ] && [ "$(grep -c 'appears twice' "$WORK/hf/ref.err")" -eq 3 ] &&
            [ "$(grep -o 'key "[a-z0-9_]*" appears twice' "$WORK/hf/ref.err" | tr '\n' ' ')" = \
                'key "k7" appears twice key "n_head" appears twice key "k7" appears twice ' ] &&
            hf_refused 1 '2 more keys appear more than once; keep one of each' --from-hf "$WORK/hf/dupcount" --mesh 1 \
                --seq 8 --batch 12 && [ "$(grep -c 'appears twice' "$WORK/hf/ref.err")" -eq 8 ]
    }
    check "hf: refused: repeated keys among 300 000 are named within 30 s; past 8 they are counted" hf_dup_many_keys
    # --mode train prints the optimizer table GPT-2 is usually trained with, and the generated program uses it
    # (without it: constant lr 1e-3, no warmup, no clipping); --mode infer prints it commented out
    hf_optimizer_block() {
        mkdir -p "$WORK/hf/opt" &&
            printf '{"model_type": "gpt2", "n_layer": 1, "n_embd": 48, "n_head": 12, "n_positions": 32, "vocab_size": 64}\n' \
                >"$WORK/hf/opt/config.json" &&
            $HF_TG --from-hf "$WORK/hf/opt" --mesh 1 --seq 8 --batch 12 --mode train >"$WORK/hf/opt_t.lua" &&
            $HF_TG --from-hf "$WORK/hf/opt" --mesh 1 --seq 8 --batch 12 >"$WORK/hf/opt_i.lua" &&
            cat "$WORK/hf/opt_t.lua" &&
            grep -q "^  optimizer = { lr = 6e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1,$" "$WORK/hf/opt_t.lua" &&
            grep -q "^  -- optimizer = { lr = 6e-4" "$WORK/hf/opt_i.lua" && ! grep -q "^  optimizer" "$WORK/hf/opt_i.lua" &&
            $HF_TG "$WORK/hf/opt_t.lua" -o "$WORK/hf/opt_t" --quiet &&
            grep -q "\.lr = 0.00059999999999999995, .beta1 = 0.90000000000000002, .beta2 = 0.94999999999999996, .adam_eps = 1e-08, .weight_decay = 0.10000000000000001," \
                "$WORK/hf/opt_t/model.c" &&
            grep -q "\.warmup = 700, .decay_steps = 18000, .lr_min = 6.0000000000000002e-05," "$WORK/hf/opt_t/model.c" &&
            grep -q "\.clip = 1," "$WORK/hf/opt_t/model.c"
    }
    check "hf: --mode train prints GPT-2's optimizer table (warmup, cosine decay, clip 1.0, weight decay 0.1) and the program uses it" \
        hf_optimizer_block
    # --mesh Q,D is q and d, not the shape: the printed mesh line says how many ranks it makes
    hf_mesh_ranks() {
        mkdir -p "$WORK/hf/opt" &&
            printf '{"model_type": "gpt2", "n_layer": 1, "n_embd": 48, "n_head": 12, "n_positions": 32, "vocab_size": 64}\n' \
                >"$WORK/hf/opt/config.json" &&
            $HF_TG --from-hf "$WORK/hf/opt" --mesh 2,2 --seq 8 --batch 12 >"$WORK/hf/m22.lua" &&
            $HF_TG --from-hf "$WORK/hf/opt" --scheme megatron --mesh 4 --seq 8 --batch 12 >"$WORK/hf/mp4.lua" &&
            grep -q "^  mesh = { q = 2, d = 2 },  -- --mesh Q,D is q and d: the mesh \[2,2,2\], q\*q\*d = 8 ranks$" "$WORK/hf/m22.lua" &&
            grep -q "^  mesh = { p = 4 },  -- --mesh P is p: 4 ranks$" "$WORK/hf/mp4.lua" &&
            $HF_TG "$WORK/hf/m22.lua" --summary | head -1 | grep -q "mesh \[2,2,2\] = 8 ranks"
    }
    check "hf: --mesh 2,2 prints a mesh line that says it is q = 2, d = 2: [2,2,2] = 8 ranks" hf_mesh_ranks
    hf_unknown_key() { # accepted, and listed as not known
        "$PY" $HF_REF hf-dir $HF_DIMS --seed 1 --out "$WORK/hf/unknown" --set 'frobnicate=7' &&
            $HF_TG --from-hf "$WORK/hf/unknown" --mesh 1 --seq 8 --batch 12 >"$WORK/hf/unknown.lua" &&
            grep -A1 "not known to tessgen" "$WORK/hf/unknown.lua" | grep -q "frobnicate = 7"
    }
    check "hf: a key tessgen does not know is accepted and listed in the spec" hf_unknown_key
    hf_reorder() { # reorder_and_upcast_attn: same math in float32, accepted and said so
        "$PY" $HF_REF hf-dir $HF_DIMS --seed 1 --out "$WORK/hf/reorder" --set reorder_and_upcast_attn=true &&
            $HF_TG --from-hf "$WORK/hf/reorder" --mesh 1 --seq 8 --batch 12 | grep -q "reorder_and_upcast_attn = true"
    }
    check "hf: reorder_and_upcast_attn true is accepted (float32: rounding order only) and noted" hf_reorder
    check "hf: activation_function gelu_pytorch_tanh (the same tanh form) is accepted" \
        eval "\"$PY\" $HF_REF hf-dir $HF_DIMS --seed 1 --out \"$WORK/hf/pttanh\" --set 'activation_function=\"gelu_pytorch_tanh\"' && $HF_TG --from-hf \"$WORK/hf/pttanh\" --mesh 1 --seq 8 --batch 12 >/dev/null"

    # the directory and the file: clear errors (exit 1)
    mkdir -p "$WORK/hf/empty" "$WORK/hf/badjson" "$WORK/hf/array"
    echo '{"model_type": "gpt2", "n_layer": 2,}' >"$WORK/hf/badjson/config.json"
    echo '[1, 2]' >"$WORK/hf/array/config.json"
    check "hf: missing directory is named" hf_refused 1 "$WORK/hf/nodir: cannot read: No such file or directory" \
        --from-hf "$WORK/hf/nodir" --mesh 1 --seq 8 --batch 12
    check "hf: a file instead of the directory" hf_refused 1 "not a directory; --from-hf takes the directory" \
        --from-hf "$WORK/hf/badjson/config.json" --mesh 1 --seq 8 --batch 12
    check "hf: missing config.json is named" hf_refused 1 "$WORK/hf/empty/config.json: cannot read: No such file" \
        --from-hf "$WORK/hf/empty" --mesh 1 --seq 8 --batch 12
    check "hf: config.json that is not JSON names the byte" hf_refused 1 \
        "$WORK/hf/badjson/config.json is not valid JSON: at byte" --from-hf "$WORK/hf/badjson" --mesh 1 --seq 8 --batch 12
    check "hf: config.json whose top level is not an object" hf_refused 1 "the top level is an array, not an object" \
        --from-hf "$WORK/hf/array" --mesh 1 --seq 8 --batch 12

    # option misuse: exit 2
    check "hf: --from-hf without --mesh (exit 2)" hf_refused 2 "--from-hf needs --mesh" --from-hf "$WORK/hf/empty" \
        --seq 8 --batch 12
    check "hf: --from-hf with a spec file or -o (exit 2)" hf_refused 2 "--from-hf takes only" \
        --from-hf "$WORK/hf/empty" --mesh 1 --seq 8 --batch 12 -o "$WORK/hf/o"
    check "hf: --mesh without --from-hf (exit 2)" hf_refused 2 "go with --from-hf DIR" specs/gpt2-tiny.lua --mesh 2,2
    check "hf: --mesh 2,x (exit 2)" hf_refused 2 "--mesh x: a positive integer is needed" --from-hf "$WORK/hf/empty" \
        --mesh 2,x --seq 8 --batch 12
    check "hf: --scheme megatron with --mesh Q,D (exit 2)" hf_refused 2 "with --scheme megatron, --mesh is the rank count" \
        --from-hf "$WORK/hf/empty" --scheme megatron --mesh 2,2 --seq 8 --batch 12
    check "hf: --mode other than infer or train (exit 2)" hf_refused 2 "--mode fast: use infer (default), train or generate" \
        --from-hf "$WORK/hf/empty" --mesh 1 --seq 8 --batch 12 --mode fast
    check "hf: --seq 0 (exit 2)" hf_refused 2 "--seq 0: a positive integer is needed" --from-hf "$WORK/hf/empty" \
        --mesh 1 --seq 0 --batch 12
    # --vocab-align A: model.vocab_align of the whole model (docs/MODEL.md "Padding"): GPT-2's vocab 50257 on [1,1,1]
    # with A = 64 plans Vq = ceil(50257 / 64) * 64 = 50304 rows (47 of zero pad); without it Vq = 50257
    hf_va_dir() {
        mkdir -p "$WORK/hf/va" &&
            printf '{"model_type": "gpt2", "n_layer": 1, "n_embd": 48, "n_head": 12, "n_positions": 32, "vocab_size": 50257}\n' \
                >"$WORK/hf/va/config.json"
    }
    hf_vocab_align() {
        hf_va_dir && rm -rf "$WORK/hf/va64" "$WORK/hf/va1" &&
            $HF_TG --from-hf "$WORK/hf/va" --mesh 1 --seq 8 --batch 12 --vocab-align 64 >"$WORK/hf/va64.lua" &&
            $HF_TG --from-hf "$WORK/hf/va" --mesh 1 --seq 8 --batch 12 >"$WORK/hf/va1.lua" || return 1
        grep "vocab = " "$WORK/hf/va64.lua"
        grep -q "^            vocab = 50257, positions = 32, vocab_align = 64 },$" "$WORK/hf/va64.lua" &&
            ! grep -q "vocab_align" "$WORK/hf/va1.lua" &&
            bin/tessgen "$WORK/hf/va64.lua" -o "$WORK/hf/va64" --quiet && bin/tessgen "$WORK/hf/va1.lua" -o "$WORK/hf/va1" --quiet &&
            grep -q "\.vocab = 50257, \.vq = 50304," "$WORK/hf/va64/rank_i0_j0.c" &&
            grep -q "\.vocab = 50257, \.vq = 50257," "$WORK/hf/va1/rank_i0_j0.c"
    }
    check "hf: --vocab-align 64 prints model.vocab_align: GPT-2's vocab 50257 on [1,1,1] plans Vq = 50304" hf_vocab_align
    # outside 1..1024 (the rule of model.vocab_align), not a number, or without a vocabulary: exit 2, nothing printed
    hf_vocab_align_refused() {
        local d="$WORK/hf/va"
        hf_va_dir &&
            hf_refused 2 "--vocab-align 2048: an integer in 1..1024 is needed" --from-hf "$d" --mesh 1 --seq 8 --batch 12 \
                --vocab-align 2048 &&
            hf_refused 2 "--vocab-align 0: an integer in 1..1024 is needed" --from-hf "$d" --mesh 1 --seq 8 --batch 12 \
                --vocab-align 0 &&
            hf_refused 2 "--vocab-align 6x: an integer in 1..1024 is needed" --from-hf "$d" --mesh 1 --seq 8 --batch 12 \
                --vocab-align 6x &&
            hf_refused 2 "--vocab-align pads the LM head's vocabulary blocks" --from-hf "$d" --mesh 1 --seq 8 --batch 12 \
                --blocks-only --vocab-align 64 &&
            hf_refused 2 "--vocab-align pads the LM head's vocabulary blocks" --from-hf "$d" --scheme megatron --mesh 2 \
                --seq 8 --batch 12 --vocab-align 64 &&
            hf_refused 2 "go with --from-hf DIR" specs/gpt2-tiny.lua --vocab-align 64
    }
    check "hf: --vocab-align outside 1..1024, not a number, with --blocks-only or --scheme megatron, or without --from-hf is refused (exit 2), nothing printed" \
        hf_vocab_align_refused
fi
