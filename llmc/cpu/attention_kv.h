// attention_kv.h: causal self-attention for generation on the CPU: new queries against a
// cache of every earlier position's keys and values (the KV cache), forward only.
// defines: attention_kv_forward_gqa, attention_kv_forward
//
// The cache is the qkv activation itself, kept for all positions so far: qkv (T,3C), row t
// = [q | k | v] of position t, head h at channels h*hs..(h+1)*hs-1 of each, hs = C/NH.
// The n new positions t0..t0+n-1 have their rows written already (by the qkv matmul);
// position t attends to rows 0..t.
//
// Each query row is attention_query_row (llmc/cpu/attention.h), which does for one row what
// attention_forward does for blocks of rows: the same operations in the same order, so a row
// computed here equals the full forward's bit for bit, and generation with the cache picks
// the same tokens as recomputing the sequence.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include "../utils.h"
#include "attention.h"  // defines: attention_gather_transposed, attention_query_row

// out (n, NH*hs): rows for positions t0..t0+n-1 of causal softmax(q k^T / sqrt(hs)) v, heads
// concatenated, grouped-query: query head h reads key/value head h / (NH/NKV). qkv
// (t0+n, (NH+2*NKV)*hs) is the cache, rows [q | k | v] (rows 0..t0+n-1 valid).
inline void attention_kv_forward_gqa(float* out, const float* qkv, int t0, int n, int NH, int NKV, int hs) {
    CHECK(NH > 0 && NKV > 0 && NH % NKV == 0 && hs > 0, "NH=%d NKV=%d hs=%d", NH, NKV, hs);
    CHECK(t0 >= 0 && n >= 0, "t0=%d n=%d", t0, n);
    const int group = NH / NKV;
    const size_t ld = (size_t)(NH + 2 * NKV) * hs, C = (size_t)NH * hs;
    const size_t k_off = C, v_off = C + (size_t)NKV * hs;
    const float scale = 1.0f / sqrtf((float)hs);
    const int T = t0 + n;  // positions in the cache after this call
#pragma omp parallel
    {
        float* row = (float*)xmalloc((size_t)T * sizeof(float));            // one query's scores (T)
        float* kT = (float*)xmalloc((size_t)hs * T * sizeof(float));        // this head's keys (hs,t+1)
#pragma omp for collapse(2) schedule(static)
        for (int i = 0; i < n; i++) {
            for (int h = 0; h < NH; h++) {
                const int t = t0 + i;
                const size_t kv = (size_t)(h / group) * hs;
                // the keys gathered transposed (stride t+1), then the forward's own row
                attention_gather_transposed(kT, qkv + k_off + kv, ld, t + 1, hs);
                attention_query_row(row, out + (size_t)i * C + (size_t)h * hs, qkv + t * ld + (size_t)h * hs, kT, t + 1,
                                    qkv + v_off + kv, ld, t, hs, scale);
            }
        }
        free(row);
        free(kT);
    }
}

// GPT-2's: qkv rows [q | k | v] of C each, NH heads of C/NH
inline void attention_kv_forward(float* out, const float* qkv, int t0, int n, int C, int NH) {
    CHECK(NH > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    attention_kv_forward_gqa(out, qkv, t0, n, NH, NH, C / NH);
}
