// train_common.h: the parts of a trainer's main() that do not depend on where the model
// runs, shared by train_gpt.cpp (CPU) and train_gpt.cu (GPU) so the two cannot drift:
// where training starts (resume, file, random init), the batch arithmetic and the data
// loaders, the plan's shared lines, the resume-state checks, and small helpers (clock,
// directories, durations). The training loop itself is llmc/train_loop.h.
// defines: now_seconds, mkdir_p, format_duration, train_check_flags,
//          train_prepare_output_dir, train_model_path, train_model_config, train_load_model, train_load_model_ranges,
//          train_load_model_zero3, train_keep_zero3, TrainData, train_data_init,
//          train_data_free, train_print_plan, train_state_make,
//          train_state_check, train_state_restore_guard, default_tokenizer_path, train_tokenizer_init,
//          train_zero_layout, sample_text,
//          train_check_weights_finite, train_log_step, train_log_event, train_log_summary, train_step_note,
//          train_preempt_requested, train_preempt_exit, train_fault_reload_step
#pragma once
#include <sys/stat.h>
#include <unistd.h>
#include <chrono>
#include <string>
#include <vector>

#include "utils.h"       // defines: fail, CHECK
#include "args.h"        // defines: TrainConfig, args_check_fp8_recipe, args_check_matmul_algo
#include "families.h"    // defines: ModelBase, ModelConfig, model_config_from_descriptor, model_new, GPT2, ...
#include "checkpoint.h"  // defines: model_load_checkpoint, checkpoint_find_latest, TrainState, ...
#include "dataloader.h"  // defines: DataLoader, dataloader_init, dataloader_get_state, ...
#include "sampler.h"     // defines: sample_logits, rng_next_f32
#include "tokenizer.h"   // defines: Tokenizer, tokenizer_decode
#include "logger.h"      // defines: Logger, logger_log_train, logger_flush
#include "faults.h"      // defines: StepGuard, StepVerdict, preempt_signal, weights_find_nonfinite, ...
#include "comm.h"        // defines: Comm, comm_broadcast, comm_sum
#include "zero.h"        // defines: ZeroLayout, zero_layout

inline double now_seconds() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

inline void mkdir_p(const std::string& dir) {
    std::string partial;
    for (size_t i = 0; i <= dir.size(); i++) {
        if (i == dir.size() || dir[i] == '/') {
            if (!partial.empty() && mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
                fail("%s: cannot create directory (%s)", partial.c_str(), strerror(errno));
        }
        if (i < dir.size()) partial += dir[i];
    }
}

inline std::string format_duration(double s) {
    char buf[32];
    long long t = (long long)(s + 0.5);
    if (t >= 3600) snprintf(buf, sizeof(buf), "%lldh%02lldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, sizeof(buf), "%lldm%02llds", t / 60, t % 60);
    else snprintf(buf, sizeof(buf), "%llds", t);
    return buf;
}

// Flags that parse but whose feature belongs to a later part of the project. prog names
// the binary in the message ("train_gpt_cpu", "train_gpt_bf16", ...).
// Flags that are valid one by one but not together.
inline void train_check_flags(const TrainConfig& c) {
    if (c.target_val_loss > 0 && c.val_every == 0)
        fail("--target-val-loss needs validation to watch: give -v N (validate every N steps)");
    // every trainer takes the flag (one command line for every precision), only train_gpt_fp8 uses it
    args_check_fp8_recipe(c.fp8_recipe);
    // every trainer takes it too; the CPU trainer has no cuBLASLt and ignores it
    args_check_matmul_algo(c.matmul_algo);
}

// Creates -o and decides where training starts: returns the step of the newest complete
// checkpoint to resume from (-y 1), or -1 for a fresh start. A fresh start into a
// directory that already holds checkpoints is an error (it would mix two runs). Rank 0
// verifies the checkpoints and tells the others which one (-o is on a shared filesystem).
inline int train_prepare_output_dir(const TrainConfig& cfg, Comm* comm) {
    const std::string& dir = cfg.output_dir;
    if (cfg.resume && dir.empty()) fail("flag -y 1 needs an output directory (-o) to resume from");
    if (dir.empty()) return -1;
    mkdir_p(dir);
    if (cfg.resume) {
        int step = comm->rank == 0 ? checkpoint_find_latest(dir) : 0;
        comm_broadcast(comm, &step, sizeof(step), 0);
        if (step < 0) printf("no complete checkpoint in %s: starting from scratch\n", dir.c_str());
        return step;
    }
    std::vector<int> done = checkpoint_done_steps(dir);
    if (!done.empty())
        fail("%s already holds checkpoints (newest: step %d): resume with -y 1, or choose another -o",
             dir.c_str(), done[0]);
    return -1;
}

// The model file training starts from: the resumed checkpoint's, or -e's file.
inline std::string train_model_path(const TrainConfig& cfg, int resume_step) {
    if (resume_step >= 0) return checkpoint_path(cfg.output_dir, "model", resume_step);
    if (access(cfg.init.c_str(), F_OK) != 0 && (cfg.init[0] == 'd' || cfg.init.find(':') != std::string::npos))
        fail("flag -e: '%s' is neither a model descriptor (d6, d12, gpt2:d24, gpt3:c768, gpt2:l4c256, "
             "llama3:l4c256h8kv2f704, llama3.1:8b) nor a file",
             cfg.init.c_str());
    return cfg.init;
}

// The configuration training starts from, read without allocating the model: -e's descriptor,
// or the header of the model file.
inline ModelConfig train_model_config(const TrainConfig& cfg, int resume_step) {
    ModelConfig c;
    if (resume_step < 0 && model_config_from_descriptor(cfg.init.c_str(), &c)) return c;
    std::string path = train_model_path(cfg, resume_step);
    int version = 0;
    std::string err = model_file_check(path.c_str(), &c, &version);
    if (!err.empty()) fail("%s: %s", path.c_str(), err.c_str());
    return c;
}

// The model on the host, in fp32, of any family: the resumed checkpoint, random init from a
// descriptor (-e d12, -e llama3:l4c256h8kv2f704), or a model file (-e path). The GPU trainer
// uploads it from here, so both trainers start from bit-identical weights.
inline ModelBase* train_load_model(const TrainConfig& cfg, int resume_step) {
    ModelConfig desc_cfg;
    ModelBase* model = nullptr;
    if (resume_step < 0 && model_config_from_descriptor(cfg.init.c_str(), &desc_cfg)) {
        model = model_new(desc_cfg);
        model_init_random(model, (uint32_t)cfg.seed);
    } else {
        model = model_load_checkpoint(train_model_path(cfg, resume_step).c_str());
    }
    if (cfg.T > model->max_seq_len)
        fail("flag -t: %d exceeds the model's maximum sequence length %d", cfg.T, model->max_seq_len);
    return model;
}

// A ZeRO 3 rank's part of that model (llmc/grad_sync.h): the table (no parameter buffer) and
// the values of each range [begin[i], end[i]) of the flat vector in dst[i] (zeroed beforehand:
// the random init leaves biases and padding 0), read from the file or drawn from the same
// random init, so no rank ever holds the whole vector.
inline ModelBase* train_load_model_ranges(const TrainConfig& cfg, int resume_step, int count, const size_t* begin,
                                          const size_t* end, float* const* dst) {
    ModelConfig desc_cfg;
    ModelBase* model = nullptr;
    if (resume_step < 0 && model_config_from_descriptor(cfg.init.c_str(), &desc_cfg)) {
        model = model_new(desc_cfg, false);
        model_init_values(model, (uint32_t)cfg.seed, [&](size_t b, const float* v, size_t len) {
            for (int i = 0; i < count; i++) {
                size_t lo = std::max(b, begin[i]), hi = std::min(b + len, end[i]);
                if (lo < hi) memcpy(dst[i] + (lo - begin[i]), v + (lo - b), (hi - lo) * sizeof(float));
            }
        });
    } else {
        model = model_load_checkpoint(train_model_path(cfg, resume_step).c_str(), false, count, begin, end, dst);
    }
    if (cfg.T > model->max_seq_len)
        fail("flag -t: %d exceeds the model's maximum sequence length %d", cfg.T, model->max_seq_len);
    return model;
}

// ZeRO 3: the model's table, its front and tail rows in its (fp32) parameter buffer, one after
// the other, and this rank's slice of the vector in *shard (z.shard floats, zero padded), as
// llmc/grad_sync.h and llmc/cuda/grad_sync_gpu.cuh keep them; the rest is never held here, not
// even while loading.
inline ModelBase* train_load_model_zero3(const TrainConfig& cfg, int resume_step, const ModelConfig& mc,
                                         const ZeroLayout& z, float** shard) {
    ParamTensor table[MAX_PARAM_TENSORS];
    ParamLayout t;
    const size_t n = model_config_table(mc, table, &t), front = t.front_len(), tail = t.tail_begin();
    float* rest = xcalloc_floats(front + (n - tail));
    *shard = xcalloc_floats(z.shard);
    const size_t begin[3] = {0, tail, z.own_begin}, end[3] = {front, n, z.own_end};
    float* const dst[3] = {rest, rest + front, *shard};
    ModelBase* model = train_load_model_ranges(cfg, resume_step, 3, begin, end, dst);
    model->params = rest;
    return model;
}

// ZeRO 3 for a model already whole in memory (-tp, -pp: this rank's part): what
// train_load_model_zero3 leaves, from it. Its parameter buffer becomes the front and tail rows,
// one after the other; returns this rank's slice (z.shard floats, zero padded).
inline float* train_keep_zero3(ModelBase* model, const ZeroLayout& z) {
    const ParamLayout t = model->layout();
    const size_t n = model->num_parameters, front = t.front_len(), tail = t.tail_begin();
    float* shard = xcalloc_floats(z.shard);
    memcpy(shard, model->params + z.own_begin, (z.own_end - z.own_begin) * sizeof(float));
    float* rest = xcalloc_floats(front + n - tail);
    memcpy(rest, model->params, front * sizeof(float));
    memcpy(rest + front, model->params + tail, (n - tail) * sizeof(float));
    free(model->params);
    model->params = rest;
    return shard;
}

// The batch arithmetic and the data loaders of a run.
struct TrainData {
    DataLoader train, val;
    bool do_val = false;
    int val_batches = 0;    // -m, capped at what the val split holds
    int num_steps = 0;      // -x, or one epoch of the train split
    int grad_accum = 1;     // micro-steps per optimizer step
};

// Fills in cfg->total_batch when it is -1 and cfg->train_pattern for -a 1 (as llm.c: train
// on the small val split). Fails on a total batch that is not a multiple of B*T*world.
inline void train_data_init(TrainData* d, TrainConfig* cfg, int vocab_size, int rank, int world) {
    if (cfg->overfit_batch) cfg->train_pattern = cfg->val_pattern;
    int B = cfg->B, T = cfg->T;
    long long tokens_per_micro = (long long)B * T * world;
    if (cfg->total_batch == -1) cfg->total_batch = tokens_per_micro;
    if (cfg->total_batch <= 0 || cfg->total_batch % tokens_per_micro != 0)
        fail("flag -d: %lld is not a positive multiple of B*T*processes = %lld", cfg->total_batch, tokens_per_micro);
    d->grad_accum = (int)(cfg->total_batch / tokens_per_micro);

    dataloader_init(&d->train, cfg->train_pattern.c_str(), B, T, rank, world, cfg->shuffle,
                    (uint64_t)cfg->seed, vocab_size);
    dataloader_print_summary(&d->train, "train");
    d->do_val = cfg->val_every > 0;
    if (d->do_val) {
        dataloader_init(&d->val, cfg->val_pattern.c_str(), B, T, rank, world, 0, 0, vocab_size);
        dataloader_print_summary(&d->val, "val");
        long long avail = (long long)d->val.num_samples_per_epoch;
        d->val_batches = cfg->val_batches < 0 || cfg->val_batches > avail ? (int)avail : cfg->val_batches;
    }
    d->num_steps = cfg->max_steps;
    if (d->num_steps >= 0) return;  // -x 0: evaluate the model (val loss, -h, a sample), no training
    d->num_steps = (int)(d->train.num_tokens / cfg->total_batch);
    if (d->num_steps == 0)
        fail("%s: %zu tokens is less than one step of -d %lld tokens", cfg->train_pattern.c_str(),
             d->train.num_tokens, cfg->total_batch);
}

inline void train_data_free(TrainData* d) {
    dataloader_free(&d->train);
    if (d->do_val) dataloader_free(&d->val);
}

// The plan's model and batch lines, the same in both trainers (each adds its memory, device).
// shape: the model's dimensions (model_describe).
inline void train_print_plan(const std::string& shape, size_t num_parameters, const TrainConfig& cfg,
                             const TrainData& d, int resume_step, int world) {
    printf("model: %s, %zu parameters (%s)\n", shape.c_str(), num_parameters,
           resume_step >= 0 ? "resumed" : cfg.init.c_str());
    printf("batch: B=%d T=%d x %d processes x %d accumulation = %lld tokens/step; %d steps; lr %g %s, warmup %d, final %g, wd %g\n",
           cfg.B, cfg.T, world, d.grad_accum, cfg.total_batch, d.num_steps, cfg.lr, cfg.schedule.c_str(), cfg.warmup,
           cfg.final_lr_frac, cfg.weight_decay);
}

inline std::string default_tokenizer_path(const TrainConfig& cfg) {
    if (!cfg.tokenizer.empty()) return cfg.tokenizer;
    return access("gpt2_tokenizer.bin", F_OK) == 0 ? "gpt2_tokenizer.bin" : "data/gpt2_tokenizer.bin";
}

// The tokenizer for samples (-s > 0); tok->ok is false when no sampling is asked for.
inline void train_tokenizer_init(const TrainConfig& cfg, Tokenizer* tok) {
    if (cfg.sample_every > 0) tokenizer_init(tok, default_tokenizer_path(cfg).c_str());
    else tok->ok = false;
}

// This rank's ZeRO layout (llmc/zero.h). One process runs ZeRO 0 whatever -z says, with a note.
inline ZeroLayout train_zero_layout(const TrainConfig& cfg, size_t num_parameters, int rank, int world) {
    int stage = world > 1 ? cfg.zero_stage : 0;
    if (cfg.zero_stage != stage) printf("note: -z %d needs several processes; one process runs ZeRO 0\n", cfg.zero_stage);
    return zero_layout(num_parameters, stage, rank, world);
}

// What a checkpoint at `step` records besides the weights and the optimizer moments.
inline TrainState train_state_make(int step, int rank, int world, size_t num_parameters, const DataLoader* train,
                                   const TrainConfig& cfg, uint64_t sample_rng, const StepGuard& guard) {
    DataLoaderState ds = dataloader_get_state(train);
    TrainState s = {(uint64_t)step, (uint64_t)rank, (uint64_t)world, num_parameters, ds.epoch, ds.shard_pos,
                    ds.sample_pos, (uint64_t)cfg.seed, (uint64_t)cfg.shuffle, (uint64_t)cfg.B,
                    (uint64_t)cfg.T, (uint64_t)cfg.total_batch, sample_rng};
    s.step_guard = step_guard_save(guard);
    return s;
}

// The outlier windows and fault counters from a state file. A file written before they were
// saved starts them empty: the detectors then need 128 steps before they can skip again.
inline void train_state_restore_guard(StepGuard* guard, const TrainState& s, const std::string& path,
                                      const TrainConfig& cfg) {
    *guard = StepGuard();
    if (s.step_guard.empty()) {
        if (cfg.skip_loss_z != 0.0f || cfg.skip_grad_z != 0.0f)
            printf("note: %s has no outlier windows (an older file); -sl/-sg start from an empty window\n",
                   path.c_str());
        return;
    }
    std::string err = step_guard_load(guard, s.step_guard);
    if (!err.empty()) fail("%s: %s", path.c_str(), err.c_str());
}

// A state file must come from a run with the same model size, batch and data order, or the
// resume would not continue the same run. The number of processes may change (the AdamW
// state is re-sharded) as long as processes x -b stays the same: the data loader's samples
// are world*B*T tokens wide, so its position then means the same tokens.
inline void train_state_check(const TrainState& s, const std::string& path, size_t num_parameters,
                              const TrainConfig& cfg, int world) {
    if (s.num_parameters != num_parameters)
        fail("%s: state is for %llu parameters, the model has %zu", path.c_str(),
             (unsigned long long)s.num_parameters, num_parameters);
    const uint64_t data_world = s.data_world != 0 ? s.data_world : s.world;  // the processes that read data
    if (s.T != (uint64_t)cfg.T || s.total_batch != (uint64_t)cfg.total_batch || s.shuffle != (uint64_t)cfg.shuffle ||
        s.seed != (uint64_t)cfg.seed || s.B * data_world != (uint64_t)cfg.B * world)
        fail("%s: written by a run with -b %llu -t %llu -d %llu -sh %llu -sd %llu on %llu processes; resume with the "
             "same -t -d -sh -sd, and processes x -b = %llu",
             path.c_str(), (unsigned long long)s.B, (unsigned long long)s.T, (unsigned long long)s.total_batch,
             (unsigned long long)s.shuffle, (unsigned long long)s.seed, (unsigned long long)data_world,
             (unsigned long long)(s.B * data_world));
    if (data_world != (uint64_t)world)
        printf("resuming on %d data-parallel processes a run saved on %llu: AdamW state re-sharded, -b %d\n", world,
               (unsigned long long)data_world, cfg.B);
}

// Generates cfg.gen_tokens tokens after an EOT in one row, printing each as it comes; the
// context slides once it reaches T. logits_of(tokens, ctx) runs the model on ctx tokens and
// returns the logits (Vp floats) of the last one. A tokenizer for another vocabulary size
// than the model's is not used: ids are printed, and the row starts with V-1 (the EOT of
// test/make_test_data.py's shards).
template <typename LogitsFn>
inline void sample_text(const TrainConfig& cfg, const Tokenizer* tok, int V, int T, uint64_t* rng,
                        LogitsFn logits_of) {
    bool decode = tok->ok && (int)tok->vocab_size == V;
    std::vector<int> tokens(cfg.gen_tokens + 1, decode ? (int)tok->eot_token : V - 1);
    printf("generating:\n---\n");
    for (int t = 1; t <= cfg.gen_tokens; t++) {
        int ctx = t < T ? t : T;
        const float* logits = logits_of(tokens.data() + t - ctx, ctx);
        int next = sample_logits(logits, V, cfg.temperature, cfg.top_k, rng_next_f32(rng));
        tokens[t] = next;
        if (decode) {
            for (unsigned char ch : tokenizer_decode(tok, next))
                if (ch >= 32 || ch == '\n' || ch == '\t') putchar(ch);
        } else {
            printf("%d ", next);
        }
        fflush(stdout);
    }
    printf("\n---\n");
}

// ---------------------------------------------------------------------------------------
// Faults and preemption (llmc/faults.h), the parts that print, log and decide.

// Refuses (error, exit 1) before a single file is touched when a weight is NaN or inf, so
// the previous checkpoint stays the newest complete one. params: host fp32, table layout.
inline void train_check_weights_finite(const float* params, size_t n, const ParamTensor* tensors, int count,
                                       int step, const std::string& dir, const char* what = "weight") {
    size_t index = 0;
    const char* tensor = weights_find_nonfinite(params, n, tensors, count, &index);
    if (tensor == nullptr) return;
    std::vector<int> done = checkpoint_done_steps(dir);
    std::string previous = done.empty() ? "there is no previous checkpoint"
                                        : "the previous checkpoint (step " + std::to_string(done[0]) + ") is intact";
    fail("refusing to write the checkpoint at step %d: %s %s[%zu] is not finite; %s", step, what, tensor, index,
         previous.c_str());
}

// JSON has no NaN or inf: such values are written as null.
inline std::string json_number(double x) {
    if (!std::isfinite(x)) return "null";
    char buf[32];
    snprintf(buf, sizeof(buf), "%.7g", x);
    return buf;
}

// main.log and metrics.jsonl for one training step. An applied update logs as before; a
// skipped one keeps llm.c's main.log line (with "nan" where a value is not finite, so
// llm.c's parsers still read it) and adds "skipped" (nonfinite | loss_outlier |
// grad_outlier) and the z-scores to its metrics.jsonl object.
inline void train_log_step(Logger* lg, int step, float loss, float lr, float norm, double ms, double tokens_per_s,
                           long long tokens, StepVerdict verdict, const StepGuard& guard, const std::string& extra) {
    if (verdict == STEP_VERDICT_UPDATE) {
        logger_log_train(lg, step, loss, lr, norm, ms, tokens_per_s, tokens, extra);
        return;
    }
    if (lg->main_log == nullptr) return;
    // one spelling of NaN: glibc prints a NaN with its sign bit set as "-nan"
    float l = std::isnan(loss) ? NAN : loss, g = std::isnan(norm) ? NAN : norm;
    fprintf(lg->main_log, "s:%d trl:%f lr:%f norm:%f\n", step, l, lr, g);
    fprintf(lg->metrics,
            "{\"step\":%d,\"kind\":\"train\",\"loss\":%s,\"lr\":%.7g,\"grad_norm\":%s,\"ms\":%.3f,"
            "\"tokens_per_s\":%.1f,\"tokens\":%lld,\"skipped\":\"%s\",\"zloss\":%s,\"zgrad\":%s%s}\n",
            step, json_number(loss).c_str(), lr, json_number(norm).c_str(), ms, tokens_per_s, tokens,
            step_verdict_name(verdict), json_number(guard.zloss).c_str(), json_number(guard.zgrad).c_str(), extra.c_str());
    logger_flush(lg);
}

// An event (preemption) in metrics.jsonl only: main.log keeps llm.c's line types. On resume
// it is cut back with the lines of its step, like everything after the checkpoint.
inline void train_log_event(Logger* lg, int step, const char* event, const char* detail) {
    if (lg->metrics == nullptr) return;
    fprintf(lg->metrics, "{\"step\":%d,\"kind\":\"event\",\"event\":\"%s\",\"detail\":\"%s\"}\n", step, event,
            detail);
    logger_flush(lg);
}

// The end of a finished run in metrics.jsonl: tokens, wall time, average tokens/s (-1: none
// timed), best and final val loss (-1: none), energy in joules (-1: not measured).
inline void train_log_summary(Logger* lg, int step, long long tokens, double wall, double tok_s, float best_val,
                              float final_val, double joules) {
    if (lg->metrics == nullptr) return;
    auto opt = [](double x) { return x < 0 ? std::string("null") : json_number(x); };
    fprintf(lg->metrics,
            "{\"step\":%d,\"kind\":\"summary\",\"tokens\":%lld,\"wall_s\":%.3f,\"tokens_per_s\":%s,"
            "\"best_val_loss\":%s,\"final_val_loss\":%s,\"energy_j\":%s,\"kwh\":%s}\n",
            step, tokens, wall, opt(tok_s).c_str(), opt(best_val).c_str(), opt(final_val).c_str(), opt(joules).c_str(),
            opt(joules < 0 ? -1.0 : joules / 3.6e6).c_str());
    logger_flush(lg);
}

// What follows the step line on stdout when the update was skipped ("" when it was not).
inline std::string train_step_note(StepVerdict verdict, const StepGuard& g, const TrainConfig& cfg) {
    char buf[160];
    switch (verdict) {
        case STEP_VERDICT_NONFINITE:
            snprintf(buf, sizeof(buf), " | SKIPPED: non-finite loss or grad norm (%lld in a row, -fk %d)",
                     g.bad_streak, cfg.fault_streak);
            break;
        case STEP_VERDICT_LOSS_OUTLIER:
            snprintf(buf, sizeof(buf), " | SKIPPED: loss z-score %.2f > -sl %g", g.zloss, cfg.skip_loss_z);
            break;
        case STEP_VERDICT_GRAD_OUTLIER:
            snprintf(buf, sizeof(buf), " | SKIPPED: grad norm z-score %.2f > -sg %g", g.zgrad, cfg.skip_grad_z);
            break;
        default: buf[0] = '\0';
    }
    return buf;
}

// True when SIGTERM, SIGINT or SIGUSR1 asked the run to stop. The loop asks at the top of
// each iteration and again just before the training step, so a stop waits for at most the
// step in progress.
// With several processes the ranks agree (a signal to any one stops all at the same step,
// each saving its part of the checkpoint).
inline bool train_preempt_requested(Comm* comm) {
    return comm_sum(comm, preempt_signal() != 0 ? 1.0 : 0.0) > 0.0;
}

// The last words of a preempted run; returns the exit status: 0 when a checkpoint at `step`
// is on disk, 128 + the signal (as a shell reports a killed process) when there is no -o
// to save to.
inline int train_preempt_exit(const TrainConfig& cfg, int step, Logger* lg) {
    int sig = preempt_signal();
    if (cfg.output_dir.empty()) {
        printf("preempted at step %d (%s): no output directory (-o), nothing saved, exiting\n", step,
               signal_name(sig));
        fflush(stdout);
        return 128 + sig;
    }
    train_log_event(lg, step, "preempted", signal_name(sig));
    printf("preempted at step %d: checkpoint written, exiting (%s; resume with -y 1)\n", step, signal_name(sig));
    fflush(stdout);
    return 0;
}

// After -fk non-finite steps in a row: the step of the newest complete checkpoint to reload
// and continue from. Stops the run (exit 1) when there is none, or when the same checkpoint
// was reloaded before and the faults came back (a fault that repeats is not transient).
// last_reload: the checkpoint reloaded last in this process, -1 if none.
inline int train_fault_reload_step(const TrainConfig& cfg, const StepGuard& g, int step, Comm* comm,
                                   int last_reload) {
    long long first = step - g.bad_streak + 1;
    printf("%lld steps in a row (%lld..%d) had a non-finite loss or gradient norm (-fk %d)\n", g.bad_streak, first,
           step, cfg.fault_streak);
    int from = -1;
    if (!cfg.output_dir.empty() && comm->rank == 0) from = checkpoint_find_latest(cfg.output_dir);
    comm_broadcast(comm, &from, sizeof(from), 0);
    if (from < 0)
        fail("%lld consecutive non-finite steps (%lld..%d) and no checkpoint to reload%s: stopping", g.bad_streak,
             first, step, cfg.output_dir.empty() ? " (no -o)" : (" in " + cfg.output_dir).c_str());
    if (from == last_reload)
        fail("%lld consecutive non-finite steps (%lld..%d) again after reloading the checkpoint at step %d: "
             "stopping (lower -l, or inspect the data near these steps)", g.bad_streak, first, step, from);
    printf("reloading the last good checkpoint (step %d) and continuing from there\n", from);
    return from;
}
