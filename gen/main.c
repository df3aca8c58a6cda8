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
#include "inspect.h"
#include "outfile.h"
#include "plan.h"
#include "spec.h"
#include "version.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tessgen SPEC.lua [-o DIR] [--quiet]\n"
            "       tessgen SPEC.lua --show | --blocks [TENSOR] | --summary  [--ranks L] [--layers L] [--kinds K]\n"
            "       tessgen --help | --version\n"
            "\n"
            "Generates, for a GPT-2 style model spec and a [q,q,d] Tesseract mesh, the program every\n"
            "rank runs: DIR/rank_XXXX.c (fully unrolled, literal roots and offsets), model.c,\n"
            "build.ninja, manifest.json, schedule.txt, schedule.json, schedule.html, summary.txt and the\n"
            "launcher DIR/run. With the CUDA backend also rank_XXXX.cu, kernels.cu and kernels.cuh: the\n"
            "spec's backends = { \"cpu\", \"cuda\" }, else TESS_BACKENDS=cpu,cuda, else when nvcc is found\n"
            "(TESS_NVCC, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin); TESS_CUDA_ARCH=80,90 sets its targets.\n"
            "\n"
            "  -o DIR     output directory (default: out/<name>)\n"
            "  --quiet    print only errors\n"
            "  --help     this text\n"
            "  --version  tessgen's version\n"
            "\n"
            "Inspect without building (print to stdout, write nothing):\n"
            "  --show             the steps of each rank: layer, op, SUMMA step, group and members, root,\n"
            "                     elements, bytes, flops, buffers with arena offsets\n"
            "  --blocks [TENSOR]  the mesh, and which rank holds which block of TENSOR (a weight name such\n"
            "                     as h.0.attn.c_attn.weight, a pattern such as 'h.0.*', or x); default all\n"
            "  --summary          per rank memory peak, bytes per layer and group, flops; mesh totals;\n"
            "                     the other [q,q,d] meshes with the same rank count (also DIR/summary.txt)\n"
            "  --ranks L          only these ranks, e.g. 0,5-7 (default all)\n"
            "  --layers L         only these layers, e.g. 3 or 0-1 (default all)\n"
            "  --kinds K          only these step kinds, e.g. bcast,gemm; comm = every collective,\n"
            "                     compute = every other step (--show)\n"
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

/* Remove rank files of an earlier generation with more ranks (and CUDA files when the CUDA backend is no
 * longer emitted), so the directory holds one program. */
static void remove_stale(const char *dir, int p, int cuda, int quiet)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return;
    struct dirent *e;
    while ((e = readdir(dp))) {
        int r;
        char tail[8];
        int rank_c = sscanf(e->d_name, "rank_%d.%7s", &r, tail) == 2 && strcmp(tail, "c") == 0 && r >= p;
        int rank_cu = sscanf(e->d_name, "rank_%d.%7s", &r, tail) == 2 && strcmp(tail, "cu") == 0 && (r >= p || !cuda);
        int kernels = !cuda && (!strcmp(e->d_name, "kernels.cu") || !strcmp(e->d_name, "kernels.cuh"));
        if (rank_c || rank_cu || kernels) {
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
    int show = 0, blocks = 0, summary = 0;
    const char *tensor = NULL, *f_ranks = NULL, *f_layers = NULL, *f_kinds = NULL;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[a], "--version")) {
            printf("tessgen %s\n", TG_VERSION);
            return 0;
        } else if (!strcmp(argv[a], "--quiet") || !strcmp(argv[a], "-q")) {
            quiet = 1;
        } else if (!strcmp(argv[a], "--show")) {
            show = 1;
        } else if (!strcmp(argv[a], "--summary")) {
            summary = 1;
        } else if (!strncmp(argv[a], "--blocks=", 9)) {
            blocks = 1;
            tensor = argv[a] + 9;
        } else if (!strcmp(argv[a], "--blocks")) {
            /* optional operand: the next argument unless it is an option or a spec file */
            blocks = 1;
            size_t n = a + 1 < argc ? strlen(argv[a + 1]) : 0;
            if (n && argv[a + 1][0] != '-' && !(n > 4 && !strcmp(argv[a + 1] + n - 4, ".lua")))
                tensor = argv[++a];
        } else if (!strcmp(argv[a], "--ranks") || !strcmp(argv[a], "--layers") || !strcmp(argv[a], "--kinds")) {
            if (a + 1 >= argc) {
                fprintf(stderr, "tessgen: %s needs a value (see tessgen --help)\n", argv[a]);
                return 2;
            }
            const char **dst = argv[a][2] == 'r' ? &f_ranks : argv[a][2] == 'l' ? &f_layers : &f_kinds;
            *dst = argv[++a];
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
    int inspect = show || blocks || summary;
    if (!inspect && (f_ranks || f_layers || f_kinds)) {
        fprintf(stderr, "tessgen: --ranks, --layers and --kinds select what --show, --blocks or --summary print\n");
        return 2;
    }
    if (inspect && outdir) {
        fprintf(stderr, "tessgen: --show, --blocks and --summary print to stdout and write nothing; drop -o, or "
                        "generate in a separate call\n");
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
    if (inspect) {
        tg_plan ip;
        tg_class_plan *iall;
        tg_plan_init(&spec, &ip);
        if (!tg_plan_all(&ip, &iall, &err)) {
            fprintf(stderr, "tessgen: %s\n", err.msg);
            return 70;
        }
        tg_filter flt;
        if (!tg_filter_init(&flt, &ip, f_ranks, f_layers, f_kinds, &err)) {
            fprintf(stderr, "tessgen: %s\n", err.msg);
            tg_plan_all_free(&ip, iall);
            return 2;
        }
        tg_sb text;
        tg_sb_init(&text);
        int irc = 0;
        if (show)
            tg_inspect_show(&ip, iall, &flt, &text);
        if (blocks && !tg_inspect_blocks(&ip, iall, &flt, tensor, &text, &err))
            irc = strstr(err.msg, "out of memory") ? 70 : 2;
        if (summary && irc == 0 && !tg_inspect_summary(&ip, iall, &flt, &text, &err))
            irc = 70;
        if (irc)
            fprintf(stderr, "tessgen: %s\n", err.msg);
        else
            fwrite(text.s, 1, text.len, stdout);
        tg_sb_free(&text);
        tg_filter_free(&flt);
        tg_plan_all_free(&ip, iall);
        return irc;
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
    tg_class_plan *all;
    tg_plan_init(&spec, &plan);
    if (!tg_plan_all(&plan, &all, &err)) {
        fprintf(stderr, "tessgen: %s\n", err.msg);
        return 70;
    }

    tg_cuda_opts cuda;
    char backends[1024];
    if (!tg_cuda_select(&plan, all, &cuda, backends, sizeof backends, &err)) {
        fprintf(stderr, "tessgen: %s\n", err.msg);
        tg_plan_all_free(&plan, all);
        return 1;
    }

    /* render everything first */
    int nfiles = plan.mesh.p + 8 + (cuda.enabled ? plan.mesh.p + 2 : 0);
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
        ok = tg_emit_rank_c(&plan, &all[tg_class_of(&plan, r)], r, &files[fi].text, &err);
    }
    for (int r = 0; cuda.enabled && r < plan.mesh.p + 2 && ok; r++, fi++) { /* rank_XXXX.cu, kernels.cu(h) */
        files[fi].mode = 0644;
        tg_sb_init(&files[fi].text);
        if (r < plan.mesh.p) {
            snprintf(files[fi].name, sizeof files[fi].name, "rank_%04d.cu", r);
            ok = tg_emit_rank_cu(&plan, &all[tg_class_of(&plan, r)], r, &files[fi].text, &err);
        } else if (r == plan.mesh.p) {
            snprintf(files[fi].name, sizeof files[fi].name, "kernels.cu");
            ok = tg_emit_kernels_cu(&plan, all, &files[fi].text, &err);
        } else {
            snprintf(files[fi].name, sizeof files[fi].name, "kernels.cuh");
            ok = tg_emit_kernels_cuh(&plan, &files[fi].text, &err);
        }
    }
    if (ok) {
        unsigned long long h = 0xcbf29ce484222325ULL; /* FNV-1a 64 over every rank program, in rank order */
        for (int r = 0; r < plan.mesh.p; r++)
            for (size_t i = 0; i < files[r].text.len; i++)
                h = (h ^ (unsigned char)files[r].text.s[i]) * 0x100000001b3ULL;
        snprintf(plan.fingerprint, sizeof plan.fingerprint, "%016llx", h);
    }
    struct {
        const char *name;
        int mode;
    } rest[8] = {{"model.c", 0644},       {"build.ninja", 0644},   {"manifest.json", 0644}, {"schedule.txt", 0644},
                 {"run", 0755},           {"schedule.json", 0644}, {"schedule.html", 0644}, {"summary.txt", 0644}};
    for (int k = 0; k < 8 && ok; k++, fi++) {
        snprintf(files[fi].name, sizeof files[fi].name, "%s", rest[k].name);
        files[fi].mode = rest[k].mode;
        tg_sb_init(&files[fi].text);
        switch (k) {
        case 0: ok = tg_emit_model_c(&plan, &files[fi].text, &err); break;
        case 1: ok = tg_emit_ninja(&plan, root, &cuda, &files[fi].text, &err); break;
        case 2: ok = tg_emit_manifest(&plan, all, &files[fi].text, &err); break;
        case 3: ok = tg_emit_schedule_txt(&plan, all, &files[fi].text, &err); break;
        case 4: ok = tg_emit_launcher(&plan, &files[fi].text, &err); break;
        case 5: ok = tg_emit_schedule_json(&plan, all, &files[fi].text, &err); break;
        case 6: ok = tg_emit_schedule_html(&plan, all, &files[fi].text, &err); break;
        case 7: ok = tg_emit_summary_txt(&plan, all, &files[fi].text, &err); break;
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
        remove_stale(outdir, plan.mesh.p, cuda.enabled, quiet);

    if (rc == 0 && !quiet) {
        const tg_spec *s = &plan.spec;
        printf("tessgen %s: %s, mesh [%d,%d,%d] = %d ranks, %d layers (C=%d, heads=%d, F=%d, S=%d, B=%d)\n",
               TG_VERSION, s->name, s->q, s->q, s->d, plan.mesh.p, s->layers, s->hidden, s->heads, s->ffn, s->seq,
               s->batch);
        printf("%-6s %-11s %14s %14s %16s %8s\n", "rank", "(i,j,k)", "arena bytes", "weight bytes", "bcast recv B",
               "steps");
        for (int r = 0; r < plan.mesh.p; r++) {
            const tg_class_plan *rp = &all[tg_class_of(&plan, r)];
            tg_coord rc = tg_mesh_coord(&plan.mesh, r);
            long long recv = 0;
            for (int g = 0; g < TG_NGROUPS; g++)
                recv += rp->bcast_recv[g];
            char co[32];
            snprintf(co, sizeof co, "(%d,%d,%d)", rc.i, rc.j, rc.k);
            printf("%-6d %-11s %14lld %14lld %16lld %8d\n", r, co, 4 * rp->arena_elems, 4 * rp->weight_elems,
                   4 * recv, rp->nsteps);
        }
        printf("%s\n", backends);
        printf("schedule fingerprint %s (every run of this output prints it at start)\n", plan.fingerprint);
        printf("wrote %d of %d files in %s (the others were unchanged); next: ninja -C %s && %s/run\n", written, fi,
               outdir, outdir, outdir);
        printf("inspect: %s/schedule.html (open in a browser), %s/summary.txt (memory, bytes per layer, other "
               "meshes), %s/schedule.json\n", outdir, outdir, outdir);
    }
    for (int k = 0; k < fi; k++)
        tg_sb_free(&files[k].text);
    free(files);
    tg_plan_all_free(&plan, all);
    return rc;
}
