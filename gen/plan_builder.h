/*
 * plan_builder.h - the planner's internal primitives, shared by the step
 * builders of the two schemes (plan.c: Tesseract, plan_megatron.c:
 * Megatron-LM 1-D). Not part of the plan's interface (plan.h).
 *
 * A builder appends to one class plan: buffers (tg_pb_buf), weight shards
 * and their pieces (tg_pb_param, tg_pb_piece), and steps (tg_pb_step), each
 * naming the buffers it reads and writes (tg_pb_use). Allocation failure sets
 * `oom` and the caller reports it once. Lifetimes, placement, totals and
 * streams are computed afterwards by plan.c for either scheme alike.
 * plan_steps.c builds the steps that are the same in both schemes (layernorm,
 * residual, GeLU, attention and their backward) on a block [rows, cols] of
 * this rank's tokens x columns given by the scheme.
 */
#ifndef TG_PLAN_BUILDER_H
#define TG_PLAN_BUILDER_H

#include "plan.h"

typedef struct tg_builder {
    const tg_plan *pl;
    tg_class_plan *rp;
    tg_coord c; /* the class's (i, j), with k = 0: only i and j decide anything here */
    int cap_steps, cap_bufs, cap_params;
    bool oom;
    tg_phase phase; /* phase of the steps being appended */
    /* tg_pb_operand's bf16 copies of the current (phase, layer, op): a GEMM operand read twice there (megatron's dY
     * by its dX and dW GEMMs) is cast once; nothing writes a buffer between two GEMMs of one op */
    struct {
        int src, dst;
    } cast[4];
    int ncast, cast_layer;
    const char *cast_op;
    tg_phase cast_phase;
} tg_builder;

/* A buffer [rows, cols]; its name is printf-like with %d and %s only. Returns its id (-1 on oom). */
int tg_pb_buf(tg_builder *b, int rows, int cols, int persistent, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Append a step of the builder's phase; NULL on oom. */
tg_step *tg_pb_step(tg_builder *b, tg_step_kind kind, int layer, const char *op, int t);
void tg_pb_use(tg_step *s, int slot, int buf, unsigned char acc);
/* A weight shard [rows, cols] of the tensor `name` (full [full0, full1]) with, when training, its gradient and
 * AdamW moments; its replica group is set to the Tesseract one (the caller may change it). Returns the param
 * index (-1 on oom). */
int tg_pb_param(tg_builder *b, const char *name, int ndim, int full0, int full1, int rows, int cols);
void tg_pb_piece(tg_builder *b, int param, int r0, int nr, int c0, int nc, int dst_col);
/* bf16 plans (docs/BF16.md). tg_pb_bf16_out: buf is written by a kernel for GEMMs to read, so it is bf16 (nothing
 * in an fp32 plan); returns buf. tg_pb_operand: the GEMM operand for buf: buf itself when the plan is fp32 or buf
 * is bf16; the fp32 master of a training weight: its persistent bf16 copy (tg_param.w16, declared on first use; the
 * AdamW step writes it, no CAST step); else a new bf16 buffer that a CAST step (appended now) fills from buf. */
int tg_pb_bf16_out(tg_builder *b, int buf);
int tg_pb_operand(tg_builder *b, int layer, const char *op, int buf);
/* A buffer like buf (its shape and element type): SUMMA receive buffers take the type of what is sent. */
int tg_pb_buf_like(tg_builder *b, int like, const char *what, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* C[m,n] = op(A) op(B) (beta 0), flops counted. */
tg_step *tg_pb_gemm(tg_builder *b, int layer, const char *op, int t, int ta, int tb, int m, int n, int k, int A,
                    int lda, int B, int ldb, int C, int ldc);
/* All-reduce with bitwise the same sum on every member of g; nothing for a group of one. */
void tg_pb_allreduce_exact(tg_builder *b, int layer, const char *op, tg_group g, int buf, long long count,
                           const char *what);
/* plan.c's Tesseract collectives: a SUMMA-style broadcast of buf over g from local root t (desc TG_D_BCAST, why
 * ends it), a reduce(sum) onto local root t of g, and the all-reduce of a per-token statistic over the row. NULL on
 * oom. */
tg_step *tg_pb_bcast(tg_builder *b, int layer, const char *op, int t, tg_group g, int buf, long long count,
                     const char *why);
tg_step *tg_pb_reduce(tg_builder *b, int layer, const char *op, int t, tg_group g, int buf, long long count);
void tg_pb_allreduce_row(tg_builder *b, int layer, const char *op, int buf, long long count, const char *what);
/* One AdamW step per parameter shard (which also writes the shard's persistent bf16 copy, if any). */
void tg_pb_optimizer(tg_builder *b);

/* ---- plan_steps.c: functions returning bool return false on oom --------------------------------------- */

/* Sums a per-token statistic buf [count] over the ranks that share the tokens' rows (Tesseract's row group). */
typedef void (*tg_pb_sum_fn)(tg_builder *b, int layer, const char *op, int buf, long long count, const char *what);

/* The "ln1" row sums rs of x [rows, cols] (the first block; later ones get them from the residual step). */
bool tg_pb_ln_rowsum(tg_builder *b, int layer, int rows, int cols, int x, int rs, const char *label);
/* y = LN(x) given the row sums rs: centred squares (labelled sqdev_label) then the normalisation, with sum
 * called on rs and on the squares before each use when rows are split (NULL: whole rows). Returns the squares'
 * buffer. */
int tg_pb_layernorm(tg_builder *b, int layer, const char *op, int rows, int cols, int x, int rs, int gamma, int beta,
                    int y, const char *sqdev_label, tg_pb_sum_fn sum);
/* y = x + p + bias (in place when y == x), with the row sums of y for the next layernorm into rs when rs >= 0. */
void tg_pb_resid(tg_builder *b, int layer, const char *op, int rows, int cols, int x, int p, int bias, int rs, int y,
                 const char *label);
/* Attention of the class's heads: qkv [rows, 3 cols] (+ bias, in place) -> att [rows, cols]. */
bool tg_pb_attention(tg_builder *b, int layer, int rows, int cols, int qkv, int qkv_bias, int att);
/* GeLU(h + bias) [rows, cols]: in place when g == h (inference), else u = h + bias kept in h and g = GeLU(u). */
bool tg_pb_gelu(tg_builder *b, int layer, int rows, int cols, int h, int bias, int g);
/* db [cols] = column sums of dy [rows, cols] (local: the caller sums over the ranks). */
bool tg_pb_colsum(tg_builder *b, int layer, const char *op, int rows, int cols, int dy, int db, const char *label);
/* dg [rows, cols] *= GeLU'(u), in place. */
bool tg_pb_gelu_bwd(tg_builder *b, int layer, int rows, int cols, int dg, int u);
/* g += dx of y = LN(x) given dy; local dgamma, dbeta (the caller sums them over the ranks); sum as for
 * tg_pb_layernorm, on the two per-token sums. */
bool tg_pb_ln_bwd(tg_builder *b, int layer, const char *op, int rows, int cols, int dy, int x, int rs, int vs,
                  int gamma, int g, int dgamma, int dbeta, tg_pb_sum_fn sum);
/* dqkv [rows, 3 cols] from qkv and datt [rows, cols], the probabilities recomputed. */
bool tg_pb_attention_bwd(tg_builder *b, int layer, int rows, int cols, int qkv, int datt, int dqkv);

/* ---- plan_lm.c: the language model around the blocks (docs/MODEL.md) -------------------------------------- */

typedef struct tg_lm {
    int wte, wpe, lnf_g, lnf_b;         /* shard buffers */
    int p_wte, p_wpe, p_lnf_g, p_lnf_b; /* their param indices */
    int y, rs, vs, xf, mx, sums;        /* what the head's backward needs of its forward */
} tg_lm;

/* wte and wpe (before the blocks' params), ln_f (after them); the token, target, logits and loss buffers. */
void tg_lm_declare_embedding(tg_builder *b, tg_lm *lm);
void tg_lm_declare_final(tg_builder *b, tg_lm *lm);
/* x [R, Cq] = wte rows of the tokens + wpe rows of their positions */
void tg_lm_embed(tg_builder *b, tg_lm *lm, int x);
/* ln_f of the last block's output y, the tied head's logits and the vocab-parallel loss */
void tg_lm_head(tg_builder *b, tg_lm *lm, int y);
/* Both schemes: real ids (< V) among the Vq columns of vocab block blk; the vocab-parallel loss over this rank's
 * logits block [rows, Vq] of vocab block blk (local row max, all-reduce(max) over g of gsize ranks, local sums of
 * exponentials and the target logit, their sum by `sum`, the per-token loss); and dL/dlogits of that block into a
 * new [rows, Vq] buffer described by what (returned; -1 on oom). */
int tg_lm_nvalid(const tg_plan *pl, int blk);
void tg_lm_loss(tg_builder *b, tg_lm *lm, int rows, int blk, tg_group g, int gsize, tg_pb_sum_fn sum);
int tg_lm_dlogits(tg_builder *b, tg_lm *lm, int rows, int blk, const char *what);
/* the loss's backward through the head and ln_f into g (which the runtime zeroes before the backward) */
void tg_lm_head_bwd(tg_builder *b, tg_lm *lm, int g);
/* g = dL/dx of the embedding output: the wte and wpe gradients, then their all-reduces */
void tg_lm_embed_bwd(tg_builder *b, tg_lm *lm, int g);

/* plan_megatron_lm.c: the same on the megatron scheme's vocab-parallel layout (rank r: wte rows r*Vq.., whole
 * width; wpe and ln_f whole; every token), same order of calls. */
void tg_mglm_declare_embedding(tg_builder *b, tg_lm *lm);
void tg_mglm_declare_final(tg_builder *b, tg_lm *lm);
void tg_mglm_embed(tg_builder *b, tg_lm *lm, int x);
void tg_mglm_head(tg_builder *b, tg_lm *lm, int y);
void tg_mglm_head_bwd(tg_builder *b, tg_lm *lm, int g);
void tg_mglm_embed_bwd(tg_builder *b, tg_lm *lm, int g);

/* plan_megatron.c: the shards of the megatron class (0, j) and, unless shards_only, its steps. */
void tg_plan_megatron(tg_builder *b, bool shards_only);

#endif
