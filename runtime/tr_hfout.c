/*
 * tr_hfout.c - `run --hf-out DIR`: a Hugging Face GPT2LMHeadModel directory
 * from the weights after the run (see tr_hfout.h).
 *
 * Design: the exporter is generic over the parameter list. Every parameter
 * the rank descriptors name (tessgen's Hugging Face names: h.<l>.*, and, once
 * the whole model is built, wte.weight, wpe.weight, ln_f.*) is written as
 * "transformer." + its name, which is what GPT2LMHeadModel.save_pretrained
 * writes; the LM head is tied to wte, so no lm_head.weight. config.json is
 * printed from tr_model through tr_hfout_model_of, the one place that knows
 * where the vocabulary and the positions come from. The gather is
 * tr_gather_full's (the canonical copy of each shard, as --weights-out);
 * only rank 0 touches the file system.
 *
 * The directory is built as DIR.tmp.<pid> beside DIR: the mark first (created
 * exclusively and held with an fcntl lock until the end, so a later export can
 * tell a temp directory of a killed run, which nobody holds, from one being
 * written), then model.safetensors and config.json (each written atomically and
 * fsynced), then one rename puts it in place: renameat2(RENAME_EXCHANGE) swaps
 * it with a previous export where the kernel and file system support that,
 * else the previous export is first moved aside to DIR.old.<pid>. Either way
 * DIR is at every moment absent, the previous export or the new one, never a
 * mixture; the old one is removed afterwards, its mark last, so that a removal
 * killed half way leaves a directory the next export still recognises.
 *
 * The same keys, read back: tr_hfout_config_matches compares the config.json of a
 * directory given to --weights with the build (the values config_text writes),
 * parsed by the runtime's JSON parser, as tessgen --from-hf reads it.
 */
#define _GNU_SOURCE /* renameat2, RENAME_EXCHANGE (Linux) */
#include "tr_hfout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tr_gather.h"
#include "tr_hfnames.h"
#include "tr_json.h"
#include "tr_tokens.h"

/* The files an export holds: nothing else may be in a directory that --hf-out replaces. After the mark and the
 * two it writes, those it carries from the weights' directory (tr_hfout_write_dir's src) when that has them: the
 * tokenizer's and the generation config, which save_pretrained of a model and its tokenizer writes beside them. */
static const char *const hfout_files[] = {TR_HFOUT_MARK,          "config.json",   "model.safetensors",
                                          "vocab.json",           "merges.txt",    "tokenizer.json",
                                          "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                                          "generation_config.json"};
enum { HFOUT_NFILES = sizeof hfout_files / sizeof hfout_files[0], HFOUT_NWRITTEN = 3 };
#define HFOUT_CARRY_MAX (256LL << 20) /* bytes of one carried file (GPT-2's tokenizer.json: 1.4 MB) */

bool tr_hfout_model_of(tr_hfout_model *m, tr_err *err)
{
    memset(m, 0, sizeof *m);
    m->layers = tr_model.layers;
    m->hidden = tr_model.hidden;
    m->heads = tr_model.heads;
    m->ffn = tr_model.ffn;
    m->eps = tr_model.eps;
    /* THE place the embeddings' sizes come from: a language model's class descriptor (model.vocab and
     * model.positions, docs/MODEL.md; tr_tokens.c). wte.weight, wpe.weight, ln_f.weight and ln_f.bias arrive
     * through the rank descriptors' parameter list like the blocks and get the "transformer." prefix the same way. */
    m->vocab = tr_lm_vocab();
    m->positions = tr_lm()->positions;
    if (m->vocab > 0 && m->positions > 0)
        return true;
    return tr_fail(err, "--hf-out needs the whole model: add model.vocab and model.positions to the spec (this "
                        "program computes the transformer blocks only, and a GPT2LMHeadModel directory needs the "
                        "embeddings wte and wpe and the final ln_f); regenerate and rebuild, or write the blocks "
                        "with --weights-out");
}

/* DIR without trailing slashes into out; its parent directory and base name. False if too long or empty. */
static bool split_dir(const char *dir, char *out, size_t cap, char *parent, size_t pcap, const char **base)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    if (n == 0 || n >= cap || n >= pcap)
        return false;
    memcpy(out, dir, n);
    out[n] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash) {
        snprintf(parent, pcap, ".");
        *base = out;
    } else {
        size_t pn = slash == out ? 1 : (size_t)(slash - out);
        memcpy(parent, out, pn);
        parent[pn] = '\0';
        *base = slash + 1;
    }
    return **base && strcmp(*base, ".") != 0 && strcmp(*base, "..") != 0;
}

/* Is name "<stem>.<tag>.<digits>" (tag "tmp" or "old")? *pid gets the digits' value (0 if too long). */
static bool is_tagged(const char *name, const char *stem, const char *tag, long *pid)
{
    size_t ls = strlen(stem), lt = strlen(tag);
    if (strncmp(name, stem, ls) != 0 || name[ls] != '.' || strncmp(name + ls + 1, tag, lt) != 0 ||
        name[ls + 1 + lt] != '.')
        return false;
    const char *d = name + ls + lt + 2;
    if (!*d)
        return false;
    long v = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9')
            return false;
        v = v < 100000000 ? v * 10 + (*d - '0') : 0;
    }
    if (pid)
        *pid = v;
    return true;
}

/* A file an export writes: its names, and the temp names its atomic writes give them while they are written
 * (left inside the temp directory of an export killed then). */
static bool is_export_file(const char *name)
{
    for (int i = 0; i < HFOUT_NFILES; i++)
        if (!strcmp(name, hfout_files[i]) || (i > 0 && is_tagged(name, hfout_files[i], "tmp", NULL)))
            return true;
    return false;
}

/* Is path a directory holding the mark and only the files of an export? *foreign gets the first other entry
 * ("" when the mark is missing). Errors other than "not there" go to err; *exists says whether path exists. */
static bool is_export(const char *path, bool *exists, char *foreign, size_t fcap, tr_err *err)
{
    struct stat st;
    *exists = false;
    foreign[0] = '\0';
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return false;
        int e = errno;
        return tr_fail(err, "--hf-out %s: cannot look at it: %s", path, strerror(e));
    }
    *exists = true;
    if (!S_ISDIR(st.st_mode)) {
        snprintf(foreign, fcap, "(it is %s, not a directory)", S_ISLNK(st.st_mode) ? "a symbolic link" : "a file");
        return false;
    }
    DIR *d = opendir(path);
    if (!d) {
        snprintf(foreign, fcap, "(it cannot be read: %s)", strerror(errno));
        return false;
    }
    bool mark = false;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (!strcmp(e->d_name, TR_HFOUT_MARK))
            mark = true;
        else if (!is_export_file(e->d_name) && !foreign[0])
            snprintf(foreign, fcap, "%s", e->d_name);
    }
    closedir(d);
    return mark && !foreign[0];
}

/* Remove an export directory (or a temp one): its files, the mark last, then the directory. Best effort. The mark
 * goes last so that a removal killed half way leaves a directory the next export still knows as an export's (and
 * removes): with the mark gone first it would be a directory of unknown files, kept for ever. */
static void remove_export(const char *path)
{
    char f[4400];
    const char *hook = getenv("TESS_TEST_HFOUT_KILL"); /* test hook: killed after the first file is removed */
    for (int i = HFOUT_NFILES - 1; i >= 0; i--) {       /* hfout_files[0] is the mark */
        snprintf(f, sizeof f, "%s/%s", path, hfout_files[i]);
        unlink(f);
        tr_st_clean_stale_temps(f); /* a killed atomic write inside it */
        if (hook && *hook && i == HFOUT_NFILES - 1)
            raise(SIGKILL);
    }
    rmdir(path);
}

/* Is process pid gone (on this host)? */
static bool pid_gone(long pid)
{
    return pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

/* Remove "<base>.tmp.<digits>" and "<base>.old.<digits>" directories beside dir that an export left when it was
 * killed: those whose mark nobody holds locked and that hold only an export's files (its own temp names too), and
 * empty ones (killed before the mark was made) whose process is gone. */
static void clean_stale(const char *parent, const char *base)
{
    DIR *d = opendir(parent);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        long pid = 0;
        if (!is_tagged(n, base, "tmp", &pid) && !is_tagged(n, base, "old", &pid))
            continue;
        char path[4400], mark[4500], foreign[300];
        bool exists;
        snprintf(path, sizeof path, "%s/%s", parent, n);
        if (!is_export(path, &exists, foreign, sizeof foreign, NULL)) {
            if (exists && !foreign[0] && pid_gone(pid))
                rmdir(path); /* no mark and nothing else: removed only when empty */
            continue;
        }
        snprintf(mark, sizeof mark, "%s/%s", path, TR_HFOUT_MARK);
        int fd = open(mark, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_SETLK, &l) == 0) /* no live writer holds it */
            remove_export(path);
        close(fd);
    }
    closedir(d);
}

bool tr_hfout_check(const char *dir, tr_err *err)
{
    tr_hfout_model m;
    if (!tr_hfout_model_of(&m, err))
        return tr_fail(err, "nothing was run");
    char path[4096], parent[4096], foreign[300];
    const char *base;
    if (!split_dir(dir, path, sizeof path, parent, sizeof parent, &base))
        return tr_fail(err, "--hf-out %s: not a usable directory name: name the directory to write, e.g. "
                            "--hf-out out/gpt2-trained",
                       dir);
    struct stat st;
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
        return tr_fail(err, "--hf-out %s: directory %s does not exist: create it first (mkdir -p %s) or choose "
                            "another path; nothing was run",
                       dir, parent, parent);
    if (access(parent, W_OK | X_OK) != 0)
        return tr_fail(err, "--hf-out %s: cannot create a directory in %s: %s; choose a writable place; nothing was "
                            "run",
                       dir, parent, strerror(errno));
    bool exists;
    tr_err e = {{0}};
    if (!is_export(path, &exists, foreign, sizeof foreign, &e) && exists) {
        if (e.msg[0])
            return tr_fail(err, "%s; nothing was run", e.msg);
        return tr_fail(err, "--hf-out %s: exists and is not a tessgen export (%s%s): --hf-out writes a new "
                            "directory or replaces one it wrote before, never a directory with other files; choose "
                            "another path or remove it; nothing was run",
                       dir, foreign[0] ? (foreign[0] == '(' ? "" : "it holds ") : "it has no " TR_HFOUT_MARK,
                       foreign);
    }
    if (e.msg[0])
        return tr_fail(err, "%s; nothing was run", e.msg);
    return true;
}

/* The shortest %g text that reads back as v (JSON number). */
static void put_double(char *buf, size_t cap, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* config.json as GPT2LMHeadModel.save_pretrained writes it (keys sorted, two-space indent). Dropouts are 0:
 * tessgen computes the model without dropout (its forward is transformers' eval mode, its training has none),
 * so the directory describes the model tessgen ran. */
static int config_text(char *buf, size_t cap, const tr_hfout_model *m, tr_st_dtype dtype)
{
    char eps[40], inner[24];
    put_double(eps, sizeof eps, m->eps);
    if (m->ffn == 4 * m->hidden)
        snprintf(inner, sizeof inner, "null");
    else
        snprintf(inner, sizeof inner, "%d", m->ffn);
    return snprintf(buf, cap,
                    "{\n"
                    "  \"activation_function\": \"gelu_new\",\n"
                    "  \"architectures\": [\n    \"GPT2LMHeadModel\"\n  ],\n"
                    "  \"attn_pdrop\": 0.0,\n"
                    "  \"bos_token_id\": %d,\n"
                    "  \"embd_pdrop\": 0.0,\n"
                    "  \"eos_token_id\": %d,\n"
                    "  \"initializer_range\": 0.02,\n"
                    "  \"layer_norm_epsilon\": %s,\n"
                    "  \"model_type\": \"gpt2\",\n"
                    "  \"n_ctx\": %d,\n"
                    "  \"n_embd\": %d,\n"
                    "  \"n_head\": %d,\n"
                    "  \"n_inner\": %s,\n"
                    "  \"n_layer\": %d,\n"
                    "  \"n_positions\": %d,\n"
                    "  \"reorder_and_upcast_attn\": false,\n"
                    "  \"resid_pdrop\": 0.0,\n"
                    "  \"scale_attn_by_inverse_layer_idx\": false,\n"
                    "  \"scale_attn_weights\": true,\n"
                    "  \"summary_activation\": null,\n"
                    "  \"summary_first_dropout\": 0.0,\n"
                    "  \"summary_proj_to_labels\": true,\n"
                    "  \"summary_type\": \"cls_index\",\n"
                    "  \"summary_use_proj\": true,\n"
                    "  \"tie_word_embeddings\": true,\n"
                    "  \"torch_dtype\": \"%s\",\n"
                    "  \"use_cache\": true,\n"
                    "  \"vocab_size\": %d\n"
                    "}\n",
                    m->vocab - 1, m->vocab - 1, eps, m->positions, m->hidden, m->heads, inner, m->layers,
                    m->positions, dtype == TR_ST_BF16 ? "bfloat16" : "float32", m->vocab);
}

/* ---- config.json of --weights DIR, against the build -------------------------------------------------- */

/* A member of config.json as short text for a message: numbers and strings as written, others by type. */
static void member_text(char *buf, size_t cap, const tr_json_node *m)
{
    if (m->type == TR_JSON_NUMBER && m->is_int)
        snprintf(buf, cap, "%lld", (long long)m->ival);
    else if (m->type == TR_JSON_NUMBER)
        put_double(buf, cap, m->num);
    else if (m->type == TR_JSON_STRING)
        snprintf(buf, cap, "\"%.60s\"", m->str);
    else
        snprintf(buf, cap, "%s", tr_json_type_name(m->type));
}

bool tr_hfout_config_matches(const char *dir, tr_err *err)
{
    char path[4200];
    size_t dl = strlen(dir);
    snprintf(path, sizeof path, "%s%sconfig.json", dir, dl && dir[dl - 1] == '/' ? "" : "/");
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT)
        return true; /* a directory of weights alone: nothing to compare */
    tr_json_doc doc;
    bool ok = tr_st_read_json(path, "config.json", &doc, err);
    const tr_json_node *root = ok ? tr_json_root(&doc) : NULL;
    if (ok && root->type != TR_JSON_OBJECT)
        ok = tr_fail(err, "%s: the top level is %s, not an object: not a model's config.json; repair it or remove it",
                     path, tr_json_type_name(root->type));
    if (ok) {
        /* what the build computes with, as config.json's keys say it; GPT2Config's defaults for absent keys */
        const int lm = tr_lm_vocab() > 0;
        const struct {
            const char *key, *spec; /* config key, the spec key it must equal */
            long long built, dflt;  /* dflt < 0: no default (save_pretrained always writes it) */
            int used;               /* 0: the build has no such value (a block stack's vocabulary) */
        } ints[] = {
            {"n_layer", "model.layers", tr_model.layers, -1, 1},
            {"n_embd", "model.hidden", tr_model.hidden, -1, 1},
            {"n_head", "model.heads", tr_model.heads, -1, 1},
            {"n_positions", "model.positions", lm ? tr_lm()->positions : 0, -1, lm},
            {"vocab_size", "model.vocab", tr_lm_vocab(), 50257, lm},
        };
        int bad = 0;
        char got[96];
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
            if (!ints[i].used)
                continue;
            const tr_json_node *m = tr_json_get(&doc, root, ints[i].key);
            if (!m && ints[i].dflt < 0)
                continue; /* not said: the tensor shapes are checked anyway */
            if (m && m->type == TR_JSON_NUMBER && m->is_int && m->ival == ints[i].built)
                continue;
            if (!m && ints[i].dflt == ints[i].built)
                continue;
            if (m)
                member_text(got, sizeof got, m);
            else
                snprintf(got, sizeof got, "%lld (absent: GPT2Config's default)", ints[i].dflt);
            tr_fail(err, "%s: %s = %s, but this program was built with %s = %lld", path, ints[i].key, got,
                    ints[i].spec, ints[i].built);
            bad++;
        }
        const tr_json_node *m = tr_json_get(&doc, root, "n_inner"); /* null or absent: 4 * n_embd */
        const tr_json_node *embd = tr_json_get(&doc, root, "n_embd");
        long long inner = m && m->type == TR_JSON_NUMBER && m->is_int ? m->ival
                          : embd && embd->type == TR_JSON_NUMBER && embd->is_int ? 4 * embd->ival
                                                                                : 4LL * tr_model.hidden;
        if ((m && m->type != TR_JSON_NULL && !(m->type == TR_JSON_NUMBER && m->is_int)) || inner != tr_model.ffn) {
            if (m && m->type != TR_JSON_NULL)
                member_text(got, sizeof got, m);
            else
                snprintf(got, sizeof got, "%s (4 * n_embd = %lld)", m ? "null" : "absent", inner);
            tr_fail(err, "%s: n_inner = %s, but this program was built with model.ffn = %d", path, got, tr_model.ffn);
            bad++;
        }
        m = tr_json_get(&doc, root, "layer_norm_epsilon"); /* absent: 1e-5 */
        double eps = m && m->type == TR_JSON_NUMBER ? m->num : 1e-5;
        if ((m && m->type != TR_JSON_NUMBER) || !(fabs(eps - tr_model.eps) <= 1e-9 * fabs(tr_model.eps))) {
            if (m)
                member_text(got, sizeof got, m);
            else
                snprintf(got, sizeof got, "1e-05 (absent: GPT2Config's default)");
            char built[40];
            put_double(built, sizeof built, tr_model.eps);
            tr_fail(err, "%s: layer_norm_epsilon = %s, but this program was built with model.eps = %s", path, got,
                    built);
            bad++;
        }
        m = tr_json_get(&doc, root, "activation_function"); /* absent: gelu_new */
        if (m && (m->type != TR_JSON_STRING || strlen(m->str) != m->str_len ||
                  (strcmp(m->str, "gelu_new") != 0 && strcmp(m->str, "gelu_pytorch_tanh") != 0))) {
            member_text(got, sizeof got, m);
            tr_fail(err, "%s: activation_function = %s, but this program computes GELU's tanh approximation "
                         "(\"gelu_new\", \"gelu_pytorch_tanh\")",
                    path, got);
            bad++;
        }
        if (bad)
            ok = tr_fail(err, "the weights in %s are of another model than this build (%d value%s differ%s): "
                              "loading them would compute with the build's values and silently change the model; "
                              "generate a spec from the directory (tessgen --from-hf %s ...), rebuild and run that, "
                              "or pass weights of this model",
                         dir, bad, bad == 1 ? "" : "s", bad == 1 ? "s" : "", dir);
    }
    tr_json_free(&doc);
    return ok;
}

static void fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Put the finished temp directory tmp in place of path (absent or a previous export). */
static bool put_in_place(const char *tmp, const char *path, bool exists, const char *dir, tr_err *err)
{
    if (!exists) {
        if (rename(tmp, path) == 0)
            return true;
        int e = errno;
        return tr_fail(err, "--hf-out %s: cannot rename %s onto it: %s%s", dir, tmp, strerror(e),
                       e == ENOTEMPTY || e == EEXIST ? " (a directory appeared there during the run)" : "");
    }
#ifdef RENAME_EXCHANGE
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0) {
        remove_export(tmp); /* now the previous export */
        return true;
    }
#endif
    /* no atomic exchange here: move the previous export aside, put the new one in, remove the old one */
    char old[4400];
    snprintf(old, sizeof old, "%s.old.%ld", path, (long)getpid());
    if (rename(path, old) != 0) {
        int e = errno;
        return tr_fail(err, "--hf-out %s: cannot move the previous export aside to %s: %s", dir, old, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        if (rename(old, path) != 0)
            return tr_fail(err, "--hf-out %s: cannot rename %s onto it: %s; the previous export is in %s", dir, tmp,
                           strerror(e), old);
        return tr_fail(err, "--hf-out %s: cannot rename %s onto it: %s", dir, tmp, strerror(e));
    }
    remove_export(old);
    return true;
}

/* Can src/name be carried? Absent: yes, nothing to carry (*present false). A regular file of at most 256 MiB that
 * opens for reading: yes. Anything else: refused naming it. */
static bool carry_ok(const char *src, const char *name, const char *dir, bool *present, struct stat *st,
                     tr_err *err)
{
    char from[4400];
    snprintf(from, sizeof from, "%s/%s", src, name);
    *present = stat(from, st) == 0;
    if (!*present)
        return true; /* the weights' directory does not have it */
    if (!S_ISREG(st->st_mode) || st->st_size > HFOUT_CARRY_MAX)
        return tr_fail(err, "--hf-out %s: %s is %s: it cannot be carried into the export; remove or fix it", dir,
                       from, S_ISREG(st->st_mode) ? "larger than 256 MiB" : "not a regular file");
    FILE *f = fopen(from, "rb");
    if (!f)
        return tr_fail(err, "--hf-out %s: cannot read %s to carry it into the export: %s; fix its permissions or "
                            "remove it",
                       dir, from, strerror(errno));
    fclose(f);
    return true;
}

bool tr_hfout_check_carry(const char *src, const char *dir, tr_err *err)
{
    for (int i = HFOUT_NWRITTEN; src && i < HFOUT_NFILES; i++) {
        bool present;
        struct stat st;
        if (!carry_ok(src, hfout_files[i], dir, &present, &st, err)) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            return tr_fail(err, "%s; nothing was run", why);
        }
    }
    return true;
}

/* Copy src/name to tmp/name (atomically) when src has it as a regular file; *carried gets ", name" appended.
 * Absent: nothing to do. Unreadable, not a regular file, or too large: refused naming it (tr_hfout_check_carry
 * refused those before the run; this is for a file that changed since). */
static bool carry_file(const char *src, const char *tmp, const char *name, const char *dir, char *carried,
                       size_t ccap, tr_err *err)
{
    char from[4400], to[4400];
    snprintf(from, sizeof from, "%s/%s", src, name);
    struct stat st;
    bool present;
    if (!carry_ok(src, name, dir, &present, &st, err))
        return false;
    if (!present)
        return true;
    FILE *f = fopen(from, "rb");
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = f && buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    bool ok = f && buf && got == (size_t)st.st_size;
    int er = errno;
    if (f)
        fclose(f);
    if (!ok) {
        const char *why = buf ? strerror(er) : "out of memory";
        free(buf);
        return tr_fail(err, "--hf-out %s: cannot read %s to carry it into the export: %s", dir, from, why);
    }
    const void *parts[1] = {buf};
    size_t lens[1] = {got};
    snprintf(to, sizeof to, "%s/%s", tmp, name);
    ok = tr_st_write_file_atomic(to, parts, lens, 1, err);
    free(buf);
    size_t at = strlen(carried);
    if (ok && at < ccap)
        snprintf(carried + at, ccap - at, "%s%s", at ? ", " : "", name);
    return ok;
}

bool tr_hfout_write_dir(const char *dir, const tr_hfout_model *m, const tr_st_out *tensors, int n,
                        tr_st_dtype dtype, const char *src, char *carried, size_t ccap, tr_err *err)
{
    if (carried && ccap)
        carried[0] = '\0';
    char path[4096], parent[4096], tmp[4200], f[4400], foreign[300];
    const char *base;
    if (!split_dir(dir, path, sizeof path, parent, sizeof parent, &base))
        return tr_fail(err, "--hf-out %s: not a usable directory name", dir);
    bool exists;
    tr_err e = {{0}};
    if (!is_export(path, &exists, foreign, sizeof foreign, &e) && exists)
        return tr_fail(err, "--hf-out %s: exists and is not a tessgen export (%s): left as it is, nothing written",
                       dir, e.msg[0] ? e.msg : foreign[0] ? foreign : "no " TR_HFOUT_MARK);
    if (n <= 0 || n > 1000000)
        return tr_fail(err, "--hf-out %s: %d tensors to write", dir, n);
    /* the names GPT2LMHeadModel gives them */
    tr_st_out *named = calloc((size_t)n, sizeof *named);
    char *names = calloc((size_t)n, TR_ST_NAME_CAP);
    if (!named || !names) {
        free(named);
        free(names);
        return tr_fail(err, "--hf-out %s: out of memory", dir);
    }
    for (int i = 0; i < n; i++) {
        named[i] = tensors[i];
        char *nm = names + (size_t)i * TR_ST_NAME_CAP;
        tr_hf_prefixed(nm, TR_ST_NAME_CAP, TR_HF_LM_PREFIX, tensors[i].name);
        named[i].name = nm;
    }
    clean_stale(parent, base);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    bool ok = false;
    int markfd = -1;
    if (mkdir(tmp, 0755) != 0) {
        int er = errno;
        tr_fail(err, "--hf-out %s: cannot create the temp directory %s: %s", dir, tmp, strerror(er));
        goto out_free;
    }
    snprintf(f, sizeof f, "%s/%s", tmp, TR_HFOUT_MARK);
    markfd = open(f, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (markfd < 0) {
        int er = errno;
        tr_fail(err, "--hf-out %s: cannot create %s: %s", dir, f, strerror(er));
        goto out;
    }
    struct flock lock = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    (void)fcntl(markfd, F_SETLK, &lock); /* held until the end: a live export's temp is never cleaned */
    static const char mark_text[] = "written by tessgen run --hf-out; a later --hf-out of this path replaces this "
                                    "directory only while it holds nothing but config.json, model.safetensors, "
                                    "the tokenizer and generation-config files it carried and this file\n";
    if (write(markfd, mark_text, sizeof mark_text - 1) != (ssize_t)(sizeof mark_text - 1) || fsync(markfd) != 0) {
        int er = errno;
        tr_fail(err, "--hf-out %s: writing %s failed: %s", dir, f, strerror(er));
        goto out;
    }
    snprintf(f, sizeof f, "%s/model.safetensors", tmp);
    if (!tr_st_write_atomic_as(f, named, n, dtype, err))
        goto out;
    char cfg[4096];
    int clen = config_text(cfg, sizeof cfg, m, dtype);
    const void *parts[1] = {cfg};
    size_t lens[1] = {(size_t)clen};
    snprintf(f, sizeof f, "%s/config.json", tmp);
    if (clen <= 0 || (size_t)clen >= sizeof cfg || !tr_st_write_file_atomic(f, parts, lens, 1, err))
        goto out;
    for (int i = HFOUT_NWRITTEN; src && i < HFOUT_NFILES; i++) {
        char none[1] = "";
        if (!carry_file(src, tmp, hfout_files[i], dir, carried && ccap ? carried : none,
                        carried && ccap ? ccap : sizeof none, err))
            goto out;
    }
    const char *fail = getenv("TESS_TEST_HFOUT_FAIL"); /* test hook: fail with everything written, before the rename */
    if (fail && *fail) {
        tr_fail(err, "--hf-out %s: failing on purpose (TESS_TEST_HFOUT_FAIL)", dir);
        goto out;
    }
    fsync_dir(tmp);
    ok = put_in_place(tmp, path, exists, dir, err);
    if (ok)
        fsync_dir(parent);
out:
    if (!ok) {
        remove_export(tmp);
        tr_fail(err, "--hf-out %s: nothing written%s", dir, exists ? "; the previous export is kept as it was" : "");
    }
    if (markfd >= 0)
        close(markfd);
out_free:
    free(named);
    free(names);
    return ok;
}

bool tr_hfout_write(const tr_rank_desc *d, const float *H, const char *dir, tr_st_dtype dtype, const char *src,
                    char *carried, size_t ccap, tr_err *err)
{
    /* every rank gathers (collective); only rank 0 asks what the model is (tr_hfout_check said so before the
     * run, on rank 0: the other ranks' environment need not carry the test hook) and writes */
    float **full = NULL;
    tr_gather_tensor *st = NULL; /* pipeline stages: every stage's tensors, in the pp = 1 program's order */
    int nst = 0;
    const bool piped = &tr_pipe_class && tr_pipe_class.stages > 1;
    if (piped ? !tr_gather_stages(d, MPI_COMM_NULL, H, TR_GATHER_WEIGHTS, &st, &nst, err)
              : !tr_gather_full(d, MPI_COMM_NULL, H, TR_GATHER_WEIGHTS, &full, err))
        return false;
    bool ok = true;
    if (d->rank == 0) {
        int n = piped ? nst : d->nparams;
        tr_st_out *outs = calloc((size_t)(n > 0 ? n : 1), sizeof *outs);
        tr_hfout_model m;
        if (!outs) {
            ok = tr_fail(err, "--hf-out %s: out of memory", dir);
        } else {
            for (int i = 0; i < n; i++) {
                if (piped) {
                    outs[i] = (tr_st_out){.name = st[i].name, .ndim = st[i].ndim,
                                          .shape = {st[i].shape[0], st[i].shape[1]}, .data = st[i].data};
                    continue;
                }
                const tr_param *pr = &d->params[i];
                outs[i] = (tr_st_out){.name = pr->name, .ndim = pr->ndim, .shape = {pr->full[0], pr->full[1]},
                                      .data = full[i]};
            }
            ok = tr_hfout_model_of(&m, err) && tr_hfout_write_dir(dir, &m, outs, n, dtype, src, carried, ccap, err);
        }
        free(outs);
        for (int i = 0; i < nst; i++)
            free(st[i].data);
        free(st);
    }
    if (!piped)
        tr_gather_full_free(d, full);
    int v = ok ? 1 : 0;
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v == 1;
}
