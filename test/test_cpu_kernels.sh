#!/usr/bin/env bash
# CPU matmul and attention layers vs naive double-precision loops at awkward shapes, once per
# matmul micro-kernel (llmc/cpu/matmul.h) this machine can run:
#   the one -march=native picks (make's own build/test_cpu_kernels);
#   on an AVX-512 machine also the AVX2+FMA kernel (-mno-avx512f), as a machine without
#   AVX-512 builds it; on an AVX2 machine the AVX-512 kernel is compiled, not run;
#   the plain loops (-DGEMM_PLAIN) that every other machine gets.
# The vector kernels sum in the same order, so their matmul digests must match.
set -u
cd "$(dirname "$0")/.."
CXX=${CXX:-g++}
flags="-O3 -march=native -std=c++17 -Wall -Wextra -Wno-unused-parameter -fopenmp -fno-math-errno -fno-trapping-math"
out=test/out/cpu_kernels
rm -rf "$out"; mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }

run() {  # run NAME BINARY: runs it, shows its output, fails the test if it fails
    "$2" > "$out/$1.txt"
    local rc=$?
    echo "--- $1: $(head -n 1 "$out/$1.txt")"
    tail -n +2 "$out/$1.txt"
    [ $rc -eq 0 ] || fail "$1: $2 exited $rc"
}
digest() { grep '^matmul digest' "$out/$1.txt" | cut -d' ' -f3; }

make -s build/test_cpu_kernels || exit 1
run native ./build/test_cpu_kernels

native_has() { $CXX -march=native -dM -E -x c++ /dev/null | grep -q "#define $1 "; }
if native_has __AVX512F__; then
    $CXX $flags -mno-avx512f -o build/test_cpu_kernels_avx2 test/test_cpu_kernels.cpp || fail "AVX2 build"
    run avx2 ./build/test_cpu_kernels_avx2
    [ "$(digest native)" = "$(digest avx2)" ] || fail "AVX-512 and AVX2 kernels give different bits"
    echo "ok   AVX-512 and AVX2 kernels: same matmul digest $(digest avx2)"
elif native_has __AVX2__ && native_has __FMA__; then
    $CXX $flags -mavx512f -c -o "$out/avx512.o" test/test_cpu_kernels.cpp || fail "AVX-512 build"
    echo "ok   AVX-512 kernel compiles (this CPU cannot run it)"
fi

$CXX $flags -DGEMM_PLAIN -o build/test_cpu_kernels_plain test/test_cpu_kernels.cpp || fail "plain build"
run plain ./build/test_cpu_kernels_plain
echo "all builds passed"
