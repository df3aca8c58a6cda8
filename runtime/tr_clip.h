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

/* Collective over MPI_COMM_WORLD: the global L2 norm of the gradients in the host arena H (every
 * tr_param's grad_offset shard), the same bits on every rank. */
double tr_clip_norm(const tr_rank_desc *d, const float *H);

/* Collective: compute the norm of the gradients (host arena H, already downloaded from the run arena A)
 * and, when it exceeds clip, scale every gradient in H and A by clip / (norm + 1e-6). Returns the norm
 * (before scaling). */
double tr_clip_apply(tr_ctx *c, float *H, float *A, double clip);

#endif
