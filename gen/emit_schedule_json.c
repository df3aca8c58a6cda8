/*
 * emit_schedule_json.c - prints schedule.json: the whole plan as data, one
 * object per step (format: docs/SCHEDULE.md). The same document is embedded
 * in schedule.html, so strings are written with '<', '>' and '&' escaped as
 * \u003c etc. (still plain JSON) and can never end the page's <script>.
 *
 * Like every emitter it decides nothing: each value is a plan field, a
 * product with the element size (bytes = 4 * elements) or the logical
 * traffic of a step from tg_step_traffic (inspect.c), the one place that rule
 * lives. Numbers print with fixed formats so the file is byte-identical for
 * the same spec.
 */
#include "emit.h"
#include "inspect.h"
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

static void rank_obj(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, int rank)
{
    const tg_mesh *m = &pl->mesh;
    tg_coord co = tg_mesh_coord(m, rank);
    tg_sb_printf(o, "{\"rank\":%d,\"i\":%d,\"j\":%d,\"k\":%d,\"row_block\":%d,\n \"groups\":{", rank, co.i, co.j,
                 co.k, tg_mesh_row_block(m, co));
    for (int g = 0; g < TG_NGROUPS; g++) {
        char lab[32];
        tg_group_label(m, (tg_group)g, co, lab, sizeof lab);
        tg_sb_printf(o, "%s\"%s\":{\"label\":", g ? "," : "", tg_group_name((tg_group)g));
        jstr(o, lab);
        tg_sb_printf(o, ",\"local\":%d,\"members\":", tg_group_local(m, (tg_group)g, co));
        tg_emit_members(o, m, (tg_group)g, co, "[", "]");
        tg_sb_puts(o, "}");
    }
    tg_sb_printf(o, "},\n \"arena_bytes\":%lld,\"weight_bytes\":%lld,\"flops\":%lld,\"nsteps\":%d,\n",
                 4 * rp->arena_elems, 4 * rp->weight_elems, rp->flops, rp->nsteps);
    const tg_buf *x = &rp->bufs[rp->x_buf];
    tg_sb_puts(o, " \"io\":{\"buffer\":");
    jstr(o, x->name);
    tg_sb_printf(o, ",\"r0\":%d,\"c0\":%d,\"rows\":%d,\"cols\":%d},\n", tg_io_r0(pl, co), tg_io_c0(pl, co), x->rows,
                 x->cols);
    tg_sb_puts(o, " \"buffers\":[\n");
    for (int i = 0; i < rp->nbufs; i++) {
        const tg_buf *b = &rp->bufs[i];
        tg_sb_printf(o, "  {\"id\":%d,\"name\":", i);
        jstr(o, b->name);
        tg_sb_printf(o, ",\"rows\":%d,\"cols\":%d,\"offset\":%lld,\"bytes\":%lld,\"first\":%d,\"last\":%d,"
                        "\"persistent\":%s,\"what\":",
                     b->rows, b->cols, 4 * b->offset, 4 * b->elems, b->first, b->last,
                     b->persistent ? "true" : "false");
        char bw[160];
        jstr(o, tg_buf_text(bw, sizeof bw, pl, co, b));
        tg_sb_printf(o, "}%s\n", i + 1 < rp->nbufs ? "," : "");
    }
    tg_sb_puts(o, " ],\n \"params\":[\n");
    for (int i = 0; i < rp->nparams; i++) {
        const tg_param *p = &rp->params[i];
        tg_sb_puts(o, "  {\"name\":");
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
    tg_sb_puts(o, " ]}");
}

static void step_obj(tg_sb *o, const tg_plan *pl, const tg_class_plan *rp, int rank, int id)
{
    const tg_mesh *m = &pl->mesh;
    const tg_step *s = &rp->steps[id];
    tg_coord co = tg_mesh_coord(m, rank);
    tg_sb_printf(o, "{\"rank\":%d,\"step\":%d,\"phase\":\"%s\",\"layer\":%d,\"op\":", rank, id,
                 tg_phase_label(s->phase), s->layer);
    jstr(o, s->op);
    if (s->t >= 0)
        tg_sb_printf(o, ",\"t\":%d", s->t);
    else
        tg_sb_puts(o, ",\"t\":null");
    tg_sb_puts(o, ",\"kind\":");
    jstr(o, tg_step_kind_name(s->kind));
    if (tg_step_is_comm(s)) {
        char lab[32];
        tg_group_label(m, s->group, co, lab, sizeof lab);
        long long rc, se, re;
        tg_step_traffic(s, &rc, &se, &re);
        tg_sb_printf(o, ",\"comm\":true,\"group\":\"%s\",\"group_label\":", tg_group_name(s->group));
        jstr(o, lab);
        tg_sb_printf(o, ",\"group_size\":%d,\"members\":", s->group_size);
        tg_emit_members(o, m, s->group, co, "[", "]");
        if (tg_step_root(pl, co, s) >= 0)
            tg_sb_printf(o, ",\"root\":%d,\"root_local\":%d,\"is_root\":%s", tg_step_root(pl, co, s), s->root_local,
                         s->is_root ? "true" : "false");
        else
            tg_sb_puts(o, ",\"root\":null,\"root_local\":null,\"is_root\":false");
        tg_sb_printf(o, ",\"dir\":\"%s\",\"elems\":%lld,\"bytes\":%lld,\"recv_bytes\":%lld,\"sent_bytes\":%lld,"
                        "\"reduced_bytes\":%lld",
                     tg_step_dir(s), s->count, 4 * s->count, 4 * rc, 4 * se, 4 * re);
    } else {
        tg_sb_puts(o, ",\"comm\":false");
    }
    tg_sb_printf(o, ",\"flops\":%lld", s->flops);
    if (s->kind == TG_STEP_GEMM)
        tg_sb_printf(o, ",\"gemm\":{\"m\":%d,\"n\":%d,\"k\":%d,\"lda\":%d,\"ldb\":%d,\"ldc\":%d,\"beta\":%g,"
                        "\"transa\":%d,\"transb\":%d}",
                     s->m, s->n, s->k, s->lda, s->ldb, s->ldc, (double)s->beta, s->transa, s->transb);
    /* kernel shape fields, whichever the step sets */
    struct {
        const char *key;
        int v;
    } sh[] = {{"rows", s->rows}, {"cols", s->cols}, {"hidden", s->hidden}, {"nseq", s->nseq},
              {"seq", s->seq},   {"heads", s->heads}, {"hdim", s->hdim}};
    int any = 0;
    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++)
        if (sh[k].v) {
            tg_sb_printf(o, "%s\"%s\":%d", any ? "," : ",\"shape\":{", sh[k].key, sh[k].v);
            any = 1;
        }
    if (s->eps != 0)
        tg_sb_printf(o, "%s\"eps\":%.9g", any ? "," : ",\"shape\":{", s->eps), any = 1;
    if (any)
        tg_sb_puts(o, "}");
    tg_sb_puts(o, ",\"buffers\":[");
    int nb = 0;
    for (int k = 0; k < TG_STEP_MAXBUF; k++) {
        if (s->buf[k] < 0)
            continue;
        const tg_buf *b = &rp->bufs[s->buf[k]];
        tg_sb_printf(o, "%s{\"id\":%d,\"name\":", nb++ ? "," : "", s->buf[k]);
        jstr(o, b->name);
        tg_sb_printf(o, ",\"access\":\"%s%s\",\"offset\":%lld,\"bytes\":%lld}", (s->acc[k] & TG_ACC_R) ? "r" : "",
                     (s->acc[k] & TG_ACC_W) ? "w" : "", 4 * b->offset, 4 * b->elems);
    }
    tg_sb_puts(o, "],\"what\":");
    char what[256];
    jstr(o, tg_step_text(what, sizeof what, pl, rp, co, s));
    tg_sb_puts(o, "}");
}

bool tg_emit_schedule_json(const tg_plan *pl, const tg_class_plan *all, tg_sb *o, tg_err *err)
{
    (void)err;
    const tg_spec *s = &pl->spec;
    const tg_mesh *m = &pl->mesh;
    tg_sb_printf(o, "{\"format\":\"tessgen-schedule\",\"format_version\":1,\"tessgen\":\"%s\",\"generated\":",
                 TG_VERSION);
    jstr(o, "DO NOT EDIT: generated by tessgen; format in docs/SCHEDULE.md");
    tg_sb_puts(o, ",\n\"spec\":");
    jstr(o, s->path);
    tg_sb_puts(o, ",\"name\":");
    jstr(o, s->name);
    tg_sb_printf(o, ",\"mode\":\"%s\",\"dtype\":\"fp32\",\"bytes_per_elem\":4,\n", s->mode == TG_TRAIN ? "train" : "infer");
    tg_sb_printf(o, "\"mesh\":{\"q\":%d,\"d\":%d,\"p\":%d},\n", m->q, m->d, m->p);
    tg_sb_printf(o, "\"model\":{\"layers\":%d,\"hidden\":%d,\"heads\":%d,\"ffn\":%d,\"seq\":%d,\"batch\":%d,"
                    "\"eps\":%.9g},\n",
                 s->layers, s->hidden, s->heads, s->ffn, s->seq, s->batch, s->eps);
    tg_sb_printf(o, "\"local\":{\"tokens\":%d,\"rows\":%d,\"cols\":%d,\"ffn_cols\":%d,\"heads\":%d,\"head_dim\":%d,"
                    "\"sequences\":%d},\n",
                 pl->T, pl->R, pl->Cq, pl->Fq, pl->Hq, pl->D, pl->nseq);
    tg_sb_puts(o, "\"ranks\":[\n");
    for (int r = 0; r < m->p; r++) {
        rank_obj(o, pl, &all[tg_class_of(pl, r)], r);
        tg_sb_puts(o, r + 1 < m->p ? ",\n" : "\n");
    }
    tg_sb_puts(o, "],\n\"steps\":[");
    int first = 1;
    for (int r = 0; r < m->p; r++) {
        const tg_class_plan *rp = &all[tg_class_of(pl, r)];
        for (int i = 0; i < rp->nsteps; i++) {
            tg_sb_puts(o, first ? "\n" : ",\n");
            step_obj(o, pl, rp, r, i);
            first = 0;
        }
    }
    tg_sb_puts(o, "\n]}\n");
    return true;
}
