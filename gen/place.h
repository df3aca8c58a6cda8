/*
 * place.h - memory placement: offsets in one arena for buffers with known
 * lifetimes, such that buffers live at the same time never share bytes.
 *
 * The rule is greedy by size (DESIGN.md section 4's "lifetimes -> offsets"):
 * persistent buffers first, in the order given (they pack at the bottom),
 * then the others largest first (ties: lower index first), each at the lowest
 * 64-byte aligned offset where it collides with no already placed buffer whose
 * lifetime overlaps its own. On the plans tessgen makes this reaches the
 * lower bound (the bytes live at the busiest step) or comes within an
 * alignment pad of it.
 *
 * Placing buffer b needs the union of the address ranges of every placed
 * buffer live during [b.first, b.last]. A naive scan of the placed buffers is
 * O(B) per buffer and the candidate search made it O(B^2) per buffer; in a
 * 96-layer training plan thousands of saved activations are live together.
 * place.c instead keeps a segment tree over steps whose nodes hold merged
 * (sorted, disjoint) address intervals, so a query reads O(log S) short
 * lists and an insertion updates O(log S) of them (S steps). The result is
 * exactly the greedy rule's: tests/test_place.c checks it against a direct
 * implementation on random and real plans.
 */
#ifndef TG_PLACE_H
#define TG_PLACE_H

#include <stdbool.h>

#include "err.h"

#define TG_ALIGN_ELEMS 16 /* offsets are multiples of 16 elements: 64 bytes of float */

typedef struct tg_place_item {
    long long elems;  /* size in elements (> 0) */
    int first, last;  /* live steps, inclusive, 0 <= first <= last < nsteps */
    int persistent;   /* placed first, in index order */
    long long offset; /* out: elements from the arena start */
} tg_place_item;

/* Place n items whose lifetimes lie in steps 0..nsteps-1; *arena receives the aligned end of the
 * highest item. Fails only when out of memory. */
bool tg_place(tg_place_item *items, int n, int nsteps, long long *arena, tg_err *err);

#endif
