// model_cuda_kv.cuh: what the families' cached forwards for generation on the GPU share (GPT-2's
// in llmc/gpt2_cuda_kv.cuh, Llama 3's in llmc/llama_cuda_kv.cuh): the KV cache and its
// positions, the attention of new rows over it, the new tokens' way up and the logits' way back.
// defines: CudaKVCache, cuda_kv_init, cuda_kv_layer, cuda_kv_begin, cuda_kv_attention, cuda_kv_finish,
//          cuda_kv_free
//
// A layer's cache is its qkv activation kept for every position so far: (maxT,QKV), row t =
// [q (NH heads) | k (NKV heads) | v (NKV heads)] of position t, hs channels a head, QKV =
// (NH + 2 NKV) hs (GPT-2: NKV = NH, QKV = 3C). One call of a family's forward appends n tokens
// at positions pos..pos+n-1: cuda_kv_begin uploads them; each layer's qkv matmul writes their
// rows into cuda_kv_layer's cache and cuda_kv_attention attends; the family's head writes the
// last row's logits into logits, which cuda_kv_finish brings to the host, moving pos on.
// Attention: a prompt into an empty cache (pos == 0) is the training forward's causal
// attention over rows 0..n-1, the flash kernel of llmc/cuda/attention.cuh; later rows attend
// to the cache with llmc/cuda/attention_kv.cuh. Both read the shared key/value heads in place.
#pragma once
#include <vector>

#include "model_cuda.cuh"         // defines: cuda_malloc_or_fail
#include "cuda/common.cuh"        // defines: floatX, CudaContext, CHECK_CUDA, to_float
#include "cuda/attention.cuh"     // defines: attention_forward_gqa
#include "cuda/attention_kv.cuh"  // defines: attention_kv_forward_gqa

// What a family's cache struct starts with (GPT2CudaKV, LlamaCudaKV).
struct CudaKVCache {
    int maxT = 0;               // positions the cache holds
    int pos = 0;                // positions cached so far
    int NH = 0, NKV = 0, hs = 0;  // query heads, key/value heads, head size
    floatX* qkv = nullptr;      // (L,maxT,QKV) the cache: q|k|v of every position so far, per layer
    float* lse = nullptr;       // (NH,maxT) the flash kernel's log-sum-exp (written, unused)
    floatX* logits = nullptr;   // (Vp) of the last new row
    int* tokens = nullptr;      // (maxT) the new token ids on the device
    std::vector<floatX> logits_x;  // host copies of the logits
    std::vector<float> logits_f;
};

// A cache of maxT positions for L layers of NH query heads on NKV key/value heads of hs channels.
inline void cuda_kv_init(CudaKVCache* kv, int maxT, int L, int NH, int NKV, int hs, int Vp) {
    CHECK(maxT >= 1 && L >= 1 && NH >= 1 && NKV >= 1 && NH % NKV == 0 && hs >= 1 && Vp >= 1,
          "maxT=%d L=%d NH=%d NKV=%d hs=%d Vp=%d", maxT, L, NH, NKV, hs, Vp);
    const size_t T = maxT, QKV = (size_t)(NH + 2 * NKV) * hs, X = sizeof(floatX);
    kv->maxT = maxT;
    kv->pos = 0;
    kv->NH = NH;
    kv->NKV = NKV;
    kv->hs = hs;
    kv->qkv = (floatX*)cuda_malloc_or_fail(L * T * QKV * X, "KV cache");
    kv->lse = (float*)cuda_malloc_or_fail((size_t)NH * T * sizeof(float), "generation lse");
    kv->logits = (floatX*)cuda_malloc_or_fail((size_t)Vp * X, "logits");
    kv->tokens = (int*)cuda_malloc_or_fail(T * sizeof(int), "tokens");
    kv->logits_x.resize(Vp);
    kv->logits_f.resize(Vp);
}

// (maxT,QKV) layer l's cache
inline floatX* cuda_kv_layer(const CudaKVCache* kv, int l) {
    return kv->qkv + (size_t)l * kv->maxT * (kv->NH + 2 * kv->NKV) * kv->hs;
}

// Checks that n new tokens (host ids, each < V) fit and uploads them; returns pos, the
// position of the first.
inline int cuda_kv_begin(CudaKVCache* kv, const int* tokens, int n, int V) {
    CHECK(n >= 1 && kv->pos + n <= kv->maxT, "pos=%d n=%d maxT=%d", kv->pos, n, kv->maxT);
    for (int i = 0; i < n; i++)
        CHECK(tokens[i] >= 0 && tokens[i] < V, "token %d at %d outside vocab %d", tokens[i], i, V);
    // the stream is a blocking one: a plain copy is ordered with its kernels
    CHECK_CUDA(cudaMemcpy(kv->tokens, tokens, n * sizeof(int), cudaMemcpyHostToDevice));
    return kv->pos;
}

// out (n, NH*hs) = the attention of the n new rows, whose q|k|v rows are in cache (a layer's,
// cuda_kv_layer) already.
inline void cuda_kv_attention(const CudaContext& ctx, const CudaKVCache* kv, floatX* out, const floatX* cache, int n) {
    const int NH = kv->NH, NKV = kv->NKV, hs = kv->hs;
    if (kv->pos > 0) return attention_kv_forward_gqa(ctx, out, cache, kv->pos, n, NH, NKV, hs);
    attention_forward_gqa(ctx, out, kv->lse, cache, 1, n, NH, NKV, hs);
}

// The logits the family's head wrote (Vp floats, host) once the stream is done; the n new
// positions count as cached from now on.
inline const float* cuda_kv_finish(CudaKVCache* kv, const CudaContext& ctx, int n) {
    const size_t Vp = kv->logits_f.size();
    CHECK_CUDA(cudaMemcpyAsync(kv->logits_x.data(), kv->logits, Vp * sizeof(floatX), cudaMemcpyDeviceToHost,
                               ctx.stream));
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    for (size_t i = 0; i < Vp; i++) kv->logits_f[i] = to_float(kv->logits_x[i]);
    kv->pos += n;
    return kv->logits_f.data();
}

inline void cuda_kv_free(CudaKVCache* kv) {
    void* bufs[] = {kv->qkv, kv->lse, kv->logits, kv->tokens};
    for (void* b : bufs) CHECK_CUDA(cudaFree(b));
    *kv = CudaKVCache();
}
