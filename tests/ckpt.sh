# tests/ckpt.sh - sourced by tests/e2e.sh after tests/sched.sh (whose programs it runs: the schedule and
# clipping make the resumed step number matter): training checkpoints (docs/TRAINING.md "Checkpoints").
#   resume      for each mesh: 6 steps straight against 3 steps + checkpoint + --resume for 3 more: the
#               printed losses (with lr and norm) and the --weights-out files bitwise identical, and the two
#               runs' final checkpoints byte for byte the same; the checkpoint's weights bitwise those of
#               --weights-out of the same run, and its moments present
#   every       --checkpoint-every 2 writes after steps 2 and 4 and, at the end, the checkpoint of step 6; when the
#               weights after step 4 overflow the loss of step 5 (the TESS_TEST_DIVERGE hook scales them by
#               1e30), the checkpoint of step 2 is kept, the message says so, and it resumes with a finite loss
#   reshard     a checkpoint of [2,2,1] resumed with --reshard on [1,1,2] and [2,2,2] for 0 steps writes
#               weights and moments bitwise equal to it; resumed for 3 steps its losses track the same-mesh
#               resume within 1e-4 relative (the cross-mesh tolerance of tests/train.sh: float32 sums in
#               other orders)
#   refusals    another model's checkpoint, a truncated one, one with a flipped data bit, one without a
#               moment tensor, one whose step is not a number, a weights file, another mesh without --reshard,
#               another dtype without --reshard (with it: continued, saying so), --resume with --weights:
#               each refused with its message, and the output files given are left as they were
#   asan, cuda  the sanitizer build of [2,2,1] on checkpoints; the CUDA host code under the CPU emulation
CK_MESHES=${TESS_CKPT_MESHES:-$SC_MESHES}
CK_DATA=(--input "$WORK/x.npy" --target "$WORK/sc_target.npy")

ck_steps() { grep '^step ' "$1" | cut -d' ' -f1-8; } # step k loss L lr X norm G (tok/s varies)

ck_resume() { # q d
    local dir="$WORK/sc_$1_$2" c="$WORK/ck_$1_$2"
    "$dir/run" --weights "$WORK/w.safetensors" "${CK_DATA[@]}" --steps 6 --weights-out "$c.w6.st" \
        --checkpoint-out "$c.ck6.st" >"$c.a.out" &&
        "$dir/run" --weights "$WORK/w.safetensors" "${CK_DATA[@]}" --steps 3 --checkpoint-out "$c.ck3.st" \
            >"$c.b.out" &&
        "$dir/run" --resume "$c.ck3.st" "${CK_DATA[@]}" --steps 3 --weights-out "$c.w6r.st" \
            --checkpoint-out "$c.ck6r.st" >"$c.c.out" || return 1
    cat "$c.a.out" "$c.b.out" "$c.c.out"
    grep -q "resumed from $c.ck3.st after step 3" "$c.c.out" || { echo "no 'resumed ... after step 3'"; return 1; }
    ck_steps "$c.a.out" >"$c.a.steps"
    { ck_steps "$c.b.out"; ck_steps "$c.c.out"; } >"$c.bc.steps"
    [ "$(wc -l <"$c.a.steps")" = 6 ] || { echo "want 6 step lines"; return 1; }
    diff "$c.a.steps" "$c.bc.steps" || { echo "the resumed run printed other losses"; return 1; }
    grep "^after step 6" "$c.a.out" >"$c.a.after" && grep "^after step 6" "$c.c.out" | diff "$c.a.after" - ||
        { echo "final losses differ"; return 1; }
    cmp "$c.w6.st" "$c.w6r.st" || { echo "--weights-out differs"; return 1; }
    cmp "$c.ck6.st" "$c.ck6r.st" || { echo "the final checkpoints differ"; return 1; }
    "$PY" - "$c.ck6.st" "$c.w6.st" <<'PYEOF'
import json, struct, sys
def load(p):
    raw = open(p, "rb").read(); (n,) = struct.unpack("<Q", raw[:8]); h = json.loads(raw[8:8 + n])
    return h.pop("__metadata__", {}), {k: (v["dtype"], v["shape"], raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
meta, ck = load(sys.argv[1])
_, w = load(sys.argv[2])
ok = len(w) == 24 and len(ck) == 3 * len(w)
for k, v in w.items():
    if ck.get(k) != v:
        print("checkpoint tensor %s differs from --weights-out" % k); ok = False
    for pre in ("adam_m.", "adam_v."):
        t = ck.get(pre + k)
        if not t or t[0] != "F32" or t[1] != v[1]:
            print("moment %s%s missing or of another shape" % (pre, k)); ok = False
for key, want in (("format", "tessgen-checkpoint-1"), ("step", "6"), ("seed", "1"), ("data_pos", ""), ("model.hidden", "48"), ("dtype", "fp32"),
                  ("optimizer.clip", "0.050000000000000003"), ("optimizer.warmup", "2")):
    if meta.get(key) != want:
        print("metadata %s = %r, want %r" % (key, meta.get(key), want)); ok = False
print("checkpoint: %d tensors, weights equal to --weights-out, metadata %s" % (len(ck), sorted(meta)))
sys.exit(0 if ok else 1)
PYEOF
}

ck_every() {
    local dir="$WORK/sc_2_1" c="$WORK/ck_every"
    "$dir/run" --weights "$WORK/w.safetensors" "${CK_DATA[@]}" --steps 6 --checkpoint-every 2 \
        --checkpoint-out "$c.st" >"$c.out" || return 1
    cat "$c.out"
    [ "$(grep -c "^wrote $c.st (checkpoint after step [246])" "$c.out")" = 3 ] ||
        { echo "want checkpoints after steps 2, 4 and 6"; return 1; }
    cmp "$c.st" "$WORK/ck_2_1.ck6.st" || { echo "the last checkpoint differs from the one of a plain 6-step run"; return 1; }
    ! ls "$c".st.tmp.* "$c".st.pending >/dev/null 2>&1 || { echo "a temp file was left"; return 1; }
}

ck_every_diverged() {
    local dir="$WORK/sc_2_1" c="$WORK/ck_div"
    rm -f "$c.st"
    TESS_TEST_DIVERGE=4 "$dir/run" --weights "$WORK/w.safetensors" "${CK_DATA[@]}" --steps 6 --checkpoint-every 2 \
        --checkpoint-out "$c.st" >"$c.out" 2>"$c.err"
    local rc=$?
    cat "$c.out" "$c.err"
    [ $rc -eq 5 ] || { echo "exit $rc, want 5"; return 1; }
    grep -qF -- "--checkpoint-out $c.st holds the checkpoint after step 2 (the last whose next step had a finite loss and gradients); the checkpoint after step 4 was discarded" "$c.err" &&
        ! grep -q "nothing was written" "$c.err" || { echo "the message does not say what was kept"; return 1; }
    grep -aq '"step":"2"' "$c.st" || { echo "$c.st does not hold step 2"; return 1; }
    ! ls "$c".st.tmp.* "$c".st.pending >/dev/null 2>&1 || { echo "a temp or pending file was left"; return 1; }
    "$dir/run" --resume "$c.st" "${CK_DATA[@]}" --steps 1 >"$c.r.out" || return 1
    grep -q "^step 3 loss [0-9]" "$c.r.out" || { cat "$c.r.out"; echo "no finite loss at step 3"; return 1; }
}

# tensors of two checkpoints (or of a checkpoint's weights and a weights file) bitwise equal
ck_same_tensors() { # A B [weights-only]
    "$PY" - "$@" <<'PYEOF'
import json, struct, sys
def load(p):
    raw = open(p, "rb").read(); (n,) = struct.unpack("<Q", raw[:8]); h = json.loads(raw[8:8 + n]); h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
a, b = load(sys.argv[1]), load(sys.argv[2])
if len(sys.argv) > 3:
    a = {k: v for k, v in a.items() if not k.startswith("adam_")}
bad = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
print("%d tensors, %d differ %s" % (len(a), len(bad), bad[:4]))
sys.exit(1 if bad or not a else 0)
PYEOF
}

ck_reshard0() { # q d: the [2,2,1] checkpoint of step 3 on [q,q,d], 0 steps
    local dir="$WORK/sc_$1_$2" c="$WORK/ck_rs_$1_$2" src="$WORK/ck_2_1.ck3.st"
    "$dir/run" --resume "$src" --reshard --input "$WORK/x.npy" --weights-out "$c.w.st" --checkpoint-out "$c.ck.st" ||
        return 1
    ck_same_tensors "$src" "$c.w.st" weights && ck_same_tensors "$src" "$c.ck.st"
}

ck_reshard_track() { # q d: 3 steps after the [2,2,1] checkpoint on [q,q,d] against the same-mesh resume
    local dir="$WORK/sc_$1_$2" c="$WORK/ck_rt_$1_$2"
    "$dir/run" --resume "$WORK/ck_2_1.ck3.st" --reshard "${CK_DATA[@]}" --steps 3 >"$c.out" || return 1
    "$PY" - "$c.out" "$WORK/ck_2_1.c.out" <<'PYEOF'
import sys
def losses(f):
    return {int(l.split()[1]): float(l.split()[3]) for l in open(f) if l.startswith("step ")}
got, ref = losses(sys.argv[1]), losses(sys.argv[2])
ok = sorted(got) == sorted(ref) == [4, 5, 6]
for k in sorted(ref):
    rel = abs(got.get(k, 0) - ref[k]) / abs(ref[k])
    print("step %d: loss %.9g, same-mesh resume %.9g (rel %.1e)" % (k, got.get(k, 0), ref[k], rel))
    ok = ok and rel <= 1e-4
sys.exit(0 if ok else 1)
PYEOF
}

# refused OUTPUTS: rc 1 (2 for usage), the message, and --weights-out / --checkpoint-out as they were
ck_refused() { # want_rc message run-args...
    local want_rc=$1 want=$2 dir="$WORK/sc_${CK_ON:-2_1}"
    shift 2
    printf 'old weights\n' >"$WORK/ck_keep_w.st"
    cp "$WORK/ck_2_1.ck3.st" "$WORK/ck_keep_ck.st"
    local before
    before=$(sha256sum "$WORK/ck_keep_w.st" "$WORK/ck_keep_ck.st")
    "$dir/run" "${CK_DATA[@]}" --steps 2 --weights-out "$WORK/ck_keep_w.st" --checkpoint-out "$WORK/ck_keep_ck.st" \
        "$@" >"$WORK/ck_ref.out" 2>"$WORK/ck_ref.err"
    local rc=$?
    cat "$WORK/ck_ref.out" "$WORK/ck_ref.err"
    [ $rc -eq "$want_rc" ] || { echo "exit $rc, want $want_rc"; return 1; }
    grep -qF -- "$want" "$WORK/ck_ref.err" || { echo "message lacks: $want"; return 1; }
    ! grep -q '^step ' "$WORK/ck_ref.out" || { echo "a step ran"; return 1; }
    [ "$before" = "$(sha256sum "$WORK/ck_keep_w.st" "$WORK/ck_keep_ck.st")" ] || { echo "an output changed"; return 1; }
}

# --reshard converts the dtype: the resumed line names both, weights and moments load bitwise, and the checkpoint
# written records the program's dtype
ck_redtype() {
    local c="$WORK/ck_redtype"
    "$WORK/sc_2_1/run" --resume "$WORK/ck_bf16.st" --reshard --input "$WORK/x.npy" --checkpoint-out "$c.st" >"$c.out" ||
        return 1
    cat "$c.out"
    grep -q "^resumed from $WORK/ck_bf16.st after step 3 (seed 1; trained in bf16, continued in fp32)" "$c.out" &&
        ck_same_tensors "$WORK/ck_bf16.st" "$c.st" && grep -aqF '"dtype":"fp32"' "$c.st"
}

ck_refused_on_1_1_2() { CK_ON=1_2 ck_refused "$@"; }

for m in $CK_MESHES; do
    q=${m%,*}
    d=${m#*,}
    if [ -x "$WORK/sc_${q}_$d/bin/model" ]; then
        check "ckpt: mesh [$q,$q,$d] 6 steps == 3 steps + checkpoint + --resume 3: losses, --weights-out and checkpoints bitwise" \
            ck_resume "$q" "$d"
    fi
done
if [ -f "$WORK/ck_2_1.ck3.st" ] && [ -f "$WORK/ck_2_1.ck6.st" ]; then
    CK=$WORK/ck_2_1.ck3.st
    check "ckpt: --checkpoint-every 2 writes after steps 2, 4 and 6, the last equal to a plain run's" ck_every
    check "ckpt: --checkpoint-every keeps the last checkpoint whose next step is finite when the run diverges, and says so" \
        ck_every_diverged
    for m in 1,2 2,2; do
        q=${m%,*}
        d=${m#*,}
        [ -x "$WORK/sc_${q}_$d/bin/model" ] || continue
        check "ckpt: a [2,2,1] checkpoint resumed with --reshard on [$q,$q,$d] for 0 steps: weights and moments bitwise" \
            ck_reshard0 "$q" "$d"
        check "ckpt: a [2,2,1] checkpoint resumed with --reshard on [$q,$q,$d]: 3 steps track the same-mesh resume (1e-4)" \
            ck_reshard_track "$q" "$d"
    done
    "$PY" $REF weights --layers 2 --hidden 64 --heads 4 --ffn 256 --seq 8 --batch 12 --seed 1 --out "$WORK/ck_other_w.st"
    "$PY" tests/ref/mkbad.py meta "$CK" "$WORK/ck_other.st" model.hidden 64
    "$PY" tests/ref/mkbad.py truncate "$CK" "$WORK/ck_trunc.st" 1000
    "$PY" tests/ref/mkbad.py flip "$CK" "$WORK/ck_flip.st" 12345
    "$PY" tests/ref/mkbad.py drop "$CK" "$WORK/ck_nov.st" adam_v.h.1.ln_2.bias
    check "ckpt: another model's checkpoint is refused naming the field and both values; outputs untouched" \
        ck_refused 1 "ck_other.st: the checkpoint is of another model: model.hidden = 64 in the checkpoint, 48 in this program" \
        --resume "$WORK/ck_other.st"
    check "ckpt: a truncated checkpoint is refused; outputs untouched" \
        ck_refused 1 "ck_trunc.st: tensor" --resume "$WORK/ck_trunc.st"
    check "ckpt: a checkpoint with one flipped data bit fails its checksum; outputs untouched" \
        ck_refused 1 "ck_flip.st: the tensors' checksum is" --resume "$WORK/ck_flip.st"
    check "ckpt: a checkpoint without a moment tensor is refused naming it; outputs untouched" \
        ck_refused 1 "ck_nov.st: tensor adam_v.h.1.ln_2.bias is missing" --resume "$WORK/ck_nov.st"
    check "ckpt: a weights file given to --resume is refused (use --weights); outputs untouched" \
        ck_refused 1 "w.safetensors: not a tessgen checkpoint" --resume "$WORK/w.safetensors"
    check "ckpt: a [2,2,1] checkpoint on [1,1,2] without --reshard is refused naming both meshes; outputs untouched" \
        ck_refused_on_1_1_2 1 "ck_2_1.ck3.st: the checkpoint was written on mesh [2,2,1] (rank strides i,j,k = 2,1,4), this program runs mesh [1,1,2]" \
        --resume "$CK"
    "$PY" tests/ref/mkbad.py meta "$CK" "$WORK/ck_bf16.st" dtype bf16
    check "ckpt: a bf16 checkpoint on an fp32 program without --reshard is refused naming both dtypes; outputs untouched" \
        ck_refused 1 "ck_bf16.st: the checkpoint was trained with dtype = \"bf16\", this program computes with dtype = \"fp32\" (sched_q2_d1, from $WORK/sc_2_1.lua): add --reshard to continue in fp32" \
        --resume "$WORK/ck_bf16.st"
    check "ckpt: a bf16 checkpoint resumed with --reshard on an fp32 program says so and loads bitwise" ck_redtype
    "$PY" tests/ref/mkbad.py meta "$CK" "$WORK/ck_step.st" step 3x
    check "ckpt: a checkpoint whose step is not an integer is refused; outputs untouched" \
        ck_refused 1 "ck_step.st: the checkpoint's \"step\" is missing or not an integer" --resume "$WORK/ck_step.st"
    check "ckpt: --resume with --weights is refused (exit 2); outputs untouched" \
        ck_refused 2 "--resume and --weights exclude each other" --resume "$CK" --weights "$WORK/w.safetensors"
fi

# the sanitizer build of [2,2,1]: periodic checkpoints, a resume and a refused checkpoint, no report
ck_asan() {
    local dir="$WORK/sc_2_1" c="$WORK/ck_asan"
    ninja -C "$dir" asan >/dev/null || return 1
    TESS_VARIANT=asan "$dir/run" --weights "$WORK/w.safetensors" "${CK_DATA[@]}" --steps 3 --checkpoint-every 2 \
        --checkpoint-out "$c.st" --quiet 2>"$c.err" &&
        TESS_VARIANT=asan "$dir/run" --resume "$c.st" "${CK_DATA[@]}" --steps 2 --weights-out "$c.w.st" \
            --checkpoint-out "$c.2.st" --quiet 2>>"$c.err" || { cat "$c.err"; return 1; }
    TESS_VARIANT=asan "$dir/run" --resume "$WORK/ck_flip.st" "${CK_DATA[@]}" --steps 1 --quiet 2>>"$c.err"
    cat "$c.err"
    grep -q "checksum" "$c.err" && ! grep -q "ERROR: AddressSanitizer\|runtime error" "$c.err"
}
if [ -f "$WORK/ck_flip.st" ]; then
    check "ckpt: ASan+UBSan build: --checkpoint-every, --resume and a refused checkpoint run clean" ck_asan
fi

# the CUDA backend's host code under the CPU emulation of its streams (tests/cuda/emu.cc), [2,2,1] with the
# schedule and clipping: each step's lr printed alike, loss and norm within 1e-6 of the CPU program (measured
# 2e-8: the emulated kernels round like the CPU ones but sum in other orders), replicas identical, and
# 3 + checkpoint + resume 3 bitwise equal to 6 steps (the moments and weights come back from the run arena)
ck_cuda_emu() {
    local dir="$WORK/ck_cu" np=4 flags="--oversubscribe --bind-to none"
    [ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
    sched_spec 2 1 | sed 's/name = "sched_q2_d1"/name = "ck_cu", backends = { "cpu", "cuda" }/' >"$dir.lua" &&
        env -u TESS_CUDA_ARCH TESS_BACKENDS=cpu,cuda bin/tessgen "$dir.lua" -o "$dir" --quiet &&
        tests/cuda/emu_build.sh "$dir" emu model-emu >/dev/null || return 1
    local run="mpirun $flags -np $np $dir/bin/model-emu"
    # shellcheck disable=SC2086
    TESS_EMU_ORDER=comm $run --weights "$WORK/w.safetensors" "${CK_DATA[@]}" --steps 6 --replica-check \
        --weights-out "$dir.w6.st" >"$dir.a.out" &&
        TESS_EMU_ORDER=comm $run --weights "$WORK/w.safetensors" "${CK_DATA[@]}" --steps 3 \
            --checkpoint-out "$dir.ck3.st" >"$dir.b.out" &&
        TESS_EMU_ORDER=comm $run --resume "$dir.ck3.st" "${CK_DATA[@]}" --steps 3 --weights-out "$dir.w6r.st" \
            >"$dir.c.out" || return 1
    cat "$dir.a.out" "$dir.c.out"
    grep -q "bitwise identical" "$dir.a.out" || return 1
    cmp "$dir.w6.st" "$dir.w6r.st" || { echo "the resumed emulated run differs"; return 1; }
    { ck_steps "$dir.b.out"; ck_steps "$dir.c.out"; } | diff <(ck_steps "$dir.a.out") - || return 1
    "$PY" - "$dir.a.out" "$WORK/ck_2_1.a.out" <<'PYEOF'
import sys
def parse(f):
    return [dict(zip(l.split()[0::2], l.split()[1::2])) for l in open(f) if l.startswith("step ")]
emu, cpu = parse(sys.argv[1]), parse(sys.argv[2])
ok = len(emu) == len(cpu) == 6
for e, c in zip(emu, cpu):
    rel = {f: abs(float(e[f]) - float(c[f])) / abs(float(c[f])) for f in ("loss", "norm")}
    print("step %s: lr %s / %s, loss rel %.1e, norm rel %.1e" % (e["step"], e["lr"], c["lr"], rel["loss"], rel["norm"]))
    ok = ok and e["lr"] == c["lr"] and max(rel.values()) <= 1e-6
sys.exit(0 if ok else 1)
PYEOF
}
if [ -f "$WORK/ck_2_1.a.out" ] && command -v mpicxx >/dev/null; then
    check "ckpt: CUDA emulation [2,2,1]: schedule and clipping as the CPU program's (1e-6), resume bitwise" ck_cuda_emu
fi
