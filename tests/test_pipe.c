/*
 * test_pipe.c - the pipeline schedules of gen/pipe.c and their proof before launch: the lists tg_pipe_build
 * writes for "gpipe" and "1f1b" run without deadlock, each micro-batch's forward and backward once, with the
 * stash and bubble the textbook formulas give (computed here from S, m and the layers, not from pipe.c); and
 * the simulator refuses broken orders (both stages receiving first, swapped sends, a dropped receive, a step
 * run twice, a block sent to the wrong stage) naming the stage, step and micro-batch.
 */
#include <stdlib.h>
#include <string.h>

#include "pipe.h"
#include "tt.h"

static tg_err E;

static bool has(const char *sub) { return strstr(E.msg, sub) != NULL; }

/* Remove step k of stage s. */
static void drop(tg_pipe *p, int s, int k)
{
    memmove(&p->ops[s][k], &p->ops[s][k + 1], (size_t)(p->nops[s] - k - 1) * sizeof p->ops[s][0]);
    p->nops[s]--;
}

/* The index of the first step of stage s with this kind and micro-batch, or -1. */
static int find(const tg_pipe *p, int s, int kind, int mb)
{
    for (int k = 0; k < p->nops[s]; k++)
        if (p->ops[s][k].kind == kind && p->ops[s][k].mb == mb)
            return k;
    return -1;
}

int main(void)
{
    TT_CASE("gpipe and 1f1b on 1..4 stages with 1..8 micro-batches run without deadlock, stash and bubble as the "
            "formulas give") {
        for (int sched = 0; sched < 2; sched++)
            for (int S = 1; S <= 4; S++)
                for (int m = 1; m <= 8; m++) {
                    int layers[4] = {2, 2, 2, 2};
                    tg_pipe p;
                    tg_err_clear(&E);
                    TT_CHECK(tg_pipe_build(&p, S, m, (tg_pipe_sched)sched, layers, &E), "build: %s", E.msg);
                    if (!p.ops)
                        continue;
                    TT_CHECK(tg_pipe_simulate(&p, &E), "sched %d S %d m %d: %.300s", sched, S, m, E.msg);
                    /* equal stages: the makespan is (m + S - 1) * (F + B), F = 2 slots, B = 4 */
                    TT_CHECK(p.makespan == (long long)(m + S - 1) * 6, "sched %d S %d m %d: makespan %lld", sched, S,
                             m, p.makespan);
                    TT_CHECK(p.total == (long long)S * p.makespan && p.idle * (m + S - 1) == p.total * (S - 1),
                             "sched %d S %d m %d: bubble %lld / %lld, want (S-1)/(m+S-1)", sched, S, m, p.idle,
                             p.total);
                    for (int s = 0; s < S; s++) {
                        int want = sched == TG_PIPE_GPIPE ? m : (S - s < m ? S - s : m);
                        TT_CHECK(p.stash[s] == want, "sched %d S %d m %d stage %d: stash %d, want %d", sched, S, m, s,
                                 p.stash[s], want);
                        TT_CHECK(p.busy[s] == 6LL * m, "busy %lld", p.busy[s]);
                    }
                    tg_pipe_free(&p);
                }
    }

    TT_CASE("1f1b on 2 stages with 3 micro-batches: the literal order of each stage") {
        int layers[2] = {1, 3};
        tg_pipe p;
        tg_err_clear(&E);
        TT_CHECK(tg_pipe_build(&p, 2, 3, TG_PIPE_1F1B, layers, &E), "%s", E.msg);
        const char *want[2] = {"F0 sA0>1 F1 sA1>1+ rG0<1 B0 F2 sA2>1+ rG1<1 B1 rG2<1 B2",
                               "rA0<0 F0 B0 sG0>0+ rA1<0 F1 B1 sG1>0+ rA2<0 F2 B2 sG2>0"};
        for (int s = 0; s < 2 && p.ops; s++) {
            char got[512] = "";
            for (int k = 0; k < p.nops[s]; k++) {
                char w[32];
                tg_pipe_op_str(&p.ops[s][k], w, sizeof w);
                strcat(got, k ? " " : "");
                strcat(got, w);
            }
            TT_CHECK(strcmp(got, want[s]) == 0, "stage %d: %s", s, got);
        }
        /* unequal stages: stage 1 has 3 layers (F 3 slots, B 6), so stage 0 waits for it: its last B ends at 30 */
        TT_CHECK(tg_pipe_simulate(&p, &E), "%s", E.msg);
        TT_CHECK(p.busy[0] == 9 && p.busy[1] == 27 && p.makespan == 30, "busy %lld %lld makespan %lld", p.busy[0],
                 p.busy[1], p.makespan);
        tg_pipe_free(&p);
    }

    TT_CASE("two stages that both receive first are refused as a deadlock naming both steps") {
        int layers[2] = {1, 1}, n[2] = {4, 4};
        tg_pipe p;
        tg_err_clear(&E);
        TT_CHECK(tg_pipe_alloc(&p, 2, 1, layers, n, &E), "%s", E.msg);
        tg_pipe_op s0[4] = {{TG_PIPE_RECV_GRAD, 0, 1, 0, 0}, {TG_PIPE_FWD, 0, -1, 0, 0}, {TG_PIPE_SEND_ACT, 0, 1, 0, 0},
                            {TG_PIPE_BWD, 0, -1, 0, 0}};
        tg_pipe_op s1[4] = {{TG_PIPE_RECV_ACT, 0, 0, 0, 0}, {TG_PIPE_FWD, 0, -1, 0, 0}, {TG_PIPE_BWD, 0, -1, 0, 0},
                            {TG_PIPE_SEND_GRAD, 0, 0, 0, 0}};
        memcpy(p.ops[0], s0, sizeof s0);
        memcpy(p.ops[1], s1, sizeof s1);
        TT_CHECK(!tg_pipe_simulate(&p, &E), "accepted");
        TT_CHECK(has("pipeline schedule could deadlock (blocking send and receive)"), "%s", E.msg);
        TT_CHECK(has("stage 0 is blocked at step 0 (receive the gradient of micro-batch 0 from stage 1): stage 1 "
                     "waits at its step 0 (receive the activation of micro-batch 0 from stage 0)"),
                 "%s", E.msg);
        TT_CHECK(has("stage 1 is blocked at step 0 (receive the activation of micro-batch 0 from stage 0): stage 0 "
                     "waits at its step 0 (receive the gradient of micro-batch 0 from stage 1)"),
                 "%s", E.msg);
        tg_pipe_free(&p);
    }

    TT_CASE("swapped sends, a dropped receive and a wrong count are refused, naming stage, step and micro-batch") {
        int layers[3] = {1, 1, 1};
        tg_pipe p;
        /* swapped sends: stage 0 sends micro-batch 1's activation before micro-batch 0's */
        tg_err_clear(&E);
        TT_CHECK(tg_pipe_build(&p, 3, 4, TG_PIPE_1F1B, layers, &E), "%s", E.msg);
        int a = find(&p, 0, TG_PIPE_SEND_ACT, 0), b = find(&p, 0, TG_PIPE_SEND_ACT, 1);
        TT_CHECK(a >= 0 && b > a, "sends at %d %d", a, b);
        if (a >= 0 && b > a) {
            tg_pipe_op t = p.ops[0][a];
            p.ops[0][a] = p.ops[0][b];
            p.ops[0][b] = t;
        }
        TT_CHECK(!tg_pipe_simulate(&p, &E), "swapped sends accepted");
        TT_CHECK(has("stage 1 is blocked at step 0 (receive the activation of micro-batch 0 from stage 0): stage 0 "
                     "waits at its step 1 (send the activation of micro-batch 1 to stage 1)"),
                 "%s", E.msg);
        tg_pipe_free(&p);

        /* a dropped receive: stage 2 never receives micro-batch 3's activation, so stage 1's send of it waits */
        tg_err_clear(&E);
        TT_CHECK(tg_pipe_build(&p, 3, 4, TG_PIPE_GPIPE, layers, &E), "%s", E.msg);
        drop(&p, 2, find(&p, 2, TG_PIPE_RECV_ACT, 3));
        TT_CHECK(!tg_pipe_simulate(&p, &E), "dropped receive accepted");
        TT_CHECK(has("stage 1 is blocked at step 11 (send the activation of micro-batch 3 to stage 2): stage 2 "
                     "waits at its step"),
                 "%s", E.msg);
        tg_pipe_free(&p);

        /* a wrong count: stage 1 runs micro-batch 2's forward twice, and never micro-batch 3's backward */
        tg_err_clear(&E);
        TT_CHECK(tg_pipe_build(&p, 3, 4, TG_PIPE_GPIPE, layers, &E), "%s", E.msg);
        p.ops[1][find(&p, 1, TG_PIPE_FWD, 3)].mb = 2;
        TT_CHECK(!tg_pipe_simulate(&p, &E), "a forward run twice accepted");
        TT_CHECK(has("pipeline schedule: stage 1 step 10 runs the forward of micro-batch 2 a second time"), "%s",
                 E.msg);
        TT_CHECK(has("pipeline schedule: stage 1 never runs the forward of micro-batch 3"), "%s", E.msg);
        tg_pipe_free(&p);

        /* a backward before its forward, and a block sent past the next stage */
        tg_err_clear(&E);
        TT_CHECK(tg_pipe_build(&p, 3, 1, TG_PIPE_GPIPE, layers, &E), "%s", E.msg);
        tg_pipe_op t = p.ops[0][0];
        p.ops[0][0] = p.ops[0][3];
        p.ops[0][3] = t;
        p.ops[0][1].peer = 2;
        TT_CHECK(!tg_pipe_simulate(&p, &E), "accepted");
        TT_CHECK(has("stage 0 step 1 (send the activation of micro-batch 0 to stage 2): that block travels only "
                     "between stage 0 and stage 1"),
                 "%s", E.msg);
        tg_pipe_free(&p);
    }

    TT_CASE("the steps of every stage together are bounded") {
        int layers[1] = {1};
        tg_pipe p;
        tg_err_clear(&E);
        TT_CHECK(!tg_pipe_build(&p, 1, 1 << 24, TG_PIPE_1F1B, layers, &E), "accepted");
        TT_CHECK(has("pipeline schedule: mesh.pp = 1 with pipeline.microbatches = 16777216 makes 33554432 send, "
                     "receive and compute steps, more than the 16777216 tessgen proves"),
                 "%s", E.msg);
    }
    /* tg_pipe_time: the same proved lists with durations in seconds (the cost model's). Equal stages with no
     * communication: every stage does m forwards and m backwards and waits S - 1 forwards and S - 1 backwards
     * (the fill and the drain), so both schedules take (m + S - 1) * (F + B). */
    TT_CASE("timed in seconds, equal stages without communication take (m + S - 1) * (F + B) with either schedule") {
        for (int sched = 0; sched < 2; sched++)
            for (int S = 2; S <= 4; S++)
                for (int m = 1; m <= 6; m++) {
                    int layers[4] = {1, 1, 1, 1};
                    double F[4] = {1.5, 1.5, 1.5, 1.5}, B[4] = {3, 3, 3, 3}, end[4], busy[4];
                    tg_pipe p;
                    tg_err_clear(&E);
                    TT_CHECK(tg_pipe_build(&p, S, m, (tg_pipe_sched)sched, layers, &E), "%s", E.msg);
                    tg_pipe_durs d = {F, B, NULL, NULL};
                    TT_CHECK(tg_pipe_time(&p, &d, end, busy, &E), "%s", E.msg);
                    double span = 0;
                    for (int s = 0; s < S; s++) {
                        span = end[s] > span ? end[s] : span;
                        TT_CHECK(busy[s] == m * 4.5, "stage %d busy %g", s, busy[s]);
                    }
                    TT_CHECK(span == (m + S - 1) * 4.5, "sched %d S %d m %d: %g, want %g", sched, S, m, span,
                             (m + S - 1) * 4.5);
                    tg_pipe_free(&p);
                }
    }

    /* Unequal stages: stage 1 (F1 = 3, B1 = 6) is three times stage 0 (F0 = 1, B0 = 2). Once the first activation
     * arrives (after F0) the last stage never waits, so both schedules take F0 + m (F1 + B1) + B0 = 1 + 36 + 2 = 39
     * for m = 4; a slow last backward of micro-batch m - 1 (the gradients' all-reduces) adds its difference once. */
    TT_CASE("timed in seconds, a slower last stage takes F0 + m (F1 + B1) + B0 with either schedule") {
        for (int sched = 0; sched < 2; sched++) {
            int layers[2] = {1, 3};
            double F[2] = {1, 3}, B[2] = {2, 6}, Bl[2] = {2, 7.5}, end[2], busy[2];
            tg_pipe p;
            tg_err_clear(&E);
            TT_CHECK(tg_pipe_build(&p, 2, 4, (tg_pipe_sched)sched, layers, &E), "%s", E.msg);
            tg_pipe_durs d = {F, B, NULL, NULL};
            TT_CHECK(tg_pipe_time(&p, &d, end, busy, &E), "%s", E.msg);
            TT_CHECK(end[0] == 39 && end[1] == 37, "sched %d: ends %g %g, want 39 37", sched, end[0], end[1]);
            TT_CHECK(busy[0] == 12 && busy[1] == 36, "sched %d: busy %g %g", sched, busy[0], busy[1]);
            d.bwd_last = Bl;
            TT_CHECK(tg_pipe_time(&p, &d, end, busy, &E), "%s", E.msg);
            TT_CHECK(end[0] == 40.5 && busy[1] == 37.5, "sched %d: end %g busy %g, want 40.5 37.5", sched, end[0],
                     busy[1]);
            tg_pipe_free(&p);
        }
    }

    /* Point-to-point time c per block: with one micro-batch nothing overlaps, every block is waited for,
     * S (F + B) + 2 (S - 1) c. With gpipe, 2 equal stages (F = 1, B = 2), c = 0.5 and m = 4, worked by hand: the
     * blocking sends pace the forwards: stage 1's F(u) starts at 1.5, 3, 4.5, 6 (each after the previous F and the
     * block), its B(u) at 7, 9.5, 12, 14.5 (each after the previous gradient's send), stage 0's B(3) after the last
     * gradient at 17: 19, not the 15 of c = 0. */
    TT_CASE("timed in seconds, a point-to-point time adds where the schedule waits for the block") {
        for (int sched = 0; sched < 2; sched++)
            for (int S = 2; S <= 4; S++) {
                int layers[4] = {1, 1, 1, 1};
                double F[4] = {1, 1, 1, 1}, B[4] = {2, 2, 2, 2}, c[3] = {0.5, 0.5, 0.5}, end[4], busy[4];
                tg_pipe p;
                tg_err_clear(&E);
                TT_CHECK(tg_pipe_build(&p, S, 1, (tg_pipe_sched)sched, layers, &E), "%s", E.msg);
                tg_pipe_durs d = {F, B, NULL, c};
                TT_CHECK(tg_pipe_time(&p, &d, end, busy, &E), "%s", E.msg);
                TT_CHECK(end[0] == S * 3 + 2 * (S - 1) * 0.5, "sched %d S %d: %g", sched, S, end[0]);
                tg_pipe_free(&p);
            }
        int layers[2] = {1, 1};
        double F[2] = {1, 1}, B[2] = {2, 2}, c[1] = {0.5}, end[2], busy[2];
        tg_pipe p;
        tg_err_clear(&E);
        TT_CHECK(tg_pipe_build(&p, 2, 4, TG_PIPE_GPIPE, layers, &E), "%s", E.msg);
        tg_pipe_durs d = {F, B, NULL, c};
        TT_CHECK(tg_pipe_time(&p, &d, end, busy, &E), "%s", E.msg);
        TT_CHECK(end[0] == 19 && end[1] == 17 && busy[0] == 12, "ends %g %g busy %g, want 19 17 12", end[0], end[1],
                 busy[0]);
        /* and the slot proof still sees no communication: makespan (m + S - 1) * 3 slots */
        TT_CHECK(tg_pipe_simulate(&p, &E) && p.makespan == 15, "makespan %lld", p.makespan);
        tg_pipe_free(&p);
    }
    TT_EXIT();
}
