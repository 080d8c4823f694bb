#!/usr/bin/env bash
# The training recipes in scripts/ run end to end, with the CPU trainer standing in for the
# GPU one (BIN=./train_gpt_cpu takes the same flags), a tiny model and tiny shards; except
# run_slurm_nompi.sbatch, whose ranks meet over sockets, which only bootstrap NCCL: it runs the
# GPU trainer on the emulated GPU (train_gpt_fp32_emu, two emulated GPUs, one per task):
#  - run_1gpu.sh; run_8gpu.sh with NGPUS=2 (mpirun); run_multinode_mpirun.sh on a hostfile
#    "localhost slots=2"; run_slurm_nompi.sbatch and run_slurm_mpi.sbatch run with bash from
#    a copy in a spool directory (as Slurm does), with SLURM_* set as sbatch sets them and a
#    fake srun first on PATH: --mpi=none starts SLURM_NTASKS local tasks, each with its
#    SLURM_PROCID and SLURM_LOCALID; --mpi=pmix becomes mpirun -np SLURM_NTASKS
#  - each exits 0 with main.log holding one train line per step and the final DONE marker;
#    the multi-process ones pick the largest -b <= BATCH that divides -d (BATCH=5 -> 4)
#  - stopped after the middle checkpoint (the final DONE marker removed), the same command
#    again resumes there (-y 1) and ends with the same main.log, byte for byte
#  - a missing binary (BIN=/nonexistent) is one "error:" line and exit 1, from each recipe
# The mpirun recipes are skipped, with a message, without mpirun or an MPI-built trainer.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
make -s train_gpt_cpu
out=test/out/recipes
rm -rf "$out"; mkdir -p "$out"
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 300 --maxT 64 --L 2 --NH 4 --C 64 --seed 5 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 6000 --val-tokens 2000 --shards 2 --seed 9 > /dev/null
fail() { echo "FAIL: $*"; exit 1; }
export OMP_NUM_THREADS=1
# Open MPI refuses root without these (CI runs as root); more ranks than cores is fine here
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# The recipes' environment: 4 steps of 512 tokens (-d) of 32-token rows; 1 process x -b 8
# or 2 x -b 4 is 2 micro-steps. The extra flags (last, so they win over the recipe's)
# validate every 2 steps on 1 batch, checkpoint every 2, never sample.
export BIN=./train_gpt_cpu MODEL=$out/model.bin SEQ_LEN=32 TOTAL_BATCH=512 STEPS=4 RANK_TIMEOUT=30
export TRAIN_DATA="$out/markov_train_*.bin" VAL_DATA="$out/markov_val_*.bin"
extra=(-v 2 -m 1 -s 0 -n 2)

# Slurm's stand-ins (one node, 2 tasks): sbatch runs a copy of the script in a spool
# directory (as Slurm does, so the script must find the repository through
# SLURM_SUBMIT_DIR) with the variables a job sees; srun starts the tasks on this machine
fake=$PWD/$out/fakebin
mkdir -p "$fake"
cat > "$fake/sbatch" << 'EOF'
#!/usr/bin/env bash
# fake sbatch SCRIPT [ARGS...]: SCRIPT as the batch step of a new job (id: this pid), run
# from the spool directory, so only SLURM_SUBMIT_DIR says where it was submitted
set -eu
bindir=$(dirname "$0")
spool=$bindir/../spool/$$
mkdir -p "$spool"
cp "$1" "$spool/slurm_script"
shift
export PATH="$bindir:$PATH" SLURM_JOB_ID=$$ SLURM_SUBMIT_DIR=$PWD SLURM_NTASKS=2 SLURM_JOB_NUM_NODES=1 SLURM_NNODES=1
cd "$spool" || exit
exec bash slurm_script "$@"
EOF
cat > "$fake/srun" << 'EOF'
#!/usr/bin/env bash
# fake srun [--options...] COMMAND...: SLURM_NTASKS tasks of COMMAND on this machine
mpi=none
while [[ "${1:-}" == -* ]]; do
    case $1 in --mpi=*) mpi=${1#--mpi=} ;; esac
    shift
done
if [ "$mpi" != none ]; then
    # Open MPI's mpirun would take SLURM_* for an allocation to ask Slurm about: hide the job
    np=$SLURM_NTASKS
    for var in $(compgen -e | grep '^SLURM_'); do unset "$var"; done
    exec mpirun -np "$np" "$@"
fi
pids=()
for ((r = 0; r < SLURM_NTASKS; r++)); do
    SLURM_PROCID=$r SLURM_LOCALID=$r "$@" &
    pids+=($!)
done
# --kill-on-bad-exit=1: the first task to fail ends the others. Polled, task by task: bash
# 5.2's `wait -n` can answer 127 (no child) when two tasks end together (3 in 2000 here),
# which failed a CI run; `wait PID` on a task that has ended always gives its status
left=("${pids[@]}")
while [ ${#left[@]} -gt 0 ]; do
    running=()
    for p in "${left[@]}"; do
        if kill -0 "$p" 2> /dev/null; then running+=("$p")
        elif ! wait "$p"; then kill "${pids[@]}" 2> /dev/null; wait; exit 1
        fi
    done
    left=("${running[@]}")
    if [ ${#left[@]} -gt 0 ]; then sleep 0.1; fi
done
EOF
chmod +x "$fake/sbatch" "$fake/srun"

# run_recipe NAME B NP HOW COMMAND...: runs COMMAND (OUT_DIR=$out/NAME) twice: to the end,
# then, its last DONE marker removed, to the end again from the middle checkpoint; checks
# that rank 0 ran NP processes of -b B talking over HOW (MPI, sockets; - for one process)
# and what each run left
run_recipe() {
    local name=$1 b=$2 np=$3 how=$4; shift 4
    local d=$out/$name log
    export OUT_DIR=$d
    timeout 120 "$@" "${extra[@]}" > "$d.stdout" 2> "$d.stderr" ||
        fail "$name: exit status $?: $(tail -3 "$d.stderr")"
    [ "$(grep -c ' trl:' "$d/main.log")" = 4 ] || fail "$name: main.log has not 4 train lines: $(cat "$d/main.log")"
    [ -f "$d/DONE_00000004" ] || fail "$name: no DONE_00000004 in $d"
    grep -q "^batch: B=$b T=32 x $np processes x 2 accumulation = 512 tokens/step; 4 steps" "$d.stdout" ||
        fail "$name: not $np processes x -b $b: $(grep '^batch:' "$d.stdout")"
    local over=""
    if [ "$how" != - ]; then
        grep -q "^processes: $np ($how)" "$d.stdout" || fail "$name: not over $how: $(grep '^processes:' "$d.stdout")"
        over=" over $how"
    fi
    log=$(cat "$d/main.log")
    rm "$d/DONE_00000004"
    timeout 120 "$@" "${extra[@]}" > "$d.resume.stdout" 2> "$d.resume.stderr" ||
        fail "$name, again: exit status $?: $(tail -3 "$d.resume.stderr")"
    grep -q "resumed from $d/model_00000002.bin at step 2" "$d.resume.stdout" ||
        fail "$name, again: did not resume at step 2: $(head -3 "$d.resume.stdout")"
    [ -f "$d/DONE_00000004" ] || fail "$name, again: no DONE_00000004"
    [ "$(cat "$d/main.log")" = "$log" ] || fail "$name, again: main.log differs from the first run's"
    echo "ok $name: $np x -b $b$over, 4 steps, DONE_00000004; again from step 2: the same main.log"
}

echo "localhost slots=2" > "$out/hosts"
have_mpi=0
if command -v mpirun > /dev/null && ldd ./train_gpt_cpu | grep -q libmpi; then have_mpi=1; fi

BATCH=8 run_recipe run_1gpu 8 1 - scripts/run_1gpu.sh
if [ $have_mpi = 1 ]; then
    BATCH=5 NGPUS=2 run_recipe run_8gpu 4 2 MPI scripts/run_8gpu.sh
    BATCH=5 run_recipe run_multinode_mpirun 4 2 MPI scripts/run_multinode_mpirun.sh "$out/hosts" 2
    grep -q "^1 nodes x 2 GPUs = 2 processes, micro-batch 4 per GPU" "$out/run_multinode_mpirun.stdout" ||
        fail "run_multinode_mpirun: $(head -1 "$out/run_multinode_mpirun.stdout")"
    BATCH=5 run_recipe run_slurm_mpi 4 2 MPI "$fake/sbatch" scripts/run_slurm_mpi.sbatch
else
    echo "skip: run_8gpu.sh, run_multinode_mpirun.sh, run_slurm_mpi.sbatch (no mpirun, or train_gpt_cpu built without MPI)"
fi
make -s train_gpt_fp32_emu
BIN=./train_gpt_fp32_emu EMU_DEVICES=2 BATCH=5 run_recipe run_slurm_nompi 4 2 sockets "$fake/sbatch" \
    scripts/run_slurm_nompi.sbatch
[ "$(find "$out/run_slurm_nompi/rendezvous" -mindepth 1 -maxdepth 1 | wc -l)" = 2 ] || fail "run_slurm_nompi: not 2 rendezvous directories (one per job)"

# a missing binary: one clear line, exit 1, from every recipe
for recipe in scripts/run_1gpu.sh scripts/run_8gpu.sh "scripts/run_multinode_mpirun.sh $out/hosts 2" \
              "$fake/sbatch scripts/run_slurm_mpi.sbatch" "$fake/sbatch scripts/run_slurm_nompi.sbatch"; do
    if BIN=/nonexistent OUT_DIR=$out/nobin $recipe > /dev/null 2> "$out/nobin.stderr"; then
        fail "$recipe with BIN=/nonexistent: exit 0"
    fi
    grep -q "^error: /nonexistent not found: build it with 'make train_gpt_bf16'" "$out/nobin.stderr" ||
        fail "$recipe with BIN=/nonexistent: $(cat "$out/nobin.stderr")"
    [ "$(wc -l < "$out/nobin.stderr")" = 1 ] || fail "$recipe with BIN=/nonexistent: more than one line: $(cat "$out/nobin.stderr")"
done
[ -e "$out/nobin" ] && fail "BIN=/nonexistent: $out/nobin was made"
echo "ok BIN=/nonexistent, every recipe: $(cat "$out/nobin.stderr")"
echo "PASS"
