#!/usr/bin/env bash
# scripts/plot_runs.py: two short CPU training runs plotted side by side; every PNG is checked
# (signature, IHDR dimensions, size, both runs' colours drawn); a missing, empty or malformed
# metrics.jsonl is one "error:" line and exit 1. Skips (77) only if matplotlib cannot be had.
set -eu
cd "$(dirname "$0")/.."
PY=/usr/bin/python3  # Debian's python: python3-matplotlib, python3-numpy
if ! "$PY" -c "import matplotlib" 2>/dev/null; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
    echo "installing python3-matplotlib"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-matplotlib > /dev/null 2>&1 || true
    if ! "$PY" -c "import matplotlib" 2>/dev/null; then
        echo "matplotlib is not importable by $PY and could not be installed (apt-get install python3-matplotlib)"
        [ "${CI:-}" = "true" ] && exit 1 || exit 77
    fi
fi
make -s train_gpt_cpu
out=test/out/plots
rm -rf "$out"; mkdir -p "$out"
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 300 --maxT 32 --L 2 --NH 2 --C 64 --seed 3 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 20000 --val-tokens 3000 --seed 4 > /dev/null
"$PY" test/hellaswag_reference.py make --model "$out/model.bin" --out "$out/hs" --examples 8 --maxT 32 > /dev/null
for lr in 3e-3 1e-3; do  # one thread: the 2-core machine may be shared, and spinning OpenMP threads crawl then
    OMP_NUM_THREADS=1 ./train_gpt_cpu -e "$out/model.bin" -i "$out/markov_train_*.bin" -j "$out/markov_val_*.bin" -o "$out/run_lr$lr" \
        -b 4 -t 32 -x 30 -l $lr -u 5 -q 0.1 -v 10 -m 4 -s 0 -h 1 -hf "$out/hs/random.bin" > "$out/run_lr$lr.txt" 2>&1 \
        || { echo "FAIL train_gpt_cpu (lr $lr):"; tail -5 "$out/run_lr$lr.txt"; exit 1; }
done
# "mfu" and "watts" fields (the GPU trainer's) get their own charts
sed '/"train"/s/}$/,"mfu":0.4,"watts":310.5}/' "$out/run_lr1e-3/metrics.jsonl" > "$out/mfu.jsonl"
mkdir -p "$out/run_mfu"; mv "$out/mfu.jsonl" "$out/run_mfu/metrics.jsonl"

"$PY" scripts/plot_runs.py "$out/run_lr3e-3" "$out/run_lr1e-3" --out "$out/charts"
"$PY" scripts/plot_runs.py "$out/run_mfu"   # default: run_mfu/plots
"$PY" - "$out" <<'PYEOF'
import os, struct, sys
import numpy as np
import matplotlib.image as mpimg
out = sys.argv[1]

def check_png(path, want_wh=None, colours=()):
    blob = open(path, "rb").read()
    assert blob[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: no PNG signature"
    length, kind = struct.unpack(">I4s", blob[8:16])
    assert kind == b"IHDR" and length == 13, f"{path}: first chunk is not IHDR"
    w, h = struct.unpack(">II", blob[16:24])
    assert want_wh is None or (w, h) == want_wh, f"{path}: {w}x{h}, expected {want_wh}"
    assert 10_000 < len(blob) < 3_000_000, f"{path}: {len(blob)} bytes"
    img = mpimg.imread(path)[..., :3]
    for name, rgb in colours:  # the run's line colour must be drawn
        hit = np.all(np.abs(img - np.array(rgb)) < 0.02, axis=-1).sum()
        assert hit > 50, f"{path}: only {hit} pixels of {name}'s colour"
    return w, h, len(blob)

blue, orange = (0.122, 0.467, 0.706), (1.0, 0.498, 0.055)  # matplotlib's tab10 0 and 1
both = [("run_lr3e-3", blue), ("run_lr1e-3", orange)]
for name in ["loss_vs_step", "loss_vs_tokens", "lr", "grad_norm", "tokens_per_s", "hellaswag"]:
    w, h, n = check_png(f"{out}/charts/{name}.png", (800, 500), both)
    print(f"ok charts/{name}.png: PNG {w}x{h}, {n} bytes, both runs drawn")
assert not os.path.exists(f"{out}/charts/mfu.png"), "mfu.png written though no run logs mfu"
assert not os.path.exists(f"{out}/charts/power.png"), "power.png written though no run logs watts"
w, h, n = check_png(f"{out}/charts/overview.png", None, both)
print(f"ok charts/overview.png: PNG {w}x{h}, {n} bytes, both runs drawn; no mfu.png without mfu")
w, h, n = check_png(f"{out}/run_mfu/plots/mfu.png", (800, 500), [("run_mfu", blue)])
print(f"ok run_mfu/plots/mfu.png: PNG {w}x{h}, {n} bytes (mfu chart when the field is there)")
w, h, n = check_png(f"{out}/run_mfu/plots/power.png", (800, 500), [("run_mfu", blue)])
print(f"ok run_mfu/plots/power.png: PNG {w}x{h}, {n} bytes (power chart when \"watts\" is there)")
PYEOF

expect_error() {  # expect_error NAME PATTERN ARGS...
    local name=$1 pattern=$2; shift 2
    set +e; "$PY" scripts/plot_runs.py "$@" --out "$out/bad_charts" > /dev/null 2> "$out/stderr.txt"; local rc=$?; set -e
    local lines; lines=$(wc -l < "$out/stderr.txt")
    if [ $rc -ne 1 ] || [ "$lines" -ne 1 ] || ! grep -q "^error: .*$pattern" "$out/stderr.txt"; then
        echo "FAIL $name: exit $rc, $lines stderr lines (wanted exit 1 and one line matching '$pattern'):"; cat "$out/stderr.txt"; exit 1
    fi
    echo "ok $name: $(cat "$out/stderr.txt")"
}
mkdir -p "$out/empty_run" "$out/no_metrics" "$out/broken_run"
: > "$out/empty_run/metrics.jsonl"
{ head -3 "$out/run_lr1e-3/metrics.jsonl"; echo '{"step": 3, "kind": "train", "loss": 5.1'; } > "$out/broken_run/metrics.jsonl"
expect_error "missing dir" "does_not_exist: no such directory" "$out/run_lr1e-3" "$out/does_not_exist"
expect_error "dir without metrics.jsonl" "no_metrics/metrics.jsonl: not found" "$out/no_metrics"
expect_error "empty metrics.jsonl" "empty_run/metrics.jsonl: empty" "$out/empty_run"
expect_error "malformed line" "broken_run/metrics.jsonl:4: not a JSON object" "$out/broken_run"
[ -e "$out/bad_charts" ] && { echo "FAIL charts written for bad input"; exit 1; }
echo "all plot checks passed"
