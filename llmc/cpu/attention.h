// attention.h: causal multi-head self-attention on the CPU (fp32, OpenMP), forward and backward.
// defines: attention_gather_transposed, attention_query_row, attention_forward, attention_backward
//
// qkv (B,T,3C) holds per position [q (C) | k (C) | v (C)]; head h uses channels
// h*hs..(h+1)*hs-1 of each, hs = C/NH. Every (b, h) pair is independent, so threads split
// them (each writes only its own head's channels: no races, no atomics).
//
// Vectorizing without -ffast-math: the compiler will not reorder a float sum, so the loops
// here are written as axpy's (y[j] += a * x[j] over contiguous j), never as dot products.
// For the q.k scores that means holding this head's keys transposed, kT (hs,T): then
// score[s] += q[i] * kT[i][s] runs along s. Same for the values in the backward pass.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include "../utils.h"

// Copies channels [off, off+hs) of the T rows of x (row stride ld) into dst (hs,T), transposed.
inline void attention_gather_transposed(float* dst, const float* x, size_t ld, int T, int hs) {
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < hs; i++) dst[(size_t)i * T + t] = x[t * ld + i];
    }
}

// One query (position t of one head): row[0..t] = softmax(scale * q . k_s) over the keys
// s = 0..t, held transposed in kT (hs, ld), and o (hs) = sum_s row[s] v_s, value s at
// v + s*ldv. The forward and the KV-cache generation (attention_kv.h) both call it, so a
// position's output is the same bits either way.
inline void attention_query_row(float* row, float* o, const float* q, const float* kT, size_t ld, const float* v,
                                size_t ldv, int t, int hs, float scale) {
    // scores: row[s] = q . k_s for s <= t, accumulated one channel at a time
    for (int s = 0; s <= t; s++) row[s] = 0.0f;
    for (int i = 0; i < hs; i++) {
        const float qi = q[i] * scale;
        const float* k_i = kT + (size_t)i * ld;
        for (int s = 0; s <= t; s++) row[s] += qi * k_i[s];
    }
    // softmax over 0..t, shifted by the max for stability
    float maxval = row[0];
    for (int s = 1; s <= t; s++) maxval = fmaxf(maxval, row[s]);
    float sum = 0.0f;
    for (int s = 0; s <= t; s++) {
        row[s] = expf(row[s] - maxval);
        sum += row[s];
    }
    const float inv = 1.0f / sum;
    for (int s = 0; s <= t; s++) row[s] *= inv;
    // o = sum_s row[s] v_s
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int s = 0; s <= t; s++) {
        const float a = row[s];
        const float* vs = v + s * ldv;
        for (int i = 0; i < hs; i++) o[i] += a * vs[i];
    }
}

// out (B,T,C): per head, causal softmax(q k^T / sqrt(hs)) v, heads concatenated.
// att (B,NH,T,T): the softmax probabilities (saved for the backward); row t holds entries
// 0..t and zeros after. size_t offsets: B*NH*T*T overflows int at T=1024, B=64.
inline void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C,
                              int NH) {
    CHECK(NH > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    CHECK(B >= 0 && T >= 0, "B=%d T=%d", B, T);
    const int hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float* kT = (float*)xmalloc((size_t)hs * T * sizeof(float));  // this head's keys (hs,T)
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                const float* qkv_b = qkv + (size_t)b * T * C3;
                attention_gather_transposed(kT, qkv_b + C + h * hs, C3, T, hs);
                for (int t = 0; t < T; t++) {
                    float* row = att + (((size_t)b * NH + h) * T + t) * T;
                    attention_query_row(row, out + ((size_t)b * T + t) * C + h * hs, qkv_b + t * C3 + h * hs, kT, T,
                                        qkv_b + 2 * C + h * hs, C3, t, hs, scale);
                    for (int s = t + 1; s < T; s++) row[s] = 0.0f;  // the masked future
                }
            }
        }
        free(kT);
    }
}

// Accumulates (+=) into dqkv (B,T,3C) the gradient of attention_forward, given dout (B,T,C),
// the input qkv and the saved probabilities att (B,NH,T,T). Per query row t:
//   datt[s] = dout_t . v_s                       dv_s += att[s] dout_t
//   dpre[s] = att[s] (datt[s] - sum_u att[u] datt[u])    (softmax backward, O(t))
//   dq_t += scale sum_s dpre[s] k_s              dk_s += scale dpre[s] q_t
inline void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att,
                               int B, int T, int C, int NH) {
    CHECK(NH > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    CHECK(B >= 0 && T >= 0, "B=%d T=%d", B, T);
    const int hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float* vT = (float*)xmalloc((size_t)hs * T * sizeof(float));  // this head's values (hs,T)
        float* datt = (float*)xmalloc((size_t)T * sizeof(float));     // one row's gradient
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                const float* qkv_b = qkv + (size_t)b * T * C3;
                float* dqkv_b = dqkv + (size_t)b * T * C3;
                attention_gather_transposed(vT, qkv_b + 2 * C + h * hs, C3, T, hs);
                for (int t = 0; t < T; t++) {
                    const float* row = att + (((size_t)b * NH + h) * T + t) * T;
                    const float* d = dout + ((size_t)b * T + t) * C + h * hs;
                    // through out_t = sum_s row[s] v_s
                    for (int s = 0; s <= t; s++) datt[s] = 0.0f;
                    for (int i = 0; i < hs; i++) {
                        const float di = d[i];
                        const float* v_i = vT + (size_t)i * T;
                        for (int s = 0; s <= t; s++) datt[s] += di * v_i[s];
                    }
                    for (int s = 0; s <= t; s++) {
                        const float a = row[s];
                        float* dv = dqkv_b + s * C3 + 2 * C + h * hs;
                        for (int i = 0; i < hs; i++) dv[i] += a * d[i];
                    }
                    // through the softmax; the scale of the scores folds in here
                    float dot = 0.0f;
                    for (int s = 0; s <= t; s++) dot += row[s] * datt[s];
                    for (int s = 0; s <= t; s++) datt[s] = row[s] * (datt[s] - dot) * scale;
                    // through score[s] = q_t . k_s
                    const float* q = qkv_b + t * C3 + h * hs;
                    float* dq = dqkv_b + t * C3 + h * hs;
                    for (int s = 0; s <= t; s++) {
                        const float g = datt[s];
                        const float* k = qkv_b + s * C3 + C + h * hs;
                        float* dk = dqkv_b + s * C3 + C + h * hs;
                        for (int i = 0; i < hs; i++) {
                            dq[i] += g * k[i];
                            dk[i] += g * q[i];
                        }
                    }
                }
            }
        }
        free(vT);
        free(datt);
    }
}
