// generate.cpp: ./generate, sampling from a model checkpoint on the CPU with a KV cache.
//   ./generate -e model.bin -p "The Lord is" -g 40 -st 0.8 -sk 40 -sp 0.95 -sd 1
//   ./generate -e model.bin -pi 299,5,17 -st 0 -oi 1      (greedy, ids in and out)
// The flags, the prompt and the sampling loop are llmc/generate.h (shared with the GPU's
// data/generate.cu); this file is the CPU backend: llmc/gpt2_kv.h's cached forward, or with
// -kv 0 the trainer's gpt2_forward over the whole sequence at every step.
#include <cstdio>
#include <vector>

#include "../llmc/generate.h"    // defines: GenerateConfig, generate_args_parse, generate_prepare, generate_run
#include "../llmc/gpt2.h"        // defines: GPT2, gpt2_alloc_state, gpt2_forward, gpt2_free
#include "../llmc/checkpoint.h"  // defines: gpt2_load_checkpoint
#include "../llmc/gpt2_kv.h"     // defines: GPT2KV, gpt2_kv_init, gpt2_kv_forward, gpt2_kv_free

// The logits of the last position of seq[0..len): the cache runs the n_new new tokens only.
struct CpuKvBackend {
    const GPT2* model;
    GPT2KV kv;
    const float* logits(const int* seq, int len, int n_new) {
        CHECK(kv.pos == len - n_new, "cache holds %d positions, sequence has %d old ones", kv.pos, len - n_new);
        return gpt2_kv_forward(model, &kv, seq + len - n_new, n_new);
    }
};

// The same without a cache: the trainer's forward over all len tokens every step.
struct CpuFullBackend {
    GPT2* model;
    const float* logits(const int* seq, int len, int /*n_new*/) {
        gpt2_forward(model, seq, nullptr, 1, len);
        return model->acts.logits + (size_t)(len - 1) * model->config.padded_vocab_size;
    }
};

int main(int argc, char** argv) {
    GenerateConfig cfg;
    generate_args_parse(argc, argv, &cfg);
    GPT2 model;
    gpt2_load_checkpoint(&model, cfg.model.c_str());
    const GPT2Config& mc = model.config;
    GeneratePrompt prompt;
    generate_prepare(cfg, mc, &prompt);
    fprintf(stderr, "model %s: L=%d C=%d NH=%d V=%d maxT=%d; cpu fp32, %s; prompt %zu tokens\n", cfg.model.c_str(),
            mc.num_layers, mc.channels, mc.num_heads, mc.vocab_size, mc.max_seq_len,
            cfg.kv_cache ? "KV cache" : "no cache (full forward each step)", prompt.ids.size());
    if (cfg.kv_cache) {
        CpuKvBackend be{&model, {}};
        gpt2_kv_init(&be.kv, mc);
        generate_run(cfg, mc, prompt, be);
        gpt2_kv_free(&be.kv);
    } else {
        gpt2_alloc_state(&model, 1, mc.max_seq_len);
        CpuFullBackend be{&model};
        generate_run(cfg, mc, prompt, be);
    }
    gpt2_free(&model);
    return 0;
}
