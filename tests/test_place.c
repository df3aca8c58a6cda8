/*
 * test_place.c - gen/place.c against a direct statement of the greedy rule.
 *
 * The reference (place_ref.c) is the rule written the obvious way, at O(B^2)
 * per buffer. tg_place must give exactly its offsets and arena on random
 * instances of many shapes: few and many distinct sizes, short and long
 * lifetimes, persistent buffers, one step, many steps; and on the buffers of
 * real class plans (inference and training, several meshes), where the
 * offsets the planner stored must be the reference's. Every result is also
 * checked for soundness on its own (no two buffers live together share
 * bytes, offsets aligned) and against the lower bound (the arena is at least
 * the aligned bytes live at the busiest step).
 */
#include <stdlib.h>
#include <string.h>

#include "place.h"
#include "plan.h"
#include "place_ref.h"
#include "tt.h"
#include "tt_spec.h"

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
            live[s] += tt_align_up(it[i].elems);
        for (int j = i + 1; j < n; j++)
            TT_CHECK(!(tt_live_together(&it[i], &it[j]) && it[i].offset < it[j].offset + it[j].elems &&
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
                long long ref = tt_place_reference(a, n), arena = -1;
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
    /* real plans: every class of a few meshes, inference and training */
    static const int meshes[][3] = {{1, 1, 0}, {2, 1, 0}, {2, 2, 1}, {3, 1, 1}, {4, 2, 0}, {2, 3, 1}};
    for (size_t m = 0; m < sizeof meshes / sizeof meshes[0]; m++) {
        int q = meshes[m][0], d = meshes[m][1], train = meshes[m][2];
        char name[128];
        snprintf(name, sizeof name, "place: the planner's offsets equal the greedy rule, every class of [%d,%d,%d] %s",
                 q, q, d, train ? "training" : "inference");
        TT_CASE(name) {
            tg_spec s = tt_spec(q, d, 3, 48, 12, 192, 8, 2 * q * d, train);
            tg_plan pl;
            tg_plan_init(&s, &pl);
            for (int i = 0; i < q && !tt_case_failed; i++)
                for (int j = 0; j < q && !tt_case_failed; j++) {
                    tg_class_plan cp;
                    tg_err err = {{0}, 0};
                    TT_CHECK(tg_plan_class(&pl, i, j, &cp, &err), "plan (%d,%d): %s", i, j, err.msg);
                    if (tt_case_failed)
                        break;
                    tg_place_item *it = malloc((size_t)cp.nbufs * sizeof *it + 1);
                    for (int b = 0; b < cp.nbufs; b++)
                        it[b] = (tg_place_item){cp.bufs[b].elems, cp.bufs[b].first, cp.bufs[b].last,
                                                cp.bufs[b].persistent, -1};
                    long long ref = tt_place_reference(it, cp.nbufs);
                    TT_CHECK(ref == cp.arena_elems, "class (%d,%d): arena %lld elements, the rule gives %lld", i, j,
                             cp.arena_elems, ref);
                    for (int b = 0; b < cp.nbufs && !tt_case_failed; b++)
                        TT_CHECK(it[b].offset == cp.bufs[b].offset, "class (%d,%d): %s at %lld, the rule puts it at %lld",
                                 i, j, cp.bufs[b].name, cp.bufs[b].offset, it[b].offset);
                    check_sound(it, cp.nbufs, cp.nsteps, ref, name);
                    free(it);
                    tg_class_free(&cp);
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
