#!/usr/bin/python3
"""PyTorch reference for a Llama-3-architecture model, written from scratch in float64,
independent of the C++ (only the AdamW / clipping / grad-norm conventions follow
test/pytorch_reference.py).

Model: x = wte[idx]; per layer x += o_proj(attention(RoPE(q), RoPE(k), v)) with q, k, v
from qkvw(rmsnorm1(x)), then x += down_proj(silu(gate(h)) * up(h)) with h = rmsnorm2(x);
logits = rmsnormf(x) @ lmheadw[:V]^T (untied); loss = mean cross-entropy; no biases.
rmsnorm(x, w) = x / sqrt(mean(x^2) + norm_eps) * w.  RoPE: Hugging Face Llama convention
(rotate_half: pairs (x_i, x_{i+hs/2})), angle = position * inv_freq_i, positions 0..T-1,
inv_freq_i = rope_theta^(-2i/hs), i = 0..hs/2-1.  Causal GQA: query head j uses kv head
j // (NH // NKV); scale 1/sqrt(hs).
Optional Llama 3.1 RoPE frequency scaling (a config's rope_scaling; Hugging Face's
rope_scaling {"rope_type": "llama3", ...}): with factor, low_freq_factor (lo),
high_freq_factor (hi), original_max_position_embeddings (M) and wavelen_i = 2 pi / inv_freq_i,
  wavelen_i < M / hi:   inv_freq_i unchanged
  wavelen_i > M / lo:   inv_freq_i / factor
  otherwise:            s = (M / wavelen_i - lo) / (hi - lo),
                        inv_freq_i = (1 - s) * inv_freq_i / factor + s * inv_freq_i
(continuous at both bounds; no attention-scale change).

Parameters (stacked over layers), in this order:
  0 wte (Vp, C)  1 rms1w (L, C)  2 qkvw (L, (NH+2*NKV)*hs, C) rows [q | k | v]
  3 attprojw (L, C, NH*hs)  4 rms2w (L, C)  5 fcw (L, 2F, C) rows [gate | up]
  6 fcprojw (L, C, F)  7 rmsfw (C,)  8 lmheadw (Vp, C)
  (rows V..Vp-1 of wte and lmheadw are zero and unused; Vp = V rounded up to 128)

Debug file DIR/llama_NAME_debug.bin (little-endian):
  header 256 x int32: [0]=20241124 [1]=1 [2]=B [3]=T [4]=V [5]=Vp [6]=C [7]=L [8]=NH
                      [9]=NKV [10]=F [11]=maxT [12]=nsteps; [20..27] hold float32 bit
                      patterns of norm_eps, rope_theta, lr, beta1, beta2, eps,
                      weight_decay, grad_clip; [28..31] hold float32 bit patterns of
                      the RoPE scaling factor, low_freq_factor, high_freq_factor and
                      original_max_position_embeddings (as a float), all four 0 when the
                      config has no RoPE scaling; the rest 0
  x        B*T int32
  y        B*T int32
  params   the 9 tensors, float32, order and shapes above (initial values; the model
           computes with exactly these values, converted to float64)
  logits   B*T*V float32 (unpadded, of the initial params)
  loss     1 float32
  grads    the 9 gradients of that loss, float32, same order and shapes (padded rows zero)
  losses   nsteps float32: loss at step i of AdamW on this batch (losses[0] == loss)
  norms    nsteps float32: global L2 grad norm at step i, before clipping
Training: torch.optim.AdamW in float64 (lr 1e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1
only on wte, qkvw, attprojw, fcw, fcprojw, lmheadw), clip_grad_norm_ semantics
(scale = min(1, grad_clip / (norm + 1e-6))); grad_clip is per config (see CONFIGS).
Init: seed 42, float32 draws in parameter order (N(0, 0.02); attprojw, fcprojw
N(0, 0.02/sqrt(2L)); RMSNorm weights 1 + N(0, 0.1)); batch: seed 43, tokens (B, T+1)
uniform in [0, V), x = tokens[:, :T], y = tokens[:, 1:].

Hugging Face files: write_hf / read_hf below write and read a LlamaForCausalLM directory
(config.json, model.safetensors or shards with model.safetensors.index.json; F32, BF16, F16)
with transformers' names, written here from the safetensors format's description.

Usage (Debian's python, torch 1.13 on the CPU):
  /usr/bin/python3 test/llama_reference.py --write-hf DIR --config gqa2 [--dtype BF16] [--shards 3]
  /usr/bin/python3 test/llama_reference.py --list
  /usr/bin/python3 test/llama_reference.py --config gqa1 --out DIR     (or --config all)
  /usr/bin/python3 test/llama_reference.py --selftest
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as Fn

DEBUG_MAGIC = 20241124
DEBUG_VERSION = 1
DT = torch.float64
PARAM_NAMES = ["wte", "rms1w", "qkvw", "attprojw", "rms2w", "fcw", "fcprojw", "rmsfw", "lmheadw"]
DECAY_NAMES = {"wte", "qkvw", "attprojw", "fcw", "fcprojw", "lmheadw"}
OPT = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip=1.0,
           nsteps=10)
CONFIGS = {
    "gqa1": dict(V=300, maxT=64, L=2, C=64, NH=4, NKV=1, F=160, B=3, T=37,
                 norm_eps=1e-5, rope_theta=10000.0),
    "odd": dict(V=257, maxT=32, L=3, C=48, NH=3, NKV=3, F=128, B=2, T=32,
                norm_eps=1e-6, rope_theta=500000.0, grad_clip=1.2),
    "gqa2": dict(V=1000, maxT=128, L=2, C=96, NH=6, NKV=2, F=256, B=2, T=50,
                 norm_eps=1e-5, rope_theta=500000.0, grad_clip=1.4),
    "hs128": dict(V=200, maxT=16, L=1, C=256, NH=2, NKV=1, F=384, B=1, T=16,
                  norm_eps=1e-5, rope_theta=10000.0, grad_clip=3.0),
    # Llama 3.1 RoPE scaling; at hs=32 the bounds M/hi = 16 and M/lo = 64 put i=0,1 in the
    # unchanged regime, i=2 in the smoothed one and i=3..15 in the divided one (T > M).
    "scaled": dict(V=300, maxT=128, L=2, C=128, NH=4, NKV=2, F=320, B=2, T=96,
                   norm_eps=1e-5, rope_theta=500000.0,
                   rope_scaling=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                     original_max_position_embeddings=64)),
}
# grad_clip: 1.0 clips all 10 steps of every config, so three configs override it to clip
# only some steps (gqa1 10 of 10, odd 2, gqa2 5, hs128 5, scaled 10 of 10), every pre-clip
# norm of steps 0..8 at least 1.6% away from the threshold.
SEED = 42  # init generator; the batch uses SEED + 1


def padded_vocab(V, multiple=128):
    return ((V + multiple - 1) // multiple) * multiple


def param_shapes(c):
    V, L, C, NH, NKV, FF = c["V"], c["L"], c["C"], c["NH"], c["NKV"], c["F"]
    Vp, hs = padded_vocab(V), C // NH
    return {"wte": (Vp, C), "rms1w": (L, C), "qkvw": (L, (NH + 2 * NKV) * hs, C),
            "attprojw": (L, C, NH * hs), "rms2w": (L, C), "fcw": (L, 2 * FF, C),
            "fcprojw": (L, C, FF), "rmsfw": (C,), "lmheadw": (Vp, C)}


# ---- building blocks -----------------------------------------------------------------
def rmsnorm(x, w, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


ROPE_SCALING_KEYS = ["factor", "low_freq_factor", "high_freq_factor",
                     "original_max_position_embeddings"]


def rope_inv_freq(hs, theta, scaling=None):
    """inv_freq_i, i = 0..hs/2-1 (float64), with Llama 3.1 scaling if scaling is a dict."""
    i = torch.arange(hs // 2, dtype=DT)
    inv_freq = torch.tensor(theta, dtype=DT) ** (-2.0 * i / hs)
    if scaling is None:
        return inv_freq
    factor, lo, hi, omax = (float(scaling[k]) for k in ROPE_SCALING_KEYS)
    assert factor > 0 and 0 < lo < hi and omax > 0, scaling
    wavelen = 2 * math.pi / inv_freq
    smooth = (omax / wavelen - lo) / (hi - lo)
    mid = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    return torch.where(wavelen < omax / hi, inv_freq,
                       torch.where(wavelen > omax / lo, inv_freq / factor, mid))


def rope_regimes(hs, theta, scaling):
    """Per i: 'keep' (wavelen < M/hi), 'div' (wavelen > M/lo) or 'mid' (between, inclusive)."""
    omax, lo, hi = (float(scaling[k]) for k in ("original_max_position_embeddings",
                                                "low_freq_factor", "high_freq_factor"))
    wavelen = 2 * math.pi / rope_inv_freq(hs, theta)
    return ["keep" if w < omax / hi else "div" if w > omax / lo else "mid"
            for w in wavelen.tolist()]


def rope_cos_sin(T, hs, theta, scaling=None):
    """cos, sin of shape (T, hs), Hugging Face layout (angles repeated in both halves)."""
    inv_freq = rope_inv_freq(hs, theta, scaling)
    angle = torch.arange(T, dtype=DT)[:, None] * inv_freq[None, :]  # (T, hs/2)
    return torch.cat([angle.cos(), angle.cos()], -1), torch.cat([angle.sin(), angle.sin()], -1)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


def apply_rope(x, cos, sin):
    """x (B, T, H, hs); cos, sin (T, hs)."""
    return x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]


def gqa_attention(q, k, v):
    """q (B, T, NH, hs), k and v (B, T, NKV, hs) -> (B, T, NH*hs), causal."""
    B, T, NH, hs = q.shape
    rep = NH // k.shape[2]
    q = q.transpose(1, 2)                                   # (B, NH, T, hs)
    k = k.transpose(1, 2).repeat_interleave(rep, dim=1)     # kv head j // rep for head j
    v = v.transpose(1, 2).repeat_interleave(rep, dim=1)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    att = torch.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
    return (att @ v).transpose(1, 2).reshape(B, T, NH * hs)


def loop_attention(q, k, v):
    """The same, one (batch, head, query position) at a time (self-test only)."""
    B, T, NH, hs = q.shape
    out = torch.zeros(B, T, NH, hs, dtype=q.dtype)
    for b in range(B):
        for j in range(NH):
            kv = j // (NH // k.shape[2])
            for t in range(T):
                s = torch.stack([q[b, t, j].dot(k[b, u, kv]) for u in range(t + 1)]) / hs ** 0.5
                w = torch.exp(s - s.max())
                out[b, t, j] = (w / w.sum()) @ v[b, :t + 1, kv]
    return out.reshape(B, T, NH * hs)


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        assert c["C"] % c["NH"] == 0 and c["NH"] % c["NKV"] == 0 and (c["C"] // c["NH"]) % 2 == 0
        self.c = c
        for name, shape in param_shapes(c).items():
            self.register_parameter(name, nn.Parameter(torch.zeros(shape, dtype=DT)))

    def ordered_params(self):
        return [getattr(self, n) for n in PARAM_NAMES]

    def init_random(self, seed):
        """Drawn in float32 (then widened) on a private generator, in parameter order."""
        g = torch.Generator().manual_seed(seed)
        proj_std = 0.02 / math.sqrt(2 * self.c["L"])
        with torch.no_grad():
            for name in PARAM_NAMES:
                p = getattr(self, name)
                t = torch.randn(p.shape, generator=g, dtype=torch.float32)
                if name.startswith("rms"):  # RMSNorm weights 1 + N(0, 0.1)
                    t = 1.0 + 0.1 * t
                else:
                    t = t * (proj_std if name in ("attprojw", "fcprojw") else 0.02)
                if name in ("wte", "lmheadw"):
                    t[self.c["V"]:] = 0.0  # padded vocab rows
                p.copy_(t.to(DT))

    def forward(self, idx, targets=None, attn=gqa_attention):
        c = self.c
        B, T = idx.shape
        assert T <= c["maxT"]
        NH, NKV, FF, eps = c["NH"], c["NKV"], c["F"], c["norm_eps"]
        hs = c["C"] // NH
        cos, sin = rope_cos_sin(T, hs, c["rope_theta"], c.get("rope_scaling"))
        x = self.wte[idx]
        for l in range(c["L"]):
            h = rmsnorm(x, self.rms1w[l], eps)
            q, k, v = Fn.linear(h, self.qkvw[l]).split([NH * hs, NKV * hs, NKV * hs], dim=-1)
            q = apply_rope(q.reshape(B, T, NH, hs), cos, sin)
            k = apply_rope(k.reshape(B, T, NKV, hs), cos, sin)
            v = v.reshape(B, T, NKV, hs)
            x = x + Fn.linear(attn(q, k, v), self.attprojw[l])
            h = rmsnorm(x, self.rms2w[l], eps)
            g, u = Fn.linear(h, self.fcw[l]).split(FF, dim=-1)  # [gate | up]
            x = x + Fn.linear(g * torch.sigmoid(g) * u, self.fcprojw[l])
        x = rmsnorm(x, self.rmsfw, eps)
        logits = x @ self.lmheadw[: c["V"]].t()
        if targets is None:
            return logits, None
        return logits, Fn.cross_entropy(logits.reshape(-1, c["V"]), targets.reshape(-1))


def make_batch(c, seed):
    g = torch.Generator().manual_seed(seed)
    tok = torch.randint(0, c["V"], (c["B"], c["T"] + 1), generator=g, dtype=torch.int64)
    return tok[:, :-1].contiguous(), tok[:, 1:].contiguous()


def global_grad_norm(params):
    return math.sqrt(sum(float(p.grad.detach().double().pow(2).sum()) for p in params))


def f32(t):
    return np.asarray(t.detach().to(torch.float32) if torch.is_tensor(t) else t,
                      dtype="<f4").tobytes()


# ---- the reference run ---------------------------------------------------------------
def run_config(name, c, outdir):
    c = dict(OPT, **c)
    Vp = padded_vocab(c["V"])
    if c.get("rope_scaling") is not None:
        reg = rope_regimes(c["C"] // c["NH"], c["rope_theta"], c["rope_scaling"])
        print(f"{name}: RoPE scaling regimes by i: "
              + "; ".join(f"{r} " + ",".join(str(i) for i, q in enumerate(reg) if q == r)
                          for r in ("keep", "mid", "div") if r in reg))
    model = Llama(c)
    model.init_random(SEED)
    params = model.ordered_params()
    x, y = make_batch(c, SEED + 1)
    params0 = [f32(p) for p in params]

    logits, loss = model(x, y)
    loss.backward()
    logits0, loss0 = f32(logits), float(loss)
    grads0 = [f32(p.grad) for p in params]
    for n in ("wte", "lmheadw"):
        assert not getattr(model, n).grad[c["V"]:].any(), "padded rows must get zero grads"

    decay = [p for n, p in zip(PARAM_NAMES, params) if n in DECAY_NAMES]
    other = [p for n, p in zip(PARAM_NAMES, params) if n not in DECAY_NAMES]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": c["weight_decay"]},
                             {"params": other, "weight_decay": 0.0}],
                            lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"])
    losses, norms = [], []
    for _ in range(c["nsteps"]):
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        norms.append(global_grad_norm(params))
        losses.append(float(loss))
        torch.nn.utils.clip_grad_norm_(params, c["grad_clip"])
        opt.step()

    header = np.zeros(256, dtype="<i4")
    header[0:13] = [DEBUG_MAGIC, DEBUG_VERSION, c["B"], c["T"], c["V"], Vp, c["C"], c["L"],
                    c["NH"], c["NKV"], c["F"], c["maxT"], c["nsteps"]]
    keys = ["norm_eps", "rope_theta", "lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip"]
    header[20:28] = np.array([c[k] for k in keys], dtype="<f4").view("<i4")
    rs = c.get("rope_scaling")
    if rs is not None:  # else [28..31] stay 0
        header[28:32] = np.array([float(rs[k]) for k in ROPE_SCALING_KEYS],
                                 dtype="<f4").view("<i4")
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, f"llama_{name}_debug.bin")
    with open(path + ".tmp", "wb") as f:
        f.write(b"".join([header.tobytes(), x.numpy().astype("<i4").tobytes(),
                          y.numpy().astype("<i4").tobytes(), *params0, logits0, f32([loss0]),
                          *grads0, f32(losses), f32(norms)]))
    os.replace(path + ".tmp", path)
    print(f"{path} loss {loss0:.6f} (ln V {math.log(c['V']):.4f}) losses "
          + " ".join(f"{v:.5f}" for v in losses) + " norms " + " ".join(f"{v:.4f}" for v in norms))
    return losses, norms


# ---- self-tests ----------------------------------------------------------------------
def check(label, err, tol):
    print(f"{'ok  ' if err <= tol else 'FAIL'} {label}: {err:.3e} (tol {tol:g})")
    return err <= tol


def selftest():
    ok = True
    torch.manual_seed(0)
    # 1. gradients against central finite differences, every element of every parameter
    c = dict(V=11, maxT=8, L=1, C=16, NH=2, NKV=1, F=24, B=2, T=5, norm_eps=1e-5,
             rope_theta=10000.0)
    model = Llama(c)
    model.init_random(1)
    params = model.ordered_params()
    with torch.no_grad():  # larger weights than the init, so that every path matters
        for p in params:
            p.add_(0.3 * torch.randn(p.shape, dtype=DT))
        model.wte[c["V"]:] = model.lmheadw[c["V"]:] = 0
    x, y = make_batch(c, 2)
    model(x, y)[1].backward()
    ana, num, h = torch.cat([p.grad.view(-1) for p in params]), [], 1e-6
    with torch.no_grad():
        for flat in (p.view(-1) for p in params):
            for i in range(flat.numel()):
                old, lpm = flat[i].item(), []
                for v in (old + h, old - h):
                    flat[i] = v
                    lpm.append(model(x, y)[1].item())
                flat[i] = old
                num.append((lpm[0] - lpm[1]) / (2 * h))
    num = torch.tensor(num, dtype=DT)
    ok &= check(f"grads vs finite differences ({num.numel()} elements), rel L2 error",
                ((ana - num).norm() / num.norm()).item(), 1e-7)
    big = num.abs() > 1e-3
    ok &= check("  max elementwise rel error where |g| > 1e-3",
                ((ana - num)[big].abs() / num[big].abs()).max().item(), 1e-5)
    leaves = tuple(p.detach().clone().requires_grad_() for p in params)
    fcall = torch.nn.utils.stateless.functional_call
    passed = torch.autograd.gradcheck(
        lambda *a: fcall(model, dict(zip(PARAM_NAMES, a)), (x, y))[1], leaves)
    ok &= check("torch.autograd.gradcheck (0 = passed)", 0.0 if passed else 1.0, 0.0)

    # 2. RoPE against complex multiplication of the pairs (x_i, x_{i+hs/2})
    for hs, theta in ((16, 500000.0), (128, 10000.0), (8, 10000.0)):
        T = 64
        xr = torch.randn(2, T, 3, hs, dtype=DT)
        cos, sin = rope_cos_sin(T, hs, theta)
        ours = apply_rope(xr, cos, sin).numpy()
        z = xr.numpy()[..., : hs // 2] + 1j * xr.numpy()[..., hs // 2:]
        freq = 1.0 / np.power(theta, np.arange(0, hs, 2) / hs)
        rot = np.exp(1j * np.outer(np.arange(T), freq))[None, :, None, :]
        ref = np.concatenate([(z * rot).real, (z * rot).imag], -1)
        ok &= check(f"RoPE vs complex rotation hs={hs} theta={theta:g}",
                    float(np.abs(ours - ref).max()), 1e-12)

    # 2b. Llama 3.1 RoPE scaling: (a) against a plain-Python loop over the frequencies
    #     (computed as 1 / theta^(j/hs), j = 0, 2, ..), the scaled config and Llama 3.1 8B's
    #     settings (hs 128, M 8192); the scaled config's RoPE against complex rotation by them
    for hs, theta, rs in ((32, 500000.0, CONFIGS["scaled"]["rope_scaling"]),
                          (128, 500000.0, dict(factor=8.0, low_freq_factor=1.0,
                                               high_freq_factor=4.0,
                                               original_max_position_embeddings=8192)),
                          (16, 10000.0, dict(factor=3.0, low_freq_factor=1.5,
                                             high_freq_factor=6.0,
                                             original_max_position_embeddings=100))):
        ref = loop_scaled_inv_freq(hs, theta, *(rs[k] for k in ROPE_SCALING_KEYS))
        ours = rope_inv_freq(hs, theta, rs)
        reg = rope_regimes(hs, theta, rs)
        counts = {r: reg.count(r) for r in ("keep", "mid", "div")}
        ok &= check(f"scaled inv_freq vs Python loop hs={hs} theta={theta:g} "
                    f"M={rs['original_max_position_embeddings']} regimes {counts}, max rel error",
                    max(abs(a - b) / b for a, b in zip(ours.tolist(), ref)), 1e-15)
        ok &= check("  all three regimes occur (missing ones)",
                    sum(v == 0 for v in counts.values()), 0)
    c = CONFIGS["scaled"]
    hs, T = c["C"] // c["NH"], c["T"]
    print("scaled config regimes by i:", " ".join(
        f"{i}:{r}" for i, r in enumerate(rope_regimes(hs, c["rope_theta"], c["rope_scaling"]))))
    xr = torch.randn(2, T, 3, hs, dtype=DT, generator=torch.Generator().manual_seed(7))
    cos, sin = rope_cos_sin(T, hs, c["rope_theta"], c["rope_scaling"])
    ours = apply_rope(xr, cos, sin).numpy()
    z = xr.numpy()[..., : hs // 2] + 1j * xr.numpy()[..., hs // 2:]
    freq = loop_scaled_inv_freq(hs, c["rope_theta"],
                                *(c["rope_scaling"][k] for k in ROPE_SCALING_KEYS))
    rot = np.exp(1j * np.outer(np.arange(T), freq))[None, :, None, :]
    ref = np.concatenate([(z * rot).real, (z * rot).imag], -1)
    ok &= check("scaled config RoPE vs complex rotation by the loop's frequencies",
                float(np.abs(ours - ref).max()), 1e-12)
    #     (b) factor 1: every regime, the smoothed one included, must leave inv_freq as is
    for hs, theta, lo, hi, omax in ((32, 500000.0, 1.0, 4.0, 64), (32, 500000.0, 1.0, 2.0, 64),
                                    (128, 500000.0, 1.0, 4.0, 8192),
                                    (128, 10000.0, 1.0, 32.0, 4096),
                                    (64, 10000.0, 2.0, 7.0, 1000)):
        rs = dict(factor=1.0, low_freq_factor=lo, high_freq_factor=hi,
                  original_max_position_embeddings=omax)
        plain, scaled = rope_inv_freq(hs, theta), rope_inv_freq(hs, theta, rs)
        nmid = rope_regimes(hs, theta, rs).count("mid")
        ok &= check(f"factor 1 leaves inv_freq unchanged hs={hs} theta={theta:g} lo={lo:g} "
                    f"hi={hi:g} M={omax} ({nmid} smoothed, {int((plain != scaled).sum())} "
                    f"not bit-equal), max rel change",
                    ((scaled - plain).abs() / plain).max().item(), 1e-15)
        ok &= check("  the smoothed regime occurs (0 = yes)", float(nmid == 0), 0.0)

    # 3. GQA attention against an explicit loop over (batch, head, position)
    for NH, NKV in ((6, 2), (4, 1), (3, 3)):
        q = torch.randn(2, 13, NH, 16, dtype=DT)
        k, v = torch.randn(2, 13, NKV, 16, dtype=DT), torch.randn(2, 13, NKV, 16, dtype=DT)
        ok &= check(f"GQA attention vs loop NH={NH} NKV={NKV}",
                    (gqa_attention(q, k, v) - loop_attention(q, k, v)).abs().max().item(), 1e-13)
    c = CONFIGS["gqa1"]
    model = Llama(c)
    model.init_random(SEED)
    x, _ = make_batch(c, SEED + 1)
    with torch.no_grad():
        a, b = model(x[:1, :20])[0], model(x[:1, :20], attn=loop_attention)[0]
    ok &= check("gqa1 logits with loop attention", (a - b).abs().max().item(), 1e-12)

    # 4. Hugging Face transformers' LlamaForCausalLM (not installed here: untested path)
    try:
        import transformers
    except ImportError:
        print("skip transformers is not importable: LlamaForCausalLM comparison not run")
    else:  # HF computes the RoPE angles in float32, so ~1e-6 is the expected agreement
        for name, c in CONFIGS.items():
            ok &= check(f"{name} logits vs transformers {transformers.__version__}",
                        compare_hf(c), 1e-4)
    print("selftest", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


def loop_scaled_inv_freq(hs, theta, factor, low_freq_factor, high_freq_factor, omax):
    """Llama 3.1 scaled RoPE frequencies, one at a time in Python floats (self-test only)."""
    low_freq_wavelen, high_freq_wavelen = omax / low_freq_factor, omax / high_freq_factor
    out = []
    for j in range(0, hs, 2):
        freq = 1.0 / theta ** (j / hs)
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            out.append(freq)
        elif wavelen > low_freq_wavelen:
            out.append(freq / factor)
        else:
            smooth = (omax / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append((1 - smooth) * freq / factor + smooth * freq)
    return out


def compare_hf(c):
    """Max |logits difference| against LlamaForCausalLM given the same weights."""
    from transformers import LlamaConfig, LlamaForCausalLM
    m = Llama(c)
    m.init_random(SEED)
    x, _ = make_batch(c, SEED + 1)
    V, NH, NKV, FF, hs = c["V"], c["NH"], c["NKV"], c["F"], c["C"] // c["NH"]
    rs = c.get("rope_scaling")
    rs = None if rs is None else dict(rope_type="llama3", **rs)
    hf = LlamaForCausalLM(LlamaConfig(
        vocab_size=V, hidden_size=c["C"], intermediate_size=FF, num_hidden_layers=c["L"],
        num_attention_heads=NH, num_key_value_heads=NKV, head_dim=hs, hidden_act="silu",
        max_position_embeddings=c["maxT"], rms_norm_eps=c["norm_eps"],
        rope_theta=c["rope_theta"], rope_scaling=rs,
        tie_word_embeddings=False)).to(DT).eval()
    sd = dict(hf_tensors(m))
    res = hf.load_state_dict({k: t.detach().clone() for k, t in sd.items()}, strict=False)
    assert not res.unexpected_keys and all("rotary" in k for k in res.missing_keys), res
    with torch.no_grad():
        return (hf(x).logits - m(x)[0]).abs().max().item()


# ---- Hugging Face files (LlamaForCausalLM's names; safetensors written and read here) --
HF_DTYPES = {"F32": (torch.float32, "<f4"), "BF16": (torch.bfloat16, None), "F16": (torch.float16, "<f2")}


def hf_tensors(m):
    """The model's tensors under transformers' names, in its order, unpadded (V rows)."""
    c = m.c
    V, NH, NKV, FF, hs = c["V"], c["NH"], c["NKV"], c["F"], c["C"] // c["NH"]
    out = [("model.embed_tokens.weight", m.wte[:V])]
    for l in range(c["L"]):
        q, k, v = m.qkvw[l].split([NH * hs, NKV * hs, NKV * hs], dim=0)
        for key, t in (("input_layernorm", m.rms1w[l]), ("self_attn.q_proj", q),
                       ("self_attn.k_proj", k), ("self_attn.v_proj", v),
                       ("self_attn.o_proj", m.attprojw[l]),
                       ("post_attention_layernorm", m.rms2w[l]),
                       ("mlp.gate_proj", m.fcw[l][:FF]), ("mlp.up_proj", m.fcw[l][FF:]),
                       ("mlp.down_proj", m.fcprojw[l])):
            out.append((f"model.layers.{l}.{key}.weight", t))
    out += [("model.norm.weight", m.rmsfw), ("lm_head.weight", m.lmheadw[:V])]
    return out


def hf_config(c):
    rs = c.get("rope_scaling")
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": c["V"], "hidden_size": c["C"], "intermediate_size": c["F"],
            "num_hidden_layers": c["L"], "num_attention_heads": c["NH"],
            "num_key_value_heads": c["NKV"], "head_dim": c["C"] // c["NH"],
            "max_position_embeddings": c["maxT"], "rms_norm_eps": c["norm_eps"],
            "rope_theta": c["rope_theta"],
            "rope_scaling": None if rs is None else dict(rope_type="llama3", **rs),
            "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0,
            "mlp_bias": False, "tie_word_embeddings": False, "bos_token_id": 0,
            "eos_token_id": 1, "torch_dtype": "float32", "transformers_version": "4.46.0"}


def tensor_bytes(t, dtype):
    if dtype == "BF16":  # round to nearest even (torch's conversion), stored as raw 16-bit words
        return t.detach().to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    return np.ascontiguousarray(t.detach().to(HF_DTYPES[dtype][0]).numpy().astype(HF_DTYPES[dtype][1])).tobytes()


def write_safetensors(path, items, dtype):
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in items:
        b = tensor_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def write_hf(m, outdir, dtype="F32", shards=1, config_extra=None):
    """config.json + model.safetensors, or shards model-0000i-of-0000n.safetensors + index."""
    os.makedirs(outdir, exist_ok=True)
    cfg = hf_config(m.c)
    cfg.update(config_extra or {})
    with open(os.path.join(outdir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    items = hf_tensors(m)
    if shards == 1:
        write_safetensors(os.path.join(outdir, "model.safetensors"), items, dtype)
        return
    per = (len(items) + shards - 1) // shards
    weight_map = {}
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = items[i * per:(i + 1) * per]
        write_safetensors(os.path.join(outdir, name), part, dtype)
        weight_map.update({n: name for n, _ in part})
    with open(os.path.join(outdir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[b:end]
        if e["dtype"] == "BF16":
            words = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = words.view(np.float32)
        elif e["dtype"] in ("F32", "F16"):
            arr = np.frombuffer(raw, dtype=HF_DTYPES[e["dtype"]][1]).astype(np.float32)
        else:
            raise ValueError(f"{path}: {name}: dtype {e['dtype']}")
        out[name] = torch.from_numpy(arr.copy()).reshape(e["shape"])
    return out


def read_hf(indir):
    """A LlamaForCausalLM directory -> Llama (float64), the config from config.json."""
    with open(os.path.join(indir, "config.json")) as f:
        j = json.load(f)
    c = dict(V=j["vocab_size"], maxT=j["max_position_embeddings"], L=j["num_hidden_layers"],
             C=j["hidden_size"], NH=j["num_attention_heads"],
             NKV=j.get("num_key_value_heads", j["num_attention_heads"]),
             F=j["intermediate_size"], norm_eps=j["rms_norm_eps"],
             rope_theta=j.get("rope_theta", 10000.0))
    rs = j.get("rope_scaling")
    if rs:
        c["rope_scaling"] = {k: rs[k] for k in ("factor", "low_freq_factor", "high_freq_factor",
                                                "original_max_position_embeddings")}
    index = os.path.join(indir, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(index):
        with open(index) as f:
            for shard in sorted(set(json.load(f)["weight_map"].values())):
                tensors.update(read_safetensors(os.path.join(indir, shard)))
    else:
        tensors = read_safetensors(os.path.join(indir, "model.safetensors"))
    m = Llama(c)
    probe = Llama(c)  # its hf_tensors views say where each HF tensor lands
    with torch.no_grad():
        for (name, view), (_, target) in zip(hf_tensors(probe), hf_tensors(m)):
            target.copy_(tensors.pop(name).to(DT))
    assert not tensors, f"tensors left over: {list(tensors)[:3]}"
    return m


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="config name, or 'all'")
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--list", action="store_true", help="list configs and exit")
    ap.add_argument("--selftest", action="store_true", help="run the self-checks and exit")
    ap.add_argument("--write-hf", metavar="DIR",
                    help="write config NAME's model (random init, --seed) as a LlamaForCausalLM "
                         "directory: config.json + safetensors")
    ap.add_argument("--dtype", choices=["F32", "BF16", "F16"], default="F32")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--round-bf16", action="store_true",
                    help="with --write-hf: round the weights to bf16 first (values, still --dtype)")
    args = ap.parse_args(argv)
    if args.write_hf:
        if args.config not in CONFIGS:
            ap.error(f"--write-hf needs --config NAME, one of {', '.join(CONFIGS)}")
        m = Llama(dict(OPT, **CONFIGS[args.config]))
        m.init_random(args.seed)
        if args.round_bf16:
            with torch.no_grad():
                for p in m.ordered_params():
                    p.copy_(p.to(torch.bfloat16).to(DT))
        write_hf(m, args.write_hf, args.dtype, args.shards)
        return 0
    if args.list:
        for name, c in CONFIGS.items():
            fmt = lambda v: (f"{v:g}" if isinstance(v, float) else ",".join(
                f"{k}:{fmt(x)}" for k, x in v.items()) if isinstance(v, dict) else str(v))
            print(name, " ".join(f"{k}={fmt(v)}" for k, v in dict(OPT, **c).items()),
                  f"Vp={padded_vocab(c['V'])}")
        return 0
    if args.selftest:
        return selftest()
    if not args.config or not args.out:
        ap.error("--config NAME|all --out DIR (or --list, or --selftest)")
    for name in (list(CONFIGS) if args.config == "all" else [args.config]):
        if name not in CONFIGS:
            ap.error(f"unknown config {name!r}; known: {', '.join(CONFIGS)}")
        run_config(name, CONFIGS[name], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
