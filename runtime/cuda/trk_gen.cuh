/*
 * trk_gen.cuh - text generation's CUDA kernels (mode = "generate", docs/GENERATE.md), declared for the rank files of
 * a generate program and for the CPU emulation (tests/cuda/emu_kernels.cc).
 *
 * Design: as trk_lm.cuh, every kernel is a template over the literal shapes of its step (local sequences, prompt
 * length, local columns, heads, head dimension, KV-cache positions, the real ids of a vocab block); the definitions
 * are trk_gen_kernels.cuh, which kernels.cu includes (and instantiates at the schedule's shapes) only for a generate
 * program, so every other output's files and fingerprints are what they were. Each reproduces the CPU backend's
 * runtime/tr_kernels_lm.c: the copies, the position add and the argmax (ties to the lowest id) give its bits; the
 * decode step's attention computes what tr_attn_decode computes (scores scaled, softmax, the weighted sum of V) in
 * float, its sums in another order (the CPU sums the softmax in double), so its outputs agree to about 1e-6 relative.
 * No atomics: every output element has one owning thread, so runs are bitwise reproducible.
 */
#ifndef TRK_GEN_CUH
#define TRK_GEN_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "trc.h" /* tr_bf16 */

namespace trk {

/* x[ROWS, COLS] += wpe[pos[r], COLS] (pos [ROWS] int32: a decode step's row r is its sequence's position pos[r]) */
template <int ROWS, int COLS>
void pos_add_at(cudaStream_t s, float *x, const float *wpe, const int32_t *pos);

/* The prefill's keys and values into the KV cache: kv row s*CONTEXT + p [2*COLS] = the K | V columns of qkv row
 * s*SEQ + p [3*COLS], for every local sequence s < NSEQ and position p < SEQ. KV: float, or tr_bf16 (a bf16 plan's
 * cache: rounded to nearest even) */
template <int NSEQ, int SEQ, int COLS, int CONTEXT, typename KV>
void kv_write(cudaStream_t s, const float *qkv, KV *kv);

/* One decode step's attention: qkv [NSEQ, 3*HEADS*HDIM] += bias; sequence s's K and V into kv row s*CONTEXT + pos[s];
 * out [NSEQ, HEADS*HDIM] = softmax(q K^T / sqrt(HDIM)) V over kv rows s*CONTEXT + 0..pos[s], per head. One block a
 * (sequence, head); the scores in shared memory (CONTEXT floats, at most 8192: gen/emit_rank_cu.c refuses more).
 * KV = tr_bf16 (a bf16 plan): q, k, v rounded after the bias (in place in qkv), P rounded before P V, out bf16, as
 * the CPU's tr_attn_decode_bf16. */
template <int NSEQ, int HEADS, int HDIM, int CONTEXT, typename KV>
void attn_decode(cudaStream_t s, float *qkv, const float *bias, KV *out, KV *kv, const int32_t *pos);

/* pairs [2*ROWS] at pairs: per row of L [ROWS, COLS] the pair (max logit, its id v0 + k) over the NVALID first columns,
 * a float and an int32 in two 4-byte slots, ties to the lowest id; a block of pad columns only (NVALID 0) gives
 * (-inf, INT32_MAX), which loses every comparison of the max-loc all-reduce after it */
template <int ROWS, int COLS, int NVALID>
void lm_argmax(cudaStream_t s, const float *L, int v0, float *pairs);

} // namespace trk

#endif
