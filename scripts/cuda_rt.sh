#!/bin/sh
# scripts/cuda_rt.sh OBJDIR "NAMES" NVCC FLAGS... - the CUDA runtime (runtime/cuda/NAME.cu for each of NAMES), compiled
# once per checkout and flag set instead of once per output: into build/cuda/rt-<hash of NVCC and FLAGS>/ of this
# checkout, by a build.ninja written there (header dependencies from nvcc's depfiles, so an edited runtime source
# or header recompiles), under a lock, so that outputs built at the same time share one compile; then each object
# is copied into OBJDIR (an output's obj-cuda/rt) only where its bytes differ, atomically, so that the output's
# ninja (restat) relinks nothing when the runtime is up to date. Run by every generated build.ninja with the CUDA
# backend, at each build (the ninja here decides what is stale: a no-op costs a few milliseconds). docs/CUDA.md,
# "Building".
set -eu
objdir=$1 names=$2 nvcc=$3
shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
key=$(printf '%s\n%s\n' "$nvcc" "$*" | sha256sum | cut -c1-16)
dir=$root/build/cuda/rt-$key
mkdir -p "$dir" "$objdir"
exec 9>"$dir.lock"
flock 9
{
    echo "# written by scripts/cuda_rt.sh: the CUDA runtime for one flag set, shared by the outputs built with it"
    echo "nvcc = $nvcc"
    echo "flags = $*"
    echo "rule nvcc"
    echo "  command = \$nvcc \$flags -MD -MF \$out.d -c \$in -o \$out"
    echo "  depfile = \$out.d"
    echo "  deps = gcc"
    echo "  description = NVCC \$out (the CUDA runtime, once for every output with these flags)"
    for n in $names; do echo "build $n.o: nvcc $root/runtime/cuda/$n.cu"; done
} >"$dir/build.ninja.tmp"
if cmp -s "$dir/build.ninja.tmp" "$dir/build.ninja"; then rm -f "$dir/build.ninja.tmp"; else mv "$dir/build.ninja.tmp" "$dir/build.ninja"; fi
# what was compiled is shown (tests/cuda.sh checks that a second output compiles nothing); "no work to do" is not
log=$( (cd "$dir" && ninja) 2>&1) || { printf '%s\n' "$log" >&2; exit 1; }
[ "$log" = "ninja: no work to do." ] || printf '%s\n' "$log"
for n in $names; do
    if ! cmp -s "$dir/$n.o" "$objdir/$n.o"; then
        cp "$dir/$n.o" "$objdir/$n.o.tmp" && mv "$objdir/$n.o.tmp" "$objdir/$n.o"
    fi
done
