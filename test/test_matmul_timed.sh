#!/usr/bin/env bash
# -ma timed (llmc/cuda/matmul_algos.cuh) on the emulated GPU, a tiny GPT-2 (gpt2:l2c64), 8 steps,
# train_gpt_bf16. The emulated cuBLASLt offers split-K answers after its first, which round in
# another order (llmc/emu/cublaslt.cpp); EMU_CUBLASLT_FAST=i makes its i-th answer the fastest,
# so which algorithm a timed choice keeps is the test's to decide. References: the -ma heuristic
# run (today's behaviour) and the run that never stopped.
#   - timed with the first answer fastest: main.log byte for byte the heuristic run's (the timing
#     itself changes nothing: scratch outputs, beta 1 not added twice);
#   - timed with a split-K answer fastest: it says it picked non-first answers, and every loss and
#     grad norm is within TOL, NORM_TOL of the heuristic run's, and not all equal to them;
#   - stopped at step 4 and resumed with another answer fastest (a re-timing would choose
#     otherwise): main.log, the final model and choices byte for byte the uninterrupted run's;
#   - the choices file missing or with a byte flipped: one line naming it, non-zero exit;
#   - resumed at another world size (2 ranks' checkpoint as 1 process, 1 process's at 2 ranks,
#     each rank its own emulated GPU): one line says so and the products are timed again (another
#     answer fastest now), the run reaches its end, and every loss and grad norm is within TOL,
#     NORM_TOL of the uninterrupted run's; the choices it writes then say its own layout; at the
#     same 2 ranks, rank 1's file missing stops the resume in one line;
#   - a version 1 choices file (before the layout was recorded) still loads, bit for bit;
#   - choices another cuBLASLt made: one line says so, the products are timed again, the run
#     ends within TOL, NORM_TOL of the uninterrupted one;
#   - the memory plan counts the scratch outputs of the largest product timed: the start-up line
#     shows them under -ma timed (the logits' Vp x B*T in bf16, from the model's dimensions) and
#     not under -ma heuristic, the timing says its largest was that; a d12 run that fits without
#     them is refused in one line with them;
#   - an unknown -ma value: one line naming the flag.
set -u
cd "$(dirname "$0")/.."
source test/lib.sh  # defines: PY, compare_logs, expect_error, copy_step4, expect_damaged_resume
out=test/out/matmul_timed
rm -rf "$out"; mkdir -p "$out"
if ! "$PY" -c "import numpy" 2> /dev/null; then
    echo "numpy not importable by $PY (apt-get install python3-numpy): the test data needs it"
    [ "${CI:-}" = "true" ] && exit 1 || exit 77
fi
if ! make -s train_gpt_bf16_emu > "$out/build.log" 2>&1; then
    grep -E "error|Error" "$out/build.log" | head -n 20
    echo "FAIL: make train_gpt_bf16_emu (see $out/build.log)"
    exit 1
fi
fail=0
bad() { echo "FAIL $*"; fail=1; }
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 8000 --val-tokens 2000 --seed 11 > /dev/null
set -f  # the flags below hold globs for the trainer, not for the shell
flags="-i $out/markov_train_*.bin -j $out/markov_val_*.bin -e gpt2:l2c64 -b 4 -t 32 -x 8 -l 4e-3 -k constant -v 4
       -m 2 -s 0 -n 4"
run() {  # run DIR FLAGS...: trains into DIR, its output in DIR.stdout
    local dir=$1; shift
    ./train_gpt_bf16_emu $flags "$@" -o "$dir" > "$dir.stdout" 2>&1 || bad "-o $dir: exit $? ($(tail -n 1 "$dir.stdout"))"
}

run "$out/heuristic"
EMU_CUBLASLT_FAST=0 run "$out/timed_first" -ma timed
if cmp -s "$out/heuristic/main.log" "$out/timed_first/main.log"; then
    echo "ok   -ma timed, the first answer fastest: main.log byte for byte -ma heuristic's"
else
    bad "-ma timed choosing the heuristic's first answers trains otherwise than -ma heuristic: the timing changed results"
fi

# TOL, relative, on every trl and tel: a split-K answer sums the same products in fp32 in another
# order, which moves a bf16 activation by an ulp (2^-8 to 2^-7 relative) only where the sum sat near a
# rounding boundary; the losses then part slowly. Measured here: 8.5e-5 at most over the 8 steps
# (commit message). 1e-3 is 12 times that and a quarter of bf16's unit roundoff 2^-8. (The slip the timing must
# avoid, its runs adding a beta 1 product into the real D, moved the losses 1.2-1.4e-3 by step 4
# when planted; the byte-for-byte check above is what catches it at once.)
TOL=0.001
# NORM_TOL, relative, on the grad norms: the same reordering, seen in every gradient rather than
# averaged into one loss: 6.4e-4 at most here; 5e-3, 8 times that.
NORM_TOL=0.005
EMU_CUBLASLT_FAST=2 run "$out/timed" -ma timed
summary=$(grep "matmul: -ma timed" "$out/timed.stdout")
if [[ "$summary" =~ picked\ a\ non-first\ answer\ for\ ([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt 0 ]; then
    echo "ok   says: $summary"
else
    bad "the timed run with split-K fastest does not say it picked non-first answers: '$summary'"
fi
if cmp -s "$out/heuristic/main.log" "$out/timed/main.log"; then
    bad "-ma timed with a split-K answer fastest trains bit for bit as -ma heuristic: the choice did nothing"
fi
if diff=$(compare_logs "$out/heuristic/main.log" "$out/timed/main.log" $TOL $NORM_TOL); then
    echo "ok   -ma timed (split-K fastest) against -ma heuristic: $diff (tolerances $TOL, $NORM_TOL)"
else
    bad "-ma timed (split-K fastest) against -ma heuristic: $diff (tolerances $TOL, $NORM_TOL)"
fi

# resume at step 4 with another answer fastest: only the saved choices keep it on the same bits
res=$out/resumed
copy_step4 "$out/timed" "$res" main.log
EMU_CUBLASLT_FAST=1 run "$res" -ma timed -y 1
grep -q "loaded from the checkpoint" "$res.stdout" || bad "the resumed run does not say it loaded its algorithms"
same=1
for f in main.log model_00000008.bin state_00000008_00000_matmul.bin; do
    cmp -s "$out/timed/$f" "$res/$f" || { bad "resumed at step 4: $f differs from the uninterrupted run's"; same=0; }
done
[ $same = 1 ] && echo "ok   resumed at step 4 (another answer fastest now): main.log, model_00000008.bin and the choices byte for byte the uninterrupted run's"

# without the choices, or with a byte of the first entry's algorithm flipped (after the 96-byte
# header and its 32-byte key), at the layout that wrote them
expect_damaged_resume "$out/timed" state_00000004_00000_matmul.bin 132 "entries checksum mismatch" \
    ./train_gpt_bf16_emu $flags -ma timed -y 1

# Resumed at another world size: -d stays 128 tokens a step (B x world: 4 x 1, 2 x 2), so the
# state resumes; the reduction over the ranks sums in another order, the products are timed
# again with another answer fastest (EMU_CUBLASLT_FAST=1, the runs that wrote them had 2), so
# nothing is expected bit for bit. TOL and NORM_TOL as above: measured here over three runs, the
# resumed runs part from the uninterrupted ones by at most 1.0e-5 (losses) and 4.2e-4 (norms), and
# a whole 2-rank run from the 1-process one by 3.4e-5 and 1.9e-3 (commit message).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
if command -v mpirun > /dev/null && ldd ./train_gpt_bf16_emu | grep -q libmpi; then
    run2() {  # run2 DIR FLAGS...: 2 ranks, each its own emulated GPU
        local dir=$1; shift
        timeout 600 mpirun -np 2 env EMU_DEVICES=2 OMP_NUM_THREADS=1 EMU_CUBLASLT_FAST="${EMU_CUBLASLT_FAST:--1}" \
            ./train_gpt_bf16_emu $flags -b 2 "$@" -o "$dir" > "$dir.stdout" 2>&1 ||
            bad "mpirun -np 2 -o $dir: exit $? ($(tail -n 1 "$dir.stdout"))"
    }
    world() {  # world FILE: the ranks a choices file says wrote it (header word 7)
        od -An -t u8 -j 56 -N 8 "$1" | tr -d ' '
    }
    EMU_CUBLASLT_FAST=2 run2 "$out/timed_np2" -ma timed
    # resume_world NAME SRC RUNNER NP WROTE NOW: SRC's step-4 checkpoint continued by RUNNER (NP
    # ranks) in $out/resumed_npNP
    resume_world() {
        local name=$1 src=$2 runner=$3 np=$4 wrote=$5 now=$6 d=$out/resumed_np$4 says diff
        copy_step4 "$src" "$d" main.log
        EMU_CUBLASLT_FAST=1 $runner "$d" -ma timed -y 1
        says="-ma timed: the checkpoint was written by $wrote, this run has $now: timing the products again"
        if [ "$(grep -c -- "$says" "$d.stdout")" != 1 ] || [ ! -e "$d/DONE_00000008" ]; then
            bad "$name: not one line '$says', or no checkpoint at step 8 (see $d.stdout)"
        elif ! diff=$(compare_logs "$src/main.log" "$d/main.log" $TOL $NORM_TOL); then
            bad "$name: against the uninterrupted run: $diff (tolerances $TOL, $NORM_TOL)"
        elif [ "$(world "$d/state_00000008_00000_matmul.bin")" != "$np" ]; then
            bad "$name: its step-8 choices say $(world "$d/state_00000008_00000_matmul.bin") ranks, not $np"
        else
            echo "ok   $name: says '$says', runs to step 8: $diff (tolerances $TOL, $NORM_TOL)"
        fi
    }
    resume_world "2 ranks' checkpoint resumed as 1 process" "$out/timed_np2" run 1 "2 ranks" "1 process"
    resume_world "1 process's checkpoint resumed at 2 ranks" "$out/timed" run2 2 "1 process" "2 ranks"
    # at the same layout each rank loads its own file: rank 1's missing stops the resume in one line
    d=$out/resume_np2_missing
    copy_step4 "$out/timed_np2" "$d" main.log
    rm "$d/state_00000004_00001_matmul.bin"
    expect_error "2 ranks, rank 1's choices missing" "state_00000004_00001_matmul.bin: cannot open" \
        timeout 300 mpirun -np 2 env EMU_DEVICES=2 OMP_NUM_THREADS=1 ./train_gpt_bf16_emu $flags -b 2 -ma timed -y 1 \
        -o "$d"
else
    echo "skip the resumes at another world size: no mpirun, or train_gpt_bf16_emu built without MPI"
fi

# rewrite_header FILE v1|library: a version 2 choices file's header rewritten, its checksum
# made again: v1, as version 1 wrote it (8 words, no layout, the header's checksum in the last);
# library, as another cuBLASLt would (word 5 its version, here one more than this one's);
# entries, a count of 2^60 entries (word 3) in a sound header: refused before any allocation
rewrite_header() {
    "$PY" - "$1" "$2" <<'PYEOF'
import struct, sys
def checksum64(b):  # llmc/checkpoint.h's: FNV-1a over 8-byte little-endian words, then the tail bytes
    h, M, n = 1469598103934665603, (1 << 64) - 1, len(b) // 8 * 8
    for i in range(0, n, 8):
        h = ((h ^ int.from_bytes(b[i:i + 8], "little")) * 1099511628211) & M
    for c in b[n:]:
        h = ((h ^ c) * 1099511628211) & M
    return h
raw = open(sys.argv[1], "rb").read()
h = list(struct.unpack("<12Q", raw[:96]))
assert h[1] == 2, h
if sys.argv[2] == "v1":
    words = h[:7]
    words[1] = 1
else:
    words = h[:11]
    if sys.argv[2] == "library":
        words[5] += 1
    else:  # entries: far more than the file holds
        words[3] = 1 << 60
words.append(checksum64(struct.pack(f"<{len(words)}Q", *words)))
open(sys.argv[1], "wb").write(struct.pack(f"<{len(words)}Q", *words) + raw[96:])
PYEOF
}

# A version 1 file still reads, as one written at this run's layout: the 1-process run's step-4
# choices rewritten so and resumed with another answer fastest end byte for byte as the run that
# never stopped.
d=$out/resume_version1
copy_step4 "$out/timed" "$d" main.log
rewrite_header "$d/state_00000004_00000_matmul.bin" v1
EMU_CUBLASLT_FAST=1 run "$d" -ma timed -y 1
if grep -q "loaded from the checkpoint" "$d.stdout" && cmp -s "$out/timed/main.log" "$d/main.log" &&
       cmp -s "$out/timed/model_00000008.bin" "$d/model_00000008.bin"; then
    echo "ok   a version 1 choices file (no layout) loads: resumed at step 4, main.log and model byte for byte"
else
    bad "a version 1 choices file: not loaded, or the run parted from the uninterrupted one (see $d.stdout)"
fi

# Choices another cuBLASLt made (a CUDA upgrade between the run and its resume): an algorithm is
# its library's opaque data, so the products are timed again, in one line, and the run ends
# within TOL, NORM_TOL of the one that never stopped (another answer fastest now: not bit for bit)
d=$out/resume_other_library
copy_step4 "$out/timed" "$d" main.log
rewrite_header "$d/state_00000004_00000_matmul.bin" library
EMU_CUBLASLT_FAST=1 run "$d" -ma timed -y 1
says="-ma timed: the checkpoint's algorithms are cuBLASLt [0-9]*'s, this is [0-9]*: timing the products again"
if [ "$(grep -c -- "$says" "$d.stdout")" != 1 ] || [ ! -e "$d/DONE_00000008" ]; then
    bad "another cuBLASLt's choices: not one line '$says', or no checkpoint at step 8 (see $d.stdout)"
elif ! diff=$(compare_logs "$out/timed/main.log" "$d/main.log" $TOL $NORM_TOL); then
    bad "another cuBLASLt's choices: against the uninterrupted run: $diff (tolerances $TOL, $NORM_TOL)"
else
    echo "ok   another cuBLASLt's choices: '$(grep -m 1 -- "$says" "$d.stdout")', runs to step 8: $diff"
fi

d=$out/resume_entries
copy_step4 "$out/timed" "$d" main.log
rewrite_header "$d/state_00000004_00000_matmul.bin" entries
expect_error "2^60 entries in a sound header" \
    "state_00000004_00000_matmul.bin: holds 1152921504606846976 entries, more than its remaining bytes can" \
    ./train_gpt_bf16_emu $flags -ma timed -y 1 -o "$d"

# The scratch outputs in the memory plan. A linear of K inputs and OC outputs times D (OC, BT)
# going forward (GPT-2's fc with GELU's aux beside it, -ge 2 being the default), D (K, BT) and
# D (K, OC) coming back (llmc/cuda/matmul.cuh); the classifier the same with K = C, OC = Vp. For
# gpt2:l2c64 at B=4 T=32: C 64, the MLP's 256, Vp 50304 (GPT-2's 50257 rounded up to 128), bf16.
planned() {  # planned STDOUT: the "-ma timed scratch" of its memory plan line, MiB
    grep "^memory plan:" "$1" | grep -o -- '-ma timed scratch [0-9.]* MiB' | cut -d' ' -f4
}
want=$(awk 'BEGIN { C = 64; H = 4 * C; Vp = 50304; BT = 4 * 32; split("", d)
    n = 0; d[++n] = 3*C * BT; d[++n] = C * BT; d[++n] = 2 * H * BT; d[++n] = C * BT   # forward (fc: D and aux)
    d[++n] = C * BT; d[++n] = C * BT; d[++n] = C * BT; d[++n] = H * BT               # dinp
    d[++n] = C * 3*C; d[++n] = C * C; d[++n] = C * H; d[++n] = H * C                 # dweight
    d[++n] = Vp * BT; d[++n] = C * BT; d[++n] = C * Vp                               # the classifier
    most = 0; for (i = 1; i <= n; i++) if (d[i] > most) most = d[i]
    printf "%.1f", most * 2 / 1048576 }')
got=$(planned "$out/timed.stdout")
summary=$(grep "matmul: -ma timed" "$out/timed.stdout")
if [ "$got" = "$want" ] && [ -z "$(planned "$out/heuristic.stdout")" ] &&
       [[ "$summary" == *"scratch outputs up to $want MiB (planned: $want MiB)"* ]]; then
    echo "ok   the memory plan line: -ma timed scratch $got MiB (the logits' Vp x B*T in bf16: $want), none under -ma heuristic; the largest timed was that"
else
    bad "the memory plan's -ma timed scratch: '$got' MiB, by the arithmetic $want; under -ma heuristic '$(planned "$out/heuristic.stdout")'; timing said '$summary'"
fi
# d12 at B=240 T=1024 -r 2 fits the emulated H100's 79.6 GiB without the scratch (73.6 GiB) and
# not with it: the logits' 240 x 1024 x 50304 bf16 values, 23.03 GiB. Refused before the model is
# built (ulimit -v: nothing of that size is tried).
big="-e gpt2:d12 -b 240 -t 1024 -r 2 -i $out/markov_train_*.bin -v 0"
expect_error "ma timed d12" "does not fit on the GPU" \
    bash -c 'ulimit -v 8000000 && exec "$@"' - ./train_gpt_bf16_emu $big -ma timed
line=$(grep "does not fit on the GPU" "$out/error_ma_timed_d12.log")
timing=$(awk 'BEGIN { printf "%.2f", 240 * 1024 * 50304 * 2 / 1073741824 }')
re=": ([0-9.]+) GiB per GPU .*-ma timed's largest product ([0-9.]+);.* has ([0-9.]+) GiB free"
if [[ "$line" =~ $re ]] &&
       [ "${BASH_REMATCH[2]}" = "$timing" ] &&
       awk -v t="${BASH_REMATCH[1]}" -v s="${BASH_REMATCH[2]}" -v f="${BASH_REMATCH[3]}" 'BEGIN { exit !(t - s < f && t > f) }'; then
    echo "ok   d12 B=240 -ma timed refused: ${BASH_REMATCH[1]} GiB with the scratch of $timing GiB, ${BASH_REMATCH[3]} free"
else
    bad "d12 B=240 -ma timed: wanted a refusal counting $timing GiB of scratch, without which it fits: '$line'"
fi

expect_error "-ma" "flag -ma: unknown matmul algorithm choice 'fastest'" ./train_gpt_bf16_emu $flags -ma fastest
exit $fail
