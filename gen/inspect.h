/*
 * inspect.h - reading a baked plan back to a person: what each rank runs,
 * moves and holds, before anything is built.
 *
 * Three views, all printed from the plan and nothing else (the planner
 * decides, these only select, sum and format); the summary is in summary.h:
 *   show     the steps of chosen ranks, filtered by layer and kind: layer,
 *            phase, op, SUMMA step, group and its member ranks, root as a
 *            global rank, elements and bytes, flops, buffers with offsets,
 *            and the CUDA program's stream and cross-stream wait (streams.h);
 *   blocks   the mesh, and for any tensor which rank holds which block;
 *   summary  per rank the peak arena and the buffers live at the busiest step,
 *            bytes received/sent/reduced per phase and layer split by group
 *            kind, flops; mesh totals; and the same figures for every other
 *            [q,q,d] with the same rank count, each validated by the real spec
 *            loader and planned class by class on a copy of the spec.
 *
 * Communication is counted logically, as everywhere in tessgen (see
 * docs/ARCHITECTURE.md): a broadcast is `count` received on every member but
 * the root and `count` sent by the root; a reduce is `count` sent by every
 * member but the root and `count` per other member received by the root; an
 * all-reduce is `count` reduced on every member, each element of the
 * payload's size (2 bytes for a bf16 broadcast, else 4). tg_step_traffic is the
 * one place this rule lives for the text, the JSON and the HTML, in bytes.
 */
#ifndef TG_INSPECT_H
#define TG_INSPECT_H

#include <stdbool.h>

#include "err.h"
#include "pipe.h"
#include "plan.h"
#include "strbuf.h"

/* Which steps (and for blocks/summary, which ranks and layers) to print. */
typedef struct tg_filter {
    int p, layers;         /* p: every rank of the program (tg_plan_world: every stage's with pipeline stages) */
    unsigned char *rank;   /* [p]: 1 when shown */
    unsigned char *layer;  /* [layers]: 1 when shown; steps outside 0..layers-1 follow `other_layers` */
    int other_layers;      /* steps whose layer is outside 0..layers-1 (e.g. optimizer steps) are shown */
    unsigned long long kind; /* bit k: steps of tg_step_kind k are shown */
    int comm, compute;     /* "comm": every collective; "compute": every other step */
    int all_ranks, all_layers, all_kinds;
    char desc[256];        /* "ranks 0,5-7; layers 3; kinds bcast,gemm" for the header line */
    char ranks_desc[64];   /* "0,5-7" */
} tg_filter;

/* Parse the option values against the plan (NULL = everything):
 *   ranks   "0,5-7", "all"             ranks 0..p-1
 *   layers  "3", "0-2,5", "all"        layers 0..layers-1
 *   kinds   "bcast,gemm", "comm", "compute", any tg_step_kind_name
 * On a bad value err says which item and what is allowed. */
bool tg_filter_init(tg_filter *f, const tg_plan *pl, const char *ranks, const char *layers, const char *kinds,
                    tg_err *err);
void tg_filter_free(tg_filter *f);
bool tg_filter_step(const tg_filter *f, const tg_step *s);

/* Steps that move data between ranks (a group of more than one member). */
bool tg_step_is_comm(const tg_step *s);
/* Logical elements this rank receives, sends and reduces in step s (see above). */
void tg_step_traffic(const tg_step *s, long long *recv, long long *sent, long long *reduced);
/* "recv", "send", "reduce" for a collective, "" otherwise. */
const char *tg_step_dir(const tg_step *s);
const char *tg_phase_label(int phase); /* "fwd", "bwd", "opt" */

/* Phases are numbered from 0; views keep figures for up to TG_NPHASE of them. */
#define TG_NPHASE 8
int tg_phase_of(const tg_step *s); /* the step's phase, clamped to 0..TG_NPHASE-1 */

/* The small printers the views share: a compact rank list ("0-3,8,10-11"), the "# tessgen ..." header
 * line, a step's label ("fwd L0 qkv t=1 gemm"). */
void tg_print_ranks(tg_sb *o, const int *r, int n);
void tg_inspect_header(tg_sb *o, const tg_plan *pl, const char *what);
void tg_step_label(tg_sb *o, const tg_step *s);

/* Pipeline stages (mesh.pp > 1; docs/TRAINING.md "Pipeline stages"): one stage's proved list of steps (gen/pipe.c)
 * as each rank of a class of that stage runs it, the stash copies included, every operand resolved against the
 * class plan, for --show and the class files of schedule.json (the rank programs' pipe_step() prints the same
 * list, emit_rank_c.c). A send or receive moves micro-batch mb's rows of x, y or grad_x to or from the same
 * (i, j, k) of the neighbour stage: world rank + peer_offset (+p or -p, p = q*q*d). */
typedef enum tg_pstep_kind {
    TG_PSTEP_RECV_ACT, TG_PSTEP_SEND_ACT, TG_PSTEP_RECV_GRAD, TG_PSTEP_SEND_GRAD, /* point-to-point */
    TG_PSTEP_FORWARD, TG_PSTEP_BACKWARD, /* the class program's forward (then, on the last stage, the loss and
                                          * dL/dy) or backward of micro-batch mb */
    TG_PSTEP_STASH_SAVE, TG_PSTEP_STASH_LOAD /* the kept buffers to stash slot `slot` after the forward of mb, and
                                              * back before its backward */
} tg_pstep_kind;
typedef struct tg_pstep {
    int kind, mb;
    int slot;             /* stash slot mb mod stash: forward, backward and the copies; -1 for a send or receive */
    int peer_stage;       /* send or receive: the other stage; else -1 */
    int peer_offset;      /* its world rank minus this rank's (+p or -p); 0 for the others */
    int joint;            /* posted with the next step as one exchange (tr_pipe_sendrecv, MPI_Sendrecv) */
    int buf;              /* send or receive: the class buffer (x, y or grad_x); else -1 */
    long long offset, bytes; /* bytes: where micro-batch mb's rows of buf lie in the arena and their size; a stash
                              * copy: 0 and the bytes of one slot */
    long long at;         /* the slot of the proved schedule it starts (F, B) or completes (send, receive) in */
} tg_pstep;
typedef struct tg_pipe_view {
    tg_pipe pipe;         /* every stage's proved list, simulated (makespan, busy, stash) */
    int stage, stash;     /* the class's stage and its stash slots */
    int nstash;           /* buffers one micro-batch's forward keeps for its backward (what a slot holds) */
    long long slot_bytes; /* their bytes: one stash slot */
    int n;
    tg_pstep *steps;
} tg_pipe_view;
bool tg_pipe_view_build(const tg_plan *pl, const tg_class_plan *rp, tg_pipe_view *v, tg_err *err);
void tg_pipe_view_free(tg_pipe_view *v);
const char *tg_pstep_kind_name(int kind); /* "recv_act", "send_act", ..., "stash_save", "stash_load" */

/* The steps of the chosen ranks; plans only the classes of those ranks. */
bool tg_inspect_show(const tg_plan *pl, const tg_filter *f, tg_sb *o, tg_err *err);
/* tensor: a weight name ("h.0.attn.c_attn.weight"), a shell pattern ("h.0.*"), "x" (the residual stream
 * [batch*seq, hidden]), or NULL: x and every tensor of the chosen layers (of layer 0 alone when no layer
 * was chosen: every layer is split alike). Plans only the shards of each class, not its steps. */
bool tg_inspect_blocks(const tg_plan *pl, const tg_filter *f, const char *tensor, tg_sb *o, tg_err *err);

#endif
