// gelu.h: GELU with GPT-2's tanh approximation, forward and backward.
// defines: gelu_forward, gelu_backward
//
// 0.5 (1 + tanh(u)) is the logistic sigmoid of 2u, so with s = 1 / (1 + exp(-2u)):
//   gelu(x)  = x s
//   gelu'(x) = s + x * 2 s (1 - s) * du/dx     (tanh' = 1 - tanh^2 = 4 s (1 - s))
// One exp and one division per value, which vectorize (llmc/cpu/vmath.h); tanhf would not.
#pragma once
#include <cmath>
#include <cstddef>
#include "vmath.h"  // defines: exp_f32

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)

// s = sigmoid(2u) for u = sqrt(2/pi) (x + 0.044715 x^3)
inline float gelu_sigmoid(float x) {
    const float u = GELU_SCALE * (x + 0.044715f * x * x * x);
    return 1.0f / (1.0f + exp_f32(-2.0f * u));
}

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise over N values
inline void gelu_forward(float* out, const float* inp, size_t N) {
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) out[i] = inp[i] * gelu_sigmoid(inp[i]);
}

// accumulates (+=): dinp += gelu'(inp) * dout
inline void gelu_backward(float* dinp, const float* inp, const float* dout, size_t N) {
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        const float x = inp[i];
        const float s = gelu_sigmoid(x);
        const float du = GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += (s + 2.0f * x * s * (1.0f - s) * du) * dout[i];
    }
}
