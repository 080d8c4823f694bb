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
#      And the GPU Llama 3: test_llama_debug against test/llama_reference.py's debug states,
#      the emulated trainers on a Llama against train_gpt_cpu, and their resume.
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
# Llama 3 on the GPU (llmc/llama_cuda.cuh) against test/llama_reference.py's debug states: one
# key/value head (gqa1, hs128: head size 128), as many as query heads (odd), 6/2 (gqa2), 4/2 with
# Llama 3.1's RoPE scaling (scaled); fp32, bf16, and bf16 with the tensor-core attention (-ak 1)
LLAMA_INPUTS=$INPUTS/llama
if [ ! -f "$LLAMA_INPUTS/llama_scaled_debug.bin" ]; then
    mkdir -p "$LLAMA_INPUTS"
    "$PY" test/llama_reference.py --config all --out "$LLAMA_INPUTS" > "$OUT/llama_reference.log" 2>&1 ||
        { echo "FAIL test/llama_reference.py (see $OUT/llama_reference.log)"; fail=1; }
fi
for run in "fp32 0" "bf16 0" "bf16 1"; do
    read -r prec ak <<< "$run"
    for cfg in gqa1 odd gqa2 hs128 scaled; do
        log="$OUT/llama_debug_${prec}_ak${ak}_$cfg.log"
        if build/emu/test_llama_debug_$prec "$LLAMA_INPUTS/llama_${cfg}_debug.bin" "$ak" > "$log" 2>&1 &&
               tail -n 1 "$log" | grep -q '^PASS'; then
            echo "ok   test_llama_debug $prec -ak $ak $cfg: $(grep -c '^ok' "$log") checks against PyTorch"
        else
            echo "FAIL test_llama_debug $prec -ak $ak $cfg"; grep -m 5 -E '^FAIL|ERROR|error' "$log"; fail=1
        fi
    done
done
# and under ASan+UBSan once per precision, as GPT-2's above
for run in "fp32 0 gqa1" "bf16 1 scaled"; do
    read -r prec ak cfg <<< "$run"
    log="$OUT/asan_llama_debug_$prec.log"
    if build/emu/asan/test_llama_debug_$prec "$LLAMA_INPUTS/llama_${cfg}_debug.bin" "$ak" > "$log" 2>&1 &&
           tail -n 1 "$log" | grep -q '^PASS'; then
        echo "ok   test_llama_debug $prec -ak $ak $cfg under ASan+UBSan: $(grep -c '^ok' "$log") checks against PyTorch"
    else
        echo "FAIL test_llama_debug $prec -ak $ak $cfg under ASan+UBSan"; grep -m 5 -E '^FAIL|ERROR|runtime error' "$log"; fail=1
    fi
done
# The emulated GPU trainers train a Llama as train_gpt_cpu does: a model file that ./import_hf
# made from llama_reference.py's gqa1 (GQA 4/1, untied head), llm.c's flags, every step's loss
# in main.log within gpu_check.sh's tolerances against the CPU (1e-6 relative in fp32 with
# TF32 off, 3e-2 in bf16 with -ak 0 and 1); and a run resumed from its step-4 checkpoint gives
# the same main.log and final model as one that never stopped (fp32 and bf16)
LLAMA_RUN=$OUT/llama_trainer
rm -rf "$LLAMA_RUN"; mkdir -p "$LLAMA_RUN"
if ! make -s train_gpt_cpu import_hf > "$LLAMA_RUN/build.log" 2>&1 ||
   ! "$PY" test/llama_reference.py --write-hf "$LLAMA_RUN/hf" --config gqa1 > "$LLAMA_RUN/prepare.log" 2>&1 ||
   ! "$PY" test/make_test_data.py --out "$LLAMA_RUN" --vocab 300 --train-tokens 6000 --val-tokens 2000 --seed 3 \
       >> "$LLAMA_RUN/prepare.log" 2>&1 ||
   ! ./import_hf "$LLAMA_RUN/hf/model.safetensors" "$LLAMA_RUN/model.bin" >> "$LLAMA_RUN/prepare.log" 2>&1; then
    echo "FAIL the Llama trainer inputs (see $LLAMA_RUN/build.log, $LLAMA_RUN/prepare.log)"; fail=1
else
    llama_flags=(-e "$LLAMA_RUN/model.bin" -i "$LLAMA_RUN/markov_train_*.bin" -j "$LLAMA_RUN/markov_val_*.bin" -b 4
                 -t 32 -d 256 -x 8 -l 1e-3 -u 0 -q 1.0 -c 0.0 -v 0 -s 0)
    OMP_NUM_THREADS=2 ./train_gpt_cpu "${llama_flags[@]}" -n 0 -o "$LLAMA_RUN/cpu" > "$LLAMA_RUN/cpu.stdout" 2>&1
    for run in "fp32 0 0 1e-6" "bf16 0 1 3e-2" "bf16 1 1 3e-2"; do
        read -r prec ak tf32 tol <<< "$run"
        d="$LLAMA_RUN/${prec}_ak$ak"
        ./train_gpt_${prec}_emu "${llama_flags[@]}" -n 0 -ak "$ak" -f "$tf32" -o "$d" > "$d.stdout" 2>&1
        res=$(awk -v tol="$tol" '
            FNR == NR { if ($1 ~ /^s:/) { split($2, a, ":"); ref[$1] = a[2] } next }
            $1 ~ /^s:/ { split($2, b, ":"); if (!($1 in ref)) next; n++
                         d = (b[2] - ref[$1]) / ref[$1]; if (d < 0) d = -d; if (d > m) m = d }
            END { printf "%s %d steps, max rel loss diff %.3g", (n == 8 && m <= tol) ? "ok  " : "FAIL", n, m }' \
            "$LLAMA_RUN/cpu/main.log" "$d/main.log" 2> /dev/null)
        echo "${res:0:4} Llama train_gpt_${prec}_emu -ak $ak vs train_gpt_cpu: ${res:5} (tol $tol)"
        [ "${res:0:4}" = "ok  " ] || { fail=1; tail -n 3 "$d.stdout"; }
    done
    for prec in fp32 bf16; do
        a="$LLAMA_RUN/${prec}_straight" b="$LLAMA_RUN/${prec}_resumed"
        ./train_gpt_${prec}_emu "${llama_flags[@]}" -n 4 -o "$a" > "$a.stdout" 2>&1
        ./train_gpt_${prec}_emu "${llama_flags[@]}" -n 4 -x 4 -o "$b" > "$b.1.stdout" 2>&1
        ./train_gpt_${prec}_emu "${llama_flags[@]}" -n 4 -y 1 -o "$b" > "$b.2.stdout" 2>&1
        if grep -q "at step 4" "$b.2.stdout" && cmp -s "$a/main.log" "$b/main.log" &&
               cmp -s "$a/model_00000008.bin" "$b/model_00000008.bin"; then
            echo "ok   Llama train_gpt_${prec}_emu resumed from step 4: same main.log and final model"
        else
            echo "FAIL Llama train_gpt_${prec}_emu resumed from step 4 differs"; tail -n 3 "$b.2.stdout"; fail=1
        fi
    done
fi
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
