/*
 * machine.c - the declare stage for a cluster: run a machine description file
 * in the Lua sandbox (sandbox.c) and turn it into a validated tg_machine.
 *
 * A machine file is a Lua chunk that returns a table of numbers (machine.h
 * gives the format, specs/machines/README.md explains each key). As with a
 * spec, the work is in two halves: collect() copies the returned table, with
 * raw accesses only, into plain C values (mval), noting unknown keys; it is
 * the only code here that touches Lua. validate() then checks them in plain C:
 * each key's type and range (rates and bandwidths positive and finite,
 * latencies >= 0, ranks_per_node an integer in 1..65536), the required keys,
 * and that fp32_gemm = "tf32" has a TF32 rate to run at. Every problem found is
 * reported at once, one tg_fail line each in the form of err.h; a tg_machine
 * that tg_machine_load accepted has every field in range, so the cost model
 * may divide by any rate or bandwidth in it.
 *
 * The value helpers (quote, describe, the edit distance behind "did you
 * mean") are small copies of spec.c's: the two files' schemas differ, and
 * sharing them would mean moving code out of spec.c, which is being edited.
 */
#include "machine.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>

#include "sandbox.h"

#define MACHINE_MAX_FILE_BYTES (1L << 20) /* a machine file larger than this is refused */
#define MACHINE_MAX_RANKS_PER_NODE 65536LL
#define MACHINE_MAX_RATE 1e9              /* GB/s, TFLOPS, us, GiB: far above any machine, below overflow */
#define MACHINE_MAX_NAME 100
#define MACHINE_MAX_UNKNOWN 32            /* unknown keys listed one by one */

/* ---- the key schema ------------------------------------------------------ */

enum { LVL_TOP, LVL_INTRA, LVL_INTER, LVL_GEMM, LVL_COUNT };
enum { TOP_NAME, TOP_RANKS, TOP_INTRA, TOP_INTER, TOP_GEMM, TOP_FP32_GEMM, TOP_MEMBW, TOP_MEMGIB, TOP_LAUNCH,
       TOP_COUNT };
enum { LINK_BW, LINK_LAT, LINK_COUNT };
enum { GEMM_FP32, GEMM_TF32, GEMM_BF16, GEMM_COUNT };

#define MAX_KEYS 9

static const char *const level_prefix[LVL_COUNT] = {"", "intra.", "inter.", "gemm_tflops."};
static const char *const level_table[LVL_COUNT] = {"the machine table", "intra", "inter", "gemm_tflops"};
static const int level_nkeys[LVL_COUNT] = {TOP_COUNT, LINK_COUNT, LINK_COUNT, GEMM_COUNT};
static const char *const level_keys[LVL_COUNT][MAX_KEYS] = {
    {"name", "ranks_per_node", "intra", "inter", "gemm_tflops", "fp32_gemm", "memory_bandwidth_gbs", "memory_gib",
     "launch_us"},
    {"bandwidth_gbs", "latency_us"},
    {"bandwidth_gbs", "latency_us"},
    {"fp32", "tf32", "bf16"},
};

/* One value copied out of the machine table. type is a LUA_T* code, LUA_TNONE if absent. */
typedef struct mval {
    int type;
    int is_int;         /* numbers: a Lua integer */
    long long i;        /* numbers, when is_int */
    double n;           /* numbers, when !is_int */
    int b;              /* booleans */
    size_t slen;        /* strings: full length */
    char s[128];        /* strings: the first bytes, NUL-terminated */
} mval;

typedef struct bad_key {
    int level;
    int not_name;       /* the key is not a string */
    char shown[96];     /* printable form */
} bad_key;

typedef struct machine_ctx {
    const char *path;   /* file name used in every message */
    tg_err *err;
    int nfail;
    mval val[LVL_COUNT][MAX_KEYS];
    bad_key bad[MACHINE_MAX_UNKNOWN];
    int nbad;           /* stored in bad[] */
    int nbad_total;     /* found, including those not stored */
} machine_ctx;

/* ---- messages ------------------------------------------------------------ */

__attribute__((format(printf, 2, 3)))
static void fail(machine_ctx *c, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tg_fail(c->err, "%s: %s", c->path, buf);
    c->nfail++;
}

/* Quote s (len bytes, of which the first stored ones are in s) for a message. */
static void quote(char *out, size_t cap, const char *s, size_t stored, size_t len)
{
    size_t o = 0;
    const size_t shown = 40;
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

static size_t stored_len(const mval *v) { return v->slen < sizeof v->s - 1 ? v->slen : sizeof v->s - 1; }

static bool str_is(const mval *v, const char *lit)
{
    size_t n = strlen(lit);
    return v->type == LUA_TSTRING && v->slen == n && n < sizeof v->s && memcmp(v->s, lit, n) == 0;
}

static double num(const mval *v) { return v->is_int ? (double)v->i : v->n; }

static void show_number(char *out, size_t cap, const mval *v)
{
    if (v->is_int)
        snprintf(out, cap, "%lld", v->i);
    else
        snprintf(out, cap, "%.14g", v->n);
}

/* The value with its type, for "..., got <what>". */
static void describe(char *out, size_t cap, const mval *v)
{
    char q[256];
    switch (v->type) {
    case LUA_TNUMBER: show_number(out, cap, v); break;
    case LUA_TSTRING:
        quote(q, sizeof q, v->s, stored_len(v), v->slen);
        snprintf(out, cap, "string %.200s", q);
        break;
    case LUA_TBOOLEAN: snprintf(out, cap, "boolean %s", v->b ? "true" : "false"); break;
    case LUA_TTABLE: snprintf(out, cap, "a table"); break;
    case LUA_TFUNCTION: snprintf(out, cap, "a function"); break;
    case LUA_TNIL: snprintf(out, cap, "nothing"); break;
    default:
        snprintf(out, cap, "a value of type %s",
                 v->type == LUA_TUSERDATA || v->type == LUA_TLIGHTUSERDATA ? "userdata" : "thread");
        break;
    }
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
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + (a[i - 1] != b[j - 1]) < best)
                best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/* The closest known key for an unknown one: same level within distance 2, or a known key that starts
 * with it (latency -> latency_us, memory_bandwidth -> memory_bandwidth_gbs: the unit left out), else the
 * same name at another level. */
static bool suggest_key(int level, const char *key, char *out, size_t cap)
{
    int best = 3, best_k = -1;
    for (int k = 0; k < level_nkeys[level]; k++) {
        const char *known = level_keys[level][k];
        int dist = strlen(key) >= 4 && strncmp(known, key, strlen(key)) == 0 ? 0 : edit_distance(key, known);
        if (dist < best) {
            best = dist;
            best_k = k;
        }
    }
    if (best_k >= 0) {
        snprintf(out, cap, "%s%s", level_prefix[level], level_keys[level][best_k]);
        return true;
    }
    for (int l = 0; l < LVL_COUNT; l++)
        for (int k = 0; l != level && k < level_nkeys[l]; k++)
            if (strcmp(key, level_keys[l][k]) == 0) {
                snprintf(out, cap, "%s%s", level_prefix[l], level_keys[l][k]);
                return true;
            }
    return false;
}

/* ---- the Lua half: copy the returned table ---------------------------------- */

static void store_value(lua_State *L, int idx, mval *v)
{
    memset(v, 0, sizeof *v);
    v->type = lua_type(L, idx);
    if (v->type == LUA_TNUMBER) {
        v->is_int = lua_isinteger(L, idx);
        if (v->is_int)
            v->i = (long long)lua_tointeger(L, idx);
        else
            v->n = (double)lua_tonumber(L, idx);
    } else if (v->type == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len); /* a string already: no conversion */
        size_t keep = len < sizeof v->s - 1 ? len : sizeof v->s - 1;
        memcpy(v->s, s, keep);
        v->s[keep] = '\0';
        v->slen = len;
    } else if (v->type == LUA_TBOOLEAN) {
        v->b = lua_toboolean(L, idx);
    }
}

static void note_bad_key(machine_ctx *c, lua_State *L, int level, int kidx)
{
    c->nbad_total++;
    if (c->nbad >= MACHINE_MAX_UNKNOWN)
        return;
    bad_key *b = &c->bad[c->nbad++];
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
        mval v;
        store_value(L, kidx, &v);
        char d[80];
        describe(d, sizeof d, &v);
        snprintf(b->shown, sizeof b->shown, "[%s]", d);
    }
}

/* Copy one table's known keys into c->val[level]; recurse into intra, inter and gemm_tflops. */
static void collect(machine_ctx *c, lua_State *L, int tidx, int level)
{
    lua_pushnil(L);
    while (lua_next(L, tidx)) {
        int slot = -1;
        if (lua_type(L, -2) == LUA_TSTRING) {
            size_t klen;
            const char *k = lua_tolstring(L, -2, &klen);
            for (int s = 0; s < level_nkeys[level]; s++)
                if (strlen(level_keys[level][s]) == klen && memcmp(k, level_keys[level][s], klen) == 0)
                    slot = s;
        }
        if (slot < 0) {
            note_bad_key(c, L, level, lua_absindex(L, -2));
        } else {
            store_value(L, -1, &c->val[level][slot]);
            int sub = level != LVL_TOP ? -1
                      : slot == TOP_INTRA ? LVL_INTRA
                      : slot == TOP_INTER ? LVL_INTER
                      : slot == TOP_GEMM  ? LVL_GEMM
                                          : -1;
            if (sub >= 0 && lua_type(L, -1) == LUA_TTABLE)
                collect(c, L, lua_absindex(L, -1), sub);
        }
        lua_pop(L, 1);
    }
}

/* tg_sandbox_collect: what the chunk returned must be a table. */
static void collect_returned(lua_State *L, int idx, void *ud)
{
    machine_ctx *c = ud;
    if (lua_type(L, idx) != LUA_TTABLE) {
        mval v;
        char d[200];
        store_value(L, idx, &v);
        describe(d, sizeof d, &v);
        fail(c, "the machine file must return a table, got %s; end the file with "
                "return { ranks_per_node = ..., intra = { ... }, ... } (specs/machines/README.md)", d);
        return;
    }
    collect(c, L, idx, LVL_TOP);
}

/* ---- the C half: validation ------------------------------------------------ */

/* What each number means and an example, for the messages: [level][key]. */
typedef struct num_rule {
    const char *what;    /* "one rank's link bandwidth inside a node, GB/s each way" */
    const char *example; /* "bandwidth_gbs = 200" */
    int zero_ok;         /* >= 0 rather than > 0 */
} num_rule;

static num_rule rule_of(int level, int k)
{
    num_rule r = {"", "", 0};
    if (level == LVL_INTRA || level == LVL_INTER) {
        bool intra = level == LVL_INTRA;
        if (k == LINK_BW) {
            r.what = intra ? "one rank's link bandwidth inside a node, GB/s each way"
                           : "one node's network bandwidth to other nodes, GB/s each way";
            r.example = intra ? "bandwidth_gbs = 200" : "bandwidth_gbs = 25";
        } else {
            r.what = "the latency of one message in microseconds";
            r.example = intra ? "latency_us = 2" : "latency_us = 5";
            r.zero_ok = 1;
        }
    } else if (level == LVL_GEMM) {
        r.what = "a sustained GEMM rate in TFLOPS";
        r.example = k == GEMM_FP32 ? "fp32 = 19.5" : k == GEMM_TF32 ? "tf32 = 156" : "bf16 = 312";
    } else if (k == TOP_MEMBW) {
        r.what = "the device memory bandwidth of one rank in GB/s";
        r.example = "memory_bandwidth_gbs = 1555";
    } else if (k == TOP_MEMGIB) {
        r.what = "the memory of one rank in GiB";
        r.example = "memory_gib = 40";
    } else if (k == TOP_LAUNCH) {
        r.what = "the fixed cost of every step in microseconds";
        r.example = "launch_us = 5";
        r.zero_ok = 1;
    }
    return r;
}

/* A number at val[level][k]: finite, > 0 (>= 0 for latencies and launch_us), at most MACHINE_MAX_RATE.
 * required: a missing key is a problem; otherwise *out keeps its default. */
static bool check_number(machine_ctx *c, int level, int k, bool required, double *out)
{
    const mval *v = &c->val[level][k];
    const char *pre = level_prefix[level], *key = level_keys[level][k];
    num_rule r = rule_of(level, k);
    char got[256];
    if (v->type == LUA_TNONE) {
        if (!required)
            return true;
        if (level == LVL_TOP)
            fail(c, "%s is missing (%s); add %s", key, r.what, r.example);
        else
            fail(c, "%s%s is missing (%s); add %s to %s", pre, key, r.what, r.example, level_table[level]);
        return false;
    }
    if (v->type != LUA_TNUMBER) {
        describe(got, sizeof got, v);
        fail(c, "%s%s must be a number (%s), got %s; use e.g. %s", pre, key, r.what, got, r.example);
        return false;
    }
    double x = num(v);
    if (!isfinite(x) || (r.zero_ok ? x < 0 : !(x > 0)) || x > MACHINE_MAX_RATE) {
        show_number(got, sizeof got, v);
        fail(c, "%s%s = %s is out of range: %s must be %s and at most %g; use e.g. %s", pre, key, got, r.what,
             r.zero_ok ? ">= 0" : "> 0", MACHINE_MAX_RATE, r.example);
        return false;
    }
    *out = x;
    return true;
}

static bool name_ok(const char *s, size_t len)
{
    if (len < 1 || len > MACHINE_MAX_NAME || strlen(s) != len)
        return false;
    bool all_dots = true;
    for (size_t k = 0; k < len; k++) {
        char ch = s[k];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '.' || ch == '-'))
            return false;
        if (ch != '.')
            all_dots = false;
    }
    return !all_dots;
}

#define NAME_RULE "use 1 to 100 characters from A-Z a-z 0-9 _ . - (not only dots)"

static void check_name(machine_ctx *c, tg_machine *m)
{
    const mval *v = &c->val[LVL_TOP][TOP_NAME];
    char shown[256];
    if (v->type == LUA_TNONE) {
        const char *base = strrchr(c->path, '/');
        base = base ? base + 1 : c->path;
        size_t len = strlen(base);
        if (len > 4 && strcmp(base + len - 4, ".lua") == 0)
            len -= 4;
        char stem[256];
        if (len >= sizeof stem)
            len = sizeof stem - 1;
        memcpy(stem, base, len);
        stem[len] = '\0';
        if (!name_ok(stem, len)) {
            quote(shown, sizeof shown, stem, len, len);
            fail(c, "the file stem %s is not a valid machine name (the file sets no name): " NAME_RULE
                    "; add name = \"...\" to the machine file", shown);
            return;
        }
        memcpy(m->name, stem, len + 1);
        return;
    }
    if (v->type != LUA_TSTRING) {
        describe(shown, sizeof shown, v);
        fail(c, "name must be a string such as \"meluxina\", got %s", shown);
        return;
    }
    if (!name_ok(v->s, v->slen)) {
        quote(shown, sizeof shown, v->s, stored_len(v), v->slen);
        fail(c, "name = %s is not a valid name: " NAME_RULE, shown);
        return;
    }
    memcpy(m->name, v->s, v->slen + 1);
}

static void check_ranks(machine_ctx *c, tg_machine *m)
{
    const mval *v = &c->val[LVL_TOP][TOP_RANKS];
    char got[256];
    if (v->type == LUA_TNONE) {
        fail(c, "ranks_per_node is missing (the GPUs, or CPU ranks, of one node); add ranks_per_node = 4");
        return;
    }
    bool integral = v->type == LUA_TNUMBER && (v->is_int || (isfinite(v->n) && floor(v->n) == v->n));
    if (!integral) {
        describe(got, sizeof got, v);
        fail(c, "ranks_per_node must be an integer (the GPUs, or CPU ranks, of one node), got %s; "
                "use e.g. ranks_per_node = 4", got);
        return;
    }
    show_number(got, sizeof got, v);
    if (v->is_int ? (v->i < 1 || v->i > MACHINE_MAX_RANKS_PER_NODE)
                  : (v->n < 1 || v->n > (double)MACHINE_MAX_RANKS_PER_NODE)) {
        fail(c, "ranks_per_node = %s is out of range: the ranks of one node must be 1 to %lld; "
                "use e.g. ranks_per_node = 4", got, MACHINE_MAX_RANKS_PER_NODE);
        return;
    }
    m->ranks_per_node = v->is_int ? (int)v->i : (int)v->n;
}

/* A sub-table key (intra, inter, gemm_tflops): true when it is a table to look into. */
static bool check_table(machine_ctx *c, int k, const char *example)
{
    const mval *v = &c->val[LVL_TOP][k];
    const char *key = level_keys[LVL_TOP][k];
    char got[256];
    if (v->type == LUA_TNONE) {
        fail(c, "%s is missing; add %s = %s", key, key, example);
        return false;
    }
    if (v->type != LUA_TTABLE) {
        describe(got, sizeof got, v);
        fail(c, "%s must be a table such as %s, got %s", key, example, got);
        return false;
    }
    return true;
}

static void check_unknown_keys(machine_ctx *c)
{
    for (int a = 1; a < c->nbad; a++) { /* sorted, so messages do not depend on Lua's hash order */
        bad_key tmp = c->bad[a];
        int b = a - 1;
        while (b >= 0 && (c->bad[b].level > tmp.level ||
                          (c->bad[b].level == tmp.level && strcmp(c->bad[b].shown, tmp.shown) > 0))) {
            c->bad[b + 1] = c->bad[b];
            b--;
        }
        c->bad[b + 1] = tmp;
    }
    for (int a = 0; a < c->nbad; a++) {
        const bad_key *b = &c->bad[a];
        char known[256] = "", sugg[64];
        size_t o = 0;
        for (int k = 0; k < level_nkeys[b->level]; k++)
            o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", k ? ", " : "", level_keys[b->level][k]);
        const char *table = level_table[b->level];
        if (b->not_name)
            fail(c, "%s has an entry with key %s: write fields as name = value; the keys of %s are %s", table,
                 b->shown, table, known);
        else if (suggest_key(b->level, b->shown, sugg, sizeof sugg))
            fail(c, "%s%s is not a known key; did you mean %s?", level_prefix[b->level], b->shown, sugg);
        else
            fail(c, "%s%s is not a known key; the keys of %s are %s", level_prefix[b->level], b->shown, table,
                 known);
    }
    if (c->nbad_total > c->nbad)
        fail(c, "%d more unknown keys not listed", c->nbad_total - c->nbad);
}

static void validate(machine_ctx *c, tg_machine *m)
{
    check_name(c, m);
    check_ranks(c, m);
    static const char *const link_example[2] = {"{ bandwidth_gbs = 200, latency_us = 2 }",
                                                "{ bandwidth_gbs = 25, latency_us = 5 }"};
    tg_link *links[2] = {&m->intra, &m->inter};
    for (int t = 0; t < 2; t++) {
        int lvl = t == 0 ? LVL_INTRA : LVL_INTER;
        if (check_table(c, t == 0 ? TOP_INTRA : TOP_INTER, link_example[t])) {
            check_number(c, lvl, LINK_BW, true, &links[t]->bandwidth_gbs);
            check_number(c, lvl, LINK_LAT, true, &links[t]->latency_us);
        }
    }
    bool have_tf32 = false;
    if (check_table(c, TOP_GEMM, "{ fp32 = 19.5, tf32 = 156, bf16 = 312 }")) {
        check_number(c, LVL_GEMM, GEMM_FP32, true, &m->gemm_tflops_fp32);
        have_tf32 = c->val[LVL_GEMM][GEMM_TF32].type != LUA_TNONE;
        check_number(c, LVL_GEMM, GEMM_TF32, false, &m->gemm_tflops_tf32);
        check_number(c, LVL_GEMM, GEMM_BF16, false, &m->gemm_tflops_bf16);
    }
    const mval *f = &c->val[LVL_TOP][TOP_FP32_GEMM];
    char got[256];
    if (f->type == LUA_TNONE || str_is(f, "fp32")) {
        m->fp32_uses_tf32 = 0;
    } else if (str_is(f, "tf32")) {
        m->fp32_uses_tf32 = 1;
        if (!have_tf32 && c->val[LVL_TOP][TOP_GEMM].type == LUA_TTABLE)
            fail(c, "fp32_gemm = \"tf32\" needs gemm_tflops.tf32: an fp32 spec's GEMMs would run at the TF32 "
                    "rate, which the file does not give; add tf32 = <TFLOPS> to gemm_tflops, or use "
                    "fp32_gemm = \"fp32\"");
    } else {
        describe(got, sizeof got, f);
        fail(c, "fp32_gemm = %s is not a choice: use \"fp32\" (GEMMs of an fp32 spec at the FP32 rate) or "
                "\"tf32\" (on tensor cores at the TF32 rate)", got);
    }
    check_number(c, LVL_TOP, TOP_MEMBW, true, &m->memory_bandwidth_gbs);
    check_number(c, LVL_TOP, TOP_MEMGIB, true, &m->memory_gib);
    m->launch_us = 0;
    check_number(c, LVL_TOP, TOP_LAUNCH, false, &m->launch_us);
    check_unknown_keys(c);
}

/* ---- entry points ---------------------------------------------------------- */

bool tg_machine_load_buffer(const char *chunkname, const char *src, size_t len, tg_machine *out, tg_err *err)
{
    machine_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return tg_fail(err, "%s: cannot read machine file: out of memory", chunkname);
    c->path = chunkname;
    c->err = err;
    for (int l = 0; l < LVL_COUNT; l++)
        for (int k = 0; k < MAX_KEYS; k++)
            c->val[l][k].type = LUA_TNONE;
    tg_machine m;
    memset(&m, 0, sizeof m);
    if (strlen(chunkname) >= sizeof m.path) {
        fail(c, "the path is longer than %zu characters", sizeof m.path - 1);
    } else if (len > (size_t)MACHINE_MAX_FILE_BYTES) {
        fail(c, "the machine file is larger than %ld bytes: a machine file is a table of numbers",
             MACHINE_MAX_FILE_BYTES);
    } else if (tg_sandbox_run(chunkname, "machine file", src, len, collect_returned, c, err, &c->nfail) &&
               c->nfail == 0) {
        memcpy(m.path, chunkname, strlen(chunkname) + 1);
        validate(c, &m);
    }
    bool ok = c->nfail == 0;
    if (ok)
        *out = m;
    free(c);
    return ok;
}

bool tg_machine_load_string(const char *chunkname, const char *src, tg_machine *out, tg_err *err)
{
    return tg_machine_load_buffer(chunkname, src, strlen(src), out, err);
}

bool tg_machine_load(const char *path, tg_machine *out, tg_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tg_fail(err, "%s: cannot read machine file: %s", path, strerror(errno));
    char *buf = malloc((size_t)MACHINE_MAX_FILE_BYTES + 2);
    if (!buf) {
        fclose(f);
        return tg_fail(err, "%s: cannot read machine file: out of memory", path);
    }
    errno = 0;
    size_t len = fread(buf, 1, (size_t)MACHINE_MAX_FILE_BYTES + 1, f);
    int read_errno = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    bool ok;
    if (read_errno)
        ok = tg_fail(err, "%s: cannot read machine file: %s", path, strerror(read_errno));
    else
        ok = tg_machine_load_buffer(path, buf, len, out, err); /* refuses len over the cap */
    free(buf);
    return ok;
}
