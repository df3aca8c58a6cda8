/*
 * tr_stset.h - the weights a run reads, as one set of named tensors, whether
 * they are one safetensors file or Hugging Face's sharded layout: an index
 * (model.safetensors.index.json, {"metadata": {...}, "weight_map": {tensor:
 * shard file}}) naming, for every tensor, the shard file beside it that holds
 * it. `--weights` takes a file, an index, or a directory holding either
 * model.safetensors or model.safetensors.index.json (not both).
 *
 * tr_stset_open(..., validate = true) (rank 0) checks everything once: the
 * index's JSON, every shard name (a plain file name: no '/', no ".."), every
 * shard opened and validated as a safetensors file, every tensor found in the
 * shard the map names, no tensor in two shards and none a shard holds that the
 * map does not list. With validate = false (the other ranks) only the index is
 * read; a shard is opened (mapped) the first time one of its tensors is asked
 * for, so a rank maps only the shards holding its blocks. Reads then go to the
 * one shard that holds the tensor, exactly as for a single file.
 */
#ifndef TR_STSET_H
#define TR_STSET_H

#include <stdbool.h>
#include <stdint.h>

#include "tr_err.h"
#include "tr_safetensors.h"

#define TR_STSET_FILE "model.safetensors"
#define TR_STSET_INDEX "model.safetensors.index.json"

typedef struct tr_stset_entry {
    const char *name; /* the tensor's name (storage owned by the set) */
    int shard;        /* index into shards */
} tr_stset_entry;

typedef struct tr_stset {
    char path[1100];         /* the file or the index, as messages name it */
    bool sharded;            /* read through an index */
    char dir[1100];          /* the index's directory (sharded only) */
    int nshards;
    char **shard_name;       /* [nshards] file names in dir, sorted (sharded); the file's path otherwise */
    tr_st_file *shards;      /* [nshards], each opened on first use */
    int ntensors;
    tr_stset_entry *entries; /* [ntensors], sorted by name */
    char *names;             /* the sharded entries' names */
} tr_stset;

/* Open path (a safetensors file, an index ending in ".json", or a directory holding model.safetensors or
 * model.safetensors.index.json). validate: open and check every shard against the index now (rank 0); else
 * read only the index and open shards on first use. On failure the set is left closed (tr_stset_close is a
 * no-op) and err names the file, the tensor and the shard at fault. */
bool tr_stset_open(tr_stset *s, const char *path, bool validate, tr_err *err);

/* Tensor i of the set in name order, i in 0..ntensors-1. */
static inline const char *tr_stset_name(const tr_stset *s, int i) { return s->entries[i].name; }

/* Does the set hold a tensor called name? */
bool tr_stset_has(const tr_stset *s, const char *name);

/* The header entry (dtype, shape) of tensor name, or NULL when the set does not hold it or its shard cannot
 * be opened. */
const tr_st_tensor *tr_stset_tensor(tr_stset *s, const char *name);

/* tr_st_expect_float and tr_st_read_block on the shard holding name (opened if needed). */
bool tr_stset_expect_float(tr_stset *s, const char *name, int ndim, const int64_t *shape, tr_err *err);
bool tr_stset_read_block(tr_stset *s, const char *name, int64_t r0, int64_t nr, int64_t c0, int64_t nc, float *dst,
                         int64_t ldd, tr_err *err);

/* Unmap every open shard, free everything; safe on a closed set. */
void tr_stset_close(tr_stset *s);

#endif
