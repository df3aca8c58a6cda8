/*
 * tr_npy.c - .npy reader and atomic writer (see tr_npy.h).
 *
 * The header is a Python literal, so it is parsed by a small recursive-descent
 * parser for the subset NumPy writes (strings in either quote, True/False/None,
 * integers with an optional Python 2 'L' suffix, tuples, lists, dicts), with a
 * depth limit, never reading past the header bytes. Only the top-level dict's
 * three keys are kept; anything else (structured descr lists, extra keys) is
 * reported by name. Sizes use overflow-checked uint64 arithmetic. Mapping,
 * atomic writes and block copies come from the shared helpers in
 * tr_safetensors.c.
 */
#include "tr_npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tr_safetensors.h"

typedef unsigned long long ull;

#define PY_MAX_DEPTH 16

/* ---- Python literal subset ----------------------------------------------------- */

typedef enum { PY_STR, PY_BOOL, PY_NONE, PY_INT, PY_TUPLE, PY_LIST, PY_DICT } py_kind;

typedef struct pyval {
    py_kind kind;
    const char *s; /* PY_STR: raw contents (escapes not processed), not NUL-terminated */
    size_t slen;
    bool b;          /* PY_BOOL */
    int64_t ival;    /* PY_INT */
    int n;           /* PY_TUPLE/PY_LIST: number of items */
    bool all_int;    /* PY_TUPLE: every item is a PY_INT */
    int64_t items[TR_NPY_MAX_NDIM]; /* PY_TUPLE: the first TR_NPY_MAX_NDIM int items */
} pyval;

typedef struct pyparser {
    const char *s; /* [len] header text */
    size_t len, pos;
    const char *path;
    tr_err *err;
} pyparser;

static bool py_fail(pyparser *p, const char *msg)
{
    return tr_fail(p->err, "%s: .npy header is not a valid Python dict literal: at byte %zu of the header: %s",
                   p->path, p->pos, msg);
}

static void py_ws(pyparser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
                               p->s[p->pos] == '\r'))
        p->pos++;
}

static bool py_peek(pyparser *p, char c)
{
    py_ws(p);
    return p->pos < p->len && p->s[p->pos] == c;
}

static bool py_value(pyparser *p, pyval *v, int depth);

/* Items of a tuple/list/dict up to `close`; `keys` for dicts. */
static bool py_seq(pyparser *p, pyval *v, char close, bool dict, int depth)
{
    p->pos++; /* opening bracket */
    v->n = 0;
    v->all_int = true;
    for (;;) {
        if (py_peek(p, close)) {
            p->pos++;
            return true;
        }
        pyval item;
        if (dict) {
            if (!py_value(p, &item, depth + 1))
                return false;
            if (!py_peek(p, ':'))
                return py_fail(p, "expected ':' after a dict key");
            p->pos++;
        }
        if (!py_value(p, &item, depth + 1))
            return false;
        if (!dict) {
            if (item.kind != PY_INT)
                v->all_int = false;
            else if (v->n < TR_NPY_MAX_NDIM)
                v->items[v->n] = item.ival;
        }
        v->n++;
        if (py_peek(p, ',')) {
            p->pos++;
            continue;
        }
        if (py_peek(p, close)) {
            p->pos++;
            /* (x) without a comma is just x in Python, not a tuple */
            if (close == ')' && v->n == 1 && !dict)
                return py_fail(p, "a one-element tuple needs a trailing comma, e.g. (4,)");
            return true;
        }
        return py_fail(p, "expected ',' or a closing bracket");
    }
}

static bool py_word(pyparser *p, const char *w)
{
    size_t n = strlen(w);
    if (p->len - p->pos >= n && memcmp(p->s + p->pos, w, n) == 0) {
        p->pos += n;
        return true;
    }
    return false;
}

static bool py_value(pyparser *p, pyval *v, int depth)
{
    memset(v, 0, sizeof *v);
    if (depth > PY_MAX_DEPTH)
        return py_fail(p, "nested too deeply");
    py_ws(p);
    if (p->pos >= p->len)
        return py_fail(p, "unexpected end of header");
    char c = p->s[p->pos];
    if (c == '\'' || c == '"') {
        size_t start = ++p->pos;
        while (p->pos < p->len && p->s[p->pos] != c) {
            if (p->s[p->pos] == '\\')
                p->pos++;
            if (p->pos < p->len && p->s[p->pos] == '\n')
                return py_fail(p, "newline in string");
            p->pos++;
        }
        if (p->pos >= p->len)
            return py_fail(p, "unterminated string");
        v->kind = PY_STR;
        v->s = p->s + start;
        v->slen = p->pos - start;
        p->pos++;
        return true;
    }
    if (c == '(') {
        v->kind = PY_TUPLE;
        return py_seq(p, v, ')', false, depth);
    }
    if (c == '[') {
        v->kind = PY_LIST;
        return py_seq(p, v, ']', false, depth);
    }
    if (c == '{') {
        v->kind = PY_DICT;
        return py_seq(p, v, '}', true, depth);
    }
    if (py_word(p, "True")) {
        v->kind = PY_BOOL;
        v->b = true;
        return true;
    }
    if (py_word(p, "False")) {
        v->kind = PY_BOOL;
        return true;
    }
    if (py_word(p, "None")) {
        v->kind = PY_NONE;
        return true;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        bool neg = c == '-';
        if (neg)
            p->pos++;
        if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9')
            return py_fail(p, "expected a digit");
        uint64_t mag = 0;
        while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
            unsigned d = (unsigned)(p->s[p->pos] - '0');
            if (mag > (uint64_t)(INT64_MAX - d) / 10)
                return py_fail(p, "integer too large");
            mag = mag * 10 + d;
            p->pos++;
        }
        if (p->pos < p->len && (p->s[p->pos] == 'L' || p->s[p->pos] == 'l'))
            p->pos++; /* Python 2 long */
        if (p->pos < p->len && (p->s[p->pos] == '.' || p->s[p->pos] == 'e' || p->s[p->pos] == 'E'))
            return py_fail(p, "expected an integer, found a float");
        v->kind = PY_INT;
        v->ival = neg ? -(int64_t)mag : (int64_t)mag;
        return true;
    }
    return py_fail(p, "unexpected character");
}

static const char *py_kind_name(py_kind k)
{
    switch (k) {
    case PY_STR: return "a string";
    case PY_BOOL: return "a bool";
    case PY_NONE: return "None";
    case PY_INT: return "an integer";
    case PY_TUPLE: return "a tuple";
    case PY_LIST: return "a list";
    case PY_DICT: return "a dict";
    }
    return "?";
}

static bool str_is(const pyval *v, const char *lit)
{
    return v->kind == PY_STR && v->slen == strlen(lit) && memcmp(v->s, lit, v->slen) == 0;
}

static const char *descr_meaning(const pyval *d)
{
    static const struct {
        const char *descr, *meaning;
    } known[] = {
        {"<f8", "float64"}, {"<f2", "float16"}, {"<i8", "int64"},   {"<i4", "int32"},  {"<i2", "int16"},
        {"|i1", "int8"},    {"|u1", "uint8"},   {"<u4", "uint32"},  {"<u8", "uint64"}, {"|b1", "bool"},
        {"<c8", "complex64"}, {">f4", "big-endian float32"},        {">f8", "big-endian float64"},
        {"<u2", "uint16"},  {">i4", "big-endian int32"},  {"<f4", "float32"},
        {"<V2", "bfloat16 or other raw 2-byte type"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (str_is(d, known[i].descr))
            return known[i].meaning;
    return "another dtype";
}

/* The descr a reader accepts: the literal, its meaning, the numpy conversion that fixes a file. */
typedef struct npy_want {
    const char *descr, *meaning, *name, *numpy;
} npy_want;

static const npy_want npy_f4 = {"<f4", "little-endian float32", "float32", "np.float32"};
static const npy_want npy_i4 = {"<i4", "little-endian int32", "int32", "np.int32"};

/* ---- header ------------------------------------------------------------------- */

static void fmt_tuple(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t o = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "%s)", ndim == 1 ? "," : "");
}

static bool parse_header(tr_npy *f, const char *h, size_t hlen, const npy_want *want, tr_err *err)
{
    const char *path = f->path;
    pyparser p = {h, hlen, 0, path, err};
    py_ws(&p);
    if (p.pos >= hlen || h[p.pos] != '{')
        return tr_fail(err, "%s: .npy header is not a dict literal (expected '{' at byte %zu of the header): "
                            "corrupt file or not written by np.save",
                       path, p.pos);
    p.pos++;
    bool have_descr = false, have_fo = false, have_shape = false;
    pyval descr = {0}, fo = {0}, shape = {0};
    for (;;) {
        if (py_peek(&p, '}')) {
            p.pos++;
            break;
        }
        pyval key, val;
        if (!py_value(&p, &key, 1))
            return false;
        if (!py_peek(&p, ':'))
            return py_fail(&p, "expected ':' after a dict key");
        p.pos++;
        if (!py_value(&p, &val, 1))
            return false;
        if (str_is(&key, "descr") && !have_descr) {
            descr = val;
            have_descr = true;
        } else if (str_is(&key, "fortran_order") && !have_fo) {
            fo = val;
            have_fo = true;
        } else if (str_is(&key, "shape") && !have_shape) {
            shape = val;
            have_shape = true;
        } else if (key.kind == PY_STR) {
            return tr_fail(err, "%s: .npy header has an unexpected or repeated key '%.*s' (expected exactly descr, "
                                "fortran_order, shape)",
                           path, (int)(key.slen > 40 ? 40 : key.slen), key.s);
        } else {
            return tr_fail(err, "%s: .npy header has a key that is %s, not a string", path, py_kind_name(key.kind));
        }
        if (py_peek(&p, ',')) {
            p.pos++;
            continue;
        }
        if (py_peek(&p, '}')) {
            p.pos++;
            break;
        }
        return py_fail(&p, "expected ',' or '}'");
    }
    py_ws(&p);
    if (p.pos != hlen)
        return py_fail(&p, "unexpected text after the dict");
    if (!have_descr || !have_fo || !have_shape)
        return tr_fail(err, "%s: .npy header lacks the '%s' key (needs descr, fortran_order and shape)", path,
                       !have_descr ? "descr" : !have_fo ? "fortran_order" : "shape");

    if (descr.kind != PY_STR)
        return tr_fail(err, "%s: descr is %s (a structured or compound dtype); only '%s' (%s) "
                            "is supported: save a plain %s array, arr.astype(%s)",
                       path, py_kind_name(descr.kind), want->descr, want->meaning, want->name, want->numpy);
    if (!str_is(&descr, want->descr)) {
        bool swapped = descr.slen == 3 && descr.s[0] == '>' && memcmp(descr.s + 1, want->descr + 1, 2) == 0;
        return tr_fail(err, "%s: descr is '%.*s' (%s); only '%s' (%s) is supported: convert "
                            "with arr.astype(%s%s%s) before np.save",
                       path, (int)(descr.slen > 20 ? 20 : descr.slen), descr.s, descr_meaning(&descr), want->descr,
                       want->meaning, swapped ? "'" : "", swapped ? want->descr : want->numpy, swapped ? "'" : "");
    }
    if (fo.kind != PY_BOOL)
        return tr_fail(err, "%s: fortran_order is %s, expected True or False", path, py_kind_name(fo.kind));
    if (fo.b)
        return tr_fail(err, "%s: fortran_order is True (column-major data); only C order is supported: save "
                            "np.ascontiguousarray(arr) instead",
                       path);
    if (shape.kind != PY_TUPLE || !shape.all_int)
        return tr_fail(err, "%s: shape is %s%s; expected a tuple of non-negative integers", path,
                       py_kind_name(shape.kind), shape.kind == PY_TUPLE ? " with non-integer items" : "");
    if (shape.n > TR_NPY_MAX_NDIM)
        return tr_fail(err, "%s: shape has %d dimensions; at most %d are supported", path, shape.n,
                       TR_NPY_MAX_NDIM);
    for (int i = 0; i < shape.n; i++)
        if (shape.items[i] < 0)
            return tr_fail(err, "%s: shape[%d] is %lld (negative): corrupt header", path, i,
                           (long long)shape.items[i]);
    f->ndim = shape.n;
    memcpy(f->shape, shape.items, sizeof(int64_t) * (size_t)shape.n);
    return true;
}

static bool npy_open(tr_npy *f, const char *path, const npy_want *want, tr_err *err)
{
    if (strlen(path) >= sizeof f->path)
        return tr_fail(err, "%.200s...: path too long (%zu bytes, at most %zu)", path, strlen(path),
                       sizeof f->path - 1);
    strcpy(f->path, path);
    if (!tr_st_host_le(path, err))
        return false;
    if (!tr_st_map_file(path, ".npy file", &f->fd, &f->file_size, &f->map, err))
        return false;
    const unsigned char *m = f->map;
    if (f->file_size < 6 || memcmp(m, "\x93NUMPY", 6) != 0) {
        bool zip = f->file_size >= 2 && m[0] == 'P' && m[1] == 'K';
        return tr_fail(err, "%s: bad magic: not a .npy file (expected it to start with \\x93NUMPY)%s", path,
                       zip ? "; it looks like a zip (.npz) archive: save one array with np.save(path, arr)" : "");
    }
    if (f->file_size < 10)
        return tr_fail(err, "%s: file is %llu bytes, shorter than a .npy preamble: truncated", path,
                       (ull)f->file_size);
    int major = m[6], minor = m[7];
    uint64_t hlen, hstart;
    if (major == 1 && minor == 0) {
        hlen = (uint64_t)m[8] | (uint64_t)m[9] << 8;
        hstart = 10;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (f->file_size < 12)
            return tr_fail(err, "%s: file is %llu bytes, shorter than a .npy v%d.0 preamble: truncated", path,
                           (ull)f->file_size, major);
        hlen = (uint64_t)m[8] | (uint64_t)m[9] << 8 | (uint64_t)m[10] << 16 | (uint64_t)m[11] << 24;
        hstart = 12;
    } else {
        return tr_fail(err, "%s: unsupported .npy format version %d.%d (supported: 1.0, 2.0, 3.0)", path, major,
                       minor);
    }
    if (hlen > f->file_size - hstart)
        return tr_fail(err, "%s: header length %llu is larger than the rest of the file (%llu bytes): truncated "
                            "file",
                       path, (ull)hlen, (ull)(f->file_size - hstart));
    if (!parse_header(f, (const char *)m + hstart, (size_t)hlen, want, err))
        return false;
    f->data_off = hstart + hlen;
    uint64_t nelem = 1, need;
    bool ok = true;
    for (int i = 0; i < f->ndim; i++) {
        uint64_t d = (uint64_t)f->shape[i];
        if (d == 0) {
            nelem = 0;
            ok = true;
            break;
        }
        if (ok && (d > UINT64_MAX / nelem))
            ok = false;
        else if (ok)
            nelem *= d;
    }
    char sb[160];
    fmt_tuple(sb, sizeof sb, f->ndim, f->shape);
    if (!ok || nelem > UINT64_MAX / 4)
        return tr_fail(err, "%s: shape %s has too many elements to address: corrupt header", path, sb);
    need = nelem * 4;
    uint64_t have = f->file_size - f->data_off;
    if (have < need)
        return tr_fail(err, "%s: truncated data: shape %s of %s needs %llu bytes after the header but the "
                            "file has only %llu (incomplete write or copy? save it again)",
                       path, sb, want->name, (ull)need, (ull)have);
    if (have > need)
        return tr_fail(err, "%s: %llu unexpected bytes after the array data of shape %s: not a plain .npy file "
                            "(np.save writes exactly the data)",
                       path, (ull)(have - need), sb);
    return true;
}

static bool npy_open_as(tr_npy *f, const char *path, const npy_want *want, tr_err *err)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (npy_open(f, path, want, err))
        return true;
    tr_npy_close(f);
    return false;
}

bool tr_npy_open(tr_npy *f, const char *path, tr_err *err)
{
    return npy_open_as(f, path, &npy_f4, err);
}

bool tr_npy_open_i32(tr_npy *f, const char *path, tr_err *err)
{
    return npy_open_as(f, path, &npy_i4, err);
}

bool tr_npy_expect_shape(const tr_npy *f, int ndim, const int64_t *shape, const char *what, const char *dims_names,
                         tr_err *err)
{
    bool same = f->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = f->shape[i] == shape[i];
    if (same)
        return true;
    char got[200], want[200];
    fmt_tuple(got, sizeof got, f->ndim, f->shape);
    fmt_tuple(want, sizeof want, ndim > TR_NPY_MAX_NDIM ? TR_NPY_MAX_NDIM : ndim, shape);
    return tr_fail(err, "%s: %s has shape %s, expected %s%s%s%s: pass an array of the expected shape or "
                        "regenerate with a spec that matches it",
                   f->path, what ? what : "array", got, dims_names ? "(" : "", dims_names ? dims_names : "",
                   dims_names ? ") = " : "", want);
}

bool tr_npy_read_block(const tr_npy *f, int64_t r0, int64_t nr, int64_t c0, int64_t nc, float *dst, int64_t ldd,
                       tr_err *err)
{
    /* 2-D view [rows, cols] = [prod(shape[:-1]), shape[-1]] */
    int64_t cols = f->ndim > 0 ? f->shape[f->ndim - 1] : 1;
    uint64_t rows = 1;
    for (int i = 0; i + 1 < f->ndim; i++) {
        uint64_t d = (uint64_t)f->shape[i];
        if (d != 0 && rows > (uint64_t)INT64_MAX / d)
            return tr_fail(err, "%s: too many rows to address", f->path);
        rows *= d;
    }
    return tr_st_copy_block(f->map + f->data_off, (int64_t)rows, cols, r0, nr, c0, nc, dst, ldd, f->path, "array",
                            err);
}

void tr_npy_close(tr_npy *f)
{
    if (f->map) {
        munmap((void *)f->map, (size_t)f->file_size);
        if (f->fd >= 0)
            close(f->fd);
    }
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

static bool write_atomic(const char *path, int ndim, const int64_t *shape, const void *data, const char *descr,
                         tr_err *err)
{
    if (!tr_st_host_le(path, err))
        return false;
    if (ndim < 0 || ndim > TR_NPY_MAX_NDIM || (ndim > 0 && !shape))
        return tr_fail(err, "%s: ndim %d is outside 0..%d", path, ndim, TR_NPY_MAX_NDIM);
    uint64_t nelem = 1;
    bool zero = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return tr_fail(err, "%s: shape[%d] is %lld (negative)", path, i, (long long)shape[i]);
        if (shape[i] == 0)
            zero = true;
        else if (!zero && nelem > UINT64_MAX / (uint64_t)shape[i])
            return tr_fail(err, "%s: shape has too many elements", path);
        else if (!zero)
            nelem *= (uint64_t)shape[i];
    }
    if (zero)
        nelem = 0;
    if (nelem > SIZE_MAX / 4)
        return tr_fail(err, "%s: array too large for this process (%llu elements)", path, (ull)nelem);
    if (nelem > 0 && !data)
        return tr_fail(err, "%s: data is NULL", path);

    /* preamble (10 bytes) + dict + spaces + '\n', a multiple of 64 bytes */
    char hdr[512];
    char tup[200];
    fmt_tuple(tup, sizeof tup, ndim, shape);
    int n = snprintf(hdr + 10, sizeof hdr - 10, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, tup);
    if (n < 0 || (size_t)n + 10 + 64 >= sizeof hdr)
        return tr_fail(err, "%s: header too long", path);
    size_t total = 10 + (size_t)n + 1;
    total = (total + 63) / 64 * 64;
    memset(hdr + 10 + n, ' ', total - 10 - (size_t)n - 1);
    hdr[total - 1] = '\n';
    size_t hlen = total - 10;
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)(hlen & 0xff);
    hdr[9] = (char)(hlen >> 8);
    const void *parts[2] = {hdr, data};
    size_t lens[2] = {total, (size_t)nelem * 4};
    return tr_st_write_file_atomic(path, parts, lens, 2, err);
}

bool tr_npy_write_atomic(const char *path, int ndim, const int64_t *shape, const float *data, tr_err *err)
{
    return write_atomic(path, ndim, shape, data, "<f4", err);
}

bool tr_npy_write_i32_atomic(const char *path, int ndim, const int64_t *shape, const int32_t *data, tr_err *err)
{
    return write_atomic(path, ndim, shape, data, "<i4", err);
}
