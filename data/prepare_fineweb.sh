#!/usr/bin/env bash
# prepare_fineweb.sh: FineWeb's 10B-token sample (HuggingFaceFW/fineweb, "sample-10BT"),
# the corpus of llm.c's GPT-2 (124M) reproduction. Needs the internet and about 30 GB
# for the parquet files plus 20 GB for the shards. Each parquet file is streamed as JSONL
# into ./tokenize (INPUT "-"), so no text copy is kept.
#   source: https://huggingface.co/datasets/HuggingFaceFW/fineweb/resolve/main/sample/10BT/
#           000_00000.parquet, 001_00000.parquet, ... (column "text"), fetched in order until
#           the server has no next file
#   documents: the rows; the first 150,000 documents (about 100M tokens, like llm.c's
#   first shard) are the val split; shards of 100M tokens
# usage: data/prepare_fineweb.sh [NFILES]   (default: all; each file is about 0.7B tokens)
# Reading parquet needs pyarrow: if python3 lacks it, a venv in data/fineweb/venv gets it.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=data/fineweb
URL=https://huggingface.co/datasets/HuggingFaceFW/fineweb/resolve/main/sample/10BT
NFILES=${1:-1000}

source data/fetch.sh  # defines: fetch URL DEST

if [ -f "$OUT/fineweb_val_000000.bin" ] && [ -f "$OUT/fineweb_train_000000.bin" ]; then
    echo "fineweb: already prepared in $OUT"
    exit 0
fi
files=()
for ((i = 0; i < NFILES; i++)); do
    name=$(printf '%03d_00000.parquet' "$i")
    if [ "$i" -gt 0 ] && [ ! -s "$OUT/parquet/$name" ] &&
       [ "$(curl -sIL --connect-timeout 10 -o /dev/null -w '%{http_code}' "$URL/$name")" = 404 ]; then
        echo "fineweb: $i parquet files in the sample"
        break
    fi
    fetch "$URL/$name" "$OUT/parquet/$name"
    files+=("$OUT/parquet/$name")
done
PY=python3
if ! $PY -c 'import pyarrow' 2>/dev/null; then
    [ -x "$OUT/venv/bin/python" ] || python3 -m venv "$OUT/venv"
    "$OUT/venv/bin/python" -c 'import pyarrow' 2>/dev/null || "$OUT/venv/bin/pip" install -q pyarrow ||
        { echo "error: cannot install pyarrow (pip install pyarrow) to read parquet" >&2; exit 1; }
    PY="$OUT/venv/bin/python"
fi
bash data/get_vocab.sh
make -s tokenize
$PY -c '
import json, sys
import pyarrow.parquet as pq
for path in sys.argv[1:]:
    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=["text"]):
        for text in batch.column(0).to_pylist():
            sys.stdout.write(json.dumps({"text": text}) + "\n")
' "${files[@]}" | ./tokenize shards --out "$OUT/fineweb" --val-docs 150000 -
[ -f data/gpt2_tokenizer.bin ] || ./tokenize tokenizer-file data/gpt2_tokenizer.bin
