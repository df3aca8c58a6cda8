/*
 * tr_backend.h - what the backend-neutral main (tr_main.c) needs from a
 * backend. The main loads weights and input into a host arena laid out as the
 * plan says; the backend gives the arena the generated code runs on (on the
 * CPU the host arena itself; on a GPU a device copy) and moves blocks between
 * the two. Collectives, GEMMs and kernels are the tr.h calls, implemented once
 * per backend.
 */
#ifndef TR_BACKEND_H
#define TR_BACKEND_H

#include "tr_ctx.h"

const char *tr_backend_name(void); /* "cpu", "cuda" */
/* After tr_ctx_init: anything the backend needs (devices, streams, handles). */
bool tr_backend_init(tr_ctx *c, tr_err *err);
/* The arena generated code runs on, initialised from the host arena H of `elems` floats. */
float *tr_backend_arena(tr_ctx *c, float *H, long long elems, tr_err *err);
/* Copy elems floats between the host arena and the run arena (no-op where they are the same memory). */
void tr_backend_upload(tr_ctx *c, float *dst_run, const float *src_host, long long elems);
void tr_backend_download(tr_ctx *c, float *dst_host, const float *src_run, long long elems);
/* Wait until all work issued on this rank has finished. */
void tr_backend_sync(tr_ctx *c);
void tr_backend_free(tr_ctx *c, float *run_arena, float *H);
/* How many times this rank's host has waited for its device so far (each blocking wait on a stream, and each
 * staging wait of a collective), for --timing's "host synchronisations per step"; -1 where the backend has no
 * device to wait for (the CPU). */
long long tr_backend_host_syncs(tr_ctx *c);

/* ---- a training step (docs/CUDA.md "A training step"): its scalars stay where the step runs until one read ----
 * tr_backend_train_init once before the first step; then per step tr_backend_objective after the forward,
 * tr_backend_grad_sums after the backward, and tr_backend_step_read, the step's one wait for the device. A
 * backend with a device only issues work in the first two; the CPU backend computes at once. */
typedef struct tr_step_sums {
    double loss;  /* this rank's part of the loss sum: sum (y - target)^2 of its output block, or of its LM loss
                   * rows when it counts them (tr_lm_counts_loss); 0 when no objective was issued */
    double canon; /* the squares of the gradient elements this rank counts in the global norm (tr_clip.h) */
    double rest;  /* not finite when a local gradient element outside `canon` is not finite (else finite) */
} tr_step_sums;
/* target: the MSE target block [io_rows, io_cols] (host memory, unchanged until tr_backend_free), NULL for a
 * language model; batch_elems: the most floats tr_backend_upload_batch moves between two reads. */
bool tr_backend_train_init(tr_ctx *c, float *A, const float *target, long long batch_elems, tr_err *err);
/* After a forward: the objective's local sum, and dL/dy into A + gx_offset (2 (y - target) / N for the MSE,
 * 0 for a language model, whose gradient comes from its loss steps). With micro-batches (docs/TRAINING.md
 * "Micro-batches") only over the rows of micro-batch tr_mb(c) (tr_objective_rows), each its 1/m of the work: the
 * first one's sum is the step's, the later ones add theirs to it, so the read after the last is the whole batch's. */
void tr_backend_objective(tr_ctx *c, float *A);
/* The rows of the rank's output block [io_rows, io_cols] the objective of micro-batch tr_mb(c) covers: nr rows from
 * r0 (the whole block without micro-batches). The block holds the micro-batches one after the other. */
static inline void tr_objective_rows(const tr_ctx *c, long long *r0, long long *nr)
{
    int m = tr_model.microbatches > 1 ? tr_model.microbatches : 1;
    *nr = c->desc->io_rows / m;
    *r0 = (long long)c->mb * *nr;
}
/* After a backward: the sums of squares of the local gradients (tr_step_sums.canon and .rest). */
void tr_backend_grad_sums(tr_ctx *c, float *A);
/* Wait for the work issued and return what the two above computed (0 for what was not issued since the last read). */
void tr_backend_step_read(tr_ctx *c, tr_step_sums *s);
/* Every local gradient element *= s (clipping), in float; nothing where s is 1 (the same bits). A backend with a
 * device takes s from tr_backend_step_scalars instead (the same value), so that a captured step reads it there. */
void tr_backend_scale_grads(tr_ctx *c, float *A, float s);
/* The scalars of a step that change from step to step, for the work issued after this call (after the step's read):
 * the learning rate c->lr, AdamW's bias corrections of step c->opt_step, and the clipping scale s (1: no clipping).
 * A backend with a device copies them to the device once (captured work reads them there, not baked in). */
void tr_backend_step_scalars(tr_ctx *c, float s);

/* ---- a training step as CUDA graphs (docs/CUDA.md "CUDA graphs") --------------------------------------------------
 * A step is issued in two parts: TR_PART_GRADS (forward, objective, backward, gradient sums: before the step's read)
 * and TR_PART_UPDATE (clipping and the optimizer: after it); an inference forward is TR_PART_FORWARD, a generation's
 * decode step (docs/GENERATE.md) TR_PART_DECODE. A backend that can capture a part issues it once into a graph and
 * replays the graph on later steps; the others issue every step. */
enum { TR_PART_GRADS = 0, TR_PART_UPDATE = 1, TR_PART_FORWARD = 2, TR_PART_DECODE = 3, TR_NPARTS = 4 };
/* TR_PART_FORWARD: the inference forward of --repeat (and the measured forward after it), under the same rules;
 * TR_PART_DECODE: tr_gen_class.decode, whose tokens and positions the runtime uploads before each step (outside the
 * part). Before the first part of a run: whether parts are captured (TESS_CUDA_GRAPH, the collectives); false with err
 * on a bad TESS_CUDA_GRAPH. tr_backend_train_init calls it; a second call does nothing. */
bool tr_backend_graph_init(tr_ctx *c, tr_err *err);
/* Before issuing a part: true when the backend replayed the part's graph (issue nothing); false: issue the part,
 * then call tr_backend_part_end. capture: false where this step's part must be issued as it is (a step recorded
 * whole for --trace, a test hook that writes into the step). */
bool tr_backend_part_begin(tr_ctx *c, int part, bool capture);
/* After issuing a part: false when its capture failed (nothing of it ran; the backend stops capturing and
 * tr_backend_graph_note says why): issue the part again. */
bool tr_backend_part_end(tr_ctx *c, int part);
/* Why steps are not captured (one line), or NULL where they are or the backend has no graphs (the CPU). */
const char *tr_backend_graph_note(tr_ctx *c);
/* --timing: kernels, GEMMs and collectives launched so far, one by one from the host (issued) and from graph replays
 * (replayed), and the graph replays; false where the backend does not count them (the CPU). */
typedef struct tr_launch_counts {
    long long issued, replayed, replays;
} tr_launch_counts;
bool tr_backend_launch_counts(tr_ctx *c, tr_launch_counts *n);
/* An upload of a step's input (a --data batch) without a wait: src is copied at once; the copy lands before any
 * work issued after it. */
void tr_backend_upload_batch(tr_ctx *c, float *dst_run, const float *src_host, long long elems);

/* ---- pipeline stages (docs/TRAINING.md "Pipeline stages"): what tr_comm.c's tr_pipe_* need of the run arena ----
 * True where the run arena is host memory that MPI sends from and receives into directly (the CPU). Elsewhere
 * tr_comm.c stages each point-to-point block through host memory: tr_backend_download of the block (after the work
 * issued before it), MPI, tr_backend_upload of what came in (before the work issued after it). */
bool tr_backend_run_on_host(void);
/* n floats of run memory beside the arena (the stash of a stage's in-flight micro-batches), or NULL when there is not
 * enough; tr_backend_run_release gives it back (before tr_backend_free). */
float *tr_backend_run_alloc(tr_ctx *c, long long n);
void tr_backend_run_release(tr_ctx *c, float *p);
/* dst = src, n floats of run memory: after the work issued before it, before the work issued after it. */
void tr_backend_run_copy(tr_ctx *c, float *dst, const float *src, long long n);

#endif
