#!/usr/bin/python3
"""bench_pytorch.py: the training step of dev/bench_cpu.cpp in PyTorch, as a PyTorch user would
write it, for a side-by-side with train_gpt_cpu (make bench-cpu runs both, one after the other).

    /usr/bin/python3 dev/bench_pytorch.py [--model d12] [--B 4] [--T 64] [--steps 5] [--threads N]

The model is GPT-2 as nanoGPT and llm.c's train_gpt2.py write it: one nn.Linear per layer and
projection, the classifier tied to the token embedding over the padded vocabulary (50,304), the
tanh GELU, causal softmax attention, mean cross-entropy. The step is what train_gpt_cpu does:
forward, backward, clip the global gradient norm at 1.0, AdamW (lr 1e-4, betas 0.9/0.95,
eps 1e-8, weight decay 0.1 on the 2-D weights; its default loop over the tensors, which in 1.13
beats foreach=True on the CPU: 1.5 s against 2.3 s at d12 on a 2-core EPYC), then zero the
gradients (set_to_none). Random tokens; fp32; as many threads as
train_gpt_cpu's OpenMP would use (OMP_NUM_THREADS, else every CPU).

Its BLAS matters: Debian's python3-torch calls the system's libblas.so.3, which is the reference
BLAS (10x+ slower) unless libopenblas0-pthread is installed; the line 'BLAS:' says which one.

Last line, for scripts:  pytorch: MS ms/step | TOK tokens/s | G GFLOP/s of 6N flops
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# depth -> (channels, heads), llm.c's table (the d-descriptors of gpt2_config_from_descriptor)
SHAPES = {6: (384, 6), 12: (768, 12), 24: (1024, 16), 36: (1280, 20), 48: (1600, 25)}


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.attproj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)

    def forward(self, x, causal):
        B, T, C = x.shape
        hs = C // self.NH
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.NH, hs).transpose(1, 2)
        k = k.view(B, T, self.NH, hs).transpose(1, 2)
        v = v.view(B, T, self.NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = torch.softmax(att.masked_fill(causal[:T, :T], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attproj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, Vp=50304, maxT=1024):
        super().__init__()
        self.wte = nn.Embedding(Vp, C)
        self.wpe = nn.Embedding(maxT, C)
        self.blocks = nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.lnf = nn.LayerNorm(C)
        # the masked (future) positions: True where attention is not allowed
        self.register_buffer("causal", torch.ones(maxT, maxT, dtype=torch.bool).triu(1), persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.blocks:
            x = block(x, self.causal)
        logits = F.linear(self.lnf(x), self.wte.weight)  # tied classifier
        return F.cross_entropy(logits.view(B * T, -1), targets.view(-1))


def blas_name():
    """Which libblas.so.3 the process loaded (from /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower()}
    except OSError:
        return "unknown"
    if any("openblas" in lib for lib in libs):
        return "OpenBLAS (" + ", ".join(sorted(l for l in libs if "openblas" in l)) + ")"
    return ("the reference BLAS, 10x+ slower: apt-get install libopenblas0-pthread (" + ", ".join(sorted(libs)) + ")"
            if libs else "none found in the process's maps")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="d12")
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--T", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "0") or 0))
    args = ap.parse_args()
    if not args.model.startswith("d") or int(args.model[1:]) not in SHAPES:
        raise SystemExit(f"bench_pytorch.py: unknown model '{args.model}' (d6, d12, d24, d36, d48)")
    L = int(args.model[1:])
    C, NH = SHAPES[L]
    torch.set_num_threads(args.threads if args.threads > 0 else os.cpu_count())
    torch.manual_seed(42)
    model = GPT(L, C, NH)
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    n = sum(p.numel() for p in model.parameters())
    tokens = torch.randint(0, 50257, (args.B, args.T + 1))
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    print(f"pytorch {torch.__version__}: {args.model} ({n} parameters), B={args.B} T={args.T}, "
          f"{torch.get_num_threads()} threads, {args.steps} timed steps after 1 warmup")
    print(f"BLAS: {blas_name()}")
    times = []
    for s in range(args.steps + 1):
        t0 = time.perf_counter()
        loss = model(x, y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        ms = (t3 - t0) * 1000
        print(f"  step {s}: loss {loss.item():.4f}, {ms:.1f} ms (forward {(t1 - t0) * 1000:.1f}, "
              f"backward {(t2 - t1) * 1000:.1f}, norm+AdamW {(t3 - t2) * 1000:.1f}){' (warmup)' if s == 0 else ''}")
        if s > 0:
            times.append(ms)
    times.sort()
    med = times[len(times) // 2]
    tok = args.B * args.T
    print(f"pytorch: {med:.1f} ms/step | {tok / med * 1000:.0f} tokens/s | "
          f"{6.0 * n * tok / med / 1e6:.1f} GFLOP/s of 6N flops")


if __name__ == "__main__":
    main()
