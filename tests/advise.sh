# tests/advise.sh - sourced by tests/run.sh: tessgen --advise and --cost (issue 11) through the command
# line (ASan build), checked against what this file derives itself:
#   candidates  every [q,q,d] with q*q*d = P appears (the divisors, computed here), each either timed or
#               refused with the spec rule's message; the list is sorted by forward_s; distinct
#               placements only; a machine too small makes fits false with the rule named
#   bytes       the payload the cost model counts for the forward equals what the generated program
#               moves (--stats, measured by the runtime) and, for placement "dep" on 4 ranks per node,
#               the bytes across nodes are the column broadcasts of DESIGN.md (4 L (4C^2 + 2CF) / q)
#   errors      a bad machine file is exit 1 naming the file and field; option misuse is exit 2
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

# the model's payload bytes = the runtime's measured bytes; placement dep: the column broadcasts cross nodes
adv_bytes() {
    local dir="$WORK/adv_dep"
    sed 's/q = 2, d = 2/q = 2, d = 2, placement = "dep"/' "$ADV_SPEC" >"$dir.lua" &&
        adv_machine 4 80 >"$WORK/m4.lua" &&
        $TG "$dir.lua" --cost --json --machine "$WORK/m4.lua" >"$WORK/cost.json" &&
        $TG "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null &&
        "$dir/run" --stats >"$WORK/stats.txt" &&
        "$PY" - "$WORK/cost.json" "$WORK/stats.txt" <<'PYEOF'
import json, sys
cost = json.load(open(sys.argv[1]))["phases"]["forward"]
lines = open(sys.argv[2]).read().splitlines()
k = next(i for i, l in enumerate(lines) if l.startswith("stats: bytes per collective kind"))
row0 = lines[k + 2].split()           # rank 0 (class (0,0), the class the model costs)
measured = int(row0[-1].split("/")[0])
model = cost["intra_bytes"] + cost["inter_bytes"]
assert model == measured, "cost model %d bytes, measured %d" % (model, measured)
L, C, F, q = 2, 48, 192, 2             # tests/specs/good/advise.lua
want = 4 * L * (4 * C * C + 2 * C * F) // q
assert cost["inter_bytes"] == want, "across nodes %d, want %d" % (cost["inter_bytes"], want)
print("forward payload", model, "bytes, across nodes", want)
PYEOF
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

adv_profiles() {
    $TG "$ADV_SPEC" --advise --machine specs/machines/meluxina.lua --ranks 16 | grep -q "^  1 " &&
        $TG "$ADV_SPEC" --advise --machine specs/machines/h100x8.lua --ranks 16 | grep -q "^  1 " &&
        $TG "$ADV_SPEC" --cost --machine specs/machines/h100x8.lua | grep -q "^  forward"
}

check "advise: --json lists every [q,q,d] of P = 16, timed or refused, sorted by forward_s" adv_json
check "advise: a machine too small: fits false, the memory rule named" adv_small_memory
check "advise: cost model payload bytes = measured (--stats); placement dep sends the column bcasts across nodes" adv_bytes
# the same for the megatron scheme: its world all-reduces, counted by the model and measured
adv_bytes_megatron() {
    local dir="$WORK/adv_meg"
    printf 'return { name = "adv_meg", scheme = "megatron", mesh = { p = 4 },\n  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 16 } }\n' >"$dir.lua" &&
        adv_machine 2 80 >"$WORK/m2.lua" &&
        $TG "$dir.lua" --cost --json --machine "$WORK/m2.lua" >"$WORK/costm.json" &&
        $TG "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" >/dev/null &&
        "$dir/run" --stats >"$WORK/statsm.txt" &&
        "$PY" - "$WORK/costm.json" "$WORK/statsm.txt" <<'PYEOF'
import json, sys
cost = json.load(open(sys.argv[1]))["phases"]["forward"]
lines = open(sys.argv[2]).read().splitlines()
k = next(i for i, l in enumerate(lines) if l.startswith("stats: bytes per collective kind"))
measured = int(lines[k + 2].split()[-1].split("/")[0])
model = cost["intra_bytes"] + cost["inter_bytes"]
assert model == measured, "cost model %d bytes, measured %d" % (model, measured)
T, C, L = 16 * 8, 48, 2                # two all-reduces of [T, C] per layer, all 4 ranks on 2 nodes
assert model == 4 * 2 * L * T * C and cost["inter_bytes"] == model, cost
print("forward payload", model, "bytes, all across nodes")
PYEOF
}

check "advise: megatron: cost model payload bytes = measured (--stats) = 2 all-reduces of [T,C] per layer" adv_bytes_megatron
check "advise: a bad machine file is exit 1 naming file and field; misuse exit 2" adv_errors
check "advise: both shipped machine profiles rank and cost" adv_profiles
