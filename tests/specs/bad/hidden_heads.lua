-- expect: model.hidden = 100 is not divisible by model.heads = 12: each head takes hidden/heads columns; use heads in {1,2,4,5,10,20,25,50,100}
return {
  mesh  = { q = 1 },
  model = { layers = 1, hidden = 100, heads = 12, ffn = 400, seq = 8, batch = 2 },
}
