/*
 * outfile.h - writing generated files: atomically (temp file in the same
 * directory, fsync, rename) and only when the content changed, so an
 * interrupted run never leaves a half-written file and ninja rebuilds only
 * what really changed.
 */
#ifndef TG_OUTFILE_H
#define TG_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* Create dir and its parents (mode 0777 & ~umask). */
bool tg_mkdir_p(const char *dir, tg_err *err);

/* Write data to path unless path already holds exactly these bytes and mode.
 * *changed tells whether the file was (re)written. */
bool tg_write_if_changed(const char *path, const char *data, size_t len, int mode, bool *changed, tg_err *err);

#endif
