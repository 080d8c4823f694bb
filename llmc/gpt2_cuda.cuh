// gpt2_cuda.cuh: the GPT-2 model on the GPU. The same model as llmc/gpt2.h (which stays the
// reference: configuration, parameter table, random init and checkpoint loading all happen
// there, on the host), with the step run as launches of the llmc/cuda kernels, in the same
// order: gpt2_cuda_forward, gpt2_cuda_backward, gpt2_cuda_update.
// defines: gpt2_cuda_config_problem, GPT2Cuda, gpt2_cuda_layout, gpt2_cuda_bind_grads, gpt2_cuda_init,
//          gpt2_cuda_activation_plan, gpt2_cuda_activation_bytes, gpt2_cuda_alloc_state, GPT2LayerActsX, gpt2_cuda_layer_acts,
//          gpt2_cuda_print_memory, gpt2_cuda_forward, gpt2_cuda_loss, gpt2_cuda_token_losses, gpt2_cuda_logits_row,
//          gpt2_cuda_backward, gpt2_cuda_zero_grad, gpt2_cuda_opt_grads, gpt2_cuda_grad_sum_squares,
//          gpt2_cuda_update,
//          gpt2_cuda_download_grads, gpt2_cuda_write_model, gpt2_cuda_checkpoint_write,
//          gpt2_cuda_load_state, gpt2_cuda_free
//
// Glossary (as llmc/gpt2.h): B batch, T sequence length, C channels, NH heads, hs = C/NH,
// L layers, V vocabulary, Vp padded vocabulary, maxT positions. N = B*T positions.
//
// Memory, all allocated once, before the first step:
//   params   floatX, one allocation laid out by gpt2_param_table (the checkpoint's order),
//            padded to the ZeRO layout's world*shard values (llmc/zero.h)
//   grads    floatX, the same layout; micro-steps accumulate into it (+=)
//   m, v     fp32 AdamW moments of the values this rank updates (all of them with one
//            process or ZeRO 0, the owned slice at ZeRO 1 and 2)
//   master   fp32 copy of the same values, bf16 build with -w 1 only: AdamW updates it and
//            writes the bf16 params from it with stochastic rounding
//   acts     one allocation for what the forward keeps for the backward, the logits, and
//            the backward's scratch; its plan is printed at start
// Recompute (-r): 0 keeps every activation; 1 keeps GELU's input only and recomputes its
// output in the backward (saves L*N*4C values); 2 also keeps only one (N,C) buffer for each
// of the two LayerNorm outputs and recomputes them from the kept input, mean and rstd
// (saves 2*L*N*C more). LayerNorm recompute is bit-exact (the same device function on the
// same input); GELU recompute may differ from the forward's by an ulp when the forward
// used cuBLASLt's GELU epilogue (a different tanh), so -r 0 and -r 1 may differ in the last bits.
//
// Determinism: every kernel here sums in a fixed order (no float atomics), and cuBLASLt
// is run-to-run deterministic for one stream, one workspace and one GPU model; so the
// same run twice, or a run resumed from a checkpoint, gives the same bits.
#pragma once
#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "gpt2.h"                // defines: GPT2Config, ParamTensor, gpt2_param_table, GPT2
#include "checkpoint.h"          // defines: MODEL_MAGIC, AtomicFile, TrainState, state_write, state_read_range, ...
#include "zero.h"                // defines: ZeroLayout, zero_segments, zero_state_slice
#include "model_cuda.cuh"        // defines: cuda_malloc_or_fail, cuda_model_update, cuda_model_loss, ...
#include "cuda/common.cuh"       // defines: floatX, CudaContext, CHECK_CUDA, hash32, ...
#include "cuda/encoder.cuh"      // defines: encoder_forward, encoder_backward, EncoderBuckets
#include "cuda/layernorm.cuh"    // defines: layernorm_forward, fused_residual_layernorm_forward, layernorm_backward
#include "cuda/matmul.cuh"       // defines: matmul_forward, matmul_backward
#include "cuda/attention.cuh"    // defines: attention_forward, attention_backward
#include "cuda/attention_chosen.cuh" // defines: attention_forward_chosen, attention_backward_chosen (-ak)
#include "cuda/gelu.cuh"         // defines: gelu_forward, gelu_backward
#include "cuda/classifier.cuh"   // defines: classifier_forward_backward
#include "cuda/global_norm.cuh"  // defines: global_norm_squared
#include "cuda/adamw.cuh"        // defines: adamw_update
#include "cuda/phases.cuh"       // defines: phase_mark, PHASE_* (-pb 1)
#include "cuda/comm_gpu.cuh"     // defines: GpuComm, gpu_all_reduce_sum, gpu_all_gather_f32 (-tp)
#include "cuda/sequence_parallel.cuh" // defines: GpuTpStream (-tp, -sp)

// What the kernels need of a shape beyond gpt2_config_problem (model_cuda.cuh's
// cuda_shape_problem). nullptr when fine.
// tp: each tensor-parallel rank's part too (its channels C/tp, its vocabulary rows Vp/tp).
inline const char* gpt2_cuda_config_problem(const GPT2Config& c, int tp = 1) {
    if (c.channels / tp % 8 != 0 || c.padded_vocab_size / tp % 8 != 0)
        return "the GPU kernels need each tensor-parallel rank's C/tp and Vp/tp to be multiples of 8";
    return cuda_shape_problem(c.channels, c.padded_vocab_size, c.channels / c.num_heads);
}

// Named views into floatX buffers laid out by the table (parameters or their gradients).
struct ParamPtrsX {
    floatX *wte, *wpe, *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
    floatX *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb, *lnfw, *lnfb;
};

// The views from where each row starts (views[i]: row i's).
inline ParamPtrsX param_ptrs_x_of(floatX* const views[NUM_PARAM_TENSORS]) {
    ParamPtrsX v;
    floatX** fields[NUM_PARAM_TENSORS] = {&v.wte, &v.wpe, &v.ln1w, &v.ln1b, &v.qkvw, &v.qkvb,
        &v.attprojw, &v.attprojb, &v.ln2w, &v.ln2b, &v.fcw, &v.fcb, &v.fcprojw, &v.fcprojb,
        &v.lnfw, &v.lnfb};
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) *fields[i] = views[i];
    return v;
}

// The views of one buffer laid out by the table.
inline ParamPtrsX param_ptrs_x(floatX* base, const ParamTensor table[NUM_PARAM_TENSORS]) {
    floatX* views[NUM_PARAM_TENSORS];
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) views[i] = base + table[i].offset;
    return param_ptrs_x_of(views);
}

// Activations and scratch, sized for the (B, T) of gpt2_cuda_alloc_state. Per-layer
// tensors are L slices of the allocated N; a smaller forward (sampling) uses a prefix of
// each slice. -sp: the residual stream, the LayerNorms' outputs and statistics, and dres hold
// this rank's N/tp rows only (llmc/cuda/sequence_parallel.cuh).
struct GPUActivations {
    floatX* encoded;    // (N,C) wte + wpe
    floatX* ln1;        // (L,N,C) LayerNorm 1 outputs; (N,C) with -r 2
    float* ln1_mean;    // (L,N)
    float* ln1_rstd;    // (L,N)
    floatX* qkv;        // (L,N,3C)
    floatX* atty;       // (L,N,C) attention output (before the projection)
    float* att_lse;     // (L,B,NH,T) log-sum-exp of each query's scores, for the backward
    floatX* residual2;  // (L,N,C) residual stream after attention
    floatX* ln2;        // (L,N,C); (N,C) with -r 2
    float* ln2_mean;    // (L,N)
    float* ln2_rstd;    // (L,N)
    floatX* fch;        // (L,N,4C) fc output, GELU's input
    floatX* fch_gelu;   // (L,N,4C) GELU's output; (N,4C) with -r >= 1 or made in train_gpt_fp8's casts
    floatX* residual3;  // (L,N,C) residual stream after the MLP
    floatX* lnf;        // (N,C)
    float* lnf_mean;    // (N)
    float* lnf_rstd;    // (N)
    floatX* logits;     // (N,Vp); after a training forward it holds dlogits
    float* losses;      // (N)
    floatX* proj;       // (N,C) a projection's output before its residual add
    floatX* dres;       // (N,C) backward: gradient of the residual stream
    floatX* dtmp;       // (N,C) backward: gradient of a LayerNorm output / attention output
    floatX* dqkv;       // (N,3C)
    floatX* dfch;       // (N,4C)
    int* inputs;        // (N) token ids
    int* targets;       // (N)
    float* tp_stats;    // -tp: (tp,N,3) every rank's softmax statistics of each row (classifier_tp_stats)
    floatX* sp_full;    // -sp: (N,C) a buffer of the residual stream's gathered from every rank (GpuTpStream)
    floatX* sp_scratch; // -sp: (N,C) the rows in rank order, on their way to or from NCCL
    floatX* sp_part;    // -sp: (N/tp,C) this rank's rows of a row-parallel matmul's sum
    floatX* sp_keep;    // -sp: (4C) a norm's weight gradients kept aside, and this micro-step's parts
};

// -cg 1: the device work of a training micro-step (a forward with dloss > 0, then its
// backward) replayed as two CUDA graphs: one launch each instead of ~12 per layer. The
// forward's graph ends with the classifier, the backward's with the last layer's LayerNorm;
// what the host does in between (the losses copied back, the encoder backward's buckets
// sorted and uploaded) and the encoder backward (its grid depends on the batch) stay
// outside. Every pointer a graph bakes in is fixed once the state is allocated, and so are
// B, T and the recompute level; dloss is a kernel argument, so a new dloss recaptures the
// forward. The first training micro-step runs eagerly (modules load, attributes are set,
// cuBLASLt picks its algorithms) and is then captured, unexecuted, right behind itself, so
// step 0, which no timing counts, pays for both; later micro-steps replay. Off with -pb 1
// (its events time the launches) and when a sink reduces the layers during the backward.
struct StepGraphs {
    bool enabled = false;
    float dloss = 0.0f;                  // the forward graph's
    cudaGraphExec_t forward = nullptr, backward = nullptr;
};

// The buffers and host side every family has (model_cuda.cuh: CudaModelState; at ZeRO 2
// grads_len covers only wte, wpe, lnfw, lnfb, llmc/cuda/grad_sync_gpu.cuh), and GPT-2's own.
struct GPT2Cuda : CudaModelState {
    GPT2Config config;
    ParamTensor tensors[NUM_PARAM_TENSORS];
    ParamPtrsX p, g;
    GPUActivations acts;
    int recompute = 0;                 // -r
    bool act_in_cast = false;          // train_gpt_fp8 makes GELU in fcproj's casts: fch_gelu one layer deep
    StepGraphs graphs;                 // -cg 1: a training micro-step's launches as CUDA graphs
    std::vector<GPUActivations> act_sets;  // acts is one of these (-pp: one a micro-batch in flight)
};

// The sizes this rank computes with (llmc/gpt2.h: its heads, attention channels, FC units and
// vocabulary rows; the whole model's without -tp).
inline GPT2Dims gpt2_cuda_dims(const GPT2Cuda* model) { return gpt2_dims(model->config, model->tp_size, model->tp_rank); }

inline ParamLayout gpt2_cuda_layout(const GPT2Cuda* model) {
    return gpt2_layout(model->tensors, model->num_layers);
}

// The gradient views from where each row's gradient lives (views[i]; a data-parallel trainer
// moves them at ZeRO 2, llmc/cuda/grad_sync_gpu.cuh).
inline void gpt2_cuda_bind_grads(GPT2Cuda* model, floatX* const views[NUM_PARAM_TENSORS]) {
    model->g = param_ptrs_x_of(views);
}

// Takes the configuration and the weights of a host model (gpt2_init + gpt2_init_random, or
// gpt2_load_checkpoint) and uploads them, rounding to bf16 to nearest in the bf16 build.
// master_weights (bf16 build): keep an fp32 master copy of the values this rank updates,
// initialized from the host's fp32. z: the ZeRO layout (zero_layout(n, 0, 0, 1) for one process;
// ZeRO 3: the host holds the front and tail rows and host_shard this rank's slice, see
// cuda_model_init_params; the views are bound by llmc/cuda/grad_sync_gpu.cuh). tp (-tp): the
// tensor-parallel group, whose rank's part the host model is (llmc/families.h: model_new_part).
inline void gpt2_cuda_init(GPT2Cuda* model, const CudaContext* ctx, const GPT2* host, bool master_weights,
                           const ZeroLayout& z, const float* host_shard = nullptr, GpuComm* tp = nullptr) {
    model->config = host->config;
    cuda_model_take_table(model, host, tp);
    cuda_model_init_params(model, ctx, gpt2_cuda_config_problem(host->config, model->tp_size), host, master_weights, z,
                           gpt2_layout(model->tensors, model->num_layers), host_shard);
    if (z.stage < 3) model->p = param_ptrs_x(model->params, model->tensors);
}

enum { GPT2_CUDA_NUM_ACTIVATIONS = sizeof(GPUActivations) / sizeof(void*) };

// The activation plan for micro-batch B x T at recompute level 0..2: one row per buffer, in
// GPUActivations order, each pointing at its field of *a.
// -tp: a rank's part (its heads' qkv and attention outputs, its FC units, its columns of the logits).
inline void gpt2_cuda_activation_plan(const GPT2Config& cfg, int B, int T, int recompute, GPUActivations* a,
                                      CudaSlot slots[GPT2_CUDA_NUM_ACTIVATIONS], int tp = 1, bool sp = false,
                                      int layers = -1, bool act_in_cast = false) {
    const GPT2Dims d = gpt2_dims(cfg, tp, 0);
    size_t L = layers >= 0 ? layers : cfg.num_layers, C = cfg.channels, A = d.A, NH = d.NH, H = d.H, Vp = d.Vp;
    size_t N = (size_t)B * T, R = sp ? N / tp : N, S = sp ? N : 0;  // R: the residual stream's rows here
    // fch_gelu: recomputed (-r >= 1), or never written in training (act_in_cast: train_gpt_fp8's
    // casts make GELU from fch; only a sample's forward, in bf16, writes it): one layer deep
    size_t ln_layers = recompute >= 2 ? 1 : L, gelu_layers = recompute >= 1 || act_in_cast ? 1 : L;
    const size_t X = sizeof(floatX), F = sizeof(float), I = sizeof(int);
    const CudaSlot plan[] = {
        {(void**)&a->encoded, R * C, X},         {(void**)&a->ln1, ln_layers * R * C, X},
        {(void**)&a->ln1_mean, L * R, F},        {(void**)&a->ln1_rstd, L * R, F},
        {(void**)&a->qkv, L * N * 3 * A, X},     {(void**)&a->atty, L * N * A, X},
        {(void**)&a->att_lse, L * B * NH * T, F}, {(void**)&a->residual2, L * R * C, X},
        {(void**)&a->ln2, ln_layers * R * C, X}, {(void**)&a->ln2_mean, L * R, F},
        {(void**)&a->ln2_rstd, L * R, F},        {(void**)&a->fch, L * N * H, X},
        {(void**)&a->fch_gelu, gelu_layers * N * H, X}, {(void**)&a->residual3, L * R * C, X},
        {(void**)&a->lnf, R * C, X},             {(void**)&a->lnf_mean, R, F},
        {(void**)&a->lnf_rstd, R, F},            {(void**)&a->logits, N * Vp, X},
        {(void**)&a->losses, N, F},              {(void**)&a->proj, N * C, X},
        {(void**)&a->dres, R * C, X},            {(void**)&a->dtmp, N * C, X},
        {(void**)&a->dqkv, N * 3 * A, X},        {(void**)&a->dfch, N * H, X},
        {(void**)&a->inputs, N, I},              {(void**)&a->targets, N, I},
        {(void**)&a->tp_stats, tp > 1 ? tp * N * 3 : 0, F},
        {(void**)&a->sp_full, S * C, X},         {(void**)&a->sp_scratch, S * C, X},
        {(void**)&a->sp_part, sp ? R * C : 0, X}, {(void**)&a->sp_keep, sp ? 4 * C : 0, X},
    };
    static_assert(sizeof(plan) / sizeof(plan[0]) == GPT2_CUDA_NUM_ACTIVATIONS, "one slot per activation");
    std::copy(std::begin(plan), std::end(plan), slots);
}

// The bytes the activations of that plan take, before anything is allocated (the memory plan).
inline size_t gpt2_cuda_activation_bytes(const GPT2Config& cfg, int B, int T, int recompute, int tp = 1,
                                         bool sp = false, int layers = -1, bool act_in_cast = false) {
    GPUActivations a;
    CudaSlot slots[GPT2_CUDA_NUM_ACTIVATIONS];
    gpt2_cuda_activation_plan(cfg, B, T, recompute, &a, slots, tp, sp, layers, act_in_cast);
    return cuda_slots_bytes(slots, GPT2_CUDA_NUM_ACTIVATIONS);
}

// Gradients, AdamW state and activations for micro-batch B x T, recompute level 0..2.
// sets (-pp): the activations of that many micro-batches in flight. act_in_cast: train_gpt_fp8
// makes the activation in its casts at these rows (linears_act_in_cast_planned).
inline void gpt2_cuda_alloc_state(GPT2Cuda* model, int B, int T, int recompute, int sets = 1, bool act_in_cast = false) {
    CHECK(recompute >= 0 && recompute <= 2, "recompute=%d", recompute);
    cuda_model_alloc_grads(model, B, T);
    if (model->grads != nullptr) model->g = param_ptrs_x(model->grads, model->tensors);

    cuda_model_alloc_acts(model, sets, GPT2_CUDA_NUM_ACTIVATIONS, &model->act_sets, [&](GPUActivations* a, CudaSlot* slots) {
        gpt2_cuda_activation_plan(model->config, B, T, recompute, a, slots, model->tp_size, model->sp, model->num_layers,
                                  act_in_cast);
    });
    model->act_in_cast = act_in_cast;
    const size_t N = (size_t)B * T;
    model->B = B;
    model->T = T;
    model->recompute = recompute;

    cuda_model_alloc_io(model, N);
    CHECK_CUDA(cudaDeviceSynchronize());
}

inline void gpt2_cuda_print_memory(const GPT2Cuda* model) {
    cuda_model_print_memory(model, model->recompute);
}

// ---------------------------------------------------------------------------------------
// -cg 1 (StepGraphs): replays the graph *exec if there is one; else runs `launches` one by
// one and then captures them into *exec for the next time (the capture records, it does
// not run; relaxed, as the launchers may set kernel attributes) and uploads the graph.
template <typename Launches>
inline void step_graph_run(const CudaContext& ctx, cudaGraphExec_t* exec, const char* what, Launches&& launches) {
    if (*exec != nullptr) {
        CHECK_CUDA(cudaGraphLaunch(*exec, ctx.stream));
        return;
    }
    launches();
    cudaGraph_t graph;
    CHECK_CUDA(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeRelaxed));
    launches();
    CHECK_CUDA(cudaStreamEndCapture(ctx.stream, &graph));
    size_t nodes = 0;
    CHECK_CUDA(cudaGraphGetNodes(graph, nullptr, &nodes));
    CHECK_CUDA(cudaGraphInstantiate(exec, graph, 0));
    CHECK_CUDA(cudaGraphDestroy(graph));
    CHECK_CUDA(cudaGraphUpload(*exec, ctx.stream));
    printf("CUDA graph (-cg 1): the %s of a micro-step captured, %zu nodes\n", what, nodes);
}

inline void gpt2_cuda_forward_launches(GPT2Cuda* model, int B, int T, float dloss, bool has_targets);
inline void gpt2_cuda_backward_launches(GPT2Cuda* model, GradSinkOf<floatX>* sink);

// Forward: inputs (B,T) token ids and targets (B,T) or nullptr, both on the host. B, T may be
// smaller than allocated. dloss > 0 means a backward follows: the classifier then also
// writes dlogits (scaled by dloss, 1/(B*T*grad_accum)) over the logits, and the batch must
// be the full allocated B x T. The losses are copied back asynchronously: gpt2_cuda_loss.
inline void gpt2_cuda_forward(GPT2Cuda* model, const int* inputs, const int* targets, int B, int T, float dloss) {
    const CudaContext& ctx = *model->ctx;
    const int N = B * T;
    cuda_model_check_batch(model, inputs, targets, B, T, dloss, model->config.vocab_size);
    cuda_model_upload_batch(model, inputs, targets, N);

    // the layers and the classifier: launched one by one, or replayed as a graph (-cg 1)
    StepGraphs& sg = model->graphs;
    bool as_graph = sg.enabled && dloss > 0.0f && ctx.phases == nullptr;
    if (as_graph && sg.forward != nullptr && sg.dloss != dloss) {
        CHECK_CUDA(cudaGraphExecDestroy(sg.forward));  // freed once a replay in flight is done
        sg.forward = nullptr;
    }
    if (as_graph) {
        sg.dloss = dloss;
        step_graph_run(ctx, &sg.forward, "forward",
                       [&] { gpt2_cuda_forward_launches(model, B, T, dloss, targets != nullptr); });
    } else {
        gpt2_cuda_forward_launches(model, B, T, dloss, targets != nullptr);
    }
    if (targets != nullptr && model->pp_last) cuda_model_copy_losses(model, N);
    // the encoder backward's buckets: sorted on the host while the GPU runs the forward,
    // copied in stream order before the backward (-pp: the first stage's, before each backward)
    if (dloss > 0.0f && model->pp_first) {
        const GPT2Dims d = gpt2_cuda_dims(model);  // -tp: the tokens of this rank's rows of wte
        encoder_buckets_build(ctx, &model->buckets, inputs, B, T, d.v0, model->tp != nullptr ? d.Vp : -1);
    }
    model->last_N = N;
    model->last_had_targets = targets != nullptr && model->pp_last;
    model->backward_ready = dloss > 0.0f;
}

// Layer l's slices of the kept activations (ln1/ln2 and fch_gelu: the one shared buffer when
// recomputed), and the residual stream it reads, for the allocated B x T (a smaller forward
// batch is a prefix of each slice). size_t throughout: l * 4 * N * C passes 2^31 at d48 and B*T=32K.
struct GPT2LayerActsX {
    const floatX* residual;  // (N,C) the layer's input: encoded, or the previous layer's residual3 (-sp: N/tp rows)
    floatX *ln1, *qkv, *atty, *residual2, *ln2, *fch, *fch_gelu, *residual3;
    float *ln1_mean, *ln1_rstd, *att_lse, *ln2_mean, *ln2_rstd;
};
inline GPT2LayerActsX gpt2_cuda_layer_acts(const GPT2Cuda* model, int l) {
    const GPUActivations& a = model->acts;
    const GPT2Dims d = gpt2_cuda_dims(model);  // -tp: this rank's heads and FC units
    const size_t N = (size_t)model->B * model->T, li = (size_t)l;
    const size_t R = model->sp ? N / model->tp_size : N, NC = R * model->config.channels;  // -sp: this rank's rows
    const size_t NA = N * d.A, NH = N * d.H, lse_stride = N * d.NH;
    // -r 2 recomputes ln1 and ln2 into one buffer each, -r 1 the GELU output (which train_gpt_fp8
    // makes in its casts: act_in_cast)
    const size_t ln_stride = model->recompute >= 2 ? 0 : NC;
    const size_t gelu_stride = model->recompute >= 1 || model->act_in_cast ? 0 : NH;
    GPT2LayerActsX v;
    v.residual = l == 0 ? a.encoded : a.residual3 + (li - 1) * NC;
    v.ln1 = a.ln1 + li * ln_stride;
    v.qkv = a.qkv + li * 3 * NA;
    v.atty = a.atty + li * NA;
    v.residual2 = a.residual2 + li * NC;
    v.ln2 = a.ln2 + li * ln_stride;
    v.fch = a.fch + li * NH;
    v.fch_gelu = a.fch_gelu + li * gelu_stride;
    v.residual3 = a.residual3 + li * NC;
    v.ln1_mean = a.ln1_mean + li * R;
    v.ln1_rstd = a.ln1_rstd + li * R;
    v.att_lse = a.att_lse + li * lse_stride;
    v.ln2_mean = a.ln2_mean + li * R;
    v.ln2_rstd = a.ln2_rstd + li * R;
    return v;
}

// The forward's launches, from the embedding to the classifier (which, with targets, writes
// the losses and, with dloss > 0, dlogits over the logits); the inputs and targets are on
// the device already. Nothing here touches the host: -cg 1 captures it as it stands.
//
// -tp (llmc/tensor_parallel.h has the picture): QKV and FC are column-parallel (this rank's
// heads, its FC units: A and H of them), the projections row-parallel: their products are
// partial sums, added over the group with the bias added by rank 0 alone. The lookup is
// vocab-parallel (rank 0 adds wpe), and so are the logits: this rank's Vp/tp columns. -sp: the
// residual stream and the LayerNorms run on this rank's rows (R of N), their outputs gathered
// for the matmuls that read them, the partial sums reduce-scattered (GpuTpStream).
inline GpuTpStream gpt2_cuda_stream(GPT2Cuda* model, int B, int T) {
    GPUActivations& a = model->acts;
    return GpuTpStream(*model->ctx, model->tp, model->sp, B, T, model->config.channels, a.sp_full, a.sp_scratch,
                       a.sp_keep);
}
inline void gpt2_cuda_forward_launches(GPT2Cuda* model, int B, int T, float dloss, bool has_targets) {
    const GPT2Config& cfg = model->config;
    const CudaContext& ctx = *model->ctx;
    const GPT2Dims d = gpt2_cuda_dims(model);
    const int lo = model->run_lo, hi = model->run_hi;  // -vp: one chunk of this stage's layers
    const int C = cfg.channels, NH = d.NH, A = d.A, H = d.H, V = cfg.vocab_size;
    const int Vp = d.Vp, N = B * T;
    GPUActivations& a = model->acts;
    const ParamPtrsX& p = model->p;
    const ParamLayout table = gpt2_cuda_layout(model);
    const bool root = model->tp_rank == 0;  // adds the row-parallel biases and wpe
    const GpuTpStream ts = gpt2_cuda_stream(model, B, T);
    const int R = ts.rows;
    floatX* const projr = ts.sp ? a.sp_part : a.proj;  // a projection's sum: in place, or (-sp) this rank's rows
    // layer l's weights (ZeRO 3: gathered, the next layer's meanwhile: cuda_model_layer_params)
    auto weights = [&](int l) {
        floatX* slice[NUM_LAYER_TENSORS];
        cuda_model_layer_params(model, table, l, l + 1 < hi ? l + 1 : -1, slice);
        return layer_ptrs_of(slice);
    };
    if (model->pp_first) {  // -pp: a later stage's a.encoded holds the stage before's output
        phase_mark(ctx, PHASE_ENCODER);
        // one rank holds each token's row, the others add zeros: the sum is exact
        encoder_forward(ctx, ts.sp ? a.proj : a.encoded, a.inputs, p.wte, root ? p.wpe : nullptr, B, T, C, d.v0,
                        model->tp != nullptr ? Vp : -1);
        ts.sum(ts.sp ? a.proj : a.encoded, a.encoded);
    }
    // the chunk's first ln1 from its input (encoded, or the layer before's residual3: the stage
    // before's output); the others are fused with the residual adds
    LayerPtrsOf<floatX> lp = weights(lo);
    const GPT2LayerActsX first = gpt2_cuda_layer_acts(model, lo);
    phase_mark(ctx, PHASE_LAYERNORM);
    layernorm_forward(ctx, first.ln1, first.ln1_mean, first.ln1_rstd, first.residual, lp.ln1w, lp.ln1b, R, C);
    for (int l = lo; l < hi; l++) {
        const GPT2LayerActsX la = gpt2_cuda_layer_acts(model, l);
        auto slot = [&](int k) { return linear_slot(model->linears, l, k); };  // fp8: linear k's scales
        // residual2 = residual + attproj(attention(qkv(ln1(residual)))); ln1 is already done
        phase_mark(ctx, PHASE_MATMUL);
        linear_forward(ctx, slot(0), la.qkv, nullptr, ts.whole(la.ln1), lp.qkvw, lp.qkvb, N, C, 3 * A);
        phase_mark(ctx, PHASE_ATTENTION_FWD);
        attention_forward_chosen(ctx, la.atty, la.att_lse, la.qkv, B, T, NH, NH, A / NH);
        phase_mark(ctx, PHASE_MATMUL);
        linear_forward(ctx, slot(1), a.proj, nullptr, la.atty, lp.attprojw, root ? lp.attprojb : nullptr, N, A, C);
        ts.sum(a.proj, projr);
        phase_mark(ctx, PHASE_LAYERNORM);
        fused_residual_layernorm_forward(ctx, la.residual2, la.ln2, la.ln2_mean, la.ln2_rstd, la.residual, projr,
                                         lp.ln2w, lp.ln2b, R, C);
        // residual3 = residual2 + fcproj(gelu(fc(ln2))); train_gpt_fp8 makes the GELU in fcproj's
        // cast of its input (linear_act_in_cast: fch_gelu is not written)
        phase_mark(ctx, PHASE_MATMUL);
        if (linear_act_in_cast(model->linears, N)) {
            linear_forward(ctx, slot(2), la.fch, nullptr, ts.whole(la.ln2), lp.fcw, lp.fcb, N, C, H);
            linear_forward(ctx, slot(3), a.proj, nullptr, nullptr, lp.fcprojw, root ? lp.fcprojb : nullptr, N, H, C,
                           Act{ACT_GELU, la.fch});
        } else {
            linear_forward(ctx, slot(2), la.fch_gelu, la.fch, ts.whole(la.ln2), lp.fcw, lp.fcb, N, C, H);
            linear_forward(ctx, slot(3), a.proj, nullptr, la.fch_gelu, lp.fcprojw, root ? lp.fcprojb : nullptr, N, H, C);
        }
        ts.sum(a.proj, projr);
        // the residual add is fused with the LayerNorm that reads it next: the next layer's
        // ln1 (with the next layer's weights: this layer's are done with), or after the last
        // layer lnf (-pp: a stage before the last adds alone, its output goes to the next)
        phase_mark(ctx, PHASE_LAYERNORM);
        if (l + 1 < hi) {
            const GPT2LayerActsX next = gpt2_cuda_layer_acts(model, l + 1);
            lp = weights(l + 1);
            fused_residual_layernorm_forward(ctx, la.residual3, next.ln1, next.ln1_mean, next.ln1_rstd, la.residual2,
                                             projr, lp.ln1w, lp.ln1b, R, C);
        } else if (model->pp_last) {
            fused_residual_layernorm_forward(ctx, la.residual3, a.lnf, a.lnf_mean, a.lnf_rstd, la.residual2, projr,
                                             p.lnfw, p.lnfb, R, C);
        } else {
            CHECK_CUDA(cudaMemcpyAsync(la.residual3, la.residual2, (size_t)R * C * sizeof(floatX),
                                       cudaMemcpyDeviceToDevice, ctx.stream));
            accumulate(ctx.stream, la.residual3, projr, (size_t)R * C);
        }
    }
    if (!model->pp_last) return;
    phase_mark(ctx, PHASE_CLASSIFIER_MATMUL);
    matmul_forward(ctx, a.logits, nullptr, ts.whole(a.lnf), p.wte, nullptr, N, C, Vp);  // tied head: wte is the classifier
    if (has_targets) cuda_model_classifier(model, N, V, Vp, d.v0, dloss);
}

// Mean loss of the last forward with targets; the loss at each position (model_cuda.cuh).
inline float gpt2_cuda_loss(GPT2Cuda* model) { return cuda_model_loss(model); }
inline const float* gpt2_cuda_token_losses(GPT2Cuda* model) { return cuda_model_token_losses(model); }

// out (Vp floats) = the logits of position `row` (b*T + t) of the last forward without dloss.
inline void gpt2_cuda_logits_row(GPT2Cuda* model, int row, float* out) { cuda_model_logits_row(model, row, out); }

// ---------------------------------------------------------------------------------------
// Backward of the last forward (which had dloss > 0), accumulating (+=) into the grads, or
// where sink says for the layers (llmc/gpt2.h: GradSinkOf; several ranks reduce each layer
// as it is finished). Reverse order of the forward; dres carries the residual stream's
// gradient down.
inline void gpt2_cuda_backward(GPT2Cuda* model, GradSinkOf<floatX>* sink = nullptr) {
    CHECK(model->backward_ready, "gpt2_cuda_backward needs a forward with targets and dloss > 0 just before");
    const CudaContext& ctx = *model->ctx;
    StepGraphs& sg = model->graphs;
    if (sg.enabled && sink == nullptr && ctx.phases == nullptr) {
        step_graph_run(ctx, &sg.backward, "backward", [&] { gpt2_cuda_backward_launches(model, nullptr); });
    } else {
        gpt2_cuda_backward_launches(model, sink);
    }
    const GpuTpStream ts = gpt2_cuda_stream(model, model->B, model->T);  // -sp: every position's dres
    phase_mark(ctx, PHASE_ENCODER);
    if (model->pp_first)  // -pp: a later stage's dres goes to the stage before
        encoder_backward(ctx, model->g.wte, model->g.wpe, ts.whole(model->acts.dres), model->buckets, model->B, model->T,
                         model->config.channels);
    phase_mark(ctx, PHASE_OTHER);
    if (sink != nullptr) sink->backward_done();
    model->backward_ready = false;
}

// The backward's launches from the classifier's matmul down to the first layer, leaving the
// residual stream's gradient in acts.dres for the encoder backward. No host work: -cg 1
// captures it as it stands (without a sink).
inline void gpt2_cuda_backward_launches(GPT2Cuda* model, GradSinkOf<floatX>* sink) {
    const GPT2Config& cfg = model->config;
    const CudaContext& ctx = *model->ctx;
    const GPT2Dims d = gpt2_cuda_dims(model);
    const int B = model->B, T = model->T, N = B * T;
    const int lo = model->run_lo, hi = model->run_hi;  // -vp: one chunk of this stage's layers
    const int C = cfg.channels, NH = d.NH, A = d.A, H = d.H, Vp = d.Vp;
    const ParamPtrsX& p = model->p;
    const ParamPtrsX& g = model->g;
    GPUActivations& a = model->acts;
    // -tp: a column-parallel matmul's input gradient is this rank's part of the sum: added over
    // the group (ts.sum; -sp: into this rank's rows, dtmpr). The row-parallel ones' need nothing
    // (the output gradient is whole on every rank: -sp gathers it), and their bias gradients come
    // out the same on every rank. -sp: a LayerNorm's weight gradients from this rank's rows are
    // added over the group (ts.norm_grads).
    const GpuTpStream ts = gpt2_cuda_stream(model, B, T);
    const int R = ts.rows;
    const size_t RC = (size_t)R * C;
    floatX* const dtmpr = ts.sp ? a.sp_part : a.dtmp;
    auto ln_backward = [&](floatX* dw, floatX* db, const floatX* residual, const floatX* w, const float* mean,
                           const float* rstd) {
        floatX* const grads[2] = {dw, db};
        const size_t n[2] = {(size_t)C, (size_t)C};
        ts.norm_grads(grads, n, 2, [&] {
            layernorm_backward(ctx, a.dres, dw, db, dtmpr, residual, w, mean, rstd, R, C);
        });
    };

    // logits hold dlogits (the classifier wrote them in the forward); -pp: a stage before the
    // last has the next stage's gradient of its output in dres already
    if (model->pp_last) {
        phase_mark(ctx, PHASE_CLASSIFIER_MATMUL);
        matmul_backward(ctx, a.dtmp, g.wte, nullptr, a.logits, ts.whole(a.lnf), p.wte, N, C, Vp, false);
        ts.sum(a.dtmp, dtmpr);
        phase_mark(ctx, PHASE_LAYERNORM);
        CHECK_CUDA(cudaMemsetAsync(a.dres, 0, RC * sizeof(floatX), ctx.stream));
        ln_backward(g.lnfw, g.lnfb, a.residual3 + (hi - 1) * RC, p.lnfw, a.lnf_mean, a.lnf_rstd);
    }
    const ParamLayout table = gpt2_cuda_layout(model);
    for (int l = hi - 1; l >= lo; l--) {
        floatX* slice[NUM_LAYER_TENSORS];
        cuda_model_layer_params(model, table, l, l > lo ? l - 1 : -1, slice);  // ZeRO 3: gathered, layer l - 1 meanwhile
        const LayerPtrsOf<floatX> lp = layer_ptrs_of(slice);
        LayerPtrsOf<floatX> lg;
        if (sink != nullptr) {
            sink->layer_grads(l, slice);
            lg = layer_ptrs_of(slice);
        } else {
            lg = layer_ptrs(model->grads, model->tensors, l, model->num_layers);
        }
        const GPT2LayerActsX la = gpt2_cuda_layer_acts(model, l);
        auto slot = [&](int k) { return linear_slot(model->linears, l, k); };  // fp8: linear k's scales
        // what the forward did not keep
        if (model->recompute >= 2) {
            phase_mark(ctx, PHASE_LAYERNORM);
            layernorm_forward(ctx, la.ln1, nullptr, nullptr, la.residual, lp.ln1w, lp.ln1b, R, C);
            layernorm_forward(ctx, la.ln2, nullptr, nullptr, la.residual2, lp.ln2w, lp.ln2b, R, C);
        }
        // train_gpt_fp8 (linear_act_in_cast): the GELU is made in fcproj's cast of its input and
        // taken back in fc's cast of dfch, so neither a recompute nor a GELU backward pass
        const bool act_in_cast = linear_act_in_cast(model->linears, N);
        const Act gelu = act_in_cast ? Act{ACT_GELU, la.fch} : Act{};
        phase_mark(ctx, PHASE_GELU);
        if (model->recompute >= 1 && !act_in_cast) gelu_forward(ctx, la.fch_gelu, la.fch, (size_t)N * H);
        // residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
        phase_mark(ctx, PHASE_MATMUL);
        // dfch: through fcproj and back through the GELU (in the matmul's epilogue with -ge 2), and
        // with it fc's bias gradient, the column sums of dfch (in the same epilogue with -bg 2)
        const bool fc_bias_taken =
            linear_backward(ctx, slot(3), a.dfch, lg.fcprojw, lg.fcprojb, ts.whole(a.dres), la.fch_gelu, lp.fcprojw, N,
                            H, C, false, act_in_cast ? nullptr : la.fch, Act{}, gelu, act_in_cast ? nullptr : lg.fcb);
        linear_backward(ctx, slot(2), a.dtmp, lg.fcw, fc_bias_taken ? nullptr : lg.fcb, a.dfch, ts.whole(la.ln2), lp.fcw,
                        N, C, H, false, nullptr, gelu);
        ts.sum(a.dtmp, dtmpr);
        phase_mark(ctx, PHASE_LAYERNORM);
        ln_backward(lg.ln2w, lg.ln2b, la.residual2, lp.ln2w, la.ln2_mean, la.ln2_rstd);
        // residual2 = residual + attproj(attention(qkv(ln1(residual))))
        phase_mark(ctx, PHASE_MATMUL);
        linear_backward(ctx, slot(1), a.dtmp, lg.attprojw, lg.attprojb, ts.whole(a.dres), la.atty, lp.attprojw, N, A, C,
                        false);
        phase_mark(ctx, PHASE_ATTENTION_BWD);
        attention_backward_chosen(ctx, a.dqkv, a.dtmp, la.qkv, la.atty, la.att_lse, B, T, NH, NH, A / NH);
        phase_mark(ctx, PHASE_MATMUL);
        linear_backward(ctx, slot(0), a.dtmp, lg.qkvw, lg.qkvb, a.dqkv, ts.whole(la.ln1), lp.qkvw, N, C, 3 * A, false);
        ts.sum(a.dtmp, dtmpr);
        phase_mark(ctx, PHASE_LAYERNORM);
        ln_backward(lg.ln1w, lg.ln1b, la.residual, lp.ln1w, la.ln1_mean, la.ln1_rstd);
        phase_mark(ctx, PHASE_OTHER);
        if (sink != nullptr) sink->layer_done(l);  // its reduction may start now, on another stream
    }
}

// The gradient buffers, the norm and AdamW over the table: model_cuda.cuh's, for GPT-2.
inline void gpt2_cuda_zero_grad(GPT2Cuda* model) { cuda_model_zero_grad(model); }
inline floatX* gpt2_cuda_opt_grads(GPT2Cuda* model) { return cuda_model_opt_grads(model); }
inline double gpt2_cuda_grad_sum_squares(GPT2Cuda* model) { return cuda_model_grad_sum_squares(model); }
inline void gpt2_cuda_update(GPT2Cuda* model, float lr, float beta1, float beta2, float eps, float weight_decay,
                             float grad_scale, int t) {
    cuda_model_update(model, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
}

// ---------------------------------------------------------------------------------------
// host copies and files

// out (num_parameters floats) = a device floatX buffer laid out by the table, widened.
inline void gpt2_cuda_download_floatx(const GPT2Cuda* model, const floatX* src, float* out) {
    cuda_download_floatx(*model->ctx, src, model->num_parameters, out);
}
inline void gpt2_cuda_download_grads(const GPT2Cuda* model, float* out) {
    gpt2_cuda_download_floatx(model, model->grads, out);
}

// llm.c model file of the current weights: version 3 (fp32) or 5 (bf16, the params' bits).
// gathered: the whole model's vector on the host already (ZeRO 3; -tp: put together from every
// rank's part), else it comes from model->params.
inline void gpt2_cuda_write_model(const GPT2Cuda* model, const std::string& path, const floatX* gathered = nullptr) {
    CHECK_CUDA(cudaStreamSynchronize(model->ctx->stream));
    int32_t h[256] = {0};
    const GPT2Config& c = model->config;
    h[0] = MODEL_MAGIC; h[1] = sizeof(floatX) == 2 ? MODEL_VERSION_BF16 : MODEL_VERSION_FP32;
    h[2] = c.max_seq_len; h[3] = c.vocab_size; h[4] = c.num_layers; h[5] = c.num_heads; h[6] = c.channels;
    h[7] = c.padded_vocab_size;
    AtomicFile out(path);
    out.write(h, sizeof(h));
    ParamTensor whole[NUM_PARAM_TENSORS];
    const size_t n = gathered != nullptr ? gpt2_param_table(c, whole) : model->num_parameters;
    std::vector<floatX> chunk(std::min<size_t>(n, 1 << 22));
    for (size_t done = 0; done < n; done += chunk.size()) {
        size_t k = std::min(chunk.size(), n - done);
        if (gathered != nullptr) std::copy(gathered + done, gathered + done + k, chunk.begin());
        else CHECK_CUDA(cudaMemcpy(chunk.data(), model->params + done, k * sizeof(floatX), cudaMemcpyDeviceToHost));
        out.write(chunk.data(), k * sizeof(floatX));
    }
    out.commit();
}

// As checkpoint_write_model_and_state in llmc/checkpoint.h: the model file (rank 0) and this
// rank's state file (AdamW m, v and the master weights when there are any, of the slice it
// owns), each durable on disk. The DONE marker follows once every rank is done.
// gathered: as gpt2_cuda_write_model's (rank 0).
inline void gpt2_cuda_checkpoint_write(const std::string& dir, int step, const GPT2Cuda* model, TrainState s,
                                       const floatX* gathered = nullptr) {
    CHECK_CUDA(cudaStreamSynchronize(model->ctx->stream));
    if (s.rank == 0) gpt2_cuda_write_model(model, checkpoint_path(dir, "model", step), gathered);
    cuda_model_write_state(model, dir, step, s);
}

// Restores AdamW m, v and the master weights from the checkpoint at `step` (model_cuda.cuh).
inline void gpt2_cuda_load_state(GPT2Cuda* model, const std::string& dir, int step, TrainState* s) {
    cuda_model_load_state(model, dir, step, s);
}

inline void gpt2_cuda_free(GPT2Cuda* model) {
    CHECK_CUDA(cudaDeviceSynchronize());
    for (cudaGraphExec_t exec : {model->graphs.forward, model->graphs.backward})
        if (exec != nullptr) CHECK_CUDA(cudaGraphExecDestroy(exec));
    cuda_model_free_buffers(model);
    *model = GPT2Cuda();
}
