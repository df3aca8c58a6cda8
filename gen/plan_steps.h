/*
 * plan_steps.h - the planner's middle layer (plan_steps.c): the step
 * sequences every scheme builds alike, on a block [rows, cols] of this rank's
 * tokens x columns that the scheme gives: layernorm, residual, GeLU and
 * attention and their backward, and the language model's vocab-parallel loss
 * over a logits block. They call only the builder (plan_builder.h); the scheme
 * planners (plan_schemes.h) call them. Functions returning bool return false
 * on oom.
 */
#ifndef TG_PLAN_STEPS_H
#define TG_PLAN_STEPS_H

#include "plan_builder.h"

/* Sums a per-token statistic buf [count] over the ranks that share the tokens' rows (Tesseract's row group). */
typedef void (*tg_pb_sum_fn)(tg_builder *b, int layer, const char *op, int buf, long long count, const char *what);

/* The "ln1" row sums rs of x [rows, cols] (the first block; later ones get them from the residual step). */
bool tg_pb_ln_rowsum(tg_builder *b, int layer, int rows, int cols, int x, int rs, const char *label);
/* y = LN(x) given the row sums rs: centred squares (labelled sqdev_label) then the normalisation, with sum
 * called on rs and on the squares before each use when rows are split (NULL: whole rows). Returns the squares'
 * buffer. */
int tg_pb_layernorm(tg_builder *b, int layer, const char *op, int rows, int cols, int x, int rs, int gamma, int beta,
                    int y, const char *sqdev_label, tg_pb_sum_fn sum);
/* y = LN(x) from the row-group sums rs (of x) and vs (of its centred squares) already summed: the last step of
 * tg_pb_layernorm alone (a recomputed layer's ln1, whose sums the forward kept). */
void tg_pb_ln_apply(tg_builder *b, int layer, const char *op, int rows, int cols, int x, int rs, int vs, int gamma,
                    int beta, int y);
/* y = x + p + bias (in place when y == x), with the row sums of y for the next layernorm into rs when rs >= 0. */
void tg_pb_resid(tg_builder *b, int layer, const char *op, int rows, int cols, int x, int p, int bias, int rs, int y,
                 const char *label);
/* Attention of the class's heads: qkv [rows, 3 cols] (+ bias, in place) -> att [rows, cols]. */
bool tg_pb_attention(tg_builder *b, int layer, int rows, int cols, int qkv, int qkv_bias, int att);
/* GeLU(h + bias) [rows, cols]: in place when g == h (inference), else u = h + bias and g = GeLU(u). Returns the
 * buffer that holds u for the backward (-1 on oom): h itself (u written in place), or where a bf16 plan trains a
 * bf16 buffer of its own (slot 3; h only read), as docs/BF16.md defines it. */
int tg_pb_gelu(tg_builder *b, int layer, int rows, int cols, int h, int bias, int g);
/* db [cols] = column sums of dy [rows, cols] (local: the caller sums over the ranks). */
bool tg_pb_colsum(tg_builder *b, int layer, const char *op, int rows, int cols, int dy, int db, const char *label);
/* du = dg [rows, cols] * GeLU'(u): in place in fp32 plans (returns dg); bf16 training writes du in bf16 into a buffer
 * of its own (slot 2), which the fc1 GEMMs read as dg's bf16 copy and the bias gradient sums (docs/BF16.md); returns
 * the buffer holding du, -1 on failure. */
int tg_pb_gelu_bwd(tg_builder *b, int layer, int rows, int cols, int dg, int u);
/* g += dx of y = LN(x) given dy; local dgamma, dbeta (the caller sums them over the ranks); sum as for
 * tg_pb_layernorm, on the two per-token sums. */
bool tg_pb_ln_bwd(tg_builder *b, int layer, const char *op, int rows, int cols, int dy, int x, int rs, int vs,
                  int gamma, int g, int dgamma, int dbeta, tg_pb_sum_fn sum);
/* dqkv [rows, 3 cols] from qkv and datt [rows, cols], the probabilities recomputed. */
bool tg_pb_attention_bwd(tg_builder *b, int layer, int rows, int cols, int qkv, int datt, int dqkv);

/* ---- the language model's loss (docs/MODEL.md) ----------------------------------------------------------- */

/* What a scheme's language model keeps between its calls (plan_lm.c, plan_megatron_lm.c). */
typedef struct tg_lm {
    int wte, wpe, lnf_g, lnf_b;         /* shard buffers */
    int gwte_part;                      /* micro-batches: this one's part of the wte gradient (head and embedding) */
    int p_wte, p_wpe, p_lnf_g, p_lnf_b; /* their param indices */
    int y, rs, vs, xf, mx, sums;        /* what the head's backward needs of its forward */
    /* the buffers the embedding and the head read and write (the plan's tokens and logits; generation's decode step
     * has its own), and the positions of the rows (-1: row r is at position r mod seq) */
    int tok, logits, pos;
} tg_lm;

/* Real ids (< V) among the Vq columns of vocab block blk; the vocab-parallel loss over this rank's
 * logits block [rows, Vq] of vocab block blk (local row max, all-reduce(max) over g of gsize ranks, local sums of
 * exponentials and the target logit, their sum by `sum`, the per-token loss); and dL/dlogits of that block into a
 * new [rows, Vq] buffer described by what (returned; -1 on oom). */
int tg_lm_nvalid(const tg_plan *pl, int blk);
/* Generation (docs/GENERATE.md). The prefill's copy of K and V of every token into the layer's KV cache kv, after
 * the attention (which added the bias to qkv); the decode step's attention of one token per sequence over the cache
 * up to its position (pos: [nseq] i32), which first writes that token's K and V there; and the greedy choice: per
 * row of this rank's logits block, (max, id) into pairs + boff [rows, 2], then the max all-reduce of the pairs over
 * g (MPI_MAXLOC: ties to the lowest id), so every member holds the argmax over the whole vocabulary. */
bool tg_pb_kv_write(tg_builder *b, int layer, int rows, int cols, int qkv, int kv);
bool tg_pb_attn_decode(tg_builder *b, int layer, int rows, int cols, int qkv, int qkv_bias, int att, int kv, int pos);
void tg_lm_argmax(tg_builder *b, int logits, int rows, int blk, int pairs, int boff, tg_group g, int gsize);
void tg_lm_loss(tg_builder *b, tg_lm *lm, int rows, int blk, tg_group g, int gsize, tg_pb_sum_fn sum);
int tg_lm_dlogits(tg_builder *b, tg_lm *lm, int rows, int blk, const char *what);

#endif
