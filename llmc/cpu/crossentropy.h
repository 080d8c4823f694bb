// crossentropy.h: the classifier's softmax + cross-entropy, fused; no probabilities stored.
// defines: crossentropy_forward, crossentropy_backward
#pragma once
#include <cmath>
#include <cstddef>

// log(sum_j exp(x_j)) over the V real entries of one row, shifted by the max for safety
inline double logsumexp_row(const float* x, int V) {
    float mx = x[0];
    for (int j = 1; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    double s = 0.0;
    for (int j = 0; j < V; j++) s += std::exp((double)(x[j] - mx));
    return mx + std::log(s);
}

// logits (N,Vp) with N = B*T rows: only the first V columns are real, the padding never
// counts. losses (N) = -log softmax(logits)[target].
inline void crossentropy_forward(float* losses, const float* logits, const int* targets,
                                 int N, int V, int Vp) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float* row = logits + (size_t)i * Vp;
        losses[i] = (float)(logsumexp_row(row, V) - row[targets[i]]);
    }
}

// Overwrites logits with dlogits = (softmax(logits) - onehot(target)) * dloss, in place:
// the row's logsumexp is taken before any entry is overwritten. Padded columns get 0.
inline void crossentropy_backward(float* logits, const int* targets, float dloss,
                                  int N, int V, int Vp) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        float* row = logits + (size_t)i * Vp;
        double lse = logsumexp_row(row, V);
        for (int j = 0; j < V; j++) {
            float p = (float)std::exp((double)row[j] - lse);
            row[j] = (p - (j == targets[i] ? 1.0f : 0.0f)) * dloss;
        }
        for (int j = V; j < Vp; j++) row[j] = 0.0f;
    }
}
