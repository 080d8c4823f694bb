// gelu.cuh: GELU with GPT-2's tanh approximation on the GPU, forward and backward, for
// when the matmul epilogue cannot apply it (ctx.gelu_fusion off, or no cuBLASLt algorithm).
// defines: gelu_forward, gelu_backward
// CPU reference: llmc/cpu/gelu.h
#pragma once
#include "common.cuh"

constexpr float GELU_SQRT_2_OVER_PI = 0.7978845608028654f;

// tanh(u): in fp32 tanhf, as the CPU reference (cpu/gelu.h); in bf16 2 sigmoid(2u) - 1 on the
// special function unit (act_sigmoid: 5 instructions where tanhf takes about 15)
__device__ inline float gelu_tanh(float u) {
#ifdef ENABLE_BF16
    return 2.0f * act_sigmoid(2.0f * u) - 1.0f;
#else
    return tanhf(u);
#endif
}

__device__ inline float gelu_value(float x) {
    float u = GELU_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
#ifdef ENABLE_BF16
    return x * act_sigmoid(2.0f * u);  // 0.5 x (1 + tanh u)
#else
    return 0.5f * x * (1.0f + tanhf(u));
#endif
}

__device__ inline float gelu_grad(float x) {
    float u = GELU_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
    float th = gelu_tanh(u);
    float sech2 = 1.0f - th * th;
    float du = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * du;
}

// one thread per 16-byte group
__global__ void gelu_forward_kernel(floatX* out, const floatX* inp, size_t groups) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= groups) return;
    x128 x = load128cs(inp + i * x128::size), o;
    for (int k = 0; k < x128::size; k++) o[k] = from_float<floatX>(gelu_value(to_float(x[k])));
    store128(out + i * x128::size, o);
}

__global__ void gelu_backward_kernel(floatX* dinp, const floatX* inp, const floatX* dout, size_t groups) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= groups) return;
    x128 x = load128cs(inp + i * x128::size), d = load128(dout + i * x128::size), o;
    for (int k = 0; k < x128::size; k++) o[k] = from_float<floatX>(gelu_grad(to_float(x[k])) * to_float(d[k]));
    store128(dinp + i * x128::size, o);
}

inline void gelu_check(size_t N, const void* a, const void* b, const void* c) {
    CHECK(N > 0 && N % x128::size == 0, "N=%zu must be a positive multiple of %d", N, x128::size);
    CHECK(is_aligned16(a) && is_aligned16(b) && is_aligned16(c), "pointers %p %p %p not 16-byte aligned", a, b, c);
    CHECK(ceil_div(N / x128::size, 256) < (1u << 31), "N=%zu too large for one grid", N);
}

// out (N) = gelu(inp); out may alias inp
inline void gelu_forward(const CudaContext& ctx, floatX* out, const floatX* inp, size_t N) {
    gelu_check(N, out, inp, inp);
    size_t groups = N / x128::size;
    gelu_forward_kernel<<<(unsigned)ceil_div(groups, 256), 256, 0, ctx.stream>>>(out, inp, groups);
    CHECK_LAUNCH();
}

// dinp (N) = gelu'(inp) * dout. Overwrites (the CPU reference accumulates into a zeroed
// buffer, which is the same thing); dinp may alias dout, which saves a buffer in training.
inline void gelu_backward(const CudaContext& ctx, floatX* dinp, const floatX* inp, const floatX* dout, size_t N) {
    gelu_check(N, dinp, inp, dout);
    size_t groups = N / x128::size;
    gelu_backward_kernel<<<(unsigned)ceil_div(groups, 256), 256, 0, ctx.stream>>>(dinp, inp, dout, groups);
    CHECK_LAUNCH();
}
