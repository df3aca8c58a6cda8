/*
 * tr_ckpt.h - training checkpoints: write them (--checkpoint-out, --checkpoint-every) and resume from
 * one (--resume, --reshard). docs/TRAINING.md "Checkpoints" is the user's description.
 *
 * Format: one safetensors file with the full tensors, gathered from the canonical shards as
 * --weights-out gathers them (tr_gather_full): every parameter under its name, its AdamW moments as
 * adam_m.<name> and adam_v.<name>, all F32, and a __metadata__ object of strings: "format"
 * (TR_CKPT_FORMAT), "step" (AdamW steps done), "seed", "data_pos" (the data loader's position,
 * tr_ckpt_set_data_pos), "data" (the data the run trained on, tr_ckpt_set_data), "model.*" (layers, hidden, heads, ffn, seq, batch, eps), "optimizer.*" (the
 * AdamW settings, the schedule and clip), "mesh" and "mesh.strides" (tr_mesh_text; si,sj,sk of the
 * placement), "dtype" (the spec's: "fp32" or "bf16"), "fingerprint", "name", "tessgen", and "checksum" (FNV-1a 64 over the tensors' bytes in
 * model order: each parameter, then its two moments), "mesh.pp" and "mesh.stages" (the pipeline stages and each
 * one's blocks, "0-0,1-1"). Written by rank 0 atomically (temp file, fsync, rename): a failed or killed write leaves
 * the previous checkpoint as it was. Pipeline stages: the tensors of every stage, gathered as --weights-out gathers
 * them (tr_gather_stages; the last stage's tied copy of wte left out), so the file is the pp = 1 program's.
 *
 * Sharded (--checkpoint-shards; tr_ckpt_write given "<dir>/model.safetensors.index.json" or its ".pending"): each
 * tensor made full on one writer (tr_gather_one: the least loaded rank of its stage so far), each writer's tensors
 * one shard file "<dir>/ckpt-s<step>-<unique>-r<rank>.safetensors" (its __metadata__: format
 * "tessgen-checkpoint-1-shard" and step), then rank 0 writes the index last ({"metadata": the metadata above,
 * "weight_map": {tensor: shard}}; its checksum "fnv1a64-tensors:" is FNV-1a 64 over each tensor's own FNV-1a 64, 8
 * bytes little-endian, in model order) and removes the directory's ckpt-* files no index or pending index names. No
 * rank holds more than its share of the tensors; a write killed before its index leaves the index naming the
 * previous checkpoint, whose shards are still there.
 *
 * Resume (a file, or a sharded checkpoint's directory or index, read through tr_stset): rank 0 validates the whole
 * checkpoint first (the reader's checks, the format tag, the model's
 * dimensions, the mesh and the dtype unless reshard, every tensor present as F32 of its full shape and no other, the
 * checksum) and shares the verdict; then every rank copies its pieces of the full tensors, exactly as
 * --weights does, so a checkpoint of another mesh re-shards on load. Weights and moments are restored
 * bitwise; the step continues from the checkpoint's (AdamW's bias correction and the learning-rate
 * schedule with it). Generic over the rank's parameter list. optimizer.shard: a program whose moments hold
 * one slice per depth member writes them gathered whole and takes its own slice on resume, so a checkpoint
 * moves between sharded and unsharded programs (and meshes, with --reshard) as any other.
 */
#ifndef TR_CKPT_H
#define TR_CKPT_H

#include <stdbool.h>
#include <stdint.h>

#include "tr.h"
#include "tr_err.h"

#define TR_CKPT_FORMAT "tessgen-checkpoint-1"
/* Sharded checkpoints (--checkpoint-shards): the shard files' names start with this; the directory's files so named
 * that no index names are removed after each write (tr_ckpt_write, tr_ckpt_promote, tr_ckpt_discard). */
#define TR_CKPT_SHARD_PREFIX "ckpt-"
#define TR_CKPT_DATA_POS_CAP 1024 /* bytes of the data position, with its NUL */
#define TR_CKPT_DATA_CAP 1024     /* bytes of the data record, with its NUL */

/* The data loader's position, stored in the next checkpoint written ("" until set) and set from the
 * checkpoint by tr_ckpt_resume. An opaque string (UTF-8, at most TR_CKPT_DATA_POS_CAP - 1 bytes; false
 * if longer or not UTF-8, the position is then unchanged). The same on every rank. */
bool tr_ckpt_set_data_pos(const char *pos);
const char *tr_ckpt_data_pos(void);

/* The data the run trains on, recorded in the next checkpoint written as "data": "synthetic" (token ids, or
 * input and target, from the seed) or the options as given ("--data P", "--tokens T --targets Y", "--input X
 * --target Y"). Bytes that are not UTF-8 become '?', a longer record is cut at TR_CKPT_DATA_CAP - 1 bytes. A
 * resumed run that trains compares its record with the checkpoint's (tr_ckpt_resume). The same on every rank. */
void tr_ckpt_set_data(const char *record);
const char *tr_ckpt_data(void);

#ifndef TR_CKPT_READER_ONLY /* the fuzz harness's build: no MPI */
#include <mpi.h>

/* Collective over MPI_COMM_WORLD: write the weights and AdamW moments of the host arena H, with `step`
 * steps done and `seed`, to path (rank 0, atomically; path named "model.safetensors.index.json" or that with
 * TR_CKPT_PENDING_SUFFIX: the sharded checkpoint of its directory, created if missing). False on every rank on failure, with the message
 * in rank 0's err. optimizer.shard: each sliced moment is made whole over dep (the rank's depth-group
 * communicator; MPI_COMM_NULL without shard) first, so the file is the format above either way. */
bool tr_ckpt_write(const tr_rank_desc *d, MPI_Comm dep, const float *H, const char *path, long long step,
                   uint64_t seed, tr_err *err);
#endif

/* --checkpoint-every: the checkpoint of step k is written (tr_ckpt_write) to TR_CKPT_PENDING(path) =
 * "<path>.pending" and replaces path only once step k+1's loss and gradients are finite, so a diverging run
 * never replaces the last good checkpoint. Collective: rename pending over path (rank 0; then the directory is
 * fsynced); false on every rank on failure, the message in rank 0's err, path as it was. */
#define TR_CKPT_PENDING_SUFFIX ".pending"
bool tr_ckpt_promote(const tr_rank_desc *d, const char *pending, const char *path, tr_err *err);
/* Rank 0 removes pending (the other ranks do nothing): its step turned out not good, or the run stops early. */
void tr_ckpt_discard(const tr_rank_desc *d, const char *pending);

/* What a checkpoint tells the loop besides the tensors. */
typedef struct tr_ckpt_state {
    long long step; /* AdamW steps done */
    uint64_t seed;  /* the --seed of the run that wrote it */
    char mesh[64];  /* the mesh that wrote it ("[2,2,1]"), for a note when it differs (--reshard) */
    char note[512]; /* the optimizer settings that differ from the build's, "" when none */
    char dtype[16]; /* its dtype ("fp32", "bf16"), "" if it has none; another than the build's needs reshard */
    char data[TR_CKPT_DATA_CAP]; /* the data record it was trained on (tr_ckpt_set_data), "" if it has none */
} tr_ckpt_state;

/* Collective: validate path on rank 0 (reshard: accept a checkpoint of another mesh; check_data: refuse one
 * trained on other data than tr_ckpt_data(), token shards of any path counting as the same: the loader's
 * position then checks the shard set), then load this rank's pieces of every parameter and both moments into H and check them finite (v >= 0). False on
 * every rank when refused; the message is in rank 0's err, nothing loaded is used. */
bool tr_ckpt_resume(const tr_rank_desc *d, const char *path, int reshard, int check_data, float *H,
                    tr_ckpt_state *st, tr_err *err);

/* Rank 0's whole validation of path, no MPI (what tr_ckpt_resume runs before any rank loads; the fuzz harness
 * tests/fuzz/fuzz_ckpt.c calls it alone): fills st (step, seed, mesh, note, dtype, data) and pos (the data
 * position, TR_CKPT_DATA_POS_CAP bytes). False with the message in err, naming path. */
bool tr_ckpt_check(const tr_rank_desc *d, const char *path, int reshard, int check_data, tr_ckpt_state *st,
                   char *pos, tr_err *err);

#endif
