/*
 * tr_launch.c - bin/model (and bin/model-asan, bin/model-cuda): starts the
 * program of this process's rank.
 *
 * Every rank class (i, j) of the mesh is its own executable, bin/<variant>/
 * rank_iI_jJ, holding only that class's code, so a process never loads or
 * relocates the code of the other ranks. The launcher (mpirun, srun, ...)
 * starts p copies of this small program; each reads its rank from the
 * variable its launcher sets, before MPI starts, and replaces itself (execv)
 * with its class's executable, passing the arguments on unchanged. That
 * executable then starts MPI and checks that it got the rank it was built for
 * (tr_main.c), so a launcher this program does not know is caught, never run.
 *
 * Rank variables, the first set and non-empty wins: the one named by
 * TESS_RANK_VAR, then OMPI_COMM_WORLD_RANK (Open MPI), PMIX_RANK (PMIx: mpirun,
 * srun --mpi=pmix), PMI_RANK (MPICH, Intel MPI), SLURM_PROCID (srun),
 * MV2_COMM_WORLD_RANK (MVAPICH). A set value that is not a rank number stops
 * the process (exit 2); it never falls through to the next variable. None: a
 * singleton start, rank 0. TR_LAUNCH_DIR names the variant's directory under
 * bin/.
 *
 * Threads and yield. The launcher, not the run script, owns them, so that a
 * rank started by srun or any other launcher gets the same settings as one
 * started by ./run under mpirun. Before the execv it counts the cores this
 * task may run on (sched_getaffinity) and the tasks of the job on this node
 * (OMPI_COMM_WORLD_LOCAL_SIZE; srun's SLURM_STEP_TASKS_PER_NODE at
 * SLURM_NODEID; MPICH's MPI_LOCALNRANKS; else 1). A task's share is
 * SLURM_CPUS_PER_TASK where Slurm gave each task its cores (srun -c), else its
 * cores divided by the node's tasks, at least 1: OPENBLAS_NUM_THREADS (the
 * GEMMs) and OMP_NUM_THREADS (the CPU kernels' OpenMP threads, tr_vec.h) are
 * set to it (CPU programs), so a rank never runs more threads than its cores
 * (the two pools take turns: a kernel and a GEMM never run at once), and
 * OMP_WAIT_POLICY=passive, so OpenMP's threads sleep after a kernel instead
 * of spinning (libgomp's default) on the cores the next GEMM's OpenBLAS
 * threads need: with spinning, the threaded kernels of a training step took
 * 0.5 s instead of 0.02 s on a loaded 2-core machine, the GEMMs 2x longer
 * (docs/BENCHMARKS.md). With more tasks on the node than cores a task may run on
 * (and no srun -c), OMPI_MCA_mpi_yield_when_idle=1, so a waiting rank yields its
 * core instead of spinning on it (mpirun does that itself only for a job it
 * knows oversubscribes; under srun, Open MPI spins: 200 times slower here). A
 * task bound to fewer cores than the node has tasks cannot be told from an
 * oversubscribed one and also gets it, at a small latency cost. A variable the
 * user set (OPENBLAS_NUM_THREADS or OMP_NUM_THREADS; OMP_WAIT_POLICY; the yield variable) is
 * left as it is; a user's OMP_NUM_THREADS alone also sets OpenBLAS's count
 * (OpenBLAS reads it when OPENBLAS_NUM_THREADS is unset).
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tr.h"

#ifndef TR_LAUNCH_DIR
#define TR_LAUNCH_DIR "cpu"
#endif

/* The rank from the launcher's variable; -1 and *var = NULL when none is set. */
static long rank_from_env(const char **var, const char **bad)
{
    static const char *known[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID",
                                  "MV2_COMM_WORLD_RANK"};
    const char *named = getenv("TESS_RANK_VAR");
    *var = NULL;
    *bad = NULL;
    for (int k = -1; k < (int)(sizeof known / sizeof known[0]); k++) {
        const char *name = k < 0 ? (named && *named ? named : NULL) : known[k];
        const char *v = name ? getenv(name) : NULL;
        if (!v || !*v)
            continue;
        char *end;
        errno = 0;
        long r = strtol(v, &end, 10);
        *var = name;
        if (errno || *end || r < 0 || r > INT_MAX) {
            *bad = v;
            return -1;
        }
        return r;
    }
    return -1;
}

/* A variable's value as a number >= 1, or 0 when unset, empty or not such a number. */
static long env_count(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    return errno || *end || n < 1 ? 0 : n;
}

/* srun's SLURM_STEP_TASKS_PER_NODE ("4", "2(x3),1": tasks of nodes 0, 1, ... in order) at node `node`;
 * 0 when it does not parse or names fewer nodes. */
static long slurm_tasks_on_node(const char *list, long node)
{
    const char *c = list;
    while (*c) {
        char *end;
        long tasks = strtol(c, &end, 10), times = 1;
        if (end == c || tasks < 1)
            return 0;
        c = end;
        if (strncmp(c, "(x", 2) == 0) {
            times = strtol(c + 2, &end, 10);
            if (end == c + 2 || times < 1 || *end != ')')
                return 0;
            c = end + 1;
        }
        if (node < times)
            return tasks;
        node -= times;
        if (*c == ',')
            c++;
        else if (*c)
            return 0;
    }
    return 0;
}

/* How many tasks of the job run on this node, as the launcher says; 1 when it says nothing. */
static long local_tasks(void)
{
    long n = env_count("OMPI_COMM_WORLD_LOCAL_SIZE");
    const char *per_node = getenv("SLURM_STEP_TASKS_PER_NODE");
    const char *node = getenv("SLURM_NODEID");
    if (!n && per_node && node) {
        char *end;
        long id = strtol(node, &end, 10);
        if (*node && !*end && id >= 0)
            n = slurm_tasks_on_node(per_node, id);
    }
    if (!n)
        n = env_count("MPI_LOCALNRANKS");
    return n ? n : 1;
}

/* OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and OMPI_MCA_mpi_yield_when_idle from the cores this task has (top of file). */
static void set_threads(void)
{
    cpu_set_t set;
    long cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (cores < 1)
        return; /* nothing known: leave the libraries their defaults */
    long tasks = local_tasks(), per_task = env_count("SLURM_CPUS_PER_TASK");
    long share = per_task ? (per_task < cores ? per_task : cores) : cores / tasks;
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", share > 1 ? share : 1);
    if (strcmp(TR_LAUNCH_DIR, "cuda") != 0) {
        /* OpenBLAS follows OMP_NUM_THREADS when OPENBLAS_NUM_THREADS is unset: the user's OMP value rules both */
        if (!getenv("OPENBLAS_NUM_THREADS") && !getenv("OMP_NUM_THREADS"))
            setenv("OPENBLAS_NUM_THREADS", buf, 1);
        if (!getenv("OMP_NUM_THREADS"))
            setenv("OMP_NUM_THREADS", buf, 1); /* the kernels' OpenMP threads: the same share */
        /* OpenMP's threads sleep between kernels instead of spinning on the cores the GEMMs run on next */
        if (!getenv("OMP_WAIT_POLICY"))
            setenv("OMP_WAIT_POLICY", "passive", 1);
    }
    if (!per_task && tasks > cores && !getenv("OMPI_MCA_mpi_yield_when_idle"))
        setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *var, *bad;
    long rank = rank_from_env(&var, &bad);
    if (bad) {
        fprintf(stderr,
                "%s: %s=%s is not a rank number (a whole number, 0 or more); the rank is read from the first "
                "of TESS_RANK_VAR's variable, OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID, "
                "MV2_COMM_WORLD_RANK that is set: unset %s or name your launcher's variable with TESS_RANK_VAR\n",
                argv[0], var, bad, var);
        return 2;
    }
    if (rank < 0)
        rank = 0; /* no launcher: one process, which the program itself checks against the mesh */
    int i, j;
    if (tr_model.scheme == 1) { /* megatron: rank r runs class (r, 0); an out-of-range rank: the program says so */
        i = (int)(rank % tr_model.p); /* sj is 0 here: the tesseract formula below would divide by it */
        j = 0;
    } else {
        i = (int)((rank / tr_model.si) % tr_model.q);
        j = (int)((rank / tr_model.sj) % tr_model.q);
    }

    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "%s: cannot find this program's directory (/proc/self/exe): %s\n", argv[0], strerror(errno));
        return 2;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    if (tr_model.pp > 1) /* pipeline stages: stage-major, p / pp ranks each (docs/TRAINING.md "Pipeline stages") */
        snprintf(path, sizeof path, "%s/%s/rank_s%d_i%d_j%d", exe, TR_LAUNCH_DIR,
                 (int)(rank / (tr_model.p / tr_model.pp)), i, j);
    else
        snprintf(path, sizeof path, "%s/%s/rank_i%d_j%d", exe, TR_LAUNCH_DIR, i, j);
    set_threads();
    execv(path, argv);
    fprintf(stderr,
            "%s: rank %ld (%s) cannot start %s, the program of the ranks (i=%d, j=%d, k): %s; build it with "
            "ninja -C <the output directory>%s\n",
            argv[0], rank, var ? var : "no launcher variable: rank 0", path, i, j, strerror(errno),
            strcmp(TR_LAUNCH_DIR, "cpu") ? (strcmp(TR_LAUNCH_DIR, "asan") ? " cuda" : " asan") : "");
    return 2;
}
