#!/usr/bin/env bash
# test_tiktoken.sh: ./tokenize --tiktoken against js-tiktoken's "cl100k_base" encoding (npm),
# which nobody here wrote. Exit 0 pass, 77 skip (with the reason), else fail.
#  1. js-tiktoken's cl100k_base ranks, written out as a tiktoken file; its pat_str is the
#     pattern data/bpe.h implements (pretokenize_cl100k), and on all the text below that
#     splits it into the same pieces as Node's regex engine does with pat_str
#  2. test_tokenizer.sh's corpus (MBs of real multilingual text, a Unicode sweep, edge cases)
#     with every cl100k token in it, plus cl100k's own cases (contractions in any case,
#     digit runs, CJK, emoji, CR LF runs, whitespace before line breaks, long space runs,
#     mixed scripts, random strings of the characters the pattern treats specially) encode
#     to exactly js-tiktoken's ids; also with a file of only the first 3000 ranks, where
#     nearly every word goes through the rank-ordered merging
#  3. decode(encode(x)) == x, for invalid UTF-8 too; 100257 decodes to <|endoftext|>
#  4. `./tokenize shards --tiktoken`: uint32 shards (header 20240801, 7) holding 100257 +
#     js-tiktoken's ids of each document; --bos-id; uint16 shards (20240520, 1) for a
#     vocabulary that fits
#  5. damaged ranks files and wrong flags: a one-line error naming the file, exit non-zero
#  6. ./generate -tk encodes its prompt and decodes its output as js-tiktoken does
#  7. `./tokenize tokenizer-file --tiktoken`: every token as the ranks file has it, the
#     special ids up to V; the trainer samples with it
set -u
cd "$(dirname "$0")/.."
OUT=test/out/tiktoken
rm -rf "$OUT" && mkdir -p "$OUT"
export ENCODING=cl100k_base  # for reference.mjs
. test/tokenizer/common.sh   # defines: skip, die, expect_error, PY, REF, tokenizer_corpus,
                             # invalid_utf8_roundtrip
CHECK="$PY test/tokenizer/check.py"
TIK="$OUT/cl100k_base.tiktoken"

# --- 1: the ranks file and the pattern -------------------------------------------------
pat=$($REF tiktoken-file "$TIK") || die "reference.mjs tiktoken-file failed"
want_pat="('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
[ "$pat" = "$want_pat" ] || die "js-tiktoken's cl100k_base pat_str is not the pattern data/bpe.h implements: $pat"
[ "$(wc -l <"$TIK")" = 100256 ] || die "$TIK: $(wc -l <"$TIK") lines, want 100256"
head -n 3000 "$TIK" >"$OUT/first3000.tiktoken"

# --- 2: the corpus and cl100k's cases, token for token ----------------------------------
tokenizer_corpus "$OUT/corpus.txt"
$PY - "$OUT/cases.txt" <<'EOF'
import random, sys
t = []
t.append("'s 'S 't 'T 're 'rE 'Re 'RE 've 'vE 'Ve 'VE 'm 'M 'll 'lL 'Ll 'LL 'd 'D\n")
t.append("IT'S THEY'RE WE'VE I'M YOU'LL HE'D DON'T It'S they'Re we'vE 'Sam 'LLama 'Dad x'DAD\n")
t.append("'ſ 'ſt 'ﬅ '\u212a 'K ''S '''LL ' s 'x 'é\n")  # long s, Kelvin sign: no contractions here
t.append(" ".join("1234567"[:k] for k in range(1, 8)) + " " + "".join("9876543"[:k] + "x" for k in range(1, 8)) + "\n")
t.append("a1b22c333d4444 ١٢٣٤٥٦٧ ²³¹ ½⅓ Ⅻ １２３４５ 12,345.6789 -1234567 x123456789y\n")
t.append("日本語の文章を書きます。中文测试，简体字。한국어 문장입니다. 𠀀𠀁𠀂 ｶﾀｶﾅ\n")
t.append("👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇩🇪🇯🇵 ❤️‍🔥 1️⃣ 😀😃😄!! 🙂word word🙂\n")
t.append("a\r\nb\r\n\r\n\r\nc\r\r\n\n\r d \r\n e\n\n\n  \n\t\n!!\r\n\r\n?? \r\n\n.\n")
t.append("trailing   \nspaces \t \n  \n\u00a0\n\u3000\n \u2028 x\u2029\n")
t.append("x" + " " * 1000 + "y" + " " * 17 + "\n" + "\t" * 50 + "z" + " \t" * 40 + "\n")
t.append("Привет世界hello١٢٣ Ελληνικά123abc עבריתabc العربية٣ हिन्दी१२३ ไทย(test) \"quoted\" (word [x] $$$abc\n")
t.append("\tTab \u00a0nbsp ,comma .dot @at #hash ¿qué? ¡sí! «guillemets» —dash— …\n")
alphabet = [" ", " ", "  ", "\n", "\r", "\r\n", "\t", "'", "s", "S", "l", "L", "re", "D", "a", "Z",
            "é", "1", "2", "٣", "²", "日", "本", "한", "!", ".", "(", "😀", "👍🏽", "\u00a0", "\u3000",
            "\u2028", "\u200b", "\u0301", "_", "-", "$"]
r = random.Random(15)
for _ in range(3000):
    t.append("".join(r.choice(alphabet) for _ in range(r.randrange(1, 40))))
open(sys.argv[1], "w", encoding="utf-8", newline="").write("".join(t) + "  \n \n ")
EOF
[ $? = 0 ] || die "writing the cl100k cases failed"
cat "$OUT/corpus.txt" "$OUT/cases.txt" >"$OUT/all.txt"
bytes=$(stat -c %s "$OUT/all.txt")
$REF pretokens "$OUT/all.txt" "$OUT/pretokens_js.txt" || die "reference.mjs pretokens failed"
./tokenize pretokens --cl100k <"$OUT/all.txt" >"$OUT/pretokens_c.txt" || die "./tokenize pretokens failed"
$CHECK pretokens "$OUT/pretokens_js.txt" "$OUT/pretokens_c.txt" "$OUT/all.txt" || die "pre-tokens differ from pat_str's"
$REF encode "$OUT/all.txt" "$OUT/all_js.ids" || die "js-tiktoken failed on the corpus"
start=$(date +%s%N)
./tokenize encode --tiktoken "$TIK" <"$OUT/all.txt" >"$OUT/all_c.ids" || die "./tokenize encode --tiktoken failed"
ms=$((($(date +%s%N) - start) / 1000000))
$CHECK ids "$OUT/all_js.ids" "$OUT/all_c.ids" "$TIK" || die "token ids differ from js-tiktoken's cl100k_base"
echo "  corpus + cl100k cases: $bytes bytes encoded in ${ms} ms (including loading the ranks)"
# a vocabulary of the first 3000 ranks: words are rarely tokens, so merging does the work
TIKTOKEN_FILE="$OUT/first3000.tiktoken" $REF encode "$OUT/cases.txt" "$OUT/small_js.ids" ||
    die "js-tiktoken failed with the first 3000 ranks"
./tokenize encode --tiktoken "$OUT/first3000.tiktoken" <"$OUT/cases.txt" >"$OUT/small_c.ids" ||
    die "./tokenize encode with the first 3000 ranks failed"
$CHECK ids "$OUT/small_js.ids" "$OUT/small_c.ids" "$OUT/first3000.tiktoken" ||
    die "token ids differ from js-tiktoken's with the first 3000 ranks"

# --- 3: round trips ---------------------------------------------------------------------
./tokenize decode --tiktoken "$TIK" <"$OUT/all_c.ids" >"$OUT/all_back.txt" || die "./tokenize decode --tiktoken failed"
cmp -s "$OUT/all.txt" "$OUT/all_back.txt" || die "decode(encode(corpus)) != corpus"
invalid_utf8_roundtrip --tiktoken "$TIK"
got=$(echo "9906 100257 1917" | ./tokenize decode --tiktoken "$TIK")
[ "$got" = "Hello<|endoftext|> world" ] || die "decode of 9906 100257 1917: '$got'"
echo "  round trips: corpus and $(stat -c %s "$OUT/invalid.bin") bytes of invalid UTF-8 come back byte for byte"

# --- 4: shards --------------------------------------------------------------------------
D="$OUT/shards"
mkdir -p "$D/docs"
printf "First document: IT'S 1234567 and 日本語.\r\n\r\nSecond paragraph.   \n" >"$D/docs/a.txt"
printf '  Second, 👍🏽 emoji and \t tabs <|endoftext|> as text ' >"$D/docs/b.txt"
printf '{"text": "JSONL one: \\u00e9, \\ud83d\\ude00\\n\\n x"}\n{"text": "JSONL two"}\n' >"$D/c.jsonl"
$REF docs "$D/expect.json" "$D/docs/a.txt" "$D/docs/b.txt" "$D/c.jsonl" || die "reference.mjs docs failed"
./tokenize shards --tiktoken "$TIK" --out "$D/run1/t" --val-docs 1 --shard-tokens 7 --threads 2 "$D/docs" "$D/c.jsonl" \
    >"$D/run1.log" || die "./tokenize shards --tiktoken failed: $(cat "$D/run1.log")"
$CHECK shards "$D/run1/t" "$D/expect.json" 7 docs:1 100257 20240801 || die "cl100k shards are wrong"
grep -q "uint32 ids" "$D/run1.log" || die "shards log does not say uint32: $(tail -n 1 "$D/run1.log")"
./tokenize shards --tiktoken "$TIK" --bos-id 128000 --out "$D/run2/t" "$D/docs" "$D/c.jsonl" >"$D/run2.log" ||
    die "./tokenize shards --bos-id failed: $(cat "$D/run2.log")"
$CHECK shards "$D/run2/t" "$D/expect.json" 100000000 docs:0 128000 20240801 || die "shards with --bos-id 128000 are wrong"
# the first 3000 ranks and a separator that fits: uint16 shards
TIKTOKEN_FILE="$OUT/first3000.tiktoken" $REF docs "$D/expect_small.json" "$D/docs/a.txt" "$D/docs/b.txt" "$D/c.jsonl" ||
    die "reference.mjs docs with the first 3000 ranks failed"
./tokenize shards --tiktoken "$OUT/first3000.tiktoken" --bos-id 3000 --out "$D/run3/s" --val-fraction 0.5 \
    "$D/docs" "$D/c.jsonl" >"$D/run3.log" || die "./tokenize shards with the first 3000 ranks failed: $(cat "$D/run3.log")"
$CHECK shards "$D/run3/s" "$D/expect_small.json" 100000000 fraction:0.5 3000 20240520 ||
    die "uint16 shards of a small tiktoken vocabulary are wrong"

# --- 5: damaged ranks files, wrong flags --------------------------------------------------
B="$OUT/bad"
mkdir -p "$B"
expect_bad() {  # expect_bad NAME PATTERN: $B/NAME must be refused in one line naming it
    expect_error "$1" "$B/$1: *$2" ./tokenize encode --tiktoken "$B/$1"
    [ "$(wc -l <"$OUT/err.txt")" = 1 ] || die "$1: the error takes more than one line: $(head -c 300 "$OUT/err.txt")"
}
expect_bad missing.tiktoken "cannot open"
: >"$B/empty.tiktoken"
expect_bad empty.tiktoken "no tokens"
bad_line() {  # bad_line NAME KEEP LINE PATTERN: the first KEEP lines of $TIK, then LINE
    { head -n "$2" "$TIK"; echo "$3"; } >"$B/$1"
    expect_bad "$1" "$4"
}
bad_line nospace.tiktoken 5 "Zg==7" "6: expected BASE64 RANK"
bad_line twospaces.tiktoken 5 "Zg== 5 x" "6: expected BASE64 RANK"
bad_line badchar.tiktoken 5 "Z!== 5" "6: 'Z!==' is not base64"
bad_line badlen.tiktoken 5 "Zg= 5" "6: 'Zg=' is not base64"
bad_line badrank.tiktoken 5 "Zg== five" "6: rank 'five' is not an integer"
bad_line negrank.tiktoken 5 "Zg== -5" "6: rank '-5' is not an integer"
bad_line duprank.tiktoken 300 "Zm9vYmFy 3" "301: rank 3 again (first on line 4)"
bad_line gap.tiktoken 300 "Zm9vYmFy 301" "301: rank 301, but 301 tokens must have ranks 0..300, each once (rank 300 is missing)"
bad_line dupbytes.tiktoken 300 "IQ== 300" "301: the same bytes as rank 0 (line 1)"
bad_line long.tiktoken 300 "$(head -c 1025 /dev/zero | base64 -w 0) 300" "301: a token of 1025 bytes"
sed -n '2,300p' "$TIK" | awk '{ print $1, NR - 1 }' >"$B/nobyte.tiktoken"
expect_bad nobyte.tiktoken "no token for byte 0x21"
expect_error "--bos-id without --tiktoken" "goes with --tiktoken" ./tokenize shards --bos-id 5 --out "$B/x" "$D/docs"
expect_error "--vocab-dir and --tiktoken" "not both" ./tokenize encode --vocab-dir data/gpt2_vocab --tiktoken "$TIK"
expect_error "no known separator" "pass --bos-id" ./tokenize shards --tiktoken "$OUT/first3000.tiktoken" --out "$B/x" "$D/docs"
expect_error "bad --bos-id" "expected 0.." ./tokenize shards --tiktoken "$TIK" --bos-id -1 --out "$B/x" "$D/docs"
expect_error "not a token id" "not a token id" sh -c "echo 100256 | ./tokenize decode --tiktoken '$TIK'"
expect_error "tokenizer-file --vocab-size too small" "below the vocabulary" \
    ./tokenize tokenizer-file "$B/t.bin" --tiktoken "$TIK" --vocab-size 100257
expect_error "tokenizer-file, no known separator" "no EOT" ./tokenize tokenizer-file "$B/t.bin" --tiktoken "$OUT/first3000.tiktoken"
[ -e "$B/t.bin" ] && die "a refused ./tokenize tokenizer-file wrote $B/t.bin"
ls "$B"/x_* >/dev/null 2>&1 && die "a refused ./tokenize shards wrote shards"
echo "  damaged ranks files and wrong flags: one-line errors, non-zero exit"
# --- 6: ./generate -tk: a one-step Llama of cl100k's vocabulary (V 100,352) prompted with text
# encodes it as js-tiktoken does (after the separator 100257) and prints what js-tiktoken
# decodes the prompt and the generated ids to
G="$OUT/generate"
rm -rf "$G"; mkdir -p "$G"
make -s train_gpt_cpu generate
./train_gpt_cpu -e llama3:l1c16h2kv1f32v100352 -i "$D/run1/t_train_000000.bin" -b 1 -t 4 -x 1 -v 0 -s 0 -n 1 \
    -o "$G/run" >"$G/train.log" 2>&1 || die "a one-step Llama: $(tail -2 "$G/train.log")"
printf "Hello world, it's 1234567 \xf0\x9f\x91\x8d" >"$G/prompt.txt"
$REF encode "$G/prompt.txt" "$G/prompt_js.ids" || die "reference.mjs encode failed"
gen() { ./generate -e "$G/run/model_00000001.bin" -g 12 -st 0 -se 0 "$@" 2>>"$G/gen.log"; }
gen -pi "100257 $(cat "$G/prompt_js.ids")" -oi 1 >"$G/by_ids.txt" || die "generate -pi: $(tail -2 "$G/gen.log")"
gen -tk "$TIK" -p "$(cat "$G/prompt.txt")" -oi 1 >"$G/by_text.txt" || die "generate -tk: $(tail -2 "$G/gen.log")"
cmp -s "$G/by_ids.txt" "$G/by_text.txt" || die "generate -tk -p: not the continuation of js-tiktoken's ids of the prompt"
gen -tk "$TIK" -p "$(cat "$G/prompt.txt")" >"$G/text.txt" || die "generate -tk (text): $(tail -2 "$G/gen.log")"
echo "$(cat "$G/prompt_js.ids") $(cat "$G/by_ids.txt")" >"$G/all.ids"
$REF decode "$G/all.ids" "$G/expect.txt" || die "reference.mjs decode failed"
echo >>"$G/expect.txt"
cmp -s "$G/expect.txt" "$G/text.txt" || die "generate -tk printed '$(head -c 200 "$G/text.txt")', js-tiktoken decodes '$(head -c 200 "$G/expect.txt")'"
echo "  generate -tk: the prompt's ids and the printed text equal js-tiktoken's ($(wc -w <"$G/by_ids.txt") tokens generated)"
# --- 7: the trainers' tokenizer file from the ranks: header [20240328, 2, V, EOT], then every
# rank's bytes as js-tiktoken's file has them, <|endoftext|> at 100257, "<|special N|>" for the
# other special ids up to V (cl100k's 100,277 by default, or --vocab-size); the trainer decodes
# its samples with it
./tokenize tokenizer-file "$G/cl100k.bin" --tiktoken "$TIK" >"$G/tokfile.log" || die "tokenizer-file --tiktoken failed"
./tokenize tokenizer-file "$G/cl100k_padded.bin" --tiktoken "$TIK" --vocab-size 100352 >>"$G/tokfile.log" ||
    die "tokenizer-file --tiktoken --vocab-size failed"
"$PY" - "$TIK" "$G/cl100k.bin" 100277 "$G/cl100k_padded.bin" 100352 <<'PYCHECK' || die "the tokenizer file is wrong"
import base64, struct, sys
ranks = {}
for line in open(sys.argv[1], "rb"):
    tok, rank = line.split()
    ranks[int(rank)] = base64.b64decode(tok)
for path, V in ((sys.argv[2], int(sys.argv[3])), (sys.argv[4], int(sys.argv[5]))):
    data = open(path, "rb").read()
    header = struct.unpack("<256I", data[:1024])
    assert header[:4] == (20240328, 2, V, 100257), (path, header[:4])
    at, bad = 1024, 0
    for i in range(V):
        n = data[at]
        got = data[at + 1:at + 1 + n]
        at += 1 + n
        want = ranks.get(i, b"<|endoftext|>" if i == 100257 else b"<|special %d|>" % i)
        bad += got != want
    assert bad == 0 and at == len(data), (path, bad, at, len(data))
    print("  %s: %d tokens as the ranks file has them" % (path, V))
PYCHECK
./train_gpt_cpu -e "$G/run/model_00000001.bin" -i "$D/run1/t_train_000000.bin" -b 1 -t 4 -x 1 -v 0 -s 1 -g 8 -n 0 \
    -tf "$G/cl100k_padded.bin" -o "$G/sampled" >"$G/sample.log" 2>&1 || die "a Llama sampling with the tokenizer file failed"
grep -q "^generating:" "$G/sample.log" && ! grep -q "warning\|error" "$G/sample.log" ||
    die "the trainer did not sample with the tokenizer file: $(head -c 300 "$G/sample.log")"
echo "  tokenizer-file --tiktoken: every token as js-tiktoken's ranks file has it; the trainer samples with it"
echo "PASS: $bytes bytes of text, $(wc -w <"$OUT/all_js.ids") tokens identical to js-tiktoken's cl100k_base"
