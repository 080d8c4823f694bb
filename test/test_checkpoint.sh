#!/usr/bin/env bash
# Model/state file round trips, bf16 widening, checksums, random init statistics.
set -eu
cd "$(dirname "$0")/.."
make -s build/test_checkpoint
./build/test_checkpoint
