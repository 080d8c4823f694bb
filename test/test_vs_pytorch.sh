#!/usr/bin/env bash
# The CPU trainer's numbers against PyTorch: debug states of several configurations
# (logits, loss, every gradient, 10 AdamW steps with clipping).
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "PyTorch is not importable by $PY (apt-get install python3-torch)"
    [ "${CI:-}" = "true" ] && exit 1 || exit 77
fi
make -s build/test_gpt2_debug
out=test/out/pytorch
mkdir -p "$out"
for cfg in small awkward tiny; do
    "$PY" test/pytorch_reference.py --config "$cfg" --out "$out" > "$out/$cfg.log"
    echo "--- $cfg"
    ./build/test_gpt2_debug "$out/${cfg}_model.bin" "$out/${cfg}_debug.bin"
done
