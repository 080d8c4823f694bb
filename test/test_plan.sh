#!/usr/bin/env bash
# ./plan (plan.cpp, llmc/plan.h) against cases worked out here by hand from the published
# shapes (Meta's Llama 3.1 params.json: dim, n_layers, n_heads, n_kv_heads 8, the MLP's hidden
# size, vocabulary 128,256; the GPT-3 paper's Table 2.1 for 175B: 96 layers, d_model 12,288,
# 96 heads, context 2,048, GPT-2's vocabulary 50,257 padded to 50,304): the memory per GPU of
# five configurations, part by part, the bytes each GPU sends per step, and one compute time,
# within 0.1%; then what the search must find (70B needs at least as many H100s as H200s, the
# count below the smallest does not fit, 405B fits on 8 H100s at no ZeRO stage), the table,
# and the bad-flag errors. Exits 0 when every check passes, 1 otherwise.
set -u
cd "$(dirname "$0")/.."
source test/lib.sh
make -s plan || { echo "FAIL: ./plan did not build"; exit 1; }

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

def plan(*args):
    r = subprocess.run(["./plan", *args], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr)
    return r.stdout

def number(out, label, unit):
    m = re.search(r"^  " + re.escape(label) + r"\s+([\d.]+) " + unit, out, re.M)
    return float(m.group(1)) if m else None

MiB, GB = 1048576.0, 1e9
BF16, F32, I32 = 2, 4, 4
def r256(nbytes):  # the trainers carve each buffer on 256 bytes (model_cuda.cuh)
    return -(-nbytes // 256) * 256

# --- the models, from the published shapes -------------------------------------------------
def llama(L, C, NH, F):
    V = 128256; Vp = -(-V // 128) * 128; NKV = 8; hs = C // NH; QKV = (NH + 2 * NKV) * hs
    layer = C + QKV * C + C * C + C + 2 * F * C + F * C  # rms1w qkvw attprojw rms2w fcw fcprojw
    front, tail = Vp * C, C + Vp * C                      # wte | rmsfw lmheadw
    return dict(family="llama", L=L, C=C, NH=NH, NKV=NKV, F=F, Vp=Vp, hs=hs, QKV=QKV, layer=layer,
                front_tail=front + tail, n=front + L * layer + tail, weights=L * layer + tail)

def gpt3(L, C, NH, maxT):
    Vp = 50304
    layer = 12 * C * C + 13 * C  # ln1 w,b  qkv w,b  attproj w,b  ln2 w,b  fc w,b  fcproj w,b
    front, tail = Vp * C + maxT * C, 2 * C
    return dict(family="gpt", L=L, C=C, NH=NH, Vp=Vp, layer=layer, front_tail=front + tail,
                n=front + L * layer + tail, weights=front + L * layer + tail)

MODELS = {"llama3.1:8b": llama(32, 4096, 32, 14336), "llama3.1:70b": llama(80, 8192, 64, 28672),
          "llama3.1:405b": llama(126, 16384, 128, 53248), "gpt3:c12288": gpt3(96, 12288, 96, 2048)}
check(MODELS["llama3.1:8b"]["n"] == 8030261248, "Llama 3.1 8B has 8,030,261,248 parameters (Meta's count)")

def activations(m, B, T, r):
    N, L, C, NH, Vp = B * T, m["L"], m["C"], m["NH"], m["Vp"]
    if m["family"] == "llama":
        F, QKV, hs = m["F"], m["QKV"], m["hs"]
        mha = N * 3 * C  # NKV < NH: the key/value heads repeated for the attention kernels
        kept = 1 if r >= 2 else L   # -r 2: every per-layer buffer one layer deep...
        norms = 1 if r >= 1 else L  # -r 1: rms1, rms2, fch_swiglu one layer deep
        sizes = [N*C*BF16, norms*N*C*BF16, kept*N*F32, kept*N*QKV*BF16, mha*BF16, kept*N*C*BF16,
                 kept*B*NH*T*F32, kept*N*C*BF16, norms*N*C*BF16, kept*N*F32, kept*N*2*F*BF16,
                 norms*N*F*BF16,
                 L*N*C*BF16,  # ...but the residual stream between layers (residual3)
                 N*C*BF16, N*F32, N*Vp*BF16, N*F32, N*C*BF16, N*C*BF16, N*QKV*BF16, mha*BF16,
                 N*2*F*BF16, N*F*BF16, T*hs//2*F32, T*hs//2*F32, N*I32, N*I32]
    else:
        ln = 1 if r >= 2 else L
        gelu = 1 if r >= 1 else L
        sizes = [N*C*BF16, ln*N*C*BF16, L*N*F32, L*N*F32, L*N*3*C*BF16, L*N*C*BF16, L*B*NH*T*F32,
                 L*N*C*BF16, ln*N*C*BF16, L*N*F32, L*N*F32, L*N*4*C*BF16, gelu*N*4*C*BF16,
                 L*N*C*BF16, N*C*BF16, N*F32, N*F32, N*Vp*BF16, N*F32, N*C*BF16, N*C*BF16,
                 N*C*BF16, N*3*C*BF16, N*4*C*BF16, N*I32, N*I32]
    return sum(r256(s) for s in sizes)

def expected(name, W, z, r, B, T, tokens):
    m = MODELS[name]
    n, L, layer, ft = m["n"], m["L"], m["layer"], m["front_tail"]
    per_gpu = -(-n // W)              # ceil(n / W)
    shard = -(-per_gpu // 64) * 64    # rounded up to 64 values (zero.h: ZERO_ALIGN)
    padded = shard * W
    owned = n if z == 0 else shard
    mem = {
        "params": BF16 * (ft + 2 * layer + shard if z == 3 else padded),
        "grads": BF16 * (ft + 2 * layer + shard if z >= 2 else padded + 2 * layer),
        "adamw": 8 * owned, "master": 4 * owned,
        "activations": activations(m, B, T, r), "workspace": 32 * MiB,
    }
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

CASES = [  # model, GPU, GPUs, ZeRO, recompute, B, T, tokens per step (the defaults)
    ("llama3.1:8b", "h100", 8, 0, 0, 1, 8192, 4194304),
    ("llama3.1:70b", "h100", 64, 3, 2, 1, 8192, 4194304),
    ("gpt3:c12288", "h200", 64, 3, 1, 1, 2048, 2097152),
    ("llama3.1:405b", "h200", 256, 2, 1, 1, 4096, 4194304),
    ("gpt3:c12288", "h200", 16, 1, 2, 2, 2048, 2097152),
]
for name, gpu, W, z, r, B, T, tokens in CASES:
    tag = f"{name} {gpu} -n {W} -z {z} -r {r} -b {B} -t {T}"
    out = plan("-e", name, "-gpu", gpu, "-n", str(W), "-z", str(z), "-r", str(r), "-b", str(B), "-t", str(T))
    mem, comm, compute = expected(name, W, z, r, B, T, tokens)
    for part, want in mem.items():
        close(number(out, part, "MiB"), want / MiB, f"{tag}: {part} MiB")
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

# --- the table ---------------------------------------------------------------------------
table = plan()
rows = [l for l in table.splitlines() if re.match(r"^(llama3\.1:\d+b|gpt3:c12288)\s+h[12]00 ", l)]
check(len(rows) == 8, f"the table has a row for each of 4 models x 2 GPUs ({len(rows)})")
check(table.count("PREDICTED") >= 4 and "step s" in table, "the table labels its times PREDICTED")
sys.exit(1 if fails else 0)
EOF

# bad flags: one line on stderr starting "error:", a non-zero exit
rc=0
for args in "-z 4" "-r 3" "-gpu a100" "-e gpt9:x" "-n 0" "-b 0" "-x 1" "-n" "-n 8" \
            "-e gpt3:c12288 -t 4096" "-e llama3.1:8b -n 1 -z 3" "-ov 1.5"; do
    err=$(./plan $args 2>&1 >/dev/null); code=$?
    if [ $code -ne 0 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && [[ "$err" == error:* ]]; then
        echo "ok   ./plan $args: $err"
    else
        echo "FAIL ./plan $args: exit $code, stderr: $err"; rc=1
    fi
done
exit $rc
