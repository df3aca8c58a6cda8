/*
 * sandbox.c - the Lua sandbox that spec files (spec.c) and machine files
 * (machine.c) run in.
 *
 * These files are Lua so that users get comments, arithmetic and local
 * helpers, but they are also code that tessgen runs, so they run in a
 * sandbox: only the base, string, table, math and utf8 libraries are opened,
 * and dofile, loadfile, load, require and collectgarbage are removed (there is
 * no os, io, package or debug); only text chunks load (no bytecode); a custom
 * allocator caps the state's memory at SANDBOX_MAX_MEMORY and a count hook
 * stops the chunk after SANDBOX_MAX_INSTRUCTIONS or SANDBOX_MAX_SECONDS. A
 * hostile or broken file yields an error message, never a crash, a hang or a
 * side effect.
 *
 * The count hook cannot see time spent inside C library functions, so every C
 * function left in the sandbox must be bounded by the size limits, or removed
 * (docs/RELIABILITY.md lists each one and its bound). A call hook gates every
 * call: it checks the clock, refuses a call whose string arguments add up to
 * more than SANDBOX_MAX_CALL_BYTES (a C function may read each argument once,
 * so this bounds calls like math.max(table.unpack(t)) over many references to
 * one huge string), and refuses table.insert/table.remove on a table whose
 * length #t (any border, for a table with holes) is more than a table in the
 * memory cap can hold, since they shift every element above the position in C.
 * Removed: setmetatable (__gc finalizers run with hooks off), xpcall (message
 * handlers), string.find/match/gmatch/gsub (backtracking patterns), table.move
 * (a C loop over any index range), table.sort (n log n string comparisons in
 * C, none of them a call), print and warn (output is tessgen's); string.rep
 * is wrapped so that an empty result is not built by looping. Each remaining
 * function then costs at most linear time in its arguments and in memory the
 * cap bounds, and so does each VM instruction; the hook checks the clock every
 * SANDBOX_HOOK_EVERY instructions and at every call.
 *
 * Once the chunk has returned, the hooks are removed and the collector is
 * stopped (no finalizer may run), and the caller's collect function copies the
 * returned value out with raw accesses, still inside the protected call. The
 * limit messages name the kind of file (the noun): "the spec ran more than ...".
 */
#include "sandbox.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#define SANDBOX_MAX_MEMORY ((size_t)64 << 20)     /* bytes the Lua state may hold */
#ifndef SANDBOX_MAX_INSTRUCTIONS                  /* the fuzz build (tests/fuzz) lowers these two */
#define SANDBOX_MAX_INSTRUCTIONS 10000000LL       /* Lua VM instructions the chunk may run */
#endif
#ifndef SANDBOX_MAX_SECONDS
#define SANDBOX_MAX_SECONDS 2.0                   /* CPU time the chunk may run */
#endif
#define SANDBOX_HOOK_EVERY 100                    /* count-hook granularity */
#define SANDBOX_MAX_CALL_BYTES SANDBOX_MAX_MEMORY /* string bytes one call may receive as arguments */
#define SANDBOX_MAX_SEQUENCE ((long long)(SANDBOX_MAX_MEMORY / 16)) /* #t a table in the cap can have */

/* Why the chunk was stopped. */
enum { STOP_INSTRUCTIONS = 1, STOP_TIME, STOP_CALL_BYTES, STOP_SEQUENCE };

typedef struct sandbox {
    const char *path;   /* file name used in every message */
    const char *noun;   /* "spec", "machine file" */
    const char *src;
    size_t src_len;
    tg_sandbox_collect collect;
    void *ud;
    tg_err *err;
    int *nfail;
    int collected;      /* collect was called */
    size_t mem_used;
    long long instructions;
    int stop;           /* why the chunk was stopped (STOP_*), 0 while it runs */
    char stop_call[64]; /* STOP_CALL_BYTES, STOP_SEQUENCE: the function called */
    char stop_where[300]; /* and "<file>:<line>" of the Lua code that called it */
    long long stop_value; /* STOP_CALL_BYTES: the bytes; STOP_SEQUENCE: #t */
    lua_CFunction tinsert, tremove; /* table.insert and table.remove, for the call gate */
    struct timespec start;
} sandbox;

/* ---- messages ------------------------------------------------------------ */

/* Record "<path>: <formatted>". */
__attribute__((format(printf, 2, 3)))
static void fail(sandbox *c, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tg_fail(c->err, "%s: %s", c->path, buf);
    (*c->nfail)++;
}

/* Record a message from Lua, which usually already starts with "<path>:<line>:".
 * Control characters are flattened so it stays one line. */
static void fail_lua(sandbox *c, const char *msg)
{
    char buf[1024];
    size_t n = 0;
    for (; msg[n] && n + 1 < sizeof buf; n++)
        buf[n] = ((unsigned char)msg[n] < 0x20 || msg[n] == 0x7f) ? ' ' : msg[n];
    buf[n] = '\0';
    if (msg[n] && n > 4)
        memcpy(buf + n - 3, "...", 3);
    size_t plen = strlen(c->path);
    if (strncmp(buf, c->path, plen) == 0 && buf[plen] == ':')
        tg_fail(c->err, "%s", buf);
    else
        tg_fail(c->err, "%s: %s", c->path, buf);
    (*c->nfail)++;
}

/* ---- allocator, hooks and the call gate ---------------------------------- */

static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    sandbox *c = ud;
    size_t old = ptr ? osize : 0; /* ptr == NULL: osize is a type tag */
    if (nsize == 0) {
        free(ptr);
        c->mem_used -= old;
        return NULL;
    }
    if (nsize > old && (c->mem_used >= SANDBOX_MAX_MEMORY ||
                        nsize - old > SANDBOX_MAX_MEMORY - c->mem_used))
        return NULL; /* Lua raises LUA_ERRMEM */
    void *p = realloc(ptr, nsize);
    if (!p)
        return NULL;
    c->mem_used = c->mem_used - old + nsize;
    return p;
}

/* CPU seconds since t0. The bound is on the process's CPU time, not the wall clock: a chunk
 * cannot block (it has no I/O), so CPU time bounds its work exactly, and the same spec gets the
 * same verdict on an idle laptop and on a build machine running 30 other jobs. */
static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* string.rep without the C loop that builds an empty result n times. */
static int sandbox_rep(lua_State *L)
{
    size_t l, lsep;
    luaL_checklstring(L, 1, &l);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_optlstring(L, 3, "", &lsep);
    if (n <= 0 || l + lsep == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    int nargs = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, nargs, 1);
    return 1;
}

static void sandbox_hook(lua_State *L, lua_Debug *ar);

/* Stop the chunk for good: from now on every instruction raises, so pcall in the
 * chunk cannot swallow the stop. The message comes from c->stop. */
static void sandbox_stop(lua_State *L, sandbox *c, int why)
{
    if (!c->stop)
        c->stop = why;
    lua_sethook(L, sandbox_hook, LUA_MASKCOUNT, 1);
    lua_pushliteral(L, "stopped by the sandbox");
    lua_error(L);
}

/* The call gate, before a C function runs: the bytes of its string arguments, and
 * #t for table.insert/table.remove (see the top of the file). */
static void gate_c_call(lua_State *L, lua_Debug *ar, sandbox *c)
{
    size_t bytes = 0;
    for (int n = 1; lua_getlocal(L, ar, n); n++) { /* a C function's locals are its arguments */
        if (lua_type(L, -1) == LUA_TSTRING)
            bytes += lua_rawlen(L, -1);
        lua_pop(L, 1);
    }
    long long len = 0;
    int over = 0;
    if (bytes > SANDBOX_MAX_CALL_BYTES) {
        over = STOP_CALL_BYTES;
    } else if (lua_getinfo(L, "f", ar)) {
        lua_CFunction f = lua_tocfunction(L, -1);
        lua_pop(L, 1);
        if ((f == c->tinsert || f == c->tremove) && lua_getlocal(L, ar, 1)) {
            if (lua_type(L, -1) == LUA_TTABLE)
                len = (long long)lua_rawlen(L, -1);
            lua_pop(L, 1);
            if (len > SANDBOX_MAX_SEQUENCE)
                over = STOP_SEQUENCE;
        }
    }
    if (!over)
        return;
    const char *name = lua_getinfo(L, "n", ar) && ar->name ? ar->name : "?";
    snprintf(c->stop_call, sizeof c->stop_call, "%s", name);
    lua_Debug at;
    snprintf(c->stop_where, sizeof c->stop_where, "%s", c->path);
    for (int level = 1; lua_getstack(L, level, &at); level++) /* the nearest Lua caller */
        if (lua_getinfo(L, "Sl", &at) && at.currentline > 0) {
            snprintf(c->stop_where, sizeof c->stop_where, "%s:%d", at.short_src, at.currentline);
            break;
        }
    c->stop_value = over == STOP_CALL_BYTES ? (long long)bytes : len;
    sandbox_stop(L, c, over);
}

static void sandbox_hook(lua_State *L, lua_Debug *ar)
{
    void *ud;
    lua_getallocf(L, &ud);
    sandbox *c = ud;
    if (ar->event == LUA_HOOKCOUNT) {
        c->instructions += SANDBOX_HOOK_EVERY;
        if (c->instructions > SANDBOX_MAX_INSTRUCTIONS)
            sandbox_stop(L, c, STOP_INSTRUCTIONS);
    }
    if (c->stop)
        sandbox_stop(L, c, c->stop);
    if (seconds_since(&c->start) > SANDBOX_MAX_SECONDS)
        sandbox_stop(L, c, STOP_TIME);
    if ((ar->event == LUA_HOOKCALL || ar->event == LUA_HOOKTAILCALL) && lua_getinfo(L, "S", ar) &&
        ar->what[0] == 'C')
        gate_c_call(L, ar, c);
}

/* Message handler: make sure the message is a string that names file and line. */
static int sandbox_msgh(lua_State *L)
{
    const char *msg;
    if (lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER)
        msg = lua_tostring(L, 1);
    else
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    lua_Debug ar;
    for (int level = 0; lua_getstack(L, level, &ar); level++) {
        if (!lua_getinfo(L, "Sl", &ar) || ar.currentline <= 0)
            continue;
        size_t n = strlen(ar.short_src);
        if (strncmp(msg, ar.short_src, n) != 0 || msg[n] != ':')
            lua_pushfstring(L, "%s:%d: %s", ar.short_src, ar.currentline, msg);
        else
            lua_pushstring(L, msg);
        return 1;
    }
    lua_pushstring(L, msg);
    return 1;
}

/* ---- running a chunk ------------------------------------------------------- */

/* Open the sandboxed libraries: base, string, table, math, utf8 less what is banned (see the top). */
static void open_libs(lua_State *L, sandbox *c)
{
    static const luaL_Reg libs[] = {
        {"_G", luaopen_base},        {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8},
    };
    for (size_t k = 0; k < sizeof libs / sizeof libs[0]; k++) {
        luaL_requiref(L, libs[k].name, libs[k].func, 1);
        lua_pop(L, 1);
    }
    static const char *const banned[] = {"dofile",  "loadfile", "load",         "require",
                                         "collectgarbage", "os", "io", "package", "debug",
                                         "setmetatable", "xpcall", "print", "warn"};
    for (size_t k = 0; k < sizeof banned / sizeof banned[0]; k++) {
        lua_pushnil(L);
        lua_setglobal(L, banned[k]);
    }
    static const char *const banned_string[] = {"find", "match", "gmatch", "gsub"};
    lua_getglobal(L, LUA_STRLIBNAME);
    for (size_t k = 0; k < sizeof banned_string / sizeof banned_string[0]; k++) {
        lua_pushnil(L);
        lua_setfield(L, -2, banned_string[k]);
    }
    lua_getfield(L, -1, "rep");
    lua_pushcclosure(L, sandbox_rep, 1);
    lua_setfield(L, -2, "rep");
    lua_pop(L, 1);
    lua_getglobal(L, LUA_TABLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "move");
    lua_pushnil(L);
    lua_setfield(L, -2, "sort");
    lua_getfield(L, -1, "insert");
    c->tinsert = lua_tocfunction(L, -1);
    lua_getfield(L, -2, "remove");
    c->tremove = lua_tocfunction(L, -1);
    lua_pop(L, 3);
}

/* Runs in protected mode: set up the sandbox, run the chunk, hand what it returned to collect. */
static int sandbox_main(lua_State *L)
{
    sandbox *c = lua_touserdata(L, 1);
    const char *noun = c->noun;
    open_libs(L, c);

    lua_pushcfunction(L, sandbox_msgh);
    int msgh = lua_gettop(L);
    lua_pushfstring(L, "@%s", c->path);
    const char *chunkname = lua_tostring(L, -1);
    int st = luaL_loadbufferx(L, c->src, c->src_len, chunkname, "t");
    if (st != LUA_OK) {
        if (st == LUA_ERRMEM)
            fail(c, "the %s is too large to load: a %s is a table of numbers", noun, noun);
        else if (lua_isstring(L, -1))
            fail_lua(c, lua_tostring(L, -1));
        else
            fail(c, "cannot load the %s", noun);
        return 0;
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c->start);
    lua_sethook(L, sandbox_hook, LUA_MASKCOUNT | LUA_MASKCALL, SANDBOX_HOOK_EVERY);
    st = lua_pcall(L, 0, 1, msgh);
    lua_sethook(L, NULL, 0, 0);
    lua_gc(L, LUA_GCSTOP); /* no finalizer may run while the value is read */

    if (c->stop == STOP_INSTRUCTIONS) {
        fail(c, "the %s ran more than %lld Lua instructions: a %s is a table of numbers; "
                "remove loops that do not end", noun, SANDBOX_MAX_INSTRUCTIONS, noun);
    } else if (c->stop == STOP_TIME) {
        fail(c, "the %s ran for more than %g CPU seconds: a %s is a table of numbers; remove loops "
                "that do not end and work on huge strings or tables", noun, SANDBOX_MAX_SECONDS, noun);
    } else if (c->stop == STOP_CALL_BYTES) {
        tg_fail(c->err, "%s: a call of '%s' received %lld MiB of strings (at most %zu MiB: a library function may "
                        "read each argument once, so this bounds its time); a %s is a table of numbers: pass "
                        "fewer or shorter strings",
                c->stop_where, c->stop_call, c->stop_value >> 20, (size_t)SANDBOX_MAX_CALL_BYTES >> 20, noun);
        (*c->nfail)++;
    } else if (c->stop == STOP_SEQUENCE) {
        tg_fail(c->err, "%s: table.%s on a table with #t = %lld: no table within the %zu MiB memory cap has more "
                        "than %lld elements (#t of a table with holes may be any border, and %s shifts every "
                        "element above the position); use a table without holes",
                c->stop_where, c->stop_call, c->stop_value, SANDBOX_MAX_MEMORY >> 20, SANDBOX_MAX_SEQUENCE,
                c->stop_call);
        (*c->nfail)++;
    } else if (st == LUA_ERRMEM) {
        fail(c, "the %s used more than %zu MiB of memory: a %s is a table of numbers; "
                "remove code that builds huge strings or tables", noun, SANDBOX_MAX_MEMORY >> 20, noun);
    } else if (st != LUA_OK) {
        if (lua_isstring(L, -1))
            fail_lua(c, lua_tostring(L, -1));
        else
            fail(c, "the %s raised an error", noun);
    } else {
        c->collected = 1;
        c->collect(L, lua_gettop(L), c->ud);
    }
    return 0;
}

bool tg_sandbox_run(const char *path, const char *noun, const char *src, size_t len,
                    tg_sandbox_collect collect, void *ud, tg_err *err, int *nfail)
{
    sandbox *c = calloc(1, sizeof *c);
    if (!c) {
        (*nfail)++;
        return tg_fail(err, "%s: cannot create the Lua state for the %s: out of memory", path, noun);
    }
    c->path = path;
    c->noun = noun;
    c->src = src;
    c->src_len = len;
    c->collect = collect;
    c->ud = ud;
    c->err = err;
    c->nfail = nfail;
    lua_State *L = lua_newstate(sandbox_alloc, c);
    if (!L) {
        fail(c, "cannot create the Lua state for the %s: out of memory", noun);
        free(c);
        return false;
    }
    lua_pushcfunction(L, sandbox_main);
    lua_pushlightuserdata(L, c);
    int st = lua_pcall(L, 1, 0, 0);
    if (st == LUA_ERRMEM)
        fail(c, "the %s used more than %zu MiB of memory: a %s is a table of numbers; "
                "remove code that builds huge strings or tables", noun, SANDBOX_MAX_MEMORY >> 20, noun);
    else if (st != LUA_OK)
        fail_lua(c, lua_isstring(L, -1) ? lua_tostring(L, -1) : "the Lua sandbox failed");
    lua_gc(L, LUA_GCRESTART);
    lua_close(L);
    bool ok = c->collected && st == LUA_OK;
    free(c);
    return ok;
}
