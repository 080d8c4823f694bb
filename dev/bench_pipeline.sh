#!/usr/bin/env bash
# bench_pipeline.sh: the pipeline bubble train_gpt_cpu measures (-pp, -pb 1) beside 1F1B's
# (pp-1)/(m+pp-1), for m micro-batches a step. A measurement, not a test: run it on a machine
# with nothing else running and at least PP cores (each stage a process of one thread).
#   bash dev/bench_pipeline.sh [PP] [M ...]     (default: 2 stages, m = 2 4 8)
#   EXTRA="-pl 3,1" bash dev/bench_pipeline.sh  (more trainer flags: here a stage split)
# The model: a 4-layer GPT-2 of C=256 (a random init from test/pytorch_reference.py) on the
# Markov data test/make_test_data.py writes, B=4, T=64, 6 steps (the first is warm-up).
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
pp=${1:-2}
shift || true
ms=("$@")
[ ${#ms[@]} -gt 0 ] || ms=(2 4 8)
make -s train_gpt_cpu
out=build/bench_pipeline
rm -rf "$out"; mkdir -p "$out"
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 300 --maxT 64 --L 4 --NH 4 --C 256 --seed 6 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 40000 --val-tokens 2000 --shards 1 --seed 9 > /dev/null
echo "machine: $(grep -m 1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc --all) cores; commit $(git rev-parse --short HEAD)${EXTRA:+; flags $EXTRA}"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
for m in "${ms[@]}"; do
    d="$out/m$m"
    mpirun -np "$pp" ./train_gpt_cpu -e "$out/model.bin" -i "$out/markov_train_*.bin" -j "$out/markov_val_*.bin" \
        -t 64 -b 4 -d $((256 * m)) -x 6 -v 0 -s 0 -pp "$pp" -pb 1 ${EXTRA:-} -o "$d" > "$d.stdout" 2>&1
    echo "m=$m: $(grep '^pipeline bubble' "$d.stdout" | sed 's/^pipeline bubble, measured (-pb 1): //')"
done
