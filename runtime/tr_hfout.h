/*
 * tr_hfout.h - `run --hf-out DIR`: the weights after the run as a directory
 * that transformers' GPT2LMHeadModel.from_pretrained(DIR) loads:
 * DIR/config.json (GPT-2's keys, from the built model) and DIR/model.safetensors
 * (every parameter under GPT2LMHeadModel's name, "transformer." + tessgen's
 * name; F32, or BF16 with --out-dtype bf16; tied LM head, so no lm_head.weight),
 * plus DIR/.tessgen-hf-export, the mark of a tessgen export.
 *
 * Atomic: everything is written into the sibling DIR.tmp.<pid>, which then
 * replaces DIR in one rename (an exchange where the kernel has one). DIR may be
 * absent or a previous tessgen export (a directory holding the mark and only the
 * files an export writes); anything else is refused before the run, so a
 * directory with other files (a tokenizer, notes) is never replaced. A failing
 * export removes its temp directory and leaves DIR as it was.
 */
#ifndef TR_HFOUT_H
#define TR_HFOUT_H

#include <stdbool.h>

#include "tr_ctx.h"
#include "tr_err.h"
#include "tr_safetensors.h"

#define TR_HFOUT_MARK ".tessgen-hf-export"

/* The model as config.json describes it. vocab and positions are 0 while the model has no embeddings. */
typedef struct tr_hfout_model {
    int vocab, positions;
    int layers, hidden, heads, ffn;
    double eps;
} tr_hfout_model;

/* The built model (tr_model) as config.json describes it; refused (naming the spec keys to add) when it has
 * no embeddings, since transformers cannot load a model without them. */
bool tr_hfout_model_of(tr_hfout_model *m, tr_err *err);

/* Rank 0, before loading `--weights dir` (a directory): dir/config.json, when there, describes the model the
 * build computes: n_layer, n_embd, n_head, n_inner, layer_norm_epsilon, activation_function, and for a language
 * model n_positions and vocab_size (GPT2Config's defaults for absent optional keys). Every difference is named
 * with both values, at once. No config.json: true. A config.json that is not a regular file or not JSON: refused. */
bool tr_hfout_config_matches(const char *dir, tr_err *err);

/* Rank 0, before any work: can --hf-out dir be written? The model has what an export needs, the parent
 * directory exists and is writable, and dir is absent or a previous tessgen export. */
bool tr_hfout_check(const char *dir, tr_err *err);

/* Before any work, on the rank that writes: can every file --hf-out DIR would carry from the weights' directory src
 * (the tokenizer's, the generation config) be carried: absent, or a readable regular file of at most 256 MiB?
 * Refused naming the file, "nothing was run". src NULL: nothing to carry. */
bool tr_hfout_check_carry(const char *src, const char *dir, tr_err *err);

/* Write dir atomically from the full tensors[0..n) (tessgen's names; each gets the "transformer." prefix)
 * and m, with src's tokenizer and generation-config files (vocab.json, merges.txt, tokenizer.json,
 * tokenizer_config.json, special_tokens_map.json, added_tokens.json, generation_config.json: those it has,
 * byte for byte) when src is not NULL; carried (ccap bytes, may be NULL) gets their names, comma-separated.
 * No MPI. On failure nothing is left behind and dir is unchanged. */
bool tr_hfout_write_dir(const char *dir, const tr_hfout_model *m, const tr_st_out *tensors, int n,
                        tr_st_dtype dtype, const char *src, char *carried, size_t ccap, tr_err *err);

/* Collective: gather every parameter from the host arena H to rank 0 and write dir there (src, carried:
 * tr_hfout_write_dir's, on rank 0). The verdict is shared; the message is on rank 0. */
bool tr_hfout_write(const tr_rank_desc *d, const float *H, const char *dir, tr_st_dtype dtype, const char *src,
                    char *carried, size_t ccap, tr_err *err);

#endif
