/*
 * fingerprint.c - the schedule fingerprint (see fingerprint.h). Fields are
 * hashed one by one, never as raw structs, so padding and pointer values never
 * reach the hash: strings bytewise (FNV-1a) with their terminating NUL, so
 * "ab","c" and "a","bc" differ; numbers a 64-bit word at a time (the FNV
 * multiply and an xor-shift), which keeps hashing a 100-layer plan cheap.
 */
#include "fingerprint.h"

#include <stdio.h>
#include <string.h>

#include "template.h"
#include "version.h"

static void bytes(tg_fp *fp, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        fp->h = (fp->h ^ c[i]) * 0x100000001b3ULL;
}

static void str(tg_fp *fp, const char *s)
{
    bytes(fp, s ? s : "", s ? strlen(s) + 1 : 1);
}

/* a whole 64-bit word per multiply: the plan's numbers are most of what is hashed */
static void num(tg_fp *fp, long long v)
{
    fp->h = (fp->h ^ (unsigned long long)v) * 0x100000001b3ULL;
    fp->h ^= fp->h >> 29;
}

static void real(tg_fp *fp, double v)
{
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", v);
    str(fp, buf);
}

void tg_fp_init(tg_fp *fp, const tg_spec *s)
{
    fp->h = 0xcbf29ce484222325ULL;
    str(fp, "tessgen " TG_VERSION);
    fp->h = tg_templates_hash(fp->h);
    long long v[] = {s->q, s->d, s->layers, s->hidden, s->heads, s->ffn, s->seq, s->batch, s->dtype, s->mode, s->placement};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        num(fp, v[i]);
    if (s->scheme != TG_SCHEME_TESSERACT) { /* only then, so tesseract fingerprints are what they were */
        str(fp, "scheme");
        num(fp, s->scheme);
        num(fp, s->p);
    }
    if (s->attention != TG_ATTN_CUBLAS) { /* only then (its plan's attention scratch differs), as above */
        str(fp, "attention");
        num(fp, s->attention);
    }
    if (s->vocab > 0) { /* only then, so fingerprints of block stacks are what they were */
        str(fp, "lm");
        num(fp, s->vocab);
        num(fp, s->positions);
        if (s->vocab_align > 1) { /* only then, so fingerprints of unpadded language models are what they were */
            str(fp, "vocab_align");
            num(fp, s->vocab_align);
        }
    }
    real(fp, s->eps);
    real(fp, s->opt.lr);
    real(fp, s->opt.beta1);
    real(fp, s->opt.beta2);
    real(fp, s->opt.eps);
    real(fp, s->opt.weight_decay);
    /* the schedule and clipping only when a spec sets them, so other fingerprints are what they were */
    if (s->opt.warmup || s->opt.decay_steps || s->opt.lr_min != 0 || s->opt.clip != 0) {
        str(fp, "schedule");
        num(fp, s->opt.warmup);
        num(fp, s->opt.decay_steps);
        real(fp, s->opt.lr_min);
        real(fp, s->opt.clip);
    }
    if (s->mode == TG_TRAIN && s->microbatches > 1) { /* only when a spec has them, as the schedule */
        str(fp, "microbatches");
        num(fp, s->microbatches);
    }
    if (s->pp > 1) { /* pipeline stages: the split and the schedule (the stage programs' order of calls) */
        str(fp, "pipeline");
        num(fp, s->pp);
        num(fp, s->schedule);
        for (int k = 0; k < s->pp; k++)
            num(fp, s->stage_layers[k]);
    }
}

void tg_fp_class(tg_fp *fp, const tg_class_plan *cp)
{
    num(fp, cp->i);
    num(fp, cp->j);
    for (int i = 0; i < cp->nsteps; i++) {
        const tg_step *s = &cp->steps[i];
        long long v[] = {s->kind,   s->phase,    s->layer, s->t,      s->group,  s->group_size, s->root_local,
                         s->is_root, s->exact,   s->count, s->pin[0], s->pin[1], s->m,          s->n,
                         s->k,       s->lda,     s->ldb,   s->ldc,    s->transa, s->transb,     s->decay,
                         s->rows,    s->cols,    s->hidden, s->nseq,  s->seq,    s->heads,      s->hdim,
                         s->flops,   s->desc,    s->aux,   s->stream, s->wait,  s->signal, s->epi, s->fused};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
            num(fp, v[k]);
        if (s->kind == TG_STEP_COPY || s->ws) { /* the weight-stationary layout: where a copy reads and writes */
            str(fp, "copy/ws");
            num(fp, s->soff);
            num(fp, s->boff);
            num(fp, s->ws);
        }
        if (s->last_mb || s->again) { /* only then, so other fingerprints are what they were */
            str(fp, "once/again");
            num(fp, s->last_mb);
            num(fp, s->again);
        }
        if (s->zero_first) { /* a pipeline stage's embedding backward without the head: only then, as above */
            str(fp, "zero first");
            num(fp, s->count);
        }
        for (int k = 0; k < TG_STEP_MAXBUF; k++) {
            if (k >= 8 && s->buf[k] < 0) /* slots past the first eight only when used: fingerprints stay */
                continue;
            num(fp, s->buf[k]);
            num(fp, s->acc[k]);
        }
        real(fp, s->beta);
        real(fp, s->eps);
        str(fp, s->op);
        str(fp, s->label);
    }
    for (int i = 0; i < cp->nbufs; i++) {
        const tg_buf *b = &cp->bufs[i];
        str(fp, b->name);
        str(fp, b->what);
        long long v[] = {b->rows, b->cols, b->persistent, b->first, b->last, b->offset};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
            num(fp, v[k]);
    }
    for (int i = 0; i < cp->nparams; i++) {
        const tg_param *p = &cp->params[i];
        str(fp, p->name);
        long long v[] = {p->ndim, p->full[0], p->full[1], p->buf, p->grad, p->m, p->v, p->npieces};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
            num(fp, v[k]);
        for (int k = 0; k < p->npieces; k++) {
            long long w[] = {p->piece[k].r0, p->piece[k].nr, p->piece[k].c0, p->piece[k].nc, p->piece[k].dst_col};
            for (size_t x = 0; x < sizeof w / sizeof w[0]; x++)
                num(fp, w[x]);
        }
    }
    long long t[] = {cp->x_buf, cp->y_buf, cp->gx_buf, cp->arena_elems, cp->weight_elems};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        num(fp, t[k]);
}

void tg_fp_final(const tg_fp *fp, char out[17])
{
    snprintf(out, 17, "%016llx", fp->h);
}
