#!/usr/bin/env bash
# Hostile inputs: every reader of outside input under libFuzzer (clang) for a bounded time.
# Targets (test/fuzz/fuzz_*.cpp): the model checkpoint, the resume state (one file and a
# checkpoint's set), data shards, the tokenizer file, the HellaSwag eval file, safetensors,
# the whole ./import_hf (GPT-2 and Llama), GPT-2's BPE vocabulary, tiktoken ranks files,
# the command line, and a GPU checkpoint's side files (train_gpt_fp8's FP8 state, -ma timed's
# matmul choices). They start from
# seeds that test/fuzz/make_seeds.cpp writes with the project's own writers.
# Readers reject bad input with fail() (llmc/utils.h), which throws under -DGPTRAIN_FUZZ;
# anything else fails this test: a crash, an ASan/UBSan report, a CHECK (it exits), a hang
# (-timeout), an allocation past -malloc_limit_mb (a size taken from a header unchecked), or
# a rejection that is not one line naming the file. The reproducer and the start of the
# report are printed. Leak detection is off: a rejection unwinds past memory that the normal
# build, which exits there, never frees.
# First, a target with a planted bug must be caught, so that a quiet run means something.
# FUZZ_SECONDS per target (default 10), FUZZ_JOBS targets at a time (default: the cores),
# FUZZ_TARGETS to run only some (e.g. "state bpe").
# Exit 0 pass, 77 skip (no clang++ or no libFuzzer, with the reason), else fail.
set -u
cd "$(dirname "$0")/.."
CXX=${FUZZ_CXX:-clang++}
SECONDS_EACH=${FUZZ_SECONDS:-10}
JOBS=${FUZZ_JOBS:-$(nproc)}
FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c++17 -DGPTRAIN_FUZZ"
TARGETS=${FUZZ_TARGETS:-"checkpoint state dataloader tokenizer evalset safetensors import_hf bpe tiktoken args side_files"}
out=test/out/fuzz
skip() { echo "SKIP: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }
rm -rf "$out"; mkdir -p "$out" build/fuzz

command -v "$CXX" > /dev/null || skip "no $CXX (apt-get install clang libclang-rt-dev)"
# libFuzzer's runtime is in libclang-rt-NN-dev, which Debian's clang only recommends
$CXX $FLAGS -o build/fuzz/fuzz_selftest test/fuzz/fuzz_selftest.cpp > "$out/selftest_build.log" 2>&1 ||
    skip "$CXX cannot link -fsanitize=fuzzer (apt-get install libclang-rt-dev): $(grep -m 1 error "$out/selftest_build.log")"

# the scratch files the targets hand to the readers live in memory, and go at the end
scratch=$(mktemp -d /dev/shm/gptrain_fuzz.XXXXXX 2> /dev/null || mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export GPTRAIN_FUZZ_DIR=$scratch
# leaks off here, not with libFuzzer's -detect_leaks=0, which also turns off -malloc_limit_mb
export ASAN_OPTIONS=detect_leaks=0

# build what changed, JOBS at a time
stale() {  # stale BINARY: older than a source it may include
    local f
    [ -x "$1" ] || return 0
    for f in test/fuzz/* llmc/*.h llmc/cpu/*.h data/*.h data/*.cpp; do [ "$f" -nt "$1" ] && return 0; done
    return 1
}
build() {  # build NAME
    stale "build/fuzz/fuzz_$1" || return 0
    $CXX $FLAGS -o "build/fuzz/fuzz_$1" "test/fuzz/fuzz_$1.cpp" > "$out/build_$1.log" 2>&1 || touch "$out/build_$1.failed"
}
throttle() { while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done; }
for t in $TARGETS; do throttle; build "$t" & done
wait
for t in $TARGETS; do
    [ -e "$out/build_$t.failed" ] && { head -n 20 "$out/build_$t.log"; die "fuzz_$t did not build"; }
done
if stale build/fuzz/make_seeds; then
    $CXX -std=c++17 -O1 -g -o build/fuzz/make_seeds test/fuzz/make_seeds.cpp || die "building make_seeds"
fi
build/fuzz/make_seeds "$out/seeds" || die "make_seeds failed"

fuzz() {  # fuzz NAME SECONDS [FLAGS]: fuzz_NAME from its seeds; the log and any reproducer go to $out/NAME/
    local name=$1 left=$2 dir=$out/$1 chunk
    shift 2
    mkdir -p "$dir/corpus"
    [ -d "$out/seeds/$name" ] && cp "$out/seeds/$name"/* "$dir/corpus/"
    # at most a minute per process, each going on from the corpus the last one grew: the memory
    # a rejection leaks (leak detection is off) never piles up to -rss_limit_mb in long runs
    while [ "$left" -gt 0 ]; do
        chunk=$(( left < 60 ? left : 60 ))
        left=$(( left - chunk ))
        "build/fuzz/fuzz_$name" "$dir/corpus" -max_total_time="$chunk" -timeout=10 -rss_limit_mb=1024 \
            -malloc_limit_mb=256 -max_len=8192 -artifact_prefix="$dir/" "$@" >> "$dir/log" 2>&1 ||
            { touch "$dir/failed"; return 1; }
    done
}
found() {  # found NAME: prints what fuzz_NAME found, if anything: the reproducer, the report
    local dir=$out/$1 repro
    repro=$(ls "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* "$dir"/slow-unit-* 2> /dev/null | head -n 1)
    [ -z "$repro" ] && [ ! -e "$dir/failed" ] && return 1
    echo "  reproducer: ${repro:-none written} (rerun: ASAN_OPTIONS=detect_leaks=0 build/fuzz/fuzz_$1 $repro)"
    echo "  report ($dir/log):"
    # what went wrong (the log less libFuzzer's progress and the stack), then where: the frames
    # in the project's code
    grep -a -v -E '^(INFO:|#[0-9]|MS:|Running|Loaded|warning: |[[:space:]]*(NEW_FUNC|#[0-9])|[[:space:]]*$)' \
        "$dir/log" | head -n 5 | sed 's/^/    /'
    grep -a -E '^[[:space:]]*#[0-9]+ .*/(llmc|data|test/fuzz)/' "$dir/log" | head -n 6 | sed 's/^ */      /'
    return 0
}

# the harness can fail: a planted out-of-bounds read behind a 4-byte magic is caught in seconds
start=$(date +%s)
fuzz selftest 60 -seed=1
if found selftest > "$out/selftest.found" && grep -a -q "heap-buffer-overflow" "$out/selftest/log"; then
    echo "ok   selftest: the planted bug was found in $(( $(date +%s) - start )) s"
else
    cat "$out/selftest.found"
    die "the planted bug in fuzz_selftest was not reported as a heap-buffer-overflow: see $out/selftest/log"
fi

start=$(date +%s)
for t in $TARGETS; do throttle; fuzz "$t" "$SECONDS_EACH" & done
wait
failures=0
for t in $TARGETS; do
    if found "$t" > "$out/$t.found"; then
        echo "FAIL $t:"
        cat "$out/$t.found"
        failures=$((failures + 1))
    else
        # each process's last line, "#123 DONE cov: 456 ft: 789 corp: 12/3456b ...": inputs run
        # (summed), edges covered and corpus size (the last)
        read -r runs cov corp < <(grep -a "DONE" "$out/$t/log" |
            sed -E 's/^#([0-9]+).*cov: ([0-9]+).*corp: ([0-9]+).*/\1 \2 \3/' | awk '{n += $1} END {print n, $2, $3}')
        printf "ok   %-11s %8s inputs in %s s, %5s edges covered, corpus %s\n" "$t" "$runs" "$SECONDS_EACH" "$cov" "$corp"
    fi
done
echo "fuzzed $(echo $TARGETS | wc -w) targets for ${SECONDS_EACH} s each, $JOBS at a time, in $(( $(date +%s) - start )) s"
[ $failures -eq 0 ] || die "$failures fuzz target(s) found a bug"
echo "PASS"
