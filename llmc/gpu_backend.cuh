// gpu_backend.cuh: the GPU trainer's side of the training loop (llmc/train_loop.h's Backend):
// GpuBackend runs the forward and backward of a GPT2Cuda or a LlamaCuda (llmc/gpt2_cuda.cuh,
// llmc/llama_cuda.cuh), the gradient reduction, the norm and AdamW, checkpoints and the
// evaluations, on one process or on several: data-parallel ranks with ZeRO 0-3
// (llmc/cuda/grad_sync_gpu.cuh), tensor- and sequence-parallel groups and pipeline stages, 1F1B
// or interleaved (llmc/model_parts.h, llmc/pipeline.h), everything through NCCL. What differs between the families is one
// overload each (gpu_model_*). train_gpt.cu builds the model and hands a GpuBackend to the loop.
// defines: gpu_model_init, gpu_model_bind_params, gpu_model_alloc_state, gpu_model_print_memory, gpu_model_layout,
//          gpu_model_bind_grads, gpu_model_forward, gpu_model_backward, gpu_model_stage_output, gpu_model_stage_input,
//          gpu_model_buckets, gpu_model_tied_grad, gpu_model_checkpoint_write, gpu_model_write_model, gpu_model_free,
//          device_memory_used_mib, upload_weights, check_weights_finite, poison_first, GpuBackend
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "utils.h"               // defines: fail, CHECK
#include "families.h"            // defines: ModelBase, model_delete, model_config_table
#include "checkpoint.h"          // defines: model_load_checkpoint, TrainState, state_write, checkpoint_path, fsync_dir
#include "train_common.h"        // defines: now_seconds, train_check_weights_finite
#include "faults.h"              // defines: weights_find_nonfinite
#include "comm.h"                // defines: Comm, comm_sum, comm_all_gather, comm_broadcast
#include "zero.h"                // defines: ZeroLayout
#include "tensor_parallel.h"     // defines: TpShard, TpRun
#include "model_parts.h"         // defines: ModelParts, ModelPartsWhole, model_parts_gather, model_parts_read_state, ...
#include "pipeline.h"            // defines: ScheduleStep, PipeRound, PipeMessage, pipeline_rounds
#include "energy.h"              // defines: EnergyMeter, energy_meter_read
#include "gpt2_cuda.cuh"         // defines: GPT2Cuda, gpt2_cuda_*
#include "llama_cuda.cuh"        // defines: LlamaCuda, llama_cuda_*
#include "model_cuda.cuh"        // defines: cuda_model_*, cuda_upload_params, cuda_download_floatx
#include "cuda/comm_gpu.cuh"     // defines: GpuComm, gpu_comm_wait, gpu_all_gather, gpu_send, gpu_recv, ...
#include "cuda/grad_sync_gpu.cuh" // defines: GpuGradSync, gpu_grad_sync_wait, gpu_grad_sync_download_params
#include "cuda/phases.cuh"       // defines: phase_mark, phase_step_begin, phase_step_end

inline double device_memory_used_mib() {
    size_t free_b = 0, total_b = 0;
    CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
    return (total_b - free_b) / 1048576.0;
}

// ---------------------------------------------------------------------------------------
// What differs between the families' GPU models, one overload each; everything else the
// backend and main do is model_cuda.cuh's, on either model (M: GPT2Cuda or LlamaCuda).
inline void gpu_model_init(GPT2Cuda* m, const CudaContext* ctx, const ModelBase* host, bool master, const ZeroLayout& z,
                           const float* host_shard, GpuComm* tp) {
    gpt2_cuda_init(m, ctx, static_cast<const GPT2*>(host), master, z, host_shard, tp);
}
inline void gpu_model_init(LlamaCuda* m, const CudaContext* ctx, const ModelBase* host, bool master,
                           const ZeroLayout& z, const float* host_shard, GpuComm* tp) {
    llama_cuda_init(m, ctx, static_cast<const Llama*>(host), master, z, host_shard, tp);
}
inline void gpu_model_bind_params(GPT2Cuda* m, floatX* const* views) { m->p = param_ptrs_x_of(views); }
inline void gpu_model_bind_params(LlamaCuda* m, floatX* const* views) { m->p = llama_ptrs_x_of(views); }
inline void gpu_model_alloc_state(GPT2Cuda* m, int B, int T, int recompute, int sets, bool act_in_cast) {
    gpt2_cuda_alloc_state(m, B, T, recompute, sets, act_in_cast);
}
inline void gpu_model_alloc_state(LlamaCuda* m, int B, int T, int recompute, int sets, bool act_in_cast) {
    llama_cuda_alloc_state(m, B, T, recompute, sets, act_in_cast);
}
inline void gpu_model_print_memory(const GPT2Cuda* m) { gpt2_cuda_print_memory(m); }
inline void gpu_model_print_memory(const LlamaCuda* m) { cuda_model_print_memory(m, m->recompute); }
inline ParamLayout gpu_model_layout(const GPT2Cuda* m) { return gpt2_cuda_layout(m); }
inline ParamLayout gpu_model_layout(const LlamaCuda* m) { return llama_cuda_layout(m); }
inline void gpu_model_bind_grads(GPT2Cuda* m, floatX* const* views) { gpt2_cuda_bind_grads(m, views); }
inline void gpu_model_bind_grads(LlamaCuda* m, floatX* const* views) { llama_cuda_bind_grads(m, views); }
inline void gpu_model_forward(GPT2Cuda* m, const int* inputs, const int* targets, int B, int T, float dloss) {
    gpt2_cuda_forward(m, inputs, targets, B, T, dloss);
}
inline void gpu_model_forward(LlamaCuda* m, const int* inputs, const int* targets, int B, int T, float dloss) {
    llama_cuda_forward(m, inputs, targets, B, T, dloss);
}
inline void gpu_model_backward(GPT2Cuda* m, GradSinkOf<floatX>* sink) { gpt2_cuda_backward(m, sink); }
inline void gpu_model_backward(LlamaCuda* m, GradSinkOf<floatX>* sink) { llama_cuda_backward(m, sink); }
// -pp: what a stage passes on, its last layer's residual stream (B T rows, or -sp this rank's)
inline floatX* gpu_model_stage_output(GPT2Cuda* m) { return gpt2_cuda_layer_acts(m, m->run_hi - 1).residual3; }
inline floatX* gpu_model_stage_output(LlamaCuda* m) { return llama_cuda_layer_acts(m, m->run_hi - 1).residual3; }
// -pp: where the chunk's input goes (the stage before's output): the embedding's place, or
// (-vp) the residual3 of the layer before the chunk, as a forward of all the layers has it
inline floatX* gpu_model_stage_input(GPT2Cuda* m) {
    return m->run_lo == 0 ? m->acts.encoded : gpt2_cuda_layer_acts(m, m->run_lo - 1).residual3;
}
inline floatX* gpu_model_stage_input(LlamaCuda* m) {
    return m->run_lo == 0 ? m->acts.encoded : llama_cuda_layer_acts(m, m->run_lo - 1).residual3;
}
// -pp: the encoder backward's buckets of micro-batch `inputs` (the first stage, before its
// backward: the forwards of later micro-batches came in between)
inline void gpu_model_buckets(GPT2Cuda* m, const int* inputs) {
    const GPT2Dims d = gpt2_cuda_dims(m);
    encoder_buckets_build(*m->ctx, &m->buckets, inputs, m->B, m->T, d.v0, m->tp != nullptr ? d.Vp : -1);
}
inline void gpu_model_buckets(LlamaCuda* m, const int* inputs) {
    const LlamaDims d = llama_cuda_dims(m);
    encoder_buckets_build(*m->ctx, &m->buckets, inputs, m->B, m->T, d.v0, m->tp != nullptr ? d.Vp : -1);
}
// -pp, GPT-2: the tied wte's gradient, which the first and the last stage each hold a part of
inline floatX* gpu_model_tied_grad(GPT2Cuda* m) { return m->g.wte; }
inline floatX* gpu_model_tied_grad(LlamaCuda*) { return nullptr; }
inline void gpu_model_checkpoint_write(const std::string& dir, int step, const GPT2Cuda* m, const TrainState& s,
                                       const floatX* gathered) {
    gpt2_cuda_checkpoint_write(dir, step, m, s, gathered);
}
inline void gpu_model_checkpoint_write(const std::string& dir, int step, const LlamaCuda* m, const TrainState& s,
                                       const floatX* gathered) {
    llama_cuda_checkpoint_write(dir, step, m, s, gathered);
}
// -tp: the model file alone, from the whole model's values put together on rank 0
inline void gpu_model_write_model(const GPT2Cuda* m, const std::string& path, const floatX* whole) {
    gpt2_cuda_write_model(m, path, whole);
}
inline void gpu_model_write_model(const LlamaCuda* m, const std::string& path, const floatX* whole) {
    llama_cuda_write_model(m, path, whole);
}
inline void gpu_model_free(GPT2Cuda* m) { gpt2_cuda_free(m); }
inline void gpu_model_free(LlamaCuda* m) { llama_cuda_free(m); }

// The weights of a checkpoint's model file into the allocated device model (reload after
// faults); the bf16 build's master weights come back with the state file (cuda_model_load_state).
// ZeRO 3: this rank's slice and the front and tail rows only, read as such (gsync: the slots
// then hold stale layers).
template <typename M>
inline void upload_weights(M* model, const std::string& path, GpuGradSync* gsync) {
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
inline void check_weights_finite(const M* model, int step, const std::string& dir, const floatX* gathered,
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
inline void poison_first(const M* model, T* buf) {
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
    // the last stage), -vp's chunks (where each of this rank's starts among its layers, and their
    // count), the step's micro-batches
    GpuComm* ppc = nullptr;
    GpuComm* embc = nullptr;
    int pp = 1, vp = 1, stage = 0;
    std::vector<int> chunks;
    std::vector<std::vector<int>> queued_inputs, queued_targets;
    float queued_dloss = 0.0f;
    // -pp: the rounds' messages run on a stream of their own beside the compute stream, so an
    // op's output goes out while the next op runs; an op waits only for the round that brought
    // its input, and an activation set used again for the round that last sent from it.
    // op_done: the compute stream's last op; round_done[r]: round r's group
    cudaStream_t p2p_stream = nullptr;
    cudaEvent_t op_done = nullptr;
    std::vector<cudaEvent_t> round_done;
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
    ~GpuBackend() {
        for (cudaEvent_t e : round_done) cudaEventDestroy(e);
        if (op_done != nullptr) cudaEventDestroy(op_done);
        if (p2p_stream != nullptr) cudaStreamDestroy(p2p_stream);
    }

    // forward + backward; the backward hands each finished layer to the reduction (ZeRO 2:
    // every micro-step; else the last), which runs on its own stream alongside the layers below
    float micro_step(const int* inputs, const int* targets, int B, int T, float dloss, bool last_micro) {
        if (!step_open) {  // the step's first micro-step: -pb 1 times from here
            phase_step_begin(*model->ctx);
            step_start = now_seconds();
            step_open = true;
            linears_step_begin(*model->ctx, model->linears);  // fp8: only this step's tensors set the next scales
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
    void select_chunk(int c) { pipeline_select_chunk(model, chunks, c, pp, vp, stage); }
    // -pp: the stream and events of pipeline_step's rounds (made at its first step)
    void pipe_streams(size_t rounds) {
        if (p2p_stream == nullptr) {
            CHECK_CUDA(cudaStreamCreateWithFlags(&p2p_stream, cudaStreamNonBlocking));
            CHECK_CUDA(cudaEventCreateWithFlags(&op_done, cudaEventDisableTiming));
        }
        while (round_done.size() < rounds) {
            cudaEvent_t e;
            CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            round_done.push_back(e);
        }
    }
    // a forward through every virtual stage (validation, sampling, HellaSwag): each rank its
    // chunks in turn, each send alone (the chain's next rank is waiting in its receive)
    void pass_forward(const int* inputs, const int* targets, int B, int T) {
        const size_t n = stage_values(B, T);
        for (int c = 0; c < vp; c++) {
            select_chunk(c);
            if (!model->pp_first) gpu_recv(ppc, *model->ctx, gpu_model_stage_input(model), n, (stage + pp - 1) % pp);
            gpu_model_forward(model, inputs, targets, B, T, 0.0f);
            if (!model->pp_last) gpu_send(ppc, *model->ctx, gpu_model_stage_output(model), n, (stage + 1) % pp);
        }
    }
    // -pp: a step's micro-batches through the stages by the schedule, in rounds (llmc/pipeline.h:
    // pipeline_rounds): a round's op on the compute stream, then its messages in one NCCL group
    // on p2p_stream. Returns the sum of the losses (the last stage; 0 on the others).
    float pipeline_step(int B, int T) {
        const int m = (int)queued_inputs.size();
        const size_t n = stage_values(B, T);
        const std::vector<PipeRound> rounds = pipeline_rounds(pp, vp, stage, m);
        pipe_streams(rounds.size());
        const cudaStream_t compute = model->ctx->stream;
        CudaContext p2p = *model->ctx;
        p2p.stream = p2p_stream;
        StageSink sink;
        sink.inner = gsync;
        double loss = 0.0;
        // each micro-batch's activations, from the first round that touches it to its first
        // chunk's backward; the round that brought each (micro-batch, chunk)'s input and
        // gradient, and that last sent from each set (-1: none)
        const int sets = (int)model->act_sets.size();
        std::vector<int> set_of(m, -1), free_sets, sent_round(sets, -1);
        std::vector<int> input_round((size_t)m * vp, -1), grad_round((size_t)m * vp, -1);
        for (int k = sets - 1; k >= 0; k--) free_sets.push_back(k);
        auto use = [&](int i, int chunk) {
            if (set_of[i] < 0) {
                CHECK(!free_sets.empty(), "pipeline: no activation set free for micro-batch %d", i);
                set_of[i] = free_sets.back();
                free_sets.pop_back();
            }
            cuda_model_select_acts(model, set_of[i]);
            select_chunk(chunk);
        };
        auto wait_round = [&](int r) {
            if (r >= 0) CHECK_CUDA(cudaStreamWaitEvent(compute, round_done[r], 0));
        };
        // the step's messages after everything the compute stream did before it
        CHECK_CUDA(cudaEventRecord(op_done, compute));
        CHECK_CUDA(cudaStreamWaitEvent(p2p_stream, op_done, 0));
        int last_group = -1;
        for (int r = 0; r < (int)rounds.size(); r++) {
            const PipeRound& round = rounds[r];
            const ScheduleStep& st = round.op;
            const int i = st.micro, key = i * vp + st.chunk;
            if (round.has_op) {  // -pb 1: the compute stream's wait is the pipeline's (the bubble, the transfers)
                const bool fresh = set_of[i] < 0;
                use(i, st.chunk);
                phase_mark(*model->ctx, PHASE_PIPELINE);
                if (fresh) wait_round(sent_round[set_of[i]]);  // a set used again: its last send is done
                wait_round(st.forward ? input_round[key] : grad_round[key]);
                phase_mark(*model->ctx, PHASE_OTHER);
            }
            if (round.has_op && st.forward) {
                gpu_model_forward(model, queued_inputs[i].data(), queued_targets[i].data(), B, T, queued_dloss);
                if (model->pp_last) loss += cuda_model_loss(model);
            } else if (round.has_op) {
                if (model->pp_first) gpu_model_buckets(model, queued_inputs[i].data());
                if (gsync != nullptr) gsync->communicate = model->z.stage >= 2 || i == m - 1;
                model->backward_ready = true;  // micro-batch i's forward of this chunk, some rounds ago
                gpu_model_backward(model, gsync != nullptr ? &sink : nullptr);
            }
            if (round.has_op) CHECK_CUDA(cudaEventRecord(op_done, compute));
            if (!round.messages.empty()) {
                // after the compute stream's latest op: this one's output, and a set freed before
                CHECK_CUDA(cudaStreamWaitEvent(p2p_stream, op_done, 0));
                gpu_group_begin();
                for (const PipeMessage& x : round.messages) {
                    use(x.micro, x.chunk);
                    floatX* at = x.grad ? model->acts.dres
                                 : x.send ? gpu_model_stage_output(model) : gpu_model_stage_input(model);
                    if (x.send) gpu_send(ppc, p2p, at, n, x.peer);
                    else gpu_recv(ppc, p2p, at, n, x.peer);
                    if (x.send) sent_round[set_of[x.micro]] = r;
                    else (x.grad ? grad_round : input_round)[x.micro * vp + x.chunk] = r;
                }
                gpu_group_end();
                CHECK_CUDA(cudaEventRecord(round_done[r], p2p_stream));
                last_group = r;
            }
            if (round.has_op && !st.forward && st.chunk == 0) {  // its last use here
                free_sets.push_back(set_of[i]);
                set_of[i] = -1;
            }
        }
        phase_mark(*model->ctx, PHASE_PIPELINE);
        wait_round(last_group);  // the step's last message done before the reductions
        phase_mark(*model->ctx, PHASE_OTHER);
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
        // fp8: the amaxes over the replicas and the tensor-parallel group, the next scales
        linears_step_end(gc, model->tp, *model->ctx, model->linears);
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
        if (comm->rank == 0) linears_write_state(*model->ctx, model->linears, dir, step);  // fp8: the scales
        matmul_algos_write(*model->ctx, dir, step, comm->rank);  // -ma timed: this rank's algorithms
    }
    // -tp, -pp: the model file, one state file and (fp8) the FP8 state, each as one process writes it
    // (any layout resumes them), from rank 0, which puts every rank's part together
    // (llmc/model_parts.h). Weights that are not finite stop every rank, rank 0's verdict shared.
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
        matmul_algos_write(*model->ctx, dir, step, comm->rank);  // -ma timed: this rank's algorithms
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
        // fp8: the scales, put together on rank 0 from one rank a stage (a collective; llmc/cuda/linear.cuh)
        std::vector<std::vector<int>> rank_layers(comm->world);
        for (int r = 0; r < comm->world; r++) {  // replica 0's tensor-parallel rank 0 of each stage
            const RankPlace at = rank_place(r, parts->tp, parts->pp);
            if (at.t_rank == 0 && at.replica == 0) rank_layers[r] = model_parts_stage_layers(*parts, at.stage);
        }
        linears_write_state_parts(*model->ctx, model->linears, comm, rank_layers,
                                  model_config_num_layers(parts->config), dir, step);
        if (!root) return;
        std::vector<floatX> values(global_n);  // floatX values widened: narrowing them back is exact
        for (size_t i = 0; i < global_n; i++) values[i] = from_float<floatX>(whole.params[i]);
        gpu_model_write_model(model, checkpoint_path(dir, "model", step), values.data());
        state_write(checkpoint_path(dir, "state", step, 0), model_parts_state_header(s, z, global_n), whole.m.data(),
                    whole.v.data(), whole.master.empty() ? nullptr : whole.master.data());
        fsync_dir(dir);
    }
    void load_state(const std::string& dir, int step, TrainState* s) {
        matmul_algos_load(*model->ctx, dir, step, comm->rank);  // -ma timed: the algorithms it chose
        if (shard == nullptr) {
            linears_load_state(*model->ctx, model->linears, dir, step);  // fp8: the scales
            return cuda_model_load_state(model, dir, step, s);
        }
        // fp8: the scales of this stage's layers (-pp), of the one file's every layer
        const std::vector<int> layers = model_parts_stage_layers(*parts, parts->stage);
        linears_load_state(*model->ctx, model->linears, dir, step, &layers, model_config_num_layers(parts->config));
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
        if (comm->rank == 0) matmul_timing_report(*model->ctx);  // once: every training shape has been met
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
