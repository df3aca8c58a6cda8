#!/usr/bin/env bash
# bench/lm_cpu.sh - part "lmcpu" of `ninja bench` (bench/run.sh): tessgen's [1,1,1] training step of the whole
# GPT-2 (vocab 50257, positions 1024, batch 4 x seq 64) against PyTorch CPU on the same random model and
# batches, the same AdamW and the same number of threads, side by side in one run:
#   gpt2s   12 layers, C=768, 12 heads, F=3072 (GPT-2 small, 124M parameters)
#   small   4 layers, C=256, 4 heads, F=1024
# tessgen: the generated program's --steps N --timing median step (its time per kind beside);
# PyTorch: bench/torch_cpu.py, eager (scaled_dot_product_attention, fused AdamW) and torch.compile.
# llm.c: its CPU trainer train_gpt2.c, from a checkout of karpathy/llm.c named by TESS_LLMC_DIR (never committed
# here; unset: its column says so), copied beside the run and built by its own Makefile (`make train_gpt2`:
# -Ofast -march=native -fopenmp), on the same model and batch (bench/llmc_files.py writes its checkpoint and
# token shard; train_gpt2.c's own B=4, T=64, the batch here) and threads; its printed "took X ms" of steps 1..N
# (step 0 allocates the gradients), the run stopped after step N.
# The batch: B*T+1 random ids, tokens the first B*T, targets the last (llm.c's targets are its inputs shifted
# by one), the same for all three. Ratios are tessgen / peer (below 1: tessgen faster). Without torch (PyTorch's CPU wheel:
# pip install torch --index-url https://download.pytorch.org/whl/cpu, or TESS_TORCH_PY naming a python that
# has it) the PyTorch columns say so. TESS_LMCPU_MODELS picks models (default "small gpt2s"),
# TESS_LMCPU_STEPS the timed steps (default 5, after 2 of warm-up for PyTorch; tessgen's median covers all).
# TESS_LMCPU_ROUNDS (default 3): tessgen's program and PyTorch eager run in turn that many times, each process
# reporting its median step, and each side's figure is the median of its rounds (this shared 2-core machine's speed
# drifts by 30% over seconds, so one process of each is a coin toss); torch.compile runs once, after them (its
# compilation takes a minute). The raw figures of every round are in the raw lines.
# Called by bench/run.sh with $B, $PY and say() set.
set -euo pipefail

lmcpu_model() { # name -> "L C H F"
    case $1 in
    gpt2s) echo "12 768 12 3072" ;;
    small) echo "4 256 4 1024" ;;
    *) echo "bench/lm_cpu.sh: unknown model $1 (gpt2s, small)" >&2; return 1 ;;
    esac
}

lmcpu_median() { # numbers... -> their median (the mean of the middle two for an even count)
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

lmcpu_run() {
    local TPY=${TESS_TORCH_PY:-$PY} steps=${TESS_LMCPU_STEPS:-5} rounds=${TESS_LMCPU_ROUNDS:-3} threads m L C H F d row
    local rounds_txt=""
    threads=$(nproc)
    local V=50257 P=1024 S=64 NB=4
    local have_torch=1 llmc="" llmc_why=""
    "$TPY" -c 'import torch' 2>/dev/null || have_torch=0
    if [ -z "${TESS_LLMC_DIR:-}" ]; then
        llmc_why="TESS_LLMC_DIR is unset (a checkout of karpathy/llm.c)"
    elif [ ! -f "$TESS_LLMC_DIR/train_gpt2.c" ] || [ ! -f "$TESS_LLMC_DIR/Makefile" ]; then
        llmc_why="TESS_LLMC_DIR=$TESS_LLMC_DIR has no train_gpt2.c and Makefile"
    else
        rm -rf "$B/llmc_build" && mkdir -p "$B/llmc_build"
        cp -r "$TESS_LLMC_DIR/Makefile" "$TESS_LLMC_DIR/train_gpt2.c" "$TESS_LLMC_DIR/llmc" "$B/llmc_build/"
        if make -C "$B/llmc_build" train_gpt2 >"$B/llmc_build/make.out" 2>&1; then
            llmc="$PWD/$B/llmc_build/train_gpt2"
        else
            llmc_why="make train_gpt2 failed (see $B/llmc_build/make.out)"
        fi
    fi
    say ""
    say "### The whole GPT-2's training step on [1,1,1] against PyTorch CPU and llm.c"
    say ""
    say "Vocab $V, positions $P, batch $NB x seq $S, float32, AdamW (lr 1e-3, weight decay 0.01), $threads threads each"
    say "(bin/model sets OPENBLAS_NUM_THREADS and OMP_NUM_THREADS; torch.set_num_threads). Same random weights"
    say "(tests/ref/tessref.py lm-weights) and token batch (bench/llmc_files.py) on every side; the first step's loss"
    say "shown for each."
    if [ $have_torch = 1 ]; then
        say "PyTorch: $("$TPY" -c 'import torch; print(torch.__version__, "- BLAS:", next((l.split("=",1)[1].strip() for l in torch.__config__.show().replace(",", "\n").splitlines() if "BLAS_INFO" in l), "?"))' 2>/dev/null)."
    else
        say "PyTorch: not importable by $TPY: its columns are empty (install the CPU wheel, or set TESS_TORCH_PY)."
    fi
    if [ -n "$llmc" ]; then
        say "llm.c: $(git -C "$TESS_LLMC_DIR" log -1 --format='commit %h (%cs)' 2>/dev/null || echo "$TESS_LLMC_DIR"), built by its Makefile: \`$(grep -E '(^| )train_gpt2\.c( |$)' "$B/llmc_build/make.out" | tail -1)\`."
    else
        say "llm.c: its columns are empty: $llmc_why."
    fi
    say ""
    say "| model | tessgen step s | loss 1 | eager s | loss 1 | compile s | llm.c s | loss 1 | tessgen / eager | tessgen / compile | tessgen / llm.c | tessgen's kinds (s): gemm, loss, optimizer, layernorm, attention |"
    say "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    for m in ${TESS_LMCPU_MODELS:-small gpt2s}; do
        read -r L C H F <<<"$(lmcpu_model "$m")"
        d="$B/lmcpu_$m"
        rm -rf "$d" && mkdir -p "$d"
        cat >"$d.lua" <<SPEC
return { name = "lmcpu_$m", mode = "train", mesh = { q = 1, d = 1 },
         model = { layers = $L, hidden = $C, heads = $H, ffn = $F, seq = $S, batch = $NB, eps = 1e-5,
                   vocab = $V, positions = $P },
         optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 } }
SPEC
        "$PY" tests/ref/tessref.py lm-weights --layers "$L" --hidden "$C" --heads "$H" --ffn "$F" --seq $S \
            --batch $NB --vocab $V --positions $P --seed 1 --out "$d/w.st"
        "$PY" bench/llmc_files.py --weights "$d/w.st" --layers "$L" --heads "$H" --batch $NB --seq $S --seed 1 \
            --dir "$d" ${llmc:+--checkpoint}
        bin/tessgen "$d.lua" -o "$d/prog" --quiet
        ninja -C "$d/prog" cpu >/dev/null
        # the rounds: tessgen, then PyTorch eager, in turn; each side's figure the median of its rounds' medians
        local r tsr="" esr="" es="" el="" cs=""
        for r in $(seq 1 "$rounds"); do
            "$d/prog/run" --weights "$d/w.st" --tokens "$d/tok.npy" --targets "$d/tgt.npy" --steps $((steps + 1)) \
                --timing >"$d/tessgen.$r.out"
            tsr="$tsr $(sed -n 's/^step_seconds_median=//p' "$d/tessgen.$r.out")"
            if [ $have_torch = 1 ]; then
                "$TPY" bench/torch_cpu.py --weights "$d/w.st" --tokens "$d/tok.npy" --targets "$d/tgt.npy" \
                    --layers "$L" --heads "$H" --threads "$threads" --steps "$steps" --modes eager \
                    >"$d/torch.$r.out" 2>"$d/torch.$r.err" || true
                esr="$esr $(sed -n 's/^eager_step_seconds_median=//p' "$d/torch.$r.out")"
                el=$(sed -n 's/^eager_loss1=//p' "$d/torch.$r.out")
            fi
        done
        # the kinds of the round whose step is the median (the first of them on a tie)
        local ts tl k kinds="" mid
        ts=$(lmcpu_median $tsr)
        mid=1
        for r in $(seq 1 "$rounds"); do
            [ "$(sed -n 's/^step_seconds_median=//p' "$d/tessgen.$r.out")" = "$ts" ] && { mid=$r; break; }
        done
        cp "$d/tessgen.$mid.out" "$d/tessgen.out"
        tl=$(awk '$1 == "step" && $2 == 1 { print $4 }' "$d/tessgen.out")
        for k in gemm loss optimizer layernorm attention; do
            kinds="$kinds$(printf '%.3f' "$(sed -n "s/^${k}_seconds=//p" "$d/tessgen.out")"), "
        done
        if [ $have_torch = 1 ]; then
            [ -n "${esr// /}" ] && es=$(lmcpu_median $esr)
            "$TPY" bench/torch_cpu.py --weights "$d/w.st" --tokens "$d/tok.npy" --targets "$d/tgt.npy" \
                --layers "$L" --heads "$H" --threads "$threads" --steps "$steps" --modes compile >"$d/torch.out" \
                2>"$d/torch.err" || true
            cs=$(sed -n 's/^compile_step_seconds_median=//p' "$d/torch.out")
        fi
        rounds_txt="$rounds_txt${rounds_txt:+; }$m: tessgen$(printf ' %.3f' $tsr) s, eager$( [ -n "${esr// /}" ] && printf ' %.3f' $esr) s"
        local ls="" ll=""
        if [ -n "$llmc" ]; then
            # train_gpt2.c runs 40 steps (and samples text at 20): stop it after step N (SIGPIPE at its next line)
            (cd "$d" && OMP_NUM_THREADS=$threads stdbuf -oL "$llmc" 2>&1) |
                awk -v n="$steps" '{ print; fflush() } /^step [0-9]+: train loss/ { if (++k > n) exit }' >"$d/llmc.out" || true
            ll=$(sed -n 's/^step 0: train loss \([^ ]*\) .*/\1/p' "$d/llmc.out")
            ls=$(sed -n 's/^step \([0-9]*\): train loss .*(took \([0-9.]*\) ms)/\1 \2/p' "$d/llmc.out" |
                awk '$1 > 0 { print $2 / 1000 }' | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
        fi
        row="| $m ($L layers, C=$C) | $(printf '%.3f' "$ts") | $tl | ${es:+$(printf '%.3f' "$es")} | $el | ${cs:+$(printf '%.3f' "$cs")}"
        row="$row | ${ls:+$(printf '%.3f' "$ls")} | $ll | ${es:+$(ratio "$ts" "$es")} | ${cs:+$(ratio "$ts" "$cs")}"
        row="$row | ${ls:+$(ratio "$ts" "$ls")} | ${kinds%, } |"
        say "$row"
    done
    say ""
    say "The rounds' step medians, in the order they ran ($rounds rounds; each side's figure above is their median):"
    say "$rounds_txt."
    say ""
    say "(raw lines: $B/lmcpu_*/tessgen.N.out and torch.N.out of round N, tessgen.out the median round's, torch.out"
    say "torch.compile's, $B/lmcpu_*/llmc.out; torch's errors, if any, in torch.N.err and torch.err)"
}

lmcpu_run
