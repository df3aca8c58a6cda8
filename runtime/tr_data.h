/*
 * tr_data.h - the training data loader: batches of token ids read from token
 * shards on disk, llm.c style, each rank reading only the sequences it needs.
 *
 * Design. A data source is a PATTERN: one file, a comma-separated list of
 * files and directories, or a directory (each directory stands for every
 * "*.bin" and "*.npy" in it whose name does not start with '.', sorted by name
 * with strcmp, so the order never depends on the file system or the locale).
 * A shard is either
 *   - llm.c's .bin: a header of 256 int32 little-endian, [0] magic 20240520,
 *     [1] version 1, [2] number of tokens N; then N uint16 little-endian tokens;
 *     the file is exactly 1024 + 2*N bytes; or
 *   - a .npy of '<i4' (little-endian int32), shape [N] or [R, C] (taken in C
 *     order as one stream of N = R*C tokens), read with runtime/tr_npy.c.
 * The kind is told by the content (a file starting "\x93NUMPY" is a .npy),
 * not by the name. Every shard is validated at open (header, count against
 * size, dtype and shape, at least one batch of B*S+1 tokens); nothing after
 * the headers is read until a batch is asked for, and then only with pread of
 * exactly the bytes of the sequences asked for (no whole-file read). Only the
 * shard being read is held open (one descriptor per loader, however many
 * shards), and it is checked to have kept its size when it is opened again.
 * Every token read is checked: 0 <= id < vocab.
 *
 * The batch rule (llm.c's). The position is (shard, offset): a global batch
 * is the B*S+1 contiguous tokens t[offset .. offset+B*S] of that shard;
 * sequence b (0 <= b < B) has
 *   inputs[b][s]  = t[offset + b*S + s]         s = 0..S-1
 *   targets[b][s] = t[offset + b*S + s + 1]
 * tr_data_next then advances offset by B*S; when the next batch does not fit
 * (offset + B*S + 1 > N of the shard) it moves to offset 0 of the next shard,
 * and after the last shard back to the first, counting one more epoch. The
 * tail of a shard that does not fill a batch is skipped. Every rank opens the
 * same pattern with the same B, S and calls tr_data_next once per step, so all
 * ranks agree on the position without communicating.
 *
 * The position is state a checkpoint saves: tr_data_pos_format prints
 *   "data v1 shards=N fp=XXXXXXXXXXXXXXXX shard=I offset=O epoch=E batches=K"
 * (fp: a 64-bit FNV-1a over the shards' base names, kinds and token counts),
 * tr_data_pos_parse reads exactly that back (strict: one space between
 * fields, decimal digits only, nothing else), and tr_data_restore refuses a
 * position of another shard set (fingerprint or count differ) or one whose
 * batch does not fit its shard, then makes it the current position.
 *
 * A validation split is the same loader opened on another pattern; call
 * tr_data_reset before each evaluation to read its first batches again.
 *
 * Errors follow tr_err.h: each message names the file (or the pattern), what
 * is wrong and the fix. A refused open leaves the loader closed
 * (tr_data_close is then a no-op).
 */
#ifndef TR_DATA_H
#define TR_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tr_err.h"

#define TR_DATA_BIN_MAGIC 20240520
#define TR_DATA_BIN_VERSION 1
#define TR_DATA_BIN_HEADER 1024 /* bytes: 256 int32 */
/* Most shards in one pattern (a directory of more is refused: name fewer). */
#define TR_DATA_MAX_SHARDS 100000
/* Longest position string tr_data_pos_format writes, with its NUL. */
#define TR_DATA_POS_CAP 160

typedef enum tr_data_kind { TR_DATA_BIN = 1, TR_DATA_NPY = 2 } tr_data_kind;

typedef struct tr_data_shard {
    char *path;           /* as named by the pattern (directory + "/" + name for a directory entry) */
    tr_data_kind kind;
    uint64_t size;        /* file size in bytes when validated */
    uint64_t data_off;    /* byte offset of token 0 in the file */
    int elem;             /* bytes per token: 2 (.bin, uint16) or 4 (.npy, int32) */
    int64_t ntok;         /* tokens in the shard */
} tr_data_shard;

/* Where the loader is: the batch that tr_data_read reads next. */
typedef struct tr_data_pos {
    uint64_t fingerprint; /* of the shard set it belongs to */
    int64_t nshards;      /* shards in that set */
    int64_t shard;        /* 0..nshards-1 */
    int64_t offset;       /* token offset of the batch's first token in that shard */
    int64_t epoch;        /* completed passes over all shards */
    int64_t batches;      /* batches served (tr_data_next calls) since the start */
} tr_data_pos;

typedef struct tr_data {
    char *pattern;          /* the pattern as given (messages) */
    int nshards;
    tr_data_shard *shards;  /* [nshards], in the documented order */
    int64_t B, S;           /* sequences per global batch, tokens per sequence */
    int64_t vocab;          /* token ids must be in [0, vocab) */
    uint64_t fingerprint;
    tr_data_pos pos;
    int fd;                 /* the shard being read, open read-only for pread; -1: none */
    int fd_shard;           /* which shard fd is */
    unsigned char *scratch; /* [(B*S+1) * 4] raw bytes of one pread */
} tr_data;

/* Open every shard of pattern and validate it for global batches of B
 * sequences of S tokens over a vocabulary of `vocab` ids (1..2^31-1;
 * B*S + 1 <= 2^31 - 1). The position starts at shard 0, offset 0, epoch 0. */
bool tr_data_open(tr_data *dl, const char *pattern, int64_t B, int64_t S, int64_t vocab, tr_err *err);

/* Close every shard and free; safe on a closed or failed-to-open loader. */
void tr_data_close(tr_data *dl);

/* Sequences b0 .. b0+nb-1 of the current batch (0 <= b0, 1 <= nb, b0+nb <= B):
 * inputs [nb, S] and targets [nb, S], row-major int32, inputs[r*S + s] =
 * t[offset + (b0+r)*S + s], targets[r*S + s] = t[offset + (b0+r)*S + s + 1].
 * One pread of nb*S+1 tokens. A token outside [0, vocab) is refused naming
 * the file, its index in the shard and its value. Does not move the position. */
bool tr_data_read(tr_data *dl, int64_t b0, int64_t nb, int32_t *inputs, int32_t *targets, tr_err *err);

/* Advance to the next batch (the rule above). */
void tr_data_next(tr_data *dl);

/* Back to the first batch: shard 0, offset 0, epoch 0, batches 0 (validation). */
void tr_data_reset(tr_data *dl);

/* The current position. */
tr_data_pos tr_data_tell(const tr_data *dl);

/* Batches in one pass over every shard: the sum of floor((N-1) / (B*S)). */
int64_t tr_data_epoch_batches(const tr_data *dl);

/* Make pos the current position after checking it belongs to this shard set
 * (same fingerprint and count) and its batch fits its shard. */
bool tr_data_restore(tr_data *dl, const tr_data_pos *pos, tr_err *err);

/* Print pos as the position string into buf[cap] (TR_DATA_POS_CAP is
 * enough); returns the length, or -1 when it does not fit (buf then holds ""). */
int tr_data_pos_format(const tr_data_pos *pos, char *buf, size_t cap);

/* Parse a position string (exactly the form tr_data_pos_format prints);
 * `what` names where it came from in messages ("checkpoint x.st"; NULL:
 * "position"). */
bool tr_data_pos_parse(const char *s, const char *what, tr_data_pos *pos, tr_err *err);

/* One line about the loader for a run's log, e.g.
 * "data/tiny/train.bin: 1 shard, 33960 tokens, 265 batches of 4x32 per epoch". */
void tr_data_describe(const tr_data *dl, char *buf, size_t cap);

#endif
