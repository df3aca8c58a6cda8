/*
 * test_cost.c - the cost model (gen/cost.c) against figures derived here from
 * the model's definition (docs/COST.md) and DESIGN.md's step counts, not from
 * the plan: GEMM time = the forward's GEMM flops (2 T/(dq) (4C^2 + 2CF)/q per
 * layer) over the rate; broadcast time = the bytes every rank takes part in
 * broadcasting (q SUMMA steps of an A block [T/(dq), K/q] over the row and a
 * B block [K/q, N/q] over the column, for each of the four GEMMs) over the
 * link of the group, which depends on the placement: inside a node the rank's
 * link, across nodes the node's link shared by the groups that cross it;
 * latencies alone give (g-1) a per broadcast; the two-stream timeline lies
 * between the busiest stream and the serial sum. Pipeline stages: planning each
 * distinct stage once gives the very figures of planning every stage.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "pipe_cost.h"
#include "tt.h"
#include "tt_spec.h"

static tg_machine machine(int rpn, double intra_gbs, double inter_gbs, double lat_us, double tflops, double mem_gbs)
{
    tg_machine m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "test");
    m.ranks_per_node = rpn;
    m.intra = (tg_link){intra_gbs, lat_us};
    m.inter = (tg_link){inter_gbs, lat_us};
    m.gemm_tflops_fp32 = tflops;
    m.memory_bandwidth_gbs = mem_gbs;
    m.memory_gib = 80;
    return m;
}

static bool cost_of(tg_spec s, const tg_machine *mc, tg_cost *c)
{
    tg_plan pl;
    tg_plan_init(&s, &pl);
    tg_class_plan cp;
    tg_err e = {{0}, 0};
    if (!tg_plan_class(&pl, 0, 0, &cp, &e))
        return false;
    bool ok = tg_cost_class(&pl, &cp, mc, c, &e);
    tg_class_free(&cp);
    return ok;
}

static bool close_to(double got, double want) { return fabs(got - want) <= 1e-9 * fabs(want) + 1e-15; }

int main(void)
{
    const int L = 2, C = 48, H = 12, F = 192, S = 8, B = 12, T = B * S;

    TT_CASE("GEMM time is the forward's GEMM flops over the rate, every mesh") {
        static const int meshes[][2] = {{1, 1}, {2, 1}, {2, 2}, {3, 2}, {2, 3}};
        for (size_t m = 0; m < sizeof meshes / sizeof meshes[0]; m++) {
            int q = meshes[m][0], d = meshes[m][1];
            tg_machine mc = machine(1024, 100, 10, 0, 1.0, 1e12);
            tg_cost c;
            TT_CHECK(cost_of(tt_spec(q, d, L, C, H, F, S, B, 0), &mc, &c), "plan [%d,%d,%d]", q, q, d);
            double flops = (double)L * 2.0 * T / (d * q) * (4.0 * C * C + 2.0 * C * F) / q;
            TT_CHECK(close_to(c.phase[0].kind_s[TG_STEP_GEMM], flops / 1e12), "[%d,%d,%d] gemm %.9g s, want %.9g s", q,
                     q, d, c.phase[0].kind_s[TG_STEP_GEMM], flops / 1e12);
            TT_CHECK(close_to(c.phase[0].gemm_s, c.phase[0].kind_s[TG_STEP_GEMM]), "gemm_s");
            tg_cost_free(&c);
        }
    }

    /* bytes each rank broadcasts or receives per layer, split by group: rows carry the A blocks, columns the B */
    TT_CASE("broadcast time: bytes over the link, inside a node and across nodes by placement") {
        int q = 2, d = 2;
        double Rr = (double)T / (d * q);
        double row_bytes = 4.0 * L * Rr * (3.0 * C + F);            /* q steps x A blocks [Rr, K/q] */
        double col_bytes = 4.0 * L * (4.0 * C * C + 2.0 * C * F) / q; /* q steps x B blocks [K/q, N/q] */
        double intra = 100e9, inter = 10e9;
        /* 4 ranks per node, placement row: rows and columns of a depth layer share a node */
        tg_machine mc = machine(4, 100, 10, 0, 1e6, 1e12);
        tg_spec s = tt_spec(q, d, L, C, H, F, S, B, 0);
        tg_cost c;
        TT_CHECK(cost_of(s, &mc, &c), "plan");
        double want = (row_bytes + col_bytes) / intra;
        TT_CHECK(close_to(c.phase[0].kind_s[TG_STEP_BCAST], want), "row placement: %.9g, want %.9g",
                 c.phase[0].kind_s[TG_STEP_BCAST], want);
        TT_CHECK(c.phase[0].inter_bytes == 0 && c.phase[0].comm_inter_s == 0, "row placement crosses no node");
        tg_cost_free(&c);
        /* placement dep: rank = k + 2j + 4i; node 0 holds i = 0: rows stay inside, columns cross with one
         * member per node, so each shares the node's link with the 4 ranks' column groups */
        s.placement = TG_PLACE_DEP;
        TT_CHECK(cost_of(s, &mc, &c), "plan");
        want = row_bytes / intra + col_bytes / (inter / 4);
        TT_CHECK(close_to(c.phase[0].kind_s[TG_STEP_BCAST], want), "dep placement: %.9g, want %.9g",
                 c.phase[0].kind_s[TG_STEP_BCAST], want);
        TT_CHECK(close_to(c.phase[0].inter_bytes, col_bytes), "bytes across nodes %.9g, want %.9g",
                 c.phase[0].inter_bytes, col_bytes);
        tg_cost_free(&c);
        /* placement col: rank = i + 2j + 4k: columns inside, rows inside too (a node is a depth layer) */
        s.placement = TG_PLACE_COL;
        TT_CHECK(cost_of(s, &mc, &c), "plan");
        TT_CHECK(c.phase[0].inter_bytes == 0, "col placement with 4 ranks per node crosses no node");
        tg_cost_free(&c);
        /* 2 ranks per node, placement col: columns inside, rows cross with one member per node */
        tg_machine m2 = machine(2, 100, 10, 0, 1e6, 1e12);
        TT_CHECK(cost_of(s, &m2, &c), "plan");
        want = row_bytes / (inter / 2) + col_bytes / intra;
        TT_CHECK(close_to(c.phase[0].kind_s[TG_STEP_BCAST], want), "col placement, 2 per node: %.9g, want %.9g",
                 c.phase[0].kind_s[TG_STEP_BCAST], want);
        tg_cost_free(&c);
    }

    TT_CASE("latency alone: (g-1) a per broadcast, 2 q per GEMM") {
        int q = 3, d = 1;
        tg_machine mc = machine(1024, 1e9, 1e9, 7.0, 1e9, 1e12);
        tg_cost c;
        TT_CHECK(cost_of(tt_spec(q, d, L, C, H, F, 8, 9, 0), &mc, &c), "plan");
        double want = L * 4.0 * (2.0 * q) * (q - 1) * 7e-6;
        TT_CHECK(fabs(c.phase[0].kind_s[TG_STEP_BCAST] - want) < 1e-9 * want + 1e-12, "%.9g, want %.9g",
                 c.phase[0].kind_s[TG_STEP_BCAST], want);
        tg_cost_free(&c);
    }

    TT_CASE("timelines: busiest stream <= streams <= serial; training has three phases") {
        tg_machine mc = machine(4, 50, 5, 3, 10, 500);
        for (int train = 0; train <= 1; train++) {
            tg_cost c;
            TT_CHECK(cost_of(tt_spec(2, 2, L, C, H, F, S, B, train), &mc, &c), "plan");
            for (int p = 0; p < (train ? 3 : 1); p++) {
                const tg_cost_phase *ph = &c.phase[p];
                double busiest = ph->compute_s > ph->comm_s ? ph->compute_s : ph->comm_s;
                TT_CHECK(ph->nsteps > 0, "phase %d has steps", p);
                TT_CHECK(ph->streams_s >= busiest * (1 - 1e-12), "phase %d: streams %.9g < busiest %.9g", p,
                         ph->streams_s, busiest);
                TT_CHECK(ph->streams_s <= ph->serial_s * (1 + 1e-12), "phase %d: streams %.9g > serial %.9g", p,
                         ph->streams_s, ph->serial_s);
                TT_CHECK(close_to(ph->serial_s, ph->compute_s + ph->comm_s), "serial = compute + comm");
            }
            TT_CHECK(train ? c.phase[1].nsteps > 0 && c.phase[2].nsteps > 0 : c.phase[1].nsteps == 0,
                     "phases of mode %d", train);
            tg_cost_free(&c);
        }
    }
    TT_CASE("micro-batches: a training step costs each per-micro-batch step m times, the gradients' all-reduces once") {
        tg_machine mc = machine(4, 50, 5, 3, 10, 500);
        tg_spec s1 = tt_spec(2, 2, L, C, H, F, S, 24, 1), s2 = s1;
        s2.microbatches = 2;
        tg_cost c1, c2;
        TT_CHECK(cost_of(s1, &mc, &c1) && cost_of(s2, &mc, &c2), "plan");
        for (int p = 0; p < 3; p++) {
            const tg_cost_phase *a = &c1.phase[p], *b = &c2.phase[p];
            /* the same flops per step, and more: the gradient accumulation, smaller GEMMs at the same latency */
            TT_CHECK(b->compute_s >= 0.99 * a->compute_s,
                     "phase %d: compute %.6g with 2 micro-batches, %.6g with 1", p, b->compute_s, a->compute_s);
            TT_CHECK(b->streams_s >= 0.75 * a->streams_s, "phase %d: streams %.6g with 2 micro-batches, %.6g with 1", p,
                     b->streams_s, a->streams_s);
            double busiest = b->compute_s > b->comm_s ? b->compute_s : b->comm_s;
            TT_CHECK(b->streams_s >= busiest * (1 - 1e-12) && b->streams_s <= b->serial_s * (1 + 1e-12),
                     "phase %d: busiest %.6g <= streams %.6g <= serial %.6g", p, busiest, b->streams_s, b->serial_s);
        }
        /* the backward's bytes: the weights' broadcasts twice, the gradients' depth all-reduce once */
        TT_CHECK(c2.phase[1].intra_bytes + c2.phase[1].inter_bytes > c1.phase[1].intra_bytes + c1.phase[1].inter_bytes,
                 "backward bytes %.6g with 2 micro-batches, %.6g with 1",
                 c2.phase[1].intra_bytes + c2.phase[1].inter_bytes, c1.phase[1].intra_bytes + c1.phase[1].inter_bytes);
        tg_cost_free(&c1);
        tg_cost_free(&c2);
    }
    /* a bf16 program's fused fc1 and fc2-input-gradient GEMMs (gen/fuse.c) write their kernel step's bf16 output
     * as D and never their fp32 C: on a machine bound by memory (flops free, 1 GB/s, no launch cost) the GEMM's time
     * is its bf16 A and B read, the epilogue's the bias, g and u (fc1) or u read and du written (fc2), all bf16:
     * 2 bytes an element of the shapes derived here, not from the plan's buffers */
    TT_CASE("cost of a fused bf16 GEMM: its operands, not the fp32 C the fused call never writes; the epilogue's bf16 outputs") {
        tg_spec s = tt_spec(1, 1, 1, C, H, F, S, B, 1);
        s.dtype = TG_BF16;
        tg_plan pl;
        tg_plan_init(&s, &pl);
        tg_class_plan cp;
        tg_err e = {{0}, 0};
        TT_CHECK(tg_plan_class(&pl, 0, 0, &cp, &e), "%s", e.msg);
        tg_machine mc = machine(1024, 100, 10, 0, 1e12, 1.0);
        int seen = 0;
        for (int i = 0; i < cp.nsteps; i++) {
            const tg_step *g = &cp.steps[i];
            if (g->kind != TG_STEP_GEMM || (g->epi != TG_EPI_GELU_AUX_BIAS && g->epi != TG_EPI_DGELU))
                continue;
            const tg_step *k = &cp.steps[g->fused];
            const double rc = (double)T * F; /* the [T, F] activation of fc1 */
            double want_g, want_k;
            if (g->epi == TG_EPI_GELU_AUX_BIAS) { /* x [T, C] @ W1 [C, F]; bias [F], g and u [T, F] */
                want_g = 2.0 * ((double)T * C + (double)C * F);
                want_k = 2.0 * (F + 2.0 * rc);
            } else { /* dY [T, C] @ W2^T ([F, C] read); u read, du written [T, F] */
                want_g = 2.0 * ((double)T * C + (double)F * C);
                want_k = 2.0 * 2.0 * rc;
            }
            double tg = tg_cost_step(&pl, &cp, g, &mc, NULL) * 1e9, tk = tg_cost_step(&pl, &cp, k, &mc, NULL) * 1e9;
            TT_CHECK(close_to(tg, want_g) && close_to(tk, want_k), "%s: GEMM %.0f bytes (want %.0f), epilogue %.0f (want %.0f)",
                     g->epi == TG_EPI_DGELU ? "fc2 dX + GeLU gradient" : "fc1 + bias + GeLU", tg, want_g, tk, want_k);
            seen |= g->epi == TG_EPI_DGELU ? 2 : 1;
        }
        TT_CHECK(seen == 3, "the fused fc1 and fc2 input-gradient GEMMs found (%d)", seen);
        tg_class_free(&cp);
    }

    /* the row kernel (gen/fuse.c, TG_EPI_LN): a residual step and its layernorm on [1,1,1] (whole rows [T, C]) are one
     * launch that reads x, p [T, C] and bias, gamma, beta [C] once and writes x (in place), the LN output [T, C] and
     * the row sums and centred squares [T]: 16 T C + 12 C + 8 T bytes. epilogues = false: three launches, the
     * residual step's 12 T C + 4 C + 4 T bytes, the centred squares' x, rs and vs (4 T C + 8 T), the apply's x, rs,
     * vs, gamma, beta and y (8 T C + 8 T + 8 C). The first ln1 (no residual before it: ln_rowsum, then the two
     * layernorm steps) likewise: x read once, rs, vs, y written, gamma and beta read: 8 T C + 8 T + 8 C bytes and one
     * launch, against 16 T C + 20 T + 8 C and three. Memory-bound machine: 1 GB/s, flops free, 5 us a launch */
    TT_CASE("cost of the row kernel: one launch, x and p read once, the residual and layernorm outputs written once") {
        tg_spec s = tt_spec(1, 1, L, C, H, F, S, B, 0);
        tg_machine mc = machine(1024, 100, 10, 0, 1e12, 1.0);
        mc.launch_us = 5;
        const double tc = (double)T * C, launch = 5e-6 * 1e9;
        for (int off = 0; off < 2; off++) {
            s.no_epilogues = off;
            tg_plan pl;
            tg_plan_init(&s, &pl);
            tg_class_plan cp;
            tg_err e = {{0}, 0};
            TT_CHECK(tg_plan_class(&pl, 0, 0, &cp, &e), "%s", e.msg);
            int seen = 0, seen_ln = 0;
            for (int i = 0; i + 2 < cp.nsteps; i++) {
                const tg_step *r = &cp.steps[i];
                if (r->kind == TG_STEP_LN_ROWSUM && cp.steps[i + 1].kind == TG_STEP_LN_SQDEV) {
                    TT_CHECK((r->epi == TG_EPI_LN) == !off, "epilogues %s: row-sum step %d epilogue %d",
                             off ? "off" : "on", i, r->epi);
                    double got = 0;
                    for (int k = 0; k < 3; k++)
                        got += tg_cost_step(&pl, &cp, &cp.steps[i + k], &mc, NULL) * 1e9;
                    double want = off ? 16 * tc + 20.0 * T + 8.0 * C + 3 * launch : 8 * tc + 8.0 * T + 8.0 * C + launch;
                    TT_CHECK(close_to(got, want), "epilogues %s: layernorm steps %d..%d %.0f ns, want %.0f",
                             off ? "off" : "on", i, i + 2, got, want);
                    seen_ln++;
                }
                if (r->kind != TG_STEP_RESID_ROWSUM || r->buf[3] < 0 || cp.steps[i + 1].kind != TG_STEP_LN_SQDEV)
                    continue;
                TT_CHECK((r->epi == TG_EPI_LN) == !off, "epilogues %s: residual step %d epilogue %d", off ? "off" : "on",
                         i, r->epi);
                double got = 0;
                for (int k = 0; k < 3; k++)
                    got += tg_cost_step(&pl, &cp, &cp.steps[i + k], &mc, NULL) * 1e9;
                double want = off ? 24 * tc + 12.0 * C + 20.0 * T + 3 * launch : 16 * tc + 12.0 * C + 8.0 * T + launch;
                TT_CHECK(close_to(got, want), "epilogues %s: residual + layernorm steps %d..%d %.0f ns, want %.0f",
                         off ? "off" : "on", i, i + 2, got, want);
                seen++;
            }
            TT_CHECK(seen == 2 * L - 1, "%d residual + layernorm triples found, want %d", seen, 2 * L - 1);
            TT_CHECK(seen_ln == 1, "%d layernorms without a residual found, want 1 (the first ln1)", seen_ln);
            tg_class_free(&cp);
        }
    }

    /* the layernorm backward's row kernel (gen/fuse.c, TG_EPI_LNB): on [1,1,1] training (whole rows [T, C]) the sums
     * step and its apply step are one launch that reads dy, x [T, C], rs, vs [T], gamma [C] once, reads and writes g
     * [T, C] and writes dgamma, dbeta [C], the sums [2, T] never written: 16 T C + 8 T + 12 C bytes. epilogues =
     * false: two launches, the sums step's dy, x, rs, vs, gamma in, sums, dgamma, dbeta out (8 T C + 16 T + 12 C) and
     * the apply's dy, x, rs, vs, gamma, sums in, g in and out (16 T C + 16 T + 4 C). 1 GB/s, flops free, 5 us a
     * launch */
    TT_CASE("cost of the layernorm backward's row kernel: one launch, the sums neither written nor read") {
        tg_spec s = tt_spec(1, 1, L, C, H, F, S, B, 1);
        tg_machine mc = machine(1024, 100, 10, 0, 1e12, 1.0);
        mc.launch_us = 5;
        const double tc = (double)T * C, launch = 5e-6 * 1e9;
        for (int off = 0; off < 2; off++) {
            s.no_epilogues = off;
            tg_plan pl;
            tg_plan_init(&s, &pl);
            tg_class_plan cp;
            tg_err e = {{0}, 0};
            TT_CHECK(tg_plan_class(&pl, 0, 0, &cp, &e), "%s", e.msg);
            int seen = 0;
            for (int i = 0; i + 1 < cp.nsteps; i++) {
                const tg_step *r = &cp.steps[i];
                if (r->kind != TG_STEP_LN_BWD_SUMS)
                    continue;
                TT_CHECK((r->epi == TG_EPI_LNB) == !off && (r->fused == i + 1) == !off,
                         "epilogues %s: sums step %d epilogue %d fused %d", off ? "off" : "on", i, r->epi, r->fused);
                double got = 0;
                for (int k = 0; k < 2; k++)
                    got += tg_cost_step(&pl, &cp, &cp.steps[i + k], &mc, NULL) * 1e9;
                double want = off ? 24 * tc + 32.0 * T + 16.0 * C + 2 * launch : 16 * tc + 8.0 * T + 12.0 * C + launch;
                TT_CHECK(close_to(got, want), "epilogues %s: layernorm backward steps %d, %d %.0f ns, want %.0f",
                         off ? "off" : "on", i, i + 1, got, want);
                seen++;
            }
            TT_CHECK(seen == 2 * L, "%d layernorm backward pairs found, want %d", seen, 2 * L);
            tg_class_free(&cp);
        }
    }

    /* attention = "cudnn" (gen/fuse.c, TG_EPI_D_BF16): the proj input-gradient GEMM writes the bf16 dO [T, C] its
     * attention backward reads instead of the fp32 dO: the GEMM moves its bf16 A (dY [T, C]) and B (Wo [C, C]) and the
     * bf16 D, and the attention backward no longer reads the fp32 dO, 4 T C bytes fewer than with epilogues = false
     * (the same buffers), where the GEMM writes the fp32 dO (4 T C bytes) */
    TT_CASE("cost of attention = \"cudnn\"'s proj input-gradient GEMM writing the bf16 dO: its bf16 D, no fp32 dO "
            "written or read") {
        tg_spec s = tt_spec(1, 1, 1, C, H / 2, F, S, B, 1); /* head dimension 8 */
        s.dtype = TG_BF16;
        s.attention = TG_ATTN_CUDNN;
        tg_machine mc = machine(1024, 100, 10, 0, 1e12, 1.0);
        double tg[2] = {0, 0}, tk[2] = {0, 0};
        int seen[2] = {0, 0};
        for (int off = 0; off < 2; off++) {
            s.no_epilogues = off;
            tg_plan pl;
            tg_plan_init(&s, &pl);
            tg_class_plan cp;
            tg_err e = {{0}, 0};
            TT_CHECK(tg_plan_class(&pl, 0, 0, &cp, &e), "%s", e.msg);
            for (int i = 0; i + 1 < cp.nsteps; i++) {
                const tg_step *g = &cp.steps[i], *k = &cp.steps[i + 1];
                if (g->kind != TG_STEP_GEMM || strcmp(g->op, "proj") || !g->transb || k->kind != TG_STEP_ATTN_BWD)
                    continue;
                TT_CHECK((g->epi == TG_EPI_D_BF16) == !off, "epilogues %s: proj dX GEMM epilogue %d", off ? "off" : "on",
                         g->epi);
                tg[off] = tg_cost_step(&pl, &cp, g, &mc, NULL) * 1e9;
                tk[off] = tg_cost_step(&pl, &cp, k, &mc, NULL) * 1e9;
                seen[off]++;
            }
            tg_class_free(&cp);
        }
        const double tc = (double)T * C, ab = 2.0 * (tc + (double)C * C);
        TT_CHECK(seen[0] == 1 && seen[1] == 1, "proj dX GEMM and attention backward found %d and %d times", seen[0],
                 seen[1]);
        TT_CHECK(close_to(tg[0], ab + 2.0 * tc) && close_to(tg[1], ab + 4.0 * tc),
                 "proj dX GEMM %.0f bytes fused (want %.0f), %.0f not (want %.0f)", tg[0], ab + 2.0 * tc, tg[1],
                 ab + 4.0 * tc);
        TT_CHECK(close_to(tk[1] - tk[0], 4.0 * tc), "attention backward %.0f bytes fused, %.0f not: want %.0f fewer",
                 tk[0], tk[1], 4.0 * tc);
    }

    TT_CASE("pipeline stages: equal stages are planned once, and every figure is the one of planning every stage") {
        /* 6 stages of [2,2,1] (4 ranks each): on 4 ranks per node every middle stage has the same nodes layout, so
         * stages 0, 1 and 5 are planned; on 3 per node stage s starts at node offset 4s mod 3 = 0, 1, 2, 0, 1, 2 and
         * stage 4 is stage 1 again; uneven layers make stage 2 its own; with model.vocab, and on both schedules */
        const int lay[2][6] = {{2, 2, 2, 2, 2, 2}, {1, 2, 3, 2, 2, 2}};
        for (int v = 0; v < 2; v++)
            for (int u = 0; u < 2; u++)
                for (int r = 0; r < 2; r++)
                    for (int g = 0; g < 2; g++) {
                        tg_spec s = tt_spec(2, 1, 12, 8, 2, 16, 2, 8, 1);
                        s.pp = 6;
                        memcpy(s.stage_layers, lay[u], sizeof lay[u]);
                        s.microbatches = 4;
                        s.schedule = g ? TG_PIPE_GPIPE : TG_PIPE_1F1B;
                        if (v)
                            s.vocab = 10, s.positions = 2;
                        tg_machine mc = machine(r ? 3 : 4, 100, 10, 5, 1, 1000);
                        tg_pipe_cost a, b;
                        tg_err e = {{0}, 0};
                        TT_CHECK(tg_pipe_cost_run(&s, &mc, &a, &e), "reused: %s", e.msg);
                        TT_CHECK(tg_pipe_cost_every_stage(&s, &mc, &b, &e), "every stage: %s", e.msg);
                        if (!a.st || !b.st)
                            continue;
                        int want = r == 0 ? (u ? 4 : 3) : (u ? 5 : 5);
                        TT_CHECK(a.stage_plans == want && b.stage_plans == 6,
                                 "vocab %d layers %d rpn %d: %d stages planned (want %d), every stage %d", v, u, r ? 3 : 4,
                                 a.stage_plans, want, b.stage_plans);
                        for (int t = 0; t < 2; t++)
                            TT_CHECK(a.step[t] == b.step[t] && a.span[t] == b.span[t] && a.bubble[t] == b.bubble[t] &&
                                         a.pp1_step[t] == b.pp1_step[t],
                                     "timeline %d: step %.17g vs %.17g", t, a.step[t], b.step[t]);
                        TT_CHECK(a.tied == b.tied && a.block_bytes == b.block_bytes && a.nodes == b.nodes, "blocks");
                        int stash_differ = 0;
                        for (int st = 0; st < 6; st++) {
                            const tg_pipe_cost_stage *x = &a.st[st], *y = &b.st[st];
                            bool same = x->l0 == y->l0 && x->nl == y->nl && x->p2p == y->p2p &&
                                        x->p2p_inter == y->p2p_inter && x->peak_bytes == y->peak_bytes &&
                                        x->mem_bytes == y->mem_bytes;
                            for (int t = 0; t < 2; t++)
                                same = same && x->fwd[t] == y->fwd[t] && x->bwd[t] == y->bwd[t] &&
                                       x->bwd_last[t] == y->bwd_last[t] && x->opt[t] == y->opt[t] &&
                                       x->busy[t] == y->busy[t] && x->end[t] == y->end[t];
                            TT_CHECK(same, "vocab %d layers %d rpn %d %s: stage %d differs (mem %lld vs %lld)", v, u,
                                     r ? 3 : 4, g ? "gpipe" : "1f1b", st, x->mem_bytes, y->mem_bytes);
                            stash_differ += st > 0 && x->mem_bytes != a.st[1].mem_bytes && x->nl == a.st[1].nl;
                        }
                        /* 1F1B's middle stages hold fewer micro-batches the later they are: memory is not reused */
                        TT_CHECK(g || u || stash_differ > 0, "1f1b: every middle stage with stage 1's memory");
                        tg_pipe_cost_free(&a);
                        tg_pipe_cost_free(&b);
                    }
    }
    TT_EXIT();
}
