#!/usr/bin/env bash
# test_tokenizer.sh: ./tokenize and llmc/tokenizer.h against js-tiktoken's "gpt2" encoding
# (npm), which nobody here wrote. Exit 0 pass, 77 skip (with the reason), else fail.
#  1. data/unicode_tables.h is what data/gen_unicode_tables.py generates today
#  2. character classes of all 0x110000 code points agree with JavaScript's \p{L} \p{N} \s
#  3. a corpus of several MB of real, multilingual text, every GPT-2 token, a Unicode sweep
#     and edge cases encodes to exactly js-tiktoken's ids
#  4. decode(encode(x)) == x, for invalid UTF-8 too
#  5. `./tokenize shards`: header, sizes, EOT before each doc, val split, shard rollover,
#     directories, .jsonl, --doc-sep, same bytes for any thread count
#  6. the tokenizer file, read back by llmc/tokenizer.h; damaged inputs give clear errors
#  7. `./tokenize hellaswag`: HellaSwag records -> llm.c's eval file, read back by
#     test/hellaswag_reference.py, equal to js-tiktoken's ids of each context and " " + ending
set -u
cd "$(dirname "$0")/.."
OUT=test/out/tokenizer
VOCAB=data/gpt2_vocab
rm -rf "$OUT" && mkdir -p "$OUT"

# --- prerequisites -------------------------------------------------------------------
. test/tokenizer/common.sh  # defines: skip, die, expect_error, PY, REF, tokenizer_corpus, invalid_utf8_roundtrip
CHECK="$PY test/tokenizer/check.py"
bash data/get_vocab.sh >"$OUT/vocab.log" 2>&1 || skip "no GPT-2 vocabulary: $(tail -n 3 "$OUT/vocab.log" | tr '\n' ' ')"

# --- 1, 2: character classes ---------------------------------------------------------
$PY data/gen_unicode_tables.py >"$OUT/unicode_tables.h" || die "gen_unicode_tables.py failed"
cmp -s "$OUT/unicode_tables.h" data/unicode_tables.h ||
    die "data/unicode_tables.h is stale: run data/gen_unicode_tables.py > data/unicode_tables.h"
$REF classes "$OUT/classes_js.txt" || die "reference.mjs classes failed"
./tokenize unicode-classes >"$OUT/classes_c.txt" || die "./tokenize unicode-classes failed"
$CHECK classes "$OUT/classes_js.txt" "$OUT/classes_c.txt" || die "character classes differ from JavaScript's"

# --- 3: the corpus, token for token --------------------------------------------------
tokenizer_corpus "$OUT/corpus.txt"
$REF encode "$OUT/corpus.txt" "$OUT/corpus_js.ids" || die "js-tiktoken failed on the corpus"
start=$(date +%s%N)
./tokenize encode <"$OUT/corpus.txt" >"$OUT/corpus_c.ids" || die "./tokenize encode failed"
ms=$((($(date +%s%N) - start) / 1000000))
$CHECK ids "$OUT/corpus_js.ids" "$OUT/corpus_c.ids" "$VOCAB" || die "token ids differ from js-tiktoken"
echo "  corpus: $bytes bytes encoded in ${ms} ms (including loading the vocabulary)"

# --- 4: round trips ------------------------------------------------------------------
./tokenize decode <"$OUT/corpus_c.ids" >"$OUT/corpus_back.txt" || die "./tokenize decode failed"
cmp -s "$OUT/corpus.txt" "$OUT/corpus_back.txt" || die "decode(encode(corpus)) != corpus"
invalid_utf8_roundtrip
echo "  round trips: corpus and $(stat -c %s "$OUT/invalid.bin") bytes of invalid UTF-8 come back byte for byte"

# --- 5: shards -----------------------------------------------------------------------
D="$OUT/shards"
mkdir -p "$D/docs/sub"
printf 'First document.\nIt has two lines.\n' >"$D/docs/a.txt"
printf "Second one: it's got numbers 12345 and\ttabs\r\nand CRLF.\r\n" >"$D/docs/b.txt"
printf '  Third, in a sub directory, 日本語 and 👍🏽 emoji.  ' >"$D/docs/sub/c.txt"
: >"$D/docs/sub/empty.txt"  # empty documents are skipped
cat >"$D/d.jsonl" <<'EOF'
{"id": "a}b", "meta": {"x": [1, 2, {"y": "]\"}"}], "z": null}, "text": "JSONL one: \"quoted\", tab\there,\nnew line, \u00e9, \ud83d\ude00, lone \ud800 surrogate \\ \/", "n": -1.5e3, "ok": true}

{"text": "JSONL two <|endoftext|> is plain text"}
  {"score": 0.5, "text": "x", "more": [[], {}]}
EOF
$REF docs "$D/expect1.json" "$D/docs/a.txt" "$D/docs/b.txt" "$D/docs/sub/c.txt" "$D/d.jsonl" || die "reference.mjs docs failed"
./tokenize shards --out "$D/run1/t" --val-docs 1 --shard-tokens 7 --threads 3 "$D/docs" "$D/d.jsonl" >"$D/run1.log" ||
    die "./tokenize shards failed: $(cat "$D/run1.log")"
$CHECK shards "$D/run1/t" "$D/expect1.json" 7 docs:1 || die "shards (directory + jsonl) are wrong"
# one file split at separator lines (a CRLF separator too), every second doc to val
printf 'doc zero\n%%%%\ndoc one\nline two\n%%%%\r\n\n%%%%\ndoc three\n%%%%\n%%%%\ndoc four' >"$D/sep.txt"
printf 'doc zero\n' >"$D/s0"; printf 'doc one\nline two\n' >"$D/s1"; printf '\n' >"$D/s2"
printf 'doc three\n' >"$D/s3"; printf 'doc four' >"$D/s4"
$REF docs "$D/expect2.json" "$D/s0" "$D/s1" "$D/s2" "$D/s3" "$D/s4" || die "reference.mjs docs failed"
./tokenize shards --out "$D/run2/s" --val-fraction 0.5 --doc-sep '%%' "$D/sep.txt" >"$D/run2.log" ||
    die "./tokenize shards --doc-sep failed: $(cat "$D/run2.log")"
$CHECK shards "$D/run2/s" "$D/expect2.json" 100000000 fraction:0.5 || die "shards (--doc-sep) are wrong"
# the output must not depend on the thread count
for k in 1 2; do
    ./tokenize shards --out "$D/threads$k/c" --threads $k --val-fraction 0.05 --shard-tokens 300000 --doc-sep '' \
        "$OUT/corpus.txt" >"$D/threads$k.log" || die "./tokenize shards on the corpus failed"
done
(cd "$D/threads1" && ls) >"$D/ls1"; (cd "$D/threads2" && ls) >"$D/ls2"
cmp -s "$D/ls1" "$D/ls2" && for f in "$D"/threads1/*.bin; do cmp -s "$f" "$D/threads2/$(basename "$f")" || die "$f differs between 1 and 2 threads"; done ||
    die "different shard files with 1 and 2 threads"
echo "  shards: $(tail -n 1 "$D/threads2.log")"

# --- 6: the tokenizer file, llmc/tokenizer.h, error messages -------------------------
T="$OUT/gpt2_tokenizer.bin"
./tokenize tokenizer-file "$T" >/dev/null || die "./tokenize tokenizer-file failed"
$CHECK tokenizer-file "$T" "$VOCAB" || die "tokenizer file is wrong"
g++ -O1 -std=c++17 -Wall -Wextra -o "$OUT/tokenizer_file_check" test/tokenizer/tokenizer_file_check.cpp ||
    die "test/tokenizer/tokenizer_file_check.cpp does not compile"
got=$("$OUT/tokenizer_file_check" "$T" 15496 50256 220 | tr '\n' ' ')
[ "$got" = "ok 50257 50256 48656c6c6f 3c7c656e646f66746578747c3e 20 " ] || die "llmc/tokenizer.h read: $got"
got=$("$OUT/tokenizer_file_check" "$OUT/no_such_file.bin" 2>"$OUT/err.txt")
[ "$got" = missing ] && grep -q "no_such_file.bin" "$OUT/err.txt" || die "a missing tokenizer file must warn and go on"
head -c 5000 "$T" >"$OUT/trunc.bin"
expect_error "truncated tokenizer file" "trunc.bin: truncated" "$OUT/tokenizer_file_check" "$OUT/trunc.bin"
printf 'XXXX' | cat - "$T" | head -c 20000 >"$OUT/magic.bin"
expect_error "wrong magic" "magic.bin: not a tokenizer file" "$OUT/tokenizer_file_check" "$OUT/magic.bin"
$PY -c "
import struct, sys
d = bytearray(open(sys.argv[1], 'rb').read()); d[4:8] = struct.pack('<I', 1); d[12:16] = b'\0\0\0\0'
open(sys.argv[2], 'wb').write(d)" "$T" "$OUT/v1.bin"
got=$("$OUT/tokenizer_file_check" "$OUT/v1.bin" | head -n 1)
[ "$got" = "ok 50257 50256" ] || die "version 1 tokenizer file: $got"
expect_error "decode out of range" "out of range\|vocab size" "$OUT/tokenizer_file_check" "$T" 50257
mkdir -p "$OUT/badvocab"
head -c 400000 "$VOCAB/encoder.json" >"$OUT/badvocab/encoder.json"
cp "$VOCAB/vocab.bpe" "$OUT/badvocab/"
expect_error "truncated encoder.json" "badvocab/encoder.json" ./tokenize encode --vocab-dir "$OUT/badvocab"
expect_error "missing vocab" "nowhere/encoder.json: missing" ./tokenize encode --vocab-dir "$OUT/nowhere"
expect_error "bad id" "not a token id" sh -c "echo 1 2 99999 | ./tokenize decode"
expect_error "unknown flag" "unknown option" ./tokenize shards --out "$OUT/x" --bogus 1 "$D/s0"
echo "  tokenizer file and error messages: ok"
# --- 7. ./tokenize hellaswag ------------------------------------------------------------
# HellaSwag-shaped records (made up here), with quotes, escapes and non-ASCII text
cat >"$OUT/hs.jsonl" <<'EOF'
{"ind": 4, "activity_label": "Cooking", "ctx_a": "A man", "ctx": "A man is standing in a kitchen. He", "endings": ["picks up a knife and cuts the \"onion\".", "jumps into the pool.", "reads a book\nslowly.", "sings."], "split": "val", "label": 0}

{"ctx": "Zwei Katzen sitzen auf dem Dach; sie", "label": 3, "endings": ["schlafen.", "fliegen weg.", "\u00e9coutent \ud83d\ude00", "miauen laut."]}
{"label": 1, "endings": ["a", "  two spaces", "tab\there"], "ctx": "Short"}
EOF
./tokenize hellaswag "$OUT/hs.jsonl" "$OUT/hs.bin" >/dev/null || die "tokenize hellaswag failed"
$REF hellaswag "$OUT/hs.jsonl" "$OUT/hs_js.json" || die "js-tiktoken failed on the HellaSwag records"
$PY test/hellaswag_reference.py dump "$OUT/hs.bin" >"$OUT/hs_c.json" || die "the eval file does not read back"
$PY -c "
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
sys.exit(0 if a == b and len(a) == 3 else 1)" "$OUT/hs_js.json" "$OUT/hs_c.json" \
    || die "tokenize hellaswag: the eval file differs from js-tiktoken's ids: $(head -c 300 "$OUT/hs_c.json")"
printf '{"ctx": "x", "endings": ["a", "b"], "label": 2}\n' >"$OUT/hs_bad.jsonl"
expect_error "hellaswag label out of range" "hs_bad.jsonl:1: label 2 but 2 endings" ./tokenize hellaswag "$OUT/hs_bad.jsonl" "$OUT/hs_bad.bin"
printf '{"ctx": "x", "label": 0}\n' >"$OUT/hs_bad.jsonl"
expect_error "hellaswag without endings" 'needs "ctx", "endings" and "label"' ./tokenize hellaswag "$OUT/hs_bad.jsonl" "$OUT/hs_bad.bin"
[ -e "$OUT/hs_bad.bin" ] && die "a failed ./tokenize hellaswag left its output behind"
echo "  ./tokenize hellaswag: 3 records equal to js-tiktoken's ids; bad records rejected"
echo "PASS: $bytes bytes of text, $(wc -w <"$OUT/corpus_js.ids") tokens identical to js-tiktoken"
