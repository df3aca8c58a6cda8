/*
 * emit_manifest.c - prints manifest.json: the mesh, the model shapes, and per
 * rank its coordinates, arena bytes, residual-stream block, planned
 * communication, and weight shards (which pieces of which tensor). Keys are
 * printed in a fixed order so the file is byte-identical for the same spec.
 */
#include "emit.h"
#include "version.h"

static void ll4(tg_sb *o, const char *key, const long long *v, int bytes)
{
    int f = bytes ? 4 : 1;
    tg_sb_printf(o, "\"%s\": {\"row\": %lld, \"col\": %lld, \"dep\": %lld, \"coldep\": %lld}", key, f * v[0],
                 f * v[1], f * v[2], f * v[3]);
}

bool tg_emit_manifest(const tg_plan *pl, const tg_class_plan *all, tg_sb *o, tg_err *err)
{
    (void)err;
    const tg_spec *s = &pl->spec;
    tg_sb_puts(o, "{\n  \"generator\": ");
    tg_sb_jstr(o, "tessgen " TG_VERSION);
    tg_sb_puts(o, ",\n  \"spec\": ");
    tg_sb_jstr(o, s->path);
    tg_sb_printf(o, ",\n  \"schedule_fingerprint\": \"%s\"", pl->fingerprint);
    tg_sb_puts(o, ",\n  \"name\": ");
    tg_sb_jstr(o, s->name);
    tg_sb_printf(o, ",\n  \"dtype\": \"fp32\",\n  \"backend\": \"cpu\",\n");
    tg_sb_printf(o, "  \"mesh\": {\"q\": %d, \"d\": %d, \"p\": %d},\n", pl->mesh.q, pl->mesh.d, pl->mesh.p);
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
    for (int r = 0; r < pl->mesh.p; r++) {
        const tg_class_plan *rp = &all[tg_class_of(pl, r)];
        tg_coord co = tg_mesh_coord(&pl->mesh, r);
        tg_sb_printf(o, "    {\"rank\": %d, \"i\": %d, \"j\": %d, \"k\": %d, \"row_block\": %d,\n", r, co.i, co.j,
                     co.k, tg_mesh_row_block(&pl->mesh, co));
        tg_sb_printf(o, "     \"arena_bytes\": %lld, \"weight_bytes\": %lld, \"steps\": %d, \"flops\": %lld,\n",
                     4 * rp->arena_elems, 4 * rp->weight_elems, rp->nsteps, rp->flops);
        tg_sb_printf(o, "     \"io_block\": {\"row0\": %d, \"rows\": %d, \"col0\": %d, \"cols\": %d},\n",
                     tg_io_r0(pl, co), pl->R, tg_io_c0(pl, co), pl->Cq);
        tg_sb_puts(o, "     ");
        ll4(o, "bcast_recv_bytes", rp->bcast_recv, 1);
        tg_sb_puts(o, ",\n     ");
        ll4(o, "bcast_sent_bytes", rp->bcast_sent, 1);
        tg_sb_puts(o, ",\n     ");
        ll4(o, "allreduce_bytes", rp->allreduce, 1);
        tg_sb_puts(o, ",\n     \"shards\": [\n");
        for (int i = 0; i < rp->nparams; i++) {
            const tg_param *p = &rp->params[i];
            const tg_buf *b = &rp->bufs[p->buf];
            tg_sb_puts(o, "       {\"name\": ");
            tg_sb_jstr(o, p->name);
            if (p->ndim == 1)
                tg_sb_printf(o, ", \"shape\": [%d]", p->full[0]);
            else
                tg_sb_printf(o, ", \"shape\": [%d, %d]", p->full[0], p->full[1]);
            tg_sb_printf(o, ", \"local\": [%d, %d], \"arena_offset_bytes\": %lld, \"pieces\": [", b->rows, b->cols,
                         4 * b->offset);
            for (int k = 0; k < p->npieces; k++) {
                const tg_piece *pc = &p->piece[k];
                if (p->ndim == 1)
                    tg_sb_printf(o, "%s{\"cols\": [%d, %d], \"to_col\": %d}", k ? ", " : "", pc->c0, pc->c0 + pc->nc,
                                 pc->dst_col);
                else
                    tg_sb_printf(o, "%s{\"rows\": [%d, %d], \"cols\": [%d, %d], \"to_col\": %d}", k ? ", " : "",
                                 pc->r0, pc->r0 + pc->nr, pc->c0, pc->c0 + pc->nc, pc->dst_col);
            }
            tg_sb_printf(o, "]}%s\n", i + 1 < rp->nparams ? "," : "");
        }
        tg_sb_printf(o, "     ]}%s\n", r + 1 < pl->mesh.p ? "," : "");
    }
    tg_sb_puts(o, "  ]\n}\n");
    return true;
}
