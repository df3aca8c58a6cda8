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
 * 0 for a language model, whose gradient comes from its loss steps). */
void tr_backend_objective(tr_ctx *c, float *A);
/* After a backward: the sums of squares of the local gradients (tr_step_sums.canon and .rest). */
void tr_backend_grad_sums(tr_ctx *c, float *A);
/* Wait for the work issued and return what the two above computed (0 for what was not issued since the last read). */
void tr_backend_step_read(tr_ctx *c, tr_step_sums *s);
/* Every local gradient element *= s (clipping), in float. */
void tr_backend_scale_grads(tr_ctx *c, float *A, float s);
/* An upload of a step's input (a --data batch) without a wait: src is copied at once; the copy lands before any
 * work issued after it. */
void tr_backend_upload_batch(tr_ctx *c, float *dst_run, const float *src_host, long long elems);

#endif
