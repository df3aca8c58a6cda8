/*
 * fingerprint.h - the schedule fingerprint: 16 hex digits that name exactly
 * the schedule an output runs.
 *
 * It is a 64-bit FNV-style hash over tessgen's version, the text of every template the
 * programs and their build are printed from (not the schedule.html viewer), every value of the spec that shapes the schedule (the spec's
 * path and name do not), and every class program in class order: each step's
 * kind, operands, shapes and literals, its stream, cross-stream wait and
 * signal (what the CUDA program orders), each buffer's name, shape, offset and
 * lifetime, each weight shard's pieces. The same spec through the same tessgen
 * gives the same fingerprint; a different schedule, or the same schedule
 * printed differently, gives another. Every generated program carries it: the
 * class files (checked against model.c at start), model.c, manifest.json,
 * schedule.txt and schedule.json, and a run prints it first.
 */
#ifndef TG_FINGERPRINT_H
#define TG_FINGERPRINT_H

#include "plan.h"

typedef struct tg_fp {
    unsigned long long h;
} tg_fp;

void tg_fp_init(tg_fp *fp, const tg_spec *spec);
void tg_fp_class(tg_fp *fp, const tg_class_plan *cp); /* every class, in class order */
void tg_fp_final(const tg_fp *fp, char out[17]);

#endif
