/*
 * tr_kernels.h - CPU kernel pieces shared inside runtime/ (not called by
 * generated code): the per-kind timing of a kernel, and the causal softmax that
 * the attention forward and its backward (which recomputes the probabilities)
 * must compute identically.
 */
#ifndef TR_KERNELS_H
#define TR_KERNELS_H

/* Time a kernel (in a function with a tr_ctx *c) as step kind `kind` when timing is on. */
#define TIMED_BEGIN double t0_ = c->timing ? tr_now() : 0
#define TIMED_END(kind)                                                                                             \
    do {                                                                                                            \
        c->calls[kind]++;                                                                                           \
        if (c->timing)                                                                                              \
            c->seconds[kind] += tr_now() - t0_;                                                                     \
    } while (0)

/* P[seq, seq] holds scaled scores; replace row i by softmax over columns 0..i, zeros after. */
void tr_causal_softmax(float *P, int seq);

#endif
