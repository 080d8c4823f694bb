#!/usr/bin/env bash
# Installs what gptrain needs on a fresh Debian/Ubuntu machine, skipping what is there
# (judged by the command or file each package provides, so a Node.js installed some other
# way is left alone).
# usage: scripts/install_deps.sh [--test | --build]   (--test adds what the test suite needs;
#        --build: only the compiler and make, for a machine whose corpus and tokenizer are made)
set -euo pipefail
missing=()
need() {  # need PACKAGE CHECK-COMMAND...
    local pkg=$1; shift
    "$@" > /dev/null 2>&1 || missing+=("$pkg")
}
need g++ command -v g++
need make command -v make
if [ "${1:-}" != "--build" ]; then
    need bible-kjv command -v bible
    need unicode-data test -f /usr/share/unicode/UnicodeData.txt
    need python3 command -v python3
    need curl command -v curl
    need ca-certificates test -d /etc/ssl/certs
    need nodejs command -v node
    command -v npm > /dev/null 2>&1 || missing+=(npm)
fi
if [ "${1:-}" = "--test" ]; then
    need python3-torch /usr/bin/python3 -c "import torch"
    need python3-numpy /usr/bin/python3 -c "import numpy"
    # PyTorch's BLAS: without OpenBLAS it falls back to the reference BLAS, 10x+ slower
    # (the PyTorch tests take longer, and make bench-cpu's side-by-side would be unfair)
    need libopenblas0-pthread sh -c 'ls /usr/lib/*/openblas-pthread/libblas.so.3'
    need python3-matplotlib /usr/bin/python3 -c "import matplotlib"
    need openmpi-bin command -v mpirun      # multi-process tests (test_multirank.sh)
    need libopenmpi-dev command -v mpicxx
    need clang-tidy command -v clang-tidy   # the int-widening check (test_int_widening.sh)
    need clang command -v clang++           # fuzz targets (test_fuzz.sh), and libFuzzer, which clang
    need libclang-rt-dev sh -c 'ls /usr/lib/llvm-*/lib/clang/*/lib/*/libclang_rt.fuzzer*.a'  # only recommends
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo > /dev/null || { echo "error: need root (or sudo) to apt-get install ${missing[*]}"; exit 1; }
    SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
