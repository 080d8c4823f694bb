// debug_state.h: reads the debug state that test/pytorch_reference.py writes (header of
// 256 int32: 20240327, 3, B, T, nsteps, V, Vp, C, L, NH, maxT, and at [20..25] the float
// bits of lr, beta1, beta2, eps, weight decay, grad clip; then x, y, logits (B*T*V), loss,
// every gradient in checkpoint layout, nsteps losses and nsteps pre-clip grad norms).
// defines: DebugState, debug_state_read
#pragma once
#include <vector>

#include "../llmc/gpt2.h"  // defines: GPT2Config

struct DebugState {
    int B, T, nsteps, V;
    float lr, beta1, beta2, eps, weight_decay, grad_clip;
    std::vector<int> x, y;          // (B,T) inputs and targets
    std::vector<float> logits;      // (B,T,V)
    float loss;
    std::vector<float> grads;       // num_parameters, in the parameter table's layout
    std::vector<float> losses;      // nsteps: loss before each AdamW step
    std::vector<float> norms;       // nsteps: global grad norm before clipping
};

// Checks the header against the model it belongs to; num_parameters from its table.
inline void debug_state_read(const char* path, const GPT2Config& c, size_t num_parameters, DebugState* d) {
    FILE* f = fopen_or_fail(path, "rb");
    int32_t h[256];
    fread_or_fail(h, sizeof(int32_t), 256, f, path);
    CHECK(h[0] == 20240327 && h[1] == 3, "%s: bad debug header %d %d", path, h[0], h[1]);
    d->B = h[2]; d->T = h[3]; d->nsteps = h[4]; d->V = h[5];
    CHECK(d->V == c.vocab_size && h[6] == c.padded_vocab_size && h[7] == c.channels && h[8] == c.num_layers &&
          h[9] == c.num_heads && h[10] == c.max_seq_len, "%s: debug state disagrees with the model file", path);
    float hyper[6];
    memcpy(hyper, &h[20], sizeof(hyper));
    d->lr = hyper[0]; d->beta1 = hyper[1]; d->beta2 = hyper[2];
    d->eps = hyper[3]; d->weight_decay = hyper[4]; d->grad_clip = hyper[5];
    size_t BT = (size_t)d->B * d->T;
    d->x.resize(BT); d->y.resize(BT); d->logits.resize(BT * d->V); d->grads.resize(num_parameters);
    d->losses.resize(d->nsteps); d->norms.resize(d->nsteps);
    fread_or_fail(d->x.data(), sizeof(int), BT, f, path);
    fread_or_fail(d->y.data(), sizeof(int), BT, f, path);
    fread_or_fail(d->logits.data(), sizeof(float), BT * d->V, f, path);
    fread_or_fail(&d->loss, sizeof(float), 1, f, path);
    fread_or_fail(d->grads.data(), sizeof(float), num_parameters, f, path);
    fread_or_fail(d->losses.data(), sizeof(float), d->nsteps, f, path);
    fread_or_fail(d->norms.data(), sizeof(float), d->nsteps, f, path);
    fclose(f);
}
