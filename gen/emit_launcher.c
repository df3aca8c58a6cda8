/*
 * emit_launcher.c - prints the output directory's `run` script, which starts
 * the mesh's p ranks under mpirun (or TESS_LAUNCHER, e.g. srun).
 */
#include "emit.h"

bool tg_emit_launcher(const tg_plan *pl, tg_sb *out, tg_err *err)
{
    char store[8][64];
    tg_tvar vars[8];
    int n = tg_emit_common_vars(pl, vars, store);
    return tg_template_fill(out, "run.sh.in", vars, n, err);
}
