/*
 * tr_json.c - a minimal strict JSON parser (see tr_json.h).
 *
 * Recursive descent over a byte range with an explicit depth limit, so hostile
 * input can neither overflow the stack nor read past text[len). Nodes live in
 * one growable array and refer to each other by index (the array moves when
 * it grows, so the parser never holds node pointers across a child parse).
 * Decoded strings never exceed their encoded form, so one buffer of len + 1
 * bytes holds every string and its NUL. Integers are accumulated with overflow
 * checks; the double value comes from strtod on a NUL-terminated copy.
 */
#include "tr_json.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TR_JSON_MAX_NODES (1 << 22)

typedef struct parser {
    const unsigned char *s; /* [len] input */
    size_t len, pos;
    tr_json_doc *doc;
    const char *what;
    tr_err *err;
} parser;

static bool fail_at(parser *p, size_t at, const char *msg)
{
    return tr_fail(p->err, "%s is not valid JSON: at byte %zu: %s", p->what, at, msg);
}

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static int new_node(parser *p, tr_json_type t)
{
    tr_json_doc *d = p->doc;
    if (d->nnodes == d->cap) {
        if (d->cap >= TR_JSON_MAX_NODES) {
            fail_at(p, p->pos, "more than 4194304 values; refusing to parse further");
            return -1;
        }
        int ncap = d->cap ? d->cap * 2 : 64;
        tr_json_node *nn = realloc(d->nodes, (size_t)ncap * sizeof *nn);
        if (!nn) {
            fail_at(p, p->pos, "out of memory");
            return -1;
        }
        d->nodes = nn;
        d->cap = ncap;
    }
    int idx = d->nnodes++;
    tr_json_node *n = &d->nodes[idx];
    memset(n, 0, sizeof *n);
    n->type = t;
    n->first = -1;
    n->next = -1;
    return idx;
}

static bool expect_lit(parser *p, const char *lit)
{
    size_t n = strlen(lit);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, lit, n) != 0)
        return fail_at(p, p->pos, "unexpected character (expected a value)");
    p->pos += n;
    return true;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool read_hex4(parser *p, unsigned *out)
{
    if (p->len - p->pos < 4)
        return fail_at(p, p->pos, "truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->s[p->pos + (size_t)i]);
        if (h < 0)
            return fail_at(p, p->pos + (size_t)i, "bad hex digit in \\u escape");
        v = v * 16 + (unsigned)h;
    }
    p->pos += 4;
    *out = v;
    return true;
}

/* Length of the valid UTF-8 sequence at s[0..avail), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80)
        return 1;
    else if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        if (c == 0xF4)
            hi = 0x8F; /* > U+10FFFF */
    } else
        return 0;
    if (avail < n)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

size_t tr_json_utf8_check(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t n = utf8_len((const unsigned char *)s + i, len - i);
        if (n == 0)
            return i;
        i += n;
    }
    return len;
}

static void put_utf8(char *out, size_t *o, unsigned cp)
{
    if (cp < 0x80) {
        out[(*o)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*o)++] = (char)(0xC0 | (cp >> 6));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*o)++] = (char)(0xE0 | (cp >> 12));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*o)++] = (char)(0xF0 | (cp >> 18));
        out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* Parse a string at p->pos (which is at '"'); decoded into doc->strbuf. */
static bool parse_string(parser *p, const char **out, size_t *out_len)
{
    tr_json_doc *d = p->doc;
    char *buf = d->strbuf + d->strused;
    size_t o = 0;
    p->pos++; /* opening quote */
    for (;;) {
        if (p->pos >= p->len)
            return fail_at(p, p->pos, "unterminated string");
        unsigned char c = p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20)
            return fail_at(p, p->pos, "control character in string (must be escaped)");
        if (c == '\\') {
            if (p->pos + 1 >= p->len)
                return fail_at(p, p->pos, "unterminated escape");
            unsigned char e = p->s[p->pos + 1];
            p->pos += 2;
            switch (e) {
            case '"': buf[o++] = '"'; break;
            case '\\': buf[o++] = '\\'; break;
            case '/': buf[o++] = '/'; break;
            case 'b': buf[o++] = '\b'; break;
            case 'f': buf[o++] = '\f'; break;
            case 'n': buf[o++] = '\n'; break;
            case 'r': buf[o++] = '\r'; break;
            case 't': buf[o++] = '\t'; break;
            case 'u': {
                unsigned cp;
                size_t at = p->pos - 2;
                if (!read_hex4(p, &cp))
                    return false;
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return fail_at(p, at, "lone low surrogate in \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
                        return fail_at(p, at, "high surrogate not followed by a \\u low surrogate");
                    p->pos += 2;
                    if (!read_hex4(p, &lo))
                        return false;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return fail_at(p, at, "high surrogate not followed by a low surrogate");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                /* encoded form: 6 or 12 bytes; decoded at most 4, so buf cannot overrun */
                put_utf8(buf, &o, cp);
                break;
            }
            default:
                return fail_at(p, p->pos - 2, "invalid escape in string");
            }
            continue;
        }
        size_t n = utf8_len(p->s + p->pos, p->len - p->pos);
        if (n == 0)
            return fail_at(p, p->pos, "invalid UTF-8 in string");
        memcpy(buf + o, p->s + p->pos, n);
        o += n;
        p->pos += n;
    }
    buf[o] = '\0';
    d->strused += o + 1;
    *out = buf;
    *out_len = o;
    return true;
}

static bool parse_number(parser *p, int idx)
{
    size_t start = p->pos;
    const unsigned char *s = p->s;
    size_t i = p->pos;
    bool neg = false, is_int = true;
    if (i < p->len && s[i] == '-') {
        neg = true;
        i++;
    }
    if (i >= p->len || s[i] < '0' || s[i] > '9')
        return fail_at(p, i, "expected a digit");
    uint64_t mag = 0;
    bool overflow = false;
    if (s[i] == '0') {
        i++;
        if (i < p->len && s[i] >= '0' && s[i] <= '9')
            return fail_at(p, i, "leading zero in number");
    } else {
        while (i < p->len && s[i] >= '0' && s[i] <= '9') {
            unsigned dgt = (unsigned)(s[i] - '0');
            if (mag > (UINT64_MAX - dgt) / 10)
                overflow = true;
            else
                mag = mag * 10 + dgt;
            i++;
        }
    }
    if (i < p->len && s[i] == '.') {
        is_int = false;
        i++;
        if (i >= p->len || s[i] < '0' || s[i] > '9')
            return fail_at(p, i, "expected a digit after '.'");
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        is_int = false;
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= p->len || s[i] < '0' || s[i] > '9')
            return fail_at(p, i, "expected a digit in exponent");
        while (i < p->len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    p->pos = i;

    tr_json_node *n = &p->doc->nodes[idx];
    if (is_int && !overflow) {
        if (neg && mag <= (uint64_t)INT64_MAX + 1) {
            n->is_int = true;
            n->ival = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
        } else if (!neg && mag <= (uint64_t)INT64_MAX) {
            n->is_int = true;
            n->ival = (int64_t)mag;
        }
    }
    /* the double value, from a NUL-terminated copy of the literal */
    size_t nlen = i - start;
    char small[64];
    char *tmp = nlen < sizeof small ? small : malloc(nlen + 1);
    if (!tmp)
        return fail_at(p, start, "out of memory");
    memcpy(tmp, s + start, nlen);
    tmp[nlen] = '\0';
    n->num = strtod(tmp, NULL);
    if (tmp != small)
        free(tmp);
    return true;
}

static int parse_value(parser *p, int depth);

static void link_child(parser *p, int parent, int *last, int child)
{
    tr_json_node *nodes = p->doc->nodes;
    if (*last < 0)
        nodes[parent].first = child;
    else
        nodes[*last].next = child;
    *last = child;
    nodes[parent].count++;
}

static int parse_container(parser *p, int depth, bool is_obj)
{
    if (depth >= TR_JSON_MAX_DEPTH) {
        fail_at(p, p->pos, "nesting deeper than 64 levels");
        return -1;
    }
    int idx = new_node(p, is_obj ? TR_JSON_OBJECT : TR_JSON_ARRAY);
    if (idx < 0)
        return -1;
    char close = is_obj ? '}' : ']';
    int last = -1;
    p->pos++; /* '{' or '[' */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == (unsigned char)close) {
        p->pos++;
        return idx;
    }
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        if (is_obj) {
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != '"') {
                fail_at(p, p->pos, "expected a string key in object");
                return -1;
            }
            if (!parse_string(p, &key, &key_len))
                return -1;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                fail_at(p, p->pos, "expected ':' after object key");
                return -1;
            }
            p->pos++;
        }
        int child = parse_value(p, depth + 1);
        if (child < 0)
            return -1;
        if (is_obj) {
            p->doc->nodes[child].key = key;
            p->doc->nodes[child].key_len = key_len;
        }
        link_child(p, idx, &last, child);
        skip_ws(p);
        if (p->pos >= p->len) {
            fail_at(p, p->pos, is_obj ? "unterminated object" : "unterminated array");
            return -1;
        }
        unsigned char c = p->s[p->pos];
        if (c == ',') {
            p->pos++;
            continue;
        }
        if (c == (unsigned char)close) {
            p->pos++;
            return idx;
        }
        fail_at(p, p->pos, is_obj ? "expected ',' or '}' in object" : "expected ',' or ']' in array");
        return -1;
    }
}

static int parse_value(parser *p, int depth)
{
    skip_ws(p);
    if (p->pos >= p->len) {
        fail_at(p, p->pos, "unexpected end of text (expected a value)");
        return -1;
    }
    unsigned char c = p->s[p->pos];
    int idx;
    switch (c) {
    case '{':
        return parse_container(p, depth, true);
    case '[':
        return parse_container(p, depth, false);
    case '"': {
        idx = new_node(p, TR_JSON_STRING);
        if (idx < 0)
            return -1;
        const char *str;
        size_t slen;
        if (!parse_string(p, &str, &slen))
            return -1;
        p->doc->nodes[idx].str = str;
        p->doc->nodes[idx].str_len = slen;
        return idx;
    }
    case 't':
        idx = new_node(p, TR_JSON_TRUE);
        return idx >= 0 && expect_lit(p, "true") ? idx : -1;
    case 'f':
        idx = new_node(p, TR_JSON_FALSE);
        return idx >= 0 && expect_lit(p, "false") ? idx : -1;
    case 'n':
        idx = new_node(p, TR_JSON_NULL);
        return idx >= 0 && expect_lit(p, "null") ? idx : -1;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            idx = new_node(p, TR_JSON_NUMBER);
            return idx >= 0 && parse_number(p, idx) ? idx : -1;
        }
        fail_at(p, p->pos, "unexpected character (expected a value)");
        return -1;
    }
}

bool tr_json_parse(tr_json_doc *doc, const char *text, size_t len, const char *what, tr_err *err)
{
    memset(doc, 0, sizeof *doc);
    parser p = {(const unsigned char *)text, len, 0, doc, what ? what : "JSON text", err};
    if (len == SIZE_MAX)
        return fail_at(&p, 0, "text too large");
    doc->strbuf = malloc(len + 1);
    if (!doc->strbuf)
        return fail_at(&p, 0, "out of memory");
    int root = parse_value(&p, 0);
    if (root >= 0) {
        skip_ws(&p);
        if (p.pos == p.len)
            return true;
        fail_at(&p, p.pos, "unexpected text after the value");
    }
    tr_json_free(doc);
    return false;
}

void tr_json_free(tr_json_doc *doc)
{
    free(doc->nodes);
    free(doc->strbuf);
    memset(doc, 0, sizeof *doc);
}

const tr_json_node *tr_json_root(const tr_json_doc *doc)
{
    return doc->nnodes > 0 ? &doc->nodes[0] : NULL;
}

const tr_json_node *tr_json_first(const tr_json_doc *doc, const tr_json_node *n)
{
    return n && n->first >= 0 ? &doc->nodes[n->first] : NULL;
}

const tr_json_node *tr_json_next(const tr_json_doc *doc, const tr_json_node *n)
{
    return n && n->next >= 0 ? &doc->nodes[n->next] : NULL;
}

const tr_json_node *tr_json_get(const tr_json_doc *doc, const tr_json_node *obj, const char *key)
{
    if (!obj || obj->type != TR_JSON_OBJECT)
        return NULL;
    size_t klen = strlen(key);
    for (const tr_json_node *c = tr_json_first(doc, obj); c; c = tr_json_next(doc, c))
        if (c->key_len == klen && memcmp(c->key, key, klen) == 0)
            return c;
    return NULL;
}

const char *tr_json_type_name(tr_json_type t)
{
    switch (t) {
    case TR_JSON_NULL: return "null";
    case TR_JSON_FALSE: return "false";
    case TR_JSON_TRUE: return "true";
    case TR_JSON_NUMBER: return "number";
    case TR_JSON_STRING: return "string";
    case TR_JSON_ARRAY: return "array";
    case TR_JSON_OBJECT: return "object";
    }
    return "?";
}
