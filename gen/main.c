/*
 * main.c - the tessgen command line: declare (spec.c), bake (plan.c), emit
 * (emit_*.c), in that order.
 *
 * Generation runs in two passes over the rank classes, holding one class plan
 * at a time. Pass 1 plans every class: the schedule fingerprint, the figures
 * of the report, whether the CUDA backend can run it. Nothing is written
 * until it has passed, so a rejected spec changes nothing on disk. Then the
 * output directory is locked (outdir.c) and pass 2 plans each class again,
 * prints its program and writes it at once (atomically, and only if its
 * content changed, so ninja rebuilds only what changed), then the files that
 * cover every rank.
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
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "advise.h"
#include "cost.h"
#include "emit.h"
#include "fingerprint.h"
#include "hf_config.h"
#include "inspect.h"
#include "bounds.h"
#include "machine.h"
#include "outdir.h"
#include "outfile.h"
#include "plan.h"
#include "spec.h"
#include "pipe.h"
#include "pipe_cost.h"
#include "summary.h"
#include "version.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tessgen SPEC.lua [-o DIR] [--quiet]\n"
            "       tessgen SPEC.lua --show | --blocks [TENSOR] | --summary  [--ranks L] [--layers L] [--kinds K]\n"
            "       tessgen SPEC.lua --advise --machine M.lua [--ranks P] [--json]\n"
            "       tessgen SPEC.lua --cost --machine M.lua [--json]\n"
            "       tessgen --from-hf DIR --mesh Q,D --seq S --batch B [--mode train] [--blocks-only | --vocab-align A]\n"
            "               (prints SPEC.lua)\n"
            "       tessgen --from-hf DIR --mesh Q,D --seq S --batch B --mode generate --context N\n"
            "       tessgen --from-hf DIR --scheme megatron --mesh P --seq S --batch B [--mode train]\n"
            "       tessgen --help | --version\n"
            "\n"
            "Generates, for a GPT-2 style model spec and a [q,q,d] Tesseract mesh, the program every\n"
            "rank runs: DIR/rank_iI_jJ.c for the ranks (i, j, k) of each class (fully unrolled, literal\n"
            "roots and offsets), model.c, build.ninja, manifest.json, schedule.txt, schedule.json and\n"
            "schedule/ (the steps of each class), schedule.html, summary.txt and the launcher DIR/run; one\n"
            "directory is written by one tessgen at a time. Specs beyond 1,000,000 steps per class program,\n"
            "40,000,000 in all, or an arena per rank beyond memory_gib (default 80) are refused up front.\n"
            "With the CUDA backend also rank_iI_jJ.cu, kernels.cu and kernels.cuh: the\n"
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
            "                     the other [q,q,d] meshes with the same rank count; ranks and layers with\n"
            "                     the same figures share a line, so it fits on a screen\n"
            "  --full             with --summary: every rank class and every layer (as DIR/summary.txt)\n"
            "  --ranks L          only these ranks, e.g. 0,5-7 (default all)\n"
            "  --layers L         only these layers, e.g. 3 or 0-1 (default all)\n"
            "  --kinds K          only these step kinds, e.g. bcast,gemm; comm = every collective,\n"
            "                     compute = every other step (--show)\n"
            "\n"
            "Which mesh? (docs/COST.md; machine files: specs/machines/)\n"
            "  --advise           rank every layout of the model on P ranks (every [q,q,d] and placement,\n"
            "                     Megatron-LM 1-D; training: also mesh.pp stages x micro-batches) by predicted\n"
            "                     time per forward and per training step on the machine, with memory per rank\n"
            "                     and what dominates; P: --ranks P, else the spec's mesh (pp*q*q*d)\n"
            "  --cost             the predicted time of the spec's own mesh: phases, step kinds, layers\n"
            "                     (with mesh.pp > 1: each stage, its blocks between stages, the step)\n"
            "  --machine M.lua    the cluster: ranks per node, links, GEMM rates, memory\n"
            "  --json             with --advise: {\"candidates\": [...], \"refused\": [...]}; with --cost:\n"
            "                     {\"phases\": {\"forward\": {...}, ...}} (with stages {\"stages\": [...], ...})\n"
            "\n"
            "From Hugging Face (README.md, \"From Hugging Face\"):\n"
            "  --from-hf DIR      print to stdout a spec for the GPT-2 model that save_pretrained wrote in DIR:\n"
            "                     layers, hidden, heads, ffn, eps from DIR/config.json, name from DIR; refuses,\n"
            "                     naming the key, every config value tessgen does not compute (activation other\n"
            "                     than gelu_new/gelu_pytorch_tanh, scale_attn_weights false, scale_attn_by_\n"
            "                     inverse_layer_idx true, add_cross_attention true, model_type other than gpt2,\n"
            "                     pruned_heads, auto_map, quantization_config) and seq > n_positions. The spec\n"
            "                     is checked by the same loader as SPEC.lua. The whole GPT2LMHeadModel (vocab =\n"
            "                     vocab_size, positions = n_positions; tie_word_embeddings false is refused);\n"
            "                     --blocks-only (and --scheme megatron): the stack of blocks alone. Run the\n"
            "                     program with --weights DIR/model.safetensors\n"
            "  --mesh Q,D | Q     the Tesseract mesh [Q,Q,D] (D default 1); with --scheme megatron, P ranks\n"
            "  --scheme S         tesseract (default) or megatron\n"
            "  --seq S, --batch B tokens per sequence (at most n_positions), sequences\n"
            "  --mode M           infer (default), train or generate (docs/GENERATE.md)\n"
            "  --context N        with --mode generate: model.context, the KV cache (prompt + new tokens)\n"
            "  --vocab-align A    the whole model's model.vocab_align, A in 1..1024: each rank's vocabulary\n"
            "                     block padded to a multiple of A rows (64 suits tensor cores; docs/MODEL.md)\n"
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

/* Text that lands inside C comments and string literals must not be able to end them. */
static bool path_is_printable(const char *p)
{
    for (const unsigned char *c = (const unsigned char *)p; *c; c++)
        if (*c < 32 || *c > 126 || *c == '"' || *c == '\\')
            return false;
    return !strstr(p, "*/") && !strstr(p, "@@");
}

/* Write one generated file atomically if its content changed; name is relative to dir. */
static bool put(const char *dir, const char *name, const tg_sb *text, int mode, int *written, tg_err *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    bool changed;
    if (!tg_write_if_changed(path, text->s, text->len, mode, &changed, err))
        return false;
    *written += changed;
    return true;
}

static const struct {
    const char *name;
    int mode;
} index_files[] = {{"model.c", 0644},       {"build.ninja", 0644},   {"manifest.json", 0644}, {"schedule.txt", 0644},
                   {"run", 0755},           {"schedule.json", 0644}, {"schedule.html", 0644}, {"summary.txt", 0644}};
enum { NINDEX = sizeof index_files / sizeof index_files[0] };

/* The report after writing: one line per class, or per group of classes with the same figures. */
static void report(const tg_plan *pl, const tg_class_fig *fig, const char *backends, const char *outdir, int written,
                   int nfiles)
{
    const tg_spec *s = &pl->spec;
    int nc = tg_plan_nclasses(pl), q = pl->mesh.q;
    char mt[48];
    tg_mesh_text(&pl->mesh, mt, sizeof mt);
    printf("tessgen %s: %s, mesh %s = %d ranks in %d rank class%s, %d layers (C=%d, heads=%d, F=%d, S=%d, "
           "B=%d)\n",
           TG_VERSION, s->name, mt, tg_plan_world(pl), nc, nc == 1 ? "" : "es", s->layers, s->hidden, s->heads,
           s->ffn, s->seq, s->batch);
    printf("%-22s %8s %14s %14s %16s %8s\n", tg_plan_stages(pl) > 1 ? "classes (s,i,j)" : "classes (i,j)", "ranks", "arena bytes", "weight bytes", "bcast recv B",
           "steps");
    char *done = calloc((size_t)nc, 1);
    for (int c = 0; done && c < nc; c++) {
        if (done[c])
            continue;
        int same = 0, last = c;
        for (int o = c; o < nc; o++)
            if (!done[o] && fig[o].arena == fig[c].arena && fig[o].weights == fig[c].weights &&
                fig[o].recv == fig[c].recv && fig[o].nsteps == fig[c].nsteps) {
                done[o] = 1;
                same++;
                last = o;
            }
        char who[160], a[40], b[40]; /* (i,j), or (s,i,j) with pipeline stages (class number (s*q + i)*q + j) */
        if (tg_plan_stages(pl) > 1) {
            snprintf(a, sizeof a, "(%d,%d,%d)", c / (q * q), c % (q * q) / q, c % q);
            snprintf(b, sizeof b, "(%d,%d,%d)", last / (q * q), last % (q * q) / q, last % q);
        } else {
            snprintf(a, sizeof a, "(%d,%d)", c / q, c % q);
            snprintf(b, sizeof b, "(%d,%d)", last / q, last % q);
        }
        if (same == 1)
            snprintf(who, sizeof who, "%s", a);
        else
            snprintf(who, sizeof who, "%d classes, %s..%s", same, a, b);
        printf("%-22s %8d %14lld %14lld %16lld %8d\n", who, same * pl->mesh.d, 4 * fig[c].arena, 4 * fig[c].weights,
               fig[c].recv, fig[c].nsteps);
    }
    free(done);
    printf("%s\n", backends);
    printf("schedule fingerprint %s (every program of this output checks it at start, and a run prints it)\n",
           pl->fingerprint);
    printf("wrote %d of %d files in %s (the others were unchanged); next: %sninja -C %s && %s/run\n", written, nfiles,
           outdir,
           tg_build_on_path("ninja") ? ""
                                     : "ninja is not on PATH: install it (Debian/Ubuntu: apt-get install ninja-build; "
                                       "or pip install ninja), then ",
           outdir, outdir);
    printf("inspect: %s/schedule.html (open in a browser), %s/summary.txt (memory, bytes per layer, other meshes), "
           "%s/schedule.json\n",
           outdir, outdir, outdir);
}

/* The bytes this generation writes, estimated before anything is written: class (0,0)'s files rendered in full
 * (its C and CUDA programs, its schedule text, JSON and JS, its manifest and block-map entries, the block map
 * twice: schedule.json and schedule.html) times the classes, plus a tenth (the classes differ in their roots and
 * the widths of a few numbers), plus kernels.cu(h) of class (0,0) and an allowance for the files that cover every
 * rank (model.c, build.ninja, run, schedule.txt, summary.txt and the index of schedule.json and .html): 1 MB and
 * 1 KB per rank. The estimate is printed, and refused when the disk cannot hold it (tg_outdir_room). */
static bool estimate_output(const tg_plan *plan, const tg_cuda_opts *cuda, unsigned long long *bytes, tg_err *err)
{
    tg_class_plan cp;
    if (!tg_plan_class(plan, 0, 0, &cp, err))
        return false;
    tg_sb t, js;
    tg_sb_init(&t);
    tg_sb_init(&js);
    unsigned long long per_class = 0, once = 0;
    bool ok = tg_emit_class_c(plan, &cp, &t, err);
    per_class += t.len;
    tg_kernels *ks = NULL;
    if (ok && cuda->enabled) {
        t.len = 0;
        ks = tg_kernels_new();
        ok = ks && tg_emit_class_cu(plan, &cp, &t, err) && tg_kernels_add(ks, &cp);
        per_class += t.len;
        t.len = 0;
        ok = ok && tg_emit_kernels_cu(plan, ks, &t, err);
        once += t.len;
        t.len = 0;
        ok = ok && tg_emit_kernels_cuh(plan, &t, err);
        once += t.len;
    }
    if (ok) {
        t.len = 0;
        ok = tg_emit_class_txt(plan, &cp, &t, err);
        per_class += t.len;
        t.len = 0;
        ok = ok && tg_emit_class_json(plan, &cp, &t, err);
        per_class += t.len;
        if (ok)
            tg_emit_class_js(&js, &t);
        per_class += js.len;
        t.len = 0;
        tg_emit_manifest_class(plan, &cp, &t);
        per_class += t.len;
        t.len = 0;
        tg_emit_blockmap_class(&t, &cp);
        per_class += 2 * t.len;
    }
    tg_kernels_free(ks);
    tg_sb_free(&t);
    tg_sb_free(&js);
    tg_class_free(&cp);
    unsigned long long nc = (unsigned long long)tg_plan_nclasses(plan);
    *bytes = per_class * nc + per_class * nc / 10 + once + (1ULL << 20) + 1024ULL * (unsigned long long)plan->mesh.p;
    return ok;
}

/* Plan every class (pass 1: fingerprint, figures, what the CUDA backend can run), then lock the output
 * directory and print and write one class at a time (pass 2), then the files that cover every rank. */
static int generate(const tg_spec *spec, const char *outdir, const char *root, int quiet)
{
    tg_err err = {{0}, 0};
    tg_plan plan;
    tg_plan_init(spec, &plan);
    if (!tg_bounds_work(&plan, &err)) {
        fprintf(stderr, "%s\ntessgen: nothing was written\n", err.msg);
        return 1;
    }
    int nc = tg_plan_nclasses(&plan), rc = 0, lockfd = -1, written = 0;
    tg_class_fig *fig = calloc((size_t)nc, sizeof *fig);
    tg_kernels *kernels = NULL;
    tg_filelist old, now;
    tg_filelist_init(&old);
    tg_filelist_init(&now);
    if (!fig) {
        fprintf(stderr, "tessgen: out of memory\n");
        return 70;
    }

    /* pass 1 */
    tg_fp fp;
    tg_fp_init(&fp, spec);
    char unsupported[600] = "";
    for (int c = 0; c < nc; c++) {
        tg_class_plan cp;
        if (!tg_plan_class_n(&plan, c, &cp, &err)) {
            fprintf(stderr, "tessgen: %s\n", err.msg);
            tg_figures_free(&plan, fig);
            return 70;
        }
        tg_fp_class(&fp, &cp);
        if (!tg_class_figures(&plan, &cp, &fig[c], &err)) {
            fprintf(stderr, "tessgen: %s\n", err.msg);
            tg_class_free(&cp);
            tg_figures_free(&plan, fig);
            return 70;
        }
        tg_err e = {{0}, 0};
        if (!unsupported[0] && !tg_cuda_supports(&cp, &e))
            snprintf(unsupported, sizeof unsupported, "%.590s", e.msg);
        tg_class_free(&cp);
    }
    tg_fp_final(&fp, plan.fingerprint);
    if (!unsupported[0] && plan.mesh.scheme == TG_SCHEME_MEGATRON && plan.V > 0) /* plan_megatron_lm.c: CPU only */
        snprintf(unsupported, sizeof unsupported,
                 "model.vocab on scheme = \"megatron\": the CUDA backend is not wired for the megatron scheme's "
                 "vocab-parallel embedding and LM head yet (docs/MEGATRON.md); the CPU backend runs it");
    if (!tg_bounds_memory(&plan, fig, &err)) {
        fprintf(stderr, "%s\ntessgen: nothing was written\n", err.msg);
        tg_figures_free(&plan, fig);
        return 1;
    }

    tg_cuda_opts cuda;
    char backends[1024];
    if (!tg_cuda_select(&plan, unsupported[0] ? unsupported : NULL, &cuda, backends, sizeof backends, &err)) {
        fprintf(stderr, "tessgen: %s\n", err.msg);
        tg_figures_free(&plan, fig);
        return 1;
    }

    /* the files this generation writes */
    bool ok = true;
    for (int k = 0; k < NINDEX && ok; k++)
        ok = tg_filelist_add(&now, index_files[k].name);
    for (int c = 0; c < nc && ok; c++) {
        char cn[32], name[48];
        tg_class_name_n(cn, sizeof cn, &plan, c);
        snprintf(name, sizeof name, "%s.c", cn);
        ok = tg_filelist_add(&now, name);
        snprintf(name, sizeof name, "%s.cu", cn);
        if (ok && cuda.enabled)
            ok = tg_filelist_add(&now, name);
        static const char *const sched_ext[3] = {"txt", "json", "js"};
        for (int k = 0; k < 3 && ok; k++) {
            snprintf(name, sizeof name, "schedule/%s.%s", cn, sched_ext[k]);
            ok = tg_filelist_add(&now, name);
        }
    }
    if (ok && cuda.enabled)
        ok = tg_filelist_add(&now, "kernels.cu") && tg_filelist_add(&now, "kernels.cuh");
    if (!ok) {
        fprintf(stderr, "tessgen: out of memory\n");
        rc = 70;
        goto out;
    }
    tg_filelist_sort(&now);

    /* the size, before anything is written: printed, and refused when the disk cannot hold it */
    unsigned long long need = 0, avail = 0;
    if (!estimate_output(&plan, &cuda, &need, &err)) {
        fprintf(stderr, "tessgen: %s\n", err.msg);
        rc = 70;
        goto out;
    }
    need += 4096ULL * (unsigned long long)now.n; /* each file rounds up to a block */
    if (!tg_outdir_room(outdir, &now, need, &avail, &err)) {
        fprintf(stderr, "tessgen: %s\ntessgen: nothing was written\n", err.msg);
        rc = 1;
        goto out;
    }
    if (!quiet)
        printf("writing about %.1f MB in %d files to %s (estimated from class (0,0)); %.1f MB free there\n",
               (double)need / 1e6, now.n, outdir, (double)avail / 1e6);

    /* lock, then list what may be written before writing it */
    char subdir[4200];
    snprintf(subdir, sizeof subdir, "%s/schedule", outdir);
    if (!tg_outdir_lock(outdir, &lockfd, &err) || !tg_outdir_read_list(outdir, &old, &err) ||
        !tg_mkdir_p(subdir, &err)) {
        fprintf(stderr, "tessgen: %s\n", err.msg);
        rc = 1;
        goto out;
    }
    tg_outdir_clean_tmp(outdir, &old, &now, quiet);
    if (!tg_outdir_write_list(outdir, &old, &now, &err)) {
        fprintf(stderr, "tessgen: %s\n", err.msg);
        rc = 1;
        goto out;
    }

    /* pass 2: one class at a time */
    kernels = cuda.enabled ? tg_kernels_new() : NULL;
    if (cuda.enabled && !kernels) {
        fprintf(stderr, "tessgen: out of memory\n");
        rc = 70;
        goto out;
    }
    tg_sb mclasses, blockmap;
    tg_sb_init(&mclasses);
    tg_sb_init(&blockmap);
    for (int c = 0; c < nc && rc == 0; c++) {
        tg_class_plan cp;
        if (!tg_plan_class_n(&plan, c, &cp, &err)) {
            fprintf(stderr, "tessgen: %s\n", err.msg);
            rc = 70;
            break;
        }
        char cn[32], name[48];
        tg_class_name_n(cn, sizeof cn, &plan, c);
        tg_emit_manifest_class(&plan, &cp, &mclasses);
        tg_emit_blockmap_class(&blockmap, &cp);
        tg_sb text;
        tg_sb_init(&text);
        if (!tg_emit_class_c(&plan, &cp, &text, &err))
            rc = 70;
        snprintf(name, sizeof name, "%s.c", cn);
        if (rc == 0 && !put(outdir, name, &text, 0644, &written, &err))
            rc = 1;
        if (rc == 0 && cuda.enabled) {
            text.len = 0;
            if (!tg_emit_class_cu(&plan, &cp, &text, &err) || !tg_kernels_add(kernels, &cp))
                rc = 70;
            snprintf(name, sizeof name, "%s.cu", cn);
            if (rc == 0 && !put(outdir, name, &text, 0644, &written, &err))
                rc = 1;
        }
        if (rc == 0) { /* the schedule of the class: text, JSON, and the JSON for schedule.html */
            tg_sb js;
            tg_sb_init(&js);
            text.len = 0;
            if (!tg_emit_class_txt(&plan, &cp, &text, &err))
                rc = 70;
            snprintf(name, sizeof name, "schedule/%s.txt", cn);
            if (rc == 0 && !put(outdir, name, &text, 0644, &written, &err))
                rc = 1;
            text.len = 0;
            if (rc == 0 && !tg_emit_class_json(&plan, &cp, &text, &err))
                rc = 70;
            snprintf(name, sizeof name, "schedule/%s.json", cn);
            if (rc == 0 && !put(outdir, name, &text, 0644, &written, &err))
                rc = 1;
            tg_emit_class_js(&js, &text);
            snprintf(name, sizeof name, "schedule/%s.js", cn);
            if (rc == 0 && !put(outdir, name, &js, 0644, &written, &err))
                rc = 1;
            tg_sb_free(&js);
        }
        tg_sb_free(&text);
        tg_class_free(&cp);
        if (rc)
            fprintf(stderr, "tessgen: %s\n", err.msg);
    }
    if (rc == 0 && cuda.enabled) {
        tg_sb a, b;
        tg_sb_init(&a);
        tg_sb_init(&b);
        if (!tg_emit_kernels_cu(&plan, kernels, &a, &err) || !tg_emit_kernels_cuh(&plan, &b, &err))
            rc = 70;
        else if (!put(outdir, "kernels.cu", &a, 0644, &written, &err) ||
                 !put(outdir, "kernels.cuh", &b, 0644, &written, &err))
            rc = 1;
        if (rc)
            fprintf(stderr, "tessgen: %s\n", err.msg);
        tg_sb_free(&a);
        tg_sb_free(&b);
    }

    /* the files that cover every rank, from the figures of pass 1 and the texts gathered in pass 2 */
    tg_sb index;
    tg_sb_init(&index);
    if (rc == 0 && !tg_emit_schedule_json(&plan, fig, &blockmap, &index, &err)) {
        fprintf(stderr, "tessgen: %s\n", err.msg);
        rc = 70;
    }
    for (int k = 0; k < NINDEX && rc == 0; k++) {
        tg_sb text;
        tg_sb_init(&text);
        switch (k) {
        case 0: ok = tg_emit_model_c(&plan, &text, &err); break;
        case 1: ok = tg_emit_ninja(&plan, root, &cuda, &text, &err); break;
        case 2: ok = tg_emit_manifest(&plan, &mclasses, &text, &err); break;
        case 3: ok = tg_emit_schedule_txt(&plan, fig, &text, &err); break;
        case 4: ok = tg_emit_launcher(&plan, &text, &err); break;
        case 5: tg_sb_putn(&text, index.s, index.len); break;
        case 6: ok = tg_emit_schedule_html(&plan, &index, &text, &err); break;
        default: ok = tg_emit_summary_txt(&plan, fig, &text, &err); break;
        }
        if (!ok)
            rc = 70;
        else if (!put(outdir, index_files[k].name, &text, index_files[k].mode, &written, &err))
            rc = 1;
        if (rc)
            fprintf(stderr, "tessgen: %s\n", err.msg);
        tg_sb_free(&text);
    }
    tg_sb_free(&index);
    tg_sb_free(&mclasses);
    tg_sb_free(&blockmap);

    if (rc == 0) {
        tg_outdir_remove_stale(outdir, &old, &now, quiet);
        if (!tg_outdir_write_list(outdir, &now, NULL, &err)) {
            fprintf(stderr, "tessgen: %s\n", err.msg);
            rc = 1;
        }
    }
    if (rc == 0 && !quiet)
        report(&plan, fig, backends, outdir, written, now.n);
out:
    tg_outdir_unlock(lockfd);
    tg_kernels_free(kernels);
    tg_filelist_free(&old);
    tg_filelist_free(&now);
    tg_figures_free(&plan, fig);
    return rc;
}

/* --advise and --cost: load the spec and the machine, print to stdout, write nothing. */
static int advise_main(const char *spec_path, const char *machine_path, int advise, int cost, int json, int other,
                       const char *f_ranks, int filters)
{
    if (advise + cost != 1 || !machine_path || other || filters || (cost && f_ranks)) {
        fprintf(stderr, "tessgen: use --advise --machine M.lua [--ranks P] [--json], or --cost --machine M.lua, alone "
                        "(see tessgen --help)\n");
        return 2;
    }
    int ranks = 0;
    if (f_ranks) {
        char *end;
        long v = strtol(f_ranks, &end, 10);
        if (*end || v < 1 || v > 65536) {
            fprintf(stderr, "tessgen: --ranks %s: with --advise, --ranks is the number of ranks P, 1..65536\n",
                    f_ranks);
            return 2;
        }
        ranks = (int)v;
    }
    tg_err err = {{0}, 0};
    tg_spec spec;
    tg_machine mc;
    bool spec_ok = tg_spec_load(spec_path, &spec, &err);
    bool mc_ok = tg_machine_load(machine_path, &mc, &err);
    if (!spec_ok || !mc_ok) {
        fprintf(stderr, "%s\ntessgen: %d problem%s; nothing was printed\n", err.msg, err.count,
                err.count == 1 ? "" : "s");
        return 1;
    }
    if (advise && spec.mode == TG_GENERATE) { /* it would rank the prefill as a forward, without the KV cache */
        fprintf(stderr, "tessgen: --advise: %s has mode = \"generate\", which the advisor does not rank yet (it would time "
                        "the prefill alone and leave the KV cache out of each layout's memory); use --cost --machine M.lua "
                        "for the spec's own mesh (prefill and decode step), or --advise on the same model with mode = "
                        "\"infer\"\n", spec_path);
        return 2;
    }
    tg_sb text;
    tg_sb_init(&text);
    int rc = 0;
    if (advise) {
        tg_candidate *c = NULL;
        int n = 0;
        if (!tg_advise(&spec, &mc, ranks, &c, &n, &err)) {
            rc = 70;
        } else if (json) {
            tg_advise_json(&spec, &mc, ranks, c, n, &text);
        } else {
            tg_advise_text(&spec, &mc, ranks, c, n, &text);
        }
        free(c);
    } else {
        tg_plan pl;
        tg_plan_init(&spec, &pl);
        tg_class_plan cp;
        tg_cost cs;
        tg_pipe_cost pc;
        if (!tg_bounds_work(&pl, &err)) {
            rc = 1;
        } else if (spec.pp > 1) { /* every stage's classes, the proved schedule timed (docs/COST.md "Pipeline stages") */
            if (tg_pipe_cost_run(&spec, &mc, &pc, &err)) {
                (json ? tg_pipe_cost_json : tg_pipe_cost_text)(&spec, &mc, &pc, &text);
                tg_pipe_cost_free(&pc);
            } else {
                rc = 70;
            }
        } else if (!tg_plan_class(&pl, 0, 0, &cp, &err)) {
            rc = 70;
        } else {
            if (tg_cost_class(&pl, &cp, &mc, &cs, &err)) {
                (json ? tg_cost_json : tg_cost_text)(&pl, &cs, &mc, &text);
                tg_cost_free(&cs);
            } else {
                rc = 70;
            }
            tg_class_free(&cp);
        }
    }
    if (rc)
        fprintf(stderr, "tessgen: %s\n", err.msg);
    else
        fwrite(text.s, 1, text.len, stdout);
    tg_sb_free(&text);
    return rc;
}

/* A positive int option value, else a usage message. */
static bool opt_count(const char *opt, const char *v, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < 1 || x > 1 << 30) {
        fprintf(stderr, "tessgen: %s %s: a positive integer is needed (see tessgen --help)\n", opt, v);
        return false;
    }
    *out = (int)x;
    return true;
}

/* --from-hf: print a spec for a save_pretrained directory (hf_config.c), write nothing. */
static int hf_main(const char *dir, const char *mesh, const char *scheme, const char *seq, const char *batch,
                   const char *mode, const char *context, const char *vocab_align, int blocks_only, int other)
{
    if (other) {
        fprintf(stderr, "tessgen: --from-hf takes only --mesh, --scheme, --seq, --batch, --mode, --context, "
                        "--vocab-align and --blocks-only, and no spec file; "
                        "it prints a spec to stdout (see tessgen --help)\n");
        return 2;
    }
    if (!dir[0] || !mesh || !seq || !batch) {
        fprintf(stderr, "tessgen: --from-hf needs %s (e.g. tessgen --from-hf out/gpt2 --mesh 2,2 --seq 64 --batch 8)\n",
                !dir[0] ? "a directory" : !mesh ? "--mesh" : !seq ? "--seq" : "--batch");
        return 2;
    }
    tg_hf_request r = {.dir = dir, .scheme = TG_SCHEME_TESSERACT, .q = 1, .d = 1, .p = 1, .mode = TG_INFER,
                       .blocks_only = blocks_only};
    if (scheme && !strcmp(scheme, "megatron")) {
        r.scheme = TG_SCHEME_MEGATRON;
    } else if (scheme && strcmp(scheme, "tesseract") != 0) {
        fprintf(stderr, "tessgen: --scheme %s: use tesseract (default) or megatron\n", scheme);
        return 2;
    }
    if (mode && !strcmp(mode, "train")) {
        r.mode = TG_TRAIN;
    } else if (mode && !strcmp(mode, "generate")) {
        r.mode = TG_GENERATE;
    } else if (mode && strcmp(mode, "infer") != 0) {
        fprintf(stderr, "tessgen: --mode %s: use infer (default), train or generate\n", mode);
        return 2;
    }
    if ((r.mode == TG_GENERATE) != (context != NULL)) {
        fprintf(stderr, "tessgen: %s\n", context ? "--context goes with --mode generate (it is the KV cache's length)"
                                                 : "--mode generate needs --context N: the KV cache's length, prompt + "
                                                   "new tokens a sequence (e.g. --seq 64 --context 256)");
        return 2;
    }
    if (context && !opt_count("--context", context, &r.context))
        return 2;
    if (vocab_align) { /* model.vocab_align's rule (spec.c checks the printed spec against the same bound) */
        if (blocks_only || r.scheme == TG_SCHEME_MEGATRON) {
            fprintf(stderr, "tessgen: --vocab-align pads the LM head's vocabulary blocks (model.vocab_align), and %s "
                            "prints the stack of blocks alone, without a vocabulary; drop --vocab-align%s\n",
                    blocks_only ? "--blocks-only" : "--scheme megatron",
                    blocks_only ? " or --blocks-only" : "");
            return 2;
        }
        char *end;
        errno = 0;
        long a = strtol(vocab_align, &end, 10);
        if (end == vocab_align || *end || errno || a < 1 || a > TG_SPEC_MAX_VOCAB_ALIGN) {
            fprintf(stderr, "tessgen: --vocab-align %s: an integer in 1..%d is needed (model.vocab_align: each rank's "
                            "vocabulary block is padded to a multiple of it); use e.g. --vocab-align 64, which suits "
                            "tensor cores\n",
                    vocab_align, TG_SPEC_MAX_VOCAB_ALIGN);
            return 2;
        }
        r.vocab_align = (int)a;
    }
    if (!opt_count("--seq", seq, &r.seq) || !opt_count("--batch", batch, &r.batch))
        return 2;
    const char *comma = strchr(mesh, ',');
    if (r.scheme == TG_SCHEME_MEGATRON) {
        if (comma) {
            fprintf(stderr, "tessgen: --mesh %s: with --scheme megatron, --mesh is the rank count P, e.g. --mesh 4\n",
                    mesh);
            return 2;
        }
        if (!opt_count("--mesh", mesh, &r.p))
            return 2;
    } else {
        char qs[32];
        snprintf(qs, sizeof qs, "%.*s", comma ? (int)(comma - mesh) : 31, mesh);
        if (!opt_count("--mesh", qs, &r.q) || (comma && !opt_count("--mesh", comma + 1, &r.d)))
            return 2;
    }
    tg_err err = {{0}, 0};
    tg_sb spec, warn;
    tg_sb_init(&spec);
    tg_sb_init(&warn);
    int rc = 0;
    if (!tg_hf_spec(&r, &spec, &warn, &err)) {
        fprintf(stderr, "%s\ntessgen: %d problem%s; nothing was printed\n", err.msg, err.count,
                err.count == 1 ? "" : "s");
        rc = 1;
    } else {
        if (warn.len)
            fputs(warn.s, stderr);
        fwrite(spec.s, 1, spec.len, stdout);
        if (fflush(stdout) != 0) {
            fprintf(stderr, "tessgen: cannot write the spec to stdout: %s\n", strerror(errno));
            rc = 1;
        }
    }
    tg_sb_free(&spec);
    tg_sb_free(&warn);
    return rc;
}

/* Planning builds one class plan after another, each a few megabytes of steps, buffers and placement lists that
 * are freed before the next: glibc's defaults hand such blocks back to the kernel (mmap above its threshold, a
 * trimmed heap top) and the next class faults them in again, zeroed. At [8,8,8] x 96 layers of training that was
 * 300 000 page faults and a quarter of --summary's time in the kernel. Keeping the freed blocks in the heap makes
 * the next class reuse them; the peak stays that of the largest class. Nothing else changes: the same allocations,
 * the same output (docs/BENCHMARKS.md, "Planning plus --summary"). */
static void tg_main_keep_heap(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest; a larger block is still mapped on its own */
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

int main(int argc, char **argv)
{
    tg_main_keep_heap();
    const char *spec_path = NULL, *outdir = NULL;
    int quiet = 0;
    int show = 0, blocks = 0, summary = 0, full = 0, advise = 0, cost = 0, json = 0;
    const char *machine_path = NULL;
    const char *tensor = NULL, *f_ranks = NULL, *f_layers = NULL, *f_kinds = NULL;
    const char *hf_dir = NULL, *hf_mesh = NULL, *hf_scheme = NULL, *hf_seq = NULL, *hf_batch = NULL, *hf_mode = NULL;
    const char *hf_context = NULL; /* --context (with --from-hf --mode generate) */
    const char *hf_vocab_align = NULL; /* --vocab-align (with --from-hf, the whole model) */
    int hf_blocks_only = 0; /* --blocks-only (with --from-hf) */
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
        } else if (!strcmp(argv[a], "--full")) {
            full = 1;
        } else if (!strcmp(argv[a], "--advise")) {
            advise = 1;
        } else if (!strcmp(argv[a], "--cost")) {
            cost = 1;
        } else if (!strcmp(argv[a], "--json")) {
            json = 1;
        } else if (!strcmp(argv[a], "--machine")) {
            if (a + 1 >= argc || !argv[a + 1][0]) {
                fprintf(stderr, "tessgen: --machine needs a machine file, e.g. --machine specs/machines/h100x8.lua\n");
                return 2;
            }
            machine_path = argv[++a];
        } else if (!strncmp(argv[a], "--blocks=", 9)) {
            blocks = 1;
            tensor = argv[a] + 9;
        } else if (!strcmp(argv[a], "--blocks")) {
            /* optional operand: the next argument unless it is an option or a spec file */
            blocks = 1;
            size_t n = a + 1 < argc ? strlen(argv[a + 1]) : 0;
            if (n && argv[a + 1][0] != '-' && !(n > 4 && !strcmp(argv[a + 1] + n - 4, ".lua")))
                tensor = argv[++a];
        } else if (!strcmp(argv[a], "--blocks-only")) {
            hf_blocks_only = 1;
        } else if (!strcmp(argv[a], "--from-hf") || !strcmp(argv[a], "--mesh") || !strcmp(argv[a], "--scheme") ||
                   !strcmp(argv[a], "--seq") || !strcmp(argv[a], "--batch") || !strcmp(argv[a], "--mode") ||
                   !strcmp(argv[a], "--context") || !strcmp(argv[a], "--vocab-align")) {
            if (a + 1 >= argc) {
                fprintf(stderr, "tessgen: %s needs a value (see tessgen --help)\n", argv[a]);
                return 2;
            }
            const char *o = argv[a] + 2;
            const char **dst = !strcmp(o, "from-hf") ? &hf_dir
                               : !strcmp(o, "mesh")  ? &hf_mesh
                               : !strcmp(o, "scheme") ? &hf_scheme
                               : !strcmp(o, "seq")   ? &hf_seq
                               : !strcmp(o, "batch") ? &hf_batch
                               : !strcmp(o, "context") ? &hf_context
                               : !strcmp(o, "vocab-align") ? &hf_vocab_align
                                                     : &hf_mode;
            *dst = argv[++a];
        } else if (!strcmp(argv[a], "--ranks") || !strcmp(argv[a], "--layers") || !strcmp(argv[a], "--kinds")) {
            if (a + 1 >= argc) {
                fprintf(stderr, "tessgen: %s needs a value (see tessgen --help)\n", argv[a]);
                return 2;
            }
            const char **dst = argv[a][2] == 'r' ? &f_ranks : argv[a][2] == 'l' ? &f_layers : &f_kinds;
            *dst = argv[++a];
        } else if (!strcmp(argv[a], "-o")) {
            if (a + 1 >= argc || !argv[a + 1][0]) {
                fprintf(stderr, "tessgen: -o needs a directory, e.g. -o out/model (see tessgen --help)\n");
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
    if (hf_dir)
        return hf_main(hf_dir, hf_mesh, hf_scheme, hf_seq, hf_batch, hf_mode, hf_context, hf_vocab_align, hf_blocks_only,
                       spec_path || outdir || quiet || show || blocks || summary || full || advise || cost || json ||
                           machine_path || f_ranks || f_layers || f_kinds);
    if (hf_mesh || hf_scheme || hf_seq || hf_batch || hf_mode || hf_context || hf_vocab_align || hf_blocks_only) {
        fprintf(stderr, "tessgen: --mesh, --scheme, --seq, --batch, --mode, --context, --vocab-align and --blocks-only go "
                        "with --from-hf DIR; a spec "
                        "file says "
                        "them itself\n");
        return 2;
    }
    if (!spec_path) {
        usage(stderr);
        return 2;
    }
    if (advise || cost || machine_path || json)
        return advise_main(spec_path, machine_path, advise, cost, json, show || blocks || summary || full || outdir,
                           f_ranks, f_layers || f_kinds);
    int inspect = show || blocks || summary;
    if (full && !summary) {
        fprintf(stderr, "tessgen: --full selects the whole table of --summary; add --summary\n");
        return 2;
    }
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
    if (inspect && spec.pp > 1 && (show || blocks) && spec.vocab > 0 && !tg_pipe_can_emit(&spec, "generating", &err)) {
        /* --show and --blocks print the stage programs that generating writes, so they follow its refusal */
        fprintf(stderr, "%s\ntessgen: %s prints the stage programs, so it is refused with them\n", err.msg,
                show ? "--show" : "--blocks");
        return 1;
    }
    if (inspect && spec.pp > 1 && summary && (f_ranks || f_layers || f_kinds) && !show && !blocks) {
        tg_pipe_can_emit(&spec, "--summary with a selection", &err);
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (inspect && spec.pp > 1 && !show && !blocks && !full) { /* the proved schedule and each stage's memory */
        tg_sb text;
        tg_sb_init(&text);
        int irc = tg_pipe_summary(&spec, &text, &err) && tg_stage_memory(&spec, &text, &err) ? 0 : 1;
        if (irc)
            fprintf(stderr, "%s\ntessgen: %s: mesh.pp = %d: the schedule was refused\n", err.msg, spec.path, spec.pp);
        else
            fwrite(text.s, 1, text.len, stdout);
        tg_sb_free(&text);
        return irc;
    }
    if (inspect) {
        tg_plan ip;
        tg_plan_init(&spec, &ip);
        if (!tg_bounds_work(&ip, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        tg_filter flt;
        if (!tg_filter_init(&flt, &ip, f_ranks, f_layers, f_kinds, &err)) {
            fprintf(stderr, "tessgen: %s\n", err.msg);
            return 2;
        }
        tg_sb text;
        tg_sb_init(&text);
        int irc = 0;
        if (show && !tg_inspect_show(&ip, &flt, &text, &err))
            irc = 70;
        if (blocks && irc == 0 && !tg_inspect_blocks(&ip, &flt, tensor, &text, &err))
            irc = strstr(err.msg, "out of memory") ? 70 : 2;
        if (summary && irc == 0 && spec.pp > 1 && full && !show && !blocks) { /* summary.txt's: every class */
            tg_class_fig *figs = NULL;
            if (!tg_plan_figures(&ip, &figs, &err) || !tg_emit_summary_txt(&ip, figs, &text, &err))
                irc = 70;
            tg_figures_free(&ip, figs);
        } else if (summary && irc == 0 && spec.pp > 1) { /* the stages' summary, as --summary alone prints it */
            if (!tg_pipe_summary(&spec, &text, &err) || !tg_stage_memory(&spec, &text, &err))
                irc = 1;
        } else if (summary && irc == 0) {
            tg_class_fig *figs = NULL;
            if (!tg_plan_figures(&ip, &figs, &err) || !tg_inspect_summary(&ip, figs, &flt, full, &text, &err))
                irc = 70;
            tg_figures_free(&ip, figs);
        }
        if (irc)
            fprintf(stderr, "tessgen: %s\n", err.msg);
        else
            fwrite(text.s, 1, text.len, stdout);
        tg_sb_free(&text);
        tg_filter_free(&flt);
        return irc;
    }

    if (!tg_pipe_can_emit(&spec, "generating", &err)) {
        fprintf(stderr, "%s\ntessgen: nothing was written\n", err.msg);
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
    tg_build_settings bs; /* read again by the build.ninja emitter; checked here, before any work */
    if (!tg_outdir_check(outdir, &err) || !tg_build_settings_read(&bs, &err)) {
        fprintf(stderr, "tessgen: %s\n", err.msg);
        return 1;
    }
    return generate(&spec, outdir, root, quiet);
}
