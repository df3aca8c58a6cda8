/*
 * tr_trace.c - step markers, and the --trace and --stats reports built on
 * them (see tr_trace.h).
 *
 * Design: generated code calls TR_STEP(c, id) before each step. Off, a mark
 * only stores the running step (for messages). While a run is recorded, a
 * mark takes one clock reading and one sum of the collectives' counters: the
 * previous step ends (its time and the bytes moved since it began) and
 * step `id` begins, so the end of step N is the start of step N+1 and the
 * cost per step is a few arithmetic operations, no allocation, no I/O. The
 * record holds the last run of each step. Everything else happens after the
 * run: each rank compares its record with the step table the generator baked
 * into its descriptor (tr_step_info: kind, group, root, planned count) and
 * renders its own part, and rank 0 gathers the parts and prints or writes
 * them (a process holds only its own class's program, never the others'). A step's planned elements follow
 * the logical counting of tr_comm.c: a broadcast or all-reduce moves `count`
 * on each member; a reduce sends `count`, and its root receives `count` from
 * each other member. The counters are in bytes; the step table's count is in
 * elements of its esize bytes (2 for a bf16 broadcast, else 4). Times are relative to a barrier taken when recording
 * starts, so the ranks' slices line up in the trace viewer.
 */
#include "tr_trace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "tr_safetensors.h"

struct tr_steprec {
    int n;           /* steps in the rank's table */
    double t0;       /* time origin (after a barrier) */
    double *begin;   /* [n] seconds from t0, -1 = did not run */
    double *end;     /* [n] */
    long long *snap; /* [n] counter sum when the step began */
    long long *moved;/* [n] bytes moved during the step */
    signed char *phase; /* [n] TR_PHASE_* the step ran in */
    bool stopped;    /* tr_trace_end was called: marks record nothing more */
};

static const char *const phase_name[TR_NPHASES] = {"forward", "backward", "optimizer"};

/* Every byte counter the collectives keep (tr_comm.c); a new counter belongs here too. */
static long long moved_total(const tr_ctx *c)
{
    long long t = 0;
    for (int g = 0; g < TR_NGROUPS; g++)
        t += c->bcast_recv[g] + c->bcast_sent[g] + c->allreduce[g] + c->reduce_recv[g] + c->reduce_sent[g];
    return t;
}

void tr_step_mark(tr_ctx *c, int id)
{
    struct tr_steprec *r = c->rec;
    if (r && !r->stopped) {
        double now = tr_now() - r->t0;
        long long tot = moved_total(c);
        int cur = c->cur_step;
        if (cur >= 0 && cur < r->n && r->begin[cur] >= 0 && r->end[cur] < 0) {
            r->end[cur] = now;
            r->moved[cur] = tot - r->snap[cur];
        }
        if (id >= 0 && id < r->n) {
            r->begin[id] = now;
            r->end[id] = -1;
            r->snap[id] = tot;
            r->phase[id] = (signed char)(c->phase >= 0 && c->phase < TR_NPHASES ? c->phase : 0);
        }
    }
    c->cur_step = id;
}

void tr_trace_free(tr_ctx *c)
{
    struct tr_steprec *r = c->rec;
    if (!r)
        return;
    free(r->begin);
    free(r->end);
    free(r->snap);
    free(r->moved);
    free(r->phase);
    free(r);
    c->rec = NULL;
}

void tr_trace_begin(tr_ctx *c, bool on)
{
    if (!on)
        return;
    tr_trace_free(c);
    int n = c->desc->steps ? c->desc->nsteps : 0;
    size_t m = (size_t)(n > 0 ? n : 1);
    struct tr_steprec *r = calloc(1, sizeof *r);
    if (r) {
        r->n = n;
        r->begin = malloc(m * sizeof *r->begin);
        r->end = malloc(m * sizeof *r->end);
        r->snap = calloc(m, sizeof *r->snap);
        r->moved = calloc(m, sizeof *r->moved);
        r->phase = calloc(m, sizeof *r->phase);
    }
    if (!r || !r->begin || !r->end || !r->snap || !r->moved || !r->phase) {
        fprintf(stderr, "rank %d: out of memory for the step record; --trace/--stats will report nothing\n",
                c->desc->rank);
        c->rec = r;
        tr_trace_free(c);
    } else {
        for (int i = 0; i < n; i++)
            r->begin[i] = r->end[i] = -1;
        c->rec = r;
    }
    c->cur_step = -1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (c->rec)
        c->rec->t0 = tr_now();
}

void tr_trace_end(tr_ctx *c)
{
    tr_step_mark(c, -1);
    if (c->rec)
        c->rec->stopped = true;
}

/* Planned elements of step s on this rank (see the design note). */
static long long planned_elems(const tr_rank_desc *d, const tr_step_info *s)
{
    if (s->group < 0 || s->group >= TR_NGROUPS)
        return 0;
    if (s->kind == TR_K_REDUCE && s->root == d->key[s->group])
        return s->count * (d->size[s->group] - 1);
    return s->count;
}

/* Planned bytes of step s on this rank, as the counters measure them. */
static long long planned(const tr_rank_desc *d, const tr_step_info *s)
{
    return s->esize * planned_elems(d, s); /* 2 bytes an element of a bf16 broadcast, else 4 */
}

static bool everyone(bool mine)
{
    int v = mine ? 1 : 0, all = 0;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == 1;
}

static const char *group_name(int g)
{
    static const char *n[TR_NGROUPS] = {"row", "col", "dep", "coldep", "world"};
    return (g >= 0 && g < TR_NGROUPS) ? n[g] : NULL;
}

/* "L0 qkv t=1 bcast" */
static void step_name(char *buf, size_t cap, const tr_step_info *s)
{
    const char *kind = tr_kind_name(s->kind), *op = s->op ? s->op : "?";
    if (s->t >= 0)
        snprintf(buf, cap, "L%d %s t=%d %s", s->layer, op, s->t, kind);
    else if (s->layer >= 0)
        snprintf(buf, cap, "L%d %s %s", s->layer, op, kind);
    else
        snprintf(buf, cap, "%s %s", op, kind);
}

/* ---- a growable text buffer for rank 0 ---------------------------------------- */

typedef struct tbuf {
    char *s;
    size_t len, cap;
    bool oom;
} tbuf;

__attribute__((format(printf, 2, 3))) static void tb_printf(tbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (b->len + (size_t)n + 1 > cap)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* A JSON string; the step table holds generator identifiers, escaped anyway. */
static void tb_jstr(tbuf *b, const char *s)
{
    tb_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            tb_printf(b, "\\%c", *p);
        else if (*p < 32)
            tb_printf(b, "\\u%04x", *p);
        else
            tb_printf(b, "%c", *p);
    }
    tb_printf(b, "\"");
}

/* ---- --trace --------------------------------------------------------------------------- */

/* This rank's part of the trace: its process metadata and one slice per step that ran. Each rank prints its
 * own part from its own step table (a process holds only its class's program), rank 0 joins them. */
static void rank_events(tbuf *b, const tr_ctx *c)
{
    const tr_rank_desc *d = c->desc;
    const struct tr_steprec *r = c->rec;
    int q = d->rank;
    tb_printf(b, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank %d (%d,%d,%d)\"}},\n",
              q, q, d->i, d->j, d->k);
    tb_printf(b, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}},\n",
              q, q);
    bool seen[TR_NPHASES] = {false};
    for (int i = 0; r && i < r->n; i++)
        if (r->begin[i] >= 0 && r->end[i] >= r->begin[i])
            seen[r->phase[i]] = true;
    bool first = true;
    for (int ph = 0; ph < TR_NPHASES; ph++)
        if (seen[ph] || (ph == 0 && !seen[1] && !seen[2])) { /* one thread (row) per phase that ran */
            tb_printf(b, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                      first ? "" : ",\n", q, ph, phase_name[ph]);
            first = false;
        }
    for (int i = 0; r && i < r->n; i++) {
        const tr_step_info *s = &d->steps[i];
        double t0 = r->begin[i], t1 = r->end[i];
        if (t0 < 0 || t1 < t0)
            continue;
        long long plan = planned_elems(d, s), meas = r->moved[i];
        char name[96];
        const char *kind = tr_kind_name(s->kind);
        step_name(name, sizeof name, s);
        tb_printf(b, ",\n{\"name\":");
        tb_jstr(b, name);
        tb_printf(b, ",\"cat\":");
        tb_jstr(b, kind);
        tb_printf(b, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%d,"
                     "\"phase\":\"%s\",\"layer\":%d,\"op\":",
                  q, r->phase[i], 1e6 * t0, 1e6 * (t1 - t0), i, phase_name[r->phase[i]], s->layer);
        tb_jstr(b, s->op);
        tb_printf(b, ",\"t\":%d,\"kind\":", s->t);
        tb_jstr(b, kind);
        if (group_name(s->group))
            tb_printf(b, ",\"group\":\"%s\",\"root\":%d", group_name(s->group), tr_root_rank(d, s));
        tb_printf(b, ",\"elems\":%lld,\"bytes\":%lld,\"measured_bytes\":%lld,\"flops\":%lld}}", plan,
                  s->esize * plan, meas, s->flops);
    }
}

bool tr_trace_write(tr_ctx *c, const char *path, tr_err *err)
{
    if (!everyone(c->rec != NULL))
        return tr_fail(err, "%s: no run was recorded (out of memory for the step record)", path);
    int p = tr_model.p, rank = c->desc->rank;
    tbuf mine = {0}, all = {0};
    rank_events(&mine, c);
    long long len = mine.oom ? -1 : (long long)mine.len, *lens = NULL;
    int *cnt = NULL, *dsp = NULL;
    bool ok = true;
    if (rank == 0) {
        lens = malloc((size_t)p * sizeof *lens);
        cnt = malloc((size_t)p * sizeof *cnt);
        dsp = malloc((size_t)p * sizeof *dsp);
        ok = lens && cnt && dsp;
    }
    if (!everyone(ok && !mine.oom)) {
        ok = false;
        tr_fail(err, "%s: out of memory rendering the trace", path);
    }
    if (ok) {
        MPI_Gather(&len, 1, MPI_LONG_LONG, lens, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
        long long total = 0;
        if (rank == 0) {
            for (int r = 0; r < p; r++) {
                cnt[r] = (int)lens[r];
                dsp[r] = (int)total;
                total += lens[r] + 2; /* room for the ",\n" between ranks */
            }
            ok = total < 2000000000LL;
            if (!ok)
                tr_fail(err, "%s: the trace of %d ranks is %lld bytes, more than one file write of 2 GB; trace a "
                             "smaller model or fewer steps",
                        path, p, total);
            else {
                all.cap = (size_t)total + 64;
                all.s = malloc(all.cap);
                ok = all.s != NULL;
                if (!ok)
                    tr_fail(err, "%s: out of memory gathering the trace on rank 0", path);
            }
        }
        if (everyone(ok))
            MPI_Gatherv(mine.s ? mine.s : "", (int)len, MPI_CHAR, all.s, cnt, dsp, MPI_CHAR, 0, MPI_COMM_WORLD);
        else
            ok = false;
    }
    if (rank == 0 && ok) {
        tbuf head = {0};
        tb_printf(&head, "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"model\":");
        tb_jstr(&head, tr_model.name);
        tb_printf(&head, ",\"mesh\":\"%s\",\"ranks\":%d,\"tessgen\":", tr_mesh_text(), tr_model.p);
        tb_jstr(&head, tr_model.tessgen_version);
        tb_printf(&head, ",\"spec\":");
        tb_jstr(&head, tr_model.spec_path);
        tb_printf(&head, ",\"note\":\"pid = rank; one X slice per step, from its TR_STEP mark to the next; ts, dur in "
                         "microseconds from a common barrier\"},\n\"traceEvents\":[\n");
        /* the parts, in rank order, joined by ",\n" (gathered at their offsets, so joined in place) */
        size_t nparts = 2 * (size_t)p + 2;
        const void **parts = malloc(nparts * sizeof *parts);
        size_t *plens = malloc(nparts * sizeof *plens);
        ok = !head.oom && parts && plens;
        if (ok) {
            size_t k = 0;
            parts[k] = head.s;
            plens[k++] = head.len;
            for (int r = 0; r < p; r++) {
                if (r) {
                    parts[k] = ",\n";
                    plens[k++] = 2;
                }
                parts[k] = all.s + dsp[r];
                plens[k++] = (size_t)cnt[r];
            }
            parts[k] = "\n]}\n";
            plens[k++] = 4;
            ok = tr_st_write_file_atomic(path, parts, plens, (int)k, err);
        } else {
            tr_fail(err, "%s: out of memory writing the trace", path);
        }
        free(parts);
        free(plens);
        free(head.s);
    }
    free(mine.s);
    free(all.s);
    free(lens);
    free(cnt);
    free(dsp);
    int v = ok ? 1 : 0;
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!v && rank != 0)
        tr_fail(err, "%s: rank 0 could not write the trace", path);
    return v == 1;
}

/* ---- --stats ---------------------------------------------------------------------------- */

/* Per-rank figures, gathered as long longs (times separately). */
enum {
    S_MEAS = 0,                 /* [TR_NKINDS] measured bytes per kind */
    S_PLAN = TR_NKINDS,         /* [TR_NKINDS] planned bytes per kind, of the steps that ran */
    S_RAN = 2 * TR_NKINDS,      /* [TR_NKINDS] steps of each kind that ran */
    S_BAD = 3 * TR_NKINDS,      /* steps whose measured bytes differ from the plan */
    S_BAD_STEP, S_BAD_MEAS, S_BAD_PLAN,
    S_ARENA, S_ARENA_PLAN, S_RSS_KIB, S_RECORDED, S_NSTEPS,
    S_STASH, S_STASH_PLAN,      /* pipeline stages: the stash's bytes, allocated (0: no step ran) and planned (-1: none) */
    S_COMM_KINDS,               /* bit k: the rank's table has a collective step of kind k */
    S_N
};
enum { NAME_LEN = 96 };
enum { NSECS = TR_NKINDS + TR_NPHASES }; /* seconds per step kind, then per phase */ /* the first mismatching step's name, printed by each rank from its own table */

static void stats_mine(tr_ctx *c, long long *v, double *secs, char *bad_name)
{
    memset(v, 0, S_N * sizeof *v);
    memset(secs, 0, NSECS * sizeof *secs);
    const tr_rank_desc *d = c->desc;
    struct tr_steprec *r = c->rec;
    v[S_BAD_STEP] = -1;
    v[S_RECORDED] = r != NULL;
    v[S_NSTEPS] = d->steps ? d->nsteps : 0;
    bad_name[0] = '\0';
    for (int i = 0; d->steps && i < d->nsteps; i++)
        if (d->steps[i].kind >= 0 && d->steps[i].kind < TR_NKINDS && group_name(d->steps[i].group))
            v[S_COMM_KINDS] |= 1LL << d->steps[i].kind;
    for (int i = 0; r && i < r->n; i++) {
        if (r->begin[i] < 0 || r->end[i] < r->begin[i])
            continue;
        const tr_step_info *s = &d->steps[i];
        int k = (s->kind >= 0 && s->kind < TR_NKINDS) ? (int)s->kind : 0;
        long long plan = planned(d, s);
        v[S_MEAS + k] += r->moved[i];
        v[S_PLAN + k] += plan;
        v[S_RAN + k]++;
        secs[k] += r->end[i] - r->begin[i];
        secs[TR_NKINDS + r->phase[i]] += r->end[i] - r->begin[i];
        if (r->moved[i] != plan) {
            if (v[S_BAD]++ == 0) {
                step_name(bad_name, NAME_LEN, s);
                v[S_BAD_STEP] = i;
                v[S_BAD_MEAS] = r->moved[i];
                v[S_BAD_PLAN] = plan;
            }
        }
    }
    v[S_ARENA] = c->arena_bytes;
    v[S_ARENA_PLAN] = 4 * d->arena_elems;
    const int piped = &tr_pipe_class && tr_pipe_class.stages > 1;
    v[S_STASH] = 4 * c->pipe_stash_elems;
    v[S_STASH_PLAN] = piped ? 4 * tr_pipe_class.stash_planned : -1;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        v[S_RSS_KIB] = ru.ru_maxrss; /* KiB on Linux */
}

bool tr_stats_report(tr_ctx *c, int quiet)
{
    int p = tr_model.p, rank = c->desc->rank;
    long long mine[S_N];
    double msecs[NSECS];
    char mname[NAME_LEN];
    stats_mine(c, mine, msecs, mname);
    long long *all = NULL;
    double *secs = NULL;
    char *names = NULL;
    if (rank == 0) {
        all = malloc((size_t)p * sizeof mine);
        secs = malloc((size_t)p * sizeof msecs);
        names = malloc((size_t)p * NAME_LEN);
        if (!all || !secs || !names) {
            fprintf(stderr, "error: --stats: out of memory on rank 0\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_Gather(mine, S_N, MPI_LONG_LONG, all, S_N, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    MPI_Gather(msecs, NSECS, MPI_DOUBLE, secs, NSECS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(mname, NAME_LEN, MPI_CHAR, names, NAME_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
    int bad = 0;
    if (rank == 0) {
        /* columns: kinds with a collective step (bytes), kinds with any step that ran (time) */
        int comm[TR_NKINDS] = {0}, used[TR_NKINDS] = {0}, unrecorded = 0;
        for (int q = 0; q < p; q++) {
            for (int k = 0; k < TR_NKINDS; k++)
                comm[k] |= (all[q * S_N + S_COMM_KINDS] >> k) & 1;
            for (int k = 0; k < TR_NKINDS; k++)
                used[k] |= all[q * S_N + S_RAN + k] > 0;
            unrecorded += !all[q * S_N + S_RECORDED];
        }
        if (!quiet) {
            printf("stats: bytes per collective kind, measured/planned (every step that ran):\n%5s",
                   "rank");
            for (int k = 0; k < TR_NKINDS; k++)
                if (comm[k])
                    printf(" %25s", tr_kind_name((tr_kind)k));
            printf(" %25s\n", "all collectives");
        }
        for (int q = 0; q < p; q++) {
            const long long *v = all + q * S_N;
            int rbad = v[S_BAD] != 0 || !v[S_RECORDED];
            bad |= rbad;
            if (quiet && !rbad)
                continue;
            long long tm = 0, tp = 0;
            printf("%5d", q);
            for (int k = 0; k < TR_NKINDS; k++) {
                tm += v[S_MEAS + k];
                tp += v[S_PLAN + k];
                if (!comm[k])
                    continue;
                char cell[64];
                snprintf(cell, sizeof cell, "%lld/%lld", v[S_MEAS + k], v[S_PLAN + k]);
                printf(" %25s", cell);
            }
            char cell[64];
            snprintf(cell, sizeof cell, "%lld/%lld", tm, tp);
            printf(" %25s%s\n", cell, rbad ? "  MISMATCH" : "");
            if (!v[S_RECORDED])
                printf("      rank %d recorded nothing (out of memory for the step record)\n", q);
            else if (v[S_BAD]) {
                const char *name = names + (size_t)q * NAME_LEN;
                printf("      MISMATCH: rank %d: %lld step%s moved other than planned; the first, step %lld (%s), "
                       "moved %lld bytes, planned %lld\n",
                       q, v[S_BAD], v[S_BAD] == 1 ? "" : "s", v[S_BAD_STEP], name, v[S_BAD_MEAS],
                       v[S_BAD_PLAN]);
            }
        }
        if (bad)
            fprintf(stderr, "error: --stats: measured bytes differ from the plan (MISMATCH above)%s\n",
                    unrecorded ? " or a rank recorded nothing" : "");
        else if (!quiet)
            printf("stats: every step of every rank moved exactly its planned bytes\n");

        if (!quiet) {
            printf("stats: time per step kind, milliseconds (from each step's mark to the next; steps that ran):\n%5s",
                   "rank");
            for (int k = 0; k < TR_NKINDS; k++)
                if (used[k])
                    printf(" %11s", tr_kind_name((tr_kind)k));
            printf(" %11s %7s\n", "all", "steps");
            for (int q = 0; q < p; q++) {
                double tot = 0;
                long long nran = 0;
                printf("%5d", q);
                for (int k = 0; k < TR_NKINDS; k++) {
                    tot += secs[q * NSECS + k];
                    nran += all[q * S_N + S_RAN + k];
                    if (used[k])
                        printf(" %11.3f", 1e3 * secs[q * NSECS + k]);
                }
                printf(" %11.3f %3lld/%-3lld\n", 1e3 * tot, nran, all[q * S_N + S_NSTEPS]);
            }
            bool phases = false; /* a training step was recorded: its forward, backward and optimizer */
            for (int q = 0; q < p; q++)
                phases |= secs[q * NSECS + TR_NKINDS + 1] > 0 || secs[q * NSECS + TR_NKINDS + 2] > 0;
            if (phases) {
                printf("stats: time per phase of the recorded training step, milliseconds:\n%5s", "rank");
                for (int ph = 0; ph < TR_NPHASES; ph++)
                    printf(" %11s", phase_name[ph]);
                printf("\n");
                for (int q = 0; q < p; q++) {
                    printf("%5d", q);
                    for (int ph = 0; ph < TR_NPHASES; ph++)
                        printf(" %11.3f", 1e3 * secs[q * NSECS + TR_NKINDS + ph]);
                    printf("\n");
                }
            }
            if (all[S_STASH_PLAN] >= 0) /* pipeline stages: the stash beside the arena, as --summary plans it */
                printf("stats: memory per rank (arena and the pipeline stash: allocated/planned bytes; peak RSS of the "
                       "process):\n%5s %31s %31s %14s\n",
                       "rank", "arena allocated/planned", "stash allocated/planned", "peak RSS KiB");
            else
                printf("stats: memory per rank (arena: allocated/planned bytes; peak RSS of the process):\n%5s %31s "
                       "%14s\n",
                       "rank", "arena allocated/planned", "peak RSS KiB");
        }
        for (int q = 0; q < p; q++) {
            const long long *v = all + q * S_N;
            /* the stash is allocated at a step's first forward: a run without steps has none to compare */
            int sbad = v[S_STASH_PLAN] >= 0 && v[S_STASH] > 0 && v[S_STASH] != v[S_STASH_PLAN];
            int mbad = v[S_ARENA] != v[S_ARENA_PLAN] || sbad;
            bad |= mbad;
            if (quiet && !mbad)
                continue;
            char cell[64], scell[64];
            snprintf(cell, sizeof cell, "%lld/%lld", v[S_ARENA], v[S_ARENA_PLAN]);
            if (v[S_STASH_PLAN] >= 0) {
                if (v[S_STASH] > 0)
                    snprintf(scell, sizeof scell, "%lld/%lld", v[S_STASH], v[S_STASH_PLAN]);
                else
                    snprintf(scell, sizeof scell, "- (no step)/%lld", v[S_STASH_PLAN]);
                printf("%5d %31s %31s %14lld%s\n", q, cell, scell, v[S_RSS_KIB], mbad ? "  MISMATCH" : "");
            } else {
                printf("%5d %31s %14lld%s\n", q, cell, v[S_RSS_KIB], mbad ? "  MISMATCH" : "");
            }
        }
        free(all);
        free(secs);
        free(names);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return !bad;
}
