/*
 * trc_profile.cu - the report of TESS_PROFILE=1 (with --repeat N), printed by
 * rank 0 when the program ends: for the steps of layer 0 (every layer has the
 * same shapes), the mean time of each step over the timed forwards, and
 *   GEMM          TFLOP/s, against cuBLAS alone on the same shape (same call,
 *                 nothing else on the GPU, after the run)
 *   fused kernel  GB/s of the bytes it must move (read once + written once),
 *                 against a device-to-device copy of as many bytes
 *   collective    GB/s of its payload
 * then, per layer, its wall time (first step start to last step end, both
 * streams) against the sum of its steps: the sum is larger where the comm
 * stream overlapped the compute stream.
 *
 * The reference measurements allocate their own buffers here, after the
 * forwards; nothing of this runs in the step loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trc_internal.h"

#define PROF_REPS 20
#define PROF_MAXREF 64

/* Mean milliseconds of one cuBLAS GEMM of this shape on the compute stream. */
static double ref_gemm(int m, int n, int k, float beta, float *A, float *B, float *C)
{
    cudaStream_t s = trc_g.stream[TRC_COMPUTE];
    const float one = 1.0f;
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    for (int r = 0; r < 3; r++)
        cublasCheck(cublasGemmEx(trc_g.blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, CUDA_R_32F, n, A, CUDA_R_32F,
                                 k, &beta, C, CUDA_R_32F, n, trc_g.compute, CUBLAS_GEMM_DEFAULT));
    cudaCheck(cudaEventRecord(a, s));
    for (int r = 0; r < PROF_REPS; r++)
        cublasCheck(cublasGemmEx(trc_g.blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, CUDA_R_32F, n, A, CUDA_R_32F,
                                 k, &beta, C, CUDA_R_32F, n, trc_g.compute, CUBLAS_GEMM_DEFAULT));
    cudaCheck(cudaEventRecord(b, s));
    cudaCheck(cudaEventSynchronize(b));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    cudaCheck(cudaEventDestroy(a));
    cudaCheck(cudaEventDestroy(b));
    return ms / PROF_REPS;
}

/* Mean milliseconds of a device-to-device copy that moves `bytes` (half read, half written). */
static double ref_copy(long long bytes, char *src, char *dst)
{
    cudaStream_t s = trc_g.stream[TRC_COMPUTE];
    size_t half = (size_t)(bytes / 2);
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    for (int r = 0; r < 3; r++)
        cudaCheck(cudaMemcpyAsync(dst, src, half, cudaMemcpyDeviceToDevice, s));
    cudaCheck(cudaEventRecord(a, s));
    for (int r = 0; r < PROF_REPS; r++)
        cudaCheck(cudaMemcpyAsync(dst, src, half, cudaMemcpyDeviceToDevice, s));
    cudaCheck(cudaEventRecord(b, s));
    cudaCheck(cudaEventSynchronize(b));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    cudaCheck(cudaEventDestroy(a));
    cudaCheck(cudaEventDestroy(b));
    return ms / PROF_REPS;
}

static bool is_collective(int kind)
{
    return kind == TR_K_BCAST || kind == TR_K_ALLREDUCE || kind == TR_K_REDUCE;
}

void trc_profile_report(tr_ctx *c)
{
    const tr_rank_desc *d = c->desc;
    if (d->rank != 0)
        return;
    int runs = trc_g.profile_runs;
    if (runs == 0 || !trc_g.cost) {
        printf("profile: no timed forward to report; run with --repeat N (TESS_PROFILE=1)\n");
        return;
    }
    const trc_step_cost *cost = trc_g.cost;

    /* scratch for the references: the largest GEMM operands and the largest kernel */
    long long amax = 1, bmax = 1, cmax = 1, copymax = 2;
    for (int i = 0; i < d->nsteps; i++) {
        if (d->steps[i].layer != 0)
            continue;
        if (d->steps[i].kind == TR_K_GEMM) {
            long long m = cost[i].m, n = cost[i].n, k = cost[i].k;
            amax = m * k > amax ? m * k : amax;
            bmax = k * n > bmax ? k * n : bmax;
            cmax = m * n > cmax ? m * n : cmax;
        } else if (!is_collective(d->steps[i].kind)) {
            copymax = cost[i].bytes > copymax ? cost[i].bytes : copymax;
        }
    }
    float *A = NULL, *B = NULL, *C = NULL;
    char *src = NULL, *dst = NULL;
    cudaCheck(cudaMalloc((void **)&A, (size_t)amax * sizeof(float)));
    cudaCheck(cudaMalloc((void **)&B, (size_t)bmax * sizeof(float)));
    cudaCheck(cudaMalloc((void **)&C, (size_t)cmax * sizeof(float)));
    cudaCheck(cudaMalloc((void **)&src, (size_t)copymax / 2 + 16));
    cudaCheck(cudaMalloc((void **)&dst, (size_t)copymax / 2 + 16));
    /* on the compute stream, which the references use: a plain cudaMemset runs on the legacy default stream,
     * which orders nothing against the non-blocking streams */
    cudaStream_t cs = trc_g.stream[TRC_COMPUTE];
    cudaCheck(cudaMemsetAsync(A, 0x3c, (size_t)amax * sizeof(float), cs)); /* 0x3c3c3c3c = 0.0115f */
    cudaCheck(cudaMemsetAsync(B, 0x3c, (size_t)bmax * sizeof(float), cs));
    cudaCheck(cudaMemsetAsync(C, 0, (size_t)cmax * sizeof(float), cs));
    cudaCheck(cudaMemsetAsync(src, 0x3c, (size_t)copymax / 2 + 16, cs));

    struct {
        long long key[4];
        double ms;
    } memo[PROF_MAXREF];
    int nmemo = 0;

    printf("profile: rank 0 (i=%d, j=%d, k=%d), mean of %d timed forwards; GPU %d (%s); collectives %s; GEMMs "
           "cuBLAS %s\n",
           d->i, d->j, d->k, runs, trc_g.device, trc_g.device_name, trc_g.use_nccl ? "NCCL" : "MPI host staging",
           trc_g.compute == CUBLAS_COMPUTE_32F ? "fp32" : "TF32");
    printf("layer 0, step by step (the reference runs alone on the same shape after the forwards):\n");
    printf("%5s %-5s %2s %-10s %10s %16s   %-32s %6s\n", "step", "op", "t", "kind", "ms", "rate", "reference",
           "ratio");
    for (int i = 0; i < d->nsteps; i++) {
        const tr_step_info *s = &d->steps[i];
        if (s->layer != 0)
            continue;
        double ms = trc_g.prof_ms[i] / runs, ref_ms = 0;
        char t[16], rate[32] = "-", ref[48] = "-", ratio[16] = "";
        if (s->t >= 0)
            snprintf(t, sizeof t, "%d", s->t);
        else
            snprintf(t, sizeof t, "-");
        if (s->kind == TR_K_GEMM) {
            long long key[4] = {0, cost[i].m, cost[i].n, cost[i].k};
            double rms = -1;
            for (int q = 0; q < nmemo; q++)
                if (!memcmp(memo[q].key, key, sizeof key))
                    rms = memo[q].ms;
            if (rms < 0) {
                rms = ref_gemm(cost[i].m, cost[i].n, cost[i].k, 1.0f, A, B, C);
                if (nmemo < PROF_MAXREF) {
                    memcpy(memo[nmemo].key, key, sizeof key);
                    memo[nmemo++].ms = rms;
                }
            }
            double fl = 2.0 * cost[i].m * cost[i].n * cost[i].k;
            snprintf(rate, sizeof rate, "%.2f TFLOP/s", fl / (ms * 1e-3) / 1e12);
            snprintf(ref, sizeof ref, "cuBLAS alone %.2f TFLOP/s", fl / (rms * 1e-3) / 1e12);
            snprintf(ratio, sizeof ratio, "%5.0f%%", 100.0 * rms / ms);
            ref_ms = rms;
        } else if (is_collective(s->kind)) {
            snprintf(rate, sizeof rate, "%.2f GB/s", cost[i].bytes / (ms * 1e-3) / 1e9);
        } else if (cost[i].bytes > 0) {
            long long key[4] = {1, cost[i].bytes, 0, 0};
            double rms = -1;
            for (int q = 0; q < nmemo; q++)
                if (!memcmp(memo[q].key, key, sizeof key))
                    rms = memo[q].ms;
            if (rms < 0) {
                rms = ref_copy(cost[i].bytes, src, dst);
                if (nmemo < PROF_MAXREF) {
                    memcpy(memo[nmemo].key, key, sizeof key);
                    memo[nmemo++].ms = rms;
                }
            }
            snprintf(rate, sizeof rate, "%.1f GB/s", cost[i].bytes / (ms * 1e-3) / 1e9);
            snprintf(ref, sizeof ref, "D2D copy %.1f GB/s", cost[i].bytes / (rms * 1e-3) / 1e9);
            snprintf(ratio, sizeof ratio, "%5.0f%%", 100.0 * rms / ms);
            ref_ms = rms;
        }
        printf("%5d %-5s %2s %-10s %10.4f %16s   %-32s %6s\n", i, s->op, t, tr_kind_name(s->kind), ms, rate, ref,
               ratio);
        /* the same, for scripts (tests/gpu/bench_report.py): ref_ms is cuBLAS alone or the copy, 0 for none */
        printf("profile_step id=%d op=%s t=%d kind=%s ms=%.6f bytes=%lld m=%d n=%d k=%d ref_ms=%.6f\n", i, s->op, s->t,
               tr_kind_name(s->kind), ms, cost[i].bytes, cost[i].m, cost[i].n, cost[i].k, ref_ms);
    }
    printf("per layer: wall = first step start .. last step end over both streams; parts = sum of its steps\n");
    for (int l = 0; l < trc_g.nlayers; l++) {
        double parts = 0;
        for (int i = 0; i < d->nsteps; i++)
            if (d->steps[i].layer == l)
                parts += trc_g.prof_ms[i] / runs;
        double wall = trc_g.layer_wall[l] / runs;
        printf("  layer %d: wall %.4f ms, parts %.4f ms (parts/wall %.2f)\n", l, wall, parts,
               wall > 0 ? parts / wall : 0.0);
        printf("profile_layer%d_wall_ms=%.6f\nprofile_layer%d_parts_ms=%.6f\n", l, wall, l, parts);
    }
    cudaCheck(cudaFree(A));
    cudaCheck(cudaFree(B));
    cudaCheck(cudaFree(C));
    cudaCheck(cudaFree(src));
    cudaCheck(cudaFree(dst));
}
