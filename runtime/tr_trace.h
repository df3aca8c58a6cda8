/*
 * tr_trace.h - what a run did, step by step: the --trace and --stats options.
 *
 * Generated code calls TR_STEP(c, id) before every step (tr.h); while a run
 * is being recorded, each mark closes the previous step and opens the next,
 * storing its begin and end time and the bytes the collectives moved in
 * between. The main calls tr_step_mark(c, -1) after the run to close the last
 * step. Each step is also stamped with the phase the main was running
 * (forward, backward, optimizer: tr_ctx.phase). From that record:
 *   tr_trace_write   a Chrome trace-event JSON (chrome://tracing, Perfetto):
 *                    one process per rank (pid = rank), one complete ("X")
 *                    slice per step with layer, op, kind, bytes in args;
 *                    gathered to rank 0 and written atomically;
 *   tr_stats_report  per rank: measured bytes per collective kind against the
 *                    plan (every step checked against its own planned count),
 *                    measured time per step kind, arena bytes allocated against
 *                    the plan and the process peak RSS. Any byte difference is
 *                    printed loudly and makes it return false (exit status 3).
 * All three calls below are collective (every rank calls them).
 */
#ifndef TR_TRACE_H
#define TR_TRACE_H

#include <stdbool.h>

#include "tr_ctx.h"

/* Record the next run (on = 0: record nothing). A barrier sets a common time
 * origin. If memory for the record is missing the run is not recorded and
 * the reports say so. */
void tr_trace_begin(tr_ctx *c, bool on);
/* Stop recording: close the running step and keep the record (later marks record nothing). A training run
 * records one whole step (forward, backward, optimizer) this way: begin before it, end after it. */
void tr_trace_end(tr_ctx *c);
/* Rank 0 writes the recorded run to path. Same result on every rank. */
bool tr_trace_write(tr_ctx *c, const char *path, tr_err *err);
/* Prints the per-rank statistics on rank 0 (only differences when quiet).
 * Returns false on every rank when any measured byte count differs from the plan. */
bool tr_stats_report(tr_ctx *c, int quiet);
void tr_trace_free(tr_ctx *c);

#endif
