#!/usr/bin/env bash
# bench_device.sh: the benchmarks a lent GPU window runs after scripts/gpu_check.sh's short check
# (whose build it reuses), in three calls of about five minutes each, every row alternated with
# the row it is compared with so that both run on the same warm GPU minutes apart. Each gptrain
# row is scripts/gpu_check_lib.sh's bench_short_row (random init, the median step after the 3rd).
#   bash dev/bench_device.sh 1              issue 23's attention and memory-bound kernels, what no
#                                           GPU has measured yet first: -ak 3 and 2 beside -ak 1
#                                           at d12 B=64 (and -ak 3 at the 1.2B Llama), the kernels
#                                           alone (dev/cuda wgmma's checks of the emulated wgmma;
#                                           attention_wgmma's checks and --bench, forward and
#                                           backward, beside mma.sync's; attention, classifier,
#                                           layernorm, rmsnorm and swiglu --bench; encoder too with
#                                           BENCH_MEMORY_KERNELS=1), PyTorch's attention at the same
#                                           sizes (dev/bench_sdpa.py), Nsight Compute's sections of
#                                           each attention kernel (stall reasons, pipes, bank
#                                           conflicts)
#   bash dev/bench_device.sh 2 [LLMC_DIR]   the README's quickstart on the GPU (carry data/bible,
#                                           data/gpt2_tokenizer.bin, data/gpt2_vocab; no window
#                                           has reached it yet); issue 26's fp8 beside bf16 (four
#                                           and eight 8B-shaped Llama layers B=4, and a layer alone
#                                           from the two; the 1.2B Llama B=8), the FP8 kernels
#                                           against their CPU references (dev/cuda fp8, fp8_linear)
#                                           and their layer rates; d12 in fp32 (TF32) at B=16; d12
#                                           B=64 (two rounds) and d48 B=8 beside llm.c built from
#                                           LLMC_DIR without cuDNN; -ak 2 and 3 at d48
#   bash dev/bench_device.sh 3              train_gpt_fp8's -fp8fa 2 (fast accumulation in the
#                                           backward GEMMs), -fp8kt 1 (inputs kept) and -fp8kw 1
#                                           (weights cast once a step) beside the defaults at d48,
#                                           and -fp8fa's val loss beside bf16's (d12 on the Bible,
#                                           300 steps); -ma timed beside -ma heuristic; dev/bench_flags.sh's
#                                           d12 rows; Nsight Compute's kernel table of the 1.2B
#                                           Llama
# LLMC_DIR: a copy of karpathy/llm.c (never committed here; `git archive` it into a folder
# .git/info/exclude ignores and carry it), with the one CUDA 13 change the shared record gives
# (cudaMemAdvise's location argument). Its d12/d48 run as the shared record ran them: -v 1000 -m 2
# (its -v 0 divides by zero), -s 0, the training shard of gpu_inputs as both shards.
# Writes $OUT/bench_device_N.txt and $OUT/bench_device_N_logs.tar.gz (or ./bench_device_out/).
set -uo pipefail
cd "$(dirname "$0")/.."
PHASE=${1:?usage: bench_device.sh 1|2|3 [LLMC_DIR]}
case "$PHASE" in 1 | 2 | 3) ;; *) echo "bench_device.sh: phase 1, 2 or 3, not $PHASE" >&2; exit 2 ;; esac
LLMC_DIR=${2:-.speed/llmc}
LOGDIR=${GPU_CHECK_LOGDIR:-$PWD/bench_device_out}/phase$PHASE
rm -rf "$LOGDIR"
mkdir -p "$LOGDIR"
OUTDIR=${OUT:-$(dirname "$LOGDIR")}
SUMMARY=$OUTDIR/bench_device_$PHASE.txt RESULTS=$LOGDIR/results.tsv
: > "$SUMMARY"
: > "$RESULTS"
# GPU_CHECK_EMU=1: a rehearsal on the emulated trainers (tiny models; no llm.c, no dev programs)
EMU=${GPU_CHECK_EMU:-0} SFX="" SLOW=1 PART=bench_device SHORT_STEPS=${GPU_CHECK_SHORT_STEPS:-12}
GPU_INPUTS=${GPU_INPUTS:-gpu_inputs} JOBS=$(nproc) BENCH_ROWS=()
[ "$EMU" = 1 ] && SFX=_emu SLOW=4
export PATH="$PATH:/usr/local/cuda/bin"
# shellcheck source=../scripts/gpu_check_lib.sh
source scripts/gpu_check_lib.sh
archive() { tar -czf "$OUTDIR/bench_device_${PHASE}_logs.tar.gz" -C "$LOGDIR" . 2> /dev/null; }
header() { say "$(printf '%-14s %-5s %-4s %10s %12s %8s %10s %9s' model prec B ms/step tok/s MFU 'peak MiB' J/token)"; }

say "== bench_device $PHASE $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null | head -n1)"
say "commit: $(git rev-parse HEAD 2> /dev/null || echo 'not a git checkout')"
find_bench_data
[ "$EMU" = 1 ] || make -s -f cuda.mk NO_NCCL=1 train_gpt_bf16 train_gpt_fp8 train_gpt_fp32 -j"$JOBS" > "$LOGDIR/build.log" 2>&1 ||
    say "build of the trainers failed: $(grep -m 3 error "$LOGDIR/build.log")"

# llmc_row NAME MODEL B: llm.c's train_gpt2cu, 12 steps, the median step after the 3rd
llmc_row() {
    local name=$1 model=$2 B=$3 log="$LOGDIR/llmc_$1.log" med
    (cd "$LLMC_DIR" && timeout -k 10 240 ./train_gpt2cu -i "$OLDPWD/$train_glob" -j "$OLDPWD/$train_glob" -e "$model" \
        -b "$B" -t 1024 -x "$SHORT_STEPS" -v 1000 -m 2 -s 0 -n 0 -h 0) > "$log" 2>&1
    # "step    4/12 | loss ... | 179.40 ms | 40.1% bf16 MFU | 365000 tok/s"
    med=$(awk -F'|' '/^step/ { split($1, s, "[ /]+"); if (s[2] + 0 <= 3) next
                              printf "%.1f %.0f %.1f%%\n", $5 + 0, $7 + 0, $6 + 0 }' "$log" | median_step)
    if [ -n "$med" ]; then
        local ms tok mfu
        read -r ms tok mfu <<< "$med"
        say "$(printf '%-14s %-5s %-4s %10s %12s %8s %10s %9s' "$name" llm.c "$B" "$ms" "$tok" "$mfu" n/a n/a)"
    else
        record "llm.c $name" FAIL "$(tail -n 2 "$log" | tr '\n' ' ' | cut -c1-200)"
    fi
}

# --- the blocks, each one comparison; the phases below run them in the order of what is least known
# dev_checks NAME [ARGS]: build/cuda/NAME_bf16's checks against the CPU reference, counted
dev_checks() {
    local k=$1
    shift
    [ -x "build/cuda/${k}_bf16" ] || return 0
    timeout 180 "build/cuda/${k}_bf16" "$@" > "$LOGDIR/${k}_check.log" 2>&1
    say "== ${k}_bf16 $* (checks against the CPU reference): rc $?, $(grep -c '^PASS' "$LOGDIR/${k}_check.log") passed, $(grep -c '^FAIL' "$LOGDIR/${k}_check.log") failed"
    grep -E "^FAIL|^SKIP" "$LOGDIR/${k}_check.log" | head -n 8 | tee -a "$SUMMARY"
}
kernels_block() {  # the kernels alone (issue 23: attention at head size 64 and 128, T 1024 and 4096)
    local k
    [ "$EMU" = 1 ] && { say "(rehearsal: no dev programs)"; return; }
    wait_dev
    dev_checks wgmma  # the emulated GPU's wgmma (llmc/emu/ptx.h) against Hopper's, every layout
    dev_checks attention_wgmma  # the wgmma forward and backward against the CPU reference, then timed beside mma.sync's
    say "== attention_wgmma_bf16 --bench"
    timeout 120 build/cuda/attention_wgmma_bf16 --bench > "$LOGDIR/attention_wgmma_bench.log" 2>&1
    say "(rc $?)"
    grep -E "^RESULT|^--|TFLOP" "$LOGDIR/attention_wgmma_bench.log" | head -n 40 | tee -a "$SUMMARY" > /dev/null
    dev_checks attention --quick  # the three backwards (-ak 1, -ak 2's atomics, the bulk reductions) first
    for k in $KERNELS; do
        say "== ${k}_bf16 --bench"
        if [ -x "build/cuda/${k}_bf16" ]; then
            timeout 120 "build/cuda/${k}_bf16" --bench > "$LOGDIR/${k}_bench.log" 2>&1
            say "(rc $?)"
            grep -E "^RESULT|^--|TFLOP|GB/s" "$LOGDIR/${k}_bench.log" | head -n 60 | tee -a "$SUMMARY" > /dev/null
        fi
    done
    archive
}
# PyTorch's own attention (FlashAttention-2's kernels, cuDNN's) at the kernels' sizes: the yardstick
# issue 23 names, timed on the same GPU minutes from ours
sdpa_block() {
    say "== PyTorch's scaled_dot_product_attention at the same sizes (dev/bench_sdpa.py)"
    [ "$EMU" = 1 ] && { say "(rehearsal: no PyTorch on a GPU)"; return; }
    timeout 120 python3 dev/bench_sdpa.py > "$LOGDIR/sdpa.log" 2>&1
    say "(rc $?)"
    grep -E "^bench_sdpa|^RESULT|^SKIP" "$LOGDIR/sdpa.log" | head -n 30 | tee -a "$SUMMARY" > /dev/null
    archive
}
# where the attention kernels lose time (issue 23: none reaches 250 forward / 200 backward):
# Nsight Compute's detailed sections of one launch of each, d12's and the 1.2B Llama's shapes
ncu_attention_block() {
    say "== Nsight Compute: each attention kernel once at T=1024, head size 64 (B=16 NH=12) and 128 (B=16 NH=16)"
    [ "$EMU" = 1 ] && { say "(rehearsal: no ncu)"; return; }
    wait_dev
    [ -x build/cuda/attention_wgmma_bf16 ] || return 0
    # and their machine code, for reading without a GPU (this machine has no disassembler): the
    # tensor-core attention kernels' functions only (the whole programs' would crowd the logs)
    for k in attention attention_wgmma; do
        timeout 60 cuobjdump -sass "build/cuda/${k}_bf16" 2>&1 |
            awk '/Function :/ { keep = ($0 ~ /attention_(fwd_variant|(forward|backward_dkv|backward_dq)[a-z0-9_]*(mma|wgmma))/) } keep' \
                > "$LOGDIR/${k}_bf16_attention.sass"
    done
    NCU_TIMEOUT=150 NCU_KERNELS='^attention_(forward|fwd_variant|backward_dkv|backward_dq)' bash scripts/ncu_profile.sh \
        "$LOGDIR/ncu_attention" -- build/cuda/attention_wgmma_bf16 --profile > "$LOGDIR/ncu_attention.log" 2>&1
    say "(rc $?)"
    [ -f "$LOGDIR/ncu_attention/ncu_summary.txt" ] && cat "$LOGDIR/ncu_attention/ncu_summary.txt" >> "$SUMMARY"
    # the report itself (source-level stall counts for the GUI) beside the logs, not in them: a
    # file from $OUT comes back only under 16 MiB
    mv "$LOGDIR/ncu_attention/ncu_kernels.ncu-rep" "$OUTDIR/bench_device_1_attention.ncu-rep" 2> /dev/null
    archive
}
# A layer of the 8B-shaped rows alone (issue 26's target is on 8B-shaped layers): the difference
# of the 8- and the 4-layer steps over 4, which takes out what a step spends outside its layers
# (embedding, classifier, the optimizer's share of those), bf16 beside fp8.
per_layer_8b() {
    awk -F'\t' '$3 == "BENCH" && $4 ~ /^llama-8b-l[48]$/ { ms[$4 "/" $5] = $7 }
        END { b4 = ms["llama-8b-l4/bf16"]; b8 = ms["llama-8b-l8/bf16"]; f4 = ms["llama-8b-l4/fp8"]; f8 = ms["llama-8b-l8/fp8"]
              if (b4 == "" || b8 == "" || f4 == "" || f8 == "") { print "a layer of the 8B-shaped rows: a row is missing"; exit }
              b = (b8 - b4) / 4; f = (f8 - f4) / 4
              printf "a layer of the 8B-shaped rows ((l8 - l4) / 4, B=4 T=1024): bf16 %.2f ms, fp8 %.2f ms, fp8 %.3fx\n",
                     b, f, (f > 0 ? b / f : 0) }' "$RESULTS"
}
fp8_rows_block() {
    say "== fp8 beside bf16 (issue 26's rows; the d12 and d48 bf16 rows are gpu_check's bench_short)"
    header
    bench_short_row llama-8b-l4 llama3:l4c4096h32kv8f14336v50257 4 llama3:l2c64h4kv2f128v50257 1
    BENCH_PREC=fp8 bench_short_row llama-8b-l4 llama3:l4c4096h32kv8f14336v50257 4 llama3:l2c64h4kv2f128v50257 1
    BENCH_PREC=fp8 bench_short_row llama-8b-l8 llama3:l8c4096h32kv8f14336v50257 4 llama3:l4c64h4kv2f128v50257 1
    bench_short_row llama-8b-l8 llama3:l8c4096h32kv8f14336v50257 4 llama3:l4c64h4kv2f128v50257 1
    say "$(per_layer_8b)"
    BENCH_PREC=fp8 bench_short_row llama-1.2b llama3:l16c2048h16kv8f8192v50257 8 llama3:l2c64h4kv2f128v50257 1
    bench_short_row llama-1.2b llama3:l16c2048h16kv8f8192v50257 8 llama3:l2c64h4kv2f128v50257 1
    archive
}
ak_block() {  # ROWS: d12 (phase 1), d48 (phase 2)
    say "== -ak 2 (FlashAttention-2's one-kernel attention backward, dq by atomics) and -ak 3 (wgmma) beside -ak 1"
    header
    if [ "$1" = d12 ]; then
        bench_short_row d12-ak1 d12 64 gpt2:l2c64 2 -ak 1
        bench_short_row d12-ak3 d12 64 gpt2:l2c64 2 -ak 3
        bench_short_row d12-ak2 d12 64 gpt2:l2c64 2 -ak 2
        # head size 128: -ak 3's backward on wgmma (the fp8 block's bf16 row is -ak -1's)
        bench_short_row llama-1.2b-ak3 llama3:l16c2048h16kv8f8192v50257 8 llama3:l2c256h2kv1f128v50257 1 -ak 3
    else
        bench_short_row d48-ak2 d48 8 gpt2:l4c64 1 -ak 2
        bench_short_row d48-ak3 d48 8 gpt2:l4c64 1 -ak 3
        bench_short_row d48-ak1 d48 8 gpt2:l4c64 1 -ak 1
    fi
    archive
}
fp32_block() {
    say "== fp32 (TF32): issue 23's \"not slower than today\" (d12 B=16: 120.1 ms on 2026-11-26, 666a58b)"
    header
    BENCH_PREC=fp32 bench_short_row d12 d12 16 gpt2:l2c64 2
    archive
}
quickstart_block() {
    # the README's first command, whose GPU path no GPU has run: its corpus, tokenizer and GPT-2
    # vocabulary made here (bash data/prepare_bible.sh) and carried, as the device has no internet
    say "== the README's first command on the GPU: scripts/quickstart.sh (d12 B=16 T=1024, 500 steps of the Bible)"
    if [ "$EMU" = 1 ]; then
        say "(rehearsal: no quickstart)"
    elif [ -f data/bible/bible_train_000000.bin ] && [ -f data/gpt2_tokenizer.bin ] && [ -d data/gpt2_vocab ]; then
        rm -rf out/quickstart_gpu  # a run from the start, not a resume of one carried along
        timeout -k 10 300 bash scripts/quickstart.sh > "$LOGDIR/quickstart.log" 2>&1
        say "(rc $?)"
        grep -E "^GPU found|^warning|^val loss|^done|^  best" "$LOGDIR/quickstart.log" | tee -a "$SUMMARY"
        # the last sample: from the last "generating:" to the second "---" after it
        awk '/^generating:/ { cap = 1; dashes = 0; buf = "" }
             cap { buf = buf $0 "\n"; if ($0 == "---" && ++dashes == 2) cap = 0 }
             END { printf "%s", buf }' "$LOGDIR/quickstart.log" | head -n 12 | tee -a "$SUMMARY"
    else
        say "quickstart: carry data/bible, data/gpt2_tokenizer.bin and data/gpt2_vocab (bash data/prepare_bible.sh)"
    fi
    archive
}
fp8_checks_block() {  # every check of the FP8 kernels against the CPU reference, then their benchmarks
    local k
    [ "$EMU" = 1 ] && { say "(rehearsal: no dev programs)"; return; }
    wait_dev
    for k in fp8 fp8_linear; do
        dev_checks "$k"
        grep -E "^bench" "$LOGDIR/${k}_check.log" 2> /dev/null | tee -a "$SUMMARY" > /dev/null
    done
    archive
}
llmc_block() {
    local llmc_ok=0 round
    if [ "$EMU" = 1 ]; then
        say "(rehearsal: no llm.c)"
    elif [ -n "$llmc_pid" ]; then
        wait "$llmc_pid" && llmc_ok=1
        [ $llmc_ok = 1 ] || say "llm.c: build failed: $(grep -m 3 -i error "$LOGDIR/build_llmc.log" | cut -c1-200)"
    else
        say "llm.c: no $LLMC_DIR/train_gpt2.cu (carry a copy): its rows are skipped"
    fi
    say "== d12 and d48 beside llm.c (make train_gpt2cu USE_CUDNN=0: its own attention kernels)"
    header
    for round in 1 2; do
        bench_short_row d12 d12 64 gpt2:l2c64 2
        [ $llmc_ok = 1 ] && llmc_row d12 d12 64
    done
    archive
    bench_short_row d48 d48 8 gpt2:l4c64 1
    [ $llmc_ok = 1 ] && llmc_row d48 d48 8
    archive
}
# train_gpt_fp8's knobs no GPU has timed (NOTES (h)): -fp8fa 2 (fast accumulation in the
# backward GEMMs too), -fp8kt 1 (the inputs kept cast and transposed from the forward) and -fp8kw
# 1 (the weights cast once a step: 4 micro-steps a step too, where it saves most), at d48 beside
# the defaults; and -fp8fa's precision: d12 from the same initialization on the Bible, val loss of
# fp8 -fp8fa 1, 2 and 0 beside bf16 (issue 26's bound: within 1% of bf16's)
fp8_knobs_block() {
    say "== train_gpt_fp8 at d48: -fp8fa 2 (fast accumulation in the backward too), -fp8kt 1 (inputs kept), -fp8kw 1 (weights cast once a step) beside the defaults"
    header
    BENCH_PREC=fp8 bench_short_row d48 d48 8 gpt2:l4c64 1
    BENCH_PREC=fp8 bench_short_row d48-kt1 d48 8 gpt2:l4c64 1 -fp8kt 1
    BENCH_PREC=fp8 bench_short_row d48-kw1 d48 8 gpt2:l4c64 1 -fp8kw 1
    BENCH_PREC=fp8 bench_short_row d48-fa2 d48 8 gpt2:l4c64 1 -fp8fa 2
    BENCH_PREC=fp8 bench_short_row d48-fa2-kt-kw d48 8 gpt2:l4c64 1 -fp8fa 2 -fp8kt 1 -fp8kw 1
    # 4 micro-steps a step (the emulated rehearsal's 1 x 32 tokens a micro-step, 128 a step)
    local d=32768
    [ "$EMU" = 1 ] && d=128
    BENCH_PREC=fp8 bench_short_row d48-acc4 d48 8 gpt2:l4c64 1 -d $d
    BENCH_PREC=fp8 bench_short_row d48-acc4-kw1 d48 8 gpt2:l4c64 1 -d $d -fp8kw 1
    archive
}
fa_quality_block() {
    local run prec flags log model=d12 B=8 T=1024 steps=300 every=100
    [ "$EMU" = 1 ] && model=gpt2:l2c64 B=2 T=32 steps=8 every=4
    say "== -fp8fa's precision: $model B=$B T=$T, $steps steps of $train_glob from one initialization, val loss"
    for run in "bf16|" "fp8|-fp8fa 1" "fp8|-fp8fa 2" "fp8|-fp8fa 0"; do
        prec=${run%%|*} flags=${run#*|} log="$LOGDIR/fa_quality_${prec}${flags// /}.log"
        # shellcheck disable=SC2086
        timeout -k 10 $((180 * SLOW)) "./train_gpt_$prec$SFX" -e "$model" -i "$train_glob" -j "$val_glob" -b "$B" \
            -t "$T" -x "$steps" -l 6e-4 -u 20 -k cosine -v "$every" -m 6 -s 0 -n 0 $flags > "$log" 2>&1
        say "$(printf '%-5s %-10s rc %d, val loss: %s' "$prec" "${flags:-}" $? \
            "$(grep '^val loss' "$log" | awk '{ printf "%s ", $3 }')")"
    done
    archive
}
ma_block() {
    say "== -ma timed beside -ma heuristic"
    header
    bench_short_row d12-heur d12 64 gpt2:l2c64 2 -ma heuristic
    bench_short_row d12-timed d12 64 gpt2:l2c64 2 -ma timed
    grep -m 3 -i "timed\|algorithm" "$LOGDIR/bench_short_d12-timed.log" | cut -c1-200 | tee -a "$SUMMARY"
    bench_short_row d48-timed d48 8 gpt2:l4c64 1 -ma timed
    archive
}
flags_block() {
    local row
    say "== d12 B=64 under the flags dev/bench_flags.sh compares (old defaults -r 1 -ge 1 -bg 0)"
    header
    for row in "${BENCH_FLAG_ROWS[@]:0:4}"; do
        # shellcheck disable=SC2086
        bench_short_row "${row%%|*}" d12 64 gpt2:l2c64 2 ${row#*|}
    done
    grep -h "recompute" "$LOGDIR"/bench_short_d12-defaults.log 2> /dev/null | head -n 2 | tee -a "$SUMMARY"
    archive
}
ncu_block() {
    # where the 1.2B Llama's step goes (issue 23's 55% target; only d12 has been profiled):
    # Nsight Compute's kernel-time table, last, as the longest and the least urgent
    say "== Nsight Compute: Llama l16c2048h16kv8f8192 bf16 B=8 T=1024, 2 steps"
    if [ "$EMU" = 1 ]; then
        say "(rehearsal: no ncu)"
    elif [ -n "$train_glob" ]; then
        NCU_TIMEOUT=150 bash scripts/ncu_profile.sh "$LOGDIR/ncu_llama" -- ./train_gpt_bf16 \
            -e llama3:l16c2048h16kv8f8192v50257 -b 8 -t 1024 -x 2 -v 0 -s 0 -n 0 -i "$train_glob" -j "$val_glob" \
            > "$LOGDIR/ncu_llama.log" 2>&1
        say "(rc $?)"
        grep -A 24 "kernels, .* launches" "$LOGDIR/ncu_llama.log" | tee -a "$SUMMARY" > /dev/null
    fi
    archive
}

# the dev programs (and llm.c) build in the background while the first rows run; the memory-bound
# kernels, measured the same in three windows, only with BENCH_MEMORY_KERNELS=1, but for the
# classifier, LayerNorm, RMSNorm and SwiGLU, whose row-in-shared-memory kernel, register one pass
# and special-function-unit exponentials no GPU has timed yet (dev/results/NOTES.md (e4)-(e8))
KERNELS="attention classifier layernorm rmsnorm swiglu"
[ "${BENCH_MEMORY_KERNELS:-0}" = 1 ] && KERNELS="attention classifier layernorm rmsnorm swiglu encoder"
dev_pid="" llmc_pid=""
if [ "$EMU" != 1 ]; then
    dev_bins=()
    case "$PHASE" in 1) dev_names="$KERNELS wgmma attention_wgmma" ;; 2) dev_names="fp8 fp8_linear" ;; *) dev_names="" ;; esac
    for k in $dev_names; do dev_bins+=("build/cuda/${k}_bf16"); done
    if [ ${#dev_bins[@]} -gt 0 ]; then
        make -s -f cuda.mk "${dev_bins[@]}" -j"$JOBS" > "$LOGDIR/build_dev.log" 2>&1 &
        dev_pid=$!
    fi
    if [ "$PHASE" = 2 ] && [ -f "$LLMC_DIR/train_gpt2.cu" ]; then
        (cd "$LLMC_DIR" && make train_gpt2cu USE_CUDNN=0 NO_MULTI_GPU=1 NO_USE_MPI=1) > "$LOGDIR/build_llmc.log" 2>&1 &
        llmc_pid=$!
    fi
fi
wait_dev() {  # the dev programs' build, once
    [ -n "$dev_pid" ] || return 0
    wait "$dev_pid" || say "dev programs: build failed: $(grep -m 3 error "$LOGDIR/build_dev.log")"
    dev_pid=""
}
case "$PHASE" in
    1)  # what no GPU has measured first: -ak 3 (while the dev programs build), the kernels
        ak_block d12
        kernels_block
        sdpa_block
        ncu_attention_block
        ;;
    2)  # the README's first command first: no window has reached it yet
        quickstart_block
        fp8_rows_block
        fp8_checks_block
        fp32_block
        llmc_block
        ak_block d48
        ;;
    3)  # train_gpt_fp8's new knobs first: no GPU has run them
        fp8_knobs_block
        fa_quality_block
        ma_block
        flags_block
        ncu_block
        ;;
esac
say "== bench_device $PHASE done"
