#!/usr/bin/python3
"""Writes llm.c data shards of synthetic, learnable text for tests.

The text is a random sparse Markov chain over the ids 0..V-2: every id has K successors
(drawn once from the seed) taken with fixed probabilities (default 0.55 0.25 0.12 0.08,
entropy 1.13 nats/token against ln V for a fresh model), so a small model's loss drops
visibly within a few dozen steps. Documents of random length (32..256 tokens) each begin
with the EOT id (default V-1, which appears nowhere else); the first token after EOT is
uniform over 0..V-2.

Usage:
  /usr/bin/python3 test/make_test_data.py --out DIR --vocab V --train-tokens N \
      --val-tokens M [--seed S] [--shards K] [--prefix markov] [--eot ID]

Writes DIR/PREFIX_train_000000.bin .. (K shards, N tokens in all, split evenly) and
DIR/PREFIX_val_000000.bin (M tokens; same chain, different random stream).
Shard format (little-endian): 256 x int32 header [0]=20240520 [1]=1 [2]=ntok, rest 0;
then ntok x uint16. File size = 1024 + 2*ntok.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

SHARD_MAGIC = 20240520
SHARD_VERSION = 1
PROBS = [0.55, 0.25, 0.12, 0.08]


def write_shard(path, tokens):
    tokens = np.asarray(tokens)
    assert tokens.ndim == 1 and tokens.size > 0
    assert tokens.min() >= 0 and tokens.max() < 65536
    header = np.zeros(256, dtype="<i4")
    header[0] = SHARD_MAGIC
    header[1] = SHARD_VERSION
    header[2] = tokens.size
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype("<u2").tobytes())
    os.replace(tmp, path)


def generate(n, succ, eot, nstates, rng, min_doc=32, max_doc=256):
    """n tokens of EOT-separated documents drawn from the chain."""
    K = succ.shape[1]
    choice = rng.choice(K, size=n, p=PROBS).tolist()
    starts = rng.integers(0, nstates, size=n // min_doc + 2).tolist()
    lengths = rng.integers(min_doc, max_doc + 1, size=n // min_doc + 2).tolist()
    table = succ.tolist()
    out = [0] * n
    i = 0
    d = 0
    while i < n:
        length = lengths[d]
        if eot >= 0:
            out[i] = eot
            i += 1
            length -= 1
        tok = starts[d]
        d += 1
        for _ in range(length):
            if i >= n:
                break
            out[i] = tok
            tok = table[tok][choice[i]]
            i += 1
    return np.array(out, dtype=np.int64)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--vocab", type=int, required=True, help="V: ids are < V")
    ap.add_argument("--train-tokens", type=int, required=True)
    ap.add_argument("--val-tokens", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--shards", type=int, default=1, help="number of train shards")
    ap.add_argument("--prefix", default="markov")
    ap.add_argument("--eot", type=int, default=None,
                    help="EOT id starting each document (default V-1; -1: no documents)")
    args = ap.parse_args(argv)

    V = args.vocab
    if not 3 <= V <= 65536:
        ap.error("--vocab must be in [3, 65536] (uint16 tokens)")
    if args.train_tokens < 1 or args.val_tokens < 1 or args.shards < 1:
        ap.error("token counts and --shards must be >= 1")
    if args.shards > args.train_tokens:
        ap.error("more shards than train tokens")
    eot = V - 1 if args.eot is None else args.eot
    if eot >= V:
        ap.error("--eot must be < V")
    nstates = V - 1 if eot == V - 1 else V  # the chain never emits the EOT id V-1
    K = len(PROBS)

    t0 = time.time()
    rng = np.random.default_rng(args.seed)
    # successors of each state: K distinct ids (fewer states than K: with repeats)
    succ = np.stack([rng.choice(nstates, size=K, replace=nstates < K) for _ in range(nstates)])
    if eot >= 0 and eot < nstates:
        succ[succ == eot] = (eot + 1) % nstates  # keep EOT out of the chain
    train_rng = np.random.default_rng([args.seed, 1])
    val_rng = np.random.default_rng([args.seed, 2])
    train = generate(args.train_tokens, succ, eot, nstates, train_rng)
    val = generate(args.val_tokens, succ, eot, nstates, val_rng)

    os.makedirs(args.out, exist_ok=True)
    bounds = np.linspace(0, train.size, args.shards + 1).astype(np.int64)
    paths = []
    for k in range(args.shards):
        p = os.path.join(args.out, f"{args.prefix}_train_{k:06d}.bin")
        write_shard(p, train[bounds[k]:bounds[k + 1]])
        paths.append(p)
    vp = os.path.join(args.out, f"{args.prefix}_val_000000.bin")
    write_shard(vp, val)
    entropy = -sum(p * math.log(p) for p in PROBS)
    print(f"wrote {len(paths)} train shard(s) ({args.train_tokens} tokens) "
          f"{paths[0]}{' ..' if len(paths) > 1 else ''} and {vp} ({args.val_tokens} tokens); "
          f"V={V} eot={eot} seed={args.seed}; chain entropy {entropy:.3f} nats/token "
          f"(ln V = {math.log(V):.3f}) in {time.time() - t0:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
