/*
 * fuse.c - marks the GEMM + GeLU pairs that a backend may run as one GEMM with an epilogue (fuse.h gives the
 * rule and why each condition is there). One forward scan: a pair is a GEMM and the step right after it, so
 * O(S) per class.
 */
#include "fuse.h"

#include <stdio.h>

static bool f32(const tg_class_plan *cp, int buf)
{
    return buf >= 0 && cp->bufs[buf].dtype == TG_BUF_F32;
}

/* Is kernel step k (BIAS_GELU or GELU_SAVE) fusable into GEMM step g? */
static bool fusable(const tg_class_plan *cp, const tg_step *g, const tg_step *k)
{
    if (g->kind != TG_STEP_GEMM || g->transa || g->transb || g->phase != k->phase)
        return false;
    if (g->buf[2] != k->buf[0] || g->m != k->rows || g->n != k->cols || g->ldc != k->cols)
        return false;
    if (k->wait >= 0 || !f32(cp, k->buf[0]) || !f32(cp, k->buf[1]))
        return false;
    /* A and B of one type (both fp32 or both bf16), as trc_gemm_lt takes them */
    if (g->buf[0] < 0 || g->buf[1] < 0 || cp->bufs[g->buf[0]].dtype != cp->bufs[g->buf[1]].dtype)
        return false;
    if (k->kind == TG_STEP_BIAS_GELU)
        return true;
    return k->kind == TG_STEP_GELU_SAVE && f32(cp, k->buf[2]) && g->beta == 0.0f && k->cols % 8 == 0;
}

bool tg_fuse_plan(tg_class_plan *cp)
{
    for (int i = 1; i < cp->nsteps; i++) {
        tg_step *k = &cp->steps[i], *g = &cp->steps[i - 1];
        if ((k->kind != TG_STEP_BIAS_GELU && k->kind != TG_STEP_GELU_SAVE) || !fusable(cp, g, k))
            continue;
        g->epi = k->kind == TG_STEP_BIAS_GELU ? TG_EPI_GELU_BIAS : TG_EPI_GELU_AUX_BIAS;
        g->fused = i;
        k->fused = i - 1;
    }
    return true;
}

long long tg_fuse_extra_bytes(const tg_class_plan *cp, const tg_step *s)
{
    long long b = 4LL * cp->bufs[s->buf[1]].elems; /* the bias */
    if (s->kind == TG_STEP_GELU_SAVE)
        b += 4LL * cp->bufs[s->buf[2]].elems; /* g, besides u in C */
    return b;
}

const char *tg_fuse_text(char *buf, int cap, const tg_class_plan *cp, const tg_step *s)
{
    buf[0] = '\0';
    if (s->fused < 0 || s->fused >= cp->nsteps)
        return buf;
    if (s->kind == TG_STEP_GEMM && s->epi != TG_EPI_NONE)
        snprintf(buf, (size_t)cap, "; CUDA: %s epilogue (step %d) of this GEMM",
                 s->epi == TG_EPI_GELU_BIAS ? "bias+GeLU" : "bias+GeLU+pre-activation", s->fused);
    else if (s->kind != TG_STEP_GEMM && cp->steps[s->fused].epi != TG_EPI_NONE)
        snprintf(buf, (size_t)cap, "; CUDA: the epilogue of gemm %d", s->fused);
    return buf;
}
