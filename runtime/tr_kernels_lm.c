/*
 * tr_kernels_lm.c - the CPU backend's steps of the language model
 * (docs/MODEL.md): the embedding gather and its scatter-add backward, the
 * learned positions and their backward, and the three local parts of the
 * vocab-parallel cross-entropy (row max, sums of exponentials with the target
 * logit, the per-token loss) and its gradient. Every rank holds one vocab
 * block of Vq columns of which `nvalid` are real ids (< V); pad columns never
 * enter a max, a sum or a gradient. Token ids are int32 in the arena.
 * The loss kernels are vectorised (the exponentials in float by tr_vexpf,
 * tr_vec.h) and spread their rows over the rank's threads; sums of the
 * exponentials accumulate in double lanes; every loop runs in a fixed order,
 * so results are deterministic and independent of the thread count. The
 * embedding and position kernels spread rows over the threads, their
 * backward (a scatter-add: rows with the same id or position meet) splits
 * the columns instead, each thread adding every row in order into its own
 * columns: the same sums in the same order whatever the thread count.
 * tr_allreduce_max is the loss's one new collective.
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "tr_bf16.h"
#include "tr_ctx.h"
#include "tr_kernels.h"
#include "tr_vec.h"

void tr_allreduce_max(tr_ctx *c, tr_group g, float *buf, int count)
{
    double t0 = c->timing ? tr_now() : 0;
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_MAX, c->comm[g]);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: MPI_Allreduce(MPI_MAX) over group %d failed (code %d)\n", c->desc->rank, (int)g, rc);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    c->allreduce[g] += 4LL * count; /* bytes */
    c->calls[TR_K_ALLREDUCE]++;
    if (c->timing)
        c->seconds[TR_K_ALLREDUCE] += tr_now() - t0;
}

void tr_embed_rows(tr_ctx *c, const int32_t *tok, const float *E, int v0, int nvalid, int rows, int cols, float *out)
{
    TIMED_BEGIN;
#pragma omp parallel for schedule(static) if (TR_PAR(rows, cols))
    for (int r = 0; r < rows; r++) {
        int id = tok[r] - v0;
        float *o = out + (long)r * cols;
        if (id >= 0 && id < nvalid)
            memcpy(o, E + (long)id * cols, (size_t)cols * sizeof *o);
        else
            memset(o, 0, (size_t)cols * sizeof *o);
    }
    TIMED_END(TR_K_RESID);
}

void tr_pos_add(tr_ctx *c, float *x, const float *wpe, int rows, int cols, int seq)
{
    TIMED_BEGIN;
#pragma omp parallel for schedule(static) if (TR_PAR(rows, cols))
    for (int r = 0; r < rows; r++) {
        const float *p = wpe + (long)(r % seq) * cols;
        float *xr = x + (long)r * cols;
        for (int k = 0; k < cols; k++)
            xr[k] += p[k];
    }
    TIMED_END(TR_K_RESID);
}

/* Max of l[0, n) (a vector reduction: OpenMP simd). */
TR_VEC_CLONES static float row_max(const float *restrict l, int n)
{
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int k = 0; k < n; k++)
        m = l[k] > m ? l[k] : m;
    return m;
}

/* Sum of exp(l[k] - mx) over [0, n): the exponentials in float (tr_vexpf), summed in double lanes. */
TR_VEC_CLONES static double row_expsum(const float *restrict l, float mx, int n)
{
    double e = 0;
#pragma omp simd reduction(+ : e)
    for (int k = 0; k < n; k++)
        e += (double)tr_vexpf(l[k] - mx);
    return e;
}

/* d[k] = exp(l[k] - mx) * f over [0, n). */
TR_VEC_CLONES static void row_softmax(const float *restrict l, float mx, float f, int n, float *restrict d)
{
    for (int k = 0; k < n; k++)
        d[k] = tr_vexpf(l[k] - mx) * f;
}

/* The loss kernels: rows spread over the rank's threads (static schedule), each row computed by one thread in
 * a fixed order, so the bits never depend on the thread count; one thread below TR_PAR_MIN logits. */
void tr_lm_rowmax(tr_ctx *c, const float *L, int rows, int cols, int nvalid, float *mx)
{
    TIMED_BEGIN;
#pragma omp parallel for schedule(static) if ((long)rows * nvalid >= TR_PAR_MIN)
    for (int r = 0; r < rows; r++)
        mx[r] = row_max(L + (long)r * cols, nvalid);
    TIMED_END(TR_K_LOSS);
}

void tr_lm_sums(tr_ctx *c, const float *L, const float *mx, const int32_t *tgt, int v0, int rows, int cols, int nvalid,
                float *s)
{
    TIMED_BEGIN;
#pragma omp parallel for schedule(static) if ((long)rows * nvalid >= TR_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        const float *l = L + (long)r * cols;
        s[r] = (float)row_expsum(l, mx[r], nvalid);
        int t = tgt[r] - v0;
        s[rows + r] = (t >= 0 && t < nvalid) ? l[t] : 0.0f;
    }
    TIMED_END(TR_K_LOSS);
}

void tr_lm_loss(tr_ctx *c, const float *mx, const float *s, int rows, float *loss)
{
    TIMED_BEGIN;
    for (int r = 0; r < rows; r++)
        loss[r] = (float)(log((double)s[r]) + (double)mx[r] - (double)s[rows + r]);
    TIMED_END(TR_K_LOSS);
}

void tr_lm_dlogits(tr_ctx *c, const float *L, const float *mx, const float *s, const int32_t *tgt, int v0, int rows,
                   int cols, int nvalid, float scale, float *dl)
{
    TIMED_BEGIN;
#pragma omp parallel for schedule(static) if ((long)rows * nvalid >= TR_PAR_MIN)
    for (int r = 0; r < rows; r++) {
        float *d = dl + (long)r * cols;
        row_softmax(L + (long)r * cols, mx[r], (float)((double)scale / (double)s[r]), nvalid, d);
        for (int k = nvalid; k < cols; k++)
            d[k] = 0.0f;
        int t = tgt[r] - v0;
        if (t >= 0 && t < nvalid)
            d[t] -= scale;
    }
    TIMED_END(TR_K_LOSS);
}

void tr_zero(tr_ctx *c, float *buf, long long n)
{
    TIMED_BEGIN;
    memset(buf, 0, (size_t)n * sizeof *buf);
    TIMED_END(TR_K_RESID);
}

void tr_embed_rows_bwd(tr_ctx *c, const int32_t *tok, const float *g, int v0, int nvalid, int rows, int cols,
                       float *dE)
{
    TIMED_BEGIN;
#pragma omp parallel if (TR_PAR(rows, cols))
    {
        long lo, hi; /* this thread's columns; every row in order */
        tr_slice(cols, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int r = 0; r < rows; r++) {
            int id = tok[r] - v0;
            if (id < 0 || id >= nvalid)
                continue;
            const float *gr = g + (long)r * cols;
            float *e = dE + (long)id * cols;
            for (long k = lo; k < hi; k++)
                e[k] += gr[k];
        }
    }
    TIMED_END(TR_K_RESID);
}

void tr_pos_bwd(tr_ctx *c, const float *g, int rows, int cols, int seq, int npos, float *dwpe)
{
    TIMED_BEGIN;
#pragma omp parallel if (TR_PAR(rows, cols))
    {
        long lo, hi; /* this thread's columns; every row in order */
        tr_slice(cols, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (int q = 0; q < npos; q++)
            memset(dwpe + (long)q * cols + lo, 0, (size_t)(hi - lo) * sizeof *dwpe);
        for (int r = 0; r < rows; r++) {
            const float *gr = g + (long)r * cols;
            float *p = dwpe + (long)(r % seq) * cols;
            for (long k = lo; k < hi; k++)
                p[k] += gr[k];
        }
    }
    TIMED_END(TR_K_RESID);
}

/* ---- generation (spec mode = "generate"; docs/GENERATE.md) ------------------------------------------------------- */

void tr_pos_add_at(tr_ctx *c, float *x, const float *wpe, const int32_t *pos, int rows, int cols)
{
    TIMED_BEGIN;
    for (int r = 0; r < rows; r++) {
        const float *p = wpe + (long)pos[r] * cols;
        float *xr = x + (long)r * cols;
        for (int k = 0; k < cols; k++)
            xr[k] += p[k];
    }
    TIMED_END(TR_K_RESID);
}

void tr_kv_write(tr_ctx *c, const float *qkv, int nseq, int seq, int cols, int context, float *kv)
{
    TIMED_BEGIN;
    for (int s = 0; s < nseq; s++)
        for (int p = 0; p < seq; p++)
            memcpy(kv + ((long)s * context + p) * 2 * cols, qkv + ((long)s * seq + p) * 3 * cols + cols,
                   (size_t)2 * cols * sizeof *kv);
    TIMED_END(TR_K_RESID);
}

/* bf16 plans (docs/GENERATE.md "bf16"): the cache holds r(K) | r(V), the values the prefill's attention reads */
void tr_kv_write_bf16(tr_ctx *c, const float *qkv, int nseq, int seq, int cols, int context, tr_bf16 *kv)
{
    TIMED_BEGIN;
    for (int s = 0; s < nseq; s++)
        for (int p = 0; p < seq; p++) {
            const float *x = qkv + ((long)s * seq + p) * 3 * cols + cols;
            tr_bf16 *y = kv + ((long)s * context + p) * 2 * cols;
            for (int e = 0; e < 2 * cols; e++)
                y[e] = tr_f32_to_bf16(x[e]);
        }
    TIMED_END(TR_K_RESID);
}

void tr_copy(tr_ctx *c, const float *src, float *dst, long long count)
{
    TIMED_BEGIN;
    memcpy(dst, src, (size_t)count * sizeof *dst);
    TIMED_END(TR_K_RESID);
}

void tr_copy_bf16(tr_ctx *c, const tr_bf16 *src, tr_bf16 *dst, long long count)
{
    TIMED_BEGIN;
    memcpy(dst, src, (size_t)count * sizeof *dst);
    TIMED_END(TR_K_RESID);
}

/* The same arithmetic as the prefill's attention (tr_kernels.c attention_head: scores scaled in the GEMM, the
 * softmax of tr_causal_softmax's row), on one query row against the cache rows 0..pos. */
void tr_attn_decode(tr_ctx *c, float *qkv, const float *bias, float *out, float *kv, const int32_t *pos,
                    float *scores, int nseq, int heads, int hdim, int context)
{
    TIMED_BEGIN;
    int cols = heads * hdim;
    float scale = 1.0f / sqrtf((float)hdim);
    tr_attention_bias(qkv, bias, nseq, 1, heads, hdim);
    for (int s = 0; s < nseq; s++) {
        const float *q = qkv + (long)s * 3 * cols;
        float *cache = kv + (long)s * context * 2 * cols;
        int n = pos[s] + 1;
        memcpy(cache + (long)pos[s] * 2 * cols, q + cols, (size_t)2 * cols * sizeof *cache);
        for (int h = 0; h < heads; h++) {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, n, hdim, scale, cache + h * hdim, 2 * cols, q + h * hdim, 1,
                        0.0f, scores, 1);
            tr_causal_softmax_row(scores, n);
            cblas_sgemv(CblasRowMajor, CblasTrans, n, hdim, 1.0f, cache + cols + h * hdim, 2 * cols, scores, 1, 0.0f,
                        out + (long)s * cols + h * hdim, 1);
        }
    }
    TIMED_END(TR_K_ATTENTION);
}

/* The bf16 decode step (docs/BF16.md "Attention", as tr_attention_bf16 rounds): the biased q, k, v of the token
 * rounded to bf16 (in place in qkv), r(K) | r(V) into the cache, the scores of the rounded q and keys in fp32 (scaled
 * as sgemv's alpha), the softmax of tr_causal_softmax_row, P rounded, P V summed in fp32 in position order, the
 * output rounded. */
void tr_attn_decode_bf16(tr_ctx *c, float *qkv, const float *bias, tr_bf16 *out, tr_bf16 *kv, const int32_t *pos,
                         float *scores, int nseq, int heads, int hdim, int context)
{
    TIMED_BEGIN;
    int cols = heads * hdim;
    float scale = 1.0f / sqrtf((float)hdim);
    float *o = tr_scratch(c, (size_t)hdim); /* [hdim] one head's P V */
    tr_attention_bias(qkv, bias, nseq, 1, heads, hdim);
    for (int s = 0; s < nseq; s++) {
        float *q = qkv + (long)s * 3 * cols;
        tr_round_bf16_inplace(q, 3LL * cols);
        tr_bf16 *cache = kv + (long)s * context * 2 * cols;
        int n = pos[s] + 1;
        for (int e = 0; e < 2 * cols; e++) /* exact: the values are bf16 already */
            cache[(long)pos[s] * 2 * cols + e] = tr_f32_to_bf16(q[cols + e]);
        for (int h = 0; h < heads; h++) {
            const float *qh = q + h * hdim;
            for (int p = 0; p < n; p++) {
                const tr_bf16 *kr = cache + (long)p * 2 * cols + h * hdim;
                float a = 0.0f;
                for (int d = 0; d < hdim; d++)
                    a += qh[d] * tr_bf16_to_f32(kr[d]);
                scores[p] = scale * a;
            }
            tr_causal_softmax_row(scores, n);
            tr_round_bf16_inplace(scores, n);
            for (int d = 0; d < hdim; d++)
                o[d] = 0.0f;
            for (int p = 0; p < n; p++) {
                const tr_bf16 *vr = cache + (long)p * 2 * cols + cols + h * hdim;
                for (int d = 0; d < hdim; d++)
                    o[d] += scores[p] * tr_bf16_to_f32(vr[d]);
            }
            for (int d = 0; d < hdim; d++)
                out[(long)s * cols + h * hdim + d] = tr_f32_to_bf16(o[d]);
        }
    }
    TIMED_END(TR_K_ATTENTION);
}

void tr_lm_argmax(tr_ctx *c, const float *L, int rows, int cols, int nvalid, int vocab0, float *pairs)
{
    TIMED_BEGIN;
    for (int r = 0; r < rows; r++) {
        const float *l = L + (long)r * cols;
        float best = -INFINITY;
        int32_t id = -1;
        for (int k = 0; k < nvalid; k++) /* ascending ids, strictly greater: the lowest id of a tie */
            if (l[k] > best || id < 0) {
                best = l[k];
                id = vocab0 + k;
            }
        if (id < 0) { /* a block of pad columns only: loses every comparison */
            best = -INFINITY;
            id = INT32_MAX;
        }
        pairs[2 * r] = best;
        memcpy(&pairs[2 * r + 1], &id, sizeof id);
    }
    TIMED_END(TR_K_LOSS);
}

void tr_allreduce_maxloc(tr_ctx *c, tr_group g, float *buf, int count)
{
    double t0 = c->timing ? tr_now() : 0;
    _Static_assert(sizeof(struct { float v; int32_t i; }) == 8, "MPI_FLOAT_INT pairs are two 4-byte slots");
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, count / 2, MPI_FLOAT_INT, MPI_MAXLOC, c->comm[g]);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: MPI_Allreduce(MPI_MAXLOC) over group %d failed (code %d)\n", c->desc->rank, (int)g,
                rc);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    c->allreduce[g] += 4LL * count; /* bytes */
    c->calls[TR_K_ALLREDUCE]++;
    if (c->timing)
        c->seconds[TR_K_ALLREDUCE] += tr_now() - t0;
}
