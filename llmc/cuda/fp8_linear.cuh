// fp8_linear.cuh: the fully connected layer of train_gpt_fp8 (issue 26): matmul_forward's and
// matmul_backward's call shape, its three GEMMs in FP8 through cuBLASLt, the per-layer scaling
// state of Transformer Engine's HYBRID recipe, and the step's amax reduction and scale update.
// defines: Fp8Slots, fp8_slots_init, fp8_slots_free, fp8_slot, Fp8Linears, fp8_linears_init, fp8_linears_keep_inputs,
//          fp8_linears_keep_weights, fp8_linears_forget_weights, fp8_linears_free, Fp8Linear, fp8_linear,
//          fp8_linear_weight, fp8_linear_forward, fp8_linear_backward, fp8_linears_all_reduce_amax,
//          fp8_linears_update, fp8_linears_discard_amax
// CPU reference: dev/cuda/fp8_linear.cu (the inputs quantized per the OCP spec with the scales the
// recipe gives, decoded, double products)
//
// HYBRID: what goes forward is E4M3 (the layer's input and its weight: precision), what comes
// back is E5M2 (the output's gradient: range). Each tensor has its own scale:
//   forward   out (BT,OC)  = inp (BT,C) W^T              fp8_cast(inp), fp8_cast(W)
//   backward  dinp (BT,C)  = dout (BT,OC) W (OC,C)       fp8_cast_transpose(dout) -> dout and dout^T,
//             dW (OC,C)   += dout^T (OC,BT) inp (BT,C)   fp8_cast_transpose(W) -> W^T, (inp) -> inp^T
// As cuBLASLt's FP8 GEMM takes only TN (fp8.cuh: both operands with k contiguous), in its terms
// (column-major D (m,n) = A^T B, A stored (k,m), B (k,n)):
//   forward   out^T (OC,BT)  A = W (OC,C)       B = inp (BT,C)      m=OC n=BT k=C
//   dinp      dinp^T (C,BT)  A = W^T (C,OC)     B = dout (BT,OC)    m=C  n=BT k=OC
//   dweight   dW^T (C,OC)    A = inp^T (C,BT)   B = dout^T (OC,BT)  m=C  n=OC k=BT, beta 1 (+=)
// so BT, C and OC must be multiples of 16 (fp8_matmul stops the program with one line if not).
// Every amax comes out of the cast that reads the tensor (no pass of its own), a running max over
// the step's micro-steps; the backward casts inp and W again with the forward's scales (delayed
// scaling changes them only between steps), which maxes the same amax in again. The fp8 copies are
// scratch the layers share, used only inside one call: nothing in fp8 lives across the forward and
// backward, so recompute (-r) and the activation memory are as in bf16. Unless the layers keep
// their inputs (fp8_linears_keep_inputs, the trainer's -fp8kt 1): then the forward's cast of inp
// also writes inp^T, into the layer's own buffer, and the backward takes it from there instead of
// reading inp (or the pre-activation) again: the same codes with the same scale, so the same
// bits, for a byte a value of every linear's input held from the forward to the backward. And
// unless they keep their weights (fp8_linears_keep_weights, -fp8kw 1): then a step's first call
// of a layer casts W and W^T in one read, kept for the step's other calls (delayed scaling's
// scales and the weights change only between steps), for 2 bytes a weight value held.
//
// The GELU (GPT-2's fc) runs as a separate kernel, gelu_forward / gelu_backward, on the bf16 GEMM
// output, not in the epilogue as matmul.cuh can: cuBLASLt's FP8 GEMMs may refuse the GELU_AUX and
// DGELU epilogues (NVIDIA's own tests let them, and the emulated cuBLASLt does), and one fallback
// path is simpler to test than two. It costs one pass over the (BT,4C) tensor each way.
// The bias rides the GEMM's BIAS epilogue forward (bf16, which cuBLASLt's FP8 table allows); its
// gradient, as BGRADB has no FP8 form, is summed by the cast-transpose of dout from the same read
// (Transformer Engine's cast_transpose_dbias), not by a pass of its own.
// FAST_ACCUM: on for the forward GEMM, off for the two backward ones, Transformer Engine's
// default: the gradients' sums over BT (dweight) are the long ones whose low bits matter. The
// trainer's -fp8fa sets either (0: none, 2: the backward's too, the two thirds of the FLOPs that
// run at 1.23x bf16's without it where the forward runs at 1.55x with it, at d48's shapes).
#pragma once
#ifndef ENABLE_BF16
#error "fp8_linear.cuh is train_gpt_fp8's, a bf16 build (-DENABLE_BF16): its bias and outputs are bf16"
#endif
#include "common.cuh"    // defines: CudaContext, floatX, CHECK, CHECK_CUDA
#include "fp8.cuh"       // defines: fp8_cast, fp8_cast_transpose, fp8_amax, Fp8Scaling, fp8_scaling_update, fp8_matmul
#include "gelu.cuh"      // defines: gelu_forward, gelu_backward
#include "comm_gpu.cuh"  // defines: GpuComm, gpu_all_reduce_max_u32

// One fp8 buffer a linear that lives across calls, all carved from one allocation: linear i's at
// base + at[i], values[i] codes at most, 16-byte aligned, and what it holds now in held[i] (0:
// nothing yet; its owner says what else). Host arrays; base nullptr where there are none.
struct Fp8Slots {
    __nv_fp8_e4m3* base;
    size_t bytes;
    size_t *at, *values;
    int* held;
};

inline void fp8_slots_init(Fp8Slots* k, int n, const size_t* values) {
    CHECK(n > 0 && k->base == nullptr, "%d slots, already %p", n, (void*)k->base);
    k->at = (size_t*)calloc((size_t)n, sizeof(size_t));
    k->values = (size_t*)calloc((size_t)n, sizeof(size_t));
    k->held = (int*)calloc((size_t)n, sizeof(int));
    CHECK(k->at != nullptr && k->values != nullptr && k->held != nullptr, "out of host memory");
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        k->at[i] = at;
        k->values[i] = values[i];
        at += (values[i] + 15) / 16 * 16;
    }
    k->bytes = at;
    CHECK_CUDA(cudaMalloc(&k->base, std::max<size_t>(at, 16)));
}

inline void fp8_slots_free(Fp8Slots* k) {
    if (k->base != nullptr) CHECK_CUDA(cudaFree(k->base));
    free(k->at);
    free(k->values);
    free(k->held);
    *k = Fp8Slots{};
}

// linear i's slot, or nullptr where there are none or n values do not fit in it
inline __nv_fp8_e4m3* fp8_slot(const Fp8Slots& k, int i, size_t n) {
    if (k.base == nullptr || n > k.values[i]) return nullptr;
    return k.base + k.at[i];
}

// the FP8 state of a model's linear layers, all in two scaling states (one per format) so that
// one collective reduces every amax, and the scratch their fp8 copies share
struct Fp8Linears {
    Fp8Scaling e4m3;            // 2 tensors a layer: 2i linear i's input, 2i + 1 its weight
    Fp8Scaling e5m2;            // 1 tensor a layer: i the gradient of linear i's output
    int num_linears;
    bool fast_accum_forward;    // the forward GEMM with FAST_ACCUM (default true)
    bool fast_accum_backward;   // the two backward GEMMs with FAST_ACCUM (default false)
    size_t act_capacity;        // elements of the largest activation or gradient (BT x the widest in or out)
    size_t weight_capacity;     // elements of the largest weight (OC x C)
    __nv_fp8_e4m3* inp_q;       // (act_capacity) inp forward, inp^T backward
    __nv_fp8_e4m3* weight_q;    // (weight_capacity) W forward, W^T backward
    __nv_fp8_e5m2* dout_q;      // (act_capacity) dout
    __nv_fp8_e5m2* dout_t;      // (act_capacity) dout^T
    uint32_t* amax_bits;        // (3 num_linears) both states' amaxes side by side, for the collective
    Fp8Slots kept_inputs;       // fp8_linears_keep_inputs: linear i's input^T, kept from its forward (held: its rows)
    Fp8Slots kept_weights;      // fp8_linears_keep_weights: linear i's W then W^T, this step's (held: 1)
};

// One linear layer's view: which tensors of the two states are its own.
struct Fp8Linear {
    const Fp8Linears* set;
    int index;
};

inline Fp8Linear fp8_linear(const Fp8Linears& set, int index) {
    CHECK(index >= 0 && index < set.num_linears, "linear %d of %d", index, set.num_linears);
    return Fp8Linear{&set, index};
}

// recipe: FP8_RECIPE_DELAYED (history_len steps of amaxes, "max") or FP8_RECIPE_CURRENT; every
// scale starts at 1. act_capacity and weight_capacity: the largest BT x C (or BT x OC) and OC x C
// of the layers that will run. What it allocates: fp8_linears_bytes (llmc/gpu_scratch.h), which
// the memory plan counts.
inline void fp8_linears_init(Fp8Linears* s, int num_linears, Fp8Recipe recipe, size_t act_capacity,
                             size_t weight_capacity, int history_len = FP8_AMAX_HISTORY_DEFAULT) {
    CHECK(num_linears > 0 && act_capacity > 0 && weight_capacity > 0, "num_linears=%d act=%zu weight=%zu", num_linears,
          act_capacity, weight_capacity);
    fp8_scaling_init(&s->e4m3, recipe, Fp8Traits<__nv_fp8_e4m3>::max, (int)fp8_state_tensors_per_linear(0) * num_linears,
                     history_len);
    fp8_scaling_init(&s->e5m2, recipe, Fp8Traits<__nv_fp8_e5m2>::max, (int)fp8_state_tensors_per_linear(1) * num_linears,
                     history_len);
    s->num_linears = num_linears;
    s->fast_accum_forward = true;
    s->fast_accum_backward = false;
    s->act_capacity = act_capacity;
    s->weight_capacity = weight_capacity;
    CHECK_CUDA(cudaMalloc(&s->inp_q, act_capacity));
    CHECK_CUDA(cudaMalloc(&s->weight_q, weight_capacity));
    CHECK_CUDA(cudaMalloc(&s->dout_q, act_capacity));
    CHECK_CUDA(cudaMalloc(&s->dout_t, act_capacity));
    CHECK_CUDA(cudaMalloc(&s->amax_bits, 3 * (size_t)num_linears * sizeof(uint32_t)));
    s->kept_inputs = Fp8Slots{};
    s->kept_weights = Fp8Slots{};
}

// Each linear i's input kept from its forward for its backward, cast and transposed: values[i]
// of them at most (BT x its input width).
inline void fp8_linears_keep_inputs(Fp8Linears* s, const size_t* values) {
    fp8_slots_init(&s->kept_inputs, s->num_linears, values);
}

// Each linear i's weight cast once a step, as is and transposed, by its first call in the step
// (the cast-transpose, one read), for every other call of the step (the backward's, the other
// micro-steps', recompute's): values[i] = 2 x its OC x C. fp8_linears_forget_weights when they
// change.
inline void fp8_linears_keep_weights(Fp8Linears* s, const size_t* values) {
    fp8_slots_init(&s->kept_weights, s->num_linears, values);
}

// The kept weights no longer this step's: the step begins (its scales are set, its casts must
// record the amaxes) or the weights were updated (a validation's forward must not take old ones)
inline void fp8_linears_forget_weights(const Fp8Linears& s) {
    if (s.kept_weights.base != nullptr) std::fill(s.kept_weights.held, s.kept_weights.held + s.num_linears, 0);
}

inline void fp8_linears_free(Fp8Linears* s) {
    if (s->num_linears == 0) return;  // never initialised (zeroed)
    fp8_scaling_free(&s->e4m3);
    fp8_scaling_free(&s->e5m2);
    for (void* p : {(void*)s->inp_q, (void*)s->weight_q, (void*)s->dout_q, (void*)s->dout_t, (void*)s->amax_bits})
        CHECK_CUDA(cudaFree(p));
    fp8_slots_free(&s->kept_inputs);
    fp8_slots_free(&s->kept_weights);
    *s = Fp8Linears{};
}

// Current scaling: tensor t's scale from x's own amax, just before x is cast (one extra read of
// x). Delayed scaling: nothing, the scale is the one the last update chose.
inline void fp8_linear_scale_now(const CudaContext& ctx, const Fp8Scaling& s, int t, const floatX* x, size_t n) {
    if (s.recipe != FP8_RECIPE_CURRENT) return;
    fp8_amax(ctx, s.amax + t, x, n);
    fp8_scaling_update(ctx, s, t, 1);
}

// Linear i's weight (OC,C) in E4M3 with its scale, W (transposed false: the forward's) or W^T (the
// backward's): kept (fp8_linears_keep_weights), cast with W^T beside it by the step's first call;
// else cast now into the shared scratch. The amax either way is max |W|, the same bits.
inline const __nv_fp8_e4m3* fp8_linear_weight(const CudaContext& ctx, const Fp8Linears& s, int i, const floatX* weight,
                                              int OC, int C, bool transposed) {
    const int tw = 2 * i + 1;
    const size_t n_w = (size_t)OC * C;
    __nv_fp8_e4m3* kept = fp8_slot(s.kept_weights, i, 2 * n_w);
    if (kept != nullptr && s.kept_weights.held[i] == 0) {
        fp8_linear_scale_now(ctx, s.e4m3, tw, weight, n_w);
        fp8_cast_transpose(ctx, kept, kept + n_w, s.e4m3.amax + tw, (float*)nullptr, weight, s.e4m3.scale + tw, OC, C);
        s.kept_weights.held[i] = 1;
    }
    if (kept != nullptr) return transposed ? kept + n_w : kept;
    fp8_linear_scale_now(ctx, s.e4m3, tw, weight, n_w);
    if (transposed)
        fp8_cast_transpose(ctx, (__nv_fp8_e4m3*)nullptr, s.weight_q, s.e4m3.amax + tw, (float*)nullptr, weight,
                           s.e4m3.scale + tw, OC, C);
    else
        fp8_cast(ctx, s.weight_q, s.e4m3.amax + tw, (float*)nullptr, weight, s.e4m3.scale + tw, n_w);
    return s.weight_q;
}

// out (BT,OC) = inp (BT,C) @ weight (OC,C)^T + bias (OC), the product in FP8 (E4M3 x E4M3, fp32
// sums, bf16 out); bias may be nullptr. With pre_gelu != nullptr: pre_gelu = that result and
// out = gelu(pre_gelu). matmul_forward's arguments, after the layer's FP8 view. accumulate: out
// += the product instead (the GEMM's beta 1: the sum in fp32, one rounding to bf16, as the bf16
// build's matmul into the residual stream; no pre_gelu then). inp_act (an Act): the layer's input
// is that activation of inp_act.pre, made in its cast (inp is not read: the projection after
// GPT-2's GELU or Llama's SwiGLU, whose own pass and bf16 output then are not needed); delayed
// scaling only, as dout_act below.
inline void fp8_linear_forward(const CudaContext& ctx, Fp8Linear layer, floatX* out, floatX* pre_gelu,
                               const floatX* inp, const floatX* weight, const floatX* bias, int BT, int C, int OC,
                               bool accumulate = false, Act inp_act = Act{}) {
    const Fp8Linears& s = *layer.set;
    const size_t n_inp = (size_t)BT * C, n_w = (size_t)OC * C;
    CHECK(BT > 0 && C > 0 && OC > 0 && n_inp <= s.act_capacity && (size_t)BT * OC <= s.act_capacity &&
              n_w <= s.weight_capacity,
          "BT=%d C=%d OC=%d beyond the FP8 scratch (%zu activation, %zu weight elements)", BT, C, OC, s.act_capacity,
          s.weight_capacity);
    CHECK(pre_gelu == nullptr || (pre_gelu != out && !accumulate), "pre_gelu and out must differ, and not accumulate");
    CHECK(inp_act.kind == ACT_NONE || s.e4m3.recipe == FP8_RECIPE_DELAYED,
          "an activation made in the cast needs delayed scaling (current scaling's amax would read the input first)");
    const int ti = 2 * layer.index, tw = ti + 1;
    if (inp_act.kind == ACT_NONE) fp8_linear_scale_now(ctx, s.e4m3, ti, inp, n_inp);
    __nv_fp8_e4m3* keep = fp8_slot(s.kept_inputs, layer.index, n_inp);
    if (keep != nullptr) {  // inp^T for the backward from the same read (fp8_linears_keep_inputs)
        fp8_cast_transpose(ctx, s.inp_q, keep, s.e4m3.amax + ti, (float*)nullptr, inp, s.e4m3.scale + ti, BT, C,
                           (floatX*)nullptr, fp8_src(inp_act, false));
        s.kept_inputs.held[layer.index] = BT;
    } else {
        fp8_cast(ctx, s.inp_q, s.e4m3.amax + ti, (float*)nullptr, inp, s.e4m3.scale + ti, n_inp,
                 fp8_src(inp_act, false), C);
    }
    const __nv_fp8_e4m3* w_q = fp8_linear_weight(ctx, s, layer.index, weight, OC, C, false);
    floatX* d = pre_gelu != nullptr ? pre_gelu : out;
    fp8_matmul(ctx, d, w_q, s.inp_q, fp8_gemm_scale_inv(s.e4m3, tw), fp8_gemm_scale_inv(s.e4m3, ti), bias, OC,
               BT, C, accumulate, s.fast_accum_forward);
    if (pre_gelu != nullptr) gelu_forward(ctx, out, pre_gelu, (size_t)BT * OC);
}

// Gradients of fp8_linear_forward, given dout (BT,OC), as matmul_backward:
//   dinp (BT,C) = dout @ weight     (+= when accumulate_dinp; skipped when dinp is nullptr)
//   dweight (OC,C) += dout^T @ inp
//   dbias (OC) += sum over rows of dout   (skipped when dbias is nullptr; from the bf16 dout, summed
//                                          by the cast that reads it: fp8_cast_transpose's dbias)
// The two products in FP8: E4M3 (W^T, inp^T) x E5M2 (dout, dout^T). With pre_gelu (BT,C) !=
// nullptr the GELU before this layer is taken back too: dinp = (dout @ weight) * gelu'(pre_gelu).
// With dout_act (an Act) the activation after the layer is taken back too: the layer's output
// gradient is the activation's backward of dout (GELU: dout (BT,OC) times gelu'(pre); SwiGLU:
// dout (BT,OC/2) the gradient of its output, pre (BT,OC) [gate | up]), made in the cast of dout
// (fp8_cast_transpose's src: the same bf16 numbers gelu_backward or swiglu_backward would write,
// never written), which is how train_gpt_fp8 runs GPT-2's fc and Llama's gate/up: the backward of
// the projection after the activation leaves its dinp as the GEMM made it, this one takes the
// activation back (linear.cuh). inp_act: the layer's input is that activation (as the forward's),
// made again in the cast of inp^T (no recompute pass, no bf16 activation read). Delayed scaling
// only: current scaling takes the amax of what is cast before casting it, which here no pass
// reads (linear_act_in_cast keeps -fp8r current on the activations' own passes).
inline void fp8_linear_backward(const CudaContext& ctx, Fp8Linear layer, floatX* dinp, floatX* dweight, floatX* dbias,
                                const floatX* dout, const floatX* inp, const floatX* weight, int BT, int C, int OC,
                                bool accumulate_dinp, const floatX* pre_gelu = nullptr, Act dout_act = Act{},
                                Act inp_act = Act{}) {
    const Fp8Linears& s = *layer.set;
    const size_t n_inp = (size_t)BT * C, n_w = (size_t)OC * C, n_out = (size_t)BT * OC;
    CHECK(BT > 0 && C > 0 && OC > 0 && n_inp <= s.act_capacity && n_out <= s.act_capacity && n_w <= s.weight_capacity,
          "BT=%d C=%d OC=%d beyond the FP8 scratch (%zu activation, %zu weight elements)", BT, C, OC, s.act_capacity,
          s.weight_capacity);
    CHECK(pre_gelu == nullptr || (dinp != nullptr && !accumulate_dinp), "the GELU backward overwrites dinp");
    const int ti = 2 * layer.index, tw = ti + 1, tg = layer.index;
    CHECK((dout_act.kind == ACT_NONE && inp_act.kind == ACT_NONE) || s.e5m2.recipe == FP8_RECIPE_DELAYED,
          "an activation made in the cast needs delayed scaling (current scaling's amax would read the tensor first)");
    fp8_linear_scale_now(ctx, s.e5m2, tg, dout, n_out);
    fp8_cast_transpose(ctx, s.dout_q, s.dout_t, s.e5m2.amax + tg, (float*)nullptr, dout, s.e5m2.scale + tg, BT, OC,
                       dbias, fp8_src(dout_act, true));
    if (dinp != nullptr) {
        const __nv_fp8_e4m3* w_t = fp8_linear_weight(ctx, s, layer.index, weight, OC, C, true);
        fp8_matmul(ctx, dinp, w_t, s.dout_q, fp8_gemm_scale_inv(s.e4m3, tw), fp8_gemm_scale_inv(s.e5m2, tg),
                   (const __nv_bfloat16*)nullptr, C, BT, OC, accumulate_dinp, s.fast_accum_backward);
        if (pre_gelu != nullptr) gelu_backward(ctx, dinp, pre_gelu, dinp, n_inp);
    }
    // inp^T: the forward's, kept (the same codes, amax and scale as casting it again), or cast now
    const __nv_fp8_e4m3* inp_t = fp8_slot(s.kept_inputs, layer.index, n_inp);
    if (inp_t == nullptr || s.kept_inputs.held[layer.index] != BT) {
        if (inp_act.kind == ACT_NONE) fp8_linear_scale_now(ctx, s.e4m3, ti, inp, n_inp);
        fp8_cast_transpose(ctx, (__nv_fp8_e4m3*)nullptr, s.inp_q, s.e4m3.amax + ti, (float*)nullptr, inp,
                           s.e4m3.scale + ti, BT, C, (floatX*)nullptr, fp8_src(inp_act, false));
        inp_t = s.inp_q;
    }
    fp8_matmul(ctx, dweight, inp_t, s.dout_t, fp8_gemm_scale_inv(s.e4m3, ti), fp8_gemm_scale_inv(s.e5m2, tg),
               (const __nv_bfloat16*)nullptr, C, OC, BT, true, s.fast_accum_backward);
}

// After a step's backward, before fp8_linears_update: every amax := its maximum over gc's ranks
// and then over tp's (nullptr: no tensor parallelism). Data-parallel replicas must cast with the
// same scales, so that their scaling states, which a checkpoint saves once, stay equal bit for
// bit. A tensor-parallel rank (-tp) holds a shard of each linear: of the weight's rows and the
// output's columns (QKV, FC, gate/up), or of the weight's and the input's columns (the two
// projections), the rest whole on every rank; the max of the shards' amaxes is the whole
// tensor's, so the group's max gives every rank the scales one process computes, one scale a
// logical tensor as Transformer Engine's amax reduction group does, and the one state file
// rank 0 writes serves any layout. Max over the data-parallel group, then over the
// tensor-parallel one, is the max over the whole DP x TP world (every rank is in one of each,
// and max is associative): two collectives on 3 words a linear, as no GpuComm spans the world.
// (Llama's KV head shared by more ranks than it has, NKV < tp: its columns of QKV's output
// gradient are each rank's part of a sum, so that amax is the max of the parts, not the sum's;
// the scales still agree over the ranks.) One collective a group for all layers and both
// formats: the amaxes go side by side into amax_bits and back. Current scaling: nothing (each
// cast's scale comes from its own tensor, or its own shard, on its own rank: a collective before
// every cast would stall the forward; the GEMMs take the scales with their operands, so ranks
// need not agree, and nothing of it is state).
inline void fp8_linears_all_reduce_amax(GpuComm* gc, GpuComm* tp, const CudaContext& ctx, const Fp8Linears& s) {
    if (s.e4m3.recipe != FP8_RECIPE_DELAYED) return;
    const size_t n4 = (size_t)s.e4m3.num_tensors, n5 = (size_t)s.e5m2.num_tensors;
    CHECK_CUDA(cudaMemcpyAsync(s.amax_bits, s.e4m3.amax, n4 * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream));
    CHECK_CUDA(cudaMemcpyAsync(s.amax_bits + n4, s.e5m2.amax, n5 * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream));
    gpu_all_reduce_max_u32(gc, ctx, s.amax_bits, n4 + n5);
    if (tp != nullptr) gpu_all_reduce_max_u32(tp, ctx, s.amax_bits, n4 + n5);
    CHECK_CUDA(cudaMemcpyAsync(s.e4m3.amax, s.amax_bits, n4 * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream));
    CHECK_CUDA(cudaMemcpyAsync(s.e5m2.amax, s.amax_bits + n4, n5 * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream));
}

// Delayed scaling, once a step (after the reduction): each tensor's amax into its history, its
// scale from the history's max, the amaxes cleared (fp8_scaling_update). Current scaling: nothing.
// A step the trainer skips (a non-finite loss or norm) goes to fp8_linears_discard_amax instead:
// its amaxes (a NaN, an outlier) would otherwise hold the scales for history_len steps.
inline void fp8_linears_update(const CudaContext& ctx, const Fp8Linears& s) {
    if (s.e4m3.recipe != FP8_RECIPE_DELAYED) return;
    fp8_scaling_update(ctx, s.e4m3);
    fp8_scaling_update(ctx, s.e5m2);
}

// the step's amaxes forgotten, the scales and histories kept (a skipped step)
inline void fp8_linears_discard_amax(const CudaContext& ctx, const Fp8Linears& s) {
    CHECK_CUDA(cudaMemsetAsync(s.e4m3.amax, 0, (size_t)s.e4m3.num_tensors * sizeof(float), ctx.stream));
    CHECK_CUDA(cudaMemsetAsync(s.e5m2.amax, 0, (size_t)s.e5m2.num_tensors * sizeof(float), ctx.stream));
}
