// gpt2_cuda_kv.cuh: the GPU model of llmc/gpt2_cuda.cuh run for generation with a KV cache on
// the device: the prompt goes through once, then each new token alone. The CPU version,
// and the reference for what each step computes, is llmc/gpt2_kv.h.
// defines: GPT2CudaKV, gpt2_cuda_kv_init, gpt2_cuda_kv_forward, gpt2_cuda_kv_free
//
// Uses only the parameters of a GPT2Cuda (gpt2_cuda_init; no gpt2_cuda_alloc_state: no
// gradients, optimizer state or training activations). Per call, n new tokens at positions
// pos..pos+n-1, the trainer's kernels on n rows:
//   encoder (wpe rows from pos) -> ln1 -> L x [qkv matmul written into the cache rows,
//   attention, attproj, residual + ln2 (fused), fc + gelu, fcproj, residual + next ln1 or
//   lnf (fused)] -> classifier on the last row
// The cache, its attention and the tokens' and logits' copies are llmc/model_cuda_kv.cuh's.
#pragma once
#include "gpt2_cuda.cuh"      // defines: GPT2Cuda, ParamPtrsX, cuda_malloc_or_fail, and the kernels' launchers
#include "model_cuda_kv.cuh"  // defines: CudaKVCache, cuda_kv_init, cuda_kv_begin, cuda_kv_attention, ...

struct GPT2CudaKV : CudaKVCache {
    floatX* x = nullptr;        // (maxT,C) the residual stream of the new rows
    floatX* ln = nullptr;       // (maxT,C) a LayerNorm output
    floatX* atty = nullptr;     // (maxT,C)
    floatX* proj = nullptr;     // (maxT,C)
    floatX* fch = nullptr;      // (maxT,4C) GELU's input
    floatX* fch_gelu = nullptr; // (maxT,4C)
};

// A cache for up to maxT positions (at most the model's).
inline void gpt2_cuda_kv_init(GPT2CudaKV* kv, const GPT2Cuda* model, int maxT) {
    const GPT2Config& cfg = model->config;
    CHECK(maxT >= 1 && maxT <= cfg.max_seq_len, "maxT=%d of %d", maxT, cfg.max_seq_len);
    const int NH = cfg.num_heads;
    cuda_kv_init(kv, maxT, cfg.num_layers, NH, NH, cfg.channels / NH, cfg.padded_vocab_size);
    const size_t T = maxT, C = cfg.channels, X = sizeof(floatX);
    kv->x = (floatX*)cuda_malloc_or_fail(T * C * X, "generation activations");
    kv->ln = (floatX*)cuda_malloc_or_fail(T * C * X, "generation activations");
    kv->atty = (floatX*)cuda_malloc_or_fail(T * C * X, "generation activations");
    kv->proj = (floatX*)cuda_malloc_or_fail(T * C * X, "generation activations");
    kv->fch = (floatX*)cuda_malloc_or_fail(T * 4 * C * X, "generation activations");
    kv->fch_gelu = (floatX*)cuda_malloc_or_fail(T * 4 * C * X, "generation activations");
}

// Appends n tokens (host ids) at positions pos..pos+n-1; returns the logits (Vp floats, host)
// of the last one. Needs pos + n <= maxT.
inline const float* gpt2_cuda_kv_forward(const GPT2Cuda* model, GPT2CudaKV* kv, const int* tokens, int n) {
    const GPT2Config& cfg = model->config;
    const CudaContext& ctx = *model->ctx;
    const int L = cfg.num_layers, C = cfg.channels, Vp = cfg.padded_vocab_size;
    const int pos = cuda_kv_begin(kv, tokens, n, cfg.vocab_size);
    const ParamPtrsX& p = model->p;
    const size_t C3 = 3 * (size_t)C;

    encoder_forward(ctx, kv->x, kv->tokens, p.wte, p.wpe + (size_t)pos * C, 1, n, C);
    layernorm_forward(ctx, kv->ln, nullptr, nullptr, kv->x, p.ln1w, p.ln1b, n, C);
    for (int l = 0; l < L; l++) {
        const size_t lC = (size_t)l * C;
        floatX* cache = cuda_kv_layer(kv, l);  // (maxT,3C) this layer's cache
        // x = x + attproj(attention(qkv(ln1(x)))); ln1(x) is in ln already
        matmul_forward(ctx, cache + (size_t)pos * C3, nullptr, kv->ln, p.qkvw + lC * 3 * C, p.qkvb + lC * 3, n, C, 3 * C);
        cuda_kv_attention(ctx, kv, kv->atty, cache, n);
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
    return cuda_kv_finish(kv, ctx, n);
}

inline void gpt2_cuda_kv_free(GPT2CudaKV* kv) {
    cuda_kv_free(kv);
    void* bufs[] = {kv->x, kv->ln, kv->atty, kv->proj, kv->fch, kv->fch_gelu};
    for (void* b : bufs) CHECK_CUDA(cudaFree(b));
    *kv = GPT2CudaKV();
}
