/*
 * trc_comm.cu - the CUDA backend's collectives, on the comm stream, over one
 * of two transports chosen at start-up for every rank alike (TESS_COMM):
 *
 *   nccl  one NCCL communicator per group of more than one rank that the
 *         schedule uses (row, col, dep, coldep), made with ncclCommInitRank from a unique id that the
 *         group's member 0 broadcasts over the group's MPI communicator (the
 *         MPI_Comm_split of tr_ctx_init, already checked against the plan).
 *         ncclBroadcast / ncclAllReduce are enqueued on the comm stream and
 *         run while the compute stream works on whatever does not depend on
 *         them. NCCL needs one GPU per rank.
 *   mpi   host staging through one pinned buffer (the largest collective of
 *         the schedule): wait for the comm stream, copy to the host, MPI,
 *         copy back on the comm stream. The host blocks in MPI, but the GPU
 *         keeps running the GEMMs already enqueued, so broadcasts still
 *         overlap compute. Several ranks may share one GPU this way.
 *
 * A language model's loss adds the all-reduce(MAX) of the row maxima (ncclMax, MPI_MAX), same path as the sum.
 * Generation adds the max-loc all-reduce of the (max logit, id) pairs: NCCL has none, so an ncclAllGather of the
 * members' pairs and a kernel that picks (no host wait: a decode step can be a CUDA graph); MPI_MAXLOC when staged.
 * Training adds reduce (ncclReduce in place on the root; MPI_Reduce through the staging buffer) and the
 * exact all-reduce of replicated gradients: reduce to member 0, then broadcast from it, so every member
 * holds member 0's bits (an ncclAllReduce or MPI_Allreduce need not give all members the same bits).
 *
 * auto (the default) is nccl when no node has more ranks than GPUs, else mpi.
 *
 * Under NCCL the host never blocks blind on a stream: trc_wait_stream polls
 * the stream and every communicator's asynchronous error (ncclCommGetAsyncError,
 * as NCCL's guide does it), and gives up after TESS_COMM_TIMEOUT seconds (600
 * by default) without the stream finishing. Either way it aborts the
 * communicators (ncclCommAbort) and the job, naming this rank, the communicator
 * (group, coordinates, member ranks) and the last collective issued. At exit
 * every rank finalizes (ncclCommFinalize: outstanding work flushed) and then
 * destroys its communicators in the same order.
 * Counting is logical and identical to the CPU backend's tr_comm.c, in bytes (4 a float, 2 a bf16 value):
 * a broadcast counts its payload received on every member but the root and sent by the root; an all-reduce
 * (exact or not) counts its payload reduced; a reduce counts the payload of each other member received on the
 * root and the payload sent by every other member.
 *
 * bf16 broadcasts (trc_bcast_bf16, docs/BF16.md) take the same two paths with 2-byte elements: ncclBfloat16,
 * or MPI_UINT16_T through the same staging buffer (sized for the largest float collective, so a bf16 one of
 * the same count fits twice over). Reductions stay fp32.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trc_internal.h"

/* "row(i=1,k=0) ranks {2,3}": the group, this rank's coordinates in its name, and its members' world ranks */
static void describe_group(tr_ctx *c, int g)
{
    const tr_rank_desc *d = c->desc;
    char *o = trc_g.group_desc[g];
    const size_t cap = sizeof trc_g.group_desc[g];
    int n = 0;
    switch (g) {
    case TR_ROW: n = snprintf(o, cap, "row(i=%d,k=%d)", d->i, d->k); break;
    case TR_COL: n = snprintf(o, cap, "col(j=%d,k=%d)", d->j, d->k); break;
    case TR_DEP: n = snprintf(o, cap, "dep(i=%d,j=%d)", d->i, d->j); break;
    case TR_WORLD: n = snprintf(o, cap, "world"); break;
    default: n = snprintf(o, cap, "coldep(j=%d)", d->j); break;
    }
    int size = d->size[g];
    int *local = (int *)malloc((size_t)size * sizeof(int)), *world = (int *)malloc((size_t)size * sizeof(int));
    MPI_Group gg, gw;
    if (!local || !world || MPI_Comm_group(c->comm[g], &gg) != MPI_SUCCESS) {
        free(local);
        free(world);
        return;
    }
    MPI_Comm_group(MPI_COMM_WORLD, &gw);
    for (int r = 0; r < size; r++)
        local[r] = r;
    if (MPI_Group_translate_ranks(gg, size, local, gw, world) == MPI_SUCCESS) {
        n += snprintf(o + n, cap - (size_t)n, " ranks {");
        for (int r = 0; r < size && (size_t)n + 16 < cap; r++)
            n += snprintf(o + n, cap - (size_t)n, "%s%d", r ? "," : "", world[r]);
        snprintf(o + n, cap - (size_t)n, "%s}", (size_t)n + 16 < cap ? "" : ",...");
    }
    MPI_Group_free(&gg);
    MPI_Group_free(&gw);
    free(local);
    free(world);
}

bool trc_comm_init(tr_ctx *c, tr_err *err)
{
    const tr_rank_desc *d = c->desc;
    trc_g.steps = d->steps;
    for (int g = 0; g < TR_NGROUPS; g++)
        if (d->size[g] > 1)
            describe_group(c, g);
    if (trc_g.use_nccl) {
        for (int g = 0; g < TR_NGROUPS; g++) {
            int used = 0;
            for (int i = 0; i < d->nsteps; i++)
                used |= d->steps[i].group == g;
            if (d->size[g] < 2 || !used)
                continue; /* a group of one, or one the schedule never uses: no communicator */
            ncclUniqueId id;
            memset(&id, 0, sizeof id);
            if (d->key[g] == 0)
                ncclCheck(ncclGetUniqueId(&id));
            mpiCheck(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, c->comm[g]));
            ncclCheck(ncclCommInitRank(&trc_g.nccl[g], d->size[g], id, d->key[g]));
        }
        return true;
    }
    long long most = 1;
    for (int i = 0; i < d->nsteps; i++)
        if ((d->steps[i].kind == TR_K_BCAST || d->steps[i].kind == TR_K_ALLREDUCE || d->steps[i].kind == TR_K_REDUCE) &&
            d->steps[i].count > most)
            most = d->steps[i].count;
    cudaError_t e = cudaMallocHost((void **)&trc_g.stage, (size_t)most * sizeof(float));
    if (e != cudaSuccess)
        return tr_fail(err, "cannot allocate the %lld-byte pinned staging buffer for TESS_COMM=mpi: %s",
                       most * (long long)sizeof(float), cudaGetErrorString(e));
    trc_g.stage_elems = most;
    return true;
}

/* trc_allreduce_maxloc under NCCL: every member's pairs gathered, grown on demand (maxloc_dev) */
static float *maxloc_all;   /* device: [members][count] */
static size_t maxloc_cap;   /* its floats */

void trc_comm_free(void)
{
    /* every rank of a communicator finalizes it (flushing what is outstanding), in the same group order on
     * every rank, then frees it */
    for (int g = 0; g < TR_NGROUPS; g++)
        if (trc_g.nccl[g])
            ncclCheck(ncclCommFinalize(trc_g.nccl[g]));
    for (int g = 0; g < TR_NGROUPS; g++)
        if (trc_g.nccl[g]) {
            ncclCheck(ncclCommDestroy(trc_g.nccl[g]));
            trc_g.nccl[g] = NULL;
        }
    if (trc_g.stage)
        cudaFreeHost(trc_g.stage);
    trc_g.stage = NULL;
    if (maxloc_all)
        cudaFree(maxloc_all);
    maxloc_all = NULL;
    maxloc_cap = 0;
}

/* the last collective this rank issued, after a failure message */
static void print_last_collective(void)
{
    int id = trc_g.last_comm_step;
    if (id < 0 || !trc_g.steps)
        return;
    const tr_step_info *st = &trc_g.steps[id];
    fprintf(stderr, "  (last collective issued: step %d, layer %d %s%s%d, %s over %s)\n", id, st->layer, st->op,
            st->t >= 0 ? " t=" : "", st->t >= 0 ? st->t : 0, tr_kind_name(st->kind),
            st->group >= 0 && st->group < TR_NGROUPS ? trc_g.group_desc[st->group] : "?");
}

[[noreturn]] static void comm_give_up(void)
{
    for (int g = 0; g < TR_NGROUPS; g++)
        if (trc_g.nccl[g]) {
            ncclCommAbort(trc_g.nccl[g]); /* stops this rank's NCCL kernels, so the process can exit */
            trc_g.nccl[g] = NULL;
        }
    print_last_collective();
    trc_print_step();
    trc_die();
}

void trc_wait_stream(cudaStream_t s, const char *what)
{
    trc_g.host_syncs++;
    int any = 0;
    for (int g = 0; g < TR_NGROUPS; g++)
        any |= trc_g.nccl[g] != NULL;
    if (!any) {
        cudaCheck(cudaStreamSynchronize(s));
        return;
    }
    const double t0 = tr_now();
    for (unsigned spin = 0;; spin++) {
        cudaError_t e = cudaStreamQuery(s);
        if (e == cudaSuccess)
            return;
        if (e != cudaErrorNotReady)
            trc_cuda_fail(e, "cudaStreamQuery (waiting for the streams)", __FILE__, __LINE__);
        for (int g = 0; g < TR_NGROUPS; g++) {
            if (!trc_g.nccl[g])
                continue;
            ncclResult_t ae = ncclSuccess;
            ncclCheck(ncclCommGetAsyncError(trc_g.nccl[g], &ae));
            if (ae != ncclSuccess && ae != ncclInProgress) {
                int r = -1;
                MPI_Comm_rank(MPI_COMM_WORLD, &r);
                fprintf(stderr,
                        "rank %d: the NCCL communicator of %s failed while this rank waited for its %s stream: %s "
                        "(%s)\nhint: a member rank died or its GPU or network failed (NCCL_DEBUG=WARN says which); "
                        "every rank is stopped\n",
                        r, trc_g.group_desc[g], what, ncclGetErrorString(ae), ncclGetLastError(trc_g.nccl[g]));
                comm_give_up();
            }
        }
        if (trc_g.comm_timeout > 0 && (spin & 255) == 0 && tr_now() - t0 > trc_g.comm_timeout) {
            int r = -1;
            MPI_Comm_rank(MPI_COMM_WORLD, &r);
            fprintf(stderr,
                    "rank %d: waited %.0f s for its %s stream with NCCL collectives pending and no progress; no "
                    "communicator reported an error. A member rank is stuck or gone; its communicators:",
                    r, trc_g.comm_timeout, what);
            for (int g = 0; g < TR_NGROUPS; g++)
                if (trc_g.nccl[g])
                    fprintf(stderr, " %s;", trc_g.group_desc[g]);
            fprintf(stderr, "\nhint: raise TESS_COMM_TIMEOUT (seconds; 0 waits forever) if the work is just slow; "
                            "every rank is stopped\n");
            comm_give_up();
        }
        if (spin < 4096) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000}; /* 20 us: past the first few ms, do not burn a core */
            nanosleep(&ts, NULL);
        }
    }
}

/* bytes: what a collective stages through the host buffer */
static void check_stage(size_t bytes)
{
    if (bytes <= (size_t)trc_g.stage_elems * sizeof(float))
        return;
    fprintf(stderr, "internal error: a collective of %zu bytes exceeds the %lld-byte staging buffer\n", bytes,
            trc_g.stage_elems * (long long)sizeof(float));
    MPI_Abort(MPI_COMM_WORLD, TRC_EXIT_DEVICE);
}

/* a broadcast of count elements of `esize` bytes (ncclFloat/MPI_FLOAT, or ncclBfloat16/MPI_UINT16_T) */
static void bcast_typed(tr_ctx *c, tr_group g, int root, void *buf, int count, size_t esize, ncclDataType_t ntype,
                        MPI_Datatype mtype)
{
    trc_g.last_comm_step = c->cur_step;
    cudaStream_t s = trc_g.stream[TRC_COMM];
    int me = c->desc->key[g];
    const size_t bytes = (size_t)count * esize;
    if (c->desc->size[g] > 1) {
        if (trc_g.use_nccl) {
            /* in place: the root sends from buf, the others receive into it */
            ncclCheck(ncclBroadcast(buf, buf, (size_t)count, ntype, root, trc_g.nccl[g], s));
            trc_count_launch();
        } else {
            check_stage(bytes);
            if (me == root) /* after the waits of trc_begin: buf holds the block */
                cudaCheck(cudaMemcpyAsync(trc_g.stage, buf, bytes, cudaMemcpyDeviceToHost, s));
            trc_g.host_syncs++;
            cudaCheck(cudaStreamSynchronize(s)); /* also: the last copy out of the staging buffer is done */
            mpiCheck(MPI_Bcast(trc_g.stage, count, mtype, root, c->comm[g]));
            if (me != root)
                cudaCheck(cudaMemcpyAsync(buf, trc_g.stage, bytes, cudaMemcpyHostToDevice, s));
        }
    }
    if (me == root)
        c->bcast_sent[g] += (long long)bytes;
    else
        c->bcast_recv[g] += (long long)bytes;
}

void trc_bcast(tr_ctx *c, tr_group g, int root, float *buf, int count)
{
    bcast_typed(c, g, root, buf, count, sizeof(float), ncclFloat, MPI_FLOAT);
}

void trc_bcast_bf16(tr_ctx *c, tr_group g, int root, tr_bf16 *buf, int count)
{
    bcast_typed(c, g, root, buf, count, sizeof(tr_bf16), ncclBfloat16, MPI_UINT16_T);
}

/* an all-reduce in place: sum (trc_allreduce) or maximum (trc_allreduce_max, the LM loss's row maxima) */
static void allreduce_op(tr_ctx *c, tr_group g, float *buf, int count, ncclRedOp_t nop, MPI_Op mop)
{
    trc_g.last_comm_step = c->cur_step;
    cudaStream_t s = trc_g.stream[TRC_COMM];
    if (c->desc->size[g] > 1) {
        if (trc_g.use_nccl) {
            ncclCheck(ncclAllReduce(buf, buf, (size_t)count, ncclFloat, nop, trc_g.nccl[g], s));
            trc_count_launch();
        } else {
            size_t bytes = (size_t)count * sizeof(float);
            check_stage(bytes);
            cudaCheck(cudaMemcpyAsync(trc_g.stage, buf, bytes, cudaMemcpyDeviceToHost, s));
            trc_g.host_syncs++;
            cudaCheck(cudaStreamSynchronize(s));
            mpiCheck(MPI_Allreduce(MPI_IN_PLACE, trc_g.stage, count, MPI_FLOAT, mop, c->comm[g]));
            cudaCheck(cudaMemcpyAsync(buf, trc_g.stage, bytes, cudaMemcpyHostToDevice, s));
        }
    }
    c->allreduce[g] += (long long)count * (long long)sizeof(float);
}

void trc_allreduce(tr_ctx *c, tr_group g, float *buf, int count)
{
    allreduce_op(c, g, buf, count, ncclSum, MPI_SUM);
}

void trc_allreduce_max(tr_ctx *c, tr_group g, float *buf, int count)
{
    allreduce_op(c, g, buf, count, ncclMax, MPI_MAX);
}

/* generation's (max logit, id) pairs under MPI: the staging buffer where it is big enough (MPI mode), else a small
 * pinned one of its own, grown on demand (the pairs of a step: two floats a local sequence row) */
static float *maxloc_host(size_t bytes)
{
    static float *own;
    static size_t cap;
    if (trc_g.stage && bytes <= (size_t)trc_g.stage_elems * sizeof(float))
        return trc_g.stage;
    if (bytes > cap) {
        if (own)
            cudaCheck(cudaFreeHost(own));
        own = NULL;
        cudaCheck(cudaMallocHost((void **)&own, bytes));
        cap = bytes;
    }
    return own;
}

/* ... under NCCL: every member's count floats gathered into device memory [members][count] (the prefill's pairs, the
 * most of a run, come first and are issued launch by launch: a decode step captured into a CUDA graph finds it big
 * enough) */
static float *maxloc_dev(tr_ctx *c, size_t floats)
{
    float *&all = maxloc_all;
    size_t &cap = maxloc_cap;
    if (floats > cap) {
        if (trc_g.capturing) { /* cudaMalloc cannot be captured: an internal error, never reached by the schedule */
            fprintf(stderr, "rank %d: internal error: the max-loc all-reduce's gather buffer grows to %zu floats "
                            "inside a CUDA graph capture; rerun with TESS_CUDA_GRAPH=0\n",
                    c->desc->rank, floats);
            trc_die();
        }
        if (all)
            cudaCheck(cudaFree(all));
        all = NULL;
        cudaCheck(cudaMalloc((void **)&all, floats * sizeof(float)));
        cap = floats;
    }
    return all;
}

/* buf's pairs e < npairs: the largest value of the n members' (all: [n][count]), the lowest id of equal ones: what
 * MPI_MAXLOC gives, whatever the members' order */
__global__ void k_maxloc_pick(const float *__restrict__ all, float *__restrict__ buf, int npairs, int count, int n)
{
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= npairs)
        return;
    float best = all[2 * e];
    int id = __float_as_int(all[2 * e + 1]);
    for (int k = 1; k < n; k++) {
        const float v = all[(size_t)k * count + 2 * e];
        const int i = __float_as_int(all[(size_t)k * count + 2 * e + 1]);
        if (v > best || (v == best && i < id)) {
            best = v;
            id = i;
        }
    }
    buf[2 * e] = best;
    buf[2 * e + 1] = __int_as_float(id);
}

void trc_allreduce_maxloc(tr_ctx *c, tr_group g, float *buf, int count)
{
    trc_g.last_comm_step = c->cur_step;
    cudaStream_t s = trc_g.stream[TRC_COMM];
    const int n = c->desc->size[g];
    if (n > 1 && trc_g.use_nccl) { /* no host wait: a decode step can be captured (docs/CUDA.md "CUDA graphs") */
        float *all = maxloc_dev(c, (size_t)n * (size_t)count);
        ncclCheck(ncclAllGather(buf, all, (size_t)count, ncclFloat, trc_g.nccl[g], s));
        trc_count_launch();
        const int npairs = count / 2;
        if (npairs > 0) {
            k_maxloc_pick<<<(npairs + 255) / 256, 256, 0, s>>>(all, buf, npairs, count, n);
            trc_launch_check("k_maxloc_pick", __FILE__, __LINE__);
        }
    } else if (n > 1) {
        size_t bytes = (size_t)count * sizeof(float);
        float *h = maxloc_host(bytes);
        cudaCheck(cudaMemcpyAsync(h, buf, bytes, cudaMemcpyDeviceToHost, s));
        trc_wait_stream(s, "comm (the max-loc all-reduce of generation's argmax pairs)");
        mpiCheck(MPI_Allreduce(MPI_IN_PLACE, h, count / 2, MPI_FLOAT_INT, MPI_MAXLOC, c->comm[g]));
        cudaCheck(cudaMemcpyAsync(buf, h, bytes, cudaMemcpyHostToDevice, s));
    }
    c->allreduce[g] += (long long)count * (long long)sizeof(float);
}

void trc_reduce(tr_ctx *c, tr_group g, int root, float *buf, int count)
{
    trc_g.last_comm_step = c->cur_step;
    cudaStream_t s = trc_g.stream[TRC_COMM];
    int me = c->desc->key[g], size = c->desc->size[g];
    if (size > 1) {
        if (trc_g.use_nccl) {
            /* in place on the root; the others' buf is only sent */
            ncclCheck(ncclReduce(buf, buf, (size_t)count, ncclFloat, ncclSum, root, trc_g.nccl[g], s));
            trc_count_launch();
        } else {
            size_t bytes = (size_t)count * sizeof(float);
            check_stage(bytes);
            cudaCheck(cudaMemcpyAsync(trc_g.stage, buf, bytes, cudaMemcpyDeviceToHost, s));
            trc_g.host_syncs++;
            cudaCheck(cudaStreamSynchronize(s));
            if (me == root) {
                mpiCheck(MPI_Reduce(MPI_IN_PLACE, trc_g.stage, count, MPI_FLOAT, MPI_SUM, root, c->comm[g]));
                cudaCheck(cudaMemcpyAsync(buf, trc_g.stage, bytes, cudaMemcpyHostToDevice, s));
            } else {
                mpiCheck(MPI_Reduce(trc_g.stage, NULL, count, MPI_FLOAT, MPI_SUM, root, c->comm[g]));
            }
        }
    }
    if (me == root)
        c->reduce_recv[g] += (long long)count * (long long)sizeof(float) * (size - 1);
    else
        c->reduce_sent[g] += (long long)count * (long long)sizeof(float);
}

void trc_allreduce_exact(tr_ctx *c, tr_group g, float *buf, int count)
{
    trc_g.last_comm_step = c->cur_step;
    cudaStream_t s = trc_g.stream[TRC_COMM];
    int me = c->desc->key[g];
    if (c->desc->size[g] > 1) {
        if (trc_g.use_nccl) {
            /* member 0's sum, then member 0's bits everywhere: both in place, in stream order */
            ncclCheck(ncclReduce(buf, buf, (size_t)count, ncclFloat, ncclSum, 0, trc_g.nccl[g], s));
            trc_count_launch();
            ncclCheck(ncclBroadcast(buf, buf, (size_t)count, ncclFloat, 0, trc_g.nccl[g], s));
            trc_count_launch();
        } else {
            size_t bytes = (size_t)count * sizeof(float);
            check_stage(bytes);
            cudaCheck(cudaMemcpyAsync(trc_g.stage, buf, bytes, cudaMemcpyDeviceToHost, s));
            trc_g.host_syncs++;
            cudaCheck(cudaStreamSynchronize(s));
            if (me == 0)
                mpiCheck(MPI_Reduce(MPI_IN_PLACE, trc_g.stage, count, MPI_FLOAT, MPI_SUM, 0, c->comm[g]));
            else
                mpiCheck(MPI_Reduce(trc_g.stage, NULL, count, MPI_FLOAT, MPI_SUM, 0, c->comm[g]));
            mpiCheck(MPI_Bcast(trc_g.stage, count, MPI_FLOAT, 0, c->comm[g]));
            cudaCheck(cudaMemcpyAsync(buf, trc_g.stage, bytes, cudaMemcpyHostToDevice, s));
        }
    }
    c->allreduce[g] += (long long)count * (long long)sizeof(float);
}

/* ---- optimizer.shard: reduce-scatter and all-gather over dep (trc.h) ---- */

/* Slice k of count elements cut into n slices of ceil(count/n): its first element and length (0 past the end). */
static void shard_slice(long long count, int n, int k, long long *lo, long long *len)
{
    long long cs = (count + n - 1) / n, a = (long long)k * cs, b = a + cs < count ? a + cs : count;
    *lo = a < count ? a : count;
    *len = b > a ? b - a : 0;
}

void trc_reduce_scatter(tr_ctx *c, tr_group g, float *buf, long long count)
{
    trc_g.last_comm_step = c->cur_step;
    cudaStream_t s = trc_g.stream[TRC_COMM];
    int n = c->desc->size[g], me = c->desc->key[g];
    if (n > 1) {
        if (trc_g.use_nccl) {
            if (count % n == 0) { /* in place: member k's result lands at buf + k * count/n */
                size_t rc = (size_t)(count / n);
                ncclCheck(ncclReduceScatter(buf, buf + (size_t)me * rc, rc, ncclFloat, ncclSum, trc_g.nccl[g], s));
            } else { /* uneven slices: one reduce per slice onto its owner, in place there */
                ncclCheck(ncclGroupStart());
                for (int k = 0; k < n; k++) {
                    long long lo, len;
                    shard_slice(count, n, k, &lo, &len);
                    if (len > 0)
                        ncclCheck(ncclReduce(buf + lo, buf + lo, (size_t)len, ncclFloat, ncclSum, k, trc_g.nccl[g], s));
                }
                ncclCheck(ncclGroupEnd());
            }
            trc_count_launch();
        } else { /* tr_comm.c's algorithm on the staged copy: the CPU program's bits */
            size_t bytes = (size_t)count * sizeof(float);
            check_stage(bytes);
            long long lo, len;
            shard_slice(count, n, me, &lo, &len);
            int *tab = (int *)malloc(4 * (size_t)n * sizeof(int));
            float *parts = (float *)malloc(((size_t)n * (size_t)len + 1) * sizeof(float));
            if (!tab || !parts) {
                fprintf(stderr, "out of memory in the reduce-scatter over %s\n", trc_g.group_desc[g]);
                MPI_Abort(MPI_COMM_WORLD, TRC_EXIT_DEVICE);
            }
            for (int k = 0; k < n; k++) { /* send: slice k to member k; receive: everyone's part of my slice */
                long long a, l;
                shard_slice(count, n, k, &a, &l);
                tab[k] = (int)l;
                tab[n + k] = (int)a;
                tab[2 * n + k] = (int)len;
                tab[3 * n + k] = (int)((long long)k * len);
            }
            cudaCheck(cudaMemcpyAsync(trc_g.stage, buf, bytes, cudaMemcpyDeviceToHost, s));
            trc_g.host_syncs++;
            cudaCheck(cudaStreamSynchronize(s));
            mpiCheck(MPI_Alltoallv(trc_g.stage, tab, tab + n, MPI_FLOAT, parts, tab + 2 * n, tab + 3 * n, MPI_FLOAT,
                                   c->comm[g]));
            for (long long e = 0; e < len; e++) { /* member order 0, 1, .., n-1 */
                float sum = parts[e];
                for (int k = 1; k < n; k++)
                    sum += parts[(long long)k * len + e];
                trc_g.stage[lo + e] = sum;
            }
            free(tab);
            free(parts);
            if (len > 0)
                cudaCheck(cudaMemcpyAsync(buf + lo, trc_g.stage + lo, (size_t)len * sizeof(float),
                                          cudaMemcpyHostToDevice, s));
        }
    }
    c->rscatter[g] += 4LL * count;
    c->rscatter_run += 4LL * count;
    long long mlo, mlen; /* the others' parts of this member's slice: generation's weight-stationary bytes */
    shard_slice(count, n, me, &mlo, &mlen);
    c->rs_recv[g] += 4LL * (n - 1) * mlen;
}

/* An all-gather of count elements of esize bytes (ncclType / mpiType), counted in bytes. */
static void allgather_typed(tr_ctx *c, tr_group g, void *vbuf, long long count, size_t esize, ncclDataType_t ncclType,
                            MPI_Datatype mpiType)
{
    char *buf = static_cast<char *>(vbuf), *stage = reinterpret_cast<char *>(trc_g.stage);
    trc_g.last_comm_step = c->cur_step;
    cudaStream_t s = trc_g.stream[TRC_COMM];
    int n = c->desc->size[g], me = c->desc->key[g];
    if (n > 1) {
        if (trc_g.use_nccl) {
            if (count % n == 0) { /* in place: this member's slice is at buf + me * count/n */
                size_t sc = (size_t)(count / n);
                ncclCheck(ncclAllGather(buf + (size_t)me * sc * esize, buf, sc, ncclType, trc_g.nccl[g], s));
            } else { /* uneven slices: each owner broadcasts its slice (bits copied) */
                ncclCheck(ncclGroupStart());
                for (int k = 0; k < n; k++) {
                    long long lo, len;
                    shard_slice(count, n, k, &lo, &len);
                    if (len > 0)
                        ncclCheck(ncclBroadcast(buf + lo * esize, buf + lo * esize, (size_t)len, ncclType, k,
                                                trc_g.nccl[g], s));
                }
                ncclCheck(ncclGroupEnd());
            }
            trc_count_launch();
        } else {
            size_t bytes = (size_t)count * esize;
            check_stage(bytes);
            long long lo, len;
            shard_slice(count, n, me, &lo, &len);
            int *tab = (int *)malloc(2 * (size_t)n * sizeof(int));
            if (!tab) {
                fprintf(stderr, "out of memory in the all-gather over %s\n", trc_g.group_desc[g]);
                MPI_Abort(MPI_COMM_WORLD, TRC_EXIT_DEVICE);
            }
            for (int k = 0; k < n; k++) {
                long long a, l;
                shard_slice(count, n, k, &a, &l);
                tab[k] = (int)l;
                tab[n + k] = (int)a;
            }
            if (len > 0)
                cudaCheck(cudaMemcpyAsync(stage + lo * esize, buf + lo * esize, (size_t)len * esize,
                                          cudaMemcpyDeviceToHost, s));
            trc_g.host_syncs++;
            cudaCheck(cudaStreamSynchronize(s));
            mpiCheck(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, stage, tab, tab + n, mpiType, c->comm[g]));
            free(tab);
            cudaCheck(cudaMemcpyAsync(buf, stage, bytes, cudaMemcpyHostToDevice, s));
        }
    }
    c->allgather[g] += (long long)esize * count;
    c->allgather_run += (long long)esize * count;
    long long mlo, mlen; /* the others' slices: generation's weight-stationary bytes */
    shard_slice(count, n, me, &mlo, &mlen);
    c->ag_recv[g] += (long long)esize * (count - mlen);
}

void trc_allgather(tr_ctx *c, tr_group g, float *buf, long long count)
{
    allgather_typed(c, g, buf, count, sizeof(float), ncclFloat, MPI_FLOAT);
}

void trc_allgather_bf16(tr_ctx *c, tr_group g, tr_bf16 *buf, long long count)
{
    allgather_typed(c, g, buf, count, sizeof(tr_bf16), ncclBfloat16, MPI_UINT16_T);
}
