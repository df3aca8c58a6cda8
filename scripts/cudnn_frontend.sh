#!/bin/sh
# scripts/cudnn_frontend.sh - print the include directory of NVIDIA's cudnn-frontend (header-only C++ over cuDNN's
# backend API), which runtime/cuda/trc_sdpa.cpp needs for the fused attention (attention = "cudnn", docs/CUDA.md
# "Fused attention through cuDNN"). TESS_CUDNN_FRONTEND (a directory holding cudnn_frontend.h) when set; else the
# PyPI wheel nvidia-cudnn-frontend at the pinned version, downloaded once with pip (no dependencies) and only its
# include/ unpacked into build/tools/cudnn-frontend (ignored by git; nothing outside the checkout is touched). The
# wheel is CPython-specific but its include/ is plain headers, so any python3 with pip will do. Atomic: a run cut
# short leaves only a .tmp folder, never a half-filled one. Fails with one line on stderr when the headers cannot be
# had (no network, no pip); the build and the suite then skip the cuDNN object and say why.
set -u
cd "$(dirname "$0")/.." || exit 1
ver=1.32.0 # the frontend version trc_sdpa.cpp was written against
if [ -n "${TESS_CUDNN_FRONTEND:-}" ]; then
    [ -f "$TESS_CUDNN_FRONTEND/cudnn_frontend.h" ] || {
        echo "cudnn_frontend: TESS_CUDNN_FRONTEND=$TESS_CUDNN_FRONTEND has no cudnn_frontend.h" >&2
        exit 1
    }
    echo "$TESS_CUDNN_FRONTEND"
    exit 0
fi
dir=build/tools/cudnn-frontend
if [ "$(cat "$dir/VERSION" 2>/dev/null)" != "$ver" ] || [ ! -f "$dir/include/cudnn_frontend.h" ]; then
    py=$(command -v python3 || true)
    [ -n "$py" ] || { echo "cudnn_frontend: no python3 to run pip" >&2; exit 1; }
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/whl" || exit 1
    log=$dir.tmp.log
    if ! "$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --python-version 3.11 -d "$dir.tmp/whl" "nvidia-cudnn-frontend==$ver" >"$log" 2>&1; then
        echo "cudnn_frontend: pip could not download nvidia-cudnn-frontend==$ver (see $log)" >&2
        rm -rf "$dir.tmp"
        exit 1
    fi
    if ! "$py" - "$dir.tmp" >>"$log" 2>&1 <<'PY'; then
import glob, os, sys, zipfile
d = sys.argv[1]
whl = glob.glob(os.path.join(d, "whl", "*.whl"))
if len(whl) != 1:
    sys.exit("expected one wheel, found %d" % len(whl))
with zipfile.ZipFile(whl[0]) as z:
    names = [n for n in z.namelist() if n.startswith("include/") and not n.endswith("/")]
    if "include/cudnn_frontend.h" not in names:
        sys.exit("the wheel has no include/cudnn_frontend.h")
    for n in names:
        z.extract(n, d)
PY
        echo "cudnn_frontend: could not unpack the headers of nvidia-cudnn-frontend==$ver (see $log)" >&2
        rm -rf "$dir.tmp"
        exit 1
    fi
    rm -rf "$dir.tmp/whl" && echo "$ver" >"$dir.tmp/VERSION"
    rm -rf "$dir" && mv "$dir.tmp" "$dir" && rm -f "$log" # complete or absent
fi
echo "$(pwd)/$dir/include"
