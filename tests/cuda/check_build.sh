# shellcheck shell=bash disable=SC2034,SC2154 # sets what its callers use; reads their out and name
# tests/cuda/check_build.sh - sourced by the standalone kernel checks (attn_check.sh, bf16_check.sh,
# lnb_check.sh) after they set `out` and `name`: the repository root, nvcc (TESS_NVCC), the output directory,
# the architectures and the flags every check compiles with (sm_80 and sm_90, warnings as errors, spills
# reported, the runtime's and MPI's headers), and fill TEMPLATE: a template of templates/ on stdout with its
# placeholders filled with fixed text and @@INSTANCES@@ with $INST (empty unless set).
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
nvcc=${TESS_NVCC:-nvcc}
mkdir -p "$out"
# TESS_CHECK_GENCODE: other targets (tests/gpu/lease.sh compiles for the GPU at hand only, halving the time)
arch=${TESS_CHECK_GENCODE:-"-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"}
flags="-std=c++20 -O3 $arch -ccbin mpicxx -Xcompiler -Wall,-Wextra -Xcompiler -Werror -Werror all-warnings
    -Xptxas -warn-spills -I$out -I$repo/runtime -I$repo/runtime/cuda -I$repo/tests/cuda
    $(mpicc --showme:compile 2>/dev/null || true)"
fill() { # template -> stdout
    INST="${INST:-}" NAME="$name" python3 - "$1" <<'PY'
import os, re, sys
t = open(sys.argv[1]).read().replace("@@INSTANCES@@", os.environ["INST"] + ("\n" if os.environ["INST"] else ""))
sys.stdout.write(re.sub(r"@@[A-Z_]+@@", os.environ["NAME"], t))
PY
}
