#!/usr/bin/env bash
# bench/gen_cpu.sh - part "gencpu" of `ninja bench` (bench/run.sh): greedy decode of tessgen's mode = "generate"
# program on [1,1,1] against Hugging Face `generate` (transformers, eager, its own KV cache) on the same random
# model (tests/ref/tessref.py hf-dir: a save_pretrained directory both load), the same prompts and threads, batch 1
# and batch 16, side by side in one run. Prompts of PL random ids (one length, so HF needs no padding), N new ids.
# tessgen: the program tessgen --from-hf DIR --mode generate prints, run with --generate --timing: the median decode
# step of the run (beside it the three largest step kinds, their mean time a decode step on the slowest rank: what
# dominates). HF: bench/gen_hf.py, (t(N new) - t(1 new)) / (N - 1),
# the median of 3 after a warm-up. A decode step makes one id per sequence: tokens/s = batch / step. Ratios are
# tessgen's tokens/s over HF's (above 1: tessgen faster). The ids of both are compared (greedy: they must agree).
# Without transformers (TESS_HF_PYTHON naming a python that has it and torch) the HF columns say so.
# TESS_GENCPU_MODELS picks models (default "small"; "gpt2s" is GPT-2 small), TESS_GENCPU_NEW the new ids (32).
# Called by bench/run.sh with $B, $PY and say() set.
set -euo pipefail

gencpu_model() { # name -> "L C H F"
    case $1 in
    gpt2s) echo "12 768 12 3072" ;;
    small) echo "4 256 4 1024" ;;
    *) echo "bench/gen_cpu.sh: unknown model $1 (gpt2s, small)" >&2; return 1 ;;
    esac
}

gencpu_run() {
    local HPY=${TESS_HF_PYTHON:-$PY} N=${TESS_GENCPU_NEW:-32} PL=16 V=50257 P=1024 threads have_hf=1 m L C H F
    threads=$(nproc)
    "$HPY" -c 'import transformers, torch' 2>/dev/null || have_hf=0
    say ""
    say "### Greedy decode on [1,1,1] against Hugging Face generate"
    say ""
    say "Vocab $V, positions $P, prompts of $PL random ids, $N new ids a sequence (context $((PL + N))), float32, greedy,"
    say "$threads threads each. Same random model (tests/ref/tessref.py hf-dir) and prompts on both sides."
    if [ $have_hf = 1 ]; then
        say "Hugging Face: $("$HPY" -c 'import transformers, torch; print("transformers", transformers.__version__, "torch", torch.__version__)' 2>/dev/null), eager, DynamicCache."
    else
        say "Hugging Face: transformers and torch not importable by $HPY: its columns are empty (set TESS_HF_PYTHON)."
    fi
    say ""
    say "| model | batch | tessgen decode step | tessgen tokens/s | HF decode step | HF tokens/s | tessgen / HF tokens/s | same ids | tessgen's step by kind (largest first) |"
    say "|---|---|---|---|---|---|---|---|---|"
    for m in ${TESS_GENCPU_MODELS:-small}; do
        read -r L C H F <<<"$(gencpu_model "$m")"
        local dir="$B/gen_$m"
        rm -rf "$dir" && mkdir -p "$dir"
        "$PY" tests/ref/tessref.py hf-dir --layers "$L" --hidden "$C" --heads "$H" --ffn "$F" --seq "$PL" --batch 1 \
            --seed 1 --vocab $V --n-positions $P --out "$dir/hf" >/dev/null
        local NB
        for NB in 1 16; do
            local o="$dir/b$NB"
            "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(3).integers(0, $V, ($NB, $PL)).astype(np.int32))" \
                "$dir/p$NB.npy"
            bin/tessgen --from-hf "$dir/hf" --mesh 1,1 --seq $PL --batch $NB --mode generate --context $((PL + N)) \
                >"$o.lua" 2>/dev/null
            bin/tessgen "$o.lua" -o "$o" --quiet && ninja -C "$o" >/dev/null
            "$o/run" --weights "$dir/hf/model.safetensors" --generate --prompt-tokens "$dir/p$NB.npy" --max-new "$N" \
                --output "$o/t.npy" --timing --quiet >"$o/timing.txt"
            local ts kinds hs="" htps="" ratio_s="" same="-"
            ts=$(sed -n 's/^decode_seconds_median=//p' "$o/timing.txt")
            kinds=$(awk '/^per decode, slowest rank, by step kind:/ { on = 1; next } on && /^  / { print $2, $1 } !/^  / { on = 0 }' \
                "$o/timing.txt" | sort -gr | head -3 | awk '{ printf "%s%s %.2f ms", (NR > 1 ? ", " : ""), $2, 1000 * $1 }')
            if [ $have_hf = 1 ]; then
                "$HPY" bench/gen_hf.py --dir "$dir/hf" --prompt-tokens "$dir/p$NB.npy" --max-new "$N" --threads "$threads" \
                    --out "$o/t_hf.npy" >"$o/hf.txt" 2>/dev/null
                hs=$(sed -n 's/^hf_decode_seconds=//p' "$o/hf.txt")
                htps=$(awk -v b=$NB -v s="$hs" 'BEGIN { printf "%.1f", b / s }')
                ratio_s=$(ratio "$hs" "$ts")
                same=$("$PY" -c "import numpy as np, sys; print('yes' if np.array_equal(np.load(sys.argv[1]), np.load(sys.argv[2])) else 'NO')" \
                    "$o/t.npy" "$o/t_hf.npy")
                hs=$(awk -v s="$hs" 'BEGIN { printf "%.2f ms", 1000 * s }')
            fi
            say "| $m ($L layers, C=$C) | $NB | $(awk -v s="$ts" 'BEGIN { printf "%.2f ms", 1000 * s }') | $(awk -v b=$NB -v s="$ts" 'BEGIN { printf "%.1f", b / s }') | ${hs:-} | ${htps:-} | ${ratio_s:-} | $same | $kinds |"
        done
    done
}
gencpu_run
