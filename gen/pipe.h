/*
 * pipe.h - pipeline stages (mesh.pp = S > 1): the schedule of every stage as an explicit ordered list of
 * operations, and its proof before launch (docs/TRAINING.md "Pipeline stages").
 *
 * Stage s runs, per micro-batch u, a forward F(u) and a backward B(u) of its layers. Around them it receives the
 * activation block of u from stage s-1 (s > 0) before F(u) and sends its own to stage s+1 (s < S-1) after; it
 * receives the gradient block of u from stage s+1 (s < S-1) before B(u) and sends its own to stage s-1 (s > 0)
 * after. tg_pipe_build writes those lists for the schedules of pipeline.schedule:
 *   "gpipe": F(0) .. F(m-1), then B(0) .. B(m-1);
 *   "1f1b":  w = min(S-s-1, m) warm-up forwards, then F(w+i), B(i) for i = 0 .. m-w-1, then the remaining
 *            backwards (cool-down). In the steady phase the send of F's activation and the receive of B's
 *            gradient are one exchange (joint), as are the send of B's gradient and the receive of the next
 *            F's activation: with two separate blocking calls, stage s sending F(w+i)'s block while stage
 *            s+1 sends B(i)'s gradient would deadlock (the simulator refuses that order).
 * tg_pipe_simulate runs all stages' lists as a small discrete-event simulation with blocking (rendezvous)
 * send and receive: a send completes only with the peer's matching receive (same kind, micro-batch and pair
 * of stages). It refuses a list that could deadlock, naming every blocked stage with its step and micro-batch
 * and what its peer waits on, or that runs a micro-batch's forward or backward other than once (backward after
 * forward). It also counts time: F of a stage takes as many slots as the stage has layers, B twice that (the
 * backward's two GEMMs per forward GEMM), communication none; the bubble is the idle slots of all stages over
 * S times the makespan, (S-1)/(m+S-1) for equal stages with either schedule. The stash is the largest number of
 * micro-batches a stage holds between their F and B (gpipe m, 1f1b min(S-s, m)).
 * Nothing here reads a spec beyond S, m, the schedule and the layers per stage; the ops are plain data, so a
 * test can hand the simulator any order.
 */
#ifndef TG_PIPE_H
#define TG_PIPE_H

#include <stdbool.h>

#include "err.h"
#include "spec.h"
#include "strbuf.h"

typedef enum tg_pipe_opkind {
    TG_PIPE_FWD = 0,       /* the forward of micro-batch mb on this stage's layers */
    TG_PIPE_BWD = 1,       /* its backward */
    TG_PIPE_SEND_ACT = 2,  /* the activation block of mb to stage peer (s+1) */
    TG_PIPE_RECV_ACT = 3,  /* the activation block of mb from stage peer (s-1) */
    TG_PIPE_SEND_GRAD = 4, /* the gradient block of mb to stage peer (s-1) */
    TG_PIPE_RECV_GRAD = 5, /* the gradient block of mb from stage peer (s+1) */
} tg_pipe_opkind;

typedef struct tg_pipe_op {
    int kind; /* tg_pipe_opkind */
    int mb;   /* micro-batch, 0 .. m-1 */
    int peer; /* the other stage of a send or receive; -1 for F and B */
    int joint; /* a send or receive posted together with the next step, also one (an MPI_Sendrecv): the stage
                * waits for both, in either order */
    long long at; /* tg_pipe_simulate's result: the slot F or B starts in, the slot a send or receive completes in
                   * (with the rest of its posted group); the views draw the timeline from it */
} tg_pipe_op;

#define TG_PIPE_MAX_OPS (1LL << 24) /* all stages' operations together: S * 6m at most */

typedef struct tg_pipe {
    int S, m;
    tg_pipe_sched sched;
    int *layers;      /* [S] layers per stage (the duration of F in slots) */
    int *nops;        /* [S] */
    tg_pipe_op **ops; /* [S][nops[s]] */
    /* tg_pipe_simulate's results */
    long long makespan;  /* slots until the last stage's last step */
    long long *busy;     /* [S] slots each stage computes */
    int *stash;          /* [S] the most micro-batches held between their F and B */
    long long idle, total; /* sum over stages of makespan - busy; S * makespan */
} tg_pipe;

/* The per-stage lists of schedule sched for S stages of layers[s] layers and m micro-batches. */
bool tg_pipe_build(tg_pipe *p, int S, int m, tg_pipe_sched sched, const int *layers, tg_err *err);
/* Empty lists of n[s] ops for a test to fill (ops[s][k] then set by hand). */
bool tg_pipe_alloc(tg_pipe *p, int S, int m, const int *layers, const int *n, tg_err *err);
void tg_pipe_free(tg_pipe *p);

/* Run all lists with blocking send/receive; false (err: one line per problem, "pipeline schedule ...") when
 * they could deadlock or do not run every micro-batch's F and B once. Fills makespan, busy, stash, idle, total. */
bool tg_pipe_simulate(tg_pipe *p, tg_err *err);

/* Seconds per operation for tg_pipe_time (the cost model's, gen/pipe_cost.c). */
typedef struct tg_pipe_durs {
    const double *fwd;      /* [S] the forward of one micro-batch on stage s */
    const double *bwd;      /* [S] its backward */
    const double *bwd_last; /* [S] the backward of micro-batch m-1 (the gradients' all-reduces run in it); NULL: bwd */
    const double *p2p;      /* [S-1] one block (activation or gradient) between stage s and s+1; NULL: none */
} tg_pipe_durs;

/* tg_pipe_simulate's run with d's durations in seconds: a send and its receive both end at the later of the two
 * stages' clocks plus the block's p2p time (a joint group when all its exchanges have). end[s]: stage s's clock
 * after its last step, busy[s]: its forwards and backwards (both [S], the caller's). The ops' slots are left as
 * they are. False as tg_pipe_simulate (the same proof). */
bool tg_pipe_time(tg_pipe *p, const tg_pipe_durs *d, double *end, double *busy, tg_err *err);

/* "F3" "B0" "sA2>1" "rG0<2": one op in the notation of --summary (send/receive Activation/Gradient, mb, peer);
 * a joint op ends in "+" (it and the next are one exchange). */
void tg_pipe_op_str(const tg_pipe_op *op, char *out, size_t cap);

/* The --summary section of a spec with pp > 1: layout, rank numbering, each stage's list, stash and busy
 * slots, and the bubble. Builds and simulates the schedule (false with its error when that fails). */
bool tg_pipe_summary(const tg_spec *s, tg_sb *out, tg_err *err);

/* Whether the tool `what` covers s: everything for pp = 1; with pp > 1 generating (the block stack's and the language
 * model's stage programs, both backends) and nothing else that asks (--summary with a selection: false with a message
 * naming mesh.pp and the fix; --summary --full, --show, --blocks, --cost (gen/pipe_cost.c) and --advise (gen/advise.c)
 * do not ask, gen/main.c). */
bool tg_pipe_can_emit(const tg_spec *s, const char *what, tg_err *err);

#endif
