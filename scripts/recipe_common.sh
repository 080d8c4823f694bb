# recipe_common.sh: what the training recipes (run_1gpu.sh, run_8gpu.sh,
# run_multinode_mpirun.sh, run_slurm_*.sbatch) share: the environment defaults, the checks
# that say how to make a missing binary or data set, the per-process micro-batch, the
# recipe's trainer flags and the mpirun command line. Sourced, after `cd` to the gptrain
# directory (the paths below are relative to it), by a script running under set -euo pipefail.
# Each function documents the variables it sets; nothing here runs on its own.
# shellcheck shell=bash
# The variables these functions set are read by the recipe that sourced this file:
# shellcheck disable=SC2034

# recipe_die MESSAGE...: prints "error: MESSAGE" on stderr and exits 1.
recipe_die() {
    echo "error: $*" >&2
    exit 1
}

# recipe_defaults: the environment overrides every recipe documents, and their defaults
# (llm.c's GPT-2 124M on FineWeb-10B: 0.5M tokens per step, about 10B tokens).
recipe_defaults() {
    MODEL=${MODEL:-d12}
    TRAIN_DATA=${TRAIN_DATA:-"data/fineweb/fineweb_train_*.bin"}
    VAL_DATA=${VAL_DATA:-"data/fineweb/fineweb_val_*.bin"}
    OUT_DIR=${OUT_DIR:-out/gpt2_d12_fineweb}
    BATCH=${BATCH:-64}
    TOTAL_BATCH=${TOTAL_BATCH:-524288}
    STEPS=${STEPS:-18865}
    SEQ_LEN=${SEQ_LEN:-1024}
    ZERO=${ZERO:-1}
    BIN=${BIN:-./train_gpt_bf16}
    MPIRUN=${MPIRUN:-mpirun}
}

# recipe_check_bin HOW: BIN must be an executable; else says to build it, HOW being what
# the build needs here, e.g. "(CUDA toolkit and NCCL)".
recipe_check_bin() {
    if [ ! -x "$BIN" ]; then
        recipe_die "$BIN not found: build it with 'make train_gpt_bf16' $1"
    fi
}

# recipe_warn_no_mpi FIX: a warning (the run goes on) when ldd shows BIN without libmpi:
# every process would then think it is alone.
recipe_warn_no_mpi() {
    if command -v ldd > /dev/null && ! ldd "$BIN" 2> /dev/null | grep -q libmpi; then
        echo "warning: $BIN does not seem to link MPI: $1" >&2
    fi
}

# recipe_check_mpirun: MPIRUN must be a command.
recipe_check_mpirun() {
    if ! command -v "$MPIRUN" > /dev/null; then
        recipe_die "$MPIRUN not found: install MPI (Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev)"
    fi
}

# recipe_check_data local|shared: TRAIN_DATA and VAL_DATA must each match a file; else says
# how to make the shards (shared: on a file system every node sees).
recipe_check_data() {
    local glob where=""
    if [ "$1" = shared ]; then where=" on the shared file system"; fi
    for glob in "$TRAIN_DATA" "$VAL_DATA"; do
        if ! compgen -G "$glob" > /dev/null; then
            recipe_die "no data shards match '$glob': make them with 'bash data/prepare_fineweb.sh'" \
                       "(internet, about 50 GB)$where, or set TRAIN_DATA/VAL_DATA to your own shards"
        fi
    done
}

# recipe_micro_batch NPROC WHAT: sets b, the -b of each process: the largest b <= BATCH with
# TOTAL_BATCH a multiple of b x SEQ_LEN x NPROC (the rest of the step is gradient
# accumulation). WHAT names the processes in the error ("GPUs", "tasks").
recipe_micro_batch() {
    local nproc=$1 what=$2
    b=$BATCH
    while [ "$b" -gt 1 ] && [ $((TOTAL_BATCH % (b * SEQ_LEN * nproc))) -ne 0 ]; do b=$((b - 1)); done
    if [ $((TOTAL_BATCH % (b * SEQ_LEN * nproc))) -ne 0 ]; then
        recipe_die "TOTAL_BATCH=$TOTAL_BATCH is not a multiple of SEQ_LEN x $what = $((SEQ_LEN * nproc));" \
                   "set TOTAL_BATCH (and STEPS) for $nproc processes"
    fi
}

# recipe_flags ZERO [MULTI-PROCESS FLAGS...]: sets flags, the trainer's command line for the
# recipe: llm.c's d12 settings (lr 6e-4, 700 warmup steps, cosine to 0, weight decay 0.1),
# validation every 250 steps, a checkpoint every 5000 keeping the last 2, resume (-y 1).
# With multi-process flags (-pi ... -pg N), RANK_TIMEOUT, when set, becomes -pt.
recipe_flags() {
    flags=(-i "$TRAIN_DATA" -j "$VAL_DATA" -o "$OUT_DIR" -e "$MODEL"
           -b "$b" -t "$SEQ_LEN" -d "$TOTAL_BATCH" -x "$STEPS"
           -l 6e-4 -u 700 -q 0 -c 0.1 -r 1 -z "$1"
           -v 250 -s 5000 -n 5000 -nk 2 -y 1)
    shift
    if [ $# -gt 0 ]; then
        flags+=("$@")
        if [ -n "${RANK_TIMEOUT:-}" ]; then flags+=(-pt "$RANK_TIMEOUT"); fi
    fi
}

# recipe_launcher NPROC: sets launcher, "MPIRUN -np NPROC" plus what Open MPI needs (one
# process per GPU, not pinned to a core; root needs its explicit consent), and open_mpi
# (1 for Open MPI, 0 for MPICH / Intel MPI) so the caller can add its own flags.
recipe_launcher() {
    launcher=("$MPIRUN" -np "$1")
    open_mpi=0
    if "$MPIRUN" --version 2>&1 | grep -q "Open MPI"; then
        open_mpi=1
        launcher+=(--bind-to none)
        if [ "$(id -u)" = 0 ]; then launcher+=(--allow-run-as-root); fi
    fi
}

# recipe_exec_mpirun [EXTRA TRAINER FLAGS...]: replaces the shell with launcher, then
# MPIRUN_ARGS (split on spaces), then BIN with flags and the extra flags (which win).
recipe_exec_mpirun() {
    local extra_mpi
    read -r -a extra_mpi <<< "${MPIRUN_ARGS:-}"
    set -x
    exec "${launcher[@]}" ${extra_mpi[@]+"${extra_mpi[@]}"} "$BIN" "${flags[@]}" "$@"
}

# recipe_slurm_tasks: sets NPROC (SLURM_NTASKS, all tasks of the job) and GPUS_PER_NODE
# (tasks per node, = -pg) from the environment sbatch gives the batch script.
recipe_slurm_tasks() {
    NPROC=${SLURM_NTASKS:?set --ntasks or --ntasks-per-node}
    GPUS_PER_NODE=$((NPROC / SLURM_JOB_NUM_NODES))
}
