#!/usr/bin/env bash
# run_multinode_mpirun.sh: GPT-2 124M (d12) on FineWeb-10B across several nodes, one MPI
# process per GPU, started by mpirun from a hostfile; llm.c's reference recipe (0.5M
# tokens per step, 18,865 steps, lr 6e-4, 700 warmup steps, cosine to 0, ZeRO 1).
#
#   scripts/run_multinode_mpirun.sh HOSTFILE [GPUS_PER_NODE] [extra trainer flags...]
#   e.g.  scripts/run_multinode_mpirun.sh hosts.txt 8 -x 200
#
# HOSTFILE: one node per line, "node1 slots=8" (Open MPI) or "node1:8" (MPICH, Intel MPI);
# '#' comments and blank lines are skipped. GPUS_PER_NODE (or env GPUS_PER_NODE) [8]:
# processes per node, = -pg. Run it on the first node of the hostfile: that is rank 0.
# Every node needs passwordless ssh from this one, the same MPI, and this directory at the
# same path (a shared file system): the binary, the data, and OUT_DIR, where every rank
# writes its own state file at each checkpoint. Run it again to resume (-y 1).
# Environment overrides [defaults]:
#   MODEL [d12]  TRAIN_DATA ["data/fineweb/fineweb_train_*.bin"]  VAL_DATA ["data/fineweb/fineweb_val_*.bin"]
#   OUT_DIR [out/gpt2_d12_fineweb]   BATCH [64] most -b per GPU (made smaller so that
#   processes x b x SEQ_LEN divides TOTAL_BATCH)   TOTAL_BATCH [524288]   STEPS [18865]
#   SEQ_LEN [1024]   ZERO [1]   RANK_TIMEOUT (-pt; trainer default 600 s)
#   BIN [./train_gpt_bf16]   MPIRUN [mpirun]   MPIRUN_ARGS (added to mpirun's flags)
#
# NCCL settings (exported here, then forwarded to every node: Open MPI's -x, which this
# script adds for every NCCL_* variable set; MPICH and Intel MPI forward the environment):
# export NCCL_DEBUG=WARN            # INFO: topology, NICs and rings chosen; use it once when slow or hung
# export NCCL_IB_HCA=mlx5_0,mlx5_1  # which InfiniBand adapters NCCL uses (default: all it finds); leave out storage-only ports
# export NCCL_IB_DISABLE=1          # no InfiniBand/RoCE: NCCL talks TCP over NCCL_SOCKET_IFNAME (much slower)
# export NCCL_SOCKET_IFNAME=eth0    # interface for NCCL's bootstrap (and TCP traffic): one that all nodes reach; "^lo,docker" excludes
# export NCCL_P2P_DISABLE=1         # only if GPU peer-to-peer inside a node is broken (some VMs): slower, but it runs
set -euo pipefail
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
    echo "usage: $0 HOSTFILE [GPUS_PER_NODE] [extra trainer flags...]  (hostfile: '${1:-}' not found)" >&2
    exit 1
fi
HOSTFILE=$(realpath "$1")  # before the cd: HOSTFILE may be relative to where the command was typed
shift
cd "$(dirname "$0")/.."
. scripts/recipe_common.sh  # defines: recipe_defaults, recipe_check_*, recipe_micro_batch, recipe_flags, ...

GPUS_PER_NODE=${GPUS_PER_NODE:-8}
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then GPUS_PER_NODE=$1; shift; fi
recipe_defaults

NNODES=$(sed -e 's/#.*//' "$HOSTFILE" | awk 'NF { sub(/:.*/, "", $1); print $1 }' | sort -u | wc -l)
NPROC=$((NNODES * GPUS_PER_NODE))
if [ "$NNODES" -lt 1 ] || [ "$GPUS_PER_NODE" -lt 1 ]; then
    recipe_die "$HOSTFILE names no node, or GPUS_PER_NODE=$GPUS_PER_NODE"
fi
recipe_check_bin "(CUDA toolkit, mpicxx and NCCL)"
BIN=$(realpath "$BIN")  # the other nodes start it from their own working directory
recipe_warn_no_mpi "install MPI (libopenmpi-dev), 'make clean; make train_gpt_bf16'"
recipe_check_mpirun
recipe_check_data shared
# At 0.5M tokens per step: 64 GPUs get b=8, 512 GPUs b=1 (see dev/SCALING.md on small b).
recipe_micro_batch "$NPROC" processes
mkdir -p "$OUT_DIR"
echo "$NNODES nodes x $GPUS_PER_NODE GPUs = $NPROC processes, micro-batch $b per GPU"

recipe_launcher "$NPROC"
if [ "$open_mpi" = 1 ]; then
    launcher+=(--hostfile "$HOSTFILE" --map-by "ppr:$GPUS_PER_NODE:node")
    for var in PATH LD_LIBRARY_PATH $(compgen -e | grep '^NCCL_' || true); do
        if [ -n "${!var:-}" ]; then launcher+=(-x "$var"); fi
    done
else  # MPICH / Intel MPI (Hydra): the environment is forwarded by default
    launcher+=(-f "$HOSTFILE" -ppn "$GPUS_PER_NODE")
fi
recipe_flags "$ZERO" -pi mpi -pg "$GPUS_PER_NODE"
recipe_exec_mpirun "$@"
