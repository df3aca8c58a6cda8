/*
 * tr_main.c - the main of every generated program. It starts MPI, refuses a
 * world size that differs from the built mesh (with both numbers and the
 * command to run), loads this rank's shard of the weights and its block of the
 * input (or deterministic synthetic ones), runs the generated forward, and
 * gathers the output on rank 0, which writes it atomically.
 *
 * Input files are validated once, on rank 0 (every tensor present, F32, with
 * the expected shape; the input's shape), and the verdict is broadcast, so a
 * bad file gives one clear message and every rank exits with the same code.
 * The arena is filled with NaN before loading, so anything the schedule fails
 * to write shows up in the output.
 *
 * Exit codes: 0 ok, 1 bad input file or option, 2 wrong world size or usage,
 * 3 measured communication differs from the plan (--bytes).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr_backend.h"
#include "tr_ctx.h"
#include "tr_npy.h"
#include "tr_safetensors.h"
#include "tr_synth.h"

typedef struct tr_opts {
    const char *weights, *input, *output;
    uint64_t seed;
    int repeat;
    int bytes;
    int quiet;
} tr_opts;

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s [--weights W.safetensors] [--input X.npy] [--output Y.npy] [--seed N]\n"
            "          [--repeat N] [--bytes] [--quiet] [--help]\n"
            "Runs %s (mesh [%d,%d,%d], %d ranks; start it with the generated ./run or mpirun -np %d).\n"
            "  --weights F   Hugging Face GPT-2 names, F32 safetensors; each rank reads only its shard\n"
            "  --input F     float32 C-order .npy of shape [batch=%d, seq=%d, hidden=%d]\n"
            "  --output F    the output of the last block, same shape, written atomically by rank 0\n"
            "  --seed N      seed of the synthetic weights/input used when a file is not given (default 1)\n"
            "  --repeat N    run the forward N times after one warm-up and report the median time\n"
            "  --bytes       compare the elements each collective moved with the plan, per rank\n"
            "  --quiet       print only errors\n",
            prog, tr_model.name, tr_model.q, tr_model.q, tr_model.d, tr_model.p, tr_model.p, tr_model.batch,
            tr_model.seq, tr_model.hidden);
}

/* 0: run, 1: --help printed, -1: error in err */
static int parse_args(int argc, char **argv, tr_opts *o, tr_err *err)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->repeat = 0;
    for (int a = 1; a < argc; a++) {
        const char *s = argv[a];
        const char *val = (a + 1 < argc) ? argv[a + 1] : NULL;
        if (!strcmp(s, "--help") || !strcmp(s, "-h"))
            return 1;
        if (!strcmp(s, "--bytes")) {
            o->bytes = 1;
        } else if (!strcmp(s, "--quiet")) {
            o->quiet = 1;
        } else if (!strcmp(s, "--weights") || !strcmp(s, "--input") || !strcmp(s, "--output") ||
                   !strcmp(s, "--seed") || !strcmp(s, "--repeat")) {
            if (!val) {
                tr_fail(err, "%s needs a value (see --help)", s);
                return -1;
            }
            a++;
            if (!strcmp(s, "--weights"))
                o->weights = val;
            else if (!strcmp(s, "--input"))
                o->input = val;
            else if (!strcmp(s, "--output"))
                o->output = val;
            else {
                char *end;
                errno = 0;
                unsigned long long v = strtoull(val, &end, 10);
                if (errno || *end || !*val || val[0] == '-') {
                    tr_fail(err, "%s %s: expected a non-negative integer", s, val);
                    return -1;
                }
                if (!strcmp(s, "--seed"))
                    o->seed = v;
                else if (v < 1 || v > 1000000) {
                    tr_fail(err, "--repeat %s: expected 1..1000000", val);
                    return -1;
                } else
                    o->repeat = (int)v;
            }
        } else {
            tr_fail(err, "unknown option %s (see --help)", s);
            return -1;
        }
    }
    return 0;
}

static bool all_ok(bool ok)
{
    int v = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == 1;
}

/* Rank 0 decided ok (and may have a message): share the verdict. */
static bool root_ok(bool ok)
{
    int v = ok ? 1 : 0;
    MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return v == 1;
}

static void shape_of(const tr_param *p, int64_t *shape)
{
    shape[0] = p->full[0];
    shape[1] = p->full[1];
}

/* Rank 0: is every tensor of the model in the file, F32, with the right shape? */
static bool check_weights(const char *path, tr_err *err)
{
    tr_st_file f;
    if (!tr_st_open(&f, path, err))
        return false;
    const tr_rank_desc *d = tr_model.ranks[0];
    bool ok = true;
    int bad = 0;
    for (int i = 0; i < d->nparams; i++) {
        int64_t shape[2];
        shape_of(&d->params[i], shape);
        tr_err e = {{0}};
        if (!tr_st_expect_f32(&f, d->params[i].name, d->params[i].ndim, shape, &e)) {
            ok = false;
            if (bad++ < 8)
                tr_fail(err, "%s", e.msg);
        }
    }
    if (bad > 8)
        tr_fail(err, "%s: ... and %d more tensor problems", path, bad - 8);
    tr_st_close(&f);
    return ok;
}

static bool load_weights(const tr_rank_desc *d, const tr_opts *o, float *A, tr_err *err)
{
    if (!o->weights) {
        for (int i = 0; i < d->nparams; i++) {
            const tr_param *p = &d->params[i];
            int64_t full_cols = p->ndim == 1 ? p->full[0] : p->full[1];
            for (int k = 0; k < p->npieces; k++) {
                const tr_piece *pc = &p->piece[k];
                tr_synth_block(p->name, o->seed, full_cols, pc->r0, pc->nr, pc->c0, pc->nc,
                               A + p->offset + pc->dst_col, p->cols);
            }
        }
        return true;
    }
    tr_st_file f;
    if (!tr_st_open(&f, o->weights, err))
        return false;
    bool ok = true;
    for (int i = 0; i < d->nparams && ok; i++) {
        const tr_param *p = &d->params[i];
        for (int k = 0; k < p->npieces && ok; k++) {
            const tr_piece *pc = &p->piece[k];
            ok = tr_st_read_block(&f, p->name, pc->r0, pc->nr, pc->c0, pc->nc, A + p->offset + pc->dst_col, p->cols,
                                  err);
        }
    }
    tr_st_close(&f);
    return ok;
}

static bool check_input(const char *path, tr_err *err)
{
    tr_npy f;
    if (!tr_npy_open(&f, path, err))
        return false;
    int64_t shape[3] = {tr_model.batch, tr_model.seq, tr_model.hidden};
    bool ok = tr_npy_expect_shape(&f, 3, shape, "input", "(batch, seq, hidden)", err);
    tr_npy_close(&f);
    return ok;
}

static bool load_input(const tr_rank_desc *d, const tr_opts *o, float *x, tr_err *err)
{
    if (!o->input) {
        tr_synth_block("input", o->seed, tr_model.hidden, d->io_r0, d->io_rows, d->io_c0, d->io_cols, x, d->io_cols);
        return true;
    }
    tr_npy f;
    if (!tr_npy_open(&f, o->input, err))
        return false;
    bool ok = tr_npy_read_block(&f, d->io_r0, d->io_rows, d->io_c0, d->io_cols, x, d->io_cols, err);
    tr_npy_close(&f);
    return ok;
}

/* Gather every rank's residual-stream block on rank 0 and write [batch, seq, hidden]. */
static bool write_output(const tr_rank_desc *d, const char *path, const float *x, tr_err *err)
{
    int rank = d->rank, p = tr_model.p;
    long blk = (long)d->io_rows * d->io_cols;
    float *all = NULL, *full = NULL;
    bool ok = true;
    if (rank == 0) {
        all = malloc((size_t)blk * (size_t)p * sizeof *all);
        full = malloc((size_t)tr_model.batch * tr_model.seq * tr_model.hidden * sizeof *full);
        if (!all || !full)
            ok = false;
    }
    if (!root_ok(ok)) {
        free(all);
        free(full);
        return tr_fail(err, "%s: out of memory gathering the output on rank 0", path);
    }
    MPI_Gather(x, (int)blk, MPI_FLOAT, all, (int)blk, MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        long total = (long)tr_model.batch * tr_model.seq * tr_model.hidden;
        for (long e = 0; e < total; e++)
            full[e] = NAN; /* poison: a block nobody sent stays NaN */
        for (int r = 0; r < p; r++) {
            const tr_rank_desc *rd = tr_model.ranks[r];
            for (int i = 0; i < rd->io_rows; i++)
                memcpy(full + (long)(rd->io_r0 + i) * tr_model.hidden + rd->io_c0,
                       all + (long)r * blk + (long)i * rd->io_cols, (size_t)rd->io_cols * sizeof *full);
        }
        long bad = 0;
        for (long e = 0; e < total; e++)
            bad += !isfinite(full[e]);
        if (bad)
            fprintf(stderr, "warning: the output has %ld non-finite values of %ld\n", bad, total);
        int64_t shape[3] = {tr_model.batch, tr_model.seq, tr_model.hidden};
        ok = tr_npy_write_atomic(path, 3, shape, full, err);
    }
    free(all);
    free(full);
    return root_ok(ok);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Per rank: measured elements per group against the plan. Returns false on any difference. */
static bool report_bytes(tr_ctx *c, int quiet)
{
    const tr_rank_desc *d = c->desc;
    long long mine[24], *all = NULL;
    for (int g = 0; g < TR_NGROUPS; g++) {
        mine[g] = c->bcast_recv[g];
        mine[4 + g] = c->bcast_sent[g];
        mine[8 + g] = c->allreduce[g];
        mine[12 + g] = d->plan_bcast_recv[g];
        mine[16 + g] = d->plan_bcast_sent[g];
        mine[20 + g] = d->plan_allreduce[g];
    }
    if (d->rank == 0)
        all = malloc(sizeof mine * (size_t)tr_model.p);
    MPI_Gather(mine, 24, MPI_LONG_LONG, all, 24, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    int mismatch = 0;
    if (d->rank == 0) {
        if (!quiet)
            printf("bytes per forward (float32 payload), measured / planned:\n"
                   "%5s %23s %23s %23s %23s %23s\n",
                   "rank", "bcast recv row", "bcast recv col", "bcast sent row", "bcast sent col",
                   "allreduce row");
        for (int r = 0; r < tr_model.p; r++) {
            long long *v = all + 24 * r;
            int bad = 0;
            for (int k = 0; k < 12; k++)
                bad |= v[k] != v[12 + k];
            mismatch |= bad;
            if (!quiet || bad)
                printf("%5d %11lld/%-11lld %11lld/%-11lld %11lld/%-11lld %11lld/%-11lld %11lld/%-11lld%s\n", r,
                       4 * v[0], 4 * v[12], 4 * v[1], 4 * v[13], 4 * v[4], 4 * v[16], 4 * v[5], 4 * v[17], 4 * v[8],
                       4 * v[20], bad ? "  MISMATCH" : "");
        }
        if (mismatch)
            fprintf(stderr, "error: measured communication differs from the plan (MISMATCH rows above)\n");
        else if (!quiet)
            printf("bytes: every rank moved exactly the planned bytes\n");
        free(all);
    }
    MPI_Bcast(&mismatch, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return !mismatch;
}

static void report_timing(tr_ctx *c, double *reps, int n)
{
    qsort(reps, (size_t)n, sizeof *reps, cmp_double);
    double kinds[TR_NKINDS], kmax[TR_NKINDS];
    for (int k = 0; k < TR_NKINDS; k++)
        kinds[k] = c->seconds[k] / n;
    MPI_Reduce(kinds, kmax, TR_NKINDS, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (c->desc->rank != 0)
        return;
    printf("forward: median %.6f s over %d runs (min %.6f, max %.6f)\n", reps[n / 2], n, reps[0], reps[n - 1]);
    printf("per forward, slowest rank, by step kind:\n");
    for (int k = 0; k < TR_NKINDS; k++)
        printf("  %-10s %.6f s\n", tr_kind_name((tr_kind)k), kmax[k]);
    printf("forward_seconds_median=%.9f\n", reps[n / 2]);
    for (int k = 0; k < TR_NKINDS; k++)
        printf("%s_seconds=%.9f\n", tr_kind_name((tr_kind)k), kmax[k]);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *prog = argc > 0 ? argv[0] : "model";

    if (size != tr_model.p) {
        if (rank == 0)
            fprintf(stderr,
                    "%s: this program was built for mesh [%d,%d,%d] = %d ranks but was started with %d rank%s.\n"
                    "Run it with %d ranks: the generated ./run next to bin/, or mpirun -np %d %s ..., or srun -n %d "
                    "%s ...;\nfor %d ranks, regenerate with a mesh of %d ranks (tessgen spec.lua).\n",
                    prog, tr_model.q, tr_model.q, tr_model.d, tr_model.p, size, size == 1 ? "" : "s", tr_model.p,
                    tr_model.p, prog, tr_model.p, prog, size, size);
        MPI_Finalize();
        return 2;
    }

    tr_opts o;
    tr_err err = {{0}};
    int pa = parse_args(argc, argv, &o, &err);
    if (pa != 0) {
        if (rank == 0) {
            if (pa > 0)
                usage(stdout, prog);
            else
                fprintf(stderr, "%s: %s\n", prog, err.msg);
        }
        MPI_Finalize();
        return pa > 0 ? 0 : 2;
    }

    const tr_rank_desc *d = tr_model.ranks[rank];
    if (rank == 0 && !o.quiet)
        printf("%s: mesh [%d,%d,%d] = %d ranks, %d layers; generated by tessgen %s from %s\n", tr_model.name,
               tr_model.q, tr_model.q, tr_model.d, tr_model.p, tr_model.layers, tr_model.tessgen_version,
               tr_model.spec_path);

    int rc = 0;
    tr_ctx ctx;
    bool ok = tr_ctx_init(&ctx, d, &err);
    if (!all_ok(ok)) {
        if (!ok)
            fprintf(stderr, "%s\n", err.msg);
        MPI_Finalize();
        return 2;
    }

    /* H: the host arena the files are loaded into; A: the arena the generated code runs on
     * (the same memory on the CPU backend, a device copy on a GPU backend) */
    float *H = NULL, *A = NULL;
    size_t bytes = (size_t)d->arena_elems * sizeof(float);
    ok = posix_memalign((void **)&H, 64, bytes ? bytes : 64) == 0;
    if (!all_ok(ok)) {
        if (!ok)
            fprintf(stderr, "rank %d: cannot allocate the %zu-byte arena\n", rank, bytes);
        MPI_Finalize();
        return 1;
    }
    for (long long e = 0; e < d->arena_elems; e++)
        H[e] = NAN; /* poison: whatever the plan forgets to write reaches the output as NaN */

    /* weights: rank 0 validates the whole file, then every rank reads its shard */
    if (o.weights) {
        ok = rank == 0 ? check_weights(o.weights, &err) : true;
        if (!root_ok(ok)) {
            if (rank == 0)
                fprintf(stderr, "%s\n", err.msg);
            rc = 1;
            goto out;
        }
    }
    ok = load_weights(d, &o, H, &err);
    if (!all_ok(ok)) {
        if (!ok)
            fprintf(stderr, "rank %d: %s\n", rank, err.msg);
        rc = 1;
        goto out;
    }
    if (o.input) {
        ok = rank == 0 ? check_input(o.input, &err) : true;
        if (!root_ok(ok)) {
            if (rank == 0)
                fprintf(stderr, "%s\n", err.msg);
            rc = 1;
            goto out;
        }
    }
    float *xh = H + d->x_offset; /* [io_rows, io_cols], host side */
    ok = load_input(d, &o, xh, &err);
    if (!all_ok(ok)) {
        if (!ok)
            fprintf(stderr, "rank %d: %s\n", rank, err.msg);
        rc = 1;
        goto out;
    }
    ok = tr_backend_init(&ctx, &err) && (A = tr_backend_arena(&ctx, H, d->arena_elems, &err)) != NULL;
    if (!all_ok(ok)) {
        if (!ok)
            fprintf(stderr, "rank %d: %s backend: %s\n", rank, tr_backend_name(), err.msg);
        rc = 1;
        goto out;
    }
    float *x = A + d->x_offset; /* the same block in the run arena */
    long long xn = (long long)d->io_rows * d->io_cols;

    if (o.repeat > 0) {
        /* the forward updates x in place: restore the input block from the host arena before each run */
        double *reps = malloc((size_t)o.repeat * sizeof *reps);
        if (!reps) {
            fprintf(stderr, "rank %d: out of memory\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        d->forward(&ctx, A); /* warm-up */
        tr_ctx_reset_counts(&ctx);
        ctx.timing = 1;
        for (int r = 0; r < o.repeat; r++) {
            tr_backend_upload(&ctx, x, xh, xn);
            tr_backend_sync(&ctx);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = tr_now();
            d->forward(&ctx, A);
            tr_backend_sync(&ctx);
            MPI_Barrier(MPI_COMM_WORLD);
            reps[r] = tr_now() - t0;
        }
        ctx.timing = 0;
        report_timing(&ctx, reps, o.repeat);
        tr_backend_upload(&ctx, x, xh, xn);
        free(reps);
    }
    tr_ctx_reset_counts(&ctx);
    d->forward(&ctx, A);
    tr_backend_sync(&ctx);
    if (o.bytes && !report_bytes(&ctx, o.quiet))
        rc = 3;
    if (o.output) {
        tr_backend_download(&ctx, xh, x, xn);
        if (!write_output(d, o.output, xh, &err)) {
            if (rank == 0)
                fprintf(stderr, "%s\n", err.msg);
            rc = 1;
        } else if (rank == 0 && !o.quiet) {
            printf("wrote %s [%d, %d, %d]\n", o.output, tr_model.batch, tr_model.seq, tr_model.hidden);
        }
    }
out:
    tr_backend_free(&ctx, A ? A : H, H);
    tr_ctx_free(&ctx);
    MPI_Finalize();
    return rc;
}
