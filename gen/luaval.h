/*
 * luaval.h - values copied out of a Lua table with raw accesses, and how
 * messages show them: what the two Lua-file readers, spec.c (model specs) and
 * machine.c (machine files), have in common.
 *
 * Each reader keeps its own key schema, its walk over the returned table and
 * its validation. This module holds what does not depend on the schema's
 * meaning: the plain C copy of one value (tg_lval) and how it is shown in a
 * message ("string \"x\"", "a table"), the line-per-problem report of err.h,
 * unknown keys (noted while the table is walked, then reported sorted, with a
 * "did you mean" from a schema described by tg_lval_schema), and the name key
 * both files have. Nothing here runs user code: values are read with raw
 * accesses inside the sandbox's collect callback (sandbox.h).
 */
#ifndef TG_LUAVAL_H
#define TG_LUAVAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include <lua.h>

#include "err.h"

#define TG_LVAL_MAX_KEYS 12    /* known keys of one table of a schema */
#define TG_LVAL_MAX_UNKNOWN 32 /* unknown keys listed one by one; the rest are only counted */
#define TG_NAME_MAX 100        /* the longest name (spec and machine names make paths) */
#define TG_NAME_RULE "use 1 to 100 characters from A-Z a-z 0-9 _ . - (not only dots)"

/* One value copied out of a table. type is a LUA_T* code, LUA_TNONE if absent. */
typedef struct tg_lval {
    int type;
    int is_int;         /* numbers: a Lua integer */
    long long i;        /* numbers, when is_int */
    double n;           /* numbers, when !is_int */
    int b;              /* booleans */
    size_t slen;        /* strings: full length */
    char s[128];        /* strings: the first bytes, NUL-terminated */
} tg_lval;

/* Where a file's problems go: each is one line "<path>: <message>" in err, counted in nfail. */
typedef struct tg_lval_report {
    const char *path;   /* file name used in every message */
    tg_err *err;
    int nfail;
} tg_lval_report;

/* A file's keys: its tables (level 0 is the one the chunk returns) and the known keys of each. */
typedef struct tg_lval_schema {
    int nlevels;
    const char *const *prefix;                     /* [level]: "" or "mesh.", before a key in messages */
    const char *const *table;                      /* [level]: "the spec table", "mesh", in messages */
    const int *nkeys;                              /* [level]: known keys */
    const char *const (*keys)[TG_LVAL_MAX_KEYS];   /* [level][k] */
    bool prefix_match;  /* "did you mean" also offers a known key that starts with the unknown one (4+ chars) */
} tg_lval_schema;

/* A key that is not in the schema (or not a string), for sorted reporting. */
typedef struct tg_lval_bad_key {
    int level;
    int not_name;       /* the key is not a string */
    char shown[96];     /* printable form */
} tg_lval_bad_key;

typedef struct tg_lval_unknown {
    tg_lval_bad_key key[TG_LVAL_MAX_UNKNOWN];
    int n;              /* stored in key[] */
    int total;          /* found, including those not stored */
} tg_lval_unknown;

/* ---- copying values (Lua side: raw accesses, no metamethod runs) ---------- */

/* Copy the value at idx into v: numbers, booleans, the first bytes of strings; only the type of the rest. */
void tg_lval_store(lua_State *L, int idx, tg_lval *v);

/* The pair lua_next left at -2 (key) and -1 (value), in a table at level of s: a known key's value is
 * stored in vals[slot] and slot returned; any other key (not a string, embedded NUL) is noted in u and -1
 * returned. The stack is left as it was. */
int tg_lval_take(const tg_lval_schema *s, lua_State *L, int level, tg_lval *vals, tg_lval_unknown *u);

/* What a chunk returned instead of a table, for "... must return a table, got <what>": "nothing" for nil. */
void tg_lval_describe_returned(lua_State *L, int idx, char *out, size_t cap);

/* ---- reading and showing values (plain C) --------------------------------- */

/* Is v the string lit, byte for byte? Lengths are compared, so "train\0x" is not "train". */
bool tg_lval_str_is(const tg_lval *v, const char *lit);

/* Bytes of a string value kept in v->s. */
size_t tg_lval_stored_len(const tg_lval *v);

/* A number value as a double. */
double tg_lval_num(const tg_lval *v);

/* Quote s (len bytes, of which the first stored ones are in s) for a message: at most 40 bytes, escaped. */
void tg_lval_quote(char *out, size_t cap, const char *s, size_t stored, size_t len);

/* The number itself, for "<field> = <value>". */
void tg_lval_show_number(char *out, size_t cap, const tg_lval *v);

/* The value with its type, for "..., got <what>": "string \"x\"", "boolean true", "a table". */
void tg_lval_describe(char *out, size_t cap, const tg_lval *v);

/* ---- messages --------------------------------------------------------------- */

/* Record "<path>: <formatted>" in r->err and count it. */
void tg_lval_fail(tg_lval_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tg_lval_vfail(tg_lval_report *r, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Report the unknown keys in u, sorted by level and then by name so that messages do not depend on Lua's
 * hash order, each with a "did you mean" or the keys of its table; then how many were not listed. */
void tg_lval_report_unknown(tg_lval_report *r, const tg_lval_schema *s, tg_lval_unknown *u);

/* 1 to TG_NAME_MAX characters from A-Z a-z 0-9 _ . -, not only dots, no NUL. */
bool tg_name_ok(const char *s, size_t len);

/* The name key v of a file (LUA_TNONE when the file sets none: then the file's stem, r->path without its
 * directory and ".lua"). what ("model") and file ("spec") word the messages, setter ("spec", "file") says
 * who sets no name, example is a valid name. A valid name is copied to out (TG_NAME_MAX + 1 bytes at
 * least); otherwise one message is reported and out is left alone. */
void tg_lval_name(tg_lval_report *r, const tg_lval *v, const char *what, const char *setter, const char *file,
                  const char *example, char *out);

#endif
