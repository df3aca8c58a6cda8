/*
 * test_cpuk.c - unit tests for the CPU backend's vectorised, threaded kernels: AdamW (tr_kernels_bwd.c), the
 * loss kernels (tr_kernels_lm.c), tr_vexpf (tr_vec.h) and every other fused kernel on the rank's threads
 * (tr_kernels*.c); tests/tt.h protocol, one line per case.
 *
 * References are written here, not taken from the code under test:
 *   - AdamW: the update element by element in float, in the order the kernel documents; the kernel must give
 *     the same bits (it is elementwise: vectors and threads change nothing);
 *   - tr_vexpf: double exp over a dense sweep of [-87.3, 88], the relative error below the documented 1.5e-7;
 *     NaN in, NaN out; the clamps;
 *   - the loss: row max, sum of exponentials and dlogits against the same quantities in double (exp of double),
 *     pad columns excluded from every max and sum and zero in dlogits;
 *   - threads: every kernel run on 1, 2, 3 and 5 OpenMP threads gives the same bits (layernorm forward and
 *     backward, residual, GeLU, bias column sums, attention forward and backward, embeddings, their bf16
 *     variants: shapes above the kernels' one-thread limits, so the threads really split the work);
 *   - the column sums (bias gradients, dgamma and dbeta, the embedding and position scatter-adds): the bits of
 *     the plain loop, each column summed in row order in double (what the kernels document);
 *   - the CPU backend's MSE objective with tr_model's 2 micro-batches: each call reads and writes the rows of its
 *     micro-batch only (the others' dL/dy untouched), and the step's loss is the sum over both (in double).
 * A zeroed tr_ctx is enough (timing off); the kernels read tr_model's AdamW fields, defined below.
 */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr_backend.h"
#include "tr_bf16.h"
#include "tr_ctx.h"
#include "tr_kernels.h"
#include "tr_math.h"
#include "tr_vec.h"
#include "tt.h"

const tr_model_desc tr_model = {.name = "test_cpuk",
                                .layers = 1,
                                .hidden = 8,
                                .seq = 2,
                                .batch = 2, /* the objective's 32 outputs: 4 rows of 8 */
                                .microbatches = 2,
                                .heads = 1,
                                .ffn = 32,
                                .eps = 1e-5,
                                .lr = 6e-4,
                                .beta1 = 0.9,
                                .beta2 = 0.95,
                                .adam_eps = 1e-8,
                                .weight_decay = 0.1};


static const int g_threads[] = {1, 2, 3, 5};
#define NTHREADS ((int)(sizeof g_threads / sizeof g_threads[0]))

/* AdamW of the reference: one element at a time, in the kernel's documented order */
static void ref_adamw(const tr_ctx *c, float *p, const float *g, float *m, float *v, long n, int decay)
{
    float b1 = (float)tr_model.beta1, b2 = (float)tr_model.beta2, lr = (float)c->lr, eps = (float)tr_model.adam_eps;
    float wd = decay ? (float)tr_model.weight_decay : 0.0f;
    float c1 = (float)(1.0 - pow(tr_model.beta1, c->opt_step)), c2 = (float)(1.0 - pow(tr_model.beta2, c->opt_step));
    for (long e = 0; e < n; e++) {
        volatile float me = b1 * m[e] + (1.0f - b1) * g[e]; /* volatile: one element at a time, no vectors */
        volatile float ve = b2 * v[e] + (1.0f - b2) * g[e] * g[e];
        m[e] = me;
        v[e] = ve;
        float mhat = me / c1, vhat = ve / c2;
        p[e] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[e]);
    }
}

static void test_adamw(void)
{
    const long n = 100003; /* above TR_PAR_MIN, odd: uneven slices and a vector tail */
    size_t bytes = (size_t)n * sizeof(float);
    float *p0 = malloc(bytes), *g = malloc(bytes), *m0 = malloc(bytes), *v0 = malloc(bytes);
    float *p = malloc(bytes), *m = malloc(bytes), *v = malloc(bytes);
    float *rp = malloc(bytes), *rm = malloc(bytes), *rv = malloc(bytes);
    for (long e = 0; e < n; e++) {
        p0[e] = tt_rndf(-1, 1);
        g[e] = tt_rndf(-0.1f, 0.1f);
        m0[e] = tt_rndf(-0.01f, 0.01f);
        v0[e] = tt_rndf(0, 1e-4f);
    }
    tr_ctx c;
    memset(&c, 0, sizeof c);
    c.lr = 6e-4;
    c.opt_step = 3;
    TT_CASE("AdamW gives the bits of the element-by-element float update, with and without weight decay")
    {
        for (int decay = 0; decay < 2; decay++) {
            memcpy(rp, p0, bytes), memcpy(rm, m0, bytes), memcpy(rv, v0, bytes);
            memcpy(p, p0, bytes), memcpy(m, m0, bytes), memcpy(v, v0, bytes);
            ref_adamw(&c, rp, g, rm, rv, n, decay);
            tr_adamw(&c, p, g, m, v, (int)n, decay);
            TT_CHECK(!memcmp(p, rp, bytes) && !memcmp(m, rm, bytes) && !memcmp(v, rv, bytes),
                     "decay=%d: param, m or v differ from the reference", decay);
            TT_CHECK(c.calls[TR_K_OPTIMIZER] == decay + 1, "counted %lld optimizer calls", c.calls[TR_K_OPTIMIZER]);
        }
    }
    TT_CASE("AdamW gives the same bits on 1, 2, 3 and 5 threads")
    {
        for (int t = 0; t < NTHREADS; t++) {
            omp_set_num_threads(g_threads[t]);
            memcpy(p, p0, bytes), memcpy(m, m0, bytes), memcpy(v, v0, bytes);
            tr_adamw(&c, p, g, m, v, (int)n, 1);
            if (t == 0) {
                memcpy(rp, p, bytes), memcpy(rm, m, bytes), memcpy(rv, v, bytes);
                continue;
            }
            TT_CHECK(!memcmp(p, rp, bytes) && !memcmp(m, rm, bytes) && !memcmp(v, rv, bytes),
                     "%d threads differ from 1 thread", g_threads[t]);
        }
        omp_set_num_threads(1);
        int seen = 0;
#pragma omp parallel num_threads(2)
#pragma omp single
        seen = omp_get_num_threads();
        TT_CHECK(seen == 2, "OpenMP ran %d threads when asked for 2: the thread test proves nothing", seen);
    }
    free(p0), free(g), free(m0), free(v0), free(p), free(m), free(v), free(rp), free(rm), free(rv);
}

static void test_vexpf(void)
{
    TT_CASE("tr_vexpf is within 1.5e-7 relative of double exp over [-87.3, 88]")
    {
        double worst = 0, at = 0;
        const long steps = 4000000;
        for (long i = 0; i <= steps; i++) {
            float x = (float)(-87.3 + (88.0 + 87.3) * (double)i / (double)steps);
            double ref = exp((double)x), rel = fabs((double)tr_vexpf(x) - ref) / ref;
            if (rel > worst)
                worst = rel, at = x;
        }
        for (int i = 0; i < 1000000; i++) { /* near 0, where the loss spends its time: -20..0 */
            float x = tt_rndf(-20, 0);
            double ref = exp((double)x), rel = fabs((double)tr_vexpf(x) - ref) / ref;
            if (rel > worst)
                worst = rel, at = x;
        }
        TT_CHECK(worst < 1.5e-7, "relative error %.3g at x = %.9g", worst, at);
        TT_CHECK(tr_vexpf(0.0f) == 1.0f, "exp(0) = %.9g", (double)tr_vexpf(0.0f));
        printf("# tr_vexpf: largest relative error %.3g (at x = %.7g)\n", worst, at);
    }
    TT_CASE("tr_vexpf clamps outside [-87.3, 88] and passes NaN through")
    {
        float lo = tr_vexpf(-87.3f), hi = tr_vexpf(88.0f);
        TT_CHECK(tr_vexpf(-1000.0f) == lo && tr_vexpf(-INFINITY) == lo && lo > 0 && lo < 1.3e-38f,
                 "exp(-1000) = %g, exp(-87.3) = %g", (double)tr_vexpf(-1000.0f), (double)lo);
        TT_CHECK(tr_vexpf(1000.0f) == hi && isfinite(hi) && hi > 1.6e38f, "exp(1000) = %g", (double)tr_vexpf(1000.0f));
        TT_CHECK(isnan(tr_vexpf(NAN)), "exp(NaN) = %g", (double)tr_vexpf(NAN));
    }
}

static void test_sumsq(void)
{
    TT_CASE("tr_sumsq (the gradient norm's sums) gives the same bits on 1, 2, 3 and 5 threads, near double")
    {
        const long long n = 1000003; /* 16 blocks and a tail */
        float *g = malloc((size_t)n * sizeof *g);
        long double ref = 0;
        for (long long e = 0; e < n; e++) {
            g[e] = tt_rndf(-3, 3);
            ref += (long double)g[e] * g[e];
        }
        double first = 0;
        for (int t = 0; t < 4; t++) {
            omp_set_num_threads(g_threads[t]);
            double s = tr_sumsq(g, n);
            if (t == 0)
                first = s;
            TT_CHECK(s == first, "%d threads: %.17g, 1 thread: %.17g", g_threads[t], s, first);
        }
        omp_set_num_threads(1);
        TT_CHECK(fabsl(first - ref) / ref < 1e-11, "sum %.17g, long double %.17Lg", first, ref);
        TT_CHECK(tr_sumsq(g, 0) == 0.0 && tr_sumsq(g, 1) == (double)g[0] * g[0], "empty or one element");
        free(g);
    }
    TT_CASE("tr_nonfinite counts Inf, -Inf and NaN (not the largest float, subnormals or -0) on 1, 2, 3 and 5 threads")
    {
        const long long n = 300007; /* 4 blocks and a tail */
        float *g = malloc((size_t)n * sizeof *g);
        for (long long e = 0; e < n; e++)
            g[e] = tt_rndf(-3, 3);
        g[1] = FLT_MAX, g[2] = -FLT_MAX, g[3] = 1e-45f, g[4] = -0.0f, g[5] = FLT_MIN;
        for (int t = 0; t < 4; t++) {
            omp_set_num_threads(g_threads[t]);
            TT_CHECK(tr_nonfinite(g, n) == 0, "%d threads: %lld of finite values", g_threads[t], tr_nonfinite(g, n));
        }
        const long long at[4] = {0, 65535, 65536, n - 1}; /* block edges and the tail's last */
        g[at[0]] = INFINITY, g[at[1]] = -INFINITY, g[at[2]] = NAN, g[at[3]] = -NAN;
        for (int t = 0; t < 4; t++) {
            omp_set_num_threads(g_threads[t]);
            TT_CHECK(tr_nonfinite(g, n) == 4, "%d threads: %lld, want 4", g_threads[t], tr_nonfinite(g, n));
            TT_CHECK(tr_nonfinite(g + 1, n - 2) == 2, "inner range: %lld, want 2", tr_nonfinite(g + 1, n - 2));
        }
        omp_set_num_threads(1);
        TT_CHECK(tr_nonfinite(g, 0) == 0 && tr_nonfinite(g + n - 1, 1) == 1, "empty, or the one NaN");
        free(g);
    }
}

/* GeLU (tanh form) and its derivative in double */
static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static double gelu_grad_ref(double x)
{
    double k = 0.7978845608028654, t = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

static void test_vgelu(void)
{
    TT_CASE("tr_vgelu and tr_vgelu_grad (the CPU kernels' GeLU) are as close to double GeLU as tr_math.h's libm form")
    {
        double wv = 0, wm = 0, gv = 0, gm = 0, at = 0;
        const long steps = 2000000;
        for (long i = 0; i <= steps; i++) {
            float x = (float)(-20.0 + 40.0 * (double)i / (double)steps);
            double s = fabs((double)x) > 1 ? fabs((double)x) : 1; /* absolute error near 0, relative beyond */
            double ev = fabs(tr_vgelu(x) - gelu_ref(x)) / s, em = fabs(tr_gelu(x) - gelu_ref(x)) / s;
            double dv = fabs(tr_vgelu_grad(x) - gelu_grad_ref(x)) / s, dm = fabs(tr_gelu_grad(x) - gelu_grad_ref(x)) / s;
            if (ev > wv)
                wv = ev, at = x;
            wm = em > wm ? em : wm;
            gv = dv > gv ? dv : gv;
            gm = dm > gm ? dm : gm;
        }
        printf("# GeLU over [-20, 20], largest error: tr_vgelu %.3g (at %.6g), tr_gelu %.3g; gradient: tr_vgelu_grad "
               "%.3g, tr_gelu_grad %.3g\n", wv, at, wm, gv, gm);
        TT_CHECK(wv < 2e-7 && wv <= 2 * wm, "tr_vgelu error %.3g (libm form %.3g)", wv, wm);
        TT_CHECK(gv < 1e-6 && gv <= 2 * gm, "tr_vgelu_grad error %.3g (libm form %.3g)", gv, gm);
        TT_CHECK(tr_vgelu(0.0f) == 0.0f && tr_vgelu(-1000.0f) <= 0.0f && tr_vgelu(-1000.0f) > -1e-30f &&
                     tr_vgelu(1000.0f) == 1000.0f,
                 "GeLU(0) = %g, GeLU(-1000) = %g, GeLU(1000) = %g", (double)tr_vgelu(0.0f), (double)tr_vgelu(-1000.0f),
                 (double)tr_vgelu(1000.0f));
    }
}

static void test_loss(void)
{
    const int rows = 37, cols = 1040, nvalid = 1029, v0 = 2048; /* pad columns after nvalid; odd tails */
    size_t nl = (size_t)rows * cols;
    float *L = malloc(nl * sizeof *L), *dl = malloc(nl * sizeof *dl), *dl1 = malloc(nl * sizeof *dl1);
    float mx[37], s[74], mx1[37], s1[74];
    int32_t tgt[37];
    for (size_t e = 0; e < nl; e++)
        L[e] = (e % cols) >= (size_t)nvalid ? 1e30f : tt_rndf(-12, 9); /* pads: huge, must never count */
    for (int r = 0; r < rows; r++)
        tgt[r] = r % 5 == 4 ? 7 : v0 + (int)(tt_rnd32() % (uint32_t)nvalid); /* every fifth: another block's id */
    tr_ctx c;
    memset(&c, 0, sizeof c);
    const float scale = 1.0f / 64;
    TT_CASE("the loss kernels match double exp: row max, sum of exponentials, target logit, dlogits")
    {
        omp_set_num_threads(2);
        tr_lm_rowmax(&c, L, rows, cols, nvalid, mx);
        tr_lm_sums(&c, L, mx, tgt, v0, rows, cols, nvalid, s);
        for (size_t e = 0; e < nl; e++)
            dl[e] = NAN;
        tr_lm_dlogits(&c, L, mx, s, tgt, v0, rows, cols, nvalid, scale, dl);
        double worst_s = 0, worst_d = 0;
        for (int r = 0; r < rows; r++) {
            const float *l = L + (size_t)r * cols;
            float m = -INFINITY;
            for (int k = 0; k < nvalid; k++)
                m = l[k] > m ? l[k] : m;
            TT_CHECK(mx[r] == m, "row %d: max %.9g, want %.9g", r, (double)mx[r], (double)m);
            double e = 0;
            for (int k = 0; k < nvalid; k++)
                e += exp((double)l[k] - (double)m);
            double rel = fabs(s[r] - e) / e;
            worst_s = rel > worst_s ? rel : worst_s;
            int t = tgt[r] - v0;
            float want_t = (t >= 0 && t < nvalid) ? l[t] : 0.0f;
            TT_CHECK(s[rows + r] == want_t, "row %d: target logit %g, want %g", r, (double)s[rows + r], (double)want_t);
            for (int k = 0; k < cols; k++) {
                double want = k < nvalid ? exp((double)l[k] - (double)m) / e * scale - (k == t ? scale : 0) : 0;
                double got = dl[(size_t)r * cols + k], err = fabs(got - want);
                TT_CHECK(k < nvalid || got == 0.0, "row %d: pad column %d has dlogit %g", r, k, got);
                worst_d = err > worst_d ? err : worst_d;
            }
        }
        TT_CHECK(worst_s < 1e-6, "sum of exponentials: relative error %.3g", worst_s);
        TT_CHECK(worst_d < 1e-6 * scale, "dlogits: absolute error %.3g (scale %g)", worst_d, (double)scale);
        TT_CHECK(c.calls[TR_K_LOSS] == 3 && c.calls[TR_K_LN] == 0,
                 "rowmax, sums, dlogits counted %lld calls as the loss kind, %lld as layernorm; want 3 and 0",
                 c.calls[TR_K_LOSS], c.calls[TR_K_LN]);
    }
    TT_CASE("the loss kernels give the same bits on 1, 2, 3 and 5 threads")
    {
        for (int t = 0; t < NTHREADS; t++) {
            omp_set_num_threads(g_threads[t]);
            tr_lm_rowmax(&c, L, rows, cols, nvalid, mx);
            tr_lm_sums(&c, L, mx, tgt, v0, rows, cols, nvalid, s);
            tr_lm_dlogits(&c, L, mx, s, tgt, v0, rows, cols, nvalid, scale, dl);
            if (t == 0) {
                memcpy(mx1, mx, sizeof mx), memcpy(s1, s, sizeof s), memcpy(dl1, dl, nl * sizeof *dl);
                continue;
            }
            TT_CHECK(!memcmp(mx, mx1, sizeof mx) && !memcmp(s, s1, sizeof s) && !memcmp(dl, dl1, nl * sizeof *dl),
                     "%d threads differ from 1 thread", g_threads[t]);
        }
    }
    free(L), free(dl), free(dl1);
}

/* ---- the fused kernels on 1, 2, 3 and 5 threads ---------------------------------------------------------- */

enum { FR = 70, FC = 515, AN = 7, AS = 70, AH = 3, AD = 8, AC = AH * AD, AQ = 3 * AC, NPOS = 40, NV = 23 };

typedef struct {
    const char *name;
    void *p;
    size_t bytes;
} fk_out;

/* The inputs of every kernel, filled once; each run copies what a kernel updates in place. */
typedef struct {
    float x[FR * FC], p[FR * FC], dy[FR * FC], bias[FC], gamma[FC], beta[FC], rs[FR], vs[FR];
    tr_bf16 bias16[FC]; /* bf16 programs' fc1 bias (docs/BF16.md) */
    float qkv[AN * AS * AQ], qbias[AQ], dout[AN * AS * AC], scores[2 * AS * AS];
    float E[NV * FC], wpe[NPOS * FC];
    int32_t tok[FR];
} fk_in;

/* Every output of one run of the kernels, compared bitwise across thread counts. */
typedef struct {
    float rs[FR], vs[FR], y[FR * FC], resid[FR * FC], rrs[FR], gelu[FR * FC], u[FR * FC], g[FR * FC],
        db[FC], dg[FR * FC], s[2 * FR], dgamma[FC], dbeta[FC], lng[FR * FC], qkv[AN * AS * AQ], ao[AN * AS * AC],
        dqkv[AN * AS * AQ], emb[FR * FC], pos[FR * FC], dE[NV * FC], dwpe[NPOS * FC];
    tr_bf16 c16[FR * FC], y16[FR * FC], g16[FR * FC], ao16[AN * AS * AC];
    float u16[FR * FC], qkv16[AN * AS * AQ], ao32[AN * AS * AC], dqkv16[AN * AS * AQ], gemm16[FR * FR];
} fk_res;

static void fk_run(tr_ctx *c, const fk_in *in, fk_res *o)
{
    const int seq = 10; /* the position kernels: 7 sequences of 10 rows */
    tr_ln_rowsum(c, in->x, FR, FC, o->rs);
    tr_ln_sqdev(c, in->x, o->rs, FR, FC, FC, o->vs);
    tr_ln_apply(c, in->x, o->rs, o->vs, in->gamma, in->beta, FR, FC, FC, 1e-5f, o->y);
    memcpy(o->resid, in->x, sizeof o->resid);
    tr_resid_rowsum(c, o->resid, in->p, in->bias, FR, FC, o->rrs);
    memcpy(o->gelu, in->p, sizeof o->gelu);
    tr_bias_gelu(c, o->gelu, in->bias, FR, FC);
    memcpy(o->u, in->p, sizeof o->u);
    tr_bias_gelu_save(c, o->u, in->bias, o->g, FR, FC);
    tr_colsum(c, in->dy, FR, FC, o->db);
    memcpy(o->dg, in->dy, sizeof o->dg);
    tr_gelu_bwd(c, o->dg, in->p, FR, FC);
    tr_ln_bwd_sums(c, in->dy, in->x, in->rs, in->vs, in->gamma, FR, FC, FC, 1e-5f, o->s, o->dgamma, o->dbeta);
    memcpy(o->lng, in->p, sizeof o->lng);
    tr_ln_bwd_apply(c, in->dy, in->x, in->rs, in->vs, in->gamma, o->s, FR, FC, FC, 1e-5f, o->lng);
    float scores[2 * AS * AS];
    memcpy(o->qkv, in->qkv, sizeof o->qkv);
    tr_attention(c, o->qkv, in->qbias, o->ao, scores, AN, AS, AH, AD);
    tr_attention_bwd(c, o->qkv, in->dout, o->dqkv, scores, scores + AS * AS, AN, AS, AH, AD);
    tr_embed_rows(c, in->tok, in->E, 100, NV, FR, FC, o->emb);
    memcpy(o->pos, in->x, sizeof o->pos);
    tr_pos_add(c, o->pos, in->wpe, FR, FC, seq);
    memcpy(o->dE, in->E, sizeof o->dE);
    tr_embed_rows_bwd(c, in->tok, in->dy, 100, NV, FR, FC, o->dE);
    tr_pos_bwd(c, in->dy, FR, FC, seq, NPOS, o->dwpe);
    /* bf16 */
    tr_cast_bf16(c, in->x, (long long)FR * FC, o->c16);
    tr_ln_apply_bf16(c, in->x, o->rs, o->vs, in->gamma, in->beta, FR, FC, FC, 1e-5f, o->y16);
    memcpy(o->u16, in->p, sizeof o->u16);
    tr_bias_gelu_save_bf16(c, o->u16, in->bias16, o->g16, FR, FC);
    memcpy(o->qkv16, in->qkv, sizeof o->qkv16);
    tr_attention_bf16(c, o->qkv16, in->qbias, o->ao16, scores, AN, AS, AH, AD);
    memcpy(o->qkv16, in->qkv, sizeof o->qkv16);
    tr_attention_bf16_fp32out(c, o->qkv16, in->qbias, o->ao32, scores, AN, AS, AH, AD);
    tr_attention_bwd_bf16(c, o->qkv16, in->dout, o->dqkv16, scores, scores + AS * AS, AN, AS, AH, AD);
    tr_gemm_bf16(c, 0, 1, FR, FR, FC, o->c16, FC, o->y16, FC, 0.0f, o->gemm16, FR);
}

static int fk_outs(fk_res *o, fk_out *out)
{
    int n = 0;
#define FK(f) out[n++] = (fk_out){#f, o->f, sizeof o->f}
    FK(rs), FK(vs), FK(y), FK(resid), FK(rrs), FK(gelu), FK(u), FK(g), FK(db), FK(dg), FK(s), FK(dgamma);
    FK(dbeta), FK(lng), FK(qkv), FK(ao), FK(dqkv), FK(emb), FK(pos), FK(dE), FK(dwpe), FK(c16), FK(y16);
    FK(g16), FK(ao16), FK(u16), FK(qkv16), FK(ao32), FK(dqkv16), FK(gemm16);
#undef FK
    return n;
}

static void test_fused(void)
{
    fk_in *in = calloc(1, sizeof *in);
    fk_res *r1 = calloc(1, sizeof *r1), *rt = calloc(1, sizeof *rt);
    for (int e = 0; e < FR * FC; e++) {
        in->x[e] = tt_rndf(-2, 2);
        in->p[e] = tt_rndf(-3, 3);
        in->dy[e] = tt_rndf(-1, 1);
    }
    for (int j = 0; j < FC; j++) {
        in->bias[j] = tt_rndf(-0.5f, 0.5f);
        in->bias16[j] = tr_f32_to_bf16(in->bias[j]);
        in->gamma[j] = tt_rndf(0.5f, 1.5f);
        in->beta[j] = tt_rndf(-0.5f, 0.5f);
    }
    for (int r = 0; r < FR; r++) {
        double s = 0, v = 0;
        for (int j = 0; j < FC; j++)
            s += in->x[r * FC + j];
        for (int j = 0; j < FC; j++)
            v += (in->x[r * FC + j] - s / FC) * (in->x[r * FC + j] - s / FC);
        in->rs[r] = (float)s, in->vs[r] = (float)v;
        in->tok[r] = r % 9 == 8 ? 7 : 100 + (int)(tt_rnd32() % NV); /* repeated ids; every ninth another block's */
    }
    for (int e = 0; e < AN * AS * AQ; e++)
        in->qkv[e] = tt_rndf(-1, 1);
    for (int e = 0; e < AQ; e++)
        in->qbias[e] = tt_rndf(-0.2f, 0.2f);
    for (int e = 0; e < AN * AS * AC; e++)
        in->dout[e] = tt_rndf(-1, 1);
    for (int e = 0; e < NV * FC; e++)
        in->E[e] = tt_rndf(-1, 1);
    for (int e = 0; e < NPOS * FC; e++)
        in->wpe[e] = tt_rndf(-1, 1);
    tr_ctx c;
    memset(&c, 0, sizeof c);
    fk_out o1[40], ot[40];
    int nout = fk_outs(r1, o1);
    fk_outs(rt, ot);
    TT_CASE("layernorm, residual, GeLU, column sums, attention, embeddings and their bf16 kernels give the same "
            "bits on 1, 2, 3 and 5 threads")
    {
        omp_set_num_threads(1);
        fk_run(&c, in, r1);
        for (int t = 1; t < NTHREADS; t++) {
            omp_set_num_threads(g_threads[t]);
            memset(rt, 0xff, sizeof *rt); /* NaN-poisoned: an unwritten element shows */
            fk_run(&c, in, rt);
            for (int k = 0; k < nout; k++)
                TT_CHECK(!memcmp(o1[k].p, ot[k].p, o1[k].bytes), "%s: %d threads differ from 1 thread", o1[k].name,
                         g_threads[t]);
        }
    }
    TT_CASE("the column sums are each column summed in row order in double: bias, dgamma, dbeta, embeddings, "
            "positions")
    {
        omp_set_num_threads(3);
        fk_run(&c, in, rt);
        int bad = 0;
        for (int j = 0; j < FC; j++) {
            double db = 0, dg = 0, dbeta = 0;
            for (int r = 0; r < FR; r++) {
                float d = in->dy[r * FC + j], mean = in->rs[r] / (float)FC;
                float rstd = 1.0f / sqrtf(in->vs[r] / (float)FC + 1e-5f), xhat = (in->x[r * FC + j] - mean) * rstd;
                db += d;
                dg += (double)d * xhat;
                dbeta += d;
            }
            bad += rt->db[j] != (float)db || rt->dgamma[j] != (float)dg || rt->dbeta[j] != (float)dbeta;
        }
        TT_CHECK(!bad, "%d columns of db, dgamma or dbeta differ from the row-order sums", bad);
        static float dE[NV * FC], dwpe[NPOS * FC];
        memcpy(dE, in->E, sizeof dE);
        memset(dwpe, 0, sizeof dwpe);
        for (int r = 0; r < FR; r++)
            for (int j = 0; j < FC; j++) {
                if (in->tok[r] >= 100 && in->tok[r] < 100 + NV)
                    dE[(in->tok[r] - 100) * FC + j] += in->dy[r * FC + j];
                dwpe[(r % 10) * FC + j] += in->dy[r * FC + j];
            }
        TT_CHECK(!memcmp(dE, rt->dE, sizeof dE), "the embedding scatter-add differs from the row-order sums");
        TT_CHECK(!memcmp(dwpe, rt->dwpe, sizeof dwpe), "the position scatter-add differs from the row-order sums");
    }
    omp_set_num_threads(1);
    tr_ctx_free(&c);
    free(in), free(r1), free(rt);
}

/* The MSE objective of one rank holding the whole output [4, 8], 2 micro-batches of 2 rows (tr_model above) */
static void test_objective_microbatches(void)
{
    enum { ROWS = 4, COLS = 8, N = ROWS * COLS };
    float A[3 * N], target[N];
    tr_rank_desc d = {.arena_elems = 3 * N, .y_offset = 0, .gx_offset = N, .io_rows = ROWS, .io_cols = COLS};
    tr_ctx c = {.desc = &d};
    tr_err err = {{0}};
    double want_loss = 0;
    for (int e = 0; e < N; e++) {
        A[e] = 0.25f * (float)(e % 7) - 0.5f;
        target[e] = 0.125f * (float)(e % 5);
        A[N + e] = 777.0f; /* dL/dy: poisoned */
        double diff = (double)A[e] - target[e];
        want_loss += diff * diff;
    }
    TT_CASE("the CPU objective with 2 micro-batches: each covers its own rows of the output, the loss sums both") {
        TT_CHECK(tr_backend_train_init(&c, A, target, 0, &err), "train_init: %s", err.msg);
        int bad = 0;
        for (c.mb = 0; c.mb < 2; c.mb++) {
            tr_backend_objective(&c, A);
            for (int e = 0; e < N; e++) {
                int row = e / COLS, done = row < (c.mb + 1) * ROWS / 2;
                float want = done ? (float)(2.0 * ((double)A[e] - target[e]) / N) : 777.0f;
                if (A[N + e] != want && bad++ == 0)
                    TT_CHECK(0, "after micro-batch %d: dL/dy of row %d = %g, want %g (%s)", c.mb, row,
                             (double)A[N + e], (double)want, done ? "its rows" : "a later micro-batch's, untouched");
            }
        }
        tr_step_sums s;
        tr_backend_step_read(&c, &s);
        TT_CHECK(fabs(s.loss - want_loss) <= 1e-12 * want_loss, "loss %.17g, want %.17g (both micro-batches)", s.loss,
                 want_loss);
    }
}

/* The CPU GEMM's one-row products (runtime/tr_blas.h sends m = 1 to cblas_sgemv): every transpose combination, with
 * leading dimensions wider than the operands and a beta, against double loops; and m = 2 (cblas_sgemm) alike */
static void test_gemm_rows(void)
{
    TT_CASE("tr_gemm_ex of one and two rows (sgemv, sgemm), each transpose combination, ld wider than the operand, "
            "beta 0 and 1: within 1e-6 of double") {
        enum { K = 37, N = 29, LD = 41 };
        tr_ctx c = {0};
        float A[K * LD], B[K * LD > N * LD ? K * LD : N * LD], C0[2 * LD], C[2 * LD];
        for (int e = 0; e < K * LD; e++)
            A[e] = (float)((e * 7919) % 61 - 30) / 16.0f;
        for (int e = 0; e < (int)(sizeof B / sizeof B[0]); e++)
            B[e] = (float)((e * 104729) % 53 - 26) / 32.0f;
        for (int e = 0; e < 2 * LD; e++)
            C0[e] = (float)(e % 5) - 2.0f;
        for (int m = 1; m <= 2; m++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                    for (int bt = 0; bt < 2; bt++) {
                        memcpy(C, C0, sizeof C);
                        tr_gemm_ex(&c, ta, tb, m, N, K, A, LD, B, LD, (float)bt, C, LD);
                        double worst = 0;
                        for (int i = 0; i < m; i++)
                            for (int j = 0; j < N; j++) {
                                double want = bt ? C0[i * LD + j] : 0.0;
                                for (int p = 0; p < K; p++)
                                    want += (double)(ta ? A[p * LD + i] : A[i * LD + p]) *
                                            (tb ? B[j * LD + p] : B[p * LD + j]);
                                double d = fabs(C[i * LD + j] - want) / (fabs(want) > 1 ? fabs(want) : 1);
                                worst = d > worst ? d : worst;
                            }
                        for (int j = N; j < LD; j++) /* past the row's end: untouched */
                            TT_CHECK(C[j] == C0[j], "m=%d ta=%d tb=%d: column %d written", m, ta, tb, j);
                        TT_CHECK(worst < 1e-6, "m=%d ta=%d tb=%d beta=%d: %.3g from double", m, ta, tb, bt, worst);
                    }
    }
}

int main(void)
{
    test_gemm_rows();
    test_objective_microbatches();
    test_adamw();
    test_vexpf();
    test_vgelu();
    test_sumsq();
    test_loss();
    test_fused();
    TT_EXIT();
}
