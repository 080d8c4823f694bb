#!/usr/bin/env python3
"""fp8_predict.py: PREDICTED train_gpt_fp8 step times beside train_gpt_bf16's, on an H200.

    python3 dev/fp8_predict.py

Not a measurement: a roofline of what FP8 changes in a step, added to (or taken from) the bf16
step that was measured. bf16 was measured on the H200 for every row (d12, d48, the 1.2B Llama
and four 8B-shaped Llama layers: dev/results/2026-11-28_gpu_h200.md, commit 0df83d1); the
prediction is that step, less the time the blocks' linear GEMMs save, plus the passes FP8 adds.
(A row given no measurement gets a bf16 roofline: its GEMMs, its attention at the rates measured,
and the memory-bound rest per token-layer as the measured 1.2B Llama's.) Of the fp8 steps only
d48's has been measured (the same run: 174.1 ms against bf16's 185.3): the table prints it beside
the prediction, the one check of the model at the scale of a step. A second table takes the
knobs no GPU has timed (-fp8fa 2, -fp8kt 1, -fp8kw 1: knobs() below) off the fp8 steps measured
since (d48 and four 8B-shaped layers, the casts fused) or, where none was, off the prediction.

What FP8 changes (llmc/cuda/fp8_linear.cuh):
  - each linear's three GEMMs, at the rates the H200 measured (2026-11-28, dev/cuda fp8 and
    fp8_linear --bench), which grow with the GEMM: at d48's FC (168 GFLOP a GEMM) the forward
    (fast accumulation) ran 1.55x bf16's and the two backward ones (no fast accumulation) 1.23x;
    at an 8B Llama's down projection (962 GFLOP) 1.89x and 1.53x; bf16's own rate 733 and 801
    TFLOP/s there. Between and beyond the two, each is interpolated in log2(FLOPs) and held at
    the nearer end (so the small GEMMs of d12 get d48's gains: optimistic for them);
  - the casts: forward, the input (read bf16, write fp8: 3 bytes a value) and the weight; backward,
    the input again transposed (3 bytes), the output gradient both ways (read 2, write 2 x 1) and
    the weight transposed; every micro-step; at 3.25 TB/s, fp8_cast's measured rate (the backward
    GEMMs' rates above are what the layer's time leaves after the casts at that rate);
  - the MLP's activation (since 2026-11-28) is made in the casts that read it and taken back in the
    cast of the gradient before it, with no pass and no bf16 tensor of its own (the runs are the
    same to the bit). Against bf16 at -r 0 (what the planner picks at these sizes), bytes a value
    of the activation's (N, F): GPT-2 -2 (bf16's GELU_AUX epilogue writes the GELU's output beside
    the pre-activation, fp8's FC GEMM only the pre-activation, which fcproj's casts read where they
    read the output; the backward reads the pre-activation in fc's gradient cast as bf16's DGELU
    epilogue does); Llama -8: forward -4 (no swiglu_forward: 6 read and written, against the casts
    reading gate and up, 4, where the model counts 2), backward -4 (the inp^T cast reads gate and
    up, +2; no swiglu_backward, 10 read and written, against gate/up's gradient cast reading gate
    twice, up and the gradient, 8, where the model counts 4). When d48 was measured fp8's GELU was
    two passes of its own, 6 bytes a value more than bf16's epilogues. And bf16's own
    swiglu_backward lost its memset and its read of the gradient the same day (8 bytes a value):
    the "bf16 now" column takes those from the measured step, and the speed-up is against it;
  - the bias gradients (GPT-2) come from the cast-transposes of the output gradients, from the
    same read, as bf16's from the BGRADB epilogue (they were a pass of 2 bytes a value over each
    output gradient when d48 was measured, which this model never counted);
  - every cast-transpose at fp8_cast's rate: the tiled kernel of 2026-11-28 moves 16 bytes a load
    and a store as fp8_cast does (the 32x32 one that d48 was measured with, a byte a store, was
    never timed alone; dev/cuda/fp8 --bench times both).
The 2026-11-27 version assumed fp8 GEMMs at 2x (forward) and 1.6x (backward) bf16's everywhere and
predicted d48 at 1.10x; the GPU gave 1.064x. This one, from the kernels' measured rates, gives
1.01x: 6% pessimistic where that one was 5% optimistic (a GEMM in a step is not the GEMM alone:
bf16's FC GEMMs carry cuBLASLt's GELU epilogues, which cost them time, NOTES.md (c1), and which
fp8 moves to its own kernels). Read the Llama rows as within about 6% either way.
Standard library only.
"""

import math

# (FLOPs of one GEMM, bf16 FLOP/s, fp8 forward gain, fp8 backward gain), measured on the H200
# (2026-11-28): d48's FC and an 8B Llama's down projection, 8192 tokens
CALIBRATION = [(2 * 8192 * 1600 * 6400, 733e12, 1137 / 733, 1.23),
               (2 * 8192 * 14336 * 4096, 801e12, 1513 / 801, 1.53)]
CAST_BANDWIDTH = 3.25e12  # bytes/s of fp8_cast (measured)
BANDWIDTH = 3.0e12        # bytes/s of another memory-bound pass (GELU)
BF16_GEMM = 736e12        # FLOP/s of the bf16 roofline's GEMMs (the d12 step's matmuls, measured)
ATT_FWD, ATT_BWD = 200e12, 130e12  # the tensor-core attention at head size 128 (dev/cuda/attention --bench)


def rates(flops):
    """(bf16 FLOP/s, fp8 forward gain, fp8 backward gain) of one GEMM of that many FLOPs"""
    (f0, *r0), (f1, *r1) = CALIBRATION
    x = min(1.0, max(0.0, (math.log2(flops) - math.log2(f0)) / (math.log2(f1) - math.log2(f0))))
    return tuple(a + (b - a) * x for a, b in zip(r0, r1))


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
    """seconds of one step: the linears' GEMMs in bf16 and in fp8, the casts, the activations'."""
    N = m["B"] * m["T"]
    gemm_bf16 = gemm_fp8 = 0.0
    for i, o in linears(m):
        flops = 2 * N * i * o  # one GEMM's
        rate, fwd_gain, bwd_gain = rates(flops)
        gemm_bf16 += 3 * flops / rate * m["L"]
        gemm_fp8 += (flops / (fwd_gain * rate) + 2 * flops / (bwd_gain * rate)) * m["L"]
    acts = sum(N * i * 3 * 2 + N * o * 4 for i, o in linears(m))  # inputs twice, gradients once
    weights = sum(i * o * 3 * 2 for i, o in linears(m))
    cast = (acts + weights) * m["L"] / CAST_BANDWIDTH
    # the activations' passes fp8 adds (+) or removes (-) against today's bf16, bytes a value of (N, F)
    act_bytes = -2 if m["family"] == "gpt2" else -8
    act = N * m["F"] * act_bytes * m["L"] / BANDWIDTH
    return gemm_bf16, gemm_fp8, cast, act


def knobs(m, micro_steps=1):
    """seconds each of train_gpt_fp8's knobs takes off a step (negative: saved), as a dict:
    -fp8fa 2, the backward's GEMMs at the forward's gain (fast accumulation, if an E4M3 x E5M2
    product runs as the forward's E4M3 x E4M3 does with it); -fp8kt 1, each input cast once (its
    forward cast writes the transposed codes too, a byte more, where the backward read 2 bytes and
    wrote 1 again); -fp8kw 1, each weight cast once a step, W and W^T from one read (4 bytes a
    value) where each micro-step cast it twice (6)"""
    N, L = m["B"] * m["T"], m["L"]
    fa = 0.0
    for i, o in linears(m):
        flops = 2 * N * i * o
        rate, fwd_gain, bwd_gain = rates(flops)
        fa += 2 * flops / rate * (1 / fwd_gain - 1 / bwd_gain) * L
    inputs = sum(i for i, _ in linears(m)) * N * L
    weights = sum(i * o for i, o in linears(m)) * L
    kt = -2 * inputs / CAST_BANDWIDTH
    kw = (4 - 6 * micro_steps) * weights / CAST_BANDWIDTH / micro_steps  # a micro-step's share
    return {"-fp8fa 2": fa, "-fp8kt 1": kt, "-fp8kw 1": kw}


def bf16_since(m):
    """seconds the bf16 step has lost since it was measured: Llama's swiglu_backward overwrites its
    output since 2026-11-28 (no memset of the (N, 2F) gradient, no read of it: 8 bytes a value of
    (N, F)); nothing else changed in bf16"""
    if m["family"] != "llama" or not m["ms"]:
        return 0.0
    return m["B"] * m["T"] * m["F"] * 8 * m["L"] / BANDWIDTH


def bf16_roofline(m, rest_per_unit):
    """a bf16 step from its parts: every GEMM, the attention, the memory-bound rest"""
    N, L, C = m["B"] * m["T"], m["L"], m["C"]
    gemm = 3 * (sum(2 * N * i * o for i, o in linears(m)) * L + 2 * N * C * m["V"]) / BF16_GEMM
    att_flops = 2 * 2 * N * m["T"] * m["att"] / 2 * L  # QK^T and PV, causal half
    att = att_flops / ATT_FWD + 2.5 * att_flops / ATT_BWD
    return gemm + att + rest_per_unit * N * L * (C + m["F"])


def main():
    # bf16 (and d48's fp8) as gpu_check's bench_short and bench_device 2 measured them on 2026-11-28
    rows = [gpt2("d12", 12, 768, 64, measured_ms=124.2), gpt2("d48", 48, 1600, 8, measured_ms=185.3),
            llama("llama-1.2b", 16, 2048, 16, 8, 8192, 8, measured_ms=116.2),
            llama("llama-8b-l4", 4, 4096, 32, 8, 14336, 4, measured_ms=53.8)]
    fp8_measured = {"d48": 174.1}
    ref = rows[2]  # the measured Llama: what its step holds beyond GEMMs and attention, per token-layer-width
    rest = (ref["ms"] / 1e3 - bf16_roofline(ref, 0.0)) / (ref["B"] * ref["T"] * ref["L"] * (ref["C"] + ref["F"]))
    print("PREDICTED (dev/fp8_predict.py): H200, T=1024, delayed scaling; bf16 measured where it says so")
    print(f"{'model':<13} {'B':>3} {'bf16 ms':>16} {'bf16 now':>9} {'linear GEMMs':>13} {'fp8 GEMMs':>10} "
          f"{'casts':>7} {'act':>6} {'fp8 ms':>8} {'speed-up':>9} {'measured':>17}")
    for m in rows:
        gemm_bf16, gemm_fp8, cast, act = parts(m)
        bf16_then = m["ms"] / 1e3 if m["ms"] else bf16_roofline(m, rest)
        bf16 = bf16_then - bf16_since(m)
        fp8 = bf16 - gemm_bf16 + gemm_fp8 + cast + act
        how = "measured" if m["ms"] else "roofline"
        got = fp8_measured.get(m["name"])
        seen = f"{got:.1f} ms, {bf16 * 1e3 / got:.3f}x" if got else "not yet"
        print(f"{m['name']:<13} {m['B']:>3} {bf16_then * 1e3:>7.1f} {how:>8} {bf16 * 1e3:>9.1f} {gemm_bf16 * 1e3:>13.1f} "
              f"{gemm_fp8 * 1e3:>10.1f} {cast * 1e3:>7.1f} {act * 1e3:>6.1f} {fp8 * 1e3:>8.1f} {bf16 / fp8:>8.2f}x "
              f"{seen:>17}")
    # the knobs (off by default, no GPU has timed them), from the fp8 step measured since where
    # there is one (2026-11-28, the casts fused: dev/results/2026-11-28_gpu_h200_wgmma.md), else
    # from the prediction above; bf16 as measured beside it
    print()
    print("PREDICTED: train_gpt_fp8's knobs, ms a step they take off at one micro-step a step (kw/4: -fp8kw 1's "
          "a micro-step at 4 a step); all three at one")
    print(f"{'model':<13} {'fp8 ms':>16} {'-fp8fa 2':>9} {'-fp8kt 1':>9} {'-fp8kw 1':>9} {'kw/4':>6} "
          f"{'all three':>10} {'vs bf16':>8}")
    measured_since = {"d48": (157.1, 186.5), "llama-8b-l4": (43.6, 52.8)}  # fp8, bf16 beside it
    for m in rows:
        gemm_bf16, gemm_fp8, cast, act = parts(m)
        bf16 = (m["ms"] / 1e3 if m["ms"] else bf16_roofline(m, rest)) - bf16_since(m)
        fp8 = bf16 - gemm_bf16 + gemm_fp8 + cast + act
        how = "predicted"
        if m["name"] in measured_since:
            fp8, bf16 = (x / 1e3 for x in measured_since[m["name"]])
            how = "measured"
        k, k4 = knobs(m), knobs(m, 4)
        total = fp8 + sum(k.values())
        print(f"{m['name']:<13} {fp8 * 1e3:>6.1f} {how:>9} {k['-fp8fa 2'] * 1e3:>9.1f} {k['-fp8kt 1'] * 1e3:>9.1f} "
              f"{k['-fp8kw 1'] * 1e3:>9.1f} {k4['-fp8kw 1'] * 1e3:>6.1f} {total * 1e3:>10.1f} {bf16 / total:>7.2f}x")


if __name__ == "__main__":
    main()
