#!/usr/bin/env bash
# scripts/demo.sh - the main job end to end on a fresh machine: install what is
# missing, build tessgen, generate specs/gpt2-tiny.lua (mesh [2,2,2], 8 ranks),
# build the per-rank programs, make random weights and an input, run all ranks
# under mpirun, and check the output against the independent float64 numpy
# reference; then the same model as a training program: gradients of one
# backward against the reference, and 20 AdamW steps with a falling loss; then
# the whole GPT-2 (specs/gpt2-tiny-lm.lua) trained 150 steps on the byte-level
# corpus data/tiny, its validation loss falling, written as a checkpoint and a
# Hugging Face directory. Exit 0 only if everything matches, every rank moved
# exactly the planned bytes, and the validation loss fell.
set -euo pipefail
cd "$(dirname "$0")/.."
SPEC=${1:-specs/gpt2-tiny.lua}
scripts/deps.sh
PY=$(scripts/python.sh)
echo "== build tessgen";          ninja bin/tessgen build/libtessrt.a
echo "== generate $SPEC";         bin/tessgen "$SPEC" -o out/demo
echo "== build the ranks";        ninja -C out/demo cpu   # the CPU program (the CUDA one, when emitted: ninja -C out/demo cuda)
dims=$("$PY" -c 'import json,sys; m=json.load(open(sys.argv[1]))["model"]
print("--layers %(layers)d --hidden %(hidden)d --heads %(heads)d --ffn %(ffn)d --seq %(seq)d --batch %(batch)d --eps %(eps)r" % m)' out/demo/manifest.json)
echo "== weights and input (tests/ref/tessref.py $dims)"
"$PY" tests/ref/tessref.py weights $dims --seed 1 --out out/demo/weights.safetensors
"$PY" tests/ref/tessref.py input $dims --seed 1 --out out/demo/x.npy
echo "== run";                    out/demo/run --weights out/demo/weights.safetensors --input out/demo/x.npy \
                                      --output out/demo/y.npy --bytes
echo "== check against the float64 reference"
"$PY" tests/ref/tessref.py forward $dims --weights out/demo/weights.safetensors --input out/demo/x.npy \
    --out out/demo/ref.npy
"$PY" tests/ref/tessref.py compare --ref out/demo/ref.npy --got out/demo/y.npy --tol 1e-4 --expect-f32 \
    --label "demo $(basename "$SPEC")"

TSPEC=${2:-specs/gpt2-tiny-train.lua}
echo "== training: generate and build $TSPEC"
bin/tessgen "$TSPEC" -o out/demo-train
ninja -C out/demo-train cpu
echo "== training: gradients of one backward against the float64 reference"
"$PY" tests/ref/tessref.py dy $dims --seed 2 --out out/demo-train/dy.npy
out/demo-train/run --weights out/demo/weights.safetensors --input out/demo/x.npy --dy out/demo-train/dy.npy \
    --dx-out out/demo-train/dx.npy --grads-out out/demo-train/grads.safetensors --bytes --quiet
"$PY" tests/ref/tessref.py backward $dims --weights out/demo/weights.safetensors --input out/demo/x.npy \
    --dy out/demo-train/dy.npy --dx-out out/demo-train/dx_ref.npy --grads-out out/demo-train/grads_ref.safetensors
"$PY" tests/ref/tessref.py compare --ref out/demo-train/dx_ref.npy --got out/demo-train/dx.npy --tol 1e-4 --label dx
"$PY" tests/ref/tessref.py compare-grads --ref out/demo-train/grads_ref.safetensors \
    --got out/demo-train/grads.safetensors --tol 1e-4 --label grads | tail -1
echo "== training: 20 AdamW steps (synthetic target), replicas checked afterwards"
out/demo-train/run --weights out/demo/weights.safetensors --input out/demo/x.npy --steps 20 --replica-check \
    --weights-out out/demo-train/trained.safetensors | tee out/demo-train/train.log
awk '/^step / { l[n++] = $4 } END { if (n != 20 || !(l[19] < l[0])) { print "demo: loss did not fall"; exit 1 } }' \
    out/demo-train/train.log

LSPEC=${3:-specs/gpt2-tiny-lm.lua}
echo "== language model: generate and build $LSPEC (whole GPT-2, vocab 256)"
bin/tessgen "$LSPEC" -o out/demo-lm
ninja -C out/demo-lm cpu
echo "== language model: 150 steps on data/tiny (byte-level text), validation every 50, checkpoint, --hf-out"
rm -rf out/demo-lm/hf
out/demo-lm/run --data data/tiny/train.bin --val-data data/tiny/val.bin --val-every 50 --steps 150 \
    --checkpoint-out out/demo-lm/ckpt.safetensors --hf-out out/demo-lm/hf --replica-check | tee out/demo-lm/train.log
awk '/^val step / { v[n++] = $5 } END { if (n != 4 || !(v[3] < v[0] - 1.5)) { print "demo: validation loss did not fall"; exit 1 } }' \
    out/demo-lm/train.log
echo "demo: OK (what each rank ran: out/demo/schedule/rank_iI_jJ.txt, out/demo-train/schedule/, out/demo-lm/schedule/;"
echo "      open out/demo/schedule.html; the trained language model: out/demo-lm/hf, GPT2LMHeadModel.from_pretrained)"
