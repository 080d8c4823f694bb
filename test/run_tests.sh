#!/usr/bin/env bash
# Runs every test/test_*.sh in order. Each exits 0 (pass), 77 (skipped, with a reason) or
# anything else (fail). Ends with the one summary line CI reads: "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
# OpenMP's idle threads sleep instead of spinning: tests run processes side by side (ranks,
# parallel checks, an emulated GPU's stream threads) on few cores, where a spinning team only
# takes the CPU from the others. Two emulated debug-state checks side by side: 9.6 s -> 6.6 s.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
pass=0; failn=0; skip=0; failed=()
for t in test/test_*.sh; do
    [ -n "${TEST_ONLY:-}" ] && [[ "$t" != *"$TEST_ONLY"* ]] && continue
    echo "=== $t"
    start=$(date +%s)
    bash "$t"
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "--- PASS $t (${secs}s)"
    elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "--- SKIP $t"
    else failn=$((failn+1)); failed+=("$t"); echo "--- FAIL $t (exit $rc, ${secs}s)"; fi
done
[ ${#failed[@]} -gt 0 ] && printf 'failed: %s\n' "${failed[@]}"
echo "$pass passed, $failn failed, $skip skipped"
[ $failn -eq 0 ]
