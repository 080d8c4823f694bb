// rmsnorm.cuh: RMSNorm on the GPU (Llama), forward and a deterministic backward.
// defines: rmsnorm_forward, rmsnorm_backward
// CPU reference: llmc/cpu/rmsnorm.h
//
// As layernorm.cuh: the forward takes one warp per row; the backward is three kernels and no
// atomics: dinp one warp per row, then partial column sums of dout*xhat over fixed chunks of
// rows into scratch, then the chunks added in a fixed order into dweight (column_sums_finish).
#pragma once
#include <algorithm>
#include "common.cuh"

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

// 1. dinp (N,C) += rstd * (g - xhat * mean(g * xhat)), g = dout * weight; one warp per row
__global__ void rmsnorm_backward_dinp_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* weight,
                                             const float* rstd, int N, int C) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;
    const int lane = threadIdx.x % 32;
    const size_t base = (size_t)row * C;
    const float r = rstd[row];
    float sum_gx = 0.0f;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 d = load128(dout + base + c), x = load128(inp + base + c), w = load128(weight + c);
        for (int k = 0; k < x128::size; k++) sum_gx += to_float(d[k]) * to_float(w[k]) * (to_float(x[k]) * r);
    }
    const float mean_gx = warp_reduce_sum(sum_gx) / C;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 d = load128(dout + base + c), x = load128(inp + base + c), w = load128(weight + c);
        x128 di = load128(dinp + base + c);
        for (int k = 0; k < x128::size; k++) {
            const float v = r * (to_float(d[k]) * to_float(w[k]) - to_float(x[k]) * r * mean_gx);
            di[k] = from_float<floatX>(to_float(di[k]) + v);
        }
        store128(dinp + base + c, di);
    }
}

// 2. scratch[chunk] = the sum over the chunk's rows of dout*xhat (C).
// grid = (channel groups / blockDim, chunks); rows [chunk*rows_per_chunk, ...)
__global__ void rmsnorm_backward_partials_kernel(float* scratch, const floatX* dout, const floatX* inp,
                                                 const float* rstd, int N, int C, int rows_per_chunk) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= C / x128::size) return;
    const int c = g * x128::size;
    const int r0 = blockIdx.y * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
    float dw[x128::size] = {};
    for (int row = r0; row < r1; row++) {
        x128 d = load128(dout + (size_t)row * C + c), x = load128(inp + (size_t)row * C + c);
        const float r = rstd[row];
        for (int k = 0; k < x128::size; k++) dw[k] += to_float(d[k]) * (to_float(x[k]) * r);
    }
    float* out = scratch + (size_t)blockIdx.y * C;
    for (int k = 0; k < x128::size; k++) out[c + k] = dw[k];
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
// its saved rstd. Uses ctx.workspace as scratch.
inline void rmsnorm_backward(const CudaContext& ctx, floatX* dinp, floatX* dweight, const floatX* dout,
                             const floatX* inp, const floatX* weight, const float* rstd, int N, int C) {
    rmsnorm_check_shape(N, C, dweight);
    CHECK(rstd != nullptr, "rstd=%p", (const void*)rstd);
    CHECK(is_aligned16(dinp) && is_aligned16(dout) && is_aligned16(inp) && is_aligned16(weight),
          "dinp=%p dout=%p inp=%p weight=%p not 16-byte aligned", (void*)dinp, (const void*)dout, (const void*)inp,
          (const void*)weight);
    const int block = 256, rows_per_block = block / 32;
    rmsnorm_backward_dinp_kernel<<<(unsigned)ceil_div(N, rows_per_block), block, 0, ctx.stream>>>(dinp, dout, inp,
                                                                                                  weight, rstd, N, C);
    CHECK_LAUNCH();
    // about 16 rows per chunk, at most 512 chunks, and no more than the scratch holds
    const size_t max_chunks = ctx.workspace_bytes / ((size_t)C * sizeof(float));
    CHECK(max_chunks >= 1, "C=%d too large for workspace of %zu bytes", C, ctx.workspace_bytes);
    int chunks = (int)std::min<size_t>({ceil_div(N, 16), 512, max_chunks});
    const int rows_per_chunk = (int)ceil_div(N, chunks);
    chunks = (int)ceil_div(N, rows_per_chunk);
    const int groups = C / x128::size;
    const int pblock = std::min(256, (groups + 31) / 32 * 32);
    dim3 pgrid((unsigned)ceil_div(groups, pblock), (unsigned)chunks);
    float* scratch = (float*)ctx.workspace;
    rmsnorm_backward_partials_kernel<<<pgrid, pblock, 0, ctx.stream>>>(scratch, dout, inp, rstd, N, C, rows_per_chunk);
    CHECK_LAUNCH();
    column_sums_finish(ctx, dweight, nullptr, scratch, chunks, C, (size_t)C);  // 3. (common.cuh)
}
