// llama_cuda.cuh: the Llama 3 model on the GPU. The same model as llmc/llama3.h (which stays
// the reference: configuration, parameter table, random init and model files all happen
// there, on the host), with the step run as launches of the llmc/cuda kernels, in the same
// order: llama_cuda_forward, llama_cuda_backward, llama_cuda_update. The buffers, the batch's
// way up and the losses' way back, the norm and AdamW over the table are GPT-2's
// (llmc/model_cuda.cuh).
// defines: llama_cuda_config_problem, LlamaPtrsX, LlamaLayerX, llama_layer_x, LlamaActivationsX, LlamaCuda,
//          llama_cuda_layout, llama_ptrs_x, llama_cuda_bind_grads, llama_cuda_init, llama_cuda_activation_plan,
//          llama_cuda_activation_bytes, llama_cuda_alloc_state, LlamaLayerActsX, llama_cuda_layer_acts, llama_matmul_residual,
//          llama_linear_residual,
//          llama_cuda_forward, llama_cuda_loss, llama_cuda_backward, llama_cuda_zero_grad,
//          llama_cuda_grad_sum_squares, llama_cuda_update, llama_cuda_write_model, llama_cuda_checkpoint_write,
//          llama_cuda_download_grads, llama_row_parallel_residual, llama_cuda_dims, llama_cuda_kv_shared,
//          llama_cuda_free
//
// Glossary (as llmc/llama3.h): B batch, T sequence length, C channels, NH query heads, NKV
// key/value heads, hs = C/NH, QKV = (NH + 2 NKV) hs, F the MLP's hidden size, L layers, V
// vocabulary, Vp padded vocabulary. N = B*T positions.
//
// Memory, allocated once as GPT-2's (gpt2_cuda.cuh explains params, grads, m, v, master and
// the ZeRO layout), laid out by llama_param_table; the activations below. Recompute (-r), as
// the CPU's llmc/llama3.h: -r 1 keeps RMSNorm's outputs (rms1, rms2) and SwiGLU's for one
// layer and the backward recomputes them from the kept inputs; -r 2 keeps only each layer's
// input (encoded, residual3) and the backward runs the layer's forward again
// (llama_cuda_layer_forward) before its backward. The same kernels on the same inputs: the
// gradients are -r 0's bits (test_llama_debug.cu checks). Grouped-query attention: the attention
// kernels read each query head's key/value head in place from qkv's [q | k | v] rows and sum a
// key/value head's gradient over its group themselves (attention_forward_gqa,
// llmc/cuda/attention.cuh): no repeated copy of K and V.
// Every kernel sums in a fixed order (no float atomics): the same run twice gives the same bits.
#pragma once
#include <algorithm>
#include <iterator>
#include <vector>

#include "llama3.h"              // defines: LlamaConfig, llama_param_table, llama_layout, Llama, rope_table
#include "checkpoint.h"          // defines: model_write_checkpoint, checkpoint_path, TrainState
#include "model_cuda.cuh"        // defines: cuda_model_init_params, cuda_model_update, cuda_carve_slots, ...
#include "cuda/common.cuh"       // defines: floatX, CudaContext, CHECK_CUDA, ...
#include "cuda/encoder.cuh"      // defines: encoder_forward, encoder_backward (wpe nullptr: the lookup alone)
#include "cuda/rmsnorm.cuh"      // defines: rmsnorm_forward, rmsnorm_backward
#include "cuda/matmul.cuh"       // defines: matmul_forward, matmul_backward, matmul_cublaslt
#include "cuda/linear.cuh"       // defines: LinearSlot, linear_slot, linear_forward, linear_forward_add, linear_backward
#include "cuda/rope.cuh"         // defines: rope_forward, rope_backward
#include "cuda/attention_chosen.cuh" // defines: attention_forward_chosen, attention_backward_chosen (-ak)
#include "cuda/swiglu.cuh"       // defines: swiglu_forward, swiglu_backward
#include "cuda/classifier.cuh"   // defines: classifier_forward_backward
#include "cuda/phases.cuh"       // defines: phase_mark, PHASE_*
#include "cuda/comm_gpu.cuh"     // defines: GpuComm, gpu_all_reduce_sum, gpu_all_gather_f32 (-tp)
#include "cuda/sequence_parallel.cuh" // defines: GpuTpStream (-tp, -sp)

// What the kernels need of a shape beyond llama_config_problem. nullptr when fine. tp: each
// tensor-parallel rank's part too (its channels C/tp, MLP units F/tp, vocabulary rows Vp/tp).
inline const char* llama_cuda_config_problem(const LlamaConfig& c, int tp = 1) {
    if (c.ffn_hidden / tp % 8 != 0) return "the GPU kernels need the MLP's hidden size F (F/tp with -tp) to be a multiple of 8";
    if (c.channels / tp % 8 != 0 || c.padded_vocab_size / tp % 8 != 0)
        return "the GPU kernels need each tensor-parallel rank's C/tp and Vp/tp to be multiples of 8";
    return cuda_shape_problem(c.channels, c.padded_vocab_size, c.channels / c.num_heads);
}

// Named views of a buffer laid out by the table (parameters or gradients): the whole tensors;
// a layer's rows come from layer_slices.
struct LlamaPtrsX {
    floatX *wte, *rmsfw, *lmheadw;
};

// One layer's slices, in the table's per-layer order (what layer_slices and a GradSink give).
struct LlamaLayerX {
    floatX *rms1w, *qkvw, *attprojw, *rms2w, *fcw, *fcprojw;
};

inline LlamaLayerX llama_layer_x(floatX* const slices[LLAMA_NUM_LAYER_TENSORS]) {
    return {slices[0], slices[1], slices[2], slices[3], slices[4], slices[5]};
}

// Activations and scratch, sized for the (B, T) of llama_cuda_alloc_state. Per-layer tensors
// are L slices of the allocated N; a smaller forward uses a prefix of each slice. -sp: the
// residual stream, the RMSNorms' outputs and statistics, and dres hold this rank's N/tp rows.
struct LlamaActivationsX {
    floatX* encoded;      // (N,C) wte[tokens]
    floatX* rms1;         // (L,N,C) RMSNorm 1 outputs
    float* rms1_rstd;     // (L,N)
    floatX* qkv;          // (L,N,QKV) [q | k | v] after RoPE
    floatX* atty;         // (L,N,C) attention output (before o_proj)
    float* att_lse;       // (L,B,NH,T) log-sum-exp of each query's scores, for the backward
    floatX* residual2;    // (L,N,C) residual stream after attention
    floatX* rms2;         // (L,N,C)
    float* rms2_rstd;     // (L,N)
    floatX* fch;          // (L,N,2F) [gate | up]
    floatX* fch_swiglu;   // (L,N,F); one layer with -r >= 1 or made in train_gpt_fp8's casts
    floatX* residual3;    // (L,N,C) residual stream after the MLP
    floatX* rmsf;         // (N,C)
    float* rmsf_rstd;     // (N)
    floatX* logits;       // (N,Vp); after a training forward it holds dlogits
    float* losses;        // (N)
    floatX* dres;         // (N,C) backward: gradient of the residual stream
    floatX* dtmp;         // (N,C) backward: gradient of an RMSNorm output / attention output
    floatX* dqkv;         // (N,QKV)
    floatX* dfch;         // (N,2F)
    floatX* dfch_swiglu;  // (N,F)
    float* rope_cos;      // (T, hs/2) RoPE's angles (the CPU's rope_table)
    float* rope_sin;      // (T, hs/2)
    int* inputs;          // (N) token ids
    int* targets;         // (N)
    float* tp_stats;      // -tp: (tp,N,3) every rank's softmax statistics of each row (classifier_tp_stats)
    floatX* kv_keep;      // -tp with fewer KV heads than ranks: (2 hs C) the shared head's k, v rows' gradient so far
    floatX* kv_all;       // (NKV, 2 hs C) each sharing rank's part of it, in its head's slot, summed over the group
    floatX* proj;         // -sp: (N,C) a row-parallel projection's partial sums
    floatX* sp_full;      // -sp: (N,C) a buffer of the residual stream's gathered from every rank (GpuTpStream)
    floatX* sp_scratch;   // -sp: (N,C) the rows in rank order, on their way to or from NCCL
    floatX* sp_part;      // -sp: (N/tp,C) this rank's rows of a row-parallel matmul's sum
    floatX* sp_keep;      // -sp: (2C) a norm's weight gradient kept aside, and this micro-step's part
};

// The buffers and host side every family has (model_cuda.cuh: CudaModelState), and Llama's own.
struct LlamaCuda : CudaModelState {
    LlamaConfig config;
    int recompute = 0;  // -r: 0, 1 or 2 (above)
    bool act_in_cast = false;  // train_gpt_fp8 makes SwiGLU in the down projection's casts: fch_swiglu one layer deep
    ParamTensor tensors[LLAMA_NUM_PARAM_TENSORS];
    LlamaPtrsX p, g;
    LlamaActivationsX acts;
    std::vector<LlamaActivationsX> act_sets;  // acts is one of these (-pp: one a micro-batch in flight)
};

// The sizes this rank computes with (llmc/llama3.h: its query and KV heads, MLP units and
// vocabulary rows; the whole model's without -tp).
inline LlamaDims llama_cuda_dims(const LlamaCuda* model) { return llama_dims(model->config, model->tp_size, model->tp_rank); }
// -tp with fewer KV heads than ranks: each rank holds the one its query heads use
inline bool llama_cuda_kv_shared(const LlamaConfig& c, int tp) { return tp > 1 && c.num_kv_heads < tp; }

inline ParamLayout llama_cuda_layout(const LlamaCuda* model) {
    return llama_layout(model->tensors, model->num_layers);
}

// The views from where each row starts (views[i]: row i's).
inline LlamaPtrsX llama_ptrs_x_of(floatX* const views[LLAMA_NUM_PARAM_TENSORS]) {
    return {views[0], views[7], views[8]};
}

// The views of one buffer laid out by the table.
inline LlamaPtrsX llama_ptrs_x(floatX* base, const ParamTensor table[LLAMA_NUM_PARAM_TENSORS]) {
    floatX* views[LLAMA_NUM_PARAM_TENSORS];
    for (int i = 0; i < LLAMA_NUM_PARAM_TENSORS; i++) views[i] = base + table[i].offset;
    return llama_ptrs_x_of(views);
}

// The gradient views from where each row's gradient lives (views[i]; a data-parallel trainer
// moves them at ZeRO 2, llmc/cuda/grad_sync_gpu.cuh).
inline void llama_cuda_bind_grads(LlamaCuda* model, floatX* const views[LLAMA_NUM_PARAM_TENSORS]) {
    model->g = llama_ptrs_x_of(views);
}

// Takes the configuration and the weights of a host Llama (llama_init + llama_init_random, or
// a model file) and uploads them (master weights, z and tp as gpt2_cuda_init's).
inline void llama_cuda_init(LlamaCuda* model, const CudaContext* ctx, const Llama* host, bool master_weights,
                            const ZeroLayout& z, const float* host_shard = nullptr, GpuComm* tp = nullptr) {
    model->config = host->config;
    cuda_model_take_table(model, host, tp);
    cuda_model_init_params(model, ctx, llama_cuda_config_problem(host->config, model->tp_size), host, master_weights, z,
                           llama_layout(model->tensors, model->num_layers), host_shard);
    if (z.stage < 3) model->p = llama_ptrs_x(model->params, model->tensors);
}

enum { LLAMA_CUDA_NUM_ACTIVATIONS = sizeof(LlamaActivationsX) / sizeof(void*) };

// The activation plan for micro-batch B x T at recompute level r: one row per buffer, in
// LlamaActivationsX order, each pointing at its field of *a. -tp: a rank's part (its heads'
// qkv and attention outputs, its MLP units, its columns of the logits).
inline void llama_cuda_activation_plan(const LlamaConfig& cfg, int B, int T, int r, LlamaActivationsX* a,
                                       CudaSlot slots[LLAMA_CUDA_NUM_ACTIVATIONS], int tp = 1, bool sp = false,
                                       int layers = -1, bool act_in_cast = false) {
    const LlamaDims d = llama_dims(cfg, tp);
    const size_t L = layers >= 0 ? layers : cfg.num_layers;
    const size_t Lk = r >= 2 ? 1 : L, Ln = r >= 1 ? 1 : L;  // kept / norms' layers
    // fch_swiglu: recomputed (-r >= 1), or never written in training (act_in_cast: train_gpt_fp8's
    // casts make SwiGLU from fch; only a sample's forward, in bf16, writes it): one layer deep
    const size_t Ls = r >= 1 || act_in_cast ? 1 : L;
    const size_t C = cfg.channels, NH = d.NH, A = d.A, Vp = d.Vp;
    const size_t F2 = 2 * (size_t)d.F, hs = d.hs, QKV = d.QKV;
    const size_t N = (size_t)B * T;
    const size_t R = sp ? N / tp : N, S = sp ? N : 0;  // R: the residual stream's rows here
    const size_t kv = llama_cuda_kv_shared(cfg, tp) ? 2 * hs * C : 0;
    const size_t X = sizeof(floatX), FL = sizeof(float), I = sizeof(int);
    const CudaSlot plan[] = {
        {(void**)&a->encoded, R * C, X},         {(void**)&a->rms1, Ln * R * C, X},
        {(void**)&a->rms1_rstd, Lk * R, FL},     {(void**)&a->qkv, Lk * N * QKV, X},
        {(void**)&a->atty, Lk * N * A, X},       {(void**)&a->att_lse, Lk * B * NH * T, FL},
        {(void**)&a->residual2, Lk * R * C, X},
        {(void**)&a->rms2, Ln * R * C, X},       {(void**)&a->rms2_rstd, Lk * R, FL},
        {(void**)&a->fch, Lk * N * F2, X},       {(void**)&a->fch_swiglu, Ls * N * F2 / 2, X},
        {(void**)&a->residual3, L * R * C, X},   {(void**)&a->rmsf, R * C, X},
        {(void**)&a->rmsf_rstd, R, FL},          {(void**)&a->logits, N * Vp, X},
        {(void**)&a->losses, N, FL},             {(void**)&a->dres, R * C, X},
        {(void**)&a->dtmp, N * C, X},            {(void**)&a->dqkv, N * QKV, X},
        {(void**)&a->dfch, N * F2, X},
        {(void**)&a->dfch_swiglu, N * F2 / 2, X}, {(void**)&a->rope_cos, T * hs / 2, FL},
        {(void**)&a->rope_sin, T * hs / 2, FL},  {(void**)&a->inputs, N, I},
        {(void**)&a->targets, N, I},             {(void**)&a->tp_stats, tp > 1 ? tp * N * 3 : 0, FL},
        {(void**)&a->kv_keep, kv, X},            {(void**)&a->kv_all, kv * cfg.num_kv_heads, X},
        {(void**)&a->proj, S * C, X},            {(void**)&a->sp_full, S * C, X},
        {(void**)&a->sp_scratch, S * C, X},      {(void**)&a->sp_part, sp ? R * C : 0, X},
        {(void**)&a->sp_keep, sp ? 2 * C : 0, X},
    };
    static_assert(sizeof(plan) / sizeof(plan[0]) == LLAMA_CUDA_NUM_ACTIVATIONS, "one slot per activation");
    std::copy(std::begin(plan), std::end(plan), slots);
}

// The bytes the activations of that plan take, before anything is allocated (the memory plan).
inline size_t llama_cuda_activation_bytes(const LlamaConfig& cfg, int B, int T, int recompute, int tp = 1,
                                          bool sp = false, int layers = -1, bool act_in_cast = false) {
    LlamaActivationsX a;
    CudaSlot slots[LLAMA_CUDA_NUM_ACTIVATIONS];
    llama_cuda_activation_plan(cfg, B, T, recompute, &a, slots, tp, sp, layers, act_in_cast);
    return cuda_slots_bytes(slots, LLAMA_CUDA_NUM_ACTIVATIONS);
}

// Gradients, AdamW state and activations for micro-batch B x T, recompute level 0..2.
// sets (-pp): the activations of that many micro-batches in flight. act_in_cast: train_gpt_fp8
// makes the activation in its casts at these rows (linears_act_in_cast_planned).
inline void llama_cuda_alloc_state(LlamaCuda* model, int B, int T, int recompute = 0, int sets = 1,
                                   bool act_in_cast = false) {
    const LlamaConfig& cfg = model->config;
    CHECK(recompute >= 0 && recompute <= 2, "recompute=%d", recompute);
    model->recompute = recompute;
    model->act_in_cast = act_in_cast;
    cuda_model_alloc_grads(model, B, T);
    if (model->grads != nullptr) model->g = llama_ptrs_x(model->grads, model->tensors);

    cuda_model_alloc_acts(model, sets, LLAMA_CUDA_NUM_ACTIVATIONS, &model->act_sets,
                          [&](LlamaActivationsX* a, CudaSlot* slots) {
        llama_cuda_activation_plan(cfg, B, T, recompute, a, slots, model->tp_size, model->sp, model->num_layers,
                                   act_in_cast);
    });
    const size_t N = (size_t)B * T, hs = cfg.channels / cfg.num_heads;
    // RoPE's angles from the CPU's table, so that both sides turn by the same floats (every set's)
    std::vector<float> cos_t, sin_t;
    rope_table(&cos_t, &sin_t, T, (int)hs, cfg.rope_theta, cfg.rope_scaling);
    for (const LlamaActivationsX& a : model->act_sets) {
        CHECK_CUDA(cudaMemcpy(a.rope_cos, cos_t.data(), cos_t.size() * sizeof(float), cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(a.rope_sin, sin_t.data(), sin_t.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
    model->B = B;
    model->T = T;
    cuda_model_alloc_io(model, N);
    CHECK_CUDA(cudaDeviceSynchronize());
}

// Layer l's slices of the kept activations, and the residual stream it reads, for the
// allocated B x T (a smaller forward batch is a prefix of each slice; with recompute the
// buffers of one layer serve every layer). size_t throughout: the
// backward's l * N * 2F in int wrapped on an H200 at L=24, N=8192, F=16384 (and does at Llama
// 3.1 8B from T=4096); test_offsets checks 8B, 70B and 405B at T=8192.
struct LlamaLayerActsX {
    const floatX* residual;  // (N,C) the layer's input: encoded, or the previous layer's residual3
    floatX *rms1, *qkv, *atty, *residual2, *rms2, *fch, *fch_swiglu, *residual3;
    float *rms1_rstd, *rms2_rstd, *att_lse;
};
inline LlamaLayerActsX llama_cuda_layer_acts(const LlamaCuda* model, int l) {
    const LlamaConfig& cfg = model->config;
    const LlamaActivationsX& a = model->acts;
    const LlamaDims d = llama_cuda_dims(model);  // -tp: this rank's heads and MLP units
    const size_t N = (size_t)model->B * model->T, C = cfg.channels, NH = d.NH, F = d.F, A = d.A;
    const size_t R = model->sp ? N / model->tp_size : N;  // -sp: this rank's rows of the residual stream
    const size_t QKV = d.QKV, NC = R * C, li = (size_t)l;
    const size_t lk = model->recompute >= 2 ? 0 : li, ln = model->recompute >= 1 ? 0 : li;  // the slice's layer
    const size_t ls = model->recompute >= 1 || model->act_in_cast ? 0 : li;                  // fch_swiglu's
    LlamaLayerActsX v;
    v.residual = l == 0 ? a.encoded : a.residual3 + (li - 1) * NC;
    v.rms1 = a.rms1 + ln * NC;
    v.qkv = a.qkv + lk * N * QKV;
    v.atty = a.atty + lk * N * A;
    v.residual2 = a.residual2 + lk * NC;
    v.rms2 = a.rms2 + ln * NC;
    v.fch = a.fch + lk * N * 2 * F;
    v.fch_swiglu = a.fch_swiglu + ls * N * F;
    v.residual3 = a.residual3 + li * NC;
    v.rms1_rstd = a.rms1_rstd + lk * R;
    v.rms2_rstd = a.rms2_rstd + lk * R;
    v.att_lse = a.att_lse + lk * N * NH;
    return v;
}

// out (BT,OC) = residual + inp (BT,K) @ weight (OC,K)^T: the residual copied into out, then the
// product added by cuBLASLt (D += A B), so no projection buffer and no add kernel. out may be
// residual itself. In bf16 (the KV-cache generation's); the trainer's go through a linear slot.
inline void llama_matmul_residual(const CudaContext& ctx, floatX* out, const floatX* residual, const floatX* inp,
                                  const floatX* weight, int BT, int K, int OC) {
    if (out != residual)
        CHECK_CUDA(cudaMemcpyAsync(out, residual, (size_t)BT * OC * sizeof(floatX), cudaMemcpyDeviceToDevice,
                                   ctx.stream));
    bool ok = matmul_cublaslt(ctx, out, weight, inp, nullptr, nullptr, OC, BT, K, true, false, true);
    CHECK(ok, "cuBLASLt has no algorithm for the residual matmul BT=%d K=%d OC=%d", BT, K, OC);
}

// The same through linear slot s (llmc/cuda/linear.cuh): in train_gpt_fp8 an FP8 GEMM whose
// beta 1 adds the product into the copied residual, so the residual add stays inside the GEMM
// and rounds once, as above (the product into a buffer, then an add, would round twice and
// cost an (N,C) buffer and a pass); elsewhere the call above's GEMM, bit for bit.
// inp_act: the input is that activation, made in the cast (linear_act_in_cast).
inline void llama_linear_residual(const CudaContext& ctx, LinearSlot s, floatX* out, const floatX* residual,
                                  const floatX* inp, const floatX* weight, int BT, int K, int OC, Act inp_act = Act{}) {
    if (out != residual)
        CHECK_CUDA(cudaMemcpyAsync(out, residual, (size_t)BT * OC * sizeof(floatX), cudaMemcpyDeviceToDevice,
                                   ctx.stream));
    linear_forward_add(ctx, s, out, inp, weight, BT, K, OC, inp_act);
}

// ---------------------------------------------------------------------------------------
// The stream of the forward or backward of B x T positions (-tp, -sp: llmc/cuda/sequence_parallel.cuh).
inline GpuTpStream llama_cuda_stream(LlamaCuda* model, int B, int T) {
    LlamaActivationsX& a = model->acts;
    return GpuTpStream(*model->ctx, model->tp, model->sp, B, T, model->config.channels, a.sp_full, a.sp_scratch,
                       a.sp_keep);
}

// -tp: a row-parallel projection into the residual stream: out = residual + the group's sum of
// each rank's inp @ weight^T (this rank's K columns), the residual added by rank 0 alone; -sp:
// the sum reduce-scattered to this rank's rows, then the residual (its rows) added.
// slot: the projection's linear (train_gpt_fp8: its FP8 scales); inp_act: its input is that
// activation, made in the cast (linear_act_in_cast).
inline void llama_row_parallel_residual(LlamaCuda* model, const GpuTpStream& ts, LinearSlot slot, floatX* out,
                                        const floatX* residual, const floatX* inp, const floatX* weight, int K,
                                        Act inp_act = Act{}) {
    const CudaContext& ctx = *model->ctx;
    const int BT = ts.N, OC = ts.C;
    if (model->tp == nullptr) return llama_linear_residual(ctx, slot, out, residual, inp, weight, BT, K, OC, inp_act);
    if (ts.sp) {
        LlamaActivationsX& a = model->acts;
        linear_forward(ctx, slot, a.proj, nullptr, inp, weight, nullptr, BT, K, OC, inp_act);
        ts.sum(a.proj, a.sp_part);
        CHECK_CUDA(cudaMemcpyAsync(out, residual, (size_t)ts.rows * OC * sizeof(floatX), cudaMemcpyDeviceToDevice,
                                   ctx.stream));
        return accumulate(ctx.stream, out, a.sp_part, (size_t)ts.rows * OC);
    }
    if (model->tp_rank == 0) llama_linear_residual(ctx, slot, out, residual, inp, weight, BT, K, OC, inp_act);
    else linear_forward(ctx, slot, out, nullptr, inp, weight, nullptr, BT, K, OC, inp_act);
    ts.sum(out, out);
}

// Layer l's forward over N = B x T positions: lp its weights, la its activations. The
// backward at -r 2 runs it again, so it is the one place a layer's forward is written. -tp
// (llmc/tensor_parallel.h has the picture): QKV and gate/up are column-parallel (this rank's
// query and KV heads, its MLP units), the projections row-parallel, their partial sums added
// over the group. l (the stage's own numbering under -pp) picks the layer's linear slots
// (train_gpt_fp8: their FP8 scales; nothing elsewhere).
inline void llama_cuda_layer_forward(LlamaCuda* model, int l, const LlamaLayerX& lp, const LlamaLayerActsX& la, int B,
                                     int T) {
    const LlamaConfig& cfg = model->config;
    const CudaContext& ctx = *model->ctx;
    const LlamaDims d = llama_cuda_dims(model);
    const int N = B * T, C = cfg.channels, NH = d.NH, NKV = d.NKV, F = d.F, A = d.A;
    const int hs = d.hs, QKV = d.QKV;
    const float eps = cfg.norm_eps;
    LlamaActivationsX& a = model->acts;
    const GpuTpStream ts = llama_cuda_stream(model, B, T);  // -sp: the norms on this rank's rows (R of N)
    const int R = ts.rows;
    auto slot = [&](int k) { return linear_slot(model->linears, l, k); };  // fp8: linear k's scales
    // residual2 = residual + attproj(attention(rope(qkv(rms1(residual)))))
    phase_mark(ctx, PHASE_LAYERNORM);
    rmsnorm_forward(ctx, la.rms1, la.rms1_rstd, la.residual, lp.rms1w, R, C, eps);
    phase_mark(ctx, PHASE_MATMUL);
    linear_forward(ctx, slot(0), la.qkv, nullptr, ts.whole(la.rms1), lp.qkvw, nullptr, N, C, QKV);
    phase_mark(ctx, PHASE_ATTENTION_FWD);
    rope_forward(ctx, la.qkv, B, T, NH, NKV, hs, a.rope_cos, a.rope_sin);
    attention_forward_chosen(ctx, la.atty, la.att_lse, la.qkv, B, T, NH, NKV, hs);
    phase_mark(ctx, PHASE_MATMUL);
    llama_row_parallel_residual(model, ts, slot(1), la.residual2, la.residual, la.atty, lp.attprojw, A);
    // residual3 = residual2 + fcproj(swiglu(fc(rms2(residual2))))
    phase_mark(ctx, PHASE_LAYERNORM);
    rmsnorm_forward(ctx, la.rms2, la.rms2_rstd, la.residual2, lp.rms2w, R, C, eps);
    phase_mark(ctx, PHASE_MATMUL);
    linear_forward(ctx, slot(2), la.fch, nullptr, ts.whole(la.rms2), lp.fcw, nullptr, N, C, 2 * F);
    // train_gpt_fp8 makes SwiGLU in fcproj's cast of its input (linear_act_in_cast: no fch_swiglu)
    const bool act_in_cast = linear_act_in_cast(model->linears, N);
    if (!act_in_cast) {
        phase_mark(ctx, PHASE_GELU);
        swiglu_forward(ctx, la.fch_swiglu, la.fch, N, F);
        phase_mark(ctx, PHASE_MATMUL);
    }
    llama_row_parallel_residual(model, ts, slot(3), la.residual3, la.residual2, la.fch_swiglu, lp.fcprojw, F,
                                act_in_cast ? Act{ACT_SWIGLU, la.fch} : Act{});
}

// Forward: inputs (B,T) token ids and targets (B,T) or nullptr, both on the host. B, T may be
// smaller than allocated. dloss > 0 means a backward follows: the classifier then also writes
// dlogits (scaled by dloss) over the logits, and the batch must be the full allocated B x T.
// The losses are copied back asynchronously: llama_cuda_loss.
inline void llama_cuda_forward(LlamaCuda* model, const int* inputs, const int* targets, int B, int T, float dloss) {
    const LlamaConfig& cfg = model->config;
    const CudaContext& ctx = *model->ctx;
    const int N = B * T;
    cuda_model_check_batch(model, inputs, targets, B, T, dloss, cfg.vocab_size);
    cuda_model_upload_batch(model, inputs, targets, N);

    const LlamaDims d = llama_cuda_dims(model);  // -tp: the lookup and the logits are vocab-parallel
    const int lo = model->run_lo, hi = model->run_hi;  // -vp: one chunk of this stage's layers
    const int C = cfg.channels, V = cfg.vocab_size, Vp = d.Vp;
    const float eps = cfg.norm_eps;
    LlamaActivationsX& a = model->acts;
    const ParamLayout layout = llama_cuda_layout(model);
    const GpuTpStream ts = llama_cuda_stream(model, B, T);  // -sp: this rank's rows of the residual stream
    if (model->pp_first) {  // -pp: a later stage's a.encoded holds the stage before's output
        phase_mark(ctx, PHASE_ENCODER);
        // one rank holds each token's row, the others add zeros: the sum is exact
        floatX* lookup = ts.sp ? a.proj : a.encoded;
        encoder_forward(ctx, lookup, a.inputs, model->p.wte, nullptr, B, T, C, d.v0, model->tp != nullptr ? Vp : -1);
        ts.sum(lookup, a.encoded);
    }
    for (int l = lo; l < hi; l++) {
        floatX* slices[LLAMA_NUM_LAYER_TENSORS];
        cuda_model_layer_params(model, layout, l, l + 1 < hi ? l + 1 : -1, slices);  // ZeRO 3: gathered
        llama_cuda_layer_forward(model, l, llama_layer_x(slices), llama_cuda_layer_acts(model, l), B, T);
    }
    if (model->pp_last) {  // -pp: a stage before the last passes its last layer's residual3 on
        phase_mark(ctx, PHASE_LAYERNORM);
        rmsnorm_forward(ctx, a.rmsf, a.rmsf_rstd, llama_cuda_layer_acts(model, hi - 1).residual3, model->p.rmsfw,
                        ts.rows, C, eps);
        phase_mark(ctx, PHASE_CLASSIFIER_MATMUL);
        matmul_forward(ctx, a.logits, nullptr, ts.whole(a.rmsf), model->p.lmheadw, nullptr, N, C, Vp);  // the untied head
    }
    if (targets != nullptr && model->pp_last) {
        cuda_model_classifier(model, N, V, Vp, d.v0, dloss);  // -tp: vocab-parallel
        cuda_model_copy_losses(model, N);
    }
    phase_mark(ctx, PHASE_OTHER);
    // the embedding backward's buckets: sorted on the host while the GPU runs the forward
    if (dloss > 0.0f && model->pp_first)
        encoder_buckets_build(ctx, &model->buckets, inputs, B, T, d.v0, model->tp != nullptr ? Vp : -1);
    model->last_N = N;
    model->last_had_targets = targets != nullptr && model->pp_last;
    model->backward_ready = dloss > 0.0f;
}

inline float llama_cuda_loss(LlamaCuda* model) { return cuda_model_loss(model); }

// ---------------------------------------------------------------------------------------
// Backward of the last forward (which had dloss > 0), accumulating (+=) into the grads, or
// where sink says for the layers (llmc/model.h: GradSinkOf, slices in the order rms1w, qkvw,
// attprojw, rms2w, fcw, fcprojw). Reverse order of the forward; dres carries the residual
// stream's gradient down.
inline void llama_cuda_backward(LlamaCuda* model, GradSinkOf<floatX>* sink = nullptr) {
    CHECK(model->backward_ready, "llama_cuda_backward needs a forward with targets and dloss > 0 just before");
    const LlamaConfig& cfg = model->config;
    const CudaContext& ctx = *model->ctx;
    const LlamaDims d = llama_cuda_dims(model);
    const int B = model->B, T = model->T, N = B * T;
    const int lo = model->run_lo, hi = model->run_hi;  // -vp: one chunk of this stage's layers
    const int C = cfg.channels, NH = d.NH, NKV = d.NKV, A = d.A;
    const int Vp = d.Vp, F = d.F, hs = d.hs, QKV = d.QKV;
    const LlamaPtrsX& p = model->p;
    const LlamaPtrsX& g = model->g;
    LlamaActivationsX& a = model->acts;
    const ParamLayout layout = llama_cuda_layout(model);
    // -tp: a column-parallel matmul's input gradient is this rank's part of the sum: added over
    // the group (ts.sum; -sp: into this rank's rows, dtmpr). The row-parallel ones' need nothing
    // (the output gradient is whole on every rank: -sp gathers it). -sp: an RMSNorm's weight
    // gradient from this rank's rows is added over the group (ts.norm_grads).
    const GpuTpStream ts = llama_cuda_stream(model, B, T);
    const int R = ts.rows;
    const size_t RC = (size_t)R * C;
    floatX* const dtmpr = ts.sp ? a.sp_part : a.dtmp;
    auto norm_backward = [&](floatX* dw, const floatX* residual, const floatX* w, const float* rstd) {
        const size_t n[1] = {(size_t)C};
        ts.norm_grads(&dw, n, 1, [&] { rmsnorm_backward(ctx, a.dres, dw, dtmpr, residual, w, rstd, R, C); });
    };
    // -tp with fewer KV heads than ranks: the tp / NKV ranks sharing a KV head each find the part
    // of its k, v rows' gradient their query heads make; a micro-step's parts are added over the
    // group (each rank's in its head's slot, zeros elsewhere), then to what the rows held
    const bool kv_shared = llama_cuda_kv_shared(cfg, model->tp_size);
    const size_t kv_vals = (size_t)2 * hs * C;
    const int kv_head = kv_shared ? model->tp_rank / (model->tp_size / cfg.num_kv_heads) : 0;

    // logits hold dlogits (the classifier wrote them in the forward); -pp: a stage before the
    // last has the next stage's gradient of its output in dres already
    if (model->pp_last) {
        phase_mark(ctx, PHASE_CLASSIFIER_MATMUL);
        matmul_backward(ctx, a.dtmp, g.lmheadw, nullptr, a.logits, ts.whole(a.rmsf), p.lmheadw, N, C, Vp, false);
        ts.sum(a.dtmp, dtmpr);
        phase_mark(ctx, PHASE_LAYERNORM);
        CHECK_CUDA(cudaMemsetAsync(a.dres, 0, RC * sizeof(floatX), ctx.stream));
        norm_backward(g.rmsfw, llama_cuda_layer_acts(model, hi - 1).residual3, p.rmsfw, a.rmsf_rstd);
    }
    for (int l = hi - 1; l >= lo; l--) {
        // room for any family's per-layer rows: a sink is told only where they go (and the
        // compiler, which may inline another family's sink here on speculation, sees no overrun)
        floatX* slices[MAX_PARAM_TENSORS];
        cuda_model_layer_params(model, layout, l, l > lo ? l - 1 : -1, slices);  // ZeRO 3: gathered, layer l - 1 meanwhile
        const LlamaLayerX lp = llama_layer_x(slices);
        if (sink != nullptr) sink->layer_grads(l, slices);
        else layer_slices(model->grads, layout, l, slices);
        const LlamaLayerX lg = llama_layer_x(slices);
        const LlamaLayerActsX la = llama_cuda_layer_acts(model, l);
        auto slot = [&](int k) { return linear_slot(model->linears, l, k); };  // fp8: linear k's scales
        // train_gpt_fp8 (linear_act_in_cast): SwiGLU is made in fcproj's cast of its input and
        // taken back in gate/up's cast of its output gradient: no recompute, no backward pass
        const bool act_in_cast = linear_act_in_cast(model->linears, N);
        const Act swiglu = act_in_cast ? Act{ACT_SWIGLU, la.fch} : Act{};
        if (model->recompute >= 2) {
            llama_cuda_layer_forward(model, l, lp, la, B, T);  // everything but its input, again
        } else if (model->recompute == 1) {  // the outputs of the norms and of SwiGLU
            phase_mark(ctx, PHASE_LAYERNORM);
            rmsnorm_forward(ctx, la.rms1, la.rms1_rstd, la.residual, lp.rms1w, R, C, cfg.norm_eps);
            rmsnorm_forward(ctx, la.rms2, la.rms2_rstd, la.residual2, lp.rms2w, R, C, cfg.norm_eps);
            phase_mark(ctx, PHASE_GELU);
            if (!act_in_cast) swiglu_forward(ctx, la.fch_swiglu, la.fch, N, F);
        }
        // residual3 = residual2 + fcproj(swiglu(fc(rms2(residual2))))
        phase_mark(ctx, PHASE_MATMUL);
        linear_backward(ctx, slot(3), a.dfch_swiglu, lg.fcprojw, nullptr, ts.whole(a.dres), la.fch_swiglu, lp.fcprojw, N,
                        F, C, false, nullptr, Act{}, swiglu);
        if (!act_in_cast) {  // back through SwiGLU
            phase_mark(ctx, PHASE_GELU);
            swiglu_backward(ctx, a.dfch, la.fch, a.dfch_swiglu, N, F);
            phase_mark(ctx, PHASE_MATMUL);
        }
        linear_backward(ctx, slot(2), a.dtmp, lg.fcw, nullptr, act_in_cast ? a.dfch_swiglu : a.dfch, ts.whole(la.rms2),
                        lp.fcw, N, C, 2 * F, false, nullptr, swiglu);
        ts.sum(a.dtmp, dtmpr);
        phase_mark(ctx, PHASE_LAYERNORM);
        norm_backward(lg.rms2w, la.residual2, lp.rms2w, la.rms2_rstd);
        // residual2 = residual + attproj(attention(rope(qkv(rms1(residual)))))
        phase_mark(ctx, PHASE_MATMUL);
        linear_backward(ctx, slot(1), a.dtmp, lg.attprojw, nullptr, ts.whole(a.dres), la.atty, lp.attprojw, N, A, C,
                        false);
        phase_mark(ctx, PHASE_ATTENTION_BWD);
        attention_backward_chosen(ctx, a.dqkv, a.dtmp, la.qkv, la.atty, la.att_lse, B, T, NH, NKV, hs);
        rope_backward(ctx, a.dqkv, B, T, NH, NKV, hs, a.rope_cos, a.rope_sin);
        phase_mark(ctx, PHASE_MATMUL);
        floatX* kv_rows = lg.qkvw + (size_t)A * C;  // after the query heads' rows
        const size_t kv_bytes = kv_vals * sizeof(floatX);
        if (kv_shared) {
            CHECK_CUDA(cudaMemcpyAsync(a.kv_keep, kv_rows, kv_bytes, cudaMemcpyDeviceToDevice, ctx.stream));
            CHECK_CUDA(cudaMemsetAsync(kv_rows, 0, kv_bytes, ctx.stream));
        }
        linear_backward(ctx, slot(0), a.dtmp, lg.qkvw, nullptr, a.dqkv, ts.whole(la.rms1), lp.qkvw, N, C, QKV, false);
        if (kv_shared) {
            phase_mark(ctx, PHASE_COMM);
            CHECK_CUDA(cudaMemsetAsync(a.kv_all, 0, kv_bytes * cfg.num_kv_heads, ctx.stream));
            floatX* mine = a.kv_all + kv_head * kv_vals;
            CHECK_CUDA(cudaMemcpyAsync(mine, kv_rows, kv_bytes, cudaMemcpyDeviceToDevice, ctx.stream));
            gpu_all_reduce_sum(model->tp, ctx, a.kv_all, kv_vals * cfg.num_kv_heads);
            CHECK_CUDA(cudaMemcpyAsync(kv_rows, a.kv_keep, kv_bytes, cudaMemcpyDeviceToDevice, ctx.stream));
            accumulate(ctx.stream, kv_rows, mine, kv_vals);
            phase_mark(ctx, PHASE_MATMUL);
        }
        ts.sum(a.dtmp, dtmpr);
        phase_mark(ctx, PHASE_LAYERNORM);
        norm_backward(lg.rms1w, la.residual, lp.rms1w, la.rms1_rstd);
        phase_mark(ctx, PHASE_OTHER);
        if (sink != nullptr) sink->layer_done(l);  // its reduction may start now, on another stream
    }
    phase_mark(ctx, PHASE_ENCODER);
    if (model->pp_first)  // -pp: a later stage's dres goes to the stage before; -sp: every position's
        encoder_backward(ctx, g.wte, nullptr, ts.whole(a.dres), model->buckets, B, T, C);
    phase_mark(ctx, PHASE_OTHER);
    if (sink != nullptr) sink->backward_done();
    model->backward_ready = false;
}

// The gradient buffers, the norm and AdamW over the table (weight decay where it says): model_cuda.cuh's.
inline void llama_cuda_zero_grad(LlamaCuda* model) { cuda_model_zero_grad(model); }
inline double llama_cuda_grad_sum_squares(LlamaCuda* model) { return cuda_model_grad_sum_squares(model); }
inline void llama_cuda_update(LlamaCuda* model, float lr, float beta1, float beta2, float eps, float weight_decay,
                              float grad_scale, int t) {
    cuda_model_update(model, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
}

// The model file of the current weights (an fp32 Llama model file, llmc/checkpoint.h, which
// holds bf16 weights exactly). gathered: the whole model's vector on the host already (ZeRO 3;
// -tp: put together from every rank's part), else it comes from model->params.
inline void llama_cuda_write_model(const LlamaCuda* model, const std::string& path, const floatX* gathered = nullptr) {
    Llama host;
    llama_init(&host, model->config);
    if (gathered != nullptr)
        for (size_t i = 0; i < host.num_parameters; i++) host.params[i] = to_float(gathered[i]);
    else cuda_download_floatx(*model->ctx, model->params, model->num_parameters, host.params);
    model_write_checkpoint(&host, path);
    llama_free(&host);
}

// As gpt2_cuda_checkpoint_write: the model file (rank 0) and this rank's state file, each
// durable on disk. gathered: as llama_cuda_write_model's (rank 0).
inline void llama_cuda_checkpoint_write(const std::string& dir, int step, const LlamaCuda* model, TrainState s,
                                        const floatX* gathered = nullptr) {
    if (s.rank == 0) llama_cuda_write_model(model, checkpoint_path(dir, "model", step), gathered);
    cuda_model_write_state(model, dir, step, s);
}

// out (num_parameters floats) = the gradients, widened
inline void llama_cuda_download_grads(const LlamaCuda* model, float* out) {
    cuda_download_floatx(*model->ctx, model->grads, model->num_parameters, out);
}

inline void llama_cuda_free(LlamaCuda* model) {
    cuda_model_free_buffers(model);
    *model = LlamaCuda();
}
