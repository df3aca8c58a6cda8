/*
 * mesh.c - coordinates, groups and roots of the [q,q,d] mesh (see mesh.h for
 * the formulas, which follow DESIGN.md section 1 exactly), and of the 1-D
 * mesh of the megatron scheme (rank r = row r; one group, world). No I/O,
 * no state.
 */
#include "mesh.h"

#include <stdio.h>

tg_mesh tg_mesh_make(int q, int d, tg_placement placement)
{
    tg_mesh m = {q, d, q * q * d, TG_SCHEME_TESSERACT, placement, 0, 0, 0};
    switch (placement) {
    case TG_PLACE_COL:
        m.si = 1, m.sj = q, m.sk = q * q;
        break;
    case TG_PLACE_DEP:
        m.sk = 1, m.sj = d, m.si = d * q;
        break;
    default:
        m.placement = TG_PLACE_ROW;
        m.sj = 1, m.si = q, m.sk = q * q;
        break;
    }
    return m;
}

tg_mesh tg_mesh_make_megatron(int p)
{
    tg_mesh m = {1, 1, p, TG_SCHEME_MEGATRON, TG_PLACE_ROW, 1, 0, 0};
    return m;
}

int tg_mesh_rank(const tg_mesh *m, tg_coord c)
{
    if (m->scheme == TG_SCHEME_MEGATRON)
        return c.i;
    return c.i * m->si + c.j * m->sj + c.k * m->sk;
}

const char *tg_mesh_rank_formula(const tg_mesh *m)
{
    if (m->scheme == TG_SCHEME_MEGATRON)
        return "rank = i";
    return m->placement == TG_PLACE_COL   ? "rank = i + q*j + q*q*k"
           : m->placement == TG_PLACE_DEP ? "rank = k + d*j + d*q*i"
                                          : "rank = j + q*i + q*q*k";
}

tg_coord tg_mesh_coord(const tg_mesh *m, int rank)
{
    tg_coord c;
    if (m->scheme == TG_SCHEME_MEGATRON) {
        c.i = rank;
        c.j = c.k = 0;
        return c;
    }
    c.i = (rank / m->si) % m->q;
    c.j = (rank / m->sj) % m->q;
    c.k = (rank / m->sk) % m->d;
    return c;
}

const char *tg_group_name(tg_group g)
{
    static const char *names[TG_NGROUPS] = {"row", "col", "dep", "coldep", "world"};
    return (g >= 0 && g < TG_NGROUPS) ? names[g] : "?";
}

int tg_group_size(const tg_mesh *m, tg_group g)
{
    if (g == TG_WORLD)
        return m->p;
    if (m->scheme == TG_SCHEME_MEGATRON)
        return g >= 0 && g < TG_NGROUPS ? 1 : 0;
    switch (g) {
    case TG_ROW:
    case TG_COL:
        return m->q;
    case TG_DEP:
        return m->d;
    case TG_COLDEP:
        return m->q * m->d;
    default:
        return 0;
    }
}

int tg_group_local(const tg_mesh *m, tg_group g, tg_coord c)
{
    if (g == TG_WORLD)
        return tg_mesh_rank(m, c);
    if (m->scheme == TG_SCHEME_MEGATRON)
        return g >= 0 && g < TG_NGROUPS ? 0 : -1;
    switch (g) {
    case TG_ROW:
        return c.j;
    case TG_COL:
        return c.i;
    case TG_DEP:
        return c.k;
    case TG_COLDEP:
        return c.i + m->q * c.k;
    default:
        return -1;
    }
}

int tg_group_color(const tg_mesh *m, tg_group g, tg_coord c)
{
    if (g == TG_WORLD)
        return 0;
    if (m->scheme == TG_SCHEME_MEGATRON)
        return g >= 0 && g < TG_NGROUPS ? tg_mesh_rank(m, c) : -1; /* groups of one */
    switch (g) {
    case TG_ROW:
        return c.i + m->q * c.k;
    case TG_COL:
        return c.j + m->q * c.k;
    case TG_DEP:
        return c.j + m->q * c.i;
    case TG_COLDEP:
        return c.j;
    default:
        return -1;
    }
}

int tg_group_used(const tg_mesh *m, tg_group g)
{
    if (g < 0 || g >= TG_NGROUPS)
        return 0;
    return m->scheme == TG_SCHEME_MEGATRON ? g == TG_WORLD : g != TG_WORLD;
}

int tg_group_member(const tg_mesh *m, tg_group g, tg_coord c, int local)
{
    tg_coord o = c;
    if (g == TG_WORLD)
        return local;
    if (m->scheme == TG_SCHEME_MEGATRON)
        return g >= 0 && g < TG_NGROUPS && local == 0 ? tg_mesh_rank(m, c) : -1;
    switch (g) {
    case TG_ROW:
        o.j = local;
        break;
    case TG_COL:
        o.i = local;
        break;
    case TG_DEP:
        o.k = local;
        break;
    case TG_COLDEP:
        o.i = local % m->q;
        o.k = local / m->q;
        break;
    default:
        return -1;
    }
    return tg_mesh_rank(m, o);
}

void tg_group_label(const tg_mesh *m, tg_group g, tg_coord c, char *buf, int len)
{
    if (g == TG_WORLD || m->scheme == TG_SCHEME_MEGATRON) {
        if (g == TG_WORLD)
            snprintf(buf, (size_t)len, "world");
        else
            snprintf(buf, (size_t)len, "%s(rank %d alone)", tg_group_name(g), tg_mesh_rank(m, c));
        return;
    }
    switch (g) {
    case TG_ROW:
        snprintf(buf, (size_t)len, "row(%d,%d)", c.i, c.k);
        break;
    case TG_COL:
        snprintf(buf, (size_t)len, "col(%d,%d)", c.j, c.k);
        break;
    case TG_DEP:
        snprintf(buf, (size_t)len, "dep(%d,%d)", c.i, c.j);
        break;
    case TG_COLDEP:
        snprintf(buf, (size_t)len, "coldep(%d)", c.j);
        break;
    default:
        snprintf(buf, (size_t)len, "?");
        break;
    }
}

void tg_mesh_text(const tg_mesh *m, char *buf, int len)
{
    if (m->scheme == TG_SCHEME_MEGATRON)
        snprintf(buf, (size_t)len, "megatron p=%d", m->p);
    else
        snprintf(buf, (size_t)len, "[%d,%d,%d]", m->q, m->q, m->d);
}

int tg_mesh_row_block(const tg_mesh *m, tg_coord c)
{
    if (m->scheme == TG_SCHEME_MEGATRON)
        return 0; /* every rank holds every token */
    return c.i + m->q * c.k;
}
