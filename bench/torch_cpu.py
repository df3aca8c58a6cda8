#!/usr/bin/env python3
"""bench/torch_cpu.py - PyTorch CPU's training step of the same GPT-2 tessgen trains (bench/lm_cpu.sh).

Loads the model from the safetensors file tessgen reads (tests/ref/tessref.py lm-weights: Hugging Face
GPT-2 names, Conv1D [in, out] matrices, the head tied to wte) and the same int32 token and target
batches, and times one training step (forward, vocab cross-entropy, backward, AdamW with the spec's
hyperparameters) in float32, on the threads given:
  eager    F.scaled_dot_product_attention (causal), torch.optim.AdamW(fused=True)
  compile  the same model under torch.compile (the optimizer step stays fused AdamW)
Prints one line per mode: "<mode>_step_seconds_median=S" (median over --steps after --warmup), and the
first step's loss ("<mode>_loss1=L", to check both sides train the same model), and the BLAS torch uses.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import tessref  # noqa: E402  (read_safetensors)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class GPT2(torch.nn.Module):
    def __init__(self, w, L, H, eps):
        super().__init__()
        self.L, self.H, self.eps = L, H, eps
        self.p = torch.nn.ParameterDict({k.replace(".", "_"): torch.nn.Parameter(torch.from_numpy(np.array(v)))
                                         for k, v in w.items()})

    def w(self, name):
        return self.p[name.replace(".", "_")]

    def forward(self, tok, tgt):
        B, S = tok.shape
        C = self.w("wte.weight").shape[1]
        x = self.w("wte.weight")[tok] + self.w("wpe.weight")[:S][None]
        for l in range(self.L):
            h = f"h.{l}."
            y = F.layer_norm(x, (C,), self.w(h + "ln_1.weight"), self.w(h + "ln_1.bias"), self.eps)
            qkv = y @ self.w(h + "attn.c_attn.weight") + self.w(h + "attn.c_attn.bias")
            q, k, v = (t.view(B, S, self.H, C // self.H).transpose(1, 2) for t in qkv.split(C, dim=2))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, S, C)
            x = x + (o @ self.w(h + "attn.c_proj.weight") + self.w(h + "attn.c_proj.bias"))
            y = F.layer_norm(x, (C,), self.w(h + "ln_2.weight"), self.w(h + "ln_2.bias"), self.eps)
            u = F.gelu(y @ self.w(h + "mlp.c_fc.weight") + self.w(h + "mlp.c_fc.bias"), approximate="tanh")
            x = x + (u @ self.w(h + "mlp.c_proj.weight") + self.w(h + "mlp.c_proj.bias"))
        x = F.layer_norm(x, (C,), self.w("ln_f.weight"), self.w("ln_f.bias"), self.eps)
        logits = x @ self.w("wte.weight").t()
        return F.cross_entropy(logits.view(B * S, -1), tgt.view(-1))


def run(mode, a, w, tok, tgt):
    model = GPT2(w, a.layers, a.heads, a.eps)
    decay = [p for n, p in model.p.items() if n.endswith("_weight") and p.dim() == 2]
    other = [p for n, p in model.p.items() if not (n.endswith("_weight") and p.dim() == 2)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=a.adam_eps, fused=True)
    fwd = torch.compile(model) if mode == "compile" else model
    times, loss1 = [], None
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = fwd(tok, tgt)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if s == 0:
            loss1 = float(loss.detach())
        if s >= a.warmup:
            times.append(dt)
    print(f"{mode}_step_seconds_median={statistics.median(times):.9f}")
    print(f"{mode}_loss1={loss1:.8f}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--targets", required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--adam-eps", type=float, default=1e-8)
    ap.add_argument("--wd", type=float, default=0.01)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--modes", default="eager,compile")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    w = tessref.read_safetensors(a.weights)
    tok = torch.from_numpy(np.load(a.tokens).astype(np.int64))
    tgt = torch.from_numpy(np.load(a.targets).astype(np.int64))
    blas = [line.strip() for line in torch.__config__.show().splitlines() if "BLAS_INFO" in line or "LAPACK" in line]
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} {' '.join(blas)[:200]}")
    for mode in a.modes.split(","):
        try:
            run(mode, a, w, tok, tgt)
        except Exception as e:  # torch.compile needs a working C++ toolchain: say so, keep the eager figure
            print(f"{mode}_error={type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
