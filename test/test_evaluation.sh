#!/usr/bin/env bash
# Evaluation features of the CPU trainer:
#  - HellaSwag (-h 1, -hf FILE, llm.c's eval-file format): eval files written by
#    test/hellaswag_reference.py (Python, not llmc/hellaswag.h), scored by its PyTorch GPT-2 one
#    example at a time. The trainer must pick the lowest-loss completion: 100% where the labels
#    are PyTorch's choices, 0% where they are the runner-ups, PyTorch's exact count on random
#    labels, with 4 or 1..5 completions, any -b, and over 2 and 3 MPI ranks. main.log gets
#    llm.c's "s:N eval:" line. Damaged files: one "error:" line naming the file, exit 1.
#  - --target-val-loss X: stops at the first validation at or below X (what the uninterrupted
#    run's main.log says that is), checkpoints there, and reports time, tokens and steps;
#    a target never reached is reported; without -v it is a flag error.
#  - the end-of-run summary: best val loss and its step, newest checkpoint; metrics.jsonl's
#    summary record.
#  - -pb 1's phase table against the step lines' own times: the phases add up to the step,
#    and the step is what the step lines say it took (the two clocks are read apart).
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
make -s train_gpt_cpu
out=test/out/evaluation
rm -rf "$out"; mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 300 --maxT 64 --L 2 --NH 4 --C 64 --seed 7 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 6000 --val-tokens 3000 --shards 2 --seed 9 > /dev/null
expect=$("$PY" test/hellaswag_reference.py make --model "$out/model.bin" --out "$out" --examples 24 --maxT 48)
want() { "$PY" -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$expect" "$1"; }
set -f  # the flags below hold globs for the trainer, not for the shell
data="-e $out/model.bin -i $out/markov_train_*.bin -j $out/markov_val_*.bin -t 48 -s 0"

# ---- HellaSwag: the trainer's count against PyTorch's, for each file and batch size
hellaswag() {  # name file B [launcher...]: runs -x 0 -h 1 ($EXTRA: more flags), checks "HellaSwag: K/24"
    local name=$1 file=$2 B=$3
    shift 3
    local d=$out/hs-$name
    "$@" ./train_gpt_cpu $data ${EXTRA:-} -b "$B" -x 0 -v 1 -m 1 -h 1 -hf "$out/$file.bin" -o "$d" > "$d.stdout" 2> "$d.stderr" \
        || fail "$name: exit $?: $(tail -n 2 "$d.stderr")"
    local k
    k=$(want "${file}")
    grep -q "^HellaSwag: $k/24 = " "$d.stdout" || fail "$name: want $k/24 right (PyTorch), got: $(grep HellaSwag: "$d.stdout")"
    echo "ok HellaSwag $name ($file.bin, -b $B${EXTRA:+ $EXTRA}${1:+, $*}): $k/24 as PyTorch"
}
hellaswag best-b4 best 4
hellaswag second-b4 second 4
hellaswag random-b4 random 4
hellaswag random-b3 random 3     # an example's 4 rows split across batches
hellaswag random-b1 random 1
hellaswag mixed-b5 mixed 5       # 1..5 completions per example
[ "$(want best)" -eq 24 ] && [ "$(want second)" -eq 0 ] || fail "the reference's own counts are off"
grep -q "^s:0 eval:1.0000$" "$out/hs-best-b4/main.log" || fail "main.log lacks llm.c's 's:0 eval:1.0000' line"
grep -q '"kind":"hellaswag","accuracy":1,"correct":24,"examples":24' "$out/hs-best-b4/metrics.jsonl" \
    || fail "metrics.jsonl lacks the hellaswag record"
grep -q "HellaSwag accuracy 1.0000 (24/24)" "$out/hs-best-b4.stdout" || fail "summary lacks the HellaSwag accuracy"

if command -v mpirun > /dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    hellaswag random-np2 random 4 mpirun -np 2 --oversubscribe
    hellaswag mixed-np3 mixed 3 mpirun -np 3 --oversubscribe   # 24 examples: 8 a rank
    # tensor- and pipeline-parallel replicas (each replica scores its share, counted once)
    EXTRA="-tp 2" hellaswag random-tp2 random 4 mpirun -np 2
    EXTRA="-pp 2" hellaswag mixed-pp2-dp2 mixed 3 mpirun -np 4
    EXTRA="-tp 2 -pp 2" hellaswag random-tp2-pp2 random 4 mpirun -np 4
else
    echo "note: no mpirun: HellaSwag over several ranks not tested here"
fi

# during training: every -v steps and at the end, in main.log between the val lines
d=$out/hs-train
./train_gpt_cpu $data -b 4 -d 192 -x 6 -v 3 -m 2 -h 1 -hf "$out/random.bin" -o "$d" > "$d.stdout" \
    || fail "training with -h 1 failed"
[ "$(grep -c "^s:[036] eval:" "$d/main.log")" -eq 3 ] || fail "training: expected eval lines at steps 0, 3, 6"

# damaged files
"$PY" test/hellaswag_reference.py corrupt --src "$out/random.bin" --out "$out" --V 300 > /dev/null
for check in "magic:bad magic" "version:unsupported version" "truncated:truncated" "count:impossible" \
             "trailing:after the last" "marker:65535 marker" "label:label 9 but only 4 completions" \
             "token:outside the model's vocab" "bytes:claims"; do
    name=${check%%:*} msg=${check#*:}
    rc=0
    ./train_gpt_cpu $data -b 4 -x 0 -v 1 -m 1 -h 1 -hf "$out/bad_$name.bin" > /dev/null 2> "$out/bad_$name.stderr" || rc=$?
    [ $rc -eq 1 ] || fail "bad_$name: exit $rc (want 1)"
    [ "$(wc -l < "$out/bad_$name.stderr")" -eq 1 ] || fail "bad_$name: not one line: $(cat "$out/bad_$name.stderr")"
    grep -q "^error: $out/bad_$name.bin: .*$msg" "$out/bad_$name.stderr" \
        || fail "bad_$name: want 'error: $out/bad_$name.bin: ...$msg', got: $(cat "$out/bad_$name.stderr")"
done
rc=0; ./train_gpt_cpu $data -b 4 -x 0 -h 1 -hf "$out/nonexistent.bin" 2> "$out/missing.stderr" > /dev/null || rc=$?
[ $rc -eq 1 ] && grep -q "nonexistent.bin" "$out/missing.stderr" || fail "missing eval file: rc $rc, $(cat "$out/missing.stderr")"
rc=0; ./train_gpt_cpu $data -t 20 -b 4 -x 0 -h 1 -hf "$out/random.bin" 2> "$out/long.stderr" > /dev/null || rc=$?
[ $rc -eq 1 ] && grep -q "longer than -t 20" "$out/long.stderr" || fail "rows longer than -t: rc $rc, $(cat "$out/long.stderr")"
echo "ok HellaSwag: 9 kinds of damaged file, a missing file and rows longer than -t: one error line each, exit 1"

# ---- --target-val-loss
flags="$data -b 4 -d 192 -x 40 -l 2e-3 -u 3 -v 4 -m 2 -n 4"
./train_gpt_cpu $flags -o "$out/full" > "$out/full.stdout"
# the target: step 20's val loss; the run must stop at the first validation at or below it
target=$(sed -n 's/^s:20 tel:\([0-9.]*\)$/\1/p' "$out/full/main.log")
[ -n "$target" ] || fail "reference run has no val loss at step 20"
stop=$(awk -v t="$target" -F'[: ]' '/tel:/ { if ($4 + 0 <= t + 0) { print $2; exit } }' "$out/full/main.log")
d=$out/target
tg=$(printf %g "$target")  # as the trainer prints it
./train_gpt_cpu $flags --target-val-loss "$target" -o "$d" > "$d.stdout" || fail "target run failed"
grep -q "^target val loss $tg reached at step $stop: [0-9.]* s since the start of training, $((stop * 192)) tokens$" "$d.stdout" \
    || fail "target: no 'reached at step $stop' line: $(grep target "$d.stdout")"
grep -q "^done: $stop steps, $((stop * 192)) tokens" "$d.stdout" || fail "target: done line: $(grep ^done: "$d.stdout")"
grep -q "^  time to target val loss $tg: [0-9.]* s (.*), $stop steps, $((stop * 192)) tokens$" "$d.stdout" || fail "target: no summary line"
[ -f "$d/DONE_$(printf %08d "$stop")" ] || fail "target: no checkpoint at step $stop"
head -n "$(grep -n "^s:$stop tel:" "$out/full/main.log" | cut -d: -f1)" "$out/full/main.log" | cmp - "$d/main.log" \
    || fail "target: main.log is not the uninterrupted run's up to step $stop"
grep -q "\"event\":\"target_reached\"" "$d/metrics.jsonl" || fail "target: no target_reached event in metrics.jsonl"
echo "ok --target-val-loss $target: stopped at step $stop (first val loss at or below it), checkpointed, reported"

d=$out/target-miss
./train_gpt_cpu $flags -x 8 --target-val-loss 0.001 -o "$d" > "$d.stdout" || fail "unreached target: exit $?"
grep -q "^  target val loss 0.001 not reached in 8 steps (best " "$d.stdout" || fail "unreached target not reported"
rc=0; ./train_gpt_cpu $data -b 4 -x 2 -v 0 --target-val-loss 3 2> "$out/target-v0.stderr" > /dev/null || rc=$?
[ $rc -eq 1 ] && grep -q "target-val-loss needs validation" "$out/target-v0.stderr" || fail "-v 0 with a target: rc $rc"
echo "ok --target-val-loss: an unreached target is reported; -v 0 is a flag error"

# ---- the summary: best val loss is the minimum of main.log's, the newest checkpoint named
best=$(awk -F'[: ]' '/tel:/ { if (b == "" || $4 + 0 < b + 0) { b = $4; s = $2 } } END { printf "%.4f at step %d", b, s }' "$out/full/main.log")
grep -q "^  best val loss $best$" "$out/full.stdout" || fail "summary: want 'best val loss $best': $(grep 'best val' "$out/full.stdout")"
grep -q "^  newest checkpoint: $out/full/model_00000040.bin$" "$out/full.stdout" || fail "summary: newest checkpoint"
"$PY" - "$out/full/metrics.jsonl" <<'EOF' || fail "metrics.jsonl summary record"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
s = recs[-1]
assert s["kind"] == "summary" and s["step"] == 40 and s["tokens"] == 40 * 192, s
vals = [r["loss"] for r in recs if r["kind"] == "val"]
assert abs(s["best_val_loss"] - min(vals)) < 1e-6 and abs(s["final_val_loss"] - vals[-1]) < 1e-6, s
assert s["energy_j"] is None and s["wall_s"] > 0 and s["tokens_per_s"] > 0, s
EOF
echo "ok summary: best val loss $best, newest checkpoint, metrics.jsonl summary record"
# ---- -pb 1: where the step's time goes. The step lines time the steps on their own; the table
# must account for the same time, in the phases a step has.
d=$out/pb
./train_gpt_cpu $data -b 4 -x 12 -v 0 -pb 1 -o "$d" > "$d.stdout" 2> "$d.stderr" || fail "-pb 1: exit $?: $(tail -n 2 "$d.stderr")"
"$PY" - "$d.stdout" <<'EOF' || fail "-pb 1: the phase table does not add up (see $d.stdout)"
import re, sys
text = open(sys.argv[1]).read()
steps = [float(m) for m in re.findall(r"^step +\d+/12 .*\| ([0-9.]+) ms \|", text, re.M)]
assert len(steps) == 12, steps
m = re.search(r"^phase breakdown over (\d+) steps", text, re.M)
assert m and int(m.group(1)) == 11, "the first step is warm-up: 11 counted"
phases = {k.strip(): float(v) for k, v in re.findall(r"^  ([a-z ]+?) +([0-9.]+) +[0-9.]+%$", text, re.M)}
wall = float(re.search(r"^  step \(wall\) +([0-9.]+)$", text, re.M).group(1))
for need in ("matmul", "classifier matmul", "attention forward", "attention backward", "layernorm", "gelu",
             "classifier", "optimizer"):
    assert phases.get(need, 0) > 0, f"no time in phase {need}: {phases}"
assert abs(sum(phases.values()) - wall) <= 0.01 * wall, (sum(phases.values()), wall)
mean = sum(steps[1:]) / len(steps[1:])
assert abs(wall - mean) <= 0.25 * mean, f"table's step {wall:.2f} ms, step lines' mean {mean:.2f} ms"
print(f"ok -pb 1: {len(phases)} phases add up to the step, {wall:.2f} ms against the step lines' {mean:.2f} ms")
EOF
echo "all evaluation tests passed"
