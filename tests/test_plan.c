/*
 * test_plan.c - properties of the baked schedule, checked over a matrix of
 * meshes and model shapes, each against an independent statement of what
 * must hold:
 *   - memory plan: buffers live at the same time never share bytes, all fit
 *     the arena, offsets are 64-byte aligned;
 *   - broadcast volume per rank per layer equals DESIGN.md section 3's formula
 *     (q-1) * (T*(3C+F)/(d*q*q) + (4*C*C + 2*C*F)/(q*q)) elements;
 *   - collectives match: every member of a group issues the same sequence of
 *     (kind, count, root) on it, and each bcast root is the member with that
 *     local index (otherwise the program deadlocks or mixes data);
 *   - weight shards: for every tensor and depth layer, the ranks' pieces cover
 *     the full tensor exactly once; the residual-stream blocks of all ranks
 *     cover [T, C] exactly once;
 *   - the same spec bakes to the same plan (determinism);
 *   - fused epilogues (fuse.h): the pairs marked are exactly a GEMM and the GeLU step right after it on its
 *     output (fp32; bf16 training's GeLU output and kept pre-activation both bf16), the GeLU step waiting for
 *     nothing, one a layer where the rule allows it (fp32 inference; training on q = 1 and megatron, fp32 and
 *     bf16, where the GEMM does not accumulate) and none elsewhere (bf16 inference; training on q >= 2);
 *     in the backward, the fc2 input-gradient GEMM and the GeLU-gradient step next on its stream on its output,
 *     and each weight-gradient GEMM and the column sum next on its stream of its dY operand (dW's all-reduce may
 *     come between): five a layer in fp32 training on q = 1 and megatron; on q >= 2 the four bias gradients (the
 *     last SUMMA dW GEMM reads the local dY the column sum reads) but no GeLU gradient (the GeLU-gradient step
 *     waits for the reduce of the GEMM's result); none in bf16. No output of a marked pair's kernel step (other
 *     than the GEMM's C) shares arena bytes with the GEMM's A or B (the one call writes it while it reads them).
 *     attention = "cudnn" training: the proj input-gradient GEMM writes the bf16 dO cuDNN reads on q = 1 and
 *     megatron (one a layer; with d = 2 where the attention backward waits for nothing), never on q >= 2.
 *     Row kernels: a residual step and the layernorm steps right after it on its output (whole rows, waiting for
 *     nothing, no output over an input's bytes) marked as one, 2L - 1 a class on q = 1 and megatron (ln2, and ln1
 *     after the layer before), none on q >= 2; not where a layernorm step waits or vs would lie over p.
 *     Layernorm backward: a sums step and its apply step right after it (whole rows, the apply waiting for nothing,
 *     the sums read by it alone, no output over an input's bytes) marked as one row kernel, 2L a class on q = 1 and
 *     megatron training (2L + 1 with ln_f), none on q >= 2; not where the apply step waits, an output would lie over
 *     an input, or another step reads the sums.
 */
#include <stdlib.h>
#include <string.h>

#include "fuse.h"
#include "plan.h"
#include "tt.h"
#include "tt_spec.h"

static void check_memory(const tg_class_plan *rp, const char *label)
{
    for (int a = 0; a < rp->nbufs; a++) {
        const tg_buf *x = &rp->bufs[a];
        TT_CHECK(x->offset % 16 == 0, "%s class (%d,%d) %s offset %lld not aligned", label, rp->i, rp->j, x->name,
                 x->offset);
        TT_CHECK(x->offset >= 0 && x->offset + tg_buf_slots(x) <= rp->arena_elems, "%s class (%d,%d) %s outside arena",
                 label, rp->i, rp->j, x->name);
        for (int b = a + 1; b < rp->nbufs; b++) {
            const tg_buf *y = &rp->bufs[b];
            int live_together = x->first <= y->last && y->first <= x->last;
            int share = x->offset < y->offset + tg_buf_slots(y) && y->offset < x->offset + tg_buf_slots(x);
            TT_CHECK(!(live_together && share), "%s class (%d,%d): %s and %s are live together and overlap", label,
                     rp->i, rp->j, x->name, y->name);
        }
    }
}

/* sequence of collectives this rank issues on group kind g, as a comparable string */
static char *coll_signature(const tg_class_plan *rp, tg_group g)
{
    size_t cap = 64 + (size_t)rp->nsteps * 48, len = 0;
    char *s = malloc(cap);
    s[0] = '\0';
    for (int i = 0; i < rp->nsteps; i++) {
        const tg_step *st = &rp->steps[i];
        if ((st->kind != TG_STEP_BCAST && st->kind != TG_STEP_ALLREDUCE && st->kind != TG_STEP_REDUCE) ||
            st->group != g)
            continue;
        char k = st->kind == TG_STEP_BCAST ? 'B' : st->kind == TG_STEP_REDUCE ? 'R' : st->exact ? 'E' : 'A';
        len += (size_t)snprintf(s + len, cap - len, "%c%lld/%d;", k, st->count, st->root_local);
    }
    return s;
}

static void check_plan(const tg_plan *pl, const tg_class_plan *all, const char *label)
{
    const tg_mesh *m = &pl->mesh;
    const tg_spec *s = &pl->spec;
    long long q = m->q, d = m->d, C = s->hidden, F = s->ffn, T = (long long)s->batch * s->seq;
    long long formula = (q - 1) * (T * (3 * C + F) / (d * q * q) + (4 * C * C + 2 * C * F) / (q * q));
    /* the plan counts bytes: a broadcast element is 2 bytes in bf16 (docs/BF16.md), every reduction 4 */
    long long eb = s->dtype == TG_BF16 ? 2 : 4;
    for (int r = 0; r < m->p; r++) {
        const tg_class_plan *rp = &all[tg_class_of(pl, r)];
        tg_coord co = tg_mesh_coord(m, r);
        check_memory(rp, label);
        long long recv = 0, sent = 0;
        for (int g = 0; g < TG_NGROUPS; g++) {
            recv += rp->bcast_recv[g];
            sent += rp->bcast_sent[g];
        }
        TT_CHECK(recv == eb * formula * s->layers, "%s rank %d: bcast recv %lld bytes, formula %lld x %lld x %d layers",
                 label, r, recv, eb, formula, s->layers);
        if (s->mode == TG_TRAIN) {
            /* backward (docs/TRAINING.md): ABT and ATB broadcast the same blocks as the forward,
             * reduce as much as they broadcast; dW all-reduced over dep, the 9C+F bias and layernorm
             * gradient columns over coldep */
            long long brecv = 0, rsent = 0, rrecv = 0;
            for (int g = 0; g < TG_NGROUPS; g++) {
                brecv += rp->bwd_bcast_recv[g];
                rsent += rp->bwd_reduce_sent[g];
                rrecv += rp->bwd_reduce_recv[g];
            }
            TT_CHECK(brecv == eb * formula * s->layers, "%s rank %d: backward bcast recv %lld, formula %lld x %d", label,
                     r, brecv, formula, s->layers);
            TT_CHECK(rsent == 4 * formula * s->layers && rrecv == 4 * formula * s->layers,
                     "%s rank %d: backward reduce sent %lld recv %lld, formula %lld x %d", label, r, rsent, rrecv,
                     formula, s->layers);
            long long dep = d > 1 ? (4 * C * C + 2 * C * F) / (q * q) : 0, coldep = q * d > 1 ? (9 * C + F) / q : 0;
            TT_CHECK(rp->bwd_allreduce[TG_DEP] == 4 * dep * s->layers, "%s rank %d: dep all-reduce %lld, want 4 x %lld",
                     label, r, rp->bwd_allreduce[TG_DEP], dep * s->layers);
            TT_CHECK(rp->bwd_allreduce[TG_COLDEP] == 4 * coldep * s->layers,
                     "%s rank %d: coldep all-reduce %lld, want 4 x %lld", label, r, rp->bwd_allreduce[TG_COLDEP],
                     coldep * s->layers);
            TT_CHECK(rp->bwd_allreduce[TG_ROW] == (q > 1 ? 4 * 4LL * pl->R * s->layers : 0),
                     "%s rank %d: row all-reduce in the backward %lld", label, r, rp->bwd_allreduce[TG_ROW]);
        }
        /* every element a member receives, some root sent once per receiver group: sent*(q-1) == recv summed */
        (void)sent;
        /* collectives match within each group, roots are the named members */
        for (int g = 0; g < TG_NGROUPS; g++) {
            char *mine = coll_signature(rp, (tg_group)g);
            for (int l = 0; l < tg_group_size(m, (tg_group)g); l++) {
                int other = tg_group_member(m, (tg_group)g, co, l);
                char *theirs = coll_signature(&all[tg_class_of(pl, other)], (tg_group)g);
                TT_CHECK(strcmp(mine, theirs) == 0, "%s: ranks %d and %d disagree on %s collectives", label, r,
                         other, tg_group_name((tg_group)g));
                free(theirs);
            }
            free(mine);
        }
        for (int i = 0; i < rp->nsteps; i++) {
            const tg_step *st = &rp->steps[i];
            if (st->kind != TG_STEP_BCAST)
                continue;
            int me_local = tg_group_local(m, st->group, co);
            TT_CHECK(st->is_root == (me_local == st->root_local), "%s rank %d step %d: root flag", label, r, i);
            /* the root's coordinates: the same group, local index root_local */
            tg_coord rc = tg_mesh_coord(m, tg_step_root(pl, co, st));
            TT_CHECK(tg_group_color(m, st->group, rc) == tg_group_color(m, st->group, co) &&
                         tg_group_local(m, st->group, rc) == st->root_local,
                     "%s rank %d step %d: global root %d", label, r, i, tg_step_root(pl, co, st));
        }
    }
    /* overlap: a SUMMA broadcast of step t >= 1 into a receive buffer never shares arena bytes
     * with what the GEMM of step t-1 reads or writes, so a backend can run them at once */
    for (int r = 0; r < m->p; r++) {
        const tg_class_plan *rp = &all[tg_class_of(pl, r)];
        for (int i = 0; i < rp->nsteps; i++) {
            const tg_step *st = &rp->steps[i];
            if (st->kind != TG_STEP_BCAST || st->is_root || st->t < 1)
                continue;
            const tg_step *g = NULL;
            for (int k = i - 1; k >= 0 && !g; k--)
                if (rp->steps[k].kind == TG_STEP_GEMM && rp->steps[k].t == st->t - 1 &&
                    rp->steps[k].layer == st->layer && !strcmp(rp->steps[k].op, st->op))
                    g = &rp->steps[k];
            TT_CHECK(g != NULL, "%s rank %d step %d: no previous GEMM", label, r, i);
            if (!g)
                continue;
            const tg_buf *x = &rp->bufs[st->buf[0]];
            for (int k = 0; k < 3; k++) {
                const tg_buf *y = &rp->bufs[g->buf[k]];
                int share = x->offset < y->offset + tg_buf_slots(y) && y->offset < x->offset + tg_buf_slots(x);
                TT_CHECK(!share, "%s rank %d step %d: %s shares bytes with %s of the previous GEMM", label, r, i,
                         x->name, y->name);
            }
        }
    }
    /* weight shards: per tensor and depth layer, coverage exactly once */
    const tg_class_plan *r0 = &all[0];
    for (int pi = 0; pi < r0->nparams; pi++) {
        const tg_param *p0 = &r0->params[pi];
        long long rows = p0->ndim == 1 ? 1 : p0->full[0], cols = p0->ndim == 1 ? p0->full[0] : p0->full[1];
        for (int k = 0; k < m->d; k++) {
            unsigned char *cover = calloc((size_t)(rows * cols), 1);
            for (int r = 0; r < m->p; r++) {
                const tg_class_plan *rp = &all[tg_class_of(pl, r)];
                tg_coord co = tg_mesh_coord(m, r);
                if (co.k != k)
                    continue;
                const tg_param *p = &rp->params[pi];
                TT_CHECK(strcmp(p->name, p0->name) == 0, "param order differs");
                if (p0->ndim == 1 && co.i != 0)
                    continue; /* vectors are replicated over i: check one row of the mesh */
                for (int c = 0; c < p->npieces; c++)
                    for (int a = 0; a < p->piece[c].nr; a++)
                        for (int b = 0; b < p->piece[c].nc; b++)
                            cover[(p->piece[c].r0 + a) * cols + p->piece[c].c0 + b]++;
            }
            int bad = 0;
            for (long long e = 0; e < rows * cols; e++)
                bad += cover[e] != 1;
            TT_CHECK(bad == 0, "%s: %s depth %d: %d elements not covered exactly once", label, p0->name, k, bad);
            free(cover);
        }
    }
    /* every class runs the same collectives and GEMMs (each is a root once per SUMMA): the same elements
     * moved per group kind and direction, the same flops and steps; the grouped --summary relies on it */
    for (int c = 1; c < tg_plan_nclasses(pl); c++) {
        const tg_class_plan *a = &all[0], *b = &all[c];
        TT_CHECK(a->nsteps == b->nsteps && a->flops == b->flops, "%s: class %d: %d steps %lld flops, class 0: %d %lld",
                 label, c, b->nsteps, b->flops, a->nsteps, a->flops);
        TT_CHECK(!memcmp(a->bcast_recv, b->bcast_recv, sizeof a->bcast_recv) &&
                     !memcmp(a->bcast_sent, b->bcast_sent, sizeof a->bcast_sent) &&
                     !memcmp(a->allreduce, b->allreduce, sizeof a->allreduce) &&
                     !memcmp(a->bwd_bcast_recv, b->bwd_bcast_recv, sizeof a->bwd_bcast_recv) &&
                     !memcmp(a->bwd_bcast_sent, b->bwd_bcast_sent, sizeof a->bwd_bcast_sent) &&
                     !memcmp(a->bwd_allreduce, b->bwd_allreduce, sizeof a->bwd_allreduce) &&
                     !memcmp(a->bwd_reduce_recv, b->bwd_reduce_recv, sizeof a->bwd_reduce_recv) &&
                     !memcmp(a->bwd_reduce_sent, b->bwd_reduce_sent, sizeof a->bwd_reduce_sent),
                 "%s: class %d moves other elements than class 0", label, c);
    }
    /* residual stream blocks partition [T, C] */
    unsigned char *cover = calloc((size_t)(T * C), 1);
    for (int r = 0; r < m->p; r++) {
        tg_coord co = tg_mesh_coord(m, r);
        for (int a = 0; a < pl->R; a++)
            for (int b = 0; b < pl->Cq; b++)
                cover[(tg_io_r0(pl, co) + a) * C + tg_io_c0(pl, co) + b]++;
    }
    int bad = 0;
    for (long long e = 0; e < T * C; e++)
        bad += cover[e] != 1;
    TT_CHECK(bad == 0, "%s: residual blocks: %d elements not covered exactly once", label, bad);
    free(cover);
}

/* The megatron scheme: p classes, one per rank; every sharded tensor covered exactly once by the ranks' pieces and
 * every whole one held by every rank; the same all-reduces over world on every rank, 2 per block forward and 2
 * backward, each of T*C elements and exact; no other collective. With a vocabulary V (plan_megatron_lm.c): wte's
 * real rows covered once (rank r: rows r*Vq.., the pad never in a piece), wpe and ln_f on every rank, the vocab
 * blocks of the loss steps tiling [0, V), and the LM's all-reduces: T*C (embedding), T (max, not exact), 2T (sums)
 * forward, T*C (dX) backward. */
/* A backward pair as fuse.h states the rule: dg = dY @ W^T, then dg *= GeLU'(u) on its output; or dW = X^T @ dY,
 * then the column sums of its dY */
static bool bwd_pair(const tg_class_plan *rp, const tg_step *s, const tg_step *k)
{
    bool f = rp->bufs[s->buf[0]].dtype == TG_BUF_F32 && rp->bufs[s->buf[1]].dtype == TG_BUF_F32 &&
             rp->bufs[s->buf[2]].dtype == TG_BUF_F32 && k->wait < 0;
    /* bf16 training: dY and W2 bf16, dg fp32 read by the GeLU step only (the call never writes it), du and u bf16 */
    if (s->epi == TG_EPI_DGELU && rp->bufs[s->buf[0]].dtype == TG_BUF_BF16)
        return k->kind == TG_STEP_GELU_BWD && k->wait < 0 && !s->transa && s->transb && s->beta == 0.0f &&
               s->buf[2] == k->buf[0] && rp->bufs[s->buf[1]].dtype == TG_BUF_BF16 &&
               rp->bufs[s->buf[2]].dtype == TG_BUF_F32 && rp->bufs[s->buf[2]].last == s->fused && k->buf[2] >= 0 &&
               rp->bufs[k->buf[1]].dtype == TG_BUF_BF16 && rp->bufs[k->buf[2]].dtype == TG_BUF_BF16 &&
               s->n % 8 == 0 && s->ldc == s->n;
    if (s->epi == TG_EPI_DGELU)
        return f && k->kind == TG_STEP_GELU_BWD && !s->transa && s->transb && s->buf[2] == k->buf[0] &&
               s->n % 8 == 0 && s->ldc == s->n;
    return f && s->epi == TG_EPI_BGRAD && k->kind == TG_STEP_COLSUM && s->transa && !s->transb &&
           s->buf[1] == k->buf[0] && k->rows == s->k && k->cols == s->n && s->ldb == s->n;
}

/* The fused call writes the kernel step's outputs while the GEMM reads A and B: a buffer the kernel step writes that
 * shares arena bytes with A or B would be overwritten (or read half-written) by that one call (on the CPU, and in
 * the emulation, which computes the product before it writes, it would not show). */
static bool outputs_clear(const tg_class_plan *rp, const tg_step *s, const tg_step *k, char *what, size_t cap)
{
    for (int x = 0; x < TG_STEP_MAXBUF; x++) { /* the bf16 dO (slot 6) is all the call writes of an attention backward */
        if (k->buf[x] < 0 || !(k->acc[x] & TG_ACC_W) || k->buf[x] == s->buf[2] ||
            (k->kind == TG_STEP_ATTN_BWD && x != 6))
            continue;
        const tg_buf *o = &rp->bufs[k->buf[x]];
        for (int y = 0; y < 2; y++) {
            const tg_buf *in = &rp->bufs[s->buf[y]];
            if (o->offset < in->offset + tg_buf_slots(in) && in->offset < o->offset + tg_buf_slots(o)) {
                snprintf(what, cap, "%s (slot %d of the %s step) shares arena bytes with %s, the GEMM's %c", o->name,
                         x, tg_step_kind_name(k->kind), in->name, y ? 'B' : 'A');
                return false;
            }
        }
    }
    return true;
}

static int count_bwd(const tg_class_plan *rp)
{
    int n = 0;
    for (int i = 0; i < rp->nsteps; i++)
        n += rp->steps[i].epi == TG_EPI_DGELU || rp->steps[i].epi == TG_EPI_BGRAD;
    return n;
}

/* Do the arena bytes of buffers a and b meet? */
static bool bytes_meet(const tg_class_plan *rp, int a, int b)
{
    const tg_buf *x = &rp->bufs[a], *y = &rp->bufs[b];
    return x->offset < y->offset + tg_buf_slots(y) && y->offset < x->offset + tg_buf_slots(x);
}

/* Row kernels (fuse.h): each marked residual step (TG_EPI_LN) is followed right away by the LN_SQDEV and LN_APPLY
 * steps of its output xo and row sums rs over whole rows (cols = hidden), both marked with it, waiting for nothing, on
 * its stream; no output of the three (xo when out of place, rs, vs, y) shares arena bytes with an input (x, p,
 * bias, gamma, beta): the one kernel writes a row's outputs while later rows are still to be read. A marked
 * LN_ROWSUM step (a layernorm with no residual add before it: the first ln1, ln_f) likewise, with x for xo and no
 * p or bias. Every class marks `want` such steps, and no layernorm step is marked but with one. */
static void check_rows(const tg_plan *pl, const tg_class_plan *all, const char *label, int want)
{
    for (int c = 0; c < tg_plan_nclasses(pl); c++) {
        const tg_class_plan *rp = &all[c];
        int n = 0;
        for (int i = 0; i < rp->nsteps; i++) {
            const tg_step *s = &rp->steps[i];
            if ((s->kind == TG_STEP_LN_SQDEV || s->kind == TG_STEP_LN_APPLY) && s->fused >= 0)
                TT_CHECK(s->fused == i - (s->kind == TG_STEP_LN_SQDEV ? 1 : 2) && rp->steps[s->fused].epi == TG_EPI_LN,
                         "%s class %d: layernorm step %d marked with step %d", label, c, i, s->fused);
            if (s->epi != TG_EPI_LN)
                continue;
            n++;
            const bool ln = s->kind == TG_STEP_LN_ROWSUM; /* no residual: x, rs in slots 0, 1 */
            bool head = (s->kind == TG_STEP_RESID_ROWSUM || ln) && s->buf[ln ? 1 : 3] >= 0 && i + 2 < rp->nsteps &&
                        s->fused == i + 2;
            TT_CHECK(head, "%s class %d: step %d (%s) marked as a row kernel to %d", label, c, i,
                     tg_step_kind_name(s->kind), s->fused);
            if (!head)
                continue;
            const tg_step *q = &rp->steps[i + 1], *a = &rp->steps[i + 2];
            int xo = !ln && s->buf[4] >= 0 ? s->buf[4] : s->buf[0], rs = s->buf[ln ? 1 : 3];
            TT_CHECK(q->kind == TG_STEP_LN_SQDEV && a->kind == TG_STEP_LN_APPLY && q->fused == i && a->fused == i &&
                         q->buf[0] == xo && q->buf[1] == rs && a->buf[0] == xo && a->buf[1] == rs &&
                         a->buf[2] == q->buf[2] && s->cols == pl->spec.hidden && q->cols == s->cols &&
                         a->cols == s->cols && q->wait < 0 && a->wait < 0 && q->stream == s->stream &&
                         a->stream == s->stream,
                     "%s class %d: residual step %d and its layernorm steps break the row-kernel rule", label, c, i);
            const int out[4] = {xo == s->buf[0] ? -1 : xo, rs, q->buf[2], a->buf[5]};
            const int in[5] = {s->buf[0], ln ? -1 : s->buf[1], ln ? -1 : s->buf[2], a->buf[3], a->buf[4]};
            for (int o = 0; o < 4; o++)
                for (int k = 0; out[o] >= 0 && k < 5; k++)
                    if (in[k] >= 0)
                    TT_CHECK(!bytes_meet(rp, out[o], in[k]), "%s class %d: row kernel %d writes %s over %s", label, c,
                             i, rp->bufs[out[o]].name, rp->bufs[in[k]].name);
        }
        TT_CHECK(n == want, "%s class %d: %d row kernels, want %d", label, c, n, want);
    }
}

/* The layernorm backward's row kernels (fuse.h) of class c: each marked sums step (TG_EPI_LNB) is followed right away
 * by its apply step, marked with it, on the same dy, x, rs, vs, gamma and sums over whole rows, waiting for nothing,
 * on its stream, the sums read by the apply step last; no output (g, g16, dgamma, dbeta) shares arena bytes with an
 * input (dy, x, rs, vs, gamma), nor g or g16 with dgamma or dbeta; no apply step is marked but with one. Returns
 * how many. */
static int count_lnb(const tg_plan *pl, const tg_class_plan *rp, const char *label, int c)
{
    int n = 0;
    for (int i = 0; i < rp->nsteps; i++) {
        const tg_step *s = &rp->steps[i];
        if (s->kind == TG_STEP_LN_BWD_APPLY && s->fused >= 0)
            TT_CHECK(s->fused == i - 1 && rp->steps[s->fused].epi == TG_EPI_LNB,
                     "%s class %d: layernorm-backward apply step %d marked with step %d", label, c, i, s->fused);
        if (s->epi != TG_EPI_LNB)
            continue;
        n++;
        bool head = s->kind == TG_STEP_LN_BWD_SUMS && i + 1 < rp->nsteps && s->fused == i + 1;
        TT_CHECK(head, "%s class %d: step %d (%s) marked as a layernorm-backward row kernel to %d", label, c, i,
                 tg_step_kind_name(s->kind), s->fused);
        if (!head)
            continue;
        const tg_step *a = &rp->steps[i + 1];
        bool same = true;
        for (int k = 0; k < 6; k++)
            same = same && a->buf[k] == s->buf[k];
        TT_CHECK(a->kind == TG_STEP_LN_BWD_APPLY && a->fused == i && same && s->cols == pl->spec.hidden &&
                     a->cols == s->cols && a->rows == s->rows && a->wait < 0 && a->stream == s->stream &&
                     rp->bufs[s->buf[5]].last == i + 1,
                 "%s class %d: layernorm-backward steps %d, %d break the row-kernel rule", label, c, i, i + 1);
        const int out[4] = {a->buf[6], a->buf[7], s->buf[6], s->buf[7]};
        const int in[7] = {s->buf[0], s->buf[1], s->buf[2], s->buf[3], s->buf[4], s->buf[6], s->buf[7]};
        for (int o = 0; o < 4; o++)
            for (int k = 0; out[o] >= 0 && k < (o < 2 ? 7 : 5); k++)
                TT_CHECK(!bytes_meet(rp, out[o], in[k]), "%s class %d: layernorm-backward row kernel %d writes %s over %s",
                         label, c, i, rp->bufs[out[o]].name, rp->bufs[in[k]].name);
    }
    return n;
}

/* Every class of `all` marks `want` layernorm-backward row kernels (count_lnb). */
static void check_lnb(const tg_plan *pl, const tg_class_plan *all, const char *label, int want)
{
    for (int c = 0; c < tg_plan_nclasses(pl); c++) {
        int n = count_lnb(pl, &all[c], label, c);
        TT_CHECK(n == want, "%s class %d: %d layernorm-backward row kernels, want %d", label, c, n, want);
    }
}

/* Every class of `all` marks `want` GEMM + GeLU pairs and from bwd_min to bwd_max backward pairs, each as fuse.h
 * states the rule. */
static void check_fusion(const tg_plan *pl, const tg_class_plan *all, const char *label, int want, int bwd_min,
                         int bwd_max)
{
    for (int c = 0; c < tg_plan_nclasses(pl); c++) {
        const tg_class_plan *rp = &all[c];
        int pairs = 0, bwd = 0;
        for (int i = 0; i < rp->nsteps; i++) {
            const tg_step *s = &rp->steps[i];
            if (s->epi == TG_EPI_LN || (s->kind != TG_STEP_GEMM && s->fused >= 0 &&
                                        rp->steps[s->fused].epi == TG_EPI_LN))
                continue; /* a row kernel: check_rows */
            if (s->epi == TG_EPI_LNB || (s->kind != TG_STEP_GEMM && s->fused >= 0 &&
                                         rp->steps[s->fused].epi == TG_EPI_LNB))
                continue; /* a layernorm backward's row kernel: check_lnb */
            if (s->kind != TG_STEP_GEMM || s->epi == TG_EPI_NONE) {
                TT_CHECK(s->kind == TG_STEP_GEMM || s->fused < 0 || rp->steps[s->fused].fused == i,
                         "%s class %d step %d: fused with %d, which is not fused with it", label, c, i, s->fused);
                continue;
            }
            const tg_step *k = &rp->steps[s->fused];
            if (s->epi == TG_EPI_D_BF16) /* check_dout16 */
                continue;
            bool between = s->fused > i; /* only steps of the other stream between the two */
            for (int j = i + 1; j < s->fused && between; j++)
                between = rp->steps[j].stream != s->stream;
            TT_CHECK(between && k->fused == i && k->stream == s->stream, "%s class %d: gemm %d fused with %d", label,
                     c, i, s->fused);
            char what[256] = "";
            TT_CHECK(outputs_clear(rp, s, k, what, sizeof what), "%s class %d: gemm %d fused with %d: %s", label, c, i,
                     s->fused, what);
            if (s->epi == TG_EPI_DGELU || s->epi == TG_EPI_BGRAD) {
                bwd++;
                TT_CHECK(bwd_pair(rp, s, k), "%s class %d: gemm %d epilogue %d and its %s step break fuse.h's rule",
                         label, c, i, s->epi, tg_step_kind_name(k->kind));
                continue;
            }
            pairs++;
            TT_CHECK(s->buf[2] == k->buf[0] && k->wait < 0 && !s->transa && !s->transb &&
                         rp->bufs[s->buf[2]].dtype == TG_BUF_F32,
                     "%s class %d: gemm %d and step %d are not one fp32 output without a wait", label, c, i, s->fused);
            /* cuBLASLt reads the bias in D's type: fp32 programs' D (the GeLU output, and u kept in C) fp32 with the
             * fp32 bias; bf16 programs' D the bf16 GeLU output (u the bf16 aux in training) with the bf16 bias, the
             * GEMM not accumulating and its fp32 C read by the GeLU step only (the fused call never writes it) */
            if (pl->spec.dtype == TG_BF16) {
                const tg_buf *bias = &rp->bufs[k->buf[1]], *g = &rp->bufs[k->buf[2]];
                TT_CHECK(k->kind == TG_STEP_GELU_SAVE && s->beta == 0.0f &&
                             s->epi == (k->buf[3] >= 0 ? TG_EPI_GELU_AUX_BIAS : TG_EPI_GELU_BIAS) &&
                             (pl->spec.mode == TG_TRAIN) == (k->buf[3] >= 0),
                         "%s class %d: gemm %d epilogue %d for a bf16 %s step (beta %g)", label, c, i, s->epi,
                         tg_step_kind_name(k->kind), (double)s->beta);
                TT_CHECK(bias->dtype == TG_BUF_BF16 && g->dtype == TG_BUF_BF16 &&
                             (k->buf[3] < 0 || rp->bufs[k->buf[3]].dtype == TG_BUF_BF16) &&
                             rp->bufs[s->buf[2]].last == s->fused && !rp->bufs[s->buf[2]].persistent,
                         "%s class %d: gemm %d and step %d: not a bf16 bias, GeLU output and u, or h read later", label,
                         c, i, s->fused);
                continue;
            }
            TT_CHECK((s->epi == TG_EPI_GELU_BIAS && k->kind == TG_STEP_BIAS_GELU) ||
                         (s->epi == TG_EPI_GELU_AUX_BIAS && k->kind == TG_STEP_GELU_SAVE && s->beta == 0.0f),
                     "%s class %d: gemm %d epilogue %d for a %s step (beta %g)", label, c, i, s->epi,
                     tg_step_kind_name(k->kind), (double)s->beta);
            if (k->kind == TG_STEP_GELU_SAVE)
                TT_CHECK(k->buf[3] < 0 && rp->bufs[k->buf[2]].dtype == TG_BUF_F32 &&
                             rp->bufs[k->buf[1]].dtype == TG_BUF_F32,
                         "%s class %d: gemm %d and step %d: a GeLU output that is not fp32", label, c, i, s->fused);
        }
        TT_CHECK(pairs == want, "%s class %d: %d fused GEMMs, want %d", label, c, pairs, want);
        TT_CHECK(bwd >= bwd_min && bwd <= bwd_max, "%s class %d: %d backward fused GEMMs, want %d to %d", label, c,
                 bwd, bwd_min, bwd_max);
    }
}

/* attention = "cudnn" training: the proj input-gradient GEMM dO = dY @ Wo^T writes the bf16 dO its attention backward
 * reads (TG_EPI_D_BF16) where that GEMM is the last writer of dO and does not accumulate (q = 1, megatron: between
 * want_min and want_max a class), the attention-backward step the next step on its stream, waiting for nothing, its
 * fp32 dO read by it alone, the bf16 copy pinned to the GEMM so its bytes are not A's or B's; never on q >= 2 (a
 * reduce over the row writes dO last). Every other pair still follows check_fusion's rule. */
static void check_dout16(const tg_plan *pl, const tg_class_plan *all, const char *label, int want_min, int want_max)
{
    for (int c = 0; c < tg_plan_nclasses(pl); c++) {
        const tg_class_plan *rp = &all[c];
        int n = 0;
        for (int i = 0; i < rp->nsteps; i++) {
            const tg_step *s = &rp->steps[i];
            if (s->kind != TG_STEP_GEMM || s->epi != TG_EPI_D_BF16)
                continue;
            n++;
            const tg_step *k = &rp->steps[s->fused];
            bool between = s->fused > i;
            for (int j = i + 1; j < s->fused && between; j++)
                between = rp->steps[j].stream != s->stream;
            const tg_buf *d = &rp->bufs[s->buf[2]], *d16 = k->buf[6] >= 0 ? &rp->bufs[k->buf[6]] : NULL;
            TT_CHECK(between && k->fused == i && k->kind == TG_STEP_ATTN_BWD && k->cudnn && k->wait < 0 &&
                         k->stream == s->stream && !strcmp(s->op, "proj") && !s->transa && s->transb &&
                         s->beta == 0.0f && s->buf[2] == k->buf[1] && d->dtype == TG_BUF_F32 && d->last == s->fused &&
                         d16 && d16->dtype == TG_BUF_BF16 && d16->elems == d->elems && d16->first <= i &&
                         rp->bufs[s->buf[0]].dtype == TG_BUF_BF16 && rp->bufs[s->buf[1]].dtype == TG_BUF_BF16,
                     "%s class %d: gemm %d (%s) and step %d break the bf16-dO rule", label, c, i, s->op, s->fused);
            char what[256] = "";
            TT_CHECK(outputs_clear(rp, s, k, what, sizeof what), "%s class %d: gemm %d: %s", label, c, i, what);
        }
        TT_CHECK(n >= want_min && n <= want_max, "%s class %d: %d proj GEMMs write the bf16 dO, want %d to %d", label,
                 c, n, want_min, want_max);
    }
}

/* The pre-activation u that GeLU's backward reads (docs/BF16.md): written by the layer's GELU_SAVE step, read by its
 * GELU_BWD step; bf16 in a bf16 plan (a buffer of its own: the GEMM's fp32 output h is only read), h itself in fp32.
 * One GELU_SAVE and one GELU_BWD a layer. */
static void check_gelu_u(const tg_plan *pl, const tg_class_plan *all, const char *label)
{
    bool bf16 = pl->spec.dtype == TG_BF16;
    for (int c = 0; c < tg_plan_nclasses(pl); c++) {
        const tg_class_plan *rp = &all[c];
        int saves = 0, bwds = 0;
        for (int i = 0; i < rp->nsteps; i++) {
            const tg_step *s = &rp->steps[i];
            if (s->kind != TG_STEP_GELU_SAVE)
                continue;
            saves++;
            int u = bf16 ? s->buf[3] : s->buf[0];
            TT_CHECK(u >= 0 && rp->bufs[u].dtype == (bf16 ? TG_BUF_BF16 : TG_BUF_F32) &&
                         (bf16 ? s->acc[0] == TG_ACC_R && s->acc[3] == TG_ACC_W && u != s->buf[0] : s->buf[3] < 0),
                     "%s class %d: gelu_save step %d keeps u in buffer %d (%s), h %d", label, c, i, u,
                     u >= 0 && rp->bufs[u].dtype == TG_BUF_BF16 ? "bf16" : "fp32", s->buf[0]);
            for (int j = i + 1; j < rp->nsteps; j++)
                if (rp->steps[j].kind == TG_STEP_GELU_BWD && rp->steps[j].layer == s->layer) {
                    bwds++;
                    TT_CHECK(rp->steps[j].buf[1] == u, "%s class %d: gelu_bwd step %d reads %d, not u %d", label, c,
                             j, rp->steps[j].buf[1], u);
                }
        }
        TT_CHECK(saves == pl->spec.layers && bwds == saves, "%s class %d: %d gelu_save, %d gelu_bwd for %d layers",
                 label, c, saves, bwds, pl->spec.layers);
    }
}

static void check_megatron(int p, int train, int V, int align)
{
    int L = 2, C = 48, F = 192, T = 8 * 6, Vq = V ? ((V + p - 1) / p + align - 1) / align * align : 0;
    tg_spec s = tt_spec_megatron(p, L, C, 12, F, 8, 6, train);
    s.vocab = V;
    s.vocab_align = align;
    s.positions = V ? 10 : 0;
    tg_plan pl;
    tg_class_plan *all;
    tg_err err = {{0}, 0};
    tg_plan_init(&s, &pl);
    TT_CHECK(tg_plan_nclasses(&pl) == p && pl.mesh.p == p, "%d classes for p = %d", tg_plan_nclasses(&pl), p);
    bool ok = tg_plan_all(&pl, &all, &err);
    TT_CHECK(ok, "plan failed: %s", err.msg);
    if (!ok)
        return;
    TT_CHECK(pl.Vq == Vq, "p=%d vocab_align %d: Vq %d, want %d", p, align, pl.Vq, Vq);
    for (int r = 0; r < p; r++) {
        tg_coord co = tg_mesh_coord(&pl.mesh, r);
        TT_CHECK(tg_class_of(&pl, r) == r && co.i == r && co.j == 0 && co.k == 0 && tg_mesh_rank(&pl.mesh, co) == r,
                 "rank %d: class %d, (%d,%d,%d)", r, tg_class_of(&pl, r), co.i, co.j, co.k);
        TT_CHECK(tg_group_size(&pl.mesh, TG_WORLD) == p && tg_group_local(&pl.mesh, TG_WORLD, co) == r &&
                     tg_group_member(&pl.mesh, TG_WORLD, co, p - 1) == p - 1,
                 "world group of rank %d", r);
        const tg_class_plan *rp = &all[r];
        int ar[2] = {0, 0};
        long long lm[2] = {0, 0};
        for (int i = 0; i < rp->nsteps; i++) {
            const tg_step *st = &rp->steps[i];
            if (st->kind == TG_STEP_BCAST || st->kind == TG_STEP_REDUCE)
                TT_CHECK(0, "p=%d rank %d step %d: a %s", p, r, i, tg_step_kind_name(st->kind));
            if (st->kind == TG_STEP_LM_ROWMAX || st->kind == TG_STEP_LM_SUMS || st->kind == TG_STEP_LM_DLOGITS ||
                st->kind == TG_STEP_EMBED || st->kind == TG_STEP_EMBED_BWD) {
                int nv = V - r * Vq < 0 ? 0 : V - r * Vq > Vq ? Vq : V - r * Vq;
                TT_CHECK(st->vocab0 == r * Vq && st->nvalid == nv && st->rows == T, "p=%d rank %d step %d %s: vocab0 "
                         "%d nvalid %d rows %d", p, r, i, tg_step_kind_name(st->kind), st->vocab0, st->nvalid, st->rows);
            }
            if (st->kind != TG_STEP_ALLREDUCE)
                continue;
            if (st->layer == TG_LAYER_EMBED || st->layer == TG_LAYER_HEAD) {
                TT_CHECK(st->group == TG_WORLD && st->group_size == p && (st->exact || (st->maxop && st->count == T)),
                         "p=%d rank %d step %d: LM all-reduce group %d exact %d", p, r, i, st->group, st->exact);
                lm[st->phase == TG_PHASE_BWD] += st->count;
                continue;
            }
            TT_CHECK(st->group == TG_WORLD && st->group_size == p && st->exact && st->count == (long long)T * C,
                     "p=%d rank %d step %d: group %d size %d exact %d count %lld", p, r, i, st->group, st->group_size,
                     st->exact, st->count);
            ar[st->phase == TG_PHASE_BWD]++;
        }
        int want = p > 1 ? 2 * L : 0;
        TT_CHECK(ar[0] == want && ar[1] == (train ? want : 0), "p=%d rank %d: %d forward, %d backward all-reduces",
                 p, r, ar[0], ar[1]);
        long long lm_fwd = V && p > 1 ? (long long)T * C + 3 * T : 0, lm_bwd = V && p > 1 && train ? (long long)T * C : 0;
        TT_CHECK(lm[0] == lm_fwd && lm[1] == lm_bwd, "p=%d rank %d: LM all-reduces %lld forward, %lld backward", p, r,
                 lm[0], lm[1]);
        TT_CHECK(rp->allreduce[TG_WORLD] == 4 * ((long long)want * T * C + lm_fwd), "p=%d planned forward bytes %lld", p,
                 rp->allreduce[TG_WORLD]);
        TT_CHECK(rp->nsteps == all[0].nsteps && rp->flops == all[0].flops, "p=%d rank %d: other steps or flops", p, r);
    }
    for (int pi = 0; pi < all[0].nparams; pi++) {
        const tg_param *p0 = &all[0].params[pi];
        long long rows = p0->ndim == 1 ? 1 : p0->full[0], cols = p0->ndim == 1 ? p0->full[0] : p0->full[1];
        unsigned char *cover = calloc((size_t)(rows * cols), 1);
        for (int r = 0; r < p; r++) {
            const tg_param *pr = &all[r].params[pi];
            TT_CHECK(strcmp(pr->name, p0->name) == 0 && pr->replica == p0->replica, "param order differs");
            for (int c = 0; c < pr->npieces; c++)
                for (int a = 0; a < pr->piece[c].nr; a++)
                    for (int b = 0; b < pr->piece[c].nc; b++)
                        cover[(pr->piece[c].r0 + a) * cols + pr->piece[c].c0 + b]++;
        }
        if (!strcmp(p0->name, "wte.weight"))
            TT_CHECK(p0->replica == -1 && all[0].bufs[p0->buf].rows == Vq && all[0].bufs[p0->buf].cols == C,
                     "p=%d wte [%d, %d] replica %d", p, all[0].bufs[p0->buf].rows, all[0].bufs[p0->buf].cols,
                     p0->replica);
        if (!strcmp(p0->name, "wpe.weight") || !strncmp(p0->name, "ln_f.", 5))
            TT_CHECK(p0->replica == TG_WORLD, "p=%d %s: replica %d", p, p0->name, p0->replica);
        int want = p0->replica == TG_WORLD ? p : 1, bad = 0;
        for (long long e = 0; e < rows * cols; e++)
            bad += cover[e] != want;
        TT_CHECK(bad == 0, "p=%d %s: %d elements not covered %d times", p, p0->name, bad, want);
        free(cover);
    }
    char ml[48];
    snprintf(ml, sizeof ml, "megatron p=%d%s", p, train ? " training" : "");
    /* one GEMM a layer's fc1: beta 0, so training fuses too; and in training DGELU and four bias gradients */
    check_fusion(&pl, all, ml, L, train ? 5 * L : 0, train ? 5 * L : 0);
    /* whole rows: every layernorm, ln2 and ln1 after the layer before with the residual, the first ln1 and ln_f without */
    check_rows(&pl, all, ml, 2 * L + (pl.spec.vocab > 0));
    check_lnb(&pl, all, ml, train ? 2 * L + (V ? 1 : 0) : 0); /* whole rows: ln1, ln2 and ln_f's backward */
    tg_plan_all_free(&pl, all);
}

/* Pipeline stages (plan.h tg_plan_stage): each stage's class program holds exactly its own blocks' shards, in the
 * order of the whole program's; its steps name only those blocks (the optimizer aside); its first step reads x and
 * its output y is a buffer of its own; the stages' forward and backward flops add up to the whole stack's; the
 * stash is what one micro-batch's forward keeps for its backward, times the proved schedule's stash count. */
static void check_stages(int q, int d, int L, int n0, int m, tg_pipe_sched sched)
{
    char label[96];
    snprintf(label, sizeof label, "[%d,%d,%d] x 2 stages of %d+%d blocks, m=%d %s", q, q, d, n0, L - n0, m,
             sched == TG_PIPE_GPIPE ? "gpipe" : "1f1b");
    tg_spec s = tt_spec(q, d, L, 48, 12, 192, 4, 2 * q * d * m, 1);
    s.microbatches = m;
    tg_plan whole, st;
    tg_err err = {{0}, 0};
    tg_plan_init(&s, &whole);
    s.pp = 2;
    s.stage_layers[0] = n0;
    s.stage_layers[1] = L - n0;
    s.schedule = sched;
    tg_plan_init(&s, &st);
    for (int c = 0; c < q * q; c++) {
        tg_class_plan w, sp[2];
        bool ok = tg_plan_class(&whole, c / q, c % q, &w, &err);
        TT_CHECK(ok, "%s: whole plan failed: %s", label, err.msg);
        if (!ok)
            return;
        int np = 0;
        long long flops[2] = {0, 0}, wflops[2] = {0, 0};
        for (int k = 0; k < w.nsteps; k++)
            if (w.steps[k].phase != TG_PHASE_OPT)
                wflops[w.steps[k].phase] += w.steps[k].flops;
        for (int g = 0; g < 2; g++) {
            ok = tg_plan_stage(&st, g, &err) && tg_plan_class(&st, c / q, c % q, &sp[g], &err);
            TT_CHECK(ok, "%s: stage %d plan failed: %s", label, g, err.msg);
            if (!ok)
                continue;
            const tg_class_plan *rp = &sp[g];
            int lo = g == 0 ? 0 : n0, hi = g == 0 ? n0 : L;
            TT_CHECK(rp->stage == g, "%s: stage %d plans as stage %d", label, g, rp->stage);
            for (int k = 0; k < rp->nparams; k++, np++)
                TT_CHECK(np < w.nparams && strcmp(rp->params[k].name, w.params[np].name) == 0,
                         "%s: stage %d shard %d is %s, the whole program's next is %s", label, g, k,
                         rp->params[k].name, np < w.nparams ? w.params[np].name : "(none)");
            for (int k = 0; k < rp->nsteps; k++) {
                const tg_step *x = &rp->steps[k];
                TT_CHECK(x->phase == TG_PHASE_OPT || (x->layer >= lo && x->layer < hi),
                         "%s: stage %d step %d is of block %d, outside %d..%d", label, g, k, x->layer, lo, hi - 1);
                if (x->phase != TG_PHASE_OPT)
                    flops[x->phase] += x->flops;
            }
            int reads_x = 0;
            for (int b = 0; b < TG_STEP_MAXBUF; b++)
                reads_x |= rp->steps[0].buf[b] == rp->x_buf;
            TT_CHECK(reads_x, "%s: stage %d's first step does not read x", label, g);
            TT_CHECK(rp->y_buf != rp->x_buf && rp->y_buf >= 0, "%s: stage %d has no output block of its own", label,
                     g);
            int want = sched == TG_PIPE_GPIPE ? m : (2 - g < m ? 2 - g : m);
            TT_CHECK(rp->stash_elems > 0 && rp->stash_total == rp->stash_elems * want,
                     "%s: stage %d stash %lld = %lld x ?, want x %d", label, g, rp->stash_total, rp->stash_elems,
                     want);
            check_memory(rp, label);
        }
        TT_CHECK(np == w.nparams, "%s: the stages hold %d shards, the whole program %d", label, np, w.nparams);
        TT_CHECK(flops[0] == wflops[0] && flops[1] == wflops[1],
                 "%s: stage flops forward %lld backward %lld, whole %lld %lld", label, flops[0], flops[1], wflops[0],
                 wflops[1]);
        TT_CHECK(w.stash_total == 0, "%s: pp = 1 counts a stash", label);
        tg_class_free(&w);
        tg_class_free(&sp[0]);
        tg_class_free(&sp[1]);
    }
}

/* Pipeline stages of the language model (2 stages, m micro-batches): stage 0 holds wte, wpe, the token ids and its
 * blocks, the last stage wte's tied copy (the same shard as the whole program's), its blocks, ln_f and the targets,
 * logits and loss; each stage all-reduces its part of the wte gradient over dep once; stage 0's embedding backward
 * starts its dE from zero (the head's part is on the other stage); the stages' flops add up to the whole model's. */
static int find_param(const tg_class_plan *rp, const char *name)
{
    for (int k = 0; k < rp->nparams; k++)
        if (strcmp(rp->params[k].name, name) == 0)
            return k;
    return -1;
}

static void check_lm_stages(int q, int d, int m)
{
    char label[96];
    snprintf(label, sizeof label, "language model [%d,%d,%d] x 2 stages, m=%d", q, q, d, m);
    tg_spec s = tt_spec(q, d, 2, 24, 6, 48, 4, 2 * q * d * m, 1);
    s.vocab = 49;
    s.positions = 4;
    s.microbatches = m;
    tg_plan whole, st;
    tg_err err = {{0}, 0};
    tg_plan_init(&s, &whole);
    s.pp = 2;
    s.stage_layers[0] = s.stage_layers[1] = 1;
    tg_plan_init(&s, &st);
    for (int c = 0; c < q * q; c++) {
        tg_class_plan w, sp[2];
        bool ok = tg_plan_class(&whole, c / q, c % q, &w, &err);
        TT_CHECK(ok, "%s: whole plan failed: %s", label, err.msg);
        if (!ok)
            return;
        long long flops = 0, wflops = 0;
        for (int k = 0; k < w.nsteps; k++)
            wflops += w.steps[k].phase != TG_PHASE_OPT ? w.steps[k].flops : 0;
        int ww = find_param(&w, "wte.weight");
        for (int g = 0; g < 2; g++) {
            ok = tg_plan_stage(&st, g, &err) && tg_plan_class(&st, c / q, c % q, &sp[g], &err);
            TT_CHECK(ok, "%s: stage %d plan failed: %s", label, g, err.msg);
            if (!ok) {
                sp[g].nsteps = 0;
                continue;
            }
            const tg_class_plan *rp = &sp[g];
            int wt = find_param(rp, "wte.weight");
            TT_CHECK(wt >= 0 && ww >= 0 && rp->params[wt].npieces == w.params[ww].npieces &&
                         rp->bufs[rp->params[wt].buf].elems == w.bufs[w.params[ww].buf].elems,
                     "%s: stage %d's wte is not the whole program's shard", label, g);
            TT_CHECK((find_param(rp, "wpe.weight") >= 0) == (g == 0) && (find_param(rp, "ln_f.weight") >= 0) == (g == 1),
                     "%s: stage %d holds wpe %d, ln_f %d", label, g, find_param(rp, "wpe.weight") >= 0,
                     find_param(rp, "ln_f.weight") >= 0);
            TT_CHECK((rp->tok_buf >= 0) == (g == 0) && (rp->tgt_buf >= 0) == (g == 1) &&
                         (rp->logits_buf >= 0) == (g == 1) && (rp->loss_buf >= 0) == (g == 1),
                     "%s: stage %d buffers tokens %d targets %d logits %d loss %d", label, g, rp->tok_buf,
                     rp->tgt_buf, rp->logits_buf, rp->loss_buf);
            int dep = 0, zero = 0;
            for (int k = 0; k < rp->nsteps; k++) {
                const tg_step *x = &rp->steps[k];
                flops += x->phase != TG_PHASE_OPT ? x->flops : 0;
                dep += x->kind == TG_STEP_ALLREDUCE && x->group == TG_DEP && wt >= 0 &&
                       x->buf[0] == rp->params[wt].grad;
                zero += x->zero_first;
            }
            TT_CHECK(dep == (d > 1), "%s: stage %d all-reduces its wte gradient over dep %d times", label, g, dep);
            TT_CHECK(zero == (g == 0), "%s: stage %d zeroes %d embedding gradients first", label, g, zero);
        }
        TT_CHECK(flops == wflops, "%s: the stages' flops %lld, the whole model's %lld", label, flops, wflops);
        for (int k = 0; k < w.nsteps; k++)
            TT_CHECK(!w.steps[k].zero_first, "%s: pp = 1 zeroes a gradient first", label);
        tg_class_free(&w);
        tg_class_free(&sp[0]);
        tg_class_free(&sp[1]);
    }
}

/* Pipeline stages: classes keyed by (stage, i, j), ranks stage-major, each class number planned at its stage. */
static void check_stage_classes(int q, int d, int S)
{
    tg_spec s = tt_spec(q, d, 2 * S, 48, 12, 192, 4, 2 * q * d * 2, 1);
    s.microbatches = 2;
    s.pp = S;
    for (int g = 0; g < S; g++)
        s.stage_layers[g] = 2;
    tg_plan pl;
    tg_err err = {{0}, 0};
    tg_plan_init(&s, &pl);
    int p = q * q * d;
    TT_CHECK(tg_plan_nclasses(&pl) == S * q * q, "[%d,%d,%d] x %d: %d classes, not %d", q, q, d, S,
             tg_plan_nclasses(&pl), S * q * q);
    TT_CHECK(tg_plan_world(&pl) == S * p, "[%d,%d,%d] x %d: world %d", q, q, d, S, tg_plan_world(&pl));
    for (int r = 0; r < S * p; r++) {
        tg_coord co = tg_mesh_coord(&pl.mesh, r % p);
        int want = ((r / p) * q + co.i) * q + co.j;
        TT_CHECK(tg_class_of(&pl, r) == want, "[%d,%d,%d] x %d: rank %d in class %d, not %d", q, q, d, S, r,
                 tg_class_of(&pl, r), want);
    }
    for (int c = 0; c < S * q * q; c++) {
        tg_class_plan cp;
        bool ok = tg_plan_class_n(&pl, c, &cp, &err);
        TT_CHECK(ok, "class %d: %s", c, err.msg);
        if (!ok)
            continue;
        TT_CHECK(cp.stage == c / (q * q) && cp.i == (c % (q * q)) / q && cp.j == c % q,
                 "class %d planned as (s=%d, i=%d, j=%d)", c, cp.stage, cp.i, cp.j);
        for (int k = 0; k < cp.nsteps; k++)
            TT_CHECK(cp.steps[k].layer < 0 || cp.steps[k].layer / 2 == cp.stage, "class %d runs a step of layer %d",
                     c, cp.steps[k].layer);
        tg_class_free(&cp);
    }
    TT_CHECK(pl.stage == 0, "tg_plan_class_n changed the plan's stage to %d", pl.stage);
}

int main(void)
{
    TT_CASE("pipeline stages: classes are keyed by (stage, i, j), ranks are numbered stage-major and each class "
            "number is planned at its own stage") {
        check_stage_classes(1, 1, 2);
        check_stage_classes(2, 1, 2);
        check_stage_classes(2, 2, 3);
    }
    TT_CASE("pipeline stages: each stage's class programs hold its own blocks only, read x, write their own y, add up "
            "to the whole stack's flops and stash the forward's kept buffers once per in-flight micro-batch") {
        check_stages(1, 1, 3, 1, 2, TG_PIPE_1F1B);
        check_stages(1, 1, 3, 2, 4, TG_PIPE_GPIPE);
        check_stages(2, 1, 4, 1, 4, TG_PIPE_1F1B);
        check_stages(2, 2, 3, 2, 2, TG_PIPE_GPIPE);
    }
    TT_CASE("pipeline stages of the language model: the embedding and token ids on the first stage, the tied copy of "
            "wte, ln_f and the loss on the last, each stage's wte gradient all-reduced over dep, flops add up") {
        check_lm_stages(1, 1, 2);
        check_lm_stages(2, 1, 2);
        check_lm_stages(2, 2, 1);
    }
    for (int p = 1; p <= 4; p++)
        for (int train = 0; train < 2; train++)
            for (int V = 0; V <= 49; V += 49) { /* 49: padded on p = 2, 3, 4 */
                char name[96];
                snprintf(name, sizeof name, "megatron p=%d%s%s: classes, shards, world all-reduces", p,
                         train ? " training" : "", V ? " vocab 49" : "");
                TT_CASE(name) {
                    check_megatron(p, train, V, 1);
                }
            }
    for (int p = 1; p <= 3; p++) /* vocab 49 on p = 1, 2, 3: Vq = 56, 32, 24 (7, 15, 23 pad rows) */
        for (int train = 0; train < 2; train++) {
            char name[128];
            snprintf(name, sizeof name, "megatron p=%d%s vocab 49, vocab_align 8: every vocab block a multiple of 8 "
                                        "rows, shards, world all-reduces", p, train ? " training" : "");
            TT_CASE(name) {
                check_megatron(p, train, 49, 8);
            }
        }
    for (int bf16 = 0; bf16 < 2; bf16++)
        TT_CASE(bf16 ? "megatron p=2 bf16 training: GeLU's backward reads the bf16 pre-activation its forward kept; "
                       "fc1's GEMM writes it and the GeLU output as its epilogue from the bf16 bias, fc2's input "
                       "gradient GEMM writes the bf16 du as its GeLU-gradient epilogue"
                     : "megatron p=2 training: GeLU's backward reads the pre-activation in place in fp32, fc1's GEMM "
                       "writes it as its epilogue") {
            tg_spec s = tt_spec_megatron(2, 2, 48, 12, 192, 8, 6, 1);
            s.dtype = bf16 ? TG_BF16 : TG_FP32;
            tg_plan pl;
            tg_class_plan *all;
            tg_err err = {{0}, 0};
            tg_plan_init(&s, &pl);
            bool ok = tg_plan_all(&pl, &all, &err);
            TT_CHECK(ok, "plan failed: %s", err.msg);
            if (ok) {
                check_gelu_u(&pl, all, bf16 ? "megatron bf16" : "megatron");
                /* fc1's one GEMM a layer (beta 0) fuses, and the backward's: fp32 the GeLU gradient and the four bias
                 * gradients, bf16 the GeLU gradient (the bias gradients sum bf16 or fp32 dY: kernels) */
                check_fusion(&pl, all, bf16 ? "megatron bf16" : "megatron", s.layers, (bf16 ? 1 : 5) * s.layers,
                             (bf16 ? 1 : 5) * s.layers);
                check_rows(&pl, all, bf16 ? "megatron bf16" : "megatron", 2 * s.layers + (s.vocab > 0));
                check_lnb(&pl, all, bf16 ? "megatron bf16" : "megatron", 2 * s.layers);
                tg_plan_all_free(&pl, all);
            }
        }
    /* attention = "cudnn" (bf16 training): head dimension 8 */
    for (int m = 0; m < 5; m++)
        TT_CASE(m == 0   ? "attention = \"cudnn\" training [1,1,1]: the proj input-gradient GEMM writes the bf16 dO cuDNN reads"
                : m == 1 ? "attention = \"cudnn\" training [1,1,2]: the proj input-gradient GEMM writes the bf16 dO cuDNN reads "
                           "where the attention backward waits for nothing"
                : m == 2 ? "attention = \"cudnn\" training [2,2,1]: no GEMM writes the bf16 dO (a reduce writes dO last)"
                : m == 3 ? "attention = \"cudnn\" training [3,3,1]: no GEMM writes the bf16 dO (a reduce writes dO last)"
                         : "attention = \"cudnn\" megatron p=2 training: the proj input-gradient GEMM writes the bf16 dO") {
            int q = m == 2 ? 2 : m == 3 ? 3 : 1, d = m == 1 ? 2 : 1;
            tg_spec s = m == 4 ? tt_spec_megatron(2, 2, 48, 6, 192, 8, 4, 1) : tt_spec(q, d, 2, 48, 6, 192, 8, 2 * q * d, 1);
            s.dtype = TG_BF16;
            s.attention = TG_ATTN_CUDNN;
            tg_plan pl;
            tg_class_plan *all;
            tg_err err = {{0}, 0};
            tg_plan_init(&s, &pl);
            bool ok = tg_plan_all(&pl, &all, &err);
            TT_CHECK(ok, "plan failed: %s", err.msg);
            if (ok) {
                char label[48];
                snprintf(label, sizeof label, "cudnn case %d", m);
                if (m != 4)
                    check_plan(&pl, all, label);
                /* d = 2: a layer's attention backward may wait for the depth all-reduce whose bytes the arena gave its
                 * bf16 dQKV: that layer casts dO as before (the rule wants a step that waits for nothing) */
                check_dout16(&pl, all, label, q == 1 ? (d == 1 ? s.layers : 1) : 0, q == 1 ? s.layers : 0);
                tg_plan_all_free(&pl, all);
            }
        }
    static const int meshes[][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}, {2, 3}, {3, 1}, {3, 2}, {4, 1}, {4, 2}, {2, 4}};
    for (size_t mi = 0; mi < 2 * (sizeof meshes / sizeof meshes[0]); mi++) {
        int q = meshes[mi / 2][0], d = meshes[mi / 2][1], bf16 = (int)(mi % 2);
        /* heads = 12 divides by q in {1,2,3,4}; batch a multiple of q*d */
        tg_spec s = tt_spec(q, d, 3, 48, 12, 192, 8, 2 * q * d, 0);
        if (bf16)
            s.dtype = TG_BF16;
        char label[64];
        snprintf(label, sizeof label, "mesh [%d,%d,%d]%s", q, q, d, bf16 ? " bf16" : "");
        tg_plan pl;
        tg_class_plan *all;
        tg_err err = {{0}, 0};
        char name[96];
        snprintf(name, sizeof name, "plan properties, %s", label);
        TT_CASE(name) {
            tg_plan_init(&s, &pl);
            bool ok = tg_plan_all(&pl, &all, &err);
            TT_CHECK(ok, "plan failed: %s", err.msg);
            if (ok) {
                check_plan(&pl, all, label);
                /* fp32: every fc1 (BIAS_GELU in place in the fp32 C, beta 0 or 1); bf16: the bf16 GeLU output fc2
                 * reads as D from the bf16 bias, where fc1's GEMM does not accumulate (q = 1) */
                check_fusion(&pl, all, label, !bf16 || q == 1 ? s.layers : 0, 0, 0);
                /* q = 1: ln2 and every ln1 but the first with the residual step before it, the first alone; q >= 2:
                 * the row group's all-reduces of the statistics come between */
                check_rows(&pl, all, label, q == 1 ? 2 * s.layers : 0);
                tg_plan_all_free(&pl, all);
            }
        }
    }
    for (size_t mi = 0; mi < 2 * (sizeof meshes / sizeof meshes[0]); mi++) {
        int q = meshes[mi / 2][0], d = meshes[mi / 2][1], bf16 = (int)(mi % 2);
        tg_spec s = tt_spec(q, d, 2, 48, 12, 192, 8, 2 * q * d, 1);
        if (bf16) /* docs/BF16.md: the same schedule, broadcasts of 2-byte elements, every GEMM of bf16 operands */
            s.dtype = TG_BF16;
        char label[64], name[96];
        snprintf(label, sizeof label, "train mesh [%d,%d,%d]%s", q, q, d, bf16 ? " bf16" : "");
        snprintf(name, sizeof name, "plan properties with backward and AdamW, %s", label);
        tg_plan pl;
        tg_class_plan *all;
        tg_err err = {{0}, 0};
        TT_CASE(name) {
            tg_plan_init(&s, &pl);
            bool ok = tg_plan_all(&pl, &all, &err);
            TT_CHECK(ok, "plan failed: %s", err.msg);
            if (ok) {
                check_plan(&pl, all, label);
                check_gelu_u(&pl, all, label);
                /* backward: on q >= 2 the bias gradients only (the last SUMMA dW GEMM reads the same local dY),
                 * where the column sum waits for no collective (class 0 all four, others fewer) */
                /* bf16: the GeLU gradient on q = 1 only (on q >= 2 it waits for the reduce of dg), every layer's on
                 * [1,1,1]; with d > 1 a layer's may wait for the depth all-reduce whose bytes the arena gave dg */
                int bmax = bf16 ? (q == 1 ? s.layers : 0) : (q == 1 ? 5 : 4) * s.layers;
                check_fusion(&pl, all, label, q == 1 ? s.layers : 0, q == 1 && (!bf16 || d == 1) ? bmax : 0, bmax);
                check_rows(&pl, all, label, q == 1 ? 2 * s.layers : 0);
                /* q = 1: every layernorm's backward; q >= 2: the row group's all-reduce of the sums comes between */
                check_lnb(&pl, all, label, q == 1 ? 2 * s.layers : 0);
                TT_CHECK(bf16 || q == 1 || all[0].nsteps == 0 || count_bwd(&all[0]) == bmax,
                         "%s class 0: %d backward fused GEMMs, want %d", label, count_bwd(&all[0]), bmax);
                /* every parameter has a gradient, both moments, and exactly one AdamW step */
                const tg_class_plan *rp = &all[tg_class_of(&pl, pl.mesh.p - 1)];
                int adam = 0;
                for (int i = 0; i < rp->nsteps; i++)
                    adam += rp->steps[i].kind == TG_STEP_ADAMW;
                TT_CHECK(adam == rp->nparams, "%d AdamW steps for %d params", adam, rp->nparams);
                for (int i = 0; i < rp->nparams; i++)
                    TT_CHECK(rp->params[i].grad >= 0 && rp->params[i].m >= 0 && rp->params[i].v >= 0, "param %d", i);
                tg_plan_all_free(&pl, all);
            }
        }
    }
    TT_CASE("plan properties, uneven shapes (F != 4C, long seq, 1 layer)") {
        tg_spec s = tt_spec(2, 2, 1, 40, 4, 24, 5, 8, 0);
        tg_plan pl;
        tg_class_plan *all;
        tg_err err = {{0}, 0};
        tg_plan_init(&s, &pl);
        bool ok = tg_plan_all(&pl, &all, &err);
        TT_CHECK(ok, "%s", err.msg);
        if (ok) {
            check_plan(&pl, all, "uneven");
            tg_plan_all_free(&pl, all);
        }
    }
    TT_CASE("a GeLU step that waits for the other stream, or reads a bf16 bias, is not fused into its GEMM") {
        tg_spec s = tt_spec(2, 1, 2, 48, 12, 192, 8, 4, 0);
        tg_plan pl;
        tg_class_plan c0;
        tg_err err = {{0}, 0};
        tg_plan_init(&s, &pl);
        TT_CHECK(tg_plan_class(&pl, 0, 0, &c0, &err), "%s", err.msg);
        int k = -1;
        for (int i = 0; i < c0.nsteps && k < 0; i++)
            if (c0.steps[i].kind == TG_STEP_BIAS_GELU && c0.steps[i].fused == i - 1)
                k = i;
        TT_CHECK(k > 0, "no fused bias + GeLU step in class (0,0)");
        if (k > 0) {
            /* the same plan, unmarked, with the GeLU step waiting for the latest comm step before its GEMM */
            for (int i = 0; i < c0.nsteps; i++) {
                c0.steps[i].epi = TG_EPI_NONE;
                c0.steps[i].fused = -1;
            }
            int w = k - 2;
            while (w >= 0 && c0.steps[w].stream != TG_STREAM_COMM)
                w--;
            c0.steps[k].wait = w;
            tg_fuse_plan(&c0);
            TT_CHECK(w >= 0 && c0.steps[k].fused < 0 && c0.steps[k - 1].epi == TG_EPI_NONE,
                     "step %d waiting for step %d is still fused", k, w);
            c0.steps[k].wait = -1;
            tg_fuse_plan(&c0);
            TT_CHECK(c0.steps[k].fused == k - 1, "step %d without its wait is not fused again", k);
            c0.steps[k - 1].epi = TG_EPI_NONE;
            c0.steps[k - 1].fused = c0.steps[k].fused = -1;
            c0.bufs[c0.steps[k].buf[1]].dtype = TG_BUF_BF16;
            tg_fuse_plan(&c0);
            TT_CHECK(c0.steps[k].fused < 0, "step %d with a bf16 bias is fused", k);
        }
        tg_class_free(&c0);
    }
    TT_CASE("a residual step and its layernorm are one row kernel on q = 1, and the first ln1 alone, not where a "
            "layernorm step waits or an output shares bytes with an input") {
        tg_spec s = tt_spec(1, 1, 2, 48, 12, 192, 8, 4, 0);
        tg_plan pl;
        tg_class_plan c0;
        tg_err err = {{0}, 0};
        tg_plan_init(&s, &pl);
        TT_CHECK(tg_plan_class(&pl, 0, 0, &c0, &err), "%s", err.msg);
        int k = -1, k0 = -1;
        for (int i = 0; i < c0.nsteps && k < 0; i++) {
            if (c0.steps[i].epi == TG_EPI_LN && c0.steps[i].kind == TG_STEP_RESID_ROWSUM)
                k = i;
            if (c0.steps[i].epi == TG_EPI_LN && c0.steps[i].kind == TG_STEP_LN_ROWSUM && k0 < 0)
                k0 = i;
        }
        TT_CHECK(k >= 0, "no residual row kernel in class (0,0) of [1,1,1]");
        /* the first ln1 (no residual before it) is one too; not where its vs would lie over x, which it still reads */
        TT_CHECK(k0 == 0, "the first ln1 is not a row kernel: %d", k0);
        if (k0 == 0) {
            c0.steps[0].epi = TG_EPI_NONE;
            c0.steps[0].fused = c0.steps[1].fused = c0.steps[2].fused = -1;
            long long off = c0.bufs[c0.steps[1].buf[2]].offset;
            c0.bufs[c0.steps[1].buf[2]].offset = c0.bufs[c0.steps[0].buf[0]].offset;
            tg_fuse_plan(&c0);
            TT_CHECK(c0.steps[0].epi == TG_EPI_NONE, "the first ln1 writing vs over x is a row kernel");
            c0.bufs[c0.steps[1].buf[2]].offset = off;
            c0.steps[1].wait = 0; /* as if its centred squares waited for another stream's step */
            for (int i = 0; i < c0.nsteps; i++) {
                c0.steps[i].epi = TG_EPI_NONE;
                c0.steps[i].fused = -1;
            }
            tg_fuse_plan(&c0);
            TT_CHECK(c0.steps[0].epi == TG_EPI_NONE, "the first ln1 with a waiting step is a row kernel");
            c0.steps[1].wait = -1;
            for (int i = 0; i < c0.nsteps; i++) {
                c0.steps[i].epi = TG_EPI_NONE;
                c0.steps[i].fused = -1;
            }
            tg_fuse_plan(&c0);
            TT_CHECK(c0.steps[0].epi == TG_EPI_LN && c0.steps[2].fused == 0, "the first ln1 is not a row kernel again");
        }
        if (k >= 0) {
            for (int i = 0; i < c0.nsteps; i++) {
                c0.steps[i].epi = TG_EPI_NONE;
                c0.steps[i].fused = -1;
            }
            c0.steps[k + 2].wait = 0; /* as if the apply step waited for another stream's step */
            tg_fuse_plan(&c0);
            TT_CHECK(c0.steps[k].epi == TG_EPI_NONE && c0.steps[k + 2].fused < 0, "step %d with a waiting layernorm "
                     "is still a row kernel", k);
            c0.steps[k + 2].wait = -1;
            tg_fuse_plan(&c0);
            TT_CHECK(c0.steps[k].epi == TG_EPI_LN && c0.steps[k + 1].fused == k, "step %d is not a row kernel again", k);
            for (int i = 0; i < c0.nsteps; i++) {
                c0.steps[i].epi = TG_EPI_NONE;
                c0.steps[i].fused = -1;
            }
            /* vs over p's bytes, as the arena would place it without the pin (p's last reader is the residual step) */
            long long off = c0.bufs[c0.steps[k + 1].buf[2]].offset;
            c0.bufs[c0.steps[k + 1].buf[2]].offset = c0.bufs[c0.steps[k].buf[1]].offset;
            tg_fuse_plan(&c0);
            TT_CHECK(c0.steps[k].epi == TG_EPI_NONE, "step %d writing vs over p is a row kernel", k);
            c0.bufs[c0.steps[k + 1].buf[2]].offset = off;
        }
        tg_class_free(&c0);
    }
    TT_CASE("a layernorm backward's two steps are one row kernel on q = 1, not where the apply step waits, an output "
            "shares bytes with an input, or another step reads the sums") {
        tg_spec s = tt_spec(1, 1, 2, 48, 12, 192, 8, 4, 1);
        tg_plan pl;
        tg_class_plan c0;
        tg_err err = {{0}, 0};
        tg_plan_init(&s, &pl);
        TT_CHECK(tg_plan_class(&pl, 0, 0, &c0, &err), "%s", err.msg);
        int k = -1;
        for (int i = 0; i < c0.nsteps && k < 0; i++)
            if (c0.steps[i].epi == TG_EPI_LNB)
                k = i;
        TT_CHECK(k >= 0, "no layernorm-backward row kernel in class (0,0) of [1,1,1] training");
        if (k >= 0) {
            tg_step *sm = &c0.steps[k], *ap = &c0.steps[k + 1];
            tg_buf *sums = &c0.bufs[sm->buf[5]];
            /* each change on its own, the plan unmarked: not marked with it, marked again without it */
            for (int v = 0; v < 5; v++) {
                for (int i = 0; i < c0.nsteps; i++) {
                    c0.steps[i].epi = TG_EPI_NONE;
                    c0.steps[i].fused = -1;
                }
                tg_buf *o = v == 1 ? &c0.bufs[ap->buf[6]] : v == 2 ? &c0.bufs[sm->buf[6]] : &c0.bufs[sm->buf[7]];
                long long off = o->offset;
                int last = sums->last;
                static const char *const what[5] = {"the apply step waiting for another stream's step",
                                                    "g over x's bytes", "dgamma over dy's bytes",
                                                    "dbeta over g's bytes", "the sums read by a later step"};
                if (v == 0)
                    ap->wait = 0;
                else if (v == 1)
                    o->offset = c0.bufs[sm->buf[1]].offset;
                else if (v == 2)
                    o->offset = c0.bufs[sm->buf[0]].offset;
                else if (v == 3)
                    o->offset = c0.bufs[ap->buf[6]].offset;
                else
                    sums->last = k + 2;
                tg_fuse_plan(&c0);
                TT_CHECK(sm->epi == TG_EPI_NONE && ap->fused < 0, "step %d with %s is a row kernel", k, what[v]);
                ap->wait = -1;
                o->offset = off;
                sums->last = last;
                tg_fuse_plan(&c0);
                TT_CHECK(sm->epi == TG_EPI_LNB && sm->fused == k + 1 && ap->fused == k,
                         "step %d without %s is not a row kernel again", k, what[v]);
            }
        }
        tg_class_free(&c0);
    }
    TT_CASE("memory plan reuses dead buffers (peak < sum of buffers)") {
        tg_spec s = tt_spec(2, 1, 4, 64, 4, 256, 16, 4, 0);
        tg_plan pl, pl1;
        tg_class_plan c0, c1;
        tg_err err = {{0}, 0};
        tg_plan_init(&s, &pl);
        TT_CHECK(tg_plan_class(&pl, 0, 0, &c0, &err), "%s", err.msg);
        long long sum = 0;
        for (int i = 0; i < c0.nbufs; i++)
            sum += c0.bufs[i].elems;
        TT_CHECK(c0.arena_elems < sum, "arena %lld, sum %lld", c0.arena_elems, sum);
        /* activations beyond weights and x: at most a few blocks, whatever the depth of the stack */
        long long act = c0.arena_elems - c0.weight_elems;
        tg_spec s1 = tt_spec(2, 1, 1, 64, 4, 256, 16, 4, 0);
        tg_plan_init(&s1, &pl1);
        TT_CHECK(tg_plan_class(&pl1, 0, 0, &c1, &err), "%s", err.msg);
        long long act1 = c1.arena_elems - c1.weight_elems;
        TT_CHECK(act == act1, "activation memory grows with layers: %lld vs %lld", act, act1);
        tg_class_free(&c1);
        tg_class_free(&c0);
    }
    for (int lmc = 0; lmc < 6; lmc++) {
        /* model.vocab_align a = 1 (the default) and 8: Vq = ceil(ceil(V/q) / a) * a, q*Vq - V pad rows */
        static const int lmq[3] = {1, 2, 3}, lmd[3] = {2, 2, 1}, want_vq[2][3] = {{49, 25, 17}, {56, 32, 24}},
                         want_pad[2][3] = {{0, 1, 2}, {7, 15, 23}};
        int al = lmc / 3, q = lmq[lmc % 3], d = lmd[lmc % 3], V = 49, P = 6, L = 2, C = 24;
        char name[128];
        snprintf(name, sizeof name, "language model [%d,%d,%d], V = %d%s: shards, padding, int32 ids, LM bytes", q, q,
                 d, V, al ? ", vocab_align = 8" : "");
        TT_CASE(name) {
            tg_spec s = tt_spec(q, d, L, C, 6, 48, 4, 12, 1), s0 = s;
            s.vocab = V;
            s.positions = P;
            s.vocab_align = al ? 8 : 1;
            tg_plan pl, pl0;
            tg_plan_init(&s, &pl);
            tg_plan_init(&s0, &pl0);
            tg_err err = {{0}, 0};
            int R = pl.R, Cq = pl.Cq, Vq = pl.Vq;
            TT_CHECK(Vq == want_vq[al][lmc % 3] && q * Vq - V == want_pad[al][lmc % 3] && Vq % s.vocab_align == 0,
                     "Vq %d, %d pad rows; want %d and %d", Vq, q * Vq - V, want_vq[al][lmc % 3], want_pad[al][lmc % 3]);
            for (int c = 0; c < q * q; c++) {
                tg_class_plan a, b;
                int i = c / q, j = c % q;
                if (!tg_plan_class(&pl, i, j, &a, &err) || !tg_plan_class(&pl0, i, j, &b, &err)) {
                    TT_CHECK(0, "%s", err.msg);
                    break;
                }
                check_memory(&a, name);
                /* q = 1: ln_f's backward too (whole rows); q >= 2: the all-reduce of the sums between */
                int nlnb = count_lnb(&pl, &a, name, c);
                TT_CHECK(nlnb == (q == 1 ? 2 * L + 1 : 0), "class (%d,%d): %d layernorm-backward row kernels, want %d",
                         i, j, nlnb, q == 1 ? 2 * L + 1 : 0);
                TT_CHECK(a.nparams == b.nparams + 4 && !strcmp(a.params[0].name, "wte.weight") &&
                             !strcmp(a.params[1].name, "wpe.weight") && !strcmp(a.params[a.nparams - 1].name, "ln_f.bias"),
                         "class (%d,%d): params", i, j);
                const tg_param *wte = &a.params[0], *wpe = &a.params[1];
                int real = V - i * Vq < Vq ? V - i * Vq : Vq;
                TT_CHECK(a.bufs[wte->buf].rows == Vq && a.bufs[wte->buf].cols == Cq && wte->replica == TG_DEP &&
                             (real > 0 ? wte->npieces == 1 && wte->piece[0].r0 == i * Vq && wte->piece[0].nr == real
                                       : wte->npieces == 0),
                         "class (%d,%d): wte shard", i, j);
                TT_CHECK(wpe->replica == TG_COLDEP && wpe->piece[0].nr == P && wpe->piece[0].c0 == j * Cq,
                         "class (%d,%d): wpe shard", i, j);
                /* the loss over vocab block j: Vq columns, its real ids only (the pad columns excluded) */
                int nvj = V - j * Vq < 0 ? 0 : V - j * Vq > Vq ? Vq : V - j * Vq, nloss = 0;
                for (int k = 0; k < a.nsteps; k++) {
                    const tg_step *st = &a.steps[k];
                    if (st->kind != TG_STEP_LM_ROWMAX && st->kind != TG_STEP_LM_SUMS && st->kind != TG_STEP_LM_DLOGITS)
                        continue;
                    nloss++;
                    TT_CHECK(st->vocab0 == j * Vq && st->nvalid == nvj && st->cols == Vq,
                             "class (%d,%d) step %d %s: vocab0 %d nvalid %d cols %d; want %d, %d, %d", i, j, k,
                             tg_step_kind_name(st->kind), st->vocab0, st->nvalid, st->cols, j * Vq, nvj, Vq);
                }
                TT_CHECK(nloss == 3, "class (%d,%d): %d loss steps", i, j, nloss);
                TT_CHECK(a.bufs[a.tok_buf].dtype == TG_BUF_I32 && a.bufs[a.tok_buf].elems == (long long)q * R &&
                             a.bufs[a.tgt_buf].dtype == TG_BUF_I32 && a.bufs[a.tgt_buf].elems == R &&
                             a.bufs[a.logits_buf].rows == R && a.bufs[a.logits_buf].cols == Vq,
                         "class (%d,%d): token, target and logits buffers", i, j);
                /* docs/MODEL.md's table: the LM's elements on top of the blocks', 4 bytes each (the plan counts
                 * bytes) */
                long long qm = 4 * (q - 1), one = 4 * (q > 1);
                TT_CHECK(a.reduce_recv[TG_COL] + a.reduce_recv[TG_ROW] == qm * R * (Cq + Vq) &&
                             a.reduce_sent[TG_COL] + a.reduce_sent[TG_ROW] == qm * R * (Cq + Vq),
                         "class (%d,%d): forward reduces", i, j);
                TT_CHECK(a.bcast_recv[TG_COL] - b.bcast_recv[TG_COL] == qm * Vq * Cq &&
                             a.bcast_sent[TG_COL] - b.bcast_sent[TG_COL] == one * Vq * Cq &&
                             a.allreduce[TG_ROW] - b.allreduce[TG_ROW] == one * 5 * R,
                         "class (%d,%d): forward bcasts and all-reduces", i, j);
                long long cold = 4 * (q * d > 1) * (2LL * Cq + (long long)P * Cq), dep = 4 * (d > 1) * (long long)Vq * Cq;
                TT_CHECK(a.bwd_allreduce[TG_COLDEP] - b.bwd_allreduce[TG_COLDEP] == cold &&
                             a.bwd_allreduce[TG_DEP] - b.bwd_allreduce[TG_DEP] == dep &&
                             a.bwd_bcast_recv[TG_ROW] - b.bwd_bcast_recv[TG_ROW] == qm * R * Vq &&
                             a.bwd_bcast_recv[TG_COL] - b.bwd_bcast_recv[TG_COL] == qm * (Vq * Cq + (long long)R * Cq) &&
                             a.bwd_reduce_recv[TG_COL] - b.bwd_reduce_recv[TG_COL] == qm * Vq * Cq,
                         "class (%d,%d): backward", i, j);
                tg_class_free(&a);
                tg_class_free(&b);
            }
        }
    }
    TT_CASE("the same spec bakes to the same plan") {
        tg_spec s = tt_spec(3, 2, 2, 48, 12, 192, 8, 6, 0);
        tg_plan pl;
        tg_class_plan *a, *b;
        tg_err err = {{0}, 0};
        tg_plan_init(&s, &pl);
        TT_CHECK(tg_plan_all(&pl, &a, &err) && tg_plan_all(&pl, &b, &err), "%s", err.msg);
        for (int c = 0; c < tg_plan_nclasses(&pl); c++) {
            TT_CHECK(a[c].nsteps == b[c].nsteps, "steps");
            TT_CHECK(memcmp(a[c].steps, b[c].steps, sizeof(tg_step) * (size_t)a[c].nsteps) == 0,
                     "class %d steps differ", c);
            TT_CHECK(a[c].arena_elems == b[c].arena_elems, "arena");
        }
        tg_plan_all_free(&pl, a);
        tg_plan_all_free(&pl, b);
    }
    TT_EXIT();
}
