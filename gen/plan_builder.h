/*
 * plan_builder.h - the planner's bottom layer (plan_builder.c): the primitives
 * every scheme builds a class program with. Not part of the plan's interface
 * (plan.h).
 *
 * A builder appends to one class plan: buffers (tg_pb_buf), weight shards
 * and their pieces (tg_pb_param, tg_pb_piece), and steps (tg_pb_step), each
 * naming the buffers it reads and writes (tg_pb_use); on top of those, the
 * GEMM step, the collectives, bf16 operands and the optimizer. Allocation
 * failure sets `oom` and the caller reports it once. Lifetimes, placement,
 * totals and streams are computed afterwards by plan.c for every scheme alike.
 * The layers above: plan_steps.h (the step sequences the schemes share) and
 * plan_schemes.h (the scheme planners); docs/ARCHITECTURE.md, "The planner's
 * layers".
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
    /* appended to the name of every buffer declared while set: "_rc" while the backward recomputes a layer's
     * forward (spec recompute), so that its buffers are not the forward's */
    const char *name_sfx;
    /* generation (mode = "generate"): 1 while the prefill is planned (each attention also writes the KV cache), 2
     * while the decode step is (attention over the cache); 0 otherwise. kv: the KV cache of each layer; pos: the
     * decode step's positions buffer */
    int gen;
    const int *kv;
    int pos;
} tg_builder;

/* A buffer [rows, cols]; its name is printf-like with %d and %s only. Returns its id (-1 on oom). */
int tg_pb_buf(tg_builder *b, int rows, int cols, int persistent, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Append a step of the builder's phase; NULL on oom. */
tg_step *tg_pb_step(tg_builder *b, tg_step_kind kind, int layer, const char *op, int t);
void tg_pb_use(tg_step *s, int slot, int buf, unsigned char acc);
/* The step about to be planned writes out from buf, which the latest GEMM planned so far names (its C, or its B: the
 * dY a bias gradient sums): gen/fuse.c may run that step as the GEMM's epilogue, and the one call then writes out
 * while it still reads A and B. out is pinned to that GEMM (tg_step.pin), so it lives from the GEMM on and the
 * arena never gives it A's or B's bytes. Nothing when the latest GEMM does not name buf, out is persistent or the
 * GEMM's pins are taken (fuse.c then refuses the pair if the bytes overlap). */
void tg_pb_pin_to_gemm(tg_builder *b, int buf, int out);
/* A weight shard [rows, cols] of the tensor `name` (full [full0, full1]) with, when training, its gradient and
 * AdamW moments; its replica group is set to the Tesseract one (the caller may change it). Returns the param
 * index (-1 on oom). */
int tg_pb_param(tg_builder *b, const char *name, int ndim, int full0, int full1, int rows, int cols);
void tg_pb_piece(tg_builder *b, int param, int r0, int nr, int c0, int nc, int dst_col);
/* bf16 plans (docs/BF16.md). tg_pb_bf16_out: buf is written by a kernel for GEMMs to read, so it is bf16 (nothing
 * in an fp32 plan); returns buf. tg_pb_operand: the GEMM operand for buf: buf itself when the plan is fp32 or buf
 * is bf16; the fp32 master of a training weight (or of a generation's weight): its persistent bf16 copy
 * (tg_param.w16, declared on first use; the AdamW step or the runtime after loading writes it, no CAST step); else a
 * new bf16 buffer that a CAST step (appended now) fills from buf. */
int tg_pb_bf16_out(tg_builder *b, int buf);
int tg_pb_operand(tg_builder *b, int layer, const char *op, int buf);
/* tg_pb_operand_is: the step just planned also wrote copy, the bf16 copy of buf (RNE), so the next GEMMs of op at
 * layer read copy and no CAST step is planned (attention = "cudnn": cuDNN's dQ, dK, dV are that copy). */
void tg_pb_operand_is(tg_builder *b, int layer, const char *op, int buf, int copy);
/* A buffer like buf (its shape and element type): SUMMA receive buffers take the type of what is sent. */
int tg_pb_buf_like(tg_builder *b, int like, const char *what, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* C[m,n] = op(A) op(B) (beta 0), flops counted. */
tg_step *tg_pb_gemm(tg_builder *b, int layer, const char *op, int t, int ta, int tb, int m, int n, int k, int A,
                    int lda, int B, int ldb, int C, int ldc);
/* All-reduce with bitwise the same sum on every member of g; nothing for a group of one. */
void tg_pb_allreduce_exact(tg_builder *b, int layer, const char *op, tg_group g, int buf, long long count,
                           const char *what);
/* Collectives with a root: a SUMMA-style broadcast of buf over g from local root t (desc TG_D_BCAST, why ends it;
 * the receive buffer is pinned to the previous SUMMA step's GEMM of the same op), a reduce(sum) onto local root t of
 * g; and the all-reduce of a per-token statistic over the row group (nothing for a row of one). NULL on oom. */
tg_step *tg_pb_bcast(tg_builder *b, int layer, const char *op, int t, tg_group g, int buf, long long count,
                     const char *why);
tg_step *tg_pb_reduce(tg_builder *b, int layer, const char *op, int t, tg_group g, int buf, long long count);
void tg_pb_allreduce_row(tg_builder *b, int layer, const char *op, int buf, long long count, const char *what);
/* Generation's weight-stationary layout (docs/GENERATE.md): an ALLGATHER or REDUCESCATTER (kind) of the activations
 * in buf [count] over g, count divisible by the group's size (tg_step.ws); and a COPY of count elements from src +
 * soff into dst + doff. what: the step's description (a static phrase). NULL on oom. */
tg_step *tg_pb_ws_collective(tg_builder *b, int layer, const char *op, tg_step_kind kind, tg_group g, int buf,
                             long long count, const char *what);
tg_step *tg_pb_copy(tg_builder *b, int layer, const char *op, int src, long long soff, int dst, long long doff,
                    long long count, const char *what);
/* One AdamW step per parameter shard (which also writes the shard's persistent bf16 copy, if any); with
 * optimizer.shard, a sharded parameter's step covers this rank's slice and the all-gathers of the updated slices
 * follow every AdamW step. */
void tg_pb_optimizer(tg_builder *b);
/* optimizer.shard (docs/TRAINING.md "Optimizer state sharded over depth"): does the plan shard the AdamW state of a
 * parameter whose replicas are over group g? (g = dep, d > 1, a training plan with the key set.) */
bool tg_pb_sharded(const tg_builder *b, int g);
/* The parameter's replicas are over g after all (the LM's wpe): its moments take the whole shard again. */
void tg_pb_param_replica(tg_builder *b, int param, int g);

/* ---- micro-batches (tg_plan.mb > 1; docs/TRAINING.md "Micro-batches") ---------------------------------------- */

/* The buffer a weight-gradient step of one micro-batch writes: grad itself without micro-batches, else a
 * transient buffer of grad's shape that tg_pb_grad_acc then adds into grad. */
int tg_pb_grad_target(tg_builder *b, int grad);
/* grad = part (first micro-batch), grad += part (the later ones); nothing when part is grad itself. */
void tg_pb_grad_acc(tg_builder *b, int layer, const char *op, int grad, int part);
/* The exact all-reduce of a weight gradient over g (a reduce-scatter when tg_pb_sharded(g)), appended now, right
 * after the gradient's accumulation; with micro-batches its steps are marked last_mb: they run once per step, on the
 * last micro-batch, on the sum of every micro-batch, while the backward of the layers before goes on. */
void tg_pb_grad_allreduce(tg_builder *b, int layer, const char *op, tg_group g, int buf, long long count,
                          const char *what);
/* A persistent I/O block [rows, cols] holding every micro-batch of the step; with micro-batches the steps see
 * the part of the current one, stride elements further per micro-batch (tg_buf.mb_stride). */
int tg_pb_io_buf(tg_builder *b, int rows, int cols, long long stride, const char *what, const char *name);

#endif
