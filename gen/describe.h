/*
 * describe.h - the words for steps and buffers: the one-line description
 * printed above each call in the generated code, in schedule.txt, --show and
 * schedule.json, and the comment on each buffer.
 *
 * A class plan holds no rank-specific text: a step stores the form of its
 * description (tg_desc), a static phrase and its operands, and the words are
 * made here from those and the coordinates of the rank that runs it (its row
 * block h = i + q*k, its group labels, the global rank of a root). With
 * c.k < 0 the text speaks for every rank of the class at once: h, depth and
 * roots are written in terms of k ("h=1+2k", "row(1,k)", "rank 3+4k").
 */
#ifndef TG_DESCRIBE_H
#define TG_DESCRIBE_H

#include <stddef.h>

#include "plan.h"

/* Step s as rank c (or, with c.k < 0, every rank of the class) runs it; returns buf. */
const char *tg_step_text(char *buf, size_t cap, const tg_plan *pl, const tg_class_plan *cp, tg_coord c,
                         const tg_step *s);
/* What buffer b holds for rank c ("{h}" in its description becomes the row block); returns buf. */
const char *tg_buf_text(char *buf, size_t cap, const tg_plan *pl, tg_coord c, const tg_buf *b);
/* The label of c's group of kind g: "row(1,0)", or "row(1,k)" with c.k < 0; returns buf. */
const char *tg_group_text(char *buf, size_t cap, const tg_plan *pl, tg_coord c, tg_group g);
/* The row block of c: "5", or "1+2k" with c.k < 0; returns buf. */
const char *tg_h_text(char *buf, size_t cap, const tg_plan *pl, tg_coord c);
/* The global ranks r0 + sk*k of the depths k, sk the mesh's depth stride (its placement): "5+4k", "4k", "2+k", "k". */
const char *tg_k_ranks_text(char *buf, size_t cap, const tg_mesh *m, int r0);

#endif
