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
#include "describe.h"
#include "plan.h"
#include "strbuf.h"
#include "template.h"

/* Placeholders every template shares: VERSION, SPEC, NAME, P, Q, D, MESH ("[q,q,d]" or "megatron p=N"), SCHEME
 * (0 tesseract, 1 megatron). Returns the count written to vars[] (TG_EMIT_COMMON_VARS); it fills store[0] ..
 * store[TG_EMIT_COMMON_STORE - 1], so a caller's own values start at store[TG_EMIT_COMMON_STORE]. */
#define TG_EMIT_COMMON_VARS 8
#define TG_EMIT_COMMON_STORE 5
int tg_emit_common_vars(const tg_plan *pl, tg_tvar *vars, char (*store)[64]);
/* The global ranks of the group of kind g holding c, in local order, between open and close: "{4,5}". */
void tg_emit_members(tg_sb *o, const tg_mesh *m, tg_group g, tg_coord c, const char *open, const char *close);

/* A class program's file base name: "rank_i1_j2" (rank_i1_j2.c, rank_i1_j2.cu, bin/cpu/rank_i1_j2). */
void tg_class_name(char *buf, size_t cap, int i, int j);
/* The file name of class number c (tg_plan_class_n): rank_iI_jJ, or rank_sS_iI_jJ with pipeline stages. */
void tg_class_name_n(char *buf, size_t cap, const tg_plan *pl, int c);
void tg_class_name_cp(char *buf, size_t cap, const tg_plan *pl, const tg_class_plan *cp);
/* Who runs a class program: "rank 3 of 4, coordinates (i=1, j=1, k=0)", or for d > 1
 * "ranks 3+4k of 8 for k = 0..1 (3, 7), coordinates (i=1, j=1, k)". */
void tg_class_who(tg_sb *o, const tg_plan *pl, const tg_class_plan *cp);
/* Pipeline stages: the world rank of stage s's rank 0 (stage-major numbering, s*q*q*d; 0 without stages). The
 * listings (schedule.txt, schedule.json, manifest.json, the class files) add it to the in-group rank. */
int tg_stage_rank0(const tg_plan *pl, int stage);

/* A class program is printed as one C function per run of steps of one phase and one layer (fwd_L3,
 * bwd_L3, opt_all), so a compiler never meets one function of a whole deep model, and the phase
 * functions call them in order. */
typedef struct tg_segment {
    tg_phase phase;
    int layer;       /* -1 for steps outside any layer (the optimizer) */
    int first, last; /* step indices, inclusive */
} tg_segment;
int tg_segments(const tg_class_plan *cp, tg_segment **out); /* count, -1 out of memory; *out: free() it */
void tg_segment_name(char *buf, size_t cap, const tg_segment *sg); /* "fwd_L3", "bwd_L0", "opt_all" */
/* A step's code `body` (lines of 4-space-indented statements) into o; a step that runs on the last micro-batch
 * only (tg_step.last_mb) inside `if (tr_mb(c) == mb - 1) { ... }`, indented one more level. */
void tg_emit_step_body(tg_sb *o, const tg_plan *pl, const tg_step *s, const tg_sb *body);
/* "float *const name = A + offset; comment" for each buffer that steps first..last name (uses, when not
 * NULL, says which slots the printed calls name; it gets first, the range's first step: a call there may name the
 * buffers of a later step it runs, the CUDA backend's row kernels), in plan order; arena: "rank's", "device". */
bool tg_emit_buffers(tg_sb *o, const tg_plan *pl, const tg_class_plan *cp, tg_coord co, int first, int last,
                     bool (*uses)(const tg_class_plan *cp, const tg_step *s, int slot, int first), const char *arena);

/* The tables every rank program carries (emit_rank_tables.c), shared by the C and CUDA emitters. */
const char *tg_emit_group_enum(tg_group g);     /* "TR_ROW", ... */
const char *tg_emit_kind_enum(tg_step_kind k);  /* "TR_K_GEMM", ... */
void tg_emit_params(tg_sb *o, const tg_class_plan *cp); /* rows of the tr_param table */
void tg_emit_step_info(tg_sb *o, const tg_step *s);     /* one row of the tr_step_info table */
/* The optimizer segment (steps first..last, every one an AdamW step) as the static tr_adamw_tensor table that both
 * backends' multi-tensor AdamW take, one commented row per step, named `var`. False (err set) when a step there is
 * not an AdamW step or waits for the other stream (the phase opens by joining the streams, so none does). */
bool tg_emit_adamw_table(tg_sb *o, const tg_plan *pl, const tg_class_plan *cp, tg_coord co, int first, int last,
                         const char *var, tg_err *err);
/* The rows of the class's ranks (tr_rank_row: rank, k, io_r0, colors, keys), k = 0..d-1. */
void tg_emit_rank_rows(tg_sb *o, const tg_plan *pl, const tg_class_plan *cp);
/* The tr_class_desc initialiser, every field in declaration order; null_ptr: "NULL" or "nullptr". */
/* The language model's tr_lm_class definition (nothing without a vocabulary); linkage: "" for C, "extern \"C\" " for
 * the CUDA rank files (C++). */
void tg_emit_lm_desc(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, const char *linkage);
void tg_emit_class_desc(tg_sb *o, const tg_plan *pl, const tg_class_plan *cp, const char *null_ptr);
/* A pipeline stage's program part (mesh.pp > 1; docs/TRAINING.md "Pipeline stages"): its stash table, pipe_step (the
 * proved schedule unrolled into tr_pipe_* calls) and tr_pipe_class; linkage as tg_emit_lm_desc. False (err set) when
 * the schedule does not build or prove, or the class's blocks are not what a stage exchanges. */
bool tg_emit_pipe(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, const char *linkage, tg_err *err);

/* rank_iI_jJ.c: the program of every rank (i, j, k) of class cp */
bool tg_emit_class_c(const tg_plan *pl, const tg_class_plan *cp, tg_sb *out, tg_err *err);
/* The header placeholders of a class program (C and CUDA): VERSION..D of tg_emit_common_vars, then I, J, H,
 * T, C, ROWS, COLS, ARENA_ELEMS, ARENA_BYTES, WEIGHT_BYTES, RECV_BYTES, RECV_ROW, RECV_COL, NPARAMS, NSTEPS,
 * FINGERPRINT, FILE and WHO (its text in who). store needs 32 entries; returns the count. */
int tg_emit_class_vars(const tg_plan *pl, const tg_class_plan *cp, tg_tvar *vars, char (*store)[64], tg_sb *who);
bool tg_emit_model_c(const tg_plan *pl, tg_sb *out, tg_err *err);            /* model.c */
/* The CUDA backend (emit_rank_cu.c): whether it is emitted, and with which nvcc and targets. */
typedef struct tg_cuda_opts {
    int enabled;       /* emit rank_iI_jJ.cu, kernels.cu, kernels.cuh and bin/model-cuda */
    char nvcc[1024];   /* the nvcc command build.ninja runs */
    char gencode[512]; /* -gencode flags from TESS_CUDA_ARCH (default sm_80 and sm_90) */
    char archs[128];   /* "sm_80 sm_90", for messages */
    char include[1024]; /* the CUDA headers (cuda_runtime.h) for compiling the class programs with the host
                         * compiler alone (they hold no device code); "" when not found: nvcc compiles them */
    char why[512];     /* when not enabled: why not */
} tg_cuda_opts;

/* Which backends to emit: the spec's `backends`, else TESS_BACKENDS, else cpu and, when nvcc is found,
 * cuda. unsupported: NULL when the CUDA backend can run every class (tg_cuda_supports), else why not. A
 * backend the spec or TESS_BACKENDS asks for that cannot run the plan is an error; an automatic one is
 * left out. note receives the line tessgen prints ("backends: cpu, cuda (...)"). */
bool tg_cuda_select(const tg_plan *pl, const char *unsupported, tg_cuda_opts *cu, char *note, size_t cap,
                    tg_err *err);
bool tg_emit_class_cu(const tg_plan *pl, const tg_class_plan *cp, tg_sb *out, tg_err *err); /* rank_iI_jJ.cu */
/* The fused-kernel instances that a set of class programs calls (kernels.cu instantiates exactly these). */
typedef struct tg_kernels tg_kernels;
tg_kernels *tg_kernels_new(void);
bool tg_kernels_add(tg_kernels *ks, const tg_class_plan *cp); /* false: out of memory */
void tg_kernels_free(tg_kernels *ks);
bool tg_emit_kernels_cu(const tg_plan *pl, const tg_kernels *ks, tg_sb *out, tg_err *err); /* kernels.cu */
/* Can the CUDA backend run every step of cp? Else err names the first step it cannot. */
bool tg_cuda_supports(const tg_class_plan *cp, tg_err *err);
bool tg_emit_kernels_cuh(const tg_plan *pl, tg_sb *out, tg_err *err);        /* kernels.cuh */
/* The CUDA part of build.ninja (emit_ninja_cuda.c: settings, rules, objects, bin/model-cuda) and what it adds
 * to `default`. */
void tg_emit_ninja_cuda(const tg_plan *pl, const tg_cuda_opts *cu, const tg_build_settings *bs, tg_sb *rules,
                        tg_sb *defaults);

/* build.ninja, with the build settings of build_settings.h read from the environment */
bool tg_emit_ninja(const tg_plan *pl, const char *tessroot, const tg_cuda_opts *cu, tg_sb *out, tg_err *err);
/* The schedule dumps. Per class, while its plan is held: schedule/rank_iI_jJ.txt, .json, and .js (the
 * JSON wrapped for schedule.html: tg_emit_class_js(out, json)); its shards for the manifest and its layer-0
 * shards for the index's block map, appended to texts that are printed at the end. */
bool tg_emit_class_txt(const tg_plan *pl, const tg_class_plan *cp, tg_sb *out, tg_err *err);
bool tg_emit_class_json(const tg_plan *pl, const tg_class_plan *cp, tg_sb *out, tg_err *err);
void tg_emit_class_js(tg_sb *out, const tg_sb *json);
void tg_emit_manifest_class(const tg_plan *pl, const tg_class_plan *cp, tg_sb *classes);
void tg_emit_blockmap_class(tg_sb *blockmap, const tg_class_plan *cp);
/* The files that cover every rank, from every class's figures (summary.h) and the texts above. */
struct tg_class_fig;
bool tg_emit_manifest(const tg_plan *pl, const tg_sb *classes, tg_sb *out, tg_err *err); /* manifest.json */
bool tg_emit_schedule_txt(const tg_plan *pl, const struct tg_class_fig *figs, tg_sb *out, tg_err *err);
bool tg_emit_schedule_json(const tg_plan *pl, const struct tg_class_fig *figs, const tg_sb *blockmap, tg_sb *out,
                           tg_err *err); /* schedule.json, the index (docs/SCHEDULE.md) */
bool tg_emit_schedule_html(const tg_plan *pl, const tg_sb *index_json, tg_sb *out, tg_err *err); /* schedule.html */
bool tg_emit_launcher(const tg_plan *pl, tg_sb *out, tg_err *err);                                /* run */

#endif
