#!/bin/sh
# scripts/sass_tools.sh - print the path of a cuobjdump that can disassemble the generated kernels (the SASS check
# of tests/cuda.sh, docs/CUDA.md "FP64 and tensor cores in the kernels"). The CUDA toolkit's own when it has one
# (beside nvcc), else NVIDIA's PyPI wheels nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm (Debian packages only
# the whole toolkit), installed once with pip --target into build/tools/sass (ignored by git; nothing outside the
# checkout is touched). Fails with one line on stderr when neither can be had (no network, no pip); the suite
# then skips the check and says why.
set -u
cd "$(dirname "$0")/.."
ver=13.5.37 # the wheels' version this check was written against (cuobjdump reads the cubins of older nvccs)
nvcc=$(command -v "${TESS_NVCC:-nvcc}" 2>/dev/null || true)
if [ -n "$nvcc" ]; then
    bin=$(dirname "$(readlink -f "$nvcc")")
    if [ -x "$bin/cuobjdump" ]; then
        echo "$bin/cuobjdump"
        exit 0
    fi
fi
dir=build/tools/sass
tool=$dir/nvidia/cu13/bin/cuobjdump
if [ ! -x "$tool" ]; then
    py=$(command -v python3 || true)
    [ -n "$py" ] || { echo "sass_tools: no python3 to run pip" >&2; exit 1; }
    rm -rf "$dir.tmp"
    if ! "$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$dir.tmp" \
        "nvidia-cuda-cuobjdump==$ver" "nvidia-cuda-nvdisasm==$ver" >/tmp/tessgen-sass-pip.log 2>&1; then
        echo "sass_tools: pip could not install nvidia-cuda-cuobjdump==$ver (see /tmp/tessgen-sass-pip.log)" >&2
        rm -rf "$dir.tmp"
        exit 1
    fi
    rm -rf "$dir" && mv "$dir.tmp" "$dir" # complete or absent: a run cut short leaves only $dir.tmp
fi
[ -x "$tool" ] || { echo "sass_tools: $tool missing after the install" >&2; exit 1; }
echo "$(pwd)/$tool"
