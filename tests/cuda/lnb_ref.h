/*
 * lnb_ref.h - the column sums and layernorm backward of the CUDA backend (templates/kernels_colsum.cu.in,
 * kernels_layernorm.cu.in) as host loops that do the kernels' float operations in the kernels' order, so
 * that their results are the kernels' bits: the CUDA emulation runs them (tests/cuda/emu.cc), and the
 * standalone GPU check (tests/cuda/lnb_check.cu) compares the kernels with them bit for bit. ln_bwd_row is the
 * fused row kernel (trk::ln_bwd, whole rows): the same row_sums and row_apply, one row after the other.
 *
 * The orders: column sums per runtime/cuda/trk_cols.h (per chunk of rows, slice s of a column adds rows
 * r0 + s, r0 + s + 8, ... ascending, the slices added in slice order; then the chunks' partials in chunk
 * order); a layernorm row as one warp, lane l taking elements 4v..4v+3 for v = l, l + 32, ... (elements l,
 * l + 32, ... when COLS % 4 != 0), then __shfl_xor_sync's tree. Products: std::fma where the kernels have
 * fmaf, a plain product where they have __fmul_rn or a product no add follows. Host code only, C++17.
 */
#ifndef TESS_LNB_REF_H
#define TESS_LNB_REF_H

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "trk_cols.h"

namespace lnb_ref {

/* NV sums per column: row(r) gives what the term needs of row r, add(rowv, r, col, acc) adds row r of col */
template <int ROWS, int COLS, int NV, class ROW, class ADD>
void col_sums(ROW row, ADD add, float *out0, float *out1)
{
    constexpr int CH = trk_col_chunk_rows(ROWS, COLS), NCH = trk_col_chunks(ROWS, COLS);
    std::vector<float> part((size_t)NCH * NV * COLS);
    std::vector<decltype(row(0))> rowv(ROWS);
    for (int r = 0; r < ROWS; r++)
        rowv[r] = row(r);
    for (int c = 0; c < NCH; c++) {
        const int r0 = c * CH, r1 = std::min(ROWS, r0 + CH);
        for (int col = 0; col < COLS; col++) {
            float red[NV][TRK_COL_SLICES];
            for (int sl = 0; sl < TRK_COL_SLICES; sl++) {
                float acc[NV];
                for (int v = 0; v < NV; v++)
                    acc[v] = 0.0f;
                for (int r = r0 + sl; r < r1; r += TRK_COL_SLICES)
                    add(rowv[r], r, col, acc);
                for (int v = 0; v < NV; v++)
                    red[v][sl] = acc[v];
            }
            for (int v = 0; v < NV; v++) {
                float s = red[v][0];
                for (int k = 1; k < TRK_COL_SLICES; k++)
                    s += red[v][k];
                part[((size_t)c * NV + v) * COLS + col] = s;
            }
        }
    }
    for (int v = 0; v < NV; v++)
        for (int col = 0; col < COLS; col++) {
            float s = part[(size_t)v * COLS + col];
            for (int c = 1; c < NCH; c++)
                s += part[((size_t)c * NV + v) * COLS + col];
            (v == 0 ? out0 : out1)[col] = s;
        }
}

/* db[COLS] = column sums of dy[ROWS, COLS] */
template <int ROWS, int COLS>
void colsum(const float *dy, float *db)
{
    col_sums<ROWS, COLS, 1>([](int) { return 0; },
                            [=](int, int r, int col, float *acc) { acc[0] += dy[(size_t)r * COLS + col]; }, db,
                            nullptr);
}

struct row_stats {
    float mean, rstd;
};

template <int HIDDEN>
row_stats stats(float rs, float vs, float eps)
{
    return row_stats{rs / (float)HIDDEN, 1.0f / std::sqrt(vs / (float)HIDDEN + eps)};
}

/* the lane of a row's warp that handles element j */
template <int COLS>
int lane_of(int j)
{
    return COLS % 4 == 0 ? (j / 4) % 32 : j % 32;
}

/* __shfl_xor_sync's sum tree over the 32 lanes' values (every lane ends with the same) */
inline float xor_tree(float *v)
{
    for (int o = 16; o > 0; o /= 2) {
        float n[32];
        for (int l = 0; l < 32; l++)
            n[l] = v[l] + v[l ^ o];
        std::copy(n, n + 32, v);
    }
    return v[0];
}

/* s1, s2 of row r as k_ln_bwd_rows (and k_ln_bwd) sum them */
template <int ROWS, int COLS, int HIDDEN>
void row_sums(int r, const float *dy, const float *x, const float *rs, const float *vs, const float *gamma, float eps,
              float &s1, float &s2)
{
    const row_stats st = stats<HIDDEN>(rs[r], vs[r], eps);
    float l1[32] = {}, l2[32] = {};
    for (int j = 0; j < COLS; j++) { /* each lane's elements ascending: the kernel's order */
        const size_t e = (size_t)r * COLS + j;
        const int l = lane_of<COLS>(j);
        const float xhat = (x[e] - st.mean) * st.rstd, dxhat = dy[e] * gamma[j];
        l1[l] += dxhat;
        l2[l] = std::fma(dxhat, xhat, l2[l]);
    }
    s1 = xor_tree(l1);
    s2 = xor_tree(l2);
}

/* g += dx of row r from its sums s1, s2 as k_ln_bwd_apply (and k_ln_bwd) compute it */
template <int ROWS, int COLS, int HIDDEN>
void row_apply(int r, const float *dy, const float *x, const float *rs, const float *vs, const float *gamma, float s1,
               float s2, float eps, float *g)
{
    const float inv_n = 1.0f / (float)HIDDEN;
    const row_stats st = stats<HIDDEN>(rs[r], vs[r], eps);
    const float m1 = s1 * inv_n, m2 = s2 * inv_n;
    for (int j = 0; j < COLS; j++) {
        const size_t e = (size_t)r * COLS + j;
        const float xhat = (x[e] - st.mean) * st.rstd, dxhat = dy[e] * gamma[j];
        g[e] = std::fma(st.rstd, std::fma(-xhat, m2, dxhat - m1), g[e]);
    }
}

/* dgamma = sum_r dy xhat, dbeta = sum_r dy: the column kernel of ln_bwd_sums and ln_bwd */
template <int ROWS, int COLS, int HIDDEN>
void dgamma_dbeta(const float *dy, const float *x, const float *rs, const float *vs, float eps, float *dgamma,
                  float *dbeta)
{
    col_sums<ROWS, COLS, 2>([=](int r) { return stats<HIDDEN>(rs[r], vs[r], eps); },
                            [=](const row_stats &st, int r, int col, float *acc) {
                                const size_t e = (size_t)r * COLS + col;
                                const float d = dy[e], xhat = (x[e] - st.mean) * st.rstd;
                                acc[0] = std::fma(d, xhat, acc[0]);
                                acc[1] += d;
                            },
                            dgamma, dbeta);
}

template <int ROWS, int COLS, int HIDDEN>
void ln_bwd_sums(const float *dy, const float *x, const float *rs, const float *vs, const float *gamma, float eps,
                 float *sums, float *dgamma, float *dbeta)
{
    for (int r = 0; r < ROWS; r++)
        row_sums<ROWS, COLS, HIDDEN>(r, dy, x, rs, vs, gamma, eps, sums[r], sums[ROWS + r]);
    dgamma_dbeta<ROWS, COLS, HIDDEN>(dy, x, rs, vs, eps, dgamma, dbeta);
}

template <int ROWS, int COLS, int HIDDEN>
void ln_bwd_apply(const float *dy, const float *x, const float *rs, const float *vs, const float *gamma,
                  const float *sums, float eps, float *g)
{
    for (int r = 0; r < ROWS; r++)
        row_apply<ROWS, COLS, HIDDEN>(r, dy, x, rs, vs, gamma, sums[r], sums[ROWS + r], eps, g);
}

/* k_ln_bwd, the row kernel of the two steps (whole rows): row r's s1, s2, then its g += dx, the sums never stored.
 * Called row by row, a row's g written before the next row is read (an output over a later row's input would show);
 * ln_bwd then runs dgamma_dbeta after the rows, as the kernels run. */
template <int ROWS, int COLS, int HIDDEN>
void ln_bwd_row(int r, const float *dy, const float *x, const float *rs, const float *vs, const float *gamma, float eps,
                float *g)
{
    static_assert(COLS == HIDDEN, "the row kernel takes whole rows");
    float s1, s2;
    row_sums<ROWS, COLS, HIDDEN>(r, dy, x, rs, vs, gamma, eps, s1, s2);
    row_apply<ROWS, COLS, HIDDEN>(r, dy, x, rs, vs, gamma, s1, s2, eps, g);
}

} // namespace lnb_ref

#endif
