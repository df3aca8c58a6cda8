/*
 * tr_lmdata.h - a language model trained from token shards: `run --data P
 * [--val-data P2 --val-every N --val-batches M]` (docs/TRAINING.md "Training
 * from token shards").
 *
 * Design. The loader (tr_data.h) knows shards and batches; the LM's token
 * buffers (tr_tokens.h, docs/MODEL.md) say which ids a rank needs. This file
 * joins the two and nothing else: before each step every rank reads, with
 * tr_data_read, only the sequences of its buffers -
 *   tokens  [q*R] int32: the row blocks h' = i' + q*k, i' = 0..q-1, of its
 *           column group at its depth (the embedding's reduction needs them),
 *           sequences q*k*nseq .. (q*k + q)*nseq - 1 of the global batch;
 *   targets [R]   int32: its own row block h = i + q*k, sequences
 *           io_r0/S .. io_r0/S + nseq - 1;
 * (R = batch*seq/(d*q) rows, nseq = R/seq) - puts them into the host arena and
 * uploads them to the run arena. Every rank opens the same patterns and
 * advances once per step, so the position agrees without communication; each
 * open and read ends in one collective verdict, so a bad shard or a token id
 * beyond the vocabulary stops every rank with one message. The position is
 * given to the checkpoint after every step (tr_ckpt_set_data_pos), and a
 * resumed run continues from the checkpoint's position.
 */
#ifndef TR_LMDATA_H
#define TR_LMDATA_H

#include <stdbool.h>

#include "tr_ctx.h"
#include "tr_data.h"

typedef struct tr_lmdata_opts {
    const char *data, *val_data; /* --data, --val-data patterns (tr_data.h) */
    int val_every;               /* --val-every N: validation loss every N steps (and after the last) */
    int val_batches;             /* --val-batches M: batches per validation (default 4, at most the split's) */
} tr_lmdata_opts;

typedef struct tr_lmdata {
    tr_data train, val;
    int have_train, have_val;
    int val_batches; /* what a validation reads: min(--val-batches, batches in one epoch of the split) */
} tr_lmdata;

/* argv[*a] is one of --data, --val-data, --val-every, --val-batches: store it and advance *a (1); another
 * option (0); an error in err (-1). */
int tr_lmdata_parse_arg(tr_lmdata_opts *o, int argc, char **argv, int *a, tr_err *err);
/* The options fit each other and the program (a language model; training for --data). */
bool tr_lmdata_check_opts(const tr_lmdata_opts *o, int steps, int have_tokens, tr_err *err);

/* Collective: open the patterns of o (every rank; one verdict, the message printed once). False: nothing open. */
bool tr_lmdata_open(tr_lmdata *ld, const tr_lmdata_opts *o, const tr_rank_desc *d);
void tr_lmdata_close(tr_lmdata *ld);
/* Collective: continue from the checkpoint's position string (tr_ckpt_data_pos); "" (a checkpoint of a run
 * without --data) starts at the first batch, with a note. False on every rank when refused. */
bool tr_lmdata_resume(tr_lmdata *ld, const char *pos, const tr_rank_desc *d, int quiet);
/* Collective: this rank's token and target ids of the current batch of dl into H and the run arena A. */
bool tr_lmdata_fill(tr_ctx *c, tr_data *dl, float *H, float *A);
/* After a step: advance the training loader and hand its position to the checkpoint. */
void tr_lmdata_next(tr_lmdata *ld);

#endif
