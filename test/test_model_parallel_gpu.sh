#!/usr/bin/env bash
# Tensor, sequence and pipeline parallelism on the GPU trainers (-tp, -sp, -pp; issue 25), executed
# on the emulated GPU: every rank under mpirun drives its own emulated GPU (EMU_DEVICES), and the
# groups' collectives (the projections' all-reduces, the classifier's softmax statistics, the
# stages' sends) and the data-parallel gradients go through the emulated NCCL. The reference is the same trainer on one process
# (itself checked against PyTorch and the CPU trainer by test_emu.sh).
#  - GPT-2 (4 heads, C 64, V 300 padded to 384), 4 steps of 2 micro-steps: TP 2, TP 2 x DP 2
#    at ZeRO 1 and 3 (each rank's part sharded over the replicas, its layers gathered as they run;
#    ZeRO 2 in a resume below; ZeRO 0's data-parallel ranks in test_model_parallel.sh) in fp32 (TF32 off): every train and val loss within 1e-6 relative, grad
#    norms within 1e-5, the final model file (rank 0 puts the parts together) within 5e-5 of the
#    largest weight (AdamW's m / (sqrt(v) + eps) turns the last bits of a gradient near eps into
#    a part of lr: 1.6e-5 measured on a few of Llama's weights, whose losses agreed to the bit);
#    bf16 at TP 2 within bf16's tolerance (the projections' partial sums are
#    added in bf16: losses within 2e-3, norms 1e-2, weights 2e-2 of the largest)
#  - Llama 3 with grouped-query attention: 6 query heads on 2 KV heads (split with them) at TP 2
#    x DP 2 (ZeRO 3), 4 on 1 (the KV head shared: the ranks add their parts of its
#    gradient) at TP 2 and TP 4, fp32, the same tolerances; bf16 at TP 2
#  - checkpoints are layout-free: TP 2 x DP 2's at step 2 (ZeRO 3) resumes as one process, and
#    one process's at TP 2 x DP 2 (ZeRO 2, 3); bf16's at TP 2 (master weights in the one state
#    file) as one process; Llama's both ways
#  - sequence parallelism (-sp 1: the residual stream and the norms on T/tp positions a rank, the
#    norms' outputs all-gathered, the projections' sums reduce-scattered, the norms' weight
#    gradients added over the group): GPT-2 at TP 2 and TP 2 x DP 2 (ZeRO 1), Llama (4 on 1) at
#    TP 2 x DP 2 with ZeRO 3 and -r 2 (the layer's forward, its
#    collectives included, run again in the backward), and in bf16; the same tolerances against
#    the same references; fewer activation bytes planned than -tp alone
#  - pipelines (-pp, 1F1B; activations and gradients through NCCL's send and receive, in the
#    rounds of llmc/pipeline.h, each round's in one group; GPT-2's tied wte on the first and last
#    stage, its gradients added at the step's end): PP 2, PP 2 x DP 2 at ZeRO 1, TP 2 x PP 2,
#    Llama (4 on 1) TP 2 x PP 2 with -sp 1, bf16 PP 2; the same tolerances; PP 2 x DP 2's
#    checkpoint resumed as one process, one process's at PP 2, Llama's TP 2 x PP 2 one at DP 4
#  - interleaved pipelines (-vp 2: two chunks of layers a stage, stage 1's output back to stage 0,
#    so at PP 2 both directions' messages share one pair of ranks) on 4-layer models over 4
#    micro-batches a step (the schedule's steady state, not only its warm-up): GPT-2 PP 2 x DP 2
#    at ZeRO 1, Llama (4 on 1) PP 2 x DP 2 at ZeRO 3 and TP 2 x PP 2 with -sp 1, bf16 PP 2;
#    against one process on the same models; a -vp run's checkpoint resumed as one process
#  - sampling at TP 2 (with and without -sp: the context padded to whole parts) and at PP 2 (the
#    last stage's row to every rank): the single process's greedy text
#  - the race check (EMU_RACECHECK=1) on TP 2 x DP 2 -sp 1 runs, GPT-2 at ZeRO 1, Llama at ZeRO 3,
#    and on PP 2 -vp 2 (the pipeline's messages on their own stream)
#  - refused in one line: heads that do not split, more stages than layers, -sp without -tp, -vp
#    with micro-batches that are not a multiple of -pp
set -eu
cd "$(dirname "$0")/.."
source test/lib.sh  # defines: PY, compare_logs
out=test/out/model_parallel_gpu
rm -rf "$out"; mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
if ! command -v mpirun > /dev/null; then
    echo "SKIP: no mpirun"
    exit 77
fi
make -s train_gpt_fp32_emu train_gpt_bf16_emu
if ! ldd ./train_gpt_fp32_emu | grep -q libmpi; then
    echo "SKIP: the emulated trainers were built without MPI"
    exit 77
fi
"$PY" test/pytorch_reference.py --random-checkpoint "$out/gpt2.bin" --V 300 --maxT 64 --L 2 --NH 4 --C 64 --seed 5 > /dev/null
"$PY" test/make_test_data.py --out "$out/v300" --vocab 300 --train-tokens 9000 --val-tokens 3000 --shards 2 --seed 9 > /dev/null
set -f  # the flags below hold globs for the trainer, not for the shell
export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# total batch -d 512 tokens: 2 micro-steps of 8 rows of 32 on one process (or on each
# tensor-parallel group: its ranks read the same rows), 4 rows on each of 2 data-parallel ranks
gpt2="-e $out/gpt2.bin -i $out/v300/markov_train_*.bin -j $out/v300/markov_val_*.bin -t 32 -d 512 -x 4 -l 2e-3 -u 2
      -q 0.1 -c 0.1 -v 2 -m 3 -s 0 -n 2 -f 0 -ak 0"
llama6="-e llama3:l2c96h6kv2f256v300 -i $out/v300/markov_train_*.bin -j $out/v300/markov_val_*.bin -t 32 -d 512 -x 4
        -l 2e-3 -u 2 -q 0.1 -c 0.1 -v 2 -m 3 -s 0 -n 2 -f 0 -ak 0"
llama4=${llama6/l2c96h6kv2f256v300/l2c64h4kv1f160v300}
# 4 layers for -vp 2 at PP 2, 4 micro-batches a step (-d 1024)
"$PY" test/pytorch_reference.py --random-checkpoint "$out/gpt2L4.bin" --V 300 --maxT 64 --L 4 --NH 4 --C 64 --seed 5 > /dev/null
gpt2L4=${gpt2/gpt2.bin/gpt2L4.bin} gpt2L4=${gpt2L4/-d 512/-d 1024}
llama4L4=${llama4/l2c64/l4c64} llama4L4=${llama4L4/-d 512/-d 1024}
FINAL=model_00000004.bin

run_np() {  # run_np PREC NP DIR FLAGS...: mpirun -np NP (1: the plain process), each rank its own GPU
    local prec=$1 np=$2 dir=$3; shift 3
    if [ "$np" = 1 ]; then
        timeout 600 ./train_gpt_${prec}_emu "$@" -o "$dir" > "$dir.stdout" 2>&1 ||
            fail "$prec 1 process $*: $(tail -3 "$dir.stdout")"
    else
        timeout 600 mpirun -np "$np" env EMU_DEVICES="$np" ./train_gpt_${prec}_emu "$@" -o "$dir" > "$dir.stdout" \
            2> "$dir.stderr" || fail "$prec mpirun -np $np $*: $(tail -3 "$dir.stderr")"
    fi
}
# same_model REF RUN TOL: the two model files' values (fp32 or bf16, as their header says) within
# TOL of the largest |value|, the headers and sizes identical; prints the largest difference
same_model() {
    "$PY" - "$1" "$2" "$3" <<'PYEOF'
import sys, numpy as np
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
if a[:1024] != b[:1024] or len(a) != len(b):
    print("headers or sizes differ"); sys.exit(1)
def values(raw):
    if np.frombuffer(raw[:8], dtype=np.int32)[1] == 5:  # bf16: the high half of an fp32
        return (np.frombuffer(raw[1024:], dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.frombuffer(raw[1024:], dtype=np.float32).astype(np.float64)
x, y = values(a), values(b)
d = float(np.max(np.abs(x - y))) / float(np.max(np.abs(x)))
print(f"model file: max diff {d:.2g} of the largest weight")
sys.exit(0 if d <= float(sys.argv[3]) else 1)
PYEOF
}
check_run() {  # check_run NAME REF_DIR RUN_DIR LOSS_TOL NORM_TOL MODEL_TOL
    local logs model
    logs=$(compare_logs "$2/main.log" "$3/main.log" "$4" "$5") || fail "$1: main.log: $logs"
    model=$(same_model "$2/$FINAL" "$3/$FINAL" "$6") || fail "$1: $model"
    echo "ok   $1: $logs; $model"
}
forget_last() { rm -f "$1/DONE_00000004"; }  # the checkpoint at step 4 no longer exists: -y 1 resumes at 2
# the tolerances of a precision (check_run's LOSS NORM MODEL), and a family's one-process reference
tols_for() { [ "$1" = bf16 ] && echo "2e-3 1e-2 2e-2" || echo "1e-6 1e-5 5e-5"; }
ref_for() {  # FAMILY PREC
    case $1 in gpt2) echo "$out/$2-ref" ;; *L4) echo "$out/$1-$2-ref" ;; *) echo "$out/$1-$2-np1-tp1-z0-r0" ;; esac
}

# fp32 and bf16: processes, -tp, -b, -z
for prec in fp32 bf16; do
    run_np $prec 1 "$out/$prec-ref" $gpt2 -b 8
    layouts=("2 2 8 0")
    [ $prec = fp32 ] && layouts+=("4 2 4 1")
    [ $prec = fp32 ] && layouts+=("4 2 4 3")  # ZeRO 2 below (a resume), TP 4 with Llama
    tols=$(tols_for $prec)
    for layout in "${layouts[@]}"; do
        read -r np tp b z <<< "$layout"
        d="$out/$prec-np$np-tp$tp-z$z"
        run_np $prec "$np" "$d" $gpt2 -b "$b" -tp "$tp" -z "$z"
        grep -q "^tensor parallelism: $((np / tp)) data-parallel x $tp tensor-parallel ranks (NCCL)" "$d.stdout" ||
            fail "$prec TP $tp: no plan line: $(grep -m 1 tensor "$d.stdout")"
        check_run "$prec TP $tp x DP $((np / tp)) -z $z (-b $b)" "$out/$prec-ref" "$d" $tols
    done
done

# Llama: family, precision, processes, -tp, -b, -z, -r
for layout in "llama6 fp32 1 1 8 0 0" "llama6 fp32 4 2 4 3 0" "llama4 fp32 1 1 8 0 0" \
              "llama4 fp32 2 2 8 0 0" "llama4 fp32 4 4 8 0 0" "llama4 bf16 1 1 8 0 0" "llama4 bf16 2 2 8 0 0"; do
    read -r fam prec np tp b z r <<< "$layout"
    d="$out/$fam-$prec-np$np-tp$tp-z$z-r$r"
    run_np $prec "$np" "$d" ${!fam} -b "$b" -tp "$tp" -z "$z" -r "$r"
    [ "$np" = 1 ] && continue
    tols=$(tols_for $prec)
    check_run "$fam $prec TP $tp x DP $((np / tp)) -z $z -r $r (-b $b)" "$(ref_for $fam $prec)" "$d" $tols
done

# sequence parallelism (-sp 1): family, precision, processes, -tp, -b, -z, -r; against the same
# references; and less activation memory planned than -tp alone
for layout in "gpt2 fp32 2 2 8 0 0" "gpt2 fp32 4 2 4 1 0" "llama4 fp32 4 2 4 3 2" "llama4 bf16 2 2 8 0 0"; do
    read -r fam prec np tp b z r <<< "$layout"
    d="$out/sp-$fam-$prec-np$np-tp$tp-z$z-r$r"
    run_np $prec "$np" "$d" ${!fam} -b "$b" -tp "$tp" -z "$z" -r "$r" -sp 1
    tols=$(tols_for $prec) ref=$(ref_for $fam $prec)
    check_run "$fam $prec -sp 1 TP $tp x DP $((np / tp)) -z $z -r $r (-b $b)" "$ref" "$d" $tols
done
acts() { grep -m 1 "^memory plan" "$1" | grep -o 'activations [0-9.]* MiB' | cut -d' ' -f2; }
with=$(acts "$out/sp-gpt2-fp32-np2-tp2-z0-r0.stdout") without=$(acts "$out/fp32-np2-tp2-z0.stdout")
awk -v a="$with" -v b="$without" 'BEGIN { exit !(a < b) }' || fail "GPT-2 -sp 1 plans $with MiB of activations, -tp 2 alone $without"
echo "ok   GPT-2 -sp 1 at TP 2: activations $with MiB a rank, $without without -sp"

# pipelines (-pp over a step's micro-batches; the stages' activations and gradients through NCCL's
# send and receive, in rounds; GPT-2's tied wte on the first and the last stage, its gradients
# added): 1F1B, then -vp 2 on the 4-layer models (one process's run on each the reference):
# family, precision, processes, -tp, -pp, -vp, -b, -z, -sp
for ref in "gpt2L4 fp32" "llama4L4 fp32" "gpt2L4 bf16"; do
    read -r fam prec <<< "$ref"
    run_np $prec 1 "$(ref_for $fam $prec)" ${!fam} -b 8
done
for layout in "gpt2 fp32 2 1 2 1 8 0 0" "gpt2 fp32 4 1 2 1 4 1 0" "gpt2 fp32 4 2 2 1 8 0 0" "llama4 fp32 4 2 2 1 8 0 1" \
              "gpt2 bf16 2 1 2 1 8 0 0" \
              "gpt2L4 fp32 4 1 2 2 4 1 0" "llama4L4 fp32 4 1 2 2 4 3 0" "llama4L4 fp32 4 2 2 2 8 0 1" \
              "gpt2L4 bf16 2 1 2 2 8 0 0"; do
    read -r fam prec np tp pp vp b z sp <<< "$layout"
    d="$out/pp-$fam-$prec-np$np-tp$tp-pp$pp-vp$vp-z$z-sp$sp"
    run_np $prec "$np" "$d" ${!fam} -b "$b" -tp "$tp" -pp "$pp" -vp "$vp" -z "$z" -sp "$sp"
    grep -q "^pipeline parallelism: $pp stages x $vp virtual" "$d.stdout" || fail "$fam PP $pp -vp $vp: no plan line"
    tols=$(tols_for $prec) ref=$(ref_for $fam $prec)
    check_run "$fam $prec TP $tp x PP $pp (-vp $vp) x DP $((np / tp / pp)) -z $z -sp $sp (-b $b)" "$ref" "$d" $tols
done

# layout-free checkpoints: TP 2 x DP 2 (ZeRO 1) saved at step 2 resumed as one process; one
# process's resumed at TP 2 x DP 2 (ZeRO 2); bf16's (with its master weights) as one process
resume() {  # resume PREC FAMILY SRC NAME NP FLAGS...: SRC's checkpoint at step 2 continued in d=resume-NAME
    local prec=$1 fam=$2 src=$3 name=$4 np=$5; shift 5
    d="$out/resume-$name"
    rm -rf "$d"; cp -r "$src" "$d"; forget_last "$d"
    run_np $prec "$np" "$d" ${!fam} "$@" -y 1
    grep -q "resumed from .*model_00000002.bin at step 2" "$d.stdout" || fail "$name: $(tail -2 "$d.stdout")"
}
resume fp32 gpt2 "$out/fp32-ref" fp32-1-to-tp 4 -b 4 -tp 2 -z 2
check_run "fp32 saved by one process, resumed at TP 2 x DP 2 -z 2" "$out/fp32-ref" "$d" 1e-6 1e-5 5e-5
resume fp32 gpt2 "$out/fp32-np4-tp2-z3" fp32-tp-z3-to-1 1 -b 8
check_run "fp32 saved at TP 2 x DP 2 -z 3, resumed as one process" "$out/fp32-ref" "$d" 1e-6 1e-5 5e-5
resume fp32 gpt2 "$out/fp32-ref" fp32-1-to-tp-z3 4 -b 4 -tp 2 -z 3
check_run "fp32 saved by one process, resumed at TP 2 x DP 2 -z 3" "$out/fp32-ref" "$d" 1e-6 1e-5 5e-5
resume fp32 gpt2 "$out/pp-gpt2-fp32-np4-tp1-pp2-vp1-z1-sp0" fp32-pp-to-1 1 -b 8
check_run "fp32 saved at PP 2 x DP 2 -z 1, resumed as one process" "$out/fp32-ref" "$d" 1e-6 1e-5 5e-5
resume fp32 gpt2 "$out/fp32-ref" fp32-1-to-pp 2 -b 8 -pp 2
check_run "fp32 saved by one process, resumed at PP 2" "$out/fp32-ref" "$d" 1e-6 1e-5 5e-5
resume fp32 llama4 "$out/pp-llama4-fp32-np4-tp2-pp2-vp1-z0-sp1" llama4-tp-pp-to-dp 4 -b 2 -z 1
check_run "Llama (4 on 1) saved at TP 2 x PP 2 -sp 1, resumed at DP 4 -z 1" "$(ref_for llama4 fp32)" "$d" 1e-6 1e-5 5e-5
resume fp32 gpt2L4 "$out/pp-gpt2L4-fp32-np4-tp1-pp2-vp2-z1-sp0" fp32-vp-to-1 1 -b 8
check_run "fp32 saved at PP 2 -vp 2 x DP 2 -z 1, resumed as one process" "$(ref_for gpt2L4 fp32)" "$d" 1e-6 1e-5 5e-5
resume bf16 gpt2 "$out/bf16-np2-tp2-z0" bf16-tp-to-1 1 -b 8
check_run "bf16 saved at TP 2, resumed as one process" "$out/bf16-np2-tp2-z0" "$d" 2e-3 1e-2 2e-2
resume fp32 llama6 "$out/llama6-fp32-np4-tp2-z3-r0" llama6-tp-to-1 1 -b 8
check_run "Llama (6 on 2) saved at TP 2 x DP 2 -z 3, resumed as one process" "$out/llama6-fp32-np1-tp1-z0-r0" "$d" \
    1e-6 1e-5 5e-5
resume fp32 llama4 "$out/llama4-fp32-np1-tp1-z0-r0" llama4-1-to-tp 2 -b 8 -tp 2
check_run "Llama (4 on 1) saved by one process, resumed at TP 2" "$out/llama4-fp32-np1-tp1-z0-r0" "$d" 1e-6 1e-5 5e-5

# sampling: the group puts each row of logits together; greedy text as one process's
run_np fp32 1 "$out/sample-ref" $gpt2 -b 8 -x 2 -s 2 -g 12 -st 0 -n 0
sample_of() { awk '/^generating:/ { on = 1; next } on && /^---$/ { k++; if (k == 2) exit; next } on' "$1"; }
a=$(sample_of "$out/sample-ref.stdout")
for layout in "2 1 0" "2 1 1" "1 2 0"; do  # -tp, -pp, -sp (-sp 1: contexts padded to whole parts)
    read -r tp pp sp <<< "$layout"
    run_np fp32 2 "$out/sample-tp$tp-pp$pp-sp$sp" $gpt2 -b 8 -x 2 -s 2 -g 12 -st 0 -n 0 -tp $tp -pp $pp -sp $sp
    b=$(sample_of "$out/sample-tp$tp-pp$pp-sp$sp.stdout")
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "sampling at TP $tp PP $pp -sp $sp: '$b', one process: '$a'"
    echo "ok   sampling at TP $tp x PP $pp -sp $sp: the single process's greedy text"
done

# the race check (EMU_RACECHECK=1, the trainer's race-check build): TP 2 x DP 2 with -sp 1 (the
# layers' collectives on the compute stream, the gradient buckets on their own), GPT-2 at ZeRO 1
# and the shared-KV Llama at ZeRO 3; PP 2 -vp 2 over 4 micro-batches (the rounds' sends and
# receives on their own stream: an op that did not wait for the round bringing its input was
# seen to fail here); two steps with validation, a sample and a checkpoint
make -s build/emu/race/train_gpt_fp32
for run in "gpt2 4 -tp 2 -sp 1 -z 1" "llama4 4 -tp 2 -sp 1 -z 3" "gpt2L4 2 -pp 2 -vp 2 -d 512"; do
    read -r fam np flags <<< "$run"
    d="$out/race-$fam"
    rm -rf "$d"
    # shellcheck disable=SC2086
    timeout 600 mpirun -np "$np" env EMU_DEVICES="$np" EMU_RACECHECK=1 build/emu/race/train_gpt_fp32 ${!fam} -b 4 -d 256 \
        -x 2 -v 2 -m 1 -s 2 -g 4 -n 2 $flags -o "$d" > "$d.stdout" 2>&1 ||
        fail "$fam $flags under EMU_RACECHECK=1: $(grep -m 3 -E 'race:|error' "$d.stdout" | cut -c1-300)"
    grep -q '^done: 2 steps' "$d.stdout" || fail "$fam $flags under EMU_RACECHECK=1: $(tail -2 "$d.stdout")"
    echo "ok   $fam $flags on $np ranks under EMU_RACECHECK=1: 2 steps, val, sample, checkpoint, no hazard"
done

# refused in one line on stderr, exit 1, nothing written
refuse() {  # refuse NAME NP PATTERN FLAGS...
    local name=$1 np=$2 pat=$3 d="$out/refused"; shift 3
    rm -rf "$d"
    if timeout 120 mpirun -np "$np" env EMU_DEVICES="$np" ./train_gpt_fp32_emu "$@" -o "$d" > "$d.stdout" \
        2> "$d.stderr"; then fail "$name: accepted"; fi
    grep -q "$pat" "$d.stderr" || fail "$name: $(grep -m 1 error "$d.stderr")"
    [ ! -e "$d/main.log" ] || fail "$name: wrote a main.log"
    echo "ok   refused: $name: $(grep -m 1 "$pat" "$d.stderr")"
}
refuse "3 processes at -tp 2" 3 "flag -tp 2 -pp 1: 3 processes are not whole replicas of 2" $gpt2 -b 8 -tp 2
refuse "GPT-2's 4 heads at -tp 3" 3 "flag -tp 3 -pp 1: the model's 4 heads do not split into 3 equal parts" $gpt2 -b 8 -tp 3
refuse "-vp 2 over 3 micro-batches" 2 "flag -vp 2: the 3 micro-batches of a step" $gpt2L4 -b 8 -pp 2 -vp 2 -d 768
refuse "3 stages of 2 layers" 3 "flag -tp 1 -pp 3: 3 pipeline stages (-pp x -vp) but the model has 2 layers" $gpt2 -b 8 -pp 3
refuse "-sp 1 without -tp" 2 "flag -sp 1: sequence parallelism splits the positions over tensor-parallel ranks" $gpt2 -b 4 -sp 1
refuse "Llama's 6 query heads at -tp 4" 4 "flag -tp 4 -pp 1: the model's 6 heads do not split" $llama6 -b 8 -tp 4
echo "PASS: tensor, sequence and pipeline parallelism on the emulated GPU trainers"
