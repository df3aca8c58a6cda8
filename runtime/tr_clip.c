/*
 * tr_clip.c - the global gradient norm and clipping by it (tr_clip.h). The partial sums are
 * gathered and added in rank order on rank 0 rather than by MPI_Allreduce, which promises neither
 * the same bits on every member nor the same order from run to run.
 */
#include "tr_clip.h"

#include <math.h>
#include <stdlib.h>

#include "tr_backend.h"

/* Does this rank hold the canonical copy of pr (the one counted once)? As tr_gather.c decides. */
static int canonical(const tr_rank_desc *d, const tr_param *pr)
{
    return pr->replica < 0 || pr->replica >= TR_NGROUPS || d->key[pr->replica] == 0;
}

double tr_clip_norm(const tr_rank_desc *d, const float *H)
{
    double mine = 0.0;
    for (int i = 0; i < d->nparams; i++) {
        const tr_param *pr = &d->params[i];
        if (!canonical(d, pr))
            continue;
        /* the pieces of the full tensor this shard holds (every element of the shard, [rows, cols]) */
        for (int c = 0; c < pr->npieces; c++) {
            const tr_piece *pc = &pr->piece[c];
            for (int a = 0; a < pc->nr; a++) {
                const float *g = H + pr->grad_offset + (long long)a * pr->cols + pc->dst_col; /* [nc] */
                for (int b = 0; b < pc->nc; b++)
                    mine += (double)g[b] * (double)g[b];
            }
        }
    }
    double *all = NULL, norm = 0.0;
    if (d->rank == 0) {
        all = malloc((size_t)tr_model.p * sizeof *all); /* [p] partial sums */
        if (!all)
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (d->rank == 0) {
        double sum = 0.0;
        for (int r = 0; r < tr_model.p; r++)
            sum += all[r];
        norm = sqrt(sum);
        free(all);
    }
    MPI_Bcast(&norm, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return norm;
}

double tr_clip_apply(tr_ctx *c, float *H, float *A, double clip)
{
    const tr_rank_desc *d = c->desc;
    double norm = tr_clip_norm(d, H);
    double scale = clip / (norm + 1e-6); /* min(1, scale) multiplies every gradient */
    if (!(clip > 0) || !(scale < 1.0))
        return norm;
    float s = (float)scale;
    for (int i = 0; i < d->nparams; i++) {
        const tr_param *pr = &d->params[i];
        long long n = (long long)pr->rows * pr->cols;
        float *g = H + pr->grad_offset; /* [rows, cols] */
        for (long long e = 0; e < n; e++)
            g[e] *= s;
        tr_backend_upload(c, A + pr->grad_offset, g, n);
    }
    return norm;
}
