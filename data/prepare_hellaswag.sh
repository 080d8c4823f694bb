#!/usr/bin/env bash
# prepare_hellaswag.sh: HellaSwag's validation set (10,042 multiple-choice examples) as llm.c's
# eval file, for the trainers' -h 1 (HellaSwag accuracy at every validation). Needs the internet.
#   source: https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl
#   each example: the context, 4 endings (each encoded with a leading space), the label
# Writes data/hellaswag/hellaswag_val.bin (the trainers' default -hf); skips it if it exists.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=data/hellaswag
URL=https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl

source data/fetch.sh  # defines: fetch URL DEST

if [ -f "$OUT/hellaswag_val.bin" ]; then
    echo "hellaswag: already prepared: $OUT/hellaswag_val.bin"
    exit 0
fi
fetch "$URL" "$OUT/hellaswag_val.jsonl"
bash data/get_vocab.sh
make -s tokenize
./tokenize hellaswag "$OUT/hellaswag_val.jsonl" "$OUT/hellaswag_val.bin"
