/*
 * tr_kernels.c - the CPU backend's fused kernels: residual add fused with the
 * layernorm row sums, the two-pass layernorm (centred squares, apply), bias +
 * GeLU, and bias + causal softmax attention over the local heads. Statistics
 * accumulate in double; the per-element arithmetic is in tr_math.h, shared
 * with the CUDA kernels.
 *
 * Threads (tr_vec.h): every kernel spreads its rows over the rank's OpenMP
 * threads with a static schedule, each row computed whole by one thread in the
 * order the single-threaded loop used, so the bits do not depend on the thread
 * count (and equal those of the loops before they were threaded); attention
 * spreads its (sequence, head) pairs the same way, each with its own scores
 * scratch. One thread below TR_PAR_MIN elements.
 *
 * Attention works per (sequence, head) on strided views of the [rows, 3*cols]
 * QKV block whose columns are [Q | K | V] of the local head group:
 *   scores[seq,seq] = Q K^T / sqrt(hdim)   (cblas, lda = 3*cols)
 *   causal mask + softmax, row by row
 *   out[:, head]    = P V                  (cblas, ldc = cols)
 */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tr_bf16.h"
#include "tr_ctx.h"
#include "tr_kernels.h"
#include "tr_math.h"
#include "tr_vec.h"

void tr_ln_rowsum(tr_ctx *c, const float *x, int rows, int cols, float *rs)
{
    TIMED_BEGIN;
#pragma omp parallel for schedule(static) if (TR_PAR(rows, cols))
    for (int r = 0; r < rows; r++) {
        double s = 0;
        const float *xr = x + (long)r * cols;
        for (int j = 0; j < cols; j++)
            s += xr[j];
        rs[r] = (float)s;
    }
    TIMED_END(TR_K_LN);
}

void tr_resid_rowsum(tr_ctx *c, float *x, const float *p, const float *bias, int rows, int cols, float *rs)
{
    tr_resid_rowsum_to(c, x, p, bias, rows, cols, rs, x); /* elementwise: in place is safe */
}

void tr_ln_sqdev(tr_ctx *c, const float *x, const float *rs, int rows, int cols, int hidden, float *vs)
{
    TIMED_BEGIN;
#pragma omp parallel for schedule(static) if (TR_PAR(rows, cols))
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (long)r * cols;
        double mean = (double)rs[r] / hidden, s = 0;
        for (int j = 0; j < cols; j++) {
            double dv = xr[j] - mean;
            s += dv * dv;
        }
        vs[r] = (float)s;
    }
    TIMED_END(TR_K_LN);
}

void tr_ln_apply_row(const float *xr, float rs, float vs, const float *gamma, const float *beta, int cols, int hidden,
                     float eps, float *yr)
{
    float inv_n = 1.0f / (float)hidden;
    for (int j = 0; j < cols; j++)
        yr[j] = tr_ln(xr[j], rs, vs, inv_n, eps, gamma[j], beta[j]);
}

void tr_ln_apply(tr_ctx *c, const float *x, const float *rs, const float *vs, const float *gamma, const float *beta,
                 int rows, int cols, int hidden, float eps, float *y)
{
    TIMED_BEGIN;
#pragma omp parallel for schedule(static) if (TR_PAR(rows, cols))
    for (int r = 0; r < rows; r++)
        tr_ln_apply_row(x + (long)r * cols, rs[r], vs[r], gamma, beta, cols, hidden, eps, y + (long)r * cols);
    TIMED_END(TR_K_LN);
}

TR_VEC_CLONES static void bias_gelu_row(float *hr, const float *bias, int cols)
{
    for (int j = 0; j < cols; j++)
        hr[j] = tr_vgelu(hr[j] + bias[j]);
}

void tr_bias_gelu(tr_ctx *c, float *h, const float *bias, int rows, int cols)
{
    TIMED_BEGIN;
#pragma omp parallel for schedule(static) if (TR_PAR(rows, cols))
    for (int r = 0; r < rows; r++)
        bias_gelu_row(h + (long)r * cols, bias, cols);
    TIMED_END(TR_K_GELU);
}

void tr_causal_softmax_row(float *row, int n)
{
    float mx = row[0];
    for (int j = 1; j < n; j++)
        mx = row[j] > mx ? row[j] : mx;
    double sum = 0;
    for (int j = 0; j < n; j++) {
        row[j] = expf(row[j] - mx);
        sum += row[j];
    }
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j++)
        row[j] *= inv;
}

void tr_causal_softmax(float *P, int seq)
{
    for (int i = 0; i < seq; i++) {
        float *row = P + (long)i * seq;
        tr_causal_softmax_row(row, i + 1);
        for (int j = i + 1; j < seq; j++)
            row[j] = 0.0f; /* causal mask */
    }
}

void tr_attention_bias(float *qkv, const float *bias, int nseq, int seq, int heads, int hdim)
{
    int ld = 3 * heads * hdim;
    long rows = (long)nseq * seq;
#pragma omp parallel for schedule(static) if (TR_PAR(rows, ld))
    for (long r = 0; r < rows; r++)
        for (int j = 0; j < ld; j++)
            qkv[r * ld + j] += bias[j];
}

void tr_round_bf16_inplace(float *x, long long n)
{
    for (long long e = 0; e < n; e++)
        x[e] = tr_bf16_to_f32(tr_f32_to_bf16(x[e]));
}

/* One head of tr_attention_seq. */
static void attention_head(const float *blk, float *o, float *scores, int seq, int heads, int hdim, int h,
                           int round_p)
{
    int cols = heads * hdim; /* local width of Q, K, V and out */
    int ld = 3 * cols;
    float scale = 1.0f / sqrtf((float)hdim);
    const float *Q = blk + h * hdim;
    const float *K = blk + cols + h * hdim;
    const float *V = blk + 2 * cols + h * hdim;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, seq, hdim, scale, Q, ld, K, ld, 0.0f, scores, seq);
    tr_causal_softmax(scores, seq);
    if (round_p) /* P as the bf16 program's P V GEMM reads it (docs/BF16.md, "Attention") */
        tr_round_bf16_inplace(scores, (long long)seq * seq);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seq, hdim, seq, 1.0f, scores, seq, V, ld, 0.0f,
                o + h * hdim, cols);
}

void tr_attention_seq(const float *blk, float *o, float *scores, int seq, int heads, int hdim, int round_p)
{
    for (int h = 0; h < heads; h++)
        attention_head(blk, o, scores, seq, heads, hdim, h, round_p);
}

int tr_attention_threads(int units, int seq, int hdim)
{
    int nt = omp_get_max_threads();
    if (units < 2 || nt < 2 || (long long)seq * seq * hdim > TR_BLAS_ONE_THREAD ||
        (long long)units * seq * seq < TR_PAR_MIN)
        return 1;
    return nt < units ? nt : units;
}

void tr_attention(tr_ctx *c, float *qkv, const float *bias, float *out, float *scores, int nseq, int seq, int heads,
                  int hdim)
{
    TIMED_BEGIN;
    long cols = (long)heads * hdim, ss = (long)seq * seq;
    tr_attention_bias(qkv, bias, nseq, seq, heads, hdim);
    int pairs = nseq * heads, nt = tr_attention_threads(pairs, seq, hdim);
    float *more = nt > 1 ? tr_scratch(c, (size_t)(nt - 1) * (size_t)ss) : NULL; /* threads 1.. */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = omp_get_thread_num();
        float *sc = t == 0 ? scores : more + (long)(t - 1) * ss;
#pragma omp for schedule(static)
        for (int p = 0; p < pairs; p++) {
            int s = p / heads, h = p % heads;
            attention_head(qkv + (long)s * seq * 3 * cols, out + (long)s * seq * cols, sc, seq, heads, hdim, h, 0);
        }
    }
    TIMED_END(TR_K_ATTENTION);
}

#define TR_SUMSQ_BLOCK 65536 /* elements of one partial sum of squares */
#define TR_SUMSQ_LANES 8      /* independent partial sums within a block */

/* The squares of g[0, n) (n <= TR_SUMSQ_BLOCK) in double: element e goes to lane e % TR_SUMSQ_LANES, each lane in
 * ascending e, the lanes then added 0, 1, ..., 7. Eight independent sums instead of one chain (whose latency, one
 * add in flight, made the gradient norm's pass over GPT-2 small's 124M gradients ~0.1 s on two cores); the
 * association is fixed by the index, so every vector width (the AVX2 and baseline copies) gives the same bits. */
TR_VEC_CLONES static double sumsq_block(const float *g, long long n)
{
    double lane[TR_SUMSQ_LANES] = {0};
    long long e = 0;
    for (; e + TR_SUMSQ_LANES <= n; e += TR_SUMSQ_LANES)
        for (int l = 0; l < TR_SUMSQ_LANES; l++)
            lane[l] += (double)g[e + l] * (double)g[e + l];
    for (int l = 0; e < n; e++, l++)
        lane[l] += (double)g[e] * (double)g[e];
    double s = 0.0;
    for (int l = 0; l < TR_SUMSQ_LANES; l++)
        s += lane[l];
    return s;
}

/* The sum of squares of g[0, n) in double, as blocks of TR_SUMSQ_BLOCK elements (each summed by sumsq_block) added
 * in block order: the association is fixed by n, so the bits are the same whatever the number of threads that sum
 * the blocks (tr_vec.h). The gradient norm's sums (the CPU backend's tr_backend_grad_sums). */
double tr_sumsq(const float *g, long long n)
{
    long long nb = (n + TR_SUMSQ_BLOCK - 1) / TR_SUMSQ_BLOCK;
    double small[64], *part = nb <= 64 ? small : malloc((size_t)nb * sizeof *part);
    double s = 0.0;
    if (!part) { /* no memory for the partial sums: the same blocks one after another */
        for (long long b = 0; b < nb; b++) {
            long long hi = (b + 1) * TR_SUMSQ_BLOCK < n ? (b + 1) * TR_SUMSQ_BLOCK : n;
            s += sumsq_block(g + b * TR_SUMSQ_BLOCK, hi - b * TR_SUMSQ_BLOCK);
        }
        return s;
    }
#pragma omp parallel for schedule(static) if (TR_PAR(n, 1))
    for (long long b = 0; b < nb; b++) {
        long long hi = (b + 1) * TR_SUMSQ_BLOCK < n ? (b + 1) * TR_SUMSQ_BLOCK : n;
        part[b] = sumsq_block(g + b * TR_SUMSQ_BLOCK, hi - b * TR_SUMSQ_BLOCK);
    }
    for (long long b = 0; b < nb; b++)
        s += part[b];
    if (part != small)
        free(part);
    return s;
}

/* How many of g[0, n) are not finite (an exponent of all ones: Inf or NaN), read as bits (an integer test that
 * vectorises, where !isfinite() per element did not). */
TR_VEC_CLONES static long long nonfinite_range(const float *g, long long n)
{
    long long bad = 0;
    for (long long e = 0; e < n; e++) {
        uint32_t b;
        memcpy(&b, g + e, sizeof b);
        bad += (b & 0x7f800000u) == 0x7f800000u;
    }
    return bad;
}

/* The number of non-finite elements of g[0, n), on the rank's threads (a count: the same whatever the thread
 * count). The divergence check of the gradients no squared sum covers (tr_backend_grad_sums). */
long long tr_nonfinite(const float *g, long long n)
{
    long long bad = 0, nb = (n + TR_SUMSQ_BLOCK - 1) / TR_SUMSQ_BLOCK;
#pragma omp parallel for schedule(static) reduction(+ : bad) if (TR_PAR(n, 1))
    for (long long b = 0; b < nb; b++) {
        long long hi = (b + 1) * TR_SUMSQ_BLOCK < n ? (b + 1) * TR_SUMSQ_BLOCK : n;
        bad += nonfinite_range(g + b * TR_SUMSQ_BLOCK, hi - b * TR_SUMSQ_BLOCK);
    }
    return bad;
}
