// train_gpt.cpp: the CPU reference trainer (fp32, OpenMP). Same flags and files as the GPU
// trainer and llm.c. Reading order: main() parses flags, builds the model and the data
// loaders, then runs the loop: validate, sample, checkpoint, one training step, log.
// Faults (llmc/faults.h): a signal checkpoints and exits 0; a step with a non-finite loss or
// gradient norm, or an outlier (-sl/-sg), is skipped; -fk such steps in a row reload the
// last good checkpoint.
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "llmc/utils.h"       // defines: fail, CHECK
#include "llmc/args.h"        // defines: TrainConfig, args_parse
#include "llmc/gpt2.h"        // defines: GPT2, gpt2_forward, gpt2_backward, gpt2_update, ...
#include "llmc/checkpoint.h"  // defines: gpt2_load_checkpoint, checkpoint_write, checkpoint_find_latest, ...
#include "llmc/dataloader.h"  // defines: DataLoader, dataloader_init, dataloader_next_batch, ...
#include "llmc/schedule.h"    // defines: LRSchedule, lr_schedule_get
#include "llmc/logger.h"      // defines: Logger, logger_log_train, logger_log_val
#include "llmc/tokenizer.h"   // defines: Tokenizer, tokenizer_init, tokenizer_decode
#include "llmc/train_common.h" // defines: train_prepare_output_dir, train_load_host_model, TrainData, sample_text, ...
#include "llmc/faults.h"      // defines: preempt_install_handlers, StepGuard, step_guard_judge, FaultInject, ...

// Mean loss over num_batches validation batches from the start of the val split.
static float validate(GPT2* model, DataLoader* val, int num_batches) {
    dataloader_reset(val);
    double sum = 0.0;
    for (int i = 0; i < num_batches; i++) {
        dataloader_next_batch(val);
        gpt2_forward(model, val->inputs, val->targets, val->B, val->T);
        sum += model->mean_loss;
    }
    return (float)(sum / num_batches);
}

// The weights of a checkpoint's model file into an allocated model (reload after faults).
static void load_weights(GPT2* model, const std::string& path) {
    GPT2 file;
    gpt2_load_checkpoint(&file, path.c_str());
    CHECK(file.num_parameters == model->num_parameters, "%zu vs %zu", file.num_parameters, model->num_parameters);
    memcpy(model->params, file.params, model->num_parameters * sizeof(float));
    gpt2_free(&file);
}

int main(int argc, char** argv) {
    TrainConfig cfg;
    args_parse(argc, argv, &cfg);
    reject_unfinished_features(cfg, "train_gpt_cpu");
    LRScheduleKind schedule_kind;
    if (!lr_schedule_parse(cfg.schedule.c_str(), &schedule_kind))
        fail("flag -k: unknown schedule '%s' (cosine | linear | constant | wsd)", cfg.schedule.c_str());
    const std::string& dir = cfg.output_dir;
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
    int B = cfg.B, T = cfg.T, num_steps = data.num_steps, grad_accum = data.grad_accum;

    Tokenizer tokenizer;
    if (cfg.sample_every > 0) tokenizer_init(&tokenizer, default_tokenizer_path(cfg).c_str());
    else tokenizer.ok = false;

    gpt2_alloc_state(&model, B, T);
    LRSchedule sched = {schedule_kind, cfg.lr, cfg.warmup, num_steps, cfg.final_lr_frac};

    // --- the plan
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    size_t n = model.num_parameters;
    double flops_per_token = 6.0 * n + 6.0 * mc.num_layers * mc.channels * T;
    printf("model: L=%d C=%d NH=%d V=%d (Vp %d) maxT=%d, %zu parameters (%s)\n", mc.num_layers,
           mc.channels, mc.num_heads, mc.vocab_size, mc.padded_vocab_size, mc.max_seq_len, n,
           resume_step >= 0 ? "resumed" : cfg.init.c_str());
    printf("batch: B=%d T=%d x %d processes x %d accumulation = %lld tokens/step; %d steps; lr %g %s, warmup %d, final %g, wd %g\n",
           B, T, world, grad_accum, cfg.total_batch, num_steps, cfg.lr, cfg.schedule.c_str(), cfg.warmup,
           cfg.final_lr_frac, cfg.weight_decay);
    printf("memory: params %.1f MiB, grads %.1f MiB, AdamW %.1f MiB, activations %.1f MiB; %d threads\n",
           n * 4 / 1048576.0, n * 4 / 1048576.0, n * 8 / 1048576.0, model.acts_floats * 4 / 1048576.0, threads);

    // --- resume the optimizer, data position, RNG and step guard (also after -fk faults)
    int step = 0;
    uint64_t sample_rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)cfg.seed;
    StepGuard guard;
    auto restore_state = [&](int from) {
        std::string path = checkpoint_path(dir, "state", from, rank);
        TrainState s;
        std::string err = state_read(path.c_str(), &s, model.m, model.v);
        if (!err.empty()) fail("%s: %s", path.c_str(), err.c_str());
        train_state_check(s, path, n, cfg, world);
        dataloader_set_state(&data.train, {s.dl_epoch, s.dl_shard_pos, s.dl_sample_pos});
        sample_rng = s.sample_rng;
        train_state_restore_guard(&guard, s, path, cfg);
        step = (int)s.step;
        printf("resumed from %s at step %d\n", checkpoint_path(dir, "model", step).c_str(), step);
    };
    if (resume_step >= 0) restore_state(resume_step);
    Logger logger;
    logger_init(&logger, dir, resume_step);
    int checkpointed = resume_step;  // the step of the newest checkpoint on disk from this run (-1: none)
    auto write_checkpoint = [&]() {
        train_check_weights_finite(model.params, n, model.tensors, step, dir);
        TrainState s = train_state_make(step, rank, world, n, &data.train, cfg, sample_rng, guard);
        checkpoint_write(dir, step, &model, s);
        checkpointed = step;
        printf("checkpoint: %s\n", checkpoint_path(dir, "model", step).c_str());
    };

    // --- the loop: step counts optimizer steps done; the last iteration only evaluates
    bool just_resumed = resume_step >= 0;
    double train_seconds = 0.0, run_start = now_seconds();
    int timed_steps = 0;
    long long tokens_done = (long long)step * cfg.total_batch;
    float last_val = -1.0f, last_loss = -1.0f;
    bool preempted = false;
    int last_reload = -1;
    for (; step <= num_steps; step++) {
        if ((preempted = train_preempt_requested())) break;
        bool last = step == num_steps;
        if (data.do_val && (step % cfg.val_every == 0 || last)) {
            last_val = validate(&model, &data.val, data.val_batches);
            printf("val loss %f\n", last_val);
            logger_log_val(&logger, step, last_val);
        }
        if (cfg.sample_every > 0 && ((step > 0 && step % cfg.sample_every == 0) || last))
            sample_text(cfg, &tokenizer, mc.vocab_size, T, &sample_rng, [&](const int* tokens, int ctx) {
                gpt2_forward(&model, tokens, nullptr, 1, ctx);
                return (const float*)model.acts.logits + (size_t)(ctx - 1) * mc.padded_vocab_size;
            });
        if (cfg.checkpoint_every > 0 && !dir.empty() && !just_resumed &&
            ((step > 0 && step % cfg.checkpoint_every == 0) || last)) {
            write_checkpoint();
            int old = step - cfg.checkpoints_keep * cfg.checkpoint_every;
            if (cfg.checkpoints_keep > 0 && old > 0 && (cfg.checkpoint_major == 0 || old % cfg.checkpoint_major != 0))
                checkpoint_delete(dir, old, rank);
        }
        just_resumed = false;
        if (last) break;
        if ((preempted = train_preempt_requested())) break;

        // one optimizer step over grad_accum micro-batches
        double t0 = now_seconds();
        double loss_sum = 0.0;
        for (int micro = 0; micro < grad_accum; micro++) {
            if (!cfg.overfit_batch || (step == 0 && micro == 0)) dataloader_next_batch(&data.train);
            gpt2_forward(&model, data.train.inputs, data.train.targets, B, T);
            gpt2_backward(&model, data.train.inputs, data.train.targets, 1.0f / ((float)B * T * grad_accum));
            loss_sum += model.mean_loss;
        }
        float loss = (float)(loss_sum / grad_accum);
        if (fault_inject_fire(&inject, FAULT_NAN_LOSS, step)) loss = NAN;
        if (fault_inject_fire(&inject, FAULT_SPIKE_LOSS, step)) loss *= 100.0f;
        if (fault_inject_fire(&inject, FAULT_NAN_GRAD, step)) model.grads[0] = NAN;
        float lr = lr_schedule_get(sched, step);
        float norm = gpt2_grad_norm(&model);
        if (fault_inject_fire(&inject, FAULT_SPIKE_GRAD, step)) norm *= 100.0f;
        // a non-finite or outlier step leaves weights and AdamW moments as they were
        StepVerdict verdict = step_guard_judge(&guard, loss, norm, cfg.skip_loss_z, cfg.skip_grad_z);
        if (verdict == STEP_VERDICT_UPDATE)
            gpt2_update(&model, lr, 0.9f, 0.95f, 1e-8f, cfg.weight_decay, grad_clip_scale(norm, 1.0f), step + 1);
        if (fault_inject_fire(&inject, FAULT_NAN_WEIGHT, step)) model.params[0] = NAN;
        gpt2_zero_grad(&model);
        double dt = now_seconds() - t0;

        tokens_done += cfg.total_batch;
        if (step > 0 || num_steps == 1) { train_seconds += dt; timed_steps++; }
        double tok_s = cfg.total_batch / dt;
        double eta = (timed_steps > 0 ? train_seconds / timed_steps : dt) * (num_steps - step - 1);
        printf("step %5d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | %.1f GFLOP/s | ETA %s%s\n",
               step + 1, num_steps, loss, norm, lr, dt * 1000, tok_s, tok_s * flops_per_token / 1e9,
               format_duration(eta).c_str(), train_step_note(verdict, guard, cfg).c_str());
        fflush(stdout);
        train_log_step(&logger, step, loss, lr, norm, dt * 1000, tok_s, tokens_done, verdict, guard);
        if (verdict == STEP_VERDICT_UPDATE) last_loss = loss;

        // -fk non-finite steps in a row: back to the last good checkpoint, as a resume would
        // (logs cut back to it, so they tell the history of the weights in hand)
        if (guard.bad_streak >= cfg.fault_streak) {
            int from = train_fault_reload_step(cfg, guard, step, rank, last_reload);
            last_reload = from;
            load_weights(&model, checkpoint_path(dir, "model", from));
            restore_state(from);
            tokens_done = (long long)step * cfg.total_batch;
            logger_close(&logger);
            logger_init(&logger, dir, from);
            checkpointed = from;
            just_resumed = true;
            step--;  // the loop's step++ lands back on the checkpoint's step
        }
    }
    if (preempted) {
        // finish the step in progress (done), checkpoint it unless it is on disk, stop
        if (!dir.empty() && checkpointed != step) write_checkpoint();
        int status = train_preempt_exit(cfg, step, &logger);
        logger_close(&logger);
        train_data_free(&data);
        if (tokenizer.ok) tokenizer_free(&tokenizer);
        gpt2_free(&model);
        return status;
    }
    double wall = now_seconds() - run_start;
    printf("done: %d steps, %lld tokens, %s wall", num_steps, tokens_done, format_duration(wall).c_str());
    if (timed_steps > 0) printf(", %.1f ms/step, %.0f tok/s", 1000 * train_seconds / timed_steps,
                                cfg.total_batch * timed_steps / train_seconds);
    if (last_loss >= 0) printf(", final train loss %.4f", last_loss);
    if (last_val >= 0) printf(", final val loss %.4f", last_val);
    printf("%s%s\n", dir.empty() ? "" : "; logs in ", dir.c_str());

    logger_close(&logger);
    train_data_free(&data);
    if (tokenizer.ok) tokenizer_free(&tokenizer);
    gpt2_free(&model);
    return 0;
}
