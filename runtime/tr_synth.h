/*
 * tr_synth.h - deterministic synthetic weights and inputs, counter-based so
 * each rank generates only its own shard and every replica of a block gets
 * identical values. For tensor name N, seed s and flat row-major index e of
 * the FULL tensor (uint64 arithmetic mod 2^64):
 *   fnv = FNV-1a-64(N); key = fnv ^ (s * 0x9E3779B97F4A7C15)
 *   z = splitmix64-finalise(key + (e + 1) * 0x9E3779B97F4A7C15)
 *   v = 2 * float(z >> 40) * 2^-24 - 1            (float32, exact, in [-1, 1))
 *   ln_{1,2,f}.weight: 1 + v/8   ln_{1,2,f}.bias: v/8   other weights/biases: v/16   "input", "target": v
 * Synthetic token ids (tr_tokens.c): id = floor((v + 1) / 2 * V) of the tensor "tokens" or "targets" [B, S].
 * tests/ref/tessref.py implements the same formula independently.
 */
#ifndef TR_SYNTH_H
#define TR_SYNTH_H

#include <stdint.h>

/* Fill dst[nr, nc] (leading dimension ldd) with the values of rows [r0, r0+nr) and
 * cols [c0, c0+nc) of the full tensor `name` that has `full_cols` columns. */
void tr_synth_block(const char *name, uint64_t seed, int64_t full_cols, int64_t r0, int64_t nr, int64_t c0,
                    int64_t nc, float *dst, int64_t ldd);

#endif
