/*
 * pipe_cost.c - the step time of pipeline stages (pipe_cost.h): each stage's class programs are baked and timed by
 * cost.c exactly as the single-group --cost times its class (declare, bake, then cost: nothing is guessed from the
 * spec), the stage's figure is its slowest class's, and the proved schedule of gen/pipe.c is replayed with those
 * durations (tg_pipe_time). The work is the classes' plans (S stages x q*q classes of n_s layers: q*q*L layer plans
 * in all) and one event run of S * 6m steps per timeline. Pure computation, no I/O.
 *
 * Equal stages are planned once. A stage's class plans depend on whether it is the first (the embedding) or the last
 * (the head and the loss), on its layer count (not on which layers: the layer index only names the weights; recompute
 * counts each stage's first N layers), on its stash (the copies of the
 * per-micro-batch buffers) and, for the cost, on which nodes its world ranks s*p .. s*p+p-1 fall on: the same for
 * every s with the same s*p mod ranks_per_node. The stash only multiplies each class's stash_elems, so it is not in
 * the signature: each planned stage keeps its classes' arena and stash_elems, and a stage with the signature of an
 * earlier one takes that one's times and computes its own arena + stash from them. The middle stages of an even
 * split are one plan: S stages cost 3 stages' plans, not S (the reference that plans every stage, and the check
 * that both agree to the bit, are tg_pipe_cost_every_stage and tests/test_cost.c).
 */
#include "pipe_cost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "pipe.h"
#include "plan.h"

/* Time of one block of n bytes that every rank r of [a, a+p) sends to rank r + dist at once, the slowest pair's:
 * a pair on one node uses the intra link; a pair across nodes the inter link, the sending node's bandwidth shared by
 * its ranks that send across at the same time (at most the intra bandwidth). *inter: some pair crosses nodes. */
static double p2p_time(int a, int p, int dist, double n, const tg_machine *mc, int *inter, tg_err *err, bool *ok)
{
    int rpn = mc->ranks_per_node, n0 = a / rpn, nn = (a + p - 1) / rpn - n0 + 1;
    int *cross = calloc((size_t)nn, sizeof *cross);
    *inter = 0;
    if (!cross) {
        *ok = tg_fail(err, "cost model: out of memory for %d nodes", nn);
        return 0;
    }
    for (int r = a; r < a + p; r++)
        if (r / rpn != (r + dist) / rpn)
            cross[r / rpn - n0]++;
    double worst = 0;
    for (int k = 0; k < nn; k++) {
        double lat = mc->intra.latency_us * 1e-6, bw = mc->intra.bandwidth_gbs * 1e9;
        if (cross[k]) {
            double b = mc->inter.bandwidth_gbs * 1e9 / cross[k];
            lat = mc->inter.latency_us * 1e-6;
            bw = b < bw ? b : bw;
            *inter = 1;
        }
        double t = lat + n / bw;
        worst = t > worst ? t : worst;
    }
    free(cross);
    return worst;
}

static double maxd(double a, double b) { return a > b ? a : b; }

/* What decides a stage's class plans and their cost, but for its stash (above): stages with equal signatures have equal
 * figures. */
typedef struct stage_sig {
    int first, last, nl, node_offset, l0;
} stage_sig;

static stage_sig signature(const tg_spec *s, const tg_machine *mc, int p, int st)
{
    /* recompute counts each stage's first layers (plan_tesseract.c), so it does not tell stages apart */
    stage_sig g = {st == 0, st == s->pp - 1, s->stage_layers[st], (int)((long long)st * p % mc->ranks_per_node), -1};
    return g;
}

/* The figures of stage st's slowest class into o; cls[2 * (i*q + j)] and the next get class (i, j)'s arena and
 * stash_elems (one micro-batch's), from which a stage of equal signature and another stash gets its memory. */
static bool cost_stage(tg_plan *pl, int st, const tg_machine *mc, tg_pipe_cost_stage *o, long long *cls, tg_err *err)
{
    if (!tg_plan_stage(pl, st, err))
        return false;
    o->l0 = pl->l0;
    o->nl = pl->nl;
    int q = pl->mesh.q, mb = pl->mb;
    for (int i = 0; i < q; i++)
        for (int j = 0; j < q; j++) {
            tg_class_plan cp;
            tg_cost cs;
            if (!tg_plan_class(pl, i, j, &cp, err))
                return false;
            bool ok = tg_cost_class(pl, &cp, mc, &cs, err);
            long long mem = 4 * (cp.arena_elems + cp.stash_total); /* as tg_stage_memory (summary.c) prints it */
            o->mem_bytes = mem > o->mem_bytes ? mem : o->mem_bytes;
            cls[2 * (i * q + j)] = cp.arena_elems;
            cls[2 * (i * q + j) + 1] = cp.stash_elems;
            tg_class_free(&cp);
            if (!ok)
                return false;
            const tg_cost_phase *f = &cs.phase[TG_PHASE_FWD], *b = &cs.phase[TG_PHASE_BWD], *op = &cs.phase[TG_PHASE_OPT];
            double fw[2] = {f->mb_streams_s, f->mb_serial_s}, bw[2] = {b->mb_streams_s, b->mb_serial_s};
            double last[2] = {b->streams_s - (mb - 1) * b->mb_streams_s, b->serial_s - (mb - 1) * b->mb_serial_s};
            double opt[2] = {op->streams_s, op->serial_s};
            for (int t = 0; t < 2; t++) {
                o->fwd[t] = maxd(o->fwd[t], fw[t]);
                o->bwd[t] = maxd(o->bwd[t], bw[t]);
                o->bwd_last[t] = maxd(o->bwd_last[t], maxd(last[t], bw[t]));
                o->opt[t] = maxd(o->opt[t], opt[t]);
            }
            o->peak_bytes = cs.peak_bytes > o->peak_bytes ? cs.peak_bytes : o->peak_bytes;
            tg_cost_free(&cs);
        }
    return true;
}

/* Stage st with the signature of stage `like`, planned before it: that stage's times and arenas, its own layers, and
 * its own arena + stash from the classes' arena and stash_elems (cls) with its stash (plan.c stash()). */
static bool reuse_stage(tg_plan *pl, int st, const tg_pipe_cost_stage *like, const long long *cls, tg_pipe_cost_stage *o,
                        tg_err *err)
{
    if (!tg_plan_stage(pl, st, err))
        return false;
    *o = *like;
    o->l0 = pl->l0;
    o->nl = pl->nl;
    o->mem_bytes = 0;
    for (int k = 0; k < pl->mesh.q * pl->mesh.q; k++) {
        long long mem = 4 * (cls[2 * k] + cls[2 * k + 1] * pl->stash);
        o->mem_bytes = mem > o->mem_bytes ? mem : o->mem_bytes;
    }
    return true;
}

void tg_pipe_cost_free(tg_pipe_cost *c)
{
    free(c->st);
    c->st = NULL;
}

static bool cost_run(const tg_spec *s, const tg_machine *mc, bool pp1, bool every_stage, tg_pipe_cost *out, tg_err *err)
{
    memset(out, 0, sizeof *out);
    int S = s->pp;
    if (S < 2 || s->mode != TG_TRAIN)
        return tg_fail(err, "cost model: internal: pipeline stages costed for mesh.pp = %d", S);
    tg_plan pl;
    tg_plan_init(s, &pl);
    int p = pl.mesh.p, m = pl.mb;
    out->S = S;
    out->m = m;
    out->nodes = (S * p + mc->ranks_per_node - 1) / mc->ranks_per_node;
    out->st = calloc((size_t)S, sizeof *out->st);
    double *buf = calloc((size_t)S * 8, sizeof *buf);
    stage_sig *sig = calloc((size_t)S, sizeof *sig);
    int *planned = calloc((size_t)S, sizeof *planned); /* the stages whose classes were planned, in order */
    long long *cls = calloc((size_t)S * 2 * (size_t)pl.mesh.q * (size_t)pl.mesh.q, sizeof *cls);
    if (!out->st || !buf || !sig || !planned || !cls) {
        free(buf);
        free(sig);
        free(planned);
        free(cls);
        tg_pipe_cost_free(out);
        return tg_fail(err, "cost model: out of memory for %d stages", S);
    }
    bool ok = true;
    size_t qq2 = 2 * (size_t)pl.mesh.q * (size_t)pl.mesh.q;
    for (int st = 0; st < S && ok; st++) {
        sig[st] = signature(s, mc, pl.mesh.p, st);
        int like = -1;
        for (int k = 0; k < out->stage_plans && like < 0 && !every_stage; k++)
            if (!memcmp(&sig[planned[k]], &sig[st], sizeof sig[st]))
                like = k;
        if (like >= 0) {
            ok = reuse_stage(&pl, st, &out->st[planned[like]], cls + (size_t)like * qq2, &out->st[st], err);
        } else {
            ok = cost_stage(&pl, st, mc, &out->st[st], cls + (size_t)out->stage_plans * qq2, err);
            planned[out->stage_plans++] = st;
        }
    }
    free(sig);
    free(planned);
    free(cls);
    /* the blocks: one micro-batch's rows of the [R, C/q] residual stream block; the tied wte gradient's Vq x C/q */
    out->block_bytes = 4LL * (pl.R / m) * pl.Cq;
    for (int st = 0; st + 1 < S && ok; st++)
        out->st[st].p2p = p2p_time(st * p, p, p, (double)out->block_bytes, mc, &out->st[st].p2p_inter, err, &ok);
    if (ok && s->vocab > 0) {
        out->tied_bytes = 4LL * pl.Vq * pl.Cq;
        out->tied = p2p_time(0, p, (S - 1) * p, (double)out->tied_bytes, mc, &out->tied_inter, err, &ok);
    }
    tg_pipe sch;
    if (ok)
        ok = tg_pipe_build(&sch, S, m, s->schedule, s->stage_layers, err);
    else
        memset(&sch, 0, sizeof sch);
    double *fw = buf, *bw = buf + S, *bl = buf + 2 * S, *c = buf + 3 * S, *end = buf + 4 * S, *busy = buf + 5 * S;
    for (int t = 0; t < 2 && ok; t++) {
        for (int st = 0; st < S; st++) {
            fw[st] = out->st[st].fwd[t];
            bw[st] = out->st[st].bwd[t];
            bl[st] = out->st[st].bwd_last[t];
            c[st] = out->st[st].p2p;
        }
        tg_pipe_durs d = {fw, bw, bl, c};
        if (!(ok = tg_pipe_time(&sch, &d, end, busy, err)))
            break;
        double span = 0, idle = 0;
        for (int st = 0; st < S; st++)
            span = maxd(span, end[st]);
        for (int st = 0; st < S; st++) {
            out->st[st].busy[t] = busy[st];
            out->st[st].end[t] = end[st];
            idle += span - busy[st];
        }
        if (s->vocab > 0) /* stage 0 and the last exchange their parts once both have run their last backward */
            end[0] = end[S - 1] = maxd(end[0], end[S - 1]) + out->tied;
        double step = 0;
        for (int st = 0; st < S; st++)
            step = maxd(step, end[st] + out->st[st].opt[t]);
        out->span[t] = span;
        out->step[t] = step;
        out->bubble[t] = span > 0 ? idle / (S * span) : 0;
    }
    tg_pipe_free(&sch);
    free(buf);
    if (ok && pp1) { /* the same model on one [q,q,d] group, every layer on it: class (0,0) as the single-group --cost */
        tg_spec one = *s;
        one.pp = 1;
        tg_plan p1;
        tg_plan_init(&one, &p1);
        tg_class_plan cp;
        tg_cost cs;
        if ((ok = tg_plan_stage(&p1, 0, err) && tg_plan_class(&p1, 0, 0, &cp, err))) {
            ok = tg_cost_class(&p1, &cp, mc, &cs, err);
            tg_class_free(&cp);
            if (ok) {
                for (int ph = TG_PHASE_FWD; ph <= TG_PHASE_OPT; ph++) {
                    out->pp1_step[0] += cs.phase[ph].streams_s;
                    out->pp1_step[1] += cs.phase[ph].serial_s;
                }
                tg_cost_free(&cs);
            }
        }
    }
    if (!ok)
        tg_pipe_cost_free(out);
    return ok;
}

bool tg_pipe_cost_run(const tg_spec *s, const tg_machine *mc, tg_pipe_cost *out, tg_err *err)
{
    return cost_run(s, mc, true, false, out, err);
}

bool tg_pipe_cost_step(const tg_spec *s, const tg_machine *mc, tg_pipe_cost *out, tg_err *err)
{
    return cost_run(s, mc, false, false, out, err);
}

bool tg_pipe_cost_every_stage(const tg_spec *s, const tg_machine *mc, tg_pipe_cost *out, tg_err *err)
{
    return cost_run(s, mc, true, true, out, err);
}

static const char *const timeline[2] = {"streams", "serial"};

void tg_pipe_cost_text(const tg_spec *s, const tg_machine *mc, const tg_pipe_cost *c, tg_sb *o)
{
    tg_plan pl;
    tg_plan_init(s, &pl);
    char mesh[64];
    tg_mesh_text(&pl.mesh, mesh, sizeof mesh);
    int S = c->S, p = pl.mesh.p;
    tg_sb_printf(o, "%s, mesh %s x %d pipeline stages placement \"%s\" (%s) = %d ranks on %d node%s of %s (%d ranks "
                    "per node)\n",
                 s->name, mesh, S, tg_placement_name(pl.mesh.placement), tg_mesh_rank_formula(&pl.mesh), S * p,
                 c->nodes, c->nodes == 1 ? "" : "s", mc->name, mc->ranks_per_node);
    tg_sb_printf(o, "schedule %s, %d micro-batch%s per step; predicted by the cost model (docs/COST.md \"Pipeline "
                    "stages\") for each stage's slowest class, two streams as the CUDA backend runs\n\n",
                 s->schedule == TG_PIPE_GPIPE ? "gpipe" : "1f1b", c->m, c->m == 1 ? "" : "es");
    tg_sb_printf(o, "  %-5s %-9s %11s %11s %11s %11s %11s %11s %11s %9s\n", "stage", "layers", "F (s)", "B (s)",
                 "B last (s)", "p2p (s)", "opt (s)", "busy (s)", "idle (s)", "arena GiB");
    for (int st = 0; st < S; st++) {
        const tg_pipe_cost_stage *g = &c->st[st];
        char lay[32], pp[32];
        snprintf(lay, sizeof lay, "%d..%d", g->l0, g->l0 + g->nl - 1);
        if (st + 1 < S)
            snprintf(pp, sizeof pp, "%.4g%s", g->p2p, g->p2p_inter ? "*" : "");
        else
            snprintf(pp, sizeof pp, "-");
        tg_sb_printf(o, "  %-5d %-9s %11.4g %11.4g %11.4g %11s %11.4g %11.4g %11.4g %9.3f\n", st, lay, g->fwd[0],
                     g->bwd[0], g->bwd_last[0], pp, g->opt[0], g->busy[0], c->span[0] - g->busy[0],
                     (double)g->peak_bytes / (double)(1LL << 30));
    }
    tg_sb_printf(o, "\n  F, B: one micro-batch; B last: micro-batch %d's, with the gradients' all-reduces; p2p: one "
                    "block of %lld bytes per rank to the next stage (* across nodes); busy and idle: up to the last "
                    "backward\n",
                 c->m - 1, c->block_bytes);
    if (c->tied_bytes)
        tg_sb_printf(o, "  tied wte gradient: stage 0 and stage %d exchange %lld bytes each way per rank after the last "
                        "backward: %.4g s (%s)\n",
                     S - 1, c->tied_bytes, c->tied, c->tied_inter ? "across nodes" : "inside a node");
    tg_sb_puts(o, "\n");
    for (int t = 0; t < 2; t++)
        tg_sb_printf(o, "step, %s: %.4g s (the pipeline %.4g s, then %sthe optimizer); bubble %.1f%%%s\n", timeline[t],
                     c->step[t], c->span[t], c->tied_bytes ? "the tied wte exchange and " : "", 100 * c->bubble[t],
                     t ? " (the CPU backend's timeline, the one that runs pipeline stages today)" : "");
    tg_sb_printf(o, "  (equal stages without communication would idle (S-1)/(m+S-1) = %.1f%%)\n",
                 100.0 * (S - 1) / (double)(c->m + S - 1));
    tg_sb_printf(o, "pp = 1 for comparison: the same model on one %s group of %d ranks (not %d), class (0,0): step "
                    "%.4g s streams, %.4g s serial\n",
                 mesh, p, S * p, c->pp1_step[0], c->pp1_step[1]);
}

void tg_pipe_cost_json(const tg_spec *s, const tg_machine *mc, const tg_pipe_cost *c, tg_sb *o)
{
    tg_plan pl;
    tg_plan_init(s, &pl);
    tg_sb_puts(o, "{\"spec\":");
    tg_sb_jstr(o, s->path);
    tg_sb_puts(o, ",\"machine\":");
    tg_sb_jstr(o, mc->path);
    tg_sb_printf(o, ",\"scheme\":\"tesseract\",\"mesh\":[%d,%d,%d],\"placement\":\"%s\",\"pp\":%d,\"schedule\":\"%s\","
                    "\"microbatches\":%d,\"nodes\":%d,\"block_bytes\":%lld,\"tied_bytes\":%lld,\"tied_s\":",
                 pl.mesh.q, pl.mesh.q, pl.mesh.d, tg_placement_name(pl.mesh.placement), c->S,
                 s->schedule == TG_PIPE_GPIPE ? "gpipe" : "1f1b", c->m, c->nodes, c->block_bytes, c->tied_bytes);
    tg_sb_jnum(o, "%.6g", c->tied);
    for (int t = 0; t < 2; t++) {
        const char *k[4] = {"step_s", "pipeline_s", "bubble", "pp1_step_s"};
        const double v[4] = {c->step[t], c->span[t], c->bubble[t], c->pp1_step[t]};
        for (int f = 0; f < 4; f++) {
            tg_sb_printf(o, ",\"%s%s\":", t ? "serial_" : "", k[f]);
            tg_sb_jnum(o, "%.6g", v[f]);
        }
    }
    tg_sb_puts(o, ",\"stages\":[");
    for (int st = 0; st < c->S; st++) {
        const tg_pipe_cost_stage *g = &c->st[st];
        tg_sb_printf(o, "%s\n {\"stage\":%d,\"layers\":[%d,%d],\"peak_bytes\":%lld,\"p2p_inter\":%s", st ? "," : "",
                     st, g->l0, g->l0 + g->nl - 1, g->peak_bytes, g->p2p_inter ? "true" : "false");
        for (int t = 0; t < 2; t++) {
            const char *k[7] = {"fwd_s", "bwd_s", "bwd_last_s", "opt_s", "busy_s", "idle_s", "p2p_s"};
            const double v[7] = {g->fwd[t], g->bwd[t], g->bwd_last[t], g->opt[t], g->busy[t], c->span[t] - g->busy[t],
                                 g->p2p};
            for (int f = 0; f < (t ? 6 : 7); f++) {
                tg_sb_printf(o, ",\"%s%s\":", t ? "serial_" : "", k[f]);
                tg_sb_jnum(o, "%.6g", v[f]);
            }
        }
        tg_sb_puts(o, "}");
    }
    tg_sb_puts(o, "\n]}\n");
}
