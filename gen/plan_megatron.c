/*
 * plan_megatron.c - the steps of the Megatron-LM 1-D scheme (Shoeybi et al.,
 * 2019) for one rank, a scheme planner of the planner's upper layer
 * (plan_schemes.h): it calls its language model (plan_megatron_lm.c), the
 * shared step sequences (plan_steps.c) and the builder's primitives
 * (plan_builder.c); plan.c calls it, then places the buffers and plans the
 * streams as for Tesseract.
 *
 * p ranks, rank r is class (r, 0). The residual stream x [T, C] (T = batch *
 * seq) is whole and bitwise identical on every rank. Rank r holds the Q, K
 * and V columns of heads r*H/p .. (r+1)*H/p - 1 of c_attn (three pieces, as a
 * Tesseract column block), rows [r*C/p, (r+1)*C/p) of attn.c_proj, columns
 * [r*F/p, (r+1)*F/p) of mlp.c_fc and the same rows of mlp.c_proj, the
 * matching pieces of the c_attn and c_fc biases; layernorm gammas and betas
 * and the two projection biases are whole on every rank. Per block:
 *
 *   forward   ln1 (whole rows, local) -> qkv = a1 @ Wqkv_r  [T,C]@[C,3C/p]
 *             -> attention of the H/p local heads -> proj partial = att @ Wo_r
 *             [T,C/p]@[C/p,C] -> ALL-REDUCE(world) -> x += proj + bo -> ln2
 *             -> fc1 [T,C]@[C,F/p] -> GeLU(+ b1_r) -> fc2 partial [T,F/p]@[F/p,C]
 *             -> ALL-REDUCE(world) -> x += fc2 + b2
 *   backward  the mirror: the gradients w.r.t. the inputs of the fc1 and the
 *             qkv GEMMs are partial sums over the ranks' heads and MLP
 *             columns: two ALL-REDUCEs(world) of [T, C]; weight gradients of
 *             the local pieces and of the whole vectors need nothing.
 *
 * Every all-reduce is exact (the same bits on every member), so the replicas
 * of x, of its gradient and of the whole parameters stay bitwise identical.
 */
#include "plan_schemes.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct mg_w {
    int ln1_g, ln1_b, qkv_w, qkv_b, o_w, o_b, ln2_g, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b; /* buffer ids */
    int first_param; /* index of ln_1.weight; the 12 follow in the order above */
} mg_w;

typedef struct mg_saved {
    int x_in, rs1, vs1, a1, qkv, att, x_mid, rs2, vs2, a2, u, g;
} mg_saved;

/* A whole tensor on every rank: one piece, replicas over world. */
static int whole(tg_builder *b, const char *name, int n)
{
    int id = tg_pb_param(b, name, 1, n, 0, 1, n);
    if (id < 0)
        return -1;
    tg_pb_piece(b, id, 0, 1, 0, n, 0);
    b->rp->params[id].replica = TG_WORLD;
    return b->rp->params[id].buf;
}

/* A piece [nr, nc] at (r0, c0) of a tensor no other rank holds. */
static int sharded(tg_builder *b, const char *name, int ndim, int full0, int full1, int r0, int nr, int c0, int nc)
{
    int id = tg_pb_param(b, name, ndim, full0, full1, nr, nc);
    if (id < 0)
        return -1;
    tg_pb_piece(b, id, r0, nr, c0, nc, 0);
    b->rp->params[id].replica = -1;
    return b->rp->params[id].buf;
}

static mg_w declare_weights(tg_builder *b, int l)
{
    const tg_plan *pl = b->pl;
    int C = pl->spec.hidden, F = pl->spec.ffn, r = b->c.i, Cp = pl->Hq * pl->D, Fp = pl->Fq;
    char nm[64];
    mg_w w;
    w.first_param = b->rp->nparams;
#define NAME(s) (snprintf(nm, sizeof nm, "h.%d.%s", l, s), nm)
    w.ln1_g = whole(b, NAME("ln_1.weight"), C);
    w.ln1_b = whole(b, NAME("ln_1.bias"), C);
    /* c_attn: HF order all Q | all K | all V; rank r takes the Q, K and V columns of its heads side by side */
    int id = tg_pb_param(b, NAME("attn.c_attn.weight"), 2, C, 3 * C, C, 3 * Cp);
    for (int s = 0; s < 3; s++)
        tg_pb_piece(b, id, 0, C, s * C + r * Cp, Cp, s * Cp);
    if (id >= 0)
        b->rp->params[id].replica = -1;
    w.qkv_w = id < 0 ? -1 : b->rp->params[id].buf;
    id = tg_pb_param(b, NAME("attn.c_attn.bias"), 1, 3 * C, 0, 1, 3 * Cp);
    for (int s = 0; s < 3; s++)
        tg_pb_piece(b, id, 0, 1, s * C + r * Cp, Cp, s * Cp);
    if (id >= 0)
        b->rp->params[id].replica = -1;
    w.qkv_b = id < 0 ? -1 : b->rp->params[id].buf;
    w.o_w = sharded(b, NAME("attn.c_proj.weight"), 2, C, C, r * Cp, Cp, 0, C);
    w.o_b = whole(b, NAME("attn.c_proj.bias"), C);
    w.ln2_g = whole(b, NAME("ln_2.weight"), C);
    w.ln2_b = whole(b, NAME("ln_2.bias"), C);
    w.fc1_w = sharded(b, NAME("mlp.c_fc.weight"), 2, C, F, 0, C, r * Fp, Fp);
    w.fc1_b = sharded(b, NAME("mlp.c_fc.bias"), 1, F, 0, 0, 1, r * Fp, Fp);
    w.fc2_w = sharded(b, NAME("mlp.c_proj.weight"), 2, F, C, r * Fp, Fp, 0, C);
    w.fc2_b = whole(b, NAME("mlp.c_proj.bias"), C);
#undef NAME
    return w;
}

static tg_step *gemm(tg_builder *b, int l, const char *op, int ta, int tb, int m, int n, int k, int A, int lda, int B,
                     int ldb, int C, int ldc, const char *label)
{
    /* bf16 plans: each fp32 operand is cast right before its GEMM (no broadcasts here to halve; docs/BF16.md) */
    A = tg_pb_operand(b, l, op, A);
    B = tg_pb_operand(b, l, op, B);
    tg_step *s = tg_pb_gemm(b, l, op, -1, ta, tb, m, n, k, A, lda, B, ldb, C, ldc);
    if (s)
        s->label = label;
    return s;
}

static void allreduce(tg_builder *b, int l, const char *op, int buf, const char *what)
{
    tg_pb_allreduce_exact(b, l, op, TG_WORLD, buf, (long long)b->pl->T * b->pl->spec.hidden, what);
}

/* Layernorm over whole rows of x [T, C], row sums in rs: no collective. Returns the sum of squared deviations. */
static int layernorm(tg_builder *b, int l, const char *op, int x, int rs, int gamma, int beta, int y)
{
    return tg_pb_layernorm(b, l, op, b->pl->T, b->pl->spec.hidden, x, rs, gamma, beta, y,
                           "centred squares of x, whole rows", NULL);
}

/* g += dx of y = LN(x) given dy (whole rows: the per-token sums need no collective); dgamma, dbeta whole. */
static void ln_bwd(tg_builder *b, int l, const char *op, int dy, int x, int rs, int vs, int gamma, int g, int dgamma,
                   int dbeta)
{
    tg_pb_ln_bwd(b, l, op, b->pl->T, b->pl->spec.hidden, dy, x, rs, vs, gamma, g, dgamma, dbeta, NULL);
}

static int build_layer(tg_builder *b, int l, const mg_w *w, int x, int *rs_carry, mg_saved *sv)
{
    const tg_plan *pl = b->pl;
    int T = pl->T, C = pl->spec.hidden, Cp = pl->Hq * pl->D, Fp = pl->Fq;
    int last = l == pl->spec.layers - 1, train = pl->spec.mode == TG_TRAIN, bf16 = pl->spec.dtype == TG_BF16;

    int rs1 = *rs_carry;
    if (rs1 < 0) {
        rs1 = tg_pb_buf(b, 1, T, 0, "per-token row sums of x", "L%d_ln1_sum", l);
        if (!tg_pb_ln_rowsum(b, l, T, C, x, rs1, "row sums of x, whole rows"))
            return -1;
    }
    int a1 = tg_pb_buf(b, T, C, 0, "LN1(x), every token", "L%d_ln1_out", l);
    int vs1 = layernorm(b, l, "ln1", x, rs1, w->ln1_g, w->ln1_b, a1);

    int qkv = tg_pb_buf(b, T, 3 * Cp, 0, "[Q|K|V] of this rank's heads", "L%d_qkv", l);
    gemm(b, l, "qkv", 0, 0, T, 3 * Cp, C, a1, C, w->qkv_w, 3 * Cp, qkv, 3 * Cp,
         "[Q|K|V] = LN1(x) @ Wqkv(:, heads of this rank), column-parallel");

    int att = tg_pb_buf(b, T, Cp, 0, "attention output of this rank's heads", "L%d_att", l);
    if (!tg_pb_attention(b, l, T, Cp, qkv, w->qkv_b, att))
        return -1;

    int p1 = tg_pb_buf(b, T, C, 0, "attention projection, partial then summed", "L%d_proj", l);
    gemm(b, l, "proj", 0, 0, T, C, Cp, att, Cp, w->o_w, C, p1, C,
         "partial proj = att @ Wo(rows of this rank's heads, :), row-parallel");
    allreduce(b, l, "proj", p1, "the attention projection partials");

    int rs2 = tg_pb_buf(b, 1, T, 0, "per-token row sums of x", "L%d_ln2_sum", l);
    int xm = train ? tg_pb_buf(b, T, C, 0, "residual stream after attention", "L%d_x_mid", l) : x;
    tg_pb_resid(b, l, "ln2", T, C, x, p1, w->o_b, rs2, xm,
                train ? "x_mid = x + proj + bias; row sums for ln2" : "x += proj + bias; row sums of x for ln2");
    int a2 = tg_pb_buf(b, T, C, 0, "LN2(x), every token", "L%d_ln2_out", l);
    int vs2 = layernorm(b, l, "ln2", xm, rs2, w->ln2_g, w->ln2_b, a2);

    int b1 = bf16 ? tg_pb_operand(b, l, "fc1", w->fc1_b) : w->fc1_b; /* a bf16 bias, as plan_tesseract.c's */
    int hh = tg_pb_buf(b, T, Fp, 0, "MLP hidden columns of this rank", "L%d_fc1_out", l);
    gemm(b, l, "fc1", 0, 0, T, Fp, C, a2, C, w->fc1_w, Fp, hh, Fp,
         "h = LN2(x) @ W1(:, columns of this rank), column-parallel");
    /* training: out of place (the backward reads u); bf16: g is bf16 (fc2's operand, written by the GeLU step or the
     * fused GEMM's epilogue, gen/fuse.c), no cast before fc2 */
    int g = train || bf16
                ? tg_pb_bf16_out(b, tg_pb_buf(b, T, Fp, 0, "GeLU output, this rank's columns", "L%d_gelu_out", l))
                : hh;
    int u = tg_pb_gelu(b, l, T, Fp, hh, b1, g);
    if (u < 0)
        return -1;

    int p2 = tg_pb_buf(b, T, C, 0, "MLP output, partial then summed", "L%d_fc2_out", l);
    gemm(b, l, "fc2", 0, 0, T, C, Fp, g, Fp, w->fc2_w, C, p2, C,
         "partial mlp = GeLU(h) @ W2(rows of this rank, :), row-parallel");
    allreduce(b, l, "fc2", p2, "the MLP output partials");
    int rs_next = last ? -1 : tg_pb_buf(b, 1, T, 0, "per-token row sums of x", "L%d_ln1_sum", l + 1);
    int xo = xm;
    if (train)
        xo = last ? tg_pb_buf(b, T, C, 1, "output of the last layer, every token", "y")
                  : tg_pb_buf(b, T, C, 0, "residual stream after the block", "L%d_x_out", l);
    tg_pb_resid(b, l, "fc2", T, C, xm, p2, w->fc2_b, rs_next, xo,
                last ? (train ? "y = x_mid + mlp + bias (block output)" : "x += mlp + bias (block output)")
                     : (train ? "x_out = x_mid + mlp + bias; row sums for the next ln1"
                              : "x += mlp + bias; row sums of x for the next ln1"));
    *rs_carry = rs_next;
    mg_saved out = {x, rs1, vs1, a1, qkv, att, xm, rs2, vs2, a2, u, g};
    *sv = out;
    return xo;
}

static void build_layer_bwd(tg_builder *b, int l, const mg_w *w, const mg_saved *sv, int g)
{
    const tg_plan *pl = b->pl;
    int T = pl->T, C = pl->spec.hidden, Cp = pl->Hq * pl->D, Fp = pl->Fq;
    enum { P_LN1_G, P_LN1_B, P_QKV_W, P_QKV_B, P_O_W, P_O_B, P_LN2_G, P_LN2_B, P_FC1_W, P_FC1_B, P_FC2_W, P_FC2_B };
#define GRAD(k) (b->rp->params[w->first_param + (k)].grad)

    /* MLP: y = x_mid + GeLU(LN2(x_mid) W1 + b1) W2 + b2; g = dL/dy, whole on every rank */
    gemm(b, l, "fc2", 1, 0, Fp, C, T, sv->g, Fp, g, C, GRAD(P_FC2_W), C, "dW2(this rank's rows) = GeLU(u)^T @ dy");
    tg_pb_colsum(b, l, "fc2", T, C, g, GRAD(P_FC2_B), "db2 = column sums of dy (whole)");
    int dgl = tg_pb_buf(b, T, Fp, 0, "dL/d(GeLU output), then dL/du, this rank's columns", "L%d_gelu_dout", l);
    gemm(b, l, "fc2", 0, 1, T, Fp, C, g, C, w->fc2_w, C, dgl, Fp, "dg = dy @ W2(this rank's rows, :)^T");
    int du = tg_pb_gelu_bwd(b, l, T, Fp, dgl, sv->u); /* bf16: its own bf16 buffer, which the fc1 GEMMs read */
    if (du < 0)
        return;
    gemm(b, l, "fc1", 1, 0, C, Fp, T, sv->a2, C, dgl, Fp, GRAD(P_FC1_W), Fp, "dW1(:, this rank's columns) = LN2^T @ du");
    tg_pb_colsum(b, l, "fc1", T, Fp, du, GRAD(P_FC1_B), "db1 = column sums of du, this rank's columns");
    int da2 = tg_pb_buf(b, T, C, 0, "dL/d(LN2 output), partial then summed", "L%d_ln2_dout", l);
    gemm(b, l, "fc1", 0, 1, T, C, Fp, dgl, Fp, w->fc1_w, Fp, da2, C, "partial dLN2 = du @ W1(:, this rank's columns)^T");
    allreduce(b, l, "fc1", da2, "the dL/d(LN2 output) partials");
    ln_bwd(b, l, "ln2", da2, sv->x_mid, sv->rs2, sv->vs2, w->ln2_g, g, GRAD(P_LN2_G), GRAD(P_LN2_B));

    /* attention: x_mid = x + Attn(LN1(x) Wqkv + bqkv) Wo + bo; g = dL/dx_mid */
    gemm(b, l, "proj", 1, 0, Cp, C, T, sv->att, Cp, g, C, GRAD(P_O_W), C, "dWo(this rank's rows) = att^T @ dx_mid");
    tg_pb_colsum(b, l, "proj", T, C, g, GRAD(P_O_B), "dbo = column sums of dx_mid (whole)");
    int datt = tg_pb_buf(b, T, Cp, 0, "dL/d(attention output), this rank's heads", "L%d_att_dout", l);
    gemm(b, l, "proj", 0, 1, T, Cp, C, g, C, w->o_w, C, datt, Cp, "datt = dx_mid @ Wo(this rank's rows, :)^T");
    int dqkv = tg_pb_buf(b, T, 3 * Cp, 0, "dL/d[Q|K|V] of this rank's heads", "L%d_qkv_dout", l);
    if (!tg_pb_attention_bwd(b, l, T, Cp, sv->qkv, datt, dqkv))
        return;
    gemm(b, l, "qkv", 1, 0, C, 3 * Cp, T, sv->a1, C, dqkv, 3 * Cp, GRAD(P_QKV_W), 3 * Cp,
         "dWqkv(:, this rank's heads) = LN1^T @ dqkv");
    /* attention = "cudnn": the bias gradient sums cuDNN's bf16 dQKV (the CUDA program has no fp32 dqkv) */
    tg_pb_colsum(b, l, "qkv", T, 3 * Cp,
                 b->pl->spec.attention == TG_ATTN_CUDNN ? tg_pb_operand(b, l, "qkv", dqkv) : dqkv, GRAD(P_QKV_B),
                 "dbqkv = column sums of dqkv, this rank's heads");
    int da1 = tg_pb_buf(b, T, C, 0, "dL/d(LN1 output), partial then summed", "L%d_ln1_dout", l);
    gemm(b, l, "qkv", 0, 1, T, C, 3 * Cp, dqkv, 3 * Cp, w->qkv_w, 3 * Cp, da1, C,
         "partial dLN1 = dqkv @ Wqkv(:, this rank's heads)^T");
    allreduce(b, l, "qkv", da1, "the dL/d(LN1 output) partials");
    ln_bwd(b, l, "ln1", da1, sv->x_in, sv->rs1, sv->vs1, w->ln1_g, g, GRAD(P_LN1_G), GRAD(P_LN1_B));
#undef GRAD
}

void tg_plan_megatron(tg_builder *b, bool shards_only)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    int L = pl->spec.layers, train = pl->spec.mode == TG_TRAIN;
    mg_w *w = malloc((size_t)L * sizeof *w);
    mg_saved *sv = malloc((size_t)L * sizeof *sv);
    if (!w || !sv) {
        free(w);
        free(sv);
        b->oom = true;
        return;
    }
    tg_lm lm;
    int lmod = pl->V > 0; /* the whole GPT-2 (plan_megatron_lm.c) */
    rp->tok_buf = rp->tgt_buf = rp->logits_buf = rp->loss_buf = -1;
    rp->pairs_buf = rp->dtok_buf = rp->dpos_buf = rp->dlogits_buf = rp->dpairs_buf = rp->kv_buf0 = -1;
    if (lmod)
        tg_mglm_declare_embedding(b, &lm);
    for (int l = 0; l < L; l++)
        w[l] = declare_weights(b, l);
    if (lmod)
        tg_mglm_declare_final(b, &lm);
    rp->x_buf = tg_pb_buf(b, pl->T, pl->spec.hidden, 1,
                          train ? "residual stream, every token: input in" : "residual stream, every token: input in, "
                                                                             "output out",
                          "x");
    rp->gx_buf = train ? tg_pb_buf(b, pl->T, pl->spec.hidden, 1, "gradient, every token: dL/dy in, dL/dx out",
                                   "grad_x")
                       : -1;
    rp->y_buf = rp->x_buf;
    if (!shards_only) {
        int rs = -1, x = rp->x_buf;
        if (lmod && !b->oom)
            tg_mglm_embed(b, &lm, x);
        for (int l = 0; l < L && !b->oom; l++)
            x = build_layer(b, l, &w[l], x, &rs, &sv[l]);
        rp->y_buf = x;
        if (lmod && !b->oom)
            tg_mglm_head(b, &lm, x);
        if (train) {
            b->phase = TG_PHASE_BWD;
            if (lmod && !b->oom)
                tg_mglm_head_bwd(b, &lm, rp->gx_buf);
            for (int l = L - 1; l >= 0 && !b->oom; l--)
                build_layer_bwd(b, l, &w[l], &sv[l], rp->gx_buf);
            if (lmod && !b->oom)
                tg_mglm_embed_bwd(b, &lm, rp->gx_buf);
            b->phase = TG_PHASE_OPT;
            if (!b->oom)
                tg_pb_optimizer(b);
        }
    }
    free(w);
    free(sv);
}
