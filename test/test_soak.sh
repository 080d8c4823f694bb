#!/usr/bin/env bash
# A bounded soak of the CPU trainer: 5000 steps of a tiny model with a checkpoint every 10
# steps (-nk 2 deleting the old ones), validation every 25, a sample every 250. While it
# runs, its resident memory (VmRSS) and open file descriptors are read from /proc, keyed by
# the step reached. Asserted on growth, not on time: the most RSS seen at steps 1/3..1/2 and
# the most seen after 5/6 of the run differ by less than 256 KiB (a 4 KiB stdio buffer
# leaked per checkpoint would add over 660 KiB in between), and the fewest open descriptors
# seen in the two windows are the same (one leaked per checkpoint: +166). Prints the figures.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
make -s train_gpt_cpu
out=test/out/soak
rm -rf "$out"; mkdir -p "$out"
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 128 --maxT 32 --L 1 --NH 2 --C 32 --seed 5 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 128 --train-tokens 20000 --val-tokens 2000 --shards 2 --seed 9 > /dev/null
fail() { echo "FAIL: $*"; exit 1; }
set -f  # the flags below hold globs for the trainer, not for the shell
unset GPTRAIN_FAULT_INJECT
# one thread: on a busy machine OpenMP's spinning threads slow the run many times over
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

steps=5000
./train_gpt_cpu -e "$out/model.bin" -i "$out/markov_train_*.bin" -j "$out/markov_val_*.bin" -b 2 -t 16 -d 32 \
    -l 1e-3 -u 10 -q 0.1 -c 0.1 -x $steps -n 10 -nk 2 -v 25 -m 2 -s 250 -g 8 -o "$out/run" \
    > "$out/run.stdout" 2> "$out/run.stderr" &
pid=$!
rc=0
"$PY" - $pid "$out/run.stdout" $steps > "$out/figures.txt" <<'EOF' || rc=$?
import os, re, sys, time
pid, stdout, steps = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
step_re = re.compile(rb"step +(\d+)/")
samples = []  # (step reached, VmRSS KiB, open fds)
def step_reached():
    with open(stdout, "rb") as f:
        f.seek(max(0, os.path.getsize(stdout) - 2048))
        found = step_re.findall(f.read())
    return int(found[-1]) if found else 0
while True:
    try:
        status = open(f"/proc/{pid}/status").read()
        rss_line = re.search(r"VmRSS:\s+(\d+) kB", status)
        # exiting: a zombie, or (a moment before) a process whose memory is already gone, whose
        # status has no VmRSS line yet another state than Z
        if "State:\tZ" in status or rss_line is None:
            break
        rss = int(rss_line.group(1))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        break
    step = step_reached()
    if 0 < step < steps:
        samples.append((step, rss, fds))
    time.sleep(0.02)
early = [s for s in samples if steps / 3 <= s[0] < steps / 2]
late = [s for s in samples if s[0] >= 5 * steps / 6]
print(f"samples: {len(samples)} ({len(early)} at steps {steps // 3}..{steps // 2}, {len(late)} after step {5 * steps // 6})")
if len(early) < 5 or len(late) < 5:
    sys.exit("too few samples in a window to judge")
rss_early, rss_late = max(s[1] for s in early), max(s[1] for s in late)
fd_early, fd_late = min(s[2] for s in early), min(s[2] for s in late)
fd_top = max(s[2] for s in early + late)
print(f"VmRSS: first sample {samples[0][1]} KiB at step {samples[0][0]}, max {rss_early} KiB at steps "
      f"{steps // 3}..{steps // 2}, max {rss_late} KiB near the end: growth {rss_late - rss_early} KiB")
print(f"open fds: fewest {fd_early} at steps {steps // 3}..{steps // 2}, fewest {fd_late} near the end, most {fd_top}")
problems = []
if rss_late - rss_early >= 256:
    problems.append(f"VmRSS grew by {rss_late - rss_early} KiB (bound 256 KiB)")
if fd_late != fd_early:
    problems.append(f"open file descriptors went from {fd_early} to {fd_late}")
if fd_top > fd_early + 2:
    problems.append(f"up to {fd_top} descriptors open at once (at rest {fd_early}; a checkpoint write adds 1 or 2)")
sys.exit("; ".join(problems) if problems else 0)
EOF
trc=0; wait $pid || trc=$?
cat "$out/figures.txt"
[ $trc -eq 0 ] || fail "the soak run failed (exit $trc): $(tail -3 "$out/run.stderr")"
[ $rc -eq 0 ] || fail "resources grew (see above)"
grep -q "^done: $steps steps" "$out/run.stdout" || fail "the soak run did not finish its $steps steps"
[ "$(grep -c '^checkpoint: ' "$out/run.stdout")" -eq $((steps / 10)) ] || fail "expected $((steps / 10)) checkpoints"
[ "$(grep -c '^generating:' "$out/run.stdout")" -eq $((steps / 250)) ] || fail "expected $((steps / 250)) samples"
[ "$(grep -c ' tel:' "$out/run/main.log")" -eq $((steps / 25 + 1)) ] || fail "expected $((steps / 25 + 1)) validations"
kept=$(find "$out/run" -maxdepth 1 -name 'DONE_*' | wc -l)
[ "$kept" -eq 2 ] || fail "-nk 2 kept $kept checkpoints"
echo "ok soak: $steps steps, $((steps / 10)) checkpoints, $((steps / 25 + 1)) validations, $((steps / 250)) samples;" \
     "resident memory and open descriptors flat"
