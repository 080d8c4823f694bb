#!/usr/bin/env python3
"""predict_scaling.py: step time and scaling efficiency of data-parallel GPT training on
N GPUs, from one GPU's measured speed and a bandwidth/latency model of NCCL's rings.
Plain python3, standard library only. The model and its assumptions: dev/SCALING.md.

  python3 scripts/predict_scaling.py                  # the d12/d48 table (ASSUMED 1-GPU speed)
  python3 scripts/predict_scaling.py --step-ms 120 --params 124475904 --batch 64 --seq 1024
  python3 scripts/predict_scaling.py --tokens-per-s 45000 --params 1557686400 --batch 8 --zero 0

Weak scaling: every GPU keeps its micro-batch (B x T tokens, `accum` micro-steps per
step), so the compute of a step is the same on 1 GPU and on N; what N adds is the
communication of the gradients (and, with ZeRO >= 1, of the updated parameters).
"""
import argparse

H100_BF16_PEAK = 989e12  # dense bf16 FLOP/s of an H100 SXM (NVIDIA's datasheet, no sparsity)

# The two models of the default table: (name, parameters, layers L, channels C, micro-batch B).
# Parameter counts as gptrain (and llm.c) allocate them: vocabulary padded to 50304, maxT 1024.
TABLE_MODELS = [
    ("d12", 124_475_904, 12, 768, 64),
    ("d48", 1_557_686_400, 48, 1600, 8),
]


def flops_per_token(params, layers, channels, seq):
    """llm.c's convention (DESIGN.md): 6 FLOPs per parameter per token for forward + backward,
    plus 6*L*C*T for the attention scores and their weighting."""
    return 6 * params + 6 * layers * channels * seq


def ring_seconds(nbytes, n, a):
    """One reduce-scatter or all-gather of a buffer of `nbytes` over n GPUs.

    A ring sends (n-1)/n of the buffer out of every GPU. Its speed is `bus bandwidth`, the
    figure nccl-tests prints as busbw for these two collectives.
      ring (default): NCCL's flat ring over all n GPUs, one ring per NIC (rail). Within a
        node the data moves over NVLink; across nodes each GPU's share leaves through all
        G NICs of its node together, so the ring runs at the slower of NVLink and G x NIC.
        Latency: n-1 hops, each costs `latency_us`, paid once per bucket (--buckets: a
        buffer sent as L per-layer collectives pays it L times).
      hierarchical: reduce-scatter inside the node over NVLink, then across the nodes over
        the GPU's own NIC on 1/G of the buffer, one phase after the other (no pipelining):
        a pessimistic bound for the bandwidth, an optimistic one for latency (G+nodes-2 hops).
    """
    if n <= 1:
        return 0.0
    alpha = a.latency_us * 1e-6 * a.buckets
    g = min(n, a.gpus_per_node)
    nodes = (n + g - 1) // g
    intra, inter = a.intra_gbs * 1e9, a.inter_gbs * 1e9
    if nodes == 1:
        return (n - 1) / n * nbytes / intra + (n - 1) * alpha
    if a.hierarchical:
        t_intra = (g - 1) / g * nbytes / intra
        t_inter = (nodes - 1) / nodes * (nbytes / g) / inter
        return t_intra + t_inter + (g - 1 + nodes - 1) * alpha
    return (n - 1) / n * nbytes / min(intra, g * inter) + (n - 1) * alpha


def comm_per_step(params, n, a):
    """(bytes each GPU sends, seconds of gradient collectives, seconds of parameter collectives)
    for one optimizer step; the same sums as llmc/zero.h's zero_comm_bytes_per_step."""
    if n <= 1:
        return 0.0, 0.0, 0.0
    grads, weights = params * a.grad_bytes, params * a.param_bytes
    ring = (n - 1) / n
    if a.zero == 0:  # all-reduce = reduce-scatter + all-gather of the gradients, every rank updates all
        return 2 * ring * grads, 2 * ring_seconds(grads, n, a), 0.0
    rounds = a.accum if a.zero == 2 else 1  # ZeRO-2 reduce-scatters after every micro-step
    sent = rounds * ring * grads + ring * weights
    return sent, rounds * ring_seconds(grads, n, a), ring_seconds(weights, n, a)


def predict(params, step1_s, n, a):
    """One row of the table for n GPUs, given the 1-GPU step time step1_s (seconds)."""
    sent, t_grad, t_param = comm_per_step(params, n, a)
    t_comm = t_grad + t_param
    # Gradient collectives are issued during the backward pass (bucket by bucket) and can
    # hide behind it: backward is 2/3 of the compute, and only the micro-steps that
    # communicate (the last one; every one under ZeRO-2) can hide it. The parameter
    # all-gather follows the optimizer and waits in full.
    rounds = a.accum if a.zero == 2 else 1
    backward = 2 / 3 * step1_s * rounds / a.accum
    hidden = min(a.overlap * t_grad, backward)
    step_plain, step_overlap = step1_s + t_comm, step1_s + t_comm - hidden
    tokens = n * a.batch * a.seq * a.accum
    return {
        "n": n,
        "net": "-" if n == 1 else ("NVLink" if n <= a.gpus_per_node else "NVLink+IB"),
        "mb": sent / 1e6,
        "comm_ms": t_comm * 1e3,
        "plain_ms": step_plain * 1e3,
        "overlap_ms": step_overlap * 1e3,
        "tok_s": tokens / step_overlap,
        "eff_plain": step1_s / step_plain,
        "eff_overlap": step1_s / step_overlap,
    }


def print_table(params, step1_s, a, title):
    print(title)
    print(f"  ZeRO {a.zero}, grads {a.grad_bytes} B/value, params {a.param_bytes} B/value, "
          f"per GPU B={a.batch} T={a.seq} x{a.accum} micro-steps, overlap {a.overlap:g}, {a.buckets} bucket(s), "
          f"{'hierarchical' if a.hierarchical else 'ring'} model")
    print(f"  {'GPUs':>5} {'network':<10} {'comm MB/GPU':>11} {'comm ms':>8} {'step ms':>8} "
          f"{'step ms':>8} {'tokens/s':>11} {'eff':>6} {'eff':>6}")
    print(f"  {'':>5} {'':<10} {'per step':>11} {'':>8} {'no ovl':>8} {'overlap':>8} "
          f"{'(overlap)':>11} {'no ovl':>6} {'ovl':>6}")
    for n in a.gpus:
        r = predict(params, step1_s, n, a)
        print(f"  {r['n']:>5} {r['net']:<10} {r['mb']:>11.0f} {r['comm_ms']:>8.2f} {r['plain_ms']:>8.1f} "
              f"{r['overlap_ms']:>8.1f} {r['tok_s']:>11,.0f} {r['eff_plain']:>6.1%} {r['eff_overlap']:>6.1%}")
    print()


def default_table(a):
    print("ASSUMED single-GPU speed (no GPU measurement yet): "
          f"{a.mfu:.0%} MFU of {a.peak_tflops:g} TFLOP/s (H100 SXM bf16 dense), "
          "flops/token = 6N + 6LCT\n"
          f"links: NVLink busbw {a.intra_gbs:g} GB/s per GPU, InfiniBand {a.inter_gbs:g} GB/s per GPU "
          f"({a.gpus_per_node} NICs per node), {a.latency_us:g} us per ring hop\n")
    for name, params, layers, channels, batch in TABLE_MODELS:
        a.batch = batch
        tok_s = a.mfu * a.peak_tflops * 1e12 / flops_per_token(params, layers, channels, a.seq)
        step1_s = batch * a.seq * a.accum / tok_s
        print_table(params, step1_s, a,
                    f"{name}: {params:,} params, L={layers} C={channels}; ASSUMED 1 GPU: "
                    f"{step1_s * 1e3:.1f} ms/step, {tok_s:,.0f} tokens/s")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("single-GPU speed (one of; none: the default d12/d48 table)")
    g.add_argument("--step-ms", type=float, help="measured ms per optimizer step on 1 GPU")
    g.add_argument("--tokens-per-s", type=float, help="measured tokens/s on 1 GPU")
    g.add_argument("--mfu", type=float, default=0.45, help="model FLOP utilization (with --layers --channels)")
    g.add_argument("--table", action="store_true", help="print the d12/d48 table (the default)")
    m = p.add_argument_group("model and batch")
    m.add_argument("--params", type=int, help="parameter count (train_gpt_* prints it)")
    m.add_argument("--layers", type=int, help="L, for --mfu")
    m.add_argument("--channels", type=int, help="C, for --mfu")
    m.add_argument("--batch", type=int, default=64, help="micro-batch B per GPU (-b)")
    m.add_argument("--seq", type=int, default=1024, help="sequence length T (-t)")
    m.add_argument("--accum", type=int, default=1, help="micro-steps per optimizer step")
    m.add_argument("--zero", type=int, default=1, choices=(0, 1, 2), help="ZeRO stage (-z)")
    m.add_argument("--grad-bytes", type=int, default=2, help="bytes per communicated gradient value (bf16: 2)")
    m.add_argument("--param-bytes", type=int, default=2, help="bytes per all-gathered parameter value (bf16: 2)")
    n = p.add_argument_group("machine")
    n.add_argument("--gpus", default="1,8,64,512", help="GPU counts, comma-separated")
    n.add_argument("--gpus-per-node", type=int, default=8)
    n.add_argument("--intra-gbs", type=float, default=370, help="NVLink bus bandwidth per GPU, GB/s")
    n.add_argument("--inter-gbs", type=float, default=46, help="network bandwidth per GPU (its NIC), GB/s")
    n.add_argument("--latency-us", type=float, default=5, help="latency of one ring hop, microseconds")
    n.add_argument("--buckets", type=int, default=1, help="collectives each exchange is cut into (latency each)")
    n.add_argument("--overlap", type=float, default=0.8, help="fraction of gradient traffic hidden by backward")
    n.add_argument("--hierarchical", action="store_true", help="intra-node then inter-node phases (see ring_seconds)")
    n.add_argument("--peak-tflops", type=float, default=H100_BF16_PEAK / 1e12, help="GPU peak, for --mfu")
    a = p.parse_args()
    a.gpus = [int(x) for x in a.gpus.split(",")]
    if not 0 <= a.overlap <= 1:
        p.error("--overlap must be in [0, 1]")
    if min(a.gpus) < 1 or min(a.batch, a.seq, a.accum, a.gpus_per_node, a.buckets) < 1:
        p.error("GPU counts, --batch, --seq, --accum, --gpus-per-node and --buckets must be positive")
    return p, a


def main():
    p, a = parse_args()
    custom = a.step_ms is not None or a.tokens_per_s is not None or a.params is not None
    if a.table or not custom:
        default_table(a)
        return
    if a.params is None:
        p.error("--params is needed with --step-ms / --tokens-per-s / --mfu")
    tokens = a.batch * a.seq * a.accum  # per GPU per step
    if a.step_ms is not None:
        step1_s, source = a.step_ms / 1e3, "measured step time"
    elif a.tokens_per_s is not None:
        step1_s, source = tokens / a.tokens_per_s, "measured tokens/s"
    else:
        if a.layers is None or a.channels is None:
            p.error("--mfu needs --layers and --channels (or give --step-ms / --tokens-per-s)")
        tok_s = a.mfu * a.peak_tflops * 1e12 / flops_per_token(a.params, a.layers, a.channels, a.seq)
        step1_s, source = tokens / tok_s, f"ASSUMED {a.mfu:.0%} MFU"
    print_table(a.params, step1_s, a,
                f"{a.params:,} params; 1 GPU ({source}): {step1_s * 1e3:.1f} ms/step, "
                f"{tokens / step1_s:,.0f} tokens/s; NVLink {a.intra_gbs:g} GB/s, "
                f"IB {a.inter_gbs:g} GB/s per GPU, {a.latency_us:g} us per hop")


if __name__ == "__main__":
    main()
