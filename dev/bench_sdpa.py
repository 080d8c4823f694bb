#!/usr/bin/env python3
"""bench_sdpa.py: PyTorch's own attention on the GPU at issue 23's sizes, the yardstick beside
which dev/cuda/attention's and attention_wgmma's --bench rates are judged on the same machine.

    python3 dev/bench_sdpa.py [--reps 10]

torch.nn.functional.scaled_dot_product_attention, causal, bf16, (B, NH, T, HS) contiguous, at
head size 64 (NH 12) and 128 (NH 16), T = 1024 and 4096, B*T = 16,384 tokens (the --bench
rows), under each backend PyTorch has here: FLASH_ATTENTION (FlashAttention-2's kernels),
CUDNN_ATTENTION, EFFICIENT_ATTENTION. Forward and backward (torch.autograd.grad of the three
inputs, so no gradient is accumulated into an old one) timed apart by CUDA events, the median
of --reps runs after 3 warm-ups. Rates count useful causal FLOPs as dev/cuda/attention.cu
does: forward 4 * B*NH*T(T+1)/2 * HS, backward 2.5 times that. One line a row:
    RESULT sdpa_<backend>_<forward|backward> B=..,T=..,NH=..,HS=.. <ms> ms <TFLOP/s> TFLOP/s
and "SKIP ..." where a backend refuses a shape. Needs PyTorch 2.3+ with CUDA (the device
machine's); anywhere else it says so and exits 0 (nothing to time).
"""
import argparse
import sys

SHAPES = [(16, 1024, 12, 64), (4, 4096, 12, 64), (16, 1024, 16, 128), (4, 4096, 16, 128)]


def useful_forward_flops(B, T, NH, HS):
    """dev/cuda/attention.cu's count: each query attends to t + 1 keys, 2 products of 2 HS FLOPs."""
    return 4.0 * (B * NH * T * (T + 1) / 2.0) * HS


def median_ms(torch, reps, fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10, help="timed runs a row (default 10)")
    a = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"bench_sdpa: no PyTorch with torch.nn.attention here ({e}): nothing timed")
        return 0
    if not torch.cuda.is_available():
        print("bench_sdpa: no CUDA device: nothing timed")
        return 0
    print(f"bench_sdpa: torch {torch.__version__}, {torch.cuda.get_device_name(0)}, cuDNN "
          f"{torch.backends.cudnn.version()}")
    backends = [(name, getattr(SDPBackend, name)) for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION",
                                                              "EFFICIENT_ATTENTION") if hasattr(SDPBackend, name)]
    gen = torch.Generator(device="cuda").manual_seed(7)
    for B, T, NH, HS in SHAPES:
        what = f"B={B},T={T},NH={NH},HS={HS}"
        flops = useful_forward_flops(B, T, NH, HS)
        q, k, v, dout = (torch.randn(B, NH, T, HS, device="cuda", dtype=torch.bfloat16, generator=gen)
                         for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)
        for name, backend in backends:
            label = "sdpa_" + name.split("_")[0].lower()
            try:
                with sdpa_kernel(backend):
                    fwd_ms = median_ms(torch, a.reps, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    bwd_ms = median_ms(torch, a.reps,
                                       lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
            except Exception as e:  # the backend cannot take this shape or this GPU: the next one still runs
                print(f"SKIP {label} {what}: {str(e).splitlines()[0][:160]}")
                continue
            print(f"RESULT {label}_forward {what} {fwd_ms:.4f} ms {flops / (fwd_ms * 1e-3) / 1e12:.1f} TFLOP/s")
            print(f"RESULT {label}_backward {what} {bwd_ms:.4f} ms {2.5 * flops / (bwd_ms * 1e-3) / 1e12:.1f} TFLOP/s")
            sys.stdout.flush()
            del out
        del q, k, v, dout
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
