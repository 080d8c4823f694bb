#!/usr/bin/env bash
# The README's second command: install what the tests need, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --test
make -j2 all
make test
