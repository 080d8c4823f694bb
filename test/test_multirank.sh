#!/usr/bin/env bash
# Several processes train like one: N ranks x micro-batch B must train like 1 rank x N*B
# (the reference: the single-process trainer, itself checked against PyTorch by
# test_train_vs_pytorch.sh). For ZeRO 0, 1 and 2, with 2 and 4 ranks under mpirun (the CPU's
# collectives are MPI's; -pi fs|tcp, which only bootstrap the GPU's NCCL, are refused):
#  - every step's train loss and every val loss within 1e-5 relative, grad norms within 1e-4,
#    the lr identical (gradient accumulation included: -d is 2 micro-steps per rank)
#  - checkpoint + resume on the same number of ranks is bit-exact (main.log, final model)
#  - resume on another number of ranks (2 -> 4, 4 -> 2; a Llama 3 too) re-shards the AdamW
#    state and continues like the uninterrupted run (1e-5)
#  - the gradients go out in buckets, one per layer plus one for wte/wpe/lnf, each reduced as
#    the backward finishes it (ZeRO 2: every micro-step), some while the backward still runs;
#    ZeRO 2 holds no full gradient (its memory line, checked against the arithmetic at d12)
#  - a Llama 3 model (another family's table and buckets) trains the same on 2 ranks, ZeRO 0,
#    1 and 2
#  - a rank that exits or hangs stops the others with an error within a bounded time
#  - ZeRO 3 (sharded parameters, each layer all-gathered as it runs): trains in ZeRO 2's
#    bits (main.log and model files identical: a gather only copies) on 2, 3 and 4 ranks, GPT-2
#    and Llama, with gradient accumulation, parameter counts the rank count does not divide;
#    without accumulation its model files equal ZeRO 0's; it resumes on the same ranks
#    bit-exactly, and on 2 ranks, 1 process and at ZeRO 1 like the uninterrupted run; a
#    parameter-dominated model holds at most 1/3 of its ZeRO 0 peak per rank on 4 ranks, and
#    the plan's "in all" is the measured peak within 10%; the layer gathers are as many as
#    llmc/zero.h counts, nearly all queued while the layer before ran
#  - bad multi-process flags are one-line errors
# That ranks read disjoint slices covering each global sample is test_dataloader's check.
set -eu
cd "$(dirname "$0")/.."
source test/lib.sh  # defines: PY, compare_logs
make -s train_gpt_cpu
out=test/out/multirank
rm -rf "$out"; mkdir -p "$out"
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 300 --maxT 64 --L 2 --NH 4 --C 64 --seed 5 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 9000 --val-tokens 3000 --shards 2 --seed 9 > /dev/null
fail() { echo "FAIL: $*"; exit 1; }
set -f  # the flags below hold globs for the trainer, not for the shell
export OMP_NUM_THREADS=1
# Open MPI refuses root without these (CI runs as root); more ranks than cores is fine here
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# total batch -d 512 tokens = 2 micro-steps of 8 rows of 32: 1 process x B=8, or N ranks x
# B=8/N, each with 2 micro-steps (so ZeRO 2's per-micro-step reduce-scatter is exercised)
flags="-e $out/model.bin -i $out/markov_train_*.bin -j $out/markov_val_*.bin -t 32 -d 512 -x 16
       -l 2e-3 -u 3 -q 0.1 -c 0.1 -v 4 -m 3 -s 0 -n 4 -sh 1 -sd 7"

# compare_logs (test/lib.sh): losses within 1e-5 relative, norms 1e-4

have_mpi=0
if command -v mpirun > /dev/null && ldd ./train_gpt_cpu | grep -q libmpi; then have_mpi=1; fi
run_mpi() {  # run_mpi NP DIR FLAGS...
    local np=$1 dir=$2; shift 2
    timeout 300 mpirun -np "$np" ./train_gpt_cpu "$@" -o "$dir" > "$dir.stdout" 2> "$dir.stderr" ||
        fail "mpirun -np $np $*: $(tail -3 "$dir.stderr")"
}
./train_gpt_cpu $flags -b 8 -o "$out/ref" > "$out/ref.stdout" 2>&1 || fail "single process: $(tail -3 "$out/ref.stdout")"
# a Llama 3 model (test/llama_reference.py's gqa1: V=300, 4 query heads on 1 key/value head)
make -s import_hf
"$PY" test/llama_reference.py --write-hf "$out/llama_hf" --config gqa1 --seed 3
./import_hf "$out/llama_hf/model.safetensors" "$out/llama.bin" > /dev/null
lflags="-e $out/llama.bin -i $out/markov_train_*.bin -j $out/markov_val_*.bin -t 32 -d 512 -x 16
        -l 2e-3 -u 3 -q 0.1 -c 0.1 -v 4 -m 3 -s 0 -n 4"
./train_gpt_cpu $lflags -b 8 -o "$out/llama-ref" > "$out/llama-ref.stdout" 2>&1 ||
    fail "Llama, single process: $(tail -3 "$out/llama-ref.stdout")"

# check_buckets STDOUT Z: the run reduced (L + 1) buckets per communicating micro-step: 16
# steps x 3 buckets (L=2), twice that at ZeRO 2 (2 micro-steps); adds the ones that started
# during the backward to $overlapped
overlapped=0
check_buckets() {
    local line want
    line=$(grep "^gradient buckets:" "$1") || fail "$1: no gradient buckets line"
    want=$((16 * 3 * ($2 == 2 ? 2 : 1)))
    set -- $line
    [ "$3" = "$want" ] || fail "$line: expected $want buckets"
    overlapped=$((overlapped + $5))
}

if [ $have_mpi = 1 ]; then
    for z in 0 1 2; do
        for np in 2 4; do
            d=$out/mpi-z$z-np$np
            run_mpi $np "$d" $flags -b $((8 / np)) -z $z -d 512
            msg=$(compare_logs "$out/ref/main.log" "$d/main.log") || fail "mpirun -np $np -z $z vs 1 process: $msg"
            check_buckets "$d.stdout" $z
            echo "ok mpirun -np $np -z $z -b $((8 / np)) x 2 micro-steps trains like 1 x B=8: $msg"
        done
    done
    # Llama 3 (another table: wte in front, rmsfw and lmheadw behind the layers): ZeRO 0, 1
    # and 2 on 2 ranks train like one process
    for z in 0 1 2; do
        d=$out/mpi-llama-z$z
        run_mpi 2 "$d" $lflags -b 4 -z $z
        msg=$(compare_logs "$out/llama-ref/main.log" "$d/main.log") || fail "Llama mpirun -np 2 -z $z vs 1 process: $msg"
        check_buckets "$d.stdout" $z
        echo "ok Llama 3 (GQA, untied head), mpirun -np 2 -z $z trains like 1 x B=8: $msg"
    done
    # ZeRO 2 at d12 on 2 ranks: gradients are wte+wpe, lnfw+lnfb, two layer buckets and the
    # owned slice; ZeRO 1 keeps the whole padded vector, and the two buckets it packs into
    for z in 1 2; do
        d=$out/mpi-d12-z$z
        timeout 300 mpirun -np 2 ./train_gpt_cpu -e d12 -i "$out/markov_train_*.bin" -j "$out/markov_val_*.bin" \
            -b 1 -t 64 -d 128 -x 0 -v 0 -s 0 -z $z > "$d.stdout" 2>&1 || fail "d12 -z $z: $(tail -3 "$d.stdout")"
    done
    mib() { awk '{ printf "%.1f", $1 * 4 / 1048576 }' <<< "$1"; }
    C=768; n=124475904; shard=$(( (n / 2 + 63) / 64 * 64 )); layer=$(( 12 * C * C + 13 * C ))
    want1=$(mib $(( 2 * shard + 2 * layer )))
    want2=$(mib $(( (50304 + 1024) * C + 2 * C + 2 * layer + shard )))
    grep -q "grads $want1 MiB," "$out/mpi-d12-z1.stdout" || fail "d12 -z 1: expected grads $want1 MiB: $(grep memory "$out/mpi-d12-z1.stdout")"
    grep -q "grads $want2 MiB (" "$out/mpi-d12-z2.stdout" || fail "d12 -z 2: expected grads $want2 MiB: $(grep memory "$out/mpi-d12-z2.stdout")"
    echo "ok d12 on 2 ranks: gradient memory $want1 MiB at ZeRO 1, $want2 MiB at ZeRO 2 (no full gradient)"
    # resume on the same number of ranks: bit-exact
    for z in 1 2; do
        d=$out/mpi-resume-z$z
        run_mpi 2 "$d" $flags -b 4 -z $z
        for s in 12 16; do rm -f "$d/DONE_000000$s"; done
        run_mpi 2 "$d" $flags -b 4 -z $z -y 1
        grep -q "resumed from .*model_00000008.bin at step 8" "$d.stdout" || fail "-z $z: did not resume at step 8"
        cmp "$out/mpi-z$z-np2/main.log" "$d/main.log" || fail "-z $z: main.log differs after resume on 2 ranks"
        cmp "$out/mpi-z$z-np2/model_00000016.bin" "$d/model_00000016.bin" || fail "-z $z: final model differs"
        echo "ok -z $z: stop at step 8, resume on the same 2 ranks: main.log and final model bit-exact"
    done
    # resume on another number of ranks (processes x -b kept): the state is re-sharded
    for z in 1 2; do
        for pair in "2 4" "4 2"; do
            set -- $pair
            d=$out/mpi-reshard-z$z-$1to$2
            run_mpi $1 "$d" $flags -b $((8 / $1)) -z $z
            for s in 12 16; do rm -f "$d/DONE_000000$s"; done
            run_mpi $2 "$d" $flags -b $((8 / $2)) -z $z -y 1
            grep -q "re-sharded" "$d.stdout" || fail "-z $z $1 -> $2 ranks: no re-shard message"
            msg=$(compare_logs "$out/ref/main.log" "$d/main.log") || fail "-z $z $1 -> $2 ranks: $msg"
            echo "ok -z $z: saved on $1 ranks at step 8, resumed on $2: continues like the uninterrupted run: $msg"
        done
    done
    # a Llama 3 too: saved by 2 ranks at ZeRO 2, resumed on 4 (its table re-sharded)
    d=$out/mpi-llama-reshard
    run_mpi 2 "$d" $lflags -b 4 -z 2
    for s in 12 16; do rm -f "$d/DONE_000000$s"; done
    run_mpi 4 "$d" $lflags -b 2 -z 2 -y 1
    grep -q "re-sharded" "$d.stdout" || fail "Llama -z 2 2 -> 4 ranks: no re-shard message"
    msg=$(compare_logs "$out/llama-ref/main.log" "$d/main.log") || fail "Llama -z 2 2 -> 4 ranks: $msg"
    echo "ok Llama 3 -z 2: saved on 2 ranks at step 8, resumed on 4: continues like the uninterrupted run: $msg"
    # ZeRO 3 against ZeRO 2: the same bits (the reductions are ZeRO 2's; a layer gather copies
    # values), GPT-2 on 2 and 4 ranks (2 micro-steps each) and on 3, Llama on 2 and 4. Slices
    # are whole multiples of 64 values (llmc/zero.h), so the last one is short, padded, where
    # the count is not a multiple of 64 x ranks: GPT-2's on 3 ranks, Llama's on 2 and 4.
    n=$(grep -m1 -o '[0-9]* parameters (' "$out/ref.stdout" | cut -d' ' -f1)
    nl=$(grep -m1 -o '[0-9]* parameters (' "$out/llama-ref.stdout" | cut -d' ' -f1)
    [ $((n % 192)) != 0 ] && [ $((nl % 128)) != 0 ] && [ $((nl % 256)) != 0 ] ||
        fail "parameter counts $n (GPT-2), $nl (Llama): a multiple of 64 x ranks"
    same_bits() {  # same_bits A B WHAT: main.log and every model file identical
        cmp -s "$1/main.log" "$2/main.log" || fail "$3: main.log differs: $(diff "$1/main.log" "$2/main.log" | head -3)"
        local m models
        models=$(find "$1" -name 'model_*.bin' | sort)  # (globs are off: set -f)
        [ -n "$models" ] || fail "$3: no model files in $1"
        for m in $models; do cmp -s "$m" "$2/${m##*/}" || fail "$3: ${m##*/} differs"; done
    }
    for np in 2 4; do
        d=$out/mpi-z3-np$np
        run_mpi $np "$d" $flags -b $((8 / np)) -z 3
        same_bits "$out/mpi-z2-np$np" "$d" "-z 3 vs -z 2 on $np ranks"
        check_buckets "$d.stdout" 2
        # L=2: each step's first forward gathers both layers, unless the evaluation before it
        # (steps 0, 4, 8, 12) left them in the slots; the backward and the second micro-step
        # find them there: 16 x 2 - 4 x 2 + 5 evaluations x 2
        grep -q "^parameter gathers (ZeRO 3): 34 layers, [1-9]" "$d.stdout" ||
            fail "-z 3 on $np ranks: $(grep 'parameter gathers' "$d.stdout")"
        echo "ok mpirun -np $np -z 3: main.log and the model files are -z 2's, bit for bit"
    done
    for z in 2 3; do run_mpi 3 "$out/mpi-z$z-np3" $flags -b 2 -d 384 -z $z; done
    same_bits "$out/mpi-z2-np3" "$out/mpi-z3-np3" "-z 3 vs -z 2 on 3 ranks"
    echo "ok mpirun -np 3 -z 3 ($n parameters: the last slice padded): the bits of -z 2"
    for np in 2 4; do
        d=$out/mpi-llama-z3-np$np
        run_mpi $np "$d" $lflags -b $((8 / np)) -z 3
        z2=$out/mpi-llama-z2  # the 2-rank run above
        if [ $np = 4 ]; then z2=$out/mpi-llama-z2-np4; run_mpi 4 "$z2" $lflags -b 2 -z 2; fi
        same_bits "$z2" "$d" "Llama -z 3 vs -z 2 on $np ranks"
        echo "ok Llama 3 mpirun -np $np -z 3 ($nl parameters: the last slice padded): the bits of -z 2"
    done
    # without gradient accumulation ZeRO 3's sums are ZeRO 0's: the model files are equal
    for fam in gpt2 llama; do
        f=$flags; [ $fam = llama ] && f=$lflags
        for z in 0 3; do run_mpi 2 "$out/mpi-$fam-accum1-z$z" $f -b 4 -d 256 -z $z; done
        same_bits "$out/mpi-$fam-accum1-z0" "$out/mpi-$fam-accum1-z3" "$fam -z 3 vs -z 0 without accumulation"
        echo "ok $fam -z 3 without gradient accumulation: main.log and model files equal -z 0's"
    done
    # ZeRO 3 resumes: on its 4 ranks bit-exactly; on 2 ranks (-z 3), on 1 process and at -z 1
    # on 2 ranks like the uninterrupted run
    d=$out/mpi-resume-z3
    run_mpi 4 "$d" $flags -b 2 -z 3
    for s in 12 16; do rm -f "$d/DONE_000000$s"; done
    run_mpi 4 "$d" $flags -b 2 -z 3 -y 1
    grep -q "resumed from .*model_00000008.bin at step 8" "$d.stdout" || fail "-z 3: did not resume at step 8"
    same_bits "$out/mpi-z3-np4" "$d" "-z 3 resumed on its 4 ranks"
    echo "ok -z 3: stop at step 8, resume on the same 4 ranks: main.log and model files bit-exact"
    for to in "2 -z 3" "1 -z 0" "2 -z 1"; do
        set -- $to
        d=$out/mpi-resume-z3-to-$1-z$3
        rm -rf "$d"; cp -r "$out/mpi-z3-np4" "$d"
        for s in 12 16; do rm -f "$d/DONE_000000$s" "$d"/model_000000$s.bin; done
        if [ "$1" = 1 ]; then
            ./train_gpt_cpu $flags -b 8 -o "$d" -y 1 > "$d.stdout" 2>&1 || fail "-z 3 -> 1 process: $(tail -3 "$d.stdout")"
        else
            run_mpi "$1" "$d" $flags -b $((8 / $1)) -z "$3" -y 1
        fi
        grep -q "resumed from .*model_00000008.bin at step 8" "$d.stdout" || fail "-z 3 -> $to: did not resume at step 8"
        msg=$(compare_logs "$out/ref/main.log" "$d/main.log") || fail "-z 3 on 4 ranks -> $to: $msg"
        echo "ok -z 3: saved on 4 ranks at step 8, resumed on $1 process(es) at -z $3: like the uninterrupted run: $msg"
    done
    # memory: a model whose parameters dominate (V=300, 32 layers of C=384: 57M parameters),
    # 4 ranks, 2 micro-steps; the peak each rank held (VmHWM above what it held before the
    # model) against ZeRO 0's, and against the plan's "in all"
    "$PY" test/pytorch_reference.py --random-checkpoint "$out/big.bin" --V 300 --maxT 64 --L 32 --NH 6 --C 384 --seed 5 > /dev/null
    for z in 0 3; do
        d=$out/mpi-mem-z$z
        timeout 300 mpirun -np 4 ./train_gpt_cpu -e "$out/big.bin" -i "$out/markov_train_*.bin" -j "$out/markov_val_*.bin" \
            -t 32 -b 1 -d 256 -x 2 -v 0 -s 0 -z $z > "$d.stdout" 2>&1 || fail "memory run -z $z: $(tail -3 "$d.stdout")"
    done
    plan() { grep -m1 "^memory per process" "$1" | grep -o '[0-9.]* MiB in all' | cut -d' ' -f1; }
    peak() { grep -m1 "^done:" "$1" | grep -o 'the largest of 4 ranks [0-9.]* MiB' | cut -d' ' -f6; }
    p0=$(peak "$out/mpi-mem-z0.stdout"); p3=$(peak "$out/mpi-mem-z3.stdout")
    q0=$(plan "$out/mpi-mem-z0.stdout"); q3=$(plan "$out/mpi-mem-z3.stdout")
    [ -n "$p0" ] && [ -n "$p3" ] && [ -n "$q0" ] && [ -n "$q3" ] || fail "memory runs: no plan or peak: $p0 $p3 $q0 $q3"
    awk -v p0="$p0" -v p3="$p3" -v q0="$q0" -v q3="$q3" 'BEGIN {
        r = p3 / p0; e0 = (p0 - q0) / q0; e3 = (p3 - q3) / q3
        printf "ZeRO 3 peak %.1f MiB = %.3f of ZeRO 0 %.1f MiB; plan vs peak %+.1f%% (ZeRO 3), %+.1f%% (ZeRO 0)\n", p3, r, p0, 100 * e3, 100 * e0
        exit !(r <= 1 / 3 && e3 <= 0.1 && e3 >= -0.1 && e0 <= 0.1 && e0 >= -0.1) }' > "$out/mem.txt" ||
        fail "memory: $(cat "$out/mem.txt")"
    # 2 steps x (32 + 30 + 2 x 30) gathers (llmc/zero.h: zero3_layer_gathers_per_step)
    grep -q "^parameter gathers (ZeRO 3): 244 layers, 24[0-4] of them" "$out/mpi-mem-z3.stdout" ||
        fail "memory run: $(grep 'parameter gathers' "$out/mpi-mem-z3.stdout")"
    echo "ok -z 3 on 4 ranks, 57M parameters: $(cat "$out/mem.txt"); 244 layer gathers, as zero.h counts"
    # a different processes x -b would change the data order: refused
    d=$out/mpi-resume-z1
    if timeout 60 mpirun -np 4 ./train_gpt_cpu $flags -b 4 -d 1024 -z 1 -o "$d" -y 1 > /dev/null 2> "$d.bad"; then
        fail "resume with processes x -b changed was accepted"
    fi
    grep -q "processes x -b" "$d.bad" || fail "resume with processes x -b changed: $(head -2 "$d.bad")"
    echo "ok resume with another processes x -b: $(grep -m1 error: "$d.bad" | cut -c1-110)..."
    # a rank that exits, a rank that hangs: the others stop within a bounded time
    for kind in rank_exit rank_hang; do
        d=$out/mpi-$kind
        start=$(date +%s)
        if GPTRAIN_FAULT_INJECT=$kind@3 timeout 120 mpirun -np 3 ./train_gpt_cpu $flags -b 2 -d 384 -pt 4 -o "$d" \
            > "$d.stdout" 2> "$d.stderr"; then fail "$kind: the run succeeded"; fi
        secs=$(( $(date +%s) - start ))
        [ $secs -lt 60 ] || fail "$kind: took $secs s to stop"
        if [ $kind = rank_hang ]; then
            grep -q "did not complete within -pt 4 s: another rank hung or died" "$d.stderr" ||
                fail "$kind: no timeout error: $(head -3 "$d.stderr")"
        fi
        echo "ok mpirun, $kind at step 3: the job stopped in $secs s with exit status != 0"
    done
    [ $overlapped -gt 0 ] || fail "no gradient bucket started its reduction before the backward ended"
    echo "ok gradient buckets: 3 per micro-step that communicates (ZeRO 2: each), $overlapped reductions over these runs started while the backward still ran"
else
    echo "skip: MPI runs (no mpirun, or train_gpt_cpu built without MPI)"
fi

# bad multi-process flags
check_error() {  # check_error PATTERN FLAGS...
    local pattern=$1; shift
    if ./train_gpt_cpu "$@" > /dev/null 2> "$out/err"; then fail "accepted: $*"; fi
    grep -q "$pattern" "$out/err" || fail "$*: expected '$pattern', got: $(cat "$out/err")"
    [ "$(wc -l < "$out/err")" = 1 ] || fail "$*: more than one line: $(cat "$out/err")"
}
check_error "unknown init method" $flags -pi nfs
check_error "start the processes with mpirun" $flags -pn 2
check_error "train_gpt_cpu's processes share their work through MPI: start them with mpirun -np 2" \
    $flags -pi fs -pf "$out" -pn 2 -pr 0
check_error "train_gpt_cpu's processes share their work through MPI" $flags -pi tcp -ps 127.0.0.1 -pn 2 -pr 1
check_error "rank must be below" $flags -pi fs -pf "$out" -pn 1 -pr 1
check_error "needs -pf" $flags -pi fs -pn 1 -pr 0
check_error "needs -ps" $flags -pi tcp -pn 1 -pr 0
check_error "flag -z" $flags -z 4
echo "ok bad multi-process flags: one-line errors"
echo "PASS"
