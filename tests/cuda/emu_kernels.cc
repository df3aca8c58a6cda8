/*
 * emu_kernels.cc - the fused kernels of the CUDA backend (kernels.cuh, trk_lm.cuh, trk_gen.cuh) as host loops with the CUDA
 * kernels' semantics, for the emulation of tests/cuda/emu.cc (its head comment says what is checked and how each
 * family is emulated). Compiled per output: it includes the output's kernels.cuh and, at its end, the template
 * instances that output's kernels.cu has (instances.inc, extracted by tests/cuda/emu_build.sh), so a rank file that
 * calls a shape its kernels.cu lacks fails to link here as it would with nvcc. Each kernel pushes one work item on
 * the stream it is given (emu::push, emu.h); the runtime runs the queues in the order TESS_EMU_ORDER picks.
 */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <cblas.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <functional>
#include <vector>

#include "kernels.cuh"
#include "trc.h"
#include "trk_gen.cuh"
#include "trk_lm.cuh"

extern "C" {
#include "tr_math.h"
}
#include "tr_bf16.h"

#include "emu.h"
#include "lnb_ref.h"

/* ---- kernels.cuh: the CUDA kernels' semantics as loops ------------------------------------------------------ */

namespace trk {

using emu::push;
using emu::stream_of;

/* a kernel's output element: float as is, tr_bf16 rounded to nearest even */
template <typename OUT>
inline void put(OUT *p, float v)
{
    static_assert(std::is_same_v<OUT, float> || std::is_same_v<OUT, tr_bf16>, "kernel output: float or tr_bf16");
    if constexpr (std::is_same_v<OUT, float>)
        *p = v;
    else
        *p = tr_f32_to_bf16(v);
}



template <int ROWS, int COLS>
void ln_rowsum(cudaStream_t s, const float *x, float *rs)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++) {
            double t = 0;
            for (int j = 0; j < COLS; j++)
                t += x[(size_t)r * COLS + j];
            rs[r] = (float)t;
        }
    });
}

template <int ROWS, int COLS>
void resid_rowsum(cudaStream_t s, float *x, const float *p, const float *bias, float *rs)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++) {
            double t = 0;
            for (int j = 0; j < COLS; j++) {
                float *e = &x[(size_t)r * COLS + j];
                *e = *e + (p[(size_t)r * COLS + j] + bias[j]);
                t += *e;
            }
            if (rs)
                rs[r] = (float)t;
        }
    });
}

template <int ROWS, int COLS, int HIDDEN>
void ln_sqdev(cudaStream_t s, const float *x, const float *rs, float *vs)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++) {
            double mean = (double)rs[r] / HIDDEN, t = 0;
            for (int j = 0; j < COLS; j++) {
                double d = x[(size_t)r * COLS + j] - mean;
                t += d * d;
            }
            vs[r] = (float)t;
        }
    });
}

template <int ROWS, int COLS, int HIDDEN, typename OUT>
void ln_apply(cudaStream_t s, const float *x, const float *rs, const float *vs, const float *gamma, const float *beta,
              float eps, OUT *y)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++)
            for (int j = 0; j < COLS; j++)
                put(&y[(size_t)r * COLS + j],
                    tr_ln(x[(size_t)r * COLS + j], rs[r], vs[r], 1.0f / (float)HIDDEN, eps, gamma[j], beta[j]));
    });
}

/* ln_sqdev and ln_apply above for row r of x (o its first element), whose row sum rs[r] is written: vs[r] and y's row */
template <int COLS, int HIDDEN, typename OUT>
void ln_row(const float *x, size_t o, int r, const float *rs, float *vs, const float *gamma, const float *beta,
            float eps, OUT *y)
{
    double mean = (double)rs[r] / HIDDEN, q = 0;
    for (int j = 0; j < COLS; j++) {
        double d = x[o + j] - mean;
        q += d * d;
    }
    vs[r] = (float)q;
    for (int j = 0; j < COLS; j++)
        put(&y[o + j], tr_ln(x[o + j], rs[r], vs[r], 1.0f / (float)HIDDEN, eps, gamma[j], beta[j]));
}

/* the row kernel (gen/fuse.c): resid_rowsum(_to), ln_sqdev and ln_apply above, one row at a time as a warp does it
 * (a row's outputs written before the next row is read: an output over a later row's input would show) */
template <int ROWS, int COLS, int HIDDEN, typename OUT>
void resid_ln(cudaStream_t s, const float *x, const float *p, const float *bias, float *xo, float *rs, float *vs,
              const float *gamma, const float *beta, float eps, OUT *y)
{
    static_assert(COLS == HIDDEN, "the row kernel takes whole rows");
    emu::fused_head();
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++) {
            const size_t o = (size_t)r * COLS;
            double t = 0;
            for (int j = 0; j < COLS; j++) {
                xo[o + j] = x[o + j] + (p[o + j] + bias[j]);
                t += xo[o + j];
            }
            rs[r] = (float)t;
            ln_row<COLS, HIDDEN>(xo, o, r, rs, vs, gamma, beta, eps, y);
        }
    });
}

/* the row kernel without a residual (gen/fuse.c on ln_rowsum): ln_rowsum, ln_sqdev and ln_apply above, a row at a time */
template <int ROWS, int COLS, int HIDDEN, typename OUT>
void ln_rows(cudaStream_t s, const float *x, float *rs, float *vs, const float *gamma, const float *beta, float eps,
             OUT *y)
{
    static_assert(COLS == HIDDEN, "the row kernel takes whole rows");
    emu::fused_head();
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++) {
            const size_t o = (size_t)r * COLS;
            double t = 0;
            for (int j = 0; j < COLS; j++)
                t += x[o + j];
            rs[r] = (float)t;
            ln_row<COLS, HIDDEN>(x, o, r, rs, vs, gamma, beta, eps, y);
        }
    });
}

template <int ROWS, int COLS>
void bias_gelu(cudaStream_t s, float *h, const float *bias)
{
    push(stream_of(s), [=] {
        for (long long i = 0; i < (long long)ROWS * COLS; i++)
            h[i] = tr_gelu(h[i] + bias[i % COLS]);
    });
}

/* ---- attention (kernels_attention.cu.in): the same steps, the GEMMs as cblas per batch member, the softmax
 * kernels' arithmetic lane by lane (a warp of 32 lanes owns a row; lane L takes j = L, L+32, ...; the lanes'
 * partial results meet in the xor tree of __shfl_xor_sync) ---- */

template <typename T>
inline float get(const T *p)
{
    if constexpr (std::is_same_v<T, float>)
        return *p;
    else
        return tr_bf16_to_f32(*p);
}

/* trc_gemm_batched: C_b = alpha op(A_b) op(B_b) (beta 0), row-major, X_b = X + b*sX; operands widened to fp32
 * (exact), an fp32 product, C stored as its type (a bf16 C rounded to nearest even) */
template <typename T, typename TC>
void gemm_batched_ref(int transa, int transb, int m, int n, int k, float alpha, const T *A, int lda, long long sA,
                      const T *B, int ldb, long long sB, TC *C, int ldc, long long sC, int batch)
{
    const size_t na = (size_t)((transa ? k : m) - 1) * lda + (size_t)(transa ? m : k);
    const size_t nb = (size_t)((transb ? n : k) - 1) * ldb + (size_t)(transb ? k : n);
    std::vector<float> a(na), b(nb), c((size_t)m * n);
    for (int z = 0; z < batch; z++) {
        for (size_t i = 0; i < na; i++)
            a[i] = get(A + z * sA + i);
        for (size_t i = 0; i < nb; i++)
            b[i] = get(B + z * sB + i);
        cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, m, n, k,
                    alpha, a.data(), lda, b.data(), ldb, 0.0f, c.data(), n);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                put(C + z * sC + (size_t)i * ldc + j, c[(size_t)i * n + j]);
    }
}

/* the sum of 32 lane values by the xor tree: every lane ends with the same bits; lane 0's */
inline float lanes_sum(float *v)
{
    for (int o = 16; o > 0; o /= 2) {
        float w[32];
        for (int l = 0; l < 32; l++)
            w[l] = v[l] + v[l ^ o];
        std::copy(w, w + 32, v);
    }
    return v[0];
}

/* k_softmax: P = causal softmax(S * scale) of rows r = h*seq + i */
template <typename T>
void softmax_ref(int rows, int seq, const float *sc, T *p, float scale)
{
    for (int r = 0; r < rows; r++) {
        const int i = r % seq;
        const float *x = sc + (size_t)r * seq;
        float m = -INFINITY, l[32] = {0};
        for (int j = 0; j <= i; j++)
            m = std::max(m, x[j] * scale);
        for (int j = 0; j <= i; j++)
            l[j % 32] += expf(x[j] * scale - m); /* each lane in ascending j */
        const float inv = 1.0f / lanes_sum(l);
        for (int j = 0; j < seq; j++)
            put(p + (size_t)r * seq + j, j <= i ? expf(x[j] * scale - m) * inv : 0.0f);
    }
}

/* k_softmax_bwd: dS = P (dP - sum_j P dP) over P, j <= i */
template <typename T>
void softmax_bwd_ref(int rows, int seq, const float *dp, T *p)
{
    for (int r = 0; r < rows; r++) {
        const int i = r % seq;
        const float *g = dp + (size_t)r * seq;
        T *pr = p + (size_t)r * seq;
        float d[32] = {0};
        for (int j = 0; j <= i; j++)
            d[j % 32] = fmaf(get(pr + j), g[j], d[j % 32]);
        const float D = lanes_sum(d);
        for (int j = 0; j <= i; j++)
            put(pr + j, get(pr + j) * (g[j] - D));
    }
}

template <int NSEQ, int SEQ, int HEADS, int HD, typename T, typename OUT>
void attention(tr_ctx *c, cudaStream_t s, float *qkv, const float *bias, OUT *out, float *scores, T *probs, T *qkvh)
{
    (void)c;
    push(stream_of(s), [=] {
        constexpr int CQ = HEADS * HD, LD = 3 * CQ, ROWS = HEADS * SEQ;
        constexpr long long SS = (long long)SEQ * SEQ;
        for (long long i = 0; i < (long long)NSEQ * SEQ * LD; i++) {
            qkv[i] += bias[i % LD];
            if constexpr (!std::is_same_v<T, float>)
                put(qkvh + i, qkv[i]);
        }
        const T *x = nullptr;
        if constexpr (std::is_same_v<T, float>)
            x = qkv;
        else
            x = qkvh;
        const float scale = 1.0f / sqrtf((float)HD);
        for (int n = 0; n < NSEQ; n++) {
            const T *q = x + (size_t)n * SEQ * LD;
            gemm_batched_ref(0, 1, SEQ, SEQ, HD, 1.0f, q, LD, HD, q + CQ, LD, HD, scores, SEQ, SS, HEADS);
            softmax_ref(ROWS, SEQ, scores, probs, scale);
            gemm_batched_ref(0, 0, SEQ, HD, SEQ, 1.0f, (const T *)probs, SEQ, SS, q + 2 * CQ, LD, HD,
                             out + (size_t)n * SEQ * CQ, CQ, HD, HEADS);
        }
    });
}

/* ---- training ---- */

template <int ROWS, int COLS>
void resid_rowsum_to(cudaStream_t s, const float *x, const float *p, const float *bias, float *rs, float *y)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++) {
            double t = 0;
            for (int j = 0; j < COLS; j++) {
                size_t e = (size_t)r * COLS + j;
                y[e] = x[e] + (p[e] + bias[j]);
                t += y[e];
            }
            if (rs)
                rs[r] = (float)t;
        }
    });
}

template <int ROWS, int COLS, typename OUT, typename B>
void bias_gelu_save(cudaStream_t s, float *u, const B *bias, OUT *g)
{
    push(stream_of(s), [=] {
        for (long long i = 0; i < (long long)ROWS * COLS; i++) {
            u[i] += get(&bias[i % COLS]); /* a bf16 bias widened (bf16 programs, docs/BF16.md) */
            put(&g[i], tr_gelu(u[i]));
        }
    });
}

template <int ROWS, int COLS>
void colsum(cudaStream_t s, const float *dy, float *db)
{
    push(stream_of(s), [=] {
        lnb_ref::colsum<ROWS, COLS>(dy, db);
    });
}

/* attention = "cudnn": the bias gradient of cuDNN's bf16 dQKV, the column sums of its exact widening */
template <int ROWS, int COLS>
void colsum(cudaStream_t s, const tr_bf16 *dy, float *db)
{
    push(stream_of(s), [=] {
        std::vector<float> w((size_t)ROWS * COLS);
        for (size_t i = 0; i < w.size(); i++)
            w[i] = tr_bf16_to_f32(dy[i]);
        lnb_ref::colsum<ROWS, COLS>(w.data(), db);
    });
}

/* bf16 training (docs/BF16.md): GeLU of the unrounded v = h + bias, u = bf16(v) kept, h not written */
template <int ROWS, int COLS>
void bias_gelu_save(cudaStream_t s, const float *h, const tr_bf16 *bias, tr_bf16 *g, tr_bf16 *u)
{
    push(stream_of(s), [=] {
        for (long long i = 0; i < (long long)ROWS * COLS; i++) {
            const float v = h[i] + get(&bias[i % COLS]);
            put(&u[i], v);
            put(&g[i], tr_gelu(v));
        }
    });
}

template <int ROWS, int COLS>
void gelu_bwd(cudaStream_t s, float *dg, const float *u)
{
    push(stream_of(s), [=] {
        for (long long i = 0; i < (long long)ROWS * COLS; i++)
            dg[i] *= tr_gelu_grad(u[i]);
    });
}

template <int ROWS, int COLS>
void gelu_bwd(cudaStream_t s, float *dg, const tr_bf16 *u)
{
    push(stream_of(s), [=] {
        for (long long i = 0; i < (long long)ROWS * COLS; i++)
            dg[i] *= tr_gelu_grad(get(&u[i]));
    });
}

template <int ROWS, int COLS>
void gelu_bwd(cudaStream_t s, const float *dg, const tr_bf16 *u, tr_bf16 *du)
{
    push(stream_of(s), [=] {
        for (long long i = 0; i < (long long)ROWS * COLS; i++)
            put(&du[i], dg[i] * tr_gelu_grad(get(&u[i])));
    });
}

template <int ROWS, int COLS, int HIDDEN>
void ln_bwd_sums(cudaStream_t s, const float *dy, const float *x, const float *rs, const float *vs,
                 const float *gamma, float eps, float *sums, float *dgamma, float *dbeta)
{
    if (COLS % 4 == 0) {
        trc_check_aligned(dy, "ln_bwd_sums dy", __FILE__, __LINE__);
        trc_check_aligned(x, "ln_bwd_sums x", __FILE__, __LINE__);
        trc_check_aligned(gamma, "ln_bwd_sums gamma", __FILE__, __LINE__);
    }
    push(stream_of(s), [=] { lnb_ref::ln_bwd_sums<ROWS, COLS, HIDDEN>(dy, x, rs, vs, gamma, eps, sums, dgamma, dbeta); });
}

template <int ROWS, int COLS, int HIDDEN>
void ln_bwd_apply(cudaStream_t s, const float *dy, const float *x, const float *rs, const float *vs,
                  const float *gamma, const float *sums, float eps, float *g, tr_bf16 *g16)
{
    if (COLS % 4 == 0) {
        trc_check_aligned(dy, "ln_bwd_apply dy", __FILE__, __LINE__);
        trc_check_aligned(x, "ln_bwd_apply x", __FILE__, __LINE__);
        trc_check_aligned(gamma, "ln_bwd_apply gamma", __FILE__, __LINE__);
        trc_check_aligned(g, "ln_bwd_apply g", __FILE__, __LINE__);
        if (g16)
            trc_check_aligned(g16, "ln_bwd_apply g16", __FILE__, __LINE__);
    }
    push(stream_of(s), [=] {
        lnb_ref::ln_bwd_apply<ROWS, COLS, HIDDEN>(dy, x, rs, vs, gamma, sums, eps, g);
        for (long long i = 0; g16 && i < (long long)ROWS * COLS; i++)
            put(&g16[i], g[i]);
    });
}

/* the row kernel of the two steps (gen/fuse.c, whole rows): ln_bwd_sums' s1, s2 and ln_bwd_apply's g += dx (and g16)
 * one row at a time as a warp does them (a row's g written before the next row is read), then dgamma and dbeta as the
 * column kernel after it */
template <int ROWS, int COLS, int HIDDEN>
void ln_bwd(cudaStream_t s, const float *dy, const float *x, const float *rs, const float *vs, const float *gamma,
            float eps, float *dgamma, float *dbeta, float *g, tr_bf16 *g16)
{
    static_assert(COLS == HIDDEN, "the row kernel takes whole rows");
    if (COLS % 4 == 0) {
        trc_check_aligned(dy, "ln_bwd dy", __FILE__, __LINE__);
        trc_check_aligned(x, "ln_bwd x", __FILE__, __LINE__);
        trc_check_aligned(gamma, "ln_bwd gamma", __FILE__, __LINE__);
        trc_check_aligned(g, "ln_bwd g", __FILE__, __LINE__);
        if (g16)
            trc_check_aligned(g16, "ln_bwd g16", __FILE__, __LINE__);
    }
    emu::fused_head();
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++) {
            lnb_ref::ln_bwd_row<ROWS, COLS, HIDDEN>(r, dy, x, rs, vs, gamma, eps, g);
            for (int j = 0; g16 && j < COLS; j++)
                put(&g16[(size_t)r * COLS + j], g[(size_t)r * COLS + j]);
        }
        lnb_ref::dgamma_dbeta<ROWS, COLS, HIDDEN>(dy, x, rs, vs, eps, dgamma, dbeta);
    });
}

template <int NSEQ, int SEQ, int HEADS, int HD, typename T>
void attention_bwd(tr_ctx *c, cudaStream_t s, const float *qkv, const float *dout, float *dqkv, float *scores,
                   T *probs, T *qkvh, T *douth)
{
    (void)c;
    push(stream_of(s), [=] {
        constexpr int CQ = HEADS * HD, LD = 3 * CQ, ROWS = HEADS * SEQ;
        constexpr long long SS = (long long)SEQ * SEQ;
        const T *x = nullptr, *go = nullptr;
        if constexpr (std::is_same_v<T, float>) {
            x = qkv;
            go = dout;
        } else {
            for (long long i = 0; i < (long long)NSEQ * SEQ * LD; i++)
                qkvh[i] = tr_f32_to_bf16(qkv[i]);
            for (long long i = 0; i < (long long)NSEQ * SEQ * CQ; i++)
                douth[i] = tr_f32_to_bf16(dout[i]);
            x = qkvh;
            go = douth;
        }
        const float scale = 1.0f / sqrtf((float)HD);
        for (int n = 0; n < NSEQ; n++) {
            const T *q = x + (size_t)n * SEQ * LD, *k = q + CQ, *v = q + 2 * CQ, *g = go + (size_t)n * SEQ * CQ;
            const T *P = probs;
            float *dq = dqkv + (size_t)n * SEQ * LD;
            gemm_batched_ref(0, 1, SEQ, SEQ, HD, 1.0f, q, LD, HD, k, LD, HD, scores, SEQ, SS, HEADS);
            softmax_ref(ROWS, SEQ, scores, probs, scale);
            gemm_batched_ref(1, 0, SEQ, HD, SEQ, 1.0f, P, SEQ, SS, g, CQ, HD, dq + 2 * CQ, LD, HD, HEADS);
            gemm_batched_ref(0, 1, SEQ, SEQ, HD, 1.0f, g, CQ, HD, v, LD, HD, scores, SEQ, SS, HEADS);
            softmax_bwd_ref(ROWS, SEQ, scores, probs);
            gemm_batched_ref(0, 0, SEQ, HD, SEQ, scale, P, SEQ, SS, k, LD, HD, dq, LD, HD, HEADS);
            gemm_batched_ref(1, 0, SEQ, HD, SEQ, scale, P, SEQ, SS, q, LD, HD, dq + CQ, LD, HD, HEADS);
        }
    });
}

/* ---- the language model (trk_lm.cuh) ---- */

template <int ROWS, int COLS, int NVALID>
void embed_rows(cudaStream_t s, const int32_t *tok, int v0, const float *E, float *out)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++) {
            int id = tok[r] - v0;
            for (int k = 0; k < COLS; k++)
                out[(size_t)r * COLS + k] = (id >= 0 && id < NVALID) ? E[(size_t)id * COLS + k] : 0.0f;
        }
    });
}

template <int ROWS, int COLS, int SEQ>
void pos_add(cudaStream_t s, float *x, const float *wpe)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++)
            for (int k = 0; k < COLS; k++)
                x[(size_t)r * COLS + k] += wpe[(size_t)(r % SEQ) * COLS + k];
    });
}

template <int ROWS, int COLS, int NVALID>
void lm_rowmax(cudaStream_t s, const float *L, float *mx)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++) {
            float m = -INFINITY;
            for (int k = 0; k < NVALID; k++)
                m = L[(size_t)r * COLS + k] > m ? L[(size_t)r * COLS + k] : m;
            mx[r] = m;
        }
    });
}

template <int ROWS, int COLS, int NVALID>
void lm_sums(cudaStream_t s, const float *L, const float *mx, const int32_t *tgt, int v0, float *sums)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++) {
            const float *l = L + (size_t)r * COLS;
            float lane[32]; /* k_lm_sums: lane l adds k = l, l+32, ... Kahan-compensated, then the xor tree */
            for (int ln = 0; ln < 32; ln++) {
                float e = 0.0f, comp = 0.0f;
                for (int k = ln; k < NVALID; k += 32) {
                    const float y = std::exp(l[k] - mx[r]) - comp, t = e + y;
                    comp = (t - e) - y;
                    e = t;
                }
                lane[ln] = e;
            }
            for (int o = 16; o > 0; o /= 2) {
                float nx[32];
                for (int ln = 0; ln < 32; ln++)
                    nx[ln] = lane[ln] + lane[ln ^ o];
                for (int ln = 0; ln < 32; ln++)
                    lane[ln] = nx[ln];
            }
            sums[r] = lane[0];
            int t = tgt[r] - v0;
            sums[ROWS + r] = (t >= 0 && t < NVALID) ? l[t] : 0.0f;
        }
    });
}

template <int ROWS>
void lm_loss(cudaStream_t s, const float *mx, const float *sums, float *loss)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++)
            loss[r] = (std::log(sums[r]) + mx[r]) - sums[ROWS + r];
    });
}

template <int ROWS, int COLS, int NVALID>
void lm_dlogits(cudaStream_t s, const float *L, const float *mx, const float *sums, const int32_t *tgt, int v0,
                float scale, float *dl)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++)
            for (int k = 0; k < COLS; k++) {
                size_t e = (size_t)r * COLS + k;
                float d = 0.0f;
                if (k < NVALID) {
                    d = std::exp(L[e] - mx[r]) * (scale / sums[r]);
                    if (k == tgt[r] - v0)
                        d -= scale;
                }
                dl[e] = d;
            }
    });
}

template <int ROWS, int COLS, int NVALID>
void embed_bwd(cudaStream_t s, const int32_t *tok, const float *g, int v0, float *dE, long long zero)
{
    push(stream_of(s), [=] {
        for (long long e = 0; e < zero; e++) /* the cudaMemsetAsync before the kernel */
            dE[e] = 0.0f;
        for (int r = 0; r < ROWS; r++) { /* token order, as each CUDA thread adds into the elements it owns */
            int id = tok[r] - v0;
            if (id < 0 || id >= NVALID)
                continue;
            for (int k = 0; k < COLS; k++)
                dE[(size_t)id * COLS + k] += g[(size_t)r * COLS + k];
        }
    });
}

template <int ROWS, int COLS, int SEQ, int NPOS>
void pos_bwd(cudaStream_t s, const float *g, float *dwpe)
{
    push(stream_of(s), [=] {
        for (int p = 0; p < NPOS; p++)
            for (int k = 0; k < COLS; k++) {
                float a = 0.0f;
                for (int r = p; p < SEQ && r < ROWS; r += SEQ)
                    a += g[(size_t)r * COLS + k];
                dwpe[(size_t)p * COLS + k] = a;
            }
    });
}

/* ---- trk_gen.cuh: text generation (docs/GENERATE.md), as trk_gen_kernels.cuh computes it ----------------------- */

template <int ROWS, int COLS>
void pos_add_at(cudaStream_t s, float *x, const float *wpe, const int32_t *pos)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++)
            for (int k = 0; k < COLS; k++)
                x[(size_t)r * COLS + k] += wpe[(size_t)pos[r] * COLS + k];
    });
}

/* a cache of type KV: float, or tr_bf16 in a bf16 plan (rounded to nearest even, as the kernel's __float2bfloat16_rn) */
static inline void gen_store(float *p, float v)
{
    *p = v;
}
static inline void gen_store(tr_bf16 *p, float v)
{
    *p = tr_f32_to_bf16(v);
}
static inline float gen_load(const float *p)
{
    return *p;
}
static inline float gen_load(const tr_bf16 *p)
{
    return tr_bf16_to_f32(*p);
}
template <typename KV> static inline float gen_as(float x) /* x as the cache holds it */
{
    KV k;
    gen_store(&k, x);
    return gen_load(&k);
}

template <int NSEQ, int SEQ, int COLS, int CONTEXT, typename KV>
void kv_write(cudaStream_t s, const float *qkv, KV *kv)
{
    push(stream_of(s), [=] {
        for (int q = 0; q < NSEQ; q++)
            for (int p = 0; p < SEQ; p++)
                for (int k = 0; k < 2 * COLS; k++)
                    gen_store(kv + ((size_t)q * CONTEXT + p) * 2 * COLS + k,
                              qkv[((size_t)q * SEQ + p) * 3 * COLS + COLS + k]);
    });
}

/* the kernel's order: a position's dot product as 32 lanes' strided partials and the xor tree; the softmax sum as 256
 * threads' strided partials, each warp's xor tree, then the 8 warps in order; the weighted sum of V in position order */
template <int NSEQ, int HEADS, int HDIM, int CONTEXT, typename KV>
void attn_decode(cudaStream_t s, float *qkv, const float *bias, KV *out, KV *kv, const int32_t *pos)
{
    push(stream_of(s), [=] {
        constexpr int C = HEADS * HDIM, W = 32, T = 256;
        std::vector<float> sc(CONTEXT), q(HDIM), lane(W), part(T);
        const float scale = 1.0f / std::sqrt((float)HDIM);
        auto tree = [&](std::vector<float> &a, int base) { /* __shfl_xor_sync sums: every lane ends with the same */
            for (int o = W / 2; o > 0; o /= 2) {
                std::vector<float> b(a.begin() + base, a.begin() + base + W);
                for (int l = 0; l < W; l++)
                    a[base + l] = b[l] + b[l ^ o];
            }
            return a[base];
        };
        for (int sq = 0; sq < NSEQ; sq++)
            for (int h = 0; h < HEADS; h++) {
                const int at = pos[sq], n = at + 1;
                float *row = qkv + (size_t)sq * 3 * C;
                KV *cache = kv + (size_t)sq * CONTEXT * 2 * C;
                for (int d = 0; d < HDIM; d++) {
                    const int cq = h * HDIM + d, ck = C + cq, cv = 2 * C + cq;
                    row[cq] = gen_as<KV>(row[cq] + bias[cq]);
                    row[ck] = gen_as<KV>(row[ck] + bias[ck]);
                    row[cv] = gen_as<KV>(row[cv] + bias[cv]);
                    q[d] = row[cq];
                    gen_store(cache + (size_t)at * 2 * C + cq, row[ck]);
                    gen_store(cache + (size_t)at * 2 * C + C + cq, row[cv]);
                }
                for (int p = 0; p < n; p++) {
                    const KV *kr = cache + (size_t)p * 2 * C + h * HDIM;
                    for (int l = 0; l < W; l++) {
                        float a = 0.0f;
                        for (int d = l; d < HDIM; d += W)
                            a += q[d] * gen_load(kr + d);
                        lane[l] = a;
                    }
                    sc[p] = scale * tree(lane, 0);
                }
                float m = -INFINITY;
                for (int p = 0; p < n; p++)
                    m = sc[p] > m ? sc[p] : m;
                for (int t = 0; t < T; t++) {
                    float z = 0.0f;
                    for (int p = t; p < n; p += T) {
                        sc[p] = std::exp(sc[p] - m);
                        z += sc[p];
                    }
                    part[t] = z;
                }
                float z = 0.0f;
                for (int w = 0; w < T / W; w++)
                    z += tree(part, w * W);
                const float inv = 1.0f / z;
                for (int d = 0; d < HDIM; d++) {
                    float a = 0.0f;
                    for (int p = 0; p < n; p++)
                        a += gen_as<KV>(sc[p] * inv) * gen_load(cache + (size_t)p * 2 * C + C + h * HDIM + d);
                    gen_store(out + (size_t)sq * C + h * HDIM + d, a);
                }
            }
    });
}

template <int ROWS, int COLS, int NVALID>
void lm_argmax(cudaStream_t s, const float *L, int v0, float *pairs)
{
    push(stream_of(s), [=] {
        for (int r = 0; r < ROWS; r++) {
            const float *l = L + (size_t)r * COLS;
            float best = -INFINITY;
            int32_t id = INT32_MAX;
            for (int k = 0; k < NVALID; k++) /* ascending, strictly greater: the lowest id of a tie */
                if (id == INT32_MAX || l[k] > best) {
                    best = l[k];
                    id = v0 + k;
                }
            pairs[2 * r] = best;
            memcpy(&pairs[2 * r + 1], &id, sizeof id);
        }
    });
}

/* the instances kernels.cu has: extracted from it by tests/cuda/emu_build.sh */
#include "instances.inc"

} // namespace trk
