/*
 * trk_gen_kernels.cuh - the definitions of trk_gen.cuh (text generation, docs/GENERATE.md), included by kernels.cu of
 * a generate program and instantiated there at the schedule's shapes.
 *
 * The copies and the position add are one thread an element. The decode attention is one block of kThreads per
 * (sequence, head): the block adds its head's q, k and v biases (each element of qkv has one owner: the head's
 * columns of Q, K and V), writes k and v into the cache row of the sequence's position, computes the scores of the
 * positions 0..pos (a warp a position, the lanes over the head dimension, a shuffle sum, then the 1/sqrt(HDIM)
 * scale: tr_attn_decode's sgemv with alpha), the softmax (block max, expf, a float block sum, one reciprocal, as the
 * CPU's tr_causal_softmax_row whose sum is double), and the weighted sum of V (a thread a column of the head, over
 * the positions in order). Decode attention reads every cached key and value once per head: it is bound by memory,
 * where tensor cores would not help (docs/CUDA.md "FP64 and tensor cores in the kernels": no row needed). The argmax
 * is a warp a row: each lane scans its columns in ascending order keeping the first maximum, then a shuffle tree
 * keeps the larger value, or the lower id of equal ones.
 */
#ifndef TRK_GEN_KERNELS_CUH
#define TRK_GEN_KERNELS_CUH

#include <math.h>
#include <stdint.h>

#include "trc.h"
#include "trk_elt.cuh"
#include "trk_gen.cuh"

namespace trk {
namespace gen {

constexpr int kWarp = 32;
constexpr int kWarps = 8;
constexpr int kThreads = kWarp * kWarps;
constexpr int kMaxContext = 8192; /* attn_decode's scores in static shared memory: 32 KiB of the 48 */

constexpr unsigned blocks_for(long long n, int per)
{
    return (unsigned)((n + per - 1) / per);
}

template <int ROWS, int COLS>
__global__ void __launch_bounds__(kThreads)
    k_pos_add_at(float *__restrict__ x, const float *__restrict__ wpe, const int32_t *__restrict__ pos)
{
    const long long e = (long long)blockIdx.x * kThreads + threadIdx.x;
    if (e >= (long long)ROWS * COLS)
        return;
    const int r = (int)(e / COLS), k = (int)(e % COLS);
    x[e] += wpe[(size_t)pos[r] * COLS + k];
}

/* a value as the cache of type KV holds it: itself (float), or rounded to bf16 and widened back (bf16 plans) */
TR_HD inline float as_kv(float x, const float *)
{
    return x;
}
TR_HD inline float as_kv(float x, const tr_bf16 *)
{
    return elt::widen(elt::narrow(x));
}

template <int NSEQ, int SEQ, int COLS, int CONTEXT, typename KV>
__global__ void __launch_bounds__(kThreads) k_kv_write(const float *__restrict__ qkv, KV *__restrict__ kv)
{
    const long long e = (long long)blockIdx.x * kThreads + threadIdx.x;
    if (e >= (long long)NSEQ * SEQ * 2 * COLS)
        return;
    const long long row = e / (2 * COLS); /* s*SEQ + p */
    const int k = (int)(e % (2 * COLS)), s = (int)(row / SEQ), p = (int)(row % SEQ);
    elt::store1(kv + ((size_t)s * CONTEXT + p) * 2 * COLS + k, qkv[(size_t)row * 3 * COLS + COLS + k]);
}

/* block = (sequence blockIdx.x, head blockIdx.y); KV: float, or tr_bf16 in a bf16 plan, where q, k, v and P are
 * rounded where the CPU's tr_attn_decode_bf16 rounds them and the output is bf16 */
template <int NSEQ, int HEADS, int HDIM, int CONTEXT, typename KV>
__global__ void __launch_bounds__(kThreads)
    k_attn_decode(float *__restrict__ qkv, const float *__restrict__ bias, KV *__restrict__ out,
                  KV *__restrict__ kv, const int32_t *__restrict__ pos)
{
    constexpr int C = HEADS * HDIM;
    __shared__ float q[HDIM];
    __shared__ float sc[CONTEXT];
    __shared__ float red[kWarps];
    const int s = (int)blockIdx.x, h = (int)blockIdx.y, t = (int)threadIdx.x;
    const int warp = t / kWarp, lane = t % kWarp;
    const int at = pos[s], n = at + 1;
    float *row = qkv + (size_t)s * 3 * C;
    KV *cache = kv + (size_t)s * CONTEXT * 2 * C;
    /* the bias of this head's q, k, v columns; k and v into the cache row of position `at` */
    for (int d = t; d < HDIM; d += kThreads) {
        const int cq = h * HDIM + d, ck = C + cq, cv = 2 * C + cq;
        const float vq = as_kv(row[cq] + bias[cq], cache), vk = as_kv(row[ck] + bias[ck], cache),
                    vv = as_kv(row[cv] + bias[cv], cache);
        row[cq] = vq;
        row[ck] = vk;
        row[cv] = vv;
        q[d] = vq;
        elt::store1(cache + (size_t)at * 2 * C + cq, vk);
        elt::store1(cache + (size_t)at * 2 * C + C + cq, vv);
    }
    __syncthreads();
    /* scores: a warp a position */
    const float scale = 1.0f / sqrtf((float)HDIM);
    for (int p = warp; p < n; p += kWarps) {
        const KV *kr = cache + (size_t)p * 2 * C + h * HDIM;
        float a = 0.0f;
        for (int d = lane; d < HDIM; d += kWarp)
            a += q[d] * elt::load1(kr, d);
        for (int o = kWarp / 2; o > 0; o /= 2)
            a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == 0)
            sc[p] = scale * a;
    }
    __syncthreads();
    /* softmax: the block's max, then exp and the float sum */
    float m = -INFINITY;
    for (int p = t; p < n; p += kThreads)
        m = sc[p] > m ? sc[p] : m;
    for (int o = kWarp / 2; o > 0; o /= 2) {
        const float u = __shfl_xor_sync(0xffffffffu, m, o);
        m = u > m ? u : m;
    }
    if (lane == 0)
        red[warp] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < kWarps; w++)
        m = red[w] > m ? red[w] : m;
    __syncthreads(); /* every thread has read red */
    float z = 0.0f;
    for (int p = t; p < n; p += kThreads) {
        const float e = expf(sc[p] - m);
        sc[p] = e;
        z += e;
    }
    for (int o = kWarp / 2; o > 0; o /= 2)
        z += __shfl_xor_sync(0xffffffffu, z, o);
    if (lane == 0)
        red[warp] = z;
    __syncthreads();
    z = 0.0f;
    for (int w = 0; w < kWarps; w++) /* in warp order: every thread the same sum */
        z += red[w];
    const float inv = 1.0f / z;
    /* out = P V: a thread a column of the head, over the positions in order (bf16: P rounded as a GEMM would read
     * it) */
    for (int d = t; d < HDIM; d += kThreads) {
        const KV *vc = cache + C + h * HDIM + d;
        float a = 0.0f;
        for (int p = 0; p < n; p++)
            a += as_kv(sc[p] * inv, cache) * elt::load1(vc, (long long)p * 2 * C);
        elt::store1(out + (size_t)s * C + h * HDIM + d, a);
    }
}

/* warp w of block b owns row b*kWarps + w */
template <int ROWS, int COLS, int NVALID>
__global__ void __launch_bounds__(kThreads)
    k_lm_argmax(const float *__restrict__ L, int v0, float *__restrict__ pairs)
{
    const int r = (int)blockIdx.x * kWarps + (int)threadIdx.x / kWarp, lane = (int)threadIdx.x % kWarp;
    if (r >= ROWS)
        return; /* warp-uniform */
    const float *l = L + (size_t)r * COLS;
    float best = -INFINITY;
    int id = INT32_MAX; /* none yet: loses to any column */
    for (int k = lane; k < NVALID; k += kWarp)
        if (id == INT32_MAX || l[k] > best) { /* ascending: the first of equal values */
            best = l[k];
            id = v0 + k;
        }
    for (int o = kWarp / 2; o > 0; o /= 2) {
        const float b = __shfl_xor_sync(0xffffffffu, best, o);
        const int i = __shfl_xor_sync(0xffffffffu, id, o);
        if (i != INT32_MAX && (id == INT32_MAX || b > best || (b == best && i < id))) {
            best = b;
            id = i;
        }
    }
    if (lane == 0) {
        pairs[2 * r] = id == INT32_MAX ? -INFINITY : best;
        pairs[2 * r + 1] = __int_as_float(id);
    }
}

} // namespace gen

/* ---- launchers --------------------------------------------------------------------------------------------- */

template <int ROWS, int COLS>
void pos_add_at(cudaStream_t s, float *x, const float *wpe, const int32_t *pos)
{
    gen::k_pos_add_at<ROWS, COLS>
        <<<gen::blocks_for((long long)ROWS * COLS, gen::kThreads), gen::kThreads, 0, s>>>(x, wpe, pos);
    TRC_LAUNCHED("trk::pos_add_at");
}

template <int NSEQ, int SEQ, int COLS, int CONTEXT, typename KV>
void kv_write(cudaStream_t s, const float *qkv, KV *kv)
{
    gen::k_kv_write<NSEQ, SEQ, COLS, CONTEXT, KV>
        <<<gen::blocks_for((long long)NSEQ * SEQ * 2 * COLS, gen::kThreads), gen::kThreads, 0, s>>>(qkv, kv);
    TRC_LAUNCHED("trk::kv_write");
}

template <int NSEQ, int HEADS, int HDIM, int CONTEXT, typename KV>
void attn_decode(cudaStream_t s, float *qkv, const float *bias, KV *out, KV *kv, const int32_t *pos)
{
    static_assert(CONTEXT <= gen::kMaxContext, "the decode step's scores live in 32 KiB of shared memory: gen/emit_rank_cu.c refuses a longer model.context");
    gen::k_attn_decode<NSEQ, HEADS, HDIM, CONTEXT, KV>
        <<<dim3(NSEQ, HEADS), gen::kThreads, 0, s>>>(qkv, bias, out, kv, pos);
    TRC_LAUNCHED("trk::attn_decode");
}

template <int ROWS, int COLS, int NVALID>
void lm_argmax(cudaStream_t s, const float *L, int v0, float *pairs)
{
    gen::k_lm_argmax<ROWS, COLS, NVALID><<<gen::blocks_for(ROWS, gen::kWarps), gen::kThreads, 0, s>>>(L, v0, pairs);
    TRC_LAUNCHED("trk::lm_argmax");
}

} // namespace trk

#endif
