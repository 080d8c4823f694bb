#!/usr/bin/env bash
# Runs every test/test_*.sh in order. Each exits 0 (pass), 77 (skipped, with a reason) or
# anything else (fail). Ends with the one summary line CI reads: "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
# OpenMP's idle threads sleep instead of spinning: tests run processes side by side (ranks,
# parallel checks, an emulated GPU's stream threads) on few cores, where a spinning team only
# takes the CPU from the others. Two emulated debug-state checks side by side: 9.6 s -> 6.6 s.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
# The tests start over 160 mpirun jobs (106 checks of test_model_parallel, 60 jobs of four other
# tests), all on this one machine. Open MPI's start-up there is mostly discovery that one machine
# does not need: hwloc reading every PCI device's config space (a trap to the hypervisor on a
# VM) and the network transports' probes. Shared memory (vader) is the transport Open MPI picks
# on one machine anyway. 4 ranks of an empty MPI program: 0.69 s without these, 0.36 s with them
# (2026-11-29, this AMD EPYC VM); test_model_parallel 137 s -> 113 s. A value set in the
# environment is kept.
export HWLOC_COMPONENTS=${HWLOC_COMPONENTS:--pci,-linuxio}
export OMPI_MCA_pml=${OMPI_MCA_pml:-ob1} OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader}
pass=0; failn=0; skip=0; failed=()
tests=()
for t in test/test_*.sh; do
    [ -n "${TEST_ONLY:-}" ] && [[ "$t" != *"$TEST_ONLY"* ]] && continue
    tests+=("$t")
done
# The emulated GPU's programs (make emu-all: about 14 CPU-minutes of compiling, 7 minutes of a
# 2-core machine) build in the background at the lowest priority while the tests that do not
# use them run first: those leave much of two cores idle (a trainer on one thread, a Python
# reference, a wait). The tests that name an emulated program or build/emu run after the build
# has ended, in their order; test_emu's own make then finds it done (or shows its error).
# TEST_BACKGROUND_BUILD=0: no background build, every test in its order.
emu_tests=() cpu_tests=()
for t in "${tests[@]}"; do
    if grep -qE '_emu\b|build/emu/|emu-all' "$t"; then emu_tests+=("$t"); else cpu_tests+=("$t"); fi
done
bg=
if [ "${TEST_BACKGROUND_BUILD:-1}" = 1 ] && [ ${#emu_tests[@]} -gt 0 ] && [ ${#cpu_tests[@]} -gt 0 ]; then
    mkdir -p build/emu
    nice -n 19 make -s -j2 emu-all build/emu/test_offsets > build/emu/background_build.log 2>&1 &
    bg=$!
    echo "(building the emulated GPU's programs in the background: build/emu/background_build.log)"
    tests=("${cpu_tests[@]}" "${emu_tests[@]}")
fi
for t in "${tests[@]}"; do
    if [ -n "$bg" ] && [ "$t" = "${emu_tests[0]}" ]; then
        start=$(date +%s)
        bg_rc=0; wait "$bg" || bg_rc=$?
        echo "(the background build ended $(( $(date +%s) - start )) s after the tests without it, exit $bg_rc)"
        bg=
    fi
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
