#!/usr/bin/env bash
# prepare_bible.sh: the default corpus, offline: the King James Bible from Debian's
# bible-kjv package (4.4 MB of text, about 1M GPT-2 tokens).
#   - one document per chapter (1,189 of them), verse references ("Ge1:1 ") stripped,
#     one verse per line; each document starts with EOT (50256)
#   - every 20th chapter (5%, evenly spread over the books) is the val split
# Writes data/bible/bible_val_000000.bin, data/bible/bible_train_000000.bin and the
# tokenizer file data/gpt2_tokenizer.bin. Does nothing for outputs that already exist
# (delete them to redo).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=data/bible
TOKENIZER=data/gpt2_tokenizer.bin

if [ -f "$OUT/bible_val_000000.bin" ] && [ -f "$OUT/bible_train_000000.bin" ] && [ -f "$TOKENIZER" ]; then
    echo "bible: already prepared:"
    ls -l "$OUT"/bible_*.bin "$TOKENIZER" | awk '{print "  " $NF ": " $5 " bytes"}'
    exit 0
fi
if ! command -v bible >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "bible: installing Debian's bible-kjv"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bible-kjv >/dev/null
    else
        echo "error: the 'bible' command is missing: sudo apt-get install bible-kjv" >&2
        exit 1
    fi
fi
bash data/get_vocab.sh
make -s tokenize

if [ ! -f "$OUT/bible_val_000000.bin" ] || [ ! -f "$OUT/bible_train_000000.bin" ]; then
    mkdir -p "$OUT"
    # "Ge1:1 In the beginning..." -> "In the beginning...", and a "%%" line between chapters
    bible -f Gen1:1-Rev22:21 | awk '
        { ref = $1; chapter = ref; sub(/:[0-9]+$/, "", chapter) }
        NR > 1 && chapter != last { print "%%" }
        { last = chapter; print substr($0, length(ref) + 2) }' >"$OUT/kjv.txt.tmp"
    mv "$OUT/kjv.txt.tmp" "$OUT/kjv.txt"
    chapters=$(grep -c '^%%$' "$OUT/kjv.txt" || true)
    [ "$chapters" = 1188 ] || { echo "error: expected 1189 chapters from 'bible', got $((chapters + 1))" >&2; exit 1; }
    ./tokenize shards --out "$OUT/bible" --val-fraction 0.05 --doc-sep '%%' "$OUT/kjv.txt"
fi
if [ ! -f "$TOKENIZER" ]; then
    ./tokenize tokenizer-file "$TOKENIZER"
fi
echo "bible: train with -i '$OUT/bible_train_*.bin' -j '$OUT/bible_val_*.bin' (tokenizer: $TOKENIZER)"
