/*
 * tr_err.h - the runtime's error convention, the same as the generator's:
 * a function that can fail returns bool and fills a caller-owned tr_err.
 * Messages name the file, the tensor or field, the rule broken and the fix,
 * e.g. "w.safetensors: tensor h.0.attn.c_attn.weight has shape [64,96],
 * expected [64,192] (hidden=64): the weights do not match the built model;
 * regenerate with the right spec or pass the right file".
 */
#ifndef TR_ERR_H
#define TR_ERR_H

#include <stdbool.h>

typedef struct tr_err {
    char msg[2048];
} tr_err;

/* Set err->msg (appending on a new line if already set); returns false. */
bool tr_fail(tr_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
