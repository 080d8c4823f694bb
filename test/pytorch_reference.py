#!/usr/bin/python3
"""PyTorch reference for gptrain: a small GPT-2 written from scratch, independent of the C++.

It writes, for a named config, two files the C++ trainers are tested against:

  DIR/NAME_model.bin   llm.c model checkpoint (version 3, fp32): the initial weights
  DIR/NAME_debug.bin   a debug state: one batch, its logits, its loss, every gradient, and
                       the losses + pre-clip grad norms of a 10-step AdamW run on that batch

Usage (always with Debian's python, the only one that has torch):
  /usr/bin/python3 test/pytorch_reference.py --list
  /usr/bin/python3 test/pytorch_reference.py --config small --out test/out
  /usr/bin/python3 test/pytorch_reference.py --config all --out test/out
  /usr/bin/python3 test/pytorch_reference.py --random-checkpoint m.bin --V 256 --maxT 64 \
        --L 2 --NH 4 --C 64 [--seed 42]

GPT-2 numerics: token + position embedding; L blocks of
  x = x + attproj(attention(qkv(ln1(x))));  x = x + fcproj(gelu_tanh(fc(ln2(x))))
final LayerNorm; logits = lnf(x) @ wte[:V]^T (tied; padded rows V..Vp-1 never used);
loss = mean cross-entropy over all B*T positions over the real vocabulary V.

The parameters are held exactly as the checkpoint stores them: 16 tensors, each stacked
over layers (qkvw is (L, 3C, C), ...), so reading, writing and the gradient dump are 1:1.

Debug file (little-endian):
  header 256 x int32: [0]=20240327 [1]=3 [2]=B [3]=T [4]=nsteps [5]=V [6]=Vp [7]=C [8]=L
                      [9]=NH [10]=maxT; [20..25] hold float32 bit patterns of
                      lr, beta1, beta2, eps, weight_decay, grad_clip; the rest 0
  x        B*T int32
  y        B*T int32
  logits   B*T*V float32 (unpadded)
  loss     1 float32
  grads    the 16 parameter gradients, checkpoint order and layout, float32
           (wte's has Vp rows, padded rows zero)
  losses   nsteps float32: loss of step i of AdamW on this batch (losses[0] == loss)
  norms    nsteps float32: global L2 grad norm of step i, before clipping
"""
import argparse
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MODEL_MAGIC = 20240326
MODEL_VERSION_FP32 = 3
MODEL_VERSION_BF16 = 5
DEBUG_MAGIC = 20240327
DEBUG_VERSION = 3

PARAM_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
# the 2-D weight matrices (per layer) that get weight decay; everything else does not
DECAY_NAMES = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}

# Each config: model shape, batch, and the optimizer of the 10-step run.
# grad_clip is chosen from the pre-clip norms of the run so that clipping happens in some
# steps and not in others, with every norm at least ~1.4% away from the threshold (so an
# fp32 trainer cannot take the other branch): small clips 7 of 10 steps (norms 0.74..1.26),
# awkward 5 of 10 (0.83..1.38), tiny 4 of 10 (0.99..1.16), hs64 5 of 10 (1.24..2.02). hs64 has
# head size 64 (the one Hopper's wgmma attention takes, -ak 3) and T=80: two key tiles of 64,
# the second partial.
CONFIGS = {
    "small": dict(V=256, maxT=64, L=2, NH=4, C=64, B=4, T=64,
                  lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1,
                  grad_clip=0.9, nsteps=10, seed=42),
    "awkward": dict(V=1000, maxT=40, L=3, NH=3, C=48, B=3, T=37,
                    lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1,
                    grad_clip=1.1, nsteps=10, seed=42),
    "tiny": dict(V=50, maxT=16, L=1, NH=2, C=16, B=2, T=9,
                 lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1,
                 grad_clip=1.05, nsteps=10, seed=42),
    "hs64": dict(V=256, maxT=80, L=1, NH=2, C=128, B=2, T=80,
                 lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1,
                 grad_clip=1.55, nsteps=10, seed=42),
}


def padded_vocab(V, multiple=128):
    return ((V + multiple - 1) // multiple) * multiple


def param_shapes(V, Vp, maxT, L, NH, C):
    """Shapes of the 16 tensors in checkpoint order."""
    del V, NH
    return {
        "wte": (Vp, C), "wpe": (maxT, C),
        "ln1w": (L, C), "ln1b": (L, C),
        "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C),
        "attprojw": (L, C, C), "attprojb": (L, C),
        "ln2w": (L, C), "ln2b": (L, C),
        "fcw": (L, 4 * C, C), "fcb": (L, 4 * C),
        "fcprojw": (L, C, 4 * C), "fcprojb": (L, C),
        "lnfw": (C,), "lnfb": (C,),
    }


class GPT(nn.Module):
    """GPT-2 with parameters in llm.c's stacked checkpoint layout."""

    def __init__(self, V, maxT, L, NH, C, Vp=None, dtype=torch.float32):
        super().__init__()
        assert C % NH == 0, "C must be divisible by NH"
        self.V, self.maxT, self.L, self.NH, self.C = V, maxT, L, NH, C
        self.Vp = Vp if Vp is not None else padded_vocab(V)
        assert self.Vp >= V
        shapes = param_shapes(V, self.Vp, maxT, L, NH, C)
        for name in PARAM_NAMES:
            self.register_parameter(name, nn.Parameter(torch.zeros(shapes[name], dtype=dtype)))

    # ---- parameters ------------------------------------------------------------------
    def ordered_params(self):
        return [getattr(self, n) for n in PARAM_NAMES]

    def init_random(self, seed):
        """GPT-2 init (N(0,0.02), residual projections 0.02/sqrt(2L)), plus non-zero
        biases and perturbed LayerNorms so every gradient path is exercised.
        Drawn in float32 on a private generator, in checkpoint order."""
        g = torch.Generator().manual_seed(seed)
        std = 0.02
        proj_std = 0.02 / math.sqrt(2 * self.L)
        spec = {
            "wte": ("normal", std), "wpe": ("normal", std),
            "ln1w": ("ln_w", 0.1), "ln1b": ("normal", 0.1),
            "qkvw": ("normal", std), "qkvb": ("normal", std),
            "attprojw": ("normal", proj_std), "attprojb": ("normal", std),
            "ln2w": ("ln_w", 0.1), "ln2b": ("normal", 0.1),
            "fcw": ("normal", std), "fcb": ("normal", std),
            "fcprojw": ("normal", proj_std), "fcprojb": ("normal", std),
            "lnfw": ("ln_w", 0.1), "lnfb": ("normal", 0.1),
        }
        with torch.no_grad():
            for name in PARAM_NAMES:
                p = getattr(self, name)
                kind, s = spec[name]
                t = torch.randn(p.shape, generator=g, dtype=torch.float32) * s
                if kind == "ln_w":
                    t = t + 1.0
                if name == "wte":
                    t[self.V:] = 0.0  # padded vocab rows are zero
                p.copy_(t.to(p.dtype))

    # ---- forward ---------------------------------------------------------------------
    def forward(self, idx, targets=None):
        B, T = idx.shape
        assert T <= self.maxT, f"T={T} > maxT={self.maxT}"
        C, NH, L = self.C, self.NH, self.L
        hs = C // NH
        pos = torch.arange(T, device=idx.device)
        x = self.wte[idx] + self.wpe[pos].unsqueeze(0)  # (B, T, C)
        causal = torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
        scale = 1.0 / math.sqrt(hs)
        for l in range(L):
            # attention
            h = F.layer_norm(x, (C,), self.ln1w[l], self.ln1b[l], eps=1e-5)
            qkv = F.linear(h, self.qkvw[l], self.qkvb[l])  # (B, T, 3C): [q | k | v]
            q, k, v = qkv.split(C, dim=2)
            q = q.view(B, T, NH, hs).transpose(1, 2)  # (B, NH, T, hs)
            k = k.view(B, T, NH, hs).transpose(1, 2)
            v = v.view(B, T, NH, hs).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * scale  # (B, NH, T, T)
            att = att.masked_fill(~causal, float("-inf"))
            att = torch.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + F.linear(y, self.attprojw[l], self.attprojb[l])
            # MLP
            h = F.layer_norm(x, (C,), self.ln2w[l], self.ln2b[l], eps=1e-5)
            h = F.linear(h, self.fcw[l], self.fcb[l])
            h = F.gelu(h, approximate="tanh")
            x = x + F.linear(h, self.fcprojw[l], self.fcprojb[l])
        x = F.layer_norm(x, (C,), self.lnfw, self.lnfb, eps=1e-5)
        logits = x @ self.wte[: self.V].t()  # (B, T, V): only the real vocab
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, self.V), targets.reshape(-1))
        return logits, loss


# ---- optimizer -----------------------------------------------------------------------
def make_adamw(model, lr, beta1, beta2, eps, weight_decay):
    decay = [getattr(model, n) for n in PARAM_NAMES if n in DECAY_NAMES]
    no_decay = [getattr(model, n) for n in PARAM_NAMES if n not in DECAY_NAMES]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(beta1, beta2), eps=eps)


def global_grad_norm(params):
    """L2 norm over all gradients, accumulated in float64 (the recorded value)."""
    s = 0.0
    for p in params:
        if p.grad is not None:
            s += float(p.grad.detach().double().pow(2).sum())
    return math.sqrt(s)


# ---- checkpoint I/O ------------------------------------------------------------------
def write_checkpoint(model, path):
    header = np.zeros(256, dtype="<i4")
    header[0] = MODEL_MAGIC
    header[1] = MODEL_VERSION_FP32
    header[2] = model.maxT
    header[3] = model.V
    header[4] = model.L
    header[5] = model.NH
    header[6] = model.C
    header[7] = model.Vp
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        for p in model.ordered_params():
            f.write(p.detach().cpu().to(torch.float32).numpy().astype("<f4").tobytes())
    os.replace(tmp, path)


def read_checkpoint(path, dtype=torch.float32):
    """Reads an llm.c checkpoint (version 3 fp32 or 5 bf16) into a GPT."""
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(256 * 4), dtype="<i4")
        if header.size != 256 or header[0] != MODEL_MAGIC:
            raise ValueError(f"{path}: bad magic (not an llm.c checkpoint)")
        version = int(header[1])
        if version not in (MODEL_VERSION_FP32, MODEL_VERSION_BF16):
            raise ValueError(f"{path}: unsupported version {version}")
        maxT, V, L, NH, C, Vp = (int(header[i]) for i in (2, 3, 4, 5, 6, 7))
        model = GPT(V, maxT, L, NH, C, Vp=Vp, dtype=dtype)
        shapes = param_shapes(V, Vp, maxT, L, NH, C)
        with torch.no_grad():
            for name in PARAM_NAMES:
                n = int(np.prod(shapes[name]))
                if version == MODEL_VERSION_FP32:
                    raw = f.read(4 * n)
                    if len(raw) != 4 * n:
                        raise ValueError(f"{path}: truncated at {name}")
                    arr = np.frombuffer(raw, dtype="<f4")
                else:
                    raw = f.read(2 * n)
                    if len(raw) != 2 * n:
                        raise ValueError(f"{path}: truncated at {name}")
                    bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
                    arr = bits.view(np.float32)
                t = torch.from_numpy(arr.astype(np.float32).reshape(shapes[name]))
                getattr(model, name).copy_(t.to(dtype))
            if f.read(1):
                raise ValueError(f"{path}: trailing bytes after the 16 tensors")
    return model


def f32_bits(v):
    return struct.unpack("<i", struct.pack("<f", float(v)))[0]


def make_batch(V, B, T, seed):
    """Random ids in [0, V) with a fixed seed; both x and y contain V-1 and 0."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, V, (B, T), generator=g, dtype=torch.int64)
    y = torch.randint(0, V, (B, T), generator=g, dtype=torch.int64)
    x[0, 0] = V - 1
    y[B - 1, T - 1] = V - 1
    y[0, T // 2] = V - 1
    y[B // 2, 0] = 0
    return x, y


# ---- the reference run ---------------------------------------------------------------
def run_config(name, cfg, outdir, dtype=torch.float32, quiet=False):
    t0 = time.time()
    V, maxT, L, NH, C = cfg["V"], cfg["maxT"], cfg["L"], cfg["NH"], cfg["C"]
    B, T = cfg["B"], cfg["T"]
    Vp = padded_vocab(V)
    model = GPT(V, maxT, L, NH, C, Vp=Vp, dtype=dtype)
    model.init_random(cfg["seed"])
    # the checkpoint holds exactly the float32 weights the debug state starts from
    os.makedirs(outdir, exist_ok=True)
    write_checkpoint(model, os.path.join(outdir, f"{name}_model.bin"))

    x, y = make_batch(V, B, T, cfg["seed"] + 1)
    params = model.ordered_params()

    # one forward + backward: logits, loss, gradients
    model.zero_grad(set_to_none=True)
    logits, loss = model(x, y)
    loss.backward()
    logits0 = logits.detach().to(torch.float32).numpy().astype("<f4")
    loss0 = float(loss.detach())
    grads0 = [p.grad.detach().to(torch.float32).numpy().astype("<f4").copy() for p in params]

    # nsteps of AdamW on the same batch
    opt = make_adamw(model, cfg["lr"], cfg["beta1"], cfg["beta2"], cfg["eps"],
                     cfg["weight_decay"])
    losses, norms, clipped = [], [], []
    for _ in range(cfg["nsteps"]):
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        norm = global_grad_norm(params)
        torch.nn.utils.clip_grad_norm_(params, cfg["grad_clip"])
        opt.step()
        losses.append(float(loss.detach()))
        norms.append(norm)
        clipped.append(norm > cfg["grad_clip"])

    header = np.zeros(256, dtype="<i4")
    header[0] = DEBUG_MAGIC
    header[1] = DEBUG_VERSION
    header[2:11] = [B, T, cfg["nsteps"], V, Vp, C, L, NH, maxT]
    for i, key in enumerate(["lr", "beta1", "beta2", "eps", "weight_decay", "grad_clip"]):
        header[20 + i] = f32_bits(cfg[key])
    path = os.path.join(outdir, f"{name}_debug.bin")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(x.numpy().astype("<i4").tobytes())
        f.write(y.numpy().astype("<i4").tobytes())
        f.write(logits0.tobytes())
        f.write(np.array([loss0], dtype="<f4").tobytes())
        for gr in grads0:
            f.write(gr.tobytes())
        f.write(np.array(losses, dtype="<f4").tobytes())
        f.write(np.array(norms, dtype="<f4").tobytes())
    os.replace(tmp, path)

    if not quiet:
        nparams = sum(p.numel() for p in params)
        print(f"[{name}] V={V} Vp={Vp} maxT={maxT} L={L} NH={NH} C={C} B={B} T={T} "
              f"params={nparams} dtype={str(dtype).replace('torch.', '')}")
        print(f"[{name}] lr={cfg['lr']:g} betas=({cfg['beta1']:g}, {cfg['beta2']:g}) "
              f"eps={cfg['eps']:g} wd={cfg['weight_decay']:g} grad_clip={cfg['grad_clip']:g}")
        print(f"[{name}] loss {loss0:.6f}  (ln V = {math.log(V):.6f})")
        for i, (lo, no, c) in enumerate(zip(losses, norms, clipped)):
            print(f"[{name}] step {i}: loss {lo:.6f} norm {no:.6f}{'  (clipped)' if c else ''}")
        print(f"[{name}] wrote {os.path.join(outdir, name + '_model.bin')} and {path} "
              f"in {time.time() - t0:.2f}s")
    return losses, norms


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="config name, or 'all'")
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--list", action="store_true", help="list configs and exit")
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                    help="compute precision (weights are always drawn and written as fp32)")
    ap.add_argument("--random-checkpoint", metavar="OUT",
                    help="write only a randomly initialised checkpoint to OUT")
    ap.add_argument("--V", type=int)
    ap.add_argument("--maxT", type=int)
    ap.add_argument("--L", type=int)
    ap.add_argument("--NH", type=int)
    ap.add_argument("--C", type=int)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args(argv)
    dtype = torch.float32 if args.dtype == "float32" else torch.float64

    if args.list:
        for name, cfg in CONFIGS.items():
            print(name, " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                 for k, v in cfg.items()), f"Vp={padded_vocab(cfg['V'])}")
        return 0
    if args.random_checkpoint:
        missing = [k for k in ("V", "maxT", "L", "NH", "C") if getattr(args, k) is None]
        if missing:
            ap.error("--random-checkpoint needs " + " ".join("--" + k for k in missing))
        model = GPT(args.V, args.maxT, args.L, args.NH, args.C)
        model.init_random(args.seed)
        d = os.path.dirname(args.random_checkpoint)
        if d:
            os.makedirs(d, exist_ok=True)
        write_checkpoint(model, args.random_checkpoint)
        print(f"wrote {args.random_checkpoint}: V={args.V} Vp={model.Vp} maxT={args.maxT} "
              f"L={args.L} NH={args.NH} C={args.C} seed={args.seed} "
              f"params={sum(p.numel() for p in model.ordered_params())}")
        return 0
    if not args.config or not args.out:
        ap.error("--config NAME --out DIR (or --list, or --random-checkpoint)")
    names = list(CONFIGS) if args.config == "all" else [args.config]
    for name in names:
        if name not in CONFIGS:
            ap.error(f"unknown config {name!r}; known: {', '.join(CONFIGS)}")
        run_config(name, CONFIGS[name], args.out, dtype=dtype)
    return 0


if __name__ == "__main__":
    sys.exit(main())
