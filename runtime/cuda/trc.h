/*
 * trc.h - what generated CUDA code (rank_XXXX.cu, kernels.cu) calls: the CUDA
 * backend's side of the schedule. The same tr.h descriptors as the CPU
 * backend (tr_rank_desc, tr_param, tr_step_info), so model.c, the shared main
 * (tr_main.c) and every file loader are the same for both binaries.
 *
 * A rank runs its steps on two CUDA streams in schedule order:
 *   TRC_COMPUTE  cuBLAS GEMMs and the fused kernels (kernels.cu)
 *   TRC_COMM     broadcasts and all-reduces (NCCL, or MPI with host staging)
 * Each step is bracketed by trc_begin / trc_end. trc_begin makes the step's
 * stream wait for one earlier step of the other stream (or none, -1); the
 * generator derives that step from the plan's arena offsets, so a broadcast of
 * SUMMA step t+1 runs while step t's GEMM still computes whenever their bytes
 * are disjoint. trc_end records the step's event when a later step waits on
 * it. With timing on (--repeat) both also record timing events, harvested per
 * step kind by tr_backend_sync.
 *
 * Collectives count the bytes they move exactly as the CPU backend does
 * (logical counts: 4 a float, 2 a bf16 value), so --bytes checks a CUDA run
 * against the same plan.
 * Every CUDA, cuBLAS, NCCL and MPI call is checked: a failure prints the rank,
 * file, line, call, error and a hint, then aborts every rank (exit 4).
 */
#ifndef TRC_H
#define TRC_H

#include <cuda_runtime.h>

extern "C" {
#include "tr.h"
}

enum trc_stream_id { TRC_COMPUTE = 0, TRC_COMM = 1, TRC_NSTREAMS = 2 };

/* What a step must move at least, for the profile (TESS_PROFILE=1): DRAM bytes
 * of a fused kernel (read once + written once), payload bytes of a collective,
 * and the (m, n, k) of a GEMM (0 otherwise). Printed by the generator from the
 * plan's shapes. */
typedef struct trc_step_cost {
    long long bytes;
    int m, n, k;
} trc_step_cost;

/* The stream a step kind runs on (generated code keeps TRC_COMPUTE's in S). */
cudaStream_t trc_stream(struct tr_ctx *c, int stream);

/* Start of a forward: the comm stream waits for whatever the compute stream
 * (uploads) did before; cost is the rank's step_cost table. */
void trc_forward_begin(struct tr_ctx *c, const trc_step_cost *cost);
/* End of a forward: the compute stream waits for the comm stream. */
void trc_forward_end(struct tr_ctx *c);
/* The same brackets for the training phases (backward, optimizer): no profile reference. */
void trc_phase_begin(struct tr_ctx *c, const trc_step_cost *cost);
void trc_phase_end(struct tr_ctx *c);

/* Step `id` starts on `stream`, after step `wait` of the other stream (-1: no wait). */
void trc_begin(struct tr_ctx *c, int id, int stream, int wait);
/* Step `id` ends; signal != 0: record its event (a later step of the other stream waits on it). */
void trc_end(struct tr_ctx *c, int id, int stream, int signal);

/* On TRC_COMM: broadcast count floats at buf from local root `root` of group g. */
void trc_bcast(struct tr_ctx *c, tr_group g, int root, float *buf, int count);
/* On TRC_COMM (bf16, docs/BF16.md): broadcast count bf16 values at buf from local root `root` of group g, by the same
 * paths as trc_bcast (ncclBroadcast of ncclBfloat16; MPI staging of 2-byte elements). Counts 2*count bytes. */
void trc_bcast_bf16(struct tr_ctx *c, tr_group g, int root, tr_bf16 *buf, int count);
/* On TRC_COMPUTE (bf16): y[n] = x[n] rounded to nearest even (__float2bfloat16_rn: the bits of tr_bf16.h's
 * tr_f32_to_bf16 for every finite value and infinity; a NaN stays a NaN). */
void trc_cast_bf16(struct tr_ctx *c, const float *x, long long n, tr_bf16 *y);
/* A GRAD_ACC step (micro-batches): g = part (add 0, the first micro-batch of a step), g += part (add 1). */
void trc_grad_acc(struct tr_ctx *c, float *g, const float *part, long long n, int add);
/* On TRC_COMM: sum count floats at buf in place over group g. */
void trc_allreduce(struct tr_ctx *c, tr_group g, float *buf, int count);
/* On TRC_COMM (a language model's loss): the element-wise maximum of count floats at buf in place over group g
 * (ncclMax; MPI_MAX under staging). A maximum does not depend on the order of its operands, so every member gets
 * the same bits. Counted as an all-reduce of count, as tr_allreduce_max does. */
void trc_allreduce_max(struct tr_ctx *c, tr_group g, float *buf, int count);
/* On TRC_COMM (generation, docs/GENERATE.md): count/2 pairs (a float value, an int32 id in the next 4-byte slot) at buf
 * in place over group g: each becomes the pair of the largest value, the lower id of equal ones (MPI_MAXLOC of
 * MPI_FLOAT_INT). NCCL has no max-loc: under NCCL an ncclAllGather of every member's pairs into device memory and a
 * kernel that picks (no host wait, so a decode step can be a CUDA graph); under MPI staging MPI_MAXLOC through a
 * pinned host buffer. Counted as an all-reduce of count floats, as tr_allreduce_maxloc does. */
void trc_allreduce_maxloc(struct tr_ctx *c, tr_group g, float *buf, int count);
/* On TRC_COMPUTE (generation's weight-stationary layout): dst[count] = src[count], a device-to-device copy. */
void trc_copy(struct tr_ctx *c, const float *src, float *dst, long long count);
void trc_copy_bf16(struct tr_ctx *c, const tr_bf16 *src, tr_bf16 *dst, long long count);
/* On TRC_COMM (training): sum count floats at buf over group g onto local member `root` (in place there;
 * the others' buf is only read). Counted as tr_comm.c's tr_reduce: the root receives count from each other
 * member, the others send count. */
void trc_reduce(struct tr_ctx *c, tr_group g, int root, float *buf, int count);
/* On TRC_COMM (training): the exact all-reduce of tr_allreduce_exact: reduce to local member 0, then
 * broadcast its sum, so every member holds the same bits. Counted as one all-reduce of count. */
void trc_allreduce_exact(struct tr_ctx *c, tr_group g, float *buf, int count);
/* On TRC_COMM (training, optimizer.shard; docs/TRAINING.md "Optimizer state sharded over depth"): buf [count] cut
 * into size(g) slices of ceil(count/size) elements (the last ones shorter), member k owning slice k.
 * trc_reduce_scatter: member k's slice becomes the sum over the group of everyone's slice k (the rest of buf is
 * left unspecified: nothing reads it). NCCL: ncclReduceScatter in place when size divides count, else one grouped
 * ncclReduce per slice onto its owner, in NCCL's order of addition (with two members the one addition the CPU
 * makes; with more, within the last bit of it); staged through MPI: tr_comm.c's Alltoallv and member-order sum,
 * the CPU program's bits at any size. trc_allgather: every member's slice k becomes member k's bits
 * (ncclAllGather in place, or one grouped ncclBroadcast per slice; MPI_Allgatherv staged), so the replicas are
 * identical whatever the sum's order. Each counts 4 * count bytes, as tr_comm.c does. */
void trc_reduce_scatter(struct tr_ctx *c, tr_group g, float *buf, long long count);
void trc_allgather(struct tr_ctx *c, tr_group g, float *buf, long long count);
/* The same of bf16 bits (generation's weight-stationary layout in a bf16 plan): ncclBfloat16, MPI_UINT16_T staged;
 * 2 * count bytes. */
void trc_allgather_bf16(struct tr_ctx *c, tr_group g, tr_bf16 *buf, long long count);
/* On TRC_COMPUTE: row-major C[m,n] = beta*C + A[m,k] @ B[k,n] through cuBLAS, fp32. */
void trc_gemm(struct tr_ctx *c, int m, int n, int k, const float *A, int lda, const float *B, int ldb, float beta,
              float *C, int ldc);
/* On TRC_COMPUTE: C = beta*C + op(A) @ op(B), op(X) = X^T when trans; lda/ldb describe the stored matrices. */
void trc_gemm_ex(struct tr_ctx *c, int transa, int transb, int m, int n, int k, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
/* On TRC_COMPUTE (bf16): trc_gemm_ex with bf16 A and B (CUDA_R_16BF) and an fp32 C, accumulated in fp32
 * (CUBLAS_COMPUTE_32F; TESS_TF32 does not apply). */
void trc_gemm_bf16(struct tr_ctx *c, int transa, int transb, int m, int n, int k, const tr_bf16 *A, int lda,
                   const tr_bf16 *B, int ldb, float beta, float *C, int ldc);
/* The same with a bf16 C (CUDA_R_16BF): the fp32 accumulation rounded to bf16 as cuBLAS writes it (round to nearest
 * even), beta 0 (a bf16 C is never accumulated into): attention = "cudnn"'s proj input gradient, the bf16 dO cuDNN
 * reads (gen/fuse.c). */
void trc_gemm_bf16(struct tr_ctx *c, int transa, int transb, int m, int n, int k, const tr_bf16 *A, int lda,
                   const tr_bf16 *B, int ldb, float beta, tr_bf16 *C, int ldc);
/* On TRC_COMPUTE: batch GEMMs C_b = alpha op(A_b) op(B_b) + beta C_b, row-major as trc_gemm_ex, where X_b starts
 * b * sX elements after X (cublasGemmStridedBatchedEx): attention's QK^T, PV and their backward over the heads of
 * one sequence (docs/CUDA.md). fp32 operands: trc_gemm's precision (CUBLAS_COMPUTE_32F, TF32 with TESS_TF32=1);
 * bf16 operands: tensor cores, fp32 accumulation, an fp32 or a bf16 C (rounded to nearest even). */
void trc_gemm_batched(struct tr_ctx *c, int transa, int transb, int m, int n, int k, float alpha, const float *A,
                      int lda, long long sA, const float *B, int ldb, long long sB, float beta, float *C, int ldc,
                      long long sC, int batch);
void trc_gemm_batched(struct tr_ctx *c, int transa, int transb, int m, int n, int k, float alpha, const tr_bf16 *A,
                      int lda, long long sA, const tr_bf16 *B, int ldb, long long sB, float beta, float *C, int ldc,
                      long long sC, int batch);
void trc_gemm_batched(struct tr_ctx *c, int transa, int transb, int m, int n, int k, float alpha, const tr_bf16 *A,
                      int lda, long long sA, const tr_bf16 *B, int ldb, long long sB, float beta, tr_bf16 *C, int ldc,
                      long long sC, int batch);
/* On TRC_COMPUTE (training): one AdamW step (step number c->opt_step) on every tensor of the table t[n] (arena
 * offsets into A; tr.h), in one kernel launch: the arithmetic of tr_adamw in tr_kernels_bwd.c (hyperparameters from
 * tr_model, the learning rate c->lr; bias corrections in double, then float), and where a row names a bf16 copy,
 * that copy = the updated weight rounded to nearest even (trc_cast_bf16's bits). Element-wise, one owner thread per
 * element, so every replica computes the same bits from the same bits. The table must stay alive (the generated
 * one is static): its launch plan is built at the first call and kept. */
void trc_adamw_multi(struct tr_ctx *c, float *A, const tr_adamw_tensor *t, int n);
/* GEMMs with a cuBLASLt epilogue (trc_gemm_lt.cu; the plan marks them, gen/fuse.h). */
enum trc_epi {
    TRC_EPI_BIAS = 1,         /* D = C' + bias (C' = beta*C + A@B) */
    TRC_EPI_GELU_BIAS = 2,    /* D = GeLU(C' + bias), tanh approximation */
    TRC_EPI_GELU_AUX_BIAS = 3, /* aux = C' + bias (the pre-activation, D's type), D = GeLU(aux) */
    TRC_EPI_DGELU = 4,         /* D = GeLU'(aux) * C' (aux: the pre-activation TRC_EPI_GELU_AUX_BIAS kept) */
    TRC_EPI_BGRADA = 5         /* D = C'; bias gradient = column sums of B, the row-major dY (cuBLASLt's A) */
};
/* One literal shape of a class's GEMMs with an epilogue; bf16: A and B are bf16 (else fp32); out_bf16: C, D and aux
 * are bf16 (else fp32); transa, transb: op(A), op(B) as trc_gemm_ex's (the backward epilogues only). The class program
 * defines the table trc_lt_shapes[trc_lt_nshapes] (none when it fuses nothing: weak references) and the runtime
 * makes each row's cuBLASLt descriptors and algorithm once at start-up. */
typedef struct trc_lt_shape {
    int epi, m, n, k, lda, ldb, ldc;
    float beta;
    int bf16, out_bf16, transa, transb;
} trc_lt_shape;
extern "C" const trc_lt_shape trc_lt_shapes[] __attribute__((weak));
extern "C" const int trc_lt_nshapes __attribute__((weak));
/* On TRC_COMPUTE: row-major D[m,n] = epilogue(beta*C + A[m,k] @ B[k,n]) with bias [n] (one value per column of
 * the row-major result), through the prepared row `slot` of trc_lt_shapes (its shape must be the call's). D may be
 * C (in place); aux: the pre-activation for TRC_EPI_GELU_AUX_BIAS (ld n, never C when beta != 0), else nullptr. */
void trc_gemm_lt(struct tr_ctx *c, int slot, int epi, int m, int n, int k, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc, const float *bias, float *D, float *aux);
/* The backward epilogues, fp32 only, on TRC_COMPUTE: row-major C[m,n] = beta*C + op(A)[m,k] @ op(B)[k,n] (in
 * place) through the prepared row `slot`, then for TRC_EPI_DGELU (transa 0, transb 1: dg = dY @ W^T) C *= GeLU'(aux),
 * aux [m,n] ld n the saved pre-activation, n a multiple of 8; for TRC_EPI_BGRADA (transa 1, transb 0: dW = X^T @ dY)
 * bgrad[n] = the column sums of B ([k,n], ld n), written. The other pointer is nullptr. */
void trc_gemm_lt_bwd(struct tr_ctx *c, int slot, int epi, int transa, int transb, int m, int n, int k, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc, const float *aux, float *bgrad);
/* bf16 training's fc2 input gradient with GeLU's backward (TRC_EPI_DGELU only, transa 0, transb 1): bf16 A (dY) and
 * B (W2), C = D = du in bf16 (beta 0), aux the bf16 pre-activation u (cuBLASLt reads aux in D's type). */
void trc_gemm_lt_bwd(struct tr_ctx *c, int slot, int epi, int transa, int transb, int m, int n, int k,
                     const tr_bf16 *A, int lda, const tr_bf16 *B, int ldb, float beta, tr_bf16 *C, int ldc,
                     const tr_bf16 *aux, float *bgrad);
/* Step `id` is done by the epilogue of step `by`, the trc_gemm_lt before it: issues nothing (the step keeps its
 * trc_begin/trc_end, so its waits and its signal stay where the plan put them). */
void trc_fused(struct tr_ctx *c, int id, int by);
/* bf16 A and B, fp32 C, D and aux. */
void trc_gemm_lt(struct tr_ctx *c, int slot, int epi, int m, int n, int k, const tr_bf16 *A, int lda,
                 const tr_bf16 *B, int ldb, float beta, float *C, int ldc, const float *bias, float *D, float *aux);
/* A program generated before bf16 programs added fc1's bias in bf16 passes an fp32 bias with a bf16 D, which
 * cuBLASLt refuses (CUBLAS_STATUS_INVALID_VALUE): such a program does not compile against this runtime; generate it
 * again with this tessgen (docs/BF16.md). */
void trc_gemm_lt(struct tr_ctx *c, int slot, int epi, int m, int n, int k, const tr_bf16 *A, int lda,
                 const tr_bf16 *B, int ldb, float beta, tr_bf16 *C, int ldc, const float *bias, tr_bf16 *D,
                 tr_bf16 *aux) = delete;
/* bf16 A, B, C, D, aux (rounded to nearest even) and bias (cuBLASLt reads the bias in D's type): a bf16 program's
 * fc1 with its bias + GeLU (docs/BF16.md); C is D with beta 0. */
void trc_gemm_lt(struct tr_ctx *c, int slot, int epi, int m, int n, int k, const tr_bf16 *A, int lda,
                 const tr_bf16 *B, int ldb, float beta, tr_bf16 *C, int ldc, const tr_bf16 *bias, tr_bf16 *D,
                 tr_bf16 *aux);

/* After a kernel launch: a launch error (bad configuration, no kernel image
 * for this GPU) aborts with the kernel's name. */
void trc_launch_check(const char *kernel, const char *file, int line);
#define TRC_LAUNCHED(name) trc_launch_check((name), __FILE__, __LINE__)
/* A vectorised kernel's pointer must be 16-byte aligned (plan buffers are 64-byte aligned). */
void trc_check_aligned(const void *p, const char *what, const char *file, int line);
#define TRC_ALIGNED16(p, what) trc_check_aligned((p), (what), __FILE__, __LINE__)

#endif
