#!/usr/bin/env bash
# The GPU checks (every dev/cuda kernel against the CPU reference, sanitizers) run through
# scripts/gpu_check.sh on a machine with an NVIDIA GPU; elsewhere this test is skipped.
set -u
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    echo "no NVIDIA GPU here: GPU checks skipped (CI compiles the CUDA code in scripts/test.sh)"
    exit 77
fi
bash scripts/gpu_check.sh
