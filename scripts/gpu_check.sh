#!/usr/bin/env bash
# gpu_check.sh: what a GPU session checks, in one call, on a bare GPU machine (the CUDA toolkit,
# no internet). GPU time comes in short, rare windows, so the default is a short check meant to
# take 5 minutes or less on one H100/H200, build included, so that a second call fits the same
# window; the longer parts run by name (GPU_CHECK_PARTS below).
#
# On a lent device (the device tool runs one command in a copy of the repository with $OUT an
# empty folder whose files come back, 8 at most, and carries the ignored paths it is told to):
#   here, once:  bash scripts/make_gpu_inputs.sh          (gpu_inputs/, ~22 MB; needs PyTorch)
#   device:      command "bash scripts/gpu_check.sh", carry ["gpu_inputs"], timeout_s 420
#   then, warm:  command "GPU_CHECK_PARTS=trainer bash scripts/gpu_check.sh", carry ["gpu_inputs"]
#                (a warm machine keeps the build; each call makes only what its parts lack)
# Under $OUT it writes three files as it goes, so a call cut short still returns what finished:
#   summary.txt   every line printed here, each part's wall time, then the summary
#   results.tsv   one line a check: part, check, PASS|FAIL|SKIP (TIME: a part's wall time,
#                 BENCH: a benchmark row), detail
#   logs.tar.gz   every log (not the model files), rewritten after each part
# The logs themselves go to ./gpu_check_out (GPU_CHECK_LOGDIR), emptied at the start; without
# $OUT the summary and results.tsv are written there too.
#
# The default (GPU_CHECK_PARTS=short): each part's wall time is printed. The times below were
# MEASURED on one H200 with 16 host cores, a bare machine, on 2026-11-27 (commit 3dd8cd1,
# dev/results/2026-11-27_gpu_h200_short_check.txt): 244 s in all, build included (208 s on
# 2026-11-26, before train_gpt_fp8). The large models' runs are mostly host-side random init (one
# thread, llmc/model.h's NormalRng).
#   build            only what the parts need, for the GPU found (cuda.mk asks nvidia-smi),
#                    with -j$(nproc): train_gpt_fp32/_bf16, test_gpt2_debug_*, test_llama_debug_*
#                    train_gpt_fp8 (make -f cuda.mk NO_NCCL=1), train_gpt_cpu beside them 44 s
#   pytorch          GPT-2 and Llama 3 against PyTorch's debug states (logits, loss, every
#                    gradient, 10 AdamW steps): GPT-2 small/awkward/tiny/hs64, -r 0/1/2, -ge 2,
#                    bf16 -ak 1/2 (hs64 -ak 1, and -ak 3 on a Hopper); Llama
#                    gqa1/odd/gqa2/hs128/scaled, fp32, bf16 -ak 0/1/2 (hs128 -ak 3 on a Hopper);
#                    54 small programs, 8 at a time                                        9 s
#   vs_cpu           train_gpt_fp32/_bf16 against train_gpt_cpu, 8 steps with llm.c's flags,
#                    every loss within 1e-6 (fp32) / 1e-4 (TF32) / 3e-2 (bf16, -ak 0/1/2):
#                    GPT-2 (5 runs) and Llama 3 (4 runs), side by side                     2 s
#   large            bf16, 3 steps each: llama3:l24c1024h8kv8f16384v50257 -b 8 -t 1024 (the
#                    first H200 run stopped in its backward, whose int32 offsets wrapped) and
#                    two layers of llama3.1:8b, llama3:l2c4096h32kv8f14336 (Llama 3's
#                    vocabulary) -b 1 -t 8192: finite losses and gradient norms, the first
#                    loss near ln V. 1.4B and 1.5B parameters, mostly host init,
#                    so it runs in the background, beside pytorch, vs_cpu, train_sanitizer 70 s
#   train_sanitizer  compute-sanitizer memcheck and racecheck over one short train_gpt_bf16 run
#                    of each family (2 steps of 2 micro-steps, validation, a sample, a
#                    checkpoint): four runs side by side                                  17 s
#   bench_short      bf16, T=1024, 12 steps a row, the median step after the 3rd: d12 B=64
#                    (defaults), -ak 0, -r 0 -ge 2; d48 B=8; Llama l16c2048h16kv8f8192v50257
#                    (1.2B) B=8; and d48 B=8 in train_gpt_fp8 (issue 26; a SKIP on a GPU
#                    before sm_89), at its defaults and with -fp8kt 1 -fp8kw 1 (not timed yet).
#                    On its own on the GPU. d48 and the Llama are mostly host init (the fp8 row
#                    stopped at once on 2026-11-27; about 30 s a row when it runs)  123 s (+30)
#   in all 244 s (before the second fp8 row): build 44 + large 70 (the three beside it took 28) +
#   bench_short 123 + 7.
# The device's ms/step figures and the pass/fail of each check are the point; if the window
# runs short, the parts come in that order of importance, and what finished has come back.
#
# The longer parts, by name (scripts/gpu_check_long.sh; "long" is all six, "all" is short + long):
#   dev        the dev/cuda programs against their CPU references (builds them all: minutes)
#   sanitizer  compute-sanitizer over the dev programs' --quick cases
#   trainer    resume, determinism, recompute, CUDA graphs, NCCL over one rank, 2 ranks at
#              ZeRO 0/1/2, memcheck with a resume, generate against ./generate (GPT-2 and
#              Llama), NVML energy, transformers loading ./export_hf's output (built with NCCL
#              when nccl.h is there: the trainers are rebuilt when that changes)
#   faults     test/test_faults.sh and test/test_kill_trials.sh on both GPU trainers
#   bench      the full throughput table: d12 B=4..64 with each option, d24, d48, d12 fp32
#   profile    Nsight Compute: the d12 step's kernels by GPU time, the top three in detail
#
# NCCL: the default runs one process on one GPU, so it builds without NCCL (NO_NCCL=1), as the
# first H200 run did in 37 s: nothing in it calls a collective, and a libnccl that does not
# match the header cannot fail the window's only build. The trainer part is where NCCL is
# checked (one rank through NCCL, two GPUs where there are two); it builds with NCCL.
#
# Environment knobs:
#   GPU_CHECK_PARTS=short    the parts, by the names above ("short", "long", "all" stand for sets)
#   GPU_CHECK_JOBS=16        parallel make and check jobs (default: nproc)
#   GPU_CHECK_TIMEOUT=300    seconds per dev program
#   GPU_CHECK_BUILD_TIMEOUT  seconds the build may take (default 300; 1800 with dev programs)
#   GPU_CHECK_SANITIZER=0    drop both sanitizer parts; =only: the dev programs' sanitizer part alone
#   GPU_CHECK_ONLY="attention matmul"   only these dev programs
#   GPU_CHECK_NCCL=auto      1/0: build the trainers with/without NCCL (auto: with, for trainer)
#   GPU_CHECK_SHORT_STEPS=12 steps per bench_short row
#   GPU_CHECK_BENCH_STEPS=8  optimizer steps per bench row (the first is not timed)
#   GPU_INPUTS=gpu_inputs    PyTorch debug states of both families, test and bench shards (see
#                            scripts/make_gpu_inputs.sh); made here if missing and torch imports
#   GPU_CHECK_LOGDIR=...     where the logs go (default ./gpu_check_out)
#   GPU_CHECK_EMU=1          the same parts on the emulated GPU (llmc/emu, emu.mk): the *_emu
#                            binaries. Where a shape cannot run on a CPU it runs a small one
#                            through the same code and says so (large: small Llamas; bench_short:
#                            tiny models, whose table is the check); compute-sanitizer's
#                            counterparts are EMU_RACECHECK=1 (every kernel in two thread orders)
#                            and AddressSanitizer+UBSan builds; the dev programs run with ASan+UBSan
#                            at --quick in two thread orders; NVML, ncu and the long bench SKIP.
#                            test/test_emu.sh runs "short dev trainer faults" so in `make test`.
# Exit status: 0 iff everything built and every check passed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LOGDIR="${GPU_CHECK_LOGDIR:-$ROOT/gpu_check_out}"
# a folder this script made (it holds our marker) is emptied, so the archive holds this call's logs
if [ -f "$LOGDIR/.gpu_check_logs" ]; then rm -rf "$LOGDIR"; fi
if [ ! -d "$LOGDIR" ]; then mkdir -p "$LOGDIR" && touch "$LOGDIR/.gpu_check_logs"; fi
OUTDIR="${OUT:-$LOGDIR}"
mkdir -p "$OUTDIR"
SUMMARY="$OUTDIR/summary.txt"
RESULTS="$OUTDIR/results.tsv"
: > "$SUMMARY"
: > "$RESULTS"
JOBS="${GPU_CHECK_JOBS:-$(nproc)}"
TIMEOUT="${GPU_CHECK_TIMEOUT:-300}"
SANITIZER="${GPU_CHECK_SANITIZER:-1}"
SHORT_STEPS="${GPU_CHECK_SHORT_STEPS:-12}"
SHORT_PARTS="pytorch vs_cpu large train_sanitizer bench_short"
LONG_PARTS="dev sanitizer trainer faults bench profile"
PARTS=" ${GPU_CHECK_PARTS:-short} "
PARTS=${PARTS/ all / $SHORT_PARTS $LONG_PARTS }
PARTS=${PARTS/ short / $SHORT_PARTS }
PARTS=${PARTS/ long / $LONG_PARTS }
[ "$SANITIZER" = "0" ] && PARTS=${PARTS/ sanitizer / } && PARTS=${PARTS/ train_sanitizer / }
[ "$SANITIZER" = "only" ] && PARTS=" sanitizer "
for p in $PARTS; do
    if [[ " $SHORT_PARTS $LONG_PARTS " != *" $p "* ]]; then
        echo "gpu_check.sh: unknown part '$p' in GPU_CHECK_PARTS (known: short long all $SHORT_PARTS $LONG_PARTS)" >&2
        exit 2
    fi
done
has_part() { [[ "$PARTS" == *" $1 "* ]]; }
GPU_INPUTS="${GPU_INPUTS:-gpu_inputs}"
EMU="${GPU_CHECK_EMU:-0}"
# what a binary is called, and how long a run may take: the emulated GPU runs a kernel's
# threads one after another on the CPU, so its runs get longer limits
if [ "$EMU" = 1 ]; then
    # (the debug-state test unsanitised, for time: the train_sanitizer part runs its ASan build)
    SFX=_emu DEV_DIR=build/emu/asan/cuda DEV_ARGS=--quick DEBUG_DIR=build/emu SLOW=4
    NSTEPS=4 NEVERY=2 NRESUME=2  # the trainer runs: steps, checkpoint every, resumed from
    export EMU_DEVICES=2  # two emulated devices, so two ranks can each have one (NCCL)
    # OpenMP's idle threads sleep instead of spinning: the emulated programs run two at a
    # time and each has its stream threads besides (a spinning team cost a third of the time)
    export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
else
    SFX="" DEV_DIR=build/cuda DEV_ARGS="" DEBUG_DIR=build SLOW=1
    NSTEPS=30 NEVERY=5 NRESUME=10
fi
export PATH="$PATH:/usr/local/cuda/bin"
FAILED=0
BENCH_ROWS=()
START=$SECONDS
source scripts/gpu_check_lib.sh
source scripts/gpu_check_long.sh

# ---------------------------------------------------------------------------------------
say "== gpu_check $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
say "commit: $(git rev-parse HEAD 2>/dev/null || echo 'not a git checkout') ($(git status --porcelain 2>/dev/null | wc -l) files modified or untracked)"
if [ "$EMU" = 1 ]; then
    say "device: the emulated GPU (llmc/emu: the CUDA sources built for this CPU, an H100 SXM's properties; not a GPU)"
elif command -v nvidia-smi > /dev/null; then
    say "device: $(nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader | head -n1)"
    nvidia-smi > "$LOGDIR/nvidia-smi.txt" 2>&1
else
    say "device: nvidia-smi not found"
fi
# the checks run several processes on the GPU at once, which an exclusive compute mode refuses
GPU_SHARED=1
if [ "$EMU" != 1 ] && command -v nvidia-smi > /dev/null; then
    mode=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2> /dev/null | head -n1)
    if [ -n "$mode" ] && [ "$mode" != Default ]; then
        GPU_SHARED=0
        say "compute mode $mode: one process at a time on the GPU (slower)"
    fi
fi
say "nvcc: $(nvcc --version 2>/dev/null | tail -n1 || echo 'not found')"
say "host: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo)"
say "parts:$PARTS"
say "logs: $LOGDIR$([ "$OUTDIR" != "$LOGDIR" ] && echo ", summary.txt, results.tsv and logs.tar.gz in $OUTDIR")"

# ---------------------------------------------------------------------------------------
# The build: what the parts run, nothing else. On a GPU, cuda.mk alone (no MPI: one process)
# for the CUDA programs, and the Makefile for the CPU ones at the same time (nvcc runs one
# job a program, so most cores are free); on the emulated GPU, the Makefile's emu.mk targets.
CUDA_TARGETS=() CPU_TARGETS=()
if has_part pytorch; then
    CUDA_TARGETS+=(build/test_gpt2_debug_fp32 build/test_gpt2_debug_bf16 build/test_llama_debug_fp32 build/test_llama_debug_bf16)
fi
if has_part vs_cpu; then CUDA_TARGETS+=(train_gpt_fp32 train_gpt_bf16); CPU_TARGETS+=(train_gpt_cpu); fi
for p in large train_sanitizer bench_short profile; do has_part $p && CUDA_TARGETS+=(train_gpt_bf16); done
for p in trainer faults bench; do has_part $p && CUDA_TARGETS+=(train_gpt_fp32 train_gpt_bf16); done
for p in bench_short bench; do has_part $p && CUDA_TARGETS+=(train_gpt_fp8); done  # their FP8 rows
if has_part trainer; then
    CUDA_TARGETS+=(generate_fp32 generate_bf16)
    CPU_TARGETS+=(generate import_hf export_hf build/test_hf_logits)
fi
if has_part dev || has_part sanitizer; then CUDA_TARGETS+=(cuda-dev); fi
if [ "$EMU" = 1 ]; then
    if has_part train_sanitizer; then  # racecheck's counterpart: the trainer's race-check build; memcheck's:
        # the ASan+UBSan debug-state programs
        CUDA_TARGETS+=(build/race/train_gpt_bf16 build/test_gpt2_debug_fp32 build/test_gpt2_debug_bf16 build/test_llama_debug_fp32
                       build/test_llama_debug_bf16 build/asan/test_gpt2_debug_fp32 build/asan/test_gpt2_debug_bf16
                       build/asan/test_llama_debug_fp32 build/asan/test_llama_debug_bf16)
    fi
    mapfile -t CUDA_TARGETS < <(printf '%s\n' "${CUDA_TARGETS[@]}" |
        sed -E 's#^(train_gpt|generate)_(fp32|bf16|fp8)$#\1_\2_emu#; s#^build/#build/emu/#; s#^cuda-dev$#emu-dev#')
fi
mapfile -t CUDA_TARGETS < <(printf '%s\n' "${CUDA_TARGETS[@]}" | awk 'NF && !seen[$0]++')
mapfile -t CPU_TARGETS < <(printf '%s\n' "${CPU_TARGETS[@]}" | awk 'NF && !seen[$0]++')
# NCCL only for the trainer part (see the header); a trainer built the other way is rebuilt
WANT_NCCL=0
NVCC_BIN=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ "${GPU_CHECK_NCCL:-auto}" = 1 ] || { [ "${GPU_CHECK_NCCL:-auto}" = auto ] && has_part trainer; }; then
    [ -f "$(dirname "$NVCC_BIN")/../include/nccl.h" ] || [ -f /usr/include/nccl.h ] && WANT_NCCL=1
fi
NCCL_ARGS=()
[ $WANT_NCCL = 1 ] || NCCL_ARGS=(NO_NCCL=1)
# (a hung build must not take the window: the short parts' build took 30 s on an H200
# machine, every dev program a few minutes)
BUILD_TIMEOUT=300
if has_part dev || has_part sanitizer || [ "$EMU" = 1 ]; then BUILD_TIMEOUT=1800; fi
BUILD_TIMEOUT=${GPU_CHECK_BUILD_TIMEOUT:-$BUILD_TIMEOUT}
t0=$SECONDS
build_ok=1
if [ "$EMU" = 1 ]; then
    say "== build (make ${CUDA_TARGETS[*]}$([ ${#CPU_TARGETS[@]} -gt 0 ] && echo " ${CPU_TARGETS[*]}") -j$JOBS)"
    timeout "$BUILD_TIMEOUT" make -k "${CUDA_TARGETS[@]}" "${CPU_TARGETS[@]}" -j"$JOBS" > "$LOGDIR/build.log" 2>&1 ||
        build_ok=0
else
    for b in train_gpt_fp32 train_gpt_bf16; do
        [ -x "$b" ] || continue
        linked=0
        grep -q libnccl <<< "$(ldd "$b" 2> /dev/null)" && linked=1  # not a pipe: see has_nccl
        if [ $linked != $WANT_NCCL ]; then say "($b was built $([ $linked = 1 ] || echo without) with NCCL: rebuilt)"; rm -f "$b"; fi
    done
    say "== build (make -f cuda.mk ${NCCL_ARGS[*]} ${CUDA_TARGETS[*]} -j$JOBS$([ ${#CPU_TARGETS[@]} -gt 0 ] && echo "; make ${CPU_TARGETS[*]} -j$JOBS"))"
    cpu_pid=""
    if [ ${#CPU_TARGETS[@]} -gt 0 ]; then
        timeout "$BUILD_TIMEOUT" make -k "${CPU_TARGETS[@]}" -j"$JOBS" > "$LOGDIR/build_cpu.log" 2>&1 &
        cpu_pid=$!
    fi
    if [ ${#CUDA_TARGETS[@]} -gt 0 ]; then
        timeout "$BUILD_TIMEOUT" make -k -f cuda.mk "${NCCL_ARGS[@]}" "${CUDA_TARGETS[@]}" -j"$JOBS" > "$LOGDIR/build.log" 2>&1 || build_ok=0
    fi
    if [ -n "$cpu_pid" ]; then wait "$cpu_pid" || build_ok=0; fi
fi
if [ $build_ok = 1 ]; then
    say "build: ok ($((SECONDS - t0)) s)"
else
    say "build: FAILED ($((SECONDS - t0)) s), see build.log$([ "$EMU" = 1 ] || echo " and build_cpu.log"); running what was built"
    cat "$LOGDIR"/build*.log | grep -E "error|Error" | head -n 20 | tee -a "$SUMMARY"
    FAILED=1
fi
printf '%s\t%s\t%s\t%s\n' build "(wall time)" TIME "$((SECONDS - t0)) s" >> "$RESULTS"
printf '%s\t%s\t%s\t%s\n' build build "$([ $build_ok = 1 ] && echo PASS || echo FAIL)" "${CUDA_TARGETS[*]} ${CPU_TARGETS[*]}" >> "$RESULTS"
archive_logs

# ---------------------------------------------------------------------------------------
# The short parts. large is mostly the host's random init of its two models, one thread each,
# so it runs in the background beside the small checks (which use the GPU little, and its
# memory less); bench_short waits for it, to have the GPU to itself.
for p in $SHORT_PARTS trainer faults; do has_part $p && { ensure_inputs; break; }; done
large_pid=""
if has_part large; then
    if [ $GPU_SHARED = 1 ] && { has_part pytorch || has_part vs_cpu || has_part train_sanitizer; }; then
        say "(part large runs in the background, beside pytorch, vs_cpu and train_sanitizer)"
        run_part large &
        large_pid=$!
    else
        run_part large
    fi
fi
for p in pytorch vs_cpu train_sanitizer; do has_part $p && run_part $p; done
[ -n "$large_pid" ] && wait "$large_pid"
has_part bench_short && run_part bench_short

# ---------------------------------------------------------------------------------------
# The longer parts. dev and sanitizer: the dev/cuda programs, each against its CPU reference,
# then under compute-sanitizer; their results are tallied in the summary below.
if has_part dev || has_part sanitizer; then export PART=dev; dev_t0=$SECONDS; fi
# the dev programs: PASS/FAIL lines per check, RESULT lines per benchmark
has_part dev && say "== dev/cuda programs (timeout ${TIMEOUT}s each)"
PROGRAMS=()
for src in dev/cuda/*.cu; do
    name=$(basename "$src" .cu)
    if [ -n "${GPU_CHECK_ONLY:-}" ] && ! [[ " $GPU_CHECK_ONLY " == *" $name "* ]]; then continue; fi
    PROGRAMS+=("$name")
done
declare -A STATUS
# run_dev NAME PREC: one program, its output to NAME_PREC.log, "rc seconds" to NAME_PREC.rc
run_dev() {
    local t0 rc
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout "$TIMEOUT" "$DEV_DIR/$1_$2" $DEV_ARGS > "$LOGDIR/$1_$2.log" 2>&1
    rc=$?
    # emulated: then its race-check build under EMU_RACECHECK=1, in reverse order (the log keeps
    # the first run's checks, and the race check's last lines if it fails)
    if [ "$EMU" = 1 ] && [ $rc -eq 0 ]; then
        # shellcheck disable=SC2086
        EMU_RACECHECK=1 EMU_ORDER=reverse timeout "$TIMEOUT" "build/emu/race/cuda/$1_$2" $DEV_ARGS \
            > "$LOGDIR/$1_$2.race.log" 2>&1
        rc=$?
        [ $rc -eq 0 ] || tail -n 3 "$LOGDIR/$1_$2.race.log" >> "$LOGDIR/$1_$2.log"
    fi
    echo "$rc $(( $(date +%s) - t0 ))" > "$LOGDIR/$1_$2.rc"
}
# On the emulated GPU a program runs its kernels on one host thread (EMU_RACECHECK), so they
# run $JOBS at a time; on a GPU one after another, so that the timings are the device's alone.
if has_part dev && [ "$EMU" = 1 ]; then
    export -f run_dev
    export DEV_DIR DEV_ARGS EMU TIMEOUT LOGDIR
    for name in "${PROGRAMS[@]}"; do
        for prec in fp32 bf16; do [ -x "$DEV_DIR/${name}_${prec}" ] && echo "$name $prec"; done
    done | xargs -P "$JOBS" -L 1 bash -c 'run_dev "$0" "$1"'
fi
for name in "${PROGRAMS[@]}"; do
    has_part dev || break
    for prec in fp32 bf16; do
        bin="$DEV_DIR/${name}_${prec}"
        log="$LOGDIR/${name}_${prec}.log"
        if [ ! -x "$bin" ]; then
            STATUS["$name $prec"]="NOT BUILT"
            say "$(printf '%-12s %-5s NOT BUILT' "$name" "$prec")"
            FAILED=1
            continue
        fi
        [ "$EMU" = 1 ] || run_dev "$name" "$prec"
        read -r rc secs < "$LOGDIR/${name}_${prec}.rc"
        npass=$(grep -c '^PASS' "$log")
        nfail=$(grep -c '^FAIL' "$log")
        if [ $rc -eq 0 ] && [ "$nfail" -eq 0 ]; then
            STATUS["$name $prec"]="PASS"
        elif [ $rc -eq 124 ]; then
            STATUS["$name $prec"]="TIMEOUT"
            FAILED=1
        else
            STATUS["$name $prec"]="FAIL"
            FAILED=1
        fi
        say "$(printf '%-12s %-5s %-8s %3d passed %3d failed  rc=%d  %ds' "$name" "$prec" "${STATUS["$name $prec"]}" "$npass" "$nfail" "$rc" "$secs")"
        grep '^FAIL' "$log" | head -n 5 | sed 's/^/    /' | tee -a "$SUMMARY"
        if [ $rc -ne 0 ] && [ "$nfail" -eq 0 ]; then tail -n 5 "$log" | sed 's/^/    /' | tee -a "$SUMMARY"; fi
    done
done

# ---------------------------------------------------------------------------------------
# compute-sanitizer on the small cases: out-of-bounds and misaligned accesses everywhere,
# shared-memory races and barrier misuse in the kernels that tile through shared memory
if has_part sanitizer; then
    say "== compute-sanitizer (--quick cases)"
    if command -v compute-sanitizer > /dev/null; then
        for name in "${PROGRAMS[@]}"; do
            for prec in fp32 bf16; do
                bin="build/cuda/${name}_${prec}"
                [ -x "$bin" ] || continue
                tools="memcheck"
                case "$name" in attention|attention_kv|layernorm|classifier|global_norm|fp8) tools="memcheck racecheck synccheck" ;; esac
                for tool in $tools; do
                    log="$LOGDIR/sanitizer_${tool}_${name}_${prec}.log"
                    timeout "$TIMEOUT" compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin" --quick > "$log" 2>&1
                    rc=$?
                    if [ $rc -eq 0 ]; then r="ok"; else r="FAIL (rc=$rc)"; FAILED=1; fi
                    say "$(printf '%-12s %-5s %-10s %s' "$name" "$prec" "$tool" "$r")"
                    [ $rc -ne 0 ] && grep -m 5 -E "=========.*(Error|error|Invalid|Race|race)" "$log" | sed 's/^/    /' | tee -a "$SUMMARY"
                done
            done
        done
    else
        say "compute-sanitizer not found: skipped"
    fi
fi
if has_part dev || has_part sanitizer; then
    say "-- part dev$(has_part sanitizer && echo ' and sanitizer'): $((SECONDS - dev_t0)) s"
    printf '%s\t%s\t%s\t%s\n' dev "(wall time)" TIME "$((SECONDS - dev_t0)) s" >> "$RESULTS"
    archive_logs
fi
for p in trainer faults bench profile; do has_part $p && run_part $p; done

# ---------------------------------------------------------------------------------------
say ""
say "== summary ($((SECONDS - START)) s in all)"
has_part dev && say "$(printf '%-12s %-5s %-8s' op precision result)"
for name in "${PROGRAMS[@]}"; do
    has_part dev || break
    for prec in fp32 bf16; do
        say "$(printf '%-12s %-5s %-8s' "$name" "$prec" "${STATUS["$name $prec"]:-?}")"
    done
done
has_part dev && say ""
# every part's wall time and tally, from results.tsv (the parts that ran in the background
# or side by side wrote there), then every check that failed once more
say "$(printf '%-16s %6s %6s %6s %6s' part seconds passed failed skipped)"
awk -F'\t' '$3 == "TIME" { t[$1] = $4 + 0; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
            $3 == "PASS" || $3 == "BENCH" { p[$1]++ } $3 == "FAIL" { f[$1]++ } $3 == "SKIP" { s[$1]++ }
            END { for (i = 1; i <= n; i++) { k = order[i]; printf "%-16s %6d %6d %6d %6d\n", k, t[k], p[k], f[k], s[k] } }' \
    "$RESULTS" | tee -a "$SUMMARY"
if grep -q $'\tFAIL\t' "$RESULTS"; then
    FAILED=1
    say ""
    say "failed:"
    awk -F'\t' '$3 == "FAIL" { printf "%-16s %-40s %s\n", $1, $2, $4 }' "$RESULTS" | cut -c1-200 | tee -a "$SUMMARY"
fi
say ""
has_part dev && say "$(printf '%-40s %-5s %-6s %12s %s' benchmark prec result value 'of ceiling')"
for name in "${PROGRAMS[@]}"; do
    has_part dev || break
    for prec in fp32 bf16; do
        log="$LOGDIR/${name}_${prec}.log"
        [ -f "$log" ] || continue
        # each figure as a share of this device's ceiling in the same unit (dev/cuda/ceilings.cu:
        # the copy kernel for GB/s, the 8192^3 cuBLASLt matmul for TFLOP/s)
        ceil_gbs=$(awk '$1 == "RESULT" && $2 == "ceiling:copy" { print $5 }' "$LOGDIR/ceilings_${prec}.log" 2> /dev/null)
        ceil_tflops=$(awk '$1 == "RESULT" && $2 == "ceiling:matmul" { print $5 }' "$LOGDIR/ceilings_${prec}.log" 2> /dev/null)
        # RESULT <op:what> <precision> <PASS|FAIL> <value> <unit>
        grep '^RESULT ' "$log" | while read -r _ op p r v u; do
            c=$ceil_gbs
            [ "$u" = "TFLOP/s" ] && c=$ceil_tflops
            share=""
            [ -n "$c" ] && share=$(awk -v v="$v" -v c="$c" 'BEGIN { if (c > 0) printf "%.1f%%", 100 * v / c }')
            say "$(printf '%-40s %-5s %-6s %8s %-8s %s' "$op" "$p" "$r" "$v" "$u" "$share")"
        done
    done
done
if [ ${#BENCH_ROWS[@]} -gt 0 ]; then
    say ""
    say "$(printf '%-14s %-5s %-4s %10s %12s %8s %10s %9s' model prec B ms/step tok/s MFU 'peak MiB' J/token)"
    for line in "${BENCH_ROWS[@]}"; do say "$line"; done
fi
say ""
# the figures next to the newest committed run on this GPU model (dev/results/), drops of
# more than 3% flagged; compared, not asserted
if command -v python3 > /dev/null; then
    python3 scripts/bench_compare.py "$SUMMARY" dev/results > "$LOGDIR/compare.txt" 2>&1
    tee -a "$SUMMARY" < "$LOGDIR/compare.txt"
    say ""
fi
if [ "$FAILED" -eq 0 ]; then
    say "gpu_check: ALL PASSED (logs in $LOGDIR)"
else
    say "gpu_check: FAILURES (logs in $LOGDIR)"
fi
exit "$FAILED"
