// train_gpt.cu: the GPU trainer. One source, two binaries: train_gpt_fp32, and
// train_gpt_bf16 (-DENABLE_BF16: bf16 weights and activations, fp32 AdamW state and master
// weights). Same flags, files, logs and loop as the CPU trainer train_gpt.cpp; only the
// model lives on the GPU (llmc/gpt2_cuda.cuh). Reading order: main() parses flags, builds
// the model and the data loaders, then runs the loop: validate, sample, checkpoint, one
// training step, log. Faults as in the CPU trainer (llmc/faults.h): a signal checkpoints and
// exits 0; a non-finite or outlier (-sl/-sg) step is skipped; -fk such steps in a row
// reload the last good checkpoint.
#include <string>
#include <vector>

#include "llmc/utils.h"         // defines: fail, CHECK
#include "llmc/args.h"          // defines: TrainConfig, args_parse
#include "llmc/gpt2.h"          // defines: GPT2 (the host model: init, random init, loading), grad_clip_scale
#include "llmc/checkpoint.h"    // defines: checkpoint_path, checkpoint_delete, TrainState
#include "llmc/dataloader.h"    // defines: DataLoader, dataloader_next_batch, dataloader_reset, ...
#include "llmc/schedule.h"      // defines: LRSchedule, lr_schedule_parse, lr_schedule_get
#include "llmc/logger.h"        // defines: Logger, logger_log_train, logger_log_val
#include "llmc/tokenizer.h"     // defines: Tokenizer, tokenizer_init, tokenizer_decode
#include "llmc/train_common.h"  // defines: train_prepare_output_dir, train_load_host_model, TrainData, ...
#include "llmc/cuda/common.cuh" // defines: CudaContext, cuda_context_init, floatX, PRECISION_NAME
#include "llmc/gpt2_cuda.cuh"   // defines: GPT2Cuda, gpt2_cuda_forward, gpt2_cuda_backward, gpt2_cuda_update, ...
#include "llmc/faults.h"        // defines: preempt_install_handlers, StepGuard, step_guard_judge, FaultInject, ...

#ifdef ENABLE_BF16
static const char* PROGRAM = "train_gpt_bf16";
#else
static const char* PROGRAM = "train_gpt_fp32";
#endif

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

// Mean loss over num_batches validation batches from the start of the val split.
static float validate(GPT2Cuda* model, DataLoader* val, int num_batches) {
    dataloader_reset(val);
    double sum = 0.0;
    for (int i = 0; i < num_batches; i++) {
        dataloader_next_batch(val);
        gpt2_cuda_forward(model, val->inputs, val->targets, val->B, val->T, 0.0f);
        sum += gpt2_cuda_loss(model);
    }
    return (float)(sum / num_batches);
}

// The weights of a checkpoint's model file into the allocated device model (reload after
// faults); the bf16 build's master weights come back with the state file (gpt2_cuda_load_state).
static void upload_weights(GPT2Cuda* model, const std::string& path) {
    GPT2 host;
    gpt2_load_checkpoint(&host, path.c_str());
    size_t n = model->num_parameters;
    CHECK(host.num_parameters == n, "%zu vs %zu", host.num_parameters, n);
    std::vector<floatX> chunk(std::min<size_t>(n, 1 << 22));
    for (size_t done = 0; done < n; done += chunk.size()) {
        size_t k = std::min(chunk.size(), n - done);
        for (size_t i = 0; i < k; i++) chunk[i] = from_float<floatX>(host.params[done + i]);
        CHECK_CUDA(cudaMemcpy(model->params + done, chunk.data(), k * sizeof(floatX), cudaMemcpyHostToDevice));
    }
    gpt2_free(&host);
}

// Non-finite weights (or master weights) never go into a checkpoint: refuses before writing.
static void check_weights_finite(const GPT2Cuda* model, int step, const std::string& dir) {
    size_t n = model->num_parameters;
    std::vector<float> host(n);
    gpt2_cuda_download_floatx(model, model->params, host.data());
    train_check_weights_finite(host.data(), n, model->tensors, step, dir);
    if (model->master != nullptr) {
        CHECK_CUDA(cudaMemcpy(host.data(), model->master, n * sizeof(float), cudaMemcpyDeviceToHost));
        train_check_weights_finite(host.data(), n, model->tensors, step, dir, "master weight");
    }
}

// TEST HOOK (GPTRAIN_FAULT_INJECT nan_grad / nan_weight): element 0 of a device buffer := NaN,
// in stream order. from is a pageable host value: copied out before cudaMemcpyAsync returns.
template <typename T>
static void poison_first(const GPT2Cuda* model, T* buf) {
    T nan_value = from_float<T>(NAN);
    CHECK_CUDA(cudaMemcpyAsync(buf, &nan_value, sizeof(T), cudaMemcpyHostToDevice, model->ctx->stream));
    CHECK_CUDA(cudaStreamSynchronize(model->ctx->stream));
}

int main(int argc, char** argv) {
    TrainConfig cfg;
    args_parse(argc, argv, &cfg);
    reject_unfinished_features(cfg, PROGRAM);
    LRScheduleKind schedule_kind;
    if (!lr_schedule_parse(cfg.schedule.c_str(), &schedule_kind))
        fail("flag -k: unknown schedule '%s' (cosine | linear | constant | wsd)", cfg.schedule.c_str());
    if (cfg.gelu_fusion == 2)
        fail("-ge 2: GELU fused into the backward matmul is not implemented; use -ge 0 (off) or 1 (forward)");
    const std::string& dir = cfg.output_dir;
    const int rank = 0, world = 1;
    preempt_install_handlers();
    FaultInject inject = fault_inject_from_env();

    // --- the device
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    ctx.tf32 = cfg.tf32 != 0;
    ctx.gelu_fusion = cfg.gelu_fusion != 0;  // -1 (default): on
    bool use_master = sizeof(floatX) == 2 && cfg.master_weights != 0;

    // --- where training starts: a checkpoint in -o (resume), a model file, or random init;
    // built on the host (bit-identical to the CPU trainer's), then uploaded
    int resume_step = train_prepare_output_dir(cfg, rank);
    GPT2Cuda model;
    {
        GPT2 host;
        train_load_host_model(&host, cfg, resume_step);
        gpt2_cuda_init(&model, &ctx, &host, use_master);
        gpt2_free(&host);
    }
    const GPT2Config& mc = model.config;

    // --- batch arithmetic and data
    TrainData data;
    train_data_init(&data, &cfg, mc.vocab_size, rank, world);
    int B = cfg.B, T = cfg.T, num_steps = data.num_steps, grad_accum = data.grad_accum;

    Tokenizer tokenizer;
    if (cfg.sample_every > 0) tokenizer_init(&tokenizer, default_tokenizer_path(cfg).c_str());
    else tokenizer.ok = false;
    std::vector<float> sample_logits_row(mc.padded_vocab_size);

    gpt2_cuda_alloc_state(&model, B, T, cfg.recompute);
    LRSchedule sched = {schedule_kind, cfg.lr, cfg.warmup, num_steps, cfg.final_lr_frac};

    // --- the plan
    size_t n = model.num_parameters;
    double flops_per_token = 6.0 * n + 6.0 * mc.num_layers * mc.channels * T;
    double peak_tflops = device_peak_tflops(ctx.props, ctx.tf32);
    printf("device: %s (sm_%d%d, %d SMs, %.1f GiB), %s, TF32 %s, GELU fusion %s, peak %s TFLOP/s\n",
           ctx.props.name, ctx.props.major, ctx.props.minor, ctx.props.multiProcessorCount,
           ctx.props.totalGlobalMem / 1073741824.0, PRECISION_NAME,
           sizeof(floatX) == 2 ? "n/a" : (ctx.tf32 ? "on" : "off"), ctx.gelu_fusion ? "on" : "off",
           peak_tflops > 0 ? std::to_string((int)peak_tflops).c_str() : "unknown (no MFU)");
    printf("model: L=%d C=%d NH=%d V=%d (Vp %d) maxT=%d, %zu parameters (%s)\n", mc.num_layers,
           mc.channels, mc.num_heads, mc.vocab_size, mc.padded_vocab_size, mc.max_seq_len, n,
           resume_step >= 0 ? "resumed" : cfg.init.c_str());
    printf("batch: B=%d T=%d x %d processes x %d accumulation = %lld tokens/step; %d steps; lr %g %s, warmup %d, final %g, wd %g\n",
           B, T, world, grad_accum, cfg.total_batch, num_steps, cfg.lr, cfg.schedule.c_str(), cfg.warmup,
           cfg.final_lr_frac, cfg.weight_decay);
    gpt2_cuda_print_memory(&model);

    // --- resume the optimizer, data position, RNG and step guard (also after -fk faults)
    int step = 0;
    uint64_t sample_rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)cfg.seed;
    StepGuard guard;
    auto restore_state = [&](int from) {
        std::string path = checkpoint_path(dir, "state", from, rank);
        TrainState s;
        gpt2_cuda_load_state(&model, path, &s);
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
        check_weights_finite(&model, step, dir);
        TrainState s = train_state_make(step, rank, world, n, &data.train, cfg, sample_rng, guard);
        gpt2_cuda_checkpoint_write(dir, step, &model, s);
        checkpointed = step;
        printf("checkpoint: %s\n", checkpoint_path(dir, "model", step).c_str());
    };

    // --- the loop: step counts optimizer steps done; the last iteration only evaluates
    bool just_resumed = resume_step >= 0;
    double train_seconds = 0.0, run_start = now_seconds();
    int timed_steps = 0;
    long long tokens_done = (long long)step * cfg.total_batch;
    float last_val = -1.0f, last_loss = -1.0f;
    double peak_mem_mib = device_memory_used_mib();
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
                gpt2_cuda_forward(&model, tokens, nullptr, 1, ctx, 0.0f);
                gpt2_cuda_logits_row(&model, ctx - 1, sample_logits_row.data());
                return (const float*)sample_logits_row.data();
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
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        double t0 = now_seconds();
        double loss_sum = 0.0;
        for (int micro = 0; micro < grad_accum; micro++) {
            if (!cfg.overfit_batch || (step == 0 && micro == 0)) dataloader_next_batch(&data.train);
            gpt2_cuda_forward(&model, data.train.inputs, data.train.targets, B, T, 1.0f / ((float)B * T * grad_accum));
            gpt2_cuda_backward(&model);
            loss_sum += gpt2_cuda_loss(&model);  // waits for this forward's losses, not for the backward
        }
        float loss = (float)(loss_sum / grad_accum);
        if (fault_inject_fire(&inject, FAULT_NAN_LOSS, step)) loss = NAN;
        if (fault_inject_fire(&inject, FAULT_SPIKE_LOSS, step)) loss *= 100.0f;
        if (fault_inject_fire(&inject, FAULT_NAN_GRAD, step)) poison_first(&model, model.grads);
        float lr = lr_schedule_get(sched, step);
        float norm = gpt2_cuda_grad_norm(&model);
        if (fault_inject_fire(&inject, FAULT_SPIKE_GRAD, step)) norm *= 100.0f;
        // a non-finite or outlier step leaves weights and AdamW moments as they were
        StepVerdict verdict = step_guard_judge(&guard, loss, norm, cfg.skip_loss_z, cfg.skip_grad_z);
        if (verdict == STEP_VERDICT_UPDATE)
            gpt2_cuda_update(&model, lr, 0.9f, 0.95f, 1e-8f, cfg.weight_decay, grad_clip_scale(norm, 1.0f), step + 1);
        if (fault_inject_fire(&inject, FAULT_NAN_WEIGHT, step)) {
            poison_first(&model, model.params);
            if (model.master != nullptr) poison_first(&model, model.master);
        }
        gpt2_cuda_zero_grad(&model);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        double dt = now_seconds() - t0;
        if (step == 0) peak_mem_mib = std::max(peak_mem_mib, device_memory_used_mib());

        tokens_done += cfg.total_batch;
        if (step > 0 || num_steps == 1) { train_seconds += dt; timed_steps++; }
        double tok_s = cfg.total_batch / dt;
        double eta = (timed_steps > 0 ? train_seconds / timed_steps : dt) * (num_steps - step - 1);
        char mfu[32] = "n/a";
        if (peak_tflops > 0) snprintf(mfu, sizeof(mfu), "%.1f%%", 100.0 * tok_s * flops_per_token / (peak_tflops * 1e12));
        printf("step %5d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | MFU %s | ETA %s%s\n",
               step + 1, num_steps, loss, norm, lr, dt * 1000, tok_s, mfu, format_duration(eta).c_str(),
               train_step_note(verdict, guard, cfg).c_str());
        fflush(stdout);
        train_log_step(&logger, step, loss, lr, norm, dt * 1000, tok_s, tokens_done, verdict, guard);
        if (verdict == STEP_VERDICT_UPDATE) last_loss = loss;

        // -fk non-finite steps in a row: back to the last good checkpoint, as a resume would
        // (logs cut back to it, so they tell the history of the weights in hand)
        if (guard.bad_streak >= cfg.fault_streak) {
            int from = train_fault_reload_step(cfg, guard, step, rank, last_reload);
            last_reload = from;
            upload_weights(&model, checkpoint_path(dir, "model", from));
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
        gpt2_cuda_free(&model);
        cuda_context_free(&ctx);
        return status;
    }
    double wall = now_seconds() - run_start;
    printf("done: %d steps, %lld tokens, %s wall", num_steps, tokens_done, format_duration(wall).c_str());
    if (timed_steps > 0) {
        double tok_s = cfg.total_batch * timed_steps / train_seconds;
        printf(", %.1f ms/step, %.0f tok/s", 1000 * train_seconds / timed_steps, tok_s);
        if (peak_tflops > 0) printf(", MFU %.1f%%", 100.0 * tok_s * flops_per_token / (peak_tflops * 1e12));
    }
    printf(", peak device memory %.0f MiB", peak_mem_mib);
    if (last_loss >= 0) printf(", final train loss %.4f", last_loss);
    if (last_val >= 0) printf(", final val loss %.4f", last_val);
    printf("%s%s\n", dir.empty() ? "" : "; logs in ", dir.c_str());

    logger_close(&logger);
    train_data_free(&data);
    if (tokenizer.ok) tokenizer_free(&tokenizer);
    gpt2_cuda_free(&model);
    cuda_context_free(&ctx);
    return 0;
}
