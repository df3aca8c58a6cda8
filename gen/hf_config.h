/*
 * hf_config.h - tessgen --from-hf: a spec from the config.json that Hugging
 * Face's save_pretrained writes for a GPT-2 model.
 *
 * The config is read with the runtime's strict JSON parser (runtime/tr_json.c,
 * which has no MPI in it and is linked into tessgen as it is). Every key that
 * decides the math of a block is checked against what tessgen's kernels
 * compute, and every value they cannot compute is refused, naming the key, the
 * value and why (all of them at once, as spec errors are). Keys that do not
 * change the blocks (embeddings, tokenizer ids, dropout, generation settings)
 * are accepted and listed in a comment of the printed spec. The spec text is
 * then run through tg_spec_load_string, the same loader `tessgen SPEC` uses, so
 * a mesh, sequence length or batch that does not fit the model is refused with
 * the loader's own messages, and what is printed loads unchanged.
 *
 * This file is the one place that validates config.json; main.c only parses
 * the command line.
 */
#ifndef TG_HF_CONFIG_H
#define TG_HF_CONFIG_H

#include <stdbool.h>

#include "err.h"
#include "mesh.h"
#include "spec.h"
#include "strbuf.h"

/* What --from-hf was asked for: the directory and the layout the config does not say. */
typedef struct tg_hf_request {
    const char *dir;  /* the save_pretrained directory (holds config.json) */
    tg_scheme scheme; /* TG_SCHEME_TESSERACT: mesh q, d; TG_SCHEME_MEGATRON: p */
    int q, d, p;
    int seq, batch;   /* tokens per sequence, sequences */
    tg_mode mode;     /* "infer", "train" or "generate" */
    int context;      /* --context N: model.context with mode generate (docs/GENERATE.md), else 0 */
    int blocks_only;  /* --blocks-only: the block stack (no vocab); else the whole GPT2LMHeadModel (tesseract) */
    int vocab_align;  /* --vocab-align A: model.vocab_align of the whole model (1..TG_SPEC_MAX_VOCAB_ALIGN, checked by
                       * main.c with the other options and again by the spec loader), else 0: not printed */
} tg_hf_request;

/* Read r->dir/config.json, check it, and append to spec the text of a spec file for it (comments saying
 * where each value comes from and which config keys are not used, then `return { ... }`). Warnings
 * (non-zero dropout in training) go to warn, one line each. On failure nothing is appended to spec and
 * err names the file, each key at fault, its value, the rule and the fix. */
bool tg_hf_spec(const tg_hf_request *r, tg_sb *spec, tg_sb *warn, tg_err *err);

/* The same for config.json's text already read (len bytes, text[len] == '\0'), named path in messages;
 * r->dir is still where the weights are looked for. tg_hf_spec reads the file and calls it; the fuzzing
 * harness (tests/fuzz/fuzz_hfconfig.c) calls it directly. */
bool tg_hf_spec_text(const tg_hf_request *r, const char *path, const char *text, size_t len, tg_sb *spec, tg_sb *warn,
                     tg_err *err);

#endif
