/*
 * bf16_check.cu - the CUDA side of bf16 (docs/BF16.md) on a GPU, outside any schedule: built by
 * tests/cuda/bf16_check.sh against a kernels.cu made from templates/kernels.cu.in with both output types.
 *
 *   kernels    ln_apply (16-byte and scalar paths) and bias_gelu_save with a tr_bf16 output give, bit for bit,
 *              tr_f32_to_bf16 of the same kernel's float output (and the same float side effects: the kept
 *              pre-activation); attention has its own check (tests/cuda/attn_check.cu)
 *   cast       trc_cast_bf16 bit for bit tr_f32_to_bf16 (ties, infinities, overflow, subnormals, aligned and
 *              not, tails)
 *   gemm       trc_gemm_bf16, every transpose and beta 0/1, against a double product of the widened operands
 *
 * Prints "bf16_check: N failures" and exits 1 on any.
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
    float *u1 = put(u), *u2 = put(u), *db = put(b);
    float *gf = dev<float>((size_t)R * C);
    tr_bf16 *gb = dev<tr_bf16>((size_t)R * C);
    trk::bias_gelu_save<R, C>(s, u1, db, gf);
    trk::bias_gelu_save<R, C>(s, u2, db, gb);
    char what[64];
    snprintf(what, sizeof what, "bias_gelu_save<%d, %d>", R, C);
    same_rne(what, gf, gb, (size_t)R * C);
    same_f32(what, u1, u2, (size_t)R * C);
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

int main(void)
{
    cudaCheck(cudaSetDevice(0));
    for (int k = 0; k < TRC_NSTREAMS; k++)
        cudaCheck(cudaStreamCreateWithFlags(&trc_g.stream[k], cudaStreamNonBlocking));
    tr_err err;
    memset(&err, 0, sizeof err);
    trc_gemm_init(&err);
    cudaStream_t s = trc_g.stream[TRC_COMPUTE];
    check_ln<37, 64, 128>(s);  /* 16-byte path: 8-byte bf16 stores */
    check_ln<37, 30, 60>(s);   /* scalar path */
    check_gelu<19, 96>(s);
    check_gelu<7, 33>(s);
    check_cast();
    check_gemm();
    trc_gemm_free();
    printf("bf16_check: %d failures\n", failures);
    return failures ? 1 : 0;
}
