/*
 * test_bf16k.c - unit tests for the CPU backend's bf16 steps, runtime/tr_kernels_bf16.c and tr_bcast_bf16
 * (tests/tt.h protocol, one line per case).
 *
 * References are written here, not taken from the code under test:
 *   - rounding: ref_rne rounds in double with frexp/ldexp/rint (the bf16 quantum of the value's binade, 2^-133
 *     below the normal range, rint's ties-to-even), never on the float's bits; checked on special values (ties
 *     at both parities, NaN, inf, overflow, subnormals, signed zero) and a million random bit patterns;
 *   - GEMM: a double GEMM of the widened operands for the four transpose combinations, beta 0 (C poisoned with
 *     NaN first) and 1, odd shapes, leading dimensions wider than the matrices (their padding NaN, C's padding a
 *     sentinel that must survive), relative norm error within 1e-6; and bitwise tr_gemm_ex of the widened values;
 *   - layernorm apply, bias + GeLU: bitwise ref_rne of their float32 twins' outputs on the same inputs (the
 *     twins are checked against the float64 reference by the e2e tests), the in-place updates (qkv += bias,
 *     u += bias) bitwise the twins' too, the step kind each call counts under, and no scratch allocation once
 *     the largest call has run;
 *   - attention forward and backward, whose GEMMs read bf16 operands: a double reference written here (ref_attn_head)
 *     with Q, K, V, P (backward also dO, dS) rounded by ref_rne, within 1e-4, while the float32 twin is > 1e-3
 *     from it (so a rounding point missed or added shows); the bf16 output bitwise ref_rne of the fp32-output
 *     variant's.
 * The broadcast needs several ranks: `mpirun -np 3 test_bf16k --bcast` (tests/run.sh) checks bits and the byte
 * counters of tr_bcast_bf16 over MPI_COMM_WORLD as the row group.
 *
 * The kernels only read the ctx's timing flag and counters and its scratch, so a zeroed tr_ctx (timing off, no
 * communicators) is enough; tr_ctx_free releases its scratch.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr_ctx.h"
#include "tt.h"

/* tr_kernels_bwd.o (tr_adamw), linked through the archive, refers to the generated model */
const tr_model_desc tr_model = {.name = "test_bf16k", .layers = 1, .hidden = 8, .heads = 1, .ffn = 32, .eps = 1e-5};


static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
/* bf16 -> float by definition: the high half of a float32 */
static float widen1(uint16_t h)
{
    return from_bits((uint32_t)h << 16);
}

/* Reference RNE of a non-NaN float to bf16, in double arithmetic. */
static uint16_t ref_rne(float xf)
{
    double x = xf;
    uint16_t sign = signbit(xf) ? 0x8000 : 0;
    double a = fabs(x);
    if (isinf(xf))
        return sign | 0x7f80;
    if (a == 0)
        return sign;
    int e;
    frexp(a, &e);                        /* a = f 2^e, f in [0.5, 1) */
    int qe = e - 8 > -133 ? e - 8 : -133; /* 8 significant bits; fixed quantum 2^-133 below 2^-126 */
    double r = ldexp(rint(ldexp(a, -qe)), qe); /* exact scaling; rint ties to even */
    if (r >= ldexp(1.0, 128))
        return sign | 0x7f80; /* past the largest finite bf16 */
    uint32_t u = bits_of((float)r);         /* r has at most 8 significant bits: exact in float */
    return (uint16_t)(sign | (u >> 16));
}

static bool is_bf16_nan(uint16_t h)
{
    return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
}

static void test_cast(void)
{
    TT_CASE("cast: ref_rne agrees with hand-picked roundings")
    {
        /* the reference itself, against values worked out by hand */
        static const struct { uint32_t in; uint16_t out; } hand[] = {
            {0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81},
            {0x3f807fff, 0x3f80}, {0x7f7fffff, 0x7f80}, {0x7f7f7fff, 0x7f7f}, {0x7f7f8000, 0x7f80},
            {0x00008000, 0x0000}, {0x00018000, 0x0002}, {0x00008001, 0x0001}, {0x007fffff, 0x0080},
            {0x80000000, 0x8000}, {0xbf808000, 0xbf80}, {0xbf818000, 0xbf82}, {0x00000001, 0x0000},
        };
        for (size_t i = 0; i < sizeof hand / sizeof hand[0]; i++)
            TT_CHECK(ref_rne(from_bits(hand[i].in)) == hand[i].out, "ref_rne(0x%08x) = 0x%04x, want 0x%04x",
                     hand[i].in, ref_rne(from_bits(hand[i].in)), hand[i].out);
    }
    TT_CASE("cast: special values (ties to even at both parities, inf, overflow, subnormals, -0)")
    {
        static const uint32_t in[] = {
            0x3f800000, 0x3f808000, /* tie, even low bit: down */ 0x3f818000, /* tie, odd low bit: up */
            0x3f808001, 0x3f807fff, 0xbf808000, 0xbf818000, 0x7f800000, 0xff800000, /* +-inf */
            0x7f7fffff, 0xff7fffff, 0x7f7f8000, /* FLT_MAX and the tie above the largest bf16: inf */
            0x7f7f7fff, /* stays the largest finite */ 0x00000001, 0x00008000, 0x00018000, 0x00008001,
            0x007fffff, /* subnormals, up to the smallest normal */ 0x80000000, 0x00000000, 0x80018000,
            0x4b7fffff, 0x3effffff, 0x00800000, 0x00ff8000};
        enum { N = sizeof in / sizeof in[0] };
        float x[N];
        tr_bf16 y[N];
        for (int i = 0; i < N; i++)
            x[i] = from_bits(in[i]);
        tr_ctx c = {0};
        tr_cast_bf16(&c, x, N, y);
        for (int i = 0; i < N; i++)
            TT_CHECK(y[i] == ref_rne(x[i]), "0x%08x -> 0x%04x, want 0x%04x", in[i], y[i], ref_rne(x[i]));
        TT_CHECK(c.calls[TR_K_CAST] == 1, "counted %lld cast calls", c.calls[TR_K_CAST]);
        tr_ctx_free(&c);
    }
    TT_CASE("cast: NaN stays NaN of the same sign (quiet, signalling with low payload only)")
    {
        static const uint32_t in[] = {0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fbfffff, 0x7f80ffff,
                                      0x7fffffff};
        enum { N = sizeof in / sizeof in[0] };
        float x[N];
        tr_bf16 y[N];
        for (int i = 0; i < N; i++)
            x[i] = from_bits(in[i]);
        tr_ctx c = {0};
        tr_cast_bf16(&c, x, N, y);
        for (int i = 0; i < N; i++)
            TT_CHECK(is_bf16_nan(y[i]) && (y[i] >> 15) == (in[i] >> 31), "0x%08x -> 0x%04x: not a NaN of its sign",
                     in[i], y[i]);
        tr_ctx_free(&c);
    }
    TT_CASE("cast: 1e6 random bit patterns (every exponent) and 1e5 values near ties")
    {
        enum { N = 1000000, M = 100000 };
        float *x = malloc(N * sizeof *x);
        tr_bf16 *y = malloc(N * sizeof *y);
        TT_CHECK(x && y, "out of memory");
        if (x && y) {
            for (int i = 0; i < N; i++) {
                uint32_t u;
                do
                    u = tt_rnd32();
                while ((u & 0x7fffffffu) > 0x7f800000u); /* NaNs are the case above */
                x[i] = from_bits(u);
            }
            tr_ctx c = {0};
            tr_cast_bf16(&c, x, N, y);
            int bad = 0, first = -1;
            for (int i = 0; i < N; i++)
                if (y[i] != ref_rne(x[i]) && bad++ == 0)
                    first = i;
            TT_CHECK(bad == 0, "%d of %d differ; first 0x%08x -> 0x%04x, want 0x%04x", bad, N,
                     bits_of(x[first]), y[first], ref_rne(x[first]));
            for (int i = 0; i < M; i++) /* low half 0x7fff, 0x8000 or 0x8001 */
                x[i] = from_bits((tt_rnd32() & 0x7f7f0000u) | (0x7fffu + (tt_rnd32() % 3)) | (tt_rnd32() & 0x80000000u));
            tr_cast_bf16(&c, x, M, y);
            bad = 0;
            for (int i = 0; i < M; i++)
                if (y[i] != ref_rne(x[i]) && bad++ == 0)
                    first = i;
            TT_CHECK(bad == 0, "near ties: %d of %d differ; first 0x%08x -> 0x%04x, want 0x%04x", bad, M,
                     bits_of(x[first]), y[first], ref_rne(x[first]));
            tr_ctx_free(&c);
        }
        free(x);
        free(y);
    }
}

/* A random bf16 of magnitude in about [2^-4, 2^2), either sign. */
static uint16_t rnd_bf16(void)
{
    uint32_t s = tt_rnd32();
    return (uint16_t)((s & 0x8000u) | ((uint32_t)(123 + s % 6) << 7) | ((s >> 8) & 0x7fu));
}

static void test_gemm(void)
{
    static const int shapes[][3] = {{5, 7, 3}, {13, 1, 9}, {1, 1, 1}, {17, 11, 23}, {32, 48, 16}, {3, 64, 1}};
    const uint16_t NANB = 0x7fc0;
    const float SENT = -12345.5f;
    tr_ctx c = {0};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int bi = 0; bi < 2; bi++) {
                    int m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
                    float beta = (float)bi;
                    char name[160];
                    snprintf(name, sizeof name, "gemm: m=%d n=%d k=%d transa=%d transb=%d beta=%g vs double", m, n,
                             k, ta, tb, beta);
                    int ar = ta ? k : m, aw = ta ? m : k, br = tb ? n : k, bw = tb ? k : n;
                    int lda = aw + 3, ldb = bw + 2, ldc = n + 5;
                    tr_bf16 *A = malloc((size_t)ar * lda * sizeof *A), *B = malloc((size_t)br * ldb * sizeof *B);
                    float *C = malloc((size_t)m * ldc * sizeof *C), *C0 = malloc((size_t)m * ldc * sizeof *C0);
                    float *Aw = malloc((size_t)ar * lda * sizeof *Aw), *Bw = malloc((size_t)br * ldb * sizeof *Bw);
                    float *Cx = malloc((size_t)m * ldc * sizeof *Cx);
                    TT_CASE(name)
                    {
                        TT_CHECK(A && B && C && C0 && Aw && Bw && Cx, "out of memory");
                        if (tt_case_failed)
                            continue; /* the for of TT_CASE: continue still ends the case */
                        for (int r = 0; r < ar; r++)
                            for (int j = 0; j < lda; j++)
                                A[r * lda + j] = j < aw ? rnd_bf16() : NANB; /* padding: must not be read */
                        for (int r = 0; r < br; r++)
                            for (int j = 0; j < ldb; j++)
                                B[r * ldb + j] = j < bw ? rnd_bf16() : NANB;
                        for (int r = 0; r < m; r++)
                            for (int j = 0; j < ldc; j++)
                                C0[r * ldc + j] = j < n ? (bi ? tt_rndf(-2, 2) : NAN) : SENT;
                        memcpy(C, C0, (size_t)m * ldc * sizeof *C);
                        long long calls = c.calls[TR_K_GEMM];
                        tr_gemm_bf16(&c, ta, tb, m, n, k, A, lda, B, ldb, beta, C, ldc);
                        TT_CHECK(c.calls[TR_K_GEMM] == calls + 1, "not counted as a gemm");
                        double num = 0, den = 0;
                        int pad_bad = 0;
                        for (int i = 0; i < m; i++) {
                            for (int j = 0; j < n; j++) {
                                double s = bi ? (double)C0[i * ldc + j] : 0.0;
                                for (int t = 0; t < k; t++) {
                                    double a = widen1(ta ? A[t * lda + i] : A[i * lda + t]);
                                    double b = widen1(tb ? B[j * ldb + t] : B[t * ldb + j]);
                                    s += a * b;
                                }
                                double d = C[i * ldc + j] - s;
                                num += d * d;
                                den += s * s;
                            }
                            for (int j = n; j < ldc; j++)
                                pad_bad += bits_of(C[i * ldc + j]) != bits_of(SENT);
                        }
                        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
                        TT_CHECK(rel <= 1e-6, "relative error %.3g (NaN: C's poison or A/B padding read)", rel);
                        TT_CHECK(pad_bad == 0, "%d elements of C's padding changed", pad_bad);
                        /* bitwise tr_gemm_ex of the widened operands */
                        for (int e = 0; e < ar * lda; e++)
                            Aw[e] = widen1(A[e]);
                        for (int e = 0; e < br * ldb; e++)
                            Bw[e] = widen1(B[e]);
                        memcpy(Cx, C0, (size_t)m * ldc * sizeof *Cx);
                        tr_gemm_ex(&c, ta, tb, m, n, k, Aw, lda, Bw, ldb, beta, Cx, ldc);
                        TT_CHECK(memcmp(Cx, C, (size_t)m * ldc * sizeof *C) == 0, "differs from tr_gemm_ex bitwise");
                    }
                    free(A);
                    free(B);
                    free(C);
                    free(C0);
                    free(Aw);
                    free(Bw);
                    free(Cx);
                }
    tr_ctx_free(&c);
}

/* n values of the fp32 output ref rounded by ref_rne equal the bf16 output y? Reports the first difference. */
static int first_diff(const float *ref, const tr_bf16 *y, long n)
{
    for (long e = 0; e < n; e++)
        if (y[e] != ref_rne(ref[e]))
            return (int)e;
    return -1;
}

/* bf16 rounding of a float as a double (the reference's r(); round=0: the identity) */
static double rr(double x, int round)
{
    return round ? (double)widen1(ref_rne((float)x)) : x;
}

/* Reference attention of one head's block, in double, its GEMM operands rounded when round (docs/BF16.md,
 * "Attention": Q, K, V as given, rounded here; P before P V): o[i, d] for a [S, 3*CO] qkv row block,
 * head h of width D. With dO (not NULL): the backward, dO rounded, the recomputed P and dS rounded, into
 * dqkv [S, 3*CO] (this head's columns). */
static void ref_attn_head(const float *qkv, int S, int CO, int h, int D, int round, double *o, const float *dO,
                          double *dqkv)
{
    int LD = 3 * CO;
    double scale = 1.0 / sqrt((double)D), P[32 * 32], dS[32 * 32];
#define Q_(i, d) rr(qkv[(long)(i) * LD + h * D + (d)], round)
#define K_(i, d) rr(qkv[(long)(i) * LD + CO + h * D + (d)], round)
#define V_(i, d) rr(qkv[(long)(i) * LD + 2 * CO + h * D + (d)], round)
    for (int i = 0; i < S; i++) {
        double m = -INFINITY, sum = 0;
        for (int j = 0; j <= i; j++) {
            double t = 0;
            for (int d = 0; d < D; d++)
                t += Q_(i, d) * K_(j, d);
            P[i * S + j] = t * scale;
            m = fmax(m, t * scale);
        }
        for (int j = 0; j <= i; j++)
            sum += (P[i * S + j] = exp(P[i * S + j] - m));
        for (int j = 0; j < S; j++)
            P[i * S + j] = j <= i ? rr(P[i * S + j] / sum, round) : 0.0;
    }
    if (!dO) {
        for (int i = 0; i < S; i++)
            for (int d = 0; d < D; d++) {
                double t = 0;
                for (int j = 0; j <= i; j++)
                    t += P[i * S + j] * V_(j, d);
                o[(long)i * CO + h * D + d] = t;
            }
        return;
    }
#define G_(i, d) rr(dO[(long)(i) * CO + h * D + (d)], round)
    for (int i = 0; i < S; i++) {
        double dot = 0;
        for (int j = 0; j <= i; j++) {
            double t = 0;
            for (int d = 0; d < D; d++)
                t += G_(i, d) * V_(j, d);
            dS[i * S + j] = t;
            dot += t * P[i * S + j];
        }
        for (int j = 0; j < S; j++)
            dS[i * S + j] = j <= i ? rr(P[i * S + j] * (dS[i * S + j] - dot), round) : 0.0;
    }
    for (int i = 0; i < S; i++)
        for (int d = 0; d < D; d++) {
            double dq = 0, dk = 0, dv = 0;
            for (int j = 0; j < S; j++) {
                dq += dS[i * S + j] * K_(j, d);
                dk += dS[j * S + i] * Q_(j, d);
                dv += P[j * S + i] * G_(j, d);
            }
            dqkv[(long)i * LD + h * D + d] = dq * scale;
            dqkv[(long)i * LD + CO + h * D + d] = dk * scale;
            dqkv[(long)i * LD + 2 * CO + h * D + d] = dv;
        }
#undef Q_
#undef K_
#undef V_
#undef G_
}

/* ||got - ref|| / ||ref|| */
static double rel_err(const float *got, const double *ref, long n)
{
    double e = 0, r = 0;
    for (long i = 0; i < n; i++) {
        e += (got[i] - ref[i]) * (got[i] - ref[i]);
        r += ref[i] * ref[i];
    }
    return sqrt(e / r);
}

/* the tanh GeLU in double (tr_math.h's formula) */
static double gelu_d(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static void test_fused(void)
{
    tr_ctx c = {0};
    TT_CASE("ln apply bf16: bitwise RNE of tr_ln_apply (rows 7, cols 13 of hidden 26)")
    {
        enum { R = 7, C = 13, H = 26 };
        float x[R * C], rs[R], vs[R], g[C], b[C], y[R * C];
        tr_bf16 yb[R * C];
        for (int r = 0; r < R; r++) {
            double s = 0, q = 0;
            for (int j = 0; j < C; j++)
                s += x[r * C + j] = tt_rndf(-3, 5);
            rs[r] = (float)(2 * s); /* as if the other half of the row summed the same */
            for (int j = 0; j < C; j++)
                q += (x[r * C + j] - s / C) * (x[r * C + j] - s / C);
            vs[r] = (float)(2 * q + 1);
        }
        for (int j = 0; j < C; j++) {
            g[j] = tt_rndf(0.5f, 1.5f);
            b[j] = tt_rndf(-0.5f, 0.5f);
        }
        tr_ln_apply(&c, x, rs, vs, g, b, R, C, H, 1e-5f, y);
        long long calls = c.calls[TR_K_LN];
        tr_ln_apply_bf16(&c, x, rs, vs, g, b, R, C, H, 1e-5f, yb);
        int d = first_diff(y, yb, R * C);
        TT_CHECK(d < 0, "element %d: 0x%04x, want 0x%04x", d, d < 0 ? 0 : yb[d], d < 0 ? 0 : ref_rne(y[d]));
        TT_CHECK(c.calls[TR_K_LN] == calls + 1, "not counted as layernorm");
    }
    /* bf16 programs read fc1's bias in bf16 (docs/BF16.md): the twins below get that bias widened, and a sum with
     * the unrounded float32 bias must differ somewhere (else the check could not see the bias type) */
    TT_CASE("bias gelu save bf16: bitwise RNE of tr_bias_gelu_save with the bf16 bias widened, u += bias as the twin")
    {
        enum { R = 9, C = 21 };
        float u0[R * C], u1[R * C], u2[R * C], bias[C], g[R * C];
        tr_bf16 gb[R * C], b16[C];
        for (int e = 0; e < R * C; e++)
            u0[e] = tt_rndf(-6, 6);
        for (int j = 0; j < C; j++) {
            b16[j] = ref_rne(tt_rndf(-1, 1));
            bias[j] = widen1(b16[j]);
        }
        memcpy(u1, u0, sizeof u0);
        memcpy(u2, u0, sizeof u0);
        tr_bias_gelu_save(&c, u1, bias, g, R, C);
        long long calls = c.calls[TR_K_GELU];
        tr_bias_gelu_save_bf16(&c, u2, b16, gb, R, C);
        int d = first_diff(g, gb, R * C);
        TT_CHECK(d < 0, "element %d: 0x%04x, want 0x%04x", d, d < 0 ? 0 : gb[d], d < 0 ? 0 : ref_rne(g[d]));
        TT_CHECK(memcmp(u1, u2, sizeof u1) == 0, "u after the call differs from the twin's");
        TT_CHECK(c.calls[TR_K_GELU] == calls + 1, "not counted as gelu");
    }
    /* bf16 training keeps the MLP's pre-activation in bf16 (docs/BF16.md): GeLU of the unrounded float32 sum
     * v = h + bias (cuBLASLt's order), u = r(v) stored for the backward, whose GeLU' reads r(v). */
    TT_CASE("bias gelu keep bf16 (training): u bitwise RNE of the float32 h + bias, g bitwise RNE of the float32 "
            "twin's GeLU of the unrounded sum, h not written")
    {
        enum { R = 9, C = 21 };
        float h0[R * C], h[R * C], u1[R * C], bias[C], g[R * C];
        tr_bf16 gb[R * C], ub[R * C], b16[C];
        for (int e = 0; e < R * C; e++)
            h0[e] = tt_rndf(-6, 6);
        for (int j = 0; j < C; j++) {
            b16[j] = ref_rne(tt_rndf(-1, 1));
            bias[j] = widen1(b16[j]); /* the bias bf16 programs read (docs/BF16.md) */
        }
        memcpy(h, h0, sizeof h0);
        memcpy(u1, h0, sizeof h0);
        tr_bias_gelu_save(&c, u1, bias, g, R, C);
        long long calls = c.calls[TR_K_GELU];
        tr_bias_gelu_keep_bf16(&c, h, b16, gb, ub, R, C);
        int bad = -1, same_as_rounded_u = 0;
        for (int e = 0; e < R * C && bad < 0; e++)
            if (ub[e] != ref_rne(h0[e] + bias[e % C]))
                bad = e;
        TT_CHECK(bad < 0, "u element %d: 0x%04x, want RNE(h + bias) 0x%04x", bad, bad < 0 ? 0 : ub[bad],
                 bad < 0 ? 0 : ref_rne(h0[bad] + bias[bad % C]));
        int d = first_diff(g, gb, R * C);
        TT_CHECK(d < 0, "g element %d: 0x%04x, want 0x%04x", d, d < 0 ? 0 : gb[d], d < 0 ? 0 : ref_rne(g[d]));
        for (int e = 0; e < R * C; e++)
            same_as_rounded_u += gb[e] == ref_rne((float)gelu_d(widen1(ub[e])));
        TT_CHECK(same_as_rounded_u < R * C, "g equals GeLU(r(u)) everywhere: the test cannot tell the orders apart");
        TT_CHECK(memcmp(h, h0, sizeof h) == 0, "h was written");
        TT_CHECK(c.calls[TR_K_GELU] == calls + 1, "not counted as gelu");
    }
    TT_CASE("gelu bwd bf16: du = r(dg * GeLU'(u)) of the bf16 u: the float32 twin's product with that u rounded, bit "
            "for bit; that product within 1e-6 of the double reference, while GeLU' of the unrounded pre-activation "
            "(the float32 definition) is more than 1e-4 from it; dg not written")
    {
        enum { R = 7, C = 33, N = R * C };
        float v[N], dg[N], dg0[N], dg32[N], dgu[N], uw[N];
        tr_bf16 ub[N], du[N];
        double ref[N];
        for (int e = 0; e < N; e++) {
            v[e] = tt_rndf(-4, 4);
            ub[e] = ref_rne(v[e]);
            dg[e] = dg32[e] = tt_rndf(-1, 1);
        }
        for (int e = 0; e < N; e++) {
            double x = widen1(ub[e]), k = 0.7978845608028654, t = tanh(k * (x + 0.044715 * x * x * x));
            ref[e] = dg[e] * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x));
        }
        for (int e = 0; e < N; e++)
            uw[e] = widen1(ub[e]);
        memcpy(dg0, dg, sizeof dg);
        memcpy(dgu, dg, sizeof dg);
        long long calls = c.calls[TR_K_GELU];
        tr_gelu_bwd_bf16(&c, dg, ub, du, R, C);
        tr_gelu_bwd(&c, dg32, v, R, C);
        tr_gelu_bwd(&c, dgu, uw, R, C); /* the float32 twin on the bf16 u: du must be its rounding */
        TT_CHECK(memcmp(dg, dg0, sizeof dg) == 0, "dg was written");
        int d = first_diff(dgu, du, N);
        TT_CHECK(d < 0, "du element %d: 0x%04x, want 0x%04x", d, d < 0 ? 0 : du[d], d < 0 ? 0 : ref_rne(dgu[d]));
        double e16 = rel_err(dgu, ref, N), e32 = rel_err(dg32, ref, N);
        printf("# gelu bwd against GeLU'(r(u)) in double: bf16 u %.2g, float32 u %.2g\n", e16, e32);
        TT_CHECK(e16 < 1e-6, "relative error %.3g", e16);
        TT_CHECK(e32 > 1e-4, "the float32 definition is only %.3g away: the check cannot tell them apart", e32);
        TT_CHECK(c.calls[TR_K_GELU] == calls + 3, "not counted as gelu");
    }
    /* Attention in a bf16 program reads its GEMM operands in bf16 (Q, K, V, P; backward also dO, dS), as the
     * CUDA backend's tensor-core GEMMs do: against a double reference with exactly those roundings. A rounding
     * point missed or added moves the result by ~1e-3 (the float32 twin, checked too, is that far); the
     * float32-vs-double sums alone by ~1e-7, or ~1e-5 where one of them crosses a bf16 boundary. */
    enum { NS = 2, S = 11, HD = 3, D = 5, CO = HD * D, LD = 3 * CO };
    static float q0[NS * S * LD], q1[NS * S * LD], q2[NS * S * LD], bias[LD], out[NS * S * CO], sc[2 * S * S];
    static float dout[NS * S * CO], dq[NS * S * LD];
    static double oref[NS * S * CO], dref[NS * S * LD];
    static tr_bf16 ob[NS * S * CO];
    for (int e = 0; e < NS * S * LD; e++)
        q0[e] = tt_rndf(-2, 2);
    for (int j = 0; j < LD; j++)
        bias[j] = tt_rndf(-0.5f, 0.5f);
    for (int e = 0; e < NS * S * CO; e++)
        dout[e] = tt_rndf(-1, 1);
    TT_CASE("attention bf16, fp32 output (2 sequences of 11, 3 heads of 5): within 1e-4 of the double reference "
            "with Q, K, V and P rounded; qkv += bias unrounded, as the float32 twin")
    {
        memcpy(q1, q0, sizeof q0);
        memcpy(q2, q0, sizeof q0);
        tr_attention(&c, q1, bias, out, sc, NS, S, HD, D);
        double e32[2], e16[2];
        for (int round = 0; round < 2; round++) {
            for (int n = 0; n < NS; n++)
                for (int h = 0; h < HD; h++)
                    ref_attn_head(q1 + (long)n * S * LD, S, CO, h, D, round, oref + (long)n * S * CO, NULL, NULL);
            e32[round] = rel_err(out, oref, NS * S * CO);
        }
        long long calls = c.calls[TR_K_ATTENTION];
        tr_attention_bf16_fp32out(&c, q2, bias, out, sc, NS, S, HD, D);
        TT_CHECK(memcmp(q1, q2, sizeof q1) == 0, "qkv after the call differs from the twin's");
        TT_CHECK(c.calls[TR_K_ATTENTION] == calls + 1, "not counted as attention");
        for (int round = 0; round < 2; round++) {
            for (int n = 0; n < NS; n++)
                for (int h = 0; h < HD; h++)
                    ref_attn_head(q2 + (long)n * S * LD, S, CO, h, D, round, oref + (long)n * S * CO, NULL, NULL);
            e16[round] = rel_err(out, oref, NS * S * CO);
        }
        TT_CHECK(e16[1] < 1e-4, "%.2e from the rounded reference", e16[1]);
        TT_CHECK(e16[0] > 1e-3, "only %.2e from the unrounded reference: nothing rounded?", e16[0]);
        TT_CHECK(e32[0] < 1e-5 && e32[1] > 1e-3, "the float32 twin: %.2e from the unrounded reference, %.2e from "
                 "the rounded one", e32[0], e32[1]);
    }
    TT_CASE("attention bf16: its bf16 output is bitwise RNE of the fp32-output variant's")
    {
        memcpy(q1, q0, sizeof q0);
        memcpy(q2, q0, sizeof q0);
        tr_attention_bf16_fp32out(&c, q1, bias, out, sc, NS, S, HD, D);
        long long calls = c.calls[TR_K_ATTENTION];
        tr_attention_bf16(&c, q2, bias, ob, sc, NS, S, HD, D);
        int d = first_diff(out, ob, NS * S * CO);
        TT_CHECK(d < 0, "element %d: 0x%04x, want 0x%04x", d, d < 0 ? 0 : ob[d], d < 0 ? 0 : ref_rne(out[d]));
        TT_CHECK(memcmp(q1, q2, sizeof q1) == 0, "qkv after the call differs from the other's");
        TT_CHECK(c.calls[TR_K_ATTENTION] == calls + 1, "not counted as attention");
    }
    TT_CASE("attention backward bf16: within 1e-4 of the double reference with Q, K, V, dO, P and dS rounded; "
            "the float32 twin within 1e-5 of the unrounded one")
    {
        memcpy(q1, q0, sizeof q0);
        for (int e = 0; e < NS * S * LD; e++)
            q1[e] += bias[e % LD];
        double e32[2], e16[2];
        tr_attention_bwd(&c, q1, dout, dq, sc, sc + S * S, NS, S, HD, D);
        for (int round = 0; round < 2; round++) {
            for (int n = 0; n < NS; n++)
                for (int h = 0; h < HD; h++)
                    ref_attn_head(q1 + (long)n * S * LD, S, CO, h, D, round, NULL, dout + (long)n * S * CO,
                                  dref + (long)n * S * LD);
            e32[round] = rel_err(dq, dref, NS * S * LD);
        }
        long long calls = c.calls[TR_K_ATTENTION];
        tr_attention_bwd_bf16(&c, q1, dout, dq, sc, sc + S * S, NS, S, HD, D);
        TT_CHECK(c.calls[TR_K_ATTENTION] == calls + 1, "not counted as attention");
        for (int round = 0; round < 2; round++) {
            for (int n = 0; n < NS; n++)
                for (int h = 0; h < HD; h++)
                    ref_attn_head(q1 + (long)n * S * LD, S, CO, h, D, round, NULL, dout + (long)n * S * CO,
                                  dref + (long)n * S * LD);
            e16[round] = rel_err(dq, dref, NS * S * LD);
        }
        TT_CHECK(e16[1] < 1e-4, "%.2e from the rounded reference", e16[1]);
        TT_CHECK(e16[0] > 1e-3, "only %.2e from the unrounded reference: nothing rounded?", e16[0]);
        TT_CHECK(e32[0] < 1e-5 && e32[1] > 1e-3, "the float32 twin: %.2e from the unrounded reference, %.2e from "
                 "the rounded one", e32[0], e32[1]);
    }
    TT_CASE("scratch: no allocation once the largest call has run")
    {
        enum { K = 40 };
        static tr_bf16 A[K * K], B[K * K];
        static float C[K * K];
        for (int e = 0; e < K * K; e++)
            A[e] = B[e] = rnd_bf16();
        tr_gemm_bf16(&c, 0, 0, K, K, K, A, K, B, K, 0.0f, C, K);
        float *p = c.scratch;
        size_t cap = c.scratch_cap;
        TT_CHECK(p && cap >= 2 * K * K, "scratch %p of %zu floats after a %dx%d gemm", (void *)p, cap, K, K);
        for (int it = 0; it < 3; it++)
            tr_gemm_bf16(&c, it & 1, 0, K - it, K, K - 2 * it, A, K, B, K, 0.0f, C, K);
        TT_CHECK(c.scratch == p && c.scratch_cap == cap, "scratch reallocated for a smaller call");
    }
    tr_ctx_free(&c);
    TT_CASE("tr_ctx_free releases the scratch")
    {
        TT_CHECK(c.scratch == NULL && c.scratch_cap == 0, "scratch %p, %zu floats", (void *)c.scratch,
                 c.scratch_cap);
    }
}

/* Under mpirun -np P (P >= 2): broadcasts of odd counts from every root, MPI_COMM_WORLD as the row group. */
static int test_bcast(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tr_rank_desc d = {0};
    d.rank = rank;
    d.key[TR_ROW] = rank;
    d.size[TR_ROW] = size;
    tr_ctx c = {0};
    c.desc = &d;
    c.comm[TR_ROW] = MPI_COMM_WORLD;
    enum { N = 1001 };
    static tr_bf16 buf[N + 1];
    int ok = size >= 2;
    long long sent = 0, recv = 0;
    for (int root = 0; root < size; root++) {
        int count = N - 2 * root;
        for (int e = 0; e <= N; e++)
            buf[e] = rank == root ? (tr_bf16)(e * 40503u + (unsigned)root) : 0xdead;
        tr_bcast_bf16(&c, TR_ROW, root, buf, count);
        for (int e = 0; e < count; e++)
            ok &= buf[e] == (tr_bf16)(e * 40503u + (unsigned)root);
        ok &= buf[N] == (rank == root ? (tr_bf16)(N * 40503u + (unsigned)root) : 0xdead); /* nothing past count */
        if (rank == root)
            sent += 2LL * count;
        else
            recv += 2LL * count;
    }
    int counted = c.bcast_sent[TR_ROW] == sent && c.bcast_recv[TR_ROW] == recv && c.calls[TR_K_BCAST] == size;
    int all_ok = 0, all_counted = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&counted, &all_counted, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
        TT_CASE("bcast bf16: every member gets the root's bits, nothing past count")
        TT_CHECK(all_ok, "a member's buffer differs (or fewer than 2 ranks: %d)", size);
        TT_CASE("bcast bf16: 2 bytes an element, sent on the root, received on the others")
        TT_CHECK(all_counted, "a member's counters differ from 2 * count");
    }
    MPI_Finalize();
    return rank == 0 && tt_failed_cases ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--bcast") == 0)
        return test_bcast(argc, argv);
    test_cast();
    test_gemm();
    test_fused();
    TT_EXIT();
}
