/*
 * emit_rank_c.c - prints one rank's program (rank_XXXX.c) and the rank table
 * (model.c) for the CPU backend. Each step becomes a comment naming layer, op,
 * SUMMA step and the block it moves, then one runtime call with literal
 * arguments. Buffers become named pointers at literal arena offsets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

static const char *bn(const tg_class_plan *rp, const tg_step *s, int slot)
{
    return s->buf[slot] >= 0 ? rp->bufs[s->buf[slot]].name : "NULL";
}

static void print_step(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, tg_coord co, const tg_step *s, int id)
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
        tg_sb_printf(o, "    tr_bcast(c, %s, %d, %s, %lld);\n", tg_emit_group_enum(s->group), s->root_local, bn(rp, s, 0),
                     s->count);
        break;
    case TG_STEP_ALLREDUCE:
        tg_sb_printf(o, "    tr_allreduce%s(c, %s, %s, %lld);\n", s->exact ? "_exact" : "", tg_emit_group_enum(s->group),
                     bn(rp, s, 0), s->count);
        break;
    case TG_STEP_REDUCE:
        tg_sb_printf(o, "    tr_reduce(c, %s, %d, %s, %lld);\n", tg_emit_group_enum(s->group), s->root_local, bn(rp, s, 0),
                     s->count);
        break;
    case TG_STEP_GEMM:
        if (s->transa || s->transb)
            tg_sb_printf(o, "    tr_gemm_ex(c, %d, %d, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d);\n", s->transa,
                         s->transb, s->m, s->n, s->k, bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta,
                         bn(rp, s, 2), s->ldc);
        else
            tg_sb_printf(o, "    tr_gemm(c, %d, %d, %d, %s, %d, %s, %d, %.1ff, %s, %d);\n", s->m, s->n, s->k,
                         bn(rp, s, 0), s->lda, bn(rp, s, 1), s->ldb, (double)s->beta, bn(rp, s, 2), s->ldc);
        break;
    case TG_STEP_GELU_SAVE:
        tg_sb_printf(o, "    tr_bias_gelu_save(c, %s, %s, %s, %d, %d);\n", bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2),
                     s->rows, s->cols);
        break;
    case TG_STEP_COLSUM:
        tg_sb_printf(o, "    tr_colsum(c, %s, %d, %d, %s);\n", bn(rp, s, 0), s->rows, s->cols, bn(rp, s, 1));
        break;
    case TG_STEP_GELU_BWD:
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
        break;
    case TG_STEP_ATTN_BWD:
        tg_sb_printf(o, "    tr_attention_bwd(c, %s, %s, %s, %s, %s, %d, %d, %d, %d);\n", bn(rp, s, 0), bn(rp, s, 1),
                     bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4), s->nseq, s->seq, s->heads, s->hdim);
        break;
    case TG_STEP_ADAMW:
        tg_sb_printf(o, "    tr_adamw(c, %s, %s, %s, %s, %lld, %d);\n", bn(rp, s, 0), bn(rp, s, 1), bn(rp, s, 2),
                     bn(rp, s, 3), s->count, s->decay);
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
        tg_sb_printf(o, "    tr_ln_apply(c, %s, %s, %s, %s, %s, %d, %d, %d, %gf, %s);\n", bn(rp, s, 0), bn(rp, s, 1),
                     bn(rp, s, 2), bn(rp, s, 3), bn(rp, s, 4), s->rows, s->cols, s->hidden, s->eps, bn(rp, s, 5));
        break;
    case TG_STEP_BIAS_GELU:
        tg_sb_printf(o, "    tr_bias_gelu(c, %s, %s, %d, %d);\n", bn(rp, s, 0), bn(rp, s, 1), s->rows, s->cols);
        break;
    case TG_STEP_ATTENTION:
        tg_sb_printf(o, "    tr_attention(c, %s, %s, %s, %s, %d, %d, %d, %d);\n", bn(rp, s, 0), bn(rp, s, 1),
                     bn(rp, s, 2), bn(rp, s, 3), s->nseq, s->seq, s->heads, s->hdim);
        break;
    }
}

/* One function per phase, declaring only the buffers its steps use. */
static void print_phase(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, tg_coord co, tg_phase ph)
{
    static const char *names[3] = {"forward", "backward", "optimizer"};
    static const char *what[3] = {
        "the forward of every block",
        "the backward: dL/dy in grad_x -> dL/dx in grad_x, and every weight gradient",
        "one AdamW step on every local shard (step number in the context)",
    };
    char *used = calloc((size_t)rp->nbufs, 1);
    int any = 0;
    for (int i = 0; i < rp->nsteps; i++)
        if (rp->steps[i].phase == ph) {
            any = 1;
            for (int k = 0; k < TG_STEP_MAXBUF; k++)
                if (rp->steps[i].buf[k] >= 0 && used)
                    used[rp->steps[i].buf[k]] = 1;
        }
    if (!any || !used) {
        free(used);
        return;
    }
    tg_sb_printf(o, "%s/* %s */\nstatic void %s(struct tr_ctx *c, float *A)\n{\n", ph ? "\n" : "", what[ph],
                 names[ph]);
    tg_sb_puts(o, "    /* Buffers: float offsets into this rank's arena A, shape [rows, cols], live steps first..last. */\n");
    for (int i = 0; i < rp->nbufs; i++) {
        const tg_buf *b = &rp->bufs[i];
        char bw[160];
        if (used[i])
            tg_sb_printf(o, "    float *const %s = A + %lld; /* [%d,%d] %s; live %d..%d */\n", b->name, b->offset,
                         b->rows, b->cols, tg_buf_text(bw, sizeof bw, pl, co, b), b->first, b->last);
    }
    tg_sb_puts(o, "\n");
    int layer = -2, first = 1;
    for (int i = 0; i < rp->nsteps; i++) {
        const tg_step *s = &rp->steps[i];
        if (s->phase != ph)
            continue;
        if (s->layer != layer && s->layer >= 0) {
            tg_sb_printf(o, "%s    /* ==== layer %d ==== */\n", first ? "" : "\n", s->layer);
        }
        layer = s->layer;
        first = 0;
        print_step(o, pl, rp, co, s, i);
    }
    tg_sb_puts(o, "}\n");
    free(used);
}

bool tg_emit_rank_c(const tg_plan *pl, const tg_class_plan *rp, int rank, tg_sb *out, tg_err *err)
{
    const tg_mesh *m = &pl->mesh;
    tg_coord co = tg_mesh_coord(m, rank);
    int h = tg_mesh_row_block(m, co);

    tg_sb params, steps, desc, bsum, info;
    tg_sb_init(&info);
    tg_sb_init(&params);
    tg_sb_init(&steps);
    tg_sb_init(&desc);
    tg_sb_init(&bsum);

    tg_emit_params(&params, rp);

    for (int ph = TG_PHASE_FWD; ph <= TG_PHASE_OPT; ph++)
        print_phase(&steps, pl, rp, co, (tg_phase)ph);
    for (int i = 0; i < rp->nsteps; i++)
        tg_emit_step_info(&info, pl, co, &rp->steps[i]);

    tg_emit_rank_desc(&desc, pl, rp, rank, "NULL");

    long long tot = 0;
    for (int g = 0; g < TG_NGROUPS; g++)
        tot += rp->bcast_recv[g];
    tg_sb_printf(&bsum, "%lld bytes received (row %lld, col %lld)", 4 * tot, 4 * rp->bcast_recv[TG_ROW],
                 4 * rp->bcast_recv[TG_COL]);

    char store[24][64];
    tg_tvar vars[32];
    int n = tg_emit_common_vars(pl, vars, store);
    int si = 3;
#define VAR(key, ...) (snprintf(store[si], 64, __VA_ARGS__), vars[n++] = (tg_tvar){key, store[si++]})
    VAR("RANK", "%d", rank);
    VAR("I", "%d", co.i);
    VAR("J", "%d", co.j);
    VAR("K", "%d", co.k);
    VAR("H", "%d", h);
    VAR("T", "%d", pl->T);
    VAR("C", "%d", pl->spec.hidden);
    VAR("ROWS", "%d..%d", tg_io_r0(pl, co), tg_io_r0(pl, co) + pl->R - 1);
    VAR("COLS", "%d..%d", tg_io_c0(pl, co), tg_io_c0(pl, co) + pl->Cq - 1);
    VAR("ARENA_ELEMS", "%lld", rp->arena_elems);
    VAR("ARENA_BYTES", "%lld", 4 * rp->arena_elems);
    VAR("WEIGHT_BYTES", "%lld", 4 * rp->weight_elems);
    VAR("NPARAMS", "%d", rp->nparams);
    VAR("NSTEPS", "%d", rp->nsteps);
    VAR("SYM", "tr_rank_%04d", rank);
#undef VAR
    vars[n++] = (tg_tvar){"BCAST_SUMMARY", bsum.s};
    vars[n++] = (tg_tvar){"PARAMS", params.s};
    vars[n++] = (tg_tvar){"STEPS", steps.s};
    vars[n++] = (tg_tvar){"STEP_INFO", info.s};
    vars[n++] = (tg_tvar){"DESC", desc.s};
    bool ok = tg_template_fill(out, "rank.c.in", vars, n, err);
    tg_sb_free(&params);
    tg_sb_free(&steps);
    tg_sb_free(&desc);
    tg_sb_free(&bsum);
    tg_sb_free(&info);
    return ok;
}

bool tg_emit_model_c(const tg_plan *pl, tg_sb *out, tg_err *err)
{
    tg_sb ext, ranks;
    tg_sb_init(&ext);
    tg_sb_init(&ranks);
    for (int r = 0; r < pl->mesh.p; r++) {
        tg_sb_printf(&ext, "extern const tr_rank_desc tr_rank_%04d;\n", r);
        tg_sb_printf(&ranks, "    &tr_rank_%04d,\n", r);
    }
    char store[24][64];
    tg_tvar vars[32];
    int n = tg_emit_common_vars(pl, vars, store);
    int si = 3;
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
    VAR("WD", "%.17g", pl->spec.opt.weight_decay);
    VAR("FINGERPRINT", "%s", pl->fingerprint);
#undef VAR
    vars[n++] = (tg_tvar){"EXTERNS", ext.s};
    vars[n++] = (tg_tvar){"RANKS", ranks.s};
    bool ok = tg_template_fill(out, "model.c.in", vars, n, err);
    tg_sb_free(&ext);
    tg_sb_free(&ranks);
    return ok;
}
