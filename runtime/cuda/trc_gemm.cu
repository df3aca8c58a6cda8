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
 * Precision: CUBLAS_COMPUTE_32F (true fp32, the tests' 1e-4 tolerance against
 * the float64 reference). TESS_TF32=1 selects CUBLAS_COMPUTE_32F_FAST_TF32
 * (tensor cores, about 1e-3 relative error): a speed knob, not the default.
 */
#include <stdlib.h>
#include <string.h>

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
}
