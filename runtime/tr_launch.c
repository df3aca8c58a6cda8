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
 * Rank variables, first found wins: the one named by TESS_RANK_VAR, then
 * OMPI_COMM_WORLD_RANK (Open MPI), PMIX_RANK (PMIx), PMI_RANK (MPICH, Intel
 * MPI), SLURM_PROCID (srun), MV2_COMM_WORLD_RANK (MVAPICH). None: a singleton
 * start, rank 0. TR_LAUNCH_DIR names the variant's directory under bin/.
 */
#include <errno.h>
#include <limits.h>
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

int main(int argc, char **argv)
{
    (void)argc;
    const char *var, *bad;
    long rank = rank_from_env(&var, &bad);
    if (bad) {
        fprintf(stderr, "%s: %s=%s is not a rank number\n", argv[0], var, bad);
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
    snprintf(path, sizeof path, "%s/%s/rank_i%d_j%d", exe, TR_LAUNCH_DIR, i, j);
    execv(path, argv);
    fprintf(stderr,
            "%s: rank %ld (%s) cannot start %s, the program of the ranks (i=%d, j=%d, k): %s; build it with "
            "ninja -C <the output directory>%s\n",
            argv[0], rank, var ? var : "no launcher variable: rank 0", path, i, j, strerror(errno),
            strcmp(TR_LAUNCH_DIR, "cpu") ? (strcmp(TR_LAUNCH_DIR, "asan") ? " cuda" : " asan") : "");
    return 2;
}
