#!/usr/bin/env bash
# bench_flags.sh: the d12 bf16 step (B=64, T=1024) under several sets of the flags that choose
# kernels and memory (-r, -ge, -bg), the rows alternated round after round so that each
# comparison is made on the same warm GPU minutes apart, then d48 (B=8) under the old and the
# new defaults. Each row is scripts/gpu_check_lib.sh's bench_short_row: random init, the
# median step after the 3rd, in scripts/bench_compare.py's row format. For choosing defaults
# on a lent device (its figures go to dev/results):
#   bash dev/bench_flags.sh [ROUNDS]      (default 2; carry gpu_inputs, or it makes its shards)
# Writes $OUT/bench_flags.txt (or ./bench_flags_out/bench_flags.txt); the logs stay in
# ./bench_flags_out. GPU_CHECK_SHORT_STEPS (default 12) steps a row.
set -uo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}
LOGDIR=${GPU_CHECK_LOGDIR:-$PWD/bench_flags_out}
mkdir -p "$LOGDIR"
OUTDIR=${OUT:-$LOGDIR}
SUMMARY=$OUTDIR/bench_flags.txt RESULTS=$LOGDIR/results.tsv
: > "$SUMMARY"
: > "$RESULTS"
# what gpu_check_lib.sh's functions read
EMU=${GPU_CHECK_EMU:-0}  # 1: the emulated trainer, tiny models (a rehearsal: its figures mean nothing)
SFX="" SLOW=1
[ "$EMU" = 1 ] && SFX=_emu SLOW=4
PART=bench_flags SHORT_STEPS=${GPU_CHECK_SHORT_STEPS:-12} GPU_INPUTS=${GPU_INPUTS:-gpu_inputs}
JOBS=$(nproc) BENCH_ROWS=()
export PATH="$PATH:/usr/local/cuda/bin"
# shellcheck source=../scripts/gpu_check_lib.sh
source scripts/gpu_check_lib.sh
[ -x "./train_gpt_bf16$SFX" ] || { echo "bench_flags.sh: no ./train_gpt_bf16$SFX (make -f cuda.mk train_gpt_bf16)" >&2; exit 1; }
say "== bench_flags $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null | head -n1)"
say "commit: $(git rev-parse HEAD 2> /dev/null || echo 'not a git checkout')"
find_bench_data
say "$(printf '%-14s %-5s %-4s %10s %12s %8s %10s %9s' model prec B ms/step tok/s MFU 'peak MiB' J/token)"
for ((round = 1; round <= ROUNDS; round++)); do
    for row in "${BENCH_FLAG_ROWS[@]}"; do  # (gpu_check_lib.sh)
        # shellcheck disable=SC2086
        bench_short_row "${row%%|*}" d12 64 gpt2:l2c64 2 ${row#*|}
    done
done
bench_short_row d48-r1ge1bg0 d48 8 gpt2:l4c64 1 -r 1 -ge 1 -bg 0
bench_short_row d48-defaults d48 8 gpt2:l4c64 1
grep -h "recompute\|-r [0-2]" "$LOGDIR"/bench_short_d*-defaults.log 2> /dev/null | sort -u | head -n 4 | tee -a "$SUMMARY"
