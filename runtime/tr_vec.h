/*
 * tr_vec.h - what the CPU kernels share to run at the machine's vector width
 * on the rank's threads, deterministically (docs/ARCHITECTURE.md, "CPU
 * kernels: threads and vectors").
 *
 * Vector width. The runtime is built for the baseline of its architecture
 * (portable binaries: a program built on a login node runs on any compute
 * node), so a hot loop is put in a function marked TR_VEC_CLONES: on x86-64
 * with GCC or clang the compiler emits an AVX2 and a baseline copy and the
 * loader picks one per machine (target_clones). The AVX2 copy has no FMA (the
 * runtime is built in ISO C mode, -ffp-contract=off), so elementwise kernels
 * give the same bits in both copies; a reduction (`omp simd reduction`) sums
 * in as many lanes as the copy's vectors hold, so its bits are fixed for a
 * machine, as OpenBLAS's GEMMs are (they too pick their kernel per CPU).
 *
 * Threads. A kernel splits its rows (or elements) into fixed slices with
 * tr_slice: thread t of n owns [lo, hi); every output element is computed by
 * exactly one thread with the same instructions in the same order whatever n
 * is, so results never depend on the thread count (tests/test_cpuk.c checks
 * it). OpenMP's thread count is the rank's cores (runtime/tr_launch.c sets
 * OMP_NUM_THREADS); small loops stay on one thread (TR_PAR_MIN elements).
 *
 * tr_vexpf: a vectorisable expf (Cephes' range reduction and degree-5
 * polynomial), no branches and no calls, so a loop over it vectorises. For
 * x in [-87.3, 88] its relative error against double exp is below 1.5e-7
 * (measured 8.1e-8, within 1.4 ulp; tests/test_cpuk.c sweeps the range); below
 * -87.3 it returns e^-87.3 (1.2e-38, the smallest normal float, instead of a
 * subnormal or 0), above 88 e^88; NaN gives NaN. Only bit casts, no
 * float-to-int conversion, so UBSan's float-cast-overflow has nothing to flag.
 */
#ifndef TR_VEC_H
#define TR_VEC_H

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__SANITIZE_ADDRESS__) &&          \
    !defined(TR_NO_CLONES)
#define TR_VEC_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TR_VEC_CLONES
#endif

#define TR_PAR_MIN 32768 /* elements below which a kernel stays on one thread */
/* The `if` of a kernel's `omp parallel` over rows x cols elements. */
#define TR_PAR(rows, cols) ((long long)(rows) * (long long)(cols) >= TR_PAR_MIN)
/* m*n*k up to which OpenBLAS runs a GEMM on one thread (65536 * GEMM_MULTITHREAD_THRESHOLD, 4 by default):
 * attention runs its per-head GEMMs on the rank's threads side by side only up to this size, so the threads
 * never call a BLAS that would start threads of its own (tr_attention_threads). */
#define TR_BLAS_ONE_THREAD 262144LL

/* Thread t of n owns [*lo, *hi) of [0, count): contiguous, fixed, in order. */
static inline void tr_slice(long count, int t, int n, long *lo, long *hi)
{
    *lo = count * t / n;
    *hi = count * (t + 1) / n;
}

static inline float tr_vexpf(float x)
{
    const float hi = 88.0f, lo = -87.3f; /* 2^127 and 2^-126: the scale below stays a normal float */
    x = x > hi ? hi : x;
    x = x < lo ? lo : x; /* NaN passes both unchanged */
    /* n = round(x / ln 2) by the 1.5 * 2^23 trick: t's low mantissa bits are n */
    const float magic = 12582912.0f;
    float t = x * 1.44269504088896341f + magic;
    float n = t - magic;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t tb;
    memcpy(&tb, &t, sizeof tb);
    uint32_t scale = (tb - 0x4B400000u + 127u) << 23; /* 2^n as a float's bits */
    float s;
    memcpy(&s, &scale, sizeof s);
    return p * s;
}

/* GeLU and its derivative in tr_math.h's form (x / (1 + exp(-2z)), z = sqrt(2/pi) (x + 0.044715 x^3)) with
 * tr_vexpf for expf, so the CPU kernels' loops over them vectorise (libm's expf is a call: one element at a time).
 * Within a few ulp of tr_gelu and tr_gelu_grad (tests/test_cpuk.c sweeps them); the CUDA kernels keep tr_math.h's. */
static inline float tr_vgelu(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    float z = k * (x + 0.044715f * x * x * x);
    return x / (1.0f + tr_vexpf(-2.0f * z));
}

static inline float tr_vgelu_grad(float x)
{
    const float k = 0.7978845608028654f;
    float z = k * (x + 0.044715f * x * x * x);
    float s = 1.0f / (1.0f + tr_vexpf(-2.0f * z));
    return s + x * s * (1.0f - s) * 2.0f * k * (1.0f + 3.0f * 0.044715f * x * x);
}

#endif
