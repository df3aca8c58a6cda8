/*
 * emu.h - what the emulated kernels (tests/cuda/emu_kernels.cc, compiled per output) use of the emulated CUDA
 * runtime (tests/cuda/emu.cc, compiled once per checkout): a kernel launch is one work item pushed on the stream
 * it names, inside the step trc_begin opened (one item a step; the runtime checks it).
 */
#ifndef TESS_EMU_H
#define TESS_EMU_H

#include <cuda_runtime.h>

#include <functional>

namespace emu {

/* queue f on emulated stream `stream` as the current step's one work item (fails the run outside a step, on
 * another stream than the step's, or for a second item) */
void push(int stream, std::function<void()> f);

/* the emulated stream index of a stream handle trc_stream gave out (an unknown handle fails the run) */
int stream_of(cudaStream_t s);

/* the current step's call also runs the steps after it that name it in trc_fused (a row kernel: trk::resid_ln's
 * layernorm steps, trk::ln_bwd's apply step), as trc_gemm_lt runs its epilogue's step; call before push */
void fused_head();

} // namespace emu

#endif
