/*
 * emit_common.c - the template placeholders that every emitted file shares.
 */
#include <stdio.h>

#include "emit.h"
#include "version.h"

int tg_emit_common_vars(const tg_plan *pl, tg_tvar *vars, char (*store)[64])
{
    int n = 0;
    vars[n++] = (tg_tvar){"VERSION", TG_VERSION};
    vars[n++] = (tg_tvar){"SPEC", pl->spec.path};
    vars[n++] = (tg_tvar){"NAME", pl->spec.name};
    snprintf(store[0], 64, "%d", pl->mesh.p);
    vars[n++] = (tg_tvar){"P", store[0]};
    snprintf(store[1], 64, "%d", pl->mesh.q);
    vars[n++] = (tg_tvar){"Q", store[1]};
    snprintf(store[2], 64, "%d", pl->mesh.d);
    vars[n++] = (tg_tvar){"D", store[2]};
    return n;
}

void tg_emit_members(tg_sb *o, const tg_mesh *m, tg_group g, tg_coord c, const char *open, const char *close)
{
    tg_sb_puts(o, open);
    for (int l = 0; l < tg_group_size(m, g); l++)
        tg_sb_printf(o, "%s%d", l ? "," : "", tg_group_member(m, g, c, l));
    tg_sb_puts(o, close);
}
