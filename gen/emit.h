/*
 * emit.h - the emit stage: one printer per output file, each rendering the
 * baked tg_plan into a text buffer. Emitters decide nothing: every number they
 * print (roots, counts, offsets, shapes, byte totals) comes from the plan, so
 * the C code, the schedule dump and the manifest always agree with each other.
 */
#ifndef TG_EMIT_H
#define TG_EMIT_H

#include <stdbool.h>
#include <stddef.h>

#include "build_settings.h"
#include "err.h"
#include "plan.h"
#include "strbuf.h"
#include "template.h"

/* Placeholders every template shares: VERSION, SPEC, NAME, P, Q, D. Returns the count written to vars[]. */
int tg_emit_common_vars(const tg_plan *pl, tg_tvar *vars, char (*store)[64]);
/* The global ranks of the group of kind g holding c, in local order, between open and close: "{4,5}". */
void tg_emit_members(tg_sb *o, const tg_mesh *m, tg_group g, tg_coord c, const char *open, const char *close);

/* The tables every rank program carries (emit_rank_tables.c), shared by the C and CUDA emitters. */
const char *tg_emit_group_enum(tg_group g);     /* "TR_ROW", ... */
const char *tg_emit_kind_enum(tg_step_kind k);  /* "TR_K_GEMM", ... */
void tg_emit_params(tg_sb *o, const tg_rank_plan *rp);  /* rows of the tr_param table */
void tg_emit_step_info(tg_sb *o, const tg_step *s);     /* one row of the tr_step_info table */
/* The tr_rank_desc initialiser, every field in declaration order; null_ptr: "NULL" or "nullptr". */
void tg_emit_rank_desc(tg_sb *o, const tg_plan *pl, int rank, const char *null_ptr);

bool tg_emit_rank_c(const tg_plan *pl, int rank, tg_sb *out, tg_err *err);   /* rank_XXXX.c */
bool tg_emit_model_c(const tg_plan *pl, tg_sb *out, tg_err *err);            /* model.c */
/* The CUDA backend (emit_rank_cu.c): whether it is emitted, and with which nvcc and targets. */
typedef struct tg_cuda_opts {
    int enabled;       /* emit rank_XXXX.cu, kernels.cu, kernels.cuh and bin/model-cuda */
    char nvcc[1024];   /* the nvcc command build.ninja runs */
    char gencode[512]; /* -gencode flags from TESS_CUDA_ARCH (default sm_80 and sm_90) */
    char archs[128];   /* "sm_80 sm_90", for messages */
    char why[512];     /* when not enabled: why not */
} tg_cuda_opts;

/* Which backends to emit: the spec's `backends`, else TESS_BACKENDS, else cpu and, when nvcc is found,
 * cuda. A backend the spec or TESS_BACKENDS asks for that cannot run the plan is an error; an automatic
 * one is left out. note receives the line tessgen prints ("backends: cpu, cuda (...)"). */
bool tg_cuda_select(const tg_plan *pl, tg_cuda_opts *cu, char *note, size_t cap, tg_err *err);
bool tg_emit_rank_cu(const tg_plan *pl, int rank, tg_sb *out, tg_err *err);  /* rank_XXXX.cu */
bool tg_emit_kernels_cu(const tg_plan *pl, tg_sb *out, tg_err *err);         /* kernels.cu */
bool tg_emit_kernels_cuh(const tg_plan *pl, tg_sb *out, tg_err *err);        /* kernels.cuh */
/* The CUDA part of build.ninja (emit_ninja_cuda.c: settings, rules, objects, bin/model-cuda) and what it adds
 * to `default`. */
void tg_emit_ninja_cuda(const tg_plan *pl, const tg_cuda_opts *cu, const tg_build_settings *bs, tg_sb *rules,
                        tg_sb *defaults);

/* build.ninja, with the build settings of build_settings.h read from the environment */
bool tg_emit_ninja(const tg_plan *pl, const char *tessroot, const tg_cuda_opts *cu, tg_sb *out, tg_err *err);
bool tg_emit_manifest(const tg_plan *pl, tg_sb *out, tg_err *err);          /* manifest.json */
bool tg_emit_schedule_txt(const tg_plan *pl, tg_sb *out, tg_err *err);      /* schedule.txt */
bool tg_emit_launcher(const tg_plan *pl, tg_sb *out, tg_err *err);          /* run */
bool tg_emit_schedule_json(const tg_plan *pl, tg_sb *out, tg_err *err);     /* schedule.json (docs/SCHEDULE.md) */
bool tg_emit_schedule_html(const tg_plan *pl, tg_sb *out, tg_err *err);     /* schedule.html */
bool tg_emit_summary_txt(const tg_plan *pl, tg_sb *out, tg_err *err);       /* summary.txt (inspect.c) */

#endif
