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

#include <mpi.h>

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

/* Sampling of generation (run --generate --temperature T --top-k K --top-p P --seed S; docs/GENERATE.md, "Sampling").
 * The choice of a row is a Gumbel-max: argmax over the kept ids v of logit_v / T + G(seed, sequence, position, v),
 * G = -log(-log(u)) with u in (0,1) from a counter-based hash (splitmix64 chained over the four keys), so it
 * depends on the logits and those keys only, not on how the vocabulary is split. Kept: every id, or the top-k by
 * logit (ties to the lower id), then of those the smallest prefix (descending probability of softmax(logit/T) over
 * them) whose mass reaches P. on == 0: greedy (the program's own argmax). */
typedef struct tr_sample_opts {
    int on;             /* any of --temperature, --top-k, --top-p was given */
    double temperature; /* > 0; 1 unless given */
    int top_k;          /* 0: no top-k */
    double top_p;       /* (0, 1]; 1: no top-p */
    uint64_t seed;
} tr_sample_opts;

/* The Gumbel noise of (seed, sequence, position, id) (tests/ref/tessref.py gumbel computes the same bits). */
double tr_sample_gumbel(uint64_t seed, uint64_t sequence, uint64_t position, uint64_t id);
/* Collective over row (the members holding the other vocab blocks; this one block j of vq columns, ids j*vq + v
 * below vocab): the sampled id of each of rows rows of lg [rows, vq], row r keyed by seq[r] and pos[r], into
 * chosen[r], the same on every member. Top-k or top-p all-gather each block's min(k, vq) best logits (top-p alone:
 * the whole block) with their ids; temperature alone all-reduces (max, id) pairs. False: out of memory. */
bool tr_sample_rows(MPI_Comm row, int j, const float *lg, int rows, int vq, int vocab, const int *seq, const int *pos,
                    const tr_sample_opts *so, int32_t *chosen);

#endif
