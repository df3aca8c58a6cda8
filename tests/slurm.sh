# tests/slurm.sh - sourced by tests/run.sh: bin/model, the launcher, and the
# generated programs under Slurm. It builds two small 4-rank programs of its
# own (mesh [2,2,1]: a forward one and a training one).
#   stub    bin/model beside stub rank programs (shell scripts that print the
#           environment they were started with), so no MPI and no Slurm is
#           needed: the BLAS threads and Open MPI's yield it derives from the
#           cores a task has and the tasks on its node; the order it reads the
#           rank variables in, and a set one that is not a number refused
SL="$WORK/slurm"

slurm_spec() { # name mode
    cat <<SPEC
return {
  name = "$1", mode = "$2",
  mesh = { q = 2, d = 1 },
  model = { layers = 1, hidden = 24, heads = 2, ffn = 48, seq = 4, batch = 4, eps = 1e-5 },
SPEC
    [ "$2" = train ] && echo '  optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01 },'
    echo "}"
}

slurm_build() { # name mode -> $SL/name built
    mkdir -p "$SL" && slurm_spec "$1" "$2" >"$SL/$1.lua" && bin/tessgen "$SL/$1.lua" -o "$SL/$1" --quiet &&
        ninja -C "$SL/$1" >/dev/null
}

# $SL/stub: a copy of the forward program's launcher, with a stub for each rank class that prints its
# name, the thread and yield variables it got and its arguments
stub_setup() {
    mkdir -p "$SL/stub/cpu" && cp "$SL/fwd/bin/model" "$SL/stub/model" || return 1
    local c
    for c in rank_i0_j0 rank_i0_j1 rank_i1_j0 rank_i1_j1; do
        printf '#!/bin/sh\necho "%s threads=${OPENBLAS_NUM_THREADS-unset} yield=${OMPI_MCA_mpi_yield_when_idle-unset} args=$*"\n' \
            "$c" >"$SL/stub/cpu/$c" && chmod +x "$SL/stub/cpu/$c" || return 1
    done
}

# stub_says WANT CPUS [VAR=VALUE...]: the stub launcher, run with only these variables on the cores CPUS
# (taskset), prints exactly WANT and exits 0
stub_says() {
    local want=$1 cpus=$2
    shift 2
    env -i PATH="$PATH" "$@" taskset -c "$cpus" "$SL/stub/model" --seed 5 >"$WORK/stub.out" 2>&1
    local rc=$?
    cat "$WORK/stub.out"
    [ $rc -eq 0 ] || { echo "exit $rc"; return 1; }
    [ "$(cat "$WORK/stub.out")" = "$want" ] || { echo "want: $want"; return 1; }
}

# stub_refused WANT [VAR=VALUE...]: the stub launcher exits 2 with one line holding WANT and runs no rank program
stub_refused() {
    local want=$1
    shift
    env -i PATH="$PATH" "$@" "$SL/stub/model" --seed 5 >"$WORK/stub.out" 2>&1
    local rc=$?
    cat "$WORK/stub.out"
    [ $rc -eq 2 ] || { echo "exit $rc, want 2"; return 1; }
    grep -qF -- "$want" "$WORK/stub.out" || { echo "message lacks: $want"; return 1; }
    [ "$(wc -l <"$WORK/stub.out")" -eq 1 ] || { echo "more than one line (a rank program ran?)"; return 1; }
}

if wanted "slurm"; then
    if slurm_build fwd infer >"$WORK/log" 2>&1 && stub_setup >>"$WORK/log" 2>&1; then
        if [ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ]; then
            check "slurm: stub: a rank alone on its node with 2 cores gets 2 BLAS threads and no yield" \
                stub_says "rank_i0_j0 threads=2 yield=unset args=--seed 5" 0,1 SLURM_PROCID=0 \
                SLURM_STEP_TASKS_PER_NODE=1 SLURM_NODEID=0
            check "slurm: stub: 4 srun tasks sharing 2 cores get 1 BLAS thread and yield when idle" \
                stub_says "rank_i1_j0 threads=1 yield=1 args=--seed 5" 0,1 SLURM_PROCID=2 \
                SLURM_STEP_TASKS_PER_NODE=4 SLURM_NODEID=0
            check "slurm: stub: srun's tasks per node are read at this task's node (2(x2),1)" \
                stub_says "rank_i0_j1 threads=1 yield=unset args=--seed 5" 0,1 SLURM_PROCID=1 \
                SLURM_STEP_TASKS_PER_NODE="2(x2),1" SLURM_NODEID=1
            check "slurm: stub: the last node of 2(x2),1 has one task, which gets both cores" \
                stub_says "rank_i0_j0 threads=2 yield=unset args=--seed 5" 0,1 SLURM_PROCID=4 \
                SLURM_STEP_TASKS_PER_NODE="2(x2),1" SLURM_NODEID=2
            check "slurm: stub: srun -c 2 gives each task its 2 cores and no yield" \
                stub_says "rank_i1_j1 threads=2 yield=unset args=--seed 5" 0,1 SLURM_PROCID=3 \
                SLURM_STEP_TASKS_PER_NODE=4 SLURM_NODEID=0 SLURM_CPUS_PER_TASK=2
        else
            ok "slurm: stub: BLAS threads from 2 cores # skip this machine has one core"
        fi
        check "slurm: stub: 4 mpirun ranks on 1 core get 1 BLAS thread and yield when idle" \
            stub_says "rank_i0_j1 threads=1 yield=1 args=--seed 5" 0 OMPI_COMM_WORLD_RANK=1 \
            OMPI_COMM_WORLD_LOCAL_SIZE=4
        check "slurm: stub: the user's OPENBLAS_NUM_THREADS and yield setting are kept" \
            stub_says "rank_i0_j1 threads=3 yield=0 args=--seed 5" 0 OMPI_COMM_WORLD_RANK=1 \
            OMPI_COMM_WORLD_LOCAL_SIZE=4 OPENBLAS_NUM_THREADS=3 OMPI_MCA_mpi_yield_when_idle=0
        check "slurm: stub: with OMP_NUM_THREADS set no OPENBLAS_NUM_THREADS is added" \
            stub_says "rank_i0_j1 threads=unset yield=1 args=--seed 5" 0 OMPI_COMM_WORLD_RANK=1 \
            OMPI_COMM_WORLD_LOCAL_SIZE=4 OMP_NUM_THREADS=2
        # the rank variables' order (mesh [2,2,1], placement row: rank r runs class (r / 2, r % 2))
        check "slurm: stub: PMIX_RANK is read before SLURM_PROCID" \
            stub_says "rank_i1_j1 threads=1 yield=unset args=--seed 5" 0 PMIX_RANK=3 SLURM_PROCID=1
        check "slurm: stub: OMPI_COMM_WORLD_RANK is read before PMIX_RANK" \
            stub_says "rank_i1_j0 threads=1 yield=unset args=--seed 5" 0 OMPI_COMM_WORLD_RANK=2 PMIX_RANK=3
        check "slurm: stub: PMI_RANK is read before SLURM_PROCID" \
            stub_says "rank_i0_j1 threads=1 yield=unset args=--seed 5" 0 PMI_RANK=1 SLURM_PROCID=3
        check "slurm: stub: the variable TESS_RANK_VAR names is read before all others" \
            stub_says "rank_i0_j1 threads=1 yield=unset args=--seed 5" 0 TESS_RANK_VAR=MY_RANK MY_RANK=1 \
            OMPI_COMM_WORLD_RANK=3 PMIX_RANK=3
        check "slurm: stub: an empty PMIX_RANK is passed over for SLURM_PROCID" \
            stub_says "rank_i1_j0 threads=1 yield=unset args=--seed 5" 0 PMIX_RANK= SLURM_PROCID=2
        check "slurm: stub: SLURM_PROCID alone gives the rank" \
            stub_says "rank_i1_j1 threads=1 yield=unset args=--seed 5" 0 SLURM_PROCID=3
        check "slurm: stub: no rank variable is a one-process start, rank 0" \
            stub_says "rank_i0_j0 threads=1 yield=unset args=--seed 5" 0
        for bad in abc 3x -1 99999999999; do
            check "slurm: stub: PMIX_RANK=$bad is refused naming it, not passed over for SLURM_PROCID" \
                stub_refused "PMIX_RANK=$bad is not a rank number" PMIX_RANK="$bad" SLURM_PROCID=1
        done
        check "slurm: stub: a bad rank in TESS_RANK_VAR's variable is refused with the order and the fix" \
            stub_refused "MY_RANK=one is not a rank number (a whole number, 0 or more); the rank is read from the first of TESS_RANK_VAR's variable, OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID, MV2_COMM_WORLD_RANK that is set: unset MY_RANK or name your launcher's variable with TESS_RANK_VAR" \
            TESS_RANK_VAR=MY_RANK MY_RANK=one PMIX_RANK=1
    else
        notok "slurm: generate and build the 4-rank programs and the stub launcher" "$WORK/log"
    fi
fi
