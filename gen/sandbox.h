/*
 * sandbox.h - run a user's Lua file (a model spec, a machine file) in a
 * sandboxed Lua state: no way out of the state, bounded memory, instructions
 * and wall time, text chunks only (sandbox.c says how, docs/RELIABILITY.md
 * lists every function left and its bound). The caller gets the value the
 * chunk returned, on the Lua stack, and copies what it needs out of it; it
 * never sees a Lua state that is still running user code.
 */
#ifndef TG_SANDBOX_H
#define TG_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>

#include <lua.h>

#include "err.h"

/* Called once, when the chunk returned without error, with the stack index of the value it returned
 * (any type: the caller checks that it is a table). Hooks are off and the collector is stopped, so raw
 * accesses run no user code; the call is inside lua_pcall, so a Lua error it raises is reported. */
typedef void (*tg_sandbox_collect)(lua_State *L, int idx, void *ud);

/* Run len bytes of Lua source (they may contain NULs) as the file path in the sandbox. noun ("spec",
 * "machine file") names the file in the limit messages: "the spec ran more than N Lua instructions: a
 * spec is a table of numbers; ...". Each problem is one tg_fail line in err and adds 1 to *nfail.
 * Returns true when the chunk returned and collect was called (collect may still have failed). */
bool tg_sandbox_run(const char *path, const char *noun, const char *src, size_t len,
                    tg_sandbox_collect collect, void *ud, tg_err *err, int *nfail);

#endif
