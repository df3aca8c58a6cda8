/*
 * build_settings.c - reads the build settings of build_settings.h from the
 * environment and checks each one before it is printed into build.ninja: a
 * value must be one line of printable ASCII without '$' (ninja would take it
 * for a variable), TESS_WERROR must be 0 or 1, and TESS_NCCL_HOME must be a
 * folder that really holds include/nccl.h and the library, so a wrong path is
 * reported by tessgen, naming the variable, instead of by the compiler later.
 * With TESS_NCCL_HOME the library is linked by the name the folder has
 * (-l:libnccl.so.2 when only the versioned file exists, as in pip's wheel) and
 * its folder becomes an rpath of bin/model-cuda, so the program finds it
 * without LD_LIBRARY_PATH.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_settings.h"

static bool is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* name's value, or def when unset or empty; false when it cannot be printed into build.ninja */
static bool text_setting(const char *name, const char *def, char *out, size_t cap, tg_err *err)
{
    const char *v = getenv(name);
    if (!v || !*v)
        v = def;
    if (strlen(v) >= cap)
        return tg_fail(err, "%s is %zu characters long: at most %zu fit into build.ninja; shorten it", name,
                       strlen(v), cap - 1);
    for (const unsigned char *c = (const unsigned char *)v; *c; c++)
        if (*c < 32 || *c > 126 || *c == '$')
            return tg_fail(err, "%s = %s has a character build.ninja cannot hold (one line of printable ASCII "
                                "without '$'); write the value out literally",
                           name, v);
    snprintf(out, cap, "%s", v);
    return true;
}

static bool nccl_setting(tg_build_settings *s, tg_err *err)
{
    const char *v = getenv("TESS_NCCL_HOME");
    s->nccl_cflags[0] = '\0';
    snprintf(s->nccl_libs, sizeof s->nccl_libs, "-lnccl");
    if (!v || !*v)
        return true;
    char home[PATH_MAX];
    if (!realpath(v, home))
        return tg_fail(err, "TESS_NCCL_HOME = %s does not exist: name the folder holding include/nccl.h and "
                            "lib/libnccl.so.2 (for pip's nvidia-nccl-cu13: python3 -c 'import nvidia.nccl; "
                            "print(nvidia.nccl.__path__[0])'), or unset it to use the compiler's default paths",
                       v);
    if (strlen(home) > 1000)
        return tg_fail(err, "TESS_NCCL_HOME = %s is longer than 1000 characters: use a shorter path (a symbolic "
                            "link)",
                       v);
    for (const char *c = home; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              strchr("/._+-", *c)))
            return tg_fail(err, "TESS_NCCL_HOME = %s is printed into build.ninja's flags: use a path of letters, "
                                "digits and /._+- (a symbolic link to it will do)",
                           home);
    char probe[PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s/include/nccl.h", home);
    if (!is_file(probe))
        return tg_fail(err, "TESS_NCCL_HOME = %s has no include/nccl.h: it must name the folder holding "
                            "include/nccl.h and lib/libnccl.so.2 (pip's nvidia-nccl-cu13 installs it as "
                            "site-packages/nvidia/nccl)",
                       home);
    const char *lib = NULL;
    snprintf(probe, sizeof probe, "%s/lib/libnccl.so", home);
    if (is_file(probe)) {
        lib = "-lnccl";
    } else {
        snprintf(probe, sizeof probe, "%s/lib/libnccl.so.2", home);
        if (is_file(probe))
            lib = "-l:libnccl.so.2";
    }
    if (!lib)
        return tg_fail(err, "TESS_NCCL_HOME = %s has include/nccl.h but neither lib/libnccl.so nor "
                            "lib/libnccl.so.2: name the folder of a complete NCCL installation",
                       home);
    snprintf(s->nccl_cflags, sizeof s->nccl_cflags, "-I%.1000s/include", home);
    snprintf(s->nccl_libs, sizeof s->nccl_libs, "-L%.1000s/lib %s -Xlinker -rpath=%.1000s/lib", home, lib, home);
    return true;
}

bool tg_build_settings_read(tg_build_settings *s, tg_err *err)
{
    memset(s, 0, sizeof *s);
    bool ok = text_setting("TESS_MPICC", "mpicc", s->mpicc, sizeof s->mpicc, err);
    ok = text_setting("TESS_CUDA_CCBIN", "mpicxx", s->ccbin, sizeof s->ccbin, err) && ok;
    ok = text_setting("TESS_MPI_CFLAGS", "", s->mpi_cflags, sizeof s->mpi_cflags, err) && ok;
    ok = text_setting("TESS_MPI_LIBS", "", s->mpi_libs, sizeof s->mpi_libs, err) && ok;
    ok = text_setting("TESS_CUDA_LDFLAGS", "", s->cuda_ldflags, sizeof s->cuda_ldflags, err) && ok;
    ok = text_setting("TESS_CUDNN_LIBS", "-l:libcudnn.so.9", s->cudnn_libs, sizeof s->cudnn_libs, err) && ok;
    ok = text_setting("TESS_SDPA_OBJ", "", s->sdpa_obj, sizeof s->sdpa_obj, err) && ok;
    ok = nccl_setting(s, err) && ok;
    const char *w = getenv("TESS_WERROR");
    s->werror = 1;
    if (w && *w) {
        if (!strcmp(w, "0"))
            s->werror = 0;
        else if (strcmp(w, "1") != 0)
            ok = tg_fail(err, "TESS_WERROR = %s is not 0 or 1: 1 (the default) makes warnings errors, 0 keeps them "
                              "warnings (for a host compiler this code was never built with)",
                         w);
    }
    return ok;
}

bool tg_build_on_path(const char *prog)
{
    const char *p = getenv("PATH");
    while (p && *p) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char cand[PATH_MAX + 256];
        if (len < PATH_MAX) {
            snprintf(cand, sizeof cand, "%.*s/%s", (int)len, len ? p : ".", prog);
            if (is_file(cand) && access(cand, X_OK) == 0)
                return true;
        }
        p += len;
        if (*p == ':')
            p++;
    }
    return false;
}
