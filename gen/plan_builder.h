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
/* C[m,n] = op(A) op(B) (beta 0), flops counted. */
tg_step *tg_pb_gemm(tg_builder *b, int layer, const char *op, int t, int ta, int tb, int m, int n, int k, int A,
                    int lda, int B, int ldb, int C, int ldc);
/* All-reduce with bitwise the same sum on every member of g; nothing for a group of one. */
void tg_pb_allreduce_exact(tg_builder *b, int layer, const char *op, tg_group g, int buf, long long count,
                           const char *what);
/* One AdamW step per parameter shard. */
void tg_pb_optimizer(tg_builder *b);

/* plan_megatron.c: the shards of the megatron class (0, j) and, unless shards_only, its steps. */
void tg_plan_megatron(tg_builder *b, bool shards_only);

#endif
