/*
 * main.c - the tessgen command line: declare (spec.c), bake (plan.c), emit
 * (emit_*.c), in that order. Every output is rendered into memory before the
 * first byte is written, so a bad spec or an internal error changes nothing on
 * disk; then each file is written atomically and only if its content changed.
 *
 * Exit codes: 0 success, 1 the spec or an output path was rejected (message on
 * stderr), 2 usage error, 70 internal error.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "emit.h"
#include "outfile.h"
#include "plan.h"
#include "spec.h"
#include "version.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tessgen SPEC.lua [-o DIR] [--quiet]\n"
            "       tessgen --help | --version\n"
            "\n"
            "Generates, for a GPT-2 style model spec and a [q,q,d] Tesseract mesh, the program every\n"
            "rank runs: DIR/rank_XXXX.c (fully unrolled, literal roots and offsets), model.c,\n"
            "build.ninja, manifest.json, schedule.txt and the launcher DIR/run.\n"
            "\n"
            "  -o DIR     output directory (default: out/<name>)\n"
            "  --quiet    print only errors\n"
            "  --help     this text\n"
            "  --version  tessgen's version\n"
            "\n"
            "Then:  ninja -C DIR  &&  DIR/run [--weights W.safetensors] [--input X.npy] [--output Y.npy]\n"
            "Spec keys and run options: README.md. Exit: 0 ok, 1 rejected spec/output, 2 usage, 70 internal.\n");
}

/* The tessgen checkout holding runtime/tr.h: the directory above bin/ (or build/asan/) of this program. */
static bool find_tessroot(char *root, size_t len)
{
    const char *env = getenv("TESSGEN_ROOT");
    char exe[PATH_MAX];
    if (env && *env) {
        if (!realpath(env, exe))
            return false;
    } else {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return false;
        exe[n] = '\0';
    }
    char *dir = exe;
    for (int up = 0; up < 4; up++) {
        char probe[PATH_MAX + 32];
        snprintf(probe, sizeof probe, "%s/runtime/tr.h", dir);
        if (access(probe, R_OK) == 0) {
            snprintf(root, len, "%s", dir);
            return true;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
            break;
        *slash = '\0';
    }
    return false;
}

typedef struct out_file {
    char name[64];
    int mode;
    tg_sb text;
} out_file;

/* Text that lands inside C comments and string literals must not be able to end them. */
static bool path_is_printable(const char *p)
{
    for (const unsigned char *c = (const unsigned char *)p; *c; c++)
        if (*c < 32 || *c > 126 || *c == '"' || *c == '\\')
            return false;
    return !strstr(p, "*/") && !strstr(p, "@@");
}

/* Remove rank files of an earlier generation with more ranks, so the directory holds one program. */
static void remove_stale(const char *dir, int p, int quiet)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    struct dirent *e;
    while ((e = readdir(dp))) {
        int r;
        char tail[8];
        if (sscanf(e->d_name, "rank_%d.%7s", &r, tail) == 2 && strcmp(tail, "c") == 0 && r >= p) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (unlink(path) == 0 && !quiet)
                printf("removed stale %s\n", path);
        }
    }
    closedir(dp);
}

int main(int argc, char **argv)
{
    const char *spec_path = NULL, *outdir = NULL;
    int quiet = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[a], "--version")) {
            printf("tessgen %s\n", TG_VERSION);
            return 0;
        } else if (!strcmp(argv[a], "--quiet") || !strcmp(argv[a], "-q")) {
            quiet = 1;
        } else if (!strcmp(argv[a], "-o")) {
            if (a + 1 >= argc) {
                fprintf(stderr, "tessgen: -o needs a directory\n");
                return 2;
            }
            outdir = argv[++a];
        } else if (argv[a][0] == '-' && argv[a][1]) {
            fprintf(stderr, "tessgen: unknown option %s (see tessgen --help)\n", argv[a]);
            return 2;
        } else if (!spec_path) {
            spec_path = argv[a];
        } else {
            fprintf(stderr, "tessgen: one spec file at a time (got %s and %s)\n", spec_path, argv[a]);
            return 2;
        }
    }
    if (!spec_path) {
        usage(stderr);
        return 2;
    }
    if (!path_is_printable(spec_path)) {
        fprintf(stderr, "tessgen: %s: the spec path is printed into generated C; use a path of printable ASCII "
                        "without quotes, backslashes, '*/' or '@@'\n", spec_path);
        return 1;
    }

    tg_err err = {{0}, 0};
    tg_spec spec;
    if (!tg_spec_load(spec_path, &spec, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        fprintf(stderr, "tessgen: %d problem%s in %s; nothing was written\n", err.count, err.count == 1 ? "" : "s",
                spec_path);
        return 1;
    }
    char root[PATH_MAX];
    if (!find_tessroot(root, sizeof root)) {
        fprintf(stderr, "tessgen: cannot find the runtime (runtime/tr.h) above this program; set TESSGEN_ROOT to "
                        "the tessgen checkout\n");
        return 1;
    }
    if (!path_is_printable(root)) {
        fprintf(stderr, "tessgen: %s: the tessgen checkout path is printed into build.ninja; move it to a path of "
                        "printable ASCII\n", root);
        return 1;
    }
    char defdir[512];
    if (!outdir) {
        snprintf(defdir, sizeof defdir, "out/%s", spec.name);
        outdir = defdir;
    }

    tg_plan plan;
    if (!tg_plan_build(&spec, &plan, &err)) {
        fprintf(stderr, "tessgen: %s\n", err.msg);
        return 70;
    }

    /* render everything first */
    int nfiles = plan.mesh.p + 5;
    out_file *files = calloc((size_t)nfiles, sizeof *files);
    if (!files) {
        fprintf(stderr, "tessgen: out of memory\n");
        return 70;
    }
    bool ok = true;
    int fi = 0;
    for (int r = 0; r < plan.mesh.p && ok; r++, fi++) {
        snprintf(files[fi].name, sizeof files[fi].name, "rank_%04d.c", r);
        files[fi].mode = 0644;
        tg_sb_init(&files[fi].text);
        ok = tg_emit_rank_c(&plan, r, &files[fi].text, &err);
    }
    struct {
        const char *name;
        int mode;
    } rest[5] = {{"model.c", 0644}, {"build.ninja", 0644}, {"manifest.json", 0644}, {"schedule.txt", 0644},
                 {"run", 0755}};
    for (int k = 0; k < 5 && ok; k++, fi++) {
        snprintf(files[fi].name, sizeof files[fi].name, "%s", rest[k].name);
        files[fi].mode = rest[k].mode;
        tg_sb_init(&files[fi].text);
        switch (k) {
        case 0: ok = tg_emit_model_c(&plan, &files[fi].text, &err); break;
        case 1: ok = tg_emit_ninja(&plan, root, &files[fi].text, &err); break;
        case 2: ok = tg_emit_manifest(&plan, &files[fi].text, &err); break;
        case 3: ok = tg_emit_schedule_txt(&plan, &files[fi].text, &err); break;
        case 4: ok = tg_emit_launcher(&plan, &files[fi].text, &err); break;
        }
    }
    int rc = 0;
    if (!ok) {
        fprintf(stderr, "tessgen: %s\n", err.msg);
        rc = 70;
    }

    /* then write */
    int written = 0;
    if (rc == 0 && !tg_mkdir_p(outdir, &err)) {
        fprintf(stderr, "tessgen: %s\n", err.msg);
        rc = 1;
    }
    for (int k = 0; rc == 0 && k < fi; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", outdir, files[k].name);
        bool changed;
        if (!tg_write_if_changed(path, files[k].text.s, files[k].text.len, files[k].mode, &changed, &err)) {
            fprintf(stderr, "tessgen: %s\n", err.msg);
            rc = 1;
        }
        written += changed;
    }
    if (rc == 0)
        remove_stale(outdir, plan.mesh.p, quiet);

    if (rc == 0 && !quiet) {
        const tg_spec *s = &plan.spec;
        printf("tessgen %s: %s, mesh [%d,%d,%d] = %d ranks, %d layers (C=%d, heads=%d, F=%d, S=%d, B=%d)\n",
               TG_VERSION, s->name, s->q, s->q, s->d, plan.mesh.p, s->layers, s->hidden, s->heads, s->ffn, s->seq,
               s->batch);
        printf("%-6s %-11s %14s %14s %16s %8s\n", "rank", "(i,j,k)", "arena bytes", "weight bytes", "bcast recv B",
               "steps");
        for (int r = 0; r < plan.mesh.p; r++) {
            const tg_rank_plan *rp = &plan.ranks[r];
            long long recv = 0;
            for (int g = 0; g < TG_NGROUPS; g++)
                recv += rp->bcast_recv[g];
            char co[32];
            snprintf(co, sizeof co, "(%d,%d,%d)", rp->c.i, rp->c.j, rp->c.k);
            printf("%-6d %-11s %14lld %14lld %16lld %8d\n", r, co, 4 * rp->arena_elems, 4 * rp->weight_elems,
                   4 * recv, rp->nsteps);
        }
        printf("wrote %d of %d files in %s (the others were unchanged); next: ninja -C %s && %s/run\n", written, fi,
               outdir, outdir, outdir);
    }
    for (int k = 0; k < fi; k++)
        tg_sb_free(&files[k].text);
    free(files);
    tg_plan_free(&plan);
    return rc;
}
