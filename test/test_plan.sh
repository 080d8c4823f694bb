#!/usr/bin/env bash
# ./plan (plan.cpp, llmc/plan.h) against cases worked out here by hand from the published
# shapes (Meta's Llama 3.1 params.json: dim, n_layers, n_heads, n_kv_heads 8, the MLP's hidden
# size, vocabulary 128,256; the GPT-3 paper's Table 2.1 for 175B: 96 layers, d_model 12,288,
# 96 heads, context 2,048, GPT-2's vocabulary 50,257 padded to 50,304): the memory per GPU of
# five configurations, part by part (the scratch too: cuBLASLt's workspace and the encoder
# backward's buckets, and in two more train_gpt_fp8's FP8 copies and scales, -prec fp8, and -ma
# timed's largest product and -ak 2's fp32 dq, all from the shapes), the bytes each GPU sends per step, and one
# compute time, within 0.1% (or the last printed digit); then what the search must find (70B
# needs at least as many H100s as H200s, the count below the smallest does not fit, 405B fits on
# 8 H100s at no ZeRO stage), the table, and the bad-flag errors. Then tensor and pipeline parallelism, which the trainers do not have
# yet (a PLAN): four layouts worked out by hand (Megatron's split of each tensor, the stages'
# layers, the micro-batches 1F1B and interleaved 1F1B keep in flight as Megatron-LM's schedules
# count their warm-up): every pipeline rank's memory and the heaviest's part by part, the sends
# between stages, the TP all-reduces, the bubble (p-1)/(v m + p-1), the slowest stage's compute;
# the layout table (the best found no slower than MLPerf's layout, which the search includes);
# the bad layouts. Then ./plan against the trainers themselves: the emulated train_gpt_bf16 and
# train_gpt_fp8's start-up memory line (GPT-2 d12 and a small Llama, -r 0/1/2, -ma timed, -fp8r
# current, -ak 2) part by part as ./plan prints the same flags. Exits 0 when every check passes, 1
# otherwise.
set -u
cd "$(dirname "$0")/.."
source test/lib.sh
make -s plan || { echo "FAIL: ./plan did not build"; exit 1; }
# the emulated GPU trainers, whose start-up memory plan ./plan must print too
make -s train_gpt_bf16_emu train_gpt_fp8_emu > /dev/null || { echo "FAIL: the emulated trainers did not build"; exit 1; }
mkdir -p test/out/plan

"$PY" - <<'EOF' || exit 1
import math, re, subprocess, sys

fails = 0
def check(ok, what):
    global fails
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails += 1

def close(got, want, what, tol=1e-3):
    check(got is not None and abs(got - want) <= tol * abs(want), f"{what}: plan {got}, by hand {want:.6g}")

def close_mib(got, want, what):  # a part printed in MiB: within 0.1% or its last digit's rounding
    check(got is not None and abs(got - want / MiB) <= max(1e-3 * want / MiB, 0.05),
          f"{what}: plan {got}, by hand {want / MiB:.6g}")

def plan(*args):
    r = subprocess.run(["./plan", *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr)
    return r.stdout

def number(out, label, unit):
    m = re.search(r"^  " + re.escape(label) + r"\s+([\d.]+) " + unit, out, re.M)
    return float(m.group(1)) if m else None

MiB, GB = 1048576.0, 1e9
WORKSPACE = 32 * MiB + 256 * 1024  # cuBLASLt's 32 MiB and the bias-gradient epilogue's 64K fp32 values
BF16, F32, I32 = 2, 4, 4
def r256(nbytes):  # the trainers carve each buffer on 256 bytes (model_cuda.cuh)
    return -(-nbytes // 256) * 256

# --- the models, from the published shapes -------------------------------------------------
def llama(L, C, NH, F, NKV=8):
    V = 128256; Vp = -(-V // 128) * 128; hs = C // NH; QKV = (NH + 2 * NKV) * hs
    layer = C + QKV * C + C * C + C + 2 * F * C + F * C  # rms1w qkvw attprojw rms2w fcw fcprojw
    front, tail = Vp * C, C + Vp * C                      # wte | rmsfw lmheadw
    return dict(family="llama", L=L, C=C, NH=NH, NKV=NKV, F=F, Vp=Vp, hs=hs, QKV=QKV, layer=layer,
                front_tail=front + tail, n=front + L * layer + tail, weights=L * layer + tail)

def gpt3(L, C, NH, maxT):
    Vp = 50304
    layer = 12 * C * C + 13 * C  # ln1 w,b  qkv w,b  attproj w,b  ln2 w,b  fc w,b  fcproj w,b
    front, tail = Vp * C + maxT * C, 2 * C
    return dict(family="gpt", L=L, C=C, NH=NH, Vp=Vp, maxT=maxT, layer=layer, front_tail=front + tail,
                n=front + L * layer + tail, weights=front + L * layer + tail)

MODELS = {"llama3.1:8b": llama(32, 4096, 32, 14336), "llama3.1:70b": llama(80, 8192, 64, 28672),
          "llama3.1:405b": llama(126, 16384, 128, 53248), "gpt3:c12288": gpt3(96, 12288, 96, 2048),
          "llama3:l8c4096h32kv2f14336": llama(8, 4096, 32, 14336, NKV=2)}  # 2 KV heads: replicated at TP 8
check(MODELS["llama3.1:8b"]["n"] == 8030261248, "Llama 3.1 8B has 8,030,261,248 parameters (Meta's count)")

def cdiv(a, b):
    return -(-a // b)

# One GPU's activations. The defaults: the whole model on one GPU, the trainers' buffers. Under a
# layout (tensor and pipeline parallelism, a PLAN): the buffers split by heads or hidden units
# are 1/tp; the norms and the residual stream whole, or with -sp 1 1/tp along T plus one whole
# (N,C) buffer for the gathered norm output; `deep` layer x micro-batch pairs kept (the stage's
# layers of every micro-batch in flight), `inputs` stage inputs, the head's buffers on the last stage.
def activations(m, B, T, r, tp=1, sp=False, deep=None, inputs=1, head=True):
    N, C, NH, Vp = B * T, m["C"], m["NH"], m["Vp"]
    L = m["L"] if deep is None else deep
    NC, Ns = cdiv(N * C, tp if sp else 1), cdiv(N, tp if sp else 1)  # the norms' and residuals' share
    whole = N * C * BF16 if sp else 0                                   # -sp 1: a gathered norm output
    if m["family"] == "llama":
        F, hs = m["F"] // tp, m["hs"]
        kv = m["NKV"] // tp if m["NKV"] % tp == 0 else 1  # key/value heads a GPU keeps
        QKV = (NH // tp + 2 * kv) * hs
        kept = 1 if r >= 2 else L   # -r 2: every per-layer buffer one layer deep...
        norms = 1 if r >= 1 else L  # -r 1: rms1, rms2, fch_swiglu one layer deep
        sizes = [inputs*NC*BF16, norms*NC*BF16, kept*Ns*F32, kept*N*QKV*BF16,
                 kept*N*C//tp*BF16, kept*B*NH//tp*T*F32, kept*NC*BF16, norms*NC*BF16, kept*Ns*F32,
                 kept*N*2*F*BF16, norms*N*F*BF16,
                 L*NC*BF16,  # ...but the residual stream between layers (residual3)
                 NC*BF16, N*C*BF16, N*QKV*BF16,
                 N*2*F*BF16, N*F*BF16, T*hs//2*F32, T*hs//2*F32, N*I32, N*I32, whole]
        if head:
            sizes += [NC*BF16, Ns*F32, N*cdiv(Vp, tp)*BF16, N*F32]
    else:
        ln = 1 if r >= 2 else L
        gelu = 1 if r >= 1 else L
        sizes = [inputs*NC*BF16, ln*NC*BF16, L*Ns*F32, L*Ns*F32, L*N*3*C//tp*BF16, L*N*C//tp*BF16,
                 L*B*NH//tp*T*F32, L*NC*BF16, ln*NC*BF16, L*Ns*F32, L*Ns*F32, L*N*4*C//tp*BF16,
                 gelu*N*4*C//tp*BF16, L*NC*BF16, N*C*BF16, NC*BF16,
                 N*C*BF16, N*3*C//tp*BF16, N*4*C//tp*BF16, N*I32, N*I32, whole]
        if head:
            sizes += [NC*BF16, Ns*F32, Ns*F32, N*cdiv(Vp, tp)*BF16, N*F32]
    return sum(r256(s) for s in sizes)

# The scratch beside the model (llmc/gpu_scratch.h, as the trainers allocate it). The encoder
# backward's buckets of N positions: int32 token, start and position a position and 2 ints a heavy
# bucket (over 128 positions, 2 chunks), plus one each; the fp32 partial sums (C a chunk) of at
# most 1.5 N / 64 chunks of 64 rows.
def encoder(N, C):
    return (3 * N + 1 + 2 * (N // 129) + 1) * I32 + (3 * N // 2 // 64) * C * F32

# train_gpt_fp8 (-prec fp8): three fp8 copies (a byte a value) of N x the widest linear's columns
# (its input, its output's gradient and that transposed), one of the largest weight, and for 3
# tensors of each of 4 linears a layer the amax, scale, 1/scale and amax history (1024 steps
# delayed, 1 current) in fp32 and the amax's collective slot (4 bytes)
def fp8_scratch(m, N, current=False):
    C, L = m["C"], m["L"]
    if m["family"] == "llama":
        QKV, F = m["QKV"], m["F"]
        widest, weight = max(C, QKV, 2 * F), max(QKV, 2 * F, C) * C
    else:
        widest, weight = 4 * C, 4 * C * C
    tensors = 3 * 4 * L
    return 3 * N * widest + weight + tensors * (3 + (1 if current else 1024)) * F32 + tensors * I32

# -ma timed: a linear of K inputs and OC outputs times D (OC, N) going forward (GPT's fc with GELU's
# aux beside it: -ge 2, the trainers' default), D (K, N) and D (K, OC) coming back; the head the
# same with K = C, OC = Vp; in bf16. The largest of them, at once, while it is timed.
def timing_scratch(m, N):
    C, Vp = m["C"], m["Vp"]
    if m["family"] == "llama":
        linears = [(C, m["QKV"], 1), (C, C, 1), (C, 2 * m["F"], 1), (m["F"], C, 1)]
    else:
        linears = [(C, 3 * C, 1), (C, C, 1), (C, 4 * C, 2), (4 * C, C, 1)]
    return BF16 * max(max(OC * N * aux, K * N, K * OC) for K, OC, aux in linears + [(C, Vp, 1)])

# What one GPU keeps of n values on W data-parallel ranks at ZeRO z: bf16 parameters and
# gradients, fp32 AdamW m, v and master weights; layer: ZeRO 3's two slots, ft: the rows it keeps whole
def zero_memory(n, layer, ft, W, z):
    per_gpu = -(-n // W)              # ceil(n / W)
    shard = -(-per_gpu // 64) * 64    # rounded up to 64 values (zero.h: ZERO_ALIGN)
    padded = shard * W
    owned = n if z == 0 else shard
    return {"params": BF16 * (ft + 2 * layer + shard if z == 3 else padded),
            "grads": BF16 * (ft + 2 * layer + shard if z >= 2 else padded + 2 * layer),
            "adamw": 8 * owned, "master": 4 * owned}, padded

def expected(name, W, z, r, B, T, tokens, trainer=()):
    m = MODELS[name]
    n, L, layer, ft = m["n"], m["L"], m["layer"], m["front_tail"]
    mem, padded = zero_memory(n, layer, ft, W, z)
    mem.update({"activations": activations(m, B, T, r), "workspace": WORKSPACE, "encoder": encoder(B * T, m["C"])})
    if "fp8" in trainer:
        mem["fp8"] = fp8_scratch(m, B * T, "current" in trainer)
    if "timed" in trainer:
        mem["-ma timed"] = timing_scratch(m, B * T)
    if "-ak" in trainer:  # -ak 2: attention's dq in fp32, B x T rows of the query heads (NH x HS = C)
        mem["attention dq"] = F32 * B * T * m["C"]
    mem["total"] = sum(mem.values())
    accum = -(-tokens // (W * B * T))
    part = (W - 1) / W
    grads = {0: 2 * part * padded * BF16, 1: part * padded * BF16}.get(z, accum * part * padded * BF16)
    gathers = L + (L - 2) + (accum - 1) * 2 * (L - 2)
    comm = {"gradients": grads,
            "gathers": part * layer * gathers * BF16 if z == 3 else 0,
            "after update": part * (padded - L * layer) * BF16 if z == 3 else part * padded * BF16 if z else 0}
    comm["sent"] = sum(comm.values())
    # compute: 6 x weights + 6 L C T a token at 42% of 989 TFLOP/s; -r 2 one more forward of each layer
    rate = 0.42 * 989e12
    micro = B * T * (6 * m["weights"] + 6 * L * m["C"] * T) / rate
    micro += {1: 0.02 * micro, 2: L * B * T * (2 * layer + 2 * m["C"] * T) / rate}.get(r, 0)
    return mem, comm, accum * micro

CASES = [  # model, GPU, GPUs, ZeRO, recompute, B, T, tokens per step (the defaults), the trainer's flags
    ("llama3.1:8b", "h100", 8, 0, 0, 1, 8192, 4194304),
    ("llama3.1:70b", "h100", 64, 3, 2, 1, 8192, 4194304),
    ("gpt3:c12288", "h200", 64, 3, 1, 1, 2048, 2097152),
    ("llama3.1:405b", "h200", 256, 2, 1, 1, 4096, 4194304),
    ("gpt3:c12288", "h200", 16, 1, 2, 2, 2048, 2097152),
    # train_gpt_fp8 and -ma timed: Llama's widest linear is gate/up (2F), its largest product the
    # logits (Vp x N); GPT-3's fc (4C), its largest product the head's gradient (C x Vp)
    ("llama3.1:8b", "h200", 8, 1, 1, 1, 8192, 4194304, "-prec", "fp8", "-ma", "timed", "-ak", "2"),
    ("gpt3:c12288", "h200", 64, 3, 1, 1, 2048, 2097152, "-prec", "fp8", "-fp8r", "current", "-ma", "timed"),
]
for name, gpu, W, z, r, B, T, tokens, *trainer in CASES:
    tag = f"{name} {gpu} -n {W} -z {z} -r {r} -b {B} -t {T} {' '.join(trainer)}"
    out = plan("-e", name, "-gpu", gpu, "-n", str(W), "-z", str(z), "-r", str(r), "-b", str(B), "-t", str(T), *trainer)
    mem, comm, compute = expected(name, W, z, r, B, T, tokens, trainer)
    for part, want in mem.items():
        close_mib(number(out, part, "MiB"), want, f"{tag}: {part} MiB")
    for part, want in comm.items():
        if want > 0:
            close(number(out, part, "GB"), want / GB, f"{tag}: {part} GB sent per GPU per step")
    fits = mem["total"] <= 0.9 * {"h100": 81559, "h200": 143771}[gpu] * MiB
    check(("DOES NOT FIT" in out) == (not fits), f"{tag}: {'fits' if fits else 'does not fit'}")
    if fits:
        close(number(out, "compute", "s"), compute, f"{tag}: compute seconds per step (PREDICTED)")
        check(re.search(r"^  step .*PREDICTED$", out, re.M) is not None, f"{tag}: the step time says PREDICTED")

# --- the search --------------------------------------------------------------------------
def smallest(name, gpu):
    m = re.search(r"smallest GPU count that fits: (\d+)", plan("-e", name, "-gpu", gpu))
    return int(m.group(1)) if m else None
h100, h200 = smallest("llama3.1:70b", "h100"), smallest("llama3.1:70b", "h200")
check(h100 is not None and h200 is not None and h100 >= h200, f"70B: H100s needed {h100} >= H200s needed {h200}")
if h100:
    below = h100 - 8 if h100 > 8 else h100 // 2
    check("DOES NOT FIT" in plan("-e", "llama3.1:70b", "-gpu", "h100", "-n", str(below)),
          f"70B does not fit on {below} H100s, one step below the smallest count {h100}")
    check("fits" in plan("-e", "llama3.1:70b", "-gpu", "h100", "-n", str(h100)), f"70B fits on {h100} H100s")
for z in range(4):
    check("DOES NOT FIT" in plan("-e", "llama3.1:405b", "-gpu", "h100", "-n", "8", "-z", str(z)),
          f"405B does not fit on 8 H100s at -z {z}")
check("DOES NOT FIT" in plan("-e", "llama3.1:405b", "-gpu", "h100", "-n", "8"), "405B on 8 H100s: no stage fits")

# --- tensor and pipeline parallelism: a PLAN ------------------------------------------------
# Megatron's layout, worked out here: TP splits qkvw and fcw (GPT: and qkvb, fcb) by rows,
# attprojw and fcprojw by columns, wte and the head by vocabulary rows; the norms (GPT: and
# attprojb, fcprojb, wpe) stay whole. One GPU's share of a layer, of the first stage's rows and
# of the last stage's (GPT's head is wte: with PP > 1 the last stage keeps a copy of its rows).
def layout_slice(m, tp, pp):
    C, NH, Vp = m["C"], m["NH"], m["Vp"]
    if m["family"] == "llama":
        F, hs, NKV = m["F"], m["hs"], m["NKV"]
        kv = NKV // tp if NKV % tp == 0 else 1  # TP a multiple of NKV: the one its query heads share
        layer = (NH // tp + 2 * kv) * hs * C + C * C // tp + 2 * F * C // tp + F * C // tp + 2 * C
        return layer, Vp * C // tp, C + Vp * C // tp
    layer = (3 * C * C + 3 * C + C * C + 4 * C * C + 4 * C + 4 * C * C) // tp + 6 * C
    return layer, Vp * C // tp + m["maxT"] * C, 2 * C + (Vp * C // tp if pp > 1 else 0)

LAYOUTS = [  # model, GPU, GPUs, TP, PP, VP, SP, ZeRO, recompute; by hand: each stage's layers, the
             # slowest stage, its sends and TP all-reduces a micro-batch
    # 405B as MLPerf laid it out: (126 + 2) / 8 = 16 a rank with the embedding and the loss counted
    # as a layer each, so 15 on the first and the last; the fuller stages are the slowest (rank 1
    # the first of them): 2 x 8 sends, 16 layers x 6 all-reduces (-r 2 repeats the forward's two)
    ("llama3.1:405b", "h100", 512, 8, 8, 8, 1, 1, 2, [15] + [16] * 6 + [15], 1, 16, 16 * 6),
    # GPT-3 175B as MLPerf laid it out: 96 / 8 = 12 a rank; the last also computes the head, so it is
    # the slowest: 2 x 4 - 1 sends (none forward from its last virtual stage), 12 x 4 + 1 all-reduces
    ("gpt3:c12288", "h200", 512, 4, 8, 4, 0, 3, 1, [12] * 8, 7, 2 * 4 - 1, 12 * 4 + 1),
    # 405B on 4 stages, plain 1F1B: 126 = 4 x 31 + 2, so two stages of 32, the lighter ones the
    # last and the first; rank 1 the slowest: 2 sends, 32 x 4 all-reduces
    ("llama3.1:405b", "h200", 256, 8, 4, 1, 1, 1, 1, [31, 32, 32, 31], 1, 2, 32 * 4),
    # 2 key/value heads at TP 8: each rank keeps one (replicated 4 times); 8 / 2 = 4 layers a stage;
    # the last (the head) the slowest: 1 send, 4 x 4 + 1 all-reduces
    ("llama3:l8c4096h32kv2f14336", "h100", 32, 8, 2, 1, 0, 1, 0, [4, 4], 1, 1, 4 * 4 + 1),
]
rate = 0.42 * 989e12
for name, gpu, W, tp, pp, vp, sp, z, r, stages, slowest, sends, collectives in LAYOUTS:
    m = MODELS[name]
    llama_like = m["family"] == "llama"
    B, T, tokens, C = 1, 8192 if llama_like else 2048, 4194304 if llama_like else 2097152, m["C"]
    tag = f"{name} {gpu} -n {W} -tp {tp} -pp {pp} -vp {vp} -sp {sp} -z {z} -r {r}"
    out = plan("-e", name, "-gpu", gpu, *[str(a) for a in ("-n", W, "-tp", tp, "-pp", pp, "-vp", vp, "-sp", sp,
                                                          "-z", z, "-r", r)])
    check(sum(stages) == m["L"] and "PLAN" in out, f"{tag}: the stages hold the {m['L']} layers; it says PLAN")
    dp = W // (tp * pp)
    micro = cdiv(tokens, dp * B * T)  # micro-batches a step: the pipeline's
    layer, front, tail = layout_slice(m, tp, pp)
    mems = []  # every pipeline rank's memory: its layers and rows, ZeRO over DP, its micro-batches in flight
    for rank, layers in enumerate(stages):
        held = (front if rank == 0 else 0) + (tail if rank == pp - 1 else 0)
        # Megatron's schedules: the warm-up forwards, then one more before the first backward
        flight = min(pp - rank, micro) if vp == 1 else min(2 * (pp - rank - 1) + (vp - 1) * pp + 1, micro * vp)
        mem, _ = zero_memory(layers * layer + held, layer, held, dp, z)
        mem["activations"] = activations(m, B, T, r, tp, sp == 1, cdiv(flight * layers, vp), flight, rank == pp - 1)
        mem["workspace"] = WORKSPACE
        mem["encoder"] = encoder(B * T, C)
        mem["total"] = sum(mem.values())
        mems.append(mem)
    heavy = max(range(pp), key=lambda i: (mems[i]["total"], -i))
    got = re.search(r"memory per GPU on pipeline rank (\d+) of", out)
    check(got is not None and int(got.group(1)) == heavy, f"{tag}: the heaviest pipeline rank is {heavy}")
    for part, want in mems[heavy].items():
        close_mib(number(out, part, "MiB"), want, f"{tag}: rank {heavy}'s {part} MiB")
    # the sends between stages: B x T x C values in bf16, each TP rank its 1/TP
    got = re.search(r"^  pipeline\s+([\d.]+) GB\s+(\d+) x (\d+) sends of ([\d,]+) bytes", out, re.M)
    send = 2 * B * T * C // tp
    check(got is not None and (int(got.group(2)), int(got.group(3)), int(got.group(4).replace(",", ""))) ==
          (micro, sends, send), f"{tag}: {micro} x {sends} sends of {send} bytes a step")
    close(float(got.group(1)) if got else None, micro * sends * send / GB, f"{tag}: pipeline GB per GPU per step")
    # the TP group's all-reduces of (B,T,C) in bf16: a ring sends 2 (TP-1)/TP of it, on NVLink
    got = re.search(r"^  tensor par\.\s+([\d.]+) GB\s+(\d+) x (\d+) all-reduce.* ([\d.]+) ms each", out, re.M)
    check(got is not None and (int(got.group(2)), int(got.group(3))) == (micro, collectives),
          f"{tag}: {micro} x {collectives} TP all-reduces a step")
    close(float(got.group(1)) if got else None, micro * collectives * 2 * (tp - 1) / tp * 2 * B * T * C / GB,
          f"{tag}: TP GB per GPU per step")
    close(float(got.group(4)) if got else None, 2e3 * ((tp - 1) / tp * 2 * B * T * C / 450e9 + (tp - 1) * 5e-6),
          f"{tag}: one all-reduce's ms on NVLink")
    fits = mems[heavy]["total"] <= 0.9 * {"h100": 81559, "h200": 143771}[gpu] * MiB
    check(("DOES NOT FIT" in out) == (not fits), f"{tag}: {'fits' if fits else 'does not fit'}")
    if not fits:
        continue
    # the bubble: p - 1 slots of v beside v m of work
    got = re.search(r"^  bubble\s+([\d.]+) s\s+([\d.]+)% of the step idle = .* = (\d+)/(\d+)", out, re.M)
    check(got is not None and (int(got.group(3)), int(got.group(4))) == (pp - 1, vp * micro + pp - 1),
          f"{tag}: bubble {pp - 1}/{vp * micro + pp - 1}")
    close(float(got.group(2)) if got else None, 100 * (pp - 1) / (vp * micro + pp - 1), f"{tag}: bubble %")
    # the slowest stage's compute: its layers (1/TP each), the head on the last stage, recompute
    t_fwd = B * T * (2 * m["layer"] + 2 * C * T) / tp / rate
    layers = stages[slowest]
    plain = 3 * layers * t_fwd + (B * T * 6 * (m["weights"] - m["L"] * m["layer"]) / tp / rate if slowest == pp - 1 else 0)
    extra = {1: 0.02 * plain, 2: layers * t_fwd}.get(r, 0)
    close(number(out, "compute", "s"), micro * (plain + extra), f"{tag}: compute seconds per step (PREDICTED)", 2e-3)
    got = re.search(r"^  exposed\s+([\d.]+) s\s+tensor parallel ([\d.]+), pipeline sends ([\d.]+)", out, re.M)
    bubble, compute, step = number(out, "bubble", "s"), number(out, "compute", "s"), number(out, "step", "s")
    if got and bubble and compute and step:
        b = (pp - 1) / (vp * micro + pp - 1)
        piped = compute + float(got.group(2)) + float(got.group(3))
        close(bubble, piped * b / (1 - b), f"{tag}: bubble seconds = (compute + TP + PP) b / (1 - b)", 5e-3)
        close(step, compute + bubble + float(got.group(1)), f"{tag}: step = compute + bubble + exposed", 1e-4)
    else:
        check(False, f"{tag}: the time lines")

# --- the layout search -------------------------------------------------------------------
table = plan()
zero_part, _, layout_part = table.partition("Tensor and pipeline parallelism")
zero_rows = re.findall(r"^(llama3\.1:\d+b|gpt3:c12288)\s+(h[12]00)\s+(\d+|-) ", zero_part, re.M)
check(len(zero_rows) == 8, f"the ZeRO table has a row for each of 4 models x 2 GPUs ({len(zero_rows)})")
check("PLAN" in layout_part and "PREDICTED" in layout_part, "the layout table says PLAN and PREDICTED")
# model, GPU, GPUs, layout, step s; a row that does not fit says so at its end
layout_rows = re.findall(r"^(\S+|  MLPerf's)\s+(h[12]00)\s+(\d+)  (TP\d+ PP\d+(?: VP\d+)?(?: SP)?)\s+-z \d -r \d"
                         r"(?:\s+[\d.]+%?){5}\s+([\d.]+) .*?(DOES NOT FIT)?$", layout_part, re.M)
check(len(layout_rows) == 12, f"the layout table: 8 best rows and 4 of MLPerf's ({len(layout_rows)})")
for model, gpu, n, layout, step, unfit in layout_rows:
    if model != "  MLPerf's":
        best = (model, gpu, float(step))
        gpus = 512 if model in ("llama3.1:405b", "gpt3:c12288") else int(next(
            (z[2] for z in zero_rows if z[:2] == (model, gpu)), 0))
        check(int(n) == gpus and not unfit, f"layout table: {model} {gpu} on {gpus} GPUs ({n}): the best one fits")
        continue
    want = "TP8 PP8 VP8" if best[0] == "llama3.1:405b" else "TP4 PP8 VP4"
    check(layout.startswith(want) and n == "512", f"layout table: MLPerf's {want} on 512 for {best[0]} {gpu}")
    check(best[2] <= float(step), f"{best[0]} {gpu}: the best found ({best[2]} s) is no slower than MLPerf's "
          f"({step} s), which the search includes")
one = plan("-e", "llama3.1:405b", "-gpu", "h100", "-tp", "-1", "-pp", "-1", "-vp", "-1", "-sp", "-1")
check(re.search(r"the fastest PREDICTED of \d+ layouts", one) is not None and "MLPerf's layout" in one
      and "DOES NOT FIT" not in one, "405B on 512 H100s: a layout fits, MLPerf's beside it")
# --- ./plan against the trainers ----------------------------------------------------------
# The same flags give the same plan: the emulated GPU trainers' start-up line ("memory plan:", what
# they allocated, printed before any step), part by part as both print them (to 0.1 MiB), against
# ./plan's for one GPU at -z 0; the trainer's binary and -fp8r as ./plan's -prec and -fp8r, -ma
# for -ma. -x 0 -v 0: the trainer builds everything, prints, and stops without a step. The shard:
# llm.c's header (magic 20240520, version 1, the token count) and 5,000 tokens under 300.
import struct
shard = "test/out/plan/tokens_train_000000.bin"
with open(shard, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, 5000, *([0] * 253)))
    f.write(struct.pack("<5000H", *[(7 * i) % 300 for i in range(5000)]))
LABELS = {"params": "params", "grads": "grads", "AdamW m+v": "adamw", "master weights": "master",
          "activations": "activations", "workspace": "workspace", "encoder buckets": "encoder", "FP8 scratch": "fp8",
          "-ma timed scratch": "-ma timed", "attention dq": "attention dq", "total": "total"}
RUNS = [  # binary, model, B, T, -r, trainer flags
    ("bf16", "gpt2:d12", 4, 256, 0, []),
    ("bf16", "llama3:l2c256h4kv2f704", 2, 256, 1, ["-ma", "timed", "-ak", "2"]),
    ("bf16", "gpt2:d12", 4, 256, 0, ["-ak", "2"]),
    ("fp8", "gpt2:d12", 4, 256, 2, ["-ma", "timed"]),
    ("fp8", "llama3:l2c256h4kv2f704", 2, 256, 0, ["-fp8r", "current"]),
    ("fp8", "gpt2:d12", 4, 256, 0, []),
    ("fp8", "gpt2:d12", 4, 256, 0, ["-fp8kt", "1"]),
    ("fp8", "gpt2:d12", 4, 256, 0, ["-fp8kw", "1"]),
    ("fp8", "gpt2:d12", 4, 256, 0, ["-fp8r", "current"]),
]
fp8_said, acts_said = {}, {}
for prec, model, B, T, r, flags in RUNS:
    args = ["-e", model, "-b", str(B), "-t", str(T), "-r", str(r), *flags]
    tag = f"train_gpt_{prec} {' '.join(args)}"
    run = subprocess.run([f"./train_gpt_{prec}_emu", *args, "-i", shard, "-v", "0", "-x", "0", "-n", "0", "-s", "0",
                          "-o", "test/out/plan/trainer"], capture_output=True, text=True)
    line = next((l for l in run.stdout.splitlines() if l.startswith("memory plan:")), "")
    said = {LABELS[k]: float(v) for k, v in re.findall(r"(?:^memory plan: |, |; )([-A-Za-z0-9+ ]+?) ([\d.]+) MiB", line)
            if k in LABELS}
    out = plan("-e", model, "-gpu", "h100", "-n", "1", "-z", "0", "-b", str(B), "-t", str(T), "-r", str(r),
               "-prec", prec, *flags)
    planned = {part: number(out, part, "MiB") for part in LABELS.values() if number(out, part, "MiB") is not None}
    wanted = {"encoder"} | ({"fp8"} if prec == "fp8" else set()) | ({"-ma timed"} if "timed" in flags else set()) \
        | ({"attention dq"} if "-ak" in flags else set())
    check(run.returncode == 0 and len(said) >= 8 and said == planned and wanted <= set(said),
          f"{tag}: ./plan prints the trainer's plan: {said if said == planned else (said, planned)}")
    if prec == "fp8" and model == "gpt2:d12" and r == 0:
        fp8_said[" ".join(flags)] = said.get("fp8")
    if model == "gpt2:d12" and r == 0 and flags in ([], ["-fp8r", "current"]):
        acts_said[(prec, " ".join(flags))] = said.get("activations") or 0
# -fp8kt 1: each linear's input kept in fp8, a byte a value: B*T x (C + C + C + 4C) a layer, 12
# layers of d12 (C 768) at B*T 1024: 63.0 MiB more FP8 scratch, in the trainer's line and the plan's
kept = 4 * 256 * 7 * 768 * 12 / 2**20
grown = (fp8_said.get("-fp8kt 1") or 0) - (fp8_said.get("") or 0)
check(abs(grown - kept) < 0.11, f"-fp8kt 1: the FP8 scratch grows by {grown:.1f} MiB, the kept inputs' {kept:.1f}")
# train_gpt_fp8 makes GELU in fcproj's casts (delayed scaling): fch_gelu (B*T, 4C) is one layer
# deep, not 12: 11 x 1024 x 3072 bf16 values fewer than train_gpt_bf16 at -r 0 (66.0 MiB); with
# -fp8r current the GELU pass writes it, every layer's kept as in bf16
fewer = acts_said.get(("bf16", ""), 0) - acts_said.get(("fp8", ""), 0)
same = acts_said.get(("bf16", ""), 0) - acts_said.get(("fp8", "-fp8r current"), -1)
check(abs(fewer - 11 * 1024 * 3072 * 2 / 2**20) < 0.11 and abs(same) < 0.11,
      f"train_gpt_fp8's activations at -r 0: {fewer:.1f} MiB fewer than bf16's (GELU's output one layer deep), "
      f"{same:.1f} with -fp8r current")
# -fp8kw 1: each linear's weight kept cast, W and W^T, 2 bytes a value: 12 C^2 a layer (3C^2 +
# C^2 + 4C^2 + 4C^2), 12 layers: 162.0 MiB
kept = 2 * 12 * 768 * 768 * 12 / 2**20
grown = (fp8_said.get("-fp8kw 1") or 0) - (fp8_said.get("") or 0)
check(abs(grown - kept) < 0.11, f"-fp8kw 1: the FP8 scratch grows by {grown:.1f} MiB, the kept weights' {kept:.1f}")

sys.exit(1 if fails else 0)
EOF

# bad flags: one line on stderr starting "error:", a non-zero exit
rc=0
for args in "-z 4" "-r 3" "-gpu a100" "-e gpt9:x" "-n 0" "-b 0" "-x 1" "-n" "-n 8" \
            "-e gpt3:c12288 -t 4096" "-e llama3.1:8b -n 1 -z 3" "-ov 1.5" "-prec fp16" "-fp8r late" "-ma fastest"; do
    err=$(./plan $args 2>&1 >/dev/null); code=$?
    if [ $code -ne 0 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && [[ "$err" == error:* ]]; then
        echo "ok   ./plan $args: $err"
    else
        echo "FAIL ./plan $args: exit $code, stderr: $err"; rc=1
    fi
done
# bad layouts (tensor and pipeline parallelism, a PLAN): refused the same way, with nothing on stdout
for args in "-e llama3.1:405b -n 500 -tp 8 -pp 8" "-e llama3.1:405b -n 384 -tp 3" \
            "-e llama3:l4c384h12kv3f704 -n 2 -tp 2" "-e llama3.1:8b -n 512 -pp 32 -vp 2" \
            "-e llama3.1:405b -n 512 -pp 128" "-e llama3.1:405b -n 1024 -tp 16" "-e llama3.1:8b -n 8 -sp 1" \
            "-e llama3.1:8b -n 8 -vp 2" "-e llama3.1:70b -n 64 -pp 4 -vp 3" "-e llama3.1:405b -n 512 -tp 16 -pp -1" \
            "-tp 8" "-e llama3.1:8b -tp 0"; do
    out=$(./plan $args 2>/dev/null); err=$(./plan $args 2>&1 >/dev/null); code=$?
    if [ $code -ne 0 ] && [ -z "$out" ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && [[ "$err" == error:* ]]; then
        echo "ok   ./plan $args: $err"
    else
        echo "FAIL ./plan $args: exit $code, stdout ${#out} bytes, stderr: $err"; rc=1
    fi
done
exit $rc
