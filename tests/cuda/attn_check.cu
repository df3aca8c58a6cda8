/*
 * attn_check.cu - attention on a GPU, outside any schedule (templates/kernels_attention.cu.in; docs/CUDA.md):
 * built by tests/cuda/attn_check.sh, which fills the template into OUT/kernels_attention.cu; this file includes
 * it, so the softmax kernels (trk::attn::k_softmax, k_softmax_bwd) are called directly, one at a time.
 *
 *   softmax      k_softmax with fp32 and bf16 probabilities, rows kept in registers (SEQ 70, 1024) and rows read
 *                per pass (SEQ 1100), against a double reference: masked entries exact zeros, unmasked within
 *                2e-6 + 1e-5 p (fp32) or 2^-8 p (bf16, one rounding)
 *   softmax_bwd  k_softmax_bwd over the kernel's own P, against dS = P (dP - sum P dP) in double from the same P
 *   attention    trk::attention and trk::attention_bwd (the cuBLAS strided-batched GEMMs and both kernels)
 *                against a double reference: the output and dQ, dK, dV within 1e-4 (fp32; 3e-3 with
 *                TESS_TF32=1) or 2e-2 (bf16) of the largest magnitude; the biased qkv in place
 *   bench        (attn_check bench) k_softmax and k_softmax_bwd at GPT-2 small's [12 x 1024, 1024] (fp32 scores,
 *                bf16 P) in GB/s of the bytes they must move, and attention forward + backward at 8 x 1024
 *                tokens, 12 heads of 64, bf16, in ms and TFLOP/s (causal flops, counted on the half)
 *
 * Prints "attn_check: N failures" and exits 1 on any.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels_attention.cu"
#include "trc_internal.h"
#include "tr_bf16.h"

#include "check_common.cuh"

template <typename T>
static float wide(T v)
{
    if constexpr (std::is_same_v<T, float>)
        return v;
    else
        return tr_bf16_to_f32(v);
}

static void fail(const char *what, size_t at, double got, double want)
{
    if (failures++ < 20)
        fprintf(stderr, "attn_check: %s: element %zu is %.9g, want %.9g\n", what, at, got, want);
}

/* k_softmax on [H*SEQ, SEQ] scores against double */
template <int H, int SEQ, typename T>
static void check_softmax(cudaStream_t s)
{
    constexpr int ROWS = H * SEQ;
    const float scale = 0.125f;
    std::vector<float> sc = rnd((size_t)ROWS * SEQ, -40, 40);
    float *dsc = put(sc);
    T *dp = dev<T>((size_t)ROWS * SEQ);
    trk::attn::k_softmax<ROWS, SEQ, T><<<trk::attn::blocks(ROWS, trk::attn::kRowWarps), trk::attn::kThreads, 0, s>>>(
        dsc, dp, scale);
    TRC_LAUNCHED("k_softmax");
    std::vector<T> p = get(dp, (size_t)ROWS * SEQ);
    char what[96];
    snprintf(what, sizeof what, "k_softmax<%d, %d, %s>", ROWS, SEQ, std::is_same_v<T, float> ? "float" : "tr_bf16");
    const double rel = std::is_same_v<T, float> ? 1e-5 : 1.0 / 256, abs = std::is_same_v<T, float> ? 2e-6 : 1e-30;
    for (int r = 0; r < ROWS; r++) {
        const int i = r % SEQ;
        double m = -INFINITY, l = 0;
        for (int j = 0; j <= i; j++)
            m = fmax(m, (double)sc[(size_t)r * SEQ + j] * scale);
        for (int j = 0; j <= i; j++)
            l += exp((double)sc[(size_t)r * SEQ + j] * scale - m);
        for (int j = 0; j < SEQ; j++) {
            const size_t e = (size_t)r * SEQ + j;
            const double want = j <= i ? exp((double)sc[e] * scale - m) / l : 0.0, got = wide(p[e]);
            if (j > i ? got != 0.0 : !(fabs(got - want) <= abs + rel * want))
                fail(what, e, got, want);
        }
    }
    cudaFree(dsc);
    cudaFree(dp);
}

/* k_softmax_bwd over the forward's P against double from the same P */
template <int H, int SEQ, typename T>
static void check_softmax_bwd(cudaStream_t s)
{
    constexpr int ROWS = H * SEQ;
    std::vector<float> sc = rnd((size_t)ROWS * SEQ, -4, 4), g = rnd((size_t)ROWS * SEQ, -1, 1);
    float *dsc = put(sc), *dg = put(g);
    T *dp = dev<T>((size_t)ROWS * SEQ);
    const unsigned nb = trk::attn::blocks(ROWS, trk::attn::kRowWarps);
    trk::attn::k_softmax<ROWS, SEQ, T><<<nb, trk::attn::kThreads, 0, s>>>(dsc, dp, 0.125f);
    std::vector<T> p = get(dp, (size_t)ROWS * SEQ);
    trk::attn::k_softmax_bwd<ROWS, SEQ, T><<<nb, trk::attn::kThreads, 0, s>>>(dg, dp);
    TRC_LAUNCHED("k_softmax_bwd");
    std::vector<T> ds = get(dp, (size_t)ROWS * SEQ);
    char what[96];
    snprintf(what, sizeof what, "k_softmax_bwd<%d, %d, %s>", ROWS, SEQ, std::is_same_v<T, float> ? "float" : "tr_bf16");
    const double rel = std::is_same_v<T, float> ? 1e-5 : 1.0 / 128;
    for (int r = 0; r < ROWS; r++) {
        const int i = r % SEQ;
        double d = 0, big = 0;
        for (int j = 0; j <= i; j++)
            d += (double)wide(p[(size_t)r * SEQ + j]) * g[(size_t)r * SEQ + j];
        std::vector<double> want(SEQ, 0.0);
        for (int j = 0; j <= i; j++) {
            want[j] = (double)wide(p[(size_t)r * SEQ + j]) * (g[(size_t)r * SEQ + j] - d);
            big = fmax(big, fabs(want[j]));
        }
        for (int j = 0; j < SEQ; j++) {
            const size_t e = (size_t)r * SEQ + j;
            const double got = wide(ds[e]);
            if (j > i ? got != 0.0 : !(fabs(got - want[j]) <= 1e-7 + rel * big))
                fail(what, e, got, want[j]);
        }
    }
    cudaFree(dsc);
    cudaFree(dg);
    cudaFree(dp);
}

/* trk::attention and trk::attention_bwd against a double reference */
template <int NSEQ, int SEQ, int HEADS, int HD, typename T>
static void check_attention(cudaStream_t s)
{
    constexpr int CQ = HEADS * HD, LD = 3 * CQ;
    constexpr size_t NT = (size_t)NSEQ * SEQ, SSH = (size_t)HEADS * SEQ * SEQ;
    std::vector<float> qkv = rnd(NT * LD, -1, 1), bias = rnd(LD, -0.2f, 0.2f), go = rnd(NT * CQ, -1, 1);
    float *dqkv = put(qkv), *dbias = put(bias), *dgo = put(go), *dgrad = dev<float>(NT * LD), *dsc = dev<float>(SSH);
    T *dout = dev<T>(NT * CQ), *dpr = dev<T>(SSH);
    T *dh = std::is_same_v<T, float> ? nullptr : dev<T>(NT * LD), *dgh = std::is_same_v<T, float> ? nullptr : dev<T>(NT * CQ);
    trk::attention<NSEQ, SEQ, HEADS, HD, T>(nullptr, s, dqkv, dbias, dout, dsc, dpr, dh);
    trk::attention_bwd<NSEQ, SEQ, HEADS, HD, T>(nullptr, s, dqkv, dgo, dgrad, dsc, dpr, dh, dgh);
    std::vector<float> qb = get(dqkv, NT * LD), grad = get(dgrad, NT * LD);
    std::vector<T> out = get(dout, NT * CQ);
    char what[128];
    snprintf(what, sizeof what, "attention<%d, %d, %d, %d, %s>", NSEQ, SEQ, HEADS, HD,
             std::is_same_v<T, float> ? "float" : "tr_bf16");
    for (size_t e = 0; e < NT * LD; e++)
        if (qb[e] != qkv[e] + bias[e % LD])
            fail("attention: qkv biased in place", e, qb[e], qkv[e] + bias[e % LD]);
    const char *tf32 = getenv("TESS_TF32");
    const double tol = !std::is_same_v<T, float> ? 2e-2 : (tf32 && *tf32 && strcmp(tf32, "0")) ? 3e-3 : 1e-4;
    std::vector<double> ro(NT * CQ), rg(NT * LD, 0.0), P((size_t)SEQ * SEQ), dS((size_t)SEQ * SEQ);
    const double scale = 1.0 / sqrt((double)HD);
    for (int n = 0; n < NSEQ; n++)
        for (int h = 0; h < HEADS; h++) {
            auto X = [&](int i, int part, int e) { return (double)qb[((size_t)n * SEQ + i) * LD + part * CQ + h * HD + e]; };
            auto G = [&](int i, int e) { return (double)go[((size_t)n * SEQ + i) * CQ + h * HD + e]; };
            for (int i = 0; i < SEQ; i++) {
                double m = -INFINITY, l = 0, d = 0;
                for (int j = 0; j <= i; j++) {
                    double x = 0;
                    for (int e = 0; e < HD; e++)
                        x += X(i, 0, e) * X(j, 1, e);
                    P[(size_t)i * SEQ + j] = x * scale;
                    m = fmax(m, x * scale);
                }
                for (int j = 0; j <= i; j++)
                    l += (P[(size_t)i * SEQ + j] = exp(P[(size_t)i * SEQ + j] - m));
                for (int j = 0; j <= i; j++) {
                    P[(size_t)i * SEQ + j] /= l;
                    double dp = 0;
                    for (int e = 0; e < HD; e++)
                        dp += G(i, e) * X(j, 2, e);
                    dS[(size_t)i * SEQ + j] = dp;
                    d += dp * P[(size_t)i * SEQ + j];
                }
                for (int j = 0; j <= i; j++)
                    dS[(size_t)i * SEQ + j] = P[(size_t)i * SEQ + j] * (dS[(size_t)i * SEQ + j] - d);
                for (int e = 0; e < HD; e++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++)
                        o += P[(size_t)i * SEQ + j] * X(j, 2, e);
                    ro[((size_t)n * SEQ + i) * CQ + h * HD + e] = o;
                }
            }
            for (int i = 0; i < SEQ; i++)
                for (int e = 0; e < HD; e++) {
                    double dq = 0, dk = 0, dv = 0;
                    for (int j = 0; j <= i; j++)
                        dq += dS[(size_t)i * SEQ + j] * X(j, 1, e);
                    for (int r = i; r < SEQ; r++) {
                        dk += dS[(size_t)r * SEQ + i] * X(r, 0, e);
                        dv += P[(size_t)r * SEQ + i] * G(r, e);
                    }
                    double *o = &rg[((size_t)n * SEQ + i) * LD + h * HD + e];
                    o[0] = dq * scale;
                    o[CQ] = dk * scale;
                    o[2 * CQ] = dv;
                }
        }
    double big = 0, gbig = 0;
    for (double v : ro)
        big = fmax(big, fabs(v));
    for (double v : rg)
        gbig = fmax(gbig, fabs(v));
    for (size_t e = 0; e < NT * CQ; e++)
        if (!(fabs(wide(out[e]) - ro[e]) <= tol * big))
            fail(what, e, wide(out[e]), ro[e]);
    snprintf(what + strlen(what), sizeof what - strlen(what), " backward");
    for (size_t e = 0; e < NT * LD; e++)
        if (!(fabs(grad[e] - rg[e]) <= tol * gbig))
            fail(what, e, grad[e], rg[e]);
    for (void *p : {(void *)dqkv, (void *)dbias, (void *)dgo, (void *)dgrad, (void *)dsc, (void *)dout, (void *)dpr,
                    (void *)dh, (void *)dgh})
        if (p)
            cudaFree(p);
}

static void bench(cudaStream_t s)
{
    constexpr int NSEQ = 8, SEQ = 1024, H = 12, HD = 64, ROWS = H * SEQ, CQ = H * HD, LD = 3 * CQ;
    constexpr size_t SS = (size_t)ROWS * SEQ, NT = (size_t)NSEQ * SEQ;
    float *sc = put(rnd(SS, -4, 4)), *g = put(rnd(SS, -1, 1));
    tr_bf16 *p = dev<tr_bf16>(SS);
    const unsigned nb = trk::attn::blocks(ROWS, trk::attn::kRowWarps);
    const double half = (double)SS / 2; /* causal: the unmasked half is read */
    double ms = time_ms(s, [&] { trk::attn::k_softmax<ROWS, SEQ, tr_bf16><<<nb, trk::attn::kThreads, 0, s>>>(sc, p, 0.125f); });
    printf("bench: k_softmax<%d, %d, tr_bf16>       %8.3f ms  %7.1f GB/s (scores read on the half, P written whole)\n",
           ROWS, SEQ, ms, (4 * half + 2.0 * SS) / ms / 1e6);
    ms = time_ms(s, [&] { trk::attn::k_softmax_bwd<ROWS, SEQ, tr_bf16><<<nb, trk::attn::kThreads, 0, s>>>(g, p); });
    printf("bench: k_softmax_bwd<%d, %d, tr_bf16>   %8.3f ms  %7.1f GB/s (dP and P read, dS written, on the half)\n",
           ROWS, SEQ, ms, (4 * half + 2 * 2 * half) / ms / 1e6);
    cudaFree(sc);
    cudaFree(g);
    cudaFree(p);
    float *qkv = put(rnd(NT * LD, -1, 1)), *bias = put(rnd(LD, -0.1f, 0.1f)), *go = put(rnd(NT * CQ, -1, 1));
    float *grad = dev<float>(NT * LD), *scores = dev<float>(SS);
    tr_bf16 *out = dev<tr_bf16>(NT * CQ), *probs = dev<tr_bf16>(SS), *qh = dev<tr_bf16>(NT * LD), *gh = dev<tr_bf16>(NT * CQ);
    const double flops = 4.0 * NSEQ * H * (double)SEQ * SEQ * HD / 2; /* QK^T and PV, causal half */
    ms = time_ms(s, [&] { trk::attention<NSEQ, SEQ, H, HD, tr_bf16>(nullptr, s, qkv, bias, out, scores, probs, qh); });
    printf("bench: attention<%d, %d, %d, %d, tr_bf16>      %8.3f ms  %7.1f TFLOP/s (causal)\n", NSEQ, SEQ, H, HD, ms,
           flops / ms / 1e9);
    ms = time_ms(s, [&] {
        trk::attention_bwd<NSEQ, SEQ, H, HD, tr_bf16>(nullptr, s, qkv, go, grad, scores, probs, qh, gh);
    });
    printf("bench: attention_bwd<%d, %d, %d, %d, tr_bf16>  %8.3f ms  %7.1f TFLOP/s (causal, recompute included)\n", NSEQ,
           SEQ, H, HD, ms, 3.5 * flops / ms / 1e9);
    for (void *x : {(void *)qkv, (void *)bias, (void *)go, (void *)grad, (void *)scores, (void *)out, (void *)probs,
                    (void *)qh, (void *)gh})
        cudaFree(x);
}

int main(int argc, char **argv)
{
    cudaCheck(cudaSetDevice(0));
    for (int k = 0; k < TRC_NSTREAMS; k++)
        cudaCheck(cudaStreamCreateWithFlags(&trc_g.stream[k], cudaStreamNonBlocking));
    tr_err err;
    memset(&err, 0, sizeof err);
    trc_gemm_init(&err);
    cudaStream_t s = trc_g.stream[TRC_COMPUTE];
    check_softmax<3, 70, float>(s);
    check_softmax<3, 70, tr_bf16>(s);
    check_softmax<2, 1024, tr_bf16>(s); /* 32 values a lane in registers */
    check_softmax<1, 1100, float>(s);   /* read per pass */
    check_softmax<1, 1100, tr_bf16>(s);
    check_softmax_bwd<3, 70, float>(s);
    check_softmax_bwd<3, 70, tr_bf16>(s);
    check_softmax_bwd<1, 1100, float>(s);
    check_attention<2, 70, 3, 64, float>(s);
    check_attention<2, 70, 3, 64, tr_bf16>(s);
    check_attention<1, 33, 2, 8, float>(s);
    check_attention<1, 33, 2, 8, tr_bf16>(s);
    if (argc > 1 && !strcmp(argv[1], "bench"))
        bench(s);
    trc_gemm_free();
    printf("attn_check: %d failures\n", failures);
    return failures ? 1 : 0;
}
