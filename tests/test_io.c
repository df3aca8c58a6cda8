/*
 * test_io.c - unit tests for the runtime's file I/O: tr_json, tr_safetensors,
 * tr_npy (tests/tt.h protocol, one line per case; run from the repo root).
 *
 * Every file lives in a fresh mkdtemp directory under /tmp that is removed at
 * the end. Good files come from the writers; bad files are hand-crafted byte
 * strings, one defect each, and each must fail with a message that starts
 * with the path and names the culprit. Block reads are checked against values
 * computed from the element's coordinates, never against the reader itself.
 * Interop with NumPy runs /usr/bin/python3 when it has numpy, else the case
 * prints "ok - ... # skip". Also the sharded view (tr_stset) and the
 * Hugging Face directory writer (tr_hfout_write_dir), which need no MPI.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tr_bf16.h"
#include "tr_hfout.h"
#include "tr_json.h"
#include "tr_npy.h"
#include "tr_safetensors.h"
#include "tr_sched.h"
#include "tr_stset.h"
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

/* The value every test tensor holds at 2-D position (r, c). */
static float val(int64_t r, int64_t c)
{
    return (float)(r * 1000 + c) + 0.25f;
}

static void fill(float *a /* [rows, cols] */, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            a[r * cols + c] = val(r, c);
}

static bool write_bytes(const char *path, const void *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return false;
    bool ok = fwrite(data, 1, len, fp) == len;
    return fclose(fp) == 0 && ok;
}

/* Read a whole small file into buf (NUL-terminated); returns its length or -1. */
static long read_small(const char *path, char *buf, size_t cap)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    size_t n = fread(buf, 1, cap - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return (long)n;
}

/* A safetensors file: u64 LE strlen(header), header, dlen bytes of data (zeros if data NULL). */
static bool write_st_raw(const char *path, const char *header, const void *data, size_t dlen)
{
    size_t hl = strlen(header);
    unsigned char *b = calloc(8 + hl + dlen + 1, 1);
    if (!b)
        return false;
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    if (data)
        memcpy(b + 8 + hl, data, dlen);
    bool ok = write_bytes(path, b, 8 + hl + dlen);
    free(b);
    return ok;
}

/* A .npy file: magic, version major.0, the dict text padded to 64 with '\n', dlen data bytes. */
static bool write_npy_raw(const char *path, int major, const char *dict, const void *data, size_t dlen)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t total = (pre + dl + 1 + 63) / 64 * 64;
    unsigned char *b = calloc(total + dlen + 1, 1);
    if (!b)
        return false;
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    size_t hl = total - pre;
    for (size_t i = 0; i < pre - 8; i++)
        b[8 + i] = (unsigned char)(hl >> (8 * i));
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', total - pre - dl - 1);
    b[total - 1] = '\n';
    if (data)
        memcpy(b + total, data, dlen);
    bool ok = write_bytes(path, b, total + dlen);
    free(b);
    return ok;
}

static bool has(const char *msg, const char *w)
{
    return !w || strstr(msg, w) != NULL;
}

static bool starts(const char *msg, const char *prefix)
{
    return strncmp(msg, prefix, strlen(prefix)) == 0;
}

/* Count directory entries of g_dir (or a subdir) containing ".tmp." */
static int count_temps(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp."))
            n++;
    closedir(d);
    return n;
}

static void rm_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        chmod(path, 0700);
        DIR *d = opendir(path);
        if (d) {
            for (struct dirent *e; (e = readdir(d));) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                    continue;
                char sub[1024];
                snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                rm_tree(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* ---- JSON ------------------------------------------------------------------- */

static void test_json(void)
{
    TT_CASE("json: parses values, escapes, unicode and int64 limits") {
        const char *t = " {\"a\": [1, -2, 3.5e2, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\\\"\"],"
                        " \"b\": {}, \"big\": 9223372036854775807, \"neg\": -9223372036854775808,"
                        " \"over\": 9223372036854775808, \"z\": \"a\\u0000b\"} ";
        tr_json_doc doc;
        tr_err e = {{0}};
        bool ok = tr_json_parse(&doc, t, strlen(t), "t", &e);
        TT_CHECK(ok, "parse failed: %.300s", e.msg);
        if (ok) {
            const tr_json_node *root = tr_json_root(&doc);
            const tr_json_node *a = tr_json_get(&doc, root, "a");
            TT_CHECK(root->type == TR_JSON_OBJECT && root->count == 6, "root");
            TT_CHECK(a && a->type == TR_JSON_ARRAY && a->count == 7, "a");
            const tr_json_node *x = tr_json_first(&doc, a);
            TT_CHECK(x->is_int && x->ival == 1, "a[0]");
            x = tr_json_next(&doc, x);
            TT_CHECK(x->is_int && x->ival == -2, "a[1]");
            x = tr_json_next(&doc, x);
            TT_CHECK(!x->is_int && x->num == 350.0, "a[2] = %g", x->num);
            x = tr_json_next(&doc, x);
            TT_CHECK(x->type == TR_JSON_TRUE, "a[3]");
            x = tr_json_next(&doc, tr_json_next(&doc, x));
            TT_CHECK(x->type == TR_JSON_NULL, "a[5]");
            x = tr_json_next(&doc, x);
            TT_CHECK(x->type == TR_JSON_STRING && !strcmp(x->str, "x\xc3\xa9\xf0\x9f\x98\x80\n\"") &&
                         x->str_len == 9,
                     "a[6] = '%.300s' (%zu)", x->str, x->str_len);
            TT_CHECK(!tr_json_next(&doc, x), "a has 7 items");
            const tr_json_node *b = tr_json_get(&doc, root, "b");
            TT_CHECK(b && b->type == TR_JSON_OBJECT && b->count == 0 && !tr_json_first(&doc, b), "b");
            const tr_json_node *big = tr_json_get(&doc, root, "big");
            TT_CHECK(big && big->is_int && big->ival == INT64_MAX, "big");
            const tr_json_node *neg = tr_json_get(&doc, root, "neg");
            TT_CHECK(neg && neg->is_int && neg->ival == INT64_MIN, "neg");
            const tr_json_node *over = tr_json_get(&doc, root, "over");
            TT_CHECK(over && !over->is_int && over->num > 9.2e18, "over");
            const tr_json_node *z = tr_json_get(&doc, root, "z");
            TT_CHECK(z && z->str_len == 3 && z->str[1] == '\0' && z->str[2] == 'b', "z");
            TT_CHECK(!tr_json_get(&doc, root, "missing"), "missing key");
            tr_json_free(&doc);
        }
    }

    TT_CASE("json: rejects invalid text with a byte offset") {
        static const char *bad[] = {
            "", "  ", "01", "1.", ".5", "-", "+1", "[1,]", "{\"a\":1,}", "{'a':1}", "\"\\x\"", "\"\t\"",
            "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"",
            "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"", "[1] [2]", "tru", "nul", "/*c*/{}", "{\"a\" 1}", "{1:2}",
            "[1 2]", "\"abc", "[", "{", "\"\\u12g4\"", "1e", "1e+", "-01", "NaN", "Infinity", "[1]x",
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            tr_json_doc doc;
            tr_err e = {{0}};
            bool ok = tr_json_parse(&doc, bad[i], strlen(bad[i]), "hdr", &e);
            TT_CHECK(!ok, "accepted bad input #%zu '%.300s'", i, bad[i]);
            if (ok)
                tr_json_free(&doc);
            else
                TT_CHECK(starts(e.msg, "hdr is not valid JSON: at byte "), "#%zu msg=%.300s", i, e.msg);
            TT_CHECK(doc.nodes == NULL && doc.strbuf == NULL, "#%zu: doc not emptied on failure", i);
        }
        /* a NUL byte inside the range is not whitespace */
        tr_json_doc doc;
        tr_err e = {{0}};
        TT_CHECK(!tr_json_parse(&doc, "{}\0", 3, "hdr", &e), "accepted trailing NUL");
    }

    TT_CASE("json: nesting limit and exactly-at-limit depth") {
        char deep[200], ok64[200];
        int n = 0;
        for (int i = 0; i < 70; i++)
            deep[n++] = '[';
        for (int i = 0; i < 70; i++)
            deep[n++] = ']';
        tr_json_doc doc;
        tr_err e = {{0}};
        TT_CHECK(!tr_json_parse(&doc, deep, (size_t)n, "hdr", &e) && has(e.msg, "nesting"), "msg=%.300s", e.msg);
        n = 0;
        for (int i = 0; i < TR_JSON_MAX_DEPTH; i++)
            ok64[n++] = '[';
        for (int i = 0; i < TR_JSON_MAX_DEPTH; i++)
            ok64[n++] = ']';
        tr_err e2 = {{0}};
        bool ok = tr_json_parse(&doc, ok64, (size_t)n, "hdr", &e2);
        TT_CHECK(ok, "depth %d refused: %.300s", TR_JSON_MAX_DEPTH, e2.msg);
        if (ok)
            tr_json_free(&doc);
    }
}

/* ---- safetensors: good files ---------------------------------------------------- */

static void test_st_roundtrip(void)
{
    /* the tensors, deliberately not in name order */
    float w[6 * 9], b[9], s[1], t3[2 * 3 * 4], big[7 * 11];
    fill(w, 6, 9);
    fill(b, 1, 9);
    fill(s, 1, 1);
    fill(t3, 6, 4);
    fill(big, 7, 11);
    tr_st_out outs[] = {
        {"h.0.attn.c_attn.weight", 2, {6, 9}, w},
        {"h.0.ln_1.bias", 1, {9}, b},
        {"scalar", 0, {0}, s},
        {"cube", 3, {2, 3, 4}, t3},
        {"empty", 2, {0, 5}, NULL},
        {"big", 2, {7, 11}, big},
        {"esc\"name\\", 1, {1}, s},
    };
    int nout = (int)(sizeof outs / sizeof outs[0]);
    const char *path = P("rt.safetensors");
    tr_err e = {{0}};
    bool wrote = tr_st_write_atomic(path, outs, nout, &e);

    TT_CASE("st: write then open several tensors, names sorted, data contiguous") {
        TT_CHECK(wrote, "write failed: %.300s", e.msg);
        TT_CHECK(count_temps(g_dir) == 0, "temp file left behind");
        tr_st_file f;
        tr_err e2 = {{0}};
        bool ok = wrote && tr_st_open(&f, path, &e2);
        TT_CHECK(ok, "open failed: %.300s", e2.msg);
        if (ok) {
            TT_CHECK(f.ntensors == nout, "ntensors %d", f.ntensors);
            TT_CHECK(f.data_start % 8 == 0, "header not padded to 8: data_start %llu",
                     (unsigned long long)f.data_start);
            uint64_t at = 0;
            for (int i = 0; i < f.ntensors; i++) {
                if (i)
                    TT_CHECK(strcmp(f.tensors[i - 1].name, f.tensors[i].name) < 0, "not sorted at %d", i);
                TT_CHECK(f.tensors[i].begin == at, "%.300s begins at %llu, expected %llu", f.tensors[i].name,
                         (unsigned long long)f.tensors[i].begin, (unsigned long long)at);
                TT_CHECK(!strcmp(f.tensors[i].dtype, "F32"), "dtype");
                at = f.tensors[i].end;
            }
            TT_CHECK(f.data_start + at == f.file_size, "data not contiguous to the end");
            for (int i = 0; i < nout; i++) {
                tr_err e3 = {{0}};
                TT_CHECK(tr_st_expect_float(&f, outs[i].name, outs[i].ndim, outs[i].shape, &e3), "%.300s: %.300s",
                         outs[i].name, e3.msg);
                const tr_st_tensor *t = tr_st_find(&f, outs[i].name);
                TT_CHECK(t && t->ndim == outs[i].ndim, "%.300s ndim", outs[i].name);
            }
            /* the first tensor in name order starts the data section: "big" */
            const tr_st_tensor *t = tr_st_find(&f, "big");
            TT_CHECK(t && t->begin == 0, "big is not first");
            TT_CHECK(!tr_st_find(&f, "nope") && !tr_st_find(&f, ""), "found a missing tensor");
            tr_st_close(&f);
            tr_st_close(&f); /* twice is harmless */
        }
    }

    TT_CASE("st: full reads of 2-D, 1-D, 3-D, scalar and empty tensors") {
        tr_st_file f;
        tr_err e2 = {{0}};
        bool ok = tr_st_open(&f, path, &e2);
        TT_CHECK(ok, "open: %.300s", e2.msg);
        if (ok) {
            float got[7 * 11];
            TT_CHECK(tr_st_read_block(&f, "h.0.attn.c_attn.weight", 0, 6, 0, 9, got, 9, &e2), "%.300s", e2.msg);
            TT_CHECK(!memcmp(got, w, sizeof w), "2-D data differs");
            TT_CHECK(tr_st_read_block(&f, "h.0.ln_1.bias", 0, 1, 0, 9, got, 9, &e2), "%.300s", e2.msg);
            TT_CHECK(!memcmp(got, b, sizeof b), "1-D data differs");
            TT_CHECK(tr_st_read_block(&f, "cube", 0, 6, 0, 4, got, 4, &e2), "%.300s", e2.msg);
            TT_CHECK(!memcmp(got, t3, sizeof t3), "3-D data differs");
            got[0] = 0;
            TT_CHECK(tr_st_read_block(&f, "scalar", 0, 1, 0, 1, got, 1, &e2), "%.300s", e2.msg);
            TT_CHECK(got[0] == s[0], "scalar differs");
            TT_CHECK(tr_st_read_block(&f, "empty", 0, 0, 0, 5, NULL, 5, &e2), "empty: %.300s", e2.msg);
            TT_CHECK(tr_st_read_block(&f, "esc\"name\\", 0, 1, 0, 1, got, 1, &e2) && got[0] == s[0], "esc: %.300s",
                     e2.msg);
            tr_st_close(&f);
        }
    }

    TT_CASE("st: block reads at various offsets match computed values, padding untouched") {
        tr_st_file f;
        tr_err e2 = {{0}};
        bool ok = tr_st_open(&f, path, &e2);
        TT_CHECK(ok, "open: %.300s", e2.msg);
        static const int64_t blocks[][4] = {/* r0, nr, c0, nc of the [7, 11] tensor */
                                            {0, 7, 0, 11}, {3, 2, 4, 5}, {6, 1, 10, 1}, {0, 1, 0, 1},
                                            {1, 6, 3, 8},  {2, 3, 0, 0}, {7, 0, 11, 0}, {4, 3, 9, 2}};
        for (size_t k = 0; ok && k < sizeof blocks / sizeof blocks[0]; k++) {
            int64_t r0 = blocks[k][0], nr = blocks[k][1], c0 = blocks[k][2], nc = blocks[k][3];
            int64_t ldd = nc + 3;
            float dst[8 * 14]; /* [nr, ldd] with ldd - nc sentinel columns */
            for (size_t i = 0; i < sizeof dst / sizeof dst[0]; i++)
                dst[i] = -7.0f;
            TT_CHECK(tr_st_read_block(&f, "big", r0, nr, c0, nc, dst, ldd, &e2), "block %zu: %.300s", k, e2.msg);
            for (int64_t r = 0; r < nr; r++)
                for (int64_t c = 0; c < ldd; c++) {
                    float want = c < nc ? val(r0 + r, c0 + c) : -7.0f;
                    TT_CHECK(dst[r * ldd + c] == want, "block %zu (%lld,%lld): got %g want %g", k, (long long)r,
                             (long long)c, dst[r * ldd + c], want);
                }
            TT_CHECK(dst[nr * ldd] == -7.0f, "block %zu wrote past its last row", k);
        }
        /* the 3-D tensor [2,3,4] is the 2-D view [6,4] */
        float d3[2 * 3];
        TT_CHECK(ok && tr_st_read_block(&f, "cube", 4, 2, 1, 3, d3, 3, &e2), "cube: %.300s", e2.msg);
        for (int r = 0; ok && r < 2; r++)
            for (int c = 0; c < 3; c++)
                TT_CHECK(d3[r * 3 + c] == val(4 + r, 1 + c), "cube (%d,%d)", r, c);
        if (ok)
            tr_st_close(&f);
    }

    TT_CASE("st: 1-D tensor is a [1, n] row: column blocks read, row 1 refused") {
        tr_st_file f;
        tr_err e2 = {{0}};
        bool ok = tr_st_open(&f, path, &e2);
        TT_CHECK(ok, "open: %.300s", e2.msg);
        if (ok) {
            float d[5];
            TT_CHECK(tr_st_read_block(&f, "h.0.ln_1.bias", 0, 1, 3, 5, d, 5, &e2), "%.300s", e2.msg);
            for (int c = 0; c < 5; c++)
                TT_CHECK(d[c] == val(0, 3 + c), "col %d: %g", c, d[c]);
            tr_err e3 = {{0}};
            TT_CHECK(!tr_st_read_block(&f, "h.0.ln_1.bias", 1, 1, 0, 1, d, 1, &e3) && has(e3.msg, "outside") &&
                         has(e3.msg, "h.0.ln_1.bias") && starts(e3.msg, path),
                     "msg=%.300s", e3.msg);
            tr_err e4 = {{0}};
            TT_CHECK(!tr_st_read_block(&f, "h.0.ln_1.bias", 0, 1, 6, 4, d, 4, &e4) && has(e4.msg, "outside"),
                     "msg=%.300s", e4.msg);
            tr_st_close(&f);
        }
    }

    TT_CASE("st: bad block requests fail cleanly") {
        tr_st_file f;
        tr_err e2 = {{0}};
        bool ok = tr_st_open(&f, path, &e2);
        TT_CHECK(ok, "open: %.300s", e2.msg);
        if (ok) {
            float d[16];
            struct {
                int64_t r0, nr, c0, nc, ldd;
                float *dst;
                const char *word;
            } bad[] = {
                {-1, 1, 0, 1, 1, d, "outside"},       {0, 1, -1, 1, 1, d, "outside"},
                {0, -1, 0, 1, 1, d, "outside"},       {1, INT64_MAX, 0, 1, 1, d, "outside"},
                {0, 1, 2, INT64_MAX, 1, d, "outside"}, {0, 2, 0, 4, 3, d, "leading dimension"},
                {0, 2, 0, 4, 4, NULL, "NULL"},        {0, 7, 0, 1, INT64_MAX, d, "too large"},
            };
            for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
                tr_err e3 = {{0}};
                TT_CHECK(!tr_st_read_block(&f, "big", bad[k].r0, bad[k].nr, bad[k].c0, bad[k].nc, bad[k].dst,
                                           bad[k].ldd, &e3) &&
                             has(e3.msg, bad[k].word) && starts(e3.msg, path),
                         "case %zu: msg=%.300s", k, e3.msg);
            }
            tr_err e4 = {{0}};
            TT_CHECK(!tr_st_read_block(&f, "h.9.mlp.c_fc.weight", 0, 1, 0, 1, d, 1, &e4) &&
                         has(e4.msg, "no tensor named h.9.mlp.c_fc.weight"),
                     "missing: %.300s", e4.msg);
            tr_st_close(&f);
        }
    }

    TT_CASE("st: expect_f32 names file, tensor, found and expected shape") {
        tr_st_file f;
        tr_err e2 = {{0}};
        bool ok = tr_st_open(&f, path, &e2);
        TT_CHECK(ok, "open: %.300s", e2.msg);
        if (ok) {
            int64_t want[2] = {6, 18};
            tr_err e3 = {{0}};
            TT_CHECK(!tr_st_expect_float(&f, "h.0.attn.c_attn.weight", 2, want, &e3) && starts(e3.msg, path) &&
                         has(e3.msg, "h.0.attn.c_attn.weight has shape [6,9], expected [6,18]") &&
                         has(e3.msg, "regenerate"),
                     "msg=%.300s", e3.msg);
            int64_t flat[1] = {54};
            tr_err e4 = {{0}};
            TT_CHECK(!tr_st_expect_float(&f, "h.0.attn.c_attn.weight", 1, flat, &e4) && has(e4.msg, "expected [54]"),
                     "msg=%.300s", e4.msg);
            tr_err e5 = {{0}};
            TT_CHECK(!tr_st_expect_float(&f, "h.1.ln_1.bias", 1, flat, &e5) &&
                         has(e5.msg, "no tensor named h.1.ln_1.bias"),
                     "msg=%.300s", e5.msg);
            tr_err e6 = {{0}};
            TT_CHECK(!tr_st_expect_float(&f, "transformer.h.0.ln_1.bias", 1, flat, &e6) && has(e6.msg, "prefix") &&
                         has(e6.msg, "there is h.0.ln_1.bias"),
                     "msg=%.300s", e6.msg);
            tr_st_close(&f);
        }
    }
}

/* ---- safetensors: other dtypes, metadata, unaligned data -------------------------- */

static void test_st_mixed(void)
{
    TT_CASE("st: __metadata__ ignored, other dtypes allowed unless requested, unaligned F32 read") {
        /* b: I8 [3] at [0,3); g: F32 [2] at [3,11) (unaligned in memory); f: F16 [2] at [11,15) */
        const char *hdr = "{\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"},"
                          "\"b\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]},"
                          "\"g\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[3,11]},"
                          "\"f\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[11,15]},"
                          "\"z\":{\"dtype\":\"BF16\",\"shape\":[0,4],\"data_offsets\":[15,15]},"
                          "\"q\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[15,16]}}";
        unsigned char data[16] = {1, 2, 3};
        float g[2] = {1.5f, -2.0f};
        memcpy(data + 3, g, 8);
        const char *path = P("mixed.safetensors");
        TT_CHECK(write_st_raw(path, hdr, data, sizeof data), "write");
        tr_st_file f;
        tr_err e = {{0}};
        bool ok = tr_st_open(&f, path, &e);
        TT_CHECK(ok, "open: %.300s", e.msg);
        if (ok) {
            TT_CHECK(f.ntensors == 5, "ntensors %d (metadata counted?)", f.ntensors);
            TT_CHECK(!tr_st_find(&f, "__metadata__"), "metadata is a tensor");
            float d[2] = {0, 0};
            TT_CHECK(tr_st_read_block(&f, "g", 0, 1, 0, 2, d, 2, &e) && d[0] == 1.5f && d[1] == -2.0f,
                     "g: %.300s %g %g", e.msg, d[0], d[1]);
            int64_t sh[1] = {2};
            tr_err e2 = {{0}};
            TT_CHECK(!tr_st_expect_float(&f, "f", 1, sh, &e2) && has(e2.msg, "dtype F16") &&
                         has(e2.msg, "only F32 and BF16") && starts(e2.msg, path) && has(e2.msg, "tensor f "),
                     "msg=%.300s", e2.msg);
            tr_err e3 = {{0}};
            TT_CHECK(!tr_st_read_block(&f, "b", 0, 1, 0, 1, d, 1, &e3) && has(e3.msg, "dtype I8"), "msg=%.300s",
                     e3.msg);
            const tr_st_tensor *q = tr_st_find(&f, "q");
            TT_CHECK(q && !strcmp(q->dtype, "F4"), "F4 tensor");
            tr_st_close(&f);
        }
    }

    TT_CASE("st: empty header {} and 5-D tensor are accepted; 5-D refused on request") {
        const char *p1 = P("empty.safetensors");
        TT_CHECK(write_st_raw(p1, "{}      ", NULL, 0), "write");
        tr_st_file f;
        tr_err e = {{0}};
        bool ok = tr_st_open(&f, p1, &e);
        TT_CHECK(ok && f.ntensors == 0, "open: %.300s", e.msg);
        if (ok) {
            tr_err e2 = {{0}};
            TT_CHECK(!tr_st_expect_float(&f, "a", 0, NULL, &e2) && has(e2.msg, "no tensor named a"), "msg=%.300s",
                     e2.msg);
            tr_st_close(&f);
        }
        const char *p2 = P("5d.safetensors");
        TT_CHECK(write_st_raw(p2, "{\"t\":{\"dtype\":\"F32\",\"shape\":[1,2,1,2,2],\"data_offsets\":[0,32]}}",
                              NULL, 32),
                 "write");
        tr_err e3 = {{0}};
        ok = tr_st_open(&f, p2, &e3);
        TT_CHECK(ok, "open 5-D: %.300s", e3.msg);
        if (ok) {
            float d[2];
            int64_t sh[4] = {1, 2, 1, 2};
            tr_err e4 = {{0}}, e5 = {{0}};
            TT_CHECK(!tr_st_read_block(&f, "t", 0, 1, 0, 1, d, 1, &e4) && has(e4.msg, "5 dimensions"), "msg=%.300s",
                     e4.msg);
            TT_CHECK(!tr_st_expect_float(&f, "t", 4, sh, &e5) && has(e5.msg, "(5 dims)"), "msg=%.300s", e5.msg);
            tr_st_close(&f);
        }
    }
}

/* ---- safetensors: bad files ------------------------------------------------------ */

static void test_st_bad(void)
{
    static const struct {
        const char *name;   /* case name */
        const char *header; /* JSON text as written */
        size_t dlen;        /* data bytes after the header */
        const char *w1, *w2; /* words the message must contain */
    } bad[] = {
        {"st bad: header not valid JSON", "{\"a\":{\"dtype\":\"F32\",", 0, "header is not valid JSON", "at byte"},
        {"st bad: text after the JSON object", "{} x", 0, "not valid JSON", "after the value"},
        {"st bad: header is an array, not an object", "[1,2]", 0, "array", "expected an object"},
        {"st bad: entry is not an object", "{\"w.a\":[1]}", 0, "tensor w.a", "expected an object"},
        {"st bad: entry missing dtype", "{\"w.a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor w.a",
         "missing \"dtype\""},
        {"st bad: entry missing shape", "{\"w.a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "tensor w.a",
         "missing \"shape\""},
        {"st bad: entry missing data_offsets", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "tensor w.a",
         "missing \"data_offsets\""},
        {"st bad: dtype is a number", "{\"w.a\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         "\"dtype\" is a number", "w.a"},
        {"st bad: unknown dtype", "{\"w.a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         "unknown dtype \"F33\"", "w.a"},
        {"st bad: shape is a string", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}}", 8,
         "\"shape\" is a string", "w.a"},
        {"st bad: negative shape", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,8]}}", 8,
         "shape[1] is -3 (negative)", "w.a"},
        {"st bad: fractional shape", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8,
         "not an integer", "shape[0]"},
        {"st bad: shape written as 2.0", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8,
         "non-integer literal", "shape[0]"},
        {"st bad: shape element is a string", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}",
         8, "shape[0] is a string", "w.a"},
        {"st bad: shape product overflows",
         "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
         "too many elements", "w.a"},
        {"st bad: data_offsets has one value", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8,
         "two integers", "an array of 1 values"},
        {"st bad: data_offsets is an object", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":{}}}", 8,
         "two integers", "a object"},
        {"st bad: data_offsets decreasing", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
         "not increasing", "w.a"},
        {"st bad: data_offsets string", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[\"0\",8]}}", 8,
         "data_offsets[0] is a string", "w.a"},
        {"st bad: data_offsets negative", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8,
         "data_offsets[0] is -8", "w.a"},
        {"st bad: data_offsets beyond int64",
         "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999]}}", 8, "too large",
         "data_offsets[1]"},
        {"st bad: issue 12.6, shape 1e300 (no UB converting it)",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 4, "shape[0] is 1e+300 (too large)",
         "tensor a"},
        {"st bad: shape -1e300 (no UB converting it)",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1e300],\"data_offsets\":[0,4]}}", 4, "shape[0] is -1e+300 (negative)",
         "tensor a"},
        {"st bad: data_offsets 9.3e18 and -9.3e18 written as floats",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-9.3e18,9.3e18]}}", 4,
         "data_offsets[0] is -9.3e+18 (negative)", "tensor a"},
        {"st bad: header lies about the size", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}",
         16, "header lies", "needs 16 bytes"},
        {"st bad: truncated data", "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
         "truncated file", "tensor w.a"},
        {"st bad: overlapping tensors",
         "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
         "\"w.b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
         24, "overlap", "w.a [bytes 0, 16) and w.b [bytes 8, 24)"},
        {"st bad: overlap hidden behind a small tensor",
         "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
         "\"w.b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
         "\"w.c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[32,36]}}",
         36, "overlap", "w.a"},
        {"st bad: duplicate tensor names",
         "{\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"w.a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
         16, "duplicate", "w.a appears more than once"},
        {"st bad: __metadata__ with a number value", "{\"__metadata__\":{\"format\":\"pt\",\"n\":1}}", 0,
         "__metadata__ key \"n\"", "must be strings"},
        {"st bad: __metadata__ not an object", "{\"__metadata__\":[1]}", 0, "__metadata__ is a JSON array", NULL},
        {"st bad: invalid UTF-8 in a name", "{\"w\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         "invalid UTF-8", NULL},
        {"st bad: NUL in a name", "{\"w\\u0000x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
         "NUL", NULL},
        {"st bad: name too long",
         "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":{\"dtype\":\"F32\",\"shape\":[2],"
         "\"data_offsets\":[0,8]}}",
         8, "is 164 bytes", "at most 159"},
        {"st bad: F4 with an odd element count", "{\"w.a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2,
         "whole number of bytes", "w.a"},
        {"st bad: nesting too deep",
         "{\"w.a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
         "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
         0, "nesting", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TT_CASE(bad[i].name) {
            char fname[32];
            snprintf(fname, sizeof fname, "bad%zu.safetensors", i);
            const char *path = P(fname);
            TT_CHECK(write_st_raw(path, bad[i].header, NULL, bad[i].dlen), "write");
            tr_st_file f;
            tr_err e = {{0}};
            bool ok = tr_st_open(&f, path, &e);
            TT_CHECK(!ok, "opened a bad file");
            if (ok)
                tr_st_close(&f);
            TT_CHECK(starts(e.msg, path) && has(e.msg, bad[i].w1) && has(e.msg, bad[i].w2), "msg=%.300s", e.msg);
            TT_CHECK(f.map == NULL && f.tensors == NULL && f.fd == -1, "failed open left resources");
            unlink(path);
        }
    }

    TT_CASE("st bad: file-level defects (missing, directory, empty, short, header length)") {
        struct {
            const char *file;
            const void *bytes; /* NULL: do not create */
            size_t len;
            const char *w1, *w2;
        } cases[] = {
            {"missing.safetensors", NULL, 0, "No such file", "check the path"},
            {"empty0.safetensors", "", 0, "is empty", NULL},
            {"short.safetensors", "\x05\x00\x00\x00\x00", 5, "shorter than the 8-byte", "5 bytes"},
            {"longhdr.safetensors", "\x40\x00\x00\x00\x00\x00\x00\x00{}", 10, "larger than the rest of the file",
             "64"},
            {"absurd.safetensors", "\x00\x00\x00\x00\x01\x00\x00\x00{}", 10, "absurd", "4294967296"},
            {"huge.safetensors", "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10, "absurd", NULL},
            {"hdrzero.safetensors", "\x00\x00\x00\x00\x00\x00\x00\x00", 8, "not valid JSON", NULL},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const char *path = P(cases[i].file);
            if (cases[i].bytes)
                TT_CHECK(write_bytes(path, cases[i].bytes, cases[i].len), "write %.300s", cases[i].file);
            tr_st_file f;
            tr_err e = {{0}};
            bool ok = tr_st_open(&f, path, &e);
            TT_CHECK(!ok, "%.300s opened", cases[i].file);
            if (ok)
                tr_st_close(&f);
            TT_CHECK(starts(e.msg, path) && has(e.msg, cases[i].w1) && has(e.msg, cases[i].w2), "%.300s: msg=%.300s",
                     cases[i].file, e.msg);
            unlink(path);
        }
        tr_st_file f;
        tr_err e = {{0}};
        TT_CHECK(!tr_st_open(&f, g_dir, &e) && has(e.msg, "is a directory"), "dir: msg=%.300s", e.msg);
    }
}

/* ---- writers: argument checks and atomicity ------------------------------------- */

static bool file_is(const char *path, const char *content)
{
    char buf[256];
    long n = read_small(path, buf, sizeof buf);
    return n == (long)strlen(content) && !memcmp(buf, content, (size_t)n);
}

static void test_atomic(void)
{
    float x[4] = {1, 2, 3, 4};

    TT_CASE("st write: bad arguments are refused before touching the disk") {
        struct {
            tr_st_out t[2];
            int n;
            const char *word;
        } cases[] = {
            {{{"a", 1, {4}, x}, {"a", 1, {4}, x}}, 2, "duplicate"},
            {{{"a", 1, {4}, NULL}}, 1, "NULL"},
            {{{"a", 5, {4}, x}}, 1, "ndim 5"},
            {{{"a", 1, {-4}, x}}, 1, "bad shape [-4]"},
            {{{"__metadata__", 1, {4}, x}}, 1, "invalid name"},
            {{{"", 1, {4}, x}}, 1, "invalid name"},
            {{{NULL, 1, {4}, x}}, 1, "invalid name"},
        };
        const char *path = P("args.safetensors");
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            tr_err e = {{0}};
            TT_CHECK(!tr_st_write_atomic(path, cases[i].t, cases[i].n, &e) && has(e.msg, cases[i].word) &&
                         starts(e.msg, path),
                     "case %zu: msg=%.300s", i, e.msg);
            TT_CHECK(access(path, F_OK) != 0, "case %zu created the file", i);
        }
        TT_CHECK(count_temps(g_dir) == 0, "temp file left");
    }

    TT_CASE("st write: issue 12.7, a name that is not UTF-8 is refused; UTF-8 and control bytes round-trip") {
        static const char *const bad_names[] = {"h.0\xff", "h.\xc3", "\xed\xa0\x80x" /* a surrogate */,
                                                "\xc0\xae" /* overlong */};
        const char *path = P("names.safetensors");
        for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
            tr_st_out t = {bad_names[i], 1, {4}, x};
            tr_err e = {{0}};
            TT_CHECK(!tr_st_write_atomic(path, &t, 1, &e), "name %zu written", i);
            TT_CHECK(starts(e.msg, path) && has(e.msg, "not valid UTF-8") && has(e.msg, "\\x"), "name %zu: msg=%.300s",
                     i, e.msg);
            TT_CHECK(access(path, F_OK) != 0, "name %zu created the file", i);
        }
        TT_CHECK(count_temps(g_dir) == 0, "temp file left");
        tr_st_out good[2] = {{"h.0.\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 1, {4}, x}, {"tab\there \"q\" \\", 1, {4}, x}};
        tr_err e = {{0}};
        TT_CHECK(tr_st_write_atomic(path, good, 2, &e), "msg=%.300s", e.msg);
        tr_st_file f;
        tr_err e2 = {{0}};
        bool ok = tr_st_open(&f, path, &e2);
        TT_CHECK(ok, "the reader refuses what the writer wrote: %.300s", e2.msg);
        if (ok) {
            TT_CHECK(tr_st_find(&f, good[0].name) && tr_st_find(&f, good[1].name), "names changed on the way");
            tr_st_close(&f);
        }
        unlink(path);
    }

    TT_CASE("atomic: path is a directory -> fails, temp removed, directory intact") {
        const char *dir = P("isdir.safetensors");
        mkdir(dir, 0700);
        const char *inner = P("isdir.safetensors/keep");
        TT_CHECK(write_bytes(inner, "keep", 4), "write inner");
        tr_st_out t = {"a", 1, {4}, x};
        tr_err e = {{0}};
        TT_CHECK(!tr_st_write_atomic(dir, &t, 1, &e) && starts(e.msg, dir) && has(e.msg, "directory"), "msg=%.300s",
                 e.msg);
        TT_CHECK(count_temps(g_dir) == 0, "temp file left after failed rename");
        TT_CHECK(file_is(inner, "keep"), "directory content changed");
        int64_t sh[1] = {4};
        tr_err e2 = {{0}};
        TT_CHECK(!tr_npy_write_atomic(dir, 1, sh, x, &e2) && has(e2.msg, "directory"), "npy: msg=%.300s", e2.msg);
        TT_CHECK(count_temps(g_dir) == 0, "npy temp file left");
    }

    TT_CASE("atomic: missing directory -> fails with the temp path named") {
        const char *path = P("nodir/x.safetensors");
        tr_st_out t = {"a", 1, {4}, x};
        tr_err e = {{0}};
        TT_CHECK(!tr_st_write_atomic(path, &t, 1, &e) && has(e.msg, "cannot create temp file") &&
                     has(e.msg, "nodir/x.safetensors.tmp."),
                 "msg=%.300s", e.msg);
    }

    TT_CASE("atomic: write fails mid-file (RLIMIT_FSIZE) -> target untouched, temp removed") {
        const char *path = P("limited.safetensors");
        TT_CHECK(write_bytes(path, "old content", 11), "write old");
        static float big[10000]; /* 40 KB, over the 4 KB limit */
        tr_st_out t = {"big", 1, {10000}, big};
        struct rlimit old;
        getrlimit(RLIMIT_FSIZE, &old);
        struct rlimit lim = old;
        lim.rlim_cur = 4096;
        void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
        bool set = setrlimit(RLIMIT_FSIZE, &lim) == 0;
        tr_err e = {{0}};
        bool ok = tr_st_write_atomic(path, &t, 1, &e);
        int64_t sh[1] = {10000};
        tr_err e2 = {{0}};
        bool ok2 = tr_npy_write_atomic(path, 1, sh, big, &e2);
        setrlimit(RLIMIT_FSIZE, &old);
        signal(SIGXFSZ, prev);
        TT_CHECK(set, "setrlimit failed");
        TT_CHECK(!ok && has(e.msg, "writing temp file") && has(e.msg, "left unchanged"), "st: msg=%.300s", e.msg);
        TT_CHECK(!ok2 && has(e2.msg, "writing temp file"), "npy: msg=%.300s", e2.msg);
        TT_CHECK(file_is(path, "old content"), "target changed");
        TT_CHECK(count_temps(g_dir) == 0, "temp file left");
    }

    if (geteuid() == 0) {
        printf("ok - atomic: unwritable directory -> fails, existing target untouched # skip running as root "
               "(permissions are not enforced)\n");
    } else {
        TT_CASE("atomic: unwritable directory -> fails, existing target untouched") {
            const char *dir = P("ro");
            mkdir(dir, 0700);
            const char *path = P("ro/w.safetensors");
            TT_CHECK(write_bytes(path, "old content", 11), "write old");
            chmod(dir, 0500);
            tr_st_out t = {"a", 1, {4}, x};
            tr_err e = {{0}};
            TT_CHECK(!tr_st_write_atomic(path, &t, 1, &e) && has(e.msg, "Permission denied"), "msg=%.300s", e.msg);
            chmod(dir, 0700);
            TT_CHECK(file_is(path, "old content"), "target changed");
            TT_CHECK(count_temps(dir) == 0, "temp file left");
        }
    }

    TT_CASE("atomic: successful write replaces an existing file and leaves no temp") {
        const char *path = P("replace.safetensors");
        TT_CHECK(write_bytes(path, "old content", 11), "write old");
        tr_st_out t = {"a", 1, {4}, x};
        tr_err e = {{0}};
        TT_CHECK(tr_st_write_atomic(path, &t, 1, &e), "%.300s", e.msg);
        TT_CHECK(!file_is(path, "old content"), "not replaced");
        tr_st_file f;
        bool ok = tr_st_open(&f, path, &e);
        TT_CHECK(ok && f.ntensors == 1, "reopen: %.300s", e.msg);
        if (ok)
            tr_st_close(&f);
        TT_CHECK(count_temps(g_dir) == 0, "temp file left");
        unlink(path);
    }
}

/* ---- stale temp files and the output check ------------------------------------------ */

/* A child process that holds an fcntl write lock on path (as a live writer holds its temp
 * file) until *release is closed; -1 if it could not start. */
static pid_t hold_lock(const char *path, int *release)
{
    int ready[2], go[2];
    if (pipe(ready) != 0 || pipe(go) != 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(go[1]);
        int fd = open(path, O_WRONLY);
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        char c = (fd >= 0 && fcntl(fd, F_SETLK, &l) == 0) ? 1 : 0;
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) < 0)
            _exit(1);
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    char c = 0;
    if (read(ready[0], &c, 1) != 1 || !c) {
        close(go[1]);
        waitpid(pid, NULL, 0);
        pid = -1;
    }
    close(ready[0]);
    *release = go[1];
    return pid;
}

static void test_outputs(void)
{
    TT_CASE("atomic: issue 12.7, a write removes stale temps of its path; locked, foreign and odd names stay") {
        static const float x[4] = {1, 2, 3, 4};
        int64_t sh[1] = {4};
        static const char *const stale_names[] = {"st.npy.tmp.4194301", "st.npy.tmp.1"};
        static const char *const keep_names[] = {"st.npy.tmp.77",  "st.npy.tmp.x1",     "st.npy.tmp.",
                                                 "other.npy.tmp.5", "st.npy.tmp.5.bak", "st.npy.tmpx.6"};
        char stale[2][512], keep[6][512];
        for (int k = 0; k < 2; k++)
            snprintf(stale[k], sizeof stale[k], "%s", P(stale_names[k]));
        for (int k = 0; k < 6; k++)
            snprintf(keep[k], sizeof keep[k], "%s", P(keep_names[k]));
        for (int k = 0; k < 2; k++)
            TT_CHECK(write_bytes(stale[k], "partial", 7), "create %s", stale[k]);
        for (int k = 0; k < 6; k++)
            TT_CHECK(write_bytes(keep[k], "keep", 4), "create %s", keep[k]);
        TT_CHECK(symlink(keep[3], P("st.npy.tmp.8")) == 0, "symlink");
        int release = -1;
        pid_t holder = hold_lock(keep[0], &release); /* a live writer's temp */
        TT_CHECK(holder > 0, "lock holder did not start");
        tr_err e = {{0}};
        TT_CHECK(tr_npy_write_atomic(P("st.npy"), 1, sh, x, &e), "%.300s", e.msg);
        for (int k = 0; k < 2; k++)
            TT_CHECK(access(stale[k], F_OK) != 0, "stale %s is still there", stale[k]);
        for (int k = 0; k < 6; k++)
            TT_CHECK(file_is(keep[k], "keep"), "%s was touched", keep[k]);
        struct stat st;
        TT_CHECK(lstat(P("st.npy.tmp.8"), &st) == 0 && S_ISLNK(st.st_mode), "a symlink named like a temp was removed");
        if (holder > 0) {
            close(release);
            waitpid(holder, NULL, 0);
        }
        tr_npy f;
        tr_err e2 = {{0}};
        bool ok = tr_npy_open(&f, P("st.npy"), &e2);
        TT_CHECK(ok, "%.300s", e2.msg);
        if (ok)
            tr_npy_close(&f);
        for (int k = 0; k < 6; k++)
            unlink(keep[k]);
        unlink(P("st.npy.tmp.8"));
    }

    TT_CASE("output check: a writable path passes and leaves nothing; existing content is untouched") {
        tr_err e = {{0}};
        TT_CHECK(tr_st_check_output(P("new.npy"), "--output", &e), "%.300s", e.msg);
        TT_CHECK(access(P("new.npy"), F_OK) != 0, "the check created the file");
        TT_CHECK(write_bytes(P("old.npy"), "old content", 11), "write old");
        TT_CHECK(tr_st_check_output(P("old.npy"), "--output", &e), "%.300s", e.msg);
        TT_CHECK(file_is(P("old.npy"), "old content"), "existing file changed");
        TT_CHECK(count_temps(g_dir) == 0, "temp left");
    }

    TT_CASE("output check: each unwritable path is refused with the option, the path and the fix") {
        mkdir(P("adir"), 0700);
        static const struct {
            const char *name, *want;
        } cases[] = {
            {"", "--weights-out: an empty file name"},
            {"nodir/w.safetensors", "does not exist"},
            {"adir", "is a directory"},
            {"adir/", "is a directory"},
            {"old.npy/x.npy", "is not a directory"},
        };
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            char path[600];
            if (cases[k].name[0])
                snprintf(path, sizeof path, "%s", P(cases[k].name));
            else
                path[0] = '\0';
            tr_err e = {{0}};
            TT_CHECK(!tr_st_check_output(path, "--weights-out", &e), "%s accepted", path);
            TT_CHECK(starts(e.msg, "--weights-out") && has(e.msg, cases[k].want) && has(e.msg, path),
                     "%s: msg=%.300s", path, e.msg);
        }
        tr_err e = {{0}};
        TT_CHECK(!tr_st_check_output("/dev/null", "--trace", &e) && has(e.msg, "not a regular file"), "msg=%.300s",
                 e.msg);
        char longname[600];
        memset(longname, 'n', 300);
        longname[300] = '\0';
        tr_err e2 = {{0}};
        TT_CHECK(!tr_st_check_output(P(longname), "--output", &e2) && has(e2.msg, "File name too long"),
                 "msg=%.300s", e2.msg);
        TT_CHECK(count_temps(P("adir")) == 0, "temp left");
    }

    if (geteuid() == 0) {
        printf("ok - output check: a directory without write permission is refused # skip running as root "
               "(permissions are not enforced)\n");
    } else {
        TT_CASE("output check: a directory without write permission is refused") {
            mkdir(P("ro2"), 0500);
            tr_err e = {{0}};
            TT_CHECK(!tr_st_check_output(P("ro2/y.npy"), "--output", &e) && has(e.msg, "Permission denied"),
                     "msg=%.300s", e.msg);
            chmod(P("ro2"), 0700);
        }
    }
}

/* ---- npy ------------------------------------------------------------------------- */

static void test_npy(void)
{
    TT_CASE("npy: roundtrip 3-D, block reads on the [prod(shape[:-1]), shape[-1]] view") {
        float a[3 * 4 * 5];
        fill(a, 12, 5);
        int64_t sh[3] = {3, 4, 5};
        const char *path = P("a.npy");
        tr_err e = {{0}};
        TT_CHECK(tr_npy_write_atomic(path, 3, sh, a, &e), "write: %.300s", e.msg);
        TT_CHECK(count_temps(g_dir) == 0, "temp left");
        tr_npy f;
        bool ok = tr_npy_open(&f, path, &e);
        TT_CHECK(ok, "open: %.300s", e.msg);
        if (ok) {
            TT_CHECK(f.ndim == 3 && f.shape[0] == 3 && f.shape[1] == 4 && f.shape[2] == 5, "shape");
            TT_CHECK(f.data_off % 64 == 0 && f.file_size == f.data_off + sizeof a, "layout off=%llu size=%llu",
                     (unsigned long long)f.data_off, (unsigned long long)f.file_size);
            TT_CHECK(tr_npy_expect_shape(&f, 3, sh, "input", "batch, seq, hidden", &e), "%.300s", e.msg);
            float all[60];
            TT_CHECK(tr_npy_read_block(&f, 0, 12, 0, 5, all, 5, &e) && !memcmp(all, a, sizeof a), "full: %.300s",
                     e.msg);
            float d[3 * 4]; /* [3, ldd=4] */
            for (int i = 0; i < 12; i++)
                d[i] = -1;
            TT_CHECK(tr_npy_read_block(&f, 5, 3, 1, 3, d, 4, &e), "block: %.300s", e.msg);
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 4; c++)
                    TT_CHECK(d[r * 4 + c] == (c < 3 ? val(5 + r, 1 + c) : -1.0f), "(%d,%d)=%g", r, c,
                             d[r * 4 + c]);
            tr_err e2 = {{0}};
            TT_CHECK(!tr_npy_read_block(&f, 10, 3, 0, 1, d, 1, &e2) && has(e2.msg, "outside") &&
                         starts(e2.msg, path),
                     "msg=%.300s", e2.msg);
            tr_npy_close(&f);
            tr_npy_close(&f);
        }
    }

    TT_CASE("npy: 1-D, scalar and empty arrays roundtrip") {
        float v[7], s = 3.5f, got[7];
        fill(v, 1, 7);
        int64_t s1[1] = {7}, s0[2] = {0, 3};
        tr_err e = {{0}};
        tr_npy f = {.fd = -1}; /* map stays NULL unless an open succeeds */
        TT_CHECK(tr_npy_write_atomic(P("v.npy"), 1, s1, v, &e) && tr_npy_open(&f, P("v.npy"), &e), "%.300s", e.msg);
        if (f.map) {
            TT_CHECK(f.ndim == 1 && tr_npy_read_block(&f, 0, 1, 2, 4, got, 4, &e) && got[0] == val(0, 2) &&
                         got[3] == val(0, 5),
                     "1-D: %.300s", e.msg);
            tr_npy_close(&f);
        }
        TT_CHECK(tr_npy_write_atomic(P("s.npy"), 0, NULL, &s, &e) && tr_npy_open(&f, P("s.npy"), &e), "%.300s", e.msg);
        if (f.map) {
            TT_CHECK(f.ndim == 0 && tr_npy_read_block(&f, 0, 1, 0, 1, got, 1, &e) && got[0] == 3.5f, "scalar: %.300s",
                     e.msg);
            tr_npy_close(&f);
        }
        TT_CHECK(tr_npy_write_atomic(P("z.npy"), 2, s0, NULL, &e) && tr_npy_open(&f, P("z.npy"), &e), "%.300s", e.msg);
        if (f.map) {
            TT_CHECK(f.ndim == 2 && f.shape[0] == 0 && tr_npy_read_block(&f, 0, 0, 0, 3, NULL, 3, &e), "empty: %.300s",
                     e.msg);
            tr_npy_close(&f);
        }
    }

    TT_CASE("npy: shape mismatch message names what, dims and both shapes") {
        static float a[4 * 16 * 32];
        int64_t sh[3] = {4, 16, 32}, want[3] = {4, 16, 64};
        const char *path = P("x.npy");
        tr_err e = {{0}};
        tr_npy f;
        bool ok = tr_npy_write_atomic(path, 3, sh, a, &e) && tr_npy_open(&f, path, &e);
        TT_CHECK(ok, "%.300s", e.msg);
        if (ok) {
            char want_msg[700];
            snprintf(want_msg, sizeof want_msg,
                     "%s: input has shape (4, 16, 32), expected (batch, seq, hidden) = (4, 16, 64): ", path);
            tr_err e2 = {{0}};
            TT_CHECK(!tr_npy_expect_shape(&f, 3, want, "input", "batch, seq, hidden", &e2) &&
                         starts(e2.msg, want_msg),
                     "msg=%.300s", e2.msg);
            int64_t one[1] = {8};
            tr_err e3 = {{0}};
            TT_CHECK(!tr_npy_expect_shape(&f, 1, one, NULL, NULL, &e3) && has(e3.msg, "array has shape") &&
                         has(e3.msg, "expected (8,)"),
                     "msg=%.300s", e3.msg);
            tr_npy_close(&f);
        }
    }

    TT_CASE("npy: hand-written v2.0, v3.0 and Python 2 headers are accepted") {
        float d[12];
        fill(d, 3, 4);
        const char *hdrs[] = {
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
            "{\"shape\": (3L, 4L), \"fortran_order\": False, \"descr\": \"<f4\"}",
            "{'descr':'<f4','fortran_order':False,'shape':(3,4)}",
        };
        int majors[] = {2, 3, 1};
        for (int i = 0; i < 3; i++) {
            const char *path = P("v.npy");
            TT_CHECK(write_npy_raw(path, majors[i], hdrs[i], d, sizeof d), "write");
            tr_npy f;
            tr_err e = {{0}};
            float got[12];
            bool ok = tr_npy_open(&f, path, &e);
            TT_CHECK(ok, "header %d: %.300s", i, e.msg);
            if (ok) {
                TT_CHECK(f.ndim == 2 && f.shape[0] == 3 && f.shape[1] == 4 &&
                             tr_npy_read_block(&f, 0, 3, 0, 4, got, 4, &e) &&
                             !memcmp(got, d, sizeof d),
                         "header %d: data", i);
                tr_npy_close(&f);
            }
        }
    }

    static float d16[32]; /* source of up to 128 data bytes */
    static const struct {
        const char *name;
        int major;          /* .npy format version written */
        const char *dict;
        size_t dlen;
        const char *w1, *w2;
    } bad[] = {
        {"npy bad: descr '<f8'", 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16, "'<f8' (float64)",
         "arr.astype(np.float32)"},
        {"npy bad: descr '>f4'", 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "big-endian",
         "arr.astype('<f4')"},
        {"npy bad: structured descr", 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8,
         "structured", "'<f4'"},
        {"npy bad: fortran_order True", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16,
         "fortran_order is True", "np.ascontiguousarray"},
        {"npy bad: header is a list", 1, "[1, 2]", 0, "not a dict literal", NULL},
        {"npy bad: header dict unterminated", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,", 8,
         "not a valid Python dict literal", NULL},
        {"npy bad: shape (4) without comma", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", 16,
         "trailing comma", NULL},
        {"npy bad: shape is a list", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': [4], }", 16,
         "shape is a list",
         NULL},
        {"npy bad: shape has a float", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4.0,), }", 16, "float",
         NULL},
        {"npy bad: negative shape", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }", 16,
         "shape[0] is -1", NULL},
        {"npy bad: too many dims", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4, "9 dimensions", NULL},
        {"npy bad: missing shape key", 1, "{'descr': '<f4', 'fortran_order': False}", 0, "lacks the 'shape' key", NULL},
        {"npy bad: extra key", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8,
         "unexpected or repeated key 'x'", NULL},
        {"npy bad: truncated data", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", 60,
         "truncated data", "needs 64 bytes"},
        {"npy bad: trailing bytes", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }", 68,
         "4 unexpected bytes", NULL},
        {"npy bad: shape overflows", 1,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0, "too many elements",
         NULL},
        {"npy bad: unsupported version 4.0", 4, "{}", 0, "version 4.0", "1.0, 2.0, 3.0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        TT_CASE(bad[i].name) {
            const char *path = P("bad.npy");
            TT_CHECK(write_npy_raw(path, bad[i].major, bad[i].dict, d16, bad[i].dlen), "write");
            tr_npy f;
            tr_err e = {{0}};
            bool ok = tr_npy_open(&f, path, &e);
            TT_CHECK(!ok, "opened");
            if (ok)
                tr_npy_close(&f);
            TT_CHECK(starts(e.msg, path) && has(e.msg, bad[i].w1) && has(e.msg, bad[i].w2), "msg=%.300s", e.msg);
            TT_CHECK(f.map == NULL && f.fd == -1, "failed open left resources");
            unlink(path);
        }
    }

    TT_CASE("npy bad: magic, zip, short file, header past the end, missing file") {
        struct {
            const char *bytes;
            size_t len;
            const char *w1, *w2;
        } cases[] = {
            {"\x93NUMPX\x01\x00\x10\x00{}", 12, "bad magic", NULL},
            {"PK\x03\x04\x14\x00\x00\x00\x00\x00", 10, "bad magic", ".npz"},
            {"\x93NUMPY\x01", 7, "shorter", "truncated"},
            {"\x93NUMPY\x02\x00\x10\x00", 10, "shorter", "v2.0"},
            {"\x93NUMPY\x01\x00\x40\x00{'descr': '<f4'", 26, "header length 64", "truncated"},
        };
        const char *path = P("raw.npy");
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            TT_CHECK(write_bytes(path, cases[i].bytes, cases[i].len), "write");
            tr_npy f;
            tr_err e = {{0}};
            bool ok = tr_npy_open(&f, path, &e);
            TT_CHECK(!ok, "case %zu opened", i);
            if (ok)
                tr_npy_close(&f);
            TT_CHECK(starts(e.msg, path) && has(e.msg, cases[i].w1) && has(e.msg, cases[i].w2), "case %zu: msg=%.300s",
                     i, e.msg);
        }
        unlink(path);
        tr_npy f;
        tr_err e = {{0}};
        TT_CHECK(!tr_npy_open(&f, P("nope.npy"), &e) && has(e.msg, "No such file"), "missing: msg=%.300s", e.msg);
    }
}

/* ---- NumPy interop ------------------------------------------------------------------ */

static bool have_numpy(void)
{
    return access("/usr/bin/python3", X_OK) == 0 &&
           system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

/* Run a Python script (written to a file) with /usr/bin/python3; true when it exits 0. */
static bool run_py(const char *script, char *out, size_t cap)
{
    const char *py = P("t.py"), *log = P("t.log");
    if (!write_bytes(py, script, strlen(script)))
        return false;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' >'%s' 2>&1", py, g_dir, log);
    int rc = system(cmd);
    if (read_small(log, out, cap) < 0)
        out[0] = '\0';
    unlink(py);
    unlink(log);
    return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

static void test_numpy(void)
{
    const char *names[] = {
        "numpy: np.save files (v1.0, v2.0, v3.0) are read correctly",
        "numpy: np.save float64 and Fortran-order files are refused with a fix",
        "numpy: numpy reads our .npy and parses our safetensors",
    };
    if (!have_numpy()) {
        for (int i = 0; i < 3; i++)
            printf("ok - %s # skip /usr/bin/python3 with numpy not available\n", names[i]);
        return;
    }
    TT_CASE(names[0]) {
        char out[2048];
        const char *script =
            "import sys, numpy as np\n"
            "d = sys.argv[1]\n"
            "a = (np.arange(2*3*4, dtype=np.float32).reshape(2, 3, 4) * 1.5)\n"
            "np.save(d + '/np1.npy', a)\n"
            "for v in [(2, 0), (3, 0)]:\n"
            "    with open(d + '/np%d.npy' % v[0], 'wb') as f:\n"
            "        np.lib.format.write_array(f, a, version=v)\n";
        bool ok = run_py(script, out, sizeof out);
        TT_CHECK(ok, "python failed: %.300s", out);
        for (int v = 1; ok && v <= 3; v++) {
            char fname[16];
            snprintf(fname, sizeof fname, "np%d.npy", v);
            tr_npy f;
            tr_err e = {{0}};
            bool o = tr_npy_open(&f, P(fname), &e);
            TT_CHECK(o, "%.300s: %.300s", fname, e.msg);
            if (!o)
                continue;
            TT_CHECK(f.map[6] == v, "%.300s is version %d", fname, f.map[6]);
            int64_t sh[3] = {2, 3, 4};
            TT_CHECK(tr_npy_expect_shape(&f, 3, sh, "x", NULL, &e), "%.300s", e.msg);
            float d[2 * 2]; /* rows 3..4, cols 1..2 of the [6, 4] view */
            TT_CHECK(tr_npy_read_block(&f, 3, 2, 1, 2, d, 2, &e), "%.300s", e.msg);
            for (int r = 0; r < 2; r++)
                for (int c = 0; c < 2; c++)
                    TT_CHECK(d[r * 2 + c] == (float)((3 + r) * 4 + 1 + c) * 1.5f, "%.300s (%d,%d)=%g", fname, r, c,
                             d[r * 2 + c]);
            tr_npy_close(&f);
            unlink(P(fname));
        }
    }
    TT_CASE(names[1]) {
        char out[2048];
        const char *script = "import sys, numpy as np\n"
                             "d = sys.argv[1]\n"
                             "np.save(d + '/f8.npy', np.zeros((2, 3)))\n"
                             "np.save(d + '/fo.npy', np.asfortranarray(np.zeros((2, 3), dtype=np.float32)))\n";
        bool ok = run_py(script, out, sizeof out);
        TT_CHECK(ok, "python failed: %.300s", out);
        tr_npy f;
        tr_err e = {{0}}, e2 = {{0}};
        TT_CHECK(ok && !tr_npy_open(&f, P("f8.npy"), &e) && has(e.msg, "'<f8'") && has(e.msg, "astype(np.float32)"),
                 "f8: %.300s", e.msg);
        TT_CHECK(ok && !tr_npy_open(&f, P("fo.npy"), &e2) && has(e2.msg, "ascontiguousarray"), "fo: %.300s", e2.msg);
        unlink(P("f8.npy"));
        unlink(P("fo.npy"));
    }
    TT_CASE(names[2]) {
        float a[5 * 6];
        fill(a, 5, 6);
        int64_t sh[2] = {5, 6};
        float w[4 * 3], b[3];
        fill(w, 4, 3);
        fill(b, 1, 3);
        tr_st_out outs[2] = {{"w", 2, {4, 3}, w}, {"b", 1, {3}, b}};
        tr_err e = {{0}};
        TT_CHECK(tr_npy_write_atomic(P("ours.npy"), 2, sh, a, &e), "%.300s", e.msg);
        TT_CHECK(tr_st_write_atomic(P("ours.safetensors"), outs, 2, &e), "%.300s", e.msg);
        char out[2048];
        const char *script =
            "import sys, json, struct, numpy as np\n"
            "d = sys.argv[1]\n"
            "def val(r, c): return np.float32(r * 1000 + c) + np.float32(0.25)\n"
            "a = np.load(d + '/ours.npy')\n"
            "assert a.dtype == np.float32 and a.shape == (5, 6), (a.dtype, a.shape)\n"
            "assert all(a[r, c] == val(r, c) for r in range(5) for c in range(6))\n"
            "raw = open(d + '/ours.safetensors', 'rb').read()\n"
            "n = struct.unpack('<Q', raw[:8])[0]\n"
            "assert n % 8 == 0\n"
            "h = json.loads(raw[8:8 + n])\n"
            "assert list(h) == ['b', 'w'], list(h)\n"
            "def get(k):\n"
            "    e = h[k]; b0, b1 = e['data_offsets']\n"
            "    assert e['dtype'] == 'F32'\n"
            "    return np.frombuffer(raw[8 + n + b0:8 + n + b1], dtype='<f4').reshape(e['shape'])\n"
            "w = get('w'); b = get('b')\n"
            "assert w.shape == (4, 3) and b.shape == (3,)\n"
            "assert all(w[r, c] == val(r, c) for r in range(4) for c in range(3))\n"
            "assert all(b[c] == val(0, c) for c in range(3))\n"
            "assert 8 + n + h['w']['data_offsets'][1] == len(raw)\n"
            "print('ok')\n";
        bool ok = run_py(script, out, sizeof out);
        TT_CHECK(ok, "python check failed: %.300s", out);
        unlink(P("ours.npy"));
        unlink(P("ours.safetensors"));
    }
}

/* ---- bf16: conversion and BF16 files --------------------------------------------- */

/* The float32 with these bits, and back: written here, not taken from tr_bf16.h. */
static float f_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Round-to-nearest-even of float32 bits to bf16, for non-NaN u, the textbook way: compare the
 * dropped half with one half of the kept ulp (0x8000); above it round up, on a tie keep an even
 * last kept bit. A carry out of the fraction moves into the exponent, as it should. */
static uint16_t ref_rne(uint32_t u)
{
    uint32_t keep = u >> 16, drop = u & 0xffffu;
    if (drop > 0x8000u || (drop == 0x8000u && (keep & 1u)))
        keep++;
    return (uint16_t)keep;
}

static bool bf16_is_nan(uint16_t h)
{
    return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0;
}

static void test_bf16(void)
{
    TT_CASE("bf16: f32 -> bf16 rounds to nearest, ties to even (both ways), subnormals, largest finite, inf, NaN") {
        static const struct {
            uint32_t f;
            uint16_t want;
            int overflows;
            const char *what;
        } cases[] = {
            {0x3f800000u, 0x3f80, 0, "1.0 exact"},
            {0x3f808000u, 0x3f80, 0, "1 + 2^-8: tie, kept bit even: down"},
            {0x3f818000u, 0x3f82, 0, "tie, kept bit odd: up"},
            {0x3f808001u, 0x3f81, 0, "just above the tie: up"},
            {0x3f807fffu, 0x3f80, 0, "just below the tie: down"},
            {0xbf808000u, 0xbf80, 0, "negative tie, even: toward zero"},
            {0xbf818000u, 0xbf82, 0, "negative tie, odd: away from zero"},
            {0x3fff8000u, 0x4000, 0, "tie carrying into the exponent (1.9921875+ -> 2.0)"},
            {0x00000000u, 0x0000, 0, "+0"},
            {0x80000000u, 0x8000, 0, "-0"},
            {0x00010000u, 0x0001, 0, "smallest bf16 subnormal, exact"},
            {0x00008000u, 0x0000, 0, "subnormal tie, even: to +0"},
            {0x00018000u, 0x0002, 0, "subnormal tie, odd: up"},
            {0x80018000u, 0x8002, 0, "negative subnormal tie, odd"},
            {0x00000001u, 0x0000, 0, "smallest f32 subnormal: to +0"},
            {0x80000001u, 0x8000, 0, "smallest negative f32 subnormal: to -0"},
            {0x007fffffu, 0x0080, 0, "largest f32 subnormal: up to the smallest normal"},
            {0x7f7f0000u, 0x7f7f, 0, "largest finite bf16, exact"},
            {0x7f7f7fffu, 0x7f7f, 0, "just below the overflow tie: stays finite"},
            {0x7f7f8000u, 0x7f80, 1, "overflow tie (kept bit odd): inf"},
            {0x7f7fffffu, 0x7f80, 1, "FLT_MAX: inf"},
            {0xff7f8000u, 0xff80, 1, "negative overflow: -inf"},
            {0x7f800000u, 0x7f80, 0, "+inf stays"},
            {0xff800000u, 0xff80, 0, "-inf stays"},
            {0x7fc00000u, 0x7fc0, 0, "quiet NaN"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            float x = f_of(cases[i].f);
            uint16_t got = tr_f32_to_bf16(x);
            TT_CHECK(got == cases[i].want, "%s: 0x%08x -> 0x%04x, want 0x%04x", cases[i].what, cases[i].f, got,
                     cases[i].want);
            TT_CHECK(tr_bf16_overflows(x) == (cases[i].overflows != 0), "%s: overflows() says %d", cases[i].what,
                     (int)tr_bf16_overflows(x));
        }
        /* NaN stays NaN with its sign, even a signalling one whose payload lies only in the dropped bits */
        const uint32_t nans[] = {0x7f800001u, 0xff800001u, 0x7fbfffffu, 0xffffffffu, 0x7f80ffffu};
        for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
            uint16_t got = tr_f32_to_bf16(f_of(nans[i]));
            TT_CHECK(bf16_is_nan(got) && (got >> 15) == (nans[i] >> 31), "NaN 0x%08x -> 0x%04x", nans[i], got);
            TT_CHECK(!tr_bf16_overflows(f_of(nans[i])), "NaN 0x%08x counted as an overflow", nans[i]);
        }
    }

    TT_CASE("bf16: f32 -> bf16 equals the textbook rounding on every tie and 2^22 other bit patterns") {
        uint64_t s = 0x9e3779b97f4a7c15ull, n = 0, bad = 0;
        uint32_t first = 0;
        for (uint32_t k = 0; k < (1u << 22) + (1u << 16); k++) {
            uint32_t u;
            if (k < (1u << 16)) {
                u = (k << 16) | 0x8000u; /* every kept pattern with a dropped half of exactly one half */
            } else {
                s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64 */
                u = (uint32_t)(s >> 32);
            }
            if ((u & 0x7fffffffu) > 0x7f800000u)
                continue; /* NaN: the case above */
            n++;
            uint16_t want = ref_rne(u);
            bool want_over = (u & 0x7fffffffu) < 0x7f800000u && (want & 0x7fffu) == 0x7f80u;
            if (tr_f32_to_bf16(f_of(u)) != want || tr_bf16_overflows(f_of(u)) != want_over) {
                if (!bad)
                    first = u;
                bad++;
            }
        }
        TT_CHECK(bad == 0, "%llu of %llu differ, the first 0x%08x", (unsigned long long)bad, (unsigned long long)n,
                 first);
    }

    TT_CASE("bf16: bf16 -> f32 is exact for all 65536 patterns, and f32 -> bf16 gives them back") {
        int bad = -1, badrt = -1;
        for (uint32_t h = 0; h < 65536u; h++) {
            float x = tr_bf16_to_f32((uint16_t)h);
            if (bits_of(x) != h << 16 && bad < 0)
                bad = (int)h;
            uint16_t back = tr_f32_to_bf16(x);
            if ((bf16_is_nan((uint16_t)h) ? !bf16_is_nan(back) : back != h) && badrt < 0)
                badrt = (int)h;
        }
        TT_CHECK(bad < 0, "0x%04x widens to 0x%08x, not its bits shifted up", bad,
                 bad < 0 ? 0u : bits_of(tr_bf16_to_f32((uint16_t)bad)));
        TT_CHECK(badrt < 0, "0x%04x does not survive the round trip", badrt);
    }

    /* bits of the BF16 tensor "b" [2, 3] below, and what each must read as (float32 bits shifted up) */
    static const uint16_t hb[6] = {0x3f80, 0xc049, 0x0001, 0x7f7f, 0x8080, 0x3eaa};

    TT_CASE("st: BF16 tensors are read widened exactly, unaligned, next to F32 ones (mixed file)") {
        /* i: I8 [1] at [0,1); b: BF16 [2,3] at [1,13) (odd offset); g: F32 [2] at [13,21) */
        const char *hdr = "{\"i\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                          "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[1,13]},"
                          "\"g\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[13,21]}}";
        unsigned char data[21] = {7};
        for (int k = 0; k < 6; k++) { /* little-endian */
            data[1 + 2 * k] = (unsigned char)(hb[k] & 0xff);
            data[2 + 2 * k] = (unsigned char)(hb[k] >> 8);
        }
        float g[2] = {1.5f, -2.0f};
        memcpy(data + 13, g, 8);
        const char *path = P("bf16mixed.safetensors");
        TT_CHECK(write_st_raw(path, hdr, data, sizeof data), "write");
        tr_st_file f;
        tr_err e = {{0}};
        bool ok = tr_st_open(&f, path, &e);
        TT_CHECK(ok, "open: %.300s", e.msg);
        if (ok) {
            int64_t sb[2] = {2, 3}, sg[1] = {2};
            TT_CHECK(tr_st_expect_float(&f, "b", 2, sb, &e) && tr_st_expect_float(&f, "g", 1, sg, &e), "%.300s",
                     e.msg);
            float d[8];
            for (int k = 0; k < 8; k++)
                d[k] = -777.0f;
            TT_CHECK(tr_st_read_block(&f, "b", 0, 2, 0, 3, d, 3, &e), "%.300s", e.msg);
            for (int k = 0; k < 6; k++)
                TT_CHECK(bits_of(d[k]) == (uint32_t)hb[k] << 16, "b[%d]: bits 0x%08x, want 0x%04x0000", k,
                         bits_of(d[k]), hb[k]);
            float blk[4] = {-777.0f, -777.0f, -777.0f, -777.0f};
            TT_CHECK(tr_st_read_block(&f, "b", 0, 2, 1, 2, blk, 2, &e), "%.300s", e.msg); /* cols 1..2 */
            TT_CHECK(bits_of(blk[0]) == 0xc0490000u && bits_of(blk[1]) == 0x00010000u &&
                         bits_of(blk[2]) == 0x80800000u && bits_of(blk[3]) == 0x3eaa0000u,
                     "block: %08x %08x %08x %08x", bits_of(blk[0]), bits_of(blk[1]), bits_of(blk[2]),
                     bits_of(blk[3]));
            float dg[2] = {0, 0};
            TT_CHECK(tr_st_read_block(&f, "g", 0, 1, 0, 2, dg, 2, &e) && dg[0] == 1.5f && dg[1] == -2.0f,
                     "g: %.300s", e.msg);
            tr_err e2 = {{0}};
            TT_CHECK(!tr_st_read_block(&f, "b", 1, 2, 0, 3, d, 3, &e2) && has(e2.msg, "outside"), "msg=%.300s",
                     e2.msg);
            tr_st_close(&f);
        }
    }

    TT_CASE("st: a BF16 tensor whose data_offsets span 4 bytes per element is refused (header lies)") {
        const char *path = P("bf16span.safetensors");
        TT_CHECK(write_st_raw(path, "{\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,12]}}", NULL, 12),
                 "write");
        tr_st_file f;
        tr_err e = {{0}};
        TT_CHECK(!tr_st_open(&f, path, &e) && starts(e.msg, path) && has(e.msg, "tensor b") &&
                     has(e.msg, "span 12 bytes") && has(e.msg, "of BF16 needs 6 bytes"),
                 "msg=%.300s", e.msg);
    }

    TT_CASE("st: F16 and F64 tensors are refused naming the tensor, its dtype and what is accepted") {
        const char *path = P("f16.safetensors");
        TT_CHECK(write_st_raw(path, "{\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                                    "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[4,12]}}",
                              NULL, 12),
                 "write");
        tr_st_file f;
        tr_err e = {{0}};
        bool ok = tr_st_open(&f, path, &e);
        TT_CHECK(ok, "open: %.300s", e.msg);
        if (ok) {
            int64_t sh[1] = {2};
            float d[2];
            tr_err e2 = {{0}}, e3 = {{0}};
            TT_CHECK(!tr_st_expect_float(&f, "h", 1, sh, &e2) && starts(e2.msg, path) && has(e2.msg, "tensor h ") &&
                         has(e2.msg, "dtype F16") && has(e2.msg, "only F32 and BF16 are accepted"),
                     "msg=%.300s", e2.msg);
            TT_CHECK(!tr_st_read_block(&f, "d", 0, 1, 0, 1, d, 1, &e3) && has(e3.msg, "dtype F64") &&
                         has(e3.msg, "F32 and BF16"),
                     "msg=%.300s", e3.msg);
            tr_st_close(&f);
        }
    }

    TT_CASE("st write BF16: header dtype BF16, 2 bytes per element, bits = the rounding of each value") {
        /* values with ties both ways, a subnormal, the largest finite bf16, a negative */
        const uint32_t wb[6] = {0x3f808000u, 0x3f818000u, 0x00018000u, 0x7f7f7fffu, 0xc0490fdbu, 0x3eaaaaabu};
        float w[6], v[2] = {f_of(0xbf808000u), 0.1f};
        for (int k = 0; k < 6; k++)
            w[k] = f_of(wb[k]);
        tr_st_out outs[3] = {{"w", 2, {2, 3}, w}, {"v", 1, {2}, v}, {"e", 1, {0}, NULL}};
        const char *path = P("out_bf16.safetensors");
        tr_err e = {{0}};
        TT_CHECK(tr_st_write_atomic_as(path, outs, 3, TR_ST_BF16, &e), "%.300s", e.msg);
        char buf[1024];
        long n = read_small(path, buf, sizeof buf);
        uint64_t hl = 0;
        for (int i = 7; i >= 0 && n >= 8; i--)
            hl = (hl << 8) | (unsigned char)buf[i];
        TT_CHECK(n == (long)(8 + hl + 16), "file %ld bytes, header %llu: want 16 data bytes", n,
                 (unsigned long long)hl);
        if (n == (long)(8 + hl + 16)) {
            char h[512];
            snprintf(h, sizeof h, "%.*s", (int)hl, buf + 8);
            TT_CHECK(has(h, "\"e\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[0,0]}") &&
                         has(h, "\"v\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}") &&
                         has(h, "\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[4,16]}") &&
                         !has(h, "F32"),
                     "header %s", h);
            const unsigned char *dd = (const unsigned char *)buf + 8 + hl;
            for (int k = 0; k < 8; k++) { /* v then w, by name */
                uint16_t want = ref_rne(k < 2 ? bits_of(v[k]) : wb[k - 2]);
                uint16_t got = (uint16_t)(dd[2 * k] | (dd[2 * k + 1] << 8));
                TT_CHECK(got == want, "element %d: 0x%04x, want 0x%04x", k, got, want);
            }
        }
        TT_CHECK(count_temps(g_dir) == 0, "temp left");
    }

    TT_CASE("st write BF16: a finite value that rounds to inf is refused naming it; the old file is kept") {
        const char *path = P("over_bf16.safetensors");
        TT_CHECK(write_bytes(path, "old", 3), "write old");
        float w[6] = {1, 2, 3, 4, 5, f_of(0xff7f8000u)}, ok4[4] = {1, 2, 3, 4};
        tr_st_out outs[2] = {{"a", 1, {4}, ok4}, {"h.0.mlp.c_fc.weight", 2, {2, 3}, w}};
        tr_err e = {{0}};
        TT_CHECK(!tr_st_write_atomic_as(path, outs, 2, TR_ST_BF16, &e) && starts(e.msg, path) &&
                     has(e.msg, "tensor h.0.mlp.c_fc.weight: element [1,2]") && has(e.msg, "largest finite bf16") &&
                     has(e.msg, "--out-dtype f32") && has(e.msg, "nothing written"),
                 "msg=%.300s", e.msg);
        TT_CHECK(file_is(path, "old"), "old file changed");
        TT_CHECK(count_temps(g_dir) == 0, "temp left");
        tr_err e2 = {{0}}; /* the same values as F32 are written */
        TT_CHECK(tr_st_write_atomic_as(path, outs, 2, TR_ST_F32, &e2), "F32: %.300s", e2.msg);
    }
}


/* ---- sharded checkpoints (tr_stset) ------------------------------------------ */

/* tr_hfout.o and tr_gather.o, linked through the archive, refer to the generated model */
const tr_model_desc tr_model = {.name = "test_io", .layers = 1, .hidden = 4, .heads = 1, .ffn = 16, .eps = 1e-5};

/* dir d (under g_dir) with shards s1 = {a [2,3], b [3]} and s2 = {c [4,2]} and the index text ix */
static bool make_sharded(const char *d, const char *ix)
{
    static float a[6], b[3], c[8];
    fill(a, 2, 3);
    fill(b, 1, 3);
    fill(c, 4, 2);
    tr_st_out s1[2] = {{"a", 2, {2, 3}, a}, {"b", 1, {3}, b}}, s2[1] = {{"c", 2, {4, 2}, c}};
    char f[600];
    tr_err e = {{0}};
    mkdir(d, 0755);
    snprintf(f, sizeof f, "%s/s1.safetensors", d);
    bool ok = tr_st_write_atomic(f, s1, 2, &e);
    snprintf(f, sizeof f, "%s/s2.safetensors", d);
    ok = ok && tr_st_write_atomic(f, s2, 1, &e);
    snprintf(f, sizeof f, "%s/model.safetensors.index.json", d);
    return ok && write_bytes(f, ix, strlen(ix));
}

static const char *good_ix = "{\"metadata\": {\"total_size\": 68}, \"weight_map\": {\"a\": \"s1.safetensors\", "
                             "\"b\": \"s1.safetensors\", \"c\": \"s2.safetensors\"}}";

/* the index at dir d is refused with a message starting with its path and holding want */
static void bad_index(const char *name, const char *ix, const char *want, void (*spoil)(const char *d))
{
    TT_CASE(name) {
        char d[600], ixp[700];
        snprintf(d, sizeof d, "%s", P("badix"));
        rm_tree(d);
        TT_CHECK(make_sharded(d, ix), "setup");
        if (spoil)
            spoil(d);
        snprintf(ixp, sizeof ixp, "%s/model.safetensors.index.json", d);
        tr_stset s;
        tr_err e = {{0}};
        bool ok = tr_stset_open(&s, ixp, true, &e);
        TT_CHECK(!ok, "accepted");
        TT_CHECK(starts(e.msg, ixp) || strstr(e.msg, ixp), "message does not name the index: %.300s", e.msg);
        TT_CHECK(strstr(e.msg, want) != NULL, "message lacks \"%s\": %.400s", want, e.msg);
        TT_CHECK(s.ntensors == 0 && s.shards == NULL, "a refused set is not left closed");
        tr_stset_close(&s);
        rm_tree(d);
    }
}

static void spoil_missing(const char *d)
{
    char f[700];
    snprintf(f, sizeof f, "%s/s2.safetensors", d);
    unlink(f);
}

static void spoil_twice(const char *d) /* s2 also holds a */
{
    static float a[6], c[8];
    fill(a, 2, 3);
    fill(c, 4, 2);
    tr_st_out s2[2] = {{"a", 2, {2, 3}, a}, {"c", 2, {4, 2}, c}};
    char f[700];
    tr_err e = {{0}};
    snprintf(f, sizeof f, "%s/s2.safetensors", d);
    tr_st_write_atomic(f, s2, 2, &e);
}

static void test_stset(void)
{
    TT_CASE("stset: index of 2 shards: names, shapes, blocks from the right shard; a directory; lazy opening") {
        char d[600], ixp[700];
        snprintf(d, sizeof d, "%s", P("sharded"));
        TT_CHECK(make_sharded(d, good_ix), "setup");
        snprintf(ixp, sizeof ixp, "%s/model.safetensors.index.json", d);
        for (int mode = 0; mode < 3; mode++) { /* index validated, directory validated, index lazy */
            tr_stset s;
            tr_err e = {{0}};
            TT_CHECK(tr_stset_open(&s, mode == 1 ? d : ixp, mode != 2, &e), "mode %d: %.300s", mode, e.msg);
            if (tt_case_failed)
                break;
            TT_CHECK(s.sharded && s.ntensors == 3 && s.nshards == 2, "mode %d: %d tensors %d shards", mode,
                     s.ntensors, s.nshards);
            TT_CHECK(!strcmp(tr_stset_name(&s, 0), "a") && !strcmp(tr_stset_name(&s, 2), "c"), "names not sorted");
            TT_CHECK(tr_stset_has(&s, "b") && !tr_stset_has(&s, "d"), "has");
            TT_CHECK(s.shards[0].map == NULL && s.shards[1].map == NULL, "mode %d: a shard is open before use", mode);
            int64_t sc[2] = {4, 2}, sb[1] = {3};
            TT_CHECK(tr_stset_expect_float(&s, "c", 2, sc, &e) && tr_stset_expect_float(&s, "b", 1, sb, &e),
                     "expect: %.300s", e.msg);
            float blk[2] = {0, 0};
            TT_CHECK(tr_stset_read_block(&s, "c", 2, 2, 1, 1, blk, 1, &e), "read: %.300s", e.msg);
            TT_CHECK(blk[0] == val(2, 1) && blk[1] == val(3, 1), "c[2..4, 1] = %g %g", blk[0], blk[1]);
            tr_err e2 = {{0}};
            TT_CHECK(!tr_stset_read_block(&s, "zz", 0, 1, 0, 1, blk, 1, &e2) &&
                         strstr(e2.msg, "no tensor named zz in the index's weight_map"),
                     "unknown name: %.300s", e2.msg);
            tr_stset_close(&s);
        }
        rm_tree(d);
    }
    TT_CASE("stset: a single file is a set of one shard with the file's messages") {
        static float a[6];
        fill(a, 2, 3);
        tr_st_out o[1] = {{"h.0.x", 2, {2, 3}, a}};
        tr_err e = {{0}};
        TT_CHECK(tr_st_write_atomic(P("single.st"), o, 1, &e), "%.300s", e.msg);
        tr_stset s;
        TT_CHECK(tr_stset_open(&s, P("single.st"), true, &e), "%.300s", e.msg);
        TT_CHECK(!s.sharded && s.ntensors == 1 && !strcmp(tr_stset_name(&s, 0), "h.0.x"), "table");
        int64_t sh[2] = {2, 4};
        TT_CHECK(!tr_stset_expect_float(&s, "h.0.x", 2, sh, &e) && strstr(e.msg, "has shape [2,3], expected [2,4]"),
                 "shape message: %.300s", e.msg);
        tr_stset_close(&s);
        tr_stset_close(&s); /* twice is harmless */
    }
    TT_CASE("stset: a directory with both model.safetensors and the index, or neither, is refused") {
        char d[600], f[700];
        snprintf(d, sizeof d, "%s", P("both"));
        TT_CHECK(make_sharded(d, good_ix), "setup");
        tr_stset s;
        tr_err e = {{0}};
        mkdir(P("neither"), 0755);
        bool ok = tr_stset_open(&s, P("neither"), true, &e);
        TT_CHECK(!ok && strstr(e.msg, "without model.safetensors or"), "neither: %.300s", e.msg);
        if (ok)
            tr_stset_close(&s);
        rmdir(P("neither"));
        snprintf(f, sizeof f, "%s/model.safetensors", d);
        TT_CHECK(write_bytes(f, "x", 1), "setup");
        tr_err e2 = {{0}};
        ok = tr_stset_open(&s, d, true, &e2);
        if (ok)
            tr_stset_close(&s);
        TT_CHECK(!ok && strstr(e2.msg, "holds both model.safetensors and"),
                 "both: %.300s", e2.msg);
        rm_tree(d);
    }
    /* the index directory holds model.safetensors.index.json, so these name it */
    bad_index("stset refused: not JSON", "{\"weight_map\": {", "is not valid JSON", NULL);
    bad_index("stset refused: top level not an object", "[1]", "the top level is a JSON array", NULL);
    bad_index("stset refused: no weight_map", "{\"metadata\": {}}", "has no \"weight_map\"", NULL);
    bad_index("stset refused: weight_map empty", "{\"weight_map\": {}}", "\"weight_map\" is empty", NULL);
    bad_index("stset refused: shard with '/'",
              "{\"weight_map\": {\"a\": \"../s1.safetensors\", \"b\": \"s1.safetensors\", \"c\": \"s2.safetensors\"}}",
              "weight_map gives tensor a the shard \"../s1.safetensors\"", NULL);
    bad_index("stset refused: shard not a string",
              "{\"weight_map\": {\"a\": 3, \"b\": \"s1.safetensors\", \"c\": \"s2.safetensors\"}}",
              "the shard a JSON number", NULL);
    bad_index("stset refused: a tensor twice in weight_map",
              "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\", \"c\": \"s2.safetensors\", "
              "\"a\": \"s1.safetensors\"}}",
              "tensor a appears twice in weight_map", NULL);
    bad_index("stset refused: a missing shard names a tensor and the shard", good_ix,
              "maps tensor c (and every other tensor of that shard) to the shard s2.safetensors, which cannot be read",
              spoil_missing);
    bad_index("stset refused: a tensor mapped to the wrong shard",
              "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\", \"c\": \"s2.safetensors\"}}",
              "maps tensor b to shard s2.safetensors, but shard s1.safetensors holds it", NULL);
    bad_index("stset refused: a tensor in two shards", good_ix, "tensor a is in two shards, s1.safetensors and s2",
              spoil_twice);
    bad_index("stset refused: a tensor the map does not list",
              "{\"weight_map\": {\"a\": \"s1.safetensors\", \"c\": \"s2.safetensors\"}}",
              "shard s1.safetensors holds tensor b, which the index's weight_map does not list", NULL);
    bad_index("stset refused: a mapped tensor no shard holds",
              "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\", \"c\": \"s2.safetensors\", "
              "\"d\": \"s2.safetensors\"}}",
              "maps tensor d to shard s2.safetensors, which does not hold it", NULL);
}

/* ---- the Hugging Face directory writer (tr_hfout_write_dir) ------------------- */

static int count_named(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, part))
            n++;
    closedir(d);
    return n;
}

static void test_hfout_dir(void)
{
    static float w[6], bias[3];
    fill(w, 2, 3);
    fill(bias, 1, 3);
    tr_st_out t[2] = {{"h.0.attn.c_proj.weight", 2, {2, 3}, w}, {"h.0.attn.c_proj.bias", 1, {3}, bias}};
    tr_hfout_model m = {.vocab = 50, .positions = 16, .layers = 1, .hidden = 4, .heads = 2, .ffn = 16, .eps = 1e-6};
    TT_CASE("hfout: the directory: transformer.* names with the values, config.json, the mark; nothing beside it") {
        tr_err e = {{0}};
        TT_CHECK(tr_hfout_write_dir(P("exp"), &m, t, 2, TR_ST_F32, NULL, NULL, 0, &e), "%.300s", e.msg);
        tr_st_file f;
        char p[600];
        snprintf(p, sizeof p, "%s/model.safetensors", P("exp"));
        TT_CHECK(tr_st_open(&f, p, &e), "%.300s", e.msg);
        if (!tt_case_failed) {
            float blk[3];
            TT_CHECK(f.ntensors == 2 && tr_st_find(&f, "transformer.h.0.attn.c_proj.weight") &&
                         tr_st_read_block(&f, "transformer.h.0.attn.c_proj.bias", 0, 1, 0, 3, blk, 3, &e) &&
                         blk[2] == val(0, 2),
                     "tensors: %.300s", e.msg);
            tr_st_close(&f);
        }
        snprintf(p, sizeof p, "%s/config.json", P("exp"));
        FILE *fp = fopen(p, "rb");
        char text[4096] = {0};
        size_t n = fp ? fread(text, 1, sizeof text - 1, fp) : 0;
        if (fp)
            fclose(fp);
        tr_json_doc doc;
        TT_CHECK(n > 0 && tr_json_parse(&doc, text, n, p, &e), "config.json: %.300s", e.msg);
        if (!tt_case_failed) {
            const tr_json_node *r = tr_json_root(&doc), *ni = tr_json_get(&doc, r, "n_inner"),
                               *eps = tr_json_get(&doc, r, "layer_norm_epsilon"), *v = tr_json_get(&doc, r, "vocab_size");
            TT_CHECK(ni && ni->type == TR_JSON_NULL && eps && eps->num == 1e-6 && v && v->ival == 50,
                     "config values");
            tr_json_free(&doc);
        }
        snprintf(p, sizeof p, "%s/" TR_HFOUT_MARK, P("exp"));
        TT_CHECK(access(p, F_OK) == 0, "no mark");
        TT_CHECK(count_named(g_dir, "exp.") == 0, "a temp or old directory beside the export");
    }
    TT_CASE("hfout: a second export replaces the first (BF16), nothing left beside it") {
        tr_err e = {{0}};
        m.ffn = 12;
        TT_CHECK(tr_hfout_write_dir(P("exp/"), &m, t, 2, TR_ST_BF16, NULL, NULL, 0, &e), "%.300s", e.msg);
        char p[600];
        snprintf(p, sizeof p, "%s/config.json", P("exp"));
        FILE *fp = fopen(p, "rb");
        char text[4096] = {0};
        if (fp) {
            TT_CHECK(fread(text, 1, sizeof text - 1, fp) > 0, "empty config");
            fclose(fp);
        }
        TT_CHECK(strstr(text, "\"n_inner\": 12,") && strstr(text, "\"torch_dtype\": \"bfloat16\""), "config: %.200s",
                 text);
        TT_CHECK(count_named(g_dir, "exp.") == 0, "a temp or old directory beside the export");
    }
    TT_CASE("hfout: a failure before the rename keeps the previous export and leaves no temp") {
        char p[600], before[4096] = {0}, after[4096] = {0};
        snprintf(p, sizeof p, "%s/config.json", P("exp"));
        FILE *fp = fopen(p, "rb");
        if (fp) {
            TT_CHECK(fread(before, 1, sizeof before - 1, fp) > 0, "read");
            fclose(fp);
        }
        setenv("TESS_TEST_HFOUT_FAIL", "1", 1);
        tr_err e = {{0}};
        m.ffn = 20;
        TT_CHECK(!tr_hfout_write_dir(P("exp"), &m, t, 2, TR_ST_F32, NULL, NULL, 0, &e) &&
                     strstr(e.msg, "the previous export is kept as it was"),
                 "%.300s", e.msg);
        tr_err e2 = {{0}};
        TT_CHECK(!tr_hfout_write_dir(P("exp_new"), &m, t, 2, TR_ST_F32, NULL, NULL, 0, &e2) && access(P("exp_new"), F_OK) != 0,
                 "a failed new export left its directory");
        unsetenv("TESS_TEST_HFOUT_FAIL");
        fp = fopen(p, "rb");
        if (fp) {
            TT_CHECK(fread(after, 1, sizeof after - 1, fp) > 0, "read");
            fclose(fp);
        }
        TT_CHECK(!strcmp(before, after), "the previous config.json changed");
        TT_CHECK(count_named(g_dir, "exp.") == 0 && count_named(g_dir, "exp_new") == 0, "temp left");
    }
    TT_CASE("hfout: a temp directory a killed export left (mark not locked) is removed by the next export") {
        char d[600], f[700];
        snprintf(d, sizeof d, "%s.tmp.99999999", P("exp"));
        mkdir(d, 0755);
        snprintf(f, sizeof f, "%s/" TR_HFOUT_MARK, d);
        TT_CHECK(write_bytes(f, "x", 1), "setup");
        snprintf(f, sizeof f, "%s/config.json", d);
        TT_CHECK(write_bytes(f, "{}", 2), "setup");
        char keep[600]; /* not an export's temp: another file in it, so it is kept */
        snprintf(keep, sizeof keep, "%s.tmp.99999998", P("exp"));
        mkdir(keep, 0755);
        snprintf(f, sizeof f, "%s/notes.txt", keep);
        TT_CHECK(write_bytes(f, "x", 1), "setup");
        tr_err e = {{0}};
        TT_CHECK(tr_hfout_write_dir(P("exp"), &m, t, 2, TR_ST_F32, NULL, NULL, 0, &e), "%.300s", e.msg);
        TT_CHECK(access(d, F_OK) != 0, "the stale temp directory is still there");
        TT_CHECK(access(keep, F_OK) == 0, "a directory with another file was removed");
        rm_tree(keep);
    }
    TT_CASE("hfout: a killed export's temp holding its own temp files (killed while writing) is removed by the next") {
        char d[600], f[700];
        snprintf(d, sizeof d, "%s.tmp.99999997", P("exp"));
        mkdir(d, 0755);
        const char *names[] = {TR_HFOUT_MARK, "config.json", "model.safetensors.tmp.99999997", "config.json.tmp.7"};
        for (int i = 0; i < 4; i++) {
            snprintf(f, sizeof f, "%s/%s", d, names[i]);
            TT_CHECK(write_bytes(f, "x", 1), "setup");
        }
        tr_err e = {{0}};
        TT_CHECK(tr_hfout_write_dir(P("exp"), &m, t, 2, TR_ST_F32, NULL, NULL, 0, &e), "%.300s", e.msg);
        TT_CHECK(access(d, F_OK) != 0, "the stale temp directory with a model.safetensors temp is still there");
    }
    TT_CASE("hfout: an empty temp directory of a gone process (killed before the mark) is removed; a live one's kept") {
        char gone[600], live[600];
        snprintf(gone, sizeof gone, "%s.old.99999996", P("exp"));
        snprintf(live, sizeof live, "%s.tmp.%ld", P("exp"), (long)getppid());
        mkdir(gone, 0755);
        mkdir(live, 0755);
        tr_err e = {{0}};
        TT_CHECK(tr_hfout_write_dir(P("exp"), &m, t, 2, TR_ST_F32, NULL, NULL, 0, &e), "%.300s", e.msg);
        TT_CHECK(access(gone, F_OK) != 0, "the empty temp directory of a gone process is still there");
        TT_CHECK(access(live, F_OK) == 0, "the empty temp directory of a live process was removed");
        rmdir(live);
    }
    TT_CASE("hfout: an export killed while removing the previous one leaves what the next export removes") {
        /* TESS_TEST_HFOUT_KILL: SIGKILL after the first file of a removal; the removal that is killed is the
         * previous export's, swapped out into the temp name (or moved to DIR.old.PID) */
        fflush(NULL);
        pid_t c = fork();
        if (c == 0) {
            setenv("TESS_TEST_HFOUT_KILL", "1", 1);
            tr_err ce = {{0}};
            tr_hfout_write_dir(P("exp"), &m, t, 2, TR_ST_F32, NULL, NULL, 0, &ce);
            _exit(0);
        }
        int status = 0;
        waitpid(c, &status, 0);
        TT_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the hook did not kill the export (status %d)",
                 status);
        TT_CHECK(count_named(g_dir, "exp.") == 1, "the killed export left %d directories beside it",
                 count_named(g_dir, "exp."));
        tr_err e = {{0}};
        TT_CHECK(tr_hfout_write_dir(P("exp"), &m, t, 2, TR_ST_F32, NULL, NULL, 0, &e), "%.300s", e.msg);
        TT_CHECK(count_named(g_dir, "exp.") == 0, "the next export left the killed one's directory");
    }
    TT_CASE("hfout: a directory with other files, or without the mark, is refused and kept") {
        char d[600], f[700];
        snprintf(d, sizeof d, "%s", P("foreign"));
        mkdir(d, 0755);
        snprintf(f, sizeof f, "%s/notes.txt", d);
        TT_CHECK(write_bytes(f, "{}", 2), "setup");
        tr_err e = {{0}};
        TT_CHECK(!tr_hfout_write_dir(d, &m, t, 2, TR_ST_F32, NULL, NULL, 0, &e) && strstr(e.msg, "is not a tessgen export"),
                 "%.300s", e.msg);
        TT_CHECK(access(f, F_OK) == 0, "the foreign file is gone");
        snprintf(f, sizeof f, "%s/" TR_HFOUT_MARK, d);
        TT_CHECK(write_bytes(f, "x", 1), "setup");
        tr_err e2 = {{0}};
        TT_CHECK(!tr_hfout_write_dir(d, &m, t, 2, TR_ST_F32, NULL, NULL, 0, &e2) && strstr(e2.msg, "notes.txt"),
                 "mark plus a foreign file: %.300s", e2.msg);
        rm_tree(d);
    }
    TT_CASE("hfout: the weights' directory's tokenizer and generation-config files are carried byte for byte, "
            "nothing else; an export holding them is replaced; an unreadable one refuses the export") {
        char src[600], f[700], g[800];
        snprintf(src, sizeof src, "%s", P("hfsrc"));
        mkdir(src, 0755);
        const char *names[4] = {"vocab.json", "merges.txt", "generation_config.json", "pytorch_model.bin"};
        const char *texts[4] = {"{\"a\": 0}", "#version: 0.2\na b\n", "{\"do_sample\": false}", "not carried"};
        for (int i = 0; i < 4; i++) {
            snprintf(f, sizeof f, "%s/%s", src, names[i]);
            TT_CHECK(write_bytes(f, texts[i], strlen(texts[i])), "setup");
        }
        char carried[256];
        tr_err e = {{0}};
        TT_CHECK(tr_hfout_write_dir(P("exp_tok"), &m, t, 2, TR_ST_F32, src, carried, sizeof carried, &e), "%.300s",
                 e.msg);
        TT_CHECK(!strcmp(carried, "vocab.json, merges.txt, generation_config.json"), "carried: %s", carried);
        for (int i = 0; i < 3; i++) {
            snprintf(g, sizeof g, "%s/%s", P("exp_tok"), names[i]);
            char b[128];
            long n = read_small(g, b, sizeof b);
            TT_CHECK(n == (long)strlen(texts[i]) && !memcmp(b, texts[i], (size_t)n), "%s not carried byte for byte",
                     names[i]);
        }
        snprintf(g, sizeof g, "%s/pytorch_model.bin", P("exp_tok"));
        TT_CHECK(access(g, F_OK) != 0, "a file that is not the tokenizer's was carried");
        tr_err e2 = {{0}};
        TT_CHECK(tr_hfout_write_dir(P("exp_tok"), &m, t, 2, TR_ST_F32, NULL, carried, sizeof carried, &e2) &&
                     !carried[0],
                 "replacing an export that holds carried files: %.300s", e2.msg);
        snprintf(g, sizeof g, "%s/vocab.json", P("exp_tok"));
        TT_CHECK(access(g, F_OK) != 0, "the new export (no src) kept the old one's vocab.json");
        snprintf(f, sizeof f, "%s/tokenizer.json", src);
        mkdir(f, 0755); /* not a regular file */
        tr_err e3 = {{0}};
        TT_CHECK(!tr_hfout_write_dir(P("exp_tok2"), &m, t, 2, TR_ST_F32, src, carried, sizeof carried, &e3) &&
                     strstr(e3.msg, "tokenizer.json is not a regular file") && access(P("exp_tok2"), F_OK) != 0,
                 "%.300s", e3.msg);
        rmdir(f);
        rm_tree(P("exp_tok"));
        rm_tree(src);
    }
}

/* Checkpoint metadata (__metadata__ written and read back) and the learning-rate schedule. */
static void test_meta_sched(void)
{
    float w[2 * 3];
    fill(w, 2, 3);
    tr_st_out outs[] = {{"w", 2, {2, 3}, w}};
    const char *kv[] = {"format", "tessgen-checkpoint-1", "step", "42", "esc", "a\"b\\c\n", "empty", ""};
    const char *path = P("meta.safetensors");
    tr_err e = {{0}};
    TT_CASE("st meta: written first, read back by key; absent keys and plain files say so; tensors intact") {
        TT_CHECK(tr_st_write_atomic_meta(path, outs, 1, TR_ST_F32, kv, 4, &e), "%.300s", e.msg);
        tr_st_file f;
        tr_err e2 = {{0}};
        bool ok = tr_st_open(&f, path, &e2);
        TT_CHECK(ok, "open: %.300s", e2.msg);
        if (ok) {
            char v[64];
            TT_CHECK(f.ntensors == 1, "ntensors %d", f.ntensors);
            for (int k = 0; k < 4; k++)
                TT_CHECK(tr_st_metadata(&f, kv[2 * k], v, sizeof v) && strcmp(v, kv[2 * k + 1]) == 0, "%s: %s",
                         kv[2 * k], v);
            TT_CHECK(!tr_st_metadata(&f, "absent", v, sizeof v), "absent key found");
            TT_CHECK(!tr_st_metadata(&f, "format", v, 5), "a value longer than the buffer was accepted");
            float back[6];
            TT_CHECK(tr_st_read_block(&f, "w", 0, 2, 0, 3, back, 3, &e2) && memcmp(back, w, sizeof w) == 0,
                     "tensor changed: %.300s", e2.msg);
            tr_st_close(&f);
        }
        TT_CHECK(tr_st_write_atomic(P("plain.safetensors"), outs, 1, &e), "%.300s", e.msg);
        ok = tr_st_open(&f, P("plain.safetensors"), &e2);
        char v[8];
        TT_CHECK(ok && !tr_st_metadata(&f, "format", v, sizeof v), "metadata found in a file without it");
        tr_st_close(&f);
        const char *bad[] = {"k", "\xff"};
        TT_CHECK(!tr_st_write_atomic_meta(P("bad.safetensors"), outs, 1, TR_ST_F32, bad, 1, &e) &&
                     access(P("bad.safetensors"), F_OK) != 0,
                 "a value that is not UTF-8 was written");
    }
    TT_CASE("sched: warmup linear from lr/warmup, cosine through the midpoint to lr_min, constant without keys") {
        TT_CHECK(tr_sched_lr(1e-3, 0, 0, 0, 1) == 1e-3 && tr_sched_lr(1e-3, 0, 0, 0, 1000000) == 1e-3,
                 "constant lr changed");
        TT_CHECK(tr_sched_lr(1.0, 0.1, 4, 10, 1) == 0.25 && tr_sched_lr(1.0, 0.1, 4, 10, 4) == 1.0, "warmup");
        double mid = tr_sched_lr(1.0, 0.1, 4, 10, 9); /* 5 of 10 decay steps: (lr + lr_min) / 2 */
        TT_CHECK(fabs(mid - 0.55) < 1e-15, "midpoint %.17g", mid);
        TT_CHECK(tr_sched_lr(1.0, 0.1, 4, 10, 14) == 0.1 && tr_sched_lr(1.0, 0.1, 4, 10, 99) == 0.1, "after decay");
        TT_CHECK(tr_sched_lr(1.0, 0.1, 0, 10, 1) < 1.0 && tr_sched_lr(1.0, 0.1, 3, 0, 50) == 1.0,
                 "no warmup / no decay");
    }
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/tessgen_test_io.XXXXXX");
    if (!mkdtemp(g_dir)) {
        printf("not ok - setup: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_json();
    test_st_roundtrip();
    test_st_mixed();
    test_st_bad();
    test_bf16();
    test_atomic();
    test_outputs();
    test_npy();
    test_numpy();
    test_stset();
    test_hfout_dir();
    test_meta_sched();
    rm_tree(g_dir);
    TT_EXIT();
}
