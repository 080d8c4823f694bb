// encoder.h: token + position embedding, forward and backward.
// defines: encoder_forward, encoder_backward
#pragma once
#include <cstddef>

// out (B,T,C) = wte[inp[b,t]] (C) + wpe[t] (C); inp (B,T) token ids, wte (Vp,C), wpe (maxT,C)
inline void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe,
                            int B, int T, int C) {
    #pragma omp parallel for
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        float* o = out + (size_t)bt * C;
        const float* tok = wte + (size_t)inp[bt] * C;
        const float* pos = wpe + (size_t)t * C;
        for (int c = 0; c < C; c++) o[c] = tok[c] + pos[c];
    }
}

// accumulates (+=): dwte rows of the tokens seen, dwpe rows 0..T-1. dout (B,T,C)
inline void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp,
                             int B, int T, int C) {
    // dwpe: each thread owns whole rows t, no races.
    #pragma omp parallel for
    for (int t = 0; t < T; t++) {
        float* dp = dwpe + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const float* d = dout + ((size_t)b * T + t) * C;
            for (int c = 0; c < C; c++) dp[c] += d[c];
        }
    }
    // dwte: the same token can repeat anywhere in the batch, so rows collide; a serial
    // pass in (b,t) order keeps the float sums deterministic.
    for (int bt = 0; bt < B * T; bt++) {
        float* dt = dwte + (size_t)inp[bt] * C;
        const float* d = dout + (size_t)bt * C;
        for (int c = 0; c < C; c++) dt[c] += d[c];
    }
}
