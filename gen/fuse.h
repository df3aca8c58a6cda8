/*
 * fuse.h - the bake stage's pass after streams.c: which GEMM may run the step after it as its epilogue, which
 * residual step may run the layernorm after it in the same row kernel, and which layernorm backward's two steps may
 * be one row kernel.
 *
 * Forward: a GEMM C = beta*C + A@B followed directly by a BIAS_GELU step (C = GeLU(C + bias), in place) or a
 * GELU_SAVE step (u = C + bias kept in C, g = GeLU(u) into another buffer) on the same C is one cuBLASLt call on
 * the CUDA backend (CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_GELU_AUX_BIAS; docs/CUDA.md).
 * attention = "cudnn" training (bf16): the proj input-gradient GEMM dO = dY @ Wo^T followed directly by the
 * attention-backward step, which reads dO only to round it into the bf16 copy cuDNN reads, writes that copy as a bf16 D
 * instead (TG_EPI_D_BF16: cublasGemmEx with a bf16 C; not a cuBLASLt epilogue, and the step still runs).
 * Backward: the input-gradient GEMM dg = beta*dg + dY @ W^T followed directly by the GELU_BWD step on the same dg
 * (dg *= GeLU'(u), u the pre-activation GELU_SAVE kept) is one call with CUBLASLT_EPILOGUE_DGELU (u as its aux
 * input); the weight-gradient GEMM dW = beta*dW + X^T @ dY followed directly by the COLSUM step of that dY (the
 * bias gradient db = column sums of dY) is one call with CUBLASLT_EPILOGUE_BGRADA (cuBLASLt's A is our dY: the
 * operands are swapped for the row-major layout, trc_gemm_lt.cu).
 * The pair is marked when that call computes exactly what the two steps compute and orders exactly as they do:
 *
 *   - the kernel step is the next step on the GEMM's stream: only steps of the other stream come between (on
 *     data parallel meshes the all-reduce of dW comes between dW's GEMM and the column sum); the kernel step
 *     waits for none of them (below), so none touches its buffers before it, and the ones that wait for the
 *     GEMM then also wait for the epilogue, which only orders more;
 *     GeLU steps read the GEMM's C as [m, n] with ldc = n = cols; the column sum reads the GEMM's B as [k, n]
 *     with ldb = n = cols. Forward: the GEMM is not transposed (the forward's SUMMA and megatron GEMMs); DGELU:
 *     only B is (dY @ W^T); BGRAD: only A is (X^T @ dY; cuBLASLt sums its A only when A is not transposed);
 *   - cuBLASLt writes D and the aux matrix in one type (D's) and reads the bias in D's type too (cublasLt.h,
 *     CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE; an fp32 bias with a bf16 D is refused: CUBLAS_STATUS_INVALID_VALUE,
 *     measured on an H200 on 2026-11-27). fp32 programs: the GEMM's C and the bias fp32, A and B of one type (fp32,
 *     or bf16 with an fp32 C); GELU_SAVE's g (D) fp32 with u in C; BIAS_GELU in place in the fp32 C; the backward
 *     pairs with every buffer fp32. bf16 programs (docs/BF16.md: fc1's bias in bf16, training's u and du bf16):
 *     fc1's GELU_SAVE with bf16 A, B, bias and g (and u) as GELU_AUX_BIAS (GELU_BIAS in inference), D = g, and the
 *     GELU_BWD that writes the bf16 du out of place as DGELU with D = du and aux = u, each with beta 0 and the
 *     GEMM's fp32 C (h, dg) read by the kernel step only: the call never writes it. Bias gradients of bf16 programs
 *     stay kernels;
 *   - the kernel step waits for no step of the other stream (tg_step.wait == -1): every conflict of its
 *     buffers is then already ordered before the GEMM starts, so moving its work into the GEMM is safe;
 *   - no buffer the kernel step writes (other than the GEMM's C) shares arena bytes with the GEMM's A or B: the one
 *     call writes those outputs while it still reads A and B (two steps apart, the arena may give an output the bytes
 *     of an operand whose last reader is the GEMM: bf16 inference's GeLU output those of LN2's output, megatron's fp32
 *     fc1 bias gradient those of LN2's output, its weight-gradient GEMM's X). The planner pins each such output to the GEMM before it
 *     (tg_pb_pin_to_gemm), so it lives from the GEMM on and the arena keeps them apart;
 *   - GELU_SAVE only with beta == 0 (cuBLASLt would read C and write the pre-activation into the same
 *     bytes, which it does not promise to support); GELU_SAVE and DGELU with n a multiple of 8 (the aux
 *     matrix's leading dimension, a cuBLASLt rule).
 *
 * Row kernels: a RESID_ROWSUM step (x + (p + bias) into xo, in place in inference, and the row sums rs of xo)
 * followed directly by the LN_SQDEV and LN_APPLY steps of the next layernorm on xo and rs is one kernel on the CUDA
 * backend (TG_EPI_LN on the residual step; trk::resid_ln, templates/kernels_rows.cu.in: a warp per row reads x, p and
 * bias once and writes xo, rs, vs and the layernorm output y), marked when:
 *
 *   - the three are consecutive steps of one phase and stream (nothing between: the row group's all-reduces of
 *     the statistics, on q >= 2, are between and keep the steps apart) over whole rows (cols == hidden: q = 1 and
 *     the megatron scheme's replicated layernorms), the two layernorm steps waiting for nothing (the residual step
 *     may wait: its wait is the kernel's), reading the residual's xo and rs, and x, p, bias, xo, gamma, beta fp32
 *     (y fp32 or bf16);
 *   - no output of the three (xo when out of place, rs, vs, y) shares arena bytes with an input (x, p, bias, gamma,
 *     beta): the kernel writes a row's outputs while other rows are still to be read, where the steps apart would
 *     let the arena give vs or y the bytes of p, whose last reader is the residual step. The planner pins vs and y
 *     to the residual step where nothing comes between it and its layernorm (plan_steps.c), so the arena keeps
 *     them apart.
 *
 * A layernorm with no residual add before it (the first block's ln1; ln_f after the kept block output) is one row
 * kernel too: an LN_ROWSUM step (rs = row sums of x) followed directly by LN_SQDEV and LN_APPLY of x and rs, under
 * the same conditions with x for xo (TG_EPI_LN on the LN_ROWSUM step; trk::ln_rows, the same kernel without the
 * residual: x read once), no output (rs, vs, y) over x, gamma or beta. x is live until the apply step, which reads it,
 * so the arena cannot put vs or y on it; the rule guards a later planner.
 *
 * Layernorm backward: an LN_BWD_SUMS step (per row s1 = sum dy gamma, s2 = sum (dy gamma) xhat into sums [2, rows];
 * dgamma and dbeta as column sums) followed directly by its LN_BWD_APPLY step (g += dx from the sums; in bf16 training
 * also g16, g's bf16 copy) is one row kernel on the CUDA backend (TG_EPI_LNB on the sums step; trk::ln_bwd,
 * templates/kernels_layernorm.cu.in: a warp per row sums s1, s2 and then adds dx to its row of g without leaving the
 * warp, reading dy and x once; dgamma and dbeta by the same column kernel as before, launched after it). The sums are
 * then never written on the GPU (the plan keeps the buffer, as the fp32 outputs a fused bf16 GEMM never writes).
 * Marked when:
 *
 *   - the apply step is the next step, of the sums step's phase and stream (on q >= 2 the row group's all-reduce of
 *     the sums comes between and keeps them apart), waiting for nothing, over whole rows (cols == hidden: q = 1 and
 *     the megatron scheme's replicated layernorms), on the sums step's dy, x, rs, vs, gamma and eps, reading the sums
 *     it wrote, which no other step reads; every buffer fp32 but g16 (bf16);
 *   - no output (g, g16, dgamma, dbeta) shares arena bytes with an input (dy, x, rs, vs, gamma), nor g or g16 with
 *     dgamma or dbeta: g is updated in place, but the kernel writes a row's g while other rows are still to be
 *     read, and the column kernel now runs after the row kernel. The arena cannot put them together today (every
 *     input is read by the apply step, every output is live at it: no pin is needed, unlike the forward's), so the
 *     rule only guards a later planner.
 *
 * The plan keeps every step (the CPU backend runs them one after the other, the byte and flop counts and
 * the buffers' lifetimes stay as they were); the marking is in the steps (tg_step.epi, tg_step.fused), in
 * the fingerprint, schedule.txt, schedule.json and --show, and the cost model charges a fused kernel step
 * only the bytes the epilogue (or the row kernel: vs written; gamma, beta read and y written; the layernorm
 * backward's g read and written, g16 written) adds.
 */
#ifndef TG_FUSE_H
#define TG_FUSE_H

#include <stdbool.h>

#include "plan.h"

/* Mark the fusable pairs of cp (after tg_streams_plan). Always succeeds; returns true. */
bool tg_fuse_plan(tg_class_plan *cp);

/* Does fused GEMM step t write its kernel step's bf16 output as D (a bf16 program's GeLU output g, bf16 training's
 * du, or attention = "cudnn"'s bf16 dO) instead of its own fp32 C (h, dg, dO), which the fused call then never writes? (The CUDA emitter's
 * call and buffers, and the cost model's bytes, follow it.) */
bool tg_fuse_d_bf16(const tg_class_plan *cp, const tg_step *t);

/* Is kernel step s (marked fused) run whole by its GEMM's epilogue, or by its residual step's or sums step's row kernel
 * (so a backend issues nothing for it)? Every pair's kernel step but the cuDNN attention backward of a TG_EPI_D_BF16
 * pair, which still runs: it only casts nothing; both layernorm steps of a row kernel, never the residual step itself;
 * the apply step of a layernorm backward's, never its sums step. */
bool tg_fuse_absorbed(const tg_class_plan *cp, const tg_step *s);

/* Bytes the epilogue of kernel step s (tg_fuse_absorbed) adds to its GEMM (the layernorm steps of a row kernel: what
 * they add to the residual step's bytes: vs written; gamma, beta read and y written; a layernorm backward's apply step:
 * g read and written, g16 written, beside its sums step's bytes): the bias read, and for GELU_SAVE the
 * GeLU output written besides the pre-activation the GEMM writes (bf16 D: g, and u as aux in training, the GEMM's
 * fp32 C not written); for DGELU the pre-activation read (bf16 D: and du written, dg not); for BGRAD the bias
 * gradient written (the GEMM reads dY anyway). */
long long tg_fuse_extra_bytes(const tg_class_plan *cp, const tg_step *s);

/* What a marked step says about its pair, for schedule.txt, --show and the CUDA comments: "; CUDA: bias+GeLU
 * epilogue (step N) of this GEMM" (or "GeLU-gradient", "bias-gradient") on the GEMM, "; CUDA: the epilogue of
 * gemm N" on the kernel step; "; CUDA: one row kernel with the layernorm steps N and M" on a residual step, "; CUDA:
 * one row kernel with step N (sums not written)" on a layernorm backward's sums step, and "; CUDA: in the row kernel of
 * step N" on the steps they run; "" for other steps. */
const char *tg_fuse_text(char *buf, int cap, const tg_class_plan *cp, const tg_step *s);

#endif
