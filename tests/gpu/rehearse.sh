#!/usr/bin/env bash
# tests/gpu/rehearse.sh [--cuda] [--standin STAGE...] - the GPU check's set-up rehearsed HERE, on a machine that
# has Open MPI and Lua, with both made unreachable: inside a private mount namespace (unshare -m, as root) every
# file of the Debian packages openmpi-bin, libopenmpi3, libopenmpi-dev, openmpi-common, libpmix2, libpmix-dev,
# liblua5.4-dev, liblua5.4-0 and openssh-client is covered by /dev/null and their folders by empty tmpfs, so
# only what tests/gpu/prepare.sh put in build/gpu-carry can serve. Then, as the GPU machine would:
#
#   1. tests/gpu/env.sh unpacks the carried packages into a fresh scratch root (TESS_GPU_UNPACK=python: with
#      tests/gpu/unpack_deb.py instead of dpkg-deb) and sets the environment;
#   2. proof: `command -v mpicc mpirun` name the scratch root, the system's mpicc cannot run, lua.h is gone;
#   3. the CPU path: the carried tessgen generates a small model for [2,2,1] (Lua linked in statically), ninja
#      builds bin/model with the scratch root's mpicc, ldd shows every MPI library (libmpi, open-rte, open-pal,
#      hwloc, event, pmix) inside the scratch root, the scratch root's mpirun runs 4 ranks with --bytes, and the
#      output is compared with the float64 reference (1e-4);
#   4. --cuda: bin/model-cuda of the same output compiled and linked with nvcc through the scratch root's
#      mpicxx (needs nvcc; nothing runs: there is no GPU);
#   5. --standin STAGE...: tests/gpu/check.sh STAGE... with TESS_GPU_STANDIN=1 (the CUDA emulation in place of
#      the GPU) in the same namespace.
#
# Prints ok / not ok lines and "N passed, N failed"; exit 0 when all passed, 77 when it cannot run here
# (not root, no unshare, no build/gpu-carry).
set -u
cd "$(dirname "$0")/../.." || exit 2
REPO=$(pwd)
if [ "${TESS_REHEARSAL_INSIDE:-}" != 1 ]; then
    [ -d build/gpu-carry/debs ] || { echo "rehearse: no build/gpu-carry: run tests/gpu/prepare.sh first" >&2; exit 77; }
    [ "$(id -u)" = 0 ] || { echo "rehearse: needs root (unshare -m and bind mounts)" >&2; exit 77; }
    unshare -m true 2>/dev/null || { echo "rehearse: unshare -m is not permitted here" >&2; exit 77; }
    exec unshare -m env TESS_REHEARSAL_INSIDE=1 "$0" "$@"
fi

# ---- inside the namespace: hide the system's Open MPI, PMIx, Lua and ssh ---------------------------------------
mount --make-rprivate / 2>/dev/null
hidden=0
for pkg in openmpi-bin libopenmpi3 libopenmpi-dev openmpi-common libpmix2 libpmix-dev liblua5.4-dev liblua5.4-0 \
    openssh-client; do
    while read -r f; do
        if [ -f "$f" ] && [ ! -L "$f" ]; then
            mount --bind /dev/null "$f" && hidden=$((hidden + 1))
        fi
    done < <(dpkg -L "$pkg" 2>/dev/null)
done
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/include/lua5.4 /etc/openmpi \
    /usr/share/openmpi /usr/include/x86_64-linux-gnu/openmpi; do
    [ -d "$d" ] && mount -t tmpfs none "$d"
done

SCRATCH=$(mktemp -d /tmp/tessgen-rehearsal.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
export TESS_GPU_MPI_ROOT=$SCRATCH/root TESS_GPU_WORK=$SCRATCH/work TESS_GPU_OUT=$SCRATCH/out
unset OUT
CUDA=0
STANDIN=()
while [ $# -gt 0 ]; do
    case "$1" in
    --cuda) CUDA=1 ;;
    --standin) shift; STANDIN=("$@"); break ;;
    *) echo "rehearse: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

# shellcheck source=tests/gpu/env.sh
. tests/gpu/env.sh
TG_SHOW='rel_err=| -> |=> |unreachable|unpacked|libmpi|nccl|cublas'
TG_SHOW_LINES=20
tg_say "# rehearsal: $hidden system files of Open MPI, PMIx, Lua and ssh hidden; scratch root $TESS_GPU_MPI_ROOT"

setup() {
    tg_mpi_setup || return 1
    # tg_toolchain needs a GPU; the CPU path needs only tessgen and python
    TG_TESSGEN=$TG_CARRY/bin/tessgen
    export TESSGEN_ROOT=$REPO
    PY=$("$REPO/scripts/python.sh")
    echo "unpacked $(find "$TESS_GPU_MPI_ROOT" -type f | wc -l) files with ${TESS_GPU_UNPACK:-dpkg}"
}
tg_check "rehearsal: the carried packages unpack into the scratch root and set up (${TESS_GPU_UNPACK:-dpkg})" setup
setup >/dev/null 2>&1 || { tg_summary; exit 1; }

proof() {
    local t p
    for t in mpicc mpicxx mpirun ninja; do
        p=$(command -v "$t") || { echo "$t not found"; return 1; }
        echo "$t -> $p"
        case "$p" in "$TESS_GPU_MPI_ROOT"/*) ;; /usr/bin/ninja) [ "$t" = ninja ] || return 1 ;; *) echo "$t is not the scratch root's"; return 1 ;; esac
    done
    if /usr/bin/mpicc.openmpi --version >/dev/null 2>&1; then echo "the system's mpicc still runs"; return 1; fi
    if [ -s /usr/include/lua5.4/lua.h ]; then echo "the system's lua.h is still there"; return 1; fi
    if /usr/bin/ssh -V >/dev/null 2>&1; then echo "ssh still runs"; return 1; fi
    if ldd "$TG_TESSGEN" | grep -q lua; then echo "tessgen links Lua dynamically"; return 1; fi
    echo "system mpicc, lua.h and ssh unreachable; tessgen needs no Lua library"
}
tg_check "rehearsal: mpicc, mpicxx, mpirun are the scratch root's; the system's Open MPI, lua.h and ssh are unreachable" proof

M=$SCRATCH/work/cpu_2_1
cpu_path() {
    mkdir -p "$SCRATCH/work" && cat >"$M.lua" <<'SPEC'
return {
  name = "rehearsal", mesh = { q = 2, d = 1 },
  model = { layers = 2, hidden = 64, heads = 4, ffn = 128, seq = 12, batch = 4 },
  backends = { "cpu", "cuda" },
}
SPEC
    local dims="--layers 2 --hidden 64 --heads 4 --ffn 128 --seq 12 --batch 4"
    # shellcheck disable=SC2086
    "$TG_TESSGEN" "$M.lua" -o "$M" --quiet &&
        ninja -C "$M" cpu &&
        { ldd "$M/bin/cpu/rank_i0_j0" | grep -E "libmpi|open-rte|open-pal|hwloc|libevent|pmix" | tee "$M/ldd.txt"; } &&
        if grep -v "$TESS_GPU_MPI_ROOT" "$M/ldd.txt"; then echo "an MPI library comes from outside the scratch root"; false; fi &&
        [ "$(grep -c "libmpi.so" "$M/ldd.txt")" -ge 1 ] &&
        "$PY" tests/ref/tessref.py weights $dims --seed 3 --out "$M/w.safetensors" &&
        "$PY" tests/ref/tessref.py input $dims --seed 3 --out "$M/x.npy" &&
        "$PY" tests/ref/tessref.py forward $dims --weights "$M/w.safetensors" --input "$M/x.npy" --out "$M/ref.npy" &&
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((4, 12, 64), np.nan, np.float32))" "$M/y.npy" &&
        "$M/run" --weights "$M/w.safetensors" --input "$M/x.npy" --output "$M/y.npy" --bytes &&
        "$PY" tests/ref/tessref.py compare --ref "$M/ref.npy" --got "$M/y.npy" --tol 1e-4 --expect-f32 \
            --label "rehearsal [2,2,1] (scratch-root Open MPI)"
}
tg_check "rehearsal: carried tessgen, scratch mpicc and mpirun: [2,2,1] built, ldd all MPI in the scratch root, 4 ranks match float64 (1e-4)" cpu_path

if [ "$CUDA" = 1 ]; then
    cuda_build() {
        command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { echo "no nvcc"; return 1; }
        PATH=$PATH:/usr/local/cuda/bin ninja -C "$M" cuda && ldd "$M/bin/cuda/rank_i0_j0" | grep -E "libmpi|nccl|cublas"
    }
    if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
        tg_check "rehearsal: bin/model-cuda compiled and linked by nvcc through the scratch root's mpicxx" cuda_build
    else
        tg_ok "rehearsal: bin/model-cuda through the scratch root's mpicxx # skip nvcc not found"
    fi
fi

if [ ${#STANDIN[@]} -gt 0 ]; then
    standin() {
        TESS_GPU_OUT=$SCRATCH/out-standin TESS_GPU_STANDIN=1 tests/gpu/check.sh "${STANDIN[@]}"
        local rc=$?
        echo "standin: check.sh ${STANDIN[*]}: $(tail -1 "$SCRATCH/out-standin/check.txt")"
        return $rc
    }
    TG_SHOW='^standin:'
    tg_check "rehearsal: tests/gpu/check.sh ${STANDIN[*]} with TESS_GPU_STANDIN=1 in the namespace" standin
fi
tg_summary
