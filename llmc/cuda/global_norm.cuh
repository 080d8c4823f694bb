// global_norm.cuh: the sum of squares of a gradient buffer, for the global norm and clipping.
// defines: global_norm_squared, GLOBAL_NORM_BLOCKS
// CPU reference: gpt2_grad_norm in llmc/gpt2.h (which takes the square root of this sum)
//
// Two stages, no atomics: a grid of up to GLOBAL_NORM_BLOCKS blocks, each summing a fixed,
// strided set of elements into one partial; then one block adds the partials in order.
// The grid depends on n alone (global_norm_blocks), not on the GPU, so the result is the same
// bits on every device. A buffer of fewer than GLOBAL_NORM_BLOCKS x 512 threads x 16 bytes
// (2.1M values in bf16, 1M in fp32) takes fewer blocks, each thread at least one 16-byte group:
// 512 blocks over a small model's gradients would be mostly idle threads (on the emulated GPU,
// where every thread costs, they were a third of a small Llama's step, 2026-11-28).
// Several buffers (or ZeRO shards) chain with accumulate = true; the square root is taken
// by the caller after any all-reduce across processes.
#pragma once
#include <algorithm>
#include "common.cuh"

constexpr int GLOBAL_NORM_BLOCKS = 512;
constexpr int GLOBAL_NORM_THREADS = 512;

// the partials kernel's grid for n values: one 16-byte group a thread, at most GLOBAL_NORM_BLOCKS
inline int global_norm_blocks(size_t n) {
    const size_t per_block = (size_t)GLOBAL_NORM_THREADS * x128::size;
    return (int)std::min<size_t>(GLOBAL_NORM_BLOCKS, (n + per_block - 1) / per_block);
}

// partials[blockIdx.x] = sum of squares of this block's elements
__global__ void __launch_bounds__(GLOBAL_NORM_THREADS)
global_norm_partials_kernel(float* partials, const floatX* data, size_t n) {
    __shared__ float shared[32];
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    float acc = 0.0f;
    // the full 16-byte groups, then the tail elements one by one
    const size_t groups = n / x128::size;
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
        x128 v = load128cs(data + g * x128::size);
        for (int k = 0; k < x128::size; k++) {
            float f = to_float(v[k]);
            acc += f * f;
        }
    }
    for (size_t i = groups * x128::size + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float f = to_float(data[i]);
        acc += f * f;
    }
    acc = block_reduce_sum(acc, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// *out (+)= sum of the partials, in index order (each thread a fixed slice, then the tree)
__global__ void global_norm_finish_kernel(float* out, const float* partials, int num_partials, bool accumulate) {
    __shared__ float shared[32];
    float acc = 0.0f;
    for (int i = threadIdx.x; i < num_partials; i += blockDim.x) acc += partials[i];
    acc = block_reduce_sum(acc, shared);
    if (threadIdx.x == 0) *out = accumulate ? *out + acc : acc;
}

// out (one float on the device) = sum of data[i]^2 over n values, or += when accumulate.
// data must be 16-byte aligned. Uses ctx.workspace for the partials.
inline void global_norm_squared(const CudaContext& ctx, float* out, const floatX* data, size_t n, bool accumulate) {
    CHECK(n > 0, "n=%zu", n);
    CHECK(is_aligned16(data), "data=%p not 16-byte aligned", (const void*)data);
    CHECK(ctx.workspace_bytes >= GLOBAL_NORM_BLOCKS * sizeof(float), "workspace %zu bytes", ctx.workspace_bytes);
    float* partials = (float*)ctx.workspace;
    const int blocks = global_norm_blocks(n);
    global_norm_partials_kernel<<<blocks, GLOBAL_NORM_THREADS, 0, ctx.stream>>>(partials, data, n);
    CHECK_LAUNCH();
    global_norm_finish_kernel<<<1, 512, 0, ctx.stream>>>(out, partials, blocks, accumulate);
    CHECK_LAUNCH();
}
