/*
 * tr_data.c - the token-shard data loader (see tr_data.h for the formats, the
 * batch rule and the position string).
 *
 * Open expands the pattern into a list of paths (directories listed and
 * sorted here), then opens each shard: the first bytes tell a .npy from a
 * .bin; a .npy header is validated by tr_npy_open_i32 (which maps the file
 * only to parse its header and is closed at once), a .bin header is read with
 * one pread of 12 bytes; each shard is closed again after its check. Reading
 * opens the current shard (closing the previous one) and preads into a scratch
 * buffer of one global batch; tokens are widened to int32 and range-checked. Sizes are int64 and every product is bounded at
 * open (B*S+1 < 2^31), so no offset computation can overflow.
 */
#include "tr_data.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tr_npy.h"

typedef long long ll;

/* ---- small helpers ------------------------------------------------------------- */

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Read exactly len bytes at off; false with errno set (0: end of file). */
static bool pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = 0;
            return false;
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return true;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static bool has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n > m && strcmp(s + n - m, suf) == 0;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- the list of paths ---------------------------------------------------------- */

typedef struct pathlist {
    char **v; /* [n] owned strings */
    int n, cap;
} pathlist;

static bool pl_add(pathlist *pl, char *owned, const char *pattern, tr_err *err)
{
    if (!owned)
        return tr_fail(err, "data pattern '%s': out of memory", pattern);
    if (pl->n >= TR_DATA_MAX_SHARDS) {
        free(owned);
        return tr_fail(err, "data pattern '%s': more than %d shards: name fewer (merge shards)", pattern,
                       TR_DATA_MAX_SHARDS);
    }
    if (pl->n == pl->cap) {
        int cap = pl->cap ? 2 * pl->cap : 8;
        char **v = realloc(pl->v, sizeof *v * (size_t)cap);
        if (!v) {
            free(owned);
            return tr_fail(err, "data pattern '%s': out of memory", pattern);
        }
        pl->v = v;
        pl->cap = cap;
    }
    pl->v[pl->n++] = owned;
    return true;
}

static void pl_free(pathlist *pl)
{
    for (int i = 0; i < pl->n; i++)
        free(pl->v[i]);
    free(pl->v);
    memset(pl, 0, sizeof *pl);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular "*.bin" / "*.npy" of dir not starting with '.', sorted by name. */
static bool expand_dir(const char *dir, pathlist *pl, const char *pattern, tr_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return tr_fail(err, "%s: cannot list the directory (%s) (data pattern '%s')", dir, strerror(errno),
                       pattern);
    pathlist names = {0};
    bool ok = true;
    size_t dl = strlen(dir);
    bool slash = dl > 0 && dir[dl - 1] == '/';
    for (struct dirent *e; ok && (e = readdir(d));) {
        if (e->d_name[0] == '.' || !(has_suffix(e->d_name, ".bin") || has_suffix(e->d_name, ".npy")))
            continue;
        size_t len = dl + 1 + strlen(e->d_name) + 1;
        char *p = malloc(len);
        if (p)
            snprintf(p, len, "%s%s%s", dir, slash ? "" : "/", e->d_name);
        struct stat st;
        if (p && (stat(p, &st) != 0 || !S_ISREG(st.st_mode))) {
            free(p); /* a subdirectory or a dangling link named *.bin is not a shard */
            continue;
        }
        ok = pl_add(&names, p, pattern, err);
    }
    closedir(d);
    if (ok && names.n == 0)
        ok = tr_fail(err, "%s: the directory holds no .bin or .npy shard (data pattern '%s'): put the token shards "
                          "there (scripts/mkshard.py writes them) or name the files",
                     dir, pattern);
    if (ok)
        qsort(names.v, (size_t)names.n, sizeof *names.v, cmp_str);
    for (int i = 0; ok && i < names.n; i++) {
        ok = pl_add(pl, names.v[i], pattern, err);
        names.v[i] = NULL;
    }
    pl_free(&names);
    return ok;
}

static bool expand_pattern(const char *pattern, pathlist *pl, tr_err *err)
{
    if (!pattern[0])
        return tr_fail(err, "data pattern is empty: name a shard file, a directory of shards or a comma-separated "
                            "list of them");
    const char *p = pattern;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0)
            return tr_fail(err, "data pattern '%s': empty name at character %zu (two commas, or a comma at an end): "
                                "separate the names by single commas",
                           pattern, (size_t)(p - pattern) + 1);
        char *item = malloc(len + 1);
        if (!item)
            return tr_fail(err, "data pattern '%s': out of memory", pattern);
        memcpy(item, p, len);
        item[len] = '\0';
        struct stat st;
        if (stat(item, &st) != 0) {
            int e = errno;
            tr_fail(err, "%s: %s (data pattern '%s'): name existing shard files or directories", item, strerror(e),
                    pattern);
            free(item);
            return false;
        }
        bool ok;
        if (S_ISDIR(st.st_mode)) {
            ok = expand_dir(item, pl, pattern, err);
            free(item);
        } else if (S_ISREG(st.st_mode)) {
            ok = pl_add(pl, item, pattern, err);
        } else {
            ok = tr_fail(err, "%s: not a regular file or a directory (data pattern '%s')", item, pattern);
            free(item);
        }
        if (!ok)
            return false;
        if (!comma)
            return true;
        p = comma + 1;
    }
}

/* ---- one shard ---------------------------------------------------------------------- */

static bool open_npy(tr_data_shard *sh, uint64_t size, tr_err *err)
{
    tr_npy f;
    if (!tr_npy_open_i32(&f, sh->path, err))
        return false;
    int ndim = f.ndim;
    /* the data fills the file (tr_npy checked prod(shape)*4 against its size), so this cannot overflow */
    int64_t n = ndim == 1 ? f.shape[0] : ndim == 2 ? f.shape[0] * f.shape[1] : 0;
    uint64_t data_off = f.data_off, fsize = f.file_size;
    tr_npy_close(&f);
    if (ndim != 1 && ndim != 2)
        return tr_fail(err, "%s: a token .npy must be 1-D [N] or 2-D [R, C] (one stream in C order), this one has "
                            "%d dimensions: save tokens.reshape(-1)",
                       sh->path, ndim);
    if (fsize != size)
        return tr_fail(err, "%s: the file changed while it was opened (%llu bytes, then %llu): open it again once "
                            "it is written",
                       sh->path, (unsigned long long)size, (unsigned long long)fsize);
    sh->kind = TR_DATA_NPY;
    sh->elem = 4;
    sh->data_off = data_off;
    sh->ntok = n;
    return true;
}

static bool open_bin(tr_data_shard *sh, int fd, uint64_t size, tr_err *err)
{
    if (size < TR_DATA_BIN_HEADER)
        return tr_fail(err, "%s: truncated: %llu bytes, shorter than the %d-byte header of an llm.c .bin shard (256 "
                            "int32): write the shard again (scripts/mkshard.py)",
                       sh->path, (unsigned long long)size, TR_DATA_BIN_HEADER);
    unsigned char h[12];
    if (!pread_all(fd, h, sizeof h, 0))
        return tr_fail(err, "%s: cannot read the header (%s)", sh->path, errno ? strerror(errno) : "end of file");
    uint32_t magic = le32(h), version = le32(h + 4);
    int32_t n = (int32_t)le32(h + 8);
    if (magic != TR_DATA_BIN_MAGIC)
        return tr_fail(err, "%s: bad magic %u in header int32 [0], expected %d: not an llm.c token shard (.bin) nor "
                            "a .npy; write it with scripts/mkshard.py or llm.c's data scripts",
                       sh->path, (unsigned)magic, TR_DATA_BIN_MAGIC);
    if (version != TR_DATA_BIN_VERSION)
        return tr_fail(err, "%s: version %u in header int32 [1], expected %d (uint16 tokens)%s", sh->path,
                       (unsigned)version, TR_DATA_BIN_VERSION,
                       version == 2 ? ": version 2 holds uint32 tokens (llm.c's Llama 3 shards), not read here; "
                                      "save them as an int32 .npy"
                                    : ": write the shard again (scripts/mkshard.py)");
    if (n < 0)
        return tr_fail(err, "%s: header int32 [2] (the token count) is %d, negative: corrupt header", sh->path,
                       (int)n);
    uint64_t want = TR_DATA_BIN_HEADER + 2 * (uint64_t)n;
    if (size < want)
        return tr_fail(err, "%s: truncated: the header says %d tokens, which need %llu bytes, but the file has %llu "
                            "(%llu tokens): an incomplete write or copy; write or copy it again",
                       sh->path, (int)n, (unsigned long long)want, (unsigned long long)size,
                       (unsigned long long)((size - TR_DATA_BIN_HEADER) / 2));
    if (size > want)
        return tr_fail(err, "%s: token count %d in header int32 [2] does not match the file size: %llu bytes, "
                            "expected 1024 + 2*%d = %llu (%llu bytes too many): fix the count or write the shard "
                            "again",
                       sh->path, (int)n, (unsigned long long)size, (int)n, (unsigned long long)want,
                       (unsigned long long)(size - want));
    sh->kind = TR_DATA_BIN;
    sh->elem = 2;
    sh->data_off = TR_DATA_BIN_HEADER;
    sh->ntok = n;
    return true;
}

/* Open path read-only and check it is still the regular file of `size` bytes
 * it was (size UINT64_MAX: any size, stored in *size_out). Returns the fd or -1. */
static int open_checked(const char *path, uint64_t size, uint64_t *size_out, tr_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tr_fail(err, "%s: cannot open (%s)", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        tr_fail(err, "%s: not a regular file", path);
        return -1;
    }
    if (size != UINT64_MAX && (uint64_t)st.st_size != size) {
        close(fd);
        tr_fail(err, "%s: the file changed since the data was opened (%llu bytes, now %llu): a shard must not be "
                     "rewritten during a run",
                path, (unsigned long long)size, (unsigned long long)st.st_size);
        return -1;
    }
    if (size_out)
        *size_out = (uint64_t)st.st_size;
    return fd;
}

static bool check_shard(tr_data_shard *sh, int fd, int64_t need, tr_err *err)
{
    uint64_t size = sh->size;
    unsigned char m[6] = {0};
    if (size >= 6 && !pread_all(fd, m, 6, 0))
        return tr_fail(err, "%s: cannot read (%s)", sh->path, errno ? strerror(errno) : "end of file");
    bool ok = size >= 6 && memcmp(m, "\x93NUMPY", 6) == 0 ? open_npy(sh, size, err) : open_bin(sh, fd, size, err);
    if (!ok)
        return false;
    if (sh->ntok < need)
        return tr_fail(err, "%s: %lld tokens, fewer than one batch needs (B*S+1 = %lld): use a smaller batch or "
                            "sequence length, or merge this shard with another",
                       sh->path, (ll)sh->ntok, (ll)need);
    return true;
}

static bool open_shard(tr_data_shard *sh, int64_t need, tr_err *err)
{
    int fd = open_checked(sh->path, UINT64_MAX, &sh->size, err);
    if (fd < 0)
        return false;
    bool ok = check_shard(sh, fd, need, err);
    close(fd);
    return ok;
}

/* ---- open, close, position -------------------------------------------------------- */

static uint64_t fingerprint(const tr_data *dl)
{
    uint64_t h = 0xcbf29ce484222325ull;
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)dl->nshards >> (8 * i));
    h = fnv1a(h, b, 8);
    for (int s = 0; s < dl->nshards; s++) {
        const tr_data_shard *sh = &dl->shards[s];
        const char *bn = base_name(sh->path);
        h = fnv1a(h, bn, strlen(bn) + 1);
        b[0] = (unsigned char)sh->kind;
        h = fnv1a(h, b, 1);
        for (int i = 0; i < 8; i++)
            b[i] = (unsigned char)((uint64_t)sh->ntok >> (8 * i));
        h = fnv1a(h, b, 8);
    }
    return h;
}

static bool data_open(tr_data *dl, const char *pattern, int64_t B, int64_t S, int64_t vocab, tr_err *err)
{
    if (B < 1 || S < 1 || B > INT32_MAX / S - 1)
        return tr_fail(err, "data pattern '%s': batch %lld x seq %lld: each must be >= 1 and B*S+1 at most %d",
                       pattern, (ll)B, (ll)S, INT32_MAX);
    if (vocab < 1 || vocab > INT32_MAX)
        return tr_fail(err, "data pattern '%s': vocab %lld is outside 1..%d", pattern, (ll)vocab, INT32_MAX);
    dl->B = B;
    dl->S = S;
    dl->vocab = vocab;
    dl->pattern = strdup(pattern);
    if (!dl->pattern)
        return tr_fail(err, "data pattern '%s': out of memory", pattern);
    pathlist pl = {0};
    if (!expand_pattern(pattern, &pl, err)) {
        pl_free(&pl);
        return false;
    }
    dl->shards = calloc((size_t)pl.n, sizeof *dl->shards);
    if (!dl->shards) {
        pl_free(&pl);
        return tr_fail(err, "data pattern '%s': out of memory", pattern);
    }
    for (int i = 0; i < pl.n; i++) {
        dl->shards[i].path = pl.v[i];
        pl.v[i] = NULL;
    }
    dl->nshards = pl.n;
    pl_free(&pl);
    for (int i = 0; i < dl->nshards; i++)
        if (!open_shard(&dl->shards[i], B * S + 1, err))
            return false;
    dl->scratch = malloc((size_t)(B * S + 1) * 4);
    if (!dl->scratch)
        return tr_fail(err, "data pattern '%s': out of memory for one batch (%lld tokens)", pattern,
                       (ll)(B * S + 1));
    dl->fingerprint = fingerprint(dl);
    tr_data_reset(dl);
    return true;
}

bool tr_data_open(tr_data *dl, const char *pattern, int64_t B, int64_t S, int64_t vocab, tr_err *err)
{
    memset(dl, 0, sizeof *dl);
    dl->fd = -1;
    if (data_open(dl, pattern, B, S, vocab, err))
        return true;
    tr_data_close(dl);
    return false;
}

void tr_data_close(tr_data *dl)
{
    if (dl->fd >= 0)
        close(dl->fd);
    for (int i = 0; i < dl->nshards; i++)
        free(dl->shards[i].path);
    free(dl->shards);
    free(dl->pattern);
    free(dl->scratch);
    memset(dl, 0, sizeof *dl);
    dl->fd = -1;
}

void tr_data_reset(tr_data *dl)
{
    dl->pos = (tr_data_pos){.fingerprint = dl->fingerprint, .nshards = dl->nshards};
}

tr_data_pos tr_data_tell(const tr_data *dl)
{
    return dl->pos;
}

void tr_data_next(tr_data *dl)
{
    int64_t bs = dl->B * dl->S;
    tr_data_pos *p = &dl->pos;
    p->batches++;
    p->offset += bs;
    if (p->offset + bs + 1 > dl->shards[p->shard].ntok) {
        p->offset = 0;
        if (++p->shard == dl->nshards) {
            p->shard = 0;
            p->epoch++;
        }
    }
}

int64_t tr_data_epoch_batches(const tr_data *dl)
{
    int64_t n = 0;
    for (int i = 0; i < dl->nshards; i++)
        n += (dl->shards[i].ntok - 1) / (dl->B * dl->S);
    return n;
}

bool tr_data_read(tr_data *dl, int64_t b0, int64_t nb, int32_t *inputs, int32_t *targets, tr_err *err)
{
    if (!dl->shards)
        return tr_fail(err, "data loader: read on a closed loader");
    if (b0 < 0 || nb < 1 || b0 > dl->B - nb)
        return tr_fail(err, "data pattern '%s': sequences %lld..%lld asked, the batch has 0..%lld", dl->pattern,
                       (ll)b0, (ll)(b0 + nb - 1), (ll)(dl->B - 1));
    const tr_data_shard *sh = &dl->shards[dl->pos.shard];
    int64_t first = dl->pos.offset + b0 * dl->S; /* token index in the shard */
    int64_t count = nb * dl->S + 1;
    if (first + count > sh->ntok) /* only a restore could do this, and it checks: kept as a guard */
        return tr_fail(err, "%s: tokens %lld..%lld are beyond its %lld tokens", sh->path, (ll)first,
                       (ll)(first + count - 1), (ll)sh->ntok);
    if (dl->fd < 0 || dl->fd_shard != dl->pos.shard) {
        if (dl->fd >= 0)
            close(dl->fd);
        dl->fd = open_checked(sh->path, sh->size, NULL, err);
        dl->fd_shard = (int)dl->pos.shard;
        if (dl->fd < 0)
            return false;
    }
    unsigned char *raw = dl->scratch; /* [count * elem] bytes */
    if (!pread_all(dl->fd, raw, (size_t)(count * sh->elem), sh->data_off + (uint64_t)first * (uint64_t)sh->elem))
        return tr_fail(err, "%s: cannot read tokens %lld..%lld (%s): was the file changed after it was opened?",
                       sh->path, (ll)first, (ll)(first + count - 1), errno ? strerror(errno) : "end of file");
    for (int64_t i = 0; i < count; i++) {
        const unsigned char *q = raw + i * sh->elem;
        int64_t t = sh->elem == 2 ? (int64_t)(q[0] | q[1] << 8) : (int64_t)(int32_t)le32(q);
        if (t < 0 || t >= dl->vocab)
            return tr_fail(err, "%s: token %lld of the shard is %lld, outside the vocabulary 0..%lld (vocab = %lld): "
                                "the shard was made with another tokenizer, or the model's vocab is too small",
                           sh->path, (ll)(first + i), (ll)t, (ll)(dl->vocab - 1), (ll)dl->vocab);
        if (i < count - 1)
            inputs[i] = (int32_t)t;
        if (i > 0)
            targets[i - 1] = (int32_t)t;
    }
    return true;
}

bool tr_data_restore(tr_data *dl, const tr_data_pos *pos, tr_err *err)
{
    if (pos->fingerprint != dl->fingerprint || pos->nshards != dl->nshards)
        return tr_fail(err, "data pattern '%s': the position was saved on another data set (%lld shards, "
                            "fingerprint %016" PRIx64 "); these %d shards have fingerprint %016" PRIx64
                            " (shard names, kinds or token counts differ): resume with the data the position was "
                            "saved on, or start this data from its beginning",
                       dl->pattern, (ll)pos->nshards, pos->fingerprint, dl->nshards, dl->fingerprint);
    if (pos->shard < 0 || pos->shard >= dl->nshards)
        return tr_fail(err, "data pattern '%s': position shard %lld is outside 0..%d", dl->pattern, (ll)pos->shard,
                       dl->nshards - 1);
    const tr_data_shard *sh = &dl->shards[pos->shard];
    int64_t bs = dl->B * dl->S;
    if (pos->offset < 0 || pos->offset > sh->ntok - bs - 1)
        return tr_fail(err, "%s: position offset %lld: a batch of B*S+1 = %lld tokens from there does not fit the "
                            "shard's %lld tokens: the position was saved with a smaller batch or sequence length; "
                            "resume with the spec it was saved with",
                       sh->path, (ll)pos->offset, (ll)(bs + 1), (ll)sh->ntok);
    if (pos->epoch < 0 || pos->batches < 0)
        return tr_fail(err, "data pattern '%s': position epoch %lld and batches %lld must be >= 0", dl->pattern,
                       (ll)pos->epoch, (ll)pos->batches);
    dl->pos = *pos;
    return true;
}

/* ---- the position string -------------------------------------------------------------- */

#define POS_FMT "data v1 shards=%lld fp=%016" PRIx64 " shard=%lld offset=%lld epoch=%lld batches=%lld"

int tr_data_pos_format(const tr_data_pos *pos, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, POS_FMT, (ll)pos->nshards, pos->fingerprint, (ll)pos->shard, (ll)pos->offset,
                     (ll)pos->epoch, (ll)pos->batches);
    if (n < 0 || (size_t)n >= cap) {
        if (cap > 0)
            buf[0] = '\0';
        return -1;
    }
    return n;
}

typedef struct posparser {
    const char *s, *what;
    size_t at;
    tr_err *err;
} posparser;

static bool pp_fail(posparser *p, const char *expected)
{
    return tr_fail(p->err, "%s '%.200s': expected %s at character %zu: a data position reads like 'data v1 "
                           "shards=1 fp=0123456789abcdef shard=0 offset=0 epoch=0 batches=0', as the run saved it",
                   p->what, p->s, expected, p->at + 1);
}

static bool pp_lit(posparser *p, const char *lit)
{
    size_t n = strlen(lit);
    if (strncmp(p->s + p->at, lit, n) != 0) {
        char want[64];
        snprintf(want, sizeof want, "'%s'", lit);
        return pp_fail(p, want);
    }
    p->at += n;
    return true;
}

/* A decimal integer 0..10^18-1 without sign or leading zeros. */
static bool pp_int(posparser *p, int64_t *v)
{
    const char *q = p->s + p->at;
    size_t n = 0;
    while (q[n] >= '0' && q[n] <= '9')
        n++;
    if (n == 0 || n > 18 || (n > 1 && q[0] == '0'))
        return pp_fail(p, "a decimal integer (0 to 18 digits, no sign, no leading zero)");
    int64_t x = 0;
    for (size_t i = 0; i < n; i++)
        x = x * 10 + (q[i] - '0');
    *v = x;
    p->at += n;
    return true;
}

bool tr_data_pos_parse(const char *s, const char *what, tr_data_pos *pos, tr_err *err)
{
    posparser p = {s, what ? what : "position", 0, err};
    tr_data_pos r = {0};
    if (!pp_lit(&p, "data v1 shards=") || !pp_int(&p, &r.nshards) || !pp_lit(&p, " fp="))
        return false;
    for (int i = 0; i < 16; i++) {
        char c = s[p.at];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return pp_fail(&p, "16 lowercase hexadecimal digits");
        r.fingerprint = r.fingerprint << 4 | (uint64_t)d;
        p.at++;
    }
    if (!pp_lit(&p, " shard=") || !pp_int(&p, &r.shard) || !pp_lit(&p, " offset=") || !pp_int(&p, &r.offset) ||
        !pp_lit(&p, " epoch=") || !pp_int(&p, &r.epoch) || !pp_lit(&p, " batches=") || !pp_int(&p, &r.batches))
        return false;
    if (s[p.at] != '\0')
        return pp_fail(&p, "the end of the string");
    if (r.nshards < 1 || r.shard >= r.nshards)
        return tr_fail(err, "%s '%.200s': shard %lld is not one of the %lld shards", p.what, s, (ll)r.shard,
                       (ll)r.nshards);
    *pos = r;
    return true;
}

void tr_data_describe(const tr_data *dl, char *buf, size_t cap)
{
    int64_t tok = 0;
    for (int i = 0; i < dl->nshards; i++)
        tok += dl->shards[i].ntok;
    snprintf(buf, cap, "%s: %d shard%s, %lld tokens, %lld batches of %lldx%lld per epoch", dl->pattern,
             dl->nshards, dl->nshards == 1 ? "" : "s", (ll)tok, (ll)tr_data_epoch_batches(dl), (ll)dl->B,
             (ll)dl->S);
}
