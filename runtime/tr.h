/*
 * tr.h - the runtime every generated binary links: what generated rank code
 * may call, and the descriptors it provides.
 *
 * A generated output holds model.c (tr_model: the model, the mesh and the
 * schedule fingerprint) and one program file per rank class, rank_iI_jJ.c:
 * every rank (I, J, k) runs the same steps, so the file holds its functions
 * (fully unrolled lists of the calls below, every argument a literal) once and
 * one tr_rank_desc per rank of the class (coordinates, the colors and keys of
 * its four communicator groups, its block of the residual stream), gathered in
 * tr_class. Each class is linked with the runtime into its own executable;
 * bin/model (tr_launch.c) starts the right one for each rank. The runtime main
 * (tr_main.c) starts MPI, checks the world size against tr_model.p and the
 * fingerprints of every rank, picks its own descriptor from tr_class, loads its
 * shard of the weights and input into the arena, runs the schedule, and
 * gathers the output.
 *
 * Buffers are float offsets into one arena per rank. Every collective counts
 * the bytes it moves, so a run can be compared with the plan.
 */
#ifndef TR_H
#define TR_H

#include <stddef.h>
#include <stdint.h>

typedef uint16_t tr_bf16; /* bfloat16 storage: the high 16 bits of a float32 (runtime/tr_bf16.h; docs/BF16.md) */

/* TR_WORLD: every rank (the megatron scheme's all-reduces); the same numbering as the generator's tg_group */
typedef enum tr_group { TR_ROW = 0, TR_COL = 1, TR_DEP = 2, TR_COLDEP = 3, TR_WORLD = 4, TR_NGROUPS = 5 } tr_group;

/* Step kinds, for timing (the same list as the generator's tg_step_kind). */
typedef enum tr_kind {
    TR_K_BCAST,
    TR_K_ALLREDUCE,
    TR_K_GEMM,
    TR_K_LN,
    TR_K_RESID,
    TR_K_GELU,
    TR_K_ATTENTION,
    TR_K_REDUCE,
    TR_K_OPTIMIZER,
    TR_K_CAST, /* fp32 -> bf16 copies of GEMM operands (docs/BF16.md) */
    TR_K_LOSS, /* the vocab cross-entropy: row max, exp sums, per-token loss, dlogits */
    TR_NKINDS
} tr_kind;

/* One rectangular piece of a full weight tensor ([1,n] for vectors) and the
 * column of the local shard where it lands. */
typedef struct tr_piece {
    int r0, nr, c0, nc, dst_col;
} tr_piece;

typedef struct tr_param {
    const char *name;  /* Hugging Face GPT-2 name */
    int ndim;          /* 1 or 2 */
    int full[2];       /* full shape */
    long long offset;  /* arena offset of the local shard, floats */
    int rows, cols;    /* local shard shape */
    int npieces;
    tr_piece piece[3];
    long long grad_offset, m_offset, v_offset; /* training: gradient and AdamW moments, same shape; else -1 */
    int replica; /* tr_group whose members hold identical copies (member 0's is written to files), or -1: none */
    int bf16;    /* the shard is stored as bf16, rounded on load: the matrices of a bf16 inference program
                  * (docs/BF16.md) */
    long long w16_offset; /* bf16 training: arena offset (floats) of the persistent bf16 copy of the shard that the
                           * GEMMs read, written by AdamW after each update and by the main once before the first
                           * step; -1: none */
    long long shard; /* optimizer.shard: the moments hold one slice of shard elements of the [rows, cols] shard
                      * (member k of dep updates elements k*shard .. min((k+1)*shard, rows*cols)); 0: the whole */
} tr_param;

struct tr_ctx;

/* What the runtime knows of each step of a class's schedule (for traces and
 * per-step statistics); index = the step number in schedule.txt. */
typedef struct tr_step_info {
    int layer;         /* transformer block */
    int t;             /* SUMMA step or -1 */
    const char *op;    /* "ln1", "qkv", "attn", ... */
    tr_kind kind;
    int group;         /* tr_group of a collective, -1 otherwise */
    int root;          /* bcast or reduce: the root's index in the group (tr_root_rank gives its rank); else -1 */
    long long count;   /* elements moved by a collective */
    long long flops;
    int esize;         /* a collective: bytes per element of its payload (2: a bf16 broadcast; else 4); else 0 */
} tr_step_info;

typedef struct tr_rank_desc {
    int rank, i, j, k;
    int color[TR_NGROUPS], key[TR_NGROUPS], size[TR_NGROUPS]; /* MPI_Comm_split arguments, group sizes */
    long long arena_elems;
    int nparams;
    const tr_param *params;
    int mode;                 /* 0 inference, 1 training */
    long long x_offset;       /* input block [io_rows, io_cols] of the residual stream */
    long long y_offset;       /* output block (x_offset for inference: updated in place) */
    long long gx_offset;      /* training: dL/dy in, dL/dx out, [io_rows, io_cols]; else -1 */
    int io_r0, io_c0, io_rows, io_cols;
    long long plan_bcast_recv[TR_NGROUPS]; /* planned bytes per forward (2 per bf16 element, 4 per float32) */
    long long plan_bcast_sent[TR_NGROUPS];
    long long plan_allreduce[TR_NGROUPS];
    long long plan_flops;
    /* training: planned bytes per backward (a reduce root receives count from each other member) */
    long long plan_bwd_bcast_recv[TR_NGROUPS];
    long long plan_bwd_bcast_sent[TR_NGROUPS];
    long long plan_bwd_allreduce[TR_NGROUPS];
    long long plan_bwd_reduce_recv[TR_NGROUPS];
    long long plan_bwd_reduce_sent[TR_NGROUPS];
    /* optimizer.shard (docs/TRAINING.md): the backward's reduce-scatters and the optimizer's all-gathers, bytes of
     * the whole tensors (4 per element, as an all-reduce counts its elements); 0 without sharding */
    long long plan_bwd_rscatter[TR_NGROUPS];
    long long plan_opt_allgather[TR_NGROUPS];
    int nsteps;
    const tr_step_info *steps;
    void (*forward)(struct tr_ctx *c, float *A);
    void (*backward)(struct tr_ctx *c, float *A);  /* training only, else NULL */
    void (*optimizer)(struct tr_ctx *c, float *A); /* training only: one AdamW step (step number in the ctx) */
} tr_rank_desc;

/* The language model's part of a class program (model.vocab; docs/MODEL.md): the forward's reductions (the
 * embedding), the vocabulary and its block rows Vq, and where the token ids of the q row blocks of the rank's depth
 * [q*io_rows] int32, the targets of its row block [io_rows] int32, its logits [io_rows, vq] (vocab block j) and its
 * per-token loss [io_rows] lie in the arena (the same offsets for every rank of the class). */
typedef struct tr_lm_desc {
    long long plan_reduce_recv[TR_NGROUPS]; /* planned bytes per forward, as tr_rank_desc's plan_* */
    long long plan_reduce_sent[TR_NGROUPS];
    int vocab, vq, positions;
    long long tok_offset, tgt_offset, logits_offset, loss_offset;
} tr_lm_desc;
/* Defined by the class program of a language model only. A weak reference: the programs of a block stack (and
 * their goldens) stay as they were, link without it and see &tr_lm_class == NULL (tr_tokens.c: tr_lm()). */
extern const tr_lm_desc tr_lm_class __attribute__((weak));

/* Generation (spec mode = "generate"; docs/GENERATE.md): the rank's forward is the prefill of the prompts (their K
 * and V into the KV caches, the greedy argmax of every row) and decode() one decode step (one token per sequence at
 * its position). Offsets (floats) of: the prefill's (max logit, id) pairs of the q row blocks of the depth
 * [q*io_rows, 2]; the decode step's token ids of those row blocks [q*nseq] int32 and positions of its row block
 * [nseq] int32 (the runtime fills both), its logits [nseq, vq] and pairs [q*nseq, 2]; the first KV cache (kv_elems:
 * every layer's, elements). A weak reference, as tr_lm_class. */
typedef struct tr_gen_desc {
    int context;
    long long pairs_offset, dtok_offset, dpos_offset, dlogits_offset, dpairs_offset, kv_offset, kv_elems;
    /* 1: the decode step's head is weight-stationary and its logits transposed: rank (i,j) holds row block j's
     * logits of vocab block i (the prefill's: row block i, vocab block j); docs/GENERATE.md "The head" */
    int dec_logits_t;
    long long plan_dec_bcast_recv[TR_NGROUPS]; /* planned bytes of one decode step */
    long long plan_dec_bcast_sent[TR_NGROUPS];
    long long plan_dec_allreduce[TR_NGROUPS];
    long long plan_dec_reduce_recv[TR_NGROUPS];
    long long plan_dec_reduce_sent[TR_NGROUPS];
    /* the weight-stationary layout (docs/GENERATE.md): bytes received by its all-gathers and reduce-scatters, in the
     * prefill and in one decode step */
    long long plan_ws_allgather[TR_NGROUPS];
    long long plan_ws_rscatter[TR_NGROUPS];
    long long plan_dec_ws_allgather[TR_NGROUPS];
    long long plan_dec_ws_rscatter[TR_NGROUPS];
    void (*decode)(struct tr_ctx *c, float *A);
} tr_gen_desc;
extern const tr_gen_desc tr_gen_class __attribute__((weak));

typedef struct tr_model_desc {
    const char *name, *spec_path, *tessgen_version;
    const char *fingerprint; /* of the schedule, as printed by tessgen and in manifest.json */
    int q, d, p;
    int scheme; /* 0 tesseract [q,q,d]; 1 megatron 1-D over p ranks (q = d = 1, rank r is (i=r, j=0, k=0)) */
    int si, sj, sk; /* rank = i*si + j*sj + k*sk (the spec's mesh.placement; gen/mesh.h) */
    int layers, hidden, heads, ffn, seq, batch;
    double eps;
    int mode;                                   /* 0 inference, 1 training */
    double lr, beta1, beta2, adam_eps, weight_decay; /* AdamW, training only */
    /* the learning-rate schedule (tr_sched.h) and gradient clipping (tr_clip.h): 0 = off, the default; model.c
     * sets them only when the spec does */
    long long warmup, decay_steps;
    double lr_min, clip;
    const char *dtype; /* the spec's dtype: "bf16", or NULL for "fp32" (model.c sets it only for bf16) */
    int pp;            /* pipeline stages (spec mesh.pp; docs/TRAINING.md "Pipeline stages"); 0 or 1: none (model.c sets
                        * it only when more): p / pp ranks per stage, numbered stage-major */
    int microbatches;  /* per training step (spec pipeline.microbatches); 0 or 1: none (model.c sets it only when
                        * more): forward and backward run once per micro-batch, tr_mb(c) says which */
} tr_model_desc;

/* What differs between the ranks of one class: the rank, its depth, where its block of the residual stream
 * starts, and its communicator colors and keys. */
typedef struct tr_rank_row {
    int rank, k, io_r0;
    int color[TR_NGROUPS], key[TR_NGROUPS];
} tr_rank_row;

/* The ranks (i, j, 0..d-1) of one class and the schedule they all run. The runtime makes a rank's
 * tr_rank_desc from `proto` with the fields of its row (rank, k, io_r0, color, key) put in. */
typedef struct tr_class_desc {
    int i, j;
    const char *fingerprint;  /* of the schedule this file was printed for: must equal tr_model.fingerprint */
    tr_rank_desc proto;
    int nranks;               /* d */
    const tr_rank_row *rows;  /* [nranks], in k order */
} tr_class_desc;

extern const tr_model_desc tr_model; /* defined by the generated model.c */
extern const tr_class_desc tr_class; /* defined by the generated rank_iI_jJ.c this executable was linked with */

/* The coordinates of global rank r in tr_model's mesh, and the rank of the root of a step as the rank
 * with coordinates (i, j, k) runs it (-1 when the step has no root). */
void tr_rank_coord(int r, int *i, int *j, int *k);
/* tr_model's mesh as people read it: "[2,2,1]" or "megatron p=4" (a static buffer). */
const char *tr_mesh_text(void);
int tr_root_rank(const tr_rank_desc *d, const tr_step_info *s);

/* ---- what generated forward code calls --------------------------------------- */

/* Marks the start of step `id` (its index in the rank's schedule); ends the previous one. */
void tr_step_mark(struct tr_ctx *c, int id);
#define TR_STEP(c, id) tr_step_mark((c), (id))

/* Broadcast count floats at buf from local root `root` of the rank's group g. */
void tr_bcast(struct tr_ctx *c, tr_group g, int root, float *buf, int count);
/* Sum count floats at buf in place over group g. */
void tr_allreduce(struct tr_ctx *c, tr_group g, float *buf, int count);
/* optimizer.shard (docs/TRAINING.md "Optimizer state sharded over depth"): buf [count] cut into size(g) slices of
 * ceil(count/size) elements (the last ones shorter), member k owning slice k. tr_reduce_scatter: member k's slice
 * becomes the sum over the group of everyone's slice k, added in member order (the rest of buf keeps this rank's
 * own values); tr_allgather: every member's slice k becomes member k's (its bits). Each counts 4 * count bytes. */
void tr_reduce_scatter(struct tr_ctx *c, tr_group g, float *buf, long long count);
void tr_allgather(struct tr_ctx *c, tr_group g, float *buf, long long count);
/* the same all-gather of bf16 bits (generation's weight-stationary layout in a bf16 plan); 2 * count bytes */
void tr_allgather_bf16(struct tr_ctx *c, tr_group g, tr_bf16 *buf, long long count);
/* Row-major C[m,n] = beta*C + A[m,k] @ B[k,n]. */
void tr_gemm(struct tr_ctx *c, int m, int n, int k, const float *A, int lda, const float *B, int ldb, float beta,
             float *C, int ldc);
/* rs[r] = sum_c x[r,c] over this rank's columns. */
void tr_ln_rowsum(struct tr_ctx *c, const float *x, int rows, int cols, float *rs);
/* x += p + bias (bias [cols]); then rs[r] = sum_c x[r,c] if rs is not NULL. */
void tr_resid_rowsum(struct tr_ctx *c, float *x, const float *p, const float *bias, int rows, int cols, float *rs);
/* vs[r] = sum_c (x[r,c] - rs[r]/hidden)^2, rs holding the full-row sums. */
void tr_ln_sqdev(struct tr_ctx *c, const float *x, const float *rs, int rows, int cols, int hidden, float *vs);
/* y = (x - rs/hidden) / sqrt(vs/hidden + eps) * gamma + beta. */
void tr_ln_apply(struct tr_ctx *c, const float *x, const float *rs, const float *vs, const float *gamma,
                 const float *beta, int rows, int cols, int hidden, float eps, float *y);
/* h = GeLU(h + bias), tanh approximation. */
void tr_bias_gelu(struct tr_ctx *c, float *h, const float *bias, int rows, int cols);
/* qkv [nseq*seq, 3*heads*hdim] += bias; out [nseq*seq, heads*hdim] = causal softmax(Q K^T / sqrt(hdim)) V per
 * sequence and head; scores [seq, seq] is scratch. */
void tr_attention(struct tr_ctx *c, float *qkv, const float *bias, float *out, float *scores, int nseq, int seq,
                  int heads, int hdim);


/* ---- what generated backward and optimizer code calls (training) --------------- */

/* Sum count floats onto the group's local root: in place on the root, buf only read elsewhere. */
void tr_reduce(struct tr_ctx *c, tr_group g, int root, float *buf, int count);
/* All-reduce whose result is bitwise identical on every member (reduce to member 0, then bcast):
 * gradients of replicated parameters, so replicas stay identical after every step. */
void tr_allreduce_exact(struct tr_ctx *c, tr_group g, float *buf, int count);
/* Row-major C[m,n] = beta*C + op(A) op(B), op(X) = X^T when transX; lda/ldb are of the stored matrices. */
void tr_gemm_ex(struct tr_ctx *c, int transa, int transb, int m, int n, int k, const float *A, int lda,
                const float *B, int ldb, float beta, float *C, int ldc);
/* y = x + p + bias, row sums of y into rs if not NULL (out of place: x is kept for the backward). */
void tr_resid_rowsum_to(struct tr_ctx *c, const float *x, const float *p, const float *bias, int rows, int cols,
                        float *rs, float *y);
/* u += bias (kept: the pre-activation); g = GeLU(u). */
void tr_bias_gelu_save(struct tr_ctx *c, float *u, const float *bias, float *g, int rows, int cols);
/* db[cols] = column sums of dy[rows, cols]. */
void tr_colsum(struct tr_ctx *c, const float *dy, int rows, int cols, float *db);
/* dg *= GeLU'(u). */
void tr_gelu_bwd(struct tr_ctx *c, float *dg, const float *u, int rows, int cols);
/* Layernorm backward, part 1: per token, s[r] = sum dxhat, s[rows + r] = sum dxhat*xhat over local
 * columns (dxhat = dy*gamma); dgamma[c] = sum_r dy*xhat, dbeta[c] = sum_r dy over local tokens. */
void tr_ln_bwd_sums(struct tr_ctx *c, const float *dy, const float *x, const float *rs, const float *vs,
                    const float *gamma, int rows, int cols, int hidden, float eps, float *s, float *dgamma,
                    float *dbeta);
/* Part 2, with s summed over the row: g += rstd (dxhat - s1/hidden - xhat s2/hidden). */
void tr_ln_bwd_apply(struct tr_ctx *c, const float *dy, const float *x, const float *rs, const float *vs,
                     const float *gamma, const float *s, int rows, int cols, int hidden, float eps, float *g);
/* Attention backward: dqkv [nseq*seq, 3*heads*hdim] from qkv (post-bias) and dout; probs and dscores
 * [seq, seq] are scratch. */
void tr_attention_bwd(struct tr_ctx *c, const float *qkv, const float *dout, float *dqkv, float *probs,
                      float *dscores, int nseq, int seq, int heads, int hdim);
/* One AdamW step (step number c->opt_step, from 1, learning rate c->lr: the schedule's for the step) on n
 * elements; decay: apply weight decay. */
void tr_adamw(struct tr_ctx *c, float *param, const float *grad, float *m, float *v, int n, int decay);
/* One tensor of the multi-tensor AdamW step: arena offsets in floats (4-byte slots) of the fp32 master, its gradient
 * and moments, and of its persistent bf16 copy (-1: none; docs/BF16.md); count elements; decay: weight decay. The
 * generated optimizer holds one static table of these, in plan order. */
typedef struct tr_adamw_tensor {
    long long param, grad, m, v, w16;
    long long count;
    int decay;
    long long slice_of; /* optimizer.shard: the tensor's elements, the row updating member k of dep's slice
                         * [k*count, min((k+1)*count, slice_of)) of param and grad (m, v: from 0); 0: all count */
} tr_adamw_tensor;
/* The whole optimizer step in one call: tr_adamw's arithmetic on each of the n tensors of arena A, and where a tensor
 * has a bf16 copy, that copy = the updated master rounded to nearest even (tr_f32_to_bf16), right after the update.
 * One OpenMP region; thread t owns the same fixed slice of each tensor (tr_slice), so the bits do not depend on the
 * thread count. */
void tr_adamw_multi(struct tr_ctx *c, float *A, const tr_adamw_tensor *t, int n);

/* ---- bf16 mixed precision (dtype = "bf16"; docs/BF16.md, tr_kernels_bf16.c) ------------------------------
 * Every GEMM reads bf16 operands and accumulates fp32; the fused kernels below compute exactly as their fp32
 * twins and store tr_f32_to_bf16 (round to nearest even) of each output value. Each is timed and counted under
 * its twin's step kind. */

/* Broadcast count bf16 values at buf from local root `root` of group g (2 * count bytes in the counters). */
void tr_bcast_bf16(struct tr_ctx *c, tr_group g, int root, tr_bf16 *buf, int count);
/* y[e] = RNE(x[e]) for n elements (a CAST step; timed as TR_K_RESID, the elementwise kind). */
void tr_cast_bf16(struct tr_ctx *c, const float *x, long long n, tr_bf16 *y);
/* ---- pipeline stages (tr_model.pp > 1; docs/TRAINING.md "Pipeline stages"; tr_comm.c) --------------------------
 * A stage's class program defines tr_pipe_class: its stage, the buffers its forward keeps for its backward (stashed
 * per in-flight micro-batch outside the arena) and step(), the stage's proved schedule unrolled: the calls below with
 * literal arguments, peers this rank +- ranks (the same (i, j, k) of the neighbour stage). */
typedef struct tr_pipe_buf {
    long long offset, slots; /* arena offset and 4-byte slots of a buffer the forward keeps for the backward */
} tr_pipe_buf;
typedef struct tr_pipe_desc {
    int stage, stages, ranks, microbatches; /* ranks: p / pp, one stage's */
    long long mb_elems; /* one micro-batch's rows of x, y and grad_x: what one send or receive moves (4 bytes each) */
    int stash, nstash;  /* stash slots (micro-batches in flight); kept buffers */
    const tr_pipe_buf *stash_bufs;
    long long stash_planned; /* the plan's stash: stash x the kept buffers, each 64-byte aligned (4-byte slots) */
    /* the language model's tied wte (on the first and the last stage): its index in the rank's params (-1: none on
     * this stage), its elements and the peer holding the other copy, relative to this rank (+-(stages-1)*ranks). The
     * last stage's copy is not canonical: written, gathered and counted in the norm from stage 0's */
    int tied_param;
    long long tied_elems;
    int tied_peer;
    void (*step)(struct tr_ctx *c, float *A); /* one training step's forwards, objectives, backwards and exchanges */
} tr_pipe_desc;
/* A weak reference, as tr_lm_class: only a stage's program defines it. */
extern const tr_pipe_desc tr_pipe_class __attribute__((weak));
/* This rank (in MPI_COMM_WORLD). */
int tr_pipe_rank(const struct tr_ctx *c);
/* The forward of micro-batch u (the objective and dL/dy after it on the last stage, unless c->pipe_given_dy: --dy put
 * dL/dy in grad_x), then its kept buffers into
 * stash slot `slot`; and the backward of u after they are put back from that slot. */
void tr_pipe_forward(struct tr_ctx *c, float *A, int u, int slot);
void tr_pipe_backward(struct tr_ctx *c, float *A, int u, int slot);
/* The stash and the host staging buffer (before tr_backend_free: the stash is the backend's run memory). */
void tr_pipe_free(struct tr_ctx *c);
/* Blocking point-to-point on MPI_COMM_WORLD (n floats each); tr_pipe_sendrecv posts both and waits for both. The
 * buffers are run memory (device memory on a GPU: staged through the host). */
void tr_pipe_send(struct tr_ctx *c, const float *buf, long long n, int peer);
void tr_pipe_recv(struct tr_ctx *c, float *buf, long long n, int peer);
void tr_pipe_sendrecv(struct tr_ctx *c, const float *sbuf, long long sn, int speer, float *rbuf, long long rn,
                      int rpeer);
/* The tied wte gradient g [n] of the first and the last stage: exchanged with peer and summed, the first stage's
 * part first (first: this is it), so both copies hold the same bits and their AdamW steps stay identical. */
void tr_pipe_tied_sum(struct tr_ctx *c, float *g, long long n, int peer, int first);
/* Is pr the last stage's copy of the tied wte (not the canonical one: stage 0's is)? */
int tr_pipe_tied_copy(const struct tr_rank_desc *d, const struct tr_param *pr);
/* --replica-check: the tied wte weights of the first and last stage compared bitwise (every rank takes part); the
 * number of ranks whose copy differs */
long long tr_pipe_tied_check(struct tr_ctx *c, const float *H);

/* Micro-batches (docs/TRAINING.md "Micro-batches"): the one the main runs now, 0..tr_model.microbatches-1 (0 without
 * them); the generated code offsets its I/O blocks by it and runs the gradients' all-reduces after the last. */
int tr_mb(const struct tr_ctx *c);
/* A GRAD_ACC step: g = part (add 0: the first micro-batch of a step), g += part (add 1: the later ones). */
void tr_grad_acc(struct tr_ctx *c, float *g, const float *part, long long n, int add);
/* tr_gemm_ex with bf16 A and B (widened to float32, exactly) and a float32 C: C = beta*C + op(A) op(B). */
void tr_gemm_bf16(struct tr_ctx *c, int transa, int transb, int m, int n, int k, const tr_bf16 *A, int lda,
                  const tr_bf16 *B, int ldb, float beta, float *C, int ldc);
/* tr_ln_apply with a bf16 output y. */
void tr_ln_apply_bf16(struct tr_ctx *c, const float *x, const float *rs, const float *vs, const float *gamma,
                      const float *beta, int rows, int cols, int hidden, float eps, tr_bf16 *y);
/* tr_attention of a bf16 program: its GEMMs read Q, K, V (biased) and P rounded to bf16 (docs/BF16.md,
 * "Attention"); a bf16 output out (qkv still gets the bias in place, unrounded; scores is the same scratch). */
void tr_attention_bf16(struct tr_ctx *c, float *qkv, const float *bias, tr_bf16 *out, float *scores, int nseq, int seq,
                       int heads, int hdim);
/* tr_attention_bf16 with a float32 output (a plan whose attention output is not a GEMM operand as it is). */
void tr_attention_bf16_fp32out(struct tr_ctx *c, float *qkv, const float *bias, float *out, float *scores, int nseq,
                               int seq, int heads, int hdim);
/* tr_attention_bwd of a bf16 program: its GEMMs read Q, K, V, dout, the recomputed P and dS rounded to bf16. */
void tr_attention_bwd_bf16(struct tr_ctx *c, const float *qkv, const float *dout, float *dqkv, float *probs,
                           float *dscores, int nseq, int seq, int heads, int hdim);
/* the same from the bf16 copy of the biased [Q|K|V] the forward kept (attention = "cudnn"): bitwise
 * tr_attention_bwd_bf16 of the fp32 qkv it was rounded from */
void tr_attention_bwd_bf16q(struct tr_ctx *c, const tr_bf16 *qkvh, const float *dout, float *dqkv, float *probs,
                            float *dscores, int nseq, int seq, int heads, int hdim);
/* bf16 inference's bias + GeLU: u += bias (float32, the bf16 bias widened: bf16 programs read fc1's bias in bf16,
 * docs/BF16.md), g = bf16(GeLU(u)). */
void tr_bias_gelu_save_bf16(struct tr_ctx *c, float *u, const tr_bf16 *bias, tr_bf16 *g, int rows, int cols);
/* bf16 training's bias + GeLU (docs/BF16.md): v = h + bias in float32 (the bf16 bias widened; h not written), u =
 * bf16(v) kept for the backward, g = bf16(GeLU(v)); each bf16 value is the rounding of what tr_bias_gelu_save computes
 * in float32 with that bias, and what cuBLASLt's GELU_AUX_BIAS epilogue with a bf16 bias, D and aux computes. */
void tr_bias_gelu_keep_bf16(struct tr_ctx *c, const float *h, const tr_bf16 *bias, tr_bf16 *g, tr_bf16 *u, int rows,
                            int cols);
/* bf16 training's GeLU backward (docs/BF16.md): du = bf16(dg * GeLU'(u)), u the bf16 pre-activation
 * tr_bias_gelu_keep_bf16 kept, the product in float32 as tr_gelu_bwd's, rounded to nearest even; dg only read. du is
 * what the fc1 GEMMs read and its bias gradient sums, and what cuBLASLt's DGELU epilogue with a bf16 D and aux writes. */
void tr_gelu_bwd_bf16(struct tr_ctx *c, const float *dg, const tr_bf16 *u, tr_bf16 *du, int rows, int cols);
/* tr_colsum of a bf16 dy (attention = "cudnn": the bias gradient of cuDNN's bf16 dQKV): bitwise tr_colsum of the
 * widened dy. */
void tr_colsum_bf16(struct tr_ctx *c, const tr_bf16 *dy, int rows, int cols, float *db);

/* ---- the language model's steps (tr_kernels_lm.c; docs/MODEL.md) --------------------------------------- */

/* Maximum of count floats at buf in place over group g (every member gets the same value). */
void tr_allreduce_max(struct tr_ctx *c, tr_group g, float *buf, int count);
/* Generation (docs/GENERATE.md; plan.h TG_STEP_KV_WRITE, TG_STEP_ATTN_DECODE, TG_STEP_LM_ARGMAX): x[r] += wpe row
 * pos[r]; the prompt's K | V into the KV cache; one decode token's attention over the cache; the (max, id) pairs of a
 * logits block, ties to the lowest id; and their all-reduce over g (MPI_MAXLOC on MPI_FLOAT_INT; count: 4-byte
 * slots, two a pair). */
void tr_pos_add_at(struct tr_ctx *c, float *x, const float *wpe, const int32_t *pos, int rows, int cols);
void tr_kv_write(struct tr_ctx *c, const float *qkv, int nseq, int seq, int cols, int context, float *kv);
void tr_attn_decode(struct tr_ctx *c, float *qkv, const float *bias, float *out, float *kv, const int32_t *pos,
                    float *scores, int nseq, int heads, int hdim, int context);
/* bf16 plans: the cache holds r(K) | r(V) and the output is bf16 (docs/GENERATE.md "bf16"); the token's q, k, v
 * are rounded in place in qkv. */
void tr_kv_write_bf16(struct tr_ctx *c, const float *qkv, int nseq, int seq, int cols, int context, tr_bf16 *kv);
void tr_attn_decode_bf16(struct tr_ctx *c, float *qkv, const float *bias, tr_bf16 *out, tr_bf16 *kv,
                         const int32_t *pos, float *scores, int nseq, int heads, int hdim, int context);
void tr_lm_argmax(struct tr_ctx *c, const float *L, int rows, int cols, int nvalid, int vocab0, float *pairs);
void tr_allreduce_maxloc(struct tr_ctx *c, tr_group g, float *buf, int count);
/* dst[0..count) = src[0..count) (TG_STEP_COPY: the weight-stationary layout's block into its slot, its slice out). */
void tr_copy(struct tr_ctx *c, const float *src, float *dst, long long count);
void tr_copy_bf16(struct tr_ctx *c, const tr_bf16 *src, tr_bf16 *dst, long long count);
/* out [rows, cols]: row r = E [nvalid, cols] row tok[r] - v0 when v0 <= tok[r] < v0 + nvalid, else zero. */
void tr_embed_rows(struct tr_ctx *c, const int32_t *tok, const float *E, int v0, int nvalid, int rows, int cols,
                   float *out);
/* x [rows, cols] += wpe [P, cols] row (r mod seq): rows hold whole sequences. */
void tr_pos_add(struct tr_ctx *c, float *x, const float *wpe, int rows, int cols, int seq);
/* mx[r] = max of L[r, 0..nvalid) (L [rows, cols]); -inf when nvalid = 0. */
void tr_lm_rowmax(struct tr_ctx *c, const float *L, int rows, int cols, int nvalid, float *mx);
/* s[r] = sum over c < nvalid of exp(L[r,c] - mx[r]); s[rows + r] = L[r, tgt[r] - v0] when the target is in
 * [v0, v0 + nvalid), else 0. */
void tr_lm_sums(struct tr_ctx *c, const float *L, const float *mx, const int32_t *tgt, int v0, int rows, int cols,
                int nvalid, float *s);
/* loss[r] = log(s[r]) + mx[r] - s[rows + r], with s summed over the row group. */
void tr_lm_loss(struct tr_ctx *c, const float *mx, const float *s, int rows, float *loss);
/* dl [rows, cols] = (exp(L - mx) / s - onehot(tgt - v0)) * scale on the nvalid first columns, 0 on the rest. */
void tr_lm_dlogits(struct tr_ctx *c, const float *L, const float *mx, const float *s, const int32_t *tgt, int v0,
                   int rows, int cols, int nvalid, float scale, float *dl);
/* dE [nvalid.., cols] row tok[r] - v0 += g row r, for the tokens in [v0, v0 + nvalid), in row order. */
/* buf[0 .. n) = 0 (a pipeline stage's embedding gradient without the tied head's part; tr_kernels_lm.c) */
void tr_zero(struct tr_ctx *c, float *buf, long long n);
void tr_embed_rows_bwd(struct tr_ctx *c, const int32_t *tok, const float *g, int v0, int nvalid, int rows, int cols,
                       float *dE);
/* dwpe [npos, cols] = 0, then row (r mod seq) += g row r. */
void tr_pos_bwd(struct tr_ctx *c, const float *g, int rows, int cols, int seq, int npos, float *dwpe);

#endif
