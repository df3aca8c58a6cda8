/*
 * trk_lm.cuh - the language model's CUDA kernels (model.vocab, docs/MODEL.md), declared for the rank files of a
 * language model and for the CPU emulation (tests/cuda/emu.cc).
 *
 * Design: like kernels.cuh, every kernel is a template over the literal shapes of its step (token rows, local
 * columns, the real ids of the vocab block, sequence length, positions); the vocab block's first id v0 and the
 * loss scale are arguments. The definitions are trk_lm_kernels.cuh, which kernels.cu includes (and instantiates
 * at the schedule's shapes) only for a spec with a vocabulary, so the generated files of block stacks, their
 * goldens and their fingerprints are what they were. Token ids are int32. Each kernel reproduces the CPU
 * backend's arithmetic (runtime/tr_kernels_lm.c) and order wherever a float result depends on it: the gathers,
 * the position add, the row max and the two scatter-adds give the CPU's bits; the exponentials are the CUDA
 * library's expf (the CPU's are tr_vexpf: both within 2 ulp), their sums float (Kahan within a lane, then a
 * shuffle tree), so the loss and dlogits agree with the CPU's to about 1e-6 relative, not bitwise. No kernel uses atomics: each output element has
 * one owning thread, so results are bitwise reproducible from run to run and replica to replica.
 */
#ifndef TRK_LM_CUH
#define TRK_LM_CUH

#include <cuda_runtime.h>
#include <stdint.h>

namespace trk {

/* out[ROWS, COLS] = row tok[r] - v0 of E [>= NVALID rows, COLS] when 0 <= tok[r] - v0 < NVALID, else 0
 * (tok [ROWS] int32: the partial embedding of one row block from this rank's vocab block) */
template <int ROWS, int COLS, int NVALID>
void embed_rows(cudaStream_t s, const int32_t *tok, int v0, const float *E, float *out);

/* x[ROWS, COLS] += wpe[r % SEQ, COLS] (rows hold whole sequences) */
template <int ROWS, int COLS, int SEQ>
void pos_add(cudaStream_t s, float *x, const float *wpe);

/* mx[ROWS] = max of the NVALID first columns of L[ROWS, COLS] (pad columns excluded) */
template <int ROWS, int COLS, int NVALID>
void lm_rowmax(cudaStream_t s, const float *L, float *mx);

/* sums[2, ROWS]: sums[r] = sum over the NVALID first columns of exp(L - mx[r]) (float, compensated);
 * sums[ROWS + r] = L[r, tgt[r] - v0] when this vocab block holds the target, else 0 (tgt [ROWS] int32) */
template <int ROWS, int COLS, int NVALID>
void lm_sums(cudaStream_t s, const float *L, const float *mx, const int32_t *tgt, int v0, float *sums);

/* loss[ROWS] = log(sums[r]) + mx[r] - sums[ROWS + r] (sums summed over the row group) */
template <int ROWS>
void lm_loss(cudaStream_t s, const float *mx, const float *sums, float *loss);

/* dl[ROWS, COLS] = (exp(L - mx) / sums[r] - onehot(tgt[r] - v0)) * scale on the NVALID first columns, 0 on pads */
template <int ROWS, int COLS, int NVALID>
void lm_dlogits(cudaStream_t s, const float *L, const float *mx, const float *sums, const int32_t *tgt, int v0,
                float scale, float *dl);

/* dE[NVALID rows, COLS] += g[r, COLS] for every token r (in order) with 0 <= tok[r] - v0 < NVALID; zero > 0: dE's
 * first `zero` elements set to 0 first, on the same stream (a pipeline stage without the tied head, whose GEMM would
 * have written dE first) */
template <int ROWS, int COLS, int NVALID>
void embed_bwd(cudaStream_t s, const int32_t *tok, const float *g, int v0, float *dE, long long zero);

/* dwpe[NPOS, COLS] = sum over rows r with r % SEQ == p of g[r, COLS], in row order; rows p >= SEQ are 0 */
template <int ROWS, int COLS, int SEQ, int NPOS>
void pos_bwd(cudaStream_t s, const float *g, float *dwpe);

} // namespace trk

#endif
