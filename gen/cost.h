/*
 * cost.h - a predicted time for every step of a class program on a machine
 * (machine.h), and the phase totals a backend would take.
 *
 * The model (docs/COST.md gives it in full, with its comparison against runs):
 *   compute step   max(flops / GEMM rate, bytes / memory bandwidth) + launch
 *                  (a roofline: GEMMs are bound by the rate, the fused kernels by bytes)
 *   collective     alpha-beta over the slowest link of the group, NCCL's ring algorithms:
 *                    bcast, reduce   (g-1) a + n/B
 *                    all-reduce      2(g-1) a + 2 (g-1)/g n/B   (an exact one is a reduce then a bcast)
 *                  where n is the payload in bytes, g the group size, and (a, B) the link: inside a node
 *                  the rank's own link; across nodes the node's network link shared by the groups of the
 *                  same kind that cross it at the same time (every rank runs the same step), i.e.
 *                  B = inter bandwidth * (group members on the node) / (ranks on the node), at most the
 *                  intra bandwidth
 *   phases         two timelines, as the backends run them: "serial" (the CPU backend: every step in
 *                  order) and "streams" (the CUDA backend: compute and comm streams, each step starts
 *                  when its stream is free and the step it waits for (streams.c) has ended; a phase
 *                  ends when both streams have)
 * Nodes hold consecutive ranks (r / ranks_per_node), as launchers fill them; the spec's mesh.placement
 * decides which ranks are consecutive. The class's rank with k = 0 stands for its ranks.
 */
#ifndef TG_COST_H
#define TG_COST_H

#include <stdbool.h>

#include "err.h"
#include "machine.h"
#include "plan.h"
#include "strbuf.h"

#define TG_COST_NKINDS 33 /* tg_step_kind values: TG_STEP_BCAST .. TG_STEP_COPY */

/* One phase (forward, backward or optimizer) of a class program. */
typedef struct tg_cost_phase {
    double serial_s;           /* every step in order (CPU backend) */
    double streams_s;          /* two streams with the plan's waits (CUDA backend) */
    double compute_s, comm_s;  /* busy time of compute steps and of collectives */
    double gemm_s;             /* of compute_s: GEMMs */
    double comm_inter_s;       /* of comm_s: collectives whose group crosses nodes */
    double intra_bytes, inter_bytes; /* payload bytes of collectives whose group stays in a node / crosses nodes */
    double kind_s[TG_COST_NKINDS]; /* busy time per step kind */
    double mb_streams_s, mb_serial_s; /* one micro-batch that is not the last: its steps once, the ones that run on
                                       * the last micro-batch only (the gradients' all-reduces) left out; the last
                                       * one takes streams_s - (mb-1) mb_streams_s (serial alike) */
    int nsteps;
} tg_cost_phase;

typedef struct tg_cost {
    tg_cost_phase phase[4];    /* tg_phase: forward, backward, optimizer, decode */
    double *layer_s;           /* [4 * layers]: streams time of each (phase, layer), phase-major (tg_phase, decode
                                * included); caller frees */
    int layers;
    long long peak_bytes;      /* the class's arena */
    int nodes;                 /* nodes the mesh spans */
} tg_cost;

/* The predicted time of step s of cp (seconds), and whether its group crosses nodes (*inter; may be NULL). */
double tg_cost_step(const tg_plan *pl, const tg_class_plan *cp, const tg_step *s, const tg_machine *mc, int *inter);
/* Every step of cp, the phase totals and the per-layer times. */
bool tg_cost_class(const tg_plan *pl, const tg_class_plan *cp, const tg_machine *mc, tg_cost *out, tg_err *err);
void tg_cost_free(tg_cost *c);

/* Model FLOPs of one step of spec's model over the whole group (every rank's share together), the figure
 * MFU divides: per layer the four GEMMs 2T(4C^2 + 2CF) and attention's QK^T and PV counted on the causal
 * half, 2BS^2C; the LM head 2TCV with a vocabulary; training is 3x the forward (backward = 2x).
 * T = batch * seq tokens. Layernorms, GeLU, softmax, AdamW and the collectives are not counted. */
double tg_cost_model_flops(const tg_spec *s, bool train);
/* The machine's dense GEMM peak for spec's dtype, FLOP/s per rank: bf16, or fp32 (tf32 where its GEMMs use it). */
double tg_cost_peak_flops(const tg_spec *s, const tg_machine *mc);
/* The phase totals, the busy time per step kind and the per-layer times, for people (tessgen --cost). */
void tg_cost_text(const tg_plan *pl, const tg_cost *c, const tg_machine *mc, tg_sb *o);
/* The same as {"mesh", "placement", "nodes", "peak_bytes", "phases": {"forward": {...}, ...}} (--cost --json). */
void tg_cost_json(const tg_plan *pl, const tg_cost *c, const tg_machine *mc, tg_sb *o);

#endif
