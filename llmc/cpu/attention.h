// attention.h: causal multi-head self-attention on the CPU (fp32, OpenMP), forward and backward.
// defines: attention_gather_transposed, attention_softmax_row, attention_query_row, attention_head_forward,
//          attention_head_backward, attention_forward_gqa, attention_backward_gqa, attention_forward,
//          attention_backward
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
// Forward and backward work on blocks of ATT_QB query rows x ATT_KB keys (or channels) held
// in registers while the loop runs over the sum's index, so each key (value) vector loaded
// serves ATT_QB rows; every element is still summed in the same order as one row at a time
// (attention_query_row, which generation uses), so both give the same bits.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include "../utils.h"
#include "vmath.h"  // defines: exp_f32

constexpr int ATT_QB = 4;   // query rows per block
constexpr int ATT_KB = 16;  // keys (channels) per block: one AVX-512 vector, two AVX2 ones
// ATT_KB floats as one value (GCC's vector extension), so a block's sums stay in registers
typedef float AttVec __attribute__((vector_size(ATT_KB * sizeof(float))));
// The same type at any float's alignment, allowed to alias the floats: *att_at(p) loads
// ATT_KB floats from p (a pointer rather than a function that returns an AttVec, whose
// 64-byte return GCC warns about in builds without AVX-512, -Wpsabi)
typedef float AttVecAt __attribute__((vector_size(ATT_KB * sizeof(float)), aligned(alignof(float)), may_alias));
inline const AttVecAt* att_at(const float* p) { return reinterpret_cast<const AttVecAt*>(p); }

// Copies channels [off, off+hs) of the T rows of x (row stride ld) into dst (hs,T), transposed.
inline void attention_gather_transposed(float* dst, const float* x, size_t ld, int T, int hs) {
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < hs; i++) dst[(size_t)i * T + t] = x[t * ld + i];
    }
}

// row[0..t] := softmax(row[0..t]), shifted by the max for stability.
inline void attention_softmax_row(float* row, int t) {
    float maxval = row[0];
    for (int s = 1; s <= t; s++) maxval = fmaxf(maxval, row[s]);
    for (int s = 0; s <= t; s++) row[s] = exp_f32(row[s] - maxval);
    float sum = 0.0f;
    for (int s = 0; s <= t; s++) sum += row[s];
    const float inv = 1.0f / sum;
    for (int s = 0; s <= t; s++) row[s] *= inv;
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
    attention_softmax_row(row, t);
    // o = sum_s row[s] v_s
    for (int i = 0; i < hs; i++) o[i] = 0.0f;
    for (int s = 0; s <= t; s++) {
        const float a = row[s];
        const float* vs = v + s * ldv;
        for (int i = 0; i < hs; i++) o[i] += a * vs[i];
    }
}

// One head of the forward, ATT_QB query rows at a time. q (T rows, stride ldq) this head's
// queries; kT (hs, ldk) its keys transposed, zero from T to ldk (a multiple of ATT_KB); v (T
// rows, stride ldv) its values. att (T,T): the probabilities, zero past the diagonal; out (T
// rows, stride ldo): this head's output. sc: scratch of ATT_QB * ldk + ATT_QB * hs floats.
inline void attention_head_forward(float* att, float* out, size_t ldo, const float* q, size_t ldq, const float* kT,
                                   size_t ldk, const float* v, size_t ldv, int T, int hs, float scale, float* sc) {
    float* qs = sc + ATT_QB * ldk;  // the block's queries, scaled (rows past T: zero)
    for (int t0 = 0; t0 < T; t0 += ATT_QB) {
        const int nq = std::min(ATT_QB, T - t0), tmax = t0 + nq - 1;
        for (int r = 0; r < ATT_QB; r++)
            for (int i = 0; i < hs; i++) qs[r * hs + i] = r < nq ? q[(t0 + r) * ldq + i] * scale : 0.0f;
        // scores of keys 0..tmax, a block of ATT_KB keys at a time, summed over the channels
        const int nk = (tmax / ATT_KB + 1) * ATT_KB;
        for (int s0 = 0; s0 < nk; s0 += ATT_KB) {
            AttVec acc[ATT_QB] = {};
            for (int i = 0; i < hs; i++) {
                const AttVec k = *att_at(kT + (size_t)i * ldk + s0);
                for (int r = 0; r < ATT_QB; r++) acc[r] += qs[r * hs + i] * k;
            }
            for (int r = 0; r < ATT_QB; r++) memcpy(sc + r * ldk + s0, &acc[r], sizeof(acc[r]));
        }
        // each row's softmax over its keys 0..t; the rest of the block zero
        for (int r = 0; r < ATT_QB; r++) {
            float* row = sc + r * ldk;
            const int t = t0 + r;
            if (r < nq) attention_softmax_row(row, t);
            for (int s = r < nq ? t + 1 : 0; s < nk; s++) row[s] = 0.0f;
            if (r < nq) {
                float* arow = att + (size_t)t * T;
                memcpy(arow, row, (size_t)(t + 1) * sizeof(float));
                for (int s = t + 1; s < T; s++) arow[s] = 0.0f;  // the masked future
            }
        }
        // out = probabilities . values, ATT_KB channels at a time, summed over keys 0..tmax
        for (int i0 = 0; i0 < hs; i0 += ATT_KB) {
            const int ni = std::min(ATT_KB, hs - i0);
            AttVec acc[ATT_QB] = {};
            for (int s = 0; s <= tmax; s++) {
                AttVec vs;
                if (ni == ATT_KB) {
                    vs = *att_at(v + s * ldv + i0);
                } else {  // a head size that is not a multiple of ATT_KB: the last channels
                    vs = AttVec{};
                    memcpy(&vs, v + s * ldv + i0, (size_t)ni * sizeof(float));
                }
                for (int r = 0; r < ATT_QB; r++) acc[r] += sc[r * ldk + s] * vs;
            }
            for (int r = 0; r < nq; r++) memcpy(out + (t0 + r) * ldo + i0, &acc[r], (size_t)ni * sizeof(float));
        }
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
    const size_t ldk = ((size_t)T + ATT_KB - 1) / ATT_KB * ATT_KB;  // keys padded to whole blocks
#pragma omp parallel
    {
        float* kT = (float*)xmalloc((size_t)hs * ldk * sizeof(float));     // this head's keys (hs,ldk)
        memset(kT, 0, (size_t)hs * ldk * sizeof(float));                  // the padding stays zero
        float* sc = (float*)xmalloc((ATT_QB * ldk + ATT_QB * (size_t)hs) * sizeof(float));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < NH; h++) {
                const float* qkv_b = qkv + (size_t)b * T * ld;
                const size_t kv = (size_t)(h / group) * hs;
                for (int t = 0; t < T; t++)
                    for (int i = 0; i < hs; i++) kT[(size_t)i * ldk + t] = qkv_b[t * ld + k_off + kv + i];
                attention_head_forward(att + ((size_t)b * NH + h) * T * T, out + (size_t)b * T * C + (size_t)h * hs, C,
                                       qkv_b + (size_t)h * hs, ld, kT, ldk, qkv_b + v_off + kv, ld, T, hs, scale, sc);
            }
        }
        free(kT);
        free(sc);
    }
}

// GPT-2's: qkv (B,T,3C), NH heads of C/NH
inline void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
    CHECK(NH > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    attention_forward_gqa(out, att, qkv, B, T, NH, NH, C / NH);
}

// y[0..n) += a[r] * x[r*ldx + 0..n) for r = r0..r1-1 in turn, ATT_KB at a time in registers
// (n any size): y is loaded and stored once for all the rows.
inline void att_axpy_rows(float* y, const float* a, size_t lda, const float* x, size_t ldx, int r0, int r1, int n) {
    int i = 0;
    for (; i + ATT_KB <= n; i += ATT_KB) {
        AttVec acc = *att_at(y + i);
        for (int r = r0; r < r1; r++) acc += a[r * lda] * *att_at(x + r * ldx + i);
        memcpy(y + i, &acc, sizeof(acc));
    }
    for (; i < n; i++)
        for (int r = r0; r < r1; r++) y[i] += a[r * lda] * x[r * ldx + i];
}

// One query head of the backward, ATT_QB query rows at a time: accumulates (+=) the gradients
// of its queries into dq (T rows, stride ld) and of its key/value head into dk, dv (the same
// rows, other channels). q, k: its queries and keys (stride ld); vT (hs, ldk) its values
// transposed, zero from T to ldk; att (T,T) its probabilities; dout (T rows, stride ldo) the
// output's gradient. sc: scratch of ATT_QB * ldk + ATT_QB * hs floats. Every element is summed
// in the order of the one-row-at-a-time loop (rows t ascending, then s or i ascending).
inline void attention_head_backward(float* dq, float* dk, float* dv, size_t ld, const float* q, const float* k,
                                    const float* vT, size_t ldk, const float* att, const float* dout, size_t ldo,
                                    int T, int hs, float scale, float* sc) {
    float* ds = sc + ATT_QB * ldk;  // the block's output gradients (rows past T: zero)
    for (int t0 = 0; t0 < T; t0 += ATT_QB) {
        const int nq = std::min(ATT_QB, T - t0), tmax = t0 + nq - 1;
        for (int r = 0; r < ATT_QB; r++)
            for (int i = 0; i < hs; i++) ds[r * hs + i] = r < nq ? dout[(t0 + r) * ldo + i] : 0.0f;
        // through out_t = sum_s att[t][s] v_s: datt[s] = dout_t . v_s (in sc's rows), and
        // dv_s += att[t][s] dout_t
        const int nk = (tmax / ATT_KB + 1) * ATT_KB;
        for (int s0 = 0; s0 < nk; s0 += ATT_KB) {
            AttVec acc[ATT_QB] = {};
            for (int i = 0; i < hs; i++) {
                const AttVec v = *att_at(vT + (size_t)i * ldk + s0);
                for (int r = 0; r < ATT_QB; r++) acc[r] += ds[r * hs + i] * v;
            }
            for (int r = 0; r < ATT_QB; r++) memcpy(sc + r * ldk + s0, &acc[r], sizeof(acc[r]));
        }
        const float* att0 = att + (size_t)t0 * T;  // the block's first row
        for (int s = 0; s <= tmax; s++)
            att_axpy_rows(dv + s * ld, att0 + s, T, ds, hs, std::max(0, s - t0), nq, hs);
        // through the softmax; the scale of the scores folds in here
        for (int r = 0; r < nq; r++) {
            const int t = t0 + r;
            const float* row = att + (size_t)t * T;
            float* g = sc + r * ldk;
            float dot = 0.0f;
            for (int s = 0; s <= t; s++) dot += row[s] * g[s];
            for (int s = 0; s <= t; s++) g[s] = row[s] * (g[s] - dot) * scale;
        }
        // through score[s] = q_t . k_s: dq_t += sum_s g[s] k_s, dk_s += g[s] q_t
        for (int r = 0; r < nq; r++) {
            const int t = t0 + r;
            const float* g = sc + r * ldk;
            float* dqt = dq + t * ld;
            for (int i0 = 0; i0 < hs; i0 += ATT_KB) {
                if (i0 + ATT_KB > hs) {  // the last channels of a head size not a multiple of ATT_KB
                    for (int s = 0; s <= t; s++)
                        for (int i = i0; i < hs; i++) dqt[i] += g[s] * k[s * ld + i];
                    break;
                }
                AttVec acc = *att_at(dqt + i0);
                for (int s = 0; s <= t; s++) acc += g[s] * *att_at(k + s * ld + i0);
                memcpy(dqt + i0, &acc, sizeof(acc));
            }
        }
        for (int s = 0; s <= tmax; s++)
            att_axpy_rows(dk + s * ld, sc + s, ldk, q + t0 * ld, ld, std::max(0, s - t0), nq, hs);
    }
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
    const size_t ldk = ((size_t)T + ATT_KB - 1) / ATT_KB * ATT_KB;  // keys padded to whole blocks
#pragma omp parallel
    {
        float* vT = (float*)xmalloc((size_t)hs * ldk * sizeof(float));  // this head's values (hs,ldk)
        memset(vT, 0, (size_t)hs * ldk * sizeof(float));               // the padding stays zero
        float* sc = (float*)xmalloc((ATT_QB * ldk + ATT_QB * (size_t)hs) * sizeof(float));
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int kvh = 0; kvh < NKV; kvh++) {
                const float* qkv_b = qkv + (size_t)b * T * ld;
                float* dqkv_b = dqkv + (size_t)b * T * ld;
                const size_t kv = (size_t)kvh * hs;
                for (int t = 0; t < T; t++)
                    for (int i = 0; i < hs; i++) vT[(size_t)i * ldk + t] = qkv_b[t * ld + v_off + kv + i];
                for (int h = kvh * group; h < (kvh + 1) * group; h++)
                    attention_head_backward(dqkv_b + (size_t)h * hs, dqkv_b + k_off + kv, dqkv_b + v_off + kv, ld,
                                            qkv_b + (size_t)h * hs, qkv_b + k_off + kv, vT, ldk,
                                            att + ((size_t)b * NH + h) * T * T, dout + (size_t)b * T * C + (size_t)h * hs,
                                            C, T, hs, scale, sc);
            }
        }
        free(vT);
        free(sc);
    }
}

// GPT-2's: the gradient of attention_forward
inline void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                               int C, int NH) {
    CHECK(NH > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    attention_backward_gqa(dqkv, dout, qkv, att, B, T, NH, NH, C / NH);
}
