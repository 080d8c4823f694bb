// rope.cuh: rotary position embedding on the GPU (Llama), in place on the queries and keys.
// defines: rope_forward, rope_backward
// CPU reference: llmc/cpu/rope.h (its convention: channel i of a head turns with i + hs/2)
//
// The cos/sin table (T, hs/2) is fp32 in device memory, made on the host by the CPU's
// rope_table, so both sides turn by the same angles. One thread per (row, head, pair).
#pragma once
#include "common.cuh"

__global__ void rope_rotate_kernel(floatX* x, size_t ld, int BT, int T, int heads, int hs, const float* cos_t,
                                   const float* sin_t, float sign) {
    const int half = hs / 2;
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * heads * half) return;
    const int pair = (int)(i % half), head = (int)(i / half % heads);
    const size_t row = i / ((size_t)half * heads);
    const int t = (int)(row % T);
    floatX* lo = x + row * ld + (size_t)head * hs + pair;
    floatX* hi = lo + half;
    const float c = cos_t[(size_t)t * half + pair], s = sign * sin_t[(size_t)t * half + pair];
    const float a = to_float(*lo), b = to_float(*hi);
    *lo = from_float<floatX>(a * c - b * s);
    *hi = from_float<floatX>(b * c + a * s);
}

inline void rope_launch(const CudaContext& ctx, floatX* qkv, int B, int T, int NH, int NKV, int hs,
                        const float* cos_t, const float* sin_t, float sign) {
    CHECK(B > 0 && T > 0 && NH > 0 && NKV > 0 && hs > 0 && hs % 2 == 0, "B=%d T=%d NH=%d NKV=%d hs=%d", B, T, NH,
          NKV, hs);
    CHECK(cos_t != nullptr && sin_t != nullptr, "cos=%p sin=%p", (const void*)cos_t, (const void*)sin_t);
    const size_t threads = (size_t)B * T * (NH + NKV) * (hs / 2);
    CHECK(ceil_div(threads, 256) < (1u << 31), "too large for one grid");
    rope_rotate_kernel<<<(unsigned)ceil_div(threads, 256), 256, 0, ctx.stream>>>(
        qkv, (size_t)(NH + 2 * NKV) * hs, B * T, T, NH + NKV, hs, cos_t, sin_t, sign);
    CHECK_LAUNCH();
}

// qkv (B,T,(NH+2NKV)*hs) = [q | k | v]: turns q and k by their positions' angles, in place
inline void rope_forward(const CudaContext& ctx, floatX* qkv, int B, int T, int NH, int NKV, int hs,
                         const float* cos_t, const float* sin_t) {
    rope_launch(ctx, qkv, B, T, NH, NKV, hs, cos_t, sin_t, 1.0f);
}

// dqkv: the gradient through the turn (the opposite turn), in place
inline void rope_backward(const CudaContext& ctx, floatX* dqkv, int B, int T, int NH, int NKV, int hs,
                          const float* cos_t, const float* sin_t) {
    rope_launch(ctx, dqkv, B, T, NH, NKV, hs, cos_t, sin_t, -1.0f);
}
