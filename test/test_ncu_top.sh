#!/usr/bin/env bash
# scripts/ncu_top.py (and scripts/ncu_profile.sh around it) without a GPU: a CSV in the
# layout of `ncu --csv --page raw --metrics gpu__time_duration.sum` is written here from a
# plain list of (kernel, nanoseconds) launches, with names that hold parentheses, template
# brackets, commas inside the quotes and every regex metacharacter. The expected totals,
# order, shares, means and escaped names are computed from that list with awk, not taken
# from the parser. Then a stand-in `ncu` (a shell script that writes the fixture files)
# drives ncu_profile.sh through both passes, the "no counters" exit and the "no ncu" exit.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
out=test/out/ncu_top
rm -rf "$out"; mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }

# the launches: name <TAB> duration in ns, in launch order (names as ncu prints them)
cat > "$out/launches.tsv" << 'EOF'
void attention_backward_dkdv_kernel<64>(__nv_bfloat16*, const float*, int, int)	1500000
nvjet_tst_128x256_64x4_2x1_v_bz_TNN	410000
classifier_kernel	2100000
gemm<float, 4>::run[2].x|y+z?	300000
void attention_backward_dkdv_kernel<64>(__nv_bfloat16*, const float*, int, int)	1520000.5
layernorm_backward_dinp_kernel	50000
nvjet_tst_128x256_64x4_2x1_v_bz_TNN	405000
{weird}$^name\back	4300000
gemm<float, 4>::run[2].x|y+z?	310000
classifier_kernel	2050000
nvjet_tst_128x256_64x4_2x1_v_bz_TNN	415000
layernorm_backward_dinp_kernel	50000
void attention_backward_dkdv_kernel<64>(__nv_bfloat16*, const float*, int, int)	1490000
gemm<float, 4>::run[2].x|y+z?	290000
nvjet_tst_128x256_64x4_2x1_v_bz_TNN	400000
layernorm_backward_dinp_kernel	50000
gemm<float, 4>::run[2].x|y+z?	305000
nvjet_tst_128x256_64x4_2x1_v_bz_TNN	420000
layernorm_backward_dinp_kernel	50000
layernorm_backward_dinp_kernel	50000
layernorm_backward_dinp_kernel	50000
EOF

# csv FILE DIVISOR UNIT: the raw page as ncu writes it to --log-file, durations / DIVISOR in UNIT
csv() {
    {
        echo "==PROF== Connected to process 4242 (/work/train_gpt_bf16)"
        echo '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum"'
        echo '"","","","","","","","","","","","'"$3"'"'
        awk -F'\t' -v div="$2" '{
            printf "\"%d\",\"4242\",\"train_gpt_bf16\",\"127.0.0.1\",\"%s\",\"1\",\"13\",\"(128, 1, 1)\",\"(32, 12, 16)\",\"0\",\"9.0\",\"%.9g\"\n", NR - 1, $1, $2 / div
        }' "$out/launches.tsv"
        # a launch ncu could not time, and the tool's closing line
        echo '"99","4242","train_gpt_bf16","127.0.0.1","classifier_kernel","1","13","(512, 1, 1)","(16384, 1, 1)","0","9.0","n/a"'
        echo "==PROF== Disconnected from process 4242"
    } > "$1"
}
csv "$out/pass1.csv" 1 nsecond

# expected, from the list: rank, launches, total ms, share %, mean us, name
awk -F'\t' '{ n[$1]++; t[$1] += $2; all += $2 }
    END { for (k in n) printf "%d\t%.6f\t%.4f\t%.4f\t%s\n", n[k], t[k] / 1e6, 100 * t[k] / all, t[k] / 1e3 / n[k], k }' \
    "$out/launches.tsv" | sort -t$'\t' -k2,2gr | awk '{ print NR "\t" $0 }' > "$out/expected.tsv"

# same_table A B: same names in the same order, numbers within 1e-6 relative
same_table() {
    awk -F'\t' 'NR == FNR { line[FNR] = $0; rows = FNR; next }
        { split(line[FNR], e, "\t")
          if ($1 != e[1] || $2 != e[2] || $6 != e[6]) { print "row " FNR ": got [" $0 "] want [" line[FNR] "]"; bad = 1 }
          for (i = 3; i <= 5; i++) { d = $i - e[i]; if (d < 0) d = -d
              if (d > 1e-6 * (e[i] < 0 ? -e[i] : e[i]) + 1e-9) { print "row " FNR " field " i ": " $i " vs " e[i]; bad = 1 } } }
        END { if (FNR != rows) { print FNR " rows, want " rows; bad = 1 } exit bad }' "$1" "$2"
}

"$PY" scripts/ncu_top.py "$out/pass1.csv" --out-dir "$out" > "$out/table.txt" || fail "exit status $?"
cat "$out/table.txt"
same_table "$out/expected.tsv" "$out/top.tsv" || fail "top.tsv differs from the expected totals"
[ "$(cut -f6 "$out/top.tsv" | head -n 1)" = "void attention_backward_dkdv_kernel<64>(__nv_bfloat16*, const float*, int, int)" ] ||
    fail "the longest kernel is not first"
awk -F'\t' '{ s += $4 } END { exit !(s > 99.999 && s < 100.001) }' "$out/top.tsv" || fail "shares do not add up to 100%"
echo "ok   totals, launches, order, shares and means per kernel (n/a row, ==PROF== lines, units row skipped)"

# the printed table: every kernel in order, long names cut to 60 characters
grep -q "^6 kernels, 21 launches, " "$out/table.txt" || fail "header line"
awk 'NR > 2 { print $1 }' "$out/table.txt" | tr '\n' ' ' | grep -q "^1 2 3 4 5 6 $" || fail "ranks 1..6 in order"
cut60=$(head -n 1 "$out/expected.tsv" | cut -f6 | cut -c1-57)...
[ ${#cut60} -eq 60 ] || fail "fixture: the first name is not long"
grep -qF "  $cut60 " "$out/table.txt" || fail "long name not cut to 60 characters"
grep -qF "  {weird}\$^name\\back " "$out/table.txt" || fail "short name printed whole"
echo "ok   printed table"

# top3.txt: the three longest as exact-match regular expressions, escaped independently here
head -n 3 "$out/expected.tsv" | cut -f6 | awk '{
    s = "^"
    for (i = 1; i <= length($0); i++) { c = substr($0, i, 1); if (index("\\.^$|?*+()[]{}", c)) s = s "\\"; s = s c }
    print s "$" }' > "$out/top3.expected"
diff "$out/top3.expected" "$out/top3.txt" || fail "top3.txt escaping"
# and each one matches its own name, and only it
paste "$out/top3.txt" <(head -n 3 "$out/expected.tsv" | cut -f6) | "$PY" -c '
import re, sys
names = [l.rstrip("\n").split("\t")[5] for l in open(sys.argv[1])]
for line in sys.stdin:
    rx, name = line.rstrip("\n").split("\t")
    hits = [n for n in names if re.search(rx, n)]
    if hits != [name]:
        sys.exit(f"{rx} matches {hits}")
' "$out/expected.tsv" || fail "an escaped name does not match exactly its kernel"
# every name of the fixture through the same escaping (regex_escape), against awk's
cut -f1 "$out/launches.tsv" | sort -u > "$out/names.txt"
awk '{ s = "^"
    for (i = 1; i <= length($0); i++) { c = substr($0, i, 1); if (index("\\.^$|?*+()[]{}", c)) s = s "\\"; s = s c }
    print s "$" }' "$out/names.txt" > "$out/escaped.expected"
"$PY" -B -c '
import sys
sys.path.insert(0, "scripts")
import ncu_top
for line in open(sys.argv[1]):
    print(ncu_top.regex_escape(line.rstrip("\n")))
' "$out/names.txt" > "$out/escaped.txt"
diff "$out/escaped.expected" "$out/escaped.txt" || fail "regex_escape of the fixture names"
echo "ok   top3.txt: exact-match regular expressions"

# microseconds in the units row: the same totals
csv "$out/pass1_us.csv" 1000 usecond
mkdir -p "$out/us"
"$PY" scripts/ncu_top.py "$out/pass1_us.csv" --out-dir "$out/us" > /dev/null || fail "usecond: exit status $?"
same_table "$out/expected.tsv" "$out/us/top.tsv" || fail "usecond units not converted"
echo "ok   units row in usecond"

# no header, no file
printf '==PROF== nothing\n"a","b"\n' > "$out/noheader.csv"
if "$PY" scripts/ncu_top.py "$out/noheader.csv" 2> "$out/err"; then fail "a CSV without header exited 0"; fi
grep -q 'no header row with "Kernel Name"' "$out/err" || fail "no-header message: $(cat "$out/err")"
if "$PY" scripts/ncu_top.py "$out/missing.csv" 2> "$out/err"; then fail "a missing file exited 0"; fi
grep -q "error: $out/missing.csv" "$out/err" || fail "missing file message"
# a units row whose duration is not a time (here a count): refused with one line, not summed as ns
csv "$out/pass1_bytes.csv" 1 byte
if "$PY" scripts/ncu_top.py "$out/pass1_bytes.csv" > /dev/null 2> "$out/err"; then fail "a unit of bytes exited 0"; fi
grep -q "unknown unit 'byte' for gpu__time_duration.sum" "$out/err" || fail "unknown-unit message: $(cat "$out/err")"
echo "ok   no header row, missing file, a duration unit that is not a time"

# one kernel's details page -> duration, SM %, memory %, DRAM %, occupancy, registers
cat > "$out/details.txt" << 'EOF'
==PROF== Connected to process 4242 (/work/train_gpt_bf16)
  attention_backward_dkdv_kernel (32, 12, 16)x(128, 1, 1), Context 1, Stream 13, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------
    Metric Name             Metric Unit Metric Value
    ----------------------- ----------- ------------
    DRAM Frequency                  Ghz         2.62
    Elapsed Cycles                cycle    2,950,123
    Memory Throughput                 %        31.20
    DRAM Throughput                   %        12.05
    Duration                         ms         1.49
    Compute (SM) Throughput           %        71.88
    ----------------------- ----------- ------------
    Section: Launch Statistics
    Registers Per Thread    register/thread          168
    Section: Memory Workload Analysis
    Memory Throughput          Gbyte/second       403.71
    Section: Occupancy
    Achieved Occupancy                        %        18.61
EOF
got=$("$PY" scripts/ncu_top.py --details "$out/details.txt")
[ "$got" = "$(printf '1.49 ms\t71.88%%\t31.20%%\t12.05%%\t18.61%%\t168')" ] || fail "details: got [$got]"
grep -v "Achieved Occupancy\|DRAM Throughput" "$out/details.txt" > "$out/details_short.txt"
got=$("$PY" scripts/ncu_top.py --details "$out/details_short.txt")
[ "$got" = "$(printf '1.49 ms\t71.88%%\t31.20%%\tn/a\tn/a\t168')" ] || fail "details, missing lines: got [$got]"
echo "ok   details page summary, n/a for missing lines"

# ---------------------------------------------------------------------------------------
# scripts/ncu_profile.sh with a stand-in ncu: it records its arguments, writes the fixture
# CSV to --log-file (pass 1), a report to --export (pass 2), the details page on --import,
# and runs the command; FAKE_NCU_REFUSE=1 answers as ncu does under gVisor.
fake="$out/fake_ncu"
cat > "$fake" << 'EOF'
#!/usr/bin/env bash
echo "$*" >> "$FAKE_NCU_CALLS"
all=" $* "
log="" export="" import=""
while [ $# -gt 0 ]; do
    case "$1" in
        --version) echo "Version 0.0 (stand-in)"; exit 0 ;;
        --log-file) log=$2; shift 2 ;;
        --export) export=$2; shift 2 ;;
        --import) import=$2; shift 2 ;;
        --csv|--force-overwrite) shift ;;
        --*|-k) shift 2 ;;
        *) break ;;
    esac
done
if [ -n "$import" ]; then
    case "$all" in *" raw "*) cat "$FAKE_NCU_RAW" ;; *) cat "$FAKE_NCU_DETAILS" ;; esac
    exit 0
fi
if [ "${FAKE_NCU_REFUSE:-0}" = 1 ]; then
    echo "==ERROR== Failed to initialize the profiler: LibraryNotLoaded" > "${log:-/dev/stdout}"
    "$@"; exit 1
fi
[ -n "$log" ] && cp "$FAKE_NCU_CSV" "$log"
[ -n "$export" ] && echo "report" > "$export.ncu-rep"
exec "$@"
EOF
chmod +x "$fake"
export FAKE_NCU_CALLS="$out/calls.txt" FAKE_NCU_CSV="$out/pass1.csv" FAKE_NCU_DETAILS="$out/details.txt"
: > "$FAKE_NCU_CALLS"
NCU="$fake" bash scripts/ncu_profile.sh "$out/prof" -- true > "$out/profile.txt" 2>&1 ||
    { cat "$out/profile.txt"; fail "ncu_profile.sh exit status $?"; }
cat "$out/profile.txt"
[ "$(grep -c -- '--export' "$FAKE_NCU_CALLS")" = 3 ] || fail "pass 2 did not run 3 times"
# launches 3, 1, 2 -> skip 1, 0, 1 (half, rounded down)
grep -- '--export' "$FAKE_NCU_CALLS" | grep -o -- '--launch-skip [0-9]*' | tr '\n' ' ' |
    grep -q "^--launch-skip 1 --launch-skip 0 --launch-skip 1 $" || fail "launch-skip: $(grep -o -- '--launch-skip [0-9]*' "$FAKE_NCU_CALLS")"
grep -qF -- '-k regex:^void attention_backward_dkdv_kernel<64>\(__nv_bfloat16\*, const float\*, int, int\)$' \
    "$FAKE_NCU_CALLS" || fail "pass 2 filter for the first kernel"
grep -qF -- '-k regex:^\{weird\}\$\^name\\back$' "$FAKE_NCU_CALLS" || fail "pass 2 filter for the second kernel"
for f in ncu_pass1.csv top3.txt ncu_1.ncu-rep ncu_1.txt ncu_3.txt ncu_summary.txt; do
    [ -s "$out/prof/$f" ] || fail "$f not written"
done
[ "$(grep -c ' | ' "$out/prof/ncu_summary.txt")" = 5 ] || fail "summary: title, header and 3 rows"
grep -q "^classifier_kernel  .* | *$(awk -F'\t' '$6 == "classifier_kernel" { printf "%.2f", $4 }' "$out/top.tsv")% | 1.49 ms .*71.88% .*18.61% .* 168$" \
    "$out/prof/ncu_summary.txt" || fail "summary row of classifier_kernel"
echo "ok   ncu_profile.sh: both passes, launch-skip, filters, summary"

: > "$FAKE_NCU_CALLS"
rc=0; FAKE_NCU_REFUSE=1 NCU="$fake" bash scripts/ncu_profile.sh "$out/prof2" -- true > "$out/refused.txt" 2>&1 || rc=$?
[ $rc -eq 77 ] || fail "counters refused: exit $rc, want 77"
grep -q "performance counters cannot be read here, no profiles (.*LibraryNotLoaded" "$out/refused.txt" || fail "refused message"
rc=0; NCU=/nonexistent/ncu bash scripts/ncu_profile.sh "$out/prof3" -- true > "$out/none.txt" 2>&1 || rc=$?
[ $rc -eq 77 ] || fail "no ncu: exit $rc, want 77"
[ "$(cat "$out/none.txt")" = "ncu: not found, no profiles" ] || fail "no ncu: $(cat "$out/none.txt")"
rc=0; NCU="$fake" bash scripts/ncu_profile.sh "$out/prof4" -- false > "$out/cmdfail.txt" 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "a failing command: exit $rc, want 1"
echo "ok   exit 77 without counters or without ncu; 1 when the command fails"

# ---------------------------------------------------------------------------------------
# a report's launches (ncu_top.py --launches), alone and through ncu_profile.sh's NCU_KERNELS:
# two launches, a units row (us), a metric missing from the second ("n/a"), numbers with
# thousands separators; the expected lines worked out by hand from the fixture's numbers
cat > "$out/raw.csv" << 'EOF'
==PROF== Connected to process
"ID","Kernel Name","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","smsp__issue_active.avg.pct_of_peak_sustained_active","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active","sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active","l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum","l1tex__data_pipe_lsu_wavefronts_mem_shared.sum","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"
"","","usecond","%","%","%","%","","","ratio","ratio","ratio","ratio"
"0","void attention_backward_dkv_wgmma_kernel<64, 1, false>(__nv_bfloat16*, const float*, int)","1,234.5","45.5","30.25","0","38.5","1,000","4,000","2.5","0.5","1.25","3"
"1","attention_backward_dq_mma_kernel<64>","800","60","n/a","55.5","0","0","2000","0.1","0.2","0.3","0.05"
EOF
{
    printf '%-60s %9s %6s %6s %7s %9s  %s\n' kernel us "SM %" issue% tensor% conflicts "stalls (warp cycles per issued instruction)"
    printf '%-60s %9s %6s %6s %7s %9s  %s\n' "void attention_backward_dkv_wgmma_kernel<64, 1, false>(__..." 1234.5 45.5 30.2 38.5 0.25 \
        "wait 3.0, barrier 2.5, math_pipe_throttle 1.2"
    printf '%-60s %9s %6s %6s %7s %9s  %s\n' "attention_backward_dq_mma_kernel<64>" 800.0 60.0 - 55.5 0.00 \
        "math_pipe_throttle 0.3, long_scoreboard 0.2, barrier 0.1"
} > "$out/launches_want.txt"
"$PY" scripts/ncu_top.py --launches "$out/raw.csv" > "$out/launches_got.txt" || fail "--launches exit status"
diff "$out/launches_want.txt" "$out/launches_got.txt" || fail "--launches lines"
: > "$FAKE_NCU_CALLS"
FAKE_NCU_RAW="$out/raw.csv" NCU_KERNELS="^attention_(backward|forward)" NCU="$fake" \
    bash scripts/ncu_profile.sh "$out/prof5" -- true > "$out/kernels.txt" 2>&1 || { cat "$out/kernels.txt"; fail "NCU_KERNELS: exit status"; }
[ "$(grep -c -- '--export' "$FAKE_NCU_CALLS")" = 1 ] || fail "NCU_KERNELS: not one profiling pass"
grep -qF -- "--set detailed --kernel-name-base function -k regex:^attention_(backward|forward) --export $out/prof5/ncu_kernels " \
    "$FAKE_NCU_CALLS" || fail "NCU_KERNELS: the profiling call: $(head -n 1 "$FAKE_NCU_CALLS")"
diff "$out/launches_want.txt" "$out/prof5/ncu_summary.txt" || fail "NCU_KERNELS: ncu_summary.txt"
[ -s "$out/prof5/ncu_kernels_details.txt" ] || fail "NCU_KERNELS: no details pages"
echo "ok   a report's launches: duration, SM, issue, tensor pipe, bank conflicts, top stalls (NCU_KERNELS too)"
echo "PASS"
