#!/usr/bin/env bash
# FP8 training quality (issue 26): a small GPT-2 and a small Llama 3 train 200 steps of the
# default corpus (the quickstart's Bible, GPT-2 tokens) in fp8 and in bf16 from the same
# initialization (the same -e descriptor and seed: the host draws the weights the same way in
# both binaries), and their curves go side by side in PNGs (scripts/plot_runs.py). The last
# val loss of fp8 must be within 1% of bf16's, and no step may be skipped for non-finite values.
# On the emulated GPU by default (the _emu binaries: small batches, it is slow); BIN_SUFFIX=""
# runs the real ones on a GPU with FP8 tensor cores.
# usage: bash dev/fp8_quality.sh [OUT_DIR]   (default dev/results/<date>_fp8_quality)
#        RUN=0 bash dev/fp8_quality.sh OUT_DIR: only the plots and the verdict, of runs made before
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dev/results/$(date +%Y-%m-%d)_fp8_quality}
suffix=${BIN_SUFFIX-_emu}
steps=${STEPS:-200}
mkdir -p "$out"
if [ "${RUN:-1}" != 0 ]; then
    [ -f data/bible/bible_val_000000.bin ] || bash data/prepare_bible.sh
    make -s train_gpt_fp8$suffix train_gpt_bf16$suffix
    export OMP_NUM_THREADS=1
    common=(-i "data/bible/bible_train_*.bin" -j "data/bible/bible_val_*.bin" -b 4 -t 32 -x "$steps" -l 2e-3 -u 20
            -k cosine -q 0.1 -v 25 -m 4 -s 0 -n 0 -r 0 -f 0 -ak 0)
    run() {  # run NAME PREC MODEL
        ./train_gpt_$2$suffix "${common[@]}" -e "$3" -o "$out/$1" > "$out/$1.stdout" 2>&1
    }
    for family in gpt2:l4c256 llama3:l4c256h4kv2f688v50257; do
        name=${family%%:*}
        run "$name-bf16" bf16 "$family" &
        run "$name-fp8" fp8 "$family" &
        wait
    done
fi
/usr/bin/python3 scripts/plot_runs.py "$out"/gpt2-bf16 "$out"/gpt2-fp8 --out "$out/gpt2_plots" > /dev/null
/usr/bin/python3 scripts/plot_runs.py "$out"/llama3-bf16 "$out"/llama3-fp8 --out "$out/llama3_plots" > /dev/null
# the verdict: the last val loss of each pair; the first, before any update (the same weights: only
# the fp8 GEMMs' rounding apart, 0.1% at most); skipped steps
status=0
: > "$out/summary.txt"
for name in gpt2 llama3; do
    vals() { grep '"kind":"val"' "$out/$name-$1/metrics.jsonl" | sed 's/.*"loss":\([0-9.eE+-]*\).*/\1/'; }
    b_first=$(vals bf16 | head -1) f_first=$(vals fp8 | head -1) b=$(vals bf16 | tail -1) f=$(vals fp8 | tail -1)
    skipped=$(cat "$out/$name-fp8.stdout" "$out/$name-bf16.stdout" | grep -c "SKIPPED: non-finite" || true)
    line=$(awk -v b="$b" -v f="$f" -v b0="$b_first" -v f0="$f_first" -v n="$name" -v s="$skipped" 'BEGIN {
        d = (f - b) / b; if (d < 0) d = -d
        d0 = (f0 - b0) / b0; if (d0 < 0) d0 = -d0
        printf "%s: val loss at step 0 bf16 %.6f fp8 %.6f (%.3f%% apart: the same weights, fp8 GEMMs); at the end bf16 %.6f fp8 %.6f: %.3f%% apart (limit 1%%); %d steps skipped as non-finite\n", n, b0, f0, 100 * d0, b, f, 100 * d, s
        exit !(d <= 0.01 && s == 0 && d0 <= 0.001) }') || status=1
    echo "$line" | tee -a "$out/summary.txt"
done
exit $status
