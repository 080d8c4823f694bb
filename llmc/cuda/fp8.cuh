// fp8.cuh: the FP8 building blocks of train_gpt_fp8 (issue 26): the cast of a bf16 or fp32
// tensor to E4M3 or E5M2 with a per-tensor scale, which takes the tensor's amax in the same
// pass; the per-tensor scaling state (Transformer Engine's delayed scaling, or current scaling);
// and the FP8 GEMM through cuBLASLt.
// defines: Fp8Traits, fp8_cast, fp8_amax, FP8_CAST_THREADS, FP8_CAST_MAX_BLOCKS, fp8_cast_transpose,
//          FP8_TRANSPOSE_TILE, FP8_CT_TILE, FP8_CT_GROUPS, Fp8From, Fp8Src, fp8_src, fp8_src_reads_in, fp8_load8,
//          fp8_values8, fp8_codes8, fp8_cast_transpose_tiled,
//          Fp8Scaling, fp8_scaling_init, fp8_scaling_free,
//          fp8_scaling_update, fp8_matmul_refusal, fp8_matmul
// CPU reference: dev/cuda/fp8.cu (the OCP FP8 specification's numbers, rounded to nearest even
// by hand; a double-precision product of the decoded inputs)
//
// The recipe (Transformer Engine's, as MLPerf's H100 GPT-3 runs use it): a tensor x is stored as
// q = saturate(x * scale) in fp8, scale = fp8_max / amax / 2^margin, amax a recent max |x|. The
// GEMM multiplies q_a q_b and takes the scales back out with 1/scale_a and 1/scale_b, the
// "scale" pointers of cuBLASLt (which multiply). E4M3 (max 448) for activations and weights,
// E5M2 (max 57344, more range, less precision) for gradients.
//
// Layout: cuBLASLt's FP8 kernels take only "TN": D (m,n) = A^T B with A stored (k,m) and B stored
// (k,n), column-major, so both operands have k contiguous. The trainer's forward is exactly that
// (out^T (OC,BT) = W (OC,C) as A, inp (BT,C) as B: m=OC n=BT k=C, as matmul.cuh's forward);
// its two backward products need transposed fp8 copies (W^T for dinp, inp^T and dout^T for
// dweight), which the cast-transpose kernel gives (fp8_cast_transpose).
#pragma once
#include <cfloat>
#include <cmath>
#include <type_traits>
#include <cuda_fp8.h>
#include "common.cuh"
#include "matmul.cuh"  // matmul_alignment, MatmulAlgo's cache, matmul_bias_backward
#include "gelu.cuh"    // defines: gelu_value, gelu_grad
#include "swiglu.cuh"  // defines: swiglu_value, swiglu_grad_gate, swiglu_grad_up
#include "../gpu_scratch.h"  // defines: Fp8Recipe, FP8_AMAX_HISTORY_DEFAULT, fp8_scaling_floats

// ---------------------------------------------------------------------------------------
// the two formats' largest finite numbers (OCP 8-bit Floating Point specification)

template <typename T> struct Fp8Traits;
template <> struct Fp8Traits<__nv_fp8_e4m3> { static constexpr float max = 448.0f; };
template <> struct Fp8Traits<__nv_fp8_e5m2> { static constexpr float max = 57344.0f; };

// ---------------------------------------------------------------------------------------
// the cast: out = saturate(in * scale), amax = max |in|, in one pass
//
// The amax is kept as the bits of |x|: for floats without a sign the order of the bits as
// unsigned integers is the order of the values, and every NaN lies above infinity. So an
// integer max is exact, does not depend on the order it is taken in, and a NaN anywhere makes
// the amax NaN (fmaxf would drop it, and the scale update could not see it).
// Two stages, no atomics (as global_norm.cuh): each block writes its maximum to a scratch slot,
// then one block takes the maximum of the slots.

constexpr int FP8_CAST_THREADS = 256;
constexpr int FP8_CAST_MAX_BLOCKS = 1024;  // the scratch slots: 4 KiB of ctx.workspace

__device__ inline uint32_t fp8_abs_bits(float x) { return __float_as_uint(x) & 0x7fffffffu; }

__device__ inline uint32_t fp8_block_max(uint32_t v, uint32_t* shared) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    for (int o = 16; o > 0; o >>= 1) {
        uint32_t w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    __syncthreads();  // shared may still be read by a previous call
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < num_warps ? shared[lane] : 0u;
    for (int o = 16; o > 0; o >>= 1) {
        uint32_t w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    return v;
}

// where a cast's values come from: the tensor in itself, or an MLP activation (Act, common.cuh)
// made on the way in, so that the activation's own pass and its bf16 tensor are not needed:
//   FP8_FROM_GELU, FP8_FROM_SWIGLU: the activation of pre, the input of the projection after it
//     (GELU: pre (rows, cols); SwiGLU: pre (rows, 2 cols) = [gate | up]), as gelu_forward and
//     swiglu_forward write it (rounded to floatX); in is not read;
//   FP8_FROM_GELU_GRAD, FP8_FROM_SWIGLU_GRAD: in, the gradient of that activation's output, taken
//     back through it, as gelu_backward and swiglu_backward write it (GELU: in (rows, cols) times
//     gelu'(pre); SwiGLU: in (rows, cols / 2), the gate's gradient in the first half of the
//     columns and up's in the second): the output gradient of the linear before the activation.
// The same numbers those passes write, so a run is the same to the bit either way.
enum Fp8From { FP8_FROM_IN, FP8_FROM_GELU, FP8_FROM_SWIGLU, FP8_FROM_GELU_GRAD, FP8_FROM_SWIGLU_GRAD };
struct Fp8Src {
    Fp8From from = FP8_FROM_IN;
    const floatX* pre = nullptr;
};
// whether the cast reads in (not when it makes a forward activation from pre alone)
inline bool fp8_src_reads_in(Fp8Src src) { return src.from != FP8_FROM_GELU && src.from != FP8_FROM_SWIGLU; }
// the source of a layer's input that is act, or (grad) of its output gradient going back through act
inline Fp8Src fp8_src(Act act, bool grad) {
    if (act.kind == ACT_NONE) return Fp8Src{};
    const bool gelu = act.kind == ACT_GELU;
    return Fp8Src{grad ? (gelu ? FP8_FROM_GELU_GRAD : FP8_FROM_SWIGLU_GRAD) : (gelu ? FP8_FROM_GELU : FP8_FROM_SWIGLU),
                  act.pre};
}

// 8 consecutive elements of p (16-byte aligned) as floats, streamed (read once)
template <typename Tin>
__device__ inline void fp8_load8(const Tin* p, float f[8]) {
    constexpr int V = Packed128<Tin>::size;  // 8 bf16 or 4 floats
    for (int h = 0; h < 8 / V; h++) {
        Packed128<Tin> v = load128cs(p + h * V);
        for (int k = 0; k < V; k++) f[h * V + k] = to_float(v[k]);
    }
}

// elements c..c+7 of row r of the tensor a cast reads, (rows, cols), from its source (above)
template <int FROM, typename Tin>
__device__ inline void fp8_values8(const Tin* in, const floatX* pre, size_t r, int c, int cols, float f[8]) {
    if (FROM == FP8_FROM_GELU) {
        fp8_load8(pre + r * cols + c, f);
        for (int k = 0; k < 8; k++) f[k] = to_float(from_float<floatX>(gelu_value(f[k])));
    } else if (FROM == FP8_FROM_SWIGLU) {
        float u[8];
        fp8_load8(pre + r * 2 * cols + c, f);
        fp8_load8(pre + r * 2 * cols + cols + c, u);
        for (int k = 0; k < 8; k++) f[k] = to_float(from_float<floatX>(swiglu_value(f[k], u[k])));
    } else if (FROM == FP8_FROM_SWIGLU_GRAD) {
        const int F = cols / 2, j = c < F ? c : c - F;  // j: the SwiGLU output's column
        float d[8], z[8];
        fp8_load8(in + r * F + j, d);
        fp8_load8(pre + r * cols + j, z);
        if (c < F) {
            float u[8];
            fp8_load8(pre + r * cols + F + j, u);
            for (int k = 0; k < 8; k++)
                f[k] = to_float(from_float<floatX>(swiglu_grad_gate(z[k], act_sigmoid(z[k]), u[k], d[k])));
        } else {
            for (int k = 0; k < 8; k++)
                f[k] = to_float(from_float<floatX>(swiglu_grad_up(z[k], act_sigmoid(z[k]), d[k])));
        }
    } else {
        fp8_load8(in + r * cols + c, f);
        if (FROM == FP8_FROM_GELU_GRAD) {
            float g[8];
            fp8_load8(pre + r * cols + c, g);
            for (int k = 0; k < 8; k++) f[k] = to_float(from_float<floatX>(gelu_grad(g[k]) * f[k]));
        }
    }
}

// the 8 codes of f * s in one word (the first lowest), and m = max(m, the bits of max |f|)
template <typename Tout>
__device__ inline unsigned long long fp8_codes8(const float f[8], float s, uint32_t& m) {
    unsigned long long word = 0;
    for (int k = 0; k < 8; k++) {
        const uint32_t a = fp8_abs_bits(f[k]);
        m = a > m ? a : m;
        word |= (unsigned long long)Tout(f[k] * s).__x << (8 * k);
    }
    return word;
}

// ---------------------------------------------------------------------------------------
// the cast itself

// partials[blockIdx.x] = the bits of max |in| over this block's elements; with WRITE also
// out[i] = Tout(in[i] * *scale): the product in fp32, then rounded to the nearest fp8 number
// (ties to even) and saturated to +-max (CUDA's fp8 constructors: __NV_SATFINITE). 16-byte
// groups of in (8 bf16 or 4 floats) become one 8- or 4-byte store of out; the tail one by one.
template <typename Tout, typename Tin, bool WRITE>
__global__ void __launch_bounds__(FP8_CAST_THREADS)
fp8_cast_kernel(Tout* out, uint32_t* partials, const Tin* in, const float* scale, size_t n) {
    __shared__ uint32_t shared[32];
    constexpr int V = Packed128<Tin>::size;
    typedef typename std::conditional<V == 8, unsigned long long, unsigned int>::type Word;
    const float s = WRITE ? *scale : 0.0f;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    uint32_t m = 0;
    const size_t groups = n / V;
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
        Packed128<Tin> v = load128cs(in + g * V);
        Word word = 0;
        for (int k = 0; k < V; k++) {
            const float f = to_float(v[k]);
            const uint32_t a = fp8_abs_bits(f);
            m = a > m ? a : m;
            if (WRITE) word |= (Word)Tout(f * s).__x << (8 * k);
        }
        if (WRITE) *reinterpret_cast<Word*>(out + g * V) = word;
    }
    for (size_t i = groups * V + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const float f = to_float(in[i]);
        const uint32_t a = fp8_abs_bits(f);
        m = a > m ? a : m;
        if (WRITE) out[i] = Tout(f * s);
    }
    m = fp8_block_max(m, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = m;
}

// *amax = max(*amax if accumulate, the partials); *scale_inv = 1 / *scale when asked
__global__ void fp8_amax_finish_kernel(float* amax, float* scale_inv, const float* scale, const uint32_t* partials,
                                       int num_partials, bool accumulate) {
    __shared__ uint32_t shared[32];
    uint32_t m = 0;
    for (int i = threadIdx.x; i < num_partials; i += blockDim.x) m = partials[i] > m ? partials[i] : m;
    m = fp8_block_max(m, shared);
    if (threadIdx.x != 0) return;
    if (accumulate) {
        const uint32_t old = fp8_abs_bits(*amax);
        m = old > m ? old : m;
    }
    *amax = __uint_as_float(m);
    if (scale_inv != nullptr) *scale_inv = 1.0f / *scale;
}

// The cast of an activation made on the way (FROM: FP8_FROM_GELU or FP8_FROM_SWIGLU, fp8_values8)
// from pre: (n / cols, cols) values, cols a multiple of 8, 8 a thread at a time, one 8-byte store
template <typename Tout, int FROM>
__global__ void __launch_bounds__(FP8_CAST_THREADS)
fp8_cast_act_kernel(Tout* out, uint32_t* partials, const floatX* pre, const float* scale, size_t n, int cols) {
    __shared__ uint32_t shared[32];
    const float s = *scale;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    uint32_t m = 0;
    for (size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x; g < n / 8; g += stride) {
        const size_t i = g * 8;
        float f[8];
        fp8_values8<FROM>((const floatX*)nullptr, pre, i / cols, (int)(i % cols), cols, f);
        *reinterpret_cast<unsigned long long*>(out + i) = fp8_codes8<Tout>(f, s, m);
    }
    m = fp8_block_max(m, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = m;
}

template <typename Tout, typename Tin, bool WRITE>
inline void fp8_cast_launch(const CudaContext& ctx, Tout* out, float* amax, float* scale_inv, const Tin* in,
                            const float* scale, size_t n, bool accumulate, Fp8Src src = Fp8Src{}, int cols = 0) {
    const bool act = src.from != FP8_FROM_IN;
    CHECK(n > 0, "n=%zu", n);
    CHECK(amax != nullptr && (!WRITE || scale != nullptr), "amax=%p scale=%p", (void*)amax, (const void*)scale);
    CHECK((act || is_aligned16(in)) && is_aligned16(out), "in=%p out=%p not 16-byte aligned", (const void*)in, (void*)out);
    CHECK(ctx.workspace_bytes >= FP8_CAST_MAX_BLOCKS * sizeof(uint32_t), "workspace %zu bytes", ctx.workspace_bytes);
    const size_t groups = act ? n / 8 : n / Packed128<Tin>::size;
    const int blocks = (int)std::min<size_t>(std::max<size_t>(1, ceil_div(groups, FP8_CAST_THREADS)), FP8_CAST_MAX_BLOCKS);
    uint32_t* partials = (uint32_t*)ctx.workspace;
    if (!act) {
        fp8_cast_kernel<Tout, Tin, WRITE><<<blocks, FP8_CAST_THREADS, 0, ctx.stream>>>(out, partials, in, scale, n);
    } else {
        CHECK(WRITE && !fp8_src_reads_in(src) && src.pre != nullptr &&
                  is_aligned16(src.pre) && cols > 0 && cols % 8 == 0 && n % cols == 0,
              "the cast of an activation: source %d, cols %d, n %zu", (int)src.from, cols, n);
        if (src.from == FP8_FROM_GELU)
            fp8_cast_act_kernel<Tout, FP8_FROM_GELU><<<blocks, FP8_CAST_THREADS, 0, ctx.stream>>>(out, partials, src.pre,
                                                                                                  scale, n, cols);
        else
            fp8_cast_act_kernel<Tout, FP8_FROM_SWIGLU><<<blocks, FP8_CAST_THREADS, 0, ctx.stream>>>(out, partials,
                                                                                                    src.pre, scale, n, cols);
    }
    CHECK_LAUNCH();
    fp8_amax_finish_kernel<<<1, 256, 0, ctx.stream>>>(amax, scale_inv, scale, partials, blocks, accumulate);
    CHECK_LAUNCH();
}

// out (n fp8 numbers) = saturate(in * *scale), rounded to nearest even; *amax = max(*amax,
// max |in|): the input's amax before scaling, what the next scale is computed from, kept as a
// running max over the micro-steps of a step (fp8_scaling_update clears it); a NaN in the input
// makes it NaN. With scale_inv != nullptr, *scale_inv = 1 / *scale: the factor that takes out
// back to in's values, stored with the data so that a later scale update does not change what
// out means (the GEMM's scale pointer). scale, amax and scale_inv are device floats, read and
// written on ctx.stream: no host synchronisation. in and out 16-byte aligned; uses ctx.workspace.
// (A scale_inv inside an Fp8Scaling has a copy the GEMMs read, which this does not write: after
// casting into one, fp8_scaling_copy_gemm. The trainers pass nullptr; the update kernel writes both.)
// With src a forward activation (FP8_FROM_GELU or FP8_FROM_SWIGLU; Fp8Src), the n values are
// that activation of src.pre, made on the way as its pass would write them, (n / cols, cols):
// in is not read (nullptr will do).
template <typename Tout, typename Tin>
inline void fp8_cast(const CudaContext& ctx, Tout* out, float* amax, float* scale_inv, const Tin* in,
                     const float* scale, size_t n, Fp8Src src = Fp8Src{}, int cols = 0) {
    static_assert(std::is_same<Tout, __nv_fp8_e4m3>::value || std::is_same<Tout, __nv_fp8_e5m2>::value, "fp8 out");
    CHECK(out != nullptr, "out=nullptr");
    fp8_cast_launch<Tout, Tin, true>(ctx, out, amax, scale_inv, in, scale, n, true, src, cols);
}

// *amax = max |in| (overwritten): current scaling's first pass, before the cast. in 16-byte aligned.
template <typename Tin>
inline void fp8_amax(const CudaContext& ctx, float* amax, const Tin* in, size_t n) {
    fp8_cast_launch<__nv_fp8_e4m3, Tin, false>(ctx, nullptr, amax, nullptr, in, nullptr, n, false);
}

// ---------------------------------------------------------------------------------------
// the cast-transpose: out_t (cols, rows) = saturate(in (rows, cols) * scale) transposed, and
// optionally out (rows, cols) the plain cast beside it, amax = max |in|, in one pass
//
// The backward's FP8 GEMMs need k contiguous in both operands (the TN layout above), so W^T,
// inp^T and dout^T must exist in fp8. Transposing a bf16 tensor and then casting it would read
// and write it twice; Transformer Engine's cast_transpose does both at once, and so does this
// (and for dout, which the backward needs both ways, it writes both from the one read).
// Two kernels. The first, for any shape: a block takes 32x32 tiles, its 8 warps read rows of the
// tile (32 neighbouring elements each, coalesced), cast them, keep the codes in shared memory,
// then write the tile's columns as rows of out_t (32 neighbouring bytes each), a byte a store.
// The second, tiled (below), for the shapes the trainer has, 16 bytes a load and a store.
// The codes are the same bits fp8_cast writes (one fp32 product, then Tout's rounding), and the
// amax the same two-stage maximum of the bits, so the two casts of a tensor agree exactly.

constexpr int FP8_TRANSPOSE_TILE = 32;

template <typename Tout, typename Tin, bool WRITE_ROWS>
__global__ void __launch_bounds__(FP8_CAST_THREADS)
fp8_cast_transpose_kernel(Tout* out, Tout* out_t, uint32_t* partials, const Tin* in, const float* scale, int rows,
                          int cols) {
    constexpr int TILE = FP8_TRANSPOSE_TILE, ROWS_AT_ONCE = FP8_CAST_THREADS / TILE;
    static_assert(FP8_CAST_THREADS % TILE == 0 && TILE == 32, "a warp spans a tile's row");
    // +1: the column reads (tile[lane][i]) fall in different banks instead of a 32-way conflict
    __shared__ uint8_t tile[TILE][TILE + 1];
    __shared__ uint32_t shared[32];
    const float s = *scale;
    const int lane = threadIdx.x % TILE, row_in_tile = threadIdx.x / TILE;
    const size_t tiles_c = ((size_t)cols + TILE - 1) / TILE;
    const size_t tiles = ((size_t)rows + TILE - 1) / TILE * tiles_c;
    uint32_t m = 0;
    // t depends on the block only: every thread takes each __syncthreads below the same times
    for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int r0 = (int)(t / tiles_c) * TILE, c0 = (int)(t % tiles_c) * TILE;
        for (int i = row_in_tile; i < TILE; i += ROWS_AT_ONCE) {
            const int r = r0 + i, c = c0 + lane;
            if (r < rows && c < cols) {
                const float f = to_float(in[(size_t)r * cols + c]);
                const uint32_t a = fp8_abs_bits(f);
                m = a > m ? a : m;
                const Tout q(f * s);
                tile[i][lane] = q.__x;
                if (WRITE_ROWS) out[(size_t)r * cols + c] = q;
            }
        }
        __syncthreads();
        for (int i = row_in_tile; i < TILE; i += ROWS_AT_ONCE) {
            const int c = c0 + i, r = r0 + lane;
            if (c < cols && r < rows) out_t[(size_t)c * rows + r].__x = tile[lane][i];
        }
        __syncthreads();  // the tile is rewritten by the next iteration
    }
    m = fp8_block_max(m, shared);
    if (threadIdx.x == 0) partials[blockIdx.x] = m;
}

// The tiled cast-transpose, for the shapes train_gpt_fp8 casts (rows a multiple of 16, cols of 8,
// in, out and out_t 16-byte aligned; every dimension of its GEMMs is a multiple of 16). The
// 32x32 kernel above reads 2 bytes and writes 1 per instruction, well under the GPU's memory
// rate; this one moves 16 bytes at a time both ways, as Transformer Engine's cast_transpose does.
// A block owns a strip of 64 columns and walks down it, one 64x64 tile after another (the row
// tiles blockIdx.y, + gridDim.y, ...). Loading, thread t takes 8 neighbouring columns (t % 8) of
// rows t / 8 and t / 8 + 32: one 16-byte load of bf16 (two of fp32) each, a warp 4 whole rows of
// the tile; it writes the 8 codes to out as one 8-byte store and to the tile in shared memory.
// Storing, thread t takes column t % 64 of the tile and 16 of its rows (t / 64): it gathers their
// 16 codes (a warp reads 32 neighbouring bytes of one tile row at a time: no bank conflicts) and
// writes them to out_t as one 16-byte store. With DBIAS the block also sums its columns (fp32, in
// a fixed order: each thread its 8 columns over its rows, then the 32 threads of a column in
// turn) into dbias_partials (gridDim.y, cols), which column_sums_finish adds into the bias
// gradient: the backward's bias-gradient pass over dout rides on the cast's read of it.
// With FROM (an Fp8From; Tin floatX) the values come from an activation (fp8_values8): the GELU
// or SwiGLU output the projection after it takes, transposed for its weight gradient (in place of
// the activation's pass, or its recompute, and the read of its bf16 output), or the gradient of
// the linear before it, taken back through the activation (Transformer Engine's
// cast_transpose_dbias_dgelu), the very values those passes would have written.
constexpr int FP8_CT_TILE = 64;
constexpr int FP8_CT_GROUPS = FP8_CAST_THREADS / (FP8_CT_TILE / 8);  // 32 threads share a column chunk

template <typename Tout, typename Tin, bool WRITE_ROWS, bool DBIAS, int FROM>
__global__ void __launch_bounds__(FP8_CAST_THREADS)
fp8_cast_transpose_tiles_kernel(Tout* out, Tout* out_t, uint32_t* partials, float* dbias_partials, const Tin* in,
                                const floatX* pre, const float* scale, int rows, int cols) {
    static_assert(FROM == FP8_FROM_IN || std::is_same<Tin, floatX>::value, "an activation's values are floatX");
    constexpr int TILE = FP8_CT_TILE, GROUPS = FP8_CT_GROUPS, LOADS = TILE / GROUPS;
    static_assert(FP8_CAST_THREADS == 4 * TILE && LOADS == 2, "4 threads a tile column when storing, 2 rows when loading");
    // rows 8 bytes longer than the tile: each row starts 8-byte aligned for the 8-code stores
    __shared__ __align__(16) uint8_t tile[TILE][TILE + 8];
    __shared__ uint32_t shared[32];
    __shared__ float sums[DBIAS ? GROUPS : 1][DBIAS ? TILE : 1];
    const float s = *scale;
    const int chunk = threadIdx.x % (TILE / 8), group = threadIdx.x / (TILE / 8);
    const int tcol = threadIdx.x % TILE, part = threadIdx.x / TILE;
    const int tile_c = chunk * 8, c0 = blockIdx.x * TILE, c = c0 + tile_c;  // the thread's first column
    const int row_tiles = (rows + TILE - 1) / TILE;
    float colsum[8] = {};
    uint32_t m = 0;
    // the loop's bounds depend on the block only: every thread takes each __syncthreads the same times
    for (int rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
        const int r0 = rt * TILE;
        float f[LOADS][8];
        bool in_range[LOADS];
        for (int j = 0; j < LOADS; j++) {  // both rows' loads issued before either is cast
            const int r = r0 + group + j * GROUPS;
            in_range[j] = r < rows && c < cols;
            if (in_range[j]) fp8_values8<FROM>(in, pre, (size_t)r, c, cols, f[j]);
        }
        for (int j = 0; j < LOADS; j++) {
            const int i = group + j * GROUPS;
            unsigned long long codes = 0;  // zeros past the tensor's edge
            if (in_range[j]) {
                codes = fp8_codes8<Tout>(f[j], s, m);
                if (DBIAS)
                    for (int k = 0; k < 8; k++) colsum[k] += f[j][k];
            }
            if (WRITE_ROWS && in_range[j])
                *reinterpret_cast<unsigned long long*>(out + (size_t)(r0 + i) * cols + c) = codes;
            *reinterpret_cast<unsigned long long*>(&tile[i][tile_c]) = codes;
        }
        __syncthreads();
        const int oc = c0 + tcol, orow = r0 + part * 16;
        if (oc < cols && orow < rows) {
            uint32_t w[4];
            for (int q = 0; q < 4; q++) {
                const int i = part * 16 + 4 * q;
                w[q] = (uint32_t)tile[i][tcol] | (uint32_t)tile[i + 1][tcol] << 8 | (uint32_t)tile[i + 2][tcol] << 16 |
                       (uint32_t)tile[i + 3][tcol] << 24;
            }
            *reinterpret_cast<uint4*>(out_t + (size_t)oc * rows + orow) = make_uint4(w[0], w[1], w[2], w[3]);
        }
        __syncthreads();  // the tile is rewritten by the next iteration
    }
    m = fp8_block_max(m, shared);
    if (threadIdx.x == 0) partials[blockIdx.y * gridDim.x + blockIdx.x] = m;
    if (DBIAS) {
        for (int k = 0; k < 8; k++) sums[group][tile_c + k] = colsum[k];
        __syncthreads();
        if (threadIdx.x < TILE && c0 + (int)threadIdx.x < cols) {
            float t = 0.0f;
            for (int g = 0; g < GROUPS; g++) t += sums[g][threadIdx.x];
            dbias_partials[(size_t)blockIdx.y * cols + c0 + threadIdx.x] = t;
        }
    }
}

// the launch of the tiled kernel: one block a column strip and row split, at most
// FP8_CAST_MAX_BLOCKS (the amax slots), and with dbias at most as many row splits as the
// workspace holds sums of (after the amax slots); returns the row splits
template <typename Tout, typename Tin, bool DBIAS, int FROM>
inline int fp8_cast_transpose_tiles(const CudaContext& ctx, Tout* out, Tout* out_t, const Tin* in, const floatX* pre,
                                    const float* scale, int rows, int cols) {
    const int strips = (int)ceil_div(cols, FP8_CT_TILE), row_tiles = (int)ceil_div(rows, FP8_CT_TILE);
    int splits = std::min(row_tiles, std::max(1, FP8_CAST_MAX_BLOCKS / strips));
    uint32_t* partials = (uint32_t*)ctx.workspace;
    float* sums = (float*)((char*)ctx.workspace + FP8_CAST_MAX_BLOCKS * sizeof(uint32_t));
    if (DBIAS) {
        const size_t room = (ctx.workspace_bytes - FP8_CAST_MAX_BLOCKS * sizeof(uint32_t)) / ((size_t)cols * sizeof(float));
        CHECK(room >= 1, "cols=%d: no workspace for the bias gradient's sums", cols);
        splits = (int)std::min<size_t>((size_t)splits, room);
    }
    const dim3 grid((unsigned)strips, (unsigned)splits);
    if (out != nullptr)
        fp8_cast_transpose_tiles_kernel<Tout, Tin, true, DBIAS, FROM><<<grid, FP8_CAST_THREADS, 0, ctx.stream>>>(
            out, out_t, partials, sums, in, pre, scale, rows, cols);
    else
        fp8_cast_transpose_tiles_kernel<Tout, Tin, false, DBIAS, FROM><<<grid, FP8_CAST_THREADS, 0, ctx.stream>>>(
            out, out_t, partials, sums, in, pre, scale, rows, cols);
    CHECK_LAUNCH();
    return splits;
}

// Whether the tiled kernel takes this cast: its shapes and alignment, and few enough strips
template <typename Tout, typename Tin>
inline bool fp8_cast_transpose_tiled(const Tout* out, const Tout* out_t, const Tin* in, int rows, int cols,
                                     Fp8Src src = Fp8Src{}) {
    const bool reads_in = fp8_src_reads_in(src);
    return rows % 16 == 0 && cols % 8 == 0 && (!reads_in || is_aligned16(in)) && is_aligned16(out_t) &&
           (out == nullptr || is_aligned16(out)) && ceil_div(cols, FP8_CT_TILE) <= (size_t)FP8_CAST_MAX_BLOCKS &&
           (src.from == FP8_FROM_IN || is_aligned16(src.pre)) && (src.from != FP8_FROM_SWIGLU_GRAD || cols % 16 == 0);
}

// the tiled launch for a source known at run time
template <typename Tout, typename Tin, bool DBIAS>
inline int fp8_cast_transpose_tiles_from(const CudaContext& ctx, Tout* out, Tout* out_t, const Tin* in, Fp8Src src,
                                         const float* scale, int rows, int cols) {
    if constexpr (std::is_same<Tin, floatX>::value) {
        switch (src.from) {
            case FP8_FROM_GELU:
                return fp8_cast_transpose_tiles<Tout, Tin, DBIAS, FP8_FROM_GELU>(ctx, out, out_t, in, src.pre, scale,
                                                                                 rows, cols);
            case FP8_FROM_SWIGLU:
                return fp8_cast_transpose_tiles<Tout, Tin, DBIAS, FP8_FROM_SWIGLU>(ctx, out, out_t, in, src.pre, scale,
                                                                                   rows, cols);
            case FP8_FROM_GELU_GRAD:
                return fp8_cast_transpose_tiles<Tout, Tin, DBIAS, FP8_FROM_GELU_GRAD>(ctx, out, out_t, in, src.pre,
                                                                                      scale, rows, cols);
            case FP8_FROM_SWIGLU_GRAD:
                return fp8_cast_transpose_tiles<Tout, Tin, DBIAS, FP8_FROM_SWIGLU_GRAD>(ctx, out, out_t, in, src.pre,
                                                                                        scale, rows, cols);
            default:
                break;
        }
    }
    return fp8_cast_transpose_tiles<Tout, Tin, DBIAS, FP8_FROM_IN>(ctx, out, out_t, in, nullptr, scale, rows, cols);
}

// out_t (cols, rows fp8 numbers, row-major) = the transpose of saturate(in * *scale), rounded to
// nearest even; out (rows, cols), when not nullptr, the same codes untransposed; *amax = max(*amax,
// max |in|), *scale_inv = 1 / *scale when scale_inv is not nullptr: all as fp8_cast, in one read of
// in (rows, cols, row-major). Any shape and alignment: the tiled kernel where it can, the 32x32 one
// otherwise (tiled = false: always; dev/cuda/fp8.cu's benchmark compares them). Uses ctx.workspace.
// src (Fp8Src; floatX tensors): the values cast (and summed, and whose amax is taken) come from an
// activation, forward (in then not read: nullptr will do) or backward; the tiled kernel only (the
// trainer's shapes, and buffers 16-byte aligned as the activations' own passes need them anyway).
// dbias != nullptr (cols; floatX): also dbias += the column sums of what is cast (fp32 sums, one
// rounding), from the same read in the tiled kernel, by matmul_bias_backward after the 32x32 one.
template <typename Tout, typename Tin>
inline void fp8_cast_transpose(const CudaContext& ctx, Tout* out, Tout* out_t, float* amax, float* scale_inv,
                               const Tin* in, const float* scale, int rows, int cols, floatX* dbias = nullptr,
                               Fp8Src src = Fp8Src{}, bool tiled = true) {
    static_assert(std::is_same<Tout, __nv_fp8_e4m3>::value || std::is_same<Tout, __nv_fp8_e5m2>::value, "fp8 out");
    constexpr bool GRADIENT = std::is_same<Tin, floatX>::value;  // what dbias and src take
    const bool reads_in = fp8_src_reads_in(src);
    CHECK(rows > 0 && cols > 0, "rows=%d cols=%d", rows, cols);
    CHECK(out_t != nullptr && (in != nullptr || !reads_in) && amax != nullptr && scale != nullptr,
          "out_t=%p in=%p amax=%p scale=%p", (void*)out_t, (const void*)in, (void*)amax, (const void*)scale);
    CHECK(GRADIENT || (dbias == nullptr && src.from == FP8_FROM_IN), "a bias gradient or an activation of a %s tensor",
          sizeof(Tin) == 4 ? "float" : "bf16");
    CHECK(src.from == FP8_FROM_IN || src.pre != nullptr, "an activation without its input");
    CHECK(dbias == nullptr || src.from != FP8_FROM_SWIGLU_GRAD, "a bias gradient through SwiGLU");
    CHECK(ctx.workspace_bytes >= FP8_CAST_MAX_BLOCKS * sizeof(uint32_t), "workspace %zu bytes", ctx.workspace_bytes);
    uint32_t* partials = (uint32_t*)ctx.workspace;
    const bool tiles = tiled && fp8_cast_transpose_tiled(out, out_t, in, rows, cols, src);
    CHECK(tiles || src.from == FP8_FROM_IN, "an activation in the cast needs the tiled kernel: rows %d a multiple of "
          "16, cols %d of 8 (16 for SwiGLU's gradient), every buffer 16-byte aligned", rows, cols);
    int blocks;
    if (tiles) {
        const int splits =
            dbias != nullptr ? fp8_cast_transpose_tiles_from<Tout, Tin, true>(ctx, out, out_t, in, src, scale, rows, cols)
                             : fp8_cast_transpose_tiles_from<Tout, Tin, false>(ctx, out, out_t, in, src, scale, rows, cols);
        if (dbias != nullptr) {
            const float* sums = (const float*)((char*)ctx.workspace + FP8_CAST_MAX_BLOCKS * sizeof(uint32_t));
            column_sums_finish(ctx, dbias, nullptr, sums, splits, cols, (size_t)cols);
        }
        blocks = (int)ceil_div(cols, FP8_CT_TILE) * splits;
    } else {
        const size_t small_tiles = ceil_div((size_t)rows, (size_t)FP8_TRANSPOSE_TILE) *
                                   ceil_div((size_t)cols, (size_t)FP8_TRANSPOSE_TILE);
        blocks = (int)std::min<size_t>(small_tiles, FP8_CAST_MAX_BLOCKS);
        if (out != nullptr)
            fp8_cast_transpose_kernel<Tout, Tin, true><<<blocks, FP8_CAST_THREADS, 0, ctx.stream>>>(out, out_t, partials,
                                                                                                    in, scale, rows, cols);
        else
            fp8_cast_transpose_kernel<Tout, Tin, false><<<blocks, FP8_CAST_THREADS, 0, ctx.stream>>>(out, out_t, partials,
                                                                                                     in, scale, rows, cols);
        CHECK_LAUNCH();
    }
    fp8_amax_finish_kernel<<<1, 256, 0, ctx.stream>>>(amax, scale_inv, scale, partials, blocks, true);
    CHECK_LAUNCH();
    // the 32x32 kernel's bias gradient: a pass of its own (after the amax finish: both use the workspace)
    if constexpr (GRADIENT) {
        if (dbias != nullptr && !tiles) matmul_bias_backward(ctx, dbias, in, rows, cols);
    }
}

// ---------------------------------------------------------------------------------------
// the scaling state of a set of tensors of one format, on the device
//
// Delayed scaling (Transformer Engine's DelayedScaling, amax_compute_algo "max"): the casts of a
// step multiply by the scale the steps before chose, and max their tensor's amax into amax[t];
// after the step, fp8_scaling_update pushes amax[t] into the tensor's history (the last H steps'
// amaxes, this one included) and sets scale[t] = fp8_max / max(history) / 2^margin. A maximum
// that is 0 (nothing seen yet) or not finite keeps the scale it had; a scale that overflows fp32
// becomes FLT_MAX (both as Transformer Engine). A NaN stays in the history for H steps and holds
// the scale that long: the trainer should not update after a step it skips.
// Current scaling: the scale comes from the tensor's own amax, just before its cast:
// fp8_amax(amax + t), fp8_scaling_update(t, 1), fp8_cast(...), one extra read of the tensor.
// Data-parallel ranks must cast with the same scales: all-reduce(max) the amax buffer across them
// before the update. The update is elementwise arithmetic on those values, so equal amaxes give
// equal bits on every rank. amax, scale, scale_inv and history are one allocation (buffer,
// buffer_floats): a checkpoint saves and restores it whole, and a resumed run goes on bit for bit.
// After them in the allocation, gemm_scale_inv: scale_inv again, 16 bytes a tensor, the pointers
// the FP8 GEMMs take (llmc/gpu_scratch.h, FP8_GEMM_SCALE_STRIDE); every write of scale_inv writes it.

// (Fp8Recipe and FP8_AMAX_HISTORY_DEFAULT: llmc/gpu_scratch.h, which ./plan reads too)

struct Fp8Scaling {
    Fp8Recipe recipe;
    float fp8_max;       // 448 (E4M3) or 57344 (E5M2): every tensor of this state has that format
    int num_tensors;
    int history_len;     // H: the steps a delayed scale looks back over, this one included
    int margin;          // scale = fp8_max / amax / 2^margin
    float* amax;         // (num_tensors) this step's amax of each tensor so far, written by the casts
    float* scale;        // (num_tensors) what the casts multiply by; 1 at the start
    float* scale_inv;    // (num_tensors) 1 / scale
    float* history;      // (num_tensors, history_len): each tensor's last H amaxes, the newest first
    float* buffer;       // all of the above, one device allocation
    size_t buffer_floats;
    float* gemm_scale_inv;  // (num_tensors, FP8_GEMM_SCALE_STRIDE): [t * stride] = scale_inv[t]
};

// the scale pointer the FP8 GEMMs take for tensor t: 1 / its scale, 16-byte aligned
inline const float* fp8_gemm_scale_inv(const Fp8Scaling& s, int t) {
    return s.gemm_scale_inv + (size_t)t * FP8_GEMM_SCALE_STRIDE;
}

inline void fp8_scaling_init(Fp8Scaling* s, Fp8Recipe recipe, float fp8_max, int num_tensors,
                             int history_len = FP8_AMAX_HISTORY_DEFAULT, int margin = 0) {
    CHECK(num_tensors > 0 && history_len > 0 && margin >= 0 && margin < 64 && fp8_max > 0.0f,
          "num_tensors=%d history_len=%d margin=%d fp8_max=%g", num_tensors, history_len, margin, fp8_max);
    s->recipe = recipe;
    s->fp8_max = fp8_max;
    s->num_tensors = num_tensors;
    s->history_len = recipe == FP8_RECIPE_DELAYED ? history_len : 1;
    s->margin = margin;
    const size_t T = (size_t)num_tensors;
    s->buffer_floats = fp8_scaling_floats(T, (size_t)s->history_len);
    const size_t alloc = fp8_scaling_alloc_floats(T, (size_t)s->history_len);
    CHECK_CUDA(cudaMalloc(&s->buffer, alloc * sizeof(float)));
    s->amax = s->buffer;
    s->scale = s->buffer + T;
    s->scale_inv = s->buffer + 2 * T;
    s->history = s->buffer + 3 * T;
    const size_t gemm = fp8_scaling_gemm_offset(T, (size_t)s->history_len);
    s->gemm_scale_inv = s->buffer + gemm;
    std::vector<float> init(alloc, 0.0f);
    for (size_t t = 0; t < T; t++)  // scale and scale_inv (both copies) 1
        init[T + t] = init[2 * T + t] = init[gemm + t * FP8_GEMM_SCALE_STRIDE] = 1.0f;
    CHECK_CUDA(cudaMemcpy(s->buffer, init.data(), alloc * sizeof(float), cudaMemcpyHostToDevice));
}

inline void fp8_scaling_free(Fp8Scaling* s) {
    CHECK_CUDA(cudaFree(s->buffer));
    *s = Fp8Scaling{};
}

// one thread a tensor: history[t] shifts by one, the new amax first; the scale from its max
__global__ void fp8_scaling_update_kernel(float* amax, float* scale, float* scale_inv, float* gemm_scale_inv,
                                          float* history, int first, int count, int history_len, bool delayed,
                                          float fp8_max, float pow2_margin) {
    const int t = first + blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= first + count) return;
    const float a = amax[t];
    uint32_t m = fp8_abs_bits(a);
    if (delayed) {
        float* h = history + (size_t)t * history_len;
        for (int j = history_len - 1; j > 0; j--) {
            h[j] = h[j - 1];
            const uint32_t b = fp8_abs_bits(h[j]);
            m = b > m ? b : m;
        }
        h[0] = a;
    }
    const float mx = __uint_as_float(m);
    float s = scale[t];
    if (isfinite(mx) && mx > 0.0f) {
        s = fp8_max / mx / pow2_margin;
        if (isinf(s)) s = FLT_MAX;
    }
    scale[t] = s;
    scale_inv[t] = gemm_scale_inv[(size_t)t * FP8_GEMM_SCALE_STRIDE] = 1.0f / s;
    amax[t] = 0.0f;
}

// The scales of tensors first .. first+count-1 (count -1: to the last) from their amaxes, as the
// recipe says (above); their amaxes are then cleared for the next step. On ctx.stream.
inline void fp8_scaling_update(const CudaContext& ctx, const Fp8Scaling& s, int first = 0, int count = -1) {
    if (count < 0) count = s.num_tensors - first;
    CHECK(first >= 0 && count > 0 && first + count <= s.num_tensors, "first=%d count=%d of %d tensors", first, count,
          s.num_tensors);
    const int block = 128;
    fp8_scaling_update_kernel<<<(unsigned)ceil_div(count, block), block, 0, ctx.stream>>>(
        s.amax, s.scale, s.scale_inv, s.gemm_scale_inv, s.history, first, count, s.history_len,
        s.recipe == FP8_RECIPE_DELAYED, s.fp8_max, std::ldexp(1.0f, s.margin));
    CHECK_LAUNCH();
}

__global__ void fp8_scaling_copy_gemm_kernel(float* gemm_scale_inv, const float* scale_inv, int count) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < count) gemm_scale_inv[(size_t)t * FP8_GEMM_SCALE_STRIDE] = scale_inv[t];
}

// After s.buffer was written whole (a resumed checkpoint's state): the GEMMs' copy of scale_inv
// from it. On ctx.stream.
inline void fp8_scaling_copy_gemm(const CudaContext& ctx, const Fp8Scaling& s) {
    const int block = 128;
    fp8_scaling_copy_gemm_kernel<<<(unsigned)ceil_div(s.num_tensors, block), block, 0, ctx.stream>>>(
        s.gemm_scale_inv, s.scale_inv, s.num_tensors);
    CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------------------
// the FP8 GEMM

// What cuBLASLt's FP8 matmul cannot take (its documentation: FP8 tensor cores from compute
// capability 8.9; "TN" only; every dimension a multiple of 16, which with tight packing makes
// each leading dimension one too; 16-byte aligned operands), as a sentence, or nullptr.
inline const char* fp8_matmul_refusal(const CudaContext& ctx, int m, int n, int k, const void* d, const void* a,
                                      const void* b, const void* bias, const float* a_scale_inv,
                                      const float* b_scale_inv) {
    if (ctx.props.major * 10 + ctx.props.minor < 89) return "FP8 GEMMs need compute capability 8.9 or later";
    if (m <= 0 || n <= 0 || k <= 0 || m % 16 != 0 || n % 16 != 0 || k % 16 != 0)
        return "FP8 GEMMs need m, n and k positive multiples of 16";
    if (!is_aligned16(d) || !is_aligned16(a) || !is_aligned16(b) || !is_aligned16(bias))
        return "FP8 GEMMs need 16-byte aligned A, B, D and bias";
    if (!is_aligned16(a_scale_inv) || !is_aligned16(b_scale_inv))  // (llmc/gpu_scratch.h, FP8_GEMM_SCALE_STRIDE)
        return "FP8 GEMMs need 16-byte aligned scale pointers";
    return nullptr;
}

template <typename T> inline cudaDataType_t fp8_matmul_type();
template <> inline cudaDataType_t fp8_matmul_type<__nv_fp8_e4m3>() { return CUDA_R_8F_E4M3; }
template <> inline cudaDataType_t fp8_matmul_type<__nv_fp8_e5m2>() { return CUDA_R_8F_E5M2; }
template <> inline cudaDataType_t fp8_matmul_type<__nv_bfloat16>() { return CUDA_R_16BF; }
template <> inline cudaDataType_t fp8_matmul_type<float>() { return CUDA_R_32F; }

// Column-major D (m,n) = a_scale_inv * b_scale_inv * A^T B [+ D if accumulate] [+ bias (m)],
// A stored (k,m) and B stored (k,n), column-major and tightly packed (row-major: A is (m,k), B
// (n,k), both with k contiguous). A and B fp8, not both E5M2; D bf16 or fp32 (cuBLASLt's table
// of FP8 types), bias bf16 whatever D is. a_scale_inv, b_scale_inv: device floats (nullptr: 1),
// the scale_inv the casts wrote. fast_accum: cuBLASLt's FAST_ACCUM, sums kept in the tensor
// cores' own precision instead of being promoted to fp32 at intervals (faster, less exact).
// An amax of D (AMAX_D) is not offered: cuBLASLt gives it only for an fp8 D ("unsupported for
// non-fp8 outputs"); the cast of D into the next GEMM takes it. A shape FP8 cannot take stops
// the program with one line.
template <typename TD, typename TA, typename TB>
inline void fp8_matmul(const CudaContext& ctx, TD* d, const TA* a, const TB* b, const float* a_scale_inv,
                       const float* b_scale_inv, const __nv_bfloat16* bias, int m, int n, int k, bool accumulate,
                       bool fast_accum) {
    static_assert(!(std::is_same<TA, __nv_fp8_e5m2>::value && std::is_same<TB, __nv_fp8_e5m2>::value),
                  "cuBLASLt has no E5M2 x E5M2 GEMM");
    static_assert(std::is_same<TD, __nv_bfloat16>::value || std::is_same<TD, float>::value, "D is bf16 or fp32");
    if (const char* why = fp8_matmul_refusal(ctx, m, n, k, d, a, b, bias, a_scale_inv, b_scale_inv))
        fail("%s: m=%d n=%d k=%d on sm_%d%d (d=%p a=%p b=%p bias=%p scales %p %p)", why, m, n, k, ctx.props.major,
             ctx.props.minor, (void*)d, (const void*)a, (const void*)b, (const void*)bias, (const void*)a_scale_inv,
             (const void*)b_scale_inv);
    const cudaDataType_t type_a = fp8_matmul_type<TA>(), type_b = fp8_matmul_type<TB>(), type_d = fp8_matmul_type<TD>();
    cublasLtMatmulDesc_t desc;
    CHECK_CUBLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
    const int8_t fast = fast_accum ? 1 : 0;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
    if (a_scale_inv != nullptr)
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale_inv,
                                                    sizeof(a_scale_inv)));
    if (b_scale_inv != nullptr)
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale_inv,
                                                    sizeof(b_scale_inv)));
    const cublasLtEpilogue_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (bias != nullptr) {
        const cudaDataType_t bias_type = CUDA_R_16BF;
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                    sizeof(bias_type)));
    }
    cublasLtMatrixLayout_t la, lb, ld;
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&la, type_a, k, m, k));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&lb, type_b, k, n, k));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&ld, type_d, m, n, m));
    // the heuristic's answer, asked once per key (matmul.cuh's cache; bit 63 of key[1], never set
    // by matmul_cublaslt's keys as k < 2^31, keeps the two apart)
    const uint32_t align_a = matmul_alignment(a), align_b = matmul_alignment(b), align_d = matmul_alignment(d);
    const uint64_t key[3] = {(uint64_t)m << 32 | (uint32_t)n,
                             1ull << 63 | (uint64_t)k << 32 | (uint64_t)type_a << 24 | (uint64_t)type_b << 16 |
                                 (uint64_t)type_d << 8 | (uint64_t)epilogue << 1 | (uint64_t)fast,
                             (uint64_t)align_a << 36 | (uint64_t)align_b << 27 | (uint64_t)align_d << 18 |
                                 matmul_alignment(bias) << 9};
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    const MatmulAlgo* known = nullptr;
    for (const MatmulAlgo& e : *ctx.matmul_algos)
        if (e.key[0] == key[0] && e.key[1] == key[1] && e.key[2] == key[2]) known = &e;
    if (known == nullptr) {
        cublasLtMatmulPreference_t pref;
        CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
        uint64_t ws = ctx.workspace_bytes;
        CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
        CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                          sizeof(align_a)));
        CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                          sizeof(align_b)));
        CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
                                                          sizeof(align_d)));
        CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                                                          sizeof(align_d)));
        cublasLtMatmulHeuristicResult_t heuristic = {};
        int found = 0;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, desc, la, lb, ld, ld, pref, 1, &heuristic, &found);
        if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) CHECK_CUBLAS(st);
        CHECK_CUBLAS(cublasLtMatmulPreferenceDestroy(pref));
        ctx.matmul_algos->push_back({{key[0], key[1], key[2]}, heuristic.algo, st == CUBLAS_STATUS_SUCCESS && found > 0});
        known = &ctx.matmul_algos->back();
    }
    if (!known->found)
        fail("cuBLASLt offers no FP8 GEMM for m=%d n=%d k=%d (A type %d, B type %d, D type %d, %s)", m, n, k,
             (int)type_a, (int)type_b, (int)type_d, bias ? "bias" : "no bias");
    // (a refusal here, with the heuristic's answer in hand, is a run-time rule fp8_matmul_refusal
    // lacks: the H200's first was the scale pointers' alignment)
    const cublasStatus_t st = cublasLtMatmul(ctx.lt, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &known->algo,
                                             ctx.workspace, ctx.workspace_bytes, ctx.stream);
    if (st != CUBLAS_STATUS_SUCCESS)
        fail("cuBLASLt's FP8 GEMM m=%d n=%d k=%d (A type %d, B type %d, D type %d, %s, beta %g): %s", m, n, k,
             (int)type_a, (int)type_b, (int)type_d, bias ? "bias" : "no bias", beta, cublasLtGetStatusName(st));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(la));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(lb));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(ld));
    CHECK_CUBLAS(cublasLtMatmulDescDestroy(desc));
}
