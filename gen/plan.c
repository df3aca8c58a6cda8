/*
 * plan.c - the top of the planner: bakes the program of one rank class and its
 * memory plan (see plan.h for the step sequence of one block). Per class:
 *   1. the scheme's planner (plan_tesseract.c or plan_megatron.c) declares the
 *      weight shards (buffers + which pieces of which tensor) and
 *   2. appends the steps of every layer, each naming the buffers it reads and
 *      writes, with roots and counts taken from mesh.c;
 *   3. here: derive lifetimes from the steps and place buffers in the arena,
 *   4. decide each step's stream and cross-stream wait (streams.c),
 *   5. mark the GEMMs whose GeLU step a backend may run as their epilogue (fuse.c).
 * Invariants that would make the generated program wrong (a buffer read
 * before it is written, two live buffers sharing bytes) are checked here and
 * reported as internal errors rather than emitted.
 *
 * Design: the planner's files call one way (docs/ARCHITECTURE.md, "The
 * planner's layers"): this file -> the scheme planners (plan_schemes.h) ->
 * the step sequences they share (plan_steps.c) -> the builder's primitives
 * (plan_builder.c). Passes 3 to 5 and the public entry points (plan.h) are
 * the same for every scheme; the only scheme-specific code here is the choice
 * of planner and the mesh's local shapes (tg_plan_init). tools/plandeps.py
 * fails the unit checks if a lower file ever calls back up.
 */
#include "plan.h"
#include "plan_schemes.h"
#include "fuse.h"
#include "pipe.h"
#include "place.h"
#include "streams.h"

#include <stdlib.h>
#include <string.h>

/* ---- memory plan ------------------------------------------------------------------ */

/* docs/BF16.md: a GEMM reads two operands of the plan's element type (bf16 in a bf16 plan) into an fp32 result */
static bool gemm_types(const tg_plan *pl, const tg_class_plan *rp, const tg_step *st, int s, tg_err *err)
{
    int want = pl->spec.dtype == TG_BF16 ? TG_BUF_BF16 : TG_BUF_F32;
    if (rp->bufs[st->buf[0]].dtype == want && rp->bufs[st->buf[1]].dtype == want &&
        rp->bufs[st->buf[2]].dtype == TG_BUF_F32)
        return true;
    return tg_fail(err,
                   "internal planner error: class (i=%d, j=%d) step %d, GEMM of %s and %s into %s: the operands must "
                   "be %s and the result fp32",
                   rp->i, rp->j, s, rp->bufs[st->buf[0]].name, rp->bufs[st->buf[1]].name, rp->bufs[st->buf[2]].name,
                   want == TG_BUF_BF16 ? "bf16" : "fp32");
}

/* The steps whose runtime call has one element type for two buffers (the emitters name the call by one of them): a
 * copy's source and destination, the decode attention's output and KV cache (bf16 in a bf16 plan); a reduce-scatter
 * sums fp32 (docs/BF16.md). */
static bool step_types(const tg_class_plan *rp, const tg_step *st, int s, tg_err *err)
{
    int a = -1, b = -1;
    if (st->kind == TG_STEP_COPY)
        a = st->buf[0], b = st->buf[1];
    else if (st->kind == TG_STEP_ATTN_DECODE)
        a = st->buf[2], b = st->buf[3];
    if (a >= 0 && b >= 0 && rp->bufs[a].dtype != rp->bufs[b].dtype)
        return tg_fail(err, "internal planner error: class (i=%d, j=%d) step %d (%s): %s and %s differ in type", rp->i,
                       rp->j, s, tg_step_kind_name(st->kind), rp->bufs[a].name, rp->bufs[b].name);
    if (st->kind == TG_STEP_REDUCESCATTER && rp->bufs[st->buf[0]].dtype != TG_BUF_F32)
        return tg_fail(err, "internal planner error: class (i=%d, j=%d) step %d: reduce-scatter of %s, not fp32", rp->i,
                       rp->j, s, rp->bufs[st->buf[0]].name);
    return true;
}

static bool lifetimes(const tg_plan *pl, tg_class_plan *rp, tg_err *err)
{
    for (int s = 0; s < rp->nsteps; s++) {
        const tg_step *st = &rp->steps[s];
        if (st->kind == TG_STEP_GEMM && !gemm_types(pl, rp, st, s, err))
            return false;
        if (!step_types(rp, st, s, err))
            return false;
        for (int k = 0; k < TG_STEP_MAXBUF; k++) {
            int id = st->buf[k];
            if (id < 0)
                continue;
            tg_buf *bf = &rp->bufs[id];
            if (bf->first < 0) {
                bf->first = s;
                if (!bf->persistent && st->acc[k] != TG_ACC_W)
                    return tg_fail(err,
                                   "internal planner error: class (i=%d, j=%d) buffer %s is read at step %d "
                                   "before anything writes it",
                                   rp->i, rp->j, bf->name, s);
            }
            bf->last = s;
        }
    }
    for (int s = 0; s < rp->nsteps; s++)
        for (int k = 0; k < 2; k++) {
            int id = rp->steps[s].pin[k];
            if (id >= 0 && rp->bufs[id].first > s)
                rp->bufs[id].first = s;
        }
    for (int i = 0; i < rp->nbufs; i++) {
        tg_buf *bf = &rp->bufs[i];
        if (bf->first < 0 && !bf->persistent)
            return tg_fail(err, "internal planner error: class (i=%d, j=%d) buffer %s is never used", rp->i, rp->j,
                           bf->name);
        if (bf->persistent) {
            bf->first = 0;
            bf->last = rp->nsteps - 1;
        }
    }
    return true;
}

static bool place(tg_class_plan *rp, tg_err *err)
{
    tg_place_item *items = malloc((size_t)(rp->nbufs > 0 ? rp->nbufs : 1) * sizeof *items);
    if (!items)
        return tg_fail(err, "out of memory while planning class (i=%d, j=%d)", rp->i, rp->j);
    for (int i = 0; i < rp->nbufs; i++) {
        const tg_buf *bf = &rp->bufs[i];
        items[i] = (tg_place_item){tg_buf_slots(bf), bf->first, bf->last, bf->persistent, 0};
    }
    bool ok = tg_place(items, rp->nbufs, rp->nsteps, &rp->arena_elems, err);
    rp->weight_elems = 0;
    for (int i = 0; ok && i < rp->nbufs; i++) {
        rp->bufs[i].offset = items[i].offset;
        if (rp->bufs[i].persistent && rp->bufs[i].name[0] == 'w')
            rp->weight_elems += tg_buf_slots(&rp->bufs[i]);
    }
    free(items);
    return ok;
}

/* ---- totals ------------------------------------------------------------------------- */

long long tg_step_times(const tg_plan *pl, const tg_step *s)
{
    return s->phase != TG_PHASE_OPT && !s->last_mb ? pl->mb : 1;
}

/* Per training step (and per forward): each step's figures times tg_step_times. */
static void totals(const tg_plan *pl, tg_class_plan *rp)
{
    for (int i = 0; i < rp->nparams; i++) {
        const tg_param *p = &rp->params[i];
        if (p->m < 0)
            continue;
        rp->moment_elems += 2 * rp->bufs[p->m].elems;
        rp->moment_full += 2 * rp->bufs[p->buf].elems;
    }
    for (int s = 0; s < rp->nsteps; s++) {
        const tg_step *st = &rp->steps[s];
        long long times = tg_step_times(pl, st);
        rp->flops += st->flops * times;
        int bwd = st->phase == TG_PHASE_BWD, dec = st->phase == TG_PHASE_DEC;
        if (dec) /* generation's decode step: its own figures, per call (docs/GENERATE.md) */
            rp->dec_flops += st->flops;
        rp->steps[s].esize = st->buf[0] >= 0 ? tg_dtype_size(rp->bufs[st->buf[0]].dtype) : 4;
        long long bytes = st->count * st->esize * times;
        long long *recv = bwd ? rp->bwd_bcast_recv : dec ? rp->dec_bcast_recv : rp->bcast_recv;
        long long *sent = bwd ? rp->bwd_bcast_sent : dec ? rp->dec_bcast_sent : rp->bcast_sent;
        long long *ar = bwd ? rp->bwd_allreduce : dec ? rp->dec_allreduce : rp->allreduce;
        if (st->kind == TG_STEP_BCAST) {
            if (st->is_root)
                sent[st->group] += bytes;
            else
                recv[st->group] += bytes;
        } else if (st->kind == TG_STEP_ALLREDUCE) {
            ar[st->group] += bytes;
        } else if (st->ws) { /* the weight-stationary layout's: what each member receives (and sends) */
            long long mine = bytes / st->group_size * (st->group_size - 1);
            if (st->kind == TG_STEP_ALLGATHER)
                (dec ? rp->dec_ws_allgather : rp->ws_allgather)[st->group] += mine;
            else
                (dec ? rp->dec_ws_rscatter : rp->ws_rscatter)[st->group] += mine;
        } else if (st->kind == TG_STEP_REDUCESCATTER) {
            rp->bwd_rscatter[st->group] += bytes;
        } else if (st->kind == TG_STEP_ALLGATHER) {
            rp->opt_allgather[st->group] += bytes;
        } else if (st->kind == TG_STEP_REDUCE) {
            long long *rr = bwd ? rp->bwd_reduce_recv : dec ? rp->dec_reduce_recv : rp->reduce_recv;
            long long *rs = bwd ? rp->bwd_reduce_sent : dec ? rp->dec_reduce_sent : rp->reduce_sent;
            if (st->is_root)
                rr[st->group] += bytes * (st->group_size - 1);
            else
                rs[st->group] += bytes;
        }
    }
}

/* What a stage holds per in-flight micro-batch: the buffers live across the forward/backward boundary. */
static void stash(const tg_plan *pl, tg_class_plan *rp)
{
    rp->stage = pl->stage;
    for (int i = 0; i < rp->nbufs; i++) {
        const tg_buf *bf = &rp->bufs[i];
        if (!bf->persistent && bf->first >= 0 && rp->steps[bf->first].phase == TG_PHASE_FWD &&
            rp->steps[bf->last].phase == TG_PHASE_BWD)
            rp->stash_elems += (tg_buf_slots(bf) + 15) / 16 * 16; /* 64-byte aligned, as the arena's */
    }
    rp->stash_total = pl->spec.pp > 1 ? rp->stash_elems * pl->stash : 0;
}

/* shards_only: declare the weight shards and the residual stream block, no steps, no offsets */
static bool build_class(const tg_plan *pl, tg_class_plan *rp, bool shards_only, tg_err *err)
{
    /* micro-batches: the steps are those of one micro-batch, R/mb rows of nseq/mb sequences (plan.h tg_plan.mb) */
    tg_plan mp = *pl;
    mp.R = pl->R / pl->mb;
    mp.nseq = pl->nseq / pl->mb;
    tg_builder b = {.pl = &mp, .rp = rp, .c = {rp->i, rp->j, 0}, .phase = TG_PHASE_FWD};
    if (pl->mesh.scheme == TG_SCHEME_MEGATRON)
        tg_plan_megatron(&b, shards_only);
    else
        tg_plan_tesseract(&b, shards_only);
    if (b.oom)
        return tg_fail(err, "out of memory while planning class (i=%d, j=%d)", rp->i, rp->j);
    if (shards_only)
        return true;
    if (!lifetimes(pl, rp, err) || !place(rp, err))
        return false;
    totals(pl, rp);
    stash(pl, rp);
    /* epilogues = false (the spec): every step stays a kernel of its own on the CUDA backend */
    return tg_streams_plan(rp, err) && (pl->spec.no_epilogues || tg_fuse_plan(rp));
}

void tg_plan_init(const tg_spec *spec, tg_plan *out)
{
    memset(out, 0, sizeof *out);
    out->spec = *spec;
    out->T = spec->batch * spec->seq;
    out->D = spec->hidden / spec->heads;
    out->nl = spec->layers; /* stage 0 of 1: every block (tg_plan_stage) */
    out->stash = 1;
    if (spec->scheme == TG_SCHEME_MEGATRON) {
        out->mesh = tg_mesh_make_megatron(spec->p);
        out->R = out->T;
        out->Cq = spec->hidden;
        out->Fq = spec->ffn / spec->p;
        out->Hq = spec->heads / spec->p;
        out->nseq = spec->batch;
        out->V = spec->vocab;
        out->Vq = (int)tg_spec_vocab_block(spec, spec->p); /* ceil(V/p) rounded up to vocab_align; Vp = p*Vq */
        out->mb = 1; /* the spec refuses micro-batches on this scheme */
        return;
    }
    out->mesh = tg_mesh_make(spec->q, spec->d, spec->placement);
    int qd = spec->q * spec->d;
    out->T = spec->batch * spec->seq;
    out->R = out->T / qd;
    out->Cq = spec->hidden / spec->q;
    out->Fq = spec->ffn / spec->q;
    out->D = spec->hidden / spec->heads;
    out->Hq = spec->heads / spec->q;
    out->nseq = spec->batch / qd;
    out->V = spec->vocab;
    out->Vq = (int)tg_spec_vocab_block(spec, spec->q); /* ceil(V/q) rounded up to vocab_align; Vp = q*Vq */
    out->mb = spec->mode == TG_TRAIN && spec->microbatches > 1 ? spec->microbatches : 1;
    if (spec->mode == TG_GENERATE) { /* docs/GENERATE.md "Choosing the layout": fewer bytes wins, SUMMA on a tie */
        long long Rp = (long long)out->nseq * spec->seq, Rd = out->nseq;
        out->layout_fwd = tg_layout_recv_bytes(out, TG_LAYOUT_STATIONARY, Rp, false) <
                                  tg_layout_recv_bytes(out, TG_LAYOUT_SUMMA, Rp, false)
                              ? TG_LAYOUT_STATIONARY
                              : TG_LAYOUT_SUMMA;
        if (spec->decode_layout == TG_DECODE_AUTO)
            out->layout_dec = tg_layout_recv_bytes(out, TG_LAYOUT_STATIONARY, Rd, true) <
                                      tg_layout_recv_bytes(out, TG_LAYOUT_SUMMA, Rd, true)
                                  ? TG_LAYOUT_STATIONARY
                                  : TG_LAYOUT_SUMMA;
        else
            out->layout_dec = spec->decode_layout == TG_DECODE_STATIONARY ? TG_LAYOUT_STATIONARY : TG_LAYOUT_SUMMA;
    }
}

/* Per layer and rank, elements received by the four linears (K, N: qkv C x 3C, proj C x C, fc1 C x F, fc2 F x C, each
 * split q x q): SUMMA receives q-1 of the q activation blocks [R, K/q] over the row and q-1 of the q weight blocks
 * [K/q, N/q] over the column; the weight-stationary layout (plan_tesseract.c stationary()) on a rank off the diagonal
 * receives q-1 blocks [R, K/q] in the column's all-gather, the gathered [q*R, K/q] in the row's broadcast and q-1
 * partial blocks [R, N/q] in the column's reduce-scatter (the diagonal rank, the broadcast's root, receives q*R*K/q
 * less). Bytes: 4 an element; in a bf16 plan 2 for the activations and weights (GEMM operands), 4 for the partial
 * sums (docs/BF16.md: reductions are fp32). head: the decode step's head too (its layout follows the linears':
 * SUMMA receives q-1 wte blocks [Vq, C/q] over the column and, as the root of its vocab block's reduce over the
 * row, q-1 partial blocks [R, Vq]; the weight-stationary head gathers q-1 blocks [R, C/q] over the column and reduce-scatters q-1 partial
 * blocks [R, Vq] over the row, plan_lm.c head_stationary). */
long long tg_layout_recv_bytes(const tg_plan *pl, tg_layout lay, long long R, bool head)
{
    long long q = pl->mesh.q, Cq = pl->Cq, Fq = pl->Fq, L = pl->spec.layers, Vq = pl->Vq;
    long long sumK = 3 * Cq + Fq, sumN = 3 * Cq + Cq + Fq + Cq, sumKN = 4 * Cq * Cq + 2 * Cq * Fq;
    long long e = pl->spec.dtype == TG_BF16 ? 2 : 4; /* the activations and weights moved; partial sums stay fp32 */
    if (q <= 1)
        return 0;
    if (lay == TG_LAYOUT_SUMMA)
        return e * L * (q - 1) * (R * sumK + sumKN) + (head ? e * (q - 1) * Vq * Cq + 4 * (q - 1) * R * Vq : 0);
    return L * (e * (2 * q - 1) * R * sumK + 4 * (q - 1) * R * sumN) +
           (head ? e * (q - 1) * R * Cq + 4 * (q - 1) * R * Vq : 0);
}

const char *tg_layout_name(tg_layout lay)
{
    return lay == TG_LAYOUT_STATIONARY ? "stationary" : "summa";
}

bool tg_plan_stage(tg_plan *pl, int s, tg_err *err)
{
    const tg_spec *sp = &pl->spec;
    if (sp->pp <= 1) {
        pl->stage = pl->l0 = 0;
        pl->nl = sp->layers;
        pl->stash = 1;
        return true;
    }
    if (s < 0 || s >= sp->pp)
        return tg_fail(err, "internal planner error: stage %d of mesh.pp = %d", s, sp->pp);
    tg_pipe p;
    if (!tg_pipe_build(&p, sp->pp, sp->microbatches, sp->schedule, sp->stage_layers, err))
        return false;
    bool ok = tg_pipe_simulate(&p, err);
    if (ok) {
        pl->stage = s;
        pl->l0 = 0;
        for (int k = 0; k < s; k++)
            pl->l0 += sp->stage_layers[k];
        pl->nl = sp->stage_layers[s];
        pl->stash = p.stash[s];
    }
    tg_pipe_free(&p);
    return ok;
}

bool tg_plan_class(const tg_plan *pl, int i, int j, tg_class_plan *out, tg_err *err)
{
    memset(out, 0, sizeof *out);
    out->i = i;
    out->j = j;
    if (!build_class(pl, out, false, err)) {
        tg_class_free(out);
        return false;
    }
    return true;
}

bool tg_plan_class_shards(const tg_plan *pl, int i, int j, tg_class_plan *out, tg_err *err)
{
    memset(out, 0, sizeof *out);
    out->i = i;
    out->j = j;
    if (!build_class(pl, out, true, err)) {
        tg_class_free(out);
        return false;
    }
    return true;
}

void tg_class_free(tg_class_plan *cp)
{
    free(cp->steps);
    free(cp->bufs);
    free(cp->params);
    cp->steps = NULL;
    cp->bufs = NULL;
    cp->params = NULL;
    cp->nsteps = cp->nbufs = cp->nparams = 0;
}

int tg_plan_nclasses(const tg_plan *pl)
{
    if (pl->mesh.scheme == TG_SCHEME_MEGATRON)
        return pl->mesh.p;
    return tg_plan_stages(pl) * pl->mesh.q * pl->mesh.q;
}

int tg_plan_stages(const tg_plan *pl)
{
    return pl->spec.pp > 1 ? pl->spec.pp : 1;
}

int tg_plan_world(const tg_plan *pl)
{
    return tg_plan_stages(pl) * pl->mesh.p;
}

int tg_class_of(const tg_plan *pl, int rank)
{
    if (pl->mesh.scheme == TG_SCHEME_MEGATRON)
        return rank;
    int st = rank / pl->mesh.p; /* stage-major: stage s holds ranks s*p .. s*p + p - 1 */
    tg_coord c = tg_mesh_coord(&pl->mesh, rank % pl->mesh.p);
    return (st * pl->mesh.q + c.i) * pl->mesh.q + c.j;
}

bool tg_plan_class_n(const tg_plan *pl, int c, tg_class_plan *out, tg_err *err)
{
    if (pl->mesh.scheme == TG_SCHEME_MEGATRON)
        return tg_plan_class(pl, c, 0, out, err);
    int qq = pl->mesh.q * pl->mesh.q, st = c / qq;
    if (tg_plan_stages(pl) == 1)
        return tg_plan_class(pl, c / pl->mesh.q, c % pl->mesh.q, out, err);
    tg_plan sp = *pl; /* a copy pointed at the class's stage (tg_plan_stage only sets its stage fields) */
    return tg_plan_stage(&sp, st, err) && tg_plan_class(&sp, (c % qq) / pl->mesh.q, c % pl->mesh.q, out, err);
}

bool tg_plan_all(const tg_plan *pl, tg_class_plan **out, tg_err *err)
{
    int n = tg_plan_nclasses(pl), q = pl->mesh.q;
    tg_class_plan *all = calloc((size_t)n, sizeof *all);
    if (!all)
        return tg_fail(err, "out of memory: %d rank classes", n);
    (void)q;
    for (int c = 0; c < n; c++)
        if (!tg_plan_class_n(pl, c, &all[c], err)) {
            tg_plan_all_free(pl, all);
            return false;
        }
    *out = all;
    return true;
}

void tg_plan_all_free(const tg_plan *pl, tg_class_plan *all)
{
    if (!all)
        return;
    for (int c = 0; c < tg_plan_nclasses(pl); c++)
        tg_class_free(&all[c]);
    free(all);
}

int tg_io_r0(const tg_plan *pl, tg_coord c)
{
    return tg_mesh_row_block(&pl->mesh, c) * pl->R;
}

int tg_io_c0(const tg_plan *pl, tg_coord c)
{
    return c.j * pl->Cq;
}

int tg_step_root(const tg_plan *pl, tg_coord c, const tg_step *s)
{
    if (s->kind != TG_STEP_BCAST && s->kind != TG_STEP_REDUCE)
        return -1;
    return tg_group_member(&pl->mesh, s->group, c, s->root_local);
}

const char *tg_step_kind_name(tg_step_kind k)
{
    switch (k) {
    case TG_STEP_BCAST: return "bcast";
    case TG_STEP_ALLREDUCE: return "allreduce";
    case TG_STEP_GEMM: return "gemm";
    case TG_STEP_LN_ROWSUM: return "ln_rowsum";
    case TG_STEP_RESID_ROWSUM: return "resid_rowsum";
    case TG_STEP_LN_SQDEV: return "ln_sqdev";
    case TG_STEP_LN_APPLY: return "ln_apply";
    case TG_STEP_BIAS_GELU: return "bias_gelu";
    case TG_STEP_ATTENTION: return "attention";
    case TG_STEP_REDUCE: return "reduce";
    case TG_STEP_GELU_SAVE: return "gelu_save";
    case TG_STEP_COLSUM: return "colsum";
    case TG_STEP_GELU_BWD: return "gelu_bwd";
    case TG_STEP_LN_BWD_SUMS: return "ln_bwd_sums";
    case TG_STEP_LN_BWD_APPLY: return "ln_bwd_apply";
    case TG_STEP_ATTN_BWD: return "attention_bwd";
    case TG_STEP_ADAMW: return "adamw";
    case TG_STEP_EMBED: return "embed";
    case TG_STEP_POS_ADD: return "pos_add";
    case TG_STEP_LM_ROWMAX: return "lm_rowmax";
    case TG_STEP_LM_SUMS: return "lm_sums";
    case TG_STEP_LM_LOSS: return "lm_loss";
    case TG_STEP_LM_DLOGITS: return "lm_dlogits";
    case TG_STEP_EMBED_BWD: return "embed_bwd";
    case TG_STEP_POS_BWD: return "pos_bwd";
    case TG_STEP_CAST: return "cast";
    case TG_STEP_GRAD_ACC: return "grad_acc";
    case TG_STEP_KV_WRITE: return "kv_write";
    case TG_STEP_ATTN_DECODE: return "attn_decode";
    case TG_STEP_LM_ARGMAX: return "lm_argmax";
    case TG_STEP_REDUCESCATTER: return "reducescatter";
    case TG_STEP_ALLGATHER: return "allgather";
    case TG_STEP_COPY: return "copy";
    }
    return "?";
}
