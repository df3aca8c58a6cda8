/*
 * tr_hfnames.c - the Hugging Face name conventions of a GPT-2 weights file
 * (tr_hfnames.h): which one a file uses, and the block index in a name. The
 * loader reads every block tensor under the file's one prefix; tensors outside
 * the blocks (wte, wpe, ln_f, lm_head) are not looked at.
 */
#include "tr_hfnames.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* The block of a name "h.<l>.<rest>" (l without leading zeros), or -1. */
long tr_hf_block_of(const char *name)
{
    if (strncmp(name, "h.", 2) != 0 || name[2] < '0' || name[2] > '9' || (name[2] == '0' && name[3] != '.'))
        return -1;
    long l = 0;
    const char *p = name + 2;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (l > (LONG_MAX - 9) / 10)
            return -1;
        l = l * 10 + (*p - '0');
    }
    return *p == '.' ? l : -1;
}

/* The block of a tensor name under the file's prefix ("" or TR_HF_LM_PREFIX), or -1. */
long tr_hf_block_under(const char *name, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(name, prefix, n) == 0 ? tr_hf_block_of(name + n) : -1;
}

/* Which convention does file f use for its block tensors? *prefix gets "" or TR_HF_LM_PREFIX. A file with
 * block tensors of both forms is refused, naming a tensor stored both ways if there is one, else one of
 * each form (tensors outside the blocks, such as wte, wpe, ln_f or lm_head, do not count). */
bool tr_hf_prefix(const tr_stset *f, const char **prefix, tr_err *err)
{
    const char *plain = NULL, *lm = NULL, *both = NULL;
    for (int i = 0; i < f->ntensors; i++) {
        const char *n = tr_stset_name(f, i);
        if (tr_hf_block_of(n) >= 0 && !plain)
            plain = n;
        if (tr_hf_block_under(n, TR_HF_LM_PREFIX) >= 0) {
            if (!lm)
                lm = n;
            if (!both && tr_stset_has(f, n + strlen(TR_HF_LM_PREFIX)))
                both = n;
        }
    }
    *prefix = lm ? TR_HF_LM_PREFIX : "";
    if (!plain || !lm)
        return true;
    if (both)
        return tr_fail(err, "%s: holds both %s and %s: a file is read either with GPT2LMHeadModel names "
                            "(transformer.h.<l>.*) or with GPT2Model names (h.<l>.*), and this one has the same tensor "
                            "under both; keep one form (e.g. export again with save_pretrained)",
                       f->path, both + strlen(TR_HF_LM_PREFIX), both);
    return tr_fail(err, "%s: mixes block tensor names with and without the \"transformer.\" prefix (e.g. %s and %s): "
                        "a file is read either with GPT2LMHeadModel names (transformer.h.<l>.*) or with GPT2Model "
                        "names (h.<l>.*); rename the tensors to one form (e.g. export again with save_pretrained)",
                   f->path, lm, plain);
}

/* prefix + name into buf (names are shorter than TR_ST_NAME_CAP, the prefix is short) */
const char *tr_hf_prefixed(char *buf, size_t cap, const char *prefix, const char *name)
{
    snprintf(buf, cap, "%s%s", prefix, name);
    return buf;
}

/* dimension k of tensor prefix + name, or -1 when the file lacks it or it has fewer dimensions */
static long dim_of(tr_stset *f, const char *prefix, const char *name, int k)
{
    char full[TR_ST_NAME_CAP + 32];
    const tr_st_tensor *t = tr_stset_tensor(f, tr_hf_prefixed(full, sizeof full, prefix, name));
    return t && t->ndim > k && k < 4 ? (long)t->shape[k] : -1;
}

void tr_hf_file_model(tr_stset *f, const char *prefix, tr_hf_model *m)
{
    long deepest = -1;
    for (int i = 0; i < f->ntensors; i++) {
        long l = tr_hf_block_under(tr_stset_name(f, i), prefix);
        if (l > deepest)
            deepest = l;
    }
    m->layers = deepest >= 0 ? deepest + 1 : -1;
    m->hidden = dim_of(f, prefix, "h.0.ln_1.weight", 0);
    m->ffn = dim_of(f, prefix, "h.0.mlp.c_fc.weight", 1);
    m->vocab = dim_of(f, prefix, "wte.weight", 0);
    m->positions = dim_of(f, prefix, "wpe.weight", 0);
    if (m->hidden < 0)
        m->hidden = dim_of(f, prefix, "wte.weight", 1);
}

const char *tr_hf_model_text(char *buf, size_t cap, const tr_hf_model *m)
{
    const char *what[5] = {"layers", "hidden", "ffn", "vocab", "positions"};
    const long v[5] = {m->layers, m->hidden, m->ffn, m->vocab, m->positions};
    size_t o = 0;
    buf[0] = '\0';
    for (int k = 0; k < 5 && o < cap; k++) {
        if (v[k] < 0)
            continue;
        int n = k == 0 || k == 4 ? snprintf(buf + o, cap - o, "%s%ld %s", o ? ", " : "", v[k], what[k])
                                 : snprintf(buf + o, cap - o, "%s%s %ld", o ? ", " : "", what[k], v[k]);
        if (n < 0)
            break;
        o += (size_t)n;
    }
    if (!o)
        snprintf(buf, cap, "no GPT-2 tensors");
    else if (m->vocab < 0 && o < cap)
        snprintf(buf + o, cap - o, " (blocks only, no embedding)");
    return buf;
}
