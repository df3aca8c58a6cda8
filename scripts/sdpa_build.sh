#!/bin/sh
# scripts/sdpa_build.sh OUT - compile runtime/cuda/trc_sdpa.cpp (cuDNN's fused attention through cudnn-frontend,
# host C++ only) into OUT, the one object every generated CUDA build with attention = "cudnn" links
# (docs/CUDA.md "Fused attention through cuDNN"). Run by tessgen's build.ninja (`ninja sdpa`), never per output.
# The frontend headers come from scripts/cudnn_frontend.sh, cudnn.h from TESS_CUDNN_INCLUDE, else beside nvcc's
# CUDA (include/), else /usr/local/cuda/include. Fails with one line on stderr, naming what is missing, when either
# cannot be had. Atomic: the object appears complete or not at all.
set -u
cd "$(dirname "$0")/.." || exit 1
out=$1
fe=$(scripts/cudnn_frontend.sh) || { echo "sdpa_build: no cudnn-frontend headers (scripts/cudnn_frontend.sh, above): $out not built" >&2; exit 1; }
inc=${TESS_CUDNN_INCLUDE:-}
if [ -z "$inc" ]; then
    nvcc=$(command -v "${TESS_NVCC:-nvcc}" 2>/dev/null || true)
    for d in ${nvcc:+"$(dirname "$(readlink -f "$nvcc")")/../include"} /usr/local/cuda/include; do
        if [ -f "$d/cudnn.h" ]; then inc=$d; break; fi
    done
fi
if [ -z "$inc" ] || [ ! -f "$inc/cudnn.h" ]; then echo "sdpa_build: no cudnn.h (set TESS_CUDNN_INCLUDE to its folder): $out not built" >&2; exit 1; fi
cuinc=${TESS_CUDA_INCLUDE:-/usr/local/cuda/include}
mkdir -p "$(dirname "$out")"
# One compile at a time per object (tests/run.sh starts one in the background while the suite's first groups run,
# and a generated build's `ninja -C <checkout> build/cuda/trc_sdpa.o` may ask at the same moment): the second waits,
# then finds the object newer than this script and every input its depfile named (kept as $out.inputs: ninja
# deletes the depfile it reads), and stops there.
exec 9>"$out.lock"
flock 9
if [ -f "$out" ] && [ -f "$out.inputs" ] && [ ! scripts/sdpa_build.sh -nt "$out" ]; then
    stale=0
    for f in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$out.inputs"); do
        if [ ! -e "$f" ] || [ "$f" -nt "$out" ]; then stale=1; break; fi
    done
    [ $stale = 0 ] && exit 0
fi
# -w for the frontend's own headers only (-isystem): this file itself is -Wall -Wextra -Werror. -O0 -g0: the object
# only builds cuDNN graphs, once per shape at the first step, so its speed does not matter, and the frontend's
# templates compile in about 70 s of CPU and 1.9 GB this way against about 3 minutes and 2.7 GB at -O2 -g (measured
# on the 2-core CI machine), which CI pays on every run
${CXX:-g++} -std=c++17 -O0 -g0 -fPIC -Wall -Wextra -Werror -Iruntime -Iruntime/cuda -isystem "$fe" -isystem "$inc" \
    -isystem "$cuinc" -MD -MT "$out" -MF "$out.d" -c runtime/cuda/trc_sdpa.cpp -o "$out.tmp" || { rm -f "$out.tmp"; exit 1; }
cp "$out.d" "$out.inputs" && mv "$out.tmp" "$out"
