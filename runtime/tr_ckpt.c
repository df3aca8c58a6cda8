/*
 * tr_ckpt.c - training checkpoints (tr_ckpt.h): the metadata a checkpoint records, its writer (the full
 * tensors gathered on rank 0, one atomic safetensors write) and resume (rank 0 validates, every rank
 * reads its pieces). The refusals name the file, the field, the checkpoint's value and the built
 * model's, and the fix; a refused checkpoint loads nothing. Built with -DTR_CKPT_READER_ONLY (the fuzz
 * harness tests/fuzz/fuzz_ckpt.c) only the metadata and the rank-0 validation (tr_ckpt_check) are
 * compiled: no MPI.
 */
#include "tr_ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TR_CKPT_READER_ONLY
#include "tr_gather.h"
#endif
#include "tr_json.h"
#include "tr_safetensors.h"

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

bool tr_ckpt_write(const tr_rank_desc *d, MPI_Comm dep, const float *H, const char *path, long long step,
                   uint64_t seed, tr_err *err)
{
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
            built_meta(m);
            char stages[META_VAL];
            stages_text(&list, stages, sizeof stages);
            meta_add(m, "mesh.pp", "%d", list.stages);
            meta_add(m, "mesh.stages", "%s", stages);
            meta_add(m, "format", "%s", TR_CKPT_FORMAT);
            meta_add(m, "step", "%lld", step);
            meta_add(m, "seed", "%" PRIu64, seed);
            meta_add(m, "checksum", "fnv1a64:%016" PRIx64, h);
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
        }
    }
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v == 1;
}

void tr_ckpt_discard(const tr_rank_desc *d, const char *pending)
{
    if (d->rank == 0)
        (void)unlink(pending);
}

#endif /* TR_CKPT_READER_ONLY */

/* ---- resuming ---- */

/* The metadata value of key as a decimal integer >= 0 (digits only). */
static bool meta_uint(const tr_st_file *f, const char *key, unsigned long long *out)
{
    char v[META_VAL], *end;
    if (!tr_st_metadata(f, key, v, sizeof v) || v[0] < '0' || v[0] > '9')
        return false;
    errno = 0;
    *out = strtoull(v, &end, 10);
    return errno == 0 && *end == '\0';
}

/* Rank 0: the checks on the open file f, in the order a user fixes them. */
static bool check_open(const ck_list *l, const tr_st_file *f, const char *path, int reshard, int check_data,
                       tr_ckpt_state *st, char *pos, tr_err *err)
{
    char v[TR_CKPT_DATA_POS_CAP], w[META_VAL];
    if (!tr_st_metadata(f, "format", v, sizeof v))
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
        if (tr_st_metadata(f, m->key[k], w, sizeof w) && strcmp(w, m->val[k]) != 0 && nn + 1 < sizeof st->note)
            nn += (size_t)snprintf(st->note + nn, sizeof st->note - nn, "%s%s = %s in the checkpoint, %s here",
                                   nn ? "; " : "", m->key[k], w, m->val[k]);
    if (!tr_st_metadata(f, "mesh", st->mesh, sizeof st->mesh))
        st->mesh[0] = '\0';
    /* the model: every dimension named at once */
    for (int k = 0; k < META_MODEL; k++) {
        if (!tr_st_metadata(f, m->key[k], w, sizeof w))
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
        if (!tr_st_metadata(f, m->key[k], w, sizeof w)) {
            ok = tr_fail(err, "%s: the checkpoint's __metadata__ has no \"%s\": not a complete tessgen checkpoint",
                         path, m->key[k]);
        } else if (strcmp(w, m->val[k]) != 0 && !reshard) {
            char mw[META_VAL], sw[META_VAL];
            if (!tr_st_metadata(f, "mesh", mw, sizeof mw))
                mw[0] = '\0';
            if (!tr_st_metadata(f, "mesh.strides", sw, sizeof sw))
                sw[0] = '\0';
            ok = tr_fail(err, "%s: the checkpoint was written on mesh %s (rank strides i,j,k = %s), this program "
                              "runs mesh %s (strides %s): add --reshard to re-shard it on load (every rank reads "
                              "its pieces of the full tensors; the run continues on this mesh, within rounding of "
                              "the original mesh's run, not bitwise), or resume with a program of mesh %s",
                         path, mw, sw, tr_mesh_text(), m->val[META_MODEL + META_OPT + 1], mw);
        }
    }
    /* the pipeline stages and the blocks each holds: the same, or --reshard (each stage reads its own blocks by name);
     * a checkpoint without "mesh.pp" was written by one program of all the blocks */
    char fpp[META_VAL], fst[META_VAL], bst[META_VAL];
    if (!tr_st_metadata(f, "mesh.pp", fpp, sizeof fpp))
        snprintf(fpp, sizeof fpp, "1");
    stages_text(l, bst, sizeof bst);
    if (!tr_st_metadata(f, "mesh.stages", fst, sizeof fst))
        snprintf(fst, sizeof fst, "%s", strcmp(fpp, "1") == 0 && l->stages == 1 ? bst : "?");
    if (ok && !reshard && (atoi(fpp) != l->stages || strcmp(fst, bst) != 0)) {
        char mw[META_VAL];
        if (!tr_st_metadata(f, "mesh", mw, sizeof mw))
            mw[0] = '\0';
        ok = tr_fail(err, "%s: the checkpoint was written on mesh %s with mesh.pp = %.16s (the stages' blocks %.60s), "
                          "this program runs mesh %s with mesh.pp = %d (blocks %s): add --reshard to re-shard it on "
                          "load (each stage reads its own blocks' tensors), or resume with a program of mesh.pp = %.16s "
                          "and those stage blocks",
                     path, mw, fpp, fst, tr_mesh_text(), l->stages, bst, fpp);
    }
    /* the dtype: the same, or --reshard (a checkpoint holds fp32 master weights and moments in either dtype) */
    if (!tr_st_metadata(f, "dtype", st->dtype, sizeof st->dtype))
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
    if (!tr_st_metadata(f, "data", st->data, sizeof st->data))
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
    if (!tr_st_metadata(f, "data_pos", pos, TR_CKPT_DATA_POS_CAP))
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
            const tr_st_tensor *t = tr_st_find(f, name);
            tr_err e = {{0}};
            bool good = true;
            if (!t) {
                good = tr_fail(&e, "%s: tensor %s is missing: a checkpoint holds every parameter and its two AdamW "
                                   "moments (adam_m.<name>, adam_v.<name>); the file is incomplete, or of another "
                                   "model", path, name);
            } else if (!tr_st_expect_float(f, name, pr->ndim, shape, &e)) {
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
    if (f->ntensors != expected) { /* all expected ones are present: the rest are foreign */
        for (int t = 0; t < f->ntensors; t++) {
            const char *n = f->tensors[t].name;
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
    if (!tr_st_metadata(f, "checksum", w, sizeof w))
        return tr_fail(err, "%s: the checkpoint's __metadata__ has no \"checksum\": not a complete tessgen checkpoint",
                       path);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < l->n; i++) {
        const ck_tensor *pr = &l->t[i];
        long long rows = pr->ndim == 1 ? 1 : pr->full[0], cols = pr->ndim == 1 ? pr->full[0] : pr->full[1];
        float *buf = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * sizeof *buf); /* [rows, cols] */
        if (!buf)
            return tr_fail(err, "%s: out of memory checking the checkpoint", path);
        for (int k = 0; k < 3; k++) {
            char name[TR_ST_NAME_CAP + 8];
            if (!tr_st_read_block(f, tensor_name(name, sizeof name, pr->name, k), 0, rows, 0, cols, buf, cols, err)) {
                free(buf);
                return false;
            }
            h = fnv(h, buf, rows * cols);
        }
        free(buf);
    }
    char want[40];
    snprintf(want, sizeof want, "fnv1a64:%016" PRIx64, h);
    if (strcmp(w, want) != 0)
        return tr_fail(err, "%s: the tensors' checksum is %s but the checkpoint recorded %.40s: the file was "
                            "changed or damaged after it was written; use an intact copy (an earlier "
                            "--checkpoint-every file)", path, want, w);
    return true;
}

static bool check_list(const ck_list *l, const char *path, int reshard, int check_data, tr_ckpt_state *st,
                       char *pos, tr_err *err)
{
    tr_st_file f;
    bool ok = tr_st_open(&f, path, err) && check_open(l, &f, path, reshard, check_data, st, pos, err);
    tr_st_close(&f);
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
static bool read_shard(const tr_st_file *f, const tr_param *pr, const char *name, float *H, long long off,
                       tr_err *err)
{
    bool ok = true;
    for (int k = 0; k < pr->npieces && ok; k++) {
        const tr_piece *pc = &pr->piece[k];
        ok = tr_st_read_block(f, name, pc->r0, pc->nr, pc->c0, pc->nc, H + off + pc->dst_col, pr->cols, err);
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
static bool read_slice(const tr_rank_desc *d, const tr_st_file *f, const tr_param *pr, const char *name, float *H,
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
    tr_st_file f;
    tr_err e = {{0}};
    ok = tr_st_open(&f, path, &e);
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
    tr_st_close(&f);
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
