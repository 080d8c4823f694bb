#!/usr/bin/env bash
# run_1gpu.sh: GPT-2 124M (d12) on FineWeb-10B on one GPU, llm.c's reference recipe:
# 0.5M tokens per step (8 micro-steps of 64 x 1024), 18,865 steps (about 10B tokens),
# peak lr 6e-4 after 700 warmup steps, cosine to 0, weight decay 0.1.
#
#   scripts/run_1gpu.sh [extra trainer flags...]     e.g. scripts/run_1gpu.sh -x 200 -v 50
#
# Extra flags come last and win over the recipe's. Run the same command again after a
# stop (crash, kill, Ctrl-C): -y 1 resumes from the newest complete checkpoint in OUT_DIR.
# Environment overrides [defaults]:
#   MODEL       [d12]   -e: d12 d24 d36 d48 (GPT-2 by depth), gpt3:cN, or a checkpoint file
#   TRAIN_DATA  ["data/fineweb/fineweb_train_*.bin"]   VAL_DATA ["data/fineweb/fineweb_val_*.bin"]
#   OUT_DIR     [out/gpt2_d12_fineweb]   logs (main.log, metrics.jsonl) and checkpoints
#   BATCH       [64]    -b micro-batch; lower it (32, 16) if the GPU runs out of memory:
#                       more micro-steps, the same 0.5M-token step
#   TOTAL_BATCH [524288] -d tokens per step   STEPS [18865] -x   SEQ_LEN [1024] -t
#   BIN         [./train_gpt_bf16]   (./train_gpt_fp32 for the fp32/TF32 trainer)
#   CUDA_VISIBLE_DEVICES             which GPU
# One process does no NCCL communication, so no NCCL_* setting matters here (see
# scripts/run_8gpu.sh for the ones that do).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/recipe_common.sh  # defines: recipe_defaults, recipe_check_bin, recipe_check_data, recipe_flags

recipe_defaults
recipe_check_bin "(needs the CUDA toolkit, nvcc)"
recipe_check_data local
# One GPU: BATCH is the -b asked for (lowered by hand when memory runs out), used as it is.
if [ $((TOTAL_BATCH % (BATCH * SEQ_LEN))) -ne 0 ]; then
    recipe_die "TOTAL_BATCH=$TOTAL_BATCH is not a multiple of BATCH x SEQ_LEN = $((BATCH * SEQ_LEN))"
fi
b=$BATCH
mkdir -p "$OUT_DIR"
recipe_flags 0

set -x
exec "$BIN" "${flags[@]}" "$@"
