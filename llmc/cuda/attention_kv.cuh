// attention_kv.cuh: causal self-attention for generation on the GPU: a few new queries
// (one, when decoding token by token) against the KV cache of every earlier position.
// Forward only, fp32 arithmetic for the fp32 and the bf16 build.
// defines: attention_kv_forward_gqa, attention_kv_forward, ATT_KV_MAX_HS
// CPU reference: llmc/cpu/attention_kv.h
//
// Layout: the cache is qkv (T,QKV), row t = [q (NH heads) | k (NKV heads) | v (NKV heads)] of
// position t, HS channels a head, QKV = (NH + 2 NKV) HS; query head h reads key/value head
// h / (NH/NKV) (grouped-query attention, Llama; GPT-2's is NKV = NH, rows (T,3C) as in
// llmc/cuda/attention.cuh). out (n,C), C = NH HS, for the new positions t0..t0+n-1, whose rows
// the qkv matmul has written already; position t sees rows 0..t.
//
// One block per (new position, query head), ATT_KV_WARPS warps. Warp w takes keys w, w+W, ...;
// per key its 32 lanes hold the channels d = lane + 32j (j < HS/32, up to 4) of q, k and v:
// score = warp sum of q.k, then an online softmax keeps a running max m, sum l and output
// o (rescaled by exp(m_old - m_new) when the max grows). No T x T scores, no shared memory
// that grows with T. At the end the warps' (m, l, o) are merged in warp order through
// shared memory: out = sum_w o_w exp(m_w - M) / sum_w l_w exp(m_w - M), M = max_w m_w.
// Fixed order everywhere: the result does not depend on timing.
// One query row is a latency-bound walk over the cache (2 loads per lane per key), fine for
// decoding; the prompt's many rows go through the flash kernel of attention.cuh instead.
#pragma once
#include <cmath>
#include "common.cuh"

constexpr int ATT_KV_WARPS = 8;
constexpr int ATT_KV_THREADS = ATT_KV_WARPS * 32;
constexpr int ATT_KV_MAX_HS = 128;
constexpr int ATT_KV_DIMS = ATT_KV_MAX_HS / 32;  // channels per lane

// grid (n, NH): block (i, h) writes out[i, h*HS .. h*HS+HS)
__global__ void __launch_bounds__(ATT_KV_THREADS)
attention_kv_forward_kernel(floatX* out, const floatX* qkv, int t0, int NH, int NKV, int HS) {
    const int i = blockIdx.x, h = blockIdx.y;
    const int t = t0 + i;  // this query's position: it sees keys 0..t
    const int C = NH * HS;
    const size_t ld = (size_t)(NH + 2 * NKV) * HS;  // a cache row
    // this query head's key and value head, from the start of a row
    const size_t k_at = C + (size_t)(h / (NH / NKV)) * HS, v_at = k_at + (size_t)NKV * HS;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float scale = 1.0f / sqrtf((float)HS);

    float q[ATT_KV_DIMS], o[ATT_KV_DIMS];
    const floatX* qrow = qkv + (size_t)t * ld + h * HS;  // int-bound(att_kv_channels)
#pragma unroll
    for (int j = 0; j < ATT_KV_DIMS; j++) {
        const int d = lane + 32 * j;
        q[j] = d < HS ? to_float(qrow[d]) * scale : 0.0f;
        o[j] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int s = warp; s <= t; s += ATT_KV_WARPS) {
        const floatX* k = qkv + (size_t)s * ld + k_at;
        const floatX* v = qkv + (size_t)s * ld + v_at;
        float dot = 0.0f;
#pragma unroll
        for (int j = 0; j < ATT_KV_DIMS; j++) {
            const int d = lane + 32 * j;
            if (d < HS) dot = fmaf(q[j], to_float(k[d]), dot);
        }
        const float score = warp_reduce_sum(dot);
        const float m_new = fmaxf(m, score);
        const float rescale = expf(m - m_new);  // 0 at this warp's first key (m = -inf)
        const float p = expf(score - m_new);
        l = l * rescale + p;
#pragma unroll
        for (int j = 0; j < ATT_KV_DIMS; j++) {
            const int d = lane + 32 * j;
            if (d < HS) o[j] = o[j] * rescale + p * to_float(v[d]);
        }
        m = m_new;
    }

    // merge the warps; a warp that had no key (t < ATT_KV_WARPS - 1) has m = -inf, l = o = 0
    __shared__ float warp_m[ATT_KV_WARPS], warp_l[ATT_KV_WARPS];
    __shared__ float warp_o[ATT_KV_WARPS][ATT_KV_MAX_HS];
    if (lane == 0) {
        warp_m[warp] = m;
        warp_l[warp] = l;
    }
#pragma unroll
    for (int j = 0; j < ATT_KV_DIMS; j++) {
        const int d = lane + 32 * j;
        if (d < HS) warp_o[warp][d] = o[j];
    }
    __syncthreads();
    for (int d = threadIdx.x; d < HS; d += ATT_KV_THREADS) {
        float M = warp_m[0];  // warp 0 always has key 0: M is finite
        for (int w = 1; w < ATT_KV_WARPS; w++) M = fmaxf(M, warp_m[w]);
        float sum = 0.0f, acc = 0.0f;
        for (int w = 0; w < ATT_KV_WARPS; w++) {
            const float f = expf(warp_m[w] - M);
            sum += warp_l[w] * f;
            acc += warp_o[w][d] * f;
        }
        out[(size_t)i * C + h * HS + d] = from_float<floatX>(acc / sum);  // int-bound(att_kv_channels)
    }
}

// out (n, NH*HS) = attention of the new positions t0..t0+n-1 over the cache qkv (t0+n, QKV): per
// query head causal softmax(q k^T / sqrt(HS)) v, head h on key/value head h / (NH/NKV). Any
// head size up to ATT_KV_MAX_HS.
inline void attention_kv_forward_gqa(const CudaContext& ctx, floatX* out, const floatX* qkv, int t0, int n, int NH,
                                     int NKV, int HS) {
    CHECK(n > 0 && t0 >= 0 && NH > 0 && NKV > 0 && NH % NKV == 0 && HS > 0, "t0=%d n=%d NH=%d NKV=%d HS=%d", t0, n,
          NH, NKV, HS);
    CHECK(HS <= ATT_KV_MAX_HS, "head size %d above %d", HS, ATT_KV_MAX_HS);
    CHECK(NH <= 65535, "NH=%d exceeds the grid's y limit", NH);  // int-bound: att_kv_channels (h*HS < 2^16 * 2^8)
    CHECK(out != nullptr && qkv != nullptr, "out=%p qkv=%p", (void*)out, (const void*)qkv);
    dim3 grid((unsigned)n, (unsigned)NH);
    attention_kv_forward_kernel<<<grid, ATT_KV_THREADS, 0, ctx.stream>>>(out, qkv, t0, NH, NKV, HS);
    CHECK_LAUNCH();
}

// GPT-2's: qkv rows [q | k | v] of C each, NH heads of C/NH
inline void attention_kv_forward(const CudaContext& ctx, floatX* out, const floatX* qkv, int t0, int n, int C,
                                 int NH) {
    CHECK(NH > 0 && C > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    attention_kv_forward_gqa(ctx, out, qkv, t0, n, NH, NH, C / NH);
}
