#!/usr/bin/env bash
# bench/scale.sh REPORT - `ninja bench`'s production-scale part (issue 13): what tessgen costs on GPT-3
# sized block stacks (hidden 12288, heads 96, ffn 49152, seq 2048) on [4,4,4], [8,8,8] and [16,16,16]
# at 24 and 96 layers, inference and training. Appends markdown to REPORT. Called by bench/run.sh.
#
#   1. planning plus --summary: wall, peak RSS, lines printed, the largest arena per rank
#   2. full emission, CPU only and CPU + CUDA: wall, peak RSS, bytes written, bytes per rank
#   3. growth exponents of the full emission, least squares in log-log, in layers and in ranks
#   4. compile time of one 96-layer class program ([8,8,8], class (0,0)): .c and .cu, inference and training,
#      with the exact command of the output's build.ninja, one core
#   5. process start at 512 ranks: bin/model (launcher, exec of its class program, MPI start, world-size
#      check) against an MPI program that only starts MPI
#   6. schedule.html of the [8,8,8] x 96 training output in headless Chromium: milliseconds to a rendered rank
#   7. memory placement: gen/place.c against the O(B^2)-per-buffer statement of the same rule
#      (tests/place_ref.c, what plan.c did before), on class (0,0): arena and time
#
# batch = q*d on every mesh (2048 tokens per rank row block everywhere) and memory_gib = 1024, so the budget
# check does not refuse [4,4,4] training (166 GiB per rank); section 1 says which arenas fit 80 GiB.
# Outputs are written under out/bench/scale and removed once measured (the [16,16,16] x 96 training output
# is about 19 GB). TESS_BENCH_SCALE_MAX_Q=8 leaves out [16,16,16] (about 15 of the ~20 minutes).
# Times are wall seconds on this machine: compare them with each other, not with another machine's.
set -euo pipefail
cd "$(dirname "$0")/.."
REPORT=$1
PY=$(scripts/python.sh)
S=out/bench/scale
MAXQ=${TESS_BENCH_SCALE_MAX_Q:-16}
rm -rf "$S" && mkdir -p "$S"
say() { echo "$@" | tee -a "$REPORT"; }
ROOT=$PWD
measure() { "$PY" "$ROOT/bench/measure.py" "$@"; } # -> "wall_s=.. peak_rss_mb=.. rc=.."
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2"; }
# A run under 10 s is repeated up to 3 times and its fastest kept (a shared machine's noise only slows a run
# down); the peak RSS is the largest seen. Same output line as measure. --fresh DIR: DIR is removed before
# each run (an output directory, so no run finds its files already written).
measure_best() {
    local m best="" cpu="" w rss=0 fresh=""
    [ "$1" = --fresh ] && { fresh=$2; shift 2; }
    for _ in 1 2 3; do
        [ -n "$fresh" ] && rm -rf "$fresh"
        m=$(measure "$@")
        [ "$(field rc "$m")" = 0 ] || { echo "$m"; return; }
        w=$(field wall_s "$m")
        rss=$(awk -v a="$rss" -v b="$(field peak_rss_mb "$m")" 'BEGIN { print (b > a) ? b : a }')
        if [ -z "$best" ] || awk -v a="$w" -v b="$best" 'BEGIN { exit !(a < b) }'; then
            best=$w cpu=$(field cpu_s "$m")
        fi
        awk -v a="$w" 'BEGIN { exit !(a >= 10) }' && break
    done
    echo "wall_s=$best cpu_s=$cpu peak_rss_mb=$rss rc=0"
}
ninja bin/tessgen build/bench/place_compare build/bench/empty_mpi >/dev/null

meshes="4 8 16"
[ "$MAXQ" -lt 16 ] && meshes="4 8"
spec() { # q layers mode backends -> $S/gq_L_mode.lua
    local f="$S/g$1_$2_$3.lua"
    cat >"$f" <<SPEC
return { name = "g$1_$2_$3", mesh = { q = $1, d = $1 }, mode = "$3", memory_gib = 1024, backends = { $4 },
         model = { layers = $2, hidden = 12288, heads = 96, ffn = 49152, seq = 2048, batch = $(($1 * $1)) } }
SPEC
    echo "$f"
}

say ""
say "## Production scale: GPT-3 sized blocks on 64 to 4096 ranks"
say ""
say "hidden 12288, heads 96, ffn 49152, seq 2048, batch = q*d; [q,q,q] meshes. Wall seconds and peak RSS of tessgen"
say "on this machine ($(nproc) cores, $(uname -m)); a run under 10 s is the fastest of 3."
say ""
say "### Planning plus --summary"
say ""
say "| mesh | ranks | layers | mode | wall s | peak RSS MB | lines printed | largest arena per rank | fits 80 GiB |"
say "|---|---|---|---|---|---|---|---|---|"
for q in $meshes; do
    for L in 24 96; do
        for mode in infer train; do
            f=$(spec "$q" "$L" "$mode" '"cpu"')
            m=$(measure_best --out "$S/sum.txt" -- bin/tessgen "$f" --summary)
            arena=$(sed -n 's/^# memory: .*the largest arena, \([^ ]* [A-Za-z]*\).*/\1/p' "$S/sum.txt")
            gib=$(sed -n 's/^# memory: .*the largest arena, \([0-9.]*\) GiB.*/\1/p' "$S/sum.txt")
            fits=yes
            [ -n "$gib" ] && awk -v g="$gib" 'BEGIN { exit !(g > 80) }' && fits=no
            say "| [$q,$q,$q] | $((q * q * q)) | $L | $mode | $(field wall_s "$m") | $(field peak_rss_mb "$m") |" \
                "$(wc -l <"$S/sum.txt") | $arena | $fits |"
        done
    done
done

say ""
say "### The other views, on [8,8,8] x 96 layers of training"
say ""
say "| command | wall s | peak RSS MB | lines printed |"
say "|---|---|---|---|"
f=$(spec 8 96 train '"cpu"')
for v in "--show --ranks 0" "--show --ranks 511 --layers 95 --kinds comm" "--blocks h.0.attn.c_attn.weight" \
    "--summary --full"; do
    # shellcheck disable=SC2086 # $v is the options, split on purpose
    m=$(measure_best --out "$S/view.txt" -- bin/tessgen "$f" $v)
    say "| \`tessgen SPEC $v\` | $(field wall_s "$m") | $(field peak_rss_mb "$m") | $(wc -l <"$S/view.txt") |"
done

say ""
say "### Full emission: every class program, schedules, build files"
say ""
say "Wall and CPU (user + system) seconds of tessgen: the difference is mostly waiting for the kernel to write"
say "the output back to disk, which throttles a process that writes gigabytes."
say ""
say "| mesh | ranks | layers | mode | backends | wall s | CPU s | peak RSS MB | output MB | output KB per rank |"
say "|---|---|---|---|---|---|---|---|---|---|"
: >"$S/emit.tsv"
for q in $meshes; do
    for L in 24 96; do
        for mode in infer train; do
            for be in cpu cpu,cuda; do
                lua='"cpu"'
                [ "$be" = cpu,cuda ] && lua='"cpu", "cuda"'
                f=$(spec "$q" "$L" "$mode" "$lua")
                o="$S/o_${q}_${L}_${mode}_${be/,/_}"
                m=$(measure_best --fresh "$o" -- bin/tessgen "$f" -o "$o" --quiet)
                [ "$(field rc "$m")" = 0 ] || { echo "scale: tessgen $f failed" >&2; exit 1; }
                bytes=$(du -sb "$o" | cut -f1)
                p=$((q * q * q))
                say "| [$q,$q,$q] | $p | $L | $mode | $be | $(field wall_s "$m") | $(field cpu_s "$m") |" \
                    "$(field peak_rss_mb "$m") | $((bytes / 1000000)) | $((bytes / p / 1000)) |"
                printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "$L" "$mode" "$be" "$(field wall_s "$m")" \
                    "$(field cpu_s "$m")" >>"$S/emit.tsv"
                # keep the [8,8,8] x 96 outputs with CUDA for the compile, start-up and HTML figures below
                if [ "$q" != 8 ] || [ "$L" != 96 ] || [ "$be" != cpu,cuda ]; then rm -rf "$o"; fi
            done
        done
    done
done

say ""
say "### Growth of the full emission"
say ""
say "Least-squares slope of log(time) against log(layers) at a fixed mesh, and against log(ranks) at a fixed"
say "depth, of wall and of CPU time (target: at most 1.1). A small output's fixed start-up cost lowers a slope."
say ""
say "| fit | mode | backends | wall s | wall exponent | CPU s | CPU exponent |"
say "|---|---|---|---|---|---|---|"
"$PY" - "$S/emit.tsv" <<'PYEOF' | tee -a "$REPORT"
import math, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
def slope(pts):
    xs, ys = [math.log(x) for x, _ in pts], [math.log(y) for _, y in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
def line(label, mode, be, pts):  # pts: (x, wall, cpu)
    w, c = [(x, t) for x, t, _ in pts], [(x, t) for x, _, t in pts]
    print("| %s | %s | %s | %s | %.2f | %s | %.2f |" % (label, mode, be, ", ".join("%.2f" % t for _, t in w), slope(w),
          ", ".join("%.2f" % t for _, t in c), slope(c)))
ranks = sorted({int(r[0]) for r in rows}); layers = sorted({int(r[1]) for r in rows})
for mode in ("infer", "train"):
    for be in ("cpu", "cpu,cuda"):
        sel = [(int(r[0]), int(r[1]), float(r[4]), float(r[5])) for r in rows if r[2] == mode and r[3] == be]
        for p in ranks:
            pts = [(l, w, c) for (pp, l, w, c) in sel if pp == p]
            if len(pts) > 1:
                line("layers %s on %d ranks" % ("-".join(str(x) for x, _, _ in pts), p), mode, be, pts)
        for l in layers:
            pts = [(p, w, c) for (p, ll, w, c) in sel if ll == l]
            for part in ([pts, pts[-2:]] if len(pts) > 2 else [pts] if len(pts) > 1 else []):
                line("ranks %s at %d layers" % ("-".join(str(x) for x, _, _ in part), l), mode, be, part)
PYEOF
say ""
say "### Compile time of one 96-layer class program"
say ""
say "Class (0,0) of [8,8,8] x 96 layers, the command of the output's build.ninja (gcc $(gcc -dumpversion), -O2 -g;"
say "the .cu through the host compiler with the CUDA headers, as build.ninja does when it finds them), one core."
say ""
say "| mode | file | lines | command | wall s |"
say "|---|---|---|---|---|"
for mode in infer train; do
    o="$S/o_8_96_${mode}_cpu_cuda"
    for kind in c cu; do
        obj=obj/rank_i0_j0.o
        [ $kind = cu ] && obj="obj-cuda/rank_i0_j0.o"
        cmd=$(ninja -C "$o" -t commands "$obj" | tail -1)
        mkdir -p "$o/$(dirname "$obj")"
        m=$(cd "$o" && measure -- sh -c "$cmd")
        [ "$(field rc "$m")" = 0 ] || { echo "scale: compiling $o/rank_i0_j0.$kind failed: $cmd" >&2; exit 1; }
        say "| $mode | rank_i0_j0.$kind | $(wc -l <"$o/rank_i0_j0.$kind") | \`$(cut -d' ' -f1 <<<"$cmd") ...\` |" \
            "$(field wall_s "$m") |"
    done
done

say ""
say "### Process start at 512 ranks"
say ""
o="$S/o_8_96_infer_cpu_cuda"
ninja -C "$o" bin/model bin/cpu/rank_i0_j0 >/dev/null
# 9 singleton starts of each, alternating; the medians
for _ in 1 2 3 4 5 6 7 8 9; do
    field wall_s "$(measure -- "$o/bin/model" 2>/dev/null)" >>"$S/start_model.txt"
    field wall_s "$(measure -- build/bench/empty_mpi)" >>"$S/start_mpi.txt"
done
t_model=$(sort -n "$S/start_model.txt" | sed -n 5p)
t_mpi=$(sort -n "$S/start_mpi.txt" | sed -n 5p)
say "A singleton start of bin/model of [8,8,8] x 96 inference (it reads its rank, execs bin/cpu/rank_i0_j0,"
say "starts MPI, and stops at the world-size check: built for 512 ranks, started with 1), against an MPI"
say "program that only starts MPI; median of 9 each, alternating. The class executable is $(($(stat -c %s "$o/bin/cpu/rank_i0_j0") / 1000)) KB,"
say "the launcher $(($(stat -c %s "$o/bin/model") / 1000)) KB."
say ""
say "| program | wall s |"
say "|---|---|"
say "| bin/model to the world-size check | $t_model |"
say "| empty MPI program (MPI_Init, MPI_Comm_size, MPI_Finalize) | $t_mpi |"
say "| difference: what tessgen's launcher and class program add | $(awk -v a="$t_model" -v b="$t_mpi" 'BEGIN { printf "%.3f", a - b }') |"

say ""
say "### schedule.html at 512 ranks x 96 layers"
say ""
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
    say "chromium not found (scripts/deps.sh --test-extras installs it): not measured."
else
    o="$S/o_8_96_train_cpu_cuda"
    say "The [8,8,8] x 96 training output: schedule.html $(($(stat -c %s "$o/schedule.html") / 1000)) KB," \
        "the index schedule.json $(($(stat -c %s "$o/schedule.json") / 1000)) KB,"
    say "a class file schedule/rank_i0_j0.js $(($(stat -c %s "$o/schedule/rank_i0_j0.js") / 1000)) KB. Headless Chromium;" \
        "milliseconds from navigation"
    say "to the selected rank's step table rendered (the page's own data-ms, one load each)."
    say ""
    say "| rank | steps listed | ms |"
    say "|---|---|---|"
    for r in 0 511; do
        timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions \
            --dump-dom "file://$PWD/$o/schedule.html#rank=$r" >"$S/dom.html" 2>/dev/null || true
        st=$(sed -n 's/.*<span id="status" data-ms="\([0-9]*\)">rendered [0-9]* ranks; rank [0-9]*: \([0-9]*\) steps.*/\2 | \1/p' "$S/dom.html")
        say "| $r | ${st:-not rendered | -} |"
    done
fi
rm -rf "$S"/o_*

say ""
say "### Memory placement: segment tree against the direct rule"
say ""
say "Class (0,0); both place the same buffers by the same greedy rule (tests/test_place.c checks they agree on"
say "random and real plans). Old: tests/place_ref.c, a scan of every placed buffer per candidate offset, as"
say "gen/plan.c placed before; new: gen/place.c. One run each, wall seconds of the placement alone."
say ""
say "| mesh | layers | mode | buffers | steps | arena new | arena old | offsets identical | new s | old s |"
say "|---|---|---|---|---|---|---|---|---|---|"
for c in "4 24 infer" "4 96 infer" "8 24 train" "8 96 infer" "8 96 train"; do
    read -r q L mode <<<"$c"
    out=$(build/bench/place_compare "$q" "$q" "$L" 12288 96 49152 2048 $((q * q)) "$mode")
    v() { sed -n "s/^$1=//p" <<<"$out"; }
    say "| [$q,$q,$q] | $L | $mode | $(v buffers) | $(v steps) | $(($(v arena_new_bytes) / 1048576)) MiB |" \
        "$(($(v arena_old_bytes) / 1048576)) MiB | $(v offsets_identical) | $(v place_new_seconds) | $(v place_old_seconds) |"
done
