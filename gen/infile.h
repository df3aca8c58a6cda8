/*
 * infile.h - read a small input file of tessgen's (a spec, a machine file, a
 * Hugging Face config.json) whole, and only if it is a regular file.
 *
 * Design: the file's type is checked before it is opened (stat), and again on
 * the descriptor, which is opened with O_NONBLOCK so that a FIFO put in the
 * file's place between the two cannot block the open; anything but a regular
 * file (a FIFO, which blocked tessgen forever, a device that never ends, a
 * directory, a socket) is refused naming its type. The callers keep their
 * own size rule and messages: the buffer holds at most max + 1 bytes, so a
 * length above max means "too large".
 */
#ifndef TG_INFILE_H
#define TG_INFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* Read at most max + 1 bytes of path into a malloc'd, NUL-terminated *buf (the caller frees it) and set
 * *len. what names the failure in messages: "PATH: cannot read spec: No such file or directory" for
 * what = "cannot read spec"; hint (may be "") follows a message that is not about the type, e.g.
 * "; --from-hf reads the config.json ...". On failure nothing is allocated. */
bool tg_infile_read(const char *path, const char *what, const char *hint, size_t max, char **buf, size_t *len,
                    tg_err *err);

#endif
