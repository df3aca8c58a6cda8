#!/usr/bin/env bash
# bench/run.sh - `ninja bench`: the benchmarks, printed as a markdown report and
# saved to out/bench/report.md. Not a test: figures are compared side by side
# in one run, never against fixed times.
#
# 1. Communication: for several meshes, the broadcast bytes each rank received
#    per layer, measured by the runtime's counters (--bytes), against
#    DESIGN.md section 3's formula computed here independently:
#        (q-1) * ( T*(3C+F)/(d*q*q) + (4*C*C + 2*C*F)/(q*q) ) elements.
# 2. Speed on [1,1,1] of a mid-sized model (hidden 768, 12 heads, ffn 3072,
#    seq 256, batch 4, 2 layers): the generated forward against the time of
#    its GEMMs alone (the runtime's per-kind timers) and against a plain numpy
#    float32 implementation of the same blocks (tests/ref/tessref.py bench),
#    both on the same OpenBLAS and the same cores.
# 3. Training bytes per rank per layer against docs/TRAINING.md's formulas,
#    and a training step on [1,1,1] against its GEMMs and the forward.
# 4. Production scale (bench/scale.sh): tessgen's time, memory and output on
#    GPT-3 sized blocks on 64 to 4096 ranks, compile time of a 96-layer class
#    program, process start, schedule.html load, memory placement old vs new.
#
# 5. The cost model (docs/COST.md) against --stats on CPU meshes
#    (bench/cost_cpu.py), and the mesh advisor against the Tesseract paper's
#    Tables 1 and 2 (bench/paper.py).
#
# 6. bf16 (docs/BF16.md): bytes per rank per layer of the same spec in fp32 and
#    bf16, forward and training, each measured by --bytes in one run; and on
#    [1,1,1] the bf16 forward and training step against fp32's on the same cores.
#
# 7. The whole GPT-2's training step on [1,1,1] (GPT-2 small and a 4-layer C=256
#    model, vocab 50257) against PyTorch CPU, eager (sdpa, fused AdamW) and
#    torch.compile, same model, batches and threads (bench/lm_cpu.sh).
#
# 8. Greedy decode of a mode = "generate" program on [1,1,1] against Hugging Face
#    `generate` on the same random model, batch 1 and 16 (bench/gen_cpu.sh).
#
# 9. The bytes of one decode step at GPT-3 175B's shape on 64 to 4096 ranks, the
#    weight-stationary layout against SUMMA, fp32 and bf16 (bench/gen_bytes.sh).
#
# TESS_BENCH_PARTS chooses: comm (1, 3's bytes), speed (2, 3's step), cost and
# paper (5), scale (4), bf16 (6), lmcpu (7), gencpu (8), genbytes (9); default all. The report names the OpenBLAS kernels that ran.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
PY=$(scripts/python.sh)
ninja bin/tessgen >/dev/null
B=out/bench
mkdir -p "$B"
REPORT="$B/report.md"
: >"$REPORT"
say() { echo "$@" | tee -a "$REPORT"; }
PARTS=${TESS_BENCH_PARTS:-comm speed cost paper scale bf16 lmcpu gencpu genbytes}
part() { [[ " $PARTS " == *" $1 "* ]]; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

spec() { # name q d layers C heads F S batch
    cat >"$B/$1.lua" <<SPEC
return { name = "$1", mesh = { q = $2, d = $3 },
         model = { layers = $4, hidden = $5, heads = $6, ffn = $7, seq = $8, batch = $9 } }
SPEC
}

say "# tessgen benchmark report"
say ""
say "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -m), tessgen $(bin/tessgen --version | cut -d' ' -f2)"
say ""
say "BLAS: $("$PY" -c 'import ctypes; b = ctypes.CDLL("libopenblas.so.0")
for f in ("openblas_get_config", "openblas_get_corename"): getattr(b, f).restype = ctypes.c_char_p
print("%s; kernels for %s" % (b.openblas_get_config().decode(), b.openblas_get_corename().decode()))' 2>/dev/null ||
    echo "OpenBLAS not identified")${OPENBLAS_CORETYPE:+ (OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE)}."
say "The generated CPU programs and numpy $("$PY" -c 'import numpy; print(numpy.__version__)') call this library."
if part comm; then
    say ""
    say "## Broadcast bytes per rank per layer: measured vs DESIGN.md formula"
    say ""
    say "Model: layers 2, hidden 96, heads 12, ffn 384, seq 8, batch 24 (T = 192 tokens)."
    say ""
    say "| mesh | ranks | formula B/layer | measured B/layer (min..max over ranks) | planned B/layer | equal |"
    say "|---|---|---|---|---|---|"
    L=2 C=96 H=12 F=384 S=8 BATCH=24
    for m in 1,1 2,1 2,2 2,3 3,1 3,2 4,1; do
        q=${m%,*}
        d=${m#*,}
        name="bytes_q${q}_d${d}"
        spec "$name" "$q" "$d" $L $C $H $F $S $BATCH
        bin/tessgen "$B/$name.lua" -o "$B/$name" --quiet
        ninja -C "$B/$name" cpu >/dev/null
        "$B/$name/run" --bytes >"$B/$name.out"
        T=$((BATCH * S))
        formula=$(( 4 * (q - 1) * (T * (3 * C + F) / (d * q * q) + (4 * C * C + 2 * C * F) / (q * q)) ))
        # per rank: bcast recv row + col, measured/planned, from the --bytes table
        read -r mmin mmax pmin pmax < <(awk -v L=$L '$1 ~ /^[0-9]+$/ {
                split($2, a, "/"); split($3, b, "/");
                m = (a[1] + b[1]) / L; p = (a[2] + b[2]) / L;
                if (n == 0 || m < mmin) mmin = m; if (n == 0 || m > mmax) mmax = m;
                if (n == 0 || p < pmin) pmin = p; if (n == 0 || p > pmax) pmax = p; n++ }
                END { printf "%d %d %d %d\n", mmin, mmax, pmin, pmax }' "$B/$name.out")
        eq=no
        [ "$mmin" = "$formula" ] && [ "$mmax" = "$formula" ] && [ "$pmin" = "$formula" ] && [ "$pmax" = "$formula" ] && eq=yes
        say "| [$q,$q,$d] | $((q * q * d)) | $formula | $mmin..$mmax | $pmin..$pmax | $eq |"
    done
fi

if part speed; then
    say ""
    say "## Forward on [1,1,1]: generated program vs its GEMMs alone vs numpy float32"
    say ""
    L=2 C=768 H=12 F=3072 S=256 BATCH=4 REPS=${TESS_BENCH_REPS:-5}
    spec speed_111 1 1 $L $C $H $F $S $BATCH
    bin/tessgen "$B/speed_111.lua" -o "$B/speed_111" --quiet
    ninja -C "$B/speed_111" cpu >/dev/null
    "$B/speed_111/run" --repeat "$REPS" >"$B/speed_111.out"
    fwd=$(sed -n 's/^forward_seconds_median=//p' "$B/speed_111.out")
    gemm=$(sed -n 's/^gemm_seconds=//p' "$B/speed_111.out")
    attn=$(sed -n 's/^attention_seconds=//p' "$B/speed_111.out")
    "$PY" tests/ref/tessref.py bench --layers $L --hidden $C --heads $H --ffn $F --seq $S --batch $BATCH \
        --reps "$REPS" >"$B/numpy.out"
    np=$(sed -n 's/^numpy_f32_forward_seconds=//p' "$B/numpy.out")
    say "Model: layers $L, hidden $C, heads $H, ffn $F, seq $S, batch $BATCH; median of $REPS runs each, one run of this script."
    say ""
    say "| ratio | value |"
    say "|---|---|"
    say "| generated forward / its GEMMs alone | $(ratio "$fwd" "$gemm") |"
    say "| attention kernel / generated forward | $(ratio "$attn" "$fwd") |"
    say "| generated forward / numpy float32 forward | $(ratio "$fwd" "$np") |"
    say ""
    say "(CPU timings, for ratios only; raw lines: $B/speed_111.out, $B/numpy.out)"
fi

if part comm; then
    say ""
    say "## Training: forward + backward bytes per rank per layer, measured vs docs/TRAINING.md"
    say ""
    say "Model: layers 2, hidden 96, heads 12, ffn 384, seq 8, batch 24; one forward and backward (--dy)."
    say "V is the forward broadcast formula above; all columns in bytes per layer, measured (min..max over ranks) / formula."
    say ""
    say "| mesh | bcast recv (2V) | reduce sent (V) | reduce recv (V) | all-reduce dep+coldep | all-reduce row (8R) | equal |"
    say "|---|---|---|---|---|---|---|"
    L=2 C=96 H=12 F=384 S=8 BATCH=24
    "$PY" tests/ref/tessref.py dy --layers $L --hidden $C --heads $H --ffn $F --seq $S --batch $BATCH --seed 1 \
        --out "$B/dy.npy"
    for m in 1,1 2,1 2,2 2,3 3,1 3,2 4,1; do
        q=${m%,*}
        d=${m#*,}
        name="train_q${q}_d${d}"
        spec "$name" "$q" "$d" $L $C $H $F $S $BATCH
        sed -i 's/^return { /return { mode = "train", /' "$B/$name.lua"
        bin/tessgen "$B/$name.lua" -o "$B/$name" --quiet
        ninja -C "$B/$name" cpu >/dev/null
        "$B/$name/run" --dy "$B/dy.npy" --bytes >"$B/$name.out"
        T=$((BATCH * S)) R=$((BATCH * S / (d * q)))
        V=$(( 4 * (q - 1) * (T * (3 * C + F) / (d * q * q) + (4 * C * C + 2 * C * F) / (q * q)) ))
        dep=0; [ "$d" -gt 1 ] && dep=$(( 4 * (4 * C * C + 2 * C * F) / (q * q) ))
        coldep=0; [ $((q * d)) -gt 1 ] && coldep=$(( 4 * (9 * C + F) / q ))
        row=0; [ "$q" -gt 1 ] && row=$(( 4 * 8 * R ))
        row_out=$(awk -v L=$L -v b=$((2 * V)) -v rs=$V -v rr=$V -v ad=$((dep + coldep)) -v ar=$row '
            function mm(k, v) { if (!(k in lo) || v < lo[k]) lo[k] = v; if (!(k in hi) || v > hi[k]) hi[k] = v }
            $1 ~ /^[0-9]+$/ {
                split($2, a, "/"); split($3, c, "/"); mm("b", (a[1] + c[1]) / L)
                split($9, a, "/"); mm("rs", a[1] / L)
                split($8, a, "/"); mm("rr", a[1] / L)
                split($7, a, "/"); mm("ad", a[1] / L)
                split($6, a, "/"); mm("ar", a[1] / L) }
            END {
                eq = (lo["b"] == b && hi["b"] == b && lo["rs"] == rs && hi["rs"] == rs && lo["rr"] == rr && hi["rr"] == rr &&
                      lo["ad"] == ad && hi["ad"] == ad && lo["ar"] == ar && hi["ar"] == ar) ? "yes" : "no"
                printf "| %d..%d / %d | %d..%d / %d | %d..%d / %d | %d..%d / %d | %d..%d / %d | %s |\n",
                    lo["b"], hi["b"], b, lo["rs"], hi["rs"], rs, lo["rr"], hi["rr"], rr, lo["ad"], hi["ad"], ad,
                    lo["ar"], hi["ar"], ar, eq }' "$B/$name.out")
        say "| [$q,$q,$d] $row_out"
    done
fi

if part speed; then
    say ""
    say "## Training step on [1,1,1]: step vs its GEMMs alone vs the forward"
    say ""
    L=2 C=768 H=12 F=3072 S=256 BATCH=4
    spec speed_train_111 1 1 $L $C $H $F $S $BATCH
    sed -i 's/^return { /return { mode = "train", /' "$B/speed_train_111.lua"
    bin/tessgen "$B/speed_train_111.lua" -o "$B/speed_train_111" --quiet
    ninja -C "$B/speed_train_111" cpu >/dev/null
    "$B/speed_train_111/run" --steps "$REPS" --timing >"$B/speed_train_111.out"
    step=$(sed -n 's/^step_seconds_median=//p' "$B/speed_train_111.out")
    tgemm=$(sed -n 's/^gemm_seconds=//p' "$B/speed_train_111.out")
    say "Model: layers $L, hidden $C, heads $H, ffn $F, seq $S, batch $BATCH; median of $REPS AdamW steps (forward, loss, backward, AdamW)."
    say ""
    say "| ratio | value |"
    say "|---|---|"
    say "| training step / its GEMMs alone | $(ratio "$step" "$tgemm") |"
    say "| training step / inference forward (same model, section above) | $(ratio "$step" "$fwd") |"
    say ""
    say "(raw lines: $B/speed_train_111.out)"
fi

if part cost; then
    say ""
    "$PY" bench/cost_cpu.py | tee -a "$REPORT"
fi

if part paper; then
    say ""
    "$PY" bench/paper.py | tee -a "$REPORT"
fi

if part bf16; then
    say ""
    say "## bf16 against fp32: bytes per rank per layer, and the CPU forward and training step"
    say ""
    say "Model: layers 2, hidden 96, heads 12, ffn 384, seq 8, batch 24; the same spec with dtype \"fp32\" and \"bf16\","
    say "each run once with --bytes (training: one forward and backward with --dy); bytes per layer of rank 0, measured."
    say ""
    say "| mesh | phase | bcast recv fp32 | bcast recv bf16 | bf16/fp32 | all-reduce + reduce fp32 | bf16 | equal |"
    say "|---|---|---|---|---|---|---|---|"
    L=2 C=96 H=12 F=384 S=8 BATCH=24
    "$PY" tests/ref/tessref.py dy --layers $L --hidden $C --heads $H --ffn $F --seq $S --batch $BATCH --seed 1 \
        --out "$B/dy16.npy"
    for m in 2,1 2,2 3,1 4,1; do
        q=${m%,*}
        d=${m#*,}
        for mode in infer train; do
            for dt in fp32 bf16; do
                name="dt_${mode}_${dt}_q${q}_d${d}"
                spec "$name" "$q" "$d" $L $C $H $F $S $BATCH
                sed -i "s/^return { /return { mode = \"$mode\", dtype = \"$dt\", /" "$B/$name.lua"
                bin/tessgen "$B/$name.lua" -o "$B/$name" --quiet
                ninja -C "$B/$name" cpu >/dev/null
                extra=""
                [ $mode = train ] && extra="--dy $B/dy16.npy"
                # shellcheck disable=SC2086
                "$B/$name/run" --bytes $extra >"$B/$name.out"
            done
            # rank 0: bcast recv row + col; all-reduce row, dep+coldep, reduce recv, reduce sent (measured)
            row0() { awk -v L=$L '$1 == "0" { split($2, a, "/"); split($3, b, "/"); split($6, c, "/"); split($7, e, "/");
                                   split($8, f, "/"); split($9, g, "/");
                                   printf "%d %d\n", (a[1] + b[1]) / L, (c[1] + e[1] + f[1] + g[1]) / L }' "$1"; }
            read -r b32 r32 < <(row0 "$B/dt_${mode}_fp32_q${q}_d${d}.out")
            read -r b16 r16 < <(row0 "$B/dt_${mode}_bf16_q${q}_d${d}.out")
            eq=no
            [ "$r32" = "$r16" ] && [ $((2 * b16)) = "$b32" ] && eq=yes
            say "| [$q,$q,$d] | $mode | $b32 | $b16 | $(ratio "$b16" "$b32") | $r32 | $r16 | $eq |"
        done
    done
    say ""
    say "\"equal\": bf16 broadcast bytes exactly half of fp32's, and the fp32 all-reduces and reduces unchanged."
    say ""
    L=2 C=768 H=12 F=3072 S=256 BATCH=4 REPS=${TESS_BENCH_REPS:-5}
    for mode in infer train; do
        for dt in fp32 bf16; do
            name="dtspeed_${mode}_${dt}"
            spec "$name" 1 1 $L $C $H $F $S $BATCH
            sed -i "s/^return { /return { mode = \"$mode\", dtype = \"$dt\", /" "$B/$name.lua"
            bin/tessgen "$B/$name.lua" -o "$B/$name" --quiet
            ninja -C "$B/$name" cpu >/dev/null
        done
    done
    # side by side, alternating, so that both see the same machine state
    for k in 1 2; do
        for dt in fp32 bf16; do
            "$B/dtspeed_infer_$dt/run" --repeat "$REPS" >"$B/dtspeed_infer_$dt.$k.out"
            "$B/dtspeed_train_$dt/run" --steps "$REPS" --timing >"$B/dtspeed_train_$dt.$k.out"
        done
    done
    med() { sed -n "s/^$2=//p" "$1"; }
    say "On [1,1,1], layers $L, hidden $C, heads $H, ffn $F, seq $S, batch $BATCH: medians of $REPS runs, fp32 and bf16"
    say "alternated twice in one run of this script (two rows)."
    say ""
    say "| run | bf16/fp32 forward | bf16/fp32 forward GEMMs | casts / bf16 forward | bf16/fp32 training step | casts / bf16 step |"
    say "|---|---|---|---|---|---|"
    for k in 1 2; do
        f32=$(med "$B/dtspeed_infer_fp32.$k.out" forward_seconds_median) f16=$(med "$B/dtspeed_infer_bf16.$k.out" forward_seconds_median)
        g32=$(med "$B/dtspeed_infer_fp32.$k.out" gemm_seconds) g16=$(med "$B/dtspeed_infer_bf16.$k.out" gemm_seconds)
        c16=$(med "$B/dtspeed_infer_bf16.$k.out" cast_seconds)
        s32=$(med "$B/dtspeed_train_fp32.$k.out" step_seconds_median) s16=$(med "$B/dtspeed_train_bf16.$k.out" step_seconds_median)
        sc16=$(med "$B/dtspeed_train_bf16.$k.out" cast_seconds)
        say "| $k | $(ratio "$f16" "$f32") | $(ratio "$g16" "$g32") | $(ratio "${c16:-0}" "$f16") | $(ratio "$s16" "$s32") | $(ratio "${sc16:-0}" "$s16") |"
    done
    say ""
    say "The CPU backend has no bf16 GEMM (Debian's OpenBLAS: docs/BF16.md): it widens both operands to fp32 and calls"
    say "sgemm, so a bf16 GEMM costs an fp32 GEMM plus the widening; bf16 pays off on a GPU (tensor cores, half the"
    say "bytes on the wire), not here. (raw lines: $B/dtspeed_*.out)"
fi

if part lmcpu; then
    . bench/lm_cpu.sh
fi

if part gencpu; then
    . bench/gen_cpu.sh
fi

if part genbytes; then
    . bench/gen_bytes.sh
fi

if part scale; then
    bench/scale.sh "$REPORT"
fi
echo "report: $REPORT"
