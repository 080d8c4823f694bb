# common.sh: what test/test_tokenizer.sh and test/test_tiktoken.sh share. Sourced from the
# repo root with OUT (the test's output directory) set; ENCODING picks js-tiktoken's encoding
# for reference.mjs (default gpt2). Gives skip, die, expect_error, $PY and $REF, makes sure of
# the prerequisites (node, js-tiktoken at the version test/tokenizer/package.json pins, the
# Debian packages the corpus draws on, ./tokenize built), and defines tokenizer_corpus and
# invalid_utf8_roundtrip.
PY=${PYTHON:-/usr/bin/python3}
REF="node test/tokenizer/reference.mjs"
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }
expect_error() {  # expect_error WHAT PATTERN COMMAND...: must exit non-zero, stderr matching PATTERN
    local what=$1 pat=$2
    shift 2
    "$@" >"$OUT/err.out" 2>"$OUT/err.txt" </dev/null && die "$what: exit status 0"
    grep -q -- "$pat" "$OUT/err.txt" || die "$what: stderr lacks '$pat': $(head -c 300 "$OUT/err.txt")"
}

apt_install() {  # the corpus and the table generator want these Debian packages
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >"$OUT/apt.log" 2>&1
}
command -v node >/dev/null && command -v npm >/dev/null || skip "node/npm not installed (apt-get install nodejs npm)"
[ -f /usr/share/unicode/UnicodeData.txt ] || apt_install unicode-data ||
    skip "/usr/share/unicode/UnicodeData.txt missing (apt-get install unicode-data)"
command -v bible >/dev/null || apt_install bible-kjv || echo "note: no bible-kjv; the corpus goes without it"
make -s tokenize || die "make tokenize failed"
want=$(node -p 'require("./test/tokenizer/package.json").dependencies["js-tiktoken"]')
have=$(node -p 'try { require("./test/node_modules/js-tiktoken/package.json").version } catch (e) { "" }')
if [ "$have" != "$want" ]; then
    # --no-save: test/ gets node_modules/ only (git-ignored), no package.json or lock file
    npm install --no-save --no-audit --no-fund --prefix test "js-tiktoken@$want" >"$OUT/npm.log" 2>&1 ||
        skip "cannot npm install js-tiktoken@$want (offline?): see $OUT/npm.log"
fi

# tokenizer_corpus OUT.txt: several MB of real, multilingual text, a Unicode sweep and edge
# cases (test/tokenizer/build_corpus.py), with every token of the encoding that is valid
# UTF-8; sets $bytes to its size.
tokenizer_corpus() {
    $REF vocab-text "$OUT/vocab.txt" || die "reference.mjs vocab-text failed"
    $PY test/tokenizer/build_corpus.py "$1" "$OUT/vocab.txt" || die "build_corpus.py failed"
    bytes=$(stat -c %s "$1")
    [ "$bytes" -ge 1000000 ] || die "corpus is only $bytes bytes (want >= 1 MB)"
}

# invalid_utf8_roundtrip [VOCABULARY FLAGS...]: decode(encode(x)) == x for $OUT/invalid.bin,
# bytes that are mostly not UTF-8 (overlong forms, surrogates, cut characters)
invalid_utf8_roundtrip() {
    $PY - "$OUT/invalid.bin" <<'EOF'
import random, sys
r = random.Random(1234)
bad = [b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe3\x81", b"\x80", b"\xff", b"\xf0\x9f\x98"]
ok = [b"a", b" ", b"1", b"'s", "é".encode(), b"\n", b"  ", b"\r\n", b"'S", b"1234", b"\t\r"]
parts = [bytes(r.randrange(256) for _ in range(20000))]
for i in range(3000):
    parts.append(r.choice(bad) + r.choice(ok))
open(sys.argv[1], "wb").write(b"".join(parts) + b"\xe2\x82")  # ends inside a character
EOF
    [ $? = 0 ] || die "writing $OUT/invalid.bin failed"
    ./tokenize encode "$@" <"$OUT/invalid.bin" | ./tokenize decode "$@" >"$OUT/invalid_back.bin" ||
        die "round trip of invalid UTF-8 failed"
    cmp -s "$OUT/invalid.bin" "$OUT/invalid_back.bin" || die "decode(encode(x)) != x for invalid UTF-8"
}
