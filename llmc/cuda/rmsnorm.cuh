// rmsnorm.cuh: RMSNorm on the GPU (Llama), forward and a deterministic backward.
// defines: rmsnorm_forward, rmsnorm_backward
// CPU reference: llmc/cpu/rmsnorm.h
//
// As layernorm.cuh: the forward takes one warp per row; the backward is norm_backward.cuh's,
// which LayerNorm shares: one pass where C fits it, else two.
#pragma once
#include "common.cuh"
#include "norm_backward.cuh"

__global__ void rmsnorm_forward_kernel(floatX* out, float* rstd, const floatX* inp, const floatX* weight, int N, int C,
                                       float eps) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;
    const int lane = threadIdx.x % 32;
    const floatX* x = inp + (size_t)row * C;
    float ss = 0.0f;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 v = load128(x + c);
        for (int k = 0; k < x128::size; k++) ss += to_float(v[k]) * to_float(v[k]);
    }
    const float r = rsqrtf(warp_reduce_sum(ss) / C + eps);
    floatX* o = out + (size_t)row * C;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 v = load128(x + c), w = load128(weight + c), res;
        for (int k = 0; k < x128::size; k++) res[k] = from_float<floatX>(to_float(v[k]) * r * to_float(w[k]));
        store128(o + c, res);
    }
    if (lane == 0 && rstd != nullptr) rstd[row] = r;
}

inline void rmsnorm_check_shape(int N, int C, const void* weight) {
    CHECK(N > 0 && C > 0, "N=%d C=%d", N, C);
    CHECK(weight != nullptr, "weight=%p", weight);
    CHECK(C % x128::size == 0, "C=%d must be a multiple of %d", C, x128::size);
}

// out (N,C) = inp * rstd * weight; rstd (N) saved for the backward (nullptr: none follows)
inline void rmsnorm_forward(const CudaContext& ctx, floatX* out, float* rstd, const floatX* inp, const floatX* weight,
                            int N, int C, float eps) {
    rmsnorm_check_shape(N, C, weight);
    CHECK(is_aligned16(out) && is_aligned16(inp) && is_aligned16(weight), "out=%p inp=%p weight=%p not 16-byte aligned",
          (void*)out, (const void*)inp, (const void*)weight);
    const int block = 256, rows_per_block = block / 32;
    rmsnorm_forward_kernel<<<(unsigned)ceil_div(N, rows_per_block), block, 0, ctx.stream>>>(out, rstd, inp, weight, N,
                                                                                            C, eps);
    CHECK_LAUNCH();
}

// Accumulates (+=) into dinp (N,C) and dweight (C), given dout (N,C), the forward's input and
// its saved rstd. Uses ctx.workspace as scratch. path: NORM_BWD_AUTO (the trainer's: the one pass
// where C fits it), or either path by name (dev/cuda/rmsnorm checks and times both).
inline void rmsnorm_backward(const CudaContext& ctx, floatX* dinp, floatX* dweight, const floatX* dout,
                             const floatX* inp, const floatX* weight, const float* rstd, int N, int C,
                             NormBackwardPath path = NORM_BWD_AUTO) {
    rmsnorm_check_shape(N, C, dweight);
    CHECK(rstd != nullptr, "rstd=%p", (const void*)rstd);
    CHECK(is_aligned16(dinp) && is_aligned16(dout) && is_aligned16(inp) && is_aligned16(weight),
          "dinp=%p dout=%p inp=%p weight=%p not 16-byte aligned", (void*)dinp, (const void*)dout, (const void*)inp,
          (const void*)weight);
    norm_backward(ctx, dinp, dweight, nullptr, dout, inp, weight, nullptr, rstd, N, C, path);
}
