/*
 * tr_json.h - a minimal strict JSON parser (RFC 8259), enough for safetensors
 * headers.
 *
 * Design: tr_json_parse() reads the whole text once into a flat array of
 * nodes (the root is node 0); containers link their children by index
 * (first/next), so lookups are linear scans, which is fine for headers of a
 * few thousand entries. Strings are decoded (escapes, surrogate pairs) into one
 * buffer the size of the input, each NUL-terminated, with their byte length
 * kept beside them because JSON strings may contain \u0000. Strict means:
 * exactly one value, surrounded only by JSON whitespace; no comments, no
 * trailing commas, no leading zeros, no control characters in strings, valid
 * UTF-8 only, no lone surrogates, nesting at most TR_JSON_MAX_DEPTH. Duplicate
 * object keys are kept (callers that care, like tr_safetensors, check them).
 * Errors name the caller's `what` (a file path) and the byte offset.
 */
#ifndef TR_JSON_H
#define TR_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tr_err.h"

#define TR_JSON_MAX_DEPTH 64

typedef enum tr_json_type {
    TR_JSON_NULL,
    TR_JSON_FALSE,
    TR_JSON_TRUE,
    TR_JSON_NUMBER,
    TR_JSON_STRING,
    TR_JSON_ARRAY,
    TR_JSON_OBJECT
} tr_json_type;

typedef struct tr_json_node {
    tr_json_type type;
    const char *key;   /* object members: decoded key, NUL-terminated; else NULL */
    size_t key_len;    /* bytes in key (may contain NUL) */
    const char *str;   /* strings: decoded value, NUL-terminated; else NULL */
    size_t str_len;    /* bytes in str */
    bool is_int;       /* numbers: literal has no fraction/exponent and fits int64 */
    int64_t ival;      /* numbers: the value when is_int */
    double num;        /* numbers: the value as a double (strtod) */
    int count;         /* arrays/objects: number of children */
    int first;         /* arrays/objects: index of the first child, -1 if none */
    int next;          /* index of the next sibling, -1 if last */
} tr_json_node;

typedef struct tr_json_doc {
    tr_json_node *nodes; /* [nnodes], nodes[0] is the root */
    int nnodes, cap;
    char *strbuf;        /* [input length + 1] decoded strings */
    size_t strused;
} tr_json_doc;

/* Parse text[0..len) (need not be NUL-terminated). On failure *doc is left
 * empty (safe to tr_json_free) and err says "<what>: ... at byte N: ...". */
bool tr_json_parse(tr_json_doc *doc, const char *text, size_t len, const char *what, tr_err *err);
void tr_json_free(tr_json_doc *doc);

const tr_json_node *tr_json_root(const tr_json_doc *doc);
/* First child / next sibling, NULL at the end. */
const tr_json_node *tr_json_first(const tr_json_doc *doc, const tr_json_node *n);
const tr_json_node *tr_json_next(const tr_json_doc *doc, const tr_json_node *n);
/* First member of object `obj` with key `key` (a C string), NULL if absent or obj is not an object. */
const tr_json_node *tr_json_get(const tr_json_doc *doc, const tr_json_node *obj, const char *key);
/* The offset of the first byte of s[0..len) that does not start a valid UTF-8 sequence (the
 * same rule the parser applies: no overlongs, surrogates or code points above U+10FFFF); len
 * when all of it is valid. Writers use it to refuse text the parser would refuse. */
size_t tr_json_utf8_check(const char *s, size_t len);
/* "object", "array", "string", "number", "true", "false" or "null". */
const char *tr_json_type_name(tr_json_type t);

#endif
