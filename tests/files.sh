# tests/files.sh - sourced by tests/e2e.sh once mesh [2,2,2] is built: bad
# weights and input files, bad options and a wrong world size must each stop
# every rank with exit status 1 (2 for the world size), a message naming the
# file and the problem, and no output file; then the same program under
# ASan+UBSan.
M="$WORK/e2e_2_2"
MK="$PY tests/ref/mkbad.py"
W="$WORK/w.safetensors"
X="$WORK/x.npy"

# refused WANT_RC WANT_TEXT RUN-ARGS...: the run fails as expected and writes no output
refused() {
    local want_rc=$1 want=$2
    shift 2
    rm -f "$WORK/never.npy"
    "$M/run" --output "$WORK/never.npy" --quiet "$@" >"$WORK/run.out" 2>"$WORK/run.err"
    local rc=$?
    cat "$WORK/run.err"
    [ $rc -eq "$want_rc" ] || { echo "exit $rc, want $want_rc"; return 1; }
    grep -qF -- "$want" "$WORK/run.err" || { echo "message lacks: $want"; return 1; }
    [ ! -e "$WORK/never.npy" ] || { echo "an output was written"; return 1; }
    ! ls "$WORK"/never.npy.* >/dev/null 2>&1 || { echo "a temporary output was left"; return 1; }
}

$MK truncate "$W" "$WORK/trunc.st" 100
$MK drop "$W" "$WORK/drop.st" h.1.mlp.c_fc.bias
$MK f64 "$W" "$WORK/f64.st" h.0.attn.c_proj.weight
$MK lie "$W" "$WORK/lie.st" h.0.ln_2.bias
$MK badjson "$W" "$WORK/badjson.st"
"$PY" tests/ref/tessref.py weights --layers 2 --hidden 64 --heads 4 --ffn 256 --seq 8 --batch 12 --seed 1 \
    --out "$WORK/wrongshape.st"
"$PY" tests/ref/tessref.py input --layers 2 --hidden 48 --heads 12 --ffn 192 --seq 8 --batch 6 --seed 1 \
    --out "$WORK/x_b6.npy"
$MK npy-f64 "$X" "$WORK/x64.npy"
$MK npy-fortran "$X" "$WORK/xf.npy"
head -c 100 "$X" >"$WORK/xtrunc.npy"

check "files: missing weights file is named" refused 1 "$WORK/none.st" --weights "$WORK/none.st" --input "$X"
check "files: truncated weights file" refused 1 "trunc.st" --weights "$WORK/trunc.st" --input "$X"
check "files: missing tensor is named" refused 1 "h.1.mlp.c_fc.bias" --weights "$WORK/drop.st" --input "$X"
check "files: F64 tensor is refused naming the dtype" refused 1 "F64" --weights "$WORK/f64.st" --input "$X"
check "files: header that lies about a shape" refused 1 "h.0.ln_2.bias" --weights "$WORK/lie.st" --input "$X"
check "files: header that is not JSON" refused 1 "badjson.st" --weights "$WORK/badjson.st" --input "$X"
check "files: weights of another model shape are named in one line" refused 1 \
    "wrongshape.st: these weights are another model: the file holds 2 layers, hidden 64, ffn 256 (blocks only, no embedding); this program (e2e_q2_d2) was built for 2 layers, hidden 48, ffn 192" \
    --weights "$WORK/wrongshape.st" --input "$X"
check "files: input of the wrong shape" refused 1 "x_b6.npy" --weights "$W" --input "$WORK/x_b6.npy"
check "files: float64 input names its dtype" refused 1 "<f8" --weights "$W" --input "$WORK/x64.npy"
check "files: Fortran-order input" refused 1 "fortran" --weights "$W" --input "$WORK/xf.npy"
check "files: truncated input" refused 1 "xtrunc.npy" --weights "$W" --input "$WORK/xtrunc.npy"
check "files: unknown run option" refused 2 "--bogus" --bogus
check "files: output into a missing directory fails cleanly" refused 1 "nodir" --weights "$W" --input "$X" --output "$WORK/nodir/y.npy"

# issue 12: option values, output paths checked before the run, weights of a deeper model, non-finite inputs
opt_value_is_option() {
    local d="$WORK/optdir"
    rm -rf "$d" && mkdir -p "$d" && cd "$d" || return 1
    "$M/run" --weights "$W" --input "$X" --output --quiet >"$WORK/opt.out" 2>&1
    local rc=$?
    cd "$ROOT" || return 1
    cat "$WORK/opt.out"
    [ $rc -eq 2 ] && grep -q -- "--output needs a file name, not the option --quiet" "$WORK/opt.out" &&
        [ -z "$(ls -A "$d")" ]
}
check "files: issue 12.7, an option value that is an option is refused (run --output --quiet)" opt_value_is_option

# every output is checked before anything runs: --repeat prints its timing only after running
outputs_first() { # OPTION PATH WANT
    mkdir -p "$WORK/adir"
    "$M/run" --weights "$W" --input "$X" --repeat 2 "$1" "$2" >"$WORK/of.out" 2>"$WORK/of.err"
    local rc=$?
    cat "$WORK/of.out" "$WORK/of.err"
    [ $rc -eq 1 ] || { echo "exit $rc, want 1"; return 1; }
    grep -qF -- "$1 $2: $3" "$WORK/of.err" || { echo "message lacks: $1 $2: $3"; return 1; }
    ! grep -q "median" "$WORK/of.out" || { echo "the forward ran before the output was checked"; return 1; }
}
check "files: issue 12.4, --output naming a directory is refused before the run" \
    outputs_first --output "$WORK/adir" "is a directory"
check "files: issue 12.4, --trace into a missing directory is refused before the run" \
    outputs_first --trace "$WORK/nodir/t.json" "directory $WORK/nodir does not exist"
check "files: issue 12.4, --weights-out into a missing directory is refused before the run" \
    outputs_first --weights-out "$WORK/nodir/w.safetensors" "directory $WORK/nodir does not exist"
check "files: two outputs naming one file are refused" refused 2 "--output and --trace name the same file" \
    --weights "$W" --input "$X" --trace "$WORK/./never.npy"

# outputs are compared where the file system puts them, not as text: through a symbolic link to their directory
# or a "..", two names of one file are refused before the run
ln -sfn "$WORK" "$WORK/lnkdir" && mkdir -p "$WORK/adir"
check "files: two outputs naming one file through a symbolic link to its directory are refused" refused 2 \
    "--output and --trace name the same file ($WORK/never.npy and $WORK/lnkdir/never.npy are both" \
    --weights "$W" --input "$X" --trace "$WORK/lnkdir/never.npy"
check "files: two outputs naming one file through '..' are refused" refused 2 \
    "--output and --weights-out name the same file" --weights "$W" --input "$X" --weights-out "$WORK/adir/../never.npy"

# a killed run's temp file is removed by the next write of the same output
stale_temp() {
    rm -f "$WORK/ys.npy" && echo partial >"$WORK/ys.npy.tmp.4194303" &&
        "$M/run" --weights "$W" --input "$X" --output "$WORK/ys.npy" --quiet &&
        [ -s "$WORK/ys.npy" ] && [ ! -e "$WORK/ys.npy.tmp.4194303" ]
}
check "files: issue 12.7, a temp file left by a killed run is removed by the next write" stale_temp

"$PY" tests/ref/tessref.py weights --layers 3 --hidden 48 --heads 12 --ffn 192 --seq 8 --batch 12 --seed 1 \
    --out "$WORK/deeper.st"
check "files: issue 12.7, weights with more blocks than the model are refused" refused 1 \
    "tensor h.2.attn.c_attn.bias belongs to block 2, but the model has 2 layers" --weights "$WORK/deeper.st" --input "$X"
$MK nan "$W" "$WORK/wnan.st" h.1.mlp.c_fc.weight nan 3 5
$MK nan "$W" "$WORK/winf.st" h.0.ln_2.bias -inf 40
$MK npy-nan "$X" "$WORK/xinf.npy" inf 2 3 4
check "files: issue 12.7, a NaN weight is refused naming the tensor and the element" refused 1 \
    "tensor h.1.mlp.c_fc.weight holds 1 non-finite value (NaN or inf), the first at [3, 5]" --weights "$WORK/wnan.st" \
    --input "$X"
check "files: issue 12.7, an infinite bias is refused" refused 1 \
    "tensor h.0.ln_2.bias holds 1 non-finite value (NaN or inf), the first at [40]" --weights "$WORK/winf.st" \
    --input "$X"
check "files: issue 12.7, an infinite input is refused naming the element" refused 1 \
    "xinf.npy: input holds 1 non-finite value (NaN or inf), the first at [2, 3, 4]" --weights "$W" \
    --input "$WORK/xinf.npy"

world_size() {
    local flags=""
    [ "$(id -u)" = 0 ] && flags="--allow-run-as-root"
    mpirun $flags --oversubscribe -np 3 "$M/bin/model" --quiet >"$WORK/ws.out" 2>&1
    local rc=$?
    cat "$WORK/ws.out"
    [ $rc -ne 0 ] && grep -q "built for mesh \[2,2,2\] = 8 ranks but was started with 3 ranks" "$WORK/ws.out" &&
        grep -q "mpirun -np 8" "$WORK/ws.out" && grep -q "srun --mpi=pmix -n 8" "$WORK/ws.out"
}
check "files: wrong world size names both numbers and the command" world_size

asan_e2e() {
    ninja -C "$M" asan >/dev/null && poison "$M/ya.npy" &&
        TESS_VARIANT=asan "$M/run" --weights "$W" --input "$X" --output "$M/ya.npy" --bytes --quiet &&
        "$PY" tests/ref/tessref.py compare --ref "$WORK/ref.npy" --got "$M/ya.npy" --tol 1e-4 --expect-f32 &&
        { TESS_VARIANT=asan "$M/run" --weights "$WORK/trunc.st" --input "$X" --quiet 2>"$WORK/asan.err"
          [ $? -eq 1 ] && ! grep -q "Sanitizer" "$WORK/asan.err"; } &&
        { TESS_VARIANT=asan "$M/run" --weights "$WORK/lie.st" --input "$WORK/xtrunc.npy" --quiet 2>"$WORK/asan.err"
          [ $? -eq 1 ] && ! grep -q "Sanitizer" "$WORK/asan.err"; }
}
check "asan: mesh [2,2,2] under ASan+UBSan matches the reference; bad files exit cleanly" asan_e2e

# a run names the schedule it executes: the fingerprint in its banner is the manifest's, and
# another mesh's output has another fingerprint
fingerprint() {
    local want other
    want=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["schedule_fingerprint"])' "$M/manifest.json")
    other=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["schedule_fingerprint"])' \
        "$WORK/e2e_1_1/manifest.json")
    echo "manifest $want, [1,1,1] $other"
    [ ${#want} -eq 16 ] && [ "$want" != "$other" ] &&
        "$M/run" --weights "$W" --input "$X" | head -1 | tee /dev/stderr | grep -q "schedule $want,"
}
check "files: the program prints the schedule fingerprint its manifest records" fingerprint

# issue 12.5: a directory that mixes two generations is refused at start, before any step runs. The other
# generation: the same mesh with a wider MLP (every class program differs), into a copy of the output.
mixed_setup() {
    local mix="$WORK/e2e_mix"
    rm -rf "$mix" && cp -r "$M" "$mix" && rm -f "$mix/.tessgen.lock" &&
        sed 's/ffn *= *[0-9]*/ffn = 384/' "$WORK/e2e_2_2.lua" >"$WORK/e2e_mix_other.lua" &&
        ! cmp -s "$WORK/e2e_2_2.lua" "$WORK/e2e_mix_other.lua" &&
        bin/tessgen "$WORK/e2e_mix_other.lua" -o "$WORK/e2e_mix_other" --quiet
}
mixed_class_file() { # one class file of the other generation: its program refuses to start
    local mix="$WORK/e2e_mix"
    mixed_setup && cp "$WORK/e2e_mix_other/rank_i0_j1.c" "$mix/rank_i0_j1.c" && ninja -C "$mix" >/dev/null &&
        M="$mix" refused 2 "the output directory mixes two generations" --weights "$W" --input "$X" &&
        grep -q "rank 1: the program of ranks (i=0, j=1, k) was generated for schedule" "$WORK/run.err"
}
mixed_programs() { # programs built from two generations (one rebuilt after a regeneration): refused
    local mix="$WORK/e2e_mix"
    mixed_setup && ninja -C "$mix" >/dev/null &&
        bin/tessgen "$WORK/e2e_mix_other.lua" -o "$mix" --quiet && ninja -C "$mix" bin/cpu/rank_i1_j1 >/dev/null &&
        M="$mix" refused 2 "the ranks run programs of different schedules" --weights "$W" --input "$X"
}
check "files: issue 12.5, a class program of another generation is refused before any step" mixed_class_file
check "files: issue 12.5, programs built from two generations are refused before any step" mixed_programs

# programs not rebuilt after tessgen ran again (another eps: another schedule, every program and manifest.json
# rewritten): refused before any step, naming both schedules and the command that rebuilds; rebuilt, they run
stale_programs() {
    local st="$WORK/e2e_stale" fp
    rm -rf "$st" && cp -r "$M" "$st" && rm -f "$st/.tessgen.lock" &&
        sed 's/eps *= *1e-5/eps = 2e-5/' "$WORK/e2e_2_2.lua" >"$WORK/e2e_stale.lua" &&
        ! cmp -s "$WORK/e2e_2_2.lua" "$WORK/e2e_stale.lua" &&
        bin/tessgen "$WORK/e2e_stale.lua" -o "$st" --quiet || return 1
    fp=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["schedule_fingerprint"])' "$st/manifest.json")
    M="$st" refused 2 "says tessgen generated schedule $fp there since: they are stale and would run the old schedule; rebuild them with: ninja -C $st" \
        --weights "$W" --input "$X" || return 1
    ninja -C "$st" >/dev/null && "$st/run" --weights "$W" --input "$X" --quiet
}
check "files: programs not rebuilt after a regeneration are refused with the command that rebuilds" stale_programs
