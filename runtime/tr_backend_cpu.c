/*
 * tr_backend_cpu.c - the CPU backend's side of tr_backend.h: generated code
 * runs directly on the host arena, so there is nothing to copy or wait for.
 * A training step's sums are computed when asked for, with the loops the
 * program has always used (the MSE in element order, the norm in tr_clip.c's
 * order), and handed back by tr_backend_step_read.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tr_backend.h"
#include "tr_clip.h"
#include "tr_kernels.h"
#include "tr_tokens.h"
#include "tr_vec.h"

static struct {
    const float *target; /* the MSE target block, the main's */
    tr_step_sums sums;   /* since the last read */
} cpu_step;

const char *tr_backend_name(void)
{
    return "cpu";
}

bool tr_backend_init(tr_ctx *c, tr_err *err)
{
    (void)c;
    (void)err;
    return true;
}

float *tr_backend_arena(tr_ctx *c, float *H, long long elems, tr_err *err)
{
    (void)c;
    (void)elems;
    (void)err;
    return H;
}

void tr_backend_upload(tr_ctx *c, float *dst_run, const float *src_host, long long elems)
{
    (void)c;
    if (dst_run != src_host)
        memcpy(dst_run, src_host, (size_t)elems * sizeof(float));
}

void tr_backend_download(tr_ctx *c, float *dst_host, const float *src_run, long long elems)
{
    (void)c;
    if (dst_host != src_run)
        memcpy(dst_host, src_run, (size_t)elems * sizeof(float));
}

void tr_backend_sync(tr_ctx *c)
{
    (void)c;
}

void tr_backend_free(tr_ctx *c, float *run_arena, float *H)
{
    (void)c;
    if (run_arena != H)
        free(run_arena);
    free(H);
}

long long tr_backend_host_syncs(tr_ctx *c)
{
    (void)c;
    return -1; /* nothing to wait for */
}

bool tr_backend_train_init(tr_ctx *c, float *A, const float *target, long long batch_elems, tr_err *err)
{
    (void)c, (void)A, (void)batch_elems, (void)err;
    cpu_step.target = target;
    memset(&cpu_step.sums, 0, sizeof cpu_step.sums);
    return true;
}

void tr_backend_objective(tr_ctx *c, float *A)
{
    const tr_rank_desc *d = c->desc;
    long long r0, nr; /* micro-batches: this one's rows only (tr_backend.h) */
    tr_objective_rows(c, &r0, &nr);
    long long e0 = r0 * d->io_cols, n = nr * d->io_cols;
    float *dy = A + d->gx_offset + e0;
    double local = 0;
    if (tr_lm_vocab()) {
        if (tr_lm_counts_loss(d))
            for (long long r = r0; r < r0 + nr; r++)
                local += A[tr_lm()->loss_offset + r];
        memset(dy, 0, (size_t)n * sizeof *dy);
    } else {
        /* sum (y - target)^2 and dL/dy = 2 (y - target) / N over the output's N elements (of these rows) */
        const float *y = A + d->y_offset + e0, *t = cpu_step.target + e0;
        double total_n = (double)tr_model.batch * tr_model.seq * tr_model.hidden;
        for (long long e = 0; e < n; e++) {
            double diff = (double)y[e] - t[e];
            local += diff * diff;
            dy[e] = (float)(2.0 * diff / total_n);
        }
    }
    cpu_step.sums.loss = c->mb > 0 ? cpu_step.sums.loss + local : local;
}

/* This rank's part of the squared norm: the squares (in double) of the pieces of its canonical shards of the
 * gradients in G (the arena holding them), in parameter, piece, row, column order of blocks (tr_sumsq). */
static double clip_local(const tr_rank_desc *d, const float *G)
{
    double mine = 0.0;
    for (int i = 0; i < d->nparams; i++) {
        const tr_param *pr = &d->params[i];
        /* optimizer.shard: every member of dep counts its slice, the one summed over dep; pipeline stages: not the
         * last stage's copy of the tied wte, which tr_clip_canonical leaves out (stage 0's slices count) */
        if (pr->shard > 0 && !tr_pipe_tied_copy(d, pr)) {
            long long n = (long long)pr->rows * pr->cols, lo = (long long)d->key[TR_DEP] * pr->shard;
            long long hi = lo + pr->shard < n ? lo + pr->shard : n;
            if (hi > lo)
                mine += tr_sumsq(G + pr->grad_offset + lo, hi - lo);
            continue;
        }
        if (!tr_clip_canonical(d, pr))
            continue;
        /* the pieces of the full tensor this shard holds (every element of the shard, [rows, cols]); a piece of
         * whole rows is one contiguous run */
        for (int c = 0; c < pr->npieces; c++) {
            const tr_piece *pc = &pr->piece[c];
            if (pc->nc == pr->cols && pc->dst_col == 0) {
                mine += tr_sumsq(G + pr->grad_offset, (long long)pc->nr * pr->cols);
                continue;
            }
            for (int a = 0; a < pc->nr; a++) /* [nc] of row a */
                mine += tr_sumsq(G + pr->grad_offset + (long long)a * pr->cols + pc->dst_col, pc->nc);
        }
    }
    return mine;
}

/* The step's gradient sums: canon, this rank's part of the squared norm (clip_local); rest, NaN when a gradient
 * element the squares do not cover is not finite. The squares cover every element of the shards this rank holds
 * canonically (and its slice of a sharded one), and a sum of squares of finite floats in double cannot overflow
 * (at most 2^256 a square), so a non-finite element there already makes the norm non-finite (tr_clip_norm); only
 * the replica shards, and a sharded gradient outside this rank's slice, are scanned. One pass over each element. */
void tr_backend_grad_sums(tr_ctx *c, float *A)
{
    const tr_rank_desc *d = c->desc;
    cpu_step.sums.canon = clip_local(d, A);
    long long bad = 0;
    for (int i = 0; i < d->nparams && bad == 0; i++) {
        const tr_param *pr = &d->params[i];
        const float *g = A + pr->grad_offset; /* [rows, cols] */
        long long n = (long long)pr->rows * pr->cols;
        if (pr->shard > 0 && !tr_pipe_tied_copy(d, pr)) { /* [0, lo) and [hi, n): the other members' slices */
            long long lo = (long long)d->key[TR_DEP] * pr->shard, hi = lo + pr->shard;
            lo = lo < n ? lo : n;
            hi = hi < n ? hi : n;
            bad += tr_nonfinite(g, lo) + tr_nonfinite(g + hi, n - hi);
        } else if (!tr_clip_canonical(d, pr)) {
            bad += tr_nonfinite(g, n);
        }
    }
    cpu_step.sums.rest = bad ? NAN : 0.0;
}

void tr_backend_step_read(tr_ctx *c, tr_step_sums *s)
{
    (void)c;
    *s = cpu_step.sums;
    memset(&cpu_step.sums, 0, sizeof cpu_step.sums);
}

void tr_backend_scale_grads(tr_ctx *c, float *A, float s)
{
    const tr_rank_desc *d = c->desc;
    if (s == 1.0f)
        return; /* g * 1 is g */
    for (int i = 0; i < d->nparams; i++) {
        float *g = A + d->params[i].grad_offset; /* [rows, cols] */
        long long n = (long long)d->params[i].rows * d->params[i].cols;
#pragma omp parallel for schedule(static) if (TR_PAR(n, 1))
        for (long long e = 0; e < n; e++)
            g[e] *= s;
    }
}

void tr_backend_upload_batch(tr_ctx *c, float *dst_run, const float *src_host, long long elems)
{
    tr_backend_upload(c, dst_run, src_host, elems);
}

void tr_backend_step_scalars(tr_ctx *c, float s)
{
    (void)c, (void)s; /* the CPU's kernels read c->lr and c->opt_step as they run */
}

bool tr_backend_graph_init(tr_ctx *c, tr_err *err)
{
    (void)c, (void)err;
    return true;
}

/* No graphs: every part is issued (run at once) every step. */
bool tr_backend_part_begin(tr_ctx *c, int part, bool capture)
{
    (void)c, (void)part, (void)capture;
    return false;
}

bool tr_backend_part_end(tr_ctx *c, int part)
{
    (void)c, (void)part;
    return true;
}

const char *tr_backend_graph_note(tr_ctx *c)
{
    (void)c;
    return NULL;
}

bool tr_backend_launch_counts(tr_ctx *c, tr_launch_counts *n)
{
    (void)c;
    n->issued = n->replayed = n->replays = 0;
    return false;
}

/* Pipeline stages: the run arena is the host arena, so MPI moves the blocks in place; the stash is host memory. */
bool tr_backend_run_on_host(void)
{
    return true;
}

float *tr_backend_run_alloc(tr_ctx *c, long long n)
{
    (void)c;
    return malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
}

void tr_backend_run_release(tr_ctx *c, float *p)
{
    (void)c;
    free(p);
}

void tr_backend_run_copy(tr_ctx *c, float *dst, const float *src, long long n)
{
    (void)c;
    memcpy(dst, src, (size_t)n * sizeof(float));
}
