/*
 * pipe.c - the pipeline schedule of mesh.pp = S stages and its proof before launch (pipe.h).
 *
 * tg_pipe_build writes each stage's ordered list of operations for "gpipe" or "1f1b"; tg_pipe_simulate runs
 * the S lists against each other with blocking send and receive (a rendezvous: both sides complete together,
 * at the later of their two clocks) until no stage can move. Stages left with steps then are deadlocked; each
 * is reported with its step, its operation and micro-batch, and what its peer is blocked on (or that the peer
 * has finished). The simulation is deterministic: every stage runs its list in order, and a pair of
 * operations can only complete together, so the order in which stages are visited changes neither the result
 * nor the clocks. Durations: F takes layers[s] slots, B 2*layers[s], communication 0 (the bubble's usual
 * model); tg_pipe_time runs the same simulation with the cost model's seconds per op instead (gen/pipe_cost.c):
 * a send and its receive then both end at the later of the two clocks plus the block's transfer time. The proof reads only the lists, so the check covers
 * whatever order the emitters print from them.
 */
#include "pipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tg_pipe_free(tg_pipe *p)
{
    if (p->ops)
        for (int s = 0; s < p->S; s++)
            free(p->ops[s]);
    free(p->ops);
    free(p->nops);
    free(p->layers);
    free(p->busy);
    free(p->stash);
    memset(p, 0, sizeof *p);
}

bool tg_pipe_alloc(tg_pipe *p, int S, int m, const int *layers, const int *n, tg_err *err)
{
    memset(p, 0, sizeof *p);
    if (S < 1 || m < 1)
        return tg_fail(err, "pipeline schedule: internal: %d stages, %d micro-batches", S, m);
    long long all = 0;
    for (int s = 0; s < S; s++)
        all += n[s];
    if (all > TG_PIPE_MAX_OPS)
        return tg_fail(err, "pipeline schedule: mesh.pp = %d with pipeline.microbatches = %d makes %lld send, receive "
                            "and compute steps, more than the %lld tessgen proves; use fewer stages or micro-batches",
                       S, m, all, TG_PIPE_MAX_OPS);
    p->S = S;
    p->m = m;
    p->layers = calloc((size_t)S, sizeof *p->layers);
    p->nops = calloc((size_t)S, sizeof *p->nops);
    p->ops = calloc((size_t)S, sizeof *p->ops);
    p->busy = calloc((size_t)S, sizeof *p->busy);
    p->stash = calloc((size_t)S, sizeof *p->stash);
    bool ok = p->layers && p->nops && p->ops && p->busy && p->stash;
    for (int s = 0; ok && s < S; s++) {
        p->layers[s] = layers[s];
        p->nops[s] = n[s];
        p->ops[s] = calloc(n[s] > 0 ? (size_t)n[s] : 1, sizeof *p->ops[s]);
        ok = p->ops[s] != NULL;
    }
    if (!ok) {
        tg_pipe_free(p);
        return tg_fail(err, "pipeline schedule: out of memory");
    }
    return true;
}

/* Append op to stage s's list. */
static void put(tg_pipe *p, int s, int *k, int kind, int mb, int peer, int joint)
{
    p->ops[s][(*k)++] = (tg_pipe_op){kind, mb, peer, joint, 0};
}

/* Append F(u) or B(u) with the receive before and the send after it (each a blocking call of its own). */
static void put_phase(tg_pipe *p, int s, int fwd, int u, int *k)
{
    if (fwd) {
        if (s > 0)
            put(p, s, k, TG_PIPE_RECV_ACT, u, s - 1, 0);
        put(p, s, k, TG_PIPE_FWD, u, -1, 0);
        if (s < p->S - 1)
            put(p, s, k, TG_PIPE_SEND_ACT, u, s + 1, 0);
    } else {
        if (s < p->S - 1)
            put(p, s, k, TG_PIPE_RECV_GRAD, u, s + 1, 0);
        put(p, s, k, TG_PIPE_BWD, u, -1, 0);
        if (s > 0)
            put(p, s, k, TG_PIPE_SEND_GRAD, u, s - 1, 0);
    }
}

bool tg_pipe_build(tg_pipe *p, int S, int m, tg_pipe_sched sched, const int *layers, tg_err *err)
{
    if (S < 1 || m < 1)
        return tg_fail(err, "pipeline schedule: internal: %d stages, %d micro-batches", S, m);
    long long all = 0;
    for (int s = 0; s < S; s++) /* F and B of each micro-batch, each with a receive and a send inside the pipe */
        all += (long long)m * (2 + (s > 0) * 2 + (s < S - 1) * 2);
    if (all > TG_PIPE_MAX_OPS)
        return tg_fail(err, "pipeline schedule: mesh.pp = %d with pipeline.microbatches = %d makes %lld send, receive "
                            "and compute steps, more than the %lld tessgen proves; use fewer stages or micro-batches",
                       S, m, all, TG_PIPE_MAX_OPS);
    int *n = calloc((size_t)S, sizeof *n);
    if (!n)
        return tg_fail(err, "pipeline schedule: out of memory");
    for (int s = 0; s < S; s++)
        n[s] = m * (2 + (s > 0) * 2 + (s < S - 1) * 2);
    bool ok = tg_pipe_alloc(p, S, m, layers, n, err);
    free(n);
    if (!ok)
        return false;
    p->sched = sched;
    for (int s = 0; s < S; s++) {
        int k = 0;
        if (sched == TG_PIPE_GPIPE) {
            for (int u = 0; u < m; u++)
                put_phase(p, s, 1, u, &k);
            for (int u = 0; u < m; u++)
                put_phase(p, s, 0, u, &k);
        } else {
            int w = S - s - 1 < m ? S - s - 1 : m, first = s > 0, last = s < S - 1 ? 0 : 1;
            for (int u = 0; u < w; u++)
                put_phase(p, s, 1, u, &k);
            if (w < m && first)
                put(p, s, &k, TG_PIPE_RECV_ACT, w, s - 1, 0);
            for (int i = 0; i < m - w; i++) { /* steady: F(w+i), then B(i), each exchange joint */
                put(p, s, &k, TG_PIPE_FWD, w + i, -1, 0);
                if (!last) {
                    put(p, s, &k, TG_PIPE_SEND_ACT, w + i, s + 1, 1);
                    put(p, s, &k, TG_PIPE_RECV_GRAD, i, s + 1, 0);
                }
                put(p, s, &k, TG_PIPE_BWD, i, -1, 0);
                if (first) {
                    int more = i + 1 < m - w;
                    put(p, s, &k, TG_PIPE_SEND_GRAD, i, s - 1, more);
                    if (more)
                        put(p, s, &k, TG_PIPE_RECV_ACT, w + i + 1, s - 1, 0);
                }
            }
            for (int u = m - w; u < m; u++)
                put_phase(p, s, 0, u, &k);
        }
        if (k != p->nops[s]) {
            int want = p->nops[s];
            tg_pipe_free(p);
            return tg_fail(err, "pipeline schedule: internal: stage %d has %d steps, %d counted", s, k, want);
        }
    }
    return true;
}

void tg_pipe_op_str(const tg_pipe_op *op, char *out, size_t cap)
{
    switch (op->kind) {
    case TG_PIPE_FWD: snprintf(out, cap, "F%d", op->mb); break;
    case TG_PIPE_BWD: snprintf(out, cap, "B%d", op->mb); break;
    case TG_PIPE_SEND_ACT: snprintf(out, cap, "sA%d>%d", op->mb, op->peer); break;
    case TG_PIPE_RECV_ACT: snprintf(out, cap, "rA%d<%d", op->mb, op->peer); break;
    case TG_PIPE_SEND_GRAD: snprintf(out, cap, "sG%d>%d", op->mb, op->peer); break;
    case TG_PIPE_RECV_GRAD: snprintf(out, cap, "rG%d<%d", op->mb, op->peer); break;
    default: snprintf(out, cap, "?%d", op->kind); break;
    }
    size_t n = strlen(out);
    if (op->joint && n + 1 < cap)
        out[n] = '+', out[n + 1] = '\0';
}

/* "receive the activation of micro-batch 0 from stage 1" */
static void op_words(const tg_pipe_op *op, char *out, size_t cap)
{
    switch (op->kind) {
    case TG_PIPE_FWD: snprintf(out, cap, "forward of micro-batch %d", op->mb); break;
    case TG_PIPE_BWD: snprintf(out, cap, "backward of micro-batch %d", op->mb); break;
    case TG_PIPE_SEND_ACT:
        snprintf(out, cap, "send the activation of micro-batch %d to stage %d", op->mb, op->peer);
        break;
    case TG_PIPE_RECV_ACT:
        snprintf(out, cap, "receive the activation of micro-batch %d from stage %d", op->mb, op->peer);
        break;
    case TG_PIPE_SEND_GRAD:
        snprintf(out, cap, "send the gradient of micro-batch %d to stage %d", op->mb, op->peer);
        break;
    case TG_PIPE_RECV_GRAD:
        snprintf(out, cap, "receive the gradient of micro-batch %d from stage %d", op->mb, op->peer);
        break;
    default: snprintf(out, cap, "unknown step %d", op->kind); break;
    }
}

static bool is_comm(int kind) { return kind >= TG_PIPE_SEND_ACT && kind <= TG_PIPE_RECV_GRAD; }

#define TG_PIPE_MAX_JOINT 8 /* steps of one posted group (check_lists refuses longer ones) */

/* One past the last step of the group posted at step k of stage s: k and the joint steps after it. */
static int group_end(const tg_pipe *p, int s, int k)
{
    while (k < p->nops[s] - 1 && p->ops[s][k].joint)
        k++;
    return k + 1;
}

/* The operation that completes op of stage s on its peer: the same block and micro-batch, the other side. */
static bool matches(const tg_pipe_op *op, int s, const tg_pipe_op *other)
{
    int want = op->kind == TG_PIPE_SEND_ACT    ? TG_PIPE_RECV_ACT
               : op->kind == TG_PIPE_RECV_ACT  ? TG_PIPE_SEND_ACT
               : op->kind == TG_PIPE_SEND_GRAD ? TG_PIPE_RECV_GRAD
                                               : TG_PIPE_SEND_GRAD;
    return other->kind == want && other->mb == op->mb && other->peer == s;
}

/* Each stage's list on its own: micro-batches and peers in range, sends and receives to the neighbour their
 * block travels to, F(u) and B(u) once each, B(u) after F(u). */
static bool check_lists(const tg_pipe *p, tg_err *err)
{
    int S = p->S, m = p->m, bad = 0;
    unsigned char *seen = malloc((size_t)m);
    if (!seen)
        return tg_fail(err, "pipeline schedule: out of memory");
    for (int s = 0; s < S && bad < 8; s++) {
        memset(seen, 0, (size_t)m); /* bit 1: F done, bit 2: B done */
        for (int k = 0; k < p->nops[s] && bad < 8; k++) {
            const tg_pipe_op *o = &p->ops[s][k];
            char w[160];
            op_words(o, w, sizeof w);
            if (o->mb < 0 || o->mb >= m || o->kind < TG_PIPE_FWD || o->kind > TG_PIPE_RECV_GRAD) {
                bad++, tg_fail(err, "pipeline schedule: stage %d step %d (%s) names micro-batch %d of %d", s, k, w,
                               o->mb, m);
                continue;
            }
            if (o->joint && k >= TG_PIPE_MAX_JOINT - 1 && p->ops[s][k - TG_PIPE_MAX_JOINT + 1].joint) {
                bad++, tg_fail(err, "pipeline schedule: stage %d step %d (%s) joins more than %d steps into one "
                                    "exchange", s, k, w, TG_PIPE_MAX_JOINT);
                continue;
            }
            if (o->joint && (!is_comm(o->kind) || k + 1 >= p->nops[s] || !is_comm(p->ops[s][k + 1].kind))) {
                bad++, tg_fail(err, "pipeline schedule: stage %d step %d (%s) is joined to a next step that is not "
                                    "a send or receive", s, k, w);
                continue;
            }
            if (is_comm(o->kind)) {
                int want = o->kind == TG_PIPE_SEND_ACT || o->kind == TG_PIPE_RECV_GRAD ? s + 1 : s - 1;
                if (o->peer != want || want < 0 || want >= S)
                    bad++, tg_fail(err, "pipeline schedule: stage %d step %d (%s): that block travels only between "
                                        "stage %d and stage %d", s, k, w, s, want);
                continue;
            }
            int bit = o->kind == TG_PIPE_FWD ? 1 : 2;
            if (seen[o->mb] & bit)
                bad++, tg_fail(err, "pipeline schedule: stage %d step %d runs the %s a second time", s, k, w);
            else if (bit == 2 && !(seen[o->mb] & 1))
                bad++, tg_fail(err, "pipeline schedule: stage %d step %d runs the %s before its forward", s, k, w);
            seen[o->mb] |= (unsigned char)bit;
        }
        for (int u = 0; u < m && bad < 8; u++)
            if (seen[u] != 3)
                bad++, tg_fail(err, "pipeline schedule: stage %d never runs the %s of micro-batch %d", s,
                               seen[u] & 1 ? "backward" : "forward", u);
    }
    free(seen);
    return bad == 0;
}

/* The duration of op on stage s: with d, its seconds (pipe.h tg_pipe_durs); without, its slots (F layers,
 * B twice that, communication none). */
static double op_time(const tg_pipe *p, const tg_pipe_durs *d, int s, const tg_pipe_op *o)
{
    if (!d)
        return is_comm(o->kind) ? 0.0 : (double)p->layers[s] * (o->kind == TG_PIPE_FWD ? 1 : 2);
    if (o->kind == TG_PIPE_FWD)
        return d->fwd[s];
    if (o->kind == TG_PIPE_BWD)
        return o->mb == p->m - 1 && d->bwd_last ? d->bwd_last[s] : d->bwd[s];
    return d->p2p ? d->p2p[s < o->peer ? s : o->peer] : 0.0;
}

/* The event run of tg_pipe_simulate and tg_pipe_time: every stage's list with blocking send and receive, each op
 * taking op_time; t[s]: stage s's clock at its end, busy[s]: its F and B time; the ops' at (slots) only without d. */
static bool run(tg_pipe *p, const tg_pipe_durs *d, double *t, double *busy, tg_err *err)
{
    int S = p->S;
    if (S < 1 || p->m < 1)
        return tg_fail(err, "pipeline schedule: internal: %d stages, %d micro-batches", S, p->m);
    if (!check_lists(p, err))
        return false;
    int *pc = calloc((size_t)S, sizeof *pc), *live = calloc((size_t)S, sizeof *live);
    double *gt = calloc((size_t)S, sizeof *gt);
    unsigned char(*done)[TG_PIPE_MAX_JOINT] = calloc((size_t)S, sizeof *done);
    if (!pc || !live || !gt || !done) {
        free(pc), free(live), free(gt), free(done);
        return tg_fail(err, "pipeline schedule: out of memory");
    }
    for (int s = 0; s < S; s++)
        t[s] = busy[s] = 0, p->stash[s] = 0;
    /* a stage at a send or receive has posted its group: that step and the joint ones after it (end[s]); each
     * completes with a matching step in the peer's posted group, the group when all its steps have */
    bool moved = true;
    while (moved) {
        moved = false;
        for (int s = 0; s < S; s++) {
            while (pc[s] < p->nops[s]) {
                tg_pipe_op *o = &p->ops[s][pc[s]];
                if (!is_comm(o->kind)) {
                    double dt = op_time(p, d, s, o);
                    if (!d)
                        o->at = (long long)t[s];
                    t[s] += dt;
                    busy[s] += dt;
                    live[s] += o->kind == TG_PIPE_FWD ? 1 : -1;
                    if (live[s] > p->stash[s])
                        p->stash[s] = live[s];
                    pc[s]++;
                    moved = true;
                    continue;
                }
                int end = group_end(p, s, pc[s]), all = 1;
                for (int k = pc[s]; k < end; k++) {
                    if (done[s][k - pc[s]])
                        continue;
                    const tg_pipe_op *a = &p->ops[s][k];
                    int q = a->peer, qe = pc[q] < p->nops[q] && is_comm(p->ops[q][pc[q]].kind) ? group_end(p, q, pc[q])
                                                                                                 : pc[q];
                    int hit = -1;
                    for (int j = pc[q]; j < qe && hit < 0; j++)
                        if (!done[q][j - pc[q]] && matches(a, s, &p->ops[q][j]))
                            hit = j;
                    if (hit < 0) {
                        all = 0;
                        continue;
                    }
                    double at = (t[s] > t[q] ? t[s] : t[q]) + op_time(p, d, s, a); /* both sides end together */
                    done[s][k - pc[s]] = done[q][hit - pc[q]] = 1;
                    gt[s] = gt[s] > at ? gt[s] : at;
                    gt[q] = gt[q] > at ? gt[q] : at;
                    moved = true;
                }
                if (!all)
                    break;
                t[s] = gt[s] > t[s] ? gt[s] : t[s];
                for (int k = pc[s]; k < end && !d; k++)
                    p->ops[s][k].at = (long long)t[s];
                memset(done[s], 0, sizeof done[s]);
                gt[s] = 0;
                pc[s] = end;
            }
        }
    }
    int stuck = 0;
    for (int s = 0; s < S; s++) {
        if (pc[s] >= p->nops[s])
            continue;
        int at = pc[s];
        while (done[s][at - pc[s]])
            at++;
        const tg_pipe_op *o = &p->ops[s][at];
        int q = o->peer, qat = pc[q];
        while (qat < p->nops[q] && done[q][qat - pc[q]])
            qat++;
        char w[160], wq[160];
        op_words(o, w, sizeof w);
        if (!stuck)
            tg_fail(err, "pipeline schedule could deadlock (blocking send and receive): no stage can move with "
                         "these steps left; fix the order of pipeline.schedule's steps");
        if (qat >= p->nops[q]) {
            tg_fail(err, "  stage %d is blocked at step %d (%s): stage %d has finished its %d steps", s, at, w, q,
                    p->nops[q]);
        } else {
            op_words(&p->ops[q][qat], wq, sizeof wq);
            tg_fail(err, "  stage %d is blocked at step %d (%s): stage %d waits at its step %d (%s)", s, at, w, q,
                    qat, wq);
        }
        stuck++;
    }
    free(pc), free(live), free(gt), free(done);
    return stuck == 0;
}

bool tg_pipe_simulate(tg_pipe *p, tg_err *err)
{
    int S = p->S > 0 ? p->S : 1;
    double *t = calloc((size_t)S, sizeof *t), *busy = calloc((size_t)S, sizeof *busy);
    if (!t || !busy) {
        free(t), free(busy);
        return tg_fail(err, "pipeline schedule: out of memory");
    }
    bool ok = run(p, NULL, t, busy, err); /* whole slots: exact in a double below 2^53 */
    long long span = 0;
    for (int s = 0; s < p->S; s++) {
        p->busy[s] = (long long)busy[s];
        span = (long long)t[s] > span ? (long long)t[s] : span;
    }
    p->makespan = span;
    p->total = span * p->S;
    p->idle = p->total;
    for (int s = 0; s < p->S; s++)
        p->idle -= p->busy[s];
    free(t), free(busy);
    return ok;
}

bool tg_pipe_time(tg_pipe *p, const tg_pipe_durs *d, double *end, double *busy, tg_err *err)
{
    return run(p, d, end, busy, err);
}

bool tg_pipe_can_emit(const tg_spec *s, const char *what, tg_err *err)
{
    if (s->pp <= 1)
        return true;
    if (strcmp(what, "generating") == 0)
        return true; /* the block stack's and the language model's stages: the CPU backend (the CUDA backend is not
                      * offered, main.c) */
    return tg_fail(err, "%s: mesh.pp = %d: the stage programs are generated and run, but %s does not cover pipeline "
                        "stages yet, so %s is refused; the schedule is proved and shown by tessgen %s --summary "
                        "(docs/TRAINING.md \"Pipeline stages\")",
                   s->path, s->pp, what, what, s->path);
}

bool tg_pipe_summary(const tg_spec *s, tg_sb *out, tg_err *err)
{
    tg_pipe p;
    int S = s->pp, m = s->microbatches, P = s->q * s->q * s->d;
    if (!tg_pipe_build(&p, S, m, s->schedule, s->stage_layers, err))
        return false;
    bool ok = tg_pipe_simulate(&p, err);
    if (ok) {
        tg_sb_printf(out, "pipeline: %d stages of [%d,%d,%d] (%d ranks; stage s holds ranks s*%d .. s*%d+%d), "
                          "schedule %s, %d micro-batch%s per step\n",
                     S, s->q, s->q, s->d, S * P, P, P, P - 1, s->schedule == TG_PIPE_GPIPE ? "gpipe" : "1f1b", m,
                     m == 1 ? "" : "es");
        int first = 0;
        for (int st = 0; st < S; st++) {
            int n = s->stage_layers[st];
            tg_sb_printf(out, "  stage %d: layers %d..%d%s%s, stash %d micro-batch%s, busy %lld of %lld slots:", st,
                         first, first + n - 1, st == 0 && s->vocab > 0 ? " + embedding" : "",
                         st == S - 1 ? (s->vocab > 0 ? " + ln_f, tied head, loss" : " + loss") : "", p.stash[st],
                         p.stash[st] == 1 ? "" : "es", p.busy[st], p.makespan);
            int shown = 0;
            for (int k = 0; k < p.nops[st] && shown < 48; k++, shown++) {
                char w[32];
                tg_pipe_op_str(&p.ops[st][k], w, sizeof w);
                tg_sb_printf(out, " %s", w);
            }
            if (p.nops[st] > shown)
                tg_sb_printf(out, " .. (%d steps)", p.nops[st]);
            tg_sb_puts(out, "\n");
            first += n;
        }
        tg_sb_printf(out, "  bubble: %lld idle of %lld stage-slots (%.1f%%; F = layers slots, B = 2*layers; equal "
                          "stages give (S-1)/(m+S-1) = %.1f%%); no deadlock with blocking send/receive\n",
                     p.idle, p.total, p.total ? 100.0 * (double)p.idle / (double)p.total : 0.0,
                     100.0 * (S - 1) / (double)(m + S - 1));
        if (s->vocab > 0) { /* the tied wte gradient: block E(i, j) [Vq, C/q] of each rank, once per step */
            long long vq = tg_spec_vocab_block(s, s->q), n = vq * (s->hidden / s->q);
            tg_sb_printf(out, "  tied wte gradient: stage 0 and stage %d exchange and add it after the last backward, "
                              "every step: %lld floats (%lld bytes) each way per rank (Vq x C/q = %lld x %d)\n",
                         S - 1, n, 4 * n, vq, s->hidden / s->q);
        }
    }
    tg_pipe_free(&p);
    return ok;
}
