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
#  - bad multi-process flags are one-line errors
# That ranks read disjoint slices covering each global sample is test_dataloader's check.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
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

# compare_logs REF RUN: same lines; losses within 1e-5 relative, norms 1e-4, lr identical
compare_logs() {
    awk -v ref="$1" -v run="$2" '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
        FNR == NR { r[FNR] = $0; nr = FNR; next }
        {
            n++
            split(r[FNR], a, /[ :]+/); split($0, b, /[ :]+/)
            if (a[1] != b[1] || a[2] != b[2] || a[3] != b[3]) { print "line " FNR ": " r[FNR] " vs " $0; bad = 1; exit }
            if ((e = rel(a[4], b[4])) > maxl) maxl = e
            if (a[3] == "trl") {
                if (a[6] != b[6]) { print "lr differs at line " FNR; bad = 1; exit }
                if ((e = rel(a[8], b[8])) > maxn) maxn = e
            }
        }
        END {
            if (bad) exit 1
            if (n != nr || n == 0) { print "line count " nr " vs " n; exit 1 }
            printf "%d lines, max rel diff: loss %.2g, norm %.2g", n, maxl, maxn
            exit !(maxl <= 1e-5 && maxn <= 1e-4)
        }' "$1" "$2"
}

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
check_error "flag -z" $flags -z 3
echo "ok bad multi-process flags: one-line errors"
echo "PASS"
