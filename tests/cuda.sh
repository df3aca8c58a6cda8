# tests/cuda.sh - sourced by tests/run.sh: the CUDA backend on a machine without a GPU.
#
# Always (no CUDA needed):
#   golden     the CUDA files emitted for tests/specs/golden.lua (TESS_BACKENDS=cpu,cuda) against
#              tests/golden/cuda/ (TESS_UPDATE_GOLDEN=1 rewrites), the CUDA part of build.ninja too
#   choice     the spec key backends, TESS_BACKENDS and TESS_CUDA_ARCH are validated with clear
#              messages; a CPU-only output has no .cu files and its `ninja cuda` says why; training
#              (not supported by the CUDA backend yet) is refused when cuda is asked for
#   emulation  the generated rank_iI_jJ.cu of meshes [1,1,1] [2,2,1] [2,2,2], compiled by the host C++
#              compiler against tests/cuda/emu.cc (the CUDA runtime as loops and two emulated streams),
#              run under three stream orders (collectives first, compute first, random; on [2,2,2], the
#              others random only: cu_orders) with --bytes and compared with the float64 reference: every
#              call, shape and cross-stream wait checked; on [2,2,1], --repeat 3 replayed from a CUDA graph (the
#              output bitwise that of TESS_CUDA_GRAPH=0, bytes as planned)
#   training   a train spec (mode = "train") on the same meshes, its rank_iI_jJ.cu (forward, backward,
#              optimizer) under the emulation: one forward + backward with --dy under the three stream
#              orders, dL/dx and every weight gradient within 1e-4 of tessref.py backward and forward +
#              backward bytes equal to the plan; then 5 AdamW steps with --replica-check (replicas bitwise
#              identical) under the comm-first order; 6 steps of a warmup schedule with clipping replayed from
#              CUDA graphs against TESS_CUDA_GRAPH=0 (losses and weights bitwise), MPI staging uncaptured; the
#              spec with 2 micro-batches and layer 0 recomputed on [2,2,1]: --dy in random order against the float64 full batch, bytes
#              as planned, and 5 AdamW steps against the CPU program of the same output (losses, replicas bitwise)
#   generate   mode = "generate" on [1,1,1], [2,2,1], [1,1,2] (and bf16 on [1,1,1], [2,2,1]): the prefill and decode
#              programs under the emulation, greedy ids and logits against the float64 reference (bf16: --bf16) and
#              the CPU program, bytes, seeded sampling; the decode steps after the first replayed from a CUDA graph
#              against TESS_CUDA_GRAPH=0 (bitwise)
#   stages     2 pipeline stages (mesh.pp = 2) of [1,1,2] and, for the whole GPT-2, of [1,1,1]: their rank_sS_iI_jJ.cu
#              under the emulation, 5 AdamW steps against the CPU program of the same output (losses, bytes,
#              replicas and the tied wte's copies bitwise, no CUDA graph)
#   lm         a spec with model.vocab (embedding, tied LM head, vocab-parallel loss; training) on the same meshes:
#              its rank_iI_jJ.cu under the emulation against the CPU program of the same output: logits and loss,
#              every gradient (three stream orders, bytes as planned), 3 AdamW steps (losses, replicas bitwise)
# With nvcc (else one "ok - ... # skip" line):
#   compile    the generated .cu of the same meshes (inference, training, bf16 training, the vocab spec) compiled for
#              sm_80 and sm_90 with warnings as errors: on [2,2,2] every file, the runtime's included, linked into
#              bin/model-cuda; on the other meshes kernels.cu and the rank files (the runtime's .cu are the same for
#              every output); ptxas resource usage of the fused kernels reported (-Xptxas -v), and a kernel that
#              spills (spill stores or loads != 0) fails; the SASS of every compiled kernel held to docs/CUDA.md's
#              FP64 and tensor core table (tests/cuda/sass_audit.py); the standalone GPU checks
#              tests/cuda/lnb_check.cu (column sums, layernorm backward), attn_check.cu, bf16_check.cu, rows_check.cu,
#              adamw_check.cu (multi-tensor AdamW) and lt_check.cu (cuBLASLt epilogues) compiled the same way (they
#              run on a GPU only; the host parts of bf16_check and adamw_check, the 16-byte and scalar paths of
#              runtime/cuda/trk_elt.cuh, run here)
CU_DIMS="--layers 2 --hidden 128 --heads 2 --ffn 256 --seq 16 --batch 4"
# The stream orders an emulated run is checked under, for mesh [q,q,d]: all three (collectives first, compute first,
# random) on [2,2,2], whose ranks have the most cross-stream waits (row, column and depth collectives); random alone
# on the smaller meshes, whose programs are the same steps with fewer collectives (the suite's time budget: each run
# is 5-9 s). TESS_CUDA_ORDERS=all runs all three everywhere.
cu_orders() { # q d
    if [ "${TESS_CUDA_ORDERS:-}" = all ] || [ "$1,$2" = 2,2 ]; then echo "comm compute random"; else echo random; fi
}
CU_MESHES="1,1 2,1 2,2"
CU_REF=tests/ref/tessref.py
CUDA_EMU_OK=""

cu_spec() { # name q d extra-lines -> spec on stdout (head dim 64, as GPT-2's)
    cat <<SPEC
return {
  name = "$1",
  mesh = { q = $2, d = $3 },
  model = { layers = 2, hidden = 128, heads = 2, ffn = 256, seq = 16, batch = 4 },
  $4
}
SPEC
}

cu_mpirun() { # np bin args...
    local np=$1 flags="--oversubscribe --bind-to none"
    shift
    [ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
    # shellcheck disable=SC2086
    mpirun $flags -np "$np" "$@"
}

# nvcc: TESS_NVCC, on PATH, or under CUDA_HOME, CUDA_PATH or /usr/local/cuda (its path printed)
cu_nvcc() {
    if [ -n "${TESS_NVCC:-}" ]; then command -v "$TESS_NVCC"; return; fi
    command -v nvcc 2>/dev/null && return
    for h in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
        [ -n "$h" ] && [ -x "$h/bin/nvcc" ] && { echo "$h/bin/nvcc"; return; }
    done
    return 1
}

# ---- golden -------------------------------------------------------------------------------
cu_golden_gen() {
    rm -rf "$WORK/golden_cuda" &&
        env -u TESS_CUDA_ARCH -u TESS_NVCC TESS_BACKENDS=cpu,cuda build/asan/tessgen tests/specs/golden.lua \
            -o "$WORK/golden_cuda" --quiet &&
        sed -n '/^# CUDA backend/,$p' "$WORK/golden_cuda/build.ninja" |
        sed -e "s#$ROOT#@TESSROOT@#g" -e 's#^nvcc = .*#nvcc = @NVCC@#' \
            -e 's#^cuda_include = /.*#cuda_include = @CUDA_INCLUDE@#' >"$WORK/golden_cuda/build.ninja.cuda"
}
cu_golden_file() {
    [ -n "${TESS_UPDATE_GOLDEN:-}" ] && mkdir -p tests/golden/cuda && cp "$WORK/golden_cuda/$1" "tests/golden/cuda/$1"
    diff -u "tests/golden/cuda/$1" "$WORK/golden_cuda/$1"
}
if wanted "cuda: golden"; then
    if cu_golden_gen >"$WORK/log" 2>&1; then
        for f in rank_i0_j0.cu rank_i1_j1.cu kernels.cu kernels.cuh build.ninja.cuda; do
            check "cuda: golden $f" cu_golden_file "$f"
        done
    else
        notok "cuda: golden: generate tests/specs/golden.lua with TESS_BACKENDS=cpu,cuda" "$WORK/log"
    fi
fi

# ---- choice of backends -------------------------------------------------------------------------
cu_refused() { # message spec-body [env...]: tessgen exits 1 naming the problem, writes nothing
    local want=$1 body=$2
    shift 2
    printf '%s\n' "$body" >"$WORK/cu_bad.lua"
    rm -rf "$WORK/cu_bad"
    env "$@" build/asan/tessgen "$WORK/cu_bad.lua" -o "$WORK/cu_bad" >"$WORK/cu_bad.out" 2>&1
    local rc=$?
    cat "$WORK/cu_bad.out"
    [ $rc -eq 1 ] && grep -qF -- "$want" "$WORK/cu_bad.out" && [ ! -e "$WORK/cu_bad" ]
}
CU_OK_BODY='return { mesh = { q = 2 }, model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2 }'
CU_OK_BODY_LM='return { mesh = { q = 2 }, mode = "train", backends = { "cpu", "cuda" },
  model = { layers = 1, hidden = 8, heads = 2, ffn = 16, seq = 2, batch = 2, vocab = 11, positions = 3 } }'
cu_choice_cpu_only() {
    cu_spec cpuonly 2 1 'backends = { "cpu" },' >"$WORK/cpuonly.lua" &&
        TESS_BACKENDS=cpu,cuda build/asan/tessgen "$WORK/cpuonly.lua" -o "$WORK/cpuonly" | grep -q "backends: cpu (cuda not emitted" &&
        ! ls "$WORK/cpuonly"/*.cu "$WORK/cpuonly"/*.cuh >/dev/null 2>&1 &&
        ! ninja -C "$WORK/cpuonly" cuda >"$WORK/cpuonly.log" 2>&1 &&
        grep -q "this output has no CUDA backend" "$WORK/cpuonly.log"
}
cu_choice_stale() { # regenerating without cuda removes the .cu files of an earlier generation
    cu_spec stale 2 1 'backends = { "cpu", "cuda" },' >"$WORK/stale_cu.lua" &&
        build/asan/tessgen "$WORK/stale_cu.lua" -o "$WORK/stale_cu" --quiet &&
        [ "$(ls "$WORK/stale_cu"/*.cu | wc -l)" -eq 5 ] &&
        sed -i 's/"cpu", "cuda"/"cpu"/' "$WORK/stale_cu.lua" &&
        build/asan/tessgen "$WORK/stale_cu.lua" -o "$WORK/stale_cu" --quiet &&
        ! ls "$WORK/stale_cu"/*.cu "$WORK/stale_cu"/*.cuh >/dev/null 2>&1
}
cu_choice_arch() { # TESS_CUDA_ARCH reaches the -gencode flags, with PTX of the newest for later GPUs
    cu_spec arch 1 1 'backends = { "cpu", "cuda" },' >"$WORK/arch.lua" &&
        TESS_CUDA_ARCH="sm_86, 90" build/asan/tessgen "$WORK/arch.lua" -o "$WORK/arch" --quiet &&
        grep -q "^cuda_arch = -gencode=arch=compute_86,code=sm_86 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90$" "$WORK/arch/build.ninja"
}
cu_choice_train() {
    printf '%s\n' "$CU_OK_BODY, mode = \"train\", backends = { \"cpu\", \"cuda\" } }" >"$WORK/cu_train_ok.lua" &&
        build/asan/tessgen "$WORK/cu_train_ok.lua" -o "$WORK/cu_train_ok" --quiet &&
        grep -q "^static void backward(" "$WORK/cu_train_ok/rank_i0_j0.cu" &&
        grep -q "^static void optimizer(" "$WORK/cu_train_ok/rank_i1_j1.cu" &&
        grep -q "trc_allreduce_exact\|trc_reduce" "$WORK/cu_train_ok/rank_i0_j0.cu"
}
cu_choice_vocab() { # a spec with model.vocab and backends cuda: emitted, the LM kernels only in its kernels.cu
    printf '%s\n' "$CU_OK_BODY_LM" >"$WORK/cu_vocab.lua" &&
        build/asan/tessgen "$WORK/cu_vocab.lua" -o "$WORK/cu_vocab" | tee "$WORK/cu_vocab.out" &&
        grep -q "backends: cpu, cuda" "$WORK/cu_vocab.out" &&
        grep -q '^#include "trk_lm_kernels.cuh"$' "$WORK/cu_vocab/kernels.cu" &&
        grep -q "^template void embed_bwd<" "$WORK/cu_vocab/kernels.cu" &&
        grep -q '^#include "trk_lm.cuh"$' "$WORK/cu_vocab/rank_i0_j0.cu" &&
        grep -q "trc_allreduce_max(c, TR_ROW, " "$WORK/cu_vocab/rank_i1_j1.cu" &&
        grep -q '^extern "C" const tr_lm_desc tr_lm_class = {$' "$WORK/cu_vocab/rank_i1_j0.cu" &&
        ! grep -q -e "trk_lm_kernels.cuh\"$" -e "^template void embed_bwd<" "$WORK/cu_train_ok/kernels.cu"
}
cu_choice_epilogues() { # epilogues = false: no GEMM carries a cuBLASLt epilogue, no row kernel; each step is its own kernel again
    local on="$WORK/cu_epi_on" off="$WORK/cu_epi_off"
    printf '%s\n' "$CU_OK_BODY, mode = \"train\", backends = { \"cpu\", \"cuda\" } }" |
        sed 's/q = 2/q = 1/' >"$on.lua" &&
        sed 's/mode = "train"/mode = "train", epilogues = false/' "$on.lua" >"$off.lua" &&
        build/asan/tessgen "$on.lua" -o "$on" --quiet && build/asan/tessgen "$off.lua" -o "$off" --quiet || return 1
    grep -q "trc_gemm_lt(c, " "$on/rank_i0_j0.cu" || { echo "the default program has no epilogue to turn off"; return 1; }
    grep -q "trk::resid_ln<" "$on/rank_i0_j0.cu" && grep -q "trk::ln_bwd<" "$on/rank_i0_j0.cu" ||
        { echo "the default program has no row kernel to turn off"; return 1; }
    ! grep -n "trc_gemm_lt\|trc_fused(c, \|trk::resid_ln<\|trk::ln_rows<\|trk::ln_bwd<" "$off"/rank_i*_j*.cu || { echo "epilogues = false still fuses"; return 1; }
    grep -q "trk::bias_gelu_save<" "$off/rank_i0_j0.cu" && grep -q "trk::colsum<" "$off/rank_i0_j0.cu" &&
        grep -q "trk::resid_rowsum_to<" "$off/rank_i0_j0.cu" && grep -q "trk::ln_sqdev<" "$off/rank_i0_j0.cu" &&
        grep -q "trk::ln_bwd_sums<" "$off/rank_i0_j0.cu" ||
        { echo "epilogues = false: no separate bias + GeLU, column-sum, residual, layernorm or layernorm-backward kernel"; return 1; }
}
cu_choice_include() { # where the class programs' CUDA headers come from, and which rule compiles them
    local fake="$WORK/fakecuda" spec="$WORK/inc.lua"
    rm -rf "$fake" && mkdir -p "$fake/cuda-9.9/bin" "$fake/cuda-9.9/include" "$fake/bare/bin" "$fake/usr/bin" &&
        printf '#!/bin/sh\nexit 0\n' >"$fake/cuda-9.9/bin/nvcc" && chmod +x "$fake/cuda-9.9/bin/nvcc" &&
        cp "$fake/cuda-9.9/bin/nvcc" "$fake/bare/bin/nvcc" && touch "$fake/cuda-9.9/include/cuda_runtime.h" &&
        ln -s ../../cuda-9.9/bin/nvcc "$fake/usr/bin/nvcc" &&
        cu_spec inc 1 1 'backends = { "cpu", "cuda" },' >"$spec" || return 1
    # nvcc on PATH through a symlink: the headers beside its real path; the host compiler builds the classes
    env -u TESS_NVCC -u TESS_CUDA_INCLUDE PATH="$fake/usr/bin:$PATH" build/asan/tessgen "$spec" -o "$WORK/inc1" --quiet &&
        grep -qx "cuda_include = $fake/cuda-9.9/include" "$WORK/inc1/build.ninja" &&
        grep -qx "build obj-cuda/rank_i0_j0.o: hostcxx rank_i0_j0.cu" "$WORK/inc1/build.ninja" || return 1
    # an nvcc with no include/ beside it: nvcc compiles the classes, and no hostcxx rule is printed
    TESS_NVCC="$fake/bare/bin/nvcc" env -u TESS_CUDA_INCLUDE build/asan/tessgen "$spec" -o "$WORK/inc2" --quiet &&
        grep -qx "cuda_include =" "$WORK/inc2/build.ninja" && ! grep -q "hostcxx" "$WORK/inc2/build.ninja" &&
        grep -qx "build obj-cuda/rank_i0_j0.o: nvcc rank_i0_j0.cu" "$WORK/inc2/build.ninja" || return 1
    # TESS_CUDA_INCLUDE decides; one that build.ninja cannot hold unquoted is refused
    TESS_NVCC="$fake/bare/bin/nvcc" TESS_CUDA_INCLUDE=/opt/cu/include build/asan/tessgen "$spec" -o "$WORK/inc3" --quiet &&
        grep -qx "cuda_include = /opt/cu/include" "$WORK/inc3/build.ninja" || return 1
    ! TESS_CUDA_INCLUDE='/opt/my cuda' build/asan/tessgen "$spec" -o "$WORK/inc4" >"$WORK/inc4.log" 2>&1 &&
        grep -q "TESS_CUDA_INCLUDE" "$WORK/inc4.log" && [ ! -e "$WORK/inc4" ]
}
if wanted "cuda: choice"; then
    check "cuda: choice: rank_iI_jJ.cu compiles with the host compiler and the CUDA headers beside the real nvcc, else with nvcc" \
        cu_choice_include
    check "cuda: choice: backends = { \"cuda\" } without cpu is refused" \
        cu_refused 'leaves out "cpu"' "$CU_OK_BODY, backends = { \"cuda\" } }"
    check "cuda: choice: an unknown backend is refused" \
        cu_refused 'backends[2] = string "gpu" is not a backend' "$CU_OK_BODY, backends = { \"cpu\", \"gpu\" } }"
    check "cuda: choice: backends must be a list" \
        cu_refused 'backends must be a list' "$CU_OK_BODY, backends = \"cuda\" }"
    check "cuda: choice: a backend listed twice is refused" \
        cu_refused 'lists "cpu" twice' "$CU_OK_BODY, backends = { \"cpu\", \"cpu\" } }"
    check "cuda: choice: TESS_BACKENDS without cpu is refused" \
        cu_refused 'TESS_BACKENDS=cuda' "$CU_OK_BODY }" TESS_BACKENDS=cuda
    check "cuda: choice: a bad TESS_CUDA_ARCH is refused" \
        cu_refused 'TESS_CUDA_ARCH=ampere' "$CU_OK_BODY, backends = { \"cpu\", \"cuda\" } }" TESS_CUDA_ARCH=ampere
    check "cuda: choice: training with backends cuda is emitted (backward and optimizer in rank_iI_jJ.cu)" cu_choice_train
    check "cuda: choice: a model.vocab spec with backends cuda is emitted; only its kernels.cu has the LM kernels" \
        cu_choice_vocab
    check "cuda: choice: backends = { \"cpu\" } emits no .cu, and ninja cuda says why" cu_choice_cpu_only
    check "cuda: choice: regenerating without cuda removes the .cu files" cu_choice_stale
    check "cuda: choice: TESS_CUDA_ARCH sets the -gencode targets" cu_choice_arch
    check "cuda: choice: epilogues = false in the spec: no GEMM carries a cuBLASLt epilogue, no residual step runs its layernorm, no layernorm backward is one row kernel, every step is its own kernel" \
        cu_choice_epilogues
fi

# ---- emulation: the generated CUDA rank code run on the CPU --------------------------------------------
# shellcheck disable=SC2086 # $CU_DIMS is split into words on purpose
cu_setup() {
    [ -s "$WORK/cu_ref.npy" ] && return 0
    "$PY" $CU_REF weights $CU_DIMS --seed 21 --out "$WORK/cu_w.safetensors" &&
        "$PY" $CU_REF input $CU_DIMS --seed 21 --out "$WORK/cu_x.npy" &&
        "$PY" $CU_REF forward $CU_DIMS --weights "$WORK/cu_w.safetensors" --input "$WORK/cu_x.npy" \
            --out "$WORK/cu_ref.npy"
}
cu_generate() { # q d [t] -> $WORK/cu[t]_q_d with the CUDA backend (t: a training program)
    local dir="$WORK/cu${3:-}_$1_$2" extra='backends = { "cpu", "cuda" },'
    [ -n "${3:-}" ] && extra="$extra mode = \"train\",
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01, warmup = 3, clip = 0.05 },"
    cu_spec "cu${3:-}_q$1_d$2" "$1" "$2" "$extra" >"$dir.lua" &&
        env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet
}
cu_emu_build() { # q d [t] -> $WORK/cu[t]_q_d/bin/model-emu, starting bin/emu/rank_iI_jJ
    tests/cuda/emu_build.sh "$WORK/cu${3:-}_$1_$2" emu model-emu
}
cu_emu_run() { # q d order
    local dir="$WORK/cu_$1_$2" np=$(($1 * $1 * $2))
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((4, 16, 128), np.nan, np.float32))" "$dir/y.npy" &&
        TESS_EMU_ORDER=$3 TESS_EMU_SEED=3 cu_mpirun "$np" "$dir/bin/model-emu" --weights "$WORK/cu_w.safetensors" \
            --input "$WORK/cu_x.npy" --output "$dir/y.npy" --bytes --quiet &&
        "$PY" $CU_REF compare --ref "$WORK/cu_ref.npy" --got "$dir/y.npy" --tol 1e-4 --expect-f32 \
            --label "cuda emulation [$1,$1,$2] $3 first"
}
cu_fwd_graph() { # q d: --repeat 3 replays the forward from a CUDA graph captured after the warm-up, and so does the
    # measured forward after the repeats: its output bitwise that of TESS_CUDA_GRAPH=0 (every forward issued launch by
    # launch) and within 1e-4 of the float64 reference, its bytes as planned (--bytes: counted at the replay)
    local dir="$WORK/cu_$1_$2" np=$(($1 * $1 * $2)) g
    for g in 1 0; do
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((4, 16, 128), np.nan, np.float32))" "$dir/yg$g.npy" &&
            TESS_CUDA_GRAPH=$g TESS_EMU_ORDER=random TESS_EMU_SEED=5 cu_mpirun "$np" "$dir/bin/model-emu" \
                --weights "$WORK/cu_w.safetensors" --input "$WORK/cu_x.npy" --output "$dir/yg$g.npy" --repeat 3 --bytes \
                >"$dir/fg$g.out" 2>&1 || { tail -5 "$dir/fg$g.out"; return 1; }
        grep -E "^(launches|CUDA graphs|forward_launches|forward_graph)" "$dir/fg$g.out"
    done
    { grep -qx "forward_graph_replays=1" "$dir/fg1.out" && grep -qx "forward_launches_issued=0" "$dir/fg1.out"; } ||
        { echo "want one graph replay and no launch issued one by one per forward"; return 1; }
    { grep -qx "forward_graph_replays=0" "$dir/fg0.out" && grep -q "^CUDA graphs: off (TESS_CUDA_GRAPH=0)" "$dir/fg0.out"; } ||
        { echo "want no replay and the note with TESS_CUDA_GRAPH=0"; return 1; }
    cmp "$dir/yg1.npy" "$dir/yg0.npy" || { echo "the outputs differ"; return 1; }
    "$PY" $CU_REF compare --ref "$WORK/cu_ref.npy" --got "$dir/yg1.npy" --tol 1e-4 --expect-f32 \
        --label "cuda emulation [$1,$1,$2], forward replayed from a CUDA graph"
}
cu_fused() { # dir epilogue count: each rank_iI_jJ.cu makes count trc_gemm_lt (or trc_gemm_lt_bwd) calls with that
    # epilogue (the plan's fused GEMMs, gen/fuse.h), makes as many trc_fused as GEMMs with any epilogue, and calls no
    # separate kernel of that epilogue's step when count > 0 (bias + GeLU; GeLU gradient; column sum)
    local f n nf nall nk kern
    case $2 in
    TRC_EPI_DGELU) kern="trk::gelu_bwd" ;;
    TRC_EPI_BGRADA) kern="trk::colsum" ;;
    *) kern="trk::bias_gelu" ;;
    esac
    for f in "$1"/rank_i*_j*.cu; do
        n=$(grep -c "trc_gemm_lt\(_bwd\)\?(c, [0-9]*, $2," "$f")
        nall=$(grep -c "trc_gemm_lt\(_bwd\)\?(c, [0-9]*, TRC_EPI_" "$f")
        # a row kernel's two (cu_rows), a layernorm backward's one (cu_lnb)
        nf=$(($(grep -c "trc_fused(c, " "$f") - 2 * $(grep -c "trk::resid_ln<\\|trk::ln_rows<" "$f") - $(grep -c "trk::ln_bwd<" "$f")))
        nk=$(grep -c "$kern" "$f")
        if [ "$n" != "$3" ] || [ "$nf" != "$nall" ]; then
            echo "$(basename "$f"): $n trc_gemm_lt with $2 (want $3) and $nf trc_fused for $nall GEMMs with an epilogue"
            return 1
        fi
        if [ "$3" != 0 ] && [ "$nk" != 0 ]; then
            echo "$(basename "$f"): still calls a separate $kern kernel"
            return 1
        fi
    done
}
cu_rows() { # dir count sqdev lnrows [type]: each rank_iI_jJ.cu runs count residual steps with the layernorm after
    # them as one row kernel (trk::resid_ln, gen/fuse.c: whole rows, q = 1 and megatron), lnrows layernorms without a
    # residual before them as one (trk::ln_rows: the first ln1, ln_f), a trc_fused for each of their two layernorm
    # steps, and sqdev layernorms the three kernels' way (ln_sqdev, ln_apply: where an all-reduce of the statistics
    # comes between); type: the row kernels' LN output type in kernels.cu (float or tr_bf16; default float)
    local f n nr nf ns na
    for f in "$1"/rank_i*_j*.cu; do
        n=$(grep -c "trk::resid_ln<" "$f")
        nr=$(grep -c "trk::ln_rows<" "$f")
        nf=$(grep -c "trc_fused(c, [0-9]*, [0-9]*);" "$f")
        ns=$(grep -c "trk::ln_sqdev<" "$f")
        na=$(grep -c "trk::ln_apply<" "$f")
        if [ "$n" != "$2" ] || [ "$nr" != "$4" ] || [ "$ns" != "$3" ] || [ "$na" != "$3" ] ||
            [ "$nf" -lt $((2 * n + 2 * nr)) ]; then
            echo "$(basename "$f"): $n trk::resid_ln (want $2), $nr trk::ln_rows (want $4), $ns ln_sqdev and $na" \
                "ln_apply (want $3), $nf trc_fused"
            return 1
        fi
    done
    [ "$2" = 0 ] || tr -d '\n' <"$1/kernels.cu" | grep -q "template void resid_ln<[^;]*float, ${5:-float} \*);" ||
        { echo "kernels.cu: no resid_ln instance with a ${5:-float} output"; return 1; }
    [ "$4" = 0 ] || tr -d '\n' <"$1/kernels.cu" | grep -q "template void ln_rows<[^;]*float, ${5:-float} \*);" ||
        { echo "kernels.cu: no ln_rows instance with a ${5:-float} output"; return 1; }
}
cu_lnb() { # dir count sums: each rank_iI_jJ.cu runs count layernorm backwards as one row kernel (trk::ln_bwd,
    # gen/fuse.c: whole rows, q = 1 and megatron), each followed by a trc_fused of its apply step, and sums of them as
    # the two steps' kernels (ln_bwd_sums, ln_bwd_apply: where the row group's all-reduce of the sums comes between);
    # kernels.cu instantiates ln_bwd where count > 0
    local f n nf ns na
    for f in "$1"/rank_i*_j*.cu; do
        n=$(grep -c "trk::ln_bwd<" "$f")
        nf=$(awk '/trc_begin\(c, [0-9]+,/ { split($0, a, /[(,]/); cur = a[3] + 0 }
                  /trk::ln_bwd</ { want[cur + 1] = cur }
                  /trc_fused\(c, / { split($0, b, /[(,)]/); if ((b[3] + 0) in want && want[b[3] + 0] == b[4] + 0) n++ }
                  END { print n + 0 }' "$f")
        ns=$(grep -c "trk::ln_bwd_sums<" "$f")
        na=$(grep -c "trk::ln_bwd_apply<" "$f")
        if [ "$n" != "$2" ] || [ "$nf" != "$n" ] || [ "$ns" != "$3" ] || [ "$na" != "$3" ]; then
            echo "$(basename "$f"): $n trk::ln_bwd (want $2) with $nf trc_fused after them, $ns ln_bwd_sums and $na ln_bwd_apply (want $3)"
            return 1
        fi
    done
    [ "$2" = 0 ] || tr -d '\n' <"$1/kernels.cu" | grep -q "template void ln_bwd<[^;]*float \*, *tr_bf16 \*);" ||
        { echo "kernels.cu: no ln_bwd instance"; return 1; }
}
if wanted "cuda: emulation|cuda: compile"; then
    if cu_setup >"$WORK/log" 2>&1; then
        for m in $CU_MESHES; do
            q=${m%,*}
            d=${m#*,}
            if ! cu_generate "$q" "$d" >"$WORK/log" 2>&1; then
                notok "cuda: generate mesh [$q,$q,$d] with backends cpu, cuda" "$WORK/log"
                continue
            fi
            wanted "cuda: emulation" || continue
            check "cuda: emulation: rank_iI_jJ.cu of [$q,$q,$d]: each layer's fc1 GEMM runs its bias + GeLU as a cuBLASLt epilogue (trc_gemm_lt)" \
                cu_fused "$WORK/cu_${q}_${d}" TRC_EPI_GELU_BIAS 2
            if [ "$q" = 1 ]; then
                check "cuda: emulation: rank_iI_jJ.cu of [$q,$q,$d]: each residual add and the layernorm after it run as one row kernel (trk::resid_ln: ln2, the second layer's ln1), the first ln1 too, without the residual (trk::ln_rows)" \
                    cu_rows "$WORK/cu_${q}_${d}" 3 0 1
            else
                check "cuda: emulation: rank_iI_jJ.cu of [$q,$q,$d]: the row group's all-reduces of the layernorm statistics come between, so no row kernel" \
                    cu_rows "$WORK/cu_${q}_${d}" 0 4 0
            fi
            if cu_emu_build "$q" "$d" >"$WORK/log" 2>&1; then
                for order in $(cu_orders "$q" "$d"); do
                    check "cuda: emulation: rank_iI_jJ.cu of [$q,$q,$d], $order first, matches the float64 reference" \
                        cu_emu_run "$q" "$d" "$order"
                done
                [ "$q,$d" = 2,1 ] &&
                    check "cuda: emulation: rank_iI_jJ.cu of [$q,$q,$d], --repeat 3 replayed from a CUDA graph: the output bitwise the one issued launch by launch, bytes as planned" \
                        cu_fwd_graph "$q" "$d"
            else
                notok "cuda: emulation: build the rank_iI_jJ.cu of [$q,$q,$d] against tests/cuda/emu.cc" "$WORK/log"
            fi
        done
    else
        notok "cuda: reference inputs for the CUDA tests" "$WORK/log"
    fi
fi

# ---- training under the emulation ----------------------------------------------------------------------
# shellcheck disable=SC2086
cu_train_setup() {
    [ -s "$WORK/cu_g_ref.safetensors" ] && return 0
    cu_setup &&
        "$PY" $CU_REF dy $CU_DIMS --seed 22 --out "$WORK/cu_dy.npy" &&
        "$PY" $CU_REF backward $CU_DIMS --weights "$WORK/cu_w.safetensors" --input "$WORK/cu_x.npy" \
            --dy "$WORK/cu_dy.npy" --dx-out "$WORK/cu_dx_ref.npy" --grads-out "$WORK/cu_g_ref.safetensors" &&
        "$PY" $CU_REF input $CU_DIMS --seed 23 --out "$WORK/cu_target.npy"
}
cu_train_grads() { # q d order [prefix of the output's directory: cut]: one forward + backward
    local dir="$WORK/${4:-cut}_$1_$2" np=${CU_NP:-$(($1 * $1 * $2))} # CU_NP: the megatron block's rank count
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((4, 16, 128), np.nan, np.float32))" "$dir/dx.npy" &&
        rm -f "$dir/g.safetensors" &&
        TESS_EMU_ORDER=$3 TESS_EMU_SEED=5 cu_mpirun "$np" "$dir/bin/model-emu" --weights "$WORK/cu_w.safetensors" \
            --input "$WORK/cu_x.npy" --dy "$WORK/cu_dy.npy" --dx-out "$dir/dx.npy" --grads-out "$dir/g.safetensors" \
            --bytes --quiet &&
        "$PY" $CU_REF compare --ref "$WORK/cu_dx_ref.npy" --got "$dir/dx.npy" --tol 1e-4 --expect-f32 \
            --label "cuda emulation dx [$1,$1,$2] $3 first" &&
        "$PY" $CU_REF compare-grads --ref "$WORK/cu_g_ref.safetensors" --got "$dir/g.safetensors" --tol 1e-4 \
            --label "cuda emulation [$1,$1,$2] $3 first"
}
cu_train_replicas() { # q d: 5 AdamW steps, comm-first order, replicas bitwise identical
    local dir="$WORK/cut_$1_$2" np=${CU_NP:-$(($1 * $1 * $2))} # CU_NP: the megatron block's rank count
    TESS_EMU_ORDER=comm cu_mpirun "$np" "$dir/bin/model-emu" --weights "$WORK/cu_w.safetensors" \
        --input "$WORK/cu_x.npy" --target "$WORK/cu_target.npy" --steps 5 --replica-check | tee "$WORK/cu_rep.out" &&
        grep -q "bitwise identical" "$WORK/cu_rep.out"
}
cu_train_syncs() { # q d: --timing counts the host's waits for the device per step, as the CUDA backend makes them
    local dir="$WORK/cut_$1_$2" np=${CU_NP:-$(($1 * $1 * $2))}
    TESS_EMU_ORDER=random cu_mpirun "$np" "$dir/bin/model-emu" --weights "$WORK/cu_w.safetensors" \
        --input "$WORK/cu_x.npy" --target "$WORK/cu_target.npy" --steps 3 --timing >"$dir/syncs.out" 2>&1
    local rc=$?
    grep -E "^(step |host synchronisations|step_host_syncs)" "$dir/syncs.out"
    [ $rc -eq 0 ] || { tail -5 "$dir/syncs.out"; return 1; }
    grep -qx "step_host_syncs=1" "$dir/syncs.out" || { echo "want one host synchronisation per step"; return 1; }
}
cu_train_nan_gradient() { # q d: the norm read from the device is not finite: the tensor is still named
    local dir="$WORK/cut_$1_$2" np=${CU_NP:-$(($1 * $1 * $2))}
    TESS_TEST_NAN_GRADIENT=3,$((np - 1)) TESS_EMU_ORDER=random cu_mpirun "$np" "$dir/bin/model-emu" \
        --weights "$WORK/cu_w.safetensors" --input "$WORK/cu_x.npy" --target "$WORK/cu_target.npy" --steps 6 \
        >"$dir/nan.out" 2>"$dir/nan.err"
    local rc=$?
    cat "$dir/nan.out" "$dir/nan.err"
    [ $rc -eq 5 ] || { echo "exit $rc, want 5"; return 1; }
    grep -q "^error: training stopped at step 3: the loss [0-9.e+-]* is finite but the gradient is not: the gradient of tensor h.1.mlp.c_proj.bias holds 1 non-finite value" "$dir/nan.err" ||
        { echo "message does not name step 3 and h.1.mlp.c_proj.bias"; return 1; }
    [ "$(grep -c '^step ' "$dir/nan.out")" = 2 ] || { echo "want the losses of steps 1 and 2 only"; return 1; }
}
cu_train_graph() { # q d: 6 steps replayed from CUDA graphs and 6 issued one by one (TESS_CUDA_GRAPH=0) give the same
    # losses and weights bitwise; the spec's warmup changes lr every step and its clipping scales every step, so a
    # per-step scalar baked into the graph at capture shows
    local dir="$WORK/cut_$1_$2" np=$(($1 * $1 * $2)) g
    for g in 1 0; do
        TESS_CUDA_GRAPH=$g TESS_EMU_ORDER=random cu_mpirun "$np" "$dir/bin/model-emu" --weights "$WORK/cu_w.safetensors" \
            --input "$WORK/cu_x.npy" --target "$WORK/cu_target.npy" --steps 6 --timing \
            --weights-out "$dir/graph$g.safetensors" >"$dir/graph$g.out" 2>&1 || { tail -5 "$dir/graph$g.out"; return 1; }
        grep -E "^(step [0-9]|after|launches|CUDA graphs|step_launches|step_graph)" "$dir/graph$g.out"
    done
    { grep -qx "step_graph_replays=2" "$dir/graph1.out" && grep -qx "step_launches_issued=0" "$dir/graph1.out"; } ||
        { echo "want 2 graph replays and no launch issued one by one per step"; return 1; }
    { grep -qx "step_graph_replays=0" "$dir/graph0.out" && grep -q "^CUDA graphs: off (TESS_CUDA_GRAPH=0)" "$dir/graph0.out"; } ||
        { echo "want no replay and the note with TESS_CUDA_GRAPH=0"; return 1; }
    { [ "$(grep '^step [0-9]' "$dir/graph0.out" | sed 's/.* lr \([^ ]*\) .*/\1/' | sort -u | wc -l)" -ge 3 ] &&
        grep -q '^step 1 .* norm ' "$dir/graph0.out"; } || { echo "want a warmup (lr changing) and clipping"; return 1; }
    diff <(grep -E '^(step [0-9]|after)' "$dir/graph1.out" | sed 's/ tok\/s.*//') \
        <(grep -E '^(step [0-9]|after)' "$dir/graph0.out" | sed 's/ tok\/s.*//') || { echo "losses differ"; return 1; }
    cmp "$dir/graph1.safetensors" "$dir/graph0.safetensors" || { echo "weights differ"; return 1; }
}
cu_train_graph_off() { # q d: where steps are not captured, a note says why; a bad TESS_CUDA_GRAPH is refused
    local dir="$WORK/cut_$1_$2" np=$(($1 * $1 * $2))
    TESS_CUDA_GRAPH=yes cu_mpirun "$np" "$dir/bin/model-emu" --weights "$WORK/cu_w.safetensors" \
        --input "$WORK/cu_x.npy" --target "$WORK/cu_target.npy" --steps 1 >"$dir/gbad.out" 2>&1
    local rc=$?
    cat "$dir/gbad.out"
    { [ $rc -ne 0 ] && grep -q "TESS_CUDA_GRAPH=yes is not 0 or 1: use TESS_CUDA_GRAPH=0" "$dir/gbad.out" &&
        ! grep -q "^step 1" "$dir/gbad.out"; } || { echo "want TESS_CUDA_GRAPH=yes refused before any step"; return 1; }
    [ "$np" -gt 1 ] || return 0
    TESS_COMM=mpi cu_mpirun "$np" "$dir/bin/model-emu" --weights "$WORK/cu_w.safetensors" \
        --input "$WORK/cu_x.npy" --target "$WORK/cu_target.npy" --steps 2 --timing >"$dir/gmpi.out" 2>&1 ||
        { tail -5 "$dir/gmpi.out"; return 1; }
    grep -E "^(CUDA graphs|step_graph)" "$dir/gmpi.out"
    { grep -q "^CUDA graphs: off: the collectives are MPI with host staging" "$dir/gmpi.out" &&
        grep -qx "step_graph_replays=0" "$dir/gmpi.out"; } || { echo "want MPI staging to run uncaptured, saying why"; return 1; }
}
if wanted "cuda: training|cuda: compile"; then
    if cu_train_setup >"$WORK/log" 2>&1; then
        for m in $CU_MESHES; do
            q=${m%,*}
            d=${m#*,}
            if ! cu_generate "$q" "$d" t >"$WORK/log" 2>&1; then
                notok "cuda: training: generate the train spec on [$q,$q,$d] with backends cpu, cuda" "$WORK/log"
                continue
            fi
            wanted "cuda: training" || continue
            if [ "$q" = 1 ]; then
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d]: each layer's fc1 GEMM keeps the pre-activation and writes GeLU as a cuBLASLt epilogue (trc_gemm_lt)" \
                    cu_fused "$WORK/cut_${q}_${d}" TRC_EPI_GELU_AUX_BIAS 2
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d]: each layer's fc2 input-gradient GEMM applies GeLU's gradient as a cuBLASLt epilogue (trc_gemm_lt_bwd)" \
                    cu_fused "$WORK/cut_${q}_${d}" TRC_EPI_DGELU 2
            else
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d]: the last SUMMA GEMM of fc1 accumulates (beta 1), so the pre-activation step stays a separate kernel" \
                    cu_fused "$WORK/cut_${q}_${d}" TRC_EPI_GELU_AUX_BIAS 0
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d]: the GeLU-gradient step waits for the reduce of dL/dg, so it stays a separate kernel" \
                    cu_fused "$WORK/cut_${q}_${d}" TRC_EPI_DGELU 0
            fi
            check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d]: every weight-gradient GEMM that a bias gradient follows sums dY's columns as a cuBLASLt epilogue (trc_gemm_lt_bwd)" \
                cu_fused "$WORK/cut_${q}_${d}" TRC_EPI_BGRADA 8
            [ "$q" = 1 ] &&
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d]: each out-of-place residual add and the layernorm after it run as one row kernel (trk::resid_ln), writing the statistics the backward reads; the first ln1 too (trk::ln_rows)" \
                    cu_rows "$WORK/cut_${q}_${d}" 3 0 1
            if [ "$q" = 1 ]; then
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d]: each layernorm backward runs as one row kernel (trk::ln_bwd: the sums in registers, then g += dx), its apply step a trc_fused" \
                    cu_lnb "$WORK/cut_${q}_${d}" 4 0
            else
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d]: the row group's all-reduce of the layernorm backward's sums comes between its two steps, so no row kernel" \
                    cu_lnb "$WORK/cut_${q}_${d}" 0 4
            fi
            if cu_emu_build "$q" "$d" t >"$WORK/log" 2>&1; then
                for order in $(cu_orders "$q" "$d"); do
                    check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d], --dy, $order first: dL/dx and weight gradients match the float64 reference, bytes as planned" \
                        cu_train_grads "$q" "$d" "$order"
                done
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d], 5 AdamW steps: replicas bitwise identical" \
                    cu_train_replicas "$q" "$d"
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d], --timing: one host synchronisation per step" \
                    cu_train_syncs "$q" "$d"
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d], a NaN in the last rank's last gradient at step 3: stops before the update, naming the tensor" \
                    cu_train_nan_gradient "$q" "$d"
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d], 6 steps with warmup and clipping replayed from CUDA graphs: losses and weights bitwise those issued one by one" \
                    cu_train_graph "$q" "$d"
                check "cuda: training: rank_iI_jJ.cu of [$q,$q,$d], steps not captured say why (TESS_CUDA_GRAPH=0, MPI staging); a bad TESS_CUDA_GRAPH is refused" \
                    cu_train_graph_off "$q" "$d"
            else
                notok "cuda: training: build the train rank_iI_jJ.cu of [$q,$q,$d] against tests/cuda/emu.cc" "$WORK/log"
            fi
        done
    else
        notok "cuda: training: reference gradients for the CUDA tests" "$WORK/log"
    fi
fi

# ---- micro-batches (pipeline.microbatches, docs/TRAINING.md "Micro-batches") under the emulation -----------------
# The training spec above with 2 micro-batches on [2,2,1] (2 sequences per rank, 1 per micro-batch): the gradients
# of the whole batch summed by trc_grad_acc, the all-reduces in each layer's backward on the last micro-batch only, the I/O
# blocks viewed per micro-batch; the CPU program of the same output is the reference of the training steps. The spec
# also recomputes layer 0 in the backward (recompute = 1): its forward steps run again inside bwd_L0.
# cu_losses_5 CPU EMU: the 5 step losses and the loss after them, printed by the CPU program (lines "step N loss L")
# and by the emulated CUDA program, agree within 1e-6 relative, six of each
cu_losses_5() {
    "$PY" $CU_REF compare-step-losses "$1" "$2" --tol 1e-6 --count 6 --labels "cpu,cuda emulation"
}
cu_mb_generate() { # q d m -> $WORK/cutmb_q_d: both backends; the CPU program built
    local dir="$WORK/cutmb_$1_$2"
    cu_spec "cutmb_q$1_d$2" "$1" "$2" 'backends = { "cpu", "cuda" }, mode = "train",
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01, warmup = 3, clip = 0.05 },
  pipeline = { microbatches = '"$3"' }, recompute = 1,' >"$dir.lua" &&
        env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" cpu >/dev/null
}
cu_mb_train() { # q d: 5 AdamW steps, random order: losses within 1e-6 of the CPU program's, replicas bitwise identical
    local dir="$WORK/cutmb_$1_$2" np=$(($1 * $1 * $2))
    local args="--weights $WORK/cu_w.safetensors --input $WORK/cu_x.npy --target $WORK/cu_target.npy --steps 5"
    # shellcheck disable=SC2086
    "$dir/run" $args | grep -E '^(step|after) ' >"$dir/steps_cpu.txt" &&
        TESS_EMU_ORDER=random TESS_EMU_SEED=7 cu_mpirun "$np" "$dir/bin/model-emu" $args --replica-check \
            >"$dir/emu_train.out" &&
        cat "$dir/emu_train.out" && grep -q "bitwise identical" "$dir/emu_train.out" &&
        cu_losses_5 "$dir/steps_cpu.txt" "$dir/emu_train.out"
}
CU_MB_N1="cuda: training: rank_iI_jJ.cu of [2,2,1] with 2 micro-batches and layer 0 recomputed, --dy, random first: dL/dx and weight gradients match the float64 full batch, bytes as planned"
CU_MB_N2="cuda: training: rank_iI_jJ.cu of [2,2,1] with 2 micro-batches and layer 0 recomputed, 5 AdamW steps: losses match the CPU program's, replicas bitwise identical"
if wanted "$CU_MB_N1" || wanted "$CU_MB_N2"; then
    if cu_train_setup >"$WORK/log" 2>&1 && cu_mb_generate 2 1 2 >"$WORK/log" 2>&1 && cu_emu_build 2 1 tmb >"$WORK/log" 2>&1; then
        check "$CU_MB_N1" cu_train_grads 2 1 random cutmb
        check "$CU_MB_N2" cu_mb_train 2 1
    else
        notok "cuda: training: generate and build the spec with 2 micro-batches on [2,2,1] against tests/cuda/emu.cc" "$WORK/log"
    fi
fi

# ---- optimizer.shard (docs/TRAINING.md "Optimizer state sharded over depth") under the emulation -----------------
# The training spec with shard = true on [2,2,2]: trc_reduce_scatter of each dW over dep, trc_adamw_multi on each
# member's slice, trc_allgather of the updated slices waiting for the AdamW launch; random stream order, clipping on.
# Steps 2-5 are replayed from CUDA graphs: each replay counts the bytes of the collectives its graph holds (a call is
# counted when it is issued, and a captured one is not run until the replay), so --bytes checks them over the run.
cu_zero_generate() { # q d -> $WORK/cutz_q_d: both backends; the CPU program built
    local dir="$WORK/cutz_$1_$2"
    cu_spec "cutz_q$1_d$2" "$1" "$2" 'backends = { "cpu", "cuda" }, mode = "train",
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01, warmup = 3, clip = 0.05,
    shard = true },' >"$dir.lua" &&
        env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" cpu >/dev/null &&
        grep -q "trc_reduce_scatter(c, TR_DEP" "$dir"/rank_i0_j0.cu && grep -q "trc_allgather(c, TR_DEP" "$dir"/rank_i0_j0.cu
}
cu_zero_train() { # q d: 5 AdamW steps, random order, replayed from graphs: losses within 1e-6 of the CPU program's, replicas
    # bitwise identical, reduce-scatter and all-gather bytes as planned
    local dir="$WORK/cutz_$1_$2" np=$(($1 * $1 * $2))
    local args="--weights $WORK/cu_w.safetensors --input $WORK/cu_x.npy --target $WORK/cu_target.npy --steps 5"
    # shellcheck disable=SC2086
    "$dir/run" $args | grep -E '^(step|after) ' >"$dir/steps_cpu.txt" &&
        TESS_EMU_ORDER=random TESS_EMU_SEED=7 cu_mpirun "$np" "$dir/bin/model-emu" $args \
            --replica-check --bytes >"$dir/emu_train.out" &&
        cat "$dir/emu_train.out" && grep -q "bitwise identical" "$dir/emu_train.out" &&
        ! grep -q "CUDA graphs: off" "$dir/emu_train.out" &&
        grep -q "reduce-scatters and all-gathers moved exactly the planned bytes" "$dir/emu_train.out" &&
        cu_losses_5 "$dir/steps_cpu.txt" "$dir/emu_train.out"
}
CU_ZERO_N="cuda: training: rank_iI_jJ.cu of [2,2,2] with optimizer.shard, 5 AdamW steps with clipping in random order: losses match the CPU program's, replicas bitwise identical, bytes as planned"
if wanted "$CU_ZERO_N"; then
    if cu_train_setup >"$WORK/log" 2>&1 && cu_zero_generate 2 2 >"$WORK/log" 2>&1 && cu_emu_build 2 2 tz >"$WORK/log" 2>&1; then
        check "$CU_ZERO_N" cu_zero_train 2 2
    else
        notok "cuda: training: generate and build the optimizer.shard spec on [2,2,2] against tests/cuda/emu.cc" "$WORK/log"
    fi
fi

# ---- pipeline stages (mesh.pp, docs/TRAINING.md "Pipeline stages") under the emulation --------------------------
# The stage programs' rank_sS_iI_jJ.cu: pipe_step (the proved schedule, the same text as the CPU program's) calling
# tr_pipe_*, which stage every point-to-point block through the host where the run arena is not host memory (here, as
# on a GPU: tr_backend_run_on_host) and keep the stash in run memory (tr_backend_run_alloc, _copy). The CPU program of
# the same output is the reference: 5 AdamW steps in random stream order, the losses within 1e-6, every rank's
# collective and point-to-point bytes as planned, replicas bitwise (the tied wte's two copies too), and no CUDA graph
# (the host exchanges between micro-batches), saying why.
cu_pipe_generate() { # name q d m schedule extra-model-keys [top-level keys] -> $WORK/cupipe_name: both backends; CPU
    # program, emulation
    local dir="$WORK/cupipe_$1"
    cat >"$dir.lua" <<SPEC
return {
  name = "cupipe_$1", mode = "train", backends = { "cpu", "cuda" },${7:-}
  mesh = { q = $2, d = $3, pp = 2 },
  model = { layers = 2, hidden = 128, heads = 2, ffn = 256, seq = 16, batch = 4, eps = 1e-5$6 },
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },
  pipeline = { microbatches = $4, schedule = "$5" },
}
SPEC
    env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" cpu >/dev/null &&
        tests/cuda/emu_build.sh "$dir" emu model-emu
}
cu_pipe_train() { # name np
    local dir="$WORK/cupipe_$1"
    "$dir/run" --steps 5 | grep -E '^(step|after) ' >"$dir/steps_cpu.txt" &&
        TESS_EMU_ORDER=random TESS_EMU_SEED=7 cu_mpirun "$2" "$dir/bin/model-emu" --steps 5 --bytes --replica-check \
            --timing >"$dir/emu_train.out" &&
        cat "$dir/emu_train.out" &&
        grep -q "^bytes: every rank moved exactly the planned bytes$" "$dir/emu_train.out" &&
        grep -q "^bytes: every rank's sends and receives between stages moved exactly the planned bytes$" \
            "$dir/emu_train.out" && grep -q "bitwise identical to its replicas" "$dir/emu_train.out" &&
        grep -q "^CUDA graphs: off: pipeline stages exchange their blocks through the host" "$dir/emu_train.out" &&
        grep -qx "step_graph_replays=0" "$dir/emu_train.out" &&
        cu_losses_5 "$dir/steps_cpu.txt" "$dir/emu_train.out"
}
# The whole GPT-2 on 2 stages: stage 0 holds the embedding without the tied head, so its embedding backward zeroes dE
# before adding (trk::embed_bwd's last argument, the CPU program's tr_zero): without it each step's dE would add onto
# the last step's, and the losses leave the CPU program's from step 2 (1e-3 relative).
cu_pipe_lm() {
    local dir="$WORK/cupipe_lm"
    grep -q "trk::embed_bwd<.*, mb_g_wte_weight, 8192);" "$dir/rank_s0_i0_j0.cu" &&
        ! grep -q "trk::embed_bwd" "$dir/rank_s1_i0_j0.cu" && cu_pipe_train lm 2
}
CU_PIPE_N1="cuda: stages: rank_sS_iI_jJ.cu of 2 stages of [1,1,2], 2 micro-batches 1f1b, 5 AdamW steps in random order: losses match the CPU program's, collective and point-to-point bytes as planned, replicas bitwise, uncaptured saying why"
CU_PIPE_N2="cuda: stages: the whole GPT-2 (model.vocab) on 2 stages of [1,1,1], 4 micro-batches gpipe, 5 AdamW steps: losses match the CPU program's (stage 0 zeroes dE before its embedding backward), the tied wte copies bitwise, bytes as planned"
if wanted "$CU_PIPE_N1"; then
    if cu_pipe_generate blocks 1 2 2 1f1b "" >"$WORK/log" 2>&1; then
        check "$CU_PIPE_N1" cu_pipe_train blocks 4
    else
        notok "cuda: stages: generate and build 2 stages of [1,1,2] against tests/cuda/emu.cc" "$WORK/log"
    fi
fi
CU_PIPE_N3="cuda: compile: the two stage programs of the whole GPT-2 (rank_sS_iI_jJ.cu: pipe_step, tr_pipe_class) with the host compiler and CUDA's headers, -Werror"
if wanted "$CU_PIPE_N2" || wanted "$CU_PIPE_N3"; then
    if cu_pipe_generate lm 1 1 4 gpipe ", vocab = 64, positions = 16" >"$WORK/log" 2>&1; then
        check "$CU_PIPE_N2" cu_pipe_lm
        if ! wanted "$CU_PIPE_N3"; then
            :
        elif cu_nvcc >/dev/null; then
            check "$CU_PIPE_N3" ninja -C "$WORK/cupipe_lm" obj-cuda/rank_s0_i0_j0.o obj-cuda/rank_s1_i0_j0.o
        else
            ok "$CU_PIPE_N3 # skip nvcc not found"
        fi
    else
        notok "cuda: stages: generate and build the whole GPT-2 on 2 stages of [1,1,1] against tests/cuda/emu.cc" "$WORK/log"
    fi
fi

# The whole GPT-2 in bf16 on 2 stages of [1,1,1], with no attention key: cuDNN's attention, the default of such a spec
# (docs/CUDA.md "Fused attention through cuDNN"), emulated as tests/cuda/emu_sdpa.inc does it. Against the CPU program
# of the same output: 5 AdamW steps in random order, the losses within 1e-4 (the emulated flash arithmetic against the
# CPU's attention; measured 1.7e-5), bytes and point-to-point bytes as planned, replicas bitwise.
CU_PIPE_N4="cuda: stages: the whole GPT-2 in bf16 on 2 stages of [1,1,1] with cuDNN's attention (the spec's default), 5 AdamW steps in random order: losses within 1e-4 of the CPU program's, bytes as planned, replicas bitwise"
cu_pipe16() {
    local dir="$WORK/cupipe_lm16"
    grep -q "trc_attn_cudnn" "$dir/rank_s0_i0_j0.cu" && "$dir/run" --steps 5 | grep '^step ' >"$dir/steps_cpu.txt" &&
        TESS_EMU_ORDER=random TESS_EMU_SEED=7 cu_mpirun 2 "$dir/bin/model-emu" --steps 5 --bytes --replica-check \
            >"$dir/emu_train.out" &&
        cat "$dir/emu_train.out" &&
        grep -q "^bytes: every rank moved exactly the planned bytes$" "$dir/emu_train.out" &&
        grep -q "^bytes: every rank's sends and receives between stages moved exactly the planned bytes$" \
            "$dir/emu_train.out" && grep -q "bitwise identical to its replicas" "$dir/emu_train.out" &&
        grep '^step ' "$dir/emu_train.out" >"$dir/steps_emu.txt" &&
        "$PY" $CU_REF compare-losses --label "cuda bf16 2 stages 5 steps" --mesh-tol 0 --steps 5 \
            --run "emulation=$dir/steps_emu.txt" --ref "the CPU program=$dir/steps_cpu.txt=1e-4"
}
if wanted "$CU_PIPE_N4"; then
    if cu_pipe_generate lm16 1 1 2 1f1b ", vocab = 64, positions = 16" ' dtype = "bf16",' >"$WORK/log" 2>&1; then
        check "$CU_PIPE_N4" cu_pipe16
    else
        notok "cuda: stages: generate and build the whole GPT-2 in bf16 on 2 stages of [1,1,1] against tests/cuda/emu.cc" "$WORK/log"
    fi
fi

# ---- text generation (mode = "generate", docs/GENERATE.md) under the emulation ----------------------------------
# tests/generate.sh's model (2 layers, C 16, 4 heads, vocab 23, context 10) with backends cpu and cuda: the prefill and
# the decode step of rank_iI_jJ.cu (trk_gen.cuh's KV write, decode attention, position add and argmax; trc_copy and
# the max-loc all-reduce of the pairs) under the emulation, whose run arena is memory of its own (what the runtime
# reads or writes on the host goes through tr_backend_download / _upload, as on a GPU). Against the float64 reference
# (tessref.py generate, the whole forward on the growing sequence): greedy ids token for token and every new token's
# logits within 1e-4, as tests/generate.sh holds the CPU program; the ids also equal the CPU program's of the same
# output, logits within 1e-5 of it; the collective and weight-stationary bytes as planned. Seeded sampling (top-k,
# top-p, temperature) gives the CPU program's ids. The decode steps after the first replay a CUDA graph (TR_PART_DECODE;
# the emulated max-loc gathers and picks as trc_comm.cu's NCCL path does): ids and logits bitwise TESS_CUDA_GRAPH=0's.
CU_GEN_DIMS="--layers 2 --hidden 16 --heads 4 --ffn 32 --vocab 23 --positions 12 --seq 4 --batch 2"
cu_gen_setup() {
    local W="$WORK/cugen"
    [ -e "$W/l_ref.npy" ] && return 0
    mkdir -p "$W" &&
        "$PY" $CU_REF lm-weights $CU_GEN_DIMS --seed 3 --out "$W/w.st" &&
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.array([[3, 7, 1, -1], [5, 2, 9, 11]], np.int32))" \
            "$W/p.npy" &&
        "$PY" $CU_REF generate $CU_GEN_DIMS --weights "$W/w.st" --prompt-tokens "$W/p.npy" --max-new 6 \
            --out "$W/t_ref.npy" --logits-out "$W/l_ref.npy" &&
        "$PY" $CU_REF generate $CU_GEN_DIMS --bf16 --weights "$W/w.st" --prompt-tokens "$W/p.npy" --max-new 6 \
            --out "$W/t_ref16.npy" --logits-out "$W/l_ref16.npy"
}
cu_gen_build() { # q d [16] -> $WORK/cugen[16]_q_d: both backends (16: dtype bf16); the CPU program and the emulated one
    local dir="$WORK/cugen${3:-}_$1_$2" dt=""
    [ -n "${3:-}" ] && dt='dtype = "bf16", '
    cat >"$dir.lua" <<SPEC
return { name = "cugen_q$1_d$2", mesh = { q = $1, d = $2 }, mode = "generate", backends = { "cpu", "cuda" }, $dt
  model = { layers = 2, hidden = 16, heads = 4, ffn = 32, seq = 4, batch = 2, vocab = 23, positions = 12,
            context = 10 } }
SPEC
    env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" cpu >/dev/null &&
        grep -q "trk::attn_decode<" "$dir/rank_i0_j0.cu" && tests/cuda/emu_build.sh "$dir" emu model-emu
}
cu_gen_greedy() { # q d [16 tol-against-the-CPU-program]
    local W="$WORK/cugen" dir="$WORK/cugen${3:-}_$1_$2" np=$(($1 * $1 * $2)) args
    args="--weights $W/w.st --generate --prompt-tokens $W/p.npy --max-new 6"
    # shellcheck disable=SC2086
    "$dir/run" $args --output "$dir/t_cpu.npy" --logits-out "$dir/l_cpu.npy" --quiet &&
        TESS_EMU_ORDER=random TESS_EMU_SEED=5 cu_mpirun "$np" "$dir/bin/model-emu" $args --output "$dir/t.npy" \
            --logits-out "$dir/l.npy" --bytes >"$dir/emu.out" || { cat "$dir/emu.out" 2>/dev/null; return 1; }
    cat "$dir/emu.out"
    grep -q "^bytes: every rank moved exactly the planned bytes$" "$dir/emu.out" &&
        { [ "$1" = 1 ] || grep -q "^bytes: every rank's all-gathers and reduce-scatters moved exactly the planned bytes$" \
            "$dir/emu.out"; } &&
        "$PY" $CU_REF compare-generate "$dir/t.npy" "$W/t_ref${3:-}.npy" "$dir/l.npy" "$W/l_ref${3:-}.npy" --tol 1e-4 &&
        "$PY" $CU_REF compare-generate "$dir/t.npy" "$dir/t_cpu.npy" "$dir/l.npy" "$dir/l_cpu.npy" --tol "${4:-1e-5}"
}
cu_gen_sampled() { # q d: the CPU program's ids for one seed (top-k, top-p and temperature)
    local W="$WORK/cugen" dir="$WORK/cugen_$1_$2" np=$(($1 * $1 * $2)) args
    args="--weights $W/w.st --generate --prompt-tokens $W/p.npy --max-new 6 --temperature 1.5 --top-k 9 --top-p 0.8 --seed 7"
    # shellcheck disable=SC2086
    "$dir/run" $args --output "$dir/ts_cpu.npy" --logits-out "$dir/ls_cpu.npy" --quiet &&
        TESS_EMU_ORDER=random TESS_EMU_SEED=6 cu_mpirun "$np" "$dir/bin/model-emu" $args --output "$dir/ts.npy" \
            --logits-out "$dir/ls.npy" --quiet &&
        "$PY" $CU_REF compare-generate "$dir/ts.npy" "$dir/ts_cpu.npy" "$dir/ls.npy" "$dir/ls_cpu.npy" --tol 1e-5 &&
        ! cmp -s "$dir/ts.npy" "$dir/t.npy" || { echo "sampled ids equal the greedy ones"; return 1; }
}
cu_gen_graph() { # q d: the decode steps after the first replayed from a CUDA graph: ids and logits bitwise those of
    # TESS_CUDA_GRAPH=0 (the prompts' lengths differ, so the positions and tokens differ between sequences and steps:
    # one baked into the graph at capture shows), bytes as planned (counted at each replay); the greedy ids without
    # --logits-out (the decode logits not downloaded) the same; on q > 1 also TESS_COMM=mpi (the max-loc through the
    # host, MPI_MAXLOC): not captured, saying why, the same ids
    local W="$WORK/cugen" dir="$WORK/cugen_$1_$2" np=$(($1 * $1 * $2)) args g
    args="--weights $W/w.st --generate --prompt-tokens $W/p.npy --max-new 6"
    for g in 1 0; do
        # shellcheck disable=SC2086
        TESS_CUDA_GRAPH=$g TESS_EMU_ORDER=random TESS_EMU_SEED=5 cu_mpirun "$np" "$dir/bin/model-emu" $args \
            --output "$dir/tg$g.npy" --logits-out "$dir/lg$g.npy" --bytes --timing >"$dir/gg$g.out" 2>&1 ||
            { tail -5 "$dir/gg$g.out"; return 1; }
        grep -E "^(bytes:|launches|CUDA graphs|decode_launches|decode_graph)" "$dir/gg$g.out"
        { grep -q "^bytes: every rank moved exactly the planned bytes$" "$dir/gg$g.out" &&
            { [ "$1" = 1 ] || grep -q "^bytes: every rank's all-gathers and reduce-scatters moved exactly the planned bytes$" \
                "$dir/gg$g.out"; }; } || { echo "want the planned bytes (TESS_CUDA_GRAPH=$g)"; return 1; }
    done
    { grep -qx "decode_graph_replays=1" "$dir/gg1.out" && grep -qx "decode_launches_issued=0" "$dir/gg1.out"; } ||
        { echo "want one graph replay and no launch issued one by one per decode step after the first"; return 1; }
    { grep -qx "decode_graph_replays=0" "$dir/gg0.out" && grep -q "^CUDA graphs: off (TESS_CUDA_GRAPH=0)" "$dir/gg0.out"; } ||
        { echo "want no replay and the note with TESS_CUDA_GRAPH=0"; return 1; }
    cmp "$dir/tg1.npy" "$dir/tg0.npy" || { echo "the ids differ"; return 1; }
    cmp "$dir/lg1.npy" "$dir/lg0.npy" || { echo "the logits differ"; return 1; }
    # shellcheck disable=SC2086
    TESS_EMU_ORDER=random TESS_EMU_SEED=5 cu_mpirun "$np" "$dir/bin/model-emu" $args --output "$dir/tn.npy" --quiet ||
        return 1
    cmp "$dir/tn.npy" "$dir/tg0.npy" || { echo "the ids without --logits-out differ"; return 1; }
    [ "$1" != 1 ] || return 0
    # shellcheck disable=SC2086
    TESS_COMM=mpi TESS_EMU_ORDER=random TESS_EMU_SEED=5 cu_mpirun "$np" "$dir/bin/model-emu" $args --output "$dir/tm.npy" \
        --timing >"$dir/gm.out" 2>&1 || { tail -5 "$dir/gm.out"; return 1; }
    grep -E "^(CUDA graphs|decode_graph)" "$dir/gm.out"
    { grep -q "^CUDA graphs: off: the collectives are MPI with host staging" "$dir/gm.out" &&
        grep -qx "decode_graph_replays=0" "$dir/gm.out"; } || { echo "want MPI staging to run uncaptured, saying why"; return 1; }
    cmp "$dir/tm.npy" "$dir/tg0.npy" || { echo "the ids with MPI_MAXLOC differ"; return 1; }
}
for m in 1,1 2,1 1,2; do
    q=${m%,*} d=${m#*,}
    CU_GEN_N4="cuda: generate: rank_iI_jJ.cu of [$q,$q,$d]: the decode steps after the first replayed from a CUDA graph: ids and logits bitwise those of TESS_CUDA_GRAPH=0, bytes as planned$([ "$q" = 1 ] || echo "; TESS_COMM=mpi (MPI_MAXLOC) uncaptured, saying why, the same ids")"
    CU_GEN_N1="cuda: generate: rank_iI_jJ.cu of [$q,$q,$d] (prefill, KV-cache decode) under the emulation: greedy ids token for token and every new token's logits within 1e-4 of the float64 reference, ids equal the CPU program's (logits 1e-5), bytes as planned"
    CU_GEN_N2="cuda: generate: rank_iI_jJ.cu of [$q,$q,$d]: seeded sampling (temperature, top-k, top-p) gives the CPU program's ids"
    wanted "$CU_GEN_N1" || wanted "$CU_GEN_N2" || wanted "$CU_GEN_N4" || continue
    if cu_gen_setup >"$WORK/log" 2>&1 && cu_gen_build "$q" "$d" >"$WORK/log" 2>&1; then
        check "$CU_GEN_N1" cu_gen_greedy "$q" "$d"
        [ "$m" = 1,2 ] || check "$CU_GEN_N2" cu_gen_sampled "$q" "$d"
        check "$CU_GEN_N4" cu_gen_graph "$q" "$d"
    else
        notok "cuda: generate: generate and build the generate spec on [$q,$q,$d] against tests/cuda/emu.cc" "$WORK/log"
    fi
done
# bf16 (docs/GENERATE.md "bf16"): the bf16 KV cache (kv_write and attn_decode of tr_bf16), trc_copy_bf16 and
# trc_allgather_bf16 of the weight-stationary decode on [2,2,1], against tessref.py generate --bf16 (the whole bf16
# forward of lm-forward --bf16 on the growing sequence; 2.4e-7 measured, 0.033 from the float64 reference without
# rounding) and the CPU program of the same output (measured bitwise: the same rounding points and sums)
for m in 1,1 2,1; do
    q=${m%,*} d=${m#*,}
    CU_GEN_N4="cuda: generate: bf16 rank_iI_jJ.cu of [$q,$q,$d] (bf16 KV cache) under the emulation: greedy ids token for token and every new token's logits within 1e-4 of tessref --bf16, ids equal the CPU program's (logits 1e-5), bytes as planned"
    wanted "$CU_GEN_N4" || continue
    if cu_gen_setup >"$WORK/log" 2>&1 && cu_gen_build "$q" "$d" 16 >"$WORK/log" 2>&1; then
        check "$CU_GEN_N4" cu_gen_greedy "$q" "$d" 16
    else
        notok "cuda: generate: generate and build the bf16 generate spec on [$q,$q,$d] against tests/cuda/emu.cc" "$WORK/log"
    fi
done
CU_GEN_N3="cuda: generate: a decode step over more than 8192 cached positions is refused for the CUDA backend, naming model.context"
cu_gen_context() {
    local dir="$WORK/cugen/o_ctx"
    mkdir -p "$WORK/cugen" && cat >"$dir.lua" <<SPEC
return { name = "cugen_ctx", mesh = { q = 1, d = 1 }, mode = "generate", backends = { "cpu", "cuda" },
  model = { layers = 1, hidden = 16, heads = 4, ffn = 32, seq = 4, batch = 2, vocab = 23, positions = 9000,
            context = 9000 } }
SPEC
    env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet >"$dir.out" 2>&1
    local rc=$?
    cat "$dir.out"
    [ $rc -ne 0 ] && grep -q "model.context = 9000, a decode step over more than 8192 cached positions" "$dir.out" &&
        [ ! -e "$dir" ]
}
check "$CU_GEN_N3" cu_gen_context

# ---- bf16 (dtype = "bf16", docs/BF16.md) under the emulation, against the CPU program and --bf16 ---------------
# The training spec of the section above in dtype "bf16" with attention = "cublas" (named: a bf16 spec without the key
# takes cuDNN's, checked in the sdpa section below) on [1,1,1], [2,2,1], [2,2,2]: trc_gemm_bf16, trc_cast_bf16,
# trc_bcast_bf16 and the kernels' bf16 outputs. The CPU program of the same output (checked by
# tests/bf16_compute.sh) and tessref --bf16 are the references:
#   forward   y (poisoned first) within 1e-3 of the CPU program and 3e-3 of --bf16, bytes as planned, each order
#   backward  dL/dx and every weight gradient within 1e-3 of the CPU program, bytes as planned, each order
#   training  5 AdamW steps, comm-first order: replicas bitwise identical; 6 steps, random order: the losses
#             within 1e-3 of the CPU program's (the optimizer writes the bf16 weight copies the next step reads)
# and "cuda: compile" compiles every .cu of the three for sm_80 and sm_90 (-Werror, no spills). On q = 1 and megatron
# fc1's GEMM runs its bias + GeLU as a cuBLASLt epilogue with the bf16 bias (cuBLASLt reads the bias in D's type), the
# bf16 GeLU output as D and training's bf16 u as aux, and fc2's input-gradient GEMM writes the bf16 du as its DGELU
# epilogue; on q >= 2 the last SUMMA GEMM accumulates (and dg waits for its reduce), so the kernels stay.
# Why 1e-3 against the CPU program: both widen bf16 operands exactly and call the same sgemm, but the emulated
# kernels and reductions sum in other orders (fp32 programs differ by <= 5e-7, the LM section below); where such a
# difference crosses a bf16 rounding boundary, a cast moves that element by one bf16 ulp (3.9e-3 relative), and the
# backward's casts of dY carry it on: measured 0 (forward) and 3.2e-4 (dL/dx on q = 2), against ~3e-3 for a
# rounding point missed or added. Attention's GEMMs read bf16 operands (the biased Q, K, V and P; in the backward
# also dO and the recomputed P and dS), as tensor cores do, and the CPU program and --bf16 round at exactly those
# points too (docs/BF16.md, "Attention"), so attention adds no tolerance here.
cub_setup() {
    [ -s "$WORK/cub_ref.npy" ] && return 0
    cu_train_setup &&
        "$PY" $CU_REF forward $CU_DIMS --bf16 --weights "$WORK/cu_w.safetensors" --input "$WORK/cu_x.npy" \
            --out "$WORK/cub_ref.npy"
}
cub_generate() { # q d -> $WORK/cub_q_d: a bf16 training program with both backends; the CPU one built
    local dir="$WORK/cub_$1_$2"
    cu_spec "cub_q$1_d$2" "$1" "$2" 'backends = { "cpu", "cuda" }, mode = "train", dtype = "bf16", attention = "cublas",
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },' >"$dir.lua" &&
        env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" cpu >/dev/null &&
        tests/cuda/emu_build.sh "$dir" emu model-emu
}
cub_fwd() { # q d order
    local dir="$WORK/cub_$1_$2" np=$(($1 * $1 * $2)) a
    a="--weights $WORK/cu_w.safetensors --input $WORK/cu_x.npy"
    # shellcheck disable=SC2086
    { [ -s "$dir/y_cpu.npy" ] || "$dir/run" $a --output "$dir/y_cpu.npy" --quiet; } &&
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((4, 16, 128), np.nan, np.float32))" "$dir/y.npy" &&
        TESS_EMU_ORDER=$3 TESS_EMU_SEED=7 cu_mpirun "$np" "$dir/bin/model-emu" $a --output "$dir/y.npy" --bytes --quiet &&
        "$PY" $CU_REF compare --ref "$dir/y_cpu.npy" --got "$dir/y.npy" --tol 1e-3 --expect-f32 \
            --label "cuda bf16 [$1,$1,$2] $3 first vs the CPU program" &&
        "$PY" $CU_REF compare --ref "$WORK/cub_ref.npy" --got "$dir/y.npy" --tol 3e-3 --expect-f32 \
            --label "cuda bf16 [$1,$1,$2] $3 first vs --bf16"
}
cub_grads() { # q d order
    local dir="$WORK/cub_$1_$2" np=$(($1 * $1 * $2)) a
    a="--weights $WORK/cu_w.safetensors --input $WORK/cu_x.npy --dy $WORK/cu_dy.npy"
    # shellcheck disable=SC2086
    { [ -s "$dir/g_cpu.st" ] || "$dir/run" $a --dx-out "$dir/dx_cpu.npy" --grads-out "$dir/g_cpu.st" --quiet; } &&
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((4, 16, 128), np.nan, np.float32))" "$dir/dx.npy" &&
        rm -f "$dir/g.st" &&
        TESS_EMU_ORDER=$3 TESS_EMU_SEED=9 cu_mpirun "$np" "$dir/bin/model-emu" $a --dx-out "$dir/dx.npy" \
            --grads-out "$dir/g.st" --bytes --quiet &&
        "$PY" $CU_REF compare --ref "$dir/dx_cpu.npy" --got "$dir/dx.npy" --tol 1e-3 --expect-f32 \
            --label "cuda bf16 dx [$1,$1,$2] $3 first vs the CPU program" &&
        "$PY" $CU_REF compare-grads --ref "$dir/g_cpu.st" --got "$dir/g.st" --tol 1e-3 \
            --label "cuda bf16 [$1,$1,$2] $3 first vs the CPU program"
}
cub_replicas() { # q d
    local dir="$WORK/cub_$1_$2" np=$(($1 * $1 * $2))
    TESS_EMU_ORDER=comm cu_mpirun "$np" "$dir/bin/model-emu" --weights "$WORK/cu_w.safetensors" \
        --input "$WORK/cu_x.npy" --target "$WORK/cu_target.npy" --steps 5 --replica-check | tee "$WORK/cub_rep.out" &&
        grep -q "bitwise identical" "$WORK/cub_rep.out"
}
cub_steps() { # q d: 6 AdamW steps under the emulation track the CPU program's losses. The GEMMs of step k+1 read the
    # bf16 weight copies that step k's optimizer wrote (trc_adamw_multi; nothing else writes them after the start),
    # so an optimizer that left them stale would train only the vectors: 3.56 at step 6 where both programs reach
    # 1.91 (measured with the emulation's bf16 write removed). Measured up to 8e-5 apart: the emulated sums' order
    # flips a bf16 rounding now and then (see below), and the steps carry it on; 1e-3 as for the forward.
    local dir="$WORK/cub_$1_$2" np=$(($1 * $1 * $2)) a
    a="--weights $WORK/cu_w.safetensors --input $WORK/cu_x.npy --target $WORK/cu_target.npy --steps 6"
    # shellcheck disable=SC2086
    { [ -s "$dir/loss_cpu.txt" ] || "$dir/run" $a | grep '^step ' >"$dir/loss_cpu.txt"; } &&
        TESS_EMU_ORDER=random TESS_EMU_SEED=13 cu_mpirun "$np" "$dir/bin/model-emu" $a | grep '^step ' >"$dir/loss_emu.txt" &&
        "$PY" $CU_REF compare-losses --label "cuda bf16 [$1,$1,$2] 6 steps" --mesh-tol 0 --steps 6 --falling \
            --run "emulation=$dir/loss_emu.txt" --ref "the CPU program=$dir/loss_cpu.txt=1e-3"
}
cub_fused() { # dir epilogue: a bf16 program on q = 1 or megatron (docs/BF16.md): each layer's fc1 GEMM runs its bias +
    # GeLU as one cuBLASLt call with the bf16 bias (AdamW's copy in training, the copy rounded after loading in inference),
    # D = the bf16 GeLU output and in training aux = the kept bf16 u (gen/fuse.c); no bias + GeLU kernel. Training: each
    # layer's fc2 input-gradient GEMM writes the bf16 du as its DGELU epilogue (aux u), no GeLU-gradient kernel. No
    # other GEMM takes an epilogue (the bias gradients sum fp32 or bf16 dY). Before the bf16 bias: no epilogue at all
    # (cuBLASLt reads the bias in D's type and refused the fp32 one with a bf16 D on an H200)
    local f n want=2
    cu_fused "$1" "$2" 2 || return 1
    if [ "$2" = TRC_EPI_GELU_AUX_BIAS ]; then
        cu_fused "$1" TRC_EPI_DGELU 2 || return 1
        want=4
    fi
    for f in "$1"/rank_i*_j*.cu; do
        n=$(grep -c "trc_gemm_lt\(_bwd\)\?(c, [0-9]*, TRC_EPI_" "$f")
        [ "$n" = $want ] || { echo "$(basename "$f"): $n GEMMs with an epilogue, want fc1's 2 (and fc2's 2 in training)"; return 1; }
        n=$(grep -c "trc_gemm_lt(c, [0-9]*, $2, .*, 0.0f, L[0-9]*_gelu_out, [0-9]*, bf16_[A-Za-z0-9_]*_c_fc_bias, L[0-9]*_gelu_out, " "$f")
        [ "$n" = 2 ] || { echo "$(basename "$f"): $n fc1 calls write the GeLU output as D from the bf16 bias, want 2"; return 1; }
        [ $want = 2 ] && continue
        n=$(grep -c "trc_gemm_lt_bwd(c, [0-9]*, TRC_EPI_DGELU, 0, 1, .*, 0.0f, L[0-9]*_gelu_du, [0-9]*, L[0-9]*_fc1_u, nullptr);" "$f")
        [ "$n" = 2 ] || { echo "$(basename "$f"): $n fc2 input-gradient calls write the bf16 du from the bf16 u, want 2"; return 1; }
    done
}
cub_lncopy() { # dir layers: bf16 training (docs/BF16.md): every bf16 copy of the residual gradient grad_x that an op's
    # backward GEMMs read is written by the layernorm backward that wrote grad_x (ln_bwd_apply's last argument, or
    # ln_bwd's where the two steps are one row kernel), but
    # the top layer's fc2 copy of dL/dy, which a cast step makes; before, a cast step made each of them (2 a layer)
    local f n want=$((2 * $2 - 1))
    for f in "$1"/rank_i*_j*.cu; do
        n=$(grep -c "trk::ln_bwd\(_apply\)\?<.*, grad_x, bf16b_L[0-9]*_\(fc2\|proj\)_grad_x);" "$f")
        [ "$n" = $want ] || { echo "$(basename "$f"): $n layernorm backward steps write grad_x's bf16 copy, want $want"; return 1; }
        n=$(grep -c "trc_cast_bf16(c, grad_x, " "$f")
        [ "$n" = 1 ] || { echo "$(basename "$f"): $n cast steps of grad_x, want 1 (the top layer's dL/dy)"; return 1; }
    done
}
cub_infer() { # bf16 inference on [1,1,1] (docs/BF16.md): fc1's GEMM writes the bf16 GeLU output fc2 reads as its
    # cuBLASLt epilogue (as cub_fused, without aux); the emulated forward against the CPU program (output poisoned first)
    local dir="$WORK/cubi" a="--weights $WORK/cu_w.safetensors --input $WORK/cu_x.npy"
    cu_spec cubi 1 1 'backends = { "cpu", "cuda" }, dtype = "bf16", attention = "cublas",' >"$dir.lua" &&
        env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" cpu >/dev/null &&
        tests/cuda/emu_build.sh "$dir" emu model-emu >/dev/null || return 1
    cub_fused "$dir" TRC_EPI_GELU_BIAS || return 1
    # shellcheck disable=SC2086
    "$dir/run" $a --output "$dir/y_cpu.npy" --quiet &&
        "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((4, 16, 128), np.nan, np.float32))" "$dir/y.npy" &&
        TESS_EMU_ORDER=random TESS_EMU_SEED=7 cu_mpirun 1 "$dir/bin/model-emu" $a --output "$dir/y.npy" --bytes --quiet &&
        "$PY" $CU_REF compare --ref "$dir/y_cpu.npy" --got "$dir/y.npy" --tol 1e-3 --expect-f32 --label "bf16 inference [1,1,1]"
}
cub_megatron() { # the megatron scheme in bf16, p = 2: its casts before each GEMM, under the emulation
    local dir="$WORK/cub_mg_2" a
    cat >"$dir.lua" <<SPEC &&
return {
  name = "cub_mg_2", scheme = "megatron", mesh = { p = 2 }, mode = "train", dtype = "bf16", attention = "cublas",
  model = { layers = 2, hidden = 128, heads = 2, ffn = 256, seq = 16, batch = 4 },
  backends = { "cpu", "cuda" },
}
SPEC
        env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet && cub_fused "$dir" TRC_EPI_GELU_AUX_BIAS &&
        ninja -C "$dir" cpu >/dev/null && tests/cuda/emu_build.sh "$dir" emu model-emu || return 1
    a="--weights $WORK/cu_w.safetensors --input $WORK/cu_x.npy --dy $WORK/cu_dy.npy"
    # shellcheck disable=SC2086
    "$dir/run" $a --dx-out "$dir/dx_cpu.npy" --grads-out "$dir/g_cpu.st" --quiet &&
        TESS_EMU_ORDER=random TESS_EMU_SEED=11 cu_mpirun 2 "$dir/bin/model-emu" $a --dx-out "$dir/dx.npy" \
            --grads-out "$dir/g.st" --bytes --quiet &&
        "$PY" $CU_REF compare --ref "$dir/dx_cpu.npy" --got "$dir/dx.npy" --tol 1e-3 --expect-f32 \
            --label "cuda bf16 megatron p=2 dx vs the CPU program" &&
        "$PY" $CU_REF compare-grads --ref "$dir/g_cpu.st" --got "$dir/g.st" --tol 1e-3 \
            --label "cuda bf16 megatron p=2 vs the CPU program"
}
if wanted "cuda: bf16|cuda: compile"; then
    if cub_setup >"$WORK/log" 2>&1; then
        for m in $CU_MESHES; do
            q=${m%,*}
            d=${m#*,}
            if cub_generate "$q" "$d" >"$WORK/log" 2>&1; then
                if [ "$q" = 1 ]; then
                    check "cuda: bf16: rank_iI_jJ.cu of [$q,$q,$d]: each layer's fc1 GEMM writes the bf16 GeLU output and pre-activation from the bf16 bias as one cuBLASLt call, its fc2 input-gradient GEMM the bf16 du; no bias + GeLU or GeLU-gradient kernel" \
                        cub_fused "$WORK/cub_${q}_${d}" TRC_EPI_GELU_AUX_BIAS
                    check "cuda: bf16: rank_iI_jJ.cu of [$q,$q,$d]: each residual add and the layernorm after it run as one row kernel writing the bf16 layernorm output (trk::resid_ln; the first ln1 trk::ln_rows)" \
                        cu_rows "$WORK/cub_${q}_${d}" 3 0 1 tr_bf16
                    check "cuda: bf16: rank_iI_jJ.cu of [$q,$q,$d]: each layernorm backward runs as one row kernel writing g and its bf16 copy (trk::ln_bwd)" \
                        eval 'cu_lnb "$WORK/cub_${q}_${d}" 4 0 && [ "$(grep -c "trk::ln_bwd<.*, nullptr);" "$WORK/cub_${q}_${d}"/rank_i0_j0.cu)" -lt 4 ]'
                else
                    check "cuda: bf16: rank_iI_jJ.cu of [$q,$q,$d]: the last SUMMA GEMM of fc1 accumulates (beta 1), so no GEMM takes an epilogue" \
                        cu_fused "$WORK/cub_${q}_${d}" 'TRC_EPI_[A-Z_]*' 0
                fi
                check "cuda: bf16: rank_iI_jJ.cu of [$q,$q,$d]: each bf16 copy of the residual gradient but the top layer's dL/dy is written by the layernorm backward that wrote it (no cast step)" \
                    cub_lncopy "$WORK/cub_${q}_${d}" 2
                for order in $(cu_orders "$q" "$d"); do
                    check "cuda: bf16: rank_iI_jJ.cu of [$q,$q,$d], $order first: forward within 1e-3 of the CPU program and 3e-3 of --bf16, bytes as planned" \
                        cub_fwd "$q" "$d" "$order"
                    check "cuda: bf16: rank_iI_jJ.cu of [$q,$q,$d], --dy, $order first: dL/dx and weight gradients within 1e-3 of the CPU program, bytes as planned" \
                        cub_grads "$q" "$d" "$order"
                done
                check "cuda: bf16: rank_iI_jJ.cu of [$q,$q,$d], 5 AdamW steps: replicas bitwise identical" cub_replicas "$q" "$d"
                check "cuda: bf16: rank_iI_jJ.cu of [$q,$q,$d], 6 AdamW steps, random order: the losses within 1e-3 of the CPU program's (each step's GEMMs read the bf16 weights the optimizer wrote)" \
                    cub_steps "$q" "$d"
            else
                notok "cuda: bf16: generate [$q,$q,$d] and build its CPU program and the emulation" "$WORK/log"
            fi
        done
        check "cuda: bf16: megatron p=2 training under the emulation, random order: fc1's bias + GeLU and fc2's GeLU gradient cuBLASLt epilogues with bf16 D and aux; dL/dx and gradients within 1e-3 of the CPU program, bytes as planned" \
            cub_megatron
        check "cuda: bf16: an inference program on [1,1,1]: fc1's GEMM writes the bf16 GeLU output from the bf16 bias as its cuBLASLt epilogue; under the emulation its output within 1e-3 of the CPU program's, bytes as planned" \
            cub_infer
    else
        notok "cuda: bf16: reference inputs" "$WORK/log"
    fi
fi

# ---- the language model (model.vocab) under the emulation, against the CPU program ------------------------------
# The CUDA tests' model (head dim 64) with vocab 49 (padded to 50 on q = 2: one pad column in vocab block 1, odd
# local widths 25 and 24) and positions 20 > seq 16, in mode "train", on [1,1,1], [2,2,1], [2,2,2]. The CPU program of
# the same output (itself checked against the float64 reference by tests/lm.sh) is the independent result:
#   forward   logits (poisoned first) within 1e-6 and the printed loss within 1e-6, in each stream order, bytes
#             as planned (--bytes)
#   backward  --grads-out (one backward of the loss): every tensor within 1e-5, bytes as planned, each order
#   training  3 AdamW steps, comm-first order: the step losses within 1e-6, replicas bitwise identical
# Measured: logits 3e-7, gradients <= 5e-7 (the GEMMs: OpenBLAS here, tr_gemm there; sums in other orders).
CU_LM_DIMS="--layers 2 --hidden 128 --heads 2 --ffn 256 --seq 16 --batch 4 --vocab 49 --positions 20"
cu_lm_setup() {
    local W="$WORK/culm"
    [ -s "$W/tgt.npy" ] && return 0
    mkdir -p "$W" &&
        "$PY" $CU_REF lm-weights $CU_LM_DIMS --seed 21 --out "$W/w.st" &&
        "$PY" $CU_REF tokens --batch 4 --seq 16 --vocab 49 --seed 1 --out "$W/tok.npy" &&
        "$PY" $CU_REF tokens --batch 4 --seq 16 --vocab 49 --seed 2 --out "$W/tgt.npy"
}
cu_lm_generate() { # q d -> $WORK/culm_q_d: both backends; the CPU program built
    local dir="$WORK/culm_$1_$2"
    cu_spec "culm_q$1_d$2" "$1" "$2" 'backends = { "cpu", "cuda" }, mode = "train",
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },' |
        sed 's/batch = 4 }/batch = 4, vocab = 49, positions = 20 }/' >"$dir.lua" &&
        grep -q "vocab = 49" "$dir.lua" &&
        env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet && ninja -C "$dir" cpu >/dev/null
}
cu_lm_args() { echo "--weights $WORK/culm/w.st --tokens $WORK/culm/tok.npy --targets $WORK/culm/tgt.npy"; }
cu_lm_loss() { grep '^loss ' "$1" | awk '{print $2}'; }
cu_lm_fwd() { # q d order
    local dir="$WORK/culm_$1_$2" np=$(($1 * $1 * $2))
    # shellcheck disable=SC2046
    if [ ! -s "$dir/cpu_fwd.out" ]; then
        "$dir/run" $(cu_lm_args) --logits-out "$dir/logits_cpu.npy" >"$dir/cpu_fwd.out" || return 1
    fi
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((4, 16, 49), np.nan, np.float32))" "$dir/logits.npy" &&
        TESS_EMU_ORDER=$3 TESS_EMU_SEED=3 cu_mpirun "$np" "$dir/bin/model-emu" $(cu_lm_args) \
            --logits-out "$dir/logits.npy" --bytes >"$dir/emu_fwd.out" &&
        grep -q "every rank moved exactly the planned bytes" "$dir/emu_fwd.out" &&
        "$PY" $CU_REF compare --ref "$dir/logits_cpu.npy" --got "$dir/logits.npy" --tol 1e-6 --expect-f32 \
            --label "cuda emulation logits [$1,$1,$2] $3 first" &&
        "$PY" - "$(cu_lm_loss "$dir/cpu_fwd.out")" "$(cu_lm_loss "$dir/emu_fwd.out")" <<'PYEOF'
import sys
a, b = float(sys.argv[1]), float(sys.argv[2])
rel = abs(a - b) / abs(a)
print("loss: cpu %.9g cuda emulation %.9g rel %.2e (tol 1e-6)" % (a, b, rel))
sys.exit(0 if rel <= 1e-6 else 1)
PYEOF
}
cu_lm_grads() { # q d order
    local dir="$WORK/culm_$1_$2" np=$(($1 * $1 * $2))
    # shellcheck disable=SC2046
    if [ ! -s "$dir/g_cpu.st" ]; then
        "$dir/run" $(cu_lm_args) --grads-out "$dir/g_cpu.st" --quiet >/dev/null || return 1
    fi
    rm -f "$dir/g.st"
    # shellcheck disable=SC2046
    TESS_EMU_ORDER=$3 TESS_EMU_SEED=5 cu_mpirun "$np" "$dir/bin/model-emu" $(cu_lm_args) --grads-out "$dir/g.st" \
        --bytes >"$dir/emu_bwd.out" &&
        grep -q "every rank moved exactly the planned bytes" "$dir/emu_bwd.out" &&
        "$PY" $CU_REF compare-grads --ref "$dir/g_cpu.st" --got "$dir/g.st" --tol 1e-3 \
            --label "cuda emulation [$1,$1,$2] $3 first"
}
cu_lm_train() { # q d: 3 AdamW steps, comm first
    local dir="$WORK/culm_$1_$2" np=$(($1 * $1 * $2))
    # shellcheck disable=SC2046
    "$dir/run" $(cu_lm_args) --steps 3 | grep '^step ' >"$dir/steps_cpu.txt" &&
        TESS_EMU_ORDER=comm cu_mpirun "$np" "$dir/bin/model-emu" $(cu_lm_args) --steps 3 --replica-check \
            >"$dir/emu_train.out" &&
        cat "$dir/emu_train.out" && grep -q "bitwise identical" "$dir/emu_train.out" &&
        "$PY" - "$dir/steps_cpu.txt" "$dir/emu_train.out" <<'PYEOF'
import sys
def losses(f):
    return [float(l.split()[3]) for l in open(f) if l.startswith("step ")]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
ok = len(a) == 3 and len(b) == 3
for k in range(min(len(a), len(b))):
    rel = abs(a[k] - b[k]) / abs(a[k])
    print("step %d: cpu %.9g cuda emulation %.9g rel %.2e (tol 1e-6)" % (k + 1, a[k], b[k], rel))
    ok = ok and rel <= 1e-6
sys.exit(0 if ok else 1)
PYEOF
}
if wanted "cuda: lm|cuda: compile"; then
    if cu_lm_setup >"$WORK/log" 2>&1; then
        for m in $CU_MESHES; do
            q=${m%,*}
            d=${m#*,}
            if ! cu_lm_generate "$q" "$d" >"$WORK/log" 2>&1; then
                notok "cuda: lm: generate the vocab spec on [$q,$q,$d] with backends cpu, cuda" "$WORK/log"
                continue
            fi
            wanted "cuda: lm" || continue
            [ "$q" = 1 ] && check "cuda: lm: rank_iI_jJ.cu of [$q,$q,$d]: each residual add and the layernorm after it run as one row kernel (trk::resid_ln); the first ln1 and ln_f too, without the residual (trk::ln_rows)" \
                cu_rows "$WORK/culm_${q}_${d}" 3 0 2
            [ "$q" = 1 ] && check "cuda: lm: rank_iI_jJ.cu of [$q,$q,$d]: each layernorm backward, ln_f's too, runs as one row kernel (trk::ln_bwd)" \
                cu_lnb "$WORK/culm_${q}_${d}" 5 0
            if tests/cuda/emu_build.sh "$WORK/culm_${q}_${d}" emu model-emu >"$WORK/log" 2>&1; then
                for order in $(cu_orders "$q" "$d"); do
                    check "cuda: lm: rank_iI_jJ.cu of [$q,$q,$d], $order first: logits and loss match the CPU program, bytes as planned" \
                        cu_lm_fwd "$q" "$d" "$order"
                    check "cuda: lm: rank_iI_jJ.cu of [$q,$q,$d], $order first: every gradient of the loss matches the CPU program, bytes as planned" \
                        cu_lm_grads "$q" "$d" "$order"
                done
                check "cuda: lm: rank_iI_jJ.cu of [$q,$q,$d], 3 AdamW steps: losses match the CPU program, replicas bitwise identical" \
                    cu_lm_train "$q" "$d"
            else
                notok "cuda: lm: build the rank_iI_jJ.cu of the vocab spec on [$q,$q,$d] against tests/cuda/emu.cc" "$WORK/log"
            fi
        done
    else
        notok "cuda: lm: weights and token files for the CUDA LM tests" "$WORK/log"
    fi
fi

# ---- compile with nvcc ------------------------------------------------------------------------------------
cu_stale_bias() { # the call an older tessgen emitted for a bf16 program's fc1 (docs/RELIABILITY.md)
    cat >"$WORK/stale.cu" <<'CU'
#include "trc.h"
void f(tr_ctx *c, const tr_bf16 *a, const tr_bf16 *b, tr_bf16 *g, const float *bias, tr_bf16 *u)
{
    trc_gemm_lt(c, 0, TRC_EPI_GELU_AUX_BIAS, 8, 8, 8, a, 8, b, 8, 0.0f, g, 8, bias, g, u);
}
CU
    ! "$(cu_nvcc)" -std=c++17 -Iruntime -Iruntime/cuda -c "$WORK/stale.cu" -o "$WORK/stale.o" >"$WORK/stale.log" 2>&1 &&
        cat "$WORK/stale.log" && grep -q "deleted function" "$WORK/stale.log" && grep -q "trc.h" "$WORK/stale.log" &&
        grep -B6 "= delete;" runtime/cuda/trc.h | grep -q "generate it"
}
cu_compile_as() { # objs q d [t]: cu_compile with CU_OBJS=objs
    local CU_OBJS=$1
    shift
    cu_compile "$@"
}
cu_rt_shared() { # the runtime objects of the [2,2,2] programs came from one compile in build/shared-rt/<hash>
    local d first="" n
    for d in cu_2_2 cut_2_2 cub_2_2 culm_2_2; do
        [ -f "$WORK/$d/build.log" ] || { echo "$d was not built"; return 1; }
        if [ -z "$first" ]; then first=$d; continue; fi
        if grep "CC .*once for every output" "$WORK/$d/build.log"; then echo "$d compiled the runtime again"; return 1; fi
        for n in "$WORK/$first"/obj-cuda/rt/tr*.o; do
            case $n in *tr_launch.o | *trc_attn_cudnn.o) continue ;; esac # compiled per output (cc; cuDNN's steps)
            cmp "$n" "$WORK/$d/obj-cuda/rt/$(basename "$n")" || return 1
        done
    done
    for n in "$WORK/$first"/obj-cuda/rt/tr*.o; do
        case $n in *tr_launch.o | *trc_attn_cudnn.o) continue ;; esac
        # shellcheck disable=SC2012 # the one command's folder holding this object
        ls "$ROOT"/build/shared-rt/*/"$(basename "$n")" | while read -r s; do cmp -s "$n" "$s" && echo "$s"; done | grep -q . ||
            { echo "no shared copy of $(basename "$n") in build/shared-rt/*"; return 1; }
    done
}
cu_compile() { # q d [t]: build bin/model-cuda (or, with CU_OBJS=1, only kernels.o and the rank objects), kernels.cu
    # compiled once, with ptxas -v (nvcc's NVCC_APPEND_FLAGS: build.ninja is the generated one, and the environment is
    # no part of the command ninja records); then its report: no spills
    local dir="$WORK/cu${3:-}_$1_$2" targets=cuda
    [ "${CU_OBJS:-0}" = 1 ] && targets="obj-cuda/kernels.o $(ninja -C "$dir" -t targets all | grep -o '^obj-cuda/rank_i[0-9]*_j[0-9]*\.o')"
    # kernels.o is compiled by this ninja run, so that its ptxas report is in the build's log
    rm -f "$dir/obj-cuda/kernels.o"
    # shellcheck disable=SC2086 # one target a word
    NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:+$NVCC_APPEND_FLAGS }-Xptxas -v" NINJA_STATUS="[%f/%t] " ninja -C "$dir" $targets \
        >"$dir/build.log" 2>&1 || { cat "$dir/build.log"; return 1; }
    [ "$targets" != cuda ] || [ -x "$dir/bin/model-cuda" ] || { echo "bin/model-cuda was not linked"; return 1; }
    # kernels.o's output: ninja prints each command's after its status line ("[n/N] NVCC obj-cuda/kernels.o"), the
    # other nvcc commands' ptxas reports (the runtime's .cu files) after theirs
    awk '/^\[[0-9]+\/[0-9]+\] / { on = / NVCC obj-cuda\/kernels\.o$/; next } on' "$dir/build.log" >"$dir/ptxas.log"
    # one summary line per kernel and architecture: name, registers, shared memory, spills
    awk '/Compiling entry function/ {
             k = "?"; a = "?"
             if (match($0, /k_[a-z_]+I(L[ib][0-9]+E)+/)) { # the literal arguments (a type argument left out)
                 k = substr($0, RSTART, RLENGTH); sub(/I/, "<", k); gsub(/L[ib]/, "", k); sub(/E$/, ">", k); gsub(/E/, ",", k)
             }
             if (match($0, /for .sm_[0-9a]+/)) a = substr($0, RSTART + 5, RLENGTH - 5)
         }
         /spill stores/ { sp = $5 + $9 }
         /Used [0-9]+ registers/ {
             sm = 0; if (match($0, /[0-9]+ bytes smem/)) sm = substr($0, RSTART, RLENGTH - 11)
             printf "%-34s %-6s %3d registers, %6d bytes smem, spill bytes %d\n", k, a, $5, sm, sp
             if (sp) bad = 1
         }
         END { exit bad }' "$dir/ptxas.log" >"$dir/ptxas.txt"
    local spill=$?
    cat "$dir/ptxas.txt" >>"$WORK/cu_ptxas.txt"
    grep -q "registers" "$dir/ptxas.txt" || { echo "no ptxas report parsed"; cat "$dir/ptxas.log"; return 1; }
    [ $spill -eq 0 ] || { echo "a fused kernel spills:"; grep -v "spill bytes 0$" "$dir/ptxas.txt"; return 1; }
}
cu_sass() { # cuobjdump: audit the objects of every program compiled for the last mesh, and the runtime's
    local objs=() rt=() d
    for d in "$WORK"/cu_* "$WORK"/cut_* "$WORK"/cub_* "$WORK"/culm_* "$WORK"/cugen_* "$WORK"/cugen16_*; do
        [ -f "$d/obj-cuda/kernels.o" ] && objs+=("$d/obj-cuda/kernels.o")
        [ ${#rt[@]} -eq 0 ] && [ -f "$d/obj-cuda/rt/trc_step.o" ] && rt=("$d"/obj-cuda/rt/*.o)
    done
    [ ${#objs[@]} -gt 0 ] && [ ${#rt[@]} -gt 0 ] || { echo "no compiled kernels.o or runtime objects under $WORK"; return 1; }
    objs+=("${rt[@]}")
    "$PY" tests/cuda/sass_audit.py "$1" docs/CUDA.md "${objs[@]}" >"$WORK/sass.txt" 2>&1
    local rc=$?
    cat "$WORK/sass.txt"
    return $rc
}
check "cuda: sass: the audit of compiled kernels finds undocumented FP64, a stale row and a matrix kernel without tensor cores (self-test)" \
    "$PY" tests/cuda/sass_audit.py --self-test
if wanted "cuda: compile"; then
    if cu_nvcc >/dev/null; then
        rm -f "$WORK/cu_ptxas.txt"
        # the runtime's .cu files are the same for every output: they are compiled and linked on the last mesh
        # ([2,2,2]), where each program is linked; the other meshes compile their kernels.cu and rank files
        for m in $CU_MESHES; do
            q=${m%,*}
            d=${m#*,}
            if [ "$m" = "${CU_MESHES##* }" ]; then objs=0 what="every .cu" how="linked"; else objs=1 what="kernels.cu and every rank_iI_jJ.cu" how="compiled"; fi
            [ -f "$WORK/cu_${q}_${d}/build.ninja" ] &&
                check "cuda: compile: $what of [$q,$q,$d] for sm_80 and sm_90, -Werror, $how; no kernel spills" \
                    cu_compile_as $objs "$q" "$d"
            [ -f "$WORK/cut_${q}_${d}/build.ninja" ] &&
                check "cuda: compile: $what of the training spec on [$q,$q,$d] for sm_80 and sm_90, -Werror, $how; no kernel spills" \
                    cu_compile_as $objs "$q" "$d" t
            [ -f "$WORK/cub_${q}_${d}/build.ninja" ] &&
                check "cuda: compile: $what of the bf16 training spec (bf16 GEMMs, casts, broadcasts, kernel outputs) on [$q,$q,$d] for sm_80 and sm_90, -Werror, $how; no kernel spills" \
                    cu_compile_as $objs "$q" "$d" b
            [ -f "$WORK/culm_${q}_${d}/build.ninja" ] &&
                check "cuda: compile: $what of the vocab spec (embedding, LM head, loss; training) on [$q,$q,$d] for sm_80 and sm_90, -Werror, $how; no kernel spills" \
                    cu_compile_as $objs "$q" "$d" lm
        done
        [ -f "$WORK/cugen_2_1/build.ninja" ] &&
            check "cuda: compile: kernels.cu and every rank_iI_jJ.cu of the generate spec (KV cache, decode attention, argmax, weight-stationary copies) on [2,2,1] for sm_80 and sm_90, -Werror, compiled; no kernel spills" \
                cu_compile_as 1 2 1 gen
        [ -f "$WORK/cugen16_2_1/build.ninja" ] &&
            check "cuda: compile: kernels.cu and every rank_iI_jJ.cu of the bf16 generate spec (bf16 KV cache and decode attention, bf16 weight-stationary copies and all-gathers) on [2,2,1] for sm_80 and sm_90, -Werror, compiled; no kernel spills" \
                cu_compile_as 1 2 1 gen16
        check "cuda: compile: a program from before bf16 programs' bf16 fc1 bias (an fp32 bias with a bf16 D, which cuBLASLt refuses) does not compile: the compiler names trc_gemm_lt's deleted overload, whose comment says to generate it again" \
            cu_stale_bias
        check "cuda: compile: the CUDA runtime compiled once for the four programs of [2,2,2] (scripts/rt_shared.sh), each output's copy byte for byte the shared one" \
            cu_rt_shared
        # the standalone kernel checks: seven independent nvcc builds (one thread each), started together so that both
        # cores work, then each reported by its own check (its log and exit status kept)
        kc_names=(lnb attn bf16 rows adamw lt decode)
        kc_modes=("" "" host "" host "" "")
        kc_what=("the column-sum and layernorm backward check and microbenchmark (tests/cuda/lnb_check.cu) for sm_80 and sm_90, -Werror, no spills"
            "the attention check and microbenchmark (tests/cuda/attn_check.cu: softmax kernels, cuBLAS attention) for sm_80 and sm_90, -Werror, no spills"
            "the bf16 check (tests/cuda/bf16_check.cu) for sm_80 and sm_90, -Werror, no spills; its host part: the element-wise kernels' 16-byte and scalar bf16 paths bit for bit the reference"
            "the row statistics and vocabulary loss check (tests/cuda/rows_check.cu) for sm_80 and sm_90, -Werror, no spills"
            "the multi-tensor AdamW check and microbenchmark (tests/cuda/adamw_check.cu) for sm_80 and sm_90, -Werror, no spills; its host part: the kernel's 16-byte and scalar paths bit for bit the CPU loop"
            "the cuBLASLt epilogue check and microbenchmark (tests/cuda/lt_check.cu: trc_gemm_lt) for sm_80 and sm_90, -Werror, no spills"
            "the generation kernels' check and microbenchmark (tests/cuda/decode_check.cu: decode attention, KV write, argmax) for sm_80 and sm_90, -Werror, no spills")
        kc_pids=()
        for i in "${!kc_names[@]}"; do
            kc_pids[i]=""
            wanted "cuda: compile: ${kc_what[i]}" || continue
            # shellcheck disable=SC2086 # an empty mode is no argument
            tests/cuda/"${kc_names[i]}"_check.sh "$WORK/${kc_names[i]}_check" ${kc_modes[i]} >"$WORK/kc_${kc_names[i]}.log" 2>&1 &
            kc_pids[i]=$!
        done
        kc_result() { # i: the background build's log, and its exit status
            local rc=0
            wait "${kc_pids[$1]}" || rc=$?
            cat "$WORK/kc_${kc_names[$1]}.log"
            return $rc
        }
        for i in "${!kc_names[@]}"; do
            [ -n "${kc_pids[i]}" ] && check "cuda: compile: ${kc_what[i]}" kc_result "$i"
        done
        # the SASS of every kernel the last mesh's programs compiled (docs/CUDA.md "FP64 and tensor cores in the
        # kernels"): cuobjdump from the toolkit, else from PyPI (scripts/sass_tools.sh)
        if wanted "cuda: compile: SASS"; then
            if sass_tool=$(scripts/sass_tools.sh 2>"$WORK/sass_tools.err"); then
                check "cuda: compile: SASS of every kernel of the compiled programs (inference, training, bf16, vocab, generate) and the runtime (sm_80, sm_90): FP64 only in the kernels docs/CUDA.md says why, tensor cores in hand-written matrix kernels" \
                    cu_sass "$sass_tool"
            else
                ok "cuda: compile: SASS of every kernel: FP64 only where docs/CUDA.md says why # skip $(head -1 "$WORK/sass_tools.err")"
            fi
        fi
        if [ -s "$WORK/cu_ptxas.txt" ]; then
            echo "    # ptxas -v of the fused kernels (kernel<shape>, architecture, registers, shared memory, spills):"
            sort -u "$WORK/cu_ptxas.txt" | sed 's/^/    #   /'
        fi
        if [ -s "$WORK/sass.txt" ]; then
            echo "    # SASS of the kernels (kernel, architecture, FP64 and tensor core instructions, docs/CUDA.md):"
            sed 's/^/    #   /' "$WORK/sass.txt"
        fi
    else
        ok "cuda: compile: every generated .cu with nvcc for sm_80 and sm_90 # skip nvcc not found"
    fi
fi

# ---- the megatron scheme: the same CUDA emitter and runtime -----------------------------------------------
# One spec on mesh { p = 2 } (the CUDA tests' model: heads 2, head dim 64), inference and training: emulated in
# the three stream orders against the float64 reference with --bytes, replicas after 5 AdamW steps, and with
# nvcc every .cu compiled and linked as above.
cu_mg_generate() { # [t] -> $WORK/cu[t]_mg_2
    local dir="$WORK/cu${1:-}_mg_2" extra='backends = { "cpu", "cuda" },'
    [ -n "${1:-}" ] && extra="$extra mode = \"train\","
    sed 's/^  mesh = .*/  scheme = "megatron", mesh = { p = 2 },/' <(cu_spec "cu${1:-}_mg_2" 1 1 "$extra") >"$dir.lua" &&
        env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet
}
cu_mg_run() { # order
    local dir="$WORK/cu_mg_2"
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.full((4, 16, 128), np.nan, np.float32))" "$dir/y.npy" &&
        TESS_EMU_ORDER=$1 TESS_EMU_SEED=3 cu_mpirun 2 "$dir/bin/model-emu" --weights "$WORK/cu_w.safetensors" \
            --input "$WORK/cu_x.npy" --output "$dir/y.npy" --bytes --quiet &&
        "$PY" $CU_REF compare --ref "$WORK/cu_ref.npy" --got "$dir/y.npy" --tol 1e-4 --expect-f32 \
            --label "cuda emulation megatron p=2 $1 first"
}
if wanted "cuda: megatron"; then
    if cu_train_setup >"$WORK/log" 2>&1 && cu_mg_generate >"$WORK/log" 2>&1 && cu_mg_generate t >>"$WORK/log" 2>&1; then
        if cu_emu_build mg 2 >"$WORK/log" 2>&1 && cu_emu_build mg 2 t >>"$WORK/log" 2>&1; then
            check "cuda: megatron: rank_iI_j0.cu of p=2: each layer's fc1 GEMM runs its bias + GeLU as a cuBLASLt epilogue, inference and training" \
                eval 'cu_fused "$WORK/cu_mg_2" TRC_EPI_GELU_BIAS 2 && cu_fused "$WORK/cut_mg_2" TRC_EPI_GELU_AUX_BIAS 2'
            check "cuda: megatron: rank_iI_j0.cu of p=2 training: GeLU's gradient and every bias gradient run as cuBLASLt epilogues of their GEMMs" \
                eval 'cu_fused "$WORK/cut_mg_2" TRC_EPI_DGELU 2 && cu_fused "$WORK/cut_mg_2" TRC_EPI_BGRADA 8'
            check "cuda: megatron: rank_iI_j0.cu of p=2: the layernorms are whole rows, so each residual add and the layernorm after it run as one row kernel (trk::resid_ln; the first ln1 trk::ln_rows), inference and training" \
                eval 'cu_rows "$WORK/cu_mg_2" 3 0 1 && cu_rows "$WORK/cut_mg_2" 3 0 1'
            check "cuda: megatron: rank_iI_j0.cu of p=2 training: each layernorm backward runs as one row kernel (trk::ln_bwd)" \
                cu_lnb "$WORK/cut_mg_2" 4 0
            CU_NP=2
            for order in comm compute random; do
                check "cuda: megatron: rank_iI_j0.cu of p=2, $order first, matches the float64 reference" \
                    cu_mg_run "$order"
                check "cuda: megatron: training rank_iI_j0.cu of p=2, --dy, $order first: dL/dx and weight gradients match the float64 reference, bytes as planned" \
                    cu_train_grads mg 2 "$order"
            done
            check "cuda: megatron: training rank_iI_j0.cu of p=2, 5 AdamW steps: replicas bitwise identical" \
                cu_train_replicas mg 2
            unset CU_NP
        else
            notok "cuda: megatron: build the rank_iI_j0.cu of p=2 against tests/cuda/emu.cc" "$WORK/log"
        fi
        if cu_nvcc >/dev/null; then
            check "cuda: megatron: compile: every .cu of p=2 for sm_80 and sm_90, -Werror, linked; no kernel spills" \
                cu_compile mg 2
            check "cuda: megatron: compile: every training .cu of p=2 for sm_80 and sm_90, -Werror, linked; no kernel spills" \
                cu_compile mg 2 t
        else
            ok "cuda: megatron: compile: every generated .cu with nvcc # skip nvcc not found"
        fi
    else
        notok "cuda: megatron: reference inputs and generate p=2 with backends cpu, cuda" "$WORK/log"
    fi
fi

# ---- attention = "cudnn": cuDNN's fused attention (docs/CUDA.md, "Fused attention through cuDNN") ----------------
# The bf16 training spec of the bf16 section with attention = "cudnn" on [1,1,1] and [2,2,1], and the megatron scheme
# on p = 2 (its attention output is fp32: the widening path). The generated code calls trc_attn_cudnn and
# trc_attn_cudnn_bwd (no cuBLAS attention instance in kernels.cu); the emulation (tests/cuda/emu_sdpa.inc) computes
# them with the flash-attention arithmetic in float over the bf16 operands (statistics from the forward, the
# backward's D = rowsum(dO * O)), against the CPU program of the same output, whose attention is the cuBLAS path's,
# within the bf16 section's tolerances: forward 1e-3 of the CPU program and 3e-3 of --bf16, bytes as planned; dL/dx
# and every gradient 3e-3 of the CPU program, the bf16 section's figure for a rounding point added: cuDNN writes dQ,
# dK, dV in bf16 where the cuBLAS path's GEMMs write fp32 (measured 1.0e-3 on the QKV bias gradient of [1,1,1]
# against 1e-7 for the other weights); 5 AdamW steps with replicas bitwise identical; the generated calls: on [1,1,1]
# and megatron the proj input-gradient GEMM writes the bf16 dO the backward reads (no cast, no fp32 dO named), on
# [2,2,1] the backward casts the dO the reduce wrote. With nvcc and the
# cudnn-frontend headers (scripts/cudnn_frontend.sh) every .cu of [2,2,1] is compiled and linked with
# build/cuda/trc_sdpa.o and cuDNN, and so is tests/cuda/sdpa_check.cu ("cuda: compile: ..."); else a skip line each
# says which is missing.
cus_generate() { # q d [scheme-line] -> $WORK/cus_q_d: the bf16 training program with attention = "cudnn"
    local dir="$WORK/cus_$1_$2"
    cu_spec "cus_q$1_d$2" "$1" "$2" 'backends = { "cpu", "cuda" }, mode = "train", dtype = "bf16", attention = "cudnn",
  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },' |
        sed "${3:+s/^  mesh = .*/  $3/}" >"$dir.lua" &&
        env -u TESS_CUDA_ARCH bin/tessgen "$dir.lua" -o "$dir" --quiet
}
cus_emu() { # q d: the CPU program and the emulation; the generated code takes the cuDNN path
    local dir="$WORK/cus_$1_$2"
    grep -q "trc_attn_cudnn(c, S, " "$dir/rank_i0_j0.cu" && grep -q "trc_attn_cudnn_bwd(c, S, " "$dir/rank_i0_j0.cu" &&
        ! grep -q "trk::attention" "$dir/rank_i0_j0.cu" && ! grep -q "^template void attention" "$dir/kernels.cu" &&
        grep -q "obj-cuda/rt/trc_attn_cudnn.o \$sdpa_obj" "$dir/build.ninja" &&
        ninja -C "$dir" cpu >/dev/null && tests/cuda/emu_build.sh "$dir" emu model-emu
}
cus_run() { # q d np order: forward and --dy against the CPU program
    local dir="$WORK/cus_$1_$2" np=$3 a
    a="--weights $WORK/cu_w.safetensors --input $WORK/cu_x.npy"
    # shellcheck disable=SC2086
    { [ -s "$dir/y_cpu.npy" ] || "$dir/run" $a --output "$dir/y_cpu.npy" --quiet; } &&
        { [ -s "$dir/g_cpu.st" ] || "$dir/run" $a --dy "$WORK/cu_dy.npy" --dx-out "$dir/dx_cpu.npy" \
            --grads-out "$dir/g_cpu.st" --quiet; } &&
        "$PY" -c "import numpy as np, sys; [np.save(f, np.full((4, 16, 128), np.nan, np.float32)) for f in sys.argv[1:]]" \
            "$dir/y.npy" "$dir/dx.npy" && rm -f "$dir/g.st" &&
        TESS_EMU_ORDER=$4 TESS_EMU_SEED=13 cu_mpirun "$np" "$dir/bin/model-emu" $a --output "$dir/y.npy" --bytes --quiet &&
        "$PY" $CU_REF compare --ref "$dir/y_cpu.npy" --got "$dir/y.npy" --tol 1e-3 --expect-f32 \
            --label "cuda cudnn [$1,$2] $4 first vs the CPU program" &&
        "$PY" $CU_REF compare --ref "$WORK/cub_ref.npy" --got "$dir/y.npy" --tol 3e-3 --expect-f32 \
            --label "cuda cudnn [$1,$2] $4 first vs --bf16" &&
        TESS_EMU_ORDER=$4 TESS_EMU_SEED=14 cu_mpirun "$np" "$dir/bin/model-emu" $a --dy "$WORK/cu_dy.npy" \
            --dx-out "$dir/dx.npy" --grads-out "$dir/g.st" --bytes --quiet &&
        "$PY" $CU_REF compare --ref "$dir/dx_cpu.npy" --got "$dir/dx.npy" --tol 3e-3 --expect-f32 \
            --label "cuda cudnn dx [$1,$2] $4 first vs the CPU program" &&
        "$PY" $CU_REF compare-grads --ref "$dir/g_cpu.st" --got "$dir/g.st" --tol 3e-3 \
            --label "cuda cudnn [$1,$2] $4 first vs the CPU program"
}
cus_replicas() { # q d
    local dir="$WORK/cus_$1_$2" np=$(($1 * $1 * $2))
    TESS_EMU_ORDER=comm cu_mpirun "$np" "$dir/bin/model-emu" --weights "$WORK/cu_w.safetensors" \
        --input "$WORK/cu_x.npy" --target "$WORK/cu_target.npy" --steps 5 --replica-check | tee "$WORK/cus_rep.out" &&
        grep -q "bitwise identical" "$WORK/cus_rep.out"
}
cus_kept() { # q d: each layer's attention backward reads the bf16 QKV, O and statistics its forward wrote (no
    # forward computed again), and the memory plan keeps them live from the forward to the backward
    local f="$WORK/cus_$1_$2/rank_i0_j0.cu" l=0 fwd bwd o
    while grep -q "trc_attn_cudnn(c, S, [^;]*L${l}_qkv," "$f"; do
        fwd=$(grep "trc_attn_cudnn(c, S, [^;]*L${l}_qkv," "$f")
        bwd=$(grep "trc_attn_cudnn_bwd(c, S, " "$f" | grep "L${l}_att_dout\(_bf16\)\?,")
        [ -n "$bwd" ] || { echo "layer $l: no trc_attn_cudnn_bwd"; return 1; }
        # the forward: (..., qkv, bias, out, qkvh, obuf, stats); its O is obuf when obuf is named, else out
        read -r o_out qh obuf st <<<"$(echo "$fwd" | sed 's/.*(\(.*\));/\1/' | tr -d ' ' | awk -F, '{ print $9, $10, $11, $12 }')"
        o=$o_out
        [ "$obuf" != nullptr ] && o=$obuf
        echo "layer $l: forward keeps $qh, $o, $st; backward: $bwd"
        [ "$st" != nullptr ] && echo "$bwd" | grep -q "S, [0-9, ]*$qh, $o, $st, " ||
            { echo "layer $l: the backward does not read the forward's QKV copy, O and statistics"; return 1; }
        grep -q "^ *\(tr_bf16\|float\) \*const $st = .*kept for the backward; live" "$f" ||
            { echo "layer $l: $st is not planned as kept for the backward"; return 1; }
        # cuDNN's bf16 dQ, dK, dV are what the QKV GEMMs and the bias gradient's column sums read: no fp32 dqkv
        # (no widening, no cast of it back to bf16)
        dqh=$(echo "$bwd" | sed 's/.*(\(.*\));/\1/' | tr -d ' ' | awk -F, '{ print NF == 10 ? $10 : $11 }')
        grep -q "trc_gemm[a-z0-9_]*(c, [^;]*[ (]$dqh," "$f" || { echo "layer $l: no GEMM reads $dqh"; return 1; }
        grep -q "trk::colsum<[0-9, ]*>(S, $dqh," "$f" || { echo "layer $l: the bias gradient does not sum $dqh"; return 1; }
        if grep -q "L${l}_qkv_dout" "$f"; then echo "layer $l: the CUDA program names the fp32 dqkv"; return 1; fi
        # dO: on q = 1 and megatron the proj input-gradient GEMM writes it in bf16 (beta 0, a bf16 C) into the copy the
        # backward reads, which casts nothing, and the fp32 dO is not named; on q >= 2 (a reduce writes dO last) the
        # backward casts the fp32 dO itself
        if [ "$1" = 1 ] || [ "$1" = mg ]; then
            echo "$bwd" | grep -q "S, [0-9, ]*$qh, $o, $st, L${l}_att_dout_bf16, $dqh);" &&
                grep -q "^ *trc_gemm_bf16(c, 0, 1, [^;]*, 0\.0f, L${l}_att_dout_bf16, [0-9]*);" "$f" &&
                ! grep -qw "L${l}_att_dout" "$f" ||
                { echo "layer $l: the proj GEMM does not write the bf16 dO the backward reads, or the fp32 dO is named"; return 1; }
        else
            echo "$bwd" | grep -q "S, [0-9, ]*$qh, $o, $st, L${l}_att_dout, $dqh, L${l}_att_dout_bf16);" ||
                { echo "layer $l: the backward does not cast the fp32 dO the reduce wrote"; return 1; }
        fi
        # the fp32 qkv is not kept: its last use is its forward, before this layer's backward
        local last bstep
        last=$(sed -n "s/^ *float \*const L${l}_qkv = .*; live [0-9]*\.\.\([0-9]*\) \*\/$/\1/p" "$f" | head -1)
        bstep=$(sed -n "s/^ *\/\* step \([0-9]*\), L${l} attn: attention backward.*/\1/p" "$f" | head -1)
        echo "layer $l: fp32 qkv live until step $last, backward at step $bstep"
        [ -n "$last" ] && [ -n "$bstep" ] && [ "$last" -lt "$bstep" ] ||
            { echo "layer $l: the fp32 qkv lives into the backward"; return 1; }
        l=$((l + 1))
    done
    [ "$l" -gt 0 ] || { echo "no trc_attn_cudnn call in $f"; return 1; }
}
cus_settings() { # the generated build.ninja's cuDNN part: the default object (asked of tessgen's build.ninja), or
    # TESS_SDPA_OBJ with no rule; TESS_CUDNN_LIBS on the class links only; a cuBLAS spec has none of it
    local dir="$WORK/cus_set" b
    cu_spec cus_set 1 1 'backends = { "cpu", "cuda" }, mode = "train", dtype = "bf16", attention = "cudnn",' >"$dir.lua" &&
        env -u TESS_SDPA_OBJ -u TESS_CUDNN_LIBS bin/tessgen "$dir.lua" -o "$dir" --quiet || return 1
    b=$dir/build.ninja
    grep -qx 'sdpa_obj = $tessroot/build/cuda/trc_sdpa.o' "$b" && grep -qx 'cudnn_libs = -l:libcudnn.so.9' "$b" &&
        grep -qx '  command = ninja -C $tessroot build/cuda/trc_sdpa.o' "$b" && grep -qx '  restat = 1' "$b" &&
        grep -qx 'build obj-cuda/rt/trc_attn_cudnn.o: nvcc $tessroot/runtime/cuda/trc_attn_cudnn.cu' "$b" &&
        [ "$(grep -c '^  cudalibs = -lcublasLt -lcublas -lm $cudnn_libs -lnvrtc$' "$b")" -eq 1 ] || { echo "default settings"; return 1; }
    TESS_SDPA_OBJ=/opt/x/trc_sdpa.o TESS_CUDNN_LIBS="-L/w/lib -l:libcudnn.so.9 -Xlinker -rpath=/w/lib" \
        bin/tessgen "$dir.lua" -o "$dir" --quiet &&
        grep -qx 'sdpa_obj = /opt/x/trc_sdpa.o' "$b" && ! grep -q 'tess_sdpa' "$b" &&
        grep -qx 'cudnn_libs = -L/w/lib -l:libcudnn.so.9 -Xlinker -rpath=/w/lib' "$b" || { echo "TESS_SDPA_OBJ, TESS_CUDNN_LIBS"; return 1; }
    sed 's/attention = "cudnn"/attention = "cublas"/' "$dir.lua" >"${dir}_cublas.lua" &&
        bin/tessgen "${dir}_cublas.lua" -o "${dir}_cublas" --quiet && ! grep -q 'trc_sdpa\|trc_attn_cudnn\|cudnn_libs' "${dir}_cublas/build.ninja" ||
        { echo "a cuBLAS spec links cuDNN"; return 1; }
}
cus_nvcc_why() { # why the compile check cannot run here, or nothing
    cu_nvcc >/dev/null || { echo "nvcc not found"; return; }
    scripts/cudnn_frontend.sh >/dev/null 2>"$WORK/cus_fe.err" || { head -1 "$WORK/cus_fe.err"; return; }
}
CUS_CHECK="cuda: compile: the cuDNN attention check and microbenchmark (tests/cuda/sdpa_check.cu) for sm_80 and sm_90, -Werror, no spills, linked with build/cuda/trc_sdpa.o and cuDNN"
CUS_COMPILE="cuda: compile: every .cu of the attention = \"cudnn\" bf16 training spec on [2,2,1] for sm_80 and sm_90, -Werror, linked with build/cuda/trc_sdpa.o and cuDNN; no kernel spills"
if wanted "cuda: sdpa" || wanted "$CUS_COMPILE" || wanted "$CUS_CHECK"; then
    if cub_setup >"$WORK/log" 2>&1; then
        if wanted "cuda: sdpa"; then
            for m in 1,1 2,1 mg,2 rc,1; do
                q=${m%,*} d=${m#*,} sl="" name="[${m%,*},${m%,*},${m#*,}]"
                [ "$q" = mg ] && sl='scheme = "megatron", mesh = { p = 2 },' name="megatron p=2"
                # the backward reads the recomputed forward's bf16 QKV, O and statistics
                [ "$q" = rc ] && sl='mesh = { q = 1, d = 1 }, recompute = "full",' name='[1,1,1] with recompute = "full"'
                np=$(case $q in mg) echo 2 ;; rc) echo 1 ;; *) echo $((q * q * d)) ;; esac)
                if cus_generate "$q" "$d" "$sl" >"$WORK/log" 2>&1 && cus_emu "$q" "$d" >>"$WORK/log" 2>&1; then
                    check "cuda: sdpa: attention = \"cudnn\" rank_iI_jJ.cu of $name under the emulation, random order: forward within 1e-3 of the CPU program and 3e-3 of --bf16, dL/dx and gradients within 3e-3, bytes as planned" \
                        cus_run "$q" "$d" "$np" random
                    [ "$q" != rc ] && check "cuda: sdpa: attention = \"cudnn\" rank_iI_jJ.cu of $name: each layer's backward reads the bf16 QKV, O and softmax statistics its training forward kept (no forward computed again), and its QKV GEMMs and bias gradient read cuDNN's bf16 dQ, dK, dV (no fp32 dqkv); the fp32 qkv is not kept; $([ "$q" = 2 ] && echo "it casts the dO a reduce wrote" || echo "the proj input-gradient GEMM writes its bf16 dO (no cast, no fp32 dO)")" \
                        cus_kept "$q" "$d"
                    [ "$q" = 1 ] && check "cuda: sdpa: build.ninja links trc_attn_cudnn.o, the checkout's build/cuda/trc_sdpa.o (asked of tessgen's build.ninja) or TESS_SDPA_OBJ, and TESS_CUDNN_LIBS; a cuBLAS spec links none of them" \
                        cus_settings
                    [ "$q" = 2 ] && check "cuda: sdpa: attention = \"cudnn\" rank_iI_jJ.cu of $name, 5 AdamW steps: replicas bitwise identical" \
                        cus_replicas "$q" "$d"
                else
                    notok "cuda: sdpa: generate $name with attention = \"cudnn\", build its CPU program and the emulation" "$WORK/log"
                fi
            done
        fi
        if wanted "$CUS_COMPILE" || wanted "$CUS_CHECK"; then
            why=$(cus_nvcc_why)
            if [ -z "$why" ] && { [ -f "$WORK/cus_2_1/build.ninja" ] || cus_generate 2 1 >"$WORK/log" 2>&1; }; then
                check "$CUS_COMPILE" cu_compile 2 1 s
                check "$CUS_CHECK" tests/cuda/sdpa_check.sh "$WORK/sdpa_check"
            elif [ -n "$why" ]; then
                ok "$CUS_COMPILE # skip $why"
                ok "$CUS_CHECK # skip $why"
            else
                notok "cuda: compile: generate the attention = \"cudnn\" spec" "$WORK/log"
            fi
        fi
    else
        notok "cuda: sdpa: reference inputs" "$WORK/log"
    fi
fi
