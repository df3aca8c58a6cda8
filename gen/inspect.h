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
#include "plan.h"
#include "strbuf.h"

/* Which steps (and for blocks/summary, which ranks and layers) to print. */
typedef struct tg_filter {
    int p, layers;
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

/* The steps of the chosen ranks; plans only the classes of those ranks. */
bool tg_inspect_show(const tg_plan *pl, const tg_filter *f, tg_sb *o, tg_err *err);
/* tensor: a weight name ("h.0.attn.c_attn.weight"), a shell pattern ("h.0.*"), "x" (the residual stream
 * [batch*seq, hidden]), or NULL: x and every tensor of the chosen layers (of layer 0 alone when no layer
 * was chosen: every layer is split alike). Plans only the shards of each class, not its steps. */
bool tg_inspect_blocks(const tg_plan *pl, const tg_filter *f, const char *tensor, tg_sb *o, tg_err *err);

#endif
