#!/usr/bin/env bash
# prepare_tinystories.sh: TinyStories (Eldan & Li, 2023), the GPT-4 generated V2 files:
# about 2.7M short stories, 470M GPT-2 tokens. Needs the internet (2.2 GB download).
#   source: https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main/
#           TinyStoriesV2-GPT4-train.txt and TinyStoriesV2-GPT4-valid.txt
#   documents: the stories, which those files separate by "<|endoftext|>" lines;
#   the val split is the -valid file
# Writes data/tinystories/TinyStories_val_000000.bin and _train_00000{0..4}.bin.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=data/tinystories
URL=https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main

source data/fetch.sh  # defines: fetch URL DEST

if [ -f "$OUT/TinyStories_val_000000.bin" ] && [ -f "$OUT/TinyStories_train_000000.bin" ]; then
    echo "tinystories: already prepared in $OUT"
    exit 0
fi
fetch "$URL/TinyStoriesV2-GPT4-valid.txt" "$OUT/TinyStoriesV2-GPT4-valid.txt"
fetch "$URL/TinyStoriesV2-GPT4-train.txt" "$OUT/TinyStoriesV2-GPT4-train.txt"
bash data/get_vocab.sh
make -s tokenize
# two runs: every story of the valid file goes to val, every one of the train file to train
./tokenize shards --out "$OUT/TinyStories" --val-fraction 1 --doc-sep '<|endoftext|>' "$OUT/TinyStoriesV2-GPT4-valid.txt"
./tokenize shards --out "$OUT/TinyStories" --doc-sep '<|endoftext|>' "$OUT/TinyStoriesV2-GPT4-train.txt"
[ -f data/gpt2_tokenizer.bin ] || ./tokenize tokenizer-file data/gpt2_tokenizer.bin
