/*
 * hf_config.c - tessgen --from-hf (see hf_config.h).
 *
 * Design: one pass over the members of config.json's top-level object, each
 * key looked up in one table that says what the key is to tessgen: a
 * dimension of the block stack, a switch of the block math with the one value
 * tessgen computes, a dropout probability, a key that only matters outside the
 * blocks (not used), or a key that marks a model tessgen cannot run. Keys the
 * table does not know are accepted and listed as such in the printed spec
 * (save_pretrained writes many generic PretrainedConfig keys, and refusing
 * every unknown one would refuse real checkpoints). Every problem is recorded
 * before returning, so one run names them all. Missing optional keys take
 * GPT2Config's defaults; the dimensions and model_type are required, as
 * save_pretrained always writes them.
 *
 * The GELU: runtime/tr_kernels.c and tests/ref/tessref.py compute the tanh
 * approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), which is
 * transformers' "gelu_new" and, the same formula, "gelu_pytorch_tanh". Other
 * activations ("gelu" is the exact erf form) are refused.
 *
 * reorder_and_upcast_attn = true makes transformers scale Q K^T inside the
 * product and compute it in float32: in float32 that changes only the order of
 * one multiplication (a rounding difference, well inside the 1e-4 the tests
 * allow), so it is accepted.
 */
#include "hf_config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "infile.h"
#include "luaval.h" /* TG_NAME_MAX */
#include "tr_json.h"

#define HF_CONFIG_MAX_BYTES (16L << 20) /* a GPT-2 config.json is about 1 KB */
#define HF_DUP_NAMED 8                  /* repeated keys named one by one; the rest counted */

typedef enum hf_kind {
    K_MODEL_TYPE,
    K_N_LAYER,
    K_N_EMBD,
    K_N_HEAD,
    K_N_POSITIONS,
    K_N_INNER,
    K_ACTIVATION,
    K_EPS,
    K_SCALE_WEIGHTS,   /* must be true */
    K_SCALE_INV_LAYER, /* must be false */
    K_CROSS_ATTENTION, /* must be false */
    K_REORDER_UPCAST,  /* either (fp32: same math) */
    K_DROPOUT,         /* attn_pdrop, resid_pdrop: inside the blocks */
    K_PRUNED_HEADS,    /* must be empty */
    K_VOCAB,           /* vocab_size: the whole model's vocabulary */
    K_TIE,             /* tie_word_embeddings: must be true for the whole model (tessgen's head is tied) */
    K_REFUSED,         /* present at all: a model tessgen cannot run */
    K_NOT_USED,        /* outside the blocks */
} hf_kind;

static const struct {
    const char *key;
    hf_kind kind;
    const char *why; /* K_REFUSED: why */
} hf_keys[] = {
    {"model_type", K_MODEL_TYPE, NULL},
    {"n_layer", K_N_LAYER, NULL},
    {"n_embd", K_N_EMBD, NULL},
    {"n_head", K_N_HEAD, NULL},
    {"n_positions", K_N_POSITIONS, NULL},
    {"n_inner", K_N_INNER, NULL},
    {"activation_function", K_ACTIVATION, NULL},
    {"layer_norm_epsilon", K_EPS, NULL},
    {"scale_attn_weights", K_SCALE_WEIGHTS, NULL},
    {"scale_attn_by_inverse_layer_idx", K_SCALE_INV_LAYER, NULL},
    {"add_cross_attention", K_CROSS_ATTENTION, NULL},
    {"reorder_and_upcast_attn", K_REORDER_UPCAST, NULL},
    {"attn_pdrop", K_DROPOUT, NULL},
    {"resid_pdrop", K_DROPOUT, NULL},
    {"pruned_heads", K_PRUNED_HEADS, NULL},
    {"auto_map", K_REFUSED,
     "the model is defined by its own Python code (trust_remote_code), whose math tessgen cannot check"},
    {"quantization_config", K_REFUSED, "the weights are quantized; tessgen reads F32 or BF16 weights"},
    /* not used: embeddings, the heads, tokenizer ids, generation and training settings, bookkeeping */
    {"vocab_size", K_VOCAB, NULL},
    {"n_ctx", K_NOT_USED, NULL},
    {"embd_pdrop", K_NOT_USED, NULL},
    {"bos_token_id", K_NOT_USED, NULL},
    {"eos_token_id", K_NOT_USED, NULL},
    {"pad_token_id", K_NOT_USED, NULL},
    {"initializer_range", K_NOT_USED, NULL},
    {"summary_type", K_NOT_USED, NULL},
    {"summary_use_proj", K_NOT_USED, NULL},
    {"summary_activation", K_NOT_USED, NULL},
    {"summary_proj_to_labels", K_NOT_USED, NULL},
    {"summary_first_dropout", K_NOT_USED, NULL},
    {"use_cache", K_NOT_USED, NULL},
    {"task_specific_params", K_NOT_USED, NULL},
    {"architectures", K_NOT_USED, NULL},
    {"transformers_version", K_NOT_USED, NULL},
    {"torch_dtype", K_NOT_USED, NULL},
    {"tie_word_embeddings", K_TIE, NULL},
    {"_name_or_path", K_NOT_USED, NULL},
    {"gradient_checkpointing", K_NOT_USED, NULL},
    {"output_attentions", K_NOT_USED, NULL},
    {"output_hidden_states", K_NOT_USED, NULL},
    {"return_dict", K_NOT_USED, NULL},
    {"id2label", K_NOT_USED, NULL},
    {"label2id", K_NOT_USED, NULL},
    {"prefix", K_NOT_USED, NULL},
    {"_attn_implementation", K_NOT_USED, NULL},
    {"attn_implementation", K_NOT_USED, NULL},
};
enum { NKEYS = sizeof hf_keys / sizeof hf_keys[0] };

/* What the config says, with GPT2Config's defaults for the optional keys. */
typedef struct hf_model {
    int n_layer, n_embd, n_head, n_positions, n_inner; /* n_inner 0: null, 4 * n_embd */
    int vocab;   /* vocab_size; 0: absent */
    bool untied; /* tie_word_embeddings: false */
    double eps;
    double attn_pdrop, resid_pdrop;
    bool reorder;
    bool seen[NKEYS];
} hf_model;

/* Text of a key or string value for messages and comments: printable ASCII, others as '?', at most 60. */
static void put_text(tg_sb *b, const char *s, size_t len)
{
    size_t n = len > 60 ? 60 : len;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        tg_sb_printf(b, "%c", c >= 32 && c < 127 && c != '"' && c != '\\' ? c : '?');
    }
    if (len > n)
        tg_sb_puts(b, "...");
}

/* The shortest %g text that reads back as v. */
static void put_double(tg_sb *b, double v)
{
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    tg_sb_puts(b, buf);
}

/* A JSON value as short text: numbers and literals as they are, strings quoted, containers abbreviated. */
static void put_value(tg_sb *b, const tr_json_node *v)
{
    switch (v->type) {
    case TR_JSON_NULL: tg_sb_puts(b, "null"); break;
    case TR_JSON_TRUE: tg_sb_puts(b, "true"); break;
    case TR_JSON_FALSE: tg_sb_puts(b, "false"); break;
    case TR_JSON_NUMBER:
        if (v->is_int)
            tg_sb_printf(b, "%lld", (long long)v->ival);
        else
            put_double(b, v->num);
        break;
    case TR_JSON_STRING:
        tg_sb_puts(b, "\"");
        put_text(b, v->str, v->str_len);
        tg_sb_puts(b, "\"");
        break;
    case TR_JSON_ARRAY: tg_sb_puts(b, v->count ? "[...]" : "[]"); break;
    case TR_JSON_OBJECT: tg_sb_puts(b, v->count ? "{...}" : "{}"); break;
    }
}

/* "PATH: key = value " into a fresh buffer, for the start of a message about member m */
static const char *head(tg_sb *b, const char *path, const tr_json_node *m)
{
    b->len = 0;
    if (b->s)
        b->s[0] = '\0';
    tg_sb_printf(b, "%s: ", path);
    put_text(b, m->key, m->key_len);
    tg_sb_puts(b, " = ");
    put_value(b, m);
    return b->s;
}

/* A positive int from member m, else a message. */
static bool get_count(const char *path, const tr_json_node *m, int *out, tg_sb *h, tg_err *err)
{
    if (m->type != TR_JSON_NUMBER || !m->is_int || m->ival < 1 || m->ival > INT_MAX)
        return tg_fail(err, "%s must be a positive integer (at most %d): it is a dimension of the model; repair the "
                            "config (save_pretrained writes integers)",
                       head(h, path, m), INT_MAX);
    *out = (int)m->ival;
    return true;
}

static bool get_bool(const char *path, const tr_json_node *m, bool *out, tg_sb *h, tg_err *err)
{
    if (m->type != TR_JSON_TRUE && m->type != TR_JSON_FALSE)
        return tg_fail(err, "%s must be true or false; repair the config", head(h, path, m));
    *out = m->type == TR_JSON_TRUE;
    return true;
}

static bool get_prob(const char *path, const tr_json_node *m, double *out, tg_sb *h, tg_err *err)
{
    if (m->type != TR_JSON_NUMBER || !(m->num >= 0 && m->num <= 1))
        return tg_fail(err, "%s must be a probability, a number from 0 to 1; repair the config", head(h, path, m));
    *out = m->num;
    return true;
}

/* Check one member of the top-level object; record what it says in md, and unused keys in the lists. */
static void check_member(const char *path, const tr_json_node *m, int k, hf_model *md,
                         tg_sb *h, tg_err *err)
{
    bool b = false;
    switch (hf_keys[k].kind) {
    case K_MODEL_TYPE:
        if (m->type != TR_JSON_STRING || strcmp(m->str, "gpt2") != 0 || m->str_len != 4)
            tg_fail(err, "%s is not \"gpt2\": tessgen computes GPT-2 blocks only; pass the directory of a GPT-2 "
                         "checkpoint",
                    head(h, path, m));
        break;
    case K_N_LAYER: get_count(path, m, &md->n_layer, h, err); break;
    case K_N_EMBD: get_count(path, m, &md->n_embd, h, err); break;
    case K_N_HEAD: get_count(path, m, &md->n_head, h, err); break;
    case K_N_POSITIONS: get_count(path, m, &md->n_positions, h, err); break;
    case K_VOCAB: get_count(path, m, &md->vocab, h, err); break;
    case K_TIE:
        if (get_bool(path, m, &b, h, err))
            md->untied = !b;
        break;
    case K_N_INNER:
        if (m->type == TR_JSON_NULL)
            md->n_inner = 0;
        else
            get_count(path, m, &md->n_inner, h, err);
        break;
    case K_ACTIVATION:
        if (m->type != TR_JSON_STRING ||
            (strcmp(m->str, "gelu_new") != 0 && strcmp(m->str, "gelu_pytorch_tanh") != 0) ||
            strlen(m->str) != m->str_len)
            tg_fail(err, "%s is not computed by tessgen: its kernels compute GELU's tanh approximation, "
                         "activation_function \"gelu_new\" or \"gelu_pytorch_tanh\" (\"gelu\" is the exact erf form, "
                         "a different function); tessgen cannot run this model yet",
                    head(h, path, m));
        break;
    case K_EPS:
        if (m->type != TR_JSON_NUMBER || !(m->num > 0) || !isfinite(m->num))
            tg_fail(err, "%s must be a positive number: it is the LayerNorm epsilon of every block; repair the config",
                    head(h, path, m));
        else
            md->eps = m->num;
        break;
    case K_SCALE_WEIGHTS:
        if (get_bool(path, m, &b, h, err) && !b)
            tg_fail(err, "%s is not computed by tessgen: its attention always divides the scores by sqrt(head "
                         "dim), this model does not; tessgen cannot run this model",
                    head(h, path, m));
        break;
    case K_SCALE_INV_LAYER:
        if (get_bool(path, m, &b, h, err) && b)
            tg_fail(err, "%s is not computed by tessgen: this model also divides the attention scores of block l "
                         "by l + 1, tessgen's attention does not; tessgen cannot run this model",
                    head(h, path, m));
        break;
    case K_CROSS_ATTENTION:
        if (get_bool(path, m, &b, h, err) && b)
            tg_fail(err, "%s is not computed by tessgen: its blocks have no cross-attention (an encoder-decoder "
                         "GPT-2 has extra tensors and math per block); tessgen cannot run this model",
                    head(h, path, m));
        break;
    case K_REORDER_UPCAST: get_bool(path, m, &md->reorder, h, err); break;
    case K_DROPOUT:
        get_prob(path, m, !strcmp(hf_keys[k].key, "attn_pdrop") ? &md->attn_pdrop : &md->resid_pdrop, h, err);
        break;
    case K_PRUNED_HEADS:
        if ((m->type != TR_JSON_OBJECT && m->type != TR_JSON_NULL) || (m->type == TR_JSON_OBJECT && m->count > 0))
            tg_fail(err, "%s is not computed by tessgen: pruned heads leave blocks of different widths, tessgen's "
                         "blocks all have n_head heads; tessgen cannot run this model",
                    head(h, path, m));
        break;
    case K_REFUSED: tg_fail(err, "%s is refused: %s", head(h, path, m), hf_keys[k].why); break;
    case K_NOT_USED: break;
    }
}

/* The spec's name: the directory's last component, characters outside [A-Za-z0-9_.-] as '_'. */
static void dir_name(const char *dir, char *out, size_t cap)
{
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    size_t start = len;
    while (start > 0 && dir[start - 1] != '/')
        start--;
    size_t n = 0;
    for (size_t i = start; i < len && n + 1 < cap && n < TG_NAME_MAX; i++) {
        char c = dir[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '.' || c == '-';
        out[n++] = ok ? c : '_';
    }
    out[n] = '\0';
    if (n == 0 || !strcmp(out, ".") || !strcmp(out, ".."))
        snprintf(out, cap, "hf-model");
}

/* Read path whole into *text (NUL-terminated), else a message. */
static bool read_config(const char *path, char **text, size_t *len, tg_err *err)
{
    if (!tg_infile_read(path, "cannot read",
                        "; --from-hf reads the config.json that save_pretrained writes beside model.safetensors",
                        (size_t)HF_CONFIG_MAX_BYTES, text, len, err))
        return false;
    if (*len > (size_t)HF_CONFIG_MAX_BYTES) {
        free(*text);
        *text = NULL;
        return tg_fail(err, "%s: larger than 16 MiB: not a model's config.json; pass the save_pretrained directory",
                       path);
    }
    return true;
}

/* The key names of members that kind selects (K_NOT_USED, or -1: keys not in the table), with values,
 * as comment lines of the spec. */
static void list_keys(tg_sb *out, const tr_json_doc *doc, const tr_json_node *root, int want, const char *title)
{
    tg_sb line;
    tg_sb_init(&line);
    int n = 0;
    for (const tr_json_node *m = tr_json_first(doc, root); m; m = tr_json_next(doc, m)) {
        int k = 0;
        while (k < NKEYS && (strlen(hf_keys[k].key) != m->key_len || strcmp(hf_keys[k].key, m->key) != 0))
            k++;
        if ((want < 0) != (k == NKEYS) || (want >= 0 && hf_keys[k].kind != (hf_kind)want))
            continue;
        if (n++ == 0)
            tg_sb_printf(out, "-- %s:\n", title);
        size_t before = line.len;
        put_text(&line, m->key, m->key_len);
        tg_sb_puts(&line, " = ");
        put_value(&line, m);
        if (line.len > 90 && before > 0) {
            tg_sb_printf(out, "--   %.*s\n", (int)(before - 2), line.s);
            memmove(line.s, line.s + before, line.len - before + 1);
            line.len -= before;
        }
        tg_sb_puts(&line, ", ");
    }
    if (line.len > 2)
        tg_sb_printf(out, "--   %.*s\n", (int)(line.len - 2), line.s);
    tg_sb_free(&line);
}

/* Duplicate keys in O(n log n) whatever the keys (a hash could be attacked with colliding keys): the members
 * sorted by (key, position), a member equal to its predecessor is a repeat. The scan that compared each member
 * with every earlier one took 43 s for 80 000 keys, hours for a config at the 16 MiB cap. */
typedef struct hf_member {
    const char *key;
    size_t len, pos;
} hf_member;

static int hf_member_cmp(const void *a, const void *b)
{
    const hf_member *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, n);
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* *repeat[i] for the i-th member of root: its key appeared at an earlier member. One message per repeat at most,
 * named in document order by the caller. */
static bool hf_repeated_keys(const tr_json_doc *doc, const tr_json_node *root, bool **repeat, size_t *n)
{
    size_t count = root->count > 0 ? (size_t)root->count : 0;
    hf_member *ms = malloc((count ? count : 1) * sizeof *ms);
    *repeat = calloc(count ? count : 1, sizeof **repeat);
    if (!ms || !*repeat) {
        free(ms);
        free(*repeat);
        *repeat = NULL;
        return false;
    }
    size_t i = 0;
    for (const tr_json_node *m = tr_json_first(doc, root); m && i < count; m = tr_json_next(doc, m), i++)
        ms[i] = (hf_member){m->key, m->key_len, i};
    qsort(ms, i, sizeof *ms, hf_member_cmp);
    for (size_t j = 1; j < i; j++)
        if (ms[j].len == ms[j - 1].len && !memcmp(ms[j].key, ms[j - 1].key, ms[j].len))
            (*repeat)[ms[j].pos] = true;
    free(ms);
    *n = i;
    return true;
}

/* The optimizer table GPT-2 is usually trained with, as lines of the printed spec: live in --mode train (without
 * it tessgen trains at a constant lr = 1e-3 with no warmup or clipping, and a pretrained model's loss spikes),
 * commented out otherwise, ready for mode = "train". Every key is one the spec's optimizer table accepts
 * (docs/TRAINING.md). */
static void hf_optimizer_block(tg_sb *o, bool train)
{
    static const char *const lines[] = {
        "-- AdamW as GPT-2 is usually trained (the GPT-3 paper's small-model settings, as nanoGPT and llm.c use",
        "-- them): linear warmup, cosine decay to lr/10, gradient clipping at norm 1.0, weight decay 0.1 on the",
        "-- 2-D weights (docs/TRAINING.md). Without this table tessgen trains at a constant lr = 1e-3 with no",
        "-- warmup or clipping. Set decay_steps to your run's steps minus warmup; lower lr to fine-tune.",
        "optimizer = { lr = 6e-4, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1,",
        "              warmup = 700, decay_steps = 18000, lr_min = 6e-5, clip = 1.0 },",
    };
    if (!train)
        tg_sb_puts(o, "  -- for mode = \"train\", uncomment the optimizer table below:\n");
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        tg_sb_printf(o, "  %s%s\n", train || lines[i][0] == '-' ? "" : "-- ", lines[i]);
}

bool tg_hf_spec(const tg_hf_request *r, tg_sb *spec, tg_sb *warn, tg_err *err)
{
    struct stat st;
    if (stat(r->dir, &st) != 0)
        return tg_fail(err, "%s: cannot read: %s; --from-hf takes the directory save_pretrained wrote (config.json, "
                            "model.safetensors)",
                       r->dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return tg_fail(err, "%s: not a directory; --from-hf takes the directory save_pretrained wrote (config.json, "
                            "model.safetensors), e.g. --from-hf out/gpt2",
                       r->dir);
    char path[4200];
    snprintf(path, sizeof path, "%s%sconfig.json", r->dir, r->dir[strlen(r->dir) - 1] == '/' ? "" : "/");
    char *text = NULL;
    size_t len = 0;
    if (!read_config(path, &text, &len, err))
        return false;
    bool ok = tg_hf_spec_text(r, path, text, len, spec, warn, err);
    free(text);
    return ok;
}

bool tg_hf_spec_text(const tg_hf_request *r, const char *path, const char *text, size_t len, tg_sb *spec, tg_sb *warn,
                     tg_err *err)
{
    struct stat st;
    tr_json_doc doc;
    tr_err terr = {{0}};
    if (!tr_json_parse(&doc, text, len, path, &terr))
        return tg_fail(err, "%s; repair it, or save the model again with save_pretrained", terr.msg);
    const tr_json_node *root = tr_json_root(&doc);
    tg_sb h;
    tg_sb_init(&h);
    bool ok = true;
    if (root->type != TR_JSON_OBJECT) {
        ok = tg_fail(err, "%s: the top level is %s %s, not an object: not a model config; pass the save_pretrained "
                          "directory",
                     path, strchr("aeiou", tr_json_type_name(root->type)[0]) ? "an" : "a",
                     tr_json_type_name(root->type));
        goto out;
    }

    hf_model md = {.eps = 1e-5};
    int problems = err->count;
    size_t nmembers = 0;
    bool *repeat = NULL; /* repeat[i]: member i's key is the second occurrence of a key */
    if (!hf_repeated_keys(&doc, root, &repeat, &nmembers)) {
        ok = tg_fail(err, "%s: out of memory checking %d keys for duplicates", path, root->count);
        goto out;
    }
    size_t ndup = 0, mi = 0;
    for (const tr_json_node *m = tr_json_first(&doc, root); m; m = tr_json_next(&doc, m), mi++) {
        if (mi < nmembers && repeat[mi] && ++ndup <= HF_DUP_NAMED) {
            h.len = 0;
            tg_sb_puts(&h, "\"");
            put_text(&h, m->key, m->key_len);
            tg_fail(err, "%s: key %s\" appears twice: which value holds is not defined; keep one", path, h.s);
        }
        int k = 0;
        while (k < NKEYS && (strlen(hf_keys[k].key) != m->key_len || strcmp(hf_keys[k].key, m->key) != 0))
            k++;
        if (k == NKEYS)
            continue;
        md.seen[k] = true;
        check_member(path, m, k, &md, &h, err);
    }
    free(repeat);
    if (ndup > HF_DUP_NAMED)
        tg_fail(err, "%s: %zu more keys appear more than once; keep one of each", path, ndup - HF_DUP_NAMED);
    for (int k = 0; k < NKEYS; k++)
        if (hf_keys[k].kind <= K_N_POSITIONS && !md.seen[k])
            tg_fail(err, "%s: %s is missing: tessgen needs model_type, n_layer, n_embd, n_head and n_positions "
                         "(save_pretrained always writes them); repair the config",
                    path, hf_keys[k].key);
    if (err->count > problems) {
        ok = false;
        goto out;
    }
    int ffn = md.n_inner ? md.n_inner : 0;
    if (!ffn && md.n_embd > INT_MAX / 4) {
        ok = tg_fail(err, "%s: n_inner = null means 4 * n_embd = 4 * %d, beyond %d; repair the config", path,
                     md.n_embd, INT_MAX);
        goto out;
    }
    if (!ffn)
        ffn = 4 * md.n_embd;
    if (r->seq > md.n_positions) {
        ok = tg_fail(err, "%s: --seq %d is more than n_positions = %d: the model has position embeddings for %d "
                          "tokens only; use --seq %d or less",
                     path, r->seq, md.n_positions, md.n_positions, md.n_positions);
        goto out;
    }

    /* the whole GPT2LMHeadModel unless --blocks-only, or megatron (which plans the block stack only) */
    bool whole = !r->blocks_only && r->scheme != TG_SCHEME_MEGATRON;
    if (whole && !md.vocab) {
        ok = tg_fail(err, "%s: vocab_size is missing: the whole model needs it (save_pretrained always writes it); "
                          "repair the config, or add --blocks-only for the stack of blocks alone",
                     path);
        goto out;
    }
    if (whole && md.untied) {
        ok = tg_fail(err, "%s: \"tie_word_embeddings\": false: this model's LM head has its own weights, and tessgen's "
                          "head is tied to wte (the same matrix); tessgen cannot run this model's head. Add "
                          "--blocks-only for the stack of blocks alone",
                     path);
        goto out;
    }
    char name[TG_NAME_MAX + 1];
    dir_name(r->dir, name, sizeof name);
    tg_sb text_out;
    tg_sb_init(&text_out);
    tg_sb_printf(&text_out, "-- %s: %s of the Hugging Face model in ", name,
                 whole ? "the whole GPT-2 (GPT2LMHeadModel)" : "GPT-2 blocks");
    put_text(&text_out, r->dir, strlen(r->dir));
    tg_sb_puts(&text_out, ", printed by tessgen --from-hf from its config.json.\n");
    tg_sb_puts(&text_out, "-- layers = n_layer, hidden = n_embd, heads = n_head, ");
    tg_sb_printf(&text_out, "ffn = %s, eps = layer_norm_epsilon%s;\n",
                 md.n_inner ? "n_inner" : "4 * n_embd (n_inner is null)",
                 whole ? ", vocab = vocab_size, positions = n_positions" : "");
    tg_sb_printf(&text_out, "-- mesh, seq, batch%s and mode from the command line.\n",
                 whole && r->vocab_align ? ", vocab_align (--vocab-align)" : "");
    /* the weights: model.safetensors, or a sharded checkpoint's index (the runtime reads either, or the directory) */
    char one[4300], index[4300];
    const char *sep = r->dir[strlen(r->dir) - 1] == '/' ? "" : "/";
    snprintf(one, sizeof one, "%s%smodel.safetensors", r->dir, sep);
    snprintf(index, sizeof index, "%s%smodel.safetensors.index.json", r->dir, sep);
    bool sharded = stat(one, &st) != 0 && stat(index, &st) == 0;
    tg_sb_puts(&text_out, "-- Then: tessgen THIS.lua -o OUT && ninja -C OUT && OUT/run --weights ");
    put_text(&text_out, r->dir, strlen(r->dir));
    tg_sb_puts(&text_out, sharded ? "/model.safetensors.index.json (sharded)\n" : "/model.safetensors\n");
    if (whole)
        tg_sb_puts(&text_out, "-- Computed: wte, wpe, the blocks, ln_f and the LM head tied to wte (lm_head.weight, "
                              "if present, is not read); inputs are token ids (run --tokens, --data).\n");
    else
        tg_sb_printf(&text_out, "-- Computed: the blocks only (%s): wte, wpe, ln_f and the LM head are not; their "
                                "tensors are ignored and the input is the hidden states entering block 0.\n",
                     r->blocks_only ? "--blocks-only" : "the megatron scheme plans the block stack only");
    if (md.reorder)
        tg_sb_puts(&text_out, "-- reorder_and_upcast_attn = true: in float32 it changes only the order of one "
                              "scaling (rounding), so it is accepted.\n");
    list_keys(&text_out, &doc, root, K_NOT_USED, "config keys not used (outside the blocks, or settings)");
    list_keys(&text_out, &doc, root, -1, "config keys not known to tessgen (not used; assumed not to change the blocks)");
    tg_sb_printf(&text_out, "-- attn_pdrop = %g, resid_pdrop = %g: tessgen has no dropout; its forward is "
                            "transformers' eval mode%s.\n",
                 md.attn_pdrop, md.resid_pdrop,
                 r->mode == TG_TRAIN && (md.attn_pdrop > 0 || md.resid_pdrop > 0) ? ", and it trains without dropout"
                                                                                  : "");
    if (r->mode == TG_TRAIN && (md.attn_pdrop > 0 || md.resid_pdrop > 0)) {
        tg_sb_printf(warn, "tessgen: %s: attn_pdrop = %g, resid_pdrop = %g: tessgen trains without dropout, so its "
                           "steps differ from transformers' training of this config (its eval-mode forward is the "
                           "same); set them to 0 in the config to silence this\n",
                     path, md.attn_pdrop, md.resid_pdrop);
    }
    tg_sb_printf(&text_out, "return {\n  name = \"%s\",\n", name);
    /* --mesh Q,D is q and d, not the mesh's shape: say how many ranks that makes where the mesh is printed */
    if (r->scheme == TG_SCHEME_MEGATRON)
        tg_sb_printf(&text_out, "  scheme = \"megatron\",\n  mesh = { p = %d },  -- --mesh P is p: %d rank%s\n", r->p,
                     r->p, r->p == 1 ? "" : "s");
    else {
        long long ranks = (long long)r->q * r->q * r->d;
        tg_sb_printf(&text_out, "  mesh = { q = %d, d = %d },  -- --mesh Q,D is q and d: the mesh [%d,%d,%d], q*q*d = %lld rank%s\n",
                     r->q, r->d, r->q, r->q, r->d, ranks, ranks == 1 ? "" : "s");
    }
    tg_sb_printf(&text_out, "  model = { layers = %d, hidden = %d, heads = %d, ffn = %d, seq = %d, batch = %d, eps = ",
                 md.n_layer, md.n_embd, md.n_head, ffn, r->seq, r->batch);
    put_double(&text_out, md.eps);
    if (whole)
        tg_sb_printf(&text_out, ",\n            vocab = %d, positions = %d", md.vocab, md.n_positions);
    if (whole && r->vocab_align) /* --vocab-align: each rank's vocab block padded to a multiple of it */
        tg_sb_printf(&text_out, ", vocab_align = %d", r->vocab_align);
    if (r->mode == TG_GENERATE)
        tg_sb_printf(&text_out, ",\n            context = %d", r->context);
    tg_sb_puts(&text_out, " },\n");
    if (r->mode == TG_TRAIN)
        tg_sb_puts(&text_out, "  mode = \"train\",\n");
    if (r->mode == TG_GENERATE) /* seq: the longest prompt; context: prompt + new tokens (the KV cache) */
        tg_sb_puts(&text_out, "  mode = \"generate\",  -- seq is the longest prompt, context the KV cache: prompt + new tokens\n");
    hf_optimizer_block(&text_out, r->mode == TG_TRAIN);
    tg_sb_puts(&text_out, "}\n");

    /* the same loader as `tessgen SPEC`: a mesh, seq or batch that does not fit the model is refused here */
    tg_spec loaded;
    tg_err lerr = {{0}, 0};
    char chunk[4300];
    snprintf(chunk, sizeof chunk, "%s (as a spec)", path);
    if (!tg_spec_load_string(chunk, text_out.s, &loaded, &lerr)) {
        char mesh[64];
        if (r->scheme == TG_SCHEME_MEGATRON)
            snprintf(mesh, sizeof mesh, "megatron p=%d", r->p);
        else
            snprintf(mesh, sizeof mesh, "[%d,%d,%d]", r->q, r->q, r->d);
        char ctx[48] = "";
        if (r->mode == TG_GENERATE)
            snprintf(ctx, sizeof ctx, ", context %d", r->context);
        ok = tg_fail(err, "%s: the model (layers = n_layer = %d, hidden = n_embd = %d, heads = n_head = %d, ffn = %d) "
                          "does not fit mesh %s, seq %d, batch %d%s; the spec loader says:",
                     path, md.n_layer, md.n_embd, md.n_head, ffn, mesh, r->seq, r->batch, ctx);
        tg_fail(err, "%s", lerr.msg);
        err->count += lerr.count - 1;
    } else {
        tg_sb_putn(spec, text_out.s, text_out.len);
    }
    tg_sb_free(&text_out);
out:
    tg_sb_free(&h);
    tr_json_free(&doc);
    return ok;
}
