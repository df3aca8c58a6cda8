/*
 * fuzz_roundtrip.c - libFuzzer harness for the writers against the readers:
 * what tr_st_write_atomic and tr_npy_write_atomic accept, tr_st_open and
 * tr_npy_open must read back unchanged (names, shapes, every float bit for
 * bit), and what they refuse must break a documented rule (checked here
 * with a UTF-8 test of its own, not the runtime's), leaving no file behind.
 *
 * The input is a recipe: byte 0 picks safetensors or .npy and the tensor
 * count; then per tensor a name (length byte, bytes; any bytes at all), a
 * rank and dimensions (small, so files stay small), and the data comes from
 * the rest of the input, repeated.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "tr_npy.h"
#include "tr_safetensors.h"

typedef struct reader {
    const uint8_t *p;
    size_t n, at;
} reader;

static unsigned take(reader *r)
{
    return r->at < r->n ? r->p[r->at++] : 0;
}

/* RFC 3629 UTF-8, written independently of tr_json's check. */
static bool utf8_ok(const unsigned char *s)
{
    while (*s) {
        unsigned c = *s, need, cp;
        if (c < 0x80) {
            s++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            need = 1, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF)
            need = 2, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4)
            need = 3, cp = c & 0x07;
        else
            return false;
        for (unsigned k = 1; k <= need; k++) {
            if ((s[k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (s[k] & 0x3F);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        s += need + 1;
    }
    return true;
}

enum { MAXT = 6, MAXE = 4096 };

static float g_data[MAXT][MAXE];

/* Fill n floats from the input's tail, repeating it (arbitrary bit patterns: NaNs, infinities, -0). */
static void fill(reader *r, float *dst, size_t n)
{
    size_t avail = r->n > r->at ? r->n - r->at : 0;
    for (size_t e = 0; e < n; e++) {
        uint8_t b[4] = {0, 0, 0, 0};
        for (int k = 0; k < 4 && avail; k++)
            b[k] = r->p[r->at + (e * 4 + (size_t)k) % avail];
        memcpy(&dst[e], b, 4);
    }
}

static void roundtrip_st(reader *r, unsigned count)
{
    char names[MAXT][200];
    tr_st_out t[MAXT];
    bool valid = true;
    for (unsigned i = 0; i < count; i++) {
        unsigned len = take(r) % 170; /* across the 159-byte limit */
        for (unsigned k = 0; k < len; k++) {
            unsigned c = take(r);
            names[i][k] = (char)(c ? c : 'a'); /* C strings: no NUL inside */
        }
        names[i][len] = '\0';
        t[i].name = names[i];
        t[i].ndim = (int)(take(r) % 5);
        size_t n = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            t[i].shape[d] = take(r) % 9;
            n *= (size_t)t[i].shape[d];
        }
        fill(r, g_data[i], n);
        t[i].data = g_data[i];
        valid = valid && len > 0 && len < 160 && strcmp(names[i], "__metadata__") != 0 &&
                utf8_ok((const unsigned char *)names[i]);
        for (unsigned j = 0; j < i; j++)
            valid = valid && strcmp(names[i], names[j]) != 0;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/t.safetensors", fuzz_dir());
    unlink(path);
    tr_err err = {{0}};
    bool wrote = tr_st_write_atomic(path, t, (int)count, &err);
    FUZZ_ASSERT(wrote == valid, "writer %s a %s list: %s", wrote ? "accepted" : "refused",
                valid ? "valid" : "invalid", err.msg);
    if (!wrote) {
        FUZZ_ASSERT(access(path, F_OK) != 0, "a refused write left a file");
        return;
    }
    tr_st_file f;
    tr_err e = {{0}};
    FUZZ_ASSERT(tr_st_open(&f, path, &e), "the reader refuses what the writer wrote: %s", e.msg);
    FUZZ_ASSERT(f.ntensors == (int)count, "%d tensors read, %u written", f.ntensors, count);
    for (unsigned i = 0; i < count; i++) {
        const tr_st_tensor *g = tr_st_find(&f, t[i].name);
        FUZZ_ASSERT(g && strcmp(g->dtype, "F32") == 0 && g->ndim == t[i].ndim, "tensor %u", i);
        size_t n = 1;
        for (int d = 0; d < g->ndim; d++) {
            FUZZ_ASSERT(g->shape[d] == t[i].shape[d], "tensor %u dim %d", i, d);
            n *= (size_t)g->shape[d];
        }
        FUZZ_ASSERT(g->end - g->begin == 4 * n, "tensor %u bytes", i);
        FUZZ_ASSERT(memcmp(f.map + f.data_start + g->begin, t[i].data, 4 * n) == 0, "tensor %u data", i);
    }
    tr_st_close(&f);
}

static void roundtrip_npy(reader *r)
{
    int ndim = (int)(take(r) % (TR_NPY_MAX_NDIM + 1));
    int64_t shape[TR_NPY_MAX_NDIM];
    size_t n = 1;
    for (int d = 0; d < ndim; d++) {
        shape[d] = take(r) % (ndim > 4 ? 3 : 9);
        n *= (size_t)shape[d];
    }
    fill(r, g_data[0], n);
    char path[128];
    snprintf(path, sizeof path, "%s/a.npy", fuzz_dir());
    tr_err err = {{0}};
    FUZZ_ASSERT(tr_npy_write_atomic(path, ndim, shape, g_data[0], &err), "npy write: %s", err.msg);
    tr_npy f;
    FUZZ_ASSERT(tr_npy_open(&f, path, &err), "the reader refuses what the writer wrote: %s", err.msg);
    FUZZ_ASSERT(f.ndim == ndim, "ndim %d, wrote %d", f.ndim, ndim);
    for (int d = 0; d < ndim; d++)
        FUZZ_ASSERT(f.shape[d] == shape[d], "dim %d", d);
    FUZZ_ASSERT(f.file_size - f.data_off == 4 * n && memcmp(f.map + f.data_off, g_data[0], 4 * n) == 0, "data");
    tr_npy_close(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size, 0};
    unsigned first = take(&r);
    if (first & 1)
        roundtrip_npy(&r);
    else
        roundtrip_st(&r, (first >> 1) % (MAXT + 1));
    return 0;
}
