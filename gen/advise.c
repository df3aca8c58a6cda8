/*
 * advise.c - the mesh advisor of advise.h: enumerate the layouts of a model
 * on P ranks, judge each with the spec rules and the work bound, plan its
 * class (0,0) for inference and for training, cost both (cost.c), and rank.
 *
 * Planning one class per layout and mode keeps the advisor's work to a few
 * class plans per divisor of P, whatever the rank count. Every class of a
 * Tesseract mesh runs the same steps on the same shapes (only roots and
 * members differ), and the ranks of a Megatron group all do the same, so
 * class (0,0) stands for the mesh; its group members, placed on nodes, decide
 * which links it crosses.
 *
 * A training spec's pipeline candidates (advise.h) are costed by pipe_cost.c's own step (tg_pipe_cost_step, the
 * function --cost prints), so a row's step time is the one --cost gives for the spec lines it suggests; their
 * memory is its per-stage arena + stash, the figure --summary prints for each stage.
 */
#include "advise.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "pipe_cost.h"
#include "plan.h"

/* The first line of a message into buf (messages are one line each; a long one is cut). */
static void first_line(char *buf, size_t cap, const char *msg)
{
    size_t n = strcspn(msg, "\n");
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, msg, n);
    buf[n] = '\0';
}

/* Plan class (0,0) of spec s and cost it; false with why filled when the bound or the planner refuses. */
static bool cost_layout(const tg_spec *s, const tg_machine *mc, tg_cost *cost, char *why, size_t cap)
{
    tg_plan pl;
    tg_plan_init(s, &pl);
    tg_err e = {{0}, 0};
    tg_class_plan cp;
    if (!tg_bounds_work(&pl, &e) || !tg_plan_class(&pl, 0, 0, &cp, &e)) {
        size_t n = strlen(s->path); /* the rule, without the "FILE: " the bound's message starts with */
        first_line(why, cap, !strncmp(e.msg, s->path, n) && !strncmp(e.msg + n, ": ", 2) ? e.msg + n + 2 : e.msg);
        return false;
    }
    bool ok = tg_cost_class(&pl, &cp, mc, cost, &e);
    if (!ok)
        first_line(why, cap, e.msg);
    tg_class_free(&cp);
    return ok;
}

/* The arena of one rank of spec s (its mode) with `layers` layers, or -1 when it cannot be planned. */
static long long arena_with_layers(const tg_spec *s, const tg_machine *mc, int layers)
{
    tg_spec t = *s;
    t.layers = layers;
    if (t.recompute > layers || t.recompute == s->layers) /* "full" stays full */
        t.recompute = layers;
    tg_cost c;
    char why[256];
    if (!cost_layout(&t, mc, &c, why, sizeof why))
        return -1;
    long long b = c.peak_bytes;
    tg_cost_free(&c);
    return b;
}

/* A training candidate's memory options, short ("mb=2 rc=all shard", "rc=3": the first 3 layers; "-": none). */
static void options_text(const tg_candidate *c, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s", "");
    if (c->microbatches > 1)
        n += snprintf(buf + n, cap - (size_t)n, "%smb=%d", n ? " " : "", c->microbatches);
    if (c->recompute > 0 && c->recompute >= c->layers && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, "%src=all", n ? " " : "");
    else if (c->recompute > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, "%src=%d", n ? " " : "", c->recompute);
    if (c->shard && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, "%sshard", n ? " " : "");
    if (n == 0)
        snprintf(buf, cap, "-");
}

/* The training options of spec s as candidate c's (what the figures and the spec lines are of). */
static void take_options(tg_candidate *c, const tg_spec *s)
{
    c->microbatches = s->microbatches > 1 ? s->microbatches : 1;
    c->recompute = s->recompute;
    c->layers = s->layers;
    c->shard = s->opt.shard;
}

/* The training step's figures of a costed layout into c. */
static void take_train(tg_candidate *c, const tg_spec *spec, const tg_machine *mc, const tg_cost *ct)
{
    memcpy(c->train, ct->phase, sizeof c->train);
    c->train_step_s = ct->phase[0].streams_s + ct->phase[1].streams_s + ct->phase[2].streams_s;
    c->step_s = c->train_step_s;
    c->tokens_per_s = c->step_s > 0 ? (double)spec->batch * spec->seq / c->step_s : 0;
    double peak = tg_cost_peak_flops(spec, mc) * c->p;
    c->mfu = c->step_s > 0 && peak > 0 ? tg_cost_model_flops(spec, true) / (c->step_s * peak) : 0;
    c->peak_bytes = ct->peak_bytes;
    c->fits = (double)c->peak_bytes <= mc->memory_gib * (double)(1LL << 30);
}

/* One combination of training options, costed: its step time and arena; false when it cannot be planned. */
static bool try_options(const tg_spec *s, int m, int rc, bool shard, const tg_machine *mc, tg_spec *t, double *ts,
                        long long *bytes)
{
    *t = *s;
    t->microbatches = m;
    t->recompute = rc;
    t->opt.shard = shard;
    tg_cost ct;
    char why[256];
    if (!cost_layout(t, mc, &ct, why, sizeof why))
        return false;
    *ts = ct.phase[0].streams_s + ct.phase[1].streams_s + ct.phase[2].streams_s;
    *bytes = ct.peak_bytes;
    tg_cost_free(&ct);
    return true;
}

/* A Tesseract training layout whose arena does not fit with the spec's own options at its row's micro-batch count m
 * (every m the rules allow is a row of its own, tg_advise): try the options that trade time for memory
 * (docs/COST.md "Training options"): recomputation (none, every layer, the spec's own) and, with d > 1 in fp32, the
 * AdamW state sharded over depth (kept on: less memory for about the same time). c gets the fastest combination that
 * fits, else the one of least memory; *s becomes that combination's spec (for fit_fix). At most 3 class plans. */
static void search_options(tg_spec *s, const tg_machine *mc, tg_candidate *c)
{
    int m = s->microbatches > 1 ? s->microbatches : 1;
    int rcs[3] = {0, s->layers, s->recompute}, nrc = s->recompute > 0 && s->recompute < s->layers ? 3 : 2;
    bool shard = s->d > 1 && s->dtype == TG_FP32;
    double cap = mc->memory_gib * (double)(1LL << 30);
    tg_spec best_fit = *s, least = *s, t;
    double best_t = 0, ts;
    long long least_b = c->peak_bytes, bytes;
    bool found = false;
    for (int r = 0; r < nrc; r++) {
        if (!try_options(s, m, rcs[r], shard, mc, &t, &ts, &bytes))
            continue;
        if (bytes < least_b) {
            least_b = bytes;
            least = t;
        }
        if ((double)bytes <= cap && (!found || ts < best_t)) {
            found = true;
            best_t = ts;
            best_fit = t;
        }
    }
    *s = found ? best_fit : least;
    tg_cost ct;
    char why[256];
    if (!cost_layout(s, mc, &ct, why, sizeof why))
        return; /* planned above */
    take_train(c, s, mc, &ct);
    take_options(c, s);
    tg_cost_free(&ct);
}

/* A layout whose arena does not fit: the change that makes it fit, as a spec would write it. The arena
 * grows with the layers, so the largest depth that fits is found by bisection (log2(layers) plans of one
 * class); the memory it needs is the other way. */
static void fit_fix(const tg_spec *s, const tg_machine *mc, tg_candidate *c)
{
    double cap = mc->memory_gib * (double)(1LL << 30), need = (double)c->peak_bytes / (double)(1LL << 30);
    int lo = 0, hi = s->layers; /* lo fits (0: nothing does), hi does not */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        long long b = arena_with_layers(s, mc, mid);
        if (b >= 0 && (double)b <= cap)
            lo = mid;
        else
            hi = mid;
    }
    char opts[64] = "";
    if (s->mode == TG_TRAIN && (s->microbatches > 1 || s->recompute > 0 || s->opt.shard)) {
        char t[48];
        options_text(c, t, sizeof t);
        snprintf(opts, sizeof opts, " (options %s)", t);
    }
    if (lo > 0)
        snprintf(c->fix, sizeof c->fix,
                 "fits with model.layers = %d (of %d)%s, or on a machine with memory_gib >= %.2f", lo, s->layers, opts,
                 need);
    else
        snprintf(c->fix, sizeof c->fix, "fits only on a machine with memory_gib >= %.2f (one layer does not fit)",
                 need);
}

/* Judge and time one layout; c holds its mesh and placement. */
static void judge(const tg_spec *spec, const tg_machine *mc, tg_candidate *c)
{
    tg_spec s;
    tg_err e = {{0}, 0};
    bool ok = c->megatron ? tg_spec_on_megatron(spec, c->p, &s, &e) : tg_spec_on_mesh(spec, c->q, c->d, &s, &e);
    if (!ok) {
        /* the first rule, without the "FILE as [q,q,d]: " it starts with */
        const char *rest = strstr(e.msg, ": ");
        first_line(c->why, sizeof c->why, rest && rest < e.msg + strcspn(e.msg, "\n") ? rest + 2 : e.msg);
        return;
    }
    if (!c->megatron)
        s.placement = c->placement;
    tg_spec si = s, st = s;
    si.mode = TG_INFER;
    st.mode = TG_TRAIN;
    tg_cost ci, ct;
    if (!cost_layout(&si, mc, &ci, c->why, sizeof c->why))
        return;
    if (!cost_layout(&st, mc, &ct, c->why, sizeof c->why)) {
        tg_cost_free(&ci);
        return;
    }
    c->possible = 1;
    bool train = spec->mode == TG_TRAIN;
    c->fwd = ci.phase[TG_PHASE_FWD];
    c->forward_s = ci.phase[TG_PHASE_FWD].streams_s;
    take_train(c, spec, mc, &ct);
    take_options(c, &st);
    if (!train) {
        c->step_s = c->forward_s;
        c->tokens_per_s = c->step_s > 0 ? (double)spec->batch * spec->seq / c->step_s : 0;
        double peak = tg_cost_peak_flops(spec, mc) * c->p;
        c->mfu = c->step_s > 0 && peak > 0 ? tg_cost_model_flops(spec, false) / (c->step_s * peak) : 0;
        c->peak_bytes = ci.peak_bytes;
        c->fits = (double)c->peak_bytes <= mc->memory_gib * (double)(1LL << 30);
    }
    c->nodes = ci.nodes;
    tg_cost_free(&ci);
    tg_cost_free(&ct);
    if (train && !c->megatron && !c->fits) { /* then fit_fix below starts from the options of least memory */
        search_options(&st, mc, c);
        s = st;
    } else if (train && !c->megatron && st.d > 1 && st.dtype == TG_FP32) {
        /* sharding the AdamW state is not only memory: each rank's AdamW does 1/d of the work, for the same bytes */
        tg_spec sh = st;
        sh.opt.shard = !st.opt.shard;
        tg_cost cs;
        char why[256];
        if (cost_layout(&sh, mc, &cs, why, sizeof why)) {
            double ts = cs.phase[0].streams_s + cs.phase[1].streams_s + cs.phase[2].streams_s;
            if (ts < c->train_step_s && (double)cs.peak_bytes <= mc->memory_gib * (double)(1LL << 30)) {
                take_train(c, spec, mc, &cs);
                take_options(c, &sh);
            }
            tg_cost_free(&cs);
        }
    }
    if (!c->fits) {
        snprintf(c->why, sizeof c->why, "the arena of one rank, %.2f GiB, does not fit in the machine's memory_gib = %g",
                 (double)c->peak_bytes / (double)(1LL << 30), mc->memory_gib);
        fit_fix(&s, mc, c);
    }
}

/* The stages of spec t split into S: the spec's own pipeline.layers and schedule where S is its pp, else as even as
 * possible (the spec loader's default, spec.c check_stages: the L mod S extra layers on stages 1, 2, ..). */
static void set_stages(tg_spec *t, const tg_spec *spec, int S)
{
    t->pp = S;
    if (S == spec->pp)
        return;
    memset(t->stage_layers, 0, sizeof t->stage_layers);
    for (int k = 0; k < S; k++)
        t->stage_layers[k] = spec->layers / S;
    for (int k = 0; k < spec->layers % S; k++)
        t->stage_layers[1 + k] += 1;
}

/* Judge and cost one pipeline candidate (c->pp > 1 stages of [q,q,d] in c->placement, c->microbatches): the spec
 * rules, the work bound, then --cost's step. False when the spec rules refuse the mesh (whatever the placement and
 * m); true otherwise, possible or not. */
static bool judge_pipe(const tg_spec *spec, const tg_machine *mc, tg_candidate *c)
{
    tg_spec t = *spec, s;
    set_stages(&t, spec, c->pp);
    t.microbatches = c->microbatches;
    c->layers = spec->layers;
    /* the spec's own memory options, on every stage: recompute counts each stage's first layers, shard each stage's
     * depth (tg_spec_on_mesh keeps both) */
    c->recompute = spec->recompute;
    c->shard = spec->opt.shard && c->d > 1;
    tg_err e = {{0}, 0};
    if (!tg_spec_on_mesh(&t, c->q, c->d, &s, &e)) {
        const char *rest = strstr(e.msg, ": ");
        first_line(c->why, sizeof c->why, rest && rest < e.msg + strcspn(e.msg, "\n") ? rest + 2 : e.msg);
        return false;
    }
    s.placement = c->placement;
    tg_plan pl;
    tg_plan_init(&s, &pl);
    tg_pipe_cost pc;
    if (!tg_bounds_work(&pl, &e) || !tg_pipe_cost_step(&s, mc, &pc, &e)) {
        size_t n = strlen(s.path);
        first_line(c->why, sizeof c->why, !strncmp(e.msg, s.path, n) && !strncmp(e.msg + n, ": ", 2) ? e.msg + n + 2
                                                                                                     : e.msg);
        c->uncosted = 1;
        return true;
    }
    c->possible = 1;
    c->step_s = c->train_step_s = pc.step[0];
    c->tokens_per_s = c->step_s > 0 ? (double)spec->batch * spec->seq / c->step_s : 0;
    double peak = tg_cost_peak_flops(spec, mc) * c->p;
    c->mfu = c->step_s > 0 && peak > 0 ? tg_cost_model_flops(spec, true) / (c->step_s * peak) : 0;
    c->bubble = pc.bubble[0];
    c->nodes = pc.nodes;
    int worst = 0;
    for (int st = 0; st < c->pp; st++) {
        c->stage_bytes[st] = pc.st[st].mem_bytes;
        if (pc.st[st].mem_bytes > c->peak_bytes) {
            c->peak_bytes = pc.st[st].mem_bytes;
            worst = st;
        }
    }
    c->fits = (double)c->peak_bytes <= mc->memory_gib * (double)(1LL << 30);
    tg_pipe_cost_free(&pc);
    /* the memory options (docs/COST.md "Training options"), tried once for a layout that does not fit: every layer
     * of each stage recomputed and, with d > 1 in fp32, the AdamW state sharded over each stage's depth; taken when
     * that fits (one more costing of the candidate, never more) */
    bool rc_more = s.recompute < s.layers, sh_more = !s.opt.shard && c->d > 1 && s.dtype == TG_FP32;
    if (!c->fits && (rc_more || sh_more)) {
        tg_spec t2 = s;
        t2.recompute = s.layers;
        t2.opt.shard = s.opt.shard || sh_more;
        tg_pipe_cost pc2;
        tg_err e2 = {{0}, 0};
        if (tg_pipe_cost_step(&t2, mc, &pc2, &e2)) {
            long long peak2 = 0;
            for (int st = 0; st < c->pp; st++)
                peak2 = pc2.st[st].mem_bytes > peak2 ? pc2.st[st].mem_bytes : peak2;
            if ((double)peak2 <= mc->memory_gib * (double)(1LL << 30)) {
                c->fits = 1;
                c->recompute = t2.recompute;
                c->shard = t2.opt.shard && c->d > 1;
                c->step_s = c->train_step_s = pc2.step[0];
                c->tokens_per_s = c->step_s > 0 ? (double)spec->batch * spec->seq / c->step_s : 0;
                c->mfu = c->step_s > 0 && peak > 0 ? tg_cost_model_flops(spec, true) / (c->step_s * peak) : 0;
                c->bubble = pc2.bubble[0];
                c->nodes = pc2.nodes;
                c->peak_bytes = peak2;
                for (int st = 0; st < c->pp; st++)
                    c->stage_bytes[st] = pc2.st[st].mem_bytes;
            }
            tg_pipe_cost_free(&pc2);
        }
    }
    if (!c->fits)
        snprintf(c->why, sizeof c->why, "stage %d's arena + stash of %d micro-batch%s in flight, %.2f GiB a rank, does "
                                        "not fit in the machine's memory_gib = %g%s",
                 worst, c->microbatches, c->microbatches == 1 ? "" : "es", (double)c->peak_bytes / (double)(1LL << 30),
                 mc->memory_gib, rc_more || sh_more ? ", nor with every layer recomputed and the AdamW state sharded"
                                                     : "");
    return true;
}

static int cmp_candidate(const void *a, const void *b)
{
    const tg_candidate *x = a, *y = b;
    if (x->possible != y->possible)
        return y->possible - x->possible;
    if (x->possible && x->fits != y->fits) /* what fits first */
        return y->fits - x->fits;
    if (x->possible && x->step_s != y->step_s)
        return x->step_s < y->step_s ? -1 : 1;
    if (x->possible && x->forward_s != y->forward_s)
        return x->forward_s < y->forward_s ? -1 : 1;
    if (x->megatron != y->megatron) /* ties and the impossible ones: in mesh order */
        return x->megatron - y->megatron;
    if (x->pp != y->pp)
        return x->pp - y->pp;
    if (x->q != y->q)
        return y->q - x->q;
    if (x->placement != y->placement)
        return (int)x->placement - (int)y->placement;
    return x->microbatches - y->microbatches;
}

/* A placement of [q,q,d] that numbers the ranks as an earlier one does (the same candidate). */
static bool same_numbering(int q, int d, int pl)
{
    tg_mesh m = tg_mesh_make(q, d, (tg_placement)pl);
    for (int e = 0; e < pl; e++) { /* an axis of extent 1 has no stride that matters */
        tg_mesh o = tg_mesh_make(q, d, (tg_placement)e);
        if ((q == 1 || (o.si == m.si && o.sj == m.sj)) && (d == 1 || o.sk == m.sk))
            return true;
    }
    return false;
}

/* Room for one more candidate in *c (cap grows by doubling); NULL when out of memory. */
static tg_candidate *next_candidate(tg_candidate **c, int *cap, int *cnt)
{
    if (*cnt == *cap) {
        int nc = *cap ? 2 * *cap : 16;
        tg_candidate *g = realloc(*c, (size_t)nc * sizeof *g);
        if (!g)
            return NULL;
        *c = g;
        *cap = nc;
    }
    tg_candidate *x = &(*c)[(*cnt)++];
    memset(x, 0, sizeof *x);
    x->pp = 1;
    return x;
}

/* The world of the advisor: --ranks, else the spec's pp*q*q*d (p: pp*q*q*d is its one group's). */
static int world(const tg_spec *spec, int ranks)
{
    return ranks > 0 ? ranks : spec->p * (spec->pp > 1 ? spec->pp : 1);
}

/* Whether S > 1 stages are searched on W ranks: S divides both W and the layers, or is the spec's own pp. */
static bool stages_searched(const tg_spec *spec, int W, int S)
{
    return S > 1 && S <= TG_MAX_STAGES && S <= spec->layers && W % S == 0 &&
           (spec->layers % S == 0 || S == spec->pp);
}

bool tg_advise(const tg_spec *spec, const tg_machine *mc, int ranks, tg_candidate **out, int *n, tg_err *err)
{
    int P = world(spec, ranks), cnt = 0, cap = 0;
    tg_candidate *c = NULL, *x;
    /* pp = 1: the model on all P ranks (a spec with stages judged as one group of P) */
    tg_spec one = *spec;
    set_stages(&one, spec, 1);
    memset(one.stage_layers, 0, sizeof one.stage_layers);
    one.stage_layers[0] = spec->layers;
    for (int q = 1; q * q <= P; q++) {
        if (P % (q * q) != 0)
            continue;
        int d = P / (q * q), m0 = one.microbatches > 1 ? one.microbatches : 1;
        /* training: a row for each micro-batch count m dividing the sequences of a rank (the spec rule), as the
         * pipeline rows below; the spec's own m alone where the batch does not split into whole sequences (the
         * rule refusing the mesh says so) */
        int per_rank = spec->mode == TG_TRAIN && spec->batch % (q * d) == 0 ? spec->batch / (q * d) : 0;
        bool refused = false;
        for (int m = per_rank ? 1 : m0; m <= (per_rank ? per_rank : m0) && !refused; m++) {
            if (per_rank && per_rank % m != 0)
                continue;
            tg_spec om = one;
            om.microbatches = spec->mode == TG_TRAIN ? m : one.microbatches;
            for (int pl = 0; pl < TG_NPLACEMENTS && !refused; pl++) {
                if (same_numbering(q, d, pl))
                    continue;
                if (!(x = next_candidate(&c, &cap, &cnt)))
                    goto oom;
                x->q = q, x->d = d, x->p = P, x->placement = (tg_placement)pl;
                judge(&om, mc, x);
                /* the rules refuse the mesh: one line, any placement and m */
                refused = !x->possible && pl == 0 && !x->peak_bytes;
            }
        }
    }
    /* Megatron-LM 1-D over all P ranks (its one group is every rank, whatever the numbering) */
    if (!(x = next_candidate(&c, &cap, &cnt)))
        goto oom;
    x->megatron = 1, x->q = 1, x->d = 1, x->p = P;
    judge(&one, mc, x);
    /* pipeline stages (training): S stages of [q,q,d] groups of P/S ranks, m micro-batches */
    for (int S = 2; spec->mode == TG_TRAIN && S <= P; S++) {
        if (!stages_searched(spec, P, S))
            continue;
        int G = P / S;
        for (int q = 1; q * q <= G; q++) {
            if (G % (q * q) != 0)
                continue;
            int d = G / (q * q), per_rank = spec->batch % (q * d) == 0 ? spec->batch / (q * d) : 1;
            bool refused = false;
            for (int pl = 0; pl < TG_NPLACEMENTS && !refused; pl++) {
                if (same_numbering(q, d, pl))
                    continue;
                for (int m = 1; m <= per_rank && !refused; m++) {
                    if (per_rank % m != 0)
                        continue;
                    if (!(x = next_candidate(&c, &cap, &cnt)))
                        goto oom;
                    x->q = q, x->d = d, x->p = P, x->pp = S, x->microbatches = m, x->placement = (tg_placement)pl;
                    refused = !judge_pipe(spec, mc, x); /* the rules refuse the mesh: one line */
                }
            }
        }
    }
    qsort(c, (size_t)cnt, sizeof *c, cmp_candidate);
    *out = c;
    *n = cnt;
    return true;
oom:
    free(c);
    return tg_fail(err, "--advise: out of memory");
}

void tg_advise_dominant(const tg_cost_phase *ph, char *buf, size_t cap)
{
    double part[4] = {ph->gemm_s, ph->compute_s - ph->gemm_s, ph->comm_s - ph->comm_inter_s, ph->comm_inter_s};
    static const char *const name[4] = {"GEMM", "fused kernels", "comm inside nodes", "comm across nodes"};
    double busy = ph->compute_s + ph->comm_s;
    int best = 0;
    for (int k = 1; k < 4; k++)
        if (part[k] > part[best])
            best = k;
    snprintf(buf, cap, "%s %.0f%%", name[best], busy > 0 ? 100.0 * part[best] / busy : 0.0);
}

static void layout_name(const tg_candidate *c, char *buf, size_t cap)
{
    if (c->megatron)
        snprintf(buf, cap, "megatron [%d]", c->p);
    else if (c->pp > 1)
        snprintf(buf, cap, "pp=%d x [%d,%d,%d] %s", c->pp, c->q, c->q, c->d, tg_placement_name(c->placement));
    else
        snprintf(buf, cap, "[%d,%d,%d] %s", c->q, c->q, c->d, tg_placement_name(c->placement));
}

/* "bubble 20.0%; stage GiB 0.01 0.02": a pipeline candidate's bubble and each stage's arena + stash (the least and
 * the most beyond 8 stages). */
static void pipe_text(const tg_candidate *c, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "bubble %.1f%%; stage GiB", 100 * c->bubble);
    long long lo = c->stage_bytes[0], hi = lo;
    for (int st = 0; st < c->pp; st++) {
        lo = c->stage_bytes[st] < lo ? c->stage_bytes[st] : lo;
        hi = c->stage_bytes[st] > hi ? c->stage_bytes[st] : hi;
        if (c->pp <= 8 && (size_t)n < cap)
            n += snprintf(buf + n, cap - (size_t)n, " %.3g", (double)c->stage_bytes[st] / (double)(1LL << 30));
    }
    if (c->pp > 8 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " %.3g .. %.3g", (double)lo / (double)(1LL << 30),
                 (double)hi / (double)(1LL << 30));
}

/* The spec lines that select candidate c, written into buf: the layout, then the memory options where they are
 * not the defaults (optimizer.shard as a comment: a second optimizer table would replace the spec's own). */
static void spec_lines(const tg_candidate *c, const tg_spec *spec, char *buf, size_t cap)
{
    int n;
    if (c->megatron)
        n = snprintf(buf, cap, "scheme = \"megatron\",\n  mesh = { p = %d },", c->p);
    else
    {
        char pp[24] = "";
        if (c->pp > 1)
            snprintf(pp, sizeof pp, ", pp = %d", c->pp);
        n = snprintf(buf, cap, "mesh = { q = %d, d = %d, placement = \"%s\"%s },", c->q, c->d,
                     tg_placement_name(c->placement), pp);
    }
    if (spec->mode != TG_TRAIN || c->megatron)
        return;
    if (c->pp > 1) { /* the whole pipeline table, replacing the spec's own: m, and its layers and schedule if kept */
        n += snprintf(buf + n, cap - (size_t)n, "\n  pipeline = { microbatches = %d", c->microbatches);
        bool even = true;
        for (int k = 0; k < c->pp && c->pp == spec->pp; k++)
            even = even && spec->stage_layers[k] == spec->layers / c->pp + (k >= 1 && k <= spec->layers % c->pp);
        if (!even)
            for (int k = 0; k < c->pp && (size_t)n < cap; k++)
                n += snprintf(buf + n, cap - (size_t)n, "%s%d", k ? ", " : ", layers = { ", spec->stage_layers[k]);
        if (!even && (size_t)n < cap)
            n += snprintf(buf + n, cap - (size_t)n, " }");
        if (spec->schedule == TG_PIPE_GPIPE && (size_t)n < cap)
            n += snprintf(buf + n, cap - (size_t)n, ", schedule = \"gpipe\"");
        if ((size_t)n < cap)
            n += snprintf(buf + n, cap - (size_t)n, " },");
    } else {
        int m0 = spec->microbatches > 1 ? spec->microbatches : 1;
        /* a spec with stages has a pipeline table whose layers a pp = 1 mesh refuses: replace it */
        if ((c->microbatches != m0 || spec->pp > 1) && (size_t)n < cap)
            n += snprintf(buf + n, cap - (size_t)n, "\n  pipeline = { microbatches = %d },", c->microbatches);
    }
    if (c->recompute != spec->recompute && (size_t)n < cap) {
        if (c->recompute == spec->layers)
            n += snprintf(buf + n, cap - (size_t)n, "\n  recompute = \"full\",");
        else
            n += snprintf(buf + n, cap - (size_t)n, "\n  recompute = %d,", c->recompute);
    }
    if (c->shard != (int)spec->opt.shard && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, "\n  -- and in optimizer = { ... }: shard = %s,", c->shard ? "true" : "false");
}

/* The phases of a training step as one (the times and bytes add), for "what dominates". */
static tg_cost_phase train_total(const tg_candidate *c)
{
    tg_cost_phase t = c->train[0];
    for (int k = 1; k < 3; k++) {
        t.serial_s += c->train[k].serial_s;
        t.streams_s += c->train[k].streams_s;
        t.compute_s += c->train[k].compute_s;
        t.comm_s += c->train[k].comm_s;
        t.gemm_s += c->train[k].gemm_s;
        t.comm_inter_s += c->train[k].comm_inter_s;
        t.intra_bytes += c->train[k].intra_bytes;
        t.inter_bytes += c->train[k].inter_bytes;
    }
    return t;
}

/* Whether two "not costed" reasons are the same rule: equal but for their numbers (each run of digits, with the
 * points and commas between them, counts as one number: "mesh [4,4,16]" is "mesh [8,8,1]"). */
static bool same_rule(const char *a, const char *b)
{
    for (;;) {
        bool da = *a >= '0' && *a <= '9', db = *b >= '0' && *b <= '9';
        if (da != db)
            return false;
        if (da) {
            while ((*a >= '0' && *a <= '9') || ((*a == '.' || *a == ',') && a[1] >= '0' && a[1] <= '9'))
                a++;
            while ((*b >= '0' && *b <= '9') || ((*b == '.' || *b == ',') && b[1] >= '0' && b[1] <= '9'))
                b++;
            continue;
        }
        if (*a != *b)
            return false;
        if (!*a)
            return true;
        a++, b++;
    }
}

/* The name of a "not costed" candidate: "pp=16 x [4,4,16] col mb=2". */
static void uncosted_name(const tg_candidate *c, char *buf, size_t cap)
{
    layout_name(c, buf, cap);
    if (c->pp > 1)
        snprintf(buf + strlen(buf), cap - strlen(buf), " mb=%d", c->microbatches);
}

/* The "not costed" candidates, one line per rule (same_rule): with one candidate its name and reason, as the other
 * refusals; with several, their count, the first 3 names and the first one's reason (--json lists each). */
#define ADV_UNCOSTED_NAMED 3
static void uncosted_lines(const tg_candidate *c, int n, tg_sb *o)
{
    for (int k = 0; k < n; k++) {
        if (c[k].possible || !c[k].uncosted)
            continue;
        bool seen = false;
        for (int e = 0; e < k && !seen; e++)
            seen = !c[e].possible && c[e].uncosted && same_rule(c[e].why, c[k].why);
        if (seen)
            continue;
        int count = 0;
        for (int e = k; e < n; e++)
            count += !c[e].possible && c[e].uncosted && same_rule(c[e].why, c[k].why);
        char name[64];
        uncosted_name(&c[k], name, sizeof name);
        if (count == 1) {
            tg_sb_printf(o, "  not costed %s: %s\n", name, c[k].why);
            continue;
        }
        tg_sb_printf(o, "  not costed, %d candidates for one rule (--json lists each):", count);
        for (int e = k, shown = 0; e < n && shown < ADV_UNCOSTED_NAMED; e++) {
            if (c[e].possible || !c[e].uncosted || !same_rule(c[e].why, c[k].why))
                continue;
            uncosted_name(&c[e], name, sizeof name);
            tg_sb_printf(o, "%s %s", shown++ ? "," : "", name);
        }
        if (count > ADV_UNCOSTED_NAMED)
            tg_sb_printf(o, " and %d more", count - ADV_UNCOSTED_NAMED);
        uncosted_name(&c[k], name, sizeof name);
        tg_sb_printf(o, "; %s: %s\n", name, c[k].why);
    }
}

void tg_advise_text(const tg_spec *spec, const tg_machine *mc, int ranks, const tg_candidate *c, int n, tg_sb *o)
{
    int P = world(spec, ranks);
    bool train = spec->mode == TG_TRAIN;
    tg_sb_printf(o,
                 "%s on %d ranks of %s (%d per node; inside a node %g GB/s, %g us; between nodes %g GB/s per node, "
                 "%g us)\n",
                 spec->name, P, mc->name, mc->ranks_per_node, mc->intra.bandwidth_gbs, mc->intra.latency_us,
                 mc->inter.bandwidth_gbs, mc->inter.latency_us);
    tg_sb_printf(o, "model: %d layers, hidden %d, %d heads, ffn %d, seq %d, batch %d", spec->layers, spec->hidden,
                 spec->heads, spec->ffn, spec->seq, spec->batch);
    if (spec->vocab)
        tg_sb_printf(o, ", vocab %d", spec->vocab);
    if (spec->vocab && spec->vocab_align > 1) /* each layout's vocab blocks padded to it (docs/MODEL.md "Padding") */
        tg_sb_printf(o, " (blocks padded to a multiple of %d)", spec->vocab_align);
    tg_sb_printf(o, ", %s; predicted by the cost model (docs/COST.md), two streams as the CUDA backend runs\n",
                 spec->dtype == TG_BF16 ? "bf16" : "fp32");
    tg_sb_printf(o, "ranked by the %s (mode = \"%s\"); tokens/s = batch*seq per %s; MFU = model FLOPs / (time x %d "
                    "ranks x %.4g TFLOP/s %s peak)\n",
                 train ? "training step" : "forward", train ? "train" : "infer", train ? "step" : "forward", P,
                 tg_cost_peak_flops(spec, mc) / 1e12, spec->dtype == TG_BF16 ? "bf16" : "fp32");
    if (train) {
        tg_sb_puts(o, "pipeline stages: pp in {1");
        for (int S = 2; S <= P; S++)
            if (stages_searched(spec, P, S))
                tg_sb_printf(o, ", %d", S);
        tg_sb_printf(o, "} (pp > 1 divides the %d ranks and the %d layers", P, spec->layers);
        if (spec->pp > 1)
            tg_sb_printf(o, ", or is the spec's own pp = %d%s", spec->pp,
                         P % spec->pp ? ", which does not divide the ranks" : "");
        tg_sb_printf(o, "), each stage a [q,q,d] group, micro-batches m dividing its sequences per rank, schedule %s; "
                        "a pp > 1 row is --cost's step (bubble included), its peak GiB the largest stage's arena + "
                        "stash\n", spec->schedule == TG_PIPE_GPIPE ? "gpipe" : "1f1b");
    }
    tg_sb_printf(o, "\n  %-4s %-22s %s%13s %11s %6s %11s %10s  %-5s %s\n", "#", "layout", train ? "options          " : "",
                 train ? "train step (s)" : "forward (s)", "tokens/s", "MFU", train ? "forward (s)" : "train step (s)",
                 "peak GiB", "fits", train ? "step dominated by" : "forward dominated by");
    int shown = 0;
    const tg_candidate *best = NULL;
    for (int k = 0; k < n; k++) {
        if (!c[k].possible)
            continue;
        char name[64], dom[160], mfu[16], fwd[24];
        layout_name(&c[k], name, sizeof name);
        tg_cost_phase ph = train ? train_total(&c[k]) : c[k].fwd;
        if (c[k].pp > 1)
            pipe_text(&c[k], dom, sizeof dom);
        else
            tg_advise_dominant(&ph, dom, sizeof dom);
        if (c[k].fits && !best)
            best = &c[k];
        snprintf(mfu, sizeof mfu, "%.1f%%", 100 * c[k].mfu);
        char opts[64] = "";
        if (train) {
            options_text(&c[k], opts, sizeof opts);
            size_t ol = strlen(opts);
            for (; ol < 17 && ol + 1 < sizeof opts; ol++)
                opts[ol] = ' ';
            opts[ol] = '\0';
        }
        snprintf(fwd, sizeof fwd, "%.4g", train ? c[k].forward_s : c[k].train_step_s);
        if (c[k].pp > 1) /* a pipeline has no forward of its own */
            snprintf(fwd, sizeof fwd, "-");
        tg_sb_printf(o, "  %-4d %-22s %s%13.4g %11.0f %6s %11s %10.2f  %-5s %s", ++shown, name, opts, c[k].step_s,
                     c[k].tokens_per_s, mfu, fwd,
                     (double)c[k].peak_bytes / (double)(1LL << 30), c[k].fits ? "yes" : "NO", dom);
        if (c[k].fits && best && c[k].step_s > best->step_s)
            tg_sb_printf(o, "  (%.2fx)", c[k].step_s / best->step_s);
        tg_sb_puts(o, "\n");
    }
    if (shown == 0)
        tg_sb_printf(o, "  (no layout of this model is possible on %d ranks; each rule is below)\n", P);
    for (int k = 0; k < n; k++) {
        if ((c[k].possible && c[k].fits) || (!c[k].possible && c[k].uncosted))
            continue; /* the "not costed" ones below, by rule */
        char name[64];
        layout_name(&c[k], name, sizeof name);
        if (!c[k].possible && !c[k].megatron && !c[k].uncosted) /* refused by the spec rules: the mesh, any placement */
            snprintf(name, sizeof name, "%s[%d,%d,%d]", c[k].pp > 1 ? "pp=" : "", c[k].q, c[k].q, c[k].d);
        if (!c[k].possible && !c[k].megatron && !c[k].uncosted && c[k].pp > 1)
            snprintf(name, sizeof name, "pp=%d x [%d,%d,%d]", c[k].pp, c[k].q, c[k].q, c[k].d);
        else if (c[k].pp > 1)
            snprintf(name + strlen(name), sizeof name - strlen(name), " mb=%d", c[k].microbatches);
        tg_sb_printf(o, "  %s %s: %s%s%s\n",
                     c[k].possible ? "refused (memory)" : c[k].uncosted ? "not costed" : "not possible", name,
                     c[k].why, c[k].fix[0] ? "; " : "", c[k].fix);
    }
    uncosted_lines(c, n, o);
    if (best) {
        char lines[2048];
        spec_lines(best, spec, lines, sizeof lines);
        tg_sb_printf(o, "\nthe fastest layout that fits, in the spec:\n  %s\n", lines);
    } else if (shown > 0) {
        tg_sb_printf(o, "\nno layout fits in %g GiB per rank: each refusal above says the change that makes it fit\n",
                     mc->memory_gib);
    }
}

static void json_num(tg_sb *o, double v)
{
    tg_sb_jnum(o, "%.6g", v);
}

void tg_advise_json(const tg_spec *spec, const tg_machine *mc, int ranks, const tg_candidate *c, int n, tg_sb *o)
{
    int P = world(spec, ranks);
    tg_sb_puts(o, "{\"spec\":");
    tg_sb_jstr(o, spec->path);
    tg_sb_puts(o, ",\"machine\":");
    tg_sb_jstr(o, mc->path);
    tg_sb_printf(o, ",\"ranks\":%d,\"sorted_by\":\"%s\",\n\"candidates\":[", P,
                 spec->mode == TG_TRAIN ? "train_step_s" : "forward_s");
    int first = 1;
    for (int k = 0; k < n; k++) {
        if (!c[k].possible)
            continue;
        char dom[160];
        if (c[k].pp > 1)
            snprintf(dom, sizeof dom, "bubble %.1f%%", 100 * c[k].bubble);
        else
            tg_advise_dominant(&c[k].fwd, dom, sizeof dom);
        tg_sb_printf(o, "%s\n {\"scheme\":\"%s\",\"pp\":%d,", first ? "" : ",", c[k].megatron ? "megatron" : "tesseract",
                     c[k].pp);
        if (c[k].megatron)
            tg_sb_printf(o, "\"mesh\":[%d],\"placement\":null,", c[k].p);
        else
            tg_sb_printf(o, "\"mesh\":[%d,%d,%d],\"placement\":\"%s\",", c[k].q, c[k].q, c[k].d,
                         tg_placement_name(c[k].placement));
        tg_sb_puts(o, "\"step_s\":");
        json_num(o, c[k].step_s);
        tg_sb_puts(o, ",\"tokens_per_s\":");
        json_num(o, c[k].tokens_per_s);
        tg_sb_puts(o, ",\"mfu\":");
        json_num(o, c[k].mfu);
        char lines[2048];
        spec_lines(&c[k], spec, lines, sizeof lines);
        tg_sb_puts(o, ",\"spec_lines\":");
        tg_sb_jstr(o, lines);
        tg_sb_puts(o, ",\"forward_s\":");
        if (c[k].pp > 1) /* a pipeline has no forward of its own */
            tg_sb_puts(o, "null");
        else
            json_num(o, c[k].forward_s);
        tg_sb_puts(o, ",\"train_step_s\":");
        json_num(o, c[k].train_step_s);
        tg_sb_printf(o, ",\"peak_bytes\":%lld,\"fits\":%s,\"nodes\":%d,\"microbatches\":%d,\"recompute\":%d,"
                        "\"shard\":%s,\"dominant\":", c[k].peak_bytes, c[k].fits ? "true" : "false", c[k].nodes,
                     c[k].microbatches, c[k].recompute, c[k].shard ? "true" : "false");
        tg_sb_jstr(o, dom);
        if (c[k].pp > 1) {
            tg_sb_printf(o, ",\"schedule\":\"%s\",\"bubble\":", spec->schedule == TG_PIPE_GPIPE ? "gpipe" : "1f1b");
            json_num(o, c[k].bubble);
            tg_sb_puts(o, ",\"stage_bytes\":[");
            for (int st = 0; st < c[k].pp; st++)
                tg_sb_printf(o, "%s%lld", st ? "," : "", c[k].stage_bytes[st]);
            tg_sb_puts(o, "]");
        }
        if (c[k].pp == 1) {
        tg_sb_puts(o, ",\"forward\":{\"compute_s\":");
        json_num(o, c[k].fwd.compute_s);
        tg_sb_puts(o, ",\"gemm_s\":");
        json_num(o, c[k].fwd.gemm_s);
        tg_sb_puts(o, ",\"comm_s\":");
        json_num(o, c[k].fwd.comm_s);
        tg_sb_puts(o, ",\"comm_inter_s\":");
        json_num(o, c[k].fwd.comm_inter_s);
        tg_sb_puts(o, ",\"serial_s\":");
        json_num(o, c[k].fwd.serial_s);
        tg_sb_puts(o, "}");
        }
        if (!c[k].fits) {
            tg_sb_puts(o, ",\"why\":");
            tg_sb_jstr(o, c[k].why);
            tg_sb_puts(o, ",\"fix\":");
            tg_sb_jstr(o, c[k].fix);
        }
        tg_sb_puts(o, "}");
        first = 0;
    }
    tg_sb_puts(o, "\n],\n\"refused\":[");
    first = 1;
    for (int k = 0; k < n; k++) {
        if (c[k].possible)
            continue;
        tg_sb_printf(o, "%s\n {\"scheme\":\"%s\",\"pp\":%d,", first ? "" : ",", c[k].megatron ? "megatron" : "tesseract",
                     c[k].pp);
        if (c[k].uncosted) /* the rules accept it; the cost model could not cost it */
            tg_sb_printf(o, "\"mesh\":[%d,%d,%d],\"placement\":\"%s\",\"microbatches\":%d,\"costed\":false,\"why\":",
                         c[k].q, c[k].q, c[k].d, tg_placement_name(c[k].placement), c[k].microbatches);
        else if (c[k].megatron)
            tg_sb_printf(o, "\"mesh\":[%d],\"placement\":null,\"why\":", c[k].p);
        else
            tg_sb_printf(o, "\"mesh\":[%d,%d,%d],\"placement\":null,\"why\":", c[k].q, c[k].q, c[k].d);
        tg_sb_jstr(o, c[k].why);
        tg_sb_puts(o, "}");
        first = 0;
    }
    tg_sb_puts(o, "\n]}\n");
}
