// attention_kv.cuh: causal self-attention for generation on the GPU: a few new queries
// (one, when decoding token by token) against the KV cache of every earlier position.
// Forward only, fp32 arithmetic for the fp32 and the bf16 build.
// defines: attention_kv_forward, ATT_KV_MAX_HS
// CPU reference: llmc/cpu/attention_kv.h
//
// Layout (as llmc/cuda/attention.cuh): the cache is qkv (T,3C), row t = [q | k | v] of
// position t, head h at channels h*HS..(h+1)*HS-1; out (n,C) for the new positions
// t0..t0+n-1, whose rows the qkv matmul has written already; position t sees rows 0..t.
//
// One block per (new position, head), ATT_KV_WARPS warps. Warp w takes keys w, w+W, ...;
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
attention_kv_forward_kernel(floatX* out, const floatX* qkv, int t0, int C, int NH) {
    const int i = blockIdx.x, h = blockIdx.y;
    const int t = t0 + i;  // this query's position: it sees keys 0..t
    const int HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float scale = 1.0f / sqrtf((float)HS);

    float q[ATT_KV_DIMS], o[ATT_KV_DIMS];
    const floatX* qrow = qkv + (size_t)t * C3 + h * HS;
#pragma unroll
    for (int j = 0; j < ATT_KV_DIMS; j++) {
        const int d = lane + 32 * j;
        q[j] = d < HS ? to_float(qrow[d]) * scale : 0.0f;
        o[j] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int s = warp; s <= t; s += ATT_KV_WARPS) {
        const floatX* k = qkv + (size_t)s * C3 + C + h * HS;
        const floatX* v = k + C;
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
        out[(size_t)i * C + h * HS + d] = from_float<floatX>(acc / sum);
    }
}

// out (n,C) = attention of the new positions t0..t0+n-1 over the cache qkv (t0+n, 3C):
// per head causal softmax(q k^T / sqrt(HS)) v. Any head size up to ATT_KV_MAX_HS.
inline void attention_kv_forward(const CudaContext& ctx, floatX* out, const floatX* qkv, int t0, int n, int C,
                                 int NH) {
    CHECK(n > 0 && t0 >= 0 && NH > 0 && C > 0 && C % NH == 0, "t0=%d n=%d C=%d NH=%d", t0, n, C, NH);
    CHECK(C / NH <= ATT_KV_MAX_HS, "head size C/NH=%d above %d", C / NH, ATT_KV_MAX_HS);
    CHECK(NH <= 65535, "NH=%d exceeds the grid's y limit", NH);
    CHECK(out != nullptr && qkv != nullptr, "out=%p qkv=%p", (void*)out, (const void*)qkv);
    dim3 grid((unsigned)n, (unsigned)NH);
    attention_kv_forward_kernel<<<grid, ATT_KV_THREADS, 0, ctx.stream>>>(out, qkv, t0, C, NH);
    CHECK_LAUNCH();
}
