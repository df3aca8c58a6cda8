/*
 * tr_main.c - the main of every generated program. It starts MPI, refuses a
 * world size that differs from the built mesh (with both numbers and the
 * command to run), loads this rank's shard of the weights and its block of the
 * input (or deterministic synthetic ones), runs the generated forward, and
 * gathers the output on rank 0, which writes it atomically.
 *
 * Every output path is checked on rank 0 before any work (a temp file is
 * created and removed where the output will go), and input files are
 * validated once, on rank 0 (every tensor present, F32 or BF16, with the expected
 * shape, no block beyond the model's layers; the input's shape); the verdict
 * is broadcast, so a bad path or file gives one clear message and every rank
 * exits with the same code. Each rank then checks that the values it loaded
 * are finite (weights and every .npy input, in every mode: a NaN or an
 * infinity can only give non-finite results). The arena is filled with NaN
 * before loading, so anything the schedule fails to write shows up in the
 * output. Training stops at the first non-finite loss or gradient, naming the
 * step and the first tensor affected, and writes nothing (a periodic checkpoint
 * replaces the last only once the step after it is known finite).
 *
 * Training steps take the learning rate of the spec's schedule (tr_sched.h), clip
 * the gradients by their global norm when the spec asks (tr_clip.h), print one
 * log line each, and write and resume checkpoints (tr_ckpt.h); the logic lives
 * in those files, the loop only calls it.
 *
 * Before any step runs, every rank checks that it runs its own class's program
 * and that every rank's program was printed for the same schedule (the
 * fingerprint): a directory mixing two generations is refused, never run; and
 * rank 0 checks that schedule against the output's manifest.json, so programs
 * not rebuilt after tessgen ran again are refused with the command that rebuilds.
 *
 * Exit codes: 0 ok, 1 bad input file, option value or output path, 2 wrong
 * world size, usage, or programs that do not belong together, 3 measured
 * communication differs from the plan (--bytes), 4 replicas differ
 * (--replica-check), 5 training diverged (non-finite loss, gradient or weights;
 * nothing written).
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tr_backend.h"
#include "tr_bf16.h"
#include "tr_ckpt.h"
#include "tr_clip.h"
#include "tr_ctx.h"
#include "tr_gather.h"
#include "tr_hfnames.h"
#include "tr_hfout.h"
#include "tr_json.h"
#include "tr_lmdata.h"
#include "tr_npy.h"
#include "tr_safetensors.h"
#include "tr_sched.h"
#include "tr_stset.h"
#include "tr_synth.h"
#include "tr_tokens.h"
#include "tr_trace.h"

typedef struct tr_opts {
    const char *weights, *input, *output;
    const char *dy, *dx_out, *grads_out, *target, *weights_out; /* training */
    uint64_t seed;
    int repeat;
    int steps;
    int bytes;
    int replica_check;
    int timing; /* --timing: with --steps, report time per training step and per step kind */
    int quiet;
    int out_dtype;     /* --out-dtype: TR_ST_F32 or TR_ST_BF16, for --weights-out and --grads-out */
    int out_dtype_set; /* --out-dtype was given */
    const char *trace; /* --trace FILE (tr_trace.c) */
    const char *hf_out; /* --hf-out DIR (tr_hfout.c) */
    /* generation (mode = "generate"; docs/GENERATE.md): --generate, --prompt-tokens P.npy, --max-new N, --eos ID */
    int generate;
    int stream; /* --stream: each decode step's new ids on stdout as they come (rank 0) */
    const char *prompts;
    int max_new, eos;
    tr_sample_opts sample; /* --temperature, --top-k, --top-p (tr_tokens.h); its seed is --seed */
    int stats;         /* --stats (tr_trace.c) */
    int seed_set;      /* --seed was given (else a resumed run takes the checkpoint's) */
    const char *checkpoint_out, *resume; /* checkpoints (tr_ckpt.h) */
    int checkpoint_every;                /* also write --checkpoint-out every N steps; 0: at the end only */
    int reshard;                         /* --reshard: resume a checkpoint of another mesh or dtype */
    int ckpt_shards;                     /* --checkpoint-shards: --checkpoint-out C is a sharded checkpoint's directory */
    int data_change;                     /* --data-change: resume a checkpoint trained on other data */
    tr_lm_opts lm;     /* --tokens, --targets, --logits-out (tr_tokens.c; programs with a vocabulary) */
    tr_lmdata_opts data; /* --data, --val-data, --val-every, --val-batches (tr_lmdata.c) */
} tr_opts;

/* --help: written for the program it is printed by. A block stack (no model.vocab) runs on hidden states
 * (--input, --output; training on mean((y - target)^2)); a language model runs on token ids (--tokens,
 * --targets, --logits-out; training on the cross-entropy loss, --data shards); training options appear only
 * in a training program, --hf-out only for the whole model. */
static void usage(FILE *f, const char *prog)
{
    int lm = tr_lm_vocab() > 0, train = tr_model.mode == 1;
    fprintf(f, "usage: %s [options]   (start it with the generated ./run, or mpirun -np %d / srun --mpi=pmix -n %d)\n",
            prog, tr_model.p, tr_model.p);
    if (lm)
        fprintf(f, "Runs %s: the whole GPT-2 (token and position embeddings, %d blocks, ln_f, the LM head tied to the\n"
                   "token embedding, vocab %d, %d positions), %s,\nbatch %d x seq %d, mesh %s = %d ranks.\n",
                tr_model.name, tr_model.layers, tr_lm_vocab(), tr_lm()->positions,
                train ? "training (AdamW on the cross-entropy loss)" : "inference", tr_model.batch, tr_model.seq,
                tr_mesh_text(), tr_model.p);
    else
        fprintf(f, "Runs %s: a stack of %d transformer blocks on hidden states [batch=%d, seq=%d, hidden=%d] (no\n"
                   "embedding, no final layernorm, no LM head), %s, mesh %s = %d ranks.\n",
                tr_model.name, tr_model.layers, tr_model.batch, tr_model.seq, tr_model.hidden,
                train ? "training (AdamW on mean((y - target)^2))" : "inference", tr_mesh_text(), tr_model.p);
    fprintf(f, "\nInputs (each is synthetic, from --seed, when not given):\n");
    if (lm)
        fprintf(f, "  --weights F   Hugging Face GPT-2 names, safetensors of F32 or BF16 tensors (BF16 widened exactly):\n"
                   "                wte, wpe, h.<l>.*, ln_f (GPT2Model) or transformer.* (GPT2LMHeadModel; lm_head is\n"
                   "                tied to wte and not read); F = model.safetensors, a sharded checkpoint's\n"
                   "                model.safetensors.index.json, or the save_pretrained directory holding either\n"
                   "                (its config.json, when there, must describe this program's model)\n"
                   "  --tokens F    token ids, int32 .npy [batch=%d, seq=%d], every id in [0, %d)\n"
                   "  --targets F   target ids, the same form: inference prints the mean loss%s\n",
                tr_model.batch, tr_model.seq, tr_lm_vocab(), train ? "; --steps trains on them" : "");
    else
        fprintf(f, "  --weights F   Hugging Face GPT-2 block names, safetensors of F32 or BF16 tensors (BF16 widened\n"
                   "                exactly): h.<l>.* (GPT2Model) or transformer.h.<l>.* (GPT2LMHeadModel); a\n"
                   "                whole model's wte, wpe, ln_f and lm_head are not used by a block stack.\n"
                   "                F = model.safetensors, a sharded checkpoint's model.safetensors.index.json,\n"
                   "                or the save_pretrained directory holding either (its config.json, when there,\n"
                   "                must describe this program's model)\n"
                   "  --input F     float32 C-order .npy [batch=%d, seq=%d, hidden=%d]\n",
                tr_model.batch, tr_model.seq, tr_model.hidden);
    fprintf(f, "  --seed N      seed of the synthetic weights and inputs (default 1)\n");
    if (train && lm)
        fprintf(f, "  --data P      with --steps: train on token shards (llm.c .bin or int32 .npy; a file, a comma list\n"
                   "                or a directory), each step the next batch of batch*seq+1 tokens (docs/TRAINING.md)\n"
                   "  --val-data P  validation shards: the mean loss of the first --val-batches M (default 4) batches\n"
                   "                before the first step, every --val-every N steps and after the last\n");
    if (train) {
        fprintf(f, "\nTraining (lr %g, AdamW betas %g %g, weight decay %g; docs/TRAINING.md):\n", tr_model.lr,
                tr_model.beta1, tr_model.beta2, tr_model.weight_decay);
        if (lm)
            fprintf(f, "  --steps N     N AdamW steps on the cross-entropy loss of --tokens/--targets (one fixed batch)\n"
                       "                or of --data, printing 'step N loss L'\n"
                       "  --grads-out F without --steps: one backward of the loss; write every weight gradient\n");
        else
            fprintf(f, "  --steps N     N AdamW steps on mean((y - target)^2), printing the loss before each step\n"
                       "  --target F    the target, float32 [batch, seq, hidden] (default: synthetic from --seed)\n"
                       "  --dy F        instead of --steps: one forward and backward with the upstream gradient\n"
                       "                dL/dy [batch, seq, hidden]\n"
                       "  --dx-out F    with --dy: write dL/dx [batch, seq, hidden]\n"
                       "  --grads-out F with --dy: write every weight gradient (safetensors, names h.<l>.*)\n");
        fprintf(f, "  --checkpoint-out C  write a checkpoint (weights, AdamW moments, step) after the run, atomically\n"
                   "  --checkpoint-every N  with --steps: also write it every N steps (C.pending, replacing C once\n"
                   "                the next step's loss and gradients are finite)\n"
                   "  --checkpoint-shards  with --checkpoint-out: C is a directory of shard files (each written by\n"
                   "                the rank that gathers its tensors) and model.safetensors.index.json, written last\n"
                   "  --resume C    continue from checkpoint C: weights, moments and the step (not with --weights);\n"
                   "                C is a checkpoint file, or a sharded checkpoint's directory or index\n"
                   "  --reshard     with --resume: accept a checkpoint written on another mesh (re-sharded on load)\n"
                   "                or in another dtype (continued in this program's)\n"
                   "  --data-change with --resume and --steps: continue on other data than the checkpoint recorded\n"
                   "  --replica-check  after the run, check every replicated shard is bitwise identical (exit 4)\n"
                   "  --timing      with --steps: median time per training step and per step kind\n");
    }
    if (&tr_gen_class != NULL) /* mode = "generate" */
        fprintf(f, "\nGeneration (docs/GENERATE.md; context %d tokens a sequence, at most %d sequences):\n"
                   "  --generate    run the prefill of the prompts, then decode steps, instead of one forward\n"
                   "  --prompt-tokens P  int32 .npy [n <= %d, L <= %d]: a prompt a row, left-aligned, then -1 pads\n"
                   "  --max-new N   new tokens a sequence (L + N <= %d)\n"
                   "  --eos ID      a sequence stops after emitting this id (written); default: none\n"
                   "  --temperature T  sample from softmax(logits / T) instead of the greedy argmax (default 1 when\n"
                   "                --top-k or --top-p is given); the same --seed gives the same ids on every mesh\n"
                   "  --top-k K     sample among the K most likely ids\n"
                   "  --top-p P     sample among the most likely ids whose probability reaches P (after --top-k)\n"
                   "  --stream      each step's new ids on stdout as they come: a line \"tokens M ID ...\" per step\n"
                   "                (M from 0; one id a sequence, -1 once it has ended); scripts/tokens.py stream\n"
                   "                turns them into text\n"
                   "  --output T    with --generate: the ids, int32 [n, L + N]: prompt, new tokens, then -1\n"
                   "  --logits-out L  with --generate: the logits of every new token, float32 [n, N, vocab]\n"
                   "  --timing      with --generate: the prefill's time, the median decode step and its step kinds\n",
                tr_gen_class.context, tr_model.batch, tr_model.batch, tr_model.seq, tr_gen_class.context);
    fprintf(f, "\nOutputs (written atomically by rank 0; every path is checked before any work):\n");
    if (lm)
        fprintf(f, "  --logits-out F  the logits, float32 [batch, seq, vocab=%d], gathered to rank 0\n"
                   "  --output F    the hidden states after the last block (the input of ln_f), float32\n"
                   "                [batch, seq, hidden=%d]\n"
                   "  --hf-out DIR  after the run, a directory for GPT2LMHeadModel.from_pretrained: config.json and\n"
                   "                model.safetensors (transformer.* names), and the tokenizer and generation-config\n"
                   "                files of the --weights directory, when it has them\n",
                tr_lm_vocab(), tr_model.hidden);
    else
        fprintf(f, "  --output F    the output of the last block, float32 [batch, seq, hidden]\n");
    fprintf(f, "  --weights-out F  the weights after the run (safetensors, the names --weights had)\n"
               "  --out-dtype T f32 (default) or bf16: the dtype of --weights-out%s%s (bf16: rounded to\n"
               "                nearest even; a finite value that would round to inf is refused)\n",
            train ? ", --grads-out" : "", lm ? ", --hf-out" : "");
    fprintf(f, "\nInspecting a run (docs/SCHEDULE.md):\n"
               "  --repeat N    run the forward N times after one warm-up and report the median time\n"
               "  --bytes       compare the bytes each collective moved with the plan, per rank (exit 3)\n"
               "  --trace F     a Chrome trace (chrome://tracing, ui.perfetto.dev): pid = rank, one slice per step%s\n"
               "  --stats       per rank: bytes per collective kind against the plan (exit 3 if any step\n"
               "                differs), time per step kind%s, arena bytes and peak RSS\n"
               "  --quiet       print only errors\n"
               "  --help        this text\n"
               "\nExit codes: 0 ok, 1 bad input or output path, 2 usage, world size or mismatched programs,\n"
               "3 bytes differ from the plan, 4 replicas differ, 5 training diverged (nothing written).\n",
            train ? ";\n                with --steps, of the last training step: forward, backward, optimizer" : "",
            train ? " and per phase" : "");
}

/* Every option of every program, for the "did you mean" of an unknown one. */
static const char *const all_options[] = {
    "--weights",     "--input",       "--output",      "--seed",           "--repeat",      "--bytes",
    "--trace",       "--stats",       "--quiet",       "--help",           "--dy",          "--dx-out",
    "--grads-out",   "--steps",       "--target",      "--weights-out",    "--replica-check", "--out-dtype",
    "--checkpoint-out", "--checkpoint-every", "--resume", "--reshard",     "--hf-out",      "--timing",
    "--checkpoint-shards",
    "--tokens",      "--targets",     "--logits-out",  "--data",           "--val-data",    "--val-every",
    "--val-batches", "--data-change", "--generate",    "--prompt-tokens",  "--max-new",     "--eos",
    "--temperature", "--top-k",       "--top-p",         "--stream",
};

/* Edit distance (insertions, deletions, substitutions) of two short strings; 99 when either is too long. */
static int edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 40 || m > 40)
        return 99;
    int row[41];
    for (size_t j = 0; j <= m; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[m];
}

/* The known option closest to s (at most 2 edits, or s is a prefix of exactly one), or NULL. */
static const char *closest_option(const char *s)
{
    const char *best = NULL, *prefix = NULL;
    int bestd = 3, nprefix = 0;
    size_t n = strlen(s);
    for (size_t i = 0; i < sizeof all_options / sizeof all_options[0]; i++) {
        int dist = edit_distance(s, all_options[i]);
        if (dist < bestd) {
            bestd = dist;
            best = all_options[i];
        }
        if (n > 3 && strncmp(s, all_options[i], n) == 0) {
            prefix = all_options[i];
            nprefix++;
        }
    }
    return best ? best : nprefix == 1 ? prefix : NULL;
}

/* --checkpoint-every (tr_ckpt.h TR_CKPT_PENDING_SUFFIX): the checkpoint waiting in ck_pending_path for the next
 * step's loss and gradients (step ck_pending, 0: none), and the last one that replaced --checkpoint-out in this
 * run (ck_kept, 0: none) */
static char ck_pending_path[4300];
static char ck_index_path[4200]; /* --checkpoint-shards: <C>/model.safetensors.index.json */
static int ck_pending, ck_kept;
static const char *ck_out;

/* The option of each output path, in the order check_outputs and parse_args list them. */
static const char *const out_option[6] = {"--output",    "--trace",  "--weights-out",
                                          "--grads-out", "--dx-out", "--checkpoint-out"};

/* A file name given to option opt: refuse one that looks like an option ("run --output --quiet"
 * would otherwise write a file named --quiet and run without --quiet). */
static bool file_value_ok(const char *opt, const char *val, tr_err *err)
{
    if (val[0] != '-')
        return true;
    tr_fail(err, "%s needs a file name, not the option %s (see --help); to name a file that starts with '-', write "
                 "./%s",
            opt, val, val);
    return false;
}

/* path as text without "//" and "./" ("d/./y.npy" and "d//y.npy" are "d/y.npy") and trailing slashes. */
static void tidy_name(const char *path, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = path; *p && o + 1 < cap;) {
        if (*p == '/' && o > 0 && out[o - 1] == '/') { /* "//" */
            p++;
        } else if (p[0] == '.' && p[1] == '/' && (o == 0 || out[o - 1] == '/')) { /* "./" */
            p += 2;
        } else {
            out[o++] = *p++;
        }
    }
    while (o > 1 && out[o - 1] == '/')
        o--;
    out[o] = '\0';
}

/* The place an output is written, as the file system resolves it: its directory through realpath (so
 * "a/../b/y", "b/y" and a symbolic link to b name one place) and its own name as it is (an output replaces
 * a symbolic link there by a rename, never the link's target). A directory that does not exist (yet, as
 * --hf-out's) resolves through its longest existing ancestor. */
static void out_place(const char *path, char *out, size_t cap)
{
    char t[4096], real[PATH_MAX];
    tidy_name(path, t, sizeof t);
    /* t = head + "/" + rest: shorten head until realpath resolves it ("" is ".", and "/" always resolves) */
    size_t cut = strlen(t);
    for (;;) {
        char *slash = NULL;
        for (size_t i = cut; i > 0; i--)
            if (t[i - 1] == '/') {
                slash = t + i - 1;
                break;
            }
        char head[4096];
        if (!slash)
            snprintf(head, sizeof head, ".");
        else if (slash == t)
            snprintf(head, sizeof head, "/");
        else
            snprintf(head, sizeof head, "%.*s", (int)(slash - t), t);
        const char *rest = slash ? slash + 1 : t;
        bool dots = false; /* ".." or "." in the rest: text cannot say where it leads */
        for (const char *r = rest; *r; r = strchr(r, '/') ? strchr(r, '/') + 1 : r + strlen(r))
            dots |= (r[0] == '.' && (r[1] == '/' || !r[1])) || (r[0] == '.' && r[1] == '.' && (r[2] == '/' || !r[2]));
        if (!dots && realpath(head, real)) {
            snprintf(out, cap, "%s%s%s", real, strcmp(real, "/") ? "/" : "", rest);
            return;
        }
        if (!slash || slash == t) {
            snprintf(out, cap, "%s", t);
            return;
        }
        cut = (size_t)(slash - t);
    }
}

enum { TR_NOUTS = 8 };

/* Every output of the run with its option: the files, then --hf-out's directory (last). */
static int list_outputs(const tr_opts *o, const char **path, const char **opt)
{
    const char *p[TR_NOUTS] = {o->output, o->trace, o->weights_out, o->grads_out, o->dx_out, o->checkpoint_out,
                               o->lm.logits_out, o->hf_out};
    const char *n[TR_NOUTS] = {"--output", "--trace", "--weights-out", "--grads-out", "--dx-out", "--checkpoint-out",
                               "--logits-out", "--hf-out"};
    int k = 0;
    for (int i = 0; i < TR_NOUTS; i++)
        if (p[i]) {
            path[k] = p[i];
            opt[k++] = n[i];
        }
    return k;
}

/* Before any work, on every rank: no two outputs are one file (compared where the file system puts them, not
 * as text), and none lies inside the --hf-out directory, which the export replaces as a whole. */
static bool outputs_distinct(const tr_opts *o, tr_err *err)
{
    const char *path[TR_NOUTS], *opt[TR_NOUTS];
    int n = list_outputs(o, path, opt);
    static char place[TR_NOUTS][PATH_MAX + 256];
    for (int i = 0; i < n; i++)
        out_place(path[i], place[i], sizeof place[i]);
    for (int i = 0; i < n; i++)
        for (int k = i + 1; k < n; k++) {
            if (!strcmp(place[i], place[k])) {
                if (!strcmp(path[i], path[k]))
                    return tr_fail(err, "%s and %s name the same file (%s): give each output its own path", opt[i],
                                   opt[k], path[k]);
                return tr_fail(err, "%s and %s name the same file (%s and %s are both %s): give each output its own "
                                    "path",
                               opt[i], opt[k], path[i], path[k], place[k]);
            }
            size_t lk = strlen(place[k]);
            if (!strcmp(opt[k], "--hf-out") && !strncmp(place[i], place[k], lk) && place[i][lk] == '/')
                return tr_fail(err, "%s %s is inside the --hf-out directory %s, which the export replaces as a whole "
                                    "after the run (the file would be lost): write it elsewhere",
                               opt[i], path[i], path[k]);
        }
    return true;
}

/* 0: run, 1: --help printed, -1: error in err */
static int parse_args(int argc, char **argv, tr_opts *o, tr_err *err)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->eos = -1;
    o->sample.temperature = 1;
    o->sample.top_p = 1;
    o->repeat = 0;
    for (int a = 1; a < argc; a++) {
        const char *s = argv[a];
        const char *val = (a + 1 < argc) ? argv[a + 1] : NULL;
        if (!strcmp(s, "--help") || !strcmp(s, "-h"))
            return 1;
        int lm = tr_lm_parse_arg(&o->lm, argc, argv, &a, err);
        if (lm < 0)
            return -1;
        if (lm > 0)
            continue;
        int dt = tr_lmdata_parse_arg(&o->data, argc, argv, &a, err);
        if (dt < 0)
            return -1;
        if (dt > 0)
            continue;
        if (!strcmp(s, "--generate")) {
            o->generate = 1;
        } else if (!strcmp(s, "--stream")) {
            o->stream = 1;
        } else if (!strcmp(s, "--temperature") || !strcmp(s, "--top-k") || !strcmp(s, "--top-p")) {
            char *end = NULL;
            double v = val ? strtod(val, &end) : 0;
            bool good = val && end != val && !*end && isfinite(v);
            if (s[2] == 't' && s[3] == 'e' && !(good && v > 0 && v <= 1e6))
                good = tr_fail(err, "--temperature %s: expected a number > 0 (logits are divided by it; 1: the "
                                    "model's distribution)", val ? val : "(missing)");
            else if (!strcmp(s, "--top-k") && !(good && v >= 1 && v <= INT_MAX && v == floor(v)))
                good = tr_fail(err, "--top-k %s: expected an integer >= 1 (sample among the k most likely ids)",
                               val ? val : "(missing)");
            else if (!strcmp(s, "--top-p") && !(good && v > 0 && v <= 1))
                good = tr_fail(err, "--top-p %s: expected a number in (0, 1] (sample among the most likely ids whose "
                                    "probability reaches it)", val ? val : "(missing)");
            if (!good)
                return -1;
            if (!strcmp(s, "--temperature"))
                o->sample.temperature = v;
            else if (!strcmp(s, "--top-k"))
                o->sample.top_k = (int)v;
            else
                o->sample.top_p = v;
            o->sample.on = 1;
            a++;
        } else if (!strcmp(s, "--prompt-tokens") || !strcmp(s, "--max-new") || !strcmp(s, "--eos")) {
            if (!val) {
                tr_fail(err, "%s needs a value (see --help)", s);
                return -1;
            }
            if (s[2] == 'p') {
                o->prompts = val;
            } else {
                char *end;
                long v = strtol(val, &end, 10);
                if (*end || end == val || v < (s[2] == 'm' ? 1 : 0) || v > INT_MAX) {
                    tr_fail(err, "%s = %s is not valid: use an integer %s", s, val,
                            s[2] == 'm' ? ">= 1 (new tokens per sequence)" : ">= 0 (the end-of-text id)");
                    return -1;
                }
                if (s[2] == 'm')
                    o->max_new = (int)v;
                else
                    o->eos = (int)v;
            }
            a++;
        } else if (!strcmp(s, "--bytes")) {
            o->bytes = 1;
        } else if (!strcmp(s, "--stats")) {
            o->stats = 1;
        } else if (!strcmp(s, "--trace")) {
            if (!val) {
                tr_fail(err, "--trace needs a file name (see --help)");
                return -1;
            }
            if (!file_value_ok(s, val, err))
                return -1;
            o->trace = argv[++a];
        } else if (!strcmp(s, "--reshard")) {
            o->reshard = 1;
        } else if (!strcmp(s, "--checkpoint-shards")) {
            o->ckpt_shards = 1;
        } else if (!strcmp(s, "--data-change")) {
            o->data_change = 1;
        } else if (!strcmp(s, "--replica-check")) {
            o->replica_check = 1;
        } else if (!strcmp(s, "--timing")) {
            o->timing = 1;
        } else if (!strcmp(s, "--quiet")) {
            o->quiet = 1;
        } else if (!strcmp(s, "--out-dtype")) {
            if (!val || (strcmp(val, "f32") != 0 && strcmp(val, "bf16") != 0)) {
                tr_fail(err, "--out-dtype %s: expected f32 or bf16 (the dtype of --weights-out and --grads-out)",
                        val ? val : "(missing)");
                return -1;
            }
            o->out_dtype = strcmp(val, "bf16") == 0 ? TR_ST_BF16 : TR_ST_F32;
            o->out_dtype_set = 1;
            a++;
        } else if (!strcmp(s, "--weights") || !strcmp(s, "--input") || !strcmp(s, "--output") ||
                   !strcmp(s, "--seed") || !strcmp(s, "--repeat") || !strcmp(s, "--dy") ||
                   !strcmp(s, "--dx-out") || !strcmp(s, "--grads-out") || !strcmp(s, "--target") ||
                   !strcmp(s, "--weights-out") || !strcmp(s, "--hf-out") || !strcmp(s, "--steps") ||
                   !strcmp(s, "--checkpoint-out") || !strcmp(s, "--checkpoint-every") || !strcmp(s, "--resume")) {
            if (!val) {
                tr_fail(err, "%s needs a value (see --help)", s);
                return -1;
            }
            bool numeric = !strcmp(s, "--seed") || !strcmp(s, "--repeat") || !strcmp(s, "--steps") ||
                           !strcmp(s, "--checkpoint-every");
            if (!numeric && !file_value_ok(s, val, err))
                return -1;
            a++;
            if (!strcmp(s, "--weights"))
                o->weights = val;
            else if (!strcmp(s, "--input"))
                o->input = val;
            else if (!strcmp(s, "--output"))
                o->output = val;
            else if (!strcmp(s, "--dy"))
                o->dy = val;
            else if (!strcmp(s, "--dx-out"))
                o->dx_out = val;
            else if (!strcmp(s, "--grads-out"))
                o->grads_out = val;
            else if (!strcmp(s, "--target"))
                o->target = val;
            else if (!strcmp(s, "--weights-out"))
                o->weights_out = val;
            else if (!strcmp(s, "--hf-out"))
                o->hf_out = val;
            else if (!strcmp(s, "--checkpoint-out"))
                o->checkpoint_out = val;
            else if (!strcmp(s, "--resume"))
                o->resume = val;
            else {
                char *end;
                errno = 0;
                unsigned long long v = strtoull(val, &end, 10);
                if (errno || *end || !*val || val[0] == '-') {
                    tr_fail(err, "%s %s: expected a non-negative integer", s, val);
                    return -1;
                }
                if (!strcmp(s, "--seed")) {
                    o->seed = v;
                    o->seed_set = 1;
                } else if (!strcmp(s, "--checkpoint-every") && (v < 1 || v > 100000000)) {
                    tr_fail(err, "--checkpoint-every %s: expected 1..100000000 (steps between checkpoints)", val);
                    return -1;
                } else if (!strcmp(s, "--checkpoint-every"))
                    o->checkpoint_every = (int)v;
                else if (!strcmp(s, "--steps") && (v < 1 || v > 100000000)) {
                    tr_fail(err, "--steps %s: expected 1..100000000", val);
                    return -1;
                } else if (!strcmp(s, "--steps"))
                    o->steps = (int)v;
                else if (v < 1 || v > 1000000) {
                    tr_fail(err, "--repeat %s: expected 1..1000000", val);
                    return -1;
                } else
                    o->repeat = (int)v;
            }
        } else {
            const char *sugg = closest_option(s);
            if (sugg)
                tr_fail(err, "unknown option %s; did you mean %s? (see --help)", s, sugg);
            else
                tr_fail(err, "unknown option %s (see --help)", s);
            return -1;
        }
    }
    if (!tr_model.mode && (o->dy || o->dx_out || o->grads_out || o->steps || o->target || o->replica_check)) {
        tr_fail(err, "--dy, --dx-out, --grads-out, --steps, --target and --replica-check need a training program: "
                     "this one was generated with mode = \"infer\"; add mode = \"train\" to the spec and regenerate");
        return -1;
    }
    bool bf16_shards = false;
    for (int i = 0; i < tr_class.proto.nparams; i++)
        bf16_shards |= tr_class.proto.params[i].bf16 != 0;
    if (bf16_shards && (o->weights_out || o->hf_out)) {
        tr_fail(err, "--weights-out and --hf-out need the weights as they were loaded: this bf16 inference program "
                     "holds only the bf16-rounded matrices (docs/BF16.md); write from a training program, or convert "
                     "the weights file itself");
        return -1;
    }
    if (!tr_model.mode && (o->resume || o->checkpoint_out || o->checkpoint_every || o->reshard)) {
        tr_fail(err, "--resume, --reshard, --checkpoint-out and --checkpoint-every need a training program (a "
                     "checkpoint holds the AdamW moments): this one was generated with mode = \"infer\"; to run "
                     "trained weights, pass them with --weights");
        return -1;
    }
    if (o->resume && o->weights) {
        tr_fail(err, "--resume and --weights exclude each other: the checkpoint holds the weights to continue from "
                     "(with the AdamW moments and the step); give --resume C to continue a run, or --weights W to "
                     "start one");
        return -1;
    }
    if (o->reshard && !o->resume) {
        tr_fail(err, "--reshard re-shards the checkpoint given to --resume; add --resume C, or drop --reshard");
        return -1;
    }
    if (o->data_change && (!o->resume || !o->steps)) {
        tr_fail(err, "--data-change lets --resume C --steps N train on other data than the checkpoint was trained "
                     "on; add --resume and --steps, or drop --data-change");
        return -1;
    }
    if (o->ckpt_shards && !o->checkpoint_out) {
        tr_fail(err, "--checkpoint-shards writes --checkpoint-out C as a directory of shards and an index: add "
                     "--checkpoint-out C, or drop --checkpoint-shards");
        return -1;
    }
    if (o->checkpoint_every && (!o->checkpoint_out || !o->steps)) {
        tr_fail(err, "--checkpoint-every N writes --checkpoint-out every N of the --steps: give both "
                     "--checkpoint-out C and --steps");
        return -1;
    }
    if (o->dy && o->steps) {
        tr_fail(err, "--dy (one backward with a given gradient) and --steps (training on a loss) exclude each other");
        return -1;
    }
    if (!tr_lm_check_opts(&o->lm, err) ||
        !tr_lmdata_check_opts(&o->data, o->steps, o->lm.tokens || o->lm.targets, err))
        return -1;
    if (tr_lm_vocab() && tr_model.mode && (o->steps || o->grads_out) && !o->lm.tokens != !o->lm.targets) {
        tr_fail(err, "%s without %s: %s loss reads the token ids and their targets, and the missing ones would be "
                     "synthetic (from --seed); give %s (int32 [batch, seq]%s)%s",
                o->lm.tokens ? "--tokens" : "--targets", o->lm.tokens ? "--targets" : "--tokens",
                o->steps ? "the training" : "the --grads-out", o->lm.tokens ? "--targets Y.npy" : "--tokens T.npy",
                o->lm.tokens ? ": each token's next token" : "", o->steps ? ", or train on token shards with --data P" : "");
        return -1;
    }
    if (tr_lm_vocab() && (o->input || o->target || o->dy || o->dx_out)) {
        tr_fail(err, "--input, --target, --dy and --dx-out are for a stack of blocks on hidden states; this program is a "
                     "language model (model.vocab = %d): give --tokens T.npy and --targets Y.npy (int32 [batch, seq]); "
                     "--grads-out alone runs one backward of the loss", tr_lm_vocab());
        return -1;
    }
    if ((o->dx_out || o->grads_out) && !o->dy && !tr_lm_vocab()) {
        tr_fail(err, "--dx-out and --grads-out write the gradients of one backward: give the upstream gradient "
                     "with --dy DY.npy");
        return -1;
    }
    if (o->out_dtype_set && !o->weights_out && !o->grads_out && !o->hf_out) {
        tr_fail(err, "--out-dtype sets the dtype of --weights-out and --grads-out (and --hf-out); give one of them, "
                     "or drop --out-dtype");
        return -1;
    }
    if (o->target && !o->steps) {
        tr_fail(err, "--target is the objective of --steps N; add --steps");
        return -1;
    }
    if (o->timing && !o->steps && !o->generate) { /* it was accepted and ignored: a run that timed nothing */
        tr_fail(err, "--timing times --steps N (each training step and its step kinds) or --generate (the prefill and "
                     "the decode steps); add one of them (--repeat N times the forward on its own), or drop --timing");
        return -1;
    }
    if (o->repeat && (o->dy || o->steps)) {
        tr_fail(err, "--repeat times the forward alone; run it without --dy or --steps");
        return -1;
    }
    if (!outputs_distinct(o, err))
        return -1;
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

/* The Hugging Face directory the weights came from, whose tokenizer and generation-config files --hf-out carries
 * (tr_hfout_write_dir): --weights DIR itself, or the directory of --weights DIR/FILE when it holds config.json
 * (save_pretrained's layout). None for synthetic weights or a file elsewhere. */
static bool weights_dir(const char *weights, char *dir, size_t cap)
{
    struct stat st;
    if (!weights || !*weights || stat(weights, &st) != 0 || strlen(weights) >= cap)
        return false;
    snprintf(dir, cap, "%s", weights);
    if (S_ISDIR(st.st_mode))
        return true;
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0'; /* a file in / */
    else if (slash)
        *slash = '\0';
    else
        snprintf(dir, cap, ".");
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    return stat(cfg, &st) == 0 && S_ISREG(st.st_mode);
}

/* Rank 0, before any work: can every output be written? */
static bool check_outputs(const tr_opts *o, tr_err *err)
{
    const char *outs[6] = {o->output, o->trace, o->weights_out, o->grads_out, o->dx_out, o->checkpoint_out};
    bool ok = true;
    for (int i = 0; i < 5 + !o->ckpt_shards; i++)
        if (outs[i] && !tr_st_check_output(outs[i], out_option[i], err))
            ok = false;
    if (o->ckpt_shards) { /* a directory (created at the first write if missing) and its index */
        struct stat sb;
        if (stat(o->checkpoint_out, &sb) != 0)
            ok = tr_st_check_output(o->checkpoint_out, "--checkpoint-out (the directory to create)", err) && ok;
        else if (!S_ISDIR(sb.st_mode))
            ok = tr_fail(err, "--checkpoint-out %s: not a directory: with --checkpoint-shards C is the directory of "
                              "the shards and the index (created if missing); name a directory",
                         o->checkpoint_out);
        else
            ok = tr_st_check_output(ck_index_path, "--checkpoint-out", err) && ok;
    }
    struct stat cs;
    bool ck_dir_missing = o->ckpt_shards && stat(o->checkpoint_out, &cs) != 0; /* its index checked as the dir's */
    if (ok && o->checkpoint_every && !ck_dir_missing &&
        !tr_st_check_output(ck_pending_path, "--checkpoint-every", err))
        ok = false;
    if (ok && o->hf_out && !tr_hfout_check(o->hf_out, err))
        return false; /* its message says nothing was run */
    char src[4096]; /* the files --hf-out carries from the weights' directory: refused now, not after the run */
    if (ok && o->hf_out && weights_dir(o->weights, src, sizeof src) && !tr_hfout_check_carry(src, o->hf_out, err))
        return false;
    if (!ok)
        tr_fail(err, "nothing was run");
    return ok;
}

/* Rank 0: is every tensor of the model in the file, F32 or BF16, with the right shape, and is there no
 * block beyond the model's layers (a deeper checkpoint would otherwise be cut silently)? Block names
 * may carry the "transformer." prefix of GPT2LMHeadModel, all or none of them (tr_hf_prefix). (d: rank
 * 0's descriptor, whose table names every tensor with its full shape) */
static bool check_weights(const tr_rank_desc *d, const char *path, tr_err *err)
{
    tr_stset f; /* one file or a sharded checkpoint, every shard checked against its index */
    if (!tr_stset_open(&f, path, true, err))
        return false;
    struct stat st; /* a save_pretrained directory (with weights): its config.json describes this build's model */
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && !tr_hfout_config_matches(path, err)) {
        tr_stset_close(&f);
        return false;
    }
    const char *prefix;
    if (!tr_hf_prefix(&f, &prefix, err)) {
        tr_stset_close(&f);
        return false;
    }
    /* weights of another model: one line naming both models, not a list of every tensor that differs */
    tr_hf_model fm, bm = {tr_model.layers, tr_model.hidden, tr_model.ffn, -1, -1};
    tr_hf_file_model(&f, prefix, &fm);
    if (tr_lm_vocab()) {
        bm.vocab = tr_lm_vocab();
        bm.positions = tr_lm()->positions;
    }
    if (fm.layers < bm.layers || fm.hidden != bm.hidden || fm.ffn != bm.ffn || fm.vocab != bm.vocab ||
        (bm.vocab >= 0 && fm.positions != bm.positions)) {
        if (bm.vocab < 0 && fm.layers >= 0 && fm.hidden == bm.hidden && fm.ffn == bm.ffn && fm.layers >= bm.layers)
            ; /* a block stack reads the blocks of a whole model: wte, wpe, ln_f are not used */
        else {
            char have[200], want[200];
            tr_fail(err, "%s: these weights are another model: the file holds %s; this program (%s) was built for "
                         "%s: pass the weights of that model, or generate a program for the file's model (the "
                         "spec's model table)",
                    f.path, tr_hf_model_text(have, sizeof have, &fm), tr_model.name,
                    tr_hf_model_text(want, sizeof want, &bm));
            tr_stset_close(&f);
            return false;
        }
    }
    bool ok = true;
    int bad = 0;
    for (int i = 0; i < d->nparams; i++) {
        int64_t shape[2];
        shape_of(&d->params[i], shape);
        tr_err e = {{0}};
        char name[TR_ST_NAME_CAP + 32];
        if (!tr_stset_expect_float(&f, tr_hf_prefixed(name, sizeof name, prefix, d->params[i].name), d->params[i].ndim, shape,
                                &e)) {
            ok = false;
            if (bad++ < 8)
                tr_fail(err, "%s", e.msg);
        }
    }
    if (bad > 8)
        tr_fail(err, "%s: ... and %d more tensor problems", path, bad - 8);
    const char *extra = NULL;
    long extra_block = -1, deepest = -1;
    for (int i = 0; i < f.ntensors; i++) { /* sorted by name: the first extra one is the first listed */
        long l = tr_hf_block_under(tr_stset_name(&f, i), prefix);
        if (l < tr_model.layers)
            continue;
        if (!extra) {
            extra = tr_stset_name(&f, i);
            extra_block = l;
        }
        if (l > deepest)
            deepest = l;
    }
    if (extra) {
        ok = false;
        tr_fail(err, "%s: tensor %s belongs to block %ld, but the model has %d layers (h.0 to h.%d): the file holds a "
                     "deeper model, with blocks up to h.%ld; regenerate with layers = %ld, or export only the first "
                     "%d blocks",
                f.path, extra, extra_block, tr_model.layers, tr_model.layers - 1, deepest, deepest + 1, tr_model.layers);
    }
    tr_stset_close(&f);
    return ok;
}

/* "[3, 5]" for a row-major index into a tensor of shape dims[0..ndim) */
static const char *fmt_index(char *buf, size_t cap, long long at, int ndim, const long long *dims)
{
    long long idx[4];
    for (int k = ndim - 1; k >= 0; k--) {
        idx[k] = dims[k] > 0 ? at % dims[k] : 0;
        at = dims[k] > 0 ? at / dims[k] : 0;
    }
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < ndim && o < cap; k++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", k ? ", " : "", idx[k]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
    return buf;
}

/* Collective: the first parameter (in model order) whose weights (grads = 0) or gradients (grads = 1) in H
 * hold a NaN or an infinity on any rank, or -1. On rank 0 what then reads "tensor X holds N non-finite values
 * (NaN or inf), the first at [r, c]". */
static int find_nonfinite(const tr_rank_desc *d, const float *H, int grads, char *what, size_t cap)
{
    long long count, first;
    int idx = tr_gather_nonfinite(d, H, grads, &count, &first);
    if (idx >= d->nparams && d->rank == 0) /* pipeline stages: a tensor of a later stage */
        snprintf(what, cap, "a tensor of a later pipeline stage holds %lld non-finite value%s (NaN or inf)", count,
                 count == 1 ? "" : "s");
    if (idx >= 0 && idx < d->nparams && d->rank == 0) {
        const tr_param *p = &d->params[idx];
        long long dims[2] = {p->full[0], p->full[1]};
        char at[64];
        snprintf(what, cap, "tensor %s holds %lld non-finite value%s (NaN or inf), the first at %s", p->name, count,
                 count == 1 ? "" : "s", fmt_index(at, sizeof at, first, p->ndim, dims));
    }
    return idx;
}

/* All ranks: are the weights just loaded from path finite? Rank 0 prints why not, with the tensor's name in
 * the file when its block names carry a prefix. */
/* bf16 training (docs/BF16.md): the GEMMs read persistent bf16 copies of the weights, which each AdamW step writes
 * after its update (tr_adamw_multi); before the first step they come from the masters as loaded (a weights file, the
 * synthetic weights, a resumed checkpoint): rounded to nearest even here, in the host arena, before the backend
 * takes it. bf16 generation's copies (the tied head's wte, fc1's bias: docs/GENERATE.md "bf16") are only these. */
static void weight_copy(const tr_param *p, float *H)
{
    if (p->w16_offset < 0)
        return;
    tr_bf16 *w = (tr_bf16 *)(H + p->w16_offset);
    for (long long e = 0; e < (long long)p->rows * p->cols; e++)
        w[e] = tr_f32_to_bf16(H[p->offset + e]);
}

static void weight_copies(const tr_rank_desc *d, float *H)
{
    for (int i = 0; i < d->nparams; i++)
        weight_copy(&d->params[i], H);
}

static bool weights_finite(const tr_rank_desc *d, const float *H, const char *path, const char *prefix)
{
    char what[512];
    int idx = find_nonfinite(d, H, 0, what, sizeof what);
    if (idx < 0)
        return true;
    if (d->rank == 0) {
        fprintf(stderr, "%s: %s%s%s%s%s: every weight must be finite (a NaN or an infinity reaches every output); "
                        "repair the checkpoint (e.g. torch.nan_to_num) or pass another file\n",
                path, what, prefix[0] ? " (in the file: " : "", prefix, prefix[0] && idx < d->nparams ? d->params[idx].name : "",
                prefix[0] ? ")" : "");
    }
    return false;
}

/* Load this rank's shards from o->weights (synthetic ones without it); *prefix gets the file's block name
 * prefix (tr_hf_prefix), "" for synthetic weights. */
/* Where param p's shard is read as float32: its arena bytes, or for a bf16 shard (docs/BF16.md) the scratch *tmp
 * [rows * cols], rounded into the arena by bf16_store afterwards. NULL when the scratch cannot be had. */
static float *shard_dst(const tr_param *p, float *A, float **tmp, tr_err *err)
{
    if (!p->bf16)
        return A + p->offset;
    free(*tmp);
    *tmp = malloc((size_t)p->rows * (size_t)p->cols * sizeof **tmp);
    if (!*tmp)
        tr_fail(err, "out of memory: %d x %d floats to round %s to bf16", p->rows, p->cols, p->name);
    return *tmp;
}

static void bf16_store(const tr_param *p, float *A, const float *tmp)
{
    if (p->bf16)
        for (long long e = 0; e < (long long)p->rows * p->cols; e++) /* round to nearest even, as every backend */
            ((tr_bf16 *)(A + p->offset))[e] = tr_f32_to_bf16(tmp[e]);
}

static bool load_weights(const tr_rank_desc *d, const tr_opts *o, float *A, const char **prefix, tr_err *err)
{
    *prefix = "";
    float *tmp = NULL;
    bool ok = true;
    if (!o->weights) {
        for (int i = 0; i < d->nparams && ok; i++) {
            const tr_param *p = &d->params[i];
            int64_t full_cols = p->ndim == 1 ? p->full[0] : p->full[1];
            float *dst = shard_dst(p, A, &tmp, err);
            ok = dst != NULL;
            for (int k = 0; k < p->npieces && ok; k++) {
                const tr_piece *pc = &p->piece[k];
                tr_synth_block(p->name, o->seed, full_cols, pc->r0, pc->nr, pc->c0, pc->nc, dst + pc->dst_col,
                               p->cols);
            }
            if (ok)
                bf16_store(p, A, tmp);
        }
        free(tmp);
        return ok;
    }
    tr_stset f; /* rank 0 checked the index against the shards: here each shard is mapped when first needed */
    if (!tr_stset_open(&f, o->weights, false, err))
        return false;
    ok = tr_hf_prefix(&f, prefix, err);
    for (int i = 0; i < d->nparams && ok; i++) {
        const tr_param *p = &d->params[i];
        char name[TR_ST_NAME_CAP + 32];
        tr_hf_prefixed(name, sizeof name, *prefix, p->name);
        float *dst = shard_dst(p, A, &tmp, err);
        ok = dst != NULL;
        for (int k = 0; k < p->npieces && ok; k++) {
            const tr_piece *pc = &p->piece[k];
            ok = tr_stset_read_block(&f, name, pc->r0, pc->nr, pc->c0, pc->nc, dst + pc->dst_col, p->cols, err);
        }
        if (ok)
            bf16_store(p, A, tmp);
    }
    free(tmp);
    tr_stset_close(&f);
    return ok;
}

/* Rank 0: is path a float32 [batch, seq, hidden] .npy? (what: "input", "dy", "target") */
static bool check_bsc(const char *path, const char *what, tr_err *err)
{
    tr_npy f;
    if (!tr_npy_open(&f, path, err))
        return false;
    int64_t shape[3] = {tr_model.batch, tr_model.seq, tr_model.hidden};
    bool ok = tr_npy_expect_shape(&f, 3, shape, what, "(batch, seq, hidden)", err);
    tr_npy_close(&f);
    return ok;
}

/* This rank's [io_rows, io_cols] block of a [batch, seq, hidden] file into dst. */
static bool read_bsc_block(const tr_rank_desc *d, const char *path, float *dst, tr_err *err)
{
    tr_npy f;
    if (!tr_npy_open(&f, path, err))
        return false;
    bool ok = tr_npy_read_block(&f, d->io_r0, d->io_rows, d->io_c0, d->io_cols, dst, d->io_cols, err);
    tr_npy_close(&f);
    return ok;
}

/* Validate on rank 0, then every rank reads its block; false (message printed) on failure. */
static bool load_bsc(const tr_rank_desc *d, const char *path, const char *what, float *dst)
{
    tr_err err = {{0}};
    bool ok = d->rank == 0 ? check_bsc(path, what, &err) : true;
    if (!root_ok(ok)) {
        if (d->rank == 0)
            fprintf(stderr, "%s\n", err.msg);
        return false;
    }
    ok = read_bsc_block(d, path, dst, &err);
    if (!all_ok(ok)) {
        if (!ok)
            fprintf(stderr, "rank %d: %s\n", d->rank, err.msg);
        return false;
    }
    /* every value finite: a NaN or an infinity in one token reaches the loss, every gradient and
     * (through attention) the later tokens of its sequence */
    long long bad = 0, first = LLONG_MAX, all_bad = 0, all_first = 0;
    for (int r = 0; r < d->io_rows; r++)
        for (int c = 0; c < d->io_cols; c++)
            if (!isfinite(dst[(long)r * d->io_cols + c])) {
                long long at = (long long)(d->io_r0 + r) * tr_model.hidden + d->io_c0 + c;
                bad++;
                if (at < first)
                    first = at;
            }
    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&first, &all_first, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    if (all_bad == 0)
        return true;
    if (d->rank == 0) {
        long long dims[3] = {tr_model.batch, tr_model.seq, tr_model.hidden};
        char at[96];
        fprintf(stderr, "%s: %s holds %lld non-finite value%s (NaN or inf), the first at %s (batch, seq, hidden): "
                        "every %s value must be finite; repair the file or pass another one\n",
                path, what, all_bad, all_bad == 1 ? "" : "s", fmt_index(at, sizeof at, all_first, 3, dims), what);
    }
    return false;
}

/* FNV-1a 64 of a fingerprint string, to compare them across ranks with two reductions. */
static unsigned long long fp_hash(const char *s)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

/* Rank 0: the programs were built from the output as it is now. This executable lives in DIR/bin/<variant>/;
 * DIR/manifest.json names the schedule tessgen last generated there. A different one means tessgen ran again
 * (a changed spec: another lr, mesh or model) and the programs were not rebuilt: they would run the old schedule
 * with exit 0, so they are refused, naming both fingerprints and the command that rebuilds. A program copied
 * away from its output directory (no manifest.json beside bin/) is not checked. */
static bool built_from_manifest(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return true; /* no /proc: nothing to compare with */
    exe[n] = '\0';
    char *cut[3] = {NULL, NULL, NULL}; /* DIR/bin/<variant>/rank_iI_jJ */
    for (int k = 0; k < 3; k++) {
        cut[k] = strrchr(exe, '/');
        if (!cut[k] || cut[k] == exe)
            return true;
        *cut[k] = '\0';
    }
    const char *variant = cut[1] + 1, *dir = exe;
    if (strcmp(cut[2] + 1, "bin") != 0)
        return true; /* not laid out as tessgen builds it */
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    struct stat st;
    if (stat(path, &st) != 0)
        return true;
    tr_err err = {{0}};
    tr_json_doc doc;
    const tr_json_node *fp = NULL;
    bool read = tr_st_read_json(path, "manifest (JSON)", &doc, &err);
    if (read)
        fp = tr_json_get(&doc, tr_json_root(&doc), "schedule_fingerprint");
    const char *rebuild = !strcmp(variant, "asan") ? " asan" : !strcmp(variant, "cuda") ? " cuda" : "";
    bool ok = true;
    if (!read || !fp || fp->type != TR_JSON_STRING) {
        fprintf(stderr, "error: %s: %s: tessgen writes it with the programs' schedule_fingerprint; generate the "
                        "output again (tessgen SPEC -o %s) and rebuild (ninja -C %s%s)\n",
                path, read ? "has no schedule_fingerprint string" : err.msg, dir, dir, rebuild);
        ok = false;
    } else if (strcmp(fp->str, tr_model.fingerprint) != 0) {
        fprintf(stderr, "error: the programs under %s/bin/%s were built for schedule %s, but %s says tessgen "
                        "generated schedule %s there since: they are stale and would run the old schedule; rebuild "
                        "them with: ninja -C %s%s\n",
                dir, variant, tr_model.fingerprint, path, fp->str, dir, rebuild);
        ok = false;
    }
    tr_json_free(&doc);
    return ok;
}

/* Collective, before any step of the schedule: this executable holds the program of this rank's class, it was
 * printed for the same schedule as model.c, and every rank runs the same schedule. On success *d is this
 * rank's descriptor; otherwise every rank returns false and the ranks at fault say why. */
static bool this_program(int rank, tr_rank_desc *d)
{
    const tr_rank_row *row = NULL;
    for (int r = 0; r < tr_class.nranks && !row; r++)
        if (tr_class.rows[r].rank == rank)
            row = &tr_class.rows[r];
    int bad = 0;
    if (!row) {
        int i, j, k;
        tr_rank_coord(rank, &i, &j, &k);
        fprintf(stderr,
                "rank %d: this process runs the program of the ranks (i=%d, j=%d, k) but rank %d is (i=%d, j=%d, "
                "k=%d): start the ranks with DIR/run or DIR/bin/model, which start each rank's program from the "
                "rank its launcher gives (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID, "
                "MV2_COMM_WORLD_RANK, or the variable named by TESS_RANK_VAR)\n",
                rank, tr_class.i, tr_class.j, rank, i, j, k);
        bad = 1;
    } else if (strcmp(tr_class.fingerprint, tr_model.fingerprint) != 0) {
        fprintf(stderr,
                "rank %d: the program of ranks (i=%d, j=%d, k) was generated for schedule %s but model.c for "
                "schedule %s: the output directory mixes two generations; run tessgen again and rebuild "
                "(ninja -C DIR)\n",
                rank, tr_class.i, tr_class.j, tr_class.fingerprint, tr_model.fingerprint);
        bad = 1;
    }
    unsigned long long h = fp_hash(tr_model.fingerprint), lo = h, hi = h;
    int anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (!anybad && lo != hi && rank == 0)
        fprintf(stderr,
                "error: the ranks run programs of different schedules (this one: %s): the executables under bin/ "
                "were built from different generations of the output; run tessgen again and rebuild every "
                "program (ninja -C DIR)\n",
                tr_model.fingerprint);
    if (anybad || lo != hi)
        return false;
    if (!root_ok(rank == 0 ? built_from_manifest() : true))
        return false;
    *d = tr_class.proto;
    d->rank = row->rank;
    d->k = row->k;
    d->io_r0 = row->io_r0;
    for (int g = 0; g < TR_NGROUPS; g++) {
        d->color[g] = row->color[g];
        d->key[g] = row->key[g];
    }
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Every rank's two (measured, planned) byte totals, mine = {measured a, planned a, measured b, planned b}, gathered
 * on rank 0 and printed under `header` with columns ca and cb;
 * a row that differs is printed (with MISMATCH) even when quiet, and `what` names them in the error. Returns false on
 * any difference, on every rank. */
static bool report_run_pairs(tr_ctx *c, const long long mine[4], const char *header, const char *ca, const char *cb,
                             const char *what, const char *ok_line, int quiet)
{
    long long *all = NULL;
    if (c->desc->rank == 0 && !(all = malloc(4 * sizeof *all * (size_t)tr_model.p)))
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Gather(mine, 4, MPI_LONG_LONG, all, 4, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    int mismatch = 0;
    if (c->desc->rank == 0) {
        if (!quiet)
            printf("%s\n%5s %23s %23s\n", header, "rank", ca, cb);
        for (int r = 0; r < tr_model.p; r++) {
            long long *v = all + 4 * r;
            int bad = v[0] != v[1] || v[2] != v[3];
            mismatch |= bad;
            if (!quiet || bad)
                printf("%5d %11lld/%-11lld %11lld/%-11lld%s\n", r, v[0], v[1], v[2], v[3], bad ? "  MISMATCH" : "");
        }
        if (mismatch)
            fprintf(stderr, "error: measured %s bytes differ from the plan (MISMATCH rows above)\n", what);
        else if (!quiet)
            printf("%s\n", ok_line);
        free(all);
    }
    MPI_Bcast(&mismatch, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return !mismatch;
}

/* optimizer.shard (docs/TRAINING.md): every rank's reduce-scatter and all-gather bytes over the whole run against the
 * plan's per step times nbwd backwards and nopt optimizer steps run. Returns false on any difference; true at once
 * for an unsharded program. */
static bool report_shard_bytes(tr_ctx *c, long long nbwd, long long nopt, int quiet)
{
    const tr_rank_desc *d = c->desc;
    long long prs = 0, pag = 0;
    for (int g = 0; g < TR_NGROUPS; g++) {
        prs += d->plan_bwd_rscatter[g];
        pag += d->plan_opt_allgather[g];
    }
    int any = prs > 0, all_any = 0;
    MPI_Allreduce(&any, &all_any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!all_any)
        return true;
    const long long mine[4] = {c->rscatter_run, nbwd * prs, c->allgather_run, nopt * pag};
    char header[160];
    snprintf(header, sizeof header, "optimizer.shard bytes over the run (%lld backward%s, %lld optimizer step%s), "
             "measured / planned:", nbwd, nbwd == 1 ? "" : "s", nopt, nopt == 1 ? "" : "s");
    return report_run_pairs(c, mine, header, "reduce-scatter dep", "all-gather dep", "reduce-scatter or all-gather",
                            "bytes: every rank's reduce-scatters and all-gathers moved exactly the planned bytes", quiet);
}

/* Pipeline stages: every rank's point-to-point bytes over the run against the plan: per training step, m micro-batch
 * blocks of mb_elems floats each way across each of its stage's boundaries (activations forward, dL/dx back), and
 * per forward outside a step (the final one) the activations alone; the language model's first and last stage also
 * exchange their tied wte gradient (tied_elems floats each way) once per step. */
static bool piped(void);
static bool report_p2p_bytes(tr_ctx *c, long long steps, long long forwards, int quiet)
{
    if (!piped())
        return true;
    const tr_pipe_desc *pd = &tr_pipe_class;
    long long blk = 4LL * pd->microbatches * pd->mb_elems; /* one boundary, one direction, one step */
    int up = pd->stage > 0, down = pd->stage < pd->stages - 1;
    long long tied = 4LL * (pd->tied_param >= 0 ? pd->tied_elems : 0); /* one step, one direction */
    const long long mine[4] = {c->p2p_sent, steps * (blk * (up + down) + tied) + forwards * blk * down, c->p2p_recv,
                               steps * (blk * (up + down) + tied) + forwards * blk * up};
    char header[160];
    snprintf(header, sizeof header, "point-to-point bytes between pipeline stages over the run (%lld step%s, %lld "
             "forward%s), measured / planned:", steps, steps == 1 ? "" : "s", forwards, forwards == 1 ? "" : "s");
    return report_run_pairs(c, mine, header, "sent", "received", "point-to-point",
                            "bytes: every rank's sends and receives between stages moved exactly the planned bytes",
                            quiet);
}

static long long gen_reduce_recv[TR_NGROUPS], gen_reduce_sent[TR_NGROUPS]; /* report_bytes: decode steps' reduces */

/* Generation's weight-stationary layout (docs/GENERATE.md): every rank's bytes received by the all-gathers and the
 * reduce-scatters of the prefill and ndec decode steps against the plan. True at once when no rank plans any. */
static bool report_ws_bytes(tr_ctx *c, long long ndec, int quiet)
{
    long long pag = 0, prs = 0, mag = 0, mrs = 0;
    for (int g = 0; g < TR_NGROUPS; g++) {
        pag += tr_gen_class.plan_ws_allgather[g] + ndec * tr_gen_class.plan_dec_ws_allgather[g];
        prs += tr_gen_class.plan_ws_rscatter[g] + ndec * tr_gen_class.plan_dec_ws_rscatter[g];
        mag += c->ag_recv[g];
        mrs += c->rs_recv[g];
    }
    int any = pag > 0 || prs > 0, all_any = 0;
    MPI_Allreduce(&any, &all_any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!all_any)
        return true;
    const long long mine[4] = {mag, pag, mrs, prs};
    char header[160];
    snprintf(header, sizeof header, "weight-stationary bytes received (the prefill and %lld decode step%s), measured / "
             "planned:", ndec, ndec == 1 ? "" : "s");
    return report_run_pairs(c, mine, header, "all-gather recv", "reduce-scatter recv", "all-gather or reduce-scatter",
                            "bytes: every rank's all-gathers and reduce-scatters moved exactly the planned bytes", quiet);
}

/* Per rank: measured bytes per collective kind and group against the plan (forward, plus the
 * backward when bwd; both in bytes). Returns false on any difference. */
static bool report_bytes(tr_ctx *c, int bwd, int quiet)
{
    enum { NK = 5, NV = NK * TR_NGROUPS }; /* bcast recv, bcast sent, allreduce, reduce recv, reduce sent */
    const tr_rank_desc *d = c->desc;
    long long mine[2 * NV], *all = NULL;
    for (int g = 0; g < TR_NGROUPS; g++) {
        const long long meas[NK] = {c->bcast_recv[g], c->bcast_sent[g], c->allreduce[g], c->reduce_recv[g],
                                    c->reduce_sent[g]};
        const long long plan[NK] = {
            d->plan_bcast_recv[g] + (bwd ? d->plan_bwd_bcast_recv[g] : 0),
            d->plan_bcast_sent[g] + (bwd ? d->plan_bwd_bcast_sent[g] : 0),
            d->plan_allreduce[g] + (bwd ? d->plan_bwd_allreduce[g] : 0),
            tr_lm()->plan_reduce_recv[g] + (bwd ? d->plan_bwd_reduce_recv[g] : 0) + gen_reduce_recv[g],
            tr_lm()->plan_reduce_sent[g] + (bwd ? d->plan_bwd_reduce_sent[g] : 0) + gen_reduce_sent[g],
        };
        for (int k = 0; k < NK; k++) {
            mine[k * TR_NGROUPS + g] = meas[k];
            mine[NV + k * TR_NGROUPS + g] = plan[k];
        }
    }
    if (d->rank == 0)
        all = malloc(sizeof mine * (size_t)tr_model.p);
    MPI_Gather(mine, 2 * NV, MPI_LONG_LONG, all, 2 * NV, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    int mismatch = 0;
    if (d->rank == 0) {
        if (!quiet)
            printf("bytes per %s, measured / planned:\n"
                   "%5s %23s %23s %23s %23s %23s %23s %23s %23s\n",
                   bwd ? "forward + backward" : "forward", "rank", "bcast recv row", "bcast recv col",
                   "bcast sent row", "bcast sent col", tr_model.scheme == 1 ? "allreduce world" : "allreduce row",
                   "allreduce dep+coldep", "reduce recv", "reduce sent");
        for (int r = 0; r < tr_model.p; r++) {
            long long *v = all + 2 * NV * r, *pv = v + NV;
            int bad = 0;
            for (int k = 0; k < NV; k++)
                bad |= v[k] != pv[k];
            mismatch |= bad;
#define AT(a, k, g) ((a)[(k) * TR_NGROUPS + (g)])
#define SUMK(a, k) (AT(a, k, TR_ROW) + AT(a, k, TR_COL) + AT(a, k, TR_DEP) + AT(a, k, TR_COLDEP) + AT(a, k, TR_WORLD))
            /* the all-reduce column: over row (tesseract) or world (megatron; the other is 0) */
            if (!quiet || bad)
                printf("%5d %11lld/%-11lld %11lld/%-11lld %11lld/%-11lld %11lld/%-11lld %11lld/%-11lld "
                       "%11lld/%-11lld %11lld/%-11lld %11lld/%-11lld%s\n",
                       r, AT(v, 0, TR_ROW), AT(pv, 0, TR_ROW), AT(v, 0, TR_COL), AT(pv, 0, TR_COL),
                       AT(v, 1, TR_ROW), AT(pv, 1, TR_ROW), AT(v, 1, TR_COL), AT(pv, 1, TR_COL),
                       AT(v, 2, TR_ROW) + AT(v, 2, TR_WORLD), AT(pv, 2, TR_ROW) + AT(pv, 2, TR_WORLD),
                       AT(v, 2, TR_DEP) + AT(v, 2, TR_COLDEP), AT(pv, 2, TR_DEP) + AT(pv, 2, TR_COLDEP),
                       SUMK(v, 3), SUMK(pv, 3), SUMK(v, 4), SUMK(pv, 4), bad ? "  MISMATCH" : "");
#undef SUMK
#undef AT
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

/* Collective: the training objective from every rank's local sum (tr_step_sums.loss): the LM's mean
 * cross-entropy over batch*seq tokens, or mean((y - target)^2) over the whole output. */
/* Pipeline stages (tr_model.pp > 1): the program of a stage defines tr_pipe_class. */
static bool piped(void)
{
    return &tr_pipe_class != NULL && tr_pipe_class.stages > 1;
}

static bool last_stage(void)
{
    return !piped() || tr_pipe_class.stage == tr_pipe_class.stages - 1;
}

static double mean_loss(const tr_rank_desc *d, double local)
{
    double sum = 0;
    MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (tr_lm_vocab())
        return sum / ((double)tr_model.batch * tr_model.seq);
    long n = (long)d->io_rows * d->io_cols;
    double total_n = (double)tr_model.batch * tr_model.seq * tr_model.hidden;
    /* each element of y is held by `copies` ranks: 1 on the [q,q,d] mesh, p for the megatron scheme; with pipeline
     * stages only the last stage's ranks hold y (the others add 0) */
    double copies = (double)(piped() ? tr_pipe_class.ranks : tr_model.p) * (double)n / total_n;
    return sum / copies / total_n;
}

int tr_mb(const tr_ctx *c)
{
    return c->mb;
}

/* Micro-batches per step (docs/TRAINING.md "Micro-batches"): 1 without them. */
static int microbatches(void)
{
    return tr_model.microbatches > 1 ? tr_model.microbatches : 1;
}

/* The forward of the whole batch: of every micro-batch in turn (each writes its rows of y). */
static void forward_all(tr_ctx *c, float *A)
{
    /* pipeline stages: each micro-batch's x from the stage before, its y to the stage after (a chain: no cycle) */
    long long n = piped() ? tr_pipe_class.mb_elems : 0;
    int me = c->desc->rank, p = piped() ? tr_pipe_class.ranks : 0;
    for (c->mb = 0; c->mb < microbatches(); c->mb++) {
        if (piped() && tr_pipe_class.stage > 0)
            tr_pipe_recv(c, A + c->desc->x_offset + c->mb * n, n, me - p);
        c->desc->forward(c, A);
        if (piped() && !last_stage())
            tr_pipe_send(c, A + c->desc->y_offset + c->mb * n, n, me + p);
    }
    c->mb = 0;
}

/* The forward and backward of every micro-batch in turn, the upstream gradient already in grad_x (--dy, or zero for
 * the LM): the last backward all-reduces the summed weight gradients. */
static void forward_backward_all(tr_ctx *c, float *A)
{
    for (c->mb = 0; c->mb < microbatches(); c->mb++) {
        c->phase = TR_PHASE_FORWARD;
        c->desc->forward(c, A);
        c->phase = TR_PHASE_BACKWARD;
        c->desc->backward(c, A);
    }
    c->mb = 0;
}

/* One forward and backward outside a step, the upstream gradient already in grad_x (--dy; the language model's
 * objective writes its own 0): of each micro-batch in turn, or with pipeline stages the stages' schedule (given_dy:
 * the last stage keeps the dL/dy it holds instead of computing the objective) */
static void backward_once(tr_ctx *c, float *A, int given_dy)
{
    if (!piped()) {
        forward_backward_all(c, A);
        return;
    }
    c->pipe_given_dy = given_dy;
    tr_pipe_class.step(c, A);
    c->pipe_given_dy = 0;
    c->mb = 0;
}

/* The training objective after a forward, outside a step (validation, after the last step): dL/dy into the run
 * arena's gx as a step leaves it, then one read. Micro-batches: the objective of each over its rows, summed. */
static double objective(tr_ctx *c, float *A)
{
    tr_step_sums s;
    for (c->mb = 0; c->mb < microbatches() && last_stage(); c->mb++)
        tr_backend_objective(c, A);
    c->mb = 0;
    tr_backend_step_read(c, &s);
    return mean_loss(c->desc, s.loss);
}

/* --val-data: the mean loss of the first ld->val_batches validation batches, the weights unchanged; false (every
 * rank) when a batch is refused. */
static bool validate(tr_ctx *c, tr_lmdata *ld, float *H, float *A, double *loss)
{
    double sum = 0;
    tr_data_reset(&ld->val);
    for (int b = 0; b < ld->val_batches; b++) {
        if (!tr_lmdata_fill(c, &ld->val, H, A))
            return false;
        forward_all(c, A);
        sum += objective(c, A);
        tr_data_next(&ld->val);
    }
    *loss = sum / ld->val_batches;
    return true;
}

/* ---- training divergence: stop at the first non-finite loss or gradient, write nothing ---- */

static const char *const nothing_written =
    "nothing was written (--weights-out and every other output keep their previous content)";

/* What a stopped run wrote, truly: nothing, or the periodic checkpoints kept before the step that failed. */
static const char *written_note(char *buf, size_t cap)
{
    if (!ck_kept && !ck_pending)
        return nothing_written;
    char kept[160], gone[160] = "";
    if (ck_kept)
        snprintf(kept, sizeof kept, "holds the checkpoint after step %d (the last whose next step had a finite loss "
                                    "and gradients)", ck_kept);
    else
        snprintf(kept, sizeof kept, "keeps its previous content");
    if (ck_pending)
        snprintf(gone, sizeof gone, "; the checkpoint after step %d was discarded", ck_pending);
    snprintf(buf, cap, "--checkpoint-out %s %s%s; nothing else was written (--weights-out and every other output "
                       "keep their previous content)",
             ck_out, kept, gone);
    return buf;
}

static const char *fmt_loss(char *buf, size_t cap, double loss)
{
    snprintf(buf, cap, "%s", isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf");
    return buf;
}

/* Bring the parameters (grads = 0) or their gradients from the run arena into H (no-op on the CPU). */
static void download_params(tr_ctx *c, float *H, const float *A, int grads)
{
    const tr_rank_desc *d = c->desc;
    for (int i = 0; i < d->nparams; i++) {
        long long off = grads ? d->params[i].grad_offset : d->params[i].offset;
        tr_backend_download(c, H + off, A + off, (long long)d->params[i].rows * d->params[i].cols);
    }
}

/* The loss before the update of step k is not finite (k = steps + 1: after the last step). Name the first
 * non-finite weight, or, when every weight is finite, the largest one: the forward overflowed. */
static void diverged_loss(tr_ctx *c, float *H, const float *A, int k, double loss)
{
    const tr_rank_desc *d = c->desc;
    char ls[16], what[512], when[64], note[1024];
    tr_backend_sync(c);
    download_params(c, H, A, 0);
    int idx = find_nonfinite(d, H, 0, what, sizeof what);
        double max = 0;
    char big[256] = "";
    if (idx < 0)
        tr_gather_max_abs(d, H, &max, big, sizeof big);
    if (d->rank != 0)
        return;
    if (k == 1)
        snprintf(when, sizeof when, "as loaded");
    else
        snprintf(when, sizeof when, "after the update of step %d", k - 1);
    if (idx >= 0) {
        fprintf(stderr, "error: training stopped at step %d: the loss is %s; the weights are not finite %s: %s "
                        "(the first such tensor in model order); lower optimizer.lr (now %g) or check the inputs; "
                        "%s\n",
                k, fmt_loss(ls, sizeof ls, loss), when, what, tr_model.lr, written_note(note, sizeof note));
    } else {
        fprintf(stderr, "error: training stopped at step %d: the loss is %s although every weight is finite: the "
                        "forward overflowed; the largest weight is %s with |w| = %g %s; lower optimizer.lr (now %g); "
                        "%s\n",
                k, fmt_loss(ls, sizeof ls, loss), big, max, when, tr_model.lr,
                written_note(note, sizeof note));
    }
}

/* Test hook TESS_TEST_NAN_GRADIENT=STEP,RANK: after the backward of step STEP, a NaN in the last element of RANK's
 * shard of the last gradient (in the run arena); proves the divergence check can fail. */
static bool nan_gradient_at(const tr_rank_desc *d, int k)
{
    const char *poison = getenv("TESS_TEST_NAN_GRADIENT");
    int ps, pr;
    return poison && sscanf(poison, "%d,%d", &ps, &pr) == 2 && ps == k && pr == d->rank && d->nparams > 0;
}

static void test_nan_gradient(tr_ctx *c, float *H, float *A, int k)
{
    const tr_rank_desc *d = c->desc;
    if (!nan_gradient_at(d, k))
        return;
    const tr_param *p = &d->params[d->nparams - 1];
    long long at = p->grad_offset + (long long)p->rows * p->cols - 1;
    tr_backend_sync(c);
    H[at] = NAN;
    tr_backend_upload(c, A + at, H + at, 1);
}

/* The gradient norm of step k is not finite (tr_clip_norm): name the first non-finite gradient tensor and stop
 * before the update, so the weights stay those after step k-1. Collective. */
static void grads_diverged(tr_ctx *c, float *H, const float *A, int k, double loss)
{
    const tr_rank_desc *d = c->desc;
    tr_backend_sync(c);
    download_params(c, H, A, 1);
    char what[512], note[1024];
    if (find_nonfinite(d, H, 1, what, sizeof what) < 0)
        snprintf(what, sizeof what, "no single element (their global norm overflowed)");
    if (d->rank == 0) {
        fprintf(stderr, "error: training stopped at step %d: the loss %.9g is finite but the gradient is not: the "
                        "gradient of %s (the first such tensor in model order); the backward overflowed; lower "
                        "optimizer.lr (now %g) or check the inputs; %s\n",
                k, loss, what, tr_model.lr, written_note(note, sizeof note));
    }
}


/* Before --weights-out: never write non-finite weights over a file (H holds the run arena's copy). */
static bool weights_out_finite(const tr_rank_desc *d, const float *H)
{
    char what[512], note[1024];
    if (find_nonfinite(d, H, 0, what, sizeof what) < 0)
        return true;
    if (d->rank == 0)
        fprintf(stderr, "error: the weights are not finite: %s; %s\n", what, written_note(note, sizeof note));
    return false;
}

/* The data this run trains on, as the checkpoint records it (tr_ckpt_set_data). */
static void data_record(const tr_opts *o, char *buf, size_t cap)
{
    const char *opt[2], *val[2];
    int n = 0;
    if (o->data.data) {
        opt[n] = "--data";
        val[n++] = o->data.data;
    }
    if (o->lm.tokens) {
        opt[n] = "--tokens";
        val[n++] = o->lm.tokens;
    }
    if (o->lm.targets && n < 2) {
        opt[n] = "--targets";
        val[n++] = o->lm.targets;
    }
    if (o->input && n < 2) {
        opt[n] = "--input";
        val[n++] = o->input;
    }
    if (o->target && n < 2) {
        opt[n] = "--target";
        val[n++] = o->target;
    }
    if (n == 0)
        snprintf(buf, cap, "synthetic");
    else if (n == 1)
        snprintf(buf, cap, "%s %s", opt[0], val[0]);
    else
        snprintf(buf, cap, "%s %s %s %s", opt[0], val[0], opt[1], val[1]);
}

/* --resume: the checkpoint's weights and moments into H (tr_ckpt.c), its step and (without --seed) its seed. */
static bool resume(const tr_rank_desc *d, tr_opts *o, float *H, tr_ckpt_state *st)
{
    tr_err err = {{0}};
    if (!tr_ckpt_resume(d, o->resume, o->reshard, o->steps && !o->data_change, H, st, &err)) {
        if (d->rank == 0)
            fprintf(stderr, "%s\n", err.msg);
        return false;
    }
    if (st->step > INT_MAX - o->steps) {
        if (d->rank == 0)
            fprintf(stderr, "%s: step %lld of the checkpoint and --steps %d overflow the step counter\n", o->resume,
                    st->step, o->steps);
        return false;
    }
    if (d->rank == 0 && !o->quiet) {
        const char *dtype = tr_model.dtype ? tr_model.dtype : "fp32";
        bool redtype = st->dtype[0] && strcmp(st->dtype, dtype) != 0;
        printf("resumed from %s after step %lld (seed %llu%s%s%s%s%s%s%s)\n", o->resume, st->step,
               (unsigned long long)(o->seed_set ? o->seed : st->seed),
               o->seed_set && o->seed != st->seed ? ", from --seed: the checkpoint's run used another" : "",
               strcmp(st->mesh, tr_mesh_text()) != 0 ? "; re-sharded from mesh " : "",
               strcmp(st->mesh, tr_mesh_text()) != 0 ? st->mesh : "", redtype ? "; trained in " : "",
               redtype ? st->dtype : "", redtype ? ", continued in " : "", redtype ? dtype : "");
        if (!st->dtype[0])
            printf("note: the checkpoint does not record its dtype (written by an earlier tessgen): not checked\n");
        if (st->note[0])
            printf("note: this build's optimizer settings differ from the checkpoint's, and are used: %s\n",
                   st->note);
        if (o->steps && !st->data[0])
            printf("note: the checkpoint does not record the data it was trained on (written by an earlier "
                   "tessgen): not checked\n");
        else if (o->data_change && strcmp(st->data, tr_ckpt_data()) != 0)
            printf("note: --data-change: the checkpoint was trained on %s; this run trains on %s\n",
                   strcmp(st->data, "synthetic") == 0 ? "synthetic data" : st->data,
                   strcmp(tr_ckpt_data(), "synthetic") == 0 ? "synthetic data" : tr_ckpt_data());
    }
    if (!o->steps && st->data[0])
        tr_ckpt_set_data(st->data); /* no step trains here: a checkpoint written keeps what its steps saw */
    if (!o->seed_set)
        o->seed = st->seed;
    return true;
}

/* --checkpoint-out after `step` steps: the weights and moments from the run arena, then tr_ckpt_write; periodic:
 * to the pending path, kept by keep_pending once the next step is known good. Returns 0, 1 (not written) or 5
 * (non-finite weights: diverged, not written). */
static int write_checkpoint(tr_ctx *c, const tr_opts *o, float *H, const float *A, int step, int periodic)
{
    const char *path = periodic ? ck_pending_path : ck_out;
    const tr_rank_desc *d = c->desc;
    tr_err err = {{0}};
    tr_backend_sync(c);
    for (int i = 0; i < d->nparams; i++) {
        const tr_param *p = &d->params[i];
        long long n = (long long)p->rows * p->cols, nm = p->shard > 0 ? p->shard : n; /* optimizer.shard: a slice */
        tr_backend_download(c, H + p->offset, A + p->offset, n);
        tr_backend_download(c, H + p->m_offset, A + p->m_offset, nm);
        tr_backend_download(c, H + p->v_offset, A + p->v_offset, nm);
    }
    if (!weights_out_finite(d, H))
        return 5;
    if (!tr_ckpt_write(d, c->comm[TR_DEP], H, path, step, o->seed, &err)) {
        if (d->rank == 0)
            fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (periodic)
        ck_pending = step;
    else if (d->rank == 0 && !o->quiet)
        printf("wrote %s (checkpoint after step %d)\n", ck_out, step);
    return 0;
}

/* Test hook TESS_TEST_WARMUP_SECONDS=S: S seconds of GEMM time added to the run's first step, as a library's first
 * calls add them on a GPU; proves --timing's per-kind seconds leave the warm-up step out. */
static void test_warmup(tr_ctx *c)
{
    const char *env = getenv("TESS_TEST_WARMUP_SECONDS");
    if (env && c->timing)
        c->seconds[TR_K_GEMM] += atof(env);
}

/* Test hook TESS_TEST_DIVERGE=STEP: after the update of step STEP every weight is multiplied by 1e30 (finite, as
 * a run that diverges leaves them), so the next loss overflows; proves a diverged step never replaces a
 * checkpoint. */
static void test_diverge(tr_ctx *c, float *H, float *A, int k)
{
    const char *env = getenv("TESS_TEST_DIVERGE");
    if (!env || atoi(env) != k)
        return;
    const tr_rank_desc *d = c->desc;
    tr_backend_sync(c);
    for (int i = 0; i < d->nparams; i++) {
        const tr_param *p = &d->params[i];
        long long n = (long long)p->rows * p->cols;
        tr_backend_download(c, H + p->offset, A + p->offset, n);
        for (long long e = 0; e < n; e++)
            H[p->offset + e] *= 1e30f;
        tr_backend_upload(c, A + p->offset, H + p->offset, n);
        if (p->w16_offset >= 0) { /* bf16 training: the GEMMs read the weight's bf16 copy */
            weight_copy(p, H);
            tr_backend_upload(c, A + p->w16_offset, H + p->w16_offset, (n + 1) / 2);
        }
    }
}

/* Step k's loss and gradients are finite: the pending checkpoint of step k-1 replaces --checkpoint-out. Returns
 * 0 or 1 (the rename failed; the previous checkpoint is kept). */
static int keep_pending(const tr_rank_desc *d, const tr_opts *o)
{
    tr_err err = {{0}};
    if (!ck_pending)
        return 0;
    if (!tr_ckpt_promote(d, ck_pending_path, ck_out, &err)) {
        if (d->rank == 0)
            fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (d->rank == 0 && !o->quiet)
        printf("wrote %s (checkpoint after step %d)\n", ck_out, ck_pending);
    ck_kept = ck_pending;
    ck_pending = 0;
    return 0;
}

/* reps: the n runs' wall times (median, min, max); the step kinds' seconds are c->seconds over nk runs (a training
 * run's per-kind sums leave its warm-up step out, so nk = n - 1 there) */
static void report_timing(tr_ctx *c, double *reps, int n, int nk, const char *what)
{
    qsort(reps, (size_t)n, sizeof *reps, cmp_double);
    double kinds[TR_NKINDS], kmax[TR_NKINDS];
    for (int k = 0; k < TR_NKINDS; k++)
        kinds[k] = c->seconds[k] / (nk > 0 ? nk : 1);
    MPI_Reduce(kinds, kmax, TR_NKINDS, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (c->desc->rank != 0)
        return;
    printf("%s: median %.6f s over %d runs (min %.6f, max %.6f)\n", what, reps[n / 2], n, reps[0], reps[n - 1]);
    printf("per %s, slowest rank, by step kind:\n", what);
    for (int k = 0; k < TR_NKINDS; k++)
        printf("  %-10s %.6f s\n", tr_kind_name((tr_kind)k), kmax[k]);
    printf("%s_seconds_median=%.9f\n", what, reps[n / 2]);
    for (int k = 0; k < TR_NKINDS; k++)
        printf("%s_seconds=%.9f\n", tr_kind_name((tr_kind)k), kmax[k]);
}

/* --timing of a training run on a backend with a device: the host's waits for it per step (the slowest rank's
 * mean; tr_backend_host_syncs counts them), between the step's start and the end of its optimizer's issue. */
static void report_syncs(tr_ctx *c, long long syncs, int steps)
{
    if (tr_backend_host_syncs(c) < 0 || steps <= 0)
        return;
    double mine = (double)syncs / steps, max = 0;
    MPI_Reduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (c->desc->rank != 0)
        return;
    printf("host synchronisations per step: %g (slowest rank; each a wait of the host for the device)\n", max);
    printf("step_host_syncs=%g\n", max);
}

/* --timing of a training run (what: "step"), --repeat (what: "forward") or --generate (what: "decode") on a backend
 * that counts its launches: kernels, GEMMs and collectives per step, forward or decode step, how many of them the host
 * issued one by one, and the graph replays (the slowest rank's means over the steps after the first, a warm-up issued
 * one by one, when there are several; over the repeats, after their own warm-up). */
static void report_launches(tr_ctx *c, const tr_launch_counts *n, int steps, const char *what)
{
    tr_launch_counts any;
    if (!tr_backend_launch_counts(c, &any) || steps <= 0)
        return;
    double mine[3] = {(double)(n->issued + n->replayed) / steps, (double)n->issued / steps,
                      (double)n->replays / steps},
           max[3] = {0, 0, 0};
    MPI_Reduce(mine, max, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (c->desc->rank != 0)
        return;
    const char *note = tr_backend_graph_note(c);
    printf("launches per %s: %g kernels, GEMMs and collectives, %g of them issued one by one; CUDA graph replays "
           "per %s: %g\n",
           what, max[0], max[1], what, max[2]);
    if (note)
        printf("%s\n", note);
    printf("%s_launches=%g\n%s_launches_issued=%g\n%s_graph_replays=%g\n", what, max[0], what, max[1], what, max[2]);
}

/* A training step's first part (tr_backend.h TR_PART_GRADS): forward, objective, backward, gradient sums. record:
 * the step is recorded whole (--trace, --stats), its slices apart. */
static void issue_grads(tr_ctx *c, float *H, float *A, int k, bool record)
{
    const tr_rank_desc *d = c->desc;
    /* micro-batches: forward, objective, backward of each in turn. The objective of each covers its own rows of the
     * output block and adds its loss to the step's (tr_backend_objective), so the read sees the whole batch's.
     * Pipeline stages: the stage's generated schedule (its objectives on the last stage) */
    if (piped())
        tr_pipe_class.step(c, A);
    for (c->mb = 0; c->mb < microbatches() && !piped(); c->mb++) {
        c->phase = TR_PHASE_FORWARD;
        d->forward(c, A);
        if (record) {
            tr_backend_sync(c);
            tr_step_mark(c, -1); /* the loss and dL/dy: between the slices */
        }
        tr_backend_objective(c, A);
        c->phase = TR_PHASE_BACKWARD;
        d->backward(c, A);
    }
    c->mb = 0;
    if (record) {
        tr_backend_sync(c);
        tr_step_mark(c, -1); /* the divergence check: between the slices */
    }
    test_nan_gradient(c, H, A, k);
    tr_backend_grad_sums(c, A);
}

/* Its second part (TR_PART_UPDATE): clipping by scale (1: none; a backend with a device reads it where
 * tr_backend_step_scalars put it) and the optimizer. */
static void issue_update(tr_ctx *c, float *A, float scale)
{
    if (tr_model.clip > 0)
        tr_backend_scale_grads(c, A, scale);
    c->phase = TR_PHASE_OPTIMIZER;
    c->desc->optimizer(c, A);
}

/* ---- generation (mode = "generate"; docs/GENERATE.md) --------------------------------------------------------- */


/* Rank 0 reads and checks the prompt file (int32 [n, L], n <= batch, L <= seq, each row a prompt left-aligned and
 * ended by -1 pads, at least one token, every id in [0, vocab), L + max_new <= context); every rank gets the ids
 * [batch, seq] (-1 beyond a prompt; rows n.. a one-token prompt of id 0, run and dropped) and n, L. */
static bool gen_prompts(const tr_opts *o, int32_t *ids, int *n_out, int *L_out, tr_err *err)
{
    int B = tr_model.batch, S = tr_model.seq, V = tr_lm_vocab(), N = tr_gen_class.context;
    int hdr[3] = {0, 0, 0}, rank; /* ok, n, L */
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        tr_npy f;
        bool ok = tr_npy_open_i32(&f, o->prompts, err);
        if (ok && (f.ndim != 2 || f.shape[0] < 1 || f.shape[0] > B || f.shape[1] < 1 || f.shape[1] > S))
            ok = tr_fail(err, "%s: --prompt-tokens must be int32 [sequences, L] with 1 <= sequences <= model.batch = %d "
                              "and 1 <= L <= model.seq = %d (the longest prompt), got %d dimension(s)%s; nothing was "
                              "run", o->prompts, B, S, f.ndim, f.ndim == 2 ? " of the wrong size" : "");
        if (ok && f.shape[1] + o->max_new > N)
            ok = tr_fail(err, "%s: prompt length %lld + --max-new %d = %lld tokens exceed model.context = %d (the KV "
                              "cache); use --max-new <= %lld or a spec with a larger context; nothing was run",
                         o->prompts, (long long)f.shape[1], o->max_new, (long long)f.shape[1] + o->max_new, N,
                         (long long)(N - f.shape[1]));
        if (ok) {
            int n = (int)f.shape[0], L = (int)f.shape[1];
            for (int b = 0; b < B; b++)
                for (int p = 0; p < S; p++)
                    ids[(long)b * S + p] = b >= n ? (p == 0 ? 0 : -1) : -1;
            for (int b = 0; b < n && ok; b++) {
                int ended = 0;
                for (int p = 0; p < L && ok; p++) {
                    int32_t v;
                    memcpy(&v, f.map + f.data_off + 4 * ((long)b * L + p), 4);
                    if (v == -1 && p > 0) {
                        ended = 1;
                    } else if (v < 0 || v >= V || ended) {
                        ok = tr_fail(err, "%s: prompt[%d, %d] = %d is %s: every prompt is token ids in [0, %d) "
                                          "(model.vocab), left-aligned, then -1 pads to the end of its row; nothing was "
                                          "run", o->prompts, b, p, (int)v,
                                     ended ? "after a -1 pad" : "not a token id", V);
                    } else {
                        ids[(long)b * S + p] = v;
                    }
                }
            }
            hdr[1] = n;
            hdr[2] = L;
        }
        tr_npy_close(&f);
        hdr[0] = ok;
    }
    MPI_Bcast(hdr, 3, MPI_INT, 0, MPI_COMM_WORLD);
    if (!hdr[0])
        return false;
    MPI_Bcast(ids, B * S, MPI_INT32_T, 0, MPI_COMM_WORLD);
    *n_out = hdr[1];
    *L_out = hdr[2];
    return true;
}

/* Rank 0 collects every rank's [nseq, vq] logits block lg (of row block h, vocab block j) into all [B, V]. */
static void gen_gather_logits(const tr_rank_desc *d, const float *lg, int nseq, float *all, int transposed)
{
    int vq = tr_lm()->vq, V = tr_lm_vocab(), q = tr_model.q;
    float *buf = d->rank == 0 ? malloc((size_t)tr_model.p * nseq * vq * sizeof *buf) : NULL;
    MPI_Gather(lg, nseq * vq, MPI_FLOAT, buf, nseq * vq, MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (d->rank != 0)
        return;
    for (int r = 0; r < tr_model.p; r++) {
        int i, j, k;
        tr_rank_coord(r, &i, &j, &k);
        if (transposed) { /* the weight-stationary decode head: rank (i,j) holds row block j, vocab block i */
            int t = i;
            i = j;
            j = t;
        }
        int h = i + q * k;
        for (int s = 0; s < nseq; s++)
            for (int v = 0; v < vq && j * vq + v < V; v++)
                all[(long)(h * nseq + s) * V + j * vq + v] = buf[((long)r * nseq + s) * vq + v];
    }
    free(buf);
}

/* Sampling (--temperature, --top-k, --top-p): the next id of every sequence of this rank's depth from lg, the logits
 * [nseq, vq] of its row block's sequences (vocab block j), the one at position len[b] + off of sequence b: the
 * members of the row sample their row block's alike (tr_sample_rows), then a max all-reduce over the column gives
 * every rank the ids of the q row blocks of its depth (transposed, the weight-stationary decode head's logits: row
 * block j, vocab block i, sampled by the column, the ids all-reduced over the row). These exchanges are the runtime's, outside the plan (--bytes
 * counts the plan's steps; the program's greedy pairs are still computed and dropped). */
static bool gen_sample(tr_ctx *c, const tr_opts *o, const float *lg, int nseq, const int32_t *len, int off,
                       int32_t *next, int transposed)
{
    const tr_rank_desc *d = c->desc;
    /* transposed (the weight-stationary decode head): lg is row block j's, vocab block i; the column shares it */
    int rb = transposed ? d->j : d->i, vb = transposed ? d->i : d->j;
    tr_group share = transposed ? TR_COL : TR_ROW, other = transposed ? TR_ROW : TR_COL;
    int q = tr_model.q, h = rb + q * d->k;
    int *key = malloc((size_t)2 * nseq * sizeof *key);
    int32_t *pick = malloc((size_t)q * nseq * sizeof *pick);
    tr_sample_opts so = o->sample;
    so.seed = o->seed;
    bool ok = key && pick;
    for (int s = 0; ok && s < nseq; s++) {
        key[s] = h * nseq + s;
        key[nseq + s] = len[h * nseq + s] + off;
    }
    for (int e = 0; ok && e < q * nseq; e++)
        pick[e] = INT32_MIN;
    ok = tr_sample_rows(c->comm[share], vb, lg, ok ? nseq : 0, tr_lm()->vq, tr_lm_vocab(), key, key + nseq, &so,
                        pick + (long)rb * nseq) && ok;
    MPI_Allreduce(MPI_IN_PLACE, pick, q * nseq, MPI_INT32_T, MPI_MAX, c->comm[other]);
    for (int t = 0; ok && t < q; t++)
        for (int s = 0; s < nseq; s++)
            next[(t + q * d->k) * nseq + s] = pick[t * nseq + s];
    free(key);
    free(pick);
    return ok;
}

/* The prefill, then decode steps until every sequence of this rank's depth has max_new new tokens or its end-of-text
 * id; the ids (prompt, then the new ones, then -1) to o->output on rank 0, the logits of every new token to
 * --logits-out [sequences, max_new, vocab]. Depths run independently (their groups never mix). *ndec: decode steps.
 * The host arena H mirrors the blocks the runtime writes (prefill tokens, decode tokens and positions: uploaded to
 * the run arena A) and reads (argmax pairs; the logits only where --logits-out or sampling reads them: downloaded);
 * on the CPU the two are one memory. The decode step is a part (tr_backend.h TR_PART_DECODE): the first is issued
 * launch by launch (the warm-up), the second captured, later ones replayed where the backend can (docs/CUDA.md "CUDA
 * graphs"); the tokens and positions are uploaded before it, outside the part, and its kernels read them there. */
static int gen_run(tr_ctx *c, const tr_opts *o, float *H, float *A, long long *ndec)
{
    const tr_rank_desc *d = c->desc;
    const tr_gen_desc *g = &tr_gen_class;
    int B = tr_model.batch, S = tr_model.seq, q = tr_model.q, V = tr_lm_vocab(), M = o->max_new;
    int nseq = B / (q * tr_model.d), R = d->io_rows, n = 0, L = 0, W;
    tr_err err = {{0}};
    int32_t *ids = malloc((size_t)B * S * sizeof *ids);
    if (!ids || !gen_prompts(o, ids, &n, &L, &err)) {
        if (d->rank == 0)
            fprintf(stderr, "%s\n", ids ? err.msg : "out of memory");
        free(ids);
        return 1;
    }
    W = L + M;
    bool ok = tr_backend_graph_init(c, &err); /* TESS_CUDA_GRAPH and the collectives: whether decode steps replay */
    if (!all_ok(ok)) {
        if (!ok)
            fprintf(stderr, "rank %d: %s backend: %s\n", d->rank, tr_backend_name(), err.msg);
        free(ids);
        return 1;
    }
    const char *graph_note = tr_backend_graph_note(c);
    if (graph_note && d->rank == 0 && !o->quiet)
        printf("%s\n", graph_note);
    /* the logits are read only to write --logits-out and to sample: a greedy run without --logits-out downloads the
     * (max, id) pairs alone */
    const bool want_lg = o->lm.logits_out || o->sample.on;
    int32_t *out = malloc((size_t)B * W * sizeof *out), *len = malloc((size_t)B * sizeof *len);
    int32_t *next = malloc((size_t)B * sizeof *next), *done = calloc((size_t)B, sizeof *done);
    float *lg = malloc((size_t)nseq * tr_lm()->vq * sizeof *lg);
    float *lall = o->lm.logits_out && d->rank == 0 ? malloc((size_t)n * M * V * sizeof *lall) : NULL;
    float *step_l = o->lm.logits_out && d->rank == 0 ? malloc((size_t)B * V * sizeof *step_l) : NULL;
    int32_t *emitted = o->stream ? malloc((size_t)B * sizeof *emitted) : NULL; /* [B] --stream: this step's ids */
    if (!out || !len || !next || !done || !lg || (o->stream && !emitted) || (o->lm.logits_out && d->rank == 0 &&
                                                                            (!lall || !step_l))) {
        fprintf(stderr, "rank %d: out of memory for the generated ids of %d sequences\n", d->rank, B);
        MPI_Abort(MPI_COMM_WORLD, 1); /* the other ranks are inside the collective steps */
    }
    for (int b = 0; b < B; b++) {
        len[b] = 0;
        while (len[b] < S && ids[(long)b * S + len[b]] >= 0)
            len[b]++;
        for (int p = 0; p < W; p++)
            out[(long)b * W + p] = p < len[b] ? ids[(long)b * S + p] : -1;
    }
    /* the prefill's tokens: the q row blocks of this depth, -1 pads as id 0 (causal: they never reach a prompt) */
    int32_t *tok = (int32_t *)(H + tr_lm()->tok_offset);
    for (int t = 0; t < q; t++)
        for (int s = 0; s < nseq; s++)
            for (int p = 0; p < S; p++) {
                int32_t v = ids[((long)(t + q * d->k) * nseq + s) * S + p];
                tok[((long)t * nseq + s) * S + p] = v < 0 ? 0 : v;
            }
    tr_backend_upload(c, A + tr_lm()->tok_offset, H + tr_lm()->tok_offset, (long long)q * nseq * S);
    double t_pre = tr_now();
    c->desc->forward(c, A);
    tr_backend_sync(c); /* the prefill's time is its work's, not its issue's */
    t_pre = tr_now() - t_pre;
    /* --timing: each decode step's wall time (the step and the choice of the next ids), and the step kinds' */
    double *reps = o->timing ? calloc((size_t)M + 1, sizeof *reps) : NULL;
    if (reps) {
        memset(c->seconds, 0, sizeof c->seconds);
        c->timing = 1;
    }
    /* every row's (max logit, id) pair of the q row blocks; the logits of each sequence's last prompt token */
    tr_backend_download(c, H + g->pairs_offset, A + g->pairs_offset, 2LL * q * R);
    const float *pairs = H + g->pairs_offset;
    const float *plog = H + tr_lm()->logits_offset;
    for (int s = 0; s < nseq && want_lg; s++) {
        long long at = ((long long)s * S + len[(d->i + q * d->k) * nseq + s] - 1) * tr_lm()->vq;
        tr_backend_download(c, H + tr_lm()->logits_offset + at, A + tr_lm()->logits_offset + at, tr_lm()->vq);
    }
    for (int t = 0; t < q; t++)
        for (int s = 0; s < nseq; s++) {
            int b = (t + q * d->k) * nseq + s;
            memcpy(&next[b], &pairs[2 * ((long)t * R + (long)s * S + len[b] - 1) + 1], 4);
        }
    for (int s = 0; s < nseq && want_lg; s++) /* this row block's logits of each sequence's last prompt token */
        memcpy(lg + (long)s * tr_lm()->vq, plog + ((long)s * S + len[(d->i + q * d->k) * nseq + s] - 1) * tr_lm()->vq,
               (size_t)tr_lm()->vq * sizeof *lg);
    bool sampled = !o->sample.on || gen_sample(c, o, lg, nseq, len, 0, next, 0);
    *ndec = 0;
    tr_launch_counts n0 = {0, 0, 0}, n1 = {0, 0, 0}; /* --timing: the decode steps' launches after the warm-up */
    for (int m = 0;; m++) {
        if (o->lm.logits_out) {
            gen_gather_logits(d, lg, nseq, step_l, m > 0 && g->dec_logits_t); /* m = 0: the prefill's */
            for (int b = 0; b < n && lall; b++)
                memcpy(lall + ((long)b * M + m) * V, step_l + (long)b * V, (size_t)V * sizeof *lall);
        }
        int live = 0;
        for (int b = 0; b < B && emitted; b++)
            emitted[b] = INT32_MIN; /* the other depths' sequences: their ranks fill them in */
        for (int t = 0; t < q; t++)
            for (int s = 0; s < nseq; s++) {
                int b = (t + q * d->k) * nseq + s;
                if (emitted)
                    emitted[b] = done[b] ? -1 : next[b];
                if (!done[b]) {
                    out[(long)b * W + len[b] + m] = next[b];
                    done[b] = next[b] == o->eos || m + 1 == M;
                }
                live |= !done[b];
            }
        if (emitted) { /* --stream: this step's ids of every depth to rank 0, printed at once */
            MPI_Reduce(d->rank == 0 ? MPI_IN_PLACE : emitted, emitted, B, MPI_INT32_T, MPI_MAX, 0, MPI_COMM_WORLD);
            if (d->rank == 0) {
                printf("tokens %d", m);
                for (int b = 0; b < n; b++)
                    printf(" %d", (int)emitted[b]);
                printf("\n");
                fflush(stdout);
            }
        }
        /* --logits-out and --stream need every step on every rank (their gathers are over the world) */
        int any = live;
        if (o->lm.logits_out || emitted)
            MPI_Allreduce(&live, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (!any)
            break;
        int32_t *dtok = (int32_t *)(H + g->dtok_offset), *dpos = (int32_t *)(H + g->dpos_offset);
        for (int t = 0; t < q; t++)
            for (int s = 0; s < nseq; s++) {
                int b = (t + q * d->k) * nseq + s;
                dtok[t * nseq + s] = next[b];
                if (t == d->i) /* a finished sequence keeps a valid position: its row is computed and dropped */
                    dpos[s] = len[b] + (m < M - 1 ? m : M - 2);
            }
        tr_backend_upload(c, A + g->dtok_offset, H + g->dtok_offset, (long long)q * nseq);
        tr_backend_upload(c, A + g->dpos_offset, H + g->dpos_offset, nseq);
        double t0 = tr_now();
        if (*ndec == 1)
            tr_backend_launch_counts(c, &n0);
        /* the first decode step is the warm-up, issued launch by launch; a step recorded for --trace / --stats too */
        if (!tr_backend_part_begin(c, TR_PART_DECODE, *ndec > 0 && !o->trace && !o->stats))
            do
                g->decode(c, A);
            while (!tr_backend_part_end(c, TR_PART_DECODE));
        tr_backend_download(c, H + g->dpairs_offset, A + g->dpairs_offset, 2LL * q * nseq);
        if (want_lg)
            tr_backend_download(c, H + g->dlogits_offset, A + g->dlogits_offset, (long long)nseq * tr_lm()->vq);
        const float *dp = H + g->dpairs_offset;
        for (int t = 0; t < q; t++)
            for (int s = 0; s < nseq; s++)
                memcpy(&next[(t + q * d->k) * nseq + s], &dp[2 * ((long)t * nseq + s) + 1], 4);
        if (want_lg)
            memcpy(lg, H + g->dlogits_offset, (size_t)nseq * tr_lm()->vq * sizeof *lg);
        if (o->sample.on)
            sampled = gen_sample(c, o, lg, nseq, len, m + 1, next, g->dec_logits_t) && sampled;
        if (reps)
            reps[*ndec] = tr_now() - t0;
        (*ndec)++;
    }
    if (reps) { /* every rank reports (a collective); one that ran no decode step counts a step of 0 s */
        c->timing = 0;
        if (d->rank == 0)
            printf("prefill: %.6f s (rank 0)\nprefill_seconds=%.9f\n", t_pre, t_pre);
        report_timing(c, reps, *ndec > 0 ? (int)*ndec : 1, *ndec > 0 ? (int)*ndec : 1, "decode");
        free(reps);
        /* launches and graph replays per decode step after the first (the warm-up), where any rank ran two or more;
         * a rank that ran fewer counts a step of none */
        long long most = 0;
        MPI_Allreduce(ndec, &most, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
        if (*ndec > 1) {
            tr_backend_launch_counts(c, &n1);
            n1.issued -= n0.issued;
            n1.replayed -= n0.replayed;
            n1.replays -= n0.replays;
        }
        if (most > 1)
            report_launches(c, &n1, *ndec > 1 ? (int)*ndec - 1 : 1, "decode");
    }
    /* every depth's sequences to rank 0 */
    int32_t *mine = malloc((size_t)B * W * sizeof *mine), *all = d->rank == 0 ? malloc((size_t)B * W * sizeof *all) : NULL;
    for (long e = 0; e < (long)B * W; e++)
        mine[e] = INT32_MIN;
    for (int t = 0; t < q; t++)
        for (int s = 0; s < nseq; s++) {
            int b = (t + q * d->k) * nseq + s;
            memcpy(mine + (long)b * W, out + (long)b * W, (size_t)W * sizeof *mine);
        }
    MPI_Reduce(mine, all, B * W, MPI_INT32_T, MPI_MAX, 0, MPI_COMM_WORLD);
    int rc = 0, sampled_all = sampled;
    MPI_Allreduce(MPI_IN_PLACE, &sampled_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!sampled_all) {
        if (d->rank == 0)
            fprintf(stderr, "out of memory while sampling the next ids; nothing was written\n");
        rc = 1;
    } else if (d->rank == 0) {
        int64_t shape[3] = {n, W, V};
        if (o->output && !tr_npy_write_i32_atomic(o->output, 2, shape, all, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            rc = 1;
        } else if (o->output && !o->quiet) {
            printf("wrote %s [%d, %d] (prompt and %d new token ids a sequence, -1 after its end)\n", o->output, n, W, M);
        }
        shape[1] = M;
        if (!rc && lall && !tr_npy_write_atomic(o->lm.logits_out, 3, shape, lall, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            rc = 1;
        } else if (!rc && lall && !o->quiet) {
            printf("wrote %s [%d, %d, %d] (the logits of every new token)\n", o->lm.logits_out, n, M, V);
        }
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(mine);
    free(all);
    free(ids);
    free(out);
    free(len);
    free(next);
    free(done);
    free(lg);
    free(lall);
    free(step_l);
    free(emitted);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *prog = argc > 0 ? argv[0] : "model";
    long long gen_ndec = -1; /* run --generate: the decode steps it ran (--bytes) */

    if (size != tr_model.p) {
        if (rank == 0)
            fprintf(stderr,
                    "%s: this program was built for mesh %s = %d ranks but was started with %d rank%s.\n"
                    "Run it with %d ranks: the generated ./run next to bin/, or mpirun -np %d %s ..., or srun --mpi=pmix "
                    "-n %d %s ...;\nfor %d ranks, regenerate with a mesh of %d ranks (tessgen spec.lua).\n",
                    prog, tr_mesh_text(), tr_model.p, size, size == 1 ? "" : "s", tr_model.p,
                    tr_model.p, prog, tr_model.p, prog, size, size);
        MPI_Finalize();
        return 2;
    }

    tr_opts o;
    tr_lmdata ld = {0}; /* --data, --val-data: the token-shard loaders (tr_lmdata.h) */
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

    if (pa == 0 && (o.generate || o.prompts || o.max_new || o.eos >= 0 || o.sample.on || o.stream)) { /* generation's options (docs/GENERATE.md) */
        const char *why = &tr_gen_class == NULL ? "this program was not generated with mode = \"generate\" (the spec's "
                                                  "mode); regenerate with mode = \"generate\" and model.context"
                          : !o.generate ? "--prompt-tokens, --max-new, --eos, --temperature, --top-k, --top-p and "
                                          "--stream belong to --generate; add it"
                          : !o.prompts || !o.max_new ? "--generate needs --prompt-tokens P.npy and --max-new N"
                          : o.eos >= tr_lm_vocab() ? "--eos must be a token id below model.vocab"
                                                   : NULL;
        if (why) {
            if (rank == 0)
                fprintf(stderr, "%s: %s\n", prog, why);
            MPI_Finalize();
            return 2;
        }
    }
    if (o.checkpoint_out && o.ckpt_shards) /* the sharded checkpoint: written and promoted through its index */
        snprintf(ck_index_path, sizeof ck_index_path, "%s%s%s", o.checkpoint_out,
                 o.checkpoint_out[0] && o.checkpoint_out[strlen(o.checkpoint_out) - 1] == '/' ? "" : "/",
                 TR_STSET_INDEX);
    if (o.checkpoint_out) {
        ck_out = o.ckpt_shards ? ck_index_path : o.checkpoint_out;
        snprintf(ck_pending_path, sizeof ck_pending_path, "%s%s", ck_out, TR_CKPT_PENDING_SUFFIX);
    }
    /* every output can be written, or nothing runs */
    bool ok = rank == 0 ? check_outputs(&o, &err) && tr_lm_check_outputs(&o.lm, &err) : true;
    if (!root_ok(ok)) {
        if (rank == 0)
            fprintf(stderr, "%s\n", err.msg);
        MPI_Finalize();
        return 1;
    }

    tr_rank_desc self;
    if (!this_program(rank, &self)) {
        MPI_Finalize();
        return 2;
    }
    const tr_rank_desc *d = &self;
    if (rank == 0 && !o.quiet)
        printf("%s: mesh %s = %d ranks, %d layers; schedule %s, generated by tessgen %s from %s\n",
               tr_model.name, tr_mesh_text(), tr_model.p, tr_model.layers, tr_model.fingerprint,
               tr_model.tessgen_version, tr_model.spec_path);

    int rc = 0;
    tr_ctx ctx;
    ok = tr_ctx_init(&ctx, d, &err);
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
    ctx.arena_bytes = ok ? (long long)bytes : 0;
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
        ok = rank == 0 ? check_weights(d, o.weights, &err) : true;
        if (!root_ok(ok)) {
            if (rank == 0)
                fprintf(stderr, "%s\n", err.msg);
            rc = 1;
            goto out;
        }
    }
    const char *wprefix = "";
    ok = load_weights(d, &o, H, &wprefix, &err);
    if (!all_ok(ok)) {
        if (!ok)
            fprintf(stderr, "rank %d: %s\n", rank, err.msg);
        rc = 1;
        goto out;
    }
    if (tr_lm_vocab())
        tr_lm_zero_pad(d, H); /* the pad rows of wte (ids >= vocab): zero, never in a file */
    if (o.weights && !weights_finite(d, H, o.weights, wprefix)) {
        rc = 1;
        goto out;
    }
    char rec[TR_CKPT_DATA_CAP];
    data_record(&o, rec, sizeof rec);
    tr_ckpt_set_data(rec); /* what the checkpoints written record (a resume checks it first) */
    tr_ckpt_state resumed = {.step = 0, .seed = o.seed}; /* steps done before this run */
    if (o.resume && !resume(d, &o, H, &resumed)) {
        rc = 1;
        goto out;
    }
    const int step0 = (int)resumed.step;
    float *xh = H + d->x_offset; /* [io_rows, io_cols], host side */
    if (tr_lm_vocab()) {
        /* the language model: the embedding writes x; its inputs are token ids (tr_tokens.c) */
        if (!tr_lm_load_ids(d, &o.lm, o.seed, H)) {
            rc = 1;
            goto out;
        }
    } else if (o.input) {
        if (!load_bsc(d, o.input, "input", xh)) {
            rc = 1;
            goto out;
        }
    } else {
        tr_synth_block("input", o.seed, tr_model.hidden, d->io_r0, d->io_rows, d->io_c0, d->io_cols, xh, d->io_cols);
    }
    /* AdamW moments start at zero, or the checkpoint's (the rest of the arena stays poisoned until written) */
    for (int i = 0; i < d->nparams && !o.resume; i++)
        if (d->params[i].m_offset >= 0) /* optimizer.shard: the moments hold one slice */
            for (long long e = 0; e < (d->params[i].shard > 0 ? d->params[i].shard
                                                              : (long long)d->params[i].rows * d->params[i].cols);
                 e++)
                H[d->params[i].m_offset + e] = H[d->params[i].v_offset + e] = 0.0f;
    weight_copies(d, H);
    ok = tr_backend_init(&ctx, &err) && (A = tr_backend_arena(&ctx, H, d->arena_elems, &err)) != NULL;
    if (!all_ok(ok)) {
        if (!ok)
            fprintf(stderr, "rank %d: %s backend: %s\n", rank, tr_backend_name(), err.msg);
        rc = 1;
        goto out;
    }
    float *x = A + d->x_offset; /* the same block in the run arena */
    long long xn = (long long)d->io_rows * d->io_cols;
    if (o.data.data) {
        char ckpos[TR_CKPT_DATA_POS_CAP]; /* the resumed checkpoint's position, before the open resets it */
        snprintf(ckpos, sizeof ckpos, "%s", tr_ckpt_data_pos());
        if (!tr_lmdata_open(&ld, &o.data, d) || (o.resume && !tr_lmdata_resume(&ld, ckpos, d, o.quiet))) {
            rc = 1;
            goto out;
        }
        if (rank == 0 && !o.quiet) {
            char line[512];
            tr_data_describe(&ld.train, line, sizeof line);
            printf("data: %s\n", line);
            if (ld.have_val) {
                tr_data_describe(&ld.val, line, sizeof line);
                printf("val-data: %s; %d batch%s per validation\n", line, ld.val_batches,
                       ld.val_batches == 1 ? "" : "es");
            }
        }
    }

    /* --repeat: the forward captured once as a CUDA graph after its warm-up and replayed (docs/CUDA.md "CUDA graphs"),
     * the measured forward after the repeats too; pipeline stages exchange on the host between micro-batches */
    bool fwd_graph = o.repeat > 0 && !o.trace && !o.stats && !piped();
    if (o.repeat > 0) {
        ok = tr_backend_graph_init(&ctx, &err);
        if (!all_ok(ok)) {
            if (!ok)
                fprintf(stderr, "rank %d: %s backend: %s\n", rank, tr_backend_name(), err.msg);
            rc = 1;
            goto out;
        }
        const char *graph_note = tr_backend_graph_note(&ctx);
        if (graph_note && rank == 0 && !o.quiet)
            printf("%s\n", graph_note);
        /* inference updates x in place: restore the input block before each run, from a copy (where the run arena is
         * the host arena, as on the CPU, the host's block is the one the forward overwrites) */
        double *reps = malloc((size_t)o.repeat * sizeof *reps);
        float *x0 = malloc((size_t)xn * sizeof *x0);
        if (!reps || !x0) {
            fprintf(stderr, "rank %d: out of memory\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        memcpy(x0, xh, (size_t)xn * sizeof *x0);
        forward_all(&ctx, A); /* warm-up: what the libraries set up at their first call, outside any capture */
        tr_ctx_reset_counts(&ctx);
        ctx.timing = 1;
        tr_launch_counts n0, n1;
        tr_backend_launch_counts(&ctx, &n0);
        for (int r = 0; r < o.repeat; r++) {
            memcpy(xh, x0, (size_t)xn * sizeof *x0);
            tr_backend_upload(&ctx, x, xh, xn);
            tr_backend_sync(&ctx);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = tr_now();
            if (!tr_backend_part_begin(&ctx, TR_PART_FORWARD, fwd_graph))
                do
                    forward_all(&ctx, A);
                while (!tr_backend_part_end(&ctx, TR_PART_FORWARD));
            tr_backend_sync(&ctx);
            MPI_Barrier(MPI_COMM_WORLD);
            reps[r] = tr_now() - t0;
        }
        tr_backend_launch_counts(&ctx, &n1);
        n1.issued -= n0.issued;
        n1.replayed -= n0.replayed;
        n1.replays -= n0.replays;
        ctx.timing = 0;
        report_timing(&ctx, reps, o.repeat, o.repeat, "forward");
        report_launches(&ctx, &n1, o.repeat, "forward");
        memcpy(xh, x0, (size_t)xn * sizeof *x0);
        tr_backend_upload(&ctx, x, xh, xn);
        free(x0);
        free(reps);
    }

    float *yh = H + d->y_offset;
    int lm_bwd = tr_lm_vocab() && tr_model.mode && !o.steps && o.grads_out; /* one backward of the LM loss */
    if (o.steps > 0) {
        /* training: forward, loss and dL/dy, backward, AdamW; the loss printed is the one before the step */
        float *th = malloc((size_t)xn * sizeof *th);
        if (!th)
            MPI_Abort(MPI_COMM_WORLD, 1);
        if (tr_lm_vocab()) {
            /* the loss reads the target ids loaded above */
        } else if (o.target) {
            if (!load_bsc(d, o.target, "target", th)) {
                free(th);
                rc = 1;
                goto out;
            }
        } else {
            tr_synth_block("target", o.seed, tr_model.hidden, d->io_r0, d->io_rows, d->io_c0, d->io_cols, th,
                           d->io_cols);
        }
        /* the target where the loss runs, once; the batches of --data travel without a wait */
        ok = tr_backend_train_init(&ctx, A, tr_lm_vocab() ? NULL : th,
                                   ld.have_train || ld.have_val ? (long long)(tr_model.q + 1) * d->io_rows : 0, &err);
        if (!all_ok(ok)) {
            if (!ok)
                fprintf(stderr, "rank %d: %s backend: %s\n", rank, tr_backend_name(), err.msg);
            free(th);
            rc = 1;
            goto out;
        }
        double *reps = malloc((size_t)o.steps * sizeof *reps);
        if (!reps)
            MPI_Abort(MPI_COMM_WORLD, 1);
        double vloss;
        if (ld.have_val) { /* where validation starts from */
            if (!validate(&ctx, &ld, H, A, &vloss)) {
                free(reps);
                free(th);
                rc = 1;
                goto out;
            }
            if (rank == 0 && !o.quiet)
                printf("val step %d loss %.9g\n", step0, vloss);
        }
        ctx.timing = 1;
        long long step_syncs = 0; /* host waits for the device inside the steps (--timing) */
        tr_launch_counts step_launches = {0, 0, 0}; /* launches and graph replays inside the steps (--timing) */
        const char *graph_note = tr_backend_graph_note(&ctx);
        if (graph_note && rank == 0 && !o.quiet)
            printf("%s\n", graph_note);
        for (int k = step0 + 1; k <= step0 + o.steps; k++) { /* k: the step number, continued from a checkpoint */
            if (ld.have_train && !tr_lmdata_fill(&ctx, &ld.train, H, A)) { /* this step's batch */
                free(reps);
                free(th);
                rc = 1;
                goto out;
            }
            bool record = k == step0 + o.steps && (o.trace || o.stats); /* the last step, whole */
            if (record) { /* the recorded step's bytes alone (--stats); --timing's seconds keep the earlier steps' */
                double kept[TR_NKINDS];
                memcpy(kept, ctx.seconds, sizeof kept);
                tr_trace_begin(&ctx, true);
                tr_ctx_reset_counts(&ctx);
                memcpy(ctx.seconds, kept, sizeof kept);
            }
            /* a step recorded whole, or one a test hook writes into, is issued as it is; so is the run's first
             * step, a warm-up: what the libraries and the runtime set up at their first call (cuBLAS and cuBLASLt
             * handles and heuristics, the optimizer's launch table, its cudaMalloc) happens outside any capture.
             * The others may be replayed from CUDA graphs (docs/CUDA.md "CUDA graphs") */
            bool capture = !record && !nan_gradient_at(d, k) && k > step0 + 1;
            if (o.timing && k == step0 + 2) {
                /* --timing's seconds per step kind leave the warm-up step out, as its launch counts do: its spans
                 * hold the libraries' first calls (cuDNN's graph builds, cuBLASLt's heuristics), seconds that a
                 * mean over ten steps would spread over every kind's figure. Its events are read first (its
                 * optimizer's too); outside the timed step */
                tr_backend_sync(&ctx);
                memset(ctx.seconds, 0, sizeof ctx.seconds);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = tr_now();
            long long syncs0 = tr_backend_host_syncs(&ctx);
            tr_launch_counts n0;
            tr_backend_launch_counts(&ctx, &n0);
            /* the forward, the loss's local sum and dL/dy, the backward, the gradients' sums of squares: all
             * issued, then the step's one wait for the device (docs/CUDA.md "A training step") */
            if (!tr_backend_part_begin(&ctx, TR_PART_GRADS, capture))
                do
                    issue_grads(&ctx, H, A, k, record);
                while (!tr_backend_part_end(&ctx, TR_PART_GRADS));
            tr_step_sums sums;
            tr_backend_step_read(&ctx, &sums);
            if (k == step0 + 1)
                test_warmup(&ctx);
            double loss = mean_loss(d, sums.loss);
            if (!isfinite(loss)) {
                diverged_loss(&ctx, H, A, k, loss);
                free(reps);
                free(th);
                rc = 5;
                goto out;
            }
            int finite = 0;
            double norm = tr_clip_norm(d, sums.canon, sums.rest, &finite); /* computed with clipping or not */
            if (!finite) {
                grads_diverged(&ctx, H, A, k, loss);
                free(reps);
                free(th);
                rc = 5;
                goto out;
            }
            if ((rc = keep_pending(d, &o)) != 0) { /* step k-1's checkpoint: its next step is good */
                free(reps);
                free(th);
                goto out;
            }
            ctx.opt_step = k;
            ctx.lr = tr_sched_lr(tr_model.lr, tr_model.lr_min, tr_model.warmup, tr_model.decay_steps, k);
            float scale = 1.0f;
            if (!tr_clip_scale(norm, tr_model.clip, &scale))
                scale = 1.0f;
            tr_backend_step_scalars(&ctx, scale); /* what changes from step to step, where the step reads it */
            if (!tr_backend_part_begin(&ctx, TR_PART_UPDATE, capture))
                do
                    issue_update(&ctx, A, scale);
                while (!tr_backend_part_end(&ctx, TR_PART_UPDATE));
            test_diverge(&ctx, H, A, k);
            /* no wait here: the next step's read (or the sync after the loop) waits for this optimizer too */
            ctx.phase = TR_PHASE_FORWARD;
            if (record)
                tr_trace_end(&ctx); /* the final forward below is not recorded */
            MPI_Barrier(MPI_COMM_WORLD);
            double dt = reps[k - step0 - 1] = tr_now() - t0;
            step_syncs += tr_backend_host_syncs(&ctx) - syncs0;
            tr_launch_counts n1;
            tr_backend_launch_counts(&ctx, &n1);
            if (k > step0 + 1 || o.steps == 1) { /* the steady state: the warm-up step counts only when alone */
                step_launches.issued += n1.issued - n0.issued;
                step_launches.replayed += n1.replayed - n0.replayed;
                step_launches.replays += n1.replays - n0.replays;
            }
            if (ld.have_train)
                tr_lmdata_next(&ld); /* the next batch; a checkpoint written now continues from it */
            if (rank == 0 && !o.quiet) { /* the log line (docs/TRAINING.md): norm only when clipping computes it */
                printf("step %d loss %.9g lr %.9g", k, loss, ctx.lr);
                if (tr_model.clip > 0)
                    printf(" norm %.9g", norm);
                printf(" tok/s %.1f\n", (double)tr_model.batch * tr_model.seq / dt);
                fflush(stdout);
            }
            if (ld.have_val && ((o.data.val_every && k % o.data.val_every == 0) || k == step0 + o.steps)) {
                if (!validate(&ctx, &ld, H, A, &vloss)) {
                    free(reps);
                    free(th);
                    rc = 1;
                    goto out;
                }
                if (rank == 0 && !o.quiet)
                    printf("val step %d loss %.9g\n", k, vloss);
            }
            if (o.checkpoint_every && k % o.checkpoint_every == 0 && k < step0 + o.steps && /* the last: after */
                (rc = write_checkpoint(&ctx, &o, H, A, k, 1)) != 0) {
                free(reps);
                free(th);
                goto out;
            }
        }
        ctx.timing = 0;
        if (o.timing) {
            report_timing(&ctx, reps, o.steps, o.steps > 1 ? o.steps - 1 : o.steps, "step");
            report_syncs(&ctx, step_syncs, o.steps);
            report_launches(&ctx, &step_launches, o.steps > 1 ? o.steps - 1 : o.steps, "step");
        }
        free(reps);
        if (ld.have_train && !tr_lmdata_fill(&ctx, &ld.train, H, A)) { /* --data: the loss of the next batch */
            free(th);
            rc = 1;
            goto out;
        }
        tr_ctx_reset_counts(&ctx); /* --bytes checks this final forward; --trace and --stats show the last step */
        forward_all(&ctx, A);
        double loss = objective(&ctx, A);
        free(th);
        if (!isfinite(loss)) {
            diverged_loss(&ctx, H, A, step0 + o.steps + 1, loss);
            rc = 5;
            goto out;
        }
        if (rank == 0 && !o.quiet)
            printf("after step %d: loss %.9g%s\n", step0 + o.steps, loss, ld.have_train ? " (the next batch)" : "");
    } else {
        tr_trace_begin(&ctx, o.trace || o.stats); /* records the measured run */
        tr_ctx_reset_counts(&ctx);
        if (o.dy) {
            /* one forward and backward with the given upstream gradient, into grad_x (micro-batches: of each) */
            float *gh = H + d->gx_offset;
            if (!load_bsc(d, o.dy, "dy", gh)) {
                rc = 1;
                goto out;
            }
            tr_backend_upload(&ctx, A + d->gx_offset, gh, xn);
            backward_once(&ctx, A, 1);
        } else if (lm_bwd) {
            /* one backward of the LM loss: dL/dy = 0 (the loss reads ln_f(y), not y) */
            float *gh = H + d->gx_offset;
            memset(gh, 0, (size_t)xn * sizeof *gh);
            tr_backend_upload(&ctx, A + d->gx_offset, gh, xn);
            backward_once(&ctx, A, 0);
        } else if (o.generate) {
            long long ndec = 0;
            rc = gen_run(&ctx, &o, H, A, &ndec);
            if (rc)
                goto out;
            for (int g = 0; g < TR_NGROUPS; g++) { /* --bytes: the prefill, then ndec decode steps */
                self.plan_bcast_recv[g] += ndec * tr_gen_class.plan_dec_bcast_recv[g];
                self.plan_bcast_sent[g] += ndec * tr_gen_class.plan_dec_bcast_sent[g];
                self.plan_allreduce[g] += ndec * tr_gen_class.plan_dec_allreduce[g];
                gen_reduce_recv[g] = ndec * tr_gen_class.plan_dec_reduce_recv[g];
                gen_reduce_sent[g] = ndec * tr_gen_class.plan_dec_reduce_sent[g];
            }
            gen_ndec = ndec;
            o.output = NULL; /* written */
            o.lm.logits_out = NULL;
        } else if (!tr_backend_part_begin(&ctx, TR_PART_FORWARD, fwd_graph)) { /* after --repeat: its graph */
            do
                forward_all(&ctx, A);
            while (!tr_backend_part_end(&ctx, TR_PART_FORWARD));
        }
    }
    tr_backend_sync(&ctx);
    tr_step_mark(&ctx, -1); /* closes the last step's slice once the backend has really finished it */
    if (o.bytes && !report_bytes(&ctx, o.dy != NULL || lm_bwd, o.quiet))
        rc = 3;
    if (o.bytes && !report_shard_bytes(&ctx, o.steps > 0 ? o.steps : (o.dy != NULL || lm_bwd), o.steps, o.quiet))
        rc = 3;
    /* the stages' exchanges: each step's, then a forward's (after the steps, or alone); or one backward's (--dy, or the
     * language model's --grads-out without --steps), a step's without the forward after it */
    const int one_bwd = !o.steps && (o.dy != NULL || lm_bwd);
    if (o.bytes && !report_p2p_bytes(&ctx, o.steps + one_bwd, !one_bwd, o.quiet))
        rc = 3;
    if (o.bytes && gen_ndec >= 0 && !report_ws_bytes(&ctx, gen_ndec, o.quiet))
        rc = 3;
    if (o.stats && !tr_stats_report(&ctx, o.quiet))
        rc = 3;
    if (o.trace && !tr_trace_write(&ctx, o.trace, &err)) {
        if (rank == 0)
            fprintf(stderr, "%s\n", err.msg);
        rc = rc ? rc : 1;
    } else if (o.trace && rank == 0 && !o.quiet) {
        printf("wrote %s (Chrome trace: chrome://tracing or ui.perfetto.dev)\n", o.trace);
    }
    tr_backend_download(&ctx, H, A, d->arena_elems);
    if ((o.weights_out || o.hf_out || o.checkpoint_out) && !weights_out_finite(d, H)) {
        rc = 5;
        goto out;
    }
    if (tr_lm_vocab() && !o.steps) {
        double loss = tr_lm_mean_loss(d, H);
        if (rank == 0 && !o.quiet && o.lm.targets)
            printf("loss %.9g\n", loss);
    }
    if (o.lm.logits_out) {
        if (!tr_lm_write_logits(d, o.lm.logits_out, H, &err)) {
            if (rank == 0)
                fprintf(stderr, "%s\n", err.msg);
            rc = 1;
        } else if (rank == 0 && !o.quiet) {
            printf("wrote %s [%d, %d, %d]\n", o.lm.logits_out, tr_model.batch, tr_model.seq, tr_lm_vocab());
        }
    }
    if (o.output) {
        if (!tr_gather_block_npy(d, o.output, yh, piped() ? tr_pipe_class.stages - 1 : 0, &err)) {
            if (rank == 0)
                fprintf(stderr, "%s\n", err.msg);
            rc = 1;
        } else if (rank == 0 && !o.quiet) {
            printf("wrote %s [%d, %d, %d]\n", o.output, tr_model.batch, tr_model.seq, tr_model.hidden);
        }
    }
    const struct {
        const char *path, *what;
        int kind; /* 0 dx block, 1 gradients, 2 weights */
    } outs[3] = {{o.dx_out, "dL/dx", 0}, {o.grads_out, "weight gradients", 1}, {o.weights_out, "weights", 2}};
    for (int k = 0; k < 3; k++) {
        if (!outs[k].path)
            continue;
        bool wrote = outs[k].kind == 0 ? tr_gather_block_npy(d, outs[k].path, H + d->gx_offset, 0, &err)
                                       : tr_gather_params(d, ctx.comm[TR_DEP], H, outs[k].kind == 1, outs[k].path,
                                                          (tr_st_dtype)o.out_dtype, &err);
        if (!wrote) {
            if (rank == 0)
                fprintf(stderr, "%s\n", err.msg);
            rc = 1;
        } else if (rank == 0 && !o.quiet) {
            printf("wrote %s (%s%s)\n", outs[k].path, outs[k].what,
                   outs[k].kind != 0 && o.out_dtype == TR_ST_BF16 ? ", BF16" : "");
        }
    }
    if (o.hf_out) {
        char src[4096], carried[256] = "";
        bool have_src = rank == 0 && weights_dir(o.weights, src, sizeof src);
        if (!tr_hfout_write(d, H, o.hf_out, (tr_st_dtype)o.out_dtype, have_src ? src : NULL, carried, sizeof carried,
                            &err)) {
            if (rank == 0)
                fprintf(stderr, "%s\n", err.msg);
            rc = 1;
        } else if (rank == 0 && !o.quiet) {
            printf("wrote %s (GPT2LMHeadModel directory%s%s%s%s%s)\n", o.hf_out,
                   o.out_dtype == TR_ST_BF16 ? ", BF16" : "", carried[0] ? "; carried from " : "",
                   carried[0] ? src : "", carried[0] ? ": " : "", carried);
        }
    }
    if (o.checkpoint_out) {
        int crc = write_checkpoint(&ctx, &o, H, A, step0 + o.steps, 0);
        rc = rc ? rc : crc;
    }
    if (o.replica_check) {
        const char *perturb = getenv("TESS_TEST_PERTURB_REPLICA"); /* test hook: proves the check can fail */
        if (perturb && atoi(perturb) == rank && d->nparams > 0)
            H[d->params[0].offset] = nextafterf(H[d->params[0].offset], INFINITY);
        long long bad = tr_gather_replica_check(&ctx, H);
        if (rank == 0) {
            if (bad)
                fprintf(stderr, "error: %lld parameter shards differ from their replicas\n", bad);
            else if (!o.quiet)
                printf("replicas: every parameter shard is bitwise identical to its replicas\n");
        }
        if (bad)
            rc = 4;
    }
out:
    if (ck_pending) /* its next step failed or never ran: not a checkpoint known good */
        tr_ckpt_discard(d, ck_pending_path);
    tr_lmdata_close(&ld);
    tr_pipe_free(&ctx);
    tr_backend_free(&ctx, A ? A : H, H);
    tr_trace_free(&ctx);
    tr_ctx_free(&ctx);
    MPI_Finalize();
    return rc;
}
