/*
 * trc_sdpa.h - fused (flash) attention through cuDNN, the CUDA backend's path for specs with
 * attention = "cudnn" (docs/CUDA.md, "Fused attention through cuDNN"). Two layers:
 *
 *   trc_sdpa_fwd / trc_sdpa_bwd (trc_sdpa.cpp): cuDNN's SDPA forward and backward built with cudnn-frontend, host
 *   C++ only (the frontend calls cuDNN's backend API; nothing here is device code), so it is compiled once per
 *   tessgen checkout into build/cuda/trc_sdpa.o (the frontend takes over a minute to compile) and every generated
 *   CUDA build links that object. One graph per literal shape and direction, built on the first call and cached;
 *   one workspace for all of them, grown when a new graph needs more. They return 0, or -1 with a one-line
 *   reason in err (cuDNN refused the graph: GPU, shape, library), and never exit: the caller names the fix.
 *
 *   trc_attn_cudnn / trc_attn_cudnn_bwd (trc_attn_cudnn.cu, compiled per output with the other runtime .cu
 *   files): the generated attention steps. The forward adds the QKV bias in place and writes the bf16 copy of
 *   the biased QKV that cuDNN reads, runs trc_sdpa_fwd (in training with the softmax statistics) and widens the
 *   output when the step's output is fp32. The bf16 QKV, O and statistics stay in planned buffers until the
 *   backward, which casts dO to bf16 (unless the proj GEMM wrote it in bf16: the second overload) and runs
 *   trc_sdpa_bwd on them into a bf16 dQKV that the QKV GEMMs and the bias gradient read: no forward is computed
 *   again, and no fp32 dqkv is written.
 *   A refused graph stops the rank with a message naming the spec field (attention = "cublas" is the fix).
 *
 * Layouts (row-major, bf16 = tr_bf16): qkv [nseq*seq, 3*C] with C = heads*hd, Q, K, V of head h at columns
 * h*hd, C + h*hd, 2C + h*hd (the plan's layout: nothing is permuted, cuDNN reads them with strides); o, dout
 * [nseq*seq, C]; dqkv as qkv; stats [nseq, heads, seq] fp32, the natural log of each row's softmax sum
 * (log-sum-exp of the scaled, masked scores). Causal (top left), scale 1/sqrt(hd), no dropout. All on stream s.
 */
#ifndef TRC_SDPA_H
#define TRC_SDPA_H

#include <stddef.h>

#include "trc.h"

int trc_sdpa_fwd(cudaStream_t s, int nseq, int seq, int heads, int hd, const tr_bf16 *qkv, tr_bf16 *o, float *stats,
                 char *err, size_t errlen);
int trc_sdpa_bwd(cudaStream_t s, int nseq, int seq, int heads, int hd, const tr_bf16 *qkv, const tr_bf16 *o,
                 const tr_bf16 *dout, const float *stats, tr_bf16 *dqkv, char *err, size_t errlen);

/* The generated steps (on the compute stream s). obuf: [nseq*seq, C] bf16, used when out is fp32; stats:
 * [nseq*heads*seq] fp32, written when not null (training: the backward reads them). */
void trc_attn_cudnn(tr_ctx *c, cudaStream_t s, int nseq, int seq, int heads, int hd, float *qkv, const float *bias,
                    tr_bf16 *out, tr_bf16 *qkvh, tr_bf16 *obuf, float *stats);
void trc_attn_cudnn(tr_ctx *c, cudaStream_t s, int nseq, int seq, int heads, int hd, float *qkv, const float *bias,
                    float *out, tr_bf16 *qkvh, tr_bf16 *obuf, float *stats);
/* qkvh, o, stats: what the forward kept (its bf16 QKV, its bf16 output O, its statistics); dout [nseq*seq, C]
 * fp32; dqh [nseq*seq, 3C] bf16: cuDNN's dQ, dK, dV, what the QKV GEMMs and the bias gradient read (the plan's
 * fp32 dqkv is the CPU program's only); douth [nseq*seq, C] bf16 (dO). */
void trc_attn_cudnn_bwd(tr_ctx *c, cudaStream_t s, int nseq, int seq, int heads, int hd, const tr_bf16 *qkvh,
                        const tr_bf16 *o, const float *stats, const float *dout, tr_bf16 *dqh, tr_bf16 *douth);
/* The same from dO already in bf16 (douth): the proj input-gradient GEMM wrote it as a bf16 D (gen/fuse.c,
 * TG_EPI_D_BF16), so nothing is cast. */
void trc_attn_cudnn_bwd(tr_ctx *c, cudaStream_t s, int nseq, int seq, int heads, int hd, const tr_bf16 *qkvh,
                        const tr_bf16 *o, const float *stats, const tr_bf16 *douth, tr_bf16 *dqh);

#endif
