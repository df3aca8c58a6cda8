/*
 * emit_ninja_cuda.c - the CUDA part of the output's build.ninja: how
 * bin/model-cuda and the class programs bin/cuda/rank_iI_jJ are compiled and
 * linked (nvcc, its host compiler, the MPI, cuBLAS and NCCL flags), the
 * objects of rank_iI_jJ.cu, kernels.cu and the CUDA runtime, and the links,
 * which reuse the backend-neutral objects of the CPU programs. Every machine-dependent choice is a ninja variable at the top of
 * this part, printed from tg_build_settings (build_settings.h: the TESS_*
 * environment when tessgen runs), so a machine whose NCCL comes from a pip
 * wheel or whose host compiler is new to this code is served by regenerating
 * with different settings, not by editing rules. When the CUDA backend is not
 * emitted, `ninja cuda` fails with a message saying how to get it.
 */
#include <stdio.h>

#include "emit.h"

/* "name = value", or "name =" for an empty value (no trailing blank) */
static void var(tg_sb *o, const char *name, const char *value)
{
    tg_sb_printf(o, "%s =%s%s\n", name, *value ? " " : "", value);
}

/* attention = "cudnn" (docs/CUDA.md, "Fused attention through cuDNN"): the steps around cuDNN compiled here
 * (trc_attn_cudnn.cu), cuDNN's part linked from the one object tessgen's build.ninja compiles (trc_sdpa.o,
 * TESS_SDPA_OBJ), and cuDNN itself (TESS_CUDNN_LIBS). Without TESS_SDPA_OBJ the object is
 * $tessroot/build/cuda/trc_sdpa.o, which this build asks tessgen's build.ninja for (compiled there once, whatever
 * the number of outputs; restat: an up-to-date object relinks nothing). NVRTC (the CUDA toolkit's, beside cuBLAS)
 * because cudnn-frontend's runtime-compiled engines reference it. */
static void emit_sdpa(tg_sb *rules, const tg_build_settings *bs)
{
    tg_sb_puts(rules, "# attention = \"cudnn\": cuDNN's fused attention (docs/CUDA.md), settings TESS_SDPA_OBJ and\n"
                      "# TESS_CUDNN_LIBS\n");
    var(rules, "cudnn_libs", bs->cudnn_libs);
    if (bs->sdpa_obj[0]) {
        var(rules, "sdpa_obj", bs->sdpa_obj);
    } else {
        tg_sb_puts(rules, "sdpa_obj = $tessroot/build/cuda/trc_sdpa.o\n"
                          "rule tess_sdpa\n"
                          "  command = ninja -C $tessroot build/cuda/trc_sdpa.o\n"
                          "  description = SDPA $out (tessgen's build.ninja, once for every output)\n"
                          "  restat = 1\n"
                          "build $sdpa_obj: tess_sdpa | $tessroot/runtime/cuda/trc_sdpa.cpp "
                          "$tessroot/runtime/cuda/trc_sdpa.h\n");
    }
    tg_sb_puts(rules, "build obj-cuda/rt/trc_attn_cudnn.o: nvcc $tessroot/runtime/cuda/trc_attn_cudnn.cu\n");
}

void tg_emit_ninja_cuda(const tg_plan *pl, const tg_cuda_opts *cu, const tg_build_settings *bs, tg_sb *rules,
                        tg_sb *defaults)
{
    if (!cu->enabled) {
        tg_sb_puts(rules, "# CUDA backend: not emitted (");
        tg_sb_puts(rules, cu->why[0] ? cu->why : "not selected");
        tg_sb_puts(rules, ")\nrule nocuda\n  command = echo 'this output has no CUDA backend: regenerate with "
                          "backends = { \"cpu\", \"cuda\" } in the spec' >&2; false\n"
                          "  description = NO CUDA BACKEND\nbuild cuda: nocuda\n");
        return;
    }
    tg_sb_puts(rules, "# CUDA backend: bin/model-cuda and bin/cuda/rank_iI_jJ, the same schedule as CUDA (cuBLAS, NCCL,\n"
                      "# fused kernels)\n"
                      "# Settings, from the environment when tessgen ran (docs/CUDA.md): nvcc (TESS_NVCC), its host\n"
                      "# compiler (TESS_CUDA_CCBIN), NCCL (TESS_NCCL_HOME: -I, -L, the library, rpath), extra link\n"
                      "# flags (TESS_CUDA_LDFLAGS), warnings as errors (TESS_WERROR); MPI flags as above.\n");
    var(rules, "nvcc", cu->nvcc);
    var(rules, "ccbin", bs->ccbin);
    var(rules, "cuda_arch", cu->gencode);
    var(rules, "nccl_cflags", bs->nccl_cflags);
    var(rules, "nccl_libs", bs->nccl_libs);
    var(rules, "cuda_ldflags", bs->cuda_ldflags);
    var(rules, "cuda_werror", bs->werror ? "-Xcompiler -Werror -Werror all-warnings" : "");
    var(rules, "cuda_include", cu->include);
    if (cu->include[0])
        var(rules, "hostcxx_werror", bs->werror ? "-Werror" : "");
    tg_sb_puts(rules,
               "nvccflags = -std=c++20 -O3 -g -lineinfo $cuda_arch -ccbin $ccbin -Xcompiler -Wall,-Wextra $cuda_werror $\n"
               "    -Xptxas -warn-spills -I. -I$tessroot/runtime -I$tessroot/runtime/cuda $mpi_cflags $nccl_cflags\n"
               "cudalibs = -lcublasLt -lcublas -lm\n\n"
               "rule nvcc\n"
               "  command = $nvcc $nvccflags -MD -MF $out.d -c $in -o $out\n"
               "  depfile = $out.d\n"
               "  deps = gcc\n"
               "  description = NVCC $out\n\n"
               "rule nvlink\n"
               "  command = $nvcc $cuda_arch -ccbin $ccbin $in -o $out $mpi_libs $cudalibs $nccl_libs $cuda_ldflags\n"
               "  description = LINK $out\n\n");
    if (cu->include[0])
        tg_sb_puts(rules, "rule hostcxx\n"
                          "  command = $ccbin -std=c++20 -O2 -g -Wall -Wextra $hostcxx_werror -x c++ -I. $\n"
                          "    -I$tessroot/runtime -I$tessroot/runtime/cuda -I$cuda_include $mpi_cflags $nccl_cflags $\n"
                          "    -MD -MF $out.d -c $in -o $out\n"
                          "  depfile = $out.d\n"
                          "  deps = gcc\n"
                          "  description = CXX $out\n\n");
    /* the CUDA runtime: the same objects for every output built with these flags, so compiled once per checkout and
     * command (rule rt_shared of the CPU part: scripts/rt_shared.sh) and copied here where they changed */
    static const char *rt[] = {"tr_backend_cuda", "trc_comm", "trc_gemm", "trc_gemm_lt", "trc_adamw", "trc_step",
                               "trc_profile"};
    tg_sb_puts(rules, "# the CUDA runtime (runtime/cuda/*.cu): compiled once per tessgen checkout and command, as the\n"
                      "# CPU runtime above\nbuild");
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++)
        tg_sb_printf(rules, "%s obj-cuda/rt/%s.o", i && i % 3 == 0 ? " $\n   " : "", rt[i]);
    tg_sb_puts(rules, ": rt_shared | rt_always\n  objdir = obj-cuda/rt\n  srcdir = runtime/cuda\n  ext = cu\n  names =");
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++)
        tg_sb_printf(rules, " %s", rt[i]);
    tg_sb_puts(rules, "\n  cmd = $nvcc $nvccflags -MD -MF\n  rsp = obj-cuda/rt/nvccflags.rsp\n");
    const bool sdpa = pl->spec.attention == TG_ATTN_CUDNN;
    if (sdpa)
        emit_sdpa(rules, bs);
    tg_sb_puts(rules, "build obj-cuda/kernels.o: nvcc kernels.cu\n"
                      "build obj-cuda/rt/tr_launch.o: cc $tessroot/runtime/tr_launch.c\n"
                      "  flags = $cflags -DTR_LAUNCH_DIR='\"cuda\"'\n"
                      "build bin/model-cuda: link obj-cuda/rt/tr_launch.o obj/model.o\n  flags = -g\n"
                      "\n# each class program: its code, every kernel instance, the CUDA runtime, and the CPU program's\n"
                      "# shared main, loaders and MPI groups\n");
    tg_sb_puts(rules, cu->include[0]
                          ? "# rank_iI_jJ.cu holds host code only (its kernels are in kernels.cu): the host compiler\n"
                            "# builds it at -O2 with the CUDA headers of $cuda_include, faster than nvcc's passes\n"
                          : "# rank_iI_jJ.cu holds host code only, but no CUDA include directory was found beside nvcc\n"
                            "# (TESS_CUDA_INCLUDE): nvcc compiles it\n");
    tg_sb cls;
    tg_sb_init(&cls);
    for (int c = 0; c < tg_plan_nclasses(pl); c++) { /* class c is number c (tg_class_name_n) */
                        char cn[32];
            tg_class_name_n(cn, sizeof cn, pl, c);
            tg_sb_printf(rules, "build obj-cuda/%s.o: %s %s.cu\n", cn, cu->include[0] ? "hostcxx" : "nvcc", cn);
            tg_sb_printf(rules, "build bin/cuda/%s: nvlink obj-cuda/%s.o obj/model.o obj-cuda/kernels.o", cn, cn);
            for (size_t k = 0; k < sizeof rt / sizeof rt[0]; k++)
                tg_sb_printf(rules, " obj-cuda/rt/%s.o", rt[k]);
            tg_sb_printf(rules, " $\n    obj/rt/tr_main.o obj/rt/tr_err.o obj/rt/tr_json.o obj/rt/tr_safetensors.o "
                              "obj/rt/tr_npy.o obj/rt/tr_synth.o $\n"
                              "    obj/rt/tr_comm.o obj/rt/tr_trace.o obj/rt/tr_gather.o obj/rt/tr_hfnames.o obj/rt/tr_stset.o $\n"
                              "    obj/rt/tr_hfout.o obj/rt/tr_sched.o obj/rt/tr_clip.o obj/rt/tr_ckpt.o obj/rt/tr_data.o $\n"
                              "    obj/rt/tr_tokens.o obj/rt/tr_lmdata.o%s\n",
                         sdpa ? " $\n    obj-cuda/rt/trc_attn_cudnn.o $sdpa_obj\n  cudalibs = -lcublasLt -lcublas -lm $cudnn_libs -lnvrtc" : "");
            tg_sb_printf(&cls, " $\n    bin/cuda/%s", cn);
        }
    tg_sb_printf(rules, "build cuda: phony bin/model-cuda%s\n", cls.s);
    tg_sb_puts(defaults, " cuda");
    tg_sb_free(&cls);
}
