/*
 * lt_check.cu - trc_gemm_lt and trc_gemm_lt_bwd (runtime/cuda/trc_gemm_lt.cu: cuBLASLt with a bias, bias + GeLU
 * or bias + GeLU + pre-activation epilogue; in the backward a GeLU-gradient or bias-gradient epilogue) on a GPU,
 * outside any schedule: built by tests/cuda/lt_check.sh against a kernels.cu made from templates/kernels.cu.in
 * with the bias + GeLU, GeLU-gradient and column-sum kernels it is compared with.
 *
 *   epilogues  every row of the table below that is not a benchmark shape: D (and aux) against a double
 *              reference of beta*C + A@B + bias and its tanh GeLU (runtime/tr_math.h's formula) within 1e-5 of
 *              the largest magnitude for fp32 operands, and against the unfused path the CUDA backend ran
 *              before (trc_gemm or trc_gemm_bf16, then trk::bias_gelu or trk::bias_gelu_save) within 1e-5;
 *              bf16 operands (fp32 D and aux) likewise
 *   bf16 D     a bf16 program's fc1 (gen/fuse.c): bf16 operands and bias (cuBLASLt reads the bias in D's type; an
 *              fp32 bias with a bf16 D it refused on an H200), D = the bf16 GeLU output, aux = the bf16 pre-activation
 *              (training) or none (inference): D and aux within 4e-3 of the double reference (each element one
 *              bf16 rounding: half an ulp is at most 2^-8 of it), and no element more than one bf16 ulp from the separate
 *              path (trc_gemm_bf16 into fp32, then trk::bias_gelu_save with the bf16 bias: what q >= 2 runs) but in
 *              GeLU's far negative tail (off_ulps); bf16 training's DGELU (du = bf16(dY W2^T GeLU'(u)), bf16
 *              dY, W2 and u): trc_gemm_bf16 + trk::gelu_bwd within 4e-3 of the double reference (half an ulp),
 *              cuBLASLt's du no element more than one bf16 ulp from it (cuBLASLt does not always round to the
 *              nearest here: 4.49e-3 from double on an H200), two runs bitwise identical
 *   backward   DGELU (dg = beta*dg + dY @ W^T, then dg *= GeLU'(u)) and BGRADA (dW = beta*dW + X^T @ dY and
 *              db = the column sums of dY) with beta 0 and 1: D against the double reference within 1e-5, and
 *              against trc_gemm_ex followed by trk::gelu_bwd or trk::colsum within 1e-5; the bias gradient
 *              within 1e-5 of the double column sums (cuBLASLt sums in its own fixed order), and two runs of
 *              each call bitwise identical (replicas rely on it: docs/CUDA.md)
 *   bench      (lt_check bench) GPT-2 small's fc1, [8192 x 768] @ [768 x 3072]: trc_gemm_lt against the GEMM
 *              followed by the separate kernel, for the inference pair (in place), the training pair (the
 *              pre-activation kept) in fp32 and with bf16 operands; GPT-2 small's fc2 input gradient
 *              ([8192 x 768] @ [3072 x 768]^T, then GeLU's gradient) and fc1 weight gradient ([8192 x 768]^T @
 *              [8192 x 3072], then the bias gradient) both ways; the bf16 program's fc1 (bf16 D and aux from the
 *              bf16 bias) against trc_gemm_bf16 + trk::bias_gelu_save; milliseconds, mean of 20 after 3 warm-ups
 *
 * The table is the one a class program defines (trc.h); the runtime makes every row's descriptors and algorithm
 * at trc_gemm_lt_init, before anything runs; should cuBLASLt have no algorithm for a row, the check stops there with
 * that message and "not ok".
 *
 * Prints "lt_check: N failures" and exits 1 on any.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels.cuh"
#include "trc_internal.h"
#include "tr_bf16.h"

#include "check_common.cuh"

constexpr int SM = 37, SN = 96, SK = 64, BM = 8192, BN = 3072, BK = 768;

extern "C" const trc_lt_shape trc_lt_shapes[] = {
    {TRC_EPI_GELU_BIAS, SM, SN, SK, SK, SN, SN, 0.0f, 0, 0, 0, 0},     /* 0: inference, q = 1 */
    {TRC_EPI_GELU_BIAS, SM, SN, SK, SK, SN, SN, 1.0f, 0, 0, 0, 0},     /* 1: inference, the last SUMMA step */
    {TRC_EPI_GELU_AUX_BIAS, SM, SN, SK, SK, SN, SN, 0.0f, 0, 0, 0, 0}, /* 2: training */
    {TRC_EPI_BIAS, SM, SN, SK, SK, SN, SN, 1.0f, 0, 0, 0, 0},          /* 3: bias alone */
    {TRC_EPI_GELU_AUX_BIAS, SM, SN, SK, SK, SN, SN, 0.0f, 1, 0, 0, 0}, /* 4: bf16 operands, fp32 D and aux */
    {TRC_EPI_GELU_BIAS, BM, BN, BK, BK, BN, BN, 0.0f, 0, 0, 0, 0},     /* 5: bench */
    {TRC_EPI_GELU_AUX_BIAS, BM, BN, BK, BK, BN, BN, 0.0f, 0, 0, 0, 0}, /* 6: bench */
    {TRC_EPI_GELU_AUX_BIAS, BM, BN, BK, BK, BN, BN, 0.0f, 1, 0, 0, 0}, /* 7: bench, bf16 operands */
    {TRC_EPI_GELU_BIAS, SM, SN, SK, SK, SN, SN, 1.0f, 1, 0, 0, 0},     /* 8: bf16 operands, fp32 C accumulated */
    {TRC_EPI_DGELU, SM, SN, SK, SK, SK, SN, 0.0f, 0, 0, 0, 1},         /* 9: dg = dY @ W^T, GeLU' */
    {TRC_EPI_DGELU, SM, SN, SK, SK, SK, SN, 1.0f, 0, 0, 0, 1},         /* 10: the same, accumulating */
    {TRC_EPI_BGRADA, SK, SN, SM, SK, SN, SN, 0.0f, 0, 0, 1, 0},        /* 11: dW = X^T @ dY, db */
    {TRC_EPI_BGRADA, SK, SN, SM, SK, SN, SN, 1.0f, 0, 0, 1, 0},        /* 12: the same, accumulating dW */
    {TRC_EPI_DGELU, BM, BN, BK, BK, BK, BN, 0.0f, 0, 0, 0, 1},         /* 13: bench, fc2's input gradient */
    {TRC_EPI_BGRADA, BK, BN, BM, BK, BN, BN, 0.0f, 0, 0, 1, 0},        /* 14: bench, fc1's weight gradient */
    {TRC_EPI_GELU_AUX_BIAS, SM, SN, SK, SK, SN, SN, 0.0f, 1, 1, 0, 0}, /* 15: bf16 training: bf16 D, aux, bias */
    {TRC_EPI_GELU_BIAS, SM, SN, SK, SK, SN, SN, 0.0f, 1, 1, 0, 0},     /* 16: bf16 inference: bf16 D and bias */
    {TRC_EPI_GELU_AUX_BIAS, BM, BN, BK, BK, BN, BN, 0.0f, 1, 1, 0, 0}, /* 17: bench, bf16 training */
    {TRC_EPI_DGELU, SM, SN, SK, SK, SK, SN, 0.0f, 1, 1, 0, 1},         /* 18: bf16 training's du = bf16(dY W2^T GeLU'(u)) */
    {TRC_EPI_DGELU, BM, BN, BK, BK, BK, BN, 0.0f, 1, 1, 0, 1},         /* 19: bench, the same */
};
extern "C" const int trc_lt_nshapes = sizeof trc_lt_shapes / sizeof trc_lt_shapes[0];

void trc_print_step(void)
{
}

[[noreturn]] void trc_die(void)
{
    printf("not ok - trc_gemm_lt stopped (the message above)\nlt_check: %d failures\n", failures + 1);
    exit(1);
}

static double gelu_d(double x)
{
    return x / (1.0 + exp(-2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static float bfr(float x)
{
    return tr_bf16_to_f32(tr_f32_to_bf16(x));
}

static std::vector<tr_bf16> to_bf16(const std::vector<float> &v)
{
    std::vector<tr_bf16> b(v.size());
    for (size_t i = 0; i < v.size(); i++)
        b[i] = tr_f32_to_bf16(v[i]);
    return b;
}

template <typename T>
static T *up(const std::vector<T> &h)
{
    T *d = dev<T>(h.size());
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

/* max |got - want| / max |want| */
static double rel(const std::vector<double> &want, const std::vector<float> &got)
{
    double mx = 0, err = 0;
    for (size_t i = 0; i < want.size(); i++) {
        mx = fmax(mx, fabs(want[i]));
        double e = fabs((double)got[i] - want[i]);
        err = isnan(e) ? INFINITY : fmax(err, e);
    }
    return err / (mx > 0 ? mx : 1);
}

static void report(const char *what, double err, double tol)
{
    if (!(err <= tol)) {
        failures++;
        printf("not ok - %s: error %.3g > %.1g\n", what, err, tol);
    } else {
        printf("ok - %s: error %.3g\n", what, err);
    }
}

/* One small row: trc_gemm_lt against the double reference and against the unfused path. */
static void check_row(int slot, cudaStream_t s)
{
    const trc_lt_shape *r = &trc_lt_shapes[slot];
    const int m = r->m, n = r->n, k = r->k;
    std::vector<float> a = rnd((size_t)m * k, -1, 1), b = rnd((size_t)k * n, -1, 1), c0 = rnd((size_t)m * n, -2, 2),
                       bias = rnd(n, -1, 1);
    if (r->bf16)
        for (auto *v : {&a, &b})
            for (auto &x : *v)
                x = bfr(x);
    std::vector<double> pre((size_t)m * n), want((size_t)m * n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = r->beta * (double)c0[(size_t)i * n + j];
            for (int p = 0; p < k; p++)
                acc += (double)a[(size_t)i * k + p] * b[(size_t)p * n + j];
            pre[(size_t)i * n + j] = acc + bias[j];
            want[(size_t)i * n + j] = r->epi == TRC_EPI_BIAS ? acc + bias[j] : gelu_d(acc + bias[j]);
        }
    float *db = up(bias);
    char what[160];
    const bool aux = r->epi == TRC_EPI_GELU_AUX_BIAS;
    snprintf(what, sizeof what, "trc_gemm_lt row %d (epilogue %d, beta %g, %s operands, fp32 D)", slot, r->epi,
             (double)r->beta, r->bf16 ? "bf16" : "fp32");
    float *dc = up(c0), *dd = aux ? dev<float>((size_t)m * n) : dc;
    float *fc = up(c0), *fg = aux ? dev<float>((size_t)m * n) : fc; /* the unfused path */
    if (r->bf16) {
        tr_bf16 *da = up(to_bf16(a)), *dbm = up(to_bf16(b));
        trc_gemm_lt(nullptr, slot, r->epi, m, n, k, da, k, dbm, n, r->beta, dc, n, db, dd, aux ? dc : nullptr);
        trc_gemm_bf16(nullptr, 0, 0, m, n, k, da, k, dbm, n, r->beta, fc, n);
    } else {
        float *da = up(a), *dbm = up(b);
        trc_gemm_lt(nullptr, slot, r->epi, m, n, k, da, k, dbm, n, r->beta, dc, n, db, dd, aux ? dc : nullptr);
        trc_gemm(nullptr, m, n, k, da, k, dbm, n, r->beta, fc, n);
    }
    if (aux)
        trk::bias_gelu_save<SM, SN>(s, fc, db, fg);
    else if (r->epi == TRC_EPI_GELU_BIAS)
        trk::bias_gelu<SM, SN>(s, fc, db);
    const double tol = 1e-5;
    report(what, rel(want, get(dd, (size_t)m * n)), tol);
    if (aux) {
        snprintf(what + strlen(what), sizeof what - strlen(what), ": the pre-activation");
        report(what, rel(pre, get(dc, (size_t)m * n)), tol);
    }
    if (r->epi != TRC_EPI_BIAS) {
        std::vector<float> fused = get(dd, (size_t)m * n), sep = get(fg, (size_t)m * n);
        std::vector<double> sd(sep.begin(), sep.end());
        snprintf(what, sizeof what, "trc_gemm_lt row %d against the GEMM and the separate kernel", slot);
        report(what, rel(sd, fused), tol);
    }
}

/* How many elements of a are neither within one bf16 ulp of b's (as ordered integers) nor within 2^-17 of b's largest
 * magnitude (256 times finer than bf16's half ulp there)? The second clause is for GeLU's far negative tail, where
 * cuBLASLt's GeLU and tr_gelu give different tiny values (|GeLU(x)| < 1e-5 below x = -4.5): there the values'
 * exponents differ, so their ulp distance is large (13600 on an H200, 2026-11-27), their difference is not. */
static int off_ulps(const std::vector<tr_bf16> &a, const std::vector<tr_bf16> &b)
{
    double mx = 0;
    for (tr_bf16 v : b)
        mx = fmax(mx, fabs((double)tr_bf16_to_f32(v)));
    int n = 0;
    for (size_t i = 0; i < a.size(); i++) {
        const int x = a[i] & 0x8000 ? -(a[i] & 0x7fff) : a[i], y = b[i] & 0x8000 ? -(b[i] & 0x7fff) : b[i];
        const double d = fabs((double)tr_bf16_to_f32(a[i]) - tr_bf16_to_f32(b[i]));
        n += abs(x - y) > 1 && !(d <= 0x1p-17 * mx);
    }
    return n;
}

static std::vector<float> widen_all(const std::vector<tr_bf16> &v)
{
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); i++)
        r[i] = tr_bf16_to_f32(v[i]);
    return r;
}

/* A bf16 program's fc1 with its bias + GeLU in one call (gen/fuse.c): bf16 operands and bias, bf16 D (and aux) */
static void check_row16(int slot, cudaStream_t s)
{
    const trc_lt_shape *r = &trc_lt_shapes[slot];
    const int m = r->m, n = r->n, k = r->k;
    const bool aux = r->epi == TRC_EPI_GELU_AUX_BIAS;
    std::vector<float> a = rnd((size_t)m * k, -1, 1), b = rnd((size_t)k * n, -1, 1), bias = rnd(n, -1, 1);
    for (auto *v : {&a, &b, &bias})
        for (auto &x : *v)
            x = bfr(x);
    std::vector<double> pre((size_t)m * n), want((size_t)m * n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = bias[j];
            for (int p = 0; p < k; p++)
                acc += (double)a[(size_t)i * k + p] * b[(size_t)p * n + j];
            pre[(size_t)i * n + j] = acc;
            want[(size_t)i * n + j] = gelu_d(acc);
        }
    tr_bf16 *da = up(to_bf16(a)), *dbm = up(to_bf16(b)), *dbias = up(to_bf16(bias));
    tr_bf16 *dd = dev<tr_bf16>((size_t)m * n), *du = aux ? dev<tr_bf16>((size_t)m * n) : nullptr;
    trc_gemm_lt(nullptr, slot, r->epi, m, n, k, da, k, dbm, n, 0.0f, dd, n, dbias, dd, du);
    float *h = dev<float>((size_t)m * n); /* the separate path: fp32 GEMM, then the kernel from the bf16 bias */
    tr_bf16 *g2 = dev<tr_bf16>((size_t)m * n), *u2 = dev<tr_bf16>((size_t)m * n);
    trc_gemm_bf16(nullptr, 0, 0, m, n, k, da, k, dbm, n, 0.0f, h, n);
    if (aux)
        trk::bias_gelu_save<SM, SN>(s, h, dbias, g2, u2);
    else
        trk::bias_gelu_save<SM, SN>(s, h, dbias, g2);
    char what[160];
    snprintf(what, sizeof what, "trc_gemm_lt row %d (epilogue %d, bf16 operands, bias, D%s)", slot, r->epi,
             aux ? " and aux" : "");
    const std::vector<tr_bf16> got = get(dd, (size_t)m * n), sep = get(g2, (size_t)m * n);
    report(what, rel(want, widen_all(got)), 4e-3);
    if (aux) {
        const std::vector<tr_bf16> gu = get(du, (size_t)m * n), su = get(u2, (size_t)m * n);
        snprintf(what + strlen(what), sizeof what - strlen(what), ": the pre-activation");
        report(what, rel(pre, widen_all(gu)), 4e-3);
        snprintf(what, sizeof what, "trc_gemm_lt row %d's bf16 pre-activation against the GEMM and the separate kernel: "
                                    "elements more than one bf16 ulp off", slot);
        report(what, off_ulps(gu, su), 0);
    }
    snprintf(what, sizeof what, "trc_gemm_lt row %d's bf16 GeLU output against the GEMM and the separate kernel: elements "
                                "more than one bf16 ulp and 2^-17 of the largest off", slot);
    report(what, off_ulps(got, sep), 0);
}

static double gelu_grad_d(double x);

/* bf16 training's fc2 input gradient with GeLU's backward in one call (gen/fuse.c): bf16 dY, W2 and u, bf16 D = du */
static void check_row16_bwd(int slot, cudaStream_t s)
{
    const trc_lt_shape *r = &trc_lt_shapes[slot];
    const int m = r->m, n = r->n, k = r->k;
    std::vector<float> a = rnd((size_t)m * k, -1, 1), w = rnd((size_t)n * k, -1, 1), u = rnd((size_t)m * n, -4, 4);
    for (auto *v : {&a, &w, &u})
        for (auto &x : *v)
            x = bfr(x);
    std::vector<double> want((size_t)m * n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int p = 0; p < k; p++)
                acc += (double)a[(size_t)i * k + p] * w[(size_t)j * k + p];
            want[(size_t)i * n + j] = acc * gelu_grad_d(u[(size_t)i * n + j]);
        }
    tr_bf16 *da = up(to_bf16(a)), *dw = up(to_bf16(w)), *du = up(to_bf16(u)), *dd = dev<tr_bf16>((size_t)m * n);
    trc_gemm_lt_bwd(nullptr, slot, TRC_EPI_DGELU, 0, 1, m, n, k, da, k, dw, k, 0.0f, dd, n, du, nullptr);
    float *dg = dev<float>((size_t)m * n); /* the separate path: fp32 dg, then the kernel (what q >= 2 runs) */
    tr_bf16 *d2 = dev<tr_bf16>((size_t)m * n);
    trc_gemm_bf16(nullptr, 0, 1, m, n, k, da, k, dw, k, 0.0f, dg, n);
    trk::gelu_bwd<SM, SN>(s, dg, du, d2);
    const std::vector<tr_bf16> got = get(dd, (size_t)m * n), sep = get(d2, (size_t)m * n);
    char what[160];
    /* the kernel rounds its fp32 product to the nearest bf16: within half an ulp (2^-8 of an element at most) of the
     * double product; cuBLASLt's du is held to one ulp of the kernel's below. On an H200 (2026-11-27) cuBLASLt's du
     * was 4.49e-3 of the largest from double: within one ulp of the kernel's, not always the nearest value. */
    snprintf(what, sizeof what, "trc_gemm_lt_bwd row %d's separate path (DGELU, bf16 operands, u and du) against double",
             slot);
    report(what, rel(want, widen_all(sep)), 4e-3);
    snprintf(what, sizeof what, "trc_gemm_lt_bwd row %d's bf16 du against the GEMM and the separate kernel: elements "
                                "more than one bf16 ulp and 2^-17 of the largest off", slot);
    report(what, off_ulps(got, sep), 0);
    const std::vector<tr_bf16> again = (trc_gemm_lt_bwd(nullptr, slot, TRC_EPI_DGELU, 0, 1, m, n, k, da, k, dw, k, 0.0f,
                                                        dd, n, du, nullptr),
                                        get(dd, (size_t)m * n));
    snprintf(what, sizeof what, "trc_gemm_lt_bwd row %d: two runs bitwise identical", slot);
    report(what, memcmp(again.data(), got.data(), got.size() * sizeof got[0]) ? 1 : 0, 0);
}

/* tanh GeLU's derivative in double (runtime/tr_math.h's tr_gelu_grad) */
static double gelu_grad_d(double x)
{
    const double k = 0.7978845608028654, z = k * (x + 0.044715 * x * x * x), t = 1.0 / (1.0 + exp(-2.0 * z));
    return t + x * t * (1.0 - t) * 2.0 * k * (1.0 + 3.0 * 0.044715 * x * x);
}

static bool same_bits(const std::vector<float> &a, const std::vector<float> &b)
{
    return a.size() == b.size() && !memcmp(a.data(), b.data(), a.size() * sizeof(float));
}

/* One backward row: trc_gemm_lt_bwd against the double reference, against trc_gemm_ex and the separate kernel, and
 * against itself (a second run, bitwise). DGELU: C[m,n] = GeLU'(u) * (beta*C + A[m,k] @ B[n,k]^T); BGRADA:
 * C[m,n] = beta*C + A[k,m]^T @ B[k,n] and db[n] = the column sums of B. */
static void check_row_bwd(int slot, cudaStream_t s)
{
    const trc_lt_shape *r = &trc_lt_shapes[slot];
    const int m = r->m, n = r->n, k = r->k;
    const bool dgelu = r->epi == TRC_EPI_DGELU;
    std::vector<float> a = rnd((size_t)m * k, -1, 1), b = rnd((size_t)k * n, -1, 1), c0 = rnd((size_t)m * n, -2, 2),
                       u = rnd((size_t)m * n, -3, 3);
    std::vector<double> want((size_t)m * n), dbw(n, 0.0);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = r->beta * (double)c0[(size_t)i * n + j];
            for (int p = 0; p < k; p++)
                acc += dgelu ? (double)a[(size_t)i * k + p] * b[(size_t)j * k + p] /* A [m,k], B [n,k] */
                             : (double)a[(size_t)p * m + i] * b[(size_t)p * n + j]; /* A [k,m], B [k,n] */
            want[(size_t)i * n + j] = dgelu ? acc * gelu_grad_d(u[(size_t)i * n + j]) : acc;
        }
    for (int p = 0; p < k && !dgelu; p++)
        for (int j = 0; j < n; j++)
            dbw[j] += b[(size_t)p * n + j];
    const int lda = r->lda, ldb = r->ldb;
    float *da = up(a), *dbm = up(b), *du = up(u);
    std::vector<float> got[2], gotb[2];
    for (int run = 0; run < 2; run++) {
        float *dc = up(c0), *dbias = dgelu ? nullptr : dev<float>(n);
        trc_gemm_lt_bwd(nullptr, slot, r->epi, r->transa, r->transb, m, n, k, da, lda, dbm, ldb, r->beta, dc, n,
                        dgelu ? du : nullptr, dbias);
        got[run] = get(dc, (size_t)m * n);
        if (!dgelu)
            gotb[run] = get(dbias, n);
    }
    float *fc = up(c0), *fb = dev<float>(n); /* the unfused path */
    trc_gemm_ex(nullptr, r->transa, r->transb, m, n, k, da, lda, dbm, ldb, r->beta, fc, n);
    if (dgelu)
        trk::gelu_bwd<SM, SN>(s, fc, du);
    else
        trk::colsum<SM, SN>(s, dbm, fb);
    char what[160];
    snprintf(what, sizeof what, "trc_gemm_lt_bwd row %d (%s, beta %g)", slot, dgelu ? "DGELU" : "BGRADA",
             (double)r->beta);
    const double tol = 1e-5;
    report(what, rel(want, got[0]), tol);
    std::vector<float> sep = get(fc, (size_t)m * n);
    std::vector<double> sd(sep.begin(), sep.end());
    snprintf(what, sizeof what, "trc_gemm_lt_bwd row %d against trc_gemm_ex and the separate kernel", slot);
    report(what, rel(sd, got[0]), tol);
    if (!dgelu) {
        snprintf(what, sizeof what, "trc_gemm_lt_bwd row %d: the bias gradient", slot);
        report(what, rel(dbw, gotb[0]), tol);
        std::vector<float> sb = get(fb, n);
        std::vector<double> sbd(sb.begin(), sb.end());
        snprintf(what, sizeof what, "trc_gemm_lt_bwd row %d: the bias gradient against trk::colsum", slot);
        report(what, rel(sbd, gotb[0]), tol);
    }
    const bool same = same_bits(got[0], got[1]) && (dgelu || same_bits(gotb[0], gotb[1]));
    if (!same)
        failures++;
    printf("%s - trc_gemm_lt_bwd row %d: two runs bitwise identical\n", same ? "ok" : "not ok", slot);
}

static void bench(cudaStream_t s)
{
    const size_t na = (size_t)BM * BK, nb = (size_t)BK * BN, nc = (size_t)BM * BN;
    float *a = up(rnd(na, -1, 1)), *b = up(rnd(nb, -0.05f, 0.05f)), *bias = up(rnd(BN, -1, 1));
    tr_bf16 *ah = up(to_bf16(rnd(na, -1, 1))), *bh = up(to_bf16(rnd(nb, -0.05f, 0.05f)));
    float *u = dev<float>(nc), *g = dev<float>(nc);
    const double flop = 2.0 * BM * BN * BK;
    struct {
        const char *what;
        double sep, fused;
    } row[3];
    row[0] = {"fp32, inference (GeLU in place)",
              time_ms(s, [&] { trc_gemm(nullptr, BM, BN, BK, a, BK, b, BN, 0.0f, u, BN); trk::bias_gelu<BM, BN>(s, u, bias); }),
              time_ms(s, [&] { trc_gemm_lt(nullptr, 5, TRC_EPI_GELU_BIAS, BM, BN, BK, a, BK, b, BN, 0.0f, u, BN, bias, u, nullptr); })};
    row[1] = {"fp32, training (pre-activation kept)",
              time_ms(s, [&] { trc_gemm(nullptr, BM, BN, BK, a, BK, b, BN, 0.0f, u, BN); trk::bias_gelu_save<BM, BN>(s, u, bias, g); }),
              time_ms(s, [&] { trc_gemm_lt(nullptr, 6, TRC_EPI_GELU_AUX_BIAS, BM, BN, BK, a, BK, b, BN, 0.0f, u, BN, bias, g, u); })};
    row[2] = {"bf16 operands, training (fp32 out)",
              time_ms(s, [&] { trc_gemm_bf16(nullptr, 0, 0, BM, BN, BK, ah, BK, bh, BN, 0.0f, u, BN); trk::bias_gelu_save<BM, BN>(s, u, bias, g); }),
              time_ms(s, [&] { trc_gemm_lt(nullptr, 7, TRC_EPI_GELU_AUX_BIAS, BM, BN, BK, ah, BK, bh, BN, 0.0f, u, BN, bias, g, u); })};
    tr_bf16 *b16 = up(to_bf16(rnd(BN, -1, 1))), *g16 = dev<tr_bf16>(nc), *u16 = dev<tr_bf16>(nc);
    const double sep16 = time_ms(s, [&] {
        trc_gemm_bf16(nullptr, 0, 0, BM, BN, BK, ah, BK, bh, BN, 0.0f, u, BN);
        trk::bias_gelu_save<BM, BN>(s, u, b16, g16, u16);
    });
    const double fused16 = time_ms(s, [&] {
        trc_gemm_lt(nullptr, 17, TRC_EPI_GELU_AUX_BIAS, BM, BN, BK, ah, BK, bh, BN, 0.0f, g16, BN, b16, g16, u16);
    });
    printf("lt_check bench: fc1 [%d x %d] @ [%d x %d], bf16 training (bf16 bias, GeLU output and pre-activation): "
           "GEMM + kernel %.3f ms, trc_gemm_lt %.3f ms (%.2fx; %.0f TFLOP/s fused)\n",
           BM, BK, BK, BN, sep16, fused16, sep16 / fused16, flop / (fused16 * 1e-3) * 1e-12);
    for (auto &r : row)
        printf("lt_check bench: fc1 [%d x %d] @ [%d x %d], %s: GEMM + kernel %.3f ms, trc_gemm_lt %.3f ms (%.2fx; %.0f "
               "TFLOP/s fused)\n",
               BM, BK, BK, BN, r.what, r.sep, r.fused, r.sep / r.fused, flop / (r.fused * 1e-3) * 1e-12);
    /* the backward: dg [BM, BN] = dY [BM, BK] @ W2 [BN, BK]^T, then GeLU'; dW1 [BK, BN] = X [BM, BK]^T @ du [BM, BN] */
    float *dy = up(rnd((size_t)BM * BK, -1, 1)), *w2 = up(rnd((size_t)BN * BK, -0.05f, 0.05f)), *db = dev<float>(BN);
    float *dw = dev<float>((size_t)BK * BN);
    double dg_sep = time_ms(s, [&] {
        trc_gemm_ex(nullptr, 0, 1, BM, BN, BK, dy, BK, w2, BK, 0.0f, g, BN);
        trk::gelu_bwd<BM, BN>(s, g, u);
    });
    double dg_fused = time_ms(s, [&] {
        trc_gemm_lt_bwd(nullptr, 13, TRC_EPI_DGELU, 0, 1, BM, BN, BK, dy, BK, w2, BK, 0.0f, g, BN, u, nullptr);
    });
    double bg_sep = time_ms(s, [&] {
        trc_gemm_ex(nullptr, 1, 0, BK, BN, BM, a, BK, g, BN, 0.0f, dw, BN);
        trk::colsum<BM, BN>(s, g, db);
    });
    double bg_fused = time_ms(s, [&] {
        trc_gemm_lt_bwd(nullptr, 14, TRC_EPI_BGRADA, 1, 0, BK, BN, BM, a, BK, g, BN, 0.0f, dw, BN, nullptr, db);
    });
    printf("lt_check bench: fc2 input gradient [%d x %d] @ [%d x %d]^T, then GeLU': GEMM + kernel %.3f ms, "
           "trc_gemm_lt_bwd %.3f ms (%.2fx)\n",
           BM, BK, BN, BK, dg_sep, dg_fused, dg_sep / dg_fused);
    /* bf16 training's: fp32 dg then du = bf16(dg GeLU'(u)), against one call writing du */
    tr_bf16 *dyh = up(to_bf16(rnd((size_t)BM * BK, -1, 1))), *w2h = up(to_bf16(rnd((size_t)BN * BK, -0.05f, 0.05f)));
    tr_bf16 *uh = up(to_bf16(rnd(nc, -4, 4))), *duh = dev<tr_bf16>(nc);
    const double dg16_sep = time_ms(s, [&] {
        trc_gemm_bf16(nullptr, 0, 1, BM, BN, BK, dyh, BK, w2h, BK, 0.0f, g, BN);
        trk::gelu_bwd<BM, BN>(s, g, uh, duh);
    });
    const double dg16_fused = time_ms(s, [&] {
        trc_gemm_lt_bwd(nullptr, 19, TRC_EPI_DGELU, 0, 1, BM, BN, BK, dyh, BK, w2h, BK, 0.0f, duh, BN, uh, nullptr);
    });
    printf("lt_check bench: fc2 input gradient [%d x %d] @ [%d x %d]^T, bf16 training (bf16 du from the bf16 u): GEMM + "
           "kernel %.3f ms, trc_gemm_lt_bwd %.3f ms (%.2fx)\n",
           BM, BK, BN, BK, dg16_sep, dg16_fused, dg16_sep / dg16_fused);
    printf("lt_check bench: fc1 weight gradient [%d x %d]^T @ [%d x %d], then the bias gradient: GEMM + column sum "
           "%.3f ms, trc_gemm_lt_bwd %.3f ms (%.2fx)\n",
           BM, BK, BM, BN, bg_sep, bg_fused, bg_sep / bg_fused);
}

int main(int argc, char **argv)
{
    const bool do_bench = argc > 1 && !strcmp(argv[1], "bench");
    cudaCheck(cudaSetDevice(0));
    for (int k = 0; k < TRC_NSTREAMS; k++)
        cudaCheck(cudaStreamCreateWithFlags(&trc_g.stream[k], cudaStreamNonBlocking));
    tr_err err;
    memset(&err, 0, sizeof err);
    trc_gemm_init(&err);
    trc_gemm_lt_init(&err);
    cudaStream_t s = trc_g.stream[TRC_COMPUTE];
    for (int slot : {0, 1, 2, 3, 4, 8})
        check_row(slot, s);
    for (int slot : {9, 10, 11, 12})
        check_row_bwd(slot, s);
    for (int slot : {15, 16})
        check_row16(slot, s);
    check_row16_bwd(18, s);
    if (do_bench)
        bench(s);
    trc_gemm_lt_free();
    trc_gemm_free();
    printf("lt_check: %d failures\n", failures);
    return failures ? 1 : 0;
}
