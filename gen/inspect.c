/*
 * inspect.c - the show and blocks views of a plan, and the filters and step
 * helpers every view shares (see inspect.h).
 *
 * Design: every figure printed here is a plan field or a sum of plan fields;
 * nothing is re-derived from the spec. Steps are treated generically (kind
 * names from tg_step_kind_name, collectives recognised by their group size)
 * so new step kinds and phases print without changes here. The one rule of
 * logical byte counting lives in tg_step_traffic. Alternative meshes are
 * judged by the real spec loader (tg_spec_load_string on the same model with
 * another mesh), so "not possible" carries exactly the message a user would
 * get from tessgen, and are planned class by class on a copy of the spec.
 * Output is deterministic: ranks, layers, buffers and tensors in plan order.
 * The summary's figures and printer are in summary.c.
 */
#include "inspect.h"
#include "describe.h"
#include "emit.h"
#include "fuse.h"
#include "streams.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "version.h"

#define NKIND_MAX 64 /* kinds are enumerated until tg_step_kind_name says "?" */

/* ---- step helpers ------------------------------------------------------------ */

bool tg_step_is_comm(const tg_step *s)
{
    return s->group_size > 0;
}

void tg_step_traffic(const tg_step *s, long long *recv, long long *sent, long long *reduced)
{
    *recv = *sent = *reduced = 0;
    if (!tg_step_is_comm(s))
        return;
    long long bytes = s->count * s->esize;
    if (s->ws) /* the weight-stationary layout's all-gather or reduce-scatter: the others' slices each way */
        *recv = *sent = bytes / s->group_size * (s->group_size - 1);
    else if (s->kind == TG_STEP_BCAST)
        *(s->is_root ? sent : recv) = bytes;
    else if (s->kind == TG_STEP_REDUCE) {
        if (s->is_root)
            *recv = bytes * (s->group_size - 1);
        else
            *sent = bytes;
    } else
        *reduced = bytes;
}

const char *tg_step_dir(const tg_step *s)
{
    long long r, se, re;
    tg_step_traffic(s, &r, &se, &re);
    if (!tg_step_is_comm(s))
        return "";
    if (s->kind == TG_STEP_BCAST)
        return s->is_root ? "send" : "recv";
    if (s->kind == TG_STEP_REDUCE)
        return s->is_root ? "recv" : "send";
    if (s->ws)
        return "recv+send";
    return "reduce";
}

const char *tg_phase_label(int phase)
{
    static const char *n[] = {"fwd", "bwd", "opt", "dec"};
    return (phase >= 0 && phase < 4) ? n[phase] : "phase?";
}

static int nkinds(void)
{
    int n = 0;
    while (n < NKIND_MAX && strcmp(tg_step_kind_name((tg_step_kind)n), "?") != 0)
        n++;
    return n;
}

int tg_phase_of(const tg_step *s)
{
    int ph = (int)s->phase;
    return ph < 0 ? 0 : ph >= TG_NPHASE ? TG_NPHASE - 1 : ph;
}

/* ---- filters ------------------------------------------------------------------- */

/* "0,5-7" or "all" into set[0..n). noun: "rank", "layer". */
static bool parse_set(const char *opt, const char *arg, const char *noun, int n, const char *ctx,
                      unsigned char *set, tg_err *err)
{
    if (!strcmp(arg, "all")) {
        memset(set, 1, (size_t)n);
        return true;
    }
    memset(set, 0, (size_t)n);
    const char *p = arg;
    if (!*p)
        return tg_fail(err, "%s needs a list such as 0,2-3 (%s)", opt, ctx);
    while (*p) {
        char *end;
        long a = strtol(p, &end, 10), b;
        if (end == p || *p == '-' || *p == '+' || *p == ' ')
            return tg_fail(err, "%s %s: expected %s numbers and ranges such as 0,2-3 or all (%s)", opt, arg, noun,
                           ctx);
        b = a;
        p = end;
        if (*p == '-') {
            const char *q = p + 1;
            b = strtol(q, &end, 10);
            if (end == q || *q == '-' || *q == '+' || *q == ' ')
                return tg_fail(err, "%s %s: a range needs two numbers, such as 2-3 (%s)", opt, arg, ctx);
            p = end;
        }
        if (*p == ',')
            p++;
        else if (*p)
            return tg_fail(err, "%s %s: unexpected '%c'; write %s numbers and ranges such as 0,2-3 (%s)", opt,
                           arg, *p, noun, ctx);
        if (a > b)
            return tg_fail(err, "%s %s: the range %ld-%ld is empty; write the smaller %s first", opt, arg, a, b,
                           noun);
        if (a < 0 || b >= n)
            return tg_fail(err, "%s %s: %s %ld is not in 0..%d (%s)", opt, arg, noun, a < 0 ? a : b, n - 1, ctx);
        for (long v = a; v <= b; v++)
            set[v] = 1;
    }
    return true;
}

bool tg_filter_init(tg_filter *f, const tg_plan *pl, const char *ranks, const char *layers, const char *kinds,
                    tg_err *err)
{
    memset(f, 0, sizeof *f);
    f->p = tg_plan_world(pl); /* pipeline stages: every stage's world ranks */
    f->layers = pl->spec.layers;
    f->rank = malloc((size_t)f->p);
    f->layer = malloc((size_t)f->layers);
    if (!f->rank || !f->layer) {
        tg_filter_free(f);
        return tg_fail(err, "out of memory");
    }
    char ctx[96], mt[48];
    tg_mesh_text(&pl->mesh, mt, sizeof mt);
    if (tg_plan_stages(pl) > 1)
        snprintf(ctx, sizeof ctx, "mesh %s x %d pipeline stages has %d ranks", mt, tg_plan_stages(pl), f->p);
    else
        snprintf(ctx, sizeof ctx, "mesh %s has %d ranks", mt, pl->mesh.p);
    f->all_ranks = !ranks || !strcmp(ranks, "all");
    if (!parse_set("--ranks", ranks ? ranks : "all", "rank", f->p, ctx, f->rank, err)) {
        tg_filter_free(f);
        return false;
    }
    snprintf(ctx, sizeof ctx, "the model has %d layer%s", f->layers, f->layers == 1 ? "" : "s");
    f->all_layers = !layers || !strcmp(layers, "all");
    if (!parse_set("--layers", layers ? layers : "all", "layer", f->layers, ctx, f->layer, err)) {
        tg_filter_free(f);
        return false;
    }
    f->other_layers = f->all_layers;
    f->all_kinds = !kinds || !strcmp(kinds, "all");
    int nk = nkinds();
    if (f->all_kinds) {
        f->kind = ~0ULL;
        f->comm = f->compute = 1;
    } else {
        const char *p = kinds;
        if (!*p) {
            tg_filter_free(f);
            return tg_fail(err, "--kinds needs a list such as bcast,gemm");
        }
        while (*p) {
            size_t len = strcspn(p, ",");
            char item[64];
            snprintf(item, sizeof item, "%.*s", (int)(len < 63 ? len : 63), p);
            int found = 0;
            if (!strcmp(item, "comm"))
                f->comm = found = 1;
            else if (!strcmp(item, "compute"))
                f->compute = found = 1;
            for (int k = 0; k < nk && !found; k++)
                if (!strcmp(item, tg_step_kind_name((tg_step_kind)k))) {
                    f->kind |= 1ULL << k;
                    found = 1;
                }
            if (!found) {
                char known[1024] = "comm, compute";
                size_t o = strlen(known);
                for (int k = 0; k < nk && o < sizeof known - 40; k++)
                    o += (size_t)snprintf(known + o, sizeof known - o, ", %s", tg_step_kind_name((tg_step_kind)k));
                tg_filter_free(f);
                return tg_fail(err, "--kinds %s: '%s' is not a step kind; use a comma-separated list of: %s", kinds,
                               item, known);
            }
            p += len;
            if (*p == ',')
                p++;
        }
    }
    snprintf(f->desc, sizeof f->desc, "ranks %.60s; layers %.60s; kinds %.100s", ranks ? ranks : "all",
             layers ? layers : "all", kinds ? kinds : "all");
    snprintf(f->ranks_desc, sizeof f->ranks_desc, "%.60s", ranks ? ranks : "all");
    return true;
}

void tg_filter_free(tg_filter *f)
{
    free(f->rank);
    free(f->layer);
    f->rank = f->layer = NULL;
}

bool tg_filter_step(const tg_filter *f, const tg_step *s)
{
    if (s->layer >= 0 && s->layer < f->layers) {
        if (!f->layer[s->layer])
            return false;
    } else if (!f->other_layers) {
        return false;
    }
    int k = (int)s->kind;
    if (k >= 0 && k < NKIND_MAX && (f->kind >> k) & 1)
        return true;
    return tg_step_is_comm(s) ? f->comm : f->compute;
}

/* ---- small printers ---------------------------------------------------------------- */

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* "0-3,8,10-11" */
void tg_print_ranks(tg_sb *o, const int *r, int n)
{
    for (int a = 0; a < n;) {
        int b = a;
        while (b + 1 < n && r[b + 1] == r[b] + 1)
            b++;
        if (b > a + 1)
            tg_sb_printf(o, "%s%d-%d", a ? "," : "", r[a], r[b]);
        else if (b == a + 1)
            tg_sb_printf(o, "%s%d,%d", a ? "," : "", r[a], r[b]);
        else
            tg_sb_printf(o, "%s%d", a ? "," : "", r[a]);
        a = b + 1;
    }
}

void tg_inspect_header(tg_sb *o, const tg_plan *pl, const char *what)
{
    const tg_spec *s = &pl->spec;
    char mt[48], mb[320] = "";
    tg_mesh_text(&pl->mesh, mt, sizeof mt);
    size_t n = 0;
    if (pl->mb > 1) /* the arena and the per-step figures below are those of this split (docs/TRAINING.md) */
        n = (size_t)snprintf(mb, sizeof mb, ", micro-batches: %d of %d sequence%s per rank", pl->mb,
                             pl->nseq / pl->mb, pl->nseq / pl->mb == 1 ? "" : "s");
    if (s->mode == TG_TRAIN && s->recompute > 0 && n < sizeof mb) /* and so are the arena and the flops here */
        snprintf(mb + n, sizeof mb - n, ", recompute: %s%d of %d layer%s", s->recompute == s->layers ? "all " : "",
                 s->recompute, s->layers, s->layers == 1 ? "" : "s");
    if (s->opt.shard) /* docs/TRAINING.md "Optimizer state sharded over depth" */
        snprintf(mb + strlen(mb), sizeof mb - strlen(mb), pl->mesh.d > 1 ?
                 ", optimizer.shard: the matrices' AdamW moments / d = %d (ceil(elems/d) each)" :
                 ", optimizer.shard: d = %d, nothing to shard", pl->mesh.d);
    if (tg_plan_stages(pl) > 1) /* pipeline stages: every stage's ranks */
        snprintf(mt + strlen(mt), sizeof mt - strlen(mt), " x %d pipeline stages", tg_plan_stages(pl));
    const char *attn = s->attention != TG_ATTN_CUDNN ? ""
                       : s->attention_default ? ", attention cudnn (the default for this spec; docs/CUDA.md)"
                                              : ", attention cudnn";
    tg_sb_printf(o, "# tessgen %s %s of %s (%s): mesh %s = %d ranks, %d layer%s (C=%d, heads=%d, F=%d, "
                    "S=%d, B=%d)%s%s%s%s\n",
                 TG_VERSION, what, s->name, s->path, mt, tg_plan_world(pl), s->layers,
                 s->layers == 1 ? "" : "s", s->hidden, s->heads, s->ffn, s->seq, s->batch,
                 s->mode == TG_TRAIN ? ", training" : "", mb, s->dtype == TG_BF16 ? ", bf16 (docs/BF16.md)" : "",
                 attn);
}

void tg_step_label(tg_sb *o, const tg_step *s)
{
    if (s->layer >= 0)
        tg_sb_printf(o, "%s L%d %s", tg_phase_label(s->phase), s->layer, s->op);
    else
        tg_sb_printf(o, "%s %s", tg_phase_label(s->phase), s->op);
    if (s->t >= 0)
        tg_sb_printf(o, " t=%d", s->t);
    tg_sb_printf(o, " %s", tg_step_kind_name(s->kind));
}

/* ---- pipeline stages: one stage's proved steps, resolved for a class ----------------------------------------- */

const char *tg_pstep_kind_name(int kind)
{
    static const char *n[] = {"recv_act", "send_act", "recv_grad", "send_grad",
                              "forward", "backward", "stash_save", "stash_load"};
    return kind >= 0 && kind < (int)(sizeof n / sizeof *n) ? n[kind] : "?";
}

void tg_pipe_view_free(tg_pipe_view *v)
{
    tg_pipe_free(&v->pipe);
    free(v->steps);
    memset(v, 0, sizeof *v);
}

bool tg_pipe_view_build(const tg_plan *pl, const tg_class_plan *rp, tg_pipe_view *v, tg_err *err)
{
    const tg_spec *sp = &pl->spec;
    memset(v, 0, sizeof *v);
    int s = rp->stage, m = pl->mb, p = pl->mesh.p;
    if (!tg_pipe_build(&v->pipe, sp->pp, m, sp->schedule, sp->stage_layers, err))
        return false;
    if (!tg_pipe_simulate(&v->pipe, err)) {
        tg_pipe_free(&v->pipe);
        return false;
    }
    v->stage = s;
    v->stash = v->pipe.stash[s];
    /* what a stash slot holds: the runtime copies these (emit_rank_c.c's pipe_stash, the same rule) */
    for (int i = 0; i < rp->nbufs; i++) {
        const tg_buf *bf = &rp->bufs[i];
        if (!bf->persistent && bf->first >= 0 && rp->steps[bf->first].phase == TG_PHASE_FWD &&
            rp->steps[bf->last].phase == TG_PHASE_BWD) {
            v->nstash++;
            v->slot_bytes += 4 * tg_buf_slots(bf);
        }
    }
    const tg_pipe_op *ops = v->pipe.ops[s];
    int nops = v->pipe.nops[s];
    v->steps = calloc((size_t)(2 * nops + 1), sizeof *v->steps); /* F and B may each bring a stash copy */
    if (!v->steps) {
        tg_pipe_view_free(v);
        return tg_fail(err, "out of memory");
    }
    long long n = (long long)(pl->R / m) * pl->Cq; /* one micro-batch's rows of x, y and grad_x */
    for (int k = 0; k < nops; k++) {
        const tg_pipe_op *o = &ops[k];
        tg_pstep st = {0, o->mb, -1, -1, 0, o->joint, -1, 0, 0, o->at};
        int slot = v->stash > 0 ? o->mb % v->stash : 0;
        switch (o->kind) {
        case TG_PIPE_FWD:
        case TG_PIPE_BWD: {
            int fwd = o->kind == TG_PIPE_FWD;
            tg_pstep cp = {fwd ? TG_PSTEP_STASH_SAVE : TG_PSTEP_STASH_LOAD, o->mb, slot, -1, 0, 0, -1, 0,
                           v->slot_bytes, o->at + (fwd ? (long long)v->pipe.layers[s] : 0)};
            st.kind = fwd ? TG_PSTEP_FORWARD : TG_PSTEP_BACKWARD;
            st.slot = slot;
            if (!fwd && v->slot_bytes)
                v->steps[v->n++] = cp;
            v->steps[v->n++] = st;
            if (fwd && v->slot_bytes)
                v->steps[v->n++] = cp;
            continue;
        }
        case TG_PIPE_RECV_ACT: st.kind = TG_PSTEP_RECV_ACT, st.buf = rp->x_buf; break;
        case TG_PIPE_SEND_ACT: st.kind = TG_PSTEP_SEND_ACT, st.buf = rp->y_buf; break;
        case TG_PIPE_RECV_GRAD: st.kind = TG_PSTEP_RECV_GRAD, st.buf = rp->gx_buf; break;
        default: st.kind = TG_PSTEP_SEND_GRAD, st.buf = rp->gx_buf; break;
        }
        st.peer_stage = o->peer;
        st.peer_offset = o->peer > s ? p : -p;
        st.offset = 4 * (rp->bufs[st.buf].offset + (long long)o->mb * n);
        st.bytes = 4 * n;
        v->steps[v->n++] = st;
    }
    return true;
}

/* ---- show ------------------------------------------------------------------------------ */

/* A group's members as world ranks: off is the first world rank of the stage (pipeline stages; 0 without). */
static void members(tg_sb *o, const tg_mesh *m, tg_group g, tg_coord c, int off)
{
    tg_sb_puts(o, "{");
    for (int l = 0; l < tg_group_size(m, g); l++)
        tg_sb_printf(o, "%s%d", l ? "," : "", tg_group_member(m, g, c, l) + off);
    tg_sb_puts(o, "}");
}

/* The stages: layers, stash, and the classes with their world ranks. */
static bool show_stages(const tg_plan *pl, tg_sb *o, tg_err *err)
{
    const tg_spec *sp = &pl->spec;
    const tg_mesh *m = &pl->mesh;
    int S = sp->pp, q = m->q;
    tg_pipe pp;
    if (!tg_pipe_build(&pp, S, pl->mb, sp->schedule, sp->stage_layers, err))
        return false;
    if (!tg_pipe_simulate(&pp, err)) {
        tg_pipe_free(&pp);
        return false;
    }
    int *rk = malloc((size_t)m->d * sizeof *rk);
    if (!rk) {
        tg_pipe_free(&pp);
        return tg_fail(err, "out of memory");
    }
    tg_sb_printf(o, "# pipeline: %d stages, schedule %s, %d micro-batch%s per step, makespan %lld slots; stage s holds "
                    "world ranks s*%d .. s*%d+%d. A rank's steps below are its class program: one micro-batch's "
                    "forward and backward (and the optimizer), which its stage's proved pipeline steps (after them) "
                    "run per micro-batch\n",
                 S, sp->schedule == TG_PIPE_GPIPE ? "gpipe" : "1f1b", pl->mb, pl->mb == 1 ? "" : "es", pp.makespan,
                 m->p, m->p, m->p - 1);
    for (int s = 0, l0 = 0; s < S; l0 += sp->stage_layers[s], s++) {
        tg_sb_printf(o, "# stage %d: layers %d..%d, stash %d slot%s; classes (s,i,j):", s, l0,
                     l0 + sp->stage_layers[s] - 1, pp.stash[s], pp.stash[s] == 1 ? "" : "s");
        for (int c = 0; c < q * q; c++) {
            for (int k = 0; k < m->d; k++)
                rk[k] = tg_mesh_rank(m, (tg_coord){c / q, c % q, k}) + s * m->p;
            tg_sb_printf(o, "%s (%d,%d,%d) rank%s ", c ? "," : "", s, c / q, c % q, m->d == 1 ? "" : "s");
            tg_print_ranks(o, rk, m->d);
        }
        tg_sb_puts(o, "\n");
    }
    free(rk);
    tg_pipe_free(&pp);
    return true;
}

/* World rank r's pipeline steps (its class rp's stage's proved list); all: also the forwards, backwards and stash
 * copies, else only the sends and receives. */
static bool show_pipe_steps(const tg_plan *pl, const tg_class_plan *rp, int r, int all, tg_sb *o, tg_err *err)
{
    tg_pipe_view v;
    if (!tg_pipe_view_build(pl, rp, &v, err))
        return false;
    tg_sb_printf(o, "   pipeline steps of stage %d (schedule %s, %d micro-batch%s, stash %d slot%s of %lld bytes: %d "
                    "buffer%s); 'at': the slot of the proved schedule, 'joint': one exchange with the next step "
                    "(MPI_Sendrecv)\n",
                 v.stage, pl->spec.schedule == TG_PIPE_GPIPE ? "gpipe" : "1f1b", pl->mb, pl->mb == 1 ? "" : "es",
                 v.stash, v.stash == 1 ? "" : "s", v.slot_bytes, v.nstash, v.nstash == 1 ? "" : "s");
    for (int k = 0; k < v.n; k++) {
        const tg_pstep *st = &v.steps[k];
        if (!all && st->peer_stage < 0)
            continue;
        tg_sb_printf(o, "  p%-4d at %-4lld %-10s mb %d", k, st->at, tg_pstep_kind_name(st->kind), st->mb);
        if (st->peer_stage >= 0)
            tg_sb_printf(o, " peer %d (stage %d) %s:%s@%lld+%lld%s\n", r + st->peer_offset, st->peer_stage,
                         rp->bufs[st->buf].name, st->kind == TG_PSTEP_RECV_ACT || st->kind == TG_PSTEP_RECV_GRAD ?
                         "w" : "r", st->offset, st->bytes, st->joint ? " joint" : "");
        else if (st->kind == TG_PSTEP_STASH_SAVE || st->kind == TG_PSTEP_STASH_LOAD)
            tg_sb_printf(o, " slot %d %lld bytes\n", st->slot, st->bytes);
        else
            tg_sb_printf(o, " slot %d\n", st->slot);
    }
    tg_pipe_view_free(&v);
    return true;
}

bool tg_inspect_show(const tg_plan *pl, const tg_filter *f, tg_sb *o, tg_err *err)
{
    const tg_mesh *m = &pl->mesh;
    int nc = tg_plan_nclasses(pl);
    /* plan only the classes of the chosen ranks, each once */
    tg_class_plan *cls = calloc((size_t)nc, sizeof *cls);
    char *need = calloc((size_t)nc, 1);
    if (!cls || !need) {
        free(cls);
        free(need);
        return tg_fail(err, "out of memory");
    }
    bool ok = true;
    for (int r = 0; r < f->p; r++)
        if (f->rank[r])
            need[tg_class_of(pl, r)] = 1;
    for (int c = 0; c < nc && ok; c++)
        if (need[c])
            ok = tg_plan_class_n(pl, c, &cls[c], err);
    tg_inspect_header(o, pl, "schedule");
    tg_sb_printf(o, "# showing %s\n", f->desc);
    tg_sb_puts(o, "# per step: index, phase, layer, op, SUMMA step, kind, stream of the CUDA program (compute, comm) "
                  "and 'wait N' when it first waits for step N of the other stream;\n# collectives: group={member "
                  "ranks}, root (global rank), what this rank does, elements, bytes, 'overlaps gemm N' when a SUMMA "
                  "broadcast runs while GEMM N computes;\n# others: flops and what is computed ('CUDA: ... epilogue': a "
                  "GEMM and the step after it (GeLU, its gradient or a bias gradient) run as one cuBLASLt call). "
                  "Buffers: name:access@offset+bytes (offsets and sizes in bytes of the rank's arena)\n");
    int S = tg_plan_stages(pl);
    if (S > 1 && ok)
        ok = show_stages(pl, o, err);
    for (int r = 0; r < f->p && ok; r++) {
        if (!f->rank[r])
            continue;
        const tg_class_plan *rp = &cls[tg_class_of(pl, r)];
        tg_coord co = tg_mesh_coord(m, r % m->p);
        int off = (r / m->p) * m->p; /* pipeline stages: the first world rank of r's stage (0 without) */
        int shown = 0;
        for (int i = 0; i < rp->nsteps; i++)
            shown += tg_filter_step(f, &rp->steps[i]);
        if (S > 1)
            tg_sb_printf(o, "\n== rank %d (stage %d, i=%d, j=%d, k=%d)", r, rp->stage, co.i, co.j, co.k);
        else
            tg_sb_printf(o, "\n== rank %d (i=%d, j=%d, k=%d)", r, co.i, co.j, co.k);
        for (int g = 0; g < TG_NGROUPS; g++) {
            char lab[32];
            if (!tg_group_used(m, (tg_group)g))
                continue;
            tg_group_label(m, (tg_group)g, co, lab, sizeof lab);
            tg_sb_printf(o, "  %s=", lab);
            members(o, m, (tg_group)g, co, off);
        }
        tg_sb_printf(o, "\n   arena %lld bytes (weights %lld), %lld flops, %d steps, %d shown\n", 4 * rp->arena_elems,
                     4 * rp->weight_elems, rp->flops, rp->nsteps, shown);
        for (int i = 0; i < rp->nsteps; i++) {
            const tg_step *s = &rp->steps[i];
            if (!tg_filter_step(f, s))
                continue;
            char lay[16], tt[16];
            if (s->layer >= 0)
                snprintf(lay, sizeof lay, "L%d", s->layer);
            else
                snprintf(lay, sizeof lay, "-");
            if (s->t >= 0)
                snprintf(tt, sizeof tt, "t=%d", s->t);
            else
                tt[0] = '\0';
            char wait[24] = "";
            if (s->wait >= 0)
                snprintf(wait, sizeof wait, "wait %d", s->wait);
            tg_sb_printf(o, "  %5d %-3s %-3s %-5s %-4s %-12s %-7s %-10s ", i, tg_phase_label(s->phase), lay, s->op,
                         tt, tg_step_kind_name(s->kind), tg_stream_name(s->stream), wait);
            if (tg_step_is_comm(s)) {
                char lab[32];
                tg_group_label(m, s->group, co, lab, sizeof lab);
                tg_sb_printf(o, "%s=", lab);
                members(o, m, s->group, co, off);
                if (tg_step_root(pl, co, s) >= 0)
                    tg_sb_printf(o, " root %d", tg_step_root(pl, co, s) + off);
                tg_sb_printf(o, " %s %lld elems %lld bytes", tg_step_dir(s), s->count, s->esize * s->count);
                if (s->overlaps >= 0)
                    tg_sb_printf(o, "; overlaps gemm %d", s->overlaps);
                tg_sb_puts(o, "\n");
            } else {
                if (s->flops)
                    tg_sb_printf(o, "%lld flops  ", s->flops);
                char what[256], fu[96];
                tg_sb_printf(o, "%s%s\n", tg_step_text(what, sizeof what, pl, rp, co, s),
                             tg_fuse_text(fu, sizeof fu, rp, s));
            }
            tg_sb_puts(o, "          buffers:");
            for (int k = 0; k < TG_STEP_MAXBUF; k++) {
                if (s->buf[k] < 0)
                    continue;
                const tg_buf *b = &rp->bufs[s->buf[k]];
                tg_sb_printf(o, " %s:%s%s@%lld+%lld", b->name, (s->acc[k] & TG_ACC_R) ? "r" : "",
                             (s->acc[k] & TG_ACC_W) ? "w" : "", 4 * b->offset, 4 * b->elems);
            }
            tg_sb_puts(o, "\n");
        }
        if (S > 1 && f->other_layers && (f->all_kinds || f->comm))
            ok = show_pipe_steps(pl, rp, r, f->all_kinds, o, err);
    }
    for (int c = 0; c < nc; c++)
        tg_class_free(&cls[c]);
    free(cls);
    free(need);
    return ok;
}

/* ---- blocks ------------------------------------------------------------------------------ */

typedef struct blk {
    int r0, nr, c0, nc, rank;
} blk;

static int cmp_blk(const void *pa, const void *pb)
{
    const blk *a = pa, *b = pb;
    if (a->r0 != b->r0)
        return a->r0 < b->r0 ? -1 : 1;
    if (a->c0 != b->c0)
        return a->c0 < b->c0 ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Sorted distinct starts (with their lengths) of the rows (rows=1) or columns of the blocks. */
static int distinct(const blk *b, int n, int rows, int *start, int *len)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        start[k] = rows ? b[i].r0 : b[i].c0;
        len[k++] = rows ? b[i].nr : b[i].nc;
    }
    /* sort the (start, length) pairs packed in one key, then keep each start once */
    long long *key = malloc((size_t)(k > 0 ? k : 1) * sizeof *key);
    if (!key)
        return 0;
    for (int i = 0; i < k; i++)
        key[i] = (long long)start[i] << 32 | (unsigned)len[i];
    qsort(key, (size_t)k, sizeof *key, cmp_ll);
    int w = 0;
    for (int i = 0; i < k; i++)
        if (w == 0 || (int)(key[i] >> 32) != start[w - 1]) {
            start[w] = (int)(key[i] >> 32);
            len[w++] = (int)(key[i] & 0xffffffff);
        }
    free(key);
    return w;
}

static void print_mesh(const tg_plan *pl, tg_sb *o)
{
    const tg_mesh *m = &pl->mesh;
    char lab[64];
    int S = tg_plan_stages(pl);
    int cw = snprintf(lab, sizeof lab, "%d", S * m->p - 1), lw = snprintf(lab, sizeof lab, "depth k=%d:", m->d - 1);
    int jw = snprintf(lab, sizeof lab, "j=%d", m->q - 1);
    if (jw > cw)
        cw = jw;
    if (m->scheme == TG_SCHEME_MEGATRON) {
        tg_sb_printf(o, "mesh megatron p=%d = %d ranks; rank r = (i=r, j=0, k=0), one group: world\n", m->p, m->p);
        return;
    }
    tg_sb_printf(o, "mesh [%d,%d,%d] = %d ranks; %s (i: row, j: column, k: depth; placement \"%s\")\n", m->q,
                 m->q, m->d, m->p, tg_mesh_rank_formula(m), tg_placement_name(m->placement));
    if (S > 1)
        tg_sb_printf(o, "%d pipeline stages: stage s holds world ranks s*%d + the rank formula (docs/TRAINING.md "
                        "\"Pipeline stages\")\n", S, m->p);
    for (int st = 0, l0 = 0; st < S; l0 += pl->spec.stage_layers[st], st++) {
    if (S > 1)
        tg_sb_printf(o, " stage %d (layers %d..%d):\n", st, l0, l0 + pl->spec.stage_layers[st] - 1);
    for (int k = 0; k < m->d; k++) {
        snprintf(lab, sizeof lab, "depth k=%d:", k);
        tg_sb_printf(o, "  %-*s", lw, lab);
        for (int j = 0; j < m->q; j++) {
            snprintf(lab, sizeof lab, "j=%d", j);
            tg_sb_printf(o, " %*s", cw, lab);
        }
        tg_sb_puts(o, "\n");
        for (int i = 0; i < m->q; i++) {
            snprintf(lab, sizeof lab, "i=%d", i);
            tg_sb_printf(o, "  %*s", lw, lab);
            for (int j = 0; j < m->q; j++)
                tg_sb_printf(o, " %*d", cw, tg_mesh_rank(m, (tg_coord){i, j, k}) + st * m->p);
            tg_sb_puts(o, "\n");
        }
    }
    }
}

/* The index of the tensor called name in the params of class plan cp, -1 for x, -2 when cp does not hold it. */
static int param_index(const tg_class_plan *cp, const char *name)
{
    if (!strcmp(name, "x"))
        return -1;
    for (int i = 0; i < cp->nparams; i++)
        if (!strcmp(cp->params[i].name, name))
            return i;
    return -2;
}

/* One tensor's block map over the selected ranks; sh: every class's shards (tg_plan_class_shards), by class
 * number. pi indexes the params of stage st0's classes, which hold the tensor (-1: x); with pipeline stages
 * the ranks of every stage that holds it (a block's layer lives on one stage; x on all: each stage's input). */
static bool print_tensor(const tg_plan *pl, const tg_class_plan *sh, const tg_filter *f, int st0, int pi,
                         tg_sb *o, tg_err *err)
{
    const tg_mesh *m = &pl->mesh;
    int cap = 3 * f->p, n = 0;
    blk *b = malloc((size_t)cap * sizeof *b);
    int *rs = malloc((size_t)cap * sizeof *rs), *rl = malloc((size_t)cap * sizeof *rl);
    int *cs = malloc((size_t)cap * sizeof *cs), *cl = malloc((size_t)cap * sizeof *cl);
    int *hold = malloc((size_t)f->p * sizeof *hold);
    if (!b || !rs || !rl || !cs || !cl || !hold) {
        free(b), free(rs), free(rl), free(cs), free(cl), free(hold);
        return tg_fail(err, "out of memory");
    }
    const char *name;
    int full0, full1, ndim;
    char local[96];
    int S = tg_plan_stages(pl), qq = m->q * m->q;
    const tg_class_plan *r0 = &sh[st0 * qq];
    if (pi < 0) {
        const tg_buf *x = &r0->bufs[r0->x_buf];
        name = "x";
        ndim = 2;
        full0 = pl->T;
        full1 = pl->spec.hidden;
        snprintf(local, sizeof local, "buffer %s [%d,%d]", x->name, x->rows, x->cols);
    } else {
        const tg_param *p = &r0->params[pi];
        name = p->name;
        ndim = p->ndim;
        full0 = ndim == 1 ? 1 : p->full[0];
        full1 = ndim == 1 ? p->full[0] : p->full[1];
        const tg_buf *sb = &r0->bufs[p->buf];
        snprintf(local, sizeof local, "buffer %s [%d,%d]", sb->name, sb->rows, sb->cols);
    }
    int per_rank = 0, spi = pi, nheld = 0, held[2] = {st0, st0}; /* the stages holding it: one, or wte's two */
    for (int r = 0; r < f->p; r++) {
        const tg_class_plan *rp = &sh[tg_class_of(pl, r)];
        tg_coord co = tg_mesh_coord(m, r % m->p);
        if (S > 1 && r % m->p == 0) { /* a stage's classes declare the same tensors in the same order */
            spi = param_index(&sh[(r / m->p) * qq], name);
            if (spi != -2 && pi >= 0 && nheld < 2)
                held[nheld++] = r / m->p;
        }
        if (spi == -2) /* not on this stage */
            continue;
        if (pi < 0) {
            const tg_buf *x = &rp->bufs[rp->x_buf];
            b[n++] = (blk){tg_io_r0(pl, co), x->rows, tg_io_c0(pl, co), x->cols, r};
            per_rank = 1;
            continue;
        }
        const tg_param *p = &rp->params[spi]; /* every class declares the same tensors in the same order */
        per_rank = p->npieces;
        for (int k = 0; k < p->npieces && n < cap; k++)
            b[n++] = (blk){p->piece[k].r0, p->piece[k].nr, p->piece[k].c0, p->piece[k].nc, r};
    }
    int nr = distinct(b, n, 1, rs, rl), nc = distinct(b, n, 0, cs, cl);
    qsort(b, (size_t)n, sizeof *b, cmp_blk); /* a cell's holders are now consecutive, in rank order */
    if (ndim == 1)
        tg_sb_printf(o, "\n%s [%d]: %d block%s", name, full1, nc, nc == 1 ? "" : "s");
    else
        tg_sb_printf(o, "\n%s [%d, %d]: %d x %d blocks", name, full0, full1, nr, nc);
    /* holders per cell: runs of equal (r0, c0) */
    int minh = f->p, maxh = 0;
    for (int i = 0; i < n;) {
        int e = i;
        while (e < n && b[e].r0 == b[i].r0 && b[e].c0 == b[i].c0)
            e++;
        if (e - i < minh)
            minh = e - i;
        if (e - i > maxh)
            maxh = e - i;
        i = e;
    }
    tg_sb_printf(o, ", each held by %d", minh);
    if (maxh != minh)
        tg_sb_printf(o, "..%d", maxh);
    tg_sb_printf(o, " rank%s; a rank holds %d block%s %s its %s\n", maxh == 1 ? "" : "s", per_rank,
                 per_rank == 1 ? "" : "s", per_rank == 1 ? "in" : "side by side in", local);
    if (pi < 0)
        tg_sb_puts(o, "(the residual stream, [batch*seq, hidden]: input in, output out; every activation of a "
                      "block has this row split)\n");
    if (pi < 0 && S > 1)
        tg_sb_puts(o, "(with pipeline stages each stage's ranks hold it: a stage's input, received from the stage "
                      "before)\n");
    else if (S > 1 && nheld == 2)
        tg_sb_printf(o, "(held by stages %d and %d: world ranks %d..%d and %d..%d; the last stage's is the tied LM head's "
                        "copy, its gradient summed with stage %d's every step)\n",
                     held[0], held[1], held[0] * m->p, held[0] * m->p + m->p - 1, held[1] * m->p,
                     held[1] * m->p + m->p - 1, held[0]);
    else if (S > 1)
        tg_sb_printf(o, "(held by stage %d: world ranks %d..%d)\n", st0, st0 * m->p, st0 * m->p + m->p - 1);
    /* cell texts: selected holders */
    tg_sb *cell = calloc((size_t)nr * (size_t)nc, sizeof *cell);
    if (!cell) {
        free(b), free(rs), free(rl), free(cs), free(cl), free(hold);
        return tg_fail(err, "out of memory");
    }
    for (int i = 0; i < nr * nc; i++)
        tg_sb_init(&cell[i]);
    int width = 1;
    for (int i = 0, a = 0, c = 0; i < n;) {
        int e = i, h = 0;
        while (e < n && b[e].r0 == b[i].r0 && b[e].c0 == b[i].c0) {
            if (f->rank[b[e].rank])
                hold[h++] = b[e].rank;
            e++;
        }
        while (a < nr && rs[a] != b[i].r0)
            a++, c = 0;
        while (c < nc && cs[c] != b[i].c0)
            c++;
        if (a < nr && c < nc) {
            tg_sb *t = &cell[a * nc + c];
            if (h)
                tg_print_ranks(t, hold, h);
        }
        i = e;
    }
    for (int i = 0; i < nr * nc; i++) {
        if (!cell[i].len)
            tg_sb_puts(&cell[i], ".");
        if ((int)cell[i].len > width)
            width = (int)cell[i].len;
    }
    char lab[64];
    for (int c = 0; c < nc; c++) {
        int l = snprintf(lab, sizeof lab, "%d..%d", cs[c], cs[c] + cl[c] - 1);
        if (l > width)
            width = l;
    }
    int rw = 0;
    for (int a = 0; a < nr; a++) {
        int l = ndim == 1 ? 0 : snprintf(lab, sizeof lab, "rows %d..%d", rs[a], rs[a] + rl[a] - 1);
        if (l > rw)
            rw = l;
    }
    if (rw < 4)
        rw = 4;
    tg_sb_printf(o, "  %-*s", rw, "cols");
    for (int c = 0; c < nc; c++) {
        snprintf(lab, sizeof lab, "%d..%d", cs[c], cs[c] + cl[c] - 1);
        tg_sb_printf(o, "  %*s", width, lab);
    }
    tg_sb_puts(o, "\n");
    for (int a = 0; a < nr; a++) {
        if (ndim == 1)
            tg_sb_printf(o, "  %-*s", rw, "");
        else {
            snprintf(lab, sizeof lab, "rows %d..%d", rs[a], rs[a] + rl[a] - 1);
            tg_sb_printf(o, "  %-*s", rw, lab);
        }
        for (int c = 0; c < nc; c++)
            tg_sb_printf(o, "  %*s", width, cell[a * nc + c].s);
        tg_sb_puts(o, "\n");
    }
    for (int i = 0; i < nr * nc; i++)
        tg_sb_free(&cell[i]);
    free(cell);
    free(b), free(rs), free(rl), free(cs), free(cl), free(hold);
    return true;
}

static int layer_of_name(const char *name)
{
    int l, n = 0;
    if (sscanf(name, "h.%d.%n", &l, &n) == 1 && n > 0)
        return l;
    return -1;
}

bool tg_inspect_blocks(const tg_plan *pl, const tg_filter *f, const char *tensor, tg_sb *o, tg_err *err)
{
    int nc = tg_plan_nclasses(pl), q = pl->mesh.q;
    tg_class_plan *sh = calloc((size_t)nc, sizeof *sh);
    if (!sh)
        return tg_fail(err, "out of memory");
    bool ok = true;
    int S = tg_plan_stages(pl), qq = q * q, all = 0;
    for (int c = 0; c < nc && ok; c++) { /* class c of stage c / qq (pipeline stages: its own blocks) */
        tg_plan sp = *pl;
        if (S == 1)
            ok = tg_plan_class_shards(pl, c / q, c % q, &sh[c], err);
        else
            ok = tg_plan_stage(&sp, c / qq, err) && tg_plan_class_shards(&sp, (c % qq) / q, c % q, &sh[c], err);
    }
    for (int st = 0; ok && st < S; st++)
        all += sh[st * qq].nparams + 1;
    /* which tensors, as (stage, index into that stage's params; -1 is x, once). Without a pattern, every layer's
     * blocks are laid out alike: the selected layers (--layers), or layer 0 alone when the model has several and
     * none was chosen */
    int matched = 0, only0 = !tensor && f->all_layers && pl->spec.layers > 1;
    int *which = ok ? malloc((size_t)(all > 0 ? all : 1) * sizeof *which) : NULL;
    int *wst = ok ? malloc((size_t)(all > 0 ? all : 1) * sizeof *wst) : NULL;
    if (ok && (!which || !wst))
        ok = tg_fail(err, "out of memory");
    for (int st = 0; ok && st < S; st++) {
        const tg_class_plan *r0 = &sh[st * qq];
        for (int pi = st ? 0 : -1; pi < r0->nparams; pi++) {
            const char *name = pi < 0 ? "x" : r0->params[pi].name;
            if (tensor && fnmatch(tensor, name, 0) != 0)
                continue;
            int l = layer_of_name(name);
            if (!tensor && l >= 0 && ((l < f->layers && !f->layer[l]) || (only0 && l != 0)))
                continue;
            if (!tensor && pi < 0 && !f->all_layers)
                continue;
            bool earlier = false; /* the language model's wte: stage 0's and the last stage's tied copy, one map (a
                                   * block's tensors are on one stage: only the others are looked up, so linear) */
            for (int e = 0; st > 0 && pi >= 0 && l < 0 && e < st && !earlier; e++)
                earlier = param_index(&sh[e * qq], name) >= 0;
            if (earlier)
                continue;
            wst[matched] = st;
            which[matched++] = pi;
        }
    }
    if (ok && tensor && matched == 0)
        ok = tg_fail(err,
                     "--blocks %s: no tensor of %s is called that (or matches it as a pattern); the tensors are x "
                     "(the residual stream) and, for l in 0..%d, h.l.ln_1.weight, h.l.ln_1.bias, "
                     "h.l.attn.c_attn.weight, h.l.attn.c_attn.bias, h.l.attn.c_proj.weight, h.l.attn.c_proj.bias, "
                     "h.l.ln_2.weight, h.l.ln_2.bias, h.l.mlp.c_fc.weight, h.l.mlp.c_fc.bias, "
                     "h.l.mlp.c_proj.weight, h.l.mlp.c_proj.bias; patterns such as 'h.0.*' select several",
                     tensor, pl->spec.name, pl->spec.layers - 1);
    if (ok) {
        tg_inspect_header(o, pl, "block map");
        tg_sb_printf(o, "# which rank holds which block of each tensor (ranks: %s); '.' = no selected rank\n",
                     f->all_ranks ? "all" : f->ranks_desc);
        if (only0)
            tg_sb_printf(o, "# every layer's tensors are split alike: layer 0 is shown; --layers L or a pattern such "
                            "as 'h.%d.*' shows others\n",
                         pl->spec.layers - 1);
        print_mesh(pl, o);
    }
    for (int i = 0; i < matched && ok; i++)
        ok = print_tensor(pl, sh, f, wst[i], which[i], o, err);
    free(which);
    free(wst);
    for (int c = 0; c < nc; c++)
        tg_class_free(&sh[c]);
    free(sh);
    return ok;
}
