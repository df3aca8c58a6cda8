# shellcheck shell=bash disable=SC2034 # the TG_* variables are read by the scripts that source this file
# tests/gpu/env.sh - sourced by tests/gpu/check.sh, bench.sh and rehearse.sh: makes a machine with an NVIDIA
# GPU, nvcc, cuBLAS and Python but no Open MPI and no Lua ready to build and run tessgen's CUDA backend, from
# what tests/gpu/prepare.sh put in build/gpu-carry/, and defines the helpers the checks share.
#
#   Open MPI    the carried .deb files unpacked into $TESS_GPU_MPI_ROOT (default /tmp/tessgen-mpi; dpkg-deb -x,
#               or tests/gpu/unpack_deb.py without dpkg) and made relocatable: OPAL_PREFIX, PMIX_PREFIX/
#               DATADIR/LIBDIR, PATH, LD_LIBRARY_PATH; one node, no ssh (plm isolated), shared memory only
#               (btl self,vader; pml ob1), no binding. TESS_GPU_SYSTEM_MPI=1 uses the machine's own
#               mpicc/mpirun instead.
#   tessgen     build/gpu-carry/bin/tessgen (TESSGEN_ROOT = this checkout), refused when it was built from
#               other sources than this tree's (tests/gpu/srchash.sh)
#   nvcc        TESS_NVCC, PATH, $CUDA_HOME/bin or /usr/local/cuda/bin; its lib64 becomes an rpath of
#               bin/model-cuda (TESS_CUDA_LDFLAGS) so cuBLAS loads without LD_LIBRARY_PATH
#   NCCL        TESS_NCCL_HOME, else the nvidia-nccl wheel of python3 (site-packages/nvidia/nccl), else the
#               compiler's own paths
#   GPU         nvidia-smi: name, compute capability -> TESS_CUDA_ARCH (build for this GPU only)
#   warnings    TESS_WERROR=0 unless set: a warning of a host compiler this code never met is reported, not fatal
#
# TESS_GPU_STANDIN=1 (for checking these scripts on a machine without a GPU): tests/gpu/standin/ provides
# nvidia-smi and compute-sanitizer stand-ins, and bin/model-cuda starts the generated rank_iI_jJ.cu compiled
# against the CPU emulation tests/cuda/emu.cc (as tests/cuda.sh does): the flows run, no GPU code does.
#
# Results: $OUT (the device tool's folder) or $TESS_GPU_OUT (default /tmp/tessgen-gpu-out); generated outputs
# and builds: $TESS_GPU_WORK (default build/gpu-work, kept between commands while the machine stays up).

TG_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TG_CARRY=${TESS_GPU_CARRY:-$TG_REPO/build/gpu-carry}
TG_WORK=${TESS_GPU_WORK:-$TG_REPO/build/gpu-work}
TG_OUT=${OUT:-${TESS_GPU_OUT:-/tmp/tessgen-gpu-out}}
TG_STANDIN=${TESS_GPU_STANDIN:-0}
mkdir -p "$TG_WORK" "$TG_OUT"
TG_PASS=0
TG_FAIL=0
TG_SKIP=0
TG_LOG="$TG_OUT/check.txt" # every ok/not ok line, with the tail of a failing command's log

tg_say() { echo "$*" | tee -a "$TG_LOG"; }
tg_ok() {
    case "$1" in
    *"# skip"*) TG_SKIP=$((TG_SKIP + 1)) ;;
    *) TG_PASS=$((TG_PASS + 1)) ;;
    esac
    tg_say "ok - $1"
}
tg_notok() {
    TG_FAIL=$((TG_FAIL + 1))
    tg_say "not ok - $1"
    [ -n "${2:-}" ] && [ -f "$2" ] && tail -40 "$2" | sed 's/^/    # /' | tee -a "$TG_LOG"
    return 0
}
# tg_check NAME CMD...: passes when CMD exits 0; its output goes to $TG_WORK/logs/<n>.log and is shown on failure
tg_check() {
    local name=$1 n
    shift
    mkdir -p "$TG_WORK/logs"
    n=$(printf '%03d' $((TG_PASS + TG_FAIL + TG_SKIP + 1)))
    if "$@" >"$TG_WORK/logs/$n.log" 2>&1; then
        tg_ok "$name"
        grep -hE "${TG_SHOW:-rel_err=|worst|runs bitwise|compiler warning}" "$TG_WORK/logs/$n.log" | head -"${TG_SHOW_LINES:-8}" |
            sed 's/^/    # /' | tee -a "$TG_LOG"
    else
        tg_notok "$name" "$TG_WORK/logs/$n.log"
    fi
}
tg_summary() {
    tg_say "$TG_PASS passed, $TG_FAIL failed, $TG_SKIP skipped"
    [ "$TG_FAIL" -eq 0 ]
}

# ---- Open MPI from the carried packages ----------------------------------------------------------------------
tg_mpi_setup() {
    if [ "${TESS_GPU_SYSTEM_MPI:-0}" = 1 ]; then
        if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
            echo "env: TESS_GPU_SYSTEM_MPI=1 but mpicc/mpirun are not on PATH" >&2
            return 1
        fi
        return 0
    fi
    local root=${TESS_GPU_MPI_ROOT:-/tmp/tessgen-mpi} debs stamp
    debs=$(ls "$TG_CARRY"/debs/*.deb 2>/dev/null) || {
        echo "env: no packages in $TG_CARRY/debs: run tests/gpu/prepare.sh on the build machine and carry" \
            "build/gpu-carry (docs/CUDA.md)" >&2
        return 1
    }
    stamp=$(echo "$debs" | xargs -n1 basename | sha256sum | cut -c1-16)
    if [ "$(cat "$root/.tessgen-stamp" 2>/dev/null)" != "$stamp" ]; then
        rm -rf "$root" && mkdir -p "$root" || return 1
        local d
        for d in $debs; do
            if command -v dpkg-deb >/dev/null && [ "${TESS_GPU_UNPACK:-dpkg}" = dpkg ]; then
                dpkg-deb -x "$d" "$root" || return 1
            else
                python3 "$TG_REPO/tests/gpu/unpack_deb.py" "$d" "$root" || return 1
            fi
        done
        # what Debian's alternatives system would have made
        local t
        for t in mpicc mpicxx mpirun mpiexec; do ln -sf "$t.openmpi" "$root/usr/bin/$t"; done
        local psm
        psm=$(find "$root/usr/lib/libpsm1" -name 'libpsm_infinipath.so.1.*' | head -1)
        [ -n "$psm" ] && ln -sf "$(basename "$psm")" "$root/usr/lib/libpsm1/libpsm_infinipath.so.1"
        echo "$stamp" >"$root/.tessgen-stamp"
    fi
    local pmix=$root/usr/lib/x86_64-linux-gnu/pmix2
    export OPAL_PREFIX=$root/usr
    export PMIX_PREFIX=$pmix PMIX_DATADIR=$pmix/share PMIX_LIBDIR=$pmix/lib
    export PATH=$root/usr/bin:$PATH
    export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu/openmpi/lib:$root/usr/lib/libpsm1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # one node, started by fork (no ssh), shared memory between the ranks; the settings Debian keeps in
    # /etc/openmpi/openmpi-mca-params.conf, which a relocated root does not read
    export OMPI_MCA_plm=isolated OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_mtl=^ofi OMPI_MCA_osc=^ucx,pt2pt
    # no binding: the ranks share one GPU and a virtual machine may not let hwloc bind
    export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
    export OMPI_MCA_hwloc_base_binding_policy=none
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    TG_MPI_ROOT=$root
}

# ---- the toolchain ---------------------------------------------------------------------------------------------
tg_toolchain() {
    # tessgen: the carried build, from the same sources as this tree
    TG_TESSGEN=$TG_CARRY/bin/tessgen
    [ -x "$TG_TESSGEN" ] || TG_TESSGEN=$TG_REPO/bin/tessgen
    if ! [ -x "$TG_TESSGEN" ]; then
        echo "env: no tessgen: carry build/gpu-carry (tests/gpu/prepare.sh) or build it (ninja)" >&2
        return 1
    fi
    local want have
    want=$(sed -n 's/^sources //p' "$TG_CARRY/MANIFEST" 2>/dev/null)
    have=$("$TG_REPO/tests/gpu/srchash.sh")
    if [ "$TG_TESSGEN" = "$TG_CARRY/bin/tessgen" ] && [ "$want" != "$have" ]; then
        echo "env: $TG_TESSGEN was built from sources $want, this tree has $have: run tests/gpu/prepare.sh again" >&2
        return 1
    fi
    export TESSGEN_ROOT=$TG_REPO
    PY=$("$TG_REPO/scripts/python.sh") || return 1
    command -v ninja >/dev/null || {
        echo "env: no ninja (the carried ninja-build is unpacked with Open MPI; TESS_GPU_SYSTEM_MPI=1 needs one)" >&2
        return 1
    }
    # nvcc, and the rpath that lets bin/model-cuda find cuBLAS
    local nvcc=${TESS_NVCC:-}
    [ -n "$nvcc" ] || nvcc=$(command -v nvcc 2>/dev/null) || true
    if [ -z "$nvcc" ]; then
        local h
        for h in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
            [ -n "$h" ] && [ -x "$h/bin/nvcc" ] && { nvcc=$h/bin/nvcc; break; }
        done
    fi
    [ -n "$nvcc" ] || { echo "env: nvcc not found (TESS_NVCC, PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)" >&2; return 1; }
    TG_NVCC=$(readlink -f "$(command -v "$nvcc")")
    export TESS_NVCC=$TG_NVCC
    local cudalib="" d
    for d in "$(dirname "$TG_NVCC")/../lib64" "$(dirname "$TG_NVCC")/../lib" "$(dirname "$TG_NVCC")/../targets/x86_64-linux/lib"; do
        if ls "$d"/libcublas.so* >/dev/null 2>&1; then cudalib=$(cd "$d" && pwd); break; fi
    done
    [ -n "$cudalib" ] && [ -z "${TESS_CUDA_LDFLAGS:-}" ] && export TESS_CUDA_LDFLAGS="-Xlinker -rpath=$cudalib"
    TG_CUDALIB=$cudalib
    # NCCL: the wheel PyTorch uses, when there is no TESS_NCCL_HOME
    if [ -z "${TESS_NCCL_HOME:-}" ]; then
        local w
        w=$("$PY" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null) || w=""
        [ -n "$w" ] && [ -f "$w/include/nccl.h" ] && export TESS_NCCL_HOME=$w
    fi
    tg_cudnn_env
    export TESS_WERROR=${TESS_WERROR:-0}
    export TESS_BACKENDS=cpu,cuda
    # the GPU
    if [ "$TG_STANDIN" = 1 ]; then
        export PATH=$TG_REPO/tests/gpu/standin:$PATH
    fi
    command -v nvidia-smi >/dev/null || { echo "env: nvidia-smi not found: no NVIDIA driver here" >&2; return 1; }
    TG_GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
    local cc
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
    [ -n "$cc" ] || { echo "env: nvidia-smi reports no GPU" >&2; return 1; }
    export TESS_CUDA_ARCH=${TESS_CUDA_ARCH:-$cc}
}

tg_setup() {
    tg_mpi_setup && tg_toolchain
}

# ---- models, references, builds, runs --------------------------------------------------------------------------
# name -> "layers hidden heads ffn seq batch"; seq is on purpose no multiple of the attention kernels' tiles
# (64 keys and 16 query rows per block at head dim 64, 32 and 16 at head dim 128)
tg_dims() {
    case "$1" in
    m64) echo "2 256 4 1024 100 8" ;;   # head dim 64 (GPT-2's)
    m128) echo "2 512 4 2048 72 4" ;;   # head dim 128
    tiny) echo "1 128 2 256 20 4" ;;    # the sanitizer's
    gpt2s2) echo "2 768 12 3072 1024 8" ;;  # GPT-2 small's block, 2 layers (profile)
    gpt2s) echo "12 768 12 3072 1024 8" ;;  # GPT-2 small's 12 blocks
    lm64) echo "2 256 4 1024 100 8" ;;     # the whole GPT-2 (tg_lmdims: vocab 999, padded on q = 2)
    gpt2lm) echo "12 768 12 3072 1024 8" ;; # the whole GPT-2 small (tg_lmdims: vocab 50257, 124M parameters; tg_gen
                                            # gives it vocab_align = 64)
    lmtiny) echo "1 128 2 256 20 4" ;;     # the whole GPT-2 at the sanitizer's size (bench.sh's small shapes)
    gpt2g) echo "12 768 12 3072 128 8" ;;  # GPT-2 small generating (bench.sh decode): prompts up to 128, 8 sequences
    gpt2g1) echo "12 768 12 3072 128 1" ;; # the same, one sequence
    gpt2mg) echo "24 1024 16 4096 128 8" ;; # GPT-2 medium generating, 8 sequences
    lmtinyg) echo "1 128 2 256 20 4" ;;    # lmtiny generating (bench.sh's small shapes)
    *) echo "tg_dims: unknown model $1" >&2; return 1 ;;
    esac
}
tg_lmdims() { # model -> "vocab positions"
    case "$1" in
    lm64) echo "999 128" ;; gpt2lm | gpt2g | gpt2g1 | gpt2mg) echo "50257 1024" ;; lmtiny | lmtinyg) echo "999 32" ;;
    *) return 1 ;;
    esac
}
tg_refargs() { # model -> tessref's dimension options
    local L C H F S B
    read -r L C H F S B <<<"$(tg_dims "$1")"
    echo "--layers $L --hidden $C --heads $H --ffn $F --seq $S --batch $B"
}
# tg_refdata MODEL: weights, input, forward output; dy, dx, gradients; target and 20-step losses (float64)
tg_refdata() {
    local m=$1 d=$TG_WORK/ref_$1 args
    args=$(tg_refargs "$m")
    [ -s "$d/loss.txt" ] && return 0
    mkdir -p "$d"
    # shellcheck disable=SC2086
    "$PY" "$TG_REPO/tests/ref/tessref.py" weights $args --seed 7 --out "$d/w.safetensors" &&
        "$PY" "$TG_REPO/tests/ref/tessref.py" input $args --seed 7 --out "$d/x.npy" &&
        "$PY" "$TG_REPO/tests/ref/tessref.py" forward $args --weights "$d/w.safetensors" --input "$d/x.npy" \
            --out "$d/y.npy" &&
        "$PY" "$TG_REPO/tests/ref/tessref.py" dy $args --seed 8 --out "$d/dy.npy" &&
        "$PY" "$TG_REPO/tests/ref/tessref.py" backward $args --weights "$d/w.safetensors" --input "$d/x.npy" \
            --dy "$d/dy.npy" --dx-out "$d/dx.npy" --grads-out "$d/g.safetensors" &&
        "$PY" "$TG_REPO/tests/ref/tessref.py" input $args --seed 9 --out "$d/target.npy" &&
        "$PY" "$TG_REPO/tests/ref/tessref.py" train $args --weights "$d/w.safetensors" --input "$d/x.npy" \
            --target "$d/target.npy" --steps 20 --lr 1e-3 --beta1 0.9 --beta2 0.999 --adam-eps 1e-8 \
            --weight-decay 0.01 >"$d/loss.txt"
}
# tg_lmref MODEL: the whole GPT-2's weights, tokens, targets; float64 logits, loss and gradients, with and without
# --bf16 (logits.npy, loss.txt, g.st; logits16.npy, loss16.txt, g16.st)
tg_lmref() {
    local m=$1 d=$TG_WORK/ref_$1 args V P L C H F S B R=$TG_REPO/tests/ref/tessref.py
    [ -s "$d/g16.st" ] && return 0
    read -r V P <<<"$(tg_lmdims "$m")"
    read -r L C H F S B <<<"$(tg_dims "$m")"
    args="$(tg_refargs "$m") --vocab $V --positions $P"
    mkdir -p "$d"
    # shellcheck disable=SC2086
    "$PY" "$R" lm-weights $args --seed 7 --out "$d/w.st" &&
        "$PY" "$R" tokens --batch "$B" --seq "$S" --vocab "$V" --seed 1 --out "$d/tok.npy" &&
        "$PY" "$R" tokens --batch "$B" --seq "$S" --vocab "$V" --seed 2 --out "$d/tgt.npy" &&
        for b in "" --bf16; do
            "$PY" "$R" lm-forward $args $b --weights "$d/w.st" --tokens "$d/tok.npy" --targets "$d/tgt.npy" \
                --logits-out "$d/logits${b:+16}.npy" >"$d/loss${b:+16}.txt" &&
                "$PY" "$R" lm-backward $args $b --weights "$d/w.st" --tokens "$d/tok.npy" --targets "$d/tgt.npy" \
                    --grads-out "$d/g${b:+16}.st" >/dev/null || return 1
        done
}
# tg_refdata16 MODEL: the same with tessref --bf16 (docs/BF16.md's rounding points): y16, dx16, g16, loss16
tg_refdata16() {
    local m=$1 d=$TG_WORK/ref_$1 args
    args=$(tg_refargs "$m")
    [ -s "$d/loss16.txt" ] && return 0
    tg_refdata "$m" || return 1
    # shellcheck disable=SC2086
    "$PY" "$TG_REPO/tests/ref/tessref.py" forward $args --bf16 --weights "$d/w.safetensors" --input "$d/x.npy" \
        --out "$d/y16.npy" &&
        "$PY" "$TG_REPO/tests/ref/tessref.py" backward $args --bf16 --weights "$d/w.safetensors" --input "$d/x.npy" \
            --dy "$d/dy.npy" --dx-out "$d/dx16.npy" --grads-out "$d/g16.safetensors" &&
        "$PY" "$TG_REPO/tests/ref/tessref.py" train $args --bf16 --weights "$d/w.safetensors" --input "$d/x.npy" \
            --target "$d/target.npy" --steps 20 --lr 1e-3 --beta1 0.9 --beta2 0.999 --adam-eps 1e-8 \
            --weight-decay 0.01 >"$d/loss16.txt"
}
# tg_cudnn_env: what attention = "cudnn" needs (docs/CUDA.md, "Fused attention through cuDNN"): cuDNN 9 from
# python3's nvidia-cudnn wheel (the one PyTorch loads: include/cudnn.h, lib/libcudnn.so.9), linked by that name with
# an rpath and on LD_LIBRARY_PATH (cuDNN opens its engine libraries from there), and the cudnn-frontend headers
# carried in build/gpu-carry/cudnn-frontend (no network there). build/cuda/trc_sdpa.o is then compiled here once,
# against the wheel's cudnn.h, by the first build that needs it. TG_CUDNN: the wheel's folder ("emulated" on the
# stand-in, whose emulation needs no cuDNN), empty with TG_CUDNN_WHY when it cannot be had.
tg_cudnn_env() {
    TG_CUDNN="" TG_CUDNN_WHY=""
    if [ "$TG_STANDIN" = 1 ]; then
        TG_CUDNN=emulated
        return 0
    fi
    local w fe=$TG_REPO/build/gpu-carry/cudnn-frontend/include
    [ -n "${TESS_CUDNN_FRONTEND:-}" ] || { [ -f "$fe/cudnn_frontend.h" ] && export TESS_CUDNN_FRONTEND=$fe; }
    [ -n "${TESS_CUDNN_FRONTEND:-}" ] || { TG_CUDNN_WHY="no cudnn-frontend headers (tests/gpu/prepare.sh carries them)"; return 0; }
    w=$("$PY" -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null) || w=""
    if [ -z "$w" ] || [ ! -f "$w/include/cudnn.h" ] || [ ! -f "$w/lib/libcudnn.so.9" ]; then
        TG_CUDNN_WHY="no cuDNN 9 wheel for python3 (import nvidia.cudnn: include/cudnn.h, lib/libcudnn.so.9)"
        return 0
    fi
    export TESS_CUDNN_INCLUDE=$w/include
    export TESS_CUDNN_LIBS="-L$w/lib -l:libcudnn.so.9 -Xlinker -rpath=$w/lib"
    export LD_LIBRARY_PATH=$w/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    TG_CUDNN=$w
}
# tg_gen MODEL MODE q d -> prints the output folder (generated there; MODE infer or train, or infer16 or train16:
# the same with dtype = "bf16"; suffixes below: cudnn, noepi, pp2)
tg_dir() { echo "$TG_WORK/$1_$2_$3_$4"; }
tg_gen() {
    local m=$1 mode=$2 q=$3 dd=$4 dir L C H F S B dtype=fp32
    dir=$(tg_dir "$m" "$mode" "$q" "$dd")
    read -r L C H F S B <<<"$(tg_dims "$m")"
    local sfx="" lm="" # fp32 names as before
    local attn="" # MODE infer16cudnn or train16cudnn: bf16 with attention = "cudnn"; infer16, train16: "cublas"
    local epi=""  # MODE ending in "noepi": the same with epilogues = false (every bias, GeLU and gradient step a
                  # kernel of its own: the side-by-side control of a fusion, bench.sh)
    local pp="" # MODE ending in "pp2": 2 pipeline stages of [q,q,d], 2 micro-batches (docs/TRAINING.md)
    case "$mode" in
    *pp2) mode=${mode%pp2} sfx=_pp2 pp=', pp = 2' epi='
  pipeline = { microbatches = 2 },' ;;
    esac
    case "$mode" in
    *noepi) mode=${mode%noepi} sfx=_noepi$sfx epi="$epi"'
  epilogues = false,' ;;
    esac
    case "$mode" in
    *16cudnn) dtype=bf16 mode=${mode%16cudnn} sfx=_bf16_cudnn$sfx attn='
  attention = "cudnn",'"$epi" ;;
    *16) dtype=bf16 mode=${mode%16} sfx=_bf16$sfx attn='
  attention = "cublas",'"$epi" ;; # the cuBLAS path by name: without the key a bf16 spec takes cuDNN's
    *) attn=$epi ;;
    esac
    local V P
    read -r V P <<<"$(tg_lmdims "$m")"
    [ -n "$V" ] && lm=", vocab = $V, positions = $P"
    [ "$mode" = generate ] && lm="$lm, context = $P" # the KV cache: every position (docs/GENERATE.md)
    # gpt2lm, the bench model, pads every rank's vocab block to a multiple of 64 (docs/MODEL.md "Padding": Vq 50304
    # on q = 1, not the odd 50257 that keeps cuBLAS off its tensor-core kernels); lm64, the check model, keeps its
    # odd widths (vocab 999: Vq 999 on q = 1, 500 on q = 2) so the checks still cover unaligned blocks
    case $m in gpt2lm | gpt2g | gpt2g1 | gpt2mg) lm="$lm, vocab_align = 64" ;; esac
    cat >"$dir.lua" <<SPEC
return {
  name = "${m}_${mode}${sfx}_q${q}_d${dd}",
  mesh = { q = $q, d = $dd$pp },
  model = { layers = $L, hidden = $C, heads = $H, ffn = $F, seq = $S, batch = $B$lm },
  mode = "$mode", dtype = "$dtype",$attn
  backends = { "cpu", "cuda" },
}
SPEC
    "$TG_TESSGEN" "$dir.lua" -o "$dir" --quiet
}
# tg_build MODEL MODE q d: generate and build bin/model-cuda (the emulated one under TESS_GPU_STANDIN=1)
tg_build() {
    local dir
    dir=$(tg_dir "$@")
    tg_gen "$@" || return 1
    if [ "$TG_STANDIN" != 1 ]; then
        ninja -C "$dir" cuda >"$dir.build.log" 2>&1 || { cat "$dir.build.log"; return 1; }
        local w
        w=$(grep -c "warning" "$dir.build.log")
        [ "$w" -eq 0 ] || echo "build of $dir: $w compiler warning lines (TESS_WERROR=$TESS_WERROR): $dir.build.log"
        return 0
    fi
    # stand-in: the class programs against the CPU emulation of the CUDA runtime, as bin/cuda/... behind
    # bin/model-cuda, so the generated launcher runs them as it would the real ones
    "$TG_REPO/tests/cuda/emu_build.sh" "$dir" cuda model-cuda
}
tg_built() { [ -x "$(tg_dir "$@")/bin/model-cuda" ]; }
# tg_run MODEL MODE q d ARGS...: run bin/model-cuda through the generated launcher, at most $TG_TIMEOUT seconds
# (default 240); several ranks share the one GPU, so their collectives go through MPI with host staging
# (TESS_COMM=mpi; NCCL refuses a shared GPU)
tg_run() {
    local dir comm=auto
    dir=$(tg_dir "$1" "$2" "$3" "$4")
    [ $(($3 * $3 * $4)) -gt 1 ] && comm=mpi
    shift 4
    timeout -k 10 "${TG_TIMEOUT:-240}" env TESS_BACKEND=cuda TESS_COMM="${TESS_COMM:-$comm}" "$dir/run" "$@"
}
tg_poison() { # FILE B S C: a NaN-filled float32 .npy, so a program that writes nothing fails the comparison
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full(tuple(map(int, sys.argv[2:])), np.nan, np.float32))" "$@"
}
tg_bsc() { # model -> "B S C"
    local L C H F S B
    read -r L C H F S B <<<"$(tg_dims "$1")"
    echo "$B $S $C"
}
