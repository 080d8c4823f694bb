// norm_backward.cuh: the backward of LayerNorm and RMSNorm (layernorm.cuh and rmsnorm.cuh call
// it), deterministic and without atomics, in one pass or two.
// defines: norm_backward, NormBackwardPath, NormOnePass, norm_onepass_plan
// CPU reference: llmc/cpu/layernorm.h, llmc/cpu/rmsnorm.h
//
// With g = dout * weight and xhat the normalized input ((x - mean) * rstd for LayerNorm,
// x * rstd for RMSNorm):
//   dinp    += rstd * (g - mean(g) - xhat * mean(g * xhat))   (RMSNorm has no mean(g) term)
//   dweight += the column sums of dout * xhat;  dbias += those of dout (LayerNorm only)
// The column sums go through fixed chunks of rows: each chunk's partial sums into scratch, then
// column_sums_finish (common.cuh) adds the chunks in order. Every sum's order depends only on N,
// C and the path, so the results are bitwise the same on every GPU and in every run.
//
// Two passes (any C): 1. one warp a row writes dinp (dout and inp read twice, the second time
// from L1); 2. a thread a 16-byte column group sums a chunk's rows, reading dout and inp again.
// 6 (N,C) tensors moved from device memory.
//
// One pass (C up to 6144 in bf16, 3072 in fp32): dinp and the column sums at once, the sums in
// registers: 4 (N,C) tensors moved. A team of TW warps (1, 2, 4 or 8) takes one row at a time; a
// block of 8 warps holds 8/TW teams and takes a chunk of rows, team t its rows t, t + 8/TW, ...
// Lane l of warp j in a team holds the 16-byte columns ((k*TW + j)*32 + l) x128::size.. for
// k < CH of every row it sees, and their column sums. Each warp adds its part of the row's two
// sums with shuffles; with TW > 1 the team's warps then add their parts, in warp order, through
// shared memory (one barrier a row, double-buffered). At the end the teams' column sums meet in
// shared memory and the block adds them, in team order, into its chunk's partials. TW is the
// smallest that fits C in CH <= 3 loads a lane (bf16, sm_90a: 119 registers at CH=3 and two
// blocks an SM; at 4, 154 and one): one warp up to 768 columns in bf16 (384 in fp32), 2 up to
// 1536, 4 up to 3072 (d48's 1600, the 1.2B Llama's 2048), 8 up to 6144 (Llama 3 8B's 4096).
//
// The trainers take the one pass wherever C fits it (NORM_BWD_AUTO). An earlier one pass, which
// added each row into its warp's column sums in shared memory, measured slower than the two on
// an H200 (2026-11-26, N=65536 C=768: 0.258 ms against 0.188; N=8192 C=1600: 0.093 against
// 0.069); this one touches shared memory once a block (once a row for a team's two sums).
// PREDICTED -0.5 to -2 ms of d12's B=64 step (25 backwards of 0.188 ms each by the two passes;
// dev/results/NOTES.md (e5)), and about as much at d48 and the Llamas; not yet measured
// (dev/cuda/layernorm and rmsnorm --bench time both paths).
#pragma once
#include <algorithm>
#include "common.cuh"

// ---------------------------------------------------------------------------------------
// the arithmetic on one 16-byte chunk (every path, in the same order)

// sum_g += g, sum_gx += g * xhat over the chunk (m = 0 for RMSNorm)
__device__ inline void norm_backward_add_sums(const x128& d, const x128& x, const x128& w, float m, float r,
                                              float& sum_g, float& sum_gx) {
    for (int k = 0; k < x128::size; k++) {
        float g = to_float(d[k]) * to_float(w[k]);
        sum_g += g;
        sum_gx += g * ((to_float(x[k]) - m) * r);
    }
}
// di += rstd * (g - mean_g - xhat * mean_gx) (m = 0 and mean_g = 0 for RMSNorm)
__device__ inline void norm_backward_add_dinp(x128& di, const x128& d, const x128& x, const x128& w, float m,
                                              float r, float mean_g, float mean_gx) {
    for (int k = 0; k < x128::size; k++) {
        float xhat = (to_float(x[k]) - m) * r;
        float v = r * (to_float(d[k]) * to_float(w[k]) - mean_g - xhat * mean_gx);
        di[k] = from_float<floatX>(to_float(di[k]) + v);
    }
}

// ---------------------------------------------------------------------------------------
// the two passes (any C)

// 1. one warp per row: dinp[row] += rstd * (g - mean(g) - xhat * mean(g * xhat)); mean nullptr
// for RMSNorm
__global__ void norm_backward_dinp_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* weight,
                                          const float* mean, const float* rstd, int N, int C) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= N) return;
    const int lane = threadIdx.x % 32;
    const size_t base = (size_t)row * C;
    const float m = mean != nullptr ? mean[row] : 0.0f, r = rstd[row];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size)
        norm_backward_add_sums(load128(dout + base + c), load128(inp + base + c), load128(weight + c), m, r, sum_g,
                               sum_gx);
    const float mean_g = mean != nullptr ? warp_reduce_sum(sum_g) / C : 0.0f;
    const float mean_gx = warp_reduce_sum(sum_gx) / C;
    for (int c = lane * x128::size; c < C; c += 32 * x128::size) {
        x128 di = load128(dinp + base + c);
        norm_backward_add_dinp(di, load128(dout + base + c), load128(inp + base + c), load128(weight + c), m, r,
                               mean_g, mean_gx);
        store128(dinp + base + c, di);
    }
}

// 2. scratch[chunk] = the sums over the chunk's rows of dout*xhat (C), then (LayerNorm, mean
// not nullptr) of dout (C). grid = (channel groups / blockDim, chunks); rows [chunk *
// rows_per_chunk, ...)
__global__ void norm_backward_partials_kernel(float* scratch, const floatX* dout, const floatX* inp, const float* mean,
                                              const float* rstd, int N, int C, int rows_per_chunk) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= C / x128::size) return;
    const int c = g * x128::size;
    const int r0 = blockIdx.y * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
    float dw[x128::size] = {}, db[x128::size] = {};
    for (int row = r0; row < r1; row++) {
        x128 d = load128(dout + (size_t)row * C + c), x = load128(inp + (size_t)row * C + c);
        const float m = mean != nullptr ? mean[row] : 0.0f, r = rstd[row];
        for (int k = 0; k < x128::size; k++) {
            float dk = to_float(d[k]);
            dw[k] += dk * ((to_float(x[k]) - m) * r);
            db[k] += dk;
        }
    }
    float* out = scratch + (size_t)blockIdx.y * (mean != nullptr ? 2 : 1) * C;
    for (int k = 0; k < x128::size; k++) {
        out[c + k] = dw[k];
        if (mean != nullptr) out[C + c + k] = db[k];
    }
}

// ---------------------------------------------------------------------------------------
// the one pass

constexpr int NORM_BWD_WARPS = 8;       // a block's warps
constexpr int NORM_BWD_MAX_CHUNKS = 3;  // 16-byte loads a lane a row
constexpr int NORM_BWD_ROW_SUMS = 2 * NORM_BWD_WARPS * 2;  // floats of shared memory before the column sums

// LN: LayerNorm (mean, and dbias's sums); else RMSNorm
template <bool LN, int CH, int TW>
__global__ void __launch_bounds__(NORM_BWD_WARPS * 32)
norm_backward_onepass_kernel(floatX* dinp, float* scratch, const floatX* dout, const floatX* inp,
                             const floatX* weight, const float* mean, const float* rstd, int N, int C,
                             int rows_per_chunk) {
    constexpr int V = x128::size, TEAMS = NORM_BWD_WARPS / TW, NS = LN ? 2 : 1;
    // (TW > 1) each warp's part of a row's two sums, double-buffered; then team t's column sums:
    // dout*xhat at [t*NS*C, +C), then dout (LN)
    extern __shared__ float norm_smem[];
    float(*norm_row_sums)[NORM_BWD_WARPS][2] = reinterpret_cast<float(*)[NORM_BWD_WARPS][2]>(norm_smem);
    float* norm_col_sums = norm_smem + NORM_BWD_ROW_SUMS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, team = warp / TW, tw = warp % TW;
    auto column = [&](int k) { return ((k * TW + tw) * 32 + lane) * V; };  // of this lane's k-th load
    float dw[CH][V], db[LN ? CH : 1][V];
#pragma unroll
    for (int k = 0; k < CH; k++)
#pragma unroll
        for (int i = 0; i < V; i++) dw[k][i] = db[LN ? k : 0][i] = 0.0f;
    const int r0 = blockIdx.x * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
    int buf = 0;
    // the same trips for every warp of the block (a team past the chunk's end idles through the
    // barrier)
    for (int first = r0; first < r1; first += TEAMS) {
        const int row = first + team;
        const bool active = row < r1;
        if (TW == 1 && !active) break;
        const size_t base = (size_t)row * C;
        const float m = LN && active ? mean[row] : 0.0f, r = active ? rstd[row] : 0.0f;
        // dinp's loads in flight beside dout's and inp's; dout and inp read again below, from L1
        x128 di[CH];
        float sum_g = 0.0f, sum_gx = 0.0f;
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const int c = column(k);
            if (!active || c >= C) continue;
            di[k] = load128(dinp + base + c);
            norm_backward_add_sums(load128(dout + base + c), load128(inp + base + c), load128(weight + c), m, r, sum_g,
                                   sum_gx);
        }
        sum_g = warp_reduce_sum(sum_g);
        sum_gx = warp_reduce_sum(sum_gx);
        if (TW > 1) {
            if (lane == 0) {
                norm_row_sums[buf][warp][0] = sum_g;
                norm_row_sums[buf][warp][1] = sum_gx;
            }
            // this row's parts go where the row before last put its own, which every warp read
            // before the last row's barrier: one barrier a row
            __syncthreads();
            sum_g = sum_gx = 0.0f;
            for (int j = 0; j < TW; j++) {
                sum_g += norm_row_sums[buf][team * TW + j][0];
                sum_gx += norm_row_sums[buf][team * TW + j][1];
            }
            buf ^= 1;
        }
        const float mean_g = LN ? sum_g / C : 0.0f, mean_gx = sum_gx / C;
#pragma unroll
        for (int k = 0; k < CH; k++) {
            const int c = column(k);
            if (!active || c >= C) continue;
            const x128 d = load128cs(dout + base + c), x = load128cs(inp + base + c);
            norm_backward_add_dinp(di[k], d, x, load128(weight + c), m, r, mean_g, mean_gx);
            store128(dinp + base + c, di[k]);
            for (int i = 0; i < V; i++) {
                const float dk = to_float(d[i]);
                dw[k][i] += dk * ((to_float(x[i]) - m) * r);
                if (LN) db[k][i] += dk;
            }
        }
    }
    float* team_sums = norm_col_sums + (size_t)team * NS * C;
#pragma unroll
    for (int k = 0; k < CH; k++) {
        const int c = column(k);
        if (c >= C) continue;
        for (int i = 0; i < V; i += 4) {
            *reinterpret_cast<float4*>(team_sums + c + i) = make_float4(dw[k][i], dw[k][i + 1], dw[k][i + 2], dw[k][i + 3]);
            if (LN)
                *reinterpret_cast<float4*>(team_sums + C + c + i) =
                    make_float4(db[k][i], db[k][i + 1], db[k][i + 2], db[k][i + 3]);
        }
    }
    __syncthreads();
    float* out = scratch + (size_t)blockIdx.x * NS * C;
    for (int i = threadIdx.x; i < NS * C; i += blockDim.x) {
        float total = 0.0f;
        for (int t = 0; t < TEAMS; t++) total += norm_col_sums[(size_t)t * NS * C + i];
        out[i] = total;
    }
}

// ---------------------------------------------------------------------------------------
// launchers

// The backward's way: AUTO (the trainers': the one pass where C fits it, else the two), or
// either one by name (dev/cuda/layernorm and rmsnorm check and time both).
enum NormBackwardPath { NORM_BWD_AUTO, NORM_BWD_TWO_PASS, NORM_BWD_ONE_PASS };

// The one pass's shape for a row of C columns: TW warps a row, CH loads a lane; fits false
// where C is wider than 8 warps of 3 loads (or its shared memory is more than the GPU has).
struct NormOnePass {
    bool fits = false;
    int tw = 0, ch = 0;
    size_t smem = 0;  // dynamic shared memory: a row's sums, the teams' column sums
};
inline NormOnePass norm_onepass_plan(const CudaContext& ctx, int C, bool ln) {
    NormOnePass p;
    const int units = C / (int)x128::size;  // 16-byte loads a row (C a multiple: the callers check)
    for (int tw = 1; tw <= NORM_BWD_WARPS; tw *= 2)
        if (units <= 32 * tw * NORM_BWD_MAX_CHUNKS) {
            p.tw = tw;
            p.ch = (units + 32 * tw - 1) / (32 * tw);
            p.smem = (NORM_BWD_ROW_SUMS + (size_t)(NORM_BWD_WARPS / tw) * (ln ? 2 : 1) * C) * sizeof(float);
            p.fits = p.smem <= (size_t)ctx.props.sharedMemPerBlockOptin;
            break;
        }
    return p;
}

// Accumulates (+=) into dinp (N,C), dweight and (LayerNorm) dbias (C), given dout (N,C), the
// forward's input and its saved mean (nullptr for RMSNorm, whose dbias is nullptr too) and rstd.
// Uses ctx.workspace as scratch. The callers check shapes and alignment.
inline void norm_backward(const CudaContext& ctx, floatX* dinp, floatX* dweight, floatX* dbias, const floatX* dout,
                          const floatX* inp, const floatX* weight, const float* mean, const float* rstd, int N, int C,
                          NormBackwardPath path) {
    const bool ln = mean != nullptr;
    const char* name = ln ? "LayerNorm" : "RMSNorm";
    CHECK(ln == (dbias != nullptr), "%s backward: mean=%p with dbias=%p", name, (const void*)mean, (void*)dbias);
    const NormOnePass p = norm_onepass_plan(ctx, C, ln);
    if (path == NORM_BWD_AUTO) path = p.fits ? NORM_BWD_ONE_PASS : NORM_BWD_TWO_PASS;
    const bool one_pass = path == NORM_BWD_ONE_PASS;
    CHECK(!one_pass || p.fits, "C=%d: the one-pass %s backward takes C up to %d (and %zu bytes of shared memory)", C,
          name, 32 * NORM_BWD_WARPS * NORM_BWD_MAX_CHUNKS * (int)x128::size, p.smem);
    // chunks of rows for the column partials: about 16 rows each (the one pass at least 4 a
    // team), at most 512 chunks, and no more than the scratch holds (2 sums a column for
    // LayerNorm, 1 for RMSNorm)
    const int NS = ln ? 2 : 1;
    const int min_rows = one_pass ? std::max(16, 4 * (NORM_BWD_WARPS / p.tw)) : 16;
    const size_t max_chunks = ctx.workspace_bytes / ((size_t)NS * C * sizeof(float));
    CHECK(max_chunks >= 1, "C=%d too large for workspace of %zu bytes", C, ctx.workspace_bytes);
    int chunks = (int)std::min<size_t>({ceil_div(N, min_rows), 512, max_chunks});
    const int rows_per_chunk = (int)ceil_div(N, chunks);
    chunks = (int)ceil_div(N, rows_per_chunk);
    float* scratch = (float*)ctx.workspace;
    if (one_pass) {
        bool launched = false;
        auto launch = [&](auto kernel) {
            if (p.smem > CUDA_SMEM_DEFAULT_LIMIT)
                CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)p.smem));
            kernel<<<(unsigned)chunks, NORM_BWD_WARPS * 32, p.smem, ctx.stream>>>(dinp, scratch, dout, inp, weight,
                                                                                  mean, rstd, N, C, rows_per_chunk);
            launched = true;
        };
        // the plans norm_onepass_plan makes: one warp 1-3 loads; 2, 4 or 8 warps 2-3 (1 fits in half as many)
#define NORM_BWD_ONEPASS(LN, CH, TW) \
    if (ln == LN && p.ch == CH && p.tw == TW) launch(norm_backward_onepass_kernel<LN, CH, TW>);
#define NORM_BWD_ONEPASS_ALL(LN)                                                                      \
    NORM_BWD_ONEPASS(LN, 1, 1) NORM_BWD_ONEPASS(LN, 2, 1) NORM_BWD_ONEPASS(LN, 3, 1)                 \
    NORM_BWD_ONEPASS(LN, 2, 2) NORM_BWD_ONEPASS(LN, 3, 2) NORM_BWD_ONEPASS(LN, 2, 4)                 \
    NORM_BWD_ONEPASS(LN, 3, 4) NORM_BWD_ONEPASS(LN, 2, 8) NORM_BWD_ONEPASS(LN, 3, 8)
        NORM_BWD_ONEPASS_ALL(true)
        NORM_BWD_ONEPASS_ALL(false)
#undef NORM_BWD_ONEPASS_ALL
#undef NORM_BWD_ONEPASS
        CHECK(launched, "C=%d: no one-pass kernel for %d warps of %d loads", C, p.tw, p.ch);
        CHECK_LAUNCH();
    } else {
        const int block = 256, rows_per_block = block / 32;
        norm_backward_dinp_kernel<<<(unsigned)ceil_div(N, rows_per_block), block, 0, ctx.stream>>>(
            dinp, dout, inp, weight, mean, rstd, N, C);
        CHECK_LAUNCH();
        const int groups = C / x128::size;
        const int pblock = std::min(256, (groups + 31) / 32 * 32);
        dim3 pgrid((unsigned)ceil_div(groups, pblock), (unsigned)chunks);
        norm_backward_partials_kernel<<<pgrid, pblock, 0, ctx.stream>>>(scratch, dout, inp, mean, rstd, N, C,
                                                                        rows_per_chunk);
        CHECK_LAUNCH();
    }
    column_sums_finish(ctx, dweight, dbias, scratch, chunks, C, (size_t)NS * C);  // 3. (common.cuh)
}
