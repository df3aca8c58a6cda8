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

hf-dir    --dims... --seed N --out DIR [--vocab V] [--n-positions P]
          [--unprefixed] [--old-buffers] [--set KEY=JSON ...] [--drop KEY ...]
          [--shards N]
    Write what Hugging Face's GPT2LMHeadModel.save_pretrained writes for this
    stack (tied LM head, so no lm_head.weight): DIR/config.json with GPT-2's
    keys (model_type "gpt2", activation_function "gelu_new", dropouts 0.1,
    layer_norm_epsilon = --eps, n_inner null when F = 4C, vocab_size V,
    n_positions and n_ctx P, ...; --set overrides or adds a key, JSON value;
    --drop removes one)
    and DIR/model.safetensors: transformer.wte.weight [V,C] and
    transformer.wpe.weight [P,C] (normal(0, 0.02)), the blocks of `weights`
    (same seed, same values) as transformer.h.*, transformer.ln_f.weight and
    .bias [C].  --unprefixed writes GPT2Model's names (no "transformer.");
    --old-buffers adds the causal-mask buffers older versions saved,
    h.{l}.attn.bias [1,1,P,P] and h.{l}.attn.masked_bias [].  `forward`
    reads either form: a file whose blocks are named transformer.h.* is
    read with that prefix removed.  --shards N (N >= 2) writes Hugging
    Face's sharded layout instead of model.safetensors: the same tensors,
    in order, in N contiguous groups model-0000k-of-0000N.safetensors, and
    model.safetensors.index.json {"metadata": {"total_size": bytes},
    "weight_map": {tensor: shard file}}.

lm-forward --dims... --dir DIR --tokens T.npy --out LOGITS.npy
    The whole GPT2LMHeadModel of a save_pretrained directory (model.safetensors
    or the shards of its index) in float64: x = wte[T] + wpe[0..S), the block
    stack of `forward`, ln_f, logits = x @ wte^T (tied head).  T: integer
    token ids [B, S]; LOGITS: float64 [B, S, V].  (For checking transformers
    itself: tests/ref/hf_load.py.)

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

dy        --dims... --seed N --out DY.npy
    Write a float32 C-order .npy of shape [B, S, C], an upstream gradient
    dL/dY: normal(0, 1) from np.random.default_rng(seed + 2_000_003).

backward  --dims... --weights W.safetensors --input X.npy --dy DY.npy
          --dx-out DX.npy --grads-out G.safetensors
    The float64 forward above, then the backward pass of the whole stack
    given DY = dL/dY (Y the output of the last block).  Writes dX = dL/dX as
    a float64 .npy [B, S, C] and dL/dP for every parameter P into a
    safetensors file with the same names, shapes and order as the weights,
    stored as F64 (little-endian float64).  Every backward is derived by hand
    (no autograd); per block, with rows flattened over (B, S):
        dW2 = m^T dy, db2 = sum_rows dy, dm = dy W2^T     m = GeLU(f)
        df  = dm * GeLU'(f)                               f = LN2(x1) W1 + b1
            GeLU'(f) = 0.5 (1 + t) + 0.5 f (1 - t^2) sqrt(2/pi) (1 + 3*0.044715 f^2),
            t = tanh(sqrt(2/pi) (f + 0.044715 f^3))
        dW1 = LN2(x1)^T df, db1 = sum_rows df, dh2 = df W1^T
        dx1 = dy + LN2'(dh2)                              (residual)
        dWo = a^T dx1, dbo = sum_rows dx1, da = dx1 Wo^T  a = concat_h(A_h)
        per sequence and head (P the masked softmax, scale 1/sqrt(D)):
            dV = P^T dA, dP = dA V^T, dZ = P * (dP - rowsum(dP * P)),
            dQ = scale dZ K, dK = scale dZ^T Q            (masked P = 0 -> dZ = 0)
        dWqkv = LN1(x)^T dqkv, dbqkv = sum_rows dqkv, dh1 = dqkv Wqkv^T
        dx  = dx1 + LN1'(dh1)
    LayerNorm backward (biased variance, xhat = (x - mean) * r,
    r = 1/sqrt(var + eps), g the LN weight, dxh = dout * g):
        dg = sum_rows dout * xhat, db = sum_rows dout,
        dx = r * (dxh - mean(dxh) - xhat * mean(dxh * xhat))   (means over C)

compare-grads --ref G_REF.safetensors --got G.safetensors --tol 1e-4 [--label L]
    For every tensor of ref (F32 or F64; got may be F32 or F64): it must be
    in got with the same shape, without NaN/Inf, and have the relative
    Frobenius error ||got - ref|| / ||ref|| (float64) <= tol; where
    ||ref|| == 0 it is an absolute check instead: ||got|| <= 1e-12.  One line
    per tensor,  L NAME rel_err=1.234e-07 OK  (or FAIL, with the reason
    before it), then a summary line  L: N tensors, K failed, M missing,
    tol=... OK|FAIL.  L defaults to the base name of got.  Tensors only in
    got are ignored.  Exits 1 if any tensor fails or is missing.

train     --dims... --weights W.safetensors --input X.npy
          (--target Y.npy | --target-seed N) --steps N [--lr 1e-3]
          [--beta1 0.9] [--beta2 0.999] [--adam-eps 1e-8] [--weight-decay 0.01]
          [--weights-out W2.safetensors] [--losses-out L.txt]
    N steps of full-batch training in float64 on the fixed input X:
        loss = mean over all B*S*C elements of (Y - target)^2,
        dL/dY = 2 (Y - target) / (B*S*C).
    Prints  step k loss <%.17g>  for k = 1..N, the loss of the forward pass
    BEFORE step k's update (the same lines go to --losses-out if given).
    AdamW per element, m and v starting at zero, at step k:
        m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
        mhat = m / (1 - b1^k);  vhat = v / (1 - b2^k)
        p = p - lr (mhat / (sqrt(vhat) + adam_eps) + wd p)
    where the decay term wd p (with p before the update) applies only to the
    2-D matrices c_attn.weight, attn.c_proj.weight, c_fc.weight and
    mlp.c_proj.weight, never to biases or LayerNorm weights/biases.  The
    target is a float32 (or float64) .npy [B, S, C], or with --target-seed
    the synthetic generator below with tensor name "target" (value v).  With
    --weights-out the final weights are written as F32 safetensors in the
    weights' order.

bf16      --in W.safetensors --out W16.safetensors [--only NAME...]
          [--f32-out W32.safetensors]
    Rewrite the tensors of W (F32, F64 or BF16), all or only the names
    given, as BF16 (the others as F32): bfloat16 is the high half of the
    float32 bits, rounded to nearest, ties to even, with integer arithmetic
    on the bits (numpy has no bfloat16; bf16_bits below): round up when the
    dropped 16 bits exceed 0x8000, or equal it and the kept bits are odd.
    NaN stays NaN, inf stays inf, a finite value that would round to an
    infinity is an error.  --f32-out writes the same values, widened back,
    as F32: the file a BF16-reading program must treat exactly alike.

same-bits A.safetensors B.safetensors
    The same tensor names, with the same dtype, shape and data bytes in each
    file (header layout and order may differ).  One line per difference,
    then  same-bits: N tensors (DTYPES), K differ OK|FAIL; exits 1 on any.

--bf16 (on forward, backward, train, lm-forward, lm-backward, lm-train, generate)
    Emulate a `dtype = "bf16"` program (docs/BF16.md): the same float64
    computation, with every GEMM operand rounded to bfloat16 (nearest, ties
    to even; bf16_round, directly from the float64 value, not through
    float32) and nothing else rounded.  Per block, r() that rounding:
        a1 = r(LN1(x)); qkv = a1 @ r(Wqkv) + bqkv; att = r(attention(qkv))
        x1 = x + att @ r(Wo) + bo; a2 = r(LN2(x1)); u = a2 @ r(W1) + r(b1)
        g = r(GeLU(u)); y = x1 + g @ r(W2) + b2          (x, qkv, x1, u, y not rounded)
    and r(u) kept for the backward (the programs store the pre-activation in bf16)
    attention's own GEMMs read bf16 too (as tensor cores do; docs/BF16.md, "Attention"):
        P = softmax(mask(r(Q) r(K)^T / sqrt(D))); attention = r(P) r(V)
    backward: dW2 = g^T r(dy), dg = r(dy) r(W2)^T; dW1 = a2^T r(du),
    da2 = r(du) r(W1)^T; dWo = att^T r(dx1), datt = r(dx1) r(Wo)^T;
    dWqkv = a1^T r(dqkv), da1 = r(dqkv) r(Wqkv)^T (dy, dx1 the residual
    gradients), du = dg GeLU'(r(u)); bias gradients sum the unrounded dL/dY, but
    fc1's sums r(du) (the programs keep du in bf16 only);
    LayerNorm in float64 from the unrounded values; attention backward reads r(dO),
    r(Q), r(K), r(V), r(P) and dS = r(P (dP - rowsum(dP P))), dP = r(dO)
    r(V)^T, everything else float64.  train: float64
    master weights and AdamW, the weights rounded at each use.  LM: logits =
    r(ln_f(y)) @ r(wte)^T, d wte += r(dlogits)^T r(ln_f out), d(ln_f out) =
    r(dlogits) r(wte); the embedding gathers the unrounded wte.  generate:
    each step the whole lm-forward on the growing sequence (the programs' bf16
    KV cache holds r(K), r(V) of every position, the values the attention
    reads here).

bf16-selftest
    Checks bf16_round against exact rational rounding (random values, ties,
    subnormals, overflow) and the --bf16 paths (where the hook rounds, a
    block written out by hand), then prints the bf16-vs-float64 relative
    differences of the e2e test model, a C=128 model and the LM test model
    (forward, backward, 20 training steps) for choosing the tests' tolerances.

synth-selftest
    Print the first 4 values (and raw z in hex) of the synthetic generator
    for "h.0.attn.c_attn.weight" seed 1 and "input" seed 7, so the C
    runtime's generator can be checked against it.

selftest
    Independent checks of this reference itself (LayerNorm statistics, causal
    masking, one-token attention == V, GeLU values, a scalar loop-by-loop
    re-implementation of the block, the safetensors round trip, the
    vectorised synthetic generator against pure-Python integer arithmetic)
    and of the backward/training code: central finite differences (h = 1e-6,
    float64) of sum(dY * Y) for EVERY element of every parameter tensor and
    of the input of a tiny 2-layer model with non-trivial LayerNorm
    parameters against `backward`, the pieces (LayerNorm, GeLU, attention)
    separately, the MSE loss gradient, two AdamW steps against a scalar
    hand computation, and a falling training loss.  Exits non-zero on failure.

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
    "input", "target":                           v
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
    if name in ("input", "target"):
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
    if name in ("input", "target"):
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

_ST_DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "F16": np.dtype("<f2"),
              "BF16": np.dtype("<u2")}  # BF16: the raw 16 bits; read_safetensors widens them


def bf16_bits(arr):
    """bfloat16 bits (uint16) of float32 values, rounded to nearest, ties to
    even, from the float32 bit patterns with integer arithmetic (numpy has no
    bfloat16): keep the high 16 bits; round up when the dropped low 16 bits
    exceed half a kept ulp (0x8000), or equal it and the kept bits are odd.
    NaN stays NaN (sign kept, quiet bit set); +-inf stays +-inf.  A finite
    value that rounds to an infinity raises ValueError: the runtime refuses to
    write it (docs/TRAINING.md, "File dtypes")."""
    u = np.ascontiguousarray(arr, dtype="<f4").view("<u4").astype(np.uint64)
    keep, drop = u >> np.uint64(16), u & np.uint64(0xFFFF)
    up = (drop > 0x8000) | ((drop == 0x8000) & ((keep & np.uint64(1)) == 1))
    r = keep + up.astype(np.uint64)
    mag = u & np.uint64(0x7FFFFFFF)
    nan = mag > 0x7F800000
    r = np.where(nan, keep | np.uint64(0x40), r)
    over = (mag < 0x7F800000) & ((r & np.uint64(0x7FFF)) == 0x7F80)
    if over.any():
        i = int(np.argmax(over.ravel()))
        raise ValueError(f"bf16_bits: finite value {np.asarray(arr).ravel()[i]!r} rounds to an infinity")
    return r.astype("<u2")


def bf16_widen(bits):
    """float32 values of bfloat16 bits: the 16 bits are the high half (exact)."""
    return (np.asarray(bits, dtype="<u2").astype("<u4") << np.uint32(16)).view("<f4")


BF16_MAX = 3.3895313892515355e38  # the largest finite bfloat16, bits 0x7F7F (float32 0x7F7F0000)


def bf16_round(x):
    """float64 values rounded to the nearest bfloat16 value, ties to even, returned as float64
    (exactly: every bfloat16 value is a float64).  This is the r() of --bf16 (docs/BF16.md).

    Rounded DIRECTLY from float64, not through float32: tessgen rounds fp32 values, but the
    reference's values are float64, and float64 -> float32 -> bf16 rounds twice, which differs from
    one rounding in the rare case where the float32 rounding lands exactly on a bf16 tie (e.g.
    1 + 2^-8 + 2^-40: directly 1 + 2^-7, through float32 1).  The direct rounding is the exact
    bf16 image of the float64 value; bf16-selftest shows the difference on that example.

    Integer arithmetic on the float64 bits (52 stored fraction bits, bf16 keeps 7): keep the bits
    above bit 45, round up when the dropped 45 bits exceed half (2^44), or equal it and the kept
    bits are odd; a carry moves into the exponent as it should.  bf16 has float32's exponent range,
    so below 2^-126 (float32/bf16 subnormals) the step is the fixed 2^-133: those values are
    rounded as rint(x * 2^133) * 2^-133 (both scalings exact, rint ties to even).  NaN and +-inf
    are returned as they are; a finite value that rounds beyond BF16_MAX raises ValueError, like
    bf16_bits."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    u = x.view(np.uint64)
    keep, drop = u >> np.uint64(45), u & np.uint64((1 << 45) - 1)
    up = (drop > np.uint64(1 << 44)) | ((drop == np.uint64(1 << 44)) & ((keep & np.uint64(1)) == 1))
    r = ((keep + up.astype(np.uint64)) << np.uint64(45)).view(np.float64)
    tiny = np.abs(x) < 2.0 ** -126
    if tiny.any():
        r = np.where(tiny, np.rint(x * 2.0 ** 133) * 2.0 ** -133, r)
    fin = np.isfinite(x)
    if (fin & (np.abs(r) > BF16_MAX)).any():
        i = int(np.argmax((fin & (np.abs(r) > BF16_MAX)).ravel()))
        raise ValueError(f"bf16_round: finite value {x.ravel()[i]!r} rounds to an infinity")
    return np.where(fin, r, x)


def _ident(t):
    return t


def write_safetensors(path, tensors, dtype="F32", dtypes=None):
    """tensors: list of (name, array) in the order to store them, all stored
    as `dtype` ("F32", "F64" or "BF16", rounded by bf16_bits), except the
    names in the dict `dtypes`, stored as the dtype it gives."""
    header = {}
    off = 0
    blobs = []
    for name, arr in tensors:
        dt = (dtypes or {}).get(name, dtype)
        if dt not in ("F32", "F64", "BF16"):
            raise ValueError(f"write_safetensors: unsupported dtype {dt}")
        if dt == "BF16":
            a = bf16_bits(arr)
        else:
            a = np.ascontiguousarray(arr, dtype=_ST_DTYPES[dt])
        nb = a.nbytes
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + nb]}
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
        if meta["dtype"] == "BF16":
            out[name] = bf16_widen(out[name])
    return out


def read_safetensors_raw(path):
    """{name: (dtype string, shape tuple, data bytes)} without interpreting the data."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    return {n: (m["dtype"], tuple(m["shape"]), raw[8 + hlen + m["data_offsets"][0]:8 + hlen + m["data_offsets"][1]])
            for n, m in header.items() if n != "__metadata__"}


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


def causal_attention(qkv, H, rnd_p=None):
    """qkv [B,S,3C] -> [B,S,C]; per-sequence causal softmax attention.  rnd_p: applied to P
    before P V (bf16-selftest's hand-written block)."""
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
    if rnd_p:
        p = rnd_p(p)
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
# Backward pass and training (float64; every derivative written out by hand)
# ----------------------------------------------------------------------------

DECAY_SUFFIXES = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def layernorm_fwd(x, g, b, eps):
    """LayerNorm that also returns what its backward needs: (out, (xhat, r))."""
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axis=-1, keepdims=True)  # biased variance
    r = 1.0 / np.sqrt(var + eps)
    xhat = xc * r
    return xhat * g + b, (xhat, r)


def layernorm_bwd(dout, cache, g):
    """-> (dx, dg, db).  dx = r (dxh - mean(dxh) - xhat mean(dxh xhat)), dxh = dout g."""
    xhat, r = cache
    C = dout.shape[-1]
    dg = (dout * xhat).reshape(-1, C).sum(axis=0)
    db = dout.reshape(-1, C).sum(axis=0)
    dxh = dout * g
    dx = r * (dxh - dxh.mean(axis=-1, keepdims=True)
              - xhat * (dxh * xhat).mean(axis=-1, keepdims=True))
    return dx, dg, db


def gelu_grad(x):
    """d/dx of the tanh-approximation GeLU."""
    c = math.sqrt(2.0 / math.pi)
    t = np.tanh(c * (x + 0.044715 * x * x * x))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x)


def attention_fwd(qkv, H, rnd=None):
    """Like causal_attention, also returning (q, k, v, p) in [B,H,S,*] layout.  rnd (--bf16): the
    GEMM operands rounded, as tensor cores read them (docs/BF16.md, "Attention"): the biased
    Q, K, V, and P before P V; the cache keeps the rounded q, k, v, p."""
    R = rnd or _ident
    qkv = R(qkv)
    B, S, C3 = qkv.shape
    C = C3 // 3
    D = C // H

    def heads(m):
        return m.reshape(B, S, H, D).transpose(0, 2, 1, 3)

    q = heads(qkv[..., 0:C])
    k = heads(qkv[..., C:2 * C])
    v = heads(qkv[..., 2 * C:3 * C])
    z = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(D))
    future = np.triu(np.ones((S, S), dtype=bool), k=1)
    z = np.where(future, -np.inf, z)
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)  # exp(-inf) = 0 exactly on the masked entries
    p = R(p / p.sum(axis=-1, keepdims=True))
    o = p @ v
    return o.transpose(0, 2, 1, 3).reshape(B, S, C), (q, k, v, p)


def attention_bwd(da, cache, rnd=None):
    """da [B,S,C] -> dqkv [B,S,3C] (Q | K | V column blocks, HF order).  rnd (--bf16): dO = r(da)
    and dS rounded where the GEMMs read them (q, k, v, p in the cache are already rounded)."""
    R = rnd or _ident
    q, k, v, p = cache
    B, H, S, D = q.shape
    C = H * D
    scale = 1.0 / math.sqrt(D)
    do = R(da).reshape(B, S, H, D).transpose(0, 2, 1, 3)
    dv = p.transpose(0, 1, 3, 2) @ do                       # [B,H,S,D]
    dp = do @ v.transpose(0, 1, 3, 2)                       # [B,H,S,S]
    dz = R(p * (dp - (dp * p).sum(axis=-1, keepdims=True)))  # softmax backward; 0 where masked
    dq = (dz @ k) * scale
    dk = (dz.transpose(0, 1, 3, 2) @ q) * scale

    def unheads(m):
        return m.transpose(0, 2, 1, 3).reshape(B, S, C)

    return np.concatenate([unheads(dq), unheads(dk), unheads(dv)], axis=-1)


def block_fwd(x, w, l, H, eps, rnd=None):
    """One block in float64, returning (y, cache) for block_bwd.

    rnd: None, or the rounding of --bf16 (bf16_round), applied exactly where docs/BF16.md rounds:
    every GEMM operand (the LN1/LN2 outputs, the attention output, the GeLU output and the 2-D
    weights at each use) and the MLP's pre-activation f that the backward keeps (GeLU reads the
    unrounded f, GeLU' the rounded one, as the programs store u in bf16); the biases are added (fc1's
    rounded: the programs add it in bf16, as autocast's linear does, so that cuBLASLt's epilogue can),
    and everything else (x, qkv, x1, f, y) computed, in float64.  The cache keeps the rounded GEMM
    operands (h1, a, h2, m) and r(f): the backward's weight gradients and GeLU' read those; the
    LayerNorm and attention caches are the float64 ones."""
    R = rnd or _ident
    p = f"h.{l}."
    h1, ln1 = layernorm_fwd(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
    h1 = R(h1)
    qkv = h1 @ R(w[p + "attn.c_attn.weight"]) + w[p + "attn.c_attn.bias"]
    a, att = attention_fwd(qkv, H, rnd)
    a = R(a)
    x1 = x + (a @ R(w[p + "attn.c_proj.weight"]) + w[p + "attn.c_proj.bias"])
    h2, ln2 = layernorm_fwd(x1, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
    h2 = R(h2)
    f = h2 @ R(w[p + "mlp.c_fc.weight"]) + R(w[p + "mlp.c_fc.bias"])  # fc1's bias in bf16 too (docs/BF16.md)
    m = R(gelu(f))
    y = x1 + (m @ R(w[p + "mlp.c_proj.weight"]) + w[p + "mlp.c_proj.bias"])
    return y, (h1, ln1, att, a, ln2, h2, R(f), m)


def block_bwd(dy, cache, w, l, rnd=None):
    """dy = dL/dy of block l -> (dL/dx, {name: dL/dparam}).

    rnd (--bf16, see block_fwd): every GEMM operand rounded: the weights at each use and the
    dL/dY operands (the residual gradient dy of fc2, df of fc1, dx1 of the projection, dqkv of
    c_attn); the saved activations (and the kept pre-activation f) are already rounded in the
    cache.  The bias gradients are the
    column sums of the unrounded float64 dL/dY but fc1's, the sums of r(du) (the programs keep du in bf16
    only: docs/BF16.md); GeLU', attention and LayerNorm backward are float64."""
    R = rnd or _ident
    p = f"h.{l}."
    h1, ln1, att, a, ln2, h2, f, m = cache
    C = dy.shape[-1]

    def rows(t):
        return t.reshape(-1, t.shape[-1])

    g = {}
    # y = x1 + m W2 + b2
    dyr = R(dy)
    g[p + "mlp.c_proj.weight"] = rows(m).T @ rows(dyr)
    g[p + "mlp.c_proj.bias"] = rows(dy).sum(axis=0)
    df = (dyr @ R(w[p + "mlp.c_proj.weight"]).T) * gelu_grad(f)
    # f = h2 W1 + b1
    dfr = R(df)
    g[p + "mlp.c_fc.weight"] = rows(h2).T @ rows(dfr)
    g[p + "mlp.c_fc.bias"] = rows(dfr).sum(axis=0)  # of the bf16 du the programs keep (docs/BF16.md)
    dh2 = dfr @ R(w[p + "mlp.c_fc.weight"]).T
    dx1n, g[p + "ln_2.weight"], g[p + "ln_2.bias"] = layernorm_bwd(dh2, ln2, w[p + "ln_2.weight"])
    dx1 = dy + dx1n
    # x1 = x + a Wo + bo
    dx1r = R(dx1)
    g[p + "attn.c_proj.weight"] = rows(a).T @ rows(dx1r)
    g[p + "attn.c_proj.bias"] = rows(dx1).sum(axis=0)
    dqkv = attention_bwd(dx1r @ R(w[p + "attn.c_proj.weight"]).T, att, rnd)
    # qkv = h1 Wqkv + bqkv
    dqkvr = R(dqkv)
    g[p + "attn.c_attn.weight"] = rows(h1).T @ rows(dqkvr)
    g[p + "attn.c_attn.bias"] = rows(dqkv).sum(axis=0)
    dh1 = dqkvr @ R(w[p + "attn.c_attn.weight"]).T
    dxn, g[p + "ln_1.weight"], g[p + "ln_1.bias"] = layernorm_bwd(dh1, ln1, w[p + "ln_1.weight"])
    assert all(t.shape == w[n].shape for n, t in g.items()) and dxn.shape[-1] == C
    return dx1 + dxn, g


def forward_cached(x, w, L, H, eps, rnd=None):
    """float64 forward keeping the per-block caches: (y, [cache per layer]); rnd: see block_fwd."""
    x = np.asarray(x, dtype=np.float64)
    caches = []
    for l in range(L):
        x, c = block_fwd(x, w, l, H, eps, rnd)
        caches.append(c)
    return x, caches


def backward(dy, caches, w, L, rnd=None):
    """dy = dL/dY of the stack -> (dL/dX, {name: dL/dparam}); rnd: see block_bwd."""
    d = np.asarray(dy, dtype=np.float64)
    grads = {}
    for l in reversed(range(L)):
        d, g = block_bwd(d, caches[l], w, l, rnd)
        grads.update(g)
    return d, grads


def to_f64(w):
    return {k: np.array(v, dtype=np.float64) for k, v in w.items()}


def mse_loss_grads(x, w, target, L, H, eps, rnd=None):
    """-> (loss, {name: dloss/dparam}) for loss = mean((Y - target)^2); rnd: see block_fwd."""
    y, caches = forward_cached(x, w, L, H, eps, rnd)
    r = y - target
    loss = float(np.mean(r * r))
    _, grads = backward(2.0 * r / r.size, caches, w, L, rnd)
    return loss, grads


def adamw_step(w, grads, m, v, k, lr, b1, b2, adam_eps, wd):
    """AdamW step k (1-based) in place on the float64 dicts w, m, v."""
    bc1 = 1.0 - b1 ** k
    bc2 = 1.0 - b2 ** k
    for n in w:
        gr = grads[n]
        m[n] = b1 * m[n] + (1.0 - b1) * gr
        v[n] = b2 * v[n] + (1.0 - b2) * gr * gr
        upd = (m[n] / bc1) / (np.sqrt(v[n] / bc2) + adam_eps)
        if n.endswith(DECAY_SUFFIXES):
            upd = upd + wd * w[n]
        w[n] = w[n] - lr * upd


def sched_lr(lr, lr_min, warmup, decay_steps, k):
    """Learning rate of step k (from 1): linear warmup over `warmup` steps, then a
    cosine from lr to lr_min over `decay_steps` steps (lr_min after them; constant
    lr when decay_steps == 0).  Written from docs/TRAINING.md, not from the C."""
    if warmup > 0 and k <= warmup:
        return lr * k / warmup
    if decay_steps <= 0:
        return lr
    t = k - max(warmup, 0)
    if t >= decay_steps:
        return lr_min
    return lr_min + 0.5 * (1.0 + math.cos(math.pi * t / decay_steps)) * (lr - lr_min)


def global_norm(grads):
    """L2 norm of all gradients together, float64."""
    return math.sqrt(sum(float(np.sum(np.asarray(g, dtype=np.float64) ** 2)) for g in grads.values()))


def train(x, w, target, L, H, eps, steps, lr, b1, b2, adam_eps, wd, on_step=None,
          clip=0.0, warmup=0, decay_steps=0, lr_min=0.0, rnd=None):
    """Full-batch AdamW training in float64, with the learning-rate schedule and
    clipping by global norm (scale min(1, clip/(norm + 1e-6)); clip = 0: off).
    Returns (final float64 weights, [loss before step k for k = 1..steps]).
    on_step(k, loss, lr_k, norm) is called before each update (norm None
    without clipping).  rnd (--bf16): the master weights, moments and update stay float64; the
    forward and backward of each step round the weights at each use (block_fwd)."""
    w = to_f64(w)
    x = np.asarray(x, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    m = {n: np.zeros_like(t) for n, t in w.items()}
    v = {n: np.zeros_like(t) for n, t in w.items()}
    losses = []
    for k in range(1, steps + 1):
        loss, grads = mse_loss_grads(x, w, target, L, H, eps, rnd)
        losses.append(loss)
        lr_k = sched_lr(lr, lr_min, warmup, decay_steps, k)
        norm = None
        if clip > 0:
            norm = global_norm(grads)
            scale = min(1.0, clip / (norm + 1e-6))
            grads = {n: g * scale for n, g in grads.items()}
        if on_step is not None:
            on_step(k, loss, lr_k, norm)
        adamw_step(w, grads, m, v, k, lr_k, b1, b2, adam_eps, wd)
    return w, losses


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
# The whole GPT-2 (model.vocab; docs/MODEL.md): token + position embedding, the
# blocks, ln_f, the LM head tied to wte, mean cross-entropy over all B*S tokens.
# float64, every derivative by hand; checked against central finite differences
# by `lm-fdcheck`. Nothing here knows the Tesseract layout or the padding.
# ----------------------------------------------------------------------------

LM_DECAY = ("wte.weight", "wpe.weight")  # AdamW decays every 2-D weight: the embeddings too


def lm_tensor_specs(L, C, F, V, P):
    """[(name, shape)] of the language model, in file order."""
    return ([("wte.weight", (V, C)), ("wpe.weight", (P, C))] + tensor_specs(L, C, F)
            + [("ln_f.weight", (C,)), ("ln_f.bias", (C,))])


def make_lm_weights(L, C, F, V, P, seed):
    out = make_weights(L, C, F, seed, False)
    rng = np.random.default_rng(seed + 7_000_001)
    out = [("wte.weight", rng.normal(0.0, 0.3, size=(V, C)).astype(np.float32)),
           ("wpe.weight", rng.normal(0.0, 0.1, size=(P, C)).astype(np.float32))] + out
    out.append(("ln_f.weight", (1.0 + rng.normal(0.0, 0.1, size=(C,))).astype(np.float32)))
    out.append(("ln_f.bias", rng.normal(0.0, 0.1, size=(C,)).astype(np.float32)))
    return out


def lm_forward(tok, tgt, w, L, H, eps, rnd=None):
    """-> (logits [B,S,V], mean loss, cache) in float64.  rnd (--bf16): the blocks as in
    block_fwd, the head's GEMM reads r(ln_f out) and r(wte); the embedding gathers the unrounded
    wte (docs/BF16.md); the cache keeps the rounded ln_f output."""
    R = rnd or _ident
    B, S = tok.shape
    x = w["wte.weight"][tok] + w["wpe.weight"][np.arange(S)][None, :, :]
    y, caches = forward_cached(x, w, L, H, eps, rnd)
    xf, lnc = layernorm_fwd(y, w["ln_f.weight"], w["ln_f.bias"], eps)
    xf = R(xf)
    logits = xf @ R(w["wte.weight"]).T
    m = logits.max(axis=-1, keepdims=True)
    e = np.exp(logits - m)
    z = e.sum(axis=-1, keepdims=True)
    loss = None
    if tgt is not None:
        lt = np.take_along_axis(logits, tgt[..., None], axis=-1)
        loss = float(np.mean(np.log(z) + m - lt))
    return logits, loss, (caches, xf, lnc, e / z)


def lm_loss_grads(tok, tgt, w, L, H, eps, rnd=None):
    """-> (mean loss, {name: dloss/dparam}) for every tensor of lm_tensor_specs; rnd: see
    lm_forward (the head's backward GEMMs read r(dlogits), r(ln_f out), r(wte))."""
    R = rnd or _ident
    B, S = tok.shape
    V, C = w["wte.weight"].shape
    logits, loss, (caches, xf, lnc, p) = lm_forward(tok, tgt, w, L, H, eps, rnd)
    dl = p.copy()
    np.put_along_axis(dl, tgt[..., None], np.take_along_axis(dl, tgt[..., None], axis=-1) - 1.0, axis=-1)
    dl /= B * S
    dl = R(dl)
    g = {}
    g["wte.weight"] = dl.reshape(-1, V).T @ xf.reshape(-1, C)             # the head: logits = xf wte^T
    dxf = dl @ R(w["wte.weight"])
    dy, g["ln_f.weight"], g["ln_f.bias"] = layernorm_bwd(dxf, lnc, w["ln_f.weight"])
    dx, gb = backward(dy, caches, w, L, rnd)
    g.update(gb)
    np.add.at(g["wte.weight"], tok.reshape(-1), dx.reshape(-1, C))        # the embedding
    g["wpe.weight"] = np.zeros_like(w["wpe.weight"])
    g["wpe.weight"][:S] = dx.sum(axis=0)
    return loss, g


def load_ids(path, B, S, V):
    t = np.load(path)
    if t.shape != (B, S) or t.dtype != np.int32:
        sys.exit(f"tessref: {path}: {t.dtype} {list(t.shape)}, expected int32 {[B, S]}")
    if t.min() < 0 or t.max() >= V:
        sys.exit(f"tessref: {path}: ids outside [0, {V})")
    return t.astype(np.int64)


def lm_load(a):
    check_dims(a)
    L, C, F, V, P = a.layers, a.hidden, a.ffn, a.vocab, a.positions
    w = read_safetensors(a.weights)
    for n, shp in lm_tensor_specs(L, C, F, V, P):
        if n not in w or tuple(w[n].shape) != tuple(shp):
            sys.exit(f"tessref: {a.weights}: {n} missing or not of shape {list(shp)}")
    tok = load_ids(a.tokens, a.batch, a.seq, V)
    tgt = load_ids(a.targets, a.batch, a.seq, V) if getattr(a, "targets", None) else None
    return to_f64(w), tok, tgt


def cmd_lm_weights(a):
    check_dims(a)
    write_safetensors(a.out, make_lm_weights(a.layers, a.hidden, a.ffn, a.vocab, a.positions, a.seed))
    return 0


def cmd_tokens(a):
    rng = np.random.default_rng(a.seed + 5_000_011)
    np.save(a.out, rng.integers(0, a.vocab, size=(a.batch, a.seq)).astype(np.int32))
    return 0


def cmd_lm_forward_weights(a):
    w, tok, tgt = lm_load(a)
    logits, loss, _ = lm_forward(tok, tgt, w, a.layers, a.heads, a.eps, bf16_round if a.bf16 else None)
    np.save(a.logits_out, np.ascontiguousarray(logits))
    if loss is not None:
        print(f"loss {loss:.17g}")
    return 0


MASK64 = (1 << 64) - 1


def sample_mix(z):
    """splitmix64's finaliser, as runtime/tr_tokens.c sample_mix"""
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def gumbel(seed, sequence, position, tid):
    """The Gumbel noise of (seed, sequence, position, id), bit for bit tr_sample_gumbel's."""
    h = sample_mix(sample_mix(sample_mix(sample_mix(seed & MASK64) ^ sequence) ^ position) ^ tid)
    u = (float(h >> 12) + 0.5) * 2.0 ** -52
    return -math.log(-math.log(u))


def sample_kept(last, T, top_k, top_p):
    """The ids sampling keeps (docs/GENERATE.md, "Sampling") and their probabilities: the top_k largest logits (ties
    to the lower id; 0: all), then the smallest prefix of them, by descending softmax(logit / T), whose mass reaches
    top_p; the probabilities renormalised over what is kept. float64."""
    V = last.shape[0]
    order = np.lexsort((np.arange(V), -last))  # descending logit, then ascending id
    kept = order[:min(top_k, V)] if top_k else order
    z = last[kept] / T
    p = np.exp(z - z.max())
    p /= p.sum()
    if top_p < 1:
        cum, n = 0.0, len(kept)
        for c in range(len(kept)):
            cum += p[c]
            if cum >= top_p:
                n = c + 1
                break
        kept, p = kept[:n], p[:n] / p[:n].sum()
    return kept, p


def sample_id(last, a, sequence, position):
    """Gumbel-max over the kept ids: argmax logit / T + gumbel(seed, sequence, position, id), lower id on ties."""
    T = a.temperature if a.temperature is not None else 1.0
    kept, _ = sample_kept(last, T, a.top_k, a.top_p)
    best, bid = -math.inf, None
    for t in sorted(int(v) for v in kept):
        s = last[t] / T + gumbel(a.seed, sequence, position, t)
        if s > best:
            best, bid = s, t
    return bid


def gamma_q(s, x):
    """The regularised upper incomplete gamma function Q(s, x) (series below s + 1, Lentz's continued fraction
    above; Numerical Recipes 6.2): the chi-square survival function of x with k degrees is Q(k/2, x/2)."""
    if x <= 0:
        return 1.0
    lead = math.exp(-x + s * math.log(x) - math.lgamma(s))
    if x < s + 1:
        ap, term = s, 1.0 / s
        total = term
        for _ in range(10000):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - total * lead)
    tiny = 1e-300
    b = x + 1 - s
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - s)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return lead * h


def cmd_sample_chisq(a):
    """The first sampled id of every row of --samples (int32 [n, L + N], all rows the one prompt of --prompt-tokens)
    against the float64 distribution of sample_kept on the reference logits of that prompt: no id outside the kept
    set, and Pearson's chi-square over the kept ids (those with expected count below 5 merged, the smallest first)
    with survival probability >= --alpha, which is then the test's false-failure rate."""
    assert abs(gamma_q(0.5, 3.841458820694124 / 2) - 0.05) < 1e-9 and abs(gamma_q(5, 18.307038053275146 / 2) - 0.05) < 1e-9
    check_dims(a)
    w = to_f64(read_safetensors(a.weights))
    prompt = [int(v) for v in np.load(a.prompt_tokens)[0] if v >= 0]
    logits, _, _ = lm_forward(np.array([prompt], np.int64), None, w, a.layers, a.heads, a.eps)
    kept, p = sample_kept(logits[0, -1], a.temperature if a.temperature is not None else 1.0, a.top_k, a.top_p)
    T = np.load(a.samples)
    first = T[:, len(prompt)].astype(np.int64)
    n = first.shape[0]
    if not all(np.array_equal(T[b, :len(prompt)], prompt) for b in range(n)):
        print("a row of the samples does not start with the prompt")
        return 1
    outside = sorted(set(first.tolist()) - set(int(v) for v in kept))
    if outside:
        print(f"sampled ids outside the kept set {sorted(int(v) for v in kept)}: {outside}")
        return 1
    obs = np.array([(first == t).sum() for t in kept], np.float64)
    exp_ = p * n
    order = np.argsort(exp_)
    bins_o, bins_e, acc_o, acc_e = [], [], 0.0, 0.0
    for t in order:
        acc_o += obs[t]
        acc_e += exp_[t]
        if acc_e >= 5:
            bins_o.append(acc_o)
            bins_e.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0:
        if bins_e:
            bins_o[-1] += acc_o
            bins_e[-1] += acc_e
        else:
            bins_o.append(acc_o)
            bins_e.append(acc_e)
    bo, be = np.array(bins_o), np.array(bins_e)
    chi2 = float(((bo - be) ** 2 / be).sum())
    dof = len(be) - 1
    pval = gamma_q(dof / 2, chi2 / 2) if dof > 0 else 1.0
    print(f"{n} samples, {len(kept)} ids kept, {len(be)} bins: chi-square {chi2:.4g} with {dof} degrees, "
          f"P(>= it) = {pval:.3g} (fail below {a.alpha:g})")
    return 0 if pval >= a.alpha else 1


def cmd_generate(a):
    """Greedy generation (docs/GENERATE.md), independent of tessgen's KV cache: for every prompt (a row of int32
    ids, -1 pads after its end) run the whole float64 forward (--bf16: lm-forward's rounding) on the growing
    sequence at each step and take the argmax (lowest id on ties), until --max-new tokens or --eos. Writes the ids [n, L + max_new] (-1 after a
    sequence's end) and the logits of every new token [n, max_new, V] (0 after the end)."""
    check_dims(a)
    w = read_safetensors(a.weights)
    for n, shp in lm_tensor_specs(a.layers, a.hidden, a.ffn, a.vocab, a.positions):
        if n not in w or tuple(w[n].shape) != tuple(shp):
            sys.exit(f"tessref: {a.weights}: {n} missing or not of shape {list(shp)}")
    w = to_f64(w)
    P = np.load(a.prompt_tokens)
    n, L = P.shape
    out = np.full((n, L + a.max_new), -1, np.int32)
    lg = np.zeros((n, a.max_new, a.vocab), np.float32)
    for b in range(n):
        seq = [int(v) for v in P[b] if v >= 0]
        out[b, :len(seq)] = seq
        for m in range(a.max_new):
            logits, _, _ = lm_forward(np.array([seq], np.int64), None, w, a.layers, a.heads, a.eps,
                                      bf16_round if a.bf16 else None)
            last = logits[0, -1]
            lg[b, m] = last
            if a.temperature is None and not a.top_k and a.top_p >= 1:
                nxt = int(np.argmax(last))  # the first maximum: the lowest id of a tie
            else:
                nxt = sample_id(last, a, b, len(seq))
            out[b, len(seq)] = nxt
            seq.append(nxt)
            if nxt == a.eos:
                break
    np.save(a.out, out)
    if a.logits_out:
        np.save(a.logits_out, lg)
    return 0


def add_sample_args(p):
    p.add_argument("--temperature", type=float, default=None, help="sample (default: greedy); 1 with --top-k/--top-p")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1)


def cmd_compare_step_losses(a):
    """Two runs' logs: the step losses ('step N loss L ...') and the loss after them ('after step N: loss L'), the same
    count (--count) in each, every pair within --tol relative. Prints each pair; exit 1 on any difference."""
    def losses(f):
        return [float(l.split()[3] if l.startswith("step ") else l.split()[4]) for l in open(f)
                if l.startswith("step ") or l.startswith("after ")]
    x, y = losses(a.ref), losses(a.got)
    names = a.labels.split(",")
    ok = len(x) == a.count and len(y) == a.count
    if not ok:
        print(f"want {a.count} losses in each log, got {len(x)} and {len(y)}")
    for k in range(min(len(x), len(y))):
        rel = abs(x[k] - y[k]) / abs(x[k])
        print("loss %d: %s %.9g, %s %.9g, rel %.2e (tol %g)" % (k + 1, names[0], x[k], names[-1], y[k], rel, a.tol))
        ok = ok and rel <= a.tol
    return 0 if ok else 1


def cmd_compare_generate(a):
    """tessgen's generated ids must equal the reference's, token for token, and the logits of every new token
    (up to each sequence's end) be within --tol (max absolute difference) and, with --rel-tol, their relative
    Frobenius norm within it (--tol is then checked only when given).  --tie-tol T (a program whose sums run
    in another order than the reference's, e.g. bf16 on a GPU): a sequence's ids may part from the reference's at a
    near tie, where the reference's logit of its own id exceeds that of the program's id by at most T; the logits
    are then compared up to that step and the rest of the sequence (a different continuation) is not."""
    ta, tb = np.load(a.tokens), np.load(a.ref_tokens)
    if ta.shape != tb.shape or ta.dtype != np.int32 or (a.tie_tol is None and not np.array_equal(ta, tb)):
        print(f"tokens differ:\n{ta}\nreference:\n{tb}")
        return 1
    la, lb = np.load(a.logits), np.load(a.ref_logits)
    if la.shape != lb.shape:
        print(f"logits shape {la.shape}, reference {lb.shape}")
        return 1
    L = ta.shape[1] - la.shape[1]
    worst, parted, ok, num, den = 0.0, 0, True, 0.0, 0.0
    for b in range(ta.shape[0]):
        plen = int((ta[b, :L] >= 0).sum())
        if not np.array_equal(ta[b, :plen], tb[b, :plen]):
            print(f"sequence {b}: the prompts differ")
            return 1
        new = int((ta[b, plen:] >= 0).sum())
        if a.tie_tol is not None:
            diff = [m for m in range(new) if ta[b, plen + m] != tb[b, plen + m]]
            if diff:
                m = diff[0]
                gap = float(lb[b, m, tb[b, plen + m]]) - float(lb[b, m, ta[b, plen + m]])
                print(f"sequence {b}: ids part at new token {m} ({ta[b, plen + m]} against {tb[b, plen + m]}), "
                      f"reference logit gap {gap:.3g} (tie tol {a.tie_tol:g})")
                ok = ok and gap <= a.tie_tol
                parted += 1
                new = m + 1
            elif int((tb[b, plen:] >= 0).sum()) != new:
                print(f"sequence {b}: {new} new ids, the reference {int((tb[b, plen:] >= 0).sum())}")
                ok = False
        if new:
            d = la[b, :new].astype(np.float64) - lb[b, :new]
            worst = max(worst, float(np.max(np.abs(d))))
            num += float(np.sum(d * d))
            den += float(np.sum(lb[b, :new].astype(np.float64) ** 2))
    what = "tokens equal" if not parted else f"{parted} sequence(s) parted from the reference" + (
        " at a near tie, the others equal" if ok else "")
    rel = (num / den) ** 0.5 if den > 0 else 0.0
    tol = a.tol if a.tol is not None else (None if a.rel_tol is not None else 1e-4)
    print(f"{what}; max |logit - reference| {worst:.3g}" + (f" (tol {tol:g})" if tol is not None else "") +
          f", relative norm {rel:.3g}" + (f" (tol {a.rel_tol:g})" if a.rel_tol is not None else ""))
    return 0 if ok and (tol is None or worst <= tol) and (a.rel_tol is None or rel <= a.rel_tol) else 1


def cmd_lm_backward(a):
    w, tok, tgt = lm_load(a)
    loss, g = lm_loss_grads(tok, tgt, w, a.layers, a.heads, a.eps, bf16_round if a.bf16 else None)
    specs = lm_tensor_specs(a.layers, a.hidden, a.ffn, a.vocab, a.positions)
    write_safetensors(a.grads_out, [(n, g[n]) for n, _ in specs], "F64")
    print(f"loss {loss:.17g}")
    return 0


def cmd_lm_train(a):
    w, tok, tgt = lm_load(a)
    m = {n: np.zeros_like(t) for n, t in w.items()}
    v = {n: np.zeros_like(t) for n, t in w.items()}
    for k in range(1, a.steps + 1):
        loss, g = lm_loss_grads(tok, tgt, w, a.layers, a.heads, a.eps, bf16_round if a.bf16 else None)
        print(f"step {k} loss {loss:.17g}", flush=True)
        bc1, bc2 = 1.0 - a.beta1 ** k, 1.0 - a.beta2 ** k
        for n in w:
            m[n] = a.beta1 * m[n] + (1.0 - a.beta1) * g[n]
            v[n] = a.beta2 * v[n] + (1.0 - a.beta2) * g[n] * g[n]
            upd = (m[n] / bc1) / (np.sqrt(v[n] / bc2) + a.adam_eps)
            if n.endswith(DECAY_SUFFIXES) or n in LM_DECAY:
                upd = upd + a.weight_decay * w[n]
            w[n] = w[n] - a.lr * upd
    return 0


def cmd_lm_fdcheck(a):
    """The reference's own LM backward against central differences (float64, a tiny model)."""
    L, C, F, H, V, P, B, S = 2, 8, 16, 2, 11, 6, 2, 5
    w = to_f64(dict(make_lm_weights(L, C, F, V, P, 3)))
    rng = np.random.default_rng(9)
    tok = rng.integers(0, V, size=(B, S))
    tgt = rng.integers(0, V, size=(B, S))
    _, g = lm_loss_grads(tok, tgt, w, L, H, 1e-5)
    worst, h = 0.0, 1e-5
    for n, t in w.items():
        for _ in range(4):
            idx = tuple(int(rng.integers(0, d)) for d in t.shape)
            old = t[idx]
            t[idx] = old + h
            lp = lm_forward(tok, tgt, w, L, H, 1e-5)[1]
            t[idx] = old - h
            lm_ = lm_forward(tok, tgt, w, L, H, 1e-5)[1]
            t[idx] = old
            fd = (lp - lm_) / (2 * h)
            err = abs(fd - g[n][idx]) / max(abs(fd), abs(g[n][idx]), 1e-6)
            worst = max(worst, err)
            if err > 1e-5:
                print(f"{n}{list(idx)}: analytic {g[n][idx]:.12g} vs central difference {fd:.12g} (rel {err:.2e}) FAIL")
    print(f"lm-fdcheck: {len(w)} tensors x 4 entries, worst relative difference {worst:.2e} "
          f"{'OK' if worst <= 1e-5 else 'FAIL'}")
    return 0 if worst <= 1e-5 else 1


def add_lm_dims(p):
    add_dims(p)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--positions", type=int, required=True)

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
    w = hf_blocks(read_safetensors(a.weights))
    for n, s in tensor_specs(L, C, F):
        if n not in w:
            sys.exit(f"tessref: {a.weights}: missing tensor {n}")
        if tuple(w[n].shape) != tuple(s):
            sys.exit(f"tessref: {a.weights}: {n} has shape {list(w[n].shape)}, expected {list(s)}")
    x = np.load(a.input)
    if x.shape != (a.batch, a.seq, C):
        sys.exit(f"tessref: {a.input}: shape {list(x.shape)}, expected {[a.batch, a.seq, C]}")
    if a.bf16:  # the forward that backward and train use, with the rounding hook
        y, _ = forward_cached(x, to_f64(w), L, a.heads, a.eps, bf16_round)
    else:
        y = forward(x, w, L, a.heads, a.eps, np.float64)
    np.save(a.out, np.ascontiguousarray(y, dtype=np.float64))
    return 0


def cmd_hf_dir(a):
    check_dims(a)
    L, C, H, F, V, P = a.layers, a.hidden, a.heads, a.ffn, a.vocab, a.n_positions
    cfg = {
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
        "bos_token_id": V - 1, "embd_pdrop": 0.1, "eos_token_id": V - 1, "initializer_range": 0.02,
        "layer_norm_epsilon": a.eps, "model_type": "gpt2", "n_ctx": P, "n_embd": C, "n_head": H,
        "n_inner": None if F == 4 * C else F, "n_layer": L, "n_positions": P, "reorder_and_upcast_attn": False,
        "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
        "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
        "summary_type": "cls_index", "summary_use_proj": True,
        "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
        "torch_dtype": "float32", "transformers_version": "4.40.0", "use_cache": True, "vocab_size": V,
    }
    for kv in a.set or []:
        k, _, v = kv.partition("=")
        cfg[k] = json.loads(v)
    for k in a.drop or []:
        cfg.pop(k, None)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    pre = "" if a.unprefixed else "transformer."
    rng = np.random.default_rng(a.seed + 7)
    ts = [(pre + "wte.weight", rng.normal(0.0, 0.02, (V, C)).astype(np.float32)),
          (pre + "wpe.weight", rng.normal(0.0, 0.02, (P, C)).astype(np.float32))]
    ts += [(pre + n, t) for n, t in make_weights(L, C, F, a.seed, False)]
    if a.old_buffers:
        mask = np.tril(np.ones((P, P), np.float32)).reshape(1, 1, P, P)
        for l in range(L):
            ts += [(f"{pre}h.{l}.attn.bias", mask), (f"{pre}h.{l}.attn.masked_bias", np.array(-1e4, np.float32))]
    ts += [(pre + "ln_f.weight", np.ones(C, np.float32)), (pre + "ln_f.bias", np.zeros(C, np.float32))]
    if a.shards and a.shards > 1:
        write_shards(a.out, ts, a.shards)
    else:
        write_safetensors(os.path.join(a.out, "model.safetensors"), ts)
    return 0


def write_shards(out, ts, n):
    """Hugging Face's sharded layout: the tensors in n contiguous groups, shard k (1-based) in
    model-0000k-of-0000n.safetensors, and model.safetensors.index.json =
    {"metadata": {"total_size": bytes of all tensors}, "weight_map": {tensor: shard file}}."""
    if n > len(ts):
        sys.exit(f"tessref: --shards {n}: only {len(ts)} tensors")
    per = -(-len(ts) // n)
    wmap, total = {}, 0
    for k in range(n):
        part = ts[k * per:(k + 1) * per]
        fname = f"model-{k + 1:05d}-of-{n:05d}.safetensors"
        write_safetensors(os.path.join(out, fname), part)
        for name, t in part:
            wmap[name] = fname
            total += np.asarray(t, np.float32).nbytes
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(wmap.items()))}, f, indent=2)
        f.write("\n")


# ----------------------------------------------------------------------------
# The whole GPT2LMHeadModel forward, for checking transformers itself on an
# hf-dir directory (tests/hf_io.sh, tests/ref/hf_load.py). Kept apart from the
# block stack above on purpose: the whole-model work of issue 10 may bring its
# own; the two are to be reconciled into one.
# ----------------------------------------------------------------------------

def read_hf_dir_weights(d):
    """All tensors of a save_pretrained directory: model.safetensors, or every shard its index names."""
    one = os.path.join(d, "model.safetensors")
    if os.path.exists(one):
        return read_safetensors(one)
    ix = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    w = {}
    for shard in sorted(set(ix["weight_map"].values())):
        w.update(read_safetensors(os.path.join(d, shard)))
    return w


def lm_forward_hfout(tokens, w, L, H, eps, rnd=None):
    """GPT2LMHeadModel's logits in float64: x = wte[tokens] + wpe[0..S), the blocks, ln_f, x @ wte^T (tied).
    rnd (--bf16): the blocks of forward_cached with the hook, and the head reads r(ln_f out), r(wte)."""
    w = {k: np.asarray(v, np.float64) for k, v in hf_blocks_all(w).items()}
    S = tokens.shape[1]
    x = w["wte.weight"][tokens] + w["wpe.weight"][np.arange(S)][None, :, :]
    if rnd is None:
        x = forward(x, w, L, H, eps, np.float64)
        x = layernorm(x, w["ln_f.weight"], w["ln_f.bias"], eps)
        return x @ w["wte.weight"].T
    x, _ = forward_cached(x, w, L, H, eps, rnd)
    x, _ = layernorm_fwd(x, w["ln_f.weight"], w["ln_f.bias"], eps)
    return rnd(x) @ rnd(w["wte.weight"]).T


def hf_blocks_all(w):
    """Every tensor with GPT2LMHeadModel's "transformer." prefix removed (lm_head kept as it is)."""
    return {(n[len("transformer."):] if n.startswith("transformer.") else n): t for n, t in w.items()}


def cmd_lm_forward(a):
    check_dims(a)
    tokens = np.load(a.tokens)
    if tokens.ndim != 2 or tokens.dtype.kind not in "iu":
        sys.exit(f"tessref: {a.tokens}: expected integer token ids [B, S], got {tokens.dtype} {list(tokens.shape)}")
    y = lm_forward_hfout(tokens, read_hf_dir_weights(a.dir), a.layers, a.heads, a.eps,
                         bf16_round if a.bf16 else None)
    np.save(a.out, np.ascontiguousarray(y, dtype=np.float64))
    return 0


def cmd_lm_forward_any(a):
    """lm-forward: the save_pretrained-directory form (--dir, --out) or the weights-file form (docs/MODEL.md)."""
    if a.dir is not None:
        if a.out is None or a.weights is not None:
            sys.exit("tessref: lm-forward --dir needs --out (and no --weights)")
        return cmd_lm_forward(a)
    if a.weights is None or a.vocab is None or a.positions is None or a.logits_out is None:
        sys.exit("tessref: lm-forward needs --dir DIR --out F, or --weights W --vocab V --positions P --logits-out F")
    return cmd_lm_forward_weights(a)


def hf_blocks(w):
    """The block tensors of a weights dict, with GPT2LMHeadModel's "transformer." prefix removed if the
    file uses it."""
    if any(n.startswith("transformer.h.") for n in w):
        return {n[len("transformer."):]: t for n, t in w.items() if n.startswith("transformer.")}
    return w


def read_losses(path):
    """The losses of a run's or the reference's `step N loss L ...` lines."""
    return [float(l.split()[3]) for l in open(path) if l.startswith("step ")]


def cmd_compare_losses(a):
    """Training curves: every --run against the first run (--mesh-tol) and against each --ref LABEL=FILE=TOL, at
    every step (relative difference); --falling: each run's last loss below its first. Prints the worst of each."""
    runs = [(r.split("=", 1)[0], read_losses(r.split("=", 1)[1])) for r in a.run]
    refs = []
    for r in a.ref:
        label, path, tol = r.split("=", 2)
        refs.append((label, read_losses(path), float(tol)))
    n = a.steps
    ok = all(len(v) == n for _, v in runs) and all(len(v) == n for _, v, _ in refs)
    if not ok:
        print("expected %d steps: runs %s, references %s" % (n, [len(v) for _, v in runs], [len(v) for _, v, _ in refs]))
    base = runs[0][1]
    worst = {}
    for name, v in runs:
        for lab, ref, tol in [("the first run (%s)" % runs[0][0], base, a.mesh_tol)] + refs:
            for k in range(min(n, len(v), len(ref))):
                rel = abs(v[k] - ref[k]) / abs(ref[k])
                worst[lab] = max(worst.get(lab, 0.0), rel)
                if rel > tol:
                    print("%s step %d: loss %.9g vs %s %.9g (rel %.2e > %g)" % (name, k + 1, v[k], lab, ref[k], rel, tol))
                    ok = False
        if a.falling and not (v and v[-1] < v[0]):
            print("%s: the loss does not fall: %s" % (name, v))
            ok = False
    print("%s: worst relative difference %s; step 1 and %d: %s" % (
        a.label or "losses", ", ".join("to %s %.2e" % kv for kv in worst.items()), n,
        ", ".join("%s %.6g %.6g" % (name, v[0], v[-1]) for name, v in runs + [(l, r) for l, r, _ in refs] if v)))
    sys.exit(0 if ok else 1)


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


def load_weights_checked(path, L, C, F):
    w = read_safetensors(path)
    for n, s in tensor_specs(L, C, F):
        if n not in w:
            sys.exit(f"tessref: {path}: missing tensor {n}")
        if tuple(w[n].shape) != tuple(s):
            sys.exit(f"tessref: {path}: {n} has shape {list(w[n].shape)}, expected {list(s)}")
    return w


def load_bsc(path, B, S, C):
    x = np.load(path)
    if x.shape != (B, S, C):
        sys.exit(f"tessref: {path}: shape {list(x.shape)}, expected {[B, S, C]}")
    if x.dtype not in (np.float32, np.float64):
        sys.exit(f"tessref: {path}: dtype {x.dtype}, expected float32 or float64")
    return x


def cmd_dy(a):
    check_dims(a)
    rng = np.random.default_rng(a.seed + 2_000_003)
    dy = rng.normal(0.0, 1.0, size=(a.batch, a.seq, a.hidden)).astype(np.float32)
    np.save(a.out, np.ascontiguousarray(dy))
    return 0


def cmd_backward(a):
    check_dims(a)
    L, C, F = a.layers, a.hidden, a.ffn
    w = to_f64(load_weights_checked(a.weights, L, C, F))
    x = load_bsc(a.input, a.batch, a.seq, C)
    dy = load_bsc(a.dy, a.batch, a.seq, C)
    rnd = bf16_round if a.bf16 else None
    _, caches = forward_cached(x, w, L, a.heads, a.eps, rnd)
    dx, grads = backward(dy, caches, w, L, rnd)
    np.save(a.dx_out, np.ascontiguousarray(dx, dtype=np.float64))
    write_safetensors(a.grads_out, [(n, grads[n]) for n, _ in tensor_specs(L, C, F)], "F64")
    return 0


def cmd_compare_grads(a):
    label = a.label if a.label is not None else os.path.basename(a.got)
    ref = read_safetensors(a.ref)
    got = read_safetensors(a.got)
    nfail = nmiss = 0
    for name, r in ref.items():
        if name not in got:
            print(f"{label} {name} missing in got FAIL")
            nmiss += 1
            continue
        g = got[name]
        if tuple(g.shape) != tuple(r.shape):
            print(f"{label} {name} shape mismatch ref {list(r.shape)} got {list(g.shape)} FAIL")
            nfail += 1
            continue
        g = g.astype(np.float64)
        r = r.astype(np.float64)
        bad = ~np.isfinite(g)
        if bad.any():
            first = [int(i) for i in np.unravel_index(int(np.argmax(bad.ravel())), g.shape)]
            print(f"{label} {name} got has {int(bad.sum())} NaN/Inf values, first at index {first} FAIL")
            nfail += 1
            continue
        if not np.isfinite(r).all():
            print(f"{label} {name} ref has non-finite values FAIL")
            nfail += 1
            continue
        den = float(np.linalg.norm(r.ravel()))
        if den == 0.0:
            gn = float(np.linalg.norm(g.ravel()))
            ok = gn <= 1e-12
            print(f"{label} {name} rel_err={0.0 if ok else math.inf:.3e} "
                  f"(ref is zero: ||got||={gn:.3e}, abs tol 1e-12) {'OK' if ok else 'FAIL'}")
        else:
            err = float(np.linalg.norm((g - r).ravel())) / den
            ok = err <= a.tol
            print(f"{label} {name} rel_err={err:.3e} {'OK' if ok else 'FAIL'}")
        nfail += 0 if ok else 1
    bad = nfail + nmiss > 0 or not ref
    print(f"{label}: {len(ref)} tensors, {nfail} failed, {nmiss} missing, tol={a.tol:.0e} "
          f"{'FAIL' if bad else 'OK'}")
    return 1 if bad else 0


def cmd_train(a):
    check_dims(a)
    L, C, F, B, S = a.layers, a.hidden, a.ffn, a.batch, a.seq
    if a.steps < 0:
        sys.exit("tessref: --steps must be >= 0")
    w = load_weights_checked(a.weights, L, C, F)
    x = load_bsc(a.input, B, S, C)
    if a.target is not None:
        target = load_bsc(a.target, B, S, C)
    else:
        target = synth_tensor("target", a.target_seed, (B, S, C))
    lines = []

    sched = a.clip or a.warmup or a.decay_steps or a.lr_min
    if a.clip < 0 or a.warmup < 0 or a.decay_steps < 0 or not 0 <= a.lr_min <= a.lr:
        sys.exit("tessref: need --clip >= 0, --warmup >= 0, --decay-steps >= 0, 0 <= --lr-min <= --lr")

    def on_step(k, loss, lr_k, norm):
        line = f"step {k} loss {loss:.17g}"
        if sched:  # the runtime's log line: lr, and norm when clipping computes it
            line += f" lr {lr_k:.17g}" + (f" norm {norm:.17g}" if norm is not None else "")
        lines.append(line)
        print(line, flush=True)

    wf, _ = train(x, w, target, L, a.heads, a.eps, a.steps, a.lr, a.beta1, a.beta2,
                  a.adam_eps, a.weight_decay, on_step, clip=a.clip, warmup=a.warmup,
                  decay_steps=a.decay_steps, lr_min=a.lr_min, rnd=bf16_round if a.bf16 else None)
    if a.losses_out:
        with open(a.losses_out, "w") as f:
            f.write("".join(line + "\n" for line in lines))
    if a.weights_out:
        write_safetensors(a.weights_out, [(n, wf[n]) for n, _ in tensor_specs(L, C, F)], "F32")
    return 0


def cmd_grad_norm(a):
    print(f"{global_norm(read_safetensors(a.grads)):.17g}")
    return 0


def cmd_bf16(a):
    w = read_safetensors(a.inp)
    only = set(a.only) if a.only else set(w)
    missing = only - set(w)
    if missing:
        sys.exit(f"tessref: {a.inp}: no tensor {sorted(missing)[0]}")
    names = list(w)
    write_safetensors(a.out, [(n, w[n]) for n in names], "F32", {n: "BF16" for n in only})
    if a.f32_out:
        write_safetensors(a.f32_out, [(n, bf16_widen(bf16_bits(w[n])) if n in only else w[n]) for n in names], "F32")
    return 0


def cmd_same_bits(a):
    x, y = read_safetensors_raw(a.a), read_safetensors_raw(a.b)
    bad = 0
    for n in sorted(set(x) | set(y)):
        if n not in x or n not in y:
            print(f"{n}: only in {a.a if n in x else a.b} FAIL")
            bad += 1
        elif x[n][:2] != y[n][:2]:
            print(f"{n}: {x[n][0]} {list(x[n][1])} vs {y[n][0]} {list(y[n][1])} FAIL")
            bad += 1
        elif x[n][2] != y[n][2]:
            k = next(i for i in range(len(x[n][2])) if x[n][2][i] != y[n][2][i])
            print(f"{n}: data differ, first at byte {k} FAIL")
            bad += 1
    dts = sorted({v[0] for v in x.values()})
    print(f"same-bits: {len(x)} tensors ({' '.join(dts)}), {bad} differ {'FAIL' if bad or not x else 'OK'}")
    return 1 if bad or not x else 0


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
        p16 = os.path.join(td, "w16.safetensors")
        write_safetensors(p16, tl, "F32", {tl[0][0]: "BF16"})
        b16 = read_safetensors(p16)
        r16 = read_safetensors_raw(p16)
        check("safetensors BF16: 2 bytes per element, widened values within half a bf16 ulp, others F32 bitwise",
              r16[tl[0][0]][0] == "BF16" and len(r16[tl[0][0]][2]) == 2 * tl[0][1].size
              and r16[tl[1][0]][0] == "F32" and np.array_equal(b16[tl[1][0]], tl[1][1])
              and bool(np.all(np.abs(b16[tl[0][0]].astype(np.float64) - tl[0][1])
                              <= np.abs(tl[0][1].astype(np.float64)) * 2.0 ** -8)))

    # bf16 rounding: hand-picked float32 bit patterns (ties both ways, carry, subnormals, largest finite),
    # and for random values, no bf16 neighbour is nearer than the rounded one (float64 distances)
    cases = {0x3F808000: 0x3F80, 0x3F818000: 0x3F82, 0x3F808001: 0x3F81, 0x3F807FFF: 0x3F80,
             0xBF818000: 0xBF82, 0x3FFF8000: 0x4000, 0x00018000: 0x0002, 0x00008000: 0x0000,
             0x007FFFFF: 0x0080, 0x7F7F7FFF: 0x7F7F, 0x7F800000: 0x7F80, 0xFF800000: 0xFF80}
    got = bf16_bits(np.array(list(cases), dtype=np.uint32).view(np.float32))
    check("bf16 rounding of hand-picked bit patterns", [int(g) for g in got] == list(cases.values()),
          str([hex(int(g)) for g in got]))
    nan16 = bf16_bits(np.array([0x7F800001, 0xFFC00000], dtype=np.uint32).view(np.float32))
    check("bf16 keeps NaN a NaN", bool(np.all(np.isnan(bf16_widen(nan16)))))
    try:
        bf16_bits(np.array([0x7F7F8000], dtype=np.uint32).view(np.float32))
        check("bf16 refuses a finite value that rounds to inf", False)
    except ValueError:
        check("bf16 refuses a finite value that rounds to inf", True)
    xs = (rng.standard_normal(20000) * 10.0 ** rng.integers(-30, 30, 20000)).astype(np.float32)
    hb = bf16_bits(xs).astype(np.int64)
    dist = [np.abs(bf16_widen((hb + k).astype(np.uint16)).astype(np.float64) - xs) for k in (-1, 0, 1)]
    check("bf16 rounding is to the nearest representable value", bool(np.all(dist[1] <= np.minimum(dist[0], dist[2]))))

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

    # ---------------- backward and training ----------------
    # The cached forward used by backward/train is the same function as forward().
    yc, _ = forward_cached(x, to_f64(w), L, H, eps)
    check("forward_cached == forward", np.abs(yc - y).max() < 1e-13,
          f"max abs diff {np.abs(yc - y).max():.2e}")

    def fd_rel(f, arr, an, h=1e-6, idx=None):
        """Central differences of scalar f() w.r.t. arr's elements (in place);
        returns (rel Frobenius err over the checked elements, count)."""
        flat = arr.reshape(-1)
        assert np.shares_memory(flat, arr)
        sel = range(flat.size) if idx is None else idx
        num, ana = [], []
        for i in sel:
            old = flat[i]
            flat[i] = old + h
            fp = f()
            flat[i] = old - h
            fm = f()
            flat[i] = old
            num.append((fp - fm) / (2.0 * h))
            ana.append(an.reshape(-1)[i])
        num, ana = np.array(num), np.array(ana)
        return float(np.linalg.norm(num - ana) / max(np.linalg.norm(ana), 1e-300)), len(num)

    # Pieces: LayerNorm, GeLU', attention, each against central differences.
    xl = rng.normal(0.5, 2.0, size=(3, 4, 8))
    gl, bl, dl = rng.normal(1.0, 0.5, size=8), rng.normal(0.0, 0.5, size=8), rng.normal(size=(3, 4, 8))
    _, lc = layernorm_fwd(xl, gl, bl, eps)
    dxl, dgl, dbl = layernorm_bwd(dl, lc, gl)
    lnobj = lambda: float(np.sum(dl * layernorm(xl, gl, bl, eps)))
    errs = [fd_rel(lnobj, xl, dxl)[0], fd_rel(lnobj, gl, dgl)[0], fd_rel(lnobj, bl, dbl)[0]]
    check("layernorm backward (dx, dg, db) vs finite differences", max(errs) < 1e-7,
          "rel " + ", ".join(f"{e:.1e}" for e in errs))
    gx = np.linspace(-6.0, 6.0, 49)
    h = 1e-6
    gfd = (gelu(gx + h) - gelu(gx - h)) / (2 * h)
    gerr = np.abs(gfd - gelu_grad(gx)).max()
    check("gelu derivative vs finite differences", gerr < 1e-8, f"max abs {gerr:.1e}")
    check("gelu derivative known values", gelu_grad(np.array([0.0]))[0] == 0.5
          and abs(gelu_grad(np.array([30.0]))[0] - 1.0) < 1e-12
          and abs(gelu_grad(np.array([-30.0]))[0]) < 1e-12)
    qa = rng.normal(0.0, 1.5, size=(2, 5, 3 * 8))
    da = rng.normal(size=(2, 5, 8))
    _, ac = attention_fwd(qa, 2)
    dqa = attention_bwd(da, ac)
    aerr, _ = fd_rel(lambda: float(np.sum(da * causal_attention(qa, 2))), qa, dqa)
    check("attention backward vs finite differences", aerr < 1e-7, f"rel {aerr:.1e}")
    check("attention backward: dA = 0 at the last query -> last token's K, V get no gradient",
          np.abs(attention_bwd(np.concatenate([da[:, :4], np.zeros((2, 1, 8))], 1), ac)[:, 4, 8:]).max()
          == 0.0)

    # Whole stack: every element of every parameter and of the input, tiny model,
    # objective sum(dY * Y) through the plain forward() above.
    Lg, Cg, Hg, Fg, Sg, Bg = 2, 8, 2, 16, 3, 2
    rg = np.random.default_rng(777)
    wg = {}
    for n, s in tensor_specs(Lg, Cg, Fg):
        if n.endswith((".ln_1.weight", ".ln_2.weight")):
            wg[n] = 1.0 + rg.normal(0.0, 0.5, size=s)       # non-trivial LN scale
        elif n.endswith(".bias"):
            wg[n] = rg.normal(0.0, 0.5, size=s)             # incl. LN shift
        else:
            wg[n] = rg.normal(0.0, 1.5 / math.sqrt(s[0]), size=s)
    xg = rg.normal(0.0, 1.0, size=(Bg, Sg, Cg))
    dyg = rg.normal(0.0, 1.0, size=(Bg, Sg, Cg))
    _, cg = forward_cached(xg, wg, Lg, Hg, eps)
    dxg, gg = backward(dyg, cg, wg, Lg)
    check("backward returns every parameter with its shape",
          sorted(gg) == sorted(wg) and all(gg[n].shape == wg[n].shape for n in wg))
    obj = lambda: float(np.sum(dyg * forward(xg, wg, Lg, Hg, eps)))
    worst, total, errs = 0.0, 0, []
    for n, s in tensor_specs(Lg, Cg, Fg):
        e, cnt = fd_rel(obj, wg[n], gg[n])
        errs.append((e, n))
        total += cnt
    e, cnt = fd_rel(obj, xg, dxg)
    errs.append((e, "input"))
    total += cnt
    worst = max(errs)
    check(f"backward vs central differences, all {total} elements of {len(errs)} tensors",
          worst[0] < 1e-6, f"worst rel {worst[0]:.1e} ({worst[1]})")

    # MSE loss gradient (the dL/dY that train uses).
    tg = rg.normal(size=(Bg, Sg, Cg))
    lossg, lg = mse_loss_grads(xg, wg, tg, Lg, Hg, eps)
    mobj = lambda: float(np.mean((forward(xg, wg, Lg, Hg, eps) - tg) ** 2))
    merr = max(fd_rel(mobj, wg[n], lg[n], idx=[0, 5, 7])[0]
               for n in ("h.0.attn.c_attn.weight", "h.1.ln_2.weight", "h.1.mlp.c_proj.bias"))
    check("mse loss gradient vs finite differences", merr < 1e-6 and abs(lossg - mobj()) < 1e-13 * lossg,
          f"rel {merr:.1e}")

    # Two AdamW steps against a scalar hand computation (Python floats).
    lr, b1, b2, ae, wdc = 1e-2, 0.9, 0.999, 1e-8, 0.1
    w1, l1 = train(xg, wg, tg, Lg, Hg, eps, 1, lr, b1, b2, ae, wdc)
    w2, l2 = train(xg, wg, tg, Lg, Hg, eps, 2, lr, b1, b2, ae, wdc)
    _, g1 = mse_loss_grads(xg, w1, tg, Lg, Hg, eps)
    ok = l1[0] == l2[0] == lossg
    for n, i, decay in (("h.0.attn.c_attn.weight", 7, True), ("h.1.mlp.c_proj.weight", 20, True),
                        ("h.0.attn.c_attn.bias", 3, False), ("h.1.ln_1.weight", 2, False),
                        ("h.0.ln_2.bias", 5, False)):
        p0 = float(wg[n].reshape(-1)[i])
        ga, gb_ = float(lg[n].reshape(-1)[i]), float(g1[n].reshape(-1)[i])
        m_, v_ = (1 - b1) * ga, (1 - b2) * ga * ga
        p1 = p0 - lr * ((m_ / (1 - b1)) / (math.sqrt(v_ / (1 - b2)) + ae) + (wdc * p0 if decay else 0.0))
        m_, v_ = b1 * m_ + (1 - b1) * gb_, b2 * v_ + (1 - b2) * gb_ * gb_
        p2 = p1 - lr * ((m_ / (1 - b1 ** 2)) / (math.sqrt(v_ / (1 - b2 ** 2)) + ae)
                        + (wdc * p1 if decay else 0.0))
        d1 = abs(p1 - float(w1[n].reshape(-1)[i]))
        d2 = abs(p2 - float(w2[n].reshape(-1)[i]))
        if not (d1 < 1e-15 and d2 < 1e-15):
            ok = False
            print(f"    adamw {n}[{i}]: step1 diff {d1:.1e}, step2 diff {d2:.1e}")
    check("AdamW two steps == scalar hand computation (decay on matrices only)", ok)

    # The schedule at its landmarks, and clipping: one clipped step equals one step with gradients
    # scaled by hand (clip = half the norm).
    sl = [sched_lr(1.0, 0.1, 4, 10, k) for k in (1, 4, 5, 9, 14, 15, 99)]
    want = [0.25, 1.0, 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 10)), 0.55, 0.1, 0.1, 0.1]
    check("lr schedule: warmup linear, cosine through (lr+lr_min)/2 to lr_min",
          all(abs(a - b) < 1e-15 for a, b in zip(sl, want)) and sched_lr(2.0, 0.0, 0, 0, 7) == 2.0, f"{sl}")
    n0 = global_norm(lg)
    wc, _ = train(xg, wg, tg, Lg, Hg, eps, 1, lr, b1, b2, ae, wdc, clip=0.5 * n0)
    ws = {n: np.array(t, dtype=np.float64) for n, t in wg.items()}
    adamw_step(ws, {n: g * (0.5 * n0 / (n0 + 1e-6)) for n, g in lg.items()},
               {n: np.zeros_like(t) for n, t in ws.items()}, {n: np.zeros_like(t) for n, t in ws.items()},
               1, lr, b1, b2, ae, wdc)
    check("clipping: a clipped step == a step on gradients scaled by clip/(norm + 1e-6)",
          all(np.array_equal(wc[n], ws[n]) for n in ws) and
          abs(n0 - math.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in lg.values()))) == 0.0)
    check("AdamW step 1 moves a bias by lr (mhat/sqrt(vhat) = sign g)",
          abs(abs(float(w1["h.0.attn.c_attn.bias"][3] - wg["h.0.attn.c_attn.bias"][3])) - lr) < 1e-8)

    # Training on a tiny model: the loss falls over 20 steps with lr 1e-2.
    wt20 = dict(make_weights(Lg, Cg, Fg, 21, False))
    xt20 = make_input(Bg, Sg, Cg, 21, False)
    tt20 = synth_tensor("target", 21, (Bg, Sg, Cg))
    _, ls = train(xt20, wt20, tt20, Lg, Hg, eps, 20, 1e-2, 0.9, 0.999, 1e-8, 0.01)
    check("training loss decreases over 20 steps (lr 1e-2)",
          len(ls) == 20 and ls[-1] < 0.5 * ls[0] and sum(b < a for a, b in zip(ls, ls[1:])) >= 15,
          f"{ls[0]:.4f} -> {ls[-1]:.4f}")

    # CLI glue: dy/backward/compare-grads/train through main() in a temp dir.
    import contextlib
    import io
    with tempfile.TemporaryDirectory() as td:
        j = lambda f: os.path.join(td, f)
        dims = ["--layers", "2", "--hidden", "8", "--heads", "2", "--ffn", "16", "--seq", "3", "--batch", "2"]
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = [main(["weights"] + dims + ["--seed", "4", "--out", j("w.st")]),
                  main(["input"] + dims + ["--seed", "4", "--out", j("x.npy")]),
                  main(["dy"] + dims + ["--seed", "4", "--out", j("dy.npy")]),
                  main(["backward"] + dims + ["--weights", j("w.st"), "--input", j("x.npy"),
                                              "--dy", j("dy.npy"), "--dx-out", j("dx.npy"),
                                              "--grads-out", j("g.st")])]
            gf = read_safetensors(j("g.st"))
            write_safetensors(j("g32.st"), [(n, gf[n]) for n in gf], "F32")
            rc.append(main(["compare-grads", "--ref", j("g.st"), "--got", j("g32.st"), "--tol", "1e-6"]))
            bad = [(n, t * (1.0 + (1e-3 if n == "h.1.ln_1.bias" else 0.0))) for n, t in gf.items()
                   if n != "h.0.mlp.c_fc.bias"]
            write_safetensors(j("gbad.st"), bad, "F64")
            rc_bad = main(["compare-grads", "--ref", j("g.st"), "--got", j("gbad.st"), "--tol", "1e-4",
                           "--label", "neg"])
            rc.append(main(["train"] + dims + ["--weights", j("w.st"), "--input", j("x.npy"),
                                               "--target-seed", "3", "--steps", "3",
                                               "--weights-out", j("w3.st"), "--losses-out", j("l.txt")]))
        out = buf.getvalue()
        wf = read_safetensors(j("w.st"))
        xf = np.load(j("x.npy"))
        dyf = np.load(j("dy.npy"))
        _, cf = forward_cached(xf, to_f64(wf), 2, 2, eps)
        dxf, gff = backward(dyf, cf, to_f64(wf), 2)
        hdr = json.loads(open(j("g.st"), "rb").read()[8:8 + struct.unpack("<Q", open(j("g.st"), "rb").read(8))[0]])
        check("CLI dy/backward/compare-grads/train run", rc == [0] * 6, str(rc))
        check("CLI dy is float32 N(0,1) from seed + 2_000_003",
              dyf.dtype == np.float32 and np.array_equal(
                  dyf, np.random.default_rng(2_000_007).normal(size=(2, 3, 8)).astype(np.float32)))
        check("CLI backward writes F64 grads in weight order and float64 dX",
              [k for k in hdr if k != "__metadata__"] == [n for n, _ in tensor_specs(2, 8, 16)]
              and all(hdr[n]["dtype"] == "F64" for n in gf)
              and all(np.array_equal(gf[n], gff[n]) for n in gf)
              and np.load(j("dx.npy")).dtype == np.float64 and np.array_equal(np.load(j("dx.npy")), dxf))
        check("compare-grads flags the perturbed and the missing tensor",
              rc_bad == 1 and "neg h.1.ln_1.bias rel_err=1.000e-03 FAIL" in out
              and "neg h.0.mlp.c_fc.bias missing in got FAIL" in out
              and "neg: 24 tensors, 1 failed, 1 missing" in out)
        w3, l3 = train(xf, wf, synth_tensor("target", 3, (2, 3, 8)), 2, 2, eps, 3,
                       1e-3, 0.9, 0.999, 1e-8, 0.01)
        lines = [f"step {k} loss {v:.17g}" for k, v in enumerate(l3, 1)]
        w3f = read_safetensors(j("w3.st"))
        check("CLI train prints/writes the losses and F32 final weights",
              all(ln in out.splitlines() for ln in lines)
              and open(j("l.txt")).read().splitlines() == lines
              and all(w3f[n].dtype == np.float32 and np.array_equal(w3f[n], w3[n].astype(np.float32))
                      for n in w3))

    print(f"selftest: {'FAIL (' + ', '.join(fails) + ')' if fails else 'all OK'}")
    return 1 if fails else 0


# ----------------------------------------------------------------------------

# ----------------------------------------------------------------------------
# Self-test of the --bf16 emulation
# ----------------------------------------------------------------------------

def bf16_round_slow(x):
    """One float rounded to bfloat16 (nearest, ties to even) with exact rational arithmetic
    (fractions.Fraction, math.frexp), built apart from bf16_round's bit manipulation."""
    from fractions import Fraction
    if x == 0.0 or not math.isfinite(x):
        return x
    _, e = math.frexp(x)                       # 2^(e-1) <= |x| < 2^e
    q = Fraction(2) ** (max(e - 1, -126) - 7)  # the bf16 step: 8 significant bits, subnormal below 2^-126
    r = round(Fraction(x) / q) * q             # Fraction.__round__: nearest, ties to even
    if abs(r) > BF16_MAX:
        raise OverflowError(x)
    return math.copysign(float(r), x)


def rel_fro(a, b):
    """||a - b|| / ||b||, float64."""
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def cmd_bf16_selftest(a):
    """Checks of bf16_round and of the --bf16 paths, and the bf16-vs-float64 differences of the
    test models (printed for choosing the tests' tolerances)."""
    fails = []

    def check(name, cond, detail=""):
        print(f"  {'ok  ' if cond else 'FAIL'} {name}{(': ' + detail) if detail else ''}")
        if not cond:
            fails.append(name)

    def bits(t):
        return np.ascontiguousarray(t, np.float64).view(np.uint64)

    print("bf16_round:")
    rng = np.random.default_rng(123)
    n = 20000
    rand = (rng.uniform(1.0, 2.0, n) * np.exp2(rng.integers(-140, 127, n).astype(np.float64))
            * rng.choice([-1.0, 1.0], n))
    kept = rng.integers(128, 256, n).astype(np.float64)          # 8-bit significands
    ex = rng.integers(-126, 120, n).astype(np.float64)
    tie = (kept + 0.5) * np.exp2(ex - 7)                         # exactly halfway between bf16 values
    sub = (rng.integers(0, 128, 2000) + 0.5) * 2.0 ** -133       # subnormal ties
    edge = np.array([0.0, -0.0, 2.0 ** -126, 2.0 ** -126 - 2.0 ** -134, 2.0 ** -126 - 2.0 ** -140,
                     2.0 ** -134, 2.0 ** -135, -2.0 ** -134, 5e-324, -5e-324, 1.0 + 2.0 ** -8,
                     1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -8 + 2.0 ** -40, BF16_MAX,
                     BF16_MAX + 2.0 ** 118, -BF16_MAX - 2.0 ** 118])  # below half a step over MAX
    vals = np.concatenate([rand, tie, np.nextafter(tie, 0), np.nextafter(tie, np.inf), -tie, sub,
                           -sub, edge])
    got = bf16_round(vals)
    slow = np.array([bf16_round_slow(float(v)) for v in vals])
    bad = np.flatnonzero(bits(got) != bits(slow))
    check(f"bf16_round == exact rational rounding (Fraction) on {vals.size} values "
          f"(random, ties, ties +-1 ulp, subnormals, edges)", bad.size == 0,
          "" if bad.size == 0 else f"{bad.size} differ, first {vals[bad[0]]!r}: {got[bad[0]]!r} vs {slow[bad[0]]!r}")
    check("bf16_round is idempotent and its values are bf16 (low 45 bits zero above 2^-126)",
          np.array_equal(bits(bf16_round(got)), bits(got))
          and not (bits(got[np.abs(got) >= 2.0 ** -126]) & np.uint64((1 << 45) - 1)).any())
    spec = np.array([np.inf, -np.inf, np.nan])
    r = bf16_round(spec)
    check("inf and NaN pass through", r[0] == np.inf and r[1] == -np.inf and np.isnan(r[2]))
    raised = []
    for v in (BF16_MAX + 2.0 ** 119, BF16_MAX + 2.0 ** 120, 1e39, -1e300):  # the tie above MAX rounds up (odd)
        try:
            bf16_round(np.array([v]))
        except ValueError:
            raised.append(v)
    check("a finite value that rounds to an infinity raises ValueError", len(raised) == 4)
    u32 = rng.integers(0, 0x7F7F0000, 50000, dtype=np.uint64).astype(np.uint32)
    u32[:5000] = (u32[:5000] & np.uint32(0xFFFF0000)) | np.uint32(0x8000)  # float32 ties
    u32[5000:10000] |= np.uint32(0x80000000)
    f32 = u32.view(np.float32)
    check("on float32 values bf16_round == bf16_widen(bf16_bits()) (the runtime's rounding)",
          np.array_equal(bits(bf16_round(f32.astype(np.float64))),
                         bits(bf16_widen(bf16_bits(f32)).astype(np.float64))))
    d = 1.0 + 2.0 ** -8 + 2.0 ** -40
    via32 = float(bf16_widen(bf16_bits(np.array([d], np.float32)))[0])
    check("double rounding: 1 + 2^-8 + 2^-40 -> 1 + 2^-7 directly, 1 through float32 (why direct)",
          float(bf16_round(np.array([d]))[0]) == 1.0 + 2.0 ** -7 and via32 == 1.0)

    print("--bf16 paths:")
    eps = 1e-5
    Lt, Ct, Ht, Ft, St, Bt = 2, 8, 2, 16, 3, 2
    wt = to_f64(dict(make_weights(Lt, Ct, Ft, 4, False)))
    xt = make_input(Bt, St, Ct, 4, False).astype(np.float64)
    dyt = np.random.default_rng(5).normal(size=(Bt, St, Ct))
    y0, c0 = forward_cached(xt, wt, Lt, Ht, eps)
    dx0, g0 = backward(dyt, c0, wt, Lt)
    yi, ci = forward_cached(xt, wt, Lt, Ht, eps, lambda t: t)
    dxi, gi = backward(dyt, ci, wt, Lt, lambda t: t)
    check("an identity hook gives the float64 results bit for bit",
          np.array_equal(y0, yi) and np.array_equal(dx0, dxi) and all(np.array_equal(g0[k], gi[k]) for k in g0))
    calls = []

    def rec(t):
        calls.append(np.shape(t))
        return bf16_round(t)
    yb, cb = forward_cached(xt, wt, Lt, Ht, eps, rec)
    nf = len(calls)
    dxb, gb = backward(dyt, cb, wt, Lt, rec)
    R, T = (Bt, St), {(Ct, 3 * Ct), (Ct, Ct), (Ct, Ft), (Ft, Ct)}
    PS = (Bt, Ht, St, St)
    check("the hook is called 12 times per block forward (4 weights, fc1's bias, LN1, [Q|K|V], P, attention, LN2, "
          "GeLU outputs, the kept pre-activation u) and 10 per block backward (4 weights, dy, dL/du, dL/dx1, dO, "
          "dS, dL/dqkv)",
          nf == 12 * Lt and len(calls) == 22 * Lt and sum(s in T for s in calls) == 8 * Lt
          and sum(s[:2] == R for s in calls) == 11 * Lt and sum(s == PS for s in calls) == 2 * Lt
          and sum(s == (Ft,) for s in calls) == Lt,
          f"{nf} forward, {len(calls) - nf} backward")
    mats = [n for n in wt if n.endswith(DECAY_SUFFIXES)]
    wr = dict(wt)
    wr.update({n: bf16_round(wt[n]) for n in mats})
    yr, cr = forward_cached(xt, wr, Lt, Ht, eps, bf16_round)
    dxr, gr = backward(dyt, cr, wr, Lt, bf16_round)
    check("every GEMM reads a matrix only through the rounding: pre-rounded matrices give the same "
          "--bf16 output, dX and gradients bit for bit",
          np.array_equal(yb, yr) and np.array_equal(dxb, dxr) and all(np.array_equal(gb[k], gr[k]) for k in gb))
    # One block written out with the forward()-path pieces (layernorm, causal_attention) and the
    # rounding placed by hand; the backward of fc2 and fc1 by hand.  Not bitwise (layernorm and
    # layernorm_fwd differ in the last bit, which can move a rounding), hence the tolerance.
    r_ = bf16_round
    p = "h.0."
    h1 = r_(layernorm(xt, wt[p + "ln_1.weight"], wt[p + "ln_1.bias"], eps))
    at = r_(causal_attention(r_(h1 @ r_(wt[p + "attn.c_attn.weight"]) + wt[p + "attn.c_attn.bias"]), Ht, r_))
    x1 = xt + at @ r_(wt[p + "attn.c_proj.weight"]) + wt[p + "attn.c_proj.bias"]
    h2 = r_(layernorm(x1, wt[p + "ln_2.weight"], wt[p + "ln_2.bias"], eps))
    f = h2 @ r_(wt[p + "mlp.c_fc.weight"]) + r_(wt[p + "mlp.c_fc.bias"])
    m = r_(gelu(f))
    y1 = x1 + m @ r_(wt[p + "mlp.c_proj.weight"]) + wt[p + "mlp.c_proj.bias"]
    yb1, cb1 = block_fwd(xt, wt, 0, Ht, eps, bf16_round)
    _, gb1 = block_bwd(dyt, cb1, wt, 0, bf16_round)
    dW2 = m.reshape(-1, Ft).T @ r_(dyt).reshape(-1, Ct)
    du = (r_(dyt) @ r_(wt[p + "mlp.c_proj.weight"]).T) * gelu_grad(r_(f))
    dW1 = h2.reshape(-1, Ct).T @ r_(du).reshape(-1, Ft)
    e1, e2, e3 = rel_fro(yb1, y1), rel_fro(gb1[p + "mlp.c_proj.weight"], dW2), rel_fro(gb1[p + "mlp.c_fc.weight"], dW1)
    check("one --bf16 block == the block written out by hand with the rounding of docs/BF16.md "
          "(forward with attention on r(qkv) and r(P), dW2 = r(g)^T r(dy), dW1 = r(a2)^T r(du), "
          "du = dg GeLU'(r(u)))", max(e1, e2, e3) < 1e-6,
          f"{e1:.1e} {e2:.1e} {e3:.1e} (bf16 vs float64 is ~1e-3)")
    check("--bf16 backward's bias gradients are sums of the unrounded dL/dY, fc1's of the rounded du (the programs "
          "keep du in bf16 only)",
          np.array_equal(gb1[p + "mlp.c_proj.bias"], dyt.reshape(-1, Ct).sum(axis=0))
          and np.array_equal(gb1[p + "mlp.c_fc.bias"], r_(du).reshape(-1, Ft).sum(axis=0))
          and not np.array_equal(gb1[p + "mlp.c_fc.bias"], du.reshape(-1, Ft).sum(axis=0)))

    print("bf16 vs float64 (for the tests' tolerances):")
    worst = {}
    for label, (L, C, H, F, S, B) in (("e2e model", (2, 48, 12, 192, 8, 12)),
                                      ("C=128", (2, 128, 8, 512, 8, 12))):
        w = to_f64(dict(make_weights(L, C, F, 11, False)))
        x = make_input(B, S, C, 11, False).astype(np.float64)
        dy = np.random.default_rng(2_000_006).normal(size=(B, S, C))
        y64, c64 = forward_cached(x, w, L, H, eps)
        y16, c16 = forward_cached(x, w, L, H, eps, bf16_round)
        dx64, g64 = backward(dy, c64, w, L)
        dx16, g16 = backward(dy, c16, w, L, bf16_round)
        gerr = {n: rel_fro(g16[n], g64[n]) for n in g64 if np.linalg.norm(g64[n]) > 0}
        gall = math.sqrt(sum(float(np.sum((g16[n] - g64[n]) ** 2)) for n in g64)) / global_norm(g64)
        wn = max(gerr, key=gerr.get)
        tgt = synth_tensor("target", 3, (B, S, C))
        w64, l64 = train(x, w, tgt, L, H, eps, 20, 1e-3, 0.9, 0.999, 1e-8, 0.01)
        w16, l16 = train(x, w, tgt, L, H, eps, 20, 1e-3, 0.9, 0.999, 1e-8, 0.01, rnd=bf16_round)
        lerr = [abs(u - v) / abs(v) for u, v in zip(l16, l64)]
        werr = math.sqrt(sum(float(np.sum((w16[n] - w64[n]) ** 2)) for n in w64)) / global_norm(w64)
        print(f"  {label} L={L} C={C} H={H} F={F} S={S} B={B} (weights/input seed 11):")
        print(f"    forward Y rel {rel_fro(y16, y64):.3e}")
        print(f"    backward dX rel {rel_fro(dx16, dx64):.3e}; all gradients together rel {gall:.3e}; "
              f"worst tensor {wn} {gerr[wn]:.3e}; median tensor {float(np.median(list(gerr.values()))):.3e}")
        print(f"    train 20 steps lr 1e-3 (target seed 3): loss rel diff step 1 {lerr[0]:.3e}, "
              f"max {max(lerr):.3e} (step {int(np.argmax(lerr)) + 1}), step 20 {lerr[-1]:.3e} "
              f"(float64 {l64[0]:.6f} -> {l64[-1]:.6f}, bf16 {l16[0]:.6f} -> {l16[-1]:.6f}); "
              f"final weights rel {werr:.3e}")
        worst[label] = rel_fro(y16, y64)
    LM = (2, 24, 6, 48, 4, 12, 49, 6)  # tests/lm.sh's LM_DIMS
    L, C, H, F, S, B, V, P = LM
    w = to_f64(dict(make_lm_weights(L, C, F, V, P, 3)))
    rg = np.random.default_rng(1)
    tok, tgt = rg.integers(0, V, size=(B, S)), rg.integers(0, V, size=(B, S))
    lg64, ls64, _ = lm_forward(tok, tgt, w, L, H, eps)
    lg16, ls16, _ = lm_forward(tok, tgt, w, L, H, eps, bf16_round)
    _, g64 = lm_loss_grads(tok, tgt, w, L, H, eps)
    _, g16 = lm_loss_grads(tok, tgt, w, L, H, eps, bf16_round)
    gerr = {n: rel_fro(g16[n], g64[n]) for n in g64 if np.linalg.norm(g64[n]) > 0}
    wn = max(gerr, key=gerr.get)
    gall = math.sqrt(sum(float(np.sum((g16[n] - g64[n]) ** 2)) for n in g64)) / global_norm(g64)
    print(f"  LM (tests/lm.sh dims, lm-weights seed 3, random tokens): logits rel {rel_fro(lg16, lg64):.3e}, "
          f"loss rel {abs(ls16 - ls64) / ls64:.3e}; gradients together rel {gall:.3e}, worst {wn} {gerr[wn]:.3e}")
    check("the bf16 forward differs from float64 by 1e-4 .. 3e-2 (bf16's half ulp is 2^-9 = 2e-3)",
          all(1e-4 < v < 3e-2 for v in worst.values()), " ".join(f"{v:.2e}" for v in worst.values()))

    print(f"bf16-selftest: {'FAIL (' + ', '.join(fails) + ')' if fails else 'all OK'}")
    return 1 if fails else 0


BF16_HELP = ("emulate dtype = \"bf16\" (docs/BF16.md): float64, with every GEMM operand (LN, attention "
             "and GeLU outputs, 2-D weights, the backward's dL/dY operands, attention's Q, K, V, P, dO, dS) "
             "rounded to bfloat16, nearest even")


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
    p.add_argument("--bf16", action="store_true", help=BF16_HELP)
    p.set_defaults(fn=cmd_forward)

    p = sp.add_parser("hf-dir", help="write a save_pretrained-style directory (config.json, model.safetensors)")
    add_dims(p)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--vocab", type=int, default=96)
    p.add_argument("--n-positions", type=int, default=32)
    p.add_argument("--unprefixed", action="store_true")
    p.add_argument("--old-buffers", action="store_true")
    p.add_argument("--shards", type=int, default=0)
    p.add_argument("--set", action="append", metavar="KEY=JSON")
    p.add_argument("--drop", action="append", metavar="KEY")
    p.set_defaults(fn=cmd_hf_dir)

    p = sp.add_parser("lm-forward", help="float64 GPT2LMHeadModel logits: of a save_pretrained directory (--dir, "
                      "--out), or of a weights file with the mean loss (--weights, --vocab, --positions, --logits-out, "
                      "--targets)")
    add_dims(p)
    p.add_argument("--dir", default=None)
    p.add_argument("--tokens", required=True)
    p.add_argument("--out", default=None)
    p.add_argument("--weights", default=None)
    p.add_argument("--vocab", type=int, default=None)
    p.add_argument("--positions", type=int, default=None)
    p.add_argument("--targets", default=None)
    p.add_argument("--logits-out", default=None)
    p.add_argument("--bf16", action="store_true", help=BF16_HELP)
    p.set_defaults(fn=cmd_lm_forward_any)

    p = sp.add_parser("compare", help="relative Frobenius error check")
    p.add_argument("--ref", required=True)
    p.add_argument("--got", required=True)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--label", default=None)
    p.add_argument("--expect-f32", action="store_true")
    p.set_defaults(fn=cmd_compare)

    p = sp.add_parser("compare-losses", help="training curves against each other and against references")
    p.add_argument("--run", action="append", required=True, help="LABEL=FILE of `step N loss L` lines; the first is the base")
    p.add_argument("--ref", action="append", default=[], help="LABEL=FILE=TOL: a reference curve and its tolerance")
    p.add_argument("--mesh-tol", type=float, required=True, help="every run against the first")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--falling", action="store_true")
    p.add_argument("--label", default=None)
    p.set_defaults(fn=cmd_compare_losses)

    p = sp.add_parser("bench", help="time a plain numpy float32 forward pass")
    add_dims(p)
    p.add_argument("--reps", type=int, required=True)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(fn=cmd_bench)

    p = sp.add_parser("dy", help="write a float32 [B,S,C] upstream gradient .npy")
    add_dims(p)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_dy)

    p = sp.add_parser("backward", help="float64 reference backward pass")
    add_dims(p)
    p.add_argument("--weights", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--dy", required=True)
    p.add_argument("--dx-out", required=True)
    p.add_argument("--grads-out", required=True)
    p.add_argument("--bf16", action="store_true", help=BF16_HELP)
    p.set_defaults(fn=cmd_backward)

    p = sp.add_parser("compare-grads", help="per-tensor relative Frobenius error check")
    p.add_argument("--ref", required=True)
    p.add_argument("--got", required=True)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--label", default=None)
    p.set_defaults(fn=cmd_compare_grads)

    p = sp.add_parser("train", help="float64 reference AdamW training on MSE loss")
    add_dims(p)
    p.add_argument("--weights", required=True)
    p.add_argument("--input", required=True)
    tg = p.add_mutually_exclusive_group(required=True)
    tg.add_argument("--target", default=None)
    tg.add_argument("--target-seed", type=int, default=None)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--adam-eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--weights-out", default=None)
    p.add_argument("--losses-out", default=None)
    p.add_argument("--clip", type=float, default=0.0, help="largest global gradient norm (0: off)")
    p.add_argument("--warmup", type=int, default=0, help="steps of linear warmup")
    p.add_argument("--decay-steps", type=int, default=0, help="steps of cosine decay after the warmup (0: constant)")
    p.add_argument("--lr-min", type=float, default=0.0, help="the learning rate at the end of the decay")
    p.add_argument("--bf16", action="store_true", help=BF16_HELP)
    p.set_defaults(fn=cmd_train)

    p = sp.add_parser("grad-norm", help="global L2 norm of a gradients safetensors file")
    p.add_argument("grads")
    p.set_defaults(fn=cmd_grad_norm)

    p = sp.add_parser("bf16", help="store a safetensors file's tensors (or some) as BF16")
    p.add_argument("--in", dest="inp", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--only", nargs="+", default=None)
    p.add_argument("--f32-out", default=None)
    p.set_defaults(fn=cmd_bf16)

    p = sp.add_parser("same-bits", help="two safetensors files hold the same tensors bit for bit")
    p.add_argument("a")
    p.add_argument("b")
    p.set_defaults(fn=cmd_same_bits)

    p = sp.add_parser("generate", help="float64 greedy generation, the whole forward on the growing sequence per token")
    add_lm_dims(p)
    p.add_argument("--weights", required=True)
    p.add_argument("--prompt-tokens", required=True)
    p.add_argument("--max-new", type=int, required=True)
    p.add_argument("--eos", type=int, default=-1)
    p.add_argument("--out", required=True)
    p.add_argument("--logits-out", default=None)
    p.add_argument("--bf16", action="store_true", help=BF16_HELP)
    add_sample_args(p)
    p.set_defaults(fn=cmd_generate)
    p = sp.add_parser("sample-chisq", help="first sampled ids against the float64 distribution, chi-square")
    add_lm_dims(p)
    p.add_argument("--weights", required=True)
    p.add_argument("--prompt-tokens", required=True)
    p.add_argument("--samples", required=True)
    p.add_argument("--alpha", type=float, default=1e-6)
    add_sample_args(p)
    p.set_defaults(fn=cmd_sample_chisq)
    p = sp.add_parser("compare-generate", help="generated ids equal, logits of every new token within --tol")
    p.add_argument("tokens")
    p.add_argument("ref_tokens")
    p.add_argument("logits")
    p.add_argument("ref_logits")
    p.add_argument("--tol", type=float, default=None, help="max absolute difference (default 1e-4 without --rel-tol)")
    p.add_argument("--rel-tol", type=float, default=None, help="relative Frobenius norm of the compared logits")
    p.add_argument("--tie-tol", type=float, default=None)
    p.set_defaults(fn=cmd_compare_generate)
    p = sp.add_parser("compare-step-losses", help="two runs' step losses and the loss after them, within --tol")
    p.add_argument("ref")
    p.add_argument("got")
    p.add_argument("--tol", type=float, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--labels", default="ref,got")
    p.set_defaults(fn=cmd_compare_step_losses)
    p = sp.add_parser("lm-weights", help="write a language model's safetensors (wte, wpe, blocks, ln_f)")
    add_lm_dims(p)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_lm_weights)

    p = sp.add_parser("tokens", help="write int32 [B,S] token ids")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_tokens)

    for name, fn, hlp in (("lm-backward", cmd_lm_backward, "float64 LM backward: every gradient"),
                          ("lm-train", cmd_lm_train, "float64 AdamW steps on the LM loss")):
        p = sp.add_parser(name, help=hlp)
        add_lm_dims(p)
        p.add_argument("--weights", required=True)
        p.add_argument("--tokens", required=True)
        p.add_argument("--targets", required=True)
        p.add_argument("--bf16", action="store_true", help=BF16_HELP)
        if name == "lm-backward":
            p.add_argument("--grads-out", required=True)
        if name == "lm-train":
            p.add_argument("--steps", type=int, required=True)
            p.add_argument("--lr", type=float, default=1e-3)
            p.add_argument("--beta1", type=float, default=0.9)
            p.add_argument("--beta2", type=float, default=0.999)
            p.add_argument("--adam-eps", type=float, default=1e-8)
            p.add_argument("--weight-decay", type=float, default=0.01)
        p.set_defaults(fn=fn)

    p = sp.add_parser("lm-fdcheck", help="check the LM backward against central finite differences")
    p.set_defaults(fn=cmd_lm_fdcheck)

    p = sp.add_parser("synth-selftest", help="print synthetic generator check values")
    p.set_defaults(fn=cmd_synth_selftest)

    p = sp.add_parser("bf16-selftest", help="check the --bf16 emulation; print bf16-vs-float64 differences")
    p.set_defaults(fn=cmd_bf16_selftest)

    p = sp.add_parser("selftest", help="check this reference itself")
    p.set_defaults(fn=cmd_selftest)

    a = ap.parse_args(argv)
    if getattr(a, "seed", None) is not None and not (0 <= a.seed < 2**64):
        sys.exit("tessref: --seed must be in [0, 2^64)")
    if getattr(a, "target_seed", None) is not None and not (0 <= a.target_seed < 2**64):
        sys.exit("tessref: --target-seed must be in [0, 2^64)")
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
