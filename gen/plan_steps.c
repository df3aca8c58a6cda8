/*
 * plan_steps.c - the steps both schemes build alike (plan_builder.h): the
 * layernorm, residual, GeLU and attention steps and their backward, each on
 * this rank's block [rows, cols] of tokens x columns ([R, C/q] for Tesseract,
 * [T, C] or the local heads' or MLP columns for Megatron-LM). A scheme passes
 * the shapes and the labels that differ; where the statistics of a layernorm
 * need summing over the ranks that share a token's row (Tesseract), it passes
 * the all-reduce as `sum`, called between the two steps; NULL when rows are
 * whole. Collectives of the scheme, SUMMA and the choice of groups stay in
 * plan_tesseract.c and plan_megatron.c. The language model's loss over a
 * logits block [rows, Vq] is here too: both layouts run it, with their group
 * and sum.
 *
 * Design: the planner's middle layer (plan_steps.h). It calls only the
 * builder (plan_builder.c); the scheme planners and their language models
 * call it, never the other way (tools/plandeps.py).
 */
#include "plan_steps.h"

#include <assert.h>

bool tg_pb_ln_rowsum(tg_builder *b, int layer, int rows, int cols, int x, int rs, const char *label)
{
    tg_step *s = tg_pb_step(b, TG_STEP_LN_ROWSUM, layer, "ln1", -1);
    if (!s)
        return false;
    s->rows = rows;
    s->cols = cols;
    tg_pb_use(s, 0, x, TG_ACC_R);
    tg_pb_use(s, 1, rs, TG_ACC_W);
    s->label = label;
    return true;
}

/* A layernorm step on [rows, cols] whose statistics divide by the full hidden size; eps only where it is used. */
static tg_step *ln_step(tg_builder *b, tg_step_kind kind, int layer, const char *op, int rows, int cols, bool eps)
{
    tg_step *s = tg_pb_step(b, kind, layer, op, -1);
    if (!s)
        return NULL;
    s->rows = rows;
    s->cols = cols;
    s->hidden = b->pl->spec.hidden;
    if (eps)
        s->eps = b->pl->spec.eps;
    return s;
}

/* The residual step that wrote x and rs right before the layernorm being planned (nothing between: whole rows), or
 * NULL: the CUDA backend may run the three as one row kernel (gen/fuse.c, TG_EPI_LN). */
static tg_step *resid_before(tg_builder *b, int x, int rs)
{
    tg_step *r = b->rp->nsteps > 0 ? &b->rp->steps[b->rp->nsteps - 1] : NULL;
    if (!r || r->kind != TG_STEP_RESID_ROWSUM || r->phase != b->phase || r->buf[3] != rs ||
        (r->buf[4] >= 0 ? r->buf[4] : r->buf[0]) != x)
        return NULL;
    return r;
}

int tg_pb_layernorm(tg_builder *b, int layer, const char *op, int rows, int cols, int x, int rs, int gamma, int beta,
                    int y, const char *sqdev_label, tg_pb_sum_fn sum)
{
    if (sum)
        sum(b, layer, op, rs, rows, "row sums of x");
    tg_step *r = resid_before(b, x, rs);
    int vs = tg_pb_buf(b, 1, rows, 0, "per-token sum of squared deviations", "L%d_%s_sqdev", layer, op);
    if (r && vs >= 0 && y >= 0) { /* the row kernel writes vs and y while it reads p: both live from the residual step
                                   * on, so the arena never gives them p's bytes (gen/fuse.h, "Row kernels") */
        r->pin[0] = vs;
        r->pin[1] = y;
    }
    tg_step *s = ln_step(b, TG_STEP_LN_SQDEV, layer, op, rows, cols, false);
    if (!s)
        return vs;
    tg_pb_use(s, 0, x, TG_ACC_R);
    tg_pb_use(s, 1, rs, TG_ACC_R);
    tg_pb_use(s, 2, vs, TG_ACC_W);
    s->label = sqdev_label;
    if (sum)
        sum(b, layer, op, vs, rows, "squared deviations");
    tg_pb_ln_apply(b, layer, op, rows, cols, x, rs, vs, gamma, beta, y);
    return vs;
}

void tg_pb_ln_apply(tg_builder *b, int layer, const char *op, int rows, int cols, int x, int rs, int vs, int gamma,
                    int beta, int y)
{
    tg_step *s = ln_step(b, TG_STEP_LN_APPLY, layer, op, rows, cols, true);
    if (!s)
        return;
    tg_pb_use(s, 0, x, TG_ACC_R);
    tg_pb_use(s, 1, rs, TG_ACC_R);
    tg_pb_use(s, 2, vs, TG_ACC_R);
    tg_pb_use(s, 3, gamma, TG_ACC_R);
    tg_pb_use(s, 4, beta, TG_ACC_R);
    tg_pb_use(s, 5, y, TG_ACC_W);
    s->label = "y = (x - mean) / sqrt(var + eps) * gamma + beta";
}

void tg_pb_resid(tg_builder *b, int layer, const char *op, int rows, int cols, int x, int p, int bias, int rs, int y,
                 const char *label)
{
    tg_step *s = tg_pb_step(b, TG_STEP_RESID_ROWSUM, layer, op, -1);
    if (!s)
        return;
    s->rows = rows;
    s->cols = cols;
    tg_pb_use(s, 0, x, TG_ACC_R | (y == x ? TG_ACC_W : 0));
    tg_pb_use(s, 1, p, TG_ACC_R);
    tg_pb_use(s, 2, bias, TG_ACC_R);
    if (rs >= 0)
        tg_pb_use(s, 3, rs, TG_ACC_W);
    if (y != x)
        tg_pb_use(s, 4, y, TG_ACC_W);
    s->label = label;
}

/* The attention steps' shape: nseq sequences of seq tokens, the class's Hq heads of D columns. */
static tg_step *attn_step(tg_builder *b, tg_step_kind kind, int layer, int rows, int cols, long long flops_per)
{
    const tg_plan *pl = b->pl;
    tg_step *s = tg_pb_step(b, kind, layer, "attn", -1);
    if (!s)
        return NULL;
    s->rows = rows;
    s->cols = cols;
    s->nseq = pl->nseq;
    s->seq = pl->spec.seq;
    s->heads = pl->Hq;
    s->hdim = pl->D;
    s->flops = flops_per * pl->nseq * pl->Hq * pl->spec.seq * pl->spec.seq * pl->D;
    return s;
}

/* The attention steps' scratch, planned like every buffer (arena offsets, memory plan, manifest): the CUDA backend
 * computes one sequence's heads at a time as strided-batched GEMMs (docs/CUDA.md), so its scores and
 * probabilities are [heads*seq, seq], fp32 scores and probabilities of the type the GEMMs read (bf16 in a bf16
 * plan); a bf16 plan adds the bf16 copies of Q, K, V (and of dO in the backward) the tensor-core GEMMs read. The
 * CPU backend works on one (sequence, head) at a time in slot 3: its first [seq, seq] (the forward's scores; the
 * backward's probabilities, then its dL/d(scores) in the second [seq, seq]); it leaves the other slots alone. */
/* attention = "cudnn" (a bf16 plan; docs/CUDA.md "Fused attention through cuDNN"): cuDNN keeps the scores on
 * chip, so no [heads*seq, seq] scratch. Slot 3 (fp32) is the CPU program's [seq, seq] (its [2 seq, seq] in the
 * backward); the CUDA program does not name it. The forward: slot 4 (bf16) its output before the widening when the
 * step's output is fp32 (the scheme casts it itself; none otherwise), slot 5 the bf16 copy of the biased QKV that
 * cuDNN reads, and in training slot 6 the softmax statistics ([nseq*heads, seq] fp32, the log-sum-exp of each
 * score row). The backward reads what its forward kept instead of computing it again: that step's QKV copy (slot
 * 5), statistics (7) and bf16 output O (8: the step's own output when it is bf16, else its slot 4), so those live
 * from the forward to the backward like the saved activations, and the fp32 qkv does not (slot 0 unused: the CPU
 * program's backward reads the bf16 copy as well); it writes the bf16 dQ, dK, dV in slot 4 ([rows, 3*cols]) and
 * the bf16 copy of dO in slot 6, which the proj input-gradient GEMM may write instead (gen/fuse.c: pinned to it). */
static const tg_step *attn_forward_of(const tg_builder *b, int layer)
{
    for (int i = b->rp->nsteps - 1; i >= 0; i--) /* the latest: a recomputed forward where the spec recomputes */
        if (b->rp->steps[i].kind == TG_STEP_ATTENTION && b->rp->steps[i].layer == layer)
            return &b->rp->steps[i];
    return NULL;
}

static void attn_scratch_cudnn(tg_builder *b, tg_step *s, int layer, bool bwd, int rows, int cols)
{
    const tg_plan *pl = b->pl;
    int S = pl->spec.seq, st = pl->nseq * pl->Hq;
    s->cudnn = 1;
    int sc = tg_pb_buf(b, bwd ? 2 * S : S, S, 0,
                       bwd ? "the CPU program's scores and dL/dP of one (sequence, head) (cuDNN keeps them on chip)"
                           : "the CPU program's attention scores of one (sequence, head) (cuDNN keeps them on chip)",
                       bwd ? "L%d_bwd_scores" : "L%d_scores", layer);
    tg_pb_use(s, 3, sc, TG_ACC_W);
    if (!bwd) {
        if (b->rp->bufs[s->buf[2]].dtype != TG_BUF_BF16)
            tg_pb_use(s, 4, tg_pb_bf16_out(b, tg_pb_buf(b, rows, cols, 0,
                                                        "attention output in bf16 before its widening (cuDNN), kept for "
                                                        "the backward in training",
                                                        "L%d_sdpa_out", layer)),
                      TG_ACC_W);
        tg_pb_use(s, 5, tg_pb_bf16_out(b, tg_pb_buf(b, rows, 3 * cols, 0,
                                                    pl->spec.mode == TG_TRAIN
                                                        ? "bf16 copy of the biased [Q|K|V], kept for the backward"
                                                        : "bf16 copy of the biased [Q|K|V]",
                                                    "L%d_qkv_bf16", layer)),
                  TG_ACC_W);
        if (pl->spec.mode == TG_TRAIN)
            tg_pb_use(s, 6, tg_pb_buf(b, st, S, 0,
                                      "softmax statistics (log-sum-exp of each score row, fp32), kept for the backward",
                                      "L%d_sdpa_stats", layer),
                      TG_ACC_W);
        return;
    }
    const tg_step *f = attn_forward_of(b, layer);
    /* every scheme plans a layer's forward before its backward, in training with the statistics */
    assert(f && f->cudnn && f->buf[5] >= 0 && f->buf[6] >= 0);
    int fq = f->buf[5], fst = f->buf[6], fo = f->buf[4] >= 0 ? f->buf[4] : f->buf[2];
    tg_pb_use(s, 4, tg_pb_bf16_out(b, tg_pb_buf(b, rows, 3 * cols, 0, "dL/d[Q|K|V] in bf16, as cuDNN writes it",
                                                "L%d_bwd_sdpa", layer)),
              TG_ACC_W);
    tg_pb_use(s, 5, fq, TG_ACC_R);
    int dout16 = tg_pb_bf16_out(b, tg_pb_buf(b, rows, cols, 0, "bf16 copy of dL/d(attention output)",
                                             "L%d_att_dout_bf16", layer));
    /* the proj input-gradient GEMM may write it (gen/fuse.c, TG_EPI_D_BF16): live from that GEMM on */
    tg_pb_pin_to_gemm(b, s->buf[1], dout16);
    tg_pb_use(s, 6, dout16, TG_ACC_W);
    tg_pb_use(s, 7, fst, TG_ACC_R);
    tg_pb_use(s, 8, fo, TG_ACC_R);
    /* neither program reads the fp32 qkv here (the CPU program's backward rounds Q, K, V to bf16 anyway, so it
     * reads the kept copy too, bitwise the same): the fp32 qkv lives no longer than its forward */
    tg_pb_use(s, 0, -1, 0);
}

static void attn_scratch(tg_builder *b, tg_step *s, int layer, bool bwd, int rows, int cols)
{
    const tg_plan *pl = b->pl;
    int S = pl->spec.seq, HS = pl->Hq * S;
    if (pl->spec.attention == TG_ATTN_CUDNN) {
        attn_scratch_cudnn(b, s, layer, bwd, rows, cols);
        return;
    }
    /* the CPU's backward keeps its two [seq, seq] (probabilities, dL/d(scores)) side by side in slot 3 */
    int sc = tg_pb_buf(b, bwd && pl->Hq < 2 ? 2 * S : HS, S, 0, bwd ? "recomputed attention scores, then dL/dP, of one sequence's heads"
                                        : "attention scores of one sequence's heads",
                       bwd ? "L%d_bwd_scores" : "L%d_scores", layer);
    int pr = tg_pb_bf16_out(b, tg_pb_buf(b, HS, S, 0, bwd ? "attention probabilities, then dL/d(scores), of one "
                                                             "sequence's heads"
                                                           : "attention probabilities of one sequence's heads",
                                         bwd ? "L%d_bwd_probs" : "L%d_probs", layer));
    tg_pb_use(s, 3, sc, TG_ACC_W);
    tg_pb_use(s, 4, pr, TG_ACC_W);
    if (pl->spec.dtype != TG_BF16)
        return;
    tg_pb_use(s, 5, tg_pb_bf16_out(b, tg_pb_buf(b, rows, 3 * cols, 0, "bf16 copy of the biased [Q|K|V]",
                                                bwd ? "L%d_qkv_bwd_bf16" : "L%d_qkv_bf16", layer)),
              TG_ACC_W);
    if (bwd)
        tg_pb_use(s, 6, tg_pb_bf16_out(b, tg_pb_buf(b, rows, cols, 0, "bf16 copy of dL/d(attention output)",
                                                    "L%d_att_dout_bf16", layer)),
                  TG_ACC_W);
}

bool tg_pb_attention(tg_builder *b, int layer, int rows, int cols, int qkv, int qkv_bias, int att)
{
    tg_step *s = attn_step(b, TG_STEP_ATTENTION, layer, rows, cols, 4);
    if (!s)
        return false;
    tg_pb_use(s, 0, qkv, TG_ACC_R | TG_ACC_W);
    tg_pb_use(s, 1, qkv_bias, TG_ACC_R);
    tg_pb_use(s, 2, att, TG_ACC_W);
    attn_scratch(b, s, layer, false, rows, cols);
    s->desc = TG_D_ATTENTION;
    return true;
}

int tg_pb_gelu(tg_builder *b, int layer, int rows, int cols, int h, int bias, int g)
{
    /* bf16 training keeps u in bf16 (docs/BF16.md): GeLU reads the fp32 v = h + b1, the backward's GeLU' the stored
     * bf16(v), and cuBLASLt's GELU_AUX_BIAS epilogue writes that aux in D's type (gen/fuse.c) */
    bool keep16 = g != h && b->pl->spec.mode == TG_TRAIN && b->pl->spec.dtype == TG_BF16;
    int u = h;
    if (keep16) {
        u = tg_pb_bf16_out(b, tg_pb_buf(b, rows, cols, 0, "GeLU pre-activation u = h + b1, kept for the backward",
                                        "L%d_fc1_u", layer));
        if (u < 0)
            return -1;
    }
    if (g != h) { /* fc1's GEMM may write g (and u) as its epilogue (gen/fuse.c) */
        tg_pb_pin_to_gemm(b, h, g);
        if (keep16)
            tg_pb_pin_to_gemm(b, h, u);
    }
    tg_step *s = tg_pb_step(b, g != h ? TG_STEP_GELU_SAVE : TG_STEP_BIAS_GELU, layer, "gelu", -1);
    if (!s)
        return -1;
    tg_pb_use(s, 0, h, keep16 ? TG_ACC_R : TG_ACC_R | TG_ACC_W);
    tg_pb_use(s, 1, bias, TG_ACC_R);
    if (keep16) {
        tg_pb_use(s, 2, g, TG_ACC_W);
        tg_pb_use(s, 3, u, TG_ACC_W);
        s->label = "v = h + b1; u = bf16(v) (kept for the backward); g = GeLU(v)";
    } else if (g != h) {
        tg_pb_use(s, 2, g, TG_ACC_W);
        s->label = b->pl->spec.mode == TG_TRAIN ? "u = h + b1 (kept for the backward); g = GeLU(u)"
                                                : "u = h + b1; g = GeLU(u) (bf16, for fc2)";
    } else {
        s->label = "h = GeLU(h + b1), tanh approximation";
    }
    s->rows = rows;
    s->cols = cols;
    return u;
}

/* ---- backward ------------------------------------------------------------------ */

bool tg_pb_colsum(tg_builder *b, int layer, const char *op, int rows, int cols, int dy, int db, const char *label)
{
    tg_pb_pin_to_gemm(b, dy, db); /* the weight-gradient GEMM before it may write db as its epilogue (gen/fuse.c) */
    tg_step *s = tg_pb_step(b, TG_STEP_COLSUM, layer, op, -1);
    if (!s)
        return false;
    s->rows = rows;
    s->cols = cols;
    tg_pb_use(s, 0, dy, TG_ACC_R);
    tg_pb_use(s, 1, db, TG_ACC_W);
    s->label = label;
    return true;
}

int tg_pb_gelu_bwd(tg_builder *b, int layer, int rows, int cols, int dg, int u)
{
    /* bf16: du rounded once, where the fc1 GEMMs would have cast it; fc2's input-gradient GEMM can then write it as
     * its cuBLASLt DGELU epilogue with the bf16 u as aux (gen/fuse.c), never writing the fp32 dg */
    bool b16 = b->pl->spec.dtype == TG_BF16;
    int du = dg;
    if (b16) {
        du = tg_pb_bf16_out(b, tg_pb_buf(b, rows, cols, 0, "dL/du in bf16, for the fc1 GEMMs and its bias gradient",
                                         "L%d_gelu_du", layer));
        if (du < 0)
            return -1;
    }
    if (b16) /* fc2's input-gradient GEMM may write du as its epilogue (gen/fuse.c) */
        tg_pb_pin_to_gemm(b, dg, du);
    tg_step *s = tg_pb_step(b, TG_STEP_GELU_BWD, layer, "gelu", -1);
    if (!s)
        return -1;
    s->rows = rows;
    s->cols = cols;
    tg_pb_use(s, 0, dg, b16 ? TG_ACC_R : TG_ACC_R | TG_ACC_W);
    tg_pb_use(s, 1, u, TG_ACC_R);
    if (b16) {
        tg_pb_use(s, 2, du, TG_ACC_W);
        tg_pb_operand_is(b, layer, "fc1", dg, du); /* the fc1 GEMMs read du as dg's bf16 copy: no cast */
    }
    s->label = b16 ? "du = bf16(dg * GeLU'(u))" : "du = dg * GeLU'(u)";
    return du;
}

/* A layernorm-backward step reading dy, x, its statistics and gamma (slots 0..4). */
static tg_step *ln_bwd_step(tg_builder *b, tg_step_kind kind, int layer, const char *op, int rows, int cols, int dy,
                            int x, int rs, int vs, int gamma)
{
    tg_step *s = ln_step(b, kind, layer, op, rows, cols, true);
    if (!s)
        return NULL;
    tg_pb_use(s, 0, dy, TG_ACC_R);
    tg_pb_use(s, 1, x, TG_ACC_R);
    tg_pb_use(s, 2, rs, TG_ACC_R);
    tg_pb_use(s, 3, vs, TG_ACC_R);
    tg_pb_use(s, 4, gamma, TG_ACC_R);
    return s;
}

bool tg_pb_ln_bwd(tg_builder *b, int layer, const char *op, int rows, int cols, int dy, int x, int rs, int vs,
                  int gamma, int g, int dgamma, int dbeta, tg_pb_sum_fn sum)
{
    int sums = tg_pb_buf(b, 2, rows, 0, "per-token sums of dxhat and dxhat*xhat", "L%d_%s_bwd_sums", layer, op);
    tg_step *s = ln_bwd_step(b, TG_STEP_LN_BWD_SUMS, layer, op, rows, cols, dy, x, rs, vs, gamma);
    if (!s)
        return false;
    tg_pb_use(s, 5, sums, TG_ACC_W);
    tg_pb_use(s, 6, dgamma, TG_ACC_W);
    tg_pb_use(s, 7, dbeta, TG_ACC_W);
    s->label = "per-token sums of dxhat, dxhat*xhat; dgamma, dbeta column sums";
    if (sum)
        sum(b, layer, op, sums, 2LL * rows, "the two per-token sums");
    s = ln_bwd_step(b, TG_STEP_LN_BWD_APPLY, layer, op, rows, cols, dy, x, rs, vs, gamma);
    if (!s)
        return false;
    tg_pb_use(s, 5, sums, TG_ACC_R);
    tg_pb_use(s, 6, g, TG_ACC_R | TG_ACC_W);
    s->label = "dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)); g += dx";
    return true;
}

bool tg_pb_attention_bwd(tg_builder *b, int layer, int rows, int cols, int qkv, int datt, int dqkv)
{
    tg_step *s = attn_step(b, TG_STEP_ATTN_BWD, layer, rows, cols, 10);
    if (!s)
        return false;
    tg_pb_use(s, 0, qkv, TG_ACC_R);
    tg_pb_use(s, 1, datt, TG_ACC_R);
    tg_pb_use(s, 2, dqkv, TG_ACC_W);
    attn_scratch(b, s, layer, true, rows, cols);
    s->label = "attention backward, probabilities recomputed from Q and K";
    if (s->cudnn) { /* cuDNN's bf16 dQ, dK, dV (slot 4) are the bf16 copy of dqkv the QKV GEMMs read: no cast */
        s->label = "attention backward from the forward's bf16 Q, K, V, O and softmax statistics (cuDNN)";
        tg_pb_operand_is(b, layer, "qkv", dqkv, s->buf[4]);
    }
    return true;
}

/* ---- the language model's loss (docs/MODEL.md) ------------------------------------------------------ */

int tg_lm_nvalid(const tg_plan *pl, int blk)
{
    int n = pl->V - blk * pl->Vq;
    return n < 0 ? 0 : n > pl->Vq ? pl->Vq : n;
}

/* One loss step over this rank's logits block [rows, Vq] of vocab block blk. */
static tg_step *loss_step(tg_builder *b, tg_step_kind kind, int rows, int blk, const char *label)
{
    tg_step *s = tg_pb_step(b, kind, TG_LAYER_HEAD, "loss", -1);
    if (!s)
        return NULL;
    s->rows = rows;
    s->cols = b->pl->Vq;
    s->vocab0 = blk * b->pl->Vq;
    s->nvalid = tg_lm_nvalid(b->pl, blk);
    s->label = label;
    return s;
}

void tg_lm_loss(tg_builder *b, tg_lm *lm, int rows, int blk, tg_group g, int gsize, tg_pb_sum_fn sum)
{
    tg_class_plan *rp = b->rp;
    const int L = TG_LAYER_HEAD;
    lm->mx = tg_pb_buf(b, 1, rows, 0, "per-token max logit (over all of V)", "lm_max");
    tg_step *s = loss_step(b, TG_STEP_LM_ROWMAX, rows, blk, "per-token max of the local logits (pad columns excluded)");
    if (!s)
        return;
    tg_pb_use(s, 0, rp->logits_buf, TG_ACC_R);
    tg_pb_use(s, 1, lm->mx, TG_ACC_W);
    if (gsize > 1) {
        s = tg_pb_step(b, TG_STEP_ALLREDUCE, L, "loss", -1);
        if (!s)
            return;
        s->group = g;
        s->group_size = gsize;
        s->maxop = 1;
        s->count = rows;
        tg_pb_use(s, 0, lm->mx, TG_ACC_R | TG_ACC_W);
        s->label = g == TG_ROW ? "all-reduce(max) of the per-token max over row"
                               : "all-reduce(max) of the per-token max over world";
    }
    lm->sums = tg_pb_buf(b, 2, rows, 0, "per token: sum of exp(logit - max); the target's logit", "lm_sums");
    s = loss_step(b, TG_STEP_LM_SUMS, rows, blk,
                  "local sums of exp(logit - max), the target logit where this rank's vocab block holds it");
    if (!s)
        return;
    tg_pb_use(s, 0, rp->logits_buf, TG_ACC_R);
    tg_pb_use(s, 1, lm->mx, TG_ACC_R);
    tg_pb_use(s, 2, rp->tgt_buf, TG_ACC_R);
    tg_pb_use(s, 3, lm->sums, TG_ACC_W);
    sum(b, L, "loss", lm->sums, 2LL * rows, "sums of exp, target logits");
    s = tg_pb_step(b, TG_STEP_LM_LOSS, L, "loss", -1);
    if (!s)
        return;
    tg_pb_use(s, 0, lm->mx, TG_ACC_R);
    tg_pb_use(s, 1, lm->sums, TG_ACC_R);
    tg_pb_use(s, 2, rp->loss_buf, TG_ACC_W);
    s->rows = rows;
    s->label = "per-token loss = log(sum of exp) + max - target logit";
}

int tg_lm_dlogits(tg_builder *b, tg_lm *lm, int rows, int blk, const char *what)
{
    tg_class_plan *rp = b->rp;
    int dl = tg_pb_buf(b, rows, b->pl->Vq, 0, what, "lm_dlogits");
    tg_step *s = loss_step(b, TG_STEP_LM_DLOGITS, rows, blk,
                           "dlogits = (softmax - onehot(target)) / (batch*seq), pad columns 0");
    if (!s)
        return -1;
    tg_pb_use(s, 0, rp->logits_buf, TG_ACC_R);
    tg_pb_use(s, 1, lm->mx, TG_ACC_R);
    tg_pb_use(s, 2, lm->sums, TG_ACC_R);
    tg_pb_use(s, 3, rp->tgt_buf, TG_ACC_R);
    tg_pb_use(s, 4, dl, TG_ACC_W);
    s->scale = 1.0f / (float)b->pl->T;
    return dl;
}

/* ---- generation (docs/GENERATE.md) ------------------------------------------------------------------------- */

bool tg_pb_kv_write(tg_builder *b, int layer, int rows, int cols, int qkv, int kv)
{
    tg_step *s = tg_pb_step(b, TG_STEP_KV_WRITE, layer, "kv", -1);
    if (!s)
        return false;
    tg_pb_use(s, 0, qkv, TG_ACC_R);
    tg_pb_use(s, 1, kv, TG_ACC_W);
    s->rows = rows;
    s->cols = cols;
    s->nseq = b->pl->nseq;
    s->seq = b->pl->spec.seq;
    s->context = b->pl->spec.context;
    s->label = b->rp->bufs[kv].dtype == TG_BUF_BF16
                   ? "KV cache rows s*context + p, p < seq = K | V of the prompt's tokens (bias added), rounded to bf16"
                   : "KV cache rows s*context + p, p < seq = K | V of the prompt's tokens (bias added)";
    return true;
}

bool tg_pb_attn_decode(tg_builder *b, int layer, int rows, int cols, int qkv, int qkv_bias, int att, int kv, int pos)
{
    const tg_plan *pl = b->pl;
    int N = pl->spec.context;
    tg_step *s = tg_pb_step(b, TG_STEP_ATTN_DECODE, layer, "attn", -1);
    if (!s)
        return false;
    tg_pb_use(s, 0, qkv, TG_ACC_R | TG_ACC_W);
    tg_pb_use(s, 1, qkv_bias, TG_ACC_R);
    tg_pb_use(s, 2, att, TG_ACC_W);
    tg_pb_use(s, 3, kv, TG_ACC_R | TG_ACC_W);
    tg_pb_use(s, 4, pos, TG_ACC_R);
    tg_pb_use(s, 5, tg_pb_buf(b, 1, N, 0, "attention scores of one sequence's head over the KV cache",
                              "L%d_dec_scores", layer), TG_ACC_W);
    s->rows = rows;
    s->cols = cols;
    s->nseq = rows;
    s->seq = 1;
    s->heads = pl->Hq;
    s->hdim = pl->D;
    s->context = N;
    s->flops = 4LL * rows * pl->Hq * N * pl->D; /* at most: a sequence at position N-1 */
    s->label = b->rp->bufs[kv].dtype == TG_BUF_BF16
                   ? "r(q), r(K), r(V) of the token (K, V into the cache at its position); r(softmax(q K^T / sqrt(hdim))) "
                     "V over positions 0..pos, rounded"
                   : "K, V of the token into the cache at its position; softmax(q K^T / sqrt(hdim)) V over positions "
                     "0..pos";
    return true;
}

void tg_lm_argmax(tg_builder *b, int logits, int rows, int blk, int pairs, int boff, tg_group g, int gsize)
{
    tg_step *s = loss_step(b, TG_STEP_LM_ARGMAX, rows, blk,
                           "per-token (max logit, its id) of the local logits, ties to the lowest id");
    if (!s)
        return;
    s->op = "argmax";
    s->boff = boff;
    tg_pb_use(s, 0, logits, TG_ACC_R);
    tg_pb_use(s, 1, pairs, TG_ACC_R | TG_ACC_W);
    if (gsize > 1) {
        s = tg_pb_step(b, TG_STEP_ALLREDUCE, TG_LAYER_HEAD, "argmax", -1);
        if (!s)
            return;
        s->group = g;
        s->group_size = gsize;
        s->maxop = 2; /* MPI_MAXLOC on (float, int) pairs: 2 slots each */
        s->count = 2LL * rows;
        s->boff = boff;
        tg_pb_use(s, 0, pairs, TG_ACC_R | TG_ACC_W);
        s->label = g == TG_COL ? "all-reduce(maxloc) of the (max logit, id) pairs over col: the argmax over all of V, "
                                 "lowest id on ties"
                               : "all-reduce(maxloc) of the (max logit, id) pairs over row: the argmax over all of V, "
                                 "lowest id on ties";
    }
}
