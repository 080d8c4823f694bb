#!/usr/bin/env python3
"""fp8_predict.py: PREDICTED train_gpt_fp8 step times beside train_gpt_bf16's, on an H200.

    python3 dev/fp8_predict.py

Not a measurement: a roofline of what FP8 changes in a step, added to (or taken from) the bf16
step that was measured. bf16 was measured on the H200 for every row (d12, d48, the 1.2B Llama
and four 8B-shaped Llama layers: dev/results/2026-11-27_gpu_h200.md, commit 3dd8cd1); the
prediction is that step, less the time the blocks' linear GEMMs save, plus the passes FP8 adds.
(A row given no measurement gets a bf16 roofline: its GEMMs, its attention at the rates measured,
and the memory-bound rest per token-layer as the measured 1.2B Llama's.) train_gpt_fp8 itself
stopped on that H200 before its first step (the scale pointers' alignment, fixed since): no fp8
step has been measured.

What FP8 changes (llmc/cuda/fp8_linear.cuh):
  - each linear's three GEMMs: forward at twice the bf16 rate (FP8's dense peak is twice bf16's
    on Hopper, fast accumulation on), the two backward ones at FP8_BACKWARD_GAIN times (no fast
    accumulation there: cuBLASLt promotes the partial sums to fp32, which costs issue slots);
  - the casts: forward, the input (read bf16, write fp8: 3 bytes a value) and the weight; backward,
    the input again transposed (3 bytes), the output gradient both ways (read 2, write 2 x 1) and
    the weight transposed; every micro-step;
  - GPT-2's GELU leaves cuBLASLt's epilogues (forward and -ge 2's backward) for its own kernels:
    forward reads the (BT, 4C) pre-activation once more (the epilogue wrote both tensors anyway),
    backward reads the GEMM's output and writes it again (the epilogue read the pre-activation
    too): 6 bytes a value more.
Rates: the bf16 GEMMs at 736 TFLOP/s (the d12 step's measured 48.6 TFLOP in 66 ms, Nsight Compute),
memory-bound passes at 3.0 TB/s (three quarters of the 4 TB/s copy ceiling measured there).
Standard library only.
"""

BF16_GEMM = 736e12      # FLOP/s, measured (the d12 step's matmuls)
BACKWARD_GAIN = 1.6     # FP8's backward GEMMs over bf16's, without fast accumulation (an assumption)
BANDWIDTH = 3.0e12      # bytes/s of a memory-bound pass
ATT_FWD, ATT_BWD = 200e12, 130e12  # the tensor-core attention at head size 128 (dev/cuda/attention --bench)


def gpt2(name, L, C, B, T=1024, V=50304, measured_ms=None):
    return dict(name=name, family="gpt2", L=L, C=C, F=4 * C, qkv=3 * C, att=C, B=B, T=T, V=V, ms=measured_ms)


def llama(name, L, C, NH, NKV, F, B, T=1024, V=50304, measured_ms=None):
    hs = C // NH
    return dict(name=name, family="llama", L=L, C=C, F=F, qkv=(NH + 2 * NKV) * hs, att=NH * hs, B=B, T=T, V=V,
                ms=measured_ms)


def linears(m):
    """(in, out) of each of a layer's four linears."""
    C, F = m["C"], m["F"]
    if m["family"] == "gpt2":
        return [(C, m["qkv"]), (m["att"], C), (C, F), (F, C)]
    return [(C, m["qkv"]), (m["att"], C), (C, 2 * F), (F, C)]


def parts(m):
    """seconds of one step: the linears' GEMMs in bf16 and in fp8, the casts, the GELU passes."""
    N = m["B"] * m["T"]
    lin_flops = sum(2 * N * i * o for i, o in linears(m)) * m["L"]  # one GEMM's
    gemm_bf16 = 3 * lin_flops / BF16_GEMM
    gemm_fp8 = lin_flops / (2 * BF16_GEMM) + 2 * lin_flops / (BACKWARD_GAIN * BF16_GEMM)
    acts = sum(N * i * 3 * 2 + N * o * 4 for i, o in linears(m))  # inputs twice, gradients once
    weights = sum(i * o * 3 * 2 for i, o in linears(m))
    cast = (acts + weights) * m["L"] / BANDWIDTH
    gelu = N * m["F"] * 6 * m["L"] / BANDWIDTH if m["family"] == "gpt2" else 0.0
    return gemm_bf16, gemm_fp8, cast, gelu


def bf16_roofline(m, rest_per_unit):
    """a bf16 step from its parts: every GEMM, the attention, the memory-bound rest"""
    N, L, C = m["B"] * m["T"], m["L"], m["C"]
    gemm = 3 * (sum(2 * N * i * o for i, o in linears(m)) * L + 2 * N * C * m["V"]) / BF16_GEMM
    att_flops = 2 * 2 * N * m["T"] * m["att"] / 2 * L  # QK^T and PV, causal half
    att = att_flops / ATT_FWD + 2.5 * att_flops / ATT_BWD
    return gemm + att + rest_per_unit * N * L * (C + m["F"])


def main():
    rows = [gpt2("d12", 12, 768, 64, measured_ms=123.0), gpt2("d48", 48, 1600, 8, measured_ms=182.0),
            llama("llama-1.2b", 16, 2048, 16, 8, 8192, 8, measured_ms=116.1),
            llama("llama-8b-l4", 4, 4096, 32, 8, 14336, 4, measured_ms=53.2)]
    ref = rows[2]  # the measured Llama: what its step holds beyond GEMMs and attention, per token-layer-width
    rest = (ref["ms"] / 1e3 - bf16_roofline(ref, 0.0)) / (ref["B"] * ref["T"] * ref["L"] * (ref["C"] + ref["F"]))
    print("PREDICTED (dev/fp8_predict.py): H200, T=1024, delayed scaling; bf16 measured where it says so")
    print(f"{'model':<13} {'B':>3} {'bf16 ms':>16} {'linear GEMMs':>13} {'fp8 GEMMs':>10} {'casts':>7} "
          f"{'GELU':>6} {'fp8 ms':>8} {'speed-up':>9}")
    for m in rows:
        gemm_bf16, gemm_fp8, cast, gelu = parts(m)
        bf16 = m["ms"] / 1e3 if m["ms"] else bf16_roofline(m, rest)
        fp8 = bf16 - gemm_bf16 + gemm_fp8 + cast + gelu
        how = "measured" if m["ms"] else "roofline"
        print(f"{m['name']:<13} {m['B']:>3} {bf16 * 1e3:>7.1f} {how:>8} {gemm_bf16 * 1e3:>13.1f} "
              f"{gemm_fp8 * 1e3:>10.1f} {cast * 1e3:>7.1f} {gelu * 1e3:>6.1f} {fp8 * 1e3:>8.1f} {bf16 / fp8:>8.2f}x")


if __name__ == "__main__":
    main()
