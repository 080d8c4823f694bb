// llama_debug_state.h: reads the debug state test/llama_reference.py writes (a Llama written
// apart from the C++, computed in float64), for the CPU's test_llama_debug.cpp and the GPU's
// test_llama_debug.cu alike.
// The file (little-endian): header 256 int32: [0] 20241124, [1] 1, [2] B, [3] T, [4] V, [5] Vp,
// [6] C, [7] L, [8] NH, [9] NKV, [10] F, [11] maxT, [12] nsteps; [20..27] float32 bits of
// norm_eps, rope_theta, lr, beta1, beta2, eps, weight_decay, grad_clip; [28..31] float32 bits of
// Llama 3.1's RoPE scaling factor, low_freq_factor, high_freq_factor, original context (all 0:
// none). Then x, y (B*T int32), the parameters in llama_param_table's order (float32), logits
// (B*T*V), loss, the gradients (same layout as the parameters), losses (nsteps), norms (nsteps).
// defines: LlamaDebug, llama_debug_read
#pragma once
#include <cstring>
#include <vector>

#include "../llmc/llama3.h"  // defines: Llama, LlamaConfig, llama_init, llama_config_problem

struct LlamaDebug {
    int B = 0, T = 0, nsteps = 0;
    float lr, beta1, beta2, eps, weight_decay, grad_clip, loss;
    std::vector<int> x, y;          // (B,T) inputs and targets
    std::vector<float> logits;      // (B,T,V)
    std::vector<float> grads;       // num_parameters, in the parameter table's layout
    std::vector<float> losses;      // nsteps: loss before each AdamW step
    std::vector<float> norms;       // nsteps: global grad norm before clipping
};

// Builds *host from the file's configuration (llama_init) with the file's initial parameters,
// and reads the rest into *d. Fails with one line naming the file on anything malformed.
inline void llama_debug_read(const char* path, Llama* host, LlamaDebug* d) {
    FILE* f = fopen_or_fail(path, "rb");
    int32_t h[256];
    fread_or_fail(h, sizeof(int32_t), 256, f, path);
    if (h[0] != 20241124 || h[1] != 1) fail("%s: not a Llama debug state (magic %d version %d)", path, h[0], h[1]);
    float fl[12];  // header words 20..31 are float32 bits
    memcpy(fl, h + 20, sizeof(fl));
    LlamaConfig c;
    c.vocab_size = h[4]; c.padded_vocab_size = h[5]; c.channels = h[6]; c.num_layers = h[7];
    c.num_heads = h[8]; c.num_kv_heads = h[9]; c.ffn_hidden = h[10]; c.max_seq_len = h[11];
    c.norm_eps = fl[0];
    c.rope_theta = fl[1];
    c.rope_scaling = {fl[8], fl[9], fl[10], fl[11]};
    const char* problem = llama_config_problem(c);
    if (problem != nullptr) fail("%s: config: %s", path, problem);
    d->B = h[2]; d->T = h[3]; d->nsteps = h[12];
    if (d->B < 1 || d->T < 1 || d->T > c.max_seq_len || d->nsteps < 0)
        fail("%s: B=%d T=%d nsteps=%d for maxT %d", path, d->B, d->T, d->nsteps, c.max_seq_len);
    d->lr = fl[2]; d->beta1 = fl[3]; d->beta2 = fl[4]; d->eps = fl[5]; d->weight_decay = fl[6]; d->grad_clip = fl[7];
    llama_init(host, c);
    const size_t BT = (size_t)d->B * d->T, n = host->num_parameters;
    d->x.resize(BT); d->y.resize(BT); d->logits.resize(BT * c.vocab_size); d->grads.resize(n);
    d->losses.resize(d->nsteps); d->norms.resize(d->nsteps);
    fread_or_fail(d->x.data(), sizeof(int), BT, f, path);
    fread_or_fail(d->y.data(), sizeof(int), BT, f, path);
    fread_or_fail(host->params, sizeof(float), n, f, path);
    fread_or_fail(d->logits.data(), sizeof(float), d->logits.size(), f, path);
    fread_or_fail(&d->loss, sizeof(float), 1, f, path);
    fread_or_fail(d->grads.data(), sizeof(float), n, f, path);
    fread_or_fail(d->losses.data(), sizeof(float), d->nsteps, f, path);
    fread_or_fail(d->norms.data(), sizeof(float), d->nsteps, f, path);
    fclose(f);
}
