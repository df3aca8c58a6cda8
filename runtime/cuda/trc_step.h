/*
 * trc_step.h - the layout of a training step's reductions in the CUDA backend (trc_step.cu), shared with the
 * CPU emulation (tests/cuda/emu.cc), which sums in the same order and so predicts the device's bits.
 *
 * A sum over N elements runs on TRC_RED_BLOCKS blocks of TRC_RED_THREADS threads: block b owns the
 * contiguous chunk [b*ch, min(N, (b+1)*ch)), ch = ceil(N / TRC_RED_BLOCKS); thread t adds the chunk's
 * elements t, t + TRC_RED_THREADS, ... in that order into a double (IEEE round-to-nearest operations, no
 * fused multiply-add); the block's threads are then added pairwise (thread t takes t + s, for
 * s = TRC_RED_THREADS/2 .. 1) into the block's partial; the TRC_RED_BLOCKS partials are added the same way
 * by one block. A fixed order: every run of the same arena gives the same bits, on any GPU.
 *
 * The gradients are walked as one flattened array: the rank's gradient shards one after another in parameter
 * order, each row-major ([rows, cols] at grad_offset). An element counts in the norm ("canon") when its shard
 * is this rank's canonical copy (tr_clip_canonical) and it lies in one of the shard's pieces (local rows
 * [0, nr), columns [c0, c0 + nc)): exactly the elements the CPU backend's clip_local (tr_backend_cpu.c) adds. Every other element (replicas,
 * padding) goes into "rest", whose only use is to be finite or not. optimizer.shard: a sliced shard's elements
 * count where they lie in this rank's slice of it (every member of dep its own), as clip_local counts them.
 */
#ifndef TRC_STEP_H
#define TRC_STEP_H

extern "C" {
#include "tr.h"
#include "tr_clip.h"
}

#ifdef __CUDACC__
#define TRC_HD __host__ __device__
#else
#define TRC_HD
#endif

enum { TRC_RED_BLOCKS = 1024, TRC_RED_THREADS = 256 };

/* One gradient shard as the flattened walk sees it. */
typedef struct trc_grad_seg {
    long long grad_offset; /* arena offset of the shard, floats */
    long long start;       /* its first flattened index (the entry after the last: start = the total) */
    int cols;
    int canonical;
    int npieces;
    int nr[3], c0[3], nc[3];
    long long slice_lo, slice_hi; /* optimizer.shard: the elements [lo, hi) of this rank's slice count, no piece */
    int sliced;
} trc_grad_seg;

/* segs[d->nparams + 1]: the shards and a last entry whose start is the number of gradient elements (returned). */
static inline long long trc_grad_segs(const tr_rank_desc *d, trc_grad_seg *segs)
{
    long long at = 0;
    for (int i = 0; i < d->nparams; i++) {
        const tr_param *p = &d->params[i];
        trc_grad_seg *s = &segs[i];
        *s = trc_grad_seg{};
        s->grad_offset = p->grad_offset;
        s->start = at;
        s->cols = p->cols > 0 ? p->cols : 1;
        s->canonical = tr_clip_canonical(d, p);
        s->npieces = p->npieces < 3 ? p->npieces : 3;
        for (int c = 0; c < s->npieces; c++) {
            s->nr[c] = p->piece[c].nr;
            s->c0[c] = p->piece[c].dst_col;
            s->nc[c] = p->piece[c].nc;
        }
        if (p->shard > 0 && !tr_pipe_tied_copy(d, p)) { /* optimizer.shard: every member of dep counts its slice
                                                           * (clip_local's rule; never the last stage's tied copy) */
            long long n = (long long)p->rows * p->cols, lo = (long long)d->key[TR_DEP] * p->shard;
            s->sliced = 1;
            s->slice_lo = lo < n ? lo : n;
            s->slice_hi = lo + p->shard < n ? lo + p->shard : n;
        }
        at += (long long)p->rows * p->cols;
    }
    segs[d->nparams] = trc_grad_seg{};
    segs[d->nparams].start = at;
    return at;
}

/* Does local element (row a, column b) of s count in the norm? */
TRC_HD static inline bool trc_seg_counted(const trc_grad_seg *s, int a, int b)
{
    if (s->sliced) {
        const long long e = (long long)a * s->cols + b;
        return e >= s->slice_lo && e < s->slice_hi;
    }
    if (!s->canonical)
        return false;
    for (int c = 0; c < s->npieces; c++)
        if (a < s->nr[c] && b >= s->c0[c] && b < s->c0[c] + s->nc[c])
            return true;
    return false;
}

/* The segment holding flattened element e (the last of equal starts: empty shards are skipped). */
TRC_HD static inline int trc_seg_find(const trc_grad_seg *segs, int nsegs, long long e)
{
    int lo = 0, hi = nsegs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (segs[mid].start <= e)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The chunk of each block for n elements. */
static inline long long trc_red_chunk(long long n)
{
    return (n + TRC_RED_BLOCKS - 1) / TRC_RED_BLOCKS;
}

#endif
