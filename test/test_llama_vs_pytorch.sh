#!/usr/bin/env bash
# The CPU Llama 3 model (llmc/llama3.h) against PyTorch: debug states of four configurations
# written by test/llama_reference.py (a Llama written apart from the C++, in float64): logits,
# loss, every gradient tensor, 10 AdamW steps with clipping. Grouped-query attention with one
# key/value head and with three query heads per key/value head, an odd head count (NKV = NH),
# T below maxT, head size 128, RoPE theta 10,000 and 500,000, Llama 3.1's RoPE scaling. And the
# descriptors (test_llama_configs): llama3.1:8b/70b/405b against Meta's published parameter
# counts, the small form, descriptors that must be refused.
set -eu
cd "$(dirname "$0")/.."
source test/lib.sh  # defines: PY, require_pytorch
require_pytorch
make -s build/test_llama_debug build/test_llama_configs
echo "--- descriptors: Llama 3.1's released shapes against Meta's parameter counts, bad descriptors"
./build/test_llama_configs
out=test/out/llama_pytorch
mkdir -p "$out"
# the reference checks itself first: gradients against finite differences, RoPE against complex
# multiplication, GQA against a plain loop, the scaled frequencies against a second computation
echo "--- test/llama_reference.py --selftest"
"$PY" test/llama_reference.py --selftest > "$out/selftest.log" 2>&1 || { tail -n 5 "$out/selftest.log"; echo "FAIL: the reference's self-test"; exit 1; }
tail -n 1 "$out/selftest.log"
for cfg in gqa1 odd gqa2 hs128 scaled; do
    "$PY" test/llama_reference.py --config "$cfg" --out "$out" > "$out/$cfg.log"
    echo "--- $cfg"
    ./build/test_llama_debug "$out/llama_${cfg}_debug.bin"
done
