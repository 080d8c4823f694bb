#!/usr/bin/env bash
# The GPU kernels' resources, checked without a GPU (scripts/kernel_resources.py):
#   1. the occupancy arithmetic on launches worked out by hand below
#   2. the ptxas -v parser on a hand-made log (new and old ptxas formats, an sm_80 entry to
#      ignore, a non-entry function's properties, spills, .maxntid from PTX, dynamic smem)
#   3. the comparison on two hand-made tables: every kind of problem, and what is only a note
#   4. every kernel compiled for sm_90a now, against dev/results/kernel_resources_sm90.txt: fails
#      when a default-path kernel spills or its occupancy fell below the table's, or is missing
#   5. the script's occupancy against NVIDIA's own calculator (cuda_occupancy.h, built with g++
#      by test/kernel_occupancy_ref.cpp) on 3,000 random launches and every row of the table
# 1 to 3 need only Python; 4 and 5 need nvcc (skipped with exit 77 without it). Takes about a
# minute on 2 cores (KERNEL_RESOURCES_JOBS, default 2, compiles two sources at a time).
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
KR="$PY scripts/kernel_resources.py"
out=test/out/kernel_resources
rm -rf "$out"; mkdir -p "$out"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# ---------------------------------------------------------------------------------------------
# 1. occupancy: REGS BLOCK SMEM_STATIC SMEM_DYN BARRIERS -> blocks, warps, occupancy, limit.
# H100: registers go to a warp in units of 256, 16384 per quarter of the SM; 64 warps, 32
# blocks, 228 KB = 233472 bytes of shared memory per SM, each block 1024 more, in units of 128.
cat > "$out/occ_cases.txt" << 'EOF'
22 512 0 0 0
128 256 0 74752 1
130 128 0 104448 1
255 128 0 0 1
32 96 0 0 1
32 256 4160 0 1
16 64 0 0 1
40 1024 0 0 1
65 1024 0 0 1
96 128 0 232448 1
96 128 0 232449 1
32 128 0 0 3
34 128 0 0 1
40 64 0 0 1
EOF
# adamw-like: 22*32 = 704 -> 768 a warp; 16384/768 = 21 a quarter, 84 warps, 84/16 = 5 blocks;
#   64/16 = 4 blocks by warps -> 4 blocks, 64 warps
# dk/dv mma at HS=64: 128*32 = 4096; 16384/4096 = 4 a quarter, 16 warps, 16/8 = 2 blocks; smem
#   74752 + 1024 = 75776 (592*128), 233472/75776 = 3 -> 2 blocks, 16 warps, 25%
# dq mma at HS=128: 130*32 = 4160 -> 4352; 16384/4352 = 3 a quarter, 12 warps, 3 blocks of 4; smem
#   104448 + 1024 = 105472 (824*128), 233472/105472 = 2 -> 2 blocks, 8 warps
# 255 registers: 8160 -> 8192; 2 a quarter, 8 warps, 2 blocks of 4
# 96 threads = 3 warps: 32*32 = 1024; 16 a quarter, 64 warps, 64/3 = 21 blocks; 64/3 = 21 by
#   warps -> 21 blocks, 63 warps, 98.4%
# attention_kv: regs 64 warps -> 8 blocks of 8; smem 4160 + 1024 = 5184 -> 5248, 44 blocks
# 2 warps of 16 registers: 512 a warp, 32 a quarter, 128 warps, 64 blocks; warps 32; 32 blocks -> 32
#   blocks, 64 warps, limited by both warps and blocks
# 1024 threads at 40 registers: 1280 a warp, 12 a quarter, 48 warps -> 1 block of 32 warps
# 1024 threads at 65 registers: 2304 a warp x 32 warps = 73728 > 65536 registers a block -> 0
# 227 KB of dynamic smem: 232448 + 1024 = 233472, 1 block; one byte more: over 227 KB -> 0
# 3 barriers: 64/3 = 21 blocks; registers 16 a quarter, 64 warps, 16 blocks -> 16 blocks
# 34 registers: 1088 -> 1280 a warp (in units of 128 it would be 1152: 56 warps); 12 a quarter,
#   48 warps, 12 blocks of 4
# 40 registers, 2 warps a block: 1280, 12 a quarter, 48 warps, 24 blocks (65536/1280 = 51 warps
#   for the SM as one register file would give 25)
cat > "$out/occ_expected.txt" << 'EOF'
blocks 4 warps 64 occupancy 100.0% limit warps
blocks 2 warps 16 occupancy 25.0% limit regs
blocks 2 warps 8 occupancy 12.5% limit smem
blocks 2 warps 8 occupancy 12.5% limit regs
blocks 21 warps 63 occupancy 98.4% limit warps+regs
blocks 8 warps 64 occupancy 100.0% limit warps+regs
blocks 32 warps 64 occupancy 100.0% limit warps+blocks
blocks 1 warps 32 occupancy 50.0% limit regs
blocks 0 warps 0 occupancy 0.0% limit regs
blocks 1 warps 4 occupancy 6.2% limit smem
blocks 0 warps 0 occupancy 0.0% limit smem
blocks 16 warps 64 occupancy 100.0% limit warps+regs
blocks 12 warps 48 occupancy 75.0% limit regs
blocks 24 warps 48 occupancy 75.0% limit regs
EOF
$KR occupancy --batch < "$out/occ_cases.txt" > "$out/occ_got.txt" 2>&1 || fail "occupancy --batch exited non-zero"
if diff "$out/occ_expected.txt" "$out/occ_got.txt" > "$out/occ_diff.txt"; then
    echo "ok: occupancy arithmetic on $(wc -l < "$out/occ_cases.txt") hand-worked launches"
else
    fail "occupancy arithmetic (expected <, got >):"; cat "$out/occ_diff.txt"
fi

# ---------------------------------------------------------------------------------------------
# 2. the parser. A ptxas -v log as CUDA 13 writes it, with an sm_80 entry (to be ignored), a
# device function's properties inside an entry's section (to be skipped) and one entry in the
# CUDA 11/12 format (cmem, no barriers: counted as 1, as the calculator assumes).
cat > "$out/sample.log" << 'EOF'
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z12adamw_kernelP13__nv_bfloat16PfPKS_S1_S1_mffffffffjm' for 'sm_80'
ptxas info    : Function properties for _Z12adamw_kernelP13__nv_bfloat16PfPKS_S1_S1_mffffffffjm
    8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 99 registers, used 0 barriers
ptxas info    : Compiling entry function '_Z12adamw_kernelP13__nv_bfloat16PfPKS_S1_S1_mffffffffjm' for 'sm_90'
ptxas info    : Function properties for _Z12adamw_kernelP13__nv_bfloat16PfPKS_S1_S1_mffffffffjm
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 22 registers, 368 bytes cmem[0]
ptxas info    : Compile time = 37.065 ms
ptxas info    : Compiling entry function '_Z33attention_backward_dkv_mma_kernelILi128EEvP13__nv_bfloat16PKS0_S3_PKfS5_ii' for 'sm_90'
ptxas info    : Function properties for _Z33attention_backward_dkv_mma_kernelILi128EEvP13__nv_bfloat16PKS0_S3_PKfS5_ii
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Function properties for _Z6helperPfi
    24 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers
ptxas info    : Compile time = 1200.5 ms
ptxas info    : Compiling entry function '_Z32attention_backward_dq_mma_kernelILi128EEvP13__nv_bfloat16PKS0_S3_PKfS5_ii' for 'sm_90'
ptxas info    : Function properties for _Z32attention_backward_dq_mma_kernelILi128EEvP13__nv_bfloat16PKS0_S3_PKfS5_ii
    168 bytes stack frame, 164 bytes spill stores, 160 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 168 bytes cumulative stack size
ptxas info    : Compile time = 900.1 ms
ptxas info    : Compiling entry function '_Z27attention_kv_forward_kernelP13__nv_bfloat16PKS_iii' for 'sm_90'
ptxas info    : Function properties for _Z27attention_kv_forward_kernelP13__nv_bfloat16PKS_iii
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 4160 bytes smem
ptxas info    : Compiling entry function '_Z25column_sums_finish_kernelP13__nv_bfloat16S0_PKfiim' for 'sm_90'
ptxas info    : Function properties for _Z25column_sums_finish_kernelP13__nv_bfloat16S0_PKfiim
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Compiling entry function '_Z10new_kernelPf' for 'sm_90'
ptxas info    : Function properties for _Z10new_kernelPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
EOF
# the launch bounds as the PTX states them: 256 and 128 threads, and a 2-D one, 32 x 16
cat > "$out/sample.ptx" << 'EOF'
	// .globl	_Z33attention_backward_dkv_mma_kernelILi128EEvP13__nv_bfloat16PKS0_S3_PKfS5_ii
.visible .entry _Z33attention_backward_dkv_mma_kernelILi128EEvP13__nv_bfloat16PKS0_S3_PKfS5_ii(
	.param .u64 .ptr .align 1 _Z33attention_backward_dkv_mma_kernelILi128EEvP13__nv_bfloat16PKS0_S3_PKfS5_ii_param_0,
	.param .u32 _Z33attention_backward_dkv_mma_kernelILi128EEvP13__nv_bfloat16PKS0_S3_PKfS5_ii_param_6
)
.maxntid 256, 1, 1
{
	.reg .pred 	%p<28>;
}
.visible .entry _Z32attention_backward_dq_mma_kernelILi128EEvP13__nv_bfloat16PKS0_S3_PKfS5_ii(
	.param .u32 _Z32attention_backward_dq_mma_kernelILi128EEvP13__nv_bfloat16PKS0_S3_PKfS5_ii_param_6
)
.maxntid 128, 1, 1
{
}
.visible .entry _Z27attention_kv_forward_kernelP13__nv_bfloat16PKS_iii(
	.param .u32 _Z27attention_kv_forward_kernelP13__nv_bfloat16PKS_iii_param_4
)
.maxntid 256, 1, 1
{
}
.visible .entry _Z25column_sums_finish_kernelP13__nv_bfloat16S0_PKfiim(
	.param .u64 _Z25column_sums_finish_kernelP13__nv_bfloat16S0_PKfiim_param_5
)
.maxntid 32, 16, 1
{
}
.visible .entry _Z12adamw_kernelP13__nv_bfloat16PfPKS_S1_S1_mffffffffjm(
	.param .u64 _Z12adamw_kernelP13__nv_bfloat16PfPKS_S1_S1_mffffffffjm_param_15
)
{
.maxntid 1024, 1, 1
}
EOF
# dynamic shared memory at HS=128, as attention_mma.cuh sizes it: a tile is 64 rows of 128+8 bf16
# = 17408 bytes; dk/dv 6 tiles + P^T and dS^T (2 x 64 x 72 x 2) + 4 x 64 floats = 104448 + 18432
# + 1024 = 123904; dq 6 tiles = 104448. (The .maxntid after adamw's '{' is not its bound.)
printf 'attention_backward_dkv_mma_kernel 128 123904\nattention_backward_dq_mma_kernel 128 104448\n' \
    > "$out/sample_dyn.txt"
# Expected rows: kernel precision path regs spill_st spill_ld stack barriers smem_static smem_dyn
# block blocks warps occupancy limit
#   adamw: LAUNCH's 512 threads, 22 registers (case 1 above) -> 4 blocks, 64 warps
#   dk/dv: 256 threads; regs 2 blocks (case 2); smem 123904 + 1024 = 124928 (976*128), 1 block
#   dq: 128 threads at 255 registers, 2 blocks (case 4); smem 2 blocks (case 3) -> both limit
#   attention_kv: case 6; column_sums: 512 threads (32 x 16), 32 registers: 64 warps, 4 blocks
#     of 16 by registers and by warps; smem 4096 + 1024 = 5120, 45 blocks
#   new_kernel: no LAUNCH entry, no bound: path and block unknown
cat > "$out/parse_expected.txt" << 'EOF'
adamw_kernel bf16 default 22 0 0 0 1 0 0 512 4 64 100.0% warps
attention_backward_dkv_mma_kernel<128> bf16 default 128 0 0 0 1 0 123904 256 1 8 12.5% smem
attention_backward_dq_mma_kernel<128> bf16 default 255 164 160 168 1 0 104448 128 2 8 12.5% regs+smem
attention_kv_forward_kernel bf16 default 32 0 0 0 1 4160 0 256 8 64 100.0% warps+regs
column_sums_finish_kernel bf16 default 32 0 0 0 1 4096 0 512 4 64 100.0% warps+regs
new_kernel bf16 ? 12 0 0 0 0 0 0 0 0 0 ? unknown-block
EOF
if $KR parse "$out/sample.log" bf16 --ptx "$out/sample.ptx" --dyn "$out/sample_dyn.txt" --source sample.cu \
        > "$out/parse_table.txt" 2> "$out/parse_notes.txt"; then
    awk '!/^#/ { $NF = ""; sub(/ +$/, ""); print }' "$out/parse_table.txt" > "$out/parse_got.txt"
    if diff "$out/parse_expected.txt" "$out/parse_got.txt" > "$out/parse_diff.txt"; then
        echo "ok: parser on a hand-made ptxas log (6 entries kept of 7)"
    else
        fail "parser (expected <, got >):"; cat "$out/parse_diff.txt"
    fi
else
    fail "parse exited non-zero:"; cat "$out/parse_notes.txt"
fi

# ptxas's wgmma messages (CUDA 13.0's wording; three of a kind it printed for a forward whose
# wgmma sat on a warpgroup-dependent path): each is a problem, the entries themselves still rows
cat > "$out/wgmma.log" << 'EOF'
ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are serialized due to program dependence on compiler-inserted WG.AR in divergent path in the function '_Z1aPf'
ptxas info    : (C7519) warpgroup.arrive is injected in around line 99947 by compiler to allow use of registers in GMMA in function '_Z1bPf'
ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline stage in the function '_Z1bPf'
ptxas info    : Compiling entry function '_Z1aPf' for 'sm_90a'
ptxas info    : Function properties for _Z1aPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers
EOF
if $KR parse "$out/wgmma.log" bf16 > "$out/wgmma_table.txt" 2> "$out/wgmma_notes.txt"; then
    fail "parse passed a log in which ptxas serialized wgmma"
elif [ "$(grep -c '^FAIL WGMMA C75' "$out/wgmma_notes.txt")" = 3 ] && grep -q "C7520 _Z1aPf" "$out/wgmma_notes.txt" \
        && grep -q "C7519 _Z1bPf" "$out/wgmma_notes.txt" && awk '$1 == "a" { r = $4 } END { exit r != 128 }' "$out/wgmma_table.txt"; then
    echo "ok: ptxas's serialized or injected wgmma (C7520, C7519, C7514) are problems, one a message"
else
    fail "wgmma messages (got):"; cat "$out/wgmma_notes.txt" "$out/wgmma_table.txt"
fi

# ---------------------------------------------------------------------------------------------
# 3. the comparison: the recorded table, then a fresh one with one of each problem
cols="# kernel precision path regs spill_st spill_ld stack barriers smem_static smem_dyn block blocks warps"
cols="$cols occupancy limit source"
cat > "$out/old.txt" << EOF
# a table as committed
$cols
  adamw_kernel bf16 default 22 0 0 0 0 0 0 512 4 64 100.0% warps a.cu
  attention_forward_kernel<64> bf16 default 90 0 0 0 1 0 30208 128 5 20 31.2% regs a.cu
  attention_forward_kernel<80> bf16 default 96 0 0 0 1 0 36352 128 5 20 31.2% regs a.cu
  layernorm_forward_kernel bf16 default 39 0 0 0 0 0 0 256 6 48 75.0% regs a.cu
  attention_backward_dq_kernel<32> fp32 default 72 16 32 16 1 0 23296 128 7 28 43.8% regs a.cu
  ceiling_copy_kernel fp32 dev 14 0 0 0 0 0 0 512 4 64 100.0% warps b.cu
  shard_accumulate_kernel bf16 option 10 0 0 0 0 0 0 256 8 64 100.0% warps a.cu
  old_kernel fp32 default 10 0 0 0 0 0 0 256 8 64 100.0% warps a.cu
EOF
# now: adamw unchanged; attention<64> lost a block (OCCUPANCY); attention<80> gained one (a note);
# layernorm spills (SPILL); dq<32> spills within its waiver (a note); the dev kernel and the
# option kernel spill (notes); old_kernel is gone (a note); gelu is a default kernel the table
# lacks (MISSING); a new dev kernel (a note); new_kernel has no LAUNCH entry (UNKNOWN)
cat > "$out/new.txt" << EOF
$cols
  adamw_kernel bf16 default 22 0 0 0 0 0 0 512 4 64 100.0% warps a.cu
  attention_forward_kernel<64> bf16 default 104 0 0 0 1 0 30208 128 4 16 25.0% regs a.cu
  attention_forward_kernel<80> bf16 default 80 0 0 0 1 0 36352 128 6 24 37.5% regs a.cu
  layernorm_forward_kernel bf16 default 39 8 8 8 0 0 0 256 6 48 75.0% regs a.cu
  attention_backward_dq_kernel<32> fp32 default 72 16 32 16 1 0 23296 128 7 28 43.8% regs a.cu
  ceiling_copy_kernel fp32 dev 14 4 4 4 0 0 0 512 4 64 100.0% warps b.cu
  shard_accumulate_kernel bf16 option 10 4 4 4 0 0 0 256 8 64 100.0% warps a.cu
  gelu_forward_kernel bf16 default 32 0 0 0 0 0 0 256 8 64 100.0% warps+regs a.cu
  stochastic_round_mean_kernel fp32 dev 16 0 0 0 1 128 0 1024 2 64 100.0% warps b.cu
  new_kernel bf16 ? 12 0 0 0 0 0 0 0 0 0 ? unknown-block c.cu
EOF
cat > "$out/compare_expected.txt" << 'EOF'
FAIL MISSING gelu_forward_kernel bf16
FAIL OCCUPANCY attention_forward_kernel<64> bf16
FAIL SPILL layernorm_forward_kernel bf16
FAIL UNKNOWN new_kernel bf16
changed attention_forward_kernel<80> bf16
gone old_kernel fp32
known spill attention_backward_dq_kernel<32> fp32
new stochastic_round_mean_kernel fp32
spill (dev path) ceiling_copy_kernel fp32
spill (option path) shard_accumulate_kernel bf16
EOF
$KR compare "$out/old.txt" "$out/new.txt" > "$out/compare_got_full.txt" 2>&1
rc=$?
# the first words of each line, up to the precision: what and which, without the figures
sed -n -E 's/^((FAIL [A-Z]+|changed|gone|known spill|new|spill \([a-z]+ path\)) [^ :]+ (fp32|bf16)).*/\1/p' \
    "$out/compare_got_full.txt" | sort > "$out/compare_got.txt"
if [ $rc -eq 1 ] && diff "$out/compare_expected.txt" "$out/compare_got.txt" > "$out/compare_diff.txt"; then
    echo "ok: comparison finds the 4 problems and the 6 notes of a hand-made pair of tables"
else
    fail "comparison (exit $rc, want 1; expected <, got >):"; cat "$out/compare_diff.txt" "$out/compare_got_full.txt"
fi
# a waived spill that grows is a problem; a table compared with itself is not
sed 's/^\(  attention_backward_dq_kernel<32> fp32 default 72\) 16 32/\1 24 32/' "$out/old.txt" > "$out/grown.txt"
$KR compare "$out/old.txt" "$out/grown.txt" > "$out/grown_got.txt" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q '^FAIL SPILL attention_backward_dq_kernel<32> fp32: 24 bytes stored' "$out/grown_got.txt"; then
    echo "ok: a spill beyond its waiver fails"
else
    fail "a spill beyond its waiver:"; cat "$out/grown_got.txt"
fi
if $KR compare "$out/old.txt" "$out/old.txt" > "$out/same_got.txt" 2>&1; then
    echo "ok: a table against itself passes"
else
    fail "a table against itself:"; cat "$out/same_got.txt"
fi

# ---------------------------------------------------------------------------------------------
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ] && ! command -v "$NVCC" > /dev/null; then
    [ $failures -gt 0 ] && { echo "$failures failure(s)"; exit 1; }
    echo "SKIP: nvcc not found: the kernels' resources at sm_90a are not checked (parts 1-3 passed)"
    exit 77
fi
export NVCC

# 4. now: every kernel compiled, against the committed table (-j: KERNEL_RESOURCES_JOBS, default 2,
#    this machine's cores; 1 when something else is running)
start=$(date +%s)
$KR check -o "$out/now.txt" -j "${KERNEL_RESOURCES_JOBS:-2}" > "$out/check.txt" 2>&1
rc=$?
cat "$out/check.txt"
echo "(compiled and compared in $(( $(date +%s) - start )) s)"
[ $rc -eq 0 ] || fail "kernel resources against dev/results/kernel_resources_sm90.txt (above)"

# 5. NVIDIA's occupancy calculator against the script, on random launches and the table's rows
CUDA_INC=$(dirname "$(command -v "$NVCC")")/../include
if [ -f "$CUDA_INC/cuda_occupancy.h" ] && command -v "${CXX:-g++}" > /dev/null; then
    "${CXX:-g++}" -std=c++17 -O1 -I"$CUDA_INC" -o "$out/occupancy_ref" test/kernel_occupancy_ref.cpp \
        || fail "test/kernel_occupancy_ref.cpp did not build"
    "$PY" -c '
import random
r = random.Random(16)
for _ in range(3000):
    block = r.choice([r.randint(1, 1024), 32 * r.randint(1, 32)])
    print(r.randint(1, 255), block, r.choice([0, r.randint(0, 48 * 1024)]),
          r.choice([0, r.randint(0, 200 * 1024), r.randint(226 * 1024, 228 * 1024)]), r.choice([0, 1, 1, 2, 3, 16]))
' > "$out/ref_cases.txt"
    # the table's launches (those with a known block size), columns found by name
    [ -f "$out/now.txt" ] && awk '/^# kernel / { for (i = 2; i <= NF; i++) c[$i] = i - 1; next }
        !/^#/ && $c["block"] > 0 { print $c["regs"], $c["block"], $c["smem_static"], $c["smem_dyn"], $c["barriers"] }' \
        "$out/now.txt" >> "$out/ref_cases.txt"
    "$out/occupancy_ref" < "$out/ref_cases.txt" > "$out/ref_nvidia.txt"
    $KR occupancy --batch < "$out/ref_cases.txt" | awk '{ print "blocks", $2, "limit", $8 }' > "$out/ref_script.txt"
    if diff "$out/ref_nvidia.txt" "$out/ref_script.txt" > "$out/ref_diff.txt"; then
        echo "ok: occupancy equals cuda_occupancy.h's on $(wc -l < "$out/ref_cases.txt") launches (blocks and limits)"
    else
        fail "occupancy differs from cuda_occupancy.h (NVIDIA <, script >; cases in $out/ref_cases.txt):"
        head -20 "$out/ref_diff.txt"
    fi
else
    echo "note: no cuda_occupancy.h under $CUDA_INC or no g++: the script's occupancy not compared with NVIDIA's"
fi

[ $failures -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "kernel resources: all checks passed"
