/*
 * place_ref.h - the greedy placement rule of gen/place.h, stated directly
 * (place_ref.c): the reference that tg_place must equal exactly.
 */
#ifndef TT_PLACE_REF_H
#define TT_PLACE_REF_H

#include "place.h"

long long tt_align_up(long long elems); /* up to a multiple of TG_ALIGN_ELEMS */
int tt_live_together(const tg_place_item *x, const tg_place_item *y);
/* Sets every it[k].offset by the rule and returns the arena (aligned end of the highest item). Aborts when
 * out of memory. */
long long tt_place_reference(tg_place_item *it, int n);

#endif
