/*
 * err.h - the one error convention of the generator.
 *
 * A function that can fail returns bool and fills a caller-owned tg_err: false
 * means "failed, and err->msg says why". Messages follow one form so users can
 * act on them: "<file>: <field> = <value> <rule broken>: <why>; <fix>".
 * Several failures may be collected in one tg_err (spec validation reports all
 * of them at once); each is one line.
 */
#ifndef TG_ERR_H
#define TG_ERR_H

#include <stdbool.h>

typedef struct tg_err {
    char msg[8192]; /* newline-separated messages, NUL-terminated */
    int count;      /* number of messages recorded */
} tg_err;

/* Append one formatted message line; always returns false. */
bool tg_fail(tg_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Forget all messages. */
void tg_err_clear(tg_err *err);

#endif
