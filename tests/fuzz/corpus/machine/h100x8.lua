-- h100x8.lua - a node of 8 NVIDIA H100 SXM 80 GB (an HGX/DGX H100 class node) with one 400 Gb/s NDR
-- InfiniBand port per GPU. Format: specs/machines/README.md (and gen/machine.h).
--
-- Sources:
--   [h100]  NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column): FP32 67 TFLOPS, TF32 Tensor Core
--           989 TFLOPS with sparsity (494.7 dense), BF16 Tensor Core 1,979 TFLOPS with sparsity (989.4
--           dense), GPU memory 80 GB HBM3 at 3.35 TB/s, NVLink 900 GB/s (per GPU, both directions).
--   [dgx]   NVIDIA DGX H100 system: 8 H100 SXM, 8 ConnectX-7 single-port 400 Gb/s InfiniBand (NDR) for
--           the compute fabric, one per GPU.
--   [assumed] not from a document: marked where used.

-- Peak, as in meluxina.lua: the datasheet's DENSE peak rates, no measured fraction; the cost model's GEMM
-- times are lower bounds. Scale `sustained` once measured.
local sustained = 1.0

return {
    name = "h100x8",
    ranks_per_node = 8,                 -- [dgx]
    intra = {
        bandwidth_gbs = 900 / 2,        -- [h100] NVLink 4: 900 GB/s per GPU both ways = 450 GB/s each way
        latency_us = 3,                 -- [assumed] typical NCCL small-message latency over NVLink/NVSwitch
    },
    inter = {
        bandwidth_gbs = 8 * 400 / 8,    -- [dgx] 8 ports x 400 Gb/s = 3200 Gb/s = 400 GB/s per node each way
        latency_us = 6,                 -- [assumed] IB hardware latency plus NCCL/MPI software overhead
    },
    gemm_tflops = {
        fp32 = 67 * sustained,          -- [h100] FP32
        tf32 = 494.7 * sustained,       -- [h100] TF32 Tensor Core, dense
        bf16 = 989.4 * sustained,       -- [h100] BF16 Tensor Core, dense
    },
    fp32_gemm = "fp32",                 -- tessgen's fp32 GEMMs do not use TF32 (set "tf32" if yours do)
    memory_bandwidth_gbs = 3350,        -- [h100] HBM3 3.35 TB/s
    memory_gib = 80,                    -- [h100] "80 GB": HBM capacity is binary, nvidia-smi shows ~81559 MiB
    launch_us = 5,                      -- [assumed] CUDA kernel launch plus stream sync, ~5 us
}
