# tests/hf_io.sh - sourced by tests/run.sh after tests/hf.sh: Hugging Face in and out, the rest of issue 10
# item 4 (runtime/tr_stset.c, runtime/tr_hfout.c, tests/ref/hf_load.py).
#
# Sharded checkpoints in: the reference writes the same model as one model.safetensors and as 3 shards with
# an index (tessref.py hf-dir --shards 3); the run's output from the shards (given as the index and as the
# directory) is the same file, byte for byte, as from the single file, on [1,1,1] and [2,2,2]; every index
# and shard problem is refused (exit 1, nothing written) with a message naming the index, the tensor and the
# shard. Hugging Face out (--hf-out): refused on a blocks-only model naming the spec keys; with the test hook
# that pretends embeddings, the directory's tensors are --weights-out's under "transformer." names, bit for
# bit (F32 and BF16), its config.json reads back through tessgen --from-hf to the same spec, and the export
# is atomic (a failure leaves no directory and keeps a previous export; a foreign directory is refused before
# the run). Then transformers itself, when it can be imported (TESS_HF_PYTHON, default $PY): hf_load.py
# loads the reference's GPT2LMHeadModel directory with no missing or unexpected keys and its logits match
# the float64 reference's whole-model forward; skipped otherwise. Runs when TESS_TEST_FILTER matches "hf:".
HIO_TG=build/asan/tessgen
HIO_DIMS="--layers 2 --hidden 48 --heads 12 --ffn 192 --seq 8 --batch 12"
HIO_REF=tests/ref/tessref.py

# hio_build DIR MESH OUT [--from-hf options]: spec from DIR, generate and build into OUT
hio_build() {
    local dir=$1 mesh=$2 out=$3
    shift 3
    $HIO_TG --from-hf "$dir" --mesh "$mesh" --seq 8 --batch 12 "$@" >"$out.lua" &&
        bin/tessgen "$out.lua" -o "$out" --quiet && ninja -C "$out" >/dev/null
}

hio_setup() {
    local w=$WORK/hfio
    "$PY" $HIO_REF hf-dir $HIO_DIMS --seed 31 --out "$w/one" &&
        "$PY" $HIO_REF hf-dir $HIO_DIMS --seed 31 --shards 3 --out "$w/sh3" &&
        "$PY" $HIO_REF input $HIO_DIMS --seed 31 --out "$w/x.npy" &&
        [ "$(ls "$w/sh3" | grep -c '^model-0000[1-3]-of-00003.safetensors$')" = 3 ] && [ ! -e "$w/sh3/model.safetensors" ]
}

# hio_shards Q D: the sharded checkpoint (as the index and as the directory) gives the single file's output
# (also read as its directory)
hio_shards() {
    local w=$WORK/hfio out=$WORK/hfio/s_$1_$2
    hio_build "$w/sh3" "$1,$2" "$out" --blocks-only && grep -q "model.safetensors.index.json (sharded)" "$out.lua" &&
        "$out/run" --weights "$w/one/model.safetensors" --input "$w/x.npy" --output "$out/y1.npy" --bytes --quiet &&
        "$out/run" --weights "$w/sh3/model.safetensors.index.json" --input "$w/x.npy" --output "$out/y3.npy" --quiet &&
        "$out/run" --weights "$w/sh3" --input "$w/x.npy" --output "$out/yd.npy" --quiet &&
        "$out/run" --weights "$w/one/" --input "$w/x.npy" --output "$out/y1d.npy" --quiet &&
        cmp "$out/y1.npy" "$out/y3.npy" && cmp "$out/y1.npy" "$out/yd.npy" && cmp "$out/y1.npy" "$out/y1d.npy" &&
        "$PY" -c "import numpy as np, sys; y = np.load(sys.argv[1]); sys.exit(not np.isfinite(y).all())" "$out/y1.npy"
}

# hio_badindex NAME WANT PYTHON: copy the sharded checkpoint to bad_NAME, let PYTHON (with d = that directory,
# ix = its index as a dict, save() to write it back) break it; the run refuses it naming the problem
hio_badindex() {
    local name=$1 want=$2 code=$3 d=$WORK/hfio/bad_$1
    rm -rf "$d" && cp -r "$WORK/hfio/sh3" "$d" &&
        "$PY" -c "
import json, os, sys
sys.path.insert(0, 'tests/ref'); import tessref
d = sys.argv[1]; p = os.path.join(d, 'model.safetensors.index.json'); ix = json.load(open(p))
def save(): json.dump(ix, open(p, 'w'))
$code" "$d" || return 1
    rm -f "$WORK/hfio/never.npy"
    "$WORK/hfio/s_1_1/run" --weights "$d/model.safetensors.index.json" --input "$WORK/hfio/x.npy" \
        --output "$WORK/hfio/never.npy" --quiet >/dev/null 2>"$WORK/hfio/bad.err"
    local rc=$?
    cat "$WORK/hfio/bad.err"
    [ $rc -eq 1 ] || { echo "exit $rc, want 1"; return 1; }
    grep -qF -- "$want" "$WORK/hfio/bad.err" || { echo "message lacks: $want"; return 1; }
    [ ! -e "$WORK/hfio/never.npy" ] || { echo "an output was written"; return 1; }
}

# hio_baddir WANT SETUP...: --weights DIR with DIR prepared by SETUP is refused
hio_baddir() {
    local want=$1 d=$WORK/hfio/baddir
    shift
    rm -rf "$d" && mkdir -p "$d" && (cd "$d" && eval "$@") || return 1
    "$WORK/hfio/s_1_1/run" --weights "$d" --input "$WORK/hfio/x.npy" --quiet >/dev/null 2>"$WORK/hfio/bad.err"
    local rc=$?
    cat "$WORK/hfio/bad.err"
    [ $rc -eq 1 ] && grep -qF -- "$want" "$WORK/hfio/bad.err"
}

S1=model-00001-of-00003.safetensors
S2=model-00002-of-00003.safetensors
S3=model-00003-of-00003.safetensors

# ---- Hugging Face out ----------------------------------------------------------------------------------
# the whole model from the reference's directory (t_2_1), trained on a token batch; and its block stack (b_2_1)
hio_train() {
    hio_build "$WORK/hfio/one" 2,1 "$WORK/hfio/t_2_1" --mode train &&
        hio_build "$WORK/hfio/one" 2,1 "$WORK/hfio/b_2_1" --mode train --blocks-only &&
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(5).integers(0, 96, (12, 8)).astype(np.int32))" \
            "$WORK/hfio/tokens.npy"
}
HIO_TOK="--tokens $WORK/hfio/tokens.npy --targets $WORK/hfio/tokens.npy"

hio_out_refused() { # a blocks-only model: refused before the run, naming the spec keys; nothing made
    local t=$WORK/hfio/b_2_1
    "$t/run" --steps 1 --hf-out "$WORK/hfio/noembed" --quiet >"$WORK/hfio/o.out" 2>"$WORK/hfio/o.err"
    local rc=$?
    cat "$WORK/hfio/o.err"
    [ $rc -eq 1 ] && grep -qF -- "--hf-out needs the whole model: add model.vocab and model.positions to the spec" \
        "$WORK/hfio/o.err" && grep -q "nothing was run" "$WORK/hfio/o.err" && [ ! -e "$WORK/hfio/noembed" ] &&
        ! grep -q "^step" "$WORK/hfio/o.out"
}

# hio_out_same DTYPE: --hf-out's model.safetensors holds --weights-out's tensors under transformer.* names, bit
# for bit; the directory holds config.json, model.safetensors and the mark only; no lm_head
hio_out_same() {
    local t=$WORK/hfio/t_2_1 dir=$WORK/hfio/export_$1
    # shellcheck disable=SC2086
    "$t/run" --weights "$WORK/hfio/one/model.safetensors" $HIO_TOK \
        --steps 2 --weights-out "$WORK/hfio/w_$1.st" --hf-out "$dir" --out-dtype "$1" --quiet || return 1
    ls -A "$dir"
    [ "$(ls -A "$dir" | tr '\n' ' ')" = ".tessgen-hf-export config.json model.safetensors " ] &&
        [ -z "$(ls "$WORK/hfio" | grep "export_$1\.")" ] &&
        "$PY" -c "
import sys; sys.path.insert(0, 'tests/ref'); import tessref
w = tessref.read_safetensors_raw(sys.argv[1]); h = tessref.read_safetensors_raw(sys.argv[2])
want = {'transformer.' + n: v for n, v in w.items()}
dt = {'f32': 'F32', 'bf16': 'BF16'}[sys.argv[3]]
print(len(h), 'tensors;', sorted(h)[:2])
bad = [n for n in set(want) | set(h) if want.get(n) != h.get(n) or h[n][0] != dt]
print('differ:', bad[:5]); sys.exit(bool(bad) or len(h) != 28 or any('lm_head' in n for n in h))" \
        "$WORK/hfio/w_$1.st" "$dir/model.safetensors" "$1"
}

hio_out_config() { # config.json: GPT-2's keys; --from-hf reads it back to the same spec (but the name)
    local dir=$WORK/hfio/export_f32
    "$PY" -c "
import json, sys
c = json.load(open(sys.argv[1]))
want = {'model_type': 'gpt2', 'architectures': ['GPT2LMHeadModel'], 'vocab_size': 96, 'n_positions': 32, 'n_ctx': 32,
        'n_embd': 48, 'n_layer': 2, 'n_head': 12, 'n_inner': None, 'activation_function': 'gelu_new',
        'layer_norm_epsilon': 1e-05, 'tie_word_embeddings': True, 'bos_token_id': 95, 'eos_token_id': 95,
        'attn_pdrop': 0.0, 'resid_pdrop': 0.0, 'embd_pdrop': 0.0, 'scale_attn_weights': True, 'torch_dtype': 'float32'}
bad = {k: (c.get(k, 'MISSING'), v) for k, v in want.items() if c.get(k, 'MISSING') != v}
print(bad); sys.exit(bool(bad))" "$dir/config.json" &&
        grep -q '"torch_dtype": "bfloat16"' "$WORK/hfio/export_bf16/config.json" &&
        $HIO_TG --from-hf "$dir" --mesh 2,1 --seq 8 --batch 12 --mode train >"$WORK/hfio/back.lua" &&
        diff <(grep -v '^--\|name =' "$WORK/hfio/t_2_1.lua") <(grep -v '^--\|name =' "$WORK/hfio/back.lua")
}

hio_out_ninner() { # n_inner is written when ffn != 4 * hidden, and read back
    local d=$WORK/hfio/ffn
    "$PY" $HIO_REF hf-dir --layers 1 --hidden 48 --heads 12 --ffn 96 --seq 8 --batch 12 --seed 3 --out "$d" &&
        hio_build "$d" 1,1 "$WORK/hfio/f_1_1" && grep -q "ffn = 96" "$WORK/hfio/f_1_1.lua" &&
        "$WORK/hfio/f_1_1/run" --hf-out "$WORK/hfio/export_ffn" --quiet &&
        grep -q '"n_inner": 96,' "$WORK/hfio/export_ffn/config.json" &&
        $HIO_TG --from-hf "$WORK/hfio/export_ffn" --mesh 1,1 --seq 8 --batch 12 | grep -q "ffn = 96"
}

# hio_out_atomic: a failing export (TESS_TEST_HFOUT_FAIL: fails with everything written, before the rename)
# leaves no directory and no temp; over a previous export it keeps that one as it was; a second export
# replaces the first and leaves nothing beside it
hio_out_atomic() {
    local t=$WORK/hfio/t_2_1 dir=$WORK/hfio/export_f32 new=$WORK/hfio/export_new
    cp "$dir/model.safetensors" "$WORK/hfio/prev.st"
    TESS_TEST_HFOUT_FAIL=1 "$t/run" $HIO_TOK --steps 1 --hf-out "$new" --quiet \
        2>"$WORK/hfio/a.err"
    local rc=$?
    cat "$WORK/hfio/a.err"
    [ $rc -eq 1 ] && grep -q "nothing written" "$WORK/hfio/a.err" && [ ! -e "$new" ] || return 1
    TESS_TEST_HFOUT_FAIL=1 "$t/run" $HIO_TOK --steps 1 --hf-out "$dir" --quiet \
        2>"$WORK/hfio/a.err"
    rc=$?
    cat "$WORK/hfio/a.err"
    [ $rc -eq 1 ] && grep -q "the previous export is kept" "$WORK/hfio/a.err" &&
        cmp "$dir/model.safetensors" "$WORK/hfio/prev.st" || return 1
    [ -z "$(ls "$WORK/hfio" | grep 'export_.*\.\(tmp\|old\)\.')" ] || { ls "$WORK/hfio"; return 1; }
    "$t/run" $HIO_TOK --steps 3 --hf-out "$dir" --quiet && ! cmp -s "$dir/model.safetensors" \
        "$WORK/hfio/prev.st" && [ -z "$(ls "$WORK/hfio" | grep 'export_.*\.\(tmp\|old\)\.')" ] &&
        [ "$(ls -A "$dir" | wc -l)" = 3 ]
}

# hio_out_foreign WANT SETUP: --hf-out onto a directory that is not a previous export: refused before the run
hio_out_foreign() {
    local want=$1 d=$WORK/hfio/foreign
    shift
    rm -rf "$d" && mkdir -p "$d" && (cd "$d" && eval "$@") || return 1
    local before
    before=$(ls -A "$d" | tr '\n' ' ')
    "$WORK/hfio/t_2_1/run" $HIO_TOK --steps 1 --hf-out "$d" --quiet >"$WORK/hfio/f.out" \
        2>"$WORK/hfio/f.err"
    local rc=$?
    cat "$WORK/hfio/f.err"
    [ $rc -eq 1 ] && grep -qF -- "$want" "$WORK/hfio/f.err" && grep -q "nothing was run" "$WORK/hfio/f.err" &&
        [ "$(ls -A "$d" | tr '\n' ' ')" = "$before" ]
}

# hio_fifo SETUP ARGS...: a FIFO (made by SETUP, a shell command run in $WORK/hfio) named by the run's ARGS is
# refused at once, named by its type, and nothing runs (a FIFO would block a reader until a writer came)
hio_fifo() {
    local setup=$1 w=$WORK/hfio
    shift
    rm -rf "$w/fifo" "$w/fifo_sh3" && (cd "$w" && eval "$setup") || return 1
    timeout 60 "$w/t_2_1/run" "$@" --quiet >"$w/fifo.out" 2>"$w/fifo.err"
    local rc=$?
    cat "$w/fifo.err"
    [ $rc -eq 1 ] || { echo "exit $rc, want 1 (124: it blocked on the FIFO)"; return 1; }
    grep -qF "is a FIFO (named pipe), not a" "$w/fifo.err" || { echo "message lacks: is a FIFO"; return 1; }
    ! grep -q "^step\|^loss" "$w/fifo.out" || { echo "something ran"; return 1; }
}

# hio_collide WANT FILE ARGS...: outputs that collide (ARGS) are refused before the run (exit 2, no step), and FILE,
# which a run would have written, is not there
hio_collide() {
    local want=$1 file=$2 w=$WORK/hfio
    shift 2
    rm -f "$file"
    "$w/t_2_1/run" $HIO_TOK --steps 1 "$@" >"$w/coll.out" 2>"$w/coll.err"
    local rc=$?
    cat "$w/coll.err"
    [ $rc -eq 2 ] || { echo "exit $rc, want 2"; return 1; }
    grep -qF -- "$want" "$w/coll.err" || { echo "message lacks: $want"; return 1; }
    ! grep -q "^step" "$w/coll.out" || { echo "a step ran"; return 1; }
    [ ! -e "$file" ] || { echo "$file was written"; return 1; }
}

# an output inside a previous export that --hf-out replaces: refused before the run, the export kept
hio_collide_inside() {
    local w=$WORK/hfio
    rm -rf "$w/exp_in" && "$w/t_2_1/run" $HIO_TOK --steps 1 --hf-out "$w/exp_in" --quiet &&
        cp "$w/exp_in/model.safetensors" "$w/exp_in.st" &&
        hio_collide "--weights-out $w/exp_in/w.st is inside the --hf-out directory $w/exp_in/, which the export replaces" \
            "$w/exp_in/w.st" --weights-out "$w/exp_in/w.st" --hf-out "$w/exp_in/" &&
        cmp "$w/exp_in/model.safetensors" "$w/exp_in.st"
}

# hio_config_differs: --weights DIR whose config.json differs from the build in values the tensors' shapes do not
# show (n_head 12 -> 6, another epsilon, the exact GELU) and in n_positions: refused before loading, every value
# named with the build's; the same directory with the build's config.json runs
hio_config_differs() {
    local w=$WORK/hfio d=$WORK/hfio/cfg_other
    rm -rf "$d" && cp -r "$w/one" "$d" &&
        "$w/t_2_1/run" --weights "$d" $HIO_TOK --quiet || return 1
    "$PY" -c "
import json, sys
p = sys.argv[1] + '/config.json'; c = json.load(open(p))
c.update(n_head=6, layer_norm_epsilon=1e-6, activation_function='gelu', n_positions=64)
json.dump(c, open(p, 'w'), indent=2)" "$d" || return 1
    "$w/t_2_1/run" --weights "$d" $HIO_TOK --steps 1 >"$w/cfg.out" 2>"$w/cfg.err"
    local rc=$?
    cat "$w/cfg.err"
    [ $rc -eq 1 ] || { echo "exit $rc, want 1"; return 1; }
    local want
    for want in "config.json: n_head = 6, but this program was built with model.heads = 12" \
        "config.json: layer_norm_epsilon = 1e-06, but this program was built with model.eps = 1e-05" \
        "config.json: activation_function = \"gelu\", but this program computes GELU's tanh approximation" \
        "config.json: n_positions = 64, but this program was built with model.positions = 32" \
        "the weights in $d are of another model than this build (4 values differ)"; do
        grep -qF -- "$want" "$w/cfg.err" || { echo "message lacks: $want"; return 1; }
    done
    ! grep -q "^step" "$w/cfg.out" || { echo "a step ran"; return 1; }
}

# ---- transformers itself ---------------------------------------------------------------------------------
HIO_HFPY=${TESS_HF_PYTHON:-$PY}

hio_transformers() { # the reference's GPT2LMHeadModel directory: loaded with no missing/unexpected keys, logits
    local w=$WORK/hfio       # match the float64 whole-model forward
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(5).integers(0, 96, (12, 8)).astype(np.int32))" \
        "$w/tokens.npy" &&
        "$HIO_HFPY" tests/ref/hf_load.py --dir "$w/one" --tokens "$w/tokens.npy" --out "$w/hf_logits.npy" &&
        "$PY" $HIO_REF lm-forward $HIO_DIMS --dir "$w/one" --tokens "$w/tokens.npy" --out "$w/ref_logits.npy" &&
        "$PY" $HIO_REF compare --ref "$w/ref_logits.npy" --got "$w/hf_logits.npy" --tol 1e-5 --label "transformers logits"
}

# hio_transformers_export: --hf-out's directory of the whole model trained 2 steps (export_f32) loads with no
# missing or unexpected keys, and transformers' logits of it equal tessgen's logits of the same file read back
# with --weights and the float64 forward of the directory
hio_transformers_export() {
    local w=$WORK/hfio e=$WORK/hfio/export_f32
    "$HIO_HFPY" tests/ref/hf_load.py --dir "$e" --tokens "$w/tokens.npy" --out "$w/x_logits.npy" &&
        "$w/t_2_1/run" --weights "$e/model.safetensors" --tokens "$w/tokens.npy" --logits-out "$w/t_logits.npy" \
            --quiet &&
        "$PY" $HIO_REF lm-forward $HIO_DIMS --dir "$e" --tokens "$w/tokens.npy" --out "$w/e_ref.npy" &&
        "$PY" $HIO_REF compare --ref "$w/e_ref.npy" --got "$w/x_logits.npy" --tol 1e-5 --label "transformers" &&
        "$PY" $HIO_REF compare --ref "$w/x_logits.npy" --got "$w/t_logits.npy" --tol 1e-5 --label "tessgen vs transformers"
}

if wanted "hf:"; then
    rm -rf "$WORK/hfio" && mkdir -p "$WORK/hfio"
    if hio_setup >"$WORK/log" 2>&1; then
        ok "hf: reference model as one file and as 3 shards with an index"
        check "hf: sharded: [1,1,1] from the index and from the directory, output equal byte for byte to the single file (file and its directory)" \
            hio_shards 1 1
        check "hf: sharded: [2,2,2] from the index and from the directory, output equal byte for byte to the single file" \
            hio_shards 2 2
        if [ -x "$WORK/hfio/s_1_1/run" ]; then
            check "hf: sharded refused: index not JSON" hio_badindex notjson \
                "model.safetensors.index.json is not valid JSON" "open(p, 'w').write('{\"weight_map\": {')"
            check "hf: sharded refused: no weight_map" hio_badindex nomap "has no \"weight_map\"" \
                "ix.pop('weight_map'); save()"
            check "hf: sharded refused: a shard missing, naming the index, a tensor and the shard" hio_badindex missing \
                "model.safetensors.index.json: maps tensor transformer.h.0.mlp.c_fc.bias (and every other tensor of that shard) to the shard $S2, which cannot be read" \
                "os.remove(os.path.join(d, '$S2'))"
            check "hf: sharded refused: a tensor mapped to a shard that does not hold it" hio_badindex wrongshard \
                "maps tensor transformer.h.0.ln_1.bias to shard $S3, but shard $S1 holds it" \
                "ix['weight_map']['transformer.h.0.ln_1.bias'] = '$S3'; save()"
            check "hf: sharded refused: a tensor in two shards" hio_badindex twoshards \
                "tensor transformer.h.0.ln_1.bias is in two shards, $S1 and $S3" \
                "f = os.path.join(d, '$S3'); t = tessref.read_safetensors(f); t['transformer.h.0.ln_1.bias'] = tessref.read_safetensors(os.path.join(d, '$S1'))['transformer.h.0.ln_1.bias']; tessref.write_safetensors(f, list(t.items()))"
            check "hf: sharded refused: a shard holding a tensor the index does not list" hio_badindex unlisted \
                "shard $S3 holds tensor transformer.ln_f.bias, which the index's weight_map does not list" \
                "ix['weight_map'].pop('transformer.ln_f.bias'); save()"
            check "hf: sharded refused: a model tensor the index does not map" hio_badindex unmapped \
                "no tensor named transformer.h.1.mlp.c_fc.weight in the index's weight_map" \
                "n = 'transformer.h.1.mlp.c_fc.weight'; f = os.path.join(d, ix['weight_map'][n]); t = tessref.read_safetensors(f); t.pop(n); tessref.write_safetensors(f, list(t.items())); ix['weight_map'].pop(n); save()"
            check "hf: sharded refused: a shard path with '/'" hio_badindex slash \
                "weight_map gives tensor transformer.wte.weight the shard \"sub/$S1\": a shard is the name of a file beside the index (no '/', no \"..\"" \
                "ix['weight_map']['transformer.wte.weight'] = 'sub/$S1'; save()"
            check "hf: sharded refused: a shard path with '..'" hio_badindex dotdot \
                "the shard \"..$S1\"" "ix['weight_map']['transformer.wte.weight'] = '..$S1'; save()"
            check "hf: sharded refused: a tensor twice in weight_map" hio_badindex dupkey \
                "tensor transformer.wte.weight appears twice in weight_map" \
                "t = open(p).read().replace('\"weight_map\": {', '\"weight_map\": {\"transformer.wte.weight\": \"$S1\", ', 1); open(p, 'w').write(t)"
            check "hf: sharded refused: a shard that is not safetensors, named by the index and the shard" hio_badindex notst \
                "$S1: header length" "open(os.path.join(d, '$S1'), 'wb').write(b'x' * 64)"
            check "hf: --weights DIR holding both model.safetensors and the index is refused" hio_baddir \
                "holds both model.safetensors and model.safetensors.index.json" \
                "cp '$WORK/hfio/one/model.safetensors' . && cp '$WORK/hfio/sh3/model.safetensors.index.json' ."
            check "hf: --weights DIR holding neither is refused" hio_baddir \
                "is a directory without model.safetensors or model.safetensors.index.json" "touch config.json"
        fi
        if hio_train >"$WORK/log" 2>&1; then
            ok "hf: out: a training program [2,2,1] from the reference's directory"
            check "hf: out: a blocks-only model is refused before the run, naming model.vocab and model.positions" \
                hio_out_refused
            check "hf: out: --hf-out's tensors are --weights-out's under transformer.* names, bit for bit (F32)" \
                hio_out_same f32
            check "hf: out: --hf-out's tensors are --weights-out's under transformer.* names, bit for bit (BF16)" \
                hio_out_same bf16
            check "hf: out: config.json has GPT-2's keys and --from-hf reads it back to the same spec" hio_out_config
            check "hf: out: n_inner written when ffn != 4 * hidden, and read back" hio_out_ninner
            check "hf: out: atomic: a failing export leaves no directory and keeps a previous one; a new one replaces it" \
                hio_out_atomic
            check "hf: out: a directory with other files is refused before the run and left as it was" \
                hio_out_foreign "exists and is not a tessgen export (it holds notes.txt)" \
                "touch .tessgen-hf-export config.json notes.txt"
            check "hf: out: a directory without the export mark is refused before the run" \
                hio_out_foreign "exists and is not a tessgen export (it has no .tessgen-hf-export)" "touch config.json"
            check "hf: out: a file where the directory would go is refused before the run" \
                hio_out_foreign "(it is a file, not a directory)" "cd .. && rm -rf foreign && touch foreign"
            check "hf: a FIFO as --weights is refused without blocking" hio_fifo "mkfifo fifo" --weights "$WORK/hfio/fifo"
            check "hf: a FIFO as --tokens is refused without blocking" hio_fifo "mkfifo fifo" \
                --tokens "$WORK/hfio/fifo" --targets "$WORK/hfio/tokens.npy"
            check "hf: a FIFO as --targets is refused without blocking" hio_fifo "mkfifo fifo" \
                --tokens "$WORK/hfio/tokens.npy" --targets "$WORK/hfio/fifo" --steps 1
            check "hf: a FIFO as --resume is refused without blocking" hio_fifo "mkfifo fifo" \
                --resume "$WORK/hfio/fifo" $HIO_TOK --steps 1
            check "hf: a FIFO as a shard of a sharded checkpoint is refused without blocking" hio_fifo \
                "cp -r sh3 fifo_sh3 && rm fifo_sh3/$S2 && mkfifo fifo_sh3/$S2" \
                --weights "$WORK/hfio/fifo_sh3/model.safetensors.index.json" $HIO_TOK
            check "hf: a FIFO as the index of a sharded checkpoint is refused without blocking" hio_fifo \
                "cp -r sh3 fifo_sh3 && rm fifo_sh3/model.safetensors.index.json && mkfifo fifo_sh3/model.safetensors.index.json" \
                --weights "$WORK/hfio/fifo_sh3" $HIO_TOK
            check "hf: a FIFO as a directory's model.safetensors is refused without blocking" hio_fifo \
                "mkdir fifo_sh3 && mkfifo fifo_sh3/model.safetensors" --weights "$WORK/hfio/fifo_sh3" $HIO_TOK
            check "hf: --weights DIR whose config.json differs from the build is refused naming each value" \
                hio_config_differs
            check "hf: a FIFO as a directory's config.json is refused without blocking" hio_fifo \
                "cp -r one fifo_sh3 && rm fifo_sh3/config.json && mkfifo fifo_sh3/config.json" \
                --weights "$WORK/hfio/fifo_sh3" $HIO_TOK
            check "hf: out: --logits-out and --weights-out naming one file are refused before the run" hio_collide \
                "--weights-out and --logits-out name the same file" "$WORK/hfio/coll.npy" \
                --weights-out "$WORK/hfio/coll.npy" --logits-out "$WORK/hfio/coll.npy"
            check "hf: out: an output inside the --hf-out directory is refused before the run" hio_collide_inside
        else
            notok "hf: out: a training program [2,2,1] from the reference's directory" "$WORK/log"
        fi
    else
        notok "hf: reference model as one file and as 3 shards with an index" "$WORK/log"
    fi
    if "$HIO_HFPY" -c "import transformers, torch" >/dev/null 2>&1; then
        check "hf: transformers: GPT2LMHeadModel loads the reference's directory, no missing or unexpected keys, logits match float64" \
            hio_transformers
        if [ -d "$WORK/hfio/export_f32" ]; then
            check "hf: transformers: --hf-out of the trained whole model loads with no missing keys; its logits equal tessgen's and float64" \
                hio_transformers_export
        fi
    else
        ok "hf: transformers: GPT2LMHeadModel loads the reference's directory # skip transformers and torch not importable by $HIO_HFPY (set TESS_HF_PYTHON)"
    fi
fi
