/*
 * trc_adamw.cu - the CUDA backend's optimizer step: AdamW on one parameter
 * shard, on the compute stream.
 *
 * The arithmetic is tr_adamw's (runtime/tr_kernels_bwd.c), operation by
 * operation: hyperparameters from tr_model (the learning rate c->lr, the
 * schedule's for the step) rounded to float, the bias
 * corrections 1 - beta^t computed in double with pow on the host and rounded
 * to float, then per element
 *   m = b1 m + (1-b1) g;  v = b2 v + ((1-b2) g) g;
 *   p -= lr (m/c1 / (sqrt(v/c2) + eps) + wd p)
 * with every operation an IEEE round-to-nearest intrinsic (__fmul_rn, ...),
 * so nvcc cannot contract a multiply and an add into an FMA and the result is
 * the CPU's. One thread per element and no reduction: the same bits in give
 * the same bits out on every replica, which is what keeps replicas bitwise
 * identical after the exact gradient all-reduce.
 */
#include <math.h>

#include "trc_internal.h"

namespace {

constexpr int kAdamThreads = 256;

__global__ void __launch_bounds__(kAdamThreads)
    k_adamw(float *__restrict__ p, const float *__restrict__ g, float *__restrict__ m, float *__restrict__ v,
            long long n, float b1, float b2, float omb1, float omb2, float lr, float eps, float wd, float c1, float c2)
{
    const long long e = (long long)blockIdx.x * kAdamThreads + threadIdx.x;
    if (e >= n)
        return;
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
    const float b1 = (float)md->beta1, b2 = (float)md->beta2, lr = (float)c->lr, eps = (float)md->adam_eps;
    const float wd = decay ? (float)md->weight_decay : 0.0f;
    const float c1 = (float)(1.0 - pow(md->beta1, c->opt_step)), c2 = (float)(1.0 - pow(md->beta2, c->opt_step));
    if (count <= 0)
        return;
    const unsigned blocks = (unsigned)((count + kAdamThreads - 1) / kAdamThreads);
    k_adamw<<<blocks, kAdamThreads, 0, trc_g.stream[TRC_COMPUTE]>>>(param, grad, m, v, count, b1, b2, 1.0f - b1,
                                                                     1.0f - b2, lr, eps, wd, c1, c2);
    trc_launch_check("trc_adamw", __FILE__, __LINE__);
}
