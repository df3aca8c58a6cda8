/*
 * streams.c - which stream each step runs on and what it waits for (the rule
 * is in streams.h), in O((S*K + B) log B) for S steps, K buffer slots per
 * step and B buffers.
 *
 * The direct statement of the rule scans back from each step over the other
 * stream's steps for the latest one that conflicts with it; a step that
 * conflicts with nothing recent scans the whole phase, so a 96-layer training
 * class (32,000 steps) costs up to S^2 conflict checks. Here instead every
 * stream s keeps, for every arena address, the latest step of s that wrote it
 * (W[s]) and the latest that read or wrote it (A[s]). Then the latest step of
 * the other stream o that conflicts with step b is the largest of, over b's
 * buffers: max A[o] over the buffer's addresses where b writes it, max W[o]
 * where b only reads it. Step b waits for that step if it is later than what
 * its stream already waited for (older ones, and everything before the
 * phase, were already ordered), and then records its own buffers in W[s] and
 * A[s]. Step numbers only grow, so "record b on a range" is a range-chmax and
 * "the latest on a range" a range-max: a segment tree over the elementary
 * address intervals between the sorted distinct buffer starts and ends,
 * iterative, with per-node max-below and max-applied-to-the-whole-node
 * values, so neither operation pushes anything down. A buffer whose bytes no
 * other buffer shares (most of a training plan's: weights, gradients,
 * moments) keeps its latest steps itself and stays out of the trees.
 *
 * The pair of slots behind a wait (for the generated comment) is then the
 * first conflicting (slot of b, slot of the waited step) pair in slot order,
 * found by checking the one pair of steps: the same pair the direct scan
 * reports. tests/test_streams.c keeps the direct scan and checks that both give
 * the same fields on every test mesh's plan and on random plans.
 */
#include "streams.h"

#include <stdlib.h>
#include <string.h>

int tg_streams_of(tg_step_kind kind)
{
    switch (kind) {
    case TG_STEP_BCAST:
    case TG_STEP_ALLREDUCE:
    case TG_STEP_REDUCE:
    case TG_STEP_REDUCESCATTER:
    case TG_STEP_ALLGATHER: return TG_STREAM_COMM;
    case TG_STEP_GEMM:
    case TG_STEP_RESID_ROWSUM:
    case TG_STEP_ATTENTION:
    case TG_STEP_LN_ROWSUM:
    case TG_STEP_LN_SQDEV:
    case TG_STEP_LN_APPLY:
    case TG_STEP_BIAS_GELU:
    case TG_STEP_GELU_SAVE:
    case TG_STEP_COLSUM:
    case TG_STEP_GELU_BWD:
    case TG_STEP_LN_BWD_SUMS:
    case TG_STEP_LN_BWD_APPLY:
    case TG_STEP_ATTN_BWD:
    case TG_STEP_ADAMW:
    case TG_STEP_EMBED:
    case TG_STEP_POS_ADD:
    case TG_STEP_LM_ROWMAX:
    case TG_STEP_LM_SUMS:
    case TG_STEP_LM_LOSS:
    case TG_STEP_LM_DLOGITS:
    case TG_STEP_EMBED_BWD:
    case TG_STEP_POS_BWD: return TG_STREAM_COMPUTE;
    case TG_STEP_CAST:
    case TG_STEP_GRAD_ACC:
    case TG_STEP_KV_WRITE:
    case TG_STEP_ATTN_DECODE:
    case TG_STEP_LM_ARGMAX:
    case TG_STEP_COPY: return TG_STREAM_COMPUTE;
    }
    return TG_STREAM_NONE;
}

const char *tg_stream_name(int stream)
{
    return stream == TG_STREAM_COMM ? "comm" : stream == TG_STREAM_COMPUTE ? "compute" : "none";
}

bool tg_streams_slot_used(const tg_step *s, int slot)
{
    if (s->cudnn && s->kind == TG_STEP_ATTENTION && slot == 3)
        return false; /* the CPU program's scores: cuDNN's forward keeps its scores on chip (plan_steps.c) */
    if (s->cudnn && s->kind == TG_STEP_ATTN_BWD && (slot == 0 || slot == 2 || slot == 3))
        return false; /* the CPU program's: cuDNN's backward reads the forward's bf16 QKV and writes a bf16 dQKV */
    return s->buf[slot] >= 0;
}

/* ---- latest step per address range ---------------------------------------------------------- */

/* Over leaves 0..n-1 (n a power of two), node x's children 2x and 2x+1, leaf l at node n+l:
 * below[x] = the largest value recorded on any part of x's range, whole[x] = the largest recorded on all of
 * it. A range's largest value is the largest below[] of its canonical nodes and whole[] of their ancestors,
 * which are the ancestors of the range's first and last leaves. */
typedef struct tree {
    int n;
    int *below, *whole;
} tree;

static int imax(int a, int b)
{
    return a > b ? a : b;
}

/* record v on leaves [l, r) */
static void tree_record(tree *t, int l, int r, int v)
{
    if (l >= r)
        return;
    int a = l + t->n, b = r + t->n, first = a, last = b - 1;
    for (; a < b; a >>= 1, b >>= 1) {
        if (a & 1) {
            t->below[a] = imax(t->below[a], v);
            t->whole[a] = imax(t->whole[a], v);
            a++;
        }
        if (b & 1) {
            b--;
            t->below[b] = imax(t->below[b], v);
            t->whole[b] = imax(t->whole[b], v);
        }
    }
    for (int x = first >> 1; x; x >>= 1)
        t->below[x] = imax(t->below[x], v);
    for (int x = last >> 1; x; x >>= 1)
        t->below[x] = imax(t->below[x], v);
}

/* the largest value recorded on any leaf of [l, r), -1 if none */
static int tree_latest(const tree *t, int l, int r)
{
    if (l >= r)
        return -1;
    int v = -1, a = l + t->n, b = r + t->n, first = a, last = b - 1;
    for (; a < b; a >>= 1, b >>= 1) {
        if (a & 1)
            v = imax(v, t->below[a++]);
        if (b & 1)
            v = imax(v, t->below[--b]);
    }
    for (int x = first >> 1; x; x >>= 1)
        v = imax(v, t->whole[x]);
    for (int x = last >> 1; x; x >>= 1)
        v = imax(v, t->whole[x]);
    return v;
}

/* ---- the latest writer and accessor of every address, per stream ------------------------------- */

/* Buffers whose bytes no other buffer shares (weights, gradients, moments: most of a training plan's) are
 * only touched through themselves, so their latest steps are kept per buffer; the trees cover the elementary
 * intervals between the starts and ends of the others. Record r: 0, 1 = W[compute], W[comm]; 2, 3 = A[...]. */
typedef struct latest {
    int *lo, *hi; /* per buffer: its leaves [lo, hi) in the trees; lo = -1: private */
    int *own;     /* private buffers: own[r * nbufs + id] */
    int nbufs;
    tree t[4];
    int *store;
} latest;

typedef struct span {
    long long a, b; /* [a, b) */
    int id;
} span;

static int cmp_span(const void *x, const void *y)
{
    const span *p = x, *q = y;
    return (p->a > q->a) - (p->a < q->a);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* index of v in the sorted array c[0..n) (v is in it) */
static int coord_index(const long long *c, int n, long long v)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (c[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void latest_free(latest *L)
{
    free(L->lo);
    free(L->hi);
    free(L->own);
    free(L->store);
}

static bool latest_init(latest *L, const tg_class_plan *cp)
{
    int nb = cp->nbufs > 0 ? cp->nbufs : 1, n = 1, nd = 0;
    memset(L, 0, sizeof *L);
    L->nbufs = cp->nbufs;
    L->lo = malloc((size_t)nb * sizeof *L->lo);
    L->hi = malloc((size_t)nb * sizeof *L->hi);
    L->own = malloc(4 * (size_t)nb * sizeof *L->own);
    span *sp = malloc((size_t)nb * sizeof *sp);
    long long *coord = malloc(2 * (size_t)nb * sizeof *coord);
    if (!L->lo || !L->hi || !L->own || !sp || !coord)
        goto fail;
    for (int i = 0; i < cp->nbufs; i++)
        sp[i] = (span){cp->bufs[i].offset, cp->bufs[i].offset + cp->bufs[i].elems, i};
    qsort(sp, (size_t)cp->nbufs, sizeof *sp, cmp_span);
    long long before = 0; /* the largest end of the buffers sorted before */
    int nc = 0;
    for (int k = 0; k < cp->nbufs; k++) {
        int alone = (k == 0 || before <= sp[k].a) && (k + 1 == cp->nbufs || sp[k].b <= sp[k + 1].a);
        L->lo[sp[k].id] = alone ? -1 : 0;
        if (!alone) {
            coord[nc++] = sp[k].a;
            coord[nc++] = sp[k].b;
        }
        if (k == 0 || sp[k].b > before)
            before = sp[k].b;
    }
    qsort(coord, (size_t)nc, sizeof *coord, cmp_ll);
    for (int i = 0; i < nc; i++)
        if (nd == 0 || coord[i] != coord[nd - 1])
            coord[nd++] = coord[i];
    for (int i = 0; i < cp->nbufs; i++)
        if (L->lo[i] >= 0) {
            L->lo[i] = coord_index(coord, nd, cp->bufs[i].offset);
            L->hi[i] = coord_index(coord, nd, cp->bufs[i].offset + cp->bufs[i].elems);
        }
    while (n < nd)
        n *= 2;
    L->store = malloc(4 * 4 * (size_t)n * sizeof *L->store);
    if (!L->store)
        goto fail;
    for (size_t i = 0; i < 4 * 4 * (size_t)n; i++)
        L->store[i] = -1;
    for (int r = 0; r < 4; r++)
        L->t[r] = (tree){n, L->store + (size_t)r * 4 * n, L->store + (size_t)r * 4 * n + 2 * (size_t)n};
    for (size_t i = 0; i < 4 * (size_t)nb; i++)
        L->own[i] = -1;
    free(sp);
    free(coord);
    return true;
fail:
    free(sp);
    free(coord);
    latest_free(L);
    return false;
}

/* the latest step in record r on buffer id's bytes, -1 if none */
static int latest_get(const latest *L, int r, int id)
{
    return L->lo[id] < 0 ? L->own[r * L->nbufs + id] : tree_latest(&L->t[r], L->lo[id], L->hi[id]);
}

static void latest_put(latest *L, int r, int id, int step)
{
    if (L->lo[id] < 0)
        L->own[r * L->nbufs + id] = step;
    else
        tree_record(&L->t[r], L->lo[id], L->hi[id], step);
}

/* ---- the pass ---------------------------------------------------------------------------- */

/* The first (slot of b, slot of a) pair, in slot order, whose buffers share arena bytes with one of the two
 * writing. The caller knows there is one. */
static void conflict_slots(const tg_class_plan *cp, const tg_step *b, const tg_step *a, int *sb, int *sa)
{
    for (int x = 0; x < TG_STEP_MAXBUF; x++) {
        if (!tg_streams_slot_used(b, x))
            continue;
        const tg_buf *bx = &cp->bufs[b->buf[x]];
        for (int y = 0; y < TG_STEP_MAXBUF; y++) {
            if (!tg_streams_slot_used(a, y) || !((b->acc[x] | a->acc[y]) & TG_ACC_W))
                continue;
            const tg_buf *ay = &cp->bufs[a->buf[y]];
            if (bx->offset < ay->offset + ay->elems && ay->offset < bx->offset + bx->elems) {
                *sb = x;
                *sa = y;
                return;
            }
        }
    }
    *sb = *sa = -1; /* not reached */
}

bool tg_streams_plan(tg_class_plan *cp, tg_err *err)
{
    cp->comm_steps = cp->waits = cp->late_bcasts = cp->overlapped_bcasts = 0;
    for (int i = 0; i < cp->nbufs; i++)
        if (cp->bufs[i].elems <= 0)
            return tg_fail(err, "internal planner error: class (i=%d, j=%d) buffer %s has %lld elements", cp->i,
                           cp->j, cp->bufs[i].name, cp->bufs[i].elems);
    latest L;
    if (!latest_init(&L, cp))
        return tg_fail(err, "out of memory ordering the steps of class (i=%d, j=%d)", cp->i, cp->j);
    int waited[2] = {-1, -1}; /* per stream: the latest step of the other stream it already waited for */
    int last_gemm = -1;
    for (int b = 0; b < cp->nsteps; b++) {
        tg_step *s = &cp->steps[b];
        /* each phase opens by joining the two streams: nothing before it needs a wait */
        if (b > 0 && s->phase != cp->steps[b - 1].phase)
            waited[0] = waited[1] = b - 1;
        s->stream = tg_streams_of(s->kind);
        s->wait = s->wait_slot = s->wait_other_slot = s->overlaps = -1;
        s->signal = 0;
        if (s->stream == TG_STREAM_NONE)
            continue;
        int me = s->stream, other = 1 - me, hit = -1;
        for (int x = 0; x < TG_STEP_MAXBUF; x++)
            if (tg_streams_slot_used(s, x))
                hit = imax(hit, latest_get(&L, (s->acc[x] & TG_ACC_W) ? 2 + other : other, s->buf[x]));
        if (hit > waited[me] && cp->steps[hit].last_mb && !s->last_mb) {
            /* a step that runs on every micro-batch would wait for one that runs on the last only: on the others
             * its wait would order nothing (planners put nothing after a gradient's once-per-step all-reduce that
             * touches that gradient in the same phase) */
            int sb, sa;
            conflict_slots(cp, s, &cp->steps[hit], &sb, &sa);
            latest_free(&L);
            return tg_fail(err, "internal planner error: class (i=%d, j=%d) step %d (L%d %s %s) waits for step %d (L%d "
                                "%s %s), which runs on the last micro-batch only (buffers %s, %s)", cp->i, cp->j, b,
                           s->layer, s->op, tg_step_kind_name(s->kind), hit, cp->steps[hit].layer, cp->steps[hit].op,
                           tg_step_kind_name(cp->steps[hit].kind), sb >= 0 ? cp->bufs[s->buf[sb]].name : "?",
                           sa >= 0 ? cp->bufs[cp->steps[hit].buf[sa]].name : "?");
        }
        if (hit > waited[me]) {
            s->wait = hit;
            conflict_slots(cp, s, &cp->steps[hit], &s->wait_slot, &s->wait_other_slot);
            cp->steps[hit].signal = 1;
            /* a step that runs on the last micro-batch only orders nothing on the others: the steps of its stream
             * after it do not count its wait as theirs */
            if (!s->last_mb)
                waited[me] = hit;
            cp->waits++;
        }
        for (int x = 0; x < TG_STEP_MAXBUF; x++)
            if (tg_streams_slot_used(s, x)) {
                latest_put(&L, 2 + me, s->buf[x], b);
                if (s->acc[x] & TG_ACC_W)
                    latest_put(&L, me, s->buf[x], b);
            }
        cp->comm_steps += me == TG_STREAM_COMM;
        /* a bcast of SUMMA step t >= 1 runs beside the GEMM before it unless it must wait for it */
        if (s->kind == TG_STEP_BCAST && s->t >= 1) {
            cp->late_bcasts++;
            if (last_gemm >= 0 && s->wait < last_gemm) {
                s->overlaps = last_gemm;
                cp->overlapped_bcasts++;
            }
        }
        if (s->kind == TG_STEP_GEMM)
            last_gemm = b;
    }
    latest_free(&L);
    return true;
}
