/*
 * trk_elt.cuh - the per-thread bodies of the element-wise kernels that read or write bf16 (docs/BF16.md; docs/CUDA.md
 * "bf16 element-wise kernels"): gelu_bwd reading the bf16 pre-activation, bf16 training's bias + GeLU (templates/
 * kernels_gelu.cu.in; and gelu_bwd with a float u), and the bias and widening kernels around cuDNN's attention
 * (trc_attn_cudnn.cu); layernorm's ln_apply with a bf16 output (kernels_rows.cu.in, 8 columns a lane where the row width is a multiple of 8); the
 * multi-tensor AdamW with its bf16 weight copy (trc_adamw.cu, adamw_chunk: 8 elements a thread where aligned).
 *
 * Each has two bodies: `1`, one element (the scalar path), and `8`, elements e .. e+7 with e a multiple of 8, each
 * bf16 operand one 16-byte access (a uint4 of 8 bf16, the lower element at the lower address) and each float operand
 * two float4. The arithmetic of every element is the scalar body's, in the same order, so both paths give the same
 * bits. A kernel runs the 8-wide body over the largest multiple of 8 of its elements and the scalar one over the rest
 * (the tail), or the scalar body alone where its pointers are not 16-byte aligned; a body with a bias column needs the
 * row width a multiple of 8 (chosen from the literal shape in kernels.cu). The bodies are TR_HD so that
 * tests/cuda/bf16_check.cu runs both on the host, without a GPU, against tr_bf16.h's rounding.
 */
#ifndef TRK_ELT_CUH
#define TRK_ELT_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "tr_math.h"
#include "trc.h"

namespace trk {
namespace elt {

/* 8 consecutive values of a thread */
struct f8 {
    float v[8];
};

/* both 16-byte aligned: the 8-wide bodies may run on them */
TR_HD inline bool aligned16(const void *a, const void *b)
{
    return ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) & 15u) == 0;
}

/* bf16 bits widened to float: exact (the high half of the float) */
TR_HD inline float widen(tr_bf16 x)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float((unsigned)x << 16);
#else
    const uint32_t u = (uint32_t)x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* x rounded to bf16, nearest even (__float2bfloat16_rn: tr_bf16.h's tr_f32_to_bf16) */
TR_HD inline tr_bf16 narrow(float x)
{
    const __nv_bfloat16 h = __float2bfloat16_rn(x);
    tr_bf16 r;
    memcpy(&r, &h, sizeof r);
    return r;
}

/* two bf16 (a at the lower address) as the bits of one __nv_bfloat162 */
TR_HD inline unsigned narrow2(float a, float b)
{
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    unsigned r;
    memcpy(&r, &h, sizeof r);
    return r;
}

TR_HD inline f8 load8(const float *p, long long e)
{
    const float4 a = reinterpret_cast<const float4 *>(p + e)[0], b = reinterpret_cast<const float4 *>(p + e)[1];
    return f8{{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}};
}

TR_HD inline f8 load8(const tr_bf16 *p, long long e) /* one 16-byte load */
{
    const uint4 q = *reinterpret_cast<const uint4 *>(p + e);
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
    f8 r;
    for (int k = 0; k < 4; k++) {
        r.v[2 * k] = widen((tr_bf16)(w[k] & 0xffffu));
        r.v[2 * k + 1] = widen((tr_bf16)(w[k] >> 16));
    }
    return r;
}

TR_HD inline void store8(float *p, long long e, const f8 &x)
{
    reinterpret_cast<float4 *>(p + e)[0] = make_float4(x.v[0], x.v[1], x.v[2], x.v[3]);
    reinterpret_cast<float4 *>(p + e)[1] = make_float4(x.v[4], x.v[5], x.v[6], x.v[7]);
}

TR_HD inline void store8(tr_bf16 *p, long long e, const f8 &x) /* one 16-byte store */
{
    *reinterpret_cast<uint4 *>(p + e) =
        make_uint4(narrow2(x.v[0], x.v[1]), narrow2(x.v[2], x.v[3]), narrow2(x.v[4], x.v[5]), narrow2(x.v[6], x.v[7]));
}

TR_HD inline void store1(float *p, float v)
{
    *p = v;
}
TR_HD inline void store1(tr_bf16 *p, float v)
{
    *p = narrow(v);
}

/* one element widened to float: a bias of either type (bf16 programs read fc1's bias in bf16, docs/BF16.md) */
TR_HD inline float load1(const float *p, long long e)
{
    return p[e];
}
TR_HD inline float load1(const tr_bf16 *p, long long e)
{
    return widen(p[e]);
}

/* ---- the bodies: element i (1), elements e .. e+7 (8) ---- */

/* dg *= GeLU'(u), u the kept pre-activation: bf16 (8 elements one 16-byte load) or float (two float4) */
TR_HD inline void gelu_bwd1(long long i, float *dg, const tr_bf16 *u)
{
    dg[i] *= tr_gelu_grad(widen(u[i]));
}
TR_HD inline void gelu_bwd1(long long i, float *dg, const float *u)
{
    dg[i] *= tr_gelu_grad(u[i]);
}
template <typename U>
TR_HD inline void gelu_bwd8(long long e, float *dg, const U *u)
{
    f8 d = load8(dg, e);
    const f8 w = load8(u, e);
    for (int k = 0; k < 8; k++)
        d.v[k] *= tr_gelu_grad(w.v[k]);
    store8(dg, e, d);
}

/* bf16 training: du = bf16(dg * GeLU'(u)), dg only read (8 elements: two float4 of dg, one 16-byte load of u and
 * one 16-byte store of du) */
TR_HD inline void gelu_bwd_to1(long long i, const float *dg, const tr_bf16 *u, tr_bf16 *du)
{
    du[i] = narrow(dg[i] * tr_gelu_grad(widen(u[i])));
}
TR_HD inline void gelu_bwd_to8(long long e, const float *dg, const tr_bf16 *u, tr_bf16 *du)
{
    f8 d = load8(dg, e);
    const f8 w = load8(u, e);
    for (int k = 0; k < 8; k++)
        d.v[k] *= tr_gelu_grad(w.v[k]);
    store8(du, e, d);
}

/* x += bias (the kept pre-activation), g = GeLU(x) as OUT (GELU); cols: the row width (8 | cols for the 8-wide body) */
template <bool GELU, typename OUT, typename B>
TR_HD inline void bias_add1(long long i, int cols, float *x, const B *bias, OUT *g)
{
    const float u = x[i] + load1(bias, i % cols);
    x[i] = u;
    if constexpr (GELU)
        store1(g + i, tr_gelu(u));
}
template <bool GELU, typename OUT, typename B>
TR_HD inline void bias_add8(long long e, int cols, float *x, const B *bias, OUT *g)
{
    f8 u = load8(x, e);
    const f8 b = load8(bias, e % cols);
    for (int k = 0; k < 8; k++)
        u.v[k] = u.v[k] + b.v[k];
    store8(x, e, u);
    if constexpr (GELU) {
        f8 y;
        for (int k = 0; k < 8; k++)
            y.v[k] = tr_gelu(u.v[k]);
        store8(g, e, y);
    }
}

/* bf16 training: u = bf16(h + bias), g = bf16(GeLU(h + bias)), GeLU of the unrounded sum; the bias bf16 */
TR_HD inline void bias_gelu_keep1(long long i, int cols, const float *h, const tr_bf16 *bias, tr_bf16 *g, tr_bf16 *u)
{
    const float v = h[i] + load1(bias, i % cols);
    u[i] = narrow(v);
    g[i] = narrow(tr_gelu(v));
}
TR_HD inline void bias_gelu_keep8(long long e, int cols, const float *h, const tr_bf16 *bias, tr_bf16 *g, tr_bf16 *u)
{
    f8 v = load8(h, e), y;
    const f8 b = load8(bias, e % cols);
    for (int k = 0; k < 8; k++) {
        v.v[k] = v.v[k] + b.v[k];
        y.v[k] = tr_gelu(v.v[k]);
    }
    store8(u, e, v);
    store8(g, e, y);
}

/* h = bf16(qkv + bias), qkv only read (cuDNN attention's operand; nothing on that path reads a biased fp32 qkv) */
TR_HD inline void bias_bf16_1(long long i, int cols, const float *qkv, const float *bias, tr_bf16 *h)
{
    h[i] = narrow(qkv[i] + bias[i % cols]);
}
TR_HD inline void bias_bf16_8(long long e, int cols, const float *qkv, const float *bias, tr_bf16 *h)
{
    f8 v = load8(qkv, e);
    const f8 b = load8(bias, e % cols);
    for (int k = 0; k < 8; k++)
        v.v[k] = v.v[k] + b.v[k];
    store8(h, e, v);
}

/* layernorm's y = tr_ln(x) of one row (xr, yr: the row; gamma, beta: the columns), column j (1) or j .. j+7 (8, j a
 * multiple of 8: x, gamma and beta two float4 each, a bf16 y one 16-byte store) */
template <typename OUT>
TR_HD inline void ln_apply1(int j, const float *xr, const float *gamma, const float *beta, float sum, float sq,
                            float inv_n, float eps, OUT *yr)
{
    store1(yr + j, tr_ln(xr[j], sum, sq, inv_n, eps, gamma[j], beta[j]));
}
template <typename OUT>
TR_HD inline void ln_apply8(int j, const float *xr, const float *gamma, const float *beta, float sum, float sq,
                            float inv_n, float eps, OUT *yr)
{
    f8 x = load8(xr, j);
    const f8 g = load8(gamma, j), b = load8(beta, j);
    for (int k = 0; k < 8; k++)
        x.v[k] = tr_ln(x.v[k], sum, sq, inv_n, eps, g.v[k], b.v[k]);
    store8(yr, j, x);
}

/* ---- AdamW (runtime/cuda/trc_adamw.cu): one element, or 8 (16-byte accesses, the bf16 copy one 16-byte store) */

/* IEEE round-to-nearest operations that nvcc never contracts into an FMA (the intrinsics on the device; on the host
 * the plain operators, which x86-64's baseline code has no FMA to contract into: tr_adamw's bits either way) */
TR_HD inline float add_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
TR_HD inline float sub_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
TR_HD inline float mul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
TR_HD inline float div_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
TR_HD inline float sqrt_rn(float a)
{
#ifdef __CUDA_ARCH__
    return __fsqrt_rn(a);
#else
    return sqrtf(a);
#endif
}

/* one step's constants: hyperparameters (b1, b2, 1-b1, 1-b2, eps, the tensor's weight decay) and step scalars */
struct adamw_k {
    float b1, b2, omb1, omb2, eps, wd, lr, c1, c2;
};

/* one tensor's operands (w: its bf16 copy, or null) */
struct adamw_t {
    float *p;
    const float *g;
    float *m, *v;
    tr_bf16 *w;
};

/* tr_adamw's update of one element; returns the new parameter */
TR_HD inline float adamw_of(const adamw_k &k, float pe, float ge, float &me, float &ve)
{
    me = add_rn(mul_rn(k.b1, me), mul_rn(k.omb1, ge));
    ve = add_rn(mul_rn(k.b2, ve), mul_rn(mul_rn(k.omb2, ge), ge));
    const float mhat = div_rn(me, k.c1), vhat = div_rn(ve, k.c2);
    const float upd = add_rn(div_rn(mhat, add_rn(sqrt_rn(vhat), k.eps)), mul_rn(k.wd, pe));
    return sub_rn(pe, mul_rn(k.lr, upd));
}
TR_HD inline void adamw1(long long e, const adamw_k &k, const adamw_t &t)
{
    float me = t.m[e], ve = t.v[e];
    const float pn = adamw_of(k, t.p[e], t.g[e], me, ve);
    t.m[e] = me;
    t.v[e] = ve;
    t.p[e] = pn;
    if (t.w)
        t.w[e] = narrow(pn);
}
TR_HD inline void adamw8(long long e, const adamw_k &k, const adamw_t &t)
{
    f8 p = load8(t.p, e), m = load8(t.m, e), v = load8(t.v, e);
    const f8 g = load8(t.g, e);
    for (int j = 0; j < 8; j++)
        p.v[j] = adamw_of(k, p.v[j], g.v[j], m.v[j], v.v[j]);
    store8(t.m, e, m);
    store8(t.v, e, v);
    store8(t.p, e, p);
    if (t.w)
        store8(t.w, e, p);
}

/* the 8-wide body may run on a tensor: every operand 16-byte aligned (the bf16 copy's too, where there is one) */
TR_HD inline bool adamw_vec(const adamw_t &t)
{
    return aligned16(t.p, t.g) && aligned16(t.m, t.v) && aligned16(t.w, t.w);
}

/* thread `th` of `nth` on elements [e0, e0 + len) of one tensor (e0 a multiple of 8): vec, thread k < len / 8 takes
 * 8 elements at e0 + 8k, the next len % 8 threads one each; else one element per thread k, k = th, th + nth, ... */
TR_HD inline void adamw_chunk(int th, int nth, long long e0, long long len, bool vec, const adamw_k &k,
                              const adamw_t &t)
{
    const long long n8 = vec ? len / 8 : 0, nt = n8 + (len - 8 * n8);
    for (long long q = th; q < nt; q += nth)
        if (q < n8)
            adamw8(e0 + 8 * q, k, t);
        else
            adamw1(e0 + 8 * n8 + (q - n8), k, t);
}

/* y = x widened (cuDNN attention's bf16 outputs as fp32) */
TR_HD inline void widen1(long long i, const tr_bf16 *x, float *y)
{
    y[i] = widen(x[i]);
}
TR_HD inline void widen8(long long e, const tr_bf16 *x, float *y)
{
    store8(y, e, load8(x, e));
}

} // namespace elt
} // namespace trk

#endif
