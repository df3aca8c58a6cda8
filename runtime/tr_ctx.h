/*
 * tr_ctx.h - the runtime's per-rank context (private to runtime/): the four
 * group communicators, what the collectives actually moved, and time spent per
 * step kind. Generated code only passes the pointer through.
 */
#ifndef TR_CTX_H
#define TR_CTX_H

#include <mpi.h>
#include <stdbool.h>

#include "tr_err.h"

#include "tr.h"

enum { TR_PHASE_FORWARD = 0, TR_PHASE_BACKWARD = 1, TR_PHASE_OPTIMIZER = 2, TR_NPHASES = 3 };

typedef struct tr_ctx {
    const tr_rank_desc *desc;
    int cur_step; /* the step running now (TR_STEP), -1 before the first */
    int opt_step; /* AdamW step number, from 1 (training) */
    int mb;       /* the micro-batch running now (tr_mb), 0 without micro-batches */
    double lr;    /* AdamW learning rate of this step (tr_sched_lr; tr_model.lr until the loop sets it) */
    MPI_Comm comm[TR_NGROUPS];
    /* measured, in bytes (4 per float32 element, 2 per bf16), since the last tr_ctx_reset_counts */
    long long bcast_recv[TR_NGROUPS];
    long long bcast_sent[TR_NGROUPS];
    long long allreduce[TR_NGROUPS];
    long long reduce_recv[TR_NGROUPS]; /* as reduce root: count from each other member */
    long long reduce_sent[TR_NGROUPS];
    long long rscatter[TR_NGROUPS];  /* optimizer.shard: reduce-scatters, 4 * count each */
    long long allgather[TR_NGROUPS]; /* optimizer.shard: all-gathers, 4 * count each */
    long long ag_recv[TR_NGROUPS], rs_recv[TR_NGROUPS]; /* bytes received by all-gathers (the others' slices) and
                                                         * reduce-scatters (the others' parts of its slice): the
                                                         * weight-stationary layout's (docs/GENERATE.md) */
    long long rscatter_run, allgather_run; /* the same over the whole run, every group (tr_ctx_reset_counts keeps
                                            * them): what --bytes checks against the steps run times the plan */
    long long calls[TR_NKINDS];
    /* seconds per step kind, when timing is on */
    int timing;
    double seconds[TR_NKINDS];
    /* --trace / --stats (tr_trace.c): the record of one run, NULL when not recording */
    struct tr_steprec *rec;
    int phase; /* what the main runs now, for the record: TR_PHASE_FORWARD, _BACKWARD or _OPTIMIZER */
    long long arena_bytes; /* bytes the main allocated for the arena (the plan: desc->arena_elems * 4) */
    /* the CPU kernels' fp32 scratch (tr_kernels_bf16.c: tr_scratch): the bf16 kernels' widened operands and rows,
     * attention's per-thread scores; grown on demand (outside parallel regions), freed by tr_ctx_free */
    float *scratch;
    size_t scratch_cap; /* floats */
    /* pipeline stages (tr_comm.c tr_pipe_*): the stash, tr_pipe_class.stash slots of the kept buffers in run memory
     * (tr_backend_run_alloc), allocated at the first forward; where the run arena is not host memory, the host
     * buffer a point-to-point block is staged through (pipe_host_cap floats, grown on demand); both freed by
     * tr_pipe_free; bytes sent and received point-to-point over the whole run */
    float *pipe_stash, *pipe_host;
    long long pipe_stash_elems, pipe_host_cap; /* the stash's floats (0 until a step's first forward) */
    int pipe_given_dy; /* the stage schedule runs one backward from the dL/dy already in grad_x (--dy): no objective */
    long long p2p_sent, p2p_recv;
} tr_ctx;

/* Split MPI_COMM_WORLD into the desc's groups and check each split against the
 * generator's literals (size and local index). Returns false with a message if
 * MPI disagrees with the plan. */
bool tr_ctx_init(tr_ctx *c, const tr_rank_desc *desc, tr_err *err);
/* Frees the communicators and the scratch (a zeroed ctx, as the unit tests use, is fine). */
void tr_ctx_free(tr_ctx *c);
/* c->scratch with room for n floats (grown when needed, never shrunk); aborts if out of memory. */
float *tr_scratch(tr_ctx *c, size_t n);
void tr_ctx_reset_counts(tr_ctx *c);
const char *tr_kind_name(tr_kind k);

double tr_now(void);

#endif
