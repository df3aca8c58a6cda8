/*
 * plan_builder.c - the bottom layer of the planner: the primitives every scheme
 * builds a class program with (plan_builder.h). A builder appends to one class
 * plan buffers (named, shaped, typed), weight shards and their pieces, steps and
 * the operands each reads and writes; on top of those come the collectives (a
 * broadcast from or a reduce onto a local root of a group, all-reduces), the
 * GEMM step, the bf16 operand casts and one AdamW step per shard.
 *
 * Design: this file knows buffers, steps, groups and the spec's element type;
 * it never asks which scheme it builds for. Two defaults follow the Tesseract
 * layout and are documented where they are set: a new shard's replica group
 * (dep for a matrix, coldep for a vector; megatron's planner sets its own),
 * and a broadcast's receive buffer pinned to the GEMM of the previous SUMMA
 * step of the same op (no such GEMM: nothing). It calls no other plan*.c file: the shared step sequences
 * (plan_steps.c), the scheme planners (plan_tesseract.c, plan_megatron.c and
 * their language models) and the top (plan.c) call down into it, and
 * tools/plandeps.py fails the unit checks if a call ever runs the other way.
 * Allocation failure sets the builder's oom flag; the caller reports it once.
 */
#include "plan_builder.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* vsnprintf for buffer names, which use only %d and %s: a plan names thousands of buffers per class, and
 * the C library's formatter was a tenth of the planning time. Truncates at cap - 1 characters. */
static void name_fmt(char *dst, size_t cap, const char *fmt, va_list ap)
{
    size_t n = 0;
    for (const char *f = fmt; *f && n + 1 < cap; f++) {
        if (f[0] == '%' && f[1] == 's') {
            for (const char *a = va_arg(ap, const char *); *a && n + 1 < cap; a++)
                dst[n++] = *a;
            f++;
        } else if (f[0] == '%' && f[1] == 'd') {
            int v = va_arg(ap, int);
            char digits[16];
            int k = 0;
            unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
            do
                digits[k++] = (char)('0' + u % 10);
            while ((u /= 10) && k < 15);
            if (v < 0 && n + 1 < cap)
                dst[n++] = '-';
            while (k > 0 && n + 1 < cap)
                dst[n++] = digits[--k];
            f++;
        } else {
            dst[n++] = *f;
        }
    }
    dst[n] = '\0';
}

int tg_dtype_size(int dtype)
{
    return dtype == TG_BUF_BF16 ? 2 : 4;
}

long long tg_buf_slots(const tg_buf *b)
{
    return (b->elems * tg_dtype_size(b->dtype) + 3) / 4;
}

int tg_pb_buf(tg_builder *b, int rows, int cols, int persistent, const char *what, const char *fmt, ...)
{
    tg_class_plan *rp = b->rp;
    if (rp->nbufs == b->cap_bufs) {
        int cap = b->cap_bufs ? 2 * b->cap_bufs : 64;
        tg_buf *nb = realloc(rp->bufs, (size_t)cap * sizeof *nb);
        if (!nb) {
            b->oom = true;
            return -1;
        }
        rp->bufs = nb;
        b->cap_bufs = cap;
    }
    tg_buf *x = &rp->bufs[rp->nbufs];
    memset(x, 0, sizeof *x);
    va_list ap;
    va_start(ap, fmt);
    name_fmt(x->name, sizeof x->name, fmt, ap);
    va_end(ap);
    if (b->name_sfx) {
        size_t nl = strlen(x->name), sl = strlen(b->name_sfx);
        if (nl + sl < sizeof x->name)
            memcpy(x->name + nl, b->name_sfx, sl + 1);
    }
    /* the LM's pseudo-layers (plan.h) name their shared-step buffers "L-2_..." and "L-3_...": make identifiers */
    static const char *const pseudo[2][2] = {{"L-2_", "embed_"}, {"L-3_", "head_"}};
    for (int k = 0; k < 2; k++)
        if (!strncmp(x->name, pseudo[k][0], 4)) {
            char tmp[sizeof x->name];
            snprintf(tmp, sizeof tmp, "%s%s", pseudo[k][1], x->name + 4);
            memcpy(x->name, tmp, sizeof tmp);
        }
    size_t wl = strlen(what);
    if (wl >= sizeof x->what)
        wl = sizeof x->what - 1;
    memcpy(x->what, what, wl);
    x->what[wl] = '\0';
    x->rows = rows;
    x->cols = cols;
    x->elems = (long long)rows * cols;
    x->persistent = persistent;
    x->first = -1;
    x->last = -1;
    return rp->nbufs++;
}

int tg_pb_buf_like(tg_builder *b, int like, const char *what, const char *fmt, ...)
{
    if (like < 0)
        return -1;
    char name[sizeof b->rp->bufs[0].name];
    va_list ap;
    va_start(ap, fmt);
    name_fmt(name, sizeof name, fmt, ap);
    va_end(ap);
    int rows = b->rp->bufs[like].rows, cols = b->rp->bufs[like].cols, dtype = b->rp->bufs[like].dtype;
    if (b->rp->bufs[like].mb_stride > 0) { /* an I/O block of every micro-batch: like its view of one */
        if (rows > 1)
            rows /= b->pl->mb;
        else
            cols /= b->pl->mb;
    }
    int id = tg_pb_buf(b, rows, cols, 0, what, "%s", name);
    if (id >= 0)
        b->rp->bufs[id].dtype = dtype;
    return id;
}

int tg_pb_bf16_out(tg_builder *b, int buf)
{
    if (buf >= 0 && b->pl->spec.dtype == TG_BF16)
        b->rp->bufs[buf].dtype = TG_BUF_BF16;
    return buf;
}

/* "L3", "embed", "head": the layer part of a generated name (the LM's pseudo-layers are negative) */
static const char *layer_tag(char *dst, size_t cap, int layer)
{
    if (layer == TG_LAYER_EMBED)
        snprintf(dst, cap, "embed");
    else if (layer == TG_LAYER_HEAD)
        snprintf(dst, cap, "head");
    else
        snprintf(dst, cap, "L%d", layer);
    return dst;
}

/* A training weight's persistent bf16 copy (tg_param.w16): declared when a GEMM first reads the weight; -1 when buf
 * is no weight's fp32 master. Persistent: it carries the weights from one step's optimizer to the next step's GEMMs,
 * so it costs 2 bytes an element of arena for the whole run, in the memory plan like the master. Inference and
 * generation keep one too for each fp32 weight a GEMM reads (the tied head's wte, which the embedding reads in fp32,
 * and fc1's bias; their other weights are bf16 shards already): the runtime rounds it once after loading (as
 * training's before its first step), where a cast step would round it again in every forward or decode step. */
static int weight_copy(tg_builder *b, int buf)
{
    tg_class_plan *rp = b->rp;
    for (int i = 0; i < rp->nparams; i++) {
        tg_param *p = &rp->params[i];
        if (p->buf != buf)
            continue;
        if (p->w16 < 0) {
            char what[160], name[sizeof rp->bufs[0].name]; /* tg_pb_buf may move rp->bufs */
            snprintf(what, sizeof what, "bf16 copy of the shard of %.64s for the GEMMs, written by %s", p->name,
                     b->pl->spec.mode == TG_TRAIN ? "AdamW" : "the runtime after loading");
            snprintf(name, sizeof name, "%s", rp->bufs[buf].name);
            int id = tg_pb_buf(b, rp->bufs[buf].rows, rp->bufs[buf].cols, 1, what, "bf16_%s", name);
            if (id < 0)
                return -1;
            rp->bufs[id].dtype = TG_BUF_BF16;
            p->w16 = id;
        }
        return rp->params[i].w16;
    }
    return -1;
}

/* The layernorm-backward step that wrote buf (g += dx, slot 6) among the last few steps, when no step after it touches
 * buf and it writes no copy yet: it can write buf's bf16 copy too (the residual gradient the next op's GEMMs read,
 * rounded from the very values it stores, so the same bits as a cast step after it). NULL otherwise. Looks back at
 * most 16 steps (the collectives of the layernorm parameters' gradients come between): O(1) per operand. */
static tg_step *ln_writer(tg_builder *b, int buf)
{
    tg_class_plan *rp = b->rp;
    for (int i = rp->nsteps - 1; i >= 0 && i >= rp->nsteps - 16; i--) {
        tg_step *s = &rp->steps[i];
        bool touches = false;
        for (int k = 0; k < TG_STEP_MAXBUF && !touches; k++)
            touches = s->buf[k] == buf;
        if (!touches)
            continue;
        return s->kind == TG_STEP_LN_BWD_APPLY && s->buf[6] == buf && s->buf[7] < 0 && s->phase == b->phase &&
                       b->rp->bufs[buf].mb_stride == 0
                   ? s
                   : NULL;
    }
    return NULL;
}

int tg_pb_operand(tg_builder *b, int layer, const char *op, int buf)
{
    if (buf < 0 || b->pl->spec.dtype != TG_BF16 || b->rp->bufs[buf].dtype != TG_BUF_F32)
        return buf;
    int w16 = weight_copy(b, buf); /* a training weight: no cast, AdamW keeps its bf16 copy */
    if (w16 >= 0 || b->oom)
        return w16;
    if (b->ncast > 0 && (b->cast_phase != b->phase || b->cast_layer != layer || strcmp(b->cast_op, op) != 0))
        b->ncast = 0; /* another op: its buffers may have been written since */
    for (int k = 0; k < b->ncast; k++)
        if (b->cast[k].src == buf)
            return b->cast[k].dst;
    char src[sizeof b->rp->bufs[0].name], tag[16], what[160];
    snprintf(src, sizeof src, "%s", b->rp->bufs[buf].name);
    tg_step *ln = ln_writer(b, buf);
    if (ln)
        snprintf(what, sizeof what, "bf16 copy of %s for the %s GEMMs, written with it by the layernorm backward", src,
                 op);
    else
        snprintf(what, sizeof what, "copy of %s for the %s GEMMs%s, rounded to nearest even", src, op,
                 b->phase == TG_PHASE_BWD ? " of the backward" : "");
    /* the forward and backward casts of one buffer live in different functions, but name them apart anyway */
    int id = tg_pb_buf_like(b, buf, what, "bf16%s_%s_%s_%s", b->phase == TG_PHASE_BWD ? "b" : "",
                            layer_tag(tag, sizeof tag, layer), op, src);
    if (id < 0)
        return -1;
    b->rp->bufs[id].dtype = TG_BUF_BF16;
    if ((ln = ln_writer(b, buf)) != NULL) {
        tg_pb_use(ln, 7, id, TG_ACC_W); /* that step writes the copy beside buf: no cast step, no pass over buf */
        ln->label = "dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)); g += dx; and bf16(g) for the next GEMMs";
    } else {
        tg_step *s = tg_pb_step(b, TG_STEP_CAST, layer, op, -1);
        if (!s)
            return -1;
        s->count = b->rp->bufs[id].elems; /* of the copy: an I/O block's view of one micro-batch */
        tg_pb_use(s, 0, buf, TG_ACC_R);
        tg_pb_use(s, 1, id, TG_ACC_W);
        s->desc = TG_D_CAST;
    }
    if (b->ncast == (int)(sizeof b->cast / sizeof b->cast[0]))
        b->ncast = 0;
    b->cast[b->ncast].src = buf;
    b->cast[b->ncast++].dst = id;
    b->cast_phase = b->phase;
    b->cast_layer = layer;
    b->cast_op = op;
    return id;
}

void tg_pb_operand_is(tg_builder *b, int layer, const char *op, int buf, int copy)
{
    if (buf < 0 || copy < 0)
        return;
    b->ncast = 0; /* a new (phase, layer, op): what was cached before belongs to another op */
    b->cast[b->ncast].src = buf;
    b->cast[b->ncast++].dst = copy;
    b->cast_phase = b->phase;
    b->cast_layer = layer;
    b->cast_op = op;
}

tg_step *tg_pb_step(tg_builder *b, tg_step_kind kind, int layer, const char *op, int t)
{
    tg_class_plan *rp = b->rp;
    if (rp->nsteps == b->cap_steps) {
        int cap = b->cap_steps ? 2 * b->cap_steps : 128;
        tg_step *ns = realloc(rp->steps, (size_t)cap * sizeof *ns);
        if (!ns) {
            b->oom = true;
            return NULL;
        }
        rp->steps = ns;
        b->cap_steps = cap;
    }
    tg_step *s = &rp->steps[rp->nsteps++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->phase = b->phase;
    s->layer = layer;
    s->op = op;
    s->t = t;
    s->root_local = -1;
    /* set while the backward recomputes a layer (plan_builder.h); name_sfx is also set for generation's decode step */
    s->again = b->name_sfx != NULL && b->phase == TG_PHASE_BWD;
    s->desc = TG_D_LABEL;
    s->label = "";
    for (int i = 0; i < TG_STEP_MAXBUF; i++)
        s->buf[i] = -1;
    s->pin[0] = s->pin[1] = -1;
    s->fused = -1;
    return s;
}

void tg_pb_use(tg_step *s, int slot, int buf, unsigned char acc)
{
    s->buf[slot] = buf;
    s->acc[slot] = acc;
}

void tg_pb_pin_to_gemm(tg_builder *b, int buf, int out)
{
    tg_class_plan *rp = b->rp;
    if (buf < 0 || out < 0 || rp->bufs[out].persistent)
        return;
    for (int i = rp->nsteps - 1; i >= 0; i--) {
        tg_step *g = &rp->steps[i];
        if (g->kind != TG_STEP_GEMM)
            continue;
        if (g->phase != b->phase || (g->buf[1] != buf && g->buf[2] != buf) || g->pin[0] == out || g->pin[1] == out)
            return;
        if (g->pin[0] < 0)
            g->pin[0] = out;
        else if (g->pin[1] < 0)
            g->pin[1] = out;
        return;
    }
}

/* ---- weight shards ---------------------------------------------------------- */

int tg_pb_param(tg_builder *b, const char *name, int ndim, int full0, int full1, int rows, int cols)
{
    tg_class_plan *rp = b->rp;
    if (rp->nparams == b->cap_params) {
        int cap = b->cap_params ? 2 * b->cap_params : 16;
        tg_param *np = realloc(rp->params, (size_t)cap * sizeof *np);
        if (!np) {
            b->oom = true;
            return -1;
        }
        rp->params = np;
        b->cap_params = cap;
    }
    tg_param *p = &rp->params[rp->nparams++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->full[0] = full0;
    p->full[1] = full1;
    char ident[64], what[120];
    int n = 0;
    for (const char *c = name; *c && n < 60; c++)
        ident[n++] = (*c == '.') ? '_' : *c;
    ident[n] = '\0';
    snprintf(what, sizeof what, "shard of %s", name);
    p->buf = tg_pb_buf(b, rows, cols, 1, what, "w_%s", ident);
    p->grad = p->m = p->v = p->w16 = -1;
    /* bf16 inference stores a matrix as its GEMMs read it (docs/BF16.md); a caller whose matrix something else
     * reads too (the LM's wte, wpe) sets it back to fp32 */
    if (ndim == 2 && b->pl->spec.dtype == TG_BF16 && b->pl->spec.mode != TG_TRAIN && p->buf >= 0)
        rp->bufs[p->buf].dtype = TG_BUF_BF16;
    /* tesseract: a weight block is repeated on every depth, a vector block on every (i, k) */
    p->replica = ndim == 2 ? TG_DEP : TG_COLDEP;
    if (b->pl->spec.mode == TG_TRAIN) {
        snprintf(what, sizeof what, "gradient of the shard of %s", name);
        /* micro-batches: a gradient sums every micro-batch's part, so it outlives the functions of each */
        p->grad = tg_pb_buf(b, rows, cols, b->pl->mb > 1, what, "g_%s", ident);
        /* optimizer.shard: the moments of one slice of the shard, ceil(elems/d) (the last slices may be shorter) */
        long long n = (long long)rows * cols, d = b->pl->mesh.d;
        p->shard = tg_pb_sharded(b, p->replica) ? (n + d - 1) / d : 0;
        int mr = p->shard ? 1 : rows, mc = p->shard ? (int)p->shard : cols;
        const char *sl = p->shard ? "this rank's slice of the shard" : "the shard";
        snprintf(what, sizeof what, "AdamW first moment of %s of %s", sl, name);
        p->m = tg_pb_buf(b, mr, mc, 1, what, "m_%s", ident);
        snprintf(what, sizeof what, "AdamW second moment of %s of %s", sl, name);
        p->v = tg_pb_buf(b, mr, mc, 1, what, "v_%s", ident);
    }
    return rp->nparams - 1;
}

bool tg_pb_sharded(const tg_builder *b, int g)
{
    const tg_plan *pl = b->pl;
    return pl->spec.opt.shard && pl->spec.mode == TG_TRAIN && pl->mesh.scheme == TG_SCHEME_TESSERACT &&
           pl->mesh.d > 1 && g == TG_DEP;
}

void tg_pb_param_replica(tg_builder *b, int param, int g)
{
    if (param < 0)
        return;
    tg_param *p = &b->rp->params[param];
    p->replica = g;
    if (!p->shard || tg_pb_sharded(b, g))
        return;
    p->shard = 0;
    const tg_buf *w = &b->rp->bufs[p->buf];
    int mv[2] = {p->m, p->v};
    for (int k = 0; k < 2; k++) {
        tg_buf *m = &b->rp->bufs[mv[k]];
        m->rows = w->rows;
        m->cols = w->cols;
        m->elems = w->elems;
        char *at = strstr(m->what, "this rank's slice of the shard");
        if (at)
            snprintf(m->what, sizeof m->what, "AdamW %s moment of the shard of %s", k ? "second" : "first",
                     p->name);
    }
}

void tg_pb_piece(tg_builder *b, int param, int r0, int nr, int c0, int nc, int dst_col)
{
    if (param < 0)
        return;
    tg_param *p = &b->rp->params[param];
    tg_piece pc = {r0, nr, c0, nc, dst_col};
    p->piece[p->npieces++] = pc;
}

/* ---- collectives ---------------------------------------------------------------- */

/* One SUMMA broadcast of buf over group g from local root t: read on the root, written elsewhere.
 * It moves X(h,t) over a row or W(t,j) over a column; why ends its description (" (for dX)"). */
tg_step *tg_pb_bcast(tg_builder *b, int layer, const char *op, int t, tg_group g, int buf, long long count,
                     const char *why)
{
    const tg_mesh *m = &b->pl->mesh;
    tg_coord co = b->c;
    tg_step *s = tg_pb_step(b, TG_STEP_BCAST, layer, op, t);
    if (!s)
        return NULL;
    s->group = g;
    s->group_size = tg_group_size(m, g);
    s->root_local = t;
    s->is_root = tg_group_local(m, g, co) == t;
    s->count = count;
    tg_pb_use(s, 0, buf, s->is_root ? TG_ACC_R : TG_ACC_W);
    s->desc = TG_D_BCAST;
    s->label = why;
    if (!s->is_root && t > 0) {
        /* keep the receive buffer off the bytes of the previous SUMMA step's GEMM operands */
        tg_class_plan *rp = b->rp;
        for (int i = rp->nsteps - 2; i >= 0; i--) {
            tg_step *g = &rp->steps[i];
            if (g->kind == TG_STEP_GEMM && g->phase == b->phase && g->layer == layer && g->t == t - 1 &&
                !strcmp(g->op, op)) {
                g->pin[g->pin[0] < 0 ? 0 : 1] = buf;
                break;
            }
        }
    }
    return s;
}

/* Reduce P onto local root t of g: dX(h,t) over a row (ABT) or dW(t,j) over a column (ATB). */
tg_step *tg_pb_reduce(tg_builder *b, int layer, const char *op, int t, tg_group g, int buf, long long count)
{
    const tg_plan *pl = b->pl;
    tg_coord co = b->c;
    tg_step *s = tg_pb_step(b, TG_STEP_REDUCE, layer, op, t);
    if (!s)
        return NULL;
    s->group = g;
    s->group_size = tg_group_size(&pl->mesh, g);
    s->root_local = t;
    s->is_root = tg_group_local(&pl->mesh, g, co) == t;
    s->count = count;
    tg_pb_use(s, 0, buf, s->is_root ? (TG_ACC_R | TG_ACC_W) : TG_ACC_R);
    s->desc = TG_D_REDUCE;
    return s;
}

void tg_pb_allreduce_row(tg_builder *b, int layer, const char *op, int buf, long long count, const char *what)
{
    int n = tg_group_size(&b->pl->mesh, TG_ROW);
    if (n == 1)
        return; /* a group of one: nothing to sum */
    tg_step *s = tg_pb_step(b, TG_STEP_ALLREDUCE, layer, op, -1);
    if (!s)
        return;
    s->group = TG_ROW;
    s->group_size = n;
    s->count = count;
    tg_pb_use(s, 0, buf, TG_ACC_R | TG_ACC_W);
    s->desc = TG_D_ALLREDUCE;
    s->label = what;
}

void tg_pb_allreduce_exact(tg_builder *b, int layer, const char *op, tg_group g, int buf, long long count,
                            const char *what)
{
    const tg_plan *pl = b->pl;
    int n = tg_group_size(&pl->mesh, g);
    if (n == 1)
        return;
    tg_step *s = tg_pb_step(b, TG_STEP_ALLREDUCE, layer, op, -1);
    if (!s)
        return;
    s->group = g;
    s->group_size = n;
    s->exact = 1;
    s->count = count;
    tg_pb_use(s, 0, buf, TG_ACC_R | TG_ACC_W);
    s->desc = TG_D_ALLREDUCE_X;
    s->label = what;
}

/* optimizer.shard: the reduce-scatter that replaces the exact all-reduce of a sharded weight's gradient. */
static void reduce_scatter(tg_builder *b, int layer, const char *op, tg_group g, int buf, long long count,
                           const char *what)
{
    tg_step *s = tg_pb_step(b, TG_STEP_REDUCESCATTER, layer, op, -1);
    if (!s)
        return;
    s->group = g;
    s->group_size = tg_group_size(&b->pl->mesh, g);
    s->count = count;
    tg_pb_use(s, 0, buf, TG_ACC_R | TG_ACC_W);
    s->desc = TG_D_RSCATTER;
    s->label = what;
}

/* The weight-stationary layout's all-gather or reduce-scatter of buf [count] over g (count divisible by the group's
 * size: member k's slice is k*count/size..); what names the payload. */
tg_step *tg_pb_ws_collective(tg_builder *b, int layer, const char *op, tg_step_kind kind, tg_group g, int buf,
                             long long count, const char *what)
{
    tg_step *s = tg_pb_step(b, kind, layer, op, -1);
    if (!s)
        return NULL;
    s->group = g;
    s->group_size = tg_group_size(&b->pl->mesh, g);
    s->count = count;
    s->ws = 1;
    tg_pb_use(s, 0, buf, TG_ACC_R | TG_ACC_W);
    s->desc = kind == TG_STEP_ALLGATHER ? TG_D_AGATHER : TG_D_RSCATTER;
    s->label = what;
    return s;
}

tg_step *tg_pb_copy(tg_builder *b, int layer, const char *op, int src, long long soff, int dst, long long doff,
                    long long count, const char *what)
{
    tg_step *s = tg_pb_step(b, TG_STEP_COPY, layer, op, -1);
    if (!s)
        return NULL;
    s->count = count;
    s->soff = soff;
    s->boff = (int)doff;
    tg_pb_use(s, 0, src, TG_ACC_R);
    tg_pb_use(s, 1, dst, TG_ACC_W);
    s->desc = TG_D_LABEL;
    s->label = what;
    return s;
}

/* ---- GEMM, optimizer ------------------------------------------------------------- */

tg_step *tg_pb_gemm(tg_builder *b, int layer, const char *op, int t, int ta, int tb, int m, int n, int k, int A,
                          int lda, int B, int ldb, int C, int ldc)
{
    tg_step *s = tg_pb_step(b, TG_STEP_GEMM, layer, op, t);
    if (!s)
        return NULL;
    s->m = m;
    s->n = n;
    s->k = k;
    s->lda = lda;
    s->ldb = ldb;
    s->ldc = ldc;
    s->transa = ta;
    s->transb = tb;
    s->beta = 0.0f;
    s->flops = 2LL * m * n * k;
    tg_pb_use(s, 0, A, TG_ACC_R);
    tg_pb_use(s, 1, B, TG_ACC_R);
    tg_pb_use(s, 2, C, TG_ACC_W);
    return s;
}

void tg_pb_optimizer(tg_builder *b)
{
    tg_class_plan *rp = b->rp;
    for (int i = 0; i < rp->nparams; i++) {
        const tg_param *p = &rp->params[i];
        const tg_buf *pb = &rp->bufs[p->buf];
        tg_step *s = tg_pb_step(b, TG_STEP_ADAMW, -1, "adamw", -1);
        if (!s)
            return;
        s->count = pb->elems;
        s->decay = p->ndim == 2;
        tg_pb_use(s, 0, p->buf, TG_ACC_R | TG_ACC_W);
        tg_pb_use(s, 1, p->grad, TG_ACC_R);
        tg_pb_use(s, 2, p->m, TG_ACC_R | TG_ACC_W);
        tg_pb_use(s, 3, p->v, TG_ACC_R | TG_ACC_W);
        if (p->w16 >= 0)
            tg_pb_use(s, 4, p->w16, TG_ACC_W); /* rounded from the updated param: the next step's GEMMs read it */
        s->desc = TG_D_ADAMW;
        s->aux = i;
        if (p->shard) { /* this rank's slice: count is one slice (the last ones shorter; the runtime clips) */
            s->slice_of = s->count;
            s->count = p->shard;
        }
    }
    /* optimizer.shard: every member of dep(i,j) updated its slice; the all-gather copies each slice's bits to the
     * others, so the replicas are identical by construction */
    for (int i = 0; i < rp->nparams; i++) {
        const tg_param *p = &rp->params[i];
        if (!p->shard)
            continue;
        tg_step *s = tg_pb_step(b, TG_STEP_ALLGATHER, -1, "adamw", -1);
        if (!s)
            return;
        s->group = (tg_group)p->replica;
        s->group_size = tg_group_size(&b->pl->mesh, s->group);
        s->count = rp->bufs[p->buf].elems;
        tg_pb_use(s, 0, p->buf, TG_ACC_R | TG_ACC_W);
        s->desc = TG_D_AGATHER;
        s->label = p->name;
        s->aux = i;
    }
}

/* ---- micro-batches ---------------------------------------------------------------------------------------------- */

int tg_pb_grad_target(tg_builder *b, int grad)
{
    if (b->pl->mb <= 1 || grad < 0)
        return grad;
    char what[100];
    snprintf(what, sizeof what, "this micro-batch's part of %s", b->rp->bufs[grad].name);
    return tg_pb_buf_like(b, grad, what, "mb_%s", b->rp->bufs[grad].name);
}

void tg_pb_grad_acc(tg_builder *b, int layer, const char *op, int grad, int part)
{
    if (part == grad || part < 0 || grad < 0)
        return;
    tg_step *s = tg_pb_step(b, TG_STEP_GRAD_ACC, layer, op, -1);
    if (!s)
        return;
    tg_pb_use(s, 0, grad, TG_ACC_R | TG_ACC_W);
    tg_pb_use(s, 1, part, TG_ACC_R);
    s->count = b->rp->bufs[grad].elems;
    s->label = "weight gradient = this micro-batch's part (the first), += it (the later ones)";
}

void tg_pb_grad_allreduce(tg_builder *b, int layer, const char *op, tg_group g, int buf, long long count,
                          const char *what)
{
    int first = b->rp->nsteps;
    if (tg_pb_sharded(b, g))
        reduce_scatter(b, layer, op, g, buf, count, what);
    else
        tg_pb_allreduce_exact(b, layer, op, g, buf, count, what);
    if (b->pl->mb > 1) /* the micro-batches' gradients are summed once the last one's is accumulated */
        for (int i = first; i < b->rp->nsteps; i++)
            b->rp->steps[i].last_mb = true;
}

int tg_pb_io_buf(tg_builder *b, int rows, int cols, long long stride, const char *what, const char *name)
{
    int id = tg_pb_buf(b, rows, cols, 1, what, "%s", name);
    if (id >= 0 && b->pl->mb > 1)
        b->rp->bufs[id].mb_stride = stride;
    return id;
}
