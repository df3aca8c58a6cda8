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
 * The step read also turns the timing events of the steps issued so far into seconds (trc_harvest): all of
 * them have finished once the compute stream has, since every phase ends with the compute stream waiting for
 * the comm stream.
 */
#include <string.h>

#include "trc_internal.h"
#include "trc_step.h"

extern "C" {
#include "tr_tokens.h"
}

namespace {

constexpr int kT = TRC_RED_THREADS;
constexpr int kB = TRC_RED_BLOCKS;

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
} st;

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

/* every gradient element *= s */
__global__ void __launch_bounds__(kT)
    k_scale(float *__restrict__ A, const trc_grad_seg *__restrict__ segs, int nsegs, long long n, long long ch,
            float s)
{
    const long long lo = (long long)blockIdx.x * ch, hi = lo + ch < n ? lo + ch : n;
    long long e = lo + threadIdx.x;
    if (e >= hi)
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
 * t + kT, ... in order, then the pairwise order. */
__global__ void __launch_bounds__(kT) k_final(const double2 *__restrict__ part, double *__restrict__ out, int two)
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
        out[0] = r.x;
        if (two)
            out[1] = r.y;
    }
}

cudaStream_t compute(void)
{
    return trc_g.stream[TRC_COMPUTE];
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
    if (e != cudaSuccess) {
        free(segs);
        cudaGetLastError();
        return tr_fail(err, "cannot allocate the training step's buffers on GPU %d (%s): %s", trc_g.device,
                       trc_g.device_name, cudaGetErrorString(e));
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
    long long n = (long long)d->io_rows * d->io_cols;
    float *dy = A + d->gx_offset;
    if (tr_lm_vocab()) {
        k_lm_loss<<<kB, kT, 0, compute()>>>(A + tr_lm()->loss_offset, tr_lm_counts_loss(d) ? 1 : 0, dy,
                                            d->io_rows, n, trc_red_chunk(n), st.part);
    } else {
        double total_n = (double)tr_model.batch * tr_model.seq * tr_model.hidden;
        k_mse<<<kB, kT, 0, compute()>>>(A + d->y_offset, st.target, dy, n, trc_red_chunk(n), total_n, st.part);
    }
    trc_launch_check("the objective's kernel", __FILE__, __LINE__);
    k_final<<<1, kT, 0, compute()>>>(st.part, st.res, 0);
    trc_launch_check("k_final (loss)", __FILE__, __LINE__);
    st.issued[0] = 1;
}

extern "C" void tr_backend_grad_sums(tr_ctx *c, float *A)
{
    (void)c;
    k_grad_sums<<<kB, kT, 0, compute()>>>(A, st.segs, st.nsegs, st.ngrad, trc_red_chunk(st.ngrad), st.part);
    trc_launch_check("k_grad_sums", __FILE__, __LINE__);
    k_final<<<1, kT, 0, compute()>>>(st.part, st.res + 1, 1);
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
    (void)c;
    k_scale<<<kB, kT, 0, compute()>>>(A, st.segs, st.nsegs, st.ngrad, trc_red_chunk(st.ngrad), s);
    trc_launch_check("k_scale", __FILE__, __LINE__);
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
    memset(&st, 0, sizeof st);
}
