/*
 * emit_rank_cu.c - the CUDA backend's printers: rank_iI_jJ.cu (one per rank
 * class), kernels.cu and kernels.cuh, and the choice of whether to emit them
 * at all (tg_cuda_select). The CUDA part of build.ninja is emit_ninja_cuda.c's.
 *
 * The schedule is the CPU backend's: the same tg_plan, the same steps in the
 * same order, the same literal roots, counts, shapes and arena offsets. Where
 * each step runs and what it waits for is the plan's too (streams.c: GEMMs and
 * fused kernels on the compute stream, collectives on the comm stream, each
 * step waiting for the latest conflicting step of the other stream); this
 * printer turns tg_step's stream, wait and signal into trc_begin/trc_end
 * arguments, the wait's slots into a comment naming the buffers that share
 * bytes, and the class's stream totals into the overlap line at the top.
 *
 * Fused kernels are called as templates with the step's shapes as literal
 * template arguments (trk::attention<NSEQ, SEQ, HEADS, HD>); kernels.cu
 * instantiates exactly the shapes that appear in the plan. Training plans get
 * one function per phase (forward, backward, optimizer), as on the CPU; each
 * opens and closes by joining the two streams, which is why the plan's waits
 * stay within a phase. A step kind without a stream would be refused with
 * tg_fail naming it, never emitted wrongly; today every kind has one.
 *
 * A language model (model.vocab) adds its steps' kernels from runtime/cuda/trk_lm.cuh: the rank files include
 * that header and define tr_lm_class, and kernels.cu gets a section after the template's text that includes
 * trk_lm_kernels.cuh and instantiates them, so a block stack's kernels.cu and every fingerprint (which hashes
 * the templates) are what they were. The loss's all-reduce(MAX) is trc_allreduce_max.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emit.h"
#include "fuse.h"
#include "streams.h"

static const char *bn(const tg_class_plan *rp, const tg_step *s, int slot)
{
    return s->buf[slot] >= 0 ? rp->bufs[s->buf[slot]].name : "nullptr";
}

/* ---- what the CUDA backend supports ------------------------------------------------------ */

/* Every step kind of the forward, the backward and the optimizer has a stream (streams.c); a kind without one
 * would be refused here, naming it, never emitted wrongly. */
bool tg_cuda_supports(const tg_class_plan *cp, tg_err *err)
{
    for (int i = 0; i < cp->nsteps; i++) {
        const tg_step *s = &cp->steps[i];
        if (s->stream == TG_STREAM_NONE)
            return tg_fail(err, "not supported by the CUDA backend yet: %s (class (i=%d, j=%d) step %d: layer %d %s)",
                           tg_step_kind_name(s->kind), cp->i, cp->j, i, s->layer, s->op);
        if (s->kind == TG_STEP_ATTN_DECODE && s->context > 8192) /* runtime/cuda/trk_gen_kernels.cuh kMaxContext */
            return tg_fail(err, "not supported by the CUDA backend yet: model.context = %d, a decode step over more than "
                                "8192 cached positions (its attention kernel keeps a row of scores in shared memory)",
                           s->context);
    }
    return true;
}

/* ---- rank_iI_jJ.cu ---------------------------------------------------------------------- */

/* Bytes per element of the buffer in slot (4 when unused). */
static long long esz(const tg_class_plan *rp, const tg_step *s, int slot)
{
    return s->buf[slot] >= 0 ? tg_dtype_size(rp->bufs[s->buf[slot]].dtype) : 4;
}

/* "_bf16" when the buffer in slot is bf16 (docs/BF16.md) */
static const char *bf(const tg_class_plan *rp, const tg_step *s, int slot)
{
    return esz(rp, s, slot) == 2 ? "_bf16" : "";
}

/* The C type of the buffer in slot, for kernel instantiations whose output type is a template parameter. */
static const char *cty(const tg_class_plan *rp, const tg_step *s, int slot)
{
    return esz(rp, s, slot) == 2 ? "tr_bf16" : "float";
}

/* Bytes cuDNN's attention steps move at least (attention = "cudnn"; q = elements of Q, st = the statistics'
 * bytes). The forward: qkv + bias in, the bf16 copy of the biased qkv out, cuDNN reads Q, K, V and writes O in bf16
 * (and in training the statistics), widened when the output is fp32. The backward: dO in and its bf16 copy out (not
 * when the proj GEMM wrote the copy, gen/fuse.c), the backward (Q, K, V, O, dO and the statistics the forward kept in;
 * bf16 dQ, dK, dV out). */
static long long sdpa_bytes(const tg_class_plan *rp, const tg_step *s)
{
    long long q = (long long)s->nseq * s->seq * s->heads * s->hdim, st = 4LL * s->nseq * s->heads * s->seq;
    if (s->kind == TG_STEP_ATTENTION)
        return 4 * (3 * q + 3LL * s->heads * s->hdim) + 6 * q + 6 * q + 2 * q + (esz(rp, s, 2) == 4 ? 6 * q : 0) +
               (s->buf[6] >= 0 ? st : 0);
    return (s->fused >= 0 ? 0 : 4 * q + 2 * q) + (6 * q + 2 * q + 2 * q + st + 6 * q); /* fused: dO came in bf16 */
}

/* Bytes a step must move at least (fused kernels: each operand read once, results written once). */
static long long step_bytes(const tg_class_plan *rp, const tg_step *s)
{
    long long rc = (long long)s->rows * s->cols;
    if (s->cudnn)
        return sdpa_bytes(rp, s);
    switch (s->kind) {
    case TG_STEP_BCAST:
    case TG_STEP_ALLREDUCE: return esz(rp, s, 0) * s->count;
    case TG_STEP_LN_ROWSUM:
        if (s->epi == TG_EPI_LN) /* the row kernel: x, gamma, beta in; rs, vs and y out (gen/fuse.c) */
            return 4 * (rc + 2LL * s->cols + 2LL * s->rows) + esz(rp, &rp->steps[s->fused], 5) * rc;
        return 4 * (rc + s->rows);
    case TG_STEP_RESID_ROWSUM:
        if (s->epi == TG_EPI_LN) /* the row kernel: x, p, bias, gamma, beta in; xo, rs, vs and y out (gen/fuse.c) */
            return 4 * (3 * rc + 3LL * s->cols + 2LL * s->rows) + esz(rp, &rp->steps[s->fused], 5) * rc;
        return 4 * (3 * rc + s->cols + (s->buf[3] >= 0 ? s->rows : 0));
    case TG_STEP_LN_SQDEV: return s->fused >= 0 ? 0 : 4 * (rc + 2LL * s->rows); /* fused: the residual step's */
    case TG_STEP_LN_APPLY:
        return s->fused >= 0 ? 0 : 4 * (rc + 2LL * s->rows + 2LL * s->cols) + esz(rp, s, 5) * rc;
    case TG_STEP_BIAS_GELU: return 4 * (2 * rc + s->cols);
    case TG_STEP_ATTENTION: { /* qkv + bias in, biased qkv (and its bf16 copy) out; the GEMMs read Q, K, V once;
                               * scores written and read (fp32), probabilities written and read; out */
        long long q = (long long)s->nseq * s->seq * s->heads * s->hdim, e = esz(rp, s, 4);
        long long ss = (long long)s->nseq * s->heads * s->seq * s->seq;
        return 4 * (6 * q + 3LL * s->heads * s->hdim) + (e == 2 ? 6 * q : 0) + e * 3 * q + 8 * ss + 2 * e * ss + e * q;
    }
    case TG_STEP_REDUCE:
    case TG_STEP_REDUCESCATTER: /* optimizer.shard: the payload, as the plan counts it */
    case TG_STEP_ALLGATHER: return esz(rp, s, 0) * s->count;
    case TG_STEP_CAST: return 6 * s->count; /* fp32 in, bf16 out */
    case TG_STEP_COPY: return 2 * esz(rp, s, 0) * s->count;
    case TG_STEP_KV_WRITE: /* K, V columns in (fp32); cache rows out (of the cache's type) */
        return (4 + esz(rp, s, 1)) * 2LL * s->nseq * s->seq * s->cols;
    case TG_STEP_ATTN_DECODE: { /* qkv + bias in and out; the cached K and V of positions 0..pos read once per head
                                 * (at most the context's); out (the cache's type) */
        long long c = (long long)s->heads * s->hdim, e = esz(rp, s, 3);
        return 4 * (2 * 3 * s->nseq * c + 3 * c) + e * (2LL * s->nseq * s->context * c + s->nseq * c);
    }
    case TG_STEP_LM_ARGMAX: return 4 * (rc + 2LL * s->rows);
    case TG_STEP_GRAD_ACC: return 12 * s->count; /* part and gradient in, gradient out */
    case TG_STEP_GELU_SAVE: /* h in (and out, when u is kept in it), bias in, g out (and u, bf16 training) */
        return 4 * ((s->buf[3] >= 0 ? 1 : 2) * rc + s->cols) + esz(rp, s, 2) * rc +
               (s->buf[3] >= 0 ? esz(rp, s, 3) * rc : 0);
    case TG_STEP_COLSUM: return 4 * (rc + s->cols);
    case TG_STEP_GELU_BWD: /* dg in, u in; dg out in place, or du (bf16) out of place */
        return 4 * rc + esz(rp, s, 1) * rc + (s->buf[2] >= 0 ? esz(rp, s, 2) : 4) * rc;
    case TG_STEP_LN_BWD_SUMS:
        if (s->epi == TG_EPI_LNB) { /* the row kernel (gen/fuse.c): dy, x, g, rs, vs, gamma in; g (and g16), dgamma,
                                     * dbeta out; no sums */
            const tg_step *a = &rp->steps[s->fused];
            return 4 * (4 * rc + 2LL * s->rows + 3LL * s->cols) + (a->buf[7] >= 0 ? 2 * rc : 0);
        }
        return 4 * (2 * rc + 4LL * s->rows + 3LL * s->cols);
    case TG_STEP_LN_BWD_APPLY: /* and the bf16 copy of g (slot 7) where the next op's GEMMs read one; fused: the sums
                                * step's */
        return s->fused >= 0 ? 0 : 4 * (4 * rc + 4LL * s->rows + s->cols) + (s->buf[7] >= 0 ? 2 * rc : 0);
    case TG_STEP_ATTN_BWD: { /* qkv and dout in (and their bf16 copies), dqkv out; the GEMMs read Q, K, V, dO twice;
                              * scores and dP written and read (fp32); P written, read three times; dS written */
        long long q = (long long)s->nseq * s->seq * s->heads * s->hdim, e = esz(rp, s, 4);
        long long ss = (long long)s->nseq * s->heads * s->seq * s->seq;
        return 4 * (3 * q + q + 3 * q) + (e == 2 ? 2 * 4 * q : 0) + 2 * e * 4 * q + 16 * ss + 5 * e * ss;
    }
    case TG_STEP_ADAMW: return (4 * 7 + (s->buf[4] >= 0 ? 2 : 0)) * s->count; /* param, grad, m, v in; param, m, v
                                                                                 * (and the bf16 copy) out */
    case TG_STEP_EMBED: return 4 * (2 * rc + s->rows);   /* ids, rows of E in; out */
    case TG_STEP_POS_ADD: return 4 * 3 * rc;               /* x, wpe rows in; x out */
    case TG_STEP_LM_ROWMAX: return 4 * (rc + s->rows);
    case TG_STEP_LM_SUMS: return 4 * (rc + 4LL * s->rows); /* logits, mx, targets in; [2,rows] out */
    case TG_STEP_LM_LOSS: return 4 * 4LL * s->rows;
    case TG_STEP_LM_DLOGITS: return 4 * (2 * rc + 4LL * s->rows);
    case TG_STEP_EMBED_BWD: return 4 * (3 * rc + s->rows); /* ids, g in; dE rows read and written */
    case TG_STEP_POS_BWD: return 4 * (rc + s->count);
    default: return 0;
    }
}

/* The runtime's name of a plan epilogue (runtime/cuda/trc.h: cuBLASLt's bias gradient of its A, our dY) */
static const char *lt_epi(int epi)
{
    switch (epi) {
    case TG_EPI_GELU_BIAS: return "TRC_EPI_GELU_BIAS";
    case TG_EPI_GELU_AUX_BIAS: return "TRC_EPI_GELU_AUX_BIAS";
    case TG_EPI_DGELU: return "TRC_EPI_DGELU";
    default: return "TRC_EPI_BGRADA";
    }
}

/* Does the CUDA code of step s name the buffer in slot? What the stream rule says it uses (the CPU code's rule), but
 * for a bf16 program's fused fc1 and fc2 input gradient (gen/fuse.c): that call writes the GeLU step's outputs, never
 * the fp32 h or dg (the GEMM's C, the GeLU step's slot 0), which nothing else reads; and attention = "cudnn"'s proj
 * input gradient, which writes the bf16 dO its attention backward reads, never the fp32 dO (that step's slot 1). The
 * layernorm steps of a row kernel (gen/fuse.c, TG_EPI_LN) name nothing themselves: their buffers are the call's at
 * the residual step, declared where that call is (first: the printed range's first step, which may be a layer's
 * function before the layernorm's, ln1 after the previous layer's last residual). So do a layernorm backward's apply
 * step and its sums step's row kernel (TG_EPI_LNB), which never names the sums (slot 5 of both). */
static bool cu_uses(const tg_class_plan *cp, const tg_step *s, int slot, int first)
{
    if (s->fused >= 0 && (s->epi == TG_EPI_LNB || (s->epi == TG_EPI_NONE && cp->steps[s->fused].epi == TG_EPI_LNB)))
        return slot != 5 && (s->epi == TG_EPI_LNB || s->fused >= first) && tg_streams_slot_used(s, slot);
    if (s->epi == TG_EPI_NONE && s->fused >= 0 && cp->steps[s->fused].epi == TG_EPI_LN)
        return s->fused >= first && tg_streams_slot_used(s, slot);
    if (s->kind == TG_STEP_GEMM && slot == 2 && tg_fuse_d_bf16(cp, s))
        return false;
    if (s->kind != TG_STEP_GEMM && slot == 0 && s->fused >= 0 && tg_fuse_d_bf16(cp, &cp->steps[s->fused]))
        return false;
    if (s->kind == TG_STEP_ATTN_BWD && slot == 1 && s->fused >= 0) /* its GEMM wrote dO in bf16 (slot 6) */
        return false;
    if (s->kind == TG_STEP_ATTN_DECODE && slot == 5) /* the CPU's scores row: the kernel keeps its own in shared memory */
        return false;
    return tg_streams_slot_used(s, slot);
}

/* The distinct shapes of the class's fused GEMMs (fuse.c), in first-seen order: trc_gemm_lt's table (trc_lt_shapes,
 * prepared once at start-up) and the index a call passes. */

static bool lt_same(const tg_class_plan *rp, const tg_step *a, const tg_step *b)
{
    return a->epi == b->epi && a->m == b->m && a->n == b->n && a->k == b->k && a->lda == b->lda && a->ldb == b->ldb &&
           a->ldc == b->ldc && a->beta == b->beta && esz(rp, a, 0) == esz(rp, b, 0) && a->transa == b->transa &&
           a->transb == b->transb && tg_fuse_d_bf16(rp, a) == tg_fuse_d_bf16(rp, b);
}

/* slot[i]: the table row of fused GEMM step i, else -1; returns the number of rows (-1: out of memory). Rows are
 * few (one per distinct shape), so a linear search per fused GEMM: O(S * rows). */
static int lt_rows(const tg_class_plan *rp, int **slot)
{
    int *sl = malloc((size_t)(rp->nsteps > 0 ? rp->nsteps : 1) * sizeof *sl), n = 0;
    int *first = malloc((size_t)(rp->nsteps > 0 ? rp->nsteps : 1) * sizeof *first); /* step of each row */
    if (!sl || !first) {
        free(sl);
        free(first);
        return -1;
    }
    for (int i = 0; i < rp->nsteps; i++) {
        const tg_step *t = &rp->steps[i];
        sl[i] = -1;
        if (t->kind != TG_STEP_GEMM || t->epi == TG_EPI_NONE || t->epi == TG_EPI_D_BF16) /* cuBLAS, not cuBLASLt */
            continue;
        for (int r = 0; r < n && sl[i] < 0; r++)
            if (lt_same(rp, &rp->steps[first[r]], t))
                sl[i] = r;
        if (sl[i] < 0) {
            first[n] = i;
            sl[i] = n++;
        }
    }
    free(first);
    *slot = sl;
    return n;
}

/* The table itself ("" when the class fuses nothing: its file stays as it was). */
static void print_lt_shapes(tg_sb *o, const tg_class_plan *rp, const int *slot)
{
    int n = 0;
    for (int i = 0; i < rp->nsteps; i++) {
        const tg_step *t = &rp->steps[i];
        if (slot[i] != n)
            continue;
        if (!n)
            tg_sb_puts(o, "/* The shapes of this class's GEMMs with an epilogue (trc_gemm_lt): their cuBLASLt descriptors and "
                          "algorithms are\n * chosen once at start-up; each call names its row. */\n"
                          "extern \"C\" const trc_lt_shape trc_lt_shapes[] = {\n");
        tg_sb_printf(o, "    {%s, %d, %d, %d, %d, %d, %d, %.1ff, %d, %d, %d, %d},\n", lt_epi(t->epi), t->m, t->n, t->k,
                     t->lda, t->ldb, t->ldc, (double)t->beta, esz(rp, t, 0) == 2, tg_fuse_d_bf16(rp, t), t->transa,
                     t->transb);
        n++;
    }
    if (n)
        tg_sb_printf(o, "};\nextern \"C\" const int trc_lt_nshapes = %d;\n\n", n);
}

/* The call of one step, and the kernel instance it needs into inst[512] when not NULL ("" when none); lt: the
 * rows of trc_lt_shapes (lt_rows), NULL when only the instances are wanted. */
static void print_call(tg_sb *o, char *inst, const tg_class_plan *rp, const tg_step *s, const int *lt)
{
    char line[512];
    line[0] = '\0';
    const char *g = tg_emit_group_enum(s->group);
    if (tg_fuse_absorbed(rp, s)) { /* run by the GEMM before it (fuse.c): nothing to call */
        tg_sb_printf(o, "    trc_fused(c, %d, %d);\n", (int)(s - rp->steps), s->fused);
        return;
    }
    switch (s->kind) {
    case TG_STEP_BCAST:
        if (s->boff) /* generation's argmax pairs: one row block's slice of the buffer */
            tg_sb_printf(o, "    trc_bcast%s(c, %s, %d, %s + %d, %lld);\n", bf(rp, s, 0), g, s->root_local,
                         bn(rp, s, 0), s->boff, s->count);
        else
            tg_sb_printf(o, "    trc_bcast%s(c, %s, %d, %s, %lld);\n", bf(rp, s, 0), g, s->root_local, bn(rp, s, 0),
                         s->count);
        break;
    case TG_STEP_ALLREDUCE:
        if (s->maxop == 2) /* generation's (max logit, id) pairs: MPI_MAXLOC through the host (trc_comm.cu) */
            tg_sb_printf(o, "    trc_allreduce_maxloc(c, %s, %s + %d, %lld);\n", g, bn(rp, s, 0), s->boff, s->count);
        else
            tg_sb_printf(o, "    trc_allreduce%s(c, %s, %s, %lld);\n", s->maxop ? "_max" : s->exact ? "_exact" : "", g,
                         bn(rp, s, 0), s->count);
        break;
    case TG_STEP_REDUCE:
        tg_sb_printf(o, "    trc_reduce(c, %s, %d, %s, %lld);\n", g, s->root_local, bn(rp, s, 0), s->count);
        break;
    case TG_STEP_REDUCESCATTER: /* optimizer.shard: slice k of ceil(count / group size) elements on member k */
    case TG_STEP_ALLGATHER:
        tg_sb_printf(o, "    trc_%s%s(c, %s, %s, %lld);\n", s->kind == TG_STEP_ALLGATHER ? "allgather" : "reduce_scatter",
                     bf(rp, s, 0), g, bn(rp, s, 0), s->count);
        break;
    case TG_STEP_COPY: /* generation's weight-stationary layout: a block into its slot, or a slice out of one */
        tg_sb_printf(o, "    trc_copy%s(c, %s + %lld, %s + %d, %lld);\n", bf(rp, s, 0), bn(rp, s, 0), s->soff,
                     bn(rp, s, 1), s->boff, s->count);
        break;
    case TG_STEP_KV_WRITE:
        tg_sb_printf(o, "    trk::kv_write<%d, %d, %d, %d>(S, %s, %s);\n", s->nseq, s->seq, s->cols, s->context,
                     bn(rp, s, 0), bn(rp, s, 1));
        snprintf(line, sizeof line, "template void kv_write<%d, %d, %d, %d>(cudaStream_t, const float *, %s *);\n",
                 s->nseq, s->seq, s->cols, s->context, cty(rp, s, 1));
        break;
    case TG_STEP_ATTN_DECODE:
        tg_sb_printf(o, "    trk::attn_decode<%d, %d, %d, %d>(S, %s, %s, %s, %s, %s);\n", s->nseq, s->heads, s->hdim,
                     s->context, bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4));
        snprintf(line, sizeof line,
                 "template void attn_decode<%d, %d, %d, %d>(cudaStream_t, float *, const float *, %s *, %s *,\n"
                 "                                         const int32_t *);\n",
                 s->nseq, s->heads, s->hdim, s->context, cty(rp, s, 3), cty(rp, s, 3));
        break;
    case TG_STEP_LM_ARGMAX:
        tg_sb_printf(o, "    trk::lm_argmax<%d, %d, %d>(S, %s, %d, %s + %d);\n", s->rows, s->cols, s->nvalid,
                     bn(rp, s, 0), s->vocab0, bn(rp, s, 1), s->boff);
        snprintf(line, sizeof line, "template void lm_argmax<%d, %d, %d>(cudaStream_t, const float *, int, float *);\n",
                 s->rows, s->cols, s->nvalid);
        break;
    case TG_STEP_CAST:
        tg_sb_printf(o, "    trc_cast_bf16(c, %s, %lld, %s);\n", bn(rp, s, 0), s->count, bn(rp, s, 1));
        break;
    case TG_STEP_GRAD_ACC: /* the first micro-batch of a step writes, the later ones add */
        tg_sb_printf(o, "    trc_grad_acc(c, %s, %s, %lld, tr_mb(c) > 0);\n", bn(rp, s, 0), bn(rp, s, 1), s->count);
        break;
    case TG_STEP_GEMM:
        if (s->epi == TG_EPI_D_BF16) {
            /* fuse.c: attention = "cudnn"'s proj input gradient dO = dY @ Wo^T written in bf16 from the fp32
             * accumulator (cublasGemmEx, a bf16 C, beta 0) into the copy the attention backward reads: the plan's fp32
             * dO is not written, and the backward casts nothing */
            tg_sb_printf(o, "    trc_gemm_bf16(c, %d, %d, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d);\n", s->transa,
                         s->transb, s->m, s->n, s->k, bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta,
                         bn(rp, &rp->steps[s->fused], 6), s->ldc);
        } else if (s->epi == TG_EPI_DGELU && tg_fuse_d_bf16(rp, s)) {
            /* fuse.c: bf16 training's fc2 input gradient and GeLU backward, one cuBLASLt call writing du in bf16 from
             * the fp32 accumulator (C is D, beta 0: the plan's fp32 dg is not written), the bf16 u as aux */
            const tg_step *k = &rp->steps[s->fused];
            tg_sb_printf(o, "    trc_gemm_lt_bwd(c, %d, TRC_EPI_DGELU, %d, %d, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d, %s, "
                            "nullptr);\n",
                         lt ? lt[s - rp->steps] : -1, s->transa, s->transb, s->m, s->n, s->k, bn(rp, s, 0), s->lda,
                         bn(rp, s, 1), s->ldb, (double)s->beta, bn(rp, k, 2), s->ldc, bn(rp, k, 1));
        } else if (s->epi == TG_EPI_DGELU || s->epi == TG_EPI_BGRAD) { /* fuse.c: the backward pairs, one cuBLASLt call */
            const tg_step *k = &rp->steps[s->fused];
            int dgelu = s->epi == TG_EPI_DGELU;
            tg_sb_printf(o, "    trc_gemm_lt_bwd(c, %d, %s, %d, %d, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d, %s, %s);\n",
                         lt ? lt[s - rp->steps] : -1, lt_epi(s->epi), s->transa, s->transb, s->m, s->n, s->k,
                         bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta, bn(rp, s, 2), s->ldc,
                         dgelu ? bn(rp, k, 1) : "nullptr", dgelu ? "nullptr" : bn(rp, k, 1));
        } else if (s->epi != TG_EPI_NONE && tg_fuse_d_bf16(rp, s)) {
            /* fuse.c: a bf16 program's GEMM and GeLU step, one cuBLASLt call from the fp32 accumulator: the bf16 bias,
             * D = g (C is D, beta 0: the plan's fp32 h is not written), u as aux when training keeps it */
            const tg_step *k = &rp->steps[s->fused];
            int save = s->epi == TG_EPI_GELU_AUX_BIAS;
            tg_sb_printf(o, "    trc_gemm_lt(c, %d, %s, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d, %s, %s, %s);\n",
                         lt ? lt[s - rp->steps] : -1, save ? "TRC_EPI_GELU_AUX_BIAS" : "TRC_EPI_GELU_BIAS", s->m, s->n,
                         s->k, bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta, bn(rp, k, 2), s->ldc,
                         bn(rp, k, 1), bn(rp, k, 2), save ? bn(rp, k, 3) : "nullptr");
        } else if (s->epi != TG_EPI_NONE) { /* fuse.c: with the GeLU step after it, one cuBLASLt call */
            const tg_step *k = &rp->steps[s->fused];
            int save = s->epi == TG_EPI_GELU_AUX_BIAS;
            /* u into C (aux = C) and g into D, or GeLU in place in C; D fp32 (fp32 programs: cuBLASLt reads the
             * bias in D's type, gen/fuse.h) */
            tg_sb_printf(o, "    trc_gemm_lt(c, %d, %s, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d, %s, %s, %s);\n",
                         lt ? lt[s - rp->steps] : -1, save ? "TRC_EPI_GELU_AUX_BIAS" : "TRC_EPI_GELU_BIAS", s->m, s->n, s->k,
                         bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta, bn(rp, s, 2), s->ldc,
                         bn(rp, k, 1), save ? bn(rp, k, 2) : bn(rp, s, 2), save ? bn(rp, s, 2) : "nullptr");
        } else if (*bf(rp, s, 0)) /* bf16 operands, fp32 result: cublasGemmEx (the plan checks both operands) */
            tg_sb_printf(o, "    trc_gemm_bf16(c, %d, %d, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d);\n", s->transa,
                         s->transb, s->m, s->n, s->k, bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta,
                         bn(rp, s, 2), s->ldc);
        else if (s->transa || s->transb)
            tg_sb_printf(o, "    trc_gemm_ex(c, %d, %d, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d);\n", s->transa,
                         s->transb, s->m, s->n, s->k, bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta,
                         bn(rp, s, 2), s->ldc);
        else
            tg_sb_printf(o, "    trc_gemm(c, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d);\n", s->m, s->n, s->k,
                         bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta, bn(rp, s, 2), s->ldc);
        break;
    case TG_STEP_LN_ROWSUM:
        if (s->epi == TG_EPI_LN) { /* gen/fuse.c: with the layernorm steps after it, one row kernel */
            const tg_step *q = &rp->steps[s->fused - 1], *a = &rp->steps[s->fused];
            tg_sb_printf(o, "    trk::ln_rows<%d, %d, %d>(S, %s, %s, %s, %s, %s, %gf, %s);\n", s->rows, s->cols,
                         a->hidden, bn(rp, s, 0), bn(rp, s, 1), bn(rp, q, 2), bn(rp, a, 3), bn(rp, a, 4), a->eps,
                         bn(rp, a, 5));
            snprintf(line, sizeof line,
                     "template void ln_rows<%d, %d, %d>(cudaStream_t, const float *, float *, float *, const float *,\n"
                     "                                 const float *, float, %s *);\n",
                     s->rows, s->cols, a->hidden, cty(rp, a, 5));
            break;
        }
        tg_sb_printf(o, "    trk::ln_rowsum<%d, %d>(S, %s, %s);\n", s->rows, s->cols, bn(rp, s, 0), bn(rp, s, 1));
        snprintf(line, sizeof line, "template void ln_rowsum<%d, %d>(cudaStream_t, const float *, float *);\n",
                 s->rows, s->cols);
        break;
    case TG_STEP_RESID_ROWSUM:
        if (s->epi == TG_EPI_LN) { /* gen/fuse.c: with the layernorm steps after it, one row kernel */
            const tg_step *q = &rp->steps[s->fused - 1], *a = &rp->steps[s->fused];
            int xo = s->buf[4] >= 0 ? 4 : 0;
            tg_sb_printf(o, "    trk::resid_ln<%d, %d, %d>(S, %s, %s, %s, %s, %s, %s, %s, %s, %gf, %s);\n", s->rows,
                         s->cols, a->hidden, bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, xo), bn(rp, s, 3),
                         bn(rp, q, 2), bn(rp, a, 3), bn(rp, a, 4), a->eps, bn(rp, a, 5));
            snprintf(line, sizeof line,
                     "template void resid_ln<%d, %d, %d>(cudaStream_t, const float *, const float *, const float *, "
                     "float *, float *,\n                                  float *, const float *, const float *, "
                     "float, %s *);\n",
                     s->rows, s->cols, a->hidden, cty(rp, a, 5));
        } else if (s->buf[4] >= 0) {
            tg_sb_printf(o, "    trk::resid_rowsum_to<%d, %d>(S, %s, %s, %s, %s, %s);\n", s->rows, s->cols,
                         bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4));
            snprintf(line, sizeof line,
                     "template void resid_rowsum_to<%d, %d>(cudaStream_t, const float *, const float *, const float "
                     "*, float *,\n                                        float *);\n",
                     s->rows, s->cols);
        } else {
            tg_sb_printf(o, "    trk::resid_rowsum<%d, %d>(S, %s, %s, %s, %s);\n", s->rows, s->cols, bn(rp, s, 0),
                         bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3));
            snprintf(line, sizeof line,
                     "template void resid_rowsum<%d, %d>(cudaStream_t, float *, const float *, const float *, float "
                     "*);\n",
                     s->rows, s->cols);
        }
        break;
    case TG_STEP_LN_SQDEV:
        tg_sb_printf(o, "    trk::ln_sqdev<%d, %d, %d>(S, %s, %s, %s);\n", s->rows, s->cols, s->hidden, bn(rp, s, 0),
                     bn(rp, s, 1), bn(rp, s, 2));
        snprintf(line, sizeof line,
                 "template void ln_sqdev<%d, %d, %d>(cudaStream_t, const float *, const float *, float *);\n",
                 s->rows, s->cols, s->hidden);
        break;
    case TG_STEP_LN_APPLY:
        tg_sb_printf(o, "    trk::ln_apply<%d, %d, %d>(S, %s, %s, %s, %s, %s, %gf, %s);\n", s->rows, s->cols, s->hidden,
                     bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4), s->eps, bn(rp, s, 5));
        snprintf(line, sizeof line,
                 "template void ln_apply<%d, %d, %d>(cudaStream_t, const float *, const float *, const float *,\n"
                 "                                  const float *, const float *, float, %s *);\n",
                 s->rows, s->cols, s->hidden, cty(rp, s, 5));
        break;
    case TG_STEP_BIAS_GELU:
        tg_sb_printf(o, "    trk::bias_gelu<%d, %d>(S, %s, %s);\n", s->rows, s->cols, bn(rp, s, 0), bn(rp, s, 1));
        snprintf(line, sizeof line, "template void bias_gelu<%d, %d>(cudaStream_t, float *, const float *);\n",
                 s->rows, s->cols);
        break;
    case TG_STEP_ATTENTION:
        if (s->cudnn) { /* attention = "cudnn": trc_sdpa.h, no kernel instance */
            tg_sb_printf(o, "    trc_attn_cudnn(c, S, %d, %d, %d, %d, %s, %s, %s, %s, %s, %s);\n", s->nseq, s->seq,
                         s->heads, s->hdim, bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 5), bn(rp, s, 4),
                         bn(rp, s, 6));
            break;
        }
        /* T: the type its GEMMs read, that of the probabilities (slot 4); OUT: the output's */
        tg_sb_printf(o, "    trk::attention<%d, %d, %d, %d, %s, %s>(c, S, %s, %s, %s, %s, %s, %s);\n", s->nseq,
                     s->seq, s->heads, s->hdim, cty(rp, s, 4), cty(rp, s, 2), bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2),
                     bn(rp, s, 3), bn(rp, s, 4), bn(rp, s, 5));
        snprintf(line, sizeof line,
                 "template void attention<%d, %d, %d, %d, %s, %s>(tr_ctx *, cudaStream_t, float *, const float *, %s "
                 "*,\n                                                 float *, %s *, %s *);\n",
                 s->nseq, s->seq, s->heads, s->hdim, cty(rp, s, 4), cty(rp, s, 2), cty(rp, s, 2), cty(rp, s, 4),
                 cty(rp, s, 4));
        break;
    case TG_STEP_GELU_SAVE:
        if (s->buf[3] >= 0) { /* bf16 training: u = bf16(h + bias) into a buffer of its own, h only read */
            tg_sb_printf(o, "    trk::bias_gelu_save<%d, %d>(S, %s, %s, %s, %s);\n", s->rows, s->cols, bn(rp, s, 0),
                         bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3));
            snprintf(line, sizeof line,
                     "template void bias_gelu_save<%d, %d>(cudaStream_t, const float *, const tr_bf16 *, tr_bf16 *, "
                     "tr_bf16 *);\n",
                     s->rows, s->cols);
            break;
        }
        tg_sb_printf(o, "    trk::bias_gelu_save<%d, %d>(S, %s, %s, %s);\n", s->rows, s->cols, bn(rp, s, 0),
                     bn(rp, s, 1), bn(rp, s, 2));
        snprintf(line, sizeof line,
                 "template void bias_gelu_save<%d, %d>(cudaStream_t, float *, const %s *, %s *);\n", s->rows,
                 s->cols, cty(rp, s, 1), cty(rp, s, 2));
        break;
    case TG_STEP_COLSUM:
        tg_sb_printf(o, "    trk::colsum<%d, %d>(S, %s, %s);\n", s->rows, s->cols, bn(rp, s, 0), bn(rp, s, 1));
        snprintf(line, sizeof line, "template void colsum<%d, %d>(cudaStream_t, const %s *, float *);\n", s->rows,
                 s->cols, cty(rp, s, 0));
        break;
    case TG_STEP_GELU_BWD:
        if (s->buf[2] >= 0) { /* bf16 training: du = bf16(dg * GeLU'(u)) into a buffer of its own, dg only read */
            tg_sb_printf(o, "    trk::gelu_bwd<%d, %d>(S, %s, %s, %s);\n", s->rows, s->cols, bn(rp, s, 0), bn(rp, s, 1),
                         bn(rp, s, 2));
            snprintf(line, sizeof line,
                     "template void gelu_bwd<%d, %d>(cudaStream_t, const float *, const tr_bf16 *, tr_bf16 *);\n",
                     s->rows, s->cols);
            break;
        }
        tg_sb_printf(o, "    trk::gelu_bwd<%d, %d>(S, %s, %s);\n", s->rows, s->cols, bn(rp, s, 0), bn(rp, s, 1));
        snprintf(line, sizeof line, "template void gelu_bwd<%d, %d>(cudaStream_t, float *, const %s *);\n",
                 s->rows, s->cols, cty(rp, s, 1));
        break;
    case TG_STEP_LN_BWD_SUMS:
        if (s->epi == TG_EPI_LNB) { /* gen/fuse.c: with the apply step after it, one row kernel (and the columns') */
            const tg_step *a = &rp->steps[s->fused];
            tg_sb_printf(o, "    trk::ln_bwd<%d, %d, %d>(S, %s, %s, %s, %s, %s, %gf, %s, %s, %s, %s);\n", s->rows,
                         s->cols, s->hidden, bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4),
                         s->eps, bn(rp, s, 6), bn(rp, s, 7), bn(rp, a, 6), bn(rp, a, 7));
            snprintf(line, sizeof line,
                     "template void ln_bwd<%d, %d, %d>(cudaStream_t, const float *, const float *, const float *,\n"
                     "                                const float *, const float *, float, float *, float *, float *,\n"
                     "                                tr_bf16 *);\n",
                     s->rows, s->cols, s->hidden);
            break;
        }
        tg_sb_printf(o, "    trk::ln_bwd_sums<%d, %d, %d>(S, %s, %s, %s, %s, %s, %gf, %s, %s, %s);\n", s->rows, s->cols,
                     s->hidden, bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4), s->eps,
                     bn(rp, s, 5), bn(rp, s, 6), bn(rp, s, 7));
        snprintf(line, sizeof line,
                 "template void ln_bwd_sums<%d, %d, %d>(cudaStream_t, const float *, const float *, const float *,\n"
                 "                                     const float *, const float *, float, float *, float *, float "
                 "*);\n",
                 s->rows, s->cols, s->hidden);
        break;
    case TG_STEP_LN_BWD_APPLY: /* bf16: also the copy of g the next op's GEMMs read (slot 7, plan_builder.c) */
        tg_sb_printf(o, "    trk::ln_bwd_apply<%d, %d, %d>(S, %s, %s, %s, %s, %s, %s, %gf, %s, %s);\n", s->rows, s->cols,
                     s->hidden, bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4), bn(rp, s, 5),
                     s->eps, bn(rp, s, 6), bn(rp, s, 7));
        snprintf(line, sizeof line,
                 "template void ln_bwd_apply<%d, %d, %d>(cudaStream_t, const float *, const float *, const float *,\n"
                 "                                      const float *, const float *, const float *, float, float *,\n"
                 "                                      tr_bf16 *);\n",
                 s->rows, s->cols, s->hidden);
        break;
    case TG_STEP_ATTN_BWD:
        if (s->cudnn && s->fused >= 0) {
            /* the forward's bf16 QKV, O and statistics; dO in bf16 as the proj GEMM wrote it (fuse.c: no cast, the
             * fp32 dO not named); the bf16 dQKV out */
            tg_sb_printf(o, "    trc_attn_cudnn_bwd(c, S, %d, %d, %d, %d, %s, %s, %s, %s, %s);\n", s->nseq, s->seq,
                         s->heads, s->hdim, bn(rp, s, 5), bn(rp, s, 8), bn(rp, s, 7), bn(rp, s, 6), bn(rp, s, 4));
            break;
        }
        if (s->cudnn) {
            /* the forward's bf16 QKV, O and statistics; dO in; the bf16 dQKV out (the fp32 dqkv, slot 2, is the
             * CPU program's), and dO's bf16 copy */
            tg_sb_printf(o, "    trc_attn_cudnn_bwd(c, S, %d, %d, %d, %d, %s, %s, %s, %s, %s, %s);\n", s->nseq, s->seq,
                         s->heads, s->hdim, bn(rp, s, 5), bn(rp, s, 8), bn(rp, s, 7), bn(rp, s, 1), bn(rp, s, 4),
                         bn(rp, s, 6));
            break;
        }
        tg_sb_printf(o, "    trk::attention_bwd<%d, %d, %d, %d, %s>(c, S, %s, %s, %s, %s, %s, %s, %s);\n", s->nseq,
                     s->seq, s->heads, s->hdim, cty(rp, s, 4), bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3),
                     bn(rp, s, 4), bn(rp, s, 5), bn(rp, s, 6));
        snprintf(line, sizeof line,
                 "template void attention_bwd<%d, %d, %d, %d, %s>(tr_ctx *, cudaStream_t, const float *, const float "
                 "*,\n                                                float *, float *, %s *, %s *, %s *);\n",
                 s->nseq, s->seq, s->heads, s->hdim, cty(rp, s, 4), cty(rp, s, 4), cty(rp, s, 4), cty(rp, s, 4));
        break;
    case TG_STEP_ADAMW: /* the optimizer's segment is one trc_adamw_multi launch (tg_emit_class_cu) */
        break;
    /* the language model's steps (model.vocab): trk_lm.cuh, defined in trk_lm_kernels.cuh */
    case TG_STEP_EMBED:
        tg_sb_printf(o, "    trk::embed_rows<%d, %d, %d>(S, %s + %d, %d, %s, %s);\n", s->rows, s->cols, s->nvalid,
                     bn(rp, s, 0), s->boff, s->vocab0, bn(rp, s, 1), bn(rp, s, 2));
        snprintf(line, sizeof line,
                 "template void embed_rows<%d, %d, %d>(cudaStream_t, const int32_t *, int, const float *, float *);\n",
                 s->rows, s->cols, s->nvalid);
        break;
    case TG_STEP_POS_ADD:
        if (s->buf[2] >= 0) { /* generation's decode step: each row at its sequence's position */
            tg_sb_printf(o, "    trk::pos_add_at<%d, %d>(S, %s, %s, %s);\n", s->rows, s->cols, bn(rp, s, 0),
                         bn(rp, s, 1), bn(rp, s, 2));
            snprintf(line, sizeof line,
                     "template void pos_add_at<%d, %d>(cudaStream_t, float *, const float *, const int32_t *);\n",
                     s->rows, s->cols);
            break;
        }
        tg_sb_printf(o, "    trk::pos_add<%d, %d, %d>(S, %s, %s);\n", s->rows, s->cols, s->seq, bn(rp, s, 0),
                     bn(rp, s, 1));
        snprintf(line, sizeof line, "template void pos_add<%d, %d, %d>(cudaStream_t, float *, const float *);\n",
                 s->rows, s->cols, s->seq);
        break;
    case TG_STEP_LM_ROWMAX:
        tg_sb_printf(o, "    trk::lm_rowmax<%d, %d, %d>(S, %s, %s);\n", s->rows, s->cols, s->nvalid, bn(rp, s, 0),
                     bn(rp, s, 1));
        snprintf(line, sizeof line, "template void lm_rowmax<%d, %d, %d>(cudaStream_t, const float *, float *);\n",
                 s->rows, s->cols, s->nvalid);
        break;
    case TG_STEP_LM_SUMS:
        tg_sb_printf(o, "    trk::lm_sums<%d, %d, %d>(S, %s, %s, %s, %d, %s);\n", s->rows, s->cols, s->nvalid,
                     bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2), s->vocab0, bn(rp, s, 3));
        snprintf(line, sizeof line,
                 "template void lm_sums<%d, %d, %d>(cudaStream_t, const float *, const float *, const int32_t *, int,\n"
                 "                                  float *);\n",
                 s->rows, s->cols, s->nvalid);
        break;
    case TG_STEP_LM_LOSS:
        tg_sb_printf(o, "    trk::lm_loss<%d>(S, %s, %s, %s);\n", s->rows, bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2));
        snprintf(line, sizeof line, "template void lm_loss<%d>(cudaStream_t, const float *, const float *, float *);\n",
                 s->rows);
        break;
    case TG_STEP_LM_DLOGITS:
        tg_sb_printf(o, "    trk::lm_dlogits<%d, %d, %d>(S, %s, %s, %s, %s, %d, %.9gf, %s);\n", s->rows, s->cols,
                     s->nvalid, bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), s->vocab0, (double)s->scale,
                     bn(rp, s, 4));
        snprintf(line, sizeof line,
                 "template void lm_dlogits<%d, %d, %d>(cudaStream_t, const float *, const float *, const float *,\n"
                 "                                     const int32_t *, int, float, float *);\n",
                 s->rows, s->cols, s->nvalid);
        break;
    case TG_STEP_EMBED_BWD: /* zero_first (a pipeline stage without the tied head): dE's count elements zeroed first */
        tg_sb_printf(o, "    trk::embed_bwd<%d, %d, %d>(S, %s + %d, %s, %d, %s, %lld);\n", s->rows, s->cols, s->nvalid,
                     bn(rp, s, 0), s->boff, bn(rp, s, 1), s->vocab0, bn(rp, s, 2), s->zero_first ? s->count : 0LL);
        snprintf(line, sizeof line,
                 "template void embed_bwd<%d, %d, %d>(cudaStream_t, const int32_t *, const float *, int, float *,\n"
                 "                                    long long);\n",
                 s->rows, s->cols, s->nvalid);
        break;
    case TG_STEP_POS_BWD: {
        int npos = (int)(s->count / (s->cols > 0 ? s->cols : 1));
        tg_sb_printf(o, "    trk::pos_bwd<%d, %d, %d, %d>(S, %s, %s);\n", s->rows, s->cols, s->seq, npos,
                     bn(rp, s, 0), bn(rp, s, 1));
        snprintf(line, sizeof line, "template void pos_bwd<%d, %d, %d, %d>(cudaStream_t, const float *, float *);\n",
                 s->rows, s->cols, s->seq, npos);
        break;
    }
    default:
        break;
    }
    if (inst && line[0])
        snprintf(inst, 512, "%s", line);
}

/* "waits for step W (kind), which writes B": the buffers behind the step's wait, as the plan names them */
static void print_wait_comment(tg_sb *o, const tg_class_plan *rp, const tg_step *s)
{
    if (s->wait < 0)
        return;
    const tg_step *ws = &rp->steps[s->wait];
    const char *mine = rp->bufs[s->buf[s->wait_slot]].name, *theirs = rp->bufs[ws->buf[s->wait_other_slot]].name;
    const char *verb = (ws->acc[s->wait_other_slot] & TG_ACC_W) ? "writes" : "reads";
    if (!strcmp(mine, theirs))
        tg_sb_printf(o, "    /* waits for step %d (%s), which %s %s */\n", s->wait, tg_step_kind_name(ws->kind), verb,
                     mine);
    else
        tg_sb_printf(o, "    /* waits for step %d (%s), which %s %s: %s reuses its arena bytes */\n", s->wait,
                     tg_step_kind_name(ws->kind), verb, theirs, mine);
}

bool tg_emit_class_cu(const tg_plan *pl, const tg_class_plan *rp, tg_sb *out, tg_err *err)
{
    tg_coord co = {rp->i, rp->j, pl->mesh.d == 1 ? 0 : -1};
    int nerr = err->count;
    tg_segment *sg;
    int nseg = tg_segments(rp, &sg);
    if (nseg < 0)
        return tg_fail(err, "out of memory printing the program of class (i=%d, j=%d)", rp->i, rp->j);
    int *lt = NULL;
    if (lt_rows(rp, &lt) < 0) {
        free(sg);
        return tg_fail(err, "out of memory printing the program of class (i=%d, j=%d)", rp->i, rp->j);
    }

    tg_sb params, funcs, info, cost, desc, summary, rows, who;
    tg_sb_init(&params);
    tg_sb_init(&funcs);
    tg_sb_init(&info);
    tg_sb_init(&cost);
    tg_sb_init(&desc);
    tg_sb_init(&summary);
    tg_sb_init(&rows);
    tg_sb_init(&who);

    tg_emit_params(&params, rp);
    if (pl->V > 0)
        tg_sb_puts(&funcs, "/* The language model's kernels (embedding, positions, loss; docs/MODEL.md): declared in "
                           "trk_lm.cuh,\n * defined in kernels.cu (trk_lm_kernels.cuh) at this schedule's shapes. */\n"
                           "#include \"trk_lm.cuh\"\n\n");
    if (pl->spec.mode == TG_GENERATE)
        tg_sb_puts(&funcs, "/* Text generation's kernels (KV cache, decode attention, argmax; docs/GENERATE.md): declared "
                           "in trk_gen.cuh,\n * defined in kernels.cu (trk_gen_kernels.cuh) at this schedule's shapes. "
                           "*/\n#include \"trk_gen.cuh\"\n\n");
    if (pl->spec.attention == TG_ATTN_CUDNN)
        tg_sb_puts(&funcs, "/* attention = \"cudnn\": cuDNN's fused attention (trc_sdpa.h; docs/CUDA.md, \"Fused attention "
                           "through cuDNN\") */\n#include \"trc_sdpa.h\"\n\n");

    static const char *fname[4] = {"forward", "backward", "optimizer", "decode"};
    const char *fwhat[4] = {
        pl->spec.mode == TG_GENERATE ? "the prefill: the forward of the prompts, their K and V into the KV cache, the "
                                       "argmax of every row"
                                     : "the forward of every block",
        "the backward: dL/dy in grad_x -> dL/dx in grad_x, and every weight gradient",
        "one AdamW step on every local shard (step number in the context)",
        "one decode step: a token per sequence at its position through the KV cache, its argmax",
    };
    bool ok = true;
    for (int g = 0; g < nseg && ok; g++) {
        char fn[32];
        tg_segment_name(fn, sizeof fn, &sg[g]);
        if (sg[g].layer >= 0)
            tg_sb_printf(&funcs, "/* ==== layer %d, %s ==== */\n", sg[g].layer, fname[sg[g].phase]);
        else
            tg_sb_printf(&funcs, "/* ==== %s ==== */\n", fname[sg[g].phase]);
        tg_sb_printf(&funcs, "static void %s(struct tr_ctx *c, float *A)\n{\n", fn);
        if (sg[g].phase == TG_PHASE_OPT) { /* one launch over a table of every shard (trc_adamw.cu) */
            int last = sg[g].first; /* the AdamW steps; optimizer.shard: the all-gathers after them */
            while (last < sg[g].last && rp->steps[last + 1].kind == TG_STEP_ADAMW)
                last++;
            ok = tg_emit_adamw_table(&funcs, pl, rp, co, sg[g].first, last, "tensors", err);
            /* the launch is every AdamW step at once: it signals (as step `first`) when an all-gather waits */
            tg_sb_printf(&funcs,
                         "    /* steps %d..%d: AdamW on every local shard (and the bf16 copies), one kernel launch */\n"
                         "    trc_begin(c, %d, TRC_COMPUTE, -1);\n"
                         "    trc_adamw_multi(c, A, tensors, %d);\n"
                         "    trc_end(c, %d, TRC_COMPUTE, %d);\n",
                         sg[g].first, last, sg[g].first, last - sg[g].first + 1, sg[g].first, last < sg[g].last);
            if (last < sg[g].last) /* optimizer.shard: the updated slices to every member of dep */
                ok = ok && tg_emit_buffers(&funcs, pl, rp, co, last + 1, sg[g].last, cu_uses, "device");
            for (int i = last + 1; ok && i <= sg[g].last; i++) {
                const tg_step *s = &rp->steps[i];
                char what[256];
                tg_step_text(what, sizeof what, pl, rp, co, s);
                if (s->kind != TG_STEP_ALLGATHER || s->stream != TG_STREAM_COMM)
                    ok = tg_fail(err, "internal emitter error: class (i=%d, j=%d) step %d after the optimizer's AdamW "
                                      "steps is not an all-gather on the comm stream",
                                 rp->i, rp->j, i);
                /* a wait on any AdamW step is a wait on the one launch */
                int wait = s->wait >= sg[g].first && s->wait <= last ? sg[g].first : s->wait;
                tg_sb_printf(&funcs, "    /* step %d: %s (after the AdamW launch) */\n", i, what);
                tg_sb_printf(&funcs, "    trc_begin(c, %d, TRC_COMM, %d);\n", i, wait);
                print_call(&funcs, NULL, rp, s, lt);
                tg_sb_printf(&funcs, "    trc_end(c, %d, TRC_COMM, %d);\n", i, s->signal);
            }
            tg_sb_puts(&funcs, "}\n\n");
            continue;
        }
        /* a row kernel at the segment's end runs the next segment's first steps too (ln1 after the last residual
         * of the layer before; a layernorm backward's apply step, were it another segment's): their buffers are
         * declared here, where the call names them */
        int ext = sg[g].last;
        for (int i = sg[g].first; i <= sg[g].last; i++)
            if ((rp->steps[i].epi == TG_EPI_LN || rp->steps[i].epi == TG_EPI_LNB) && rp->steps[i].fused > ext)
                ext = rp->steps[i].fused;
        ok = tg_emit_buffers(&funcs, pl, rp, co, sg[g].first, ext, cu_uses, "device");
        tg_sb_puts(&funcs, "\n");
        /* S only where a fused kernel runs */
        int kernels = 0;
        for (int i = sg[g].first; i <= sg[g].last; i++)
            kernels |= rp->steps[i].stream == TG_STREAM_COMPUTE && rp->steps[i].kind != TG_STEP_GEMM &&
                       rp->steps[i].kind != TG_STEP_ADAMW && !tg_fuse_absorbed(rp, &rp->steps[i]);
        if (kernels)
            tg_sb_puts(&funcs, "    cudaStream_t const S = trc_stream(c, TRC_COMPUTE); /* fused kernels; cuBLAS is "
                               "bound to it too */\n\n");
        for (int i = sg[g].first; i <= sg[g].last; i++) {
            const tg_step *s = &rp->steps[i];
            const char *sname = s->stream == TG_STREAM_COMM ? "TRC_COMM" : "TRC_COMPUTE";
            char what[256];
            tg_step_text(what, sizeof what, pl, rp, co, s);
            if (s->layer < 0)
                tg_sb_printf(&funcs, "    /* step %d: %s */\n", i, what);
            else if (s->t >= 0)
                tg_sb_printf(&funcs, "    /* step %d, L%d %s t=%d: %s */\n", i, s->layer, s->op, s->t, what);
            else
                tg_sb_printf(&funcs, "    /* step %d, L%d %s: %s */\n", i, s->layer, s->op, what);
            char fu[96];
            if (*tg_fuse_text(fu, sizeof fu, rp, s))
                tg_sb_printf(&funcs, "    /* %s */\n", fu + strlen("; CUDA: "));
            tg_sb body;
            tg_sb_init(&body);
            print_wait_comment(&body, rp, s);
            tg_sb_printf(&body, "    trc_begin(c, %d, %s, %d);\n", i, sname, s->wait);
            print_call(&body, NULL, rp, s, lt);
            tg_sb_printf(&body, "    trc_end(c, %d, %s, %d);\n", i, sname, s->signal);
            tg_emit_step_body(&funcs, pl, s, &body);
            tg_sb_free(&body);
        }
        tg_sb_puts(&funcs, "}\n\n");
    }
    for (int ph = TG_PHASE_FWD; ph <= TG_PHASE_DEC && ok; ph++) {
        int any = 0;
        for (int g = 0; g < nseg; g++)
            any |= sg[g].phase == (tg_phase)ph;
        if (!any)
            continue;
        tg_sb_printf(&funcs, "/* %s */\nstatic void %s(struct tr_ctx *c, float *A)\n{\n", fwhat[ph], fname[ph]);
        if (ph == TG_PHASE_FWD || ph == TG_PHASE_DEC) /* a decode step is a forward of one token a sequence */
            tg_sb_puts(&funcs, "    trc_forward_begin(c, step_cost);\n");
        else
            tg_sb_puts(&funcs, "    trc_phase_begin(c, step_cost); /* the comm stream waits for what came before */\n");
        for (int g = 0; g < nseg; g++) {
            char fn[32];
            tg_segment_name(fn, sizeof fn, &sg[g]);
            if (sg[g].phase != (tg_phase)ph)
                continue;
            tg_sb_printf(&funcs, "    %s(c, A);\n", fn);
        }
        tg_sb_printf(&funcs, "    %s(c);\n}\n\n",
                     ph == TG_PHASE_FWD || ph == TG_PHASE_DEC ? "trc_forward_end" : "trc_phase_end");
    }
    free(sg);
    tg_emit_lm_desc(&funcs, pl, rp, "extern \"C\" ");
    if (ok && tg_plan_stages(pl) > 1)
        ok = tg_emit_pipe(&funcs, pl, rp, "extern \"C\" ", err);
    if (lt)
        print_lt_shapes(&funcs, rp, lt);
    free(lt);

    for (int i = 0; i < rp->nsteps; i++) {
        const tg_step *s = &rp->steps[i];
        tg_emit_step_info(&info, s);
        tg_sb_printf(&cost, "    {%lld, %d, %d, %d},\n", step_bytes(rp, s), s->kind == TG_STEP_GEMM ? s->m : 0,
                     s->kind == TG_STEP_GEMM ? s->n : 0, s->kind == TG_STEP_GEMM ? s->k : 0);
    }
    tg_sb_printf(&summary, "%d collectives on the comm stream, %d cross-stream waits; %d of %d broadcasts of SUMMA "
                           "steps t >= 1 overlap the GEMM of step t-1",
                 rp->comm_steps, rp->waits, rp->overlapped_bcasts, rp->late_bcasts);

    tg_emit_rank_rows(&rows, pl, rp);
    tg_emit_class_desc(&desc, pl, rp, "nullptr");

    char store[32][64];
    tg_tvar vars[48];
    int n = tg_emit_class_vars(pl, rp, vars, store, &who);
    vars[n++] = (tg_tvar){"OVERLAP", summary.s};
    vars[n++] = (tg_tvar){"PARAMS", params.s};
    vars[n++] = (tg_tvar){"FUNCTIONS", funcs.s};
    vars[n++] = (tg_tvar){"STEP_INFO", info.s};
    vars[n++] = (tg_tvar){"STEP_COST", cost.s};
    vars[n++] = (tg_tvar){"ROWS_TABLE", rows.s};
    vars[n++] = (tg_tvar){"DESC", desc.s};
    if (!ok) {
        if (err->count == nerr) /* else the AdamW table's own error */
            ok = tg_fail(err, "out of memory printing the CUDA program of class (i=%d, j=%d)", rp->i, rp->j);
    } else {
        ok = tg_template_fill(out, "rank.cu.in", vars, n, err);
    }
    tg_sb_free(&params);
    tg_sb_free(&funcs);
    tg_sb_free(&info);
    tg_sb_free(&cost);
    tg_sb_free(&desc);
    tg_sb_free(&summary);
    tg_sb_free(&rows);
    tg_sb_free(&who);
    return ok;
}

/* ---- kernels.cu, kernels.cuh ----------------------------------------------------------------- */

/* The distinct instance lines, in first-seen order, behind a hash of open addressing. */
struct tg_kernels {
    char **line;
    int n, cap;
    int *slot; /* [nslot]: index into line + 1, 0 = empty */
    int nslot;
    bool oom;
};

tg_kernels *tg_kernels_new(void)
{
    tg_kernels *ks = calloc(1, sizeof *ks);
    if (ks) {
        ks->nslot = 256;
        ks->slot = calloc((size_t)ks->nslot, sizeof *ks->slot);
        if (!ks->slot) {
            free(ks);
            ks = NULL;
        }
    }
    return ks;
}

void tg_kernels_free(tg_kernels *ks)
{
    if (!ks)
        return;
    for (int i = 0; i < ks->n; i++)
        free(ks->line[i]);
    free(ks->line);
    free(ks->slot);
    free(ks);
}

static unsigned long long fnv(const char *s)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

static void kernels_put(tg_kernels *ks, const char *line)
{
    unsigned long long h = fnv(line);
    int at = (int)(h % (unsigned)ks->nslot);
    while (ks->slot[at]) {
        if (!strcmp(ks->line[ks->slot[at] - 1], line))
            return;
        at = (at + 1) % ks->nslot;
    }
    if (2 * (ks->n + 1) > ks->nslot || ks->n == ks->cap) { /* grow, then insert again */
        int cap = ks->cap ? 2 * ks->cap : 32, nslot = 4 * cap;
        char **nl = realloc(ks->line, (size_t)cap * sizeof *nl);
        int *ns = calloc((size_t)nslot, sizeof *ns);
        if (!nl || !ns) {
            if (nl)
                ks->line = nl;
            free(ns);
            ks->oom = true;
            return;
        }
        ks->line = nl;
        ks->cap = cap;
        free(ks->slot);
        ks->slot = ns;
        ks->nslot = nslot;
        for (int i = 0; i < ks->n; i++) {
            int a = (int)(fnv(ks->line[i]) % (unsigned)nslot);
            while (ns[a])
                a = (a + 1) % nslot;
            ns[a] = i + 1;
        }
        kernels_put(ks, line);
        return;
    }
    char *copy = strdup(line);
    if (!copy) {
        ks->oom = true;
        return;
    }
    ks->line[ks->n++] = copy;
    ks->slot[at] = ks->n;
}

bool tg_kernels_add(tg_kernels *ks, const tg_class_plan *cp)
{
    tg_sb sink;
    tg_sb_init(&sink);
    char line[512];
    for (int i = 0; i < cp->nsteps && !ks->oom; i++) {
        line[0] = '\0';
        sink.len = 0;
        print_call(&sink, line, cp, &cp->steps[i], NULL);
        if (line[0])
            kernels_put(ks, line);
    }
    tg_sb_free(&sink);
    return !ks->oom;
}

/* Is this instance line one of the attention family's (kernels_attention.cu.in)? */
static bool attn_instance(const char *line)
{
    const char *p = line + strlen("template void ");
    return !strncmp(p, "attention<", 10) || !strncmp(p, "attention_bwd<", 14);
}

/* Is this instance line one of the language model's kernels (trk_lm.cuh)? */
static bool lm_instance(const char *line)
{
    static const char *const names[] = {"embed_rows<", "pos_add<", "lm_rowmax<", "lm_sums<",
                                        "lm_loss<",    "lm_dlogits<", "embed_bwd<", "pos_bwd<"};
    const char *p = line + strlen("template void ");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(p, names[i], strlen(names[i])))
            return true;
    return false;
}

/* Is this instance line one of text generation's kernels (trk_gen.cuh)? */
static bool gen_instance(const char *line)
{
    static const char *const names[] = {"pos_add_at<", "kv_write<", "attn_decode<", "lm_argmax<"};
    const char *p = line + strlen("template void ");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(p, names[i], strlen(names[i])))
            return true;
    return false;
}

/* Is this instance line one of the column-sum family's (kernels_colsum.cu.in)? */
static bool colsum_instance(const char *line)
{
    return !strncmp(line + strlen("template void "), "colsum<", 7);
}

/* Is this instance line one of the row kernels' (kernels_rows.cu.in: layernorm forward, residual adds)? The
 * element-wise family (kernels_gelu.cu.in) takes the block kernels that no family names. */
static bool rows_instance(const char *line)
{
    static const char *const names[] = {"ln_rowsum<", "resid_rowsum<", "ln_sqdev<", "ln_apply<", "resid_rowsum_to<",
                                        "resid_ln<", "ln_rows<"};
    const char *p = line + strlen("template void ");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(p, names[i], strlen(names[i])))
            return true;
    return false;
}

/* Is this instance line one of layernorm backward's (kernels_layernorm.cu.in)? */
static bool lnbwd_instance(const char *line)
{
    const char *p = line + strlen("template void ");
    return !strncmp(p, "ln_bwd_sums<", 12) || !strncmp(p, "ln_bwd_apply<", 13) || !strncmp(p, "ln_bwd<", 7);
}

/* kernels.cu: the file's head (kernels.cu.in), then each kernel family's template with its own instances: the
 * row kernels and the element-wise kernels (always), the column sums and layernorm backward (the latter uses the
 * former; each only where the schedule calls it), attention; for a language model a section after it that
 * includes the LM kernels (runtime/cuda/trk_lm_kernels.cuh) and instantiates them. */
bool tg_emit_kernels_cu(const tg_plan *pl, const tg_kernels *ks, tg_sb *out, tg_err *err)
{
    tg_sb inst, rows, attn, lm, cs, ln, gen;
    tg_sb_init(&gen);
    tg_sb_init(&inst);
    tg_sb_init(&rows);
    tg_sb_init(&attn);
    tg_sb_init(&lm);
    tg_sb_init(&cs);
    tg_sb_init(&ln);
    for (int i = 0; i < ks->n; i++) {
        const char *l = ks->line[i];
        tg_sb_puts(gen_instance(l)      ? &gen
                   : lm_instance(l)     ? &lm
                   : attn_instance(l)   ? &attn
                   : colsum_instance(l) ? &cs
                   : lnbwd_instance(l)  ? &ln
                   : rows_instance(l)   ? &rows
                                        : &inst,
                   l);
    }
    char store[8][64];
    tg_tvar vars[12];
    int n = tg_emit_common_vars(pl, vars, store);
    vars[n++] = (tg_tvar){"INSTANCES", rows.s ? rows.s : ""};
    /* the file's head, then the row kernels and the element-wise kernels (every block stack calls both) */
    bool ok = tg_template_fill(out, "kernels.cu.in", vars, n, err);
    ok = ok && tg_template_fill(out, "kernels_rows.cu.in", vars, n, err);
    vars[n - 1] = (tg_tvar){"INSTANCES", inst.s ? inst.s : ""};
    ok = ok && tg_template_fill(out, "kernels_gelu.cu.in", vars, n, err);
    /* a family only where the schedule calls it (an inference program has neither: their helpers would be
     * unreferenced, which nvcc -Werror refuses); layernorm backward uses the column sums */
    vars[n - 1] = (tg_tvar){"INSTANCES", cs.s ? cs.s : ""};
    if (cs.len || ln.len)
        ok = ok && tg_template_fill(out, "kernels_colsum.cu.in", vars, n, err);
    vars[n - 1] = (tg_tvar){"INSTANCES", ln.s ? ln.s : ""};
    if (ln.len)
        ok = ok && tg_template_fill(out, "kernels_layernorm.cu.in", vars, n, err);
    /* the attention family after them, with its own instances (a block stack has some, unless attention =
     * "cudnn" computes its attention: runtime/cuda/trc_attn_cudnn.cu) */
    vars[n - 1] = (tg_tvar){"INSTANCES", attn.s ? attn.s : ""};
    if (attn.len)
        ok = ok && tg_template_fill(out, "kernels_attention.cu.in", vars, n, err);
    if (ok && pl->V > 0) {
        tg_sb_puts(out, "\n/* ---- the language model (model.vocab, docs/MODEL.md): token and position embedding, the "
                        "loss, and\n * their backward; kernels and design in runtime/cuda/trk_lm_kernels.cuh ---- */\n"
                        "#include \"trk_lm_kernels.cuh\"\n\n"
                        "namespace trk {\n"
                        "/* the LM kernels at the shapes of this model's schedule */\n");
        tg_sb_puts(out, lm.s ? lm.s : "");
        tg_sb_puts(out, "} // namespace trk\n");
    }
    if (ok && pl->spec.mode == TG_GENERATE) {
        tg_sb_puts(out, "\n/* ---- text generation (mode = \"generate\", docs/GENERATE.md): the KV cache, the decode step's "
                        "attention\n * and position add, the argmax; kernels and design in "
                        "runtime/cuda/trk_gen_kernels.cuh ---- */\n"
                        "#include \"trk_gen_kernels.cuh\"\n\n"
                        "namespace trk {\n"
                        "/* the generation kernels at the shapes of this model's schedule */\n");
        tg_sb_puts(out, gen.s ? gen.s : "");
        tg_sb_puts(out, "} // namespace trk\n");
    }
    tg_sb_free(&gen);
    tg_sb_free(&inst);
    tg_sb_free(&rows);
    tg_sb_free(&attn);
    tg_sb_free(&lm);
    tg_sb_free(&cs);
    tg_sb_free(&ln);
    return ok;
}

bool tg_emit_kernels_cuh(const tg_plan *pl, tg_sb *out, tg_err *err)
{
    char store[8][64];
    tg_tvar vars[8];
    int n = tg_emit_common_vars(pl, vars, store);
    return tg_template_fill(out, "kernels.cuh.in", vars, n, err);
}

/* ---- which backends ----------------------------------------------------------------------- */

static bool is_exe(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* a path build.ninja can hold without quoting */
static bool printable_path(const char *p)
{
    for (; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("/._+-", *p))
            return false;
    return true;
}

/* nvcc for build.ninja: TESS_NVCC, else "nvcc" when it is on PATH, else the first of
 * $CUDA_HOME/bin/nvcc, $CUDA_PATH/bin/nvcc, /usr/local/cuda/bin/nvcc. */
static bool find_nvcc(char *out, size_t cap)
{
    const char *env = getenv("TESS_NVCC");
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return true;
    }
    const char *path = getenv("PATH");
    if (path) {
        const char *p = path;
        while (*p) {
            const char *e = strchr(p, ':');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            char cand[4200];
            if (len > 0 && len < 4000) {
                snprintf(cand, sizeof cand, "%.*s/nvcc", (int)len, p);
                if (is_exe(cand)) {
                    snprintf(out, cap, "nvcc");
                    return true;
                }
            }
            p += len;
            if (*p == ':')
                p++;
        }
    }
    const char *homes[3] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    for (int i = 0; i < 3; i++) {
        if (!homes[i] || !*homes[i] || strlen(homes[i]) > 900)
            continue;
        char cand[1100];
        snprintf(cand, sizeof cand, "%s/bin/nvcc", homes[i]);
        if (is_exe(cand)) {
            snprintf(out, cap, "%.1000s", cand);
            return true;
        }
    }
    snprintf(out, cap, "nvcc");
    return false;
}

/* The directory that holds cuda_runtime.h: TESS_CUDA_INCLUDE, else include/ beside the real nvcc (PATH
 * resolved, symlinks followed: /usr/bin/nvcc -> /usr/lib/nvidia-cuda-toolkit/bin/nvcc is not a CUDA home).
 * The class programs rank_iI_jJ.cu hold host code only (their kernels are in kernels.cu), so the host
 * compiler builds them directly, 25-35% faster than through nvcc's host pass plus one empty device pass per
 * target. "" when no such directory is found: build.ninja then compiles them with nvcc like the rest. */
static void find_cuda_include(const char *nvcc, char *out, size_t cap)
{
    out[0] = '\0';
    const char *env = getenv("TESS_CUDA_INCLUDE");
    char cand[PATH_MAX + 64];
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return;
    }
    char path[PATH_MAX] = "";
    if (strchr(nvcc, '/')) {
        if (!realpath(nvcc, path))
            return;
    } else {
        const char *p = getenv("PATH");
        while (p && *p && !path[0]) {
            const char *e = strchr(p, ':');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len > 0 && len < 3900) {
                snprintf(cand, sizeof cand, "%.*s/%s", (int)len, p, nvcc);
                if (is_exe(cand) && !realpath(cand, path))
                    path[0] = '\0';
            }
            p += len;
            if (*p == ':')
                p++;
        }
    }
    char *slash = strrchr(path, '/');
    if (!slash)
        return;
    *slash = '\0'; /* .../bin */
    for (const char *rel = "/../include", *alt = "/../targets/x86_64-linux/include"; rel; rel = alt, alt = NULL) {
        snprintf(cand, sizeof cand, "%s%s/cuda_runtime.h", path, rel);
        char real[PATH_MAX];
        if (is_file(cand) && realpath(cand, real) && strlen(real) < cap) {
            *strrchr(real, '/') = '\0';
            snprintf(out, cap, "%s", real);
            return;
        }
    }
}

/* "80,90" / "sm_80 sm_90" / "80;90a" -> -gencode flags, plus PTX of the last for newer GPUs. */
static bool parse_arch(const char *src, tg_cuda_opts *cu, tg_err *err)
{
    char list[16][8];
    int n = 0;
    const char *p = src;
    while (*p) {
        while (*p == ',' || *p == ';' || *p == ' ')
            p++;
        if (!*p)
            break;
        if (!strncmp(p, "sm_", 3))
            p += 3;
        else if (!strncmp(p, "compute_", 8))
            p += 8;
        char tok[8];
        int len = 0;
        while (isdigit((unsigned char)*p) && len < 4)
            tok[len++] = *p++;
        if (*p == 'a' && len > 0)
            tok[len++] = *p++;
        tok[len] = '\0';
        if (len < 2 || len > 4 || (*p && *p != ',' && *p != ';' && *p != ' ') || n == 16)
            return tg_fail(err, "TESS_CUDA_ARCH=%s is not a list of compute capabilities: use e.g. "
                                "TESS_CUDA_ARCH=80,90 (sm_80 and sm_90; 86 for an RTX 30xx, 89 for an L4)",
                           src);
        snprintf(list[n++], sizeof list[0], "%s", tok);
    }
    if (n == 0)
        return tg_fail(err, "TESS_CUDA_ARCH is empty: use e.g. TESS_CUDA_ARCH=80,90");
    cu->gencode[0] = cu->archs[0] = '\0';
    size_t g = 0, a = 0;
    for (int i = 0; i < n; i++) {
        g += (size_t)snprintf(cu->gencode + g, sizeof cu->gencode - g, "%s-gencode=arch=compute_%s,code=sm_%s",
                              i ? " " : "", list[i], list[i]);
        a += (size_t)snprintf(cu->archs + a, sizeof cu->archs - a, "%ssm_%s", i ? " " : "", list[i]);
    }
    snprintf(cu->gencode + g, sizeof cu->gencode - g, " -gencode=arch=compute_%s,code=compute_%s", list[n - 1],
             list[n - 1]);
    return true;
}

/* backends from "cpu,cuda" (TESS_BACKENDS) into TG_BACKEND_* bits; 0 on a bad list */
static unsigned parse_backends(const char *s)
{
    unsigned bits = 0;
    const char *p = s;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        if (!*p)
            break;
        if (!strncmp(p, "cpu", 3) && (!p[3] || p[3] == ',' || p[3] == ' ')) {
            bits |= TG_BACKEND_CPU;
            p += 3;
        } else if (!strncmp(p, "cuda", 4) && (!p[4] || p[4] == ',' || p[4] == ' ')) {
            bits |= TG_BACKEND_CUDA;
            p += 4;
        } else {
            return 0;
        }
    }
    return bits;
}

bool tg_cuda_select(const tg_plan *pl, const char *unsupported, tg_cuda_opts *cu, char *note, size_t cap,
                    tg_err *err)
{
    memset(cu, 0, sizeof *cu);
    unsigned bits = pl->spec.backends;
    const char *source = "the spec";
    const char *env = getenv("TESS_BACKENDS");
    if (!bits && env && *env) {
        bits = parse_backends(env);
        if (!(bits & TG_BACKEND_CPU))
            return tg_fail(err, "TESS_BACKENDS=%s is not a backend list that includes cpu: use TESS_BACKENDS=cpu or "
                                "TESS_BACKENDS=cpu,cuda (the CPU program is always emitted)",
                           env);
        source = "TESS_BACKENDS";
    }
    bool have_nvcc = find_nvcc(cu->nvcc, sizeof cu->nvcc);
    if (!printable_path(cu->nvcc))
        return tg_fail(err, "the nvcc path %s is printed into build.ninja: use one of letters, digits and "
                            "/._+- (set TESS_NVCC, or put nvcc on PATH)",
                       cu->nvcc);
    find_cuda_include(cu->nvcc, cu->include, sizeof cu->include);
    if (!printable_path(cu->include))
        return tg_fail(err, "the CUDA include directory %s is printed into build.ninja: use one of letters, "
                            "digits and /._+- (set TESS_CUDA_INCLUDE to a path without them)",
                       cu->include);
    const char *arch = getenv("TESS_CUDA_ARCH");
    if (!parse_arch(arch && *arch ? arch : "80,90", cu, err))
        return false;
    bool want, explicit_choice = bits != 0;
    if (explicit_choice) {
        want = (bits & TG_BACKEND_CUDA) != 0;
        if (!want)
            snprintf(cu->why, sizeof cu->why, "%s selects backends = { \"cpu\" }", source);
    } else {
        want = have_nvcc;
        if (!want)
            snprintf(cu->why, sizeof cu->why, "nvcc not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin");
    }
    if (want && unsupported) {
        if (explicit_choice)
            return tg_fail(err, "%s: backends includes \"cuda\" (from %s), but %s; use backends = { \"cpu\" }",
                           pl->spec.path, source, unsupported);
        snprintf(cu->why, sizeof cu->why, "%.400s", unsupported);
        want = false;
    }
    cu->enabled = want;
    if (want)
        snprintf(note, cap, "backends: cpu, cuda (%s; build.ninja uses %s%s for %s)",
                 explicit_choice ? source : "nvcc found", cu->nvcc, have_nvcc ? "" : ", not found here", cu->archs);
    else
        snprintf(note, cap, "backends: cpu (cuda not emitted: %s%s)", cu->why,
                 explicit_choice || have_nvcc ? "" : "; backends = { \"cpu\", \"cuda\" } in the spec emits it anyway");
    return true;
}
