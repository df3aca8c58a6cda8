/*
 * rows_check.cu - the float row statistics and the vocabulary loss kernels on a GPU, outside any schedule
 * (docs/CUDA.md "FP64 and tensor cores in the kernels": these kernels were FP64 and are float now). Built by
 * tests/cuda/rows_check.sh, which fills templates/kernels_rows.cu.in into OUT/kernels_rows.cu; this file includes it
 * and runtime/cuda/trk_lm_kernels.cuh and calls trk::ln_rowsum, trk::ln_sqdev, trk::resid_rowsum_to, trk::resid_ln, trk::ln_rows (and
 * the resid_rowsum and ln_apply they replace), trk::lm_sums, trk::lm_loss and trk::lm_dlogits at the shapes below, on
 * random inputs, NaN-poisoned outputs.
 *
 *   residual   resid_rowsum_to's y = x + (p + bias) bit for bit the host's float sums, its row sums within 1e-6 of
 *              double (16-byte accesses where the row width is a multiple of 4, [8192, 768] and [37, 60], else the
 *              scalar path, [37, 30]); bench: microseconds and GB/s at [8192, 768]
 *   row kernel resid_ln (the residual add and the layernorm after it, gen/fuse.c) bit for bit the three kernels it
 *              replaces (xo, row sums, centred squares, y) and within 1e-6 (statistics), 1e-5 (y; bf16 4e-3) of
 *              double, in place and out of place, fp32 and bf16 output: [8192, 768], [64, 1600] (13 float4 a lane in
 *              registers), [64, 4096] (read back), [37, 60], [37, 30] (scalar); bench: the one kernel against the three
 *              at [8192, 768], microseconds and GB/s
 *   ln_rows    the same row kernel without the residual (the first ln1, ln_f) bit for bit ln_rowsum, ln_sqdev and
 *              ln_apply, x unchanged, y within 1e-5 of double (bf16 4e-3): [8192, 768] fp32 and bf16, [64, 4096],
 *              [37, 60], [37, 30]; bench: against the three at [8192, 768] bf16
 *   reference  against a double reference: row sums and centred squares within a relative norm of 1e-6 (inputs
 *              with a mean far from 0, where cancellation shows), the sums of exponentials and dlogits within
 *              1e-6, the per-row loss within 1e-6 of its magnitude; the target logit exact
 *   repeat     a second run gives the same bits
 *   shapes     GPT-2 small's rows [8192, 768] (the float4 path), a 60-wide row block [37, 60] and [37, 30] (the
 *              scalar path); the loss on [64, 50304] with 50257 real ids and on [37, 49] of 47 (pad columns),
 *              targets inside and outside the block
 *   bench      (rows_check bench) ln_rowsum + ln_sqdev at [8192, 768], lm_sums and lm_dlogits at [8192, 50304]:
 *              microseconds a call (CUDA events, 50 calls after 5) and GB/s of the bytes they must move
 *
 * Prints "rows_check: N failures" and exits 1 on any.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "kernels_rows.cu"
#include "trk_lm_kernels.cuh"

#include "check_common.cuh"


static std::vector<float> down(const float *d, size_t n)
{
    std::vector<float> h(n);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

static void near(const char *what, const std::vector<float> &got, const std::vector<double> &want, double tol)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); i++) {
        const double d = (double)got[i] - want[i];
        num += d * d;
        den += want[i] * want[i];
    }
    const double rel = sqrt(num / (den > 0 ? den : 1));
    if (!(rel <= tol)) {
        failures++;
        fprintf(stderr, "rows_check: %s: relative error %.3g > %.1g\n", what, rel, tol);
    } else {
        printf("rows_check: %s: relative error %.3g (<= %.1g)\n", what, rel, tol);
    }
}

static void same(const char *what, const std::vector<float> &a, const std::vector<float> &b)
{
    if (memcmp(a.data(), b.data(), a.size() * sizeof(float))) {
        failures++;
        fprintf(stderr, "rows_check: %s: a second run gave other bits\n", what);
    }
}


/* layernorm's forward statistics: rs = row sums, vs = centred squares around rs / HIDDEN */
template <int ROWS, int COLS, int HIDDEN> static void check_stats(cudaStream_t s, bool bench)
{
    const size_t n = (size_t)ROWS * COLS;
    const std::vector<float> x = rnd(n, 2.0f, 4.0f); /* mean 3, spread 1: the centred squares cancel */
    float *d_x = up(x), *d_rs = poisoned(ROWS), *d_vs = poisoned(ROWS);
    trk::ln_rowsum<ROWS, COLS>(s, d_x, d_rs);
    trk::ln_sqdev<ROWS, COLS, HIDDEN>(s, d_x, d_rs, d_vs);
    const std::vector<float> rs = down(d_rs, ROWS), vs = down(d_vs, ROWS);
    std::vector<double> r_rs(ROWS), r_vs(ROWS);
    for (int r = 0; r < ROWS; r++) {
        double t = 0;
        for (int j = 0; j < COLS; j++)
            t += x[(size_t)r * COLS + j];
        r_rs[r] = t;
        const double mean = (double)rs[r] / HIDDEN; /* the kernel's centre: the statistics of rs as computed */
        double q = 0;
        for (int j = 0; j < COLS; j++) {
            const double d = x[(size_t)r * COLS + j] - mean;
            q += d * d;
        }
        r_vs[r] = q;
    }
    char what[96];
    snprintf(what, sizeof what, "ln_rowsum<%d, %d>", ROWS, COLS);
    near(what, rs, r_rs, 1e-6);
    snprintf(what, sizeof what, "ln_sqdev<%d, %d, %d>", ROWS, COLS, HIDDEN);
    near(what, vs, r_vs, 1e-6);
    trk::ln_rowsum<ROWS, COLS>(s, d_x, d_rs);
    trk::ln_sqdev<ROWS, COLS, HIDDEN>(s, d_x, d_rs, d_vs);
    same(what, down(d_rs, ROWS), rs);
    same(what, down(d_vs, ROWS), vs);
    if (bench) {
        const float us = time_us(s, [&] {
            trk::ln_rowsum<ROWS, COLS>(s, d_x, d_rs);
            trk::ln_sqdev<ROWS, COLS, HIDDEN>(s, d_x, d_rs, d_vs);
        });
        printf("rows_check bench: ln_rowsum + ln_sqdev<%d, %d>: %.1f us, %.0f GB/s\n", ROWS, COLS, us,
               2.0 * n * sizeof(float) / us * 1e-3);
    }
    cudaFree(d_x);
    cudaFree(d_rs);
    cudaFree(d_vs);
}

/* training's residual add fused with the next layernorm's row sums, out of place: y = x + (p + bias) bit for bit the
 * host's float sums, rs within 1e-6 of the double row sums of y */
template <int ROWS, int COLS> static void check_resid(cudaStream_t s, bool bench)
{
    const size_t n = (size_t)ROWS * COLS;
    const std::vector<float> x = rnd(n, 2.0f, 4.0f), p = rnd(n, -1.0f, 1.0f), b = rnd(COLS, -0.5f, 0.5f);
    float *d_x = up(x), *d_p = up(p), *d_b = up(b), *d_y = poisoned(n), *d_rs = poisoned(ROWS);
    trk::resid_rowsum_to<ROWS, COLS>(s, d_x, d_p, d_b, d_rs, d_y);
    const std::vector<float> y = down(d_y, n), rs = down(d_rs, ROWS);
    std::vector<float> r_y(n);
    std::vector<double> r_rs(ROWS);
    for (int r = 0; r < ROWS; r++) {
        double t = 0;
        for (int j = 0; j < COLS; j++) {
            const size_t e = (size_t)r * COLS + j;
            r_y[e] = x[e] + (p[e] + b[j]);
            t += r_y[e];
        }
        r_rs[r] = t;
    }
    char what[96];
    snprintf(what, sizeof what, "resid_rowsum_to<%d, %d> y", ROWS, COLS);
    same(what, y, r_y);
    snprintf(what, sizeof what, "resid_rowsum_to<%d, %d> row sums", ROWS, COLS);
    near(what, rs, r_rs, 1e-6);
    trk::resid_rowsum_to<ROWS, COLS>(s, d_x, d_p, d_b, d_rs, d_y);
    same(what, down(d_rs, ROWS), rs);
    if (bench) {
        const float us = time_us(s, [&] { trk::resid_rowsum_to<ROWS, COLS>(s, d_x, d_p, d_b, d_rs, d_y); });
        printf("rows_check bench: resid_rowsum_to<%d, %d>: %.1f us, %.0f GB/s\n", ROWS, COLS, us,
               3.0 * n * sizeof(float) / us * 1e-3);
    }
    cudaFree(d_x);
    cudaFree(d_p);
    cudaFree(d_b);
    cudaFree(d_y);
    cudaFree(d_rs);
}

/* an OUT output [n] NaN-poisoned (all ones: NaN as float and as bf16), and downloaded widened to float */
template <typename OUT> static OUT *poisoned_out(size_t n)
{
    OUT *d = nullptr;
    CK(cudaMalloc(&d, n * sizeof(OUT)));
    CK(cudaMemset(d, 0xff, n * sizeof(OUT)));
    return d;
}
template <typename OUT> static std::vector<float> down_out(const OUT *d, size_t n)
{
    std::vector<OUT> h(n);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h.data(), d, n * sizeof(OUT), cudaMemcpyDeviceToHost));
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) {
        if constexpr (std::is_same_v<OUT, float>)
            f[i] = h[i];
        else
            f[i] = tr_bf16_to_f32(h[i]);
    }
    return f;
}

/* the row kernel (gen/fuse.c, TG_EPI_LN): resid_ln against the three kernels it replaces on the same inputs
 * (resid_rowsum in place or resid_rowsum_to, then ln_sqdev and ln_apply): xo, rs, vs and y bit for bit (the same float
 * operations in the same order, the row held in registers up to 2048 columns, read back beyond); against double: xo
 * the host's float sums bit for bit, rs and vs within 1e-6 (relative norm), y within 1e-5 of the double layernorm of
 * xo (bf16: 4e-3, one rounding to 8 bits); a second run gives the same bits. bench: the one kernel against the three,
 * microseconds and GB/s of the bytes the row kernel must move (x, p, xo, y [ROWS, COLS]; bias, gamma, beta; rs, vs) */
template <int ROWS, int COLS, typename OUT> static void check_resid_ln(cudaStream_t s, bool inplace, bool bench)
{
    const size_t n = (size_t)ROWS * COLS;
    const float eps = 1e-5f;
    const std::vector<float> x = rnd(n, 2.0f, 4.0f), p = rnd(n, -1.0f, 1.0f), b = rnd(COLS, -0.5f, 0.5f),
                             g = rnd(COLS, 0.5f, 1.5f), be = rnd(COLS, -0.5f, 0.5f);
    float *d_p = up(p), *d_b = up(b), *d_g = up(g), *d_be = up(be);
    float *d_x[2], *d_xo[2], *d_rs[2], *d_vs[2];
    OUT *d_y[2];
    for (int k = 0; k < 2; k++) { /* 0: the row kernel, 1: the three kernels */
        d_x[k] = up(x);
        d_xo[k] = inplace ? d_x[k] : poisoned(n);
        d_rs[k] = poisoned(ROWS);
        d_vs[k] = poisoned(ROWS);
        d_y[k] = poisoned_out<OUT>(n);
    }
    auto fused = [&] {
        trk::resid_ln<ROWS, COLS, COLS, OUT>(s, d_x[0], d_p, d_b, d_xo[0], d_rs[0], d_vs[0], d_g, d_be, eps, d_y[0]);
    };
    auto three = [&] {
        if (inplace)
            trk::resid_rowsum<ROWS, COLS>(s, d_x[1], d_p, d_b, d_rs[1]);
        else
            trk::resid_rowsum_to<ROWS, COLS>(s, d_x[1], d_p, d_b, d_rs[1], d_xo[1]);
        trk::ln_sqdev<ROWS, COLS, COLS>(s, d_xo[1], d_rs[1], d_vs[1]);
        trk::ln_apply<ROWS, COLS, COLS, OUT>(s, d_xo[1], d_rs[1], d_vs[1], d_g, d_be, eps, d_y[1]);
    };
    fused();
    three();
    std::vector<float> xo[2], rs[2], vs[2], y[2];
    for (int k = 0; k < 2; k++) {
        xo[k] = down(d_xo[k], n);
        rs[k] = down(d_rs[k], ROWS);
        vs[k] = down(d_vs[k], ROWS);
        y[k] = down_out(d_y[k], n);
    }
    char what[128], tag[64];
    snprintf(tag, sizeof tag, "resid_ln<%d, %d, %s>%s", ROWS, COLS, std::is_same_v<OUT, float> ? "float" : "bf16",
             inplace ? " in place" : "");
    const char *part[4] = {"xo", "row sums", "centred squares", "y"};
    const std::vector<float> *got[4] = {&xo[0], &rs[0], &vs[0], &y[0]}, *ref[4] = {&xo[1], &rs[1], &vs[1], &y[1]};
    for (int k = 0; k < 4; k++) {
        snprintf(what, sizeof what, "%s %s against the three kernels", tag, part[k]);
        if (memcmp(got[k]->data(), ref[k]->data(), got[k]->size() * sizeof(float))) {
            failures++;
            fprintf(stderr, "rows_check: %s: other bits\n", what);
        } else {
            printf("rows_check: %s: the same bits\n", what);
        }
    }
    std::vector<float> r_xo(n);
    std::vector<double> r_rs(ROWS), r_vs(ROWS), r_y(n);
    for (int r = 0; r < ROWS; r++) {
        double t = 0;
        for (int j = 0; j < COLS; j++) {
            const size_t e = (size_t)r * COLS + j;
            r_xo[e] = x[e] + (p[e] + b[j]);
            t += r_xo[e];
        }
        r_rs[r] = t;
        const double mean = t / COLS;
        double q = 0;
        for (int j = 0; j < COLS; j++) {
            const double d = r_xo[(size_t)r * COLS + j] - mean;
            q += d * d;
        }
        r_vs[r] = q;
        const double rstd = 1.0 / sqrt(q / COLS + eps);
        for (int j = 0; j < COLS; j++) {
            const size_t e = (size_t)r * COLS + j;
            r_y[e] = (r_xo[e] - mean) * rstd * g[j] + be[j];
        }
    }
    snprintf(what, sizeof what, "%s xo against the host's float sums", tag);
    same(what, xo[0], r_xo);
    snprintf(what, sizeof what, "%s row sums", tag);
    near(what, rs[0], r_rs, 1e-6);
    snprintf(what, sizeof what, "%s centred squares", tag);
    near(what, vs[0], r_vs, 1e-6);
    snprintf(what, sizeof what, "%s y", tag);
    near(what, y[0], r_y, std::is_same_v<OUT, float> ? 1e-5 : 4e-3);
    if (inplace) /* again from the same x */
        CK(cudaMemcpy(d_x[0], x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    fused();
    snprintf(what, sizeof what, "%s repeated", tag);
    same(what, down(d_xo[0], n), xo[0]);
    same(what, down(d_vs[0], ROWS), vs[0]);
    same(what, down_out(d_y[0], n), y[0]);
    if (bench) { /* in place, x grows by p + bias a call: the timing, not the values, matters here */
        const double bytes = (double)n * (3 * sizeof(float) + sizeof(OUT)) + 3.0 * COLS * sizeof(float) +
                             2.0 * ROWS * sizeof(float);
        const float us1 = time_us(s, fused), us3 = time_us(s, three);
        printf("rows_check bench: %s: %.1f us, %.0f GB/s; the three kernels: %.1f us (%.2fx)\n", tag, us1,
               bytes / us1 * 1e-3, us3, us3 / us1);
    }
    cudaFree(d_p);
    cudaFree(d_b);
    cudaFree(d_g);
    cudaFree(d_be);
    for (int k = 0; k < 2; k++) {
        cudaFree(d_x[k]);
        if (!inplace)
            cudaFree(d_xo[k]);
        cudaFree(d_rs[k]);
        cudaFree(d_vs[k]);
        cudaFree(d_y[k]);
    }
}

/* the row kernel without a residual (gen/fuse.c on ln_rowsum: the first block's ln1, ln_f): ln_rows against
 * ln_rowsum, ln_sqdev and ln_apply on the same x: rs, vs and y bit for bit, x unchanged; y within 1e-5 of the double
 * layernorm (bf16: 4e-3); a second run the same bits. bench: the one kernel against the three (bytes: x, y; gamma,
 * beta; rs, vs) */
template <int ROWS, int COLS, typename OUT> static void check_ln_rows(cudaStream_t s, bool bench)
{
    const size_t n = (size_t)ROWS * COLS;
    const float eps = 1e-5f;
    const std::vector<float> x = rnd(n, 2.0f, 4.0f), g = rnd(COLS, 0.5f, 1.5f), be = rnd(COLS, -0.5f, 0.5f);
    float *d_x = up(x), *d_g = up(g), *d_be = up(be), *d_rs[2], *d_vs[2];
    OUT *d_y[2];
    for (int k = 0; k < 2; k++) { /* 0: the row kernel, 1: the three kernels */
        d_rs[k] = poisoned(ROWS);
        d_vs[k] = poisoned(ROWS);
        d_y[k] = poisoned_out<OUT>(n);
    }
    auto fused = [&] { trk::ln_rows<ROWS, COLS, COLS, OUT>(s, d_x, d_rs[0], d_vs[0], d_g, d_be, eps, d_y[0]); };
    auto three = [&] {
        trk::ln_rowsum<ROWS, COLS>(s, d_x, d_rs[1]);
        trk::ln_sqdev<ROWS, COLS, COLS>(s, d_x, d_rs[1], d_vs[1]);
        trk::ln_apply<ROWS, COLS, COLS, OUT>(s, d_x, d_rs[1], d_vs[1], d_g, d_be, eps, d_y[1]);
    };
    fused();
    three();
    std::vector<float> rs[2], vs[2], y[2];
    for (int k = 0; k < 2; k++) {
        rs[k] = down(d_rs[k], ROWS);
        vs[k] = down(d_vs[k], ROWS);
        y[k] = down_out(d_y[k], n);
    }
    char what[128], tag[64];
    snprintf(tag, sizeof tag, "ln_rows<%d, %d, %s>", ROWS, COLS, std::is_same_v<OUT, float> ? "float" : "bf16");
    const char *part[3] = {"row sums", "centred squares", "y"};
    const std::vector<float> *got[3] = {&rs[0], &vs[0], &y[0]}, *ref[3] = {&rs[1], &vs[1], &y[1]};
    for (int k = 0; k < 3; k++) {
        snprintf(what, sizeof what, "%s %s against the three kernels", tag, part[k]);
        same(what, *got[k], *ref[k]);
    }
    snprintf(what, sizeof what, "%s x unchanged", tag);
    same(what, down(d_x, n), x);
    std::vector<double> r_y(n);
    for (int r = 0; r < ROWS; r++) {
        double t = 0, q = 0;
        for (int j = 0; j < COLS; j++)
            t += x[(size_t)r * COLS + j];
        const double mean = t / COLS;
        for (int j = 0; j < COLS; j++)
            q += (x[(size_t)r * COLS + j] - mean) * (x[(size_t)r * COLS + j] - mean);
        const double rstd = 1.0 / sqrt(q / COLS + eps);
        for (int j = 0; j < COLS; j++)
            r_y[(size_t)r * COLS + j] = (x[(size_t)r * COLS + j] - mean) * rstd * g[j] + be[j];
    }
    snprintf(what, sizeof what, "%s y", tag);
    near(what, y[0], r_y, std::is_same_v<OUT, float> ? 1e-5 : 4e-3);
    fused();
    snprintf(what, sizeof what, "%s repeated", tag);
    same(what, down(d_vs[0], ROWS), vs[0]);
    same(what, down_out(d_y[0], n), y[0]);
    if (bench) {
        const double bytes = (double)n * (sizeof(float) + sizeof(OUT)) + 2.0 * COLS * sizeof(float) +
                             2.0 * ROWS * sizeof(float);
        const float us1 = time_us(s, fused), us3 = time_us(s, three);
        printf("rows_check bench: %s: %.1f us, %.0f GB/s; the three kernels: %.1f us (%.2fx)\n", tag, us1,
               bytes / us1 * 1e-3, us3, us3 / us1);
    }
    for (float *d : {d_x, d_g, d_be, d_rs[0], d_rs[1], d_vs[0], d_vs[1]})
        cudaFree(d);
    cudaFree(d_y[0]);
    cudaFree(d_y[1]);
}

/* the vocabulary loss of one vocab block: row max (exact), sums, loss, dlogits */
template <int ROWS, int COLS, int NVALID> static void check_loss(cudaStream_t s, bool bench)
{
    const size_t n = (size_t)ROWS * COLS;
    const int v0 = 5; /* this block holds ids 5 .. 5 + NVALID - 1 */
    std::vector<float> L = rnd(n, -8.0f, 8.0f);
    std::vector<int32_t> tgt(ROWS);
    for (int r = 0; r < ROWS; r++) /* mostly inside the block; every 7th row's target elsewhere */
        tgt[r] = (r % 7 == 6) ? v0 + NVALID + r : v0 + (int)((r * 2654435761u) % NVALID);
    std::vector<float> mx(ROWS);
    for (int r = 0; r < ROWS; r++) {
        float m = -INFINITY;
        for (int k = 0; k < NVALID; k++)
            m = fmaxf(m, L[(size_t)r * COLS + k]);
        mx[r] = m;
    }
    const float scale = 1.0f / (float)ROWS;
    float *d_L = up(L), *d_mx = up(mx), *d_s = poisoned(2 * ROWS), *d_loss = poisoned(ROWS), *d_dl = poisoned(n);
    int32_t *d_t = up(tgt);
    trk::lm_sums<ROWS, COLS, NVALID>(s, d_L, d_mx, d_t, v0, d_s);
    trk::lm_loss<ROWS>(s, d_mx, d_s, d_loss);
    trk::lm_dlogits<ROWS, COLS, NVALID>(s, d_L, d_mx, d_s, d_t, v0, scale, d_dl);
    const std::vector<float> sums = down(d_s, 2 * ROWS), loss = down(d_loss, ROWS), dl = down(d_dl, n);
    std::vector<double> r_s(ROWS), r_t(ROWS), r_loss(ROWS), r_dl(n);
    for (int r = 0; r < ROWS; r++) {
        double e = 0;
        for (int k = 0; k < NVALID; k++)
            e += exp((double)L[(size_t)r * COLS + k] - mx[r]);
        r_s[r] = e;
        const int t = tgt[r] - v0;
        r_t[r] = (t >= 0 && t < NVALID) ? L[(size_t)r * COLS + t] : 0.0;
        r_loss[r] = log(e) + mx[r] - r_t[r]; /* a partial loss: log of this block's sum, its target logit */
        for (int k = 0; k < COLS; k++) {
            const size_t i = (size_t)r * COLS + k;
            r_dl[i] = k < NVALID ? exp((double)L[i] - mx[r]) / e * scale - (k == t ? scale : 0.0) : 0.0;
        }
    }
    char what[96];
    snprintf(what, sizeof what, "lm_sums<%d, %d, %d> exponentials", ROWS, COLS, NVALID);
    near(what, std::vector<float>(sums.begin(), sums.begin() + ROWS), r_s, 1e-6);
    snprintf(what, sizeof what, "lm_sums<%d, %d, %d> target logits", ROWS, COLS, NVALID);
    near(what, std::vector<float>(sums.begin() + ROWS, sums.end()), r_t, 0.0);
    snprintf(what, sizeof what, "lm_loss<%d>", ROWS);
    near(what, loss, r_loss, 1e-6);
    snprintf(what, sizeof what, "lm_dlogits<%d, %d, %d>", ROWS, COLS, NVALID);
    near(what, dl, r_dl, 1e-6);
    trk::lm_sums<ROWS, COLS, NVALID>(s, d_L, d_mx, d_t, v0, d_s);
    same(what, down(d_s, 2 * ROWS), sums);
    if (bench) {
        const float us_s = time_us(s, [&] { trk::lm_sums<ROWS, COLS, NVALID>(s, d_L, d_mx, d_t, v0, d_s); });
        const float us_d =
            time_us(s, [&] { trk::lm_dlogits<ROWS, COLS, NVALID>(s, d_L, d_mx, d_s, d_t, v0, scale, d_dl); });
        printf("rows_check bench: lm_sums<%d, %d, %d>: %.1f us, %.0f GB/s; lm_dlogits: %.1f us, %.0f GB/s\n", ROWS,
               COLS, NVALID, us_s, n * sizeof(float) / us_s * 1e-3, us_d, 2.0 * n * sizeof(float) / us_d * 1e-3);
    }
    cudaFree(d_L);
    cudaFree(d_mx);
    cudaFree(d_s);
    cudaFree(d_loss);
    cudaFree(d_dl);
    cudaFree(d_t);
}

int main(int argc, char **argv)
{
    const bool bench = argc > 1 && !strcmp(argv[1], "bench");
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    check_stats<8192, 768, 768>(s, bench);
    check_stats<37, 60, 120>(s, false);
    check_stats<37, 30, 60>(s, false);
    check_resid<8192, 768>(s, bench);
    check_resid<37, 60>(s, false);
    check_resid<37, 30>(s, false);
    check_resid_ln<8192, 768, float>(s, true, bench);  /* GPT-2 small, inference: in place */
    check_resid_ln<8192, 768, float>(s, false, bench); /* training: out of place */
    check_resid_ln<8192, 768, tr_bf16>(s, false, bench);
    check_resid_ln<64, 1600, float>(s, false, false); /* GPT-2 XL's width: 13 float4 a lane in registers */
    check_resid_ln<64, 4096, tr_bf16>(s, true, false); /* wider than 2048: xo read back */
    check_resid_ln<37, 60, float>(s, false, false);    /* 15 float4 a row: lanes 15..31 idle */
    check_resid_ln<37, 30, tr_bf16>(s, true, false);   /* not a multiple of 4: the scalar path */
    check_ln_rows<8192, 768, tr_bf16>(s, bench); /* GPT-2 small's first ln1 and ln_f in bf16 */
    check_ln_rows<8192, 768, float>(s, false);
    check_ln_rows<64, 4096, float>(s, false); /* wider than 2048: x read again */
    check_ln_rows<37, 60, tr_bf16>(s, false);
    check_ln_rows<37, 30, float>(s, false);   /* the scalar path */
    check_loss<64, 50304, 50257>(s, false);
    check_loss<37, 49, 47>(s, false);
    if (bench)
        check_loss<8192, 50304, 50257>(s, true);
    CK(cudaStreamDestroy(s));
    printf("rows_check: %d failures\n", failures);
    return failures ? 1 : 0;
}
