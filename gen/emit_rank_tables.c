/*
 * emit_rank_tables.c - the data tables every class program carries, whatever
 * its backend: the weight-shard table (tr_param rows), the step table
 * (tr_step_info rows), the rows of its ranks (tr_rank_row) and the class
 * descriptor (tr_class_desc with its tr_rank_desc prototype), the
 * optimizer's multi-tensor AdamW table (tr_adamw_tensor rows), and a pipeline
 * stage's stash table, unrolled schedule and tr_pipe_desc. The CPU and the
 * CUDA emitters both print them from here, so a field added to those structs
 * is printed once, every field in declaration order (which C++ designated
 * initialisers require).
 */
#include <stdio.h>
#include <string.h>

#include "emit.h"
#include "pipe.h"

const char *tg_emit_group_enum(tg_group g)
{
    static const char *e[TG_NGROUPS] = {"TR_ROW", "TR_COL", "TR_DEP", "TR_COLDEP", "TR_WORLD"};
    return (g >= 0 && g < TG_NGROUPS) ? e[g] : "-1";
}

const char *tg_emit_kind_enum(tg_step_kind k)
{
    switch (k) {
    case TG_STEP_BCAST: return "TR_K_BCAST";
    case TG_STEP_ALLREDUCE:
    case TG_STEP_REDUCESCATTER: /* counted and timed with the all-reduces (--stats) */
    case TG_STEP_ALLGATHER: return "TR_K_ALLREDUCE";
    case TG_STEP_GEMM: return "TR_K_GEMM";
    case TG_STEP_LN_ROWSUM:
    case TG_STEP_LN_SQDEV:
    case TG_STEP_LN_APPLY:
    case TG_STEP_LN_BWD_SUMS:
    case TG_STEP_LN_BWD_APPLY: return "TR_K_LN";
    case TG_STEP_RESID_ROWSUM:
    case TG_STEP_COLSUM: return "TR_K_RESID";
    case TG_STEP_BIAS_GELU:
    case TG_STEP_GELU_SAVE:
    case TG_STEP_GELU_BWD: return "TR_K_GELU";
    case TG_STEP_ATTENTION:
    case TG_STEP_ATTN_DECODE:
    case TG_STEP_ATTN_BWD: return "TR_K_ATTENTION";
    case TG_STEP_REDUCE: return "TR_K_REDUCE";
    case TG_STEP_ADAMW: return "TR_K_OPTIMIZER";
    case TG_STEP_EMBED:
    case TG_STEP_POS_ADD:
    case TG_STEP_EMBED_BWD:
    case TG_STEP_POS_BWD:
    case TG_STEP_KV_WRITE:
    case TG_STEP_COPY:
    case TG_STEP_GRAD_ACC: return "TR_K_RESID";
    case TG_STEP_CAST: return "TR_K_CAST";
    case TG_STEP_LM_ROWMAX:
    case TG_STEP_LM_SUMS:
    case TG_STEP_LM_LOSS:
    case TG_STEP_LM_ARGMAX:
    case TG_STEP_LM_DLOGITS: return "TR_K_LOSS";
    }
    return "TR_K_GEMM";
}

void tg_emit_params(tg_sb *o, const tg_class_plan *rp)
{
    for (int i = 0; i < rp->nparams; i++) {
        const tg_param *p = &rp->params[i];
        const tg_buf *b = &rp->bufs[p->buf];
        tg_sb_puts(o, "    {");
        tg_sb_cstr(o, p->name);
        tg_sb_printf(o, ", %d, {%d, %d}, %lld, %d, %d, %d, {", p->ndim, p->full[0], p->full[1], b->offset, b->rows,
                     b->cols, p->npieces);
        for (int k = 0; k < p->npieces; k++)
            tg_sb_printf(o, "%s{%d, %d, %d, %d, %d}", k ? ", " : "", p->piece[k].r0, p->piece[k].nr, p->piece[k].c0,
                         p->piece[k].nc, p->piece[k].dst_col);
        tg_sb_puts(o, "}");
        if (p->grad >= 0)
            tg_sb_printf(o, ", %lld, %lld, %lld", rp->bufs[p->grad].offset, rp->bufs[p->m].offset,
                         rp->bufs[p->v].offset);
        else
            tg_sb_puts(o, ", -1, -1, -1");
        tg_sb_printf(o, ", %s, %d, %lld, %lld},\n", tg_emit_group_enum((tg_group)p->replica), b->dtype == TG_BUF_BF16,
                     p->w16 >= 0 ? rp->bufs[p->w16].offset : -1LL, /* bf16 shard; its persistent bf16 copy */
                     p->shard); /* optimizer.shard: elements of one slice of the moments */
    }
}

bool tg_emit_adamw_table(tg_sb *o, const tg_plan *pl, const tg_class_plan *cp, tg_coord co, int first, int last,
                         const char *var, tg_err *err)
{
    for (int i = first; i <= last; i++) {
        const tg_step *s = &cp->steps[i];
        /* optimizer.shard (CPU only): the all-gathers after the table wait for it, which the CPU need not see */
        if (s->kind != TG_STEP_ADAMW || s->wait >= 0 || (s->signal && !pl->spec.opt.shard))
            return tg_fail(err,
                           "internal emitter error: class (i=%d, j=%d) step %d of the optimizer is %s%s: the "
                           "multi-tensor AdamW table holds AdamW steps that wait for nothing",
                           cp->i, cp->j, i, tg_step_kind_name(s->kind), s->wait >= 0 || s->signal ? " with a wait" : "");
    }
    tg_sb_printf(o,
                 "    /* The multi-tensor AdamW step (steps %d..%d of schedule.txt, in that order): one row per local "
                 "shard, arena\n     * offsets in floats of {param, grad, m, v, bf16 copy of param (-1: none)}, "
                 "then elements, weight decay, and the parameter's elements when the row is one slice of it (0: whole). */\n",
                 first, last);
    tg_sb_printf(o, "    static const tr_adamw_tensor %s[%d] = {\n", var, last - first + 1);
    for (int i = first; i <= last; i++) {
        const tg_step *s = &cp->steps[i];
        char what[256];
        tg_step_text(what, sizeof what, pl, cp, co, s);
        tg_sb_printf(o, "        {%lld, %lld, %lld, %lld, %lld, %lld, %d, %lld}, /* step %d: %s */\n",
                     cp->bufs[s->buf[0]].offset, cp->bufs[s->buf[1]].offset, cp->bufs[s->buf[2]].offset,
                     cp->bufs[s->buf[3]].offset, s->buf[4] >= 0 ? cp->bufs[s->buf[4]].offset : -1LL, s->count,
                     s->decay, s->slice_of, i, what);
    }
    tg_sb_puts(o, "    };\n");
    return true;
}

void tg_emit_step_info(tg_sb *o, const tg_step *s)
{
    int coll = s->kind == TG_STEP_BCAST || s->kind == TG_STEP_ALLREDUCE || s->kind == TG_STEP_REDUCE ||
               s->kind == TG_STEP_REDUCESCATTER || s->kind == TG_STEP_ALLGATHER;
    tg_sb_printf(o, "    {%d, %d, \"%s\", %s, %s, %d, %lld, %lld, %d},\n", s->layer, s->t, s->op,
                 tg_emit_kind_enum(s->kind), coll ? tg_emit_group_enum(s->group) : "-1", s->root_local, s->count, s->flops,
                 coll ? s->esize : 0);
}

static void ll4(tg_sb *o, const char *field, const long long *v)
{
    tg_sb_printf(o, "        .%s = {%lld, %lld, %lld, %lld, %lld},\n", field, v[0], v[1], v[2], v[3], v[4]);
}

void tg_emit_rank_rows(tg_sb *o, const tg_plan *pl, const tg_class_plan *cp)
{
    const tg_mesh *m = &pl->mesh;
    for (int k = 0; k < m->d; k++) {
        tg_coord co = {cp->i, cp->j, k};
        /* pipeline stages: ranks stage-major, and the stage folded into every color (each stage's groups its own) */
        int off = tg_plan_stages(pl) > 1 ? cp->stage * m->p : 0;
        tg_sb_printf(o, "    {%d, %d, %d, {", off + tg_mesh_rank(m, co), k, tg_io_r0(pl, co));
        for (int g = 0; g < TG_NGROUPS; g++)
            tg_sb_printf(o, "%s%d", g ? ", " : "", off + tg_group_color(m, (tg_group)g, co));
        tg_sb_puts(o, "}, {");
        for (int g = 0; g < TG_NGROUPS; g++)
            tg_sb_printf(o, "%s%d", g ? ", " : "", tg_group_local(m, (tg_group)g, co));
        tg_sb_printf(o, "}}, /* h=%d */\n", tg_mesh_row_block(m, co));
    }
}

/* A buffer's arena offset, -1 where the class has none (pipeline stages: the tokens on the first stage only, the
 * targets, logits and loss on the last) */
static long long buf_off(const tg_class_plan *rp, int buf)
{
    return buf >= 0 ? rp->bufs[buf].offset : -1;
}

void tg_emit_lm_desc(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, const char *linkage)
{
    if (pl->V <= 0)
        return;
    tg_sb_puts(o, "/* The language model's part of this program (docs/MODEL.md): the forward's reductions, the vocabulary,\n"
                  " * and the token, target, logits and loss buffers the runtime fills and reads. */\n");
    tg_sb_printf(o, "%sconst tr_lm_desc tr_lm_class = {\n", linkage);
    ll4(o, "plan_reduce_recv", rp->reduce_recv);
    ll4(o, "plan_reduce_sent", rp->reduce_sent);
    tg_sb_printf(o, "        .vocab = %d, .vq = %d, .positions = %d,\n", pl->V, pl->Vq, pl->spec.positions);
    tg_sb_printf(o, "        .tok_offset = %lld, .tgt_offset = %lld, .logits_offset = %lld, .loss_offset = %lld,\n",
                 buf_off(rp, rp->tok_buf), buf_off(rp, rp->tgt_buf), buf_off(rp, rp->logits_buf),
                 buf_off(rp, rp->loss_buf));
    tg_sb_puts(o, "};\n\n");
    if (pl->spec.mode != TG_GENERATE)
        return;
    tg_sb_puts(o, "/* Generation (docs/GENERATE.md): forward() is the prefill, decode() one decode step; the buffers the runtime\n"
                  " * fills (decode tokens, positions) and reads (argmax pairs, decode logits), the KV caches, and the\n"
                  " * decode step's planned bytes. */\n");
    tg_sb_printf(o, "%sconst tr_gen_desc tr_gen_class = {\n", linkage);
    tg_sb_printf(o, "        .context = %d,\n", pl->spec.context);
    tg_sb_printf(o, "        .pairs_offset = %lld, .dtok_offset = %lld, .dpos_offset = %lld, .dlogits_offset = %lld,\n"
                    "        .dpairs_offset = %lld, .kv_offset = %lld, .kv_elems = %lld,\n",
                 rp->bufs[rp->pairs_buf].offset, rp->bufs[rp->dtok_buf].offset, rp->bufs[rp->dpos_buf].offset,
                 rp->bufs[rp->dlogits_buf].offset, rp->bufs[rp->dpairs_buf].offset, rp->bufs[rp->kv_buf0].offset,
                 rp->kv_elems);
    tg_sb_puts(o, rp->dec_logits_t ? "        .dec_logits_t = 1, /* the weight-stationary head's decode logits: row block j, "
                                     "vocab block i */\n"
                                   : "        .dec_logits_t = 0,\n");
    ll4(o, "plan_dec_bcast_recv", rp->dec_bcast_recv);
    ll4(o, "plan_dec_bcast_sent", rp->dec_bcast_sent);
    ll4(o, "plan_dec_allreduce", rp->dec_allreduce);
    ll4(o, "plan_dec_reduce_recv", rp->dec_reduce_recv);
    ll4(o, "plan_dec_reduce_sent", rp->dec_reduce_sent);
    ll4(o, "plan_ws_allgather", rp->ws_allgather);
    ll4(o, "plan_ws_rscatter", rp->ws_rscatter);
    ll4(o, "plan_dec_ws_allgather", rp->dec_ws_allgather);
    ll4(o, "plan_dec_ws_rscatter", rp->dec_ws_rscatter);
    tg_sb_puts(o, "        .decode = decode,\n};\n\n");
}

void tg_emit_class_desc(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, const char *null_ptr)
{
    const tg_mesh *m = &pl->mesh;
    int train = pl->spec.mode == TG_TRAIN;
    tg_coord co = {rp->i, rp->j, 0};
    tg_sb_printf(o, "    .i = %d, .j = %d,\n    .fingerprint = \"%s\",\n", rp->i, rp->j, pl->fingerprint);
    tg_sb_puts(o, "    .proto = {\n");
    tg_sb_printf(o, "        .rank = -1, .i = %d, .j = %d, .k = -1, /* rank, k, io_r0, color, key: the rank's row */\n",
                 rp->i, rp->j);
    tg_sb_puts(o, "        /* groups: row, col, dep, coldep, world */\n");
    tg_sb_puts(o, "        .color = {0, 0, 0, 0, 0},\n        .key = {0, 0, 0, 0, 0},\n");
    tg_sb_printf(o, "        .size = {%d, %d, %d, %d, %d},\n", tg_group_size(m, TG_ROW), tg_group_size(m, TG_COL),
                 tg_group_size(m, TG_DEP), tg_group_size(m, TG_COLDEP), tg_group_size(m, TG_WORLD));
    tg_sb_printf(o, "        .arena_elems = %lld,\n", rp->arena_elems);
    tg_sb_printf(o, "        .nparams = %d,\n        .params = params,\n", rp->nparams);
    tg_sb_printf(o, "        .mode = %d,\n", train);
    tg_sb_printf(o, "        .x_offset = %lld, .y_offset = %lld, .gx_offset = %lld,\n", rp->bufs[rp->x_buf].offset,
                 rp->bufs[rp->y_buf].offset, rp->gx_buf >= 0 ? rp->bufs[rp->gx_buf].offset : -1LL);
    tg_sb_printf(o, "        .io_r0 = -1, .io_c0 = %d, .io_rows = %d, .io_cols = %d,\n", tg_io_c0(pl, co), pl->R,
                 pl->Cq);
    ll4(o, "plan_bcast_recv", rp->bcast_recv);
    ll4(o, "plan_bcast_sent", rp->bcast_sent);
    ll4(o, "plan_allreduce", rp->allreduce);
    tg_sb_printf(o, "        .plan_flops = %lld,\n", rp->flops);
    tg_sb_puts(o, "        /* backward (training only) */\n");
    ll4(o, "plan_bwd_bcast_recv", rp->bwd_bcast_recv);
    ll4(o, "plan_bwd_bcast_sent", rp->bwd_bcast_sent);
    ll4(o, "plan_bwd_allreduce", rp->bwd_allreduce);
    ll4(o, "plan_bwd_reduce_recv", rp->bwd_reduce_recv);
    ll4(o, "plan_bwd_reduce_sent", rp->bwd_reduce_sent);
    ll4(o, "plan_bwd_rscatter", rp->bwd_rscatter);
    ll4(o, "plan_opt_allgather", rp->opt_allgather);
    tg_sb_printf(o, "        .nsteps = %d,\n        .steps = step_info,\n", rp->nsteps);
    tg_sb_printf(o, "        .forward = forward,\n        .backward = %s,\n        .optimizer = %s,\n",
                 train ? "backward" : null_ptr, train ? "optimizer" : null_ptr);
    tg_sb_printf(o, "    },\n    .nranks = %d,\n    .rows = rows,\n", m->d);
}

/* Pipeline stages (docs/TRAINING.md "Pipeline stages"): the stage's kept forward buffers (what its stash holds per
 * in-flight micro-batch), and step(), the stage's proved list of operations (gen/pipe.c) as one unrolled sequence of
 * calls: the forward and backward of micro-batch u with its stash slot u mod stash, and the point-to-point steps that
 * move micro-batch u's rows of y (forward) and of grad_x (dL/dx, backward) to and from the same (i, j, k) of the
 * neighbour stage, this rank +- p (literal: p = q*q*d ranks per stage). A joint pair is one tr_pipe_sendrecv. Then
 * tr_pipe_class, which the runtime reads (a weak reference, as tr_lm_class). The same text in the C and the CUDA
 * programs: the runtime's tr_pipe_* move run memory, host or device (tr_backend.h). */
bool tg_emit_pipe(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, const char *linkage, tg_err *err)
{
    const tg_spec *sp = &pl->spec;
    int S = sp->pp, s = rp->stage, m = pl->mb, p = pl->mesh.p;
    long long n = (long long)(pl->R / m) * pl->Cq; /* one micro-batch's rows of an I/O block */
    const tg_buf *bx = &rp->bufs[rp->x_buf], *by = &rp->bufs[rp->y_buf], *bg = &rp->bufs[rp->gx_buf];
    if (m > 1 && (bx->mb_stride != n || by->mb_stride != n || bg->mb_stride != n))
        return tg_fail(err, "internal planner error: stage %d's x, y and grad_x blocks are not %lld elements per "
                            "micro-batch", s, n);
    tg_pipe pp;
    if (!tg_pipe_build(&pp, S, m, sp->schedule, sp->stage_layers, err))
        return false;
    if (!tg_pipe_simulate(&pp, err)) {
        tg_pipe_free(&pp);
        return false;
    }
    int nst = 0, stash = pp.stash[s]; /* the proved schedule's (pl is not pointed at this stage) */
    tg_sb_puts(o, "/* Pipeline stage: the buffers one micro-batch's forward keeps for its backward (arena offset, 4-byte "
                  "slots),\n * saved to stash slot u mod stash after the forward of u and put back before its backward "
                  "(docs/TRAINING.md). */\n");
    tg_sb_puts(o, "static const tr_pipe_buf pipe_stash[] = {\n");
    for (int i = 0; i < rp->nbufs; i++) {
        const tg_buf *bf = &rp->bufs[i];
        if (!bf->persistent && bf->first >= 0 && rp->steps[bf->first].phase == TG_PHASE_FWD &&
            rp->steps[bf->last].phase == TG_PHASE_BWD) {
            tg_sb_printf(o, "    {%lld, %lld}, /* %s */\n", bf->offset, tg_buf_slots(bf), bf->name);
            nst++;
        }
    }
    if (!nst)
        tg_sb_puts(o, "    {0, 0}, /* none */\n");
    tg_sb_puts(o, "};\n\n");
    tg_sb_printf(o, "/* Stage %d of %d, schedule \"%s\", %d micro-batches of %lld elements of x, y and grad_x each; "
                    "stash %d. */\n",
                 s, S, sp->schedule == TG_PIPE_GPIPE ? "gpipe" : "1f1b", m, n, stash);
    tg_sb_puts(o, "static void pipe_step(struct tr_ctx *c, float *A)\n{\n    const int me = tr_pipe_rank(c);\n");
    const tg_pipe_op *ops = pp.ops[s];
    for (int k = 0; k < pp.nops[s]; k++) {
        char note[32], note2[32];
        tg_pipe_op_str(&ops[k], note, sizeof note);
        const tg_pipe_op *a = &ops[k];
        if (a->kind == TG_PIPE_FWD || a->kind == TG_PIPE_BWD) {
            tg_sb_printf(o, "    tr_pipe_%s(c, A, %d, %d); /* %s */\n", a->kind == TG_PIPE_FWD ? "forward" : "backward",
                         a->mb, a->mb % stash, note);
            continue;
        }
        const tg_pipe_op *b = a->joint && k + 1 < pp.nops[s] ? &ops[k + 1] : NULL;
        const tg_pipe_op *snd = NULL, *rcv = NULL;
        for (int t = 0; t < (b ? 2 : 1); t++) {
            const tg_pipe_op *x = t ? b : a;
            if (x->kind == TG_PIPE_SEND_ACT || x->kind == TG_PIPE_SEND_GRAD)
                snd = x;
            else
                rcv = x;
        }
        if (b && (!snd || !rcv)) {
            tg_pipe_free(&pp);
            return tg_fail(err, "internal planner error: stage %d's joint step %d is not a send and a receive", s, k);
        }
        char sarg[96] = "", rarg[96] = "";
        if (snd)
            snprintf(sarg, sizeof sarg, "A + %lld, %lld, me %c %d", (snd->kind == TG_PIPE_SEND_ACT ? by : bg)->offset +
                     (long long)snd->mb * n, n, snd->peer > s ? '+' : '-', p);
        if (rcv)
            snprintf(rarg, sizeof rarg, "A + %lld, %lld, me %c %d", (rcv->kind == TG_PIPE_RECV_ACT ? bx : bg)->offset +
                     (long long)rcv->mb * n, n, rcv->peer > s ? '+' : '-', p);
        if (b) {
            tg_pipe_op_str(b, note2, sizeof note2);
            tg_sb_printf(o, "    tr_pipe_sendrecv(c, %s, %s); /* %s %s */\n", sarg, rarg, note, note2);
            k++;
        } else {
            tg_sb_printf(o, "    tr_pipe_%s(c, %s); /* %s */\n", snd ? "send" : "recv", snd ? sarg : rarg, note);
        }
    }
    /* the language model: wte is held by the first stage (the embedding) and the last (the tied head); after the
     * last backward (its dep all-reduce included) each adds the other's gradient, so both run the same AdamW */
    int tied = -1;
    for (int i = 0; i < rp->nparams && pl->V > 0 && (s == 0 || s == S - 1); i++)
        if (strcmp(rp->params[i].name, "wte.weight") == 0)
            tied = i;
    if (pl->V > 0 && (s == 0 || s == S - 1) && tied < 0) {
        tg_pipe_free(&pp);
        return tg_fail(err, "internal planner error: stage %d of %d holds no wte for the tied head", s, S);
    }
    if (tied >= 0) {
        const tg_buf *gw = &rp->bufs[rp->params[tied].grad];
        tg_sb_printf(o, "    tr_pipe_tied_sum(c, A + %lld, %lld, me %c %d, %d); /* the tied wte gradient: + stage %d's "
                        "*/\n", gw->offset, gw->elems, s == 0 ? '+' : '-', (S - 1) * p, s == 0, s == 0 ? S - 1 : 0);
    }
    tg_sb_puts(o, "}\n\n");
    tg_sb_printf(o, "%sconst tr_pipe_desc tr_pipe_class = {\n"
                    "    .stage = %d, .stages = %d, .ranks = %d, .microbatches = %d, .mb_elems = %lld,\n"
                    "    .stash = %d, .nstash = %d, .stash_bufs = pipe_stash, .stash_planned = %lld,\n"
                    "    .tied_param = %d, .tied_elems = %lld, .tied_peer = %d,\n"
                    "    .step = pipe_step,\n};\n\n",
                 linkage, s, S, p, m, n, stash, nst, rp->stash_total, tied, tied >= 0 ? rp->bufs[rp->params[tied].grad].elems : 0LL,
                 tied < 0 ? 0 : s == 0 ? (S - 1) * p : -(S - 1) * p);
    tg_pipe_free(&pp);
    return true;
}
