/*
 * trc_sdpa.cpp - cuDNN's fused attention (SDPA forward and backward) through cudnn-frontend, for the CUDA
 * backend's attention = "cudnn" path (trc_sdpa.h, docs/CUDA.md "Fused attention through cuDNN").
 *
 * Host C++ only: cudnn-frontend is a header-only C++ layer that builds cuDNN backend-API graphs; the kernels are
 * cuDNN's. This file takes over a minute to compile, so tessgen's own build.ninja compiles it once into
 * build/cuda/trc_sdpa.o (scripts/sdpa_build.sh, only where the frontend headers and cudnn.h are found) and the
 * generated CUDA builds link that object; it is never compiled per output.
 *
 * One graph per (direction, statistics wanted, nseq, seq, heads, hd), built on first use and kept for the life
 * of the process (the generated code calls with literal shapes, so a program has a handful). Q, K, V are read in
 * place from the bf16 [nseq*seq, 3C] qkv buffer: dims [b, h, s, d], strides [s*3C, d, 3C, 1]; O, dO [b, h, s, d]
 * with strides [s*C, d, C, 1]; dQ, dK, dV written into the dqkv layout (strides of qkv); stats [b, h, s, 1]
 * fp32 contiguous. io bf16, intermediate and compute fp32, causal mask (top left), scale 1/sqrt(hd). The backward
 * asks for cuDNN's deterministic algorithm, so replicas stay bitwise identical. One cuDNN handle per process
 * (a rank is a process and uses one GPU), bound to the caller's stream at every call; one workspace, grown at
 * graph build when a graph needs more (never inside an execute). Errors come back as text, never as an exit.
 */
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include <cudnn.h>
#include <cudnn_frontend.h>

#include "trc_sdpa.h"

namespace fe = cudnn_frontend;

namespace {

enum : int64_t { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };

using sdpa_key = std::tuple<int, int, int, int, int, int>; /* bwd, stats, nseq, seq, heads, hd */

struct sdpa_state {
    cudnnHandle_t handle = nullptr;
    std::map<sdpa_key, std::shared_ptr<fe::graph::Graph>> graphs;
    void *ws = nullptr;
    int64_t ws_bytes = 0;
};

sdpa_state g_sdpa;

int fail(char *err, size_t errlen, const std::string &msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s", msg.c_str());
    return -1;
}

std::string shape_str(int nseq, int seq, int heads, int hd)
{
    return "batch " + std::to_string(nseq) + ", heads " + std::to_string(heads) + ", seq " + std::to_string(seq) +
           ", head dim " + std::to_string(hd);
}

std::shared_ptr<fe::graph::Tensor_attributes> qkv_tensor(fe::graph::Graph &g, const char *name, int64_t uid,
                                                          int64_t b, int64_t h, int64_t s, int64_t d)
{
    const int64_t ld = 3 * h * d;
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({b, h, s, d})
                        .set_stride({s * ld, d, ld, 1})
                        .set_data_type(fe::DataType_t::BFLOAT16));
}

/* Build (once) and return the graph of key k; nullptr with err filled when cuDNN refuses it. */
fe::graph::Graph *graph_for(const sdpa_key &k, char *err, size_t errlen)
{
    auto it = g_sdpa.graphs.find(k);
    if (it != g_sdpa.graphs.end())
        return it->second.get();
    const auto [bwd, want_stats, nseq, seq, heads, hd] = k;
    const std::string what = std::string(bwd ? "cuDNN SDPA backward" : "cuDNN SDPA forward") + " (" +
                             shape_str(nseq, seq, heads, hd) + ", bf16, causal)";
    if (!g_sdpa.handle) {
        cudnnStatus_t st = cudnnCreate(&g_sdpa.handle);
        if (st != CUDNN_STATUS_SUCCESS) {
            g_sdpa.handle = nullptr;
            fail(err, errlen, std::string("cudnnCreate failed: ") + cudnnGetErrorString(st));
            return nullptr;
        }
    }
    const int64_t b = nseq, h = heads, s = seq, d = hd, C = h * d;
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    auto Q = qkv_tensor(*g, "Q", UID_Q, b, h, s, d);
    auto K = qkv_tensor(*g, "K", UID_K, b, h, s, d);
    auto V = qkv_tensor(*g, "V", UID_V, b, h, s, d);
    const std::vector<int64_t> odim = {b, h, s, d}, ostride = {s * C, d, C, 1};
    const std::vector<int64_t> sdim = {b, h, s, 1}, sstride = {h * s, s, 1, 1};
    const float scale = 1.0f / sqrtf((float)hd);
    if (!bwd) {
        auto opt = fe::graph::SDPA_attributes()
                       .set_name("tessgen_sdpa")
                       .set_generate_stats(want_stats != 0)
                       .set_causal_mask(true)
                       .set_attn_scale(scale);
        auto [O, Stats] = g->sdpa(Q, K, V, opt);
        O->set_output(true).set_uid(UID_O).set_dim(odim).set_stride(ostride).set_data_type(
            fe::DataType_t::BFLOAT16);
        if (want_stats)
            Stats->set_output(true).set_uid(UID_STATS).set_dim(sdim).set_stride(sstride).set_data_type(
                fe::DataType_t::FLOAT);
    } else {
        auto O = g->tensor(fe::graph::Tensor_attributes().set_name("O").set_uid(UID_O).set_dim(odim).set_stride(
            ostride).set_data_type(fe::DataType_t::BFLOAT16));
        auto dO = g->tensor(fe::graph::Tensor_attributes().set_name("dO").set_uid(UID_DO).set_dim(odim).set_stride(
            ostride).set_data_type(fe::DataType_t::BFLOAT16));
        auto Stats = g->tensor(fe::graph::Tensor_attributes()
                                   .set_name("Stats")
                                   .set_uid(UID_STATS)
                                   .set_dim(sdim)
                                   .set_stride(sstride)
                                   .set_data_type(fe::DataType_t::FLOAT));
        auto opt = fe::graph::SDPA_backward_attributes()
                       .set_name("tessgen_sdpa_backward")
                       .set_causal_mask(true)
                       .set_attn_scale(scale)
                       .set_deterministic_algorithm(true);
        auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, opt);
        const int64_t ld = 3 * C;
        const std::vector<int64_t> qstride = {s * ld, d, ld, 1};
        dQ->set_output(true).set_uid(UID_DQ).set_dim(odim).set_stride(qstride).set_data_type(
            fe::DataType_t::BFLOAT16);
        dK->set_output(true).set_uid(UID_DK).set_dim(odim).set_stride(qstride).set_data_type(
            fe::DataType_t::BFLOAT16);
        dV->set_output(true).set_uid(UID_DV).set_dim(odim).set_stride(qstride).set_data_type(
            fe::DataType_t::BFLOAT16);
    }
    auto st = g->build(g_sdpa.handle, {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
    if (!st.is_good()) {
        fail(err, errlen, what + " not supported here: " + st.get_message());
        return nullptr;
    }
    int64_t ws = 0;
    st = g->get_workspace_size(ws);
    if (!st.is_good()) {
        fail(err, errlen, what + ": no workspace size: " + st.get_message());
        return nullptr;
    }
    if (ws > g_sdpa.ws_bytes) {
        if (g_sdpa.ws)
            cudaFree(g_sdpa.ws); /* synchronises the device: no graph still runs on the old one */
        g_sdpa.ws = nullptr;
        g_sdpa.ws_bytes = 0;
        cudaError_t e = cudaMalloc(&g_sdpa.ws, (size_t)ws);
        if (e != cudaSuccess) {
            fail(err, errlen, what + ": cudaMalloc of its " + std::to_string(ws) + "-byte workspace failed: " +
                                  cudaGetErrorString(e));
            return nullptr;
        }
        g_sdpa.ws_bytes = ws;
    }
    auto *raw = g.get();
    g_sdpa.graphs.emplace(k, std::move(g));
    return raw;
}

int run(const sdpa_key &k, cudaStream_t s, std::unordered_map<int64_t, void *> &pack, char *err, size_t errlen)
{
    fe::graph::Graph *g = graph_for(k, err, errlen);
    if (!g)
        return -1;
    cudnnStatus_t cs = cudnnSetStream(g_sdpa.handle, s);
    if (cs != CUDNN_STATUS_SUCCESS)
        return fail(err, errlen, std::string("cudnnSetStream failed: ") + cudnnGetErrorString(cs));
    auto st = g->execute(g_sdpa.handle, pack, g_sdpa.ws);
    if (!st.is_good())
        return fail(err, errlen, std::string(std::get<0>(k) ? "cuDNN SDPA backward" : "cuDNN SDPA forward") +
                                     " (" + shape_str(std::get<2>(k), std::get<3>(k), std::get<4>(k), std::get<5>(k)) +
                                     ") failed to run: " + st.get_message());
    return 0;
}

} // namespace

int trc_sdpa_fwd(cudaStream_t s, int nseq, int seq, int heads, int hd, const tr_bf16 *qkv, tr_bf16 *o, float *stats,
                 char *err, size_t errlen)
{
    const size_t C = (size_t)heads * hd;
    std::unordered_map<int64_t, void *> pack = {{UID_Q, (void *)qkv},
                                                {UID_K, (void *)(qkv + C)},
                                                {UID_V, (void *)(qkv + 2 * C)},
                                                {UID_O, (void *)o}};
    if (stats)
        pack[UID_STATS] = (void *)stats;
    return run(sdpa_key{0, stats != nullptr, nseq, seq, heads, hd}, s, pack, err, errlen);
}

int trc_sdpa_bwd(cudaStream_t s, int nseq, int seq, int heads, int hd, const tr_bf16 *qkv, const tr_bf16 *o,
                 const tr_bf16 *dout, const float *stats, tr_bf16 *dqkv, char *err, size_t errlen)
{
    const size_t C = (size_t)heads * hd;
    std::unordered_map<int64_t, void *> pack = {
        {UID_Q, (void *)qkv},        {UID_K, (void *)(qkv + C)},   {UID_V, (void *)(qkv + 2 * C)},
        {UID_O, (void *)o},          {UID_DO, (void *)dout},       {UID_STATS, (void *)stats},
        {UID_DQ, (void *)dqkv},      {UID_DK, (void *)(dqkv + C)}, {UID_DV, (void *)(dqkv + 2 * C)}};
    return run(sdpa_key{1, 1, nseq, seq, heads, hd}, s, pack, err, errlen);
}
