/*
 * emit_common.c - what several emitters print alike: the template
 * placeholders every file shares, group member lists, the name and the
 * "who runs this" line of a class program, and its cut into one function per
 * phase and layer with the buffer declarations of each.
 */
#include <stdio.h>
#include <stdlib.h>

#include "emit.h"
#include "version.h"

int tg_emit_common_vars(const tg_plan *pl, tg_tvar *vars, char (*store)[64])
{
    int n = 0;
    vars[n++] = (tg_tvar){"VERSION", TG_VERSION};
    vars[n++] = (tg_tvar){"SPEC", pl->spec.path};
    vars[n++] = (tg_tvar){"NAME", pl->spec.name};
    snprintf(store[0], 64, "%d", tg_plan_world(pl)); /* every stage's ranks */
    vars[n++] = (tg_tvar){"P", store[0]};
    snprintf(store[1], 64, "%d", pl->mesh.q);
    vars[n++] = (tg_tvar){"Q", store[1]};
    snprintf(store[2], 64, "%d", pl->mesh.d);
    vars[n++] = (tg_tvar){"D", store[2]};
    tg_mesh_text(&pl->mesh, store[3], 64);
    vars[n++] = (tg_tvar){"MESH", store[3]};
    snprintf(store[4], 64, "%d", pl->mesh.scheme);
    vars[n++] = (tg_tvar){"SCHEME", store[4]};
    return n;
}

void tg_emit_members(tg_sb *o, const tg_mesh *m, tg_group g, tg_coord c, const char *open, const char *close)
{
    tg_sb_puts(o, open);
    for (int l = 0; l < tg_group_size(m, g); l++)
        tg_sb_printf(o, "%s%d", l ? "," : "", tg_group_member(m, g, c, l));
    tg_sb_puts(o, close);
}

void tg_class_name(char *buf, size_t cap, int i, int j)
{
    snprintf(buf, cap, "rank_i%d_j%d", i, j);
}

void tg_class_name_n(char *buf, size_t cap, const tg_plan *pl, int c)
{
    int q = pl->mesh.q, qq = q * q;
    if (tg_plan_stages(pl) > 1)
        snprintf(buf, cap, "rank_s%d_i%d_j%d", c / qq, (c % qq) / q, c % q);
    else
        tg_class_name(buf, cap, c / q, c % q);
}

void tg_class_name_cp(char *buf, size_t cap, const tg_plan *pl, const tg_class_plan *cp)
{
    tg_class_name_n(buf, cap, pl, (cp->stage * pl->mesh.q + cp->i) * pl->mesh.q + cp->j);
}

int tg_segments(const tg_class_plan *cp, tg_segment **out)
{
    int n = 0, cap = 16;
    tg_segment *sg = malloc((size_t)cap * sizeof *sg);
    for (int i = 0; sg && i < cp->nsteps; i++) {
        const tg_step *s = &cp->steps[i];
        if (n > 0 && sg[n - 1].phase == s->phase && sg[n - 1].layer == s->layer) {
            sg[n - 1].last = i;
            continue;
        }
        if (n == cap) {
            cap *= 2;
            tg_segment *ns = realloc(sg, (size_t)cap * sizeof *ns);
            if (!ns) {
                free(sg);
                sg = NULL;
                break;
            }
            sg = ns;
        }
        sg[n++] = (tg_segment){s->phase, s->layer, i, i};
    }
    *out = sg;
    return sg ? n : -1;
}

void tg_emit_step_body(tg_sb *o, const tg_plan *pl, const tg_step *s, const tg_sb *body)
{
    if (!s->last_mb) {
        tg_sb_putn(o, body->s ? body->s : "", body->len);
        return;
    }
    tg_sb_printf(o, "    if (tr_mb(c) == %d) { /* once per step: the sum of every micro-batch's gradient */\n",
                 pl->mb - 1);
    for (size_t a = 0; a < body->len;) {
        size_t e = a;
        while (e < body->len && body->s[e] != '\n')
            e++;
        if (e > a)
            tg_sb_puts(o, "    ");
        tg_sb_putn(o, body->s + a, e - a + (e < body->len));
        a = e + 1;
    }
    tg_sb_puts(o, "    }\n");
}

void tg_segment_name(char *buf, size_t cap, const tg_segment *sg)
{
    static const char *pre[4] = {"fwd", "bwd", "opt", "dec"};
    const char *p = sg->phase <= TG_PHASE_DEC ? pre[sg->phase] : "phase";
    if (sg->layer >= 0)
        snprintf(buf, cap, "%s_L%d", p, sg->layer);
    else if (sg->layer == TG_LAYER_EMBED)
        snprintf(buf, cap, "%s_embed", p);
    else if (sg->layer == TG_LAYER_HEAD)
        snprintf(buf, cap, "%s_head", p);
    else
        snprintf(buf, cap, "%s_all", p);
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

bool tg_emit_buffers(tg_sb *o, const tg_plan *pl, const tg_class_plan *cp, tg_coord co, int first, int last,
                     bool (*uses)(const tg_class_plan *cp, const tg_step *s, int slot, int first), const char *arena)
{
    int *ids = malloc((size_t)(last - first + 1) * TG_STEP_MAXBUF * sizeof *ids), n = 0;
    if (!ids)
        return false;
    for (int i = first; i <= last; i++)
        for (int k = 0; k < TG_STEP_MAXBUF; k++)
            if (cp->steps[i].buf[k] >= 0 && (!uses || uses(cp, &cp->steps[i], k, first)))
                ids[n++] = cp->steps[i].buf[k];
    qsort(ids, (size_t)n, sizeof *ids, cmp_int); /* plan order, each once */
    tg_sb_printf(o, "    /* Buffers: float offsets into the %s arena A, shape [rows, cols], live steps first..last. */\n",
                 arena);
    for (int a = 0; a < n; a++) {
        if (a > 0 && ids[a] == ids[a - 1])
            continue;
        const tg_buf *b = &cp->bufs[ids[a]];
        char bw[160], off[96];
        /* an I/O block of every micro-batch (tg_buf.mb_stride): the steps see the part of micro-batch tr_mb(c) */
        if (b->mb_stride > 0)
            snprintf(off, sizeof off, "%lld + (size_t)tr_mb(c) * %lld", b->offset, b->mb_stride);
        else
            snprintf(off, sizeof off, "%lld", b->offset);
        if (b->dtype == TG_BUF_I32 || b->dtype == TG_BUF_BF16) {
            const char *ty = b->dtype == TG_BUF_I32 ? "int32_t" : "tr_bf16";
            tg_sb_printf(o, "    %s *const %s = (%s *)(A + %s); /* [%d,%d] %s %s; live %d..%d */\n", ty, b->name, ty,
                         off, b->rows, b->cols, b->dtype == TG_BUF_I32 ? "int32" : "bf16",
                         tg_buf_text(bw, sizeof bw, pl, co, b), b->first, b->last);
        }
        else
            tg_sb_printf(o, "    float *const %s = A + %s; /* [%d,%d] %s; live %d..%d */\n", b->name, off,
                         b->rows, b->cols, tg_buf_text(bw, sizeof bw, pl, co, b), b->first, b->last);
    }
    free(ids);
    return true;
}

int tg_stage_rank0(const tg_plan *pl, int stage)
{
    return stage * pl->mesh.p;
}

void tg_class_who(tg_sb *o, const tg_plan *pl, const tg_class_plan *cp)
{
    const tg_mesh *m = &pl->mesh;
    tg_coord c0 = {cp->i, cp->j, 0};
    int r0 = tg_mesh_rank(m, c0) + tg_stage_rank0(pl, cp->stage), world = tg_plan_world(pl);
    char kr[48], st[32] = "";
    if (tg_plan_stages(pl) > 1)
        snprintf(st, sizeof st, "stage %d, ", cp->stage);
    if (m->d == 1) {
        tg_sb_printf(o, "rank %d of %d, %scoordinates (i=%d, j=%d, k=0)", r0, world, st, cp->i, cp->j);
        return;
    }
    tg_sb_printf(o, "ranks %s of %d for k = 0..%d (", tg_k_ranks_text(kr, sizeof kr, m, r0), world, m->d - 1);
    for (int k = 0; k < m->d && k < 6; k++)
        tg_sb_printf(o, "%s%d", k ? ", " : "", r0 + m->sk * k);
    tg_sb_printf(o, "%s), %scoordinates (i=%d, j=%d, k)", m->d > 6 ? ", ..." : "", st, cp->i, cp->j);
}
