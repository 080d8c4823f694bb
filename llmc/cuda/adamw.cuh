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

// One element's update, the same arithmetic for both kernels below (so they give the same bits):
// g the scaled gradient; m, v, p (the weight) updated in place.
__device__ inline void adamw_element(float g, float& m, float& v, float& p, float lr, float beta1, float beta2,
                                     float eps, float weight_decay, float step_size, float bc2_sqrt) {
    m = beta1 * m + (1.0f - beta1) * g;
    v = beta2 * v + (1.0f - beta2) * g * g;
    p = p * (1.0f - lr * weight_decay);
    p = p - step_size * m / (sqrtf(v) / bc2_sqrt + eps);
}

// one element a thread: any alignment, and the tail the kernel below leaves
__global__ void adamw_kernel(floatX* params, float* master, const floatX* grads, float* m, float* v,
                             size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                             float grad_scale, float step_size, float bc2_sqrt, uint32_t seed,
                             size_t index_offset) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float mi = m[i], vi = v[i], p = master != nullptr ? master[i] : to_float(params[i]);
    adamw_element(to_float(grads[i]) * grad_scale, mi, vi, p, lr, beta1, beta2, eps, weight_decay, step_size, bc2_sqrt);
    m[i] = mi;
    v[i] = vi;
    if (master != nullptr) master[i] = p;
    stochastic_round(p, &params[i], random_u32(seed, index_offset + i));
}

// ADAMW_VEC elements a thread, each array read and written in one access (16 bytes for the
// fp32 state, ADAMW_VEC floatX for the parameters and gradients): AdamW is memory-bound, and
// one 4-byte access a thread leaves the load/store units a quarter used. For arrays aligned to
// those widths (adamw_update checks); n4: the groups of ADAMW_VEC.
constexpr int ADAMW_VEC = 4;
template <typename T>
struct alignas(ADAMW_VEC * sizeof(T)) AdamwPack {
    T x[ADAMW_VEC];
};
__global__ void adamw_kernel_vec(floatX* params, float* master, const floatX* grads, float* m, float* v,
                                 size_t n4, float lr, float beta1, float beta2, float eps, float weight_decay,
                                 float grad_scale, float step_size, float bc2_sqrt, uint32_t seed,
                                 size_t index_offset) {
    size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n4) return;
    const AdamwPack<floatX> g = reinterpret_cast<const AdamwPack<floatX>*>(grads)[j];
    AdamwPack<float> mi = reinterpret_cast<AdamwPack<float>*>(m)[j], vi = reinterpret_cast<AdamwPack<float>*>(v)[j];
    AdamwPack<float> p;
    AdamwPack<floatX> out;
    if (master != nullptr) {
        p = reinterpret_cast<AdamwPack<float>*>(master)[j];
    } else {
        const AdamwPack<floatX> q = reinterpret_cast<AdamwPack<floatX>*>(params)[j];
        for (int k = 0; k < ADAMW_VEC; k++) p.x[k] = to_float(q.x[k]);
    }
    for (int k = 0; k < ADAMW_VEC; k++) {
        adamw_element(to_float(g.x[k]) * grad_scale, mi.x[k], vi.x[k], p.x[k], lr, beta1, beta2, eps, weight_decay,
                      step_size, bc2_sqrt);
        stochastic_round(p.x[k], &out.x[k], random_u32(seed, index_offset + j * ADAMW_VEC + k));
    }
    reinterpret_cast<AdamwPack<float>*>(m)[j] = mi;
    reinterpret_cast<AdamwPack<float>*>(v)[j] = vi;
    if (master != nullptr) reinterpret_cast<AdamwPack<float>*>(master)[j] = p;
    reinterpret_cast<AdamwPack<floatX>*>(params)[j] = out;
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
    // whole groups of ADAMW_VEC through the vectorised kernel where every array is aligned to
    // its group's width (a ZeRO shard or a tensor may start anywhere), the rest one by one
    auto aligned = [](const void* p, size_t bytes) { return p == nullptr || (uintptr_t)p % bytes == 0; };
    const bool vec = aligned(params, ADAMW_VEC * sizeof(floatX)) && aligned(grads, ADAMW_VEC * sizeof(floatX)) &&
                     aligned(m, ADAMW_VEC * sizeof(float)) && aligned(v, ADAMW_VEC * sizeof(float)) &&
                     aligned(master, ADAMW_VEC * sizeof(float));
    const size_t n4 = vec ? n / ADAMW_VEC : 0, done = n4 * ADAMW_VEC;
    if (n4 > 0) {
        size_t grid = ceil_div(n4, block);
        CHECK(grid < (1u << 31), "n=%zu too large for one grid", n);
        adamw_kernel_vec<<<(unsigned)grid, block, 0, ctx.stream>>>(params, master, grads, m, v, n4, lr, beta1, beta2,
                                                                   eps, weight_decay, grad_scale, step_size, bc2_sqrt,
                                                                   seed, index_offset);
        CHECK_LAUNCH();
    }
    if (done < n) {
        size_t grid = ceil_div(n - done, block);
        CHECK(grid < (1u << 31), "n=%zu too large for one grid", n);
        adamw_kernel<<<(unsigned)grid, block, 0, ctx.stream>>>(params + done, master ? master + done : nullptr,
                                                               grads + done, m + done, v + done, n - done, lr, beta1,
                                                               beta2, eps, weight_decay, grad_scale, step_size,
                                                               bc2_sqrt, seed, index_offset + done);
        CHECK_LAUNCH();
    }
}
