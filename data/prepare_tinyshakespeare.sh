#!/usr/bin/env bash
# prepare_tinyshakespeare.sh: tiny Shakespeare (1.1 MB, about 338K GPT-2 tokens), as in
# llm.c's dev/data/tinyshakespeare.py. Needs the internet.
#   source: https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
#   documents: the blank-line separated speeches; every 10th is the val split
#   (llm.c instead takes the first 32,768 tokens as val)
# Writes data/tinyshakespeare/tiny_shakespeare_{val,train}_000000.bin; skips what exists.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=data/tinyshakespeare
URL=https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt

source data/fetch.sh  # defines: fetch URL DEST

if [ -f "$OUT/tiny_shakespeare_val_000000.bin" ] && [ -f "$OUT/tiny_shakespeare_train_000000.bin" ]; then
    echo "tinyshakespeare: already prepared in $OUT"
    exit 0
fi
fetch "$URL" "$OUT/input.txt"
bash data/get_vocab.sh
make -s tokenize
./tokenize shards --out "$OUT/tiny_shakespeare" --val-fraction 0.1 --doc-sep '' "$OUT/input.txt"
[ -f data/gpt2_tokenizer.bin ] || ./tokenize tokenizer-file data/gpt2_tokenizer.bin
