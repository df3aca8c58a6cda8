/*
 * trc_adamw.cu - the CUDA backend's optimizer step: AdamW on every parameter shard of the rank in one kernel
 * launch (multi-tensor), on the compute stream; in a bf16 training program the same thread also writes the
 * shard's persistent bf16 copy, which the next step's GEMMs read (docs/BF16.md), so no cast runs in the step.
 *
 * The generated optimizer holds the tensors as a static table of arena offsets (tr_adamw_tensor, one row per
 * shard, plan order). The first call with a table builds its launch plan: the table on the device and one
 * (tensor, first element) entry per block, each block owning kChunk consecutive elements of one tensor, so every
 * element has exactly one owner thread and the split depends on the table alone. Later calls with the same
 * table launch at once. A thread takes 8 consecutive elements of its chunk, each float operand two float4 and the
 * bf16 copy one 16-byte store, where the tensor's operands are 16-byte aligned (plan buffers are), the chunk's last
 * len % 8 elements one a thread; else one element a thread (runtime/cuda/trk_elt.cuh's adamw_chunk, whose bodies
 * are __host__ __device__: tests/cuda/adamw_check.sh DIR host runs both paths on the CPU against tr_adamw's loop).
 *
 * The arithmetic is tr_adamw's (runtime/tr_kernels_bwd.c), operation by operation: hyperparameters from tr_model
 * rounded to float; the learning rate (c->lr, the schedule's for the step) and the bias corrections 1 - beta^t
 * (double pow on the host, rounded to float) read from the device's step scalars (trc_step_scalars, written once
 * a step: a step replayed from a CUDA graph must not have them baked in), then per element
 *   m = b1 m + (1-b1) g;  v = b2 v + ((1-b2) g) g;
 *   p -= lr (m/c1 / (sqrt(v/c2) + eps) + wd p)
 * with every operation an IEEE round-to-nearest intrinsic (__fmul_rn, ...: trk_elt.cuh's mul_rn, ...), so nvcc
 * cannot contract a multiply and an add into an FMA and the result is the CPU's; the bf16 copy is __float2bfloat16_rn of the new p
 * (trc_cast_bf16's rounding, the bits of tr_f32_to_bf16). No reduction: the same bits in give the same bits out
 * on every replica, which is what keeps replicas bitwise identical after the exact gradient all-reduce.
 * optimizer.shard: a row that is one slice of its parameter (slice_of > 0) is moved to this rank's slice when the
 * launch plan is built (build_plan), so the kernel never sees slices.
 */
#include <cuda_bf16.h>

#include <cstdio>
#include <vector>

#include "trc_internal.h"
#include "trk_elt.cuh"

namespace {

constexpr int kAdamThreads = 256;
constexpr long long kChunk = 8LL * kAdamThreads; /* elements per block: 8 per thread */

struct adam_block {
    int tensor;
    long long e0; /* first element of the block's chunk */
};

struct adam_hyper { /* what does not change from step to step; lr, c1, c2 are the step scalars */
    float b1, b2, omb1, omb2, eps, wd;
};

/* the launch plan of one table: built at its first call, kept until trc_adamw_free */
struct adam_plan {
    const tr_adamw_tensor *host = nullptr; /* the generated table it was built from */
    int n = 0;
    tr_adamw_tensor *tensors = nullptr;    /* device copy of the table */
    adam_block *blocks = nullptr;          /* device: what each block owns */
    std::vector<adam_block> hblocks;       /* its host side, alive until the copy has run */
    std::vector<tr_adamw_tensor> hrows;    /* the table as launched (sliced rows moved to the member's slice) */
    int member = 0;                        /* optimizer.shard: the slice it was built for */
    unsigned nblocks = 0;
} plan;

__global__ void __launch_bounds__(kAdamThreads)
    k_adamw_multi(float *__restrict__ A, const tr_adamw_tensor *__restrict__ T, const adam_block *__restrict__ B,
                  adam_hyper h, const float *__restrict__ sc)
{
    const adam_block blk = B[blockIdx.x];
    const tr_adamw_tensor t = T[blk.tensor];
    const trk::elt::adamw_k k = {h.b1,  h.b2, h.omb1, h.omb2, h.eps, t.decay ? h.wd : 0.0f, sc[TRC_SC_LR],
                                 sc[TRC_SC_C1], sc[TRC_SC_C2]};
    const trk::elt::adamw_t x = {A + t.param, A + t.grad, A + t.m, A + t.v,
                                 t.w16 >= 0 ? reinterpret_cast<tr_bf16 *>(A + t.w16) : nullptr};
    const long long len = blk.e0 + kChunk < t.count ? kChunk : t.count - blk.e0;
    trk::elt::adamw_chunk((int)threadIdx.x, kAdamThreads, blk.e0, len, trk::elt::adamw_vec(x), k, x);
}

/* (Re)build the launch plan for table t of n rows: its device copy and the block table. optimizer.shard: a row
 * with slice_of > 0 updates slice `member` of its parameter ([member*count, min((member+1)*count, slice_of)) of
 * param and grad; m and v from 0), so its device row is moved there and shortened: the kernel stays the same. */
void build_plan(const tr_adamw_tensor *t, int n, int member, cudaStream_t s)
{
    trc_adamw_free();
    std::vector<tr_adamw_tensor> &rows = plan.hrows;
    rows.assign(t, t + n);
    for (tr_adamw_tensor &r : rows) {
        if (r.slice_of <= 0)
            continue;
        const long long off = (long long)member * r.count;
        if (r.w16 >= 0) { /* bf16 with shard is refused by the spec: its copy would need gathering too */
            fprintf(stderr, "internal error: a sliced AdamW row with a bf16 copy (optimizer.shard with bf16)\n");
            trc_die();
        }
        r.count = off >= r.slice_of ? 0 : (r.slice_of - off < r.count ? r.slice_of - off : r.count);
        r.param += off;
        r.grad += off;
        r.slice_of = 0;
    }
    std::vector<adam_block> &blocks = plan.hblocks;
    for (int i = 0; i < n; i++)
        for (long long e0 = 0; e0 < rows[i].count; e0 += kChunk)
            blocks.push_back({i, e0});
    plan.host = t;
    plan.n = n;
    plan.member = member;
    plan.nblocks = (unsigned)blocks.size();
    if (n <= 0 || blocks.empty())
        return;
    cudaCheck(cudaMalloc((void **)&plan.tensors, (size_t)n * sizeof *plan.tensors));
    cudaCheck(cudaMalloc((void **)&plan.blocks, blocks.size() * sizeof blocks[0]));
    /* ordered on s before the first launch, no host wait (the generated table is static, hrows and hblocks kept) */
    cudaCheck(cudaMemcpyAsync(plan.tensors, rows.data(), (size_t)n * sizeof *t, cudaMemcpyHostToDevice, s));
    cudaCheck(cudaMemcpyAsync(plan.blocks, blocks.data(), blocks.size() * sizeof blocks[0], cudaMemcpyHostToDevice,
                              s));
}

} // namespace

void trc_adamw_free(void)
{
    if (plan.tensors)
        cudaFree(plan.tensors);
    if (plan.blocks)
        cudaFree(plan.blocks);
    plan = adam_plan{};
}

void trc_adamw_launch(float *A, const tr_adamw_tensor *t, int n, const float *sc, double beta1, double beta2,
                      double eps, double weight_decay, int member, cudaStream_t s)
{
    if (plan.host != t || plan.n != n || plan.member != member)
        build_plan(t, n, member, s);
    if (plan.nblocks == 0)
        return;
    const float b1 = (float)beta1, b2 = (float)beta2;
    const adam_hyper h = {b1, b2, 1.0f - b1, 1.0f - b2, (float)eps, (float)weight_decay};
    k_adamw_multi<<<plan.nblocks, kAdamThreads, 0, s>>>(A, plan.tensors, plan.blocks, h, sc);
    trc_launch_check("trc_adamw_multi", __FILE__, __LINE__);
}

void trc_adamw_multi(tr_ctx *c, float *A, const tr_adamw_tensor *t, int n)
{
    const tr_model_desc *md = &tr_model;
    /* c->lr and the bias corrections of c->opt_step: trc_step_scalars, written by tr_backend_step_scalars */
    trc_adamw_launch(A, t, n, trc_step_scalars(), md->beta1, md->beta2, md->adam_eps, md->weight_decay,
                     c->desc->key[TR_DEP], trc_g.stream[TRC_COMPUTE]);
}
