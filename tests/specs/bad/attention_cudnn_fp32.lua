-- expect: attention = "cudnn" needs dtype = "bf16": cuDNN's fused attention reads bf16 Q, K, V; add dtype = "bf16", or use attention = "cublas" for an fp32 program
return {
  mesh  = { q = 1 },
  model = { layers = 1, hidden = 16, heads = 2, ffn = 16, seq = 4, batch = 1 },
  attention = "cudnn",
}
