/*
 * tr_tokens.h - the language model's inputs and outputs in the runtime
 * (docs/MODEL.md): --tokens and --targets (int32 [batch, seq] .npy, every id
 * in [0, vocab), validated on rank 0 before any rank reads), synthetic ids
 * from --seed without them, the zero pad rows of the token embedding, the
 * mean loss over all tokens, and --logits-out ([batch, seq, vocab] float32,
 * pad columns removed, gathered to rank 0 and written atomically).
 */
#ifndef TR_TOKENS_H
#define TR_TOKENS_H

#include <stdbool.h>
#include <stdint.h>

#include "tr.h"
#include "tr_err.h"

typedef struct tr_lm_opts {
    const char *tokens, *targets, *logits_out;
} tr_lm_opts;

/* This program's language model part (all zero for a stack of blocks) and its vocabulary (0: none). */
const tr_lm_desc *tr_lm(void);
int tr_lm_vocab(void);

/* argv[*a] is one of --tokens, --targets, --logits-out: store its value and advance *a (1); another option (0);
 * an error in err (-1). */
int tr_lm_parse_arg(tr_lm_opts *o, int argc, char **argv, int *a, tr_err *err);
/* The options fit the program (they need a vocabulary). */
bool tr_lm_check_opts(const tr_lm_opts *o, tr_err *err);
/* Rank 0, before any work: can --logits-out be written? */
bool tr_lm_check_outputs(const tr_lm_opts *o, tr_err *err);
/* Zero the pad rows of this rank's wte shard (ids >= vocab) in H, and of its AdamW moments in training. */
void tr_lm_zero_pad(const tr_rank_desc *d, float *H);
/* Collective: fill the token and target buffers in H from the files (rank 0 validates them first, one message,
 * the same verdict everywhere) or synthetic ids from seed. False (message printed) on a bad file. */
bool tr_lm_load_ids(const tr_rank_desc *d, const tr_lm_opts *o, uint64_t seed, float *H);
/* Collective: the mean per-token loss over all batch*seq tokens from the loss buffers in H. */
double tr_lm_mean_loss(const tr_rank_desc *d, const float *H);
/* Does this rank's per-token loss [io_rows] count in the mean (each token counted once over the ranks)? */
bool tr_lm_counts_loss(const tr_rank_desc *d);
/* Collective: gather the logits in H to rank 0 and write them to path ([batch, seq, vocab], atomically). */
bool tr_lm_write_logits(const tr_rank_desc *d, const char *path, const float *H, tr_err *err);

#endif
