/*
 * tr_gather.h - moving distributed results to rank 0 and checking replicas:
 * the residual-stream-shaped blocks (output, dL/dx) as one [batch, seq, hidden]
 * .npy, the weight shards or their gradients as one safetensors file with the
 * Hugging Face names, and a bitwise comparison of every replicated shard with
 * its canonical copy. Every rank must call these together (they are
 * collective over MPI_COMM_WORLD or the rank's groups).
 */
#ifndef TR_GATHER_H
#define TR_GATHER_H

#include "tr_ctx.h"
#include "tr_safetensors.h"

/* Gather each rank's [io_rows, io_cols] block (host memory) and write [batch, seq, hidden] to path. */
bool tr_gather_block_npy(const tr_rank_desc *d, const char *path, const float *block, int stage, tr_err *err);

/* Gather every parameter (grads = 0) or its gradient (grads = 1; dep as tr_gather_full) from the host arena H and write
 * the full tensors to path as safetensors of dtype (TR_ST_F32 or TR_ST_BF16, tr_safetensors.h). The
 * copy of depth 0 (and row 0 for vectors) is written; tr_gather_replica_check says whether the
 * others agree. */
bool tr_gather_params(const tr_rank_desc *d, MPI_Comm dep, const float *H, int grads, const char *path,
                      tr_st_dtype dtype, tr_err *err);

/* Which per-parameter array of the arena tr_gather_full gathers. */
enum { TR_GATHER_WEIGHTS = 0, TR_GATHER_GRADS = 1, TR_GATHER_ADAM_M = 2, TR_GATHER_ADAM_V = 3 };

/* Collective: the full tensors of every parameter's `which` array in the host arena H, from the canonical
 * copies (as tr_gather_params writes them). On rank 0 *full gets d->nparams malloc'd arrays, [full[0]] or
 * [full[0], full[1]] row-major each, to free with tr_gather_full_free; elsewhere NULL. False on every rank
 * when rank 0 runs out of memory (or a training array is asked of an inference program).
 * optimizer.shard: the moments and the gradients of a sliced parameter (tr_param.shard > 0) exist as one slice per
 * member of the depth group; they are made whole over dep (the rank's TR_DEP communicator, collective over it; a
 * program without shard, or which = TR_GATHER_WEIGHTS, may pass MPI_COMM_NULL), so the result is the unsharded
 * program's layout: a checkpoint or gradient file of either program is the same format. */
bool tr_gather_full(const tr_rank_desc *d, MPI_Comm dep, const float *H, int which, float ***full, tr_err *err);
void tr_gather_full_free(const tr_rank_desc *d, float **full);

/* Collective over comm (MPI_COMM_WORLD, or one pipeline stage's ranks, which all hold parameter i): parameter i's
 * `which` array (TR_GATHER_*) made full on comm's rank `root` from the canonical shards, as tr_gather_full makes
 * every tensor on rank 0, so no rank holds more than one full tensor (and its p gathered shards) at a time. On
 * root *out gets the malloc'd [full[0]] or [full[0], full[1]] array, elsewhere NULL. False on every rank of comm
 * when one runs out of memory. dep as tr_gather_full. */
bool tr_gather_one(const tr_rank_desc *d, MPI_Comm dep, MPI_Comm comm, const float *H, int which, int i, int root,
                   float **out);

/* Pipeline stages (tr_pipe_class.stages > 1): the full tensors of every stage's `which` array (TR_GATHER_*), each
 * stage gathered to its first rank, which sends them to world rank 0. On rank 0 *out gets *count tensors in the
 * pp = 1 program's order (stage 0's, then each later stage's; the last stage's tied copy of wte left out: stage
 * 0's is the canonical one), each data malloc'd (free it, then the array); elsewhere NULL and 0. Collective over
 * MPI_COMM_WORLD; false on every rank when a stage's gather fails (the message in err on the ranks that saw it). */
typedef struct tr_gather_tensor {
    char name[64];
    int ndim;
    long long shape[2]; /* shape[1] is 0 for a vector */
    float *data;
} tr_gather_tensor;
bool tr_gather_stages(const tr_rank_desc *d, MPI_Comm dep, const float *H, int which, tr_gather_tensor **out,
                      int *count, tr_err *err);

/* Compare every parameter shard bitwise with the same block on member 0 of its replica group
 * (dep(i,j) for matrices, coldep(j) for vectors). Returns the number of mismatching shards over
 * all ranks (0 on every rank when all replicas are identical). */
long long tr_gather_replica_check(tr_ctx *c, const float *H);

/* The first parameter, in the model's order (the same on every rank), whose values (grads = 0)
 * or gradients (grads = 1) in the host arena H hold a NaN or an infinity on any rank; -1 if
 * none. *count gets how many elements of the full tensor are non-finite (each counted once:
 * replicas are skipped) and *first the smallest row-major index of one in the full tensor.
 * Collective over MPI_COMM_WORLD; every rank gets the same answer, except with pipeline stages: a rank of another
 * stage than the tensor's gets d->nparams (>= 0: found, its name unknown there). */
int tr_gather_nonfinite(const tr_rank_desc *d, const float *H, int grads, long long *count, long long *first);

/* The largest magnitude |value| of any parameter over all ranks in *max, and that parameter's name in name (as the
 * rank holding it names it: with pipeline stages the ranks hold different tensors; the lowest rank on a tie), on
 * every rank. Collective over MPI_COMM_WORLD. */
void tr_gather_max_abs(const tr_rank_desc *d, const float *H, double *max, char *name, size_t cap);

#endif
