// train_gpt.cu: the GPU trainer. One source, two binaries: train_gpt_fp32, and
// train_gpt_bf16 (-DENABLE_BF16: bf16 weights and activations, fp32 AdamW state and master
// weights). Same flags, files, logs and loop as the CPU trainer train_gpt.cpp; only the
// model lives on the GPU (llmc/gpt2_cuda.cuh). Reading order: main() parses flags, builds
// the model and the data loaders, then runs the loop: validate, sample, checkpoint, one
// training step, log.
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

    // --- resume the optimizer, data position and RNG
    int step = 0;
    uint64_t sample_rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)cfg.seed;
    if (resume_step >= 0) {
        std::string path = checkpoint_path(dir, "state", resume_step, rank);
        TrainState s;
        gpt2_cuda_load_state(&model, path, &s);
        train_state_check(s, path, n, cfg, world);
        dataloader_set_state(&data.train, {s.dl_epoch, s.dl_shard_pos, s.dl_sample_pos});
        sample_rng = s.sample_rng;
        step = (int)s.step;
        printf("resumed from %s at step %d\n", checkpoint_path(dir, "model", step).c_str(), step);
    }
    Logger logger;
    logger_init(&logger, dir, resume_step);

    // --- the loop: step counts optimizer steps done; the last iteration only evaluates
    bool just_resumed = resume_step >= 0;
    double train_seconds = 0.0, run_start = now_seconds();
    int timed_steps = 0;
    long long tokens_done = (long long)step * cfg.total_batch;
    float last_val = -1.0f, last_loss = -1.0f;
    double peak_mem_mib = device_memory_used_mib();
    for (; step <= num_steps; step++) {
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
            TrainState s = train_state_make(step, rank, world, n, &data.train, cfg, sample_rng);
            gpt2_cuda_checkpoint_write(dir, step, &model, s);
            printf("checkpoint: %s\n", checkpoint_path(dir, "model", step).c_str());
            int old = step - cfg.checkpoints_keep * cfg.checkpoint_every;
            if (cfg.checkpoints_keep > 0 && old > 0 && (cfg.checkpoint_major == 0 || old % cfg.checkpoint_major != 0))
                checkpoint_delete(dir, old, rank);
        }
        just_resumed = false;
        if (last) break;

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
        float lr = lr_schedule_get(sched, step);
        float norm = gpt2_cuda_grad_norm(&model);
        gpt2_cuda_update(&model, lr, 0.9f, 0.95f, 1e-8f, cfg.weight_decay, grad_clip_scale(norm, 1.0f), step + 1);
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
        printf("step %5d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | MFU %s | ETA %s\n",
               step + 1, num_steps, loss, norm, lr, dt * 1000, tok_s, mfu, format_duration(eta).c_str());
        fflush(stdout);
        logger_log_train(&logger, step, loss, lr, norm, dt * 1000, tok_s, tokens_done);
        last_loss = loss;
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
