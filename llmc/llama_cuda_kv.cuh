// llama_cuda_kv.cuh: the GPU model of llmc/llama_cuda.cuh run for generation with a KV cache on
// the device: the prompt goes through once, then each new token alone, attending to the cached
// keys (turned by RoPE at their positions) and values of every earlier position. The CPU
// version, and the reference for what each step computes, is llmc/llama3_kv.h.
// defines: LlamaCudaKV, llama_cuda_kv_init, llama_cuda_kv_forward, llama_cuda_kv_free
//
// Glossary as llmc/llama_cuda.cuh; n = positions in one call, pos = positions already cached.
// Uses only the parameters of a LlamaCuda (llama_cuda_init; no llama_cuda_alloc_state: no
// gradients, optimizer state or training activations). Per call, the trainer's kernels on the
// n new rows:
//   embedding -> L x [rms1, qkv matmul written into the cache rows, RoPE at positions
//   pos..pos+n-1, attention, attproj + residual, rms2, fc, SwiGLU, fcproj + residual]
//   -> final RMSNorm and the untied head on the last row
// The cache holds NKV key/value heads: query head h reads head h / (NH/NKV). The cache, its
// attention and the tokens' and logits' copies are llmc/model_cuda_kv.cuh's.
#pragma once
#include <vector>

#include "llama3.h"           // defines: LlamaConfig, rope_table
#include "llama_cuda.cuh"     // defines: LlamaCuda, llama_cuda_layout, llama_layer_x, llama_matmul_residual, launchers
#include "model_cuda_kv.cuh"  // defines: CudaKVCache, cuda_kv_init, cuda_kv_begin, cuda_kv_attention, ...

struct LlamaCudaKV : CudaKVCache {
    floatX* x = nullptr;           // (maxT,C) the residual stream of the new rows
    floatX* rms = nullptr;         // (maxT,C) an RMSNorm output
    floatX* atty = nullptr;        // (maxT,C) attention output
    floatX* fch = nullptr;         // (maxT,2F) [gate | up]
    floatX* fch_swiglu = nullptr;  // (maxT,F)
    float* rope_cos = nullptr;     // (maxT,hs/2) RoPE's angles of every position (the CPU's rope_table)
    float* rope_sin = nullptr;     // (maxT,hs/2)
};

// A cache for up to maxT positions (at most the model's).
inline void llama_cuda_kv_init(LlamaCudaKV* kv, const LlamaCuda* model, int maxT) {
    const LlamaConfig& cfg = model->config;
    CHECK(maxT >= 1 && maxT <= cfg.max_seq_len, "maxT=%d of %d", maxT, cfg.max_seq_len);
    const int hs = cfg.channels / cfg.num_heads;
    cuda_kv_init(kv, maxT, cfg.num_layers, cfg.num_heads, cfg.num_kv_heads, hs, cfg.padded_vocab_size);
    const size_t T = maxT, C = cfg.channels, F = cfg.ffn_hidden, X = sizeof(floatX);
    kv->x = (floatX*)cuda_malloc_or_fail(T * C * X, "generation activations");
    kv->rms = (floatX*)cuda_malloc_or_fail(T * C * X, "generation activations");
    kv->atty = (floatX*)cuda_malloc_or_fail(T * C * X, "generation activations");
    kv->fch = (floatX*)cuda_malloc_or_fail(T * 2 * F * X, "generation activations");
    kv->fch_swiglu = (floatX*)cuda_malloc_or_fail(T * F * X, "generation activations");
    // the angles of the CPU's table, Llama 3.1's scaling included, so that both sides turn alike
    std::vector<float> cos_t, sin_t;
    rope_table(&cos_t, &sin_t, maxT, hs, cfg.rope_theta, cfg.rope_scaling);
    kv->rope_cos = (float*)cuda_malloc_or_fail(cos_t.size() * sizeof(float), "RoPE table");
    kv->rope_sin = (float*)cuda_malloc_or_fail(sin_t.size() * sizeof(float), "RoPE table");
    CHECK_CUDA(cudaMemcpy(kv->rope_cos, cos_t.data(), cos_t.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(kv->rope_sin, sin_t.data(), sin_t.size() * sizeof(float), cudaMemcpyHostToDevice));
}

// Appends n tokens (host ids) at positions pos..pos+n-1; returns the logits (Vp floats, host)
// of the last one. Needs pos + n <= maxT.
inline const float* llama_cuda_kv_forward(const LlamaCuda* model, LlamaCudaKV* kv, const int* tokens, int n) {
    const LlamaConfig& cfg = model->config;
    const CudaContext& ctx = *model->ctx;
    const int L = cfg.num_layers, C = cfg.channels, NH = cfg.num_heads, NKV = cfg.num_kv_heads, F = cfg.ffn_hidden;
    const int Vp = cfg.padded_vocab_size, hs = C / NH, QKV = (NH + 2 * NKV) * hs;
    const float eps = cfg.norm_eps;
    const int pos = cuda_kv_begin(kv, tokens, n, cfg.vocab_size);
    const size_t half = hs / 2;
    const ParamLayout layout = llama_cuda_layout(model);

    encoder_forward(ctx, kv->x, kv->tokens, model->p.wte, nullptr, 1, n, C);
    for (int l = 0; l < L; l++) {
        floatX* slices[LLAMA_NUM_LAYER_TENSORS];
        layer_slices(model->params, layout, l, slices);
        const LlamaLayerX lp = llama_layer_x(slices);
        floatX* cache = cuda_kv_layer(kv, l);          // (maxT,QKV) this layer's cache
        floatX* rows = cache + (size_t)pos * QKV;      // the new positions' rows
        // x = x + attproj(attention(rope(qkv(rms1(x))))): the new rows go into the cache, turned
        // by their positions' angles (the table from row pos on)
        rmsnorm_forward(ctx, kv->rms, nullptr, kv->x, lp.rms1w, n, C, eps);
        matmul_forward(ctx, rows, nullptr, kv->rms, lp.qkvw, nullptr, n, C, QKV);
        rope_forward(ctx, rows, 1, n, NH, NKV, hs, kv->rope_cos + pos * half, kv->rope_sin + pos * half);
        cuda_kv_attention(ctx, kv, kv->atty, cache, n);
        llama_matmul_residual(ctx, kv->x, kv->x, kv->atty, lp.attprojw, n, C, C);
        // x = x + fcproj(swiglu(fc(rms2(x))))
        rmsnorm_forward(ctx, kv->rms, nullptr, kv->x, lp.rms2w, n, C, eps);
        matmul_forward(ctx, kv->fch, nullptr, kv->rms, lp.fcw, nullptr, n, C, 2 * F);
        swiglu_forward(ctx, kv->fch_swiglu, kv->fch, n, F);
        llama_matmul_residual(ctx, kv->x, kv->x, kv->fch_swiglu, lp.fcprojw, n, F, C);
    }
    // the last row only: the final RMSNorm, then the head
    rmsnorm_forward(ctx, kv->rms, nullptr, kv->x + (size_t)(n - 1) * C, model->p.rmsfw, 1, C, eps);
    matmul_forward(ctx, kv->logits, nullptr, kv->rms, model->p.lmheadw, nullptr, 1, C, Vp);
    return cuda_kv_finish(kv, ctx, n);
}

inline void llama_cuda_kv_free(LlamaCudaKV* kv) {
    cuda_kv_free(kv);
    void* bufs[] = {kv->x, kv->rms, kv->atty, kv->fch, kv->fch_swiglu, kv->rope_cos, kv->rope_sin};
    for (void* b : bufs) CHECK_CUDA(cudaFree(b));
    *kv = LlamaCudaKV();
}
