/*
 * err.c - message collection for the tg_err convention (see err.h).
 * Messages longer than the buffer are truncated with a marker, never overflow.
 */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool tg_fail(tg_err *err, const char *fmt, ...)
{
    if (!err)
        return false;
    size_t used = strlen(err->msg);
    size_t cap = sizeof err->msg;
    if (used > 0 && used + 1 < cap) {
        err->msg[used++] = '\n';
        err->msg[used] = '\0';
    }
    if (used + 1 < cap) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err->msg + used, cap - used, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= cap - used)
            memcpy(err->msg + cap - 5, "...", 4);
    }
    err->count++;
    return false;
}

void tg_err_clear(tg_err *err)
{
    err->msg[0] = '\0';
    err->count = 0;
}
