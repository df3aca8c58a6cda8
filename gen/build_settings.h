/*
 * build_settings.h - how the generated build.ninja compiles and links: the
 * compilers, the MPI and NCCL flags, and whether warnings are errors. They are
 * read from the environment when tessgen runs (not when ninja runs, so a build
 * is the same whoever starts ninja) and printed as ninja variables at the top
 * of build.ninja, one per setting, where a user may also edit them.
 *
 *   TESS_MPICC        C compiler of the CPU program and of the objects both programs share (default mpicc)
 *   TESS_CUDA_CCBIN   nvcc's host compiler, -ccbin (default mpicxx)
 *   TESS_MPI_CFLAGS   MPI compile flags, for compilers that are not MPI wrappers (default none)
 *   TESS_MPI_LIBS     MPI link flags, likewise (default none)
 *   TESS_NCCL_HOME    a folder holding include/nccl.h and lib/libnccl.so or lib/libnccl.so.2 (pip's
 *                     nvidia-nccl-cu13 ships only the latter): -I, -L, the library by that name, and an
 *                     rpath (default: the compiler's own search paths, -lnccl)
 *   TESS_CUDA_LDFLAGS extra link flags of bin/model-cuda, e.g. an rpath to cuBLAS (default none)
 *   TESS_CUDNN_LIBS   how a program with attention = "cudnn" links cuDNN (default -l:libcudnn.so.9, found beside
 *                     cuBLAS by nvcc); e.g. "-L/w/lib -l:libcudnn.so.9 -Xlinker -rpath=/w/lib" for a pip wheel's
 *   TESS_SDPA_OBJ     the cuDNN attention object such a program links (default: $tessroot/build/cuda/trc_sdpa.o,
 *                     built there by tessgen's own build.ninja when missing; docs/CUDA.md)
 *   TESS_WERROR       1 (default): warnings are errors (-Werror; nvcc -Werror all-warnings); 0: warnings only,
 *                     for a host compiler the code was never built with
 *
 * Defaults reproduce the build.ninja of a machine with Open MPI's wrappers and NCCL installed system-wide.
 */
#ifndef TG_BUILD_SETTINGS_H
#define TG_BUILD_SETTINGS_H

#include <stdbool.h>

#include "err.h"

typedef struct tg_build_settings {
    char mpicc[512];
    char ccbin[512];
    char mpi_cflags[2048];
    char mpi_libs[2048];
    char nccl_cflags[1200];
    char nccl_libs[2600];
    char cuda_ldflags[2048];
    char cudnn_libs[2048];
    char sdpa_obj[1100]; /* "" = the default */
    int werror;
} tg_build_settings;

/* Read the TESS_* settings above; false with a message naming the variable, the rule and the fix. */
bool tg_build_settings_read(tg_build_settings *s, tg_err *err);

/* Whether an executable file named prog is in a directory of $PATH (an empty entry is the current directory):
 * tessgen suggests `ninja -C DIR` only where the user can run it. */
bool tg_build_on_path(const char *prog);

#endif
