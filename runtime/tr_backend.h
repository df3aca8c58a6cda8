/*
 * tr_backend.h - what the backend-neutral main (tr_main.c) needs from a
 * backend. The main loads weights and input into a host arena laid out as the
 * plan says; the backend gives the arena the generated code runs on (on the
 * CPU the host arena itself; on a GPU a device copy) and moves blocks between
 * the two. Collectives, GEMMs and kernels are the tr.h calls, implemented once
 * per backend.
 */
#ifndef TR_BACKEND_H
#define TR_BACKEND_H

#include "tr_ctx.h"

const char *tr_backend_name(void); /* "cpu", "cuda" */
/* After tr_ctx_init: anything the backend needs (devices, streams, handles). */
bool tr_backend_init(tr_ctx *c, tr_err *err);
/* The arena generated code runs on, initialised from the host arena H of `elems` floats. */
float *tr_backend_arena(tr_ctx *c, float *H, long long elems, tr_err *err);
/* Copy elems floats between the host arena and the run arena (no-op where they are the same memory). */
void tr_backend_upload(tr_ctx *c, float *dst_run, const float *src_host, long long elems);
void tr_backend_download(tr_ctx *c, float *dst_host, const float *src_run, long long elems);
/* Wait until all work issued on this rank has finished. */
void tr_backend_sync(tr_ctx *c);
void tr_backend_free(tr_ctx *c, float *run_arena, float *H);
/* How many times this rank's host has waited for its device so far (each blocking wait on a stream, and each
 * staging wait of a collective), for --timing's "host synchronisations per step"; -1 where the backend has no
 * device to wait for (the CPU). */
long long tr_backend_host_syncs(tr_ctx *c);

#endif
