/*
 * tr_gather.c - results to rank 0, the replica check and the non-finite
 * checks of parameter shards (see tr_gather.h). Rank 0 fills its assembly
 * buffers with NaN first, so a block that no rank sent shows up as NaN in the
 * file instead of as plausible zeros. Whatever is counted once per element of
 * a full tensor uses the canonical copy (member 0 of the parameter's replica
 * group: depth 0, and row 0 for vectors, on the [q,q,d] mesh; rank 0 for the
 * megatron scheme's whole tensors), the copy tr_gather_params writes.
 */
#include "tr_gather.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr_bf16.h"
#include "tr_npy.h"
#include "tr_safetensors.h"

/* rank 0 decided; share the verdict */
static bool root_ok(bool ok)
{
    int v = ok ? 1 : 0;
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v == 1;
}

bool tr_gather_block_npy(const tr_rank_desc *d, const char *path, const float *block, int stage, tr_err *err)
{
    int rank = d->rank, p = tr_model.p;
    long blk = (long)d->io_rows * d->io_cols; /* every rank's block has this shape */
    long total = (long)tr_model.batch * tr_model.seq * tr_model.hidden;
    float *all = NULL, *full = NULL;
    /* pipeline stages: the ranks of `stage` hold the block (stage-major: rank / ranks per stage); the others' blocks
     * are gathered with the rest and left out */
    const int piped = &tr_pipe_class && tr_pipe_class.stages > 1, per = piped ? tr_pipe_class.ranks : p;
    int *at = NULL, mine[2] = {d->io_r0, d->io_c0};
    bool ok = true;
    if (rank == 0) {
        all = malloc((size_t)blk * (size_t)p * sizeof *all);
        full = malloc((size_t)total * sizeof *full);
        at = malloc(2 * (size_t)p * sizeof *at);
        ok = all && full && at;
    }
    if (!root_ok(ok)) {
        free(all);
        free(full);
        free(at);
        return tr_fail(err, "%s: out of memory gathering on rank 0", path);
    }
    /* each rank says where its block lies (its descriptor's io_r0, io_c0), then sends it */
    MPI_Gather(mine, 2, MPI_INT, at, 2, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(block, (int)blk, MPI_FLOAT, all, (int)blk, MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (long e = 0; e < total; e++)
            full[e] = NAN;
        /* ranks that hold the same block (the megatron scheme: every rank holds all of it) must agree bitwise */
        for (int r = 1; r < p && ok; r++)
            for (int s = 0; s < r && ok; s++)
                if ((!piped || (r / per == stage && s / per == stage)) && at[2 * r] == at[2 * s] &&
                    at[2 * r + 1] == at[2 * s + 1]) {
                    if (memcmp(all + (long)r * blk, all + (long)s * blk, (size_t)blk * sizeof *all) != 0)
                        ok = tr_fail(err, "%s: rank %d's copy of the output differs from rank %d's: the replicas "
                                          "diverged (a collective that is not bitwise identical on every member?); "
                                          "nothing written", path, r, s);
                    break;
                }
        for (int r = 0; ok && r < p; r++)
            for (int i = 0; i < d->io_rows && (!piped || r / per == stage); i++)
                memcpy(full + (long)(at[2 * r] + i) * tr_model.hidden + at[2 * r + 1],
                       all + (long)r * blk + (long)i * d->io_cols, (size_t)d->io_cols * sizeof *full);
        long bad = 0;
        for (long e = 0; e < total; e++)
            bad += !isfinite(full[e]);
        if (ok && bad)
            fprintf(stderr, "warning: %s has %ld non-finite values of %ld\n", path, bad, total);
        int64_t shape[3] = {tr_model.batch, tr_model.seq, tr_model.hidden};
        if (ok)
            ok = tr_npy_write_atomic(path, 3, shape, full, err);
    }
    free(all);
    free(full);
    free(at);
    return root_ok(ok);
}

static bool all_ok_world(bool ok)
{
    int v = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == 1;
}

/* Is this rank's shard of pr the copy of the full tensor that is written (and counted)? Member 0 of the group
 * that holds its replicas (every shard is canonical when no other rank holds it). */
static int canonical(const tr_rank_desc *d, const tr_param *pr)
{
    /* pipeline stages: the last stage's copy of the tied wte is not written (stage 0's is) */
    return (pr->replica < 0 || pr->replica >= TR_NGROUPS || d->key[pr->replica] == 0) && !tr_pipe_tied_copy(d, pr);
}

/* A shard's description as the gathers send it: [0] pieces, then per piece r0, nr, c0, nc, dst_col (three at most),
 * then [META_PER - 1] whether it is the canonical copy */
enum { META_PER = 1 + 3 * 5 + 1 };
static void pack_meta(int *m, const tr_rank_desc *d, const tr_param *pr)
{
    m[0] = pr->npieces;
    for (int c = 0; c < pr->npieces && c < 3; c++) {
        m[1 + 5 * c] = pr->piece[c].r0;
        m[2 + 5 * c] = pr->piece[c].nr;
        m[3 + 5 * c] = pr->piece[c].c0;
        m[4 + 5 * c] = pr->piece[c].nc;
        m[5 + 5 * c] = pr->piece[c].dst_col;
    }
    m[META_PER - 1] = canonical(d, pr);
}

static long long shard_elems(const tr_rank_desc *d)
{
    long long n = 0;
    for (int i = 0; i < d->nparams; i++)
        n += (long long)d->params[i].rows * d->params[i].cols;
    return n;
}

/* The arena offset of pr's `which` array (TR_GATHER_*). */
static long long which_offset(const tr_param *pr, int which)
{
    return which == TR_GATHER_GRADS ? pr->grad_offset
           : which == TR_GATHER_ADAM_M ? pr->m_offset
           : which == TR_GATHER_ADAM_V ? pr->v_offset
                                       : pr->offset;
}

void tr_gather_full_free(const tr_rank_desc *d, float **full)
{
    if (full)
        for (int i = 0; i < d->nparams; i++)
            free(full[i]);
    free(full);
}

/* Elements of slice k of a sliced array (optimizer.shard): [k*s, min((k+1)*s, n)), none past n. */
static int slice_len(long long n, long long s, int k)
{
    long long lo = (long long)k * s, hi = lo + s < n ? lo + s : n;
    return hi > lo ? (int)(hi - lo) : 0;
}

/* optimizer.shard (docs/TRAINING.md): pr's `which` array made whole into out [rows*cols] on every member of dep,
 * slice k from member k (MPI_Allgatherv, bits copied): the moments hold this rank's slice k from their first
 * element; the gradient after the backward holds the summed slice k at k*s (the rest of it, this rank's own
 * unsummed values, is not used). The weights are whole already (the optimizer's all-gather). Collective over dep. */
static bool unslice(const tr_rank_desc *d, MPI_Comm dep, const float *H, const tr_param *pr, int which, float *out)
{
    int n = d->size[TR_DEP], me = d->key[TR_DEP];
    long long total = (long long)pr->rows * pr->cols;
    int *cnt = malloc(2 * (size_t)n * sizeof *cnt);
    if (!cnt)
        return false;
    for (int k = 0; k < n; k++) {
        cnt[k] = slice_len(total, pr->shard, k);
        cnt[n + k] = (int)((long long)k * pr->shard < total ? (long long)k * pr->shard : total);
    }
    const float *src = which == TR_GATHER_GRADS ? H + pr->grad_offset + cnt[n + me] : H + which_offset(pr, which);
    int rc = MPI_Allgatherv(src, cnt[me], MPI_FLOAT, out, cnt, cnt + n, MPI_FLOAT, dep);
    free(cnt);
    return rc == MPI_SUCCESS;
}

/* tr_gather_full over comm (MPI_COMM_WORLD, or with pipeline stages one stage's ranks), to its rank 0 */
static bool gather_full_in(const tr_rank_desc *d, MPI_Comm dep, MPI_Comm comm, const float *H, int which,
                           float ***out, tr_err *err);

bool tr_gather_full(const tr_rank_desc *d, MPI_Comm dep, const float *H, int which, float ***out, tr_err *err)
{
    return gather_full_in(d, dep, MPI_COMM_WORLD, H, which, out, err);
}

static bool all_ok_in(MPI_Comm comm, bool ok)
{
    int v = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, comm);
    return all == 1;
}

static bool gather_full_in(const tr_rank_desc *d, MPI_Comm dep, MPI_Comm comm, const float *H, int which,
                           float ***out, tr_err *err)
{
    int rank = 0, p = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    long long n = shard_elems(d); /* the same on every rank: all shards of a tensor have one shape */
    /* where each rank's pieces go: its row and depth, then per parameter its pieces and whether its copy is the
     * canonical one (META_PER ints) */
    int nmeta = 2 + META_PER * d->nparams, *meta = malloc((size_t)nmeta * sizeof *meta), *metas = NULL;
    float *mine = malloc((size_t)n * sizeof *mine), *all = NULL;
    float **full = NULL;
    *out = NULL;
    bool ok = mine != NULL && meta != NULL;
    for (int i = 0; ok && i < d->nparams; i++)
        ok = which_offset(&d->params[i], which) >= 0; /* moments exist in training programs only */
    /* optimizer.shard: the moments and gradients of sliced parameters are gathered over dep below, which every
     * rank of the group must enter (a rank out of memory stops them all first) */
    bool sliced = false;
    for (int i = 0; i < d->nparams; i++)
        sliced |= d->params[i].shard > 0 && which != TR_GATHER_WEIGHTS;
    if (sliced && dep == MPI_COMM_NULL) {
        free(mine);
        free(meta);
        return tr_fail(err, "internal error: the moments or gradients of a program with optimizer.shard gathered "
                            "without its depth group");
    }
    if (sliced)
        ok = all_ok_in(comm, ok);
    if (ok) {
        memset(meta, 0, (size_t)nmeta * sizeof *meta);
        meta[0] = d->i;
        meta[1] = d->k;
        for (int i = 0; i < d->nparams; i++) {
            const tr_param *pr = &d->params[i];
            pack_meta(meta + 2 + META_PER * i, d, pr);
        }
        long long o = 0;
        for (int i = 0; i < d->nparams; i++) {
            const tr_param *pr = &d->params[i];
            long long e = (long long)pr->rows * pr->cols;
            if (pr->shard > 0 && which != TR_GATHER_WEIGHTS)
                ok = unslice(d, dep, H, pr, which, mine + o) && ok; /* collective: entered on every member */
            else
                memcpy(mine + o, H + which_offset(pr, which), (size_t)e * sizeof *mine);
            o += e;
        }
    }
    if (rank == 0 && ok) {
        all = malloc((size_t)n * (size_t)p * sizeof *all);
        metas = malloc((size_t)nmeta * (size_t)p * sizeof *metas);
        full = calloc((size_t)d->nparams, sizeof *full);
        ok = all && metas && full;
        for (int i = 0; ok && i < d->nparams; i++) {
            const tr_param *pr = &d->params[i];
            long long e = pr->ndim == 1 ? pr->full[0] : (long long)pr->full[0] * pr->full[1];
            full[i] = malloc((size_t)e * sizeof **full);
            ok = full[i] != NULL;
            for (long long k = 0; ok && k < e; k++)
                full[i][k] = NAN;
        }
    }
    ok = all_ok_in(comm, ok);
    if (ok) {
        MPI_Gather(meta, nmeta, MPI_INT, metas, nmeta, MPI_INT, 0, comm);
        MPI_Gather(mine, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, 0, comm);
        if (rank == 0) {
            /* every rank has the same tensors in the same order with shards of one shape: rank 0's table gives
             * names and shapes, each rank's meta where its pieces lie */
            for (int r = 0; r < p; r++) {
                const int *rm = metas + (long long)r * nmeta;
                long long o = (long long)r * n;
                for (int i = 0; i < d->nparams; i++) {
                    const tr_param *pr = &d->params[i];
                    const int *m = rm + 2 + META_PER * i;
                    int full_cols = pr->ndim == 1 ? pr->full[0] : pr->full[1];
                    for (int c = 0; m[META_PER - 1] && c < m[0] && c < 3; c++) {
                        const int *pc = m + 1 + 5 * c; /* r0, nr, c0, nc, dst_col */
                        for (int a = 0; a < pc[1]; a++)
                            memcpy(full[i] + (long long)(pc[0] + a) * full_cols + pc[2],
                                   all + o + (long long)a * pr->cols + pc[4], (size_t)pc[3] * sizeof(float));
                    }
                    o += (long long)pr->rows * pr->cols;
                }
            }
            *out = full;
            full = NULL;
        }
    } else {
        tr_fail(err, "out of memory gathering the parameters on rank 0");
    }
    tr_gather_full_free(d, full);
    free(all);
    free(mine);
    free(meta);
    free(metas);
    return ok;
}

bool tr_gather_one(const tr_rank_desc *d, MPI_Comm dep, MPI_Comm comm, const float *H, int which, int i, int root,
                   float **out)
{
    const tr_param *pr = &d->params[i];
    int rank = 0, p = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    long long e = (long long)pr->rows * pr->cols, fe = pr->ndim == 1 ? pr->full[0] : (long long)pr->full[0] * pr->full[1];
    int meta[META_PER] = {0}, *metas = NULL;
    float *mine = malloc((size_t)(e > 0 ? e : 1) * sizeof *mine), *all = NULL, *full = NULL;
    *out = NULL;
    bool sliced = pr->shard > 0 && which != TR_GATHER_WEIGHTS;
    bool ok = mine != NULL && which_offset(pr, which) >= 0 && (!sliced || dep != MPI_COMM_NULL);
    if (sliced) { /* unslice is collective over dep: every member enters it, or none */
        ok = all_ok_in(comm, ok);
        if (ok)
            ok = unslice(d, dep, H, pr, which, mine);
    } else if (ok) {
        memcpy(mine, H + which_offset(pr, which), (size_t)e * sizeof *mine);
    }
    pack_meta(meta, d, pr);
    if (rank == root && ok) {
        all = malloc((size_t)(e > 0 ? e : 1) * (size_t)p * sizeof *all);
        metas = malloc((size_t)META_PER * (size_t)p * sizeof *metas);
        full = malloc((size_t)(fe > 0 ? fe : 1) * sizeof *full);
        ok = all && metas && full;
        for (long long k = 0; ok && k < fe; k++)
            full[k] = NAN;
    }
    ok = all_ok_in(comm, ok);
    if (ok) {
        MPI_Gather(meta, META_PER, MPI_INT, metas, META_PER, MPI_INT, root, comm);
        MPI_Gather(mine, (int)e, MPI_FLOAT, all, (int)e, MPI_FLOAT, root, comm);
        if (rank == root) {
            int full_cols = pr->ndim == 1 ? pr->full[0] : pr->full[1];
            for (int r = 0; r < p; r++) {
                const int *m = metas + (long long)r * META_PER;
                for (int c = 0; m[META_PER - 1] && c < m[0] && c < 3; c++) {
                    const int *pc = m + 1 + 5 * c; /* r0, nr, c0, nc, dst_col */
                    for (int a = 0; a < pc[1]; a++)
                        memcpy(full + (long long)(pc[0] + a) * full_cols + pc[2],
                               all + (long long)r * e + (long long)a * pr->cols + pc[4], (size_t)pc[3] * sizeof(float));
                }
            }
            *out = full;
            full = NULL;
        }
    }
    free(full);
    free(all);
    free(mine);
    free(metas);
    return ok;
}

/* Pipeline stages (tr_gather.h tr_gather_stages): each stage gathers its tensors to its first rank (over a
 * communicator of the stage's ranks), which sends them to world rank 0 (a count, then per tensor its name, ndim,
 * shape and elements); rank 0 lists stage 0's tensors, then each later stage's, leaving out a name already listed
 * (the last stage's tied copy of wte, which is not canonical: its gather is all NaN). */
typedef tr_gather_tensor stage_tensor;

bool tr_gather_stages(const tr_rank_desc *d, MPI_Comm dep, const float *H, int which, tr_gather_tensor **out,
                      int *count, tr_err *err)
{
    const tr_pipe_desc *pd = &tr_pipe_class;
    int rank = d->rank, stage = pd->stage, S = pd->stages, root = stage * pd->ranks;
    MPI_Comm sc;
    *out = NULL;
    *count = 0;
    MPI_Comm_split(MPI_COMM_WORLD, stage, rank, &sc);
    float **full = NULL;
    bool ok = gather_full_in(d, dep, sc, H, which, &full, err);
    MPI_Comm_free(&sc);
    ok = all_ok_world(ok);
    if (!ok) {
        tr_gather_full_free(d, full);
        return false;
    }
    if (rank == root && rank != 0) { /* a later stage's first rank: its tensors to rank 0 */
        int n = d->nparams;
        MPI_Send(&n, 1, MPI_INT, 0, 10, MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) {
            const tr_param *pr = &d->params[i];
            char name[64] = {0};
            snprintf(name, sizeof name, "%s", pr->name);
            long long hdr[3] = {pr->ndim, pr->full[0], pr->ndim == 1 ? 1 : pr->full[1]};
            MPI_Send(name, 64, MPI_CHAR, 0, 11, MPI_COMM_WORLD);
            MPI_Send(hdr, 3, MPI_LONG_LONG, 0, 12, MPI_COMM_WORLD);
            MPI_Send(full[i], (int)(hdr[1] * hdr[2]), MPI_FLOAT, 0, 13, MPI_COMM_WORLD);
        }
    }
    if (rank == 0) {
        int cap = d->nparams, n = 0;
        stage_tensor *t = calloc((size_t)(cap > 0 ? cap : 1), sizeof *t);
        if (!t)
            MPI_Abort(MPI_COMM_WORLD, 1);
        for (int i = 0; i < d->nparams; i++) {
            const tr_param *pr = &d->params[i];
            snprintf(t[n].name, sizeof t[n].name, "%s", pr->name);
            t[n].ndim = pr->ndim;
            t[n].shape[0] = pr->full[0];
            t[n].shape[1] = pr->ndim == 1 ? 0 : pr->full[1];
            t[n++].data = full[i];
            full[i] = NULL;
        }
        for (int s = 1; s < S; s++) {
            int src = s * pd->ranks, m = 0;
            MPI_Recv(&m, 1, MPI_INT, src, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int i = 0; i < m; i++) {
                char name[64];
                long long hdr[3];
                MPI_Recv(name, 64, MPI_CHAR, src, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Recv(hdr, 3, MPI_LONG_LONG, src, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                float *buf = malloc((size_t)(hdr[1] * hdr[2]) * sizeof *buf);
                if (!buf)
                    MPI_Abort(MPI_COMM_WORLD, 1);
                MPI_Recv(buf, (int)(hdr[1] * hdr[2]), MPI_FLOAT, src, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                name[63] = '\0';
                int seen = 0;
                for (int k = 0; k < n; k++)
                    seen |= strcmp(t[k].name, name) == 0;
                if (seen) { /* the tied copy of wte: stage 0's is the one written */
                    free(buf);
                    continue;
                }
                if (n == cap) {
                    cap *= 2;
                    stage_tensor *nt = realloc(t, (size_t)cap * sizeof *nt);
                    if (!nt)
                        MPI_Abort(MPI_COMM_WORLD, 1);
                    t = nt;
                }
                snprintf(t[n].name, sizeof t[n].name, "%s", name);
                t[n].ndim = (int)hdr[0];
                t[n].shape[0] = hdr[1];
                t[n].shape[1] = hdr[0] == 1 ? 0 : hdr[2];
                t[n++].data = buf;
            }
        }
        *out = t;
        *count = n;
    }
    tr_gather_full_free(d, full);
    return true;
}

static bool write_stages(const tr_rank_desc *d, MPI_Comm dep, const float *H, int grads, const char *path,
                         tr_st_dtype dtype, tr_err *err)
{
    stage_tensor *t = NULL;
    int n = 0;
    tr_err e = {{0}};
    if (!tr_gather_stages(d, dep, H, grads ? TR_GATHER_GRADS : TR_GATHER_WEIGHTS, &t, &n, &e)) {
        if (d->rank == 0)
            tr_fail(err, "%s: %s", path, e.msg);
        return false;
    }
    bool ok = true;
    if (d->rank == 0) {
        tr_st_out *outs = calloc((size_t)(n > 0 ? n : 1), sizeof *outs);
        long long bad = 0, total = 0;
        for (int i = 0; i < n; i++) {
            long long m = t[i].shape[0] * (t[i].ndim == 1 ? 1 : t[i].shape[1]);
            for (long long k = 0; k < m; k++)
                bad += !isfinite(t[i].data[k]);
            total += m;
        }
        if (bad)
            fprintf(stderr, "warning: %s has %lld non-finite values of %lld\n", path, bad, total);
        if (!outs) {
            ok = tr_fail(err, "%s: out of memory", path);
        } else {
            for (int i = 0; i < n; i++)
                outs[i] = (tr_st_out){.name = t[i].name, .ndim = t[i].ndim, .shape = {t[i].shape[0], t[i].shape[1]},
                                      .data = t[i].data};
            ok = tr_st_write_atomic_as(path, outs, n, dtype, err);
        }
        free(outs);
        for (int i = 0; i < n; i++)
            free(t[i].data);
        free(t);
    }
    return root_ok(ok);
}

bool tr_gather_params(const tr_rank_desc *d, MPI_Comm dep, const float *H, int grads, const char *path,
                      tr_st_dtype dtype, tr_err *err)
{
    if (&tr_pipe_class && tr_pipe_class.stages > 1)
        return write_stages(d, dep, H, grads, path, dtype, err);
    float **full = NULL;
    tr_err e = {{0}};
    if (!tr_gather_full(d, dep, H, grads ? TR_GATHER_GRADS : TR_GATHER_WEIGHTS, &full, &e)) {
        if (d->rank == 0)
            tr_fail(err, "%s: %s", path, e.msg);
        return false;
    }
    bool ok = true;
    if (d->rank == 0) {
        tr_st_out *outs = calloc((size_t)(d->nparams > 0 ? d->nparams : 1), sizeof *outs);
        long long bad = 0, total = 0;
        for (int i = 0; i < d->nparams; i++) {
            const tr_param *pr = &d->params[i];
            long long n = pr->ndim == 1 ? pr->full[0] : (long long)pr->full[0] * pr->full[1];
            for (long long k = 0; k < n; k++)
                bad += !isfinite(full[i][k]);
            total += n;
        }
        if (bad)
            fprintf(stderr, "warning: %s has %lld non-finite values of %lld\n", path, bad, total);
        if (!outs) {
            ok = tr_fail(err, "%s: out of memory", path);
        } else {
            for (int i = 0; i < d->nparams; i++) {
                const tr_param *pr = &d->params[i];
                outs[i] = (tr_st_out){.name = pr->name, .ndim = pr->ndim, .shape = {pr->full[0], pr->full[1]},
                                      .data = full[i]};
            }
            ok = tr_st_write_atomic_as(path, outs, d->nparams, dtype, err);
        }
        free(outs);
    }
    tr_gather_full_free(d, full);
    return root_ok(ok);
}

long long tr_gather_replica_check(tr_ctx *c, const float *H)
{
    const tr_rank_desc *d = c->desc;
    long long bad = 0;
    for (int i = 0; i < d->nparams; i++) {
        const tr_param *pr = &d->params[i];
        if (pr->replica < 0 || pr->replica >= TR_NGROUPS)
            continue; /* no other rank holds this shard */
        tr_group g = (tr_group)pr->replica;
        int n = pr->rows * pr->cols;
        float *ref = malloc((size_t)n * sizeof *ref);
        if (!ref)
            MPI_Abort(MPI_COMM_WORLD, 1);
        memcpy(ref, H + pr->offset, (size_t)n * sizeof *ref);
        MPI_Bcast(ref, n, MPI_FLOAT, 0, c->comm[g]);
        if (memcmp(ref, H + pr->offset, (size_t)n * sizeof *ref) != 0) {
            bad++;
            fprintf(stderr, "rank %d: %s differs from its replica on member 0 of its %s group\n", d->rank, pr->name,
                    g == TR_DEP ? "dep" : g == TR_COLDEP ? "coldep" : g == TR_WORLD ? "world" : "row or col");
        }
        free(ref);
    }
    long long all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return all + tr_pipe_tied_check(c, H); /* pipeline stages: the tied wte of the first and last stage */
}

/* Non-finite elements of pr's local shard (at off in H): how many and the smallest full-tensor index. */
/* Element e of a shard at H + off as a float: a bf16 shard (a bf16 inference program's matrices; docs/BF16.md)
 * widened exactly. Gradients are fp32 (bf16 shards exist only without them). */
static float shard_elem(const tr_param *pr, const float *H, long long off, int grads, long long e)
{
    return pr->bf16 && !grads ? tr_bf16_to_f32(((const tr_bf16 *)(H + off))[e]) : H[off + e];
}

static long long scan_nonfinite(const tr_param *pr, const float *H, long long off, int grads, long long *first)
{
    long long n = 0, full_cols = pr->ndim == 1 ? pr->full[0] : pr->full[1];
    *first = LLONG_MAX;
    for (int c = 0; c < pr->npieces; c++) {
        const tr_piece *pc = &pr->piece[c];
        for (int a = 0; a < pc->nr; a++) {
            long long row = (long long)a * pr->cols + pc->dst_col;
            for (int b = 0; b < pc->nc; b++) {
                if (isfinite(shard_elem(pr, H, off, grads, row + b)))
                    continue;
                long long at = (long long)(pc->r0 + a) * full_cols + pc->c0 + b;
                n++;
                if (at < *first)
                    *first = at;
            }
        }
    }
    return n;
}

int tr_gather_nonfinite(const tr_rank_desc *d, const float *H, int grads, long long *count, long long *first)
{
    /* the first tensor in model order over every rank: key stage * 65536 + index (pipeline stages hold different
     * tensors; INT_MAX: none), so every rank enters the same collectives below */
    const int piped = &tr_pipe_class && tr_pipe_class.stages > 1, stage = piped ? tr_pipe_class.stage : 0;
    int mine = INT_MAX, idx = INT_MAX;
    for (int i = 0; i < d->nparams && mine == INT_MAX; i++) {
        const tr_param *pr = &d->params[i];
        long long off = grads ? pr->grad_offset : pr->offset, e = (long long)pr->rows * pr->cols;
        for (long long k = 0; k < e; k++)
            if (!isfinite(shard_elem(pr, H, off, grads, k))) {
                mine = stage * 65536 + i;
                break;
            }
    }
    MPI_Allreduce(&mine, &idx, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    *count = 0;
    *first = -1;
    if (idx == INT_MAX)
        return -1;
    int own = idx / 65536 == stage; /* this rank's stage holds the tensor */
    const tr_param *pr = own ? &d->params[idx % 65536] : NULL;
    long long at = LLONG_MAX, n = pr ? scan_nonfinite(pr, H, grads ? pr->grad_offset : pr->offset, grads, &at) : 0;
    long long cn = pr && canonical(d, pr) ? n : 0;
    MPI_Allreduce(&cn, count, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&at, first, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    if (*count == 0) /* only a replica holds them (the replica check tells which) */
        MPI_Allreduce(&n, count, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return own ? idx % 65536 : d->nparams; /* d->nparams: another stage's tensor (its name is not known here) */
}

void tr_gather_max_abs(const tr_rank_desc *d, const float *H, double *max, char *name, size_t cap)
{
        int world = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    struct {
        double v;
        int rank;
    } mine = {-1.0, world}, all;
    int idx = 0;
    for (int i = 0; i < d->nparams; i++) {
        const tr_param *pr = &d->params[i];
        long long e = (long long)pr->rows * pr->cols;
        for (long long k = 0; k < e; k++) {
            double a = fabs((double)shard_elem(pr, H, pr->offset, 0, k));
            if (a > mine.v) {
                mine.v = a;
                idx = i;
            }
        }
    }
    /* the rank that holds the largest names it: ranks of other pipeline stages hold other tensors at that index */
    MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    *max = all.v;
    char buf[256] = "";
        if (world == all.rank && d->nparams > 0)
        snprintf(buf, sizeof buf, "%s", d->params[idx].name);
    MPI_Bcast(buf, (int)sizeof buf, MPI_CHAR, all.rank, MPI_COMM_WORLD);
    snprintf(name, cap, "%s", buf);
}
