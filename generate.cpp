// generate.cpp: ./generate, sampling from a model checkpoint (GPT-2 or Llama 3) on the CPU
// with a KV cache.
//   ./generate -e model.bin -p "The Lord is" -g 40 -st 0.8 -sk 40 -sp 0.95 -sd 1
//   ./generate -e model.bin -pi 299,5,17 -st 0 -oi 1      (greedy, ids in and out)
// The flags, the prompt and the sampling loop are llmc/generate.h (shared with the GPU's
// generate.cu); this file is the CPU backend: the family's cached forward (llmc/gpt2_kv.h,
// llmc/llama3_kv.h), or with -kv 0 the trainer's forward over the whole sequence at every step.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "llmc/generate.h"    // defines: GenerateConfig, generate_args_parse, generate_prepare, generate_run
#include "llmc/families.h"    // defines: ModelBase, model_forward, model_logits, model_alloc_state, model_describe
#include "llmc/checkpoint.h"  // defines: model_load_checkpoint
#include "llmc/gpt2_kv.h"     // defines: GPT2KV, gpt2_kv_init, gpt2_kv_forward, gpt2_kv_free
#include "llmc/llama3_kv.h"   // defines: LlamaKV, llama_kv_init, llama_kv_forward, llama_kv_free

// The logits of the last position of seq[0..len): the cache runs the n_new new tokens only.
struct CpuKvBackend {
    const ModelBase* model;
    GPT2KV gpt2;
    LlamaKV llama;
    const float* logits(const int* seq, int len, int n_new) {
        const int cached = model->family == FAMILY_LLAMA3 ? llama.pos : gpt2.pos;
        CHECK(cached == len - n_new, "cache holds %d positions, sequence has %d old ones", cached, len - n_new);
        if (model->family == FAMILY_LLAMA3)
            return llama_kv_forward(static_cast<const Llama*>(model), &llama, seq + len - n_new, n_new);
        return gpt2_kv_forward(static_cast<const GPT2*>(model), &gpt2, seq + len - n_new, n_new);
    }
};

// The same without a cache: the trainer's forward over all len tokens every step.
struct CpuFullBackend {
    ModelBase* model;
    const float* logits(const int* seq, int len, int /*n_new*/) {
        model_forward(model, seq, nullptr, 1, len);
        return model_logits(model) + (size_t)(len - 1) * model->padded_vocab_size;
    }
};

int main(int argc, char** argv) {
    GenerateConfig cfg;
    generate_args_parse(argc, argv, &cfg);
    ModelBase* model = model_load_checkpoint(cfg.model.c_str());
    const int V = model->vocab_size, maxT = model->max_seq_len;
    GeneratePrompt prompt;
    generate_prepare(cfg, V, maxT, &prompt);
    // positions this run can reach: the cache and the activations need no more
    const int T = std::min<long long>(maxT, (long long)prompt.ids.size() + std::max(cfg.max_new, 0));
    fprintf(stderr, "model %s: %s; cpu fp32, %s; prompt %zu tokens\n", cfg.model.c_str(), model_describe(model).c_str(),
            cfg.kv_cache ? "KV cache" : "no cache (full forward each step)", prompt.ids.size());
    if (cfg.kv_cache) {
        CpuKvBackend be{model, {}, {}};
        if (model->family == FAMILY_LLAMA3) llama_kv_init(&be.llama, static_cast<Llama*>(model)->config, T);
        else gpt2_kv_init(&be.gpt2, static_cast<GPT2*>(model)->config);
        generate_run(cfg, V, maxT, prompt, be);
        if (model->family == FAMILY_LLAMA3) llama_kv_free(&be.llama);
        else gpt2_kv_free(&be.gpt2);
    } else {
        model_alloc_state(model, 1, T);
        CpuFullBackend be{model};
        generate_run(cfg, V, maxT, prompt, be);
    }
    model_delete(model);
    return 0;
}
