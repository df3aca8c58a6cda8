/*
 * fuzz_file.h - what the file-reader harnesses share: the readers take a path
 * and mmap it, so each input is put in an anonymous memory file (memfd) and
 * passed as /proc/self/fd/N, with no disk traffic; and a scratch directory
 * on tmpfs for the writers (fsync there costs nothing). Header-only: each
 * harness is one translation unit with the runtime sources it tests.
 */
#ifndef FUZZ_FILE_H
#define FUZZ_FILE_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The input as a file: returns its fd (close it after use) and its path in path. */
static inline int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    if (fd < 0) {
        perror("memfd_create");
        abort();
    }
    for (size_t o = 0; o < size;) {
        ssize_t w = write(fd, data + o, size - o);
        if (w <= 0) {
            perror("write");
            abort();
        }
        o += (size_t)w;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

static char fuzz_dir_path[64];

static inline void fuzz_dir_remove(void)
{
    DIR *d = opendir(fuzz_dir_path);
    if (d) {
        char p[600];
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(fuzz_dir_path);
}

/* A scratch directory for writers, on /dev/shm when there is one; removed at exit. */
static inline const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        struct stat st;
        const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/tessgen-fuzz.XXXXXX", base);
        if (!mkdtemp(fuzz_dir_path)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* Stop with a message: libFuzzer reports the input as a crash. */
#define FUZZ_ASSERT(cond, ...)                                                \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz property failed: %s: ", #cond);            \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            abort();                                                          \
        }                                                                     \
    } while (0)

#endif
