#!/usr/bin/env bash
# The GPU programs on the emulated GPU (llmc/emu, emu.mk): the same CUDA sources, built for
# this CPU and run with CUDA's execution model. Two halves:
#   1. the emulator's own tests, each against a reference written from NVIDIA's documents:
#      the execution model and runtime (test_emu_runtime, plus the cases that must stop the
#      program: a deadlock, a lane that exited before a shuffle), PTX's fragment layouts
#      (test_emu_ptx), cuBLASLt against a naive product (test_emu_cublaslt; its several answers:
#      test_emu_cublaslt_algos), NCCL over 1, 2 and
#      4 processes (test_emu_nccl), the slips issue 22 found (test_emu_semantics: min/max beyond
#      int, __activemask, shuffles with a width, a capture forked to a second stream and never
#      joined), the FP8 types against the OCP FP8 specification and, bit for bit, NVIDIA's own
#      cuda_fp8.h conversions (test_emu_fp8), cuBLASLt's FP8 matmul (scales, amax, saturation,
#      epilogues) against a double product of inputs NVIDIA's table decodes and the refusals of
#      what FP8 cannot take (test_emu_fp8_gemm); all with ASan+UBSan. The race check (EMU_RACECHECK=1, in
#      the race-check builds of build/emu/race/): test_emu_runtime and the corrected programs of
#      test_emu_races pass under it in three thread orders, and it stops each planted bug of
#      test_emu_races (a cp.async issued before the barrier that frees its stage, or its tile
#      read with no barrier after the wait, a plain +=
#      by many threads, a cross-warp write-after-read across a shuffle, a kernel and a copy
#      reading another stream's output without cudaStreamWaitEvent) and test_emu_runtime's race;
#      the first also shows as wrong results where copies land early (EMU_ORDER=reverse); and a
#      cp.async or an ldmatrix outside the block's shared memory stops there, in every build
#   2. scripts/gpu_check.sh's dev, trainer and faults parts with GPU_CHECK_EMU=1: every
#      dev/cuda program at its small (--quick) sizes against the CPU reference, with ASan+UBSan,
#      then its race-check build under EMU_RACECHECK=1 in reverse order; test_gpt2_debug against the PyTorch debug
#      states (fp32, bf16, -ak 0/1, -ge 1/2, -r 0/1/2); the trainers' resume, determinism
#      across thread orders, recompute, -cg 1, NCCL over one rank, 2 ranks at ZeRO 0/1/2
#      (sharing a GPU, and on two emulated GPUs through the emulated NCCL) against 1 rank;
#      generate against the CPU's; test_faults and test_kill_trials on the emulated trainers.
#      Before them, gpu_check.sh's short default, the one a GPU window runs first (pytorch,
#      vs_cpu, large, train_sanitizer, bench_short): test_gpt2_debug and test_llama_debug
#      against the PyTorch debug states of both families, both trainers and both families
#      against train_gpt_cpu, small Llamas through the large shapes' code, EMU_RACECHECK=1 over
#      a short run of each family and the debug-state programs under ASan+UBSan (its sanitizers'
#      stand-ins), the benchmark table produced; and that it leaves at most 8 files in $OUT, as
#      a device returns. Here too, the GPU Llama 3: the emulated trainers on an imported Llama
#      against train_gpt_cpu, their resume, recompute (-r 1, -r 2: -r 0's bits, the planned
#      drop of the peak device memory), 2 and 4 ranks at ZeRO 0/1/2 against 1 and at ZeRO 3 in
#      ZeRO 2's bits, and the memory plan's one-line refusal of Meta's 8B, 70B and 405B. ZeRO 3
#      under the race check, and with a planted missing wait for a layer's gather, which the
#      race check must stop.
# EMU_CHECK_PARTS overrides the gpu_check parts (default "short dev trainer faults").
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
for t in runtime ptx cublaslt cublaslt_algos nccl semantics races fp8 fp8_gemm; do
    bin=build/emu/test_emu_$t
    "$bin" > "$OUT/test_emu_$t.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "ok   test_emu_$t: $(grep -c '^PASS' "$OUT/test_emu_$t.log") checks"
    elif [ $rc -eq 77 ]; then  # test_emu_fp8(_gemm) without the CUDA toolkit: no NVIDIA table to compare to
        echo "ok   test_emu_$t: $(grep -c '^PASS' "$OUT/test_emu_$t.log") checks; $(grep -m 1 '^SKIP' "$OUT/test_emu_$t.log")"
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
expect_stop() {  # PROGRAM NAME PATTERN ENV... (PROGRAM: runtime, races, race/runtime, race/races)
    local prog=$1 name=$2 pattern=$3 bin=build/emu/test_emu_$1 log="$OUT/fail_${1/\//_}_$2.log"
    [[ $prog == race/* ]] && bin=build/emu/race/test_emu_${prog#race/}
    shift 3
    env "$@" "$bin" --fail "$name" > "$log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] && grep -q "$pattern" "$log"; then
        echo "ok   stops: $(grep -m 1 -o "$pattern.*" "$log" | cut -c1-150)"
    else
        echo "FAIL the $name case of $prog ($*): rc=$rc, $(tail -n 1 "$log")"; fail=1
    fi
}
expect_stop runtime deadlock "deadlock: "
expect_stop runtime exited_lane "exited while lanes of its warp wait"
# the race check: test_emu_races' corrected programs, and test_emu_runtime's checks (streams,
# events, graphs), run to the end under it with the right results, in every order
race_start=$SECONDS
for order in forward reverse shuffle:7; do
    for t in runtime races; do
        log="$OUT/race_${t}_$order.log"
        if EMU_RACECHECK=1 EMU_ORDER=$order build/emu/race/test_emu_$t > "$log" 2>&1; then
            echo "ok   test_emu_$t under EMU_RACECHECK=1, EMU_ORDER=$order: $(grep -c '^PASS' "$log") checks"
        else
            echo "FAIL test_emu_$t under EMU_RACECHECK=1, EMU_ORDER=$order"; grep -m 5 -E '^FAIL|emulated GPU' "$log"; fail=1
        fi
    done
done
# ... and stops every bug, whatever the order the threads and streams ran in
expect_stop race/runtime race "race: kernel racy_sum_kernel: .* hazard on shared memory" EMU_RACECHECK=1
for order in forward reverse; do
    expect_stop race/races cp_async_war "race: kernel pipeline_kernel<1>: .* hazard on shared memory" EMU_RACECHECK=1 EMU_ORDER=$order
    expect_stop race/races cp_async_raw "race: kernel pipeline_kernel<2>: .* hazard on shared memory" EMU_RACECHECK=1 EMU_ORDER=$order
    expect_stop race/races lost_update "race: kernel count_kernel<true>: read-after-write hazard on global memory" \
        EMU_RACECHECK=1 EMU_ORDER=$order
    expect_stop race/races cross_warp_war "race: kernel swap_halves_kernel<true>: write-after-read hazard on shared memory" \
        EMU_RACECHECK=1 EMU_ORDER=$order
    expect_stop race/races cross_stream_raw "race: kernel [a-z]*_kernel (stream #[0-9]*) .* hazard between streams" \
        EMU_RACECHECK=1 EMU_ORDER=$order
    expect_stop race/races cross_stream_copy "race: .*cudaMemcpyAsync.* hazard between streams" EMU_RACECHECK=1 EMU_ORDER=$order
done
# a wgmma's A registers rewritten before its wait: stopped at the wait, with or without the race check
expect_stop races wgmma_a_regs "wgmma.mma_async: .*A fragment registers changed between a wgmma and"
# a cp.async may land as soon as it is issued: then the early issue shows in the data too
expect_stop races cp_async_war "ran to the end: wrong results" EMU_ORDER=reverse
# a cp.async, or an ldmatrix row, past the block's shared memory: stopped at the instruction
expect_stop races cp_async_past_smem "cp.async: .* outside the block's shared memory"
expect_stop races ldmatrix_past_smem "ldmatrix: .* outside the block's shared memory"
echo "     (the race check's part here: $((SECONDS - race_start)) s)"

# 2. the GPU checks on the emulated GPU
if ! "$PY" -c "import torch" 2> /dev/null; then
    echo "no PyTorch under $PY (scripts/install_deps.sh --test installs it): the emulated GPU checks need its debug states"
    exit 77
fi
INPUTS=build/emu/gpu_inputs
if [ ! -f "$INPUTS/pytorch/small_debug.bin" ] || [ ! -f "$INPUTS/pytorch/hs64_debug.bin" ] ||
   [ ! -f "$INPUTS/resume/model.bin" ] || [ ! -f "$INPUTS/llama/llama_scaled_debug.bin" ] ||
   [ ! -f "$INPUTS/llama/gqa1_model.bin" ]; then
    PYTHON="$PY" bash scripts/make_gpu_inputs.sh "$INPUTS" > "$OUT/make_gpu_inputs.log" 2>&1 ||
        { echo "FAIL scripts/make_gpu_inputs.sh (see $OUT/make_gpu_inputs.log)"; exit 1; }
fi
# The emulated GPU trainers train a Llama as train_gpt_cpu does: a model file that ./import_hf
# made from llama_reference.py's gqa1 (GQA 4/1, untied head), llm.c's flags, every step's loss
# in main.log within gpu_check.sh's tolerances against the CPU (1e-6 relative in fp32 with
# TF32 off, 3e-2 in bf16 with -ak 0 and 1); and a run resumed from its step-2 checkpoint gives
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
                 -t 32 -d 256 -x 4 -l 1e-3 -u 0 -q 1.0 -c 0.0 -v 0 -s 0)
    OMP_NUM_THREADS=2 ./train_gpt_cpu "${llama_flags[@]}" -n 0 -o "$LLAMA_RUN/cpu" > "$LLAMA_RUN/cpu.stdout" 2>&1
    for run in "fp32 0 0 1e-6" "bf16 0 1 3e-2" "bf16 1 1 3e-2"; do
        read -r prec ak tf32 tol <<< "$run"
        d="$LLAMA_RUN/${prec}_ak$ak"
        ./train_gpt_${prec}_emu "${llama_flags[@]}" -n 0 -ak "$ak" -f "$tf32" -o "$d" > "$d.stdout" 2>&1
        res=$(awk -v tol="$tol" '
            FNR == NR { if ($1 ~ /^s:/) { split($2, a, ":"); ref[$1] = a[2] } next }
            $1 ~ /^s:/ { split($2, b, ":"); if (!($1 in ref)) next; n++
                         d = (b[2] - ref[$1]) / ref[$1]; if (d < 0) d = -d; if (d > m) m = d }
            END { printf "%s %d steps, max rel loss diff %.3g", (n == 4 && m <= tol) ? "ok  " : "FAIL", n, m }' \
            "$LLAMA_RUN/cpu/main.log" "$d/main.log" 2> /dev/null)
        echo "${res:0:4} Llama train_gpt_${prec}_emu -ak $ak vs train_gpt_cpu: ${res:5} (tol $tol)"
        [ "${res:0:4}" = "ok  " ] || { fail=1; tail -n 3 "$d.stdout"; }
    done
    for prec in fp32 bf16; do
        a="$LLAMA_RUN/${prec}_straight" b="$LLAMA_RUN/${prec}_resumed"
        ./train_gpt_${prec}_emu "${llama_flags[@]}" -n 2 -o "$a" > "$a.stdout" 2>&1
        ./train_gpt_${prec}_emu "${llama_flags[@]}" -n 2 -x 2 -o "$b" > "$b.1.stdout" 2>&1
        ./train_gpt_${prec}_emu "${llama_flags[@]}" -n 2 -y 1 -o "$b" > "$b.2.stdout" 2>&1
        if grep -q "at step 2" "$b.2.stdout" && cmp -s "$a/main.log" "$b/main.log" &&
               cmp -s "$a/model_00000004.bin" "$b/model_00000004.bin"; then
            echo "ok   Llama train_gpt_${prec}_emu resumed from step 2: same main.log and final model"
        else
            echo "FAIL Llama train_gpt_${prec}_emu resumed from step 2 differs"; tail -n 3 "$b.2.stdout"; fail=1
        fi
    done
    # recompute (-r 1: RMSNorm and SwiGLU; -r 2: the whole layer; llmc/llama_cuda.cuh): the fp32
    # trainer on 8 layers at T=256 trains in -r 0's bits (main.log, model file), and the peak
    # device memory drops by what the plan's activations say, within 10% (or 2 MiB: the peak
    # is printed in whole MiB)
    rflags=(-e llama3:l8c256h8kv2f704v300 -i "$LLAMA_RUN/markov_train_*.bin" -j "$LLAMA_RUN/markov_val_*.bin" -b 2
            -t 256 -x 2 -v 0 -s 0 -n 2 -f 0)
    for r in 0 1 2; do ./train_gpt_fp32_emu "${rflags[@]}" -r $r -o "$LLAMA_RUN/r$r" > "$LLAMA_RUN/r$r.stdout" 2>&1; done
    for r in 1 2; do
        res=$(awk -v r=$r '
            FNR == 1 { f++ }
            /^memory plan:/ { match($0, /activations [0-9.]+ MiB/); a[f] = substr($0, RSTART + 12, RLENGTH - 16) }
            /^done:/ { match($0, /peak device memory [0-9]+ MiB/); p[f] = substr($0, RSTART + 19, RLENGTH - 23) }
            END { plan = a[1] - a[2]; got = p[1] - p[2]; tol = 0.1 * plan > 2 ? 0.1 * plan : 2
                  d = got - plan; if (d < 0) d = -d
                  printf "%s peak device memory %d -> %d MiB: %d less, the plan says %.1f", (plan > 0 && d <= tol) ? "ok  " : "FAIL", p[1], p[2], got, plan }' \
            "$LLAMA_RUN/r0.stdout" "$LLAMA_RUN/r$r.stdout")
        if cmp -s "$LLAMA_RUN/r0/main.log" "$LLAMA_RUN/r$r/main.log" &&
               cmp -s "$LLAMA_RUN/r0/model_00000002.bin" "$LLAMA_RUN/r$r/model_00000002.bin" && [ "${res:0:4}" = "ok  " ]; then
            echo "ok   Llama train_gpt_fp32_emu -r $r: -r 0's main.log and model file; ${res:5}"
        else
            echo "FAIL Llama train_gpt_fp32_emu -r $r: ${res:5}; $(tail -n 1 "$LLAMA_RUN/r$r.stdout")"; fail=1
        fi
    done
    # Llama on several processes (llmc/cuda/grad_sync_gpu.cuh's buckets over Llama's table) against
    # the one-process runs above (-b 4): the bucketed NCCL path over one rank (GPTRAIN_NCCL_SINGLE=1)
    # gives the same main.log at ZeRO 0 and 1, and at ZeRO 2 (the slice accumulator) the same losses
    # within the tolerance; 2 ranks under mpirun with -b 2, each on its own emulated GPU (NCCL) or
    # both on one (host-staged), train like them: every loss within 1e-5 relative in fp32 (TF32 is
    # off; gpu_check.sh allows GPT-2 1% on real GPUs' TF32) and 1e-3 in bf16
    llama_loss_diff() {  # REF RUN: "max-rel-diff lines ref-lines" over main.log's losses, line by line
        awk 'FNR == NR { split($2, a, ":"); ref[FNR] = a[2]; n = FNR; next }
             { split($2, b, ":"); d = (b[2] - ref[FNR]) / ref[FNR]; if (d < 0) d = -d; if (d > m) m = d; c++ }
             END { printf "%.3g %d %d", m, c, n }' "$1/main.log" "$2/main.log" 2> /dev/null
    }
    llama_check_losses() {  # NAME REF RUN TOL RC
        local maxrel count nref
        read -r maxrel count nref <<< "$(llama_loss_diff "$2" "$3")"
        if [ "$5" -eq 0 ] && [ "${count:-0}" = 4 ] && [ "$nref" = 4 ] &&
               awk -v m="$maxrel" -v t="$4" 'BEGIN { exit !(m <= t) }'; then
            echo "ok   Llama $1: max rel loss diff $maxrel over $count steps (tol $4)"
        else
            echo "FAIL Llama $1: rc=$5, max rel loss diff $maxrel, $count/$nref steps (tol $4)"
            tail -n 2 "$3.stdout"; fail=1
        fi
    }
    for z in 0 1 2; do
        d="$LLAMA_RUN/nccl1_z$z"
        GPTRAIN_NCCL_SINGLE=1 ./train_gpt_fp32_emu "${llama_flags[@]}" -n 0 -ak 0 -f 0 -z $z -o "$d" > "$d.stdout" 2>&1
        st=$?
        if ! grep -q "through NCCL over one rank" "$d.stdout"; then
            echo "FAIL Llama GPTRAIN_NCCL_SINGLE=1 -z $z: rc=$st, not through NCCL: $(tail -n 1 "$d.stdout")"; fail=1
        elif [ $z = 2 ]; then
            llama_check_losses "train_gpt_fp32_emu GPTRAIN_NCCL_SINGLE=1 -z 2 vs one process" "$LLAMA_RUN/fp32_ak0" "$d" 1e-5 $st
        elif [ $st -eq 0 ] && cmp -s "$LLAMA_RUN/fp32_ak0/main.log" "$d/main.log"; then
            echo "ok   Llama train_gpt_fp32_emu GPTRAIN_NCCL_SINGLE=1 -z $z: the buckets through NCCL, same main.log"
        else
            echo "FAIL Llama train_gpt_fp32_emu GPTRAIN_NCCL_SINGLE=1 -z $z: rc=$st, main.log differs"; fail=1
        fi
    done
    if command -v mpirun > /dev/null && ldd ./train_gpt_fp32_emu | grep -q libmpi; then
        # ZeRO 3 (the layers gathered as they run, llmc/cuda/grad_sync_gpu.cuh) on 2 and 4 ranks,
        # fp32 and bf16, NCCL and host-staged: ZeRO 2's main.log and model file, bit for bit
        for run in "own 0 fp32 0 1e-5 2" "own 1 fp32 0 1e-5 2" "own 2 fp32 0 1e-5 2" "share 1 fp32 0 1e-5 2" \
                   "share 2 fp32 0 1e-5 2" "own 2 bf16 1 1e-3 2" "share 1 bf16 1 1e-3 2" "own 3 fp32 0 1e-5 2" \
                   "share 3 fp32 0 1e-5 2" "own 3 bf16 1 1e-3 2" "own 2 fp32 0 1e-5 4" "own 3 fp32 0 1e-5 4" \
                   "own 2 bf16 1 1e-3 4" "own 3 bf16 1 1e-3 4"; do
            read -r mode z prec tf32 tol np <<< "$run"
            devices=(EMU_DEVICES=$np) via="through NCCL" how="$np emulated GPUs, NCCL"
            if [ $mode = share ]; then
                devices=(CUDA_VISIBLE_DEVICES=0 EMU_DEVICES=1) via="through the host" how="1 GPU, host-staged"
            fi
            d="$LLAMA_RUN/np${np}_${mode}_z${z}_$prec"
            [ $np = 2 ] || d="$d-np$np"
            OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 timeout 300 \
                mpirun -np $np env "${devices[@]}" ./train_gpt_${prec}_emu "${llama_flags[@]}" -n 4 -ak 0 -f "$tf32" \
                -b $((4 / np)) -z $z -o "$d" > "$d.stdout" 2>&1
            st=$?
            if ! grep -q "^processes: $np .*$via" "$d.stdout"; then
                echo "FAIL Llama train_gpt_${prec}_emu mpirun -np $np -z $z: rc=$st, not $via: $(tail -n 1 "$d.stdout")"
                fail=1
            elif [ $z = 3 ]; then
                z2=${d/_z3_/_z2_}
                if [ $st -eq 0 ] && cmp -s "$z2/main.log" "$d/main.log" && cmp -s "$z2/model_00000004.bin" "$d/model_00000004.bin"; then
                    echo "ok   Llama train_gpt_${prec}_emu mpirun -np $np -z 3 ($how): -z 2's main.log and model file"
                else
                    echo "FAIL Llama train_gpt_${prec}_emu mpirun -np $np -z 3 ($how): rc=$st, not -z 2's bits"; fail=1
                fi
            else
                llama_check_losses "train_gpt_${prec}_emu mpirun -np $np -b $((4 / np)) -z $z ($how) vs -b 4" \
                    "$LLAMA_RUN/${prec}_ak0" "$d" "$tol" $st
            fi
        done
        # ZeRO 3 resumed: the bf16 run on 2 GPUs above, from its step-2 checkpoint, on its 2 ranks
        # (every rank's slice and the master weights back from the state files) gives the same
        # main.log and final model
        a="$LLAMA_RUN/np2_own_z3_bf16" b="$LLAMA_RUN/np2_own_z3_bf16_resumed"
        rm -rf "$b"
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 timeout 300 \
            mpirun -np 2 env EMU_DEVICES=2 ./train_gpt_bf16_emu "${llama_flags[@]}" -n 2 -x 2 -ak 0 -f 1 -b 2 -z 3 -o "$b" \
            > "$b.1.stdout" 2>&1
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 timeout 300 \
            mpirun -np 2 env EMU_DEVICES=2 ./train_gpt_bf16_emu "${llama_flags[@]}" -n 2 -y 1 -ak 0 -f 1 -b 2 -z 3 -o "$b" \
            > "$b.2.stdout" 2>&1
        if grep -q "at step 2" "$b.2.stdout" && cmp -s "$a/main.log" "$b/main.log" &&
               cmp -s "$a/model_00000004.bin" "$b/model_00000004.bin"; then
            echo "ok   Llama train_gpt_bf16_emu mpirun -np 2 -z 3 resumed from step 2: same main.log and final model"
        else
            echo "FAIL Llama train_gpt_bf16_emu mpirun -np 2 -z 3 resumed from step 2 differs: $(tail -n 1 "$b.2.stdout")"
            fail=1
        fi
    else
        echo "skip Llama on 2 ranks: no mpirun, or the emulated trainers were built without MPI"
    fi
fi
# GPT-2 at ZeRO 3 on 4 emulated GPUs (NCCL), fp32 and bf16, 2 micro-steps a step, a checkpoint
# at the end: ZeRO 2's main.log and model file, bit for bit (2 ranks: gpu_check.sh's trainer part)
if command -v mpirun > /dev/null && ldd ./train_gpt_fp32_emu | grep -q libmpi; then
    R=$INPUTS/resume
    for prec in fp32 bf16; do
        for z in 2 3; do
            d="$OUT/gpt2_np4_z${z}_$prec"
            rm -rf "$d"
            OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 timeout 300 \
                mpirun -np 4 env EMU_DEVICES=4 ./train_gpt_${prec}_emu -e "$R/model.bin" -i "$R/markov_train_*.bin" \
                -j "$R/markov_val_*.bin" -b 1 -t 32 -d 256 -x 4 -v 2 -m 1 -s 0 -n 4 -f 0 -ak 0 -z $z -o "$d" \
                > "$d.stdout" 2>&1 || echo "FAIL GPT-2 train_gpt_${prec}_emu mpirun -np 4 -z $z: $(tail -n 1 "$d.stdout")"
        done
        a="$OUT/gpt2_np4_z2_$prec" b="$OUT/gpt2_np4_z3_$prec"
        if cmp -s "$a/main.log" "$b/main.log" && cmp -s "$a/model_00000004.bin" "$b/model_00000004.bin" &&
               grep -q "^parameter gathers (ZeRO 3): " "$b.stdout"; then
            echo "ok   GPT-2 train_gpt_${prec}_emu mpirun -np 4 -z 3 (NCCL): -z 2's main.log and model file; $(grep -o '[0-9]* layers, [0-9]* of them queued' "$b.stdout") ahead"
        else
            echo "FAIL GPT-2 train_gpt_${prec}_emu mpirun -np 4 -z 3: not -z 2's bits"; fail=1
        fi
    done
else
    echo "skip GPT-2 on 4 ranks: no mpirun, or the emulated trainers were built without MPI"
fi
# The GPU trainers' memory plan (train_gpt.cu: gpu_check_memory) refuses Meta's Llamas on the
# emulated GPU (an H100's 79.6 GiB) with one line before anything is built (8B is 32 GB of fp32 on
# the host; ulimit -v makes sure nothing that size is tried): the parameter count of
# test_llama_configs.cpp's independent formula, and for 8B on one process the bf16 params and
# gradients, AdamW's m and v and the fp32 master weights from it (2, 2, 8 and 4 bytes a value)
for run in "llama3.1:8b 8030261248 1 0" "llama3.1:70b 70553706496 1 0" "llama3.1:405b 405853388800 1 0" \
           "llama3.1:70b 70553706496 2 1"; do
    read -r model count np z <<< "$run"
    log="$OUT/memory_plan_${model#llama3.1:}_np$np.log"
    start=$SECONDS
    if [ "$np" = 1 ]; then
        (ulimit -v 8000000; timeout 60 ./train_gpt_bf16_emu -e "$model" -z "$z" > "$log" 2>&1)
    elif command -v mpirun > /dev/null && ldd ./train_gpt_bf16_emu | grep -q libmpi; then
        (ulimit -v 8000000; OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
             EMU_DEVICES=2 timeout 60 mpirun -np "$np" ./train_gpt_bf16_emu -e "$model" -z "$z" > "$log" 2>&1)
    else
        echo "skip the memory plan of $model on $np ranks: no mpirun"; continue
    fi
    st=$?
    secs=$((SECONDS - start))
    line=$(grep -m 1 "does not fit on the GPU" "$log")
    expect="$count parameters)"
    [ "$model" = llama3.1:8b ] && expect=$(awk -v n="$count" 'BEGIN { g = 1073741824
        printf "params %.1f bf16, grads %.1f, AdamW %.1f, master weights %.1f", 2 * n / g, 2 * n / g, 8 * n / g, 4 * n / g }')
    procs="1 process, ZeRO 0"
    [ "$np" = 2 ] && procs="2 processes, ZeRO $z"
    if [ $st -ne 0 ] && [[ "$line" == *"$count parameters)"* && "$line" == *"$expect"* && "$line" == *"$procs)"* ]] &&
           [ "$(grep -c '^error:' "$log")" = "$np" ]; then
        echo "ok   train_gpt_bf16_emu -e $model on $np rank(s) refused in ${secs}s: ${line:7:150}"
    else
        echo "FAIL train_gpt_bf16_emu -e $model on $np rank(s): rc=$st, wanted '$expect', '$procs': $(tail -n 2 "$log")"
        fail=1
    fi
done
# The trainers' race-check builds under EMU_RACECHECK=1: two steps with validation, a sample and
# a checkpoint; here fp32 with the gradient reduction on a stream of its own (NCCL over one
# rank, ZeRO 1, events between the streams), and ZeRO 3 (each layer gathered into a slot on
# that stream while the layer before runs; events both ways); bf16 (GPT-2 with the
# tensor-core attention's cp.async replayed as CUDA graphs, and Llama) is gpu_check.sh's
# train_sanitizer part below. Then ZeRO 3 with a planted bug: the main stream does not wait
# for a layer's gather (GPTRAIN_TEST_ZERO3_NO_WAIT=1); the race check must stop it.
R=$INPUTS/resume
for run in "fp32 GPTRAIN_NCCL_SINGLE=1 -z 1" "fp32 GPTRAIN_NCCL_SINGLE=1 -z 3"; do
    read -r prec nccl extra <<< "$run"
    d="$OUT/race_trainer_$prec"
    rm -rf "$d"
    # shellcheck disable=SC2086
    env EMU_RACECHECK=1 "$nccl" timeout 600 build/emu/race/train_gpt_$prec -e "$R/model.bin" -i "$R/markov_train_*.bin" \
        -j "$R/markov_val_*.bin" -b 4 -t 32 -d 256 -x 2 -v 2 -m 1 -s 2 -g 4 -n 2 $extra -o "$d" > "$d.stdout" 2>&1
    st=$?
    if [ $st -eq 0 ] && grep -q '^done: 2 steps' "$d.stdout"; then
        echo "ok   train_gpt_$prec ($nccl $extra) under EMU_RACECHECK=1: 2 steps, val, sample, checkpoint, no hazard"
    else
        echo "FAIL train_gpt_$prec ($nccl $extra) under EMU_RACECHECK=1: rc=$st"
        grep -m 3 -E 'race:|error' "$d.stdout" | cut -c1-300; fail=1
    fi
done
d="$OUT/race_trainer_zero3_no_wait"
rm -rf "$d"
env EMU_RACECHECK=1 GPTRAIN_NCCL_SINGLE=1 GPTRAIN_TEST_ZERO3_NO_WAIT=1 timeout 600 build/emu/race/train_gpt_fp32 \
    -e "$R/model.bin" -i "$R/markov_train_*.bin" -j "$R/markov_val_*.bin" -b 4 -t 32 -d 256 -x 2 -v 0 -s 0 -z 3 -o "$d" \
    > "$d.stdout" 2>&1
st=$?
if [ $st -ne 0 ] && grep -q "race: .*stream #.*nothing orders the two" "$d.stdout"; then
    echo "ok   -z 3 with the wait for a gather left out: stopped, $(grep -m 1 -o 'race: .*hazard between streams' "$d.stdout" | cut -c1-160)"
else
    echo "FAIL -z 3 with the wait for a gather left out: rc=$st, the race check did not stop it"; fail=1
fi
# gpu_check.sh as a device runs it: its logs in a folder of their own, $OUT an empty folder
# that must end with at most 8 files (a device returns no more): the summary, results.tsv and
# one archive of the logs, with the benchmark table's seven rows (two of them fp8)
CHECK_OUT=$OUT/gpu_check CHECK_LOGS=$OUT/gpu_check_logs
rm -rf "$CHECK_OUT"
mkdir -p "$CHECK_OUT"
GPU_CHECK_EMU=1 GPU_CHECK_PARTS="${EMU_CHECK_PARTS:-short dev trainer faults}" GPU_INPUTS="$INPUTS" OUT="$CHECK_OUT" \
    GPU_CHECK_LOGDIR="$CHECK_LOGS" GPU_CHECK_JOBS=2 PYTHON="$PY" bash scripts/gpu_check.sh > "$OUT/gpu_check.log" 2>&1
rc=$?
grep -E ' (PASS|FAIL|SKIP|TIMEOUT|NOT BUILT) |^-- part ' "$CHECK_OUT/summary.txt" | cut -c1-160 || true
if [ $rc -ne 0 ]; then
    echo "FAIL scripts/gpu_check.sh on the emulated GPU (rc=$rc; see $CHECK_OUT/summary.txt)"
    grep -E ' FAIL ' "$CHECK_OUT/summary.txt" | head -n 20
    fail=1
fi
nfiles=$(find "$CHECK_OUT" -type f | wc -l)
nrows=$(grep -c $'^bench_short\tbench [^\t]*\tBENCH\t' "$CHECK_OUT/results.tsv")
want_rows=0
[[ " ${EMU_CHECK_PARTS:-short} " =~ " "(short|all|bench_short)" " ]] && want_rows=7
if [ "$nfiles" -le 8 ] && tar -tzf "$CHECK_OUT/logs.tar.gz" > /dev/null 2>&1 && [ "$nrows" = "$want_rows" ]; then
    echo "ok   gpu_check.sh's \$OUT: $nfiles files ($(cd "$CHECK_OUT" && ls | tr '\n' ' ')), $nrows benchmark rows"
else
    echo "FAIL gpu_check.sh's \$OUT: $nfiles files (at most 8), $nrows benchmark rows (want $want_rows), files: $(ls "$CHECK_OUT" | tr '\n' ' ')"
    fail=1
fi
[ $fail -eq 0 ] && echo "emulated GPU: all checks passed"
exit $fail
