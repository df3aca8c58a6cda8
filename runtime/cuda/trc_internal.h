/*
 * trc_internal.h - private to runtime/cuda: the CUDA backend's per-process
 * state (one rank per process, so one instance) and the checked-call macros.
 *
 *   cudaCheck(call)   cublasCheck(call)   ncclCheck(call)   mpiCheck(call, group)
 *
 * each print "rank R: file:line: <call> failed: <error>" and a hint for the
 * error at hand, then abort every rank with exit code 4 (MPI_Abort), since a
 * failed call inside a collective schedule cannot be recovered on one rank.
 * Initialisation failures that every rank can agree on first (no device, bad
 * TESS_COMM) return false with a tr_err instead, like the rest of the runtime.
 * The host never blocks on a stream that may hold NCCL work without watching
 * NCCL: trc_wait_stream polls the communicators' asynchronous errors and a
 * timeout, so a dead or stuck peer ends the job with a message, not a hang.
 */
#ifndef TRC_INTERNAL_H
#define TRC_INTERNAL_H

#define OMPI_SKIP_MPICXX 1 /* mpi.h: C API only (it is included inside extern "C" below) */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "trc.h"

extern "C" {
#include "tr_backend.h"
}

#define TRC_EXIT_DEVICE 4 /* exit code of a failed CUDA, cuBLAS, NCCL or MPI call */

typedef struct trc_state {
    int inited;        /* tr_backend_init finished */
    int device, ndev;  /* the GPU this rank uses, and how many this process sees */
    int local_rank, local_size; /* ranks on this node */
    int use_nccl;      /* collectives: 1 NCCL, 0 MPI with host staging */
    char device_name[256];
    cudaStream_t stream[TRC_NSTREAMS];
    cublasHandle_t blas;
    cublasComputeType_t compute; /* CUBLAS_COMPUTE_32F, or _FAST_TF32 with TESS_TF32=1 */
    void *blas_ws;               /* cuBLAS workspace, allocated once */
    size_t blas_ws_bytes;
    ncclComm_t nccl[TR_NGROUPS]; /* NULL for groups of one and in MPI mode */
    char group_desc[TR_NGROUPS][160]; /* "col(j=1,k=0) ranks {1,3}", for messages */
    int last_comm_step;          /* the last collective issued (-1: none), for messages */
    const tr_step_info *steps;   /* the rank's step table, for messages */
    double comm_timeout;         /* TESS_COMM_TIMEOUT seconds without progress before giving up; 0: never */
    long long host_syncs;        /* host waits for the device so far (trc_wait_stream, MPI staging); --timing */
    float *stage;                /* MPI mode: pinned host staging buffer */
    long long stage_elems;
    /* per step of the rank's schedule (desc->nsteps) */
    int nsteps;
    cudaEvent_t *sig;            /* recorded by trc_end(signal) */
    cudaEvent_t *t0, *t1;        /* timing: start and end of each step */
    unsigned char *timed;        /* step recorded since the last harvest */
    cudaEvent_t fwd_sync;        /* forward begin/end: ordering between the two streams */
    cudaEvent_t fwd_t0;          /* timing: start of the forward (profile reference) */
    int fwd_timed;
    const trc_step_cost *cost;   /* the rank's step_cost table (from trc_forward_begin) */
    /* profile (TESS_PROFILE=1): sums over timed forwards */
    int profile;
    int profile_runs;
    double *prof_ms;             /* per step: duration */
    double *prof_start, *prof_end; /* per step: start/end relative to the forward's start */
    double *layer_wall;          /* per layer: first start .. last end, summed over runs */
    double *layer_lo, *layer_hi; /* per layer, scratch of one harvest */
    int nlayers;
    /* launches and CUDA graphs (trc_step.cu; docs/CUDA.md "CUDA graphs") */
    long long launches;          /* kernels, GEMMs and collectives issued one by one (trc_count_launch) */
    long long captured;          /* ... issued into the graph being captured */
    long long replayed, replays; /* launches run by graph replays, and the replays */
    int capturing;               /* a capture of a step's part is open on the compute stream */
    unsigned char *cap_timed;    /* per step: its timing events are recorded by the graph being captured */
    int cap_fwd_timed;
} trc_state;

extern trc_state trc_g;

void trc_cuda_fail(cudaError_t e, const char *call, const char *file, int line);
void trc_cublas_fail(cublasStatus_t s, const char *call, const char *file, int line);
void trc_nccl_fail(ncclResult_t r, const char *call, const char *file, int line);
void trc_mpi_fail(int rc, const char *call, const char *file, int line);
/* Print the last step issued (after a failure message). */
void trc_print_step(void);
/* Abort every rank with TRC_EXIT_DEVICE. */
[[noreturn]] void trc_die(void);

#define cudaCheck(call)                                                                                             \
    do {                                                                                                            \
        cudaError_t e_ = (call);                                                                                    \
        if (e_ != cudaSuccess)                                                                                      \
            trc_cuda_fail(e_, #call, __FILE__, __LINE__);                                                           \
    } while (0)
#define cublasCheck(call)                                                                                           \
    do {                                                                                                            \
        cublasStatus_t s_ = (call);                                                                                 \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                            \
            trc_cublas_fail(s_, #call, __FILE__, __LINE__);                                                         \
    } while (0)
#define ncclCheck(call)                                                                                             \
    do {                                                                                                            \
        ncclResult_t r_ = (call);                                                                                   \
        if (r_ != ncclSuccess)                                                                                      \
            trc_nccl_fail(r_, #call, __FILE__, __LINE__);                                                           \
    } while (0)
#define mpiCheck(call)                                                                                              \
    do {                                                                                                            \
        int m_ = (call);                                                                                            \
        if (m_ != MPI_SUCCESS)                                                                                      \
            trc_mpi_fail(m_, #call, __FILE__, __LINE__);                                                            \
    } while (0)

/* After each kernel launch, GEMM and collective: counted for --timing, into the open capture's graph if any. */
static inline void trc_count_launch(void)
{
    if (trc_g.capturing)
        trc_g.captured++;
    else
        trc_g.launches++;
}
/* A timing event: inside a capture an event record node of the graph (cudaEventRecordExternal), so that each replay
 * records it as an issued step does; the cross-stream events stay plain records (the capture's dependencies). */
static inline cudaError_t trc_record_timing(cudaEvent_t e, cudaStream_t s)
{
    return cudaEventRecordWithFlags(e, s, trc_g.capturing ? cudaEventRecordExternal : cudaEventRecordDefault);
}
/* The scalars that change from step to step, on the device (trc_step.cu, written by tr_backend_step_scalars before
 * the optimizer's part of each step): kernels read them there, so a captured step does not bake them in. */
enum { TRC_SC_LR = 0, TRC_SC_C1 = 1, TRC_SC_C2 = 2, TRC_SC_CLIP = 3, TRC_NSC = 4 };
const float *trc_step_scalars(void);

/* trc_comm.cu */
bool trc_comm_init(tr_ctx *c, tr_err *err);
/* Finalize and destroy the NCCL communicators (every rank, in the same order), free the staging buffer. */
void trc_comm_free(void);
/* Wait until stream s has finished its work. Under NCCL, polls: an asynchronous error of a communicator or
 * TESS_COMM_TIMEOUT seconds without the stream finishing aborts the communicators and the job with a message
 * naming this rank, the communicator and the last step. Under MPI staging, cudaStreamSynchronize. */
void trc_wait_stream(cudaStream_t s, const char *what);
/* trc_gemm.cu */
bool trc_gemm_init(tr_err *err);
void trc_gemm_free(void);
/* trc_gemm_lt.cu: the cuBLASLt handle and, for each row of the class's trc_lt_shapes, its descriptors and
 * algorithm (after trc_gemm_init: it shares the cuBLAS workspace) */
bool trc_gemm_lt_init(tr_err *err);
void trc_gemm_lt_free(void);
/* tr_backend_cuda.cu: turn the timing events of the steps issued and finished since the last harvest into
 * seconds per step kind (c->seconds) and the profile's sums; every such step must have finished */
void trc_harvest(tr_ctx *c);
/* trc_adamw.cu: trc_adamw_multi at explicit hyperparameters on stream s, the learning rate and bias corrections
 * read on the device from sc[TRC_SC_LR, TRC_SC_C1, TRC_SC_C2] (tr_model's and trc_step_scalars() there; the
 * standalone check tests/cuda/adamw_check.cu calls it directly; member: the rank's place in dep, the slice a
 * row with slice_of > 0 updates, optimizer.shard), and freeing the launch plan it keeps */
void trc_adamw_launch(float *A, const tr_adamw_tensor *t, int n, const float *sc, double beta1, double beta2,
                      double eps, double weight_decay, int member, cudaStream_t s);
void trc_adamw_free(void);
/* trc_step.cu: free the training step's buffers */
void trc_step_free(void);
/* trc_profile.cu: TESS_PROFILE=1 report, rank 0, at tr_backend_free */
void trc_profile_report(tr_ctx *c);

#endif
