/*
 * tr_err.c - formatting for the tr_err convention (see tr_err.h).
 */
#include "tr_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool tr_fail(tr_err *err, const char *fmt, ...)
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
    return false;
}
