/*
 * bf16_check.cu - the CUDA side of bf16 (docs/BF16.md) on a GPU, outside any schedule: built by
 * tests/cuda/bf16_check.sh against a kernels.cu made from templates/kernels.cu.in with both output types.
 *
 *   kernels    ln_apply (16-byte and scalar paths) and bias_gelu_save with a tr_bf16 output give, bit for bit,
 *              tr_f32_to_bf16 of the same kernel's float output (and the same float side effects: the kept
 *              pre-activation); gelu_bwd reading a bf16 or a float u and bf16 training's bias_gelu_save (u and g
 *              bf16): the 16-byte path (aligned buffers), the scalar path (the same buffers one element off) and a host
 *              reference bit for bit; attention has its own check (tests/cuda/attn_check.cu)
 *   host       (--host: no GPU needed, and nothing of the GPU is touched) the 8-wide and scalar bodies of
 *              runtime/cuda/trk_elt.cuh, run on the host as the kernels dispatch them (8 a thread, then the tail
 *              one a thread), against each other and tr_bf16.h's rounding, bit for bit: gelu_bwd (bf16 and float
 *              u), bias + GeLU
 *              (float and bf16 g), bf16 training's bias + GeLU, cuDNN attention's bias and widening, ln_apply with a
 *              bf16 y (8 columns a lane); sizes with and without a tail, ties, infinities, overflow and subnormals
 *   cast       trc_cast_bf16 bit for bit tr_f32_to_bf16 (ties, infinities, overflow, subnormals, aligned and
 *              not, tails)
 *   gemm       trc_gemm_bf16, every transpose and beta 0/1, against a double product of the widened operands; with a
 *              bf16 C (beta 0) one rounding of that product, and at most one ulp from RNE of the fp32-C call
 *
 * Prints "bf16_check: N failures" and exits 1 on any.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "kernels.cuh"
#include "trc_internal.h"
#include "tr_bf16.h"

#include "check_common.cuh"
#include "trk_elt.cuh"

/* bf16 bits == RNE of the float output, element by element */
static void same_rne(const char *what, const float *yf, const tr_bf16 *yb, size_t n)
{
    std::vector<float> f = get(yf, n);
    std::vector<tr_bf16> b = get(yb, n);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (b[i] != tr_f32_to_bf16(f[i]) || isnan(f[i]))
            if (bad++ == 0)
                first = i;
    if (bad) {
        failures++;
        printf("not ok - %s: %zu of %zu bf16 outputs are not RNE of the float output (first %zu: %g -> 0x%04x, "
               "want 0x%04x)\n",
               what, bad, n, first, (double)f[first], b[first], tr_f32_to_bf16(f[first]));
    } else {
        printf("ok - %s: %zu bf16 outputs = RNE(float output)\n", what, n);
    }
}

static void same_f32(const char *what, const float *a, const float *b, size_t n)
{
    std::vector<float> x = get(a, n), y = get(b, n);
    if (memcmp(x.data(), y.data(), n * sizeof(float))) {
        failures++;
        printf("not ok - %s: the float side effects differ\n", what);
    } else {
        printf("ok - %s: float side effects identical\n", what);
    }
}

template <int R, int C, int H>
static void check_ln(cudaStream_t s)
{
    std::vector<float> x = rnd((size_t)R * C, -3, 3), g = rnd(C, 0.5f, 1.5f), b = rnd(C, -0.5f, 0.5f);
    std::vector<float> rs(R), vs(R);
    for (int r = 0; r < R; r++) {
        double t = 0, q = 0;
        for (int j = 0; j < C; j++)
            t += x[(size_t)r * C + j];
        for (int j = 0; j < C; j++)
            q += (x[(size_t)r * C + j] - t / H) * (x[(size_t)r * C + j] - t / H);
        rs[r] = (float)t;
        vs[r] = (float)q;
    }
    float *dx = put(x), *dg = put(g), *db = put(b), *drs = put(rs), *dvs = put(vs);
    float *yf = dev<float>((size_t)R * C);
    tr_bf16 *yb = dev<tr_bf16>((size_t)R * C);
    trk::ln_apply<R, C, H>(s, dx, drs, dvs, dg, db, 1e-5f, yf);
    trk::ln_apply<R, C, H>(s, dx, drs, dvs, dg, db, 1e-5f, yb);
    char what[64];
    snprintf(what, sizeof what, "ln_apply<%d, %d, %d>", R, C, H);
    same_rne(what, yf, yb, (size_t)R * C);
}

template <int R, int C>
static void check_gelu(cudaStream_t s)
{
    std::vector<float> u = rnd((size_t)R * C, -4, 4), b = rnd(C, -0.5f, 0.5f);
    const std::vector<tr_bf16> b16 = bias16(b); /* bf16 inference reads the bias in bf16; the float twin its values */
    float *u1 = put(u), *u2 = put(u), *db = put(b);
    tr_bf16 *db16 = put(b16);
    float *gf = dev<float>((size_t)R * C);
    tr_bf16 *gb = dev<tr_bf16>((size_t)R * C);
    trk::bias_gelu_save<R, C>(s, u1, db, gf);
    trk::bias_gelu_save<R, C>(s, u2, db16, gb);
    char what[64];
    snprintf(what, sizeof what, "bias_gelu_save<%d, %d>", R, C);
    same_rne(what, gf, gb, (size_t)R * C);
    same_f32(what, u1, u2, (size_t)R * C);
}

/* got == want bit for bit (host vectors) */
template <typename T>
static void same_host(const char *what, const std::vector<T> &got, const std::vector<T> &want)
{
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); i++)
        bad += memcmp(&got[i], &want[i], sizeof(T)) != 0;
    if (bad) {
        failures++;
        printf("not ok - %s: %zu of %zu elements differ from the reference\n", what, bad, got.size());
    } else {
        printf("ok - %s: %zu elements, the reference bit for bit\n", what, got.size());
    }
}

/* got within tol of want: the largest difference over the largest |want| (the elements near GeLU'(u) = 0 have no
 * relative error of their own to speak of) */
static void close_host(const char *what, const std::vector<float> &got, const std::vector<float> &want, double tol)
{
    double big = 0, worst = 0;
    for (size_t i = 0; i < want.size(); i++)
        big = fmax(big, fabs((double)want[i]));
    for (size_t i = 0; i < want.size(); i++)
        worst = fmax(worst, fabs((double)got[i] - want[i]));
    if (!(worst <= tol * big)) {
        failures++;
        printf("not ok - %s: max difference %.3e of %.3e from the host reference (tol %.0e)\n", what, worst, big, tol);
    } else {
        printf("ok - %s: %zu elements, max difference %.3e of %.3e from the host reference (tol %.0e)\n", what,
               got.size(), worst, big, tol);
    }
}

/* gelu_bwd with a bf16 or float u: aligned buffers (16-byte path) and the same one element off (scalar path) bit for
 * bit each other (the same per-element code on the device), and within 1e-6 of a host reference: the device's tanhf
 * and its contracted multiply-adds are not the host's, so bits differ (488 of 1824 elements on an H200) */
template <int R, int C, typename U>
static void check_gelu_bwd(cudaStream_t s)
{
    const size_t n = (size_t)R * C;
    std::vector<float> dg = rnd(n, -2, 2), u = rnd(n, -4, 4);
    std::vector<U> ub(n);
    std::vector<float> ref(n);
    for (size_t i = 0; i < n; i++) {
        float ui = u[i];
        if constexpr (std::is_same_v<U, float>) {
            ub[i] = ui;
        } else {
            ub[i] = tr_f32_to_bf16(u[i]);
            ui = tr_bf16_to_f32(ub[i]);
        }
        ref[i] = dg[i] * tr_gelu_grad(ui);
    }
    std::vector<float> vec; /* the 16-byte path's result */
    for (int off = 0; off < 2; off++) {
        float *ddg = dev<float>(n + 1);
        U *du = dev<U>(n + 1);
        cudaCheck(cudaMemcpy(ddg + off, dg.data(), n * 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(du + off, ub.data(), n * sizeof(U), cudaMemcpyHostToDevice));
        trk::gelu_bwd<R, C>(s, ddg + off, (const U *)(du + off));
        char what[96];
        snprintf(what, sizeof what, "gelu_bwd<%d, %d>, %s u, %s", R, C, std::is_same_v<U, float> ? "float" : "bf16",
                 off ? "scalar path" : "16-byte path");
        std::vector<float> got = get(ddg + off, n);
        close_host(what, got, ref, 1e-6);
        if (off == 0)
            vec = got;
        else
            same_host((std::string(what) + " against the 16-byte path").c_str(), got, vec);
    }
}

/* bf16 training's bias_gelu_save (u and g bf16): the 16-byte and scalar paths against a host reference */
template <int R, int C>
static void check_gelu_keep(cudaStream_t s)
{
    const size_t n = (size_t)R * C;
    std::vector<float> h = rnd(n, -4, 4), b = rnd(C, -0.5f, 0.5f);
    const std::vector<tr_bf16> b16 = bias16(b);
    std::vector<tr_bf16> ur(n), gr(n);
    for (size_t i = 0; i < n; i++) {
        const float v = h[i] + b[i % C];
        ur[i] = tr_f32_to_bf16(v);
        gr[i] = tr_f32_to_bf16(tr_gelu(v));
    }
    for (int off = 0; off < 2; off++) {
        float *dh = dev<float>(n + 1);
        tr_bf16 *db = put(b16), *dgo = dev<tr_bf16>(n + 1), *duo = dev<tr_bf16>(n + 1);
        cudaCheck(cudaMemcpy(dh + off, h.data(), n * 4, cudaMemcpyHostToDevice));
        trk::bias_gelu_save<R, C>(s, dh + off, db, dgo + off, duo + off);
        char what[96];
        snprintf(what, sizeof what, "bias_gelu_save<%d, %d> keeping bf16 u, %s: u", R, C,
                 off || C % 8 ? "scalar path" : "16-byte path");
        same_host(what, get(duo + off, n), ur);
        what[strlen(what) - 1] = 'g';
        same_host(what, get(dgo + off, n), gr);
    }
}

static void check_cast(void)
{
    const long long n = 1000003;
    std::vector<float> x = rnd((size_t)n + 8, -1e3f, 1e3f);
    const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x3f808000u /* tie, even */,
                                0x3f818000u /* tie, odd */, 0x3f808001u, 0x7f7fffffu /* rounds to inf */,
                                0x7f7f7fffu, 0x00000001u /* subnormal */, 0x807fffffu, 0x3f80ffffu};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        memcpy(&x[i], &special[i], 4);
        memcpy(&x[(size_t)n - 1 - i], &special[i], 4);
    }
    float *dx = put(x);
    tr_bf16 *dy = dev<tr_bf16>((size_t)n + 8);
    const struct {
        long long off, len;
    } cases[] = {{0, n}, {0, 8}, {0, 7}, {1, n - 1}, {4, 1001}, {8, n - 8}, {0, 0}};
    for (const auto &cs : cases) {
        cudaCheck(cudaMemset(dy, 0xff, (size_t)(n + 8) * 2));
        trc_cast_bf16(nullptr, dx + cs.off, cs.len, dy + cs.off);
        std::vector<tr_bf16> y = get(dy, (size_t)n + 8);
        long long bad = 0;
        for (long long i = 0; i < n + 8; i++) {
            const bool in = i >= cs.off && i < cs.off + cs.len;
            if (in ? y[(size_t)i] != tr_f32_to_bf16(x[(size_t)i]) : y[(size_t)i] != 0xffff)
                bad++;
        }
        if (bad) {
            failures++;
            printf("not ok - trc_cast_bf16 at offset %lld of %lld: %lld wrong elements\n", cs.off, cs.len, bad);
        } else {
            printf("ok - trc_cast_bf16 at offset %lld of %lld: RNE bits, nothing written outside\n", cs.off, cs.len);
        }
    }
}

static void check_gemm(void)
{
    const int m = 37, n = 29, k = 45;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int beta = 0; beta < 2; beta++) {
                const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
                const int ra = ta ? k : m, rb = tb ? n : k;
                std::vector<tr_bf16> A((size_t)ra * lda), B((size_t)rb * ldb);
                for (auto &a : A)
                    a = tr_f32_to_bf16(frand(-2, 2));
                for (auto &b : B)
                    b = tr_f32_to_bf16(frand(-2, 2));
                std::vector<float> C = rnd((size_t)m * ldc, -1, 1);
                tr_bf16 *dA = dev<tr_bf16>(A.size()), *dB = dev<tr_bf16>(B.size());
                float *dC = put(C);
                cudaCheck(cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice));
                cudaCheck(cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice));
                trc_gemm_bf16(nullptr, ta, tb, m, n, k, dA, lda, dB, ldb, (float)beta, dC, ldc);
                std::vector<float> got = get(dC, C.size());
                double worst = 0;
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++) {
                        double t = beta ? C[(size_t)i * ldc + j] : 0.0;
                        for (int p = 0; p < k; p++)
                            t += (double)tr_bf16_to_f32(ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p]) *
                                 tr_bf16_to_f32(tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j]);
                        worst = fmax(worst, fabs(got[(size_t)i * ldc + j] - t));
                    }
                if (!(worst < 1e-4)) {
                    failures++;
                    printf("not ok - trc_gemm_bf16 transa=%d transb=%d beta=%d: max error %g\n", ta, tb, beta, worst);
                } else {
                    printf("ok - trc_gemm_bf16 transa=%d transb=%d beta=%d: max error %.2g\n", ta, tb, beta, worst);
                }
            }
}

/* trc_gemm_bf16 with a bf16 C (beta 0; attention = "cudnn"'s proj input gradient, the bf16 dO cuDNN reads): within
 * half a bf16 ulp (and the fp32 sum's error) of the double product of the widened operands, i.e. one rounding of an
 * fp32 sum; and the count of elements that differ from RNE of the same call into an fp32 C (cuBLAS may take another
 * algorithm, another order of the fp32 sum, for a bf16 C: such an element is one bf16 ulp off, never more).
 * Shapes: small with every transpose, and GPT-2 small's proj input gradient on 1024 rows ([1024 x 768] @ [768 x
 * 768]^T). */
/* bf16 bits in the order of their values (so that neighbours differ by 1, across zero too) */
static int bf16_ord(tr_bf16 b)
{
    return b & 0x8000 ? -(int)(b & 0x7fff) : (int)(b & 0x7fff);
}

static void check_gemm_out_bf16(void)
{
    const int shapes[][3] = {{37, 29, 45}, {1024, 768, 768}};
    for (int si = 0; si < 2; si++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                if (si == 1 && (ta || !tb))
                    continue; /* the program's layout only: dY @ W^T */
                const int m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
                const int lda = (ta ? m : k) + (si ? 0 : 3), ldb = (tb ? k : n) + (si ? 0 : 5), ldc = n + (si ? 0 : 8);
                const int ra = ta ? k : m, rb = tb ? n : k;
                std::vector<tr_bf16> A((size_t)ra * lda), B((size_t)rb * ldb);
                for (auto &a : A)
                    a = tr_f32_to_bf16(frand(-2, 2));
                for (auto &b : B)
                    b = tr_f32_to_bf16(frand(-0.1f, 0.1f));
                tr_bf16 *dA = dev<tr_bf16>(A.size()), *dB = dev<tr_bf16>(B.size()), *dC = dev<tr_bf16>((size_t)m * ldc);
                float *dF = dev<float>((size_t)m * ldc);
                cudaCheck(cudaMemcpy(dA, A.data(), A.size() * 2, cudaMemcpyHostToDevice));
                cudaCheck(cudaMemcpy(dB, B.data(), B.size() * 2, cudaMemcpyHostToDevice));
                trc_gemm_bf16(nullptr, ta, tb, m, n, k, dA, lda, dB, ldb, 0.0f, dC, ldc);
                trc_gemm_bf16(nullptr, ta, tb, m, n, k, dA, lda, dB, ldb, 0.0f, dF, ldc);
                std::vector<tr_bf16> got = get(dC, (size_t)m * ldc);
                std::vector<float> f = get(dF, (size_t)m * ldc);
                size_t far = 0, differ = 0, n_el = (size_t)m * n;
                double worst = 0;
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++) {
                        double t = 0;
                        for (int p = 0; p < k; p++)
                            t += (double)tr_bf16_to_f32(ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p]) *
                                 tr_bf16_to_f32(tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j]);
                        const size_t e = (size_t)i * ldc + j;
                        const double g = tr_bf16_to_f32(got[e]), err = fabs(g - t);
                        worst = fmax(worst, err / fmax(fabs(t), 1e-30));
                        /* half an ulp of bf16 (2^-8 relative) and the fp32 sum's error (1e-4, check_gemm's bound) */
                        far += err > ldexp(fabs(t), -8) + 1e-4;
                        const tr_bf16 r = tr_f32_to_bf16(f[e]);
                        if (got[e] != r) {
                            differ++;
                            far += abs(bf16_ord(got[e]) - bf16_ord(r)) > 1; /* more than one ulp from it */
                        }
                    }
                if (far) {
                    failures++;
                    printf("not ok - trc_gemm_bf16 bf16 C [%d x %d x %d] transa=%d transb=%d: %zu of %zu elements more than "
                           "one rounding from the double product or one ulp from RNE of the fp32 C\n",
                           m, n, k, ta, tb, far, n_el);
                } else {
                    printf("ok - trc_gemm_bf16 bf16 C [%d x %d x %d] transa=%d transb=%d: one rounding of the product "
                           "(largest relative error %.2g); %zu of %zu differ from RNE of the fp32 C by one ulp\n",
                           m, n, k, ta, tb, worst, differ, n_el);
                }
                cudaCheck(cudaFree(dA));
                cudaCheck(cudaFree(dB));
                cudaCheck(cudaFree(dC));
                cudaCheck(cudaFree(dF));
            }
}

/* ---- --host: trk_elt.cuh's bodies on the host -------------------------------------------------------------- */

/* inputs with the rounding's corner cases among uniform values; infinities where inf (GeLU makes NaN of -inf, and
 * the host's and tr_bf16.h's NaN bits differ: a NaN is no test of the paths' rounding) */
static std::vector<float> corner(size_t n, float lo, float hi, bool inf = true)
{
    std::vector<float> x = rnd(n, lo, hi);
    const uint32_t special[] = {0x3f808000u /* tie, even */, 0x3f818000u /* tie, odd */, 0x7f7fffffu /* to inf */,
                                0x00000001u /* subnormal */, 0x80000000u, 0xc0a08000u, 0x7f800000u, 0xff800000u};
    for (size_t i = 0; i < sizeof special / sizeof special[0] - (inf ? 0 : 2) && 3 * i < n; i++)
        memcpy(&x[n - 1 - 3 * i], &special[i], 4);
    return x;
}

static std::vector<tr_bf16> to_bf16(const std::vector<float> &x)
{
    std::vector<tr_bf16> r(x.size());
    for (size_t i = 0; i < x.size(); i++)
        r[i] = tr_f32_to_bf16(x[i]);
    return r;
}

template <typename T>
static void same_bits(const char *what, const char *path, const std::vector<T> &got, const std::vector<T> &want)
{
    if (memcmp(got.data(), want.data(), got.size() * sizeof(T))) {
        size_t i = 0;
        while (!memcmp(&got[i], &want[i], sizeof(T)))
            i++;
        failures++;
        printf("not ok - host %s: the %s differs from the reference at element %zu of %zu\n", what, path, i,
               got.size());
    } else {
        printf("ok - host %s: the %s is the reference, bit for bit (%zu elements)\n", what, path, got.size());
    }
}

/* a kernel's dispatch: vec, 8 a thread over n / 8 * 8 elements then the tail one a thread; else one a thread */
template <typename B8, typename B1>
static void dispatch(long long n, bool vec, B8 body8, B1 body1)
{
    const long long n8 = vec ? n / 8 : 0;
    for (long long t = 0; t < n8 + (n - 8 * n8); t++)
        if (t < n8)
            body8(8 * t);
        else
            body1(8 * n8 + (t - n8));
}

/* u: tr_bf16 (bf16 training) or float (fp32 training) */
template <typename U>
static void host_gelu_bwd(long long n)
{
    const std::vector<float> dg0 = corner((size_t)n, -2, 2);
    std::vector<U> u;
    if constexpr (std::is_same_v<U, float>)
        u = corner((size_t)n, -4, 4, false);
    else
        u = to_bf16(corner((size_t)n, -4, 4, false));
    std::vector<float> ref(dg0);
    for (long long i = 0; i < n; i++) {
        float ui;
        if constexpr (std::is_same_v<U, float>)
            ui = u[(size_t)i];
        else
            ui = tr_bf16_to_f32(u[(size_t)i]);
        ref[(size_t)i] = dg0[(size_t)i] * tr_gelu_grad(ui);
    }
    char what[64];
    snprintf(what, sizeof what, "gelu_bwd, %s u, %lld elements", std::is_same_v<U, float> ? "float" : "bf16", n);
    for (int vec = 1; vec >= 0; vec--) {
        std::vector<float> dg(dg0);
        dispatch(n, vec, [&](long long e) { trk::elt::gelu_bwd8(e, dg.data(), u.data()); },
                 [&](long long i) { trk::elt::gelu_bwd1(i, dg.data(), u.data()); });
        same_bits(what, vec ? "16-byte path" : "scalar path", dg, ref);
    }
}

template <typename OUT>
static void host_bias_add(int rows, int cols)
{
    const size_t n = (size_t)rows * cols;
    const std::vector<float> x0 = corner(n, -4, 4, false), b = rnd((size_t)cols, -0.5f, 0.5f);
    std::vector<float> xr(n);
    std::vector<OUT> gr(n);
    for (size_t i = 0; i < n; i++) {
        xr[i] = x0[i] + b[i % (size_t)cols];
        const float g = tr_gelu(xr[i]);
        if constexpr (std::is_same_v<OUT, float>)
            gr[i] = g;
        else
            gr[i] = tr_f32_to_bf16(g);
    }
    char what[96];
    snprintf(what, sizeof what, "bias + GeLU [%d, %d], %s g", rows, cols, std::is_same_v<OUT, float> ? "float" : "bf16");
    for (int vec = cols % 8 == 0; vec >= 0; vec--) {
        std::vector<float> x(x0);
        std::vector<OUT> g(n);
        dispatch((long long)n, vec, [&](long long e) { trk::elt::bias_add8<true>(e, cols, x.data(), b.data(), g.data()); },
                 [&](long long i) { trk::elt::bias_add1<true>(i, cols, x.data(), b.data(), g.data()); });
        same_bits(what, vec ? "16-byte path's kept pre-activation" : "scalar path's kept pre-activation", x, xr);
        same_bits(what, vec ? "16-byte path's g" : "scalar path's g", g, gr);
    }
}

static void host_bias_gelu_keep(int rows, int cols)
{
    const size_t n = (size_t)rows * cols;
    const std::vector<float> h = corner(n, -4, 4, false);
    std::vector<float> b = rnd((size_t)cols, -0.5f, 0.5f);
    const std::vector<tr_bf16> b16 = bias16(b);
    std::vector<tr_bf16> ur(n), gr(n);
    for (size_t i = 0; i < n; i++) {
        const float v = h[i] + b[i % (size_t)cols];
        ur[i] = tr_f32_to_bf16(v);
        gr[i] = tr_f32_to_bf16(tr_gelu(v));
    }
    char what[96];
    snprintf(what, sizeof what, "bf16 training's bias + GeLU [%d, %d]", rows, cols);
    for (int vec = cols % 8 == 0; vec >= 0; vec--) {
        std::vector<tr_bf16> u(n), g(n);
        dispatch((long long)n, vec,
                 [&](long long e) { trk::elt::bias_gelu_keep8(e, cols, h.data(), b16.data(), g.data(), u.data()); },
                 [&](long long i) { trk::elt::bias_gelu_keep1(i, cols, h.data(), b16.data(), g.data(), u.data()); });
        same_bits(what, vec ? "16-byte path's u" : "scalar path's u", u, ur);
        same_bits(what, vec ? "16-byte path's g" : "scalar path's g", g, gr);
    }
}

static void host_attn(int rows, int ld, long long nw)
{
    const size_t n = (size_t)rows * ld;
    const std::vector<float> q0 = corner(n, -3, 3), b = rnd((size_t)ld, -0.5f, 0.5f);
    std::vector<float> qr(n);
    std::vector<tr_bf16> hr(n);
    for (size_t i = 0; i < n; i++) {
        qr[i] = q0[i] + b[i % (size_t)ld];
        hr[i] = tr_f32_to_bf16(qr[i]);
    }
    char what[96];
    snprintf(what, sizeof what, "cuDNN attention's QKV bias [%d, %d]", rows, ld);
    for (int vec = ld % 8 == 0; vec >= 0; vec--) {
        std::vector<float> q(q0);
        std::vector<tr_bf16> h(n);
        dispatch((long long)n, vec, [&](long long e) { trk::elt::bias_bf16_8(e, ld, q.data(), b.data(), h.data()); },
                 [&](long long i) { trk::elt::bias_bf16_1(i, ld, q.data(), b.data(), h.data()); });
        same_bits(what, vec ? "16-byte path's qkv (only read)" : "scalar path's qkv (only read)", q, q0);
        same_bits(what, vec ? "16-byte path's bf16 copy" : "scalar path's bf16 copy", h, hr);
    }
    const std::vector<tr_bf16> x = to_bf16(corner((size_t)nw, -1e3f, 1e3f));
    std::vector<float> yr((size_t)nw);
    for (long long i = 0; i < nw; i++)
        yr[(size_t)i] = tr_bf16_to_f32(x[(size_t)i]);
    snprintf(what, sizeof what, "cuDNN attention's widening, %lld elements", nw);
    for (int vec = 1; vec >= 0; vec--) {
        std::vector<float> y((size_t)nw);
        dispatch(nw, vec, [&](long long e) { trk::elt::widen8(e, x.data(), y.data()); },
                 [&](long long i) { trk::elt::widen1(i, x.data(), y.data()); });
        same_bits(what, vec ? "16-byte path" : "scalar path", y, yr);
    }
}

/* ln_apply with a bf16 output: lanes of a warp over each row as k_ln_apply runs them (8 columns a lane where the width
 * is a multiple of 8, else one), against tr_f32_to_bf16 of tr_ln */
static void host_ln(int rows, int cols, int hidden)
{
    const size_t n = (size_t)rows * cols;
    const std::vector<float> x = corner(n, -3, 3, false), g = rnd((size_t)cols, 0.5f, 1.5f),
                             b = rnd((size_t)cols, -0.5f, 0.5f);
    std::vector<float> rs((size_t)rows), vs((size_t)rows);
    for (int r = 0; r < rows; r++) {
        rs[(size_t)r] = frand(-5, 5);
        vs[(size_t)r] = frand(1, 50);
    }
    const float inv_n = 1.0f / (float)hidden, eps = 1e-5f;
    std::vector<tr_bf16> yr(n);
    for (size_t i = 0; i < n; i++)
        yr[i] = tr_f32_to_bf16(tr_ln(x[i], rs[i / (size_t)cols], vs[i / (size_t)cols], inv_n, eps, g[i % (size_t)cols],
                                     b[i % (size_t)cols]));
    char what[96];
    snprintf(what, sizeof what, "ln_apply [%d, %d] of %d, bf16 y", rows, cols, hidden);
    for (int vec = cols % 8 == 0; vec >= 0; vec--) {
        std::vector<tr_bf16> y(n);
        for (int r = 0; r < rows; r++) {
            const float *xr = x.data() + (size_t)r * cols, sum = rs[(size_t)r], sq = vs[(size_t)r];
            tr_bf16 *yo = y.data() + (size_t)r * cols;
            for (int lane = 0; lane < 32; lane++)
                if (vec)
                    for (int v = lane; v < cols / 8; v += 32)
                        trk::elt::ln_apply8(8 * v, xr, g.data(), b.data(), sum, sq, inv_n, eps, yo);
                else
                    for (int j = lane; j < cols; j += 32)
                        trk::elt::ln_apply1(j, xr, g.data(), b.data(), sum, sq, inv_n, eps, yo);
        }
        same_bits(what, vec ? "16-byte path" : "scalar path", y, yr);
    }
}

static int check_host(void)
{
    host_ln(37, 64, 128);
    host_ln(5, 768, 768); /* GPT-2 small's width: 3 sweeps of a warp */
    host_ln(7, 36, 72);   /* a width the 8-wide body does not take */
    host_gelu_bwd<tr_bf16>(1824); /* a multiple of 8 */
    host_gelu_bwd<tr_bf16>(1831); /* a tail of 7 */
    host_gelu_bwd<tr_bf16>(5);    /* the tail alone */
    host_gelu_bwd<float>(1824);
    host_gelu_bwd<float>(1827); /* a tail of 3 */
    host_gelu_bwd<float>(6);
    host_bias_add<float>(19, 96);
    host_bias_add<tr_bf16>(19, 96);
    host_bias_add<tr_bf16>(7, 33); /* a width the 8-wide body does not take */
    host_bias_gelu_keep(19, 96);
    host_bias_gelu_keep(7, 33);
    host_attn(16, 384, 1000003);
    host_attn(5, 36, 13);
    printf("bf16_check --host: %d failures\n", failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--host"))
        return check_host();
    cudaCheck(cudaSetDevice(0));
    for (int k = 0; k < TRC_NSTREAMS; k++)
        cudaCheck(cudaStreamCreateWithFlags(&trc_g.stream[k], cudaStreamNonBlocking));
    tr_err err;
    memset(&err, 0, sizeof err);
    trc_gemm_init(&err);
    cudaStream_t s = trc_g.stream[TRC_COMPUTE];
    check_ln<37, 64, 128>(s);  /* 8 columns a lane: 16-byte bf16 stores */
    check_ln<37, 36, 72>(s);   /* 4 columns a lane: 8-byte bf16 stores */
    check_ln<37, 30, 60>(s);   /* scalar path */
    check_gelu<19, 96>(s);
    check_gelu<7, 33>(s);
    check_gelu_bwd<19, 96, tr_bf16>(s); /* a multiple of 8 */
    check_gelu_bwd<7, 33, tr_bf16>(s);  /* 16-byte path and a tail of 7 */
    check_gelu_bwd<19, 96, float>(s);
    check_gelu_bwd<7, 33, float>(s);
    check_gelu_keep<19, 96>(s);
    check_gelu_keep<7, 33>(s);
    check_cast();
    check_gemm();
    check_gemm_out_bf16();
    trc_gemm_free();
    printf("bf16_check: %d failures\n", failures);
    return failures ? 1 : 0;
}
