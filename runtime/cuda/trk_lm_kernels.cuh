/*
 * trk_lm_kernels.cuh - the language model's CUDA kernels (declared in trk_lm.cuh), included by the kernels.cu of a
 * spec with model.vocab after the block kernels; kernels.cu then instantiates them at the schedule's shapes.
 *
 * Design. Element-wise kernels (the embedding gather, the position add, dlogits): one thread per element, the
 * CPU's arithmetic (tr_kernels_lm.c) operation by operation. Row kernels (row max, the [2, ROWS] sums): one warp
 * per token row, lanes striding over the real columns, a shuffle reduction (the max is exact in any order; the
 * sums of exponentials are float, Kahan-compensated within a lane, then a shuffle tree: no FP64, docs/CUDA.md
 * "FP64 in the kernels"). The loss: one thread per row, in float.
 * The two scatter-adds of the backward own their outputs instead of using atomics: embed_bwd gives each thread
 * one column of a slice of kEmbVocab vocab rows and walks every token of the row block in order (the ids staged
 * through shared memory), adding g rows whose id falls in its slice, so every dE element receives its tokens in
 * token order, the CPU's order, with no race; pos_bwd gives each thread one (position, column) and sums the rows
 * of that position in row order. Both are bitwise reproducible and equal to the CPU backend's results; neither is
 * tuned (embed_bwd reads each id once per vocab slice).
 */
#ifndef TRK_LM_KERNELS_CUH
#define TRK_LM_KERNELS_CUH

#include <math.h>
#include <stdint.h>

#include "trc.h"
#include "trk_lm.cuh"

namespace trk {
namespace lm {

constexpr int kWarp = 32;
constexpr int kWarps = 8;                /* rows per block in the row kernels: one warp each */
constexpr int kThreads = kWarp * kWarps; /* threads per block, every kernel */
constexpr int kEmbVocab = 32;            /* embed_bwd: vocab rows per block (blockIdx.y) */
constexpr int kTokTile = 1024;           /* embed_bwd: token ids staged per pass */

constexpr unsigned blocks_for(long long n, int per)
{
    return (unsigned)((n + per - 1) / per);
}

/* ---- forward ----------------------------------------------------------------------------------------------- */

template <int ROWS, int COLS, int NVALID>
__global__ void __launch_bounds__(kThreads)
    k_embed_rows(const int32_t *__restrict__ tok, int v0, const float *__restrict__ E, float *__restrict__ out)
{
    const long long e = (long long)blockIdx.x * kThreads + threadIdx.x;
    if (e >= (long long)ROWS * COLS)
        return;
    const int r = (int)(e / COLS), k = (int)(e % COLS);
    const int id = tok[r] - v0;
    out[e] = (id >= 0 && id < NVALID) ? E[(size_t)id * COLS + k] : 0.0f;
}

template <int ROWS, int COLS, int SEQ>
__global__ void __launch_bounds__(kThreads) k_pos_add(float *__restrict__ x, const float *__restrict__ wpe)
{
    const long long e = (long long)blockIdx.x * kThreads + threadIdx.x;
    if (e >= (long long)ROWS * COLS)
        return;
    const int r = (int)(e / COLS), k = (int)(e % COLS);
    x[e] += wpe[(size_t)(r % SEQ) * COLS + k];
}

/* warp w of block b owns row b*kWarps + w */
template <int ROWS, int COLS, int NVALID>
__global__ void __launch_bounds__(kThreads) k_lm_rowmax(const float *__restrict__ L, float *__restrict__ mx)
{
    const int r = (int)blockIdx.x * kWarps + (int)threadIdx.x / kWarp, lane = (int)threadIdx.x % kWarp;
    if (r >= ROWS)
        return; /* warp-uniform */
    const float *l = L + (size_t)r * COLS;
    float m = -INFINITY;
    for (int k = lane; k < NVALID; k += kWarp)
        m = l[k] > m ? l[k] : m;
    for (int o = kWarp / 2; o > 0; o /= 2) {
        const float t = __shfl_xor_sync(0xffffffffu, m, o);
        m = t > m ? t : m;
    }
    if (lane == 0)
        mx[r] = m;
}

template <int ROWS, int COLS, int NVALID>
__global__ void __launch_bounds__(kThreads) k_lm_sums(const float *__restrict__ L, const float *__restrict__ mx,
                                                      const int32_t *__restrict__ tgt, int v0, float *__restrict__ s)
{
    const int r = (int)blockIdx.x * kWarps + (int)threadIdx.x / kWarp, lane = (int)threadIdx.x % kWarp;
    if (r >= ROWS)
        return;
    const float *l = L + (size_t)r * COLS;
    const float m = mx[r];
    float e = 0.0f, comp = 0.0f; /* Kahan: a lane adds ~NVALID/32 terms of at most 1 (1571 for GPT-2) */
    for (int k = lane; k < NVALID; k += kWarp) {
        const float y = expf(l[k] - m) - comp, t = e + y;
        comp = (t - e) - y;
        e = t;
    }
    for (int o = kWarp / 2; o > 0; o /= 2)
        e += __shfl_xor_sync(0xffffffffu, e, o);
    if (lane == 0) {
        s[r] = e;
        const int t = tgt[r] - v0;
        s[ROWS + r] = (t >= 0 && t < NVALID) ? l[t] : 0.0f;
    }
}

template <int ROWS>
__global__ void __launch_bounds__(kThreads)
    k_lm_loss(const float *__restrict__ mx, const float *__restrict__ s, float *__restrict__ loss)
{
    const int r = (int)blockIdx.x * kThreads + (int)threadIdx.x;
    if (r < ROWS)
        loss[r] = (logf(s[r]) + mx[r]) - s[ROWS + r];
}

/* ---- backward ---------------------------------------------------------------------------------------------- */

template <int ROWS, int COLS, int NVALID>
__global__ void __launch_bounds__(kThreads)
    k_lm_dlogits(const float *__restrict__ L, const float *__restrict__ mx, const float *__restrict__ s,
                 const int32_t *__restrict__ tgt, int v0, float scale, float *__restrict__ dl)
{
    const long long e = (long long)blockIdx.x * kThreads + threadIdx.x;
    if (e >= (long long)ROWS * COLS)
        return;
    const int r = (int)(e / COLS), k = (int)(e % COLS);
    float d = 0.0f; /* pad columns */
    if (k < NVALID) {
        d = expf(L[e] - mx[r]) * (scale / s[r]); /* the CPU's f = scale / s rounded once, then one product */
        if (k == tgt[r] - v0)
            d -= scale;
    }
    dl[e] = d;
}

/* block (x, y): columns x*kThreads .., vocab rows y*kEmbVocab ..; thread = one column of those rows */
template <int ROWS, int COLS, int NVALID>
__global__ void __launch_bounds__(kThreads)
    k_embed_bwd(const int32_t *__restrict__ tok, const float *__restrict__ g, int v0, float *__restrict__ dE)
{
    __shared__ int ids[kTokTile]; /* token ids of the current tile, relative to this block's first vocab row */
    const int k = (int)blockIdx.x * kThreads + (int)threadIdx.x;
    const int lo = (int)blockIdx.y * kEmbVocab; /* first vocab row (within the block of NVALID) */
    const int n_here = NVALID - lo < kEmbVocab ? NVALID - lo : kEmbVocab;
    for (int r0 = 0; r0 < ROWS; r0 += kTokTile) {
        const int n = ROWS - r0 < kTokTile ? ROWS - r0 : kTokTile;
        __syncthreads(); /* the previous tile is consumed */
        for (int t = (int)threadIdx.x; t < n; t += kThreads)
            ids[t] = tok[r0 + t] - v0 - lo;
        __syncthreads();
        if (k < COLS)
            for (int t = 0; t < n; t++) { /* token order: the CPU's order of additions */
                const int id = ids[t];
                if (id >= 0 && id < n_here)
                    dE[(size_t)(lo + id) * COLS + k] += g[(size_t)(r0 + t) * COLS + k];
            }
    }
}

template <int ROWS, int COLS, int SEQ, int NPOS>
__global__ void __launch_bounds__(kThreads) k_pos_bwd(const float *__restrict__ g, float *__restrict__ dwpe)
{
    const long long e = (long long)blockIdx.x * kThreads + threadIdx.x;
    if (e >= (long long)NPOS * COLS)
        return;
    const int p = (int)(e / COLS), k = (int)(e % COLS);
    float a = 0.0f;
    if (p < SEQ)
        for (int r = p; r < ROWS; r += SEQ) /* row order, from 0: the CPU's sum */
            a += g[(size_t)r * COLS + k];
    dwpe[e] = a;
}

} // namespace lm

/* ---- launchers --------------------------------------------------------------------------------------------- */

template <int ROWS, int COLS, int NVALID>
void embed_rows(cudaStream_t s, const int32_t *tok, int v0, const float *E, float *out)
{
    lm::k_embed_rows<ROWS, COLS, NVALID>
        <<<lm::blocks_for((long long)ROWS * COLS, lm::kThreads), lm::kThreads, 0, s>>>(tok, v0, E, out);
    TRC_LAUNCHED("trk::embed_rows");
}

template <int ROWS, int COLS, int SEQ>
void pos_add(cudaStream_t s, float *x, const float *wpe)
{
    lm::k_pos_add<ROWS, COLS, SEQ>
        <<<lm::blocks_for((long long)ROWS * COLS, lm::kThreads), lm::kThreads, 0, s>>>(x, wpe);
    TRC_LAUNCHED("trk::pos_add");
}

template <int ROWS, int COLS, int NVALID>
void lm_rowmax(cudaStream_t s, const float *L, float *mx)
{
    lm::k_lm_rowmax<ROWS, COLS, NVALID><<<lm::blocks_for(ROWS, lm::kWarps), lm::kThreads, 0, s>>>(L, mx);
    TRC_LAUNCHED("trk::lm_rowmax");
}

template <int ROWS, int COLS, int NVALID>
void lm_sums(cudaStream_t s, const float *L, const float *mx, const int32_t *tgt, int v0, float *sums)
{
    lm::k_lm_sums<ROWS, COLS, NVALID><<<lm::blocks_for(ROWS, lm::kWarps), lm::kThreads, 0, s>>>(L, mx, tgt, v0, sums);
    TRC_LAUNCHED("trk::lm_sums");
}

template <int ROWS>
void lm_loss(cudaStream_t s, const float *mx, const float *sums, float *loss)
{
    lm::k_lm_loss<ROWS><<<lm::blocks_for(ROWS, lm::kThreads), lm::kThreads, 0, s>>>(mx, sums, loss);
    TRC_LAUNCHED("trk::lm_loss");
}

template <int ROWS, int COLS, int NVALID>
void lm_dlogits(cudaStream_t s, const float *L, const float *mx, const float *sums, const int32_t *tgt, int v0,
                float scale, float *dl)
{
    lm::k_lm_dlogits<ROWS, COLS, NVALID>
        <<<lm::blocks_for((long long)ROWS * COLS, lm::kThreads), lm::kThreads, 0, s>>>(L, mx, sums, tgt, v0, scale, dl);
    TRC_LAUNCHED("trk::lm_dlogits");
}

template <int ROWS, int COLS, int NVALID>
void embed_bwd(cudaStream_t s, const int32_t *tok, const float *g, int v0, float *dE, long long zero)
{
    if (zero > 0) { /* all-zero bits: 0.0f; an operation of its own, counted and checked as a launch */
        (void)cudaMemsetAsync(dE, 0, (size_t)zero * sizeof(float), s);
        TRC_LAUNCHED("trk::embed_bwd's zeroing of dE");
    }
    const dim3 grid(lm::blocks_for(COLS, lm::kThreads), lm::blocks_for(NVALID, lm::kEmbVocab));
    lm::k_embed_bwd<ROWS, COLS, NVALID><<<grid, lm::kThreads, 0, s>>>(tok, g, v0, dE);
    TRC_LAUNCHED("trk::embed_bwd");
}

template <int ROWS, int COLS, int SEQ, int NPOS>
void pos_bwd(cudaStream_t s, const float *g, float *dwpe)
{
    lm::k_pos_bwd<ROWS, COLS, SEQ, NPOS>
        <<<lm::blocks_for((long long)NPOS * COLS, lm::kThreads), lm::kThreads, 0, s>>>(g, dwpe);
    TRC_LAUNCHED("trk::pos_bwd");
}

} // namespace trk

#endif
