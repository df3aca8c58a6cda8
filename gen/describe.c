/*
 * describe.c - words for steps and buffers (see describe.h). Every number in
 * a description is a step field, a plan dimension or mesh arithmetic on the
 * rank's coordinates; nothing is decided here.
 */
#include "describe.h"

#include <stdio.h>
#include <string.h>

const char *tg_h_text(char *buf, size_t cap, const tg_plan *pl, tg_coord c)
{
    int q = pl->mesh.q;
    if (c.k >= 0)
        snprintf(buf, cap, "%d", tg_mesh_row_block(&pl->mesh, c));
    else if (pl->mesh.d == 1)
        snprintf(buf, cap, "%d", c.i);
    else if (c.i == 0)
        snprintf(buf, cap, "%dk", q);
    else
        snprintf(buf, cap, "%d+%dk", c.i, q);
    return buf;
}

const char *tg_group_text(char *buf, size_t cap, const tg_plan *pl, tg_coord c, tg_group g)
{
    if (c.k >= 0 || pl->mesh.d == 1) {
        tg_coord k0 = c;
        if (k0.k < 0)
            k0.k = 0;
        tg_group_label(&pl->mesh, g, k0, buf, (int)cap);
        return buf;
    }
    switch (g) {
    case TG_ROW: snprintf(buf, cap, "row(%d,k)", c.i); break;
    case TG_COL: snprintf(buf, cap, "col(%d,k)", c.j); break;
    default: tg_group_label(&pl->mesh, g, (tg_coord){c.i, c.j, 0}, buf, (int)cap); break;
    }
    return buf;
}

const char *tg_k_ranks_text(char *buf, size_t cap, const tg_mesh *m, int r0)
{
    char step[16] = "";
    if (m->sk != 1)
        snprintf(step, sizeof step, "%d", m->sk);
    if (r0 == 0)
        snprintf(buf, cap, "%sk", step);
    else
        snprintf(buf, cap, "%d+%sk", r0, step);
    return buf;
}

/* The global rank of a root as c sees it: "14", or "2+16k" for every k. */
static const char *root_text(char *buf, size_t cap, const tg_plan *pl, const tg_class_plan *cp, tg_coord c,
                             const tg_step *s)
{
    tg_coord k0 = c;
    if (k0.k < 0)
        k0.k = 0;
    int r = tg_step_root(pl, k0, s) + (cp ? cp->stage * pl->mesh.p : 0); /* pipeline stages: the stage's ranks */
    if (c.k >= 0 || pl->mesh.d == 1)
        snprintf(buf, cap, "%d", r);
    else
        tg_k_ranks_text(buf, cap, &pl->mesh, r);
    return buf;
}

const char *tg_step_text(char *buf, size_t cap, const tg_plan *pl, const tg_class_plan *cp, tg_coord c,
                         const tg_step *s)
{
    char h[32], g[32], r[32];
    const char *lab = s->label ? s->label : "";
    switch (s->desc) {
    case TG_D_LABEL:
        snprintf(buf, cap, "%s", lab);
        break;
    case TG_D_ALLREDUCE:
        snprintf(buf, cap, "all-reduce(sum) %s over %s", lab, tg_group_text(g, sizeof g, pl, c, s->group));
        break;
    case TG_D_ALLREDUCE_X:
        snprintf(buf, cap, "all-reduce(sum, identical on every member) %s over %s", lab,
                 tg_group_text(g, sizeof g, pl, c, s->group));
        break;
    case TG_D_BCAST:
        tg_h_text(h, sizeof h, pl, c);
        tg_group_text(g, sizeof g, pl, c, s->group);
        root_text(r, sizeof r, pl, cp, c, s);
        if (s->group == TG_ROW)
            snprintf(buf, cap, "bcast X(h=%s,t=%d) over %s from rank %s%s", h, s->t, g, r, lab);
        else
            snprintf(buf, cap, "bcast W(t=%d,j=%d) over %s from rank %s%s", s->t, c.j, g, r, lab);
        break;
    case TG_D_REDUCE:
        tg_h_text(h, sizeof h, pl, c);
        tg_group_text(g, sizeof g, pl, c, s->group);
        root_text(r, sizeof r, pl, cp, c, s);
        if (s->group == TG_ROW)
            snprintf(buf, cap, "reduce(sum) P into dX(h=%s,t=%d) over %s to rank %s", h, s->t, g, r);
        else
            snprintf(buf, cap, "reduce(sum) P into dW(t=%d,j=%d) over %s to rank %s", s->t, c.j, g, r);
        break;
    case TG_D_SUMMA:
        tg_h_text(h, sizeof h, pl, c);
        snprintf(buf, cap, "Y(h=%s,j=%d) %s X(h=%s,t=%d) @ W(t=%d,j=%d)  [%dx%d]@[%dx%d]", h, c.j,
                 s->t == 0 ? "=" : "+=", h, s->t, s->t, c.j, s->m, s->k, s->k, s->n);
        break;
    case TG_D_ABT: /* gemm m = R, n = Kq, k = Nq */
        tg_h_text(h, sizeof h, pl, c);
        if (pl->mesh.q == 1)
            snprintf(buf, cap, "dX(h=%s,0) = dY(h=%s,0) @ W(0,0)^T  [%dx%d]@[%dx%d]^T", h, h, s->m, s->k, s->n,
                     s->k);
        else
            snprintf(buf, cap, "P = dY(h=%s,j=%d) @ W(t=%d,j=%d)^T  [%dx%d]@[%dx%d]^T%s", h, c.j, s->t, c.j, s->m,
                     s->k, s->n, s->k, c.j == s->t ? ", into dX (this rank is the root)" : "");
        break;
    case TG_D_ATB: /* gemm m = Kq, n = Nq, k = R */
        tg_h_text(h, sizeof h, pl, c);
        if (pl->mesh.q == 1)
            snprintf(buf, cap, "dW(0,0) = X(h=%s,0)^T @ dY(h=%s,0)  [%dx%d]^T@[%dx%d]", h, h, s->k, s->m, s->k,
                     s->n);
        else
            snprintf(buf, cap, "P = X(h=%s,t=%d)^T @ dY(h=%s,j=%d)  [%dx%d]^T@[%dx%d]%s", h, s->t, h, c.j, s->k,
                     s->m, s->k, s->n, c.i == s->t ? ", into dW (this rank is the root)" : "");
        break;
    case TG_D_ATTENTION:
        snprintf(buf, cap, "causal softmax attention, %d sequences x %d local heads", s->nseq, s->heads);
        break;
    case TG_D_CAST:
        snprintf(buf, cap, "bf16 copy of %s for the GEMMs (round to nearest even)",
                 cp && s->buf[0] >= 0 ? cp->bufs[s->buf[0]].name : "?");
        break;
    case TG_D_RSCATTER:
    case TG_D_AGATHER:
        snprintf(buf, cap, "%s %s over %s, member k gets slice k of %lld elements", s->desc == TG_D_RSCATTER ?
                 "reduce-scatter(sum, member order)" : "all-gather", lab, tg_group_text(g, sizeof g, pl, c, s->group),
                 (s->count + s->group_size - 1) / s->group_size);
        break;
    case TG_D_ADAMW:
        if (s->slice_of > 0) {
            snprintf(buf, cap, "AdamW on slice k of %s (%lld of its %lld elements; k = this rank's member of dep)%s",
                     cp && s->aux >= 0 && s->aux < cp->nparams ? cp->params[s->aux].name : "?", s->count,
                     s->slice_of, s->decay ? " (with weight decay)" : "");
            break;
        }
        snprintf(buf, cap, "AdamW on %s%s%s", cp && s->aux >= 0 && s->aux < cp->nparams ? cp->params[s->aux].name : "?",
                 s->decay ? " (with weight decay)" : "", s->buf[4] >= 0 ? ", then its bf16 copy (round to nearest even)" : "");
        break;
    }
    if (s->again && cap > 0) {
        char t[512];
        snprintf(t, sizeof t, "%s", buf);
        snprintf(buf, cap, "recomputed: %s", t);
    }
    return buf;
}

const char *tg_buf_text(char *buf, size_t cap, const tg_plan *pl, tg_coord c, const tg_buf *b)
{
    const char *mark = strstr(b->what, "{h}");
    if (!mark) {
        snprintf(buf, cap, "%s", b->what);
        return buf;
    }
    char h[32];
    snprintf(buf, cap, "%.*s%s%s", (int)(mark - b->what), b->what, tg_h_text(h, sizeof h, pl, c), mark + 3);
    return buf;
}
