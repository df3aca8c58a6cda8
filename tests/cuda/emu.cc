/*
 * emu.cc - a host emulation of the CUDA backend's runtime (trc.h, kernels.cuh,
 * tr_backend.h), so that the generated rank_XXXX.cu files run, and are checked
 * against the float64 reference, on a machine without a GPU (tests/cuda.sh).
 * Two files: this one, the runtime (streams, collectives, GEMMs, the step's own
 * kernels, cuDNN attention), the same for every output and so compiled once per
 * checkout (build/emu/emu.o, `ninja -C <checkout> build/emu/emu.o`); and
 * emu_kernels.cc, the fused kernels (kernels.cuh, trk_lm.cuh) as loops, compiled
 * per output with the shapes its kernels.cu instantiates. emu.h is what the
 * kernels use of the runtime (tests/cuda/emu_build.sh builds both).
 *
 * What it checks: the generated CUDA rank code itself (every call, argument
 * order, buffer, literal shape and template argument), its descriptor, the
 * byte counts (--bytes), and the cross-stream ordering the generator derived
 * from the plan. What it does not check: the CUDA kernels, cuBLAS, NCCL.
 *
 * Each call only enqueues its work on one of two emulated streams, with the
 * step it waits for; trc_forward_end then runs the two queues to completion,
 * taking at each turn the head of one queue whose wait is satisfied, chosen by
 * TESS_EMU_ORDER: comm (collectives as early as the waits allow: a broadcast
 * that overwrites what a pending GEMM still reads shows up), compute (the
 * other extreme) or random (seeded by TESS_EMU_SEED). Work runs to completion
 * one item at a time; a missing wait between the streams changes the result
 * under some order, and a wait cycle is reported as a deadlock. The kernels
 * are plain loops with the CUDA kernels' semantics, except that the row
 * statistics (layernorm's row sums and centred squares) sum in double, as the
 * CPU program does: the kernels sum in float (tests/cuda/rows_check.cu checks
 * them against double on a GPU), and doing so here would move bf16 rounding
 * points away from the CPU program's, which the bf16 comparisons at 1e-3
 * rely on. The vocabulary loss's sums follow the kernels (float, Kahan per
 * lane, the shuffle tree); the column sums and layernorm backward are
 * tests/cuda/lnb_ref.h, the kernels' own float operations in their order
 * (tests/cuda/lnb_check.cu checks on a GPU that the kernels give the same
 * bits). Attention emulates kernels_attention.cu.in step by
 * step: qkv biased in place (and its bf16 copy in a bf16 program), then per
 * sequence the strided-batched GEMMs as cblas_sgemm per head on operands
 * widened to fp32, the C rounded to its type, and the softmax kernels'
 * arithmetic lane by lane (fp32 statistics, the warp's xor tree) over the
 * plan's scores and probabilities: the scratch is written as on the GPU.
 * Training: backward and optimizer run the same way between trc_phase_begin
 * and trc_phase_end; reduce and the exact all-reduce are MPI_Reduce (+
 * MPI_Bcast), counted as tr_comm.c counts them; AdamW (trc_adamw_multi) is tr_adamw's arithmetic, tensor by tensor,
 * each followed by its bf16 copy.
 * CUDA graphs (docs/CUDA.md "CUDA graphs"): a capture of a step's part records, instead of running them, each phase's
 * two queues (with the events their steps record) and the step's own kernels (objective, gradient sums, clipping) as
 * closures with their arguments fixed at capture, as a graph fixes a kernel's; a replay runs them again in the same
 * way. The scalars that change per step (lr, bias corrections, clipping scale) are read, as on the device, from the
 * step scalars tr_backend_step_scalars wrote, at run time: one baked at capture would make a replayed run differ
 * from TESS_CUDA_GRAPH=0; so are the decode step's tokens and positions (TR_PART_DECODE), which the runtime uploads
 * before each replay. The emulated collectives count as NCCL (capturable) unless TESS_COMM=mpi.
 * A language model (trk_lm.cuh): the embedding, position, loss and scatter-add kernels as the loops of
 * tr_kernels_lm.c, in the order the CUDA kernels add in (token order per dE element, row order per dwpe
 * element); the all-reduce(MAX) is MPI_Allreduce(MPI_MAX).
 * bf16 (docs/BF16.md): the kernels that write a GEMM operand (ln_apply, attention, bias_gelu_save) take a
 * float or tr_bf16 output, the latter the float result rounded by tr_f32_to_bf16 (bf16 training's
 * bias_gelu_save also the kept u, and gelu_bwd reads it: emu_kernels.cc);
 * trc_cast_bf16 is tr_f32_to_bf16 per element, trc_gemm_bf16 widens both operands to fp32 (exact) and calls
 * tr_sgemm, the CPU backend's GEMM (runtime/tr_blas.h: cblas_sgemm, cblas_sgemv for one row; a bf16 C: into an fp32 temporary, then tr_f32_to_bf16), trc_bcast_bf16 is MPI_Bcast of MPI_UINT16_T. Collectives count bytes (4 a float, 2 a bf16).
 */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cblas.h>

#include "tr_blas.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <type_traits>
#include <vector>

#include "trc.h"
#include "trc_step.h"

extern "C" {
#include "tr_backend.h"
#include "tr_math.h"
#include "tr_tokens.h"
}
#include "tr_bf16.h"

#include "emu.h"

namespace {

struct work {
    int id, wait;
    std::function<void()> run;
};

struct emu {
    std::vector<work> q[TRC_NSTREAMS];
    std::vector<unsigned char> signal;
    int cur_id = -1, cur_stream = -1, cur_wait = -1, pushed = 0;
    std::mt19937 rng;
    int order = 2; /* 0 comm first, 1 compute first, 2 random */
    int lt_id = -1;      /* the step of the last trc_gemm_lt call or row kernel (trc_fused checks it names that step) */
    int lt_after = 0;    /* compute-stream work issued since that call but trc_fused's (trc_fused checks there is none) */
    long long syncs = 0; /* the host waits the CUDA backend (tr_backend_cuda.cu) makes for the same calls */
    /* CUDA graphs */
    bool graphs = false;  /* allowed (else note says why) */
    char note[320] = "";
    int capturing = -1;   /* the part being captured */
    std::vector<std::function<void()>> rec, part[TR_NPARTS]; /* the capture's record; each part's graph */
    bool have[TR_NPARTS] = {};
    bool graph_inited = false;
    /* a part's collective bytes (tr_ctx's counters, graph_counts), counted at each replay (trc_step.cu's rule) */
    long long n[TR_NPARTS][9][TR_NGROUPS] = {};
    long long launches = 0, captured = 0, replayed = 0, replays = 0, nlaunch[TR_NPARTS] = {};
    float sc[4] = {0, 0, 0, 0}; /* the step scalars: lr, c1, c2, clipping scale (trc_internal.h TRC_SC_*) */
} E;

/* A kernel of the backend's own (the objective, the sums, clipping): run now, or recorded into the capture. */
void issue(std::function<void()> f, int launches)
{
    if (E.capturing >= 0) {
        E.captured += launches;
        E.rec.push_back(std::move(f));
    } else {
        E.launches += launches;
        f();
    }
}

[[noreturn]] void emu_fail(const char *what, int id)
{
    int r = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    fprintf(stderr, "rank %d: cuda emulation: %s (step %d)\n", r, what, id);
    MPI_Abort(MPI_COMM_WORLD, 5);
    abort();
}

cudaStream_t fake_stream(int s)
{
    return reinterpret_cast<cudaStream_t>(static_cast<size_t>(0x1000 + s));
}

void push(int stream, std::function<void()> f)
{
    if (E.cur_id < 0)
        emu_fail("work issued outside trc_begin/trc_end", -1);
    if (stream != E.cur_stream)
        emu_fail("work issued on another stream than trc_begin named", E.cur_id);
    if (E.pushed++)
        emu_fail("more than one call inside one step", E.cur_id);
    if (E.capturing >= 0)
        E.captured++;
    else
        E.launches++;
    E.q[stream].push_back(work{E.cur_id, E.cur_wait, std::move(f)});
    if (stream == TRC_COMPUTE)
        E.lt_after++;
}

void fused_head()
{
    E.lt_id = E.cur_id;
    E.lt_after = 0; /* its own push makes 1 */
}

int stream_of(cudaStream_t s)
{
    for (int k = 0; k < TRC_NSTREAMS; k++)
        if (s == fake_stream(k))
            return k;
    emu_fail("a kernel launched on an unknown stream", E.cur_id);
}

} // namespace

/* ---- tr_backend.h ---------------------------------------------------------------------- */

extern "C" const char *tr_backend_name(void)
{
    return "cuda-emulation";
}

extern "C" bool tr_backend_init(tr_ctx *c, tr_err *err)
{
    (void)err;
    const char *o = getenv("TESS_EMU_ORDER");
    E.order = !o ? 2 : !strcmp(o, "comm") ? 0 : !strcmp(o, "compute") ? 1 : 2;
    const char *sd = getenv("TESS_EMU_SEED");
    E.rng.seed((unsigned)((sd ? atoi(sd) : 1) * 7919 + c->desc->rank));
    E.signal.assign((size_t)c->desc->nsteps, 0);
    return true;
}

/* The run arena is memory of its own, as the device's is: a block the main reads or writes on the host without its
 * download or upload (tr_backend.h) reads stale values here too, as it would on a GPU. */
extern "C" float *tr_backend_arena(tr_ctx *c, float *H, long long elems, tr_err *err)
{
    float *A = static_cast<float *>(malloc((size_t)(elems > 0 ? elems : 1) * sizeof(float)));
    if (!A) {
        tr_fail(err, "rank %d: out of memory for the emulated device arena (%lld floats)", c->desc->rank, elems);
        return NULL;
    }
    memcpy(A, H, (size_t)elems * sizeof(float));
    return A;
}

/* The host waits are counted as tr_backend_cuda.cu makes them, where the run arena is another memory than H:
 * an upload waits once (compute), a download three times (tr_backend_sync's two, then the copy's), a sync twice. */
extern "C" void tr_backend_upload(tr_ctx *c, float *dst, const float *src, long long n)
{
    (void)c;
    E.syncs += 1;
    if (dst != src)
        memcpy(dst, src, (size_t)n * sizeof(float));
}

extern "C" void tr_backend_download(tr_ctx *c, float *dst, const float *src, long long n)
{
    (void)c;
    E.syncs += 3;
    if (dst != src)
        memcpy(dst, src, (size_t)n * sizeof(float));
}

extern "C" void tr_backend_sync(tr_ctx *c)
{
    (void)c;
    E.syncs += 2;
}

/* Pipeline stages: the emulated run arena is host memory, but it stands for device memory, so tr_comm.c stages the
 * point-to-point blocks through its host buffer as it does for the CUDA backend (tr_backend_download and _upload
 * above); the stash is plain memory. Every queue has run when the main calls these (trc_forward_end, trc_phase_end). */
extern "C" bool tr_backend_run_on_host(void)
{
    return false;
}

extern "C" float *tr_backend_run_alloc(tr_ctx *c, long long n)
{
    (void)c;
    return static_cast<float *>(malloc((size_t)(n > 0 ? n : 1) * sizeof(float)));
}

extern "C" void tr_backend_run_release(tr_ctx *c, float *p)
{
    (void)c;
    free(p);
}

extern "C" void tr_backend_run_copy(tr_ctx *c, float *dst, const float *src, long long n)
{
    (void)c;
    memcpy(dst, src, (size_t)n * sizeof(float));
}

extern "C" long long tr_backend_host_syncs(tr_ctx *c)
{
    (void)c;
    return E.syncs;
}

extern "C" void tr_backend_free(tr_ctx *c, float *run, float *H)
{
    (void)c;
    if (run != H)
        free(run);
    free(H);
}

/* ---- a training step (runtime/cuda/trc_step.cu): the same sums in the same order (trc_step.h) --------------- */

namespace {

struct step_emu {
    std::vector<float> target;
    std::vector<trc_grad_seg> segs;
    long long ngrad = 0;
    tr_step_sums sums{};
} S;

/* The sums of trc_step.h's layout over n elements: term(e, &a0, &a1) adds element e to the thread's
 * accumulators; the blocks' partials, then one block over the partials. */
template <class F> void red_sums(long long n, F term, double *out0, double *out1)
{
    const int kT = TRC_RED_THREADS, kB = TRC_RED_BLOCKS;
    const long long ch = trc_red_chunk(n);
    std::vector<double> p0(kB), p1(kB), a0(kT), a1(kT);
    auto pairwise = [&]() {
        for (int s = kT / 2; s > 0; s >>= 1)
            for (int t = 0; t < s; t++) {
                a0[t] = a0[t] + a0[t + s];
                a1[t] = a1[t] + a1[t + s];
            }
    };
    for (int b = 0; b < kB; b++) {
        const long long lo = (long long)b * ch, hi = std::min(n, lo + ch);
        for (int t = 0; t < kT; t++) {
            a0[t] = a1[t] = 0.0;
            for (long long e = lo + t; e < hi; e += kT)
                term(e, &a0[t], &a1[t]);
        }
        pairwise();
        p0[b] = a0[0];
        p1[b] = a1[0];
    }
    for (int t = 0; t < kT; t++) {
        a0[t] = a1[t] = 0.0;
        for (int b = t; b < kB; b += kT) {
            a0[t] = a0[t] + p0[b];
            a1[t] = a1[t] + p1[b];
        }
    }
    pairwise();
    *out0 = a0[0];
    if (out1)
        *out1 = a1[0];
}

} // namespace

extern "C" bool tr_backend_train_init(tr_ctx *c, float *A, const float *target, long long batch_elems, tr_err *err)
{
    (void)A, (void)batch_elems;
    const tr_rank_desc *d = c->desc;
    long long xn = (long long)d->io_rows * d->io_cols;
    S.target.assign(target ? target : nullptr, target ? target + xn : nullptr);
    S.segs.resize((size_t)d->nparams + 1);
    S.ngrad = trc_grad_segs(d, S.segs.data());
    S.sums = tr_step_sums{};
    E.syncs += 1; /* trc_step.cu waits for its set-up copies */
    return tr_backend_graph_init(c, err);
}

/* trc_step.cu's graph_init, the emulated collectives counting as NCCL unless TESS_COMM=mpi */
extern "C" bool tr_backend_graph_init(tr_ctx *c, tr_err *err)
{
    (void)c;
    if (E.graph_inited)
        return true;
    E.graph_inited = true;
    const char *v = getenv("TESS_CUDA_GRAPH"), *m = getenv("TESS_COMM");
    if (v && *v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
        return tr_fail(err, "TESS_CUDA_GRAPH=%s is not 0 or 1: use TESS_CUDA_GRAPH=0 to issue every training step "
                            "launch by launch, or 1 (the default) to replay it from CUDA graphs where the collectives "
                            "allow (docs/CUDA.md \"CUDA graphs\")",
                       v);
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    E.graphs = false;
    if (v && !strcmp(v, "0"))
        snprintf(E.note, sizeof E.note, "CUDA graphs: off (TESS_CUDA_GRAPH=0): every step issued launch by launch");
    else if (&tr_pipe_class && tr_pipe_class.stages > 1)
        snprintf(E.note, sizeof E.note,
                 "CUDA graphs: off: pipeline stages exchange their blocks through the host between micro-batches, "
                 "waits no graph can hold; every step issued launch by launch");
    else if (m && !strcmp(m, "mpi") && world > 1)
        snprintf(E.note, sizeof E.note,
                 "CUDA graphs: off: the collectives are MPI with host staging (TESS_COMM=mpi, or ranks sharing a "
                 "GPU), whose host waits no graph can hold; every step issued launch by launch");
    else
        E.graphs = true;
    return true;
}

static void objective_run(tr_ctx *c, float *A, int mb);
static void grad_sums_run(tr_ctx *c, float *A);
static void scale_run(tr_ctx *c, float *A);

extern "C" void tr_backend_objective(tr_ctx *c, float *A)
{
    const int mb = c->mb; /* the micro-batch of this call (trc_step.cu bakes its rows into the launch) */
    issue([=] { objective_run(c, A, mb); }, 2);
}

extern "C" void tr_backend_grad_sums(tr_ctx *c, float *A)
{
    issue([=] { grad_sums_run(c, A); }, 2);
}

extern "C" void tr_backend_scale_grads(tr_ctx *c, float *A, float s)
{
    (void)s; /* trc_step.cu's k_scale reads the step scalars' scale on the device */
    issue([=] { scale_run(c, A); }, 1);
}

static void objective_run(tr_ctx *c, float *A, int mb)
{
    const tr_rank_desc *d = c->desc;
    tr_ctx at = *c; /* trc_step.cu's rows of micro-batch mb (tr_objective_rows) */
    at.mb = mb;
    long long r0, nr;
    tr_objective_rows(&at, &r0, &nr);
    const long long e0 = r0 * d->io_cols, n = nr * d->io_cols;
    float *dy = A + d->gx_offset + e0;
    double sum = 0.0;
    if (tr_lm_vocab()) {
        const float *loss = A + tr_lm()->loss_offset + r0;
        const bool counted = tr_lm_counts_loss(d);
        const long long rows = nr;
        red_sums(
            n,
            [&](long long e, double *a, double *) {
                if (counted && e < rows)
                    *a = *a + (double)loss[e];
                dy[e] = 0.0f;
            },
            &sum, nullptr);
    } else {
        const float *y = A + d->y_offset + e0, *t = S.target.data() + e0;
        const double total_n = (double)tr_model.batch * tr_model.seq * tr_model.hidden;
        red_sums(
            n,
            [&](long long e, double *a, double *) {
                const double diff = (double)y[e] - (double)t[e];
                *a = *a + diff * diff;
                dy[e] = (float)(2.0 * diff / total_n);
            },
            &sum, nullptr);
    }
    S.sums.loss = mb > 0 ? S.sums.loss + sum : sum; /* trc_step.cu's k_final with add */
}

static void grad_sums_run(tr_ctx *c, float *A)
{
    const int nsegs = c->desc->nparams;
    const trc_grad_seg *segs = S.segs.data();
    red_sums(
        S.ngrad,
        [&](long long e, double *a0, double *a1) {
            const trc_grad_seg *s = &segs[trc_seg_find(segs, nsegs, e)];
            const long long i = e - s->start;
            const double g = (double)A[s->grad_offset + i], sq = g * g;
            if (trc_seg_counted(s, (int)(i / s->cols), (int)(i % s->cols)))
                *a0 = *a0 + sq;
            else
                *a1 = *a1 + sq;
        },
        &S.sums.canon, &S.sums.rest);
}

extern "C" void tr_backend_step_read(tr_ctx *c, tr_step_sums *s)
{
    (void)c;
    E.syncs += 1; /* trc_step.cu: one copy into pinned memory, one wait */
    *s = S.sums;
    S.sums = tr_step_sums{};
}

static void scale_run(tr_ctx *c, float *A)
{
    const tr_rank_desc *d = c->desc;
    const float s = E.sc[3];
    if (s == 1.0f)
        return;
    for (int i = 0; i < d->nparams; i++) {
        float *g = A + d->params[i].grad_offset;
        for (long long e = 0; e < (long long)d->params[i].rows * d->params[i].cols; e++)
            g[e] = g[e] * s;
    }
}

extern "C" void tr_backend_step_scalars(tr_ctx *c, float s)
{
    const tr_model_desc *md = &tr_model; /* trc_step.cu's arithmetic; its copy lands before the work after it */
    E.sc[0] = (float)c->lr;
    E.sc[1] = (float)(1.0 - pow(md->beta1, c->opt_step));
    E.sc[2] = (float)(1.0 - pow(md->beta2, c->opt_step));
    E.sc[3] = s;
}

/* trc_step.cu's graph_counts: the byte counters a replay adds to */
static long long *graph_counts(tr_ctx *c, int i)
{
    long long *n[9] = {c->bcast_recv, c->bcast_sent, c->allreduce, c->reduce_recv, c->reduce_sent,
                       c->rscatter,   c->allgather,  c->rs_recv,   c->ag_recv};
    return n[i];
}

static void emu_replay(tr_ctx *c, int part)
{
    for (int k = 0; k < TR_NGROUPS; k++) {
        for (int i = 0; i < 9; i++)
            graph_counts(c, i)[k] += E.n[part][i][k];
        c->rscatter_run += E.n[part][5][k];
        c->allgather_run += E.n[part][6][k];
    }
    for (auto &f : E.part[part])
        f();
    E.replays++;
    E.replayed += E.nlaunch[part];
}

extern "C" bool tr_backend_part_begin(tr_ctx *c, int part, bool capture)
{
    if (!E.graph_inited || !E.graphs || !capture)
        return false;
    if (E.have[part]) {
        emu_replay(c, part);
        return true;
    }
    for (int k = 0; k < TR_NGROUPS; k++)
        for (int i = 0; i < 9; i++)
            E.n[part][i][k] = graph_counts(c, i)[k];
    E.capturing = part;
    E.captured = 0;
    E.rec.clear();
    return false;
}

extern "C" bool tr_backend_part_end(tr_ctx *c, int part)
{
    if (E.capturing < 0)
        return true;
    if (E.capturing != part)
        emu_fail("tr_backend_part_end of another part than the capture's", -1);
    E.capturing = -1;
    E.part[part] = std::move(E.rec);
    E.rec.clear();
    E.nlaunch[part] = E.captured;
    E.have[part] = true;
    for (int k = 0; k < TR_NGROUPS; k++) {
        for (int i = 0; i < 9; i++) {
            E.n[part][i][k] = graph_counts(c, i)[k] - E.n[part][i][k];
            graph_counts(c, i)[k] -= E.n[part][i][k];
        }
        c->rscatter_run -= E.n[part][5][k];
        c->allgather_run -= E.n[part][6][k];
    }
    emu_replay(c, part);
    return true;
}

extern "C" const char *tr_backend_graph_note(tr_ctx *c)
{
    (void)c;
    return E.graphs || !E.note[0] ? nullptr : E.note;
}

extern "C" bool tr_backend_launch_counts(tr_ctx *c, tr_launch_counts *n)
{
    (void)c;
    n->issued = E.launches;
    n->replayed = E.replayed;
    n->replays = E.replays;
    return true;
}

extern "C" void tr_backend_upload_batch(tr_ctx *c, float *dst, const float *src, long long n)
{
    (void)c;
    if (dst != src) /* trc_step.cu: through pinned staging, no wait */
        memcpy(dst, src, (size_t)n * sizeof(float));
}

/* ---- trc.h ------------------------------------------------------------------------------ */

cudaStream_t trc_stream(tr_ctx *c, int stream)
{
    (void)c;
    return fake_stream(stream);
}

void trc_forward_begin(tr_ctx *c, const trc_step_cost *cost)
{
    (void)c, (void)cost;
    std::fill(E.signal.begin(), E.signal.end(), 0);
}

/* the training phases: the same brackets (the queues run at the end) */
void trc_phase_begin(tr_ctx *c, const trc_step_cost *cost)
{
    trc_forward_begin(c, cost);
}

void trc_phase_end(tr_ctx *c)
{
    trc_forward_end(c);
}

void trc_begin(tr_ctx *c, int id, int stream, int wait)
{
    tr_step_mark(c, id);
    if (id < 0 || id >= c->desc->nsteps || stream < 0 || stream >= TRC_NSTREAMS || wait >= id)
        emu_fail("trc_begin with an impossible step, stream or wait", id);
    E.cur_id = id;
    E.cur_stream = stream;
    E.cur_wait = wait;
    E.pushed = 0;
}

void trc_end(tr_ctx *c, int id, int stream, int signal)
{
    if (id != E.cur_id || stream != E.cur_stream || E.pushed != 1)
        emu_fail("trc_end does not close the step trc_begin opened with one call", id);
    c->calls[c->desc->steps[id].kind]++;
    E.signal[(size_t)id] = (unsigned char)(signal != 0);
    E.cur_id = -1;
}

/* Run the two queues of a phase to completion in E.order, each step after the step it waits for. */
static void run_queues(std::vector<work> *q, const std::vector<unsigned char> &signal)
{
    std::vector<unsigned char> done(signal.size(), 0);
    size_t head[TRC_NSTREAMS] = {0, 0};
    for (;;) {
        int ready[TRC_NSTREAMS], n = 0;
        for (int s = 0; s < TRC_NSTREAMS; s++) {
            if (head[s] == q[s].size())
                continue;
            const work &w = q[s][head[s]];
            if (w.wait >= 0 && !signal[(size_t)w.wait])
                emu_fail("a step waits for a step whose event is never recorded (trc_end signal 0)", w.id);
            if (w.wait < 0 || done[(size_t)w.wait])
                ready[n++] = s;
        }
        if (n == 0) {
            if (head[0] == q[0].size() && head[1] == q[1].size())
                break;
            emu_fail("deadlock: each stream waits for the other", -1);
        }
        int s = ready[0];
        if (n == 2)
            s = E.order == 0 ? TRC_COMM : E.order == 1 ? TRC_COMPUTE : (int)(E.rng() % 2);
        work &w = q[s][head[s]++];
        w.run();
        done[(size_t)w.id] = 1;
    }
}

void trc_forward_end(tr_ctx *c)
{
    (void)c;
    if (E.capturing >= 0) { /* the phase's queues and events into the graph */
        auto q = std::make_shared<std::vector<work>[]>(TRC_NSTREAMS);
        for (int s = 0; s < TRC_NSTREAMS; s++)
            q[s] = std::move(E.q[s]);
        std::vector<unsigned char> signal = E.signal;
        E.rec.push_back([q, signal] { run_queues(q.get(), signal); });
    } else {
        run_queues(E.q, E.signal);
    }
    for (int s = 0; s < TRC_NSTREAMS; s++)
        E.q[s].clear();
}

/* One broadcast of count elements of `type` (esize bytes each) on the comm stream, counted in bytes. */
static void bcast_typed(tr_ctx *c, tr_group g, int root, void *buf, int count, MPI_Datatype type, int esize)
{
    MPI_Comm comm = c->comm[g];
    push(TRC_COMM, [=] {
        if (MPI_Bcast(buf, count, type, root, comm) != MPI_SUCCESS)
            emu_fail("MPI_Bcast failed", -1);
    });
    if (c->desc->key[g] == root)
        c->bcast_sent[g] += (long long)esize * count;
    else
        c->bcast_recv[g] += (long long)esize * count;
}

void trc_bcast(tr_ctx *c, tr_group g, int root, float *buf, int count)
{
    bcast_typed(c, g, root, buf, count, MPI_FLOAT, 4);
}

void trc_bcast_bf16(tr_ctx *c, tr_group g, int root, tr_bf16 *buf, int count)
{
    bcast_typed(c, g, root, buf, count, MPI_UINT16_T, 2); /* the bits: MPI has no bfloat16 */
}

void trc_allreduce(tr_ctx *c, tr_group g, float *buf, int count)
{
    MPI_Comm comm = c->comm[g];
    push(TRC_COMM, [=] {
        if (MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, comm) != MPI_SUCCESS)
            emu_fail("MPI_Allreduce failed", -1);
    });
    c->allreduce[g] += 4LL * count;
}

void trc_allreduce_max(tr_ctx *c, tr_group g, float *buf, int count)
{
    MPI_Comm comm = c->comm[g];
    push(TRC_COMM, [=] {
        if (MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_MAX, comm) != MPI_SUCCESS)
            emu_fail("MPI_Allreduce(MPI_MAX) failed", -1);
    });
    c->allreduce[g] += 4LL * count;
}

void trc_reduce(tr_ctx *c, tr_group g, int root, float *buf, int count)
{
    MPI_Comm comm = c->comm[g];
    bool me = c->desc->key[g] == root;
    push(TRC_COMM, [=] {
        if (MPI_Reduce(me ? MPI_IN_PLACE : buf, me ? buf : nullptr, count, MPI_FLOAT, MPI_SUM, root, comm) !=
            MPI_SUCCESS)
            emu_fail("MPI_Reduce failed", -1);
    });
    if (me)
        c->reduce_recv[g] += 4LL * count * (c->desc->size[g] - 1);
    else
        c->reduce_sent[g] += 4LL * count;
}

void trc_allreduce_exact(tr_ctx *c, tr_group g, float *buf, int count)
{
    MPI_Comm comm = c->comm[g];
    bool me = c->desc->key[g] == 0;
    push(TRC_COMM, [=] {
        if (MPI_Reduce(me ? MPI_IN_PLACE : buf, me ? buf : nullptr, count, MPI_FLOAT, MPI_SUM, 0, comm) !=
                MPI_SUCCESS ||
            MPI_Bcast(buf, count, MPI_FLOAT, 0, comm) != MPI_SUCCESS)
            emu_fail("MPI_Reduce + MPI_Bcast failed", -1);
    });
    c->allreduce[g] += 4LL * count;
}

/* optimizer.shard (trc.h): slice k of count elements cut into n slices of ceil(count/n), its first element and
 * length (0 past the end) */
static void emu_slice(long long count, int n, int k, long long *lo, long long *len)
{
    long long cs = (count + n - 1) / n, a = (long long)k * cs, b = a + cs < count ? a + cs : count;
    *lo = a < count ? a : count;
    *len = b > a ? b - a : 0;
}

/* tr_comm.c's reduce-scatter (Alltoallv, then the parts of my slice added in member order): the CPU program's bits,
 * which trc_comm.cu's staged path gives too (NCCL's order is its own; with two members the same one addition) */
void trc_reduce_scatter(tr_ctx *c, tr_group g, float *buf, long long count)
{
    MPI_Comm comm = c->comm[g];
    int n = c->desc->size[g], me = c->desc->key[g];
    push(TRC_COMM, [=] {
        if (n < 2)
            return;
        long long lo, len;
        emu_slice(count, n, me, &lo, &len);
        std::vector<int> tab(4 * (size_t)n);
        for (int k = 0; k < n; k++) {
            long long a, l;
            emu_slice(count, n, k, &a, &l);
            tab[k] = (int)l;
            tab[n + k] = (int)a;
            tab[2 * n + k] = (int)len;
            tab[3 * n + k] = (int)((long long)k * len);
        }
        std::vector<float> parts((size_t)n * (size_t)len + 1);
        if (MPI_Alltoallv(buf, tab.data(), tab.data() + n, MPI_FLOAT, parts.data(), tab.data() + 2 * n,
                          tab.data() + 3 * n, MPI_FLOAT, comm) != MPI_SUCCESS)
            emu_fail("MPI_Alltoallv failed", -1);
        for (long long e = 0; e < len; e++) {
            float sum = parts[(size_t)e];
            for (int k = 1; k < n; k++)
                sum += parts[(size_t)k * (size_t)len + (size_t)e];
            buf[lo + e] = sum;
        }
    });
    c->rscatter[g] += 4LL * count;
    c->rscatter_run += 4LL * count;
    long long mlo, mlen; /* the others' parts of this member's slice, as tr_comm.c counts them */
    emu_slice(count, c->desc->size[g], c->desc->key[g], &mlo, &mlen);
    c->rs_recv[g] += 4LL * (c->desc->size[g] - 1) * mlen;
}

/* every member's slice k becomes member k's bits (MPI_Allgatherv in place) */
static void emu_allgather(tr_ctx *c, tr_group g, void *buf, long long count, MPI_Datatype type, long long esize)
{
    MPI_Comm comm = c->comm[g];
    int n = c->desc->size[g];
    push(TRC_COMM, [=] {
        if (n < 2)
            return;
        std::vector<int> tab(2 * (size_t)n);
        for (int k = 0; k < n; k++) {
            long long a, l;
            emu_slice(count, n, k, &a, &l);
            tab[k] = (int)l;
            tab[n + k] = (int)a;
        }
        if (MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, tab.data(), tab.data() + n, type, comm) !=
            MPI_SUCCESS)
            emu_fail("MPI_Allgatherv failed", -1);
    });
    c->allgather[g] += esize * count;
    c->allgather_run += esize * count;
    long long mlo, mlen; /* the others' slices, as tr_comm.c counts them */
    emu_slice(count, n, c->desc->key[g], &mlo, &mlen);
    c->ag_recv[g] += esize * (count - mlen);
}

void trc_allgather(tr_ctx *c, tr_group g, float *buf, long long count)
{
    emu_allgather(c, g, buf, count, MPI_FLOAT, 4);
}

void trc_allgather_bf16(tr_ctx *c, tr_group g, tr_bf16 *buf, long long count)
{
    emu_allgather(c, g, buf, count, MPI_UINT16_T, 2);
}

void trc_gemm_ex(tr_ctx *c, int transa, int transb, int m, int n, int k, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc)
{
    (void)c;
    push(TRC_COMPUTE, [=] {
        tr_sgemm(transa, transb, m, n, k,
                    1.0f, A, lda, B, ldb, beta, C, ldc);
    });
}

/* both operands widened to fp32 (exact), then cblas_sgemm: the CPU backend's bf16 GEMM */
void trc_gemm_bf16(tr_ctx *c, int transa, int transb, int m, int n, int k, const tr_bf16 *A, int lda,
                   const tr_bf16 *B, int ldb, float beta, float *C, int ldc)
{
    (void)c;
    push(TRC_COMPUTE, [=] {
        /* the stored extent: every row but the last at its stride, the last only as wide as it is */
        const size_t na = m > 0 && k > 0 ? (size_t)((transa ? k : m) - 1) * lda + (size_t)(transa ? m : k) : 0;
        const size_t nb = n > 0 && k > 0 ? (size_t)((transb ? n : k) - 1) * ldb + (size_t)(transb ? k : n) : 0;
        std::vector<float> a(na), b(nb);
        for (size_t i = 0; i < na; i++)
            a[i] = tr_bf16_to_f32(A[i]);
        for (size_t i = 0; i < nb; i++)
            b[i] = tr_bf16_to_f32(B[i]);
        tr_sgemm(transa, transb, m, n, k,
                    1.0f, a.data(), lda, b.data(), ldb, beta, C, ldc);
    });
}

/* a bf16 C (beta 0 only, as the runtime): the product as above into an fp32 temporary, then each element rounded to
 * nearest even (tr_f32_to_bf16): what trc_gemm_bf16 into an fp32 C followed by trc_cast_bf16 gives, bit for bit */
void trc_gemm_bf16(tr_ctx *c, int transa, int transb, int m, int n, int k, const tr_bf16 *A, int lda,
                   const tr_bf16 *B, int ldb, float beta, tr_bf16 *C, int ldc)
{
    (void)c;
    if (beta != 0.0f)
        emu_fail("trc_gemm_bf16: a bf16 C with beta != 0 (gen/fuse.c writes a bf16 C only with beta 0)", E.cur_id);
    push(TRC_COMPUTE, [=] {
        const size_t na = m > 0 && k > 0 ? (size_t)((transa ? k : m) - 1) * lda + (size_t)(transa ? m : k) : 0;
        const size_t nb = n > 0 && k > 0 ? (size_t)((transb ? n : k) - 1) * ldb + (size_t)(transb ? k : n) : 0;
        std::vector<float> a(na), b(nb), t((size_t)m * n);
        for (size_t i = 0; i < na; i++)
            a[i] = tr_bf16_to_f32(A[i]);
        for (size_t i = 0; i < nb; i++)
            b[i] = tr_bf16_to_f32(B[i]);
        tr_sgemm(transa, transb, m, n, k,
                    1.0f, a.data(), lda, b.data(), ldb, 0.0f, t.data(), n);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                C[(size_t)i * ldc + j] = tr_f32_to_bf16(t[(size_t)i * n + j]);
    });
}

void trc_cast_bf16(tr_ctx *c, const float *x, long long n, tr_bf16 *y)
{
    (void)c;
    push(TRC_COMPUTE, [=] {
        for (long long i = 0; i < n; i++)
            y[i] = tr_f32_to_bf16(x[i]);
    });
}

/* runtime/cuda/trc_gemm.cu's k_grad_acc: g = part, or g += part (micro-batches) */
/* generation's (max logit, id) pairs, counted as tr_allreduce_maxloc counts. As trc_comm.cu does it: under NCCL (the
 * emulation's default) every member's pairs gathered (MPI_Allgather), then each pair the largest value, the lowest id
 * of equal ones, k_maxloc_pick's comparisons in member order; under TESS_COMM=mpi MPI_MAXLOC of MPI_FLOAT_INT */
void trc_allreduce_maxloc(tr_ctx *c, tr_group g, float *buf, int count)
{
    MPI_Comm comm = c->comm[g];
    const int n = c->desc->size[g];
    const char *m = getenv("TESS_COMM");
    const bool staged = m && !strcmp(m, "mpi");
    push(TRC_COMM, [=] {
        if (n < 2)
            return;
        if (staged) {
            if (MPI_Allreduce(MPI_IN_PLACE, buf, count / 2, MPI_FLOAT_INT, MPI_MAXLOC, comm) != MPI_SUCCESS)
                emu_fail("MPI_Allreduce(MPI_MAXLOC) failed", -1);
            return;
        }
        std::vector<float> all((size_t)n * (size_t)count);
        if (MPI_Allgather(buf, count, MPI_FLOAT, all.data(), count, MPI_FLOAT, comm) != MPI_SUCCESS)
            emu_fail("MPI_Allgather (max-loc) failed", -1);
        for (int e = 0; e < count / 2; e++) {
            float best = all[2 * (size_t)e];
            int32_t id;
            memcpy(&id, &all[2 * (size_t)e + 1], 4);
            for (int k = 1; k < n; k++) {
                const float v = all[(size_t)k * count + 2 * (size_t)e];
                int32_t i;
                memcpy(&i, &all[(size_t)k * count + 2 * (size_t)e + 1], 4);
                if (v > best || (v == best && i < id)) {
                    best = v;
                    id = i;
                }
            }
            buf[2 * (size_t)e] = best;
            memcpy(&buf[2 * (size_t)e + 1], &id, 4);
        }
    });
    c->allreduce[g] += 4LL * count;
}

void trc_copy(tr_ctx *c, const float *src, float *dst, long long count)
{
    (void)c;
    push(TRC_COMPUTE, [=] { memcpy(dst, src, (size_t)count * sizeof(float)); });
}

void trc_copy_bf16(tr_ctx *c, const tr_bf16 *src, tr_bf16 *dst, long long count)
{
    (void)c;
    push(TRC_COMPUTE, [=] { memcpy(dst, src, (size_t)count * sizeof(tr_bf16)); });
}

void trc_grad_acc(tr_ctx *c, float *g, const float *part, long long n, int add)
{
    (void)c;
    push(TRC_COMPUTE, [=] {
        for (long long i = 0; i < n; i++)
            g[i] = add ? g[i] + part[i] : part[i];
    });
}

/* tr_adamw's arithmetic (runtime/trc_adamw.cu computes the same, operation by operation), at the step's lr (c->lr),
 * on every tensor of the table, each followed by its bf16 copy (tr_f32_to_bf16, trc_cast_bf16's rounding); the lr
 * and bias corrections from the step scalars (tr_backend_step_scalars), read as the kernel runs */
void trc_adamw_multi(tr_ctx *c, float *A, const tr_adamw_tensor *t, int n)
{
    const tr_model_desc *md = &tr_model;
    float b1 = (float)md->beta1, b2 = (float)md->beta2, eps = (float)md->adam_eps;
    float wdecay = (float)md->weight_decay;
    const int member = c->desc->key[TR_DEP]; /* optimizer.shard: a row with slice_of > 0 updates this slice */
    push(TRC_COMPUTE, [=] {
        const float lr = E.sc[0], c1 = E.sc[1], c2 = E.sc[2]; /* the step scalars, read as the kernel runs */
        for (int i = 0; i < n; i++) {
            long long off = 0, cnt = t[i].count;
            if (t[i].slice_of > 0) { /* trc_adamw.cu's build_plan: the row moved to the member's slice */
                off = (long long)member * t[i].count;
                cnt = off >= t[i].slice_of ? 0 : (t[i].slice_of - off < cnt ? t[i].slice_of - off : cnt);
            }
            float *param = A + t[i].param + off, *m = A + t[i].m, *v = A + t[i].v;
            const float *grad = A + t[i].grad + off;
            tr_bf16 *w = t[i].w16 >= 0 ? (tr_bf16 *)(A + t[i].w16) + off : nullptr;
            float wd = t[i].decay ? wdecay : 0.0f;
            for (long long e = 0; e < cnt; e++) {
                float g = grad[e];
                m[e] = b1 * m[e] + (1.0f - b1) * g;
                v[e] = b2 * v[e] + (1.0f - b2) * g * g;
                float mhat = m[e] / c1, vhat = v[e] / c2;
                param[e] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * param[e]);
                if (w)
                    w[e] = tr_f32_to_bf16(param[e]);
            }
        }
    });
}

void trc_gemm(tr_ctx *c, int m, int n, int k, const float *A, int lda, const float *B, int ldb, float beta, float *C,
              int ldc)
{
    (void)c;
    push(TRC_COMPUTE, [=] {
        tr_sgemm(0, 0, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
    });
}

/* the step the trc_gemm_lt (or row kernel, emu::fused_head) before it carries: nothing to run, but it must be that
 * call's, and nothing but other such steps of it may have run on the compute stream between them (steps of the comm
 * stream may: gen/fuse.h) */
void trc_fused(tr_ctx *c, int id, int by)
{
    (void)c;
    if (id != E.cur_id || by != E.lt_id || by >= id || E.lt_after != 1)
        emu_fail("trc_fused names a step that is not the trc_gemm_lt or row kernel last issued on its stream", id);
    push(E.cur_stream, [] {});
    if (E.cur_stream == TRC_COMPUTE) /* a row kernel's second layernorm step may follow this one */
        E.lt_after--;
}

void trc_launch_check(const char *kernel, const char *file, int line)
{
    (void)kernel, (void)file, (void)line;
}

void trc_check_aligned(const void *p, const char *what, const char *file, int line)
{
    if (reinterpret_cast<size_t>(p) & 15u) {
        fprintf(stderr, "%s:%d: %s is not 16-byte aligned\n", file, line, what);
        emu_fail("misaligned operand", E.cur_id);
    }
}

/* trc_gemm_lt: the call must be row `slot` of the class program's trc_lt_shapes (what the runtime checks too, and
 * the emulation's way of checking the table the generator prints); then the GEMM into an fp32 temporary (beta*C +
 * A@B, operands widened as trc_gemm_bf16 does) and the epilogue per element: v = t + bias[col] (the bias in D's
 * type, widened); aux = v (stored in aux's type); D = GeLU(v) with tr_gelu, the bias + GeLU kernels' formula, or v for
 * TRC_EPI_BIAS. */
static float emu_f32(float x) { return x; }
static float emu_f32(tr_bf16 x) { return tr_bf16_to_f32(x); }
static void emu_put(float *p, float v) { *p = v; }
static void emu_put(tr_bf16 *p, float v) { *p = tr_f32_to_bf16(v); }

/* a stored [rows, cols] matrix at leading dimension ld, widened to float: every row but the last at its stride, the
 * last only as wide as it is */
template <typename T>
static std::vector<float> emu_widen(const T *p, int rows, int cols, int ld)
{
    std::vector<float> w(rows > 0 && cols > 0 ? (size_t)(rows - 1) * ld + (size_t)cols : 0);
    for (size_t i = 0; i < w.size(); i++)
        w[i] = emu_f32(p[i]);
    return w;
}

template <typename AB, typename CD>
static void emu_gemm_lt(int slot, int epi, int m, int n, int k, const AB *A, int lda, const AB *B, int ldb, float beta,
                        CD *C, int ldc, const CD *bias, CD *D, CD *aux)
{
    const int bf = std::is_same<AB, tr_bf16>::value, obf = std::is_same<CD, tr_bf16>::value;
    const trc_lt_shape *r = &trc_lt_nshapes && slot >= 0 && slot < trc_lt_nshapes ? &trc_lt_shapes[slot] : nullptr;
    if (!r || r->epi != epi || r->m != m || r->n != n || r->k != k || r->lda != lda || r->ldb != ldb ||
        r->ldc != ldc || r->beta != beta || r->bf16 != bf || r->out_bf16 != obf || r->transa || r->transb ||
        (epi != TRC_EPI_BIAS && epi != TRC_EPI_GELU_BIAS && epi != TRC_EPI_GELU_AUX_BIAS) ||
        (epi == TRC_EPI_GELU_AUX_BIAS) != (aux != nullptr) || (aux && aux == C && beta != 0.0f))
        emu_fail("trc_gemm_lt: the call is not its row of trc_lt_shapes (or its aux is C with beta != 0)", E.cur_id);
    /* cuBLASLt reads the bias in D's type (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE; the bias parameter's type
     * here); a bf16 D is a bf16 program's GeLU output, whose GEMM never accumulates (gen/fuse.c) */
    if (obf && beta != 0.0f)
        emu_fail("trc_gemm_lt: a bf16 D with beta != 0 (gen/fuse.c fuses a bf16 program's GEMM only with beta 0)",
                 E.cur_id);
    E.lt_id = E.cur_id;
    E.lt_after = 0; /* its own push makes 1 */
    push(TRC_COMPUTE, [=] {
        std::vector<float> a = emu_widen(A, m, k, lda), b = emu_widen(B, k, n, ldb), t((size_t)m * n);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                t[(size_t)i * n + j] = beta != 0.0f ? beta * emu_f32(C[(size_t)i * ldc + j]) : 0.0f;
        tr_sgemm(0, 0, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 1.0f,
                    t.data(), n);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                float v = t[(size_t)i * n + j] + emu_f32(bias[j]);
                if (aux)
                    emu_put(&aux[(size_t)i * n + j], v);
                emu_put(&D[(size_t)i * ldc + j], epi == TRC_EPI_BIAS ? v : tr_gelu(v));
            }
    });
}

void trc_gemm_lt(tr_ctx *c, int slot, int epi, int m, int n, int k, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc, const float *bias, float *D, float *aux)
{
    (void)c;
    emu_gemm_lt(slot, epi, m, n, k, A, lda, B, ldb, beta, C, ldc, bias, D, aux);
}

void trc_gemm_lt(tr_ctx *c, int slot, int epi, int m, int n, int k, const tr_bf16 *A, int lda, const tr_bf16 *B,
                 int ldb, float beta, float *C, int ldc, const float *bias, float *D, float *aux)
{
    (void)c;
    emu_gemm_lt(slot, epi, m, n, k, A, lda, B, ldb, beta, C, ldc, bias, D, aux);
}

void trc_gemm_lt(tr_ctx *c, int slot, int epi, int m, int n, int k, const tr_bf16 *A, int lda, const tr_bf16 *B,
                 int ldb, float beta, tr_bf16 *C, int ldc, const tr_bf16 *bias, tr_bf16 *D, tr_bf16 *aux)
{
    (void)c;
    emu_gemm_lt(slot, epi, m, n, k, A, lda, B, ldb, beta, C, ldc, bias, D, aux);
}

/* trc_gemm_lt_bwd: the call must be row `slot` of trc_lt_shapes, transposes included; then C = beta*C + op(A) op(B)
 * (cblas_sgemm, as trc_gemm_ex) and the epilogue: TRC_EPI_DGELU C *= tr_gelu_grad(aux) per element (the gelu_bwd
 * kernel's arithmetic, so the same bits as the two steps); TRC_EPI_BGRADA bgrad[j] = the float sum of column j of B,
 * rows in ascending order (the order of the GEMM's k loop: cuBLASLt's own order is fixed per algorithm but not
 * documented, so the emulation uses an order other than the column-sum kernel's, and the float64 comparisons show
 * the result within their tolerance whatever the order). */
void trc_gemm_lt_bwd(tr_ctx *c, int slot, int epi, int transa, int transb, int m, int n, int k, const float *A,
                     int lda, const float *B, int ldb, float beta, float *C, int ldc, const float *aux, float *bgrad)
{
    (void)c;
    const trc_lt_shape *r = &trc_lt_nshapes && slot >= 0 && slot < trc_lt_nshapes ? &trc_lt_shapes[slot] : nullptr;
    const bool dgelu = epi == TRC_EPI_DGELU;
    if (!r || r->epi != epi || r->m != m || r->n != n || r->k != k || r->lda != lda || r->ldb != ldb ||
        r->ldc != ldc || r->beta != beta || r->bf16 || r->out_bf16 || r->transa != transa || r->transb != transb ||
        (!dgelu && epi != TRC_EPI_BGRADA) || dgelu != (aux != nullptr) || dgelu == (bgrad != nullptr) ||
        (dgelu && (transa || !transb || n % 8 != 0 || (const float *)C == aux)) ||
        (!dgelu && (!transa || transb || ldb != n)))
        emu_fail("trc_gemm_lt_bwd: the call is not its row of trc_lt_shapes (or not the epilogue's layout)", E.cur_id);
    trc_check_aligned(A, "trc_gemm_lt_bwd A", __FILE__, __LINE__);
    trc_check_aligned(B, "trc_gemm_lt_bwd B", __FILE__, __LINE__);
    trc_check_aligned(C, "trc_gemm_lt_bwd C", __FILE__, __LINE__);
    trc_check_aligned(dgelu ? aux : bgrad, dgelu ? "trc_gemm_lt_bwd aux" : "trc_gemm_lt_bwd bias gradient", __FILE__,
                      __LINE__);
    E.lt_id = E.cur_id;
    E.lt_after = 0; /* its own push makes 1 */
    push(TRC_COMPUTE, [=] {
        tr_sgemm(transa, transb, m, n, k,
                    1.0f, A, lda, B, ldb, beta, C, ldc);
        if (dgelu) {
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++)
                    C[(size_t)i * ldc + j] *= tr_gelu_grad(aux[(size_t)i * n + j]);
        } else {
            for (int j = 0; j < n; j++) {
                float acc = 0.0f;
                for (int t = 0; t < k; t++)
                    acc += B[(size_t)t * ldb + j];
                bgrad[j] = acc;
            }
        }
    });
}

/* bf16 training's fc2 input gradient with GeLU's backward (gen/fuse.c): the row must say bf16 operands and a bf16 D;
 * the GEMM of the widened operands (dY @ W2^T, as trc_gemm_bf16's cblas_sgemm) into an fp32 temporary, then per element
 * du = bf16(t * tr_gelu_grad(u)), the gelu_bwd kernel's arithmetic and rounding */
void trc_gemm_lt_bwd(tr_ctx *c, int slot, int epi, int transa, int transb, int m, int n, int k, const tr_bf16 *A,
                     int lda, const tr_bf16 *B, int ldb, float beta, tr_bf16 *C, int ldc, const tr_bf16 *aux,
                     float *bgrad)
{
    (void)c;
    const trc_lt_shape *r = &trc_lt_nshapes && slot >= 0 && slot < trc_lt_nshapes ? &trc_lt_shapes[slot] : nullptr;
    if (!r || r->epi != epi || epi != TRC_EPI_DGELU || r->m != m || r->n != n || r->k != k || r->lda != lda ||
        r->ldb != ldb || r->ldc != ldc || r->beta != beta || beta != 0.0f || !r->bf16 || !r->out_bf16 ||
        r->transa != transa || r->transb != transb || transa || !transb || n % 8 != 0 || !aux || bgrad ||
        (const tr_bf16 *)C == aux)
        emu_fail("trc_gemm_lt_bwd (bf16 D): the call is not its row of trc_lt_shapes (or not DGELU, beta 0)", E.cur_id);
    trc_check_aligned(A, "trc_gemm_lt_bwd A", __FILE__, __LINE__);
    trc_check_aligned(B, "trc_gemm_lt_bwd B", __FILE__, __LINE__);
    trc_check_aligned(C, "trc_gemm_lt_bwd C", __FILE__, __LINE__);
    trc_check_aligned(aux, "trc_gemm_lt_bwd aux", __FILE__, __LINE__);
    E.lt_id = E.cur_id;
    E.lt_after = 0; /* its own push makes 1 */
    push(TRC_COMPUTE, [=] {
        /* A [m, k] at lda, B [n, k] at ldb (transposed in the product) */
        std::vector<float> a = emu_widen(A, m, k, lda), b = emu_widen(B, n, k, ldb), t((size_t)m * n);
        tr_sgemm(0, 1, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                    t.data(), n);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                emu_put(&C[(size_t)i * ldc + j], t[(size_t)i * n + j] * tr_gelu_grad(emu_f32(aux[(size_t)i * n + j])));
    });
}

/* what the kernels of emu_kernels.cc use (emu.h) */
void emu::push(int stream, std::function<void()> f)
{
    ::push(stream, std::move(f));
}

int emu::stream_of(cudaStream_t s)
{
    return ::stream_of(s);
}

void emu::fused_head()
{
    ::fused_head();
}

/* attention = "cudnn" (runtime/cuda/trc_sdpa.h): its own file */
#include "trc_sdpa.h"
#include "emu_sdpa.inc"
