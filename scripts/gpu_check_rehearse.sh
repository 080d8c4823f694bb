#!/usr/bin/env bash
# gpu_check_rehearse.sh: runs a command as the lent device machines run it, here, before a
# GPU window is spent on it: in a fresh copy of the repository (the files git tracks, and the
# untracked ones it does not ignore), with the carried ignored paths copied in, $OUT an empty
# folder, a time limit; then checks what would come back (8 files at most from $OUT).
#
#   bash scripts/gpu_check_rehearse.sh [-c PATH]... [-t SECONDS] [COMMAND]
#   bash scripts/gpu_check_rehearse.sh -c gpu_inputs -t 420 'bash scripts/gpu_check.sh'
#   bash scripts/gpu_check_rehearse.sh -c gpu_inputs -c build -c train_gpt_bf16_emu ... \
#       'GPU_CHECK_EMU=1 bash scripts/gpu_check.sh'
# COMMAND defaults to the device command of scripts/gpu_check.sh's header. Without a GPU the
# real check builds (nvcc, for sm_80 and sm_90) and then fails every run that needs the device:
# what it rehearses is the command, the carried inputs, the build targets, the parts' time
# limits and what lands in $OUT. The copy is left in REHEARSE_DIR (default /tmp/gpu_check_rehearsal).
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=() LIMIT=600
while getopts "c:t:" opt; do
    case $opt in
        c) CARRY+=("$OPTARG") ;;
        t) LIMIT=$OPTARG ;;
        *) echo "usage: $0 [-c PATH]... [-t SECONDS] [COMMAND]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
CMD=${1:-bash scripts/gpu_check.sh}
[ ${#CMD} -le 2000 ] || { echo "the command is ${#CMD} characters; a device takes 2,000 at most" >&2; exit 2; }
DIR=${REHEARSE_DIR:-/tmp/gpu_check_rehearsal}
rm -rf "$DIR"
mkdir -p "$DIR/repo" "$DIR/out"
git ls-files -co --exclude-standard -z | xargs -0 cp --parents -a -t "$DIR/repo" 2> /dev/null
for p in "${CARRY[@]}"; do
    if [ ! -e "$p" ]; then echo "carry: no $p here" >&2; exit 2; fi
    cp --parents -a "$p" "$DIR/repo/"
done
if [ ${#CARRY[@]} -gt 0 ] && [ "$(du -sbc "${CARRY[@]}" | tail -n 1 | cut -f1)" -gt $((64 << 20)) ]; then
    echo "carry: $(du -shc "${CARRY[@]}" | tail -n 1 | cut -f1) in all; a device takes 64 MiB at most" >&2
    exit 2
fi
echo "rehearsal in $DIR/repo ($(du -sh "$DIR/repo" | cut -f1); carried: ${CARRY[*]:-nothing}, $(du -shc "${CARRY[@]}" 2> /dev/null | tail -n 1 | cut -f1)), limit ${LIMIT}s:"
echo "  $CMD"
start=$SECONDS
(cd "$DIR/repo" && OUT="$DIR/out" timeout -k 10 "$LIMIT" bash -c "$CMD") > "$DIR/output.txt" 2>&1
rc=$?
n=$(find "$DIR/out" -type f | wc -l)
echo "rc=$rc after $((SECONDS - start)) s$([ $rc = 124 ] && echo ' (timed out)'); the last lines:"
tail -n 12 "$DIR/output.txt" | sed 's/^/  /'
echo "\$OUT: $n files$([ "$n" -gt 8 ] && echo ' (MORE THAN THE 8 A DEVICE RETURNS)'):"
(cd "$DIR/out" && find . -type f -printf '  %P %s bytes\n' | sort)
[ "$n" -le 8 ] || exit 1
exit $rc
