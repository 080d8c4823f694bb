// train_gpt.cpp: the CPU reference trainer (fp32, OpenMP). Same flags and files as the GPU
// trainer and llm.c. Reading order: main() parses flags, builds the model and the data
// loaders, then runs the loop: validate, sample, checkpoint, one training step, log.
#include <sys/stat.h>
#include <chrono>
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
#include "llmc/sampler.h"     // defines: sample_logits, rng_next_f32
#include "llmc/tokenizer.h"   // defines: Tokenizer, tokenizer_init, tokenizer_decode

static double now_seconds() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

static void mkdir_p(const std::string& dir) {
    std::string partial;
    for (size_t i = 0; i <= dir.size(); i++) {
        if (i == dir.size() || dir[i] == '/') {
            if (!partial.empty() && mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
                fail("%s: cannot create directory (%s)", partial.c_str(), strerror(errno));
        }
        if (i < dir.size()) partial += dir[i];
    }
}

static std::string format_duration(double s) {
    char buf[32];
    long long t = (long long)(s + 0.5);
    if (t >= 3600) snprintf(buf, sizeof(buf), "%lldh%02lldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, sizeof(buf), "%lldm%02llds", t / 60, t % 60);
    else snprintf(buf, sizeof(buf), "%llds", t);
    return buf;
}

// Flags that parse but whose feature belongs to a later part of the project.
static void reject_unfinished_features(const TrainConfig& c) {
    if (c.num_processes != 1 || c.process_rank != 0)
        fail("-pn/-pr: multi-process training is not available yet in train_gpt_cpu (it arrives with the distributed trainer); use -pn 1");
    if (c.zero_stage != 0)
        fail("-z %d: ZeRO needs several processes, which train_gpt_cpu does not run yet; use -z 0", c.zero_stage);
    if (c.skip_loss_z != 0.0f || c.skip_grad_z != 0.0f)
        fail("-sl/-sg: outlier skipping is not available yet; use 0");
    if (c.hellaswag != 0) fail("-h 1: HellaSwag evaluation is not available yet; use -h 0");
}

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

// Generates n tokens after an EOT, one row, printing each as it comes. The context slides
// once it reaches T.
static void sample_text(GPT2* model, const Tokenizer* tok, const TrainConfig& cfg, uint64_t* rng) {
    int V = model->config.vocab_size, Vp = model->config.padded_vocab_size, T = model->T;
    std::vector<int> tokens(cfg.gen_tokens + 1, tok->ok ? (int)tok->eot_token : V - 1);
    printf("generating:\n---\n");
    for (int t = 1; t <= cfg.gen_tokens; t++) {
        int ctx = t < T ? t : T;
        gpt2_forward(model, tokens.data() + t - ctx, nullptr, 1, ctx);
        const float* logits = model->acts.logits + (size_t)(ctx - 1) * Vp;
        int next = sample_logits(logits, V, cfg.temperature, cfg.top_k, rng_next_f32(rng));
        tokens[t] = next;
        if (tok->ok) {
            for (unsigned char ch : tokenizer_decode(tok, next))
                if (ch >= 32 || ch == '\n' || ch == '\t') putchar(ch);
        } else {
            printf("%d ", next);
        }
        fflush(stdout);
    }
    printf("\n---\n");
}

int main(int argc, char** argv) {
    TrainConfig cfg;
    args_parse(argc, argv, &cfg);
    reject_unfinished_features(cfg);
    LRScheduleKind schedule_kind;
    if (!lr_schedule_parse(cfg.schedule.c_str(), &schedule_kind))
        fail("flag -k: unknown schedule '%s' (cosine | linear | constant | wsd)", cfg.schedule.c_str());
    if (cfg.resume && cfg.output_dir.empty()) fail("flag -y 1 needs an output directory (-o) to resume from");
    const std::string& dir = cfg.output_dir;
    const int rank = 0, world = 1;

    // --- where training starts: a checkpoint in -o (resume), a model file, or random init
    int resume_step = -1;
    if (!dir.empty()) {
        mkdir_p(dir);
        if (cfg.resume) {
            resume_step = checkpoint_find_latest(dir, rank);
            if (resume_step < 0) printf("no complete checkpoint in %s: starting from scratch\n", dir.c_str());
        } else {
            std::vector<int> done = checkpoint_done_steps(dir);
            if (!done.empty())
                fail("%s already holds checkpoints (newest: step %d): resume with -y 1, or choose another -o",
                     dir.c_str(), done[0]);
        }
    }
    GPT2 model;
    GPT2Config desc_cfg;
    if (resume_step >= 0) {
        gpt2_load_checkpoint(&model, checkpoint_path(dir, "model", resume_step).c_str());
    } else if (gpt2_config_from_descriptor(cfg.init.c_str(), &desc_cfg)) {
        gpt2_init(&model, desc_cfg);
        gpt2_init_random(&model, (uint32_t)cfg.seed);
    } else {
        if (access(cfg.init.c_str(), F_OK) != 0 && (cfg.init[0] == 'd' || cfg.init.find(':') != std::string::npos))
            fail("flag -e: '%s' is neither a model descriptor (d6, d12, gpt2:d24, gpt3:c768, gpt2:l4c256) nor a file",
                 cfg.init.c_str());
        gpt2_load_checkpoint(&model, cfg.init.c_str());
    }
    const GPT2Config& mc = model.config;
    if (cfg.T > mc.max_seq_len)
        fail("flag -t: %d exceeds the model's maximum sequence length %d", cfg.T, mc.max_seq_len);
    if (cfg.overfit_batch) cfg.train_pattern = cfg.val_pattern;  // as llm.c: val is small

    // --- batch arithmetic
    int B = cfg.B, T = cfg.T;
    long long tokens_per_micro = (long long)B * T * world;
    if (cfg.total_batch == -1) cfg.total_batch = tokens_per_micro;
    if (cfg.total_batch <= 0 || cfg.total_batch % tokens_per_micro != 0)
        fail("flag -d: %lld is not a positive multiple of B*T*processes = %lld", cfg.total_batch, tokens_per_micro);
    int grad_accum = (int)(cfg.total_batch / tokens_per_micro);

    // --- data
    DataLoader train_loader, val_loader;
    dataloader_init(&train_loader, cfg.train_pattern.c_str(), B, T, rank, world, cfg.shuffle,
                    (uint64_t)cfg.seed, mc.vocab_size);
    dataloader_print_summary(&train_loader, "train");
    bool do_val = cfg.val_every > 0;
    int val_batches = 0;
    if (do_val) {
        dataloader_init(&val_loader, cfg.val_pattern.c_str(), B, T, rank, world, 0, 0, mc.vocab_size);
        dataloader_print_summary(&val_loader, "val");
        long long avail = (long long)val_loader.num_samples_per_epoch;
        val_batches = cfg.val_batches < 0 || cfg.val_batches > avail ? (int)avail : cfg.val_batches;
    }
    int num_steps = cfg.max_steps;
    if (num_steps < 0) num_steps = (int)(train_loader.num_tokens / cfg.total_batch);
    if (num_steps == 0) fail("%s: %zu tokens is less than one step of -d %lld tokens", cfg.train_pattern.c_str(),
                             train_loader.num_tokens, cfg.total_batch);

    Tokenizer tokenizer;
    std::string tok_path = cfg.tokenizer;
    if (tok_path.empty()) tok_path = access("gpt2_tokenizer.bin", F_OK) == 0 ? "gpt2_tokenizer.bin" : "data/gpt2_tokenizer.bin";
    if (cfg.sample_every > 0) tokenizer_init(&tokenizer, tok_path.c_str());
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

    // --- resume the optimizer, data position and RNG
    int step = 0;
    uint64_t sample_rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)cfg.seed;
    if (resume_step >= 0) {
        std::string path = checkpoint_path(dir, "state", resume_step, rank);
        TrainState s;
        std::string err = state_read(path.c_str(), &s, model.m, model.v);
        if (!err.empty()) fail("%s: %s", path.c_str(), err.c_str());
        if (s.num_parameters != n) fail("%s: state is for %llu parameters, the model has %zu", path.c_str(),
                                        (unsigned long long)s.num_parameters, n);
        if (s.B != (uint64_t)B || s.T != (uint64_t)T || s.total_batch != (uint64_t)cfg.total_batch ||
            s.world != (uint64_t)world || s.shuffle != (uint64_t)cfg.shuffle || s.seed != (uint64_t)cfg.seed)
            fail("%s: written by a run with -b %llu -t %llu -d %llu -sh %llu -sd %llu on %llu processes; resume with the same",
                 path.c_str(), (unsigned long long)s.B, (unsigned long long)s.T, (unsigned long long)s.total_batch,
                 (unsigned long long)s.shuffle, (unsigned long long)s.seed, (unsigned long long)s.world);
        dataloader_set_state(&train_loader, {s.dl_epoch, s.dl_shard_pos, s.dl_sample_pos});
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
    for (; step <= num_steps; step++) {
        bool last = step == num_steps;
        if (do_val && (step % cfg.val_every == 0 || last)) {
            last_val = validate(&model, &val_loader, val_batches);
            printf("val loss %f\n", last_val);
            logger_log_val(&logger, step, last_val);
        }
        if (cfg.sample_every > 0 && ((step > 0 && step % cfg.sample_every == 0) || last))
            sample_text(&model, &tokenizer, cfg, &sample_rng);
        if (cfg.checkpoint_every > 0 && !dir.empty() && !just_resumed &&
            ((step > 0 && step % cfg.checkpoint_every == 0) || last)) {
            DataLoaderState ds = dataloader_get_state(&train_loader);
            TrainState s = {(uint64_t)step, (uint64_t)rank, (uint64_t)world, n, ds.epoch, ds.shard_pos,
                            ds.sample_pos, (uint64_t)cfg.seed, (uint64_t)cfg.shuffle, (uint64_t)B,
                            (uint64_t)T, (uint64_t)cfg.total_batch, sample_rng};
            checkpoint_write(dir, step, &model, s);
            printf("checkpoint: %s\n", checkpoint_path(dir, "model", step).c_str());
            int old = step - cfg.checkpoints_keep * cfg.checkpoint_every;
            if (cfg.checkpoints_keep > 0 && old > 0 && (cfg.checkpoint_major == 0 || old % cfg.checkpoint_major != 0))
                checkpoint_delete(dir, old, rank);
        }
        just_resumed = false;
        if (last) break;

        // one optimizer step over grad_accum micro-batches
        double t0 = now_seconds();
        double loss_sum = 0.0;
        for (int micro = 0; micro < grad_accum; micro++) {
            if (!cfg.overfit_batch || (step == 0 && micro == 0)) dataloader_next_batch(&train_loader);
            gpt2_forward(&model, train_loader.inputs, train_loader.targets, B, T);
            gpt2_backward(&model, train_loader.inputs, train_loader.targets, 1.0f / ((float)B * T * grad_accum));
            loss_sum += model.mean_loss;
        }
        float loss = (float)(loss_sum / grad_accum);
        float lr = lr_schedule_get(sched, step);
        float norm = gpt2_grad_norm(&model);
        gpt2_update(&model, lr, 0.9f, 0.95f, 1e-8f, cfg.weight_decay, grad_clip_scale(norm, 1.0f), step + 1);
        gpt2_zero_grad(&model);
        double dt = now_seconds() - t0;

        tokens_done += cfg.total_batch;
        if (step > 0 || num_steps == 1) { train_seconds += dt; timed_steps++; }
        double tok_s = cfg.total_batch / dt;
        double eta = (timed_steps > 0 ? train_seconds / timed_steps : dt) * (num_steps - step - 1);
        printf("step %5d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | %.1f GFLOP/s | ETA %s\n",
               step + 1, num_steps, loss, norm, lr, dt * 1000, tok_s, tok_s * flops_per_token / 1e9,
               format_duration(eta).c_str());
        fflush(stdout);
        logger_log_train(&logger, step, loss, lr, norm, dt * 1000, tok_s, tokens_done);
        last_loss = loss;
    }
    double wall = now_seconds() - run_start;
    printf("done: %d steps, %lld tokens, %s wall", num_steps, tokens_done, format_duration(wall).c_str());
    if (timed_steps > 0) printf(", %.1f ms/step, %.0f tok/s", 1000 * train_seconds / timed_steps,
                                cfg.total_batch * timed_steps / train_seconds);
    if (last_loss >= 0) printf(", final train loss %.4f", last_loss);
    if (last_val >= 0) printf(", final val loss %.4f", last_val);
    printf("%s%s\n", dir.empty() ? "" : "; logs in ", dir.c_str());

    logger_close(&logger);
    dataloader_free(&train_loader);
    if (do_val) dataloader_free(&val_loader);
    if (tokenizer.ok) tokenizer_free(&tokenizer);
    gpt2_free(&model);
    return 0;
}
