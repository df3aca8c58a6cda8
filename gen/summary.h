/*
 * summary.h - what each rank holds and moves, in figures, and the summary
 * that prints them (tessgen --summary, DIR/summary.txt).
 *
 * Figures are computed from a class plan once (tg_class_figures) and kept
 * without the plan: the peak arena and the buffers live at the busiest step,
 * and per (phase, layer) the bytes received, sent and reduced per group kind
 * and the flops. Every rank of a class has the class's figures. tessgen
 * computes them in its first pass over the classes, so the summary and the
 * index files never hold more than one class plan at a time.
 *
 * The summary groups what is identical so that it fits on a screen for any
 * mesh: ranks whose memory figures are equal share a line, ranks whose
 * traffic is equal share lines, and consecutive layers with equal figures
 * share one line ("0-95"). The full form (--summary --full, summary.txt)
 * lists every class and every layer. Either ends with every other [q,q,d]
 * with the same rank count, each judged by the real spec loader and planned
 * (every class in the full form, rank 0's class in the grouped one), or "not
 * possible" with the rule it breaks.
 */
#ifndef TG_SUMMARY_H
#define TG_SUMMARY_H

#include <stdbool.h>

#include "err.h"
#include "inspect.h"
#include "plan.h"
#include "strbuf.h"

/* Elements received, sent, reduced per group kind, and flops, of one (phase, layer) or a sum of them. */
typedef struct tg_traffic {
    long long recv[TG_NGROUPS], sent[TG_NGROUPS], red[TG_NGROUPS];
    long long flops;
    int used;
} tg_traffic;

struct tg_class_fig {
    int i, j;
    long long arena, weights, persistent; /* elements */
    long long live;                       /* elements in buffers live at the busiest step */
    char peak[96];                        /* that step: "7 fwd L0 qkv t=0 gemm" */
    char top[3][48];                      /* its largest temporaries */
    long long top_elems[3];
    int ntop;
    int nsteps;
    long long flops, recv, sent, red;     /* whole program */
    unsigned cols;                        /* bit 3*g + d: group g carries direction d (recv, sent, reduced) */
    int nbuckets;                         /* TG_NPHASE * (layers + 1): [phase][layer + 1], layer -1 at 0 */
    tg_traffic *bucket;
    long long kv; /* mode = "generate": the KV caches of every layer, elements (persistent, in the arena); else 0 */
};
typedef struct tg_class_fig tg_class_fig;

bool tg_class_figures(const tg_plan *pl, const tg_class_plan *cp, tg_class_fig *fig, tg_err *err);
void tg_class_fig_free(tg_class_fig *fig);
/* The figures of every class, planning one class at a time; figs[class number]. */
bool tg_plan_figures(const tg_plan *pl, tg_class_fig **figs, tg_err *err);
void tg_figures_free(const tg_plan *pl, tg_class_fig *figs);

/* The summary of the ranks and layers f selects; full: every class and layer (else grouped, <= 60 lines).
 * Fails only on an internal error (out of memory). */
bool tg_inspect_summary(const tg_plan *pl, const tg_class_fig *figs, const tg_filter *f, int full, tg_sb *o,
                        tg_err *err);
/* summary.txt: the full summary of every rank and layer. */
/* Pipeline stages (mesh.pp > 1): each stage's memory per rank of its class (0,0), bytes: the stage's planned arena
 * (its weights, gradients and moments, one micro-batch's activations and temporaries) plus its stash, the buffers
 * one micro-batch's forward keeps for the backward times the proved schedule's in-flight micro-batches
 * (docs/TRAINING.md "Pipeline stages"). False with the planner's or the schedule's error. */
bool tg_stage_memory(const tg_spec *s, tg_sb *out, tg_err *err);
bool tg_emit_summary_txt(const tg_plan *pl, const tg_class_fig *figs, tg_sb *out, tg_err *err);

#endif
