/*
 * emit.h - the emit stage: one printer per output file, each rendering the
 * baked tg_plan into a text buffer. Emitters decide nothing: every number they
 * print (roots, counts, offsets, shapes, byte totals) comes from the plan, so
 * the C code, the schedule dump and the manifest always agree with each other.
 */
#ifndef TG_EMIT_H
#define TG_EMIT_H

#include <stdbool.h>

#include "err.h"
#include "plan.h"
#include "strbuf.h"
#include "template.h"

/* Placeholders every template shares: VERSION, SPEC, NAME, P, Q, D. Returns the count written to vars[]. */
int tg_emit_common_vars(const tg_plan *pl, tg_tvar *vars, char (*store)[64]);

bool tg_emit_rank_c(const tg_plan *pl, int rank, tg_sb *out, tg_err *err);   /* rank_XXXX.c */
bool tg_emit_model_c(const tg_plan *pl, tg_sb *out, tg_err *err);            /* model.c */
bool tg_emit_ninja(const tg_plan *pl, const char *tessroot, tg_sb *out, tg_err *err); /* build.ninja */
bool tg_emit_manifest(const tg_plan *pl, tg_sb *out, tg_err *err);          /* manifest.json */
bool tg_emit_schedule_txt(const tg_plan *pl, tg_sb *out, tg_err *err);      /* schedule.txt */
bool tg_emit_launcher(const tg_plan *pl, tg_sb *out, tg_err *err);          /* run */

#endif
