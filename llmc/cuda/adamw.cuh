// adamw.cuh: AdamW on the GPU, PyTorch's formulation (decoupled weight decay), one launch
// per parameter tensor (weight decay is per tensor) or per ZeRO shard of one.
// defines: adamw_update
// CPU reference: llmc/cpu/adamw.h
//
// State is fp32: the moments m, v and, in the bf16 build, a master copy of the weights.
// The bf16 parameters are written from the master with stochastic rounding, so updates
// smaller than half a bf16 ulp still move the weights on average; the rounding bits are a
// hash of (seed, index), so a step is reproducible given its seed.
#pragma once
#include <cmath>
#include "common.cuh"

__global__ void adamw_kernel(floatX* params, float* master, const floatX* grads, float* m, float* v,
                             size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                             float grad_scale, float step_size, float bc2_sqrt, uint32_t seed,
                             size_t index_offset) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = to_float(grads[i]) * grad_scale;
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float p = master != nullptr ? master[i] : to_float(params[i]);
    p = p * (1.0f - lr * weight_decay);
    p = p - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    if (master != nullptr) master[i] = p;
    stochastic_round(p, &params[i], random_u32(seed, index_offset + i));
}

// For n parameters: g = grad * grad_scale (clipping), m and v updated, then
//   param = param * (1 - lr*wd) - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// t is the 1-based step. master (n, fp32) is the weights' true value when given (the bf16
// build); with master == nullptr the params themselves are read (the fp32 build).
// seed: vary it per step and per tensor (e.g. hash of step and tensor index). index_offset:
// where params[0] sits in its tensor (a ZeRO shard may start mid-tensor); the rounding bits
// of an element depend on (seed, its index in the tensor) only.
inline void adamw_update(const CudaContext& ctx, floatX* params, float* master, const floatX* grads,
                         float* m, float* v, size_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, float grad_scale, int t, uint32_t seed, size_t index_offset = 0) {
    CHECK(n > 0, "n=%zu", n);
    CHECK(t >= 1, "t=%d (steps count from 1)", t);
    CHECK(params != nullptr && grads != nullptr && m != nullptr && v != nullptr,
          "params=%p grads=%p m=%p v=%p", (void*)params, (const void*)grads, (void*)m, (void*)v);
    // the same host arithmetic as the CPU reference, so both start from identical constants
    float bc1 = 1.0f - (float)std::pow((double)beta1, t);
    float bc2_sqrt = (float)std::sqrt(1.0 - std::pow((double)beta2, t));
    float step_size = lr / bc1;
    const int block = 512;
    size_t grid = ceil_div(n, block);
    CHECK(grid < (1u << 31), "n=%zu too large for one grid", n);
    adamw_kernel<<<(unsigned)grid, block, 0, ctx.stream>>>(params, master, grads, m, v, n, lr, beta1, beta2, eps,
                                                           weight_decay, grad_scale, step_size, bc2_sqrt, seed,
                                                           index_offset);
    CHECK_LAUNCH();
}
