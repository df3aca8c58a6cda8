/*
 * tr_safetensors.c - safetensors reader and atomic writer (see tr_safetensors.h).
 *
 * Open = map + validate once: the u64 header length is checked against the
 * file and a 100 MB sanity limit before any JSON is touched; the header is
 * parsed strictly by tr_json; every entry is checked for types, integer
 * non-negative shapes, two increasing offsets, size == prod(shape) * itemsize
 * (overflow-checked uint64 arithmetic throughout) and bounds, then the tensor
 * table is sorted by name (binary search, duplicate detection) and a copy
 * sorted by offset finds overlaps. After that, reads need only check the
 * request: every byte a valid request can reach lies inside the mapping.
 * F32 data is copied with memcpy and BF16 data widened byte by byte
 * (tr_bf16.h), so unaligned offsets are fine. BF16 output is converted into
 * a temporary array per tensor, after every value was checked to round to a
 * finite bf16, so a refusal happens before any file is created.
 */
#include "tr_safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tr_bf16.h"
#include "tr_json.h"

typedef unsigned long long ull;

/* ---- checked arithmetic ---------------------------------------------------- */

static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    *out = a * b;
    return true;
}

static bool add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a)
        return false;
    *out = a + b;
    return true;
}

/* "[64,96]"; dims beyond the 4 stored print as ",..." */
static const char *fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t o = 0;
    int shown = ndim < 4 ? ndim : 4;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < shown && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (ndim > 4 && o < cap)
        o += (size_t)snprintf(buf + o, cap - o, ",... (%d dims)", ndim);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
    return buf;
}

/* ---- dtypes ------------------------------------------------------------------ */

static const struct {
    const char *name;
    int bits;
} dtypes[] = {
    {"F64", 64}, {"F32", 32},    {"F16", 16},    {"BF16", 16},    {"I64", 64},     {"I32", 32},
    {"I16", 16}, {"I8", 8},      {"U64", 64},    {"U32", 32},     {"U16", 16},     {"U8", 8},
    {"BOOL", 8}, {"F8_E4M3", 8}, {"F8_E5M2", 8}, {"F8_E8M0", 8},  {"F6_E2M3", 6},  {"F6_E3M2", 6},
    {"F4", 4},   {"C64", 64},
};

int tr_st_dtype_size(const char *dtype, int *bits)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, dtype) == 0) {
            if (bits)
                *bits = dtypes[i].bits;
            return dtypes[i].bits % 8 == 0 ? dtypes[i].bits / 8 : 0;
        }
    if (bits)
        *bits = 0;
    return 0;
}

/* ---- low-level helpers --------------------------------------------------------- */

bool tr_st_host_le(const char *path, tr_err *err)
{
    uint32_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    if (b == 1)
        return true;
    return tr_fail(err, "%s: this host is big-endian; the tessgen runtime reads and writes little-endian "
                        "files only: run on a little-endian machine",
                   path);
}

static const char *file_type(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

/* A non-regular file refused, naming what it is: reading a FIFO would wait for a writer forever, a device
 * would be read without end. */
static bool not_regular(const char *path, const char *kind, mode_t mode, tr_err *err)
{
    return tr_fail(err, "%s: is %s, not a %s: inputs are read from regular files (a pipe or device would block or "
                        "never end); save the data to a file and pass that",
                   path, file_type(mode), kind);
}

bool tr_st_map_file(const char *path, const char *kind, int *fd_out, uint64_t *size_out,
                    const unsigned char **map_out, tr_err *err)
{
    *fd_out = -1;
    *size_out = 0;
    *map_out = NULL;
    /* the type first, so a FIFO is refused without opening it; then the open cannot block either
     * (O_NONBLOCK: a FIFO put there in between opens at once and is refused by the fstat below) */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return not_regular(path, kind, st.st_mode, err);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return tr_fail(err, "%s: cannot open %s: %s%s", path, kind, strerror(e),
                       e == ENOENT ? " (check the path)" : "");
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tr_fail(err, "%s: cannot stat %s: %s", path, kind, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return not_regular(path, kind, st.st_mode, err);
    }
    if (st.st_size <= 0) {
        close(fd);
        return tr_fail(err, "%s: is empty (0 bytes), not a %s: truncated or not written yet", path, kind);
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size > (uint64_t)SIZE_MAX) {
        close(fd);
        return tr_fail(err, "%s: %llu bytes does not fit in this process's address space", path, (ull)size);
    }
    void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        close(fd);
        return tr_fail(err, "%s: cannot mmap %s (%llu bytes): %s", path, kind, (ull)size, strerror(e));
    }
    *fd_out = fd;
    *size_out = size;
    *map_out = m;
    return true;
}

bool tr_st_read_json(const char *path, const char *what, tr_json_doc *doc, tr_err *err)
{
    int fd;
    uint64_t size;
    const unsigned char *map;
    memset(doc, 0, sizeof *doc);
    if (!tr_st_map_file(path, what, &fd, &size, &map, err))
        return false;
    bool ok = tr_json_parse(doc, (const char *)map, (size_t)size, path, err);
    munmap((void *)map, (size_t)size);
    close(fd);
    return ok;
}

static bool write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        if (w == 0) {
            errno = EIO;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Best effort: make the rename durable. Some filesystems refuse fsync on a directory. */
static void fsync_parent_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else {
        size_t n = (size_t)(slash - path);
        if (n == 0)
            n = 1; /* "/file" -> "/" */
        if (n >= sizeof dir)
            return;
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int dfd = open(dir, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
}

/* dir and base name of path ("y.npy" -> ".", "y.npy"; "/y" -> "/", "y"); false if too long */
static bool split_path(const char *path, char *dir, size_t dcap, const char **base)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 1;
    if (slash && n == 0)
        n = 1; /* "/file" -> "/" */
    if (n >= dcap)
        return false;
    memcpy(dir, slash ? path : ".", n);
    dir[n] = '\0';
    *base = slash ? slash + 1 : path;
    return true;
}

/* Is entry "<base>.tmp.<digits>", the name the atomic writer gives its temp file? */
static bool is_temp_of(const char *entry, const char *base)
{
    size_t lb = strlen(base);
    if (lb == 0 || strncmp(entry, base, lb) != 0 || strncmp(entry + lb, ".tmp.", 5) != 0)
        return false;
    const char *d = entry + lb + 5;
    if (!*d)
        return false;
    for (; *d; d++)
        if (*d < '0' || *d > '9')
            return false;
    return true;
}

int tr_st_clean_stale_temps(const char *path)
{
    char dir[4096], full[8300];
    const char *base;
    if (!split_path(path, dir, sizeof dir, &base) || !*base)
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!is_temp_of(e->d_name, base))
            continue;
        int n = snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (n < 0 || (size_t)n >= sizeof full)
            continue;
        /* no symlinks, no FIFOs (O_NONBLOCK), only our own regular files */
        int fd = open(full, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st, now;
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
            fcntl(fd, F_SETLK, &l) == 0 /* no live writer holds it */ && lstat(full, &now) == 0 &&
            now.st_dev == st.st_dev && now.st_ino == st.st_ino && unlink(full) == 0)
            removed++;
        close(fd); /* releases the lock */
    }
    closedir(d);
    return removed;
}

bool tr_st_check_output(const char *path, const char *what, tr_err *err)
{
    if (!path[0])
        return tr_fail(err, "%s: an empty file name: name the file to write", what);
    size_t len = strlen(path);
    if (path[len - 1] == '/')
        return tr_fail(err, "%s %s: is a directory name (it ends in '/'): name the file to write in it, e.g. "
                            "%sout",
                       what, path, path);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return tr_fail(err, "%s %s: is a directory: name the file to write in it, e.g. %s/out", what, path,
                           path);
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            return tr_fail(err, "%s %s: exists and is not a regular file (a device, pipe or socket): outputs are "
                                "written to a temp file that is renamed over the path; choose another path",
                           what, path);
    } else if (errno != ENOENT) {
        int e = errno;
        return tr_fail(err, "%s %s: cannot write there: %s%s", what, path, strerror(e),
                       e == ENOTDIR ? " (a component of the path is not a directory)" : "");
    }
    char dir[4096], tmp[4200];
    const char *base;
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (!split_path(path, dir, sizeof dir, &base) || n < 0 || (size_t)n >= sizeof tmp)
        return tr_fail(err, "%s %.200s...: path too long (%zu bytes)", what, path, len);
    tr_st_clean_stale_temps(path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return tr_fail(err, "%s %s: directory %s does not exist: create it first (mkdir -p %s) or choose "
                                "another path",
                           what, path, dir, dir);
        return tr_fail(err, "%s %s: cannot create a file in directory %s: %s; choose a writable directory", what,
                       path, dir, strerror(e));
    }
    close(fd);
    unlink(tmp);
    return true;
}

bool tr_st_write_file_atomic(const char *path, const void *const *parts, const size_t *lens, int nparts,
                             tr_err *err)
{
    char tmp[4200];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp)
        return tr_fail(err, "%.200s...: path too long (%zu bytes)", path, strlen(path));
    tr_st_clean_stale_temps(path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        return tr_fail(err, "%s: cannot create temp file %s: %s%s", path, tmp, strerror(e),
                       e == EEXIST ? " (another writer of this file holds it)"
                                   : " (is the directory there and writable?)");
    }
    /* Held until the rename: tr_st_clean_stale_temps removes only temps nobody holds. Best
     * effort (a file system without locks leaves the temp of a killed run in place). */
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    (void)fcntl(fd, F_SETLK, &lock);
    for (int i = 0; i < nparts; i++) {
        if (lens[i] > 0 && !write_all(fd, parts[i], lens[i])) {
            int e = errno;
            unlink(tmp);
            close(fd);
            return tr_fail(err, "%s: writing temp file %s failed: %s (disk full or quota?); %s left unchanged",
                           path, tmp, strerror(e), path);
        }
    }
    if (fsync(fd) != 0) {
        int e = errno;
        unlink(tmp);
        close(fd);
        return tr_fail(err, "%s: fsync of temp file %s failed: %s; %s left unchanged", path, tmp, strerror(e),
                       path);
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        close(fd);
        return tr_fail(err, "%s: cannot rename %s onto it: %s%s; %s left unchanged", path, tmp, strerror(e),
                       e == EISDIR ? " (the path is a directory)" : "", path);
    }
    close(fd); /* the data is on disk (fsync above), so close has nothing left to report */
    fsync_parent_dir(path);
    return true;
}

/* The checks and the copy of tr_st_copy_block for elements of esize bytes (4: F32, 2: BF16, widened). */
static bool copy_block(const unsigned char *src, int esize, int64_t rows, int64_t cols, int64_t r0, int64_t nr,
                       int64_t c0, int64_t nc, float *dst, int64_t ldd, const char *path, const char *name,
                       tr_err *err)
{
    uint64_t bytes;
    if (rows < 0 || cols < 0 || !mul_u64((uint64_t)rows, (uint64_t)cols, &bytes) ||
        !mul_u64(bytes, (uint64_t)esize, &bytes))
        return tr_fail(err, "%s: %s: bad matrix view [%lld, %lld]", path, name, (long long)rows, (long long)cols);
    if (r0 < 0 || nr < 0 || c0 < 0 || nc < 0 || r0 > rows || nr > rows - r0 || c0 > cols || nc > cols - c0)
        return tr_fail(err,
                       "%s: %s: block rows [%lld, %lld+%lld) x cols [%lld, %lld+%lld) is outside the "
                       "tensor viewed as [%lld, %lld]: the reader asked for a shard the file does not have "
                       "(a runtime bug or a mismatched file)",
                       path, name, (long long)r0, (long long)r0, (long long)nr, (long long)c0, (long long)c0,
                       (long long)nc, (long long)rows, (long long)cols);
    if (ldd < nc)
        return tr_fail(err, "%s: %s: destination leading dimension %lld is smaller than the block width %lld", path,
                       name, (long long)ldd, (long long)nc);
    if (nr == 0 || nc == 0)
        return true;
    uint64_t span; /* (nr-1)*ldd + nc floats must be addressable */
    if (!mul_u64((uint64_t)(nr - 1), (uint64_t)ldd, &span) || !add_u64(span, (uint64_t)nc, &span) ||
        span > SIZE_MAX / sizeof(float))
        return tr_fail(err, "%s: %s: destination block [%lld rows, ld %lld] is too large to address", path, name,
                       (long long)nr, (long long)ldd);
    if (!dst)
        return tr_fail(err, "%s: %s: destination buffer is NULL", path, name);
    /* offsets below are < rows*cols*esize, which was checked to fit */
    for (int64_t r = 0; r < nr; r++) {
        uint64_t off = ((uint64_t)(r0 + r) * (uint64_t)cols + (uint64_t)c0) * (uint64_t)esize;
        float *d = dst + (size_t)r * (size_t)ldd;
        if (esize == 4) {
            memcpy(d, src + off, (size_t)nc * sizeof(float));
        } else { /* BF16, little-endian: low byte first; any alignment */
            const unsigned char *s = src + off;
            for (int64_t c = 0; c < nc; c++)
                d[c] = tr_bf16_to_f32((uint16_t)(s[2 * c] | (s[2 * c + 1] << 8)));
        }
    }
    return true;
}

bool tr_st_copy_block(const unsigned char *src, int64_t rows, int64_t cols, int64_t r0, int64_t nr, int64_t c0,
                      int64_t nc, float *dst, int64_t ldd, const char *path, const char *name, tr_err *err)
{
    return copy_block(src, 4, rows, cols, r0, nr, c0, nc, dst, ldd, path, name, err);
}

/* ---- reading ---------------------------------------------------------------- */

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp(((const tr_st_tensor *)a)->name, ((const tr_st_tensor *)b)->name);
}

typedef struct span {
    uint64_t begin, end;
    int idx;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* A non-negative JSON integer into *out; false otherwise. */
static bool json_uint(const tr_json_node *n, uint64_t *out)
{
    if (!n || n->type != TR_JSON_NUMBER || !n->is_int || n->ival < 0)
        return false;
    *out = (uint64_t)n->ival;
    return true;
}

/* Describe a JSON value that should have been a non-negative integer. Only
 * comparisons touch the double: converting one outside int64 is undefined. */
static const char *describe_bad_uint(const tr_json_node *n, char *buf, size_t cap)
{
    if (n->type != TR_JSON_NUMBER)
        snprintf(buf, cap, "a %s", tr_json_type_name(n->type));
    else if (n->is_int && n->ival < 0)
        snprintf(buf, cap, "%lld (negative)", (long long)n->ival);
    else if (n->is_int)
        snprintf(buf, cap, "%lld", (long long)n->ival); /* not reached: json_uint accepts it */
    else if (n->num < 0)
        snprintf(buf, cap, "%g (negative)", n->num);
    else if (n->num >= 9.2e18)
        snprintf(buf, cap, "%g (too large)", n->num);
    else if (floor(n->num) == n->num)
        snprintf(buf, cap, "%g written as a non-integer literal", n->num);
    else
        snprintf(buf, cap, "%g (not an integer)", n->num);
    return buf;
}

static bool check_metadata(const tr_json_doc *doc, const tr_json_node *m, const char *path, tr_err *err)
{
    if (m->type != TR_JSON_OBJECT)
        return tr_fail(err, "%s: __metadata__ is a JSON %s; it must be an object of string values", path,
                       tr_json_type_name(m->type));
    for (const tr_json_node *c = tr_json_first(doc, m); c; c = tr_json_next(doc, c))
        if (c->type != TR_JSON_STRING)
            return tr_fail(err, "%s: __metadata__ key \"%.100s\" has a %s value; metadata values must be strings",
                           path, c->key, tr_json_type_name(c->type));
    return true;
}

/* Validate one header entry (key = tensor name) into *t. */
static bool parse_entry(const tr_json_doc *doc, const tr_json_node *e, const char *path, uint64_t data_size,
                        tr_st_tensor *t, tr_err *err)
{
    const char *name = e->key;
    if (e->key_len != strlen(e->key))
        return tr_fail(err, "%s: a tensor name contains a NUL character (\\u0000): corrupt header", path);
    if (e->key_len >= sizeof t->name)
        return tr_fail(err, "%s: tensor name \"%.60s...\" is %zu bytes; at most %zu are supported", path, name,
                       e->key_len, sizeof t->name - 1);
    memcpy(t->name, name, e->key_len + 1);
    if (e->type != TR_JSON_OBJECT)
        return tr_fail(err, "%s: tensor %s: entry is a JSON %s, expected an object with dtype, shape and "
                            "data_offsets",
                       path, name, tr_json_type_name(e->type));

    /* dtype */
    const tr_json_node *dt = tr_json_get(doc, e, "dtype");
    if (!dt)
        return tr_fail(err, "%s: tensor %s: missing \"dtype\": corrupt header", path, name);
    if (dt->type != TR_JSON_STRING)
        return tr_fail(err, "%s: tensor %s: \"dtype\" is a %s, expected a string like \"F32\"", path, name,
                       tr_json_type_name(dt->type));
    int bits = 0;
    if (dt->str_len < sizeof t->dtype && dt->str_len == strlen(dt->str))
        tr_st_dtype_size(dt->str, &bits);
    if (bits == 0)
        return tr_fail(err, "%s: tensor %s: unknown dtype \"%.32s\" (known: F64 F32 F16 BF16 I64 I32 I16 I8 U64 "
                            "U32 U16 U8 BOOL F8_E4M3 F8_E5M2 F8_E8M0 F6_E2M3 F6_E3M2 F4 C64)",
                       path, name, dt->str);
    memcpy(t->dtype, dt->str, dt->str_len + 1);

    /* shape */
    const tr_json_node *sh = tr_json_get(doc, e, "shape");
    if (!sh)
        return tr_fail(err, "%s: tensor %s: missing \"shape\": corrupt header", path, name);
    if (sh->type != TR_JSON_ARRAY)
        return tr_fail(err, "%s: tensor %s: \"shape\" is a %s, expected an array of non-negative integers", path,
                       name, tr_json_type_name(sh->type));
    uint64_t nelem = 1;
    bool nelem_ok = true;
    int d = 0;
    for (const tr_json_node *c = tr_json_first(doc, sh); c; c = tr_json_next(doc, c), d++) {
        uint64_t v;
        char why[96];
        if (!json_uint(c, &v))
            return tr_fail(err, "%s: tensor %s: shape[%d] is %s; shape must be non-negative integers", path, name,
                           d, describe_bad_uint(c, why, sizeof why));
        if (d < 4)
            t->shape[d] = (int64_t)v;
        if (nelem_ok && !mul_u64(nelem, v, &nelem))
            nelem_ok = false;
        if (v == 0) { /* a zero dimension makes the product 0 whatever came before */
            nelem = 0;
            nelem_ok = true;
        }
    }
    t->ndim = d;
    char sbuf[128];
    uint64_t nbits;
    if (!nelem_ok || !mul_u64(nelem, (uint64_t)bits, &nbits))
        return tr_fail(err, "%s: tensor %s: shape %s has too many elements to address: corrupt header", path,
                       name, fmt_shape(sbuf, sizeof sbuf, t->ndim, t->shape));
    if (nbits % 8 != 0)
        return tr_fail(err, "%s: tensor %s: %llu elements of %d-bit dtype %s is not a whole number of bytes", path,
                       name, (ull)nelem, bits, t->dtype);
    uint64_t need = nbits / 8;

    /* data_offsets */
    const tr_json_node *off = tr_json_get(doc, e, "data_offsets");
    if (!off)
        return tr_fail(err, "%s: tensor %s: missing \"data_offsets\": corrupt header", path, name);
    if (off->type != TR_JSON_ARRAY || off->count != 2)
        return tr_fail(err, "%s: tensor %s: \"data_offsets\" must be two integers [begin, end]; found %s%s%d%s",
                       path, name, off->type == TR_JSON_ARRAY ? "an array of " : "a ",
                       off->type == TR_JSON_ARRAY ? "" : tr_json_type_name(off->type),
                       off->type == TR_JSON_ARRAY ? off->count : 0, off->type == TR_JSON_ARRAY ? " values" : "");
    const tr_json_node *b = tr_json_first(doc, off), *en = tr_json_next(doc, b);
    char why[96];
    if (!json_uint(b, &t->begin))
        return tr_fail(err, "%s: tensor %s: data_offsets[0] is %s; expected two increasing non-negative integers",
                       path, name, describe_bad_uint(b, why, sizeof why));
    if (!json_uint(en, &t->end))
        return tr_fail(err, "%s: tensor %s: data_offsets[1] is %s; expected two increasing non-negative integers",
                       path, name, describe_bad_uint(en, why, sizeof why));
    if (t->begin > t->end)
        return tr_fail(err, "%s: tensor %s: data_offsets [%llu, %llu] are not increasing (begin > end): corrupt "
                            "header",
                       path, name, (ull)t->begin, (ull)t->end);
    if (t->end - t->begin != need)
        return tr_fail(err, "%s: tensor %s: header lies: data_offsets [%llu, %llu] span %llu bytes but shape %s "
                            "of %s needs %llu bytes: corrupt or hand-edited header, re-export the file",
                       path, name, (ull)t->begin, (ull)t->end, (ull)(t->end - t->begin),
                       fmt_shape(sbuf, sizeof sbuf, t->ndim, t->shape), t->dtype, (ull)need);
    if (t->end > data_size)
        return tr_fail(err, "%s: tensor %s: truncated file: its data ends at byte %llu of the data section but the "
                            "data section has only %llu bytes (incomplete download or copy? fetch the file again)",
                       path, name, (ull)t->end, (ull)data_size);
    return true;
}

static bool st_open(tr_st_file *f, const char *path, tr_err *err)
{
    if (strlen(path) >= sizeof f->path)
        return tr_fail(err, "%.200s...: path too long (%zu bytes, at most %zu)", path, strlen(path),
                       sizeof f->path - 1);
    strcpy(f->path, path);
    if (!tr_st_host_le(path, err))
        return false;
    if (!tr_st_map_file(path, "safetensors file", &f->fd, &f->file_size, &f->map, err))
        return false;
    if (f->file_size < 8)
        return tr_fail(err, "%s: file is %llu bytes, shorter than the 8-byte header length: truncated or not a "
                            "safetensors file",
                       path, (ull)f->file_size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | f->map[i];
    if (hlen > TR_ST_MAX_HEADER)
        return tr_fail(err, "%s: header length %llu is absurd (more than %llu bytes): not a safetensors file, or "
                            "corrupt",
                       path, (ull)hlen, (ull)TR_ST_MAX_HEADER);
    if (hlen > f->file_size - 8)
        return tr_fail(err, "%s: header length %llu is larger than the rest of the file (%llu bytes): truncated "
                            "or not a safetensors file",
                       path, (ull)hlen, (ull)(f->file_size - 8));
    f->data_start = 8 + hlen;
    uint64_t data_size = f->file_size - f->data_start;

    char what[1100];
    snprintf(what, sizeof what, "%s: header", path);
    tr_json_doc doc;
    if (!tr_json_parse(&doc, (const char *)f->map + 8, (size_t)hlen, what, err))
        return false;
    bool ok = false;
    span *spans = NULL;
    const tr_json_node *root = tr_json_root(&doc);
    if (root->type != TR_JSON_OBJECT) {
        tr_fail(err, "%s: header is a JSON %s, expected an object mapping tensor names to entries: not a "
                     "safetensors file",
                path, tr_json_type_name(root->type));
        goto out;
    }
    int n = 0;
    for (const tr_json_node *c = tr_json_first(&doc, root); c; c = tr_json_next(&doc, c)) {
        if (strcmp(c->key, "__metadata__") == 0 && c->key_len == 12) {
            if (!check_metadata(&doc, c, path, err))
                goto out;
        } else {
            n++;
        }
    }
    f->tensors = calloc((size_t)(n > 0 ? n : 1), sizeof *f->tensors);
    spans = calloc((size_t)(n > 0 ? n : 1), sizeof *spans);
    if (!f->tensors || !spans) {
        tr_fail(err, "%s: out of memory for %d tensor entries", path, n);
        goto out;
    }
    for (const tr_json_node *c = tr_json_first(&doc, root); c; c = tr_json_next(&doc, c)) {
        if (strcmp(c->key, "__metadata__") == 0 && c->key_len == 12)
            continue;
        if (!parse_entry(&doc, c, path, data_size, &f->tensors[f->ntensors], err))
            goto out;
        f->ntensors++;
    }
    qsort(f->tensors, (size_t)n, sizeof *f->tensors, cmp_tensor_name);
    for (int i = 1; i < n; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0) {
            tr_fail(err, "%s: duplicate tensor name: %s appears more than once in the header: corrupt header",
                    path, f->tensors[i].name);
            goto out;
        }
    int ns = 0;
    for (int i = 0; i < n; i++)
        if (f->tensors[i].end > f->tensors[i].begin)
            spans[ns++] = (span){f->tensors[i].begin, f->tensors[i].end, i};
    qsort(spans, (size_t)ns, sizeof *spans, cmp_span);
    for (int i = 1; i < ns; i++)
        if (spans[i].begin < spans[i - 1].end) {
            /* sorted by begin: if no neighbours overlap, end[j] <= begin[j+1] <= end[j+1]
               for all j, so no pair does */
            const tr_st_tensor *a = &f->tensors[spans[i - 1].idx], *b = &f->tensors[spans[i].idx];
            tr_fail(err, "%s: tensors %s [bytes %llu, %llu) and %s [bytes %llu, %llu) overlap in the data "
                         "section: corrupt header",
                    path, a->name, (ull)a->begin, (ull)a->end, b->name, (ull)b->begin, (ull)b->end);
            goto out;
        }
    ok = true;
out:
    free(spans);
    tr_json_free(&doc);
    return ok;
}

bool tr_st_open(tr_st_file *f, const char *path, tr_err *err)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (st_open(f, path, err))
        return true;
    tr_st_close(f);
    return false;
}

const tr_st_tensor *tr_st_find(const tr_st_file *f, const char *name)
{
    int lo = 0, hi = f->ntensors - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(f->tensors[mid].name, name);
        if (c == 0)
            return &f->tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

static bool has_dot_suffix(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls > lx && s[ls - lx - 1] == '.' && strcmp(s + ls - lx, suffix) == 0;
}

static bool not_found(const tr_st_file *f, const char *name, tr_err *err)
{
    /* a checkpoint saved with or without a "transformer." style prefix */
    for (int i = 0; i < f->ntensors; i++) {
        const char *t = f->tensors[i].name;
        if (has_dot_suffix(t, name) || has_dot_suffix(name, t))
            return tr_fail(err, "%s: no tensor named %s, but there is %s: the checkpoint uses different name "
                                "prefixes; strip or add the prefix when exporting (tessgen expects Hugging Face "
                                "GPT-2 names like h.0.attn.c_attn.weight)",
                           f->path, name, t);
    }
    return tr_fail(err, "%s: no tensor named %s (the file has %d tensors%s%s): the weights do not match the built "
                        "model; pass the right file or regenerate with the right spec",
                   f->path, name, f->ntensors, f->ntensors ? ", the first is " : "",
                   f->ntensors ? f->tensors[0].name : "");
}

/* F32 and BF16 are read (BF16 widened exactly to float32); any other dtype is refused. */
static bool check_float(const tr_st_file *f, const tr_st_tensor *t, tr_err *err)
{
    if (strcmp(t->dtype, "F32") == 0 || strcmp(t->dtype, "BF16") == 0)
        return true;
    return tr_fail(err, "%s: tensor %s has dtype %s; only F32 and BF16 are accepted (each tensor may be either): "
                        "convert the checkpoint (e.g. save_file({k: v.float() for k, v in sd.items()}, path))",
                   f->path, t->name, t->dtype);
}

bool tr_st_expect_float(const tr_st_file *f, const char *name, int ndim, const int64_t *shape, tr_err *err)
{
    const tr_st_tensor *t = tr_st_find(f, name);
    if (!t)
        return not_found(f, name, err);
    if (!check_float(f, t, err))
        return false;
    bool same = t->ndim == ndim && ndim <= 4;
    for (int i = 0; same && i < ndim; i++)
        same = t->shape[i] == shape[i];
    if (same)
        return true;
    char got[128], want[128];
    return tr_fail(err, "%s: tensor %s has shape %s, expected %s: the weights do not match the built model; "
                        "regenerate with the right spec or pass the right file",
                   f->path, name, fmt_shape(got, sizeof got, t->ndim, t->shape),
                   fmt_shape(want, sizeof want, ndim, shape));
}

bool tr_st_read_block(const tr_st_file *f, const char *name, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                      float *dst, int64_t ldd, tr_err *err)
{
    const tr_st_tensor *t = tr_st_find(f, name);
    if (!t)
        return not_found(f, name, err);
    if (!check_float(f, t, err))
        return false;
    if (t->ndim > 4)
        return tr_fail(err, "%s: tensor %s has %d dimensions; at most 4 are supported", f->path, name, t->ndim);
    /* 2-D view [rows, cols] = [prod(shape[:-1]), shape[-1]] */
    int64_t cols = t->ndim > 0 ? t->shape[t->ndim - 1] : 1;
    uint64_t rows = 1;
    for (int i = 0; i + 1 < t->ndim; i++)
        if (!mul_u64(rows, (uint64_t)t->shape[i], &rows) || rows > INT64_MAX)
            return tr_fail(err, "%s: tensor %s: too many rows to address", f->path, name);
    return copy_block(f->map + f->data_start + t->begin, strcmp(t->dtype, "BF16") == 0 ? 2 : 4, (int64_t)rows,
                      cols, r0, nr, c0, nc, dst, ldd, f->path, name, err);
}

void tr_st_close(tr_st_file *f)
{
    if (f->map) {
        munmap((void *)f->map, (size_t)f->file_size);
        if (f->fd >= 0)
            close(f->fd);
    }
    free(f->tensors);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* ---- writing ------------------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t ncap = b->cap ? b->cap : 256;
        while (ncap < b->len + n + 1)
            ncap *= 2;
        char *np = realloc(b->p, ncap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = ncap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static void sb_json_string(sbuf *b, const char *s)
{
    sb_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char esc[8];
        if (*c == '"' || *c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*c;
            sb_put(b, esc, 2);
        } else if (*c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *c);
            sb_put(b, esc, 6);
        } else {
            sb_put(b, (const char *)c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

typedef struct out_order {
    const char *name;
    int idx;
} out_order;

static int cmp_out(const void *a, const void *b)
{
    return strcmp(((const out_order *)a)->name, ((const out_order *)b)->name);
}

/* The bf16 bits of t's ne values into a new *bits (NULL when ne is 0; the host is little-endian, so the array is
 * the file's bytes). A finite value that would round to an infinity is refused, naming the element: the file
 * would otherwise hold a value the model never had, which --weights then refuses. */
static bool to_bf16(const char *path, const tr_st_out *t, uint64_t ne, uint16_t **bits, tr_err *err)
{
    *bits = NULL;
    for (uint64_t e = 0; e < ne; e++)
        if (tr_bf16_overflows(t->data[e])) {
            int64_t idx[4] = {0, 0, 0, 0};
            uint64_t at = e;
            for (int d = t->ndim - 1; d >= 0; d--) {
                idx[d] = t->shape[d] > 0 ? (int64_t)(at % (uint64_t)t->shape[d]) : 0;
                at = t->shape[d] > 0 ? at / (uint64_t)t->shape[d] : 0;
            }
            char ib[128];
            return tr_fail(err, "%s: tensor %s: element %s = %.9g is finite but rounds past the largest finite bf16 "
                                "(3.3895e+38) to an infinity; BF16 output refuses that rather than change the value: "
                                "nothing written; write F32 (--out-dtype f32)",
                           path, t->name, fmt_shape(ib, sizeof ib, t->ndim, idx), (double)t->data[e]);
        }
    if (ne == 0)
        return true;
    *bits = malloc((size_t)ne * sizeof **bits);
    if (!*bits)
        return tr_fail(err, "%s: tensor %s: out of memory converting to BF16", path, t->name);
    for (uint64_t e = 0; e < ne; e++)
        (*bits)[e] = tr_f32_to_bf16(t->data[e]);
    return true;
}

bool tr_st_write_atomic(const char *path, const tr_st_out *tensors, int n, tr_err *err)
{
    return tr_st_write_atomic_as(path, tensors, n, TR_ST_F32, err);
}

bool tr_st_write_atomic_as(const char *path, const tr_st_out *tensors, int n, tr_st_dtype dtype, tr_err *err)
{
    return tr_st_write_atomic_meta(path, tensors, n, dtype, NULL, 0, err);
}

bool tr_st_write_atomic_meta(const char *path, const tr_st_out *tensors, int n, tr_st_dtype dtype,
                             const char *const *meta, int nmeta, tr_err *err)
{
    if (!tr_st_host_le(path, err))
        return false;
    if (n < 0 || (n > 0 && !tensors))
        return tr_fail(err, "%s: bad tensor list (n=%d)", path, n);
    if (dtype != TR_ST_F32 && dtype != TR_ST_BF16)
        return tr_fail(err, "%s: unknown output dtype %d (TR_ST_F32 or TR_ST_BF16)", path, (int)dtype);
    out_order *order = calloc((size_t)(n > 0 ? n : 1), sizeof *order);
    uint64_t *bytes = calloc((size_t)(n > 0 ? n : 1), sizeof *bytes); /* [n] data bytes per tensor */
    const void **parts = calloc((size_t)n + 2, sizeof *parts);        /* [n+2] length, header, data... */
    uint16_t **conv = calloc((size_t)(n > 0 ? n : 1), sizeof *conv);  /* [n] the BF16 tensors' bits, else NULL */
    size_t *lens = calloc((size_t)n + 2, sizeof *lens);
    sbuf hb = {0};
    bool ok = false;
    if (!order || !bytes || !parts || !lens || !conv) {
        tr_fail(err, "%s: out of memory", path);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        const tr_st_out *t = &tensors[i];
        if (!t->name || !t->name[0] || strlen(t->name) >= TR_ST_NAME_CAP ||
            strcmp(t->name, "__metadata__") == 0) {
            tr_fail(err, "%s: tensor %d has an invalid name \"%.60s\" (must be non-empty, < 160 bytes, not "
                         "__metadata__)",
                    path, i, t->name ? t->name : "(null)");
            goto out;
        }
        size_t bad_at = tr_json_utf8_check(t->name, strlen(t->name));
        if (bad_at < strlen(t->name)) {
            char shown[TR_ST_NAME_CAP * 4];
            size_t o = 0;
            for (const unsigned char *c = (const unsigned char *)t->name; *c; c++) {
                bool plain = *c >= 0x20 && *c < 0x7f && *c != '\\';
                o += (size_t)snprintf(shown + o, sizeof shown - o, plain ? "%c" : "\\x%02x", *c);
            }
            tr_fail(err, "%s: tensor name \"%s\" is not valid UTF-8 (byte %zu): a safetensors header is JSON text, "
                         "which is UTF-8; rename the tensor",
                    path, shown, bad_at);
            goto out;
        }
        if (t->ndim < 0 || t->ndim > 4) {
            tr_fail(err, "%s: tensor %s: ndim %d is outside 0..4", path, t->name, t->ndim);
            goto out;
        }
        uint64_t ne = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0 || !mul_u64(ne, (uint64_t)t->shape[d], &ne)) {
                char sb[128];
                tr_fail(err, "%s: tensor %s: bad shape %s (negative or too large)", path, t->name,
                        fmt_shape(sb, sizeof sb, t->ndim, t->shape));
                goto out;
            }
        }
        if (!mul_u64(ne, dtype == TR_ST_BF16 ? 2 : 4, &bytes[i]) || bytes[i] > SIZE_MAX) {
            tr_fail(err, "%s: tensor %s: too large", path, t->name);
            goto out;
        }
        if (bytes[i] > 0 && !t->data) {
            tr_fail(err, "%s: tensor %s: data is NULL", path, t->name);
            goto out;
        }
        order[i] = (out_order){t->name, i};
        if (dtype == TR_ST_BF16 && !to_bf16(path, t, ne, &conv[i], err))
            goto out;
    }
    qsort(order, (size_t)n, sizeof *order, cmp_out);
    for (int i = 1; i < n; i++)
        if (strcmp(order[i - 1].name, order[i].name) == 0) {
            tr_fail(err, "%s: duplicate tensor name %s in the list to write", path, order[i].name);
            goto out;
        }

    if (nmeta < 0 || (nmeta > 0 && !meta)) {
        tr_fail(err, "%s: bad metadata list (nmeta=%d)", path, nmeta);
        goto out;
    }
    for (int k = 0; k < 2 * nmeta; k++)
        if (!meta[k] || tr_json_utf8_check(meta[k], strlen(meta[k])) < strlen(meta[k])) {
            tr_fail(err, "%s: metadata %s %d is not a valid UTF-8 string: the header is JSON text", path,
                    k % 2 ? "value" : "key", k / 2);
            goto out;
        }
    uint64_t offset = 0;
    sb_puts(&hb, "{");
    if (nmeta > 0) { /* first, as Hugging Face writes it; readers skip it */
        sb_puts(&hb, "\"__metadata__\":{");
        for (int k = 0; k < nmeta; k++) {
            if (k)
                sb_puts(&hb, ",");
            sb_json_string(&hb, meta[2 * k]);
            sb_puts(&hb, ":");
            sb_json_string(&hb, meta[2 * k + 1]);
        }
        sb_puts(&hb, n > 0 ? "}," : "}");
    }
    for (int k = 0; k < n; k++) {
        const tr_st_out *t = &tensors[order[k].idx];
        char num[64];
        if (k)
            sb_puts(&hb, ",");
        sb_json_string(&hb, t->name);
        sb_puts(&hb, dtype == TR_ST_BF16 ? ":{\"dtype\":\"BF16\",\"shape\":[" : ":{\"dtype\":\"F32\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)t->shape[d]);
            sb_puts(&hb, num);
        }
        uint64_t end;
        if (!add_u64(offset, bytes[order[k].idx], &end)) {
            tr_fail(err, "%s: total data size overflows", path);
            goto out;
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (ull)offset, (ull)end);
        sb_puts(&hb, num);
        parts[k + 2] = conv[order[k].idx] ? (const void *)conv[order[k].idx] : (const void *)t->data;
        lens[k + 2] = (size_t)bytes[order[k].idx];
        offset = end;
    }
    sb_puts(&hb, "}");
    while (hb.len % 8 != 0)
        sb_puts(&hb, " ");
    if (hb.oom) {
        tr_fail(err, "%s: out of memory building the header", path);
        goto out;
    }
    unsigned char lenle[8]; /* u64 little-endian header length */
    for (int i = 0; i < 8; i++)
        lenle[i] = (unsigned char)((uint64_t)hb.len >> (8 * i));
    parts[0] = lenle;
    lens[0] = 8;
    parts[1] = hb.p;
    lens[1] = hb.len;
    ok = tr_st_write_file_atomic(path, parts, lens, n + 2, err);
out:
    for (int i = 0; conv && i < n; i++)
        free(conv[i]);
    free(conv);
    free(hb.p);
    free(order);
    free(bytes);
    free(parts);
    free(lens);
    return ok;
}

bool tr_st_metadata(const tr_st_file *f, const char *key, char *out, size_t cap)
{
    if (cap == 0 || !f->map || f->data_start < 8)
        return false;
    out[0] = '\0';
    tr_json_doc doc;
    tr_err e = {{0}};
    if (!tr_json_parse(&doc, (const char *)f->map + 8, (size_t)(f->data_start - 8), f->path, &e))
        return false; /* not reached for a file tr_st_open accepted */
    const tr_json_node *m = tr_json_get(&doc, tr_json_root(&doc), "__metadata__");
    const tr_json_node *v = m ? tr_json_get(&doc, m, key) : NULL;
    bool ok = v && v->type == TR_JSON_STRING && v->str_len < cap && strlen(v->str) == v->str_len;
    if (ok)
        memcpy(out, v->str, v->str_len + 1);
    tr_json_free(&doc);
    return ok;
}
