# tests/advise.sh - sourced by tests/run.sh: tessgen --advise and --cost through the command
# line (ASan build), checked against what this file derives itself:
#   candidates  every [q,q,d] with q*q*d = P appears (the divisors, computed here), each either timed or
#               refused with the spec rule's message; the list is sorted by forward_s (an inference spec);
#               distinct placements only; a machine too small makes fits false with the rule named
#   training    a training spec is ranked by its step, tokens/s and MFU recomputed here from the model and
#               the machine, the best layout's spec lines generate it; a layout that does not fit names
#               the depth that fits (which fits, one more does not) and the memory it needs
#   bytes       the payload the cost model counts for the forward equals what the generated program
#               moves (--stats, measured by the runtime) and, for placement "dep" on 4 ranks per node,
#               the bytes across nodes are the column broadcasts of DESIGN.md (4 L (4C^2 + 2CF) / q)
#   errors      a bad machine file is exit 1 naming the file and field; option misuse is exit 2
TG=build/asan/tessgen # as in tests/cli.sh: this file also runs alone (TESS_TEST_GROUPS=advise)
ADV_SPEC=tests/specs/good/advise.lua

adv_machine() { # ranks_per_node memory_gib -> a machine file on stdout
    cat <<M
return { name = "m$1", ranks_per_node = $1,
  intra = { bandwidth_gbs = 100, latency_us = 2 }, inter = { bandwidth_gbs = 10, latency_us = 5 },
  gemm_tflops = { fp32 = 10 }, memory_bandwidth_gbs = 1000, memory_gib = $2 }
M
}

adv_json() {
    adv_machine 4 80 >"$WORK/m4.lua" &&
        $TG "$ADV_SPEC" --advise --json --machine "$WORK/m4.lua" --ranks 16 >"$WORK/adv.json" &&
        "$PY" - "$WORK/adv.json" 16 <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1])); P = int(sys.argv[2])
cands, refused = doc["candidates"], doc["refused"]
meshes = {(q, q, P // (q * q)) for q in range(1, P + 1) if P % (q * q) == 0}
seen = {tuple(c["mesh"]) for c in cands if c["scheme"] == "tesseract"} | {tuple(r["mesh"]) for r in refused}
assert meshes <= seen, "missing meshes: %s" % (meshes - seen)
f = [c["forward_s"] for c in cands]
assert f == sorted(f), "not sorted by forward_s: %s" % f
assert [c for c in cands + refused if c["scheme"] == "megatron" and c["mesh"] == [P]], "no megatron [P] candidate"
keys = [(c["scheme"], tuple(c["mesh"]), c["placement"]) for c in cands]
assert len(keys) == len(set(keys)), "a candidate twice"
for c in cands:
    assert c["forward_s"] > 0 and c["train_step_s"] > c["forward_s"] and c["peak_bytes"] > 0 and c["fits"], c
    assert set(c) >= {"scheme", "mesh", "placement", "forward_s", "train_step_s", "peak_bytes", "fits"}, c
for r in refused:
    assert "divisible" in r["why"] or "not" in r["why"], r
print(len(cands), "timed,", len(refused), "refused")
PYEOF
}

adv_small_memory() {
    adv_machine 4 0.00001 >"$WORK/mtiny.lua" &&
        $TG "$ADV_SPEC" --advise --json --machine "$WORK/mtiny.lua" >"$WORK/tiny.json" &&
        "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["candidates"]; assert c and all(not x["fits"] and "memory_gib" in x["why"] for x in c), c' "$WORK/tiny.json" &&
        $TG "$ADV_SPEC" --advise --machine "$WORK/mtiny.lua" | grep -q "refused (memory)"
}

# Generate, build and run DIR.lua with --stats; the forward payload the cost model counts for class (0,0) on
# the machine file must equal what rank 0 measured. Prints "total inter" (bytes) on stdout.
adv_model_vs_measured() { # dir machine
    local dir=$1
    $TG "$dir.lua" --cost --json --machine "$2" >"$dir.cost.json" &&
        $TG "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null &&
        "$dir/run" --stats >"$dir.stats.txt" &&
        "$PY" - "$dir.cost.json" "$dir.stats.txt" <<'PYEOF'
import json, sys
cost = json.load(open(sys.argv[1]))["phases"]["forward"]
lines = open(sys.argv[2]).read().splitlines()
k = next(i for i, l in enumerate(lines) if l.startswith("stats: bytes per collective kind"))
measured = int(lines[k + 2].split()[-1].split("/")[0])   # rank 0: class (0,0), the class the model costs
model = cost["intra_bytes"] + cost["inter_bytes"]
if model != measured:
    sys.exit("cost model %d bytes, measured %d" % (model, measured))
print(int(model), int(cost["inter_bytes"]))
PYEOF
}

# placement dep on 4 ranks per node: exactly the column broadcasts (B blocks, 4 L (4C^2 + 2CF) / q bytes) cross
adv_bytes() {
    local dir="$WORK/adv_dep" got
    sed 's/q = 2, d = 2/q = 2, d = 2, placement = "dep"/' "$ADV_SPEC" >"$dir.lua" &&
        adv_machine 4 80 >"$WORK/m4.lua" &&
        got=$(adv_model_vs_measured "$dir" "$WORK/m4.lua") || return 1
    local L=2 C=48 F=192 q=2 # tests/specs/good/advise.lua
    echo "forward payload, across nodes: $got"
    [ "${got#* }" -eq $((4 * L * (4 * C * C + 2 * C * F) / q)) ]
}

# megatron, 4 ranks on 2 nodes: two all-reduces of [T, C] per layer, every one across nodes
adv_bytes_megatron() {
    local dir="$WORK/adv_meg" got
    printf 'return { name = "adv_meg", scheme = "megatron", mesh = { p = 4 },\n  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 16 } }\n' >"$dir.lua" &&
        adv_machine 2 80 >"$WORK/m2.lua" &&
        got=$(adv_model_vs_measured "$dir" "$WORK/m2.lua") || return 1
    local T=$((16 * 8)) C=48 L=2
    echo "forward payload, across nodes: $got"
    [ "$got" = "$((4 * 2 * L * T * C)) $((4 * 2 * L * T * C))" ]
}

adv_errors() {
    printf 'return { ranks_per_node = 0 }\n' >"$WORK/bad_m.lua"
    $TG "$ADV_SPEC" --advise --machine "$WORK/bad_m.lua" >/dev/null 2>"$WORK/e"
    [ $? -eq 1 ] && grep -q "bad_m.lua: ranks_per_node" "$WORK/e" || { cat "$WORK/e"; return 1; }
    $TG "$ADV_SPEC" --advise >/dev/null 2>"$WORK/e"
    [ $? -eq 2 ] || return 1
    $TG "$ADV_SPEC" --cost --ranks 4 --machine specs/machines/h100x8.lua >/dev/null 2>&1
    [ $? -eq 2 ] || return 1
    $TG "$ADV_SPEC" --advise --ranks x --machine specs/machines/h100x8.lua >/dev/null 2>"$WORK/e"
    [ $? -eq 2 ] && grep -q "number of ranks" "$WORK/e"
}

adv_generate() {
    sed 's/name = "advise",/name = "advise_gen", mode = "generate",/; s/batch = 16 }/batch = 16, vocab = 96, positions = 32, context = 16 }/' \
        "$ADV_SPEC" >"$WORK/adv_gen.lua" &&
        $TG "$WORK/adv_gen.lua" --cost --machine specs/machines/h100x8.lua | grep -q "^  decode " || return 1
    $TG "$WORK/adv_gen.lua" --advise --machine specs/machines/h100x8.lua --ranks 16 >"$WORK/advg.out" 2>"$WORK/e"
    local rc=$?
    cat "$WORK/e"
    [ $rc -eq 2 ] && [ ! -s "$WORK/advg.out" ] && grep -q 'has mode = "generate", which the advisor does not rank yet' "$WORK/e"
}

adv_profiles() {
    $TG "$ADV_SPEC" --advise --machine specs/machines/meluxina.lua --ranks 16 | grep -q "^  1 " &&
        $TG "$ADV_SPEC" --advise --machine specs/machines/h100x8.lua --ranks 16 | grep -q "^  1 " &&
        $TG "$ADV_SPEC" --cost --machine specs/machines/h100x8.lua | grep -q "^  forward"
}

# rates where no machine is (5e-324 made --advise print inf and -nan, and --json invalid) are refused naming the
# field; machines at either end of every accepted range give finite numbers: --advise and --cost --json parse as
# strict JSON (no NaN, no Infinity) and the text has no inf or nan
adv_extreme_machines() {
    cat >"$WORK/m_denorm.lua" <<'M'
return { ranks_per_node = 4, intra = { bandwidth_gbs = 5e-324, latency_us = 2 }, inter = { bandwidth_gbs = 10, latency_us = 5 },
  gemm_tflops = { fp32 = 10 }, memory_bandwidth_gbs = 1000, memory_gib = 80 }
M
    $TG "$ADV_SPEC" --advise --json --machine "$WORK/m_denorm.lua" --ranks 16 >"$WORK/adv_d.json" 2>"$WORK/e"
    local rc=$?
    cat "$WORK/e"
    [ $rc -eq 1 ] && [ ! -s "$WORK/adv_d.json" ] &&
        grep -q "m_denorm.lua: intra.bandwidth_gbs = .* is out of range: .* must be between 0.001 and 100000 GB/s" "$WORK/e" ||
        return 1
    local lo="bandwidth_gbs = 1e-3, latency_us = 1e6" hi="bandwidth_gbs = 1e5, latency_us = 0"
    printf 'return { ranks_per_node = 4, intra = { %s }, inter = { %s }, gemm_tflops = { fp32 = 1e-3 },
  memory_bandwidth_gbs = 1e-3, memory_gib = 1e6, launch_us = 1e6 }
' \
        "$lo" "$lo" >"$WORK/m_lo.lua"
    printf 'return { ranks_per_node = 4, intra = { %s }, inter = { %s }, gemm_tflops = { fp32 = 1e5 },
  memory_bandwidth_gbs = 1e5, memory_gib = 1e-6, launch_us = 0 }
' \
        "$hi" "$hi" >"$WORK/m_hi.lua"
    for m in lo hi; do
        $TG "$ADV_SPEC" --advise --json --machine "$WORK/m_$m.lua" --ranks 16 >"$WORK/adv_$m.json" &&
            $TG "$ADV_SPEC" --cost --json --machine "$WORK/m_$m.lua" >"$WORK/cost_$m.json" &&
            $TG "$ADV_SPEC" --advise --machine "$WORK/m_$m.lua" --ranks 16 >"$WORK/adv_$m.txt" &&
            $TG "$ADV_SPEC" --cost --machine "$WORK/m_$m.lua" >>"$WORK/adv_$m.txt" &&
            ! grep -Eiw -- "-?(inf|nan)" "$WORK/adv_$m.txt" &&
            "$PY" - "$WORK/adv_$m.json" "$WORK/cost_$m.json" <<'PYEOF' || return 1
import json, math, sys
def bad(c): raise ValueError("not JSON: " + c)
for f in sys.argv[1:]:
    doc = json.load(open(f), parse_constant=bad)
    def walk(x):
        if isinstance(x, dict): [walk(v) for v in x.values()]
        elif isinstance(x, list): [walk(v) for v in x]
        elif isinstance(x, float): assert math.isfinite(x), (f, x)
    walk(doc)
assert json.load(open(sys.argv[1]))["candidates"], "no candidate"
PYEOF
    done
}
# a training spec is ranked by its training step, with tokens/s and MFU computed here from the model and the
# machine, and the best layout's spec lines, pasted into the spec, generate that layout
adv_train() {
    adv_machine 4 80 >"$WORK/m4.lua" &&
        sed 's/name = "advise",/name = "advise_train", mode = "train",/' "$ADV_SPEC" >"$WORK/adv_train.lua" &&
        $TG "$WORK/adv_train.lua" --advise --json --machine "$WORK/m4.lua" --ranks 16 >"$WORK/advt.json" &&
        $TG "$WORK/adv_train.lua" --advise --machine "$WORK/m4.lua" --ranks 16 >"$WORK/advt.txt" || return 1
    cat "$WORK/advt.txt"
    grep -q 'ranked by the training step (mode = "train")' "$WORK/advt.txt" || return 1
    "$PY" - "$WORK/advt.json" "$WORK/advt.txt" "$WORK/adv_train.lua" "$WORK/adv_paste.lua" <<'PYEOF' || return 1
import json, sys
doc = json.load(open(sys.argv[1])); text = open(sys.argv[2]).read()
L, C, H, F, S, B, P, peak = 2, 48, 12, 192, 8, 16, 16, 10e12      # tests/specs/good/advise.lua, adv_machine
T = B * S
flops = 3 * L * (2 * T * (4 * C * C + 2 * C * F) + 2 * B * S * S * C)   # docs/COST.md: training = 3 x forward
assert doc["sorted_by"] == "train_step_s", doc["sorted_by"]
cands = doc["candidates"]
steps = [c["step_s"] for c in cands]
assert steps == sorted(steps), "not sorted by the training step: %s" % steps
for c in cands:
    assert c["step_s"] == c["train_step_s"], c
    assert abs(c["tokens_per_s"] - T / c["step_s"]) <= 1e-5 * c["tokens_per_s"], c
    mfu = flops / (c["step_s"] * P * peak)
    assert abs(c["mfu"] - mfu) <= 1e-5 * mfu, (c["mfu"], mfu)
best = cands[0]
want = ('mesh = { p = %d },' % P) if best["scheme"] == "megatron" else \
       'mesh = { q = %d, d = %d, placement = "%s"%s },' % (best["mesh"][0], best["mesh"][2], best["placement"],
                                                         ", pp = %d" % best["pp"] if best["pp"] > 1 else "")
assert want in best["spec_lines"].split("\n")[-1] or want in best["spec_lines"], best["spec_lines"]
assert "the fastest layout that fits, in the spec:\n  " + best["spec_lines"].replace("\n", "\n") in text, text
# the spec has no optimizer table: the line the advisor writes as a comment for an existing one becomes the table
lines = best["spec_lines"].replace("-- and in optimizer = { ... }: shard = true,", "optimizer = { shard = true },")
src = open(sys.argv[3]).read().replace("mesh = { q = 2, d = 2 },", lines)
open(sys.argv[4], "w").write(src)
print("best", best["scheme"], best["mesh"], best["placement"], "%.3g tok/s, MFU %.2f%%" % (best["tokens_per_s"], 100 * best["mfu"]))
PYEOF
    cat "$WORK/adv_paste.lua"
    $TG "$WORK/adv_paste.lua" --summary >"$WORK/paste.txt" || { cat "$WORK/paste.txt"; return 1; }
    local m
    m=$("$PY" -c 'import json,sys; c=json.load(open(sys.argv[1]))["candidates"][0]; print("[%s]" % ",".join(map(str, c["mesh"])) if c["scheme"] == "tesseract" else "megatron")' "$WORK/advt.json")
    grep -qF -- "$m" "$WORK/paste.txt" || { echo "the pasted spec does not plan $m"; return 1; }
}

# a training layout whose arena does not fit with the spec's own options (none: m = 1, no recomputation, unsharded)
# gets the fastest combination of micro-batches, recomputation and optimizer sharding that fits: each of the eight
# combinations (m 1 or 2, recompute none or full, shard or not) is costed here through --cost on its own spec, and
# the fastest that fits must be the advisor's; its JSON names it, and its spec lines pasted into the spec give a spec
# whose every arena fits the machine's memory (tessgen refuses one that does not)
adv_options() {
    sed 's/layers = 2,/layers = 8,/; s/name = "advise",/name = "advise_opts", mode = "train",/' "$ADV_SPEC" \
        >"$WORK/adv_opts.lua" && adv_machine 4 80 >"$WORK/m4.lua" || return 1
    local m r h pipe
    : >"$WORK/opts_combos.txt"
    for m in 1 2; do for r in none full; do for h in false true; do
        pipe=""
        [ "$m" -gt 1 ] && pipe="pipeline = { microbatches = $m },"
        sed "s/mesh = { q = 2, d = 2 },/mesh = { q = 2, d = 4 }, $pipe recompute = \"$r\", optimizer = { shard = $h },/" \
            "$WORK/adv_opts.lua" >"$WORK/adv_combo.lua" &&
            $TG "$WORK/adv_combo.lua" --cost --json --machine "$WORK/m4.lua" >"$WORK/combo.json" || return 1
        "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], sys.argv[3], sys.argv[4], d["peak_bytes"], repr(sum(p["streams_s"] for p in d["phases"].values())))' \
            "$WORK/combo.json" "$m" "$r" "$h" >>"$WORK/opts_combos.txt" || return 1
    done; done; done
    cat "$WORK/opts_combos.txt"
    # two machines: one byte less than the spec's own options need (m = 1, none, unsharded), and just the least
    # memory of the eight (only that combination fits)
    local gib caps
    caps=$(awk '$1 == 1 && $2 == "none" && $3 == "false" { own = $4 } NR == 1 || $4 < least { least = $4 }
        END { printf "%.12f %.12f", (own - 1) / 2^30, (least + 0.5) / 2^30 }' "$WORK/opts_combos.txt") || return 1
    for gib in $caps; do
        adv_machine 4 "$gib" >"$WORK/m_tight.lua" &&
            $TG "$WORK/adv_opts.lua" --advise --json --machine "$WORK/m_tight.lua" --ranks 16 >"$WORK/opts.json" &&
            $TG "$WORK/adv_opts.lua" --advise --machine "$WORK/m_tight.lua" --ranks 16 >"$WORK/opts.txt" || return 1
        cat "$WORK/opts.txt"
        "$PY" - "$WORK/opts_combos.txt" "$WORK/opts.json" "$gib" "$WORK/adv_opts.lua" "$WORK/adv_opts_paste.lua" <<'PYEOF' || return 1
import json, sys
cap = float(sys.argv[3]) * 2**30
rows = [l.split() for l in open(sys.argv[1])]
fit = [(float(t), int(m), 8 if r == "full" else 0, h == "true") for m, r, h, b, t in rows if int(b) <= cap]
assert fit, "no combination fits"
best = min(fit)
c = [x for x in json.load(open(sys.argv[2]))["candidates"] if x["mesh"] == [2, 2, 4] and x["placement"] == "row"][0]
print("memory %d bytes: the fastest combination that fits (costed here) %s; the advisor's %s %d %d %s" % (
    cap, best, c["train_step_s"], c["microbatches"], c["recompute"], c["shard"]))
assert c["fits"] and (c["microbatches"], c["recompute"], c["shard"]) == best[1:], c
assert abs(c["train_step_s"] - best[0]) <= 1e-5 * best[0], (c, best)
lines = c["spec_lines"]
assert ("microbatches = %d" % c["microbatches"] in lines) == (c["microbatches"] > 1), lines
assert ('recompute = "full"' in lines) == (c["recompute"] == 8), lines
assert ("shard = true" in lines) == c["shard"], lines
lines = lines.replace("-- and in optimizer = { ... }: shard = true,", "optimizer = { shard = true },")
src = open(sys.argv[4]).read().replace("mesh = { q = 2, d = 2 },", lines + "\n  memory_gib = %s," % sys.argv[3])
open(sys.argv[5], "w").write(src)
PYEOF
        cat "$WORK/adv_opts_paste.lua"
        $TG "$WORK/adv_opts_paste.lua" --summary >"$WORK/opts_sum.txt" 2>&1 || { cat "$WORK/opts_sum.txt"; return 1; }
        head -4 "$WORK/opts_sum.txt"
        grep -q "fits" "$WORK/opts_sum.txt" || return 1
    done
}

# a layout that does not fit says the change that makes it fit: with the layers it names it fits, one more does not
adv_fit_fix() {
    adv_machine 4 0.0005 >"$WORK/msmall.lua" &&
        sed 's/layers = 2,/layers = 40,/; s/name = "advise",/name = "advise_deep", mode = "train",/' "$ADV_SPEC" \
            >"$WORK/adv_deep.lua" &&
        $TG "$WORK/adv_deep.lua" --advise --json --machine "$WORK/msmall.lua" --ranks 16 >"$WORK/deep.json" || return 1
    local l
    l=$("$PY" - "$WORK/deep.json" <<'PYEOF'
import json, re, sys
c = [x for x in json.load(open(sys.argv[1]))["candidates"] if x["scheme"] == "tesseract" and x["mesh"] == [2, 2, 4] and x["placement"] == "row"][0]
assert not c["fits"], c
m = re.search(r"fits with model.layers = (\d+) \(of 40\)(?: \(options [^)]*\))?, or on a machine with memory_gib >= ([0-9.]+)", c["fix"])
assert m, c["fix"]
assert abs(float(m.group(2)) - c["peak_bytes"] / 2**30) < 0.01, (m.group(2), c["peak_bytes"])
print(m.group(1))
PYEOF
) || return 1
    echo "fits with layers = $l"
    local k
    for k in "$l" $((l + 1)); do
        sed "s/layers = 40,/layers = $k,/" "$WORK/adv_deep.lua" >"$WORK/adv_k.lua" &&
            $TG "$WORK/adv_k.lua" --advise --json --machine "$WORK/msmall.lua" --ranks 16 >"$WORK/k.json" || return 1
        "$PY" - "$WORK/k.json" "$k" "$l" <<'PYEOF' || return 1
import json, sys
c = [x for x in json.load(open(sys.argv[1]))["candidates"] if x["scheme"] == "tesseract" and x["mesh"] == [2, 2, 4] and x["placement"] == "row"][0]
assert c["fits"] == (sys.argv[2] == sys.argv[3]), (sys.argv[2], c["fits"], c["peak_bytes"])
PYEOF
    done
}

# model.vocab_align: every candidate layout is planned with its vocab blocks padded (V = 49 to a multiple of 64:
# Vq 64 on [1,1,4] and [2,2,1], against 49 and 25 unpadded; heads 6 rule out megatron p = 4), so each candidate's
# peak memory is larger than the unpadded spec's, and the model line says so
adv_vocab_align() {
    local a
    adv_machine 4 80 >"$WORK/m4.lua" || return 1
    for a in 1 64; do
        cat >"$WORK/adv_va$a.lua" <<SPEC
return { name = "va$a", mode = "train", mesh = { q = 1 },
  model = { layers = 2, hidden = 24, heads = 6, ffn = 48, seq = 4, batch = 16, vocab = 49, positions = 6,
            vocab_align = $a } }
SPEC
        $TG "$WORK/adv_va$a.lua" --advise --json --machine "$WORK/m4.lua" --ranks 4 >"$WORK/va$a.json" &&
            $TG "$WORK/adv_va$a.lua" --advise --machine "$WORK/m4.lua" --ranks 4 >"$WORK/va$a.txt" || return 1
    done
    grep -F "vocab 49 (blocks padded to a multiple of 64)," "$WORK/va64.txt" && ! grep -F "padded" "$WORK/va1.txt" ||
        return 1
    "$PY" - "$WORK/va1.json" "$WORK/va64.json" <<'PYEOF'
import json, sys
def cands(f):
    return {(c["scheme"], tuple(c["mesh"]), c["placement"]): c for c in json.load(open(f))["candidates"]}
a, b = cands(sys.argv[1]), cands(sys.argv[2])
assert a.keys() == b.keys() and len(a) >= 3, (sorted(a), sorted(b))
for k in a:
    print(k, "peak bytes", a[k]["peak_bytes"], "->", b[k]["peak_bytes"])
    assert b[k]["peak_bytes"] > a[k]["peak_bytes"], k
PYEOF
}

# mesh.pp = 2 (gpipe, layers { 1, 3 }, 4 micro-batches of 2 rows x C/q = 4 floats: 32-byte blocks) on 4 ranks per node:
# each stage's [2,2,1] group fills a node, so every block crosses nodes, the node's 10 GB/s shared by its 4 ranks:
# c = 5 us + 32 B / 2.5 GB/s. The stages' serial forwards, backwards (m - 1 ordinary ones and the last with the
# all-reduces) and optimizers add up to the pp = 1 program's phases. Stage 1 (3 layers) is the bottleneck, and with
# blocking sends gpipe waits a block before each of its forwards and after each backward:
#   pipeline = F0 + m (F1 + c) + (m - 1) (B1 + c) + B1last + c + B0last, step = pipeline + stage 0's optimizer
# (stage 0 ends last). The language model adds the tied wte exchange, Vq x C/q = 5 x 4 floats, on the same link.
# --advise with stages is still refused naming mesh.pp, nothing printed.
adv_pipeline_cost() {
    cat >"$WORK/adv_pp2.lua" <<'SPEC'
return { mode = "train", mesh = { q = 2, pp = 2 }, model = { layers = 4, hidden = 8, heads = 2, ffn = 16, seq = 2,
  batch = 8 }, pipeline = { microbatches = 4, layers = { 1, 3 }, schedule = "gpipe" } }
SPEC
    sed 's/pp = 2/pp = 1/; s/, layers = { 1, 3 }, schedule = "gpipe"//' "$WORK/adv_pp2.lua" >"$WORK/adv_pp1.lua"
    sed 's/batch = 8 }/batch = 8, vocab = 10, positions = 2 }/' "$WORK/adv_pp2.lua" >"$WORK/adv_pp2lm.lua"
    adv_machine 4 80 >"$WORK/m4.lua" &&
        $TG "$WORK/adv_pp2.lua" --cost --machine "$WORK/m4.lua" >"$WORK/pp2.cost" &&
        grep -q "^  0     0\.\.0  " "$WORK/pp2.cost" && grep -q "^  1     1\.\.3  " "$WORK/pp2.cost" &&
        grep -q "^step, streams: [0-9.e-]* s (the pipeline " "$WORK/pp2.cost" &&
        grep -q "^step, serial: [0-9.e-]* s (the pipeline .*); bubble [0-9.]*% (the CPU backend" "$WORK/pp2.cost" &&
        $TG "$WORK/adv_pp2.lua" --cost --json --machine "$WORK/m4.lua" >"$WORK/pp2.json" &&
        $TG "$WORK/adv_pp2lm.lua" --cost --json --machine "$WORK/m4.lua" >"$WORK/pp2lm.json" &&
        $TG "$WORK/adv_pp1.lua" --cost --json --machine "$WORK/m4.lua" >"$WORK/pp1.json" || return 1
    "$PY" - "$WORK/pp2.json" "$WORK/pp1.json" "$WORK/pp2lm.json" <<'PYEOF' || return 1
import json, sys
pp, one, lm = (json.load(open(f)) for f in sys.argv[1:4])
st, ph, m = pp["stages"], one["phases"], 4
close = lambda a, b: abs(a - b) <= 1e-4 * abs(b) + 1e-12
c = 5e-6 + 32 / (10e9 / 4)
assert pp["block_bytes"] == 32 and all(s["p2p_inter"] for s in st[:1]), pp
assert close(st[0]["p2p_s"], c), (st[0]["p2p_s"], c)
assert close(sum(m * s["serial_fwd_s"] for s in st), ph["forward"]["serial_s"]), "forward"
assert close(sum((m - 1) * s["serial_bwd_s"] + s["serial_bwd_last_s"] for s in st), ph["backward"]["serial_s"]), "backward"
assert close(sum(s["serial_opt_s"] for s in st), ph["optimizer"]["serial_s"]), "optimizer"
s0, s1 = st
for t in ("", "serial_"):
    want = (s0[t + "fwd_s"] + m * (s1[t + "fwd_s"] + c) + (m - 1) * (s1[t + "bwd_s"] + c) + s1[t + "bwd_last_s"] + c
            + s0[t + "bwd_last_s"])
    assert close(pp[t + "pipeline_s"], want), (t, pp[t + "pipeline_s"], want)
    assert close(pp[t + "step_s"], want + s0[t + "opt_s"]), (t, pp[t + "step_s"])
    busy = s0[t + "busy_s"] + s1[t + "busy_s"]
    assert close(pp[t + "bubble"], 1 - busy / (2 * pp[t + "pipeline_s"])), t
assert lm["tied_bytes"] == 80 and close(lm["tied_s"], 5e-6 + 80 / (10e9 / 4)), lm
print("step", pp["step_s"], "pipeline", pp["pipeline_s"], "bubble", pp["bubble"], "pp = 1", pp["pp1_step_s"])
PYEOF
    # nodes hold world ranks: [1,1,2] x 2 stages on 3 ranks per node puts stage 0 (ranks 0, 1) on node 0 and stage 1
    # (ranks 2, 3) across nodes 0 and 1, so stage 1's depth all-reduces of the gradients (in its last backward) cross
    # nodes and stage 0's do not, on equal layers; the block of rank 1 to rank 3 crosses too
    printf 'return { mode = "train", mesh = { q = 1, d = 2, pp = 2 }, model = { layers = 4, hidden = 8, heads = 2,\n  ffn = 16, seq = 2, batch = 8 }, pipeline = { microbatches = 2 } }\n' >"$WORK/adv_ppd.lua"
    adv_machine 3 80 >"$WORK/m3.lua" &&
        $TG "$WORK/adv_ppd.lua" --cost --json --machine "$WORK/m3.lua" >"$WORK/ppd.json" &&
        "$PY" -c 'import json, sys
s0, s1 = json.load(open(sys.argv[1]))["stages"]
d0, d1 = (s["serial_bwd_last_s"] - s["serial_bwd_s"] for s in (s0, s1))
assert d1 > 2 * d0 > 0 and s0["p2p_inter"], (d0, d1, s0)' "$WORK/ppd.json"
}

# --advise on a training spec searches pipeline stages: on 8 ranks of 4 layers, pp in {1, 2, 4} (the divisors of both),
# each stage's [q,q,d] and placement, every micro-batch count dividing its sequences per rank. The spec has stages of
# its own (pp = 2, layers { 1, 3 }: --advise refused it before) and keeps them in its pp = 2 rows; the pp = 1 rows are
# at every micro-batch count too (the spec's m = 2 does not divide [1,1,8]'s one sequence a rank). Every candidate
# that fits is written back as a spec from its own spec lines (replacing the spec's mesh and pipeline lines) and costed
# by --cost: the step --cost prints is the advisor's (the same 6 digits in --json, 4 in the text of the best), so the
# ranking is --cost's; each stage's memory is --summary's arena + stash of that stage. A spec with recompute keeps it
# on every stage of its pp > 1 rows, each stage needing less memory. The output is the same on a second run.
adv_pipeline_search() {
    printf 'return { mode = "train",\n  mesh = { q = 2, pp = 2 },\n  pipeline = { microbatches = 2, layers = { 1, 3 } },\n  model = { layers = 4, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 8 } }\n' \
        >"$WORK/advs_pp.lua" && adv_machine 4 80 >"$WORK/m4.lua" &&
        $TG "$WORK/advs_pp.lua" --advise --json --machine "$WORK/m4.lua" >"$WORK/advs.json" &&
        $TG "$WORK/advs_pp.lua" --advise --machine "$WORK/m4.lua" >"$WORK/advs.txt" &&
        $TG "$WORK/advs_pp.lua" --advise --json --machine "$WORK/m4.lua" | cmp - "$WORK/advs.json" &&
        $TG "$WORK/advs_pp.lua" --advise --machine "$WORK/m4.lua" | cmp - "$WORK/advs.txt" || return 1
    cat "$WORK/advs.txt"
    grep -q "^pipeline stages: pp in {1, 2, 4} (pp > 1 divides the 8 ranks and the 4 layers, or is the spec's own pp = 2)" \
        "$WORK/advs.txt" || return 1
    "$PY" - "$WORK/advs.json" "$WORK/advs_pp.lua" "$WORK/advs" <<'PYEOF' || return 1
import json, sys
doc = json.load(open(sys.argv[1])); src = open(sys.argv[2]).read().split("\n")
cands = doc["candidates"]
assert doc["ranks"] == 8, doc["ranks"]
pps = {c["pp"] for c in cands}
assert pps == {1, 2, 4}, pps
for S in (1, 2, 4):   # every mesh of 8/S ranks and every m dividing the sequences per rank, in some placement; pp = 1
    G = 8 // S        # too, not only at the spec's m = 2 (which [1,1,8], one sequence a rank, does not allow)
    want = {(q, G // (q * q), m) for q in (1, 2) if G % (q * q) == 0 for m in range(1, 9) if (8 // (q * (G // (q * q)))) % m == 0}
    got = {(c["mesh"][0], c["mesh"][2], c["microbatches"]) for c in cands if c["pp"] == S and c["scheme"] == "tesseract"}
    assert want == got, (S, sorted(want), sorted(got))
n = 0
for k, c in enumerate(cands):
    if not c["fits"] or c["scheme"] != "tesseract":
        continue
    # the spec has no optimizer table: the line the advisor writes as a comment for an existing one becomes the table
    lines = c["spec_lines"].replace("-- and in optimizer = { ... }: shard = true,", "optimizer = { shard = true },").split("\n")
    open("%s_%d.lua" % (sys.argv[3], k), "w").write("\n".join([src[0]] + ["  " + l.strip() for l in lines] + src[3:]))
    n += 1
    if c["pp"] > 1:   # its own stages kept (layers { 1, 3 }) only where pp is the spec's
        assert ("layers = { 1, 3 }" in c["spec_lines"]) == (c["pp"] == 2), c["spec_lines"]
        assert len(c["stage_bytes"]) == c["pp"] and c["peak_bytes"] == max(c["stage_bytes"]), c
    else:
        assert "pipeline = { microbatches = %d }," % c["microbatches"] in c["spec_lines"], c["spec_lines"]
assert n >= 10 and [c["step_s"] for c in cands] == sorted(c["step_s"] for c in cands), n
PYEOF
    local f k
    for f in "$WORK"/advs_[0-9]*.lua; do
        k=${f##*_}; k=${k%.lua}
        $TG "$f" --cost --json --machine "$WORK/m4.lua" >"$f.cost" &&
            { ! grep -q "pp = [24]" "$f" || $TG "$f" --summary >"$f.sum"; } || { cat "$f"; return 1; }
        "$PY" - "$WORK/advs.json" "$k" "$f.cost" "$f.sum" <<'PYEOF' || { cat "$f"; return 1; }
import json, os, re, sys
c = json.load(open(sys.argv[1]))["candidates"][int(sys.argv[2])]
cost = json.load(open(sys.argv[3]))
if c["pp"] > 1:
    assert (cost["pp"], cost["microbatches"], cost["mesh"], cost["placement"]) == (c["pp"], c["microbatches"], c["mesh"], c["placement"]), cost
    step = cost["step_s"]
    mem = [int(x) for x in re.findall(r"^  stage \d+ memory: .* = (\d+)$", open(sys.argv[4]).read(), re.M)]
    assert mem == c["stage_bytes"], (mem, c["stage_bytes"])
    assert "%.6g" % step == "%.6g" % c["step_s"], ("--cost", step, "--advise", c["step_s"])
else:   # the sum of three phases, each printed to 6 digits, against the advisor's step printed to 6: within the roundings
    step = sum(p["streams_s"] for p in cost["phases"].values())
    assert abs(step - c["step_s"]) <= 1e-5 * c["step_s"], ("--cost", step, "--advise", c["step_s"])
PYEOF
    done
    # the best's step in the text is the one --cost prints for its spec lines (both %.4g)
    local best
    best=$(awk '$1 == 1 && $2 == "pp=4" { print $7 }' "$WORK/advs.txt")
    echo "best step: $best"
    [ -n "$best" ] && grep -qF "the fastest layout that fits, in the spec:
  mesh = { q = 1, d = 2, placement = \"row\", pp = 4 }," "$WORK/advs.txt" &&
        $TG "$WORK/advs_0.lua" --cost --machine "$WORK/m4.lua" | grep -qF "step, streams: $best s" || return 1
    sed 's/mesh = { q = 2, pp = 2 },/mesh = { q = 2 }, recompute = "full",/; s/, layers = { 1, 3 }//' "$WORK/advs_pp.lua" \
        >"$WORK/advs_rc.lua" && sed 's/ recompute = "full",//' "$WORK/advs_rc.lua" >"$WORK/advs_norc.lua" &&
        $TG "$WORK/advs_rc.lua" --advise --json --machine "$WORK/m4.lua" --ranks 8 >"$WORK/advs_rc.json" &&
        $TG "$WORK/advs_norc.lua" --advise --json --machine "$WORK/m4.lua" --ranks 8 >"$WORK/advs_norc.json" || return 1
    # recompute on every stage (each stage's first layers; docs/TRAINING.md "Pipeline stages"): every pipeline row of
    # the spec with recompute = "full" keeps it (rc = all layers), each of its stages needs less memory and its step
    # is no faster than the same row without recompute
    "$PY" - "$WORK/advs_rc.json" "$WORK/advs_norc.json" <<'PYEOF'
import json, sys
rc, no = (json.load(open(f)) for f in sys.argv[1:3])
key = lambda c: (c["pp"], tuple(c["mesh"]), c["placement"], c["microbatches"])
base = {key(c): c for c in no["candidates"] if c["pp"] > 1}
rows = [c for c in rc["candidates"] if c["pp"] > 1]
assert rows and len(rows) == len(base), (len(rows), len(base))
assert not [r for r in rc["refused"] if r["pp"] > 1], rc["refused"]
for c in rows:
    b = base[key(c)]
    assert c["recompute"] == 4 and b["recompute"] == 0, (c["recompute"], b["recompute"])
    assert all(x < y for x, y in zip(c["stage_bytes"], b["stage_bytes"])), (c["stage_bytes"], b["stage_bytes"])
    assert c["step_s"] >= b["step_s"], (c["step_s"], b["step_s"])
print(len(rows), "pipeline rows with recompute: less memory a stage, no faster")
PYEOF
}

# 251 ranks and 251 layers (a prime): pp = 251 stages of one rank is the only pipeline; its micro-batch counts are the
# divisors of 67026 = 6 x 11171, and from m = 11171 on the schedule has m (6 S - 4) > 2^24 steps, more than tessgen
# proves: 4 candidates the rules accept and the cost model does not cost. The table gives them one line (the count,
# the first three, the first one's reason); --json keeps each with its own reason.
adv_uncosted_grouped() {
    printf 'return { mode = "train",\n  mesh = { q = 1 },\n  model = { layers = 251, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 67026 } }\n' \
        >"$WORK/advu.lua" && adv_machine 4 80 >"$WORK/m4.lua" &&
        $TG "$WORK/advu.lua" --advise --ranks 251 --machine "$WORK/m4.lua" >"$WORK/advu.txt" &&
        $TG "$WORK/advu.lua" --advise --json --ranks 251 --machine "$WORK/m4.lua" >"$WORK/advu.json" || return 1
    grep "not costed" "$WORK/advu.txt"
    [ "$(grep -c "not costed" "$WORK/advu.txt")" = 1 ] &&
        grep -qxF "  not costed, 4 candidates for one rule (--json lists each): pp=251 x [1,1,1] row mb=11171, pp=251 x [1,1,1] row mb=22342, pp=251 x [1,1,1] row mb=33513 and 1 more; pp=251 x [1,1,1] row mb=11171: pipeline schedule: mesh.pp = 251 with pipeline.microbatches = 11171 makes 16778842 send, receive and compute steps, more than the 16777216 tessgen proves; use fewer stages or micro-batches" \
            "$WORK/advu.txt" || return 1
    "$PY" - "$WORK/advu.json" <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
unc = [r for r in doc["refused"] if r.get("costed") is False]
assert sorted(r["microbatches"] for r in unc) == [11171, 22342, 33513, 67026], unc
for r in unc:
    m = r["microbatches"]
    assert r["pp"] == 251 and "microbatches = %d makes %d send" % (m, m * (6 * 251 - 4)) in r["why"], r
assert sorted(c["microbatches"] for c in doc["candidates"]) == [1, 2, 3, 6], doc["candidates"]
PYEOF
}

check "advise: a training spec is ranked by its step, with tokens/s and MFU; the best layout's spec lines generate it" adv_train
check "advise: vocab_align pads every candidate's vocab blocks (more memory than unpadded) and the model line says so" \
    adv_vocab_align
check "advise: a layout that does not fit names the depth and the memory that make it fit" adv_fit_fix
check "advise: a training layout too big with the spec's options gets micro-batches, recomputation or sharding that fit; its spec lines generate a spec that fits" adv_options
check "advise: --json lists every [q,q,d] of P = 16, timed or refused, sorted by forward_s" adv_json
check "advise: a machine too small: fits false, the memory rule named" adv_small_memory
check "advise: cost model payload bytes = measured (--stats); placement dep sends the column bcasts across nodes" adv_bytes
check "advise: megatron: cost model payload bytes = measured (--stats) = 2 all-reduces of [T,C] per layer" adv_bytes_megatron
check "advise: a bad machine file is exit 1 naming file and field; misuse exit 2" adv_errors
check "advise: a mode = \"generate\" spec is refused (exit 2, nothing printed), not ranked as an inference forward without its KV cache" adv_generate
check "advise: both shipped machine profiles rank and cost" adv_profiles
check "advise: a rate of 5e-324 is refused naming the field; machines at the ends of every range give finite text and valid JSON" adv_extreme_machines
check "advise: --cost with 2 pipeline stages times each stage from its own class plans, on the nodes its world ranks are on, and the gpipe schedule with its point-to-point blocks" adv_pipeline_cost
# A pipeline layout that does not fit is tried once more with every layer of each stage recomputed and, with d > 1 in
# fp32, the AdamW state sharded over each stage's depth (docs/COST.md "Pipeline stages"): on a machine of 1.3e-5 GiB
# (13.9 kB) the spec's 4 tiny layers fit on 4 stages of [1,1,2] only so. The row says which options it took, fits, and
# its step is --cost's of the spec lines printed for it (recompute = "full", shard); a layout that fits as it is
# keeps no option; one that fits neither way says so
adv_pipeline_options() {
    printf 'return { mode = "train",\n  mesh = { q = 2 },\n  pipeline = { microbatches = 2 },\n  model = { layers = 4, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 8 } }\n' \
        >"$WORK/advo.lua" && adv_machine 4 1.3e-05 >"$WORK/m4s.lua" &&
        $TG "$WORK/advo.lua" --advise --json --machine "$WORK/m4s.lua" --ranks 8 >"$WORK/advo.json" &&
        $TG "$WORK/advo.lua" --advise --machine "$WORK/m4s.lua" --ranks 8 >"$WORK/advo.txt" || return 1
    cat "$WORK/advo.txt"
    printf 'return { mode = "train",\n  mesh = { q = 1, d = 2, placement = "row", pp = 4 }, recompute = "full", optimizer = { shard = true },\n  pipeline = { microbatches = 1 },\n  model = { layers = 4, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 8 } }\n' \
        >"$WORK/advo_best.lua" && $TG "$WORK/advo_best.lua" --cost --machine "$WORK/m4s.lua" >"$WORK/advo_best.cost" || return 1
    local step
    step=$(sed -n 's/^step, streams: \([^ ]*\) s .*/\1/p' "$WORK/advo_best.cost")
    grep -qF "the fastest layout that fits, in the spec:
  mesh = { q = 1, d = 2, placement = \"row\", pp = 4 },
  pipeline = { microbatches = 1 },
  recompute = \"full\",
  -- and in optimizer = { ... }: shard = true," "$WORK/advo.txt" &&
        grep -q "^  refused (memory) pp=2 x \[1,1,4\] row mb=1: .* nor with every layer recomputed and the AdamW state sharded$" \
            "$WORK/advo.txt" || return 1
    "$PY" - "$WORK/advo.json" "$step" <<'PYEOF'
import json, sys
cands = json.load(open(sys.argv[1]))["candidates"]
best = [c for c in cands if c["pp"] == 4 and c["mesh"] == [1, 1, 2] and c["microbatches"] == 1][0]
assert best["fits"] and best["recompute"] == 4 and best["shard"], best
assert "%.4g" % best["step_s"] == "%.4g" % float(sys.argv[2]), (best["step_s"], sys.argv[2])
plain = [c for c in cands if c["pp"] == 2 and c["mesh"] == [2, 2, 1] and c["microbatches"] == 4]
assert plain and all(c["fits"] and c["recompute"] == 0 and not c["shard"] for c in plain), plain
print("pp=4 x [1,1,2]: rc=all shard, fits, step", best["step_s"], "= --cost's", sys.argv[2])
PYEOF
}
check "advise: a pipeline layout that does not fit is tried once with every layer of each stage recomputed and the AdamW state sharded; taken when it fits (its spec lines and --cost's step), said when it does not" adv_pipeline_options
check "advise: a training spec is also ranked over pipeline stages and micro-batches (pp = 1 at every micro-batch count too); every candidate's step is the one --cost gives for its spec lines, its stage memory --summary's; a spec with stages is ranked, not refused; the same output twice" adv_pipeline_search
check "advise: the candidates the cost model does not cost are one line per rule, with their count and the first three; --json keeps each with its reason" adv_uncosted_grouped
