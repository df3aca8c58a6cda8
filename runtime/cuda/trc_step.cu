/*
 * trc_step.cu - a training step's scalars on the device (tr_backend.h "a training step"): the objective's
 * local sum and dL/dy, the gradients' sums of squares for the global norm and the divergence check, and the
 * clipping scale, all on the compute stream; tr_backend_step_read copies the three sums into pinned memory
 * and waits once, the only wait of a step. Nothing is allocated after tr_backend_train_init.
 *
 * The sums follow trc_step.h's fixed order (per-block partials, then one block), so a run gives the same bits
 * every time and the emulation (tests/cuda/emu.cc) the same bits as the device; they differ from the CPU
 * program's sequential sums only by the order of double additions (about 1e-16 relative). dL/dy is the CPU's
 * arithmetic element by element (double difference, 2 diff / N rounded to float once): the same bits.
 *
 * The scalars that change from step to step (the learning rate, AdamW's bias corrections, the clipping scale) live
 * in a small device array written by one copy from pinned memory before each step's update (tr_backend_step_scalars),
 * and the kernels read them there: so the step can be captured once as CUDA graphs and replayed (docs/CUDA.md "CUDA
 * graphs"). A step is captured in two parts, TR_PART_GRADS (forward .. gradient sums) and TR_PART_UPDATE (clipping,
 * optimizer; an inference forward of --repeat is a third, TR_PART_FORWARD, and a generation's decode step a fourth,
 * TR_PART_DECODE), since the host decides between the two (the divergence check, the norm over all ranks): stream
 * capture on the compute stream, the comm stream forked and joined by the steps' own events. Allowed where every
 * collective can be captured: one rank, or NCCL (the decode step's max-loc all-reduce too: an all-gather of the pairs
 * and a pick on the device, trc_comm.cu); MPI host staging waits on the host inside the step.
 *
 * The step read also turns the timing events of the steps issued so far into seconds (trc_harvest): all of
 * them have finished once the compute stream has, since every phase ends with the compute stream waiting for
 * the comm stream.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trc_internal.h"
#include "trc_step.h"

extern "C" {
#include "tr_tokens.h"
}

namespace {

constexpr int kT = TRC_RED_THREADS;
constexpr int kB = TRC_RED_BLOCKS;
constexpr int kCounts = 9; /* tr_ctx's byte counters a graph's replay adds to (graph_counts) */

struct step_state {
    float *target;          /* device: the MSE target block [io_rows * io_cols] */
    trc_grad_seg *segs;     /* device: [nparams + 1] */
    int nsegs;
    long long ngrad;        /* gradient elements of the rank */
    double2 *part;          /* device: [kB] per-block partials */
    double *res;            /* device: [3] loss, canon, rest */
    double *pin;            /* pinned host: [3] */
    int issued[2];          /* objective, grad sums since the last read */
    float *batch_pin;       /* pinned host staging of --data batches: [batch_elems] */
    long long batch_elems, batch_used; /* its size, and how much of it copies issued since the last read use */
    float *sc, *sc_pin;     /* the step scalars (TRC_SC_*): device, and its pinned host source */
} st;

/* the CUDA graphs of a step's two parts */
struct graph_part {
    cudaGraphExec_t exec;   /* NULL until captured */
    long long launches;     /* kernels, GEMMs and collectives in it */
    unsigned char *timed;   /* per schedule step: its timing events are recorded by the graph */
    int fwd_timed;
    /* the bytes its collectives count (trc_comm.cu counts a call when it is issued; a captured call runs, and is
     * counted, at each replay): tr_ctx's counters, see graph_counts */
    long long n[kCounts][TR_NGROUPS];
};
struct graph_state {
    int inited;             /* graph_init ran */
    int allowed;            /* graphs may be captured (else `note` says why) */
    char note[320];
    graph_part part[TR_NPARTS];
} gr;

/* Block b's partials (a0, a1) of its threads into part[b]: the pairwise order of trc_step.h. */
__device__ void block_sum(double a0, double a1, double2 *out)
{
    __shared__ double s0[kT], s1[kT];
    const int t = threadIdx.x;
    s0[t] = a0;
    s1[t] = a1;
    __syncthreads();
    for (int s = kT / 2; s > 0; s >>= 1) {
        if (t < s) {
            s0[t] = __dadd_rn(s0[t], s0[t + s]);
            s1[t] = __dadd_rn(s1[t], s1[t + s]);
        }
        __syncthreads();
    }
    if (t == 0)
        *out = make_double2(s0[0], s1[0]);
}

/* sum (y - target)^2 of the block's chunk; dL/dy = 2 (y - target) / total_n */
__global__ void __launch_bounds__(kT)
    k_mse(const float *__restrict__ y, const float *__restrict__ tgt, float *__restrict__ dy, long long n,
          long long ch, double total_n, double2 *__restrict__ part)
{
    const long long lo = (long long)blockIdx.x * ch, hi = lo + ch < n ? lo + ch : n;
    double a = 0.0;
    for (long long e = lo + threadIdx.x; e < hi; e += kT) {
        const double diff = __dsub_rn((double)y[e], (double)tgt[e]);
        a = __dadd_rn(a, __dmul_rn(diff, diff));
        dy[e] = __double2float_rn(__ddiv_rn(__dmul_rn(2.0, diff), total_n));
    }
    block_sum(a, 0.0, &part[blockIdx.x]);
}

/* the sum of the rank's per-token losses (counted: this rank's count in the mean), dL/dy = 0 */
__global__ void __launch_bounds__(kT)
    k_lm_loss(const float *__restrict__ loss, int counted, float *__restrict__ dy, long long rows, long long n,
              long long ch, double2 *__restrict__ part)
{
    const long long lo = (long long)blockIdx.x * ch, hi = lo + ch < n ? lo + ch : n;
    double a = 0.0;
    for (long long e = lo + threadIdx.x; e < hi; e += kT) {
        if (counted && e < rows)
            a = __dadd_rn(a, (double)loss[e]);
        dy[e] = 0.0f;
    }
    block_sum(a, 0.0, &part[blockIdx.x]);
}

/* squares of the gradients: canon (counted in the norm) and rest */
__global__ void __launch_bounds__(kT)
    k_grad_sums(const float *__restrict__ A, const trc_grad_seg *__restrict__ segs, int nsegs, long long n,
                long long ch, double2 *__restrict__ part)
{
    const long long lo = (long long)blockIdx.x * ch, hi = lo + ch < n ? lo + ch : n;
    double a0 = 0.0, a1 = 0.0;
    long long e = lo + threadIdx.x;
    if (e < hi) {
        int si = trc_seg_find(segs, nsegs, e);
        for (; e < hi; e += kT) {
            while (segs[si + 1].start <= e)
                si++;
            const trc_grad_seg *s = &segs[si];
            const long long i = e - s->start;
            const float g = A[s->grad_offset + i];
            const double sq = __dmul_rn((double)g, (double)g);
            if (trc_seg_counted(s, (int)(i / s->cols), (int)(i % s->cols)))
                a0 = __dadd_rn(a0, sq);
            else
                a1 = __dadd_rn(a1, sq);
        }
    }
    block_sum(a0, a1, &part[blockIdx.x]);
}

/* every gradient element *= the step's clipping scale (none where it is 1: the same bits) */
__global__ void __launch_bounds__(kT)
    k_scale(float *__restrict__ A, const trc_grad_seg *__restrict__ segs, int nsegs, long long n, long long ch,
            const float *__restrict__ sc)
{
    const long long lo = (long long)blockIdx.x * ch, hi = lo + ch < n ? lo + ch : n;
    long long e = lo + threadIdx.x;
    const float s = sc[TRC_SC_CLIP];
    if (e >= hi || s == 1.0f)
        return;
    int si = trc_seg_find(segs, nsegs, e);
    for (; e < hi; e += kT) {
        while (segs[si + 1].start <= e)
            si++;
        float *g = &A[segs[si].grad_offset + (e - segs[si].start)];
        *g = __fmul_rn(*g, s);
    }
}

/* The kB partials into out[0] (and out[1] when two): one block, thread t starts from the sum of partials t,
 * t + kT, ... in order, then the pairwise order. add: out[0] += the sum (a later micro-batch's loss). */
__global__ void __launch_bounds__(kT)
    k_final(const double2 *__restrict__ part, double *__restrict__ out, int two, int add)
{
    double a0 = 0.0, a1 = 0.0;
    for (int b = threadIdx.x; b < kB; b += kT) {
        a0 = __dadd_rn(a0, part[b].x);
        a1 = __dadd_rn(a1, part[b].y);
    }
    __shared__ double2 r;
    block_sum(a0, a1, &r);
    __syncthreads();
    if (threadIdx.x == 0) {
        out[0] = add ? __dadd_rn(out[0], r.x) : r.x;
        if (two)
            out[1] = r.y;
    }
}

cudaStream_t compute(void)
{
    return trc_g.stream[TRC_COMPUTE];
}

/* the byte counters of tr_ctx a replay adds to: broadcasts, all-reduces, reduces, the reduce-scatters' and
 * all-gathers' (optimizer.shard's and generation's weight-stationary layout: payload, then bytes received) */
long long *graph_counts(tr_ctx *c, int k)
{
    long long *n[kCounts] = {c->bcast_recv, c->bcast_sent, c->allreduce, c->reduce_recv, c->reduce_sent,
                             c->rscatter,   c->allgather,  c->rs_recv,   c->ag_recv};
    return n[k];
}

/* TESS_CUDA_GRAPH and the collectives decide whether steps are captured; false with err on a bad value */
bool graph_init(tr_ctx *c, tr_err *err)
{
    if (gr.inited)
        return true;
    for (int p = 0; p < TR_NPARTS; p++)
        if (!(gr.part[p].timed = (unsigned char *)calloc((size_t)(c->desc->nsteps > 0 ? c->desc->nsteps : 1), 1)))
            return tr_fail(err, "out of host memory for the CUDA graphs' tables");
    gr.inited = 1;
    const char *v = getenv("TESS_CUDA_GRAPH");
    if (v && *v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
        return tr_fail(err, "TESS_CUDA_GRAPH=%s is not 0 or 1: use TESS_CUDA_GRAPH=0 to issue every training step "
                            "launch by launch, or 1 (the default) to replay it from CUDA graphs where the collectives "
                            "allow (docs/CUDA.md \"CUDA graphs\")",
                       v);
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    gr.allowed = 0;
    if (v && !strcmp(v, "0"))
        snprintf(gr.note, sizeof gr.note, "CUDA graphs: off (TESS_CUDA_GRAPH=0): every step issued launch by launch");
    else if (&tr_pipe_class && tr_pipe_class.stages > 1)
        snprintf(gr.note, sizeof gr.note,
                 "CUDA graphs: off: pipeline stages exchange their blocks through the host between micro-batches, "
                 "waits no graph can hold; every step issued launch by launch");
    else if (!trc_g.use_nccl && world > 1)
        snprintf(gr.note, sizeof gr.note,
                 "CUDA graphs: off: the collectives are MPI with host staging (TESS_COMM=mpi, or ranks sharing a "
                 "GPU), whose host waits no graph can hold; every step issued launch by launch");
    else
        gr.allowed = 1;
    return true;
}

/* Run part p's graph on the compute stream, as if its work had been issued now. */
void graph_replay(tr_ctx *c, int p)
{
    graph_part *g = &gr.part[p];
    for (int k = 0; k < TR_NGROUPS; k++) {
        for (int i = 0; i < kCounts; i++)
            graph_counts(c, i)[k] += g->n[i][k];
        c->rscatter_run += g->n[5][k];
        c->allgather_run += g->n[6][k];
    }
    cudaCheck(cudaGraphLaunch(g->exec, compute()));
    trc_g.replays++;
    trc_g.replayed += g->launches;
    for (int i = 0; i < trc_g.nsteps; i++)
        if (g->timed[i])
            trc_g.timed[i] = 1;
    if (g->fwd_timed)
        trc_g.fwd_timed = 1;
    if (p == TR_PART_GRADS)
        st.issued[0] = st.issued[1] = 1; /* it holds the objective and the gradient sums */
}

void graph_free(void)
{
    for (int p = 0; p < TR_NPARTS; p++) {
        if (gr.part[p].exec)
            cudaGraphExecDestroy(gr.part[p].exec);
        free(gr.part[p].timed);
    }
    memset(&gr, 0, sizeof gr);
}

} // namespace

extern "C" bool tr_backend_train_init(tr_ctx *c, float *A, const float *target, long long batch_elems, tr_err *err)
{
    (void)A;
    const tr_rank_desc *d = c->desc;
    if (!trc_g.inited || !trc_g.stream[0])
        return true; /* another rank failed its start-up */
    long long xn = (long long)d->io_rows * d->io_cols;
    size_t seg_bytes = sizeof(trc_grad_seg) * (size_t)(d->nparams + 1);
    trc_grad_seg *segs = (trc_grad_seg *)malloc(seg_bytes);
    if (!segs)
        return tr_fail(err, "out of host memory for the gradient table");
    st.ngrad = trc_grad_segs(d, segs);
    st.nsegs = d->nparams;
    cudaError_t e = cudaMalloc((void **)&st.segs, seg_bytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&st.part, sizeof(double2) * kB);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&st.res, 3 * sizeof(double));
    if (e == cudaSuccess && target)
        e = cudaMalloc((void **)&st.target, (size_t)(xn > 0 ? xn : 1) * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMallocHost((void **)&st.pin, 3 * sizeof(double));
    if (e == cudaSuccess && batch_elems > 0)
        e = cudaMallocHost((void **)&st.batch_pin, (size_t)batch_elems * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&st.sc, TRC_NSC * sizeof(float));
    if (e == cudaSuccess)
        e = cudaMallocHost((void **)&st.sc_pin, TRC_NSC * sizeof(float));
    if (e != cudaSuccess) {
        free(segs);
        cudaGetLastError();
        return tr_fail(err, "cannot allocate the training step's buffers on GPU %d (%s): %s", trc_g.device,
                       trc_g.device_name, cudaGetErrorString(e));
    }
    if (!graph_init(c, err)) {
        free(segs);
        return false;
    }
    st.batch_elems = batch_elems;
    /* set-up, before the first step: plain copies, waited for */
    cudaCheck(cudaMemcpyAsync(st.segs, segs, seg_bytes, cudaMemcpyHostToDevice, compute()));
    if (target)
        cudaCheck(cudaMemcpyAsync(st.target, target, (size_t)xn * sizeof(float), cudaMemcpyHostToDevice, compute()));
    cudaCheck(cudaMemsetAsync(st.res, 0, 3 * sizeof(double), compute()));
    trc_wait_stream(compute(), "compute (training set-up)");
    free(segs);
    return true;
}

extern "C" void tr_backend_objective(tr_ctx *c, float *A)
{
    const tr_rank_desc *d = c->desc;
    long long r0, nr; /* micro-batches: this one's rows only, its loss added to the earlier ones' (tr_backend.h) */
    tr_objective_rows(c, &r0, &nr);
    const long long e0 = r0 * d->io_cols, n = nr * d->io_cols;
    float *dy = A + d->gx_offset + e0;
    if (tr_lm_vocab()) {
        k_lm_loss<<<kB, kT, 0, compute()>>>(A + tr_lm()->loss_offset + r0, tr_lm_counts_loss(d) ? 1 : 0, dy, nr, n,
                                            trc_red_chunk(n), st.part);
    } else {
        double total_n = (double)tr_model.batch * tr_model.seq * tr_model.hidden;
        k_mse<<<kB, kT, 0, compute()>>>(A + d->y_offset + e0, st.target + e0, dy, n, trc_red_chunk(n), total_n,
                                        st.part);
    }
    trc_launch_check("the objective's kernel", __FILE__, __LINE__);
    k_final<<<1, kT, 0, compute()>>>(st.part, st.res, 0, c->mb > 0);
    trc_launch_check("k_final (loss)", __FILE__, __LINE__);
    st.issued[0] = 1;
}

extern "C" void tr_backend_grad_sums(tr_ctx *c, float *A)
{
    (void)c;
    k_grad_sums<<<kB, kT, 0, compute()>>>(A, st.segs, st.nsegs, st.ngrad, trc_red_chunk(st.ngrad), st.part);
    trc_launch_check("k_grad_sums", __FILE__, __LINE__);
    k_final<<<1, kT, 0, compute()>>>(st.part, st.res + 1, 1, 0);
    trc_launch_check("k_final (gradients)", __FILE__, __LINE__);
    st.issued[1] = 1;
}

extern "C" void tr_backend_step_read(tr_ctx *c, tr_step_sums *s)
{
    memset(s, 0, sizeof *s);
    if (!trc_g.inited || !trc_g.stream[0])
        return;
    /* the compute stream holds the last work of the phase (it waited for the comm stream): one copy, one wait */
    cudaCheck(cudaMemcpyAsync(st.pin, st.res, 3 * sizeof(double), cudaMemcpyDeviceToHost, compute()));
    trc_wait_stream(compute(), "compute (the step's loss and gradient norm)");
    if (st.issued[0])
        s->loss = st.pin[0];
    if (st.issued[1]) {
        s->canon = st.pin[1];
        s->rest = st.pin[2];
    }
    st.issued[0] = st.issued[1] = 0;
    st.batch_used = 0; /* every batch copy issued so far has landed */
    trc_harvest(c);
}

extern "C" void tr_backend_scale_grads(tr_ctx *c, float *A, float s)
{
    (void)c, (void)s; /* s is the step scalars' TRC_SC_CLIP, read on the device */
    k_scale<<<kB, kT, 0, compute()>>>(A, st.segs, st.nsegs, st.ngrad, trc_red_chunk(st.ngrad), st.sc);
    trc_launch_check("k_scale", __FILE__, __LINE__);
}

extern "C" void tr_backend_step_scalars(tr_ctx *c, float s)
{
    if (!trc_g.inited || !trc_g.stream[0])
        return;
    const tr_model_desc *md = &tr_model;
    /* the arithmetic trc_adamw did on the host: the same bits. The last copy out of sc_pin was issued before the
     * step's read, which waited for it. */
    st.sc_pin[TRC_SC_LR] = (float)c->lr;
    st.sc_pin[TRC_SC_C1] = (float)(1.0 - pow(md->beta1, c->opt_step));
    st.sc_pin[TRC_SC_C2] = (float)(1.0 - pow(md->beta2, c->opt_step));
    st.sc_pin[TRC_SC_CLIP] = s;
    cudaCheck(cudaMemcpyAsync(st.sc, st.sc_pin, TRC_NSC * sizeof(float), cudaMemcpyHostToDevice, compute()));
}

const float *trc_step_scalars(void)
{
    return st.sc;
}

extern "C" bool tr_backend_graph_init(tr_ctx *c, tr_err *err)
{
    if (!trc_g.inited || !trc_g.stream[0])
        return true; /* another rank failed its start-up */
    return graph_init(c, err);
}

extern "C" bool tr_backend_part_begin(tr_ctx *c, int part, bool capture)
{
    if (!gr.inited || !gr.allowed || !capture || !trc_g.inited || !trc_g.stream[0])
        return false;
    graph_part *g = &gr.part[part];
    if (g->exec) {
        graph_replay(c, part);
        return true;
    }
    for (int k = 0; k < TR_NGROUPS; k++) /* the counts before the capture: part_end takes the capture's own */
        for (int i = 0; i < kCounts; i++)
            g->n[i][k] = graph_counts(c, i)[k];
    /* thread-local: a CUDA call of another thread (an MPI progress thread) does not break the capture */
    cudaCheck(cudaStreamBeginCapture(compute(), cudaStreamCaptureModeThreadLocal));
    trc_g.capturing = 1;
    trc_g.captured = 0;
    trc_g.cap_timed = g->timed;
    memset(g->timed, 0, (size_t)trc_g.nsteps);
    trc_g.cap_fwd_timed = 0;
    return false;
}

extern "C" bool tr_backend_part_end(tr_ctx *c, int part)
{
    if (!trc_g.capturing)
        return true;
    trc_g.capturing = 0;
    trc_g.cap_timed = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t e = cudaStreamEndCapture(compute(), &graph);
    if (e == cudaSuccess)
        e = cudaGraphInstantiateWithFlags(&exec, graph, 0);
    if (graph)
        cudaGraphDestroy(graph);
    if (e != cudaSuccess) { /* nothing of the part ran: the caller issues it again, uncaptured */
        cudaGetLastError();
        gr.allowed = 0;
        snprintf(gr.note, sizeof gr.note, "CUDA graphs: off: capturing %s failed (%s); every step "
                 "issued launch by launch", part == TR_PART_FORWARD  ? "the forward"
                                            : part == TR_PART_DECODE ? "the decode step"
                                                                     : "a training step",
                 cudaGetErrorString(e));
        return false;
    }
    graph_part *g = &gr.part[part];
    g->exec = exec;
    g->launches = trc_g.captured;
    g->fwd_timed = trc_g.cap_fwd_timed;
    for (int k = 0; k < TR_NGROUPS; k++) { /* what the captured calls counted, taken back: each replay counts it */
        for (int i = 0; i < kCounts; i++) {
            g->n[i][k] = graph_counts(c, i)[k] - g->n[i][k];
            graph_counts(c, i)[k] -= g->n[i][k];
        }
        c->rscatter_run -= g->n[5][k];
        c->allgather_run -= g->n[6][k];
    }
    graph_replay(c, part); /* the step that captured it runs it too */
    return true;
}

extern "C" const char *tr_backend_graph_note(tr_ctx *c)
{
    (void)c;
    return gr.allowed || !gr.note[0] ? NULL : gr.note;
}

extern "C" bool tr_backend_launch_counts(tr_ctx *c, tr_launch_counts *n)
{
    (void)c;
    n->issued = trc_g.launches;
    n->replayed = trc_g.replayed;
    n->replays = trc_g.replays;
    return true;
}

extern "C" void tr_backend_upload_batch(tr_ctx *c, float *dst_run, const float *src_host, long long elems)
{
    if (!st.batch_pin || st.batch_used + elems > st.batch_elems) {
        tr_backend_upload(c, dst_run, src_host, elems); /* not planned for: a plain upload, waited for */
        return;
    }
    /* the staging bytes after those of the copies issued since the last read (which waited for every copy before
     * it): nothing still to be copied is overwritten */
    float *slot = st.batch_pin + st.batch_used;
    memcpy(slot, src_host, (size_t)elems * sizeof(float));
    cudaCheck(cudaMemcpyAsync(dst_run, slot, (size_t)elems * sizeof(float), cudaMemcpyHostToDevice, compute()));
    st.batch_used += elems;
}

void trc_step_free(void)
{
    if (st.segs)
        cudaFree(st.segs);
    if (st.part)
        cudaFree(st.part);
    if (st.res)
        cudaFree(st.res);
    if (st.target)
        cudaFree(st.target);
    if (st.pin)
        cudaFreeHost(st.pin);
    if (st.batch_pin)
        cudaFreeHost(st.batch_pin);
    if (st.sc)
        cudaFree(st.sc);
    if (st.sc_pin)
        cudaFreeHost(st.sc_pin);
    memset(&st, 0, sizeof st);
    graph_free();
}
