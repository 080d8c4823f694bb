#!/usr/bin/env bash
# ncu_profile.sh: Nsight Compute profiles of the three kernels a run spends most GPU time in.
#
#   bash scripts/ncu_profile.sh OUTDIR -- TRAINER_COMMAND...
#   e.g. bash scripts/ncu_profile.sh out/ncu -- ./train_gpt_bf16 -e d12 -b 16 -t 1024 -x 2 -v 0 -s 0 -n 0 -i ... -j ...
#   NCU_KERNELS=REGEX bash scripts/ncu_profile.sh OUTDIR -- COMMAND...
#
# With NCU_KERNELS (a regular expression over kernel names as ncu's "function" base prints them),
# one pass instead: every launch of a matching kernel profiled with the "detailed" set into
# OUTDIR/ncu_kernels.ncu-rep, its details pages in OUTDIR/ncu_kernels_details.txt, and a line per
# launch (scripts/ncu_top.py --launches: duration, SM and issue %, the tensor pipe's %, shared-
# memory bank conflicts, the three largest stall reasons) in OUTDIR/ncu_summary.txt. For a short
# command that launches each kernel of interest once or twice (a dev/cuda program's --profile).
#
# Pass 1 runs the command under ncu timing every kernel launch (gpu__time_duration.sum, one
# replay pass, no other counters) into OUTDIR/ncu_pass1.csv; scripts/ncu_top.py sums it per
# kernel name, prints the table and writes OUTDIR/top.tsv and OUTDIR/top3.txt. Pass 2 runs
# the command once per top-3 kernel, profiling a single launch of it (the "detailed" section
# set) past the first ones, so the warm-up launch is not the one measured: OUTDIR/ncu_<i>.ncu-rep
# (open in the Nsight Compute GUI) and its details page OUTDIR/ncu_<i>.txt. The end is a
# one-line-per-kernel table, also in OUTDIR/ncu_summary.txt.
#
# Kernels are named as ncu's "function" base prints them (no parameter list) in both passes,
# so pass 2's exact-match filter (-k regex:^name$, from top3.txt) finds what pass 1 ranked.
# Keep the command short (a few steps: -x 2): pass 1 serializes and times every launch.
# Clocks are not locked (--clock-control none): the figures are what the boost clock gives,
# as in training, and the only setting some virtualized GPUs allow. Pass 1 does not flush
# the caches between kernels (--cache-control none), so a kernel reading what the previous
# one wrote finds it in L2, as in training; pass 2 keeps ncu's default (flushed before each
# replay), so its detailed counters are repeatable.
#
# Environment: NCU_TIMEOUT=240 seconds per ncu call; NCU_SKIP_CAP=20 most launches of a
# kernel skipped before the one profiled in pass 2; NCU=path of ncu.
# Exit status: 0 when every pass produced its output; 77 when ncu is not there or cannot
# read the GPU's counters (nothing to profile with, not a failure of the code); 1 otherwise.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)  # ncu_top.py's folder; OUTDIR and the command stay relative to the caller

usage() { echo "usage: bash scripts/ncu_profile.sh OUTDIR -- TRAINER_COMMAND..." >&2; exit 2; }
if [ $# -lt 3 ] || [ "$2" != "--" ]; then usage; fi
OUTDIR=$1
shift 2
CMD=("$@")
TIMEOUT="${NCU_TIMEOUT:-240}"
SKIP_CAP="${NCU_SKIP_CAP:-20}"
PY=${PYTHON:-python3}

NCU_BIN="${NCU:-}"
if [ -z "$NCU_BIN" ]; then
    NCU_BIN=$(command -v ncu 2> /dev/null)
    [ -z "$NCU_BIN" ] && [ -x /usr/local/cuda/bin/ncu ] && NCU_BIN=/usr/local/cuda/bin/ncu
    if [ -z "$NCU_BIN" ]; then
        for c in /opt/nvidia/nsight-compute/*/ncu; do [ -x "$c" ] && NCU_BIN=$c; done
    fi
fi
if [ -z "$NCU_BIN" ] || [ ! -x "$NCU_BIN" ]; then
    echo "ncu: not found, no profiles"
    exit 77
fi
mkdir -p "$OUTDIR" || exit 1
echo "ncu: $NCU_BIN ($("$NCU_BIN" --version 2> /dev/null | tail -n 1))"
echo "command: ${CMD[*]}"

# the counters cannot be read: gVisor ("LibraryNotLoaded"), or a driver that keeps them
# from non-admin users (ERR_NVGPUCTRPERM)
counters_refused() {  # FILE...
    grep -h -m 1 -E "LibraryNotLoaded|ERR_NVGPUCTRPERM|Failed to initialize the profiler" "$@" 2> /dev/null
}

# ---------------------------------------------------------------------------------------
# NCU_KERNELS: every launch of the kernels it matches, in one pass
if [ -n "${NCU_KERNELS:-}" ]; then
    rep="$OUTDIR/ncu_kernels"
    rm -f "$rep.ncu-rep"
    t0=$(date +%s)
    timeout -k 10 "$TIMEOUT" "$NCU_BIN" --clock-control none --set detailed --kernel-name-base function \
        -k "regex:$NCU_KERNELS" --export "$rep" --force-overwrite "${CMD[@]}" < /dev/null > "$rep.log" 2>&1
    rc=$?
    echo "kernels matching $NCU_KERNELS: exit $rc, $(( $(date +%s) - t0 )) s (the command's output in $rep.log)"
    why=$(counters_refused "$rep.log")
    if [ -n "$why" ]; then
        echo "ncu: the GPU's performance counters cannot be read here, no profiles ($why)"
        exit 77
    fi
    if [ $rc -ne 0 ] || [ ! -s "$rep.ncu-rep" ]; then
        [ $rc -eq 124 ] && echo "timed out after ${TIMEOUT} s (NCU_TIMEOUT)"
        tail -n 5 "$rep.log"
        exit 1
    fi
    "$NCU_BIN" --import "$rep.ncu-rep" --csv --page raw --print-units base --print-kernel-base demangled \
        > "$OUTDIR/ncu_kernels_raw.csv" 2>> "$rep.log"
    "$NCU_BIN" --import "$rep.ncu-rep" --page details > "$OUTDIR/ncu_kernels_details.txt" 2>> "$rep.log"
    "$PY" "$HERE/ncu_top.py" --launches "$OUTDIR/ncu_kernels_raw.csv" | tee "$OUTDIR/ncu_summary.txt"
    exit "${PIPESTATUS[0]}"
fi

# ---------------------------------------------------------------------------------------
# pass 1: every launch's duration
pass1="$OUTDIR/ncu_pass1.csv"
t0=$(date +%s)
timeout -k 10 "$TIMEOUT" "$NCU_BIN" --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum --csv --page raw --print-units base --print-kernel-base function \
    --log-file "$pass1" "${CMD[@]}" < /dev/null > "$OUTDIR/ncu_pass1_stdout.txt" 2>&1
rc=$?
echo "pass 1: exit $rc, $(( $(date +%s) - t0 )) s (the command's output in $OUTDIR/ncu_pass1_stdout.txt)"
why=$(counters_refused "$pass1" "$OUTDIR/ncu_pass1_stdout.txt")
if [ -n "$why" ]; then
    echo "ncu: the GPU's performance counters cannot be read here, no profiles ($why)"
    exit 77
fi
if [ $rc -ne 0 ]; then
    [ $rc -eq 124 ] && echo "pass 1: timed out after ${TIMEOUT} s (NCU_TIMEOUT); a shorter command?"
    tail -n 5 "$OUTDIR/ncu_pass1_stdout.txt"
    exit 1
fi
if ! "$PY" "$HERE/ncu_top.py" "$pass1" --out-dir "$OUTDIR" | tee "$OUTDIR/ncu_top.txt"; then
    exit 1
fi

# ---------------------------------------------------------------------------------------
# pass 2: one launch of each of the top 3, every section of the "detailed" set
FAILED=0
ROWS=()
mapfile -t TOP < <(head -n 3 "$OUTDIR/top.tsv")
for i in 1 2 3; do
    [ "$i" -le ${#TOP[@]} ] || break
    IFS=$'\t' read -r _ launches _ share _ name <<< "${TOP[$((i - 1))]}"
    regex=$(sed -n "${i}p" "$OUTDIR/top3.txt")
    skip=$(( launches / 2 ))
    [ "$skip" -gt "$SKIP_CAP" ] && skip=$SKIP_CAP
    rep="$OUTDIR/ncu_$i"
    rm -f "$rep.ncu-rep"
    t0=$(date +%s)
    timeout -k 10 "$TIMEOUT" "$NCU_BIN" --clock-control none --set detailed \
        --kernel-name-base function -k "regex:$regex" --launch-skip "$skip" --launch-count 1 \
        --export "$rep" --force-overwrite "${CMD[@]}" < /dev/null > "$rep.log" 2>&1
    rc=$?
    # the details page, read back from the report (-o prints no details of its own)
    if [ -s "$rep.ncu-rep" ]; then
        "$NCU_BIN" --import "$rep.ncu-rep" --page details > "$rep.txt" 2>> "$rep.log"
    else
        : > "$rep.txt"
    fi
    echo "pass 2, kernel $i (launch $((skip + 1)) of $launches): exit $rc, $(( $(date +%s) - t0 )) s, $rep.txt"
    if [ $rc -ne 0 ] || ! grep -q "Duration" "$rep.txt"; then
        echo "pass 2, kernel $i: no profile of $name (see $rep.log)"
        tail -n 3 "$rep.log"
        FAILED=1
    fi
    IFS=$'\t' read -r dur sm mem dram occ regs < <("$PY" "$HERE/ncu_top.py" --details "$rep.txt")
    ROWS+=("$(printf '%-44s | %6.2f%% | %-12s | %7s | %7s | %7s | %9s | %4s' \
        "${name:0:44}" "$share" "$dur" "$sm" "$mem" "$dram" "$occ" "$regs")")
done

{
    echo "ncu top 3: kernel | share | duration | SM % | mem % | DRAM % | occupancy | regs"
    echo "(share: of all kernel time in pass 1; the rest: one launch in pass 2, clocks unlocked)"
    printf '%-44s | %7s | %-12s | %7s | %7s | %7s | %9s | %4s\n' kernel share duration "SM %" "mem %" "DRAM %" occupancy regs
    for row in "${ROWS[@]}"; do echo "$row"; done
} | tee "$OUTDIR/ncu_summary.txt"
[ ${#ROWS[@]} -eq 3 ] || { echo "ncu: fewer than 3 kernels in pass 1"; FAILED=1; }
exit "$FAILED"
