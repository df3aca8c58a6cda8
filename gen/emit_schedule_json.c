/*
 * emit_schedule_json.c - the plan as data (format: docs/SCHEDULE.md, version
 * 2): schedule.json, the index (mesh, model, every rank with its class and
 * block, every class with its figures and files, the mesh totals per phase
 * and layer, and the block map of x and of layer 0's tensors), and per class
 * schedule/rank_iI_jJ.json (its buffers, shards and steps). The class file is
 * also written as schedule/rank_iI_jJ.js, the same JSON wrapped in a call, so
 * that schedule.html can load one class at a time from disk (a page opened
 * from a file may load scripts, not read files).
 *
 * Strings are written with '<', '>' and '&' escaped as \u003c etc. (still
 * plain JSON), so they can never end the page's <script>. Like every emitter
 * it decides nothing: each value is a plan field, a product with the element
 * size (bytes = 4 * elements), or the logical traffic of a step from
 * tg_step_traffic (inspect.c). A class file speaks for every rank of the
 * class: roots are local indices (root_local) and descriptions use k; the
 * index gives what a reader needs to name the ranks: the mesh's placement and
 * its strides, rank = i*si + j*sj + k*sk (mesh.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "inspect.h"
#include "streams.h"
#include "summary.h"
#include "version.h"

/* A JSON string that is also safe inside an HTML <script> element. */
static void jstr(tg_sb *o, const char *s)
{
    tg_sb_putn(o, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            tg_sb_printf(o, "\\%c", *p);
        else if (*p < 32 || *p == '<' || *p == '>' || *p == '&' || *p == 127)
            tg_sb_printf(o, "\\u%04x", *p);
        else
            tg_sb_putn(o, (const char *)p, 1);
    }
    tg_sb_putn(o, "\"", 1);
}

/* the world ranks of class (stage, i, j) */
static void class_ranks(tg_sb *o, const tg_plan *pl, int stage, int i, int j)
{
    tg_sb_puts(o, "[");
    for (int k = 0; k < pl->mesh.d; k++)
        tg_sb_printf(o, "%s%d", k ? "," : "",
                     tg_mesh_rank(&pl->mesh, (tg_coord){i, j, k}) + tg_stage_rank0(pl, stage));
    tg_sb_puts(o, "]");
}

/* The distinct descriptions of a class's steps, each printed once in "texts": a 96-layer class has tens
 * of thousands of steps but a few hundred different descriptions. Open addressing over indices. */
typedef struct texts {
    char **s;
    int n, cap;
    int *slot, nslot;
} texts;

static unsigned long long fnv(const char *s)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

/* index of s in t, added if new; -1 when out of memory */
static int text_id(texts *t, const char *s)
{
    if (2 * (t->n + 1) > t->nslot) {
        int nslot = t->nslot ? 2 * t->nslot : 1024;
        int *ns = calloc((size_t)nslot, sizeof *ns);
        if (!ns)
            return -1;
        for (int i = 0; i < t->n; i++) {
            int a = (int)(fnv(t->s[i]) % (unsigned)nslot);
            while (ns[a])
                a = (a + 1) % nslot;
            ns[a] = i + 1;
        }
        free(t->slot);
        t->slot = ns;
        t->nslot = nslot;
    }
    int a = (int)(fnv(s) % (unsigned)t->nslot);
    while (t->slot[a]) {
        if (!strcmp(t->s[t->slot[a] - 1], s))
            return t->slot[a] - 1;
        a = (a + 1) % t->nslot;
    }
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 256;
        char **nn = realloc(t->s, (size_t)cap * sizeof *nn);
        if (!nn)
            return -1;
        t->s = nn;
        t->cap = cap;
    }
    if (!(t->s[t->n] = strdup(s)))
        return -1;
    t->slot[a] = ++t->n;
    return t->n - 1;
}

static void texts_free(texts *t)
{
    for (int i = 0; i < t->n; i++)
        free(t->s[i]);
    free(t->s);
    free(t->slot);
}

/* One step as an array, in the order of STEP_FIELDS; false when out of memory. */
#define STEP_FIELDS                                                                                                    \
    "[\"step\",\"phase\",\"layer\",\"op\",\"t\",\"kind\",\"flops\",\"buffers\",\"what\",\"comm\",\"gemm\",\"shape\","   \
    "\"stream\",\"wait\",\"wait_buffers\",\"signal\",\"overlaps\",\"fused\"]"
#define COMM_FIELDS                                                                                                    \
    "[\"group\",\"group_size\",\"root_local\",\"is_root\",\"dir\",\"elems\",\"recv_bytes\",\"sent_bytes\","        \
    "\"reduced_bytes\",\"elem_bytes\"]"
#define PSTEP_FIELDS                                                                                                   \
    "[\"step\",\"kind\",\"mb\",\"at\",\"peer_stage\",\"peer_offset\",\"slot\",\"buffer\",\"offset\",\"bytes\",\"joint\"]"
#define GEMM_FIELDS "[\"m\",\"n\",\"k\",\"lda\",\"ldb\",\"ldc\",\"beta\",\"transa\",\"transb\"]"
#define SHAPE_FIELDS "[\"rows\",\"cols\",\"hidden\",\"nseq\",\"seq\",\"heads\",\"hdim\",\"eps\"]"

static bool step_row(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, tg_coord co, int id, texts *tx)
{
    const tg_step *s = &rp->steps[id];
    char what[256];
    int w = text_id(tx, tg_step_text(what, sizeof what, pl, rp, co, s));
    if (w < 0)
        return false;
    tg_sb_printf(o, "[%d,\"%s\",%d,", id, tg_phase_label(s->phase), s->layer);
    jstr(o, s->op);
    if (s->t >= 0)
        tg_sb_printf(o, ",%d,", s->t);
    else
        tg_sb_puts(o, ",null,");
    jstr(o, tg_step_kind_name(s->kind));
    tg_sb_printf(o, ",%lld,[", s->flops);
    int nb = 0;
    for (int k = 0; k < TG_STEP_MAXBUF; k++)
        if (s->buf[k] >= 0)
            tg_sb_printf(o, "%s[%d,\"%s%s\"]", nb++ ? "," : "", s->buf[k], (s->acc[k] & TG_ACC_R) ? "r" : "",
                         (s->acc[k] & TG_ACC_W) ? "w" : "");
    tg_sb_printf(o, "],%d,", w);
    if (tg_step_is_comm(s)) {
        long long rc, se, re;
        tg_step_traffic(s, &rc, &se, &re);
        tg_sb_printf(o, "[\"%s\",%d,", tg_group_name(s->group), s->group_size);
        if (s->kind == TG_STEP_BCAST || s->kind == TG_STEP_REDUCE)
            tg_sb_printf(o, "%d,%d", s->root_local, s->is_root);
        else
            tg_sb_puts(o, "null,0");
        tg_sb_printf(o, ",\"%s\",%lld,%lld,%lld,%lld,%d],", tg_step_dir(s), s->count, rc, se, re, s->esize);
    } else {
        tg_sb_puts(o, "null,");
    }
    if (s->kind == TG_STEP_GEMM)
        tg_sb_printf(o, "[%d,%d,%d,%d,%d,%d,%g,%d,%d],", s->m, s->n, s->k, s->lda, s->ldb, s->ldc, (double)s->beta,
                     s->transa, s->transb);
    else
        tg_sb_puts(o, "null,");
    if (s->rows || s->nseq)
        tg_sb_printf(o, "[%d,%d,%d,%d,%d,%d,%d,%.9g],", s->rows, s->cols, s->hidden, s->nseq, s->seq, s->heads,
                     s->hdim, s->eps);
    else
        tg_sb_puts(o, "null,");
    /* streams (streams.c): the wait, the buffers behind it (this step's, the waited step's), the overlap */
    tg_sb_printf(o, "\"%s\",", tg_stream_name(s->stream));
    if (s->wait >= 0)
        tg_sb_printf(o, "%d,[%d,%d],", s->wait, s->buf[s->wait_slot], rp->steps[s->wait].buf[s->wait_other_slot]);
    else
        tg_sb_puts(o, "null,null,");
    tg_sb_printf(o, "%d,", s->signal);
    if (s->overlaps >= 0)
        tg_sb_printf(o, "%d,", s->overlaps);
    else
        tg_sb_puts(o, "null,");
    /* fuse.c: the other step of a GEMM + GeLU pair that the CUDA program runs as one cuBLASLt call */
    if (s->fused >= 0)
        tg_sb_printf(o, "%d]", s->fused);
    else
        tg_sb_puts(o, "null]");
    return true;
}

bool tg_emit_class_json(const tg_plan *pl, const tg_class_plan *rp, tg_sb *o, tg_err *err)
{
    const tg_mesh *m = &pl->mesh;
    tg_coord co = {rp->i, rp->j, m->d == 1 ? 0 : -1};
    tg_sb_printf(o, "{\"format\":\"tessgen-schedule-class\",\"format_version\":2,\"tessgen\":\"%s\",\"generated\":",
                 TG_VERSION);
    jstr(o, "DO NOT EDIT: generated by tessgen; format in docs/SCHEDULE.md");
    tg_sb_printf(o, ",\"fingerprint\":\"%s\",\n\"class\":%d,\"i\":%d,\"j\":%d,", pl->fingerprint,
                 (rp->stage * m->q + rp->i) * m->q + rp->j, rp->i, rp->j);
    if (tg_plan_stages(pl) > 1)
        tg_sb_printf(o, "\"stage\":%d,", rp->stage);
    tg_sb_puts(o, "\"ranks\":");
    class_ranks(o, pl, rp->stage, rp->i, rp->j);
    tg_sb_printf(o, ",\"arena_bytes\":%lld,\"weight_bytes\":%lld,\"flops\":%lld,\"nsteps\":%d,\n", 4 * rp->arena_elems,
                 4 * rp->weight_elems, rp->flops, rp->nsteps);
    const tg_buf *x = &rp->bufs[rp->x_buf];
    tg_sb_puts(o, "\"io\":{\"buffer\":");
    jstr(o, x->name);
    tg_sb_printf(o, ",\"c0\":%d,\"rows\":%d,\"cols\":%d},\n", tg_io_c0(pl, (tg_coord){rp->i, rp->j, 0}), x->rows,
                 x->cols);
    tg_sb_puts(o, "\"buffers\":{\"fields\":[\"name\",\"rows\",\"cols\",\"offset\",\"bytes\",\"first\",\"last\","
                  "\"persistent\",\"what\"],\"rows\":[\n");
    for (int i = 0; i < rp->nbufs; i++) {
        const tg_buf *b = &rp->bufs[i];
        tg_sb_puts(o, "[");
        jstr(o, b->name);
        tg_sb_printf(o, ",%d,%d,%lld,%lld,%d,%d,%d,", b->rows, b->cols, 4 * b->offset,
                     (long long)tg_dtype_size(b->dtype) * b->elems, b->first, b->last, b->persistent);
        char bw[160];
        jstr(o, tg_buf_text(bw, sizeof bw, pl, co, b));
        tg_sb_printf(o, "]%s\n", i + 1 < rp->nbufs ? "," : "");
    }
    tg_sb_puts(o, "]},\n\"params\":[\n");
    for (int i = 0; i < rp->nparams; i++) {
        const tg_param *p = &rp->params[i];
        tg_sb_puts(o, "{\"name\":");
        jstr(o, p->name);
        if (p->ndim == 1)
            tg_sb_printf(o, ",\"shape\":[%d]", p->full[0]);
        else
            tg_sb_printf(o, ",\"shape\":[%d,%d]", p->full[0], p->full[1]);
        tg_sb_printf(o, ",\"buffer\":%d,\"pieces\":[", p->buf);
        for (int k = 0; k < p->npieces; k++)
            tg_sb_printf(o, "%s{\"r0\":%d,\"nr\":%d,\"c0\":%d,\"nc\":%d,\"dst_col\":%d}", k ? "," : "",
                         p->piece[k].r0, p->piece[k].nr, p->piece[k].c0, p->piece[k].nc, p->piece[k].dst_col);
        tg_sb_printf(o, "]}%s\n", i + 1 < rp->nparams ? "," : "");
    }
    tg_sb_puts(o, "],\n\"steps\":{\"fields\":" STEP_FIELDS ",\"comm_fields\":" COMM_FIELDS ",\"gemm_fields\":"
                  GEMM_FIELDS ",\"shape_fields\":" SHAPE_FIELDS ",\"rows\":[\n");
    texts tx = {0};
    bool ok = true;
    for (int i = 0; i < rp->nsteps && ok; i++) {
        ok = step_row(o, pl, rp, co, i, &tx);
        tg_sb_puts(o, i + 1 < rp->nsteps ? ",\n" : "\n");
    }
    tg_sb_puts(o, "]},\n");
    if (ok && tg_plan_stages(pl) > 1) { /* the stage's proved steps as this class runs them (inspect.h) */
        tg_pipe_view v;
        if (!tg_pipe_view_build(pl, rp, &v, err)) {
            texts_free(&tx);
            return false;
        }
        tg_sb_printf(o, "\"pipeline_steps\":{\"stash\":%d,\"slot_bytes\":%lld,\"fields\":" PSTEP_FIELDS ",\"rows\":[\n",
                     v.stash, v.slot_bytes);
        for (int k = 0; k < v.n; k++) {
            const tg_pstep *st = &v.steps[k];
            tg_sb_printf(o, "[%d,\"%s\",%d,%lld,", k, tg_pstep_kind_name(st->kind), st->mb, st->at);
            if (st->peer_stage >= 0)
                tg_sb_printf(o, "%d,%d,null,%d,%lld,%lld,%d]", st->peer_stage, st->peer_offset, st->buf, st->offset,
                             st->bytes, st->joint);
            else if (st->kind == TG_PSTEP_STASH_SAVE || st->kind == TG_PSTEP_STASH_LOAD)
                tg_sb_printf(o, "null,null,%d,null,null,%lld,0]", st->slot, st->bytes);
            else
                tg_sb_printf(o, "null,null,%d,null,null,null,0]", st->slot);
            tg_sb_puts(o, k + 1 < v.n ? ",\n" : "\n");
        }
        tg_sb_puts(o, "]},\n");
        tg_pipe_view_free(&v);
    }
    tg_sb_puts(o, "\"texts\":[\n");
    for (int i = 0; i < tx.n; i++) {
        jstr(o, tx.s[i]);
        tg_sb_puts(o, i + 1 < tx.n ? ",\n" : "\n");
    }
    tg_sb_puts(o, "]}\n");
    texts_free(&tx);
    return ok ? true : tg_fail(err, "out of memory printing the schedule of class (i=%d, j=%d)", rp->i, rp->j);
}

void tg_emit_class_js(tg_sb *o, const tg_sb *json)
{
    tg_sb_puts(o, "/* DO NOT EDIT: generated by tessgen; the JSON of the same name, for schedule.html */\n"
                  "tessgenClass(");
    tg_sb_putn(o, json->s, json->len);
    tg_sb_puts(o, ");\n");
}

void tg_emit_blockmap_class(tg_sb *o, const tg_class_plan *cp)
{
    /* layer 0's shards of this class: every layer is split alike (params are declared layer by layer) */
    for (int i = 0; i < cp->nparams; i++) {
        const tg_param *p = &cp->params[i];
        if (strncmp(p->name, "h.0.", 4) != 0)
            continue;
        tg_sb_puts(o, o->len ? ",\n" : "");
        tg_sb_printf(o, "[%d,%d,", cp->i, cp->j);
        jstr(o, p->name);
        tg_sb_puts(o, ",[");
        for (int k = 0; k < p->npieces; k++)
            tg_sb_printf(o, "%s[%d,%d,%d,%d]", k ? "," : "", p->piece[k].r0, p->piece[k].nr, p->piece[k].c0,
                         p->piece[k].nc);
        tg_sb_puts(o, "]]");
    }
}

/* Pipeline stages: every stage's proved order (gen/pipe.c), each step with the slot tg_pipe_simulate ran it in
 * ("F" "B" "sA" "rA" "sG" "rG": forward, backward, send or receive of the activation or gradient block), and
 * the schedule's makespan, bubble and per-stage stash; docs/SCHEDULE.md. */
static bool pipeline_json(const tg_plan *pl, tg_sb *o, tg_err *err)
{
    const tg_spec *s = &pl->spec;
    tg_pipe p;
    if (!tg_pipe_build(&p, s->pp, pl->mb, s->schedule, s->stage_layers, err))
        return false;
    if (!tg_pipe_simulate(&p, err)) {
        tg_pipe_free(&p);
        return false;
    }
    static const char *kn[] = {"F", "B", "sA", "rA", "sG", "rG"};
    tg_sb_printf(o, "\"pipeline\":{\"stages\":%d,\"schedule\":\"%s\",\"microbatches\":%d,\"makespan\":%lld,"
                    "\"bubble\":{\"idle\":%lld,\"total\":%lld,\"fraction\":%.6f},\"op_fields\":[\"kind\",\"mb\","
                    "\"peer\",\"joint\",\"at\",\"slots\"],\"stage\":[\n",
                 p.S, s->schedule == TG_PIPE_GPIPE ? "gpipe" : "1f1b", p.m, p.makespan, p.idle, p.total,
                 p.total ? (double)p.idle / (double)p.total : 0.0);
    for (int st = 0, l0 = 0; st < p.S; l0 += p.layers[st], st++) {
        tg_sb_printf(o, "{\"stage\":%d,\"layers\":[%d,%d],\"ranks\":[%d,%d],\"stash\":%d,\"busy\":%lld,\"ops\":[", st,
                     l0, l0 + p.layers[st] - 1, st * pl->mesh.p, (st + 1) * pl->mesh.p - 1, p.stash[st], p.busy[st]);
        for (int k = 0; k < p.nops[st]; k++) {
            const tg_pipe_op *op = &p.ops[st][k];
            int comp = op->kind == TG_PIPE_FWD || op->kind == TG_PIPE_BWD;
            tg_sb_printf(o, "%s[\"%s\",%d,", k ? "," : "", op->kind >= 0 && op->kind < 6 ? kn[op->kind] : "?", op->mb);
            if (comp)
                tg_sb_puts(o, "null,");
            else
                tg_sb_printf(o, "%d,", op->peer);
            tg_sb_printf(o, "%d,%lld,%lld]", op->joint, op->at,
                         comp ? (long long)p.layers[st] * (op->kind == TG_PIPE_FWD ? 1 : 2) : 0LL);
        }
        tg_sb_printf(o, "]}%s\n", st + 1 < p.S ? "," : "");
    }
    tg_sb_puts(o, "]},\n");
    tg_pipe_free(&p);
    return true;
}

bool tg_emit_schedule_json(const tg_plan *pl, const tg_class_fig *figs, const tg_sb *blockmap, tg_sb *o, tg_err *err)
{
    const tg_spec *s = &pl->spec;
    const tg_mesh *m = &pl->mesh;
    int L = s->layers + 1;
    tg_sb_printf(o, "{\"format\":\"tessgen-schedule\",\"format_version\":2,\"tessgen\":\"%s\",\"generated\":",
                 TG_VERSION);
    jstr(o, "DO NOT EDIT: generated by tessgen; format in docs/SCHEDULE.md");
    tg_sb_puts(o, ",\n\"spec\":");
    jstr(o, s->path);
    tg_sb_puts(o, ",\"name\":");
    jstr(o, s->name);
    /* dtype: the spec's (docs/BF16.md); bytes_per_elem: of the arena's offsets (4-byte slots), buffers give bytes */
    tg_sb_printf(o, ",\"fingerprint\":\"%s\",\"mode\":\"%s\",\"dtype\":\"%s\",\"bytes_per_elem\":4,\n",
                 pl->fingerprint, s->mode == TG_TRAIN ? "train" : "infer", s->dtype == TG_BF16 ? "bf16" : "fp32");
    tg_sb_printf(o,
                 "\"mesh\":{\"scheme\":\"%s\",\"q\":%d,\"d\":%d,\"p\":%d,\"classes\":%d,\"placement\":\"%s\",\"strides\":{\"i\":%d,"
                 "\"j\":%d,\"k\":%d},\"rank_formula\":\"%s\"",
                 m->scheme == TG_SCHEME_MEGATRON ? "megatron" : "tesseract", m->q, m->d, m->p,
                 tg_plan_nclasses(pl), tg_placement_name(m->placement), m->si, m->sj, m->sk,
                 tg_mesh_rank_formula(m));
    if (tg_plan_stages(pl) > 1) /* stage-major: world rank = stage*p + the rank formula */
        tg_sb_printf(o, ",\"pp\":%d,\"world\":%d", tg_plan_stages(pl), tg_plan_world(pl));
    tg_sb_puts(o, "},\n");
    tg_sb_printf(o, "\"model\":{\"layers\":%d,\"hidden\":%d,\"heads\":%d,\"ffn\":%d,\"seq\":%d,\"batch\":%d,"
                    "\"eps\":%.9g},\n",
                 s->layers, s->hidden, s->heads, s->ffn, s->seq, s->batch, s->eps);
    tg_sb_printf(o, "\"local\":{\"tokens\":%d,\"rows\":%d,\"cols\":%d,\"ffn_cols\":%d,\"heads\":%d,\"head_dim\":%d,"
                    "\"sequences\":%d},\n",
                 pl->T, pl->R, pl->Cq, pl->Fq, pl->Hq, pl->D, pl->nseq);
    tg_sb_puts(o, "\"classes\":[\n");
    for (int c = 0; c < tg_plan_nclasses(pl); c++) {
        const tg_class_fig *g = &figs[c];
        char cn[32];
        tg_class_name_n(cn, sizeof cn, pl, c);
        int st = c / (m->q * m->q);
        tg_sb_printf(o, "{\"class\":%d,\"i\":%d,\"j\":%d,", c, g->i, g->j);
        if (tg_plan_stages(pl) > 1)
            tg_sb_printf(o, "\"stage\":%d,", st);
        tg_sb_printf(o, "\"json\":\"schedule/%s.json\",\"script\":\"schedule/%s.js\",\"ranks\":", cn, cn);
        class_ranks(o, pl, st, g->i, g->j);
        tg_sb_printf(o, ",\"arena_bytes\":%lld,\"weight_bytes\":%lld,\"live_peak_bytes\":%lld,\"flops\":%lld,"
                        "\"nsteps\":%d,\"recv_bytes\":%lld,\"sent_bytes\":%lld,\"reduced_bytes\":%lld}%s\n",
                     4 * g->arena, 4 * g->weights, 4 * g->live, g->flops, g->nsteps, 4 * g->recv, 4 * g->sent,
                     4 * g->red, c + 1 < tg_plan_nclasses(pl) ? "," : "");
    }
    tg_sb_puts(o, "],\n\"ranks\":[\n");
    for (int r = 0, world = tg_plan_world(pl); r < world; r++) { /* every stage's ranks, stage-major */
        tg_coord c = tg_mesh_coord(m, r % m->p);
        char st[24] = "";
        if (tg_plan_stages(pl) > 1)
            snprintf(st, sizeof st, "\"stage\":%d,", r / m->p);
        tg_sb_printf(o, "{\"rank\":%d,%s\"i\":%d,\"j\":%d,\"k\":%d,\"row_block\":%d,\"class\":%d,\"io\":{\"r0\":%d,"
                        "\"c0\":%d}}%s\n",
                     r, st, c.i, c.j, c.k, tg_mesh_row_block(m, c), tg_class_of(pl, r), tg_io_r0(pl, c),
                     tg_io_c0(pl, c), r + 1 < world ? "," : "");
    }
    /* mesh totals per phase and layer: each class's figures times its d ranks */
    tg_sb_puts(o, "],\n\"totals\":[");
    int first = 1;
    for (int b = 0; b < figs[0].nbuckets; b++) {
        tg_traffic t;
        memset(&t, 0, sizeof t);
        for (int c = 0; c < tg_plan_nclasses(pl); c++) {
            const tg_traffic *x = &figs[c].bucket[b];
            for (int g = 0; g < TG_NGROUPS; g++) {
                t.recv[g] += (long long)m->d * x->recv[g];
                t.sent[g] += (long long)m->d * x->sent[g];
                t.red[g] += (long long)m->d * x->red[g];
            }
            t.flops += (long long)m->d * x->flops;
            t.used |= x->used;
        }
        if (!t.used)
            continue;
        tg_sb_printf(o, "%s\n{\"phase\":\"%s\",\"layer\":%d", first ? "" : ",", tg_phase_label(b / L), b % L - 1);
        static const char *dirs[3] = {"recv_bytes", "sent_bytes", "reduced_bytes"};
        for (int d = 0; d < 3; d++) {
            const long long *v = d == 0 ? t.recv : d == 1 ? t.sent : t.red;
            tg_sb_printf(o, ",\"%s\":{", dirs[d]);
            for (int g = 0, n = 0; g < TG_NGROUPS; g++)
                if (tg_group_used(m, (tg_group)g))
                    tg_sb_printf(o, "%s\"%s\":%lld", n++ ? "," : "", tg_group_name((tg_group)g), 4 * v[g]);
            tg_sb_puts(o, "}");
        }
        tg_sb_printf(o, ",\"flops\":%lld}", t.flops);
        first = 0;
    }
    tg_sb_puts(o, "\n],\n");
    if (tg_plan_stages(pl) > 1 && !pipeline_json(pl, o, err))
        return false;
    tg_sb_puts(o, "\"blocks\":{\"note\":\"layer 0's tensors, one entry per class: [i, j, name, [[r0, nr, c0, "
                  "nc], ...]]; every layer is split alike, and every k of a class holds the same blocks\",\n"
                  "\"shards\":[\n");
    tg_sb_putn(o, blockmap->s, blockmap->len);
    tg_sb_puts(o, "\n]}}\n");
    return true;
}
