/*
 * summary.c - the figures of each class and the summary that prints them
 * (see summary.h).
 *
 * Every figure is a plan field or a sum of plan fields, counted by the one
 * rule of tg_step_traffic. Grouping only merges lines whose every printed
 * number is equal: a group of ranks is a set of classes whose figures compare
 * equal, and a layer range is a run of layers whose figures compare equal in
 * every column, so the grouped summary says exactly what the full one says.
 */
#include "summary.h"
#include "bounds.h"
#include "pipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "version.h"

/* ---- figures -------------------------------------------------------------------------- */

/* a step's traffic and flops per training step: `times` runs (tg_step_times: micro-batches) */
static void add_step_traffic(tg_traffic *t, const tg_step *s, long long times)
{
    long long r, se, re;
    tg_step_traffic(s, &r, &se, &re);
    if (tg_step_is_comm(s) && s->group >= 0 && s->group < TG_NGROUPS) {
        t->recv[s->group] += times * r;
        t->sent[s->group] += times * se;
        t->red[s->group] += times * re;
    }
    t->flops += times * s->flops;
    t->used = 1;
}

static void add_traffic(tg_traffic *a, const tg_traffic *b, long long times)
{
    for (int g = 0; g < TG_NGROUPS; g++) {
        a->recv[g] += times * b->recv[g];
        a->sent[g] += times * b->sent[g];
        a->red[g] += times * b->red[g];
    }
    a->flops += times * b->flops;
    a->used |= b->used;
}

static bool same_traffic(const tg_traffic *a, const tg_traffic *b)
{
    return !memcmp(a->recv, b->recv, sizeof a->recv) && !memcmp(a->sent, b->sent, sizeof a->sent) &&
           !memcmp(a->red, b->red, sizeof a->red) && a->flops == b->flops && a->used == b->used;
}

bool tg_class_figures(const tg_plan *pl, const tg_class_plan *cp, tg_class_fig *fg, tg_err *err)
{
    memset(fg, 0, sizeof *fg);
    int L = pl->spec.layers + 1;
    fg->i = cp->i;
    fg->j = cp->j;
    fg->nbuckets = TG_NPHASE * L;
    fg->bucket = calloc((size_t)fg->nbuckets, sizeof *fg->bucket);
    long long *delta = calloc((size_t)cp->nsteps + 1, sizeof *delta);
    if (!fg->bucket || !delta) {
        free(delta);
        tg_class_fig_free(fg);
        return tg_fail(err, "out of memory");
    }
    fg->arena = cp->arena_elems;
    fg->weights = cp->weight_elems;
    fg->nsteps = cp->nsteps;
    fg->flops = cp->flops;
    fg->kv = pl->spec.mode == TG_GENERATE ? cp->kv_elems : 0;
    for (int i = 0; i < cp->nsteps; i++) {
        const tg_step *s = &cp->steps[i];
        int l = (s->layer >= 0 && s->layer < pl->spec.layers) ? s->layer + 1 : 0;
        long long times = tg_step_times(pl, s);
        add_step_traffic(&fg->bucket[tg_phase_of(s) * L + l], s, times);
        long long rc, se, re;
        tg_step_traffic(s, &rc, &se, &re);
        fg->recv += times * rc;
        fg->sent += times * se;
        fg->red += times * re;
        if (tg_step_is_comm(s) && s->group >= 0 && s->group < TG_NGROUPS)
            fg->cols |= (rc ? 1u : 0u) << (3 * s->group) | (se ? 1u : 0u) << (3 * s->group + 1) |
                        (re ? 1u : 0u) << (3 * s->group + 2);
    }
    /* the busiest step: most elements in live buffers; the three largest temporaries then */
    for (int i = 0; i < cp->nbufs; i++) {
        const tg_buf *b = &cp->bufs[i];
        if (b->persistent)
            fg->persistent += tg_buf_slots(b);
        if (b->first < 0 || b->last < b->first || b->last >= cp->nsteps)
            continue;
        delta[b->first] += tg_buf_slots(b);
        delta[b->last + 1] -= tg_buf_slots(b);
    }
    long long cur = 0;
    int step = -1;
    for (int s = 0; s < cp->nsteps; s++) {
        cur += delta[s];
        if (cur > fg->live) {
            fg->live = cur;
            step = s;
        }
    }
    free(delta);
    if (step >= 0) {
        tg_sb lab;
        tg_sb_init(&lab);
        tg_sb_printf(&lab, "%d ", step);
        tg_step_label(&lab, &cp->steps[step]);
        snprintf(fg->peak, sizeof fg->peak, "%s", lab.s);
        tg_sb_free(&lab);
        int top[3];
        for (int i = 0; i < cp->nbufs; i++) {
            const tg_buf *b = &cp->bufs[i];
            if (b->persistent || b->first > step || b->last < step)
                continue;
            int at = fg->ntop;
            while (at > 0 && tg_buf_slots(&cp->bufs[top[at - 1]]) < tg_buf_slots(b))
                at--;
            if (at >= 3)
                continue;
            for (int k = (fg->ntop < 3 ? fg->ntop : 2); k > at; k--)
                top[k] = top[k - 1];
            top[at] = i;
            if (fg->ntop < 3)
                fg->ntop++;
        }
        for (int k = 0; k < fg->ntop; k++) {
            snprintf(fg->top[k], sizeof fg->top[k], "%s", cp->bufs[top[k]].name);
            fg->top_elems[k] = tg_buf_slots(&cp->bufs[top[k]]);
        }
    }
    return true;
}

void tg_class_fig_free(tg_class_fig *fig)
{
    free(fig->bucket);
    fig->bucket = NULL;
}

bool tg_plan_figures(const tg_plan *pl, tg_class_fig **out, tg_err *err)
{
    int nc = tg_plan_nclasses(pl);
    tg_class_fig *figs = calloc((size_t)nc, sizeof *figs);
    if (!figs)
        return tg_fail(err, "out of memory");
    for (int c = 0; c < nc; c++) {
        tg_class_plan cp;
        bool ok = tg_plan_class_n(pl, c, &cp, err) && tg_class_figures(pl, &cp, &figs[c], err);
        tg_class_free(&cp);
        if (!ok) {
            tg_figures_free(pl, figs);
            return false;
        }
    }
    *out = figs;
    return true;
}

void tg_figures_free(const tg_plan *pl, tg_class_fig *figs)
{
    if (!figs)
        return;
    for (int c = 0; c < tg_plan_nclasses(pl); c++)
        tg_class_fig_free(&figs[c]);
    free(figs);
}

/* ---- printing ------------------------------------------------------------------------- */

static const char *const dir_name[3] = {"recv", "sent", "reduced"};

static void traffic_header(tg_sb *o, unsigned cols, const char *lead)
{
    tg_sb_puts(o, lead);
    for (int c = 0; c < 3 * TG_NGROUPS; c++)
        if (cols >> c & 1) {
            char h[32];
            snprintf(h, sizeof h, "%s %s", tg_group_name((tg_group)(c / 3)), dir_name[c % 3]);
            tg_sb_printf(o, " %14s", h);
        }
    tg_sb_printf(o, " %16s\n", "flops");
}

static void traffic_row(tg_sb *o, unsigned cols, const tg_traffic *t)
{
    for (int c = 0; c < 3 * TG_NGROUPS; c++)
        if (cols >> c & 1) {
            const long long *v = c % 3 == 0 ? t->recv : c % 3 == 1 ? t->sent : t->red;
            tg_sb_printf(o, " %14lld", v[c / 3]);
        }
    tg_sb_printf(o, " %16lld\n", t->flops);
}

/* The selected ranks of the classes marked in cls, as "all 512", "0-3,8", or its first part and a count. */
static void rank_set(tg_sb *o, const tg_plan *pl, const tg_filter *f, const unsigned char *cls, int width)
{
    int *r = malloc((size_t)pl->mesh.p * sizeof *r), n = 0;
    if (!r) {
        tg_sb_puts(o, "?");
        return;
    }
    for (int k = 0; k < pl->mesh.p; k++)
        if (f->rank[k] && cls[tg_class_of(pl, k)])
            r[n++] = k;
    tg_sb t;
    tg_sb_init(&t);
    if (n == pl->mesh.p && n > 1)
        tg_sb_printf(&t, "all %d", n);
    else
        tg_print_ranks(&t, r, n);
    if ((int)t.len > width) {
        char cnt[32];
        int cl = snprintf(cnt, sizeof cnt, "..(%d)", n);
        int keep = width - cl;
        while (keep > 0 && t.s[keep - 1] != ',')
            keep--;
        tg_sb_printf(o, "%.*s%s", keep > 0 ? keep - 1 : 0, t.s, cnt);
    } else {
        tg_sb_puts(o, t.s);
    }
    tg_sb_free(&t);
    free(r);
}

static bool same_memory(const tg_class_fig *a, const tg_class_fig *b)
{
    if (a->arena != b->arena || a->weights != b->weights || a->persistent != b->persistent || a->live != b->live ||
        strcmp(a->peak, b->peak) || a->ntop != b->ntop)
        return false;
    for (int k = 0; k < a->ntop; k++)
        if (strcmp(a->top[k], b->top[k]) || a->top_elems[k] != b->top_elems[k])
            return false;
    return true;
}

static bool bucket_shown(const tg_filter *f, int L, int b)
{
    int l = b % L - 1;
    return (l >= 0 && f->layer[l]) || (l < 0 && f->other_layers);
}

static bool same_buckets(const tg_class_fig *a, const tg_class_fig *b, const tg_filter *f, int L)
{
    for (int k = 0; k < a->nbuckets; k++)
        if (bucket_shown(f, L, k) && !same_traffic(&a->bucket[k], &b->bucket[k]))
            return false;
    return true;
}

/* Classes with a selected rank. */
static unsigned char *selected_classes(const tg_plan *pl, const tg_filter *f)
{
    unsigned char *sel = calloc((size_t)tg_plan_nclasses(pl), 1);
    for (int r = 0; sel && r < pl->mesh.p; r++)
        if (f->rank[r])
            sel[tg_class_of(pl, r)] = 1;
    return sel;
}

#define MAX_GROUP_LINES 8 /* the grouped summary prints at most this many groups per table */

static void memory_table(tg_sb *o, const tg_plan *pl, const tg_class_fig *figs, const tg_filter *f, int full,
                         const unsigned char *sel)
{
    int nc = tg_plan_nclasses(pl), q = pl->mesh.q, lines = 0, more = 0;
    unsigned char *done = calloc((size_t)nc, 1), *grp = calloc((size_t)nc, 1);
    if (!done || !grp) {
        free(done);
        free(grp);
        return;
    }
    tg_sb_puts(o, "\nmemory per rank (bytes): arena = the planned arena; live peak = bytes in buffers live at the "
                  "busiest step, and its largest temporaries\n");
    tg_sb_printf(o, "  %-24s %12s %12s %12s %12s  %s\n", full ? "class (i,j): ranks" : "ranks", "arena", "weights",
                 "persistent", "live peak", "at step: largest temporaries");
    for (int c = 0; c < nc; c++) {
        if (done[c] || !sel[c])
            continue;
        memset(grp, 0, (size_t)nc);
        for (int o2 = c; o2 < nc; o2++)
            if (!done[o2] && sel[o2] && (o2 == c || (!full && same_memory(&figs[o2], &figs[c])))) {
                grp[o2] = 1;
                done[o2] = 1;
            }
        if (!full && lines == MAX_GROUP_LINES) {
            more++;
            continue;
        }
        const tg_class_fig *g = &figs[c];
        tg_sb who;
        tg_sb_init(&who);
        if (full)
            tg_sb_printf(&who, "(%d,%d): ", c / q, c % q);
        rank_set(&who, pl, f, grp, 24 - (int)who.len);
        tg_sb_printf(o, "  %-24s %12lld %12lld %12lld %12lld  %s:", who.s, 4 * g->arena, 4 * g->weights,
                     4 * g->persistent, 4 * g->live, g->peak);
        for (int k = 0; k < g->ntop; k++)
            tg_sb_printf(o, "%s %s %lld", k ? "," : "", g->top[k], 4 * g->top_elems[k]);
        tg_sb_puts(o, "\n");
        tg_sb_free(&who);
        lines++;
    }
    if (more)
        tg_sb_printf(o, "  ... and %d more group%s of ranks with other figures (--summary --full lists every class)\n",
                     more, more == 1 ? "" : "s");
    free(done);
    free(grp);
}

/* One phase of one class figure (or a total), layer by layer, runs of equal layers merged unless full. */
/* mode = "generate" (docs/GENERATE.md): the KV cache per rank with its formula, and per class the bytes of one decode
 * step (the phase dec of the table below, all layers), which a run repeats once per new token after the first. */
static void generation_lines(tg_sb *o, const tg_plan *pl, const tg_class_fig *figs, const unsigned char *sel)
{
    if (pl->spec.mode != TG_GENERATE)
        return;
    int e = pl->spec.dtype == TG_BF16 ? 2 : 4; /* a bf16 plan caches r(K) | r(V) */
    long long kv = (long long)e * pl->spec.layers * pl->nseq * pl->spec.context * 2 * pl->Cq;
    tg_sb_printf(o, "\ngeneration (docs/GENERATE.md): context %d tokens a sequence, %d sequences per rank\n",
                 pl->spec.context, pl->nseq);
    tg_sb_printf(o, "  KV cache per rank: layers * (batch/(q*d)) * context * 2 * (hidden/q) * %d = %d * %d * %d * 2 * %d * %d "
                    "= %lld bytes (%s, persistent, in the arena)%s\n",
                 e, pl->spec.layers, pl->nseq, pl->spec.context, pl->Cq, e, kv, e == 2 ? "bf16" : "fp32",
                 figs[0].kv * e == kv ? "" : " [the plan's caches differ: internal error]");
    /* the layout of each phase's linears and the bytes of both (docs/GENERATE.md "Choosing the layout") */
    static const char *const key[] = {"auto", "summa", "stationary"};
    if (e == 2)
        tg_sb_puts(o, "  linears' bytes received by the busiest rank, one call (bf16 operands, fp32 partial sums): summa "
                      "2*layers*(q-1)*(R*(3C+F)/q + (4C^2+2CF)/q^2), stationary layers*R*(2*(2q-1)*(3C+F)/q + "
                      "4*(q-1)*(5C+F)/q)\n");
    else
        tg_sb_puts(o, "  linears' bytes received by the busiest rank, one call: summa 4*layers*(q-1)*(R*(3C+F)/q + "
                      "(4C^2+2CF)/q^2), stationary 4*layers*R*((2q-1)*(3C+F)/q + (q-1)*(5C+F)/q)\n");
    tg_sb_printf(o, "  and the decode step's head (Vq = %d): summa %d*(q-1)*Vq*C/q + 4*(q-1)*R*Vq, stationary "
                    "%d*(q-1)*R*C/q + 4*(q-1)*R*Vq\n", pl->Vq, e, e);
    for (int ph = 0; ph < 2; ph++) {
        long long R = ph ? pl->nseq : (long long)pl->nseq * pl->spec.seq;
        long long bs = tg_layout_recv_bytes(pl, TG_LAYOUT_SUMMA, R, ph),
                  bw = tg_layout_recv_bytes(pl, TG_LAYOUT_STATIONARY, R, ph);
        tg_layout lay = ph ? pl->layout_dec : pl->layout_fwd;
        char why[80];
        if (ph && pl->spec.decode_layout != TG_DECODE_AUTO)
            snprintf(why, sizeof why, "decode_layout = \"%s\"", key[pl->spec.decode_layout]);
        else
            snprintf(why, sizeof why, "%s", bw == bs ? "as many bytes either way" : "fewer bytes");
        tg_sb_printf(o, "  %s (R = %lld row%s a rank): layout %s (%s); summa %lld, stationary %lld bytes\n",
                     ph ? "decode step" : "prefill", R, R == 1 ? "" : "s", tg_layout_name(lay), why, bs, bw);
    }
    int L = pl->spec.layers + 1, n = tg_plan_nclasses(pl);
    tg_traffic *dec = calloc((size_t)n, sizeof *dec);
    for (int c = 0; dec && c < n; c++)
        for (int l = 0; l < L; l++)
            add_traffic(&dec[c], &figs[c].bucket[TG_PHASE_DEC * L + l], 1);
    for (int c = 0; dec && c < n; c++) {
        if (sel && !sel[c])
            continue;
        int first = 1;
        for (int e = 0; e < c && first; e++)
            first = (sel && !sel[e]) || !same_traffic(&dec[e], &dec[c]);
        if (!first)
            continue;
        long long rv = 0, se = 0, re = 0;
        for (int g = 0; g < TG_NGROUPS; g++) {
            rv += dec[c].recv[g];
            se += dec[c].sent[g];
            re += dec[c].red[g];
        }
        tg_sb_printf(o, "  decode step, class%s", "");
        int shown = 0;
        for (int e = c; e < n; e++)
            if ((!sel || sel[e]) && same_traffic(&dec[e], &dec[c]) && shown++ < 8)
                tg_sb_printf(o, " (%d,%d)", figs[e].i, figs[e].j);
        if (shown > 8)
            tg_sb_printf(o, " and %d more", shown - 8);
        tg_sb_printf(o, ": received %lld, sent %lld, reduced %lld bytes per rank and new token after the first\n", rv, se,
                     re);
    }
    free(dec);
}

static void phase_rows(tg_sb *o, const tg_traffic *bk, int L, int ph, const tg_filter *f, int full, unsigned cols,
                       const char *who, tg_traffic *sum)
{
    for (int l = -1; l < L - 1; l++) {
        int b = ph * L + l + 1;
        if (!bk[b].used || !bucket_shown(f, L, b))
            continue;
        int e = l;
        while (!full && l >= 0 && e + 1 < L - 1 && bk[b + (e - l) + 1].used && bucket_shown(f, L, b + (e - l) + 1) &&
               same_traffic(&bk[b], &bk[b + (e - l) + 1]))
            e++;
        char lay[32] = "-";
        if (l >= 0 && e > l)
            snprintf(lay, sizeof lay, "%d-%d", l, e);
        else if (l >= 0)
            snprintf(lay, sizeof lay, "%d", l);
        tg_sb_printf(o, "  %-24s %-5s %7s", who, tg_phase_label(ph), lay);
        traffic_row(o, cols, &bk[b]);
        add_traffic(sum, &bk[b], e - l + 1); /* the row's figures are one layer's; the range has e - l + 1 */
        l = e;
    }
}

static void traffic_table(tg_sb *o, const tg_plan *pl, const tg_class_fig *figs, const tg_filter *f, int full,
                          const unsigned char *sel, unsigned cols)
{
    int nc = tg_plan_nclasses(pl), q = pl->mesh.q, L = pl->spec.layers + 1, groups = 0, more = 0;
    unsigned char *done = calloc((size_t)nc, 1), *grp = calloc((size_t)nc, 1);
    if (!done || !grp) {
        free(done);
        free(grp);
        return;
    }
    tg_sb_printf(o, "\ncommunication (bytes) and flops per rank, phase and layer%s:\n",
                 full ? "" : " (ranks, and runs of layers, with the same figures share a line)");
    traffic_header(o, cols, full ? "  class (i,j): ranks        phase  layer" : "  ranks                    phase  layer");
    for (int c = 0; c < nc; c++) {
        if (done[c] || !sel[c])
            continue;
        memset(grp, 0, (size_t)nc);
        for (int o2 = c; o2 < nc; o2++)
            if (!done[o2] && sel[o2] && (o2 == c || (!full && same_buckets(&figs[o2], &figs[c], f, L)))) {
                grp[o2] = 1;
                done[o2] = 1;
            }
        if (!full && groups == MAX_GROUP_LINES / 2) {
            more++;
            continue;
        }
        groups++;
        tg_sb who;
        tg_sb_init(&who);
        if (full)
            tg_sb_printf(&who, "(%d,%d): ", c / q, c % q);
        rank_set(&who, pl, f, grp, 24 - (int)who.len);
        tg_traffic sum;
        memset(&sum, 0, sizeof sum);
        for (int ph = 0; ph < TG_NPHASE; ph++)
            phase_rows(o, figs[c].bucket, L, ph, f, full, cols, who.s, &sum);
        tg_sb_printf(o, "  %-24s %-5s %7s", who.s, "all", f->all_layers ? "all" : "shown");
        traffic_row(o, cols, &sum);
        tg_sb_free(&who);
    }
    if (more)
        tg_sb_printf(o, "  ... and %d more group%s of ranks with other figures (--summary --full lists every class)\n",
                     more, more == 1 ? "" : "s");
    /* mesh totals: each class's buckets times its d ranks */
    tg_traffic *tot = calloc((size_t)figs[0].nbuckets, sizeof *tot);
    if (tot) {
        for (int c = 0; c < nc; c++)
            for (int b = 0; b < figs[c].nbuckets; b++)
                add_traffic(&tot[b], &figs[c].bucket[b], pl->mesh.d);
        tg_sb_printf(o, "\nmesh totals (all %d ranks) per phase and layer:\n", pl->mesh.p);
        traffic_header(o, cols, "  mesh                     phase  layer");
        tg_traffic grand;
        memset(&grand, 0, sizeof grand);
        for (int ph = 0; ph < TG_NPHASE; ph++)
            phase_rows(o, tot, L, ph, f, full, cols, "", &grand);
        tg_sb_printf(o, "  %-24s %-5s %7s", "", "all", f->all_layers ? "all" : "shown");
        traffic_row(o, cols, &grand);
        free(tot);
    }
    free(done);
    free(grp);
}

/* Whole-plan figures for comparing meshes. */
typedef struct mesh_fig {
    long long arena_max, weights_max, recv_max, sent_max, red_max, recv_total, flops_max;
    int steps_max;
} mesh_fig;

static void fold(mesh_fig *mf, const tg_class_fig *g, int d)
{
#define MAX(fld, v)                                                                                                    \
    if ((v) > mf->fld)                                                                                                 \
    mf->fld = (v)
    MAX(arena_max, g->arena);
    MAX(weights_max, g->weights);
    MAX(recv_max, g->recv);
    MAX(sent_max, g->sent);
    MAX(red_max, g->red);
    MAX(flops_max, g->flops);
    MAX(steps_max, g->nsteps);
#undef MAX
    mf->recv_total += (long long)d * g->recv;
}

static void fig_row(tg_sb *o, const char *mesh, const char *status, const mesh_fig *mf, int full)
{
    if (full)
        tg_sb_printf(o, "  %-12s %-9s %13lld %13lld %13lld %13lld %13lld %15lld %16lld %9d\n", mesh, status,
                     4 * mf->arena_max, 4 * mf->weights_max, mf->recv_max, mf->sent_max, mf->red_max,
                     mf->recv_total, mf->flops_max, mf->steps_max);
    else
        tg_sb_printf(o, "  %-12s %-9s %13lld %13lld %13lld %13lld %13lld %16lld %9d\n", mesh, status,
                     4 * mf->arena_max, 4 * mf->weights_max, mf->recv_max, mf->sent_max, mf->red_max,
                     mf->flops_max, mf->steps_max);
}

static bool alternatives(const tg_plan *pl, const tg_class_fig *figs, int full, tg_sb *o, tg_err *err)
{
    const tg_spec *s = &pl->spec;
    int p = pl->mesh.p;
    if (full) {
        tg_sb_printf(o, "\nmeshes with %d ranks for the same model (bytes and flops per %s; max over ranks, total over "
                        "the mesh):\n",
                     p, s->mode == TG_TRAIN ? "training step" : "forward");
        tg_sb_printf(o, "  %-12s %-9s %13s %13s %13s %13s %13s %15s %16s %9s\n", "mesh", "status", "arena max",
                     "weights max", "recv max", "sent max", "reduced max", "recv total", "flops max", "steps max");
    } else {
        /* one class per mesh keeps this bounded: every class of a mesh runs the same collectives and GEMMs (each
         * is the root once per SUMMA), only its arena can differ a little; --full plans every class */
        tg_sb_printf(o, "\nmeshes with %d ranks for the same model (bytes and flops per %s of a rank of class (0,0); "
                        "--summary --full: max and total over every rank):\n",
                     p, s->mode == TG_TRAIN ? "training step" : "forward");
        tg_sb_printf(o, "  %-12s %-9s %13s %13s %13s %13s %13s %16s %9s\n", "mesh", "status", "arena", "weights",
                     "recv", "sent", "reduced", "flops", "steps");
    }
    /* q*q in long long from the largest q with q*q <= p: q = p squared overflowed an int from 46,341 ranks on */
    int qmax = 1;
    while ((long long)(qmax + 1) * (qmax + 1) <= p)
        qmax++;
    for (int q = qmax; q >= 1; q--) {
        long long qq = (long long)q * q;
        if (p % qq)
            continue;
        int d = (int)(p / qq);
        char mesh[48];
        snprintf(mesh, sizeof mesh, "[%d,%d,%d]", q, q, d);
        mesh_fig mf;
        memset(&mf, 0, sizeof mf);
        if (q == pl->mesh.q && d == pl->mesh.d) {
            for (int c = 0; c < (full ? tg_plan_nclasses(pl) : 1); c++)
                fold(&mf, &figs[c], d);
            fig_row(o, mesh, "this spec", &mf, full);
            continue;
        }
        tg_spec copy;
        tg_err e = {{0}, 0};
        if (!tg_spec_on_mesh(s, q, d, &copy, &e)) {
            tg_sb_printf(o, "  %-12s not possible:%s", mesh, full ? "\n" : "");
            for (const char *line = e.msg; *line;) {
                size_t len = strcspn(line, "\n");
                if (full)
                    tg_sb_printf(o, "      %.*s\n", (int)len, line);
                else { /* the first rule, without the "FILE as [q,q,d]: " it starts with */
                    const char *rest = strstr(line, ": ");
                    rest = rest && (size_t)(rest - line) < len ? rest + 2 : line;
                    size_t rl = len - (size_t)(rest - line);
                    tg_sb_printf(o, " %.*s%s\n", (int)(rl > 150 ? 150 : rl), rest, rl > 150 ? " [...]" : "");
                }
                if (!full)
                    break;
                line += len;
                if (*line)
                    line++;
            }
            continue;
        }
        /* the user's spec, every field kept, on the other mesh, class by class */
        tg_plan ap;
        tg_plan_init(&copy, &ap);
        bool ok = true;
        for (int c = 0; c < (full ? tg_plan_nclasses(&ap) : 1) && ok; c++) {
            tg_class_plan cp;
            tg_class_fig g;
            tg_err pe = {{0}, 0};
            ok = tg_plan_class_n(&ap, c, &cp, &pe) && tg_class_figures(&ap, &cp, &g, &pe);
            tg_class_free(&cp);
            if (ok) {
                fold(&mf, &g, d);
                tg_class_fig_free(&g);
            } else if (strstr(pe.msg, "out of memory")) {
                return tg_fail(err, "%s", pe.msg);
            } else {
                tg_sb_printf(o, "  %-12s not possible: %s\n", mesh, pe.msg);
            }
        }
        if (ok)
            fig_row(o, mesh, "possible", &mf, full);
    }
    if (pl->mesh.scheme == TG_SCHEME_MEGATRON) { /* this spec is none of the [q,q,d] above */
        char mesh[48];
        mesh_fig mf;
        memset(&mf, 0, sizeof mf);
        tg_mesh_text(&pl->mesh, mesh, sizeof mesh);
        for (int c = 0; c < (full ? tg_plan_nclasses(pl) : 1); c++)
            fold(&mf, &figs[c], 1);
        fig_row(o, mesh, "this spec", &mf, full);
    }
    return true;
}

bool tg_inspect_summary(const tg_plan *pl, const tg_class_fig *figs, const tg_filter *f, int full, tg_sb *o,
                        tg_err *err)
{
    tg_inspect_header(o, pl, "summary");
    if (!f->all_ranks || !f->all_layers)
        tg_sb_printf(o, "# showing %s\n", f->desc);
    tg_sb_puts(o, "# bytes are payload (2 per element of a bf16 broadcast, else 4: docs/BF16.md), counted logically: a broadcast is received by every member but the "
                  "root and sent once by the root;\n# a reduce is sent by every member but the root and received "
                  "from each of them by the root; an all-reduce is 'reduced' on every member\n");
    char budget[256];
    tg_bounds_line(budget, sizeof budget, pl, figs);
    tg_sb_printf(o, "# %s\n", budget);
    unsigned char *sel = selected_classes(pl, f);
    if (!sel)
        return tg_fail(err, "out of memory");
    unsigned cols = 0;
    for (int c = 0; c < tg_plan_nclasses(pl); c++)
        cols |= figs[c].cols;
    memory_table(o, pl, figs, f, full, sel);
    generation_lines(o, pl, figs, sel);
    traffic_table(o, pl, figs, f, full, sel, cols);
    free(sel);
    return alternatives(pl, figs, full, o, err);
}

/* Pipeline stages (mesh.pp > 1): the stages' summary (the proved schedule, each stage's memory: as --summary), then
 * every class of every stage with its world ranks, arena and weights, and the whole program's flops and bytes per
 * rank (one micro-batch's forward and backward and the optimizer, as the class program runs them), then each
 * stage's totals over its ranks and the mesh's over every stage. The grouped per-layer tables and the other meshes
 * of the pp = 1 summary are left out: a stage holds some of the layers, and the meshes it would compare hold all. */
static bool stages_summary(const tg_plan *pl, const tg_class_fig *figs, tg_sb *o, tg_err *err)
{
    const tg_mesh *m = &pl->mesh;
    int S = tg_plan_stages(pl), q = m->q, d = m->d, p = m->p;
    tg_inspect_header(o, pl, "summary");
    tg_sb_puts(o, "# pipeline stages: the schedule and each stage's memory, then every class of every stage (bytes are payload, "
                  "counted logically as in the pp = 1 summary;\n# per rank: one micro-batch's forward and backward and "
                  "the optimizer, as its class program runs them)\n");
    if (!tg_pipe_summary(&pl->spec, o, err) || !tg_stage_memory(&pl->spec, o, err))
        return false;
    tg_sb_printf(o, "\nevery class (stage s, i, j), per rank of it:\n  %-16s %-24s %14s %14s %16s %14s %14s %14s\n",
                 "class (s,i,j)", "world ranks", "arena", "weights", "flops", "bytes recv", "bytes sent", "reduced");
    long long st_fl = 0, st_rv = 0, mesh_fl = 0, mesh_rv = 0;
    for (int c = 0; c < S * q * q; c++) {
        const tg_class_fig *g = &figs[c];
        int s = c / (q * q), i = (c / q) % q, j = c % q;
        char who[48], ranks[160];
        snprintf(who, sizeof who, "(%d,%d,%d)", s, i, j);
        int n = 0;
        for (int k = 0; k < d && n < (int)sizeof ranks - 16; k++) {
            tg_coord co = {i, j, k};
            n += snprintf(ranks + n, sizeof ranks - (size_t)n, "%s%d", k ? "," : "", s * p + tg_mesh_rank(m, co));
        }
        tg_sb_printf(o, "  %-16s %-24s %14lld %14lld %16lld %14lld %14lld %14lld\n", who, ranks, 4 * g->arena,
                     4 * g->weights, g->flops, 4 * g->recv, 4 * g->sent, 4 * g->red);
        st_fl += (long long)d * g->flops;
        st_rv += (long long)d * 4 * g->recv;
        if ((c + 1) % (q * q) == 0) {
            tg_sb_printf(o, "  stage %d totals (its %d ranks): flops %lld, bytes received %lld\n", s, p, st_fl, st_rv);
            mesh_fl += st_fl;
            mesh_rv += st_rv;
            st_fl = st_rv = 0;
        }
    }
    tg_sb_printf(o, "mesh totals (all %d ranks of the %d stages): flops %lld, bytes received %lld\n", S * p, S, mesh_fl,
                 mesh_rv);
    return true;
}

bool tg_emit_summary_txt(const tg_plan *pl, const tg_class_fig *figs, tg_sb *out, tg_err *err)
{
    if (tg_plan_stages(pl) > 1)
        return stages_summary(pl, figs, out, err);
    tg_filter f;
    if (!tg_filter_init(&f, pl, NULL, NULL, NULL, err))
        return false;
    bool ok = tg_inspect_summary(pl, figs, &f, 1, out, err);
    tg_filter_free(&f);
    return ok;
}

/* ---- pipeline stages -------------------------------------------------------------------- */

bool tg_stage_memory(const tg_spec *s, tg_sb *out, tg_err *err)
{
    tg_plan pl;
    tg_plan_init(s, &pl);
    if (!tg_bounds_work(&pl, err))
        return false;
    tg_sb_puts(out, "  memory per rank (class (0,0), bytes; arena: weights, gradients, moments, one micro-batch's "
                    "activations and temporaries; stash: what a micro-batch's forward keeps for its backward, once "
                    "per micro-batch in flight):\n");
    for (int st = 0; st < s->pp; st++) {
        tg_class_plan cp;
        if (!tg_plan_stage(&pl, st, err) || !tg_plan_class(&pl, 0, 0, &cp, err))
            return false;
        tg_sb_printf(out, "  stage %d memory: arena %lld (weights %lld) + stash %d x %lld = %lld\n", st, 4 * cp.arena_elems,
                     4 * cp.weight_elems, pl.stash, 4 * cp.stash_elems, 4 * (cp.arena_elems + cp.stash_total));
        tg_class_free(&cp);
    }
    return true;
}
