/*
 * tr_kernels.h - CPU kernel pieces shared inside runtime/ (not called by
 * generated code): the causal softmax that the attention forward and its
 * backward (which recomputes the probabilities) must compute identically.
 */
#ifndef TR_KERNELS_H
#define TR_KERNELS_H

/* P[seq, seq] holds scaled scores; replace row i by softmax over columns 0..i, zeros after. */
void tr_causal_softmax(float *P, int seq);

#endif
