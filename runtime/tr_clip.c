/*
 * tr_clip.c - the global gradient norm and clipping by it (tr_clip.h). The partial sums are
 * gathered and added in rank order on rank 0 rather than by MPI_Allreduce, which promises neither
 * the same bits on every member nor the same order from run to run.
 */
#include "tr_clip.h"

#include <math.h>
#include <stdlib.h>

/* Does this rank hold the canonical copy of pr (the one counted once)? As tr_gather.c decides. */
int tr_clip_canonical(const tr_rank_desc *d, const tr_param *pr)
{
    /* pipeline stages: the last stage's copy of the tied wte is not counted (stage 0's is, once) */
    return (pr->replica < 0 || pr->replica >= TR_NGROUPS || d->key[pr->replica] == 0) && !tr_pipe_tied_copy(d, pr);
}

double tr_clip_norm(const tr_rank_desc *d, double canon, double rest, int *finite)
{
    double mine[2] = {canon, rest}, *all = NULL, out[2] = {0.0, 1.0}; /* out: norm, all finite */
    if (d->rank == 0) {
        all = malloc((size_t)tr_model.p * 2 * sizeof *all); /* [p][2] */
        if (!all)
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (d->rank == 0) {
        double sum = 0.0;
        int ok = 1;
        for (int r = 0; r < tr_model.p; r++) {
            sum += all[2 * r];
            ok = ok && isfinite(all[2 * r + 1]);
        }
        out[0] = sqrt(sum);
        out[1] = ok && isfinite(out[0]) ? 1.0 : 0.0;
        free(all);
    }
    MPI_Bcast(out, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    *finite = out[1] != 0.0;
    return out[0];
}

bool tr_clip_scale(double norm, double clip, float *s)
{
    double scale = clip / (norm + 1e-6); /* min(1, scale) multiplies every gradient */
    if (!(clip > 0) || !(scale < 1.0))
        return false;
    *s = (float)scale;
    return true;
}
