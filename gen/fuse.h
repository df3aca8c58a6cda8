/*
 * fuse.h - the bake stage's pass after streams.c: which GEMM may run the GeLU step after it as its epilogue.
 *
 * A GEMM C = beta*C + A@B followed directly by a BIAS_GELU step (C = GeLU(C + bias), in place) or a
 * GELU_SAVE step (u = C + bias kept in C, g = GeLU(u) into another buffer) on the same C is one cuBLASLt
 * call on the CUDA backend (CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_AUX_BIAS; docs/CUDA.md).
 * The pair is marked when that call computes exactly what the two steps compute and orders exactly as they do:
 *
 *   - the kernel step comes right after the GEMM (nothing in between reads the unbiased C) and reads its C
 *     as [m, n] with ldc = n = cols; the GEMM is not transposed (the forward's SUMMA and megatron GEMMs);
 *   - C, the bias and the GeLU output are fp32: cuBLASLt writes D, the bias and the pre-activation in one
 *     type (D's), and the bf16 programs keep an fp32 pre-activation beside a bf16 output (docs/BF16.md);
 *   - the kernel step waits for no step of the other stream (tg_step.wait == -1): every conflict of its
 *     buffers is then already ordered before the GEMM starts, so moving its writes into the GEMM is safe;
 *   - GELU_SAVE only with beta == 0 (cuBLASLt would read C and write the pre-activation into the same
 *     bytes, which it does not promise to support) and n a multiple of 8 (the pre-activation's leading
 *     dimension, a cuBLASLt rule).
 *
 * The plan keeps both steps (the CPU backend runs them one after the other, the byte and flop counts and
 * the buffers' lifetimes stay as they were); the marking is in the steps (tg_step.epi, tg_step.fused), in
 * the fingerprint, schedule.txt, schedule.json and --show, and the cost model charges a fused kernel step
 * only the bytes the epilogue adds to the GEMM.
 */
#ifndef TG_FUSE_H
#define TG_FUSE_H

#include <stdbool.h>

#include "plan.h"

/* Mark the fusable pairs of cp (after tg_streams_plan). Always succeeds; returns true. */
bool tg_fuse_plan(tg_class_plan *cp);

/* Bytes the epilogue of kernel step s (marked fused) adds to its GEMM: the bias read, and for GELU_SAVE the
 * GeLU output written besides the pre-activation the GEMM writes anyway. */
long long tg_fuse_extra_bytes(const tg_class_plan *cp, const tg_step *s);

/* What a marked step says about its pair, for schedule.txt, --show and the CUDA comments: "; CUDA: GeLU epilogue
 * (step N) of this GEMM" on the GEMM, "; CUDA: the epilogue of gemm N" on the kernel step; "" for other steps. */
const char *tg_fuse_text(char *buf, int cap, const tg_class_plan *cp, const tg_step *s);

#endif
