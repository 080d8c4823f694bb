#!/usr/bin/env python3
"""kernel_resources.py: every GPU kernel's registers, spills, shared memory and stack at sm_90a
(cuda.mk's target on an H100/H200: sm_90 with Hopper's own instructions), as ptxas reports
them, with its theoretical occupancy on an H100; and the check CI runs on them.

    python3 scripts/kernel_resources.py generate [-o FILE] [-j N]
    python3 scripts/kernel_resources.py check [TABLE] [-o NEW] [-j N]
    python3 scripts/kernel_resources.py compare OLD NEW
    python3 scripts/kernel_resources.py parse LOG PRECISION [--ptx FILE] [--dyn FILE] [--source NAME]
    python3 scripts/kernel_resources.py occupancy REGS BLOCK SMEM_STATIC SMEM_DYN [BARRIERS]

generate compiles SOURCES (below) for sm_90a only, device code only (nvcc -cubin), fp32 and bf16,
with -Xptxas -v, and writes one row per kernel instantiation and precision to FILE (default
dev/results/kernel_resources_sm90.txt). check does the same into a temporary table (or NEW) and
compares it with TABLE (default the committed one): it exits 1, one line per problem, when a
kernel on the default path spills, when its occupancy is below the table's, when a default-path
kernel is missing from the table, when a kernel has no entry in LAUNCH below (its block size
and path unknown), or when ptxas says it serialized a kernel's wgmma (wgmma_problems). compare does the comparison alone, on two tables. parse turns a saved
`ptxas -v` log into table rows and occupancy turns one kernel's resources into its occupancy
line: test/test_kernel_resources.sh feeds both hand-made inputs whose answers it knows.

Columns: kernel (demangled, template arguments kept), precision, path (below), regs per thread,
spill stores and loads (bytes per thread), stack frame (bytes per thread), static and dynamic
shared memory (bytes per block), block (threads per block at launch), then on an H100: blocks
and warps resident per SM, occupancy (warps / 64) and what limits it. Only the registers,
spills, stack and static shared memory come from ptxas; the block size is the __launch_bounds__
of the kernel where it has one (the .maxntid in the PTX that nvcc keeps), else LAUNCH's; the
dynamic shared memory is computed by the launchers' own functions (DYNAMIC_SMEM), compiled and
run on the host, so the table cannot drift from them.

Path: default = launched by the trainer (train_gpt.cu) or by generation (generate.cu) with
default flags for some model shape, every head size counted: the bf16 trainer's tensor-core
attention (attention_*_mma, -ak -1) and the CUDA-core one (fp32, other head sizes, -ak 0) alike.
option = only behind a flag. dev = only in the dev/cuda programs.
Standard library only; needs nvcc and c++filt for generate and check.
"""
import argparse
import concurrent.futures
import datetime
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TABLE = "dev/results/kernel_resources_sm90.txt"

# What is compiled: the trainer holds every kernel of llmc/cuda but two; the KV-cache attention
# of generate.cu comes from its dev program (the same header, a twentieth of the compile
# time), and two dev programs define kernels of their own; fp8.cuh's kernels come from
# dev/cuda/fp8.cu until train_gpt_fp8 launches them. `generate` checks that every
# __global__ function of KERNEL_DIRS is in one of these, so a new source cannot be forgotten.
SOURCES = ["train_gpt.cu", "dev/cuda/attention_kv.cu", "dev/cuda/adamw.cu", "dev/cuda/ceilings.cu", "dev/cuda/attention.cu",
           "dev/cuda/fp8.cu", "dev/cuda/wgmma.cu", "dev/cuda/attention_wgmma.cu"]
# sources whose device code is for another target than NVCC_FLAGS' (none now: cuda.mk builds
# every program for sm_90a on a Hopper; the wgmma kernels exist in that code only)
SOURCE_ARCH = {}
KERNEL_DIRS = ["llmc/*.cuh", "llmc/cuda/*.cuh", "dev/cuda/*.cu", "dev/cuda/*.cuh", "data/*.cu", "train_gpt.cu"]
PRECISIONS = {"fp32": [], "bf16": ["-DENABLE_BF16"]}
# cuda.mk's NVCC_FLAGS for the device side (-lineinfo kept: the table is of what runs)
NVCC_FLAGS = ["-std=c++17", "-O3", "-lineinfo", "-diag-suppress", "1675", "-arch=sm_90a"]

# Each kernel's launch, read from its launcher: (threads per block, path, where). The block
# size is used only when the kernel has no __launch_bounds__ (with one, .maxntid wins and a
# different number here is reported). "<= 256": the launcher takes min(256, the 16-byte channel
# groups rounded up to 32), and the table records the cap, 256. Smaller widths launch fewer:
# at C = 768 (GPT-2 124M) 192 threads in fp32 and 96 in bf16, where encoder_backward_wte_kernel
# holds 60 and 63 warps instead of 64 and fp32's norm_backward_partials_kernel 36 instead of 40.
LAUNCH = {
    "accumulate_kernel": (256, "option", "common.cuh accumulate: 256 (-bg 1's bias gradients, -z 2's slices)"),
    "adamw_kernel": (512, "default", "adamw.cuh adamw_update: block = 512"),
    "adamw_kernel_vec": (512, "default", "adamw.cuh adamw_update: block = 512 (4 elements a thread)"),
    "attention_backward_dkdv_kernel": (128, "default", "attention.cuh: ATT_THREADS"),
    "attention_backward_dkv_mma_kernel": (256, "default", "attention_mma.cuh: MMA_ATT_DKV_THREADS (<HS,1>: -ak 2's one-kernel backward; <HS,2>: dev/cuda/attention's bulk-reduction dq, its dynamic shared memory 8 x 16 x (HS/2 + 8) floats more than the table's)"),
    "attention_backward_dq_kernel": (128, "default", "attention.cuh: ATT_THREADS"),
    "attention_backward_dkv_mma_w32_kernel": (128, "default", "attention_mma.cuh: MMA_ATT_DKV_W32_THREADS (the launcher's choice without dq_accum at head sizes 48 and 64 where 3 blocks fit an SM: an H100/H200)"),
    "attention_backward_dq_mma_kernel": (128, "default", "attention_mma.cuh: MMA_ATT_THREADS"),
    "attention_backward_dq_mma_qreg_kernel": (128, "default", "attention_mma.cuh: MMA_ATT_THREADS"),
    "attention_backward_preprocess_kernel": (256, "default", "attention.cuh attention_backward_preprocess: 256"),
    "attention_backward_dkv_wgmma_kernel": (128, "option", "attention_wgmma.cuh: WG_ATT_THREADS x WG (WG warpgroups: the __launch_bounds__ gives each instance's; -ak 3 takes <64,1,false>; <64,1,true>, dQ by atomics, is dev/cuda/attention_wgmma's variant; 50 / 66 / 58 KB of dynamic shared memory not in the table)"),
    "attention_backward_dq_wgmma_kernel": (128, "option", "attention_wgmma.cuh: WG_ATT_THREADS x WG (as the dk/dv kernel; -ak 3 takes <64,1>; 49 / 65 KB of dynamic shared memory not in the table)"),
    "attention_dq_finish_kernel": (256, "option", "attention_mma.cuh attention_backward_mma: 256 (-ak 2's one-kernel backward)"),
    "attention_forward_kernel": (128, "default", "attention.cuh: ATT_THREADS"),
    "attention_forward_mma_kernel": (128, "default", "attention_mma.cuh: MMA_ATT_THREADS"),
    "attention_forward_wgmma_kernel": (128, "option", "attention_wgmma.cuh: WG_ATT_THREADS x WG (-ak 3 takes <64,1,64>; <64,1,128>, key tiles of 128, is dev/cuda/attention_wgmma's variant; 41 / 49 / 73 KB of dynamic shared memory at head size 64, 81 / 97 KB at 128, not in the table)"),
    "attention_wgmma_probe_kernel": (1, "option", "attention_wgmma.cuh attention_wgmma_problem: <<<1, 1>>> (-ak 3's check for sm_90a code)"),
    "attention_fwd_variant_kernel": (128, "default", "attention_mma.cuh: MMA_ATT_THREADS (<128,2,false>: head size 128; the rest dev/cuda/attention --bench)"),
    "attention_kv_forward_kernel": (256, "default", "attention_kv.cuh: ATT_KV_THREADS (generation)"),
    "ceiling_copy_kernel": (512, "dev", "dev/cuda/ceilings.cu ceiling_copy: 512"),
    "classifier_kernel": (512, "default", "classifier.cuh: CLASSIFIER_BLOCK"),
    "classifier_smem_kernel": (512, "dev", "classifier.cuh: CLASSIFIER_BLOCK (dev/cuda/classifier until a GPU times it; Vp values of dynamic shared memory not in the table: 2 blocks an SM at GPT-2's 50,304 in bf16)"),
    "classifier_tp_finish_kernel": (512, "option", "classifier.cuh: CLASSIFIER_BLOCK (-tp: the vocab-parallel classifier)"),
    "classifier_tp_stats_kernel": (512, "option", "classifier.cuh: CLASSIFIER_BLOCK (-tp: the vocab-parallel classifier)"),
    "column_sums_finish_kernel": (512, "default", "common.cuh column_sums_finish: dim3(32, FINISH_SPLIT)"),
    "encoder_backward_heavy_kernel": (256, "default", "encoder.cuh encoder_backward: <= 256 (as the wte kernel)"),
    "encoder_backward_wpe_kernel": (256, "default", "encoder.cuh encoder_backward: 256"),
    "encoder_backward_wte_kernel": (256, "default", "encoder.cuh encoder_backward: <= 256"),
    "encoder_forward_kernel": (256, "default", "encoder.cuh encoder_forward: 256"),
    "fused_residual_layernorm_forward_kernel": (256, "default", "layernorm.cuh: 256"),
    "fp8_amax_finish_kernel": (256, "dev", "fp8.cuh fp8_cast_launch: 256 (train_gpt_fp8 to come, issue 26)"),
    "fp8_cast_kernel": (256, "dev", "fp8.cuh: FP8_CAST_THREADS (train_gpt_fp8 to come, issue 26)"),
    "fp8_cast_transpose_kernel": (256, "dev", "fp8.cuh: FP8_CAST_THREADS (train_gpt_fp8 to come, issue 26)"),
    "fp8_cast_transpose_tiles_kernel": (256, "dev", "fp8.cuh: FP8_CAST_THREADS (train_gpt_fp8's backward casts)"),
    "fp8_cast_act_kernel": (256, "dev", "fp8.cuh: FP8_CAST_THREADS (train_gpt_fp8's casts of GELU and SwiGLU)"),
    "fp8_scaling_update_kernel": (128, "dev", "fp8.cuh fp8_scaling_update: 128 (train_gpt_fp8 to come, issue 26)"),
    "fp8_scaling_copy_gemm_kernel": (128, "dev", "fp8.cuh fp8_scaling_copy_gemm: 128 (train_gpt_fp8's resume)"),
    "gelu_backward_kernel": (256, "default", "gelu.cuh: 256 (-ge 1, or no DGELU epilogue, leaves the backward to it)"),
    "gelu_forward_kernel": (256, "default", "gelu.cuh: 256 (-r 1, where -r 0 does not fit, recomputes GELU with it)"),
    "global_norm_finish_kernel": (512, "default", "global_norm.cuh global_norm_squared: 512"),
    "global_norm_partials_kernel": (512, "default", "global_norm.cuh: GLOBAL_NORM_THREADS"),
    "layernorm_forward_kernel": (256, "default", "layernorm.cuh: 256"),
    "matmul_bias_partials_kernel": (256, "default", "matmul.cuh matmul_bias_backward: <= 256"),
    "norm_backward_dinp_kernel": (256, "default", "norm_backward.cuh norm_backward: 256 (the two passes: LayerNorm and RMSNorm rows wider than the one pass takes)"),
    "norm_backward_onepass_kernel": (256, "default", "norm_backward.cuh norm_backward: NORM_BWD_WARPS * 32 (<LN,CH,TW>; dynamic shared memory 8/TW x 2C floats for LayerNorm, x C for RMSNorm, at most 48 KiB, not in this table)"),
    "norm_backward_partials_kernel": (256, "default", "norm_backward.cuh norm_backward: <= 256 (the two passes)"),
    "rmsnorm_forward_kernel": (256, "default", "rmsnorm.cuh rmsnorm_forward: 256 (Llama)"),
    "rope_rotate_kernel": (256, "default", "rope.cuh rope_launch: 256 (Llama)"),
    "sp_permute_kernel": (256, "option", "sequence_parallel.cuh sp_permute: 256 (-sp: rows between NCCL's rank order and (b, t) order)"),
    "stochastic_round_mean_kernel": (1024, "dev", "dev/cuda/adamw.cu: <<<1, 1024>>>"),
    "swiglu_backward_kernel": (256, "default", "swiglu.cuh swiglu_backward: 256 (Llama)"),
    "swiglu_forward_kernel": (256, "default", "swiglu.cuh swiglu_forward: 256 (Llama)"),
    "wgmma_gemm_kernel": (128, "dev", "dev/cuda/wgmma.cu: one warpgroup (the check of the wgmma instructions, sm_90a)"),
}

# Kernels with dynamic shared memory: the launcher's function of the head size (template argument)
DYNAMIC_SMEM = {
    "attention_forward_kernel": "attention_forward_smem",
    "attention_backward_dkdv_kernel": "attention_dkdv_smem",
    "attention_backward_dq_kernel": "attention_dq_smem",
    "attention_forward_mma_kernel": "mma_att_fwd_smem",
    "attention_backward_dq_mma_kernel": "mma_att_dq_smem",
    "attention_backward_dq_mma_qreg_kernel": "mma_att_dq_smem",
    "attention_backward_dkv_mma_kernel": "mma_att_dkv_smem",
    "attention_backward_dkv_mma_w32_kernel": "mma_att_dkv_smem",
}
DYNAMIC_SMEM_HEADER = "llmc/cuda/attention_mma.cuh"  # declares all of them (bf16 build: mma_att_*)

# Default-path kernels allowed to spill, at most these bytes (stores, loads), each with its reason.
# Regenerating the table does not extend this list: a new spill has to be written here by hand.
SPILL_WAIVERS = {
    ("attention_backward_dq_kernel<32>", "fp32"): (16, 32, "CUDA 13.0 ptxas spills 16 bytes at 72 registers "
                                                    "with 255 allowed; head size 32 is no GPT-2 preset"),
}

COLUMNS = ["kernel", "precision", "path", "regs", "spill_st", "spill_ld", "stack", "barriers", "smem_static",
           "smem_dyn", "block", "blocks", "warps", "occupancy", "limit", "source"]
TEXT_COLUMNS = ["kernel", "precision", "path", "limit", "source"]
INT_COLUMNS = ["regs", "spill_st", "spill_ld", "stack", "barriers", "smem_static", "smem_dyn", "block", "blocks",
               "warps"]

# ---------------------------------------------------------------------------------------------
# Theoretical occupancy on an H100 (compute capability 9.0). The numbers are the programming
# guide's "Technical Specifications per Compute Capability" table for 9.0 (64K 32-bit registers,
# 64 warps, 32 blocks and 228 KB of shared memory per SM, 227 KB per block, 255 registers per
# thread); the rules are those of the occupancy calculator the toolkit ships as
# include/cuda_occupancy.h (cudaOccMaxActiveBlocksPerMultiprocessor and the functions it calls:
# cudaOccRegAllocationGranularity, cudaOccSubPartitionsPerMultiprocessor,
# cudaOccSMemAllocationGranularity, cudaOccSMemPerBlock, cudaOccMaxBlocksPerSMBlockBarrierLimit).
# The test compiles that header and checks this function against it on every row.
#   blocks = min(warps limit, blocks limit, registers limit, shared memory limit, barrier limit)
#   warps limit     = 64 // warps per block, warps per block = ceil(block / 32)
#   blocks limit    = 32
#   registers limit: a warp is given regs * 32 registers rounded up to 256; each of the 4 SM
#                    sub-partitions holds 65536 / 4 registers, so 4 * (16384 // that) warps fit,
#                    and // warps per block blocks (0 if the block exceeds 65536 registers, with
#                    its warps rounded up to a multiple of 4, or regs > 255)
#   smem limit      = 233472 // (static + dynamic + 1024 reserved per block, rounded up to 128);
#                    0 above 227 KB + 1 KB (the default carveout gives a block the whole 228 KB)
#   barrier limit   = 64 // barriers used (2 per block slot), none when the kernel uses none
#   occupancy       = blocks * warps per block / 64
H100 = {
    "warps_per_sm": 64, "blocks_per_sm": 32, "regs_per_sm": 65536, "regs_per_block": 65536,
    "max_regs_per_thread": 255, "reg_unit": 256, "sub_partitions": 4, "smem_per_sm": 228 * 1024,
    "smem_per_block_optin": 227 * 1024, "smem_reserved_per_block": 1024, "smem_unit": 128,
    "barriers_per_sm": 64,
}


def round_up(x, unit):
    return (x + unit - 1) // unit * unit


def occupancy(regs, block, smem_static, smem_dyn, barriers=1, dev=H100):
    """(blocks per SM, warps per SM, the limiting factors joined by '+') for one kernel's launch."""
    wpb = (block + 31) // 32
    limits = {"warps": dev["warps_per_sm"] // wpb, "blocks": dev["blocks_per_sm"]}
    reg_warp = round_up(regs * 32, dev["reg_unit"])
    # the hardware's check of a block's registers counts its warps rounded up to the sub-partitions
    if regs > dev["max_regs_per_thread"] or reg_warp * round_up(wpb, dev["sub_partitions"]) > dev["regs_per_block"]:
        limits["regs"] = 0
    elif reg_warp > 0:
        per_part = dev["regs_per_sm"] // dev["sub_partitions"] // reg_warp
        limits["regs"] = per_part * dev["sub_partitions"] // wpb
    smem = round_up(smem_static + smem_dyn + dev["smem_reserved_per_block"], dev["smem_unit"])
    if smem > dev["smem_per_block_optin"] + dev["smem_reserved_per_block"]:
        limits["smem"] = 0
    else:
        limits["smem"] = dev["smem_per_sm"] // smem
    if barriers > 0:
        limits["barriers"] = dev["barriers_per_sm"] // barriers
    blocks = min(limits.values())
    return blocks, blocks * wpb, "+".join(k for k, v in limits.items() if v == blocks)


def percent(warps, dev=H100):
    return "%.1f%%" % (100.0 * warps / dev["warps_per_sm"])

# ---------------------------------------------------------------------------------------------
# ptxas -v output


def parse_ptxas(text):
    """[{mangled, regs, spill_st, spill_ld, stack, smem_static, barriers}] of the sm_90 (and sm_90a) entries.
    ptxas prints per entry: "Compiling entry function 'NAME' for 'sm_90'", "Function properties
    for NAME" + "N bytes stack frame, N bytes spill stores, N bytes spill loads", then
    "Used N registers, used N barriers, N bytes smem" (older ptxas: "Used N registers, N bytes
    cmem[0][, N bytes smem]", no barrier count; both are read). A non-entry function's properties
    (a call through the ABI) are printed under its own name and skipped."""
    entries, cur, props_for = [], None, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)' for 'sm_(\d+a?)'", line)
        if m:
            cur = {"mangled": m.group(1), "regs": None, "spill_st": 0, "spill_ld": 0, "stack": 0,
                   "smem_static": 0, "barriers": 0} if m.group(2) in ("90", "90a") else None
            if cur is not None:
                entries.append(cur)
            props_for = None
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            props_for = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            if cur is not None and props_for == cur["mangled"]:
                cur["stack"], cur["spill_st"], cur["spill_ld"] = (int(g) for g in m.groups())
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and cur is not None and cur["regs"] is None:
            cur["regs"] = int(m.group(1))
            b = re.search(r"used (\d+) barriers", line)
            s = re.search(r"(\d+) bytes smem", line)
            cur["barriers"] = int(b.group(1)) if b else 1  # older ptxas does not say; the calculator assumes 1
            cur["smem_static"] = int(s.group(1)) if s else 0
    return [e for e in entries if e["regs"] is not None]


def wgmma_problems(text):
    """One problem a line where ptxas says it serialized the wgmma pipeline of a function, or
    injected warpgroup.arrive / warpgroup.wait into it ("(C7514) Potential Performance Loss:
    wgmma.mma_async instructions are serialized ...", "(C7519) warpgroup.arrive is injected ..."):
    the code runs, but each wgmma waits for the last, the overlap the kernel was written for gone.
    The usual causes: a wgmma on a path only some threads take, an accumulator or A register
    touched between the wgmma and its wait (ptx_wgmma_fence_operands pins them)."""
    out = []
    for line in text.splitlines():
        m = re.search(r"\((C75\d\d)\) (.*?) in (?:the )?function '([^']+)'", line)
        if m:
            out.append("WGMMA %s %s: %s" % (m.group(1), m.group(3), m.group(2).strip()))
    return out


def parse_maxntid(ptx):
    """{mangled: threads} of the entries that have __launch_bounds__ (.maxntid X, Y, Z in the PTX)."""
    out, cur = {}, None
    for line in ptx.splitlines():
        m = re.match(r"\s*\.(?:visible\s+|weak\s+)*\.entry\s+([\w$]+)", line)
        if m:
            cur = m.group(1)
            continue
        m = re.match(r"\s*\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", line)
        if m and cur is not None:
            out[cur] = int(m.group(1)) * int(m.group(2) or 1) * int(m.group(3) or 1)
        if line.strip().startswith("{"):
            cur = None
    return out


def demangle(names):
    """{mangled: short name}: c++filt's name without the return type and the parameter list."""
    if not names:
        return {}
    tool = next((t for t in ("c++filt", "cu++filt") if _which(t)), None)
    if tool is None:
        sys.exit("kernel_resources: c++filt (binutils) or cu++filt is needed to demangle kernel names")
    res = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True, check=True)
    out = {}
    for mangled, full in zip(names, res.stdout.splitlines()):
        full = full.strip()
        if full.startswith("void "):
            full = full[len("void "):]
        depth, cut = 0, len(full)
        for i, ch in enumerate(full):  # the first '(' outside template brackets ends the name
            if ch == "<":
                depth += 1
            elif ch == ">":
                depth -= 1
            elif ch == "(" and depth == 0:
                cut = i
                break
        out[mangled] = full[:cut].replace(" ", "")
    return out


def _which(tool):
    return any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep))


def base_name(kernel):
    """attention_forward_kernel<64> -> (attention_forward_kernel, 64), the first template argument
    when there are more (attention_fwd_variant_kernel<64,2,true> -> 64); a template of types
    (fp8_cast_kernel<__nv_fp8_e4m3,float,true>) -> (fp8_cast_kernel, None); no template -> (name, None)."""
    m = re.match(r"^(\w+)<(\d+)(?:,[^>]*)?>$", kernel)
    if m:
        return (m.group(1), int(m.group(2)))
    m = re.match(r"^(\w+)<.*>$", kernel)
    return (m.group(1), None) if m else (kernel, None)


def make_rows(entries, precision, source, maxntid, dyn, notes):
    """Table rows of parsed entries; block from .maxntid, else LAUNCH; dynamic smem from dyn."""
    names = demangle([e["mangled"] for e in entries])
    rows = []
    for e in entries:
        kernel = names[e["mangled"]]
        base, hs = base_name(kernel)
        launch = LAUNCH.get(base)
        block = maxntid.get(e["mangled"]) or (launch[0] if launch else None)
        if launch and e["mangled"] in maxntid and maxntid[e["mangled"]] != launch[0]:
            notes.append("note: %s: __launch_bounds__ %d, LAUNCH says %d (the bound is used)"
                         % (kernel, maxntid[e["mangled"]], launch[0]))
        smem_dyn = 0
        if base in DYNAMIC_SMEM:
            smem_dyn = dyn.get((base, hs)) if hs is not None else None
            if smem_dyn is None:
                notes.append("note: %s: no dynamic shared memory size for it" % kernel)
                smem_dyn = 0
        row = {"kernel": kernel, "precision": precision, "path": launch[1] if launch else "?",
               "regs": e["regs"], "spill_st": e["spill_st"], "spill_ld": e["spill_ld"], "stack": e["stack"],
               "barriers": e["barriers"], "smem_static": e["smem_static"], "smem_dyn": smem_dyn,
               "block": block or 0, "source": source}
        if block:
            row["blocks"], row["warps"], row["limit"] = occupancy(e["regs"], block, e["smem_static"], smem_dyn,
                                                                  e["barriers"])
            row["occupancy"] = percent(row["warps"])
        else:
            row.update(blocks=0, warps=0, occupancy="?", limit="unknown-block")
        rows.append(row)
    return rows

# ---------------------------------------------------------------------------------------------
# compiling


def nvcc_path():
    """$NVCC, else nvcc on the PATH, else CUDA's default place (as cuda.mk looks); None if none."""
    if os.environ.get("NVCC"):
        return os.environ["NVCC"]
    if _which("nvcc"):
        return "nvcc"
    return "/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None


def compile_one(nvcc, source, precision, workdir):
    """(ptxas log, PTX text) of one source in one precision, device code for sm_90a only."""
    keep = os.path.join(workdir, "%s_%s" % (source.replace("/", "_"), precision))
    os.makedirs(keep, exist_ok=True)
    flags = [SOURCE_ARCH.get(source, f) if f.startswith("-arch=") else f for f in NVCC_FLAGS]
    cmd = [nvcc] + flags + PRECISIONS[precision] + ["-cubin", "-Xptxas", "-v", "-keep", "-keep-dir", keep,
                                                         "-o", os.path.join(keep, "out.cubin"), source]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("kernel_resources: %s failed:\n%s%s" % (" ".join(cmd), res.stdout, res.stderr))
    ptx = ""
    for p in glob.glob(os.path.join(keep, "*.ptx")):
        with open(p) as f:
            ptx += f.read()
    return res.stdout + res.stderr, ptx


def dynamic_smem_sizes(nvcc, workdir):
    """{(kernel, HS): bytes}: DYNAMIC_SMEM's functions of the launchers, compiled (bf16 build,
    which has them all; PTX only, no ptxas) and run on the host for HS = 8, 16, ..., 256."""
    src = os.path.join(workdir, "dyn_smem.cu")
    with open(src, "w") as f:
        f.write('#include "%s"\n#include <cstdio>\nint main() {\n    for (int hs = 8; hs <= 256; hs += 8) {\n'
                % DYNAMIC_SMEM_HEADER)
        for kernel, fn in sorted(DYNAMIC_SMEM.items()):
            f.write('        printf("%s %%d %%zu\\n", hs, (size_t)%s(hs));\n' % (kernel, fn))
        f.write("    }\n}\n")
    exe = os.path.join(workdir, "dyn_smem")
    cmd = [nvcc, "-std=c++17", "-diag-suppress", "1675", "-arch=compute_90", "-code=compute_90", "-DENABLE_BF16",
           "-I", ROOT, "-o", exe, src]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("kernel_resources: the dynamic shared memory probe did not build (DYNAMIC_SMEM names a "
                 "function the headers no longer have?):\n%s%s" % (res.stdout, res.stderr))
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    return parse_dyn(out)


def parse_dyn(text):
    sizes = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 3:
            sizes[(f[0], int(f[1]))] = int(f[2])
    return sizes


def declared_kernels():
    """{name: file} of every __global__ function in KERNEL_DIRS (by reading the sources); an explicit
    specialization (`kernel<16>(`) counts under its template's name."""
    kernel_re = re.compile(
        r"__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:void\s+)?(\w+)\s*(?:<[^<>()]*>)?\s*\(")
    out = {}
    for pattern in KERNEL_DIRS:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            with open(path) as f:
                for m in kernel_re.finditer(f.read()):
                    out.setdefault(m.group(1), os.path.relpath(path, ROOT))
    return out


def build_rows(jobs):
    """(rows sorted, notes, problems) of every kernel of SOURCES (exits when nvcc fails)."""
    nvcc = nvcc_path()
    if nvcc is None:
        sys.exit("kernel_resources: nvcc not found (set NVCC)")
    notes = []
    with tempfile.TemporaryDirectory(prefix="kernel_resources.") as workdir:
        work = [(s, p) for s in SOURCES for p in PRECISIONS]
        dyn = dynamic_smem_sizes(nvcc, workdir)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            outputs = list(pool.map(lambda w: compile_one(nvcc, w[0], w[1], workdir), work))
    rows, seen = [], {}
    problems = []
    for (source, precision), (log, ptx) in zip(work, outputs):
        problems += ["%s (%s, %s)" % (line, source, precision) for line in wgmma_problems(log)]
        for row in make_rows(parse_ptxas(log), precision, source, parse_maxntid(ptx), dyn, notes):
            key = (row["kernel"], precision)
            if key in seen:  # the same header in two sources: keep the first (the trainer's)
                first = seen[key]
                if any(first[c] != row[c] for c in ("regs", "spill_st", "spill_ld", "stack", "smem_static")):
                    notes.append("note: %s %s differs between %s and %s (the first is kept)"
                                 % (key[0], precision, first["source"], source))
                continue
            seen[key] = row
            rows.append(row)
    compiled = {base_name(r["kernel"])[0] for r in rows}
    problems += ["UNCOMPILED %s (declared in %s): in none of SOURCES in scripts/kernel_resources.py" % (name, path)
                 for name, path in sorted(declared_kernels().items()) if name not in compiled]
    return sort_rows(rows), notes, problems


def sort_rows(rows):
    def key(r):
        base, hs = base_name(r["kernel"])
        return (base, hs or 0, r["precision"], r["kernel"])
    return sorted(rows, key=key)

# ---------------------------------------------------------------------------------------------
# the table


def nvcc_version():
    nvcc = nvcc_path()
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    except (OSError, TypeError):
        return "unknown"
    m = re.search(r"V(\d+\.\d+\.\d+)", out)
    return m.group(1) if m else "unknown"


def git_commit():
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def format_table(rows):
    lines = [
        "# Kernel resources at sm_90a (ptxas -v) and theoretical occupancy on an H100, one row per kernel",
        "# instantiation and precision. Generated by scripts/kernel_resources.py (its docstring explains the",
        "# columns; LAUNCH there says where each block size comes from); test/test_kernel_resources.sh fails",
        "# when a default-path kernel spills or its warps/SM fall below this table's.",
        "# date: %s  nvcc: %s  commit: %s" % (datetime.date.today().isoformat(), nvcc_version(), git_commit()),
        "# bytes: spills and stack per thread, shared memory per block; occupancy = warps / 64",
    ]
    table = [COLUMNS] + [[str(r[c]) for c in COLUMNS] for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(len(COLUMNS))]
    for n, t in enumerate(table):
        cells = [t[i].ljust(widths[i]) if COLUMNS[i] in TEXT_COLUMNS else t[i].rjust(widths[i])
                 for i in range(len(t))]
        line = "  ".join(cells).rstrip()
        lines.append(("# " if n == 0 else "  ") + line)
    return "\n".join(lines) + "\n"


def read_table(path):
    with open(path) as f:
        return parse_table(f.read(), path)


def parse_table(text, name):
    """{(kernel, precision): row} of a table's text (the column names from its '# kernel ...' line)."""
    columns, rows = None, {}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "#":
            if len(fields) > 1 and fields[1] == "kernel":
                columns = fields[1:]
            continue
        if columns is None or len(fields) != len(columns):
            sys.exit("kernel_resources: %s: cannot read the line %r" % (name, line))
        row = dict(zip(columns, fields))
        for c in INT_COLUMNS:
            if c in row:
                row[c] = int(row[c])
        rows[(row["kernel"], row["precision"])] = row
    if columns is None:
        sys.exit("kernel_resources: %s has no '# kernel ...' column line" % name)
    return rows


def compare(old, new):
    """(problems, notes): lines saying what fails and what is only worth knowing."""
    problems, notes = [], []
    for key, r in sorted(new.items()):
        name = "%s %s" % key
        if r["path"] == "?":
            problems.append("UNKNOWN %s (%s): no entry in LAUNCH in scripts/kernel_resources.py: add its block "
                            "size and path" % (name, r["source"]))
            continue
        spilled = r["spill_st"] > 0 or r["spill_ld"] > 0
        if r["path"] == "default" and spilled:
            waiver = SPILL_WAIVERS.get(key)
            if waiver and r["spill_st"] <= waiver[0] and r["spill_ld"] <= waiver[1]:
                notes.append("known spill %s: %d bytes stored, %d loaded, %d registers (waived: %s)"
                             % (name, r["spill_st"], r["spill_ld"], r["regs"], waiver[2]))
            else:
                problems.append("SPILL %s: %d bytes stored, %d loaded per thread, %d registers, %d bytes stack"
                                % (name, r["spill_st"], r["spill_ld"], r["regs"], r["stack"]))
        elif spilled:
            notes.append("spill (%s path) %s: %d bytes stored, %d loaded" % (r["path"], name, r["spill_st"],
                                                                           r["spill_ld"]))
        o = old.get(key)
        if o is None:
            if r["path"] == "default":
                problems.append("MISSING %s: a default-path kernel the table does not have (regenerate it: "
                                "python3 scripts/kernel_resources.py generate)" % name)
            else:
                notes.append("new %s (%s path), not in the table" % (name, r["path"]))
            continue
        if r["path"] == "default" and r["warps"] < o["warps"]:
            problems.append("OCCUPANCY %s: %s (%d warps/SM, %d registers, limit %s) below the table's %s (%d warps, "
                            "%d registers)" % (name, r["occupancy"], r["warps"], r["regs"], r["limit"],
                                              o["occupancy"], o["warps"], o["regs"]))
        elif r["warps"] != o["warps"] or r["regs"] != o["regs"]:
            notes.append("changed %s: %d -> %d registers, %s -> %s" % (name, o["regs"], r["regs"], o["occupancy"],
                                                                     r["occupancy"]))
    for key in sorted(set(old) - set(new)):
        notes.append("gone %s %s: in the table, no longer compiled" % key)
    return problems, notes


def report(problems, notes, count):
    for line in notes:
        print(line)
    for line in problems:
        print("FAIL " + line)
    if problems:
        print("kernel resources: %d problem(s) in %d kernels" % (len(problems), count))
        return 1
    print("kernel resources: %d kernels; no default-path kernel spills (beyond SPILL_WAIVERS) or lost occupancy"
          % count)
    return 0

# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("-o", "--out", default=os.path.join(ROOT, TABLE))
    g.add_argument("-j", "--jobs", type=int, default=1)
    c = sub.add_parser("check")
    c.add_argument("table", nargs="?", default=os.path.join(ROOT, TABLE))
    c.add_argument("-o", "--out", help="also write the regenerated table here")
    c.add_argument("-j", "--jobs", type=int, default=1)
    m = sub.add_parser("compare")
    m.add_argument("old")
    m.add_argument("new")
    p = sub.add_parser("parse")
    p.add_argument("log")
    p.add_argument("precision")
    p.add_argument("--ptx", help="PTX of the same compile, for .maxntid")
    p.add_argument("--dyn", help="lines 'kernel HS bytes' of dynamic shared memory")
    p.add_argument("--source", default="-")
    o = sub.add_parser("occupancy")
    o.add_argument("numbers", type=int, nargs="*", help="REGS BLOCK SMEM_STATIC SMEM_DYN [BARRIERS]")
    o.add_argument("--batch", action="store_true", help="read one 'REGS BLOCK SMEM_STATIC SMEM_DYN BARRIERS' a line")
    a = ap.parse_args()

    if a.cmd == "occupancy":
        cases = [[int(x) for x in line.split()] for line in sys.stdin if line.strip()] if a.batch else [a.numbers]
        for numbers in cases:
            if len(numbers) not in (4, 5):
                ap.error("occupancy takes REGS BLOCK SMEM_STATIC SMEM_DYN [BARRIERS]")
            blocks, warps, limit = occupancy(*numbers)
            print("blocks %d warps %d occupancy %s limit %s" % (blocks, warps, percent(warps), limit))
        return 0
    if a.cmd == "parse":
        with open(a.log) as f:
            log = f.read()
        ptx, dyn, notes = "", {}, []
        if a.ptx:
            with open(a.ptx) as f:
                ptx = f.read()
        if a.dyn:
            with open(a.dyn) as f:
                dyn = parse_dyn(f.read())
        rows = make_rows(parse_ptxas(log), a.precision, a.source, parse_maxntid(ptx), dyn, notes)
        sys.stdout.write(format_table(sort_rows(rows)))
        for line in notes:
            print(line, file=sys.stderr)
        problems = wgmma_problems(log)
        for line in problems:
            print("FAIL " + line, file=sys.stderr)
        return 1 if problems else 0
    if a.cmd == "compare":
        new = read_table(a.new)
        problems, notes = compare(read_table(a.old), new)
        return report(problems, notes, len(new))

    rows, notes, problems = build_rows(a.jobs)
    text = format_table(rows)
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text)
    if a.cmd == "generate":
        for line in notes:
            print(line)
        for line in problems:
            print("FAIL " + line)
        print("wrote %s: %d kernels" % (os.path.relpath(a.out), len(rows)))
        return 1 if problems else 0
    # check: the fresh rows, read back from their text as the table is, against the table
    new = parse_table(text, "the regenerated table")
    cmp_problems, cmp_notes = compare(read_table(a.table), new)
    return report(problems + cmp_problems, notes + cmp_notes, len(new))


if __name__ == "__main__":
    sys.exit(main())
