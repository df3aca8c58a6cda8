/*
 * tr_clip.h - clipping the gradients by their global L2 norm (spec key optimizer.clip;
 * docs/TRAINING.md "Gradient clipping").
 *
 * The norm is that of the full gradients, each element counted once: a rank sums the squares (in
 * double) of the shards it holds canonically (member 0 of the shard's replica group, tr_param.replica,
 * the copy tr_gather writes; every shard when no other rank holds it), rank 0 gathers the p partial
 * sums and adds them in rank order, and broadcasts the norm, so every rank has bitwise the same value
 * and the same sum is formed on every run of the same mesh. Every gradient is then scaled by
 * min(1, clip / (norm + 1e-6)) rounded to float once; replicas hold bitwise identical gradients
 * (the exact all-reduce), multiply them by the same float and stay identical. Generic over the rank's
 * parameter list: new parameters are clipped with the others.
 */
#ifndef TR_CLIP_H
#define TR_CLIP_H

#include "tr_ctx.h"

/* Does this rank hold pr's canonical copy (the one counted once, the one tr_gather writes)? */
int tr_clip_canonical(const tr_rank_desc *d, const tr_param *pr);

/* Collective over MPI_COMM_WORLD: the global L2 norm from every rank's canon part (rank 0 adds them in rank
 * order and broadcasts: the same bits on every rank), and *finite: the norm and every rank's rest are finite
 * (every gradient element of every rank is). */
double tr_clip_norm(const tr_rank_desc *d, double canon, double rest, int *finite);

/* The factor clipping multiplies every gradient by, min(1, clip / (norm + 1e-6)) rounded to float once; false
 * (nothing to scale) when clip is off or the norm does not exceed it. */
bool tr_clip_scale(double norm, double clip, float *s);

#endif
