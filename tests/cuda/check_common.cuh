/*
 * check_common.cuh - what the standalone kernel checks of tests/cuda (attn_check.cu, bf16_check.cu,
 * lnb_check.cu, rows_check.cu, decode_check.cu, ...) share, included once by each (every check is one translation unit): the runtime's failure
 * hooks, which stop the check naming the call and where (the kernels' TRC_LAUNCHED and TRC_ALIGNED16 call
 * them; with trc_internal.h included first, also the cudaCheck/cublasCheck hooks, the runtime state the
 * cuBLAS wrappers use, dev/get/put for device buffers and time_ms for the microbenchmarks), a failure counter, and a seeded generator of uniform floats so every run checks the
 * same inputs.
 */
#ifndef TESS_CHECK_COMMON_CUH
#define TESS_CHECK_COMMON_CUH

#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include <cuda_runtime.h>

#include "tr_bf16.h"

void trc_launch_check(const char *kernel, const char *file, int line)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "%s:%d: launch of %s: %s\n", file, line, kernel, cudaGetErrorString(e));
        exit(2);
    }
}

void trc_check_aligned(const void *p, const char *what, const char *file, int line)
{
    if (reinterpret_cast<size_t>(p) & 15u) {
        fprintf(stderr, "%s:%d: %s is not 16-byte aligned\n", file, line, what);
        exit(2);
    }
}

#ifdef TRC_INTERNAL_H
trc_state trc_g;

void trc_cuda_fail(cudaError_t e, const char *call, const char *file, int line)
{
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, call, cudaGetErrorString(e));
    exit(2);
}

void trc_cublas_fail(cublasStatus_t s, const char *call, const char *file, int line)
{
    fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", file, line, call, (int)s);
    exit(2);
}

/* n elements of device memory (and 64 bytes of slack), filled with NaN bits so anything unwritten shows */
template <typename T>
static T *dev(size_t n)
{
    T *p = nullptr;
    cudaCheck(cudaMalloc((void **)&p, n * sizeof(T) + 64));
    cudaCheck(cudaMemset(p, 0xff, n * sizeof(T) + 64)); /* NaN poison */
    return p;
}

template <typename T>
static std::vector<T> get(const T *d, size_t n)
{
    std::vector<T> h(n);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

static float *put(const std::vector<float> &h)
{
    float *d = dev<float>(h.size());
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static tr_bf16 *put(const std::vector<tr_bf16> &h)
{
    tr_bf16 *d = dev<tr_bf16>(h.size());
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(tr_bf16), cudaMemcpyHostToDevice));
    return d;
}

/* bf16 programs' fc1 bias (docs/BF16.md): b rounded to bf16 in place (so that a float kernel given b computes with the
 * very values the bf16 bias holds), and those bf16 values */
static std::vector<tr_bf16> bias16(std::vector<float> &b)
{
    std::vector<tr_bf16> r(b.size());
    for (size_t j = 0; j < b.size(); j++) {
        r[j] = tr_f32_to_bf16(b[j]);
        b[j] = tr_bf16_to_f32(r[j]);
    }
    return r;
}

/* milliseconds per call of f on stream s, the mean of 20 after 3 warm-up calls (CUDA events) */
template <typename F>
static double time_ms(cudaStream_t s, F f)
{
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    for (int k = 0; k < 3; k++)
        f();
    cudaCheck(cudaEventRecord(a, s));
    for (int k = 0; k < 20; k++)
        f();
    cudaCheck(cudaEventRecord(b, s));
    cudaCheck(cudaEventSynchronize(b));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms / 20;
}
#endif

#ifndef TRC_INTERNAL_H
/* The checks without the runtime's internals (lnb_check, rows_check, decode_check): a checked CUDA call, device
 * buffers filled from the host or NaN-poisoned, and microseconds per call (CUDA events, 50 calls after 5) */
#define CK(call)                                                                                                    \
    do {                                                                                                            \
        cudaError_t e_ = (call);                                                                                    \
        if (e_ != cudaSuccess) {                                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                  \
            exit(2);                                                                                                \
        }                                                                                                           \
    } while (0)

template <typename T> static T *up(const std::vector<T> &h)
{
    T *d = nullptr;
    CK(cudaMalloc(&d, h.size() * sizeof(T)));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

[[maybe_unused]] static float *poisoned(size_t n)
{
    float *d = nullptr;
    CK(cudaMalloc(&d, n * sizeof(float)));
    CK(cudaMemset(d, 0xff, n * sizeof(float))); /* NaN: an unwritten element fails the comparison */
    return d;
}

template <class F> static float time_us(cudaStream_t s, F call)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++)
        call();
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < 50; i++)
        call();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1000.0f / 50.0f;
}
#endif

static int failures = 0;
static unsigned long long rng_state = 12345;

/* uniform in [lo, hi): a 64-bit LCG's top 24 bits */
static float frand(float lo, float hi)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (float)((rng_state >> 40) & 0xffffff) / (float)0x1000000;
}

static std::vector<float> rnd(size_t n, float lo, float hi)
{
    std::vector<float> v(n);
    for (auto &x : v)
        x = frand(lo, hi);
    return v;
}

#endif
