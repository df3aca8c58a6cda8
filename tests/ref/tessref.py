#!/usr/bin/python3
"""tessref -- the INDEPENDENT float64 numpy reference for tessgen's tests.

This file knows nothing about tessgen's generator, templates or runtime.  It
implements, from the written specification only (DESIGN.md section 3 and the
Hugging Face GPT-2 conventions), a stack of GPT-2 pre-LN transformer blocks,
so that the per-rank C programs tessgen emits can be checked against it.
It needs only the Python standard library and numpy; run it as

    /usr/bin/python3 tests/ref/tessref.py SUBCOMMAND ...

Model dimensions are always given explicitly:

    --layers L --hidden C --heads H --ffn F --seq S --batch B [--eps 1e-5]

Subcommands
-----------
weights   --dims... --seed N --out W.safetensors [--synthetic]
    Write a safetensors file (written here by hand: 8-byte little-endian
    header length, JSON header padded with spaces to a multiple of 8, F32
    data contiguous in header order) holding, for each layer l in 0..L-1:
        h.{l}.ln_1.weight [C]          h.{l}.ln_1.bias [C]
        h.{l}.attn.c_attn.weight [C,3C] h.{l}.attn.c_attn.bias [3C]
        h.{l}.attn.c_proj.weight [C,C]  h.{l}.attn.c_proj.bias [C]
        h.{l}.ln_2.weight [C]          h.{l}.ln_2.bias [C]
        h.{l}.mlp.c_fc.weight [C,F]    h.{l}.mlp.c_fc.bias [F]
        h.{l}.mlp.c_proj.weight [F,C]  h.{l}.mlp.c_proj.bias [C]
    Matrices are [in, out] (HF Conv1D: y = x @ W + b).  Default values come
    from np.random.default_rng(seed): matrices normal(0, 1/sqrt(in)), biases
    normal(0, 0.1), LN weights 1 + normal(0, 0.1), LN biases normal(0, 0.1),
    drawn in the order listed above, all stored as float32.  With --synthetic
    the values are the counter-based generator described below instead.

input     --dims... --seed N --out X.npy [--synthetic]
    Write a float32 C-order .npy of shape [B, S, C]: normal(0, 1) from
    np.random.default_rng(seed + 1_000_003), or with --synthetic the
    synthetic generator with tensor name "input".

forward   --dims... --weights W.safetensors --input X.npy --out Y.npy
    Read the weights (own safetensors parser) and the input, compute in
    float64, for each layer in order,
        qkv = LN1(x) @ Wqkv + bqkv      Q = cols [0,C), K = [C,2C), V = [2C,3C)
        head h of Q/K/V = cols h*D..(h+1)*D of each, D = C/H
        A_h = softmax(Q_h K_h^T / sqrt(D) with causal mask) V_h
        x1  = x  + concat_h(A_h) @ Wo + bo
        y   = x1 + GeLU(LN2(x1) @ W1 + b1) @ W2 + b2
    LayerNorm over the last dim: (x - mean)/sqrt(var + eps) * g + b with the
    biased variance.  Causal: token s attends to tokens <= s of its own
    sequence (each batch element is a separate sequence).  GeLU is the tanh
    approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).  There is
    no final ln_f.  Y is written as a float64 .npy of shape [B, S, C].

compare   --ref REF.npy --got GOT.npy --tol 1e-4 [--label TEXT] [--expect-f32]
    Relative Frobenius error ||got - ref|| / ||ref|| in float64.  Prints
        LABEL: rel_err=1.234e-07 tol=1e-04 OK      (or FAIL)
    Exits 1 on FAIL, on a shape mismatch, or if got holds NaN/Inf (reported
    with their count and the first such index).  With --expect-f32 it also
    requires got to be float32 with ndim 3 (i.e. [B, S, C]).

bench     --dims... --reps N [--warmup 1] [--seed 1]
    The same block stack computed plainly in numpy float32 (float32 arrays,
    x @ W, same math) on synthetic weights and input, timed with
    time.perf_counter over N reps after the warm-up reps.  Prints the
    machine-readable line  numpy_f32_forward_seconds=<median>  and a human
    line.  Threading is whatever the environment sets (OMP_NUM_THREADS etc.).

synth-selftest
    Print the first 4 values (and raw z in hex) of the synthetic generator
    for "h.0.attn.c_attn.weight" seed 1 and "input" seed 7, so the C
    runtime's generator can be checked against it.

selftest
    Independent checks of this reference itself (LayerNorm statistics, causal
    masking, one-token attention == V, GeLU values, a scalar loop-by-loop
    re-implementation of the block, the safetensors round trip, the
    vectorised synthetic generator against pure-Python integer arithmetic).
    Exits non-zero on failure.

The synthetic generator (must match the C runtime bit for bit)
--------------------------------------------------------------
For tensor name N (str), seed s (uint64), flat row-major element index e
(0-based) of the FULL tensor, all arithmetic on uint64 modulo 2^64:

    fnv = 0xcbf29ce484222325
    for each byte c of N (UTF-8): fnv = (fnv ^ c) * 0x100000001b3
    key = fnv ^ (s * 0x9E3779B97F4A7C15)
    z = key + (e + 1) * 0x9E3779B97F4A7C15
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    z = z ^ (z >> 31)
    u = float32(z >> 40) * float32(2**-24)     # in [0, 1), exact
    v = float32(2) * u - float32(1)            # in [-1, 1), exact

and then, in float32 arithmetic, by tensor name:

    ends with ".ln_1.weight" / ".ln_2.weight":   1 + v * 0.125
    ends with ".ln_1.bias"   / ".ln_2.bias":     v * 0.125
    other names ending ".weight" (matrices):     v * 0.0625
    other names ending ".bias":                  v * 0.0625
    "input":                                     v
"""

import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np

# ----------------------------------------------------------------------------
# Tensor names and shapes
# ----------------------------------------------------------------------------

LAYER_TENSORS = (  # (suffix, shape as function of C, F)
    ("ln_1.weight", lambda C, F: (C,)),
    ("ln_1.bias", lambda C, F: (C,)),
    ("attn.c_attn.weight", lambda C, F: (C, 3 * C)),
    ("attn.c_attn.bias", lambda C, F: (3 * C,)),
    ("attn.c_proj.weight", lambda C, F: (C, C)),
    ("attn.c_proj.bias", lambda C, F: (C,)),
    ("ln_2.weight", lambda C, F: (C,)),
    ("ln_2.bias", lambda C, F: (C,)),
    ("mlp.c_fc.weight", lambda C, F: (C, F)),
    ("mlp.c_fc.bias", lambda C, F: (F,)),
    ("mlp.c_proj.weight", lambda C, F: (F, C)),
    ("mlp.c_proj.bias", lambda C, F: (C,)),
)


def tensor_specs(L, C, F):
    """[(name, shape)] for the whole stack, in file order."""
    return [(f"h.{l}.{suf}", shp(C, F)) for l in range(L) for suf, shp in LAYER_TENSORS]


# ----------------------------------------------------------------------------
# Synthetic counter-based generator
# ----------------------------------------------------------------------------

_U64 = np.uint64
_GOLDEN = _U64(0x9E3779B97F4A7C15)
_M1 = _U64(0xBF58476D1CE4E5B9)
_M2 = _U64(0x94D049BB133111EB)


def fnv1a64(name):
    h = 0xCBF29CE484222325
    for c in name.encode("utf-8"):
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def synth_z(name, seed, idx):
    """Raw uint64 z for flat element indices idx (uint64 array)."""
    key = _U64(fnv1a64(name) ^ ((seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF))
    with np.errstate(over="ignore"):
        z = key + (idx.astype(_U64) + _U64(1)) * _GOLDEN
        z = (z ^ (z >> _U64(30))) * _M1
        z = (z ^ (z >> _U64(27))) * _M2
        z = z ^ (z >> _U64(31))
    return z


def synth_scale(name):
    """(offset, scale) as float32 for the tensor kind; value = offset + v*scale."""
    if name == "input":
        return None
    if name.endswith(".ln_1.weight") or name.endswith(".ln_2.weight"):
        return (np.float32(1.0), np.float32(0.125))
    if name.endswith(".ln_1.bias") or name.endswith(".ln_2.bias"):
        return (None, np.float32(0.125))
    if name.endswith(".weight") or name.endswith(".bias"):
        return (None, np.float32(0.0625))
    raise ValueError(f"no synthetic rule for tensor name {name!r}")


def synth_values_from_z(name, z):
    u = (z >> _U64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    v = np.float32(2.0) * u - np.float32(1.0)
    assert v.dtype == np.float32
    rule = synth_scale(name)
    if rule is None:
        out = v
    else:
        off, sc = rule
        out = v * sc
        if off is not None:
            out = off + out
    out = out.astype(np.float32, copy=False)
    assert out.dtype == np.float32
    return out


def synth_tensor(name, seed, shape, chunk=1 << 24):
    n = int(np.prod(shape, dtype=np.int64))
    out = np.empty(n, dtype=np.float32)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        out[a:b] = synth_values_from_z(name, synth_z(name, seed, np.arange(a, b, dtype=_U64)))
    return out.reshape(shape)


def synth_scalar_py(name, seed, e):
    """Pure-Python (int + struct) version, used only to check the vectorised one."""
    M = (1 << 64) - 1
    key = fnv1a64(name) ^ ((seed * 0x9E3779B97F4A7C15) & M)
    z = (key + (e + 1) * 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    z = z ^ (z >> 31)

    def f32(x):
        return struct.unpack("<f", struct.pack("<f", x))[0]

    # z>>40 < 2^24 and the products/sums below are exact in float32, except
    # 1 + v*0.125, which f32() rounds to nearest-even like float32 addition.
    u = f32(float(z >> 40) * 2.0 ** -24)
    v = f32(2.0 * u - 1.0)
    if name == "input":
        val = v
    elif name.endswith((".ln_1.weight", ".ln_2.weight")):
        val = f32(1.0 + f32(v * 0.125))
    elif name.endswith((".ln_1.bias", ".ln_2.bias")):
        val = f32(v * 0.125)
    else:
        val = f32(v * 0.0625)
    return z, val


# ----------------------------------------------------------------------------
# safetensors (own writer / parser)
# ----------------------------------------------------------------------------

_ST_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "F16": np.dtype("<f2")}


def write_safetensors(path, tensors):
    """tensors: list of (name, float32 array) in the order to store them."""
    header = {}
    off = 0
    blobs = []
    for name, arr in tensors:
        a = np.ascontiguousarray(arr, dtype="<f4")
        nb = a.nbytes
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + nb]}
        off += nb
        blobs.append(a)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((-len(hj)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for a in blobs:
            f.write(a.tobytes(order="C"))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (hlen,) = struct.unpack("<Q", raw[:8])
    if 8 + hlen > len(raw):
        raise ValueError(f"{path}: header length {hlen} beyond end of file")
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    base = 8 + hlen
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        dt = _ST_DTYPES.get(meta["dtype"])
        if dt is None:
            raise ValueError(f"{path}: {name}: unsupported dtype {meta['dtype']}")
        a, b = meta["data_offsets"]
        shape = tuple(meta["shape"])
        n = int(np.prod(shape, dtype=np.int64))
        if b - a != n * dt.itemsize or base + b > len(raw):
            raise ValueError(f"{path}: {name}: bad data_offsets {a},{b} for shape {shape}")
        out[name] = np.frombuffer(raw, dtype=dt, count=n, offset=base + a).reshape(shape)
    return out


# ----------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------

def layernorm(x, g, b, eps):
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)  # biased variance
    return xc / np.sqrt(var + x.dtype.type(eps)) * g + b


def gelu(x):
    t = x.dtype.type
    c = t(math.sqrt(2.0 / math.pi))
    return t(0.5) * x * (t(1.0) + np.tanh(c * (x + t(0.044715) * x * x * x)))


def causal_attention(qkv, H):
    """qkv [B,S,3C] -> [B,S,C]; per-sequence causal softmax attention."""
    B, S, C3 = qkv.shape
    C = C3 // 3
    D = C // H
    t = qkv.dtype.type

    def heads(m):  # [B,S,C] -> [B,H,S,D]; head h = columns h*D..(h+1)*D
        return m.reshape(B, S, H, D).transpose(0, 2, 1, 3)

    q = heads(qkv[..., 0:C])
    k = heads(qkv[..., C:2 * C])
    v = heads(qkv[..., 2 * C:3 * C])
    scores = (q @ k.transpose(0, 1, 3, 2)) * t(1.0 / math.sqrt(D))  # [B,H,S,S]
    future = np.triu(np.ones((S, S), dtype=bool), k=1)  # key index > query index
    scores = np.where(future, t(-np.inf), scores)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p = p / p.sum(axis=-1, keepdims=True)
    o = p @ v  # [B,H,S,D]
    return o.transpose(0, 2, 1, 3).reshape(B, S, C)


def block(x, w, l, H, eps):
    p = f"h.{l}."
    h = layernorm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
    qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
    a = causal_attention(qkv, H)
    x1 = x + (a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"])
    h2 = layernorm(x1, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
    m = gelu(h2 @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
    return x1 + (m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"])


def forward(x, w, L, H, eps, dtype=np.float64):
    """w: dict name -> array.  Computes entirely in `dtype`."""
    x = np.asarray(x, dtype=dtype)
    wd = {k: np.asarray(v, dtype=dtype) for k, v in w.items()}
    for l in range(L):
        x = block(x, wd, l, H, eps)
        assert x.dtype == dtype
    return x


# ----------------------------------------------------------------------------
# Generators for weights and input
# ----------------------------------------------------------------------------

def make_weights(L, C, F, seed, synthetic):
    specs = tensor_specs(L, C, F)
    if synthetic:
        return [(n, synth_tensor(n, seed, s)) for n, s in specs]
    rng = np.random.default_rng(seed)
    out = []
    for n, s in specs:
        if n.endswith((".ln_1.weight", ".ln_2.weight")):
            a = 1.0 + rng.normal(0.0, 0.1, size=s)
        elif n.endswith(".bias"):
            a = rng.normal(0.0, 0.1, size=s)
        else:
            a = rng.normal(0.0, 1.0 / math.sqrt(s[0]), size=s)
        out.append((n, a.astype(np.float32)))
    return out


def make_input(B, S, C, seed, synthetic):
    if synthetic:
        return synth_tensor("input", seed, (B, S, C))
    rng = np.random.default_rng(seed + 1_000_003)
    return rng.normal(0.0, 1.0, size=(B, S, C)).astype(np.float32)


# ----------------------------------------------------------------------------
# Subcommands
# ----------------------------------------------------------------------------

def add_dims(p):
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--ffn", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--eps", type=float, default=1e-5)


def check_dims(a):
    for k in ("layers", "hidden", "heads", "ffn", "seq", "batch"):
        if getattr(a, k) <= 0:
            sys.exit(f"tessref: --{k} must be positive")
    if a.hidden % a.heads:
        sys.exit(f"tessref: --hidden {a.hidden} not divisible by --heads {a.heads}")


def cmd_weights(a):
    check_dims(a)
    write_safetensors(a.out, make_weights(a.layers, a.hidden, a.ffn, a.seed, a.synthetic))
    return 0


def cmd_input(a):
    check_dims(a)
    np.save(a.out, np.ascontiguousarray(make_input(a.batch, a.seq, a.hidden, a.seed, a.synthetic)))
    return 0


def cmd_forward(a):
    check_dims(a)
    L, C, F = a.layers, a.hidden, a.ffn
    w = read_safetensors(a.weights)
    for n, s in tensor_specs(L, C, F):
        if n not in w:
            sys.exit(f"tessref: {a.weights}: missing tensor {n}")
        if tuple(w[n].shape) != tuple(s):
            sys.exit(f"tessref: {a.weights}: {n} has shape {list(w[n].shape)}, expected {list(s)}")
    x = np.load(a.input)
    if x.shape != (a.batch, a.seq, C):
        sys.exit(f"tessref: {a.input}: shape {list(x.shape)}, expected {[a.batch, a.seq, C]}")
    y = forward(x, w, L, a.heads, a.eps, np.float64)
    np.save(a.out, np.ascontiguousarray(y, dtype=np.float64))
    return 0


def cmd_compare(a):
    label = a.label if a.label is not None else os.path.basename(a.got)
    ref = np.load(a.ref)
    got = np.load(a.got)
    if a.expect_f32 and (got.dtype != np.float32 or got.ndim != 3):
        print(f"{label}: got has dtype {got.dtype} shape {list(got.shape)}, "
              f"expected float32 [B,S,C] FAIL")
        return 1
    if ref.shape != got.shape:
        print(f"{label}: shape mismatch ref {list(ref.shape)} got {list(got.shape)} FAIL")
        return 1
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    bad = ~np.isfinite(g)
    if bad.any():
        first = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad.ravel())), g.shape))
        print(f"{label}: got has {int(bad.sum())} NaN/Inf values, first at index {list(first)} "
              f"tol={a.tol:.0e} FAIL")
        return 1
    if not np.isfinite(r).all():
        print(f"{label}: ref has non-finite values FAIL")
        return 1
    num = float(np.linalg.norm((g - r).ravel()))
    den = float(np.linalg.norm(r.ravel()))
    if den == 0.0:
        err = 0.0 if num == 0.0 else math.inf
    else:
        err = num / den
    ok = err <= a.tol
    print(f"{label}: rel_err={err:.3e} tol={a.tol:.0e} {'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


def cmd_bench(a):
    check_dims(a)
    L, C, H, F, S, B = a.layers, a.hidden, a.heads, a.ffn, a.seq, a.batch
    w = {n: t for n, t in make_weights(L, C, F, a.seed, True)}
    x = make_input(B, S, C, a.seed, True)
    for _ in range(a.warmup):
        y = forward(x, w, L, H, a.eps, np.float32)
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        y = forward(x, w, L, H, a.eps, np.float32)
        times.append(time.perf_counter() - t0)
    med = float(np.median(times))
    print(f"numpy_f32_forward_seconds={med:.6e}")
    thr = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
           if k in os.environ}
    print(f"numpy float32 forward L={L} C={C} H={H} F={F} S={S} B={B}: median {med * 1e3:.3f} ms "
          f"over {a.reps} reps (min {min(times) * 1e3:.3f} ms, max {max(times) * 1e3:.3f} ms), "
          f"warmup {a.warmup}, threads env {thr or 'unset'}")
    return 0


def cmd_synth_selftest(a):
    for name, seed in (("h.0.attn.c_attn.weight", 1), ("input", 7)):
        z = synth_z(name, seed, np.arange(4, dtype=_U64))
        v = synth_values_from_z(name, z)
        print(f"{name} seed={seed} fnv=0x{fnv1a64(name):016x}")
        for e in range(4):
            print(f"  e={e} z=0x{int(z[e]):016x} value={float(v[e]):.9g} "
                  f"bits=0x{int(v[e:e + 1].view(np.uint32)[0]):08x}")
    return 0


# ----------------------------------------------------------------------------
# Self-test of the reference
# ----------------------------------------------------------------------------

def naive_block(x, w, l, H, eps):
    """Scalar loop-by-loop block with Python floats and the math module.
    x: nested lists [B][S][C].  Independent of the vectorised code."""
    p = f"h.{l}."
    g = lambda n: w[p + n].tolist()
    B, S, C = len(x), len(x[0]), len(x[0][0])
    D = C // H

    def ln(row, gw, gb):
        m = sum(row) / len(row)
        var = sum((r - m) ** 2 for r in row) / len(row)
        return [(r - m) / math.sqrt(var + eps) * gw[i] + gb[i] for i, r in enumerate(row)]

    def lin(row, W, bias):
        return [sum(row[i] * W[i][j] for i in range(len(row))) + bias[j] for j in range(len(bias))]

    def ge(v):
        return 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))

    out = []
    for b in range(B):
        qkv = [lin(ln(x[b][s], g("ln_1.weight"), g("ln_1.bias")),
                   g("attn.c_attn.weight"), g("attn.c_attn.bias")) for s in range(S)]
        att = [[0.0] * C for _ in range(S)]
        for h in range(H):
            for s in range(S):
                q = qkv[s][h * D:(h + 1) * D]
                sc = []
                for t in range(s + 1):
                    k = qkv[t][C + h * D:C + (h + 1) * D]
                    sc.append(sum(q[d] * k[d] for d in range(D)) / math.sqrt(D))
                mx = max(sc)
                e = [math.exp(v - mx) for v in sc]
                z = sum(e)
                for d in range(D):
                    att[s][h * D + d] = sum(e[t] / z * qkv[t][2 * C + h * D + d] for t in range(s + 1))
        seq = []
        for s in range(S):
            pr = lin(att[s], g("attn.c_proj.weight"), g("attn.c_proj.bias"))
            x1 = [x[b][s][i] + pr[i] for i in range(C)]
            hh = [ge(v) for v in lin(ln(x1, g("ln_2.weight"), g("ln_2.bias")),
                                     g("mlp.c_fc.weight"), g("mlp.c_fc.bias"))]
            m = lin(hh, g("mlp.c_proj.weight"), g("mlp.c_proj.bias"))
            seq.append([x1[i] + m[i] for i in range(C)])
        out.append(seq)
    return out


def cmd_selftest(a):
    import tempfile
    fails = []

    def check(name, cond, detail=""):
        print(f"  {'ok  ' if cond else 'FAIL'} {name}{(': ' + detail) if detail else ''}")
        if not cond:
            fails.append(name)

    rng = np.random.default_rng(12345)
    eps = 1e-5

    # LayerNorm: mean 0, biased var 1 (up to eps) before the affine part; affine applied after.
    x = rng.normal(3.0, 2.5, size=(4, 5, 48))
    n = layernorm(x, np.ones(48), np.zeros(48), eps)
    check("layernorm mean 0", np.abs(n.mean(-1)).max() < 1e-12)
    var_in = x.var(-1)
    check("layernorm var 1 (=var/(var+eps))",
          np.abs(n.var(-1) - var_in / (var_in + eps)).max() < 1e-12)
    gw, gb = rng.normal(size=48), rng.normal(size=48)
    check("layernorm affine", np.abs(layernorm(x, gw, gb, eps) - (n * gw + gb)).max() < 1e-12)

    # GeLU known values.
    gv = gelu(np.array([0.0, 1.0, -1.0, 10.0, -10.0]))
    check("gelu(0)=0, gelu(1), gelu(-1)",
          gv[0] == 0.0 and abs(gv[1] - 0.8411919906082768) < 1e-15
          and abs(gv[2] + 0.15880800939172324) < 1e-15, str(gv[:3]))
    check("gelu tails", abs(gv[3] - 10.0) < 1e-12 and abs(gv[4]) < 1e-12)

    # Attention with seq 1 reduces to V (one head and several heads).
    for H in (1, 4):
        qkv = rng.normal(size=(3, 1, 3 * 16))
        check(f"attention seq=1 heads={H} == V",
              np.abs(causal_attention(qkv, H) - qkv[..., 32:48]).max() < 1e-14)
    # Attention: first token always attends only to itself -> its own V.
    qkv = rng.normal(size=(2, 6, 3 * 16))
    check("attention token 0 == V[0]",
          np.abs(causal_attention(qkv, 4)[:, 0] - qkv[:, 0, 32:48]).max() < 1e-14)
    # Attention: constant K (equal scores) -> mean of V over the causal prefix.
    qkv2 = qkv.copy()
    qkv2[..., 16:32] = 0.0
    cum = np.cumsum(qkv2[..., 32:48], axis=1) / np.arange(1, 7)[None, :, None]
    check("attention uniform scores == prefix mean of V",
          np.abs(causal_attention(qkv2, 4) - cum).max() < 1e-13)

    # Small model for the whole-stack checks.
    L, C, H, F, S, B = 2, 48, 12, 192, 8, 3
    w = dict(make_weights(L, C, F, 5, False))
    x = make_input(B, S, C, 5, False).astype(np.float64)
    y = forward(x, w, L, H, eps)

    # Causality: perturbing token t changes no output at positions < t, and changes t.
    for t in (S - 1, 3):
        xp = x.copy()
        xp[1, t] += rng.normal(size=C)
        yp = forward(xp, w, L, H, eps)
        check(f"causal: perturb token {t} leaves tokens <{t} unchanged",
              np.abs(yp[1, :t] - y[1, :t]).max() < 1e-12)
        check(f"causal: perturb token {t} changes token {t}", np.abs(yp[1, t] - y[1, t]).max() > 1e-3)
        check(f"sequences independent: perturb batch 1 leaves batches 0,2",
              np.abs(yp[[0, 2]] - y[[0, 2]]).max() < 1e-12)

    # Zeroed output projections: the block is the identity.
    wz = dict(w)
    for l in range(L):
        for nme in ("attn.c_proj.weight", "attn.c_proj.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"):
            wz[f"h.{l}.{nme}"] = np.zeros_like(w[f"h.{l}.{nme}"])
    check("zero projections -> identity", np.abs(forward(x, wz, L, H, eps) - x).max() == 0.0)

    # Scalar loop re-implementation on a tiny model (and the 2-layer stack).
    Lt, Ct, Ht, Ft, St, Bt = 2, 8, 2, 16, 4, 2
    wt = dict(make_weights(Lt, Ct, Ft, 9, False))
    xt = make_input(Bt, St, Ct, 9, False).astype(np.float64)
    yn = xt.tolist()
    for l in range(Lt):
        yn = naive_block(yn, {k: v.astype(np.float64) for k, v in wt.items()}, l, Ht, eps)
    yv = forward(xt, wt, Lt, Ht, eps)
    dif = np.abs(np.array(yn) - yv).max()
    check("vectorised stack == scalar loop implementation", dif < 1e-12, f"max abs diff {dif:.2e}")

    # float32 path is float32 all the way and close to float64.
    y32 = forward(x.astype(np.float32), w, L, H, eps, np.float32)
    rel = np.linalg.norm(y32 - y) / np.linalg.norm(y)
    check("float32 forward stays float32 and is close", y32.dtype == np.float32 and rel < 1e-5,
          f"rel {rel:.2e}")

    # safetensors round trip and format details.
    with tempfile.TemporaryDirectory() as td:
        pth = os.path.join(td, "w.safetensors")
        tl = make_weights(L, C, F, 3, False)
        write_safetensors(pth, tl)
        raw = open(pth, "rb").read()
        hlen = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + hlen])
        check("safetensors header length multiple of 8", hlen % 8 == 0)
        offs = [hdr[nm]["data_offsets"] for nm, _ in tl]
        contiguous = offs[0][0] == 0 and all(offs[i][1] == offs[i + 1][0] for i in range(len(offs) - 1))
        check("safetensors data contiguous and file size exact",
              contiguous and 8 + hlen + offs[-1][1] == len(raw))
        back = read_safetensors(pth)
        check("safetensors round trip bitwise",
              all(back[nm].dtype == np.float32 and back[nm].shape == t.shape
                  and np.array_equal(back[nm], t) for nm, t in tl))
        check("safetensors names/shapes",
              [(nm, tuple(hdr[nm]["shape"])) for nm, _ in tl] == tensor_specs(L, C, F))

    # Synthetic generator: vectorised uint64 == pure-Python integers, bit for bit.
    ok = True
    for name, seed in (("h.0.attn.c_attn.weight", 1), ("input", 7), ("h.1.ln_1.weight", 3),
                       ("h.0.ln_2.bias", 2**64 - 1), ("h.3.mlp.c_fc.bias", 0)):
        idx = np.array([0, 1, 2, 3, 1000, 123456789, 2**40 + 5], dtype=_U64)
        z = synth_z(name, seed, idx)
        vals = synth_values_from_z(name, z)
        for i, e in enumerate(idx.tolist()):
            zp, vp = synth_scalar_py(name, seed, e)
            if int(z[i]) != zp or float(vals[i]) != vp:
                ok = False
                print(f"    mismatch {name} seed {seed} e {e}: {int(z[i]):x}/{vals[i]!r} vs {zp:x}/{vp!r}")
    check("synthetic vectorised == pure-Python", ok)
    t = synth_tensor("h.0.attn.c_attn.weight", 1, (C, 3 * C), chunk=1000)
    check("synthetic chunking consistent",
          np.array_equal(t, synth_tensor("h.0.attn.c_attn.weight", 1, (C, 3 * C))))
    check("synthetic ranges", np.abs(t).max() <= 0.0625
          and np.abs(synth_tensor("h.0.ln_1.weight", 1, (4096,)) - 1).max() <= 0.125)

    print(f"selftest: {'FAIL (' + ', '.join(fails) + ')' if fails else 'all OK'}")
    return 1 if fails else 0


# ----------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(prog="tessref", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = ap.add_subparsers(dest="cmd", required=True)

    p = sp.add_parser("weights", help="write a safetensors weight file")
    add_dims(p)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--synthetic", action="store_true")
    p.set_defaults(fn=cmd_weights)

    p = sp.add_parser("input", help="write a float32 [B,S,C] input .npy")
    add_dims(p)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--synthetic", action="store_true")
    p.set_defaults(fn=cmd_input)

    p = sp.add_parser("forward", help="float64 reference forward pass")
    add_dims(p)
    p.add_argument("--weights", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_forward)

    p = sp.add_parser("compare", help="relative Frobenius error check")
    p.add_argument("--ref", required=True)
    p.add_argument("--got", required=True)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--label", default=None)
    p.add_argument("--expect-f32", action="store_true")
    p.set_defaults(fn=cmd_compare)

    p = sp.add_parser("bench", help="time a plain numpy float32 forward pass")
    add_dims(p)
    p.add_argument("--reps", type=int, required=True)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(fn=cmd_bench)

    p = sp.add_parser("synth-selftest", help="print synthetic generator check values")
    p.set_defaults(fn=cmd_synth_selftest)

    p = sp.add_parser("selftest", help="check this reference itself")
    p.set_defaults(fn=cmd_selftest)

    a = ap.parse_args(argv)
    if getattr(a, "seed", None) is not None and not (0 <= a.seed < 2**64):
        sys.exit("tessref: --seed must be in [0, 2^64)")
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
