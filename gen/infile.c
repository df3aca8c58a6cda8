/*
 * infile.c - read a small regular input file whole (see infile.h).
 */
#include "infile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *type_name(mode_t m)
{
    return S_ISFIFO(m)  ? "a FIFO (named pipe)"
           : S_ISDIR(m) ? "a directory"
           : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                        : "not a regular file";
}

static bool not_regular(const char *path, mode_t m, tg_err *err)
{
    return tg_fail(err, "%s: is %s, not a regular file: tessgen reads it only from a regular file (a FIFO or device "
                        "would block it, or never end); pass the file itself",
                   path, type_name(m));
}

bool tg_infile_read(const char *path, const char *what, const char *hint, size_t max, char **buf, size_t *len,
                    tg_err *err)
{
    *buf = NULL;
    *len = 0;
    struct stat st;
    if (stat(path, &st) != 0)
        return tg_fail(err, "%s: %s: %s%s", path, what, strerror(errno), hint);
    if (!S_ISREG(st.st_mode))
        return not_regular(path, st.st_mode, err);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return tg_fail(err, "%s: %s: %s%s", path, what, strerror(errno), hint);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return not_regular(path, st.st_mode, err);
    }
    char *b = malloc(max + 2);
    if (!b) {
        close(fd);
        return tg_fail(err, "%s: %s: out of memory", path, what);
    }
    size_t n = 0;
    while (n < max + 1) {
        ssize_t r = read(fd, b + n, max + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            free(b);
            return tg_fail(err, "%s: %s: %s%s", path, what, strerror(e), hint);
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    b[n] = '\0';
    *buf = b;
    *len = n;
    return true;
}
