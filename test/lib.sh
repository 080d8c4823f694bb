# test/lib.sh: what several test scripts share; `source test/lib.sh` after `cd` to the repo root.
# defines: PY, require_pytorch

PY=${PYTHON:-/usr/bin/python3}

# The tests that compare against PyTorch need Debian's python3-torch (and numpy) under $PY:
# without them the test is skipped (exit 77), except in CI, where that is a failure.
require_pytorch() {
    if ! "$PY" -c "import torch, numpy" 2>/dev/null; then
        echo "PyTorch/numpy not importable by $PY (apt-get install python3-torch python3-numpy)"
        [ "${CI:-}" = "true" ] && exit 1 || exit 77
    fi
}
