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
#              bench_report.py's tables from a fixed profile; torch_bench.py without torch skips cleanly;
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
    grep -q "$w/include/nccl.h" "$WORK/gs/obj-cuda/rt/trc_comm.o.d" 2>/dev/null ||
        ninja -C "$WORK/gs" -t deps obj-cuda/rt/trc_comm.o | grep -q "$w/include/nccl.h" ||
        { echo "trc_comm.cu was not compiled against the wheel's nccl.h"; return 1; }
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
gpu_torch_skip() {
    if "$PY" -c 'import torch' 2>/dev/null; then
        "$PY" tests/gpu/torch_bench.py --check-only
    else
        "$PY" tests/gpu/torch_bench.py --out "$WORK/torch.json" && grep -q '"skipped"' "$WORK/torch.json"
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
    check "gpu: flows: torch_bench.py without torch skips cleanly (with torch: its float64 check vs tessref)" gpu_torch_skip
    if command -v shellcheck >/dev/null 2>&1; then
        check "gpu: flows: shellcheck of tests/gpu" gpu_shellcheck
    else
        ok "gpu: flows: shellcheck of tests/gpu # skip shellcheck not installed"
    fi
fi
