/*
 * plan.c - the top of the planner: bakes the program of one rank class and its
 * memory plan (see plan.h for the step sequence of one block). Per class:
 *   1. the scheme's planner (plan_tesseract.c or plan_megatron.c) declares the
 *      weight shards (buffers + which pieces of which tensor) and
 *   2. appends the steps of every layer, each naming the buffers it reads and
 *      writes, with roots and counts taken from mesh.c;
 *   3. here: derive lifetimes from the steps and place buffers in the arena,
 *   4. decide each step's stream and cross-stream wait (streams.c),
 *   5. mark the GEMMs whose GeLU step a backend may run as their epilogue (fuse.c).
 * Invariants that would make the generated program wrong (a buffer read
 * before it is written, two live buffers sharing bytes) are checked here and
 * reported as internal errors rather than emitted.
 *
 * Design: the planner's files call one way (docs/ARCHITECTURE.md, "The
 * planner's layers"): this file -> the scheme planners (plan_schemes.h) ->
 * the step sequences they share (plan_steps.c) -> the builder's primitives
 * (plan_builder.c). Passes 3 to 5 and the public entry points (plan.h) are
 * the same for every scheme; the only scheme-specific code here is the choice
 * of planner and the mesh's local shapes (tg_plan_init). tools/plandeps.py
 * fails the unit checks if a lower file ever calls back up.
 */
#include "plan.h"
#include "plan_schemes.h"
#include "fuse.h"
#include "place.h"
#include "streams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the Tesseract scheme (moves to plan_tesseract.c) ---------------------------------------------------- */

/* ---- weight shards ---------------------------------------------------------------- */

typedef struct layer_w {
    int ln1_g, ln1_b, qkv_w, qkv_b, o_w, o_b, ln2_g, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b; /* buffer ids */
    int first_param; /* index of ln_1.weight in rp->params; the 12 follow in the order above */
} layer_w;

/* A vector parameter [n] split in q blocks; rank column j holds block j. */
static int vec_param(tg_builder *b, const char *name, int n)
{
    int q = b->pl->mesh.q, j = b->c.j, nq = n / q;
    int id = tg_pb_param(b, name, 1, n, 0, 1, nq);
    tg_pb_piece(b, id, 0, 1, j * nq, nq, 0);
    return id < 0 ? -1 : b->rp->params[id].buf;
}

/* A matrix [rin, cin] split q x q; rank (i,j) holds block (i,j). */
static int mat_param(tg_builder *b, const char *name, int rin, int cout)
{
    int q = b->pl->mesh.q, i = b->c.i, j = b->c.j;
    int id = tg_pb_param(b, name, 2, rin, cout, rin / q, cout / q);
    tg_pb_piece(b, id, i * (rin / q), rin / q, j * (cout / q), cout / q, 0);
    return id < 0 ? -1 : b->rp->params[id].buf;
}

static layer_w declare_layer_weights(tg_builder *b, int l)
{
    const tg_plan *pl = b->pl;
    int C = pl->spec.hidden, F = pl->spec.ffn, q = pl->mesh.q, Cq = pl->Cq;
    int i = b->c.i, j = b->c.j;
    char nm[64];
    layer_w w;
    w.first_param = b->rp->nparams;
#define NAME(s) (snprintf(nm, sizeof nm, "h.%d.%s", l, s), nm)
    w.ln1_g = vec_param(b, NAME("ln_1.weight"), C);
    w.ln1_b = vec_param(b, NAME("ln_1.bias"), C);
    /* c_attn: HF order is all Q | all K | all V; block j takes the Q, K and V
     * columns of head group j, side by side (DESIGN.md section 3). */
    int id = tg_pb_param(b, NAME("attn.c_attn.weight"), 2, C, 3 * C, C / q, 3 * Cq);
    for (int s = 0; s < 3; s++)
        tg_pb_piece(b, id, i * Cq, Cq, s * C + j * Cq, Cq, s * Cq);
    w.qkv_w = id < 0 ? -1 : b->rp->params[id].buf;
    id = tg_pb_param(b, NAME("attn.c_attn.bias"), 1, 3 * C, 0, 1, 3 * Cq);
    for (int s = 0; s < 3; s++)
        tg_pb_piece(b, id, 0, 1, s * C + j * Cq, Cq, s * Cq);
    w.qkv_b = id < 0 ? -1 : b->rp->params[id].buf;
    w.o_w = mat_param(b, NAME("attn.c_proj.weight"), C, C);
    w.o_b = vec_param(b, NAME("attn.c_proj.bias"), C);
    w.ln2_g = vec_param(b, NAME("ln_2.weight"), C);
    w.ln2_b = vec_param(b, NAME("ln_2.bias"), C);
    w.fc1_w = mat_param(b, NAME("mlp.c_fc.weight"), C, F);
    w.fc1_b = vec_param(b, NAME("mlp.c_fc.bias"), F);
    w.fc2_w = mat_param(b, NAME("mlp.c_proj.weight"), F, C);
    w.fc2_b = vec_param(b, NAME("mlp.c_proj.bias"), C);
#undef NAME
    return w;
}

/* ---- forward ------------------------------------------------------------------------ */

/* Layernorm of x given the local row sums already in rs: the two-pass form
 * (mean, then centred squares), each statistic summed over the row group. */
static int layernorm(tg_builder *b, int layer, const char *op, int x, int rs, int gamma, int beta, int y)
{
    return tg_pb_layernorm(b, layer, op, b->pl->R, b->pl->Cq, x, rs, gamma, beta, y,
                           "centred squares of x, local columns", tg_pb_allreduce_row);
}

/* C(h,j) = sum_t A(h,t) @ W(t,j): DESIGN.md section 2, forward. a and w are
 * this rank's own blocks [R,Kq] and [Kq,Nq]; c is [R,Nq]. */
static void summa(tg_builder *b, int layer, const char *op, int a, int w, int c, int Kq, int Nq)
{
    const tg_plan *pl = b->pl;
    const tg_mesh *m = &pl->mesh;
    tg_coord co = b->c;
    int q = m->q, R = pl->R;
    /* Receive buffers. With q >= 3 a rank receives on several SUMMA steps; two buffers
     * alternate so a backend can receive step t+1 while step t's GEMM still reads the other. */
    int recv_a[2] = {-1, -1}, recv_w[2] = {-1, -1};
    int nrecv = q >= 3 ? 2 : 1, na = 0, nw = 0;
    char what[120];
    a = tg_pb_operand(b, layer, op, a); /* bf16 plans: what is broadcast and multiplied is bf16 */
    w = tg_pb_operand(b, layer, op, w);
    for (int r = 0; q > 1 && r < nrecv; r++) {
        const char *sfx = nrecv == 1 ? "" : (r ? "1" : "0");
        snprintf(what, sizeof what, "X(h={h},t) received over row for %s", op);
        recv_a[r] = tg_pb_buf_like(b, a, what, "recv_L%d_%s_x%s", layer, op, sfx);
        snprintf(what, sizeof what, "W(t,j=%d) received over col for %s", co.j, op);
        recv_w[r] = tg_pb_buf_like(b, w, what, "recv_L%d_%s_w%s", layer, op, sfx);
    }
    for (int t = 0; t < q; t++) {
        int A = (co.j == t) ? a : recv_a[na++ % nrecv];
        int W = (co.i == t) ? w : recv_w[nw++ % nrecv];
        if (q > 1) {
            if (!tg_pb_bcast(b, layer, op, t, TG_ROW, A, (long long)R * Kq, ""))
                return;
            if (!tg_pb_bcast(b, layer, op, t, TG_COL, W, (long long)Kq * Nq, ""))
                return;
        }
        tg_step *s = tg_pb_gemm(b, layer, op, t, 0, 0, R, Nq, Kq, A, Kq, W, Nq, c, Nq);
        if (!s)
            return;
        if (t > 0) { /* accumulate onto step 0's product */
            s->beta = 1.0f;
            s->acc[2] = TG_ACC_R | TG_ACC_W;
        }
        s->desc = TG_D_SUMMA;
    }
}

/* What the backward needs of one layer's forward. */
typedef struct layer_saved {
    int x_in, rs1, vs1, a1, qkv, att, x_mid, rs2, vs2, a2, u, g;
} layer_saved;

/* Forward of one block. Inference updates the residual stream x in place; training writes
 * each residual into a new buffer so the backward finds every layernorm input. Returns the
 * block's output buffer. */
static int build_layer(tg_builder *b, int l, const layer_w *w, int x, int *rs_carry, layer_saved *sv)
{
    const tg_plan *pl = b->pl;
    int R = pl->R, Cq = pl->Cq, Fq = pl->Fq;
    int last = l == pl->spec.layers - 1, train = pl->spec.mode == TG_TRAIN;

    /* ln1: the row sums come from the previous block's final residual step */
    int rs1 = *rs_carry;
    if (rs1 < 0) {
        rs1 = tg_pb_buf(b, 1, R, 0, "per-token local row sums of x", "L%d_ln1_sum", l);
        if (!tg_pb_ln_rowsum(b, l, R, Cq, x, rs1, "row sums of x, local columns"))
            return -1;
    }
    int a1 = tg_pb_bf16_out(b, tg_pb_buf(b, R, Cq, 0, "LN1(x) block (h, j)", "L%d_ln1_out", l));
    int vs1 = layernorm(b, l, "ln1", x, rs1, w->ln1_g, w->ln1_b, a1);

    int qkv = tg_pb_buf(b, R, 3 * Cq, 0, "[Q|K|V] of head group j", "L%d_qkv", l);
    summa(b, l, "qkv", a1, w->qkv_w, qkv, Cq, 3 * Cq);

    int att = tg_pb_bf16_out(b, tg_pb_buf(b, R, Cq, 0, "attention output, head group j", "L%d_att", l));
    if (!tg_pb_attention(b, l, R, Cq, qkv, w->qkv_b, att))
        return -1;

    int p1 = tg_pb_buf(b, R, Cq, 0, "attention projection partial block", "L%d_proj", l);
    summa(b, l, "proj", att, w->o_w, p1, Cq, Cq);

    int rs2 = tg_pb_buf(b, 1, R, 0, "per-token local row sums of x", "L%d_ln2_sum", l);
    int xm = train ? tg_pb_buf(b, R, Cq, 0, "residual stream after attention (h, j)", "L%d_x_mid", l) : x;
    tg_pb_resid(b, l, "ln2", R, Cq, x, p1, w->o_b, rs2, xm,
                train ? "x_mid = x + proj + bias; row sums for ln2" : "x += proj + bias; row sums of x for ln2");
    int a2 = tg_pb_bf16_out(b, tg_pb_buf(b, R, Cq, 0, "LN2(x) block (h, j)", "L%d_ln2_out", l));
    int vs2 = layernorm(b, l, "ln2", xm, rs2, w->ln2_g, w->ln2_b, a2);

    int hh = tg_pb_buf(b, R, Fq, 0, "MLP hidden block (h, j)", "L%d_fc1_out", l);
    summa(b, l, "fc1", a2, w->fc1_w, hh, Cq, Fq);
    /* out of place when training (the backward reads u) or bf16 (fc2 reads a bf16 g; u stays fp32 in hh) */
    int g = train || pl->spec.dtype == TG_BF16
                ? tg_pb_bf16_out(b, tg_pb_buf(b, R, Fq, 0, "GeLU output block (h, j)", "L%d_gelu_out", l))
                : hh;
    if (!tg_pb_gelu(b, l, R, Fq, hh, w->fc1_b, g))
        return -1;

    int p2 = tg_pb_buf(b, R, Cq, 0, "MLP output partial block", "L%d_fc2_out", l);
    summa(b, l, "fc2", g, w->fc2_w, p2, Fq, Cq);
    int rs_next = -1;
    if (!last)
        rs_next = tg_pb_buf(b, 1, R, 0, "per-token local row sums of x", "L%d_ln1_sum", l + 1);
    int xo = xm;
    if (train) {
        if (last)
            xo = tg_pb_buf(b, R, Cq, 1, "output block (h, j) of the last layer", "y");
        else
            xo = tg_pb_buf(b, R, Cq, 0, "residual stream after the block (h, j)", "L%d_x_out", l);
    }
    tg_pb_resid(b, l, "fc2", R, Cq, xm, p2, w->fc2_b, rs_next, xo,
                last ? (train ? "y = x_mid + mlp + bias (block output)" : "x += mlp + bias (block output)")
                     : (train ? "x_out = x_mid + mlp + bias; row sums for the next ln1"
                              : "x += mlp + bias; row sums of x for the next ln1"));
    *rs_carry = rs_next;
    layer_saved out = {x, rs1, vs1, a1, qkv, att, xm, rs2, vs2, a2, hh, g};
    *sv = out;
    return xo;
}

/* ---- backward (DESIGN.md section 2) ----------------------------------------------- */

/* dX = dY W^T (ABT): for t: bcast W(t,j) over col from local root t; P = dY(h,j) W(t,j)^T;
 * reduce P over row to local root t, so dX(h,t) lands on (i,t,k). The root computes its P
 * straight into dX and reduces in place. dy [R,Nq], w own [Kq,Nq], dx [R,Kq]. */
static void abt(tg_builder *b, int layer, const char *op, int dy, int w, int dx, int Kq, int Nq)
{
    const tg_plan *pl = b->pl;
    const tg_mesh *m = &pl->mesh;
    tg_coord co = b->c;
    int q = m->q, R = pl->R;
    char what[160];
    dy = tg_pb_operand(b, layer, op, dy);
    w = tg_pb_operand(b, layer, op, w);
    if (q == 1) {
        tg_step *s = tg_pb_gemm(b, layer, op, 0, 0, 1, R, Kq, Nq, dy, Nq, w, Nq, dx, Kq);
        if (s)
            s->desc = TG_D_ABT;
        return;
    }
    int nrecv = q >= 3 ? 2 : 1, nw = 0, recv_w[2] = {-1, -1};
    for (int r = 0; r < nrecv; r++) {
        snprintf(what, sizeof what, "W(t,j=%d) received over col for %s backward", co.j, op);
        recv_w[r] = tg_pb_buf_like(b, w, what, "recv_L%d_%s_dx_w%s", layer, op, nrecv == 1 ? "" : (r ? "1" : "0"));
    }
    snprintf(what, sizeof what, "partial dX(h={h},t) for %s, reduced over row", op);
    int part = tg_pb_buf(b, R, Kq, 0, what, "L%d_%s_dx_part", layer, op);
    for (int t = 0; t < q; t++) {
        int W = (co.i == t) ? w : recv_w[nw++ % nrecv];
        if (!tg_pb_bcast(b, layer, op, t, TG_COL, W, (long long)Kq * Nq, " (for dX)"))
            return;
        int target = (co.j == t) ? dx : part;
        tg_step *s = tg_pb_gemm(b, layer, op, t, 0, 1, R, Kq, Nq, dy, Nq, W, Nq, target, Kq);
        if (!s)
            return;
        s->desc = TG_D_ABT;
        tg_pb_reduce(b, layer, op, t, TG_ROW, target, (long long)R * Kq);
    }
}

/* dW = X^T dY (ATB): for t: bcast X(h,t) over row from local root t; P = X(h,t)^T dY(h,j);
 * reduce P over col to local root t, so the depth layer's sum of dW(t,j) lands on (t,j,k);
 * then all-reduce over dep(i,j): every depth layer saw different tokens. x own [R,Kq],
 * dy [R,Nq], dw [Kq,Nq]. */
static void atb(tg_builder *b, int layer, const char *op, int x, int dy, int dw, int Kq, int Nq)
{
    const tg_plan *pl = b->pl;
    const tg_mesh *m = &pl->mesh;
    tg_coord co = b->c;
    int q = m->q, R = pl->R;
    char what[160];
    x = tg_pb_operand(b, layer, op, x);
    dy = tg_pb_operand(b, layer, op, dy);
    if (q == 1) {
        tg_step *s = tg_pb_gemm(b, layer, op, 0, 1, 0, Kq, Nq, R, x, Kq, dy, Nq, dw, Nq);
        if (s)
            s->desc = TG_D_ATB;
    } else {
        int nrecv = q >= 3 ? 2 : 1, na = 0, recv_x[2] = {-1, -1};
        for (int r = 0; r < nrecv; r++) {
            snprintf(what, sizeof what, "X(h={h},t) received over row for %s backward", op);
            recv_x[r] = tg_pb_buf_like(b, x, what, "recv_L%d_%s_dw_x%s", layer, op,
                                     nrecv == 1 ? "" : (r ? "1" : "0"));
        }
        snprintf(what, sizeof what, "partial dW(t,j=%d) for %s, reduced over col", co.j, op);
        int part = tg_pb_buf(b, Kq, Nq, 0, what, "L%d_%s_dw_part", layer, op);
        for (int t = 0; t < q; t++) {
            int A = (co.j == t) ? x : recv_x[na++ % nrecv];
            if (!tg_pb_bcast(b, layer, op, t, TG_ROW, A, (long long)R * Kq, " (for dW)"))
                return;
            int target = (co.i == t) ? dw : part;
            tg_step *s = tg_pb_gemm(b, layer, op, t, 1, 0, Kq, Nq, R, A, Kq, dy, Nq, target, Nq);
            if (!s)
                return;
            s->desc = TG_D_ATB;
            tg_pb_reduce(b, layer, op, t, TG_COL, target, (long long)Kq * Nq);
        }
    }
    tg_pb_allreduce_exact(b, layer, op, TG_DEP, dw, (long long)Kq * Nq, "dW over the depth layers");
}

/* db = column sums of dY over this rank's tokens, summed over every (i,k) holding column block j. */
static void bias_grad(tg_builder *b, int layer, const char *op, int dy, int cols, int db)
{
    if (tg_pb_colsum(b, layer, op, b->pl->R, cols, dy, db, "db = column sums of dY, local tokens"))
        tg_pb_allreduce_exact(b, layer, op, TG_COLDEP, db, cols, "db over every row block");
}

/* Layernorm backward: g += dx for y = LN(x) given dy; dgamma, dbeta as column sums over every row block. */
static void ln_bwd(tg_builder *b, int layer, const char *op, int dy, int x, int rs, int vs, int gamma, int g, int dgamma,
                   int dbeta)
{
    int R = b->pl->R, Cq = b->pl->Cq;
    if (!tg_pb_ln_bwd(b, layer, op, R, Cq, dy, x, rs, vs, gamma, g, dgamma, dbeta, tg_pb_allreduce_row))
        return;
    tg_pb_allreduce_exact(b, layer, op, TG_COLDEP, dgamma, Cq, "dgamma over every row block");
    tg_pb_allreduce_exact(b, layer, op, TG_COLDEP, dbeta, Cq, "dbeta over every row block");
}

static int grad_of(tg_builder *b, const layer_w *w, int k)
{
    return b->rp->params[w->first_param + k].grad;
}

/* Backward of one block: g holds dL/d(block output) and becomes dL/d(block input). */
static void build_layer_bwd(tg_builder *b, int l, const layer_w *w, const layer_saved *sv, int g)
{
    const tg_plan *pl = b->pl;
    int R = pl->R, Cq = pl->Cq, Fq = pl->Fq;
    enum { P_LN1_G, P_LN1_B, P_QKV_W, P_QKV_B, P_O_W, P_O_B, P_LN2_G, P_LN2_B, P_FC1_W, P_FC1_B, P_FC2_W, P_FC2_B };

    /* MLP: y = x_mid + GeLU(LN2(x_mid) W1 + b1) W2 + b2 */
    /* a bf16 plan casts each dY once for the op's ATB and ABT (tg_pb_operand; dY itself in fp32 plans) */
    int dy = tg_pb_operand(b, l, "fc2", g);
    atb(b, l, "fc2", sv->g, dy, grad_of(b, w, P_FC2_W), Fq, Cq);
    bias_grad(b, l, "fc2", g, Cq, grad_of(b, w, P_FC2_B));
    int dgl = tg_pb_buf(b, R, Fq, 0, "dL/d(GeLU output), then dL/du", "L%d_gelu_dout", l);
    abt(b, l, "fc2", dy, w->fc2_w, dgl, Fq, Cq);
    if (!tg_pb_gelu_bwd(b, l, R, Fq, dgl, sv->u))
        return;
    dy = tg_pb_operand(b, l, "fc1", dgl);
    atb(b, l, "fc1", sv->a2, dy, grad_of(b, w, P_FC1_W), Cq, Fq);
    bias_grad(b, l, "fc1", dgl, Fq, grad_of(b, w, P_FC1_B));
    int da2 = tg_pb_buf(b, R, Cq, 0, "dL/d(LN2 output)", "L%d_ln2_dout", l);
    abt(b, l, "fc1", dy, w->fc1_w, da2, Cq, Fq);
    ln_bwd(b, l, "ln2", da2, sv->x_mid, sv->rs2, sv->vs2, w->ln2_g, g, grad_of(b, w, P_LN2_G),
           grad_of(b, w, P_LN2_B));

    /* attention: x_mid = x + Attn(LN1(x) Wqkv + bqkv) Wo + bo */
    dy = tg_pb_operand(b, l, "proj", g);
    atb(b, l, "proj", sv->att, dy, grad_of(b, w, P_O_W), Cq, Cq);
    bias_grad(b, l, "proj", g, Cq, grad_of(b, w, P_O_B));
    int datt = tg_pb_buf(b, R, Cq, 0, "dL/d(attention output)", "L%d_att_dout", l);
    abt(b, l, "proj", dy, w->o_w, datt, Cq, Cq);
    int dqkv = tg_pb_buf(b, R, 3 * Cq, 0, "dL/d[Q|K|V] of head group j", "L%d_qkv_dout", l);
    if (!tg_pb_attention_bwd(b, l, R, Cq, sv->qkv, datt, dqkv))
        return;
    dy = tg_pb_operand(b, l, "qkv", dqkv);
    atb(b, l, "qkv", sv->a1, dy, grad_of(b, w, P_QKV_W), Cq, 3 * Cq);
    bias_grad(b, l, "qkv", dqkv, 3 * Cq, grad_of(b, w, P_QKV_B));
    int da1 = tg_pb_buf(b, R, Cq, 0, "dL/d(LN1 output)", "L%d_ln1_dout", l);
    abt(b, l, "qkv", dy, w->qkv_w, da1, Cq, 3 * Cq);
    ln_bwd(b, l, "ln1", da1, sv->x_in, sv->rs1, sv->vs1, w->ln1_g, g, grad_of(b, w, P_LN1_G),
           grad_of(b, w, P_LN1_B));
}

void tg_plan_tesseract(tg_builder *b, bool shards_only)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    const tg_spec *sp = &pl->spec;
    int train = sp->mode == TG_TRAIN;
    layer_w *lw = malloc((size_t)sp->layers * sizeof *lw);
    layer_saved *sv = malloc((size_t)sp->layers * sizeof *sv);
    if (!lw || !sv) {
        free(lw);
        free(sv);
        b->oom = true;
        return;
    }
    tg_lm lm;
    rp->tok_buf = rp->tgt_buf = rp->logits_buf = rp->loss_buf = -1;
    if (pl->V > 0)
        tg_lm_declare_embedding(b, &lm);
    for (int l = 0; l < sp->layers; l++)
        lw[l] = declare_layer_weights(b, l);
    if (pl->V > 0)
        tg_lm_declare_final(b, &lm);
    char what[120];
    snprintf(what, sizeof what, "residual stream block (h={h}, j=%d): input in%s", rp->j,
             train ? "" : ", output out");
    rp->x_buf = tg_pb_buf(b, pl->R, pl->Cq, 1, what, "x");
    rp->gx_buf = -1;
    if (train) {
        snprintf(what, sizeof what, "gradient block (h={h}, j=%d): dL/dy in, dL/dx out", rp->j);
        rp->gx_buf = tg_pb_buf(b, pl->R, pl->Cq, 1, what, "grad_x");
    }
    if (!shards_only) {
        if (pl->V > 0)
            tg_lm_embed(b, &lm, rp->x_buf);
        int rs_carry = -1, x = rp->x_buf;
        for (int l = 0; l < sp->layers && !b->oom; l++)
            x = build_layer(b, l, &lw[l], x, &rs_carry, &sv[l]);
        rp->y_buf = x;
        if (pl->V > 0 && !b->oom)
            tg_lm_head(b, &lm, x);
        if (train) {
            b->phase = TG_PHASE_BWD;
            if (pl->V > 0 && !b->oom)
                tg_lm_head_bwd(b, &lm, rp->gx_buf);
            for (int l = sp->layers - 1; l >= 0 && !b->oom; l--)
                build_layer_bwd(b, l, &lw[l], &sv[l], rp->gx_buf);
            if (pl->V > 0 && !b->oom)
                tg_lm_embed_bwd(b, &lm, rp->gx_buf);
            b->phase = TG_PHASE_OPT;
            if (!b->oom)
                tg_pb_optimizer(b);
        }
    }
    free(lw);
    free(sv);
}


/* ---- memory plan ------------------------------------------------------------------ */

/* docs/BF16.md: a GEMM reads two operands of the plan's element type (bf16 in a bf16 plan) into an fp32 result */
static bool gemm_types(const tg_plan *pl, const tg_class_plan *rp, const tg_step *st, int s, tg_err *err)
{
    int want = pl->spec.dtype == TG_BF16 ? TG_BUF_BF16 : TG_BUF_F32;
    if (rp->bufs[st->buf[0]].dtype == want && rp->bufs[st->buf[1]].dtype == want &&
        rp->bufs[st->buf[2]].dtype == TG_BUF_F32)
        return true;
    return tg_fail(err,
                   "internal planner error: class (i=%d, j=%d) step %d, GEMM of %s and %s into %s: the operands must "
                   "be %s and the result fp32",
                   rp->i, rp->j, s, rp->bufs[st->buf[0]].name, rp->bufs[st->buf[1]].name, rp->bufs[st->buf[2]].name,
                   want == TG_BUF_BF16 ? "bf16" : "fp32");
}

static bool lifetimes(const tg_plan *pl, tg_class_plan *rp, tg_err *err)
{
    for (int s = 0; s < rp->nsteps; s++) {
        const tg_step *st = &rp->steps[s];
        if (st->kind == TG_STEP_GEMM && !gemm_types(pl, rp, st, s, err))
            return false;
        for (int k = 0; k < TG_STEP_MAXBUF; k++) {
            int id = st->buf[k];
            if (id < 0)
                continue;
            tg_buf *bf = &rp->bufs[id];
            if (bf->first < 0) {
                bf->first = s;
                if (!bf->persistent && st->acc[k] != TG_ACC_W)
                    return tg_fail(err,
                                   "internal planner error: class (i=%d, j=%d) buffer %s is read at step %d "
                                   "before anything writes it",
                                   rp->i, rp->j, bf->name, s);
            }
            bf->last = s;
        }
    }
    for (int s = 0; s < rp->nsteps; s++)
        for (int k = 0; k < 2; k++) {
            int id = rp->steps[s].pin[k];
            if (id >= 0 && rp->bufs[id].first > s)
                rp->bufs[id].first = s;
        }
    for (int i = 0; i < rp->nbufs; i++) {
        tg_buf *bf = &rp->bufs[i];
        if (bf->first < 0 && !bf->persistent)
            return tg_fail(err, "internal planner error: class (i=%d, j=%d) buffer %s is never used", rp->i, rp->j,
                           bf->name);
        if (bf->persistent) {
            bf->first = 0;
            bf->last = rp->nsteps - 1;
        }
    }
    return true;
}

static bool place(tg_class_plan *rp, tg_err *err)
{
    tg_place_item *items = malloc((size_t)(rp->nbufs > 0 ? rp->nbufs : 1) * sizeof *items);
    if (!items)
        return tg_fail(err, "out of memory while planning class (i=%d, j=%d)", rp->i, rp->j);
    for (int i = 0; i < rp->nbufs; i++) {
        const tg_buf *bf = &rp->bufs[i];
        items[i] = (tg_place_item){tg_buf_slots(bf), bf->first, bf->last, bf->persistent, 0};
    }
    bool ok = tg_place(items, rp->nbufs, rp->nsteps, &rp->arena_elems, err);
    rp->weight_elems = 0;
    for (int i = 0; ok && i < rp->nbufs; i++) {
        rp->bufs[i].offset = items[i].offset;
        if (rp->bufs[i].persistent && rp->bufs[i].name[0] == 'w')
            rp->weight_elems += tg_buf_slots(&rp->bufs[i]);
    }
    free(items);
    return ok;
}

/* ---- totals ------------------------------------------------------------------------- */

static void totals(tg_class_plan *rp)
{
    for (int s = 0; s < rp->nsteps; s++) {
        const tg_step *st = &rp->steps[s];
        rp->flops += st->flops;
        int bwd = st->phase == TG_PHASE_BWD;
        rp->steps[s].esize = st->buf[0] >= 0 ? tg_dtype_size(rp->bufs[st->buf[0]].dtype) : 4;
        long long bytes = st->count * st->esize;
        long long *recv = bwd ? rp->bwd_bcast_recv : rp->bcast_recv;
        long long *sent = bwd ? rp->bwd_bcast_sent : rp->bcast_sent;
        long long *ar = bwd ? rp->bwd_allreduce : rp->allreduce;
        if (st->kind == TG_STEP_BCAST) {
            if (st->is_root)
                sent[st->group] += bytes;
            else
                recv[st->group] += bytes;
        } else if (st->kind == TG_STEP_ALLREDUCE) {
            ar[st->group] += bytes;
        } else if (st->kind == TG_STEP_REDUCE) {
            long long *rr = bwd ? rp->bwd_reduce_recv : rp->reduce_recv;
            long long *rs = bwd ? rp->bwd_reduce_sent : rp->reduce_sent;
            if (st->is_root)
                rr[st->group] += bytes * (st->group_size - 1);
            else
                rs[st->group] += bytes;
        }
    }
}

/* shards_only: declare the weight shards and the residual stream block, no steps, no offsets */
static bool build_class(const tg_plan *pl, tg_class_plan *rp, bool shards_only, tg_err *err)
{
    tg_builder b = {.pl = pl, .rp = rp, .c = {rp->i, rp->j, 0}, .phase = TG_PHASE_FWD};
    if (pl->mesh.scheme == TG_SCHEME_MEGATRON)
        tg_plan_megatron(&b, shards_only);
    else
        tg_plan_tesseract(&b, shards_only);
    if (b.oom)
        return tg_fail(err, "out of memory while planning class (i=%d, j=%d)", rp->i, rp->j);
    if (shards_only)
        return true;
    if (!lifetimes(pl, rp, err) || !place(rp, err))
        return false;
    totals(rp);
    return tg_streams_plan(rp, err) && tg_fuse_plan(rp);
}

void tg_plan_init(const tg_spec *spec, tg_plan *out)
{
    memset(out, 0, sizeof *out);
    out->spec = *spec;
    out->T = spec->batch * spec->seq;
    out->D = spec->hidden / spec->heads;
    if (spec->scheme == TG_SCHEME_MEGATRON) {
        out->mesh = tg_mesh_make_megatron(spec->p);
        out->R = out->T;
        out->Cq = spec->hidden;
        out->Fq = spec->ffn / spec->p;
        out->Hq = spec->heads / spec->p;
        out->nseq = spec->batch;
        out->V = spec->vocab;
        out->Vq = spec->vocab > 0 ? (spec->vocab + spec->p - 1) / spec->p : 0; /* Vp = p*Vq */
        return;
    }
    out->mesh = tg_mesh_make(spec->q, spec->d, spec->placement);
    int qd = spec->q * spec->d;
    out->T = spec->batch * spec->seq;
    out->R = out->T / qd;
    out->Cq = spec->hidden / spec->q;
    out->Fq = spec->ffn / spec->q;
    out->D = spec->hidden / spec->heads;
    out->Hq = spec->heads / spec->q;
    out->nseq = spec->batch / qd;
    out->V = spec->vocab;
    out->Vq = spec->vocab > 0 ? (spec->vocab + spec->q - 1) / spec->q : 0;
}

bool tg_plan_class(const tg_plan *pl, int i, int j, tg_class_plan *out, tg_err *err)
{
    memset(out, 0, sizeof *out);
    out->i = i;
    out->j = j;
    if (!build_class(pl, out, false, err)) {
        tg_class_free(out);
        return false;
    }
    return true;
}

bool tg_plan_class_shards(const tg_plan *pl, int i, int j, tg_class_plan *out, tg_err *err)
{
    memset(out, 0, sizeof *out);
    out->i = i;
    out->j = j;
    if (!build_class(pl, out, true, err)) {
        tg_class_free(out);
        return false;
    }
    return true;
}

void tg_class_free(tg_class_plan *cp)
{
    free(cp->steps);
    free(cp->bufs);
    free(cp->params);
    cp->steps = NULL;
    cp->bufs = NULL;
    cp->params = NULL;
    cp->nsteps = cp->nbufs = cp->nparams = 0;
}

int tg_plan_nclasses(const tg_plan *pl)
{
    if (pl->mesh.scheme == TG_SCHEME_MEGATRON)
        return pl->mesh.p;
    return pl->mesh.q * pl->mesh.q;
}

int tg_class_of(const tg_plan *pl, int rank)
{
    if (pl->mesh.scheme == TG_SCHEME_MEGATRON)
        return rank;
    tg_coord c = tg_mesh_coord(&pl->mesh, rank);
    return c.i * pl->mesh.q + c.j;
}

bool tg_plan_all(const tg_plan *pl, tg_class_plan **out, tg_err *err)
{
    int n = tg_plan_nclasses(pl), q = pl->mesh.q;
    tg_class_plan *all = calloc((size_t)n, sizeof *all);
    if (!all)
        return tg_fail(err, "out of memory: %d rank classes", n);
    for (int c = 0; c < n; c++)
        if (!tg_plan_class(pl, c / q, c % q, &all[c], err)) {
            tg_plan_all_free(pl, all);
            return false;
        }
    *out = all;
    return true;
}

void tg_plan_all_free(const tg_plan *pl, tg_class_plan *all)
{
    if (!all)
        return;
    for (int c = 0; c < tg_plan_nclasses(pl); c++)
        tg_class_free(&all[c]);
    free(all);
}

int tg_io_r0(const tg_plan *pl, tg_coord c)
{
    return tg_mesh_row_block(&pl->mesh, c) * pl->R;
}

int tg_io_c0(const tg_plan *pl, tg_coord c)
{
    return c.j * pl->Cq;
}

int tg_step_root(const tg_plan *pl, tg_coord c, const tg_step *s)
{
    if (s->kind != TG_STEP_BCAST && s->kind != TG_STEP_REDUCE)
        return -1;
    return tg_group_member(&pl->mesh, s->group, c, s->root_local);
}

const char *tg_step_kind_name(tg_step_kind k)
{
    switch (k) {
    case TG_STEP_BCAST: return "bcast";
    case TG_STEP_ALLREDUCE: return "allreduce";
    case TG_STEP_GEMM: return "gemm";
    case TG_STEP_LN_ROWSUM: return "ln_rowsum";
    case TG_STEP_RESID_ROWSUM: return "resid_rowsum";
    case TG_STEP_LN_SQDEV: return "ln_sqdev";
    case TG_STEP_LN_APPLY: return "ln_apply";
    case TG_STEP_BIAS_GELU: return "bias_gelu";
    case TG_STEP_ATTENTION: return "attention";
    case TG_STEP_REDUCE: return "reduce";
    case TG_STEP_GELU_SAVE: return "gelu_save";
    case TG_STEP_COLSUM: return "colsum";
    case TG_STEP_GELU_BWD: return "gelu_bwd";
    case TG_STEP_LN_BWD_SUMS: return "ln_bwd_sums";
    case TG_STEP_LN_BWD_APPLY: return "ln_bwd_apply";
    case TG_STEP_ATTN_BWD: return "attention_bwd";
    case TG_STEP_ADAMW: return "adamw";
    case TG_STEP_EMBED: return "embed";
    case TG_STEP_POS_ADD: return "pos_add";
    case TG_STEP_LM_ROWMAX: return "lm_rowmax";
    case TG_STEP_LM_SUMS: return "lm_sums";
    case TG_STEP_LM_LOSS: return "lm_loss";
    case TG_STEP_LM_DLOGITS: return "lm_dlogits";
    case TG_STEP_EMBED_BWD: return "embed_bwd";
    case TG_STEP_POS_BWD: return "pos_bwd";
    case TG_STEP_CAST: return "cast";
    }
    return "?";
}
