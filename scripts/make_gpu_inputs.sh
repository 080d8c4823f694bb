#!/usr/bin/env bash
# make_gpu_inputs.sh: prepares, on a machine with PyTorch, the inputs that the trainer checks
# of scripts/gpu_check.sh need, for a GPU machine that may lack python3-torch:
#   DIR/pytorch/{small,awkward,tiny,hs64}_{model,debug}.bin  PyTorch debug states (test/pytorch_reference.py)
#   DIR/llama/llama_{gqa1,odd,gqa2,hs128,scaled}_debug.bin  Llama 3's (test/llama_reference.py)
#   DIR/llama/gqa1_model.bin                            gqa1's random init as a model file (--write-hf,
#                                                       then ./import_hf, built here): vs_cpu, sanitizers
#   DIR/resume/model.bin, markov_{train,val}_*.bin      tiny model + synthetic shards (resume, memcheck)
#   DIR/bench/*_{train,val}_*.bin                       the bible shards if data/bible has them,
#                                                       else synthetic GPT-2-vocabulary shards
#   DIR/gpt2_tokenizer.bin                              for samples, if data/ has it
# DIR (default gpu_inputs) ignores itself (a .gitignore of "*"); carry it to the GPU machine.
#
#   bash scripts/make_gpu_inputs.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-gpu_inputs}"
PY=${PYTHON:-/usr/bin/python3}
mkdir -p "$DIR/pytorch" "$DIR/llama" "$DIR/resume" "$DIR/bench"
echo '*' > "$DIR/.gitignore"

if "$PY" -c "import torch" 2>/dev/null; then
    for cfg in small awkward tiny hs64; do
        "$PY" test/pytorch_reference.py --config "$cfg" --out "$DIR/pytorch" > "$DIR/pytorch/$cfg.log"
    done
    "$PY" test/llama_reference.py --config all --out "$DIR/llama" > "$DIR/llama/llama_reference.log"
    make -s import_hf
    "$PY" test/llama_reference.py --write-hf "$DIR/llama/gqa1_hf" --config gqa1 > /dev/null
    ./import_hf "$DIR/llama/gqa1_hf/model.safetensors" "$DIR/llama/gqa1_model.bin" > /dev/null
    rm -rf "$DIR/llama/gqa1_hf"
    # the CPU trainer's resume test model and data (test/test_resume.sh)
    "$PY" test/pytorch_reference.py --random-checkpoint "$DIR/resume/model.bin" --V 300 --maxT 64 --L 2 --NH 4 \
        --C 64 --seed 5 > /dev/null
else
    echo "warning: PyTorch is not importable by $PY: no debug states (the GPU machine must make them)" >&2
fi
"$PY" test/make_test_data.py --out "$DIR/resume" --vocab 300 --train-tokens 6000 --val-tokens 3000 --shards 2 \
    --seed 9 > /dev/null

if [ -f data/bible/bible_train_000000.bin ] && [ -f data/bible/bible_val_000000.bin ]; then
    cp data/bible/bible_train_000000.bin data/bible/bible_val_000000.bin "$DIR/bench/"
else
    # no corpus here: 2M tokens of a synthetic chain over GPT-2's vocabulary (EOT 50256)
    "$PY" test/make_test_data.py --out "$DIR/bench" --vocab 50257 --train-tokens 2000000 --val-tokens 100000 \
        --shards 1 --seed 11 --prefix synthetic > /dev/null
fi
for tok in data/gpt2_tokenizer.bin gpt2_tokenizer.bin; do
    if [ -f "$tok" ]; then cp "$tok" "$DIR/gpt2_tokenizer.bin"; break; fi
done
echo "gpu inputs in $DIR ($(du -sh "$DIR" | cut -f1)):"
(cd "$DIR" && find . -type f ! -name .gitignore | sort | sed 's/^\.\//  /')
