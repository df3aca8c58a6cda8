return { ranks_per_node = 4.5, intra = { bandwith_gbs = 0/0 }, gemm_tflops = { fp32 = -1 }, fp32_gemm = "tf32" }
