# shellcheck shell=bash
# tests/gpu.sh - sourced by tests/run.sh: what of the GPU check (tests/gpu/, docs/CUDA.md) can be verified on a
# machine without a GPU.
#   settings   build.ninja's settings: TESS_NCCL_HOME with the layout of pip's nvidia-nccl wheel (include/nccl.h,
#              lib/libnccl.so.2 only) gives -I, -l:libnccl.so.2 and an rpath, and with nvcc bin/model-cuda links
#              and loads NCCL from there; TESS_WERROR=0 and the compiler and MPI settings reach both parts; bad
#              values are refused naming the variable, nothing written
#   carry      tests/gpu/prepare.sh fills build/gpu-carry (Debian's package servers needed, else skipped);
#              unpack_deb.py extracts what dpkg-deb -x does; a carried tessgen from other sources is refused
#   rehearsal  tests/gpu/rehearse.sh: the system's Open MPI, Lua and ssh hidden in a mount namespace, the
#              carried packages unpacked into a scratch root, a [2,2,1] model built with its mpicc and run with
#              its mpirun against the float64 reference (and, with nvcc, bin/model-cuda linked through its mpicxx)
#   flows      tests/gpu/check.sh env with TESS_GPU_STANDIN=1 (the CUDA emulation standing in for the GPU);
#              bench_report.py's tables from a fixed profile and its bf16 comparison (tokens/s, MFU) from fixed
#              timings; bench.sh compare report on the stand-in; torch_bench.py without torch skips cleanly;
#              every script passes shellcheck
GPU_SPEC='return { name = "gs", mesh = { q = 1 }, model = { layers = 1, hidden = 128, heads = 2, ffn = 256, seq = 8, batch = 2 }, backends = { "cpu", "cuda" } }'

gpu_nvcc() { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; }

gpu_settings_nccl() { # a pip-style NCCL folder: include/nccl.h and only lib/libnccl.so.2
    local w=$WORK/gpu_wheel/nvidia/nccl hdr lib link=1
    hdr=$(echo '#include <nccl.h>' | cpp -I/usr/local/cuda/include -H -o /dev/null 2>&1 | awk '/nccl.h/ {print $2; exit}')
    [ -n "$hdr" ] || { echo "no nccl.h on this machine"; return 1; }
    lib=$(ldconfig -p | awk '/libnccl.so.2 / {print $NF; exit}')
    rm -rf "$w" && mkdir -p "$w/include" "$w/lib" && cp "$hdr" "$w/include/nccl.h" || return 1
    if [ -n "$lib" ] && gpu_nvcc; then
        cp "$lib" "$w/lib/libnccl.so.2" || return 1
    else
        : >"$w/lib/libnccl.so.2" # no NCCL or no nvcc: an empty stand-in file, build.ninja checked only
        link=0
    fi
    printf '%s\n' "$GPU_SPEC" >"$WORK/gs.lua" &&
        TESS_NCCL_HOME=$w TESS_CUDA_ARCH=90 build/asan/tessgen "$WORK/gs.lua" -o "$WORK/gs" --quiet || return 1
    grep -qx "nccl_cflags = -I$w/include" "$WORK/gs/build.ninja" || { echo "no -I for TESS_NCCL_HOME"; return 1; }
    grep -qx "nccl_libs = -L$w/lib -l:libnccl.so.2 -Xlinker -rpath=$w/lib" "$WORK/gs/build.ninja" ||
        { echo "no -l:libnccl.so.2 and rpath for TESS_NCCL_HOME"; return 1; }
    [ $link = 1 ] || return 0
    PATH=$PATH:/usr/local/cuda/bin ninja -C "$WORK/gs" cuda >"$WORK/gs.log" 2>&1 || { cat "$WORK/gs.log"; return 1; }
    readelf -d "$WORK/gs/bin/cuda/rank_i0_j0" | grep -q "R.*PATH.*$w/lib" || { echo "no rpath to $w/lib"; return 1; }
    env -u LD_LIBRARY_PATH ldd "$WORK/gs/bin/cuda/rank_i0_j0" | grep "libnccl.so.2 => $w/lib/libnccl.so.2" ||
        { echo "bin/cuda/rank_i0_j0 does not load the wheel's libnccl.so.2"; return 1; }
    # the runtime was compiled in the checkout's build/shared-rt (scripts/rt_shared.sh): the folder whose trc_comm.o
    # this output copied records the headers it read
    local s found=0
    for s in "$ROOT"/build/shared-rt/*/trc_comm.o; do
        cmp -s "$s" "$WORK/gs/obj-cuda/rt/trc_comm.o" || continue
        (cd "$(dirname "$s")" && ninja -t deps trc_comm.o) | grep -q "$w/include/nccl.h" && found=1
    done
    [ $found = 1 ] || { echo "trc_comm.cu was not compiled against the wheel's nccl.h"; return 1; }
}
gpu_settings_values() { # every setting reaches build.ninja; TESS_WERROR=0 drops -Werror in both parts
    printf '%s\n' "$GPU_SPEC" >"$WORK/gs2.lua" &&
        TESS_MPICC=gcc TESS_CUDA_CCBIN=g++ TESS_MPI_CFLAGS="-I/opt/mpi/include" TESS_MPI_LIBS="-L/opt/mpi/lib -lmpi" \
            TESS_CUDA_LDFLAGS="-Xlinker -rpath=/opt/cuda/lib64" TESS_WERROR=0 \
            build/asan/tessgen "$WORK/gs2.lua" -o "$WORK/gs2" --quiet || return 1
    local f=$WORK/gs2/build.ninja want
    for want in "mpicc = gcc" "ccbin = g++" "mpi_cflags = -I/opt/mpi/include" "mpi_libs = -L/opt/mpi/lib -lmpi" \
        "cuda_ldflags = -Xlinker -rpath=/opt/cuda/lib64" "werror =" "cuda_werror =" "nccl_libs = -lnccl"; do
        grep -qx -- "$want" "$f" || { echo "build.ninja lacks the line: $want"; return 1; }
    done
    if grep -q -- "-Werror" "$f"; then echo "TESS_WERROR=0 left a -Werror"; return 1; fi
    ninja -C "$WORK/gs2" -t commands bin/cpu/rank_i0_j0 | grep -q "^gcc .*-I/opt/mpi/include" ||
        { echo "the C compile does not use TESS_MPICC and TESS_MPI_CFLAGS"; return 1; }
}
gpu_refused() { # message env...: tessgen fails naming the variable, writes nothing
    local want=$1
    shift
    printf '%s\n' "$GPU_SPEC" >"$WORK/gs3.lua" && rm -rf "$WORK/gs3"
    env "$@" build/asan/tessgen "$WORK/gs3.lua" -o "$WORK/gs3" >"$WORK/gs3.out" 2>&1
    local rc=$?
    cat "$WORK/gs3.out"
    [ $rc -ne 0 ] && grep -qF -- "$want" "$WORK/gs3.out" && [ ! -e "$WORK/gs3" ]
}

gpu_prepare() { tests/gpu/prepare.sh; }
gpu_unpack_same() { # unpack_deb.py and dpkg-deb -x give the same files, links and sizes
    local d
    rm -rf "$WORK/up_py" "$WORK/up_dpkg"
    for d in build/gpu-carry/debs/libopenmpi-dev_*.deb build/gpu-carry/debs/openmpi-bin_*.deb \
        build/gpu-carry/debs/libpsm-infinipath1_*.deb; do
        "$PY" tests/gpu/unpack_deb.py "$d" "$WORK/up_py" && dpkg-deb -x "$d" "$WORK/up_dpkg" || return 1
    done
    (cd "$WORK/up_py" && find . -printf '%P %y %s %l\n' | sort) >"$WORK/up_py.txt" &&
        (cd "$WORK/up_dpkg" && find . -printf '%P %y %s %l\n' | sort) >"$WORK/up_dpkg.txt" &&
        diff "$WORK/up_dpkg.txt" "$WORK/up_py.txt" && echo "$(wc -l <"$WORK/up_py.txt") entries identical"
}
gpu_stale_refused() { # a carry whose MANIFEST names other sources is refused by env.sh
    rm -rf "$WORK/stale_carry" && cp -r build/gpu-carry "$WORK/stale_carry" &&
        sed -i 's/^sources .*/sources 0000000000000000/' "$WORK/stale_carry/MANIFEST"
    TESS_GPU_CARRY=$WORK/stale_carry TESS_GPU_OUT=$WORK/stale_out TESS_GPU_WORK=$WORK/stale_work \
        TESS_GPU_MPI_ROOT=$WORK/stale_root TESS_GPU_STANDIN=1 tests/gpu/check.sh env >"$WORK/stale.out" 2>&1
    local rc=$?
    cat "$WORK/stale.out"
    [ $rc -ne 0 ] && grep -q "was built from sources 0000000000000000" "$WORK/stale.out"
}
gpu_rehearsal() {
    local args=""
    gpu_nvcc && args="--cuda"
    # shellcheck disable=SC2086
    tests/gpu/rehearse.sh $args
}
gpu_standin_env() {
    TESS_GPU_OUT=$WORK/gpu_out TESS_GPU_WORK=$WORK/gpu_work TESS_GPU_MPI_ROOT=$WORK/gpu_root TESS_GPU_STANDIN=1 \
        PATH=$PATH:/usr/local/cuda/bin tests/gpu/check.sh env
}
gpu_report_fixture() { # fixed profile and timings -> the tables, with the fractions computed right
    local d=$WORK/bench_fix
    mkdir -p "$d" && cat >"$d/profile_fp32.txt" <<'EOF'
profile_step id=7 op=qkv t=0 kind=gemm ms=0.500000 bytes=0 m=8192 n=2304 k=768 ref_ms=0.400000 
profile_step id=4 op=ln1 t=-1 kind=ln ms=0.100000 bytes=50331648 m=0 n=0 k=0 ref_ms=0.020000
profile_step id=5 op=qkv t=0 kind=bcast ms=0.010000 bytes=4096 m=0 n=0 k=0 ref_ms=0.000000
EOF
    echo "forward_seconds_median=0.012500000" >"$d/forward_fp32.txt"
    echo "step_seconds_median=0.040000000" >"$d/step_fp32.txt"
    echo '{"device": "X", "torch": "t", "cuda": "c", "check_rel_err": 1e-16, "runs": {"eager_fp32": {"forward_ms": 20.0, "step_ms": 60.0}}}' >"$d/torch.json"
    "$PY" tests/gpu/bench_report.py --dir "$d" --device "Fixture GPU" --shape "12 768 12 3072 1024 8" \
        --profile-shape "2 768 12 3072 1024 8" --out "$d/bench.md" && cat "$d/bench.md" &&
        grep -q "| 7 | qkv | 0 | 8192 x 2304 x 768 | 0.5000 | 58.0 | 0.4000 | 72.5 | 80% |" "$d/bench.md" &&
        grep -q "| 4 | ln1 | ln | 50331648 | 0.1000 | 503 | 0.0200 | 2517 | 20% |" "$d/bench.md" &&
        ! grep -q "| 5 | qkv | bcast" "$d/bench.md" &&
        grep -q "| forward, fp32 | 12.500 | 20.000 | missing |" "$d/bench.md" &&
        grep -q "| training step, fp32 | 40.000 | 60.000 | missing |" "$d/bench.md" &&
        grep -q "missing: no profile_step lines in profile_tf32.txt" "$d/bench.md"
}
gpu_compare_fixture() { # fixed bf16 timings -> tokens/s and MFU as computed here with awk, the time per kind
    local d=$WORK/cmp_fix k v
    rm -rf "$d" && mkdir -p "$d" || return 1
    printf 'forward_seconds_median=0.006000000\n' >"$d/cmp_blocks_forward.txt"
    printf 'step_seconds_median=0.020000000\n' >"$d/cmp_blocks_step.txt"
    printf 'forward_seconds_median=0.009000000\n' >"$d/cmp_lm_forward.txt"
    printf 'step_seconds_median=0.031000000\n' >"$d/cmp_lm_step.txt"
    v=1 # the kinds: 0.001 s, 0.002 s, ... in every file
    for k in bcast allreduce gemm layernorm residual gelu attention reduce optimizer cast; do
        for f in "$d"/cmp_*.txt; do echo "${k}_seconds=0.00$((v % 10))000000" >>"$f"; done
        v=$((v + 1))
    done
    cat >"$d/torch_bf16.json" <<'EOF2'
{"device": "X", "torch": "t", "cuda": "c", "check_rel_err": 1e-16, "lm_check_rel_err": 2e-16, "lm_check_loss_rel_err": 3e-16,
 "runs": {"eager_bf16": {"forward_ms": 8.0, "step_ms": 25.0, "sdpa": "flash"},
          "gpt2_compile_bf16": {"forward_ms": 7.5, "step_ms": 24.0, "sdpa": "cudnn"}}}
EOF2
    "$PY" tests/gpu/bench_report.py --dir "$d" --device "NVIDIA H100 80GB HBM3, 550.54, 81559 MiB" \
        --shape "12 768 12 3072 1024 8" --profile-shape "2 768 12 3072 1024 8" --cmp-shape "12 768 12 3072 1024 8" \
        --cmp-lm "50257 1024" --out "$d/bench.md" && cat "$d/bench.md" || return 1
    # the expected rows, computed independently: docs/COST.md's model FLOPs, H100 SXM's 989.4 TFLOP/s
    local want
    want=$(awk 'function fl(V) { T = 8192; return 12 * (2 * T * (4 * 768 * 768 + 2 * 768 * 3072) + 2 * 8 * 1024 * 1024 * 768) + 2 * T * 768 * V }
        function mfu(f, ms) { return sprintf("%.1f%%", 100 * f / (ms / 1000 * 989.4e12)) }
        BEGIN {
            printf "| tessgen bf16 [1,1,1], attention = \"cublas\" | 6.000 | %s | 20.000 | %d | %s | tessgen'"'"'s own |\n", mfu(fl(0), 6), 8192 / 0.020, mfu(3 * fl(0), 20)
            printf "| PyTorch eager, autocast bf16 | 8.000 | %s | 25.000 | %d | %s | flash |\n", mfu(fl(0), 8), 8192 / 0.025, mfu(3 * fl(0), 25)
            printf "| torch.compile, autocast bf16 | missing | missing | missing | missing | missing | missing |\n"
            printf "| tessgen bf16 [1,1,1], attention = \"cublas\" | 9.000 | %s | 31.000 | %d | %s | tessgen'"'"'s own |\n", mfu(fl(50257), 9), 8192 / 0.031 + 0.5, mfu(3 * fl(50257), 31)
            printf "| torch.compile, autocast bf16 | 7.500 | %s | 24.000 | %d | %s | cudnn |\n", mfu(fl(50257), 7.5), 8192 / 0.024 + 0.5, mfu(3 * fl(50257), 24)
        }') || return 1
    echo "expected rows:" && echo "$want"
    while IFS= read -r v; do
        grep -qxF -- "$v" "$d/bench.md" || { echo "bench.md lacks the row: $v"; return 1; }
    done <<<"$want"
    for v in "| gemm | 3.000 | 3.000 | 3.000 | 3.000 |" "| cast | 0.000 | 0.000 | 0.000 | 0.000 |" \
        "| other | -39.000 | -25.000 | -36.000 | -14.000 |" "| median | 6.000 | 20.000 | 9.000 | 31.000 |"; do
        grep -qxF -- "$v" "$d/bench.md" || { echo "bench.md lacks the row: $v"; return 1; }
    done
    for v in "whole GPT-2, vocab 50257, 124.4M parameters" "Peak: H100 SXM, 989.4 TFLOP/s dense bf16."; do
        grep -qF -- "$v" "$d/bench.md" || { echo "bench.md lacks: $v"; return 1; }
    done
    # torch_bench.py rewrites --out after every run, "complete" false until the last (tests/gpu/torch_bench.py's
    # write_out): a PyTorch run stopped at the lease's time limit is reported with the runs it finished, and says so
    ! grep -qF "stopped at its time limit" "$d/bench.md" || { echo "a complete PyTorch run is called stopped"; return 1; }
    "$PY" -c 'import json, sys; sys.path.insert(0, "tests/gpu"); import torch_bench as t
r = json.load(open(sys.argv[1])); t.write_out(sys.argv[1], r, False)' "$d/torch_bf16.json" &&
        "$PY" tests/gpu/bench_report.py --dir "$d" --device "NVIDIA H100 80GB HBM3, 550.54, 81559 MiB" \
            --shape "12 768 12 3072 1024 8" --profile-shape "2 768 12 3072 1024 8" --cmp-shape "12 768 12 3072 1024 8" \
            --cmp-lm "50257 1024" --out "$d/partial.md" >/dev/null || return 1
    if ! grep -qF "It stopped at its time limit" "$d/partial.md" || ls "$d"/*.tmp 2>/dev/null ||
        ! grep -qxF -- "$(grep -F '| PyTorch eager, autocast bf16 |' "$d/bench.md" | head -1)" "$d/partial.md"; then
        echo "a PyTorch run stopped at its time limit: not said, or its finished runs not reported"
        return 1
    fi
    # the peak from the product name; an unknown device gets no MFU, and says so
    local name peak
    for name in "NVIDIA H100 PCIe=H100 PCIe, 756" "NVIDIA H200=H200, 989.4" "NVIDIA A100-SXM4-80GB=A100, 312" \
        "NVIDIA A100 80GB PCIe=A100, 312" "NVIDIA H100 NVL=" "NVIDIA L40S="; do
        peak=${name#*=} name=${name%%=*}
        "$PY" tests/gpu/bench_report.py --dir "$d" --device "$name" --shape "12 768 12 3072 1024 8" \
            --profile-shape "2 768 12 3072 1024 8" --out "$d/b2.md" >/dev/null || return 1
        if [ -n "$peak" ]; then
            grep -qF "Peak: $peak TFLOP/s dense bf16." "$d/b2.md" || { echo "$name: not Peak: $peak"; return 1; }
        elif ! grep -qF "MFU left out: no dense bf16 peak is known for this device ($name)" "$d/b2.md" ||
            ! grep -qxF "| PyTorch eager, autocast bf16 | 8.000 | - | 25.000 | 327680 | - | flash |" "$d/b2.md"; then
            echo "$name: MFU not left out"
            return 1
        fi
    done
    echo "every row, kind, peak and the unknown devices as computed here"
}
gpu_standin_bench() { # bench.sh compare report on the stand-in, with the system's Open MPI: the flow end to end
    # (with the emulated cuDNN: attention = "cudnn" beside the default, and the serialised step)
    local o=$WORK/bench_out
    rm -rf "$o"
    TESS_GPU_OUT=$o TESS_GPU_WORK=$WORK/bench_work TESS_GPU_STANDIN=1 TESS_BENCH_SMALL=1 TESS_GPU_SYSTEM_MPI=1 \
        TESS_GPU_CARRY=$WORK/no_carry PATH=$PATH:/usr/local/cuda/bin tests/gpu/bench.sh compare report || return 1
    local f=$o/bench.md
    if ! grep -q "^# tessgen CUDA backend on STAND-IN" "$f" ||
        ! grep -qF "## bf16: tessgen beside PyTorch, 1 blocks and the whole GPT-2 (C=128, 2 heads, F=256, 4 x 20 tokens)" "$f" ||
        ! grep -qF "MFU left out: no dense bf16 peak is known for this device (STAND-IN" "$f" ||
        [ "$(grep -cE '^\| tessgen bf16 \[1,1,1\], attention = "cublas" \| [0-9]+\.[0-9]{3} \| - \| [0-9]+\.[0-9]{3} \| [0-9]+ \| - \| ' "$f")" != 2 ] ||
        ! grep -qE '^\| gemm( \| [0-9]+\.[0-9]{3}){4}' "$f" || ! grep -qF "whole GPT-2, vocab 999" "$f"; then
        echo "the compare section of $f is not complete"
        return 1
    fi
    # attention = "cudnn" beside the default (the stand-in emulates cuDNN): its rows for the blocks and the whole
    # model, and the per-kind columns of its steps and of the serialised step (seven columns of numbers)
    if [ "$(grep -cE '^\| tessgen bf16 \[1,1,1\], attention = "cudnn" \| [0-9]+\.[0-9]{3} \| - \| [0-9]+\.[0-9]{3} \| ' "$f")" != 2 ] ||
        ! grep -qF "| 1 blocks step, cudnn | whole GPT-2 step, cudnn | 1 blocks step, cudnn, serialised |" "$f" ||
        ! grep -qE '^\| gemm( \| [0-9]+\.[0-9]{3}){7} \|$' "$f"; then
        echo "the attention = \"cudnn\" rows or the serialised step are missing from $f"
        return 1
    fi
    if "$PY" -c 'import torch' 2>/dev/null; then
        grep -qF "PyTorch: skipped (torch sees no CUDA device)" "$f"
    else
        grep -qF "PyTorch: skipped (torch is not installed" "$f" &&
            grep -q "^ok - compare: .* in PyTorch, autocast bf16 .* # skip torch is not installed" "$o/bench.log"
    fi
}
gpu_torch_skip() {
    "$PY" -m py_compile tests/gpu/torch_bench.py tests/gpu/bench_report.py || return 1
    # the SDPA backend from the profiler's names (what PyTorch's operators and kernels are called)
    "$PY" - <<'PYEOF' || return 1
import sys
sys.path.insert(0, "tests/gpu")
from torch_bench import sdpa_backend
cases = [(["aten::_scaled_dot_product_flash_attention", "void pytorch_flash::flash_fwd_kernel<...>"], "flash"),
         (["aten::_scaled_dot_product_efficient_attention", "fmha_cutlassF_f32_aligned_64x64_rf_sm80"], "efficient"),
         (["aten::_scaled_dot_product_cudnn_attention", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop"], "cudnn"),
         (["aten::_scaled_dot_product_attention_math", "aten::softmax"], "math"),
         (["aten::addmm", "triton_per_fused_softmax_0"], "none seen")]
for names, want in cases:
    got = sdpa_backend(names)
    print(f"{names[0]}: {got}")
    if got != want:
        sys.exit(f"sdpa_backend: {got}, expected {want}")
PYEOF
    if "$PY" -c 'import torch' 2>/dev/null; then
        "$PY" tests/gpu/torch_bench.py --check-only
    else
        "$PY" tests/gpu/torch_bench.py --out "$WORK/torch.json" --precs bf16 --models blocks,gpt2 &&
            grep -q '"skipped"' "$WORK/torch.json" &&
            ! "$PY" tests/gpu/torch_bench.py --precs fp16 --out "$WORK/torch2.json" 2>/dev/null && [ ! -e "$WORK/torch2.json" ]
    fi
}
gpu_shellcheck() { shellcheck -x tests/gpu/*.sh tests/gpu/standin/* tests/gpu.sh; }

if wanted "gpu: settings"; then
    if gpu_nvcc; then
        check "gpu: settings: TESS_NCCL_HOME with pip's layout (lib/libnccl.so.2 only): -I, -l:libnccl.so.2, rpath; bin/model-cuda loads NCCL from there" \
            gpu_settings_nccl
    else
        check "gpu: settings: TESS_NCCL_HOME with pip's layout: -I, -l:libnccl.so.2 and an rpath in build.ninja (no nvcc: not linked)" \
            gpu_settings_nccl
    fi
    check "gpu: settings: TESS_MPICC, TESS_CUDA_CCBIN, TESS_MPI_CFLAGS/LIBS, TESS_CUDA_LDFLAGS reach build.ninja; TESS_WERROR=0 drops -Werror" \
        gpu_settings_values
    check "gpu: settings: a TESS_NCCL_HOME without include/nccl.h is refused, naming it" \
        gpu_refused "TESS_NCCL_HOME = $WORK has no include/nccl.h" TESS_NCCL_HOME="$WORK"
    check "gpu: settings: TESS_WERROR=2 is refused" gpu_refused "TESS_WERROR = 2 is not 0 or 1" TESS_WERROR=2
    # shellcheck disable=SC2016 # the '$' is the point
    check "gpu: settings: a '\$' in TESS_MPI_LIBS is refused" gpu_refused "TESS_MPI_LIBS = -L\$HOME" 'TESS_MPI_LIBS=-L$HOME'
fi
if wanted "gpu: carry|gpu: rehearsal|gpu: flows"; then
    if ! gpu_prepare >"$WORK/log" 2>&1; then
        if grep -q "apt-get download failed" "$WORK/log"; then
            ok "gpu: carry: tests/gpu/prepare.sh # skip Debian's packages not reachable: $(tail -1 "$WORK/log")"
        else
            notok "gpu: carry: tests/gpu/prepare.sh fills build/gpu-carry (tessgen, Open MPI closure)" "$WORK/log"
        fi
    else
        wanted "gpu: carry" && ok "gpu: carry: tests/gpu/prepare.sh fills build/gpu-carry; every needed library carried or base"
        check "gpu: carry: unpack_deb.py extracts exactly what dpkg-deb -x does (files, links, sizes)" gpu_unpack_same
        check "gpu: carry: a carried tessgen built from other sources is refused" gpu_stale_refused
        if wanted "gpu: rehearsal"; then
            gpu_rehearsal >"$WORK/log" 2>&1
            rc=$?
            if [ $rc -eq 77 ]; then
                ok "gpu: rehearsal: system Open MPI and Lua hidden, scratch-root Open MPI # skip $(tail -1 "$WORK/log")"
            elif [ $rc -eq 0 ]; then
                ok "gpu: rehearsal: system Open MPI, Lua, ssh hidden; carried packages in a scratch root build and run [2,2,1] against float64"
            else
                notok "gpu: rehearsal: system Open MPI, Lua, ssh hidden; carried packages in a scratch root build and run [2,2,1] against float64" "$WORK/log"
            fi
        fi
        check "gpu: flows: tests/gpu/check.sh env with the CUDA emulation standing in for the GPU" gpu_standin_env
    fi
fi
if wanted "gpu: flows"; then
    check "gpu: flows: bench_report.py turns profile lines and timings into tables, fractions right, missing parts named" \
        gpu_report_fixture
    check "gpu: flows: bench_report.py's bf16 comparison: tokens/s, MFU (docs/COST.md's FLOPs, the peak from the device's name) and the time per kind as computed independently; an unknown device gets no MFU" \
        gpu_compare_fixture
    check "gpu: flows: torch_bench.py and bench_report.py compile; the SDPA backend named from profiler names; without torch it skips cleanly (with torch: its float64 checks vs tessref)" \
        gpu_torch_skip
    if gpu_nvcc; then
        check "gpu: flows: tests/gpu/bench.sh compare report on the stand-in: tessgen's bf16 blocks and whole GPT-2 reported, with attention = \"cudnn\" and the serialised step, PyTorch skipped, MFU left out for an unknown device" \
            gpu_standin_bench
    else
        ok "gpu: flows: tests/gpu/bench.sh compare report on the stand-in # skip no nvcc (env.sh needs one)"
    fi
    if command -v shellcheck >/dev/null 2>&1; then
        check "gpu: flows: shellcheck of tests/gpu" gpu_shellcheck
    else
        ok "gpu: flows: shellcheck of tests/gpu # skip shellcheck not installed"
    fi
fi
