#!/usr/bin/env bash
# Tensor and pipeline parallelism (-tp, -pp; train_gpt_cpu under mpirun): a layout of
# data-parallel x pipeline-parallel x tensor-parallel ranks must train like one process with
# the same total batch. The reference is the single-process trainer (itself checked against
# PyTorch by test_train_vs_pytorch.sh and test_llama_vs_pytorch.sh).
#  - GPT-2 and two Llama 3s with grouped-query attention, 8 steps of 2 micro-steps each: 6
#    query heads on 2 KV heads (split with them), and 4 on 1 (shared: each rank holds it, and the
#    ranks add their parts of its gradient); TP 2, TP 4 (GPT-2, 4 on 1), TP 2 x DP 2 at ZeRO 0,
#    1 and 2: every train and
#    val loss within 1e-6 relative, every grad norm within 1e-5, the lr identical; the final
#    model file (rank 0 puts the parts together) within 1e-5 of the reference's, relative to
#    the largest weight
#  - ZeRO 3 over the data-parallel ranks (each layer of a rank's part gathered as it runs): TP 2
#    x DP 2, PP 2 x DP 2, TP 2 x PP 2 x DP 2 (-vp 2 too), resumed as one process
#  - pipelines (1F1B over the micro-batches of a step): PP 2, TP 2 x PP 2, PP 2 x DP 2 at ZeRO
#    0, 1 and 2, TP 2 x PP 2 x DP 2 for both families, and a 4-layer GPT-2 on 4 stages with 4
#    micro-batches a step and with 2 (fewer than stages), the same tolerances
#  - interleaved pipelines (-vp 2, 4 virtual stages of one layer): PP 2 x DP 2 at ZeRO 1 (the
#    issue's layout), TP 2 x PP 2, TP 2 x PP 2 x DP 2, TP 2 x PP 2 with -sp 1, a 4-layer GPT-2
#    and a 4-layer Llama (drawn from the same seed as the one-process run)
#  - sequence parallelism (-sp 1): TP 2, TP 2 x DP 2 at ZeRO 1, TP 2 x PP 2, both families and
#    the shared KV head, Llama's recompute (-r 1, -r 2) too, the same tolerances; the planned
#    activations below -tp alone's
#  - checkpoints are layout-free: a TP 2 x DP 2 run saved at step 4 resumes as one process,
#    on 4 data-parallel ranks and at TP 4, and a single process's checkpoint resumes at
#    TP 2 x DP 2; each continues like the uninterrupted run (the same tolerances)
#  - sampling on tensor-parallel ranks (the logits put together) prints the single process's text
#  - bad layouts are refused with one line before anything is allocated: processes that are
#    not whole groups, heads or KV heads that do not split, -tp with -z 3
set -eu
cd "$(dirname "$0")/.."
source test/lib.sh  # defines: PY, compare_logs
make -s train_gpt_cpu import_hf
out=test/out/model_parallel
rm -rf "$out"; mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
if ! command -v mpirun > /dev/null || ! ldd ./train_gpt_cpu | grep -q libmpi; then
    echo "SKIP: no mpirun, or train_gpt_cpu built without MPI"
    exit 77
fi
"$PY" test/pytorch_reference.py --random-checkpoint "$out/gpt2.bin" --V 300 --maxT 64 --L 2 --NH 4 --C 64 --seed 5 > /dev/null
"$PY" test/pytorch_reference.py --random-checkpoint "$out/gpt2_l4.bin" --V 300 --maxT 64 --L 4 --NH 4 --C 64 --seed 6 > /dev/null
"$PY" test/make_test_data.py --out "$out/v300" --vocab 300 --train-tokens 9000 --val-tokens 3000 --shards 2 --seed 9 > /dev/null
# test/llama_reference.py's gqa2: V=1000, C=96, 6 query heads on 2 KV heads, F=256
"$PY" test/llama_reference.py --write-hf "$out/llama_hf" --config gqa2 --seed 3
./import_hf "$out/llama_hf/model.safetensors" "$out/llama.bin" > /dev/null
# and gqa1: V=300, C=64, 4 query heads on 1 KV head, F=160
"$PY" test/llama_reference.py --write-hf "$out/llama1_hf" --config gqa1 --seed 3
./import_hf "$out/llama1_hf/model.safetensors" "$out/llama1.bin" > /dev/null
"$PY" test/make_test_data.py --out "$out/v1000" --vocab 1000 --train-tokens 12000 --val-tokens 4000 --shards 2 --seed 4 > /dev/null
set -f  # the flags below hold globs for the trainer, not for the shell
export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# total batch -d 512 tokens: 2 micro-steps of 8 rows of 32 on one process (or on each
# tensor-parallel group: every rank of a group reads the same rows), 4 rows on each of 2
# data-parallel ranks
common="-t 32 -d 512 -x 8 -l 2e-3 -u 3 -q 0.1 -c 0.1 -v 4 -m 3 -s 0 -n 4 -sh 1 -sd 7"
gpt2="-e $out/gpt2.bin -i $out/v300/markov_train_*.bin -j $out/v300/markov_val_*.bin $common"
llama="-e $out/llama.bin -i $out/v1000/markov_train_*.bin -j $out/v1000/markov_val_*.bin $common"
llama1="-e $out/llama1.bin -i $out/v300/markov_train_*.bin -j $out/v300/markov_val_*.bin $common"
FINAL=model_00000008.bin

run_np() {  # run_np NP DIR FLAGS...: mpirun -np NP (1: the plain process)
    local np=$1 dir=$2; shift 2
    if [ "$np" = 1 ]; then
        timeout 300 ./train_gpt_cpu "$@" -o "$dir" > "$dir.stdout" 2>&1 || fail "1 process $*: $(tail -3 "$dir.stdout")"
    else
        timeout 300 mpirun -np "$np" ./train_gpt_cpu "$@" -o "$dir" > "$dir.stdout" 2> "$dir.stderr" ||
            fail "mpirun -np $np $*: $(tail -3 "$dir.stderr")"
    fi
}
# same_model REF RUN: the two model files' values within 1e-5 of the largest |value| (the
# header and the size identical); prints the largest difference
same_model() {
    "$PY" - "$1" "$2" <<'PYEOF'
import sys, numpy as np
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
if a[:1024] != b[:1024] or len(a) != len(b):
    print("headers or sizes differ"); sys.exit(1)
x, y = (np.frombuffer(v[1024:], dtype=np.float32).astype(np.float64) for v in (a, b))
d = float(np.max(np.abs(x - y))) / float(np.max(np.abs(x)))
print(f"model file: max diff {d:.2g} of the largest weight")
sys.exit(0 if d <= 1e-5 else 1)
PYEOF
}
forget_step8() { rm -f "$1/DONE_00000008"; }  # the checkpoint at step 8 no longer exists: -y 1 resumes at 4
check_run() {  # check_run NAME REF_DIR RUN_DIR: main.log and the final model against the reference
    local name=$1 ref=$2 run=$3 logs model
    logs=$(compare_logs "$ref/main.log" "$run/main.log" 1e-6 1e-5) || fail "$name: main.log: $logs"
    model=$(same_model "$ref/$FINAL" "$run/$FINAL") || fail "$name: $model"
    echo "ok   $name: $logs; $model"
}

for fam in gpt2 llama llama1; do
    flags=${!fam}
    run_np 1 "$out/$fam-ref" $flags -b 8
    layouts=("2 2 8 0" "4 2 4 0" "4 2 4 1" "4 2 4 2" "4 2 4 3")  # processes, -tp, -b, -z
    [ $fam != llama ] && layouts+=("4 4 8 0")         # 4 heads on 4 ranks (gqa2's 6 do not split in 4)
    for layout in "${layouts[@]}"; do
        read -r np tp b z <<< "$layout"
        d="$out/$fam-np$np-tp$tp-z$z"
        run_np "$np" "$d" $flags -b "$b" -tp "$tp" -z "$z"
        grep -q "^tensor parallelism: $((np / tp)) data-parallel x $tp tensor-parallel ranks" "$d.stdout" ||
            fail "$fam TP $tp: no plan line: $(grep -m 1 tensor "$d.stdout")"
        check_run "$fam TP $tp x DP $((np / tp)) -z $z (-b $b)" "$out/$fam-ref" "$d"
    done
done

# pipelines: processes, -tp, -pp, -b, -z
for fam in gpt2 llama; do
    flags=${!fam}
    for layout in "2 1 2 8 0" "4 2 2 8 0" "4 1 2 4 0" "4 1 2 4 1" "4 1 2 4 2" "4 1 2 4 3" "8 2 2 4 1" "8 2 2 4 3"; do
        read -r np tp pp b z <<< "$layout"
        d="$out/$fam-np$np-tp$tp-pp$pp-z$z"
        run_np "$np" "$d" $flags -b "$b" -tp "$tp" -pp "$pp" -z "$z"
        grep -q "^pipeline parallelism: $pp stages" "$d.stdout" || fail "$fam PP $pp: no plan line"
        check_run "$fam TP $tp x PP $pp x DP $((np / tp / pp)) -z $z (-b $b)" "$out/$fam-ref" "$d"
    done
done
# 4 stages of one layer: 4 micro-batches a step (-d 1024), and 2 (the pipeline never fills)
deep="-e $out/gpt2_l4.bin -i $out/v300/markov_train_*.bin -j $out/v300/markov_val_*.bin $common"
for d_tokens in 1024 512; do
    run_np 1 "$out/deep-ref-$d_tokens" $deep -b 8 -d $d_tokens
    run_np 4 "$out/deep-pp4-$d_tokens" $deep -b 8 -d $d_tokens -pp 4
    grep -q "over $((d_tokens / 256)) micro-batches a step" "$out/deep-pp4-$d_tokens.stdout" || fail "PP 4: $(grep pipeline "$out/deep-pp4-$d_tokens.stdout")"
    check_run "4-layer GPT-2 on PP 4, $((d_tokens / 256)) micro-batches a step" "$out/deep-ref-$d_tokens" "$out/deep-pp4-$d_tokens"
done

# interleaved: processes, -tp, -pp, -vp, -b, -z, -sp (4 micro-batches a step)
llama4="-e llama3:l4c64h4kv2f128v300 -i $out/v300/markov_train_*.bin -j $out/v300/markov_val_*.bin $common"
run_np 1 "$out/llama4-ref" $llama4 -b 8 -d 1024
for fam in deep llama4; do
    flags=${!fam} ref="$out/$fam-ref"
    [ $fam = deep ] && ref="$out/deep-ref-1024"
    for layout in "4 1 2 2 4 1 0" "4 2 2 2 8 0 0" "8 2 2 2 4 1 0" "8 2 2 2 4 2 0" "8 2 2 2 4 3 0" "4 2 2 2 8 0 1"; do
        read -r np tp pp vp b z sp <<< "$layout"
        d="$out/$fam-vp-np$np-tp$tp-pp$pp-vp$vp-z$z-sp$sp"
        run_np "$np" "$d" $flags -b "$b" -d 1024 -tp "$tp" -pp "$pp" -vp "$vp" -z "$z" -sp "$sp"
        grep -q "^pipeline parallelism: $pp stages x $vp virtual .* interleaved 1F1B over 4 micro-batches" "$d.stdout" ||
            fail "$fam -vp $vp: $(grep -m 1 pipeline "$d.stdout")"
        check_run "$fam TP $tp x PP $pp -vp $vp x DP $((np / tp / pp)) -z $z -sp $sp (-b $b)" "$ref" "$d"
    done
done
# -pl: stages of the layers given, not balanced: PP 2 as 1 + 3 and as 3 + 1 layers
for pl in "1,3" "3,1"; do
    d="$out/deep-pl-$pl"
    run_np 2 "$d" $deep -b 8 -d 1024 -pp 2 -pl "$pl"
    check_run "4-layer GPT-2 on PP 2 -pl $pl" "$out/deep-ref-1024" "$d"
    d="$out/llama4-pl-$pl"
    run_np 2 "$d" $llama4 -b 8 -d 1024 -pp 2 -pl "$pl"
    check_run "4-layer Llama on PP 2 -pl $pl" "$out/llama4-ref" "$d"
done
d="$out/deep-from-vp"  # an interleaved pipeline's checkpoint as one process
rm -rf "$d"; cp -r "$out/deep-vp-np4-tp1-pp2-vp2-z1-sp0" "$d"; forget_step8 "$d"
run_np 1 "$d" $deep -b 8 -d 1024 -y 1
check_run "4-layer GPT-2 saved at PP 2 -vp 2 x DP 2 -z 1, resumed as one process" "$out/deep-ref-1024" "$d"

# sequence parallelism: processes, -tp, -pp, -b, -z, -r
for fam in gpt2 llama llama1; do
    flags=${!fam}
    layouts=("2 2 1 8 0 0" "4 2 1 4 1 0" "4 2 2 8 0 0")
    [ $fam = llama ] && layouts+=("2 2 1 8 0 1" "2 2 1 8 0 2")
    for layout in "${layouts[@]}"; do
        read -r np tp pp b z r <<< "$layout"
        d="$out/$fam-sp-np$np-tp$tp-pp$pp-z$z-r$r"
        run_np "$np" "$d" $flags -b "$b" -tp "$tp" -pp "$pp" -z "$z" -r "$r" -sp 1
        check_run "$fam -sp 1 TP $tp x PP $pp x DP $((np / tp / pp)) -z $z -r $r (-b $b)" "$out/$fam-ref" "$d"
    done
    acts() { grep -m 1 "^memory per process" "$1" | grep -o 'activations [0-9.]*' | cut -d' ' -f2; }
    with=$(acts "$out/$fam-sp-np2-tp2-pp1-z0-r0.stdout") without=$(acts "$out/$fam-np2-tp2-z0.stdout")
    awk -v a="$with" -v b="$without" 'BEGIN { exit !(a < b) }' || fail "$fam: -sp 1 plans $with MiB of activations, -tp 2 alone $without"
    echo "ok   $fam -sp 1 at TP 2: activations $with MiB a rank, $without without -sp"
done

# -pb 1: each stage's wait for the others (dev/bench_pipeline.sh measures it against 1F1B's
# bubble on a quiet machine; here only that it is reported, with the model's figure)
run_np 2 "$out/pb" $gpt2 -b 8 -pp 2 -pb 1 -x 3 -n 0
grep -q "^pipeline bubble, measured (-pb 1): .* stage 0 [0-9.]*% stage 1 [0-9.]*%; mean [0-9.]*%; 1F1B's (pp-1)/(m+pp-1) = 33.3%" \
    "$out/pb.stdout" || fail "-pb 1 at PP 2: $(grep -m 1 'pipeline bubble' "$out/pb.stdout")"
echo "ok   -pb 1 at PP 2: $(grep -m 1 'pipeline bubble' "$out/pb.stdout")"

# layout-free checkpoints: TP 2 x DP 2 (ZeRO 1) saved at step 4, resumed on other layouts
for fam in gpt2 llama llama1; do
    flags=${!fam}
    src="$out/$fam-np4-tp2-z1"
    for layout in "1 1 1 8 0" "4 1 1 2 1" "4 4 1 8 0" "2 2 1 8 2" "4 2 2 8 0" "4 1 2 4 1"; do
        read -r np tp pp b z <<< "$layout"
        [ $fam = llama ] && [ "$tp" = 4 ] && continue
        d="$out/$fam-resume-np$np-tp$tp-pp$pp-z$z"
        rm -rf "$d"; cp -r "$src" "$d"; forget_step8 "$d"
        run_np "$np" "$d" $flags -b "$b" -tp "$tp" -pp "$pp" -z "$z" -y 1
        grep -q "resumed from .*model_00000004.bin at step 4" "$d.stdout" || fail "$fam resume at TP $tp PP $pp: $(tail -2 "$d.stdout")"
        check_run "$fam saved at TP 2 x DP 2 -z 1, resumed at TP $tp x PP $pp x DP $((np / tp / pp)) -z $z" "$out/$fam-ref" "$d"
    done
    if [ $fam != llama1 ]; then  # a pipeline's checkpoint (TP 2 x PP 2 x DP 2, ZeRO 1 and 3) as one process
        for z in 1 3; do
            d="$out/$fam-from-pp-z$z"
            rm -rf "$d"; cp -r "$out/$fam-np8-tp2-pp2-z$z" "$d"; forget_step8 "$d"
            run_np 1 "$d" $flags -b 8 -y 1
            check_run "$fam saved at TP 2 x PP 2 x DP 2 -z $z, resumed as one process" "$out/$fam-ref" "$d"
        done
    fi
    d="$out/$fam-from-single"
    rm -rf "$d"; cp -r "$out/$fam-ref" "$d"; forget_step8 "$d"
    run_np 4 "$d" $flags -b 4 -tp 2 -z 2 -y 1
    grep -q "resumed from .*model_00000004.bin at step 4" "$d.stdout" || fail "$fam single -> TP: $(tail -2 "$d.stdout")"
    check_run "$fam saved by one process, resumed at TP 2 x DP 2 -z 2" "$out/$fam-ref" "$d"
done

# sampling: the group puts each row of logits together, the last stage sends it to every
# rank; greedy text as one process's
run_np 1 "$out/sample-ref" $gpt2 -b 8 -x 2 -s 2 -g 12 -st 0 -n 0
sample_of() { awk '/^generating:/ { on = 1; next } on && /^---$/ { k++; if (k == 2) exit; next } on' "$1"; }
a=$(sample_of "$out/sample-ref.stdout")
for layout in "2 2 1 0" "2 1 2 0" "4 2 2 0" "2 2 1 1"; do  # -sp 1: contexts padded to whole parts
    read -r np tp pp sp <<< "$layout"
    run_np "$np" "$out/sample-$tp-$pp-$sp" $gpt2 -b 8 -x 2 -s 2 -g 12 -st 0 -n 0 -tp "$tp" -pp "$pp" -sp "$sp"
    b=$(sample_of "$out/sample-$tp-$pp-$sp.stdout")
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "sampling at TP $tp PP $pp -sp $sp: '$b', one process: '$a'"
    echo "ok   sampling at TP $tp x PP $pp -sp $sp: the single process's greedy text"
done

# bad layouts: one line on stderr naming the flag, exit 1, nothing written
refuse() {  # refuse NAME NP PATTERN FLAGS...
    local name=$1 np=$2 pat=$3 d="$out/refused"; shift 3
    rm -rf "$d"
    if timeout 60 mpirun -np "$np" ./train_gpt_cpu "$@" -o "$d" > "$d.stdout" 2> "$d.stderr"; then fail "$name: accepted"; fi
    grep -q "$pat" "$d.stderr" || fail "$name: $(grep -m 1 error "$d.stderr")"
    [ ! -e "$d/main.log" ] || fail "$name: wrote a main.log"
    echo "ok   refused: $name: $(grep -m 1 "$pat" "$d.stderr")"
}
refuse "3 processes at -tp 2" 3 "flag -tp 2 -pp 1: 3 processes are not whole replicas of 2" $gpt2 -b 8 -tp 2
refuse "6 processes at -tp 2 -pp 2" 6 "flag -tp 2 -pp 2: 6 processes are not whole replicas of 4" $gpt2 -b 8 -tp 2 -pp 2
refuse "GPT-2's 4 heads at -tp 3" 3 "flag -tp 3 -pp 1: the model's 4 heads do not split into 3 equal parts" $gpt2 -b 8 -tp 3
refuse "gqa2's 2 KV heads at -tp 3" 3 "flag -tp 3 -pp 1: the model's 2 KV heads neither split into 3 equal parts" $llama -b 8 -tp 3
refuse "3 stages of 2 layers" 3 "flag -tp 1 -pp 3: 3 pipeline stages (-pp x -vp) but the model has 2 layers" $gpt2 -b 8 -pp 3
refuse "-vp 2 without -pp" 2 "flag -vp 2: virtual stages interleave a pipeline's stages" $gpt2 -b 4 -vp 2
refuse "-vp 2 with 1 micro-batch a step" 2 "flag -vp 2: the 1 micro-batches of a step" $deep -b 8 -d 256 -pp 2 -vp 2
refuse "-pl that does not sum to L" 2 "flag -pl '2,1': 2 stages of 3 layers, but -pp 2 x -vp 1 stages of the model's 4 layers" $deep -b 8 -d 1024 -pp 2 -pl 2,1
refuse "-pl with an empty stage" 4 "flag -pl '2,1,1,0': layer counts of at least 1" $deep -b 8 -d 1024 -pp 2 -vp 2 -pl 2,1,1,0
refuse "-sp 1 without -tp" 2 "flag -sp 1: sequence parallelism splits the positions over tensor-parallel ranks" $gpt2 -b 4 -sp 1
refuse "-sp 1 with T=31 at -tp 2" 2 "flag -sp 1: -t 31 does not split into 2 equal parts" $gpt2 -b 8 -tp 2 -sp 1 -t 31
echo "PASS: tensor and pipeline parallelism"
