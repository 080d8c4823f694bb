#!/usr/bin/env bash
# scripts/bench_compare.py: this run's gpu_check summary next to the newest committed one on
# the same GPU. Summaries are written here by hand in gpu_check.sh's format, with figures
# chosen so the expected changes are plain arithmetic: a drop of more than 3% is flagged
# DROP, a smaller drop or a gain is not, a run on another GPU model is never the baseline,
# the newest file (by name) is, and no baseline or no device line is said and exits 0.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
out=test/out/bench_compare
rm -rf "$out"; mkdir -p "$out/results"
fail() { echo "FAIL: $*"; exit 1; }

summary() {  # summary FILE DEVICE ATT_TFLOPS COPY_GBS D12_TOKS D48_TOKS D48_FP8_TOKS
    {
        echo "== gpu_check 2026-11-01 10:00:00 UTC"
        echo "device: $2, 570.86, 9.0, 81559 MiB"
        printf '%-40s %-5s %-6s %8s %s\n' attention_forward:gpt2 bf16 PASS "$3" TFLOP/s
        printf '%-40s %-5s %-6s %8s %-8s %s\n' encoder_forward:gpt2 bf16 PASS "$4" GB/s 71.3%
        printf '%-14s %-5s %-4s %10s %12s %8s %10s\n' model prec B ms/step tok/s MFU 'peak MiB'
        printf '%-14s %-5s %-4s %10s %12s %8s %10s\n' d12 bf16 32 50.0 "$5" 50.1% 30000
        printf '%-14s %-5s %-4s %10s %12s %8s %10s %9s\n' d48 bf16 8 200.0 "$6" 52.0% 70000 0.3500  # with J/token
        printf '%-14s %-5s %-4s %s\n' d48 bf16 16 "out of memory (not a failure)"
        printf '%-14s %-5s %-4s %10s %12s %8s %10s\n' d48 fp8 8 150.0 "$7" 60.0% 72000  # train_gpt_fp8's row
    } > "$1"
}
# baselines: an older H100 run, the newest H100 run, and a newer run on an H200
summary "$out/results/2026-10-01_h100.txt" "NVIDIA H100 80GB HBM3" 999 999 1 1 1
summary "$out/results/2026-11-01_h100.txt" "NVIDIA H100 80GB HBM3" 100.0 2000.0 600000 40000 50000
summary "$out/results/2026-11-10_h200.txt" "NVIDIA H200" 1 1 1 1 1
# now: attention -4% (DROP), copy -2% (kept), d12 +5%, d48 -10% (DROP), d48 fp8 -4% (DROP, its own row)
summary "$out/now.txt" "NVIDIA H100 80GB HBM3" 96.0 1960.0 630000 36000 48000

"$PY" scripts/bench_compare.py "$out/now.txt" "$out/results" > "$out/report.txt" || fail "exit status $?"
cat "$out/report.txt"
grep -q "compare with $out/results/2026-11-01_h100.txt" "$out/report.txt" || fail "not compared with the newest H100 run"
row() { grep -E "^$1 " "$out/report.txt" || fail "no row for $1"; }
row "attention_forward:gpt2 bf16" | grep -q -- "-4.0%  DROP" || fail "attention -4% not flagged"
row "encoder_forward:gpt2 bf16" | grep -q -- "-2.0%$" || fail "copy -2% flagged or missing"
row "d12 bf16 32" | grep -q -- "+5.0%$" || fail "d12 +5% wrong"
row "d48 bf16 8" | grep -q -- "-10.0%  DROP" || fail "d48 -10% not flagged"
row "d48 fp8 8" | grep -q -- "-4.0%  DROP" || fail "d48 fp8 -4% not flagged"
grep -q "^d48 bf16 16" "$out/report.txt" && fail "an out-of-memory row was compared"
grep -q "compare: 3 figure(s) dropped" "$out/report.txt" || fail "drop count"
echo "ok   drops over 3% flagged, smaller changes not; newest run on the same GPU is the baseline"

# --threshold 5: only d48
"$PY" scripts/bench_compare.py "$out/now.txt" "$out/results" --threshold 5 | grep -q "compare: 1 figure(s) dropped" ||
    fail "--threshold 5"
echo "ok   --threshold"

# another GPU with no committed run; no device line; a missing file
summary "$out/a100.txt" "NVIDIA A100-SXM4-80GB" 1 1 1 1 1
"$PY" scripts/bench_compare.py "$out/a100.txt" "$out/results" | grep -q "no committed run on NVIDIA A100-SXM4-80GB" ||
    fail "no baseline for another GPU"
grep -v '^device:' "$out/now.txt" > "$out/nodevice.txt"
"$PY" scripts/bench_compare.py "$out/nodevice.txt" "$out/results" | grep -q "names no device" || fail "no device line"
if "$PY" scripts/bench_compare.py "$out/missing.txt" "$out/results" 2> "$out/err"; then fail "a missing file exited 0"; fi
grep -q "error: $out/missing.txt" "$out/err" || fail "missing file: $(cat "$out/err")"
echo "ok   no baseline, no device line, missing file"
echo "PASS"
