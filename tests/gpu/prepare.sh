#!/usr/bin/env bash
# tests/gpu/prepare.sh - run HERE (a Debian 12 machine with the project's packages), before a GPU session:
# fills build/gpu-carry/ with what the GPU machine lacks, so tests/gpu/check.sh and bench.sh run there as it
# is (docs/CUDA.md, "On a machine with a GPU").
#
#   build/gpu-carry/bin/tessgen   tessgen built here (Lua is linked statically: the GPU machine has no Lua)
#   build/gpu-carry/debs/*.deb    Open MPI 4.1 of Debian 12 and every library it loads that a bare Ubuntu or
#                                 Debian lacks (PMIx, hwloc, libevent, libfabric, UCX, PSM, verbs, ...), plus
#                                 ninja; tests/gpu/env.sh unpacks them into a scratch root there (dpkg-deb -x)
#   build/gpu-carry/cudnn-frontend/include  the cudnn-frontend headers (scripts/cudnn_frontend.sh): attention =
#                                 "cudnn" compiles build/cuda/trc_sdpa.o there against the cuDNN wheel's cudnn.h
#   build/gpu-carry/MANIFEST      what was carried: package versions, the sources tessgen was built from
#
# It checks the closure: every shared library that any carried ELF file needs is either carried or one of
# the C/C++ runtime libraries every such machine has (libc, libm, libstdc++, libgcc_s, libz, ...).
# Prints the carry list for the device tool and the size (the limit is 64 MiB with the working tree).
# Exit 0 when build/gpu-carry is complete; apt-get download needs Debian's package lists (apt-get update).
set -euo pipefail
cd "$(dirname "$0")/../.."
CARRY=build/gpu-carry
PKGS="openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libevent-core-2.1-7 libevent-pthreads-2.1-7
libhwloc15 libpciaccess0 libudev1 libnuma1 libfabric1 libibverbs1 ibverbs-providers librdmacm1 libnl-3-200
libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libucx0 libmunge2 libatomic1 libuuid1 ninja-build"
# what a machine that runs nvcc and PyTorch always has, so it is not carried
BASE='^(libc|libm|libdl|librt|libpthread|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s|libz)\.so'

echo "# tessgen for the carry (Lua linked statically)"
ninja bin/tessgen >/dev/null
if ldd bin/tessgen | grep -q lua; then
    echo "prepare: bin/tessgen links Lua dynamically; the GPU machine has no Lua (build.ninja must link -l:liblua5.4.a)" >&2
    exit 1
fi
mkdir -p "$CARRY/bin" "$CARRY/debs"
cp bin/tessgen "$CARRY/bin/tessgen"

echo "# cudnn-frontend headers (attention = \"cudnn\"; the GPU machine has no network): build/gpu-carry/cudnn-frontend"
if fe=$(scripts/cudnn_frontend.sh); then
    rm -rf "$CARRY/cudnn-frontend" && mkdir -p "$CARRY/cudnn-frontend" && cp -r "$fe" "$CARRY/cudnn-frontend/include"
else
    echo "  not carried: the GPU check will skip attention = \"cudnn\"" # the one-line reason is above
    rm -rf "$CARRY/cudnn-frontend"
fi

echo "# Debian packages: Open MPI and what it loads"
# shellcheck disable=SC2086 # one word per package
(cd "$CARRY/debs" && apt-get download $PKGS >/dev/null 2>apt.err) || {
    cat "$CARRY/debs/apt.err" >&2
    echo "prepare: apt-get download failed; run apt-get update first (needs Debian's package servers)" >&2
    exit 1
}
rm -f "$CARRY/debs/apt.err"
# one version of each package: drop older downloads
for p in $PKGS; do
    mapfile -t have < <(ls -t "$CARRY/debs/${p}_"*.deb 2>/dev/null)
    [ "${#have[@]}" -ge 1 ] || { echo "prepare: $p was not downloaded" >&2; exit 1; }
    [ "${#have[@]}" -gt 1 ] && rm -f "${have[@]:1}"
done

echo "# closure: every NEEDED library of every carried ELF file is carried or a base library"
tmp=$(mktemp -d /tmp/tessgen-carry.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for d in "$CARRY"/debs/*.deb; do dpkg-deb -x "$d" "$tmp"; done
find "$tmp" -type f | while read -r f; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    objdump -p "$f" 2>/dev/null | awk '/NEEDED/ {print $2}'
done | sort -u >"$tmp/needed"
missing=""
while read -r lib; do
    echo "$lib" | grep -Eq "$BASE" && continue
    [ -n "$(find "$tmp" -name "$lib" -print -quit)" ] && continue
    # the Debian alternative of libpsm_infinipath.so.1 is made by env.sh (lib/libpsm1)
    [ "$lib" = libpsm_infinipath.so.1 ] && [ -n "$(find "$tmp" -name 'libpsm_infinipath.so.1.*' -print -quit)" ] && continue
    missing="$missing $lib"
done <"$tmp/needed"
if [ -n "$missing" ]; then
    echo "prepare: carried files need libraries that are neither carried nor base:$missing" >&2
    exit 1
fi
echo "  $(wc -l <"$tmp/needed") distinct libraries needed, all carried or base"

{
    echo "tessgen $(bin/tessgen --version 2>&1 | head -1)"
    echo "sources $(tests/gpu/srchash.sh)"
    echo "built on $(. /etc/os-release && echo "$PRETTY_NAME"), $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "packages:"
    for d in "$CARRY"/debs/*.deb; do dpkg-deb --show --showformat="  \${Package} \${Version}\n" "$d"; done
} >"$CARRY/MANIFEST"
size=$(du -sm "$CARRY" | cut -f1)
echo "# done: $CARRY ($size MiB); the working tree travels as well (64 MiB in all)"
echo "carry: [\"$CARRY\"]"
