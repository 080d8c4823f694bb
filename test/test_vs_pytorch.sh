#!/usr/bin/env bash
# The CPU trainer's numbers against PyTorch: debug states of several configurations
# (logits, loss, every gradient, 10 AdamW steps with clipping).
set -eu
cd "$(dirname "$0")/.."
source test/lib.sh  # defines: PY, require_pytorch
require_pytorch
make -s build/test_gpt2_debug
out=test/out/pytorch
mkdir -p "$out"
for cfg in small awkward tiny hs64; do
    "$PY" test/pytorch_reference.py --config "$cfg" --out "$out" > "$out/$cfg.log"
    echo "--- $cfg"
    ./build/test_gpt2_debug "$out/${cfg}_model.bin" "$out/${cfg}_debug.bin"
done
