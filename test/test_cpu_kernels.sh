#!/usr/bin/env bash
# CPU matmul and attention layers vs naive double-precision loops at awkward shapes.
set -u
cd "$(dirname "$0")/.."
make -s build/test_cpu_kernels || exit 1
./build/test_cpu_kernels
