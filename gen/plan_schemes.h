/*
 * plan_schemes.h - the scheme planners, the planner's upper layer: each
 * declares the weight shards of one rank class and appends its steps with the
 * shared step sequences (plan_steps.h) and the builder (plan_builder.h).
 * plan.c, the top, picks one per spec (tg_plan_tesseract or
 * tg_plan_megatron) and runs the passes common to all (lifetimes, placement,
 * totals, streams, epilogues). A scheme's language model (the embedding, ln_f
 * and the tied head around the blocks) is its own file, called only by that
 * scheme's planner. docs/ARCHITECTURE.md, "The planner's layers".
 */
#ifndef TG_PLAN_SCHEMES_H
#define TG_PLAN_SCHEMES_H

#include "plan_steps.h"

/* plan_tesseract.c: the shards of the Tesseract class (i, j) and, unless shards_only, its steps. */
void tg_plan_tesseract(tg_builder *b, bool shards_only);

/* plan_megatron.c: the shards of the megatron class (r, 0) and, unless shards_only, its steps. */
void tg_plan_megatron(tg_builder *b, bool shards_only);

/* ---- plan_lm.c: the language model around the blocks on the Tesseract layout (docs/MODEL.md) --------------- */

/* wte and wpe (before the blocks' params), ln_f (after them); the token, target, logits and loss buffers. */
void tg_lm_declare_embedding(tg_builder *b, tg_lm *lm);
void tg_lm_declare_final(tg_builder *b, tg_lm *lm);
/* Pipeline stages (docs/TRAINING.md "Pipeline stages"): the last stage's copy of wte for the tied head (where the
 * stage has no embedding), and the first stage's token ids (where it has no head, whose declare_final adds them). */
void tg_lm_declare_tied(tg_builder *b, tg_lm *lm);
void tg_lm_declare_tokens(tg_builder *b, tg_lm *lm);
/* The last stage without the embedding: the head's part of the wte gradient accumulated and all-reduced over dep,
 * as tg_lm_embed_bwd does with both parts (the runtime sums the stages' copies after the backward) */
void tg_lm_tied_grad(tg_builder *b, tg_lm *lm);
/* x [R, Cq] = wte rows of the tokens + wpe rows of their positions */
void tg_lm_embed(tg_builder *b, tg_lm *lm, int x);
/* ln_f of the last block's output y, the tied head's logits and the vocab-parallel loss */
void tg_lm_head(tg_builder *b, tg_lm *lm, int y);
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

#endif
