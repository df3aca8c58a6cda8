/*
 * plan.h - the bake stage: spec -> the program of every rank class and its
 * memory plan.
 *
 * Ranks (i, j, k) that share (i, j) run the same program: the same steps on
 * the same buffers at the same arena offsets, with the same local roots and
 * counts. Only literals differ with k (the row block h = i + q*k, the global
 * ranks of roots and group members), and those follow from the coordinates.
 * So the planner bakes q*q class programs, one at a time on request
 * (tg_plan_class), never one per rank: planning time and memory grow with
 * q*q*layers, not with ranks, and a consumer holds one class at a time.
 *
 * A class program is the ordered list of steps (each a collective, a GEMM or a
 * fused kernel) with every operand baked to a literal: group, local root,
 * element counts, shapes, leading dimensions, and buffers. Buffers are blocks
 * of one arena; the memory plan (place.c) gives each an offset such that
 * buffers whose lifetimes (first..last step that touches them) overlap never
 * share bytes. Weights and the residual stream are live for the whole
 * program; everything else is placed greedily and reused.
 *
 * This is the one source of truth: the C and CUDA code, the schedule dumps,
 * the manifest and the byte counts are all printed from it by the emitters,
 * which decide nothing. Pure functions, no I/O.
 *
 * Forward of one pre-LN GPT-2 block on rank (i,j,k), R = T/(d*q) rows, Cq = C/q:
 *   ln1    row sums of x -> all-reduce(row) -> centred squares -> all-reduce(row) -> apply
 *   qkv    SUMMA: q x { bcast a1(h,t) over row, bcast Wqkv(t,j) over col, GEMM }
 *   attn   bias + causal softmax attention of the heads/q local heads
 *   proj   SUMMA of att @ Wo -> p
 *   ln2    x += p + bo fused with the row sums, then as ln1
 *   fc1    SUMMA -> h [R, F/q];  gelu: h = GeLU(h + b1)
 *   fc2    SUMMA -> p;  x += p + b2 fused with the next layer's ln1 row sums
 *
 * The megatron scheme (plan_megatron.c, docs/MEGATRON.md) plans p classes
 * (r, 0), one per rank, on the same structures: x [T, C] whole on every rank,
 * column-parallel QKV and fc1, row-parallel projections, two all-reduces over
 * world per block forward and two backward. Its tg_plan has R = T, Cq = C
 * (the residual stream block is the whole [T, C]), Fq = F/p, Hq = H/p and
 * nseq = batch.
 */
#ifndef TG_PLAN_H
#define TG_PLAN_H

#include <stdbool.h>

#include "err.h"
#include "mesh.h"
#include "spec.h"

typedef enum tg_step_kind {
    TG_STEP_BCAST,        /* buf[0]: payload [count]; read on the root, written elsewhere */
    TG_STEP_ALLREDUCE,    /* buf[0]: [count], summed in place over the group */
    TG_STEP_GEMM,         /* buf[0] A [m,k] lda, buf[1] B [k,n] ldb, buf[2] C [m,n] ldc; C = beta*C + A@B */
    TG_STEP_LN_ROWSUM,    /* buf[0] x [rows,cols] -> buf[1] rs [rows] = local row sums */
    TG_STEP_RESID_ROWSUM, /* buf[0] x += buf[1] p + buf[2] bias[cols]; buf[3] rs = row sums of x (or -1) */
    TG_STEP_LN_SQDEV,     /* buf[0] x, buf[1] rs (global sums) -> buf[2] vs = sum (x - rs/hidden)^2 */
    TG_STEP_LN_APPLY,     /* buf[0] x, buf[1] rs, buf[2] vs, buf[3] gamma, buf[4] beta -> buf[5] y */
    TG_STEP_BIAS_GELU,    /* buf[0] h [rows,cols] = GeLU(h + buf[1] bias[cols]) */
    TG_STEP_ATTENTION,    /* buf[0] qkv [rows,3*cols] += buf[1] bias; buf[2] out [rows,cols]; buf[3] scores [seq,seq] */
    /* training */
    TG_STEP_REDUCE,       /* buf[0]: [count] summed onto the group's local root (in place there) */
    TG_STEP_GELU_SAVE,    /* buf[0] u [rows,cols] += buf[1] bias (kept: pre-activation); buf[2] g = GeLU(u); bf16
                           * training: buf[0] h only read, buf[3] u = bf16(h + bias), g = GeLU(h + bias) */
    TG_STEP_COLSUM,       /* buf[0] dy [rows,cols] -> buf[1] db [cols] = column sums */
    TG_STEP_GELU_BWD,     /* buf[0] dg [rows,cols] *= GeLU'(buf[1] u) */
    TG_STEP_LN_BWD_SUMS,  /* buf[0] dy, buf[1] x, buf[2] rs, buf[3] vs, buf[4] gamma -> buf[5] s [2,rows];
                           * and the dgamma, dbeta column sums: buf[6], buf[7] [cols] */
    TG_STEP_LN_BWD_APPLY, /* buf[0] dy, buf[1] x, buf[2] rs, buf[3] vs, buf[4] gamma, buf[5] s -> buf[6] g += dx */
    TG_STEP_ATTN_BWD,     /* buf[0] qkv (post-bias), buf[1] dout [rows,cols] -> buf[2] dqkv [rows,3*cols];
                           * buf[3], buf[4]: [seq,seq] scratch; attention = "cudnn": buf[5], buf[7], buf[8] the
                           * forward's bf16 QKV, statistics and O (plan_steps.c) */
    TG_STEP_ADAMW,        /* buf[0] param, buf[1] grad, buf[2] m, buf[3] v: [count] elements; buf[4] (or -1): the
                           * persistent bf16 copy of the param (tg_param.w16), written from the updated param */
    /* the language model (plan_lm.c, docs/MODEL.md); vocab0: first vocab id of the block, nvalid: its ids < V */
    TG_STEP_EMBED,        /* buf[0] tok [rows] i32, buf[1] E [cols of Vq rows] -> buf[2] out [rows,cols]: E row of each
                           * token in [vocab0, vocab0+nvalid), zero otherwise */
    TG_STEP_POS_ADD,      /* buf[0] x [rows,cols] += buf[1] wpe [P,cols] row (r % seq) */
    TG_STEP_LM_ROWMAX,    /* buf[0] logits [rows,cols] -> buf[1] mx [rows] = max over the nvalid first columns */
    TG_STEP_LM_SUMS,      /* buf[0] logits, buf[1] mx, buf[2] tgt [rows] i32 -> buf[3] s [2,rows]: sum exp(l - mx),
                           * target logit (0 when the target is not in this vocab block) */
    TG_STEP_LM_LOSS,      /* buf[0] mx, buf[1] s (summed over the row) -> buf[2] loss [rows] per token */
    TG_STEP_LM_DLOGITS,   /* buf[0] logits, buf[1] mx, buf[2] s, buf[3] tgt -> buf[4] dl [rows,cols] =
                           * (softmax - onehot) * scale, pad columns 0 */
    TG_STEP_EMBED_BWD,    /* buf[0] tok [rows] i32, buf[1] g [rows,cols] -> buf[2] dE [Vq,cols] += g rows of its tokens */
    TG_STEP_POS_BWD,      /* buf[0] g [rows,cols] -> buf[1] dwpe [P,cols] = sum of g rows by position (written) */
    /* bf16 plans (docs/BF16.md) */
    TG_STEP_CAST,         /* buf[0] x [count] fp32 -> buf[1] y [count] bf16, round to nearest even: a GEMM operand */
    /* micro-batches (spec pipeline.microbatches > 1; docs/TRAINING.md "Micro-batches") */
    TG_STEP_GRAD_ACC,     /* buf[0] grad [count] = buf[1] (the first micro-batch of a step), += buf[1] (the later ones):
                           * a weight gradient summed over the micro-batches */
    /* the optimizer state sharded over depth (spec optimizer.shard; docs/TRAINING.md "Optimizer state sharded over
     * depth"): a tensor of count elements is cut into group_size slices of ceil(count/group_size) elements (the last
     * ones shorter, possibly empty); member k of the group owns slice k */
    TG_STEP_REDUCESCATTER, /* buf[0]: [count]; member k's slice of it becomes the sum over the group of that slice (every
                            * member's part added in member order 0, 1, ..; the rest of buf[0] is left as it was) */
    TG_STEP_ALLGATHER,     /* buf[0]: [count]; every member's slice k becomes member k's slice k (a copy of its bits) */
    /* generation (spec mode = "generate"; docs/GENERATE.md). The KV cache of a layer is [nseq*context, 2*cols]: row
     * s*context + p holds K | V (the local heads side by side, as in [Q|K|V]) of local sequence s at position p */
    TG_STEP_KV_WRITE,     /* prefill: buf[0] qkv [nseq*seq, 3*cols] (bias added) -> buf[1] cache rows s*context + p,
                           * p < seq: its K and V columns */
    TG_STEP_ATTN_DECODE,  /* decode: buf[0] qkv [nseq, 3*cols] += buf[1] bias; K, V into buf[3] cache row
                           * s*context + buf[4] pos[s] (i32 [nseq]); buf[2] out [nseq, cols] = softmax(q K^T/sqrt(hdim)) V
                           * over the cache rows 0..pos[s]; buf[5] scratch [context] */
    TG_STEP_LM_ARGMAX,    /* buf[0] logits [rows, cols] -> buf[1] + boff: per row the pair (max logit, its id) over the
                           * nvalid first columns, ties to the lowest id (a float and an int32 in two 4-byte slots) */
    /* the weight-stationary layout of generation's linears (docs/GENERATE.md "The weight-stationary layout") */
    TG_STEP_COPY          /* buf[0] + soff -> buf[1] + boff: count elements (fp32), a block into its slot of a gathered
                           * buffer, or this rank's slice of a reduce-scattered one out of it */
} tg_step_kind;

/* How a phase computes its four linears (qkv, proj, fc1, fc2; spec decode_layout, docs/GENERATE.md): SUMMA (the
 * weights broadcast, DESIGN.md section 2) or weight-stationary (the activations gathered, the weights stay). */
typedef enum tg_layout { TG_LAYOUT_SUMMA = 0, TG_LAYOUT_STATIONARY = 1 } tg_layout;

/* Pseudo-layers of the language model's steps (each its own function in the generated code). */
#define TG_LAYER_EMBED (-2) /* token and position embedding (forward), their gradients (backward) */
#define TG_LAYER_HEAD (-3)  /* ln_f, the tied LM head and the loss (forward), their backward */

typedef enum tg_phase {
    TG_PHASE_FWD = 0, /* forward(): the whole stack */
    TG_PHASE_BWD = 1, /* backward(): from dL/dy in the gradient buffer to dL/dx and every weight gradient */
    TG_PHASE_OPT = 2, /* optimizer(): one AdamW step on every local shard */
    TG_PHASE_DEC = 3  /* decode(): one token per sequence through the KV cache (mode = "generate"); forward() is the
                       * prefill */
} tg_phase;

#define TG_STEP_MAXBUF 9

/* Where a backend with two streams (the CUDA backend) runs a step (streams.c). */
typedef enum tg_stream {
    TG_STREAM_NONE = -1,   /* a kind no two-stream backend can run (none today) */
    TG_STREAM_COMPUTE = 0, /* GEMMs, fused kernels, AdamW */
    TG_STREAM_COMM = 1     /* collectives */
} tg_stream;
#define TG_ACC_R 1 /* step reads the buffer */
#define TG_ACC_W 2 /* step writes the buffer */

/* How a step is described to people (tg_step_text in describe.c prints it from the step's fields and the
 * rank's coordinates, so a plan holds no rank-specific text). */
typedef enum tg_desc {
    TG_D_LABEL,       /* the label as it is */
    TG_D_ALLREDUCE,   /* "all-reduce(sum) <label> over <group>" */
    TG_D_ALLREDUCE_X, /* "all-reduce(sum, identical on every member) <label> over <group>" */
    TG_D_BCAST,       /* "bcast X(h,t) over <row>" or "bcast W(t,j) over <col>", "from rank R<label>" */
    TG_D_REDUCE,      /* "reduce(sum) P into dX(h,t) over <row>" or "P into dW(t,j) over <col>", "to rank R" */
    TG_D_SUMMA,       /* "Y(h,j) = X(h,t) @ W(t,j)  [RxK]@[KxN]" */
    TG_D_ABT,         /* "P = dY(h,j) @ W(t,j)^T ..." (q = 1: "dX(h,0) = dY(h,0) @ W(0,0)^T ...") */
    TG_D_ATB,         /* "P = X(h,t)^T @ dY(h,j) ..." (q = 1: "dW(0,0) = X(h,0)^T @ dY(h,0) ...") */
    TG_D_ATTENTION,   /* "causal softmax attention, N sequences x H local heads" */
    TG_D_ADAMW,       /* "AdamW on <param aux>[ (with weight decay)]" */
    TG_D_CAST,        /* "bf16 copy of <buf 0> for the GEMMs (round to nearest even)" */
    TG_D_RSCATTER,    /* "reduce-scatter(sum) <label> over <group>, slices of N" */
    TG_D_AGATHER      /* "all-gather <label> over <group>, slices of N" */
} tg_desc;

/* The epilogue a GEMM step carries (fuse.c). */
typedef enum tg_epi {
    TG_EPI_NONE = 0,
    TG_EPI_GELU_BIAS = 1,     /* the BIAS_GELU step after it: C = GeLU(C + bias) in place */
    TG_EPI_GELU_AUX_BIAS = 2, /* the GELU_SAVE step after it: C = C + bias kept (aux), g = GeLU(C) */
    TG_EPI_DGELU = 3,         /* the GELU_BWD step after it: C *= GeLU'(u), u the saved pre-activation (aux) */
    TG_EPI_BGRAD = 4,         /* the COLSUM step after it: db = column sums of B, the GEMM's dY (dW = X^T dY) */
    TG_EPI_D_BF16 = 5,        /* the cuDNN ATTN_BWD step after it reads the C it writes (dL/d(attention output)) only
                               * as its bf16 copy: the GEMM writes that copy (the step's slot 6) as a bf16 D from its
                               * fp32 accumulator, and the step casts nothing (not a cuBLASLt epilogue) */
    TG_EPI_LN = 6,            /* not a GEMM's: a RESID_ROWSUM step whose LN_SQDEV and LN_APPLY steps come right after
                               * it (whole rows, no collective between): the three are one row kernel on the CUDA
                               * backend (trk::resid_ln); fused = the LN_APPLY step, both LN steps' fused = this one */
    TG_EPI_LNB = 7            /* not a GEMM's: an LN_BWD_SUMS step whose LN_BWD_APPLY step comes right after it (whole
                               * rows, no all-reduce of the sums between): one row kernel on the CUDA backend (trk::
                               * ln_bwd, beside its dgamma/dbeta column kernel), which never writes the sums buffer;
                               * fused = the apply step, whose fused = this one */
} tg_epi;

typedef struct tg_step {
    tg_step_kind kind;
    tg_phase phase;
    int layer;      /* transformer block, 0-based; -1 for the optimizer */
    const char *op; /* "ln1", "qkv", "attn", "proj", "ln2", "fc1", "gelu", "fc2", "adamw" */
    int t;          /* SUMMA step, or -1 */

    /* collectives */
    tg_group group;
    int group_size;
    int root_local;   /* bcast and reduce: the root's index in the group (tg_step_root gives its rank) */
    int is_root;      /* this rank is the bcast or reduce root */
    int exact;        /* allreduce: every member gets bitwise the same sum (reduce + bcast) */
    int maxop;        /* allreduce: the maximum instead of the sum (MPI_MAX; the LM loss's row maxima) */
    int esize;        /* collectives: bytes per element of the payload (2: a bf16 broadcast; 4 otherwise) */
    long long count;  /* elements moved (bcast, reduce) or reduced (allreduce); adamw: elements */

    /* operands: ids into tg_class_plan.bufs, -1 when unused; acc = TG_ACC_* */
    int buf[TG_STEP_MAXBUF];
    unsigned char acc[TG_STEP_MAXBUF];
    /* buffers that must be live during this step although it does not touch them: the receive
     * buffers of the next SUMMA step's broadcasts, pinned to this GEMM so the next broadcast never
     * shares arena bytes with this GEMM's operands and a backend can overlap the two */
    int pin[2];

    /* shapes */
    int m, n, k, lda, ldb, ldc; /* GEMM */
    float beta;                 /* GEMM: 0 on SUMMA step 0, 1 after */
    int transa, transb;         /* GEMM: op(A) = A^T, op(B) = B^T (then lda/ldb describe the stored matrices) */
    int decay;                  /* adamw: apply weight decay (2-D weights only) */
    int rows, cols;             /* kernels: local block shape */
    int hidden;                 /* LN: full C (the divisor of the statistics) */
    double eps;                 /* LN */
    int nseq, seq, heads, hdim; /* attention: local sequences, tokens, local heads, head dim */
    int cudnn;                  /* attention steps of an attention = "cudnn" plan: cuDNN's fused path (docs/CUDA.md) */
    int vocab0, nvalid;         /* LM steps: first vocab id of the local block, ids of it below V */
    int boff;                   /* EMBED, EMBED_BWD: element offset into buf[0] (one row block's token ids); LM_ARGMAX
                                 * (into buf[1]), and the BCAST and ALLREDUCE of its pairs (into buf[0]) */
    int context;                /* KV_WRITE, ATTN_DECODE: the KV-cache length (spec model.context) */
    long long soff;             /* COPY: element offset into buf[0] (boff: into buf[1]) */
    int ws;                     /* an ALLGATHER or REDUCESCATTER of the weight-stationary layout's activations
                                 * (count divisible by group_size): counted as what each member receives and sends,
                                 * (group_size - 1) * count / group_size elements each way (optimizer.shard's: the
                                 * whole count, as an all-reduce) */
    float scale;                /* LM_DLOGITS: 1 / (batch*seq) */
    long long slice_of;         /* adamw on a slice (optimizer.shard): the parameter's elements, count being one slice,
                                 * ceil(slice_of / d) (the member of dep(i,j) picks which); 0: the whole shard */

    long long flops;

    /* streams (streams.c, the last pass): where a two-stream backend runs the step and what it waits for;
     * the CPU backend runs the steps in order and ignores them */
    int stream;          /* tg_stream */
    int wait;            /* the latest earlier step of the other stream it must wait for, or -1 */
    int wait_slot;       /* with a wait: the slot of this step and the slot of the waited step whose */
    int wait_other_slot; /* buffers share arena bytes, one of the two writing (the first such pair); else -1 */
    int signal;          /* a later step waits for this one */
    int overlaps;        /* a SUMMA bcast of step t >= 1: the GEMM before it, which it need not wait for and
                          * so runs beside; else -1 */

    /* fused epilogues (fuse.c, after streams.c): a GEMM whose result the next step alone turns into GeLU(C + bias)
     * or GeLU'(u) * C, or whose dY operand the next step alone sums by column (the bias gradient), gets
     * epi != TG_EPI_NONE and fused = that kernel step; the kernel step gets fused = the GEMM. The CUDA backend
     * runs the pair as one cuBLASLt call (trc_gemm_lt); the CPU backend runs both steps as before. A residual step
     * and the layernorm steps after it (TG_EPI_LN on the residual step), and a layernorm backward's two steps
     * (TG_EPI_LNB on the sums step), are marked the same way: one row kernel */
    int epi;   /* tg_epi */
    int fused; /* the other step of a fused pair (a TG_EPI_LN step: its last LN step; an LN step: its residual
                * step; a TG_EPI_LNB step: its apply step, and back), or -1 */
    bool again; /* a forward step run again in the backward (spec recompute), described as "recomputed: ..." */
    bool zero_first; /* EMBED_BWD on a pipeline stage without the tied head (whose GEMM writes dE first in the whole
                      * model): dE, count elements, zeroed before the adds */
    bool last_mb; /* micro-batches: runs on the last micro-batch only (a weight gradient's all-reduce or
                   * reduce-scatter over the depth or coldep group, right after that layer's last accumulation);
                   * the emitters guard it with tr_mb(c) == mb - 1, tg_step_times counts it once per step */

    /* description (describe.c): the form, a static phrase, and for adamw the parameter index */
    tg_desc desc;
    const char *label;
    int aux;
} tg_step;

typedef struct tg_buf {
    char name[48];    /* C identifier, e.g. L0_qkv, w_h0_attn_c_attn_weight, recv_L0_qkv_a */
    int rows, cols;   /* shape [rows, cols] (a vector is [1, n]) */
    long long elems;  /* rows * cols */
    int persistent;   /* live for the whole program (weights, optimizer state, I/O blocks) */
    int first, last;  /* lifetime in step indices (inclusive), from the schedule */
    long long offset; /* in floats from the arena start, 64-byte aligned */
    char what[100];   /* what it holds, for comments; "{h}" stands for the rank's row block (describe.c) */
    int dtype;        /* tg_buf_dtype: the element type */
    long long mb_stride; /* micro-batches (tg_plan.mb > 1): an I/O block holding every micro-batch of the step, whose
                          * steps see the part of the current micro-batch c->mb, mb_stride elements further per
                          * micro-batch (rows, elems: the whole block); 0 for every other buffer */
} tg_buf;

/* The element type of a buffer (docs/BF16.md says which buffers are bf16). Offsets and the arena stay in floats
 * (4-byte slots): a bf16 buffer of n elements takes ceil(n/2) slots, 64-byte aligned like every buffer. */
typedef enum tg_buf_dtype { TG_BUF_F32 = 0, TG_BUF_I32 = 1, TG_BUF_BF16 = 2 } tg_buf_dtype;
/* Bytes per element, and the 4-byte arena slots a buffer takes. */
int tg_dtype_size(int dtype);
long long tg_buf_slots(const tg_buf *b);

/* A rank's shard of one weight tensor is up to three rectangular pieces of the
 * full tensor (three for c_attn: its Q, K and V column blocks), copied side by
 * side into the local buffer. A 1-D tensor [n] is viewed as [1, n]. */
typedef struct tg_piece {
    int r0, nr, c0, nc; /* block of the full tensor */
    int dst_col;        /* column where it lands in the local [nr, cols] buffer */
} tg_piece;

typedef struct tg_param {
    char name[64]; /* Hugging Face GPT-2 name, e.g. "h.3.attn.c_attn.weight" */
    int ndim;      /* 1 or 2 */
    int full[2];   /* full shape: [rows, cols] for 2-D, [n, -] for 1-D */
    int buf;       /* local shard buffer */
    int grad, m, v; /* training: gradient and AdamW moment buffers of the same shape, else -1 */
    int w16;        /* bf16 training (docs/BF16.md): the persistent bf16 copy of the shard that the GEMMs read,
                     * written by the AdamW step right after the update (and once at start by the runtime), or -1
                     * (fp32 plans, vectors, a matrix no GEMM reads) */
    int npieces;
    tg_piece piece[3];
    int replica;   /* tg_group whose members hold bitwise-identical copies of this shard (member 0's is the
                    * canonical copy written to files), or -1 when no other rank holds it */
    long long shard; /* optimizer.shard with d > 1 and replica dep: the elements of one slice, ceil(elems/d) (the
                      * moments m, v hold one slice; member k of dep updates slice k), else 0 */
} tg_param;

/* The program of one rank class: every rank (i, j, k), k = 0..d-1, runs exactly these steps on these
 * buffers at these offsets. What differs with k (the row block h = i + q*k, the global ranks of roots
 * and group members, where the input block lies) are literals the emitters compute from the rank's
 * coordinates (mesh.c, describe.c); the plan itself holds nothing rank-specific. */
typedef struct tg_class_plan {
    int i, j;                  /* mesh row and column of the class */
    tg_step *steps;
    int nsteps;
    tg_buf *bufs;
    int nbufs;
    tg_param *params;
    int nparams;
    int x_buf;                 /* input block [R, Cq] of the residual stream */
    int y_buf;                 /* output block [R, Cq] (x_buf itself for inference: updated in place) */
    int gx_buf;                /* training: dL/dy in, dL/dx out, [R, Cq]; else -1 */
    long long arena_elems;     /* peak arena size, floats (4-byte slots) */
    long long weight_elems;    /* slots held by weight shards (a bf16 shard: half its elements, rounded up) */
    /* bytes (a bf16 broadcast moves 2 per element, everything else 4), per group: */
    long long bcast_recv[TG_NGROUPS]; /* received by bcast, whole program */
    long long bcast_sent[TG_NGROUPS]; /* sent as bcast root (logical: once per bcast) */
    long long allreduce[TG_NGROUPS];  /* all-reduced */
    /* the same for the backward (training), plus reductions: a reduce's root receives count
     * from each other member, the others send count */
    long long bwd_bcast_recv[TG_NGROUPS], bwd_bcast_sent[TG_NGROUPS], bwd_allreduce[TG_NGROUPS];
    long long bwd_reduce_recv[TG_NGROUPS], bwd_reduce_sent[TG_NGROUPS];
    /* the forward's reductions (the LM's embedding; 0 without a vocabulary) */
    long long reduce_recv[TG_NGROUPS], reduce_sent[TG_NGROUPS];
    /* optimizer.shard: the backward's reduce-scatters and the optimizer's all-gathers, bytes of the whole tensors
     * (count * 4 each, as an all-reduce counts its count); 0 without sharding */
    long long bwd_rscatter[TG_NGROUPS], opt_allgather[TG_NGROUPS];
    long long moment_elems, moment_full; /* training: elements of the AdamW moments m and v of this rank (both), and
                                          * what they would be unsharded */
    /* the language model (spec vocab > 0), else -1: token ids of the q row blocks q*k..q*k+q-1 [1, q*R] i32,
     * targets of row block h [1, R] i32, logits(h, vocab block j) [R, Vq], per-token loss [1, R] */
    int tok_buf, tgt_buf, logits_buf, loss_buf;
    /* generation (mode = "generate"), else -1: the prefill's argmax pairs of the q row blocks of the depth
     * [q*R, 2]; the decode step's token ids of those row blocks [q*nseq] i32, positions of row block h [nseq] i32,
     * logits [nseq, Vq] and pairs [q*nseq, 2]; and the first layer's KV cache (the others follow it in the plan's
     * buffers, one per layer) */
    int pairs_buf, dtok_buf, dpos_buf, dlogits_buf, dpairs_buf, kv_buf0;
    long long kv_elems; /* the KV caches of every layer, elements (4 bytes each; 2 in a bf16 plan) */
    /* the decode step's head is weight-stationary (docs/GENERATE.md "The head"): rank (i,j)'s decode logits are row
     * block j's, vocab block i (transposed against the prefill's: row block i, vocab block j) */
    int dec_logits_t;
    /* the decode step's bytes (TG_PHASE_DEC), as the forward's above: one call of decode() */
    long long dec_bcast_recv[TG_NGROUPS], dec_bcast_sent[TG_NGROUPS], dec_allreduce[TG_NGROUPS];
    long long dec_reduce_recv[TG_NGROUPS], dec_reduce_sent[TG_NGROUPS];
    /* the weight-stationary layout (tg_step.ws): bytes received (= sent) by its all-gathers and reduce-scatters, in
     * the prefill (forward) and in one decode step */
    long long ws_allgather[TG_NGROUPS], ws_rscatter[TG_NGROUPS];
    long long dec_ws_allgather[TG_NGROUPS], dec_ws_rscatter[TG_NGROUPS];
    long long dec_flops;
    long long flops;
    /* streams.c's totals: steps on the comm stream, steps that wait for the other stream, SUMMA bcasts of
     * step t >= 1, and how many of those overlap the GEMM before them */
    int comm_steps, waits, late_bcasts, overlapped_bcasts;
    /* pipeline stages: the stage of the class (tg_plan.stage); stash_elems: arena slots of the buffers one micro-batch's
     * forward keeps for its backward (written in the forward, read in the backward, not persistent: what a stage
     * must hold per in-flight micro-batch; each 64-byte aligned); stash_total: tg_plan.stash copies of them when pp > 1 (the stash that
     * the stage's peak memory adds to arena_elems), 0 with pp = 1 (the forward's buffers are in the arena) */
    int stage;
    long long stash_elems, stash_total;
} tg_class_plan;

typedef struct tg_plan {
    tg_spec spec;
    tg_mesh mesh;
    int T;    /* batch * seq tokens */
    int R;    /* T / (d*q) token rows per rank (megatron: T) */
    int Cq;   /* hidden / q (megatron: hidden) */
    int Fq;   /* ffn / q (megatron: ffn / p) */
    int D;    /* head dim: hidden / heads */
    int Hq;   /* heads / q local heads (megatron: heads / p) */
    int nseq; /* batch / (d*q) local sequences (megatron: batch) */
    int V;    /* vocabulary (0: the block stack alone) */
    int Vq;   /* ceil(V / q) (megatron: ceil(V / p)) rounded up to a multiple of model.vocab_align
               * (tg_spec_vocab_block): rows of a vocab block; Vp = q*Vq rows of the padded embedding */
    int mb;   /* micro-batches per training step (spec pipeline.microbatches; 1: none). The class program is that of
               * one micro-batch of R/mb rows (nseq/mb sequences), run mb times per step; R and nseq stay the
               * rank's whole block (the I/O), the planner's own copy has them per micro-batch (plan.c) */
    /* the schedule fingerprint (fingerprint.h), 16 hex digits: filled in by tessgen's main after
     * planning every class, then printed by the emitters into every program, and by the running
     * program, so a run names exactly the schedule it executed */
    char fingerprint[17];
    /* pipeline stages (spec mesh.pp = S > 1; docs/TRAINING.md "Pipeline stages"): the stage whose class programs
     * tg_plan_class bakes, set by tg_plan_stage; with pp = 1 stage 0 holds every block. Stage s plans only its blocks
     * l0 .. l0+nl-1: its first block reads x (stage 0: the input; later stages: the activation block received from
     * stage s-1), its last writes y (on the last stage the objective's input). stash: the most micro-batches the
     * stage holds between their forward and backward in the proved schedule (gen/pipe.c; 1 without stages) */
    int stage, l0, nl, stash;
    /* generation (mode = "generate"): the layout of the linears of the prefill (forward) and of the decode step
     * (tg_plan_init chooses them: docs/GENERATE.md); SUMMA in every other mode */
    tg_layout layout_fwd, layout_dec;
} tg_plan;

/* The mesh and the local shapes of an accepted spec (cheap; no class is baked). */
void tg_plan_init(const tg_spec *spec, tg_plan *out);
/* Point pl at pipeline stage s (0 .. spec.pp-1): its blocks and its stash from the proved schedule (gen/pipe.c);
 * false with the schedule's error when the schedule is refused. tg_plan_init leaves stage 0, which for pp = 1 is
 * the whole program. */
bool tg_plan_stage(tg_plan *pl, int s, tg_err *err);
/* Bake the program of class (i, j) (of the stage tg_plan_stage chose). */
bool tg_plan_class(const tg_plan *pl, int i, int j, tg_class_plan *out, tg_err *err);
/* Only its weight shards (params, their buffers without offsets) and residual stream block: no steps. */
bool tg_plan_class_shards(const tg_plan *pl, int i, int j, tg_class_plan *out, tg_err *err);
void tg_class_free(tg_class_plan *cp);

/* Classes are numbered i*q + j; a rank's class is that of its (i, j). Megatron: p classes (r, 0), class r
 * is rank r. */
/* How many times a step of a class plan runs per training step (and per forward): with micro-batches the forward
 * and backward steps run mb times, the gradients' all-reduces (last_mb) and the optimizer once. Every
 * per-step figure (totals, --summary, the cost model) multiplies by it. */
long long tg_step_times(const tg_plan *pl, const tg_step *s);
int tg_plan_nclasses(const tg_plan *pl);
int tg_class_of(const tg_plan *pl, int rank);
/* Pipeline stages (spec mesh.pp = S > 1): classes are keyed by (stage, i, j), class number (s*q + i)*q + j, and ranks
 * are numbered stage-major (stage s holds world ranks s*p .. s*p + p - 1, p = q*q*d, numbered inside as
 * mesh.placement says). tg_plan_stages: S (1 without stages); tg_plan_world: S*p, every rank of the program;
 * tg_plan_class_n: bake class number c (with its stage; pl itself is not changed). */
int tg_plan_stages(const tg_plan *pl);
int tg_plan_world(const tg_plan *pl);
bool tg_plan_class_n(const tg_plan *pl, int c, tg_class_plan *out, tg_err *err);
/* Every class at once, indexed by class number (small meshes, tests). */
bool tg_plan_all(const tg_plan *pl, tg_class_plan **out, tg_err *err);
void tg_plan_all_free(const tg_plan *pl, tg_class_plan *all);

/* Where rank c's block of the residual stream starts in the [T, C] view. */
int tg_io_r0(const tg_plan *pl, tg_coord c);
int tg_io_c0(const tg_plan *pl, tg_coord c);
/* The global rank of a bcast's or reduce's root, as rank c runs the step (-1 for other steps). */
int tg_step_root(const tg_plan *pl, tg_coord c, const tg_step *s);

const char *tg_step_kind_name(tg_step_kind k); /* "bcast", "allreduce", "gemm", ... */

/* Generation's layouts (docs/GENERATE.md "Choosing the layout"): the bytes that the four linears of every layer make
 * the busiest rank receive in one call of a phase of R rows per rank (R = nseq: the decode step; nseq*seq: the
 * prefill) under layout lay (head: and the head's, as the decode step computes it), and its name ("summa",
 * "stationary"). */
long long tg_layout_recv_bytes(const tg_plan *pl, tg_layout lay, long long R, bool head);
const char *tg_layout_name(tg_layout lay);

#endif
