/*
 * tt.h - the tiny test protocol shared by every C unit test.
 *
 * A test binary runs named cases. Each case prints exactly one line,
 * "ok - NAME" or "not ok - NAME: reason", and the binary exits non-zero if any
 * case failed. tests/run.sh counts these lines into the suite summary.
 *
 *   TT_CASE("mesh roundtrip q=3 d=2") {
 *       TT_CHECK(x == y, "x=%d y=%d", x, y);   // records the first failure
 *   }
 */
#ifndef TT_H
#define TT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A failure reason is cut to fit tt_reason on purpose. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static int tt_failed_cases;
static int tt_case_failed;
static char tt_reason[512];

static inline int tt_begin(void)
{
    tt_case_failed = 0;
    tt_reason[0] = '\0';
    return 1;
}

static inline void tt_end(const char *name)
{
    if (tt_case_failed) {
        tt_failed_cases++;
        printf("not ok - %s: %s\n", name, tt_reason);
    } else {
        printf("ok - %s\n", name);
    }
    fflush(stdout);
}

/* Run the braced body once as case NAME (a printf-style format is not allowed: pass a string). */
#define TT_CASE(name) \
    for (int tt_once_ = tt_begin(); tt_once_; tt_once_ = 0, tt_end(name))

#define TT_CHECK(cond, ...)                                                   \
    do {                                                                      \
        if (!(cond) && !tt_case_failed) {                                     \
            int tt_n_ = snprintf(tt_reason, sizeof tt_reason, "%s:%d: ",      \
                                 __FILE__, __LINE__);                         \
            snprintf(tt_reason + tt_n_, sizeof tt_reason - (size_t)tt_n_,      \
                     __VA_ARGS__);                                            \
            tt_case_failed = 1;                                               \
        }                                                                     \
    } while (0)

#define TT_EXIT() return tt_failed_cases ? 1 : 0

/* A seeded xorshift generator, the same sequence in every test binary and run: tt_rnd32 the next 32 bits,
 * tt_rndf a float uniform in [lo, hi) from 24 of them. */
static inline uint32_t tt_rnd32(void)
{
    static uint64_t state = 0x9e3779b97f4a7c15ull;
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (uint32_t)(state >> 16);
}
static inline float tt_rndf(float lo, float hi)
{
    return lo + (hi - lo) * (float)(tt_rnd32() & 0xffffff) / (float)0x1000000;
}

#endif
