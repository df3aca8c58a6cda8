/*
 * tr_blas.h - the row-major single-precision GEMM every CPU path calls (the CPU backend's tr_gemm.c and bf16
 * GEMMs, and the CUDA emulation's, so the two stay the same arithmetic): C[m,n] = alpha op(A) op(B) + beta C.
 *
 * A product of one row (m = 1: a decode step of one sequence a rank, the LM head of one token) is a matrix-vector
 * product, and OpenBLAS's sgemm takes 2.7x to 3.2x longer for it than its sgemv (this 2-core machine, GPT-2 small's
 * shapes: the head's [1,768] x [768,50304]^T 21.8 ms against 8.0 ms; docs/BENCHMARKS.md "Greedy decode"): one
 * output element is then a dot product of one row of the matrix with the vector, read once, which is what sgemv
 * streams. So m = 1 goes to cblas_sgemv (op(B)^T applied to the row), every other shape to cblas_sgemm.
 */
#ifndef TR_BLAS_H
#define TR_BLAS_H

#include <cblas.h>

static inline void tr_sgemm(int transa, int transb, int m, int n, int k, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C, int ldc)
{
    if (m == 1 && n > 0 && k > 0) {
        /* the row x = op(A)[0, :k]: A's first row (stride 1), or with transa A's first column (stride lda);
         * y = C[0, :n] = alpha op(B)^T x + beta y: B [k, n] read as its transpose, or with transb B [n, k] itself */
        int incx = transa ? lda : 1;
        if (transb)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, alpha, B, ldb, A, incx, beta, C, 1);
        else
            cblas_sgemv(CblasRowMajor, CblasTrans, k, n, alpha, B, ldb, A, incx, beta, C, 1);
        return;
    }
    cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                A, lda, B, ldb, beta, C, ldc);
}

#endif
