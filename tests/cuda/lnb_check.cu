/*
 * lnb_check.cu - the column sums and layernorm backward on a GPU, outside any schedule
 * (templates/kernels_colsum.cu.in, kernels_layernorm.cu.in; docs/CUDA.md): built by tests/cuda/lnb_check.sh,
 * which fills both templates into OUT/kernels_lnb.cu; this file includes it and calls trk::colsum,
 * trk::ln_bwd_sums, trk::ln_bwd_apply and trk::ln_bwd (the two as one row kernel, whole rows) at the shapes below,
 * on random inputs.
 *
 *   bits       every output (s1, s2, dgamma, dbeta, dx, bias gradient) bit for bit what tests/cuda/lnb_ref.h
 *              computes on the host: the emulation's arithmetic is the kernels' (a difference here means the
 *              emulation no longer checks what runs on a GPU, or the compiler contracted a product)
 *   reference  the same outputs within a relative norm of 1e-5 of a double reference (the textbook formulas,
 *              sums in double)
 *   repeat     a second run gives the same bits (the fixed order: no atomics, no dependence on scheduling)
 *   bf16 copy  ln_bwd_apply writing bf16 training's copy of g too (g16): g the same bits, g16 bit for bit g rounded
 *              to nearest even (what a cast step after it wrote before)
 *   fused      ln_bwd (gen/fuse.c's row kernel, whole rows) against ln_bwd_sums + ln_bwd_apply on the same inputs:
 *              g, g16, dgamma and dbeta bit for bit theirs, g without g16 the same, and bit for bit lnb_ref.h's
 *              ln_bwd_row and dgamma_dbeta; dx within 1e-5 of the double reference. Rows of 64, 768 and 1024
 *              (xhat, dxhat held in registers: 1024 is the bound), 1600 and 2048 (read again), 30 (scalar)
 *   shapes     GPT-2 small's [8192, 768] (many chunks), a FFN bias [8192, 3072], [1000, 100] (a partial tile and
 *              a partial last chunk), [37, 30] of a 60-wide row (one chunk, the scalar paths), [64, 64]
 *   bench      (lnb_check bench) ln_bwd_sums + ln_bwd_apply and colsum at [8192, 768] and colsum at [8192, 3072];
 *              the fused ln_bwd against the two at [8192, 768] (GPT-2 small) and [8192, 1600] (GPT-2 XL: rows read
 *              again): microseconds a call (CUDA events, 200 calls after 20) and GB/s of the bytes they must move
 *
 * Prints "lnb_check: N failures" and exits 1 on any.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels_lnb.cu"
#include "lnb_ref.h"

#include "check_common.cuh"

static float *up(const std::vector<float> &h)
{
    float *d = nullptr;
    CK(cudaMalloc(&d, h.size() * sizeof(float)));
    CK(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static std::vector<float> down(const float *d, size_t n)
{
    std::vector<float> h(n);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

static void bits(const char *what, const std::vector<float> &got, const std::vector<float> &want)
{
    for (size_t i = 0; i < want.size(); i++)
        if (memcmp(&got[i], &want[i], sizeof(float))) {
            if (failures++ < 20)
                fprintf(stderr, "lnb_check: %s: element %zu is %.9g, the emulation's arithmetic gives %.9g\n", what,
                        i, got[i], want[i]);
            return;
        }
}

static void near(const char *what, const std::vector<float> &got, const std::vector<double> &want, double tol)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); i++) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    const double rel = sqrt(num / (den > 0 ? den : 1));
    if (!(rel <= tol) && failures++ < 20)
        fprintf(stderr, "lnb_check: %s: relative norm of the error %.3g, tolerance %.1g\n", what, rel, tol);
}

/* the forward's statistics of rows of HIDDEN of which COLS are here: rs, vs as the forward kernels leave them */
template <int ROWS, int COLS, int HIDDEN>
static void stats(const std::vector<float> &x, std::vector<float> &rs, std::vector<float> &vs)
{
    rs.assign(ROWS, 0.0f);
    vs.assign(ROWS, 0.0f);
    for (int r = 0; r < ROWS; r++) {
        double s = 0, q = 0;
        for (int j = 0; j < COLS; j++)
            s += x[(size_t)r * COLS + j];
        const double mean = s * HIDDEN / COLS / HIDDEN; /* this rank's columns stand for the row */
        for (int j = 0; j < COLS; j++)
            q += (x[(size_t)r * COLS + j] - mean) * (x[(size_t)r * COLS + j] - mean);
        rs[r] = (float)(s * HIDDEN / COLS);
        vs[r] = (float)(q * HIDDEN / COLS);
    }
}

template <int ROWS, int COLS>
static void check_colsum(cudaStream_t s, bool bench)
{
    const std::vector<float> dy = rnd((size_t)ROWS * COLS, -1.0f, 1.0f);
    float *d_dy = up(dy), *d_db = up(std::vector<float>(COLS, NAN));
    trk::colsum<ROWS, COLS>(s, d_dy, d_db);
    const std::vector<float> got = down(d_db, COLS);
    std::vector<float> want(COLS);
    lnb_ref::colsum<ROWS, COLS>(dy.data(), want.data());
    std::vector<double> ref(COLS, 0.0);
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < COLS; j++)
            ref[j] += dy[(size_t)r * COLS + j];
    char what[96];
    snprintf(what, sizeof what, "colsum<%d, %d>", ROWS, COLS);
    bits(what, got, want);
    near(what, got, ref, 1e-5);
    trk::colsum<ROWS, COLS>(s, d_dy, d_db);
    bits(what, down(d_db, COLS), got);
    if (bench) {
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        for (int i = 0; i < 20; i++)
            trk::colsum<ROWS, COLS>(s, d_dy, d_db);
        CK(cudaEventRecord(a, s));
        for (int i = 0; i < 200; i++)
            trk::colsum<ROWS, COLS>(s, d_dy, d_db);
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        const double us = ms * 1e3 / 200, bytes = 4.0 * ((double)ROWS * COLS + COLS);
        printf("lnb_check bench: colsum<%d, %d>: %.1f us, %.0f GB/s\n", ROWS, COLS, us, bytes / us * 1e-3);
    }
    CK(cudaFree(d_dy));
    CK(cudaFree(d_db));
}

template <int ROWS, int COLS, int HIDDEN>
static void check_ln(cudaStream_t s, bool bench)
{
    const size_t n = (size_t)ROWS * COLS;
    const float eps = 1e-5f;
    const std::vector<float> x = rnd(n, -2.0f, 3.0f), dy = rnd(n, -1.0f, 1.0f), gamma = rnd(COLS, 0.5f, 1.5f);
    const std::vector<float> g0 = rnd(n, -0.5f, 0.5f); /* what dx is added to (the residual's gradient) */
    std::vector<float> rs, vs;
    stats<ROWS, COLS, HIDDEN>(x, rs, vs);
    float *d_x = up(x), *d_dy = up(dy), *d_gamma = up(gamma), *d_rs = up(rs), *d_vs = up(vs), *d_g = up(g0);
    float *d_sums = up(std::vector<float>(2 * ROWS, NAN)), *d_dgamma = up(std::vector<float>(COLS, NAN));
    float *d_dbeta = up(std::vector<float>(COLS, NAN));
    trk::ln_bwd_sums<ROWS, COLS, HIDDEN>(s, d_dy, d_x, d_rs, d_vs, d_gamma, eps, d_sums, d_dgamma, d_dbeta);
    trk::ln_bwd_apply<ROWS, COLS, HIDDEN>(s, d_dy, d_x, d_rs, d_vs, d_gamma, d_sums, eps, d_g, nullptr);
    const std::vector<float> sums = down(d_sums, 2 * ROWS), dgamma = down(d_dgamma, COLS),
                             dbeta = down(d_dbeta, COLS), g = down(d_g, n);

    /* the emulation's arithmetic: the same bits */
    std::vector<float> e_sums(2 * ROWS), e_dgamma(COLS), e_dbeta(COLS), e_g = g0;
    lnb_ref::ln_bwd_sums<ROWS, COLS, HIDDEN>(dy.data(), x.data(), rs.data(), vs.data(), gamma.data(), eps,
                                             e_sums.data(), e_dgamma.data(), e_dbeta.data());
    lnb_ref::ln_bwd_apply<ROWS, COLS, HIDDEN>(dy.data(), x.data(), rs.data(), vs.data(), gamma.data(), e_sums.data(),
                                              eps, e_g.data());
    /* bf16 training's copy of g for the next op's GEMMs (g16): the same g, and g16 bit for bit its rounding */
    {
        float *d_g2 = up(g0);
        tr_bf16 *d_g16 = nullptr;
        CK(cudaMalloc((void **)&d_g16, n * sizeof(tr_bf16)));
        trk::ln_bwd_apply<ROWS, COLS, HIDDEN>(s, d_dy, d_x, d_rs, d_vs, d_gamma, d_sums, eps, d_g2, d_g16);
        std::vector<tr_bf16> g16(n);
        CK(cudaMemcpy(g16.data(), d_g16, n * sizeof(tr_bf16), cudaMemcpyDeviceToHost));
        std::vector<float> g16w(n), rne(n);
        for (size_t e = 0; e < n; e++) {
            g16w[e] = tr_bf16_to_f32(g16[e]);
            rne[e] = tr_bf16_to_f32(tr_f32_to_bf16(g[e]));
        }
        char w16[128];
        snprintf(w16, sizeof w16, "ln_bwd_apply<%d, %d, %d> with the bf16 copy: g", ROWS, COLS, HIDDEN);
        bits(w16, down(d_g2, n), g);
        snprintf(w16, sizeof w16, "ln_bwd_apply<%d, %d, %d> with the bf16 copy: the copy is g rounded", ROWS, COLS,
                 HIDDEN);
        bits(w16, g16w, rne);
        CK(cudaFree(d_g2));
        CK(cudaFree(d_g16));
    }
    char what[128];
    const char *names[5] = {"s1, s2", "dgamma", "dbeta", "dx", "repeat"};
    const std::vector<float> *got[4] = {&sums, &dgamma, &dbeta, &g}, *want[4] = {&e_sums, &e_dgamma, &e_dbeta, &e_g};
    for (int k = 0; k < 4; k++) {
        snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> %s", ROWS, COLS, HIDDEN, names[k]);
        bits(what, *got[k], *want[k]);
    }

    /* a double reference: the textbook formulas, the statistics from rs, vs */
    std::vector<double> r_sums(2 * ROWS), r_dgamma(COLS, 0.0), r_dbeta(COLS, 0.0), r_g(n);
    for (int r = 0; r < ROWS; r++) {
        const double mean = (double)rs[r] / HIDDEN, rstd = 1.0 / sqrt((double)vs[r] / HIDDEN + eps);
        double s1 = 0, s2 = 0;
        for (int j = 0; j < COLS; j++) {
            const size_t e = (size_t)r * COLS + j;
            const double xhat = (x[e] - mean) * rstd, dxhat = (double)dy[e] * gamma[j];
            s1 += dxhat;
            s2 += dxhat * xhat;
            r_dgamma[j] += dy[e] * xhat;
            r_dbeta[j] += dy[e];
        }
        r_sums[r] = s1;
        r_sums[ROWS + r] = s2;
        for (int j = 0; j < COLS; j++) {
            const size_t e = (size_t)r * COLS + j;
            const double xhat = (x[e] - mean) * rstd, dxhat = (double)dy[e] * gamma[j];
            r_g[e] = g0[e] + rstd * (dxhat - s1 / HIDDEN - xhat * s2 / HIDDEN);
        }
    }
    const std::vector<double> *ref[4] = {&r_sums, &r_dgamma, &r_dbeta, &r_g};
    for (int k = 0; k < 4; k++) {
        snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> %s vs double", ROWS, COLS, HIDDEN, names[k]);
        near(what, *got[k], *ref[k], 1e-5);
    }

    /* again: the same bits */
    trk::ln_bwd_sums<ROWS, COLS, HIDDEN>(s, d_dy, d_x, d_rs, d_vs, d_gamma, eps, d_sums, d_dgamma, d_dbeta);
    snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> %s", ROWS, COLS, HIDDEN, names[4]);
    bits(what, down(d_dgamma, COLS), dgamma);
    bits(what, down(d_dbeta, COLS), dbeta);
    bits(what, down(d_sums, 2 * ROWS), sums);

    if (bench) {
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        for (int i = 0; i < 20; i++) {
            trk::ln_bwd_sums<ROWS, COLS, HIDDEN>(s, d_dy, d_x, d_rs, d_vs, d_gamma, eps, d_sums, d_dgamma, d_dbeta);
            trk::ln_bwd_apply<ROWS, COLS, HIDDEN>(s, d_dy, d_x, d_rs, d_vs, d_gamma, d_sums, eps, d_g, nullptr);
        }
        CK(cudaEventRecord(a, s));
        for (int i = 0; i < 200; i++) {
            trk::ln_bwd_sums<ROWS, COLS, HIDDEN>(s, d_dy, d_x, d_rs, d_vs, d_gamma, eps, d_sums, d_dgamma, d_dbeta);
            trk::ln_bwd_apply<ROWS, COLS, HIDDEN>(s, d_dy, d_x, d_rs, d_vs, d_gamma, d_sums, eps, d_g, nullptr);
        }
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        /* must move: dy, x read by the sums and again by dx; g read and written; rs, vs, gamma, s1, s2, outputs */
        const double us = ms * 1e3 / 200, bytes = 4.0 * (6.0 * n + 8.0 * ROWS + 4.0 * COLS);
        printf("lnb_check bench: ln_bwd_sums + ln_bwd_apply<%d, %d, %d>: %.1f us, %.0f GB/s\n", ROWS, COLS, HIDDEN, us,
               bytes / us * 1e-3);
    }
    for (float *p : {d_x, d_dy, d_gamma, d_rs, d_vs, d_g, d_sums, d_dgamma, d_dbeta})
        CK(cudaFree(p));
}

/* the fused row kernel (whole rows, COLS == HIDDEN) against the two kernels it replaces and the host reference */
template <int ROWS, int COLS>
static void check_fused(cudaStream_t s, bool bench)
{
    const size_t n = (size_t)ROWS * COLS;
    const float eps = 1e-5f;
    const std::vector<float> x = rnd(n, -2.0f, 3.0f), dy = rnd(n, -1.0f, 1.0f), gamma = rnd(COLS, 0.5f, 1.5f);
    const std::vector<float> g0 = rnd(n, -0.5f, 0.5f);
    std::vector<float> rs, vs;
    stats<ROWS, COLS, COLS>(x, rs, vs);
    float *d_x = up(x), *d_dy = up(dy), *d_gamma = up(gamma), *d_rs = up(rs), *d_vs = up(vs);
    float *d_ga = up(g0), *d_gb = up(g0), *d_gc = up(g0), *d_sums = up(std::vector<float>(2 * ROWS, NAN));
    float *d_dga = up(std::vector<float>(COLS, NAN)), *d_dba = up(std::vector<float>(COLS, NAN));
    float *d_dgb = up(std::vector<float>(COLS, NAN)), *d_dbb = up(std::vector<float>(COLS, NAN));
    tr_bf16 *d_g16a = nullptr, *d_g16b = nullptr;
    CK(cudaMalloc((void **)&d_g16a, n * sizeof(tr_bf16)));
    CK(cudaMalloc((void **)&d_g16b, n * sizeof(tr_bf16)));
    /* the two steps' kernels, then the row kernel, with the bf16 copy; the row kernel again without it */
    trk::ln_bwd_sums<ROWS, COLS, COLS>(s, d_dy, d_x, d_rs, d_vs, d_gamma, eps, d_sums, d_dga, d_dba);
    trk::ln_bwd_apply<ROWS, COLS, COLS>(s, d_dy, d_x, d_rs, d_vs, d_gamma, d_sums, eps, d_ga, d_g16a);
    trk::ln_bwd<ROWS, COLS, COLS>(s, d_dy, d_x, d_rs, d_vs, d_gamma, eps, d_dgb, d_dbb, d_gb, d_g16b);
    const std::vector<float> ga = down(d_ga, n), gb = down(d_gb, n), dga = down(d_dga, COLS), dgb = down(d_dgb, COLS),
                             dba = down(d_dba, COLS), dbb = down(d_dbb, COLS);
    std::vector<tr_bf16> g16a(n), g16b(n);
    CK(cudaMemcpy(g16a.data(), d_g16a, n * sizeof(tr_bf16), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(g16b.data(), d_g16b, n * sizeof(tr_bf16), cudaMemcpyDeviceToHost));
    std::vector<float> g16fa(n), g16fb(n);
    for (size_t e = 0; e < n; e++) {
        g16fa[e] = tr_bf16_to_f32(g16a[e]);
        g16fb[e] = tr_bf16_to_f32(g16b[e]);
    }
    trk::ln_bwd<ROWS, COLS, COLS>(s, d_dy, d_x, d_rs, d_vs, d_gamma, eps, d_dgb, d_dbb, d_gc, nullptr);
    char what[128];
    snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> against the two kernels: g", ROWS, COLS, COLS);
    bits(what, gb, ga);
    snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> against the two kernels: g16", ROWS, COLS, COLS);
    bits(what, g16fb, g16fa);
    snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> against the two kernels: dgamma", ROWS, COLS, COLS);
    bits(what, dgb, dga);
    snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> against the two kernels: dbeta", ROWS, COLS, COLS);
    bits(what, dbb, dba);
    snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> without the bf16 copy: g", ROWS, COLS, COLS);
    bits(what, down(d_gc, n), gb);

    /* the emulation's arithmetic (lnb_ref.h's ln_bwd_row, row after row, then dgamma_dbeta) */
    std::vector<float> e_g = g0, e_dg(COLS), e_db(COLS);
    for (int r = 0; r < ROWS; r++)
        lnb_ref::ln_bwd_row<ROWS, COLS, COLS>(r, dy.data(), x.data(), rs.data(), vs.data(), gamma.data(), eps,
                                              e_g.data());
    lnb_ref::dgamma_dbeta<ROWS, COLS, COLS>(dy.data(), x.data(), rs.data(), vs.data(), eps, e_dg.data(), e_db.data());
    snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> against lnb_ref.h: g", ROWS, COLS, COLS);
    bits(what, gb, e_g);
    snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> against lnb_ref.h: dgamma", ROWS, COLS, COLS);
    bits(what, dgb, e_dg);
    snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> against lnb_ref.h: dbeta", ROWS, COLS, COLS);
    bits(what, dbb, e_db);

    /* the double reference of dx: the textbook formula */
    std::vector<double> r_g(n);
    for (int r = 0; r < ROWS; r++) {
        const double mean = (double)rs[r] / COLS, rstd = 1.0 / sqrt((double)vs[r] / COLS + eps);
        double s1 = 0, s2 = 0;
        for (int j = 0; j < COLS; j++) {
            const size_t e = (size_t)r * COLS + j;
            const double xhat = (x[e] - mean) * rstd, dxhat = (double)dy[e] * gamma[j];
            s1 += dxhat;
            s2 += dxhat * xhat;
        }
        for (int j = 0; j < COLS; j++) {
            const size_t e = (size_t)r * COLS + j;
            const double xhat = (x[e] - mean) * rstd, dxhat = (double)dy[e] * gamma[j];
            r_g[e] = g0[e] + rstd * (dxhat - s1 / COLS - xhat * s2 / COLS);
        }
    }
    snprintf(what, sizeof what, "ln_bwd<%d, %d, %d> dx vs double", ROWS, COLS, COLS);
    near(what, gb, r_g, 1e-5);

    if (bench) {
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        float ms[2] = {0, 0};
        for (int f = 0; f < 2; f++) { /* f = 0: the two steps' kernels; 1: the row kernel */
            for (int i = 0; i < 220; i++) {
                if (i == 20)
                    CK(cudaEventRecord(a, s));
                if (f) {
                    trk::ln_bwd<ROWS, COLS, COLS>(s, d_dy, d_x, d_rs, d_vs, d_gamma, eps, d_dgb, d_dbb, d_gb, nullptr);
                } else {
                    trk::ln_bwd_sums<ROWS, COLS, COLS>(s, d_dy, d_x, d_rs, d_vs, d_gamma, eps, d_sums, d_dga, d_dba);
                    trk::ln_bwd_apply<ROWS, COLS, COLS>(s, d_dy, d_x, d_rs, d_vs, d_gamma, d_sums, eps, d_ga, nullptr);
                }
            }
            CK(cudaEventRecord(b, s));
            CK(cudaEventSynchronize(b));
            CK(cudaEventElapsedTime(&ms[f], a, b));
        }
        /* what the launches read and write: the two steps dy and x three times (their row kernels and the column
         * kernel), the sums written and read; the row kernel dy and x twice (itself and the column kernel); both read
         * and write g and read rs, vs, gamma and write dgamma, dbeta */
        const double us0 = ms[0] * 1e3 / 200, us1 = ms[1] * 1e3 / 200;
        const double by0 = 4.0 * (8.0 * n + 8.0 * ROWS + 4.0 * COLS), by1 = 4.0 * (6.0 * n + 2.0 * ROWS + 3.0 * COLS);
        printf("lnb_check bench: [%d, %d]: ln_bwd_sums + ln_bwd_apply %.1f us (%.0f GB/s), ln_bwd %.1f us (%.0f GB/s): "
               "%.2fx\n",
               ROWS, COLS, us0, by0 / us0 * 1e-3, us1, by1 / us1 * 1e-3, us0 / us1);
    }
    for (float *p : {d_x, d_dy, d_gamma, d_rs, d_vs, d_ga, d_gb, d_gc, d_sums, d_dga, d_dba, d_dgb, d_dbb})
        CK(cudaFree(p));
    CK(cudaFree(d_g16a));
    CK(cudaFree(d_g16b));
}

int main(int argc, char **argv)
{
    const bool bench = argc > 1 && !strcmp(argv[1], "bench");
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    check_colsum<64, 64>(s, false);
    check_colsum<1000, 100>(s, false);
    check_colsum<37, 30>(s, false);
    check_colsum<8192, 768>(s, bench);
    check_colsum<8192, 3072>(s, bench);
    check_ln<64, 64, 64>(s, false);
    check_ln<37, 30, 60>(s, false);
    check_ln<1000, 100, 200>(s, false);
    check_ln<8192, 768, 768>(s, bench);
    check_fused<64, 64>(s, false);
    check_fused<37, 30>(s, false);
    check_fused<300, 1024>(s, false);
    check_fused<300, 2048>(s, false);
    check_fused<8192, 768>(s, bench);
    check_fused<8192, 1600>(s, bench);
    CK(cudaStreamDestroy(s));
    printf("lnb_check: %d failures\n", failures);
    return failures ? 1 : 0;
}
