// sampler.h: drawing the next token from logits, with temperature, top-k and top-p (nucleus).
// defines: rng_next_u32, rng_next_f32, sampler_candidates, sample_logits
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

// The tokens sampling may pick from logits (V) of one position at temperature > 0, and their
// unnormalized probabilities w = exp((logit - max logit) / temperature), in the order the
// coin walks them. top_k > 0 keeps the k most likely tokens; top_p < 1 then keeps the
// smallest most-likely-first prefix whose probability reaches top_p (the token that crosses
// the line included, so at least one is left). Ties between equal logits go to the lower id.
// Order: with neither cut, every id in increasing order; with a cut, most likely first.
// Returns the argmax (the first of equal maxima).
inline int sampler_candidates(const float* logits, int V, float temperature, int top_k, float top_p,
                              std::vector<int>* ids, std::vector<double>* w) {
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    ids->resize(V);
    for (int i = 0; i < V; i++) (*ids)[i] = i;
    auto more_likely = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    int k = (top_k > 0 && top_k < V) ? top_k : V;
    if (k < V) std::partial_sort(ids->begin(), ids->begin() + k, ids->end(), more_likely);
    else if (top_p < 1.0f) std::sort(ids->begin(), ids->end(), more_likely);
    ids->resize(k);
    w->resize(k);
    double sum = 0.0;
    for (int i = 0; i < k; i++) {
        (*w)[i] = std::exp((double)(logits[(*ids)[i]] - logits[best]) / temperature);
        sum += (*w)[i];
    }
    if (top_p < 1.0f) {
        double acc = 0.0;
        int keep = 0;
        while (keep < k && (keep == 0 || acc < (double)top_p * sum)) acc += (*w)[keep++];
        ids->resize(keep);
        w->resize(keep);
    }
    return best;
}

// logits (V) of one position. temperature 0 picks the argmax; top_k > 0 keeps the k most
// likely tokens; top_p < 1 keeps the nucleus (sampler_candidates). coin is uniform in [0,1).
// With top_p = 1 (the trainer's samples) the draw is the same as before top-p existed.
inline int sample_logits(const float* logits, int V, float temperature, int top_k, float coin,
                         float top_p = 1.0f) {
    std::vector<int> ids;
    std::vector<double> w;
    if (temperature <= 0.0f) {
        int best = 0;
        for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
        return best;
    }
    sampler_candidates(logits, V, temperature, top_k, top_p, &ids, &w);
    const int n = (int)ids.size();
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += w[i];
    double target = coin * sum, acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += w[i];
        if (target < acc) return ids[i];
    }
    return ids[n - 1];
}
