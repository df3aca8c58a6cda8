/*
 * trc_attn_cudnn.cu - the attention steps of an attention = "cudnn" program (trc_sdpa.h; docs/CUDA.md, "Fused
 * attention through cuDNN"): what lies around cuDNN's fused attention (trc_sdpa.cpp, compiled once per checkout).
 * Compiled per output with the other runtime .cu files, only for such programs; small, so cheap.
 *
 * Forward: k_bias_bf16 writes the bf16 copy of the biased QKV, qkv only read (no step of this path reads a biased
 * fp32 qkv: the backward reads the copy; it and k_widen 8 elements a
 * thread with 16-byte accesses, trk_elt.cuh); trc_sdpa_fwd reads Q, K, V from that copy with strides and writes O
 * in bf16, straight into the step's output when it is bf16, else into the plan's scratch and k_widen makes the
 * fp32 output; in training it also writes the softmax statistics. The bf16 QKV, O and the statistics are planned
 * buffers that live until the backward (gen/plan_steps.c), which therefore runs no forward again: dO cast to bf16
 * (trc_cast_bf16; where the proj input-gradient GEMM wrote dO in bf16, gen/fuse.c, the overload without dout casts
 * nothing), trc_sdpa_bwd writes bf16 dQ, dK, dV in the qkv layout, which the QKV GEMMs and the bias
 * gradient's column sums read as they are (no fp32 dqkv on this path).
 * Everything on the compute stream s. A graph cuDNN refuses stops the rank naming the spec field.
 */
#include <stdio.h>

#include <cuda_bf16.h>

#include "trc_internal.h"
#include "trc_sdpa.h"
#include "trk_elt.cuh"

namespace {

constexpr int kThreads = 256;

unsigned blocks_for(long long n)
{
    return (unsigned)((n + kThreads - 1) / kThreads);
}

/* threads for n elements: n / 8 eight at a time, then n % 8 one at a time (vec), else n one at a time */
unsigned blocks_for(long long n, bool vec)
{
    return blocks_for(vec ? n / 8 + n % 8 : n);
}

/* h = qkv[rows, ld] + bias[ld] rounded to bf16 (RNE), qkv only read; vec (ld a multiple of 8, 16-byte aligned
 * pointers): 8 a thread with 16-byte accesses (trk_elt.cuh, the same bits) */
__global__ void __launch_bounds__(kThreads) k_bias_bf16(const float *__restrict__ qkv, const float *__restrict__ bias,
                                                          tr_bf16 *__restrict__ h, long long n, int ld, int vec)
{
    const long long i = (long long)blockIdx.x * kThreads + threadIdx.x;
    if (vec) {
        if (i < n / 8)
            trk::elt::bias_bf16_8(8 * i, ld, qkv, bias, h);
    } else if (i < n) {
        trk::elt::bias_bf16_1(i, ld, qkv, bias, h);
    }
}

/* y = x widened; vec: threads 0 .. n/8-1 take 8 elements each with 16-byte accesses, the next n % 8 one each */
__global__ void __launch_bounds__(kThreads) k_widen(const tr_bf16 *__restrict__ x, float *__restrict__ y, long long n,
                                                      int vec)
{
    const long long i = (long long)blockIdx.x * kThreads + threadIdx.x, n8 = vec ? n / 8 : 0;
    if (i < n8)
        trk::elt::widen8(8 * i, x, y);
    else if (8 * n8 + (i - n8) < n)
        trk::elt::widen1(8 * n8 + (i - n8), x, y);
}

void widen(cudaStream_t s, const tr_bf16 *x, float *y, long long n)
{
    const bool vec = trk::elt::aligned16(x, y);
    k_widen<<<blocks_for(n, vec), kThreads, 0, s>>>(x, y, n, vec);
    TRC_LAUNCHED("trc_attn_cudnn (widen)");
}

[[noreturn]] void refused(const char *err)
{
    int rank = 0, init = 0;
    MPI_Initialized(&init);
    if (init)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr,
            "rank %d: %s\nhint: this program was generated with attention = \"cudnn\" (cuDNN's fused attention) and "
            "cuDNN cannot run it on this GPU and shape: regenerate with attention = \"cublas\" in the spec (the cuBLAS "
            "path computes the same attention), or use a GPU and cuDNN that support it (docs/CUDA.md)\n",
            rank, err);
    trc_die();
}

void fwd_common(cudaStream_t s, int nseq, int seq, int heads, int hd, float *qkv, const float *bias, tr_bf16 *qkvh,
                tr_bf16 *o, float *stats)
{
    const long long ld = 3LL * heads * hd, n = (long long)nseq * seq * ld;
    const bool vec = ld % 8 == 0 && trk::elt::aligned16(qkv, bias) && trk::elt::aligned16(qkvh, qkvh);
    k_bias_bf16<<<blocks_for(n, vec), kThreads, 0, s>>>(qkv, bias, qkvh, n, (int)ld, vec);
    TRC_LAUNCHED("trc_attn_cudnn (bias)");
    char err[1024];
    if (trc_sdpa_fwd(s, nseq, seq, heads, hd, qkvh, o, stats, err, sizeof err) != 0)
        refused(err);
}

} // namespace

void trc_attn_cudnn(tr_ctx *c, cudaStream_t s, int nseq, int seq, int heads, int hd, float *qkv, const float *bias,
                    tr_bf16 *out, tr_bf16 *qkvh, tr_bf16 *obuf, float *stats)
{
    (void)c;
    (void)obuf;
    fwd_common(s, nseq, seq, heads, hd, qkv, bias, qkvh, out, stats);
}

void trc_attn_cudnn(tr_ctx *c, cudaStream_t s, int nseq, int seq, int heads, int hd, float *qkv, const float *bias,
                    float *out, tr_bf16 *qkvh, tr_bf16 *obuf, float *stats)
{
    (void)c;
    fwd_common(s, nseq, seq, heads, hd, qkv, bias, qkvh, obuf, stats);
    widen(s, obuf, out, (long long)nseq * seq * heads * hd);
}

void trc_attn_cudnn_bwd(tr_ctx *c, cudaStream_t s, int nseq, int seq, int heads, int hd, const tr_bf16 *qkvh,
                        const tr_bf16 *o, const float *stats, const float *dout, tr_bf16 *dqh, tr_bf16 *douth)
{
    const long long q = (long long)nseq * seq * heads * hd;
    trc_cast_bf16(c, dout, q, douth);
    trc_attn_cudnn_bwd(c, s, nseq, seq, heads, hd, qkvh, o, stats, douth, dqh);
}

void trc_attn_cudnn_bwd(tr_ctx *c, cudaStream_t s, int nseq, int seq, int heads, int hd, const tr_bf16 *qkvh,
                        const tr_bf16 *o, const float *stats, const tr_bf16 *douth, tr_bf16 *dqh)
{
    (void)c;
    char err[1024];
    if (trc_sdpa_bwd(s, nseq, seq, heads, hd, qkvh, o, douth, stats, dqh, err, sizeof err) != 0)
        refused(err);
}
