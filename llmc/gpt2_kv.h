// gpt2_kv.h: the GPT-2 model of llmc/gpt2.h run for generation on the CPU, with a KV cache:
// the prompt goes through once, then each new token alone, attending to the cached keys
// and values of every earlier position instead of recomputing them.
// defines: GPT2KV, gpt2_kv_init, gpt2_kv_reset, gpt2_kv_forward, gpt2_kv_free
//
// Glossary as llmc/gpt2.h; n = positions in one call, pos = positions already cached.
// Per call, the same layers as gpt2_forward, on the n new rows only:
//   encoder (wte + wpe[pos..]) -> L x [ln1, qkv matmul (into the cache), attention over the
//   cache, proj + residual, ln2, fc + gelu, fcproj + residual] -> lnf -> classifier
// with LayerNorm and the classifier on the last row only at the end (its logits are what
// sampling needs). Every layer works row by row (LayerNorm, matmul, GELU, residual: each
// output row depends only on its input row, summed in the same order whatever the number
// of rows) and attention_kv_forward repeats attention_forward's arithmetic, so the logits
// equal gpt2_forward's on the whole sequence bit for bit.
#pragma once
#include <cstring>

#include "gpt2.h"              // defines: GPT2, GPT2Config, ParamPtrs, and the CPU layers
#include "cpu/attention_kv.h"  // defines: attention_kv_forward

struct GPT2KV {
    int maxT = 0;           // positions the cache holds (the model's maxT)
    int pos = 0;            // positions cached so far
    float* qkv = nullptr;   // (L,maxT,3C) the cache: q|k|v of every position so far, per layer
    // scratch for up to maxT new rows
    float* x = nullptr;         // (maxT,C) the residual stream
    float* ln = nullptr;        // (maxT,C) a LayerNorm output
    float* atty = nullptr;      // (maxT,C) attention output
    float* proj = nullptr;      // (maxT,C) a projection's output before the residual add
    float* fch = nullptr;       // (maxT,4C)
    float* fch_gelu = nullptr;  // (maxT,4C)
    float* mean = nullptr;      // (maxT) LayerNorm's statistics: the layer writes them, nothing reads them
    float* rstd = nullptr;      // (maxT)
    float* logits = nullptr;    // (Vp) of the last position of the last call
};

inline void gpt2_kv_init(GPT2KV* kv, const GPT2Config& cfg) {
    const size_t maxT = cfg.max_seq_len, C = cfg.channels, L = cfg.num_layers;
    kv->maxT = cfg.max_seq_len;
    kv->pos = 0;
    kv->qkv = (float*)xmalloc(L * maxT * 3 * C * sizeof(float));
    kv->x = (float*)xmalloc(maxT * C * sizeof(float));
    kv->ln = (float*)xmalloc(maxT * C * sizeof(float));
    kv->atty = (float*)xmalloc(maxT * C * sizeof(float));
    kv->proj = (float*)xmalloc(maxT * C * sizeof(float));
    kv->fch = (float*)xmalloc(maxT * 4 * C * sizeof(float));
    kv->fch_gelu = (float*)xmalloc(maxT * 4 * C * sizeof(float));
    kv->mean = (float*)xmalloc(maxT * sizeof(float));
    kv->rstd = (float*)xmalloc(maxT * sizeof(float));
    kv->logits = (float*)xmalloc((size_t)cfg.padded_vocab_size * sizeof(float));
}

// Forgets the cached positions: the next call starts a new sequence at position 0.
inline void gpt2_kv_reset(GPT2KV* kv) { kv->pos = 0; }

// Appends n tokens at positions pos..pos+n-1 and returns the logits (Vp) of the last one.
// The cache must have room: pos + n <= maxT.
inline const float* gpt2_kv_forward(const GPT2* model, GPT2KV* kv, const int* tokens, int n) {
    const GPT2Config& cfg = model->config;
    const int L = cfg.num_layers, C = cfg.channels, NH = cfg.num_heads, V = cfg.vocab_size;
    const int Vp = cfg.padded_vocab_size, pos = kv->pos;
    CHECK(n >= 1 && pos + n <= kv->maxT, "pos=%d n=%d maxT=%d", pos, n, kv->maxT);
    for (int i = 0; i < n; i++)
        CHECK(tokens[i] >= 0 && tokens[i] < V, "token %d at %d outside vocab %d", tokens[i], i, V);
    const ParamPtrs& p = model->p;
    const size_t C3 = 3 * (size_t)C, NC = (size_t)n * C;

    // wpe rows pos..pos+n-1: the encoder adds wpe[i] to row i, so shift the table
    encoder_forward(kv->x, tokens, p.wte, p.wpe + (size_t)pos * C, 1, n, C);
    for (int l = 0; l < L; l++) {
        const size_t lC = (size_t)l * C;
        float* cache = kv->qkv + (size_t)l * kv->maxT * C3;  // (maxT,3C) this layer's cache
        // x = x + attproj(attention(qkv(ln1(x)))); the new q|k|v rows go straight into the cache
        layernorm_forward(kv->ln, kv->mean, kv->rstd, kv->x, p.ln1w + lC, p.ln1b + lC, n, C);
        matmul_forward(cache + (size_t)pos * C3, kv->ln, p.qkvw + lC * 3 * C, p.qkvb + lC * 3, 1, n, C, 3 * C);
        attention_kv_forward(kv->atty, cache, pos, n, C, NH);
        matmul_forward(kv->proj, kv->atty, p.attprojw + lC * C, p.attprojb + lC, 1, n, C, C);
        residual_forward(kv->x, kv->x, kv->proj, NC);
        // x = x + fcproj(gelu(fc(ln2(x))))
        layernorm_forward(kv->ln, kv->mean, kv->rstd, kv->x, p.ln2w + lC, p.ln2b + lC, n, C);
        matmul_forward(kv->fch, kv->ln, p.fcw + lC * 4 * C, p.fcb + lC * 4, 1, n, C, 4 * C);
        gelu_forward(kv->fch_gelu, kv->fch, NC * 4);
        matmul_forward(kv->proj, kv->fch_gelu, p.fcprojw + lC * 4 * C, p.fcprojb + lC, 1, n, 4 * C, C);
        residual_forward(kv->x, kv->x, kv->proj, NC);
    }
    // the last row only: lnf, then the tied classifier
    layernorm_forward(kv->ln, kv->mean, kv->rstd, kv->x + (size_t)(n - 1) * C, p.lnfw, p.lnfb, 1, C);
    matmul_forward(kv->logits, kv->ln, p.wte, nullptr, 1, 1, C, Vp);
    kv->pos = pos + n;
    return kv->logits;
}

inline void gpt2_kv_free(GPT2KV* kv) {
    float** bufs[] = {&kv->qkv, &kv->x, &kv->ln, &kv->atty, &kv->proj, &kv->fch, &kv->fch_gelu,
                      &kv->mean, &kv->rstd, &kv->logits};
    for (float** b : bufs) { free(*b); *b = nullptr; }
    kv->pos = 0;
}
