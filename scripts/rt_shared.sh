#!/bin/sh
# scripts/rt_shared.sh OBJDIR SRCDIR EXT "NAMES" CMDFILE - a part of the runtime that every output builds the same way,
# compiled once per checkout and compiler command instead of once per output. CMDFILE (the rspfile ninja writes)
# holds the compiler command up to its dependency flag, as the output's build.ninja expanded it (e.g. "mpicc
# -std=c11 ... -MMD", "nvcc ... -MD"); SRCDIR/NAME.EXT for each of NAMES (SRCDIR relative to this checkout) is
# compiled by it into build/shared-rt/<hash of the compiler, the command, SRCDIR, EXT and NAMES>/NAME.o of this checkout, by a
# build.ninja written there (header dependencies from the compiler's depfiles, so an edited runtime source or
# header recompiles), under a lock, so that outputs built at the same time share one compile; then each object is
# copied into OBJDIR (the output's obj/rt, obj-asan/rt or obj-cuda/rt) only where its bytes differ, atomically, so
# that the output's ninja (restat) relinks nothing when the runtime is up to date. Run by every generated
# build.ninja at each build (the ninja here decides what is stale; a no-op costs milliseconds). Prints what it
# compiled. docs/ARCHITECTURE.md, "Building an output".
set -eu
objdir=$1 srcdir=$2 ext=$3 names=$4 cmd=$(cat "$5")
root=$(cd "$(dirname "$0")/.." && pwd)
# the key also names the compiler the command's first word resolves to here: the GPU check's rehearsal puts another
# mpicc first on PATH (the carried Open MPI, tests/gpu/env.sh) with the same command text, and its objects must not
# replace the system compiler's ones that other outputs built beside it share (tests/run.sh runs groups side by side)
cc=$(command -v "${cmd%% *}" 2>/dev/null || echo "${cmd%% *}")
key=$(printf '%s\n%s\n%s\n%s\n%s\n' "$cc" "$cmd" "$srcdir" "$ext" "$names" | sha256sum | cut -c1-16)
dir=$root/build/shared-rt/$key
if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
    echo "rt_shared: cannot write $root/build/shared-rt: the runtime is compiled once in the tessgen checkout that" \
        "generated this output; build as a user who can write it, or rebuild tessgen in a checkout you own and" \
        "generate again (docs/ARCHITECTURE.md, \"The runtime is compiled once per checkout\")" >&2
    exit 1
fi
mkdir -p "$objdir"
exec 9>"$dir.lock"
flock 9
{
    echo "# written by scripts/rt_shared.sh: runtime objects for one compiler command, shared by every output built"
    echo "# with it (from $srcdir)"
    echo "rule cc"
    echo "  command = $cmd \$out.d -c \$in -o \$out"
    echo "  depfile = \$out.d"
    echo "  deps = gcc"
    echo "  description = CC \$out (the runtime in $srcdir, once for every output compiled this way)"
    for n in $names; do echo "build $n.o: cc $root/$srcdir/$n.$ext"; done
} >"$dir/build.ninja.tmp"
if cmp -s "$dir/build.ninja.tmp" "$dir/build.ninja"; then rm -f "$dir/build.ninja.tmp"; else mv "$dir/build.ninja.tmp" "$dir/build.ninja"; fi
# what was compiled is shown (tests check that a second output compiles nothing); "no work to do" is not
log=$( (cd "$dir" && ninja) 2>&1) || { printf '%s\n' "$log" >&2; exit 1; }
[ "$log" = "ninja: no work to do." ] || printf '%s\n' "$log"
for n in $names; do
    if ! cmp -s "$dir/$n.o" "$objdir/$n.o"; then
        cp "$dir/$n.o" "$objdir/$n.o.tmp" && mv "$objdir/$n.o.tmp" "$objdir/$n.o"
    fi
done
