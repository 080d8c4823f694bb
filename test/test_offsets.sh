#!/usr/bin/env bash
# The per-layer offsets both trainers compute (activation slices on the CPU and the GPU, the
# parameter and gradient slices) at the shapes where int arithmetic wraps: Llama 3.1 8B, 70B
# and 405B at B=1, T=8192 and GPT-3 175B at T=2048, against 64-bit offsets test/test_offsets.cu
# works out from the published shapes. Built for the emulated GPU (the GPU headers are CUDA);
# nothing is allocated.
set -u
cd "$(dirname "$0")/.."
make -s build/emu/test_offsets || { echo "FAIL: build/emu/test_offsets did not build"; exit 1; }
./build/emu/test_offsets
