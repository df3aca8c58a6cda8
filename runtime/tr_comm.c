/*
 * tr_comm.c - the CPU backend's collectives over MPI: one communicator per
 * group kind (row, col, dep, coldep), made by MPI_Comm_split with the colors
 * and keys the generator baked into the rank descriptor.
 *
 * Every call counts the payload it moves in bytes, logically and independently
 * of the MPI algorithm: a broadcast is `count` elements received on every
 * member but the root and `count` elements sent by the root; an all-reduce is
 * `count` elements reduced; a reduce sends `count` and its root receives
 * `count` from each other member. An element is 4 bytes (float32), or 2 for
 * tr_bcast_bf16. A run can then be checked against the plan's totals, which
 * the generator prints in bytes too.
 * MPI errors abort with the call, the group and a hint (the default handler
 * would abort without saying which step failed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tr_backend.h"
#include "tr_ctx.h"

static const char *group_name(tr_group g)
{
    static const char *n[TR_NGROUPS] = {"row", "col", "dep", "coldep", "world"};
    return n[g];
}

static void mpi_check(int rc, const char *what, tr_group g, const char *file, int line)
{
    if (rc == MPI_SUCCESS)
        return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "rank %d: %s:%d: %s over the %s group failed: %s\n"
                    "hint: every rank must run the same generated program; rebuild all ranks from one "
                    "tessgen output\n",
            rank, file, line, what, group_name(g), msg);
    MPI_Abort(MPI_COMM_WORLD, 3);
}
#define MPI_CHECK(call, what, g) mpi_check((call), (what), (g), __FILE__, __LINE__)

double tr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool tr_ctx_init(tr_ctx *c, const tr_rank_desc *desc, tr_err *err)
{
    memset(c, 0, sizeof *c);
    c->desc = desc;
    c->lr = tr_model.lr;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int g = 0; g < TR_NGROUPS; g++) {
        int rc = MPI_Comm_split(MPI_COMM_WORLD, desc->color[g], desc->key[g], &c->comm[g]);
        if (rc != MPI_SUCCESS)
            return tr_fail(err, "rank %d: MPI_Comm_split for the %s group failed", desc->rank,
                           group_name((tr_group)g));
        MPI_Comm_set_errhandler(c->comm[g], MPI_ERRORS_RETURN);
        int size, local;
        MPI_Comm_size(c->comm[g], &size);
        MPI_Comm_rank(c->comm[g], &local);
        if (size != desc->size[g] || local != desc->key[g])
            return tr_fail(err,
                           "rank %d: the %s group has %d members and this rank is member %d, but the plan says "
                           "%d and %d: the ranks were not all built from the same tessgen output",
                           desc->rank, group_name((tr_group)g), size, local, desc->size[g], desc->key[g]);
    }
    return true;
}

void tr_ctx_free(tr_ctx *c)
{
    for (int g = 0; g < TR_NGROUPS; g++)
        if (c->comm[g] != MPI_COMM_NULL && c->comm[g] != 0)
            MPI_Comm_free(&c->comm[g]);
    free(c->scratch);
    c->scratch = NULL;
    c->scratch_cap = 0;
}

void tr_ctx_reset_counts(tr_ctx *c)
{
    memset(c->bcast_recv, 0, sizeof c->bcast_recv);
    memset(c->bcast_sent, 0, sizeof c->bcast_sent);
    memset(c->allreduce, 0, sizeof c->allreduce);
    memset(c->reduce_recv, 0, sizeof c->reduce_recv);
    memset(c->reduce_sent, 0, sizeof c->reduce_sent);
    memset(c->rscatter, 0, sizeof c->rscatter);
    memset(c->allgather, 0, sizeof c->allgather);
    memset(c->ag_recv, 0, sizeof c->ag_recv);
    memset(c->rs_recv, 0, sizeof c->rs_recv);
    memset(c->calls, 0, sizeof c->calls);
    memset(c->seconds, 0, sizeof c->seconds);
}

const char *tr_kind_name(tr_kind k)
{
    static const char *n[TR_NKINDS] = {"bcast",     "allreduce", "gemm",      "layernorm", "residual",
                                       "gelu",      "attention", "reduce",    "optimizer", "cast",
                                       "loss"};
    return (k >= 0 && k < TR_NKINDS) ? n[k] : "?";
}

/* One broadcast of count elements of `type` (esize bytes each), counted in bytes. */
static void bcast_typed(tr_ctx *c, tr_group g, int root, void *buf, int count, MPI_Datatype type, int esize)
{
    double t0 = c->timing ? tr_now() : 0;
    MPI_CHECK(MPI_Bcast(buf, count, type, root, c->comm[g]), "MPI_Bcast", g);
    if (c->desc->key[g] == root)
        c->bcast_sent[g] += (long long)esize * count;
    else
        c->bcast_recv[g] += (long long)esize * count;
    c->calls[TR_K_BCAST]++;
    if (c->timing)
        c->seconds[TR_K_BCAST] += tr_now() - t0;
}

void tr_bcast(tr_ctx *c, tr_group g, int root, float *buf, int count)
{
    bcast_typed(c, g, root, buf, count, MPI_FLOAT, 4);
}

/* bf16 values are moved as their bits: MPI has no bfloat16 type, and a broadcast adds nothing. */
void tr_bcast_bf16(tr_ctx *c, tr_group g, int root, tr_bf16 *buf, int count)
{
    bcast_typed(c, g, root, buf, count, MPI_UINT16_T, 2);
}

void tr_allreduce(tr_ctx *c, tr_group g, float *buf, int count)
{
    double t0 = c->timing ? tr_now() : 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, c->comm[g]), "MPI_Allreduce", g);
    c->allreduce[g] += 4LL * count;
    c->calls[TR_K_ALLREDUCE]++;
    if (c->timing)
        c->seconds[TR_K_ALLREDUCE] += tr_now() - t0;
}

void tr_reduce(tr_ctx *c, tr_group g, int root, float *buf, int count)
{
    double t0 = c->timing ? tr_now() : 0;
    if (c->desc->key[g] == root) {
        MPI_CHECK(MPI_Reduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, root, c->comm[g]), "MPI_Reduce", g);
        c->reduce_recv[g] += 4LL * count * (c->desc->size[g] - 1);
    } else {
        MPI_CHECK(MPI_Reduce(buf, NULL, count, MPI_FLOAT, MPI_SUM, root, c->comm[g]), "MPI_Reduce", g);
        c->reduce_sent[g] += 4LL * count;
    }
    c->calls[TR_K_REDUCE]++;
    if (c->timing)
        c->seconds[TR_K_REDUCE] += tr_now() - t0;
}

/* MPI_Allreduce need not give every member the same bits (members may add in different
 * orders); replicated parameters must stay bitwise identical, so reduce to member 0 and
 * broadcast its result. Counted as one all-reduce of count elements (4 * count bytes). */
void tr_allreduce_exact(tr_ctx *c, tr_group g, float *buf, int count)
{
    double t0 = c->timing ? tr_now() : 0;
    if (c->desc->key[g] == 0)
        MPI_CHECK(MPI_Reduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, 0, c->comm[g]), "MPI_Reduce", g);
    else
        MPI_CHECK(MPI_Reduce(buf, NULL, count, MPI_FLOAT, MPI_SUM, 0, c->comm[g]), "MPI_Reduce", g);
    MPI_CHECK(MPI_Bcast(buf, count, MPI_FLOAT, 0, c->comm[g]), "MPI_Bcast", g);
    c->allreduce[g] += 4LL * count;
    c->calls[TR_K_ALLREDUCE]++;
    if (c->timing)
        c->seconds[TR_K_ALLREDUCE] += tr_now() - t0;
}

/* Slice s of count elements cut into n slices of ceil(count/n): its first element and length (0 past the end). */
static void slice_of(long long count, int n, int s, long long *lo, int *len)
{
    long long cs = (count + n - 1) / n, a = (long long)s * cs, b = a + cs < count ? a + cs : count;
    *lo = a;
    *len = b > a ? (int)(b - a) : 0;
}

/* The counts and displacements of one slice per member, in elements (int: a shard's count fits an int). */
static bool slice_table(tr_ctx *c, tr_group g, long long count, int **tab)
{
    int n = c->desc->size[g];
    *tab = malloc(2 * (size_t)n * sizeof **tab);
    if (!*tab)
        return false;
    for (int s = 0; s < n; s++) {
        long long lo;
        slice_of(count, n, s, &lo, &(*tab)[s]);
        (*tab)[n + s] = (int)lo;
    }
    return true;
}

/* Alltoallv: member s receives everyone's slice s; then it adds them in member order 0, 1, .., n-1 (its own part at
 * its place in that order), so the slice's sum does not depend on the MPI library's reduction order. With n = 2
 * that is one addition, the bits the exact all-reduce gives (a + b = b + a in IEEE arithmetic). */
void tr_reduce_scatter(tr_ctx *c, tr_group g, float *buf, long long count)
{
    double t0 = c->timing ? tr_now() : 0;
    int n = c->desc->size[g], me = c->desc->key[g], *tab = NULL;
    long long lo;
    int len;
    slice_of(count, n, me, &lo, &len);
    float *parts = malloc(((size_t)n * (size_t)len + 1) * sizeof *parts);
    int *rc = malloc(2 * (size_t)n * sizeof *rc);
    if (!parts || !rc || !slice_table(c, g, count, &tab)) {
        fprintf(stderr, "rank %d: out of memory in the reduce-scatter over the %s group\n", c->desc->rank,
                group_name(g));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int s = 0; s < n; s++) { /* from every member its part of my slice, side by side in member order */
        rc[s] = len;
        rc[n + s] = s * len;
    }
    MPI_CHECK(MPI_Alltoallv(buf, tab, tab + n, MPI_FLOAT, parts, rc, rc + n, MPI_FLOAT, c->comm[g]), "MPI_Alltoallv",
              g);
    float *out = buf + lo;
    for (int e = 0; e < len; e++) {
        float sum = parts[e];
        for (int s = 1; s < n; s++)
            sum += parts[(long long)s * len + e];
        out[e] = sum;
    }
    free(parts);
    free(rc);
    free(tab);
    c->rscatter[g] += 4LL * count;
    c->rscatter_run += 4LL * count;
    c->rs_recv[g] += 4LL * (n - 1) * len;
    c->calls[TR_K_ALLREDUCE]++;
    if (c->timing)
        c->seconds[TR_K_ALLREDUCE] += tr_now() - t0;
}

/* An all-gather of count elements of `type` (esize bytes each), counted in bytes. */
static void allgather_typed(tr_ctx *c, tr_group g, void *buf, long long count, MPI_Datatype type, int esize)
{
    double t0 = c->timing ? tr_now() : 0;
    int *tab = NULL;
    if (!slice_table(c, g, count, &tab)) {
        fprintf(stderr, "rank %d: out of memory in the all-gather over the %s group\n", c->desc->rank, group_name(g));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, tab, tab + c->desc->size[g], type,
                             c->comm[g]),
              "MPI_Allgatherv", g);
    c->ag_recv[g] += (long long)esize * (count - tab[c->desc->key[g]]);
    free(tab);
    c->allgather[g] += (long long)esize * count;
    c->allgather_run += (long long)esize * count;
    c->calls[TR_K_ALLREDUCE]++;
    if (c->timing)
        c->seconds[TR_K_ALLREDUCE] += tr_now() - t0;
}

void tr_allgather(tr_ctx *c, tr_group g, float *buf, long long count)
{
    allgather_typed(c, g, buf, count, MPI_FLOAT, 4);
}

/* bf16 values are moved as their bits (MPI has no bfloat16 type; a gather adds nothing) */
void tr_allgather_bf16(tr_ctx *c, tr_group g, tr_bf16 *buf, long long count)
{
    allgather_typed(c, g, buf, count, MPI_UINT16_T, 2);
}

void tr_rank_coord(int r, int *i, int *j, int *k)
{
    if (tr_model.scheme == 1) {
        *i = r;
        *j = *k = 0;
        return;
    }
    *i = (r / tr_model.si) % tr_model.q;
    *j = (r / tr_model.sj) % tr_model.q;
    *k = (r / tr_model.sk) % tr_model.d;
}

const char *tr_mesh_text(void)
{
    static char buf[64];
    if (tr_model.scheme == 1)
        snprintf(buf, sizeof buf, "megatron p=%d", tr_model.p);
    else
        snprintf(buf, sizeof buf, "[%d,%d,%d]", tr_model.q, tr_model.q, tr_model.d);
    return buf;
}

int tr_root_rank(const tr_rank_desc *d, const tr_step_info *s)
{
    if (s->root < 0 || s->group < 0 || s->group >= TR_NGROUPS)
        return -1;
    int q = tr_model.q, i = d->i, j = d->j, k = d->k, l = s->root;
    switch ((tr_group)s->group) {
    case TR_ROW: j = l; break;
    case TR_COL: i = l; break;
    case TR_DEP: k = l; break;
    case TR_COLDEP: i = l % q; k = l / q; break;
    case TR_WORLD: return l;
    default: return -1;
    }
    return i * tr_model.si + j * tr_model.sj + k * tr_model.sk;
}

/* ---- pipeline stages (docs/TRAINING.md "Pipeline stages") ---------------------------------------------------
 * The stage's generated step() calls these with literal arguments. The stash is one block of run memory
 * (tr_backend_run_alloc), slot-major: slot s holds every kept buffer of one micro-batch side by side. Point-to-point
 * steps go over MPI_COMM_WORLD to the same (i, j, k) of the neighbour stage and count their bytes (4 per float) in
 * p2p_sent / p2p_recv, which --bytes checks against the plan. Where the run arena is device memory (the CUDA backend),
 * each block goes through a host buffer: downloaded after the work that wrote it, uploaded before the work that reads
 * it (tr_backend.h); MPI never sees a device pointer, so it needs no CUDA awareness, under either TESS_COMM. */
int tr_pipe_rank(const tr_ctx *c)
{
    return c->desc->rank;
}

/* A kept buffer's place in a stash slot: its 4-byte slots rounded up to 64 bytes, as the plan lays buffers out (so
 * the stash allocated is the plan's stash_planned, --stats checks) */
static long long stash_buf_elems(const tr_pipe_buf *pb)
{
    return (pb->slots + 15) / 16 * 16;
}

static long long stash_slot_elems(void)
{
    long long n = 0;
    for (int b = 0; b < tr_pipe_class.nstash; b++)
        n += stash_buf_elems(&tr_pipe_class.stash_bufs[b]);
    return n;
}

static void stash_copy(tr_ctx *c, float *A, int slot, int save)
{
    long long per = stash_slot_elems(), at = (long long)slot * per;
    if (per == 0)
        return;
    if (!c->pipe_stash) {
        c->pipe_stash = tr_backend_run_alloc(c, per * tr_pipe_class.stash);
        c->pipe_stash_elems = c->pipe_stash ? per * tr_pipe_class.stash : 0;
        if (!c->pipe_stash) {
            fprintf(stderr, "rank %d: out of %s memory for the pipeline stash (%lld floats)\n", c->desc->rank,
                    tr_backend_name(), per * tr_pipe_class.stash);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    for (int b = 0; b < tr_pipe_class.nstash; b++) {
        const tr_pipe_buf *pb = &tr_pipe_class.stash_bufs[b];
        if (save)
            tr_backend_run_copy(c, c->pipe_stash + at, A + pb->offset, pb->slots);
        else
            tr_backend_run_copy(c, A + pb->offset, c->pipe_stash + at, pb->slots);
        at += stash_buf_elems(pb);
    }
}

void tr_pipe_free(tr_ctx *c)
{
    if (c->pipe_stash)
        tr_backend_run_release(c, c->pipe_stash);
    free(c->pipe_host);
    c->pipe_stash = c->pipe_host = NULL;
    c->pipe_stash_elems = c->pipe_host_cap = 0;
}

void tr_pipe_forward(tr_ctx *c, float *A, int u, int slot)
{
    c->mb = u;
    c->phase = TR_PHASE_FORWARD;
    c->desc->forward(c, A);
    if (tr_pipe_class.stage == tr_pipe_class.stages - 1 && !c->pipe_given_dy)
        tr_backend_objective(c, A); /* the loss of u's rows and dL/dy into grad_x (--dy: already there) */
    stash_copy(c, A, slot, 1);
}

void tr_pipe_backward(tr_ctx *c, float *A, int u, int slot)
{
    stash_copy(c, A, slot, 0);
    c->mb = u;
    c->phase = TR_PHASE_BACKWARD;
    c->desc->backward(c, A);
}

/* The host buffer of n floats a staged block goes through (the first `n` of pipe_host; a send and a receive of one
 * exchange take two halves of a 2n request). */
static float *host_buf(tr_ctx *c, long long n)
{
    if (n > c->pipe_host_cap) {
        free(c->pipe_host);
        c->pipe_host = malloc((size_t)n * sizeof(float));
        c->pipe_host_cap = c->pipe_host ? n : 0;
        if (!c->pipe_host) {
            fprintf(stderr, "rank %d: out of host memory staging a pipeline block (%lld floats)\n", c->desc->rank, n);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    return c->pipe_host;
}

/* One exchange: sn floats of run memory at sbuf to speer and rn from rpeer into rbuf (a count of 0: that half is not
 * posted), with tag; staged through host memory where the run arena is not host memory. */
static void p2p(tr_ctx *c, const float *sbuf, long long sn, int speer, float *rbuf, long long rn, int rpeer, int tag)
{
    const bool direct = tr_backend_run_on_host();
    float *hs = NULL, *hr = NULL;
    if (!direct) {
        float *h = host_buf(c, sn + rn);
        hs = h;
        hr = h + sn;
        if (sn > 0)
            tr_backend_download(c, hs, sbuf, sn); /* waits for the work that wrote the block */
    }
    const float *s = direct ? sbuf : hs;
    float *r = direct ? rbuf : hr;
    if (sn > 0 && rn > 0)
        MPI_CHECK(MPI_Sendrecv(s, (int)sn, MPI_FLOAT, speer, tag, r, (int)rn, MPI_FLOAT, rpeer, tag, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE),
                  "MPI_Sendrecv", TR_WORLD);
    else if (sn > 0)
        MPI_CHECK(MPI_Send(s, (int)sn, MPI_FLOAT, speer, tag, MPI_COMM_WORLD), "MPI_Send", TR_WORLD);
    else if (rn > 0)
        MPI_CHECK(MPI_Recv(r, (int)rn, MPI_FLOAT, rpeer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv", TR_WORLD);
    if (!direct && rn > 0)
        tr_backend_upload(c, rbuf, hr, rn);
    c->p2p_sent += 4 * sn;
    c->p2p_recv += 4 * rn;
}

void tr_pipe_send(tr_ctx *c, const float *buf, long long n, int peer)
{
    p2p(c, buf, n, peer, NULL, 0, -1, 0);
}

void tr_pipe_recv(tr_ctx *c, float *buf, long long n, int peer)
{
    p2p(c, NULL, 0, -1, buf, n, peer, 0);
}

void tr_pipe_sendrecv(tr_ctx *c, const float *sbuf, long long sn, int speer, float *rbuf, long long rn, int rpeer)
{
    p2p(c, sbuf, sn, speer, rbuf, rn, rpeer, 0);
}

/* The tied wte gradient: a joint exchange with the other stage's rank (tag 1, apart from the activation and dL/dx
 * blocks), then g = stage 0's + the last stage's, element by element in that order on both. Its bytes count with the
 * other point-to-point ones (report_p2p_bytes plans them). Where the run arena is not host memory the sum is made on
 * the host, between the download of g and its upload: the same float additions. */
void tr_pipe_tied_sum(tr_ctx *c, float *g, long long n, int peer, int first)
{
    const bool direct = tr_backend_run_on_host();
    float *h = direct ? NULL : host_buf(c, 2 * n);
    float *mine = direct ? g : h, *other = direct ? malloc((size_t)(n > 0 ? n : 1) * sizeof *other) : h + n;
    if (!other) {
        fprintf(stderr, "rank %d: out of memory for the tied wte gradient (%lld floats)\n", c->desc->rank, n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (!direct)
        tr_backend_download(c, mine, g, n);
    MPI_CHECK(MPI_Sendrecv(mine, (int)n, MPI_FLOAT, peer, 1, other, (int)n, MPI_FLOAT, peer, 1, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE),
              "MPI_Sendrecv", TR_WORLD);
    /* test hook (tests/train.sh): leave the gradients unsummed, to prove the losses and the tied check then differ */
    const char *skip = getenv("TESS_TEST_SKIP_TIED_SUM");
    for (long long e = 0; e < n && !(skip && *skip == '1'); e++)
        mine[e] = first ? mine[e] + other[e] : other[e] + mine[e];
    if (direct)
        free(other);
    else
        tr_backend_upload(c, g, mine, n);
    c->p2p_sent += 4 * n;
    c->p2p_recv += 4 * n;
}

int tr_pipe_tied_copy(const tr_rank_desc *d, const tr_param *pr)
{
    const tr_pipe_desc *pd = &tr_pipe_class;
    return pd && pd->stages > 1 && pd->stage > 0 && pd->tied_param >= 0 && pd->tied_param < d->nparams &&
           pr == &d->params[pd->tied_param];
}

long long tr_pipe_tied_check(tr_ctx *c, const float *H)
{
    const tr_pipe_desc *pd = &tr_pipe_class;
    long long bad = 0, all = 0;
    if (pd && pd->stages > 1 && pd->tied_param >= 0) {
        const tr_param *pr = &c->desc->params[pd->tied_param];
        long long n = (long long)pr->rows * pr->cols;
        float *other = malloc((size_t)(n > 0 ? n : 1) * sizeof *other);
        if (!other)
            MPI_Abort(MPI_COMM_WORLD, 1);
        int peer = c->desc->rank + pd->tied_peer;
        MPI_CHECK(MPI_Sendrecv(H + pr->offset, (int)n, MPI_FLOAT, peer, 2, other, (int)n, MPI_FLOAT, peer, 2,
                               MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                  "MPI_Sendrecv", TR_WORLD);
        if (memcmp(other, H + pr->offset, (size_t)n * sizeof *other) != 0) {
            bad = 1;
            fprintf(stderr, "rank %d: %s (stage %d's copy for the tied %s) differs from rank %d's on stage %d\n",
                    c->desc->rank, pr->name, pd->stage, pd->stage == 0 ? "embedding" : "head", peer,
                    pd->stage == 0 ? pd->stages - 1 : 0);
        }
        free(other);
    }
    MPI_Allreduce(&bad, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return all;
}
