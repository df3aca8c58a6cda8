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
 * Training adds reduce (ncclReduce in place on the root; MPI_Reduce through the staging buffer) and the
 * exact all-reduce of replicated gradients: reduce to member 0, then broadcast from it, so every member
 * holds member 0's bits (an ncclAllReduce or MPI_Allreduce need not give all members the same bits).
 *
 * auto (the default) is nccl when no node has more ranks than GPUs, else mpi.
 * Counting is logical and identical to the CPU backend's tr_comm.c: a
 * broadcast counts `count` received on every member but the root and `count`
 * sent by the root; an all-reduce (exact or not) counts `count` reduced; a reduce counts `count` from
 * each other member received on the root and `count` sent by every other member.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trc_internal.h"

bool trc_comm_init(tr_ctx *c, tr_err *err)
{
    const tr_rank_desc *d = c->desc;
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

void trc_comm_free(void)
{
    for (int g = 0; g < TR_NGROUPS; g++)
        if (trc_g.nccl[g]) {
            ncclCommDestroy(trc_g.nccl[g]);
            trc_g.nccl[g] = NULL;
        }
    if (trc_g.stage)
        cudaFreeHost(trc_g.stage);
    trc_g.stage = NULL;
}

static void check_stage(int count)
{
    if (count <= trc_g.stage_elems)
        return;
    fprintf(stderr, "internal error: a collective of %d elements exceeds the %lld-element staging buffer\n", count,
            trc_g.stage_elems);
    MPI_Abort(MPI_COMM_WORLD, TRC_EXIT_DEVICE);
}

void trc_bcast(tr_ctx *c, tr_group g, int root, float *buf, int count)
{
    cudaStream_t s = trc_g.stream[TRC_COMM];
    int me = c->desc->key[g];
    if (c->desc->size[g] > 1) {
        if (trc_g.use_nccl) {
            /* in place: the root sends from buf, the others receive into it */
            ncclCheck(ncclBroadcast(buf, buf, (size_t)count, ncclFloat, root, trc_g.nccl[g], s));
        } else {
            check_stage(count);
            size_t bytes = (size_t)count * sizeof(float);
            if (me == root) /* after the waits of trc_begin: buf holds the block */
                cudaCheck(cudaMemcpyAsync(trc_g.stage, buf, bytes, cudaMemcpyDeviceToHost, s));
            cudaCheck(cudaStreamSynchronize(s)); /* also: the last copy out of the staging buffer is done */
            mpiCheck(MPI_Bcast(trc_g.stage, count, MPI_FLOAT, root, c->comm[g]));
            if (me != root)
                cudaCheck(cudaMemcpyAsync(buf, trc_g.stage, bytes, cudaMemcpyHostToDevice, s));
        }
    }
    if (me == root)
        c->bcast_sent[g] += count;
    else
        c->bcast_recv[g] += count;
}

void trc_allreduce(tr_ctx *c, tr_group g, float *buf, int count)
{
    cudaStream_t s = trc_g.stream[TRC_COMM];
    if (c->desc->size[g] > 1) {
        if (trc_g.use_nccl) {
            ncclCheck(ncclAllReduce(buf, buf, (size_t)count, ncclFloat, ncclSum, trc_g.nccl[g], s));
        } else {
            check_stage(count);
            size_t bytes = (size_t)count * sizeof(float);
            cudaCheck(cudaMemcpyAsync(trc_g.stage, buf, bytes, cudaMemcpyDeviceToHost, s));
            cudaCheck(cudaStreamSynchronize(s));
            mpiCheck(MPI_Allreduce(MPI_IN_PLACE, trc_g.stage, count, MPI_FLOAT, MPI_SUM, c->comm[g]));
            cudaCheck(cudaMemcpyAsync(buf, trc_g.stage, bytes, cudaMemcpyHostToDevice, s));
        }
    }
    c->allreduce[g] += count;
}

void trc_reduce(tr_ctx *c, tr_group g, int root, float *buf, int count)
{
    cudaStream_t s = trc_g.stream[TRC_COMM];
    int me = c->desc->key[g], size = c->desc->size[g];
    if (size > 1) {
        if (trc_g.use_nccl) {
            /* in place on the root; the others' buf is only sent */
            ncclCheck(ncclReduce(buf, buf, (size_t)count, ncclFloat, ncclSum, root, trc_g.nccl[g], s));
        } else {
            check_stage(count);
            size_t bytes = (size_t)count * sizeof(float);
            cudaCheck(cudaMemcpyAsync(trc_g.stage, buf, bytes, cudaMemcpyDeviceToHost, s));
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
        c->reduce_recv[g] += (long long)count * (size - 1);
    else
        c->reduce_sent[g] += count;
}

void trc_allreduce_exact(tr_ctx *c, tr_group g, float *buf, int count)
{
    cudaStream_t s = trc_g.stream[TRC_COMM];
    int me = c->desc->key[g];
    if (c->desc->size[g] > 1) {
        if (trc_g.use_nccl) {
            /* member 0's sum, then member 0's bits everywhere: both in place, in stream order */
            ncclCheck(ncclReduce(buf, buf, (size_t)count, ncclFloat, ncclSum, 0, trc_g.nccl[g], s));
            ncclCheck(ncclBroadcast(buf, buf, (size_t)count, ncclFloat, 0, trc_g.nccl[g], s));
        } else {
            check_stage(count);
            size_t bytes = (size_t)count * sizeof(float);
            cudaCheck(cudaMemcpyAsync(trc_g.stage, buf, bytes, cudaMemcpyDeviceToHost, s));
            cudaCheck(cudaStreamSynchronize(s));
            if (me == 0)
                mpiCheck(MPI_Reduce(MPI_IN_PLACE, trc_g.stage, count, MPI_FLOAT, MPI_SUM, 0, c->comm[g]));
            else
                mpiCheck(MPI_Reduce(trc_g.stage, NULL, count, MPI_FLOAT, MPI_SUM, 0, c->comm[g]));
            mpiCheck(MPI_Bcast(trc_g.stage, count, MPI_FLOAT, 0, c->comm[g]));
            cudaCheck(cudaMemcpyAsync(buf, trc_g.stage, bytes, cudaMemcpyHostToDevice, s));
        }
    }
    c->allreduce[g] += count;
}
