#!/usr/bin/env bash
# train_gpt_fp8 on the emulated GPU (issue 26), against train_gpt_bf16 from the same init:
#   - a tiny GPT-2 and a tiny Llama 3 train 8 steps in fp8 and in bf16: fp8's val loss at the end
#     is within FP8_TOL (below) of bf16's and not equal to it (an fp8 run that silently ran its
#     linears in bf16 would match it to the last digit);
#   - -fp8r current trains the Llama within the same tolerance, and not as delayed scaling does;
#   - the printed samples (contexts of any length, their GEMMs in bf16) leave training unchanged;
#   - -r 2, -r 1 -ge 2 and (GPT-2) -cg 1 train in -r 0's bits (main.log);
#   - an fp8 run resumed from its step-4 checkpoint (state_00000004_fp8.bin: the scales and amax
#     histories) ends with the main.log, the final model file and the final FP8 state of the run
#     that never stopped, byte for byte, on one rank and on two (ZeRO 1); without that file, or
#     with a byte of it flipped, the resume stops with one line naming it;
#   - the memory plan counts the FP8 copies and scales: a run's peak device memory over bf16's,
#     and the refusal of Meta's 8B;
#   - -tp 2, with and without -sp 1, against one process: the
#     same scales, losses within FP8_TOL, checkpoints across the layouts; -fp8r current at -tp 2;
#   - -pp 2 (GPT-2; Llama at -tp 2 x -pp 2; a 4-layer Llama at -pp 2 -vp 2 x 2 replicas, ZeRO 3,
#     and at -pp 2 -pl 1,3: uneven stages)
#     against one process: the FP8 state after step 0 byte for byte, losses within FP8_TOL;
#     checkpoints from one process resumed at -pp 2 -vp 2 and the other way;
#   - the one-line refusals: compute capability 8.0 (EMU_CC=80), an unknown -fp8r; the bf16
#     trainer takes -fp8r and ignores it.
# The FP8 kernels' own checks (dev/cuda/fp8.cu, dev/cuda/fp8_linear.cu at --quick, against their
# CPU references) run in test_emu.sh with every other dev/cuda program, not here again.
set -u
cd "$(dirname "$0")/.."
source test/lib.sh  # defines: PY, compare_logs, expect_error, copy_step4, expect_damaged_resume
out=test/out/fp8
rm -rf "$out"; mkdir -p "$out"
if ! "$PY" -c "import numpy" 2> /dev/null; then
    echo "numpy not importable by $PY (apt-get install python3-numpy): the test data needs it"
    [ "${CI:-}" = "true" ] && exit 1 || exit 77
fi
if ! make -s -j2 train_gpt_fp8_emu train_gpt_bf16_emu > "$out/build.log" 2>&1; then
    grep -E "error|Error" "$out/build.log" | head -n 20
    echo "FAIL: make train_gpt_fp8_emu train_gpt_bf16_emu (see $out/build.log)"
    exit 1
fi
fail=0
bad() { echo "FAIL $*"; fail=1; }

# the data: a learnable Markov chain over 300 tokens; a GPT-2 of that vocabulary (its descriptors
# all have GPT-2's 50257, whose classifier would take most of this test's time), drawn once as
# DESIGN.md says (N(0, 0.02), the residual projections / sqrt(2L), LayerNorms 1 and 0) and
# written as an fp32 llm.c model file, so both trainers start from the same weights
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 8000 --val-tokens 2000 --seed 11 > /dev/null
"$PY" - "$out/gpt2.bin" <<'EOF'
import sys
import numpy as np
V, Vp, maxT, L, NH, C = 300, 384, 64, 2, 4, 64
rng = np.random.default_rng(5)
normal = lambda *shape, std=0.02: rng.normal(0.0, std, shape).astype(np.float32)
zeros, ones = (lambda *s: np.zeros(s, np.float32)), (lambda *s: np.ones(s, np.float32))
proj = 0.02 / np.sqrt(2 * L)
wte = normal(Vp, C)
wte[V:] = 0.0  # the padded rows stay zero
tensors = [wte, normal(maxT, C), ones(L, C), zeros(L, C), normal(L, 3 * C, C), zeros(L, 3 * C),
           normal(L, C, C, std=proj), zeros(L, C), ones(L, C), zeros(L, C), normal(L, 4 * C, C), zeros(L, 4 * C),
           normal(L, C, 4 * C, std=proj), zeros(L, C), ones(C), zeros(C)]
header = np.zeros(256, "<i4")
header[:8] = [20240326, 3, maxT, V, L, NH, C, Vp]
with open(sys.argv[1], "wb") as f:
    f.write(header.tobytes())
    for t in tensors:
        f.write(t.astype("<f4").tobytes())
EOF
set -f  # the flags below hold globs for the trainer, not for the shell
data="-i $out/markov_train_*.bin -j $out/markov_val_*.bin"
# lr 4e-3: a loss well below a fresh model's ln 300 = 5.70 after 8 steps (5.08 Llama, 5.38 GPT-2), so
# that a wrong product shows (at 1e-3 it is 5.56, and even nonsense stays near 5.7)
common="$data -b 4 -t 32 -x 8 -l 4e-3 -k constant -v 4 -m 2 -s 0"
gpt2="$common -e $out/gpt2.bin"
# Llama 3, GQA (4 query heads, 2 KV heads): C=64, QKV=128, F=176, 2F=352, B*T=128, all multiples of
# 16 as FP8 GEMMs need them
llama="$common -e llama3:l2c64h4kv2f176v300"

# FP8_TOL, relative: E4M3 keeps 3 mantissa bits (a cast's relative error up to 2^-4), E5M2 two, but
# each GEMM's fp32 sums average the independent rounding errors of its C to 4C products, and
# per-tensor scaling puts each tensor's largest value near the top of the format's range, so the
# loss moves far less than one cast's error: here 4.8e-4 (GPT-2) and 1.1e-3 (Llama; current
# scaling 2.4e-4), 8e-4 for GPT-2 over 40 steps at lr 1e-3 (commit 7b34a94). 5e-3 is 4.5 times
# the largest of them, and 6 times below the smallest effect of a planted slip (the forward GEMM
# taking the weight back out with the input's scale: 3.1% GPT-2, 11% Llama). Issue 26's bound, 1%
# after 200 steps, is for longer runs.
FP8_TOL=0.005
last_val() { awk -F'tel:' '/ tel:/ { v = $2 } END { print v }' "$1/main.log"; }
# compare_val NAME FP8_DIR BF16_DIR: within FP8_TOL (a NaN is not), and not the same number
compare_val() {
    local a b
    a=$(last_val "$2"); b=$(last_val "$3")
    if [ -z "$a" ] || [ -z "$b" ]; then bad "$1: no val loss (see $2.stdout, $3.stdout)"; return; fi
    awk -v a="$a" -v b="$b" -v tol="$FP8_TOL" -v name="$1" 'BEGIN {
        d = (a - b) / b; if (d < 0) d = -d
        if (a == b) { printf "FAIL %s: fp8 val loss %s is bf16'"'"'s to the digit: the linears did not run in FP8\n", name, a; exit 1 }
        if (!(d <= tol)) { printf "FAIL %s: fp8 val loss %s vs bf16 %s: %.3g relative > %g\n", name, a, b, d, tol; exit 1 }
        printf "ok   %s: val loss after 8 steps fp8 %s, bf16 %s: %.2g relative (tolerance %g)\n", name, a, b, d, tol }' ||
        fail=1
}
run() {  # run BINARY DIR FLAGS...: trains into DIR, its output in DIR.stdout
    local bin=$1 dir=$2; shift 2
    ./$bin "$@" -o "$dir" > "$dir.stdout" 2>&1 || bad "$bin -o $dir: exit $? ($(tail -n 1 "$dir.stdout"))"
}

run train_gpt_bf16_emu "$out/gpt2_bf16" $gpt2
run train_gpt_fp8_emu "$out/gpt2_fp8" $gpt2 -n 1  # a checkpoint a step: -tp 2's reference below
# the samples the trainer prints (B=1, a context of any length: those GEMMs in bf16, no amax
# recorded) leave the training as it was: main.log byte for byte the run's without them
run train_gpt_fp8_emu "$out/gpt2_fp8_sampled" $gpt2 -s 4 -g 8
if [ "$(grep -c '^generating' "$out/gpt2_fp8_sampled.stdout")" = 2 ] &&
       cmp -s "$out/gpt2_fp8/main.log" "$out/gpt2_fp8_sampled/main.log"; then
    echo "ok   fp8 with samples every 4 steps: 2 samples printed, main.log byte for byte the run's without them"
else
    bad "fp8 with samples: $(grep -c '^generating' "$out/gpt2_fp8_sampled.stdout") samples, or main.log differs ($(tail -n 1 "$out/gpt2_fp8_sampled.stdout"))"
fi
compare_val "GPT-2 fp8 vs bf16" "$out/gpt2_fp8" "$out/gpt2_bf16"
run train_gpt_bf16_emu "$out/llama_bf16" $llama -fp8r current  # taken and ignored
run train_gpt_fp8_emu "$out/llama_fp8" $llama -n 4
compare_val "Llama fp8 vs bf16" "$out/llama_fp8" "$out/llama_bf16"
run train_gpt_fp8_emu "$out/llama_current" $llama -fp8r current
compare_val "Llama fp8 -fp8r current vs bf16" "$out/llama_current" "$out/llama_bf16"
if cmp -s "$out/llama_current/main.log" "$out/llama_fp8/main.log"; then
    bad "-fp8r current trains as delayed scaling does, bit for bit: the flag did nothing"
fi
grep -q "current scaling" "$out/llama_current.stdout" || bad "-fp8r current: the run does not say it scales by the current amax"

# -fp8fa: which GEMMs ask cuBLASLt for fast accumulation. The emulated cuBLASLt sums in fp32
# either way, so the numbers cannot show it; its profile (EMU_PROFILE=1) counts the FP8 GEMMs by
# whether they set FAST_ACCUM. The Llama's 8 linears run 2 backward GEMMs each a step, 8 steps:
# 128; every other FP8 GEMM is a forward's (training and validation). -fp8fa 1 (the default):
# the 128 without it, the forwards' with it; 0: none with it; 2: all of them.
fa_counts() {  # fa_counts DIR: "FAST_ACCUM-count plain-count" of the run's profile
    awk 'function times(line) { sub(/.*\(/, "", line); sub(/ times\).*/, "", line); return line + 0 }
         /cublasLtMatmul FP8 FAST_ACCUM \(/ { f += times($0) }
         /cublasLtMatmul FP8 \(/ { p += times($0) }
         END { printf "%d %d", f, p }' "$1.stdout"
}
for fa in 0 1 2; do EMU_PROFILE=1 run train_gpt_fp8_emu "$out/llama_fa$fa" $llama -fp8fa $fa; done
read -r f1 p1 <<< "$(fa_counts "$out/llama_fa1")"
read -r f0 p0 <<< "$(fa_counts "$out/llama_fa0")"
read -r f2 p2 <<< "$(fa_counts "$out/llama_fa2")"
if [ "$p1" = 128 ] && [ "$f1" -ge 64 ] && [ "$f0" = 0 ] && [ "$p0" = $((f1 + 128)) ] && [ "$p2" = 0 ] &&
       [ "$f2" = $((f1 + 128)) ] && grep -q "fast accumulation in the forward GEMMs" "$out/llama_fa1.stdout"; then
    echo "ok   -fp8fa: FP8 GEMMs with FAST_ACCUM / without: 0: $f0/$p0, 1: $f1/$p1 (the 128 backward's without), 2: $f2/$p2"
else
    bad "-fp8fa: FP8 GEMMs with FAST_ACCUM / without: 0: $f0/$p0, 1: $f1/$p1, 2: $f2/$p2 (expected 0/F+128, F/128, F+128/0)"
fi

# recompute and graphs in fp8: -r 2 runs each layer's forward again in the backward, its casts
# and FP8 GEMMs included, with the step's scales (delayed scaling changes them only between steps)
# on the same tensors, so the amaxes it records are the forward's; -cg 1 replays the same launches
# (GPT-2) and -ge 2 asks for an epilogue the FP8 linears do not take (their GELU is a kernel of its
# own); -fp8kt 1 keeps each linear's input from its forward's cast, transposed, for its backward,
# the codes its backward would cast again with the same scale; -fp8kw 1 casts each weight once a
# step for all its uses (with -cg 1 it is off: graphs would replay one step's casts in every
# step). Each main.log byte for byte the run's with the planned -r 0 and none of them; the
# validations every 4 steps in it take the updated weights (a stale kept weight would show).
for fam in gpt2 llama; do
    grep -q "^memory plan:.*-r 0)" "$out/${fam}_fp8.stdout" || bad "$fam fp8: the reference run did not plan -r 0"
    for extra in "-r 2" "-r 1 -ge 2" "-cg 1" "-fp8kt 1" "-fp8kt 1 -r 2" "-fp8kt 1 -cg 1" "-fp8kw 1" "-fp8kw 1 -r 2" \
                 "-fp8kw 1 -fp8kt 1" "-fp8kw 1 -cg 1"; do
        [ "$fam" = llama ] && [[ "$extra" == *"-cg 1" ]] && continue  # -cg 1 is GPT-2's (README)
        d="$out/${fam}_fp8_$(echo $extra | tr -d ' -')"
        run train_gpt_fp8_emu "$d" ${!fam} $extra
        if cmp -s "$out/${fam}_fp8/main.log" "$d/main.log"; then
            echo "ok   $fam fp8 $extra: main.log byte for byte the -r 0 run's"
        else
            bad "$fam fp8 $extra: main.log differs from the -r 0 run's ($(tail -n 1 "$d.stdout"))"
        fi
    done
done
grep -q "^CUDA graph (-cg 1): the backward of a micro-step captured" "$out/gpt2_fp8_cg1.stdout" ||
    bad "gpt2 fp8 -cg 1: no graph captured"
grep -q "^-fp8kw 1: off with -cg 1" "$out/gpt2_fp8_fp8kw1cg1.stdout" || bad "gpt2 fp8 -fp8kw 1 -cg 1: not said to be off"
# -fp8kw 1 over 2 micro-steps a step (-d 256): the second micro-step's forward and both
# backwards take the weights the step's first forward cast, the same bits as casting them again
run train_gpt_fp8_emu "$out/llama_d256" $llama -d 256
run train_gpt_fp8_emu "$out/llama_d256_kw" $llama -d 256 -fp8kw 1
cmp -s "$out/llama_d256/main.log" "$out/llama_d256_kw/main.log" &&
    echo "ok   llama fp8 -fp8kw 1, 2 micro-steps a step: main.log byte for byte the run's without" ||
    bad "llama fp8 -fp8kw 1, 2 micro-steps a step: main.log differs from the run's without"
# -fp8kt 1 takes the backward's cast of each input away and makes the forward's a cast-transpose:
# of the Llama's F forward and B backward FP8 linears (8 a step, 8 steps: B = 64), the plain casts
# (weight and input, 2F: the -fp8fa 1 run above) become F (the weights'), the cast-transposes
# (output gradient, W^T, inp^T: 3B) become F + 2B. Counted by the emulated GPU's profile.
EMU_PROFILE=1 run train_gpt_fp8_emu "$out/llama_kept" $llama -fp8kt 1
casts() {  # casts DIR: "plain-casts cast-transposes" launched in the run's profile
    awk 'function times(line) { sub(/.*\(/, "", line); sub(/ times\).*/, "", line); return line + 0 }
         / fp8_cast_(kernel|act_kernel)</ { p += times($0) }
         / fp8_cast_transpose/ { t += times($0) }
         END { printf "%d %d", p, t }' "$1.stdout"
}
read -r plain ct <<< "$(casts "$out/llama_fa1")"
read -r plain_k ct_k <<< "$(casts "$out/llama_kept")"
# -fp8kw 1: the weights cast (as is and transposed, one cast-transpose) once a step and once a
# validation, where their 2F plain and B transposed casts were: plain casts F (the inputs'),
# cast-transposes 2B (dout, inp^T) + 8 x (8 steps + the validations: of the F/8 forwards a
# linear runs, 8 are the steps', the rest 2 (-m 2) a validation)
# The FP8 state at step 8 too, byte for byte the run's without: each step's amax of each weight
# recorded by its step's first cast (a cast kept from a validation before the step, whose amaxes
# the step forgets, would leave holes in the histories that the losses need not show)
EMU_PROFILE=1 run train_gpt_fp8_emu "$out/llama_kw" $llama -fp8kw 1 -n 4
read -r plain_w ct_w <<< "$(casts "$out/llama_kw")"
want_w=$((128 + 8 * (8 + (plain / 2 / 8 - 8) / 2)))
if [ "$plain_w" = $((plain / 2)) ] && [ "$ct_w" = "$want_w" ] &&
       grep -q "the weights kept cast for the step" "$out/llama_kw.stdout" &&
       cmp -s "$out/llama_fp8/state_00000008_fp8.bin" "$out/llama_kw/state_00000008_fp8.bin" &&
       cmp -s "$out/llama_fp8/model_00000008.bin" "$out/llama_kw/model_00000008.bin"; then
    echo "ok   -fp8kw 1: plain casts $plain -> $plain_w, cast-transposes $ct -> $ct_w (each weight once a step and a validation); the model and FP8 state at step 8 byte for byte the run's without"
else
    bad "-fp8kw 1: plain casts $plain -> $plain_w, cast-transposes $ct -> $ct_w (expected $((plain / 2)), $want_w), or the model or FP8 state at step 8 differs"
fi
if [ $((plain % 2)) = 0 ] && [ "$plain" -gt 0 ] && [ "$plain_k" = $((plain / 2)) ] && [ "$ct" = 192 ] &&
       [ "$ct_k" = $((plain / 2 + 128)) ] && grep -q "the inputs kept for the backward" "$out/llama_kept.stdout"; then
    echo "ok   -fp8kt 1: plain casts $plain -> $plain_k, cast-transposes $ct -> $ct_k (the backward's inp^T from the forward)"
else
    bad "-fp8kt 1: plain casts $plain -> $plain_k, cast-transposes $ct -> $ct_k (expected 2F -> F, 192 -> F + 128)"
fi

# resume: the uninterrupted run (llama_fp8, checkpoints at 4 and 8) against one that stopped at 4
res=$out/llama_resumed
mkdir -p "$res"
set +f
cp "$out/llama_fp8"/* "$res"/
rm -f "$res"/*00000008*
set -f
run train_gpt_fp8_emu "$res" $llama -n 4 -y 1
if ! grep -q "resumed from .*model_00000004.bin at step 4" "$res.stdout"; then
    bad "the fp8 run did not resume at step 4 ($(tail -n 1 "$res.stdout"))"
else
    same=1
    for f in main.log model_00000008.bin state_00000008_fp8.bin; do
        cmp -s "$out/llama_fp8/$f" "$res/$f" || { bad "resumed at step 4: $f differs from the uninterrupted run's"; same=0; }
    done
    [ $same = 1 ] && echo "ok   fp8 resumed at step 4: main.log ($(wc -l < "$res/main.log") lines), model_00000008.bin and state_00000008_fp8.bin byte for byte the uninterrupted run's"
fi

# the same on 2 data-parallel ranks (ZeRO 1, each on its own emulated GPU, NCCL): rank 0 alone
# writes the FP8 state, which the amax max-reduce made every rank's, and both read it back
if command -v mpirun > /dev/null && ldd ./train_gpt_fp8_emu | grep -q libmpi; then
    mpi_env=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 timeout 300)
    np2=("${mpi_env[@]}" mpirun -np 2 env EMU_DEVICES=2)
    mpi=("${np2[@]}" ./train_gpt_fp8_emu $llama -b 2 -d 128 -z 1 -n 4)
    "${mpi[@]}" -o "$out/np2" > "$out/np2.stdout" 2>&1 || bad "2 ranks: exit $? ($(tail -n 1 "$out/np2.stdout"))"
    mkdir -p "$out/np2_resumed"
    set +f
    cp "$out/np2"/*00000004* "$out/np2/main.log" "$out/np2_resumed"/
    set -f
    "${mpi[@]}" -y 1 -o "$out/np2_resumed" > "$out/np2_resumed.stdout" 2>&1 ||
        bad "2 ranks resumed: exit $? ($(tail -n 1 "$out/np2_resumed.stdout"))"
    same=1
    for f in main.log model_00000008.bin state_00000008_fp8.bin state_00000008_00000.bin state_00000008_00001.bin; do
        cmp -s "$out/np2/$f" "$out/np2_resumed/$f" || { bad "2 ranks resumed at step 4: $f differs"; same=0; }
    done
    [ $same = 1 ] && echo "ok   2 ranks (ZeRO 1) resumed at step 4: main.log, model, both state files and the FP8 state byte for byte"
    # -tp 2 (each rank its own emulated GPU): every linear keeps one scale a tensor, the max of
    # its shards' amaxes over the group, so a rank's FP8 state is one process's and rank 0's one
    # state file serves either layout. Llama with F 160 (80 a rank: $llama's 176 splits into 88,
    # which FP8 GEMMs refuse, below). The reference is one process of the same trainer.
    # What is compared, measured before choosing:
    #  - the FP8 state after step 0 (state_00000001_fp8.bin, -n 1), whose amaxes both runs took
    #    from the same weights: every weight's scale bit for bit (the max of the shards' amaxes is
    #    the whole tensor's: 8 of 8 in each family, with and without -sp; with the group's
    #    reduction skipped 4 or 5 of 8, the rest up to 73% apart, while the losses stayed within
    #    FP8_TOL: this is the check that sees it), the inputs' and gradients' within 10%: their bf16
    #    values part in the last bits where the projections' partial sums are added in another
    #    order, and the first step casts with scale 1, so E5M2 holds a gradient near 1e-5 as one
    #    of its few subnormals and a last-bit change moves a cast by a whole step (measured: 16 to
    #    21 of 24 scales equal, the rest within 1.6% (inputs) and 4.6% (gradients)). Not at step
    #    8: by then the runs have parted (below) and the scales follow the weights (28% apart).
    #  - losses within FP8_TOL, as fp8 is held to bf16 (measured up to 2.4e-3), norms within 15%
    #    (measured up to 7.4%): bf16 at TP 2 parts from one process by 4e-4 (losses) and 1.3%
    #    (norms) on this Llama, and fp8 magnifies that, a parting last bit moving a cast by a
    #    step of the format (up to 1/8 of the value in E4M3, 1/4 in E5M2);
    #  - the final val loss not bf16's to the digit (the linears ran in FP8).
    llama_tp=${llama/f176/f160}
    TP_NORM_TOL=0.15
    run train_gpt_fp8_emu "$out/llama_tp_np1" $llama_tp -n 1
    run train_gpt_bf16_emu "$out/llama_tp_bf16" $llama_tp
    run_tp2() {  # run_tp2 DIR FLAGS...: mpirun -np 2 ... -tp 2 -o DIR, the output in DIR.stdout
        local dir=$1; shift
        "${np2[@]}" ./train_gpt_fp8_emu "$@" -tp 2 -o "$dir" > "$dir.stdout" 2>&1 ||
            bad "-tp 2 $*: exit $? ($(grep -m1 error "$dir.stdout"))"
    }
    same_scales() {  # same_scales A B: two FP8 state files' scales; the weights' (E4M3's odd tensors) bit for bit
        "$PY" - "$1" "$2" <<'PYEOF'
import sys, numpy as np
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
ha, hb = np.frombuffer(a[:128], "<u8"), np.frombuffer(b[:128], "<u8")
if list(ha[:8]) != list(hb[:8]) or len(a) != len(b):
    print("headers differ: %s vs %s" % (list(ha[:8]), list(hb[:8]))); sys.exit(1)
L, H = int(ha[4]), int(ha[5])  # linears, history length; then per state amax, scale, scale_inv, history
fa, fb, off, scales = np.frombuffer(a[128:], "<f4"), np.frombuffer(b[128:], "<f4"), 0, []
for T in (2 * L, L):  # E4M3 (2i linear i's input, 2i + 1 its weight), E5M2 (its output's gradient)
    scales.append((fa[off + T: off + 2 * T].astype(np.float64), fb[off + T: off + 2 * T].astype(np.float64)))
    off += 3 * T + T * H
wa, wb = scales[0][0][1::2], scales[0][1][1::2]
rel = max(float(np.max(np.abs(x - y) / np.abs(x))) for x, y in scales)
equal = sum(int(np.sum(x == y)) for x, y in scales)
print("weights' scales %d of %d bit for bit, all %d of %d, the rest within %.2g" %
      (int(np.sum(wa == wb)), L, equal, 3 * L, rel))
sys.exit(0 if np.array_equal(wa, wb) and rel <= 0.1 else 1)
PYEOF
    }
    check_tp() {  # check_tp NAME REF_DIR TP_DIR: main.log, and the FP8 state after step 0
        local logs scales
        logs=$(compare_logs "$2/main.log" "$3/main.log" "$FP8_TOL" "$TP_NORM_TOL") || { bad "$1: main.log: $logs"; return; }
        scales=$(same_scales "$2/state_00000001_fp8.bin" "$3/state_00000001_fp8.bin") || { bad "$1: $scales"; return; }
        echo "ok   $1: $logs; $scales"
    }
    run_tp2 "$out/llama_tp2" $llama_tp -n 1
    check_tp "Llama fp8 -tp 2 vs 1 process" "$out/llama_tp_np1" "$out/llama_tp2"
    compare_val "Llama fp8 -tp 2 vs bf16" "$out/llama_tp2" "$out/llama_tp_bf16"
    # -fp8kt 1 at -tp 2: each rank keeps its shards' inputs; the run is -tp 2's to the bit
    run_tp2 "$out/llama_tp2_kept" $llama_tp -n 1 -fp8kt 1
    cmp -s "$out/llama_tp2/main.log" "$out/llama_tp2_kept/main.log" &&
        echo "ok   Llama fp8 -tp 2 -fp8kt 1: main.log byte for byte the -tp 2 run's" ||
        bad "Llama fp8 -tp 2 -fp8kt 1: main.log differs from the -tp 2 run's"
    run_tp2 "$out/gpt2_tp2" $gpt2 -n 1
    check_tp "GPT-2 fp8 -tp 2 vs 1 process" "$out/gpt2_fp8" "$out/gpt2_tp2"
    compare_val "GPT-2 fp8 -tp 2 vs bf16" "$out/gpt2_tp2" "$out/gpt2_bf16"
    # -sp 1: the norms' outputs gathered before QKV and gate/up, so the same tensors are cast
    run_tp2 "$out/llama_sp2" $llama_tp -n 1 -sp 1
    check_tp "Llama fp8 -tp 2 -sp 1 vs 1 process" "$out/llama_tp_np1" "$out/llama_sp2"
    # checkpoints across layouts: -tp 2's at step 4 resumed as one process, one process's at -tp 2;
    # each ends like the one process that never stopped
    for from in tp2 np1; do
        d=$out/llama_resumed_$from
        copy_step4 "$out/llama_$([ $from = tp2 ] && echo tp2 || echo tp_np1)" "$d"
        if [ $from = tp2 ]; then run train_gpt_fp8_emu "$d" $llama_tp -y 1
        else run_tp2 "$d" $llama_tp -y 1; fi
        if ! grep -q "resumed from .*model_00000004.bin at step 4" "$d.stdout"; then
            bad "-tp 2 checkpoints: the run from $from's did not resume at step 4"; continue
        fi
        # the resumed run's log from step 4 on against the one process's
        grep -v '^s:[0-3] ' "$out/llama_tp_np1/main.log" > "$d.ref.log"
        logs=$(compare_logs "$d.ref.log" "$d/main.log" "$FP8_TOL" "$TP_NORM_TOL") &&
            echo "ok   $([ $from = tp2 ] && echo "-tp 2's checkpoint at step 4 resumed as one process" ||
                echo "one process's checkpoint at step 4 resumed at -tp 2") ends like one process: $logs" ||
            bad "-tp 2 checkpoints, resumed from $from's: $logs"
    done
    # -fp8r current at -tp 2: each rank scales its shards by their own amax (no collective before
    # a cast: fp8_linears_all_reduce_amax), so a row-split weight's or output's shards cast with
    # scales of their own where one process has one; the GEMMs take each operand's scale with it,
    # and the run trains as one process does, within the -tp tolerances (measured: losses 1.5e-3,
    # norms 1.9%; GPT-2 1.4e-3 and 4.8%). Nothing of it is state: no scales compared.
    run train_gpt_fp8_emu "$out/llama_tp_current_np1" $llama_tp -fp8r current
    run_tp2 "$out/llama_tp2_current" $llama_tp -fp8r current
    logs=$(compare_logs "$out/llama_tp_current_np1/main.log" "$out/llama_tp2_current/main.log" "$FP8_TOL" \
        "$TP_NORM_TOL") && echo "ok   Llama fp8 -fp8r current -tp 2 vs 1 process: $logs" ||
        bad "Llama fp8 -fp8r current -tp 2 vs 1 process: main.log: $logs"

    # -pp (each rank its own emulated GPU): a stage holds the FP8 state of its own layers' linears,
    # their amaxes max-reduced over its replicas and tensor-parallel group only (no other stage
    # runs those layers); a checkpoint's one state file is every stage's put together on rank 0 in
    # the model's layer order, as one process writes it, and a resumed stage takes its layers'
    # slice of it. What is compared, measured before choosing:
    #  - the FP8 state after step 0 byte for byte one process's: a stage runs its layers on the
    #    rows one process does, and the stages pass activations and gradients on exactly, so every
    #    amax, scale and history is one process's, and a file put together in another order (or
    #    from stage 0 alone) is not. GPT-2 PP 2 (the tied wte on both ends), and a 4-layer Llama
    #    at PP 2 -vp 2 x 2 replicas at ZeRO 3 (stage 0 holds layers 0 and 2, stage 1 layers 1 and
    #    3; the replicas' rows are one process's micro-batches, halved); TP 2 x PP 2 as -tp 2
    #    (same_scales);
    #  - losses within FP8_TOL, norms within TP_NORM_TOL (measured: losses up to 1.9e-3, norms
    #    4.1%): from step 1 the runs part in the last bits, as bf16's PP 2 does from one process
    #    (the grad norm, over 1 here so that it clips, is the stages' parts summed in another
    #    order; GPT-2's tied wte gradient is the first stage's part plus the last's), and fp8
    #    magnifies that as at -tp;
    #  - checkpoints across layouts, the 4-layer Llama's at step 4: one process's resumed at PP 2
    #    -vp 2, PP 2 -vp 2's resumed as one process. The FP8 state after the resumed run's first
    #    step (state_00000005_fp8.bin) byte for byte the one the checkpoint's own run wrote (that
    #    step's amaxes come from the checkpoint's weights on either layout, its histories from the
    #    file), then losses to step 8 within FP8_TOL of the one process that never stopped.
    run_mp() {  # run_mp NP DIR FLAGS...: train_gpt_fp8_emu on NP ranks into DIR, the output in DIR.stdout
        local n=$1 dir=$2; shift 2
        "${mpi_env[@]}" mpirun -np "$n" env EMU_DEVICES="$n" ./train_gpt_fp8_emu "$@" -o "$dir" > "$dir.stdout" 2>&1 ||
            bad "-np $n $*: exit $? ($(grep -m1 error "$dir.stdout"))"
    }
    check_pp() {  # check_pp NAME REF_DIR PP_DIR: main.log, and the FP8 state after step 0 byte for byte
        local logs
        logs=$(compare_logs "$2/main.log" "$3/main.log" "$FP8_TOL" "$TP_NORM_TOL") || { bad "$1: main.log: $logs"; return; }
        cmp -s "$2/state_00000001_fp8.bin" "$3/state_00000001_fp8.bin" ||
            { bad "$1: the FP8 state after step 0 is not one process's"; return; }
        echo "ok   $1: $logs; the FP8 state after step 0 byte for byte one process's"
    }
    run_mp 2 "$out/gpt2_pp2" $gpt2 -n 1 -pp 2
    check_pp "GPT-2 fp8 -pp 2 vs 1 process" "$out/gpt2_fp8" "$out/gpt2_pp2"
    # -fp8kt 1 under -pp: said to be off, and the run -pp 2's to the bit
    run_mp 2 "$out/gpt2_pp2_kept" $gpt2 -n 1 -pp 2 -fp8kt 1
    if grep -q "^-fp8kt 1: off under -pp" "$out/gpt2_pp2_kept.stdout" &&
            cmp -s "$out/gpt2_pp2/main.log" "$out/gpt2_pp2_kept/main.log"; then
        echo "ok   GPT-2 fp8 -pp 2 -fp8kt 1: off under -pp, said so, main.log byte for byte the -pp 2 run's"
    else bad "GPT-2 fp8 -pp 2 -fp8kt 1: not said to be off, or main.log differs from the -pp 2 run's"; fi
    run_mp 4 "$out/llama_tp2pp2" $llama_tp -n 1 -tp 2 -pp 2
    check_tp "Llama fp8 -tp 2 -pp 2 vs 1 process" "$out/llama_tp_np1" "$out/llama_tp2pp2"
    llama4="${llama/l2c64/l4c64} -d 256 -n 1"  # 2 micro-batches a step: -vp takes them pp at a time
    run train_gpt_fp8_emu "$out/llama4_np1" $llama4
    run_mp 4 "$out/llama4_vp2" $llama4 -b 2 -pp 2 -vp 2 -z 3
    grep -q "^pipeline parallelism: 2 stages x 2 virtual" "$out/llama4_vp2.stdout" || bad "-pp 2 -vp 2: no plan line"
    check_pp "Llama (4 layers) fp8 -pp 2 -vp 2 x 2 replicas -z 3 vs 1 process" "$out/llama4_np1" "$out/llama4_vp2"
    # uneven stages (-pl): stage 0 holds layer 0's linears, stage 1 layers 1-3's
    run_mp 2 "$out/llama4_pl13" $llama4 -pp 2 -pl 1,3
    check_pp "Llama (4 layers) fp8 -pp 2 -pl 1,3 vs 1 process" "$out/llama4_np1" "$out/llama4_pl13"
    for from in np1 vp2; do
        d=$out/llama4_resumed_$from
        copy_step4 "$out/llama4_$from" "$d"
        if [ $from = vp2 ]; then run train_gpt_fp8_emu "$d" $llama4 -y 1
        else run_mp 2 "$d" $llama4 -pp 2 -vp 2 -y 1; fi
        what=$([ $from = vp2 ] && echo "-pp 2 -vp 2's checkpoint at step 4 resumed as one process" ||
            echo "one process's checkpoint at step 4 resumed at -pp 2 -vp 2")
        if ! grep -q "resumed from .*model_00000004.bin at step 4" "$d.stdout"; then bad "$what: did not resume"; continue; fi
        if ! cmp -s "$out/llama4_$from/state_00000005_fp8.bin" "$d/state_00000005_fp8.bin"; then
            bad "$what: the FP8 state after step 4 is not the uninterrupted run's"; continue
        fi
        grep -v '^s:[0-3] ' "$out/llama4_np1/main.log" > "$d.ref.log"
        logs=$(compare_logs "$d.ref.log" "$d/main.log" "$FP8_TOL" "$TP_NORM_TOL") &&
            echo "ok   $what: the FP8 state after step 4 byte for byte its own run's; ends like one process: $logs" ||
            bad "$what: $logs"
    done

    # a shard's dimension that FP8 GEMMs refuse: each rank stops with the same one line
    why="flag -tp 2: train_gpt_fp8's FP8 GEMMs need every dimension a multiple of 16, and a rank's MLP hidden units F is 88"
    "${np2[@]}" ./train_gpt_fp8_emu $llama -tp 2 -o "$out/refused_tp" > "$out/refused_tp.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && [ "$(grep -- "$why" "$out/refused_tp.log" | sort -u | wc -l)" = 1 ] && [ ! -e "$out/refused_tp/main.log" ]; then
        echo "ok   refuses (-tp 2, F 176): $(grep -m1 -- "$why" "$out/refused_tp.log" | cut -c1-160)"
    else bad "-tp 2 with F 176: exit $rc, not one line '$why' (see $out/refused_tp.log)"; fi
else
    echo "ok   (2 ranks not checked: no mpirun, or train_gpt_fp8_emu built without MPI)"
fi

# The memory plan counts the FP8 copies and scales: (1) what a run says they take is what its
# peak device memory grows by over the bf16 trainer's, measured by the emulated GPU's allocator
# (one step of a Llama whose gate/up (2F = 4096 columns) is the widest linear: about 6.5 MiB; the
# peaks are whole MiB, hence the 1 MiB); (2) the plan's refusal of Meta's 8B counts them, by
# their arithmetic: three fp8 copies of B*T x 2F (the input, the gradient and its transpose), one
# of the 2F x C weight, and 3 x 4 x 32 tensors' amax, scale, 1/scale and 1024 steps of history
mem="$data -e llama3:l1c128h2kv1f2048v300 -b 4 -t 128 -x 1 -v 0 -s 0 -n 0"
run train_gpt_bf16_emu "$out/mem_bf16" $mem
run train_gpt_fp8_emu "$out/mem_fp8" $mem
peak() { grep -o 'peak device memory [0-9]* MiB' "$1" | cut -d' ' -f4; }
said=$(grep -o 'scratch and scales [0-9.]* MiB' "$out/mem_fp8.stdout" | cut -d' ' -f4)
awk -v a="$(peak "$out/mem_fp8.stdout")" -v b="$(peak "$out/mem_bf16.stdout")" -v s="$said" 'BEGIN {
    d = a - b - s; if (d < 0) d = -d
    if (a == "" || b == "" || s == "" || s < 5 || d > 1) {
        printf "FAIL fp8 scratch: peak %s MiB vs bf16 %s MiB, the run said %s MiB\n", a, b, s; exit 1 }
    printf "ok   fp8 scratch: peak device memory %d MiB vs bf16 %d MiB, %d more; the run said %s MiB\n", a, b, a - b, s }' ||
    fail=1
plan_scratch() {  # plan_scratch BINARY: the 8B refusal's "workspace [and FP8 scratch] X" in GiB
    (ulimit -v 8000000; timeout 60 ./$1 -e llama3.1:8b -b 4 -t 1024 2>&1) | grep -o 'scratch [0-9.]*;\|workspace [0-9.]*;' | tr -d ';' | cut -d' ' -f2
}
awk -v a="$(plan_scratch train_gpt_fp8_emu)" -v b="$(plan_scratch train_gpt_bf16_emu)" 'BEGIN {
    BT = 4 * 1024; C = 4096; F2 = 2 * 14336; tensors = 3 * 4 * 32
    want = (3 * BT * F2 + F2 * C + tensors * (3 + 1024) * 4 + tensors * 4) / 1073741824
    d = a - b - want; if (d < 0) d = -d
    if (a == "" || b == "" || d > 0.01) { printf "FAIL the 8B memory plan: scratch %s GiB in fp8, %s in bf16, want %.3f more\n", a, b, want; exit 1 }
    printf "ok   the 8B memory plan counts the FP8 scratch: %s GiB vs bf16 %s GiB (%.3f GiB by its arithmetic)\n", a, b, want }' ||
    fail=1

# without the FP8 state, or with a byte of its E4M3 state flipped (after the 128-byte header)
expect_damaged_resume "$out/llama_fp8" state_00000004_fp8.bin 200 "E4M3 scaling state checksum mismatch" \
    ./train_gpt_fp8_emu $llama -n 4 -y 1
expect_error "compute capability 8.0" "train_gpt_fp8 needs a GPU with FP8 tensor cores" \
    env EMU_CC=80 ./train_gpt_fp8_emu $llama
expect_error "-fp8r" "flag -fp8r: unknown FP8 scaling 'late'" ./train_gpt_bf16_emu $llama -fp8r late
expect_error "-fp8fa" "flag -fp8fa: expected an integer in .0, 2., got '3'" ./train_gpt_fp8_emu $llama -fp8fa 3
exit $fail
