/*
 * tr_tokens.c - the language model's token inputs, loss and logits output in
 * the runtime (see tr_tokens.h). Token ids are int32 and live in the arena
 * as int32 (an arena slot is 4 bytes whatever its type): rank (i, j, k) holds
 * the ids of the q row blocks of its depth layer (rows q*k*R .. q*k*R + q*R of
 * the [batch*seq] tokens: the embedding's reductions build all of them) and
 * the targets of its own row block h = i + q*k. A file is checked whole on
 * rank 0 (dtype '<i4', shape [batch, seq], every id in [0, vocab)) and the
 * verdict broadcast, so a bad id gives one message naming the file, the
 * index and the value on every run, and nothing is written. On the megatron
 * scheme (q = 1, k = 0, io rows = every token) every rank holds all ids and
 * targets and the logits of its vocab block r.
 */
#include "tr_tokens.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr_npy.h"
#include "tr_safetensors.h"
#include "tr_synth.h"

const tr_lm_desc *tr_lm(void)
{
    static const tr_lm_desc none; /* a block stack: vocab 0, no reductions in the forward */
    return &tr_lm_class ? &tr_lm_class : &none;
}

int tr_lm_vocab(void)
{
    return tr_lm()->vocab;
}

int tr_lm_parse_arg(tr_lm_opts *o, int argc, char **argv, int *a, tr_err *err)
{
    const char *s = argv[*a];
    const char **dst = !strcmp(s, "--tokens") ? &o->tokens : !strcmp(s, "--targets") ? &o->targets
                       : !strcmp(s, "--logits-out") ? &o->logits_out : NULL;
    if (!dst)
        return 0;
    if (*a + 1 >= argc) {
        tr_fail(err, "%s needs a file name (see --help)", s);
        return -1;
    }
    const char *val = argv[*a + 1];
    if (val[0] == '-') {
        tr_fail(err, "%s needs a file name, not the option %s (see --help); to name a file that starts with '-', "
                     "write ./%s", s, val, val);
        return -1;
    }
    *dst = val;
    *a += 1;
    return 1;
}

bool tr_lm_check_opts(const tr_lm_opts *o, tr_err *err)
{
    if (tr_lm_vocab() == 0 && (o->tokens || o->targets || o->logits_out)) {
        tr_fail(err, "--tokens, --targets and --logits-out need a language model: this program was generated "
                     "without model.vocab (a stack of blocks on hidden states; use --input); add vocab and positions "
                     "to the spec's model table and regenerate (docs/MODEL.md)");
        return false;
    }
    return true;
}

bool tr_lm_check_outputs(const tr_lm_opts *o, tr_err *err)
{
    return !o->logits_out || tr_st_check_output(o->logits_out, "--logits-out", err);
}

void tr_lm_zero_pad(const tr_rank_desc *d, float *H)
{
    for (int p = 0; p < d->nparams; p++) {
        const tr_param *pr = &d->params[p];
        if (strcmp(pr->name, "wte.weight") != 0)
            continue;
        int real = pr->npieces > 0 ? pr->piece[0].nr : 0; /* rows of this vocab block below vocab */
        /* the weights and, in training, the AdamW moments: a resumed run loads only the real rows of both */
        /* (optimizer.shard: the moments hold a slice, zero from the start, and their pad stays zero) */
        int moments = tr_model.mode && pr->shard == 0;
        long long offs[3] = {pr->offset, moments ? pr->m_offset : -1, moments ? pr->v_offset : -1};
        for (int w = 0; w < 3; w++)
            for (long long r = real; r < pr->rows && offs[w] >= 0; r++)
                memset(H + offs[w] + r * pr->cols, 0, (size_t)pr->cols * sizeof(float));
    }
}

/* Rank 0: is path an int32 [batch, seq] .npy with every id in [0, vocab)? */
static bool check_ids(const char *path, const char *what, tr_err *err)
{
    tr_npy f;
    if (!tr_npy_open_i32(&f, path, err))
        return false;
    int64_t shape[2] = {tr_model.batch, tr_model.seq};
    bool ok = tr_npy_expect_shape(&f, 2, shape, what, "batch, seq", err);
    if (ok) {
        const unsigned char *p = f.map + f.data_off;
        long long n = (long long)tr_model.batch * tr_model.seq;
        for (long long e = 0; e < n; e++) {
            int32_t v;
            memcpy(&v, p + 4 * e, 4);
            if (v < 0 || v >= tr_lm_vocab()) {
                tr_fail(err, "%s: %s[%lld, %lld] = %d is not a token id: every id must be in [0, %d) (model.vocab = "
                             "%d); nothing was run",
                        path, what, e / tr_model.seq, e % tr_model.seq, (int)v, tr_lm_vocab(), tr_lm_vocab());
                ok = false;
                break;
            }
        }
    }
    tr_npy_close(&f);
    return ok;
}

/* ids of tokens [r0, r0 + n) of the [batch*seq] file (already validated) or synthetic ones */
static bool read_ids(const char *path, const char *name, uint64_t seed, long long r0, int n, int32_t *dst,
                     tr_err *err)
{
    if (!path) {
        float *u = malloc((size_t)(n > 0 ? n : 1) * sizeof *u);
        if (!u)
            return tr_fail(err, "out of memory");
        /* row-major over [batch*seq, 1]: element e = token index */
        tr_synth_block(name, seed, 1, r0, n, 0, 1, u, 1);
        for (int e = 0; e < n; e++) {
            long long id = (long long)floor(((double)u[e] + 1.0) * 0.5 * tr_lm_vocab());
            dst[e] = (int32_t)(id < 0 ? 0 : id >= tr_lm_vocab() ? tr_lm_vocab() - 1 : id);
        }
        free(u);
        return true;
    }
    tr_npy f;
    if (!tr_npy_open_i32(&f, path, err))
        return false;
    memcpy(dst, f.map + f.data_off + 4 * r0, (size_t)n * 4);
    tr_npy_close(&f);
    return true;
}

bool tr_lm_load_ids(const tr_rank_desc *d, const tr_lm_opts *o, uint64_t seed, float *H)
{
    tr_err err = {{0}};
    bool ok = true;
    if (d->rank == 0)
        ok = (!o->tokens || check_ids(o->tokens, "tokens", &err)) && (!o->targets || check_ids(o->targets, "targets", &err));
    int v = ok;
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!v) {
        if (d->rank == 0)
            fprintf(stderr, "%s\n", err.msg);
        return false;
    }
    int R = d->io_rows, q = tr_model.q;
    /* pipeline stages: the tokens on the first stage, the targets on the last (offset -1 where a stage has none) */
    ok = (tr_lm()->tok_offset < 0 ||
          read_ids(o->tokens, "tokens", seed, (long long)q * d->k * R, q * R, (int32_t *)(H + tr_lm()->tok_offset),
                   &err)) &&
         (tr_lm()->tgt_offset < 0 ||
          read_ids(o->targets, "targets", seed, d->io_r0, R, (int32_t *)(H + tr_lm()->tgt_offset), &err));
    int all = 0;
    v = ok;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok)
        fprintf(stderr, "rank %d: %s\n", d->rank, err.msg);
    return all == 1;
}

bool tr_lm_counts_loss(const tr_rank_desc *d)
{
    /* tesseract: ranks (i, 0, k) hold every row block once; megatron: every rank holds every token, rank 0 counts */
    /* pipeline stages: the last stage's (the only one with a loss buffer) */
    return tr_lm()->loss_offset >= 0 && (tr_model.scheme == 1 ? d->rank == 0 : d->j == 0);
}

double tr_lm_mean_loss(const tr_rank_desc *d, const float *H)
{
    double local = 0, sum = 0;
    if (tr_lm_counts_loss(d))
        for (int r = 0; r < d->io_rows; r++)
            local += H[tr_lm()->loss_offset + r];
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / ((double)tr_model.batch * tr_model.seq);
}

bool tr_lm_write_logits(const tr_rank_desc *d, const char *path, const float *H, tr_err *err)
{
    int R = d->io_rows, vq = tr_lm()->vq, V = tr_lm_vocab(), p = tr_model.p;
    long long blk = (long long)R * vq, T = (long long)tr_model.batch * tr_model.seq;
    /* the rows and vocab block of this rank's logits: (h, j) on tesseract, (every token, r) on megatron */
    /* and whether it holds logits at all (pipeline stages: the last stage's ranks only; the others send zeros) */
    const int holds = tr_lm()->logits_offset >= 0;
    int where[3] = {d->io_r0, tr_model.scheme == 1 ? d->i : d->j, holds}, *wall = NULL;
    float *all = NULL, *out = NULL, *none = holds ? NULL : calloc((size_t)(blk > 0 ? blk : 1), sizeof *none);
    int okalloc = holds || none;
    if (d->rank == 0) {
        all = malloc((size_t)(blk * p) * sizeof *all);
        wall = malloc((size_t)(3 * p) * sizeof *wall);
        out = malloc((size_t)(T * V) * sizeof *out);
        okalloc = okalloc && all && wall && out;
    }
    MPI_Allreduce(MPI_IN_PLACE, &okalloc, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!okalloc) {
        free(all);
        free(wall);
        free(out);
        free(none);
        return tr_fail(err, "%s: out of memory gathering the logits on rank 0 (%lld x %d floats)", path, T, V);
    }
    MPI_Gather(where, 3, MPI_INT, wall, 3, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(holds ? H + tr_lm()->logits_offset : none, (int)blk, MPI_FLOAT, all, (int)blk, MPI_FLOAT, 0,
               MPI_COMM_WORLD);
    free(none);
    bool ok = true;
    if (d->rank == 0) {
        for (int r = 0; r < p; r++) {
            if (!wall[3 * r + 2])
                continue;
            int r0 = wall[3 * r], v0 = wall[3 * r + 1] * vq;
            int nv = V - v0 < vq ? V - v0 : vq;
            for (int t = 0; t < R && nv > 0; t++)
                memcpy(out + (long long)(r0 + t) * V + v0, all + blk * r + (long long)t * vq, (size_t)nv * sizeof *out);
        }
        int64_t shape[3] = {tr_model.batch, tr_model.seq, V};
        ok = tr_npy_write_atomic(path, 3, shape, out, err);
    }
    free(all);
    free(wall);
    free(out);
    int v = ok;
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v == 1;
}

/* ---- sampling of generation (tr_tokens.h) ------------------------------------------------------------------------ */

static uint64_t sample_mix(uint64_t z) /* splitmix64's finaliser: a bijection that scatters every input bit */
{
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double tr_sample_gumbel(uint64_t seed, uint64_t sequence, uint64_t position, uint64_t id)
{
    uint64_t h = sample_mix(sample_mix(sample_mix(sample_mix(seed) ^ sequence) ^ position) ^ id);
    double u = ((double)(h >> 12) + 0.5) * 0x1p-52; /* in (0, 1), exact: 52 bits and a half, never 0 or 1 */
    return -log(-log(u));
}

typedef struct sample_cand {
    float v;
    int32_t id; /* INT32_MAX: a pad slot (a block with fewer valid ids than slots) */
} sample_cand;

static int sample_cand_cmp(const void *pa, const void *pb) /* descending logit, then ascending id */
{
    const sample_cand *a = pa, *b = pb;
    if (a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

bool tr_sample_rows(MPI_Comm row, int j, const float *lg, int rows, int vq, int vocab, const int *seq, const int *pos,
                    const tr_sample_opts *so, int32_t *chosen)
{
    int nvalid = vocab - j * vq;
    nvalid = nvalid < 0 ? 0 : nvalid > vq ? vq : nvalid;
    double T = so->temperature;
    if (!so->top_k && so->top_p >= 1) { /* every id kept: each block's Gumbel-max, then the max over the row */
        struct {
            double v;
            int i;
        } *pr = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *pr);
        if (!pr)
            return false;
        for (int r = 0; r < rows; r++) {
            const float *l = lg + (long)r * vq;
            pr[r].v = -INFINITY;
            pr[r].i = INT32_MAX;
            for (int k = 0; k < nvalid; k++) { /* ascending ids, strictly greater: the lower id of a tie */
                double z = (double)l[k] / T + tr_sample_gumbel(so->seed, (uint64_t)seq[r], (uint64_t)pos[r],
                                                               (uint64_t)(j * vq + k));
                if (z > pr[r].v) {
                    pr[r].v = z;
                    pr[r].i = j * vq + k;
                }
            }
        }
        MPI_Allreduce(MPI_IN_PLACE, pr, rows, MPI_DOUBLE_INT, MPI_MAXLOC, row);
        for (int r = 0; r < rows; r++)
            chosen[r] = pr[r].i;
        free(pr);
        return true;
    }
    /* top-k and/or top-p: the global top K by logit is among the union of each block's top min(K, vq) */
    int K = so->top_k ? (so->top_k < vocab ? so->top_k : vocab) : vocab, kl = K < vq ? K : vq, nm;
    MPI_Comm_size(row, &nm);
    sample_cand *mine = malloc((size_t)rows * kl * sizeof *mine), *all = malloc((size_t)nm * rows * kl * sizeof *all);
    sample_cand *tmp = malloc((size_t)(vq > nm * kl ? vq : nm * kl) * sizeof *tmp);
    double *pz = malloc((size_t)K * sizeof *pz);
    bool ok = mine && all && tmp && pz;
    for (int r = 0; ok && r < rows; r++) {
        for (int k = 0; k < nvalid; k++)
            tmp[k] = (sample_cand){lg[(long)r * vq + k], j * vq + k};
        qsort(tmp, (size_t)nvalid, sizeof *tmp, sample_cand_cmp);
        for (int c = 0; c < kl; c++)
            mine[(long)r * kl + c] = c < nvalid ? tmp[c] : (sample_cand){-INFINITY, INT32_MAX};
    }
    int okall = ok;
    MPI_Allreduce(MPI_IN_PLACE, &okall, 1, MPI_INT, MPI_MIN, row);
    if (okall)
        MPI_Allgather(mine, (int)(rows * kl * sizeof *mine), MPI_BYTE, all, (int)(rows * kl * sizeof *mine), MPI_BYTE,
                      row);
    for (int r = 0; okall && r < rows; r++) {
        int n = 0;
        for (int m = 0; m < nm; m++)
            for (int c = 0; c < kl; c++) {
                sample_cand e = all[((long)m * rows + r) * kl + c];
                if (e.id != INT32_MAX)
                    tmp[n++] = e;
            }
        qsort(tmp, (size_t)n, sizeof *tmp, sample_cand_cmp); /* every member: the same list in the same order */
        n = n < K ? n : K;
        double sum = 0, zmax = (double)tmp[0].v / T;
        for (int c = 0; c < n; c++)
            sum += pz[c] = exp((double)tmp[c].v / T - zmax);
        if (so->top_p < 1) { /* the smallest prefix whose probability reaches top_p */
            double cum = 0;
            int keep = n;
            for (int c = 0; c < n; c++) {
                cum += pz[c] / sum;
                if (cum >= so->top_p) {
                    keep = c + 1;
                    break;
                }
            }
            n = keep;
        }
        double best = -INFINITY;
        int32_t id = INT32_MAX;
        for (int c = 0; c < n; c++) {
            double z = (double)tmp[c].v / T +
                       tr_sample_gumbel(so->seed, (uint64_t)seq[r], (uint64_t)pos[r], (uint64_t)tmp[c].id);
            if (z > best || (z == best && tmp[c].id < id)) {
                best = z;
                id = tmp[c].id;
            }
        }
        chosen[r] = id;
    }
    free(mine);
    free(all);
    free(tmp);
    free(pz);
    return okall != 0;
}
