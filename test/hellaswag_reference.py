#!/usr/bin/python3
"""HellaSwag reference for gptrain's -h 1: llm.c's eval file written and read here in
Python (independently of llmc/hellaswag.h), and the model's choices computed by the
PyTorch GPT-2 of test/pytorch_reference.py, one example at a time, no batching or padding.

  make   --model M.bin --out DIR [--examples N] [--seed S] [--maxT T]
         writes DIR/{best,second,random,mixed}.bin and prints, as JSON, how many examples of
         each the model gets right: best.bin labels the lowest-loss completion (all right),
         second.bin the runner-up (none right), random.bin and mixed.bin random labels
         (mixed.bin has 1 to 5 completions per example instead of llm.c's 4)
  corrupt --src DIR/random.bin --out DIR --V V
         writes damaged copies for the error tests (see CORRUPTIONS)
  dump   FILE.bin    prints the file as JSON [{"label", "ctx", "endings"}] (for the tokenizer test)

File (llm.c's dev/data/hellaswag.py layout): 256 int32 header [20240522, 1, examples, longest
example in bytes]; per example uint16 words: 65535, example bytes, index, label, completions,
context length, context, then per completion its length and tokens.
"""
import argparse
import json
import os
import random
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_reference import read_checkpoint  # noqa: E402


def encode_example(index, label, ctx, endings):
    words = [label, len(endings), len(ctx)] + list(ctx)
    for e in endings:
        words += [len(e)] + list(e)
    words = [65535, 2 * (len(words) + 3), index] + words
    return struct.pack(f"<{len(words)}H", *words)


def write_file(path, examples):
    """examples: list of (label, ctx, endings)."""
    blobs = [encode_example(i, lab, ctx, ends) for i, (lab, ctx, ends) in enumerate(examples)]
    header = [20240522, 1, len(blobs), max(len(b) for b in blobs)] + [0] * 252
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        for b in blobs:
            f.write(b)


def read_file(path):
    data = open(path, "rb").read()
    header = struct.unpack("<256i", data[:1024])
    assert header[0] == 20240522 and header[1] == 1, f"{path}: bad header"
    w = np.frombuffer(data[1024:], dtype="<u2")
    out, at = [], 0
    for i in range(header[2]):
        assert w[at] == 65535 and w[at + 2] == i, f"{path}: example {i} malformed"
        n = int(w[at + 1]) // 2
        x = w[at + 3: at + n].tolist()
        label, ncomp, nctx = x[0], x[1], x[2]
        ctx, j, endings = x[3: 3 + nctx], 3 + nctx, []
        for _ in range(ncomp):
            endings.append(x[j + 1: j + 1 + x[j]])
            j += 1 + x[j]
        assert j == len(x), f"{path}: example {i} has leftover words"
        out.append({"label": label, "ctx": ctx, "endings": endings})
        at += n
    assert at == len(w), f"{path}: trailing words"
    return out


def completion_scores(model, ctx, endings):
    """Mean cross-entropy of each ending's tokens given ctx, in float64."""
    scores = []
    with torch.no_grad():
        for e in endings:
            seq = torch.tensor([ctx + e], dtype=torch.long)
            logits, _ = model(seq)
            # position len(ctx)-1+i predicts ending token i
            pred = logits[0, len(ctx) - 1: len(ctx) - 1 + len(e)]
            scores.append(F.cross_entropy(pred, torch.tensor(e), reduction="mean").item())
    return scores


def cmd_make(args):
    model = read_checkpoint(args.model, dtype=torch.float64)
    V, maxT = model.V, min(model.maxT, args.maxT)
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)

    def make_examples(count, ncomp_range):
        made = []
        while len(made) < count:
            ctx = [rng.randrange(V) for _ in range(rng.randint(1, maxT // 2))]
            k = rng.randint(*ncomp_range)
            endings = [[rng.randrange(V) for _ in range(rng.randint(1, maxT - len(ctx)))] for _ in range(k)]
            s = completion_scores(model, ctx, endings)
            order = sorted(range(k), key=lambda c: s[c])
            # float32 in the trainer: keep only examples whose best and runner-up differ clearly
            if k > 1 and s[order[1]] - s[order[0]] < 1e-4 * max(1.0, abs(s[order[0]])):
                continue
            made.append((order, ctx, endings))
        return made

    four = make_examples(args.examples, (4, 4))
    mixed = make_examples(args.examples, (1, 5))
    labels = [rng.randrange(len(e)) for _, _, e in four]
    mixed_labels = [rng.randrange(len(e)) for _, _, e in mixed]
    write_file(f"{args.out}/best.bin", [(o[0], c, e) for o, c, e in four])
    write_file(f"{args.out}/second.bin", [(o[1], c, e) for o, c, e in four])
    write_file(f"{args.out}/random.bin", [(lab, c, e) for lab, (o, c, e) in zip(labels, four)])
    write_file(f"{args.out}/mixed.bin", [(lab, c, e) for lab, (o, c, e) in zip(mixed_labels, mixed)])
    longest = max(len(c) + max(len(x) for x in e) for _, c, e in four + mixed)
    print(json.dumps({
        "examples": args.examples,
        "best": args.examples, "second": 0,
        "random": sum(lab == o[0] for lab, (o, _, _) in zip(labels, four)),
        "mixed": sum(lab == o[0] for lab, (o, _, _) in zip(mixed_labels, mixed)),
        "longest_row": longest,
    }))


# name -> (what the trainer's error must say, how the bytes are damaged)
CORRUPTIONS = {
    "magic": ("bad magic", lambda d, V: struct.pack("<i", 20240520) + d[4:]),
    "version": ("unsupported version", lambda d, V: d[:4] + struct.pack("<i", 2) + d[8:]),
    "truncated": ("truncated", lambda d, V: d[:len(d) - 10]),
    "count": ("examples, impossible", lambda d, V: d[:8] + struct.pack("<i", 1 << 30) + d[12:]),
    "trailing": ("after the last", lambda d, V: d + struct.pack("<4H", 65535, 8, 99, 0)),
    "marker": ("65535 marker", lambda d, V: d[:1024] + struct.pack("<H", 7) + d[1026:]),
    "label": ("label", lambda d, V: d[:1024 + 6] + struct.pack("<H", 9) + d[1024 + 8:]),
    "token": ("outside the model's vocab", lambda d, V: d[:1024 + 12] + struct.pack("<H", V) + d[1024 + 14:]),
    "bytes": ("claims", lambda d, V: d[:1024 + 2] + struct.pack("<H", 65533) + d[1024 + 4:]),
}


def cmd_corrupt(args):
    data = open(args.src, "rb").read()
    for name, (_, damage) in CORRUPTIONS.items():
        with open(f"{args.out}/bad_{name}.bin", "wb") as f:
            f.write(damage(data, args.V))
    print(" ".join(f"{name}={msg}" for name, (msg, _) in CORRUPTIONS.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--model", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--examples", type=int, default=24)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--maxT", type=int, default=48)
    c = sub.add_parser("corrupt")
    c.add_argument("--src", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--V", type=int, required=True)
    d = sub.add_parser("dump")
    d.add_argument("file")
    args = ap.parse_args()
    if args.cmd == "make":
        cmd_make(args)
    elif args.cmd == "corrupt":
        cmd_corrupt(args)
    else:
        print(json.dumps(read_file(args.file)))


if __name__ == "__main__":
    main()
