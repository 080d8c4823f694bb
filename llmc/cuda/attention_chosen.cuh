// attention_chosen.cuh: the trainers' attention, as -ak chooses it: attention.cuh's kernels on
// CUDA cores (-ak 0, and every head size in the fp32 build), attention_mma.cuh's on tensor cores
// with mma.sync (-ak 1; -ak 2 with the one-kernel backward), or, under -ak 3 (bf16, head size 64
// or 128, an H100/H200 running a build with sm_90a code), attention_wgmma.cuh's on Hopper's wgmma
// where an H200 measured them faster than mma.sync (2026-11-28,
// dev/results/2026-11-28_gpu_h200_wgmma.md, T=1024): the forward at head size 64 (182 TFLOP/s
// against 164), the backward at 128 (142 against 119); mma.sync's elsewhere. -ak -1, the default:
// -ak 3 where it applies, else -ak 1 where that applies, else attention.cuh's.
// defines: attention_forward_chosen, attention_backward_chosen, attention_select
#pragma once
#include "common.cuh"           // defines: floatX, CudaContext, CHECK, CHECK_CUDA
#include "attention.cuh"        // defines: attention_forward_gqa, attention_backward_gqa
#include "attention_mma.cuh"    // defines: attention_forward_mma_gqa, attention_backward_mma_gqa, attention_mma_problem
#include "attention_wgmma.cuh"  // defines: attention_forward_wgmma, attention_backward_wgmma, attention_wgmma_problem

// The trainer's attention forward: NH query heads on NKV key/value heads of HS (GPT-2: NKV = NH).
inline void attention_forward_chosen(const CudaContext& ctx, floatX* out, float* lse, const floatX* qkv, int B, int T,
                                     int NH, int NKV, int HS) {
#ifdef ENABLE_BF16
    // one warpgroup a block: the fastest of the four variants then at T=1024 on the H200 (182
    // TFLOP/s; with the since removed PIPE 180, two warpgroups 178 and 177). At head size 128
    // mma.sync's forward ran faster (220 against 203-205)
    if (ctx.attention_wgmma && HS == 64) return attention_forward_wgmma<1>(ctx, out, lse, qkv, B, T, NH, NKV, HS);
    if (ctx.attention_mma) return attention_forward_mma_gqa(ctx, out, lse, qkv, B, T, NH, NKV, HS);
#endif
    attention_forward_gqa(ctx, out, lse, qkv, B, T, NH, NKV, HS);
}

// and its backward, from the forward's out and lse
inline void attention_backward_chosen(const CudaContext& ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                                      const floatX* out, const float* lse, int B, int T, int NH, int NKV, int HS) {
#ifdef ENABLE_BF16
    // head size 128: one warpgroup a block, the fastest at T=1024 on the H200 (142 TFLOP/s; with
    // the since removed PIPE 140, two warpgroups 138 and 139; mma.sync 119). At 64 mma.sync's
    // backward ran faster (121 against 116)
    if (ctx.attention_wgmma && HS == 128)
        return attention_backward_wgmma<1>(ctx, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HS);
    const size_t dq_bytes = (size_t)B * T * NH * HS * sizeof(float);
    CHECK(ctx.attention_dq == nullptr || dq_bytes <= ctx.attention_dq_bytes,
          "-ak 2: dq of B=%d T=%d NH=%d HS=%d does not fit its %zu bytes", B, T, NH, HS, ctx.attention_dq_bytes);
    if (ctx.attention_mma)
        return attention_backward_mma_gqa(ctx, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HS, ctx.attention_dq);
#endif
    attention_backward_gqa(ctx, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HS);
}

// -ak `kernel` for attention of head size `head_size`: 0 CUDA cores, 1 tensor cores (mma.sync), 2
// tensor cores with the one-kernel backward, whose fp32 dq of dq_bytes (attention_dq_bytes: B*T
// times the attention width) it allocates, 3 Hopper's wgmma where it measured faster (mma.sync
// elsewhere); -1 3 where 3 applies, else 1 where 1 does, else 0 (on the H200, 3, with wgmma both
// ways then, trained d12 0.9%, d48 1.7% and the 1.2B Llama 1.7% faster than 1, 2026-11-28).
// Returns why -ak 1, 2 or 3 cannot run here (the caller stops), or nullptr.
inline const char* attention_select(CudaContext* ctx, int kernel, int head_size, size_t dq_bytes) {
    const char* problem = attention_mma_problem(*ctx, head_size);
    // why -ak 3's kernels cannot run (asked by 3 and by -1 alone: the probe launches a kernel)
    const char* wgmma_problem =
        problem == nullptr && (kernel == 3 || kernel == -1) ? attention_wgmma_problem(*ctx, head_size) : problem;
    if (kernel == 3) problem = wgmma_problem;
    if (kernel >= 1 && problem != nullptr) return problem;
    ctx->attention_mma = kernel >= 1 || (kernel == -1 && problem == nullptr);
    ctx->attention_wgmma = (kernel == 3 || kernel == -1) && wgmma_problem == nullptr;
    if (kernel == 2) {
        CHECK(ctx->attention_dq == nullptr, "attention_select: dq already allocated");
        CHECK_CUDA(cudaMalloc(&ctx->attention_dq, dq_bytes));
        ctx->attention_dq_bytes = dq_bytes;
    }
    return nullptr;
}
