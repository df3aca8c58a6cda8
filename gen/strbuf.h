/*
 * strbuf.h - a growable text buffer for the emitters. Emitters print whole
 * files into memory first; nothing touches the disk until every output has
 * been rendered, so a failure never leaves a half-written output directory.
 * Running out of memory while printing aborts the generator with a message
 * (there is nothing sensible to recover at that point).
 */
#ifndef TG_STRBUF_H
#define TG_STRBUF_H

#include <stddef.h>

typedef struct tg_sb {
    char *s;    /* NUL-terminated text */
    size_t len; /* bytes, excluding the NUL */
    size_t cap;
} tg_sb;

void tg_sb_init(tg_sb *b);
void tg_sb_free(tg_sb *b);
void tg_sb_puts(tg_sb *b, const char *s);
void tg_sb_putn(tg_sb *b, const char *s, size_t n);
void tg_sb_printf(tg_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

#ifndef TG_STRBUF_QUOTE
#define TG_STRBUF_QUOTE
/* Append s as a quoted C string literal / JSON string (quotes included). */
void tg_sb_cstr(tg_sb *b, const char *s);
void tg_sb_jstr(tg_sb *b, const char *s);
/* Append v with the printf format fmt (one double), or null when v is not finite: JSON has no inf or nan. */
void tg_sb_jnum(tg_sb *b, const char *fmt, double v) __attribute__((format(printf, 2, 0)));
#endif
