/*
 * outdir.c - output directory checks, lock, file list and cleanup (see
 * outdir.h for the rules).
 */
#include "outdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "outfile.h"

#define LIST_NAME ".tessgen-files"
#define LOCK_NAME ".tessgen.lock"

bool tg_outdir_check(const char *dir, tg_err *err)
{
    if (!dir || !*dir)
        return tg_fail(err, "-o \"\": the output directory is empty; name a directory, e.g. -o out/model");
    struct stat st, lst;
    if (lstat(dir, &lst) == 0) {
        if (S_ISLNK(lst.st_mode) && stat(dir, &st) != 0) {
            char target[PATH_MAX];
            ssize_t n = readlink(dir, target, sizeof target - 1);
            target[n > 0 ? n : 0] = '\0';
            return tg_fail(err, "%s: a symbolic link to %s, which does not exist; create %s, or pass another -o DIR",
                           dir, n > 0 ? target : "?", n > 0 ? target : "its target");
        }
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return tg_fail(err, "%s: exists and is not a directory; pass another -o DIR", dir);
        if (access(dir, W_OK | X_OK) != 0)
            return tg_fail(err, "%s: the output directory is not writable (%s); pass another -o DIR", dir,
                           strerror(errno));
        return true;
    }
    /* it will be created: the nearest existing ancestor must be a writable directory */
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return tg_fail(err, "%s: output path too long", dir);
    for (;;) {
        char *slash = strrchr(path, '/');
        while (slash && slash > path && slash[1] == '\0') { /* trailing slashes */
            *slash = '\0';
            slash = strrchr(path, '/');
        }
        if (!slash) {
            snprintf(path, sizeof path, ".");
        } else if (slash == path) {
            path[1] = '\0';
        } else {
            *slash = '\0';
        }
        if (stat(path, &st) == 0) {
            if (!S_ISDIR(st.st_mode))
                return tg_fail(err, "%s: cannot be created: %s is not a directory; pass another -o DIR", dir, path);
            if (access(path, W_OK | X_OK) != 0)
                return tg_fail(err, "%s: cannot be created: %s is not writable; pass another -o DIR", dir, path);
            return true;
        }
        if (!strcmp(path, ".") || !strcmp(path, "/"))
            return tg_fail(err, "%s: cannot be created (%s); pass another -o DIR", dir, strerror(errno));
    }
}

bool tg_outdir_lock(const char *dir, int *fd, tg_err *err)
{
    *fd = -1;
    if (!tg_mkdir_p(dir, err))
        return false;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, LOCK_NAME);
    /* the lock file is truncated and written: never through a symbolic link (O_NOFOLLOW), and only when it is a
     * regular file with no other name (a hard link to a user's file would be emptied); O_NONBLOCK so that a FIFO
     * cannot block the open */
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (f < 0 && errno == ELOOP) {
        char target[PATH_MAX];
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        return tg_fail(err,
                       "%s: the lock file is a symbolic link%s%s; tessgen writes its lock file only as a regular file "
                       "and left the link and its target untouched; remove the link (rm %s) and run again",
                       path, n > 0 ? " to " : "", target, path);
    }
    if (f < 0)
        return tg_fail(err, "%s: cannot open the lock file: %s", path, strerror(errno));
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fstat(f, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1) {
        bool reg = S_ISREG(st.st_mode);
        close(f);
        return tg_fail(err,
                       "%s: the lock file is %s; tessgen writes its lock file only as a regular file of its own and "
                       "left this one untouched; remove it (rm %s) and run again",
                       path, !reg ? "not a regular file (a FIFO, socket or device)" : "a hard link to another file",
                       path);
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0)
        (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t n = pread(f, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(f);
        return tg_fail(err,
                       "%s: another tessgen%s%s%s is writing this output directory; wait for it to finish, or pass "
                       "another -o DIR",
                       dir, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(f, 0) != 0 || pwrite(f, pid, (size_t)n, 0) != n) {
        /* the pid is only for the message above: the lock itself holds */
    }
    *fd = f;
    return true;
}

void tg_outdir_unlock(int fd)
{
    if (fd < 0)
        return;
    if (ftruncate(fd, 0) != 0) { /* the pid was for other tessgens' messages only: leave the file empty */
    }
    close(fd); /* releases the flock */
}

/* ---- the file list ---------------------------------------------------------------- */

void tg_filelist_init(tg_filelist *l)
{
    memset(l, 0, sizeof *l);
}

void tg_filelist_free(tg_filelist *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->name[i]);
    free(l->name);
    memset(l, 0, sizeof *l);
}

bool tg_filelist_add(tg_filelist *l, const char *name)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **nn = realloc(l->name, (size_t)cap * sizeof *nn);
        if (!nn)
            return false;
        l->name = nn;
        l->cap = cap;
    }
    l->name[l->n] = strdup(name);
    l->sorted = false;
    return l->name[l->n++] != NULL;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void tg_filelist_sort(tg_filelist *l)
{
    qsort(l->name, (size_t)l->n, sizeof *l->name, cmp_name);
    int w = 0;
    for (int i = 0; i < l->n; i++) { /* each name once */
        if (w > 0 && !strcmp(l->name[w - 1], l->name[i]))
            free(l->name[i]);
        else
            l->name[w++] = l->name[i];
    }
    l->n = w;
    l->sorted = true;
}

bool tg_filelist_has(const tg_filelist *l, const char *name)
{
    if (l->sorted)
        return bsearch(&name, l->name, (size_t)l->n, sizeof *l->name, cmp_name) != NULL;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->name[i], name))
            return true;
    return false;
}

/* A name from the list that stays inside the directory: no "..", no absolute path, no control characters. */
static bool safe_name(const char *s)
{
    if (!*s || *s == '/' || strstr(s, ".."))
        return false;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        if (*c < 32)
            return false;
    return true;
}

bool tg_outdir_read_list(const char *dir, tg_filelist *old, tg_err *err)
{
    tg_filelist_init(old);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, LIST_NAME);
    FILE *f = fopen(path, "r");
    if (!f)
        return true; /* a new directory, or one of tessgen 0.1 */
    char line[PATH_MAX];
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || !safe_name(line))
            continue;
        ok = tg_filelist_add(old, line);
    }
    fclose(f);
    if (!ok)
        return tg_fail(err, "out of memory reading %s", path);
    tg_filelist_sort(old);
    return true;
}

bool tg_outdir_write_list(const char *dir, const tg_filelist *a, const tg_filelist *b, tg_err *err)
{
    size_t cap = 256, len = 0;
    for (int i = 0; i < a->n; i++)
        cap += strlen(a->name[i]) + 1;
    for (int i = 0; b && i < b->n; i++)
        cap += strlen(b->name[i]) + 1;
    char *text = malloc(cap);
    if (!text)
        return tg_fail(err, "out of memory writing the file list of %s", dir);
    len += (size_t)snprintf(text, cap,
                            "# files tessgen wrote in this directory; a later generation removes those it no "
                            "longer writes\n");
    for (int i = 0; i < a->n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s\n", a->name[i]);
    for (int i = 0; b && i < b->n; i++)
        if (!tg_filelist_has(a, b->name[i]))
            len += (size_t)snprintf(text + len, cap - len, "%s\n", b->name[i]);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, LIST_NAME);
    bool changed;
    bool ok = tg_write_if_changed(path, text, len, 0644, &changed, err);
    free(text);
    return ok;
}

/* Did tessgen make this file? Its first bytes name tessgen (every generated file does). */
static bool made_by_tessgen(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char head[513];
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    head[n] = '\0';
    return strstr(head, "tessgen") != NULL;
}

/* rank_NNNN.c / rank_NNNN.cu: the per-rank files of tessgen 0.1's layout */
static bool legacy_name(const char *s)
{
    if (strncmp(s, "rank_", 5) != 0)
        return false;
    const char *p = s + 5;
    int digits = 0;
    while (*p >= '0' && *p <= '9')
        p++, digits++;
    return digits >= 4 && (!strcmp(p, ".c") || !strcmp(p, ".cu"));
}

static void remove_one(const char *dir, const char *name, int quiet)
{
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || !made_by_tessgen(path))
        return;
    if (unlink(path) == 0 && !quiet)
        printf("removed stale %s\n", path);
}

void tg_outdir_remove_stale(const char *dir, const tg_filelist *old, const tg_filelist *now, int quiet)
{
    for (int i = 0; i < old->n; i++)
        if (!tg_filelist_has(now, old->name[i]))
            remove_one(dir, old->name[i], quiet);
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (legacy_name(e->d_name) && !tg_filelist_has(now, e->d_name) && !tg_filelist_has(old, e->d_name))
            remove_one(dir, e->d_name, quiet);
    closedir(dp);
}

/* NAME.tmp.PID -> PID, with NAME's length in *base; 0 when not such a name */
static long tmp_pid(const char *s, size_t *base)
{
    const char *t = strstr(s, ".tmp.");
    while (t) {
        const char *p = t + 5;
        char *end;
        long pid = strtol(p, &end, 10);
        if (end != p && !*end && pid > 0) {
            *base = (size_t)(t - s);
            return pid;
        }
        t = strstr(t + 1, ".tmp.");
    }
    return 0;
}

static void clean_tmp_in(const char *dir, const char *sub, const tg_filelist *old, const tg_filelist *now, int quiet)
{
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", dir, sub[0] ? "/" : "", sub);
    DIR *dp = opendir(path);
    if (!dp)
        return;
    struct dirent *e;
    while ((e = readdir(dp))) {
        size_t base;
        long pid = tmp_pid(e->d_name, &base);
        if (!pid || pid == (long)getpid() || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
            continue; /* not a temporary file, or its writer may still be running */
        char name[PATH_MAX];
        snprintf(name, sizeof name, "%s%s%.*s", sub, sub[0] ? "/" : "", (int)base, e->d_name);
        if (!tg_filelist_has(old, name) && !tg_filelist_has(now, name))
            continue;
        char full[3 * PATH_MAX];
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (unlink(full) == 0 && !quiet)
            printf("removed %s, left by tessgen process %ld\n", full, pid);
    }
    closedir(dp);
}

void tg_outdir_clean_tmp(const char *dir, const tg_filelist *old, const tg_filelist *now, int quiet)
{
    clean_tmp_in(dir, "", old, now, quiet);
    clean_tmp_in(dir, "schedule", old, now, quiet);
}

/* ---- room on the file system ----------------------------------------------------- */

static double mb(unsigned long long b)
{
    return (double)b / 1e6;
}

bool tg_outdir_room(const char *dir, const tg_filelist *now, unsigned long long need, unsigned long long *avail,
                    tg_err *err)
{
    char probe[PATH_MAX];
    snprintf(probe, sizeof probe, "%s", dir);
    struct statvfs vfs;
    unsigned long long free_b = 0;
    const char *hook = getenv("TESS_TEST_DISK_FREE");
    if (hook && *hook) {
        free_b = strtoull(hook, NULL, 10);
    } else {
        for (;;) { /* the nearest existing directory: -o may name one that is created later */
            if (statvfs(probe, &vfs) == 0) {
                free_b = (unsigned long long)vfs.f_bavail * (unsigned long long)vfs.f_frsize;
                break;
            }
            char *slash = strrchr(probe, '/');
            if (!slash || slash == probe) {
                if (statvfs(slash == probe ? "/" : ".", &vfs) != 0) {
                    vfs.f_bavail = (fsblkcnt_t)-1 / 2; /* cannot tell: the writes themselves report a full disk */
                    vfs.f_frsize = 1;
                }
                free_b = (unsigned long long)vfs.f_bavail * (unsigned long long)vfs.f_frsize;
                break;
            }
            *slash = '\0';
        }
    }
    unsigned long long replaced = 0;
    for (int i = 0; i < now->n; i++) {
        char path[PATH_MAX + 64];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, now->name[i]);
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
            replaced += (unsigned long long)st.st_size;
    }
    *avail = free_b + replaced;
    if (need > *avail)
        return tg_fail(err,
                       "%s: the output needs about %.1f MB and its file system has %.1f MB free%s: generating would "
                       "fill the disk and leave a partial output; free some space, pass another -o DIR, or use a "
                       "smaller mesh or fewer layers",
                       dir, mb(need), mb(*avail), replaced ? " (counting the files it replaces)" : "");
    return true;
}
