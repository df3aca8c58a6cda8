/*
 * test_data.c - unit tests for the token-shard data loader, runtime/tr_data.c
 * (tests/tt.h protocol, one line per case; run from the repository root).
 *
 * Shards are written here byte by byte (the .bin header and the .npy preamble
 * by hand, never through the loader or tr_npy's writer) into a fresh mkdtemp
 * directory, with token values that are a function of (shard, index). The
 * reference for every batch is computed here from the concatenated token
 * stream: the batches of one epoch are enumerated shard by shard (offsets 0,
 * B*S, 2*B*S, ... while B*S+1 tokens fit), batch k is entry k mod that count
 * in epoch k / count, and its inputs and targets are read off the stream at
 * the shard's start plus the offset. The loader's incremental position must
 * agree with that enumeration for several (B, S). Every refusal is provoked
 * by one defect and its message must name the file and the problem.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tr_data.h"
#include "tt.h"

static char g_dir[64]; /* the mkdtemp directory */

/* g_dir + "/" + name, in one of 8 rotating buffers. */
static const char *P(const char *name)
{
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", g_dir, name);
    return b;
}

static bool has(const char *msg, const char *w)
{
    return strstr(msg, w) != NULL;
}

static bool write_bytes(const char *path, const void *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return false;
    bool ok = fwrite(data, 1, len, fp) == len;
    return fclose(fp) == 0 && ok;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* An llm.c .bin: header {magic, version, count, 0...} then ntok uint16 LE tokens. */
static bool write_bin_raw(const char *path, uint32_t magic, uint32_t version, int32_t count, const int64_t *tok,
                          int64_t ntok)
{
    size_t len = 1024 + 2 * (size_t)ntok;
    unsigned char *b = calloc(len, 1);
    if (!b)
        return false;
    put32(b, magic);
    put32(b + 4, version);
    put32(b + 8, (uint32_t)count);
    for (int64_t i = 0; i < ntok; i++) {
        b[1024 + 2 * i] = (unsigned char)(tok[i] & 0xff);
        b[1024 + 2 * i + 1] = (unsigned char)((tok[i] >> 8) & 0xff);
    }
    bool ok = write_bytes(path, b, len);
    free(b);
    return ok;
}

static bool write_bin(const char *path, const int64_t *tok, int64_t ntok)
{
    return write_bin_raw(path, 20240520, 1, (int32_t)ntok, tok, ntok);
}

/* A v1.0 .npy: magic, version, header length, the dict padded with spaces and '\n' to a
 * multiple of 64, then ntok 4-byte little-endian values. */
static bool write_npy(const char *path, const char *descr, const char *shape, const int64_t *tok, int64_t ntok)
{
    char dict[256];
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    size_t total = ((size_t)10 + (size_t)dl + 1 + 63) / 64 * 64;
    size_t len = total + 4 * (size_t)ntok;
    unsigned char *b = calloc(len, 1);
    if (!b)
        return false;
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)((total - 10) & 0xff);
    b[9] = (unsigned char)((total - 10) >> 8);
    memcpy(b + 10, dict, (size_t)dl);
    memset(b + 10 + dl, ' ', total - 10 - (size_t)dl - 1);
    b[total - 1] = '\n';
    for (int64_t i = 0; i < ntok; i++)
        put32(b + total + 4 * i, (uint32_t)(int32_t)tok[i]);
    bool ok = write_bytes(path, b, len);
    free(b);
    return ok;
}

/* The value of token i of shard s (distinct enough that a shifted read shows). */
static int64_t tokval(int s, int64_t i, int64_t vocab)
{
    return (s * 7919 + i * 31 + 5) % vocab;
}

/* ---- the reference: shards as one concatenated stream ------------------------------- */

#define MAXSH 8
typedef struct ref {
    int n;                 /* shards */
    int64_t ntok[MAXSH];
    int64_t start[MAXSH];  /* index of each shard's first token in the stream */
    int64_t *stream;       /* [sum ntok] */
    int64_t nb;            /* batches per epoch */
    int64_t bshard[4096], boff[4096]; /* [nb] the batches of one epoch */
} ref;

static void ref_init(ref *r, int n, const int64_t *ntok, int64_t vocab, const int *valseed)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    int64_t total = 0;
    for (int s = 0; s < n; s++) {
        r->ntok[s] = ntok[s];
        r->start[s] = total;
        total += ntok[s];
    }
    r->stream = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
    for (int s = 0; s < n; s++)
        for (int64_t i = 0; i < ntok[s]; i++)
            r->stream[r->start[s] + i] = tokval(valseed[s], i, vocab);
}

/* Enumerate one epoch's batches for B*S tokens per batch. */
static void ref_epoch(ref *r, int64_t bs)
{
    r->nb = 0;
    for (int s = 0; s < r->n; s++)
        for (int64_t off = 0; off + bs + 1 <= r->ntok[s]; off += bs) {
            r->bshard[r->nb] = s;
            r->boff[r->nb] = off;
            r->nb++;
        }
}

/* Compare rows b0..b0+nb-1 of batch k with the loader's arrays; returns the first mismatch or -1. */
static int64_t ref_cmp(const ref *r, int64_t k, int64_t S, int64_t b0, int64_t nb, const int32_t *in,
                       const int32_t *tg)
{
    int64_t e = k % r->nb;
    int64_t g = r->start[r->bshard[e]] + r->boff[e] + b0 * S;
    for (int64_t i = 0; i < nb * S; i++)
        if (in[i] != r->stream[g + i] || tg[i] != r->stream[g + i + 1])
            return i;
    return -1;
}

/* Write the shards of r as .bin files name0, name1, ...; values from tokval(seed[s]). */
static bool write_ref_bins(const ref *r, const char *const *names)
{
    for (int s = 0; s < r->n; s++)
        if (!write_bin(P(names[s]), r->stream + r->start[s], r->ntok[s]))
            return false;
    return true;
}

/* ---- cases ---------------------------------------------------------------------------- */

static void test_batches(void)
{
    static const int64_t ntok[3] = {50, 37, 64};
    static const int seed[3] = {0, 1, 2};
    static const char *const names[3] = {"b0.bin", "b1.bin", "b2.bin"};
    ref r;
    ref_init(&r, 3, ntok, 65536, seed);
    bool wrote = write_ref_bins(&r, names);
    char pattern[1600];
    snprintf(pattern, sizeof pattern, "%s,%s,%s", P(names[0]), P(names[1]), P(names[2]));
    static const int64_t bsz[][2] = {{1, 1}, {2, 3}, {4, 5}, {3, 7}, {1, 36}};
    for (size_t c = 0; c < sizeof bsz / sizeof bsz[0]; c++) {
        int64_t B = bsz[c][0], S = bsz[c][1];
        char name[160];
        snprintf(name, sizeof name, "batches: 3 .bin shards (50, 37, 64 tokens), B=%lld S=%lld, 3 epochs and a bit "
                 "equal the reference over the concatenated stream", (long long)B, (long long)S);
        TT_CASE(name)
        {
            TT_CHECK(wrote, "writing the shards failed");
            tr_data dl;
            tr_err e = {{0}};
            bool ok = tr_data_open(&dl, pattern, B, S, 65536, &e);
            TT_CHECK(ok, "%.400s", e.msg);
            ref_epoch(&r, B * S);
            if (ok) {
                TT_CHECK(tr_data_epoch_batches(&dl) == r.nb, "epoch batches %lld, reference %lld",
                         (long long)tr_data_epoch_batches(&dl), (long long)r.nb);
                int32_t *in = malloc(sizeof(int32_t) * (size_t)(B * S)), *tg = malloc(sizeof(int32_t) * (size_t)(B * S));
                int64_t steps = 3 * r.nb + 2;
                for (int64_t k = 0; k < steps && !tt_case_failed; k++) {
                    tr_data_pos p = tr_data_tell(&dl);
                    int64_t ee = k % r.nb;
                    TT_CHECK(p.shard == r.bshard[ee] && p.offset == r.boff[ee] && p.epoch == k / r.nb &&
                                 p.batches == k,
                             "batch %lld: position shard %lld offset %lld epoch %lld batches %lld, reference shard "
                             "%lld offset %lld epoch %lld",
                             (long long)k, (long long)p.shard, (long long)p.offset, (long long)p.epoch,
                             (long long)p.batches, (long long)r.bshard[ee], (long long)r.boff[ee],
                             (long long)(k / r.nb));
                    memset(in, 0xff, sizeof(int32_t) * (size_t)(B * S));
                    memset(tg, 0xff, sizeof(int32_t) * (size_t)(B * S));
                    TT_CHECK(tr_data_read(&dl, 0, B, in, tg, &e), "batch %lld: %.300s", (long long)k, e.msg);
                    int64_t bad = ref_cmp(&r, k, S, 0, B, in, tg);
                    TT_CHECK(bad < 0, "batch %lld: element %lld differs from the reference", (long long)k,
                             (long long)bad);
                    tr_data_next(&dl);
                }
                free(in);
                free(tg);
            }
            tr_data_close(&dl);
        }
    }

    TT_CASE("batches: partial reads (b0, nb) equal the rows of the reference, for every b0, nb of B=5 S=3, two "
            "epochs")
    {
        int64_t B = 5, S = 3;
        tr_data dl;
        tr_err e = {{0}};
        bool ok = tr_data_open(&dl, pattern, B, S, 65536, &e);
        TT_CHECK(ok, "%.400s", e.msg);
        ref_epoch(&r, B * S);
        for (int64_t k = 0; ok && k < 2 * r.nb && !tt_case_failed; k++) {
            for (int64_t b0 = 0; b0 < B; b0++)
                for (int64_t nb = 1; b0 + nb <= B; nb++) {
                    int32_t in[15], tg[15];
                    memset(in, 0xff, sizeof in);
                    memset(tg, 0xff, sizeof tg);
                    TT_CHECK(tr_data_read(&dl, b0, nb, in, tg, &e), "%.300s", e.msg);
                    int64_t bad = ref_cmp(&r, k, S, b0, nb, in, tg);
                    TT_CHECK(bad < 0, "batch %lld b0 %lld nb %lld: element %lld differs", (long long)k, (long long)b0,
                             (long long)nb, (long long)bad);
                    /* nothing written past nb rows */
                    TT_CHECK(nb * S == 15 || (in[nb * S] == -1 && tg[nb * S] == -1), "wrote past %lld rows",
                             (long long)nb);
                }
            tr_data_next(&dl);
        }
        tr_err e2 = {{0}};
        int32_t x[15];
        TT_CHECK(ok && !tr_data_read(&dl, 3, 3, x, x, &e2) && has(e2.msg, "3..5") && has(e2.msg, "0..4"),
                 "rows past the batch: %.300s", e2.msg);
        tr_data_close(&dl);
    }

    TT_CASE("batches: one shard wraps onto itself, counting epochs (60 tokens, B=2 S=7: 4 batches per epoch)")
    {
        tr_data dl;
        tr_err e = {{0}};
        bool ok = tr_data_open(&dl, P("b2.bin"), 2, 7, 65536, &e);
        TT_CHECK(ok, "%.400s", e.msg);
        /* b2.bin has 64 tokens: offsets 0, 14, 28, 42 (42+15 = 57 <= 64; 56+15 = 71 > 64) */
        static const int64_t offs[4] = {0, 14, 28, 42};
        for (int k = 0; ok && k < 10; k++) {
            tr_data_pos p = tr_data_tell(&dl);
            TT_CHECK(p.shard == 0 && p.offset == offs[k % 4] && p.epoch == k / 4, "batch %d: offset %lld epoch %lld",
                     k, (long long)p.offset, (long long)p.epoch);
            int32_t in[14], tg[14];
            TT_CHECK(tr_data_read(&dl, 0, 2, in, tg, &e), "%.300s", e.msg);
            TT_CHECK(in[0] == tokval(2, offs[k % 4], 65536) && tg[13] == tokval(2, offs[k % 4] + 14, 65536),
                     "batch %d tokens", k);
            tr_data_next(&dl);
        }
        tr_data_close(&dl);
    }

    TT_CASE("position: format, parse and restore in a new loader give the same next batches and positions")
    {
        int64_t B = 2, S = 3;
        tr_data a, b;
        tr_err e = {{0}};
        bool ok = tr_data_open(&a, pattern, B, S, 65536, &e) && tr_data_open(&b, pattern, B, S, 65536, &e);
        TT_CHECK(ok, "%.400s", e.msg);
        int64_t per = ok ? tr_data_epoch_batches(&a) : 1;
        for (int64_t k = 0; ok && k < per + 3; k++)
            tr_data_next(&a); /* into the second epoch, second shard */
        char s[TR_DATA_POS_CAP];
        tr_data_pos p = tr_data_tell(&a), q;
        TT_CHECK(ok && p.epoch == 1 && p.batches == per + 3, "epoch %lld batches %lld", (long long)p.epoch,
                 (long long)p.batches);
        int n = tr_data_pos_format(&p, s, sizeof s);
        TT_CHECK(n > 0 && (size_t)n == strlen(s), "format returned %d for '%s'", n, s);
        TT_CHECK(tr_data_pos_parse(s, NULL, &q, &e), "%.300s", e.msg);
        TT_CHECK(memcmp(&p, &q, sizeof p) == 0, "parse(format(p)) != p for '%s'", s);
        char s2[TR_DATA_POS_CAP];
        tr_data_pos_format(&q, s2, sizeof s2);
        TT_CHECK(strcmp(s, s2) == 0, "'%s' vs '%s'", s, s2);
        TT_CHECK(ok && tr_data_restore(&b, &q, &e), "%.300s", e.msg);
        for (int64_t k = 0; ok && k < 2 * per && !tt_case_failed; k++) {
            int32_t ia[6], ta[6], ib[6], tb[6];
            tr_data_pos pa = tr_data_tell(&a), pb = tr_data_tell(&b);
            TT_CHECK(memcmp(&pa, &pb, sizeof pa) == 0, "positions differ after %lld batches", (long long)k);
            TT_CHECK(tr_data_read(&a, 0, B, ia, ta, &e) && tr_data_read(&b, 0, B, ib, tb, &e), "%.300s", e.msg);
            TT_CHECK(memcmp(ia, ib, sizeof ia) == 0 && memcmp(ta, tb, sizeof ta) == 0, "batch %lld differs",
                     (long long)k);
            tr_data_next(&a);
            tr_data_next(&b);
        }
        /* a too-small buffer is refused, not overrun */
        char tiny[20];
        TT_CHECK(tr_data_pos_format(&p, tiny, sizeof tiny) == -1 && tiny[0] == '\0', "small buffer");
        tr_data_close(&a);
        tr_data_close(&b);
    }

    TT_CASE("position: reset goes back to the first batch (validation reads the same batches each time)")
    {
        tr_data dl;
        tr_err e = {{0}};
        bool ok = tr_data_open(&dl, pattern, 3, 4, 65536, &e);
        TT_CHECK(ok, "%.400s", e.msg);
        int32_t first[12], tg[12], again[12], tg2[12];
        TT_CHECK(ok && tr_data_read(&dl, 0, 3, first, tg, &e), "%.300s", e.msg);
        for (int k = 0; ok && k < 9; k++)
            tr_data_next(&dl);
        tr_data_reset(&dl);
        tr_data_pos p = tr_data_tell(&dl);
        TT_CHECK(p.shard == 0 && p.offset == 0 && p.epoch == 0 && p.batches == 0, "reset position");
        TT_CHECK(ok && tr_data_read(&dl, 0, 3, again, tg2, &e), "%.300s", e.msg);
        TT_CHECK(memcmp(first, again, sizeof first) == 0 && memcmp(tg, tg2, sizeof tg) == 0, "differs after reset");
        TT_CHECK(first[0] == tokval(0, 0, 65536) && tg[11] == tokval(0, 12, 65536), "first batch values");
        tr_data_close(&dl);
    }
    free(r.stream);
}

/* A directory of .npy (1-D, 2-D) and .bin shards, made out of name order, with files that are not shards. */
static void test_dir(void)
{
    static const int64_t ntok[3] = {40, 30, 24};
    static const int seed[3] = {5, 6, 7};
    ref r;
    ref_init(&r, 3, ntok, 50000, seed);
    bool ok = mkdir(P("d"), 0700) == 0 && mkdir(P("d/sub.bin"), 0700) == 0;
    /* written in the order c, a, b: the loader must read a, b, c */
    ok = ok && write_npy(P("d/c.npy"), "<i4", "(4, 6)", r.stream + r.start[2], 24);
    ok = ok && write_npy(P("d/a.npy"), "<i4", "(40,)", r.stream + r.start[0], 40);
    ok = ok && write_bin(P("d/b.bin"), r.stream + r.start[1], 30);
    ok = ok && write_bytes(P("d/notes.txt"), "not a shard", 11) && write_bytes(P("d/.hidden.bin"), "x", 1);
    TT_CASE("dir: .npy 1-D and 2-D and .bin shards in a directory are read in name order (a, b, c), other files "
            "ignored; batches equal the reference for B=2 S=5 over two epochs")
    {
        TT_CHECK(ok, "writing the shards failed");
        tr_data dl;
        tr_err e = {{0}};
        bool o = tr_data_open(&dl, P("d"), 2, 5, 50000, &e);
        TT_CHECK(o, "%.400s", e.msg);
        TT_CHECK(o && dl.nshards == 3 && has(dl.shards[0].path, "a.npy") && has(dl.shards[1].path, "b.bin") &&
                     has(dl.shards[2].path, "c.npy"),
                 "shards: %d", o ? dl.nshards : -1);
        ref_epoch(&r, 10);
        TT_CHECK(o && tr_data_epoch_batches(&dl) == r.nb && r.nb == 3 + 2 + 2, "epoch batches %lld",
                 (long long)r.nb);
        for (int64_t k = 0; o && k < 2 * r.nb + 1 && !tt_case_failed; k++) {
            int32_t in[10], tg[10];
            TT_CHECK(tr_data_read(&dl, 0, 2, in, tg, &e), "%.300s", e.msg);
            int64_t bad = ref_cmp(&r, k, 5, 0, 2, in, tg);
            TT_CHECK(bad < 0, "batch %lld element %lld", (long long)k, (long long)bad);
            tr_data_next(&dl);
        }
        char line[512];
        if (o)
            tr_data_describe(&dl, line, sizeof line);
        TT_CHECK(o && has(line, "3 shards, 94 tokens, 7 batches of 2x5 per epoch"), "describe: %s", o ? line : "");
        tr_data_close(&dl);
    }

    TT_CASE("dir: a comma list is read in the order given, not sorted; a trailing slash on a directory is fine")
    {
        char pat[1200];
        snprintf(pat, sizeof pat, "%s,%s/", P("d/c.npy"), P("d"));
        tr_data dl;
        tr_err e = {{0}};
        bool o = tr_data_open(&dl, pat, 1, 4, 50000, &e);
        TT_CHECK(o, "%.400s", e.msg);
        TT_CHECK(o && dl.nshards == 4 && has(dl.shards[0].path, "c.npy") && has(dl.shards[1].path, "d/a.npy") &&
                     !has(dl.shards[1].path, "//"),
                 "order: %d shards, first %s", o ? dl.nshards : -1, o ? dl.shards[0].path : "");
        int32_t in[4], tg[4];
        TT_CHECK(o && tr_data_read(&dl, 0, 1, in, tg, &e) && in[0] == tokval(7, 0, 50000) &&
                     tg[3] == tokval(7, 4, 50000),
                 "first batch is not c.npy's: %.300s", e.msg);
        tr_data_close(&dl);
    }
    free(r.stream);
}

/* Open file descriptors of this process. */
static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the DIR's own */
}

static void test_files(void)
{
    TT_CASE("files: 20 shards in a directory hold at most one descriptor while every batch is read, none after close")
    {
        bool ok = mkdir(P("many"), 0700) == 0;
        int64_t t[30];
        for (int f = 0; f < 20 && ok; f++) {
            char name[64];
            snprintf(name, sizeof name, "many/s%02d.bin", f);
            for (int i = 0; i < 30; i++)
                t[i] = tokval(f, i, 65536);
            ok = write_bin(P(name), t, 30);
        }
        TT_CHECK(ok, "writing failed");
        int before = count_fds(), most = 0;
        tr_data dl;
        tr_err e = {{0}};
        bool o = ok && tr_data_open(&dl, P("many"), 2, 7, 65536, &e); /* 2 batches per shard */
        TT_CHECK(o, "%.300s", e.msg);
        TT_CHECK(count_fds() == before, "open holds %d descriptors", count_fds() - before);
        for (int k = 0; o && k < 45 && !tt_case_failed; k++) {
            int32_t in[14], tg[14];
            TT_CHECK(tr_data_read(&dl, 0, 2, in, tg, &e), "%.300s", e.msg);
            int f = (k / 2) % 20;
            TT_CHECK(in[0] == tokval(f, (k % 2) * 14, 65536), "batch %d is not from shard %d", k, f);
            int n = count_fds() - before;
            most = n > most ? n : most;
            tr_data_next(&dl);
        }
        TT_CHECK(most == 1, "held up to %d descriptors", most);
        tr_data_close(&dl);
        TT_CHECK(count_fds() == before, "close left %d descriptors", count_fds() - before);
    }

    TT_CASE("files: a shard rewritten with another size after the open is refused at the next read, naming it")
    {
        int64_t t[40];
        for (int i = 0; i < 40; i++)
            t[i] = i;
        bool ok = write_bin(P("grow0.bin"), t, 40) && write_bin(P("grow1.bin"), t, 40);
        char pat[1200];
        snprintf(pat, sizeof pat, "%s,%s", P("grow0.bin"), P("grow1.bin"));
        tr_data dl;
        tr_err e = {{0}};
        bool o = ok && tr_data_open(&dl, pat, 1, 20, 256, &e);
        TT_CHECK(o, "%.300s", e.msg);
        TT_CHECK(o && write_bin(P("grow1.bin"), t, 39), "rewrite");
        int32_t in[20], tg[20];
        TT_CHECK(o && tr_data_read(&dl, 0, 1, in, tg, &e), "shard 0: %.300s", e.msg);
        if (o)
            tr_data_next(&dl);
        tr_err e2 = {{0}};
        TT_CHECK(o && !tr_data_read(&dl, 0, 1, in, tg, &e2) && has(e2.msg, P("grow1.bin")) &&
                     has(e2.msg, "changed since"),
                 "msg: %.300s", e2.msg);
        tr_data_close(&dl);
    }
}

/* open must fail with a message containing every word in want[] (NULL-terminated). */
static void refused(const char *name, const char *pattern, int64_t B, int64_t S, int64_t vocab,
                    const char *const *want)
{
    TT_CASE(name)
    {
        tr_data dl;
        tr_err e = {{0}};
        bool ok = tr_data_open(&dl, pattern, B, S, vocab, &e);
        TT_CHECK(!ok, "accepted");
        TT_CHECK(!ok && dl.shards == NULL && dl.pattern == NULL && dl.scratch == NULL, "a refused open left state");
        for (int i = 0; want[i]; i++)
            TT_CHECK(has(e.msg, want[i]), "message lacks '%s': %.400s", want[i], e.msg);
        if (ok)
            tr_data_close(&dl);
    }
}

static void test_refused(void)
{
    int64_t tok[100];
    for (int i = 0; i < 100; i++)
        tok[i] = tokval(3, i, 256);
    bool ok = write_bin_raw(P("magic.bin"), 20240521, 1, 100, tok, 100);
    ok = ok && write_bin_raw(P("version.bin"), 20240520, 3, 100, tok, 100);
    ok = ok && write_bin_raw(P("v2.bin"), 20240520, 2, 50, tok, 100);
    ok = ok && write_bin_raw(P("count.bin"), 20240520, 1, 90, tok, 100);  /* 10 tokens more than it says */
    ok = ok && write_bin_raw(P("trunc.bin"), 20240520, 1, 100, tok, 80); /* 20 tokens fewer */
    ok = ok && write_bin_raw(P("neg.bin"), 20240520, 1, -1, tok, 0);
    ok = ok && write_bytes(P("hdr.bin"), "\x28\xd4\x34\x01", 4);             /* 4 bytes of a header */
    ok = ok && write_bin(P("short.bin"), tok, 20);
    ok = ok && write_bin(P("good.bin"), tok, 100);
    ok = ok && write_npy(P("i8.npy"), "<i8", "(50,)", tok, 100);
    ok = ok && write_npy(P("f4.npy"), "<f4", "(100,)", tok, 100);
    ok = ok && write_npy(P("be.npy"), ">i4", "(100,)", tok, 100);
    ok = ok && write_npy(P("d3.npy"), "<i4", "(2, 5, 10)", tok, 100);
    ok = ok && write_npy(P("nt.npy"), "<i4", "(100,)", tok, 90);
    ok = ok && mkdir(P("empty"), 0700) == 0 && write_bytes(P("empty/readme.txt"), "x", 1);
    TT_CASE("refused: the bad shards were written")
    {
        TT_CHECK(ok, "writing failed");
    }
    char buf[16][600];
#define W(...) ((const char *const[]){__VA_ARGS__, NULL})
    refused("refused: bad magic names the file, the magic and the expected one", P("magic.bin"), 1, 8, 256,
            W(P("magic.bin"), "bad magic 20240521", "20240520"));
    refused("refused: bad version", P("version.bin"), 1, 8, 256, W(P("version.bin"), "version 3", "expected 1"));
    refused("refused: version 2 (uint32 tokens) says what it is", P("v2.bin"), 1, 8, 256,
            W(P("v2.bin"), "version 2", "uint32"));
    refused("refused: a token count that does not match the file size", P("count.bin"), 1, 8, 256,
            W(P("count.bin"), "token count 90", "does not match the file size", "20 bytes too many"));
    refused("refused: truncated tokens (count larger than the file)", P("trunc.bin"), 1, 8, 256,
            W(P("trunc.bin"), "truncated", "100 tokens", "80 tokens"));
    refused("refused: a file shorter than the 1024-byte header", P("hdr.bin"), 1, 8, 256,
            W(P("hdr.bin"), "truncated", "4 bytes", "1024-byte header"));
    refused("refused: a negative token count", P("neg.bin"), 1, 8, 256, W(P("neg.bin"), "-1", "negative"));
    refused("refused: a shard shorter than one batch (20 tokens, B*S+1 = 21)", P("short.bin"), 4, 5, 256,
            W(P("short.bin"), "20 tokens", "B*S+1 = 21"));
    refused("refused: an int64 .npy names its dtype and the one wanted", P("i8.npy"), 1, 8, 256,
            W(P("i8.npy"), "'<i8'", "'<i4'", "np.int32"));
    refused("refused: a float32 .npy", P("f4.npy"), 1, 8, 256, W(P("f4.npy"), "'<f4'", "int32"));
    refused("refused: a big-endian int32 .npy", P("be.npy"), 1, 8, 256, W(P("be.npy"), "'>i4'", "astype('<i4')"));
    refused("refused: a 3-D .npy", P("d3.npy"), 1, 8, 256, W(P("d3.npy"), "3 dimensions", "reshape(-1)"));
    refused("refused: a truncated .npy", P("nt.npy"), 1, 8, 256, W(P("nt.npy"), "truncated"));
    snprintf(buf[0], sizeof buf[0], "%s", P("empty"));
    refused("refused: a directory without shards", buf[0], 1, 8, 256, W(buf[0], "no .bin or .npy"));
    snprintf(buf[1], sizeof buf[1], "%s", P("nope.bin"));
    refused("refused: a path that does not exist", buf[1], 1, 8, 256, W(buf[1], "No such file"));
    snprintf(buf[2], sizeof buf[2], "%s,%s", P("good.bin"), P("nope.bin"));
    refused("refused: a list naming one missing file names that file", buf[2], 1, 8, 256,
            W(P("nope.bin"), "No such file"));
    snprintf(buf[3], sizeof buf[3], "%s,,%s", P("good.bin"), P("good.bin"));
    refused("refused: an empty name in a list", buf[3], 1, 8, 256, W("empty name", "character"));
    refused("refused: an empty pattern", "", 1, 8, 256, W("empty"));
    snprintf(buf[4], sizeof buf[4], "%s,%s", P("good.bin"), P("magic.bin"));
    refused("refused: one bad shard among good ones is named", buf[4], 1, 8, 256, W(P("magic.bin"), "bad magic"));
    refused("refused: B*S+1 past 2^31-1", P("good.bin"), 65536, 65536, 256, W("batch 65536 x seq 65536"));
    refused("refused: vocab 0", P("good.bin"), 1, 8, 0, W("vocab 0"));

    TT_CASE("refused: a token >= vocab is named by file, index in the shard and value; other sequences still read")
    {
        int64_t t2[64];
        for (int i = 0; i < 64; i++)
            t2[i] = i;
        t2[37] = 300;
        bool w = write_bin(P("vocab.bin"), t2, 64);
        tr_data dl;
        tr_err e = {{0}};
        bool o = w && tr_data_open(&dl, P("vocab.bin"), 4, 8, 256, &e); /* the open reads no token */
        TT_CHECK(o, "%.300s", e.msg);
        int32_t in[32], tg[32];
        /* token 37 is in sequence 4 of batch 0 (tokens 32..40): rows 0..3 read tokens 0..32 only */
        TT_CHECK(o && tr_data_read(&dl, 0, 4, in, tg, &e) && in[31] == 31 && tg[31] == 32, "%.300s", e.msg);
        tr_data_close(&dl);
        o = w && tr_data_open(&dl, P("vocab.bin"), 2, 8, 256, &e);
        TT_CHECK(o && tr_data_read(&dl, 0, 2, in, tg, &e), "batch 0: %.300s", e.msg);
        tr_data_next(&dl); /* batch 1: tokens 16..32 */
        TT_CHECK(o && tr_data_read(&dl, 0, 2, in, tg, &e), "batch 1: %.300s", e.msg);
        tr_data_next(&dl); /* batch 2: tokens 32..48, sequence 0 holds token 37 */
        tr_err e2 = {{0}};
        TT_CHECK(o && tr_data_read(&dl, 1, 1, in, tg, &e2), "sequence 1 does not hold it: %.300s", e2.msg);
        TT_CHECK(o && !tr_data_read(&dl, 0, 1, in, tg, &e2) && has(e2.msg, P("vocab.bin")) &&
                     has(e2.msg, "token 37 ") && has(e2.msg, "is 300") && has(e2.msg, "vocab = 256"),
                 "msg: %.400s", e2.msg);
        tr_data_close(&dl);
    }

    TT_CASE("refused: a negative token in an int32 .npy")
    {
        int64_t t3[30];
        for (int i = 0; i < 30; i++)
            t3[i] = i;
        t3[5] = -7;
        bool w = write_npy(P("negtok.npy"), "<i4", "(30,)", t3, 30);
        tr_data dl;
        tr_err e = {{0}};
        bool o = w && tr_data_open(&dl, P("negtok.npy"), 1, 8, 1000, &e);
        int32_t in[8], tg[8];
        TT_CHECK(o && !tr_data_read(&dl, 0, 1, in, tg, &e) && has(e.msg, P("negtok.npy")) &&
                     has(e.msg, "token 5 ") && has(e.msg, "is -7"),
                 "msg: %.400s", e.msg);
        tr_data_close(&dl);
    }

    TT_CASE("refused: a position from another shard set (one shard one token longer, or renamed) and one whose "
            "batch does not fit")
    {
        int64_t t4[100];
        for (int i = 0; i < 100; i++)
            t4[i] = i;
        bool w = write_bin(P("s1.bin"), t4, 100) && write_bin(P("s2.bin"), t4, 60) &&
                 write_bin(P("s3.bin"), t4, 61) && write_bin(P("s4.bin"), t4, 60);
        char pa[1200], pb[1200], pc[1200];
        snprintf(pa, sizeof pa, "%s,%s", P("s1.bin"), P("s2.bin"));
        snprintf(pb, sizeof pb, "%s,%s", P("s1.bin"), P("s3.bin"));
        snprintf(pc, sizeof pc, "%s,%s", P("s1.bin"), P("s4.bin")); /* same sizes, another name */
        tr_data a, b, c;
        tr_err e = {{0}};
        bool o = w && tr_data_open(&a, pa, 2, 10, 256, &e) && tr_data_open(&b, pb, 2, 10, 256, &e) &&
                 tr_data_open(&c, pc, 2, 10, 256, &e);
        TT_CHECK(o, "%.300s", e.msg);
        for (int k = 0; o && k < 5; k++)
            tr_data_next(&a);
        tr_data_pos p = tr_data_tell(&a), q;
        char s[TR_DATA_POS_CAP];
        tr_data_pos_format(&p, s, sizeof s);
        TT_CHECK(tr_data_pos_parse(s, "checkpoint", &q, &e), "%.300s", e.msg);
        tr_err eb = {{0}}, ec = {{0}};
        TT_CHECK(o && !tr_data_restore(&b, &q, &eb) && has(eb.msg, "another data set") && has(eb.msg, pb),
                 "longer shard: %.400s", eb.msg);
        TT_CHECK(o && !tr_data_restore(&c, &q, &ec) && has(ec.msg, "another data set"), "renamed: %.400s", ec.msg);
        TT_CHECK(o && tr_data_tell(&b).batches == 0, "a refused restore moved the loader");
        TT_CHECK(o && tr_data_restore(&a, &q, &e), "own position: %.300s", e.msg);
        /* same data, bigger batch: offset 0 of s2 fits B*S+1 = 21, offset 40 of s2 (60 tokens) does not fit 41 */
        tr_data big;
        tr_err ef = {{0}};
        bool ob = tr_data_open(&big, pa, 4, 10, 256, &ef);
        tr_data_pos r = q;
        r.shard = 1;
        r.offset = 40;
        TT_CHECK(ob && !tr_data_restore(&big, &r, &ef) && has(ef.msg, P("s2.bin")) && has(ef.msg, "offset 40") &&
                     has(ef.msg, "does not fit"),
                 "misfit: %.400s", ef.msg);
        tr_data_close(&big);
        tr_data_close(&a);
        tr_data_close(&b);
        tr_data_close(&c);
    }

    TT_CASE("refused: position strings that are not exactly what tr_data_pos_format prints")
    {
        static const struct {
            const char *s, *want;
        } bad[] = {
            {"", "'data v1 shards='"},
            {"data v2 shards=1 fp=0123456789abcdef shard=0 offset=0 epoch=0 batches=0", "'data v1 shards='"},
            {"data v1 shards=1 fp=0123456789ABCDEF shard=0 offset=0 epoch=0 batches=0", "hexadecimal"},
            {"data v1 shards=1 fp=0123456789abcde shard=0 offset=0 epoch=0 batches=0", "hexadecimal"},
            {"data v1 shards=1 fp=0123456789abcdef shard=0 offset=-1 epoch=0 batches=0", "decimal integer"},
            {"data v1 shards=1 fp=0123456789abcdef shard=0 offset=01 epoch=0 batches=0", "leading zero"},
            {"data v1 shards=1 fp=0123456789abcdef shard=0 offset=0 epoch=0 batches=0 ", "the end of the string"},
            {"data v1 shards=1 fp=0123456789abcdef shard=0 offset=0 epoch=0 batches=0\n", "the end of the string"},
            {"data v1 shards=1 fp=0123456789abcdef shard=0 offset=0 batches=0", "' epoch='"},
            {"data v1 shards=1 fp=0123456789abcdef  shard=0 offset=0 epoch=0 batches=0", "' shard='"},
            {"data v1 shards=1 fp=0123456789abcdef shard=0 offset=1000000000000000000 epoch=0 batches=0", "18 digits"},
            {"data v1 shards=2 fp=0123456789abcdef shard=2 offset=0 epoch=0 batches=0", "shard 2 is not one of the 2"},
            {"data v1 shards=0 fp=0123456789abcdef shard=0 offset=0 epoch=0 batches=0", "not one of the 0"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            tr_err e = {{0}};
            tr_data_pos p;
            bool o = tr_data_pos_parse(bad[i].s, "checkpoint c.st", &p, &e);
            TT_CHECK(!o && has(e.msg, "checkpoint c.st") && has(e.msg, bad[i].want), "'%s': %.400s", bad[i].s, e.msg);
        }
        tr_err e = {{0}};
        tr_data_pos p;
        bool o = tr_data_pos_parse("data v1 shards=3 fp=00000000000000ff shard=2 offset=999999999999999999 epoch=7 "
                                   "batches=12",
                                   NULL, &p, &e);
        TT_CHECK(o && p.nshards == 3 && p.fingerprint == 255 && p.shard == 2 && p.offset == 999999999999999999LL &&
                     p.epoch == 7 && p.batches == 12,
                 "a good string: %.300s", e.msg);
    }
#undef W
}

/* The shipped corpus: data/tiny/{train,val}.bin hold the bytes of the texts listed in data/tiny/SOURCES, in order. */
static void test_shipped(void)
{
    TT_CASE("shipped: data/tiny/train.bin then val.bin hold exactly the bytes of the texts in data/tiny/SOURCES, "
            "read through the loader with vocab 256")
    {
        /* the concatenated text */
        size_t cap = 1 << 20, n = 0;
        unsigned char *text = malloc(cap);
        FILE *src = fopen("data/tiny/SOURCES", "r");
        TT_CHECK(src && text, "data/tiny/SOURCES: %s (run from the repository root)", strerror(errno));
        char line[512];
        int nfiles = 0;
        while (src && fgets(line, sizeof line, src)) {
            line[strcspn(line, "\n")] = '\0';
            if (!line[0] || line[0] == '#')
                continue;
            char path[600];
            snprintf(path, sizeof path, "data/tiny/%s", line);
            FILE *fp = fopen(path, "rb");
            TT_CHECK(fp, "%s: %s", path, strerror(errno));
            if (fp) {
                n += fread(text + n, 1, cap - n, fp);
                fclose(fp);
                nfiles++;
            }
        }
        if (src)
            fclose(src);
        TT_CHECK(nfiles >= 1 && n > 10000 && n < cap, "%d texts, %zu bytes", nfiles, n);
        int64_t got = 0;
        static const char *const files[2] = {"data/tiny/train.bin", "data/tiny/val.bin"};
        for (int f = 0; f < 2 && !tt_case_failed; f++) {
            tr_data dl;
            tr_err e = {{0}};
            bool o = tr_data_open(&dl, files[f], 1, 1, 256, &e);
            TT_CHECK(o, "%.300s", e.msg);
            int64_t nt = o ? dl.shards[0].ntok : 0;
            tr_data_close(&dl);
            /* one batch of the whole shard */
            o = o && tr_data_open(&dl, files[f], 1, nt - 1, 256, &e);
            int32_t *in = malloc(sizeof(int32_t) * (size_t)nt), *tg = malloc(sizeof(int32_t) * (size_t)nt);
            TT_CHECK(o && tr_data_read(&dl, 0, 1, in, tg, &e), "%s: %.300s", files[f], e.msg);
            TT_CHECK(got + nt <= (int64_t)n, "%s: more tokens than text", files[f]);
            for (int64_t i = 0; o && i < nt && got + nt <= (int64_t)n && !tt_case_failed; i++) {
                int32_t t = i < nt - 1 ? in[i] : tg[nt - 2];
                TT_CHECK(t == text[got + i], "%s: token %lld is %d, the text has byte %d", files[f], (long long)i, t,
                         text[got + i]);
            }
            got += nt;
            free(in);
            free(tg);
            tr_data_close(&dl);
        }
        TT_CHECK(got == (int64_t)n, "the two shards hold %lld tokens, the texts %zu bytes", (long long)got, n);
        free(text);
    }
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    char p[1024];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/tessgen_test_data.XXXXXX");
    if (!mkdtemp(g_dir)) {
        printf("not ok - setup: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_batches();
    test_dir();
    test_files();
    test_refused();
    test_shipped();
    rm_tree(g_dir);
    TT_EXIT();
}
