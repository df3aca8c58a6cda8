# tests/slurm.sh - sourced by tests/run.sh: bin/model, the launcher, and the
# generated programs under Slurm. It builds two small 4-rank programs of its
# own (mesh [2,2,1]: a forward one and a training one).
#   stub    bin/model beside stub rank programs (shell scripts that print the
#           environment they were started with), so no MPI and no Slurm is
#           needed: the BLAS threads and Open MPI's yield it derives from the
#           cores a task has and the tasks on its node; the order it reads the
#           rank variables in, and a set one that is not a number refused
#   slurm   a single-node Slurm of its own: munged, slurmctld and slurmd
#           started by PID with config, spool, state and logs in a temporary
#           directory (SLURM_CONF; free ports asked of the kernel), stopped by
#           PID. Under srun --mpi=pmix: the 4-rank forward (planned bytes) and a
#           2-step training run (as TESS_LAUNCHER="srun --mpi=pmix -n 4" ./run,
#           the form the docs print) bitwise equal to the same runs under
#           mpirun; each rank's BLAS threads and yield; an sbatch job; a wrong
#           task count refused naming the srun command. As root it installs
#           the packages first (scripts/deps.sh --slurm: slurmctld slurmd
#           munge). Without root, without the packages or without free ports
#           each check prints "ok - ... # skip <why>".
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
# name, the thread (BLAS, OpenMP), yield and OpenMP wait variables it got and its arguments
stub_setup() {
    mkdir -p "$SL/stub/cpu" && cp "$SL/fwd/bin/model" "$SL/stub/model" || return 1
    local c
    for c in rank_i0_j0 rank_i0_j1 rank_i1_j0 rank_i1_j1; do
        printf '#!/bin/sh\necho "%s threads=${OPENBLAS_NUM_THREADS-unset} omp=${OMP_NUM_THREADS-unset} yield=${OMPI_MCA_mpi_yield_when_idle-unset} wait=${OMP_WAIT_POLICY-unset} args=$*"\n' \
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

# run_binds WANT CORES [VAR=VALUE...]: the forward program's run script, with an mpirun that prints its
# arguments and a node of CORES cores (a getconf that says so), passes --bind-to none to mpirun (WANT=unbound)
# or not (WANT=bound)
run_binds() {
    local want=$1 cores=$2 fake="$SL/fakebin"
    shift 2
    mkdir -p "$fake" &&
        printf '#!/bin/sh\necho "mpirun $*"\n' >"$fake/mpirun" &&
        printf '#!/bin/sh\necho %s\n' "$cores" >"$fake/getconf" && chmod +x "$fake/mpirun" "$fake/getconf" || return 1
    env -i PATH="$fake:$PATH" "$@" "$SL/fwd/run" --seed 5 >"$WORK/binds.out" 2>&1 || { cat "$WORK/binds.out"; return 1; }
    cat "$WORK/binds.out"
    case "$want:$(grep -c -- '--bind-to none' "$WORK/binds.out")" in
    unbound:1 | bound:0) return 0 ;;
    *) echo "want $want"; return 1 ;;
    esac
}

run_binds_one_thread() { run_binds bound 8 OMP_NUM_THREADS=1 && run_binds bound 4; }

if wanted "slurm"; then
    if slurm_build fwd infer >"$WORK/log" 2>&1 && stub_setup >>"$WORK/log" 2>&1; then
        if [ "$(getconf _NPROCESSORS_ONLN)" -ge 2 ]; then
            check "slurm: stub: a rank alone on its node with 2 cores gets 2 BLAS threads and no yield" \
                stub_says "rank_i0_j0 threads=2 omp=2 yield=unset wait=passive args=--seed 5" 0,1 SLURM_PROCID=0 \
                SLURM_STEP_TASKS_PER_NODE=1 SLURM_NODEID=0
            check "slurm: stub: 4 srun tasks sharing 2 cores get 1 BLAS thread and yield when idle" \
                stub_says "rank_i1_j0 threads=1 omp=1 yield=1 wait=passive args=--seed 5" 0,1 SLURM_PROCID=2 \
                SLURM_STEP_TASKS_PER_NODE=4 SLURM_NODEID=0
            check "slurm: stub: srun's tasks per node are read at this task's node (2(x2),1)" \
                stub_says "rank_i0_j1 threads=1 omp=1 yield=unset wait=passive args=--seed 5" 0,1 SLURM_PROCID=1 \
                SLURM_STEP_TASKS_PER_NODE="2(x2),1" SLURM_NODEID=1
            check "slurm: stub: the last node of 2(x2),1 has one task, which gets both cores" \
                stub_says "rank_i0_j0 threads=2 omp=2 yield=unset wait=passive args=--seed 5" 0,1 SLURM_PROCID=4 \
                SLURM_STEP_TASKS_PER_NODE="2(x2),1" SLURM_NODEID=2
            check "slurm: stub: srun -c 2 gives each task its 2 cores and no yield" \
                stub_says "rank_i1_j1 threads=2 omp=2 yield=unset wait=passive args=--seed 5" 0,1 SLURM_PROCID=3 \
                SLURM_STEP_TASKS_PER_NODE=4 SLURM_NODEID=0 SLURM_CPUS_PER_TASK=2
        else
            ok "slurm: stub: BLAS threads from 2 cores # skip this machine has one core"
        fi
        check "slurm: stub: 4 mpirun ranks on 1 core get 1 BLAS thread and yield when idle" \
            stub_says "rank_i0_j1 threads=1 omp=1 yield=1 wait=passive args=--seed 5" 0 OMPI_COMM_WORLD_RANK=1 \
            OMPI_COMM_WORLD_LOCAL_SIZE=4
        check "slurm: stub: the user's OPENBLAS_NUM_THREADS and yield setting are kept, OpenMP gets the core share" \
            stub_says "rank_i0_j1 threads=3 omp=1 yield=0 wait=passive args=--seed 5" 0 OMPI_COMM_WORLD_RANK=1 \
            OMPI_COMM_WORLD_LOCAL_SIZE=4 OPENBLAS_NUM_THREADS=3 OMPI_MCA_mpi_yield_when_idle=0
        check "slurm: stub: with OMP_NUM_THREADS set it is kept and no OPENBLAS_NUM_THREADS is added" \
            stub_says "rank_i0_j1 threads=unset omp=2 yield=1 wait=passive args=--seed 5" 0 OMPI_COMM_WORLD_RANK=1 \
            OMPI_COMM_WORLD_LOCAL_SIZE=4 OMP_NUM_THREADS=2
        check "slurm: run: 4 ranks on 8 cores are left unbound so that each rank's 2 threads can spread" \
            run_binds unbound 8
        check "slurm: run: the user's OMP_NUM_THREADS=2 for 4 ranks on 4 cores leaves them unbound (not 2 threads on 1 core)" \
            run_binds unbound 4 OMP_NUM_THREADS=2
        check "slurm: run: the user's OPENBLAS_NUM_THREADS=2 leaves 4 ranks on 4 cores unbound" \
            run_binds unbound 4 OPENBLAS_NUM_THREADS=2
        check "slurm: run: OPENBLAS_NUM_THREADS=1 alone still gives OpenMP 2 threads a rank on 8 cores: unbound" \
            run_binds unbound 8 OPENBLAS_NUM_THREADS=1
        check "slurm: run: one thread a rank (OMP_NUM_THREADS=1 on 8 cores, or 4 ranks on 4) keeps mpirun's binding" \
            run_binds_one_thread
        check "slurm: stub: the user's OMP_WAIT_POLICY is kept" \
            stub_says "rank_i0_j1 threads=1 omp=1 yield=1 wait=active args=--seed 5" 0 OMPI_COMM_WORLD_RANK=1 \
            OMPI_COMM_WORLD_LOCAL_SIZE=4 OMP_WAIT_POLICY=active
        # the rank variables' order (mesh [2,2,1], placement row: rank r runs class (r / 2, r % 2))
        check "slurm: stub: PMIX_RANK is read before SLURM_PROCID" \
            stub_says "rank_i1_j1 threads=1 omp=1 yield=unset wait=passive args=--seed 5" 0 PMIX_RANK=3 SLURM_PROCID=1
        check "slurm: stub: OMPI_COMM_WORLD_RANK is read before PMIX_RANK" \
            stub_says "rank_i1_j0 threads=1 omp=1 yield=unset wait=passive args=--seed 5" 0 OMPI_COMM_WORLD_RANK=2 PMIX_RANK=3
        check "slurm: stub: PMI_RANK is read before SLURM_PROCID" \
            stub_says "rank_i0_j1 threads=1 omp=1 yield=unset wait=passive args=--seed 5" 0 PMI_RANK=1 SLURM_PROCID=3
        check "slurm: stub: the variable TESS_RANK_VAR names is read before all others" \
            stub_says "rank_i0_j1 threads=1 omp=1 yield=unset wait=passive args=--seed 5" 0 TESS_RANK_VAR=MY_RANK MY_RANK=1 \
            OMPI_COMM_WORLD_RANK=3 PMIX_RANK=3
        check "slurm: stub: an empty PMIX_RANK is passed over for SLURM_PROCID" \
            stub_says "rank_i1_j0 threads=1 omp=1 yield=unset wait=passive args=--seed 5" 0 PMIX_RANK= SLURM_PROCID=2
        check "slurm: stub: SLURM_PROCID alone gives the rank" \
            stub_says "rank_i1_j1 threads=1 omp=1 yield=unset wait=passive args=--seed 5" 0 SLURM_PROCID=3
        check "slurm: stub: no rank variable is a one-process start, rank 0" \
            stub_says "rank_i0_j0 threads=1 omp=1 yield=unset wait=passive args=--seed 5" 0
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

# ---- a Slurm of the test's own ------------------------------------------------------------------------------
SLURM_CHECKS="srun --mpi=pmix runs the 4-rank forward bitwise equal to mpirun, planned bytes
TESS_LAUNCHER=\"srun --mpi=pmix -n 4\" ./run trains 2 steps bitwise equal to mpirun (losses, weights, output)
under srun each rank gets its node's share of BLAS threads and the yield
an sbatch job runs the forward bitwise equal to mpirun
srun with a wrong task count is refused naming both numbers and the srun command"
SLD=""
SLURM_PIDS=""

# why this machine cannot run a Slurm of its own, or nothing
slurm_cannot() {
    [ "$(id -u)" = 0 ] || { echo "needs root (slurmd starts the tasks)"; return; }
    local b
    for b in munged slurmctld slurmd srun sbatch sinfo; do
        [ -x "/usr/sbin/$b" ] || command -v "$b" >/dev/null 2>&1 ||
            { echo "$b not installed (as root: scripts/deps.sh --slurm installs slurmctld slurmd munge)"; return; }
    done
    command -v taskset >/dev/null 2>&1 || echo "taskset not installed"
}

slurm_bin() { if [ -x "/usr/sbin/$1" ]; then echo "/usr/sbin/$1"; else command -v "$1"; fi; }

# slurm_start: $SLD holds munge's key and socket, slurm.conf, state, spool and logs; the three daemons run
# in the foreground of background jobs, so $! is each one's PID
slurm_start() {
    SLD=$(mktemp -d /tmp/tessgen-slurm.XXXXXX) && chmod 755 "$SLD" || return 1 # munged: socket path o+x
    mkdir -p "$SLD/munge" "$SLD/state" "$SLD/spool" "$SLD/log" || return 1
    head -c 128 /dev/urandom >"$SLD/munge/munge.key" && chmod 600 "$SLD/munge/munge.key" || return 1
    local ports host cpus i
    ports=$("$PY" -c 'import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))') || { echo "no free ports"; return 2; }
    host=$(hostname -s)
    cpus=$(getconf _NPROCESSORS_ONLN)
    [ "$cpus" -lt 4 ] && cpus=4 # 4 tasks fit one node; config_overrides lets slurmd declare more than it has
    cat >"$SLD/slurm.conf" <<CONF
ClusterName=tessgen
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${ports% *}
SlurmdPort=${ports#* }
AuthType=auth/munge
AuthInfo=socket=$SLD/munge/socket
CredType=cred/munge
StateSaveLocation=$SLD/state
SlurmdSpoolDir=$SLD/spool
SlurmctldPidFile=$SLD/slurmctld.pid
SlurmdPidFile=$SLD/slurmd.pid
SlurmctldLogFile=$SLD/log/slurmctld.log
SlurmdLogFile=$SLD/log/slurmd.log
PlugStackConfig=$SLD/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=tessgen Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
    : >"$SLD/plugstack.conf"
    "$(slurm_bin munged)" -F --socket="$SLD/munge/socket" --key-file="$SLD/munge/munge.key" \
        --log-file="$SLD/log/munged.log" --pid-file="$SLD/munge/munged.pid" --seed-file="$SLD/munge/seed" \
        >"$SLD/log/munged.out" 2>&1 &
    SLURM_PIDS="$!"
    for i in $(seq 50); do [ -S "$SLD/munge/socket" ] && break; sleep 0.1; done
    [ -S "$SLD/munge/socket" ] || { cat "$SLD/log/munged.out"; return 1; }
    SLURM_CONF="$SLD/slurm.conf" "$(slurm_bin slurmctld)" -D -i >"$SLD/log/slurmctld.out" 2>&1 &
    SLURM_PIDS="$SLURM_PIDS $!"
    SLURM_CONF="$SLD/slurm.conf" "$(slurm_bin slurmd)" -D >"$SLD/log/slurmd.out" 2>&1 &
    SLURM_PIDS="$SLURM_PIDS $!"
    for i in $(seq 100); do
        [ "$(SLURM_CONF="$SLD/slurm.conf" sinfo -h -o %T 2>/dev/null)" = idle ] && return 0
        sleep 0.1
    done
    tail -5 "$SLD"/log/*.out "$SLD"/log/*.log
    return 1
}

# slurm_stop: the three daemons, by the PIDs slurm_start recorded, newest first; then their directory
slurm_stop() {
    local pid
    for pid in $(echo "$SLURM_PIDS" | tr ' ' '\n' | tac); do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    done
    SLURM_PIDS=""
    [ -n "$SLD" ] && rm -rf "$SLD"
    SLD=""
}

sl() { SLURM_CONF="$SLD/slurm.conf" "$@"; }

slurm_forward() {
    local f="$SL/fwd"
    rm -f "$SL/y_mpi.npy" "$SL/y_srun.npy"
    "$f/run" --seed 5 --output "$SL/y_mpi.npy" --bytes --quiet &&
        sl srun --mpi=pmix -n 4 "$f/bin/model" --seed 5 --output "$SL/y_srun.npy" --bytes |
        tee "$WORK/srun.out" && grep -q "bytes: every rank moved exactly the planned bytes" "$WORK/srun.out" &&
        cmp "$SL/y_mpi.npy" "$SL/y_srun.npy"
}

slurm_train() {
    local t="$SL/train" m
    for m in mpi srun; do
        rm -f "$SL/tw_$m.st" "$SL/ty_$m.npy"
        if [ $m = mpi ]; then
            "$t/run" --seed 5 --steps 2 --weights-out "$SL/tw_$m.st" --output "$SL/ty_$m.npy" >"$SL/tl_$m.txt"
        else
            TESS_LAUNCHER="srun --mpi=pmix -n 4" sl "$t/run" --seed 5 --steps 2 --weights-out "$SL/tw_$m.st" \
                --output "$SL/ty_$m.npy" >"$SL/tl_$m.txt"
        fi || { cat "$SL/tl_$m.txt"; echo "the $m run failed"; return 1; }
        grep '^step' "$SL/tl_$m.txt" | sed 's/ tok\/s.*//' >"$SL/tl_$m.steps"
    done
    cat "$SL/tl_srun.txt"
    [ "$(wc -l <"$SL/tl_srun.steps")" -eq 2 ] || { echo "want 2 step lines"; return 1; }
    cmp "$SL/tl_mpi.steps" "$SL/tl_srun.steps" && cmp "$SL/tw_mpi.st" "$SL/tw_srun.st" &&
        cmp "$SL/ty_mpi.npy" "$SL/ty_srun.npy"
}

# the stub launcher under a real srun: every task prints what it was given
slurm_threads() {
    local cores share want r
    cores=$(nproc) # task/none: each task may run on every core the node has
    share=$((cores / 4))
    [ $share -lt 1 ] && share=1
    want=""
    for r in 0 1 2 3; do
        want="$want$(printf 'rank_i%d_j%d threads=%d omp=%d yield=%s wait=passive args=--seed 5' $((r / 2)) $((r % 2)) $share $share \
            "$([ 4 -gt "$cores" ] && echo 1 || echo unset)")
"
    done
    sl srun --mpi=pmix -n 4 -l "$SL/stub/model" --seed 5 | sort | sed 's/^[0-9]*: //' >"$WORK/stub.out"
    cat "$WORK/stub.out"
    [ "$(cat "$WORK/stub.out")" = "$(printf '%s' "$want")" ] || { printf 'want:\n%s' "$want"; return 1; }
}

slurm_sbatch() {
    rm -f "$SL/y_batch.npy"
    printf '#!/bin/sh\nsrun --mpi=pmix -n 4 %s/bin/model --seed 5 --output %s/y_batch.npy --quiet\n' "$SL/fwd" "$SL" \
        >"$SL/job.sh"
    sl sbatch --wait -n 4 -o "$SL/job.out" "$SL/job.sh" || { cat "$SL/job.out"; return 1; }
    cat "$SL/job.out"
    cmp "$SL/y_mpi.npy" "$SL/y_batch.npy"
}

slurm_wrong_count() {
    sl srun --mpi=pmix -n 3 "$SL/fwd/bin/model" --seed 5 --quiet >"$WORK/ws.out" 2>&1
    local rc=$?
    cat "$WORK/ws.out"
    [ $rc -ne 0 ] || { echo "exit 0"; return 1; }
    grep -qF "built for mesh [2,2,1] = 4 ranks but was started with 3 ranks" "$WORK/ws.out" &&
        grep -qF "srun --mpi=pmix -n 4 $SL/fwd/bin/model" "$WORK/ws.out"
}

slurm_skip_all() { # why
    local c
    while IFS= read -r c; do ok "slurm: $c # skip $1"; done <<<"$SLURM_CHECKS"
}

if wanted "slurm"; then
    # as root, install what is missing (as tests/inspect.sh does for chromium); CI runs as root
    [ "$(id -u)" = 0 ] && ! scripts/deps.sh --slurm >"$WORK/log" 2>&1 && cat "$WORK/log"
    why=$(slurm_cannot)
    if [ ! -x "$SL/stub/model" ]; then
        : # the build failed, reported above
    elif [ -n "$why" ]; then
        slurm_skip_all "$why"
    elif ! slurm_build train train >"$WORK/log" 2>&1; then
        notok "slurm: generate and build the 4-rank training program" "$WORK/log"
    else
        slurm_start >"$WORK/log" 2>&1
        rc=$?
        trap 'slurm_stop; rm -rf "$WORK"' EXIT
        if [ $rc -eq 2 ]; then
            slurm_skip_all "$(tail -1 "$WORK/log")"
        elif [ $rc -ne 0 ]; then
            notok "slurm: start munged, slurmctld and slurmd" "$WORK/log"
        else
            ok "slurm: munged, slurmctld and slurmd started from a temporary SLURM_CONF"
            check "slurm: srun --mpi=pmix runs the 4-rank forward bitwise equal to mpirun, planned bytes" slurm_forward
            check "slurm: TESS_LAUNCHER=\"srun --mpi=pmix -n 4\" ./run trains 2 steps bitwise equal to mpirun (losses, weights, output)" slurm_train
            check "slurm: under srun each rank gets its node's share of BLAS threads and the yield" slurm_threads
            check "slurm: an sbatch job runs the forward bitwise equal to mpirun" slurm_sbatch
            check "slurm: srun with a wrong task count is refused naming both numbers and the srun command" \
                slurm_wrong_count
        fi
        slurm_stop
        trap 'rm -rf "$WORK"' EXIT
    fi
fi
