#!/usr/bin/env bash
# No int product reaches an offset or a size (scripts/check_int_widening.py): clang-tidy's
# bugprone-implicit-widening-of-multiplication-result over every CPU source and, through
# scripts/cu2cpp.py's plain-C++ copies, every GPU source, in fp32 and bf16. A flagged line passes
# only with `// int-bound(NAME)` naming a bound that an assertion tagged `// int-bound: NAME`
# states. First the check is shown to fail: planted lines (the Llama backward's
# `l * N * 2 * F`, a size_t from an int product, a waiver naming no assertion) must be flagged
# and a waiver with its assertion must pass; then the tree must be clean.
# Needs clang-tidy (scripts/install_deps.sh --test): skipped without it, except in CI.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
out=test/out/int_widening
rm -rf "$out"; mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
if ! command -v "${CLANG_TIDY:-clang-tidy}" > /dev/null; then
    echo "no clang-tidy (apt-get install clang-tidy)"
    [ "${CI:-}" = "true" ] && exit 1 || exit 77
fi

# 1. the check can fail
cat > "$out/planted.cpp" <<'CPP'
#include <cstddef>
constexpr int TILE = 64;
static_assert(TILE * TILE < (1 << 20), "tile");  // int-bound: planted_tile
float* layer_fch(float* fch, int l, int N, int F) { return fch + l * N * 2 * F; }
size_t bytes_of(int B, int T) { return B * T * sizeof(float); }
float* waived_without_bound(float* t, int r) { return t + r * TILE; }  // int-bound(no_such_bound)
float* waived(float* t, int r) { return t + r * TILE; }  // int-bound(planted_tile)
CPP
"$PY" scripts/check_int_widening.py --only "$out/planted.cpp" > "$out/planted.txt"
rc=$?
cat "$out/planted.txt"
[ $rc -ne 0 ] || fail "the planted int products passed the check"
for line in 4 5 6; do
    grep -q "planted.cpp:$line:" "$out/planted.txt" || fail "planted line $line was not flagged"
done
grep -q "planted.cpp:7:" "$out/planted.txt" && fail "a waiver with an asserted bound was flagged"
echo "ok   planted: l * N * 2 * F, B * T * sizeof(float) and a waiver naming no assertion are flagged; an asserted waiver passes"

# 2. the tree is clean
make -s build/emu/src/.stamp || fail "scripts/cu2cpp.py"
"$PY" scripts/check_int_widening.py build/emu/src > "$out/tree.txt"
rc=$?
cat "$out/tree.txt"
[ $rc -eq 0 ] || fail "int products widened into offsets or sizes (see above)"
