// generate.cu: ./generate_fp32 and ./generate_bf16, sampling from a model checkpoint on the
// GPU with a KV cache on the device. Same flags, prompt and output as the CPU's ./generate
// (llmc/generate.h); only the backend differs: llmc/gpt2_cuda_kv.cuh's cached forward, or
// with -kv 0 the trainer's gpt2_cuda_forward over the whole sequence at every step.
//   ./generate_fp32 -e model.bin -pi 299,5,17 -st 0 -oi 1     (greedy ids: compare with ./generate)
// A separate program rather than a device flag of ./generate: the CPU build stays free of
// CUDA (it builds where nvcc does not), and one source per precision is how the trainers
// are built (train_gpt.cu -> train_gpt_fp32 / _bf16). Sampling runs on the host from the
// downloaded logits, with the CPU's sampler: same seed, same draws.
#include <cstdio>
#include <vector>

#include "llmc/generate.h"       // defines: GenerateConfig, generate_args_parse, generate_prepare, generate_run
#include "llmc/gpt2.h"           // defines: GPT2 (the host model the checkpoint loads into)
#include "llmc/checkpoint.h"     // defines: gpt2_load_checkpoint
#include "llmc/zero.h"           // defines: zero_layout
#include "llmc/cuda/common.cuh"  // defines: CudaContext, cuda_context_init, PRECISION_NAME
#include "llmc/gpt2_cuda.cuh"    // defines: GPT2Cuda, gpt2_cuda_init, gpt2_cuda_alloc_state, gpt2_cuda_forward, ...
#include "llmc/gpt2_cuda_kv.cuh" // defines: GPT2CudaKV, gpt2_cuda_kv_init, gpt2_cuda_kv_forward, gpt2_cuda_kv_free

struct GpuKvBackend {
    const GPT2Cuda* model;
    GPT2CudaKV kv;
    const float* logits(const int* seq, int len, int n_new) {
        CHECK(kv.pos == len - n_new, "cache holds %d positions, sequence has %d old ones", kv.pos, len - n_new);
        return gpt2_cuda_kv_forward(model, &kv, seq + len - n_new, n_new);
    }
};

struct GpuFullBackend {
    GPT2Cuda* model;
    std::vector<float> row;
    const float* logits(const int* seq, int len, int /*n_new*/) {
        gpt2_cuda_forward(model, seq, nullptr, 1, len, 0.0f);
        row.resize(model->config.padded_vocab_size);
        gpt2_cuda_logits_row(model, len - 1, row.data());
        return row.data();
    }
};

int main(int argc, char** argv) {
    GenerateConfig cfg;
    generate_args_parse(argc, argv, &cfg);
    GPT2 host;
    gpt2_load_checkpoint(&host, cfg.model.c_str());
    const GPT2Config mc = host.config;
    GeneratePrompt prompt;
    generate_prepare(cfg, mc.vocab_size, mc.max_seq_len, &prompt);

    int device_count = 0;
    CHECK_CUDA(cudaGetDeviceCount(&device_count));
    if (device_count < 1) fail("no CUDA device");
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    ctx.tf32 = cfg.tf32 != 0;
    GPT2Cuda model;
    gpt2_cuda_init(&model, &ctx, &host, false, zero_layout(host.num_parameters, 0, 0, 1));
    gpt2_free(&host);
    fprintf(stderr, "model %s: L=%d C=%d NH=%d V=%d maxT=%d; %s %s%s, %s; prompt %zu tokens\n", cfg.model.c_str(),
            mc.num_layers, mc.channels, mc.num_heads, mc.vocab_size, mc.max_seq_len, ctx.props.name, PRECISION_NAME,
            sizeof(floatX) == 4 ? (ctx.tf32 ? " (TF32 on)" : " (TF32 off)") : "",
            cfg.kv_cache ? "KV cache" : "no cache (full forward each step)", prompt.ids.size());
    if (cfg.kv_cache) {
        GpuKvBackend be{&model, {}};
        gpt2_cuda_kv_init(&be.kv, &model);
        generate_run(cfg, mc.vocab_size, mc.max_seq_len, prompt, be);
        gpt2_cuda_kv_free(&be.kv);
    } else {
        gpt2_cuda_alloc_state(&model, 1, mc.max_seq_len, 1);
        GpuFullBackend be{&model, {}};
        generate_run(cfg, mc.vocab_size, mc.max_seq_len, prompt, be);
    }
    gpt2_cuda_free(&model);
    cuda_context_free(&ctx);
    return 0;
}
