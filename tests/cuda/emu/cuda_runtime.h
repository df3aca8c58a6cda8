/*
 * cuda_runtime.h - the host emulation's stand-in (tests/cuda/emu.cc): the generated
 * CUDA rank files and trc.h need only the stream type from the real header, so
 * they compile with a plain C++ compiler on a machine without CUDA.
 */
#ifndef TESS_EMU_CUDA_RUNTIME_H
#define TESS_EMU_CUDA_RUNTIME_H
typedef struct CUstream_st *cudaStream_t;
#endif
