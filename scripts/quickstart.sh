#!/usr/bin/env bash
# The README's first command: from a fresh machine to a trained small GPT.
# Installs what is missing, fetches GPT-2's vocabulary, tokenizes the King James Bible
# (Debian's bible-kjv) into llm.c shards, builds, trains, and prints validation loss and a
# text sample. Runs on the GPU when there is one and a GPU binary builds, else on the CPU.
# Run it again to continue: it resumes from its last checkpoint (-y 1).
# usage: scripts/quickstart.sh [extra trainer flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
# the corpus and tokenizer made already (a run before this one, or carried to a machine without
# internet): only the compiler is needed
if [ -f data/bible/bible_train_000000.bin ] && [ -f data/bible/bible_val_000000.bin ] &&
        [ -f data/gpt2_tokenizer.bin ]; then
    bash scripts/install_deps.sh --build
else
    bash scripts/install_deps.sh
fi
make -j2 train_gpt_cpu tokenize
bash data/get_vocab.sh
bash data/prepare_bible.sh

common=(-i "data/bible/bible_train_*.bin" -j "data/bible/bible_val_*.bin" -tf data/gpt2_tokenizer.bin
        -k cosine -u 20 -q 0.1 -c 0.1 -n 100 -nk 2 -y 1)
cpu_run() {
    echo "training a small GPT (4 layers, 256 channels) on the CPU; a few minutes on 2 cores"
    ./train_gpt_cpu "${common[@]}" -e gpt2:l4c256 -o out/quickstart_cpu -b 8 -t 64 -x 300 -l 2e-3 -v 50 -m 10 \
        -s 100 -g 48 -st 0.8 -sk 40 "$@"
}
if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
    echo "GPU found: building the GPU trainer and training GPT-2 124M (d12) on it"
    # a GPU this build cannot serve (no nvcc, an old driver): fall back to the CPU
    if make -j"$(nproc)" train_gpt_bf16 && ./train_gpt_bf16 "${common[@]}" -e d12 -o out/quickstart_gpu -b 16 -t 1024 \
            -x 500 -l 6e-4 -v 100 -s 100 "$@"; then
        exit 0
    fi
    echo "warning: the GPU trainer failed (see above); training on the CPU instead"
fi
cpu_run "$@"
