// train_common.h: the parts of a trainer's main() that do not depend on where the model
// runs, shared by train_gpt.cpp (CPU) and train_gpt.cu (GPU) so the two cannot drift:
// where training starts (resume, file, random init), the batch arithmetic and the data
// loaders, the resume-state checks, and small helpers (clock, directories, durations).
// defines: now_seconds, mkdir_p, format_duration, reject_unfinished_features,
//          train_prepare_output_dir, train_load_host_model, TrainData, train_data_init,
//          train_data_free, train_state_make, train_state_check, default_tokenizer_path,
//          sample_text
#pragma once
#include <sys/stat.h>
#include <unistd.h>
#include <chrono>
#include <string>
#include <vector>

#include "utils.h"       // defines: fail, CHECK
#include "args.h"        // defines: TrainConfig
#include "gpt2.h"        // defines: GPT2, GPT2Config, gpt2_config_from_descriptor, gpt2_init, gpt2_init_random
#include "checkpoint.h"  // defines: gpt2_load_checkpoint, checkpoint_find_latest, TrainState, ...
#include "dataloader.h"  // defines: DataLoader, dataloader_init, dataloader_get_state, ...
#include "sampler.h"     // defines: sample_logits, rng_next_f32
#include "tokenizer.h"   // defines: Tokenizer, tokenizer_decode

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
inline void reject_unfinished_features(const TrainConfig& c, const char* prog) {
    if (c.num_processes != 1 || c.process_rank != 0)
        fail("-pn/-pr: multi-process training is not available yet in %s (it arrives with the distributed trainer); use -pn 1", prog);
    if (c.zero_stage != 0)
        fail("-z %d: ZeRO needs several processes, which %s does not run yet; use -z 0", c.zero_stage, prog);
    if (c.skip_loss_z != 0.0f || c.skip_grad_z != 0.0f)
        fail("-sl/-sg: outlier skipping is not available yet; use 0");
    if (c.hellaswag != 0) fail("-h 1: HellaSwag evaluation is not available yet; use -h 0");
}

// Creates -o and decides where training starts: returns the step of the newest complete
// checkpoint to resume from (-y 1), or -1 for a fresh start. A fresh start into a
// directory that already holds checkpoints is an error (it would mix two runs).
inline int train_prepare_output_dir(const TrainConfig& cfg, int rank) {
    const std::string& dir = cfg.output_dir;
    if (cfg.resume && dir.empty()) fail("flag -y 1 needs an output directory (-o) to resume from");
    if (dir.empty()) return -1;
    mkdir_p(dir);
    if (cfg.resume) {
        int step = checkpoint_find_latest(dir, rank);
        if (step < 0) printf("no complete checkpoint in %s: starting from scratch\n", dir.c_str());
        return step;
    }
    std::vector<int> done = checkpoint_done_steps(dir);
    if (!done.empty())
        fail("%s already holds checkpoints (newest: step %d): resume with -y 1, or choose another -o",
             dir.c_str(), done[0]);
    return -1;
}

// The model on the host, in fp32: the resumed checkpoint, random init from a descriptor
// (-e d12), or a model file (-e path). The GPU trainer uploads it from here, so both
// trainers start from bit-identical weights.
inline void train_load_host_model(GPT2* model, const TrainConfig& cfg, int resume_step) {
    GPT2Config desc_cfg;
    if (resume_step >= 0) {
        gpt2_load_checkpoint(model, checkpoint_path(cfg.output_dir, "model", resume_step).c_str());
    } else if (gpt2_config_from_descriptor(cfg.init.c_str(), &desc_cfg)) {
        gpt2_init(model, desc_cfg);
        gpt2_init_random(model, (uint32_t)cfg.seed);
    } else {
        if (access(cfg.init.c_str(), F_OK) != 0 && (cfg.init[0] == 'd' || cfg.init.find(':') != std::string::npos))
            fail("flag -e: '%s' is neither a model descriptor (d6, d12, gpt2:d24, gpt3:c768, gpt2:l4c256) nor a file",
                 cfg.init.c_str());
        gpt2_load_checkpoint(model, cfg.init.c_str());
    }
    if (cfg.T > model->config.max_seq_len)
        fail("flag -t: %d exceeds the model's maximum sequence length %d", cfg.T, model->config.max_seq_len);
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
    if (d->num_steps < 0) d->num_steps = (int)(d->train.num_tokens / cfg->total_batch);
    if (d->num_steps == 0)
        fail("%s: %zu tokens is less than one step of -d %lld tokens", cfg->train_pattern.c_str(),
             d->train.num_tokens, cfg->total_batch);
}

inline void train_data_free(TrainData* d) {
    dataloader_free(&d->train);
    if (d->do_val) dataloader_free(&d->val);
}

inline std::string default_tokenizer_path(const TrainConfig& cfg) {
    if (!cfg.tokenizer.empty()) return cfg.tokenizer;
    return access("gpt2_tokenizer.bin", F_OK) == 0 ? "gpt2_tokenizer.bin" : "data/gpt2_tokenizer.bin";
}

// What a checkpoint at `step` records besides the weights and the optimizer moments.
inline TrainState train_state_make(int step, int rank, int world, size_t num_parameters, const DataLoader* train,
                                   const TrainConfig& cfg, uint64_t sample_rng) {
    DataLoaderState ds = dataloader_get_state(train);
    TrainState s = {(uint64_t)step, (uint64_t)rank, (uint64_t)world, num_parameters, ds.epoch, ds.shard_pos,
                    ds.sample_pos, (uint64_t)cfg.seed, (uint64_t)cfg.shuffle, (uint64_t)cfg.B,
                    (uint64_t)cfg.T, (uint64_t)cfg.total_batch, sample_rng};
    return s;
}

// A state file must come from a run with the same model size, batch shape, data order and
// process count; anything else would not continue the same run.
inline void train_state_check(const TrainState& s, const std::string& path, size_t num_parameters,
                              const TrainConfig& cfg, int world) {
    if (s.num_parameters != num_parameters)
        fail("%s: state is for %llu parameters, the model has %zu", path.c_str(),
             (unsigned long long)s.num_parameters, num_parameters);
    if (s.B != (uint64_t)cfg.B || s.T != (uint64_t)cfg.T || s.total_batch != (uint64_t)cfg.total_batch ||
        s.world != (uint64_t)world || s.shuffle != (uint64_t)cfg.shuffle || s.seed != (uint64_t)cfg.seed)
        fail("%s: written by a run with -b %llu -t %llu -d %llu -sh %llu -sd %llu on %llu processes; resume with the same",
             path.c_str(), (unsigned long long)s.B, (unsigned long long)s.T, (unsigned long long)s.total_batch,
             (unsigned long long)s.shuffle, (unsigned long long)s.seed, (unsigned long long)s.world);
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
