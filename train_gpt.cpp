// train_gpt.cpp: the CPU reference trainer (fp32, OpenMP). Same flags and files as the GPU
// trainer and llm.c. Reading order: main() parses flags, builds the model and the data
// loaders, prints the plan, then hands a CpuBackend to the loop both trainers share
// (llmc/train_loop.h: validate, sample, checkpoint, one training step, log, faults).
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "llmc/utils.h"       // defines: fail, CHECK
#include "llmc/args.h"        // defines: TrainConfig, args_parse
#include "llmc/gpt2.h"        // defines: GPT2, gpt2_forward, gpt2_backward, gpt2_update, ...
#include "llmc/checkpoint.h"  // defines: gpt2_load_checkpoint, checkpoint_write, state_read, TrainState
#include "llmc/dataloader.h"  // defines: DataLoader (inside TrainData)
#include "llmc/schedule.h"    // defines: LRSchedule, lr_schedule_parse
#include "llmc/logger.h"      // defines: Logger (the loop logs)
#include "llmc/tokenizer.h"   // defines: Tokenizer, tokenizer_init, tokenizer_decode
#include "llmc/train_common.h" // defines: train_prepare_output_dir, train_load_host_model, TrainData, ...
#include "llmc/faults.h"      // defines: preempt_install_handlers, FaultInject, fault_inject_from_env
#include "llmc/train_loop.h"  // defines: train_loop

// The loop's Backend (llmc/train_loop.h) for a model in host memory.
struct CpuBackend {
    GPT2* model;
    double flops_per_token;  // for the step line's GFLOP/s

    float micro_step(const int* inputs, const int* targets, int B, int T, float dloss) {
        gpt2_forward(model, inputs, targets, B, T);
        gpt2_backward(model, inputs, targets, dloss);
        return model->mean_loss;
    }
    float eval_loss(const int* inputs, const int* targets, int B, int T) {
        gpt2_forward(model, inputs, targets, B, T);
        return model->mean_loss;
    }
    const float* last_logits(const int* tokens, int ctx) {
        gpt2_forward(model, tokens, nullptr, 1, ctx);
        return (const float*)model->acts.logits + (size_t)(ctx - 1) * model->config.padded_vocab_size;
    }
    float grad_norm() { return gpt2_grad_norm(model); }
    void update(float lr, float weight_decay, float clip_scale, int t) {
        gpt2_update(model, lr, 0.9f, 0.95f, 1e-8f, weight_decay, clip_scale, t);
    }
    void zero_grad() { gpt2_zero_grad(model); }
    void sync() {}
    void poison_grad() { model->grads[0] = NAN; }
    void poison_weight() { model->params[0] = NAN; }
    void write_checkpoint(const std::string& dir, int step, const TrainState& s) {
        train_check_weights_finite(model->params, model->num_parameters, model->tensors, step, dir);
        checkpoint_write(dir, step, model, s);
    }
    void load_state(const std::string& path, TrainState* s) {
        std::string err = state_read(path.c_str(), s, model->m, model->v);
        if (!err.empty()) fail("%s: %s", path.c_str(), err.c_str());
    }
    // reload after faults: the weights of a checkpoint's model file into the allocated model
    void load_weights(const std::string& path) {
        GPT2 file;
        gpt2_load_checkpoint(&file, path.c_str());
        CHECK(file.num_parameters == model->num_parameters, "%zu vs %zu", file.num_parameters, model->num_parameters);
        memcpy(model->params, file.params, model->num_parameters * sizeof(float));
        gpt2_free(&file);
    }
    void step_done(int step) {}
    std::string step_column(double tok_s) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%.1f GFLOP/s", tok_s * flops_per_token / 1e9);
        return buf;
    }
    std::string summary_extras(double tok_s) { return ""; }
    int vocab_size() const { return model->config.vocab_size; }
    size_t num_parameters() const { return model->num_parameters; }
};

int main(int argc, char** argv) {
    TrainConfig cfg;
    args_parse(argc, argv, &cfg);
    reject_unfinished_features(cfg, "train_gpt_cpu");
    LRScheduleKind schedule_kind;
    if (!lr_schedule_parse(cfg.schedule.c_str(), &schedule_kind))
        fail("flag -k: unknown schedule '%s' (cosine | linear | constant | wsd)", cfg.schedule.c_str());
    const int rank = 0, world = 1;
    preempt_install_handlers();
    FaultInject inject = fault_inject_from_env();

    // --- where training starts: a checkpoint in -o (resume), a model file, or random init
    int resume_step = train_prepare_output_dir(cfg, rank);
    GPT2 model;
    train_load_host_model(&model, cfg, resume_step);
    const GPT2Config& mc = model.config;

    // --- batch arithmetic and data
    TrainData data;
    train_data_init(&data, &cfg, mc.vocab_size, rank, world);
    int B = cfg.B, T = cfg.T;

    Tokenizer tokenizer;
    if (cfg.sample_every > 0) tokenizer_init(&tokenizer, default_tokenizer_path(cfg).c_str());
    else tokenizer.ok = false;

    gpt2_alloc_state(&model, B, T);
    LRSchedule sched = {schedule_kind, cfg.lr, cfg.warmup, data.num_steps, cfg.final_lr_frac};

    // --- the plan
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    size_t n = model.num_parameters;
    double flops_per_token = train_flops_per_token(mc, n, T);
    train_print_plan(mc, n, cfg, data, resume_step, world);
    printf("memory: params %.1f MiB, grads %.1f MiB, AdamW %.1f MiB, activations %.1f MiB; %d threads\n",
           n * 4 / 1048576.0, n * 4 / 1048576.0, n * 8 / 1048576.0, model.acts_floats * 4 / 1048576.0, threads);

    CpuBackend be = {&model, flops_per_token};
    int status = train_loop(be, cfg, data, &tokenizer, sched, &inject, resume_step, rank, world);
    train_data_free(&data);
    if (tokenizer.ok) tokenizer_free(&tokenizer);
    gpt2_free(&model);
    return status;
}
