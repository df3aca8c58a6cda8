/*
 * tr_kernels_bwd.c - the CPU backend's training kernels: the forward variants
 * that keep what the backward needs (out-of-place residual, GeLU with its
 * pre-activation kept), column sums for bias gradients, GeLU, layernorm and
 * attention backward, and the AdamW step (vectorised). Sums accumulate in double.
 *
 * Threads (tr_vec.h), each output element computed by one thread in the order
 * of the single-threaded loop, so the bits do not depend on the thread count:
 * row kernels spread rows (static schedule); elementwise ones (GeLU backward,
 * AdamW) fixed slices; the column sums (bias gradients, dgamma and dbeta)
 * split the columns, each thread walking all rows in order over blocks of its
 * columns (TR_COLBLK sums in double on its stack: the same sums in the same
 * order as a column at a time, read row by row); attention backward spreads
 * its (sequence, head) pairs, each thread with its own probs and dscores.
 *
 * Layernorm backward, y = xhat*gamma + beta, xhat = (x - mean) * rstd, per token over all
 * C columns (this rank holds C/q of them; s1, s2 are summed over the row group between
 * the two parts):
 *   dxhat = dy * gamma;  s1 = sum dxhat;  s2 = sum dxhat * xhat
 *   dx    = rstd * (dxhat - s1/C - xhat * s2/C)
 * Attention backward per (sequence, head), P = softmax(mask(Q K^T / sqrt(D))), O = P V:
 *   dV = P^T dO;  dP = dO V^T;  dS = P * (dP - rowsum(dP * P));  dQ = dS K / sqrt(D);
 *   dK = dS^T Q / sqrt(D)     (P recomputed from Q and K rather than stored)
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "tr_bf16.h"
#include "tr_ctx.h"
#include "tr_kernels.h"
#include "tr_math.h"
#include "tr_vec.h"

void tr_resid_rowsum_to(tr_ctx *c, const float *x, const float *p, const float *bias, int rows, int cols, float *rs,
                        float *y)
{
    TIMED_BEGIN;
#pragma omp parallel for schedule(static) if (TR_PAR(rows, cols))
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (long)r * cols, *pr = p + (long)r * cols;
        float *yr = y + (long)r * cols;
        double s = 0;
        for (int j = 0; j < cols; j++) {
            yr[j] = xr[j] + (pr[j] + bias[j]);
            s += yr[j];
        }
        if (rs)
            rs[r] = (float)s;
    }
    TIMED_END(TR_K_RESID);
}

TR_VEC_CLONES void tr_bias_gelu_save_row(float *ur, const float *bias, float *gr, int cols)
{
    for (int j = 0; j < cols; j++) {
        ur[j] += bias[j];
        gr[j] = tr_vgelu(ur[j]);
    }
}

void tr_bias_gelu_save(tr_ctx *c, float *u, const float *bias, float *g, int rows, int cols)
{
    TIMED_BEGIN;
#pragma omp parallel for schedule(static) if (TR_PAR(rows, cols))
    for (int r = 0; r < rows; r++)
        tr_bias_gelu_save_row(u + (long)r * cols, bias, g + (long)r * cols, cols);
    TIMED_END(TR_K_GELU);
}

#define TR_COLBLK 256 /* columns a thread sums at once (doubles on its stack) */

void tr_colsum(tr_ctx *c, const float *dy, int rows, int cols, float *db)
{
    TIMED_BEGIN;
#pragma omp parallel if (TR_PAR(rows, cols))
    {
        long lo, hi;
        tr_slice(cols, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (long j0 = lo; j0 < hi; j0 += TR_COLBLK) {
            int w = (int)(hi - j0 < TR_COLBLK ? hi - j0 : TR_COLBLK);
            double acc[TR_COLBLK];
            for (int k = 0; k < w; k++)
                acc[k] = 0;
            for (int r = 0; r < rows; r++) {
                const float *d = dy + (long)r * cols + j0;
                for (int k = 0; k < w; k++)
                    acc[k] += d[k];
            }
            for (int k = 0; k < w; k++)
                db[j0 + k] = (float)acc[k];
        }
    }
    TIMED_END(TR_K_RESID);
}

TR_VEC_CLONES static void gelu_bwd_slice(float *dg, const float *u, long lo, long hi)
{
    for (long e = lo; e < hi; e++)
        dg[e] *= tr_vgelu_grad(u[e]);
}

void tr_gelu_bwd(tr_ctx *c, float *dg, const float *u, int rows, int cols)
{
    TIMED_BEGIN;
    long n = (long)rows * cols;
#pragma omp parallel if (TR_PAR(n, 1))
    {
        long lo, hi;
        tr_slice(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        gelu_bwd_slice(dg, u, lo, hi);
    }
    TIMED_END(TR_K_GELU);
}

static inline float ln_rstd(float vs, int hidden, float eps)
{
    return 1.0f / sqrtf(vs / (float)hidden + eps);
}

void tr_ln_bwd_sums(tr_ctx *c, const float *dy, const float *x, const float *rs, const float *vs, const float *gamma,
                    int rows, int cols, int hidden, float eps, float *s, float *dgamma, float *dbeta)
{
    TIMED_BEGIN;
#pragma omp parallel if (TR_PAR(rows, cols))
    {
        /* dgamma, dbeta: this thread's columns, all rows in order */
        long lo, hi;
        tr_slice(cols, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        for (long j0 = lo; j0 < hi; j0 += TR_COLBLK) {
            int w = (int)(hi - j0 < TR_COLBLK ? hi - j0 : TR_COLBLK);
            double dg[TR_COLBLK], db[TR_COLBLK];
            for (int k = 0; k < w; k++)
                dg[k] = db[k] = 0;
            for (int r = 0; r < rows; r++) {
                float mean = rs[r] / (float)hidden, rstd = ln_rstd(vs[r], hidden, eps);
                const float *xr = x + (long)r * cols + j0, *dr = dy + (long)r * cols + j0;
                for (int k = 0; k < w; k++) {
                    float xhat = (xr[k] - mean) * rstd, d = dr[k];
                    dg[k] += (double)d * xhat;
                    db[k] += d;
                }
            }
            for (int k = 0; k < w; k++) {
                dgamma[j0 + k] = (float)dg[k];
                dbeta[j0 + k] = (float)db[k];
            }
        }
        /* s1, s2: rows */
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            float mean = rs[r] / (float)hidden, rstd = ln_rstd(vs[r], hidden, eps);
            double s1 = 0, s2 = 0;
            for (int j = 0; j < cols; j++) {
                float xhat = (x[(long)r * cols + j] - mean) * rstd;
                float dxhat = dy[(long)r * cols + j] * gamma[j];
                s1 += dxhat;
                s2 += (double)dxhat * xhat;
            }
            s[r] = (float)s1;
            s[rows + r] = (float)s2;
        }
    }
    TIMED_END(TR_K_LN);
}

void tr_ln_bwd_apply(tr_ctx *c, const float *dy, const float *x, const float *rs, const float *vs, const float *gamma,
                     const float *s, int rows, int cols, int hidden, float eps, float *g)
{
    TIMED_BEGIN;
    float inv_n = 1.0f / (float)hidden;
#pragma omp parallel for schedule(static) if (TR_PAR(rows, cols))
    for (int r = 0; r < rows; r++) {
        float mean = rs[r] * inv_n, rstd = ln_rstd(vs[r], hidden, eps);
        float m1 = s[r] * inv_n, m2 = s[rows + r] * inv_n;
        for (int j = 0; j < cols; j++) {
            long e = (long)r * cols + j;
            float xhat = (x[e] - mean) * rstd;
            float dxhat = dy[e] * gamma[j];
            g[e] += rstd * (dxhat - m1 - xhat * m2);
        }
    }
    TIMED_END(TR_K_LN);
}

/* One head of tr_attention_bwd_seq. */
static void attention_bwd_head(const float *blk, const float *dO0, float *dblk, float *probs, float *dscores, int seq,
                               int heads, int hdim, int h, int round)
{
    int cols = heads * hdim, ld = 3 * cols;
    float scale = 1.0f / sqrtf((float)hdim);
    long long ss = (long long)seq * seq;
    const float *Q = blk + h * hdim, *K = blk + cols + h * hdim, *V = blk + 2 * cols + h * hdim;
    float *dQ = dblk + h * hdim, *dK = dblk + cols + h * hdim, *dV = dblk + 2 * cols + h * hdim;
    const float *dO = dO0 + h * hdim;
    /* recompute P */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, seq, hdim, scale, Q, ld, K, ld, 0.0f, probs, seq);
    tr_causal_softmax(probs, seq);
    if (round) /* the P the bf16 forward's P V read, and the backward's GEMMs read */
        tr_round_bf16_inplace(probs, ss);
    /* dV = P^T dO */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, seq, hdim, seq, 1.0f, probs, seq, dO, cols, 0.0f, dV, ld);
    /* dP = dO V^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, seq, hdim, 1.0f, dO, cols, V, ld, 0.0f, dscores, seq);
    /* dS = P * (dP - rowsum(dP * P)), zero above the diagonal */
    for (int i = 0; i < seq; i++) {
        float *p = probs + (long)i * seq, *dp = dscores + (long)i * seq;
        double dot = 0;
        for (int j = 0; j <= i; j++)
            dot += (double)dp[j] * p[j];
        for (int j = 0; j <= i; j++)
            dp[j] = p[j] * (dp[j] - (float)dot);
        for (int j = i + 1; j < seq; j++)
            dp[j] = 0.0f;
    }
    if (round) /* dS as the dQ and dK GEMMs of the bf16 program read it */
        tr_round_bf16_inplace(dscores, ss);
    /* dQ = dS K * scale;  dK = dS^T Q * scale */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seq, hdim, seq, scale, dscores, seq, K, ld, 0.0f, dQ, ld);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, seq, hdim, seq, scale, dscores, seq, Q, ld, 0.0f, dK, ld);
}

void tr_attention_bwd_seq(const float *blk, const float *dO0, float *dblk, float *probs, float *dscores, int seq,
                          int heads, int hdim, int round)
{
    for (int h = 0; h < heads; h++)
        attention_bwd_head(blk, dO0, dblk, probs, dscores, seq, heads, hdim, h, round);
}

void tr_attention_bwd(tr_ctx *c, const float *qkv, const float *dout, float *dqkv, float *probs, float *dscores,
                      int nseq, int seq, int heads, int hdim)
{
    TIMED_BEGIN;
    long cols = (long)heads * hdim, ld = 3 * cols, ss = (long)seq * seq;
    int pairs = nseq * heads, nt = tr_attention_threads(pairs, seq, hdim);
    float *more = nt > 1 ? tr_scratch(c, (size_t)(nt - 1) * 2 * (size_t)ss) : NULL; /* threads 1.. */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = omp_get_thread_num();
        float *pr = t == 0 ? probs : more + (long)(t - 1) * 2 * ss, *ds = t == 0 ? dscores : pr + ss;
#pragma omp for schedule(static)
        for (int p = 0; p < pairs; p++) {
            int sq = p / heads, h = p % heads;
            attention_bwd_head(qkv + (long)sq * seq * ld, dout + (long)sq * seq * cols, dqkv + (long)sq * seq * ld,
                               pr, ds, seq, heads, hdim, h, 0);
        }
    }
    TIMED_END(TR_K_ATTENTION);
}

/* AdamW on [0, n) of one slice: restrict (the four arrays never overlap) and no calls, so it vectorises. */
TR_VEC_CLONES static void adamw_slice(float *restrict param, const float *restrict grad, float *restrict m,
                                      float *restrict v, long n, float b1, float b2, float lr, float eps, float wd,
                                      float c1, float c2)
{
    for (long e = 0; e < n; e++) {
        float g = grad[e];
        float me = b1 * m[e] + (1.0f - b1) * g;
        float ve = b2 * v[e] + (1.0f - b2) * g * g;
        m[e] = me;
        v[e] = ve;
        float mhat = me / c1, vhat = ve / c2;
        param[e] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * param[e]);
    }
}

void tr_adamw(tr_ctx *c, float *param, const float *grad, float *m, float *v, int n, int decay)
{
    TIMED_BEGIN;
    const tr_model_desc *md = &tr_model;
    float b1 = (float)md->beta1, b2 = (float)md->beta2, lr = (float)c->lr, eps = (float)md->adam_eps;
    float wd = decay ? (float)md->weight_decay : 0.0f;
    float c1 = (float)(1.0 - pow(md->beta1, c->opt_step)), c2 = (float)(1.0 - pow(md->beta2, c->opt_step));
    /* elementwise: each thread a fixed slice, the bits independent of the thread count (tr_vec.h) */
#pragma omp parallel if (n >= TR_PAR_MIN)
    {
        long lo, hi;
        tr_slice(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        adamw_slice(param + lo, grad + lo, m + lo, v + lo, hi - lo, b1, b2, lr, eps, wd, c1, c2);
    }
    TIMED_END(TR_K_OPTIMIZER);
}

void tr_adamw_multi(tr_ctx *c, float *A, const tr_adamw_tensor *t, int n)
{
    TIMED_BEGIN;
    const tr_model_desc *md = &tr_model;
    float b1 = (float)md->beta1, b2 = (float)md->beta2, lr = (float)c->lr, eps = (float)md->adam_eps;
    float wd = (float)md->weight_decay;
    float c1 = (float)(1.0 - pow(md->beta1, c->opt_step)), c2 = (float)(1.0 - pow(md->beta2, c->opt_step));
    long long total = 0;
    int member = c->desc->key[TR_DEP]; /* optimizer.shard: which slice of a sliced row this rank updates */
    for (int i = 0; i < n; i++)
        total += t[i].count;
    /* elementwise: each thread the same fixed slice of every tensor (tr_vec.h), no barrier between tensors (their
     * bytes are disjoint); the bf16 copy of a slice is rounded by the thread that updated it */
#pragma omp parallel if (total >= TR_PAR_MIN)
    {
        int th = omp_get_thread_num(), nth = omp_get_num_threads();
        for (int i = 0; i < n; i++) {
            long lo, hi, n_i = (long)t[i].count, off = 0; /* off: a slice's place in param and grad */
            if (t[i].slice_of > 0) {
                off = (long)member * n_i;
                n_i = off >= t[i].slice_of ? 0 : (t[i].slice_of - off < n_i ? (long)(t[i].slice_of - off) : n_i);
            }
            tr_slice(n_i, th, nth, &lo, &hi);
            float *p = A + t[i].param + off + lo;
            adamw_slice(p, A + t[i].grad + off + lo, A + t[i].m + lo, A + t[i].v + lo, hi - lo, b1, b2, lr, eps,
                        t[i].decay ? wd : 0.0f, c1, c2);
            if (t[i].w16 >= 0) {
                tr_bf16 *w = (tr_bf16 *)(A + t[i].w16) + off + lo;
                for (long e = 0; e < hi - lo; e++)
                    w[e] = tr_f32_to_bf16(p[e]);
            }
        }
    }
    TIMED_END(TR_K_OPTIMIZER);
}
