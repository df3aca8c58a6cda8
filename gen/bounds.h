/*
 * bounds.h - what tessgen takes on: a spec it accepts is planned, printed and
 * written in bounded time and memory, or refused up front, naming the limit.
 *
 * The work of an output is its steps: every class program is printed in full
 * (C, CUDA, the schedule dumps), so time and bytes written grow with the steps
 * of all q*q class programs, and the memory tessgen holds with the steps of
 * one. Both are known before any class is planned in full: the steps of a
 * class grow by the same count with every layer, so planning class (0,0) with
 * one and with two layers gives them exactly for any depth. tg_bounds_work
 * refuses a spec beyond TG_MAX_CLASS_STEPS or TG_MAX_STEPS, with the depth
 * that would fit. (This is the one check outside spec.c: the spec's rules are
 * validated there; what a valid spec costs is the planner's to say.)
 *
 * The memory of a rank is the spec's memory_gib (default 80): after the first
 * pass, tg_bounds_memory refuses a plan whose largest arena does not fit, with
 * the figure, the deepest model that fits on this mesh, and the meshes with
 * the same rank count whose arenas fit.
 */
#ifndef TG_BOUNDS_H
#define TG_BOUNDS_H

#include <stdbool.h>

#include "err.h"
#include "plan.h"
#include "summary.h"

#define TG_MAX_CLASS_STEPS 1000000LL /* one class program: about 300 MB while it is planned */
#define TG_MAX_STEPS 40000000LL      /* all class programs: tens of GB of text at the most */

/* The steps of one class program of pl (every class has as many). */
long long tg_bounds_class_steps(const tg_plan *pl, tg_err *err);
/* Refuse a plan beyond the limits above, before anything is planned in full. */
bool tg_bounds_work(const tg_plan *pl, tg_err *err);
/* Refuse a plan whose largest arena (figs[], every class) exceeds the spec's memory_gib. */
bool tg_bounds_memory(const tg_plan *pl, const tg_class_fig *figs, tg_err *err);
/* "fits: the largest arena 48.6 GiB of memory_gib = 80" or "does NOT fit ...", for the summary. */
void tg_bounds_line(char *buf, size_t cap, const tg_plan *pl, const tg_class_fig *figs);

#endif
