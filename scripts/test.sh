#!/usr/bin/env bash
# The README's second command: install what the tests need, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --test
make -j2 all
# CUDA code must always compile, GPU or not
if command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    # without a GPU the programs are only compiled, never run: compiled for compiling speed (cuda.mk)
    make -j2 cuda-all CUDA_COMPILE_CHECK=auto
else
    echo "nvcc not found: CUDA code not compiled"
fi
make test
