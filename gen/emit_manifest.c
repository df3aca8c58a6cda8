/*
 * emit_manifest.c - prints manifest.json: the mesh, the model shapes, every
 * rank with its coordinates, class and block of the residual stream, and
 * every rank class with its arena, planned communication and weight shards
 * (which pieces of which tensor). The classes part is printed one class at a
 * time while tessgen writes the class programs (tg_emit_manifest_class), so
 * no more than one class plan is ever held. Keys are printed in a fixed order
 * so the file is byte-identical for the same spec.
 */
#include <stdio.h>

#include "emit.h"
#include "summary.h"
#include "version.h"

static void ll4(tg_sb *o, const char *key, const long long *v)
{
    tg_sb_printf(o, "\"%s\": {\"row\": %lld, \"col\": %lld, \"dep\": %lld, \"coldep\": %lld}", key, v[0], v[1], v[2],
                 v[3]);
}

void tg_emit_manifest_class(const tg_plan *pl, const tg_class_plan *cp, tg_sb *o)
{
    const tg_mesh *m = &pl->mesh;
    char cn[32];
    tg_class_name_cp(cn, sizeof cn, pl, cp);
    char st[24] = "";
    if (tg_plan_stages(pl) > 1)
        snprintf(st, sizeof st, "\"stage\": %d, ", cp->stage);
    tg_sb_printf(o, "%s    {\"class\": %d, %s\"i\": %d, \"j\": %d, \"program\": \"%s.c\", \"ranks\": [",
                 o->len ? ",\n" : "", (cp->stage * m->q + cp->i) * m->q + cp->j, st, cp->i, cp->j, cn);
    for (int k = 0; k < m->d; k++) /* world ranks: stage-major */
        tg_sb_printf(o, "%s%d", k ? ", " : "",
                     tg_mesh_rank(m, (tg_coord){cp->i, cp->j, k}) + tg_stage_rank0(pl, cp->stage));
    tg_sb_printf(o, "],\n     \"arena_bytes\": %lld, \"weight_bytes\": %lld, \"steps\": %d, \"flops\": %lld,\n",
                 4 * cp->arena_elems, 4 * cp->weight_elems, cp->nsteps, cp->flops);
    tg_sb_puts(o, "     ");
    ll4(o, "bcast_recv_bytes", cp->bcast_recv);
    tg_sb_puts(o, ",\n     ");
    ll4(o, "bcast_sent_bytes", cp->bcast_sent);
    tg_sb_puts(o, ",\n     ");
    ll4(o, "allreduce_bytes", cp->allreduce);
    tg_sb_puts(o, ",\n     \"shards\": [\n");
    for (int i = 0; i < cp->nparams; i++) {
        const tg_param *p = &cp->params[i];
        const tg_buf *b = &cp->bufs[p->buf];
        tg_sb_puts(o, "       {\"name\": ");
        tg_sb_jstr(o, p->name);
        if (p->ndim == 1)
            tg_sb_printf(o, ", \"shape\": [%d]", p->full[0]);
        else
            tg_sb_printf(o, ", \"shape\": [%d, %d]", p->full[0], p->full[1]);
        tg_sb_printf(o, ", \"local\": [%d, %d], \"arena_offset_bytes\": %lld%s, \"pieces\": [", b->rows, b->cols,
                     4 * b->offset, b->dtype == TG_BUF_BF16 ? ", \"dtype\": \"bf16\"" : "");
        for (int k = 0; k < p->npieces; k++) {
            const tg_piece *pc = &p->piece[k];
            if (p->ndim == 1)
                tg_sb_printf(o, "%s{\"cols\": [%d, %d], \"to_col\": %d}", k ? ", " : "", pc->c0, pc->c0 + pc->nc,
                             pc->dst_col);
            else
                tg_sb_printf(o, "%s{\"rows\": [%d, %d], \"cols\": [%d, %d], \"to_col\": %d}", k ? ", " : "", pc->r0,
                             pc->r0 + pc->nr, pc->c0, pc->c0 + pc->nc, pc->dst_col);
        }
        tg_sb_printf(o, "]}%s\n", i + 1 < cp->nparams ? "," : "");
    }
    tg_sb_puts(o, "     ]}");
}

bool tg_emit_manifest(const tg_plan *pl, const tg_sb *classes, tg_sb *o, tg_err *err)
{
    (void)err;
    const tg_spec *s = &pl->spec;
    const tg_mesh *m = &pl->mesh;
    tg_sb_puts(o, "{\n  \"generator\": ");
    tg_sb_jstr(o, "tessgen " TG_VERSION);
    tg_sb_puts(o, ",\n  \"spec\": ");
    tg_sb_jstr(o, s->path);
    tg_sb_printf(o, ",\n  \"schedule_fingerprint\": \"%s\"", pl->fingerprint);
    tg_sb_puts(o, ",\n  \"name\": ");
    tg_sb_jstr(o, s->name);
    tg_sb_printf(o, ",\n  \"dtype\": \"%s\",\n  \"backend\": \"cpu\",\n", s->dtype == TG_BF16 ? "bf16" : "fp32");
    tg_sb_printf(o, "  \"mesh\": {\"scheme\": \"%s\", \"q\": %d, \"d\": %d, \"p\": %d, \"classes\": %d",
                 m->scheme == TG_SCHEME_MEGATRON ? "megatron" : "tesseract", m->q, m->d, m->p,
                 tg_plan_nclasses(pl));
    if (tg_plan_stages(pl) > 1) /* p: ranks per stage; world: every rank, stage-major */
        tg_sb_printf(o, ", \"pp\": %d, \"world\": %d", tg_plan_stages(pl), tg_plan_world(pl));
    tg_sb_puts(o, "},\n");
    tg_sb_printf(o,
                 "  \"model\": {\"layers\": %d, \"hidden\": %d, \"heads\": %d, \"ffn\": %d, \"seq\": %d, "
                 "\"batch\": %d, \"eps\": %.17g},\n",
                 s->layers, s->hidden, s->heads, s->ffn, s->seq, s->batch, s->eps);
    tg_sb_printf(o, "  \"input\": {\"name\": \"x\", \"shape\": [%d, %d, %d], \"dtype\": \"float32\"},\n", s->batch,
                 s->seq, s->hidden);
    tg_sb_printf(o, "  \"output\": {\"name\": \"y\", \"shape\": [%d, %d, %d], \"dtype\": \"float32\"},\n", s->batch,
                 s->seq, s->hidden);
    tg_sb_printf(o, "  \"local\": {\"rows\": %d, \"hidden\": %d, \"ffn\": %d, \"heads\": %d, \"head_dim\": %d},\n",
                 pl->R, pl->Cq, pl->Fq, pl->Hq, pl->D);
    tg_sb_puts(o, "  \"ranks\": [\n");
    for (int r = 0, world = tg_plan_world(pl); r < world; r++) { /* every stage's ranks, stage-major */
        tg_coord co = tg_mesh_coord(m, r % m->p);
        char st[24] = "";
        if (tg_plan_stages(pl) > 1)
            snprintf(st, sizeof st, "\"stage\": %d, ", r / m->p);
        tg_sb_printf(o, "    {\"rank\": %d, %s\"i\": %d, \"j\": %d, \"k\": %d, \"row_block\": %d, \"class\": %d, "
                        "\"io_block\": {\"row0\": %d, \"rows\": %d, \"col0\": %d, \"cols\": %d}}%s\n",
                     r, st, co.i, co.j, co.k, tg_mesh_row_block(m, co), tg_class_of(pl, r), tg_io_r0(pl, co), pl->R,
                     tg_io_c0(pl, co), pl->Cq, r + 1 < world ? "," : "");
    }
    tg_sb_puts(o, "  ],\n  \"classes\": [\n");
    tg_sb_putn(o, classes->s, classes->len);
    tg_sb_puts(o, "\n  ]\n}\n");
    return true;
}
