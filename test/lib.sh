# test/lib.sh: what several test scripts share; `source test/lib.sh` after `cd` to the repo root.
# defines: PY, require_pytorch, compare_logs, expect_error, expect_damaged_resume

PY=${PYTHON:-/usr/bin/python3}

# The tests that compare against PyTorch need Debian's python3-torch (and numpy) under $PY:
# without them the test is skipped (exit 77), except in CI, where that is a failure.
require_pytorch() {
    if ! "$PY" -c "import torch, numpy" 2>/dev/null; then
        echo "PyTorch/numpy not importable by $PY (apt-get install python3-torch python3-numpy)"
        [ "${CI:-}" = "true" ] && exit 1 || exit 77
    fi
}

# compare_logs REF RUN [LOSS_TOL NORM_TOL]: two main.logs line by line: the same lines (step,
# kind), the same lr, every loss within LOSS_TOL relative (default 1e-5) and every grad norm
# within NORM_TOL (1e-4). Prints "N lines, max rel diff: loss L, norm G" (or where they part);
# the status says whether they agree.
compare_logs() {
    awk -v ref="$1" -v run="$2" -v tl="${3:-1e-5}" -v tn="${4:-1e-4}" '
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
            exit !(maxl <= tl + 0 && maxn <= tn + 0)
        }' "$1" "$2"
}

# expect_error NAME PATTERN COMMAND...: the command exits non-zero with PATTERN on exactly one line
# of its output (kept in $out/error_NAME.log); prints ok or calls the caller's bad().
expect_error() {
    local name=$1 pattern=$2 log="$out/error_${1//[^a-z0-9]/_}.log"; shift 2
    "$@" > "$log" 2>&1
    local rc=$? n
    n=$(grep -c -- "$pattern" "$log")
    if [ $rc -ne 0 ] && [ "$n" = 1 ]; then echo "ok   refuses ($name): $(grep -- "$pattern" "$log" | cut -c1-160)"
    else bad "$name: exit $rc, $n lines match '$pattern' (see $log)"; fi
}

# copy_step4 SRC DST [FILE...]: SRC's checkpoint at step 4 (model, state and side files, DONE)
# and SRC's FILEs (main.log, say) copied into DST, to resume from
copy_step4() {
    local src=$1 dst=$2 f flags=$-  # the callers' flags hold globs for the trainer (set -f)
    shift 2
    mkdir -p "$dst"
    set +f
    cp "$src"/*00000004* "$dst"/
    [[ $flags == *f* ]] && set -f
    for f in "$@"; do cp "$src/$f" "$dst"/; done
}

# expect_damaged_resume SRC FILE OFFSET CORRUPT_PATTERN COMMAND...: a checkpoint side file
# (llmc/checkpoint.h's side_file_*) beside SRC's step-4 files, first missing, then with the byte
# at OFFSET (in its body) flipped to 0xff, then its header's step word, each in a copy of those
# files ($out/resume_missing, _corrupt, _header); COMMAND (given -o DIR last) must stop in one
# line naming FILE: "cannot open", CORRUPT_PATTERN, "header checksum mismatch" after "FILE: ".
expect_damaged_resume() {
    local src=$1 file=$2 offset=$3 corrupt=$4 damage d pattern
    shift 4
    for damage in missing corrupt header; do
        d=$out/resume_$damage
        rm -rf "$d"
        copy_step4 "$src" "$d"
        if [ $damage = missing ]; then
            rm "$d/$file"
            pattern="$file: cannot open"
        elif [ $damage = corrupt ]; then
            printf '\377' | dd of="$d/$file" bs=1 seek="$offset" conv=notrunc status=none
            pattern="$file: $corrupt"
        else  # word 2, the step: 4 becomes 0xff
            printf '\377' | dd of="$d/$file" bs=1 seek=16 conv=notrunc status=none
            pattern="$file: header checksum mismatch (corrupt)"
        fi
        expect_error "$file $damage" "$pattern" "$@" -o "$d"
    done
}
