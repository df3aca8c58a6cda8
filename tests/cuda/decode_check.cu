/*
 * decode_check.cu - text generation's kernels on a GPU, outside any schedule (runtime/cuda/trk_gen_kernels.cuh,
 * docs/GENERATE.md). Built by tests/cuda/decode_check.sh; calls trk::attn_decode, trk::kv_write, trk::pos_add_at and
 * trk::lm_argmax at the shapes below on random inputs, every output NaN-poisoned first.
 *
 *   attention  attn_decode against a double reference (bias added, the cache row of the sequence's position written,
 *              scores scaled by 1/sqrt(hdim), softmax, P V): the output within a relative norm of 1e-5; the biased
 *              qkv row and the new cache row bit for bit the host's float sums; every other cache row unchanged
 *              (positions 0, 1, a middle one and the last of the context, one a sequence). Shapes: GPT-2 small's
 *              decode (8 sequences, 12 heads of 64, context 1024) and the suite's model (2 sequences, 4 heads of 4,
 *              context 10: fewer columns than a warp's lanes)
 *   copies     kv_write and pos_add_at bit for bit the host's copies and float sums
 *   argmax     lm_argmax's (max, id) pairs bit for bit a host scan (ascending ids, the first of equal values), with
 *              ties planted across lanes; a block of pad columns only (NVALID 0) gives (-inf, INT32_MAX)
 *   bf16       attn_decode with a bf16 cache and output (a bf16 plan) at the same shapes: the rounded q, k, v rows
 *              and the new cache row bit for bit, the output within 3e-3 of a double reference rounded at the
 *              same points (check_attn_bf16 says why)
 *   repeat     a second attn_decode run on the same inputs gives the same bits
 *   bench      (decode_check bench) attn_decode at GPT-2 small's decode, every sequence at position 1023, fp32
 *              and bf16 caches: microseconds a call (CUDA events, 50 calls after 5) and GB/s of the keys and values
 *              it must read
 *
 * Prints "decode_check: N failures" and exits 1 on any.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "trk_gen_kernels.cuh"

#include "check_common.cuh"


template <typename T> static std::vector<T> down(const T *d, size_t n)
{
    std::vector<T> h(n);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

static void expect(bool ok, const char *what)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}


static double wide(float x)
{
    return x;
}
static double wide(tr_bf16 x)
{
    return tr_bf16_to_f32(x);
}

/* The double reference of one head's decode attention: the query row b [3C] as the kernel reads it (biased; bf16:
 * rounded), the sequence's cache rows 0..n-1 [2C] each, head h: softmax(q K^T / sqrt(HDIM)) V, with P rounded to
 * bf16 before P V when round_p (a bf16 plan). Returns the head's output [HDIM]. */
template <typename KV>
static std::vector<double> ref_head(const float *b, const KV *cache, int n, int HDIM, int C, int h, bool round_p)
{
    std::vector<double> sc(n), o(HDIM, 0.0);
    double mx = -INFINITY, z = 0;
    for (int p = 0; p < n; p++) {
        double a = 0;
        for (int d = 0; d < HDIM; d++)
            a += (double)b[h * HDIM + d] * wide(cache[(size_t)p * 2 * C + h * HDIM + d]);
        sc[p] = a / sqrt((double)HDIM);
        mx = sc[p] > mx ? sc[p] : mx;
    }
    for (int p = 0; p < n; p++)
        z += (sc[p] = exp(sc[p] - mx));
    for (int p = 0; p < n; p++) {
        const double pr = round_p ? (double)tr_bf16_to_f32(tr_f32_to_bf16((float)(sc[p] / z))) : sc[p] / z;
        for (int d = 0; d < HDIM; d++)
            o[d] += pr * wide(cache[(size_t)p * 2 * C + C + h * HDIM + d]);
    }
    return o;
}

/* the decode attention at one shape: sequence s at position pos[s] */
template <int NSEQ, int HEADS, int HDIM, int CONTEXT> static void check_attn(cudaStream_t s, bool bench)
{
    constexpr int C = HEADS * HDIM;
    std::vector<int32_t> pos(NSEQ);
    const int pick[4] = {0, 1, CONTEXT / 2, CONTEXT - 1};
    for (int q = 0; q < NSEQ; q++)
        pos[q] = pick[q % 4];
    const std::vector<float> qkv = rnd((size_t)NSEQ * 3 * C, -1.0f, 1.0f), bias = rnd((size_t)3 * C, -0.5f, 0.5f);
    const std::vector<float> kv = rnd((size_t)NSEQ * CONTEXT * 2 * C, -1.0f, 1.0f);
    float *d_qkv = up(qkv), *d_b = up(bias), *d_kv = up(kv), *d_out = poisoned((size_t)NSEQ * C);
    int32_t *d_pos = up(pos);
    trk::attn_decode<NSEQ, HEADS, HDIM, CONTEXT>(s, d_qkv, d_b, d_out, d_kv, d_pos);
    const std::vector<float> g_qkv = down(d_qkv, qkv.size()), g_kv = down(d_kv, kv.size()),
                             g_out = down(d_out, (size_t)NSEQ * C);
    /* the host's float bias add, the cache rows, and the double reference of the output */
    bool rows_ok = true, cache_ok = true;
    double num = 0, den = 0;
    for (int q = 0; q < NSEQ; q++) {
        std::vector<float> b(3 * C);
        for (int j = 0; j < 3 * C; j++) {
            b[j] = qkv[(size_t)q * 3 * C + j] + bias[j];
            rows_ok &= memcmp(&b[j], &g_qkv[(size_t)q * 3 * C + j], 4) == 0;
        }
        const float *cache = g_kv.data() + (size_t)q * CONTEXT * 2 * C;
        for (int p = 0; p < CONTEXT; p++)
            for (int j = 0; j < 2 * C; j++) {
                const float want = p == pos[q] ? b[C + j] : kv[((size_t)q * CONTEXT + p) * 2 * C + j];
                cache_ok &= memcmp(&want, &cache[(size_t)p * 2 * C + j], 4) == 0;
            }
        for (int h = 0; h < HEADS; h++) {
            const std::vector<double> ref = ref_head(b.data(), cache, pos[q] + 1, HDIM, C, h, false);
            for (int d = 0; d < HDIM; d++) {
                const double o = ref[d], got = g_out[(size_t)q * C + h * HDIM + d];
                num += (got - o) * (got - o);
                den += o * o;
            }
        }
    }
    char what[200];
    const double rel = sqrt(num / (den > 0 ? den : 1));
    snprintf(what, sizeof what, "attn_decode<%d, %d, %d, %d>: output %.2e of double (tol 1e-5)", NSEQ, HEADS, HDIM,
             CONTEXT, rel);
    expect(rel <= 1e-5 && std::isfinite(rel), what);
    snprintf(what, sizeof what, "attn_decode<%d, %d, %d, %d>: biased qkv rows bit for bit the host's float sums",
             NSEQ, HEADS, HDIM, CONTEXT);
    expect(rows_ok, what);
    snprintf(what, sizeof what, "attn_decode<%d, %d, %d, %d>: the position's cache row written, every other unchanged",
             NSEQ, HEADS, HDIM, CONTEXT);
    expect(cache_ok, what);
    /* repeat: the same inputs again, the same bits */
    float *d_qkv2 = up(qkv), *d_kv2 = up(kv), *d_out2 = poisoned((size_t)NSEQ * C);
    trk::attn_decode<NSEQ, HEADS, HDIM, CONTEXT>(s, d_qkv2, d_b, d_out2, d_kv2, d_pos);
    const std::vector<float> g_out2 = down(d_out2, (size_t)NSEQ * C);
    snprintf(what, sizeof what, "attn_decode<%d, %d, %d, %d>: a second run gives the same bits", NSEQ, HEADS, HDIM,
             CONTEXT);
    expect(memcmp(g_out.data(), g_out2.data(), g_out.size() * 4) == 0, what);
    if (bench) {
        std::vector<int32_t> last(NSEQ, CONTEXT - 1);
        int32_t *d_last = up(last);
        const float us = time_us(s, [&] { trk::attn_decode<NSEQ, HEADS, HDIM, CONTEXT>(s, d_qkv2, d_b, d_out2, d_kv2,
                                                                                        d_last); });
        const double bytes = (double)NSEQ * CONTEXT * 2 * C * 4; /* every cached key and value, once */
        printf("decode_check bench: attn_decode<%d, %d, %d, %d> at position %d: %.1f us, %.0f GB/s\n", NSEQ, HEADS,
               HDIM, CONTEXT, CONTEXT - 1, us, bytes / us * 1e-3);
        cudaFree(d_last);
    }
    cudaFree(d_qkv);
    cudaFree(d_b);
    cudaFree(d_kv);
    cudaFree(d_out);
    cudaFree(d_pos);
    cudaFree(d_qkv2);
    cudaFree(d_kv2);
    cudaFree(d_out2);
}

/* bf16 plans' decode attention (KV = tr_bf16): q, k, v rounded after the bias, r(K) | r(V) into the cache row, P
 * rounded before P V, the output bf16. Against a double reference that rounds at those points (P from the double
 * softmax): the kernel's float P lands on the other side of a bf16 rounding boundary now and then (one ulp of that
 * term), and its output is rounded (2^-9 relative at most each element, about 1.1e-3 in a norm), so the tolerance is
 * 3e-3 relative; a rounding point left out moves the output by about as much as the output's own rounding, which is
 * why the cache row and the rounded qkv row are also checked bit for bit. */
template <int NSEQ, int HEADS, int HDIM, int CONTEXT> static void check_attn_bf16(cudaStream_t s, bool bench)
{
    constexpr int C = HEADS * HDIM;
    auto r16 = [](float x) { return tr_bf16_to_f32(tr_f32_to_bf16(x)); };
    std::vector<int32_t> pos(NSEQ);
    const int pick[4] = {0, 1, CONTEXT / 2, CONTEXT - 1};
    for (int q = 0; q < NSEQ; q++)
        pos[q] = pick[q % 4];
    const std::vector<float> qkv = rnd((size_t)NSEQ * 3 * C, -1.0f, 1.0f), bias = rnd((size_t)3 * C, -0.5f, 0.5f);
    const std::vector<float> kvf = rnd((size_t)NSEQ * CONTEXT * 2 * C, -1.0f, 1.0f);
    std::vector<tr_bf16> kv(kvf.size());
    for (size_t e = 0; e < kv.size(); e++)
        kv[e] = tr_f32_to_bf16(kvf[e]);
    float *d_qkv = up(qkv), *d_b = up(bias);
    tr_bf16 *d_kv = up(kv), *d_out = nullptr;
    CK(cudaMalloc((void **)&d_out, (size_t)NSEQ * C * sizeof(tr_bf16)));
    CK(cudaMemset(d_out, 0xff, (size_t)NSEQ * C * sizeof(tr_bf16))); /* NaN poison */
    int32_t *d_pos = up(pos);
    trk::attn_decode<NSEQ, HEADS, HDIM, CONTEXT>(s, d_qkv, d_b, d_out, d_kv, d_pos);
    const std::vector<float> g_qkv = down(d_qkv, qkv.size());
    const std::vector<tr_bf16> g_kv = down(d_kv, kv.size()), g_out = down(d_out, (size_t)NSEQ * C);
    bool rows_ok = true, cache_ok = true;
    double num = 0, den = 0;
    for (int q = 0; q < NSEQ; q++) {
        std::vector<float> b(3 * C);
        for (int j = 0; j < 3 * C; j++) {
            b[j] = r16(qkv[(size_t)q * 3 * C + j] + bias[j]);
            rows_ok &= memcmp(&b[j], &g_qkv[(size_t)q * 3 * C + j], 4) == 0;
        }
        const tr_bf16 *cache = g_kv.data() + (size_t)q * CONTEXT * 2 * C;
        for (int p = 0; p < CONTEXT; p++)
            for (int j = 0; j < 2 * C; j++) {
                const tr_bf16 want = p == pos[q] ? tr_f32_to_bf16(b[C + j]) : kv[((size_t)q * CONTEXT + p) * 2 * C + j];
                cache_ok &= want == cache[(size_t)p * 2 * C + j];
            }
        for (int h = 0; h < HEADS; h++) {
            const std::vector<double> ref = ref_head(b.data(), cache, pos[q] + 1, HDIM, C, h, true);
            for (int d = 0; d < HDIM; d++) {
                const double o = ref[d], got = tr_bf16_to_f32(g_out[(size_t)q * C + h * HDIM + d]);
                num += (got - o) * (got - o);
                den += o * o;
            }
        }
    }
    char what[200];
    const double rel = sqrt(num / (den > 0 ? den : 1));
    snprintf(what, sizeof what, "attn_decode<%d, %d, %d, %d> bf16: output %.2e of the rounded double (tol 3e-3)", NSEQ,
             HEADS, HDIM, CONTEXT, rel);
    expect(rel <= 3e-3 && std::isfinite(rel), what);
    snprintf(what, sizeof what, "attn_decode<%d, %d, %d, %d> bf16: q, k, v rows the host's float sums rounded, bit for bit",
             NSEQ, HEADS, HDIM, CONTEXT);
    expect(rows_ok, what);
    snprintf(what, sizeof what,
             "attn_decode<%d, %d, %d, %d> bf16: the position's cache row r(K) | r(V) bit for bit, every other unchanged",
             NSEQ, HEADS, HDIM, CONTEXT);
    expect(cache_ok, what);
    if (bench) {
        std::vector<int32_t> last(NSEQ, CONTEXT - 1);
        int32_t *d_last = up(last);
        const float us = time_us(s, [&] { trk::attn_decode<NSEQ, HEADS, HDIM, CONTEXT>(s, d_qkv, d_b, d_out, d_kv,
                                                                                        d_last); });
        const double bytes = (double)NSEQ * CONTEXT * 2 * C * 2; /* every cached key and value, once, 2 bytes */
        printf("decode_check bench: attn_decode<%d, %d, %d, %d> bf16 at position %d: %.1f us, %.0f GB/s\n", NSEQ,
               HEADS, HDIM, CONTEXT, CONTEXT - 1, us, bytes / us * 1e-3);
        cudaFree(d_last);
    }
    cudaFree(d_qkv);
    cudaFree(d_b);
    cudaFree(d_kv);
    cudaFree(d_out);
    cudaFree(d_pos);
}

template <int NSEQ, int SEQ, int COLS, int CONTEXT> static void check_copies(cudaStream_t s)
{
    const std::vector<float> qkv = rnd((size_t)NSEQ * SEQ * 3 * COLS, -1.0f, 1.0f);
    const std::vector<float> kv = rnd((size_t)NSEQ * CONTEXT * 2 * COLS, -1.0f, 1.0f);
    float *d_qkv = up(qkv), *d_kv = up(kv);
    trk::kv_write<NSEQ, SEQ, COLS, CONTEXT>(s, d_qkv, d_kv);
    const std::vector<float> g = down(d_kv, kv.size());
    bool ok = true;
    for (int q = 0; q < NSEQ; q++)
        for (int p = 0; p < CONTEXT; p++)
            for (int j = 0; j < 2 * COLS; j++) {
                const float want = p < SEQ ? qkv[((size_t)q * SEQ + p) * 3 * COLS + COLS + j]
                                           : kv[((size_t)q * CONTEXT + p) * 2 * COLS + j];
                ok &= memcmp(&want, &g[((size_t)q * CONTEXT + p) * 2 * COLS + j], 4) == 0;
            }
    char what[160];
    snprintf(what, sizeof what, "kv_write<%d, %d, %d, %d>: the prompt's K and V rows bit for bit, the rest unchanged",
             NSEQ, SEQ, COLS, CONTEXT);
    expect(ok, what);
    /* pos_add_at: NSEQ rows at positions within the context */
    std::vector<float> x = rnd((size_t)NSEQ * COLS, -1.0f, 1.0f);
    const std::vector<float> wpe = rnd((size_t)CONTEXT * COLS, -1.0f, 1.0f);
    std::vector<int32_t> pos(NSEQ);
    for (int q = 0; q < NSEQ; q++)
        pos[q] = (q * 7 + 3) % CONTEXT;
    float *d_x = up(x), *d_w = up(wpe);
    int32_t *d_pos = up(pos);
    trk::pos_add_at<NSEQ, COLS>(s, d_x, d_w, d_pos);
    const std::vector<float> gx = down(d_x, x.size());
    ok = true;
    for (int q = 0; q < NSEQ; q++)
        for (int k = 0; k < COLS; k++) {
            const float want = x[(size_t)q * COLS + k] + wpe[(size_t)pos[q] * COLS + k];
            ok &= memcmp(&want, &gx[(size_t)q * COLS + k], 4) == 0;
        }
    snprintf(what, sizeof what, "pos_add_at<%d, %d>: bit for bit the host's float sums", NSEQ, COLS);
    expect(ok, what);
    cudaFree(d_qkv);
    cudaFree(d_kv);
    cudaFree(d_x);
    cudaFree(d_w);
    cudaFree(d_pos);
}

template <int ROWS, int COLS, int NVALID> static void check_argmax(cudaStream_t s)
{
    std::vector<float> L = rnd((size_t)ROWS * COLS, -4.0f, 4.0f);
    for (int r = 0; r < ROWS && NVALID > 40; r++) { /* ties across lanes: the maximum planted at columns r % 7 + 3
                                                      * and r % 7 + 35 (lanes apart), the lower id must win */
        L[(size_t)r * COLS + r % 7 + 3] = 9.0f;
        L[(size_t)r * COLS + r % 7 + 35] = 9.0f;
    }
    const int v0 = 1000;
    float *d_L = up(L), *d_p = poisoned(2 * (size_t)ROWS);
    trk::lm_argmax<ROWS, COLS, NVALID>(s, d_L, v0, d_p);
    const std::vector<float> g = down(d_p, 2 * (size_t)ROWS);
    bool ok = true;
    for (int r = 0; r < ROWS; r++) {
        float best = -INFINITY;
        int32_t id = INT32_MAX;
        for (int k = 0; k < NVALID; k++)
            if (id == INT32_MAX || L[(size_t)r * COLS + k] > best) {
                best = L[(size_t)r * COLS + k];
                id = v0 + k;
            }
        int32_t gid;
        memcpy(&gid, &g[2 * r + 1], 4);
        ok &= memcmp(&best, &g[2 * r], 4) == 0 && gid == id;
    }
    char what[160];
    snprintf(what, sizeof what, "lm_argmax<%d, %d, %d>: (max, id) pairs bit for bit a host scan, ties to the lowest id%s",
             ROWS, COLS, NVALID, NVALID ? "" : " (pad columns only: -inf, INT32_MAX)");
    expect(ok, what);
    cudaFree(d_L);
    cudaFree(d_p);
}

int main(int argc, char **argv)
{
    const bool bench = argc > 1 && !strcmp(argv[1], "bench");
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    check_attn<8, 12, 64, 1024>(s, bench);
    check_attn<2, 4, 4, 10>(s, false);
    check_attn_bf16<8, 12, 64, 1024>(s, bench);
    check_attn_bf16<2, 4, 4, 10>(s, false);
    check_copies<8, 100, 768, 1024>(s);
    check_copies<2, 4, 16, 10>(s);
    check_argmax<37, 60, 47>(s);
    check_argmax<8, 50304, 50257>(s);
    check_argmax<5, 12, 0>(s);
    CK(cudaStreamDestroy(s));
    printf("decode_check: %d failures\n", failures);
    return failures ? 1 : 0;
}
