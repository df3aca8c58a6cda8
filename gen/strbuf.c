/*
 * strbuf.c - growable text buffer (see strbuf.h).
 */
#include "strbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void grow(tg_sb *b, size_t need)
{
    if (b->len + need + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        fprintf(stderr, "tessgen: out of memory while printing output (%zu bytes)\n", cap);
        exit(70);
    }
    b->s = s;
    b->cap = cap;
}

void tg_sb_init(tg_sb *b)
{
    b->s = NULL;
    b->len = 0;
    b->cap = 0;
    grow(b, 0);
    b->s[0] = '\0';
}

void tg_sb_free(tg_sb *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

void tg_sb_putn(tg_sb *b, const char *s, size_t n)
{
    grow(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void tg_sb_puts(tg_sb *b, const char *s)
{
    tg_sb_putn(b, s, strlen(s));
}

void tg_sb_printf(tg_sb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    grow(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static void quoted(tg_sb *b, const char *s, int json)
{
    tg_sb_putn(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            tg_sb_printf(b, "\\%c", *p);
        else if (*p == '\n')
            tg_sb_puts(b, "\\n");
        else if (*p < 32 || (*p == '?' && !json))
            tg_sb_printf(b, json ? "\\u%04x" : "\\%03o", *p);
        else
            tg_sb_putn(b, (const char *)p, 1);
    }
    tg_sb_putn(b, "\"", 1);
}

void tg_sb_cstr(tg_sb *b, const char *s)
{
    quoted(b, s, 0);
}

void tg_sb_jstr(tg_sb *b, const char *s)
{
    quoted(b, s, 1);
}

void tg_sb_jnum(tg_sb *b, const char *fmt, double v)
{
    if (isfinite(v))
        tg_sb_printf(b, fmt, v);
    else
        tg_sb_puts(b, "null"); /* JSON has no inf or nan; what prints JSON never prints them */
}
