// rope.h: rotary position embedding (Llama), applied in place to the queries and keys.
// defines: RopeScaling, rope_frequency, rope_table, rope_forward, rope_backward
//
// Hugging Face transformers' convention ("rotate half"), which is how its Llama files store
// q_proj and k_proj: in a head vector x of hs values, channel i pairs with channel i + hs/2,
// and for position t the pair turns by the angle t * theta^(-2i/hs):
//   x'[i]        = x[i] cos - x[i + hs/2] sin
//   x'[i + hs/2] = x[i + hs/2] cos + x[i] sin
// A rotation's backward is the rotation by the opposite angle.
//
// Llama 3.1 stretches the slow frequencies for long contexts (Hugging Face's rope_type
// "llama3"): with wavelength w = 2 pi / f of frequency f = theta^(-2i/hs) and the context the
// model was first trained at, M: w < M / high_freq_factor keeps f; w > M / low_freq_factor
// divides it by factor; in between it blends the two, s = (M / w - low) / (high - low),
// f' = (1 - s) f / factor + s f.
#pragma once
#include <cmath>
#include <cstddef>
#include <vector>

struct RopeScaling {
    float factor = 0.0f;            // 0: no scaling
    float low_freq_factor = 0.0f;
    float high_freq_factor = 0.0f;
    float original_max_pos = 0.0f;  // M
};

// frequency i of hs/2, theta^(-2i/hs), with Llama 3.1's scaling when scaling.factor > 0
inline double rope_frequency(int i, int hs, double theta, const RopeScaling& scaling) {
    const double f = std::pow(theta, -2.0 * i / hs);
    if (!(scaling.factor > 0.0f)) return f;
    const double w = 2.0 * M_PI / f, M = scaling.original_max_pos;
    const double low = scaling.low_freq_factor, high = scaling.high_freq_factor;
    if (w < M / high) return f;
    if (w > M / low) return f / scaling.factor;
    const double s = (M / w - low) / (high - low);
    return (1.0 - s) * f / scaling.factor + s * f;
}

// cos and sin (T, hs/2) of angle t * frequency i, worked out in double
inline void rope_table(std::vector<float>* cos_t, std::vector<float>* sin_t, int T, int hs, double theta,
                       const RopeScaling& scaling = RopeScaling()) {
    const int half = hs / 2;
    cos_t->resize((size_t)T * half);
    sin_t->resize((size_t)T * half);
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < half; i++) {
            const double angle = t * rope_frequency(i, hs, theta, scaling);
            (*cos_t)[(size_t)t * half + i] = (float)std::cos(angle);
            (*sin_t)[(size_t)t * half + i] = (float)std::sin(angle);
        }
    }
}

// Turns heads [0, heads) of x (B,T,ld), each hs values from channel 0 of a row, by +angle
// (sign 1) or -angle (sign -1). cos_t, sin_t from rope_table.
inline void rope_rotate(float* x, size_t ld, int B, int T, int heads, int hs, const float* cos_t,
                        const float* sin_t, float sign) {
    const int half = hs / 2;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float* row = x + ((size_t)b * T + t) * ld;
            const float* c = cos_t + (size_t)t * half;
            const float* s = sin_t + (size_t)t * half;
            for (int h = 0; h < heads; h++) {
                float* lo = row + (size_t)h * hs;
                float* hi = lo + half;
                for (int i = 0; i < half; i++) {
                    const float a = lo[i], bv = hi[i], si = sign * s[i];
                    lo[i] = a * c[i] - bv * si;
                    hi[i] = bv * c[i] + a * si;
                }
            }
        }
    }
}

// qkv (B,T,(NH+2NKV)*hs) = [q (NH heads) | k (NKV heads) | v]: turns q and k (which sit side by
// side: NH + NKV heads from channel 0), in place
inline void rope_forward(float* qkv, int B, int T, int NH, int NKV, int hs, const float* cos_t, const float* sin_t) {
    rope_rotate(qkv, (size_t)(NH + 2 * NKV) * hs, B, T, NH + NKV, hs, cos_t, sin_t, 1.0f);
}

// dqkv: the gradient with respect to the turned q and k becomes the one with respect to q and
// k before the turn, in place (v's part is left alone)
inline void rope_backward(float* dqkv, int B, int T, int NH, int NKV, int hs, const float* cos_t, const float* sin_t) {
    rope_rotate(dqkv, (size_t)(NH + 2 * NKV) * hs, B, T, NH + NKV, hs, cos_t, sin_t, -1.0f);
}
