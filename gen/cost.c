/*
 * cost.c - the cost model of cost.h over one class plan: a time per step from
 * its flops, bytes and the link its group crosses, then the two timelines a
 * backend runs (in order; or on two streams with the plan's waits).
 *
 * It reads only plan facts (kinds, counts, flops, buffers and their shapes,
 * groups through mesh.c, streams.c's waits) and the machine file, so the
 * prediction and the generated program cannot disagree about what runs.
 * Pure functions, no I/O.
 */
#include "cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse.h"

_Static_assert(TG_STEP_COPY + 1 == TG_COST_NKINDS, "TG_COST_NKINDS counts tg_step_kind");

static bool is_collective(tg_step_kind k)
{
    return k == TG_STEP_BCAST || k == TG_STEP_ALLREDUCE || k == TG_STEP_REDUCE || k == TG_STEP_REDUCESCATTER ||
           k == TG_STEP_ALLGATHER;
}

/* Bytes a compute step reads and writes: each operand once per access (a read-write operand twice). */
static double step_bytes(const tg_class_plan *cp, const tg_step *s)
{
    if (s->kind == TG_STEP_COPY) /* count elements read and written, not the whole buffers */
        return 8.0 * (double)s->count;
    if (s->kind == TG_STEP_ADAMW) /* param, m, v read and written; grad read; the bf16 copy written, if any */
        return (4.0 * 7.0 + (s->buf[4] >= 0 ? 2.0 : 0.0)) * (double)s->count;
    double b = 0;
    for (int k = 0; k < TG_STEP_MAXBUF; k++) {
        if (s->buf[k] < 0)
            continue;
        if (k == 2 && tg_fuse_d_bf16(cp, s)) { /* the fused call writes its kernel step's bf16 D, never this fp32 C */
            if (s->epi == TG_EPI_D_BF16) { /* D, the attention backward's bf16 dO, written here (that step still runs) */
                const tg_buf *d = &cp->bufs[cp->steps[s->fused].buf[6]];
                b += (double)tg_dtype_size(d->dtype) * (double)d->elems;
            }
            continue;
        }
        if (k == 1 && s->kind == TG_STEP_ATTN_BWD && s->fused >= 0) /* its GEMM wrote dO in bf16: the fp32 dO not read */
            continue;
        if (k == 5 && s->epi == TG_EPI_LNB) /* a layernorm backward's row kernel keeps the sums in registers */
            continue;
        int n = ((s->acc[k] & TG_ACC_R) ? 1 : 0) + ((s->acc[k] & TG_ACC_W) ? 1 : 0);
        const tg_buf *bf = &cp->bufs[s->buf[k]];
        b += (double)tg_dtype_size(bf->dtype) * (double)bf->elems * (n ? n : 1);
    }
    return b;
}

/* The link of the group that rank c's step s runs over: latency (s), bandwidth (bytes/s); *inter: crosses nodes. */
static void group_link(const tg_plan *pl, const tg_class_plan *cp, const tg_step *s, const tg_machine *mc,
                       double *lat, double *bw, int *inter)
{
    const tg_mesh *m = &pl->mesh;
    tg_coord c = {cp->i, cp->j, 0};
    int base = cp->stage * m->p; /* pipeline stage s holds world ranks s*p .. s*p + p - 1 (0 without stages) */
    int rpn = mc->ranks_per_node, me = (base + tg_mesh_rank(m, c)) / rpn, on_mine = 0, g = s->group_size;
    bool crosses = false;
    for (int l = 0; l < g; l++) {
        int node = (base + tg_group_member(m, s->group, c, l)) / rpn;
        if (node == me)
            on_mine++;
        else
            crosses = true;
    }
    *inter = crosses;
    if (!crosses) {
        *lat = mc->intra.latency_us * 1e-6;
        *bw = mc->intra.bandwidth_gbs * 1e9;
        return;
    }
    /* every rank of the node runs this step at once, each in its own group of this kind: the node's
     * network link is shared by (ranks on the node) / (members of one group on the node) groups */
    int used = m->p < rpn ? m->p : rpn;
    double share = (double)(on_mine > 0 ? on_mine : 1) / (double)used;
    double b = mc->inter.bandwidth_gbs * 1e9 * share;
    double intra = mc->intra.bandwidth_gbs * 1e9;
    *lat = mc->inter.latency_us * 1e-6;
    *bw = b < intra ? b : intra;
}

/* A GEMM of bf16 operands runs at the machine's bf16 rate when the file gives one; an fp32 GEMM at the fp32 rate,
 * or tf32 when the machine says fp32 GEMMs use it. */
static double gemm_rate(const tg_class_plan *cp, const tg_step *s, const tg_machine *mc)
{
    if (s->kind == TG_STEP_GEMM && cp->bufs[s->buf[0]].dtype == TG_BUF_BF16 && mc->gemm_tflops_bf16 > 0)
        return mc->gemm_tflops_bf16 * 1e12;
    double r = mc->fp32_uses_tf32 && mc->gemm_tflops_tf32 > 0 ? mc->gemm_tflops_tf32 : mc->gemm_tflops_fp32;
    return r * 1e12;
}

double tg_cost_step(const tg_plan *pl, const tg_class_plan *cp, const tg_step *s, const tg_machine *mc, int *inter)
{
    int x = 0;
    double t;
    if (is_collective(s->kind)) {
        double n = (double)tg_dtype_size(cp->bufs[s->buf[0]].dtype) * (double)s->count, g = s->group_size, lat, bw;
        if (s->group_size <= 1) {
            t = 0;
        } else {
            group_link(pl, cp, s, mc, &lat, &bw, &x);
            if (s->kind == TG_STEP_ALLREDUCE && !s->exact)
                t = 2 * (g - 1) * lat + 2 * (g - 1) / g * n / bw;
            else if (s->kind == TG_STEP_ALLREDUCE) /* reduce onto one member, then bcast from it */
                t = 2 * ((g - 1) * lat + n / bw);
            else if (s->kind == TG_STEP_REDUCESCATTER || s->kind == TG_STEP_ALLGATHER) /* each member (g-1)/g of n */
                t = (g - 1) * lat + (g - 1) / g * n / bw;
            else
                t = (g - 1) * lat + n / bw;
            t += mc->launch_us * 1e-6;
        }
    } else if (tg_fuse_absorbed(cp, s)) {
        /* the epilogue of the GEMM before it (fuse.c): no launch, only the bytes it adds */
        t = (double)tg_fuse_extra_bytes(cp, s) / (mc->memory_bandwidth_gbs * 1e9);
    } else {
        double tf = (double)s->flops / gemm_rate(cp, s, mc);
        double tb = step_bytes(cp, s) / (mc->memory_bandwidth_gbs * 1e9);
        t = (tf > tb ? tf : tb) + mc->launch_us * 1e-6;
    }
    if (inter)
        *inter = x;
    return t;
}

/* The two-stream timeline of each phase of one micro-batch that is not the last: the steps that run on the last
 * micro-batch only (tg_step.last_mb: the gradients' all-reduces) left out, so they take no time and delay no step of
 * their stream. span[phase] gets its length. t[i]: each step's time (tg_cost_step); end: scratch of nsteps. */
static void span_not_last(const tg_class_plan *cp, const double *t, double *end, double span[4])
{
    double clock[2] = {0, 0}, start = 0;
    int cur = -1;
    for (int i = 0; i < cp->nsteps; i++) {
        const tg_step *s = &cp->steps[i];
        if ((int)s->phase != cur) {
            double t0 = clock[0] > clock[1] ? clock[0] : clock[1];
            if (cur >= 0)
                span[cur] = t0 - start;
            clock[0] = clock[1] = start = t0;
            cur = (int)s->phase;
        }
        end[i] = 0;
        if (s->last_mb)
            continue;
        int st = s->stream == TG_STREAM_COMM ? 1 : 0;
        double b = clock[st];
        if (s->wait >= 0 && end[s->wait] > b)
            b = end[s->wait];
        end[i] = b + t[i];
        clock[st] = end[i];
    }
    if (cur >= 0)
        span[cur] = (clock[0] > clock[1] ? clock[0] : clock[1]) - start;
}

bool tg_cost_class(const tg_plan *pl, const tg_class_plan *cp, const tg_machine *mc, tg_cost *out, tg_err *err)
{
    memset(out, 0, sizeof *out);
    int L = pl->spec.layers;
    double *end = malloc((size_t)(cp->nsteps > 0 ? cp->nsteps : 1) * sizeof *end);
    out->layer_s = calloc((size_t)4 * (size_t)L, sizeof *out->layer_s); /* every tg_phase, decode included */
    if (!end || !out->layer_s) {
        free(end);
        free(out->layer_s);
        out->layer_s = NULL;
        return tg_fail(err, "cost model: out of memory for %d steps", cp->nsteps);
    }
    out->layers = L;
    out->peak_bytes = 4 * cp->arena_elems;
    out->nodes = (pl->mesh.p + mc->ranks_per_node - 1) / mc->ranks_per_node;

    /* Micro-batches (tg_step_times): the steps are one micro-batch's, run mb times, but for the gradients'
     * all-reduces (last_mb: inside their layers' backward, on the last micro-batch only): a phase's stream time is
     * mb - 1 times the span of a micro-batch without them plus the span of the last one, with them; every sum
     * (serial, kinds, bytes) counts each step as often as it runs, and a layer's span mb times. */
    double *step_t = malloc((size_t)(cp->nsteps > 0 ? cp->nsteps : 1) * sizeof *step_t);
    if (!step_t) {
        free(end);
        tg_cost_free(out);
        return tg_fail(err, "cost model: out of memory for %d steps", cp->nsteps);
    }
    double clock[2] = {0, 0}; /* the two streams, within the current phase */
    double phase_start = 0, layer_mark = 0;
    int cur_phase = -1, cur_layer = -2;
    for (int i = 0; i < cp->nsteps; i++) {
        const tg_step *s = &cp->steps[i];
        if ((int)s->phase != cur_phase) { /* a phase starts with both streams joined */
            double t0 = clock[0] > clock[1] ? clock[0] : clock[1];
            if (cur_phase >= 0)
                out->phase[cur_phase].streams_s = t0 - phase_start;
            clock[0] = clock[1] = phase_start = layer_mark = t0;
            cur_phase = (int)s->phase;
            cur_layer = -2;
        }
        int inter = 0;
        double t = tg_cost_step(pl, cp, s, mc, &inter), times = (double)tg_step_times(pl, s);
        step_t[i] = t;
        tg_cost_phase *ph = &out->phase[s->phase];
        ph->serial_s += times * t;
        if (!s->last_mb)
            ph->mb_serial_s += t;
        ph->nsteps++;
        ph->kind_s[s->kind] += times * t;
        if (is_collective(s->kind)) {
            ph->comm_s += times * t;
            if (inter)
                ph->comm_inter_s += times * t;
            if (s->group_size > 1)
                *(inter ? &ph->inter_bytes : &ph->intra_bytes) += times * 4.0 * (double)s->count;
        } else {
            ph->compute_s += times * t;
            if (s->kind == TG_STEP_GEMM)
                ph->gemm_s += times * t;
        }
        int st = s->stream == TG_STREAM_COMM ? 1 : 0;
        double start = clock[st];
        if (s->wait >= 0 && end[s->wait] > start)
            start = end[s->wait];
        end[i] = start + t;
        clock[st] = end[i];
        if (s->layer != cur_layer) {
            layer_mark = start < layer_mark ? layer_mark : start;
            cur_layer = s->layer;
        }
        if (s->layer >= 0 && s->layer < L) { /* a layer's time: from where it starts to its last step's end */
            double *ls = &out->layer_s[(size_t)s->phase * (size_t)L + (size_t)s->layer];
            double span = (end[i] - layer_mark) * times;
            if (span > *ls)
                *ls = span;
        }
    }
    if (cur_phase >= 0) {
        double t0 = clock[0] > clock[1] ? clock[0] : clock[1];
        out->phase[cur_phase].streams_s = t0 - phase_start;
    }
    /* the phases so far are the last micro-batch's; the others run without the last_mb steps */
    double span[4] = {0, 0, 0, 0};
    span_not_last(cp, step_t, end, span);
    for (int ph = 0; ph < 4; ph++)
        out->phase[ph].mb_streams_s = span[ph];
    for (int ph = TG_PHASE_FWD; ph < TG_PHASE_OPT && pl->mb > 1; ph++)
        out->phase[ph].streams_s += (double)(pl->mb - 1) * span[ph];
    free(step_t);
    free(end);
    return true;
}

void tg_cost_free(tg_cost *c)
{
    free(c->layer_s);
    c->layer_s = NULL;
}

static const char *const phase_name[4] = {"forward", "backward", "optimizer", "decode"};

void tg_cost_text(const tg_plan *pl, const tg_cost *c, const tg_machine *mc, tg_sb *o)
{
    const tg_mesh *m = &pl->mesh;
    char mesh[64], place[96] = "";
    tg_mesh_text(m, mesh, sizeof mesh);
    if (m->scheme != TG_SCHEME_MEGATRON)
        snprintf(place, sizeof place, " placement \"%s\" (%s)", tg_placement_name(m->placement),
                 tg_mesh_rank_formula(m));
    tg_sb_printf(o, "%s, mesh %s%s = %d ranks on %d node%s of %s (%d ranks per node)\n", pl->spec.name, mesh, place,
                 m->p, c->nodes, c->nodes == 1 ? "" : "s", mc->name, mc->ranks_per_node);
    tg_sb_printf(o, "predicted for class (0,0) by the cost model (docs/COST.md); arena %.3f GiB\n\n",
                 (double)c->peak_bytes / (double)(1LL << 30));
    tg_sb_printf(o, "  %-10s %12s %12s %12s %12s %12s %14s %14s\n", "phase", "streams (s)", "serial (s)", "compute (s)",
                 "gemm (s)", "comm (s)", "comm in node B", "comm across B");
    for (int p = 0; p < 4; p++) {
        const tg_cost_phase *ph = &c->phase[p];
        if (!ph->nsteps)
            continue;
        tg_sb_printf(o, "  %-10s %12.4g %12.4g %12.4g %12.4g %12.4g %14.4g %14.4g\n", phase_name[p], ph->streams_s,
                     ph->serial_s, ph->compute_s, ph->gemm_s, ph->comm_s, ph->intra_bytes, ph->inter_bytes);
    }
    tg_sb_puts(o, "\n  busy time per step kind (s):\n");
    for (int p = 0; p < 4; p++) {
        const tg_cost_phase *ph = &c->phase[p];
        if (!ph->nsteps)
            continue;
        tg_sb_printf(o, "  %-10s", phase_name[p]);
        for (int k = 0; k < TG_COST_NKINDS; k++)
            if (ph->kind_s[k] > 0)
                tg_sb_printf(o, " %s %.4g", tg_step_kind_name((tg_step_kind)k), ph->kind_s[k]);
        tg_sb_puts(o, "\n");
    }
    /* per layer: consecutive layers within 1% of the first of their run share a line (the first and last
     * layers differ a little: no previous layer to overlap with, the output) */
    tg_sb_puts(o, "\n  per layer, streams (s):\n");
    for (int p = 0; p < 2; p++) {
        if (!c->phase[p].nsteps)
            continue;
        const double *ls = c->layer_s + (size_t)p * (size_t)c->layers;
        for (int a = 0; a < c->layers;) {
            int b = a;
            double hi = ls[a];
            while (b + 1 < c->layers && fabs(ls[b + 1] - ls[a]) <= 0.01 * ls[a]) {
                b++;
                hi = ls[b] > hi ? ls[b] : hi;
            }
            if (a == b)
                tg_sb_printf(o, "  %-10s layer %d: %.4g\n", phase_name[p], a, ls[a]);
            else
                tg_sb_printf(o, "  %-10s layers %d-%d: %.4g each (at most)\n", phase_name[p], a, b, hi);
            a = b + 1;
        }
    }
}

void tg_cost_json(const tg_plan *pl, const tg_cost *c, const tg_machine *mc, tg_sb *o)
{
    const tg_mesh *m = &pl->mesh;
    tg_sb_puts(o, "{\"spec\":");
    tg_sb_jstr(o, pl->spec.path);
    tg_sb_puts(o, ",\"machine\":");
    tg_sb_jstr(o, mc->path);
    if (m->scheme == TG_SCHEME_MEGATRON)
        tg_sb_printf(o, ",\"scheme\":\"megatron\",\"mesh\":[%d],\"placement\":null", m->p);
    else
        tg_sb_printf(o, ",\"scheme\":\"tesseract\",\"mesh\":[%d,%d,%d],\"placement\":\"%s\"", m->q, m->q, m->d,
                     tg_placement_name(m->placement));
    tg_sb_printf(o, ",\"nodes\":%d,\"peak_bytes\":%lld,\"phases\":{", c->nodes, c->peak_bytes);
    int first = 1;
    for (int p = 0; p < 4; p++) {
        const tg_cost_phase *ph = &c->phase[p];
        if (!ph->nsteps)
            continue;
        tg_sb_printf(o, "%s\n \"%s\":{", first ? "" : ",", phase_name[p]);
        static const char *const field[] = {"streams_s", "serial_s", "compute_s", "gemm_s", "comm_s", "comm_inter_s",
                                            "intra_bytes", "inter_bytes"};
        const double value[] = {ph->streams_s, ph->serial_s,     ph->compute_s,   ph->gemm_s,
                                ph->comm_s,    ph->comm_inter_s, ph->intra_bytes, ph->inter_bytes};
        for (int f = 0; f < 8; f++) {
            tg_sb_printf(o, "\"%s\":", field[f]);
            tg_sb_jnum(o, f < 6 ? "%.6g" : "%.0f", value[f]);
            tg_sb_puts(o, ",");
        }
        tg_sb_printf(o, "\"steps\":%d,\"kinds\":{", ph->nsteps);
        int kf = 1;
        for (int k = 0; k < TG_COST_NKINDS; k++)
            if (ph->kind_s[k] > 0) {
                tg_sb_printf(o, "%s\"%s\":", kf ? "" : ",", tg_step_kind_name((tg_step_kind)k));
                tg_sb_jnum(o, "%.6g", ph->kind_s[k]);
                kf = 0;
            }
        tg_sb_puts(o, "}}");
        first = 0;
    }
    tg_sb_puts(o, "\n}}\n");
}

double tg_cost_model_flops(const tg_spec *s, bool train)
{
    double T = (double)s->batch * s->seq, C = s->hidden, F = s->ffn;
    double layer = 2 * T * (4 * C * C + 2 * C * F) + 2.0 * s->batch * (double)s->seq * s->seq * C;
    double fwd = s->layers * layer + (s->vocab > 0 ? 2 * T * C * s->vocab : 0);
    return train ? 3 * fwd : fwd;
}

double tg_cost_peak_flops(const tg_spec *s, const tg_machine *mc)
{
    if (s->dtype == TG_BF16 && mc->gemm_tflops_bf16 > 0)
        return mc->gemm_tflops_bf16 * 1e12;
    return (mc->fp32_uses_tf32 && mc->gemm_tflops_tf32 > 0 ? mc->gemm_tflops_tf32 : mc->gemm_tflops_fp32) * 1e12;
}
