/*
 * tr_stset.c - one safetensors file or a sharded checkpoint as one set of
 * tensors (see tr_stset.h).
 *
 * Design: the set is a table of (tensor name, shard) sorted by name, the same
 * for both layouts, and a table of shards opened on demand with tr_st_open, so
 * everything below the lookup (header validation, the shape and dtype checks,
 * block reads, their messages) is the single-file reader's. A single file is a
 * set of one shard whose names are its header's. For an index, the weight_map
 * is the whole truth the other ranks rely on, so rank 0 checks it against every
 * shard's header before any rank reads: a tensor mapped to a shard that lacks
 * it, found in two shards, or held by a shard the map does not list is refused,
 * naming the index, the tensor and the shards. The shards are opened one at a
 * time for that check and closed again, so a checkpoint with many shards does
 * not hold a descriptor per shard; the reads reopen the ones they need.
 * Shard names must be plain file names in the index's directory (no '/', no
 * ".."), so an index cannot make a run read files elsewhere.
 */
#include "tr_stset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tr_json.h"

#define STSET_MAX_SHARD_NAME 255

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const tr_stset_entry *)a)->name, ((const tr_stset_entry *)b)->name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const tr_stset_entry *find(const tr_stset *s, const char *name)
{
    tr_stset_entry key = {name, 0};
    return s->ntensors ? bsearch(&key, s->entries, (size_t)s->ntensors, sizeof key, cmp_entry) : NULL;
}

bool tr_stset_has(const tr_stset *s, const char *name)
{
    return find(s, name) != NULL;
}

void tr_stset_close(tr_stset *s)
{
    for (int k = 0; s->shards && k < s->nshards; k++)
        tr_st_close(&s->shards[k]);
    for (int k = 0; s->shard_name && k < s->nshards; k++)
        free(s->shard_name[k]);
    free(s->shard_name);
    free(s->shards);
    free(s->entries);
    free(s->names);
    memset(s, 0, sizeof *s);
}

/* Shard k, opened (and its header validated) if it is not yet. */
static tr_st_file *shard(tr_stset *s, int k, tr_err *err)
{
    tr_st_file *f = &s->shards[k];
    if (f->map)
        return f;
    char path[2400];
    if (s->sharded)
        snprintf(path, sizeof path, "%s/%s", s->dir, s->shard_name[k]);
    else
        snprintf(path, sizeof path, "%s", s->shard_name[k]);
    if (tr_st_open(f, path, err))
        return f;
    if (s->sharded) {
        const char *first = "";
        for (int i = 0; i < s->ntensors && !*first; i++)
            if (s->entries[i].shard == k)
                first = s->entries[i].name;
        tr_fail(err, "%s: maps tensor %s (and every other tensor of that shard) to the shard %s, which cannot be read "
                     "(above): an incomplete download or copy? fetch every shard of the checkpoint again",
                s->path, first, s->shard_name[k]);
    }
    return NULL;
}

/* A single safetensors file: one shard, the set's names are its header's. */
static bool open_single(tr_stset *s, const char *path, tr_err *err)
{
    snprintf(s->path, sizeof s->path, "%s", path);
    s->nshards = 1;
    s->shards = calloc(1, sizeof *s->shards);
    s->shard_name = calloc(1, sizeof *s->shard_name);
    if (!s->shards || !s->shard_name || !(s->shard_name[0] = strdup(path)))
        return tr_fail(err, "%s: out of memory", path);
    s->shards[0].fd = -1;
    tr_st_file *f = shard(s, 0, err);
    if (!f)
        return false;
    s->ntensors = f->ntensors;
    s->entries = calloc((size_t)(f->ntensors > 0 ? f->ntensors : 1), sizeof *s->entries);
    if (!s->entries)
        return tr_fail(err, "%s: out of memory for %d tensor names", path, f->ntensors);
    for (int i = 0; i < f->ntensors; i++) /* the header's table is sorted by name already */
        s->entries[i] = (tr_stset_entry){f->tensors[i].name, 0};
    return true;
}

/* Is n a plain file name in the index's directory? */
static bool plain_file_name(const tr_json_node *v)
{
    return v->str_len > 0 && v->str_len <= STSET_MAX_SHARD_NAME && strlen(v->str) == v->str_len &&
           !strchr(v->str, '/') && !strstr(v->str, "..") && strcmp(v->str, ".") != 0;
}

/* Read and check the index at path: the entries and the shard table. No shard is opened. */
static bool read_index(tr_stset *s, const char *path, tr_err *err)
{
    snprintf(s->path, sizeof s->path, "%s", path);
    s->sharded = true;
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(s->dir, sizeof s->dir, ".");
    else if (slash == path)
        snprintf(s->dir, sizeof s->dir, "/");
    else
        snprintf(s->dir, sizeof s->dir, "%.*s", (int)(slash - path), path);
    tr_json_doc doc;
    tr_err jerr = {{0}};
    if (!tr_st_read_json(path, "safetensors index (JSON)", &doc, &jerr))
        return tr_fail(err, "%s; a sharded checkpoint's index is the JSON save_pretrained writes: repair it or save "
                            "the model again",
                       jerr.msg);
    bool ok;
    ok = false;
    const tr_json_node *root = tr_json_root(&doc), *wm = NULL;
    char **names = NULL; /* [count] shard name of each entry, pointing into doc */
    if (root->type != TR_JSON_OBJECT) {
        tr_fail(err, "%s: the top level is a JSON %s, not an object: not a safetensors index ({\"metadata\": {...}, "
                     "\"weight_map\": {tensor: shard file}}); pass the checkpoint's directory or its "
                     "model.safetensors",
                path, tr_json_type_name(root->type));
        goto out;
    }
    wm = tr_json_get(&doc, root, "weight_map");
    if (!wm || wm->type != TR_JSON_OBJECT) {
        tr_fail(err, "%s: %s: a safetensors index maps every tensor to its shard in \"weight_map\": {tensor: shard "
                     "file}; repair it or save the model again",
                path, wm ? "\"weight_map\" is not an object" : "has no \"weight_map\"");
        goto out;
    }
    for (const tr_json_node *m = tr_json_first(&doc, root); m; m = tr_json_next(&doc, m))
        if (m != wm && m->key_len == strlen("weight_map") && !strcmp(m->key, "weight_map")) {
            tr_fail(err, "%s: \"weight_map\" appears twice: which one holds is not defined; keep one", path);
            goto out;
        }
    if (wm->count == 0) {
        tr_fail(err, "%s: \"weight_map\" is empty: the index names no tensor; repair it or save the model again",
                path);
        goto out;
    }
    int n = wm->count;
    size_t bytes = 0;
    s->entries = calloc((size_t)n, sizeof *s->entries);
    names = calloc((size_t)n, sizeof *names);
    for (const tr_json_node *m = tr_json_first(&doc, wm); m; m = tr_json_next(&doc, m))
        bytes += m->key_len + 1;
    s->names = malloc(bytes);
    if (!s->entries || !names || !s->names) {
        tr_fail(err, "%s: out of memory for %d tensor names", path, n);
        goto out;
    }
    size_t used = 0;
    for (const tr_json_node *m = tr_json_first(&doc, wm); m; m = tr_json_next(&doc, m)) {
        if (m->key_len != strlen(m->key) || m->key_len == 0 || m->key_len >= TR_ST_NAME_CAP) {
            tr_fail(err, "%s: weight_map has a tensor name \"%.60s%s\" that is %s; names are 1 to %d bytes without "
                         "NUL: repair the index",
                    path, m->key, m->key_len > 60 ? "..." : "", m->key_len == 0 ? "empty" : "not readable",
                    TR_ST_NAME_CAP - 1);
            goto out;
        }
        if (m->type != TR_JSON_STRING || !plain_file_name(m)) {
            tr_fail(err, "%s: weight_map gives tensor %s the shard %s%.80s%s: a shard is the name of a file beside "
                         "the index (no '/', no \"..\", at most %d bytes); repair the index",
                    path, m->key, m->type == TR_JSON_STRING ? "\"" : "a JSON ",
                    m->type == TR_JSON_STRING ? m->str : tr_json_type_name(m->type),
                    m->type == TR_JSON_STRING ? "\"" : "", STSET_MAX_SHARD_NAME);
            goto out;
        }
        memcpy(s->names + used, m->key, m->key_len + 1);
        s->entries[s->ntensors] = (tr_stset_entry){s->names + used, -1};
        names[s->ntensors++] = (char *)m->str;
        used += m->key_len + 1;
    }
    /* the shard table: the distinct shard names, sorted */
    char **sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) {
        tr_fail(err, "%s: out of memory", path);
        goto out;
    }
    memcpy(sorted, names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
    int ns = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || strcmp(sorted[i], sorted[i - 1]) != 0)
            sorted[ns++] = sorted[i];
    s->shard_name = calloc((size_t)ns, sizeof *s->shard_name);
    s->shards = calloc((size_t)ns, sizeof *s->shards);
    bool oom = !s->shard_name || !s->shards;
    for (int k = 0; !oom && k < ns; k++) {
        s->shards[k].fd = -1;
        oom = !(s->shard_name[k] = strdup(sorted[k]));
        s->nshards = k + 1;
    }
    free(sorted);
    if (oom) {
        tr_fail(err, "%s: out of memory", path);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        char **at = bsearch(&names[i], s->shard_name, (size_t)ns, sizeof *s->shard_name, cmp_str);
        s->entries[i].shard = (int)(at - s->shard_name);
    }
    qsort(s->entries, (size_t)n, sizeof *s->entries, cmp_entry);
    for (int i = 1; i < n; i++)
        if (strcmp(s->entries[i - 1].name, s->entries[i].name) == 0) {
            tr_fail(err, "%s: tensor %s appears twice in weight_map: which shard holds it is not defined; keep one",
                    path, s->entries[i].name);
            goto out;
        }
    ok = true;
out:
    free(names);
    tr_json_free(&doc);
    return ok;
}

/* Rank 0: does every shard hold exactly the tensors the index maps to it? */
static bool check_shards(tr_stset *s, tr_err *err)
{
    int *found = malloc((size_t)s->ntensors * sizeof *found); /* per entry: the first shard holding it, or -1 */
    if (!found)
        return tr_fail(err, "%s: out of memory", s->path);
    for (int i = 0; i < s->ntensors; i++)
        found[i] = -1;
    bool ok = true;
    for (int k = 0; ok && k < s->nshards; k++) {
        tr_st_file *f = shard(s, k, err);
        if (!f) {
            ok = false;
            break;
        }
        for (int t = 0; ok && t < f->ntensors; t++) {
            const char *name = f->tensors[t].name;
            const tr_stset_entry *e = find(s, name);
            if (!e) {
                ok = tr_fail(err, "%s: shard %s holds tensor %s, which the index's weight_map does not list: the "
                                  "index and its shards disagree (files of two different saves?); save the model "
                                  "again or repair the index",
                             s->path, s->shard_name[k], name);
            } else if (found[e - s->entries] >= 0) {
                ok = tr_fail(err, "%s: tensor %s is in two shards, %s and %s (the index maps it to %s): which copy "
                                  "is meant cannot be known; save the model again or remove one copy",
                             s->path, name, s->shard_name[found[e - s->entries]], s->shard_name[k],
                             s->shard_name[e->shard]);
            } else {
                found[e - s->entries] = k;
            }
        }
        tr_st_close(f); /* reopened by the reads that need it */
    }
    for (int i = 0; ok && i < s->ntensors; i++) {
        const tr_stset_entry *e = &s->entries[i];
        if (found[i] == e->shard)
            continue;
        if (found[i] < 0)
            ok = tr_fail(err, "%s: maps tensor %s to shard %s, which does not hold it (no shard does): an incomplete "
                              "or mismatched checkpoint; save the model again or fetch the right shard",
                         s->path, e->name, s->shard_name[e->shard]);
        else
            ok = tr_fail(err, "%s: maps tensor %s to shard %s, but shard %s holds it: the index and its shards "
                              "disagree; save the model again or repair the index",
                         s->path, e->name, s->shard_name[e->shard], s->shard_name[found[i]]);
    }
    free(found);
    return ok;
}

/* Is there a file (not a directory) at path? A FIFO or device counts, so the reader refuses it by its type
 * rather than the directory being described as without one. */
static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

bool tr_stset_open(tr_stset *s, const char *path, bool validate, tr_err *err)
{
    memset(s, 0, sizeof *s);
    if (strlen(path) >= 1000)
        return tr_fail(err, "%.200s...: path too long (%zu bytes, at most 999)", path, strlen(path));
    char file[1100];
    snprintf(file, sizeof file, "%s", path);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* a save_pretrained directory: its one file or its index */
        char single[1100], index[1100];
        const char *sep = ends_with(path, "/") ? "" : "/";
        snprintf(single, sizeof single, "%s%s%s", path, sep, TR_STSET_FILE);
        snprintf(index, sizeof index, "%s%s%s", path, sep, TR_STSET_INDEX);
        bool has1 = is_file(single), hasi = is_file(index);
        if (has1 && hasi)
            return tr_fail(err, "%s: holds both %s and %s: which one is meant cannot be known; pass the one to read "
                                "(--weights %s or --weights %s)",
                           path, TR_STSET_FILE, TR_STSET_INDEX, single, index);
        if (!has1 && !hasi)
            return tr_fail(err, "%s: is a directory without %s or %s: --weights takes a safetensors file, a sharded "
                                "checkpoint's index, or the directory save_pretrained wrote them in",
                           path, TR_STSET_FILE, TR_STSET_INDEX);
        snprintf(file, sizeof file, "%s", has1 ? single : index);
    }
    bool ok;
    if (ends_with(file, ".json"))
        ok = read_index(s, file, err) && (!validate || check_shards(s, err));
    else
        ok = open_single(s, file, err);
    if (!ok)
        tr_stset_close(s);
    return ok;
}

/* The entry of name; a message naming the index when a sharded set lacks it. A single file's own message
 * (tr_st_expect_float: with a hint about name prefixes) is kept by letting it look the name up itself. */
static const tr_stset_entry *entry(tr_stset *s, const char *name, tr_err *err)
{
    const tr_stset_entry *e = find(s, name);
    if (!e && s->sharded)
        tr_fail(err, "%s: no tensor named %s in the index's weight_map (it maps %d tensors, the first is %s): the "
                     "weights do not match the built model; pass the right checkpoint or regenerate with the right "
                     "spec",
                s->path, name, s->ntensors, s->entries[0].name);
    return e;
}

const tr_st_tensor *tr_stset_tensor(tr_stset *s, const char *name)
{
    const tr_stset_entry *e = find(s, name);
    if (!e && s->sharded)
        return NULL;
    tr_err ignored = {{0}};
    tr_st_file *f = shard(s, e ? e->shard : 0, &ignored);
    return f ? tr_st_find(f, name) : NULL;
}

bool tr_stset_expect_float(tr_stset *s, const char *name, int ndim, const int64_t *shape, tr_err *err)
{
    const tr_stset_entry *e = entry(s, name, err);
    if (!e && s->sharded)
        return false;
    tr_st_file *f = shard(s, e ? e->shard : 0, err);
    return f && tr_st_expect_float(f, name, ndim, shape, err);
}

bool tr_stset_read_block(tr_stset *s, const char *name, int64_t r0, int64_t nr, int64_t c0, int64_t nc, float *dst,
                         int64_t ldd, tr_err *err)
{
    const tr_stset_entry *e = entry(s, name, err);
    if (!e && s->sharded)
        return false;
    tr_st_file *f = shard(s, e ? e->shard : 0, err);
    return f && tr_st_read_block(f, name, r0, nr, c0, nc, dst, ldd, err);
}
