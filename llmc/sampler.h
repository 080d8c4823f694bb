// sampler.h: drawing the next token from logits, with temperature and top-k.
// defines: rng_next_u32, rng_next_f32, sample_logits
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

// xorshift64*: tiny, and its whole state is one integer that a checkpoint can store
inline uint32_t rng_next_u32(uint64_t* state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}
inline float rng_next_f32(uint64_t* state) { return (rng_next_u32(state) >> 8) / 16777216.0f; }

// logits (V) of one position. temperature 0 picks the argmax; top_k > 0 keeps the k most
// likely tokens. coin is uniform in [0,1).
inline int sample_logits(const float* logits, int V, float temperature, int top_k, float coin) {
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    if (temperature <= 0.0f) return best;
    std::vector<int> ids(V);
    for (int i = 0; i < V; i++) ids[i] = i;
    int k = (top_k > 0 && top_k < V) ? top_k : V;
    if (k < V) {
        std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                          [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    }
    std::vector<double> p(k);
    double sum = 0.0;
    for (int i = 0; i < k; i++) {
        p[i] = std::exp((double)(logits[ids[i]] - logits[best]) / temperature);
        sum += p[i];
    }
    double target = coin * sum, acc = 0.0;
    for (int i = 0; i < k; i++) {
        acc += p[i];
        if (target < acc) return ids[i];
    }
    return ids[k - 1];
}
