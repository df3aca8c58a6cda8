/*
 * tr_synth.c - the synthetic value generator (formula in tr_synth.h).
 */
#include "tr_synth.h"

#include <string.h>

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return h;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

void tr_synth_block(const char *name, uint64_t seed, int64_t full_cols, int64_t r0, int64_t nr, int64_t c0,
                    int64_t nc, float *dst, int64_t ldd)
{
    const uint64_t golden = 0x9E3779B97F4A7C15ULL;
    uint64_t key = fnv1a(name) ^ (seed * golden);
    int ln_w = ends_with(name, ".ln_1.weight") || ends_with(name, ".ln_2.weight") || strcmp(name, "ln_f.weight") == 0;
    int ln_b = ends_with(name, ".ln_1.bias") || ends_with(name, ".ln_2.bias") || strcmp(name, "ln_f.bias") == 0;
    int input = strcmp(name, "input") == 0 || strcmp(name, "target") == 0;
    for (int64_t r = 0; r < nr; r++)
        for (int64_t cc = 0; cc < nc; cc++) {
            uint64_t e = (uint64_t)((r0 + r) * full_cols + c0 + cc);
            uint64_t z = key + (e + 1) * golden;
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
            z = z ^ (z >> 31);
            float u = (float)(z >> 40) * 0x1p-24f;
            float v = 2.0f * u - 1.0f;
            float val;
            if (input)
                val = v;
            else if (ln_w)
                val = 1.0f + v * 0.125f;
            else if (ln_b)
                val = v * 0.125f;
            else
                val = v * 0.0625f;
            dst[r * ldd + cc] = val;
        }
}
