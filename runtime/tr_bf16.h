/*
 * tr_bf16.h - bfloat16 <-> float32 conversion of single values, for the file
 * readers and writers (tr_safetensors.c). Header-only (static inline): the
 * generated build lists the runtime's .c files, and this needs none.
 *
 * bf16 is the high 16 bits of an IEEE float32 (sign, 8 exponent bits, 7
 * fraction bits), so bf16 -> f32 is exact: the 16 bits shifted up, the low
 * half zero (subnormals, infinities and NaN payloads included).
 *
 * f32 -> bf16 rounds to nearest, ties to even, on the bits: add 0x7fff plus
 * the lowest kept bit, keep the high half. Infinities stay infinities. A NaN
 * stays a NaN of the same sign (its quiet bit is set, so a signalling NaN
 * whose payload lies only in the dropped bits cannot turn into an infinity).
 * A finite value whose magnitude rounds past the largest finite bf16
 * (0x7f7f = 3.3895e38, i.e. |x| >= 0x7f7f8000 = 3.3961e38) becomes an
 * infinity; tr_bf16_overflows() tells which values do, so a writer can refuse
 * them (tr_st_write_atomic does: docs/TRAINING.md "File dtypes").
 */
#ifndef TR_BF16_H
#define TR_BF16_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t tr_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* bf16 bits -> float32, exact. */
static inline float tr_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* float32 -> bf16 bits, round to nearest, ties to even; NaN stays NaN, inf stays inf. */
static inline uint16_t tr_f32_to_bf16(float x)
{
    uint32_t u = tr_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep sign and high payload, set the quiet bit */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u); /* cannot wrap: |x| <= inf leaves headroom below 2^32 */
    return (uint16_t)(u >> 16);
}

/* Is x finite but rounded to an infinity by tr_f32_to_bf16? */
static inline bool tr_bf16_overflows(float x)
{
    uint32_t a = tr_f32_bits(x) & 0x7fffffffu;
    return a < 0x7f800000u && (tr_f32_to_bf16(x) & 0x7fffu) == 0x7f80u;
}

#endif
