#!/usr/bin/env bash
# tests/cuda/emu_build.sh DIR VARIANT LAUNCHER: build the generated CUDA class programs of the output DIR
# against the CPU emulation of the CUDA runtime (tests/cuda/emu.cc, built once in this checkout's build/emu/, and
# tests/cuda/emu_kernels.cc, built here with DIR's shapes): DIR/bin/VARIANT/rank_iI_jJ for each
# class, and DIR/bin/LAUNCHER, the launcher that starts them (runtime/tr_launch.c), as bin/model-cuda starts
# bin/cuda/... . Used by tests/cuda.sh (emu, model-emu) and by the GPU check's stand-in (cuda, model-cuda).
# The CPU program's backend-neutral runtime objects come from DIR's own build.ninja.
set -euo pipefail
dir=$1 variant=$2 launcher=$3
repo=$(cd "$(dirname "$0")/../.." && pwd)
cxx="mpicxx -std=c++20 -O1 -g -Wall -Wextra -Werror -I$repo/tests/cuda/emu -I$repo/runtime -I$repo/runtime/cuda"
mkdir -p "$dir/obj-emu" "$dir/bin/$variant"
sed -n '/the shapes of this model.s schedule/,/^} \/\/ namespace trk/p' "$dir/kernels.cu" |
    grep -v 'namespace trk\|the shapes of' >"$dir/obj-emu/instances.inc"
rt="obj/rt/tr_err.o obj/rt/tr_json.o obj/rt/tr_safetensors.o obj/rt/tr_npy.o obj/rt/tr_synth.o obj/rt/tr_comm.o
    obj/rt/tr_main.o obj/rt/tr_trace.o obj/rt/tr_gather.o obj/rt/tr_hfnames.o obj/rt/tr_stset.o obj/rt/tr_hfout.o
    obj/rt/tr_sched.o obj/rt/tr_clip.o obj/rt/tr_ckpt.o obj/rt/tr_data.o obj/rt/tr_tokens.o obj/rt/tr_lmdata.o"
# shellcheck disable=SC2086
ninja -C "$dir" obj/model.o $rt >/dev/null
# the runtime's emulation once per checkout, the kernels' per output (its shapes)
ninja -C "$repo" build/emu/emu.o >/dev/null
$cxx -I"$dir" -I"$dir/obj-emu" -c "$repo/tests/cuda/emu_kernels.cc" -o "$dir/obj-emu/emu_kernels.o"
mpicc -std=c11 -D_XOPEN_SOURCE=700 -O1 -Wall -Wextra -Werror -I"$repo/runtime" -DTR_LAUNCH_DIR="\"$variant\"" \
    -c "$repo/runtime/tr_launch.c" -o "$dir/obj-emu/tr_launch.o"
mpicc -o "$dir/bin/$launcher" "$dir/obj-emu/tr_launch.o" "$dir/obj/model.o"
for f in "$dir"/rank_i*_j*.cu "$dir"/rank_s*_i*_j*.cu; do
    [ -e "$f" ] || continue
    cls=$(basename "$f" .cu)
    $cxx -I"$dir" -x c++ -c "$f" -o "$dir/obj-emu/$cls.o"
    # shellcheck disable=SC2086
    mpicxx -o "$dir/bin/$variant/$cls" "$dir/obj-emu/$cls.o" "$dir/obj-emu/emu_kernels.o" "$repo/build/emu/emu.o" "$dir/obj/model.o" \
        $(printf "$dir/%s " $rt) -lopenblas -lm
done
