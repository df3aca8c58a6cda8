/*
 * outfile.c - atomic, change-only file writes (see outfile.h).
 */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool tg_mkdir_p(const char *dir, tg_err *err)
{
    char tmp[4096];
    if (!*dir)
        return tg_fail(err, "an empty path is not a directory");
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
        return tg_fail(err, "%s: output path too long", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
            return tg_fail(err, "%s: cannot create directory: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
        return tg_fail(err, "%s: cannot create directory: %s", tmp, strerror(errno));
    struct stat st;
    if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))
        return tg_fail(err, "%s: exists and is not a directory; pass another -o DIR", tmp);
    return true;
}

static bool same_content(const char *path, const char *data, size_t len, int mode)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != len ||
        (int)(st.st_mode & 07777) != mode)
        return false;
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char buf[65536];
    size_t off = 0, n;
    bool same = true;
    while (same && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (off + n > len || memcmp(buf, data + off, n) != 0)
            same = false;
        off += n;
    }
    fclose(f);
    return same && off == len;
}

bool tg_write_if_changed(const char *path, const char *data, size_t len, int mode, bool *changed, tg_err *err)
{
    *changed = false;
    if (same_content(path, data, len, mode))
        return true;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return tg_fail(err, "%s: cannot write: %s", tmp, strerror(errno));
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return tg_fail(err, "%s: write failed: %s", path, strerror(e));
        }
        off += (size_t)w;
    }
    if (fchmod(fd, (mode_t)mode) != 0 || fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return tg_fail(err, "%s: cannot finish writing: %s", path, strerror(e));
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return tg_fail(err, "%s: cannot replace: %s", path, strerror(e));
    }
    *changed = true;
    return true;
}
