// train_gpt.cu: the GPU trainer. One source, two binaries: train_gpt_fp32, and
// train_gpt_bf16 (-DENABLE_BF16: bf16 weights and activations, fp32 AdamW state and master
// weights). Same flags, files, logs and loop as the CPU trainer train_gpt.cpp; only the
// model lives on the GPU (llmc/gpt2_cuda.cuh for GPT-2, llmc/llama_cuda.cuh for Llama 3; what
// they share is llmc/model_cuda.cuh's). Reading order: main() parses flags, builds the model and
// the data loaders, prints the plan, then hands a GpuBackend to the loop both trainers share
// (llmc/train_loop.h: validate, sample, checkpoint, one training step, log, faults).
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "llmc/utils.h"         // defines: fail, CHECK
#include "llmc/args.h"          // defines: TrainConfig, args_parse
#include "llmc/gpt2.h"          // defines: GPT2 (the host model: init, random init, loading), grad_clip_scale
#include "llmc/families.h"      // defines: ModelBase, model_describe, model_flops_per_token, model_delete
#include "llmc/checkpoint.h"    // defines: model_load_checkpoint, TrainState
#include "llmc/dataloader.h"    // defines: DataLoader (inside TrainData)
#include "llmc/schedule.h"      // defines: LRSchedule, lr_schedule_parse
#include "llmc/logger.h"        // defines: Logger (the loop logs)
#include "llmc/tokenizer.h"     // defines: Tokenizer, tokenizer_init, tokenizer_decode
#include "llmc/train_common.h"  // defines: train_prepare_output_dir, train_load_model, TrainData, ...
#include "llmc/cuda/common.cuh" // defines: CudaContext, cuda_context_init, floatX, PRECISION_NAME
#include "llmc/gpt2_cuda.cuh"   // defines: GPT2Cuda, gpt2_cuda_forward, gpt2_cuda_backward, gpt2_cuda_update, ...
#include "llmc/llama_cuda.cuh"  // defines: LlamaCuda, llama_cuda_forward, llama_cuda_backward, ...
#include "llmc/model_cuda.cuh"  // defines: cuda_model_update, cuda_model_loss, cuda_model_load_state, ... (either family)
#include "llmc/faults.h"        // defines: preempt_install_handlers, FaultInject, fault_inject_from_env
#include "llmc/comm.h"          // defines: Comm, comm_init, comm_sum, comm_free
#include "llmc/zero.h"          // defines: ZeroLayout, zero_layout, zero_comm_bytes_per_step, zero_stage_name
#include "llmc/cuda/comm_gpu.cuh" // defines: GpuComm, gpu_comm_init, gpu_comm_single_hook, gpu_all_gather, ...
#include "llmc/cuda/grad_sync_gpu.cuh" // defines: GpuGradSync, gpu_grad_sync_init, gpu_grad_sync_wait, gpu_grad_sync_free
#include "llmc/energy.h"        // defines: EnergyMeter, energy_meter_init, energy_meter_read, energy_meter_free
#include "llmc/train_loop.h"    // defines: train_loop
#include "llmc/tensor_parallel.h" // defines: TpShard, TpRun, tp_global_to_local
#include "llmc/model_parts.h"   // defines: ModelParts, model_parts_init, model_parts_gather, model_parts_read_state, ...
#include "llmc/pipeline.h"      // defines: ScheduleStep, pipeline_schedule, pipeline_in_flight

// Dense peak TFLOP/s of the GPUs we know, for MFU: bf16 tensor cores, TF32 tensor cores,
// plain fp32. Longest names first where one contains another. Unknown devices get no MFU.
struct GpuPeak { const char* name; double bf16, tf32, fp32; };
static const GpuPeak GPU_PEAKS[] = {
    {"H100 PCIe", 756.0, 378.0, 51.2},
    {"H100 NVL", 835.0, 418.0, 60.0},
    {"H100", 989.4, 494.7, 66.9},  // SXM ("NVIDIA H100 80GB HBM3")
    {"H200", 989.4, 494.7, 66.9},
    {"GH200", 989.4, 494.7, 66.9},
    {"A100", 312.0, 156.0, 19.5},
    {"L40S", 362.0, 183.0, 91.6},
    {"L4", 121.0, 60.0, 30.3},
    {"RTX 4090", 165.2, 82.6, 82.6},
    {"A10", 125.0, 62.5, 31.2},
};

// Peak TFLOP/s of this device for the precision the matmuls run in, or -1.
static double device_peak_tflops(const cudaDeviceProp& props, bool tf32) {
    for (const GpuPeak& g : GPU_PEAKS) {
        if (strstr(props.name, g.name) != nullptr) {
            if (sizeof(floatX) == 2) return g.bf16;
            return tf32 ? g.tf32 : g.fp32;
        }
    }
    return -1.0;
}

static double device_memory_used_mib() {
    size_t free_b = 0, total_b = 0;
    CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
    return (total_b - free_b) / 1048576.0;
}

// ---------------------------------------------------------------------------------------
// What differs between the families' GPU models, one overload each; everything else the
// backend and main do is model_cuda.cuh's, on either model (M: GPT2Cuda or LlamaCuda).
static void gpu_model_init(GPT2Cuda* m, const CudaContext* ctx, const ModelBase* host, bool master, const ZeroLayout& z,
                           const float* host_shard, GpuComm* tp) {
    gpt2_cuda_init(m, ctx, static_cast<const GPT2*>(host), master, z, host_shard, tp);
}
static void gpu_model_init(LlamaCuda* m, const CudaContext* ctx, const ModelBase* host, bool master,
                           const ZeroLayout& z, const float* host_shard, GpuComm* tp) {
    llama_cuda_init(m, ctx, static_cast<const Llama*>(host), master, z, host_shard, tp);
}
static void gpu_model_bind_params(GPT2Cuda* m, floatX* const* views) { m->p = param_ptrs_x_of(views); }
static void gpu_model_bind_params(LlamaCuda* m, floatX* const* views) { m->p = llama_ptrs_x_of(views); }
static void gpu_model_alloc_state(GPT2Cuda* m, int B, int T, int recompute, int sets) {
    gpt2_cuda_alloc_state(m, B, T, recompute, sets);
}
static void gpu_model_alloc_state(LlamaCuda* m, int B, int T, int recompute, int sets) {
    llama_cuda_alloc_state(m, B, T, recompute, sets);
}
static void gpu_model_print_memory(const GPT2Cuda* m) { gpt2_cuda_print_memory(m); }
static void gpu_model_print_memory(const LlamaCuda* m) { cuda_model_print_memory(m, m->recompute); }
static ParamLayout gpu_model_layout(const GPT2Cuda* m) { return gpt2_cuda_layout(m); }
static ParamLayout gpu_model_layout(const LlamaCuda* m) { return llama_cuda_layout(m); }
static void gpu_model_bind_grads(GPT2Cuda* m, floatX* const* views) { gpt2_cuda_bind_grads(m, views); }
static void gpu_model_bind_grads(LlamaCuda* m, floatX* const* views) { llama_cuda_bind_grads(m, views); }
static void gpu_model_forward(GPT2Cuda* m, const int* inputs, const int* targets, int B, int T, float dloss) {
    gpt2_cuda_forward(m, inputs, targets, B, T, dloss);
}
static void gpu_model_forward(LlamaCuda* m, const int* inputs, const int* targets, int B, int T, float dloss) {
    llama_cuda_forward(m, inputs, targets, B, T, dloss);
}
static void gpu_model_backward(GPT2Cuda* m, GradSinkOf<floatX>* sink) { gpt2_cuda_backward(m, sink); }
static void gpu_model_backward(LlamaCuda* m, GradSinkOf<floatX>* sink) { llama_cuda_backward(m, sink); }
// -pp: what a stage passes on, its last layer's residual stream (B T rows, or -sp this rank's)
static floatX* gpu_model_stage_output(GPT2Cuda* m) { return gpt2_cuda_layer_acts(m, m->num_layers - 1).residual3; }
static floatX* gpu_model_stage_output(LlamaCuda* m) { return llama_cuda_layer_acts(m, m->num_layers - 1).residual3; }
// -pp: the encoder backward's buckets of micro-batch `inputs` (the first stage, before its
// backward: the forwards of later micro-batches came in between)
static void gpu_model_buckets(GPT2Cuda* m, const int* inputs) {
    const GPT2Dims d = gpt2_cuda_dims(m);
    encoder_buckets_build(*m->ctx, &m->buckets, inputs, m->B, m->T, d.v0, m->tp != nullptr ? d.Vp : -1);
}
static void gpu_model_buckets(LlamaCuda* m, const int* inputs) {
    const LlamaDims d = llama_cuda_dims(m);
    encoder_buckets_build(*m->ctx, &m->buckets, inputs, m->B, m->T, d.v0, m->tp != nullptr ? d.Vp : -1);
}
// -pp, GPT-2: the tied wte's gradient, which the first and the last stage each hold a part of
static floatX* gpu_model_tied_grad(GPT2Cuda* m) { return m->g.wte; }
static floatX* gpu_model_tied_grad(LlamaCuda*) { return nullptr; }
static void gpu_model_checkpoint_write(const std::string& dir, int step, const GPT2Cuda* m, const TrainState& s,
                                       const floatX* gathered) {
    gpt2_cuda_checkpoint_write(dir, step, m, s, gathered);
}
static void gpu_model_checkpoint_write(const std::string& dir, int step, const LlamaCuda* m, const TrainState& s,
                                       const floatX* gathered) {
    llama_cuda_checkpoint_write(dir, step, m, s, gathered);
}
// -tp: the model file alone, from the whole model's values put together on rank 0
static void gpu_model_write_model(const GPT2Cuda* m, const std::string& path, const floatX* whole) {
    gpt2_cuda_write_model(m, path, whole);
}
static void gpu_model_write_model(const LlamaCuda* m, const std::string& path, const floatX* whole) {
    llama_cuda_write_model(m, path, whole);
}
static void gpu_model_free(GPT2Cuda* m) { gpt2_cuda_free(m); }
static void gpu_model_free(LlamaCuda* m) { llama_cuda_free(m); }

// The weights of a checkpoint's model file into the allocated device model (reload after
// faults); the bf16 build's master weights come back with the state file (cuda_model_load_state).
// ZeRO 3: this rank's slice and the front and tail rows only, read as such (gsync: the slots
// then hold stale layers).
template <typename M>
static void upload_weights(M* model, const std::string& path, GpuGradSync* gsync) {
    size_t n = model->num_parameters;
    const ZeroLayout& z = model->z;
    if (z.stage == 3) {  // this rank's slice and the front and tail rows, read as such
        const ParamLayout t = gpu_model_layout(model);
        const size_t front = t.front_len(), tail = t.tail_begin();
        std::vector<float> rest(front + (n - tail)), shard(z.own_end - z.own_begin);
        const size_t begin[3] = {0, tail, z.own_begin}, end[3] = {front, n, z.own_end};
        float* const dst[3] = {rest.data(), rest.data() + front, shard.data()};
        ModelBase* host = model_load_checkpoint(path.c_str(), false, 3, begin, end, dst);
        CHECK(host->num_parameters == n, "%zu vs %zu", host->num_parameters, n);
        model_delete(host);
        cuda_upload_params(model->params, rest.data(), rest.size());
        cuda_upload_params(model->param_shard, shard.data(), shard.size());
        gsync->params_changed();
        return;
    }
    ModelBase* host = model_load_checkpoint(path.c_str());
    CHECK(host->num_parameters == n, "%zu vs %zu", host->num_parameters, n);
    cuda_upload_params(model->params, host->params, n);
    model_delete(host);
}

// Non-finite weights (or master weights) never go into a checkpoint: refuses before writing.
// gathered: ZeRO 3's whole vector, on rank 0 (nullptr elsewhere), checked there and the verdict
// shared, so every rank stops (a collective); else every rank checks model->params.
template <typename M>
static void check_weights_finite(const M* model, int step, const std::string& dir, const floatX* gathered,
                                 Comm* comm) {
    size_t n = model->num_parameters;
    const int count = (int)std::size(model->tensors);
    std::vector<float> host(n);
    if (model->z.stage == 3) {
        size_t index = 0;
        if (gathered != nullptr)
            for (size_t i = 0; i < n; i++) host[i] = to_float(gathered[i]);
        bool bad = gathered != nullptr && weights_find_nonfinite(host.data(), n, model->tensors, count, &index) != nullptr;
        if (comm_sum(comm, bad ? 1.0 : 0.0) > 0) {
            if (gathered != nullptr) train_check_weights_finite(host.data(), n, model->tensors, count, step, dir);
            fail("rank %d: refusing to write the checkpoint at step %d: rank 0 found a weight that is not finite",
                 comm->rank, step);
        }
    } else {
        cuda_download_floatx(*model->ctx, model->params, n, host.data());
        train_check_weights_finite(host.data(), n, model->tensors, count, step, dir);
    }
    if (model->master != nullptr) {
        // the master covers this rank's values only: checked in place, the rest left zero
        const ZeroLayout& z = model->z;
        std::fill(host.begin(), host.end(), 0.0f);
        CHECK_CUDA(cudaMemcpy(host.data() + z.opt_begin, model->master, z.opt_count() * sizeof(float),
                              cudaMemcpyDeviceToHost));
        train_check_weights_finite(host.data(), n, model->tensors, count, step, dir, "master weight");
    }
}

// TEST HOOK (GPTRAIN_FAULT_INJECT nan_grad / nan_weight): element 0 of a device buffer := NaN,
// in stream order. from is a pageable host value: copied out before cudaMemcpyAsync returns.
template <typename M, typename T>
static void poison_first(const M* model, T* buf) {
    T nan_value = from_float<T>(NAN);
    CHECK_CUDA(cudaMemcpyAsync(buf, &nan_value, sizeof(T), cudaMemcpyHostToDevice, model->ctx->stream));
    CHECK_CUDA(cudaStreamSynchronize(model->ctx->stream));
}

// The loop's Backend (llmc/train_loop.h) for a model on the GPU, one of comm->world ranks that
// split the parameter vector as llmc/zero.h lays it out. Work is queued on the stream;
// losses, the grad norm and sync() (the step timer) wait for it.
template <typename M>
struct GpuBackend {
    M* model;
    Comm* comm;
    GpuComm* gc;
    GpuGradSync* gsync;              // several ranks: reduces each layer's gradients as the backward finishes it
    double flops_per_token;          // for MFU
    double peak_tflops;              // -1: an unknown device, no MFU
    double peak_mem_mib;             // device memory in use: at the start, and after step 0
    std::vector<float> logits_row;   // the last position's logits, for sampling
    std::vector<int> padded_tokens;  // -sp: a sample's context padded to whole parts
    std::vector<float> no_losses;    // -pp: a stage before the last's token losses (none)
    EnergyMeter* energy;             // the board's energy counter (NVML), if there is one
    double start_j, last_j, last_t;  // the counter at the start and after the last step (J, s)
    double step_j = -1.0, step_w = -1.0;  // energy and power between the last two step ends
    bool step_open = false;          // a step's first micro-step ran and its step_done has not
    double step_start = 0.0;         // when that micro-step began (-pb 1's wall time)
    // -tp: the layout (llmc/model_parts.h: its groups), this rank's part of the model's table
    // (llmc/tensor_parallel.h), and the pieces of the values it updates whose gradients count
    // towards the norm here (what several ranks hold, the norms and the projections' biases,
    // counts on tensor-parallel rank 0 only)
    ModelParts* parts = nullptr;
    const TpShard* shard = nullptr;
    Comm* tpc = nullptr;
    std::vector<std::pair<size_t, size_t>> norm_pieces;
    // -pp: the pipeline group (one rank a stage, by stage), GPT-2's tied-wte group (the first and
    // the last stage), the step's micro-batches, and a send not yet queued: it goes in one group
    // with the receive that follows it (llmc/cuda/comm_gpu.cuh: gpu_send)
    GpuComm* ppc = nullptr;
    GpuComm* embc = nullptr;
    int pp = 1, stage = 0;
    std::vector<std::vector<int>> queued_inputs, queued_targets;
    float queued_dloss = 0.0f;
    const floatX* send_x = nullptr;
    size_t send_n = 0;
    int send_peer = -1;
    // The sink of a pipeline step's backwards: the layers' buckets go to the reduction as each
    // backward finishes them; the front and tail rows' wait for the step's end (GPT-2: the tied
    // wte's two stages add their parts first)
    struct StageSink final : GradSinkOf<floatX> {
        GradSinkOf<floatX>* inner = nullptr;
        void layer_grads(int l, floatX** slices) override { inner->layer_grads(l, slices); }
        void layer_done(int l) override { inner->layer_done(l); }
        void backward_done() override {}
    };

    GpuBackend(M* m, Comm* c, GpuComm* g, GpuGradSync* gs, double flops, double peak, EnergyMeter* e)
        : model(m), comm(c), gc(g), gsync(gs), flops_per_token(flops), peak_tflops(peak),
          peak_mem_mib(device_memory_used_mib()), logits_row(m->config.padded_vocab_size), energy(e),
          start_j(energy_meter_read(e)), last_j(start_j), last_t(now_seconds()) {}

    // forward + backward; the backward hands each finished layer to the reduction (ZeRO 2:
    // every micro-step; else the last), which runs on its own stream alongside the layers below
    float micro_step(const int* inputs, const int* targets, int B, int T, float dloss, bool last_micro) {
        if (!step_open) {  // the step's first micro-step: -pb 1 times from here
            phase_step_begin(*model->ctx);
            step_start = now_seconds();
            step_open = true;
        }
        if (pp > 1) {  // the step's micro-batches go through the pipeline together, after the last
            queued_inputs.emplace_back(inputs, inputs + (size_t)B * T);
            queued_targets.emplace_back(targets, targets + (size_t)B * T);
            queued_dloss = dloss;
            return last_micro ? pipeline_step(B, T) : 0.0f;
        }
        gpu_model_forward(model, inputs, targets, B, T, dloss);
        if (gsync != nullptr) gsync->communicate = model->z.stage >= 2 || last_micro;
        gpu_model_backward(model, gsync);
        return cuda_model_loss(model);  // waits for this forward's losses, not for the backward
    }
    // -pp: the values a stage passes on, B x T rows of C (-sp: this rank's rows)
    size_t stage_values(int B, int T) const {
        return (size_t)B * T * model->config.channels / (model->sp ? model->tp_size : 1);
    }
    // -pp: a send to a stage beside, queued with the next receive (or alone, flush_send)
    void send_later(const floatX* x, size_t n, int peer) {
        flush_send();
        send_x = x;
        send_n = n;
        send_peer = peer;
    }
    void flush_send() {
        if (send_x == nullptr) return;
        gpu_send(ppc, *model->ctx, send_x, send_n, send_peer);
        send_x = nullptr;
    }
    void receive(floatX* x, size_t n, int peer) {
        gpu_group_begin();
        if (send_x != nullptr) gpu_send(ppc, *model->ctx, send_x, send_n, send_peer);
        send_x = nullptr;
        gpu_recv(ppc, *model->ctx, x, n, peer);
        gpu_group_end();
    }
    // -pp: one micro-batch's forward on this stage: the stage before's output in, this stage's out
    void stage_forward(const int* inputs, const int* targets, int B, int T, float dloss) {
        const size_t n = stage_values(B, T);
        if (!model->pp_first) receive(model->acts.encoded, n, stage - 1);
        gpu_model_forward(model, inputs, targets, B, T, dloss);
        if (!model->pp_last) send_later(gpu_model_stage_output(model), n, stage + 1);
    }
    // a forward through every stage (validation, sampling, HellaSwag)
    void pass_forward(const int* inputs, const int* targets, int B, int T) {
        stage_forward(inputs, targets, B, T, 0.0f);
        flush_send();
    }
    // -pp: a step's micro-batches through the stages, 1F1B (llmc/pipeline.h). Returns the sum of
    // their losses (the last stage; 0 on the others).
    float pipeline_step(int B, int T) {
        const int m = (int)queued_inputs.size();
        const size_t n = stage_values(B, T);
        StageSink sink;
        sink.inner = gsync;
        double loss = 0.0;
        std::vector<int> set_of(m, -1), free_sets;  // each micro-batch's activations, while it is in flight
        for (int k = (int)model->act_sets.size() - 1; k >= 0; k--) free_sets.push_back(k);
        for (const ScheduleStep& st : pipeline_schedule(pp, 1, stage, m)) {
            const int i = st.micro;
            if (set_of[i] < 0) {
                CHECK(!free_sets.empty(), "pipeline: no activation set free for micro-batch %d", i);
                set_of[i] = free_sets.back();
                free_sets.pop_back();
            }
            cuda_model_select_acts(model, set_of[i]);
            if (st.forward) {
                stage_forward(queued_inputs[i].data(), queued_targets[i].data(), B, T, queued_dloss);
                if (model->pp_last) loss += cuda_model_loss(model);
                continue;
            }
            if (!model->pp_last) receive(model->acts.dres, n, stage + 1);
            if (model->pp_first) gpu_model_buckets(model, queued_inputs[i].data());
            if (gsync != nullptr) gsync->communicate = model->z.stage >= 2 || i == m - 1;
            model->backward_ready = true;  // micro-batch i's forward, some forwards ago
            gpu_model_backward(model, gsync != nullptr ? &sink : nullptr);
            if (!model->pp_first) send_later(model->acts.dres, n, stage - 1);
            free_sets.push_back(set_of[i]);
            set_of[i] = -1;
        }
        flush_send();
        cuda_model_select_acts(model, 0);
        floatX* tied = gpu_model_tied_grad(model);
        if (embc != nullptr && embc->nccl && tied != nullptr)  // GPT-2: the first stage's part plus the last's
            gpu_all_reduce_sum(embc, *model->ctx, tied, model->tensors[0].numel);
        if (gsync != nullptr) gsync->backward_done();
        queued_inputs.clear();
        queued_targets.clear();
        return (float)loss;
    }
    float eval_loss(const int* inputs, const int* targets, int B, int T) {
        if (pp > 1) {
            pass_forward(inputs, targets, B, T);
            return model->pp_last ? cuda_model_loss(model) : 0.0f;
        }
        gpu_model_forward(model, inputs, targets, B, T, 0.0f);
        return cuda_model_loss(model);
    }
    const float* token_losses(const int* inputs, const int* targets, int B, int T) {
        if (pp > 1) {  // the last stage's losses (the others' unused: zeros)
            pass_forward(inputs, targets, B, T);
            if (model->pp_last) return cuda_model_token_losses(model);
            no_losses.assign((size_t)B * T, 0.0f);
            return no_losses.data();
        }
        gpu_model_forward(model, inputs, targets, B, T, 0.0f);
        return cuda_model_token_losses(model);
    }
    const float* last_logits(const int* tokens, int ctx) {
        const int* ids = tokens;
        int len = ctx;
        if (model->sp) {  // -sp splits the positions in equal parts: the context is padded to a multiple of
            // them (the causal model's logits at ctx - 1 do not see what follows)
            const int parts = model->tp_size;
            len = (ctx + parts - 1) / parts * parts;
            padded_tokens.assign(tokens, tokens + ctx);
            padded_tokens.resize(len, tokens[ctx - 1]);
            ids = padded_tokens.data();
        }
        if (pp > 1) pass_forward(ids, nullptr, 1, len);
        else gpu_model_forward(model, ids, nullptr, 1, len, 0.0f);
        if (shard == nullptr) {
            cuda_model_logits_row(model, ctx - 1, logits_row.data());
            return logits_row.data();
        }
        // -tp: each rank of the last stage has its columns of the row; the group puts it
        // together; -pp: the last stage's (replica 0's, tensor-parallel rank 0's) to every rank
        if (model->pp_last) {
            const int part = model->config.padded_vocab_size / tpc->world;
            cuda_model_logits_row(model, ctx - 1, logits_row.data() + (size_t)tpc->rank * part, part);
            comm_all_gather(tpc, logits_row.data(), part, sizeof(float));
        }
        if (pp > 1) comm_broadcast(comm, logits_row.data(), logits_row.size() * sizeof(float), (pp - 1) * tpc->world);
        return logits_row.data();
    }
    void reduce_grads(bool last_micro) {
        if (gsync != nullptr) gpu_grad_sync_wait(gsync);
    }
    // -tp: where this rank's gradients count (tensor-parallel rank 0's hold the whole tensors'),
    // as pieces of [opt_begin, opt_end), neighbours merged
    void set_parts(ModelParts* p, const TpShard* s) {
        parts = p;
        shard = s;
        tpc = &p->tp_comm;
        const ZeroLayout& z = model->z;
        for (const TpRun& r : s->runs) {
            const size_t lo = std::max(r.local, z.opt_begin), hi = std::min(r.local + r.len, z.opt_end);
            if (!r.first || lo >= hi) continue;
            if (!norm_pieces.empty() && norm_pieces.back().second == lo - z.opt_begin)
                norm_pieces.back().second = hi - z.opt_begin;
            else
                norm_pieces.push_back({lo - z.opt_begin, hi - z.opt_begin});
        }
    }
    float grad_norm() {
        if (shard != nullptr) {  // -tp: every rank's pieces, once; ZeRO 0's data-parallel ranks hold the same
            double sum = cuda_model_grad_sum_squares(model, &norm_pieces);
            if (model->z.stage == 0 && parts->dp_rank > 0) sum = 0.0;
            return (float)std::sqrt(comm_sum(comm, sum));
        }
        double sum = cuda_model_grad_sum_squares(model);
        if (model->z.stage > 0) sum = comm_sum(comm, sum);  // each rank holds a slice
        return (float)std::sqrt(sum);
    }
    void update(float lr, float weight_decay, float clip_scale, int t) {
        cuda_model_update(model, lr, 0.9f, 0.95f, 1e-8f, weight_decay, clip_scale, t);
        const ZeroLayout& z = model->z;
        if (z.stage == 3) {  // the front and tail rows; the layers are gathered as they run
            phase_mark(*model->ctx, PHASE_COMM);
            gsync->gather_front_and_tail();
            gpu_comm_wait(gc, *model->ctx, "the parameter all-gather");
        } else if (z.world > 1 && z.stage > 0) {
            phase_mark(*model->ctx, PHASE_COMM);
            gpu_all_gather(gc, *model->ctx, model->params, z.shard);
            gpu_comm_wait(gc, *model->ctx, "the parameter all-gather");
        }
    }
    void zero_grad() {
        phase_mark(*model->ctx, PHASE_OTHER);
        cuda_model_zero_grad(model);
    }
    void sync() { CHECK_CUDA(cudaStreamSynchronize(model->ctx->stream)); }
    void poison_grad() { poison_first(model, cuda_model_opt_grads(model)); }
    void poison_weight() {
        poison_first(model, model->params);
        if (model->master != nullptr) poison_first(model, model->master);
    }
    // ZeRO 3: every rank gathers the layers for rank 0's copy of the whole vector
    void write_checkpoint(const std::string& dir, int step, const TrainState& s) {
        if (shard != nullptr) return write_checkpoint_parts(dir, step, s);
        std::vector<floatX> gathered(model->z.stage == 3 && comm->rank == 0 ? model->num_parameters : 0);
        if (model->z.stage == 3) gpu_grad_sync_download_params(gsync, gathered.empty() ? nullptr : gathered.data());
        const floatX* all = gathered.empty() ? nullptr : gathered.data();
        check_weights_finite(model, step, dir, all, comm);
        gpu_model_checkpoint_write(dir, step, model, s, all);
    }
    // -tp: the model file and one state file, both as one process writes them (any layout resumes
    // them), from rank 0, which puts every rank's part together (llmc/model_parts.h). Weights that
    // are not finite stop every rank, rank 0's verdict shared.
    void write_checkpoint_parts(const std::string& dir, int step, const TrainState& s) {
        const ZeroLayout& z = model->z;
        const size_t n = model->num_parameters, k = z.opt_count(), global_n = shard->global_n;
        std::vector<float> params(n), m(k), v(k), master(model->master != nullptr ? k : 0);
        if (z.stage == 3) {  // the part's layers gathered over the data-parallel group (its rank 0's count)
            std::vector<floatX> mine(parts->dp_rank == 0 ? n : 0);
            gpu_grad_sync_download_params(gsync, mine.empty() ? nullptr : mine.data());
            for (size_t i = 0; i < mine.size(); i++) params[i] = to_float(mine[i]);
        } else {
            cuda_download_floatx(*model->ctx, model->params, n, params.data());
        }
        CHECK_CUDA(cudaMemcpy(m.data(), model->m, k * sizeof(float), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(v.data(), model->v, k * sizeof(float), cudaMemcpyDeviceToHost));
        if (model->master != nullptr)
            CHECK_CUDA(cudaMemcpy(master.data(), model->master, k * sizeof(float), cudaMemcpyDeviceToHost));
        ModelPartsWhole whole;
        model_parts_gather(*parts, z, params.data(), m.data(), v.data(), master.empty() ? nullptr : master.data(),
                           &whole);
        const bool root = comm->rank == 0;
        ParamTensor table[MAX_PARAM_TENSORS];
        ParamLayout lt;
        model_config_table(parts->config, table, &lt);
        size_t index = 0;
        bool bad = root && (weights_find_nonfinite(whole.params.data(), global_n, table, lt.count, &index) != nullptr ||
                            (!whole.master.empty() &&
                             weights_find_nonfinite(whole.master.data(), global_n, table, lt.count, &index) != nullptr));
        if (comm_sum(comm, bad ? 1.0 : 0.0) > 0) {
            if (root) {
                train_check_weights_finite(whole.params.data(), global_n, table, lt.count, step, dir);
                train_check_weights_finite(whole.master.data(), global_n, table, lt.count, step, dir, "master weight");
            }
            fail("rank %d: refusing to write the checkpoint at step %d: rank 0 found a weight that is not finite",
                 comm->rank, step);
        }
        if (!root) return;
        std::vector<floatX> values(global_n);  // floatX values widened: narrowing them back is exact
        for (size_t i = 0; i < global_n; i++) values[i] = from_float<floatX>(whole.params[i]);
        gpu_model_write_model(model, checkpoint_path(dir, "model", step), values.data());
        state_write(checkpoint_path(dir, "state", step, 0), model_parts_state_header(s, z, global_n), whole.m.data(),
                    whole.v.data(), whole.master.empty() ? nullptr : whole.master.data());
        fsync_dir(dir);
    }
    void load_state(const std::string& dir, int step, TrainState* s) {
        if (shard == nullptr) return cuda_model_load_state(model, dir, step, s);
        // -tp: the checkpoint's whole vectors (any layout wrote them), this rank's values of them
        const size_t k = model->z.opt_count();
        std::vector<float> m(k), v(k), master(model->master != nullptr ? k : 0);
        bool has_master = false;
        const std::string err = model_parts_read_state(dir, step, *shard, model->z, s, m.data(), v.data(),
                                                 master.empty() ? nullptr : master.data(), &has_master);
        if (!err.empty()) fail("%s", err.c_str());
        cuda_model_set_state(model, step, m.data(), v.data(), master.data(), has_master);
    }
    void load_weights(const std::string& path) {
        if (shard == nullptr) return upload_weights(model, path, gsync);
        std::vector<float> local(shard->local_n);  // -tp: this rank's part of the model file
        model_parts_read_params(path, parts->config.family, *shard, local.data());
        if (model->z.stage < 3) return cuda_upload_params(model->params, local.data(), local.size());
        const ZeroLayout& z = model->z;  // ZeRO 3: the slice, and the front and tail rows
        const ParamLayout t = gpu_model_layout(model);
        const size_t front = t.front_len(), tail = t.tail_begin();
        cuda_upload_params(model->params, local.data(), front);
        cuda_upload_params(model->params + front, local.data() + tail, local.size() - tail);
        cuda_upload_params(model->param_shard, local.data() + z.own_begin, z.own_end - z.own_begin);
        gsync->params_changed();
    }
    // after each step (the device idle): peak memory, and the energy since the previous step's end
    // (evaluations and checkpoints in between count towards the next step)
    void step_done(int step) {
        if (step == 0) peak_mem_mib = std::max(peak_mem_mib, device_memory_used_mib());
        if (step_open) phase_step_end(*model->ctx, 1000.0 * (now_seconds() - step_start), step > 0);
        step_open = false;
        double j = energy_meter_read(energy), t = now_seconds();
        if (j >= 0 && last_j >= 0 && t > last_t) {
            step_j = j - last_j;
            step_w = step_j / (t - last_t);
        }
        last_j = j;
        last_t = t;
    }
    double mfu_percent(double tok_s) const { return 100.0 * tok_s * flops_per_token / (peak_tflops * 1e12); }
    std::string step_column(double tok_s) {
        char mfu[32] = "n/a";
        if (peak_tflops > 0) snprintf(mfu, sizeof(mfu), "%.1f%%", mfu_percent(tok_s));
        std::string col = std::string("MFU ") + mfu;
        if (step_w >= 0) col += " | " + std::to_string((int)std::lround(step_w)) + " W";
        return col;
    }
    // MFU as a fraction, and the step's energy when NVML reads it
    std::string step_metrics(double tok_s) {
        char buf[96];
        int len = 0;
        if (peak_tflops > 0) len = snprintf(buf, sizeof(buf), ",\"mfu\":%.4f", mfu_percent(tok_s) / 100.0);
        if (step_j >= 0) snprintf(buf + len, sizeof(buf) - len, ",\"energy_j\":%.3f,\"watts\":%.1f", step_j, step_w);
        else buf[len] = '\0';
        return buf;
    }
    // the job's energy: every rank's board (when every rank can read its counter)
    double energy_joules() {
        double j = energy_meter_read(energy);
        bool ok = j >= 0 && start_j >= 0;
        double missing = comm_sum(comm, ok ? 0.0 : 1.0), sum = comm_sum(comm, ok ? j - start_j : 0.0);
        return missing > 0 ? -1.0 : sum;
    }
    std::string summary_extras(double tok_s) {
        char buf[96];
        int len = 0;
        if (tok_s >= 0 && peak_tflops > 0) len = snprintf(buf, sizeof(buf), ", MFU %.1f%%", mfu_percent(tok_s));
        snprintf(buf + len, sizeof(buf) - len, ", peak device memory %.0f MiB", peak_mem_mib);
        return buf;
    }
    int vocab_size() const { return model->config.vocab_size; }
    size_t num_parameters() const { return shard != nullptr ? shard->global_n : model->num_parameters; }
};

// Before the host model is built (Llama 3.1 8B is 32 GB of fp32 there): what this process's GPU
// will hold at ZeRO `stage`, from the configuration alone (llmc/families.h's model_memory_plan
// with floatX values and master weights, the family's activation plan, cuBLASLt's workspace),
// against what the device has free. Refuses with one line when it does not fit, saying how many
// such GPUs ZeRO 2 would need, if any number would. Returns the recompute level (-r) to run:
// the one asked for, or with -r -1 (the default) the least that fits with 10% of the free memory
// to spare (the plan came within 2.3% of the measured peak on an H200, and allocations
// fragment): keeping every activation (-r 0) saves the GELU recompute, about 2.5% of a d12
// step there. Ranks that share a GPU see each other's free memory, so there -r -1 is -r 1.
// Llama 3's levels recompute RMSNorm and SwiGLU (1) or the whole layer (2): llmc/llama_cuda.cuh.
// -tp: world is the data-parallel ranks; each holds about 1/tp of the model (the norms are whole
// on every rank, a rounding here) and its heads' activations.
static int gpu_check_memory(const ModelConfig& mc, const TrainConfig& cfg, int world, int stage, bool master,
                            bool shared_gpu, const CudaContext& ctx, int tp = 1, int pp = 1) {
    const bool sp = cfg.sequence_parallel != 0;
    // -pp: a stage holds about 1/pp of the layers and, 1F1B, up to pp micro-batches of their
    // activations (the first stage): about the whole model's worth of one micro-batch's
    const ValueBytes bytes = {(double)sizeof(floatX), (double)sizeof(floatX), master ? 4.0 : 0.0};
    auto plan = [&](int w, int z, int recompute) {
        MemoryPlan p = model_memory_plan(mc, cfg.B, cfg.T, w, z, bytes);
        for (double* part : {&p.params, &p.grads, &p.adamw, &p.master}) *part /= tp * pp;
        p.activations = mc.family == FAMILY_LLAMA3 ? llama_cuda_activation_bytes(mc.llama, cfg.B, cfg.T, recompute, tp, sp)
                                                   : gpt2_cuda_activation_bytes(mc.gpt2, cfg.B, cfg.T, recompute, tp, sp);
        p.scratch = ctx.workspace_bytes;
        return p;
    };
    size_t free_b = 0, total_b = 0;
    CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
    int recompute = cfg.recompute;
    if (recompute == -1 && shared_gpu) recompute = 1;
    if (recompute == -1) {
        recompute = 2;
        for (int r = 1; r >= 0; r--)
            if (plan(world, stage, r).total() <= 0.9 * (double)free_b) recompute = r;
    }
    const MemoryPlan p = plan(world, stage, recompute);
    if (p.total() <= free_b) return recompute;
    // ZeRO 2 shards everything but the parameters and the activations over the processes, ZeRO 3
    // the parameters too (two layers in flight); the least stage, then the fewest GPUs, that fit
    int enough = 0, enough_stage = 2;
    for (int z = 2; z <= 3 && enough == 0; z++)
        for (int w = 2; w <= 65536 && enough == 0; w++)
            if (plan(w, z, recompute).total() <= free_b) enough = w, enough_stage = z;
    const double GiB = 1073741824.0;
    char help[256];
    if (enough > 0)
        snprintf(help, sizeof(help), "-z %d over %d or more such GPUs would fit it; -b and -t shrink the activations%s%s",
                 enough_stage, enough, recompute < 2 ? ", -r 2 too" : "", master ? ", -w 0 drops the master weights" : "");
    else
        snprintf(help, sizeof(help), "even -z 3 over 65536 GPUs holds more than that: the activations and two layers "
                 "in flight do not shrink with the GPU count (-b, -t, -r 2 shrink the activations)");
    fail("%s (%s, %zu parameters) does not fit on the GPU: %.1f GiB per GPU (params %.1f %s, grads %.1f, AdamW "
         "%.1f, master weights %.1f, activations %.1f at B=%d T=%d -r %d, workspace %.2f; %d process%s, ZeRO %d), "
         "and %s has %.1f GiB free (%s)",
         cfg.init.c_str(), model_family_name(mc.family), model_config_num_parameters(mc), p.total() / GiB,
         p.params / GiB, PRECISION_NAME, p.grads / GiB, p.adamw / GiB, p.master / GiB, p.activations / GiB, cfg.B,
         cfg.T, recompute, p.scratch / GiB, world, world == 1 ? "" : "es", stage,
         ctx.props.name, free_b / GiB, help);
}

int main(int argc, char** argv) {
    TrainConfig cfg;
    args_parse(argc, argv, &cfg);
    train_check_flags(cfg);
    if (cfg.virtual_stages > 1)
        fail("flag -vp %d: interleaved pipelines run on train_gpt_cpu so far; the GPU trainers' pipelines are 1F1B "
             "(-pp without -vp)", cfg.virtual_stages);
    LRScheduleKind schedule_kind;
    if (!lr_schedule_parse(cfg.schedule.c_str(), &schedule_kind))
        fail("flag -k: unknown schedule '%s' (cosine | linear | constant | wsd)", cfg.schedule.c_str());
    Comm comm;
    comm_init(&comm, cfg, &argc, &argv);
    const int rank = comm.rank, world = comm.world;
    // -tp, -pp: the world is data-parallel x pipeline-parallel x tensor-parallel ranks, the
    // tensor-parallel innermost (Megatron-LM's order, a group inside a node): rank = (d pp + s) tp
    // + t (llmc/model_parts.h)
    ModelParts parts;
    model_parts_init(cfg, &comm, &parts);
    const int tp = parts.tp, pp = parts.pp, t_rank = parts.t_rank, dp_rank = parts.dp_rank, dp_world = parts.dp_world;
    // -pp: the pipeline that passes this rank's micro-batches on, one rank a stage (the same
    // tensor-parallel rank of every stage of its replica), by stage
    Comm pp_comm;
    if (pp > 1) comm_split(&comm, dp_rank * tp + t_rank, parts.stage, &pp_comm);
    preempt_install_handlers();
    FaultInject inject = fault_inject_from_env();

    // --- the device: local rank i drives GPU i; more ranks than GPUs on a node share them,
    // and then their collectives go through the host and MPI (NCCL refuses two ranks on one GPU)
    int device_count = 0;
    CHECK_CUDA(cudaGetDeviceCount(&device_count));
    if (device_count == 0) fail("no CUDA device found");
    const char shares = comm.local_rank >= device_count;
    std::vector<char> shared(world);
    comm_exchange(&comm, &shares, 1, shared.data());
    const bool sharing = std::find(shared.begin(), shared.end(), 1) != shared.end();
    if (world > 1 && comm.transport == COMM_TRANSPORT_SOCKET) {
        // the sockets only bootstrap NCCL: every collective after that is NCCL's
        if (sharing)
            fail("rank %d: -pi %s: more ranks than GPUs on a node (local rank %d, %d GPU%s here): NCCL needs a GPU "
                 "per rank; start ranks that share GPUs with mpirun (their collectives then go through the host)",
                 rank, cfg.init_method.c_str(), comm.local_rank, device_count, device_count == 1 ? "" : "s");
#ifndef USE_NCCL
        fail("rank %d: -pi %s: this binary was built without NCCL, whose collectives the sockets bootstrap; "
             "build with NCCL, or start the ranks with mpirun", rank, cfg.init_method.c_str());
#endif
    }
    if (parts.parts) {
        if (sharing)
            fail("flag -tp %d -pp %d: rank %d: more ranks than GPUs on a node (local rank %d, %d GPU%s here): tensor "
                 "and pipeline parallelism's collectives are NCCL's, which needs a GPU per rank", tp, pp, rank,
                 comm.local_rank, device_count, device_count == 1 ? "" : "s");
#ifndef USE_NCCL
        fail("flag -tp %d -pp %d: this binary was built without NCCL, which tensor and pipeline parallelism need", tp,
             pp);
#endif
    }
    Comm* dpc = parts.dp();
    CudaContext ctx;
    cuda_context_init(&ctx, comm.local_rank % device_count);
    ctx.tf32 = cfg.tf32 != 0;
    // -1 (the default): forward and backward, each where cuBLASLt offers the epilogue (an H200
    // passed PyTorch's debug states with it, and it saves GELU's backward pass)
    ctx.gelu_fusion = cfg.gelu_fusion == -1 ? 2 : cfg.gelu_fusion;
    ctx.bias_grad_epilogue = cfg.bias_grad_epilogue == 1;  // where cuBLASLt offers it
    PhaseTimer phase_timer;  // -pb 1
    if (cfg.phase_breakdown) ctx.phases = &phase_timer;
    bool use_master = sizeof(floatX) == 2 && cfg.master_weights != 0;
    // NCCL first: from here on every collective is NCCL's (unless the ranks share a GPU)
    // the data-parallel group's (its gradients, ZeRO's gathers); -tp: the tensor-parallel
    // group's; -pp: the pipeline's and (GPT-2) the tied wte's, the first and the last stage
    GpuComm gc, tp_gc, pp_gc, emb_gc;
    gpu_comm_init(&gc, dpc, &ctx, !sharing);
    if (tp > 1) gpu_comm_init(&tp_gc, &parts.tp_comm, &ctx, true);
    if (pp > 1) {
        gpu_comm_init(&pp_gc, &pp_comm, &ctx, true);
        gpu_comm_init(&emb_gc, &parts.emb_comm, &ctx, true);  // a group of one elsewhere: no NCCL
    }

    // --- where training starts: a checkpoint in -o (resume), a model file, or random init;
    // built on the host (bit-identical to the CPU trainer's), then uploaded
    int resume_step = train_prepare_output_dir(cfg, &comm);
    const ModelConfig start_config = train_model_config(cfg, resume_step);
    const size_t num_parameters = model_config_num_parameters(start_config);
    // -tp, -pp: this rank's part of the model (llmc/tensor_parallel.h: its heads, its stage's
    // layers), its table and values
    TpShard shard;
    ModelBase* part = nullptr;
    model_parts_set_model(cfg, start_config, &parts);  // refuses heads that do not split, more stages than layers
    if (parts.parts) {
        std::string why;
        const char* kernels = start_config.family == FAMILY_LLAMA3 ? llama_cuda_config_problem(start_config.llama, tp)
                                                                   : gpt2_cuda_config_problem(start_config.gpt2, tp);
        if (kernels != nullptr) why = kernels;
        if (why.empty())
            part = model_new_part(start_config, nullptr, tp, t_rank, parts.stage, pp, 1, &shard, &why,
                                  parts.stage_sizes.empty() ? nullptr : &parts.stage_sizes);
        if (part == nullptr) fail("flag -tp %d -pp %d: %s", tp, pp, why.c_str());
    }
    const size_t local_n = parts.parts ? part->num_parameters : num_parameters;
    // TEST HOOK (gpu_comm_single_hook): one process keeps its -z, so a single GPU runs the
    // bucketed NCCL path of every ZeRO stage
    const ZeroLayout z = world == 1 && gpu_comm_single_hook() ? zero_layout(num_parameters, cfg.zero_stage, 0, 1)
                                                              : train_zero_layout(cfg, local_n, dp_rank, dp_world);
    const int recompute = gpu_check_memory(start_config, cfg, dp_world, z.stage, use_master, sharing, ctx, tp, pp);
    float* host_shard = nullptr;  // ZeRO 3: this rank's slice of the parameters (the host model keeps the rest's ends)
    ModelBase* host = part;
    if (parts.parts) {  // the whole model is read (or drawn), and this rank keeps its part
        ModelBase* whole = train_load_model(cfg, resume_step);
        CHECK(whole->num_parameters == num_parameters, "%zu vs %zu", whole->num_parameters, num_parameters);
        tp_global_to_local(shard, 0, shard.local_n, whole->params, part->params);
        model_delete(whole);
        // ZeRO 3 over the data-parallel ranks: the part's slice, and its front and tail rows
        if (z.stage == 3) host_shard = train_keep_zero3(part, z);
    } else {
        host = z.stage == 3 ? train_load_model_zero3(cfg, resume_step, start_config, z, &host_shard)
                            : train_load_model(cfg, resume_step);
    }
    CHECK(host->num_parameters == local_n, "model has %zu parameters, its configuration %zu", host->num_parameters,
          local_n);
    const std::string description = model_describe(host);
    const double flops = model_flops_per_token(host, cfg.T);
    TrainData data;
    Tokenizer tokenizer;
    int status = 0;
    // the rest once per family: model is a GPT2Cuda or a LlamaCuda
    auto train = [&](auto& model) {
        using M = std::decay_t<decltype(model)>;
        constexpr bool gpt2 = std::is_same<M, GPT2Cuda>::value;
        gpu_model_init(&model, &ctx, host, use_master, z, host_shard, tp > 1 ? &tp_gc : nullptr);
        model_delete(host);
        free(host_shard);
        const auto& mc = model.config;
        // -ak -1 (the default): the tensor-core attention wherever it applies (bf16, its head sizes)
        const char* mma_problem = attention_mma_problem(ctx, mc.channels / mc.num_heads);
        if (cfg.attention_kernel == 1 && mma_problem != nullptr)
            fail("flag -ak 1: %s (head size %d here); use -ak 0", mma_problem, mc.channels / mc.num_heads);
        ctx.attention_mma = cfg.attention_kernel == 1 || (cfg.attention_kernel == -1 && mma_problem == nullptr);

        // --- batch arithmetic and data
        train_data_init(&data, &cfg, mc.vocab_size, dp_rank, dp_world);  // a tensor-parallel group reads the same
        int B = cfg.B, T = cfg.T;

        train_tokenizer_init(cfg, &tokenizer);

        model.sp = cfg.sequence_parallel != 0;  // -sp: the activations of this rank's positions
        // -pp: the schedule keeps some micro-batches' activations at once (1F1B: pp - s on stage s)
        const int sets = pp > 1 ? pipeline_in_flight(pipeline_schedule(pp, 1, parts.stage, data.grad_accum)) : 1;
        gpu_model_alloc_state(&model, B, T, recompute, sets);
        GpuGradSync gsync;  // several ranks (or the NCCL test hook): bucketed reduction during the backward
        bool bucketed = dp_world > 1 || gc.nccl;
        if (bucketed) {
            // where each row's gradient lives (ZeRO 2, 3 move them), and its parameters (ZeRO 3)
            floatX *grad_views[MAX_PARAM_TENSORS], *param_views[MAX_PARAM_TENSORS];
            gpu_grad_sync_init(&gsync, &model, gpu_model_layout(&model), &gc, grad_views, param_views);
            gpu_model_bind_grads(&model, grad_views);
            gpu_model_bind_params(&model, param_views);
        }
        if constexpr (gpt2) {
            // -cg 1: graphs replay fixed launches; -pb 1 times each launch and the buckets hand
            // layers to another stream mid-backward, so either keeps the launches one by one
            model.graphs.enabled = cfg.cuda_graphs == 1 && !cfg.phase_breakdown && !bucketed && !parts.parts;
            if (cfg.cuda_graphs == 1 && !model.graphs.enabled)
                printf("-cg 1: CUDA graphs off (%s)\n", cfg.phase_breakdown ? "-pb 1 times every launch"
                                                         : parts.parts ? "-tp, -pp: the layers talk to other ranks"
                                                                       : "gradients are reduced during the backward");
        } else if (cfg.cuda_graphs == 1) {
            printf("-cg 1: CUDA graphs off (Llama 3 launches one by one)\n");
        }
        LRSchedule sched = {schedule_kind, cfg.lr, cfg.warmup, data.num_steps, cfg.final_lr_frac};

        // --- the plan
        size_t n = model.num_parameters;
        double peak_tflops = device_peak_tflops(ctx.props, ctx.tf32);
        printf("device: %s (sm_%d%d, %d SMs, %.1f GiB), %s, TF32 %s, GELU fusion %s, bias gradients %s, attention on %s, "
               "peak %s TFLOP/s\n",
               ctx.props.name, ctx.props.major, ctx.props.minor, ctx.props.multiProcessorCount,
               ctx.props.totalGlobalMem / 1073741824.0, PRECISION_NAME,
               sizeof(floatX) == 2 ? "n/a" : (ctx.tf32 ? "on" : "off"),
               ctx.gelu_fusion == 0 ? "off" : (ctx.gelu_fusion == 1 ? "forward" : "forward and backward"),
               ctx.bias_grad_epilogue ? "in the matmul epilogue" : "by their own pass",
               ctx.attention_mma ? "tensor cores" : "CUDA cores",
               peak_tflops > 0 ? std::to_string((int)peak_tflops).c_str() : "unknown (no MFU)");
        train_print_plan(description, num_parameters, cfg, data, resume_step, dp_world);
        if (tp > 1)
            printf("tensor parallelism: %d data-parallel x %d tensor-parallel ranks (NCCL); each holds %zu of the %zu "
                   "parameters (its heads, MLP units and vocabulary rows; the norms whole)\n", dp_world, tp, n,
                   num_parameters);
        if (world == 1 && gc.nccl)
            printf("GPTRAIN_NCCL_SINGLE=1: gradients reduced bucket by bucket through NCCL over one rank, %s (test hook)\n",
                   zero_stage_name(z.stage));
        if (dp_world > 1)
            printf("processes: %d (%s), collectives through %s, %s; %zu parameters per rank's slice; "
                   "%.1f MiB sent per step and process\n",
                   world, comm.transport == COMM_TRANSPORT_MPI ? "MPI" : "sockets",
                   gc.nccl ? "NCCL" : (sharing ? "the host (ranks share a GPU)" : "the host (built without NCCL)"),
                   zero_stage_name(z.stage), z.shard,
                   zero_comm_bytes_per_step(z, data.grad_accum, sizeof(floatX), sizeof(floatX), mc.num_layers,
                                            gsync.layer_n) / 1048576.0);
        gpu_model_print_memory(&model);

        EnergyMeter energy;
        int device = 0;
        char bus_id[32];
        CHECK_CUDA(cudaGetDevice(&device));
        CHECK_CUDA(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device));
        energy_meter_init(&energy, bus_id);
        if (energy.ok) printf("energy: measured through NVML (the board's energy counter)\n");
        else printf("energy: not measured (%s)\n", energy.why.c_str());
        GpuBackend<M> be(&model, &comm, &gc, bucketed ? &gsync : nullptr, flops, peak_tflops, &energy);
        if (parts.parts) be.set_parts(&parts, &shard);
        if (pp > 1) {
            be.ppc = &pp_gc;
            be.embc = &emb_gc;
            be.pp = pp;
            be.stage = parts.stage;
            printf("pipeline parallelism: %d stages (this rank's: %d layers%s%s), 1F1B over %d micro-batches a step: "
                   "bubble (pp-1)/(m+pp-1) = %.1f%%; %d micro-batches' activations kept here (NCCL)\n", pp,
                   model.num_layers, model.pp_first ? ", the embedding" : "", model.pp_last ? ", the head" : "",
                   data.grad_accum, 100.0 * (pp - 1) / (data.grad_accum + pp - 1), sets);
        }
        status = train_loop(be, cfg, data, &tokenizer, sched, &inject, resume_step, &comm);
        if (z.stage == 3)
            printf("parameter gathers (ZeRO 3): %lld layers, %lld of them queued while the layer before ran\n",
                   gsync.gathers, gsync.gathers_ahead);
        gpu_grad_sync_free(&gsync);
        gpu_model_free(&model);
        energy_meter_free(&energy);
    };
    if (host->family == FAMILY_LLAMA3) {
        LlamaCuda model;
        train(model);
    } else {
        GPT2Cuda model;
        train(model);
    }
    if (cfg.phase_breakdown && rank == 0) phase_report(phase_timer);
    train_data_free(&data);
    if (tokenizer.ok) tokenizer_free(&tokenizer);
    gpu_comm_free(&gc);
    if (tp > 1) gpu_comm_free(&tp_gc);
    if (pp > 1) {
        gpu_comm_free(&pp_gc);
        gpu_comm_free(&emb_gc);
        comm_free(&pp_comm);
    }
    model_parts_free(&parts);
    phase_timer_free(&phase_timer);
    cuda_context_free(&ctx);
    comm_free(&comm);
    return status;
}
