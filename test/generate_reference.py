#!/usr/bin/python3
"""PyTorch references for ./generate (test/test_generate.sh), written apart from the C++.

Uses the GPT-2 of test/pytorch_reference.py (its forward, checkpoint reader and writer).

  checkpoint OUT --V --maxT --L --NH --C [--seed 3] [--scale 10] [--bf16]
      A random model whose weight matrices are `scale` times GPT-2's init (std 0.2 at 10):
      at GPT-2's own init the logits barely depend on the context and greedy decoding
      repeats one token; scaled up, it wanders over the vocabulary, which is what a token
      for token comparison needs. --bf16 writes version 5 (bf16, rounded to nearest even).
  greedy MODEL --prompt 1,2,3 --n N [--logits-out F] [--dtype float64]
      Greedy decoding by the full forward over the whole sequence at every step (no
      cache): prints the N generated ids on one line; F gets the logits of every step
      (V float32 each). On stderr: the smallest gap between the top two logits (a step
      whose gap is below the C++'s rounding error could go either way).
  filter LOGITS --V V --temperature T [--top-k K] [--top-p P] --against FILE
      For every row of LOGITS (V float32 each): the tokens sampling may pick and their
      probabilities, from the definitions (softmax of logits/T; the K most likely; then the
      smallest most-likely-first set whose probability reaches P, renormalized). FILE holds
      the C++'s answer (build/test_generate_kv --filter): lines "row id prob". Exits 1 on a
      different set or a probability off by more than 1e-6. Rows where a top-p boundary is
      within 1e-6 of P are ambiguous in any finite precision and skipped (counted).
  check-sampled LOGITS --V V --ids "1 2 3" --temperature T [--top-k K] [--top-p P]
      Each id (a run of ./generate -ol LOGITS) must be one the filter above allows at its step.
  compare A B --V V --tol X
      Max |A - B| over two logits files of equal shape; exits 1 above X.
"""
import argparse
import sys

import numpy as np

# torch (through pytorch_reference) is imported by the commands that run the model only:
# the filters and comparisons are numpy, and start in a fraction of the time


def torch_reference():
    import pytorch_reference
    return pytorch_reference


def cmd_checkpoint(a):
    import torch
    ref = torch_reference()
    model = ref.GPT(a.V, a.maxT, a.L, a.NH, a.C)
    model.init_random(a.seed)
    with torch.no_grad():
        for name in ("wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"):
            getattr(model, name).mul_(a.scale)
        model.wte[a.V:] = 0.0  # padded rows stay zero
    ref.write_checkpoint(model, a.out)
    if a.bf16:
        write_bf16(a.out)
    print(f"wrote {a.out}: V={a.V} maxT={a.maxT} L={a.L} NH={a.NH} C={a.C} seed={a.seed} scale={a.scale}"
          f"{' bf16' if a.bf16 else ''}")
    return 0


def write_bf16(path):
    """Rewrites an fp32 (version 3) checkpoint as version 5: the top 16 bits of each value,
    rounded to nearest even (no NaN here: the weights are finite)."""
    raw = open(path, "rb").read()
    header = np.frombuffer(raw[:1024], dtype="<i4").copy()
    bits = np.frombuffer(raw[1024:], dtype="<u4")
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    header[1] = torch_reference().MODEL_VERSION_BF16
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(rounded.astype("<u2").tobytes())


def cmd_greedy(a):
    import torch
    ref = torch_reference()
    dtype = torch.float64 if a.dtype == "float64" else torch.float32
    model = ref.read_checkpoint(a.model, dtype=dtype)
    ids = [int(x) for x in a.prompt.replace(",", " ").split()]
    if len(ids) + a.n > model.maxT:
        print(f"error: prompt {len(ids)} + {a.n} tokens > maxT {model.maxT}", file=sys.stderr)
        return 1
    out, rows, min_gap = [], [], float("inf")
    with torch.no_grad():
        for _ in range(a.n):
            logits, _ = model(torch.tensor([ids]))
            last = logits[0, -1]
            top2 = torch.topk(last, 2).values
            min_gap = min(min_gap, float(top2[0] - top2[1]))
            nxt = int(torch.argmax(last))  # the first of equal maxima, as the C++
            rows.append(last.to(torch.float32).numpy())
            out.append(nxt)
            ids.append(nxt)
    print(" ".join(str(x) for x in out))
    if a.logits_out:
        np.stack(rows).astype("<f4").tofile(a.logits_out)
    print(f"min top-2 logit gap {min_gap:.3e}", file=sys.stderr)
    return 0


def allowed(logits, temperature, top_k, top_p):
    """{id: prob} sampling may pick, and whether a top-p boundary is too close to call."""
    V = logits.shape[0]
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    order = sorted(range(V), key=lambda i: (-logits[i], i))  # most likely first, ties to the lower id
    if top_k > 0:
        order = order[:top_k]
    q = p[order] / p[order].sum()
    ambiguous = False
    if top_p < 1.0:
        cum = np.cumsum(q)
        keep = int(np.searchsorted(cum, top_p - 1e-12)) + 1  # the first prefix reaching top_p
        keep = min(keep, len(order))
        ambiguous = bool(np.any(np.abs(cum[:-1] - top_p) < 1e-6))
        order, q = order[:keep], q[:keep] / q[:keep].sum()
    return {i: float(x) for i, x in zip(order, q)}, ambiguous


def cmd_filter(a):
    logits = np.fromfile(a.logits, dtype="<f4").reshape(-1, a.V)
    got = {}
    with open(a.against) as f:
        for line in f:
            r, i, pr = line.split()
            got.setdefault(int(r), {})[int(i)] = float(pr)
    bad = skipped = checked = 0
    max_err = 0.0
    sizes = []
    for r in range(logits.shape[0]):
        want, ambiguous = allowed(logits[r], a.temperature, a.top_k, a.top_p)
        if ambiguous:
            skipped += 1
            continue
        checked += 1
        sizes.append(len(want))
        g = got.get(r, {})
        if set(g) != set(want):
            bad += 1
            if bad <= 3:
                print(f"row {r}: C++ set {sorted(g)[:10]} ({len(g)}), reference {sorted(want)[:10]} ({len(want)})")
            continue
        err = max(abs(g[i] - want[i]) for i in want)
        max_err = max(max_err, err)
        if err > 1e-6:
            bad += 1
    print(f"filter T={a.temperature} k={a.top_k} p={a.top_p}: {checked} rows checked, {skipped} ambiguous skipped, "
          f"{bad} differ; candidates per row {min(sizes, default=0)}..{max(sizes, default=0)}, max prob diff {max_err:.2e}")
    return 1 if bad or checked == 0 else 0


def cmd_check_sampled(a):
    logits = np.fromfile(a.logits, dtype="<f4").reshape(-1, a.V)
    ids = [int(x) for x in a.ids.split()]
    if len(ids) != logits.shape[0]:
        print(f"{len(ids)} ids but {logits.shape[0]} logits rows")
        return 1
    bad = [(r, i) for r, i in enumerate(ids) if i not in allowed(logits[r], a.temperature, a.top_k, a.top_p)[0]]
    sizes = [len(allowed(row, a.temperature, a.top_k, a.top_p)[0]) for row in logits]
    print(f"sampled T={a.temperature} k={a.top_k} p={a.top_p}: {len(ids)} tokens, {len(bad)} outside the allowed set "
          f"(sets of {min(sizes)}..{max(sizes)} tokens)")
    return 1 if bad else 0


def cmd_compare(a):
    x = np.fromfile(a.a, dtype="<f4").reshape(-1, a.V)
    y = np.fromfile(a.b, dtype="<f4").reshape(-1, a.V)
    if x.shape != y.shape:
        print(f"shapes differ: {x.shape} vs {y.shape}")
        return 1
    d = float(np.abs(x.astype(np.float64) - y).max())
    print(f"max_logit_diff {d:.3e} over {x.shape[0]} steps x {a.V} (max |logit| {float(np.abs(y).max()):.3g})")
    return 1 if not d <= a.tol else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("checkpoint")
    c.add_argument("out")
    for k in ("V", "maxT", "L", "NH", "C"):
        c.add_argument("--" + k, type=int, required=True)
    c.add_argument("--seed", type=int, default=3)
    c.add_argument("--scale", type=float, default=10.0)
    c.add_argument("--bf16", action="store_true")
    g = sub.add_parser("greedy")
    g.add_argument("model")
    g.add_argument("--prompt", required=True)
    g.add_argument("--n", type=int, required=True)
    g.add_argument("--logits-out")
    g.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    f = sub.add_parser("filter")
    f.add_argument("logits")
    f.add_argument("--V", type=int, required=True)
    f.add_argument("--temperature", type=float, required=True)
    f.add_argument("--top-k", type=int, default=0)
    f.add_argument("--top-p", type=float, default=1.0)
    f.add_argument("--against", required=True)
    s = sub.add_parser("check-sampled")
    s.add_argument("logits")
    s.add_argument("--V", type=int, required=True)
    s.add_argument("--ids", required=True)
    s.add_argument("--temperature", type=float, required=True)
    s.add_argument("--top-k", type=int, default=0)
    s.add_argument("--top-p", type=float, default=1.0)
    m = sub.add_parser("compare")
    m.add_argument("a")
    m.add_argument("b")
    m.add_argument("--V", type=int, required=True)
    m.add_argument("--tol", type=float, required=True)
    a = ap.parse_args()
    return {"checkpoint": cmd_checkpoint, "greedy": cmd_greedy, "filter": cmd_filter,
            "check-sampled": cmd_check_sampled, "compare": cmd_compare}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
