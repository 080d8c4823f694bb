// generate.cu: ./generate_fp32 and ./generate_bf16, sampling from a model checkpoint (GPT-2 or
// Llama 3) on the GPU with a KV cache on the device. Same flags, prompt and output as the CPU's
// ./generate (llmc/generate.h); only the backend differs: the family's cached forward
// (llmc/gpt2_cuda_kv.cuh, llmc/llama_cuda_kv.cuh), or with -kv 0 the trainer's forward
// (gpt2_cuda_forward, llama_cuda_forward) over the whole sequence at every step.
//   ./generate_fp32 -e model.bin -pi 299,5,17 -st 0 -oi 1     (greedy ids: compare with ./generate)
// A separate program rather than a device flag of ./generate: the CPU build stays free of
// CUDA (it builds where nvcc does not), and one source per precision is how the trainers
// are built (train_gpt.cu -> train_gpt_fp32 / _bf16). Sampling runs on the host from the
// downloaded logits, with the CPU's sampler: same seed, same draws.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "llmc/generate.h"        // defines: GenerateConfig, generate_args_parse, generate_prepare, generate_run
#include "llmc/families.h"        // defines: ModelBase, model_describe, model_delete
#include "llmc/checkpoint.h"      // defines: model_load_checkpoint
#include "llmc/zero.h"            // defines: zero_layout
#include "llmc/cuda/common.cuh"   // defines: CudaContext, cuda_context_init, PRECISION_NAME
#include "llmc/model_cuda.cuh"    // defines: cuda_model_logits_row (either family)
#include "llmc/gpt2_cuda.cuh"     // defines: GPT2Cuda, gpt2_cuda_init, gpt2_cuda_alloc_state, gpt2_cuda_free, ...
#include "llmc/llama_cuda.cuh"    // defines: LlamaCuda, llama_cuda_init, llama_cuda_alloc_state, llama_cuda_free, ...
#include "llmc/gpt2_cuda_kv.cuh"  // defines: GPT2CudaKV, gpt2_cuda_kv_init, gpt2_cuda_kv_forward, gpt2_cuda_kv_free
#include "llmc/llama_cuda_kv.cuh" // defines: LlamaCudaKV, llama_cuda_kv_init, llama_cuda_kv_forward, llama_cuda_kv_free

// ---------------------------------------------------------------------------------------
// What differs between the families, one overload each (as train_gpt.cu's gpu_model_*);
// the backends and main are written once, over M (GPT2Cuda or LlamaCuda) and its cache KV.
static void gpu_init(GPT2Cuda* m, const CudaContext* ctx, const ModelBase* host) {
    gpt2_cuda_init(m, ctx, static_cast<const GPT2*>(host), false, zero_layout(host->num_parameters, 0, 0, 1));
}
static void gpu_init(LlamaCuda* m, const CudaContext* ctx, const ModelBase* host) {
    llama_cuda_init(m, ctx, static_cast<const Llama*>(host), false, zero_layout(host->num_parameters, 0, 0, 1));
}
static void gpu_alloc_state(GPT2Cuda* m, int T) { gpt2_cuda_alloc_state(m, 1, T, 1); }
static void gpu_alloc_state(LlamaCuda* m, int T) { llama_cuda_alloc_state(m, 1, T); }
static void gpu_forward(GPT2Cuda* m, const int* seq, int len) { gpt2_cuda_forward(m, seq, nullptr, 1, len, 0.0f); }
static void gpu_forward(LlamaCuda* m, const int* seq, int len) { llama_cuda_forward(m, seq, nullptr, 1, len, 0.0f); }
static void gpu_free(GPT2Cuda* m) { gpt2_cuda_free(m); }
static void gpu_free(LlamaCuda* m) { llama_cuda_free(m); }
static void gpu_kv_init(GPT2CudaKV* kv, const GPT2Cuda* m, int T) { gpt2_cuda_kv_init(kv, m, T); }
static void gpu_kv_init(LlamaCudaKV* kv, const LlamaCuda* m, int T) { llama_cuda_kv_init(kv, m, T); }
static const float* gpu_kv_forward(const GPT2Cuda* m, GPT2CudaKV* kv, const int* tokens, int n) {
    return gpt2_cuda_kv_forward(m, kv, tokens, n);
}
static const float* gpu_kv_forward(const LlamaCuda* m, LlamaCudaKV* kv, const int* tokens, int n) {
    return llama_cuda_kv_forward(m, kv, tokens, n);
}
static void gpu_kv_free(GPT2CudaKV* kv) { gpt2_cuda_kv_free(kv); }
static void gpu_kv_free(LlamaCudaKV* kv) { llama_cuda_kv_free(kv); }

// The logits of the last position of seq[0..len): the cache runs the n_new new tokens only.
template <typename M, typename KV>
struct GpuKvBackend {
    const M* model;
    KV* kv;
    const float* logits(const int* seq, int len, int n_new) {
        CHECK(kv->pos == len - n_new, "cache holds %d positions, sequence has %d old ones", kv->pos, len - n_new);
        return gpu_kv_forward(model, kv, seq + len - n_new, n_new);
    }
};

// The same without a cache: the trainer's forward over all len tokens every step.
template <typename M>
struct GpuFullBackend {
    M* model;
    std::vector<float> row;
    const float* logits(const int* seq, int len, int /*n_new*/) {
        gpu_forward(model, seq, len);
        row.resize(model->config.padded_vocab_size);
        cuda_model_logits_row(model, len - 1, row.data());
        return row.data();
    }
};

// Uploads the host model's weights into the family's device model M (and frees the host's),
// then generates with the family's cache KV or, with -kv 0, without; T: the positions this
// run can reach, which the cache and the activations are sized for.
template <typename M, typename KV>
static void generate_on_gpu(const GenerateConfig& cfg, const GeneratePrompt& prompt, const CudaContext* ctx,
                            ModelBase* host, int T) {
    const int V = host->vocab_size, maxT = host->max_seq_len;
    M model;
    gpu_init(&model, ctx, host);
    model_delete(host);
    if (cfg.kv_cache) {
        KV kv;
        gpu_kv_init(&kv, &model, T);
        GpuKvBackend<M, KV> be{&model, &kv};
        generate_run(cfg, V, maxT, prompt, be);
        gpu_kv_free(&kv);
    } else {
        gpu_alloc_state(&model, T);
        GpuFullBackend<M> be{&model, {}};
        generate_run(cfg, V, maxT, prompt, be);
    }
    gpu_free(&model);
}

int main(int argc, char** argv) {
    GenerateConfig cfg;
    generate_args_parse(argc, argv, &cfg);
    ModelBase* host = model_load_checkpoint(cfg.model.c_str());
    GeneratePrompt prompt;
    generate_prepare(cfg, host->vocab_size, host->max_seq_len, &prompt);
    const int T = std::min<long long>(host->max_seq_len, (long long)prompt.ids.size() + std::max(cfg.max_new, 0));

    int device_count = 0;
    CHECK_CUDA(cudaGetDeviceCount(&device_count));
    if (device_count < 1) fail("no CUDA device");
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    ctx.tf32 = cfg.tf32 != 0;
    fprintf(stderr, "model %s: %s; %s %s%s, %s; prompt %zu tokens\n", cfg.model.c_str(), model_describe(host).c_str(),
            ctx.props.name, PRECISION_NAME, sizeof(floatX) == 4 ? (ctx.tf32 ? " (TF32 on)" : " (TF32 off)") : "",
            cfg.kv_cache ? "KV cache" : "no cache (full forward each step)", prompt.ids.size());
    if (host->family == FAMILY_LLAMA3) generate_on_gpu<LlamaCuda, LlamaCudaKV>(cfg, prompt, &ctx, host, T);
    else generate_on_gpu<GPT2Cuda, GPT2CudaKV>(cfg, prompt, &ctx, host, T);
    cuda_context_free(&ctx);
    return 0;
}
