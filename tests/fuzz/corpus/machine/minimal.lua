return { ranks_per_node = 1, intra = { bandwidth_gbs = 1, latency_us = 0 }, inter = { bandwidth_gbs = 1, latency_us = 0 }, gemm_tflops = { fp32 = 1 }, memory_bandwidth_gbs = 1, memory_gib = 1 }
