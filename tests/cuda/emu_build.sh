#!/usr/bin/env bash
# tests/cuda/emu_build.sh DIR VARIANT LAUNCHER: build the generated CUDA class programs of the output DIR
# against the CPU emulation of the CUDA runtime (tests/cuda/emu.cc, built once in this checkout's build/emu/, and
# tests/cuda/emu_kernels.cc, built here with DIR's shapes): DIR/bin/VARIANT/rank_iI_jJ for each
# class, and DIR/bin/LAUNCHER, the launcher that starts them (runtime/tr_launch.c), as bin/model-cuda starts
# bin/cuda/... . Used by tests/cuda.sh (emu, model-emu) and by the GPU check's stand-in (cuda, model-cuda).
# The CPU program's backend-neutral runtime objects come from DIR's own build.ninja.
# The compiles run side by side, at most TESS_TEST_JOBS at once (default: the cores, nproc; ninja's -j too when it
# is set), then the links: each command's output is held in a log of its own and printed on stderr when all have
# finished, in the order they were started (a failed one named), so that what is built and what is printed do not
# depend on which finished first; the links are not started when a compile failed, and the exit status is then 1.
set -euo pipefail
dir=$1 variant=$2 launcher=$3
repo=$(cd "$(dirname "$0")/../.." && pwd)
njobs=${TESS_TEST_JOBS:-$(nproc)}
started=() # the logs of the commands run started since the last settle, in order: LOG.out, LOG.rc, LOG.cmd
run() { # CMD...: in the background, once fewer than $njobs run
    while [ "$(jobs -rp | wc -l)" -ge "$njobs" ]; do wait -n || true; done
    local l=$dir/obj-emu/job${#started[@]}
    printf '%s\n' "$*" >"$l.cmd"
    rm -f "$l.rc"
    (
        set +e
        "$@" >"$l.out" 2>&1
        echo $? >"$l.rc"
    ) &
    started+=("$l")
}
settle() { # wait for the commands run started; print their output in order; 1 if one failed (or left no status)
    wait
    local l rc=0
    for l in "${started[@]}"; do
        cat "$l.out" >&2
        if [ "$(cat "$l.rc" 2>/dev/null)" != 0 ]; then
            echo "emu_build.sh: failed (exit $(cat "$l.rc" 2>/dev/null || echo "unknown")): $(cat "$l.cmd")" >&2
            rc=1
        fi
        rm -f "$l.out" "$l.rc" "$l.cmd"
    done
    started=()
    return $rc
}
cxx="mpicxx -std=c++20 -O1 -g -Wall -Wextra -Werror -I$repo/tests/cuda/emu -I$repo/runtime -I$repo/runtime/cuda"
mkdir -p "$dir/obj-emu" "$dir/bin/$variant"
sed -n '/the shapes of this model.s schedule/,/^} \/\/ namespace trk/p' "$dir/kernels.cu" |
    grep -v 'namespace trk\|the shapes of' >"$dir/obj-emu/instances.inc"
rt="obj/rt/tr_err.o obj/rt/tr_json.o obj/rt/tr_safetensors.o obj/rt/tr_npy.o obj/rt/tr_synth.o obj/rt/tr_comm.o
    obj/rt/tr_main.o obj/rt/tr_trace.o obj/rt/tr_gather.o obj/rt/tr_hfnames.o obj/rt/tr_stset.o obj/rt/tr_hfout.o
    obj/rt/tr_sched.o obj/rt/tr_clip.o obj/rt/tr_ckpt.o obj/rt/tr_data.o obj/rt/tr_tokens.o obj/rt/tr_lmdata.o"
# shellcheck disable=SC2086
ninja -C "$dir" ${TESS_TEST_JOBS:+-j "$TESS_TEST_JOBS"} obj/model.o $rt >/dev/null
# the runtime's emulation once per checkout, the kernels' per output (its shapes)
ninja -C "$repo" ${TESS_TEST_JOBS:+-j "$TESS_TEST_JOBS"} build/emu/emu.o >/dev/null
classes=()
for f in "$dir"/rank_i*_j*.cu "$dir"/rank_s*_i*_j*.cu; do
    if [ -e "$f" ]; then classes+=("$(basename "$f" .cu)"); fi
done
# the compiles: the kernels (the longest) first
# shellcheck disable=SC2086 # $cxx is the command and its flags
run $cxx -I"$dir" -I"$dir/obj-emu" -c "$repo/tests/cuda/emu_kernels.cc" -o "$dir/obj-emu/emu_kernels.o"
run mpicc -std=c11 -D_XOPEN_SOURCE=700 -O1 -Wall -Wextra -Werror -I"$repo/runtime" -DTR_LAUNCH_DIR="\"$variant\"" \
    -c "$repo/runtime/tr_launch.c" -o "$dir/obj-emu/tr_launch.o"
for cls in "${classes[@]}"; do
    # shellcheck disable=SC2086
    run $cxx -I"$dir" -x c++ -c "$dir/$cls.cu" -o "$dir/obj-emu/$cls.o"
done
settle
# the links
run mpicc -o "$dir/bin/$launcher" "$dir/obj-emu/tr_launch.o" "$dir/obj/model.o"
for cls in "${classes[@]}"; do
    # shellcheck disable=SC2086,SC2046
    run mpicxx -o "$dir/bin/$variant/$cls" "$dir/obj-emu/$cls.o" "$dir/obj-emu/emu_kernels.o" "$repo/build/emu/emu.o" \
        "$dir/obj/model.o" $(printf "$dir/%s " $rt) -lopenblas -lm
done
settle
