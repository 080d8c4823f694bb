// llama3_kv.h: the Llama 3 model of llmc/llama3.h run for generation on the CPU, with a KV
// cache: the prompt goes through once, then each new token alone, attending to the cached
// keys (already turned by RoPE at their positions) and values of every earlier position.
// defines: LlamaKV, llama_kv_init, llama_kv_forward, llama_kv_free
//
// Glossary as llmc/llama3.h; n = positions in one call, pos = positions already cached.
// Per call, llama_forward's layers on the n new rows only; RMSNorm and the head on the last
// row only at the end. Every layer works row by row, RoPE turns row t by position t's angles
// and attention_kv_forward_gqa repeats attention_forward_gqa's arithmetic, so the logits equal
// llama_forward's on the whole sequence bit for bit.
#pragma once
#include <cstring>
#include <vector>

#include "llama3.h"            // defines: Llama, LlamaConfig, LlamaParams, and the CPU layers
#include "cpu/attention_kv.h"  // defines: attention_kv_forward_gqa

struct LlamaKV {
    int maxT = 0;               // positions the cache holds
    int pos = 0;                // positions cached so far
    float* qkv = nullptr;       // (L,maxT,QKV) the cache: q|k|v of every position so far, per layer, after RoPE
    float* x = nullptr;         // (maxT,C) the residual stream
    float* rms = nullptr;       // (maxT,C) an RMSNorm output
    float* rstd = nullptr;      // (maxT) its statistics: written, never read
    float* atty = nullptr;      // (maxT,C) attention output
    float* proj = nullptr;      // (maxT,C) a projection's output before the residual add
    float* fch = nullptr;       // (maxT,2F) [gate | up]
    float* fch_swiglu = nullptr;  // (maxT,F)
    float* logits = nullptr;    // (Vp) of the last position of the last call
    std::vector<float> rope_cos, rope_sin;  // (maxT, hs/2)
};

// A cache for up to maxT positions (at most the model's).
inline void llama_kv_init(LlamaKV* kv, const LlamaConfig& cfg, int maxT) {
    CHECK(maxT >= 1 && maxT <= cfg.max_seq_len, "maxT=%d of %d", maxT, cfg.max_seq_len);
    const size_t T = maxT, C = cfg.channels, L = cfg.num_layers, F = cfg.ffn_hidden;
    const size_t hs = C / cfg.num_heads, QKV = (cfg.num_heads + 2 * (size_t)cfg.num_kv_heads) * hs;
    kv->maxT = maxT;
    kv->pos = 0;
    float** bufs[] = {&kv->qkv, &kv->x, &kv->rms, &kv->rstd, &kv->atty, &kv->proj, &kv->fch, &kv->fch_swiglu, &kv->logits};
    const size_t sizes[] = {L * T * QKV, T * C, T * C, T, T * C, T * C, T * 2 * F, T * F, (size_t)cfg.padded_vocab_size};
    for (int i = 0; i < 9; i++) *bufs[i] = (float*)xmalloc(sizes[i] * sizeof(float));
    rope_table(&kv->rope_cos, &kv->rope_sin, maxT, (int)hs, cfg.rope_theta, cfg.rope_scaling);
}

// Appends n tokens at positions pos..pos+n-1 and returns the logits (Vp) of the last one.
// The cache must have room: pos + n <= maxT.
inline const float* llama_kv_forward(const Llama* model, LlamaKV* kv, const int* tokens, int n) {
    const LlamaConfig& cfg = model->config;
    const int L = cfg.num_layers, C = cfg.channels, NH = cfg.num_heads, NKV = cfg.num_kv_heads, F = cfg.ffn_hidden;
    const int V = cfg.vocab_size, Vp = cfg.padded_vocab_size, hs = C / NH, QKV = (NH + 2 * NKV) * hs;
    const int pos = kv->pos;
    CHECK(n >= 1 && pos + n <= kv->maxT, "pos=%d n=%d maxT=%d", pos, n, kv->maxT);
    for (int i = 0; i < n; i++)
        CHECK(tokens[i] >= 0 && tokens[i] < V, "token %d at %d outside vocab %d", tokens[i], i, V);
    const LlamaParams& p = model->p;
    const size_t NC = (size_t)n * C, half = hs / 2;

    for (int i = 0; i < n; i++) memcpy(kv->x + (size_t)i * C, p.wte + (size_t)tokens[i] * C, C * sizeof(float));
    for (int l = 0; l < L; l++) {
        const size_t lC = (size_t)l * C;
        float* cache = kv->qkv + (size_t)l * kv->maxT * QKV;  // (maxT,QKV) this layer's cache
        float* rows = cache + (size_t)pos * QKV;              // the new positions' rows
        // x = x + attproj(attention(rope(qkv(rms1(x))))): the new rows go into the cache, turned
        rmsnorm_forward(kv->rms, kv->rstd, kv->x, p.rms1w + lC, n, C, cfg.norm_eps);
        matmul_forward(rows, kv->rms, p.qkvw + (size_t)l * QKV * C, nullptr, 1, n, C, QKV);
        rope_forward(rows, 1, n, NH, NKV, hs, kv->rope_cos.data() + pos * half, kv->rope_sin.data() + pos * half);
        attention_kv_forward_gqa(kv->atty, cache, pos, n, NH, NKV, hs);
        matmul_forward(kv->proj, kv->atty, p.attprojw + lC * C, nullptr, 1, n, C, C);
        residual_forward(kv->x, kv->x, kv->proj, NC);
        // x = x + fcproj(swiglu(fc(rms2(x))))
        rmsnorm_forward(kv->rms, kv->rstd, kv->x, p.rms2w + lC, n, C, cfg.norm_eps);
        matmul_forward(kv->fch, kv->rms, p.fcw + lC * 2 * F, nullptr, 1, n, C, 2 * F);
        swiglu_forward(kv->fch_swiglu, kv->fch, n, F);
        matmul_forward(kv->proj, kv->fch_swiglu, p.fcprojw + lC * F, nullptr, 1, n, F, C);
        residual_forward(kv->x, kv->x, kv->proj, NC);
    }
    // the last row only: the final RMSNorm, then the head
    rmsnorm_forward(kv->rms, kv->rstd, kv->x + (size_t)(n - 1) * C, p.rmsfw, 1, C, cfg.norm_eps);
    matmul_forward(kv->logits, kv->rms, p.lmheadw, nullptr, 1, 1, C, Vp);
    kv->pos = pos + n;
    return kv->logits;
}

inline void llama_kv_free(LlamaKV* kv) {
    float** bufs[] = {&kv->qkv, &kv->x, &kv->rms, &kv->rstd, &kv->atty, &kv->proj, &kv->fch, &kv->fch_swiglu, &kv->logits};
    for (float** b : bufs) { free(*b); *b = nullptr; }
    kv->pos = 0;
}
