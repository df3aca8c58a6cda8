/*
 * plan_tesseract.c - the steps of the Tesseract scheme (Wang et al., 2021;
 * DESIGN.md sections 2 and 3) for one rank class (i, j) of the [q,q,d] mesh:
 * its weight shards (a q x q block of each matrix, a 1/q column block of each
 * vector) and, unless only the shards are asked for, the forward of every
 * block (SUMMA for the four GEMMs, the layernorm statistics summed over the
 * row), the backward (ABT for dX, ATB for dW, reduces onto local roots, exact
 * all-reduces over depth) and the optimizer. plan.h gives the step sequence
 * of one block.
 *
 * Design: a scheme planner in the middle layer. It calls the whole-model
 * language-model steps of its layout (plan_lm.c), the step sequences shared
 * with the megatron scheme (plan_steps.c) and the builder's primitives
 * (plan_builder.c); only plan.c, which picks the scheme and then places
 * buffers and plans streams for either, calls it (tools/plandeps.py keeps
 * calls one way).
 */
#include "plan_schemes.h"

#include <stdio.h>
#include <stdlib.h>

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

/* Y(h,j) = sum_t X(h,t) W(t,j) with the weights staying put (generation's weight-stationary layout, docs/GENERATE.md):
 * rank (i,j) copies its own block X(i,j) [R,Kq] into slot i of G [q*R, Kq] and the column all-gathers G = X(:,j);
 * the diagonal rank (i,i) then holds X(:,i), the activations W(i,j) multiplies, and broadcasts it over row i (into G:
 * off the diagonal what G held is no longer needed); P = G @ W(i,j) [q*R, Nq] is the partial sum t = i of every row
 * block of the depth; a reduce-scatter over the column (member order) leaves sum_t X(h,t) W(t,j) in slice h of P on
 * member h, which is Y(i,j) on this rank, copied into c [R,Nq]. Same flops as SUMMA: one GEMM of q*R rows. */
static void stationary(tg_builder *b, int layer, const char *op, int a, int w, int c, int Kq, int Nq)
{
    const tg_plan *pl = b->pl;
    int q = pl->mesh.q, R = pl->R, i = b->c.i;
    char what[120];
    a = tg_pb_operand(b, layer, op, a);
    w = tg_pb_operand(b, layer, op, w);
    snprintf(what, sizeof what, "X(:,t) of the depth's row blocks, gathered for %s (weight-stationary)", op);
    int G = tg_pb_buf(b, q * R, Kq, 0, what, "L%d_%s_xg", layer, op);
    if (a >= 0 && G >= 0) /* of the operand's type: bf16 in a bf16 plan, so the gathers move 2 bytes an element */
        b->rp->bufs[G].dtype = b->rp->bufs[a].dtype;
    snprintf(what, sizeof what, "partials X(:,i) @ W(i,j) of %s, reduce-scattered over col", op);
    int P = tg_pb_buf(b, q * R, Nq, 0, what, "L%d_%s_part", layer, op);
    long long xb = (long long)R * Kq, yb = (long long)R * Nq;
    if (!tg_pb_copy(b, layer, op, a, 0, G, i * xb, xb, "own block X(h,j) into slot i of the gathered X(:,j)") ||
        !tg_pb_ws_collective(b, layer, op, TG_STEP_ALLGATHER, TG_COL, G, q * xb, "X(:,j), a block [R, K/q] a member"))
        return;
    tg_step *s = tg_pb_bcast(b, layer, op, i, TG_ROW, G, q * xb, "");
    if (!s)
        return;
    s->t = -1; /* not a SUMMA step */
    s->desc = TG_D_LABEL;
    s->label = "bcast X(:,i) (every row block of the depth, feature block i) over row from the diagonal (i,i)";
    s = tg_pb_gemm(b, layer, op, -1, 0, 0, q * R, Nq, Kq, G, Kq, w, Nq, P, Nq);
    if (!s)
        return;
    s->desc = TG_D_LABEL;
    s->label = "P(:,j) = X(:,i) @ W(i,j), the partial t = i of every row block of the depth";
    if (!tg_pb_ws_collective(b, layer, op, TG_STEP_REDUCESCATTER, TG_COL, P, q * yb,
                             "P: slice h = sum_t X(h,t) @ W(t,j), member order"))
        return;
    tg_pb_copy(b, layer, op, P, i * yb, c, 0, yb, "slice i of P: Y(h,j)");
}

/* One linear of the phase being planned, in its layout (tg_plan.layout_fwd, layout_dec). */
static void linear(tg_builder *b, int layer, const char *op, int a, int w, int c, int Kq, int Nq)
{
    const tg_plan *pl = b->pl;
    tg_layout lay = b->phase == TG_PHASE_DEC ? pl->layout_dec : b->phase == TG_PHASE_FWD ? pl->layout_fwd
                                                                                          : TG_LAYOUT_SUMMA;
    if (lay == TG_LAYOUT_STATIONARY && pl->mesh.q > 1)
        stationary(b, layer, op, a, w, c, Kq, Nq);
    else
        summa(b, layer, op, a, w, c, Kq, Nq);
}

/* What the backward needs of one layer's forward. */
typedef struct layer_saved {
    int x_in, rs1, vs1, a1, qkv, att, x_mid, rs2, vs2, a2, u, g;
} layer_saved;

/* Forward of one block. Inference updates the residual stream x in place; training writes
 * each residual into a new buffer so the backward finds every layernorm input. Returns the
 * block's output buffer. again: the backward's recomputation of the block (spec recompute) from what
 * its forward kept in *sv (the input x_in and ln1's summed statistics rs1 and vs1, so ln1 is its last
 * step alone); it stops after the GeLU (fc2's product and the block's output are not what the backward
 * reads), replaces the rest of *sv with its own buffers and returns -1. */
static int build_layer(tg_builder *b, int l, const layer_w *w, int x, int *rs_carry, layer_saved *sv, bool again)
{
    const tg_plan *pl = b->pl;
    int R = pl->R, Cq = pl->Cq, Fq = pl->Fq;
    int last = l == pl->l0 + pl->nl - 1, train = pl->spec.mode == TG_TRAIN;

    /* ln1: the row sums come from the previous block's final residual step */
    int rs1 = again ? sv->rs1 : *rs_carry, vs1;
    if (rs1 < 0) {
        rs1 = tg_pb_buf(b, 1, R, 0, "per-token local row sums of x", "L%d_ln1_sum", l);
        if (!tg_pb_ln_rowsum(b, l, R, Cq, x, rs1, "row sums of x, local columns"))
            return -1;
    }
    int a1 = tg_pb_bf16_out(b, tg_pb_buf(b, R, Cq, 0, "LN1(x) block (h, j)", "L%d_ln1_out", l));
    if (again) { /* the statistics are the forward's, already summed over the row */
        x = sv->x_in;
        vs1 = sv->vs1;
        tg_pb_ln_apply(b, l, "ln1", R, Cq, x, rs1, vs1, w->ln1_g, w->ln1_b, a1);
    } else {
        vs1 = layernorm(b, l, "ln1", x, rs1, w->ln1_g, w->ln1_b, a1);
    }

    int qkv = tg_pb_buf(b, R, 3 * Cq, 0, "[Q|K|V] of head group j", "L%d_qkv", l);
    linear(b, l, "qkv", a1, w->qkv_w, qkv, Cq, 3 * Cq);

    int att = tg_pb_bf16_out(b, tg_pb_buf(b, R, Cq, 0, "attention output, head group j", "L%d_att", l));
    if (b->gen == 2) { /* generation's decode step: one token per sequence over the KV cache */
        if (!tg_pb_attn_decode(b, l, R, Cq, qkv, w->qkv_b, att, b->kv[l], b->pos))
            return -1;
    } else if (!tg_pb_attention(b, l, R, Cq, qkv, w->qkv_b, att) ||
               (b->gen == 1 && !tg_pb_kv_write(b, l, R, Cq, qkv, b->kv[l]))) { /* the prefill fills the cache */
        return -1;
    }

    int p1 = tg_pb_buf(b, R, Cq, 0, "attention projection partial block", "L%d_proj", l);
    linear(b, l, "proj", att, w->o_w, p1, Cq, Cq);

    int rs2 = tg_pb_buf(b, 1, R, 0, "per-token local row sums of x", "L%d_ln2_sum", l);
    int xm = train ? tg_pb_buf(b, R, Cq, 0, "residual stream after attention (h, j)", "L%d_x_mid", l) : x;
    tg_pb_resid(b, l, "ln2", R, Cq, x, p1, w->o_b, rs2, xm,
                train ? "x_mid = x + proj + bias; row sums for ln2" : "x += proj + bias; row sums of x for ln2");
    int a2 = tg_pb_bf16_out(b, tg_pb_buf(b, R, Cq, 0, "LN2(x) block (h, j)", "L%d_ln2_out", l));
    int vs2 = layernorm(b, l, "ln2", xm, rs2, w->ln2_g, w->ln2_b, a2);

    /* bf16 programs add fc1's bias in bf16 (docs/BF16.md), as autocast's linear does: training reads the copy AdamW
     * keeps, generation the copy rounded after loading, inference casts it here, before the GEMM, so that nothing comes between the GEMM and its GeLU step and
     * cuBLASLt may run the pair as one call with a bf16 bias, D and aux (gen/fuse.c) */
    int b1 = pl->spec.dtype == TG_BF16 ? tg_pb_operand(b, l, "fc1", w->fc1_b) : w->fc1_b;
    int hh = tg_pb_buf(b, R, Fq, 0, "MLP hidden block (h, j)", "L%d_fc1_out", l);
    linear(b, l, "fc1", a2, w->fc1_w, hh, Cq, Fq);
    /* out of place when training (the backward reads u) or bf16 (fc2 reads a bf16 g; u stays fp32 in hh) */
    int g = train || pl->spec.dtype == TG_BF16
                ? tg_pb_bf16_out(b, tg_pb_buf(b, R, Fq, 0, "GeLU output block (h, j)", "L%d_gelu_out", l))
                : hh;
    int u = tg_pb_gelu(b, l, R, Fq, hh, b1, g);
    if (u < 0)
        return -1;
    if (again) {
        layer_saved out = {x, rs1, vs1, a1, qkv, att, xm, rs2, vs2, a2, u, g};
        *sv = out;
        return -1;
    }

    int p2 = tg_pb_buf(b, R, Cq, 0, "MLP output partial block", "L%d_fc2_out", l);
    linear(b, l, "fc2", g, w->fc2_w, p2, Fq, Cq);
    int rs_next = -1;
    if (!last)
        rs_next = tg_pb_buf(b, 1, R, 0, "per-token local row sums of x", "L%d_ln1_sum", l + 1);
    int xo = xm;
    if (train) {
        if (last)
            xo = tg_pb_io_buf(b, R * pl->mb, Cq, (long long)R * Cq, "output block (h, j) of the last layer", "y");
        else
            xo = tg_pb_buf(b, R, Cq, 0, "residual stream after the block (h, j)", "L%d_x_out", l);
    }
    tg_pb_resid(b, l, "fc2", R, Cq, xm, p2, w->fc2_b, rs_next, xo,
                last ? (train ? "y = x_mid + mlp + bias (block output)" : "x += mlp + bias (block output)")
                     : (train ? "x_out = x_mid + mlp + bias; row sums for the next ln1"
                              : "x += mlp + bias; row sums of x for the next ln1"));
    *rs_carry = rs_next;
    layer_saved out = {x, rs1, vs1, a1, qkv, att, xm, rs2, vs2, a2, u, g};
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
    int grad = dw;
    dw = tg_pb_grad_target(b, grad); /* micro-batches: this one's part, summed into the gradient below */
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
    tg_pb_grad_acc(b, layer, op, grad, dw);
    tg_pb_grad_allreduce(b, layer, op, TG_DEP, grad, (long long)Kq * Nq, "dW over the depth layers");
}

/* db = column sums of dY over this rank's tokens, summed over every (i,k) holding column block j. */
static void bias_grad(tg_builder *b, int layer, const char *op, int dy, int cols, int db)
{
    int part = tg_pb_grad_target(b, db);
    if (!tg_pb_colsum(b, layer, op, b->pl->R, cols, dy, part, "db = column sums of dY, local tokens"))
        return;
    tg_pb_grad_acc(b, layer, op, db, part);
    tg_pb_grad_allreduce(b, layer, op, TG_COLDEP, db, cols, "db over every row block");
}

/* Layernorm backward: g += dx for y = LN(x) given dy; dgamma, dbeta as column sums over every row block. */
static void ln_bwd(tg_builder *b, int layer, const char *op, int dy, int x, int rs, int vs, int gamma, int g, int dgamma,
                   int dbeta)
{
    int R = b->pl->R, Cq = b->pl->Cq;
    int pg = tg_pb_grad_target(b, dgamma), pb = tg_pb_grad_target(b, dbeta);
    if (!tg_pb_ln_bwd(b, layer, op, R, Cq, dy, x, rs, vs, gamma, g, pg, pb, tg_pb_allreduce_row))
        return;
    tg_pb_grad_acc(b, layer, op, dgamma, pg);
    tg_pb_grad_acc(b, layer, op, dbeta, pb);
    tg_pb_grad_allreduce(b, layer, op, TG_COLDEP, dgamma, Cq, "dgamma over every row block");
    tg_pb_grad_allreduce(b, layer, op, TG_COLDEP, dbeta, Cq, "dbeta over every row block");
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
    int du = tg_pb_gelu_bwd(b, l, R, Fq, dgl, sv->u); /* bf16: its own bf16 buffer, which the fc1 GEMMs read */
    if (du < 0)
        return;
    dy = tg_pb_operand(b, l, "fc1", dgl);
    atb(b, l, "fc1", sv->a2, dy, grad_of(b, w, P_FC1_W), Cq, Fq);
    bias_grad(b, l, "fc1", du, Fq, grad_of(b, w, P_FC1_B));
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
    /* attention = "cudnn": the bias gradient sums cuDNN's bf16 dQKV too (the CUDA program has no fp32 dqkv) */
    bias_grad(b, l, "qkv", b->pl->spec.attention == TG_ATTN_CUDNN ? dy : dqkv, 3 * Cq, grad_of(b, w, P_QKV_B));
    int da1 = tg_pb_buf(b, R, Cq, 0, "dL/d(LN1 output)", "L%d_ln1_dout", l);
    abt(b, l, "qkv", dy, w->qkv_w, da1, Cq, 3 * Cq);
    ln_bwd(b, l, "ln1", da1, sv->x_in, sv->rs1, sv->vs1, w->ln1_g, g, grad_of(b, w, P_LN1_G),
           grad_of(b, w, P_LN1_B));
}

/* Generation's greedy choice (docs/GENERATE.md) after the head: the argmax pairs of row block h into slice i of pairs
 * [q*rows, 2], all-reduced over the row; then q broadcasts over the column from root t of slice t, so every rank
 * holds the choices of the q row blocks of its depth: the token ids its next embedding reads. With the logits
 * transposed (the weight-stationary head of a decode step: rank (i,j) holds row block j, vocab block i), the same
 * with row and column exchanged: slice j, all-reduced over the column, broadcast over the row. */
static void gen_choose(tg_builder *b, int logits, int pairs, int rows, bool transposed)
{
    int q = b->pl->mesh.q, rb = transposed ? b->c.j : b->c.i, vb = transposed ? b->c.i : b->c.j;
    tg_lm_argmax(b, logits, rows, vb, pairs, 2 * rb * rows, transposed ? TG_COL : TG_ROW, q);
    for (int t = 0; q > 1 && t < q; t++) {
        tg_step *s = tg_pb_bcast(b, TG_LAYER_HEAD, "argmax", t, transposed ? TG_ROW : TG_COL, pairs, 2LL * rows, "");
        if (!s)
            return;
        s->boff = 2 * t * rows;
        s->desc = TG_D_LABEL;
        s->label = transposed ? "bcast the (max, id) pairs of row block t+q*k over row from local root t"
                              : "bcast the (max, id) pairs of row block t+q*k over col from local root t";
    }
}

/* mode = "generate": the prefill (phase forward: the inference forward of the prompts, which also writes K and V of
 * every layer into the KV cache, then the greedy choice for every row) and the decode step (phase decode: the same
 * layout on one row per sequence, plan dp: R = nseq, seq = 1), on one arena; the KV caches are persistent. */
static void plan_generate(tg_builder *b, tg_lm *lm, const layer_w *lw, layer_saved *sv)
{
    const tg_plan *pl = b->pl;
    tg_class_plan *rp = b->rp;
    const tg_spec *sp = &pl->spec;
    int q = pl->mesh.q, nseq = pl->nseq, Cq = pl->Cq, N = sp->context;
    int *kv = malloc((size_t)sp->layers * sizeof *kv);
    if (!kv) {
        b->oom = true;
        return;
    }
    char what[100];
    for (int l = 0; l < sp->layers; l++) {
        snprintf(what, sizeof what, "KV cache of layer %d: K | V of head group j, row s*%d + position", l, N);
        kv[l] = tg_pb_bf16_out(b, tg_pb_buf(b, nseq * N, 2 * Cq, 1, what, "L%d_kv", l)); /* bf16: r(K) | r(V) */
    }
    rp->kv_buf0 = kv[0];
    rp->kv_elems = 2LL * Cq * nseq * N * sp->layers;
    rp->pairs_buf = tg_pb_buf(b, q * pl->R, 2, 1, "prefill (max logit, id) pairs of row blocks q*k..q*k+q-1",
                              "pairs");
    rp->dtok_buf = tg_pb_buf(b, 1, q * nseq, 1, "decode token ids of row blocks q*k..q*k+q-1 (int32, the runtime)",
                             "dec_tokens");
    rp->dpos_buf = tg_pb_buf(b, 1, nseq, 1, "decode positions of row block {h}'s sequences (int32, the runtime)",
                             "dec_pos");
    snprintf(what, sizeof what, "decode logits(h={h}, vocab block j=%d)", rp->j);
    rp->dlogits_buf = tg_pb_buf(b, nseq, pl->Vq, 1, what, "dec_logits");
    rp->dpairs_buf = tg_pb_buf(b, q * nseq, 2, 1, "decode (max logit, id) pairs of row blocks q*k..q*k+q-1",
                               "dec_pairs");
    for (int k = 0; k < 5 && !b->oom; k++) {
        int id = (int[]){rp->tok_buf, rp->dtok_buf, rp->dpos_buf, rp->pairs_buf, rp->dpairs_buf}[k];
        if (id < 0)
            b->oom = true;
        else if (k < 3)
            rp->bufs[id].dtype = TG_BUF_I32;
    }
    b->kv = kv;
    /* the prefill */
    b->gen = 1;
    tg_lm_embed(b, lm, rp->x_buf);
    int rs_carry = -1, x = rp->x_buf;
    for (int l = 0; l < sp->layers && !b->oom; l++)
        x = build_layer(b, l, &lw[l], x, &rs_carry, &sv[l], false);
    rp->y_buf = x;
    if (!b->oom)
        tg_lm_head(b, lm, x);
    if (!b->oom)
        gen_choose(b, rp->logits_buf, rp->pairs_buf, pl->R, false);
    /* the decode step */
    tg_plan dp = *pl;
    dp.R = nseq;
    dp.T = sp->batch;
    dp.spec.seq = 1;
    b->pl = &dp;
    b->phase = TG_PHASE_DEC;
    b->gen = 2;
    b->pos = rp->dpos_buf;
    b->name_sfx = "_dec";
    lm->tok = rp->dtok_buf;
    lm->logits = rp->dlogits_buf;
    lm->pos = rp->dpos_buf;
    int xd = tg_pb_buf(b, nseq, Cq, 0, "residual stream of the decoded tokens (h, j)", "x");
    if (!b->oom)
        tg_lm_embed(b, lm, xd);
    rs_carry = -1;
    for (int l = 0; l < sp->layers && !b->oom; l++)
        xd = build_layer(b, l, &lw[l], xd, &rs_carry, &sv[l], false);
    if (!b->oom)
        tg_lm_head(b, lm, xd);
    if (!b->oom)
        gen_choose(b, rp->dlogits_buf, rp->dpairs_buf, nseq, rp->dec_logits_t);
    b->name_sfx = NULL;
    b->gen = 0;
    b->kv = NULL;
    b->pl = pl;
    free(kv);
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
    rp->pairs_buf = rp->dtok_buf = rp->dpos_buf = rp->dlogits_buf = rp->dpairs_buf = rp->kv_buf0 = -1;
    rp->dec_logits_t = 0;
    /* pipeline stages (plan.h tg_plan.stage): this stage's blocks l0 .. l1-1; the embedding on the first stage, ln_f,
     * the head and the loss on the last */
    int l0 = pl->l0, l1 = pl->l0 + pl->nl, emb = pl->V > 0 && pl->stage == 0,
        head = pl->V > 0 && pl->stage == (sp->pp > 1 ? sp->pp : 1) - 1;
    if (emb)
        tg_lm_declare_embedding(b, &lm);
    else if (head)
        tg_lm_declare_tied(b, &lm); /* the last stage's copy of wte for the tied head */
    for (int l = l0; l < l1; l++)
        lw[l] = declare_layer_weights(b, l);
    if (head)
        tg_lm_declare_final(b, &lm);
    else if (emb)
        tg_lm_declare_tokens(b, &lm); /* the first stage of several: the ids without the head's buffers */
    char what[120];
    snprintf(what, sizeof what, "residual stream block (h={h}, j=%d): input in%s", rp->j,
             train ? "" : ", output out");
    /* micro-batches: the I/O blocks hold the rank's whole batch, the steps see one micro-batch's rows of them */
    long long mbe = (long long)pl->R * pl->Cq;
    rp->x_buf = tg_pb_io_buf(b, pl->R * pl->mb, pl->Cq, mbe, what, "x");
    rp->gx_buf = -1;
    if (train) {
        snprintf(what, sizeof what, "gradient block (h={h}, j=%d): dL/dy in, dL/dx out", rp->j);
        rp->gx_buf = tg_pb_io_buf(b, pl->R * pl->mb, pl->Cq, mbe, what, "grad_x");
    }
    if (!shards_only && sp->mode == TG_GENERATE) {
        plan_generate(b, &lm, lw, sv);
    } else if (!shards_only) {
        if (emb)
            tg_lm_embed(b, &lm, rp->x_buf);
        int rs_carry = -1, x = rp->x_buf;
        for (int l = l0; l < l1 && !b->oom; l++)
            x = build_layer(b, l, &lw[l], x, &rs_carry, &sv[l], false);
        rp->y_buf = x;
        if (head && !b->oom)
            tg_lm_head(b, &lm, x);
        if (train) {
            b->phase = TG_PHASE_BWD;
            if (head && !b->oom)
                tg_lm_head_bwd(b, &lm, rp->gx_buf);
            if (head && !emb && !b->oom) /* pipeline stages: the head's part of the tied wte gradient, summed over dep */
                tg_lm_tied_grad(b, &lm);
            for (int l = l1 - 1; l >= l0 && !b->oom; l--) {
                if (l - l0 < sp->recompute) { /* the first `recompute` layers of the stage (of the stack: pp = 1) */
                    /* recomputation: the forward's activations of this layer died after its forward (nothing
                     * later reads them, so the placement reuses their memory); run the layer again from its
                     * input and ln1 row sums, which the forward keeps, into buffers of its own */
                    b->name_sfx = "_rc";
                    build_layer(b, l, &lw[l], sv[l].x_in, NULL, &sv[l], true);
                    b->name_sfx = NULL;
                }
                build_layer_bwd(b, l, &lw[l], &sv[l], rp->gx_buf);
            }
            if (emb && !b->oom)
                tg_lm_embed_bwd(b, &lm, rp->gx_buf);
            b->phase = TG_PHASE_OPT;
            if (!b->oom)
                tg_pb_optimizer(b);
        }
    }
    free(lw);
    free(sv);
}
