/*
 * emit_rank_c.c - prints the program of one rank class (rank_iI_jJ.c) and the
 * model descriptor (model.c) for the CPU backend. Each step becomes a comment
 * naming layer, op, SUMMA step and the block it moves, then one runtime call
 * with literal arguments; the steps of one phase and layer make one function.
 * Buffers become named pointers at literal arena offsets. The file serves every
 * rank (i, j, k) of the class: the code is the same for each k, and the
 * comments say what k changes (h = i + q*k, the global ranks of roots).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

static const char *bn(const tg_class_plan *rp, const tg_step *s, int slot)
{
    return s->buf[slot] >= 0 ? rp->bufs[s->buf[slot]].name : "NULL";
}

/* "_bf16" when the buffer in slot is bf16: the runtime function of that output or payload type (docs/BF16.md) */
static const char *bf(const tg_class_plan *rp, const tg_step *s, int slot)
{
    return s->buf[slot] >= 0 && rp->bufs[s->buf[slot]].dtype == TG_BUF_BF16 ? "_bf16" : "";
}

/* Does the CPU call of step s name the buffer in slot? Attention's scratch beyond slot 3 (the CUDA backend's
 * probabilities and bf16 copies, plan_steps.c) is not declared here. */
static bool cpu_uses(const tg_class_plan *cp, const tg_step *s, int slot, int first)
{
    (void)cp, (void)first;
    if (s->cudnn && s->kind == TG_STEP_ATTN_BWD && (slot == 4 || slot == 5))
        return true; /* the bf16 copy of dqkv the QKV GEMMs read (cuDNN's output on the GPU); the kept bf16 QKV */
    if (s->cudnn && s->kind == TG_STEP_ATTENTION && slot == 5 && s->buf[6] >= 0)
        return true; /* training: the bf16 QKV kept for the backward, which reads it (plan_steps.c) */
    return s->buf[slot] >= 0 && !((s->kind == TG_STEP_ATTENTION || s->kind == TG_STEP_ATTN_BWD) && slot >= 4);
}

static void print_step_body(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, tg_coord co, const tg_step *s,
                            int id)
{
    char what[256];
    tg_step_text(what, sizeof what, pl, rp, co, s);
    if (s->layer < 0)
        tg_sb_printf(o, "    TR_STEP(c, %d); /* %s */\n", id, what);
    else if (s->t >= 0)
        tg_sb_printf(o, "    TR_STEP(c, %d); /* L%d %s t=%d: %s */\n", id, s->layer, s->op, s->t, what);
    else
        tg_sb_printf(o, "    TR_STEP(c, %d); /* L%d %s: %s */\n", id, s->layer, s->op, what);
    switch (s->kind) {
    case TG_STEP_BCAST:
        if (s->boff) /* generation's argmax pairs: one row block's slice of the buffer */
            tg_sb_printf(o, "    tr_bcast%s(c, %s, %d, %s + %d, %lld);\n", bf(rp, s, 0), tg_emit_group_enum(s->group),
                         s->root_local, bn(rp, s, 0), s->boff, s->count);
        else
            tg_sb_printf(o, "    tr_bcast%s(c, %s, %d, %s, %lld);\n", bf(rp, s, 0), tg_emit_group_enum(s->group),
                         s->root_local, bn(rp, s, 0), s->count);
        break;
    case TG_STEP_ALLREDUCE:
        if (s->maxop == 2) /* generation's (max logit, id) pairs: MPI_MAXLOC */
            tg_sb_printf(o, "    tr_allreduce_maxloc(c, %s, %s + %d, %lld);\n", tg_emit_group_enum(s->group),
                         bn(rp, s, 0), s->boff, s->count);
        else
            tg_sb_printf(o, "    tr_allreduce%s(c, %s, %s, %lld);\n", s->maxop ? "_max" : s->exact ? "_exact" : "",
                         tg_emit_group_enum(s->group), bn(rp, s, 0), s->count);
        break;
    case TG_STEP_KV_WRITE:
        tg_sb_printf(o, "    tr_kv_write%s(c, %s, %d, %d, %d, %d, %s);\n", bf(rp, s, 1), bn(rp, s, 0), s->nseq, s->seq,
                     s->cols, s->context, bn(rp, s, 1));
        break;
    case TG_STEP_ATTN_DECODE:
        tg_sb_printf(o, "    tr_attn_decode%s(c, %s, %s, %s, %s, %s, %s, %d, %d, %d, %d);\n", bf(rp, s, 3), bn(rp, s, 0),
                     bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4), bn(rp, s, 5), s->nseq, s->heads, s->hdim,
                     s->context);
        break;
    case TG_STEP_LM_ARGMAX:
        tg_sb_printf(o, "    tr_lm_argmax(c, %s, %d, %d, %d, %d, %s + %d);\n", bn(rp, s, 0), s->rows, s->cols,
                     s->nvalid, s->vocab0, bn(rp, s, 1), s->boff);
        break;
    case TG_STEP_COPY:
        tg_sb_printf(o, "    tr_copy%s(c, %s + %lld, %s + %d, %lld);\n", bf(rp, s, 0), bn(rp, s, 0), s->soff, bn(rp, s, 1),
                     s->boff, s->count);
        break;
    case TG_STEP_REDUCESCATTER:
    case TG_STEP_ALLGATHER: /* optimizer.shard, and the weight-stationary layout: slice k of ceil(count / group size)
                             * elements on member k */
        tg_sb_printf(o, "    tr_%s%s(c, %s, %s, %lld);\n", s->kind == TG_STEP_ALLGATHER ? "allgather" : "reduce_scatter",
                     bf(rp, s, 0), tg_emit_group_enum(s->group), bn(rp, s, 0), s->count);
        break;
    case TG_STEP_EMBED:
        tg_sb_printf(o, "    tr_embed_rows(c, %s + %d, %s, %d, %d, %d, %d, %s);\n", bn(rp, s, 0), s->boff, bn(rp, s, 1),
                     s->vocab0, s->nvalid, s->rows, s->cols, bn(rp, s, 2));
        break;
    case TG_STEP_POS_ADD:
        if (s->buf[2] >= 0) /* generation's decode step: each row at its sequence's position */
            tg_sb_printf(o, "    tr_pos_add_at(c, %s, %s, %s, %d, %d);\n", bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2),
                         s->rows, s->cols);
        else
            tg_sb_printf(o, "    tr_pos_add(c, %s, %s, %d, %d, %d);\n", bn(rp, s, 0), bn(rp, s, 1), s->rows, s->cols,
                         s->seq);
        break;
    case TG_STEP_LM_ROWMAX:
        tg_sb_printf(o, "    tr_lm_rowmax(c, %s, %d, %d, %d, %s);\n", bn(rp, s, 0), s->rows, s->cols, s->nvalid,
                     bn(rp, s, 1));
        break;
    case TG_STEP_LM_SUMS:
        tg_sb_printf(o, "    tr_lm_sums(c, %s, %s, %s, %d, %d, %d, %d, %s);\n", bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2),
                     s->vocab0, s->rows, s->cols, s->nvalid, bn(rp, s, 3));
        break;
    case TG_STEP_LM_LOSS:
        tg_sb_printf(o, "    tr_lm_loss(c, %s, %s, %d, %s);\n", bn(rp, s, 0), bn(rp, s, 1), s->rows, bn(rp, s, 2));
        break;
    case TG_STEP_LM_DLOGITS:
        tg_sb_printf(o, "    tr_lm_dlogits(c, %s, %s, %s, %s, %d, %d, %d, %d, %.9gf, %s);\n", bn(rp, s, 0), bn(rp, s, 1),
                     bn(rp, s, 2), bn(rp, s, 3), s->vocab0, s->rows, s->cols, s->nvalid, (double)s->scale,
                     bn(rp, s, 4));
        break;
    case TG_STEP_EMBED_BWD:
        if (s->zero_first) /* a pipeline stage without the tied head: this micro-batch's dE starts from zero */
            tg_sb_printf(o, "    tr_zero(c, %s, %lld);\n", bn(rp, s, 2), s->count);
        tg_sb_printf(o, "    tr_embed_rows_bwd(c, %s + %d, %s, %d, %d, %d, %d, %s);\n", bn(rp, s, 0), s->boff,
                     bn(rp, s, 1), s->vocab0, s->nvalid, s->rows, s->cols, bn(rp, s, 2));
        break;
    case TG_STEP_POS_BWD:
        tg_sb_printf(o, "    tr_pos_bwd(c, %s, %d, %d, %d, %lld, %s);\n", bn(rp, s, 0), s->rows, s->cols, s->seq,
                     s->count / (s->cols > 0 ? s->cols : 1), bn(rp, s, 1));
        break;
    case TG_STEP_REDUCE:
        tg_sb_printf(o, "    tr_reduce(c, %s, %d, %s, %lld);\n", tg_emit_group_enum(s->group), s->root_local, bn(rp, s, 0),
                     s->count);
        break;
    case TG_STEP_GEMM:
        if (*bf(rp, s, 0)) /* bf16 operands, fp32 result (the plan checks both operands) */
            tg_sb_printf(o, "    tr_gemm_bf16(c, %d, %d, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d);\n", s->transa,
                         s->transb, s->m, s->n, s->k, bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta,
                         bn(rp, s, 2), s->ldc);
        else if (s->transa || s->transb)
            tg_sb_printf(o, "    tr_gemm_ex(c, %d, %d, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d);\n", s->transa,
                         s->transb, s->m, s->n, s->k, bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta,
                         bn(rp, s, 2), s->ldc);
        else
            tg_sb_printf(o, "    tr_gemm(c, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d);\n", s->m, s->n, s->k,
                         bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta, bn(rp, s, 2), s->ldc);
        break;
    case TG_STEP_GELU_SAVE:
        if (s->buf[3] >= 0) /* bf16 training: u kept in a bf16 buffer of its own, h only read (docs/BF16.md) */
            tg_sb_printf(o, "    tr_bias_gelu_keep_bf16(c, %s, %s, %s, %s, %d, %d);\n", bn(rp, s, 0), bn(rp, s, 1),
                         bn(rp, s, 2), bn(rp, s, 3), s->rows, s->cols);
        else
            tg_sb_printf(o, "    tr_bias_gelu_save%s(c, %s, %s, %s, %d, %d);\n", bf(rp, s, 2), bn(rp, s, 0),
                         bn(rp, s, 1), bn(rp, s, 2), s->rows, s->cols);
        break;
    case TG_STEP_COLSUM:
        tg_sb_printf(o, "    tr_colsum%s(c, %s, %d, %d, %s);\n", bf(rp, s, 0), bn(rp, s, 0), s->rows, s->cols,
                     bn(rp, s, 1));
        break;
    case TG_STEP_GELU_BWD:
        if (s->buf[2] >= 0) /* bf16 training: du = bf16(dg * GeLU'(u)) into a buffer of its own (docs/BF16.md) */
            tg_sb_printf(o, "    tr_gelu_bwd_bf16(c, %s, %s, %s, %d, %d);\n", bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2),
                         s->rows, s->cols);
        else
            tg_sb_printf(o, "    tr_gelu_bwd(c, %s, %s, %d, %d);\n", bn(rp, s, 0), bn(rp, s, 1), s->rows, s->cols);
        break;
    case TG_STEP_LN_BWD_SUMS:
        tg_sb_printf(o, "    tr_ln_bwd_sums(c, %s, %s, %s, %s, %s, %d, %d, %d, %gf, %s, %s, %s);\n", bn(rp, s, 0),
                     bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4), s->rows, s->cols, s->hidden, s->eps,
                     bn(rp, s, 5), bn(rp, s, 6), bn(rp, s, 7));
        break;
    case TG_STEP_LN_BWD_APPLY:
        tg_sb_printf(o, "    tr_ln_bwd_apply(c, %s, %s, %s, %s, %s, %s, %d, %d, %d, %gf, %s);\n", bn(rp, s, 0),
                     bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4), bn(rp, s, 5), s->rows, s->cols,
                     s->hidden, s->eps, bn(rp, s, 6));
        if (s->buf[7] >= 0) /* bf16: the copy of g the next op's GEMMs read (plan_builder.c), from the same values */
            tg_sb_printf(o, "    tr_cast_bf16(c, %s, %lld, %s);\n", bn(rp, s, 6), rp->bufs[s->buf[7]].elems,
                         bn(rp, s, 7));
        break;
    case TG_STEP_ATTN_BWD:
        /* its two [seq, seq] scratch side by side in slot 3 (plan_steps.c; slot 4 is the CUDA backend's);
         * attention = "cudnn": Q, K, V from the bf16 copy the forward kept (slot 5) */
        tg_sb_printf(o, "    tr_attention_bwd%s(c, %s, %s, %s, %s, %s + %lld, %d, %d, %d, %d);\n",
                     s->cudnn ? "_bf16q" : bf(rp, s, 4), bn(rp, s, s->cudnn ? 5 : 0), bn(rp, s, 1), bn(rp, s, 2),
                     bn(rp, s, 3), bn(rp, s, 3), (long long)s->seq * s->seq, s->nseq, s->seq, s->heads, s->hdim);
        if (s->cudnn) /* attention = "cudnn": the QKV GEMMs read slot 4, the bf16 copy of dqkv (plan_steps.c) */
            tg_sb_printf(o, "    tr_cast_bf16(c, %s, %lld, %s);\n", bn(rp, s, 2), 3LL * s->rows * s->cols, bn(rp, s, 4));
        break;
    case TG_STEP_ADAMW: /* the optimizer's segment is one tr_adamw_multi call (print_functions) */
        break;
    case TG_STEP_LN_ROWSUM:
        tg_sb_printf(o, "    tr_ln_rowsum(c, %s, %d, %d, %s);\n", bn(rp, s, 0), s->rows, s->cols, bn(rp, s, 1));
        break;
    case TG_STEP_RESID_ROWSUM:
        if (s->buf[4] >= 0)
            tg_sb_printf(o, "    tr_resid_rowsum_to(c, %s, %s, %s, %d, %d, %s, %s);\n", bn(rp, s, 0), bn(rp, s, 1),
                         bn(rp, s, 2), s->rows, s->cols, bn(rp, s, 3), bn(rp, s, 4));
        else
            tg_sb_printf(o, "    tr_resid_rowsum(c, %s, %s, %s, %d, %d, %s);\n", bn(rp, s, 0), bn(rp, s, 1),
                         bn(rp, s, 2), s->rows, s->cols, bn(rp, s, 3));
        break;
    case TG_STEP_LN_SQDEV:
        tg_sb_printf(o, "    tr_ln_sqdev(c, %s, %s, %d, %d, %d, %s);\n", bn(rp, s, 0), bn(rp, s, 1), s->rows,
                     s->cols, s->hidden, bn(rp, s, 2));
        break;
    case TG_STEP_LN_APPLY:
        tg_sb_printf(o, "    tr_ln_apply%s(c, %s, %s, %s, %s, %s, %d, %d, %d, %gf, %s);\n", bf(rp, s, 5), bn(rp, s, 0),
                     bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4), s->rows, s->cols, s->hidden, s->eps,
                     bn(rp, s, 5));
        break;
    case TG_STEP_BIAS_GELU:
        tg_sb_printf(o, "    tr_bias_gelu(c, %s, %s, %d, %d);\n", bn(rp, s, 0), bn(rp, s, 1), s->rows, s->cols);
        break;
    case TG_STEP_ATTENTION: /* a bf16 program (the bf16 copy of QKV in slot 5; attention = "cudnn" may have no slot 4):
                             * GEMMs on bf16 operands, docs/BF16.md */
        tg_sb_printf(o, "    tr_attention%s(c, %s, %s, %s, %s, %d, %d, %d, %d);\n",
                     !*bf(rp, s, 5) ? "" : *bf(rp, s, 2) ? "_bf16" : "_bf16_fp32out", bn(rp, s, 0),
                     bn(rp, s, 1), bn(rp, s, 2), bn(rp, s, 3), s->nseq, s->seq, s->heads, s->hdim);
        if (s->cudnn && s->buf[6] >= 0) /* training: the bf16 copy of the biased QKV its backward reads */
            tg_sb_printf(o, "    tr_cast_bf16(c, %s, %lld, %s);\n", bn(rp, s, 0), 3LL * s->rows * s->cols,
                         bn(rp, s, 5));
        break;
    case TG_STEP_CAST:
        tg_sb_printf(o, "    tr_cast_bf16(c, %s, %lld, %s);\n", bn(rp, s, 0), s->count, bn(rp, s, 1));
        break;
    case TG_STEP_GRAD_ACC: /* the first micro-batch of a step writes, the later ones add */
        tg_sb_printf(o, "    tr_grad_acc(c, %s, %s, %lld, tr_mb(c) > 0);\n", bn(rp, s, 0), bn(rp, s, 1), s->count);
        break;
    }
}

/* One step: its marker and call, guarded when it runs on the last micro-batch only. */
static void print_step(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, tg_coord co, const tg_step *s, int id)
{
    tg_sb body;
    tg_sb_init(&body);
    print_step_body(&body, pl, rp, co, s, id);
    tg_emit_step_body(o, pl, s, &body);
    tg_sb_free(&body);
}

/* The functions: one per segment (a phase's steps of one layer), then one per phase calling them in order. */
static bool print_functions(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, tg_coord co, tg_err *err)
{
    static const char *names[4] = {"forward", "backward", "optimizer", "decode"};
    const char *what[4] = {
        pl->spec.mode == TG_GENERATE ? "the prefill: the forward of the prompts, their K and V into the KV cache, the "
                                       "argmax of every row"
                                     : "the forward of every block",
        "the backward: dL/dy in grad_x -> dL/dx in grad_x, and every weight gradient",
        "one AdamW step on every local shard (step number in the context)",
        "one decode step: a token per sequence at its position through the KV cache, its argmax",
    };
    tg_segment *sg;
    int nseg = tg_segments(rp, &sg);
    if (nseg < 0)
        return false;
    bool ok = true;
    for (int g = 0; g < nseg && ok; g++) {
        char fn[32];
        tg_segment_name(fn, sizeof fn, &sg[g]);
        if (sg[g].layer >= 0)
            tg_sb_printf(o, "/* ==== layer %d, %s ==== */\n", sg[g].layer, names[sg[g].phase]);
        else
            tg_sb_printf(o, "/* ==== %s ==== */\n", names[sg[g].phase]);
        tg_sb_printf(o, "static void %s(struct tr_ctx *c, float *A)\n{\n", fn);
        if (sg[g].phase == TG_PHASE_OPT) { /* one call over a table of every shard, not a call per shard */
            int last = sg[g].first; /* the AdamW steps; optimizer.shard: the all-gathers after them */
            while (last < sg[g].last && rp->steps[last + 1].kind == TG_STEP_ADAMW)
                last++;
            ok = tg_emit_adamw_table(o, pl, rp, co, sg[g].first, last, "tensors", err);
            if (last < sg[g].last)
                ok = ok && tg_emit_buffers(o, pl, rp, co, last + 1, sg[g].last, cpu_uses, "rank's");
            tg_sb_printf(o, "    TR_STEP(c, %d); /* steps %d..%d: AdamW on every local shard, one call */\n",
                         sg[g].first, sg[g].first, last);
            tg_sb_printf(o, "    tr_adamw_multi(c, A, tensors, %d);\n", last - sg[g].first + 1);
            for (int i = last + 1; i <= sg[g].last; i++)
                print_step(o, pl, rp, co, &rp->steps[i], i);
            tg_sb_puts(o, "}\n\n");
            continue;
        }
        ok = tg_emit_buffers(o, pl, rp, co, sg[g].first, sg[g].last, cpu_uses, "rank's");
        tg_sb_puts(o, "\n");
        for (int i = sg[g].first; i <= sg[g].last; i++)
            print_step(o, pl, rp, co, &rp->steps[i], i);
        tg_sb_puts(o, "}\n\n");
    }
    for (int ph = TG_PHASE_FWD; ph <= TG_PHASE_DEC; ph++) {
        int any = 0;
        for (int g = 0; g < nseg; g++)
            any |= sg[g].phase == (tg_phase)ph;
        if (!any)
            continue;
        tg_sb_printf(o, "/* %s */\nstatic void %s(struct tr_ctx *c, float *A)\n{\n", what[ph], names[ph]);
        for (int g = 0; g < nseg; g++) {
            char fn[32];
            tg_segment_name(fn, sizeof fn, &sg[g]);
            if (sg[g].phase != (tg_phase)ph)
                continue;
            tg_sb_printf(o, "    %s(c, A);\n", fn);
        }
        tg_sb_puts(o, "}\n\n");
    }
    free(sg);
    return ok;
}

/* The header placeholders that the C and CUDA class programs share. */
int tg_emit_class_vars(const tg_plan *pl, const tg_class_plan *rp, tg_tvar *vars, char (*store)[64], tg_sb *who)
{
    const tg_mesh *m = &pl->mesh;
    tg_coord co = {rp->i, rp->j, m->d == 1 ? 0 : -1};
    char h[32];
    tg_h_text(h, sizeof h, pl, co);
    tg_class_who(who, pl, rp);
    long long tot = 0;
    for (int g = 0; g < TG_NGROUPS; g++)
        tot += rp->bcast_recv[g];
    int n = tg_emit_common_vars(pl, vars, store);
    int si = TG_EMIT_COMMON_STORE;
#define VAR(key, ...) (snprintf(store[si], 64, __VA_ARGS__), vars[n++] = (tg_tvar){key, store[si++]})
    VAR("I", "%d", rp->i);
    VAR("J", "%d", rp->j);
    VAR("H", "%s", h);
    VAR("T", "%d", pl->T);
    VAR("C", "%d", pl->spec.hidden);
    if (m->scheme == TG_SCHEME_MEGATRON)
        VAR("ROWS", "0..%d", pl->T - 1);
    else if (m->d == 1)
        VAR("ROWS", "%d..%d", rp->i * pl->R, rp->i * pl->R + pl->R - 1);
    else
        VAR("ROWS", "%d+%dk..%d+%dk", rp->i * pl->R, m->q * pl->R, rp->i * pl->R + pl->R - 1, m->q * pl->R);
    VAR("COLS", "%d..%d", rp->j * pl->Cq, rp->j * pl->Cq + pl->Cq - 1);
    if (m->scheme == TG_SCHEME_MEGATRON)
        VAR("WBLOCKS", "rank %d's pieces of every weight (docs/MEGATRON.md)", rp->i);
    else
        VAR("WBLOCKS", "weight blocks (i=%d, j=%d) of every matrix", rp->i, rp->j);
    VAR("ARENA_ELEMS", "%lld", rp->arena_elems);
    VAR("ARENA_BYTES", "%lld", 4 * rp->arena_elems);
    VAR("WEIGHT_BYTES", "%lld", 4 * rp->weight_elems);
    VAR("RECV_BYTES", "%lld", tot);
    VAR("RECV_ROW", "%lld", rp->bcast_recv[TG_ROW]);
    VAR("RECV_COL", "%lld", rp->bcast_recv[TG_COL]);
    VAR("NPARAMS", "%d", rp->nparams);
    VAR("NSTEPS", "%d", rp->nsteps);
    VAR("FINGERPRINT", "%s", pl->fingerprint);
    tg_class_name_cp(store[si], 64, pl, rp);
    vars[n++] = (tg_tvar){"FILE", store[si++]};
#undef VAR
    vars[n++] = (tg_tvar){"WHO", who->s};
    return n;
}

bool tg_emit_class_c(const tg_plan *pl, const tg_class_plan *rp, tg_sb *out, tg_err *err)
{
    tg_coord co = {rp->i, rp->j, pl->mesh.d == 1 ? 0 : -1};
    tg_sb params, steps, desc, info, rows, who;
    tg_sb_init(&info);
    tg_sb_init(&params);
    tg_sb_init(&steps);
    tg_sb_init(&desc);
    tg_sb_init(&rows);
    tg_sb_init(&who);

    tg_emit_params(&params, rp);
    int nerr = err->count;
    bool ok = print_functions(&steps, pl, rp, co, err);
    tg_emit_lm_desc(&steps, pl, rp, "");
    if (ok && tg_plan_stages(pl) > 1)
        ok = tg_emit_pipe(&steps, pl, rp, "", err);
    for (int i = 0; i < rp->nsteps; i++)
        tg_emit_step_info(&info, &rp->steps[i]);
    tg_emit_rank_rows(&rows, pl, rp);
    tg_emit_class_desc(&desc, pl, rp, "NULL");

    char store[32][64];
    tg_tvar vars[48];
    int n = tg_emit_class_vars(pl, rp, vars, store, &who);
    vars[n++] = (tg_tvar){"PARAMS", params.s};
    vars[n++] = (tg_tvar){"STEPS", steps.s};
    vars[n++] = (tg_tvar){"STEP_INFO", info.s};
    vars[n++] = (tg_tvar){"ROWS_TABLE", rows.s};
    vars[n++] = (tg_tvar){"DESC", desc.s};
    if (!ok) {
        if (err->count == nerr) /* else the table's own error */
            ok = tg_fail(err, "out of memory printing the program of class (i=%d, j=%d)", rp->i, rp->j);
    } else {
        ok = tg_template_fill(out, "rank.c.in", vars, n, err);
    }
    tg_sb_free(&params);
    tg_sb_free(&steps);
    tg_sb_free(&desc);
    tg_sb_free(&info);
    tg_sb_free(&rows);
    tg_sb_free(&who);
    return ok;
}

bool tg_emit_model_c(const tg_plan *pl, tg_sb *out, tg_err *err)
{
    char store[32][64];
    tg_tvar vars[40];
    int n = tg_emit_common_vars(pl, vars, store);
    int si = TG_EMIT_COMMON_STORE;
#define VAR(key, ...) (snprintf(store[si], 64, __VA_ARGS__), vars[n++] = (tg_tvar){key, store[si++]})
    VAR("LAYERS", "%d", pl->spec.layers);
    VAR("C", "%d", pl->spec.hidden);
    VAR("HEADS", "%d", pl->spec.heads);
    VAR("F", "%d", pl->spec.ffn);
    VAR("S", "%d", pl->spec.seq);
    VAR("B", "%d", pl->spec.batch);
    VAR("EPS", "%.17g", pl->spec.eps);
    VAR("MODE", "%d", pl->spec.mode == TG_TRAIN);
    VAR("LR", "%.17g", pl->spec.opt.lr);
    VAR("BETA1", "%.17g", pl->spec.opt.beta1);
    VAR("BETA2", "%.17g", pl->spec.opt.beta2);
    VAR("ADAM_EPS", "%.17g", pl->spec.opt.eps);
    /* the schedule and clipping fields follow weight_decay only when the spec sets them (the others are 0 in
     * tr_model, their defaults), so model.c of every other spec is what it was */
    const tg_adamw *op = &pl->spec.opt;
    char wd[300];
    int wn = snprintf(wd, sizeof wd, "%.17g", op->weight_decay);
    if (op->warmup || op->decay_steps || op->lr_min != 0 || op->clip != 0)
        snprintf(wd + wn, sizeof wd - (size_t)wn,
                 ",\n    .warmup = %lld, .decay_steps = %lld, .lr_min = %.17g, /* lr schedule */\n    .clip = %.17g",
                 op->warmup, op->decay_steps, op->lr_min, op->clip);
    vars[n++] = (tg_tvar){"WD", wd};
    /* the dtype only when it is not fp32 (tr_model.dtype NULL reads "fp32"), as the schedule fields above */
    char dt[400];
    snprintf(dt, sizeof dt, "%s%s", pl->spec.dtype == TG_BF16 ? "\n    .dtype = \"bf16\", /* docs/BF16.md */" : "",
             pl->mb > 1 ? "\n    .microbatches = " : "");
    if (pl->mb > 1) /* micro-batches only when the spec has them (0 reads 1), as the dtype */
        snprintf(dt + strlen(dt), sizeof dt - strlen(dt), "%d, /* per step: docs/TRAINING.md \"Micro-batches\" */",
                 pl->mb);
    if (tg_plan_stages(pl) > 1) /* pipeline stages only when the spec has them (0 reads 1), as the micro-batches */
        snprintf(dt + strlen(dt), sizeof dt - strlen(dt), "\n    .pp = %d, /* pipeline stages of p / pp ranks each, "
                 "stage-major: docs/TRAINING.md \"Pipeline stages\" */", tg_plan_stages(pl));
    vars[n++] = (tg_tvar){"DTYPE", dt};
    VAR("FINGERPRINT", "%s", pl->fingerprint);
    VAR("NCLASSES", "%d", tg_plan_nclasses(pl));
    VAR("PLACEMENT", "%s", tg_placement_name(pl->mesh.placement));
    VAR("SI", "%d", pl->mesh.si);
    VAR("SJ", "%d", pl->mesh.sj);
    VAR("SK", "%d", pl->mesh.sk);
#undef VAR
    return tg_template_fill(out, "model.c.in", vars, n, err);
}
