/*
 * plan_megatron_lm.c - the language model around the block stack (spec
 * model.vocab; docs/MODEL.md, docs/MEGATRON.md) on the megatron scheme's
 * vocab-parallel layout, as in Megatron-LM: p ranks, rank r holds wte rows
 * [r*Vq, (r+1)*Vq) whole-width [Vq, C] (Vq = ceil(V/p) rounded up to
 * model.vocab_align, Vp = p*Vq; rows at or above V are zero pad, replica
 * none); wpe [P, C] and ln_f are whole on
 * every rank (replicas over world). The residual stream x [T, C] is whole
 * and bitwise identical on every rank, so:
 *
 *   embed   x = wte rows of the tokens in this rank's vocab range (zero
 *           elsewhere) -> ALL-REDUCE(sum, exact) over world -> x += wpe rows
 *   head    ln_f (whole rows) -> logits_r = ln_f(y) @ E_r^T [T, Vq], local
 *   loss    row max -> ALL-REDUCE(max) over world; [2, T] sums of exp and
 *           target logit -> ALL-REDUCE(sum, exact) over world; per-token loss
 *   bwd     dlogits_r local; dX = dlogits_r @ E_r -> ALL-REDUCE(sum, exact);
 *           dE_r = dlogits_r^T @ ln_f(y) plus the scatter-add of dL/dx rows
 *           of the tokens in range (local: dL/dx is whole); ln_f and wpe
 *           gradients come from whole, identical tensors: no collective.
 *
 * The step kinds and kernels are the Tesseract layout's (EMBED, POS_ADD,
 * LM_*, ...) with one vocab block per rank and all T tokens; no new runtime
 * kernel. The loss and dL/dlogits are plan_steps.c's, as for plan_lm.c; only
 * plan_megatron.c calls this file.
 */
#include "plan_schemes.h"

#include <stdio.h>

/* The exact sum over every rank: the loss's [2, T] sums (tg_pb_sum_fn). */
static void world_sum(tg_builder *b, int layer, const char *op, int buf, long long count, const char *what)
{
    tg_pb_allreduce_exact(b, layer, op, TG_WORLD, buf, count, what);
}

static int whole_param(tg_builder *b, const char *name, int ndim, int full0, int full1, int rows, int cols, int *param)
{
    *param = tg_pb_param(b, name, ndim, full0, full1, rows, cols);
    if (*param < 0)
        return -1;
    tg_pb_piece(b, *param, 0, rows, 0, cols, 0);
    b->rp->params[*param].replica = TG_WORLD;
    return b->rp->params[*param].buf;
}

void tg_mglm_declare_embedding(tg_builder *b, tg_lm *lm)
{
    const tg_plan *pl = b->pl;
    int C = pl->spec.hidden, Vq = pl->Vq, V = pl->V, P = pl->spec.positions, r = b->c.i;
    /* wte rows r*Vq.. [Vq, C]: those below V from the file, the rest zero pad; no other rank holds them */
    lm->p_wte = tg_pb_param(b, "wte.weight", 2, V, C, Vq, C);
    int nr = tg_lm_nvalid(pl, r);
    if (nr > 0)
        tg_pb_piece(b, lm->p_wte, r * Vq, nr, 0, C, 0);
    if (lm->p_wte >= 0)
        b->rp->params[lm->p_wte].replica = -1;
    lm->wte = lm->p_wte < 0 ? -1 : b->rp->params[lm->p_wte].buf;
    if (lm->wte >= 0) /* the row gather reads wte: fp32 in every plan (docs/BF16.md) */
        b->rp->bufs[lm->wte].dtype = TG_BUF_F32;
    /* wpe [P, C], whole on every rank */
    lm->wpe = whole_param(b, "wpe.weight", 2, P, C, P, C, &lm->p_wpe);
    if (lm->wpe >= 0) /* read by the position add: fp32 */
        b->rp->bufs[lm->wpe].dtype = TG_BUF_F32;
}

void tg_mglm_declare_final(tg_builder *b, tg_lm *lm)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    int C = pl->spec.hidden, T = pl->T, Vq = pl->Vq, r = b->c.i;
    char what[100];
    lm->lnf_g = whole_param(b, "ln_f.weight", 1, C, 0, 1, C, &lm->p_lnf_g);
    lm->lnf_b = whole_param(b, "ln_f.bias", 1, C, 0, 1, C, &lm->p_lnf_b);
    rp->tok_buf = tg_pb_buf(b, 1, T, 1, "token ids, every token (int32, the runtime fills them)", "tokens");
    rp->tgt_buf = tg_pb_buf(b, 1, T, 1, "target ids, every token (int32, the runtime fills them)", "targets");
    if (rp->tok_buf >= 0)
        rp->bufs[rp->tok_buf].dtype = TG_BUF_I32;
    if (rp->tgt_buf >= 0)
        rp->bufs[rp->tgt_buf].dtype = TG_BUF_I32;
    snprintf(what, sizeof what, "logits of every token, vocab block r=%d: ids %d..%d", r, r * Vq, r * Vq + Vq - 1);
    rp->logits_buf = tg_pb_buf(b, T, Vq, 1, what, "logits");
    rp->loss_buf = tg_pb_buf(b, 1, T, 1, "per-token loss, every token (the same on every rank)", "token_loss");
}

/* A step over all T tokens of this rank's vocab block. */
static tg_step *vocab_step(tg_builder *b, tg_step_kind kind, int layer, const char *op, const char *label)
{
    tg_step *s = tg_pb_step(b, kind, layer, op, -1);
    if (!s)
        return NULL;
    s->rows = b->pl->T;
    s->cols = b->pl->Vq;
    s->vocab0 = b->c.i * b->pl->Vq;
    s->nvalid = tg_lm_nvalid(b->pl, b->c.i);
    s->label = label;
    return s;
}

void tg_mglm_embed(tg_builder *b, tg_lm *lm, int x)
{
    const tg_plan *pl = b->pl;
    int T = pl->T, C = pl->spec.hidden;
    const int L = TG_LAYER_EMBED;
    tg_step *s = vocab_step(b, TG_STEP_EMBED, L, "embed",
                            pl->mesh.p > 1 ? "partial x = wte rows of the tokens in this rank's vocab block, zero elsewhere"
                                           : "x = wte rows of the tokens");
    if (!s)
        return;
    tg_pb_use(s, 0, b->rp->tok_buf, TG_ACC_R);
    tg_pb_use(s, 1, lm->wte, TG_ACC_R);
    tg_pb_use(s, 2, x, TG_ACC_W);
    s->boff = 0;
    s->cols = C;
    tg_pb_allreduce_exact(b, L, "embed", TG_WORLD, x, (long long)T * C, "the partial embedding rows");
    s = tg_pb_step(b, TG_STEP_POS_ADD, L, "pos", -1);
    if (!s)
        return;
    tg_pb_use(s, 0, x, TG_ACC_R | TG_ACC_W);
    tg_pb_use(s, 1, lm->wpe, TG_ACC_R);
    s->rows = T;
    s->cols = C;
    s->seq = pl->spec.seq;
    s->label = "x += wpe rows of the token positions (r mod seq)";
}

void tg_mglm_head(tg_builder *b, tg_lm *lm, int y)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    int T = pl->T, C = pl->spec.hidden, Vq = pl->Vq;
    const int L = TG_LAYER_HEAD;
    lm->y = y;
    lm->rs = tg_pb_buf(b, 1, T, 0, "per-token row sums of y", "lnf_sum");
    lm->xf = tg_pb_bf16_out(b, tg_pb_buf(b, T, C, 0, "ln_f(y), every token", "lnf_out"));
    if (!tg_pb_ln_rowsum(b, L, T, C, y, lm->rs, "row sums of y, whole rows"))
        return;
    rp->steps[rp->nsteps - 1].op = "ln_f"; /* plan_steps.c names the first layernorm's row sums "ln1" */
    lm->vs = tg_pb_layernorm(b, L, "ln_f", T, C, y, lm->rs, lm->lnf_g, lm->lnf_b, lm->xf,
                             "centred squares of y, whole rows", NULL);
    tg_step *s = tg_pb_gemm(b, L, "head", -1, 0, 1, T, Vq, C, lm->xf, C, tg_pb_operand(b, L, "head", lm->wte), C,
                            rp->logits_buf, Vq);
    if (!s)
        return;
    s->label = "logits = ln_f(y) @ E(this rank's vocab rows)^T, no communication";

    tg_lm_loss(b, lm, T, b->c.i, TG_WORLD, pl->mesh.p, world_sum);
}

void tg_mglm_head_bwd(tg_builder *b, tg_lm *lm, int g)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    int T = pl->T, C = pl->spec.hidden, Vq = pl->Vq;
    const int L = TG_LAYER_HEAD;
    int gwte = rp->params[lm->p_wte].grad;
    int dl = tg_lm_dlogits(b, lm, T, b->c.i, "dL/dlogits of every token, this rank's vocab block");
    if (dl < 0)
        return;
    tg_step *s;
    int dxf = tg_pb_buf(b, T, C, 0, "dL/d(ln_f output), partial then summed", "lnf_dout");
    dl = tg_pb_operand(b, L, "head", dl); /* bf16 plans: bf16 copies of dlogits and wte for both GEMMs */
    int wte = tg_pb_operand(b, L, "head", lm->wte);
    s = tg_pb_gemm(b, L, "head", -1, 0, 0, T, C, Vq, dl, Vq, wte, C, dxf, C);
    if (!s)
        return;
    s->label = "partial dX = dlogits @ E(this rank's vocab rows)";
    s = tg_pb_gemm(b, L, "head", -1, 1, 0, Vq, C, T, dl, Vq, lm->xf, C, gwte, C);
    if (!s)
        return;
    s->label = "dE(this rank's vocab rows) = dlogits^T @ ln_f(y)";
    tg_pb_allreduce_exact(b, L, "head", TG_WORLD, dxf, (long long)T * C, "the dL/d(ln_f output) partials");
    /* ln_f backward into g (zero before the backward: the loss does not read y); whole rows, no collective */
    int ggam = rp->params[lm->p_lnf_g].grad, gbet = rp->params[lm->p_lnf_b].grad;
    tg_pb_ln_bwd(b, L, "ln_f", T, C, dxf, lm->y, lm->rs, lm->vs, lm->lnf_g, g, ggam, gbet, NULL);
}

void tg_mglm_embed_bwd(tg_builder *b, tg_lm *lm, int g)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    int T = pl->T, C = pl->spec.hidden, P = pl->spec.positions;
    const int L = TG_LAYER_EMBED;
    int gwte = rp->params[lm->p_wte].grad, gwpe = rp->params[lm->p_wpe].grad;
    tg_step *s = vocab_step(b, TG_STEP_EMBED_BWD, L, "embed",
                            "dE(this rank's vocab rows) += dL/dx rows of the tokens in its vocab block");
    if (!s)
        return;
    tg_pb_use(s, 0, rp->tok_buf, TG_ACC_R);
    tg_pb_use(s, 1, g, TG_ACC_R);
    tg_pb_use(s, 2, gwte, TG_ACC_R | TG_ACC_W);
    s->boff = 0;
    s->cols = C;
    s = tg_pb_step(b, TG_STEP_POS_BWD, L, "pos", -1);
    if (!s)
        return;
    tg_pb_use(s, 0, g, TG_ACC_R);
    tg_pb_use(s, 1, gwpe, TG_ACC_W);
    s->rows = T;
    s->cols = C;
    s->seq = pl->spec.seq;
    s->count = (long long)P * C;
    s->label = "dwpe = dL/dx rows summed by position (whole, the same on every rank)";
}
