// swiglu.h: the SwiGLU gate of Llama's MLP, forward and backward.
// defines: swiglu_forward, swiglu_backward
//
// inp (N, 2F) holds per row [gate (F) | up (F)], the two halves of one fused matmul;
// out (N, F) = silu(gate) * up, silu(z) = z * sigmoid(z).
// silu'(z) = s + z s (1 - s) with s = sigmoid(z).
#pragma once
#include <cstddef>
#include "vmath.h"  // defines: exp_f32

inline void swiglu_forward(float* out, const float* inp, int N, int F) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float* gate = inp + (size_t)i * 2 * F;
        const float* up = gate + F;
        float* o = out + (size_t)i * F;
        for (int j = 0; j < F; j++) {
            const float s = 1.0f / (1.0f + exp_f32(-gate[j]));
            o[j] = gate[j] * s * up[j];
        }
    }
}

// accumulates (+=) into dinp (N, 2F) the gradient of swiglu_forward, given dout (N, F)
inline void swiglu_backward(float* dinp, const float* inp, const float* dout, int N, int F) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float* gate = inp + (size_t)i * 2 * F;
        const float* up = gate + F;
        const float* d = dout + (size_t)i * F;
        float* dgate = dinp + (size_t)i * 2 * F;
        float* dup = dgate + F;
        for (int j = 0; j < F; j++) {
            const float z = gate[j];
            const float s = 1.0f / (1.0f + exp_f32(-z));
            dgate[j] += d[j] * up[j] * (s + z * s * (1.0f - s));
            dup[j] += d[j] * z * s;
        }
    }
}
