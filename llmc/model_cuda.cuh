// model_cuda.cuh: what every model family's GPU model shares (GPT-2 in gpt2_cuda.cuh, Llama 3 in
// llama_cuda.cuh): the device buffers laid out by the family's parameter table, their upload
// and download, the activation plan, the loss readback, the gradient norm and AdamW over the table.
// defines: CudaModelState, cuda_model_take_table, cuda_malloc_or_fail, cuda_shape_problem, cuda_upload_params, cuda_download_floatx, CudaSlot,
//          cuda_slots_bytes, cuda_carve_slots,
//          cuda_model_init_params, cuda_model_layer_params, cuda_model_opt_params, cuda_model_alloc_grads, cuda_model_alloc_io, cuda_model_free_io,
//          cuda_model_check_batch, cuda_model_upload_batch, cuda_model_classifier, cuda_model_copy_losses, cuda_model_loss,
//          cuda_model_token_losses, cuda_model_zero_grad, cuda_model_opt_grads, cuda_model_grad_sum_squares,
//          cuda_model_update, cuda_model_logits_row, cuda_model_write_state, cuda_model_set_state, cuda_model_load_state,
//          cuda_model_alloc_acts, cuda_model_select_acts, cuda_model_print_memory, cuda_model_free_buffers
//
// The cuda_model_* templates take a family's model struct M: a CudaModelState (below) with the
// family's config (padded_vocab_size, max_seq_len), tensors[] (its table) and acts (inputs,
// targets, losses, logits among them).
#pragma once
#include <algorithm>
#include <iterator>
#include <vector>

#include "model.h"               // defines: ParamTensor
#include "checkpoint.h"          // defines: TrainState, state_write, state_read_range, checkpoint_path, fsync_dir
#include "zero.h"                // defines: ZeroLayout, zero_segments
#include "cuda/common.cuh"       // defines: floatX, CudaContext, CHECK_CUDA, hash32, ...
#include "cuda/encoder.cuh"      // defines: EncoderBuckets, encoder_buckets_init, encoder_buckets_free (and,
                                 //          from gpu_scratch.h, encoder_buckets_device_bytes)
#include "cuda/attention.cuh"    // defines: ATTENTION_HEAD_SIZES
#include "cuda/global_norm.cuh"  // defines: global_norm_squared
#include "cuda/adamw.cuh"        // defines: adamw_update
#include "cuda/phases.cuh"       // defines: phase_mark, PHASE_*
#include "cuda/comm_gpu.cuh"     // defines: GpuComm, gpu_all_gather_f32 (-tp)
#include "cuda/classifier.cuh"   // defines: classifier_forward_backward, classifier_tp_stats, classifier_tp_finish
#include "cuda/linear.cuh"       // defines: ModelLinears, linear_slot, linear_forward, linear_backward (fp8 or not),
                                 //          linears_allocated_bytes (and, from matmul_algos.cuh, MatmulTiming)

inline void* cuda_malloc_or_fail(size_t bytes, const char* what) {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes == 0 ? 16 : bytes);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        fail("out of GPU memory allocating %s: %.1f MiB (%.1f MiB free of %.1f MiB); try a smaller -b or -r 2",
             what, bytes / 1048576.0, free_b / 1048576.0, total_b / 1048576.0);
    }
    return p;
}

// dst (n floatX, device) = src (n floats, host), rounded to bf16 to nearest in the bf16 build.
// In chunks: a whole-model floatX copy on the host would be one more model's worth.
inline void cuda_upload_params(floatX* dst, const float* src, size_t n) {
    std::vector<floatX> chunk(std::min<size_t>(n, 1 << 22));
    for (size_t done = 0; done < n; done += chunk.size()) {
        size_t k = std::min(chunk.size(), n - done);
        for (size_t i = 0; i < k; i++) chunk[i] = from_float<floatX>(src[done + i]);
        CHECK_CUDA(cudaMemcpy(dst + done, chunk.data(), k * sizeof(floatX), cudaMemcpyHostToDevice));
    }
}

// out (n floats, host) = src (n floatX, device), widened, once the stream's work is done.
inline void cuda_download_floatx(const CudaContext& ctx, const floatX* src, size_t n, float* out) {
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<floatX> chunk(std::min<size_t>(n, 1 << 22));
    for (size_t done = 0; done < n; done += chunk.size()) {
        size_t k = std::min(chunk.size(), n - done);
        CHECK_CUDA(cudaMemcpy(chunk.data(), src + done, k * sizeof(floatX), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < k; i++) out[done + i] = to_float(chunk[i]);
    }
}

// One row of an activation plan: where the buffer's pointer goes, its elements and their size.
struct CudaSlot {
    void** ptr;
    size_t count, elem;
};

// The bytes of the slots' buffers one after the other, each starting on 256 bytes (the
// kernels need 16, cuBLASLt likes 256): what cuda_carve_slots allocates, and what the memory
// plan counts before anything is allocated.
inline size_t cuda_slots_bytes(const CudaSlot* slots, int count) {
    size_t total = 0;
    for (int i = 0; i < count; i++) total += (slots[i].count * slots[i].elem + 255) / 256 * 256;
    return total;
}

// One zeroed device allocation cut into the slots' buffers, in order (cuda_slots_bytes).
// Returns it (*bytes: its size).
inline void* cuda_carve_slots(const CudaSlot* slots, int count, size_t* bytes) {
    const size_t total = cuda_slots_bytes(slots, count);
    void* memory = cuda_malloc_or_fail(total, "activations");
    char* cursor = (char*)memory;
    for (int i = 0; i < count; i++) {
        *slots[i].ptr = cursor;
        cursor += (slots[i].count * slots[i].elem + 255) / 256 * 256;
    }
    // zeroed once so that nothing reads garbage, e.g. the padded logits columns
    CHECK_CUDA(cudaMemset(memory, 0, total));
    *bytes = total;
    return memory;
}

// What every family's kernels need of its shape: every tensor (and every layer's slice of it)
// starts on 16 bytes, which C % 8 == 0 and Vp % 8 == 0 give for fp32 and bf16, and the head
// size hs is one the attention kernels were compiled for. nullptr when fine.
inline const char* cuda_shape_problem(int C, int Vp, int hs) {
    if (C % 8 != 0) return "the GPU kernels need C to be a multiple of 8";
    if (Vp % 8 != 0) return "the GPU kernels need Vp to be a multiple of 8";
    for (int ok : {8, 16, 32, 48, 64, 80, 96, 128})
        if (hs == ok) return nullptr;
    return "head size C/NH is not one the attention kernels were compiled for (" ATTENTION_HEAD_SIZES ")";
}

// ---------------------------------------------------------------------------------------
// the buffers laid out by the table

// What a family's GPU model holds besides its configuration, table, named views and activations.
struct CudaModelState {
    const CudaContext* ctx = nullptr;  // the stream, cuBLASLt handle and workspace every launch uses
    size_t num_parameters = 0;
    floatX* params = nullptr;          // one allocation laid out by the family's table (ZeRO 3:
                                       // the front rows, then the tail rows; no layer rows)
    size_t params_len = 0;             // values in params
    floatX* param_shard = nullptr;     // ZeRO 3: this rank's slice of the parameters (z.shard), what AdamW updates
    size_t param_slots_len = 0;        // ZeRO 3: values in the two layer slots the layers are gathered into
    ParamSourceOf<floatX>* param_source = nullptr;  // ZeRO 3: where the layers come from (grad_sync_gpu.cuh)
    floatX* grads = nullptr;           // the same layout; micro-steps accumulate into it (+=)
    float* m = nullptr;                // AdamW moments of the values this rank updates
    float* v = nullptr;
    float* master = nullptr;           // bf16 build with master weights (-w 1) only
    ZeroLayout z;                      // this rank's part (llmc/zero.h): params and grads are
                                       // z.padded long; m, v and master cover [opt_begin, opt_end)
    floatX* grad_shard = nullptr;      // ZeRO 2, 3: the owned slice's gradient, summed over micro-steps
    size_t grads_len = 0;              // values in grads: z.padded (less at ZeRO 2, 3 with bucket slots)
    size_t grad_slots_len = 0;         // values in the layer bucket slots held beside grads
                                       // (several ranks: llmc/cuda/grad_sync_gpu.cuh)
    void* acts_memory = nullptr;       // the activations' one allocation (cuda_carve_slots)
    size_t acts_bytes = 0;
    int B = 0, T = 0;                  // what acts are sized for
    EncoderBuckets buckets;            // the positions of the last training batch, by token
    int* io_host = nullptr;            // pinned staging of inputs | targets
    cudaEvent_t io_copied = nullptr;   // io_host may be rewritten once this has passed
    float* losses_host = nullptr;      // pinned (N)
    cudaEvent_t losses_ready = nullptr;
    float* norm_device = nullptr;      // one float
    float* norm_host = nullptr;        // pinned, one float
    int last_N = 0;                    // positions of the last forward
    bool last_had_targets = false;
    bool backward_ready = false;       // the last forward wrote dlogits for a full batch
    GpuComm* tp = nullptr;             // -tp: the tensor-parallel group; the table is this rank's part
    int tp_size = 1, tp_rank = 0;      // its size and this rank's place in it
    bool sp = false;                   // -sp 1 (with -tp): the residual stream split along T (set before the state)
    int num_layers = 0;                // the layers this rank runs: all, or (-pp) its stage's
    int run_lo = 0, run_hi = 0;        // -vp: the chunk of them a forward or backward runs, [run_lo, run_hi)
    bool pp_first = true, pp_last = true;  // -pp: the chunk begins with the embedding / ends with the head
    int act_set = 0;                   // -pp: which of the activation sets acts is (one a micro-batch in flight)
    std::vector<void*> more_acts_memory;  // -pp: the allocations of the sets after the first
    ModelLinears linears = {};         // train_gpt_fp8: the FP8 state of the blocks' linear layers (linear.cuh)
};

// The host model's table (the whole model's, or with -tp, -pp this rank's part of it:
// llmc/families.h model_new_part: its heads, its stage's layers) and the tensor-parallel group
// the part belongs to (tp nullptr: none).
template <typename M>
inline void cuda_model_take_table(M* model, const ModelBase* host, GpuComm* tp) {
    model->tp = tp;
    model->tp_size = tp != nullptr ? tp->host->world : 1;
    model->tp_rank = tp != nullptr ? tp->host->rank : 0;
    std::copy(host->tensors, host->tensors + std::size(model->tensors), model->tensors);
    model->num_parameters = host->num_parameters;
    model->num_layers = host->num_layers;
    model->run_lo = 0;
    model->run_hi = host->num_layers;
    model->pp_first = host->pp_first;
    model->pp_last = host->pp_last;
}

// The parameters (z.padded values, the padding zero) uploaded from the host model's fp32 ones,
// rounded to bf16 to nearest in the bf16 build, and with master_weights (bf16 build) an fp32
// master copy of the values this rank updates. The family has filled in model->config, tensors
// and num_parameters; problem is what its kernels find wrong with the shape (nullptr: nothing).
// ZeRO 3 (table: the family's layout): the host model holds the front rows then the tail rows
// and host_shard this rank's slice (train_load_model_zero3), and so will the device: params
// the front and tail rows, param_shard the slice; the layers are gathered as they run.
template <typename M>
inline void cuda_model_init_params(M* model, const CudaContext* ctx, const char* problem, const ModelBase* host,
                                   bool master_weights, const ZeroLayout& z, const ParamLayout& table,
                                   const float* host_shard = nullptr) {
    if (problem != nullptr) fail("model config: %s", problem);
    model->ctx = ctx;
    const size_t n = model->num_parameters;
    CHECK(n == host->num_parameters, "%zu vs %zu", n, host->num_parameters);
    CHECK(z.n == n, "layout for %zu parameters, model has %zu", z.n, n);
    CHECK((z.stage == 3) == (host_shard != nullptr), "ZeRO %d with%s a host shard", z.stage, host_shard ? "" : "out");
    model->z = z;
    model->params_len = z.stage == 3 ? table.front_len() + (n - table.tail_begin()) : z.padded;
    model->params = (floatX*)cuda_malloc_or_fail(model->params_len * sizeof(floatX), "parameters");
    CHECK_CUDA(cudaMemset(model->params, 0, model->params_len * sizeof(floatX)));  // the padding stays zero
    cuda_upload_params(model->params, host->params, z.stage == 3 ? model->params_len : n);
    const float* opt_values = host->params + z.opt_begin;  // the host's values of [opt_begin, opt_end)
    if (z.stage == 3) {
        model->param_shard = (floatX*)cuda_malloc_or_fail(z.shard * sizeof(floatX), "parameter shard");
        CHECK_CUDA(cudaMemset(model->param_shard, 0, z.shard * sizeof(floatX)));
        cuda_upload_params(model->param_shard, host_shard, z.own_end - z.own_begin);
        opt_values = host_shard;
    }
    bool bf16 = sizeof(floatX) == 2;
    if (bf16 && master_weights) {
        model->master = (float*)cuda_malloc_or_fail(z.opt_count() * sizeof(float), "master weights");
        CHECK_CUDA(cudaMemcpy(model->master, opt_values, z.opt_count() * sizeof(float), cudaMemcpyHostToDevice));
    }
}

// Layer l's parameters as the forward or backward reads them: from the parameter buffer, or at
// ZeRO 3 from the model's ParamSource (llmc/model.h), which gathers them and next meanwhile.
template <typename M>
inline void cuda_model_layer_params(M* model, const ParamLayout& table, int l, int next, floatX** slices) {
    if (model->param_source != nullptr) return model->param_source->layer_params(l, next, slices);
    layer_slices(model->params, table, l, slices);
}

// The values AdamW updates (parameter opt_begin + i): ZeRO 3's slice, else the parameter buffer's.
template <typename M>
inline floatX* cuda_model_opt_params(M* model) {
    return model->param_shard != nullptr ? model->param_shard : model->params + model->z.opt_begin;
}

// The gradients (z.padded; ZeRO 2 and 3: none here, gpu_grad_sync_init makes the front and
// tail rows' beside its bucket slots), AdamW's m and v (the values this rank updates), ZeRO 2
// and 3's gradient shard, all zeroed, for micro-batches of B x T.
template <typename M>
inline void cuda_model_alloc_grads(M* model, int B, int T) {
    CHECK(B >= 1 && T >= 1 && T <= model->config.max_seq_len, "B=%d T=%d maxT=%d", B, T, model->config.max_seq_len);
    const ZeroLayout& z = model->z;
    model->grads_len = z.stage >= 2 ? 0 : z.padded;
    if (model->grads_len > 0) {
        model->grads = (floatX*)cuda_malloc_or_fail(z.padded * sizeof(floatX), "gradients");
        CHECK_CUDA(cudaMemset(model->grads, 0, z.padded * sizeof(floatX)));
    }
    model->m = (float*)cuda_malloc_or_fail(z.opt_count() * sizeof(float), "AdamW m");
    model->v = (float*)cuda_malloc_or_fail(z.opt_count() * sizeof(float), "AdamW v");
    CHECK_CUDA(cudaMemset(model->m, 0, z.opt_count() * sizeof(float)));
    CHECK_CUDA(cudaMemset(model->v, 0, z.opt_count() * sizeof(float)));
    if (z.stage >= 2) {  // several ranks (or one through the NCCL test hook)
        model->grad_shard = (floatX*)cuda_malloc_or_fail(z.shard * sizeof(floatX), "gradient shard");
        CHECK_CUDA(cudaMemset(model->grad_shard, 0, z.shard * sizeof(floatX)));
    }
}

// The host side of a micro-batch of N positions: pinned staging of the inputs and targets and
// of the losses, the gradient norm's float, the encoder backward's buckets, and their events.
template <typename M>
inline void cuda_model_alloc_io(M* model, size_t N) {
    const CudaContext& ctx = *model->ctx;
    encoder_buckets_init(&model->buckets, (int)N, model->config.channels);
    CHECK_CUDA(cudaMallocHost(&model->io_host, 2 * N * sizeof(int)));
    CHECK_CUDA(cudaMallocHost(&model->losses_host, N * sizeof(float)));
    CHECK_CUDA(cudaMallocHost(&model->norm_host, sizeof(float)));
    model->norm_device = (float*)cuda_malloc_or_fail(sizeof(float), "norm");
    CHECK_CUDA(cudaEventCreateWithFlags(&model->io_copied, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventCreateWithFlags(&model->losses_ready, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventRecord(model->io_copied, ctx.stream));
    CHECK_CUDA(cudaEventRecord(model->losses_ready, ctx.stream));
}

// What cuda_model_alloc_io allocated (after a cudaDeviceSynchronize).
template <typename M>
inline void cuda_model_free_io(M* model) {
    encoder_buckets_free(&model->buckets);
    CHECK_CUDA(cudaFreeHost(model->io_host));
    CHECK_CUDA(cudaFreeHost(model->losses_host));
    CHECK_CUDA(cudaFreeHost(model->norm_host));
    CHECK_CUDA(cudaEventDestroy(model->io_copied));
    CHECK_CUDA(cudaEventDestroy(model->losses_ready));
}

// ---------------------------------------------------------------------------------------
// the step's host side

// A forward's batch: B, T within what the state is sized for, a forward for backward (dloss
// > 0) has targets and the full batch, every token and target in [0, V).
template <typename M>
inline void cuda_model_check_batch(const M* model, const int* inputs, const int* targets, int B, int T, float dloss,
                                   int V) {
    CHECK(B >= 1 && T >= 1 && B <= model->B && T <= model->T, "B=%d T=%d but allocated for B=%d T=%d", B, T,
          model->B, model->T);
    CHECK(dloss == 0.0f || (targets != nullptr && B == model->B && T == model->T),
          "a forward for backward (dloss %g) needs targets and the full batch", dloss);
    const int N = B * T;
    for (int i = 0; i < N; i++)
        CHECK(inputs[i] >= 0 && inputs[i] < V, "token %d at %d outside vocab %d", inputs[i], i, V);
    if (targets != nullptr)
        for (int i = 0; i < N; i++)
            CHECK(targets[i] >= 0 && targets[i] < V, "target %d at %d outside vocab %d", targets[i], i, V);
}

// The batch (N positions; targets may be nullptr) up to acts.inputs / acts.targets through
// pinned memory: no stream sync, the GPU may still be busy with the previous micro-step's backward.
template <typename M>
inline void cuda_model_upload_batch(M* model, const int* inputs, const int* targets, int N) {
    const CudaContext& ctx = *model->ctx;
    const size_t Nmax = (size_t)model->B * model->T;
    CHECK_CUDA(cudaEventSynchronize(model->io_copied));
    memcpy(model->io_host, inputs, N * sizeof(int));
    CHECK_CUDA(cudaMemcpyAsync(model->acts.inputs, model->io_host, N * sizeof(int), cudaMemcpyHostToDevice,
                               ctx.stream));
    if (targets != nullptr) {
        memcpy(model->io_host + Nmax, targets, N * sizeof(int));
        CHECK_CUDA(cudaMemcpyAsync(model->acts.targets, model->io_host + Nmax, N * sizeof(int),
                                   cudaMemcpyHostToDevice, ctx.stream));
    }
    CHECK_CUDA(cudaEventRecord(model->io_copied, ctx.stream));
}

// The classifier over the N rows of logits (this rank's Vp columns from v0; V real in the whole
// vocabulary): the losses, and with dloss > 0 dlogits over the logits. -tp: vocab-parallel,
// each rank's softmax statistics (max, sum of exps, target logit) to every rank, then each
// rank's losses (the same everywhere) and its columns of dlogits.
template <typename M>
inline void cuda_model_classifier(M* model, int N, int V, int Vp, int v0, float dloss) {
    const CudaContext& ctx = *model->ctx;
    auto& a = model->acts;
    phase_mark(ctx, PHASE_CLASSIFIER);
    if (model->tp == nullptr) {
        classifier_forward_backward(ctx, a.logits, a.losses, a.targets, dloss, N, V, Vp, dloss > 0.0f);
    } else {
        const size_t stats = (size_t)N * 3;
        classifier_tp_stats(ctx, a.logits, a.targets, a.tp_stats + model->tp_rank * stats, N, V, Vp, v0);
        gpu_all_gather_f32(model->tp, ctx, a.tp_stats, stats);
        classifier_tp_finish(ctx, a.logits, a.losses, a.targets, a.tp_stats, model->tp_size, dloss, N, V, Vp, v0,
                             dloss > 0.0f);
    }
    phase_mark(ctx, PHASE_OTHER);
}

// Queues the copy of the N losses the classifier wrote back to the host (cuda_model_loss reads them).
template <typename M>
inline void cuda_model_copy_losses(M* model, int N) {
    const CudaContext& ctx = *model->ctx;
    // the previous losses must have been read before they are overwritten
    CHECK_CUDA(cudaEventSynchronize(model->losses_ready));
    CHECK_CUDA(cudaMemcpyAsync(model->losses_host, model->acts.losses, N * sizeof(float), cudaMemcpyDeviceToHost,
                               ctx.stream));
    CHECK_CUDA(cudaEventRecord(model->losses_ready, ctx.stream));
}

// Mean loss of the last forward with targets, summed in double as the CPU trainer does.
// Waits only for the classifier, not for any backward queued after it.
template <typename M>
inline float cuda_model_loss(M* model) {
    CHECK(model->last_had_targets, "the last forward had no targets");
    CHECK_CUDA(cudaEventSynchronize(model->losses_ready));
    double sum = 0.0;
    for (int i = 0; i < model->last_N; i++) sum += model->losses_host[i];
    return (float)(sum / model->last_N);
}

// The loss at each of the B*T positions of the last forward with targets (host memory,
// valid until the next forward).
template <typename M>
inline const float* cuda_model_token_losses(M* model) {
    CHECK(model->last_had_targets, "the last forward had no targets");
    CHECK_CUDA(cudaEventSynchronize(model->losses_ready));
    return model->losses_host;
}

template <typename M>
inline void cuda_model_zero_grad(M* model) {
    CHECK_CUDA(cudaMemsetAsync(model->grads, 0, model->grads_len * sizeof(floatX), model->ctx->stream));
    if (model->grad_shard != nullptr)
        CHECK_CUDA(cudaMemsetAsync(model->grad_shard, 0, model->z.shard * sizeof(floatX), model->ctx->stream));
}

// Gradient i of the values this rank's AdamW updates (parameter z.opt_begin + i), once the
// gradients are reduced: ZeRO 2's accumulator, else the gradient buffer from opt_begin.
template <typename M>
inline floatX* cuda_model_opt_grads(M* model) {
    return model->grad_shard != nullptr ? model->grad_shard : model->grads + model->z.opt_begin;
}

// Sum of squares of the gradients this rank updates (waits for the backward): the global
// norm's square with one process or ZeRO 0, this rank's part of it at ZeRO 1 and 2. pieces
// (-tp): only the [begin, end) ranges (from opt_begin; 16-byte aligned) where this rank's values count.
template <typename M>
inline double cuda_model_grad_sum_squares(M* model, const std::vector<std::pair<size_t, size_t>>* pieces = nullptr) {
    const CudaContext& ctx = *model->ctx;
    if (model->z.opt_count() == 0) return 0.0;
    phase_mark(ctx, PHASE_OPTIMIZER);
    const floatX* g = cuda_model_opt_grads(model);
    if (pieces == nullptr) {
        global_norm_squared(ctx, model->norm_device, g, model->z.opt_count(), false);
    } else {
        CHECK_CUDA(cudaMemsetAsync(model->norm_device, 0, sizeof(float), ctx.stream));
        for (const auto& piece : *pieces)
            global_norm_squared(ctx, model->norm_device, g + piece.first, piece.second - piece.first, true);
    }
    CHECK_CUDA(cudaMemcpyAsync(model->norm_host, model->norm_device, sizeof(float), cudaMemcpyDeviceToHost,
                               ctx.stream));
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    return *model->norm_host;
}

// One AdamW step over the values this rank updates, tensor piece by tensor piece (weight decay
// is per tensor, where the table says); t is the 1-based step count. The stochastic rounding
// seed of each tensor is a hash of (t, tensor) and its bits are drawn by the index inside the
// tensor, so a resumed run, or the same run split over other ranks, rounds the same way.
template <typename M>
inline void cuda_model_update(M* model, float lr, float beta1, float beta2, float eps, float weight_decay,
                              float grad_scale, int t) {
    const ZeroLayout& z = model->z;
    const int count = (int)std::size(model->tensors);
    floatX* g = cuda_model_opt_grads(model);
    floatX* p = cuda_model_opt_params(model);
    phase_mark(*model->ctx, PHASE_OPTIMIZER);
    for (const ZeroSegment& seg : zero_segments(model->tensors, count, z.opt_begin, z.opt_end)) {
        const ParamTensor& pt = model->tensors[seg.tensor];
        size_t o = seg.begin - z.opt_begin;
        uint32_t seed = hash32((uint32_t)t * 0x9E3779B9u ^ hash32((uint32_t)seg.tensor + 1));
        adamw_update(*model->ctx, p + o, model->master ? model->master + o : nullptr, g + o,
                     model->m + o, model->v + o, seg.end - seg.begin, lr, beta1, beta2, eps,
                     pt.decays ? weight_decay : 0.0f, grad_scale, t, seed, seg.begin - pt.offset);
    }
}

// out (Vp floats) = the logits of position `row` (b*T + t) of the last forward without dloss.
// Vp: the row's length, when not the whole padded vocabulary (-tp: this rank's columns).
template <typename M>
inline void cuda_model_logits_row(M* model, int row, float* out, int Vp = 0) {
    CHECK(!model->backward_ready, "the logits were overwritten by dlogits");
    CHECK(row >= 0 && row < model->last_N, "row=%d N=%d", row, model->last_N);
    if (Vp == 0) Vp = model->config.padded_vocab_size;
    std::vector<floatX> buf(Vp);
    CHECK_CUDA(cudaMemcpyAsync(buf.data(), model->acts.logits + (size_t)row * Vp, Vp * sizeof(floatX),
                               cudaMemcpyDeviceToHost, model->ctx->stream));
    CHECK_CUDA(cudaStreamSynchronize(model->ctx->stream));
    for (int i = 0; i < Vp; i++) out[i] = to_float(buf[i]);
}

// This rank's state file of the checkpoint at `step` (as checkpoint_write_model_and_state in
// llmc/checkpoint.h): AdamW m, v and the master weights when there are any, of the slice it
// owns, durable on disk. The model file is the family's; the DONE marker follows once every
// rank is done.
template <typename M>
inline void cuda_model_write_state(const M* model, const std::string& dir, int step, TrainState s) {
    CHECK_CUDA(cudaStreamSynchronize(model->ctx->stream));
    const ZeroLayout& z = model->z;
    zero_state_slice(&s, z);
    size_t k = s.range_count, o = z.own_begin - z.opt_begin;
    std::vector<float> m(k), v(k), master(model->master ? k : 0);
    CHECK_CUDA(cudaMemcpy(m.data(), model->m + o, k * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(v.data(), model->v + o, k * sizeof(float), cudaMemcpyDeviceToHost));
    if (model->master)
        CHECK_CUDA(cudaMemcpy(master.data(), model->master + o, k * sizeof(float), cudaMemcpyDeviceToHost));
    state_write(checkpoint_path(dir, "state", step, (int)s.rank), s, m.data(), v.data(),
                model->master ? master.data() : nullptr);
    fsync_dir(dir);
}

// AdamW m, v (z.opt_count() values each, host) and the master weights (has_master: master holds
// them; else, with a master copy kept, it starts from the widened bf16 params, with a note) of
// the checkpoint at `step`, uploaded for the values this rank updates.
template <typename M>
inline void cuda_model_set_state(M* model, int step, const float* m, const float* v, float* master, bool has_master) {
    const size_t k = model->z.opt_count();
    CHECK_CUDA(cudaMemcpy(model->m, m, k * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(model->v, v, k * sizeof(float), cudaMemcpyHostToDevice));
    if (model->master == nullptr) return;
    if (!has_master) {
        printf("note: the state files of step %d have no master weights; starting them from the bf16 weights\n", step);
        cuda_download_floatx(*model->ctx, cuda_model_opt_params(model), k, master);
    }
    CHECK_CUDA(cudaMemcpy(model->master, master, k * sizeof(float), cudaMemcpyHostToDevice));
}

// Restores AdamW m, v and (bf16 with master weights) the master weights of the values this rank
// updates from the state files of the checkpoint at `step` (any number of ranks wrote them), and
// returns rank 0's header in *s for the caller's checks (cuda_model_set_state: state without
// master weights, written by a -w 0 run).
template <typename M>
inline void cuda_model_load_state(M* model, const std::string& dir, int step, TrainState* s) {
    const ZeroLayout& z = model->z;
    size_t k = z.opt_count();
    std::vector<float> m(k), v(k), master(model->master ? k : 0);
    bool has_master = false;
    std::string err = state_read_range(dir, step, z.n, z.opt_begin, z.opt_end, s, m.data(), v.data(),
                                       model->master ? master.data() : nullptr, &has_master);
    if (!err.empty()) fail("%s", err.c_str());
    cuda_model_set_state(model, step, m.data(), v.data(), master.data(), has_master);
}

// The activations: `sets` copies of the family's plan (-pp: one a micro-batch the schedule keeps
// in flight; else one), each its own allocation; plan(acts, slots) fills in the slots (count
// of them) for one set. acts is set 0; cuda_model_select_acts switches.
template <typename M, typename Acts, typename Plan>
inline void cuda_model_alloc_acts(M* model, int sets, int count, std::vector<Acts>* all, Plan&& plan) {
    CHECK(sets >= 1, "sets=%d", sets);
    all->resize(sets);
    std::vector<CudaSlot> slots(count);
    model->acts_bytes = 0;
    for (int k = 0; k < sets; k++) {
        plan(&(*all)[k], slots.data());
        size_t bytes = 0;
        void* memory = cuda_carve_slots(slots.data(), count, &bytes);
        if (k == 0) model->acts_memory = memory;
        else model->more_acts_memory.push_back(memory);
        model->acts_bytes += bytes;
    }
    model->acts = (*all)[0];
    model->act_set = 0;
}
template <typename M>
inline void cuda_model_select_acts(M* model, int k) {
    model->acts = model->act_sets[k];
    model->act_set = k;
}

// The device memory plan, one line, as allocated: recompute is the -r level the activations
// were sized for. Its scratch: cuBLASLt's workspace (with the bias-gradient epilogue's output),
// the encoder backward's buckets, train_gpt_fp8's FP8 copies and scales, under -ma timed the
// scratch outputs of the largest product timed (allocated only while a product is timed, but
// then beside everything else), and -ak 2's fp32 dq.
template <typename M>
inline void cuda_model_print_memory(const M* model, int recompute) {
    const double MiB = 1048576.0;
    const ZeroLayout& z = model->z;
    double params =
        (model->params_len + model->param_slots_len + (model->param_shard ? z.shard : 0)) * sizeof(floatX) / MiB;
    double grads =
        (model->grads_len + model->grad_slots_len + (model->grad_shard ? z.shard : 0)) * sizeof(floatX) / MiB;
    double adam = 2.0 * z.opt_count() * sizeof(float) / MiB;
    double master = model->master ? z.opt_count() * sizeof(float) / MiB : 0.0, acts = model->acts_bytes / MiB;
    double work = cuda_context_bytes(*model->ctx) / MiB;  // cuBLASLt's, and -bg 1's output
    double enc = encoder_buckets_device_bytes((size_t)model->B * model->T, model->config.channels) / MiB;
    double fp8 = linears_allocated_bytes(model->linears) / MiB;
    const MatmulTiming* timing = model->ctx->matmul_timing;
    double timed = timing != nullptr ? timing->scratch_plan / MiB : 0.0;
    double dq = model->ctx->attention_dq_bytes / MiB;
    char more[160] = "";
    int n = fp8 > 0 ? snprintf(more, sizeof(more), ", FP8 scratch %.1f MiB", fp8) : 0;
    if (timing != nullptr) n += snprintf(more + n, sizeof(more) - n, ", -ma timed scratch %.1f MiB", timed);
    if (dq > 0) snprintf(more + n, sizeof(more) - n, ", attention dq %.1f MiB", dq);
    printf("memory plan: params %.1f MiB (%s), grads %.1f MiB, AdamW m+v %.1f MiB, master weights %.1f MiB, "
           "activations %.1f MiB (B=%d T=%d, -r %d), workspace %.1f MiB, encoder buckets %.1f MiB%s; total %.1f MiB\n",
           params, PRECISION_NAME, grads, adam, master, acts, model->B, model->T, recompute, work, enc, more,
           params + grads + adam + master + acts + work + enc + fp8 + timed + dq);
}

// Every device buffer and the host side of cuda_model_alloc_io (once the device is idle).
template <typename M>
inline void cuda_model_free_buffers(M* model) {
    CHECK_CUDA(cudaDeviceSynchronize());
    if (model->B > 0) cuda_model_free_io(model);
    void* bufs[] = {model->params, model->grads, model->m, model->v, model->master, model->acts_memory,
                    model->norm_device, model->grad_shard, model->param_shard};
    for (void* b : bufs)
        if (b != nullptr) CHECK_CUDA(cudaFree(b));
    for (void* b : model->more_acts_memory) CHECK_CUDA(cudaFree(b));
}
