/*
 * fuse.c - marks the GEMM + GeLU, GEMM + GeLU-gradient and GEMM + bias-gradient pairs that a backend may run as
 * one GEMM with an epilogue, and the layernorm triples (the residual add or the row sums, the centred squares, the
 * apply) and layernorm-backward pairs it may run as one row kernel (fuse.h gives the rules and why each condition is
 * there). One forward scan each: a pair is a GEMM and the next step on its stream; the collectives between are
 * skipped once per GEMM, so O(S * c) per class, c the longest run of collectives (a few); a triple (a
 * layernorm-backward pair) is three (two) consecutive steps, O(S).
 */
#include "fuse.h"

#include <stdio.h>

static bool f32(const tg_class_plan *cp, int buf)
{
    return buf >= 0 && cp->bufs[buf].dtype == TG_BUF_F32;
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
    /* fp32 D only: u kept in C (aux = C), g fp32. cuBLASLt reads the bias in D's type (cublasLt.h,
     * CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE): a bf16 D (bf16 training's g and u) would need a bf16 copy of the fp32
     * bias, and an fp32 bias with a bf16 D is refused (CUBLAS_STATUS_INVALID_VALUE on an H200, 2026-11-27) */
    return k->buf[3] < 0 && f32(cp, k->buf[2]);
}

static bool bf16(const tg_class_plan *cp, int buf)
{
    return buf >= 0 && cp->bufs[buf].dtype == TG_BUF_BF16;
}

/* What both bf16 pairs need (gen/fuse.h): the GEMM's fp32 C is the kernel step's slot 0, [rows, cols] at ld cols (a
 * multiple of 8: the aux's leading dimension), read by that step only (its last step is kj: the fused call never
 * writes it), the GEMM not accumulating into it (beta 0: cuBLASLt's C is in D's type), A and B bf16, and the step's
 * slots 1 and 2 bf16 (the bias or u; the GeLU output or du). */
static bool fusable16(const tg_class_plan *cp, const tg_step *g, const tg_step *k, int kj)
{
    if (g->beta != 0.0f || g->buf[2] != k->buf[0] || g->m != k->rows || g->n != k->cols || g->ldc != k->cols ||
        k->cols % 8 != 0)
        return false;
    const tg_buf *c = &cp->bufs[k->buf[0]];
    return !c->persistent && c->last == kj && c->dtype == TG_BUF_F32 && bf16(cp, g->buf[0]) && bf16(cp, g->buf[1]) &&
           bf16(cp, k->buf[1]) && bf16(cp, k->buf[2]);
}

/* Is the GELU_SAVE step k (index kj) of a bf16 program fusable into GEMM step g? bf16 programs add fc1's bias in bf16
 * (docs/BF16.md) and write g in bf16, bf16 training also u: cuBLASLt computes v = GEMM + bias from its fp32
 * accumulator and writes g = bf16(GeLU(v)) as D (and u = bf16(v) as aux), what the kernel computes from the fp32 h
 * the GEMM would write. */
static bool fusable_fwd16(const tg_class_plan *cp, const tg_step *g, const tg_step *k, int kj)
{
    return k->kind == TG_STEP_GELU_SAVE && !g->transa && !g->transb && fusable16(cp, g, k, kj) &&
           (k->buf[3] < 0 || bf16(cp, k->buf[3]));
}

/* Is the GELU_BWD step k (index kj) of bf16 training fusable into GEMM step g? It writes du = bf16(dg * GeLU'(u)) out
 * of place from the fp32 dg = dY @ W2^T: cuBLASLt's DGELU epilogue computes that product from its fp32 accumulator
 * and writes du as a bf16 D, reading the bf16 u as aux (aux is in D's type: bf16, as the plan keeps u). */
static bool fusable_bwd16(const tg_class_plan *cp, const tg_step *g, const tg_step *k, int kj)
{
    return k->kind == TG_STEP_GELU_BWD && k->buf[2] >= 0 && !g->transa && g->transb && fusable16(cp, g, k, kj);
}

/* Is the cuDNN attention-backward step k (index kj) fusable into GEMM step g, the proj input gradient dO = dY @ Wo^T?
 * The step reads dO (slot 1) only to round it to nearest even into its bf16 copy (slot 6) for cuDNN: the GEMM writes
 * that copy as a bf16 D from its fp32 accumulator instead (cublasGemmEx with a bf16 C), dO not accumulated (beta 0:
 * on q >= 2 a reduce writes dO last) and read by this step only (its last step is kj: never written on the GPU). */
static bool fusable_dout16(const tg_class_plan *cp, const tg_step *g, const tg_step *k, int kj)
{
    if (!k->cudnn || g->transa || !g->transb || g->beta != 0.0f || g->buf[2] != k->buf[1] || g->m != k->rows ||
        g->n != k->cols || g->ldc != k->cols || !bf16(cp, k->buf[6]) || !bf16(cp, g->buf[0]) || !bf16(cp, g->buf[1]))
        return false;
    const tg_buf *c = &cp->bufs[k->buf[1]];
    return !c->persistent && c->last == kj && c->dtype == TG_BUF_F32 && cp->bufs[k->buf[6]].elems == c->elems;
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

/* The one call writes what kernel step k writes (for TG_EPI_D_BF16 only its slot 6, the bf16 dO: the step itself
 * writes the rest after the GEMM) while it still reads the GEMM's A and B: none of those outputs (other than the
 * GEMM's own C) may share arena bytes with A or B. The planner pins them to the GEMM (tg_pb_pin_to_gemm), so they do
 * not; where it could not, the pair is not fused. */
static bool outputs_clear(const tg_class_plan *cp, const tg_step *g, const tg_step *k, int epi)
{
    for (int x = 0; x < TG_STEP_MAXBUF; x++) {
        if (k->buf[x] < 0 || !(k->acc[x] & TG_ACC_W) || k->buf[x] == g->buf[2] || (epi == TG_EPI_D_BF16 && x != 6))
            continue;
        const tg_buf *o = &cp->bufs[k->buf[x]];
        for (int y = 0; y < 2; y++) {
            const tg_buf *in = &cp->bufs[g->buf[y]];
            if (o->offset < in->offset + tg_buf_slots(in) && in->offset < o->offset + tg_buf_slots(o))
                return false;
        }
    }
    return true;
}

static int epi_kind(const tg_class_plan *cp, const tg_step *g, const tg_step *k, int kj)
{
    if (g->kind != TG_STEP_GEMM || g->phase != k->phase || k->wait >= 0)
        return TG_EPI_NONE;
    if (fusable_fwd16(cp, g, k, kj)) /* bf16: D = g, with u as aux in training, else GeLU alone */
        return k->buf[3] >= 0 ? TG_EPI_GELU_AUX_BIAS : TG_EPI_GELU_BIAS;
    if (fusable_bwd16(cp, g, k, kj)) /* bf16 training: D = du, u as aux */
        return TG_EPI_DGELU;
    if (k->kind == TG_STEP_ATTN_BWD) /* attention = "cudnn": D = the bf16 dO cuDNN reads */
        return fusable_dout16(cp, g, k, kj) ? TG_EPI_D_BF16 : TG_EPI_NONE;
    switch (k->kind) {
    case TG_STEP_BIAS_GELU: return fusable_fwd(cp, g, k) ? TG_EPI_GELU_BIAS : TG_EPI_NONE;
    case TG_STEP_GELU_SAVE: return fusable_fwd(cp, g, k) ? TG_EPI_GELU_AUX_BIAS : TG_EPI_NONE;
    case TG_STEP_GELU_BWD: return fusable_bwd(cp, g, k) ? TG_EPI_DGELU : TG_EPI_NONE;
    case TG_STEP_COLSUM: return fusable_bwd(cp, g, k) ? TG_EPI_BGRAD : TG_EPI_NONE;
    default: return TG_EPI_NONE;
    }
}

static int epi_of(const tg_class_plan *cp, const tg_step *g, const tg_step *k, int kj)
{
    int epi = epi_kind(cp, g, k, kj);
    return epi != TG_EPI_NONE && outputs_clear(cp, g, k, epi) ? epi : TG_EPI_NONE;
}

/* Do the arena bytes of buffers a and b meet? */
static bool overlap(const tg_class_plan *cp, int a, int b)
{
    const tg_buf *x = &cp->bufs[a], *y = &cp->bufs[b];
    return x->offset < y->offset + tg_buf_slots(y) && y->offset < x->offset + tg_buf_slots(x);
}

/* Does no buffer of out[0..nout) (-1: none) share arena bytes with one of in[0..nin) (-1: none)? */
static bool apart(const tg_class_plan *cp, const int *out, int nout, const int *in, int nin)
{
    for (int o = 0; o < nout; o++)
        for (int k = 0; out[o] >= 0 && k < nin; k++)
            if (in[k] >= 0 && overlap(cp, out[o], in[k]))
                return false;
    return true;
}

/* The layernorm steps q (LN_SQDEV) and a (LN_APPLY) of x and its row sums rs, directly after the step that wrote rs:
 * one phase and stream, waiting for nothing, whole rows (cols == hidden), x and y's inputs fp32. */
static bool ln_follows(const tg_class_plan *cp, const tg_step *r, const tg_step *q, const tg_step *a, int x, int rs)
{
    if (q->kind != TG_STEP_LN_SQDEV || a->kind != TG_STEP_LN_APPLY)
        return false;
    if (q->phase != r->phase || a->phase != r->phase || q->stream != r->stream || a->stream != r->stream ||
        q->wait >= 0 || a->wait >= 0 || q->fused >= 0 || a->fused >= 0)
        return false;
    if (q->buf[0] != x || q->buf[1] != rs || a->buf[0] != x || a->buf[1] != rs || a->buf[2] != q->buf[2] ||
        q->rows != r->rows || a->rows != r->rows || q->cols != r->cols || a->cols != r->cols ||
        q->hidden != r->cols || a->hidden != r->cols)
        return false;
    return f32(cp, x) && f32(cp, a->buf[3]) && f32(cp, a->buf[4]);
}

/* Is the LN_ROWSUM step r, with the two steps after it, one row kernel (a layernorm with no residual add before it:
 * the first block's ln1, ln_f after a block output that is kept)? The same rule as below: no output (rs, vs, y)
 * shares arena bytes with an input (x, gamma, beta). */
static bool ln_triple(const tg_class_plan *cp, const tg_step *r, const tg_step *q, const tg_step *a)
{
    const int x = r->buf[0], rs = r->buf[1];
    if (rs < 0 || !ln_follows(cp, r, q, a, x, rs))
        return false;
    const int out[3] = {rs, q->buf[2], a->buf[5]}, in[3] = {x, a->buf[3], a->buf[4]};
    return apart(cp, out, 3, in, 3);
}

/* Is the residual step r (index i), with the two steps after it, one row kernel (fuse.h, "Row kernels")? They are
 * LN_SQDEV and LN_APPLY of the residual's output xo and row sums rs over whole rows (cols == hidden: nothing sums
 * the statistics over a row group), on r's stream and phase, waiting for nothing; and no output of the three (xo
 * when out of place, rs, vs, y) shares arena bytes with an input (x, p, bias, gamma, beta): the one kernel writes a
 * row's outputs while other rows are still to be read. */
static bool row_triple(const tg_class_plan *cp, int i)
{
    if (i + 2 >= cp->nsteps)
        return false;
    const tg_step *r = &cp->steps[i], *q = &cp->steps[i + 1], *a = &cp->steps[i + 2];
    if (r->kind == TG_STEP_LN_ROWSUM)
        return ln_triple(cp, r, q, a);
    int xo = r->buf[4] >= 0 ? r->buf[4] : r->buf[0], rs = r->buf[3];
    if (r->kind != TG_STEP_RESID_ROWSUM || rs < 0 || !ln_follows(cp, r, q, a, xo, rs))
        return false;
    if (!f32(cp, r->buf[0]) || !f32(cp, r->buf[1]) || !f32(cp, r->buf[2]))
        return false;
    const int out[4] = {xo == r->buf[0] ? -1 : xo, rs, q->buf[2], a->buf[5]};
    const int in[5] = {r->buf[0], r->buf[1], r->buf[2], a->buf[3], a->buf[4]};
    return apart(cp, out, 4, in, 5);
}

/* Is the layernorm-backward sums step s (index i), with the apply step after it, one row kernel (fuse.h, "Layernorm
 * backward")? The apply step is the next step, of s's phase and stream, waiting for nothing, on s's dy, x, rs, vs,
 * gamma and shape over whole rows (cols == hidden: nothing sums s1, s2 over a row group), reading the sums s wrote,
 * which nothing else reads (the kernel keeps them in registers and never writes them); dy, x, rs, vs, gamma, g and
 * the gradients fp32 (g16 bf16); no output (g, g16, dgamma, dbeta) shares arena bytes with an input (dy, x, rs, vs,
 * gamma) or, g and g16, with dgamma or dbeta (g is updated in place: the row kernel writes a row's g while later rows
 * are still to be read, and the column kernel runs after it instead of before). */
static bool lnb_pair(const tg_class_plan *cp, int i)
{
    if (i + 1 >= cp->nsteps)
        return false;
    const tg_step *s = &cp->steps[i], *a = &cp->steps[i + 1];
    int sums = s->buf[5];
    if (s->kind != TG_STEP_LN_BWD_SUMS || a->kind != TG_STEP_LN_BWD_APPLY || sums < 0 || a->buf[5] != sums)
        return false;
    if (a->phase != s->phase || a->stream != s->stream || a->wait >= 0 || a->fused >= 0 || s->rows != a->rows ||
        s->cols != a->cols || s->hidden != s->cols || a->hidden != a->cols || s->eps != a->eps)
        return false;
    if (cp->bufs[sums].persistent || cp->bufs[sums].last != i + 1)
        return false;
    for (int k = 0; k < 5; k++)
        if (a->buf[k] != s->buf[k] || !f32(cp, s->buf[k]))
            return false;
    if (!f32(cp, s->buf[6]) || !f32(cp, s->buf[7]) || !f32(cp, a->buf[6]) || (a->buf[7] >= 0 && !bf16(cp, a->buf[7])))
        return false;
    const int out[4] = {a->buf[6], a->buf[7], s->buf[6], s->buf[7]}; /* g, g16 (or -1); dgamma, dbeta */
    const int in[7] = {s->buf[0], s->buf[1], s->buf[2], s->buf[3], s->buf[4], s->buf[6], s->buf[7]};
    /* g and g16 against the inputs and the gradients; the gradients against the inputs */
    return apart(cp, out, 2, in, 7) && apart(cp, out + 2, 2, in, 5);
}

bool tg_fuse_plan(tg_class_plan *cp)
{
    for (int i = 0; i < cp->nsteps; i++) { /* the layernorm backward: the sums step and the apply step after it */
        tg_step *s = &cp->steps[i];
        if (s->fused >= 0 || !lnb_pair(cp, i))
            continue;
        s->epi = TG_EPI_LNB;
        s->fused = i + 1;
        cp->steps[i + 1].fused = i;
    }
    for (int i = 0; i < cp->nsteps; i++) { /* the row kernels: a layernorm and the residual step before it, if any */
        tg_step *r = &cp->steps[i];
        if (r->fused >= 0 || !row_triple(cp, i))
            continue;
        r->epi = TG_EPI_LN;
        r->fused = i + 2;
        cp->steps[i + 1].fused = cp->steps[i + 2].fused = i;
    }
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

bool tg_fuse_d_bf16(const tg_class_plan *cp, const tg_step *t)
{
    if (t->kind != TG_STEP_GEMM || t->fused < 0 || t->epi == TG_EPI_NONE || t->epi == TG_EPI_BGRAD)
        return false;
    if (t->epi == TG_EPI_D_BF16) /* the attention backward's bf16 dO, slot 6 */
        return true;
    const tg_step *k = &cp->steps[t->fused];
    return k->buf[2] >= 0 && cp->bufs[k->buf[2]].dtype == TG_BUF_BF16; /* g (GeLU) or du (DGELU), slot 2 */
}

bool tg_fuse_absorbed(const tg_class_plan *cp, const tg_step *s)
{
    return s->kind != TG_STEP_GEMM && s->epi == TG_EPI_NONE && s->fused >= 0 &&
           cp->steps[s->fused].epi != TG_EPI_D_BF16;
}

/* Bytes of the buffer in slot k of step s, once. */
static long long slot_bytes(const tg_class_plan *cp, const tg_step *s, int k)
{
    return s->buf[k] >= 0 ? tg_dtype_size(cp->bufs[s->buf[k]].dtype) * cp->bufs[s->buf[k]].elems : 0;
}

long long tg_fuse_extra_bytes(const tg_class_plan *cp, const tg_step *s)
{
    if (s->kind == TG_STEP_LN_BWD_APPLY) /* in the row kernel of its sums step: g read and written, g16 written (dy,
                                          * x, gamma, the statistics and the sums are the sums step's, in registers) */
        return 2 * slot_bytes(cp, s, 6) + slot_bytes(cp, s, 7);
    if (s->kind == TG_STEP_LN_SQDEV) /* in the row kernel of its residual step: vs written (x, rs are in registers) */
        return slot_bytes(cp, s, 2);
    if (s->kind == TG_STEP_LN_APPLY) /* gamma and beta read, y written */
        return slot_bytes(cp, s, 3) + slot_bytes(cp, s, 4) + slot_bytes(cp, s, 5);
    const tg_buf *b1 = &cp->bufs[s->buf[1]];
    if (s->kind == TG_STEP_GELU_BWD) { /* u, read beside the GEMM's result; bf16: du written as D, not dg */
        long long b = tg_dtype_size(b1->dtype) * b1->elems;
        if (s->buf[2] >= 0 && tg_fuse_d_bf16(cp, &cp->steps[s->fused]))
            b += tg_dtype_size(cp->bufs[s->buf[2]].dtype) * cp->bufs[s->buf[2]].elems;
        return b;
    }
    long long b = tg_dtype_size(b1->dtype) * b1->elems; /* the bias read, or for COLSUM the bias gradient written */
    if (s->kind == TG_STEP_GELU_SAVE) {
        const tg_buf *g = &cp->bufs[s->buf[2]];
        b += tg_dtype_size(g->dtype) * g->elems; /* g, besides u in C (bf16: D is g, the GEMM's C is not written) */
        if (s->buf[3] >= 0) /* bf16 training: u, cuBLASLt's aux */
            b += tg_dtype_size(cp->bufs[s->buf[3]].dtype) * cp->bufs[s->buf[3]].elems;
    }
    return b;
}

static const char *epi_name(int epi)
{
    switch (epi) {
    case TG_EPI_GELU_BIAS: return "bias+GeLU";
    case TG_EPI_GELU_AUX_BIAS: return "bias+GeLU+pre-activation";
    case TG_EPI_DGELU: return "GeLU-gradient";
    case TG_EPI_D_BF16: return "bf16-output";
    default: return "bias-gradient";
    }
}

const char *tg_fuse_text(char *buf, int cap, const tg_class_plan *cp, const tg_step *s)
{
    buf[0] = '\0';
    if (s->fused < 0 || s->fused >= cp->nsteps)
        return buf;
    if (s->epi == TG_EPI_LN)
        snprintf(buf, (size_t)cap, "; CUDA: one row kernel with the layernorm steps %d and %d", s->fused - 1, s->fused);
    else if (s->epi == TG_EPI_LNB)
        snprintf(buf, (size_t)cap, "; CUDA: one row kernel with step %d (sums not written)", s->fused);
    else if (s->kind == TG_STEP_LN_SQDEV || s->kind == TG_STEP_LN_APPLY || s->kind == TG_STEP_LN_BWD_APPLY)
        snprintf(buf, (size_t)cap, "; CUDA: in the row kernel of step %d", s->fused);
    else if (s->kind == TG_STEP_GEMM && s->epi == TG_EPI_D_BF16)
        snprintf(buf, (size_t)cap, "; CUDA: writes the bf16 copy step %d reads (no fp32 result, no cast)", s->fused);
    else if (s->kind == TG_STEP_GEMM && s->epi != TG_EPI_NONE)
        snprintf(buf, (size_t)cap, "; CUDA: %s epilogue (step %d) of this GEMM", epi_name(s->epi), s->fused);
    else if (s->kind != TG_STEP_GEMM && cp->steps[s->fused].epi == TG_EPI_D_BF16)
        snprintf(buf, (size_t)cap, "; CUDA: reads the bf16 dO gemm %d wrote (no cast)", s->fused);
    else if (s->kind != TG_STEP_GEMM && cp->steps[s->fused].epi != TG_EPI_NONE)
        snprintf(buf, (size_t)cap, "; CUDA: the epilogue of gemm %d", s->fused);
    return buf;
}
