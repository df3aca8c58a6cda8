/*
 * trc_gemm.cu - the CUDA backend's GEMM: row-major fp32 through cuBLAS.
 *
 * cuBLAS is column-major. A row-major [m,n] matrix with leading dimension ld
 * is the column-major [n,m] matrix of its transpose with the same ld, so
 * row-major C = A @ B is column-major C^T = B^T @ A^T: one cublasGemmEx with
 * the operands swapped and (n, m, k), no copies. The handle is bound to the
 * compute stream and given a workspace allocated once at start-up, so a GEMM
 * in the step loop allocates nothing.
 *
 * Training's transposed GEMMs (trc_gemm_ex: dX = dY W^T, dW = X^T dY) are the same call with the
 * operation of each swapped operand set from its transpose flag.
 *
 * bf16 (docs/BF16.md): trc_gemm_bf16 is trc_gemm_ex with CUDA_R_16BF A and B and a CUDA_R_32F C, always
 * CUBLAS_COMPUTE_32F (tensor cores, fp32 accumulation), or a CUDA_R_16BF C (beta 0: the fp32 result rounded as cuBLAS
 * stores it; attention = "cudnn"'s bf16 dO); trc_cast_bf16 makes the bf16 operands that no fused
 * kernel writes (weights from the fp32 master, fp32 gradients entering a GEMM): round to nearest even, 8
 * elements a thread (two 16-byte loads, one 16-byte store) where both pointers are 16-byte aligned.
 *
 * trc_gemm_batched (attention, docs/CUDA.md) is the same swap through cublasGemmStridedBatchedEx, with an alpha and
 * per-operand batch strides; its bf16 variants may also write a bf16 C (the attention output a GEMM reads next).
 *
 * Precision: CUBLAS_COMPUTE_32F (true fp32, the tests' 1e-4 tolerance against
 * the float64 reference). TESS_TF32=1 selects CUBLAS_COMPUTE_32F_FAST_TF32
 * (tensor cores, about 1e-3 relative error): a speed knob, not the default.
 */
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>

#include "trc_internal.h"

#define TRC_BLAS_WORKSPACE ((size_t)32 << 20) /* what cuBLAS recommends on Hopper */

bool trc_gemm_init(tr_err *err)
{
    (void)err;
    const char *tf32 = getenv("TESS_TF32");
    trc_g.compute = (tf32 && *tf32 && strcmp(tf32, "0") != 0) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasCheck(cublasCreate(&trc_g.blas));
    cublasCheck(cublasSetStream(trc_g.blas, trc_g.stream[TRC_COMPUTE]));
    trc_g.blas_ws_bytes = TRC_BLAS_WORKSPACE;
    cudaCheck(cudaMalloc(&trc_g.blas_ws, trc_g.blas_ws_bytes));
    cublasCheck(cublasSetWorkspace(trc_g.blas, trc_g.blas_ws, trc_g.blas_ws_bytes));
    cublasCheck(cublasSetPointerMode(trc_g.blas, CUBLAS_POINTER_MODE_HOST));
    return true;
}

void trc_gemm_free(void)
{
    if (trc_g.blas)
        cublasDestroy(trc_g.blas);
    if (trc_g.blas_ws)
        cudaFree(trc_g.blas_ws);
    trc_g.blas = NULL;
    trc_g.blas_ws = NULL;
}

void trc_gemm(tr_ctx *c, int m, int n, int k, const float *A, int lda, const float *B, int ldb, float beta, float *C,
              int ldc)
{
    (void)c;
    const float one = 1.0f;
    /* column-major C^T[n,m] = B^T[n,k] @ A^T[k,m] */
    cublasCheck(cublasGemmEx(trc_g.blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, CUDA_R_32F, ldb, A, CUDA_R_32F,
                             lda, &beta, C, CUDA_R_32F, ldc, trc_g.compute, CUBLAS_GEMM_DEFAULT));
    trc_count_launch();
}

void trc_gemm_ex(tr_ctx *c, int transa, int transb, int m, int n, int k, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc)
{
    (void)c;
    const float one = 1.0f;
    /* column-major C^T[n,m] = op(B)^T @ op(A)^T: the stored row-major B is column-major B^T, so op(B)^T is
     * that matrix untouched when B is not transposed and its transpose when it is (the same for A) */
    cublasCheck(cublasGemmEx(trc_g.blas, transb ? CUBLAS_OP_T : CUBLAS_OP_N, transa ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
                             k, &one, B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc, trc_g.compute,
                             CUBLAS_GEMM_DEFAULT));
    trc_count_launch();
}

void trc_gemm_bf16(tr_ctx *c, int transa, int transb, int m, int n, int k, const tr_bf16 *A, int lda,
                   const tr_bf16 *B, int ldb, float beta, float *C, int ldc)
{
    (void)c;
    const float one = 1.0f;
    /* as trc_gemm_ex; bf16 operands, fp32 C and accumulation (TESS_TF32 is about fp32 operands: not here) */
    cublasCheck(cublasGemmEx(trc_g.blas, transb ? CUBLAS_OP_T : CUBLAS_OP_N, transa ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
                             k, &one, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta, C, CUDA_R_32F, ldc,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    trc_count_launch();
}

void trc_gemm_bf16(tr_ctx *c, int transa, int transb, int m, int n, int k, const tr_bf16 *A, int lda,
                   const tr_bf16 *B, int ldb, float beta, tr_bf16 *C, int ldc)
{
    (void)c;
    if (beta != 0.0f) /* gen/fuse.c writes a bf16 C only with beta 0: never accumulated into */
        trc_cublas_fail(CUBLAS_STATUS_INVALID_VALUE, "trc_gemm_bf16 with a bf16 C and beta != 0", __FILE__, __LINE__);
    const float one = 1.0f;
    /* as above with a CUDA_R_16BF C: cuBLAS rounds the fp32 result to bf16 as it stores it */
    cublasCheck(cublasGemmEx(trc_g.blas, transb ? CUBLAS_OP_T : CUBLAS_OP_N, transa ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
                             k, &one, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta, C, CUDA_R_16BF, ldc,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    trc_count_launch();
}

namespace {

/* column-major C^T = op(B)^T op(A)^T per batch member, as trc_gemm_ex */
void gemm_batched(int transa, int transb, int m, int n, int k, float alpha, const void *A, cudaDataType ta, int lda,
                  long long sA, const void *B, int ldb, long long sB, float beta, void *C, cudaDataType tc, int ldc,
                  long long sC, int batch, cublasComputeType_t compute)
{
    cublasCheck(cublasGemmStridedBatchedEx(trc_g.blas, transb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                           transa ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, B, ta, ldb, sB, A, ta,
                                           lda, sA, &beta, C, tc, ldc, sC, batch, compute, CUBLAS_GEMM_DEFAULT));
    trc_count_launch();
}

} // namespace

void trc_gemm_batched(tr_ctx *c, int transa, int transb, int m, int n, int k, float alpha, const float *A, int lda,
                      long long sA, const float *B, int ldb, long long sB, float beta, float *C, int ldc, long long sC,
                      int batch)
{
    (void)c;
    gemm_batched(transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, sA, B, ldb, sB, beta, C, CUDA_R_32F, ldc, sC,
                 batch, trc_g.compute);
}

void trc_gemm_batched(tr_ctx *c, int transa, int transb, int m, int n, int k, float alpha, const tr_bf16 *A, int lda,
                      long long sA, const tr_bf16 *B, int ldb, long long sB, float beta, float *C, int ldc,
                      long long sC, int batch)
{
    (void)c;
    gemm_batched(transa, transb, m, n, k, alpha, A, CUDA_R_16BF, lda, sA, B, ldb, sB, beta, C, CUDA_R_32F, ldc, sC,
                 batch, CUBLAS_COMPUTE_32F);
}

void trc_gemm_batched(tr_ctx *c, int transa, int transb, int m, int n, int k, float alpha, const tr_bf16 *A, int lda,
                      long long sA, const tr_bf16 *B, int ldb, long long sB, float beta, tr_bf16 *C, int ldc,
                      long long sC, int batch)
{
    (void)c;
    gemm_batched(transa, transb, m, n, k, alpha, A, CUDA_R_16BF, lda, sA, B, ldb, sB, beta, C, CUDA_R_16BF, ldc, sC,
                 batch, CUBLAS_COMPUTE_32F);
}

namespace {

constexpr int kCastThreads = 256;
constexpr unsigned kCastMaxBlocks = 65535u * 8u; /* grid-stride beyond this */

/* 8 elements per thread: two float4 loads, one 16-byte store of 4 __nv_bfloat162 (element 2i at the lower address) */
__global__ void __launch_bounds__(kCastThreads)
    k_cast_bf16_v8(const float4 *__restrict__ x, uint4 *__restrict__ y, long long n8)
{
    for (long long i = (long long)blockIdx.x * kCastThreads + threadIdx.x; i < n8;
         i += (long long)gridDim.x * kCastThreads) {
        const float4 a = x[2 * i], b = x[2 * i + 1];
        const __nv_bfloat162 p0 = __floats2bfloat162_rn(a.x, a.y), p1 = __floats2bfloat162_rn(a.z, a.w),
                             p2 = __floats2bfloat162_rn(b.x, b.y), p3 = __floats2bfloat162_rn(b.z, b.w);
        uint4 o;
        o.x = *reinterpret_cast<const unsigned *>(&p0);
        o.y = *reinterpret_cast<const unsigned *>(&p1);
        o.z = *reinterpret_cast<const unsigned *>(&p2);
        o.w = *reinterpret_cast<const unsigned *>(&p3);
        y[i] = o;
    }
}

/* one element per thread: the tail of the vector kernel, or unaligned pointers */
__global__ void __launch_bounds__(kCastThreads)
    k_cast_bf16(const float *__restrict__ x, __nv_bfloat16 *__restrict__ y, long long n)
{
    for (long long i = (long long)blockIdx.x * kCastThreads + threadIdx.x; i < n;
         i += (long long)gridDim.x * kCastThreads)
        y[i] = __float2bfloat16_rn(x[i]);
}

/* g = part, or g += part: a weight gradient summed over the micro-batches of a step */
__global__ void k_grad_acc(float *__restrict__ g, const float *__restrict__ part, long long n, int add)
{
    for (long long i = (long long)blockIdx.x * kCastThreads + threadIdx.x; i < n;
         i += (long long)gridDim.x * kCastThreads)
        g[i] = add ? g[i] + part[i] : part[i];
}

unsigned cast_blocks(long long n)
{
    const long long b = (n + kCastThreads - 1) / kCastThreads;
    return b < (long long)kCastMaxBlocks ? (unsigned)b : kCastMaxBlocks;
}

} // namespace

void trc_grad_acc(tr_ctx *c, float *g, const float *part, long long n, int add)
{
    (void)c;
    if (n <= 0)
        return;
    k_grad_acc<<<cast_blocks(n), kCastThreads, 0, trc_g.stream[TRC_COMPUTE]>>>(g, part, n, add);
    trc_launch_check("trc_grad_acc", __FILE__, __LINE__);
}

void trc_cast_bf16(tr_ctx *c, const float *x, long long n, tr_bf16 *y)
{
    (void)c;
    if (n <= 0)
        return;
    cudaStream_t s = trc_g.stream[TRC_COMPUTE];
    __nv_bfloat16 *yb = reinterpret_cast<__nv_bfloat16 *>(y);
    long long done = 0;
    if (((reinterpret_cast<size_t>(x) | reinterpret_cast<size_t>(y)) & 15u) == 0 && n >= 8) {
        const long long n8 = n / 8;
        k_cast_bf16_v8<<<cast_blocks(n8), kCastThreads, 0, s>>>(reinterpret_cast<const float4 *>(x),
                                                                 reinterpret_cast<uint4 *>(y), n8);
        trc_launch_check("trc_cast_bf16", __FILE__, __LINE__);
        done = n8 * 8;
    }
    if (done < n) {
        k_cast_bf16<<<cast_blocks(n - done), kCastThreads, 0, s>>>(x + done, yb + done, n - done);
        trc_launch_check("trc_cast_bf16 (tail)", __FILE__, __LINE__);
    }
}
