/*
 * sdpa_check.cu - cuDNN's fused attention (attention = "cudnn": runtime/cuda/trc_sdpa.cpp and trc_attn_cudnn.cu;
 * docs/CUDA.md, "Fused attention through cuDNN") on a GPU, outside any schedule, against the cuBLAS path (the
 * filled templates/kernels_attention.cu.in, included as in attn_check.cu) and a double reference. Built by
 * tests/cuda/sdpa_check.sh, which links build/cuda/trc_sdpa.o and cuDNN.
 *
 *   check    trc_attn_cudnn (bf16 output) and trc_attn_cudnn_bwd, at [2 x 70, 3 heads of 64] (70: no multiple of
 *            cuDNN's tiles), [1 x 33, 2 of 8], [2 x 72, 4 of 128] and GPT-2 small's [8 x 1024, 12 of 64]: the biased
 *            qkv only read and the bf16 copy of the biased qkv; the output and dQ, dK, dV within 2e-2 of the largest magnitude of the
 *            double reference (on every head; on heads (0, 0) and (last, last) at GPT-2's shape) and of the cuBLAS
 *            path's (trk::attention<..., tr_bf16>, every element); the softmax statistics of trc_sdpa_fwd within
 *            1e-3 of double log-sum-exp (kept by the training forward); the fp32-output overload bit for bit the widened bf16 output; the
 *            backward twice bitwise identical (cuDNN's deterministic algorithm: replicas stay identical)
 *   bench    (sdpa_check bench) at 8 x 1024 tokens, 12 heads of 64, bf16: trc_sdpa_fwd and trc_sdpa_bwd alone, the
 *            generated steps trc_attn_cudnn and trc_attn_cudnn_bwd (bias, casts; the backward reads the
 *            forward's bf16 QKV, O and statistics) and the cuBLAS path's trk::attention and trk::attention_bwd, in ms and
 *            TFLOP/s (causal flops, counted on the half)
 *
 * Prints "sdpa_check: N failures" and exits 1 on any; a graph cuDNN refuses stops it with cuDNN's reason.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels_attention.cu"
#include "trc_internal.h"
#include "trc_sdpa.h"
#include "tr_bf16.h"

#include "check_common.cuh"

/* trc_attn_cudnn.cu stops through it when cuDNN refuses a graph */
void trc_die(void)
{
    exit(2);
}

static void fail(const char *what, size_t at, double got, double want)
{
    if (failures++ < 20)
        fprintf(stderr, "sdpa_check: %s: element %zu is %.9g, want %.9g\n", what, at, got, want);
}

static void close_to(const char *what, const std::vector<double> &got, const std::vector<double> &want,
                     const std::vector<char> &mask, double tol)
{
    double big = 0, worst = 0;
    for (size_t e = 0; e < want.size(); e++)
        if (mask.empty() || mask[e])
            big = fmax(big, fabs(want[e]));
    for (size_t e = 0; e < want.size(); e++)
        if (mask.empty() || mask[e]) {
            const double d = fabs(got[e] - want[e]);
            worst = fmax(worst, d);
            if (!(d <= tol * big))
                fail(what, e, got[e], want[e]);
        }
    printf("sdpa_check: %-58s max error %.3e of %.3e (tol %.0e)\n", what, big > 0 ? worst / big : worst, big, tol);
}

template <typename T>
static std::vector<double> widen(const std::vector<T> &v)
{
    std::vector<double> w(v.size());
    for (size_t i = 0; i < v.size(); i++) {
        if constexpr (std::is_same_v<T, float>)
            w[i] = v[i];
        else
            w[i] = tr_bf16_to_f32(v[i]);
    }
    return w;
}

template <int NSEQ, int SEQ, int HEADS, int HD>
static void check(cudaStream_t s, bool all_heads)
{
    constexpr int CQ = HEADS * HD, LD = 3 * CQ;
    constexpr size_t NT = (size_t)NSEQ * SEQ, SSH = (size_t)HEADS * SEQ * SEQ;
    char what[160];
    snprintf(what, sizeof what, "[%d x %d, %d heads of %d]", NSEQ, SEQ, HEADS, HD);
    const std::string shape = what;
    std::vector<float> qkv = rnd(NT * LD, -1, 1), bias = rnd(LD, -0.2f, 0.2f), go = rnd(NT * CQ, -1, 1);
    /* cuDNN */
    float *dqkv = put(qkv), *dbias = put(bias), *dgo = put(go);
    float *dstats = dev<float>(NT * HEADS), *dout32 = dev<float>(NT * CQ);
    tr_bf16 *dout = dev<tr_bf16>(NT * CQ), *dqh = dev<tr_bf16>(NT * LD), *dgh = dev<tr_bf16>(NT * CQ);
    tr_bf16 *dwork = dev<tr_bf16>(NT * LD), *dobuf = dev<tr_bf16>(NT * CQ);
    /* the training forward (statistics kept), then the backward on what it kept */
    trc_attn_cudnn(nullptr, s, NSEQ, SEQ, HEADS, HD, dqkv, dbias, dout, dqh, nullptr, dstats);
    std::vector<float> stats = get(dstats, NT * HEADS);
    trc_attn_cudnn_bwd(nullptr, s, NSEQ, SEQ, HEADS, HD, dqh, dout, dstats, dgo, dwork, dgh);
    std::vector<float> qb = get(dqkv, NT * LD);
    std::vector<tr_bf16> grad = get(dwork, NT * LD); /* cuDNN's bf16 dQ, dK, dV in the qkv layout */
    std::vector<tr_bf16> out = get(dout, NT * CQ), qh = get(dqh, NT * LD);
    for (size_t e = 0; e < NT * LD; e++) {
        if (qb[e] != qkv[e])
            fail("trc_attn_cudnn: qkv only read", e, qb[e], qkv[e]);
        if (qh[e] != tr_f32_to_bf16(qkv[e] + bias[e % LD]))
            fail("trc_attn_cudnn: the bf16 copy of the biased qkv", e, tr_bf16_to_f32(qh[e]), qkv[e] + bias[e % LD]);
    }
    /* the backward again: bitwise the same */
    tr_bf16 *dwork2 = dev<tr_bf16>(NT * LD);
    trc_attn_cudnn_bwd(nullptr, s, NSEQ, SEQ, HEADS, HD, dqh, dout, dstats, dgo, dwork2, dgh);
    std::vector<tr_bf16> grad2 = get(dwork2, NT * LD);
    if (memcmp(grad.data(), grad2.data(), grad.size() * sizeof(tr_bf16)) != 0)
        fail((shape + " backward twice: not bitwise identical").c_str(), 0, 0, 0);
    /* the fp32-output overload, without statistics (inference): the widened bf16 output, bit for bit (qkv is
     * biased again: restore it first) */
    cudaCheck(cudaMemcpy(dqkv, qkv.data(), qkv.size() * sizeof(float), cudaMemcpyHostToDevice));
    trc_attn_cudnn(nullptr, s, NSEQ, SEQ, HEADS, HD, dqkv, dbias, dout32, dqh, dobuf, nullptr);
    std::vector<float> out32 = get(dout32, NT * CQ);
    for (size_t e = 0; e < NT * CQ; e++)
        if (out32[e] != tr_bf16_to_f32(out[e]))
            fail((shape + " fp32 output").c_str(), e, out32[e], tr_bf16_to_f32(out[e]));
    /* the cuBLAS path on the same inputs */
    cudaCheck(cudaMemcpy(dqkv, qkv.data(), qkv.size() * sizeof(float), cudaMemcpyHostToDevice));
    float *bgrad = dev<float>(NT * LD), *bsc = dev<float>(SSH);
    tr_bf16 *bout = dev<tr_bf16>(NT * CQ), *bpr = dev<tr_bf16>(SSH);
    trk::attention<NSEQ, SEQ, HEADS, HD, tr_bf16>(nullptr, s, dqkv, dbias, bout, bsc, bpr, dqh);
    trk::attention_bwd<NSEQ, SEQ, HEADS, HD, tr_bf16>(nullptr, s, dqkv, dgo, bgrad, bsc, bpr, dqh, dgh);
    std::vector<double> cb_out = widen(get(bout, NT * CQ)), cb_grad = widen(get(bgrad, NT * LD));
    /* the double reference, from the bf16 Q, K, V and dO the fused kernels read */
    std::vector<double> ro(NT * CQ, 0.0), rg(NT * LD, 0.0), rs(NT * HEADS, 0.0), P((size_t)SEQ * SEQ),
        dS((size_t)SEQ * SEQ);
    std::vector<char> mo(NT * CQ, 0), mg(NT * LD, 0), ms(NT * HEADS, 0);
    const double scale = 1.0 / sqrt((double)HD);
    for (int n = 0; n < NSEQ; n++)
        for (int h = 0; h < HEADS; h++) {
            if (!all_heads && !((n == 0 && h == 0) || (n == NSEQ - 1 && h == HEADS - 1)))
                continue;
            auto X = [&](int i, int part, int e) {
                return (double)tr_bf16_to_f32(qh[((size_t)n * SEQ + i) * LD + part * CQ + h * HD + e]);
            };
            auto G = [&](int i, int e) {
                return (double)tr_bf16_to_f32(tr_f32_to_bf16(go[((size_t)n * SEQ + i) * CQ + h * HD + e]));
            };
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
                rs[((size_t)n * HEADS + h) * SEQ + i] = m + log(l);
                ms[((size_t)n * HEADS + h) * SEQ + i] = 1;
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
                    mo[((size_t)n * SEQ + i) * CQ + h * HD + e] = 1;
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
                    const size_t at = ((size_t)n * SEQ + i) * LD + h * HD + e;
                    rg[at] = dq * scale;
                    rg[at + CQ] = dk * scale;
                    rg[at + 2 * CQ] = dv;
                    mg[at] = mg[at + CQ] = mg[at + 2 * CQ] = 1;
                }
        }
    const std::vector<double> o = widen(out), g = widen(grad), st = widen(stats);
    close_to((shape + " output vs double").c_str(), o, ro, mo, 2e-2);
    close_to((shape + " dQ, dK, dV vs double").c_str(), g, rg, mg, 2e-2);
    close_to((shape + " statistics (log-sum-exp) vs double").c_str(), st, rs, ms, 1e-3);
    close_to((shape + " output vs the cuBLAS path").c_str(), o, cb_out, {}, 2e-2);
    close_to((shape + " dQ, dK, dV vs the cuBLAS path").c_str(), g, cb_grad, {}, 2e-2);
    for (void *p : {(void *)dqkv, (void *)dbias, (void *)dgo, (void *)dwork2, (void *)dstats,
                    (void *)dout32, (void *)dout, (void *)dqh, (void *)dgh, (void *)dwork, (void *)dobuf,
                    (void *)bgrad, (void *)bsc, (void *)bout, (void *)bpr})
        cudaFree(p);
}

static void bench(cudaStream_t s)
{
    constexpr int NSEQ = 8, SEQ = 1024, H = 12, HD = 64, CQ = H * HD, LD = 3 * CQ;
    constexpr size_t NT = (size_t)NSEQ * SEQ, SS = (size_t)H * SEQ * SEQ;
    float *qkv = put(rnd(NT * LD, -1, 1)), *bias = put(rnd(LD, -0.1f, 0.1f)), *go = put(rnd(NT * CQ, -1, 1));
    float *grad = dev<float>(NT * LD), *scores = dev<float>(SS), *stats = dev<float>(NT * H);
    tr_bf16 *out = dev<tr_bf16>(NT * CQ), *probs = dev<tr_bf16>(SS), *qh = dev<tr_bf16>(NT * LD),
            *gh = dev<tr_bf16>(NT * CQ), *work = dev<tr_bf16>(NT * 4 * CQ);
    const double flops = 4.0 * NSEQ * H * (double)SEQ * SEQ * HD / 2; /* QK^T and PV, causal half */
    char err[1024];
    auto ok = [&](int rc) {
        if (rc != 0) {
            fprintf(stderr, "sdpa_check: %s\n", err);
            exit(2);
        }
    };
    trc_cast_bf16(nullptr, qkv, (long long)NT * LD, qh);
    trc_cast_bf16(nullptr, go, (long long)NT * CQ, gh);
    double ms = time_ms(s, [&] { ok(trc_sdpa_fwd(s, NSEQ, SEQ, H, HD, qh, work, stats, err, sizeof err)); });
    printf("bench: trc_sdpa_fwd  [%d x %d, %d heads of %d] (cuDNN alone)       %8.3f ms  %7.1f TFLOP/s (causal)\n",
           NSEQ, SEQ, H, HD, ms, flops / ms / 1e9);
    ms = time_ms(s, [&] {
        ok(trc_sdpa_bwd(s, NSEQ, SEQ, H, HD, qh, work, gh, stats, work + NT * CQ, err, sizeof err));
    });
    printf("bench: trc_sdpa_bwd  [%d x %d, %d heads of %d] (cuDNN alone)       %8.3f ms  %7.1f TFLOP/s (causal)\n",
           NSEQ, SEQ, H, HD, ms, 2.5 * flops / ms / 1e9);
    ms = time_ms(s, [&] { trc_attn_cudnn(nullptr, s, NSEQ, SEQ, H, HD, qkv, bias, out, qh, nullptr, stats); });
    printf("bench: trc_attn_cudnn (the generated forward step, training)       %8.3f ms  %7.1f TFLOP/s (causal)\n",
           ms, flops / ms / 1e9);
    ms = time_ms(s, [&] { trc_attn_cudnn_bwd(nullptr, s, NSEQ, SEQ, H, HD, qh, out, stats, go, work, gh); });
    printf("bench: trc_attn_cudnn_bwd (the generated backward step)            %8.3f ms  %7.1f TFLOP/s (causal)\n",
           ms, 2.5 * flops / ms / 1e9);
    ms = time_ms(s, [&] { trk::attention<NSEQ, SEQ, H, HD, tr_bf16>(nullptr, s, qkv, bias, out, scores, probs, qh); });
    printf("bench: trk::attention (the cuBLAS path)                            %8.3f ms  %7.1f TFLOP/s (causal)\n",
           ms, flops / ms / 1e9);
    ms = time_ms(s, [&] {
        trk::attention_bwd<NSEQ, SEQ, H, HD, tr_bf16>(nullptr, s, qkv, go, grad, scores, probs, qh, gh);
    });
    printf("bench: trk::attention_bwd (the cuBLAS path, recompute)             %8.3f ms  %7.1f TFLOP/s (causal)\n",
           ms, 3.5 * flops / ms / 1e9);
    for (void *x : {(void *)qkv, (void *)bias, (void *)go, (void *)grad, (void *)scores, (void *)stats, (void *)out,
                    (void *)probs, (void *)qh, (void *)gh, (void *)work})
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
    check<2, 70, 3, 64>(s, true);
    check<1, 33, 2, 8>(s, true);
    {
        /* head dimension 128: on an H200 (2026-11-27) two forwards of one input differed (154 elements by up to 2%)
         * and the log-sum-exp error varied from 1e-4 to 1e-2 between runs, so the generator refuses attention =
         * "cudnn" above head dimension 64 (gen/spec.c). Still run, as a probe: its differences are printed, not
         * counted, so a later cuDNN that fixes it shows here first */
        const int before = failures;
        check<2, 72, 4, 128>(s, true);
        if (failures > before)
            printf("# probe: head dimension 128: %d differences (known, not counted: the generator refuses it)\n",
                   failures - before);
        failures = before;
    }
    check<8, 1024, 12, 64>(s, false);
    if (argc > 1 && !strcmp(argv[1], "bench"))
        bench(s);
    trc_gemm_free();
    printf("sdpa_check: %d failures\n", failures);
    return failures ? 1 : 0;
}
