/*
 * pipe_cost.h - the cost model (cost.h) for pipeline stages (mesh.pp = S > 1, training): a predicted step time
 * from each stage's own class plans, the point-to-point blocks between stages and the proved schedule
 * (docs/COST.md "Pipeline stages").
 *
 *   per stage s   F_s, B_s: one micro-batch's forward and backward of the stage's slowest class (cost.c's
 *                 tg_cost_class on every class (i, j) of the stage, tg_cost_phase.mb_*); B_s(last): the backward of
 *                 micro-batch m-1, which also runs the gradients' all-reduces over depth; O_s: its optimizer
 *   between       c_s: one activation (or gradient) block [R/m, C/q] floats between stage s and s+1, alpha-beta
 *                 a + n/B over the link of the slowest pair of ranks (r, r+p): a pair on one node uses intra; a
 *                 pair across nodes inter, the sending node's bandwidth shared by its ranks that send across at once
 *   the step      tg_pipe_time runs the proved lists with these durations (a send and its receive end together,
 *                 c_s after the later of the two); then the tied wte gradient's exchange between stage 0 and S-1
 *                 (model.vocab: Vq x C/q floats, the same link rule), then each stage's optimizer: the step ends
 *                 when the last stage's does. Both timelines: "streams" (the CUDA backend's, as --cost prints) and
 *                 "serial" (the CPU backend, the one that runs stages today).
 * The bubble is the idle stage-time of the pipeline part (up to the last backward) over S times its length.
 */
#ifndef TG_PIPE_COST_H
#define TG_PIPE_COST_H

#include <stdbool.h>

#include "err.h"
#include "machine.h"
#include "spec.h"
#include "strbuf.h"

typedef struct tg_pipe_cost_stage {
    int l0, nl;                 /* its layers */
    double fwd[2], bwd[2], bwd_last[2], opt[2]; /* [0] streams, [1] serial: seconds, the stage's slowest class */
    double p2p;                 /* one block to stage s+1 (0 on the last stage) */
    int p2p_inter;              /* that block crosses nodes */
    double busy[2], end[2];     /* from the timed schedule: its F and B time, its clock after its last step */
    long long peak_bytes;       /* the largest arena of its classes */
    long long mem_bytes;        /* the largest arena + stash of its classes (the stash: one copy per micro-batch in
                                 * flight, tg_plan.stash): what --summary's "stage s memory" line prints */
} tg_pipe_cost_stage;

typedef struct tg_pipe_cost {
    int S, m, nodes;
    tg_pipe_cost_stage *st;     /* [S] */
    long long block_bytes;      /* one activation or gradient block per rank */
    long long tied_bytes;       /* the tied wte gradient each way per rank (0 without model.vocab) */
    double tied;                /* its exchange's time */
    int tied_inter;
    double span[2];             /* the pipeline part: until the last backward ends */
    double step[2];             /* the step: the pipeline, the tied exchange, the optimizers */
    double bubble[2];           /* idle stage-time over S * span */
    double pp1_step[2];         /* the same model on one [q,q,d] group (pp = 1), class (0,0) */
    int stage_plans;            /* the stages whose classes were planned; each other stage has the signature of one of
                                 * them (pipe_cost.c: first, last, layer count, node offset) and reuses its figures */
} tg_pipe_cost;

/* Plan every class of every stage of s (pp > 1) and time the step on mc. */
bool tg_pipe_cost_run(const tg_spec *s, const tg_machine *mc, tg_pipe_cost *out, tg_err *err);
/* The same step without the pp = 1 comparison (pp1_step stays 0): what --advise ranks a pipeline candidate by. */
bool tg_pipe_cost_step(const tg_spec *s, const tg_machine *mc, tg_pipe_cost *out, tg_err *err);
/* tg_pipe_cost_run planning every stage, none reused (stage_plans = S): the reference the reuse is checked against. */
bool tg_pipe_cost_every_stage(const tg_spec *s, const tg_machine *mc, tg_pipe_cost *out, tg_err *err);
void tg_pipe_cost_free(tg_pipe_cost *c);
/* For people (tessgen --cost): the stages' table, the step, the bubble, the pp = 1 comparison. */
void tg_pipe_cost_text(const tg_spec *s, const tg_machine *mc, const tg_pipe_cost *c, tg_sb *o);
/* {"spec", "machine", "pp", "schedule", "microbatches", "stages": [...], "step_s", ...} (--cost --json). */
void tg_pipe_cost_json(const tg_spec *s, const tg_machine *mc, const tg_pipe_cost *c, tg_sb *o);

#endif
