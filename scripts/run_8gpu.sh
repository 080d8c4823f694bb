#!/usr/bin/env bash
# run_8gpu.sh: GPT-2 124M (d12) on FineWeb-10B on one node's 8 GPUs, one MPI process per
# GPU (mpirun), llm.c's reference recipe: 0.5M tokens per step (64 x 1024 on each GPU),
# 18,865 steps (about 10B tokens), lr 6e-4, 700 warmup steps, cosine to 0, ZeRO 1.
#
#   scripts/run_8gpu.sh [extra trainer flags...]     e.g. scripts/run_8gpu.sh -x 200 -z 2
#
# The binary must be built with MPI and NCCL: `make train_gpt_bf16` on a machine where
# mpicxx is on PATH (Debian/Ubuntu: libopenmpi-dev) and NCCL is installed (libnccl-dev).
# Extra flags come last and win over the recipe's. Run the same command again after a
# stop: -y 1 resumes from the newest complete checkpoint in OUT_DIR.
# Environment overrides [defaults]:
#   NGPUS       [8]     processes = GPUs (rank r uses GPU OMPI_COMM_WORLD_LOCAL_RANK)
#   MODEL       [d12]   -e: d12 d24 d36 d48, gpt3:cN, or a checkpoint file
#   TRAIN_DATA  ["data/fineweb/fineweb_train_*.bin"]   VAL_DATA ["data/fineweb/fineweb_val_*.bin"]
#   OUT_DIR     [out/gpt2_d12_fineweb]   logs and checkpoints (one state file per rank)
#   BATCH       [64]    most -b per GPU; made smaller when TOTAL_BATCH needs it
#   TOTAL_BATCH [524288] -d   STEPS [18865] -x   SEQ_LEN [1024] -t   ZERO [1] -z
#   RANK_TIMEOUT        -pt seconds a rank waits for the others (trainer default: 600)
#   BIN         [./train_gpt_bf16]   MPIRUN [mpirun]   MPIRUN_ARGS (added to mpirun's flags)
#
# NCCL settings (NCCL's defaults are right on most single nodes; uncomment to change):
# export NCCL_DEBUG=WARN        # INFO prints the rings, channels and links NCCL chose: use it once when a run is slow or hangs
# export NCCL_P2P_DISABLE=1     # only if GPU peer-to-peer is broken (some VMs, PCIe ACS on): slower, but it runs
# export NCCL_SOCKET_IFNAME=eth0  # NCCL's bootstrap network interface (prefix; "^lo,docker" excludes); matters across nodes
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/recipe_common.sh  # defines: recipe_defaults, recipe_check_*, recipe_micro_batch, recipe_flags, ...

NGPUS=${NGPUS:-8}
recipe_defaults
recipe_check_bin "(CUDA toolkit; mpicxx and NCCL for several GPUs)"
recipe_warn_no_mpi "install MPI (libopenmpi-dev), 'make clean; make train_gpt_bf16'"
recipe_check_mpirun
recipe_check_data local
recipe_micro_batch "$NGPUS" NGPUS
mkdir -p "$OUT_DIR"

recipe_launcher "$NGPUS"
recipe_flags "$ZERO" -pi mpi -pg "$NGPUS"
recipe_exec_mpirun "$@"
