/*
 * test_cpuk.c - unit tests for the CPU backend's vectorised, threaded kernels: AdamW (tr_kernels_bwd.c), the
 * loss kernels (tr_kernels_lm.c) and tr_vexpf (tr_vec.h); tests/tt.h protocol, one line per case.
 *
 * References are written here, not taken from the code under test:
 *   - AdamW: the update element by element in float, in the order the kernel documents; the kernel must give
 *     the same bits (it is elementwise: vectors and threads change nothing);
 *   - tr_vexpf: double exp over a dense sweep of [-87.3, 88], the relative error below the documented 1.5e-7;
 *     NaN in, NaN out; the clamps;
 *   - the loss: row max, sum of exponentials and dlogits against the same quantities in double (exp of double),
 *     pad columns excluded from every max and sum and zero in dlogits;
 *   - threads: every kernel run on 1, 2, 3 and 5 OpenMP threads gives the same bits.
 * A zeroed tr_ctx is enough (timing off); the kernels read tr_model's AdamW fields, defined below.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr_ctx.h"
#include "tr_vec.h"
#include "tt.h"

const tr_model_desc tr_model = {.name = "test_cpuk",
                                .layers = 1,
                                .hidden = 8,
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

int main(void)
{
    test_adamw();
    test_vexpf();
    test_loss();
    TT_EXIT();
}
