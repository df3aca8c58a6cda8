/*
 * tr_kernels_bf16.c - the CPU backend's bf16 steps (dtype = "bf16";
 * docs/BF16.md): the cast of a float32 buffer to bf16, the GEMM with bf16
 * operands and a float32 result, the bf16-output variants of layernorm
 * apply and bias + GeLU, attention forward and backward with their GEMM
 * operands in bf16, and the column sums of a bf16 dy (attention = "cudnn").
 * (The bf16 broadcast is with the other collectives, in tr_comm.c.)
 *
 * Design. Every rounding is tr_f32_to_bf16 (round to nearest, ties to even;
 * runtime/tr_bf16.h), so the same float32 bits give the same bf16 bits on
 * every rank. Debian's OpenBLAS has no bf16 GEMM, so tr_gemm_bf16 widens A
 * and B to float32 (exact: a bf16 value is a float32 whose low 16 bits are
 * zero), keeping their leading dimensions, and calls tr_sgemm (tr_blas.h) exactly as
 * tr_gemm_ex does: the result is bitwise tr_gemm_ex of the widened operands.
 * The fused kernels do not repeat the float32 kernels' arithmetic: they run
 * the same per-row (per-sequence) bodies (tr_kernels.h) into a float32
 * scratch and round it, so each bf16 output is exactly tr_f32_to_bf16 of what
 * the float32 kernel writes on the same inputs (bf16 training's bias + GeLU
 * rounds both of its outputs so: u = bf16(h + bias) kept for the backward, g =
 * bf16(GeLU(h + bias)), GeLU of the unrounded sum as cuBLASLt's epilogue
 * computes it; the GeLU gradient then reads the bf16 u). Attention is the one kernel
 * that rounds inside: its GEMMs read bf16 on the GPU (tensor cores; the
 * biased Q, K, V, P, and in the backward dO and dS), so it runs the float32
 * per-sequence bodies on a rounded copy of [Q|K|V] (and dO), with P and dS
 * rounded where the GEMMs read them (docs/BF16.md, "Attention"). The scratch
 * (the widened GEMM operands, one row, one sequence's rounded [Q|K|V] and
 * attention output) belongs to the ctx:
 * allocated only when a call needs more than any before it, freed by
 * tr_ctx_free, so the steady state allocates nothing. Threads (tr_vec.h):
 * the cast and the widening are elementwise, layernorm and GeLU spread rows
 * (each thread its own row of the scratch), attention spreads sequences
 * (each thread its own rounded copy, output and scores in the scratch), so
 * every output is computed by one thread as with one thread: the bits do not
 * depend on the thread count. Every call is timed
 * and counted under its float32 twin's step kind; the cast under its own,
 * TR_K_CAST.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "tr_bf16.h"
#include "tr_blas.h"
#include "tr_ctx.h"
#include "tr_kernels.h"
#include "tr_vec.h"

float *tr_scratch(tr_ctx *c, size_t n)
{
    if (n > c->scratch_cap) {
        free(c->scratch); /* the contents need not survive: every user fills what it reads */
        c->scratch = malloc(n * sizeof *c->scratch);
        if (!c->scratch) {
            fprintf(stderr, "error: out of memory for %zu floats of bf16 kernel scratch\n", n);
            abort();
        }
        c->scratch_cap = n;
    }
    return c->scratch;
}

static void round_to_bf16(const float *x, long long n, tr_bf16 *y)
{
    for (long long e = 0; e < n; e++)
        y[e] = tr_f32_to_bf16(x[e]);
}

void tr_cast_bf16(tr_ctx *c, const float *x, long long n, tr_bf16 *y)
{
    TIMED_BEGIN;
#pragma omp parallel if (TR_PAR(n, 1))
    {
        long lo, hi;
        tr_slice((long)n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        round_to_bf16(x + lo, hi - lo, y + lo);
    }
    TIMED_END(TR_K_CAST);
}

void tr_grad_acc(tr_ctx *c, float *g, const float *part, long long n, int add)
{
    TIMED_BEGIN;
#pragma omp parallel if (TR_PAR(n, 1))
    {
        long lo, hi;
        tr_slice((long)n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        if (add)
            for (long e = lo; e < hi; e++)
                g[e] += part[e];
        else
            memcpy(g + lo, part + lo, (size_t)(hi - lo) * sizeof *g);
    }
    TIMED_END(TR_K_RESID);
}

/* Floats a stored [rows, width] matrix with leading dimension ld spans. */
static size_t span(int rows, int width, int ld)
{
    return rows > 0 && width > 0 ? (size_t)(rows - 1) * (size_t)ld + (size_t)width : 0;
}

/* dst (same ld) = the stored [rows, width] bf16 matrix src, widened. */
static void widen(const tr_bf16 *src, int rows, int width, int ld, float *dst)
{
#pragma omp parallel for schedule(static) if (TR_PAR(rows, width))
    for (int r = 0; r < rows; r++) {
        const tr_bf16 *s = src + (size_t)r * ld;
        float *d = dst + (size_t)r * ld;
        for (int j = 0; j < width; j++)
            d[j] = tr_bf16_to_f32(s[j]);
    }
}

/* The column sums of the widened dy, by tr_colsum itself (the same sums in the same order: bitwise tr_colsum of
 * the widened matrix; timed there). */
void tr_colsum_bf16(tr_ctx *c, const tr_bf16 *dy, int rows, int cols, float *db)
{
    float *w = tr_scratch(c, (size_t)rows * cols);
    widen(dy, rows, cols, cols, w);
    tr_colsum(c, w, rows, cols, db);
}

void tr_gemm_bf16(tr_ctx *c, int transa, int transb, int m, int n, int k, const tr_bf16 *A, int lda,
                  const tr_bf16 *B, int ldb, float beta, float *C, int ldc)
{
    TIMED_BEGIN;
    /* the stored shapes: op(A) is [m, k], op(B) is [k, n] */
    int ar = transa ? k : m, aw = transa ? m : k, br = transb ? n : k, bw = transb ? k : n;
    size_t na = span(ar, aw, lda), nb = span(br, bw, ldb);
    float *wa = tr_scratch(c, na + nb), *wb = wa + na;
    widen(A, ar, aw, lda, wa);
    widen(B, br, bw, ldb, wb);
    tr_sgemm(transa, transb, m, n, k, 1.0f, wa, lda, wb, ldb, beta, C, ldc);
    TIMED_END(TR_K_GEMM);
}

void tr_ln_apply_bf16(tr_ctx *c, const float *x, const float *rs, const float *vs, const float *gamma,
                      const float *beta, int rows, int cols, int hidden, float eps, tr_bf16 *y)
{
    TIMED_BEGIN;
    int nt = TR_PAR(rows, cols) ? omp_get_max_threads() : 1;
    float *rows_ = tr_scratch(c, (size_t)nt * (size_t)(cols > 0 ? cols : 0)); /* a row per thread */
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *row = rows_ + (long)omp_get_thread_num() * cols;
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            tr_ln_apply_row(x + (long)r * cols, rs[r], vs[r], gamma, beta, cols, hidden, eps, row);
            round_to_bf16(row, cols, y + (long)r * cols);
        }
    }
    TIMED_END(TR_K_LN);
}

/* Attention with its GEMM operands rounded to bf16 (docs/BF16.md, "Attention"): the biased Q, K, V and P
 * before P V; sequences spread over the threads, each with the rounded [Q|K|V], the fp32 output and (threads
 * 1..) the scores in its part of the scratch. Exactly one of out16 (a bf16 output, rounded) and out32 (an fp32
 * output) is non-NULL. */
static void attention_bf16(tr_ctx *c, float *qkv, const float *bias, tr_bf16 *out16, float *out32, float *scores,
                           int nseq, int seq, int heads, int hdim)
{
    long cols = (long)heads * hdim, blk = (long)seq * cols, in = 3 * blk, ss = (long)seq * seq;
    long per = blk > 0 ? 4 * blk + ss : 0;
    int nt = tr_attention_threads(nseq, seq, hdim);
    float *scr = tr_scratch(c, (size_t)nt * (size_t)per);
    tr_attention_bias(qkv, bias, nseq, seq, heads, hdim);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = omp_get_thread_num();
        float *qr = scr + (long)t * per, *o = qr + in, *sc = t == 0 ? scores : o + blk;
#pragma omp for schedule(static)
        for (int s = 0; s < nseq; s++) {
            const float *x = qkv + (long)s * in;
            for (long e = 0; e < in; e++)
                qr[e] = tr_bf16_to_f32(tr_f32_to_bf16(x[e]));
            tr_attention_seq(qr, out32 ? out32 + (long)s * blk : o, sc, seq, heads, hdim, 1);
            if (out16)
                round_to_bf16(o, blk, out16 + (long)s * blk);
        }
    }
}

void tr_attention_bf16(tr_ctx *c, float *qkv, const float *bias, tr_bf16 *out, float *scores, int nseq, int seq,
                       int heads, int hdim)
{
    TIMED_BEGIN;
    attention_bf16(c, qkv, bias, out, NULL, scores, nseq, seq, heads, hdim);
    TIMED_END(TR_K_ATTENTION);
}

void tr_attention_bf16_fp32out(tr_ctx *c, float *qkv, const float *bias, float *out, float *scores, int nseq, int seq,
                               int heads, int hdim)
{
    TIMED_BEGIN;
    attention_bf16(c, qkv, bias, NULL, out, scores, nseq, seq, heads, hdim);
    TIMED_END(TR_K_ATTENTION);
}

/* qkv (float, rounded here) or qkvh (its bf16 copy, widened: the same values) */
static void attention_bwd_bf16(tr_ctx *c, const float *qkv, const tr_bf16 *qkvh, const float *dout, float *dqkv,
                               float *probs, float *dscores, int nseq, int seq, int heads, int hdim)
{
    TIMED_BEGIN;
    long cols = (long)heads * hdim, blk = (long)seq * cols, in = 3 * blk, ss = (long)seq * seq;
    long per = blk > 0 ? 4 * blk + 2 * ss : 0;
    int nt = tr_attention_threads(nseq, seq, hdim);
    float *scr = tr_scratch(c, (size_t)nt * (size_t)per);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        int t = omp_get_thread_num();
        float *qr = scr + (long)t * per, *dor = qr + in;
        float *pr = t == 0 ? probs : dor + blk, *ds = t == 0 ? dscores : pr + ss;
#pragma omp for schedule(static)
        for (int s = 0; s < nseq; s++) {
            const float *g = dout + (long)s * blk;
            if (qkvh)
                for (long e = 0; e < in; e++)
                    qr[e] = tr_bf16_to_f32(qkvh[(long)s * in + e]);
            else
                for (long e = 0; e < in; e++)
                    qr[e] = tr_bf16_to_f32(tr_f32_to_bf16(qkv[(long)s * in + e]));
            for (long e = 0; e < blk; e++)
                dor[e] = tr_bf16_to_f32(tr_f32_to_bf16(g[e]));
            tr_attention_bwd_seq(qr, dor, dqkv + (long)s * in, pr, ds, seq, heads, hdim, 1);
        }
    }
    TIMED_END(TR_K_ATTENTION);
}

void tr_attention_bwd_bf16(tr_ctx *c, const float *qkv, const float *dout, float *dqkv, float *probs,
                           float *dscores, int nseq, int seq, int heads, int hdim)
{
    attention_bwd_bf16(c, qkv, NULL, dout, dqkv, probs, dscores, nseq, seq, heads, hdim);
}

void tr_attention_bwd_bf16q(tr_ctx *c, const tr_bf16 *qkvh, const float *dout, float *dqkv, float *probs,
                            float *dscores, int nseq, int seq, int heads, int hdim)
{
    attention_bwd_bf16(c, NULL, qkvh, dout, dqkv, probs, dscores, nseq, seq, heads, hdim);
}

/* The bf16 programs' fc1 bias (docs/BF16.md) widened into b32[cols]: exact */
static void widen_bias(const tr_bf16 *bias, float *b32, int cols)
{
    for (int j = 0; j < cols; j++)
        b32[j] = tr_bf16_to_f32(bias[j]);
}

void tr_bias_gelu_save_bf16(tr_ctx *c, float *u, const tr_bf16 *bias, tr_bf16 *g, int rows, int cols)
{
    TIMED_BEGIN;
    int nt = TR_PAR(rows, cols) ? omp_get_max_threads() : 1;
    long w = cols > 0 ? cols : 0;
    float *b32 = tr_scratch(c, (size_t)(nt + 1) * (size_t)w); /* the widened bias, then a row per thread */
    widen_bias(bias, b32, cols);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *row = b32 + (long)(omp_get_thread_num() + 1) * w;
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            tr_bias_gelu_save_row(u + (long)r * cols, b32, row, cols);
            round_to_bf16(row, cols, g + (long)r * cols);
        }
    }
    TIMED_END(TR_K_GELU);
}

void tr_bias_gelu_keep_bf16(tr_ctx *c, const float *h, const tr_bf16 *bias, tr_bf16 *g, tr_bf16 *u, int rows, int cols)
{
    TIMED_BEGIN;
    int nt = TR_PAR(rows, cols) ? omp_get_max_threads() : 1;
    long w = cols > 0 ? cols : 0;
    float *b32 = tr_scratch(c, (size_t)(2 * nt + 1) * (size_t)w); /* the widened bias; v and GeLU(v) per thread */
    widen_bias(bias, b32, cols);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *v = b32 + w + (long)omp_get_thread_num() * 2 * w, *gv = v + w;
#pragma omp for schedule(static)
        for (int r = 0; r < rows; r++) {
            memcpy(v, h + (long)r * cols, (size_t)w * sizeof *v);
            tr_bias_gelu_save_row(v, b32, gv, cols); /* v += bias; gv = GeLU(v): the float32 kernel's bits */
            round_to_bf16(v, cols, u + (long)r * cols);
            round_to_bf16(gv, cols, g + (long)r * cols);
        }
    }
    TIMED_END(TR_K_GELU);
}

TR_VEC_CLONES static void gelu_bwd_bf16_slice(const float *dg, const tr_bf16 *u, float *t, long lo, long hi)
{
    for (long e = lo; e < hi; e++)
        t[e - lo] = dg[e] * tr_vgelu_grad(tr_bf16_to_f32(u[e]));
}

void tr_gelu_bwd_bf16(tr_ctx *c, const float *dg, const tr_bf16 *u, tr_bf16 *du, int rows, int cols)
{
    TIMED_BEGIN;
    long n = (long)rows * cols, chunk = 4096; /* the float32 products of one chunk, then their rounding */
    int nt = TR_PAR(n, 1) ? omp_get_max_threads() : 1;
    float *tmp = tr_scratch(c, (size_t)nt * (size_t)chunk);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        long lo, hi;
        tr_slice(n, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        float *t = tmp + (long)omp_get_thread_num() * chunk;
        for (long a = lo; a < hi; a += chunk) {
            long b = a + chunk < hi ? a + chunk : hi;
            gelu_bwd_bf16_slice(dg, u, t, a, b);
            round_to_bf16(t, (int)(b - a), du + a);
        }
    }
    TIMED_END(TR_K_GELU);
}
