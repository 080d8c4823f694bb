// swiglu.cuh: the SwiGLU gate of Llama's MLP on the GPU, forward and backward.
// defines: swiglu_forward, swiglu_backward
// CPU reference: llmc/cpu/swiglu.h
//
// inp (N, 2F) holds per row [gate (F) | up (F)]; out (N, F) = silu(gate) * up. One thread per
// 16-byte group of a row's F outputs.
#pragma once
#include "common.cuh"

__global__ void swiglu_forward_kernel(floatX* out, const floatX* inp, int N, int F) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // group
    const size_t groups_per_row = F / x128::size;
    if (i >= (size_t)N * groups_per_row) return;
    const size_t row = i / groups_per_row, c = (i % groups_per_row) * x128::size;
    x128 gate = load128cs(inp + row * 2 * F + c), up = load128cs(inp + row * 2 * F + F + c), o;
    for (int k = 0; k < x128::size; k++) {
        const float z = to_float(gate[k]);
        o[k] = from_float<floatX>(z / (1.0f + expf(-z)) * to_float(up[k]));
    }
    store128(out + row * F + c, o);
}

__global__ void swiglu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, int N, int F) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t groups_per_row = F / x128::size;
    if (i >= (size_t)N * groups_per_row) return;
    const size_t row = i / groups_per_row, c = (i % groups_per_row) * x128::size;
    const size_t g_at = row * 2 * F + c, u_at = g_at + F;
    x128 gate = load128cs(inp + g_at), up = load128cs(inp + u_at), d = load128cs(dout + row * F + c);
    x128 dg = load128(dinp + g_at), du = load128(dinp + u_at);
    for (int k = 0; k < x128::size; k++) {
        const float z = to_float(gate[k]), s = 1.0f / (1.0f + expf(-z)), dk = to_float(d[k]);
        dg[k] = from_float<floatX>(to_float(dg[k]) + dk * to_float(up[k]) * (s + z * s * (1.0f - s)));
        du[k] = from_float<floatX>(to_float(du[k]) + dk * z * s);
    }
    store128(dinp + g_at, dg);
    store128(dinp + u_at, du);
}

inline void swiglu_check(int N, int F, const void* a, const void* b) {
    CHECK(N > 0 && F > 0 && F % x128::size == 0, "N=%d F=%d (F must be a multiple of %d)", N, F, x128::size);
    CHECK(is_aligned16(a) && is_aligned16(b), "pointers %p %p not 16-byte aligned", a, b);
    CHECK(ceil_div((size_t)N * (F / x128::size), 256) < (1u << 31), "N=%d F=%d too large for one grid", N, F);
}

// out (N,F) = silu(inp[:, :F]) * inp[:, F:]
inline void swiglu_forward(const CudaContext& ctx, floatX* out, const floatX* inp, int N, int F) {
    swiglu_check(N, F, out, inp);
    const size_t groups = (size_t)N * (F / x128::size);
    swiglu_forward_kernel<<<(unsigned)ceil_div(groups, 256), 256, 0, ctx.stream>>>(out, inp, N, F);
    CHECK_LAUNCH();
}

// Accumulates (+=) into dinp (N,2F) the gradient of swiglu_forward, given dout (N,F)
inline void swiglu_backward(const CudaContext& ctx, floatX* dinp, const floatX* inp, const floatX* dout, int N, int F) {
    swiglu_check(N, F, dinp, inp);
    CHECK(is_aligned16(dout), "dout=%p not 16-byte aligned", (const void*)dout);
    const size_t groups = (size_t)N * (F / x128::size);
    swiglu_backward_kernel<<<(unsigned)ceil_div(groups, 256), 256, 0, ctx.stream>>>(dinp, inp, dout, N, F);
    CHECK_LAUNCH();
}
