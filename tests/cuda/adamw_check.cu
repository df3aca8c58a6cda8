/*
 * adamw_check.cu - the multi-tensor AdamW step (runtime/cuda/trc_adamw.cu: trc_adamw_multi, one launch for every
 * shard, writing the bf16 weight copies of a bf16 training program; docs/CUDA.md) on a GPU, outside any schedule:
 * built by tests/cuda/adamw_check.sh.
 *
 *   check   tables of tensors of odd and even sizes (1 element, below, at and across the 2048-element block
 *           chunk, tens of thousands), with and without weight decay and a bf16 copy, at gaps in one arena, over
 *           three steps with different learning rates and a second table (a new launch plan), and operands off
 *           16-byte alignment (one element a thread): param, m, v bit for bit a CPU loop with tr_adamw's
 *           arithmetic (tr_kernels_bwd.c), each bf16 copy bit for bit tr_f32_to_bf16 of the updated param, and
 *           the bytes between the tensors untouched
 *   host    (--host: no GPU needed, nothing of the GPU touched) the kernel's per-thread code
 *           (runtime/cuda/trk_elt.cuh's adamw_chunk) run on the CPU thread by thread as the kernel dispatches it,
 *           the 16-byte path (8 elements a thread, the chunk's tail one a thread) and the scalar path each bit for
 *           bit that CPU loop: tails of 1 to 7, tensors shorter than 8, across chunks, unaligned operands
 *   bench   (with `bench`) the 85M parameters of GPT-2 small's 12 blocks as one table, bf16 copies of the
 *           matrices: milliseconds per step and the DRAM bandwidth it reaches (16 bytes read, 12 written per
 *           element, 2 more per matrix element)
 *
 * Prints "adamw_check: N failures" and exits 1 on any.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "trc_internal.h"
#include "tr_bf16.h"

#include "check_common.cuh"
#include "trk_elt.cuh"

/* the hyperparameters trc_adamw_multi reads (GPT-2's usual ones); everything else zero */
static tr_model_desc model_init(void)
{
    tr_model_desc m;
    memset(&m, 0, sizeof m);
    m.beta1 = 0.9;
    m.beta2 = 0.95;
    m.adam_eps = 1e-8;
    m.weight_decay = 0.1;
    return m;
}
extern "C" const tr_model_desc tr_model = model_init();

/* the step scalars trc_adamw_multi reads on the device (trc_step.cu's, which this check does not link): set_step
 * writes what tr_backend_step_scalars writes, the learning rate and the bias corrections of step c->opt_step */
static float *g_sc = nullptr;
const float *trc_step_scalars(void)
{
    return g_sc;
}

/* the rank description trc_adamw_multi reads (its data-parallel member, key[TR_DEP]: 0, one member) */
static const tr_rank_desc g_desc = {};

static void set_step(const tr_ctx &c)
{
    if (!g_sc)
        cudaCheck(cudaMalloc((void **)&g_sc, TRC_NSC * sizeof(float)));
    const float sc[TRC_NSC] = {(float)c.lr, (float)(1.0 - pow(tr_model.beta1, c.opt_step)),
                               (float)(1.0 - pow(tr_model.beta2, c.opt_step)), 1.0f};
    cudaCheck(cudaMemcpy(g_sc, sc, sizeof sc, cudaMemcpyHostToDevice)); /* after the previous launch, before this */
}

/* tr_adamw's loop (runtime/tr_kernels_bwd.c, adamw_slice), one tensor of the host arena H, then its bf16 copy */
static void ref_step(float *H, const tr_adamw_tensor &t, double lr_d, int step)
{
    const float b1 = (float)tr_model.beta1, b2 = (float)tr_model.beta2, lr = (float)lr_d, eps = (float)tr_model.adam_eps;
    const float wd = t.decay ? (float)tr_model.weight_decay : 0.0f;
    const float c1 = (float)(1.0 - pow(tr_model.beta1, step)), c2 = (float)(1.0 - pow(tr_model.beta2, step));
    float *param = H + t.param, *m = H + t.m, *v = H + t.v;
    const float *grad = H + t.grad;
    for (long long e = 0; e < t.count; e++) {
        float g = grad[e];
        float me = b1 * m[e] + (1.0f - b1) * g;
        float ve = b2 * v[e] + (1.0f - b2) * g * g;
        m[e] = me;
        v[e] = ve;
        float mhat = me / c1, vhat = ve / c2;
        param[e] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * param[e]);
    }
    if (t.w16 >= 0)
        for (long long e = 0; e < t.count; e++)
            ((tr_bf16 *)(H + t.w16))[e] = tr_f32_to_bf16(param[e]);
}

/* A table of the given sizes laid out in one arena: each buffer 16-float aligned (as the plan's 64-byte
 * alignment; shifted by `shift` floats, 0 .. 14, where asked: the scalar path), one poisoned slot after each;
 * returns the arena's size in floats. */
static long long layout(const std::vector<long long> &sizes, std::vector<tr_adamw_tensor> &t, int shift = 0)
{
    long long at = 0;
    auto take = [&](long long n) {
        long long o = at + shift;
        at = (o + n + 1 + 15) / 16 * 16;
        return o;
    };
    for (size_t i = 0; i < sizes.size(); i++) {
        tr_adamw_tensor x;
        x.count = sizes[i];
        x.param = take(x.count);
        x.grad = take(x.count);
        x.m = take(x.count);
        x.v = take(x.count);
        x.w16 = i % 3 != 1 ? take((x.count + 1) / 2) : -1;
        x.decay = i % 2 == 0;
        t.push_back(x);
    }
    return at;
}

/* the arena H of table t before the first step: random params, zero moments, bf16 copies of the params, the rest
 * NaN (the gaps must stay so) */
static void arena_init(std::vector<float> &H, const std::vector<tr_adamw_tensor> &t)
{
    memset(H.data(), 0xff, H.size() * sizeof(float));
    for (const auto &x : t) {
        for (long long e = 0; e < x.count; e++) {
            H[x.param + e] = frand(-1.0f, 1.0f);
            H[x.m + e] = 0.0f;
            H[x.v + e] = 0.0f;
        }
        if (x.w16 >= 0)
            for (long long e = 0; e < x.count; e++)
                ((tr_bf16 *)(H.data() + x.w16))[e] = tr_f32_to_bf16(H[x.param + e]);
    }
}

/* step k's gradients into H: large, small, zero and negative values */
static void new_grads(std::vector<float> &H, const std::vector<tr_adamw_tensor> &t)
{
    for (const auto &x : t)
        for (long long e = 0; e < x.count; e++)
            H[x.grad + e] = e % 97 == 0 ? 0.0f : frand(-1.0f, 1.0f) * (e % 5 == 0 ? 1e-6f : 1.0f);
}

/* G == H bit for bit, every arena slot; false with a line naming the first difference */
static bool same_arena(const char *what, const std::vector<float> &G, const std::vector<float> &H)
{
    long long bad = 0, first = -1;
    for (size_t e = 0; e < H.size(); e++)
        if (memcmp(&G[e], &H[e], sizeof(float)) && bad++ == 0)
            first = (long long)e;
    if (!bad)
        return true;
    unsigned got, want;
    memcpy(&got, &G[first], sizeof got);
    memcpy(&want, &H[first], sizeof want);
    failures++;
    printf("not ok - %s: %lld of %zu arena slots differ from the CPU loop's bits (first at %lld: %08x, want %08x)\n",
           what, bad, H.size(), first, got, want);
    return false;
}

static void check_table(const char *what, const std::vector<long long> &sizes, int steps, int shift = 0)
{
    std::vector<tr_adamw_tensor> t;
    long long n = layout(sizes, t, shift);
    std::vector<float> H(n);
    arena_init(H, t);
    float *A = put(H);
    tr_ctx c;
    memset(&c, 0, sizeof c);
    c.desc = &g_desc; /* trc_adamw_multi reads c->desc->key[TR_DEP] (a null desc crashed this check on an H200) */
    for (int k = 1; k <= steps; k++) {
        new_grads(H, t);
        for (const auto &x : t) /* only the gradients: a wrong update must carry on to the end */
            cudaCheck(cudaMemcpy(A + x.grad, H.data() + x.grad, x.count * sizeof(float), cudaMemcpyHostToDevice));
        c.opt_step = k;
        c.lr = 1e-3 / k;
        set_step(c);
        trc_adamw_multi(&c, A, t.data(), (int)t.size());
        for (const auto &x : t)
            ref_step(H.data(), x, c.lr, k);
    }
    std::vector<float> G = get(A, n);
    long long elems = 0;
    for (const auto &x : t)
        elems += x.count;
    if (same_arena(what, G, H))
        printf("ok - %s: %zu tensors, %lld elements, %d steps: params, moments, bf16 copies and gaps bit for bit the "
               "CPU loop's\n",
               what, t.size(), elems, steps);
    cudaFree(A);
}

/* GPT-2 small's 12 blocks: 85M parameters in 144 tensors, the matrices with bf16 copies */
static void bench(void)
{
    const long long C = 768, F = 3072;
    std::vector<long long> per = {C, C, C * 3 * C, 3 * C, C * C, C, C, C, C * F, F, F * C, C};
    std::vector<tr_adamw_tensor> t;
    long long at = 0, elems = 0, copies = 0;
    for (int l = 0; l < 12; l++)
        for (size_t i = 0; i < per.size(); i++) {
            tr_adamw_tensor x;
            x.count = per[i];
            x.decay = x.count > F;
            x.param = at;
            x.grad = at += (x.count + 15) / 16 * 16;
            x.m = at += (x.count + 15) / 16 * 16;
            x.v = at += (x.count + 15) / 16 * 16;
            at += (x.count + 15) / 16 * 16;
            x.w16 = -1;
            if (x.decay) {
                x.w16 = at;
                at += (x.count / 2 + 15) / 16 * 16;
                copies += x.count;
            }
            elems += x.count;
            t.push_back(x);
        }
    float *A = nullptr;
    cudaCheck(cudaMalloc((void **)&A, at * sizeof(float)));
    cudaCheck(cudaMemset(A, 0, at * sizeof(float)));
    tr_ctx c;
    memset(&c, 0, sizeof c);
    c.desc = &g_desc; /* trc_adamw_multi reads c->desc->key[TR_DEP] (a null desc crashed this check on an H200) */
    c.lr = 1e-4;
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    c.opt_step = 1;
    set_step(c); /* the step scalars stay those of step 1: the timing is the same */
    trc_adamw_multi(&c, A, t.data(), (int)t.size()); /* warm-up: builds the launch plan */
    const int reps = 20;
    cudaCheck(cudaEventRecord(e0, trc_g.stream[TRC_COMPUTE]));
    for (int r = 0; r < reps; r++) {
        c.opt_step = 2 + r;
        trc_adamw_multi(&c, A, t.data(), (int)t.size());
    }
    cudaCheck(cudaEventRecord(e1, trc_g.stream[TRC_COMPUTE]));
    cudaCheck(cudaEventSynchronize(e1));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
    ms /= reps;
    double bytes = 28.0 * (double)elems + 2.0 * (double)copies;
    printf("# bench: %zu tensors, %lld parameters (%lld with a bf16 copy), one launch: %.3f ms per step, %.0f GB/s\n",
           t.size(), elems, copies, ms, bytes / (ms * 1e-3) / 1e9);
    cudaFree(A);
}

/* --host: the kernel's per-thread code (trk_elt.cuh's adamw_chunk: 8 elements a thread with 16-byte accesses, the
 * chunk's tail one a thread; or one a thread) run on the CPU as k_adamw_multi runs it (chunks of 8 x 256 elements,
 * thread by thread), the 8-wide dispatch and the scalar one each against tr_adamw's loop, bit for bit */
static void host_table(const char *what, const std::vector<long long> &sizes, int steps, int shift)
{
    const int threads = 256;
    const long long chunk = 8LL * threads;
    std::vector<tr_adamw_tensor> t;
    const long long n = layout(sizes, t, shift);
    std::vector<float> H((size_t)n);
    arena_init(H, t);
    std::vector<float> P[2] = {H, H}; /* the kernel's dispatch (8-wide where aligned), the scalar path */
    bool vec_seen = false;
    for (int k = 1; k <= steps; k++) {
        new_grads(H, t);
        const double lr = 1e-3 / k;
        for (std::vector<float> &G : P) {
            const bool scalar = &G == &P[1];
            for (const auto &x : t) {
                memcpy(G.data() + x.grad, H.data() + x.grad, (size_t)x.count * sizeof(float));
                const trk::elt::adamw_k kk = {(float)tr_model.beta1,
                                              (float)tr_model.beta2,
                                              1.0f - (float)tr_model.beta1,
                                              1.0f - (float)tr_model.beta2,
                                              (float)tr_model.adam_eps,
                                              x.decay ? (float)tr_model.weight_decay : 0.0f,
                                              (float)lr,
                                              (float)(1.0 - pow(tr_model.beta1, k)),
                                              (float)(1.0 - pow(tr_model.beta2, k))};
                float *A = G.data();
                const trk::elt::adamw_t xx = {A + x.param, A + x.grad, A + x.m, A + x.v,
                                              x.w16 >= 0 ? reinterpret_cast<tr_bf16 *>(A + x.w16) : nullptr};
                const bool vec = !scalar && trk::elt::adamw_vec(xx);
                vec_seen |= vec;
                for (long long e0 = 0; e0 < x.count; e0 += chunk)
                    for (int th = 0; th < threads; th++)
                        trk::elt::adamw_chunk(th, threads, e0, e0 + chunk < x.count ? chunk : x.count - e0, vec, kk,
                                              xx);
            }
        }
        for (const auto &x : t)
            ref_step(H.data(), x, lr, k);
    }
    char w[160];
    if (vec_seen == (shift != 0)) {
        failures++;
        printf("not ok - host %s: the 8-wide path was %s\n", what,
               vec_seen ? "taken on unaligned operands" : "not taken");
        return;
    }
    for (int s = 0; s < 2; s++) {
        snprintf(w, sizeof w, "host %s, %s", what,
                 s ? "scalar path" : shift ? "unaligned: one a thread" : "16-byte path");
        if (same_arena(w, P[s], H))
            printf("ok - %s: %zu tensors, %d steps: params, moments, bf16 copies and gaps bit for bit the CPU loop's\n",
                   w, t.size(), steps);
    }
}

static int check_host(void)
{
    /* tails of 1 .. 7 at the end of a tensor, tensors of one chunk, across chunks, shorter than 8 */
    host_table("sizes around 8 and the 2048-element chunk", {1, 7, 8, 9, 15, 2047, 2048, 2049, 2055, 4103}, 3, 0);
    host_table("a second table", {70001, 768, 12289, 5}, 2, 0);
    host_table("operands 4 bytes off 16-byte alignment", {2049, 16, 9}, 2, 1);
    printf("adamw_check --host: %d failures\n", failures);
    return failures ? 1 : 0;
}

/* trc_adamw's launch plan stops the run on a bad table (a slice outside its tensor): here that is a failure */
[[noreturn]] void trc_die(void)
{
    printf("not ok - trc_adamw_multi stopped (the message above)\nadamw_check: %d failures\n", failures + 1);
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--host"))
        return check_host();
    cudaCheck(cudaSetDevice(0));
    for (int k = 0; k < TRC_NSTREAMS; k++)
        cudaCheck(cudaStreamCreateWithFlags(&trc_g.stream[k], cudaStreamNonBlocking));
    check_table("one tensor of one element", {1}, 2);
    check_table("sizes around 8 and the 2048-element chunk", {255, 1023, 1024, 1025, 2047, 2048, 2049, 3, 4103}, 3);
    check_table("operands 4 bytes off 16-byte alignment: one element a thread", {2049, 16, 9}, 2, 1);
    check_table("a second table: a new launch plan", {70001, 1, 768, 12289, 5}, 3);
    if (argc > 1 && !strcmp(argv[1], "bench"))
        bench();
    trc_adamw_free();
    printf("adamw_check: %d failures\n", failures);
    return failures ? 1 : 0;
}
