// layernorm.cuh: LayerNorm on the GPU (eps 1e-5, biased variance, as GPT-2): forward, the
// residual add fused into the forward, and a deterministic backward.
// defines: layernorm_forward, fused_residual_layernorm_forward, layernorm_backward
// CPU reference: llmc/cpu/layernorm.h (and llmc/cpu/residual.h for the fused add)
//
// Forward: one warp per row (the row stays in L1 between the passes).
// Backward: norm_backward.cuh's, which RMSNorm shares: one pass where C fits it, else two.
#pragma once
#include "common.cuh"
#include "norm_backward.cuh"

constexpr float LAYERNORM_EPS = 1e-5f;

// ---------------------------------------------------------------------------------------
// kernels

// Normalizes one row x (C) per warp; x may be the row the same thread just wrote (the
// fused residual), so it is read with plain loads.
__device__ inline void layernorm_row(floatX* out, float* mean, float* rstd, const floatX* x,
                                     const floatX* weight, const floatX* bias, int row, int C, int lane) {
    float sum = 0.0f;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 v = load128(x + c);
        for (int k = 0; k < x128::size; k++) sum += to_float(v[k]);
    }
    const float m = warp_reduce_sum(sum) / C;
    float var = 0.0f;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 v = load128(x + c);
        for (int k = 0; k < x128::size; k++) {
            float d = to_float(v[k]) - m;
            var += d * d;
        }
    }
    var = warp_reduce_sum(var) / C;
    const float r = 1.0f / sqrtf(var + LAYERNORM_EPS);
    floatX* o = out + (size_t)row * C;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 v = load128(x + c);
        x128 w = load128(weight + c), b = load128(bias + c);
        x128 res;
        for (int k = 0; k < x128::size; k++)
            res[k] = from_float<floatX>((to_float(v[k]) - m) * r * to_float(w[k]) + to_float(b[k]));
        store128(o + c, res);
    }
    if (lane == 0) {
        if (mean != nullptr) mean[row] = m;
        if (rstd != nullptr) rstd[row] = r;
    }
}

__global__ void layernorm_forward_kernel(floatX* out, float* mean, float* rstd, const floatX* inp,
                                         const floatX* weight, const floatX* bias, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;
    layernorm_row(out, mean, rstd, inp + (size_t)row * C, weight, bias, row, C, threadIdx.x % 32);
}

// residual = a + b (rounded to floatX), then out = layernorm(residual)
__global__ void fused_residual_layernorm_forward_kernel(floatX* residual, floatX* out, float* mean,
                                                        float* rstd, const floatX* a, const floatX* b,
                                                        const floatX* weight, const floatX* bias,
                                                        int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;
    const int lane = threadIdx.x % 32;
    const size_t base = (size_t)row * C;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 va = load128cs(a + base + c), vb = load128cs(b + base + c), s;
        for (int k = 0; k < x128::size; k++) s[k] = from_float<floatX>(to_float(va[k]) + to_float(vb[k]));
        store128(residual + base + c, s);
    }
    // each lane reads back only the groups it wrote itself: no barrier needed
    layernorm_row(out, mean, rstd, residual + base, weight, bias, row, C, lane);
}

// ---------------------------------------------------------------------------------------
// launchers

inline void layernorm_check_shape(int N, int C, const void* weight, const void* bias) {
    CHECK(N > 0 && C > 0, "N=%d C=%d", N, C);
    CHECK(weight != nullptr && bias != nullptr, "weight=%p bias=%p", weight, bias);
    CHECK(C % x128::size == 0, "C=%d must be a multiple of %d", C, x128::size);
}

// out (N,C) = layernorm(inp) * weight + bias; mean, rstd (N) saved for the backward
// (either may be nullptr when no backward follows).
inline void layernorm_forward(const CudaContext& ctx, floatX* out, float* mean, float* rstd,
                              const floatX* inp, const floatX* weight, const floatX* bias, int N, int C) {
    layernorm_check_shape(N, C, weight, bias);
    CHECK(is_aligned16(out) && is_aligned16(inp) && is_aligned16(weight) && is_aligned16(bias),
          "out=%p inp=%p weight=%p bias=%p not 16-byte aligned", (void*)out, (const void*)inp,
          (const void*)weight, (const void*)bias);
    const int block = 256, rows_per_block = block / 32;
    layernorm_forward_kernel<<<(unsigned)ceil_div(N, rows_per_block), block, 0, ctx.stream>>>(
        out, mean, rstd, inp, weight, bias, N, C);
    CHECK_LAUNCH();
}

// residual (N,C) = a + b; out = layernorm(residual) * weight + bias. residual may alias a.
inline void fused_residual_layernorm_forward(const CudaContext& ctx, floatX* residual, floatX* out,
                                             float* mean, float* rstd, const floatX* a, const floatX* b,
                                             const floatX* weight, const floatX* bias, int N, int C) {
    layernorm_check_shape(N, C, weight, bias);
    CHECK(is_aligned16(residual) && is_aligned16(out) && is_aligned16(a) && is_aligned16(b) &&
          is_aligned16(weight) && is_aligned16(bias),
          "residual=%p out=%p a=%p b=%p weight=%p bias=%p not 16-byte aligned", (void*)residual,
          (void*)out, (const void*)a, (const void*)b, (const void*)weight, (const void*)bias);
    CHECK(out != residual, "out and residual must differ");
    const int block = 256, rows_per_block = block / 32;
    fused_residual_layernorm_forward_kernel<<<(unsigned)ceil_div(N, rows_per_block), block, 0, ctx.stream>>>(
        residual, out, mean, rstd, a, b, weight, bias, N, C);
    CHECK_LAUNCH();
}

// Accumulates (+=) into dinp (N,C), dweight, dbias (C), given dout (N,C), the forward's input
// and its saved mean, rstd. Uses ctx.workspace as scratch. path: NORM_BWD_AUTO (the trainer's:
// the one pass where C fits it), or either path by name (dev/cuda/layernorm checks and times both).
inline void layernorm_backward(const CudaContext& ctx, floatX* dinp, floatX* dweight, floatX* dbias,
                               const floatX* dout, const floatX* inp, const floatX* weight,
                               const float* mean, const float* rstd, int N, int C,
                               NormBackwardPath path = NORM_BWD_AUTO) {
    layernorm_check_shape(N, C, dweight, dbias);
    CHECK(mean != nullptr && rstd != nullptr, "mean=%p rstd=%p", (const void*)mean, (const void*)rstd);
    CHECK(is_aligned16(dinp) && is_aligned16(dout) && is_aligned16(inp) && is_aligned16(weight),
          "dinp=%p dout=%p inp=%p weight=%p not 16-byte aligned", (void*)dinp, (const void*)dout,
          (const void*)inp, (const void*)weight);
    norm_backward(ctx, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, path);
}
