# tests/e2e.sh - sourced by tests/run.sh: generated programs, built and run
# under mpirun, against the independent float64 numpy reference.
#
# One model (2 layers, hidden 48, 12 heads, ffn 192, seq 8, batch 12: every
# divisibility rule holds for all meshes below) with one set of random weights
# and one input; the reference output is computed once. For each mesh:
# generate, build, poison the output file (an all-NaN array of the right
# shape, so a run that writes nothing cannot pass), run with --bytes (exit 3
# if any rank moved other than the planned bytes), compare (relative
# Frobenius error < 1e-4, NaN fails).
. tests/e2e_ref.sh # E2E_MESHES, DIMS, REF, poison (tests/bf16_compute.sh uses them too)
# meshes run again with another mesh.placement (rank numbering; mesh.h): q,d,placement
E2E_PLACED=${TESS_E2E_PLACED:-"2,2,col 2,3,dep 3,2,dep"}

e2e_spec() { # q d [placement] -> spec file on stdout
    cat <<SPEC
return {
  name = "e2e_q$1_d$2",
  mesh = { q = $1, d = $2${3:+, placement = \"$3\"} },
  model = { layers = 2, hidden = 48, heads = 12, ffn = 192, seq = 8, batch = 12, eps = 1e-5 },
}
SPEC
}

e2e_setup() {
    "$PY" $REF selftest &&
        "$PY" $REF weights $DIMS --seed 11 --out "$WORK/w.safetensors" &&
        "$PY" $REF input $DIMS --seed 11 --out "$WORK/x.npy" &&
        "$PY" $REF forward $DIMS --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --out "$WORK/ref.npy" &&
        "$PY" $REF weights $DIMS --seed 5 --synthetic --out "$WORK/ws.safetensors" &&
        "$PY" $REF input $DIMS --seed 5 --synthetic --out "$WORK/xs.npy" &&
        "$PY" $REF forward $DIMS --weights "$WORK/ws.safetensors" --input "$WORK/xs.npy" --out "$WORK/ref_synth.npy"
}

e2e_build() { # q d [placement] -> $WORK/e2e_q_d[_placement] built
    local dir="$WORK/e2e_$1_$2${3:+_$3}"
    e2e_spec "$1" "$2" "${3:-}" >"$dir.lua" &&
        bin/tessgen "$dir.lua" -o "$dir" --quiet &&
        ninja -C "$dir" >"$dir.ninja.log"
}

# the shared runtime's folder cannot be written (a checkout owned by someone else): exit 1 with what to do, no object
e2e_rt_readonly() {
    local ck="$WORK/ro_checkout" run=()
    rm -rf "$ck" "$WORK/ro_obj" && mkdir -p "$ck/scripts" "$ck/build" && cp scripts/rt_shared.sh "$ck/scripts/" &&
        echo "cc" >"$WORK/ro_cmd" && chmod a-w "$ck/build" && chmod a+rx "$WORK" || return 1
    # root writes anywhere: run as nobody there (the suite runs as root in CI)
    [ "$(id -u)" = 0 ] && run=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    "${run[@]}" "$ck/scripts/rt_shared.sh" "$WORK/ro_obj" runtime c tr_err "$WORK/ro_cmd" >"$WORK/ro.out" 2>&1
    local rc=$?
    chmod u+w "$ck/build"
    cat "$WORK/ro.out"
    [ $rc = 1 ] && grep -q "rt_shared: cannot write $ck/build/shared-rt: .*build as a user who can write it" "$WORK/ro.out" &&
        [ ! -e "$WORK/ro_obj/tr_err.o" ]
}

# one command text run by two compilers (the GPU check's rehearsal puts the carried Open MPI's mpicc first on PATH while
# other groups build beside it): each gets a shared folder of its own, so the second compiles its objects rather than
# taking the first's (checked in a checkout of its own: rt_shared.sh and one runtime source, a wrapper cc on PATH)
e2e_rt_compiler() {
    local ck="$WORK/cc_checkout" real
    real=$(command -v cc) || return 1
    rm -rf "$ck" "$WORK/cc_obj1" "$WORK/cc_obj2" && mkdir -p "$ck/scripts" "$ck/runtime" "$WORK/altcc" &&
        cp scripts/rt_shared.sh "$ck/scripts/" && cp runtime/tr_err.c runtime/tr_err.h "$ck/runtime/" &&
        printf '#!/bin/sh\nexec %s "$@"\n' "$real" >"$WORK/altcc/cc" && chmod +x "$WORK/altcc/cc" &&
        echo "cc -std=c11 -D_XOPEN_SOURCE=700 -O2 -MMD -MF" >"$WORK/cc_cmd" || return 1
    "$ck/scripts/rt_shared.sh" "$WORK/cc_obj1" runtime c tr_err "$WORK/cc_cmd" >"$WORK/cc1.out" 2>&1 &&
        PATH="$WORK/altcc:$PATH" "$ck/scripts/rt_shared.sh" "$WORK/cc_obj2" runtime c tr_err "$WORK/cc_cmd" \
            >"$WORK/cc2.out" 2>&1 || { cat "$WORK"/cc[12].out; return 1; }
    cat "$WORK/cc1.out" "$WORK/cc2.out"
    ls "$ck/build/shared-rt"
    grep -q "once for every output" "$WORK/cc1.out" && grep -q "once for every output" "$WORK/cc2.out" &&
        [ "$(find "$ck/build/shared-rt" -name tr_err.o | wc -l)" = 2 ]
}

# the runtime is compiled once for all these outputs (scripts/rt_shared.sh, in build/shared-rt of this checkout):
# after the first mesh's build no output compiles a runtime source, and each output's objects are the shared ones
e2e_rt_shared() {
    local first="" f n
    for f in "$WORK"/e2e_*.ninja.log; do
        n=${f%.ninja.log}
        [ -d "$n/obj/rt" ] || continue
        if [ -z "$first" ]; then first=$n; continue; fi
        if grep "CC .*once for every output" "$f"; then echo "$(basename "$n") compiled the runtime again"; return 1; fi
        for o in "$first"/obj/rt/tr_*.o; do
            case $o in *tr_launch.o) continue ;; esac # per output: its -DTR_LAUNCH_DIR
            cmp "$o" "$n/obj/rt/$(basename "$o")" || return 1
        done
    done
    [ -n "$first" ] || { echo "no e2e output was built"; return 1; }
    for o in "$first"/obj/rt/tr_*.o; do
        case $o in *tr_launch.o) continue ;; esac
        # shellcheck disable=SC2012 # the one command's folder holding this object
        ls "$ROOT"/build/shared-rt/*/"$(basename "$o")" 2>/dev/null | while read -r s; do cmp -s "$o" "$s" && echo "$s"; done |
            grep -q . || { echo "no shared copy of $(basename "$o") in build/shared-rt/*"; return 1; }
    done
}

e2e_mesh() { # q d [placement]
    local dir="$WORK/e2e_$1_$2${3:+_$3}"
    poison "$dir/y.npy" &&
        "$dir/run" --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --output "$dir/y.npy" --bytes --quiet &&
        "$PY" $REF compare --ref "$WORK/ref.npy" --got "$dir/y.npy" --tol 1e-4 --expect-f32 --label "[$1,$1,$2]"
}

# --repeat N times the forward, then writes --output of one forward of the input: each repeat restores the input
# block the in-place forward overwrote (from a copy: on the CPU the run arena is the host arena, and the output was
# the forward applied N+1 times)
e2e_repeat() {
    local dir="$WORK/e2e_$1_$2"
    poison "$dir/yr.npy" &&
        "$dir/run" --weights "$WORK/w.safetensors" --input "$WORK/x.npy" --repeat 3 --output "$dir/yr.npy" --bytes \
            --quiet &&
        "$PY" $REF compare --ref "$WORK/ref.npy" --got "$dir/yr.npy" --tol 1e-4 --expect-f32 --label "--repeat 3 [$1,$1,$2]"
}

# without --weights/--input the runtime makes the documented synthetic tensors
e2e_synthetic() {
    local dir="$WORK/e2e_$1_$2"
    poison "$dir/ys.npy" &&
        "$dir/run" --seed 5 --output "$dir/ys.npy" --quiet &&
        "$PY" $REF compare --ref "$WORK/ref_synth.npy" --got "$dir/ys.npy" --tol 1e-4 --expect-f32
}

if wanted "e2e|files|asan|train|bf16|sched|ckpt"; then
    if e2e_setup >"$WORK/log" 2>&1; then
        ok "e2e: float64 reference selftest and inputs"
        for m in $E2E_MESHES; do
            q=${m%,*}
            d=${m#*,}
            wanted "e2e: mesh \[$q,$q,$d\]|files|asan" || continue
            if e2e_build "$q" "$d" >"$WORK/log" 2>&1; then
                check "e2e: mesh [$q,$q,$d] matches the float64 reference, planned bytes" e2e_mesh "$q" "$d"
            else
                notok "e2e: mesh [$q,$q,$d] generate and build" "$WORK/log"
            fi
        done
        for m in $E2E_PLACED; do
            IFS=, read -r q d pl <<<"$m"
            wanted "e2e: mesh \[$q,$q,$d\] placement|files|asan" || continue
            if e2e_build "$q" "$d" "$pl" >"$WORK/log" 2>&1; then
                check "e2e: mesh [$q,$q,$d] placement $pl matches the float64 reference, planned bytes" \
                    e2e_mesh "$q" "$d" "$pl"
            else
                notok "e2e: mesh [$q,$q,$d] placement $pl generate and build" "$WORK/log"
            fi
        done
        wanted "e2e: mesh" && check "e2e: a tessgen checkout the builder cannot write stops the runtime's build with a message naming it and the fix" \
            e2e_rt_readonly
        wanted "e2e: mesh" && check "e2e: the runtime is compiled once for every mesh's program (scripts/rt_shared.sh), each output's objects the shared ones" \
            e2e_rt_shared
        wanted "e2e: mesh" && check "e2e: one runtime compile command run by two compilers (another cc first on PATH) gets a shared folder each, the second compiling its own objects" \
            e2e_rt_compiler
        if [ -x "$WORK/e2e_2_2/bin/model" ]; then
            check "e2e: synthetic weights and input (seed 5) match the documented generator" e2e_synthetic 2 2
            check "e2e: --repeat 3 then --output on [2,2,2]: the output is one forward's (the input restored before each repeat), bytes as planned" \
                e2e_repeat 2 2
            . tests/files.sh
        fi
        wanted "train" && . tests/train.sh
        wanted "bf16" && . tests/bf16.sh
        wanted "sched|ckpt" && . tests/sched.sh # ckpt.sh uses its builds
        wanted "ckpt" && . tests/ckpt.sh
    else
        notok "e2e: float64 reference selftest and inputs" "$WORK/log"
    fi
fi
