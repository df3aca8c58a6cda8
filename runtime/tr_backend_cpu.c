/*
 * tr_backend_cpu.c - the CPU backend's side of tr_backend.h: generated code
 * runs directly on the host arena, so there is nothing to copy or wait for.
 */
#include <stdlib.h>
#include <string.h>

#include "tr_backend.h"

const char *tr_backend_name(void)
{
    return "cpu";
}

bool tr_backend_init(tr_ctx *c, tr_err *err)
{
    (void)c;
    (void)err;
    return true;
}

float *tr_backend_arena(tr_ctx *c, float *H, long long elems, tr_err *err)
{
    (void)c;
    (void)elems;
    (void)err;
    return H;
}

void tr_backend_upload(tr_ctx *c, float *dst_run, const float *src_host, long long elems)
{
    (void)c;
    if (dst_run != src_host)
        memcpy(dst_run, src_host, (size_t)elems * sizeof(float));
}

void tr_backend_download(tr_ctx *c, float *dst_host, const float *src_run, long long elems)
{
    (void)c;
    if (dst_host != src_run)
        memcpy(dst_host, src_run, (size_t)elems * sizeof(float));
}

void tr_backend_sync(tr_ctx *c)
{
    (void)c;
}

void tr_backend_free(tr_ctx *c, float *run_arena, float *H)
{
    (void)c;
    if (run_arena != H)
        free(run_arena);
    free(H);
}

long long tr_backend_host_syncs(tr_ctx *c)
{
    (void)c;
    return -1; /* nothing to wait for */
}
