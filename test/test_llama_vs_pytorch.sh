#!/usr/bin/env bash
# The CPU Llama 3 model (llmc/llama3.h) against PyTorch: debug states of four configurations
# written by test/llama_reference.py (a Llama written apart from the C++, in float64): logits,
# loss, every gradient tensor, 10 AdamW steps with clipping. Grouped-query attention with one
# key/value head and with three query heads per key/value head, an odd head count (NKV = NH),
# T below maxT, head size 128, RoPE theta 10,000 and 500,000, Llama 3.1's RoPE scaling. And the
# descriptors (test_llama_configs): llama3.1:8b/70b/405b against Meta's published parameter
# counts, the small form, descriptors that must be refused. Recompute -r 1 and -r 2 on two of
# the configurations: the same checks, and -r 0's gradients bit for bit.
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
# recompute: -r 1 (RMSNorm and SwiGLU again in the backward) and -r 2 (the whole layer again
# from its input) against the same PyTorch states, and bit for bit against -r 0
for cfg in gqa1 gqa2; do
    for r in 1 2; do
        echo "--- $cfg -r $r"
        ./build/test_llama_debug "$out/llama_${cfg}_debug.bin" $r
    done
done
# the trainer at -r 0, 1, 2 (8 layers, V=300, T=256, so the per-layer activations dominate):
# main.log and the model file the same bits, and the drop of the measured peak (resident, above
# what the process held before the model) what the plan's activations say, within 10%
echo "--- train_gpt_cpu -r 0, 1, 2"
make -s train_gpt_cpu
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 6000 --val-tokens 2000 --shards 2 --seed 4 > /dev/null
for r in 0 1 2; do
    rm -rf "$out/r$r"  # a run of this test before left its checkpoints there
    OMP_NUM_THREADS=2 ./train_gpt_cpu -e llama3:l8c256h8kv2f704v300 -i "$out/markov_train_*.bin" \
        -j "$out/markov_val_*.bin" -t 256 -b 2 -x 3 -v 3 -m 1 -s 0 -n 3 -r $r -o "$out/r$r" > "$out/r$r.stdout" 2>&1 ||
        { tail -n 3 "$out/r$r.stdout"; echo "FAIL: train_gpt_cpu -r $r"; exit 1; }
done
acts() { grep -m1 "^memory per process" "$1" | grep -o 'activations [0-9.]* MiB' | cut -d' ' -f2; }
peak() { grep -m1 "^done:" "$1" | grep -o 'peak memory [0-9.]* MiB' | cut -d' ' -f3; }
for r in 1 2; do
    cmp -s "$out/r0/main.log" "$out/r$r/main.log" && cmp -s "$out/r0/model_00000003.bin" "$out/r$r/model_00000003.bin" ||
        { echo "FAIL: -r $r does not train in -r 0's bits"; exit 1; }
    awk -v a0="$(acts "$out/r0.stdout")" -v ar="$(acts "$out/r$r.stdout")" -v p0="$(peak "$out/r0.stdout")" \
        -v pr="$(peak "$out/r$r.stdout")" -v r=$r 'BEGIN {
        plan = a0 - ar; got = p0 - pr
        printf "%s -r %d: main.log and model file are -r 0'"'"'s; activations %.1f MiB (plan), peak %.1f MiB: %.1f MiB less, the plan says %.1f\n",
            (got >= 0.9 * plan && got <= 1.1 * plan && plan > 0) ? "ok" : "FAIL:", r, ar, pr, got, plan
        exit !(got >= 0.9 * plan && got <= 1.1 * plan && plan > 0) }' || exit 1
done
echo "PASS"
