// gpt2_cuda_kv.cuh: the GPU model of llmc/gpt2_cuda.cuh run for generation with a KV cache on
// the device: the prompt goes through once, then each new token alone. The CPU version,
// and the reference for what each step computes, is llmc/gpt2_kv.h.
// defines: GPT2CudaKV, gpt2_cuda_kv_init, gpt2_cuda_kv_reset, gpt2_cuda_kv_forward, gpt2_cuda_kv_free
//
// Uses only the parameters of a GPT2Cuda (gpt2_cuda_init; no gpt2_cuda_alloc_state: no
// gradients, optimizer state or training activations). Per call, n new tokens at positions
// pos..pos+n-1, the trainer's kernels on n rows:
//   encoder (wpe rows from pos) -> ln1 -> L x [qkv matmul written into the cache rows,
//   attention, attproj, residual + ln2 (fused), fc + gelu, fcproj, residual + next ln1 or
//   lnf (fused)] -> classifier on the last row
// Attention: a prompt into an empty cache (pos == 0) is the training forward's causal
// attention over rows 0..n-1, the flash kernel of llmc/cuda/attention.cuh; later rows
// attend to the cache with llmc/cuda/attention_kv.cuh.
#pragma once
#include <vector>

#include "gpt2_cuda.cuh"         // defines: GPT2Cuda, ParamPtrsX, cuda_malloc_or_fail, and the kernels' launchers
#include "cuda/attention_kv.cuh" // defines: attention_kv_forward (CUDA)

struct GPT2CudaKV {
    int maxT = 0;               // positions the cache holds (the model's maxT)
    int pos = 0;                // positions cached so far
    floatX* qkv = nullptr;      // (L,maxT,3C) the cache: q|k|v of every position so far, per layer
    floatX* x = nullptr;        // (maxT,C) the residual stream of the new rows
    floatX* ln = nullptr;       // (maxT,C) a LayerNorm output
    floatX* atty = nullptr;     // (maxT,C)
    floatX* proj = nullptr;     // (maxT,C)
    floatX* fch = nullptr;      // (maxT,4C) GELU's input
    floatX* fch_gelu = nullptr; // (maxT,4C)
    float* lse = nullptr;       // (NH,maxT) the flash kernel's log-sum-exp (written, unused)
    floatX* logits = nullptr;   // (Vp) of the last new row
    int* tokens = nullptr;      // (maxT) the new token ids on the device
    std::vector<floatX> logits_x;  // host copies of the logits
    std::vector<float> logits_f;
};

inline void gpt2_cuda_kv_init(GPT2CudaKV* kv, const GPT2Cuda* model) {
    const GPT2Config& cfg = model->config;
    const size_t maxT = cfg.max_seq_len, C = cfg.channels, L = cfg.num_layers, X = sizeof(floatX);
    kv->maxT = cfg.max_seq_len;
    kv->pos = 0;
    kv->qkv = (floatX*)cuda_malloc_or_fail(L * maxT * 3 * C * X, "KV cache");
    kv->x = (floatX*)cuda_malloc_or_fail(maxT * C * X, "generation activations");
    kv->ln = (floatX*)cuda_malloc_or_fail(maxT * C * X, "generation activations");
    kv->atty = (floatX*)cuda_malloc_or_fail(maxT * C * X, "generation activations");
    kv->proj = (floatX*)cuda_malloc_or_fail(maxT * C * X, "generation activations");
    kv->fch = (floatX*)cuda_malloc_or_fail(maxT * 4 * C * X, "generation activations");
    kv->fch_gelu = (floatX*)cuda_malloc_or_fail(maxT * 4 * C * X, "generation activations");
    kv->lse = (float*)cuda_malloc_or_fail((size_t)cfg.num_heads * maxT * sizeof(float), "generation lse");
    kv->logits = (floatX*)cuda_malloc_or_fail((size_t)cfg.padded_vocab_size * X, "logits");
    kv->tokens = (int*)cuda_malloc_or_fail(maxT * sizeof(int), "tokens");
    kv->logits_x.resize(cfg.padded_vocab_size);
    kv->logits_f.resize(cfg.padded_vocab_size);
}

// Forgets the cached positions: the next call starts a new sequence at position 0.
inline void gpt2_cuda_kv_reset(GPT2CudaKV* kv) { kv->pos = 0; }

// Appends n tokens (host ids) at positions pos..pos+n-1; returns the logits (Vp floats, host)
// of the last one. Needs pos + n <= maxT.
inline const float* gpt2_cuda_kv_forward(const GPT2Cuda* model, GPT2CudaKV* kv, const int* tokens, int n) {
    const GPT2Config& cfg = model->config;
    const CudaContext& ctx = *model->ctx;
    const int L = cfg.num_layers, C = cfg.channels, NH = cfg.num_heads, V = cfg.vocab_size;
    const int Vp = cfg.padded_vocab_size, pos = kv->pos;
    CHECK(n >= 1 && pos + n <= kv->maxT, "pos=%d n=%d maxT=%d", pos, n, kv->maxT);
    for (int i = 0; i < n; i++)
        CHECK(tokens[i] >= 0 && tokens[i] < V, "token %d at %d outside vocab %d", tokens[i], i, V);
    const ParamPtrsX& p = model->p;
    const size_t C3 = 3 * (size_t)C;
    // the stream is a blocking one: a plain copy is ordered with its kernels
    CHECK_CUDA(cudaMemcpy(kv->tokens, tokens, n * sizeof(int), cudaMemcpyHostToDevice));

    encoder_forward(ctx, kv->x, kv->tokens, p.wte, p.wpe + (size_t)pos * C, 1, n, C);
    layernorm_forward(ctx, kv->ln, nullptr, nullptr, kv->x, p.ln1w, p.ln1b, n, C);
    for (int l = 0; l < L; l++) {
        const size_t lC = (size_t)l * C;
        floatX* cache = kv->qkv + (size_t)l * kv->maxT * C3;  // (maxT,3C) this layer's cache
        // x = x + attproj(attention(qkv(ln1(x)))); ln1(x) is in ln already
        matmul_forward(ctx, cache + (size_t)pos * C3, nullptr, kv->ln, p.qkvw + lC * 3 * C, p.qkvb + lC * 3, n, C, 3 * C);
        if (pos == 0) attention_forward(ctx, kv->atty, kv->lse, cache, 1, n, C, NH);
        else attention_kv_forward(ctx, kv->atty, cache, pos, n, C, NH);
        matmul_forward(ctx, kv->proj, nullptr, kv->atty, p.attprojw + lC * C, p.attprojb + lC, n, C, C);
        fused_residual_layernorm_forward(ctx, kv->x, kv->ln, nullptr, nullptr, kv->x, kv->proj, p.ln2w + lC,
                                         p.ln2b + lC, n, C);
        // x = x + fcproj(gelu(fc(ln2(x)))), then the next LayerNorm: the next layer's ln1 or lnf
        matmul_forward(ctx, kv->fch_gelu, kv->fch, kv->ln, p.fcw + lC * 4 * C, p.fcb + lC * 4, n, C, 4 * C);
        matmul_forward(ctx, kv->proj, nullptr, kv->fch_gelu, p.fcprojw + lC * 4 * C, p.fcprojb + lC, n, 4 * C, C);
        const floatX* w = l + 1 < L ? p.ln1w + lC + C : p.lnfw;
        const floatX* b = l + 1 < L ? p.ln1b + lC + C : p.lnfb;
        fused_residual_layernorm_forward(ctx, kv->x, kv->ln, nullptr, nullptr, kv->x, kv->proj, w, b, n, C);
    }
    // the tied classifier on the last row only
    matmul_forward(ctx, kv->logits, nullptr, kv->ln + (size_t)(n - 1) * C, p.wte, nullptr, 1, C, Vp);
    CHECK_CUDA(cudaMemcpyAsync(kv->logits_x.data(), kv->logits, Vp * sizeof(floatX), cudaMemcpyDeviceToHost,
                               ctx.stream));
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    for (int i = 0; i < Vp; i++) kv->logits_f[i] = to_float(kv->logits_x[i]);
    kv->pos = pos + n;
    return kv->logits_f.data();
}

inline void gpt2_cuda_kv_free(GPT2CudaKV* kv) {
    void* bufs[] = {kv->qkv, kv->x, kv->ln, kv->atty, kv->proj, kv->fch, kv->fch_gelu, kv->lse, kv->logits, kv->tokens};
    for (void* b : bufs) CHECK_CUDA(cudaFree(b));
    *kv = GPT2CudaKV();
}
