/*
 * tr_gemm.c - the CPU backend's GEMM: row-major single precision through
 * OpenBLAS (tr_blas.h: sgemm, or sgemv for a single row), timed as its own step kind.
 */
#include "tr_blas.h"
#include "tr_ctx.h"

void tr_gemm(tr_ctx *c, int m, int n, int k, const float *A, int lda, const float *B, int ldb, float beta, float *C,
             int ldc)
{
    double t0 = c->timing ? tr_now() : 0;
    tr_sgemm(0, 0, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
    c->calls[TR_K_GEMM]++;
    if (c->timing)
        c->seconds[TR_K_GEMM] += tr_now() - t0;
}

void tr_gemm_ex(tr_ctx *c, int transa, int transb, int m, int n, int k, const float *A, int lda, const float *B,
                int ldb, float beta, float *C, int ldc)
{
    double t0 = c->timing ? tr_now() : 0;
    tr_sgemm(transa, transb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
    c->calls[TR_K_GEMM]++;
    if (c->timing)
        c->seconds[TR_K_GEMM] += tr_now() - t0;
}
