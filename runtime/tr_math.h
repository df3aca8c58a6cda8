/*
 * tr_math.h - scalar arithmetic of the fused kernels, written once so the CPU
 * backend and (later) CUDA kernels compute the same thing. TR_HD marks a
 * function usable on host and device.
 */
#ifndef TR_MATH_H
#define TR_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define TR_HD __host__ __device__
#else
#define TR_HD
#endif

/* GeLU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
 * Computed through the identity 0.5 (1 + tanh(z)) = 1 / (1 + exp(-2z)): one expf
 * instead of tanhf (several times faster on the CPU), the same function. For
 * very negative x, exp overflows to inf and the result is -0, as it should be. */
static inline TR_HD float tr_gelu(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    float z = k * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * z));
}

/* d GeLU(x) / dx for the form above: with s = 1/(1 + exp(-2z)), GeLU = x s and
 * dGeLU/dx = s + x s (1 - s) 2 dz/dx, dz/dx = k (1 + 3 * 0.044715 x^2). */
static inline TR_HD float tr_gelu_grad(float x)
{
    const float k = 0.7978845608028654f;
    float z = k * (x + 0.044715f * x * x * x);
    float s = 1.0f / (1.0f + expf(-2.0f * z));
    return s + x * s * (1.0f - s) * 2.0f * k * (1.0f + 3.0f * 0.044715f * x * x);
}

/* Layernorm of one element given the full-row sum and sum of squared deviations. */
static inline TR_HD float tr_ln(float x, float rowsum, float sqdev, float inv_n, float eps, float g, float b)
{
    float mean = rowsum * inv_n;
    float rstd = 1.0f / sqrtf(sqdev * inv_n + eps);
    return (x - mean) * rstd * g + b;
}

#endif
