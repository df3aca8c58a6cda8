/*
 * place.c - greedy-by-size memory placement over a segment tree of merged
 * address intervals (see place.h for the rule).
 *
 * Time is the step axis 0..S-1, covered by an iterative segment tree of
 * `size` leaves (a power of two). A placed buffer, time range [f,l] and
 * address range [a,b), is stored as [a,b) in cover[c] for each canonical node
 * c of [f,l], and in sub[x] for every such c and all its ancestors x. Each
 * list is sorted and disjoint: touching or overlapping intervals are merged.
 * Then the address ranges used at some step of a query range [f,l] are the
 * union of sub[c] over the canonical nodes c of [f,l] and of cover[x] over
 * their strict ancestors x (a buffer covering an ancestor covers the query's
 * part under it). The greedy's lowest offset is found by sweeping those lists
 * at once: while some list holds an interval meeting [cur, cur+s), cur moves
 * to that interval's aligned end. cur never passes the lowest feasible
 * candidate (0 or the aligned end of a placed buffer), so the sweep returns
 * exactly what scanning every placed buffer would.
 */
#include "place.h"

#include <stdlib.h>
#include <string.h>

typedef struct ivl {
    long long a, b; /* [a, b) */
} ivl;

typedef struct ivlist {
    ivl *v;
    int n, cap;
} ivlist;

/* Lists take their storage from chunks that are freed together: a list that grows moves to a block twice
 * its size and leaves the old one behind, so at most half of what is taken is waste, and one placement
 * makes a few large allocations instead of one per list. */
#define POOL_CHUNK (1 << 16) /* intervals */

typedef struct pool {
    ivl **chunk;
    int nchunks, cap;
    size_t used; /* in the last chunk */
    size_t size; /* of the last chunk */
} pool;

static ivl *pool_take(pool *p, size_t n)
{
    if (p->nchunks == 0 || p->used + n > p->size) {
        if (p->nchunks == p->cap) {
            int cap = p->cap ? 2 * p->cap : 16;
            ivl **nc = realloc(p->chunk, (size_t)cap * sizeof *nc);
            if (!nc)
                return NULL;
            p->chunk = nc;
            p->cap = cap;
        }
        size_t size = n > POOL_CHUNK ? n : POOL_CHUNK;
        ivl *c = malloc(size * sizeof *c);
        if (!c)
            return NULL;
        p->chunk[p->nchunks++] = c;
        p->used = 0;
        p->size = size;
    }
    ivl *v = p->chunk[p->nchunks - 1] + p->used;
    p->used += n;
    return v;
}

static void pool_free(pool *p)
{
    for (int i = 0; i < p->nchunks; i++)
        free(p->chunk[i]);
    free(p->chunk);
}

typedef struct tree {
    pool mem;         /* every list's intervals */
    int size;         /* leaves, a power of two >= steps */
    ivlist *cover;    /* [2*size] */
    ivlist *sub;      /* [2*size] */
    unsigned *stamp;  /* [2*size]: marks nodes already visited by the current operation */
    unsigned now;
    int *nodes;       /* scratch: canonical nodes, then ancestors */
    int *cursor;      /* scratch: one position per list of a query */
    const ivlist **lists; /* scratch: the lists of one query */
    bool oom;
} tree;

static long long align_up(long long x)
{
    return (x + TG_ALIGN_ELEMS - 1) / TG_ALIGN_ELEMS * TG_ALIGN_ELEMS;
}

/* Add [a,b) to L, merging with every interval it touches or overlaps. */
static void list_add(tree *t, ivlist *L, long long a, long long b)
{
    int i = 0, lo = 0, hi = L->n;
    while (lo < hi) { /* first interval with end >= a: it may touch [a,b) from the left */
        int mid = (lo + hi) / 2;
        if (L->v[mid].b >= a)
            hi = mid;
        else
            lo = mid + 1;
    }
    i = lo;
    int j = i;
    while (j < L->n && L->v[j].a <= b) {
        if (L->v[j].a < a)
            a = L->v[j].a;
        if (L->v[j].b > b)
            b = L->v[j].b;
        j++;
    }
    if (j == i) { /* nothing merged: insert at i */
        if (L->n == L->cap) {
            int cap = L->cap ? 2 * L->cap : 4;
            ivl *nv = pool_take(&t->mem, (size_t)cap);
            if (!nv) {
                t->oom = true;
                return;
            }
            if (L->n)
                memcpy(nv, L->v, (size_t)L->n * sizeof *nv);
            L->v = nv;
            L->cap = cap;
        }
        memmove(L->v + i + 1, L->v + i, (size_t)(L->n - i) * sizeof *L->v);
        L->n++;
    } else if (j > i + 1) { /* intervals i..j-1 become one */
        memmove(L->v + i + 1, L->v + j, (size_t)(L->n - j) * sizeof *L->v);
        L->n -= j - i - 1;
    }
    L->v[i].a = a;
    L->v[i].b = b;
}

/* The canonical nodes of [f,l] into t->nodes; returns their count. */
static int canonical(const tree *t, int f, int l)
{
    int n = 0;
    for (int lo = f + t->size, hi = l + t->size + 1; lo < hi; lo >>= 1, hi >>= 1) {
        if (lo & 1)
            t->nodes[n++] = lo++;
        if (hi & 1)
            t->nodes[n++] = --hi;
    }
    return n;
}

static bool tree_init(tree *t, int steps)
{
    memset(t, 0, sizeof *t);
    t->size = 1;
    while (t->size < steps)
        t->size *= 2;
    size_t nn = 2 * (size_t)t->size;
    t->cover = calloc(nn, sizeof *t->cover);
    t->sub = calloc(nn, sizeof *t->sub);
    t->stamp = calloc(nn, sizeof *t->stamp);
    t->nodes = malloc(256 * sizeof *t->nodes);
    t->lists = malloc(256 * sizeof *t->lists);
    t->cursor = malloc(256 * sizeof *t->cursor);
    return t->cover && t->sub && t->stamp && t->nodes && t->lists && t->cursor;
}

static void tree_free(tree *t)
{
    pool_free(&t->mem);
    free(t->cover);
    free(t->sub);
    free(t->stamp);
    free(t->nodes);
    free(t->lists);
    free(t->cursor);
}

/* Lowest aligned offset where s elements fit during steps [f,l]. */
static long long tree_query(tree *t, int f, int l, long long s)
{
    int nc = canonical(t, f, l), nl = 0;
    t->now++;
    for (int i = 0; i < nc; i++) {
        int c = t->nodes[i];
        if (t->sub[c].n)
            t->lists[nl++] = &t->sub[c];
        for (int x = c >> 1; x >= 1 && t->stamp[x] != t->now; x >>= 1) {
            t->stamp[x] = t->now;
            if (t->cover[x].n)
                t->lists[nl++] = &t->cover[x];
        }
    }
    /* cur only grows: each list keeps a cursor at its first interval ending above cur */
    long long cur = 0;
    int *at = t->cursor;
    for (int i = 0; i < nl; i++)
        at[i] = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (int i = 0; i < nl; i++) {
            const ivlist *L = t->lists[i];
            int k = at[i];
            if (k < L->n && L->v[k].b <= cur) { /* gallop, then bisect: lists can hold hundreds of intervals */
                int step = 1, hi = k + 1;
                while (hi < L->n && L->v[hi].b <= cur) {
                    k = hi;
                    step *= 2;
                    hi = k + step;
                }
                if (hi > L->n)
                    hi = L->n;
                int lo = k + 1; /* L->v[k].b <= cur; the answer is in (k, hi] */
                while (lo < hi) {
                    int mid = lo + (hi - lo) / 2;
                    if (L->v[mid].b <= cur)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                k = lo;
            }
            at[i] = k;
            if (k < L->n && L->v[k].a < cur + s) {
                cur = L->v[k].b; /* ends are stored aligned (tg_place) */
                moved = true;
            }
        }
    }
    return cur;
}

static void tree_insert(tree *t, int f, int l, long long a, long long b)
{
    int nc = canonical(t, f, l);
    t->now++;
    for (int i = 0; i < nc; i++) {
        int c = t->nodes[i];
        list_add(t, &t->cover[c], a, b);
        for (int x = c; x >= 1 && t->stamp[x] != t->now; x >>= 1) {
            t->stamp[x] = t->now;
            list_add(t, &t->sub[x], a, b);
        }
    }
}

typedef struct order {
    long long elems;
    int idx, persistent;
} order;

static int cmp_order(const void *pa, const void *pb)
{
    const order *x = pa, *y = pb;
    if (x->persistent != y->persistent)
        return y->persistent - x->persistent; /* persistent first */
    if (!x->persistent && x->elems != y->elems)
        return x->elems < y->elems ? 1 : -1; /* then largest first */
    return (x->idx > y->idx) - (x->idx < y->idx);
}

bool tg_place(tg_place_item *items, int n, int nsteps, long long *arena, tg_err *err)
{
    *arena = 0;
    if (n == 0)
        return true;
    order *ord = malloc((size_t)n * sizeof *ord);
    tree t;
    bool ok = ord && tree_init(&t, nsteps > 0 ? nsteps : 1);
    if (!ok) {
        free(ord);
        if (ord)
            tree_free(&t);
        return tg_fail(err, "out of memory placing %d buffers", n);
    }
    for (int i = 0; i < n; i++)
        ord[i] = (order){items[i].elems, i, items[i].persistent};
    qsort(ord, (size_t)n, sizeof *ord, cmp_order);
    long long top = 0;
    for (int k = 0; k < n && !t.oom; k++) {
        tg_place_item *it = &items[ord[k].idx];
        long long off = tree_query(&t, it->first, it->last, it->elems);
        it->offset = off;
        /* stored up to the aligned end: nothing can start in the pad (offsets are aligned), so collisions are
         * the same, and neighbours merge into one interval */
        tree_insert(&t, it->first, it->last, off, align_up(off + it->elems));
        if (align_up(off + it->elems) > top)
            top = align_up(off + it->elems);
    }
    ok = !t.oom;
    tree_free(&t);
    free(ord);
    if (!ok)
        return tg_fail(err, "out of memory placing %d buffers", n);
    *arena = top;
    return true;
}
