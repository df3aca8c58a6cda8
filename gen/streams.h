/*
 * streams.h - the bake stage's last pass: where each step of a class program
 * runs on a backend with two streams (the CUDA backend) and what it waits for.
 *
 * Collectives (bcast, allreduce, reduce) go on the comm stream, GEMMs, fused
 * kernels and AdamW on the compute stream; both streams issue their steps in
 * schedule order. A step waits for the latest earlier step of the other
 * stream, in the same phase, whose buffers share arena bytes with its own
 * where either of the two writes (read-after-write, write-after-read,
 * write-after-write); older conflicting steps are covered by that step's own
 * stream order, and a step waits only when no earlier step of its stream
 * already waited for the same or a later step (a step that runs on the last micro-batch only, tg_step.last_mb,
 * does not count: on the other micro-batches its wait is not made). Each phase opens and closes by
 * joining the two streams, so waits never reach into an earlier phase.
 * Buffers a backend's call does not name (attention's scores scratch: the
 * CUDA kernel keeps scores on chip) are not part of the rule.
 *
 * The result is in the steps (tg_step: stream, wait, wait_slot,
 * wait_other_slot, signal, overlaps) and the class totals (tg_class_plan:
 * comm_steps, waits, late_bcasts, overlapped_bcasts), so that the CUDA code,
 * schedule.json, schedule.html and --show all print the same decision. The
 * CPU backend runs steps one after another and ignores them.
 */
#ifndef TG_STREAMS_H
#define TG_STREAMS_H

#include <stdbool.h>

#include "err.h"
#include "plan.h"

/* The stream of a step kind: TG_STREAM_COMM, TG_STREAM_COMPUTE, or TG_STREAM_NONE for a kind no two-stream
 * backend can run (none today; tg_cuda_supports refuses a class with one). */
int tg_streams_of(tg_step_kind kind);

/* "compute", "comm" (or "none") */
const char *tg_stream_name(int stream);

/* Does the backend's call of step s name the buffer in slot (s->buf[slot] >= 0)? Every slot today (attention's
 * scratch included: its GEMMs and softmax work there). The same rule decides which buffers the CUDA program
 * declares. */
bool tg_streams_slot_used(const tg_step *s, int slot);

/* Fill the stream fields of every step of cp and its stream totals, from the steps' kinds, phases, buffers
 * and access modes and the buffers' offsets and sizes (so after placement). O((S*K + B) log B) for S steps of
 * at most K buffer slots and B buffers. Fails on a buffer of no elements (an internal planner error) or when
 * out of memory. */
bool tg_streams_plan(tg_class_plan *cp, tg_err *err);

#endif
