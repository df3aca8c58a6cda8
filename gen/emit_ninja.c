/*
 * emit_ninja.c - prints the output directory's build.ninja: the runtime
 * compiled from the tessgen checkout into one archive per variant, bin/model
 * (the launcher that starts each rank's program), and per rank class one
 * object and one program, bin/cpu/rank_iI_jJ (and bin/asan/... on request);
 * with the CUDA backend also bin/model-cuda and bin/cuda/... (its part is
 * printed by emit_ninja_cuda.c). The CPU kernels (tr_kernels*.c, tr_gemm.c) get
 * $kflags (-O3), the rest $cflags. The compiler, MPI flags and warnings-as-errors
 * choice come from the build settings (build_settings.h), printed as variables
 * at the top.
 */
#include <stdio.h>
#include <string.h>

#include "emit.h"

/* The runtime sources every CPU program links; tr_main.o is linked as an object, the rest as an archive. */
static const char *const rt_src[] = {"tr_err",  "tr_json",  "tr_safetensors", "tr_npy",          "tr_synth",
                                     "tr_kernels", "tr_comm", "tr_gemm",      "tr_trace",        "tr_kernels_bwd",
                                     "tr_gather", "tr_hfnames", "tr_stset",       "tr_hfout",        "tr_sched",
                                     "tr_clip",   "tr_ckpt",    "tr_data",        "tr_backend_cpu",  "tr_kernels_lm",
                                     "tr_tokens", "tr_lmdata", "tr_kernels_bf16"};

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
    tg_sb rt, builds, bins, bins_asan, cuda, defaults;
    tg_sb_init(&rt);
    tg_sb_init(&builds);
    tg_sb_init(&bins);
    tg_sb_init(&bins_asan);
    tg_sb_init(&cuda);
    tg_sb_init(&defaults);
    tg_emit_ninja_cuda(pl, cu, &bs, &cuda, &defaults);
    static const char *const var[2][3] = {{"obj", "$cflags", "cpu"}, {"obj-asan", "$asanflags", "asan"}};
    size_t nrt = sizeof rt_src / sizeof rt_src[0];
    for (int v = 0; v < 2; v++) {
        /* the compiled objects: in the optimised variant one shared set per flag set (cflags, kflags) */
        for (int kset = 0; kset < (v == 0 ? 2 : 1); kset++) {
            tg_sb_puts(&rt, "build");
            tg_sb names;
            tg_sb_init(&names);
            int col = 0;
            for (size_t k = 0; k <= nrt; k++) {
                const char *src = k == nrt ? "tr_main" : rt_src[k];
                bool kernel = !strncmp(src, "tr_kernels", 10) || !strcmp(src, "tr_gemm");
                if (v == 0 && kernel != (kset == 1))
                    continue;
                tg_sb_printf(&rt, "%s %s/rt/%s.o", col && col % 3 == 0 ? " $\n   " : "", var[v][0], src);
                tg_sb_printf(&names, "%s%s", names.len ? " " : "", src);
                col++;
            }
            tg_sb_printf(&rt, ": rt_shared | rt_always\n  objdir = %s/rt\n  srcdir = runtime\n  ext = c\n"
                              "  names = %s\n  cmd = $mpicc %s -MMD -MF\n  rsp = %s/rt/%s.rsp\n",
                         var[v][0], names.s, v == 0 && kset == 1 ? "$kflags" : var[v][1], var[v][0],
                         v == 0 && kset == 1 ? "kflags" : "cflags");
            tg_sb_free(&names);
        }
        tg_sb_printf(&rt, "build %s/rt/libtessrt.a: ar", var[v][0]);
        for (size_t k = 0; k < nrt; k++)
            tg_sb_printf(&rt, " $\n    %s/rt/%s.o", var[v][0], rt_src[k]);
        tg_sb_puts(&rt, "\n");
    }
    for (int c = 0; c < tg_plan_nclasses(pl); c++) { /* class c is number c (tg_class_name_n) */
                        char cn[32];
            tg_class_name_n(cn, sizeof cn, pl, c);
            for (int v = 0; v < 2; v++) {
                tg_sb_printf(&builds, "build %s/%s.o: cc %s.c\n  flags = %s\n", var[v][0], cn, cn, var[v][1]);
                tg_sb_printf(&builds, "build bin/%s/%s: link %s/%s.o %s/model.o %s/rt/tr_main.o %s/rt/libtessrt.a\n",
                             var[v][2], cn, var[v][0], cn, var[v][0], var[v][0], var[v][0]);
                tg_sb_printf(&builds, "  flags = -g%s\n", v ? " -fsanitize=address,undefined,float-cast-overflow" : "");
                tg_sb_printf(v ? &bins_asan : &bins, " $\n    bin/%s/%s", var[v][2], cn);
            }
        }
    char store[8][64];
    tg_tvar vars[24];
    int n = tg_emit_common_vars(pl, vars, store);
    snprintf(store[TG_EMIT_COMMON_STORE], 64, "%d", tg_plan_nclasses(pl));
    vars[n++] = (tg_tvar){"NCLASSES", store[TG_EMIT_COMMON_STORE]};
    vars[n++] = (tg_tvar){"TESSROOT", tessroot};
    vars[n++] = (tg_tvar){"RUNTIME", rt.s};
    vars[n++] = (tg_tvar){"CLASS_BUILDS", builds.s};
    vars[n++] = (tg_tvar){"CLASS_BINS", bins.s};
    vars[n++] = (tg_tvar){"CLASS_BINS_ASAN", bins_asan.s};
    vars[n++] = (tg_tvar){"CUDA", cuda.s};
    vars[n++] = (tg_tvar){"CUDA_DEFAULT", defaults.s};
    vars[n++] = (tg_tvar){"MPICC", mpicc};
    vars[n++] = (tg_tvar){"MPI_CFLAGS", mpi_cflags};
    vars[n++] = (tg_tvar){"MPI_LIBS", mpi_libs};
    vars[n++] = (tg_tvar){"WERROR", bs.werror ? " -Werror" : ""};
    bool ok = tg_template_fill(out, "build.ninja.in", vars, n, err);
    tg_sb_free(&cuda);
    tg_sb_free(&defaults);
    tg_sb_free(&rt);
    tg_sb_free(&builds);
    tg_sb_free(&bins);
    tg_sb_free(&bins_asan);
    return ok;
}
