-- expect: attention = "flash" is not an attention path: use "cublas" (cuBLAS GEMMs and softmax kernels) or "cudnn" (cuDNN's fused flash attention, bf16 only; the default where a spec allows it
return {
  mesh  = { q = 1 },
  model = { layers = 1, hidden = 16, heads = 2, ffn = 16, seq = 4, batch = 1 },
  dtype = "bf16",
  attention = "flash",
}
