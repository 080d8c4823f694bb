// linear.cuh: the linear layers of the models' blocks, one call whatever the binary: in
// train_gpt_fp8 (ENABLE_FP8) FP8 GEMMs with the layer's slot of the model's FP8 state
// (fp8_linear.cuh), in train_gpt_fp32 and train_gpt_bf16 matmul.cuh's GEMMs, the state empty and
// the step's hooks doing nothing. The embeddings and the classifier never come here: as in
// Transformer Engine's recipe they stay in bf16 (the logits' GEMM is the most sensitive one).
// defines: ModelLinears, LinearSlot, LINEARS_PER_LAYER, linear_slot, linear_forward, linear_backward,
//          linears_init, linears_free, linears_step_begin, linears_step_end
#pragma once
#include "common.cuh"    // defines: CudaContext, floatX
#include "matmul.cuh"    // defines: matmul_forward, matmul_backward
#include "comm_gpu.cuh"  // defines: GpuComm
#ifdef ENABLE_FP8
#include "fp8_linear.cuh"  // defines: Fp8Linears, fp8_linear, fp8_linear_forward, fp8_linear_backward, ...
typedef Fp8Linears ModelLinears;
#else
struct ModelLinears {};  // the bf16 and fp32 builds' linears keep no state
#endif

// GPT-2: qkv, attproj, fc, fcproj; Llama 3: qkv, attproj, gate/up, down
constexpr int LINEARS_PER_LAYER = 4;

// which state a linear layer uses: linear k of the model's layer l (the model's own numbering,
// the stage's layers under -pp)
struct LinearSlot {
#ifdef ENABLE_FP8
    Fp8Linear fp8;
#endif
};

inline LinearSlot linear_slot(const ModelLinears& m, int l, int k) {
#ifdef ENABLE_FP8
    return LinearSlot{fp8_linear(m, l * LINEARS_PER_LAYER + k)};
#else
    (void)m, (void)l, (void)k;
    return LinearSlot{};
#endif
}

// matmul_forward's and matmul_backward's arguments after the slot
inline void linear_forward(const CudaContext& ctx, LinearSlot s, floatX* out, floatX* pre_gelu, const floatX* inp,
                           const floatX* weight, const floatX* bias, int BT, int C, int OC) {
#ifdef ENABLE_FP8
    fp8_linear_forward(ctx, s.fp8, out, pre_gelu, inp, weight, bias, BT, C, OC);
#else
    (void)s;
    matmul_forward(ctx, out, pre_gelu, inp, weight, bias, BT, C, OC);
#endif
}

inline void linear_backward(const CudaContext& ctx, LinearSlot s, floatX* dinp, floatX* dweight, floatX* dbias,
                            const floatX* dout, const floatX* inp, const floatX* weight, int BT, int C, int OC,
                            bool accumulate_dinp, const floatX* pre_gelu = nullptr) {
#ifdef ENABLE_FP8
    fp8_linear_backward(ctx, s.fp8, dinp, dweight, dbias, dout, inp, weight, BT, C, OC, accumulate_dinp, pre_gelu);
#else
    (void)s;
    matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, BT, C, OC, accumulate_dinp, pre_gelu);
#endif
}

// num_layers layers of LINEARS_PER_LAYER linears; widest: the most columns any of their inputs
// or outputs has (BT rows each); largest_weight: the most values of one weight. Delayed scaling.
inline void linears_init(ModelLinears* m, int num_layers, int BT, int widest, size_t largest_weight) {
#ifdef ENABLE_FP8
    fp8_linears_init(m, num_layers * LINEARS_PER_LAYER, FP8_RECIPE_DELAYED, (size_t)BT * widest, largest_weight);
#else
    (void)m, (void)num_layers, (void)BT, (void)widest, (void)largest_weight;
#endif
}

inline void linears_free(ModelLinears* m) {
#ifdef ENABLE_FP8
    fp8_linears_free(m);
#else
    (void)m;
#endif
}

// A step's first micro-step: what the forwards since the last update measured (validation,
// sampling) is forgotten, so that only the step's own tensors set the next scales.
inline void linears_step_begin(const CudaContext& ctx, const ModelLinears& m) {
#ifdef ENABLE_FP8
    fp8_linears_discard_amax(ctx, m);
#else
    (void)ctx, (void)m;
#endif
}

// After a step's update (not after a skipped step: the next step_begin forgets its amaxes): the
// amaxes max-reduced over the data-parallel ranks (gc), then the scales from their histories.
inline void linears_step_end(GpuComm* gc, const CudaContext& ctx, const ModelLinears& m) {
#ifdef ENABLE_FP8
    fp8_linears_all_reduce_amax(gc, ctx, m);
    fp8_linears_update(ctx, m);
#else
    (void)gc, (void)ctx, (void)m;
#endif
}
