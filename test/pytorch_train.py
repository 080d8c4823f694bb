#!/usr/bin/python3
"""An independent PyTorch re-implementation of a gptrain / llm.c training run.

Runs the same optimisation the C++ trainer runs for the same flags, and writes one line
per step so the two runs can be compared step by step.

Usage:
  /usr/bin/python3 test/pytorch_train.py --model CKPT --train 'DIR/*_train_*.bin' \
      --B 4 --T 64 [--total-batch D] [--steps N] [--lr LR] [--warmup U] [--final-frac Q] \
      [--weight-decay C] [--schedule cosine|linear|constant] [--grad-clip 1.0] \
      --out losses.txt

  flag            llm.c   default   meaning
  --model         -e      required  llm.c checkpoint (version 3 fp32 or 5 bf16), GPT-2
  --hf-llama DIR          instead   a LlamaForCausalLM directory (config.json + safetensors),
                                    trained as test/llama_reference.py's Llama
  --train         -i      required  train shard glob (shards sorted by name)
  --B             -b      4         micro-batch size
  --T             -t      64        sequence length
  --total-batch   -d      B*T       tokens per optimizer step; grad_accum = D / (B*T)
  --steps         -x      10        optimizer steps
  --lr            -l      3e-4      peak learning rate
  --warmup        -u      0         warmup steps
  --final-frac    -q      1.0       final lr = lr * Q
  --weight-decay  -c      0.0       AdamW decay, only on wte wpe qkvw attprojw fcw fcprojw
  --schedule      -k      cosine    cosine | linear | constant

Output file: one line per step, `step loss norm lr`, step counted from 0, where loss is the
mean of the micro-step losses, norm the global L2 grad norm before clipping (float64
accumulation), lr the learning rate used by that step.

Semantics (llm.c's):
  data   shards sorted by name; in a shard, windows of B*T+1 tokens start at 0, B*T, 2*B*T,
         ... while start + B*T + 1 <= ntok (the tail is dropped), then the next shard;
         after the last shard, back to the first. inputs = window[:-1], targets =
         window[1:], each viewed as (B, T).
  step   grad_accum micro-steps, each loss scaled by 1/grad_accum before backward; then
         norm, clip_grad_norm_(grad_clip), lr from the schedule, AdamW(0.9, 0.95, 1e-8).
  lr     step < U: lr*(step+1)/U; else ratio = (step-U)/(N-U), min = lr*Q,
         cosine: min + 0.5*(1+cos(pi*ratio))*(lr-min); linear: lr - ratio*(lr-min).
         constant: lr at every step, warmup ignored (as llm.c's schedulers.h does).
  vocab  logits are taken over the real vocab V only (the same as slicing Vp to V), so
         the padded rows of wte get no gradient.
"""
import argparse
import glob
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_reference as ref  # noqa: E402  (the GPT module, checkpoint reader, AdamW groups)
import llama_reference as lref  # noqa: E402  (the Llama module, its Hugging Face reader)

SHARD_FORMATS = {20240520: (1, "<u2"), 20240801: (7, "<u4")}  # magic: (version, token type); the
# second is llm.c's Llama 3 branch's, for vocabularies past 65,536


def read_shard(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(256 * 4), dtype="<i4")
        if header.size != 256 or int(header[0]) not in SHARD_FORMATS:
            raise ValueError(f"{path}: bad magic")
        version, token_type = SHARD_FORMATS[int(header[0])]
        if header[1] != version:
            raise ValueError(f"{path}: unsupported version {header[1]}")
        ntok = int(header[2])
        toks = np.frombuffer(f.read(), dtype=token_type)
    if toks.size != ntok:
        raise ValueError(f"{path}: header says {ntok} tokens, file has {toks.size}")
    return toks


class SequentialLoader:
    """llm.c's DataLoader without shuffling, single process."""

    def __init__(self, pattern, B, T):
        self.files = sorted(glob.glob(pattern))
        if not self.files:
            raise FileNotFoundError(f"no shard matches {pattern!r}")
        self.B, self.T = B, T
        for path in self.files:
            ntok = int(np.fromfile(path, dtype="<i4", count=3)[2])
            if ntok < B * T + 1:
                raise ValueError(f"{path}: {ntok} tokens, fewer than B*T+1 = {B * T + 1}")
        self.shard_idx = 0
        self.tokens = read_shard(self.files[0])
        self.pos = 0

    def next_batch(self):
        n = self.B * self.T
        if self.pos + n + 1 > self.tokens.size:
            self.shard_idx = (self.shard_idx + 1) % len(self.files)
            self.tokens = read_shard(self.files[self.shard_idx])
            self.pos = 0
        w = self.tokens[self.pos: self.pos + n + 1].astype(np.int64)
        self.pos += n
        x = torch.from_numpy(w[:-1].copy()).view(self.B, self.T)
        y = torch.from_numpy(w[1:].copy()).view(self.B, self.T)
        return x, y


def learning_rate(step, lr, warmup, steps, final_frac, schedule):
    if schedule == "constant":
        return lr
    if step < warmup:
        return lr * (step + 1) / warmup
    lr_min = lr * final_frac
    denom = steps - warmup
    ratio = (step - warmup) / denom if denom > 0 else 0.0
    if schedule == "cosine":
        return lr_min + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - lr_min)
    if schedule == "linear":
        return lr - ratio * (lr - lr_min)
    raise ValueError(f"unknown schedule {schedule}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model")
    ap.add_argument("--hf-llama")
    ap.add_argument("--train", required=True)
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--T", type=int, default=64)
    ap.add_argument("--total-batch", type=int, default=-1)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--final-frac", type=float, default=1.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--schedule", choices=["cosine", "linear", "constant"], default="cosine")
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--out", required=True)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    B, T = args.B, args.T
    D = args.total_batch if args.total_batch > 0 else B * T
    if D % (B * T) != 0:
        ap.error(f"--total-batch {D} is not a multiple of B*T = {B * T}")
    grad_accum = D // (B * T)
    if args.steps < 1 or B < 1 or T < 1 or args.warmup < 0:
        ap.error("B, T, steps must be >= 1 and warmup >= 0")
    dtype = torch.float32 if args.dtype == "float32" else torch.float64

    t0 = time.time()
    if (args.model is None) == (args.hf_llama is None):
        ap.error("one of --model and --hf-llama")
    if args.model:
        model = ref.read_checkpoint(args.model, dtype=dtype)
        V, maxT, shape = model.V, model.maxT, f"V={model.V} Vp={model.Vp} L={model.L} NH={model.NH} C={model.C}"
        opt = ref.make_adamw(model, args.lr, 0.9, 0.95, 1e-8, args.weight_decay)
    else:
        model = lref.read_hf(args.hf_llama).to(dtype)
        c = model.c
        V, maxT, shape = c["V"], c["maxT"], " ".join(f"{k}={c[k]}" for k in ("V", "L", "C", "NH", "NKV", "F"))
        decay = [getattr(model, n) for n in lref.PARAM_NAMES if n in lref.DECAY_NAMES]
        rest = [getattr(model, n) for n in lref.PARAM_NAMES if n not in lref.DECAY_NAMES]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                 {"params": rest, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    if T > maxT:
        ap.error(f"T={T} > maxT={maxT} of the model")
    params = model.ordered_params()
    loader = SequentialLoader(args.train, B, T)
    if not args.quiet:
        print(f"model {shape} maxT={maxT}; {len(loader.files)} shard(s); B={B} T={T} D={D} "
              f"grad_accum={grad_accum} steps={args.steps} lr={args.lr:g} "
              f"warmup={args.warmup} final_frac={args.final_frac:g} "
              f"wd={args.weight_decay:g} schedule={args.schedule}")

    lines = []
    for step in range(args.steps):
        opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for _ in range(grad_accum):
            x, y = loader.next_batch()
            if int(x.max()) >= V or int(y.max()) >= V:
                raise ValueError("token id >= V in the data")
            _, loss = model(x, y)
            (loss / grad_accum).backward()
            loss_sum += float(loss.detach())
        loss_mean = loss_sum / grad_accum
        norm = ref.global_grad_norm(params)
        torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
        lr = learning_rate(step, args.lr, args.warmup, args.steps, args.final_frac,
                           args.schedule)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        lines.append(f"{step} {loss_mean:.7f} {norm:.7f} {lr:.9g}")
        if not args.quiet:
            print(f"step {step:4d}/{args.steps} | loss {loss_mean:.6f} | norm {norm:.4f} "
                  f"| lr {lr:.3e}")

    d = os.path.dirname(args.out)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    if not args.quiet:
        print(f"wrote {args.out} ({args.steps} steps) in {time.time() - t0:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
