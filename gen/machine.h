/*
 * machine.h - the declare stage for a cluster: a machine description file,
 * run in the same Lua sandbox as a spec (sandbox.c) and validated into a
 * plain C struct that the cost model (cost.c) and the mesh advisor
 * (advise.c) read. All validation of a machine file lives in machine.c (the
 * name key's rule, shared with specs, in luaval.c).
 *
 * A machine file returns a table (numbers are per rank unless they say node):
 *   return {
 *     name = "meluxina",                 -- optional, default: file stem; [A-Za-z0-9_.-]+
 *     ranks_per_node = 4,                -- GPUs (or CPU ranks) per node
 *     intra = { bandwidth_gbs = 200, latency_us = 2 },  -- one rank's link inside a node, GB/s each way
 *     inter = { bandwidth_gbs = 25,  latency_us = 5 },  -- one node's network bandwidth, GB/s each way,
 *                                                       -- shared by the node's ranks that cross it
 *     gemm_tflops = { fp32 = 19.5, tf32 = 156, bf16 = 312 }, -- sustained GEMM rates; fp32 required
 *     fp32_gemm = "fp32",                -- optional: which rate an fp32 spec's GEMMs run at ("fp32" or "tf32")
 *     memory_bandwidth_gbs = 1555,       -- device memory bandwidth: the fused kernels are bound by it
 *     memory_gib = 40,                   -- memory of one rank
 *     launch_us = 5,                     -- optional (default 0): fixed cost of every step (kernel launch)
 *   }
 */
#ifndef TG_MACHINE_H
#define TG_MACHINE_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

typedef struct tg_link {
    double bandwidth_gbs; /* GB/s (1e9 bytes per second), each way */
    double latency_us;    /* per message */
} tg_link;

typedef struct tg_machine {
    char path[1024];      /* the file as given */
    char name[128];
    int ranks_per_node;
    tg_link intra;        /* per rank, inside a node */
    tg_link inter;        /* per node, between nodes (shared by the node's ranks that cross it) */
    double gemm_tflops_fp32;
    double gemm_tflops_tf32; /* 0 when the file does not give it */
    double gemm_tflops_bf16; /* 0 when the file does not give it */
    int fp32_uses_tf32;   /* fp32_gemm = "tf32" */
    double memory_bandwidth_gbs;
    double memory_gib;
    double launch_us;
} tg_machine;

/* Run the machine file at path in the sandbox and validate it; on failure err holds one line per problem. */
bool tg_machine_load(const char *path, tg_machine *out, tg_err *err);
/* Same, from a string (chunkname is used as the file name in messages). */
bool tg_machine_load_string(const char *chunkname, const char *src, tg_machine *out, tg_err *err);
/* Same, from len bytes that may contain NULs (as a file may; the fuzz harness uses it). */
bool tg_machine_load_buffer(const char *chunkname, const char *src, size_t len, tg_machine *out, tg_err *err);

#endif
