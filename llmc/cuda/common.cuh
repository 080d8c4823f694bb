// common.cuh: what every CUDA kernel file of gptrain shares.
// defines: floatX, PRECISION_NAME, CHECK_CUDA, CHECK_CUBLAS, CHECK_LAUNCH, CudaContext,
//          cuda_context_init, cuda_context_free, to_float, from_float, Packed128, x128,
//          load128, load128cs, store128, store128cs, hash32, random_u32, stochastic_round,
//          warp_reduce_sum, warp_reduce_max, block_reduce_sum, ceil_div, is_aligned16,
//          column_sums_finish, accumulate, ActKind, Act, LOG2E, act_sigmoid
//
// One precision path: every activation, parameter and gradient buffer is floatX, which is
// float in the fp32 build and __nv_bfloat16 when compiled with -DENABLE_BF16. Arithmetic
// is fp32 everywhere (loads convert up, stores round down). Optimizer state and the master
// copy of the weights stay fp32.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cublasLt.h>

#include "../utils.h"  // defines: CHECK, fail
#include "ptx.cuh"     // defines: ptx_ex2_approx_ftz

#ifdef ENABLE_BF16
typedef __nv_bfloat16 floatX;
#define PRECISION_NAME "bf16"
#else
typedef float floatX;
#define PRECISION_NAME "fp32"
#endif

// ---------------------------------------------------------------------------------------
// errors: file:line, the expression, the library's message, exit non-zero

#define CHECK_CUDA(x)                                                                     \
    do {                                                                                  \
        cudaError_t err_ = (x);                                                           \
        if (err_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d: CUDA error: %s: %s (%s)\n", __FILE__, __LINE__, #x,   \
                    cudaGetErrorName(err_), cudaGetErrorString(err_));                    \
            exit(EXIT_FAILURE);                                                           \
        }                                                                                 \
    } while (0)

#define CHECK_CUBLAS(x)                                                                   \
    do {                                                                                  \
        cublasStatus_t st_ = (x);                                                         \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                               \
            fprintf(stderr, "%s:%d: cuBLAS error: %s: %s (%s)\n", __FILE__, __LINE__, #x, \
                    cublasLtGetStatusName(st_), cublasLtGetStatusString(st_));            \
            exit(EXIT_FAILURE);                                                           \
        }                                                                                 \
    } while (0)

// After every launch: catches bad launch configurations at once (the kernel's own faults
// show up at the next synchronizing call, with CUDA_LAUNCH_BLOCKING=1 at this line).
#define CHECK_LAUNCH() CHECK_CUDA(cudaGetLastError())

// ---------------------------------------------------------------------------------------
// the context every launcher takes: no globals

struct PhaseTimer;    // phases.cuh: -pb 1's per-phase step timing
struct MatmulTiming;  // matmul_algos.cuh: what -ma timed did

// One answer of cuBLASLt's heuristic, kept for the next product of the same shape, layout,
// epilogue and alignments (llmc/cuda/matmul.cuh): asking again costs host time every call.
struct MatmulAlgo {
    uint64_t key[3];
    cublasLtMatmulAlgo_t algo;
    bool found;
};

struct CudaContext {
    cudaStream_t stream;       // every kernel and cuBLASLt call of the trainer runs here
    cublasLtHandle_t lt;       // cuBLASLt handle
    void* workspace;           // cuBLASLt workspace; also the stream-ordered scratch of the
                               // multi-stage kernels (layernorm, bias, norm, attention)
    size_t workspace_bytes;
    cudaDeviceProp props;      // of the device the context was made on
    bool tf32;                 // fp32 build: let cuBLASLt use TF32 tensor cores (-f 1)
    int gelu_fusion;           // GELU in the cuBLASLt epilogues: 0 never, 1 the forward's,
                               // 2 also the backward's (-ge)
    int bias_grad_epilogue;    // bias gradients in cuBLASLt epilogues (-bg): 0 never, 1 the weight
                               // gradient's (BGRADB), 2 the GELU backward's for the layer before
                               // the GELU (DGELU_BGRAD, with gelu_fusion 2)
    void* bias_grad;           // where those epilogues write (CUDA_BIAS_GRAD_BYTES), apart from
                               // the workspace, which the same matmul uses
    bool attention_mma;        // bf16: attention on tensor cores (attention_mma.cuh), -ak 1, 2 and 3
    bool attention_wgmma;      // bf16 on a Hopper: on wgmma (attention_wgmma.cuh), -ak 3
    float* attention_dq;       // -ak 2: the one-kernel backward's fp32 dq (attention_dq_bytes),
                               // nullptr otherwise (attention_select allocates it)
    size_t attention_dq_bytes;
    PhaseTimer* phases;        // -pb 1: phase_mark records events here (nullptr: off)
    std::vector<MatmulAlgo>* matmul_algos;  // the heuristic's answers so far (a few dozen shapes)
    MatmulTiming* matmul_timing;  // -ma timed: each key's algorithm timed from the heuristic's
                                  // candidates, and its counts (nullptr: -ma heuristic, the first)
};

// 32 MiB: what cuBLASLt asks for on Hopper, and ample scratch for the reductions.
constexpr size_t CUDA_WORKSPACE_BYTES = 32u << 20;
// the bias-gradient epilogues' output: 64K fp32 values, a bias of up to 65,536 (4C at C=16,384)
constexpr size_t CUDA_BIAS_GRAD_BYTES = 256u << 10;
// What a context allocates (the workspace and the bias-gradient epilogue's output), as the memory
// plans count it (train_gpt.cu, cuda_model_print_memory; llmc/plan.h's PLAN_WORKSPACE_BYTES)
inline size_t cuda_context_bytes(const CudaContext& ctx) { return ctx.workspace_bytes + CUDA_BIAS_GRAD_BYTES; }
// the dynamic shared memory a launch may use without cudaFuncSetAttribute raising it
constexpr size_t CUDA_SMEM_DEFAULT_LIMIT = 48u << 10;
// the shared memory an SM sets aside for each resident block on sm_80 and newer
// (cudaDeviceProp::reservedSharedMemPerBlock), beside what the block itself asks for
constexpr size_t CUDA_SMEM_RESERVED_PER_BLOCK = 1u << 10;

inline void cuda_context_init(CudaContext* ctx, int device) {
    CHECK_CUDA(cudaSetDevice(device));
    CHECK_CUDA(cudaGetDeviceProperties(&ctx->props, device));
    // a blocking stream: it stays ordered with plain cudaMemcpy / cudaMemset calls (which
    // run on the legacy default stream), so a stray synchronous copy cannot race a kernel
    CHECK_CUDA(cudaStreamCreate(&ctx->stream));
    CHECK_CUBLAS(cublasLtCreate(&ctx->lt));
    ctx->workspace_bytes = CUDA_WORKSPACE_BYTES;
    CHECK_CUDA(cudaMalloc(&ctx->workspace, ctx->workspace_bytes));
    ctx->tf32 = false;
    ctx->gelu_fusion = 1;
    ctx->bias_grad_epilogue = 0;
    CHECK_CUDA(cudaMalloc(&ctx->bias_grad, CUDA_BIAS_GRAD_BYTES));
    ctx->attention_mma = false;
    ctx->attention_wgmma = false;
    ctx->attention_dq = nullptr;
    ctx->attention_dq_bytes = 0;
    ctx->phases = nullptr;
    ctx->matmul_algos = new std::vector<MatmulAlgo>();
    ctx->matmul_timing = nullptr;
}

inline void cuda_context_free(CudaContext* ctx) {
    CHECK_CUDA(cudaStreamSynchronize(ctx->stream));
    CHECK_CUDA(cudaFree(ctx->workspace));
    CHECK_CUDA(cudaFree(ctx->bias_grad));
    if (ctx->attention_dq != nullptr) CHECK_CUDA(cudaFree(ctx->attention_dq));
    CHECK_CUBLAS(cublasLtDestroy(ctx->lt));
    CHECK_CUDA(cudaStreamDestroy(ctx->stream));
    delete ctx->matmul_algos;
    ctx->matmul_algos = nullptr;
    ctx->workspace = nullptr;
    ctx->bias_grad = nullptr;
    ctx->attention_dq = nullptr;
}

// ---------------------------------------------------------------------------------------
// small host helpers

inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
inline bool is_aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// ---------------------------------------------------------------------------------------
// conversions: to fp32 for arithmetic, back to floatX (round to nearest) for storage

__host__ __device__ inline float to_float(float x) { return x; }
__host__ __device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __host__ __device__ inline T from_float(float x);
template <> __host__ __device__ inline float from_float<float>(float x) { return x; }
template <> __host__ __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

// ---------------------------------------------------------------------------------------
// the logistic sigmoid 1 / (1 + e^-z) of the activations: SwiGLU's gate, and GELU's tanh(u) as
// 2 sigmoid(2u) - 1. The fp32 build computes it as the CPU reference does (cpu/swiglu.h,
// cpu/gelu.h: expf and a division, tanhf), about 27 instructions without a fast-math build
// (dev/sass_count.py), and is compared with the CPU trainer at 1e-6. The bf16 build (and fp8),
// whose values are rounded to bf16's 2^-9 anyway, takes the special function unit's exp2
// (ex2.approx.ftz) and reciprocal (__fdividef): 5 instructions, a few ulp from exact. For z
// past -87, e^-z is +inf here and the sigmoid 0 (the exact one is under 2^-126).
constexpr float LOG2E = 1.4426950408889634f;  // log2(e): e^x = 2^(x LOG2E), for the unit's exp2
__device__ inline float act_sigmoid(float z) {
#ifdef ENABLE_BF16
    return __fdividef(1.0f, 1.0f + ptx_ex2_approx_ftz(z * -LOG2E));
#else
    return 1.0f / (1.0f + expf(-z));
#endif
}

// ---------------------------------------------------------------------------------------
// 16-byte vectors: one load or store instruction moves 4 floats or 8 bf16

template <typename T>
struct alignas(16) Packed128 {
    static constexpr int size = 16 / sizeof(T);
    T v[size];
    __device__ T& operator[](int i) { return v[i]; }
    __device__ const T& operator[](int i) const { return v[i]; }
    __device__ static Packed128 zeros() {
        Packed128 p;
        for (int i = 0; i < size; i++) p.v[i] = from_float<T>(0.0f);
        return p;
    }
};
typedef Packed128<floatX> x128;
typedef Packed128<float> f128;

// p must be 16-byte aligned (the launchers check the base pointers and the strides)
template <typename T> __device__ inline Packed128<T> load128(const T* p) {
    return *reinterpret_cast<const Packed128<T>*>(p);
}
// streaming ("cache evict first") load, for data read exactly once
template <typename T> __device__ inline Packed128<T> load128cs(const T* p) {
    int4 raw = __ldcs(reinterpret_cast<const int4*>(p));
    return *reinterpret_cast<Packed128<T>*>(&raw);
}
template <typename T> __device__ inline void store128(T* p, const Packed128<T>& x) {
    *reinterpret_cast<Packed128<T>*>(p) = x;
}
template <typename T> __device__ inline void store128cs(T* p, const Packed128<T>& x) {
    __stcs(reinterpret_cast<int4*>(p), *reinterpret_cast<const int4*>(&x));
}

// ---------------------------------------------------------------------------------------
// stochastic rounding: a bf16 store that is right on average, so tiny AdamW updates are
// not all rounded away. Deterministic: the random bits are a hash of (seed, index).

// integer hash with good avalanche (Chris Wellons' "lowbias32" constants)
__host__ __device__ inline uint32_t hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

// 32 random bits for element idx of a call seeded with seed
__host__ __device__ inline uint32_t random_u32(uint32_t seed, size_t idx) {
    uint32_t hi = (uint32_t)((uint64_t)idx >> 32);
    return hash32((uint32_t)idx ^ hash32(seed ^ hash32(hi + 0x9e3779b9U)));
}

// float -> T with stochastic rounding for bf16 (plain for float): adding 16 random bits
// below the kept mantissa and truncating rounds up with probability equal to the fraction.
__device__ inline void stochastic_round(float in, float* out, uint32_t /*rnd*/) { *out = in; }
__device__ inline void stochastic_round(float in, __nv_bfloat16* out, uint32_t rnd) {
    if (!isfinite(in)) {  // inf/nan: the bit trick could carry into the sign
        *out = __float2bfloat16_rn(in);
        return;
    }
    uint32_t bits = __float_as_uint(in);
    uint32_t rounded = (bits + (rnd & 0xFFFFu)) & 0xFFFF0000u;
    // a carry out of the largest finite value gives inf, as round-up would
    __nv_bfloat16_raw raw;
    raw.x = (unsigned short)(rounded >> 16);
    *out = __nv_bfloat16(raw);
}

// ---------------------------------------------------------------------------------------
// reductions; fixed order, so results do not depend on timing

__device__ inline float warp_reduce_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ inline float warp_reduce_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets
// the result. shared must hold 32 floats; the call starts with a barrier, so it can be
// called back to back with the same buffer.
__device__ inline float block_reduce_sum(float v, float* shared) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int num_warps = blockDim.x / 32;
    v = warp_reduce_sum(v);
    __syncthreads();  // shared may still be read by a previous call
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < num_warps ? shared[lane] : 0.0f;
    return warp_reduce_sum(v);
}

// ---------------------------------------------------------------------------------------
// The second stage of the deterministic column sums (the bias and LayerNorm weight
// gradients: a first kernel writes per-chunk partial sums of the rows into scratch).
// out0[c] += the sum over chunks k of scratch[k*stride + c]; with out1, also out1[c] += the
// sum of scratch[k*stride + C + c]. A block takes 32 channels; each of its FINISH_SPLIT rows
// of threads adds every FINISH_SPLIT-th chunk in order, then one row adds those partial sums
// in order. The order is fixed, so the sums do not depend on timing; and no thread walks all
// the chunks alone (512 of them at N >= 8192), which left the GPU waiting on memory latency.
constexpr int FINISH_SPLIT = 16;

__global__ void column_sums_finish_kernel(floatX* out0, floatX* out1, const float* scratch, int chunks, int C,
                                          size_t stride) {
    __shared__ float part[2][FINISH_SPLIT][32];
    const int c = blockIdx.x * 32 + threadIdx.x, j = threadIdx.y;
    float s0 = 0.0f, s1 = 0.0f;
    if (c < C) {
        for (int k = j; k < chunks; k += FINISH_SPLIT) {
            s0 += scratch[(size_t)k * stride + c];
            if (out1 != nullptr) s1 += scratch[(size_t)k * stride + C + c];
        }
    }
    part[0][j][threadIdx.x] = s0;
    part[1][j][threadIdx.x] = s1;
    __syncthreads();
    if (j != 0 || c >= C) return;
    float t0 = 0.0f, t1 = 0.0f;
    for (int i = 0; i < FINISH_SPLIT; i++) {
        t0 += part[0][i][threadIdx.x];
        t1 += part[1][i][threadIdx.x];
    }
    out0[c] = from_float<floatX>(to_float(out0[c]) + t0);
    if (out1 != nullptr) out1[c] = from_float<floatX>(to_float(out1[c]) + t1);
}

inline void column_sums_finish(const CudaContext& ctx, floatX* out0, floatX* out1, const float* scratch, int chunks,
                               int C, size_t stride) {
    dim3 block(32, FINISH_SPLIT);
    column_sums_finish_kernel<<<(unsigned)ceil_div(C, 32), block, 0, ctx.stream>>>(out0, out1, scratch, chunks, C,
                                                                                   stride);
    CHECK_LAUNCH();
}

// acc[i] += src[i] in fp32, on the given stream (ZeRO 2's owned gradient slice, a gradient
// the bias-gradient epilogue wrote)
__global__ void accumulate_kernel(floatX* acc, const floatX* src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) acc[i] = from_float<floatX>(to_float(acc[i]) + to_float(src[i]));
}

inline void accumulate(cudaStream_t stream, floatX* acc, const floatX* src, size_t n) {
    if (n == 0) return;
    const int block = 256;
    accumulate_kernel<<<(unsigned)ceil_div(n, block), block, 0, stream>>>(acc, src, n);
    CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------------------
// An MLP's activation as a linear layer sees it, made from its input pre (the pre-activation):
// GPT-2's GELU (pre (N,4C), the activation the same shape) or Llama's SwiGLU (pre (N,2F) =
// [gate | up], the activation (N,F)). A layer whose input is the activation (the projection
// after it) or whose output gradient has still to go back through it (the linear before it)
// can be handed this instead of the tensor: train_gpt_fp8 then makes the values in the cast
// that reads them (fp8.cuh's fp8_cast and fp8_cast_transpose; linear.cuh), with no pass and no
// bf16 tensor of their own.
enum ActKind { ACT_NONE, ACT_GELU, ACT_SWIGLU };
struct Act {
    ActKind kind = ACT_NONE;
    const floatX* pre = nullptr;
};
