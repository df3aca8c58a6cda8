/*
 * emit_launcher.c - prints the output directory's `run` script, which starts
 * the mesh's p ranks under mpirun (or TESS_LAUNCHER, e.g. srun).
 */
#include "emit.h"

bool tg_emit_launcher(const tg_plan *pl, tg_sb *out, tg_err *err)
{
    char store[8][64];
    tg_tvar vars[9];
    int n = tg_emit_common_vars(pl, vars, store);
    /* the header's example command: the program's own way to run (docs/GENERATE.md for a generate program) */
    vars[n++] = (tg_tvar){"USAGE", pl->spec.mode == TG_GENERATE
                                       ? "./run --weights W.safetensors --generate --prompt-tokens P.npy --max-new N\n"
                                         "#         [--eos ID] [--temperature T --top-k K --top-p P --seed S] --output T.npy\n"
                                         "#         [--logits-out L.npy] [--bytes] [--help] ..."
                                       : "./run [--weights W.safetensors] [--input X.npy] [--output Y.npy] [--seed N] "
                                         "[--help] ..."};
    return tg_template_fill(out, "run.sh.in", vars, n, err);
}
