/*
 * place_ref.c - memory placement's greedy rule written the obvious way, as a
 * reference for gen/place.c (tests/test_place.c) and as the old placement in
 * `ninja bench` (bench/place_compare.c): persistent first in order, then
 * largest first; each buffer at the lowest offset among 0 and the aligned ends
 * of placed buffers live at the same time that collides with none of them.
 * O(B) candidates times O(B) collision checks per buffer: O(B^3) in all, which
 * is what gen/plan.c did before the segment tree of gen/place.c.
 */
#include "place_ref.h"

#include <stdlib.h>

long long tt_align_up(long long x)
{
    return (x + TG_ALIGN_ELEMS - 1) / TG_ALIGN_ELEMS * TG_ALIGN_ELEMS;
}

int tt_live_together(const tg_place_item *x, const tg_place_item *y)
{
    return x->first <= y->last && y->first <= x->last;
}

long long tt_place_reference(tg_place_item *it, int n)
{
    int *ord = malloc((size_t)n * sizeof *ord + 1), *placed = malloc((size_t)n * sizeof *placed + 1);
    if (!ord || !placed)
        abort();
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
            long long off = c < 0 ? 0 : tt_align_up(it[placed[c]].offset + it[placed[c]].elems);
            if (c >= 0 && !tt_live_together(&it[placed[c]], bf))
                continue;
            if (best >= 0 && off >= best)
                continue;
            int ok = 1;
            for (int o = 0; o < np && ok; o++) {
                const tg_place_item *y = &it[placed[o]];
                if (tt_live_together(y, bf) && off < y->offset + y->elems && y->offset < off + bf->elems)
                    ok = 0;
            }
            if (ok)
                best = off;
        }
        bf->offset = best;
        placed[np++] = ord[k];
        if (tt_align_up(best + bf->elems) > top)
            top = tt_align_up(best + bf->elems);
    }
    free(ord);
    free(placed);
    return top;
}

