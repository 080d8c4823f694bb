#!/usr/bin/env bash
# kill -9 at random moments, many times over, on the CPU trainer (or a GPU one: TRAIN_BIN
# below): one run is killed (SIGKILL) again and again, resumed with -y 1 each time, until
# it finishes; it must end with the main.log, final model and final state file of a run
# never stopped, byte for byte.
#  - the kill moments come from a seeded schedule (KILL_TRIALS_SEED reproduces it; the
#    seed is printed): some while the process starts and resumes, some mid-training, some
#    aimed at checkpoint writes, which the trainer's slow_write test hook
#    (GPTRAIN_FAULT_INJECT, llmc/faults.h) stretches so that kills land inside them;
#  - after every kill each complete checkpoint (one with its DONE marker) left in the
#    directory equals the uninterrupted run's checkpoint of that step, byte for byte, and
#    the next start resumes from the newest one without calling any checkpoint unusable;
#  - -nk 2 prunes old checkpoints along the way, so kills also land among deletions.
# Prints how many kills landed where, mid-checkpoint-write included.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
# TRAIN_BIN: the trainer under test (default the CPU one; scripts/gpu_check.sh passes
# ./train_gpt_fp32 and ./train_gpt_bf16), TEST_OUT: where its runs go, SLOW_STEP_MS: a pause
# after every step (the slow_step test hook) so that a fast GPU leaves signals and kills time;
# 10 ms unless set (0: none): this CPU trainer's small steps take about 10 ms on a fast CPU,
# less than the shell's polling needs to see a checkpoint before -nk 2 prunes it
TRAIN=${TRAIN_BIN:-./train_gpt_cpu}
[ "$TRAIN" = ./train_gpt_cpu ] && make -s train_gpt_cpu
SLOW_STEP_MS=${SLOW_STEP_MS:-10}
slow=
[ "$SLOW_STEP_MS" != 0 ] && slow=slow_step@$SLOW_STEP_MS
out=${TEST_OUT:-test/out/kill_trials}
rm -rf "$out"; mkdir -p "$out"
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 300 --maxT 64 --L 2 --NH 4 --C 64 --seed 5 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 6000 --val-tokens 3000 --shards 2 --seed 9 > /dev/null
fail() { echo "FAIL: $*"; exit 1; }
set -f  # the flags below hold globs for the trainer, not for the shell
unset GPTRAIN_FAULT_INJECT
# one thread: on a busy machine OpenMP's spinning threads slow the runs many times over
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

every=4                            # steps between checkpoints (-n)
steps=${KILL_TRIALS_STEPS:-80}     # 20 checkpoints, each 3 files
kills=${KILL_TRIALS_KILLS:-36}
pause_ms=8                         # slow_write: each checkpoint file waits this long before its rename
seed=${KILL_TRIALS_SEED:-$(( $(date +%s%N) % 1000000 ))}
RANDOM=$seed
echo "kill schedule seed $seed (KILL_TRIALS_SEED=$seed reproduces the schedule)"
flags="-e $out/model.bin -i $out/markov_train_*.bin -j $out/markov_val_*.bin -b 4 -t 32 -d 256
       -l 2e-3 -u 3 -q 0.1 -c 0.1 -v 10 -m 2 -s 0 -x $steps -n $every"
final=$(printf %08d $steps)

# the uninterrupted runs: ref prunes like the killed run; all keeps every checkpoint, to
# compare each checkpoint the killed run leaves behind
$TRAIN $flags -nk 2 -o "$out/ref" > "$out/ref.stdout"
$TRAIN $flags -o "$out/all" > "$out/all.stdout"
cmp -s "$out/ref/main.log" "$out/all/main.log" || fail "-nk 2 changed main.log"
[ -f "$out/all/DONE_$final" ] || fail "the reference run did not finish"

done_steps() {  # the steps with a DONE marker in $1, oldest first
    find "$1" -maxdepth 1 -name 'DONE_????????' -printf '%f\n' | sed 's/^DONE_0*\([0-9]\)/\1/' | sort -n
}
last_step() {  # the last "step N/" line of trainer stdout $1 (N steps done), or 0
    local s
    s=$(sed -n 's/^step *\([0-9]*\)\/.*/\1/p' "$1" | tail -n 1)
    echo "${s:-0}"
}
wait_for_step() {  # until stdout $1 shows step >= $2 or process $3 is gone (up to 60 s)
    for _ in $(seq 1 6000); do
        kill -0 "$3" 2>/dev/null || return 0
        [ "$(last_step "$1")" -ge "$2" ] && return 0
        nap 0.01
    done
    fail "trial $trial: step $2 not reached in 60 s"
}
wait_for_write() {  # until process $3 is inside the write of checkpoint $2 (files newer than marker $1), or gone
    # inside: a .tmp file of it, or a renamed file without its DONE marker; when its DONE
    # marker is there already (the poll came too late: the write takes about 30 ms here),
    # the next checkpoint's write is the aim
    local c=$2 n p
    for _ in $(seq 1 6000); do
        kill -0 "$3" 2>/dev/null || return 0
        n=$(printf %08d "$c")
        for p in "$d/model_$n.bin.tmp" "$d/state_${n}_00000.bin.tmp" "$d/DONE_$n.tmp"; do
            [ "$p" -nt "$1" ] && return 0
        done
        if [ "$d/DONE_$n" -nt "$1" ]; then
            c=$((c + every))
        elif [ "$d/model_$n.bin" -nt "$1" ] || [ "$d/state_${n}_00000.bin" -nt "$1" ]; then
            return 0
        fi
        nap 0.002
    done
    fail "trial $trial: no write of checkpoint $2 or later seen in 6000 polls"
}
# a pause without a fork: a read that times out on a pipe nobody writes to (an external
# sleep costs milliseconds of its own on a busy machine, and the writes aimed at are short)
exec {nap_fd}<> <(:)
nap() { read -rt "$1" -u $nap_fd || :; }
rand_sleep() { local t; printf -v t '0.%03d' $((RANDOM % $1)); nap "$t"; }  # 0 .. $1-1 ms
usec_now() { echo "${EPOCHREALTIME//[!0-9]/}"; }
start_sleep() {  # 0 .. $1-1 ms, cut short when stdout $2 shows a step or process $3 is gone
    local end=$(( $(usec_now) + (RANDOM % $1) * 1000 ))
    while [ "$(usec_now)" -lt $end ]; do
        kill -0 "$3" 2>/dev/null || return 0
        [ "$(last_step "$2")" -gt 0 ] && return 0
        nap 0.002
    done
}

d=$out/killed
mkdir -p "$d"
trial=0 killed=0 at_start=0 at_train=0 mid_write=0 mid_tmp=0 mid_nodone=0 in_prune=0 seen_strays=
newest=-1   # the newest complete checkpoint after the last kill (-1: none)
while :; do
    trial=$((trial + 1))
    so=$out/trial_$trial.stdout se=$out/trial_$trial.stderr
    # what this attempt wrote is what is newer than its start marker (not than its stdout,
    # whose time moves on with every step line: on a fast machine a checkpoint file is older
    # than the step line after it, so waiting for one newer than stdout missed every write)
    mark=$out/trial_$trial.start
    touch "$mark"
    GPTRAIN_FAULT_INJECT=slow_write@$pause_ms${slow:+,$slow} $TRAIN $flags -nk 2 -o "$d" -y 1 > "$so" 2> "$se" &
    pid=$!
    how=none
    if [ $killed -lt $kills ]; then
        # spread the kills over the run; which kind of moment is drawn from the schedule
        target=$(( (killed + 1) * (steps - every) / (kills + 1) + RANDOM % 3 ))
        r=$((RANDOM % 10))
        # the second half of the kills aims at checkpoint writes, the moment one starts, until
        # one has landed inside one: a short schedule (the emulated GPU's 6 kills) could
        # otherwise draw too few write kills, or sleep past the short writes
        forced=0
        [ $mid_write -eq 0 ] && [ $killed -ge $((kills / 2)) ] && r=9 && forced=1
        # a kill that lands after a checkpoint's DONE marker moves the run on by a checkpoint
        # ($every steps), twice the schedule's pace: once the newest complete checkpoint is past
        # the schedule, the kill aims where it completes none, the start or the moment the
        # resumed run's first write begins, or the run would finish with kills to spare
        # (seed 577522 once finished after 26 of 36)
        ahead=0
        if [ $newest -ge $target ]; then
            ahead=1 forced=1; [ $r -ge 2 ] && r=9
        fi
        if [ $r -lt 2 ]; then
            how=start; start_sleep 150 "$so" $pid     # starting up, resuming, cutting the logs back
        elif [ $r -lt 5 ]; then
            how=train; wait_for_step "$so" $target $pid; rand_sleep 30
        else
            how=write
            if [ $ahead -eq 1 ]; then
                c=$((newest + every))
            else
                wait_for_step "$so" $target $pid
                s=$(last_step "$so"); c=$(( (s + every - 1) / every * every ))
            fi
            wait_for_write "$mark" $c $pid
            [ $forced -eq 1 ] || rand_sleep $((2 * pause_ms))
        fi
        kill -9 $pid 2>/dev/null || true
    fi
    rc=0; wait $pid 2> /dev/null || rc=$?  # (no "Killed" notice from the shell)
    grep -q "unusable" "$se" && fail "trial $trial: a complete checkpoint was unusable: $(grep unusable "$se")"
    if [ $newest -ge 0 ]; then
        want="resumed from $d/model_$(printf %08d $newest).bin at step $newest"
    else
        want="no complete checkpoint in $d: starting from scratch"
    fi
    # a start killed before its first step may not have said where it resumed
    if [ "$(last_step "$so")" -gt 0 ] || [ $rc -ne 137 ]; then
        grep -qF "$want" "$so" || fail "trial $trial: expected '$want', got: $(head -3 "$so")"
    fi
    [ $rc -eq 0 ] && break
    [ $rc -eq 137 ] || fail "trial $trial: exit $rc (not killed, not finished): $(tail -3 "$se")"
    killed=$((killed + 1))

    # where the kill landed: files of this attempt's checkpoint write that never got renamed,
    # or renamed files of a checkpoint without its DONE marker, mean it was inside a write
    tmp=$(find "$d" -maxdepth 1 -name '*.tmp' ! -name 'main.log.tmp' ! -name 'metrics.jsonl.tmp' -newer "$mark" | wc -l)
    steps_done=$(done_steps "$d")
    newest=$(echo "$steps_done" | tail -n 1); newest=${newest:--1}
    nodone=0
    for f in $(find "$d" -maxdepth 1 \( -name 'model_*.bin' -o -name 'state_*.bin' \) -newer "$mark" -printf '%f\n'); do
        s=$(echo "$f" | sed 's/^[a-z]*_0*\([0-9][0-9]*\).*/\1/')
        [ "$s" -gt "$newest" ] && nodone=1
    done
    # -nk 2: complete checkpoints beyond the newest two, or files of an older step without
    # DONE, are left by a kill between a new DONE marker and the deletion of the old
    # checkpoint; the next start or checkpoint deletes them (counted once each)
    strays=$(echo "$steps_done" | head -n -2 | sed 's/^/DONE:/' | tr '\n' ' ')
    for f in $(find "$d" -maxdepth 1 \( -name 'model_*.bin' -o -name 'state_*.bin' \) -printf '%f\n'); do
        s=$(echo "$f" | sed 's/^[a-z]*_0*\([0-9][0-9]*\).*/\1/')
        [ "$s" -lt "$newest" ] && [ ! -e "$d/DONE_$(printf %08d "$s")" ] && strays="$strays$f "
    done
    for f in $strays; do
        case " $seen_strays " in *" $f "*) ;; *) seen_strays="$seen_strays $f"; in_prune=$((in_prune + 1)) ;; esac
    done
    if [ $tmp -gt 0 ] || [ $nodone -eq 1 ]; then
        mid_write=$((mid_write + 1)); where=mid-write
        [ $tmp -gt 0 ] && mid_tmp=$((mid_tmp + 1))
        [ $nodone -eq 1 ] && mid_nodone=$((mid_nodone + 1))
    elif [ "$(last_step "$so")" -eq 0 ]; then
        at_start=$((at_start + 1)); where=start
    else
        at_train=$((at_train + 1)); where=train
    fi
    echo "trial $trial: aimed $how, killed after step $(last_step "$so") ($where), newest complete checkpoint $newest" >> "$out/trials.log"

    # every complete checkpoint left behind is the uninterrupted run's, byte for byte
    for s in $steps_done; do
        c=$(printf %08d "$s")
        for f in "model_$c.bin" "state_${c}_00000.bin"; do
            cmp -s "$d/$f" "$out/all/$f" || fail "trial $trial: complete checkpoint file $f differs from the uninterrupted run's"
        done
    done
done

[ $killed -ge $((kills * 3 / 4)) ] || fail "only $killed of $kills kills happened before the run finished"
[ $mid_write -gt 0 ] || fail "no kill landed inside a checkpoint write"
cmp "$out/ref/main.log" "$d/main.log" || fail "main.log differs from the uninterrupted run's after $killed kills"
cmp "$out/ref/model_$final.bin" "$d/model_$final.bin" || fail "final model differs after $killed kills"
cmp "$out/ref/state_${final}_00000.bin" "$d/state_${final}_00000.bin" || fail "final state file differs after $killed kills"
"$PY" - "$out/ref/metrics.jsonl" "$d/metrics.jsonl" <<'EOF' || fail "metrics.jsonl: records differ from the uninterrupted run's"
import json, sys
def records(path):  # every line parses; (step, kind) in order, the timings aside
    return [(r["step"], r["kind"]) for r in map(json.loads, open(path))]
sys.exit(0 if records(sys.argv[1]) == records(sys.argv[2]) else 1)
EOF
left=$(find "$d" -maxdepth 1 -name '*.tmp' -printf '%f ')
[ -z "$left" ] || fail "temporary files left behind: $left"
ref_dir=$(cd "$out/ref" && pwd)
extra=$(cd "$d" && set +f && for f in *; do [ -e "$ref_dir/$f" ] || printf '%s ' "$f"; done)
[ -z "$extra" ] || fail "files the uninterrupted run does not have (-nk 2 not honoured after kills?): $extra"
echo "ok kill -9 x $killed over $trial starts (seed $seed): $at_start while starting, $at_train while training," \
     "$mid_write inside checkpoint writes ($mid_tmp with a .tmp file left, $mid_nodone with files but no DONE)," \
     "$in_prune files stranded by kills inside -nk deletions (all cleaned up later); every complete checkpoint equal to the uninterrupted run's;" \
     "main.log, final model and state file identical"
