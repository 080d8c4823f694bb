#!/usr/bin/env bash
# Checkpoint and resume on the CPU are bit-exact: a run that stops (checkpoints removed,
# or kill -9 mid-run) and resumes with -y 1 ends with the same main.log, byte for byte,
# and the same final model file as a run that never stopped. Also: a corrupt newest
# checkpoint is reported and the previous one is used; -nk/-nm keep what they promise.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
make -s train_gpt_cpu
out=test/out/resume
rm -rf "$out"; mkdir -p "$out"
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 300 --maxT 64 --L 2 --NH 4 --C 64 --seed 5 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 6000 --val-tokens 3000 --shards 2 --seed 9 > /dev/null
fail() { echo "FAIL: $*"; exit 1; }
set -f  # the flags below hold globs for the trainer, not for the shell

base_flags="-e $out/model.bin -i $out/markov_train_*.bin -j $out/markov_val_*.bin -b 4 -t 32 -d 256 -x 30
            -l 2e-3 -u 3 -q 0.1 -c 0.1 -v 5 -m 3 -s 0 -n 5"
for variant in plain shuffled; do
    flags=$base_flags
    [ $variant = shuffled ] && flags="$base_flags -sh 1 -sd 1234"
    # one epoch of 6000 tokens is ~23 steps of 256: 30 steps crosses an epoch boundary
    ./train_gpt_cpu $flags -o "$out/$variant-a" > "$out/$variant-a.stdout"

    # stop after step 10's checkpoint: remove the later ones, resume
    ./train_gpt_cpu $flags -o "$out/$variant-b" > /dev/null
    for s in 15 20 25 30; do rm -f "$out/$variant-b/DONE_000000$s"; done
    ./train_gpt_cpu $flags -o "$out/$variant-b" -y 1 > "$out/$variant-b.stdout"
    grep -q "resumed from .*model_00000010.bin at step 10" "$out/$variant-b.stdout" || fail "$variant: did not resume at step 10"
    cmp "$out/$variant-a/main.log" "$out/$variant-b/main.log" || fail "$variant: main.log differs after resume"
    cmp "$out/$variant-a/model_00000030.bin" "$out/$variant-b/model_00000030.bin" || fail "$variant: final model differs"
    echo "ok $variant: resume from step 10 gives the same main.log ($(wc -l < "$out/$variant-a/main.log") lines) and final model"

    # kill -9 once step 13 is logged, then resume from the newest complete checkpoint (10)
    ./train_gpt_cpu $flags -o "$out/$variant-c" > /dev/null &
    pid=$!
    for _ in $(seq 1 3000); do grep -q "^s:13 trl" "$out/$variant-c/main.log" 2>/dev/null && break; sleep 0.01; done
    kill -9 $pid; wait $pid 2>/dev/null || true
    [ -f "$out/$variant-c/DONE_00000030" ] && fail "$variant: run finished before the kill"
    ./train_gpt_cpu $flags -o "$out/$variant-c" -y 1 > "$out/$variant-c.stdout"
    cmp "$out/$variant-a/main.log" "$out/$variant-c/main.log" || fail "$variant: main.log differs after kill -9 and resume"
    cmp "$out/$variant-a/model_00000030.bin" "$out/$variant-c/model_00000030.bin" || fail "$variant: final model differs after kill -9"
    echo "ok $variant: kill -9 after step 13, resume ($(grep -o 'at step [0-9]*' "$out/$variant-c.stdout")) gives the same main.log and final model"
done

# a truncated newest checkpoint is reported and the previous one is used
d=$out/plain-b
truncate -s 5000 "$d/model_00000030.bin"
./train_gpt_cpu $base_flags -o "$d" -y 1 > "$out/fallback.stdout" 2> "$out/fallback.stderr" || fail "fallback run failed: $(cat "$out/fallback.stderr")"
grep -q "checkpoint at step 30 is unusable" "$out/fallback.stderr" || fail "truncated newest checkpoint not reported"
grep -q "at step 25" "$out/fallback.stdout" || fail "did not fall back to step 25"
echo "ok truncated newest checkpoint: reported, resumed from step 25"

# -nk 2 keeps the last two checkpoints, -nm 10 keeps multiples of 10 forever
./train_gpt_cpu $base_flags -o "$out/keep" -nk 2 -nm 10 > /dev/null
kept=$(cd "$out/keep" && set +f && ls DONE_* | tr '\n' ' ')
[ "$kept" = "DONE_00000010 DONE_00000020 DONE_00000025 DONE_00000030 " ] || fail "-nk 2 -nm 10 kept: $kept"
[ -f "$out/keep/model_00000015.bin" ] && fail "-nk: model_00000015.bin was not deleted"
echo "ok -nk 2 -nm 10 kept: $kept"
