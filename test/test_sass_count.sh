#!/usr/bin/env bash
# dev/sass_count.py (a kernel's static SASS instruction count from its cubin's ELF sections,
# without a disassembler) against what NVIDIA's compiler is documented to emit: ex2.approx.f32
# without .ftz keeps subnormal results, so ptxas wraps the special function unit's instruction
# in more instructions than ex2.approx.ftz.f32 takes; a kernel of 32 of each must count more for
# the first, a kernel with neither fewer than both, every count a whole instruction above zero;
# and a file that is not a cubin is refused with one line. Needs nvcc: skipped without it.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
out=test/out/sass_count
rm -rf "$out"; mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$NVCC" ]; then echo "no nvcc: skipped"; exit 77; fi
cat > "$out/k.cu" <<'CU'
__device__ __forceinline__ float ex2_ftz(float v) { float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v)); return r; }
__global__ void plain_exp2(float* x) { float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 32; k++) s += exp2f(x[threadIdx.x + 128 * k]);
    x[threadIdx.x] = s; }
__global__ void ftz_exp2(float* x) { float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 32; k++) s += ex2_ftz(x[threadIdx.x + 128 * k]);
    x[threadIdx.x] = s; }
__global__ void no_exp2(float* x) { float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 32; k++) s += x[threadIdx.x + 128 * k];
    x[threadIdx.x] = s; }
CU
"$PY" dev/sass_count.py "$out/k.cu" > "$out/counts.txt" 2> "$out/err.txt" || { cat "$out/err.txt"; fail "sass_count.py failed"; }
cat "$out/counts.txt"
count() { awk -v k="$1" '$2 == k { print $1 }' "$out/counts.txt"; }
plain=$(count plain_exp2) ftz=$(count ftz_exp2) none=$(count no_exp2)
[ -n "$plain" ] && [ -n "$ftz" ] && [ -n "$none" ] || fail "a kernel is missing from the counts"
[ "$none" -gt 0 ] || fail "no_exp2 counts $none instructions"
[ "$ftz" -gt "$none" ] || fail "32 ex2.approx.ftz add nothing ($ftz against $none)"
[ $((plain - ftz)) -ge 64 ] || fail "32 exp2f count $plain, only $((plain - ftz)) more than 32 ex2.approx.ftz ($ftz)"
echo "ok   32 exp2f: $plain instructions; 32 ex2.approx.ftz: $ftz; neither: $none"
"$PY" dev/sass_count.py -k plain "$out/k.cu" > "$out/filtered.txt" || fail "-k failed"
[ "$(wc -l < "$out/filtered.txt")" = 1 ] || fail "-k plain kept $(wc -l < "$out/filtered.txt") kernels"
echo "ok   -k keeps the kernels it names"
printf 'not an ELF file\n' > "$out/bad.cubin"
"$PY" dev/sass_count.py --cubin "$out/bad.cubin" > "$out/bad.txt" 2>&1 && fail "a file that is not a cubin was read"
[ "$(wc -l < "$out/bad.txt")" = 1 ] && grep -q "bad.cubin" "$out/bad.txt" || { cat "$out/bad.txt"; fail "not one line naming the file"; }
echo "ok   not a cubin: $(cat "$out/bad.txt")"
echo "PASS"
