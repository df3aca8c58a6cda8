/*
 * tr_lmdata.c - feeds a language model's token buffers from token shards (see
 * tr_lmdata.h for the rows each rank reads; tr_data.c reads the shards,
 * tr_tokens.c owns the buffers). Every function that can fail on one rank ends
 * in a collective verdict, so all ranks stop together with one message.
 */
#include "tr_lmdata.h"

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr_backend.h"
#include "tr_ckpt.h"
#include "tr_tokens.h"

int tr_lmdata_parse_arg(tr_lmdata_opts *o, int argc, char **argv, int *a, tr_err *err)
{
    const char *s = argv[*a];
    int is_path = !strcmp(s, "--data") || !strcmp(s, "--val-data");
    int is_num = !strcmp(s, "--val-every") || !strcmp(s, "--val-batches");
    if (!is_path && !is_num)
        return 0;
    if (*a + 1 >= argc) {
        tr_fail(err, "%s needs a value (see --help)", s);
        return -1;
    }
    const char *val = argv[*a + 1];
    if (is_path) {
        if (val[0] == '-') {
            tr_fail(err, "%s needs a file, list or directory of token shards, not the option %s (see --help)", s,
                    val);
            return -1;
        }
        *(!strcmp(s, "--data") ? &o->data : &o->val_data) = val;
    } else {
        char *end;
        errno = 0;
        long v = strtol(val, &end, 10);
        if (errno || end == val || *end || v < 1 || v > 100000000) {
            tr_fail(err, "%s %s: expected an integer 1..100000000 (%s)", s, val,
                    !strcmp(s, "--val-every") ? "steps between validations" : "batches per validation");
            return -1;
        }
        *(!strcmp(s, "--val-every") ? &o->val_every : &o->val_batches) = (int)v;
    }
    *a += 1;
    return 1;
}

bool tr_lmdata_check_opts(const tr_lmdata_opts *o, int steps, int have_tokens, tr_err *err)
{
    if (!o->data && !o->val_data && !o->val_every && !o->val_batches)
        return true;
    if (tr_lm_vocab() == 0)
        return tr_fail(err, "--data and --val-data feed a language model: this program was generated without "
                            "model.vocab (a stack of blocks on hidden states); add vocab and positions to the spec's "
                            "model table and regenerate (docs/MODEL.md)");
    if (!o->data || !steps || !tr_model.mode)
        return tr_fail(err, "--data trains on token shards, and --val-data, --val-every and --val-batches measure "
                            "that training: give --data P with --steps N to a training program (mode = \"train\")");
    if (have_tokens)
        return tr_fail(err, "--data and --tokens/--targets exclude each other: --data reads each step's batch from the "
                            "shards; to train on one fixed batch, give --tokens and --targets without --data");
    if ((o->val_every || o->val_batches) && !o->val_data)
        return tr_fail(err, "--val-every and --val-batches say how to measure the validation loss: add "
                            "--val-data P (token shards not trained on)");
    return true;
}

/* Collective verdict: true when ok on every rank; the first failing rank's message is printed once. */
static bool verdict(bool ok, const tr_err *err)
{
    int mine = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all)
        return true;
    int rank, first = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int me = ok ? 1 << 30 : rank;
    MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == first)
        fprintf(stderr, "%s\n", err->msg);
    return false;
}

bool tr_lmdata_open(tr_lmdata *ld, const tr_lmdata_opts *o, const tr_rank_desc *d)
{
    memset(ld, 0, sizeof *ld);
    tr_err err = {{0}};
    bool ok = tr_data_open(&ld->train, o->data, tr_model.batch, tr_model.seq, tr_lm_vocab(), &err);
    ld->have_train = ok;
    if (ok && o->val_data) {
        ok = tr_data_open(&ld->val, o->val_data, tr_model.batch, tr_model.seq, tr_lm_vocab(), &err);
        ld->have_val = ok;
    }
    if (!verdict(ok, &err)) {
        tr_lmdata_close(ld);
        return false;
    }
    if (ld->have_val) {
        long long per_epoch = tr_data_epoch_batches(&ld->val), want = o->val_batches ? o->val_batches : 4;
        ld->val_batches = (int)(want < per_epoch ? want : per_epoch);
    }
    (void)d;
    char pos[TR_DATA_POS_CAP];
    tr_data_pos p = tr_data_tell(&ld->train);
    if (tr_data_pos_format(&p, pos, sizeof pos) >= 0)
        tr_ckpt_set_data_pos(pos);
    return true;
}

void tr_lmdata_close(tr_lmdata *ld)
{
    if (ld->have_train)
        tr_data_close(&ld->train);
    if (ld->have_val)
        tr_data_close(&ld->val);
    ld->have_train = ld->have_val = 0;
}

bool tr_lmdata_resume(tr_lmdata *ld, const char *pos, const tr_rank_desc *d, int quiet)
{
    if (!pos[0]) {
        if (d->rank == 0 && !quiet)
            printf("note: the checkpoint was written by a run without --data: reading %s from its first batch\n",
                   ld->train.pattern);
        return true;
    }
    tr_err err = {{0}};
    tr_data_pos p;
    bool ok = tr_data_pos_parse(pos, "the checkpoint's data_pos", &p, &err) && tr_data_restore(&ld->train, &p, &err);
    if (!verdict(ok, &err))
        return false;
    tr_ckpt_set_data_pos(pos);
    return true;
}

bool tr_lmdata_fill(tr_ctx *c, tr_data *dl, float *H, float *A)
{
    const tr_rank_desc *d = c->desc;
    int R = d->io_rows, S = tr_model.seq, q = tr_model.q;
    int nseq = R / S; /* R = nseq * S: batch % (q*d) == 0 is a spec rule */
    const tr_lm_desc *lm = tr_lm();
    bool has_tok = lm->tok_offset >= 0, has_tgt = lm->tgt_offset >= 0;
    int32_t *tok = has_tok ? (int32_t *)(H + lm->tok_offset) : NULL;
    int32_t *tgt = has_tgt ? (int32_t *)(H + lm->tgt_offset) : NULL;
    /* scratch for what a read returns and this rank does not keep: [q*R] int32 */
    int32_t *scratch = malloc((size_t)q * R * sizeof *scratch);
    tr_err err = {{0}};
    bool ok = scratch != NULL;
    if (!ok)
        tr_fail(&err, "rank %d: out of memory reading a batch", d->rank);
    /* pipeline stages: the tokens on the first stage, the targets on the last (offset -1 where a stage has none,
     * as tr_lm_load_ids reads --tokens/--targets); every stage reads from the same batch, the rows of its depth */
    /* tokens: the q row blocks of this depth's column group, sequences q*k*nseq .. (q*k + q)*nseq - 1 */
    ok = ok && (!has_tok || tr_data_read(dl, (int64_t)q * d->k * nseq, (int64_t)q * nseq, tok, scratch, &err));
    /* targets: this rank's own row block */
    ok = ok && (!has_tgt || tr_data_read(dl, d->io_r0 / S, nseq, scratch, tgt, &err));
    free(scratch);
    if (!verdict(ok, &err))
        return false;
    /* int32 ids travel as their 4-byte patterns: the upload copies bytes (without a wait: tr_backend.h) */
    if (has_tok)
        tr_backend_upload_batch(c, A + lm->tok_offset, H + lm->tok_offset, (long long)q * R);
    if (has_tgt)
        tr_backend_upload_batch(c, A + lm->tgt_offset, H + lm->tgt_offset, R);
    return true;
}

void tr_lmdata_next(tr_lmdata *ld)
{
    tr_data_next(&ld->train);
    char pos[TR_DATA_POS_CAP];
    tr_data_pos p = tr_data_tell(&ld->train);
    if (tr_data_pos_format(&p, pos, sizeof pos) >= 0)
        tr_ckpt_set_data_pos(pos);
}
