/*
 * test_streams.c - gen/streams.c against the direct statement of its rule.
 *
 * The reference below is the rule as the CUDA emitter computed it before the
 * plan did (kept here verbatim in substance): per step, scan back over the
 * earlier steps of the phase, down to the latest step of the other stream
 * this stream already waited for, and take the first step of the other stream
 * that shares arena bytes with this one where either writes, checking every
 * (slot of this step, slot of that step) pair in slot order; every slot,
 * attention's scratch included, is part of the call. A bcast of SUMMA step
 * t >= 1 overlaps the latest GEMM before it unless it waits for it or later.
 * That is O(S^2) per class at worst. tg_streams_plan must give exactly its
 * stream, wait, slot pair, signal and overlap for every step, and the same
 * totals, on:
 *   - every class of the plans test_plan.c checks (inference and training,
 *     meshes [1,1,1] to [4,4,2] and [2,2,4], uneven shapes), and one class of
 *     a 48-layer training plan;
 *   - random class programs: random step kinds, phases, SUMMA steps, slots
 *     (with gaps) and access modes over random buffers that share bytes in
 *     every way (nested, partial, equal, touching), few and many of each.
 * Independently of the reference, every wait is checked to name an earlier
 * step of the other stream in the same phase that does conflict, and a buffer
 * of no elements to be refused as an internal error.
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "streams.h"
#include "tt.h"
#include "tt_spec.h"

/* ---- the reference: the direct scan ------------------------------------------------------ */

typedef struct ref {
    int *stream, *wait, *wait_a, *wait_b, *overlaps;
    unsigned char *signal;
    int comm_steps, waits, late_bcasts, overlapped_bcasts;
} ref;

static int ref_stream(tg_step_kind k)
{
    switch (k) {
    case TG_STEP_BCAST:
    case TG_STEP_ALLREDUCE:
    case TG_STEP_REDUCE:
    case TG_STEP_REDUCESCATTER: /* optimizer.shard */
    case TG_STEP_ALLGATHER: return 1;
    default: return 0;
    }
}

static bool ref_uses(const tg_step *s, int slot)
{
    (void)s, (void)slot;
    return true; /* the CUDA backend's attention works in all its slots (scores and probabilities) */
}

static bool ref_conflict(const tg_class_plan *rp, const tg_step *a, const tg_step *b, int *sa, int *sb)
{
    for (int x = 0; x < TG_STEP_MAXBUF; x++) {
        if (a->buf[x] < 0 || !ref_uses(a, x))
            continue;
        const tg_buf *ba = &rp->bufs[a->buf[x]];
        for (int y = 0; y < TG_STEP_MAXBUF; y++) {
            if (b->buf[y] < 0 || !ref_uses(b, y))
                continue;
            const tg_buf *bb = &rp->bufs[b->buf[y]];
            if (!((a->acc[x] | b->acc[y]) & TG_ACC_W))
                continue;
            if (ba->offset < bb->offset + bb->elems && bb->offset < ba->offset + ba->elems) {
                *sa = x;
                *sb = y;
                return true;
            }
        }
    }
    return false;
}

static void ref_free(ref *c)
{
    free(c->stream);
    free(c->wait);
    free(c->wait_a);
    free(c->wait_b);
    free(c->overlaps);
    free(c->signal);
}

static void ref_build(const tg_class_plan *rp, ref *c)
{
    size_t n = (size_t)(rp->nsteps > 0 ? rp->nsteps : 1);
    c->stream = malloc(n * sizeof *c->stream);
    c->wait = malloc(n * sizeof *c->wait);
    c->wait_a = malloc(n * sizeof *c->wait_a);
    c->wait_b = malloc(n * sizeof *c->wait_b);
    c->overlaps = malloc(n * sizeof *c->overlaps);
    c->signal = calloc(n, 1);
    c->comm_steps = c->waits = c->late_bcasts = c->overlapped_bcasts = 0;
    int waited[2] = {-1, -1};
    for (int b = 0; b < rp->nsteps; b++) {
        if (b > 0 && rp->steps[b].phase != rp->steps[b - 1].phase)
            waited[0] = waited[1] = b - 1;
        c->stream[b] = ref_stream(rp->steps[b].kind);
        c->wait[b] = c->wait_a[b] = c->wait_b[b] = -1;
        int me = c->stream[b];
        for (int a = b - 1; a > waited[me]; a--) {
            int sa, sb;
            if (c->stream[a] != me && ref_conflict(rp, &rp->steps[b], &rp->steps[a], &sa, &sb)) {
                c->wait[b] = a;
                c->wait_a[b] = sa;
                c->wait_b[b] = sb;
                c->signal[a] = 1;
                if (!rp->steps[b].last_mb) /* runs on the last micro-batch only: orders nothing on the others */
                    waited[me] = a;
                break;
            }
        }
    }
    for (int i = 0; i < rp->nsteps; i++) {
        const tg_step *s = &rp->steps[i];
        c->waits += c->wait[i] >= 0;
        c->comm_steps += c->stream[i] == 1;
        c->overlaps[i] = -1;
        if (s->kind == TG_STEP_BCAST && s->t >= 1) {
            int g = i - 1;
            while (g >= 0 && rp->steps[g].kind != TG_STEP_GEMM)
                g--;
            c->late_bcasts++;
            if (g >= 0 && c->wait[i] < g) {
                c->overlaps[i] = g;
                c->overlapped_bcasts++;
            }
        }
    }
}

/* ---- comparison --------------------------------------------------------------------------- */

/* cp after tg_streams_plan against the reference; label names the plan in a failure */
static void compare(const tg_class_plan *cp, const char *label)
{
    ref r;
    ref_build(cp, &r);
    int bad = 0;
    for (int i = 0; i < cp->nsteps && !bad; i++) {
        const tg_step *s = &cp->steps[i];
        int want_stream = r.stream[i] ? TG_STREAM_COMM : TG_STREAM_COMPUTE;
        if (s->stream != want_stream || s->wait != r.wait[i] || s->wait_slot != r.wait_a[i] ||
            s->wait_other_slot != r.wait_b[i] || s->signal != r.signal[i] || s->overlaps != r.overlaps[i]) {
            TT_CHECK(0,
                     "%s class (%d,%d) step %d: stream %d wait %d slots %d,%d signal %d overlaps %d; the direct scan: "
                     "%d %d %d,%d %d %d",
                     label, cp->i, cp->j, i, s->stream, s->wait, s->wait_slot, s->wait_other_slot, s->signal,
                     s->overlaps, want_stream, r.wait[i], r.wait_a[i], r.wait_b[i], r.signal[i], r.overlaps[i]);
            bad = 1;
        }
        /* on its own: a wait names an earlier step of the other stream, in this phase, that conflicts */
        if (s->wait >= 0) {
            const tg_step *w = &cp->steps[s->wait];
            int sa, sb;
            int phase_ok = 1;
            for (int k = s->wait; k < i; k++)
                phase_ok &= cp->steps[k].phase == s->phase;
            TT_CHECK(s->wait < i && w->stream != s->stream && phase_ok && ref_conflict(cp, s, w, &sa, &sb),
                     "%s class (%d,%d) step %d waits for step %d, which it need not wait for", label, cp->i, cp->j,
                     i, s->wait);
        }
    }
    TT_CHECK(cp->comm_steps == r.comm_steps && cp->waits == r.waits && cp->late_bcasts == r.late_bcasts &&
                 cp->overlapped_bcasts == r.overlapped_bcasts,
             "%s class (%d,%d): totals %d %d %d %d, the direct scan: %d %d %d %d", label, cp->i, cp->j,
             cp->comm_steps, cp->waits, cp->late_bcasts, cp->overlapped_bcasts, r.comm_steps, r.waits, r.late_bcasts,
             r.overlapped_bcasts);
    ref_free(&r);
}

/* ---- real plans --------------------------------------------------------------------------- */

static void real_plan(const tg_spec *s, const char *label, int *waits)
{
    tg_plan pl;
    tg_class_plan *all;
    tg_err err = {{0}, 0};
    tg_plan_init(s, &pl);
    bool ok = tg_plan_all(&pl, &all, &err);
    TT_CHECK(ok, "%s: plan failed: %s", label, err.msg);
    if (!ok)
        return;
    for (int c = 0; c < tg_plan_nclasses(&pl); c++) {
        compare(&all[c], label);
        *waits += all[c].waits;
    }
    tg_plan_all_free(&pl, all);
}

/* ---- random plans --------------------------------------------------------------------------- */

static unsigned long long rng_state;

static unsigned rnd(unsigned n)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)(rng_state >> 33) % n;
}

/* nbufs buffers in an arena of span elements (sizes 1..maxe; aligned: multiples of 16 at multiples of 16),
 * nsteps steps of random kinds with up to 8 slots each */
static void random_plan(tg_class_plan *cp, int nbufs, int nsteps, long long span, int maxe, int aligned)
{
    memset(cp, 0, sizeof *cp);
    cp->i = (int)rnd(4);
    cp->j = (int)rnd(4);
    cp->nbufs = nbufs;
    cp->nsteps = nsteps;
    cp->bufs = calloc((size_t)nbufs, sizeof *cp->bufs);
    cp->steps = calloc((size_t)nsteps, sizeof *cp->steps);
    for (int i = 0; i < nbufs; i++) {
        tg_buf *b = &cp->bufs[i];
        snprintf(b->name, sizeof b->name, "b%d", i);
        b->elems = 1 + rnd((unsigned)maxe);
        b->offset = rnd((unsigned)span);
        if (aligned) {
            b->elems = 16 * (1 + rnd((unsigned)(maxe / 16 + 1)));
            b->offset = 16 * rnd((unsigned)(span / 16 + 1));
        }
        if (i > 0 && rnd(5) == 0) /* the same bytes as another buffer, or its start or end */
            b->offset = cp->bufs[rnd((unsigned)i)].offset + (rnd(2) ? cp->bufs[rnd((unsigned)i)].elems : 0);
    }
    int phase = 0;
    for (int i = 0; i < nsteps; i++) {
        tg_step *s = &cp->steps[i];
        if (rnd(60) == 0 && phase < 2)
            phase++;
        s->phase = (tg_phase)phase;
        s->kind = (tg_step_kind)rnd(TG_STEP_ADAMW + 1);
        if (rnd(3) == 0) /* more collectives and GEMMs, as in real plans */
            s->kind = rnd(2) ? TG_STEP_BCAST : TG_STEP_GEMM;
        s->t = (int)rnd(4) - 1;
        s->layer = 0;
        s->op = "x";
        int nslots = 1 + (int)rnd(TG_STEP_MAXBUF);
        for (int k = 0; k < TG_STEP_MAXBUF; k++) {
            s->buf[k] = -1;
            if (k < nslots && rnd(4) != 0) {
                s->buf[k] = (int)rnd((unsigned)nbufs);
                static const unsigned char accs[] = {TG_ACC_R, TG_ACC_W, TG_ACC_R | TG_ACC_W, TG_ACC_R, 0};
                s->acc[k] = accs[rnd(rnd(10) ? 4 : 5)];
            }
        }
    }
}

static void random_free(tg_class_plan *cp)
{
    free(cp->bufs);
    free(cp->steps);
}

int main(void)
{
    static const int meshes[][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}, {2, 3}, {3, 1}, {3, 2}, {4, 1}, {4, 2}, {2, 4}};
    int waits = 0;
    TT_CASE("streams = the direct scan on every class of the test meshes' inference plans") {
        for (size_t mi = 0; mi < sizeof meshes / sizeof meshes[0]; mi++) {
            int q = meshes[mi][0], d = meshes[mi][1];
            tg_spec s = tt_spec(q, d, 3, 48, 12, 192, 8, 2 * q * d, 0);
            char label[64];
            snprintf(label, sizeof label, "mesh [%d,%d,%d]", q, q, d);
            real_plan(&s, label, &waits);
        }
        TT_CHECK(waits > 0, "no step of any plan waits: the comparison compared nothing");
    }
    TT_CASE("streams = the direct scan on every class of the test meshes' training plans") {
        for (size_t mi = 0; mi < sizeof meshes / sizeof meshes[0]; mi++) {
            int q = meshes[mi][0], d = meshes[mi][1];
            tg_spec s = tt_spec(q, d, 2, 48, 12, 192, 8, 2 * q * d, 1);
            char label[64];
            snprintf(label, sizeof label, "train mesh [%d,%d,%d]", q, q, d);
            real_plan(&s, label, &waits);
            /* 2 micro-batches: the gradients' all-reduces run on the last one only (tg_step.last_mb), inside the
             * backward of their layers; with the AdamW state sharded over depth they are reduce-scatters */
            s.microbatches = 2;
            snprintf(label, sizeof label, "train mesh [%d,%d,%d], 2 micro-batches", q, q, d);
            real_plan(&s, label, &waits);
            s.opt.shard = d > 1;
            snprintf(label, sizeof label, "train mesh [%d,%d,%d], 2 micro-batches, shard", q, q, d);
            real_plan(&s, label, &waits);
        }
        tg_spec u = tt_spec(2, 2, 1, 40, 4, 24, 5, 8, 0);
        real_plan(&u, "uneven", &waits);
        u.mode = TG_TRAIN;
        real_plan(&u, "uneven train", &waits);
    }
    TT_CASE("streams = the direct scan on a class of a 48-layer training plan on [4,4,1]") {
        tg_spec s = tt_spec(4, 1, 48, 64, 8, 256, 8, 8, 1);
        tg_plan pl;
        tg_class_plan cp;
        tg_err err = {{0}, 0};
        tg_plan_init(&s, &pl);
        bool ok = tg_plan_class(&pl, 1, 2, &cp, &err);
        TT_CHECK(ok, "%s", err.msg);
        if (ok) {
            TT_CHECK(cp.nsteps > 8000 && cp.waits > 4000 && cp.overlapped_bcasts > 0, "%d steps %d waits %d overlaps",
                     cp.nsteps, cp.waits, cp.overlapped_bcasts);
            compare(&cp, "48 layers");
            tg_class_free(&cp);
        }
    }
    static const struct {
        const char *name;
        int nbufs, nsteps, maxe, aligned;
        long long span;
        int reps;
    } kinds[] = {
        {"streams = the direct scan on random plans: few buffers, dense sharing", 4, 40, 8, 0, 12, 400},
        {"streams = the direct scan on random plans: many small buffers, short program", 60, 30, 6, 0, 200, 300},
        {"streams = the direct scan on random plans: many buffers, long program", 80, 600, 40, 0, 400, 60},
        {"streams = the direct scan on random plans: 64-byte aligned buffers, long program", 50, 800, 64, 1, 512, 60},
        {"streams = the direct scan on random plans: one buffer", 1, 100, 4, 0, 1, 50},
        {"streams = the direct scan on random plans: disjoint-ish buffers in a wide arena", 40, 400, 10, 0, 100000,
         50},
    };
    rng_state = 12345;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        TT_CASE(kinds[k].name) {
            int nwait = 0, nover = 0;
            for (int r = 0; r < kinds[k].reps && !tt_case_failed; r++) {
                tg_class_plan cp;
                random_plan(&cp, kinds[k].nbufs, kinds[k].nsteps, kinds[k].span, kinds[k].maxe, kinds[k].aligned);
                tg_err err = {{0}, 0};
                bool ok = tg_streams_plan(&cp, &err);
                TT_CHECK(ok, "%s", err.msg);
                char label[32];
                snprintf(label, sizeof label, "random plan %d", r);
                if (ok)
                    compare(&cp, label);
                nwait += cp.waits;
                nover += cp.overlapped_bcasts;
                random_free(&cp);
            }
            TT_CHECK(nwait > 0 && nover > 0, "the random plans have %d waits and %d overlaps: compared too little",
                     nwait, nover);
        }
    }
    TT_CASE("streams: a buffer of no elements is an internal error") {
        tg_class_plan cp;
        rng_state = 7;
        random_plan(&cp, 5, 10, 20, 4, 0);
        cp.bufs[3].elems = 0;
        tg_err err = {{0}, 0};
        TT_CHECK(!tg_streams_plan(&cp, &err) && strstr(err.msg, "internal planner error") &&
                     strstr(err.msg, "buffer b3 has 0 elements"),
                 "accepted, or said: %s", err.msg);
        random_free(&cp);
    }
    TT_EXIT();
}
