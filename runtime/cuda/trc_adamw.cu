/*
 * trc_adamw.cu - the CUDA backend's optimizer step: AdamW on one parameter
 * shard, on the compute stream.
 *
 * The arithmetic is tr_adamw's (runtime/tr_kernels_bwd.c), operation by
 * operation: hyperparameters from tr_model rounded to float; the learning rate
 * (c->lr, the schedule's for the step) and the bias corrections 1 - beta^t
 * (double pow on the host, rounded to float) read from the device's step
 * scalars (trc_step_scalars: a captured step must not bake them in), then per
 * element
 *   m = b1 m + (1-b1) g;  v = b2 v + ((1-b2) g) g;
 *   p -= lr (m/c1 / (sqrt(v/c2) + eps) + wd p)
 * with every operation an IEEE round-to-nearest intrinsic (__fmul_rn, ...),
 * so nvcc cannot contract a multiply and an add into an FMA and the result is
 * the CPU's. One thread per element and no reduction: the same bits in give
 * the same bits out on every replica, which is what keeps replicas bitwise
 * identical after the exact gradient all-reduce.
 */
#include "trc_internal.h"

namespace {

constexpr int kAdamThreads = 256;

__global__ void __launch_bounds__(kAdamThreads)
    k_adamw(float *__restrict__ p, const float *__restrict__ g, float *__restrict__ m, float *__restrict__ v,
            long long n, float b1, float b2, float omb1, float omb2, const float *__restrict__ sc, float eps, float wd)
{
    const long long e = (long long)blockIdx.x * kAdamThreads + threadIdx.x;
    if (e >= n)
        return;
    const float lr = sc[TRC_SC_LR], c1 = sc[TRC_SC_C1], c2 = sc[TRC_SC_C2];
    const float ge = g[e];
    const float me = __fadd_rn(__fmul_rn(b1, m[e]), __fmul_rn(omb1, ge));
    const float ve = __fadd_rn(__fmul_rn(b2, v[e]), __fmul_rn(__fmul_rn(omb2, ge), ge));
    m[e] = me;
    v[e] = ve;
    const float mhat = __fdiv_rn(me, c1), vhat = __fdiv_rn(ve, c2);
    const float pe = p[e];
    const float upd = __fadd_rn(__fdiv_rn(mhat, __fadd_rn(__fsqrt_rn(vhat), eps)), __fmul_rn(wd, pe));
    p[e] = __fsub_rn(pe, __fmul_rn(lr, upd));
}

} // namespace

void trc_adamw(tr_ctx *c, float *param, const float *grad, float *m, float *v, long long count, int decay)
{
    const tr_model_desc *md = &tr_model;
    (void)c; /* lr and the bias corrections of c->lr, c->opt_step: trc_step_scalars */
    const float b1 = (float)md->beta1, b2 = (float)md->beta2, eps = (float)md->adam_eps;
    const float wd = decay ? (float)md->weight_decay : 0.0f;
    if (count <= 0)
        return;
    const unsigned blocks = (unsigned)((count + kAdamThreads - 1) / kAdamThreads);
    k_adamw<<<blocks, kAdamThreads, 0, trc_g.stream[TRC_COMPUTE]>>>(param, grad, m, v, count, b1, b2, 1.0f - b1,
                                                                     1.0f - b2, trc_step_scalars(), eps, wd);
    trc_launch_check("trc_adamw", __FILE__, __LINE__);
}
