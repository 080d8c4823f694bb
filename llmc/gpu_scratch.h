// gpu_scratch.h: the GPU trainers' scratch beside the model's own buffers, in bytes, from the
// configuration alone: the encoder backward's buckets, train_gpt_fp8's FP8 copies and scales,
// -ma timed's scratch outputs and -ak 2's fp32 dq. Host arithmetic, no CUDA: the allocations
// (llmc/cuda/encoder.cuh, fp8_linear.cuh, linear.cuh, matmul_algos.cuh, attention_mma.cuh), the
// trainers' memory plan (train_gpt.cu) and ./plan (llmc/plan.h) all size them here, so that what
// is planned is what is allocated.
// defines: ENCODER_CHUNK_ROWS, ENCODER_HEAVY_ROWS, encoder_buckets_ints, encoder_buckets_max_chunks,
//          encoder_buckets_device_bytes, Fp8Recipe, FP8_AMAX_HISTORY_DEFAULT, fp8_state_tensors_per_linear,
//          fp8_scaling_floats, FP8_GEMM_SCALE_STRIDE, fp8_scaling_gemm_offset, fp8_scaling_alloc_floats, fp8_linears_bytes,
//          LINEARS_PER_LAYER, BlockLinear, block_linears, LinearsShape, linears_shape, LinearsFp8Options, fp8_act_in_cast,
//          linears_kept_inputs_bytes, linears_kept_weights_bytes, linears_fp8_bytes, matmul_timing_scratch_bytes,
//          model_matmul_timing_scratch_bytes, attention_dq_bytes
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "families.h"  // defines: ModelConfig, FAMILY_LLAMA3 (gpt2_dims, llama_dims)

// ---------------------------------------------------------------------------------------
// The encoder backward (llmc/cuda/encoder.cuh): positions bucketed by token on the host, copied
// to the device, and the fp32 partial sums of the heavy buckets' chunks.
//
// Heavy buckets. The one-pass kernel's time is its longest bucket's serial loop: at GPT-2's
// shape (65,536 positions of C=768, 100 MB of bf16 dout, ~35 us of HBM time on an H100) a loop
// step is a few hundred ns of load latency, so a bucket of a few hundred rows already outlasts
// the reading of the batch. A chunk of 64 rows is a chain about that long, and a batch of one
// token gives 1,024 chunks, ~8 blocks on each of an H100's 132 SMs; its 1,024 partials are
// then a chain of the same order in the heavy kernel (8 loads in flight).
// Buckets up to 2 chunks stay whole: a second pass over partials would not pay for them, and
// it bounds the chunks of a batch of N positions by 1.5 N / 64 (a bucket of L > 128 rows
// makes ceil(L / 64) <= 1.5 L / 64 chunks), so the partials (fp32) are at most 0.1 N C bytes.
constexpr int ENCODER_CHUNK_ROWS = 64;
constexpr int ENCODER_HEAVY_ROWS = 2 * ENCODER_CHUNK_ROWS;

// items: tokens and starts (at most one item a position), positions; heavy buckets' tokens
// and first slots (a heavy bucket has over ENCODER_HEAVY_ROWS positions)
inline size_t encoder_buckets_ints(size_t max_N) {
    return 3 * max_N + 1 + 2 * (max_N / (ENCODER_HEAVY_ROWS + 1)) + 1;
}
inline size_t encoder_buckets_max_chunks(size_t max_N) { return 3 * max_N / 2 / ENCODER_CHUNK_ROWS; }

// What encoder_buckets_init allocates on the device for batches of max_N positions of C channels.
inline size_t encoder_buckets_device_bytes(size_t max_N, int C) {
    return encoder_buckets_ints(max_N) * sizeof(int) + encoder_buckets_max_chunks(max_N) * C * sizeof(float);
}

// ---------------------------------------------------------------------------------------
// train_gpt_fp8's linear layers (llmc/cuda/fp8.cuh, fp8_linear.cuh, linear.cuh).

enum Fp8Recipe { FP8_RECIPE_DELAYED, FP8_RECIPE_CURRENT };
constexpr int FP8_AMAX_HISTORY_DEFAULT = 1024;  // MLPerf's GPT-3 config (Transformer Engine's default is 1)

// train_gpt_fp8's two scaling states, each a buffer of tensors: state 0 (E4M3) 2 tensors a
// linear, its input and weight; state 1 (E5M2) 1, its output's gradient
inline size_t fp8_state_tensors_per_linear(int i) { return i == 0 ? 2 : 1; }

// The floats of a scaling state's one buffer (fp8_scaling_init's layout, which checkpoints save
// whole): an amax, a scale and a scale_inv a tensor, then each tensor's history of amaxes
// (history floats: the recipe's history length under delayed scaling, 1 under current).
inline size_t fp8_scaling_floats(size_t tensors, size_t history) { return tensors * (3 + history); }

// cuBLASLt's FP8 GEMM wants its scale pointers 16-byte aligned: on an H200 (cuBLASLt 13.1,
// 2026-11-27) it refused, with CUBLAS_STATUS_NOT_SUPPORTED, every answer of its heuristic for an
// A_SCALE_POINTER 4 bytes past such a boundary (the cuBLAS team told PyTorch the same:
// pytorch/pytorch#159957). So a state keeps each tensor's scale_inv a second time, the copy the
// GEMMs read, FP8_GEMM_SCALE_STRIDE floats (16 bytes) apart, after the floats a checkpoint saves
// (which stay as they were). The floats a state allocates:
constexpr size_t FP8_GEMM_SCALE_STRIDE = 4;
inline size_t fp8_scaling_gemm_offset(size_t tensors, size_t history) {
    return (fp8_scaling_floats(tensors, history) + FP8_GEMM_SCALE_STRIDE - 1) / FP8_GEMM_SCALE_STRIDE *
           FP8_GEMM_SCALE_STRIDE;
}
inline size_t fp8_scaling_alloc_floats(size_t tensors, size_t history) {
    return fp8_scaling_gemm_offset(tensors, history) + tensors * FP8_GEMM_SCALE_STRIDE;
}

// The device bytes fp8_linears_init allocates for those arguments: the four fp8 copies (a byte a
// value), both scaling states and the amaxes' collective buffer.
inline size_t fp8_linears_bytes(int num_linears, Fp8Recipe recipe, size_t act_capacity, size_t weight_capacity,
                                int history_len = FP8_AMAX_HISTORY_DEFAULT) {
    const size_t history = recipe == FP8_RECIPE_DELAYED ? (size_t)history_len : 1;
    size_t scaling = 0, tensors = 0;
    for (int i = 0; i < 2; i++) {
        const size_t n = fp8_state_tensors_per_linear(i) * (size_t)num_linears;
        scaling += fp8_scaling_alloc_floats(n, history);
        tensors += n;
    }
    return 3 * act_capacity + weight_capacity + scaling * sizeof(float) + tensors * sizeof(uint32_t);
}

// GPT-2: qkv, attproj, fc, fcproj; Llama 3: qkv, attproj, gate/up, down
constexpr int LINEARS_PER_LAYER = 4;

// One of a block's linears (-tp: a rank's part of it): K inputs and OC outputs, each named as a
// start-up line names it, whether it has a bias (GPT-2's) and whether GELU follows it (GPT-2's fc).
struct BlockLinear {
    size_t K, OC;
    const char *K_name, *OC_name;
    bool bias, gelu;
};

// A block's linears in the order LINEARS_PER_LAYER numbers them: the one list of the families'
// linear shapes that the FP8 scratch, -ma timed's scratch and the FP8 dimension check all read.
inline std::vector<BlockLinear> block_linears(const ModelConfig& mc, int tp = 1) {
    if (mc.family == FAMILY_LLAMA3) {
        const LlamaDims d = llama_dims(mc.llama, tp);
        const size_t C = d.C, QKV = d.QKV, A = d.A, F = d.F;
        const char *c = "channels C", *a = "attention channels (query heads x head size)", *f = "MLP hidden units F";
        return {{C, QKV, c, "QKV outputs (query, key and value heads x head size)", false, false},
                {A, C, a, c, false, false},
                {C, 2 * F, c, "gate and up outputs 2F", false, false},
                {F, C, f, c, false, false}};
    }
    const GPT2Dims d = gpt2_dims(mc.gpt2, tp, 0);
    const size_t C = mc.gpt2.channels, A = d.A, H = d.H;
    const char *c = "channels C", *a = "attention channels C/tp", *h = "MLP hidden units 4C/tp";
    return {{C, 3 * A, c, "QKV outputs 3C/tp", true, false},
            {A, C, a, c, true, false},
            {C, H, c, h, true, true},
            {H, C, h, c, true, false}};
}

// The FP8 scratch's shape for a model of this configuration (-tp: a rank's part of it): the most
// columns any linear's input or output has (B*T rows each) and the most values of one weight.
struct LinearsShape {
    size_t widest;
    size_t largest_weight;
};
inline LinearsShape linears_shape(const ModelConfig& mc, int tp = 1) {
    LinearsShape s = {0, 0};
    for (const BlockLinear& l : block_linears(mc, tp))
        s = {std::max({s.widest, l.K, l.OC}), std::max(s.largest_weight, l.K * l.OC)};
    return s;
}

// train_gpt_fp8's flags that change what its linears allocate
struct LinearsFp8Options {
    bool current_scaling = false;  // -fp8r current: no amax history
    bool keep_inputs = false;      // -fp8kt 1: every linear's input kept, cast and transposed, forward to backward
    bool keep_weights = false;     // -fp8kw 1: every linear's weight kept cast, as is and transposed, for the step
};

// Whether train_gpt_fp8 makes the MLPs' activations in its casts at BT rows (linear_act_in_cast:
// delayed scaling, rows FP8 GEMMs take): then GELU's and SwiGLU's outputs are never written in
// training, and the activation plans keep one layer of them (for a sample's bf16 forward).
inline bool fp8_act_in_cast(bool current_scaling, size_t BT) { return !current_scaling && BT % 16 == 0; }

// -fp8kt 1 (fp8_linear.cuh): every linear's input kept from the forward for the backward, cast
// and transposed (a byte a value), num_layers layers at BT rows (-tp: a rank's part)
inline size_t linears_kept_inputs_bytes(const ModelConfig& mc, int num_layers, size_t BT, int tp = 1) {
    size_t inputs = 0;
    for (const BlockLinear& l : block_linears(mc, tp)) inputs += l.K;
    return (size_t)num_layers * BT * inputs;
}

// -fp8kw 1: every linear's weight kept cast for the step, as is and transposed (2 bytes a value)
inline size_t linears_kept_weights_bytes(const ModelConfig& mc, int num_layers, int tp = 1) {
    size_t values = 0;
    for (const BlockLinear& l : block_linears(mc, tp)) values += l.K * l.OC;
    return (size_t)num_layers * 2 * values;
}

// What train_gpt_fp8's linears take for num_layers layers at BT rows (-tp: a rank's part) with
// options o: linears_init's allocation.
inline size_t linears_fp8_bytes(const ModelConfig& mc, int num_layers, size_t BT, const LinearsFp8Options& o,
                                int tp = 1) {
    const LinearsShape shape = linears_shape(mc, tp);
    return fp8_linears_bytes(num_layers * LINEARS_PER_LAYER, o.current_scaling ? FP8_RECIPE_CURRENT : FP8_RECIPE_DELAYED,
                             BT * shape.widest, shape.largest_weight) +
           (o.keep_inputs ? linears_kept_inputs_bytes(mc, num_layers, BT, tp) : 0) +
           (o.keep_weights ? linears_kept_weights_bytes(mc, num_layers, tp) : 0);
}

// ---------------------------------------------------------------------------------------
// -ma timed (llmc/cuda/matmul_algos.cuh): the candidates of a product run into scratch outputs,
// allocated for its timing and freed after: D (m,n); with the GELU forward epilogue its aux (m,n);
// with a bias-gradient epilogue the bias gradient (bias_out values: BGRADB's n, DGELU_BGRAD's m);
// value_bytes a value (floatX).
inline size_t matmul_timing_scratch_bytes(size_t m, size_t n, bool aux_out, size_t bias_out, size_t value_bytes) {
    return (m * n * (aux_out ? 2 : 1) + bias_out) * value_bytes;
}

// The largest of those over every cuBLASLt product of a training step at BT rows (-tp: a rank's
// part; head: this rank holds the classifier, -pp's last stage), the bound the memory plan counts
// and matmul_time_candidates checks each product against. As matmul.cuh's comment writes them
// (column-major D (m,n)), a linear of K inputs and OC outputs runs
//   forward  m=OC n=BT   (+ aux with GELU in the epilogue: -ge >= 1, GPT-2's fc, OC % 8 == 0)
//   dinp     m=K  n=BT   (+ with -bg 2 the bias gradient (K) of the layer before the GELU, GPT-2's
//                         fc, from fcproj's dinp: counted at every dinp, a bound)
//   dweight  m=K  n=OC   (+ the bias gradient with -bg 1, where the linear has a bias)
// and so does the classifier (K = C, OC = a rank's vocabulary rows), without bias or GELU.
// Overcounts where cuBLASLt turns an epilogue down (the plain product then runs) and where a
// train_gpt_fp8 linear runs as an FP8 GEMM (never timed): a bound, not a guess.
inline size_t model_matmul_timing_scratch_bytes(const ModelConfig& mc, size_t BT, int tp, bool head, bool gelu_aux,
                                                int bias_grad_epilogue, size_t value_bytes) {
    std::vector<BlockLinear> linears = block_linears(mc, tp);
    const size_t C = model_config_channels(mc);
    const size_t V = mc.family == FAMILY_LLAMA3 ? llama_dims(mc.llama, tp).Vp : gpt2_dims(mc.gpt2, tp, 0).Vp;
    if (head) linears.push_back({C, V, "", "", false, false});
    size_t most = 0;
    for (const BlockLinear& l : linears) {
        most = std::max({most, matmul_timing_scratch_bytes(l.OC, BT, l.gelu && gelu_aux && l.OC % 8 == 0, 0,
                                                           value_bytes),
                         matmul_timing_scratch_bytes(l.K, BT, false, bias_grad_epilogue == 2 ? l.K : 0, value_bytes),
                         matmul_timing_scratch_bytes(l.K, l.OC, false, l.bias && bias_grad_epilogue == 1 ? l.OC : 0,
                                                     value_bytes)});
    }
    return most;
}

// ---------------------------------------------------------------------------------------
// -ak 2 (llmc/cuda/attention_mma.cuh, attention_backward_mma with dq_accum): the one-kernel
// backward sums dq in fp32 over BT rows of the attention's width (a rank's heads times the head
// size: -tp splits the heads), one buffer every layer reuses.
inline size_t attention_dq_bytes(const ModelConfig& mc, size_t BT, int tp) {
    const size_t A = mc.family == FAMILY_LLAMA3 ? llama_dims(mc.llama, tp).A : gpt2_dims(mc.gpt2, tp, 0).A;
    return BT * A * sizeof(float);
}
