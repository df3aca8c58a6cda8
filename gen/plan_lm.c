/*
 * plan_lm.c - the language model around the block stack (spec model.vocab;
 * docs/MODEL.md): token and position embedding, ln_f, the LM head tied to the
 * token embedding and a vocab-parallel cross-entropy, forward and backward,
 * on the Tesseract layout. No rank ever holds a [tokens, vocab] array: rank
 * (i,j,k) holds logits(h, vocab block j) [R, Vq].
 *
 * wte [V, C] is padded to Vp = q*Vq rows (Vq = ceil(V/q) rounded up to
 * model.vocab_align) and split like any
 * matrix: block E(a,b) [Vq, Cq] on ranks (a, b, every k), replica group dep;
 * its pad rows are zero (the runtime sets them at load, their gradient is
 * zero). wpe [P, C] is split by columns like a vector: [P, Cq] on (*, j, *),
 * replica group coldep. The embedding is a sum of partial rows reduced over
 * the column group; the head is the ABT pattern of the backward (bcast E over
 * col, P = x E^T, reduce over row); the loss needs an all-reduce(max) and one
 * of [2, R] sums over the row. The backward reuses the same broadcasts: one of
 * dlogits over row and of E over col per step t serve dX (SUMMA form) and dE
 * (ATB form, reduced over col). The steps that do not depend on the layout
 * are plan_steps.c's (the layernorm, the loss over a logits block); everything
 * else is here. Design: part of the Tesseract scheme's planner (the upper
 * layer, plan_schemes.h): only plan_tesseract.c calls it, and it calls only
 * plan_steps.c and the builder.
 */
#include "plan_schemes.h"

#include <stdio.h>

/* ---- shards ------------------------------------------------------------------------------------------------ */

/* E(i, j): vocab rows i*Vq.. (those below V come from the file, the rest are zero pad), columns j*Cq.. Pipeline
 * stages: stage 0 declares it for the embedding and the last stage its tied copy for the head (tg_lm_declare_tied) */
static void declare_wte(tg_builder *b, tg_lm *lm)
{
    const tg_plan *pl = b->pl;
    int C = pl->spec.hidden, Cq = pl->Cq, Vq = pl->Vq, V = pl->V;
    int i = b->c.i, j = b->c.j;
    lm->p_wte = tg_pb_param(b, "wte.weight", 2, V, C, Vq, Cq);
    int nr = V - i * Vq < Vq ? V - i * Vq : Vq;
    if (nr > 0)
        tg_pb_piece(b, lm->p_wte, i * Vq, nr, j * Cq, Cq, 0);
    lm->wte = lm->p_wte < 0 ? -1 : b->rp->params[lm->p_wte].buf;
    if (lm->wte >= 0) /* the row gather reads wte: fp32 in every plan (docs/BF16.md) */
        b->rp->bufs[lm->wte].dtype = TG_BUF_F32;
    lm->gwte_part = -1; /* set by the head's backward (tg_lm_head_bwd) where the stage has the head */
}

void tg_lm_declare_embedding(tg_builder *b, tg_lm *lm)
{
    const tg_plan *pl = b->pl;
    int C = pl->spec.hidden, Cq = pl->Cq, P = pl->spec.positions;
    int j = b->c.j;
    declare_wte(b, lm);
    /* wpe column block j: every position, on every (i, k) */
    lm->p_wpe = tg_pb_param(b, "wpe.weight", 2, P, C, P, Cq);
    tg_pb_piece(b, lm->p_wpe, 0, P, j * Cq, Cq, 0);
    tg_pb_param_replica(b, lm->p_wpe, TG_COLDEP);
    lm->wpe = lm->p_wpe < 0 ? -1 : b->rp->params[lm->p_wpe].buf;
    if (lm->wpe >= 0) /* read by the position add: fp32 */
        b->rp->bufs[lm->wpe].dtype = TG_BUF_F32;
}

void tg_lm_declare_tied(tg_builder *b, tg_lm *lm)
{
    declare_wte(b, lm);
    lm->p_wpe = lm->wpe = -1;
}

/* The token ids the embedding (and its backward) reads: q row blocks of the depth layer, of every micro-batch. */
void tg_lm_declare_tokens(tg_builder *b, tg_lm *lm)
{
    tg_class_plan *rp = b->rp;
    int q = b->pl->mesh.q, R = b->pl->R, mb = b->pl->mb;
    rp->tok_buf = tg_pb_io_buf(b, 1, q * R * mb, R,
                               "token ids of row blocks q*k..q*k+q-1 (int32, the runtime fills them)", "tokens");
    if (rp->tok_buf >= 0)
        rp->bufs[rp->tok_buf].dtype = TG_BUF_I32;
    lm->tok = rp->tok_buf;
    lm->pos = -1; /* the decode step's positions: generation only */
}

static int lm_vec(tg_builder *b, const char *name, int *param)
{
    int C = b->pl->spec.hidden, Cq = b->pl->Cq;
    *param = tg_pb_param(b, name, 1, C, 0, 1, Cq);
    tg_pb_piece(b, *param, 0, 1, b->c.j * Cq, Cq, 0);
    return *param < 0 ? -1 : b->rp->params[*param].buf;
}

void tg_lm_declare_final(tg_builder *b, tg_lm *lm)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    int R = pl->R, Vq = pl->Vq, j = b->c.j;
    char what[100];
    lm->lnf_g = lm_vec(b, "ln_f.weight", &lm->p_lnf_g);
    lm->lnf_b = lm_vec(b, "ln_f.bias", &lm->p_lnf_b);
    /* micro-batches: each holds the rank's whole batch, the steps see the rows of micro-batch c->mb (R here) */
    int mb = pl->mb;
    if (pl->stage == 0) /* the embedding's ids; pipeline stages: only the first stage has the embedding */
        tg_lm_declare_tokens(b, lm);
    else
        rp->tok_buf = lm->tok = -1;
    rp->tgt_buf = tg_pb_io_buf(b, 1, R * mb, R, "target ids of row block {h} (int32, the runtime fills them)",
                               "targets");
    if (rp->tgt_buf >= 0)
        rp->bufs[rp->tgt_buf].dtype = TG_BUF_I32;
    snprintf(what, sizeof what, "logits(h={h}, vocab block j=%d): ids %d..%d", j, j * Vq, j * Vq + Vq - 1);
    rp->logits_buf = tg_pb_io_buf(b, R * mb, Vq, (long long)R * Vq, what, "logits");
    rp->loss_buf = tg_pb_io_buf(b, 1, R * mb, R, "per-token loss of row block {h} (the same on every j)",
                                "token_loss");
    lm->logits = rp->logits_buf;
    lm->pos = -1;
}

/* ---- forward ----------------------------------------------------------------------------------------------- */

/* The receive buffers of a broadcast of buffer `like` (its shape and element type): two alternate when q >= 3. */
static void recv_pair(tg_builder *b, int like, const char *what, const char *name, int *out)
{
    int q = b->pl->mesh.q, n = q >= 3 ? 2 : 1;
    out[0] = out[1] = -1;
    for (int r = 0; q > 1 && r < n; r++)
        out[r] = tg_pb_buf_like(b, like, what, "%s%s", name, n == 1 ? "" : (r ? "1" : "0"));
}

void tg_lm_embed(tg_builder *b, tg_lm *lm, int x)
{
    const tg_plan *pl = b->pl;
    int q = pl->mesh.q, R = pl->R, Cq = pl->Cq, Vq = pl->Vq, i = b->c.i;
    const int L = TG_LAYER_EMBED;
    int part = q > 1 ? tg_pb_buf(b, R, Cq, 0, "partial embedding rows of row block h' (this rank's vocab block)",
                                 "embed_part")
                     : -1;
    for (int t = 0; t < q; t++) {
        /* rows of row block h' = t + q*k: wte rows of the tokens in vocab block i, zero for the others */
        int target = (i == t) ? x : part;
        tg_step *s = tg_pb_step(b, TG_STEP_EMBED, L, "embed", t);
        if (!s)
            return;
        tg_pb_use(s, 0, lm->tok, TG_ACC_R);
        tg_pb_use(s, 1, lm->wte, TG_ACC_R);
        tg_pb_use(s, 2, target, TG_ACC_W);
        s->boff = t * R * pl->mb; /* row block h' of the whole batch; the view adds the micro-batch's rows */
        s->rows = R;
        s->cols = Cq;
        s->vocab0 = i * Vq;
        s->nvalid = tg_lm_nvalid(pl, i);
        s->label = q > 1 ? "partial x(h'=t+q*k, j) = wte rows of its tokens in vocab block i, zero elsewhere"
                         : "x(h, 0) = wte rows of the tokens";
        if (q > 1) {
            s = tg_pb_reduce(b, L, "embed", t, TG_COL, target, (long long)R * Cq);
            if (!s)
                return;
            s->desc = TG_D_LABEL;
            s->label = "reduce(sum) partial embedding rows over col to local root t: x(h'=t+q*k, j)";
        }
    }
    tg_step *s = tg_pb_step(b, TG_STEP_POS_ADD, L, "pos", -1);
    if (!s)
        return;
    tg_pb_use(s, 0, x, TG_ACC_R | TG_ACC_W);
    tg_pb_use(s, 1, lm->wpe, TG_ACC_R);
    s->rows = R;
    s->cols = Cq;
    s->seq = pl->spec.seq;
    s->label = "x += wpe rows of the token positions (r mod seq)";
    if (lm->pos >= 0) { /* the decode step: each row at its sequence's position */
        tg_pb_use(s, 2, lm->pos, TG_ACC_R);
        s->label = "x += wpe rows of the sequences' positions";
    }
}

/* The decode step's head with the weights staying put (docs/GENERATE.md "The head"): rank (i,j) holds E(i,j), the
 * wte block of vocab block i and feature block j, and the column j holds ln_f(y) of every row block of the depth in
 * feature block j. So: copy the own block xf(i,j) [R,Cq] into slot i of G [q*R, Cq]; all-gather G over the column
 * (G = xf(:,j)); P = G @ E(i,j)^T [q*R, Vq], the partial over feature block j of the logits of vocab block i for
 * every row block; reduce-scatter P over the row (member order j): slice j, summed over the row's q feature blocks, is
 * logits(row block j, vocab block i), copied into the logits [R, Vq]. The logits come out transposed against the
 * SUMMA head's (rank (i,j): row block j, vocab block i; rp->dec_logits_t), which the greedy choice and the runtime
 * follow. No weight moves: per rank (q-1) R Cq elements gathered and (q-1) R Vq reduced, against SUMMA's (q-1) Vq Cq
 * of wte broadcast and (q-1) R Vq reduced. */
static void head_stationary(tg_builder *b, tg_lm *lm)
{
    const tg_plan *pl = b->pl;
    int q = pl->mesh.q, R = pl->R, Cq = pl->Cq, Vq = pl->Vq, i = b->c.i, j = b->c.j;
    const int L = TG_LAYER_HEAD;
    int x = tg_pb_operand(b, L, "head", lm->xf), wte = tg_pb_operand(b, L, "head", lm->wte);
    int G = tg_pb_buf(b, q * R, Cq, 0, "ln_f(y)(:, j) of the depth's row blocks, gathered for the head (weight-stationary)",
                      "head_xg");
    int P = tg_pb_buf(b, q * R, Vq, 0, "partial logits xf(:, j) @ E(i, j)^T, reduce-scattered over row", "head_part");
    if (G < 0 || P < 0 || x < 0)
        return;
    b->rp->bufs[G].dtype = b->rp->bufs[x].dtype; /* bf16 in a bf16 plan: the gather moves what the GEMM reads */
    long long xb = (long long)R * Cq, yb = (long long)R * Vq;
    if (!tg_pb_copy(b, L, "head", x, 0, G, i * xb, xb, "own block xf(h, j) into slot i of the gathered xf(:, j)") ||
        !tg_pb_ws_collective(b, L, "head", TG_STEP_ALLGATHER, TG_COL, G, q * xb, "xf(:, j), a block [R, C/q] a member"))
        return;
    tg_step *s = tg_pb_gemm(b, L, "head", -1, 0, 1, q * R, Vq, Cq, G, Cq, wte, Cq, P, Vq);
    if (!s)
        return;
    s->desc = TG_D_LABEL;
    s->label = "P = xf(:, j) @ E(i, j)^T: the partial over feature block j of vocab block i's logits, every row block";
    if (!tg_pb_ws_collective(b, L, "head", TG_STEP_REDUCESCATTER, TG_ROW, P, q * yb,
                             "P: slice j = logits(row block j, vocab block i), member order"))
        return;
    tg_pb_copy(b, L, "head", P, j * yb, lm->logits, 0, yb, "slice j of P: logits(row block j, vocab block i)");
    b->rp->dec_logits_t = 1;
}

void tg_lm_head(tg_builder *b, tg_lm *lm, int y)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    int q = pl->mesh.q, R = pl->R, Cq = pl->Cq, Vq = pl->Vq, i = b->c.i, j = b->c.j;
    const int L = TG_LAYER_HEAD;
    lm->y = y;
    /* ln_f */
    lm->rs = tg_pb_buf(b, 1, R, 0, "per-token local row sums of y", "lnf_sum");
    lm->xf = tg_pb_bf16_out(b, tg_pb_buf(b, R, Cq, 0, "ln_f(y) block (h, j)", "lnf_out"));
    if (!tg_pb_ln_rowsum(b, L, R, Cq, y, lm->rs, "row sums of y, local columns"))
        return;
    rp->steps[rp->nsteps - 1].op = "ln_f"; /* plan_steps.c names the first layernorm's row sums "ln1" */
    lm->vs = tg_pb_layernorm(b, L, "ln_f", R, Cq, y, lm->rs, lm->lnf_g, lm->lnf_b, lm->xf,
                             "centred squares of y, local columns", tg_pb_allreduce_row);
    if (pl->spec.mode == TG_GENERATE && b->phase == TG_PHASE_DEC && pl->layout_dec == TG_LAYOUT_STATIONARY && q > 1) {
        head_stationary(b, lm);
        return;
    }
    /* logits(h, vocab block t) = sum_j xf(h, j) @ E(t, j)^T: bcast E over col, reduce over row to root t */
    int recv_e[2], nr = q >= 3 ? 2 : 1, ne = 0;
    char what[100];
    snprintf(what, sizeof what, "E(t, j=%d) received over col for the head", j);
    int wte = tg_pb_operand(b, L, "head", lm->wte); /* bf16 plans: a bf16 copy of the fp32 wte */
    recv_pair(b, wte, what, "recv_head_e", recv_e);
    int part = q > 1 ? tg_pb_buf(b, R, Vq, 0, "partial logits(h={h}, vocab block t), reduced over row", "head_part")
                     : -1;
    for (int t = 0; t < q; t++) {
        int E = (i == t) ? wte : recv_e[ne++ % nr];
        if (q > 1) {
            tg_step *s = tg_pb_bcast(b, L, "head", t, TG_COL, E, (long long)Vq * Cq, "");
            if (!s)
                return;
            s->desc = TG_D_LABEL;
            s->label = "bcast E(t, j) (wte vocab block t, columns j) over col from local root t";
        }
        int target = (j == t) ? lm->logits : part;
        tg_step *s = tg_pb_gemm(b, L, "head", t, 0, 1, R, Vq, Cq, lm->xf, Cq, E, Cq, target, Vq);
        if (!s)
            return;
        s->label = "P = ln_f(y)(h, j) @ E(t, j)^T: partial logits of vocab block t";
        if (q > 1) {
            s = tg_pb_reduce(b, L, "head", t, TG_ROW, target, (long long)R * Vq);
            if (!s)
                return;
            s->desc = TG_D_LABEL;
            s->label = "reduce(sum) P over row to local root t: logits(h, vocab block t)";
        }
    }
    /* the loss: max, then (sum of exponentials, target logit), each over the row (generation: the argmax instead,
     * plan_tesseract.c) */
    if (pl->spec.mode != TG_GENERATE)
        tg_lm_loss(b, lm, R, j, TG_ROW, q, tg_pb_allreduce_row);
}

/* ---- backward ---------------------------------------------------------------------------------------------- */

void tg_lm_head_bwd(tg_builder *b, tg_lm *lm, int g)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    int q = pl->mesh.q, R = pl->R, Cq = pl->Cq, Vq = pl->Vq, i = b->c.i, j = b->c.j;
    const int L = TG_LAYER_HEAD;
    int gwte = lm->gwte_part = tg_pb_grad_target(b, rp->params[lm->p_wte].grad); /* tg_lm_embed_bwd adds to it */
    int dl = tg_lm_dlogits(b, lm, R, j, "dL/dlogits(h={h}, vocab block j)");
    if (dl < 0)
        return;
    tg_step *s;

    int dxf = tg_pb_buf(b, R, Cq, 0, "dL/d(ln_f output) (h, j)", "lnf_dout");
    int recv_d[2], recv_e[2], nr = q >= 3 ? 2 : 1, nd = 0, ne = 0;
    char what[100];
    int dl16 = tg_pb_operand(b, L, "head", dl), wte = tg_pb_operand(b, L, "head", lm->wte); /* bf16 plans */
    recv_pair(b, dl16, "dlogits(h={h}, vocab block t) received over row", "recv_head_dl", recv_d);
    snprintf(what, sizeof what, "E(t, j=%d) received over col for the head backward", j);
    recv_pair(b, wte, what, "recv_head_de", recv_e);
    int part = q > 1 ? tg_pb_buf(b, Vq, Cq, 0, "partial dE(t, j), reduced over col", "head_de_part") : -1;
    for (int t = 0; t < q; t++) {
        int D = (j == t) ? dl16 : recv_d[nd++ % nr];
        int E = (i == t) ? wte : recv_e[ne++ % nr];
        if (q > 1) {
            s = tg_pb_bcast(b, L, "head", t, TG_ROW, D, (long long)R * Vq, "");
            if (!s)
                return;
            s->desc = TG_D_LABEL;
            s->label = "bcast dlogits(h, vocab block t) over row from local root t";
            s = tg_pb_bcast(b, L, "head", t, TG_COL, E, (long long)Vq * Cq, "");
            if (!s)
                return;
            s->desc = TG_D_LABEL;
            s->label = "bcast E(t, j) over col from local root t";
        }
        s = tg_pb_gemm(b, L, "head", t, 0, 0, R, Cq, Vq, D, Vq, E, Cq, dxf, Cq);
        if (!s)
            return;
        if (t > 0) {
            s->beta = 1.0f;
            s->acc[2] = TG_ACC_R | TG_ACC_W;
        }
        s->label = "dX(h, j) += dlogits(h, t) @ E(t, j)";
        int target = (i == t) ? gwte : part;
        s = tg_pb_gemm(b, L, "head", t, 1, 0, Vq, Cq, R, D, Vq, lm->xf, Cq, target, Cq);
        if (!s)
            return;
        s->label = "P = dlogits(h, t)^T @ ln_f(y)(h, j): partial dE(t, j)";
        if (q > 1) {
            s = tg_pb_reduce(b, L, "head", t, TG_COL, target, (long long)Vq * Cq);
            if (!s)
                return;
            s->desc = TG_D_LABEL;
            s->label = "reduce(sum) P over col to local root t: dE(t, j) of this depth";
        }
    }
    /* ln_f backward into g (zero before the backward: the loss does not read y) */
    int ggam = rp->params[lm->p_lnf_g].grad, gbet = rp->params[lm->p_lnf_b].grad;
    int pg = tg_pb_grad_target(b, ggam), pb = tg_pb_grad_target(b, gbet);
    if (!tg_pb_ln_bwd(b, L, "ln_f", R, Cq, dxf, lm->y, lm->rs, lm->vs, lm->lnf_g, g, pg, pb, tg_pb_allreduce_row))
        return;
    tg_pb_grad_acc(b, L, "ln_f", ggam, pg);
    tg_pb_grad_acc(b, L, "ln_f", gbet, pb);
    tg_pb_grad_allreduce(b, L, "ln_f", TG_COLDEP, ggam, Cq, "dgamma over every row block");
    tg_pb_grad_allreduce(b, L, "ln_f", TG_COLDEP, gbet, Cq, "dbeta over every row block");
}

void tg_lm_embed_bwd(tg_builder *b, tg_lm *lm, int g)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    int q = pl->mesh.q, R = pl->R, Cq = pl->Cq, Vq = pl->Vq, i = b->c.i, P = pl->spec.positions;
    const int L = TG_LAYER_EMBED;
    int gwte = rp->params[lm->p_wte].grad, gwpe = rp->params[lm->p_wpe].grad;
    /* pipeline stages: without the head on this stage nothing wrote this micro-batch's wte part first, so the first
     * adds start from zero (zero_first) */
    int headless = lm->gwte_part < 0;
    int pwte = headless ? tg_pb_grad_target(b, gwte) : lm->gwte_part, pwpe = tg_pb_grad_target(b, gwpe);
    int recv_g[2], nr = q >= 3 ? 2 : 1, ng = 0;
    recv_pair(b, g, "dL/dx(h'=t+q*k, j) received over col", "recv_embed_g", recv_g);
    for (int t = 0; t < q; t++) {
        int G = (i == t) ? g : recv_g[ng++ % nr];
        tg_step *s;
        if (q > 1) {
            s = tg_pb_bcast(b, L, "embed", t, TG_COL, G, (long long)R * Cq, "");
            if (!s)
                return;
            s->desc = TG_D_LABEL;
            s->label = "bcast dL/dx(h'=t+q*k, j) over col from local root t";
        }
        s = tg_pb_step(b, TG_STEP_EMBED_BWD, L, "embed", t);
        if (!s)
            return;
        tg_pb_use(s, 0, rp->tok_buf, TG_ACC_R);
        tg_pb_use(s, 1, G, TG_ACC_R);
        tg_pb_use(s, 2, pwte, TG_ACC_R | TG_ACC_W);
        s->boff = t * R * pl->mb; /* row block h' of the whole batch; the view adds the micro-batch's rows */
        s->rows = R;
        s->cols = Cq;
        s->vocab0 = i * Vq;
        s->nvalid = tg_lm_nvalid(pl, i);
        s->label = "dE(i, j) += dL/dx rows of the tokens of row block h' in vocab block i";
        if (headless && t == 0) {
            s->zero_first = true;
            s->acc[2] = TG_ACC_W; /* zeroed, then added to: written first */
            s->count = (long long)Vq * Cq;
            s->label = "dE(i, j) = 0, += dL/dx rows of the tokens of row block h' in vocab block i (the head's part "
                       "is on the last stage)";
        }
    }
    tg_step *s = tg_pb_step(b, TG_STEP_POS_BWD, L, "pos", -1);
    if (!s)
        return;
    tg_pb_use(s, 0, g, TG_ACC_R);
    tg_pb_use(s, 1, pwpe, TG_ACC_W);
    s->rows = R;
    s->cols = Cq;
    s->seq = pl->spec.seq;
    s->count = (long long)P * Cq;
    s->label = "dwpe(:, j) = dL/dx rows of this rank's tokens summed by position";
    tg_pb_grad_acc(b, L, "pos", gwpe, pwpe);
    tg_pb_grad_acc(b, L, "embed", gwte, pwte);
    tg_pb_grad_allreduce(b, L, "pos", TG_COLDEP, gwpe, (long long)P * Cq, "dwpe over every row block");
    tg_pb_grad_allreduce(b, L, "embed", TG_DEP, gwte, (long long)Vq * Cq,
                         "dE (head and embedding) over the depth layers");
}

void tg_lm_tied_grad(tg_builder *b, tg_lm *lm)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    int gwte = rp->params[lm->p_wte].grad;
    tg_pb_grad_acc(b, TG_LAYER_HEAD, "head", gwte, lm->gwte_part);
    tg_pb_grad_allreduce(b, TG_LAYER_HEAD, "head", TG_DEP, gwte, (long long)pl->Vq * pl->Cq,
                         "dE (the tied head's part) over the depth layers");
}
