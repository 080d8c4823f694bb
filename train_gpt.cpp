// train_gpt.cpp: the CPU reference trainer (fp32, OpenMP), for every model family (GPT-2,
// Llama 3: llmc/families.h). Same flags and files as the GPU trainer and llm.c. Reading
// order: main() parses flags, builds the model and the data loaders, prints the plan, then
// hands a CpuBackend to the loop both trainers share (llmc/train_loop.h: validate, sample,
// checkpoint, one training step, log, faults).
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "llmc/utils.h"       // defines: fail, CHECK
#include "llmc/args.h"        // defines: TrainConfig, args_parse
#include "llmc/families.h"    // defines: ModelBase, model_forward, model_backward, model_logits, ...
#include "llmc/checkpoint.h"  // defines: model_load_checkpoint, checkpoint_write_model_and_state, state_read_range, ...
#include "llmc/dataloader.h"  // defines: DataLoader (inside TrainData)
#include "llmc/schedule.h"    // defines: LRSchedule, lr_schedule_parse
#include "llmc/logger.h"      // defines: Logger (the loop logs)
#include "llmc/tokenizer.h"   // defines: Tokenizer, tokenizer_init, tokenizer_decode
#include "llmc/train_common.h" // defines: train_prepare_output_dir, train_load_model, TrainData, ...
#include "llmc/faults.h"      // defines: preempt_install_handlers, FaultInject, fault_inject_from_env
#include "llmc/comm.h"        // defines: Comm, comm_init, comm_all_gather, comm_free
#include "llmc/zero.h"        // defines: ZeroLayout, zero_layout, zero_segments, zero_comm_bytes_per_step
#include "llmc/grad_sync.h"   // defines: GradSync, grad_sync_init, grad_sync_wait, grad_sync_report
#include "llmc/cpu/adamw.h"   // defines: adamw_update
#include "llmc/cpu/omp_wait.h" // defines: omp_wait_setup
#include "llmc/train_loop.h"  // defines: train_loop
#include "llmc/tensor_parallel.h" // defines: TpShard, TensorParallel (its collectives, through MPI below)
#include "llmc/model_parts.h" // defines: ModelParts, model_parts_init, model_parts_gather, model_parts_read_state, ...
#include "llmc/pipeline.h"    // defines: ScheduleStep, pipeline_schedule, pipeline_in_flight, pipeline_check_micro_batches

// A line of /proc/self/status in bytes: "VmHWM" the most memory this process has held
// resident, "VmRSS" what it holds now; 0 where Linux does not say.
static double proc_status_bytes(const char* key) {
    FILE* f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = 0;
    const size_t k = strlen(key);
    while (f != nullptr && fgets(line, sizeof(line), f) != nullptr)
        if (strncmp(line, key, k) == 0 && line[k] == ':' && sscanf(line + k + 1, "%lld", &kb) == 1) break;
    if (f != nullptr) fclose(f);
    return kb * 1024.0;
}

// -tp: the model's collectives across its tensor-parallel group, through MPI
struct CpuTensorParallel final : TensorParallel {
    Comm* group = nullptr;
    std::vector<float> buffers[2];
    void all_reduce(float* x, size_t n, bool max) override { comm_all_reduce_f32(group, x, n, max); }
    void all_gather(const float* mine, size_t n, float* all) override { comm_all_gather_f32(group, mine, n, all); }
    void reduce_scatter(const float* all, size_t n, float* mine) override {
        comm_reduce_scatter_f32(group, all, n, mine);
    }
    float* scratch(int i, size_t n) override {
        if (buffers[i].size() < n) buffers[i].resize(n);
        return buffers[i].data();
    }
};

// The loop's Backend (llmc/train_loop.h) for a model in host memory, one of comm->world
// ranks that split the parameter vector as llmc/zero.h lays it out. With one process the
// ZeRO layout is the whole vector and every collective is a no-op. With -tp the model is
// this rank's part of every layer (llmc/tensor_parallel.h), the ZeRO layout splits that part
// over the data-parallel ranks (dp: the ranks with the same part), and the checkpoints are
// put together on rank 0 as one process would write them (llmc/model_parts.h).
struct CpuBackend {
    ModelBase* model = nullptr;
    Comm* comm = nullptr;
    ZeroLayout z;
    std::vector<ZeroSegment> segments;  // the tensors' pieces of [opt_begin, opt_end): what AdamW updates
    float* grad_shard = nullptr;        // ZeRO 2, 3: the owned slice's gradient, summed over ranks and micro-steps
    float* param_shard = nullptr;       // ZeRO 3: the owned slice's parameters (the model keeps the front and tail)
    double flops_per_token = 0;         // for the step line's GFLOP/s
    GradSync* gsync = nullptr;          // several ranks: reduces each layer's gradients as the backward finishes it
    size_t grads_len = 0;               // the length of model->grads
    bool step_open = false;             // a step's first micro-step ran and its step_done has not (-pb 1)
    double rss_base = 0;                // bytes resident before the model was loaded
    Comm* dp = nullptr;                 // the data-parallel group (without -tp and -pp: comm)
    Comm* tpc = nullptr;                // -tp: the tensor-parallel group
    const TpShard* shard = nullptr;     // -tp, -pp: this rank's part of the model's table
    const ModelParts* layout = nullptr; // -tp, -pp: who holds which part (llmc/model_parts.h)
    std::vector<float> full_logits;     // -tp, -pp: a row of logits put together for sampling
    std::vector<int> padded_tokens;     // -sp: a sample's context padded to whole parts
    // -pp: this rank's stage of pp, the world ranks of the stages before and after it, the
    // group of the first and last stage (GPT-2's tied wte), the activations of the micro-batches
    // in flight, the step's micro-batches, the sends not yet waited for
    int tp = 1, pp = 1, vp = 1, stage = 0, prev = -1, next = -1;  // prev, next: the ranks of the stages beside (a ring with -vp)
    std::vector<int> chunks = {0, -1};  // -vp: where each chunk of this rank's layers starts, and their count
    Comm* emb = nullptr;
    ActsSets acts;
    std::vector<std::vector<int>> queued_inputs, queued_targets;
    float queued_dloss = 0.0f;
    CommSends sends;

    // The deferring sink of a pipeline step: the layers' buckets go to the reduction as the
    // backward finishes them; the front and tail's wait for the step's end (the tied wte's two
    // stages add first)
    struct StageSink final : GradSink {
        GradSink* inner = nullptr;
        void layer_grads(int l, float** slices) override { inner->layer_grads(l, slices); }
        void layer_done(int l) override { inner->layer_done(l); }
        void backward_done() override {}
    };

    // gradient i of the values AdamW updates (parameter opt_begin + i), once reduced, and the value
    const float* opt_grads() const { return z.stage >= 2 ? grad_shard : model->grads + z.opt_begin; }
    float* opt_params() const { return z.stage == 3 ? param_shard : model->params + z.opt_begin; }

    // forward + backward; the backward hands each finished layer to the reduction (ZeRO 2, 3:
    // every micro-step; else the last), which runs alongside the layers below (ZeRO 3: and the
    // forward and backward have each layer gathered as they reach it)
    float micro_step(const int* inputs, const int* targets, int B, int T, float dloss, bool last_micro) {
        if (!step_open) phase_clock_step_begin(model->phases);  // -pb 1 times the step from here
        step_open = true;
        if (pp > 1) {  // the step's micro-batches go through the pipeline together, after the last
            queued_inputs.emplace_back(inputs, inputs + (size_t)B * T);
            queued_targets.emplace_back(targets, targets + (size_t)B * T);
            queued_dloss = dloss;
            return last_micro ? pipeline_step(B, T) : 0.0f;
        }
        model_forward(model, inputs, targets, B, T);
        if (gsync != nullptr) gsync->communicate = z.stage >= 2 || last_micro;
        model_backward(model, inputs, targets, dloss, gsync);
        return model->mean_loss;
    }
    void reduce_grads(bool last_micro) {
        if (gsync == nullptr) return;
        phase_clock_mark(model->phases, PHASE_COMM);
        grad_sync_wait(gsync);
        phase_clock_mark(model->phases, PHASE_OTHER);
    }
    // -pp: one micro-batch's forward on this stage: the stage before's output in, this
    // stage's out to the next (tag: the message's, the same on both sides)
    // (-sp: the stages pass this rank's positions only)
    size_t stage_values(int B, int T) const {
        return (size_t)B * T * model->channels / (model->tp != nullptr && model->tp->sp ? tp : 1);
    }
    void select_chunk(int c) { pipeline_select_chunk(model, chunks, c, pp, vp, stage); }
    // a message's tag: micro-batch i to (dir 0, activations) or from (1, gradients) virtual stage
    // v, where v receives it
    int tag(int i, int v, int dir) const { return 2 * (i * pp * vp + v) + dir; }
    // one micro-batch's forward of chunk c: the virtual stage before's output in, this one's out
    void stage_forward(const int* inputs, const int* targets, int B, int T, int c, int i) {
        const size_t n = stage_values(B, T);
        const int v = c * pp + stage;
        select_chunk(c);
        if (!model->pp_first) receive(model_stage_input(model), n, prev, tag(i, v, 0));
        model_forward(model, inputs, targets, B, T);
        if (!model->pp_last) comm_isend_f32(comm, &sends, model_stage_output(model), n, next, tag(i, v + 1, 0));
    }
    // a forward through every virtual stage (validation, sampling): each rank its chunks in turn
    void pass_forward(const int* inputs, const int* targets, int B, int T) {
        for (int c = 0; c < vp; c++) stage_forward(inputs, targets, B, T, c, 0);
        comm_sends_wait(comm, &sends);
    }
    // -pp: a receive from a stage beside, timed as the pipeline's wait (-pb 1)
    void receive(float* x, size_t n, int from, int tag) {
        phase_clock_mark(model->phases, PHASE_PIPELINE);
        comm_recv_f32(comm, x, n, from, tag);
        phase_clock_mark(model->phases, PHASE_OTHER);
    }
    // -pp: a step's micro-batches through the stages by the schedule. Returns the sum of their
    // losses (the last stage; 0 on the others).
    float pipeline_step(int B, int T) {
        const int m = (int)queued_inputs.size();
        const size_t n = stage_values(B, T);
        StageSink stage_sink;
        stage_sink.inner = gsync;
        double loss = 0.0;
        std::vector<int> set_of(m, -1), free_sets;  // each micro-batch's activations, while it is in flight
        for (int k = (int)acts.views.size() - 1; k >= 0; k--) free_sets.push_back(k);
        for (const ScheduleStep& st : pipeline_schedule(pp, vp, stage, m)) {
            const int i = st.micro, c = st.chunk, v = c * pp + stage;
            if (set_of[i] < 0) {
                CHECK(!free_sets.empty(), "pipeline: no activation set free for micro-batch %d", i);
                set_of[i] = free_sets.back();
                free_sets.pop_back();
            }
            model_acts_select(model, acts, set_of[i]);
            if (st.forward) {
                stage_forward(queued_inputs[i].data(), queued_targets[i].data(), B, T, c, i);
                if (model->pp_last) loss += model->mean_loss;
                continue;
            }
            select_chunk(c);
            if (!model->pp_last) receive(model_stage_grad(model), n, next, tag(i, v, 1));
            if (gsync != nullptr) gsync->communicate = z.stage >= 2 || i == m - 1;
            model_backward(model, queued_inputs[i].data(), queued_targets[i].data(), queued_dloss,
                           gsync != nullptr ? &stage_sink : nullptr);
            if (!model->pp_first) comm_isend_f32(comm, &sends, model_stage_grad(model), n, prev, tag(i, v - 1, 1));
            if (c == 0) {
                free_sets.push_back(set_of[i]);
                set_of[i] = -1;
            }
        }
        phase_clock_mark(model->phases, PHASE_PIPELINE);
        comm_sends_wait(comm, &sends);
        phase_clock_mark(model->phases, PHASE_OTHER);
        model_acts_select(model, acts, 0);
        if (emb != nullptr) {  // GPT-2: the tied wte's gradient is the first stage's plus the last's
            const ParamTensor& wte = model->tensors[0];
            comm_all_reduce_f32(emb, model->grads + wte.offset, wte.numel);
        }
        if (gsync != nullptr) gsync->backward_done();
        queued_inputs.clear();
        queued_targets.clear();
        return (float)loss;
    }
    float eval_loss(const int* inputs, const int* targets, int B, int T) {
        if (pp > 1) {
            pass_forward(inputs, targets, B, T);
            return model->pp_last ? model->mean_loss : 0.0f;
        }
        model_forward(model, inputs, targets, B, T);
        return model->mean_loss;
    }
    const float* token_losses(const int* inputs, const int* targets, int B, int T) {
        if (pp > 1) pass_forward(inputs, targets, B, T);  // the last stage's losses (the others' unused)
        else model_forward(model, inputs, targets, B, T);
        return model_losses(model);
    }
    const float* last_logits(const int* tokens, int ctx) {
        if (shard == nullptr) {
            model_forward(model, tokens, nullptr, 1, ctx);
            return model_logits(model) + (size_t)(ctx - 1) * model->padded_vocab_size;
        }
        // -sp splits the positions in equal parts: the row is padded to a multiple of them (the
        // causal model's logits at ctx - 1 do not see what follows)
        const int sp_parts = model->tp != nullptr && model->tp->sp ? tp : 1, padded = (ctx + sp_parts - 1) / sp_parts * sp_parts;
        padded_tokens.assign(tokens, tokens + ctx);
        padded_tokens.resize(padded, tokens[ctx - 1]);
        pass_forward(padded_tokens.data(), nullptr, 1, padded);
        // -tp: each rank of the last stage has its columns of the row; the group puts it together
        const size_t part = model->padded_vocab_size / tp;
        full_logits.resize(part * tp);
        if (model->pp_last) {
            memcpy(full_logits.data() + (comm->rank % tp) * part, model_logits(model) + (size_t)(ctx - 1) * part,
                   part * sizeof(float));
            if (tp > 1) comm_all_gather(tpc, full_logits.data(), part, sizeof(float));
        }
        // -pp: every rank samples the same token: the row from the last stage (data-parallel rank 0's)
        if (pp > 1) comm_broadcast(comm, full_logits.data(), full_logits.size() * sizeof(float), (pp - 1) * tp);
        return full_logits.data();
    }
    float grad_norm() {
        phase_clock_mark(model->phases, PHASE_OPTIMIZER);
        const float* g = opt_grads();
        double sum = 0.0;
        if (shard == nullptr) {
            sum = grad_sum_squares(g, z.opt_count());
        } else {  // -tp, -pp: values several ranks hold (a whole tensor, a shared KV head, the tied wte) count once
            for (const TpRun& r : shard->runs) {
                const size_t lo = std::max(r.local, z.opt_begin), hi = std::min(r.local + r.len, z.opt_end);
                if (r.first && lo < hi) sum += grad_sum_squares(g + (lo - z.opt_begin), hi - lo);
            }
            if (z.stage == 0 && dp->rank > 0) sum = 0.0;  // ZeRO 0: the data-parallel ranks hold the same
            return (float)std::sqrt(comm_sum(comm, sum));  // every part of every stage
        }
        if (z.stage > 0) sum = comm_sum(comm, sum);  // each rank holds a slice
        return (float)std::sqrt(sum);
    }
    void update(float lr, float weight_decay, float clip_scale, int t) {
        const float* g = opt_grads();
        float* p = opt_params();
        for (const ZeroSegment& seg : segments) {
            const ParamTensor& pt = model->tensors[seg.tensor];
            size_t o = seg.begin - z.opt_begin;
            adamw_update(p + o, g + o, model->m + o, model->v + o, seg.end - seg.begin, lr, 0.9f, 0.95f, 1e-8f,
                         pt.decays ? weight_decay : 0.0f, clip_scale, t);
        }
        phase_clock_mark(model->phases, PHASE_COMM);
        if (z.stage == 3) gsync->gather_front_and_tail();  // the layers are gathered as they run
        else if (z.stage > 0) comm_all_gather(dp, model->params, z.shard, sizeof(float));
    }
    void zero_grad() {
        phase_clock_mark(model->phases, PHASE_OTHER);
        memset(model->grads, 0, grads_len * sizeof(float));
        if (grad_shard != nullptr) memset(grad_shard, 0, z.shard * sizeof(float));
    }
    void sync() {}
    void poison_grad() { (z.stage >= 2 ? grad_shard : model->grads + z.own_begin)[0] = NAN; }
    void poison_weight() { model->params[0] = NAN; }
    // the model file (rank 0) and the AdamW state of this rank's slice
    void write_checkpoint(const std::string& dir, int step, TrainState s) {
        if (shard != nullptr) return write_checkpoint_tp(dir, step, s);
        zero_state_slice(&s, z);
        size_t o = z.own_begin - z.opt_begin;
        if (z.stage == 3) return write_checkpoint_gathered(dir, step, s);
        train_check_weights_finite(model->params, model->num_parameters, model->tensors, model->num_tensors, step, dir);
        checkpoint_write_model_and_state(dir, step, z.rank == 0 ? model : nullptr, s, model->m + o, model->v + o);
    }
    // ZeRO 3: rank 0 assembles the model file's full vector for the write, a layer at a time
    // through the slots (a collective: every rank gathers), the front and tail from the model
    void write_checkpoint_gathered(const std::string& dir, int step, const TrainState& s) {
        const size_t n = model->num_parameters;
        const ParamLayout table = model->layout();
        float* full = z.rank == 0 ? (float*)xmalloc(n * sizeof(float)) : nullptr;
        for (int l = 0; l < model->num_layers; l++) {
            float* slices[MAX_PARAM_TENSORS];
            gsync->layer_params(l, l + 1 < model->num_layers ? l + 1 : -1, slices);
            if (full != nullptr)
                for (const ZeroPiece& p : zero_bucket_pieces(table, l))
                    memcpy(full + p.begin, slices[0] + p.packed, (p.end - p.begin) * sizeof(float));
        }
        float* rest = model->params;
        if (full != nullptr) {
            memcpy(full, rest, gsync->front_n * sizeof(float));
            memcpy(full + table.tail_begin(), rest + gsync->front_n, gsync->tail_n * sizeof(float));
        }
        size_t index = 0;
        bool bad = full != nullptr && weights_find_nonfinite(full, n, model->tensors, model->num_tensors, &index) != nullptr;
        if (comm_sum(comm, bad ? 1.0 : 0.0) > 0) {
            if (full != nullptr)
                train_check_weights_finite(full, n, model->tensors, model->num_tensors, step, dir);
            fail("rank %d: refusing to write the checkpoint at step %d: rank 0 found a weight that is not finite", z.rank,
                 step);
        }
        model->params = full;  // what the model file writes (rank 0); the other ranks write no model
        checkpoint_write_model_and_state(dir, step, full != nullptr ? model : nullptr, s, model->m, model->v);
        model->params = rest;
        free(full);
    }
    // ZeRO 3 with -tp or -pp: this rank's part of the model, whole, into out (its layers gathered
    // through the slots, a collective over the data-parallel group; the front and tail rows from
    // the model)
    void local_params_gathered(float* out) {
        const ParamLayout table = model->layout();
        for (int l = 0; l < model->num_layers; l++) {
            float* slices[MAX_PARAM_TENSORS];
            gsync->layer_params(l, l + 1 < model->num_layers ? l + 1 : -1, slices);
            for (const ZeroPiece& p : zero_bucket_pieces(table, l))
                memcpy(out + p.begin, slices[0] + p.packed, (p.end - p.begin) * sizeof(float));
        }
        memcpy(out, model->params, gsync->front_n * sizeof(float));
        memcpy(out + table.tail_begin(), model->params + gsync->front_n, gsync->tail_n * sizeof(float));
    }
    // -tp, -pp: the model file and one state file, both as one process writes them, from rank 0,
    // which puts every rank's part together (model_parts_gather). So a checkpoint of parts resumes
    // on any layout, and any checkpoint on parts.
    void write_checkpoint_tp(const std::string& dir, int step, const TrainState& s) {
        std::vector<float> mine(z.stage == 3 ? model->num_parameters : 0);  // ZeRO 3: this rank's whole part
        if (z.stage == 3) local_params_gathered(mine.data());
        ModelPartsWhole whole;
        model_parts_gather(*layout, z, z.stage == 3 ? mine.data() : model->params, model->m, model->v, nullptr, &whole);
        if (comm->rank != 0) return;
        ModelBase* file = model_new(layout->config, false);  // the whole model's table
        file->params = whole.params.data();
        train_check_weights_finite(file->params, shard->global_n, file->tensors, file->num_tensors, step, dir);
        checkpoint_write_model_and_state(dir, step, file, model_parts_state_header(s, z, shard->global_n),
                                         whole.m.data(), whole.v.data());
        file->params = nullptr;
        model_delete(file);
    }
    void load_state(const std::string& dir, int step, TrainState* s) {
        // -tp, -pp: the model file's vector, then this rank's part of it
        std::string err = shard != nullptr ? model_parts_read_state(dir, step, *shard, z, s, model->m, model->v)
                                           : state_read_range(dir, step, z.n, z.opt_begin, z.opt_end, s, model->m, model->v);
        if (!err.empty()) fail("%s", err.c_str());
    }
    // reload after faults: the weights of a checkpoint's model file into the allocated model
    void load_weights(const std::string& path) {
        ModelBase* file = nullptr;
        std::vector<float> part;  // -tp, -pp: this rank's part of the file's vector
        const float* src = nullptr;
        if (shard != nullptr) {
            part.resize(model->num_parameters);
            model_parts_read_params(path, model->family, *shard, part.data());
            src = part.data();
        } else {
            file = model_load_checkpoint(path.c_str());
            CHECK(file->family == model->family && file->num_parameters == model->num_parameters, "%s: %zu vs %zu",
                  path.c_str(), file->num_parameters, model->num_parameters);
            src = file->params;
        }
        if (z.stage == 3) {  // this rank's slice, and the front and tail rows
            const size_t n = model->num_parameters, tail = model->layout().tail_begin();
            memcpy(param_shard, src + z.own_begin, (z.own_end - z.own_begin) * sizeof(float));
            memcpy(model->params, src, gsync->front_n * sizeof(float));
            memcpy(model->params + gsync->front_n, src + tail, (n - tail) * sizeof(float));
            gsync->params_changed();
        } else {
            memcpy(model->params, src, model->num_parameters * sizeof(float));
        }
        if (file != nullptr) model_delete(file);
    }
    void step_done(int step) {
        if (step_open) phase_clock_step_end(model->phases, step > 0);
        step_open = false;
    }
    std::string step_column(double tok_s) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%.1f GFLOP/s", tok_s * flops_per_token / 1e9);
        return buf;
    }
    // the peak resident memory of this process above what it held before loading the model
    // (rss_base: the program, its libraries, MPI), the plan's "in all"; with several ranks the
    // largest rank's too (a collective)
    std::string summary_extras(double tok_s) {
        double mine = proc_status_bytes("VmHWM") - rss_base;
        std::vector<double> all(comm->world);
        comm_exchange(comm, &mine, sizeof(double), all.data());
        char buf[160];
        int n = snprintf(buf, sizeof(buf), ", peak memory %.1f MiB (resident, above the %.1f MiB held before the model",
                         mine / 1048576.0, rss_base / 1048576.0);
        if (comm->world > 1)
            snprintf(buf + n, sizeof(buf) - n, "; the largest of %d ranks %.1f MiB)", comm->world,
                     *std::max_element(all.begin(), all.end()) / 1048576.0);
        else
            snprintf(buf + n, sizeof(buf) - n, ")");
        return buf;
    }
    std::string step_metrics(double tok_s) { return ""; }
    double energy_joules() { return -1.0; }
    int vocab_size() const { return model->vocab_size; }
    size_t num_parameters() const { return shard != nullptr ? shard->global_n : model->num_parameters; }
};

// The model's state laid out for this rank's ZeRO layout, allocated at the lengths it keeps
// (so no process ever touches a full copy it would drop): gradients padded to world*shard
// (ZeRO 2, 3 over several ranks: none here, llmc/grad_sync.h makes the front and tail rows'),
// AdamW m and v for the values this rank updates, activations for B x T (recompute: Llama's
// level, LlamaActivations in llmc/llama3.h); the parameters padded
// to world*shard (zero tail) below ZeRO 3 (whose grad_sync_init takes them apart). Returns ZeRO
// 2 and 3's slice accumulator (nullptr below stage 2).
static float* cpu_alloc_zero_state(ModelBase* model, const ZeroLayout& z, int B, int T, int recompute) {
    const size_t n = model->num_parameters;
    const bool sharded_grads = z.stage >= 2 && z.world > 1;
    model_alloc_state(model, B, T, sharded_grads ? 0 : z.padded, z.opt_count(), recompute);
    if (z.stage < 3) {
        if (z.padded != n) {
            float* p = (float*)realloc(model->params, z.padded * sizeof(float));
            if (p == nullptr) fail("out of memory allocating %zu bytes", z.padded * sizeof(float));
            memset(p + n, 0, (z.padded - n) * sizeof(float));
            model->params = p;
        }
        model_bind_views(model);
    }
    return z.stage < 2 ? nullptr : xcalloc_floats(z.shard);
}

// Bytes of memory this machine has available now (MemAvailable), or its physical memory.
static double available_memory_bytes() {
    FILE* f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kb = -1;
    while (f != nullptr && fgets(line, sizeof(line), f) != nullptr)
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    if (f != nullptr) fclose(f);
    if (kb > 0) return kb * 1024.0;
    return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

// Before anything is allocated: the model's size and what each process will hold, and a
// clear refusal when the processes of this machine cannot hold it (a Llama 3.1 8B needs some
// 130 GiB to train in fp32 on one process: weights, gradients, AdamW's two moments). Returns
// the recompute level to run (Llama; GPT-2 on the CPU keeps every activation): the one -r asks
// for, or with -r -1 (the default) the least that fits.
static int cpu_check_memory(const ModelConfig& mc, const TrainConfig& cfg, int world) {
    const int stage = world > 1 ? cfg.zero_stage : 0;
    const bool llama = mc.family == FAMILY_LLAMA3;
    if (!llama && cfg.recompute > 0)
        printf("note: -r %d: train_gpt_cpu recomputes Llama's activations only; GPT-2 keeps them all\n", cfg.recompute);
    const double GiB = 1073741824.0, have = available_memory_bytes();
    // the processes of one machine share its memory (under mpirun they may be spread over several)
    const char* local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int here = local != nullptr && atoi(local) > 0 ? atoi(local) : world;
    int recompute = llama ? cfg.recompute : 0;
    auto fits = [&](int r) { return model_memory_plan(mc, cfg.B, cfg.T, world, stage, ValueBytes(), r).total() * here <= have; };
    if (recompute == -1) {
        recompute = llama ? 2 : 0;
        for (int r = llama ? 1 : -1; r >= 0; r--)
            if (fits(r)) recompute = r;
    }
    if (fits(recompute)) return recompute;
    MemoryPlan p = model_memory_plan(mc, cfg.B, cfg.T, world, stage, ValueBytes(), recompute);
    fail("%s (%s, %zu parameters) does not fit: %.1f GiB per process (params %.1f, grads %.1f, AdamW %.1f, "
         "activations %.1f at B=%d T=%d -r %d; %d process%s, ZeRO %d) x %d on this machine = %.1f GiB, and %.1f GiB "
         "is available (more processes with -z 1, 2 or 3 shard AdamW, the gradients and the parameters; -b and -t "
         "shrink the activations%s)",
         cfg.init.c_str(), model_family_name(mc.family), model_config_num_parameters(mc), p.total() / GiB,
         p.params / GiB, p.grads / GiB, p.adamw / GiB, p.activations / GiB, cfg.B, cfg.T, recompute, world,
         world == 1 ? "" : "es", stage, here, p.total() * here / GiB, have / GiB, llama ? ", -r 1 or 2 too" : "");
}

int main(int argc, char** argv) {
    omp_wait_setup(argv);  // may start the program again, with a short OpenMP spin
    TrainConfig cfg;
    args_parse(argc, argv, &cfg);
    train_check_flags(cfg);
    LRScheduleKind schedule_kind;
    if (!lr_schedule_parse(cfg.schedule.c_str(), &schedule_kind))
        fail("flag -k: unknown schedule '%s' (cosine | linear | constant | wsd)", cfg.schedule.c_str());
    // the CPU's collectives are MPI's: the sockets of -pi fs|tcp only bootstrap the GPU's NCCL
    if ((cfg.init_method == "fs" || cfg.init_method == "tcp") && cfg.num_processes > 1)
        fail("flag -pi %s: train_gpt_cpu's processes share their work through MPI: start them with mpirun -np %d "
             "(-pi fs and -pi tcp start the GPU trainers, whose collectives are NCCL's)",
             cfg.init_method.c_str(), cfg.num_processes);
    Comm comm;
    comm_init(&comm, cfg, &argc, &argv);
    const int rank = comm.rank, world = comm.world;
    // -tp, -pp: the world is data-parallel x pipeline-parallel x tensor-parallel ranks
    // (llmc/model_parts.h); the ranks that hold a part of the model compute it together
    ModelParts layout;
    model_parts_init(cfg, &comm, &layout);
    const int tp = layout.tp, pp = layout.pp, vp = layout.vp, stage = layout.stage;
    const int t_rank = layout.t_rank, dp_rank = layout.dp_rank, dp_world = layout.dp_world;
    const bool parts = layout.parts;  // this rank holds a part of the model
    Comm* dpc = layout.dp();
    CpuTensorParallel tp_group;
    tp_group.group = &layout.tp_comm;
    tp_group.size = tp;
    tp_group.rank = t_rank;
    tp_group.sp = cfg.sequence_parallel != 0;
    preempt_install_handlers();
    FaultInject inject = fault_inject_from_env();

    // --- where training starts: a checkpoint in -o (resume), a model file, or random init
    int resume_step = train_prepare_output_dir(cfg, &comm);
    const ModelConfig start_config = train_model_config(cfg, resume_step);
    model_parts_set_model(cfg, start_config, &layout);  // refuses a model the layout cannot split
    const std::vector<int>& stage_sizes = layout.stage_sizes;
    const int recompute = cpu_check_memory(start_config, cfg, world);
    const double rss_base = proc_status_bytes("VmRSS");
    float* param_shard = nullptr;  // ZeRO 3: this rank's slice of the parameters
    TpShard shard;                 // -tp, -pp: this rank's part of the table
    ModelBase* model = nullptr;
    ZeroLayout z;
    if (parts) {  // the whole model is read (or drawn), and this rank keeps its part
        ModelBase* whole = train_load_model(cfg, resume_step);
        std::string why;
        model = model_new_part(model_config_of(whole), tp > 1 ? &tp_group : nullptr, tp, t_rank, stage, pp, vp, &shard,
                               &why, stage_sizes.empty() ? nullptr : &stage_sizes);
        if (model == nullptr) fail("flag -tp %d -pp %d: %s", tp, pp, why.c_str());
        tp_global_to_local(shard, 0, shard.local_n, whole->params, model->params);
        model_delete(whole);
        z = train_zero_layout(cfg, model->num_parameters, dp_rank, dp_world);
        // ZeRO 3 over the data-parallel ranks: keep the slice, and the front and tail rows
        if (z.stage == 3) param_shard = train_keep_zero3(model, z);
    } else {
        z = train_zero_layout(cfg, model_config_num_parameters(start_config), rank, world);
        model = z.stage == 3 ? train_load_model_zero3(cfg, resume_step, start_config, z, &param_shard)
                             : train_load_model(cfg, resume_step);
    }

    // --- batch arithmetic and data (the data-parallel ranks read their own batches)
    TrainData data;
    train_data_init(&data, &cfg, model->vocab_size, dp_rank, dp_world);
    int B = cfg.B, T = cfg.T;

    Tokenizer tokenizer;
    train_tokenizer_init(cfg, &tokenizer);

    float* grad_shard = cpu_alloc_zero_state(model, z, B, T, recompute);
    LRSchedule sched = {schedule_kind, cfg.lr, cfg.warmup, data.num_steps, cfg.final_lr_frac};

    // --- the plan
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    size_t n = parts ? shard.global_n : model->num_parameters;
    double flops = model_flops_per_token(model, T);
    train_print_plan(model_describe(model), n, cfg, data, resume_step, dp_world);
    const double MiB = 1048576.0;
    if (tp > 1)
        printf("tensor parallelism: %d data-parallel x %d tensor-parallel ranks; each holds %zu of the %zu parameters "
               "(its heads, MLP units and vocabulary rows; the norms whole)\n", dp_world, tp, model->num_parameters, n);
    ActsSets acts_sets;
    std::vector<int> stage_layers, chunk_begin = {0, model->num_layers};
    pipeline_check_micro_batches(pp, vp, data.grad_accum);
    if (pp > 1) {
        // the schedule keeps some micro-batches' activations at once (1F1B: pp - s on stage s);
        // the bubble is (pp - 1) / (vp m + pp - 1) of a step
        const int m = data.grad_accum;
        model_acts_sets(model, pipeline_in_flight(pipeline_schedule(pp, vp, stage, m)), &acts_sets);
        int hold[MAX_PARAM_TENSORS];
        const std::vector<int>* sizes = stage_sizes.empty() ? nullptr : &stage_sizes;
        model_stage(start_config, stage, pp, vp, &stage_layers, &chunk_begin, hold, sizes);
        std::vector<int> layers0, chunks0;
        model_stage(start_config, 0, pp, vp, &layers0, &chunks0, hold, sizes);
        printf("pipeline parallelism: %d stages x %d virtual (stage 0: layers %d..%d%s; each stage's tensor-parallel "
               "ranks: %d), %s over %d micro-batches a step: bubble (pp-1)/(vp m+pp-1) = %.1f%%; the first stage keeps "
               "%d micro-batches' activations\n", pp, vp, layers0[0], layers0[chunks0[1] - 1], vp > 1 ? ", ..." : "", tp,
               vp > 1 ? "interleaved 1F1B" : "1F1B", m, 100.0 * (pp - 1) / (vp * m + pp - 1),
               pipeline_in_flight(pipeline_schedule(pp, vp, 0, m)));
    }
    if (dp_world > 1)
        printf("processes: %d (MPI), %s, %zu parameters per rank's slice\n", world, zero_stage_name(z.stage), z.shard);
    // several data-parallel ranks: each layer's gradients are reduced while the backward runs the layers below
    GradSync sync;
    if (dp_world > 1) grad_sync_init(&sync, model, dpc, z, grad_shard, param_shard);
    size_t grads_len = dp_world > 1 ? grad_sync_grads_len(&sync) : z.padded;
    size_t grad_floats = dp_world > 1 ? grad_sync_grad_floats(&sync) : z.padded;
    size_t param_floats = dp_world > 1 ? grad_sync_param_floats(&sync) : z.padded;
    const size_t all_grad_floats = grad_floats + (grad_shard ? z.shard : 0);
    printf("memory per process: params %.1f MiB%s, grads %.1f MiB%s, AdamW %.1f MiB, activations %.1f MiB%s; "
           "%.1f MiB in all; %d threads%s%s\n",
           param_floats * 4 / MiB, param_shard ? " (the owned slice, the front and tail rows, two layers in flight)" : "",
           all_grad_floats * 4 / MiB,
           grad_shard ? " (the owned slice, the front and tail rows, and two layer buckets in flight)" : "",
           z.opt_count() * 8 / MiB, model->acts_floats * 4 / MiB,
           model->family == FAMILY_LLAMA3 ? (recompute == 2 ? " (-r 2: layer inputs)" : recompute == 1 ? " (-r 1)" : " (-r 0)") : "",
           (param_floats + all_grad_floats + 2 * z.opt_count() + model->acts_floats) * 4 / MiB, threads,
           getenv("GOMP_SPINCOUNT") ? ", GOMP_SPINCOUNT=" : "", getenv("GOMP_SPINCOUNT") ? getenv("GOMP_SPINCOUNT") : "");
    if (dp_world > 1)
        printf("communication per step and process: %.1f MiB sent\n",
               zero_comm_bytes_per_step(z, data.grad_accum, 4, 4, model->num_layers, sync.layer_n) / MiB);

    PhaseClock phase_clock;  // -pb 1
    if (cfg.phase_breakdown) model->phases = &phase_clock;
    CpuBackend be;
    be.model = model;
    be.comm = &comm;
    be.z = z;
    be.segments = zero_segments(model->tensors, model->num_tensors, z.opt_begin, z.opt_end);
    be.grad_shard = grad_shard;
    be.param_shard = param_shard;
    be.flops_per_token = flops;
    be.gsync = dp_world > 1 ? &sync : nullptr;
    be.grads_len = grads_len;
    be.rss_base = rss_base;
    be.dp = dpc;
    if (parts) {
        be.tpc = tp > 1 ? &layout.tp_comm : nullptr;
        be.shard = &shard;
        be.layout = &layout;
        be.tp = tp;
        be.pp = pp;
        be.vp = vp;
        be.stage = stage;
        be.chunks = chunk_begin;
        be.prev = layout.prev;
        be.next = layout.next;
        be.emb = pp > 1 && model->family == FAMILY_GPT2 && (stage == 0 || stage == pp - 1) ? &layout.emb_comm : nullptr;
        be.acts = acts_sets;
    }
    int status = train_loop(be, cfg, data, &tokenizer, sched, &inject, resume_step, &comm);
    if (cfg.phase_breakdown && rank == 0) phase_clock_report(phase_clock);
    if (cfg.phase_breakdown && pp > 1) {
        // -pp: each stage's wait for the others, against 1F1B's bubble; the mean over the stages
        // (a collective: every rank takes part, rank 0 prints)
        const double share = phase_clock.wall_ms > 0 ? phase_clock.ms[PHASE_PIPELINE] / phase_clock.wall_ms : 0.0;
        std::vector<double> all(world);
        comm_exchange(&comm, &share, sizeof(double), all.data());
        double mean = 0.0;
        printf("pipeline bubble, measured (-pb 1): the share of the step each stage waited for another:");
        for (int s = 0; s < pp; s++) {
            printf(" stage %d %.1f%%", s, 100.0 * all[(size_t)s * tp]);
            mean += all[(size_t)s * tp] / pp;
        }
        const int m = data.grad_accum;
        printf("; mean %.1f%%; 1F1B's (pp-1)/(m+pp-1) = %.1f%%\n", 100.0 * mean, 100.0 * (pp - 1) / (m + pp - 1));
    }
    if (dp_world > 1) {
        grad_sync_report(&sync);
        grad_sync_free(&sync);
    }
    train_data_free(&data);
    if (tokenizer.ok) tokenizer_free(&tokenizer);
    model_delete(model);
    free(grad_shard);
    free(param_shard);
    if (parts) model_acts_sets_free(&be.acts);
    model_parts_free(&layout);
    comm_free(&comm);
    return status;
}
