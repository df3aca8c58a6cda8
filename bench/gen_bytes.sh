#!/usr/bin/env bash
# bench/gen_bytes.sh - part "genbytes" of `ninja bench` (bench/run.sh): the bytes one decode step of text generation
# moves per rank at GPT-3 175B's shape (96 layers, C 12288, 96 heads, F 49152, vocab 50257, context 2048) on 64 to
# 4096 ranks, with the decode step's linears and head weight-stationary (the default where it moves fewer bytes)
# against SUMMA (decode_layout = "summa"), fp32 and bf16, 1 and 8 sequences a rank (docs/GENERATE.md "The decode
# layout and its bytes"). Both columns are the plan's: the most any class receives in one decode step (broadcasts,
# reduces, all-gathers and reduce-scatters received: the "decode step, class ...: received" lines of --summary, which
# `run --generate --bytes` checks against a run on the test meshes) and, beside them, the formula's (the linears' and
# the head's, what the layout choice compares). Nothing runs: tessgen plans and prints. Each configuration is planned
# twice (auto, summa); the planning time of the largest is printed too. Called by bench/run.sh with $B, $PY and say().
set -euo pipefail

genbytes_spec() { # out q d nseq dtype layout
    cat >"$1" <<SPEC
return { name = "gpt3_gen", mesh = { q = $2, d = $3 }, mode = "generate", dtype = "$5", decode_layout = "$6",
  model = { layers = 96, hidden = 12288, heads = 96, ffn = 49152, vocab = 50257, positions = 2048,
            seq = 128, batch = $(($2 * $3 * $4)), context = 2048 } }
SPEC
}

genbytes_plan() { # q d nseq dtype layout -> "received formula-summa formula-stationary layout seconds"
    local f="$B/genbytes_$1_$2_$3_$4_$5" t0 t1
    genbytes_spec "$f.lua" "$@"
    t0=$(date +%s.%N)
    bin/tessgen "$f.lua" --summary >"$f.txt"
    t1=$(date +%s.%N)
    "$PY" - "$f.txt" "$t0" "$t1" <<'PYEOF'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"decode step \(R = \d+ rows? a rank\): layout (\w+) \([^)]*\); summa (\d+), stationary (\d+) bytes", t)
recv = [int(x) for x in re.findall(r"decode step, class [^:]*: received (\d+),", t)]
print(max(recv), m.group(2), m.group(3), m.group(1), "%.1f" % (float(sys.argv[3]) - float(sys.argv[2])))
PYEOF
}

mb() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1e6 }'; }

say ""
say "### Bytes of one decode step at GPT-3 175B's shape, weight-stationary against SUMMA"
say ""
say "96 layers, C 12288, 96 heads, F 49152, vocab 50257 (tied head), context 2048; the plan's most bytes any class"
say "receives in one decode step (MB = 1e6 bytes), with the decode step's linears and head weight-stationary"
say "(decode_layout = \"stationary\") and SUMMA (\"summa\"); the formula's figures (linears and head) in brackets."
say ""
say "| mesh | ranks | dtype | sequences a rank | stationary MB [formula] | SUMMA MB [formula] | SUMMA / stationary | auto picks | plan s (stationary) |"
say "|---|---|---|---|---|---|---|---|---|"
for m in 4,4 8,1 8,8 16,1 16,16 8,64; do
    q=${m%,*} d=${m#*,}
    for dt in fp32 bf16; do
        for n in 1 8; do
            read -r rw fs fw _ tw <<<"$(genbytes_plan "$q" "$d" "$n" "$dt" stationary)"
            read -r rs _ _ _ _ <<<"$(genbytes_plan "$q" "$d" "$n" "$dt" summa)"
            genbytes_spec "$B/genbytes_auto.lua" "$q" "$d" "$n" "$dt" auto
            auto=$(bin/tessgen "$B/genbytes_auto.lua" --summary | sed -n 's/.*decode step (R = [0-9]* rows\{0,1\} a rank): layout \([a-z]*\).*/\1/p')
            say "| [$q,$q,$d] | $((q * q * d)) | $dt | $n | $(mb "$rw") [$(mb "$fw")] | $(mb "$rs") [$(mb "$fs")] | $(ratio "$rs" "$rw") | $auto | $tw |"
        done
    done
done
