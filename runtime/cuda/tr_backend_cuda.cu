/*
 * tr_backend_cuda.cu - the CUDA backend's side of tr_backend.h, and the step
 * brackets of trc.h.
 *
 * One rank is one process with one GPU context. At start-up the rank picks
 * GPU (local rank mod GPUs on the node), creates its two streams (compute,
 * comm), one event per step for cross-stream ordering and two per step for
 * timing, the cuBLAS handle with its workspace, and its collectives (NCCL
 * communicators, or MPI host staging; trc_comm.cu). Everything is allocated
 * here, once: the step loop allocates nothing. The device arena is one
 * cudaMalloc of the plan's peak size; the shared main loads weights and input
 * into the host arena with the same offsets and tr_backend_arena copies it,
 * NaN poison included, to the device: on the compute stream, waited for before
 * it returns. (A plain cudaMemcpy would go to the legacy default stream, which
 * orders nothing against the two non-blocking streams, and from pageable
 * memory it may return before the copy has landed.)
 *
 * Every host wait on a stream goes through trc_wait_stream (trc_comm.cu), which
 * under NCCL watches the communicators instead of blocking blind.
 *
 * Timing (--repeat): trc_begin/trc_end record events around every step and
 * tr_backend_sync turns them into seconds per step kind (steps on the two
 * streams overlap, so the kinds may sum to more than the forward's wall time).
 * TESS_PROFILE=1 also keeps per-step and per-layer times for the report of
 * trc_profile.cu.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trc_internal.h"

trc_state trc_g;
static tr_ctx *g_ctx; /* for error messages: the step running now */

/* ---- checked calls ---------------------------------------------------------------- */

static int world_rank(void)
{
    int r = -1, init = 0;
    MPI_Initialized(&init);
    if (init)
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

void trc_print_step(void)
{
    if (!g_ctx || !g_ctx->desc || g_ctx->cur_step < 0 || g_ctx->cur_step >= g_ctx->desc->nsteps)
        return;
    const tr_step_info *s = &g_ctx->desc->steps[g_ctx->cur_step];
    fprintf(stderr, "  (last step issued: %d, layer %d %s%s%d, %s; CUDA errors are reported at the next check, "
                    "CUDA_LAUNCH_BLOCKING=1 pins them to their step)\n",
            g_ctx->cur_step, s->layer, s->op, s->t >= 0 ? " t=" : "", s->t >= 0 ? s->t : 0, tr_kind_name(s->kind));
}

void trc_die(void)
{
    fflush(stdout);
    fflush(stderr);
    int init = 0;
    MPI_Initialized(&init);
    if (init)
        MPI_Abort(MPI_COMM_WORLD, TRC_EXIT_DEVICE);
    exit(TRC_EXIT_DEVICE);
}

static const char *cuda_hint(cudaError_t e)
{
    switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorCompatNotSupportedOnDevice:
        return "no usable CUDA device: check nvidia-smi, CUDA_VISIBLE_DEVICES and that the driver is recent enough "
               "for this CUDA runtime";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorInvalidPtx:
        return "this GPU's architecture is not among the build's -gencode targets: regenerate with "
               "TESS_CUDA_ARCH=<cc> (nvidia-smi --query-gpu=compute_cap, e.g. 86 for 8.6) and rebuild";
    case cudaErrorMemoryAllocation:
        return "out of device memory: put fewer ranks on each GPU, or use a mesh with smaller per-rank blocks";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
        return "a kernel touched memory outside its buffers (an internal error): rerun under compute-sanitizer";
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
        return "a call of the training step cannot be captured into a CUDA graph (an internal error): rerun with "
               "TESS_CUDA_GRAPH=0 to issue every step launch by launch";
    default:
        return "rerun with CUDA_LAUNCH_BLOCKING=1 to pin the error to its step";
    }
}

void trc_cuda_fail(cudaError_t e, const char *call, const char *file, int line)
{
    fprintf(stderr, "rank %d: %s:%d: %s failed: %s (%s)\nhint: %s\n", world_rank(), file, line, call,
            cudaGetErrorName(e), cudaGetErrorString(e), cuda_hint(e));
    trc_print_step();
    trc_die();
}

void trc_cublas_fail(cublasStatus_t s, const char *call, const char *file, int line)
{
    const char *hint;
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ALLOC_FAILED: hint = "cuBLAS could not start or allocate: out of device memory?"; break;
    case CUBLAS_STATUS_ARCH_MISMATCH: hint = "this GPU lacks a feature the GEMM needs (TESS_TF32 needs sm_80+)"; break;
    case CUBLAS_STATUS_INVALID_VALUE: hint = "a GEMM shape or leading dimension is invalid: an internal error"; break;
    case CUBLAS_STATUS_EXECUTION_FAILED: hint = "a GEMM failed on the device: rerun with CUDA_LAUNCH_BLOCKING=1"; break;
    default: hint = "rerun with CUDA_LAUNCH_BLOCKING=1 and CUBLAS_LOGINFO_DBG=1"; break;
    }
    fprintf(stderr, "rank %d: %s:%d: %s failed: %s (%s)\nhint: %s\n", world_rank(), file, line, call,
            cublasGetStatusName(s), cublasGetStatusString(s), hint);
    trc_print_step();
    trc_die();
}

void trc_nccl_fail(ncclResult_t r, const char *call, const char *file, int line)
{
    const char *hint;
    switch (r) {
    case ncclInvalidUsage:
        hint = "NCCL refuses this use; two ranks on one GPU is the usual cause: run with TESS_COMM=mpi";
        break;
    case ncclSystemError:
    case ncclRemoteError: hint = "a peer or the network failed: NCCL_DEBUG=WARN says which"; break;
    case ncclUnhandledCudaError: hint = "a CUDA error inside NCCL: NCCL_DEBUG=WARN shows it"; break;
    default: hint = "NCCL_DEBUG=INFO shows what NCCL was doing"; break;
    }
    fprintf(stderr, "rank %d: %s:%d: %s failed: %s (%s)\nhint: %s\n", world_rank(), file, line, call,
            ncclGetErrorString(r), ncclGetLastError(NULL), hint);
    trc_print_step();
    trc_die();
}

void trc_mpi_fail(int rc, const char *call, const char *file, int line)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    msg[0] = '\0';
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "rank %d: %s:%d: %s failed: %s\nhint: every rank must run the same generated program; "
                    "rebuild all ranks from one tessgen output\n",
            world_rank(), file, line, call, msg);
    trc_print_step();
    trc_die();
}

void trc_launch_check(const char *kernel, const char *file, int line)
{
    trc_count_launch();
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        char what[256];
        snprintf(what, sizeof what, "launch of %s", kernel);
        trc_cuda_fail(e, what, file, line);
    }
}

void trc_check_aligned(const void *p, const char *what, const char *file, int line)
{
    if (((uintptr_t)p & 15u) == 0)
        return;
    fprintf(stderr, "rank %d: %s:%d: internal error: %s at %p is not 16-byte aligned (plan buffers are 64-byte "
                    "aligned in a 256-byte aligned arena)\n",
            world_rank(), file, line, what, p);
    trc_die();
}

/* ---- tr_backend.h --------------------------------------------------------------------- */

extern "C" const char *tr_backend_name(void)
{
    return "cuda";
}

static bool env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* Device, streams and events of this rank; false with err on a problem that is
 * this rank's alone (the caller agrees with the other ranks before any collective). */
static bool init_device(tr_err *err)
{
    cudaError_t e = cudaGetDeviceCount(&trc_g.ndev);
    if (e != cudaSuccess || trc_g.ndev < 1)
        return tr_fail(err, "no CUDA device (cudaGetDeviceCount: %s): %s; or run the CPU program (bin/model, "
                            "TESS_BACKEND=cpu)",
                       e == cudaSuccess ? "0 devices" : cudaGetErrorString(e), cuda_hint(cudaErrorNoDevice));
    trc_g.device = trc_g.local_rank % trc_g.ndev;
    e = cudaSetDevice(trc_g.device);
    if (e != cudaSuccess)
        return tr_fail(err, "cudaSetDevice(%d): %s; %s", trc_g.device, cudaGetErrorString(e), cuda_hint(e));
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, trc_g.device);
    if (e != cudaSuccess)
        return tr_fail(err, "cudaGetDeviceProperties(%d): %s; %s", trc_g.device, cudaGetErrorString(e),
                       cuda_hint(e));
    snprintf(trc_g.device_name, sizeof trc_g.device_name, "%.200s, sm_%d%d", prop.name, prop.major, prop.minor);
    return true;
}

/* sharing: how many ranks of this node use this rank's GPU (itself included) */
static bool pick_comm(int sharing, tr_err *err)
{
    const char *t = getenv("TESS_COMM_TIMEOUT");
    trc_g.comm_timeout = 600;
    if (t && *t) {
        char *end;
        double v = strtod(t, &end);
        if (*end || !(v >= 0) || v > 1e9)
            return tr_fail(err, "TESS_COMM_TIMEOUT=%s is not a number of seconds: use e.g. TESS_COMM_TIMEOUT=600 "
                                "(how long a rank waits for NCCL work that makes no progress before it ends the "
                                "job), or 0 to wait forever",
                           t);
        trc_g.comm_timeout = v;
    }
    const char *m = getenv("TESS_COMM");
    bool fits = sharing == 1;
    if (!m || !*m || !strcmp(m, "auto")) {
        trc_g.use_nccl = fits;
    } else if (!strcmp(m, "nccl")) {
        if (!fits)
            return tr_fail(err, "TESS_COMM=nccl, but %d ranks use GPU %d (%s) and NCCL refuses two ranks on one "
                                "GPU: run with TESS_COMM=mpi (host staging) or with one GPU per rank",
                           sharing, trc_g.device, trc_g.device_name);
        trc_g.use_nccl = 1;
    } else if (!strcmp(m, "mpi")) {
        trc_g.use_nccl = 0;
    } else {
        return tr_fail(err, "TESS_COMM=%s is not a collective backend: use TESS_COMM=nccl (one GPU per rank), "
                            "mpi (host staging; ranks may share a GPU) or auto",
                       m);
    }
    return true;
}

extern "C" bool tr_backend_init(tr_ctx *c, tr_err *err)
{
    memset(&trc_g, 0, sizeof trc_g);
    trc_g.last_comm_step = -1;
    g_ctx = c;
    MPI_Comm node;
    mpiCheck(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->desc->rank, MPI_INFO_NULL, &node));
    mpiCheck(MPI_Comm_rank(node, &trc_g.local_rank));
    mpiCheck(MPI_Comm_size(node, &trc_g.local_size));

    /* this rank's own checks first, then agree: no rank may enter NCCL's
     * collective initialisation while another has given up */
    bool ok = init_device(err);
    /* which ranks of the node share this GPU: by PCI bus id, so that a launcher giving each rank its own
     * CUDA_VISIBLE_DEVICES (every rank sees "device 0") counts as one GPU per rank */
    enum { BUS = 32 };
    char bus[BUS];
    memset(bus, 0, sizeof bus);
    if (ok && cudaDeviceGetPCIBusId(bus, BUS, trc_g.device) != cudaSuccess)
        snprintf(bus, sizeof bus, "rank%d", c->desc->rank); /* unknown: assume not shared */
    char *all_bus = (char *)calloc((size_t)trc_g.local_size, BUS);
    if (!all_bus) {
        fprintf(stderr, "rank %d: out of host memory\n", c->desc->rank);
        trc_die();
    }
    mpiCheck(MPI_Allgather(bus, BUS, MPI_CHAR, all_bus, BUS, MPI_CHAR, node));
    int sharing = 0;
    for (int r = 0; r < trc_g.local_size; r++)
        sharing += ok && !strncmp(all_bus + (size_t)r * BUS, bus, BUS);
    free(all_bus);
    mpiCheck(MPI_Comm_free(&node));
    ok = ok && pick_comm(sharing, err);
    int mine[2] = {ok ? 1 : 0, ok ? trc_g.use_nccl : 1}, all[2];
    mpiCheck(MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!ok)
        return false;
    if (!all[0]) {
        trc_g.inited = 1; /* another rank failed and says why; this one only cleans up */
        return true;
    }
    trc_g.use_nccl = all[1]; /* one GPU per rank on every node, or MPI everywhere */

    trc_g.nsteps = c->desc->nsteps;
    trc_g.nlayers = tr_model.layers;
    size_t n = (size_t)(trc_g.nsteps > 0 ? trc_g.nsteps : 1);
    trc_g.sig = (cudaEvent_t *)calloc(n, sizeof(cudaEvent_t));
    trc_g.t0 = (cudaEvent_t *)calloc(n, sizeof(cudaEvent_t));
    trc_g.t1 = (cudaEvent_t *)calloc(n, sizeof(cudaEvent_t));
    trc_g.timed = (unsigned char *)calloc(n, 1);
    trc_g.profile = env_flag("TESS_PROFILE");
    if (trc_g.profile) {
        trc_g.prof_ms = (double *)calloc(n, sizeof(double));
        trc_g.prof_start = (double *)calloc(n, sizeof(double));
        trc_g.prof_end = (double *)calloc(n, sizeof(double));
        size_t nl = (size_t)(trc_g.nlayers > 0 ? trc_g.nlayers : 1);
        trc_g.layer_wall = (double *)calloc(nl, sizeof(double));
        trc_g.layer_lo = (double *)calloc(nl, sizeof(double));
        trc_g.layer_hi = (double *)calloc(nl, sizeof(double));
    }
    if (!trc_g.sig || !trc_g.t0 || !trc_g.t1 || !trc_g.timed ||
        (trc_g.profile && (!trc_g.prof_ms || !trc_g.prof_start || !trc_g.prof_end || !trc_g.layer_wall ||
                           !trc_g.layer_lo || !trc_g.layer_hi))) {
        /* past the agreement above: the other ranks go on into NCCL's initialisation, so stop them all */
        fprintf(stderr, "rank %d: out of host memory for %d step events\n", c->desc->rank, trc_g.nsteps);
        trc_die();
    }
    for (int s = 0; s < TRC_NSTREAMS; s++)
        cudaCheck(cudaStreamCreateWithFlags(&trc_g.stream[s], cudaStreamNonBlocking));
    for (int i = 0; i < trc_g.nsteps; i++) {
        cudaCheck(cudaEventCreateWithFlags(&trc_g.sig[i], cudaEventDisableTiming));
        cudaCheck(cudaEventCreate(&trc_g.t0[i]));
        cudaCheck(cudaEventCreate(&trc_g.t1[i]));
    }
    cudaCheck(cudaEventCreateWithFlags(&trc_g.fwd_sync, cudaEventDisableTiming));
    cudaCheck(cudaEventCreate(&trc_g.fwd_t0));
    if (!trc_gemm_init(err) || !trc_gemm_lt_init(err))
        return false;
    if (!trc_comm_init(c, err))
        return false;
    trc_g.inited = 1;
    if (c->desc->rank == 0)
        printf("cuda backend: rank 0 on GPU %d of %d (%s), shared by %d rank%s; collectives: %s; GEMMs: cuBLAS "
               "%s (bf16 operands, where the plan has them: fp32 accumulation)\n",
               trc_g.device, trc_g.ndev, trc_g.device_name, sharing, sharing == 1 ? "" : "s",
               trc_g.use_nccl ? "NCCL" : "MPI with host staging", trc_g.compute == CUBLAS_COMPUTE_32F ? "fp32" : "TF32");
    return true;
}

extern "C" float *tr_backend_arena(tr_ctx *c, float *H, long long elems, tr_err *err)
{
    (void)c;
    if (!trc_g.inited || !trc_g.stream[0])
        return H; /* another rank failed its start-up: nothing runs */
    size_t bytes = (size_t)elems * sizeof(float);
    float *A = NULL;
    cudaError_t e = cudaMalloc((void **)&A, bytes ? bytes : 256);
    if (e != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError(); /* clear it */
        cudaMemGetInfo(&free_b, &total_b);
        tr_fail(err,
                "cannot allocate the %zu-byte arena on GPU %d (%s): %s; %zu MiB of %zu MiB free. Put fewer ranks on "
                "each GPU, or use a mesh with smaller per-rank blocks",
                bytes, trc_g.device, trc_g.device_name, cudaGetErrorString(e), free_b >> 20,
                total_b >> 20);
        return NULL;
    }
    /* weights, input, and NaN everywhere else: on the compute stream (pageable source, so the copy is staged),
     * then waited for, so the first forward's kernels (compute stream) and collectives (comm stream, which
     * trc_forward_begin orders after compute) read the uploaded arena */
    cudaCheck(cudaMemcpyAsync(A, H, bytes, cudaMemcpyHostToDevice, trc_g.stream[TRC_COMPUTE]));
    trc_wait_stream(trc_g.stream[TRC_COMPUTE], "compute (arena upload)");
    return A;
}

extern "C" void tr_backend_upload(tr_ctx *c, float *dst_run, const float *src_host, long long elems)
{
    (void)c;
    if ((const float *)dst_run == src_host)
        return;
    cudaCheck(cudaMemcpyAsync(dst_run, src_host, (size_t)elems * sizeof(float), cudaMemcpyHostToDevice,
                              trc_g.stream[TRC_COMPUTE]));
    trc_wait_stream(trc_g.stream[TRC_COMPUTE], "compute (upload)");
}

extern "C" void tr_backend_download(tr_ctx *c, float *dst_host, const float *src_run, long long elems)
{
    if ((const float *)dst_host == src_run)
        return;
    tr_backend_sync(c);
    cudaCheck(cudaMemcpyAsync(dst_host, src_run, (size_t)elems * sizeof(float), cudaMemcpyDeviceToHost,
                              trc_g.stream[TRC_COMPUTE]));
    trc_wait_stream(trc_g.stream[TRC_COMPUTE], "compute (download)");
}

/* Pipeline stages (tr_comm.c tr_pipe_*): the point-to-point blocks go through the host (tr_backend_download and
 * tr_backend_upload above); the stash is device memory, copied on the compute stream, so a stage's forward, its stash
 * copies and its backward run in issue order without a host wait. */
extern "C" bool tr_backend_run_on_host(void)
{
    return false;
}

extern "C" float *tr_backend_run_alloc(tr_ctx *c, long long n)
{
    (void)c;
    void *p = NULL;
    if (cudaMalloc(&p, (size_t)(n > 0 ? n : 1) * sizeof(float)) != cudaSuccess) {
        cudaGetLastError(); /* clear it: the caller reports the failure */
        return NULL;
    }
    return (float *)p;
}

extern "C" void tr_backend_run_release(tr_ctx *c, float *p)
{
    (void)c;
    if (p && trc_g.inited && trc_g.stream[0]) {
        trc_wait_stream(trc_g.stream[TRC_COMPUTE], "compute (stash release)");
        cudaCheck(cudaFree(p));
    }
}

extern "C" void tr_backend_run_copy(tr_ctx *c, float *dst, const float *src, long long n)
{
    (void)c;
    cudaCheck(cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice,
                              trc_g.stream[TRC_COMPUTE]));
}

void trc_copy(tr_ctx *c, const float *src, float *dst, long long count)
{
    (void)c;
    cudaCheck(cudaMemcpyAsync(dst, src, (size_t)count * sizeof(float), cudaMemcpyDeviceToDevice,
                              trc_g.stream[TRC_COMPUTE]));
    trc_count_launch();
}

void trc_copy_bf16(tr_ctx *c, const tr_bf16 *src, tr_bf16 *dst, long long count)
{
    (void)c;
    cudaCheck(cudaMemcpyAsync(dst, src, (size_t)count * sizeof(tr_bf16), cudaMemcpyDeviceToDevice,
                              trc_g.stream[TRC_COMPUTE]));
    trc_count_launch();
}

extern "C" long long tr_backend_host_syncs(tr_ctx *c)
{
    (void)c;
    return trc_g.host_syncs;
}

/* Turn this forward's timing events into seconds per step kind (and the profile). */
void trc_harvest(tr_ctx *c)
{
    int any = 0;
    for (int i = 0; i < trc_g.nsteps; i++)
        any |= trc_g.timed[i];
    if (!any)
        return;
    double *lo = trc_g.layer_lo, *hi = trc_g.layer_hi; /* per layer, this run (profile only) */
    int nl = trc_g.profile ? trc_g.nlayers : 0;
    for (int l = 0; l < nl; l++) {
        lo[l] = 1e300;
        hi[l] = -1e300;
    }
    for (int i = 0; i < trc_g.nsteps; i++) {
        if (!trc_g.timed[i])
            continue;
        trc_g.timed[i] = 0;
        float ms = 0;
        cudaCheck(cudaEventElapsedTime(&ms, trc_g.t0[i], trc_g.t1[i]));
        const tr_step_info *s = &c->desc->steps[i];
        if (s->kind >= 0 && s->kind < TR_NKINDS)
            c->seconds[s->kind] += 1e-3 * ms;
        if (trc_g.profile && trc_g.fwd_timed) {
            float a = 0, b = 0;
            cudaCheck(cudaEventElapsedTime(&a, trc_g.fwd_t0, trc_g.t0[i]));
            cudaCheck(cudaEventElapsedTime(&b, trc_g.fwd_t0, trc_g.t1[i]));
            trc_g.prof_ms[i] += ms;
            trc_g.prof_start[i] += a;
            trc_g.prof_end[i] += b;
            if (s->layer >= 0 && s->layer < nl) {
                lo[s->layer] = a < lo[s->layer] ? a : lo[s->layer];
                hi[s->layer] = b > hi[s->layer] ? b : hi[s->layer];
            }
        }
    }
    if (trc_g.profile && trc_g.fwd_timed) {
        for (int l = 0; l < nl; l++)
            if (hi[l] >= lo[l])
                trc_g.layer_wall[l] += hi[l] - lo[l];
        trc_g.profile_runs++;
    }
    trc_g.fwd_timed = 0;
}

extern "C" void tr_backend_sync(tr_ctx *c)
{
    if (!trc_g.inited || !trc_g.stream[0])
        return;
    trc_wait_stream(trc_g.stream[TRC_COMM], "comm");
    trc_wait_stream(trc_g.stream[TRC_COMPUTE], "compute");
    trc_harvest(c);
}

extern "C" void tr_backend_free(tr_ctx *c, float *run_arena, float *H)
{
    if (trc_g.inited && trc_g.stream[0]) {
        trc_wait_stream(trc_g.stream[TRC_COMM], "comm");
        trc_wait_stream(trc_g.stream[TRC_COMPUTE], "compute");
        if (trc_g.profile)
            trc_profile_report(c);
    }
    trc_step_free();
    trc_adamw_free();
    trc_comm_free();
    trc_gemm_lt_free();
    trc_gemm_free();
    for (int i = 0; i < trc_g.nsteps && trc_g.sig; i++) {
        if (trc_g.sig[i])
            cudaEventDestroy(trc_g.sig[i]);
        if (trc_g.t0[i])
            cudaEventDestroy(trc_g.t0[i]);
        if (trc_g.t1[i])
            cudaEventDestroy(trc_g.t1[i]);
    }
    if (trc_g.fwd_sync)
        cudaEventDestroy(trc_g.fwd_sync);
    if (trc_g.fwd_t0)
        cudaEventDestroy(trc_g.fwd_t0);
    for (int s = 0; s < TRC_NSTREAMS; s++)
        if (trc_g.stream[s])
            cudaStreamDestroy(trc_g.stream[s]);
    if (run_arena && run_arena != H)
        cudaFree(run_arena);
    free(H);
    free(trc_g.sig);
    free(trc_g.t0);
    free(trc_g.t1);
    free(trc_g.timed);
    free(trc_g.prof_ms);
    free(trc_g.prof_start);
    free(trc_g.prof_end);
    free(trc_g.layer_wall);
    free(trc_g.layer_lo);
    free(trc_g.layer_hi);
    memset(&trc_g, 0, sizeof trc_g);
    g_ctx = NULL;
}

/* ---- trc.h: streams and step brackets ---------------------------------------------- */

cudaStream_t trc_stream(tr_ctx *c, int stream)
{
    (void)c;
    return trc_g.stream[stream];
}

void trc_forward_begin(tr_ctx *c, const trc_step_cost *cost)
{
    trc_g.cost = cost;
    cudaCheck(cudaEventRecord(trc_g.fwd_sync, trc_g.stream[TRC_COMPUTE]));
    cudaCheck(cudaStreamWaitEvent(trc_g.stream[TRC_COMM], trc_g.fwd_sync, 0));
    if (c->timing) {
        cudaCheck(trc_record_timing(trc_g.fwd_t0, trc_g.stream[TRC_COMPUTE]));
        if (trc_g.capturing)
            trc_g.cap_fwd_timed = 1; /* set by each replay */
        else
            trc_g.fwd_timed = 1;
    }
}

void trc_forward_end(tr_ctx *c)
{
    (void)c;
    cudaCheck(cudaEventRecord(trc_g.fwd_sync, trc_g.stream[TRC_COMM]));
    cudaCheck(cudaStreamWaitEvent(trc_g.stream[TRC_COMPUTE], trc_g.fwd_sync, 0));
}

void trc_phase_begin(tr_ctx *c, const trc_step_cost *cost)
{
    (void)c;
    trc_g.cost = cost;
    cudaCheck(cudaEventRecord(trc_g.fwd_sync, trc_g.stream[TRC_COMPUTE]));
    cudaCheck(cudaStreamWaitEvent(trc_g.stream[TRC_COMM], trc_g.fwd_sync, 0));
}

void trc_phase_end(tr_ctx *c)
{
    trc_forward_end(c);
}

void trc_begin(tr_ctx *c, int id, int stream, int wait)
{
    tr_step_mark(c, id);
    if (wait >= 0)
        cudaCheck(cudaStreamWaitEvent(trc_g.stream[stream], trc_g.sig[wait], 0));
    if (c->timing)
        cudaCheck(trc_record_timing(trc_g.t0[id], trc_g.stream[stream]));
}

void trc_end(tr_ctx *c, int id, int stream, int signal)
{
    tr_kind k = c->desc->steps[id].kind;
    if (k >= 0 && k < TR_NKINDS)
        c->calls[k]++;
    if (c->timing) {
        cudaCheck(trc_record_timing(trc_g.t1[id], trc_g.stream[stream]));
        if (trc_g.capturing)
            trc_g.cap_timed[id] = 1; /* set by each replay */
        else
            trc_g.timed[id] = 1;
    }
    if (signal)
        cudaCheck(cudaEventRecord(trc_g.sig[id], trc_g.stream[stream]));
}
