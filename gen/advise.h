/*
 * advise.h - which mesh? Every layout of a spec's model on P ranks, each
 * placed on the machine's nodes and timed by the cost model (cost.h).
 *
 * Candidates are every [q,q,d] with q*q*d = P (Optimus 2-D is d = 1) in each
 * placement that numbers the ranks differently (mesh.h), for a training spec
 * at every micro-batch count m dividing the sequences per rank (one row each),
 * and Megatron-LM 1-D over P (scheme "megatron"). Each is judged by the spec loader's own rules
 * (a layout they refuse is listed with their message, not timed) and by the
 * work bound, then its class (0,0) is planned for inference and for training
 * and costed: forward_s is the inference forward, train_step_s forward +
 * backward + AdamW, both on the two-stream timeline of the CUDA backend.
 * Candidates are ranked by the time of what the spec runs (step_s: the
 * training step for mode = "train", else the forward), with tokens/s and
 * MFU beside it; a layout that does not fit gets the change that makes it
 * fit (fix), and the best one the spec lines that select it.
 * peak_bytes is the arena of the spec's mode; a candidate fits when it is
 * within the machine's memory_gib.
 *
 * A training spec's world of W ranks (--ranks, else the spec's pp*q*q*d) is also split into pipeline stages:
 * every pp = S > 1 dividing both W and model.layers (and the spec's own pp, with its pipeline.layers, where it
 * divides W), each stage a [q,q,d] group of W/S ranks in each distinct placement, with every micro-batch count m
 * dividing the group's sequences per rank (the spec rule). Each is costed as --cost costs pipeline stages
 * (pipe_cost.h: every class of each distinct stage, the proved schedule timed, bubble included): step_s is that step,
 * stage_bytes[s] the arena + stash of stage s (what --summary prints), peak_bytes their largest. The candidates
 * are S x meshes x placements x m: bounded by divisor counts, each costed from q*q class plans per distinct stage
 * (first, last, and the middle stages by layer count and node offset: pipe_cost.c).
 */
#ifndef TG_ADVISE_H
#define TG_ADVISE_H

#include <stdbool.h>

#include "cost.h"
#include "machine.h"
#include "spec.h"
#include "strbuf.h"

typedef struct tg_candidate {
    int megatron;          /* 0: Tesseract [q,q,d]; 1: Megatron-LM 1-D over p */
    int q, d, p;
    tg_placement placement;
    int possible;          /* the spec rules and the work bound accept it; else why says which rule */
    char why[1024];
    double forward_s, train_step_s;
    double step_s;         /* what the ranking sorts by: train_step_s for a training spec, else forward_s */
    double tokens_per_s;   /* batch * seq tokens per step_s, the whole group */
    double mfu;            /* model FLOPs per step (tg_cost_model_flops) / (step_s * ranks * GEMM peak per rank) */
    char fix[512];         /* a layout that does not fit: the change that makes it fit ("" if none found) */
    long long peak_bytes;
    int fits;              /* peak_bytes <= machine memory_gib */
    tg_cost_phase fwd;     /* the inference forward, for "what dominates" */
    tg_cost_phase train[3]; /* the training step's phases */
    int nodes;
    /* a training spec's memory options on this layout: its row's micro-batch count, and the spec's own others unless
     * they do not fit: then the fastest combination of recomputation and optimizer sharding that fits at that m, else
     * the one of least memory */
    int microbatches, recompute, shard;
    int layers; /* of the spec those options are for (recompute == layers: every layer) */
    /* pipeline stages: pp = 1 for every other candidate; with pp > 1, q, d and placement are one stage's group,
     * p the world (pp*q*q*d), microbatches the pipeline's m, and forward_s, fwd, train[] are not computed */
    int pp;
    int uncosted;                           /* the spec rules accept it, the cost model could not cost it (why) */
    double bubble;                          /* idle stage-time over pp * the pipeline part (--cost's streams one) */
    long long stage_bytes[TG_MAX_STAGES];   /* arena + stash of each stage (the largest class's) */
} tg_candidate;

/* Every candidate for spec's model on `ranks` ranks (0: the spec's own count), sorted by step_s (the
 * impossible ones last, in mesh order). *out is malloc'd. */
bool tg_advise(const tg_spec *spec, const tg_machine *mc, int ranks, tg_candidate **out, int *n, tg_err *err);

/* The ranking as a table for people, and as {"candidates": [...], "refused": [...]}. */
void tg_advise_text(const tg_spec *spec, const tg_machine *mc, int ranks, const tg_candidate *c, int n, tg_sb *o);
void tg_advise_json(const tg_spec *spec, const tg_machine *mc, int ranks, const tg_candidate *c, int n, tg_sb *o);

/* "bcast inter-node 61%": the largest share of the forward's busy time (GEMM, kernels, comm in a node, comm
 * across nodes). */
void tg_advise_dominant(const tg_cost_phase *ph, char *buf, size_t cap);

#endif
