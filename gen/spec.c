/*
 * spec.c - the declare stage: run a model spec file in a sandboxed Lua state
 * and turn it into a validated tg_spec.
 *
 * A spec is a Lua chunk that returns a table of numbers and names (see spec.h).
 * It is code that tessgen runs, so it runs in the Lua sandbox of sandbox.c
 * (bounded memory, instructions and time; no way out of the state): a hostile
 * or broken spec yields an error message, never a crash, a hang or a side
 * effect.
 *
 * The work is in two halves. run_lua() executes the chunk in the sandbox and
 * copies the returned table, with raw accesses only (no metamethod runs,
 * nothing is allocated), into plain C values (tg_lval), noting unknown keys.
 * Only it touches Lua here; validate() then checks those values in plain C:
 * types and ranges, every divisibility rule of DESIGN.md, and the int32
 * overflow guards for per-rank element counts. All validation of user input
 * lives here (the name key's rule, shared with machine files, in luaval.c);
 * downstream stages may assume a tg_spec that tg_spec_load accepted is
 * consistent. Every problem found is reported (one tg_fail line
 * each, "<file>: <field> = <value> <rule>: <why>; <fix>"), except that a field
 * that fails its own type or range check is left out of the rules that use it.
 * The key schema, the walk over the table and the rules are here; what spec.c
 * shares with machine.c is in luaval.c: the value copy and how messages show
 * it, the unknown-key report with its "did you mean", and the name key.
 */
#include "spec.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>

#include "infile.h"
#include "luaval.h"
#include "sandbox.h"

#define SPEC_MAX_FILE_BYTES (1L << 20)         /* a spec file larger than this is refused */
#define SPEC_MAX_DIM (1LL << 20)               /* hidden, heads, ffn, seq, batch, positions */
#define SPEC_MAX_VOCAB (1LL << 24)             /* vocab */
#define SPEC_MAX_MESH 4096LL                   /* q and d */
#define SPEC_MAX_LAYERS 10000LL
#define SPEC_MAX_RANKS 65536LL                 /* q*q*d */
#define SPEC_SET_SHOWN 12                      /* values listed in a "use q in {...}" fix */
#define SPEC_MAX_LIST 8                        /* entries of a list value (backends) kept */
#define SPEC_MAX_STAGES TG_MAX_STAGES           /* mesh.pp, and the entries of pipeline.layers kept */
/* Where lr and the epsilons stop meaning anything in float32 (the runtime rounds them to float once):
 * AdamW's step is about lr per weight, and below 1e-10 it is under half the spacing of float32 weights of
 * magnitude 1e-3 and more, so nothing trains (1e-46 is 0 in float32); an epsilon below 1e-30 is near the
 * smallest normal float32 (1.2e-38), and one that rounds to 0 gives 0/0 for a zero gradient or a constant row
 * (and a float literal the C compiler refuses). Every value must also be a finite float32. */
#define SPEC_MIN_LR 1e-10
#define SPEC_MIN_EPS 1e-30
#define SPEC_MAX_F32 3.4028234663852886e38

/* ---- the key schema ------------------------------------------------------ */

enum { LVL_TOP, LVL_MESH, LVL_MODEL, LVL_OPT, LVL_PIPE, LVL_COUNT };
enum { TOP_NAME, TOP_MESH, TOP_MODEL, TOP_DTYPE, TOP_MODE, TOP_OPT, TOP_BACKENDS, TOP_MEMORY, TOP_SCHEME,
       TOP_ATTENTION, TOP_EPILOGUES, TOP_PIPE, TOP_RECOMPUTE, TOP_DECODE_LAYOUT, TOP_COUNT };
enum { MESH_Q, MESH_D, MESH_P, MESH_PLACEMENT, MESH_PP, MESH_COUNT };
enum { MODEL_LAYERS, MODEL_HIDDEN, MODEL_HEADS, MODEL_FFN, MODEL_SEQ, MODEL_BATCH, MODEL_EPS,
       MODEL_VOCAB, MODEL_POSITIONS, MODEL_TIE, MODEL_CONTEXT, MODEL_VOCAB_ALIGN, MODEL_COUNT };
enum { OPT_LR, OPT_BETA1, OPT_BETA2, OPT_EPS, OPT_WD, OPT_WARMUP, OPT_DECAY, OPT_LR_MIN, OPT_CLIP, OPT_SHARD, OPT_COUNT };
enum { PIPE_MICROBATCHES, PIPE_LAYERS, PIPE_SCHEDULE, PIPE_COUNT };

static const char *const level_prefix[LVL_COUNT] = {"", "mesh.", "model.", "optimizer.", "pipeline."};
static const char *const level_table[LVL_COUNT] = {"the spec table", "mesh", "model", "optimizer", "pipeline"};
static const int level_nkeys[LVL_COUNT] = {TOP_COUNT, MESH_COUNT, MODEL_COUNT, OPT_COUNT, PIPE_COUNT};
static const char *const level_keys[LVL_COUNT][TG_LVAL_MAX_KEYS] = {
    {"name", "mesh", "model", "dtype", "mode", "optimizer", "backends", "memory_gib", "scheme", "attention",
     "epilogues", "pipeline", "recompute", "decode_layout"},
    {"q", "d", "p", "placement", "pp"},
    {"layers", "hidden", "heads", "ffn", "seq", "batch", "eps", "vocab", "positions", "tie", "context", "vocab_align"},
    {"lr", "beta1", "beta2", "eps", "weight_decay", "warmup", "decay_steps", "lr_min", "clip", "shard"},
    {"microbatches", "layers", "schedule"},
};
static const tg_lval_schema schema = {LVL_COUNT, level_prefix, level_table, level_nkeys, level_keys, false};

typedef struct spec_ctx {
    tg_lval_report rep; /* the file name, the messages and their count */
    const char *src;
    size_t src_len;
    /* what the chunk returned */
    tg_lval val[LVL_COUNT][TG_LVAL_MAX_KEYS];
    tg_lval_unknown unknown;
    /* the backends list: its entries in order, and whether its keys were 1..n */
    tg_lval list[SPEC_MAX_LIST];
    int nlist;          /* entries found (may exceed SPEC_MAX_LIST) */
    int list_keyed;     /* an entry had a key other than 1..n */
    /* pipeline.layers = { n0, n1, ... }: the same, one entry per stage */
    tg_lval stages[SPEC_MAX_STAGES];
    int nstages;
    int stages_keyed;
} spec_ctx;

/* ---- messages ------------------------------------------------------------ */

/* Record "<path>: <formatted>" (luaval.c). */
__attribute__((format(printf, 2, 3)))
static void fail(spec_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tg_lval_vfail(&c->rep, fmt, ap);
    va_end(ap);
}

/* ---- the Lua half ---------------------------------------------------------- */

/* Copy a list value (backends = { "cpu", "cuda" }, pipeline.layers = { 2, 2 }) into list (cap entries kept; *nlist
 * counts all of them, up to 1000), raw accesses only; *keyed is set when an entry has a key other than 1..n. */
static void collect_list_into(lua_State *L, int tidx, tg_lval *list, int cap, int *nlist, int *keyed)
{
    lua_Integer n = (lua_Integer)lua_rawlen(L, tidx);
    lua_pushnil(L);
    while (lua_next(L, tidx)) {
        if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) < 1 || lua_tointeger(L, -2) > n)
            *keyed = 1;
        lua_pop(L, 1);
    }
    *nlist = n > 1000 ? 1000 : (int)n;
    for (lua_Integer k = 1; k <= n && k <= cap; k++) {
        lua_rawgeti(L, tidx, k);
        tg_lval_store(L, -1, &list[k - 1]);
        lua_pop(L, 1);
    }
}

/* Copy one table's known keys into c->val[level]; recurse into mesh and model. */
static void collect(spec_ctx *c, lua_State *L, int tidx, int level)
{
    lua_pushnil(L);
    while (lua_next(L, tidx)) {
        int slot = tg_lval_take(&schema, L, level, c->val[level], &c->unknown);
        if (level == LVL_TOP && (slot == TOP_MESH || slot == TOP_MODEL || slot == TOP_OPT || slot == TOP_PIPE) &&
            lua_type(L, -1) == LUA_TTABLE)
            collect(c, L, lua_absindex(L, -1),
                    slot == TOP_MESH    ? LVL_MESH
                    : slot == TOP_MODEL ? LVL_MODEL
                    : slot == TOP_OPT   ? LVL_OPT
                                        : LVL_PIPE);
        else if (level == LVL_TOP && slot == TOP_BACKENDS && lua_type(L, -1) == LUA_TTABLE)
            collect_list_into(L, lua_absindex(L, -1), c->list, SPEC_MAX_LIST, &c->nlist, &c->list_keyed);
        else if (level == LVL_PIPE && slot == PIPE_LAYERS && lua_type(L, -1) == LUA_TTABLE)
            collect_list_into(L, lua_absindex(L, -1), c->stages, SPEC_MAX_STAGES, &c->nstages, &c->stages_keyed);
        lua_pop(L, 1);
    }
}

/* Copy what the chunk returned into c->val (tg_sandbox_collect): it must be a table. */
static void collect_returned(lua_State *L, int idx, void *ud)
{
    spec_ctx *c = ud;
    if (lua_type(L, idx) != LUA_TTABLE) {
        char d[200];
        tg_lval_describe_returned(L, idx, d, sizeof d);
        fail(c, "the spec must return a table, got %s; end the file with "
                "return { mesh = { q = ... }, model = { ... } }", d);
        return;
    }
    collect(c, L, idx, LVL_TOP);
}

/* Run the chunk in the sandbox (sandbox.c); true when c->val holds the table it returned. */
static bool run_lua(spec_ctx *c)
{
    for (int l = 0; l < LVL_COUNT; l++)
        for (int k = 0; k < TG_LVAL_MAX_KEYS; k++)
            c->val[l][k].type = LUA_TNONE;
    return tg_sandbox_run(c->rep.path, "spec", c->src, c->src_len, collect_returned, c, c->rep.err,
                          &c->rep.nfail) &&
           c->rep.nfail == 0;
}

/* ---- the C half: validation ------------------------------------------------ */

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Divisors of n (n <= SPEC_MAX_DIM: at most 240 of them) up to max, ascending. */
static int divisors(long long n, long long max, long long *out, int cap)
{
    int k = 0;
    for (long long i = 1; i * i <= n; i++) {
        if (n % i)
            continue;
        if (i <= max && k < cap)
            out[k++] = i;
        if (n / i != i && n / i <= max && k < cap)
            out[k++] = n / i;
    }
    qsort(out, (size_t)k, sizeof out[0], cmp_ll);
    return k;
}

/* "{1,2,3,6}"; with more than SPEC_SET_SHOWN values, a window around near:
 * "{...,8,12,16,...}". */
static void fmt_set(char *out, size_t cap, const long long *v, int n, long long near)
{
    int lo = 0, hi = n;
    if (n > SPEC_SET_SHOWN) {
        int at = 0;
        while (at < n && v[at] < near)
            at++;
        lo = at - SPEC_SET_SHOWN / 2;
        if (lo < 0)
            lo = 0;
        if (lo + SPEC_SET_SHOWN > n)
            lo = n - SPEC_SET_SHOWN;
        hi = lo + SPEC_SET_SHOWN;
    }
    size_t o = 0;
    o += (size_t)snprintf(out + o, cap - o, "{%s", lo > 0 ? "...," : "");
    for (int k = lo; k < hi && o < cap; k++)
        o += (size_t)snprintf(out + o, cap - o, "%s%lld", k > lo ? "," : "", v[k]);
    if (o < cap)
        snprintf(out + o, cap - o, "%s}", hi < n ? ",..." : "");
}

static const char *field_hint(int level, int k)
{
    if (level == LVL_MESH)
        return k == MESH_Q   ? "the mesh is [q,q,d] with q*q ranks per depth layer"
               : k == MESH_D ? "the depth of the [q,q,d] mesh"
               : k == MESH_P ? "the ranks of the megatron scheme's 1-D mesh"
               : k == MESH_PP ? "the pipeline stages, each a [q,q,d] group"
                             : "the group whose ranks are numbered consecutively";
    switch (k) {
    case MODEL_LAYERS: return "the number of transformer blocks";
    case MODEL_HIDDEN: return "the model width C";
    case MODEL_HEADS: return "the number of attention heads";
    case MODEL_FFN: return "the MLP width F, usually 4*hidden";
    case MODEL_SEQ: return "the tokens per sequence S";
    case MODEL_BATCH: return "the sequences per step B";
    case MODEL_VOCAB: return "the vocabulary size V";
    case MODEL_POSITIONS: return "the learned positions P, at least seq";
    case MODEL_CONTEXT: return "the KV-cache length N of generation, seq <= N <= positions";
    case MODEL_VOCAB_ALIGN: return "the multiple each rank's vocabulary block is padded to, 1 for none";
    default: return "";
    }
}

/* Check that c->val[level][k] is an integer in 1..max; store it in *out. */
static bool check_int(spec_ctx *c, int level, int k, long long max, int *out)
{
    const tg_lval *v = &c->val[level][k];
    const char *key = level_keys[level][k];
    const char *pre = level_prefix[level];
    char got[256];
    if (v->type == LUA_TNONE) {
        if (level == LVL_MESH && (k == MESH_D || k == MESH_PP)) {
            *out = 1;
            return true;
        }
        fail(c, "%s%s is missing (%s); add %s = <n> to %.*s", pre, key, field_hint(level, k), key,
             (int)strlen(pre) - 1, pre);
        return false;
    }
    bool integral = v->type == LUA_TNUMBER &&
                    (v->is_int || (isfinite(v->n) && floor(v->n) == v->n));
    if (!integral) {
        tg_lval_describe(got, sizeof got, v);
        fail(c, "%s%s must be a positive integer, got %s", pre, key, got);
        return false;
    }
    double x = tg_lval_num(v);
    tg_lval_show_number(got, sizeof got, v);
    if (v->is_int ? v->i < 1 : x < 1) {
        fail(c, "%s%s = %s is not a positive integer (%s); use %s >= 1", pre, key, got,
             field_hint(level, k), key);
        return false;
    }
    if (v->is_int ? v->i > max : x > (double)max) {
        fail(c, "%s%s = %s is larger than tessgen supports; use %s <= %lld", pre, key, got, key, max);
        return false;
    }
    *out = v->is_int ? (int)v->i : (int)x;
    return true;
}

static void check_dtype(spec_ctx *c, tg_spec *s)
{
    const tg_lval *v = &c->val[LVL_TOP][TOP_DTYPE];
    char shown[256];
    s->dtype = TG_FP32;
    if (v->type == LUA_TNONE)
        return;
    if (v->type != LUA_TSTRING) {
        tg_lval_describe(shown, sizeof shown, v);
        fail(c, "dtype must be a string such as \"fp32\", got %s", shown);
        return;
    }
    if (tg_lval_str_is(v, "fp32"))
        return;
    if (tg_lval_str_is(v, "bf16")) {
        s->dtype = TG_BF16;
        return;
    }
    tg_lval_quote(shown, sizeof shown, v->s, tg_lval_stored_len(v), v->slen);
    fail(c, "dtype = %s is not supported: use \"fp32\" or \"bf16\" (bf16 GEMM operands, fp32 accumulation; "
            "docs/BF16.md)", shown);
}

/* epilogues = true (default) or false: whether the CUDA backend runs the bias, GeLU and gradient steps that follow a
 * GEMM as that GEMM's cuBLASLt epilogue (gen/fuse.c, docs/CUDA.md "GEMMs with an epilogue"); false keeps every step
 * a kernel of its own, the way out where cuBLASLt has no algorithm for a fused shape. The CPU program is the same. */
static void check_epilogues(spec_ctx *c, tg_spec *s)
{
    const tg_lval *v = &c->val[LVL_TOP][TOP_EPILOGUES];
    char shown[256];
    s->no_epilogues = false;
    if (v->type == LUA_TNONE)
        return;
    if (v->type == LUA_TBOOLEAN) {
        s->no_epilogues = !v->b;
        return;
    }
    tg_lval_describe(shown, sizeof shown, v);
    fail(c, "epilogues must be true or false, got %s; use epilogues = false to run every bias, GeLU and gradient step "
            "as its own kernel instead of a cuBLASLt epilogue (docs/CUDA.md), or drop the key", shown);
}

/* attention = "cublas" or "cudnn": how the CUDA backend computes attention (docs/CUDA.md, "Fused attention through
 * cuDNN"). The dtype and head-dimension rules of "cudnn", and the default where the key is absent, come after the
 * model's keys (check_model). */
static void check_attention(spec_ctx *c, tg_spec *s)
{
    const tg_lval *v = &c->val[LVL_TOP][TOP_ATTENTION];
    char shown[256];
    s->attention = TG_ATTN_CUBLAS;
    s->attention_default = v->type == LUA_TNONE;
    if (v->type == LUA_TNONE || tg_lval_str_is(v, "cublas"))
        return;
    if (tg_lval_str_is(v, "cudnn")) {
        s->attention = TG_ATTN_CUDNN;
        return;
    }
    if (v->type == LUA_TSTRING)
        tg_lval_quote(shown, sizeof shown, v->s, tg_lval_stored_len(v), v->slen);
    else
        tg_lval_describe(shown, sizeof shown, v);
    fail(c, "attention = %s is not an attention path: use \"cublas\" (cuBLAS GEMMs and softmax kernels) or "
            "\"cudnn\" (cuDNN's fused flash attention, bf16 only; the default where a spec allows it; docs/CUDA.md)",
         shown);
}

/* mesh.placement: which group's ranks get consecutive numbers, so that a launcher that fills nodes in rank
 * order keeps that group inside a node (mesh.h). */
static void check_placement(spec_ctx *c, tg_spec *s)
{
    const tg_lval *v = &c->val[LVL_MESH][MESH_PLACEMENT];
    char shown[256];
    s->placement = TG_PLACE_ROW;
    if (v->type == LUA_TNONE)
        return;
    if (v->type == LUA_TSTRING) {
        for (int p = 0; p < TG_NPLACEMENTS; p++)
            if (tg_lval_str_is(v, tg_placement_name((tg_placement)p))) {
                s->placement = (tg_placement)p;
                return;
            }
        tg_lval_quote(shown, sizeof shown, v->s, tg_lval_stored_len(v), v->slen);
    } else {
        tg_lval_describe(shown, sizeof shown, v);
    }
    fail(c, "mesh.placement = %s is not a placement: it names the group whose ranks are numbered consecutively "
            "(and so share a node when the launcher fills nodes in rank order); use \"row\" (the default: "
            "rank = j + q*i + q*q*k), \"col\" (rank = i + q*j + q*q*k) or \"dep\" (rank = k + d*j + d*q*i)",
         shown);
}

static void check_scheme(spec_ctx *c, tg_spec *s)
{
    const tg_lval *v = &c->val[LVL_TOP][TOP_SCHEME];
    char shown[256];
    s->scheme = TG_SCHEME_TESSERACT;
    if (v->type == LUA_TNONE || tg_lval_str_is(v, "tesseract"))
        return;
    if (tg_lval_str_is(v, "megatron")) {
        s->scheme = TG_SCHEME_MEGATRON;
        return;
    }
    tg_lval_describe(shown, sizeof shown, v);
    fail(c, "scheme = %s is not a scheme: use scheme = \"tesseract\" (the [q,q,d] mesh, the default) or "
            "scheme = \"megatron\" (Megatron-LM 1-D tensor parallelism, mesh = { p = N })", shown);
}

/* The mesh of the scheme: tesseract takes q (and d), megatron takes p; a key of the other scheme is refused. */
static void check_mesh(spec_ctx *c, tg_spec *s, bool *ok_q, bool *ok_d, bool *ok_p)
{
    const tg_lval *v = c->val[LVL_MESH];
    if (s->scheme == TG_SCHEME_MEGATRON) {
        for (int k = MESH_Q; k <= MESH_D; k++)
            if (v[k].type != LUA_TNONE)
                fail(c, "mesh.%s is not a key of the megatron scheme: it splits the model over p ranks in one "
                        "dimension; write mesh = { p = N } (or drop scheme = \"megatron\" for the [q,q,d] mesh)",
                     level_keys[LVL_MESH][k]);
        if (v[MESH_PLACEMENT].type != LUA_TNONE)
            fail(c, "mesh.placement is a key of the tesseract mesh only: the megatron scheme's p ranks form one "
                    "group, numbered in order; drop mesh.placement");
        s->pp = 1;
        if (v[MESH_PP].type != LUA_TNONE)
            fail(c, "mesh.pp is not supported with scheme = \"megatron\" (pipeline stages are planned around the "
                    "tesseract [q,q,d] group); drop mesh.pp, or use scheme = \"tesseract\"");
        *ok_p = check_int(c, LVL_MESH, MESH_P, SPEC_MAX_RANKS, &s->p);
        s->q = s->d = 1;
        *ok_q = *ok_d = *ok_p && v[MESH_Q].type == LUA_TNONE && v[MESH_D].type == LUA_TNONE;
        return;
    }
    if (v[MESH_P].type != LUA_TNONE)
        fail(c, "mesh.p is a key of the megatron scheme only: the tesseract mesh is [q,q,d] with p = q*q*d "
                "ranks; write mesh = { q = ..., d = ... }, or add scheme = \"megatron\" for a 1-D mesh of p ranks");
    *ok_q = check_int(c, LVL_MESH, MESH_Q, SPEC_MAX_MESH, &s->q);
    *ok_d = check_int(c, LVL_MESH, MESH_D, SPEC_MAX_MESH, &s->d);
    check_placement(c, s);
    s->pp = 1;
    int pp = 1;
    if (check_int(c, LVL_MESH, MESH_PP, SPEC_MAX_STAGES, &pp))
        s->pp = pp;
    *ok_p = *ok_q && *ok_d && v[MESH_P].type == LUA_TNONE;
    if (*ok_p)
        s->p = s->q * s->q * s->d;
}

static void check_mode(spec_ctx *c, tg_spec *s)
{
    const tg_lval *v = &c->val[LVL_TOP][TOP_MODE];
    char shown[256];
    s->mode = TG_INFER;
    if (v->type == LUA_TNONE)
        return;
    if (tg_lval_str_is(v, "infer"))
        return;
    if (tg_lval_str_is(v, "train")) {
        s->mode = TG_TRAIN;
        return;
    }
    if (tg_lval_str_is(v, "generate")) {
        s->mode = TG_GENERATE;
        return;
    }
    tg_lval_describe(shown, sizeof shown, v);
    fail(c, "mode = %s is not a mode: use mode = \"infer\" (forward only), mode = \"train\" (forward, "
            "backward and AdamW) or mode = \"generate\" (prefill and KV-cache decode)", shown);
}

/* optimizer = { lr, beta1, beta2, eps, weight_decay, warmup, decay_steps, lr_min, clip }: AdamW, its
 * learning-rate schedule and gradient clipping, every key optional. */
static void check_optimizer(spec_ctx *c, tg_spec *s)
{
    static const double defaults[OPT_COUNT] = {1e-3, 0.9, 0.999, 1e-8, 0.01, 0, 0, 0, 0, 0};
    static const char *const rule[OPT_COUNT] = {
        ("the learning rate must be >= 1e-10 and a finite float32 (<= 3.4e38): below 1e-10 AdamW's step, about lr "
         "per weight, is under the rounding of float32 weights and training does nothing; use lr = 1e-3"),
        "beta1 must be >= 0 and < 1; use beta1 = 0.9",
        "beta2 must be >= 0 and < 1; use beta2 = 0.999",
        ("eps must be >= 1e-30 and a finite float32 (<= 3.4e38): a smaller eps is 0 or subnormal in float32 and "
         "a zero gradient gives 0/0; use eps = 1e-8"),
        "weight_decay must be >= 0 and finite; use weight_decay = 0.01 (0 turns it off)",
        "warmup is a number of steps, an integer in 0..1000000000; use warmup = 100 (0: no warmup)",
        ("decay_steps is a number of steps, an integer in 0..1000000000; use decay_steps = 10000 (0: constant lr "
         "after the warmup)"),
        "lr_min must be >= 0 and finite; use lr_min = 0 (or lr/10)",
        "clip is the largest global gradient norm, >= 0 and finite; use clip = 1.0 (0 turns clipping off)",
        "", /* shard: a boolean (check_shard) */
    };
    double val[OPT_COUNT];
    for (int k = 0; k < OPT_COUNT; k++)
        val[k] = defaults[k];
    const tg_lval *t = &c->val[LVL_TOP][TOP_OPT];
    char shown[256];
    if (t->type == LUA_TTABLE) {
        for (int k = 0; k < OPT_COUNT; k++) {
            const tg_lval *v = &c->val[LVL_OPT][k];
            if (v->type == LUA_TNONE || k == OPT_SHARD)
                continue;
            if (v->type != LUA_TNUMBER) {
                tg_lval_describe(shown, sizeof shown, v);
                fail(c, "optimizer.%s must be a number, got %s", level_keys[LVL_OPT][k], shown);
                continue;
            }
            double x = tg_lval_num(v);
            bool ok = isfinite(x);
            if (k == OPT_LR || k == OPT_EPS)
                ok = ok && x >= (k == OPT_LR ? SPEC_MIN_LR : SPEC_MIN_EPS) && x <= SPEC_MAX_F32;
            else if (k == OPT_WD || k == OPT_LR_MIN || k == OPT_CLIP)
                ok = ok && x >= 0;
            else if (k == OPT_WARMUP || k == OPT_DECAY)
                ok = ok && x >= 0 && x <= 1e9 && floor(x) == x;
            else
                ok = ok && x >= 0 && x < 1;
            if (!ok) {
                tg_lval_show_number(shown, sizeof shown, v);
                fail(c, "optimizer.%s = %s is out of range: %s", level_keys[LVL_OPT][k], shown, rule[k]);
                continue;
            }
            val[k] = x;
        }
        const tg_lval *vmin = &c->val[LVL_OPT][OPT_LR_MIN];
        if (val[OPT_LR_MIN] > val[OPT_LR]) {
            tg_lval_show_number(shown, sizeof shown, vmin);
            fail(c, "optimizer.lr_min = %s is larger than optimizer.lr = %.17g: the cosine decays from lr down to "
                    "lr_min; use lr_min <= lr (e.g. lr_min = lr/10)", shown, val[OPT_LR]);
        } else if (vmin->type != LUA_TNONE && val[OPT_DECAY] == 0) {
            tg_lval_show_number(shown, sizeof shown, vmin);
            fail(c, "optimizer.lr_min = %s has no effect without optimizer.decay_steps: lr stays constant after the "
                    "warmup; add decay_steps = <steps of the cosine decay>, or drop lr_min", shown);
        }
    } else if (t->type != LUA_TNONE) {
        tg_lval_describe(shown, sizeof shown, t);
        fail(c, "optimizer must be a table such as { lr = 1e-3, weight_decay = 0.01 }, got %s", shown);
    }
    s->opt = (tg_adamw){.lr = val[OPT_LR], .beta1 = val[OPT_BETA1], .beta2 = val[OPT_BETA2], .eps = val[OPT_EPS],
                        .weight_decay = val[OPT_WD], .warmup = (long long)val[OPT_WARMUP],
                        .decay_steps = (long long)val[OPT_DECAY], .lr_min = val[OPT_LR_MIN],
                        .clip = val[OPT_CLIP]};
}

/* optimizer.shard = true: the AdamW state of every weight held by the d ranks of a depth group is split over them
 * (ZeRO-1, docs/TRAINING.md "Optimizer state sharded over depth"): a reduce-scatter of the gradient instead of the
 * all-reduce, AdamW on a 1/d slice, an all-gather of the updated weight. Boolean, default false; only with
 * mode = "train" and the tesseract scheme. With d = 1 it is accepted and changes nothing (--summary says so). Not
 * built for dtype = "bf16": refused, naming the fix (the CUDA backend: tessgen's main, with the backends). Called
 * once mode, scheme and dtype are known. */
static void check_shard(spec_ctx *c, tg_spec *s)
{
    const tg_lval *v = &c->val[LVL_OPT][OPT_SHARD];
    char shown[256];
    s->opt.shard = false;
    if (c->val[LVL_TOP][TOP_OPT].type != LUA_TTABLE || v->type == LUA_TNONE)
        return;
    if (v->type != LUA_TBOOLEAN) {
        tg_lval_describe(shown, sizeof shown, v);
        fail(c, "optimizer.shard must be true or false, got %s; use shard = true to split the AdamW moments over "
                "the depth groups (docs/TRAINING.md), or drop the key", shown);
        return;
    }
    if (!v->b)
        return;
    if (s->mode != TG_TRAIN) {
        fail(c, "optimizer.shard = true is given without mode = \"train\": it splits the AdamW state of a training "
                "program; add mode = \"train\" or drop shard");
        return;
    }
    if (s->scheme == TG_SCHEME_MEGATRON) {
        fail(c, "optimizer.shard = true is not supported with scheme = \"megatron\" (it shards over the depth axis "
                "of the tesseract mesh, which the megatron scheme has not); drop shard, or use scheme = \"tesseract\"");
        return;
    }
    if (s->dtype == TG_BF16) {
        fail(c, "optimizer.shard = true is not built for dtype = \"bf16\" (the bf16 copy of each weight would have "
                "to be gathered too); drop shard, or use dtype = \"fp32\"");
        return;
    }
    s->opt.shard = true;
}

/* memory_gib = 80: the memory of one rank (GPU or process), in GiB; every rank's arena must fit in it. */
static void check_memory(spec_ctx *c, tg_spec *s)
{
    const tg_lval *v = &c->val[LVL_TOP][TOP_MEMORY];
    char shown[256];
    s->memory_gib = TG_MEMORY_GIB_DEFAULT;
    if (v->type == LUA_TNONE)
        return;
    if (v->type != LUA_TNUMBER) {
        tg_lval_describe(shown, sizeof shown, v);
        fail(c, "memory_gib must be a number of GiB such as 80 (an H100's memory), got %s", shown);
        return;
    }
    double g = tg_lval_num(v);
    if (!isfinite(g) || !(g > 0) || g > 1048576) {
        tg_lval_show_number(shown, sizeof shown, v);
        fail(c, "memory_gib = %s is out of range: the memory of one rank in GiB, > 0 and at most 1048576; "
                "use e.g. memory_gib = 80 for an 80 GB GPU", shown);
        return;
    }
    s->memory_gib = g;
}

/* backends = { "cpu", "cuda" }: which per-rank programs to emit; "cpu" always among them. */
static void check_backends(spec_ctx *c, tg_spec *s)
{
    const tg_lval *t = &c->val[LVL_TOP][TOP_BACKENDS];
    char shown[256];
    s->backends = 0;
    if (t->type == LUA_TNONE)
        return;
    if (t->type != LUA_TTABLE) {
        tg_lval_describe(shown, sizeof shown, t);
        fail(c, "backends must be a list such as { \"cpu\", \"cuda\" }, got %s", shown);
        return;
    }
    if (c->list_keyed) {
        fail(c, "backends must be a list such as { \"cpu\", \"cuda\" }: write the names without keys");
        return;
    }
    if (c->nlist == 0) {
        fail(c, "backends is empty: use backends = { \"cpu\" } or backends = { \"cpu\", \"cuda\" }");
        return;
    }
    if (c->nlist > SPEC_MAX_LIST) {
        fail(c, "backends has %d entries: there are two backends, \"cpu\" and \"cuda\"", c->nlist);
        return;
    }
    unsigned bits = 0;
    bool ok = true;
    for (int k = 0; k < c->nlist; k++) {
        const tg_lval *v = &c->list[k];
        unsigned bit = 0;
        if (tg_lval_str_is(v, "cpu"))
            bit = TG_BACKEND_CPU;
        else if (tg_lval_str_is(v, "cuda"))
            bit = TG_BACKEND_CUDA;
        if (!bit) {
            tg_lval_describe(shown, sizeof shown, v);
            fail(c, "backends[%d] = %s is not a backend: use \"cpu\" or \"cuda\"", k + 1, shown);
            ok = false;
        } else if (bits & bit) {
            fail(c, "backends lists \"%s\" twice: list each backend once", bit == TG_BACKEND_CPU ? "cpu" : "cuda");
            ok = false;
        }
        bits |= bit;
    }
    if (ok && !(bits & TG_BACKEND_CPU)) {
        fail(c, "backends = { \"cuda\" } leaves out \"cpu\": the CPU program is always emitted (it is the "
                "reference the CUDA program is checked against); use backends = { \"cpu\", \"cuda\" }");
        ok = false;
    }
    if (ok)
        s->backends = bits;
}

static bool check_eps(spec_ctx *c, tg_spec *s)
{
    const tg_lval *v = &c->val[LVL_MODEL][MODEL_EPS];
    char shown[256];
    s->eps = 1e-5;
    if (v->type == LUA_TNONE)
        return true;
    if (v->type != LUA_TNUMBER) {
        tg_lval_describe(shown, sizeof shown, v);
        fail(c, "model.eps must be a number such as 1e-5, got %s", shown);
        return false;
    }
    double e = tg_lval_num(v);
    if (!isfinite(e) || !(e >= SPEC_MIN_EPS) || !(e < 1)) {
        tg_lval_show_number(shown, sizeof shown, v);
        fail(c, "model.eps = %s is out of range: the layernorm epsilon must be >= 1e-30 and < 1 (a smaller one is 0 "
                "or subnormal in float32, and a constant row gives 0/0); use eps = 1e-5", shown);
        return false;
    }
    s->eps = e;
    return true;
}

/* One per-rank element count that must fit in an int. */
static void check_count(spec_ctx *c, const char *what, const char *formula, long long n,
                        const char *fix)
{
    if (n <= INT32_MAX)
        return;
    if (n == LLONG_MAX) {
        fail(c, "%s %s is more than %lld elements and does not fit in a 32-bit int (at most %d; "
                "MPI and BLAS counts are int); %s", what, formula, LLONG_MAX, INT32_MAX, fix);
        return;
    }
    fail(c, "%s %s = %lld elements does not fit in a 32-bit int (at most %d; MPI and BLAS "
            "counts are int); %s", what, formula, n, INT32_MAX, fix);
}

static long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

/* a*b for a, b >= 0, LLONG_MAX when it does not fit */
static long long sat_mul(long long a, long long b)
{
    if (a != 0 && b > LLONG_MAX / a)
        return LLONG_MAX;
    return a * b;
}

/* model.vocab, model.positions, model.tie (docs/MODEL.md): the whole GPT-2 with embedding, ln_f and the tied
 * LM head; absent vocab means the block stack alone. */
static void check_lm(spec_ctx *c, tg_spec *s, bool ok_seq)
{
    const tg_lval *vv = &c->val[LVL_MODEL][MODEL_VOCAB], *pv = &c->val[LVL_MODEL][MODEL_POSITIONS];
    const tg_lval *tv = &c->val[LVL_MODEL][MODEL_TIE], *av = &c->val[LVL_MODEL][MODEL_VOCAB_ALIGN];
    char shown[256];
    s->vocab = s->positions = 0;
    s->vocab_align = 1;
    if (vv->type == LUA_TNONE) {
        if (av->type != LUA_TNONE)
            fail(c, "model.vocab_align is given without model.vocab: it pads the LM head's vocabulary blocks, which "
                    "exist only with a vocabulary; add vocab = <V> or drop vocab_align");
        if (pv->type != LUA_TNONE)
            fail(c, "model.positions is given without model.vocab: positions belong to the token embedding; add "
                    "vocab = <V> (e.g. 50257) or drop positions");
        if (tv->type != LUA_TNONE)
            fail(c, "model.tie is given without model.vocab: the LM head exists only with a vocabulary; add vocab = "
                    "<V> or drop tie");
        return;
    }
    bool ok_v = check_int(c, LVL_MODEL, MODEL_VOCAB, SPEC_MAX_VOCAB, &s->vocab);
    if (ok_v && s->vocab < 2) {
        fail(c, "model.vocab = %d is too small: a language model predicts one of at least 2 tokens; use vocab >= 2",
             s->vocab);
        ok_v = false;
    }
    bool ok_p = false;
    if (pv->type == LUA_TNONE)
        fail(c, "model.positions is missing (the learned positions P, at least seq); add positions = <P> to model "
                "(GPT-2: 1024)");
    else
        ok_p = check_int(c, LVL_MODEL, MODEL_POSITIONS, SPEC_MAX_DIM, &s->positions);
    if (ok_p && ok_seq && s->positions < s->seq) {
        fail(c, "model.positions = %d is smaller than model.seq = %d: every token position needs a learned "
                "embedding; use positions >= %d", s->positions, s->seq, s->seq);
        ok_p = false;
    }
    if (tv->type != LUA_TNONE) {
        if (tv->type != LUA_TBOOLEAN) {
            tg_lval_describe(shown, sizeof shown, tv);
            fail(c, "model.tie must be true or false, got %s; use tie = true (the LM head is the token embedding)",
                 shown);
        } else if (!tv->b) {
            fail(c, "model.tie = false is not supported: only the tied LM head is supported (lm_head.weight = "
                    "wte.weight, as in GPT-2); drop tie or use tie = true");
        }
    }
    /* model.vocab_align a: each rank's vocab block ceil(V/q) (megatron: ceil(V/p)) rounded up to a multiple of a,
     * so the logits [rows, Vq] and wte block [Vq, C/q] have rows cuBLAS's tensor-core kernels take (bf16: a
     * multiple of 8); the pad is zero, outside max/sum/loss, gradient 0 (docs/MODEL.md "Padding") */
    if (av->type != LUA_TNONE && check_int(c, LVL_MODEL, MODEL_VOCAB_ALIGN, SPEC_MAX_DIM, &s->vocab_align) &&
        s->vocab_align > TG_SPEC_MAX_VOCAB_ALIGN) {
        fail(c, "model.vocab_align = %d is larger than %d: every rank's vocab block would carry up to %d rows of "
                "zero pad; use vocab_align <= %d (64 suits tensor cores)", s->vocab_align, TG_SPEC_MAX_VOCAB_ALIGN,
             s->vocab_align - 1, TG_SPEC_MAX_VOCAB_ALIGN);
        s->vocab_align = 1;
    }
    if (s->vocab_align < 1)
        s->vocab_align = 1;
    if (!ok_v || !ok_p) {
        s->vocab = s->positions = 0;
        if (c->rep.nfail == 0)
            fail(c, "model.vocab: internal: refused without a message");
    }
}

/* mode = "generate" (docs/GENERATE.md): model.context N is the KV-cache length, required with the mode and refused
 * without it; the whole language model is needed (model.vocab: tokens in, tokens out); seq <= N <= positions (the
 * prompt fits the cache, every cached position has a learned embedding). This slice plans the Tesseract scheme's fp32
 * program only: the megatron scheme and dtype = "bf16" are refused here, the CUDA backend where tessgen picks the
 * backends (main.c). */
static void check_generate(spec_ctx *c, tg_spec *s, bool ok_seq)
{
    const tg_lval *v = &c->val[LVL_MODEL][MODEL_CONTEXT];
    s->context = 0;
    if (s->mode != TG_GENERATE) {
        if (v->type != LUA_TNONE)
            fail(c, "model.context is given without mode = \"generate\": it is the KV-cache length of text "
                    "generation; add mode = \"generate\" or drop context");
        return;
    }
    if (c->val[LVL_MODEL][MODEL_VOCAB].type == LUA_TNONE)
        fail(c, "mode = \"generate\" needs model.vocab: generation reads and writes token ids through the embedding "
                "and the tied LM head; add vocab = <V> and positions = <P> to model");
    if (s->scheme == TG_SCHEME_MEGATRON)
        fail(c, "mode = \"generate\" is not built for scheme = \"megatron\": only the Tesseract layout has a prefill "
                "and a decode program; drop scheme, or use mode = \"infer\"");
    if (s->attention == TG_ATTN_CUDNN)
        fail(c, "mode = \"generate\" is not built with attention = \"cudnn\": the KV cache is written from the "
                "biased fp32 Q, K, V that only attention = \"cublas\" keeps; drop attention (docs/GENERATE.md)");
    if (v->type == LUA_TNONE) {
        fail(c, "model.context is missing: mode = \"generate\" needs the KV-cache length N (prompt plus generated "
                "tokens, seq <= N <= positions); add context = <N> to model (GPT-2: 1024)");
        return;
    }
    if (!check_int(c, LVL_MODEL, MODEL_CONTEXT, SPEC_MAX_DIM, &s->context))
        return;
    if (ok_seq && s->context < s->seq) {
        fail(c, "model.context = %d is smaller than model.seq = %d: the prompt (up to seq tokens) must fit the KV "
                "cache; use context >= %d", s->context, s->seq, s->seq);
        s->context = 0;
    } else if (s->positions > 0 && s->context > s->positions) {
        fail(c, "model.context = %d is larger than model.positions = %d: every cached position needs a learned "
                "position embedding; use context <= %d", s->context, s->positions, s->positions);
        s->context = 0;
    }
}

/* decode_layout = "auto" (default), "summa" or "stationary": how generation's decode step computes its linears
 * (docs/GENERATE.md "The weight-stationary layout"); only with mode = "generate". */
static void check_decode_layout(spec_ctx *c, tg_spec *s)
{
    const tg_lval *v = &c->val[LVL_TOP][TOP_DECODE_LAYOUT];
    char shown[256];
    s->decode_layout = TG_DECODE_AUTO;
    if (v->type == LUA_TNONE)
        return;
    if (s->mode != TG_GENERATE) {
        fail(c, "decode_layout is given without mode = \"generate\": it chooses how text generation's decode step "
                "computes its linears; add mode = \"generate\" or drop decode_layout");
        return;
    }
    if (tg_lval_str_is(v, "auto"))
        return;
    if (tg_lval_str_is(v, "summa")) {
        s->decode_layout = TG_DECODE_SUMMA;
        return;
    }
    if (tg_lval_str_is(v, "stationary")) {
        s->decode_layout = TG_DECODE_STATIONARY;
        return;
    }
    if (v->type == LUA_TSTRING)
        tg_lval_quote(shown, sizeof shown, v->s, tg_lval_stored_len(v), v->slen);
    else
        tg_lval_describe(shown, sizeof shown, v);
    fail(c, "decode_layout = %s is not a decode layout: use \"auto\" (the default: the layout that moves fewer bytes "
            "per decode step), \"summa\" (the weights broadcast) or \"stationary\" (the weights stay, the "
            "activations move; docs/GENERATE.md)", shown);
}

/* pipeline = { microbatches = m }: a training step runs m micro-batches of the per-rank batch, accumulating the
 * weight gradients (docs/TRAINING.md "Micro-batches"). m >= 1 (default 1) and divides the sequences of each rank;
 * the table exists only with mode = "train"; the megatron scheme refuses m > 1. per_rank: sequences per rank, or 0
 * when the batch or mesh was refused already. */
static void check_pipeline(spec_ctx *c, tg_spec *s, long long per_rank, const char *per_rank_what)
{
    const tg_lval *t = &c->val[LVL_TOP][TOP_PIPE];
    char shown[256];
    s->microbatches = 1;
    if (t->type == LUA_TNONE)
        return;
    if (t->type != LUA_TTABLE) {
        tg_lval_describe(shown, sizeof shown, t);
        fail(c, "pipeline must be a table such as { microbatches = 4 }, got %s", shown);
        return;
    }
    if (s->mode != TG_TRAIN) {
        fail(c, "pipeline is given without mode = \"train\": micro-batches split a training step (the gradients "
                "of m micro-batches are summed before one optimizer step); add mode = \"train\" or drop pipeline");
        return;
    }
    if (c->val[LVL_PIPE][PIPE_MICROBATCHES].type == LUA_TNONE)
        return;
    int m = 1;
    if (!check_int(c, LVL_PIPE, PIPE_MICROBATCHES, SPEC_MAX_DIM, &m))
        return;
    if (m > 1 && s->scheme == TG_SCHEME_MEGATRON) {
        fail(c, "pipeline.microbatches = %d is not supported with scheme = \"megatron\" (only the tesseract scheme "
                "plans micro-batches); use microbatches = 1, or scheme = \"tesseract\"", m);
        return;
    }
    if (per_rank > 0 && per_rank % m != 0) {
        long long div[512];
        char set[256];
        int n = divisors(per_rank, per_rank, div, 512);
        fmt_set(set, sizeof set, div, n, m);
        fail(c, "pipeline.microbatches = %d does not divide the %lld sequences of each rank (%s): every micro-batch "
                "holds the same whole sequences; use microbatches in %s", m, per_rank, per_rank_what, set);
        return;
    }
    s->microbatches = m;
}

/* mesh.pp = S with pipeline.layers and pipeline.schedule (docs/TRAINING.md "Pipeline stages"): S stages, each a
 * [q,q,d] group, hold contiguous runs of the layers: pipeline.layers = { n0, .., nS-1 } (each >= 1, summing to
 * model.layers), default as even as possible (the L mod S extra layers on stages 1, 2, ..: stage 0 also holds the
 * embedding). schedule "1f1b" (default) or "gpipe". S > 1 is training only, the tesseract scheme only, and refused
 * with optimizer.shard and recompute (not planned across stages). ranks: q*q*d of one group, 0 when refused. */
static void check_stages(spec_ctx *c, tg_spec *s, bool ok_layers, long long ranks)
{
    const tg_lval *pipe = &c->val[LVL_TOP][TOP_PIPE];
    const tg_lval *sv = &c->val[LVL_PIPE][PIPE_SCHEDULE], *lv = &c->val[LVL_PIPE][PIPE_LAYERS];
    char shown[256];
    int S = s->pp;
    memset(s->stage_layers, 0, sizeof s->stage_layers);
    s->schedule = TG_PIPE_1F1B;
    bool have_pipe = pipe->type == LUA_TTABLE && s->mode == TG_TRAIN; /* else check_pipeline refused it */
    if (have_pipe && sv->type != LUA_TNONE) {
        if (tg_lval_str_is(sv, "gpipe")) {
            s->schedule = TG_PIPE_GPIPE;
        } else if (!tg_lval_str_is(sv, "1f1b")) {
            tg_lval_describe(shown, sizeof shown, sv);
            fail(c, "pipeline.schedule must be \"1f1b\" (one forward, one backward: at most S - s micro-batches "
                    "in flight on stage s) or \"gpipe\" (all forwards, then all backwards), got %s", shown);
        }
    }
    if (S > 1) {
        if (s->mode != TG_TRAIN) {
            fail(c, "mesh.pp = %d is given without mode = \"train\": pipeline stages are built for training steps "
                    "only (an inference pipeline is not planned); add mode = \"train\", or use pp = 1", S);
            return;
        }
        if (ranks > 0 && ranks * S > SPEC_MAX_RANKS)
            fail(c, "mesh.pp = %d makes pp*q*q*d = %lld ranks, more than the %lld tessgen supports; use a smaller "
                    "pp, q or d", S, ranks * S, SPEC_MAX_RANKS);
        if (ok_layers && S > s->layers) {
            fail(c, "mesh.pp = %d is more than model.layers = %d: every stage holds at least one layer; use pp <= "
                    "%d", S, s->layers, s->layers);
            return;
        }
    }
    if (!ok_layers)
        return;
    if (!have_pipe || lv->type == LUA_TNONE) { /* as even as possible */
        for (int k = 0; k < S; k++)
            s->stage_layers[k] = s->layers / S;
        for (int k = 0; k < s->layers % S; k++)
            s->stage_layers[1 + k] += 1; /* L mod S < S: stages 1 .. L mod S */
        return;
    }
    char even[128];
    {
        size_t o = (size_t)snprintf(even, sizeof even, "{ ");
        for (int k = 0; k < S && o < sizeof even; k++)
            o += (size_t)snprintf(even + o, sizeof even - o, "%s%d", k ? ", " : "",
                                  s->layers / S + (k >= 1 && k <= s->layers % S));
        if (o < sizeof even)
            snprintf(even + o, sizeof even - o, " }");
    }
    if (lv->type != LUA_TTABLE || c->stages_keyed) {
        tg_lval_describe(shown, sizeof shown, lv);
        fail(c, "pipeline.layers must be a list of layer counts, one per stage, such as %s, got %s%s", even,
             lv->type == LUA_TTABLE ? "a table with keys" : shown, lv->type == LUA_TTABLE ? "; write the counts without keys" : "");
        return;
    }
    if (c->nstages != S) {
        fail(c, "pipeline.layers has %d entr%s but mesh.pp = %d: one layer count per stage; use e.g. layers = %s",
             c->nstages, c->nstages == 1 ? "y" : "ies", S, even);
        return;
    }
    long long sum = 0;
    int bad = 0;
    for (int k = 0; k < S; k++) {
        const tg_lval *v = &c->stages[k];
        bool integral = v->type == LUA_TNUMBER && (v->is_int || (isfinite(v->n) && floor(v->n) == v->n));
        double x = integral ? tg_lval_num(v) : 0;
        if (!integral || x < 1 || x > SPEC_MAX_LAYERS) {
            tg_lval_describe(shown, sizeof shown, v);
            fail(c, "pipeline.layers[%d] = %s is not a positive layer count: stage %d holds at least one layer; use "
                    "e.g. layers = %s", k + 1, shown, k, even);
            bad = 1;
            continue;
        }
        s->stage_layers[k] = (int)x;
        sum += (long long)x;
    }
    if (bad) {
        memset(s->stage_layers, 0, sizeof s->stage_layers);
        return;
    }
    if (sum != s->layers) {
        fail(c, "pipeline.layers sums to %lld, not model.layers = %d: the stages hold contiguous runs of all the "
                "layers; use e.g. layers = %s", sum, s->layers, even);
        memset(s->stage_layers, 0, sizeof s->stage_layers);
    }
}

/* recompute = "none" (default) | "full" | N: the backward recomputes the forward of the first N layers (all of them
 * with "full") from each layer's input instead of keeping its activations (docs/TRAINING.md "Recomputation").
 * Training only, the tesseract scheme only; 0 <= N <= model.layers. ok_layers: model.layers was accepted. */
static void check_recompute(spec_ctx *c, tg_spec *s, bool ok_layers)
{
    const tg_lval *v = &c->val[LVL_TOP][TOP_RECOMPUTE];
    char shown[256];
    s->recompute = 0;
    if (v->type == LUA_TNONE || tg_lval_str_is(v, "none"))
        return;
    int n = -1;
    if (tg_lval_str_is(v, "full")) {
        n = ok_layers ? s->layers : 0;
    } else if (v->type == LUA_TNUMBER && (v->is_int || (isfinite(v->n) && floor(v->n) == v->n))) {
        double x = tg_lval_num(v);
        tg_lval_show_number(shown, sizeof shown, v);
        if (x < 0 || (ok_layers && x > s->layers)) {
            if (ok_layers)
                fail(c, "recompute = %s is out of range: it counts the layers whose activations the backward "
                        "recomputes, 0 to model.layers = %d; use recompute = \"full\" for all of them", shown,
                     s->layers);
            else
                fail(c, "recompute = %s is out of range: it counts layers, 0 or more", shown);
            return;
        }
        n = (int)x;
    } else {
        tg_lval_describe(shown, sizeof shown, v);
        fail(c, "recompute must be \"none\", \"full\" or a number of layers, got %s; use recompute = \"full\" to "
                "keep only each layer's input for the backward (docs/TRAINING.md), or drop the key", shown);
        return;
    }
    if (n > 0 && s->mode != TG_TRAIN) {
        fail(c, "recompute is given without mode = \"train\": it trades the backward's flops for the activations a "
                "training step keeps; add mode = \"train\" or drop recompute");
        return;
    }
    if (n > 0 && s->scheme == TG_SCHEME_MEGATRON) {
        fail(c, "recompute is not supported with scheme = \"megatron\" (only the tesseract scheme plans the "
                "recomputation); drop recompute, or use scheme = \"tesseract\"");
        return;
    }
    s->recompute = n;
}

static void validate(spec_ctx *c, tg_spec *s)
{
    s->microbatches = 1; /* check_pipeline sets it once the batch is known */
    s->pp = 1;           /* check_mesh sets mesh.pp */
    tg_lval_name(&c->rep, &c->val[LVL_TOP][TOP_NAME], "model", "spec", "spec", "gpt2-small", s->name);

    /* mesh and model tables */
    bool have_mesh = false, have_model = false;
    for (int t = TOP_MESH; t <= TOP_MODEL; t++) {
        const tg_lval *v = &c->val[LVL_TOP][t];
        const char *key = level_keys[LVL_TOP][t];
        const char *example = t == TOP_MESH ? "{ q = 2, d = 1 }"
                                            : "{ layers = 12, hidden = 768, heads = 12, ffn = 3072, "
                                              "seq = 1024, batch = 8 }";
        char got[256];
        if (v->type == LUA_TNONE) {
            fail(c, "%s is missing: add %s = %s", key, key, example);
        } else if (v->type != LUA_TTABLE) {
            tg_lval_describe(got, sizeof got, v);
            fail(c, "%s must be a table such as %s, got %s", key, example, got);
        } else if (t == TOP_MESH) {
            have_mesh = true;
        } else {
            have_model = true;
        }
    }
    check_dtype(c, s);
    check_mode(c, s);
    check_scheme(c, s);
    check_attention(c, s);
    check_epilogues(c, s);
    check_decode_layout(c, s);
    check_optimizer(c, s);
    check_backends(c, s);
    check_shard(c, s);
    check_memory(c, s);

    /* unknown keys, sorted so that messages do not depend on Lua's hash order */
    tg_lval_report_unknown(&c->rep, &schema, &c->unknown);

    /* integers: q, d, layers, hidden, heads, ffn, seq, batch */
    bool ok_q = false, ok_d = false, ok_layers = false, ok_hidden = false, ok_heads = false;
    bool ok_ffn = false, ok_seq = false, ok_batch = false, ok_p = false;
    if (have_mesh)
        check_mesh(c, s, &ok_q, &ok_d, &ok_p);
    if (have_model) {
        ok_layers = check_int(c, LVL_MODEL, MODEL_LAYERS, SPEC_MAX_LAYERS, &s->layers);
        ok_hidden = check_int(c, LVL_MODEL, MODEL_HIDDEN, SPEC_MAX_DIM, &s->hidden);
        ok_heads = check_int(c, LVL_MODEL, MODEL_HEADS, SPEC_MAX_DIM, &s->heads);
        ok_ffn = check_int(c, LVL_MODEL, MODEL_FFN, SPEC_MAX_DIM, &s->ffn);
        ok_seq = check_int(c, LVL_MODEL, MODEL_SEQ, SPEC_MAX_DIM, &s->seq);
        ok_batch = check_int(c, LVL_MODEL, MODEL_BATCH, SPEC_MAX_DIM, &s->batch);
        check_eps(c, s);
        check_lm(c, s, ok_seq);
        check_generate(c, s, ok_seq);
    }
    check_recompute(c, s, ok_layers);

    long long q = s->q, d = s->d, C = s->hidden, H = s->heads, F = s->ffn, S = s->seq,
              B = s->batch;
    long long div[512];
    char set[256];
    int n;

    /* ranks */
    if (ok_q && ok_d && q * q * d > SPEC_MAX_RANKS)
        fail(c, "mesh.q = %lld, mesh.d = %lld make q*q*d = %lld ranks, more than the %lld "
                "tessgen supports; use a smaller q or d", q, d, q * q * d, SPEC_MAX_RANKS);

    /* hidden % heads: each head owns hidden/heads columns */
    if (ok_hidden && ok_heads && C % H != 0) {
        /* prefer head counts that also split across the q columns */
        long long all[512], fit[512];
        int na = divisors(C, C, all, 512), nf = 0;
        for (int k = 0; k < na; k++)
            if (ok_q && all[k] % q == 0)
                fit[nf++] = all[k];
        if (nf > 0)
            fmt_set(set, sizeof set, fit, nf, H);
        else
            fmt_set(set, sizeof set, all, na, H);
        fail(c, "model.hidden = %lld is not divisible by model.heads = %lld: each head takes "
                "hidden/heads columns; use heads in %s", C, H, set);
    }
    /* attention = "cudnn": cuDNN's fused attention reads and writes fp16/bf16 only, with head dimensions that are
     * multiples of 8; at most 64 here: the head dimensions a GPU has checked (8 and 64 on an H200, 2026-11-27), and
     * at 128 two forwards of one input differed there (docs/CUDA.md, "Fused attention through cuDNN") */
    /* no attention key: cuDNN's where every rule below holds and the mode keeps no fp32 Q, K, V (generate's KV cache
     * is written from them), else cuBLAS's. The spec alone decides, so one spec is one program on every machine; a
     * GPU or cuDNN that refuses the graph stops the rank naming attention = "cublas" (docs/CUDA.md) */
    if (s->attention_default && s->dtype == TG_BF16 && s->mode != TG_GENERATE && ok_hidden && ok_heads && C % H == 0 &&
        (C / H) % 8 == 0 && C / H <= 64)
        s->attention = TG_ATTN_CUDNN;
    if (s->attention == TG_ATTN_CUDNN) {
        if (s->dtype != TG_BF16)
            fail(c, "attention = \"cudnn\" needs dtype = \"bf16\": cuDNN's fused attention reads bf16 Q, K, V; "
                    "add dtype = \"bf16\", or use attention = \"cublas\" for an fp32 program");
        if (ok_hidden && ok_heads && C % H == 0 && ((C / H) % 8 != 0 || C / H > 64))
            fail(c, "attention = \"cudnn\" needs a head dimension (model.hidden / model.heads = %lld / %lld = %lld) "
                    "that is a multiple of 8 and at most 64 (cuDNN's fused attention as checked on a GPU: at head "
                    "dimension 128 its results were not repeatable, docs/CUDA.md); change hidden or heads, or use "
                    "attention = \"cublas\"", C, H, C / H);
    }
    /* megatron: heads and the MLP columns are split across the p ranks (hidden % p follows) */
    if (s->scheme == TG_SCHEME_MEGATRON && ok_p) {
        long long p = s->p;
        if (ok_heads && H % p != 0) {
            n = divisors(H, SPEC_MAX_RANKS, div, 512);
            fmt_set(set, sizeof set, div, n, p);
            fail(c, "model.heads = %lld is not divisible by mesh.p = %lld: the megatron scheme splits the heads "
                    "across the p ranks; use p in %s", H, p, set);
        }
        if (ok_ffn && F % p != 0) {
            n = divisors(F, SPEC_MAX_RANKS, div, 512);
            fmt_set(set, sizeof set, div, n, p);
            long long lo = F / p * p;
            fail(c, "model.ffn = %lld is not divisible by mesh.p = %lld: the megatron scheme splits the MLP "
                    "columns across the p ranks; use ffn = %lld, or p in %s", F, p, lo > 0 ? lo + p : p, set);
        }
        if (ok_batch && ok_seq && ok_hidden && ok_ffn) {
            long long wide = (3 * C > F ? 3 * C : F) / p;
            check_count(c, "the per-rank activation block", "(batch*seq)*max(hidden, max(3*hidden, ffn)/p)",
                        sat_mul(B * S, wide > C ? wide : C), "use a smaller batch or seq");
            check_count(c, "the per-rank MLP weight block", "hidden*(ffn/p)", sat_mul(C, ceil_div(F, p)),
                        "use a smaller hidden or ffn, or a larger p");
        }
        if (ok_hidden)
            check_count(c, "the per-rank QKV weight block", "hidden*(3*hidden/p)", sat_mul(C, ceil_div(3 * C, p)),
                        "use a smaller hidden or a larger p");
        if (ok_batch && ok_heads && ok_seq)
            check_count(c, "the per-rank attention scores", "batch*(heads/p)*seq*seq",
                        sat_mul(sat_mul(sat_mul(B, ceil_div(H, p)), S), S), "use a smaller seq or batch");
        if (ok_batch && ok_seq)
            check_count(c, "the token count", "batch*seq", B * S, "use a smaller batch or seq");
        if (s->vocab > 0 && ok_hidden && ok_batch && ok_seq) {
            /* the language model (plan_megatron_lm.c): every token, vocab block r of ceil(vocab/p) rows, whole width */
            long long Vq = tg_spec_vocab_block(s, p);
            bool al = s->vocab_align > 1;
            check_count(c, "the per-rank logits block",
                        al ? "batch*seq*Vq (Vq: ceil(vocab/p) rounded up to vocab_align)" : "batch*seq*ceil(vocab/p)",
                        sat_mul(B * S, Vq), "use a smaller batch, seq or vocab, or a larger p");
            check_count(c, "the per-rank token embedding block", al ? "Vq*hidden" : "ceil(vocab/p)*hidden",
                        sat_mul(Vq, C),
                        "use a smaller vocab or hidden, or a larger p");
            check_count(c, "the per-rank position embedding block", "positions*hidden", sat_mul(s->positions, C),
                        "use fewer positions or a smaller hidden");
        }
        check_pipeline(c, s, ok_batch ? B : 0, "model.batch: the megatron scheme gives every rank the whole batch");
        check_stages(c, s, ok_layers, 0);
        return;
    }
    /* heads % q: heads are split across the q columns */
    if (ok_heads && ok_q && H % q != 0) {
        n = divisors(H, SPEC_MAX_MESH, div, 512);
        fmt_set(set, sizeof set, div, n, q);
        fail(c, "model.heads = %lld is not divisible by mesh.q = %lld: heads are split across the "
                "q columns; use q in %s", H, q, set);
    }
    /* hidden % q */
    if (ok_hidden && ok_q && C % q != 0) {
        n = divisors(C, SPEC_MAX_MESH, div, 512);
        fmt_set(set, sizeof set, div, n, q);
        fail(c, "model.hidden = %lld is not divisible by mesh.q = %lld: the hidden columns are "
                "split across the q columns; use q in %s", C, q, set);
    }
    /* ffn % q */
    if (ok_ffn && ok_q && F % q != 0) {
        n = divisors(F, SPEC_MAX_MESH, div, 512);
        fmt_set(set, sizeof set, div, n, q);
        long long lo = F / q * q;
        if (lo > 0)
            fail(c, "model.ffn = %lld is not divisible by mesh.q = %lld: the MLP columns are split "
                    "across the q columns; use ffn = %lld or %lld, or q in %s", F, q, lo, lo + q, set);
        else
            fail(c, "model.ffn = %lld is not divisible by mesh.q = %lld: the MLP columns are split "
                    "across the q columns; use ffn = %lld, or q in %s", F, q, q, set);
    }
    /* batch % (q*d): each row block holds whole sequences */
    if (ok_batch && ok_q && ok_d && B % (q * d) != 0) {
        long long qd = q * d, lo = B / qd * qd;
        char fix[96];
        if (lo > 0)
            snprintf(fix, sizeof fix, "%lld or %lld", lo, lo + qd);
        else
            snprintf(fix, sizeof fix, "%lld, %lld, ...", qd, 2 * qd);
        fail(c, "model.batch = %lld is not divisible by q*d = %lld (mesh.q = %lld, mesh.d = %lld): "
                "each of the q*d row blocks holds whole sequences; use batch = %s", B, qd, q, d, fix);
    }
    {
        char what[160];
        snprintf(what, sizeof what, "model.batch / (q*d) = %lld / %lld", B, q * d);
        check_pipeline(c, s, ok_batch && ok_q && ok_d && B % (q * d) == 0 ? B / (q * d) : 0, what);
        check_stages(c, s, ok_layers, ok_q && ok_d ? q * q * d : 0);
    }

    /* int32 guards; ceil divisions so an indivisible field cannot hide an overflow */
    if (ok_batch && ok_seq)
        check_count(c, "the token count", "batch*seq", B * S, "use a smaller batch or seq");
    if (ok_batch && ok_seq && ok_q && ok_d && ok_hidden && ok_ffn) {
        long long wide = 3 * C > F ? 3 * C : F;
        check_count(c, "the per-rank activation block", "(batch*seq/(q*d))*(max(3*hidden, ffn)/q)",
                    sat_mul(ceil_div(B * S, q * d), ceil_div(wide, q)),
                    "use a smaller batch or seq, or a larger q or d");
    }
    if (ok_hidden && ok_q)
        check_count(c, "the per-rank QKV weight block", "(hidden/q)*(3*hidden/q)",
                    ceil_div(C, q) * ceil_div(3 * C, q), "use a smaller hidden or a larger q");
    if (ok_hidden && ok_ffn && ok_q)
        check_count(c, "the per-rank MLP weight block", "(hidden/q)*(ffn/q)",
                    ceil_div(C, q) * ceil_div(F, q), "use a smaller hidden or ffn, or a larger q");
    if (s->vocab > 0 && ok_q && ok_d && ok_hidden && ok_batch && ok_seq) { /* the language model's blocks */
        long long Vq = tg_spec_vocab_block(s, q);
        bool al = s->vocab_align > 1;
        check_count(c, "the per-rank logits block",
                    al ? "(batch*seq/(q*d))*Vq (Vq: ceil(vocab/q) rounded up to vocab_align)"
                       : "(batch*seq/(q*d))*ceil(vocab/q)",
                    sat_mul(ceil_div(B * S, q * d), Vq), "use a smaller batch, seq or vocab, or a larger q or d");
        check_count(c, "the per-rank token embedding block", al ? "Vq*(hidden/q)" : "ceil(vocab/q)*(hidden/q)",
                    sat_mul(Vq, ceil_div(C, q)),
                    "use a smaller vocab or hidden, or a larger q");
        check_count(c, "the per-rank position embedding block", "positions*(hidden/q)",
                    sat_mul(s->positions, ceil_div(C, q)), "use fewer positions or a larger q");
    }
    if (s->context > 0 && ok_batch && ok_hidden && ok_q && ok_d) /* one layer's KV cache (docs/GENERATE.md) */
        check_count(c, "the per-rank KV cache of one layer", "(batch/(q*d))*context*2*(hidden/q)",
                    sat_mul(sat_mul(ceil_div(B, q * d), s->context), 2 * ceil_div(C, q)),
                    "use a smaller batch or context, or a larger q or d");
    if (ok_batch && ok_heads && ok_seq && ok_q && ok_d)
        check_count(c, "the per-rank attention scores", "(batch/(q*d))*(heads/q)*seq*seq",
                    sat_mul(sat_mul(sat_mul(ceil_div(B, q * d), ceil_div(H, q)), S), S),
                    "use a smaller seq or batch, or a larger q or d");
}

/* ---- entry points ---------------------------------------------------------- */

static bool load_source(const char *path, const char *src, size_t len, tg_spec *out, tg_err *err)
{
    spec_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return tg_fail(err, "%s: cannot read spec: out of memory", path);
    c->rep.path = path;
    c->rep.err = err;
    c->src = src;
    c->src_len = len;
    tg_spec s;
    memset(&s, 0, sizeof s);
    if (strlen(path) >= sizeof s.path) {
        fail(c, "the path is longer than %zu characters", sizeof s.path - 1);
    } else if (len > (size_t)SPEC_MAX_FILE_BYTES) {
        fail(c, "the spec is larger than %ld bytes: a spec is a table of numbers", SPEC_MAX_FILE_BYTES);
    } else if (run_lua(c)) {
        memcpy(s.path, path, strlen(path) + 1);
        validate(c, &s);
    }
    bool ok = c->rep.nfail == 0;
    if (ok)
        *out = s;
    free(c);
    return ok;
}

bool tg_spec_load_string(const char *chunkname, const char *src, tg_spec *out, tg_err *err)
{
    return load_source(chunkname, src, strlen(src), out, err);
}

bool tg_spec_load_buffer(const char *chunkname, const char *src, size_t len, tg_spec *out, tg_err *err)
{
    return load_source(chunkname, src, len, out, err);
}

/* ", vocab = V, positions = P[, vocab_align = a]" of a spec with a vocabulary, else "" */
static const char *lm_keys(char *buf, size_t cap, const tg_spec *s)
{
    char align[40] = "";
    buf[0] = '\0';
    if (s->vocab_align > 1)
        snprintf(align, sizeof align, ", vocab_align = %d", s->vocab_align);
    if (s->vocab > 0)
        snprintf(buf, cap, ", vocab = %d, positions = %d%s", s->vocab, s->positions, align);
    return buf;
}

/* ", pipeline = { microbatches = m }" of a spec with m > 1, else "" */
static const char *pipe_keys(char *buf, size_t cap, const tg_spec *s)
{
    buf[0] = '\0';
    size_t n = 0;
    if (s->microbatches > 1)
        n = (size_t)snprintf(buf, cap, ", pipeline = { microbatches = %d }", s->microbatches);
    if (s->recompute > 0 && n < cap) /* the same rules: the megatron scheme refuses it */
        snprintf(buf + n, cap - n, ", recompute = %d", s->recompute);
    return buf;
}

bool tg_spec_on_mesh(const tg_spec *s, int q, int d, tg_spec *out, tg_err *err)
{
    char src[600], chunk[sizeof s->path + 64], lm[80], pipe[96];
    lm_keys(lm, sizeof lm, s);
    snprintf(src, sizeof src,
             "return { name = \"%s\", mesh = { q = %d, d = %d, pp = %d }, model = { layers = %d, hidden = %d, "
             "heads = %d, ffn = %d, seq = %d, batch = %d, eps = %.17g%s }%s%s }",
             s->name, q, d, s->pp, s->layers, s->hidden, s->heads, s->ffn, s->seq, s->batch, s->eps, lm,
             s->mode == TG_TRAIN ? ", mode = \"train\"" : "", pipe_keys(pipe, sizeof pipe, s));
    snprintf(chunk, sizeof chunk, "%s as [%d,%d,%d]", s->path, q, q, d);
    tg_spec alt;
    if (!load_source(chunk, src, strlen(src), &alt, err))
        return false;
    *out = *s;
    out->scheme = TG_SCHEME_TESSERACT;
    out->q = q;
    out->d = d;
    out->p = q * q * d;
    return true;
}

bool tg_spec_on_megatron(const tg_spec *s, int p, tg_spec *out, tg_err *err)
{
    char src[600], chunk[sizeof s->path + 64], lm[80], pipe[96];
    lm_keys(lm, sizeof lm, s);
    snprintf(src, sizeof src,
             "return { name = \"%s\", scheme = \"megatron\", mesh = { p = %d }, model = { layers = %d, hidden = %d, "
             "heads = %d, ffn = %d, seq = %d, batch = %d, eps = %.17g%s }%s%s }",
             s->name, p, s->layers, s->hidden, s->heads, s->ffn, s->seq, s->batch, s->eps, lm,
             s->mode == TG_TRAIN ? ", mode = \"train\"" : "", pipe_keys(pipe, sizeof pipe, s));
    snprintf(chunk, sizeof chunk, "%s as megatron p=%d", s->path, p);
    tg_spec alt;
    if (!load_source(chunk, src, strlen(src), &alt, err))
        return false;
    *out = *s;
    out->scheme = TG_SCHEME_MEGATRON;
    out->q = out->d = 1;
    out->p = p;
    out->pp = 1; /* the megatron scheme has no stages: the whole model on p ranks */
    memset(out->stage_layers, 0, sizeof out->stage_layers);
    out->stage_layers[0] = s->layers;
    return true;
}

bool tg_spec_load(const char *path, tg_spec *out, tg_err *err)
{
    char *buf;
    size_t len;
    if (!tg_infile_read(path, "cannot read spec", "", (size_t)SPEC_MAX_FILE_BYTES, &buf, &len, err))
        return false;
    bool ok;
    if (len > (size_t)SPEC_MAX_FILE_BYTES)
        ok = tg_fail(err, "%s: the spec is larger than %ld bytes: a spec is a table of numbers",
                     path, SPEC_MAX_FILE_BYTES);
    else
        ok = load_source(path, buf, len, out, err);
    free(buf);
    return ok;
}
