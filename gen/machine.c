/*
 * machine.c - the declare stage for a cluster: run a machine description file
 * in the Lua sandbox (sandbox.c) and turn it into a validated tg_machine.
 *
 * A machine file is a Lua chunk that returns a table of numbers (machine.h
 * gives the format, specs/machines/README.md explains each key). As with a
 * spec, the work is in two halves: collect() copies the returned table, with
 * raw accesses only, into plain C values (tg_lval), noting unknown keys; it is
 * the only code here that touches Lua. validate() then checks them in plain C:
 * each key's type and range (bandwidths 1e-3..1e5 GB/s, GEMM rates 1e-3..1e5
 * TFLOPS, latencies 0..1e6 us, memory 1e-6..1e6 GiB, ranks_per_node an integer
 * in 1..65536: physically meaningful, so every derived time is finite), the required keys,
 * and that fp32_gemm = "tf32" has a TF32 rate to run at. Every problem found is
 * reported at once, one tg_fail line each in the form of err.h; a tg_machine
 * that tg_machine_load accepted has every field in range, so the cost model
 * may divide by any rate or bandwidth in it.
 *
 * The key schema, the walk over the table and the rules are here; what
 * machine.c shares with spec.c is in luaval.c: the value copy and how
 * messages show it, the unknown-key report with its "did you mean" (this
 * schema turns on prefix_match: latency -> latency_us), and the name key.
 */
#include "machine.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>

#include "infile.h"
#include "luaval.h"
#include "sandbox.h"

#define MACHINE_MAX_FILE_BYTES (1L << 20) /* a machine file larger than this is refused */
#define MACHINE_MAX_RANKS_PER_NODE 65536LL
/* Physically meaningful ranges, each far beyond any machine in both directions, so that every time the cost
 * model derives (bytes / bandwidth, flops / rate, latencies summed over a run) and every ratio --advise prints
 * stays finite and meaningful: a rate of 5e-324 made times of inf and ratios of NaN, and --json invalid. */
#define MACHINE_MIN_BANDWIDTH 1e-3 /* GB/s: 1 MB/s */
#define MACHINE_MAX_BANDWIDTH 1e5  /* GB/s: 100 TB/s */
#define MACHINE_MIN_TFLOPS 1e-3    /* 1 GFLOPS */
#define MACHINE_MAX_TFLOPS 1e5     /* 100 PFLOPS per rank */
#define MACHINE_MAX_US 1e6         /* latencies and launch cost: one second */
#define MACHINE_MIN_GIB 1e-6       /* memory of a rank: 1 KiB */
#define MACHINE_MAX_GIB 1e6        /* 1 PiB */

/* ---- the key schema ------------------------------------------------------ */

enum { LVL_TOP, LVL_INTRA, LVL_INTER, LVL_GEMM, LVL_COUNT };
enum { TOP_NAME, TOP_RANKS, TOP_INTRA, TOP_INTER, TOP_GEMM, TOP_FP32_GEMM, TOP_MEMBW, TOP_MEMGIB, TOP_LAUNCH,
       TOP_COUNT };
enum { LINK_BW, LINK_LAT, LINK_COUNT };
enum { GEMM_FP32, GEMM_TF32, GEMM_BF16, GEMM_COUNT };

static const char *const level_prefix[LVL_COUNT] = {"", "intra.", "inter.", "gemm_tflops."};
static const char *const level_table[LVL_COUNT] = {"the machine table", "intra", "inter", "gemm_tflops"};
static const int level_nkeys[LVL_COUNT] = {TOP_COUNT, LINK_COUNT, LINK_COUNT, GEMM_COUNT};
static const char *const level_keys[LVL_COUNT][TG_LVAL_MAX_KEYS] = {
    {"name", "ranks_per_node", "intra", "inter", "gemm_tflops", "fp32_gemm", "memory_bandwidth_gbs", "memory_gib",
     "launch_us"},
    {"bandwidth_gbs", "latency_us"},
    {"bandwidth_gbs", "latency_us"},
    {"fp32", "tf32", "bf16"},
};
static const tg_lval_schema schema = {LVL_COUNT, level_prefix, level_table, level_nkeys, level_keys, true};

typedef struct machine_ctx {
    tg_lval_report rep; /* the file name, the messages and their count */
    tg_lval val[LVL_COUNT][TG_LVAL_MAX_KEYS];
    tg_lval_unknown unknown;
} machine_ctx;

/* ---- messages ------------------------------------------------------------ */

/* Record "<path>: <formatted>" (luaval.c). */
__attribute__((format(printf, 2, 3)))
static void fail(machine_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tg_lval_vfail(&c->rep, fmt, ap);
    va_end(ap);
}

/* ---- the Lua half: copy the returned table ---------------------------------- */

/* Copy one table's known keys into c->val[level]; recurse into intra, inter and gemm_tflops. */
static void collect(machine_ctx *c, lua_State *L, int tidx, int level)
{
    lua_pushnil(L);
    while (lua_next(L, tidx)) {
        int slot = tg_lval_take(&schema, L, level, c->val[level], &c->unknown);
        int sub = level != LVL_TOP ? -1
                  : slot == TOP_INTRA ? LVL_INTRA
                  : slot == TOP_INTER ? LVL_INTER
                  : slot == TOP_GEMM  ? LVL_GEMM
                                      : -1;
        if (sub >= 0 && lua_type(L, -1) == LUA_TTABLE)
            collect(c, L, lua_absindex(L, -1), sub);
        lua_pop(L, 1);
    }
}

/* tg_sandbox_collect: what the chunk returned must be a table. */
static void collect_returned(lua_State *L, int idx, void *ud)
{
    machine_ctx *c = ud;
    if (lua_type(L, idx) != LUA_TTABLE) {
        char d[200];
        tg_lval_describe_returned(L, idx, d, sizeof d);
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
    double min, max;     /* the range, both ends included */
    const char *unit;    /* for the message: "GB/s" */
} num_rule;

static num_rule rule_of(int level, int k)
{
    num_rule r = {"", "", 0, 0, ""};
    if (level == LVL_INTRA || level == LVL_INTER) {
        bool intra = level == LVL_INTRA;
        if (k == LINK_BW) {
            r.what = intra ? "one rank's link bandwidth inside a node, GB/s each way"
                           : "one node's network bandwidth to other nodes, GB/s each way";
            r.example = intra ? "bandwidth_gbs = 200" : "bandwidth_gbs = 25";
            r.min = MACHINE_MIN_BANDWIDTH, r.max = MACHINE_MAX_BANDWIDTH, r.unit = " GB/s";
        } else {
            r.what = "the latency of one message in microseconds";
            r.example = intra ? "latency_us = 2" : "latency_us = 5";
            r.min = 0, r.max = MACHINE_MAX_US, r.unit = " us";
        }
    } else if (level == LVL_GEMM) {
        r.what = "a sustained GEMM rate in TFLOPS";
        r.example = k == GEMM_FP32 ? "fp32 = 19.5" : k == GEMM_TF32 ? "tf32 = 156" : "bf16 = 312";
        r.min = MACHINE_MIN_TFLOPS, r.max = MACHINE_MAX_TFLOPS, r.unit = " TFLOPS";
    } else if (k == TOP_MEMBW) {
        r.what = "the device memory bandwidth of one rank in GB/s";
        r.example = "memory_bandwidth_gbs = 1555";
        r.min = MACHINE_MIN_BANDWIDTH, r.max = MACHINE_MAX_BANDWIDTH, r.unit = " GB/s";
    } else if (k == TOP_MEMGIB) {
        r.what = "the memory of one rank in GiB";
        r.example = "memory_gib = 40";
        r.min = MACHINE_MIN_GIB, r.max = MACHINE_MAX_GIB, r.unit = " GiB";
    } else if (k == TOP_LAUNCH) {
        r.what = "the fixed cost of every step in microseconds";
        r.example = "launch_us = 5";
        r.min = 0, r.max = MACHINE_MAX_US, r.unit = " us";
    }
    return r;
}

/* A number at val[level][k]: finite and in the key's range (rule_of).
 * required: a missing key is a problem; otherwise *out keeps its default. */
static bool check_number(machine_ctx *c, int level, int k, bool required, double *out)
{
    const tg_lval *v = &c->val[level][k];
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
        tg_lval_describe(got, sizeof got, v);
        fail(c, "%s%s must be a number (%s), got %s; use e.g. %s", pre, key, r.what, got, r.example);
        return false;
    }
    double x = tg_lval_num(v);
    if (!isfinite(x) || !(x >= r.min) || !(x <= r.max)) {
        tg_lval_show_number(got, sizeof got, v);
        fail(c, "%s%s = %s is out of range: %s must be between %.10g and %.10g%s, what a machine can have (a unit "
                "slip, bits for bytes or B/s for GB/s, lands outside); use e.g. %s",
             pre, key, got, r.what, r.min, r.max, r.unit, r.example);
        return false;
    }
    *out = x;
    return true;
}

static void check_ranks(machine_ctx *c, tg_machine *m)
{
    const tg_lval *v = &c->val[LVL_TOP][TOP_RANKS];
    char got[256];
    if (v->type == LUA_TNONE) {
        fail(c, "ranks_per_node is missing (the GPUs, or CPU ranks, of one node); add ranks_per_node = 4");
        return;
    }
    bool integral = v->type == LUA_TNUMBER && (v->is_int || (isfinite(v->n) && floor(v->n) == v->n));
    if (!integral) {
        tg_lval_describe(got, sizeof got, v);
        fail(c, "ranks_per_node must be an integer (the GPUs, or CPU ranks, of one node), got %s; "
                "use e.g. ranks_per_node = 4", got);
        return;
    }
    tg_lval_show_number(got, sizeof got, v);
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
    const tg_lval *v = &c->val[LVL_TOP][k];
    const char *key = level_keys[LVL_TOP][k];
    char got[256];
    if (v->type == LUA_TNONE) {
        fail(c, "%s is missing; add %s = %s", key, key, example);
        return false;
    }
    if (v->type != LUA_TTABLE) {
        tg_lval_describe(got, sizeof got, v);
        fail(c, "%s must be a table such as %s, got %s", key, example, got);
        return false;
    }
    return true;
}

static void validate(machine_ctx *c, tg_machine *m)
{
    tg_lval_name(&c->rep, &c->val[LVL_TOP][TOP_NAME], "machine", "file", "machine file", "meluxina", m->name);
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
    const tg_lval *f = &c->val[LVL_TOP][TOP_FP32_GEMM];
    char got[256];
    if (f->type == LUA_TNONE || tg_lval_str_is(f, "fp32")) {
        m->fp32_uses_tf32 = 0;
    } else if (tg_lval_str_is(f, "tf32")) {
        m->fp32_uses_tf32 = 1;
        if (!have_tf32 && c->val[LVL_TOP][TOP_GEMM].type == LUA_TTABLE)
            fail(c, "fp32_gemm = \"tf32\" needs gemm_tflops.tf32: an fp32 spec's GEMMs would run at the TF32 "
                    "rate, which the file does not give; add tf32 = <TFLOPS> to gemm_tflops, or use "
                    "fp32_gemm = \"fp32\"");
    } else {
        tg_lval_describe(got, sizeof got, f);
        fail(c, "fp32_gemm = %s is not a choice: use \"fp32\" (GEMMs of an fp32 spec at the FP32 rate) or "
                "\"tf32\" (on tensor cores at the TF32 rate)", got);
    }
    check_number(c, LVL_TOP, TOP_MEMBW, true, &m->memory_bandwidth_gbs);
    check_number(c, LVL_TOP, TOP_MEMGIB, true, &m->memory_gib);
    m->launch_us = 0;
    check_number(c, LVL_TOP, TOP_LAUNCH, false, &m->launch_us);
    tg_lval_report_unknown(&c->rep, &schema, &c->unknown);
}

/* ---- entry points ---------------------------------------------------------- */

bool tg_machine_load_buffer(const char *chunkname, const char *src, size_t len, tg_machine *out, tg_err *err)
{
    machine_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return tg_fail(err, "%s: cannot read machine file: out of memory", chunkname);
    c->rep.path = chunkname;
    c->rep.err = err;
    for (int l = 0; l < LVL_COUNT; l++)
        for (int k = 0; k < TG_LVAL_MAX_KEYS; k++)
            c->val[l][k].type = LUA_TNONE;
    tg_machine m;
    memset(&m, 0, sizeof m);
    if (strlen(chunkname) >= sizeof m.path) {
        fail(c, "the path is longer than %zu characters", sizeof m.path - 1);
    } else if (len > (size_t)MACHINE_MAX_FILE_BYTES) {
        fail(c, "the machine file is larger than %ld bytes: a machine file is a table of numbers",
             MACHINE_MAX_FILE_BYTES);
    } else if (tg_sandbox_run(chunkname, "machine file", src, len, collect_returned, c, err, &c->rep.nfail) &&
               c->rep.nfail == 0) {
        memcpy(m.path, chunkname, strlen(chunkname) + 1);
        validate(c, &m);
    }
    bool ok = c->rep.nfail == 0;
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
    char *buf;
    size_t len;
    if (!tg_infile_read(path, "cannot read machine file", "", (size_t)MACHINE_MAX_FILE_BYTES, &buf, &len, err))
        return false;
    bool ok = tg_machine_load_buffer(path, buf, len, out, err); /* refuses len over the cap */
    free(buf);
    return ok;
}
