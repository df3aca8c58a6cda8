/*
 * tr_hfnames.h - the Hugging Face name conventions of a GPT-2 weights file:
 * GPT2Model.save_pretrained writes the blocks as "h.<l>.<rest>" (tessgen's own
 * names), GPT2LMHeadModel.save_pretrained as "transformer.h.<l>.<rest>". A file
 * is read under one of the two; outputs are always written with the plain names.
 */
#ifndef TR_HFNAMES_H
#define TR_HFNAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "tr_err.h"
#include "tr_stset.h"

#define TR_HF_LM_PREFIX "transformer."

/* The block of a name "h.<l>.<rest>" (l without leading zeros), or -1. */
long tr_hf_block_of(const char *name);
/* The block of a tensor name under a prefix ("" or TR_HF_LM_PREFIX), or -1. */
long tr_hf_block_under(const char *name, const char *prefix);
/* Which convention the weights f (one file or a sharded checkpoint) use for their block tensors: *prefix gets ""
 * or TR_HF_LM_PREFIX. Weights with block tensors of both forms are refused, naming a tensor stored both ways if
 * there is one, else one of each form. */
bool tr_hf_prefix(const tr_stset *f, const char **prefix, tr_err *err);
/* prefix + name into buf (names are shorter than TR_ST_NAME_CAP, the prefix is short). */
const char *tr_hf_prefixed(char *buf, size_t cap, const char *prefix, const char *name);

/* What model a GPT-2 weights file holds, read from its names and shapes (-1: the file does not say): layers
 * (the deepest block h.<l> + 1), hidden (h.0.ln_1.weight), ffn (h.0.mlp.c_fc.weight's columns), vocab and
 * positions (wte.weight's and wpe.weight's rows; -1 in a file of blocks only). */
typedef struct tr_hf_model {
    long layers, hidden, ffn, vocab, positions;
} tr_hf_model;
void tr_hf_file_model(tr_stset *f, const char *prefix, tr_hf_model *m);
/* m as people read it: "3 layers, hidden 32, ffn 128, vocab 50257, 1024 positions" (the known figures). */
const char *tr_hf_model_text(char *buf, size_t cap, const tr_hf_model *m);

#endif
