/*
 * trc_gemm_lt.cu - GEMMs with a fused epilogue through cuBLASLt: the GEMM a GeLU step follows runs that step as
 * its epilogue (the plan marks the pairs, gen/fuse.h), so the MLP's hidden block is not read and written again
 * by a separate kernel.
 *
 * Row-major as trc_gemm: row-major D[m,n] is the column-major D^T[n,m] = B^T A^T, so the call is cublasLtMatmul
 * with the operands swapped; the bias is then one value per row of the column-major D^T (cuBLASLt's bias
 * vector, length n), which is one value per column of the row-major result, as the kernels add it. Epilogues:
 * CUBLASLT_EPILOGUE_BIAS, _GELU_BIAS (D = GeLU(C' + bias), in place when D = C) and _GELU_AUX_BIAS (aux = the
 * pre-activation C' + bias, D = GeLU(aux); aux leading dimension n, which cuBLASLt wants divisible by 8).
 * cuBLASLt's GeLU is the tanh approximation, the formula of runtime/tr_math.h's tr_gelu; it evaluates it with its
 * own instructions, so a result may differ from the kernel's in the last bits (docs/CUDA.md gives the check).
 *
 * The backward epilogues (trc_gemm_lt_bwd, fp32; DGELU also bf16 training's, with a bf16 D = du and the bf16 u as
 * aux): _DGELU on dg = dY @ W^T (D = GeLU'(aux) * C', aux the pre-activation _GELU_AUX_BIAS kept, leading
 * dimension n) and _BGRADA on dW = X^T @ dY: in the swapped call
 * cuBLASLt's A is our dY, not transposed ([n, k] column-major, ld n), and its bias gradient (one value per row of
 * the column-major D^T, a column sum of dY) is what the COLSUM step computes; cuBLASLt takes BGRADA only with A not
 * transposed and BGRADB only with B transposed, and this layout is the first. The sum's order is cuBLASLt's, fixed for
 * the row's algorithm: every rank that runs the same shape on the same GPU model and library gets the same bits
 * (docs/CUDA.md says what that means for replicas).
 *
 * Nothing is made in the step loop: the class program lists the literal shapes of its fused GEMMs
 * (trc_lt_shapes, weak: a program without any leaves the table out) and trc_gemm_lt_init makes, once per row,
 * the matmul descriptor, the three matrix layouts and the algorithm (cublasLtMatmulAlgoGetHeuristic, the best of
 * its answers, for 16-byte aligned pointers and the workspace below). A call names its row; it checks that the
 * row is its own shape and that its pointers are 16-byte aligned, sets the bias and aux pointers on the row's
 * descriptor (host attributes, no allocation) and issues the matmul on the compute stream. The workspace is
 * the cuBLAS handle's (trc_gemm.cu, 32 MiB, allocated once): both libraries run on the compute stream only,
 * so their uses never overlap.
 *
 * Precision: fp32 operands use trc_gemm's compute type (CUBLAS_COMPUTE_32F, TF32 with TESS_TF32=1); bf16
 * operands CUBLAS_COMPUTE_32F (fp32 accumulation), as trc_gemm_bf16. A bf16 D (bf16 programs' fc1 GeLU output and
 * bf16 training's du, docs/BF16.md) is rounded to nearest even from the fp32 epilogue result; its bias is bf16 (cuBLASLt
 * reads the bias in D's type; an fp32 bias with a bf16 D it refused on an H200) and its aux bf16.
 */
#include <stdio.h>

#include <cublasLt.h>
#include <cuda_bf16.h>

#include "trc_internal.h"

#define TRC_LT_MAX 64 /* distinct shapes of one class: one per fused GEMM shape (one a model today) */

typedef struct trc_lt_row {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, cd; /* cuBLASLt's A (our B), B (our A), C and D */
    cublasLtMatmulAlgo_t algo;
} trc_lt_row;

static struct {
    cublasLtHandle_t lt;
    int n;
    trc_lt_row row[TRC_LT_MAX];
} trc_lt;

static cublasLtEpilogue_t lt_epilogue(int epi)
{
    switch (epi) {
    case TRC_EPI_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case TRC_EPI_GELU_BIAS: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case TRC_EPI_DGELU: return CUBLASLT_EPILOGUE_DGELU;
    case TRC_EPI_BGRADA: return CUBLASLT_EPILOGUE_BGRADA;
    default: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    }
}

static bool lt_aux(int epi)
{
    return epi == TRC_EPI_GELU_AUX_BIAS || epi == TRC_EPI_DGELU;
}

static void lt_make(trc_lt_row *r, const trc_lt_shape *s)
{
    cudaDataType_t ab = s->bf16 ? CUDA_R_16BF : CUDA_R_32F, cd = s->out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasComputeType_t ct = s->bf16 ? CUBLAS_COMPUTE_32F : trc_g.compute;
    cublasCheck(cublasLtMatmulDescCreate(&r->op, ct, CUDA_R_32F));
    /* swapped: cuBLASLt's A is our B (op from transb), its B our A (op from transa), as trc_gemm_ex */
    cublasOperation_t ta = s->transb ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s->transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(r->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    cublasCheck(cublasLtMatmulDescSetAttribute(r->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t ep = lt_epilogue(s->epi);
    cublasCheck(cublasLtMatmulDescSetAttribute(r->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    if (s->epi != TRC_EPI_DGELU) {
        /* fp32 programs: the fp32 biases and their gradients; a bf16 D reads a bf16 bias (cuBLASLt reads the bias in
         * D's type and refuses an fp32 one with a bf16 D, CUBLAS_STATUS_INVALID_VALUE on an H200): bf16 programs add
         * fc1's bias in bf16 (docs/BF16.md) */
        cudaDataType_t bt = s->out_bf16 ? CUDA_R_16BF : CUDA_R_32F;
        cublasCheck(cublasLtMatmulDescSetAttribute(r->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    if (lt_aux(s->epi)) {
        int64_t ld = s->n;
        cublasCheck(cublasLtMatmulDescSetAttribute(r->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    /* column-major: D^T[n,m] = op(B)^T[n,k] op(A)^T[k,m]; a stored matrix's layout is its rows and columns as kept */
    cublasCheck(cublasLtMatrixLayoutCreate(&r->a, ab, (uint64_t)(s->transb ? s->k : s->n),
                                           (uint64_t)(s->transb ? s->n : s->k), s->ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&r->b, ab, (uint64_t)(s->transa ? s->m : s->k),
                                           (uint64_t)(s->transa ? s->k : s->m), s->lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&r->cd, cd, (uint64_t)s->n, (uint64_t)s->m, s->ldc));
    /* the heuristic needs the epilogue's pointers' alignment, not the pointers: set placeholders that are */
    cublasLtMatmulPreference_t pref;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = trc_g.blas_ws_bytes;
    uint32_t al = 16;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al));
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    cublasCheck(cublasLtMatmulAlgoGetHeuristic(trc_lt.lt, r->op, r->a, r->b, r->cd, r->cd, pref, 1, &h, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (!found) {
        fprintf(stderr,
                "cuBLASLt has no algorithm for the GEMM with epilogue %d, [%d x %d]%s @ [%d x %d]%s (%s operands, %s "
                "output); add epilogues = false to the spec and generate again to run the bias and GeLU steps as kernels of "
                "their own (docs/CUDA.md)\n",
                s->epi, s->m, s->k, s->transa ? "^T" : "", s->k, s->n, s->transb ? "^T" : "",
                s->bf16 ? "bf16" : "fp32", s->out_bf16 ? "bf16" : "fp32");
        trc_die();
    }
    r->algo = h.algo;
}

bool trc_gemm_lt_init(tr_err *err)
{
    (void)err;
    if (&trc_lt_nshapes == nullptr || trc_lt_nshapes <= 0)
        return true;
    if (trc_lt_nshapes > TRC_LT_MAX) {
        fprintf(stderr, "the class program lists %d GEMM shapes with an epilogue; the runtime takes %d\n",
                trc_lt_nshapes, TRC_LT_MAX);
        trc_die();
    }
    cublasCheck(cublasLtCreate(&trc_lt.lt));
    for (int i = 0; i < trc_lt_nshapes; i++) {
        lt_make(&trc_lt.row[i], &trc_lt_shapes[i]);
        trc_lt.n = i + 1;
    }
    return true;
}

void trc_gemm_lt_free(void)
{
    for (int i = 0; i < trc_lt.n; i++) {
        cublasLtMatrixLayoutDestroy(trc_lt.row[i].a);
        cublasLtMatrixLayoutDestroy(trc_lt.row[i].b);
        cublasLtMatrixLayoutDestroy(trc_lt.row[i].cd);
        cublasLtMatmulDescDestroy(trc_lt.row[i].op);
    }
    trc_lt.n = 0;
    if (trc_lt.lt)
        cublasLtDestroy(trc_lt.lt);
    trc_lt.lt = nullptr;
}

static void lt_run(int slot, int epi, int transa, int transb, int m, int n, int k, const void *A, int lda,
                   const void *B, int ldb, float beta, const void *C, int ldc, const void *bias, void *D,
                   const void *aux, int bf16, int out_bf16)
{
    const trc_lt_shape *s = slot >= 0 && slot < trc_lt.n ? &trc_lt_shapes[slot] : nullptr;
    if (!s || s->epi != epi || s->m != m || s->n != n || s->k != k || s->lda != lda || s->ldb != ldb ||
        s->ldc != ldc || s->beta != beta || s->bf16 != bf16 || s->out_bf16 != out_bf16 || s->transa != transa ||
        s->transb != transb || lt_aux(epi) != (aux != nullptr) || (epi == TRC_EPI_DGELU) != (bias == nullptr)) {
        fprintf(stderr, "trc_gemm_lt: the call (row %d, epilogue %d, m=%d n=%d k=%d) is not row %d of trc_lt_shapes "
                        "(%d rows prepared): the class program and its table disagree\n",
                slot, epi, m, n, k, slot, trc_lt.n);
        trc_print_step();
        trc_die();
    }
    TRC_ALIGNED16(A, "trc_gemm_lt A");
    TRC_ALIGNED16(B, "trc_gemm_lt B");
    TRC_ALIGNED16(C, "trc_gemm_lt C");
    TRC_ALIGNED16(D, "trc_gemm_lt D");
    if (bias)
        TRC_ALIGNED16(bias, "trc_gemm_lt bias");
    trc_lt_row *r = &trc_lt.row[slot];
    if (bias) /* the bias, or for TRC_EPI_BGRADA the bias gradient cuBLASLt writes */
        cublasCheck(cublasLtMatmulDescSetAttribute(r->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (aux) {
        TRC_ALIGNED16(aux, "trc_gemm_lt aux");
        cublasCheck(cublasLtMatmulDescSetAttribute(r->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    }
    const float one = 1.0f;
    cublasCheck(cublasLtMatmul(trc_lt.lt, r->op, &one, B, r->a, A, r->b, &beta, C, r->cd, D, r->cd, &r->algo,
                               trc_g.blas_ws, trc_g.blas_ws_bytes, trc_g.stream[TRC_COMPUTE]));
    trc_count_launch(); /* --timing's launches per step (docs/CUDA.md "CUDA graphs") */
}

void trc_gemm_lt(tr_ctx *c, int slot, int epi, int m, int n, int k, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc, const float *bias, float *D, float *aux)
{
    (void)c;
    lt_run(slot, epi, 0, 0, m, n, k, A, lda, B, ldb, beta, C, ldc, bias, D, aux, 0, 0);
}

void trc_gemm_lt(tr_ctx *c, int slot, int epi, int m, int n, int k, const tr_bf16 *A, int lda, const tr_bf16 *B,
                 int ldb, float beta, float *C, int ldc, const float *bias, float *D, float *aux)
{
    (void)c;
    lt_run(slot, epi, 0, 0, m, n, k, A, lda, B, ldb, beta, C, ldc, bias, D, aux, 1, 0);
}

void trc_gemm_lt(tr_ctx *c, int slot, int epi, int m, int n, int k, const tr_bf16 *A, int lda, const tr_bf16 *B,
                 int ldb, float beta, tr_bf16 *C, int ldc, const tr_bf16 *bias, tr_bf16 *D, tr_bf16 *aux)
{
    (void)c;
    lt_run(slot, epi, 0, 0, m, n, k, A, lda, B, ldb, beta, C, ldc, bias, D, aux, 1, 1);
}

void trc_gemm_lt_bwd(tr_ctx *c, int slot, int epi, int transa, int transb, int m, int n, int k, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc, const float *aux, float *bgrad)
{
    (void)c;
    if (epi != TRC_EPI_DGELU && epi != TRC_EPI_BGRADA) {
        fprintf(stderr, "trc_gemm_lt_bwd: epilogue %d is not a backward one (TRC_EPI_DGELU, TRC_EPI_BGRADA)\n", epi);
        trc_print_step();
        trc_die();
    }
    lt_run(slot, epi, transa, transb, m, n, k, A, lda, B, ldb, beta, C, ldc, bgrad, C, aux, 0, 0);
}

void trc_gemm_lt_bwd(tr_ctx *c, int slot, int epi, int transa, int transb, int m, int n, int k, const tr_bf16 *A,
                     int lda, const tr_bf16 *B, int ldb, float beta, tr_bf16 *C, int ldc, const tr_bf16 *aux,
                     float *bgrad)
{
    (void)c;
    if (epi != TRC_EPI_DGELU || bgrad) {
        fprintf(stderr, "trc_gemm_lt_bwd: a bf16 D takes the GeLU-gradient epilogue only (TRC_EPI_DGELU), got %d\n", epi);
        trc_print_step();
        trc_die();
    }
    lt_run(slot, epi, transa, transb, m, n, k, A, lda, B, ldb, beta, C, ldc, nullptr, C, aux, 1, 1);
}

void trc_fused(tr_ctx *c, int id, int by)
{
    (void)c, (void)id, (void)by;
}
