/*
 * place_compare.c - `ninja bench`'s memory-placement comparison: the buffers
 * of one real class plan (class (0,0) of a spec given on the command line)
 * placed by gen/place.c (segment tree over steps, O(B log S) list operations
 * per buffer) and by tests/place_ref.c (the same greedy rule with a scan of
 * every placed buffer per candidate, which is what gen/plan.c did before:
 * O(B^2) per buffer). Prints key=value lines: buffers, steps, both arenas,
 * whether every offset agrees, and both times (CPU seconds, one run each).
 *
 *   place_compare q d layers hidden heads ffn seq batch infer|train
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "place.h"
#include "place_ref.h"
#include "plan.h"
#include "tt_spec.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 10 || (strcmp(argv[9], "infer") && strcmp(argv[9], "train"))) {
        fprintf(stderr, "usage: place_compare q d layers hidden heads ffn seq batch infer|train\n");
        return 2;
    }
    int v[8];
    for (int k = 0; k < 8; k++)
        v[k] = atoi(argv[1 + k]);
    tg_spec s = tt_spec(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], !strcmp(argv[9], "train"));
    tg_plan pl;
    tg_plan_init(&s, &pl);
    tg_class_plan cp;
    tg_err err = {{0}, 0};
    if (!tg_plan_class(&pl, 0, 0, &cp, &err)) {
        fprintf(stderr, "place_compare: %s\n", err.msg);
        return 1;
    }
    size_t bytes = (size_t)cp.nbufs * sizeof(tg_place_item) + 1;
    tg_place_item *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b)
        return 1;
    for (int i = 0; i < cp.nbufs; i++)
        a[i] = (tg_place_item){cp.bufs[i].elems, cp.bufs[i].first, cp.bufs[i].last, cp.bufs[i].persistent, -1};
    memcpy(b, a, bytes - 1);
    long long arena_new = -1;
    double t0 = now();
    if (!tg_place(a, cp.nbufs, cp.nsteps, &arena_new, &err)) {
        fprintf(stderr, "place_compare: %s\n", err.msg);
        return 1;
    }
    double t1 = now();
    long long arena_ref = tt_place_reference(b, cp.nbufs);
    double t2 = now();
    int same = arena_new == arena_ref;
    for (int i = 0; i < cp.nbufs; i++)
        same &= a[i].offset == b[i].offset;
    printf("buffers=%d\nsteps=%d\narena_new_bytes=%lld\narena_old_bytes=%lld\noffsets_identical=%s\n"
           "place_new_seconds=%.6f\nplace_old_seconds=%.6f\n",
           cp.nbufs, cp.nsteps, 4 * arena_new, 4 * arena_ref, same ? "yes" : "no", t1 - t0, t2 - t1);
    free(a);
    free(b);
    tg_class_free(&cp);
    return same ? 0 : 1;
}
