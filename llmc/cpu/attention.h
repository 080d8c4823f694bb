// attention.h: causal multi-head self-attention on the CPU (fp32, OpenMP), forward and backward.
// defines: attention_gather_transposed, attention_query_row, attention_forward_gqa, attention_backward_gqa,
//          attention_forward, attention_backward
//
// GPT-2: qkv (B,T,3C) holds per position [q (C) | k (C) | v (C)]; head h uses channels
// h*hs..(h+1)*hs-1 of each, hs = C/NH. Llama's grouped-query attention is the general case
// (attention_forward_gqa below), of which GPT-2's is the one with as many key/value heads as
// query heads. Every (b, head) pair is independent, so threads split them (each writes only
// its own head's channels: no races, no atomics).
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

// Grouped-query attention (Llama): NH query heads share NKV key/value heads, query head h
// reading key/value head h / (NH/NKV). qkv (B,T,(NH+2NKV)*hs) holds per position
// [q (NH*hs) | k (NKV*hs) | v (NKV*hs)]. GPT-2's multi-head attention is the case NKV = NH.
//
// out (B,T,NH*hs): per head, causal softmax(q k^T / sqrt(hs)) v, heads concatenated.
// att (B,NH,T,T): the softmax probabilities (saved for the backward); row t holds entries
// 0..t and zeros after. size_t offsets: B*NH*T*T overflows int at T=1024, B=64.
inline void attention_forward_gqa(float* out, float* att, const float* qkv, int B, int T, int NH, int NKV, int hs) {
    CHECK(NH > 0 && NKV > 0 && NH % NKV == 0 && hs > 0, "NH=%d NKV=%d hs=%d", NH, NKV, hs);
    CHECK(B >= 0 && T >= 0, "B=%d T=%d", B, T);
    const int group = NH / NKV;
    const size_t ld = (size_t)(NH + 2 * NKV) * hs, C = (size_t)NH * hs;
    const size_t k_off = C, v_off = C + (size_t)NKV * hs;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float* kT = (float*)xmalloc((size_t)hs * T * sizeof(float));  // this head's keys (hs,T)
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                const float* qkv_b = qkv + (size_t)b * T * ld;
                const size_t kv = (size_t)(h / group) * hs;
                attention_gather_transposed(kT, qkv_b + k_off + kv, ld, T, hs);
                for (int t = 0; t < T; t++) {
                    float* row = att + (((size_t)b * NH + h) * T + t) * T;
                    attention_query_row(row, out + ((size_t)b * T + t) * C + (size_t)h * hs, qkv_b + t * ld + h * hs, kT,
                                        T, qkv_b + v_off + kv, ld, t, hs, scale);
                    for (int s = t + 1; s < T; s++) row[s] = 0.0f;  // the masked future
                }
            }
        }
        free(kT);
    }
}

// GPT-2's: qkv (B,T,3C), NH heads of C/NH
inline void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
    CHECK(NH > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    attention_forward_gqa(out, att, qkv, B, T, NH, NH, C / NH);
}

// Accumulates (+=) into dqkv (B,T,(NH+2NKV)*hs) the gradient of attention_forward_gqa, given
// dout (B,T,NH*hs), the input qkv and the saved probabilities att (B,NH,T,T). Per query row t:
//   datt[s] = dout_t . v_s                       dv_s += att[s] dout_t
//   dpre[s] = att[s] (datt[s] - sum_u att[u] datt[u])    (softmax backward, O(t))
//   dq_t += scale sum_s dpre[s] k_s              dk_s += scale dpre[s] q_t
// Threads split the (b, key/value head) pairs, each taking the query heads of its group in
// order: no two threads write the same dk or dv, and the sums keep one order.
inline void attention_backward_gqa(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                                   int NH, int NKV, int hs) {
    CHECK(NH > 0 && NKV > 0 && NH % NKV == 0 && hs > 0, "NH=%d NKV=%d hs=%d", NH, NKV, hs);
    CHECK(B >= 0 && T >= 0, "B=%d T=%d", B, T);
    const int group = NH / NKV;
    const size_t ld = (size_t)(NH + 2 * NKV) * hs, C = (size_t)NH * hs;
    const size_t k_off = C, v_off = C + (size_t)NKV * hs;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel
    {
        float* vT = (float*)xmalloc((size_t)hs * T * sizeof(float));  // this head's values (hs,T)
        float* datt = (float*)xmalloc((size_t)T * sizeof(float));     // one row's gradient
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int kvh = 0; kvh < NKV; kvh++) {
                const float* qkv_b = qkv + (size_t)b * T * ld;
                float* dqkv_b = dqkv + (size_t)b * T * ld;
                const size_t kv = (size_t)kvh * hs;
                attention_gather_transposed(vT, qkv_b + v_off + kv, ld, T, hs);
                for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                    for (int t = 0; t < T; t++) {
                        const float* row = att + (((size_t)b * NH + h) * T + t) * T;
                        const float* d = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
                        // through out_t = sum_s row[s] v_s
                        for (int s = 0; s <= t; s++) datt[s] = 0.0f;
                        for (int i = 0; i < hs; i++) {
                            const float di = d[i];
                            const float* v_i = vT + (size_t)i * T;
                            for (int s = 0; s <= t; s++) datt[s] += di * v_i[s];
                        }
                        for (int s = 0; s <= t; s++) {
                            const float a = row[s];
                            float* dv = dqkv_b + s * ld + v_off + kv;
                            for (int i = 0; i < hs; i++) dv[i] += a * d[i];
                        }
                        // through the softmax; the scale of the scores folds in here
                        float dot = 0.0f;
                        for (int s = 0; s <= t; s++) dot += row[s] * datt[s];
                        for (int s = 0; s <= t; s++) datt[s] = row[s] * (datt[s] - dot) * scale;
                        // through score[s] = q_t . k_s
                        const float* q = qkv_b + t * ld + (size_t)h * hs;
                        float* dq = dqkv_b + t * ld + (size_t)h * hs;
                        for (int s = 0; s <= t; s++) {
                            const float g = datt[s];
                            const float* k = qkv_b + s * ld + k_off + kv;
                            float* dk = dqkv_b + s * ld + k_off + kv;
                            for (int i = 0; i < hs; i++) {
                                dq[i] += g * k[i];
                                dk[i] += g * q[i];
                            }
                        }
                    }
                }
            }
        }
        free(vT);
        free(datt);
    }
}

// GPT-2's: the gradient of attention_forward
inline void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                               int C, int NH) {
    CHECK(NH > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    attention_backward_gqa(dqkv, dout, qkv, att, B, T, NH, NH, C / NH);
}
