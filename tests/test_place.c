/*
 * test_place.c - gen/place.c against a direct statement of the greedy rule.
 *
 * The reference below is the rule written the obvious way (persistent first
 * in order, then largest first; each buffer at the lowest offset among 0 and
 * the aligned ends of placed buffers live at the same time that collides with
 * none of them), at O(B^2) per buffer. tg_place must give exactly its offsets
 * and arena on random instances of many shapes: few and many distinct sizes,
 * short and long lifetimes, persistent buffers, one step, many steps. Every
 * result is also checked for soundness on its own (no two buffers live
 * together share bytes, offsets aligned) and against the lower bound (the
 * arena is at least the aligned bytes live at the busiest step).
 */
#include <stdlib.h>
#include <string.h>

#include "place.h"
#include "tt.h"

static long long align_up(long long x)
{
    return (x + TG_ALIGN_ELEMS - 1) / TG_ALIGN_ELEMS * TG_ALIGN_ELEMS;
}

static int live_together(const tg_place_item *x, const tg_place_item *y)
{
    return x->first <= y->last && y->first <= x->last;
}

/* The greedy rule, directly. */
static long long reference(tg_place_item *it, int n)
{
    int *ord = malloc((size_t)n * sizeof *ord), *placed = malloc((size_t)n * sizeof *placed);
    int np = 0;
    for (int i = 0; i < n; i++)
        ord[i] = i;
    for (int a = 1; a < n; a++) /* stable insertion sort by (persistent first, then size desc) */
        for (int b = a; b > 0; b--) {
            const tg_place_item *x = &it[ord[b - 1]], *y = &it[ord[b]];
            int swap = (!x->persistent && y->persistent) ||
                       (!x->persistent && !y->persistent && x->elems < y->elems);
            if (!swap)
                break;
            int t = ord[b - 1];
            ord[b - 1] = ord[b];
            ord[b] = t;
        }
    long long top = 0;
    for (int k = 0; k < n; k++) {
        tg_place_item *bf = &it[ord[k]];
        long long best = -1;
        for (int c = -1; c < np; c++) {
            long long off = c < 0 ? 0 : align_up(it[placed[c]].offset + it[placed[c]].elems);
            if (c >= 0 && !live_together(&it[placed[c]], bf))
                continue;
            if (best >= 0 && off >= best)
                continue;
            int ok = 1;
            for (int o = 0; o < np && ok; o++) {
                const tg_place_item *y = &it[placed[o]];
                if (live_together(y, bf) && off < y->offset + y->elems && y->offset < off + bf->elems)
                    ok = 0;
            }
            if (ok)
                best = off;
        }
        bf->offset = best;
        placed[np++] = ord[k];
        if (align_up(best + bf->elems) > top)
            top = align_up(best + bf->elems);
    }
    free(ord);
    free(placed);
    return top;
}

static unsigned long long rng = 88172645463325252ULL;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* A random instance: nsizes distinct sizes, lifetimes up to maxlen steps, some persistent. */
static void make(tg_place_item *it, int n, int steps, int nsizes, int maxlen, int pers_pct)
{
    long long sizes[16];
    for (int s = 0; s < nsizes; s++)
        sizes[s] = 1 + rnd(300);
    for (int i = 0; i < n; i++) {
        it[i].elems = sizes[rnd((unsigned)nsizes)];
        it[i].persistent = (int)rnd(100) < pers_pct;
        if (it[i].persistent) {
            it[i].first = 0;
            it[i].last = steps - 1;
        } else {
            it[i].first = (int)rnd((unsigned)steps);
            int len = (int)rnd((unsigned)maxlen);
            it[i].last = it[i].first + len < steps ? it[i].first + len : steps - 1;
        }
        it[i].offset = -1;
    }
}

static void check_sound(const tg_place_item *it, int n, int steps, long long arena, const char *label)
{
    long long *live = calloc((size_t)steps, sizeof *live), peak = 0;
    for (int i = 0; i < n; i++) {
        TT_CHECK(it[i].offset >= 0 && it[i].offset % TG_ALIGN_ELEMS == 0, "%s: item %d offset %lld", label, i,
                 it[i].offset);
        TT_CHECK(it[i].offset + it[i].elems <= arena, "%s: item %d ends past the arena", label, i);
        for (int s = it[i].first; s <= it[i].last; s++)
            live[s] += align_up(it[i].elems);
        for (int j = i + 1; j < n; j++)
            TT_CHECK(!(live_together(&it[i], &it[j]) && it[i].offset < it[j].offset + it[j].elems &&
                       it[j].offset < it[i].offset + it[i].elems),
                     "%s: items %d and %d are live together and share bytes", label, i, j);
    }
    for (int s = 0; s < steps; s++)
        peak = live[s] > peak ? live[s] : peak;
    TT_CHECK(arena >= peak, "%s: arena %lld below the live peak %lld", label, arena, peak);
    free(live);
}

int main(void)
{
    static const struct {
        const char *name;
        int n, steps, nsizes, maxlen, pers;
    } kinds[] = {
        {"place: equals the greedy rule, few sizes, short lives", 200, 300, 3, 10, 5},
        {"place: equals the greedy rule, many sizes, long lives", 200, 100, 16, 100, 10},
        {"place: equals the greedy rule, nested long lives", 150, 1000, 4, 1000, 0},
        {"place: equals the greedy rule, one step", 50, 1, 5, 1, 20},
        {"place: equals the greedy rule, all persistent", 40, 10, 4, 10, 100},
        {"place: equals the greedy rule, steps not a power of two", 300, 777, 6, 60, 3},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        TT_CASE(kinds[k].name) {
            for (int rep = 0; rep < 20 && !tt_case_failed; rep++) {
                int n = kinds[k].n, steps = kinds[k].steps;
                tg_place_item *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
                make(a, n, steps, kinds[k].nsizes, kinds[k].maxlen, kinds[k].pers);
                memcpy(b, a, (size_t)n * sizeof *a);
                long long ref = reference(a, n), arena = -1;
                tg_err err = {{0}, 0};
                TT_CHECK(tg_place(b, n, steps, &arena, &err), "tg_place failed: %s", err.msg);
                TT_CHECK(arena == ref, "rep %d: arena %lld, the rule gives %lld", rep, arena, ref);
                for (int i = 0; i < n; i++)
                    TT_CHECK(a[i].offset == b[i].offset, "rep %d: item %d at %lld, the rule puts it at %lld", rep, i,
                             b[i].offset, a[i].offset);
                check_sound(b, n, steps, arena, kinds[k].name);
                free(a);
                free(b);
            }
        }
    }
    TT_CASE("place: no buffers gives an empty arena") {
        long long arena = -1;
        tg_err err = {{0}, 0};
        TT_CHECK(tg_place(NULL, 0, 5, &arena, &err) && arena == 0, "arena %lld", arena);
    }
    TT_EXIT();
}
