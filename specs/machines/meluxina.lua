-- meluxina.lua - the GPU nodes of MeluXina (LuxProvide, Luxembourg), the cluster the Tesseract paper
-- measured on. Format: specs/machines/README.md (and gen/machine.h).
--
-- Sources:
--   [paper] "Tesseract: Parallelize the Tensor Parallelism Efficiently", ICPP '22,
--           doi:10.1145/3545008.3545087, arXiv:2105.14500, experimental setup: 4 NVIDIA A100 (40 GB)
--           per node, NVLink 200 GB/s inside a node, InfiniBand 200 Gb/s between nodes.
--   [a100]  NVIDIA A100 Tensor Core GPU datasheet (A100 40GB SXM column): FP32 19.5 TFLOPS, TF32 Tensor
--           Core 156 TFLOPS (dense; 312 with sparsity), BF16 Tensor Core 312 TFLOPS (dense), HBM2
--           1,555 GB/s, 40 GB.
--   [assumed] not from a document and not measured on MeluXina: marked where used.

-- Peak or sustained: these are the datasheet PEAK rates [a100]. cuBLAS reaches a fraction of them that
-- depends on the shapes (large square GEMMs come close; the thin per-rank blocks of a wide mesh do not),
-- and we have no published MeluXina measurement to take a fraction from, so the file states peak and the
-- cost model's GEMM times are lower bounds. Scale `sustained` down (e.g. 0.8) once you have measured it.
local sustained = 1.0

return {
    name = "meluxina",
    ranks_per_node = 4,                 -- [paper] 4 A100 per node
    intra = {
        -- [paper] "NVLink 200 GB/s". The paper does not say whether that is per GPU or per link, each way
        -- or both ways. A100 SXM has 12 NVLink-3 links of 25 GB/s each way (300 GB/s each way, 600 GB/s
        -- both ways, per GPU [a100: "NVLink 600 GB/s"]); in a 4-GPU board each pair of GPUs shares 4 links
        -- (100 GB/s each way). ASSUMED: 200 GB/s is one GPU's bandwidth each way, which is what a ring
        -- collective over the node sees (between the 100 GB/s of one pair and the 300 GB/s of all links).
        bandwidth_gbs = 200,
        latency_us = 3,                 -- [assumed] a typical NCCL small-message latency over NVLink (2-5 us)
    },
    inter = {
        -- [paper] InfiniBand 200 Gb/s (HDR) per node: 200 / 8 = 25 GB/s each way, shared by the node's
        -- 4 GPUs. ASSUMED one 200 Gb/s port per node, as the paper states it.
        bandwidth_gbs = 200 / 8,
        latency_us = 6,                 -- [assumed] ~1-2 us IB hardware latency plus NCCL/MPI software overhead
    },
    gemm_tflops = {
        fp32 = 19.5 * sustained,        -- [a100] FP32 (CUDA cores)
        tf32 = 156 * sustained,         -- [a100] TF32 Tensor Core, dense
        bf16 = 312 * sustained,         -- [a100] BF16 Tensor Core, dense
    },
    fp32_gemm = "fp32",                 -- tessgen's fp32 GEMMs (OpenBLAS / cuBLAS default math) do not use TF32
    memory_bandwidth_gbs = 1555,        -- [a100] HBM2, 40 GB part
    memory_gib = 40,                    -- [a100] "40 GB": HBM capacity is binary, nvidia-smi shows ~40536 MiB
    launch_us = 5,                      -- [assumed] CUDA kernel launch plus stream sync, ~5 us
}
