#!/usr/bin/env bash
# bench_cpu.sh: the CPU trainer's speed beside PyTorch's, measured in one run on this machine
# (make bench-cpu). Machines differ from day to day, so only the ratios in one run mean much.
#   1. build/bench_cpu: the matmul kernel's GFLOP/s and share of the FMA peak, then d12 training
#      steps with the per-phase breakdown, and the step's share of the FMA peak;
#   2. on an AVX-512 machine, the matmul table and the step built with -mno-avx512f (the
#      AVX2+FMA kernel, as a machine without AVX-512 builds it), against its own peak;
#   3. dev/bench_pytorch.py: the same model and step in PyTorch (Debian's python3-torch), if
#      it is installed; then the native build once more, so a machine that got slower or
#      faster during the run shows;
#   4. the native step again with one core kept busy by another process (a shell loop), as on
#      a machine shared with other work: the slowdown against the quiet step;
#   5. a summary: ms/step, GFLOP/s of 6N flops, and the ratio to PyTorch.
# usage: dev/bench_cpu.sh [descriptor=d12] [B=4] [T=64] [steps=5]
# BENCH_OUT=FILE also writes everything printed to FILE (dev/results/ keeps such files).
set -u
cd "$(dirname "$0")/.."
desc=${1:-d12} B=${2:-4} T=${3:-64} steps=${4:-5}
PYTHON=${PYTHON:-/usr/bin/python3}
CXX=${CXX:-g++}
# the Makefile's flags (make bench-cpu passes them), for the -mno-avx512f build
CXXFLAGS=${CXXFLAGS:--O3 -march=native -std=c++17 -fopenmp -fno-math-errno -fno-trapping-math}
if [ -n "${BENCH_OUT:-}" ]; then exec > >(tee "$BENCH_OUT") 2>&1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

make -s build/bench_cpu || exit 1
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
# the family and model numbers tell apart CPUs that a VM names alike (AMD: family 25 is Zen 3/4, 26 Zen 5)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" \
     "(family $(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '),"  \
     "model $(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), $(nproc) CPUs," \
     "$(grep -m1 -o -w avx512f /proc/cpuinfo > /dev/null && echo AVX-512 || (grep -m1 -o -w avx2 /proc/cpuinfo > /dev/null && echo AVX2 || echo 'no AVX2'))"
echo "compiler: $($CXX --version | head -n1); threads: ${OMP_NUM_THREADS:-all CPUs}"
echo

echo "=== 1. train_gpt_cpu's kernels and step ($desc B=$B T=$T), native build"
./build/bench_cpu "$desc" "$B" "$T" "$steps" | tee "$tmp/native1.txt"
echo

if $CXX -march=native -dM -E -x c++ /dev/null | grep -q __AVX512F__; then
    echo "=== 2. the same step built with -mno-avx512f (the AVX2+FMA kernel)"
    $CXX $CXXFLAGS -mno-avx512f -o build/bench_cpu_avx2 dev/bench_cpu.cpp -lm || exit 1
    ./build/bench_cpu_avx2 "$desc" "$B" "$T" "$steps" | tee "$tmp/avx2.txt"
    echo
fi

if $PYTHON -c "import torch" > /dev/null 2>&1; then
    echo "=== 3. PyTorch, the same model and step"
    $PYTHON dev/bench_pytorch.py --model "$desc" --B "$B" --T "$T" --steps "$steps" | tee "$tmp/pytorch.txt"
    echo
    echo "=== 3b. train_gpt_cpu again (native), after PyTorch"
    ./build/bench_cpu "$desc" "$B" "$T" "$steps" 0 | tee "$tmp/native2.txt"
    echo
else
    echo "=== 3. PyTorch: not installed ($PYTHON cannot import torch; scripts/install_deps.sh --test installs it)"
    echo
fi

echo "=== 4. train_gpt_cpu (native) with one core kept busy by another process"
sh -c 'while :; do :; done' &
busy_pid=$!
./build/bench_cpu "$desc" "$B" "$T" "$steps" 0 | tee "$tmp/busy.txt"
kill "$busy_pid" 2> /dev/null; wait "$busy_pid" 2> /dev/null
echo

# the figures of a result line: "median MS ms/step | TOK tokens/s | G GFLOP/s of 6N flops (P% of ..."
ms_of() { sed -n 's/^\(median\|pytorch:\) \([0-9.]*\) ms\/step.*/\2/p' "$1"; }
gflops_of() { sed -n 's/.* | \([0-9.]*\) GFLOP\/s of 6N flops.*/\1/p' "$1" | head -n1; }
share_of() { sed -n 's/.*(\([0-9]*%\) of the FMA peak, \([0-9]*\) GFLOP\/s).*/\1 of \2/p' "$1"; }
row() {  # row NAME FILE
    [ -s "$2" ] || return 0
    local ms g share ratio=""
    ms=$(ms_of "$2"); g=$(gflops_of "$2"); share=$(share_of "$2")
    [ -n "$ms" ] || return 0
    [ -n "${torch_ms:-}" ] && ratio=$(awk -v a="$torch_ms" -v b="$ms" 'BEGIN { printf "%.2fx", a / b }')
    printf "%-44s %10s %12s %22s %12s\n" "$1" "$ms" "$g" "${share:--}" "$ratio"
}
torch_ms=$( [ -s "$tmp/pytorch.txt" ] && ms_of "$tmp/pytorch.txt" )
echo "=== summary: $desc B=$B T=$T, fp32, median ms/step of $steps steps each"
printf "%-44s %10s %12s %22s %12s\n" "" "ms/step" "GFLOP/s 6N" "share of FMA peak" "vs PyTorch"
row "train_gpt_cpu (native build)" "$tmp/native1.txt"
row "train_gpt_cpu (native build, after PyTorch)" "$tmp/native2.txt"
row "train_gpt_cpu (-mno-avx512f: AVX2+FMA)" "$tmp/avx2.txt"
row "PyTorch $($PYTHON -c 'import torch; print(torch.__version__)' 2>/dev/null)" "$tmp/pytorch.txt"
quiet_ms=$(ms_of "$tmp/native1.txt")
[ -s "$tmp/native2.txt" ] && quiet_ms=$(printf '%s\n%s\n' "$quiet_ms" "$(ms_of "$tmp/native2.txt")" | sort -n | head -n1)
busy_ms=$(ms_of "$tmp/busy.txt")
if [ -n "$busy_ms" ] && [ -n "$quiet_ms" ]; then
    echo "one core busy with another process: $busy_ms ms/step, $(awk -v b="$busy_ms" -v q="$quiet_ms" \
        'BEGIN { printf "%.2fx", b / q }') the quiet step's $quiet_ms ms (GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-3000 (set by the program)})"
fi
exit 0
