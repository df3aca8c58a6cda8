/*
 * emit_ninja.c - prints the output directory's build.ninja: one object per
 * rank file, the rank table, the runtime compiled from the tessgen checkout,
 * linked into bin/model (and bin/model-asan on request); with the CUDA
 * backend also bin/model-cuda (its part is printed by emit_ninja_cuda.c).
 * The compiler, MPI flags and warnings-as-errors choice come from the build
 * settings (build_settings.h), printed as variables at the top.
 */
#include <stdio.h>

#include "emit.h"

bool tg_emit_ninja(const tg_plan *pl, const char *tessroot, const tg_cuda_opts *cu, tg_sb *out, tg_err *err)
{
    tg_build_settings bs;
    if (!tg_build_settings_read(&bs, err))
        return false;
    /* template lines are "name =@@VALUE@@": a non-empty value brings its own leading blank */
    char mpicc[600], mpi_cflags[2100], mpi_libs[2100];
    snprintf(mpicc, sizeof mpicc, " %s", bs.mpicc);
    snprintf(mpi_cflags, sizeof mpi_cflags, "%s%s", *bs.mpi_cflags ? " " : "", bs.mpi_cflags);
    snprintf(mpi_libs, sizeof mpi_libs, "%s%s", *bs.mpi_libs ? " " : "", bs.mpi_libs);
    tg_sb builds, objs, objs_asan, cuda, defaults;
    tg_sb_init(&builds);
    tg_sb_init(&objs);
    tg_sb_init(&objs_asan);
    tg_sb_init(&cuda);
    tg_sb_init(&defaults);
    tg_emit_ninja_cuda(pl, cu, &bs, &cuda, &defaults);
    tg_sb_puts(&builds, "build obj/model.o: cc model.c\n  flags = $cflags\n");
    tg_sb_puts(&builds, "build obj-asan/model.o: cc model.c\n  flags = $asanflags\n");
    for (int r = 0; r < pl->mesh.p; r++) {
        tg_sb_printf(&builds, "build obj/rank_%04d.o: cc rank_%04d.c\n  flags = $cflags\n", r, r);
        tg_sb_printf(&builds, "build obj-asan/rank_%04d.o: cc rank_%04d.c\n  flags = $asanflags\n", r, r);
        tg_sb_printf(&objs, " $\n    obj/rank_%04d.o", r);
        tg_sb_printf(&objs_asan, " $\n    obj-asan/rank_%04d.o", r);
    }
    char store[8][64];
    tg_tvar vars[20];
    int n = tg_emit_common_vars(pl, vars, store);
    vars[n++] = (tg_tvar){"TESSROOT", tessroot};
    vars[n++] = (tg_tvar){"RANK_BUILDS", builds.s};
    vars[n++] = (tg_tvar){"RANK_OBJS", objs.s};
    vars[n++] = (tg_tvar){"RANK_OBJS_ASAN", objs_asan.s};
    vars[n++] = (tg_tvar){"CUDA", cuda.s};
    vars[n++] = (tg_tvar){"CUDA_DEFAULT", defaults.s};
    vars[n++] = (tg_tvar){"MPICC", mpicc};
    vars[n++] = (tg_tvar){"MPI_CFLAGS", mpi_cflags};
    vars[n++] = (tg_tvar){"MPI_LIBS", mpi_libs};
    vars[n++] = (tg_tvar){"WERROR", bs.werror ? " -Werror" : ""};
    bool ok = tg_template_fill(out, "build.ninja.in", vars, n, err);
    tg_sb_free(&cuda);
    tg_sb_free(&defaults);
    tg_sb_free(&builds);
    tg_sb_free(&objs);
    tg_sb_free(&objs_asan);
    return ok;
}
