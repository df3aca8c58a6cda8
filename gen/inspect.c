/*
 * inspect.c - the show, blocks and summary views of a plan (see inspect.h).
 *
 * Design: every figure printed here is a plan field or a sum of plan fields;
 * nothing is re-derived from the spec. Steps are treated generically (kind
 * names from tg_step_kind_name, collectives recognised by their group size)
 * so new step kinds and phases print without changes here. The one rule of
 * logical byte counting lives in tg_step_traffic. Alternative meshes are
 * judged by the real spec loader (tg_spec_load_string on the same model with
 * another mesh), so "not possible" carries exactly the message a user would
 * get from tessgen, and are planned by tg_plan_all on a copy of the spec.
 * Output is deterministic: ranks, layers, buffers and tensors in plan order.
 */
#include "inspect.h"
#include "describe.h"
#include "emit.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "version.h"

#define NKIND_MAX 64 /* kinds are enumerated until tg_step_kind_name says "?" */
#define NPHASE 8

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
    if (s->kind == TG_STEP_BCAST)
        *(s->is_root ? sent : recv) = s->count;
    else if (s->kind == TG_STEP_REDUCE) {
        if (s->is_root)
            *recv = s->count * (s->group_size - 1);
        else
            *sent = s->count;
    } else
        *reduced = s->count;
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
    return "reduce";
}

const char *tg_phase_label(int phase)
{
    static const char *n[] = {"fwd", "bwd", "opt"};
    return (phase >= 0 && phase < 3) ? n[phase] : "phase?";
}

static int nkinds(void)
{
    int n = 0;
    while (n < NKIND_MAX && strcmp(tg_step_kind_name((tg_step_kind)n), "?") != 0)
        n++;
    return n;
}

static int phase_of(const tg_step *s)
{
    int ph = (int)s->phase;
    return ph < 0 ? 0 : ph >= NPHASE ? NPHASE - 1 : ph;
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
    f->p = pl->mesh.p;
    f->layers = pl->spec.layers;
    f->rank = malloc((size_t)f->p);
    f->layer = malloc((size_t)f->layers);
    if (!f->rank || !f->layer) {
        tg_filter_free(f);
        return tg_fail(err, "out of memory");
    }
    char ctx[96];
    snprintf(ctx, sizeof ctx, "mesh [%d,%d,%d] has %d ranks", pl->mesh.q, pl->mesh.q, pl->mesh.d, pl->mesh.p);
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

/* "0-3,8,10-11" */
static void print_ranks(tg_sb *o, const int *r, int n)
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

static void header(tg_sb *o, const tg_plan *pl, const char *what)
{
    const tg_spec *s = &pl->spec;
    tg_sb_printf(o, "# tessgen %s %s of %s (%s): mesh [%d,%d,%d] = %d ranks, %d layer%s (C=%d, heads=%d, F=%d, "
                    "S=%d, B=%d)%s\n",
                 TG_VERSION, what, s->name, s->path, pl->mesh.q, pl->mesh.q, pl->mesh.d, pl->mesh.p, s->layers,
                 s->layers == 1 ? "" : "s", s->hidden, s->heads, s->ffn, s->seq, s->batch,
                 s->mode == TG_TRAIN ? ", training" : "");
}

static void step_label(tg_sb *o, const tg_step *s)
{
    if (s->layer >= 0)
        tg_sb_printf(o, "%s L%d %s", tg_phase_label(s->phase), s->layer, s->op);
    else
        tg_sb_printf(o, "%s %s", tg_phase_label(s->phase), s->op);
    if (s->t >= 0)
        tg_sb_printf(o, " t=%d", s->t);
    tg_sb_printf(o, " %s", tg_step_kind_name(s->kind));
}

/* ---- show ------------------------------------------------------------------------------ */

void tg_inspect_show(const tg_plan *pl, const tg_class_plan *all, const tg_filter *f, tg_sb *o)
{
    const tg_mesh *m = &pl->mesh;
    header(o, pl, "schedule");
    tg_sb_printf(o, "# showing %s\n", f->desc);
    tg_sb_puts(o, "# per step: index, phase, layer, op, SUMMA step, kind; collectives: group={member ranks}, root "
                  "(global rank), what this rank does, elements, bytes;\n# others: flops and what is computed. "
                  "Buffers: name:access@offset+bytes (offsets and sizes in bytes of the rank's arena)\n");
    for (int r = 0; r < m->p; r++) {
        if (!f->rank[r])
            continue;
        const tg_class_plan *rp = &all[tg_class_of(pl, r)];
        tg_coord co = tg_mesh_coord(m, r);
        int shown = 0;
        for (int i = 0; i < rp->nsteps; i++)
            shown += tg_filter_step(f, &rp->steps[i]);
        tg_sb_printf(o, "\n== rank %d (i=%d, j=%d, k=%d)", r, co.i, co.j, co.k);
        for (int g = 0; g < TG_NGROUPS; g++) {
            char lab[32];
            tg_group_label(m, (tg_group)g, co, lab, sizeof lab);
            tg_sb_printf(o, "  %s=", lab);
            tg_emit_members(o, m, (tg_group)g, co, "{", "}");
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
            tg_sb_printf(o, "  %5d %-3s %-3s %-5s %-4s %-12s ", i, tg_phase_label(s->phase), lay, s->op, tt,
                         tg_step_kind_name(s->kind));
            if (tg_step_is_comm(s)) {
                char lab[32];
                tg_group_label(m, s->group, co, lab, sizeof lab);
                tg_sb_printf(o, "%s=", lab);
                tg_emit_members(o, m, s->group, co, "{", "}");
                if (tg_step_root(pl, co, s) >= 0)
                    tg_sb_printf(o, " root %d", tg_step_root(pl, co, s));
                tg_sb_printf(o, " %s %lld elems %lld bytes\n", tg_step_dir(s), s->count, 4 * s->count);
            } else {
                if (s->flops)
                    tg_sb_printf(o, "%lld flops  ", s->flops);
                char what[256];
                tg_sb_printf(o, "%s\n", tg_step_text(what, sizeof what, pl, rp, co, s));
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
    }
}

/* ---- blocks ------------------------------------------------------------------------------ */

typedef struct blk {
    int r0, nr, c0, nc, rank;
} blk;

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Sorted distinct starts (with their lengths) of the rows (rows=1) or columns of the blocks. */
static int distinct(const blk *b, int n, int rows, int *start, int *len)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        int s = rows ? b[i].r0 : b[i].c0, l = rows ? b[i].nr : b[i].nc, seen = 0;
        for (int j = 0; j < k && !seen; j++)
            seen = start[j] == s;
        if (!seen) {
            start[k] = s;
            len[k++] = l;
        }
    }
    /* insertion sort keeps start and len together */
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && start[j - 1] > start[j]; j--) {
            int t = start[j];
            start[j] = start[j - 1];
            start[j - 1] = t;
            t = len[j];
            len[j] = len[j - 1];
            len[j - 1] = t;
        }
    return k;
}

static void print_mesh(const tg_plan *pl, tg_sb *o)
{
    const tg_mesh *m = &pl->mesh;
    char lab[64];
    int cw = snprintf(lab, sizeof lab, "%d", m->p - 1), lw = snprintf(lab, sizeof lab, "depth k=%d:", m->d - 1);
    int jw = snprintf(lab, sizeof lab, "j=%d", m->q - 1);
    if (jw > cw)
        cw = jw;
    tg_sb_printf(o, "mesh [%d,%d,%d] = %d ranks; rank = j + q*i + q*q*k (i: row, j: column, k: depth)\n", m->q, m->q,
                 m->d, m->p);
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
                tg_sb_printf(o, " %*d", cw, tg_mesh_rank(m, (tg_coord){i, j, k}));
            tg_sb_puts(o, "\n");
        }
    }
}

/* One tensor's block map over the selected ranks. */
static bool print_tensor(const tg_plan *pl, const tg_class_plan *all, const tg_filter *f, int pi, tg_sb *o,
                         tg_err *err)
{
    const tg_mesh *m = &pl->mesh;
    int cap = 3 * m->p, n = 0;
    blk *b = malloc((size_t)cap * sizeof *b);
    int *rs = malloc((size_t)cap * sizeof *rs), *rl = malloc((size_t)cap * sizeof *rl);
    int *cs = malloc((size_t)cap * sizeof *cs), *cl = malloc((size_t)cap * sizeof *cl);
    int *hold = malloc((size_t)m->p * sizeof *hold);
    if (!b || !rs || !rl || !cs || !cl || !hold) {
        free(b), free(rs), free(rl), free(cs), free(cl), free(hold);
        return tg_fail(err, "out of memory");
    }
    const char *name;
    int full0, full1, ndim;
    char local[96];
    const tg_class_plan *r0 = &all[0];
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
    int per_rank = 0;
    for (int r = 0; r < m->p; r++) {
        const tg_class_plan *rp = &all[tg_class_of(pl, r)];
        tg_coord co = tg_mesh_coord(m, r);
        if (pi < 0) {
            const tg_buf *x = &rp->bufs[rp->x_buf];
            b[n++] = (blk){tg_io_r0(pl, co), x->rows, tg_io_c0(pl, co), x->cols, r};
            per_rank = 1;
            continue;
        }
        const tg_param *p = pi < rp->nparams && !strcmp(rp->params[pi].name, name) ? &rp->params[pi] : NULL;
        for (int k = 0; !p && k < rp->nparams; k++)
            if (!strcmp(rp->params[k].name, name))
                p = &rp->params[k];
        if (!p)
            continue;
        per_rank = p->npieces;
        for (int k = 0; k < p->npieces && n < cap; k++)
            b[n++] = (blk){p->piece[k].r0, p->piece[k].nr, p->piece[k].c0, p->piece[k].nc, r};
    }
    int nr = distinct(b, n, 1, rs, rl), nc = distinct(b, n, 0, cs, cl);
    if (ndim == 1)
        tg_sb_printf(o, "\n%s [%d]: %d block%s", name, full1, nc, nc == 1 ? "" : "s");
    else
        tg_sb_printf(o, "\n%s [%d, %d]: %d x %d blocks", name, full0, full1, nr, nc);
    /* holders per block */
    int minh = m->p, maxh = 0;
    for (int a = 0; a < nr; a++)
        for (int c = 0; c < nc; c++) {
            int h = 0;
            for (int i = 0; i < n; i++)
                h += b[i].r0 == rs[a] && b[i].c0 == cs[c];
            if (h < minh)
                minh = h;
            if (h > maxh)
                maxh = h;
        }
    tg_sb_printf(o, ", each held by %d", minh);
    if (maxh != minh)
        tg_sb_printf(o, "..%d", maxh);
    tg_sb_printf(o, " rank%s; a rank holds %d block%s %s its %s\n", maxh == 1 ? "" : "s", per_rank,
                 per_rank == 1 ? "" : "s", per_rank == 1 ? "in" : "side by side in", local);
    if (pi < 0)
        tg_sb_puts(o, "(the residual stream, [batch*seq, hidden]: input in, output out; every activation of a "
                      "block has this row split)\n");
    /* cell texts: selected holders */
    tg_sb *cell = calloc((size_t)(nr * nc), sizeof *cell);
    if (!cell) {
        free(b), free(rs), free(rl), free(cs), free(cl), free(hold);
        return tg_fail(err, "out of memory");
    }
    int width = 1;
    for (int a = 0; a < nr; a++)
        for (int c = 0; c < nc; c++) {
            tg_sb *t = &cell[a * nc + c];
            tg_sb_init(t);
            int h = 0;
            for (int i = 0; i < n; i++)
                if (b[i].r0 == rs[a] && b[i].c0 == cs[c] && f->rank[b[i].rank])
                    hold[h++] = b[i].rank;
            qsort(hold, (size_t)h, sizeof *hold, cmp_int);
            if (h)
                print_ranks(t, hold, h);
            else
                tg_sb_puts(t, ".");
            if ((int)t->len > width)
                width = (int)t->len;
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

bool tg_inspect_blocks(const tg_plan *pl, const tg_class_plan *all, const tg_filter *f, const char *tensor, tg_sb *o,
                       tg_err *err)
{
    const tg_class_plan *r0 = &all[0];
    /* which tensors: -1 is x */
    int matched = 0;
    int *which = malloc((size_t)(r0->nparams + 1) * sizeof *which);
    if (!which)
        return tg_fail(err, "out of memory");
    for (int pi = -1; pi < r0->nparams; pi++) {
        const char *name = pi < 0 ? "x" : r0->params[pi].name;
        if (tensor && fnmatch(tensor, name, 0) != 0)
            continue;
        int l = layer_of_name(name);
        if (!tensor && l >= 0 && l < f->layers && !f->layer[l])
            continue;
        if (!tensor && pi < 0 && !f->all_layers)
            continue;
        which[matched++] = pi;
    }
    if (tensor && matched == 0) {
        free(which);
        return tg_fail(err,
                       "--blocks %s: no tensor of %s is called that (or matches it as a pattern); the tensors are x "
                       "(the residual stream) and, for l in 0..%d, h.l.ln_1.weight, h.l.ln_1.bias, "
                       "h.l.attn.c_attn.weight, h.l.attn.c_attn.bias, h.l.attn.c_proj.weight, h.l.attn.c_proj.bias, "
                       "h.l.ln_2.weight, h.l.ln_2.bias, h.l.mlp.c_fc.weight, h.l.mlp.c_fc.bias, "
                       "h.l.mlp.c_proj.weight, h.l.mlp.c_proj.bias; patterns such as 'h.0.*' select several",
                       tensor, pl->spec.name, pl->spec.layers - 1);
    }
    header(o, pl, "block map");
    tg_sb_printf(o, "# which rank holds which block of each tensor (ranks: %s); '.' = no selected rank\n",
                 f->all_ranks ? "all" : f->ranks_desc);
    print_mesh(pl, o);
    bool ok = true;
    for (int i = 0; i < matched && ok; i++)
        ok = print_tensor(pl, all, f, which[i], o, err);
    free(which);
    return ok;
}

/* ---- summary ------------------------------------------------------------------------------- */

/* Per rank, per (phase, layer) bucket: elements received, sent, reduced per group, and flops. */
typedef struct traffic {
    long long recv[TG_NGROUPS], sent[TG_NGROUPS], red[TG_NGROUPS];
    long long flops;
    int used;
} traffic;

static int bucket_of(const tg_plan *pl, const tg_step *s)
{
    int L = pl->spec.layers + 1; /* layer -1 (and anything outside) is slot 0 */
    int l = (s->layer >= 0 && s->layer < pl->spec.layers) ? s->layer + 1 : 0;
    return phase_of(s) * L + l;
}

static void add_step_traffic(traffic *t, const tg_step *s)
{
    long long r, se, re;
    tg_step_traffic(s, &r, &se, &re);
    if (tg_step_is_comm(s) && s->group >= 0 && s->group < TG_NGROUPS) {
        t->recv[s->group] += r;
        t->sent[s->group] += se;
        t->red[s->group] += re;
    }
    t->flops += s->flops;
    t->used = 1;
}

static void add_traffic(traffic *a, const traffic *b)
{
    for (int g = 0; g < TG_NGROUPS; g++) {
        a->recv[g] += b->recv[g];
        a->sent[g] += b->sent[g];
        a->red[g] += b->red[g];
    }
    a->flops += b->flops;
    a->used |= b->used;
}

/* Which (group, direction) columns carry anything anywhere in the plan: bit 3*g + dir. */
static unsigned columns_of(const tg_plan *pl, const tg_class_plan *all)
{
    unsigned cols = 0;
    for (int c = 0; c < tg_plan_nclasses(pl); c++)
        for (int i = 0; i < all[c].nsteps; i++) {
            const tg_step *s = &all[c].steps[i];
            long long rc, se, re;
            tg_step_traffic(s, &rc, &se, &re);
            if (!tg_step_is_comm(s) || s->group < 0 || s->group >= TG_NGROUPS)
                continue;
            cols |= (rc ? 1u : 0u) << (3 * s->group);
            cols |= (se ? 1u : 0u) << (3 * s->group + 1);
            cols |= (re ? 1u : 0u) << (3 * s->group + 2);
        }
    return cols;
}

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

static void traffic_row(tg_sb *o, unsigned cols, const traffic *t)
{
    for (int c = 0; c < 3 * TG_NGROUPS; c++)
        if (cols >> c & 1) {
            const long long *v = c % 3 == 0 ? t->recv : c % 3 == 1 ? t->sent : t->red;
            tg_sb_printf(o, " %14lld", 4 * v[c / 3]);
        }
    tg_sb_printf(o, " %16lld\n", t->flops);
}

/* The busiest step of a rank: most bytes in live buffers; the three largest temporaries then. */
typedef struct mem_peak {
    long long persistent, live;
    int step;
    int top[3], ntop;
} mem_peak;

static bool memory_peak(const tg_class_plan *rp, mem_peak *mp)
{
    memset(mp, 0, sizeof *mp);
    mp->step = -1;
    long long *delta = calloc((size_t)rp->nsteps + 1, sizeof *delta);
    if (!delta)
        return false;
    for (int i = 0; i < rp->nbufs; i++) {
        const tg_buf *b = &rp->bufs[i];
        if (b->persistent)
            mp->persistent += b->elems;
        if (b->first < 0 || b->last < b->first || b->last >= rp->nsteps)
            continue;
        delta[b->first] += b->elems;
        delta[b->last + 1] -= b->elems;
    }
    long long cur = 0;
    for (int s = 0; s < rp->nsteps; s++) {
        cur += delta[s];
        if (cur > mp->live) {
            mp->live = cur;
            mp->step = s;
        }
    }
    free(delta);
    if (mp->step < 0)
        return true;
    for (int i = 0; i < rp->nbufs; i++) {
        const tg_buf *b = &rp->bufs[i];
        if (b->persistent || b->first > mp->step || b->last < mp->step)
            continue;
        int at = mp->ntop;
        while (at > 0 && rp->bufs[mp->top[at - 1]].elems < b->elems)
            at--;
        if (at >= 3)
            continue;
        for (int k = (mp->ntop < 3 ? mp->ntop : 2); k > at; k--)
            mp->top[k] = mp->top[k - 1];
        mp->top[at] = i;
        if (mp->ntop < 3)
            mp->ntop++;
    }
    return true;
}

/* Whole-plan figures for comparing meshes. */
typedef struct mesh_fig {
    long long arena_max, weights_max, recv_max, sent_max, red_max, recv_total, flops_max;
    int steps_max;
} mesh_fig;

static void mesh_figures(const tg_plan *pl, const tg_class_plan *all, mesh_fig *mf)
{
    memset(mf, 0, sizeof *mf);
    for (int r = 0; r < pl->mesh.p; r++) {
        const tg_class_plan *rp = &all[tg_class_of(pl, r)];
        long long rc = 0, se = 0, re = 0;
        for (int i = 0; i < rp->nsteps; i++) {
            long long a, b, c;
            tg_step_traffic(&rp->steps[i], &a, &b, &c);
            rc += a, se += b, re += c;
        }
#define MAX(f, v)                                                                                                      \
    if ((v) > mf->f)                                                                                                   \
    mf->f = (v)
        MAX(arena_max, rp->arena_elems);
        MAX(weights_max, rp->weight_elems);
        MAX(recv_max, rc);
        MAX(sent_max, se);
        MAX(red_max, re);
        MAX(flops_max, rp->flops);
        MAX(steps_max, rp->nsteps);
#undef MAX
        mf->recv_total += rc;
    }
}

static void fig_row(tg_sb *o, const char *mesh, const char *status, const mesh_fig *mf)
{
    tg_sb_printf(o, "  %-12s %-9s %13lld %13lld %13lld %13lld %13lld %15lld %16lld %9d\n", mesh, status,
                 4 * mf->arena_max, 4 * mf->weights_max, 4 * mf->recv_max, 4 * mf->sent_max, 4 * mf->red_max,
                 4 * mf->recv_total, mf->flops_max, mf->steps_max);
}

/* The spec's model on mesh [q,q,d], as Lua source for the real validator. */
static void spec_source(const tg_spec *s, int q, int d, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "return { name = \"%s\", mesh = { q = %d, d = %d }, model = { layers = %d, hidden = %d, heads = %d, "
             "ffn = %d, seq = %d, batch = %d, eps = %.17g }%s }",
             s->name, q, d, s->layers, s->hidden, s->heads, s->ffn, s->seq, s->batch, s->eps,
             s->mode == TG_TRAIN ? ", mode = \"train\"" : "");
}

static bool alternatives(const tg_plan *pl, const tg_class_plan *all, tg_sb *o, tg_err *err)
{
    const tg_spec *s = &pl->spec;
    int p = pl->mesh.p;
    tg_sb_printf(o, "\nmeshes with %d ranks for the same model (bytes and flops per %s; max over ranks, total over "
                    "the mesh):\n",
                 p, s->mode == TG_TRAIN ? "training step" : "forward");
    tg_sb_printf(o, "  %-12s %-9s %13s %13s %13s %13s %13s %15s %16s %9s\n", "mesh", "status", "arena max", "weights max",
                 "recv max", "sent max", "reduced max", "recv total", "flops max", "steps max");
    for (int q = p; q >= 1; q--) {
        if (p % (q * q))
            continue;
        int d = p / (q * q);
        char mesh[48];
        snprintf(mesh, sizeof mesh, "[%d,%d,%d]", q, q, d);
        mesh_fig mf;
        if (q == pl->mesh.q && d == pl->mesh.d) {
            mesh_figures(pl, all, &mf);
            fig_row(o, mesh, "this spec", &mf);
            continue;
        }
        char src[512], chunk[1200];
        spec_source(s, q, d, src, sizeof src);
        snprintf(chunk, sizeof chunk, "%s as [%d,%d,%d]", s->path, q, q, d);
        tg_spec alt;
        tg_err e = {{0}, 0};
        if (!tg_spec_load_string(chunk, src, &alt, &e)) {
            tg_sb_printf(o, "  %-12s not possible:\n", mesh);
            for (const char *line = e.msg; *line;) {
                size_t len = strcspn(line, "\n");
                tg_sb_printf(o, "      %.*s\n", (int)len, line);
                line += len;
                if (*line)
                    line++;
            }
            continue;
        }
        /* the user's spec, every field kept, on the other mesh */
        tg_spec copy = *s;
        copy.q = q;
        copy.d = d;
        tg_plan ap;
        tg_class_plan *aall;
        tg_err pe = {{0}, 0};
        tg_plan_init(&copy, &ap);
        if (!tg_plan_all(&ap, &aall, &pe)) {
            if (strstr(pe.msg, "out of memory"))
                return tg_fail(err, "%s", pe.msg);
            tg_sb_printf(o, "  %-12s not possible: %s\n", mesh, pe.msg);
            continue;
        }
        mesh_figures(&ap, aall, &mf);
        fig_row(o, mesh, "possible", &mf);
        tg_plan_all_free(&ap, aall);
    }
    return true;
}

bool tg_inspect_summary(const tg_plan *pl, const tg_class_plan *all, const tg_filter *f, tg_sb *o, tg_err *err)
{
    const tg_mesh *m = &pl->mesh;
    int L = pl->spec.layers + 1, nb = NPHASE * L;
    header(o, pl, "summary");
    if (!f->all_ranks || !f->all_layers)
        tg_sb_printf(o, "# showing %s\n", f->desc);
    tg_sb_puts(o, "# bytes are float32 payload, counted logically: a broadcast is received by every member but the "
                  "root and sent once by the root;\n# a reduce is sent by every member but the root and received "
                  "from each of them by the root; an all-reduce is 'reduced' on every member\n");

    /* memory */
    tg_sb_puts(o, "\nmemory per rank (bytes): arena = the planned arena; live peak = bytes in buffers live at the "
                  "busiest step, and its largest temporaries\n");
    tg_sb_printf(o, "  %5s %-11s %12s %12s %12s %12s  %s\n", "rank", "(i,j,k)", "arena", "weights", "persistent",
                 "live peak", "at step: largest temporaries");
    for (int r = 0; r < m->p; r++) {
        if (!f->rank[r])
            continue;
        const tg_class_plan *rp = &all[tg_class_of(pl, r)];
        tg_coord rc = tg_mesh_coord(m, r);
        mem_peak mp;
        if (!memory_peak(rp, &mp))
            return tg_fail(err, "out of memory");
        char co[40];
        snprintf(co, sizeof co, "(%d,%d,%d)", rc.i, rc.j, rc.k);
        tg_sb_printf(o, "  %5d %-11s %12lld %12lld %12lld %12lld  ", r, co, 4 * rp->arena_elems, 4 * rp->weight_elems,
                     4 * mp.persistent, 4 * mp.live);
        if (mp.step >= 0) {
            tg_sb_printf(o, "%d ", mp.step);
            step_label(o, &rp->steps[mp.step]);
            tg_sb_puts(o, ":");
            for (int k = 0; k < mp.ntop; k++)
                tg_sb_printf(o, "%s %s %lld", k ? "," : "", rp->bufs[mp.top[k]].name, 4 * rp->bufs[mp.top[k]].elems);
        }
        tg_sb_puts(o, "\n");
    }

    /* communication and flops per rank and (phase, layer) */
    unsigned cols = columns_of(pl, all);
    traffic *tot = calloc((size_t)nb, sizeof *tot), *per = calloc((size_t)nb, sizeof *per);
    if (!tot || !per) {
        free(tot);
        free(per);
        return tg_fail(err, "out of memory");
    }
    tg_sb_puts(o, "\ncommunication (bytes) and flops per rank, phase and layer:\n");
    traffic_header(o, cols, "   rank phase layer");
    for (int r = 0; r < m->p; r++) {
        const tg_class_plan *rp = &all[tg_class_of(pl, r)];
        memset(per, 0, (size_t)nb * sizeof *per);
        for (int i = 0; i < rp->nsteps; i++)
            add_step_traffic(&per[bucket_of(pl, &rp->steps[i])], &rp->steps[i]);
        traffic all;
        memset(&all, 0, sizeof all);
        for (int b = 0; b < nb; b++) {
            add_traffic(&tot[b], &per[b]);
            int l = b % L - 1;
            if (!per[b].used || !f->rank[r] || (l >= 0 && !f->layer[l]) || (l < 0 && !f->other_layers))
                continue;
            add_traffic(&all, &per[b]);
            char lay[16] = "-";
            if (l >= 0)
                snprintf(lay, sizeof lay, "%d", l);
            tg_sb_printf(o, "  %5d %-5s %5s", r, tg_phase_label(b / L), lay);
            traffic_row(o, cols, &per[b]);
        }
        if (f->rank[r]) {
            tg_sb_printf(o, "  %5d %-5s %5s", r, "all", f->all_layers ? "all" : "shown");
            traffic_row(o, cols, &all);
        }
    }

    tg_sb_printf(o, "\nmesh totals (all %d ranks) per phase and layer:\n", m->p);
    traffic_header(o, cols, "   phase layer");
    traffic grand;
    memset(&grand, 0, sizeof grand);
    for (int b = 0; b < nb; b++) {
        int l = b % L - 1;
        if (!tot[b].used || (l >= 0 && !f->layer[l]) || (l < 0 && !f->other_layers))
            continue;
        add_traffic(&grand, &tot[b]);
        char lay[16] = "-";
        if (l >= 0)
            snprintf(lay, sizeof lay, "%d", l);
        tg_sb_printf(o, "  %-6s %5s", tg_phase_label(b / L), lay);
        traffic_row(o, cols, &tot[b]);
    }
    tg_sb_printf(o, "  %-6s %5s", "all", f->all_layers ? "all" : "shown");
    traffic_row(o, cols, &grand);
    free(tot);
    free(per);

    return alternatives(pl, all, o, err);
}

/* summary.txt: the summary of every rank and layer, as `tessgen SPEC --summary` prints it. */
bool tg_emit_summary_txt(const tg_plan *pl, const tg_class_plan *all, tg_sb *out, tg_err *err)
{
    tg_filter f;
    if (!tg_filter_init(&f, pl, NULL, NULL, NULL, err))
        return false;
    bool ok = tg_inspect_summary(pl, all, &f, out, err);
    tg_filter_free(&f);
    return ok;
}
