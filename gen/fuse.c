/*
 * fuse.c - marks the GEMM + GeLU, GEMM + GeLU-gradient and GEMM + bias-gradient pairs that a backend may run as
 * one GEMM with an epilogue (fuse.h gives the rule and why each condition is there). One forward scan: a pair is
 * a GEMM and the next step on its stream; the collectives between are skipped once per GEMM, so O(S * c) per
 * class, c the longest run of collectives (a few).
 */
#include "fuse.h"

#include <stdio.h>

static bool f32(const tg_class_plan *cp, int buf)
{
    return buf >= 0 && cp->bufs[buf].dtype == TG_BUF_F32;
}

static bool b16(const tg_class_plan *cp, int buf)
{
    return buf >= 0 && cp->bufs[buf].dtype == TG_BUF_BF16;
}

/* Is kernel step k (BIAS_GELU or GELU_SAVE) fusable into GEMM step g? */
static bool fusable_fwd(const tg_class_plan *cp, const tg_step *g, const tg_step *k)
{
    if (g->transa || g->transb)
        return false;
    if (g->buf[2] != k->buf[0] || g->m != k->rows || g->n != k->cols || g->ldc != k->cols)
        return false;
    if (!f32(cp, k->buf[0]) || !f32(cp, k->buf[1]))
        return false;
    /* A and B of one type (both fp32 or both bf16), as trc_gemm_lt takes them */
    if (g->buf[0] < 0 || g->buf[1] < 0 || cp->bufs[g->buf[0]].dtype != cp->bufs[g->buf[1]].dtype)
        return false;
    if (k->kind == TG_STEP_BIAS_GELU)
        return true;
    if (g->beta != 0.0f || k->cols % 8 != 0)
        return false;
    if (k->buf[3] < 0) /* fp32: u kept in C (aux = C), g fp32 */
        return f32(cp, k->buf[2]);
    /* bf16 training (docs/BF16.md): D = g and aux = u, both bf16 (cuBLASLt writes them in D's type), bf16 operands;
     * C, fp32 h, is neither read (beta 0) nor written */
    return b16(cp, k->buf[2]) && b16(cp, k->buf[3]) && b16(cp, g->buf[0]);
}

/* Is kernel step k (GELU_BWD: dg *= GeLU'(u), or COLSUM: db = column sums of dy) fusable into GEMM step g? */
static bool fusable_bwd(const tg_class_plan *cp, const tg_step *g, const tg_step *k)
{
    if (!f32(cp, g->buf[0]) || !f32(cp, g->buf[1]) || !f32(cp, g->buf[2]) || !f32(cp, k->buf[0]) ||
        !f32(cp, k->buf[1]))
        return false;
    if (k->kind == TG_STEP_GELU_BWD) /* dg = dY @ W^T, then dg *= GeLU'(u) */
        return !g->transa && g->transb && g->buf[2] == k->buf[0] && g->m == k->rows && g->n == k->cols &&
               g->ldc == k->cols && k->cols % 8 == 0;
    /* dW = X^T @ dY, then db = column sums of dY ([k, n], ld n) */
    return g->transa && !g->transb && g->buf[1] == k->buf[0] && g->k == k->rows && g->n == k->cols &&
           g->ldb == k->cols;
}

/* bf16 inference (docs/BF16.md): GELU_SAVE k writes the bf16 g that fc2 reads and u = h + b1 back into h, which
 * nothing reads after it (no backward): one GELU_BIAS epilogue writing g as D in bf16 (GeLU of the fp32 sum, then
 * rounded, as the CPU kernel does), h neither read (beta 0) nor written. k is the index of the GeLU step. */
static bool gelu_to_bf16(const tg_class_plan *cp, const tg_step *g, const tg_step *k, int kidx)
{
    return k->kind == TG_STEP_GELU_SAVE && k->buf[3] < 0 && b16(cp, k->buf[2]) && b16(cp, g->buf[0]) &&
           b16(cp, g->buf[1]) && f32(cp, k->buf[0]) && f32(cp, k->buf[1]) && g->buf[2] == k->buf[0] &&
           !g->transa && !g->transb && g->beta == 0.0f && g->m == k->rows && g->n == k->cols && g->ldc == k->cols &&
           cp->bufs[k->buf[0]].last <= kidx;
}

static int epi_of(const tg_class_plan *cp, const tg_step *g, const tg_step *k, int kidx)
{
    if (g->kind != TG_STEP_GEMM || g->phase != k->phase || k->wait >= 0)
        return TG_EPI_NONE;
    switch (k->kind) {
    case TG_STEP_BIAS_GELU: return fusable_fwd(cp, g, k) ? TG_EPI_GELU_BIAS : TG_EPI_NONE;
    case TG_STEP_GELU_SAVE:
        if (gelu_to_bf16(cp, g, k, kidx))
            return TG_EPI_GELU_BIAS;
        return fusable_fwd(cp, g, k) ? TG_EPI_GELU_AUX_BIAS : TG_EPI_NONE;
    case TG_STEP_GELU_BWD: return fusable_bwd(cp, g, k) ? TG_EPI_DGELU : TG_EPI_NONE;
    case TG_STEP_COLSUM: return fusable_bwd(cp, g, k) ? TG_EPI_BGRAD : TG_EPI_NONE;
    default: return TG_EPI_NONE;
    }
}

bool tg_fuse_plan(tg_class_plan *cp)
{
    for (int i = 0; i < cp->nsteps; i++) {
        tg_step *g = &cp->steps[i];
        if (g->kind != TG_STEP_GEMM || g->fused >= 0) /* a GEMM carries one epilogue */
            continue;
        int j = i + 1; /* the next step on the GEMM's stream: only steps of the other stream come between */
        while (j < cp->nsteps && cp->steps[j].stream != g->stream)
            j++;
        if (j == cp->nsteps)
            continue;
        tg_step *k = &cp->steps[j];
        int epi = epi_of(cp, g, k, j);
        if (epi == TG_EPI_NONE)
            continue;
        g->epi = epi;
        g->fused = j;
        k->fused = i;
    }
    return true;
}

long long tg_fuse_extra_bytes(const tg_class_plan *cp, const tg_step *s)
{
    const tg_buf *b1 = &cp->bufs[s->buf[1]];
    if (s->kind == TG_STEP_GELU_BWD)
        return tg_dtype_size(b1->dtype) * b1->elems; /* u, read beside the GEMM's result */
    long long b = 4LL * b1->elems; /* the bias read, or for COLSUM the bias gradient written */
    if (s->kind == TG_STEP_GELU_SAVE && cp->steps[s->fused].epi == TG_EPI_GELU_BIAS) {
        /* bf16 inference: g (2 bytes) as D, where the GEMM wrote h (4): no u */
        const tg_buf *g = &cp->bufs[s->buf[2]];
        return b + (tg_dtype_size(g->dtype) - 4LL) * g->elems;
    }
    if (s->kind == TG_STEP_GELU_SAVE) {
        const tg_buf *g = &cp->bufs[s->buf[2]];
        b += tg_dtype_size(g->dtype) * g->elems; /* g, besides u in C */
        if (s->buf[3] >= 0) /* bf16 training: u as aux, g as D: the GEMM writes 2 + 2 bytes where it wrote 4 */
            b += tg_dtype_size(cp->bufs[s->buf[3]].dtype) * cp->bufs[s->buf[3]].elems - 4LL * g->elems;
    }
    return b;
}

static const char *epi_name(int epi)
{
    switch (epi) {
    case TG_EPI_GELU_BIAS: return "bias+GeLU";
    case TG_EPI_GELU_AUX_BIAS: return "bias+GeLU+pre-activation";
    case TG_EPI_DGELU: return "GeLU-gradient";
    default: return "bias-gradient";
    }
}

const char *tg_fuse_text(char *buf, int cap, const tg_class_plan *cp, const tg_step *s)
{
    buf[0] = '\0';
    if (s->fused < 0 || s->fused >= cp->nsteps)
        return buf;
    if (s->kind == TG_STEP_GEMM && s->epi != TG_EPI_NONE)
        snprintf(buf, (size_t)cap, "; CUDA: %s epilogue (step %d) of this GEMM", epi_name(s->epi), s->fused);
    else if (s->kind != TG_STEP_GEMM && cp->steps[s->fused].epi != TG_EPI_NONE)
        snprintf(buf, (size_t)cap, "; CUDA: the epilogue of gemm %d", s->fused);
    return buf;
}
