/*
 * spec.h - the declare stage: a model spec file, run in a sandboxed Lua state
 * and copied into a plain C struct. All validation of user input lives in
 * spec.c (the name key's rule, shared with machine files, in luaval.c);
 * everything downstream (mesh, plan, emitters) may assume a tg_spec
 * that tg_spec_load accepted is consistent: every divisibility rule of
 * DESIGN.md holds and every per-rank element count fits in an int.
 *
 * The spec file returns a table:
 *   return {
 *     name  = "gpt2-tiny",                 -- optional, default: file stem; [A-Za-z0-9_.-]+
 *     scheme = "tesseract",                -- optional: "tesseract" (default) or "megatron"
 *     mesh  = { q = 2, d = 2 },            -- tesseract: q required, d optional (default 1),
 *                                          -- placement optional: "row" (default), "col" or "dep" (mesh.h)
 *                                          -- pp optional (default 1): pipeline stages, each a [q,q,d] group
 *                                          -- (docs/TRAINING.md "Pipeline stages"; gen/pipe.h)
 *                                          -- megatron: mesh = { p = 4 } (q and d refused)
 *     model = { layers = 2, hidden = 64, heads = 4, ffn = 256,
 *               seq = 16, batch = 4, eps = 1e-5,     -- eps optional (default 1e-5)
 *               vocab = 50257, positions = 1024 },   -- optional: the whole GPT-2 (docs/MODEL.md);
 *                                          -- tie = true optional (false refused: only the tied head);
 *                                          -- vocab_align = 64 optional (default 1): each rank's vocab
 *                                          -- block padded to a multiple of it (tensor cores)
 *     dtype = "fp32",                      -- optional, default "fp32"; or "bf16" (docs/BF16.md)
 *     attention = "cudnn",                 -- optional: "cublas" or "cudnn" (bf16, head dim 8k <= 64, not
 *                                          -- generate); default "cudnn" where allowed, else "cublas" (docs/CUDA.md)
 *     epilogues = true,                    -- optional, default true; false: no cuBLASLt epilogues (docs/CUDA.md)
 *     mode  = "train",                     -- optional, "infer" (default) or "train"
 *     optimizer = { lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01,
 *                   warmup = 0, decay_steps = 0, lr_min = 0, clip = 0 },  -- every key optional
 *     backends = { "cpu", "cuda" },        -- optional; default: TESS_BACKENDS, else cpu (+ cuda if nvcc found)
 *     memory_gib = 80,                     -- optional; the memory of one rank: every arena must fit
 *     pipeline = { microbatches = 4 },     -- optional, mode = "train" only: gradient accumulation over m
 *                                          -- micro-batches; m divides batch/(q*d) (tesseract scheme only);
 *                                          -- with mesh.pp = S > 1 also layers = { n0, .., nS-1 } (optional,
 *                                          -- default as even as possible) and schedule = "1f1b" | "gpipe"
 *     recompute = "full",                  -- optional, mode = "train" only: "none" (default), "full" or N: the
 *                                          -- backward recomputes the first N layers' forward (tesseract scheme)
 *   }
 */
#ifndef TG_SPEC_H
#define TG_SPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "mesh.h"

typedef enum tg_dtype { TG_FP32 = 0, TG_BF16 = 1 } tg_dtype; /* docs/BF16.md */
/* spec key attention: the CUDA backend's attention path (docs/CUDA.md). The plan follows it on both backends (with
 * "cudnn" the backward keeps the bf16 Q, K, V and takes the QKV bias gradient from bf16 dQ, dK, dV, as cuDNN does) */
typedef enum tg_attention { TG_ATTN_CUBLAS = 0, TG_ATTN_CUDNN = 1 } tg_attention;
typedef enum tg_decode_layout { TG_DECODE_AUTO = 0, TG_DECODE_SUMMA = 1, TG_DECODE_STATIONARY = 2 } tg_decode_layout;
typedef enum tg_mode { TG_INFER = 0, TG_TRAIN = 1, TG_GENERATE = 2 } tg_mode; /* generate: docs/GENERATE.md */
/* pipeline.schedule (docs/TRAINING.md "Pipeline stages"): one forward, one backward (default) or all forwards first */
typedef enum tg_pipe_sched { TG_PIPE_1F1B = 0, TG_PIPE_GPIPE = 1 } tg_pipe_sched;
#define TG_MAX_STAGES 256 /* mesh.pp at most */
/* Backends to emit (spec key backends), as bits; "cpu" is always among them when the key is given. */
enum { TG_BACKEND_CPU = 1, TG_BACKEND_CUDA = 2 };

/* AdamW hyperparameters (spec key optimizer = {...}); weight decay applies to 2-D weights only. The
 * learning-rate schedule and clipping (docs/TRAINING.md): warmup steps of linear warmup, then a cosine
 * from lr to lr_min over decay_steps (0: constant lr); clip the largest global gradient norm (0: off). */
typedef struct tg_adamw {
    double lr, beta1, beta2, eps, weight_decay;
    long long warmup, decay_steps; /* steps, >= 0; default 0 */
    double lr_min;                 /* 0 <= lr_min <= lr; default 0 */
    double clip;                   /* >= 0; default 0 (off) */
    bool shard;                    /* AdamW state split over the depth group (ZeRO-1); default false */
} tg_adamw;

typedef struct tg_spec {
    char path[1024]; /* the spec file as given on the command line */
    char name[128];  /* model name, [A-Za-z0-9_.-]+ */
    tg_scheme scheme; /* "tesseract" (default) or "megatron" */
    int q, d;        /* mesh [q,q,d]; megatron: 1 and 1 (unused) */
    int p;           /* ranks: q*q*d, or megatron's mesh.p */
    tg_placement placement; /* mesh.placement: which group's ranks are consecutive (mesh.h); default "row" */
    int layers;      /* transformer blocks */
    int hidden;      /* C */
    int heads;       /* attention heads; hidden % heads == 0, heads % q == 0 (megatron: heads % p == 0) */
    int ffn;         /* F, MLP width; ffn % q == 0 (megatron: ffn % p == 0) */
    int seq;         /* S, tokens per sequence */
    int batch;       /* B, sequences; batch % (q*d) == 0 */
    double eps;      /* layernorm epsilon, > 0 */
    int vocab;       /* model.vocab V: token embedding, ln_f and the tied LM head with a vocab-parallel
                      * cross-entropy (docs/MODEL.md); 0: the block stack alone, as before */
    int positions;   /* model.positions P >= seq, learned positions (with vocab; else 0) */
    int vocab_align; /* model.vocab_align a in 1..1024 (default 1; with vocab only): every rank's vocab block is
                      * padded to a multiple of a rows (tg_spec_vocab_block); 0, as in a tg_spec made in code,
                      * means 1 */
    int context;     /* model.context N: mode = "generate" only, seq <= N <= positions, the KV-cache length (prompt
                      * and generated tokens of one sequence); else 0 (docs/GENERATE.md) */
    tg_dtype dtype;
    tg_attention attention; /* "cublas" or "cudnn" (cuDNN's fused attention: bf16, head dimension a multiple of 8
                             * and at most 64, not generate); without the key "cudnn" where those hold, else
                             * "cublas": the spec alone decides, never what the machine has (docs/CUDA.md) */
    bool attention_default; /* the key was absent: attention is the default for this spec (--summary says so) */
    tg_decode_layout decode_layout; /* decode_layout (mode = "generate" only): the decode step's linears "auto" (the
                                     * default: the layout of fewer bytes), "summa" or "stationary" (docs/GENERATE.md) */
    bool no_epilogues;      /* epilogues = false: no cuBLASLt epilogues on the CUDA backend (gen/fuse.c); zero, the
                             * default, has them (so a tg_spec made in code has them too) */
    tg_mode mode;    /* "infer" (default), "train" or "generate" */
    tg_adamw opt;    /* used when mode == TG_TRAIN */
    unsigned backends; /* TG_BACKEND_* bits from the spec; 0 when it does not say (emit_rank_cu.c decides) */
    double memory_gib; /* memory of one rank, GiB: every rank's arena must fit (default TG_MEMORY_GIB_DEFAULT) */
    int microbatches;  /* pipeline.microbatches m (training only, default 1): a step runs m micro-batches of
                        * batch/(q*d*m) sequences per rank, summing their gradients (docs/TRAINING.md) */
    int recompute;     /* recompute: layers 0..recompute-1 keep only their input in the forward and recompute the
                        * rest in the backward (training, tesseract scheme; 0: none, the default) */
    int pp;            /* mesh.pp S: pipeline stages, each a [q,q,d] group of its own (default 1; S > 1 training
                        * only); ranks are numbered stage-major: stage s holds ranks s*q*q*d .. (s+1)*q*q*d - 1 */
    int stage_layers[TG_MAX_STAGES]; /* pipeline.layers: the blocks of stage s, each >= 1, summing to layers
                                      * (entries pp.. are 0); stage 0 also holds the embedding, stage pp-1 ln_f,
                                      * the tied head and the loss */
    tg_pipe_sched schedule; /* pipeline.schedule, default "1f1b" */
} tg_spec;

#define TG_MEMORY_GIB_DEFAULT 80.0 /* an 80 GB H100 or A100 */
#define TG_SPEC_MAX_VOCAB_ALIGN 1024 /* model.vocab_align */

/* Rows of one rank's vocab block when s's vocabulary V is split n ways (q on the tesseract scheme, p on the
 * megatron one): ceil(V/n) rounded up to a multiple of model.vocab_align (docs/MODEL.md "Padding"); 0 without a
 * vocabulary. The one place this rule lives: the planner, the spec's size checks and the texts all use it. */
static inline long long tg_spec_vocab_block(const tg_spec *s, long long n)
{
    long long a = s->vocab_align > 1 ? s->vocab_align : 1, v = s->vocab > 0 ? (s->vocab + n - 1) / n : 0;
    return (v + a - 1) / a * a;
}

/* Run the spec file at path in the sandbox and validate it. On failure err
 * holds one line per problem found (all of them, not only the first). */
bool tg_spec_load(const char *path, tg_spec *out, tg_err *err);

/* Same, from a string (chunkname is used as the file name in messages). */
bool tg_spec_load_string(const char *chunkname, const char *src, tg_spec *out, tg_err *err);

/* The validated spec s on another mesh [q,q,d]: its model (and mode) run through the same loader and
 * rules, so a mesh they refuse gets the same messages, each starting "PATH as [q,q,d]: ". On success
 * *out is s with q and d replaced (every other field kept); a megatron spec becomes a tesseract one. */
bool tg_spec_on_mesh(const tg_spec *s, int q, int d, tg_spec *out, tg_err *err);
/* The same for the megatron scheme on p ranks ("PATH as megatron p=N: "); a tesseract spec becomes a
 * megatron one (q = d = 1). */
bool tg_spec_on_megatron(const tg_spec *s, int p, tg_spec *out, tg_err *err);

/* Same, from len bytes that may contain NULs (as a file may; the fuzz harness uses it). */
bool tg_spec_load_buffer(const char *chunkname, const char *src, size_t len, tg_spec *out, tg_err *err);

#endif
