// crossentropy.h: the classifier's softmax + cross-entropy, fused; no probabilities stored.
// defines: crossentropy_forward, crossentropy_backward
//
// A row is 50,257 logits at GPT-2's vocabulary: the loops over it are written to vectorize
// (llmc/cpu/vmath.h's exp; the max and the sum in 16 independent lanes), with the sum of the
// exps in double.
#pragma once
#include <cmath>
#include <cstddef>
#include "vmath.h"  // defines: exp_f32

// The max of one row's V real entries, and the sum of exp(x_j - max) over them (in double):
// the row's softmax is exp(x_j - max) / sum.
struct SoftmaxRow {
    float max;
    double sum;
};

inline SoftmaxRow softmax_row_stats(const float* x, int V) {
    enum { LANES = 16 };
    float mx[LANES];
    for (int k = 0; k < LANES; k++) mx[k] = x[0];
    int j = 0;
    for (; j + LANES <= V; j += LANES)
        for (int k = 0; k < LANES; k++) mx[k] = x[j + k] > mx[k] ? x[j + k] : mx[k];
    float m = x[0];
    for (int k = 0; k < LANES; k++) m = mx[k] > m ? mx[k] : m;
    for (; j < V; j++) m = x[j] > m ? x[j] : m;
    double sum[LANES] = {};
    j = 0;
    for (; j + LANES <= V; j += LANES)
        for (int k = 0; k < LANES; k++) sum[k] += exp_f32(x[j + k] - m);
    double s = 0.0;
    for (int k = 0; k < LANES; k++) s += sum[k];
    for (; j < V; j++) s += exp_f32(x[j] - m);
    return {m, s};
}

// logits (N,Vp) with N = B*T rows: only the first V columns are real, the padding never
// counts. losses (N) = -log softmax(logits)[target] = log(sum) - (x_target - max).
inline void crossentropy_forward(float* losses, const float* logits, const int* targets,
                                 int N, int V, int Vp) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float* row = logits + (size_t)i * Vp;
        const SoftmaxRow st = softmax_row_stats(row, V);
        losses[i] = (float)(std::log(st.sum) - (double)(row[targets[i]] - st.max));
    }
}

// Overwrites logits with dlogits = (softmax(logits) - onehot(target)) * dloss, in place:
// the row's max and sum are taken before any entry is overwritten. Padded columns get 0.
inline void crossentropy_backward(float* logits, const int* targets, float dloss,
                                  int N, int V, int Vp) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float* row = logits + (size_t)i * Vp;
        const SoftmaxRow st = softmax_row_stats(row, V);
        const float scale = (float)(dloss / st.sum);  // softmax_j * dloss = exp(x_j - max) * scale
        for (int j = 0; j < V; j++) row[j] = exp_f32(row[j] - st.max) * scale;
        row[targets[i]] -= dloss;
        for (int j = V; j < Vp; j++) row[j] = 0.0f;
    }
}
