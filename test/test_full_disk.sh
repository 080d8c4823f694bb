#!/usr/bin/env bash
# A full disk fails cleanly, on the CPU trainer:
#  - a checkpoint write into a full filesystem stops the run (exit 1) with one error line
#    naming the file and the problem; its temporary file is removed; every file left under
#    a final name is whole; the previous checkpoint (model, state, DONE) is intact; main.log
#    and metrics.jsonl hold whole lines of the run; with space freed, -y 1 resumes from the
#    previous checkpoint and ends equal to a run that never stopped;
#  - the same when the disk fills while main.log / metrics.jsonl are appended to: a line cut
#    short by the full disk is dropped on resume.
# The filesystem: a size-limited tmpfs where this machine lets us mount one (root), else a
# per-file size limit (ulimit -f, SIGXFSZ ignored, so a write gets EFBIG), which covers the
# checkpoint case only. FULL_DISK_MECHANISM=rlimit forces the fallback.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
make -s train_gpt_cpu
out=test/out/full_disk
mnt=$out/mnt
mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"
rm -rf "$out"; mkdir -p "$mnt"
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 300 --maxT 64 --L 2 --NH 4 --C 64 --seed 5 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 6000 --val-tokens 3000 --shards 2 --seed 9 > /dev/null
bg=
fail() {
    echo "FAIL: $*"
    [ -n "$bg" ] && kill -9 "$bg" 2>/dev/null && wait "$bg" 2>/dev/null  # then the mount can go
    exit 1
}
set -f  # the flags below hold globs for the trainer, not for the shell
unset GPTRAIN_FAULT_INJECT
# one thread: on a busy machine OpenMP's spinning threads slow the runs many times over
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

data="-e $out/model.bin -i $out/markov_train_*.bin -j $out/markov_val_*.bin -b 4 -t 32 -d 256
      -l 2e-3 -u 3 -q 0.1 -c 0.1 -v 5 -m 3 -s 0"
flags="$data -x 30 -n 5"
./train_gpt_cpu $flags -o "$out/ref" > /dev/null
size() { stat -c %s "$1"; }
model_bytes=$(size "$out/ref/model_00000005.bin")
state_bytes=$(size "$out/ref/state_00000005_00000.bin")

mech=${FULL_DISK_MECHANISM:-tmpfs}
if [ "$mech" = tmpfs ]; then
    # room for the checkpoints of steps 5 and 10 and the logs, and half of the next one
    kb=$(( (5 * (model_bytes + state_bytes) / 2 + 65536) / 1024 ))
    if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=${kb}k gptrain_full_disk "$mnt" 2> "$out/mount.err"; then
        trap 'umount "$mnt" 2>/dev/null || true' EXIT
        echo "mechanism: tmpfs of ${kb} KiB mounted on $mnt"
    else
        echo "no tmpfs (uid $(id -u): $(cat "$out/mount.err" 2>/dev/null)): falling back to ulimit -f"
        mech=rlimit
    fi
fi

# whole lines, each a line of the uninterrupted run's (the timings of metrics aside); with
# "cut" the last line may be cut short (the disk filled inside it), and is left out
logs_sound() {  # run dir, reference dir [cut]
    "$PY" - "$1" "$2" "${3:-}" <<'EOF'
import json, sys
run, ref, cut = sys.argv[1], sys.argv[2], sys.argv[3] == "cut"
for name in ("main.log", "metrics.jsonl"):
    text = open(f"{run}/{name}").read()
    lines, want = text.splitlines(), open(f"{ref}/{name}").read().splitlines()
    if text and not text.endswith("\n"):
        if not cut:
            sys.exit(f"{name}: last line cut short: {lines[-1]!r}")
        lines.pop()
    if name == "metrics.jsonl":
        lines = [(r["step"], r["kind"]) for r in map(json.loads, lines)]
        want = [(r["step"], r["kind"]) for r in map(json.loads, want)]
    if lines != want[:len(lines)]:
        sys.exit(f"{name}: not the first {len(lines)} lines of the uninterrupted run's")
EOF
}
# every checkpoint file under a final name equals the uninterrupted run's, and none is left
# under its temporary name
files_sound() {  # run dir, reference dir
    local f left
    for f in $(find "$1" -maxdepth 1 \( -name 'model_*.bin' -o -name 'state_*.bin' \) -printf '%f\n'); do
        cmp -s "$1/$f" "$2/$f" || fail "$f: left under its final name, not the complete file"
    done
    left=$(find "$1" -maxdepth 1 -name '*.tmp' -printf '%f ')
    [ -z "$left" ] || fail "temporary files left behind: $left"
}
# exit 1 with exactly one error line, the last one, naming a file of $2 (a regex) and $3
failed_cleanly() {  # rc, file regex, problem, stderr
    [ "$1" -eq 1 ] || fail "exit $1 on a full disk (want 1): $(tail -3 "$4")"
    [ "$(grep -c '^error: ' "$4")" -eq 1 ] || fail "want exactly one error line: $(cat "$4")"
    tail -n 1 "$4" | grep -Eq "^error: [^ ]*/$2: write failed \($3\)" || fail "error line: $(tail -n 1 "$4")"
}

# ---- a checkpoint write into the full filesystem
run=$mnt/run
if [ $mech = tmpfs ]; then
    rc=0; ./train_gpt_cpu $flags -o "$run" > "$out/a.stdout" 2> "$out/a.stderr" || rc=$?
    problem="No space left on device"
else
    # the limit is per file: between a model file and a state file. A run that stopped
    # after step 10 (the reference with its later checkpoints gone) resumes under it.
    cp -r "$out/ref" "$run"
    for s in 15 20 25 30; do rm "$run/DONE_000000$s" "$run/model_000000$s.bin" "$run/state_000000${s}_00000.bin"; done
    limit_kb=$(( (model_bytes + state_bytes) / 2 / 1024 ))
    echo "mechanism: ulimit -f ${limit_kb} KiB per file, SIGXFSZ ignored"
    rc=0; (trap '' XFSZ; ulimit -f $limit_kb; exec ./train_gpt_cpu $flags -o "$run" -y 1) > "$out/a.stdout" 2> "$out/a.stderr" || rc=$?
    problem="File too large"
fi
failed_cleanly $rc '(model|state)_00000015(_00000)?\.bin\.tmp' "$problem" "$out/a.stderr"
for f in DONE_00000010 model_00000010.bin state_00000010_00000.bin; do
    [ -e "$run/$f" ] || fail "the previous checkpoint lost $f"
done
[ -e "$run/DONE_00000015" ] && fail "DONE_00000015 written although its checkpoint failed"
files_sound "$run" "$out/ref"
logs_sound "$run" "$out/ref" || fail "logs after the failed checkpoint write"
echo "ok checkpoint write on a full disk: exit 1, '$(tail -n 1 "$out/a.stderr" | cut -c 1-150)...'; step 10 intact, no temporary or partial file, logs whole"

# space freed: resume from step 10, end as the uninterrupted run did
if [ $mech = tmpfs ]; then mount -o remount,size=64m "$mnt"; fi
./train_gpt_cpu $flags -o "$run" -y 1 > "$out/a.resume.stdout" 2> "$out/a.resume.stderr" \
    || fail "resume after the full disk failed: $(tail -2 "$out/a.resume.stderr")"
grep -q "resumed from .*model_00000010.bin at step 10" "$out/a.resume.stdout" || fail "did not resume at step 10"
cmp "$out/ref/main.log" "$run/main.log" || fail "main.log differs from the uninterrupted run's after the resume"
cmp "$out/ref/model_00000030.bin" "$run/model_00000030.bin" || fail "final model differs after the resume"
cmp "$out/ref/state_00000030_00000.bin" "$run/state_00000030_00000.bin" || fail "final state differs after the resume"
echo "ok space freed, -y 1: resumed at step 10; main.log, final model and state equal the uninterrupted run's"

# ---- the disk fills while the logs are appended to: filled up during the DONE marker of
# the first checkpoint (slow_write holds each checkpoint file 1 s before its rename); the
# metrics.jsonl lines of the steps up to the next one (over 130 bytes each, 40 steps a 4 KiB
# page) need more than the page each log file may have left
if [ $mech != tmpfs ]; then
    echo "skip the log-append case: a per-file limit cannot fill the disk under a growing log"
    echo "full-disk tests passed ($mech)"
    exit 0
fi
every=$(( 40 * $(getconf PAGESIZE) / 4096 ))
lflags="$data -x $((2 * every)) -n $every"
c1=$(printf %08d $every) c2=$(printf %08d $((2 * every)))
./train_gpt_cpu $lflags -o "$out/ref2" > /dev/null
rm -rf "$mnt/run"
run=$mnt/logs
GPTRAIN_FAULT_INJECT=slow_write@1000 ./train_gpt_cpu $lflags -o "$run" > "$out/b.stdout" 2> "$out/b.stderr" &
bg=$!
for _ in $(seq 1 3000); do [ -e "$run/DONE_$c1.tmp" ] && break; sleep 0.01; done
[ -e "$run/DONE_$c1.tmp" ] || fail "the checkpoint of step $every never started its DONE marker"
dd if=/dev/zero of="$mnt/filler" bs=4k 2> /dev/null && fail "the filler did not fill the filesystem"
[ -e "$run/DONE_$c1.tmp" ] || echo "note: the disk filled after the DONE marker of step $every was renamed"
rc=0; wait $bg || rc=$?
bg=
failed_cleanly $rc '(main\.log|metrics\.jsonl)' "No space left on device" "$out/b.stderr"
[ -e "$run/DONE_$c1" ] || fail "the checkpoint of step $every is not complete"
cmp -s "$run/model_$c1.bin" "$out/ref2/model_$c1.bin" || fail "model of step $every differs"
cmp -s "$run/state_${c1}_00000.bin" "$out/ref2/state_${c1}_00000.bin" || fail "state of step $every differs"
files_sound "$run" "$out/ref2"
cut_short=
for f in main.log metrics.jsonl; do
    if [ "$(tail -c 1 "$run/$f" | od -An -c | tr -d ' ')" != '\n' ]; then
        cut_short="$cut_short $f"
    else
        # a line cut inside its step number, as the disk may leave it: "s:1" of "s:12 ..."
        [ $f = main.log ] && printf 's:1' >> "$run/$f" || printf '{"step":1' >> "$run/$f"
    fi
done
logs_sound "$run" "$out/ref2" cut || fail "logs after the full disk"
rm "$mnt/filler"
./train_gpt_cpu $lflags -o "$run" -y 1 > "$out/b.resume.stdout" 2> "$out/b.resume.stderr" \
    || fail "resume after the full disk failed: $(tail -2 "$out/b.resume.stderr")"
grep -q "at step $every" "$out/b.resume.stdout" || fail "did not resume at step $every"
logs_sound "$run" "$out/ref2" || fail "logs after the resume"
cmp "$out/ref2/main.log" "$run/main.log" || fail "main.log differs from the uninterrupted run's after the resume"
cmp "$out/ref2/model_$c2.bin" "$run/model_$c2.bin" || fail "final model differs after the resume"
echo "ok log append on a full disk: exit 1, '$(tail -n 1 "$out/b.stderr" | cut -c 1-110)...';" \
     "step $every intact; line cut short by the disk:${cut_short:- none (one was appended)}; resume drops it and ends equal"
echo "full-disk tests passed ($mech)"
