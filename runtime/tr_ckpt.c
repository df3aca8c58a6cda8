/*
 * tr_ckpt.c - training checkpoints (tr_ckpt.h): the metadata a checkpoint records, its writers (the full
 * tensors gathered on rank 0, one atomic safetensors write, every pipeline stage's included; or sharded: each
 * tensor on one writer rank, a shard file per writer, the index last) and resume (rank 0 validates a file or a
 * sharded set through tr_stset, every rank reads its pieces). The refusals name the file, the field, the checkpoint's value and the built
 * model's, and the fix; a refused checkpoint loads nothing. Built with -DTR_CKPT_READER_ONLY (the fuzz
 * harness tests/fuzz/fuzz_ckpt.c) only the metadata and the rank-0 validation (tr_ckpt_check) are
 * compiled: no MPI.
 */
#include "tr_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef TR_CKPT_READER_ONLY
#include "tr_gather.h"
#endif
#include "tr_json.h"
#include "tr_safetensors.h"
#include "tr_stset.h"

static char tr_ckpt_pos[TR_CKPT_DATA_POS_CAP]; /* the data loader's position, "" until set */

bool tr_ckpt_set_data_pos(const char *pos)
{
    size_t n = pos ? strlen(pos) : 0;
    if (n >= sizeof tr_ckpt_pos || (pos && tr_json_utf8_check(pos, n) < n))
        return false;
    memcpy(tr_ckpt_pos, pos ? pos : "", n + 1);
    return true;
}

const char *tr_ckpt_data_pos(void)
{
    return tr_ckpt_pos;
}

static char tr_ckpt_data_rec[TR_CKPT_DATA_CAP] = "synthetic"; /* what the run trains on */

void tr_ckpt_set_data(const char *record)
{
    size_t n = 0, len = strlen(record), cap = sizeof tr_ckpt_data_rec - 1;
    for (size_t i = 0; i < len && n < cap;) {
        size_t good = tr_json_utf8_check(record + i, len - i); /* the valid prefix */
        if (good == 0) {
            tr_ckpt_data_rec[n++] = '?'; /* a byte that is not UTF-8 */
            i++;
            continue;
        }
        if (good > cap - n)
            good = cap - n;
        memcpy(tr_ckpt_data_rec + n, record + i, good);
        n += good;
        i += good;
    }
    while (n > 0 && tr_json_utf8_check(tr_ckpt_data_rec, n) < n) /* cut inside a character */
        n--;
    tr_ckpt_data_rec[n] = '\0';
}

const char *tr_ckpt_data(void)
{
    return tr_ckpt_data_rec;
}

/* Do two data records name the same data? Token shards (--data) always do here: the loader's position
 * stored beside the record checks the shard set itself, wherever it lies now. */
static bool same_data(const char *a, const char *b)
{
    return (strncmp(a, "--data ", 7) == 0 && strncmp(b, "--data ", 7) == 0) || strcmp(a, b) == 0;
}

/* A data record as a message reads it. */
static const char *data_text(const char *rec)
{
    return strcmp(rec, "synthetic") == 0 ? "synthetic data from the seed (no data option)" : rec;
}

/* ---- the metadata: what the built program is, as strings (the checkpoint stores the same) ---- */

enum { META_MODEL = 7, META_OPT = 9, META_DTYPE = META_MODEL + META_OPT + 2, META_MAX = 32, META_VAL = 160 };

typedef struct meta_list {
    int n;
    const char *key[META_MAX];
    char val[META_MAX][META_VAL];
} meta_list;

static void meta_add(meta_list *m, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void meta_add(meta_list *m, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    m->key[m->n] = key;
    vsnprintf(m->val[m->n], META_VAL, fmt, ap);
    va_end(ap);
    m->n++;
}

/* The model's dimensions (META_MODEL entries, first), the optimizer (META_OPT), then the mesh, its strides and
 * the dtype (META_DTYPE). */
static void built_meta(meta_list *m)
{
    m->n = 0;
    meta_add(m, "model.layers", "%d", tr_model.layers);
    meta_add(m, "model.hidden", "%d", tr_model.hidden);
    meta_add(m, "model.heads", "%d", tr_model.heads);
    meta_add(m, "model.ffn", "%d", tr_model.ffn);
    meta_add(m, "model.seq", "%d", tr_model.seq);
    meta_add(m, "model.batch", "%d", tr_model.batch);
    meta_add(m, "model.eps", "%.17g", tr_model.eps);
    meta_add(m, "optimizer.lr", "%.17g", tr_model.lr);
    meta_add(m, "optimizer.beta1", "%.17g", tr_model.beta1);
    meta_add(m, "optimizer.beta2", "%.17g", tr_model.beta2);
    meta_add(m, "optimizer.eps", "%.17g", tr_model.adam_eps);
    meta_add(m, "optimizer.weight_decay", "%.17g", tr_model.weight_decay);
    meta_add(m, "optimizer.warmup", "%lld", tr_model.warmup);
    meta_add(m, "optimizer.decay_steps", "%lld", tr_model.decay_steps);
    meta_add(m, "optimizer.lr_min", "%.17g", tr_model.lr_min);
    meta_add(m, "optimizer.clip", "%.17g", tr_model.clip);
    meta_add(m, "mesh", "%s", tr_mesh_text());
    meta_add(m, "mesh.strides", "%d,%d,%d", tr_model.si, tr_model.sj, tr_model.sk);
    meta_add(m, "dtype", "%s", tr_model.dtype ? tr_model.dtype : "fp32");
    meta_add(m, "fingerprint", "%s", tr_model.fingerprint);
    meta_add(m, "name", "%s", tr_model.name);
    meta_add(m, "tessgen", "%s", tr_model.tessgen_version);
}

/* FNV-1a 64 over n floats' bytes (little-endian F32, as the file stores them). */
static uint64_t fnv(uint64_t h, const float *v, long long n)
{
    const unsigned char *b = (const unsigned char *)v;
    for (long long e = 0; e < n * (long long)sizeof(float); e++)
        h = (h ^ b[e]) * 0x100000001b3ULL;
    return h;
}

/* "adam_m.<name>" (kind 1), "adam_v.<name>" (kind 2) or the name (kind 0) into buf. */
static const char *tensor_name(char *buf, size_t cap, const char *param, int kind)
{
    static const char *const pre[3] = {"", "adam_m.", "adam_v."};
    snprintf(buf, cap, "%s%s", pre[kind], param);
    return buf;
}

/* The model's parameters as a checkpoint holds them, in its order: the rank's own (pp = 1: every rank holds every
 * name), or with pipeline stages every stage's in stage order, the last stage's tied copy of wte left out
 * (ck_model_list: complete on rank 0 only). */
typedef struct ck_tensor {
    char name[64];
    int ndim, full[2], stage;
} ck_tensor;
typedef struct ck_list {
    int n, stages;
    ck_tensor *t;
} ck_list;

/* d's parameters as one stage's list (the fuzz harness's and a pp = 1 program's whole list). tied: leave out this
 * parameter index (-1: none). False: out of memory. */
static bool list_from_desc(const tr_rank_desc *d, int stage, int tied, ck_list *l)
{
    l->n = 0;
    l->stages = 1;
    l->t = calloc((size_t)(d->nparams > 0 ? d->nparams : 1), sizeof *l->t);
    if (!l->t)
        return false;
    for (int i = 0; i < d->nparams; i++) {
        const tr_param *pr = &d->params[i];
        if (i == tied)
            continue;
        ck_tensor *t = &l->t[l->n++];
        snprintf(t->name, sizeof t->name, "%s", pr->name);
        t->ndim = pr->ndim;
        t->full[0] = pr->full[0];
        t->full[1] = pr->full[1];
        t->stage = stage;
    }
    return true;
}

/* The blocks each stage holds, as the metadata "mesh.stages" records them: "a-b" per stage (its first and last
 * h.<l> block), comma separated ("0-1" for one stage of 2 blocks). */
static void stages_text(const ck_list *l, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int s = 0; s < l->stages; s++) {
        int lo = -1, hi = -1;
        for (int i = 0; i < l->n; i++) {
            int b;
            if (l->t[i].stage == s && sscanf(l->t[i].name, "h.%d.", &b) == 1) {
                lo = lo < 0 || b < lo ? b : lo;
                hi = b > hi ? b : hi;
            }
        }
        if (n < cap)
            n += (size_t)snprintf(buf + n, cap - n, "%s%d-%d", s ? "," : "", lo, hi);
    }
}

/* ---- writing (MPI: not in the fuzz harness's reader-only build, TR_CKPT_READER_ONLY) ---- */
#ifndef TR_CKPT_READER_ONLY
/* A checkpoint's metadata (one file's, or a sharded one's index): the build's, the stages' blocks, the format tag,
 * the step, the seed and the checksum h of the kind named ("fnv1a64" over the bytes, "fnv1a64-tensors" over each
 * tensor's own hash). */
static void ckpt_meta(meta_list *m, const ck_list *list, long long step, uint64_t seed, const char *kind, uint64_t h)
{
    built_meta(m);
    char stages[META_VAL];
    stages_text(list, stages, sizeof stages);
    meta_add(m, "mesh.pp", "%d", list->stages);
    meta_add(m, "mesh.stages", "%s", stages);
    meta_add(m, "format", "%s", TR_CKPT_FORMAT);
    meta_add(m, "step", "%lld", step);
    meta_add(m, "seed", "%" PRIu64, seed);
    meta_add(m, "checksum", "%s:%016" PRIx64, kind, h);
}

/* Pipeline stages: this program is one stage of several (tr_pipe_class, docs/TRAINING.md "Pipeline stages"). */
static bool piped(void)
{
    return &tr_pipe_class != NULL && tr_pipe_class.stages > 1;
}

/* Collective: the checkpoint's list of the model's parameters (ck_list), complete on rank 0; the other ranks get
 * their own stage's. Pipeline stages: each later stage's first rank sends its list to rank 0. False on every rank
 * when one runs out of memory. */
static bool ck_model_list(const tr_rank_desc *d, ck_list *l)
{
    const tr_pipe_desc *pd = piped() ? &tr_pipe_class : NULL;
    int tied = pd && pd->stage > 0 && pd->tied_param >= 0 ? pd->tied_param : -1;
    bool ok = list_from_desc(d, pd ? pd->stage : 0, tied, l);
    int v = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!v || !pd) {
        if (!v) {
            free(l->t);
            l->t = NULL;
        }
        return v == 1;
    }
    if (d->rank == pd->stage * pd->ranks && d->rank != 0) {
        MPI_Send(&l->n, 1, MPI_INT, 0, 20, MPI_COMM_WORLD);
        MPI_Send(l->t, (int)(l->n * sizeof *l->t), MPI_BYTE, 0, 21, MPI_COMM_WORLD);
    }
    if (d->rank == 0) {
        for (int s = 1; s < pd->stages; s++) {
            int m = 0;
            MPI_Recv(&m, 1, MPI_INT, s * pd->ranks, 20, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            ck_tensor *t = realloc(l->t, (size_t)(l->n + m + 1) * sizeof *t);
            if (!t)
                MPI_Abort(MPI_COMM_WORLD, 1);
            l->t = t;
            MPI_Recv(l->t + l->n, (int)(m * sizeof *l->t), MPI_BYTE, s * pd->ranks, 21, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            l->n += m;
        }
        l->stages = pd->stages;
    }
    return true;
}

/* Collective: the full tensors of `which` (TR_GATHER_*) on rank 0, in the list's order (ck_model_list): from the
 * canonical shards (tr_gather_full), or with pipeline stages from every stage (tr_gather_stages). *out: rank 0's
 * [n] arrays (free each, then the array), elsewhere NULL. */
static bool gather_list(const tr_rank_desc *d, MPI_Comm dep, const float *H, int which, int n, float ***out,
                        tr_err *err)
{
    *out = NULL;
    if (!piped())
        return tr_gather_full(d, dep, H, which, out, err);
    tr_gather_tensor *t = NULL;
    int cnt = 0;
    if (!tr_gather_stages(d, dep, H, which, &t, &cnt, err))
        return false;
    if (d->rank == 0) {
        float **a = calloc((size_t)(cnt > 0 ? cnt : 1), sizeof *a);
        if (!a || cnt != n)
            MPI_Abort(MPI_COMM_WORLD, 1); /* the stages' lists are the ones ck_model_list received */
        for (int i = 0; i < cnt; i++)
            a[i] = t[i].data;
        free(t);
        *out = a;
    }
    return true;
}

static void free_list_arrays(float **a, int n)
{
    if (a)
        for (int i = 0; i < n; i++)
            free(a[i]);
    free(a);
}

static long long list_elems(const ck_tensor *t)
{
    return t->ndim == 1 ? t->full[0] : (long long)t->full[0] * t->full[1];
}

static bool is_index_path(const char *path);
static bool write_sharded(const tr_rank_desc *d, MPI_Comm dep, const float *H, const char *path, long long step,
                          uint64_t seed, tr_err *err);

bool tr_ckpt_write(const tr_rank_desc *d, MPI_Comm dep, const float *H, const char *path, long long step,
                   uint64_t seed, tr_err *err)
{
    if (is_index_path(path))
        return write_sharded(d, dep, H, path, step, seed, err);
    static const int which[3] = {TR_GATHER_WEIGHTS, TR_GATHER_ADAM_M, TR_GATHER_ADAM_V};
    float **full[3] = {NULL, NULL, NULL}; /* rank 0: [3][list.n] full tensors */
    ck_list list = {0, 1, NULL};
    tr_err e = {{0}};
    bool ok = ck_model_list(d, &list);
    if (!ok)
        tr_fail(&e, "out of memory listing the parameters");
    for (int k = 0; k < 3 && ok; k++)
        ok = gather_list(d, dep, H, which[k], list.n, &full[k], &e); /* moments: whole */
    if (!ok && d->rank == 0)
        tr_fail(err, "%s: %s; the checkpoint was not written", path, e.msg);
    if (ok && d->rank == 0) {
        int n = 3 * list.n;
        tr_st_out *outs = calloc((size_t)(n > 0 ? n : 1), sizeof *outs);
        char (*names)[TR_ST_NAME_CAP] = calloc((size_t)(n > 0 ? n : 1), sizeof *names);
        meta_list *m = calloc(1, sizeof *m);
        const char *kv[2 * (META_MAX + 8)];
        if (!outs || !names || !m) {
            ok = tr_fail(err, "%s: out of memory writing the checkpoint; nothing written", path);
        } else {
            uint64_t h = 0xcbf29ce484222325ULL;
            for (int i = 0; i < list.n; i++) {
                const ck_tensor *ct = &list.t[i];
                for (int k = 0; k < 3; k++) {
                    int t = 3 * i + k;
                    outs[t] = (tr_st_out){.name = tensor_name(names[t], sizeof names[t], ct->name, k),
                                          .ndim = ct->ndim, .shape = {ct->full[0], ct->full[1]}, .data = full[k][i]};
                    h = fnv(h, full[k][i], list_elems(ct));
                }
            }
            ckpt_meta(m, &list, step, seed, "fnv1a64", h);
            int nkv = 0;
            for (int k = 0; k < m->n; k++) {
                kv[2 * nkv] = m->key[k];
                kv[2 * nkv + 1] = m->val[k];
                nkv++;
            }
            kv[2 * nkv] = "data_pos";
            kv[2 * nkv + 1] = tr_ckpt_pos;
            nkv++;
            kv[2 * nkv] = "data";
            kv[2 * nkv + 1] = tr_ckpt_data_rec;
            nkv++;
            ok = tr_st_write_atomic_meta(path, outs, n, TR_ST_F32, kv, nkv, err);
        }
        free(outs);
        free(names);
        free(m);
    }
    for (int k = 0; k < 3; k++)
        if (piped())
            free_list_arrays(full[k], list.n);
        else
            tr_gather_full_free(d, full[k]);
    free(list.t);
    int v = ok ? 1 : 0;
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v == 1;
}

/* ---- sharded checkpoints (tr_ckpt.h TR_CKPT_SHARD_PREFIX) ---- */

/* A growing text (the index's JSON); oom set on failure. */
typedef struct ck_text {
    char *p;
    size_t len, cap;
    bool oom;
} ck_text;

static void text_put(ck_text *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void text_str(ck_text *b, const char *s) /* a JSON string */
{
    text_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char esc[8];
        if (*c == '"' || *c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*c;
            text_put(b, esc, 2);
        } else if (*c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *c);
            text_put(b, esc, 6);
        } else {
            text_put(b, (const char *)c, 1);
        }
    }
    text_put(b, "\"", 1);
}

/* The directory of an index path ("." when it has none). */
static void dir_of(const char *path, char *dir, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, cap, ".");
    else if (slash == path)
        snprintf(dir, cap, "/");
    else
        snprintf(dir, cap, "%.*s", (int)(slash - path), path);
}

static bool is_pending(const char *path)
{
    size_t n = strlen(path), k = strlen(TR_CKPT_PENDING_SUFFIX);
    return n >= k && strcmp(path + n - k, TR_CKPT_PENDING_SUFFIX) == 0;
}

/* Does path name a sharded checkpoint's index or its pending index ("<dir>/model.safetensors.index.json[.pending]")? */
static bool is_index_path(const char *path)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    return strcmp(base, TR_STSET_INDEX) == 0 || strcmp(base, TR_STSET_INDEX TR_CKPT_PENDING_SUFFIX) == 0;
}

/* The shard files the index at path names, appended to *names (strdup'd); a missing or unreadable index adds none. */
static void index_files(const char *path, char ***names, int *n)
{
    tr_json_doc doc;
    tr_err e = {{0}};
    if (access(path, F_OK) != 0 || !tr_st_read_json(path, "index", &doc, &e))
        return;
    const tr_json_node *root = tr_json_root(&doc), *wm = root->type == TR_JSON_OBJECT ? tr_json_get(&doc, root, "weight_map") : NULL;
    for (const tr_json_node *m = wm && wm->type == TR_JSON_OBJECT ? tr_json_first(&doc, wm) : NULL; m;
         m = tr_json_next(&doc, m)) {
        if (m->type != TR_JSON_STRING)
            continue;
        char **nn = realloc(*names, (size_t)(*n + 1) * sizeof *nn);
        if (!nn)
            break;
        *names = nn;
        if (((*names)[*n] = strdup(m->str)) != NULL)
            (*n)++;
    }
    tr_json_free(&doc);
}

/* Rank 0, after an index was renamed into place or a pending one removed: remove the shard files of the checkpoint's
 * directory (TR_CKPT_SHARD_PREFIX, temps of a killed writer included) that neither the index nor a pending index
 * names, so a directory holds one checkpoint (and at most one pending) however often it is written. */
static void clean_shards(const char *index_path)
{
    char dir[1100], idx[1200];
    dir_of(index_path, dir, sizeof dir);
    char **keep = NULL;
    int nkeep = 0;
    snprintf(idx, sizeof idx, "%s/%s", dir, TR_STSET_INDEX);
    index_files(idx, &keep, &nkeep);
    snprintf(idx, sizeof idx, "%s/%s%s", dir, TR_STSET_INDEX, TR_CKPT_PENDING_SUFFIX);
    index_files(idx, &keep, &nkeep);
    DIR *dp = opendir(dir);
    for (struct dirent *de = dp ? readdir(dp) : NULL; de; de = readdir(dp)) {
        if (strncmp(de->d_name, TR_CKPT_SHARD_PREFIX, strlen(TR_CKPT_SHARD_PREFIX)) != 0)
            continue;
        int named = 0;
        for (int k = 0; k < nkeep && !named; k++)
            named = strcmp(keep[k], de->d_name) == 0;
        if (!named) {
            char f[1400];
            snprintf(f, sizeof f, "%s/%s", dir, de->d_name);
            unlink(f);
        }
    }
    if (dp)
        closedir(dp);
    for (int k = 0; k < nkeep; k++)
        free(keep[k]);
    free(keep);
}

/* What a writer tells rank 0 of each tensor it wrote: the name and the FNV-1a 64 of the weights and both moments. */
typedef struct ck_rec {
    char name[64];
    uint64_t h[3];
} ck_rec;

static bool write_sharded(const tr_rank_desc *d, MPI_Comm dep, const float *H, const char *path, long long step,
                          uint64_t seed, tr_err *err)
{
    static const int which[3] = {TR_GATHER_WEIGHTS, TR_GATHER_ADAM_M, TR_GATHER_ADAM_V};
    const tr_pipe_desc *pd = piped() ? &tr_pipe_class : NULL;
    char dir[1100], tag[48], file[160];
    dir_of(path, dir, sizeof dir);
    int made = 1; /* the directory: created if missing (its parent was checked before the run) */
    if (d->rank == 0 && mkdir(dir, 0777) != 0 && errno != EEXIST) {
        made = 0;
        tr_fail(err, "%s: cannot create the checkpoint's directory %s: %s; the checkpoint was not written", path, dir,
                strerror(errno));
    }
    MPI_Bcast(&made, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!made)
        return false;
    ck_list list = {0, 1, NULL};
    tr_err e = {{0}};
    bool ok = ck_model_list(d, &list);
    /* the shard names: unique to this write (step, rank 0's pid and the time), so no file of the checkpoint the index
     * names now is written over before the new index replaces it */
    if (d->rank == 0)
        snprintf(tag, sizeof tag, "s%lld-%lx-%llx", step, (long)getpid(), (unsigned long long)time(NULL));
    MPI_Bcast(tag, sizeof tag, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(file, sizeof file, "%s%s-r%05d.safetensors", TR_CKPT_SHARD_PREFIX, tag, d->rank);
    /* the writers: each parameter of a stage (its tied copy of wte left out), in order, to the rank of the stage
     * (of the world, without stages) that has been given the fewest elements so far */
    MPI_Comm comm = MPI_COMM_WORLD;
    if (pd)
        MPI_Comm_split(MPI_COMM_WORLD, pd->stage, d->rank, &comm);
    int crank = 0, cp = 1;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &cp);
    int cap = 3 * (d->nparams > 0 ? d->nparams : 1), nout = 0, nrec = 0;
    tr_st_out *outs = calloc((size_t)cap, sizeof *outs);
    char (*names)[TR_ST_NAME_CAP] = calloc((size_t)cap, sizeof *names);
    ck_rec *recs = calloc((size_t)cap, sizeof *recs);
    if (!outs || !names || !recs)
        ok = false;
    int v = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    ok = v == 1;
    if (!ok)
        tr_fail(&e, "out of memory");
    long long *load = calloc((size_t)cp, sizeof *load); /* elements given to each rank of comm so far */
    if (!load)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; ok && i < d->nparams; i++) {
        const tr_param *pr = &d->params[i];
        if (pd && pd->stage > 0 && i == pd->tied_param)
            continue;
        int root = 0; /* the least loaded rank (the lowest on a tie): the same choice on every rank */
        for (int r = 1; r < cp; r++)
            root = load[r] < load[root] ? r : root;
        load[root] += pr->ndim == 1 ? pr->full[0] : (long long)pr->full[0] * pr->full[1];
        for (int k = 0; k < 3 && ok; k++) {
            float *full = NULL;
            ok = tr_gather_one(d, dep, comm, H, which[k], i, root, &full);
            if (ok && crank == root) {
                long long fe = pr->ndim == 1 ? pr->full[0] : (long long)pr->full[0] * pr->full[1];
                outs[nout] = (tr_st_out){.name = tensor_name(names[nout], sizeof names[nout], pr->name, k),
                                         .ndim = pr->ndim, .shape = {pr->full[0], pr->full[1]}, .data = full};
                nout++;
                if (k == 0)
                    snprintf(recs[nrec++].name, sizeof recs->name, "%s", pr->name);
                recs[nrec - 1].h[k] = fnv(0xcbf29ce484222325ULL, full, fe);
            } else {
                free(full);
            }
        }
        if (!ok)
            tr_fail(&e, "out of memory gathering %s", pr->name);
    }
    free(load);
    if (pd)
        MPI_Comm_free(&comm);
    if (ok && nout > 0) { /* this rank's shard */
        char fp[1300], stepv[32];
        snprintf(fp, sizeof fp, "%s/%s", dir, file);
        snprintf(stepv, sizeof stepv, "%lld", step);
        const char *kv[4] = {"format", TR_CKPT_FORMAT "-shard", "step", stepv};
        ok = tr_st_write_atomic_meta(fp, outs, nout, TR_ST_F32, kv, 2, &e);
    }
    for (int k = 0; k < nout; k++)
        free((void *)outs[k].data);
    free(outs);
    free(names);
    /* every shard written (or none counts): then rank 0 learns who holds what */
    int good = ok ? 1 : 0, allgood = 0;
    MPI_Allreduce(&good, &allgood, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!allgood) {
        if (!ok)
            fprintf(stderr, "rank %d: %s: %s\n", d->rank, path, e.msg);
        if (d->rank == 0)
            tr_fail(err, "%s: a rank could not write its shard (above); the checkpoint was not written (the index "
                         "there, if any, still names the previous one, whole)", path);
        free(recs);
        free(list.t);
        return false;
    }
    /* test hook TESS_TEST_CKPT_STOP: the run is killed with every shard written and the index not (exit 9): the
     * directory's index still names the previous checkpoint, whole */
    if (getenv("TESS_TEST_CKPT_STOP")) {
        if (d->rank == 0)
            fprintf(stderr, "TESS_TEST_CKPT_STOP: stopped before writing %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 9);
    }
    int p = 0, *cnt = NULL, *displ = NULL, bytes = nrec * (int)sizeof *recs;
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    ck_rec *all = NULL;
    if (d->rank == 0) {
        cnt = calloc((size_t)p, sizeof *cnt);
        displ = calloc((size_t)p, sizeof *displ);
        if (!cnt || !displ)
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(&bytes, 1, MPI_INT, cnt, 1, MPI_INT, 0, MPI_COMM_WORLD);
    long long total = 0;
    if (d->rank == 0) {
        for (int r = 0; r < p; r++) {
            displ[r] = (int)total;
            total += cnt[r];
        }
        all = malloc((size_t)(total > 0 ? total : 1));
        if (!all)
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gatherv(recs, bytes, MPI_BYTE, all, cnt, displ, MPI_BYTE, 0, MPI_COMM_WORLD);
    free(recs);
    ok = true;
    if (d->rank == 0) {
        /* the index: the metadata of a single-file checkpoint, its checksum over the tensors' own checksums in model
         * order; every tensor mapped to its writer's shard */
        ck_text b = {NULL, 0, 0, false};
        uint64_t h = 0xcbf29ce484222325ULL;
        int *who = calloc((size_t)(list.n > 0 ? list.n : 1), sizeof *who), *at = calloc((size_t)(list.n > 0 ? list.n : 1), sizeof *at);
        if (!who || !at)
            MPI_Abort(MPI_COMM_WORLD, 1);
        for (int i = 0; i < list.n; i++) {
            who[i] = -1;
            for (int r = 0; r < p && who[i] < 0; r++)
                for (int x = 0; x < cnt[r] / (int)sizeof *all; x++)
                    if (strcmp(all[displ[r] / (int)sizeof *all + x].name, list.t[i].name) == 0) {
                        who[i] = r;
                        at[i] = displ[r] / (int)sizeof *all + x;
                        break;
                    }
            if (who[i] < 0)
                ok = tr_fail(err, "%s: internal error: no rank wrote %s; the checkpoint was not written", path,
                             list.t[i].name);
            for (int k = 0; ok && k < 3; k++) {
                unsigned char le[8];
                for (int x = 0; x < 8; x++)
                    le[x] = (unsigned char)(all[at[i]].h[k] >> (8 * x));
                for (int x = 0; x < 8; x++)
                    h = (h ^ le[x]) * 0x100000001b3ULL;
            }
        }
        meta_list *m = calloc(1, sizeof *m);
        if (!m)
            MPI_Abort(MPI_COMM_WORLD, 1);
        ckpt_meta(m, &list, step, seed, "fnv1a64-tensors", h);
        text_put(&b, "{\"metadata\": {", 14);
        for (int k = 0; k < m->n; k++) {
            text_str(&b, m->key[k]);
            text_put(&b, ": ", 2);
            text_str(&b, m->val[k]);
            text_put(&b, ", ", 2);
        }
        text_str(&b, "data_pos");
        text_put(&b, ": ", 2);
        text_str(&b, tr_ckpt_pos);
        text_put(&b, ", ", 2);
        text_str(&b, "data");
        text_put(&b, ": ", 2);
        text_str(&b, tr_ckpt_data_rec);
        text_put(&b, "},\n\"weight_map\": {", 18);
        for (int i = 0; ok && i < list.n; i++)
            for (int k = 0; k < 3; k++) {
                char tn[TR_ST_NAME_CAP + 8], fn[160];
                snprintf(fn, sizeof fn, "%s%s-r%05d.safetensors", TR_CKPT_SHARD_PREFIX, tag, who[i]);
                text_put(&b, i || k ? ",\n  " : "\n  ", i || k ? 4 : 3);
                text_str(&b, tensor_name(tn, sizeof tn, list.t[i].name, k));
                text_put(&b, ": ", 2);
                text_str(&b, fn);
            }
        text_put(&b, "\n}}\n", 4);
        free(m);
        free(who);
        free(at);
        if (ok && b.oom)
            ok = tr_fail(err, "%s: out of memory writing the index; the checkpoint was not written", path);
        if (ok) {
            const void *parts[1] = {b.p};
            size_t lens[1] = {b.len};
            ok = tr_st_write_file_atomic(path, parts, lens, 1, err); /* the set is complete: its index last */
        }
        free(b.p);
        if (!is_pending(path)) /* the index names the new shards now (or, failed, the old ones): the rest go */
            clean_shards(path);
    }
    free(cnt);
    free(displ);
    free(all);
    free(list.t);
    v = ok ? 1 : 0;
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v == 1;
}

bool tr_ckpt_promote(const tr_rank_desc *d, const char *pending, const char *path, tr_err *err)
{
    int v = 1;
    if (d->rank == 0) {
        if (rename(pending, path) != 0) {
            v = 0;
            tr_fail(err, "%s: cannot rename %s onto it: %s; %s keeps the previous checkpoint", path, pending,
                    strerror(errno), path);
        } else { /* make the rename durable (best effort: some file systems refuse fsync on a directory) */
            char dir[4096];
            const char *slash = strrchr(path, '/');
            size_t n = slash ? (size_t)(slash - path) : 0;
            snprintf(dir, sizeof dir, "%.*s", (int)(n ? n : 1), slash ? path : ".");
            int fd = open(dir, O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
                (void)fsync(fd);
                close(fd);
            }
            if (is_index_path(path)) /* sharded: the previous checkpoint's shards go */
                clean_shards(path);
        }
    }
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v == 1;
}

void tr_ckpt_discard(const tr_rank_desc *d, const char *pending)
{
    if (d->rank == 0) {
        (void)unlink(pending);
        if (is_index_path(pending)) /* sharded: the pending checkpoint's shards too */
            clean_shards(pending);
    }
}

#endif /* TR_CKPT_READER_ONLY */

/* ---- resuming ---- */

/* The metadata value of key as a decimal integer >= 0 (digits only). */
/* A checkpoint being read: one file or a sharded set (tr_stset), and a sharded one's index with its "metadata". */
typedef struct ck_src {
    tr_stset set;
    tr_json_doc doc;
    bool has_doc;
    const tr_json_node *meta; /* the index's "metadata" object, NULL when it has none */
} ck_src;

/* The checkpoint's metadata string key into out (cap bytes with its NUL): false when missing, not a string or too
 * long. A single file's __metadata__, a sharded checkpoint's index "metadata". */
static bool src_meta(const ck_src *c, const char *key, char *out, size_t cap)
{
    if (!c->set.sharded)
        return tr_st_metadata(&c->set.shards[0], key, out, cap);
    const tr_json_node *v = c->meta ? tr_json_get(&c->doc, c->meta, key) : NULL;
    if (cap == 0 || !v || v->type != TR_JSON_STRING || v->str_len >= cap || strlen(v->str) != v->str_len)
        return false;
    memcpy(out, v->str, v->str_len + 1);
    return true;
}

/* Open path as a checkpoint: a file, or a sharded checkpoint's index or directory (validate: every shard checked
 * against the index, rank 0). */
static bool src_open(ck_src *c, const char *path, bool validate, tr_err *err)
{
    memset(c, 0, sizeof *c);
    struct stat sb;
    char idx[1200];
    snprintf(idx, sizeof idx, "%s/%s", path, TR_STSET_INDEX);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && access(idx, F_OK) != 0)
        return tr_fail(err, "%s: is a directory without %s: --resume takes a checkpoint file, or the directory (or "
                            "the index) that --checkpoint-out C --checkpoint-shards wrote",
                       path, TR_STSET_INDEX);
    if (!tr_stset_open(&c->set, path, validate, err))
        return false;
    if (c->set.sharded) {
        if (!tr_st_read_json(c->set.path, "safetensors index (JSON)", &c->doc, err)) {
            tr_stset_close(&c->set);
            return false;
        }
        c->has_doc = true;
        const tr_json_node *m = tr_json_get(&c->doc, tr_json_root(&c->doc), "metadata");
        c->meta = m && m->type == TR_JSON_OBJECT ? m : NULL;
    }
    return true;
}

static void src_close(ck_src *c)
{
    if (c->has_doc)
        tr_json_free(&c->doc);
    c->has_doc = false;
    tr_stset_close(&c->set);
}

static bool meta_uint(const ck_src *f, const char *key, unsigned long long *out)
{
    char v[META_VAL], *end;
    if (!src_meta(f, key, v, sizeof v) || v[0] < '0' || v[0] > '9')
        return false;
    errno = 0;
    *out = strtoull(v, &end, 10);
    return errno == 0 && *end == '\0';
}

/* Rank 0: the checks on the open file f, in the order a user fixes them. */
static bool check_open(const ck_list *l, ck_src *f, const char *path, int reshard, int check_data,
                       tr_ckpt_state *st, char *pos, tr_err *err)
{
    char v[TR_CKPT_DATA_POS_CAP], w[META_VAL];
    if (!src_meta(f, "format", v, sizeof v))
        return tr_fail(err, "%s: not a tessgen checkpoint: its __metadata__ has no \"format\" (a checkpoint says "
                            "\"%s\"); to start from a weights file use --weights, not --resume",
                       path, TR_CKPT_FORMAT);
    if (strcmp(v, TR_CKPT_FORMAT) != 0)
        return tr_fail(err, "%s: checkpoint format \"%.100s\", but this program reads \"%s\": write it again "
                            "with this tessgen, or resume it with the tessgen that wrote it",
                       path, v, TR_CKPT_FORMAT);
    meta_list *m = calloc(1, sizeof *m);
    if (!m)
        return tr_fail(err, "%s: out of memory", path);
    built_meta(m);
    bool ok = true;
    /* the optimizer: the build's settings are used; a difference is noted, not refused (a schedule may be
     * extended, a rate lowered, on resume) */
    size_t nn = 0;
    st->note[0] = '\0';
    for (int k = META_MODEL; k < META_MODEL + META_OPT; k++)
        if (src_meta(f, m->key[k], w, sizeof w) && strcmp(w, m->val[k]) != 0 && nn + 1 < sizeof st->note)
            nn += (size_t)snprintf(st->note + nn, sizeof st->note - nn, "%s%s = %s in the checkpoint, %s here",
                                   nn ? "; " : "", m->key[k], w, m->val[k]);
    if (!src_meta(f, "mesh", st->mesh, sizeof st->mesh))
        st->mesh[0] = '\0';
    /* the model: every dimension named at once */
    for (int k = 0; k < META_MODEL; k++) {
        if (!src_meta(f, m->key[k], w, sizeof w))
            ok = tr_fail(err, "%s: the checkpoint's __metadata__ has no \"%s\": not a complete tessgen checkpoint",
                         path, m->key[k]);
        else if (strcmp(w, m->val[k]) != 0)
            ok = tr_fail(err, "%s: the checkpoint is of another model: %s = %s in the checkpoint, %s in this "
                              "program (%s, from %s); resume it with a program generated for its model",
                         path, m->key[k], w, m->val[k], tr_model.name, tr_model.spec_path);
    }
    bool model_ok = ok;
    /* the mesh (placement included): the same, or --reshard */
    for (int k = META_MODEL + META_OPT; ok && k < META_MODEL + META_OPT + 2; k++) {
        if (!src_meta(f, m->key[k], w, sizeof w)) {
            ok = tr_fail(err, "%s: the checkpoint's __metadata__ has no \"%s\": not a complete tessgen checkpoint",
                         path, m->key[k]);
        } else if (strcmp(w, m->val[k]) != 0 && !reshard) {
            char sw[META_VAL];
            if (!src_meta(f, "mesh.strides", sw, sizeof sw))
                sw[0] = '\0';
            ok = tr_fail(err, "%s: the checkpoint was written on mesh %s (rank strides i,j,k = %s), this program "
                              "runs mesh %s (strides %s): add --reshard to re-shard it on load (every rank reads "
                              "its pieces of the full tensors; the run continues on this mesh, within rounding of "
                              "the original mesh's run, not bitwise), or resume with a program of mesh %s",
                         path, st->mesh, sw, tr_mesh_text(), m->val[META_MODEL + META_OPT + 1], st->mesh);
        }
    }
    /* the pipeline stages and the blocks each holds: the same, or --reshard (each stage reads its own blocks by name);
     * a checkpoint without "mesh.pp" was written by one program of all the blocks */
    char fpp[META_VAL], fst[META_VAL], bst[META_VAL];
    if (!src_meta(f, "mesh.pp", fpp, sizeof fpp))
        snprintf(fpp, sizeof fpp, "1");
    stages_text(l, bst, sizeof bst);
    if (!src_meta(f, "mesh.stages", fst, sizeof fst))
        snprintf(fst, sizeof fst, "%s", strcmp(fpp, "1") == 0 && l->stages == 1 ? bst : "?");
    if (ok && !reshard && (atoi(fpp) != l->stages || strcmp(fst, bst) != 0)) {
        ok = tr_fail(err, "%s: the checkpoint was written on mesh %s with mesh.pp = %.16s (the stages' blocks %.60s), "
                          "this program runs mesh %s with mesh.pp = %d (blocks %s): add --reshard to re-shard it on "
                          "load (each stage reads its own blocks' tensors), or resume with a program of mesh.pp = %.16s "
                          "and those stage blocks",
                     path, st->mesh, fpp, fst, tr_mesh_text(), l->stages, bst, fpp);
    }
    /* the dtype: the same, or --reshard (a checkpoint holds fp32 master weights and moments in either dtype) */
    if (!src_meta(f, "dtype", st->dtype, sizeof st->dtype))
        st->dtype[0] = '\0'; /* a checkpoint of an earlier tessgen: not checked, a note says so */
    if (model_ok && st->dtype[0] && strcmp(st->dtype, m->val[META_DTYPE]) != 0 && !reshard)
        ok = tr_fail(err, "%s: the checkpoint was trained with dtype = \"%.16s\", this program computes with dtype = "
                          "\"%s\" (%s, from %s): add --reshard to continue in %s (the checkpoint's float32 master "
                          "weights and AdamW moments load exactly; the steps then round as %s does, so the run differs "
                          "from its continuation in %.16s), or resume with a program generated with dtype = \"%.16s\"",
                     path, st->dtype, m->val[META_DTYPE], tr_model.name, tr_model.spec_path, m->val[META_DTYPE],
                     m->val[META_DTYPE], st->dtype, st->dtype);
    free(m);
    if (!ok)
        return false;
    /* the data it was trained on (a checkpoint of an earlier tessgen has no record: not checked) */
    if (!src_meta(f, "data", st->data, sizeof st->data))
        st->data[0] = '\0';
    if (check_data && st->data[0] && !same_data(st->data, tr_ckpt_data_rec))
        return tr_fail(err, "%s: the checkpoint was trained on %s, but this run would train on %s: %s%s to continue "
                            "on the data it was trained on, or add --data-change to continue on this run's data "
                            "(recorded in the checkpoints it writes)",
                       path, data_text(st->data), data_text(tr_ckpt_data_rec),
                       strcmp(st->data, "synthetic") == 0 ? "drop the data options" : "pass ",
                       strcmp(st->data, "synthetic") == 0 ? "" : st->data);
    /* step, seed, data position */
    unsigned long long step, seed;
    if (!meta_uint(f, "step", &step) || step > INT_MAX)
        return tr_fail(err, "%s: the checkpoint's \"step\" is missing or not an integer in 0..%d: corrupt "
                            "checkpoint", path, INT_MAX);
    if (!meta_uint(f, "seed", &seed))
        return tr_fail(err, "%s: the checkpoint's \"seed\" is missing or not an integer: corrupt checkpoint", path);
    st->step = (long long)step;
    st->seed = seed;
    if (!src_meta(f, "data_pos", pos, TR_CKPT_DATA_POS_CAP))
        return tr_fail(err, "%s: the checkpoint's \"data_pos\" is missing or longer than %d bytes: corrupt "
                            "checkpoint", path, TR_CKPT_DATA_POS_CAP - 1);
    /* every tensor: present, F32, the full shape; nothing else */
    int bad = 0, expected = 3 * l->n;
    for (int i = 0; i < l->n; i++) {
        const ck_tensor *pr = &l->t[i];
        int64_t shape[2] = {pr->full[0], pr->full[1]};
        for (int k = 0; k < 3; k++) {
            char name[TR_ST_NAME_CAP + 8];
            tensor_name(name, sizeof name, pr->name, k);
            const tr_st_tensor *t = tr_stset_tensor(&f->set, name);
            tr_err e = {{0}};
            bool good = true;
            if (!t) {
                good = tr_fail(&e, "%s: tensor %s is missing: a checkpoint holds every parameter and its two AdamW "
                                   "moments (adam_m.<name>, adam_v.<name>); the file is incomplete, or of another "
                                   "model", path, name);
            } else if (!tr_stset_expect_float(&f->set, name, pr->ndim, shape, &e)) {
                good = false;
            } else if (strcmp(t->dtype, "F32") != 0) {
                good = tr_fail(&e, "%s: tensor %s is %s: a checkpoint stores F32 (the moments and weights exactly); "
                                   "it was not written by tessgen's --checkpoint-out", path, name, t->dtype);
            }
            if (!good && bad++ < 8)
                tr_fail(err, "%s", e.msg);
        }
    }
    if (bad > 8)
        tr_fail(err, "%s: ... and %d more tensor problems", path, bad - 8);
    if (bad)
        return false;
    if (f->set.ntensors != expected) { /* all expected ones are present: the rest are foreign */
        for (int t = 0; t < f->set.ntensors; t++) {
            const char *n = tr_stset_name(&f->set, t);
            const char *base = strncmp(n, "adam_m.", 7) == 0 || strncmp(n, "adam_v.", 7) == 0 ? n + 7 : n;
            int known = 0;
            for (int i = 0; i < l->n && !known; i++)
                known = strcmp(base, l->t[i].name) == 0;
            if (!known)
                return tr_fail(err, "%s: tensor %s is not a parameter of this model (%s) nor a moment of one: the "
                                    "checkpoint is of another model; resume it with a program generated for it",
                               path, n, tr_model.name);
        }
    }
    /* the checksum over every tensor's bytes, in the writer's order */
    if (!src_meta(f, "checksum", w, sizeof w))
        return tr_fail(err, "%s: the checkpoint's __metadata__ has no \"checksum\": not a complete tessgen checkpoint",
                       path);
    /* one file: FNV-1a 64 over the tensors' bytes; sharded: over each tensor's own FNV-1a 64 (8 bytes,
     * little-endian), the writers hashing their tensors apart */
    bool per_tensor = f->set.sharded;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < l->n; i++) {
        const ck_tensor *pr = &l->t[i];
        long long rows = pr->ndim == 1 ? 1 : pr->full[0], cols = pr->ndim == 1 ? pr->full[0] : pr->full[1];
        float *buf = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *buf); /* [rows, cols] */
        if (!buf)
            return tr_fail(err, "%s: out of memory checking the checkpoint", path);
        for (int k = 0; k < 3; k++) {
            char name[TR_ST_NAME_CAP + 8];
            if (!tr_stset_read_block(&f->set, tensor_name(name, sizeof name, pr->name, k), 0, rows, 0, cols, buf, cols, err)) {
                free(buf);
                return false;
            }
            if (per_tensor) {
                uint64_t t = fnv(0xcbf29ce484222325ULL, buf, rows * cols);
                for (int x = 0; x < 8; x++)
                    h = (h ^ (unsigned char)(t >> (8 * x))) * 0x100000001b3ULL;
            } else {
                h = fnv(h, buf, rows * cols);
            }
        }
        free(buf);
    }
    char want[40];
    snprintf(want, sizeof want, "%s:%016" PRIx64, per_tensor ? "fnv1a64-tensors" : "fnv1a64", h);
    if (strcmp(w, want) != 0)
        return tr_fail(err, "%s: the tensors' checksum is %s but the checkpoint recorded %.40s: the file was "
                            "changed or damaged after it was written; use an intact copy (an earlier "
                            "--checkpoint-every file)", path, want, w);
    return true;
}

static bool check_list(const ck_list *l, const char *path, int reshard, int check_data, tr_ckpt_state *st,
                       char *pos, tr_err *err)
{
    ck_src c;
    bool ok = src_open(&c, path, true, err) && check_open(l, &c, path, reshard, check_data, st, pos, err);
    src_close(&c);
    return ok;
}

bool tr_ckpt_check(const tr_rank_desc *d, const char *path, int reshard, int check_data, tr_ckpt_state *st,
                   char *pos, tr_err *err)
{
    ck_list l;
    if (!list_from_desc(d, 0, -1, &l))
        return tr_fail(err, "%s: out of memory", path);
    bool ok = check_list(&l, path, reshard, check_data, st, pos, err);
    free(l.t);
    return ok;
}

#ifndef TR_CKPT_READER_ONLY
/* This rank's pieces of tensor `name` of the open file into H at off (the shard layout of pr). */
static bool read_shard(tr_stset *f, const tr_param *pr, const char *name, float *H, long long off, tr_err *err)
{
    bool ok = true;
    for (int k = 0; k < pr->npieces && ok; k++) {
        const tr_piece *pc = &pr->piece[k];
        ok = tr_stset_read_block(f, name, pc->r0, pc->nr, pc->c0, pc->nc, H + off + pc->dst_col, pr->cols, err);
    }
    return ok;
}

/* The elements of pr's moments in the arena: one slice of pr->shard (optimizer.shard), or the whole shard. */
static long long moment_elems(const tr_param *pr)
{
    return pr->shard > 0 ? pr->shard : (long long)pr->rows * pr->cols;
}

/* optimizer.shard: this rank's slice k (k = its place in dep) of a moment the checkpoint holds whole: the rank's
 * pieces into a zeroed [rows, cols] shard (rows no file holds, as the LM's pad rows of wte, stay zero), then
 * elements [k*s, min((k+1)*s, n)) to H at off, the rest of the s elements zero (as a fresh run's). */
static bool read_slice(const tr_rank_desc *d, tr_stset *f, const tr_param *pr, const char *name, float *H,
                       long long off, tr_err *err)
{
    long long n = (long long)pr->rows * pr->cols, lo = (long long)d->key[TR_DEP] * pr->shard;
    float *whole = calloc((size_t)(n > 0 ? n : 1), sizeof *whole);
    if (!whole)
        return tr_fail(err, "%s: out of memory reading the moment's slice", name);
    bool ok = read_shard(f, pr, name, whole, 0, err);
    for (long long e = 0; ok && e < pr->shard; e++)
        H[off + e] = lo + e < n ? whole[lo + e] : 0.0f;
    free(whole);
    return ok;
}

bool tr_ckpt_resume(const tr_rank_desc *d, const char *path, int reshard, int check_data, float *H, tr_ckpt_state *st,
                    tr_err *err)
{
    char *pos = calloc(TR_CKPT_DATA_POS_CAP, 1);
    bool ok = pos != NULL;
    long long step = 0;
    unsigned long long seed = 0;
    ck_list list = {0, 1, NULL};
    if (!ck_model_list(d, &list)) {
        free(pos);
        if (d->rank == 0)
            tr_fail(err, "%s: out of memory listing the parameters", path);
        return false;
    }
    if (ok && d->rank == 0) {
        ok = check_list(&list, path, reshard, check_data, st, pos, err);
        step = st->step;
        seed = st->seed;
    }
    free(list.t);
    int v = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!v) {
        free(pos);
        return false;
    }
    MPI_Bcast(&step, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    MPI_Bcast(pos, TR_CKPT_DATA_POS_CAP, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(st->data, TR_CKPT_DATA_CAP, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(st->dtype, sizeof st->dtype, MPI_CHAR, 0, MPI_COMM_WORLD);
    st->step = step;
    st->seed = seed;
    tr_ckpt_set_data_pos(pos);
    free(pos);

    /* every rank: its pieces of the weights and both moments, as --weights reads its pieces */
    tr_stset f;
    tr_err e = {{0}};
    ok = tr_stset_open(&f, path, false, &e); /* a sharded checkpoint: each shard mapped on first use */
    for (int i = 0; i < d->nparams && ok; i++) {
        const tr_param *pr = &d->params[i];
        const long long off[3] = {pr->offset, pr->m_offset, pr->v_offset};
        for (int k = 0; k < 3 && ok; k++) {
            char name[TR_ST_NAME_CAP + 8];
            tensor_name(name, sizeof name, pr->name, k);
            ok = k > 0 && pr->shard > 0 ? read_slice(d, &f, pr, name, H, off[k], &e) /* optimizer.shard */
                                        : read_shard(&f, pr, name, H, off[k], &e);
        }
    }
    tr_stset_close(&f);
    /* finite weights and moments, v >= 0: the first offending tensor in model order */
    /* the first offending tensor over the ranks: key stage * 65536 + index (pipeline stages hold other tensors) */
    const int stage = piped() ? tr_pipe_class.stage : 0, none = INT_MAX;
    int first = none;
    for (int i = 0; i < d->nparams && ok && first == none; i++) {
        const tr_param *pr = &d->params[i];
        long long n = (long long)pr->rows * pr->cols, nm = moment_elems(pr);
        for (long long x = 0; x < n && first == none; x++)
            if (!isfinite(H[pr->offset + x]) ||
                (x < nm && (!isfinite(H[pr->m_offset + x]) || !(H[pr->v_offset + x] >= 0.0f) ||
                            !isfinite(H[pr->v_offset + x]))))
                first = stage * 65536 + i;
    }
    int failed = ok ? 0 : 1, anyfailed = 0, firsts = first;
    MPI_Allreduce(&failed, &anyfailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&first, &firsts, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (anyfailed) {
        if (!ok)
            fprintf(stderr, "rank %d: %s\n", d->rank, e.msg);
        if (d->rank == 0)
            tr_fail(err, "%s: a rank could not read its pieces of the checkpoint (above); nothing was run", path);
        return false;
    }
    if (firsts != none) {
        /* the tensor's name: known on the ranks of its stage; its stage's first rank tells rank 0 */
        char name[64] = "";
        int fs = firsts / 65536, fi = firsts % 65536, froot = piped() ? fs * tr_pipe_class.ranks : 0;
        if (d->rank == froot)
            snprintf(name, sizeof name, "%s", d->params[fi].name);
        MPI_Bcast(name, sizeof name, MPI_CHAR, froot, MPI_COMM_WORLD);
        if (d->rank == 0)
            tr_fail(err, "%s: tensor %s (or its adam_m./adam_v. moment) holds a NaN or an infinity (or adam_v a "
                         "negative value): a checkpoint of a diverged run, or damaged; use an earlier checkpoint",
                    path, name);
        return false;
    }
    return true;
}
#endif /* TR_CKPT_READER_ONLY */
