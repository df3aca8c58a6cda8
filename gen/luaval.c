/*
 * luaval.c - values copied out of a Lua table with raw accesses, and how
 * messages show them (luaval.h): the code spec.c and machine.c share.
 *
 * The Lua side is small on purpose: tg_lval_store, tg_lval_take and the
 * unknown-key note read a value or key with lua_type/lua_to* on values that
 * are already numbers, strings or booleans (no conversion, no metamethod, no
 * allocation), inside the sandbox's collect callback. Everything after that
 * is plain C on tg_lval copies. The message texts here are part of both
 * readers' output (tests/specs/bad/, test_spec.c and test_machine.c
 * check them byte for byte), so a change to one changes both files' messages.
 * "Did you mean" is the closest known key of the same table within an
 * optimal-string-alignment distance of 2 (with tg_lval_schema.prefix_match, a
 * known key that starts with the unknown one counts as distance 0), else the
 * same key in another table (model.q -> mesh.q).
 */
#include "luaval.h"

#include <stdio.h>
#include <string.h>

/* ---- copying values ---------------------------------------------------------- */

void tg_lval_store(lua_State *L, int idx, tg_lval *v)
{
    memset(v, 0, sizeof *v);
    v->type = lua_type(L, idx);
    switch (v->type) {
    case LUA_TNUMBER:
        v->is_int = lua_isinteger(L, idx);
        if (v->is_int)
            v->i = (long long)lua_tointeger(L, idx);
        else
            v->n = (double)lua_tonumber(L, idx);
        break;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len); /* a string already: no conversion */
        size_t keep = len < sizeof v->s - 1 ? len : sizeof v->s - 1;
        memcpy(v->s, s, keep);
        v->s[keep] = '\0';
        v->slen = len;
        break;
    }
    case LUA_TBOOLEAN:
        v->b = lua_toboolean(L, idx);
        break;
    default:
        break;
    }
}

static void note_bad_key(tg_lval_unknown *u, lua_State *L, int level, int kidx)
{
    u->total++;
    if (u->n >= TG_LVAL_MAX_UNKNOWN)
        return;
    tg_lval_bad_key *b = &u->key[u->n++];
    b->level = level;
    b->not_name = lua_type(L, kidx) != LUA_TSTRING;
    if (!b->not_name) {
        size_t len;
        const char *s = lua_tolstring(L, kidx, &len);
        size_t o = 0;
        for (size_t k = 0; k < len && o + 4 < sizeof b->shown; k++) {
            unsigned char ch = (unsigned char)s[k];
            b->shown[o++] = (ch > 0x20 && ch < 0x7f) ? (char)ch : '?';
        }
        if (len > sizeof b->shown - 4)
            memcpy(b->shown + o - 3, "...", 3);
        b->shown[o] = '\0';
    } else {
        tg_lval v;
        tg_lval_store(L, kidx, &v);
        char d[80];
        tg_lval_describe(d, sizeof d, &v);
        snprintf(b->shown, sizeof b->shown, "[%s]", d);
    }
}

int tg_lval_take(const tg_lval_schema *s, lua_State *L, int level, tg_lval *vals, tg_lval_unknown *u)
{
    int slot = -1;
    if (lua_type(L, -2) == LUA_TSTRING) {
        size_t klen;
        const char *k = lua_tolstring(L, -2, &klen);
        for (int j = 0; j < s->nkeys[level]; j++)
            if (strlen(s->keys[level][j]) == klen && memcmp(k, s->keys[level][j], klen) == 0)
                slot = j; /* a key with an embedded NUL matches none */
    }
    if (slot < 0)
        note_bad_key(u, L, level, lua_absindex(L, -2));
    else
        tg_lval_store(L, -1, &vals[slot]);
    return slot;
}

void tg_lval_describe_returned(lua_State *L, int idx, char *out, size_t cap)
{
    tg_lval v;
    tg_lval_store(L, idx, &v);
    if (v.type == LUA_TNIL)
        snprintf(out, cap, "nothing");
    else
        tg_lval_describe(out, cap, &v);
}

/* ---- reading and showing values ---------------------------------------------- */

bool tg_lval_str_is(const tg_lval *v, const char *lit)
{
    size_t n = strlen(lit);
    return v->type == LUA_TSTRING && v->slen == n && n < sizeof v->s && memcmp(v->s, lit, n) == 0;
}

size_t tg_lval_stored_len(const tg_lval *v) { return v->slen < sizeof v->s - 1 ? v->slen : sizeof v->s - 1; }

double tg_lval_num(const tg_lval *v) { return v->is_int ? (double)v->i : v->n; }

void tg_lval_quote(char *out, size_t cap, const char *s, size_t stored, size_t len)
{
    size_t o = 0;
    const size_t shown = 40;
    if (cap < 16)
        return;
    out[o++] = '"';
    for (size_t k = 0; k < stored && k < shown && o + 8 < cap; k++) {
        unsigned char ch = (unsigned char)s[k];
        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch >= 0x20 && ch < 0x7f) {
            out[o++] = (char)ch;
        } else {
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
        }
    }
    if (len > shown && o + 5 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o++] = '"';
    out[o] = '\0';
}

void tg_lval_show_number(char *out, size_t cap, const tg_lval *v)
{
    if (v->is_int)
        snprintf(out, cap, "%lld", v->i);
    else
        snprintf(out, cap, "%.14g", v->n);
}

/* nil cannot be a table's key or value, so only a returned value is nil: tg_lval_describe_returned
 * says "nothing" for it. */
void tg_lval_describe(char *out, size_t cap, const tg_lval *v)
{
    char q[256];
    switch (v->type) {
    case LUA_TNUMBER:
        tg_lval_show_number(out, cap, v);
        break;
    case LUA_TSTRING:
        tg_lval_quote(q, sizeof q, v->s, tg_lval_stored_len(v), v->slen);
        snprintf(out, cap, "string %.200s", q);
        break;
    case LUA_TBOOLEAN:
        snprintf(out, cap, "boolean %s", v->b ? "true" : "false");
        break;
    case LUA_TTABLE:
        snprintf(out, cap, "a table");
        break;
    case LUA_TFUNCTION:
        snprintf(out, cap, "a function");
        break;
    default:
        snprintf(out, cap, "a value of type %s",
                 v->type == LUA_TUSERDATA || v->type == LUA_TLIGHTUSERDATA ? "userdata"
                 : v->type == LUA_TTHREAD                                 ? "thread"
                                                                          : "nil");
        break;
    }
}

/* ---- messages ------------------------------------------------------------------ */

void tg_lval_vfail(tg_lval_report *r, const char *fmt, va_list ap)
{
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    tg_fail(r->err, "%s: %s", r->path, buf);
    r->nfail++;
}

void tg_lval_fail(tg_lval_report *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tg_lval_vfail(r, fmt, ap);
    va_end(ap);
}

/* Optimal string alignment distance (Levenshtein plus adjacent transpositions). */
static int edit_distance(const char *a, const char *b)
{
    enum { N = 33 };
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la >= N || lb >= N)
        return 99;
    int d[N][N];
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++) {
        for (int j = 1; j <= lb; j++) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/* The closest known key for an unknown one (see the top of this file). Writes "mesh.q" to out. */
static bool suggest_key(const tg_lval_schema *s, int level, const char *key, char *out, size_t cap)
{
    int best = 3, best_k = -1;
    size_t klen = strlen(key);
    for (int k = 0; k < s->nkeys[level]; k++) {
        const char *known = s->keys[level][k];
        int dist = s->prefix_match && klen >= 4 && strncmp(known, key, klen) == 0 ? 0 : edit_distance(key, known);
        if (dist < best) {
            best = dist;
            best_k = k;
        }
    }
    if (best_k >= 0) {
        snprintf(out, cap, "%s%s", s->prefix[level], s->keys[level][best_k]);
        return true;
    }
    for (int l = 0; l < s->nlevels; l++) {
        for (int k = 0; l != level && k < s->nkeys[l]; k++) {
            if (strcmp(key, s->keys[l][k]) == 0) {
                snprintf(out, cap, "%s%s", s->prefix[l], s->keys[l][k]);
                return true;
            }
        }
    }
    return false;
}

void tg_lval_report_unknown(tg_lval_report *r, const tg_lval_schema *s, tg_lval_unknown *u)
{
    for (int a = 1; a < u->n; a++) { /* insertion sort: at most TG_LVAL_MAX_UNKNOWN */
        tg_lval_bad_key tmp = u->key[a];
        int b = a - 1;
        while (b >= 0 && (u->key[b].level > tmp.level ||
                          (u->key[b].level == tmp.level && strcmp(u->key[b].shown, tmp.shown) > 0))) {
            u->key[b + 1] = u->key[b];
            b--;
        }
        u->key[b + 1] = tmp;
    }
    for (int a = 0; a < u->n; a++) {
        const tg_lval_bad_key *b = &u->key[a];
        char known[256] = "", sugg[64];
        size_t o = 0;
        for (int k = 0; k < s->nkeys[b->level]; k++)
            o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", k ? ", " : "", s->keys[b->level][k]);
        const char *table = s->table[b->level];
        if (b->not_name)
            tg_lval_fail(r, "%s has an entry with key %s: write fields as name = value; the keys of %s are %s",
                         table, b->shown, table, known);
        else if (suggest_key(s, b->level, b->shown, sugg, sizeof sugg))
            tg_lval_fail(r, "%s%s is not a known key; did you mean %s?", s->prefix[b->level], b->shown, sugg);
        else
            tg_lval_fail(r, "%s%s is not a known key; the keys of %s are %s", s->prefix[b->level], b->shown,
                         table, known);
    }
    if (u->total > u->n)
        tg_lval_fail(r, "%d more unknown keys not listed", u->total - u->n);
}

/* ---- the name key -------------------------------------------------------------- */

bool tg_name_ok(const char *s, size_t len)
{
    if (len < 1 || len > TG_NAME_MAX || strlen(s) != len)
        return false;
    bool all_dots = true;
    for (size_t k = 0; k < len; k++) {
        char ch = s[k];
        bool good = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                    (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-';
        if (!good)
            return false;
        if (ch != '.')
            all_dots = false;
    }
    return !all_dots; /* "." and ".." would be directories when the name makes paths */
}

void tg_lval_name(tg_lval_report *r, const tg_lval *v, const char *what, const char *setter, const char *file,
                  const char *example, char *out)
{
    char shown[256];
    if (v->type == LUA_TNONE) {
        const char *base = strrchr(r->path, '/');
        base = base ? base + 1 : r->path;
        size_t len = strlen(base);
        if (len > 4 && strcmp(base + len - 4, ".lua") == 0)
            len -= 4;
        char stem[256];
        if (len >= sizeof stem)
            len = sizeof stem - 1;
        memcpy(stem, base, len);
        stem[len] = '\0';
        if (!tg_name_ok(stem, len)) {
            tg_lval_quote(shown, sizeof shown, stem, len, len);
            tg_lval_fail(r, "the file stem %s is not a valid %s name (the %s sets no name): " TG_NAME_RULE
                            "; add name = \"...\" to the %s", shown, what, setter, file);
            return;
        }
        memcpy(out, stem, len + 1);
        return;
    }
    if (v->type != LUA_TSTRING) {
        tg_lval_describe(shown, sizeof shown, v);
        tg_lval_fail(r, "name must be a string such as \"%s\", got %s", example, shown);
        return;
    }
    if (!tg_name_ok(v->s, v->slen)) {
        tg_lval_quote(shown, sizeof shown, v->s, tg_lval_stored_len(v), v->slen);
        tg_lval_fail(r, "name = %s is not a valid name: " TG_NAME_RULE, shown);
        return;
    }
    memcpy(out, v->s, v->slen + 1);
}
