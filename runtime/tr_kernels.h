/*
 * tr_kernels.h - CPU kernel pieces shared inside runtime/ (not called by
 * generated code): the per-kind timing of a kernel, the causal softmax that
 * the attention forward and its backward (which recomputes the probabilities)
 * must compute identically, and the per-row bodies of the kernels that have a
 * bf16-output variant.
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
/* The softmax of one row's first n entries in place (tr_causal_softmax's row i is n = i + 1): generation's decode
 * step uses it on the scores over the KV cache. */
void tr_causal_softmax_row(float *row, int n);

/* The per-row (per-sequence) arithmetic of the fp32 kernels, shared with their bf16-output variants
 * (tr_kernels_bf16.c), which run it into an fp32 scratch and round: one copy of the math, so a bf16 output
 * is exactly tr_f32_to_bf16 of the fp32 kernel's. */
/* tr_ln_apply on one row: yr[j] = (xr[j] - rs/hidden) / sqrt(vs/hidden + eps) * gamma[j] + beta[j]. */
void tr_ln_apply_row(const float *xr, float rs, float vs, const float *gamma, const float *beta, int cols, int hidden,
                     float eps, float *yr);
/* tr_bias_gelu_save on one row: ur += bias; gr = GeLU(ur). */
void tr_bias_gelu_save_row(float *ur, const float *bias, float *gr, int cols);
/* tr_attention's bias add: qkv [nseq*seq, 3*heads*hdim] += bias. */
void tr_attention_bias(float *qkv, const float *bias, int nseq, int seq, int heads, int hdim);
/* x[e] = the bf16 value nearest x[e] (tr_f32_to_bf16, widened back: exact), for n elements. */
void tr_round_bf16_inplace(float *x, long long n);
/* tr_attention on one sequence: blk [seq, 3*cols] (Q | K | V, post-bias), o [seq, cols] with row stride
 * cols = heads*hdim; scores [seq, seq] scratch. round_p: P rounded to bf16 before P V (the bf16 program,
 * which passes a blk already rounded; docs/BF16.md, "Attention"). */
void tr_attention_seq(const float *blk, float *o, float *scores, int seq, int heads, int hdim, int round_p);
/* tr_attention_bwd on one sequence: blk [seq, 3*cols] (post-bias), dO [seq, cols] (row stride cols), dblk
 * [seq, 3*cols] written; probs and dscores [seq, seq] scratch. round: the bf16 program (blk and dO already
 * rounded by the caller): P and dS rounded to bf16 before the GEMMs that read them. */
void tr_attention_bwd_seq(const float *blk, const float *dO0, float *dblk, float *probs, float *dscores, int seq,
                          int heads, int hdim, int round);
/* The threads attention runs its `units` independent pieces on (sequence x head pairs, or sequences), each
 * doing GEMMs of seq x seq x hdim: 1 when there is one piece or one thread, when the GEMMs are large enough
 * that the BLAS threads them itself (TR_BLAS_ONE_THREAD), or when the whole is small (TR_PAR_MIN); else the
 * rank's threads, at most one per piece. Thread 0 uses the arena's scratch, threads 1.. tr_scratch. */
int tr_attention_threads(int units, int seq, int hdim);

/* The sum of squares of g[0, n) in double, in a fixed association (blocks of 65536, each as eight lanes by index,
 * summed in order), on the rank's threads: the same bits whatever the thread count and vector width. */
double tr_sumsq(const float *g, long long n);
/* The number of elements of g[0, n) that are Inf or NaN, on the rank's threads. */
long long tr_nonfinite(const float *g, long long n);

#endif
