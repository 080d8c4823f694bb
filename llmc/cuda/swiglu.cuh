// swiglu.cuh: the SwiGLU gate of Llama's MLP on the GPU, forward and backward.
// defines: swiglu_forward, swiglu_backward, swiglu_value, swiglu_grad_gate, swiglu_grad_up
// CPU reference: llmc/cpu/swiglu.h
//
// inp (N, 2F) holds per row [gate (F) | up (F)]; out (N, F) = silu(gate) * up. One thread per
// 16-byte group of a row's F outputs.
#pragma once
#include "common.cuh"

// silu(z) * u: in fp32 as the CPU reference computes it (cpu/swiglu.h); in bf16 z sigmoid(z) u
// (act_sigmoid: the special function unit's)
__device__ inline float swiglu_value(float z, float u) {
#ifdef ENABLE_BF16
    return z * act_sigmoid(z) * u;
#else
    return z / (1.0f + expf(-z)) * u;
#endif
}

__global__ void swiglu_forward_kernel(floatX* out, const floatX* inp, int N, int F) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // group
    const size_t groups_per_row = F / x128::size;
    if (i >= (size_t)N * groups_per_row) return;
    const size_t row = i / groups_per_row, c = (i % groups_per_row) * x128::size;
    x128 gate = load128cs(inp + row * 2 * F + c), up = load128cs(inp + row * 2 * F + F + c), o;
    for (int k = 0; k < x128::size; k++) {
        o[k] = from_float<floatX>(swiglu_value(to_float(gate[k]), to_float(up[k])));
    }
    store128(out + row * F + c, o);
}

// the gradients of silu(z) * u given d (the output's): with s = sigmoid(z) (computed once), d(gate) = d u
// (s + z s (1 - s)) and d(up) = d z s; fp32, the order the CPU reference takes (cpu/swiglu.h)
__device__ inline float swiglu_grad_gate(float z, float s, float u, float d) {
    return d * u * (s + z * s * (1.0f - s));
}
__device__ inline float swiglu_grad_up(float z, float s, float d) { return d * z * s; }

__global__ void swiglu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, int N, int F) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t groups_per_row = F / x128::size;
    if (i >= (size_t)N * groups_per_row) return;
    const size_t row = i / groups_per_row, c = (i % groups_per_row) * x128::size;
    const size_t g_at = row * 2 * F + c, u_at = g_at + F;
    x128 gate = load128cs(inp + g_at), up = load128cs(inp + u_at), d = load128cs(dout + row * F + c), dg, du;
    for (int k = 0; k < x128::size; k++) {
        const float z = to_float(gate[k]), s = act_sigmoid(z), dk = to_float(d[k]);
        dg[k] = from_float<floatX>(swiglu_grad_gate(z, s, to_float(up[k]), dk));
        du[k] = from_float<floatX>(swiglu_grad_up(z, s, dk));
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

// dinp (N,2F) = the gradient of swiglu_forward, given dout (N,F): overwritten (the CPU reference
// accumulates into a zeroed buffer, which is the same thing, and which the GPU trainer saved
// itself the memset and the read of)
inline void swiglu_backward(const CudaContext& ctx, floatX* dinp, const floatX* inp, const floatX* dout, int N, int F) {
    swiglu_check(N, F, dinp, inp);
    CHECK(is_aligned16(dout), "dout=%p not 16-byte aligned", (const void*)dout);
    const size_t groups = (size_t)N * (F / x128::size);
    swiglu_backward_kernel<<<(unsigned)ceil_div(groups, 256), 256, 0, ctx.stream>>>(dinp, inp, dout, N, F);
    CHECK_LAUNCH();
}
