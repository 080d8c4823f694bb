// layernorm.cuh: LayerNorm on the GPU (eps 1e-5, biased variance, as GPT-2): forward, the
// residual add fused into the forward, and a deterministic backward.
// defines: layernorm_forward, fused_residual_layernorm_forward, layernorm_backward
// CPU reference: llmc/cpu/layernorm.h (and llmc/cpu/residual.h for the fused add)
//
// Forward: one warp per row (the row stays in L1 between the passes).
// Backward, no atomics, deterministic, in one of two ways (the sums' chunks depend only on N and
// the path, so they come out the same on every GPU):
//   one pass (C up to 32 lanes x 3 loads of 16 bytes: 768 in bf16, 384 in fp32): each warp
//     takes rows of a block's chunk in turn, writes dinp += rstd * (g - mean(g) - xhat *
//     mean(g * xhat)), g = dout*w (dout and inp read twice, the second time from L1, as the
//     two passes' first kernel does), and adds dout*xhat and dout into column sums it keeps in
//     registers (each lane the same columns of every row); at the end the block adds its warps'
//     sums, in warp order, into its chunk's partials. Then column_sums_finish (common.cuh,
//     shared with the bias gradient) adds the chunks' partials in order into dweight, dbias.
//     4 (N,C) tensors moved from device memory instead of the two passes' 6.
//   two passes (any C): 1. one warp per row, dinp as above (dout and inp read twice, the second
//     time from L1); 2. the column partial sums of dout*xhat and dout over chunks of rows,
//     reading dout and inp again; 3. column_sums_finish.
// The trainer takes the one pass where it applies (layernorm_backward, LN_BWD_AUTO). Both do
// dinp's arithmetic in the same order; dweight and dbias sum the rows in another order. An
// earlier one pass, which added each row into its warp's column sums in shared memory, measured
// slower than the two on an H200 (2026-11-26, N=65536 C=768: 0.258 ms against 0.188; N=8192
// C=1600: 0.093 against 0.069); this one keeps the sums in registers and touches shared memory
// once a block. PREDICTED -0.5 to -2 ms of d12's B=64 step (25 backwards of 0.188 ms each by the
// two passes; dev/results/NOTES.md (e5)); not yet measured (dev/cuda/layernorm --bench times both).
#pragma once
#include <algorithm>
#include "common.cuh"

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

// The backward's arithmetic on a row's 16-byte chunk at columns c.. (both paths, in the same
// order): the sums of g = dout*w and g*xhat over the lane's columns, then dinp += rstd * (g -
// mean(g) - xhat * mean(g * xhat)).
__device__ inline void layernorm_backward_add_sums(const x128& d, const x128& x, const x128& w, float m, float r,
                                                   float& sum_g, float& sum_gx) {
    for (int k = 0; k < x128::size; k++) {
        float g = to_float(d[k]) * to_float(w[k]);
        sum_g += g;
        sum_gx += g * ((to_float(x[k]) - m) * r);
    }
}
__device__ inline void layernorm_backward_add_dinp(x128& di, const x128& d, const x128& x, const x128& w, float m,
                                                   float r, float mean_g, float mean_gx) {
    for (int k = 0; k < x128::size; k++) {
        float xhat = (to_float(x[k]) - m) * r;
        float v = r * (to_float(d[k]) * to_float(w[k]) - mean_g - xhat * mean_gx);
        di[k] = from_float<floatX>(to_float(di[k]) + v);
    }
}

// One row of the backward for one warp: dinp[row] += rstd * (g - mean(g) - xhat * mean(g * xhat))
__device__ inline void layernorm_backward_row(floatX* dinp, const floatX* dout, const floatX* inp,
                                              const floatX* weight, const float* mean, const float* rstd,
                                              int row, int C, int lane) {
    const size_t base = (size_t)row * C;
    const float m = mean[row], r = rstd[row];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size)
        layernorm_backward_add_sums(load128(dout + base + c), load128(inp + base + c), load128(weight + c), m, r,
                                    sum_g, sum_gx);
    const float mean_g = warp_reduce_sum(sum_g) / C;
    const float mean_gx = warp_reduce_sum(sum_gx) / C;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 di = load128(dinp + base + c);
        layernorm_backward_add_dinp(di, load128(dout + base + c), load128(inp + base + c), load128(weight + c), m, r,
                                    mean_g, mean_gx);
        store128(dinp + base + c, di);
    }
}

// 1. one warp per row
__global__ void layernorm_backward_dinp_kernel(floatX* dinp, const floatX* dout, const floatX* inp,
                                               const floatX* weight, const float* mean,
                                               const float* rstd, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;
    layernorm_backward_row(dinp, dout, inp, weight, mean, rstd, row, C, threadIdx.x % 32);
}

// 2. scratch[chunk] = (sum over the chunk's rows of dout*xhat (C) | of dout (C)).
// grid = (channel groups / blockDim, chunks); rows [chunk*rows_per_chunk, ...)
__global__ void layernorm_backward_partials_kernel(float* scratch, const floatX* dout, const floatX* inp,
                                                   const float* mean, const float* rstd, int N, int C,
                                                   int rows_per_chunk) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= C / x128::size) return;
    const int c = g * x128::size;
    const int r0 = blockIdx.y * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
    float dw[x128::size] = {}, db[x128::size] = {};
    for (int row = r0; row < r1; row++) {
        x128 d = load128(dout + (size_t)row * C + c), x = load128(inp + (size_t)row * C + c);
        const float m = mean[row], r = rstd[row];
        for (int k = 0; k < x128::size; k++) {
            float dk = to_float(d[k]);
            dw[k] += dk * ((to_float(x[k]) - m) * r);
            db[k] += dk;
        }
    }
    float* out = scratch + (size_t)blockIdx.y * 2 * C;
    for (int k = 0; k < x128::size; k++) {
        out[c + k] = dw[k];
        out[C + c + k] = db[k];
    }
}

// The one pass: block b takes rows [b*rows_per_chunk, ...), warp w of them the rows w, w+8, ...;
// lane l holds columns (32k + l) x128::size.. for k < CH (those below C) of every row, and their
// sums of dout*xhat and dout; the block then adds its warps' sums, in warp order, into
// scratch[b] (2C: dout*xhat, then dout). dinp's arithmetic is layernorm_backward_row's, in its
// order.
constexpr int LN_BWD_WARPS = 8;
// 16-byte loads a lane a row: C up to 32 x 3 x x128::size (ptxas, sm_90a, bf16: 119 registers at
// 3, 2 blocks an SM; at 4, 154 and one block)
constexpr int LN_BWD_MAX_CHUNKS = 3;
inline size_t layernorm_backward_onepass_smem(int C) { return (size_t)LN_BWD_WARPS * 2 * C * sizeof(float); }

template <int CH>
__global__ void __launch_bounds__(LN_BWD_WARPS * 32)
layernorm_backward_onepass_kernel(floatX* dinp, float* scratch, const floatX* dout, const floatX* inp,
                                  const floatX* weight, const float* mean, const float* rstd, int N, int C,
                                  int rows_per_chunk) {
    constexpr int V = x128::size;
    extern __shared__ float ln_sums[];  // warp w: dout*xhat at [2wC, 2wC + C), dout after it
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float dw[CH][V], db[CH][V];
#pragma unroll
    for (int k = 0; k < CH; k++)
#pragma unroll
        for (int i = 0; i < V; i++) dw[k][i] = db[k][i] = 0.0f;
    const int r0 = blockIdx.x * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
    for (int row = r0 + warp; row < r1; row += LN_BWD_WARPS) {
        const size_t base = (size_t)row * C;
        const float m = mean[row], r = rstd[row];
        // dinp's loads in flight beside dout's and inp's; dout and inp read again below, from L1
        x128 di[CH];
        float sum_g = 0.0f, sum_gx = 0.0f;
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const int c = (k * 32 + lane) * V;
            if (c >= C) continue;
            di[k] = load128(dinp + base + c);
            layernorm_backward_add_sums(load128(dout + base + c), load128(inp + base + c), load128(weight + c), m, r,
                                        sum_g, sum_gx);
        }
        const float mean_g = warp_reduce_sum(sum_g) / C;
        const float mean_gx = warp_reduce_sum(sum_gx) / C;
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const int c = (k * 32 + lane) * V;
            if (c >= C) continue;
            const x128 d = load128cs(dout + base + c), x = load128cs(inp + base + c);
            layernorm_backward_add_dinp(di[k], d, x, load128(weight + c), m, r, mean_g, mean_gx);
            store128(dinp + base + c, di[k]);
            for (int i = 0; i < V; i++) {
                const float dk = to_float(d[i]);
                dw[k][i] += dk * ((to_float(x[i]) - m) * r);
                db[k][i] += dk;
            }
        }
    }
    float* sum_dw = ln_sums + (size_t)warp * 2 * C;
#pragma unroll
    for (int k = 0; k < CH; k++) {
        const int c = (k * 32 + lane) * V;
        if (c >= C) continue;
        for (int i = 0; i < V; i += 4) {
            *reinterpret_cast<float4*>(sum_dw + c + i) = make_float4(dw[k][i], dw[k][i + 1], dw[k][i + 2], dw[k][i + 3]);
            *reinterpret_cast<float4*>(sum_dw + C + c + i) =
                make_float4(db[k][i], db[k][i + 1], db[k][i + 2], db[k][i + 3]);
        }
    }
    __syncthreads();
    float* out = scratch + (size_t)blockIdx.x * 2 * C;
    for (int i = threadIdx.x; i < 2 * C; i += blockDim.x) {
        float total = 0.0f;
        for (int w = 0; w < LN_BWD_WARPS; w++) total += ln_sums[(size_t)w * 2 * C + i];
        out[i] = total;
    }
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

// Whether the one pass takes C (its sums in registers: C up to 32 lanes x LN_BWD_MAX_CHUNKS x x128::size)
inline bool layernorm_backward_onepass_fits(int C) { return C <= 32 * LN_BWD_MAX_CHUNKS * (int)x128::size; }

// Accumulates (+=) into dinp (N,C), dweight, dbias (C), given dout (N,C), the forward's
// input and its saved mean, rstd. Uses ctx.workspace as scratch. path: LN_BWD_AUTO (the
// trainer's: the one pass where C fits it, else the two), LN_BWD_ONE_PASS or LN_BWD_TWO_PASS
// (dev/cuda/layernorm checks and times both).
enum LayernormBackwardPath { LN_BWD_AUTO, LN_BWD_TWO_PASS, LN_BWD_ONE_PASS };
inline void layernorm_backward(const CudaContext& ctx, floatX* dinp, floatX* dweight, floatX* dbias,
                               const floatX* dout, const floatX* inp, const floatX* weight,
                               const float* mean, const float* rstd, int N, int C,
                               LayernormBackwardPath path = LN_BWD_AUTO) {
    layernorm_check_shape(N, C, dweight, dbias);
    CHECK(mean != nullptr && rstd != nullptr, "mean=%p rstd=%p", (const void*)mean, (const void*)rstd);
    CHECK(is_aligned16(dinp) && is_aligned16(dout) && is_aligned16(inp) && is_aligned16(weight),
          "dinp=%p dout=%p inp=%p weight=%p not 16-byte aligned", (void*)dinp, (const void*)dout,
          (const void*)inp, (const void*)weight);
    const size_t onepass_smem = layernorm_backward_onepass_smem(C);
    if (path == LN_BWD_AUTO)
        path = layernorm_backward_onepass_fits(C) && onepass_smem <= (size_t)ctx.props.sharedMemPerBlockOptin
                   ? LN_BWD_ONE_PASS
                   : LN_BWD_TWO_PASS;
    const bool one_pass = path == LN_BWD_ONE_PASS;
    CHECK(!one_pass || layernorm_backward_onepass_fits(C), "C=%d: the one-pass LayerNorm backward takes C up to %d",
          C, 32 * LN_BWD_MAX_CHUNKS * (int)x128::size);
    CHECK(!one_pass || onepass_smem <= (size_t)ctx.props.sharedMemPerBlockOptin,
          "C=%d: the one-pass LayerNorm backward needs %zu bytes of shared memory", C, onepass_smem);
    // chunks of rows, at most 512 and no more than the scratch holds: about 16 rows each for
    // the two passes, 32 (4 a warp) for the one, whose block sums its warps' shared memory
    const int min_rows = one_pass ? 32 : 16;
    size_t max_chunks = ctx.workspace_bytes / (2 * (size_t)C * sizeof(float));
    CHECK(max_chunks >= 1, "C=%d too large for workspace of %zu bytes", C, ctx.workspace_bytes);
    int chunks = (int)std::min<size_t>({ceil_div(N, min_rows), 512, max_chunks});
    int rows_per_chunk = (int)ceil_div(N, chunks);
    chunks = (int)ceil_div(N, rows_per_chunk);
    float* scratch = (float*)ctx.workspace;
    if (one_pass) {
        constexpr int ROW_UNITS = 32 * (int)x128::size;  // columns a warp's 16-byte loads cover
        const int ch = (C + ROW_UNITS - 1) / ROW_UNITS;   // 16-byte loads a lane a row
#define LN_BWD_ONEPASS(CH)                                                                                  \
    case CH:                                                                                                \
        if (onepass_smem > CUDA_SMEM_DEFAULT_LIMIT)                                                         \
            CHECK_CUDA(cudaFuncSetAttribute(layernorm_backward_onepass_kernel<CH>,                          \
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)onepass_smem)); \
        layernorm_backward_onepass_kernel<CH><<<(unsigned)chunks, LN_BWD_WARPS * 32, onepass_smem, ctx.stream>>>( \
            dinp, scratch, dout, inp, weight, mean, rstd, N, C, rows_per_chunk);                            \
        break;
        switch (ch) {
            LN_BWD_ONEPASS(1)
            LN_BWD_ONEPASS(2)
            LN_BWD_ONEPASS(3)
            default: CHECK(false, "C=%d", C);
        }
#undef LN_BWD_ONEPASS
        CHECK_LAUNCH();
    } else {
        const int block = 256, rows_per_block = block / 32;
        layernorm_backward_dinp_kernel<<<(unsigned)ceil_div(N, rows_per_block), block, 0, ctx.stream>>>(
            dinp, dout, inp, weight, mean, rstd, N, C);
        CHECK_LAUNCH();
        const int groups = C / x128::size;
        const int pblock = std::min(256, (groups + 31) / 32 * 32);
        dim3 pgrid((unsigned)ceil_div(groups, pblock), (unsigned)chunks);
        layernorm_backward_partials_kernel<<<pgrid, pblock, 0, ctx.stream>>>(scratch, dout, inp, mean, rstd,
                                                                             N, C, rows_per_chunk);
        CHECK_LAUNCH();
    }
    column_sums_finish(ctx, dweight, dbias, scratch, chunks, C, 2 * (size_t)C);  // 3. (common.cuh)
}
