#!/usr/bin/env bash
# The GPU programs on the emulated GPU (llmc/emu, emu.mk): the same CUDA sources, built for
# this CPU and run with CUDA's execution model. Two halves:
#   1. the emulator's own tests, each against a reference written from NVIDIA's documents:
#      the execution model and runtime (test_emu_runtime, plus the cases that must stop the
#      program: a deadlock, a lane that exited before a shuffle, a race the two-order check
#      finds), PTX's fragment layouts (test_emu_ptx), cuBLASLt against a naive product
#      (test_emu_cublaslt), NCCL over 1, 2 and 4 processes (test_emu_nccl); all with ASan+UBSan
#   2. scripts/gpu_check.sh's dev, trainer and faults parts with GPU_CHECK_EMU=1: every
#      dev/cuda program at its small (--quick) sizes against the CPU reference, with ASan+UBSan
#      and every kernel run in two thread orders; test_gpt2_debug against the PyTorch debug
#      states (fp32, bf16, -ak 0/1, -ge 1/2, -r 0/1/2); the trainers' resume, determinism
#      across thread orders, recompute, -cg 1, NCCL over one rank, 2 ranks at ZeRO 0/1/2
#      (sharing a GPU, and on two emulated GPUs through the emulated NCCL) against 1 rank;
#      generate against the CPU's; test_faults and test_kill_trials on the emulated trainers.
# EMU_CHECK_PARTS overrides the gpu_check parts (default "dev trainer faults").
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
OUT=build/emu/check
mkdir -p "$OUT"
fail=0

echo "building the emulated programs (make emu-all)"
if ! make -s -j2 emu-all > "$OUT/build.log" 2>&1; then
    grep -E "error|Error" "$OUT/build.log" | head -n 20
    echo "FAIL: make emu-all (see $OUT/build.log)"
    exit 1
fi

# 1. the emulator's own tests
for t in runtime ptx cublaslt nccl; do
    bin=build/emu/test_emu_$t
    if "$bin" > "$OUT/test_emu_$t.log" 2>&1; then
        echo "ok   test_emu_$t: $(grep -c '^PASS' "$OUT/test_emu_$t.log") checks"
    else
        echo "FAIL test_emu_$t"
        grep -m 10 -E '^FAIL|emulated GPU' "$OUT/test_emu_$t.log"
        fail=1
    fi
done
# the runtime tests once more with the threads in shuffled and reverse order
for order in reverse shuffle:7; do
    if EMU_ORDER=$order build/emu/test_emu_runtime > "$OUT/test_emu_runtime_$order.log" 2>&1; then
        echo "ok   test_emu_runtime with EMU_ORDER=$order"
    else
        echo "FAIL test_emu_runtime with EMU_ORDER=$order"; fail=1
    fi
done
# what must stop a program, with the emulator's message naming it
expect_stop() {  # NAME PATTERN ENV...
    local name=$1 pattern=$2
    shift 2
    env "$@" build/emu/test_emu_runtime --fail "$name" > "$OUT/fail_$name.log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] && grep -q "$pattern" "$OUT/fail_$name.log"; then
        echo "ok   stops: $(grep -m 1 -o "$pattern.*" "$OUT/fail_$name.log" | cut -c1-110)"
    else
        echo "FAIL the $name case: rc=$rc, $(tail -n 1 "$OUT/fail_$name.log")"; fail=1
    fi
}
expect_stop deadlock "deadlock: "
expect_stop exited_lane "exited while lanes of its warp wait"
expect_stop race "race: kernel racy_sum_kernel" EMU_RACECHECK=1

# 2. the GPU checks on the emulated GPU
if ! "$PY" -c "import torch" 2> /dev/null; then
    echo "no PyTorch under $PY (scripts/install_deps.sh --test installs it): the emulated GPU checks need its debug states"
    exit 77
fi
INPUTS=build/emu/gpu_inputs
if [ ! -f "$INPUTS/pytorch/small_debug.bin" ] || [ ! -f "$INPUTS/resume/model.bin" ]; then
    PYTHON="$PY" bash scripts/make_gpu_inputs.sh "$INPUTS" > "$OUT/make_gpu_inputs.log" 2>&1 ||
        { echo "FAIL scripts/make_gpu_inputs.sh (see $OUT/make_gpu_inputs.log)"; exit 1; }
fi
# the whole model under ASan+UBSan: the PyTorch debug states once per precision (bf16 with
# the tensor-core attention), every launcher at the trainer's shapes
for run in "fp32 0" "bf16 1"; do
    read -r prec ak <<< "$run"
    log="$OUT/asan_debug_$prec.log"
    if build/emu/asan/test_gpt2_debug_$prec "$INPUTS/pytorch/small_model.bin" "$INPUTS/pytorch/small_debug.bin" 1 "$ak" 1 \
           > "$log" 2>&1 && tail -n 1 "$log" | grep -q '^PASS'; then
        echo "ok   test_gpt2_debug $prec -ak $ak under ASan+UBSan: $(grep -c '^ok' "$log") checks against PyTorch"
    else
        echo "FAIL test_gpt2_debug $prec -ak $ak under ASan+UBSan"; grep -m 5 -E '^FAIL|ERROR|runtime error' "$log"; fail=1
    fi
done
GPU_CHECK_EMU=1 GPU_CHECK_PARTS="${EMU_CHECK_PARTS:-dev trainer faults}" GPU_INPUTS="$INPUTS" OUT="$OUT/gpu_check" \
    GPU_CHECK_JOBS=2 PYTHON="$PY" bash scripts/gpu_check.sh > "$OUT/gpu_check.log" 2>&1
rc=$?
grep -E ' (PASS|FAIL|SKIP|TIMEOUT|NOT BUILT) ' "$OUT/gpu_check/summary.txt" |
    grep -v '^== summary' | cut -c1-160 || true
if [ $rc -ne 0 ]; then
    echo "FAIL scripts/gpu_check.sh on the emulated GPU (rc=$rc; see $OUT/gpu_check/summary.txt)"
    grep -E ' FAIL ' "$OUT/gpu_check/summary.txt" | head -n 20
    fail=1
fi
[ $fail -eq 0 ] && echo "emulated GPU: all checks passed"
exit $fail
