// classifier.cuh: softmax + cross-entropy + its gradient, fused, on the GPU. A block takes
// a row of logits at a time: pass 1 finds the row's logsumexp (online max and sum), pass 2
// overwrites the logits with dlogits. No probabilities are ever stored. One block a row by
// default: bounding the rows in flight to the L2 cache's worth, so that pass 2 would find its
// row there, measured slower on an H200 (2026-11-26, 8192 rows of 50304: one block a row
// 0.75 ms; twice, once, half and a quarter the L2's worth of rows 0.81, 0.88, 1.08 and
// 1.55 ms): the occupancy it costs outweighs the reads it saves.
// defines: classifier_forward_backward, classifier_smem_fits, classifier_tp_stats, classifier_tp_finish
// (-tp: vocab-parallel)
// CPU reference: llmc/cpu/crossentropy.h (crossentropy_forward + crossentropy_backward)
#pragma once
#include <algorithm>
#include <cmath>
#include "common.cuh"
#include "ptx.cuh"  // defines: ptx_ex2_approx_ftz

constexpr int CLASSIFIER_BLOCK = 512;

// The threads a block takes for rows of `width` values: one 16-byte group a thread, in whole
// warps, at most CLASSIFIER_BLOCK (every real vocabulary: 50,304 columns are 6,288 groups of 8).
// A small vocabulary leaves the rest out rather than idle in every shuffle and barrier: on the
// emulated GPU, where each thread costs, 512 threads a row of 384 were half a small Llama's step
// (2026-11-28). The rows' sums then run in another order: a shape's bits are still its own.
inline int classifier_block(int width) {
    const int groups = (width + x128::size - 1) / x128::size;
    return std::min(CLASSIFIER_BLOCK, (groups + 31) / 32 * 32);
}

// (m, s) pairs stand for s * exp(m): the sum of exp(x - m) over the values seen, m their
// max. Merging rescales both to the larger max; an empty pair is (-inf, 0).
__device__ inline void softmax_merge(float& m, float& s, float m2, float s2) {
    float M = fmaxf(m, m2);
    if (M == -INFINITY) return;  // both empty
    s = (m == -INFINITY ? 0.0f : s * expf(m - M)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - M));
    m = M;
}

// exp(x - m) over a row's values, m2 = m log2(e). In bf16 one fused multiply-add and PTX's
// ex2.approx.ftz (the logits themselves carry bf16's 2^-9; this adds about 2^-21 relative, and
// values 87 below the row's max are 0); expf elsewhere, which without a fast-math build is
// about 8 instructions (fp32 is the build compared with the CPU reference at 1e-6).
__device__ __forceinline__ float classifier_exp(float x, float m, float m2) {
#ifdef ENABLE_BF16
    (void)m;
    return ptx_ex2_approx_ftz(fmaf(x, LOG2E, -m2));
#else
    (void)m2;
    return expf(x - m);
#endif
}

// One thread's max m and sum s of exp(x - m), taking in the values of group v (columns c..c+7
// of a row of V real ones, those from V on left out): the group's max first, then its sum at
// the new max and the old sum rescaled once (no test per value but the row's end).
__device__ inline void thread_softmax_stats(const x128& v, int c, int V, float& m, float& s) {
    float f[x128::size];
    float gm = -INFINITY;
    for (int k = 0; k < x128::size; k++) {
        f[k] = c + k < V ? to_float(v[k]) : -INFINITY;  // exp(-inf) = 0 below
        gm = fmaxf(gm, f[k]);
    }
    const float M = fmaxf(m, gm), M2 = M * LOG2E;  // finite: column c is below V
    float sum = 0.0f;
    for (int k = 0; k < x128::size; k++) sum += classifier_exp(f[k], M, M2);
    s = s * classifier_exp(m, M, M2) + sum;  // the first group: m = -inf, exp = 0
    m = M;
}

// The block's (m, s) from every thread's, left in *m_out and *s_out for every thread.
// shared: CLASSIFIER_BLOCK / 32 pairs and one more for the result; safe to reuse for the next
// row once every thread has read the result (warp 0 reads the pairs before its second barrier).
__device__ inline void block_softmax_merge(float m, float s, float* shared_m, float* shared_s, float* m_out,
                                           float* s_out) {
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        softmax_merge(m, s, m2, s2);
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = blockDim.x / 32;
    if (lane == 0) {
        shared_m[warp] = m;
        shared_s[warp] = s;
    }
    __syncthreads();  // also: every thread is done reading the row before a second pass writes
    if (warp == 0) {
        m = lane < num_warps ? shared_m[lane] : -INFINITY;
        s = lane < num_warps ? shared_s[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            softmax_merge(m, s, m2, s2);
        }
        if (lane == 0) {
            shared_m[num_warps] = m;
            shared_s[num_warps] = s;
        }
    }
    __syncthreads();
    *m_out = shared_m[num_warps];
    *s_out = shared_s[num_warps];
}

// The block's online max m and sum s of exp(x - m) over x[0..V) (16-byte aligned; the loads may
// read up to 7 values past V within the row), left in *m_out and *s_out for every thread.
__device__ inline void block_softmax_stats(const floatX* x, int V, float* shared_m, float* shared_s, float* m_out,
                                           float* s_out) {
    float m = -INFINITY, s = 0.0f;
    for (int c = threadIdx.x * x128::size; c < V; c += blockDim.x * x128::size)
        thread_softmax_stats(load128(x + c), c, V, m, s);
    block_softmax_merge(m, s, shared_m, shared_s, m_out, s_out);
}

// Column j (j0 + j of the vocabulary) of dlogits from its logit f: (softmax - onehot(target))
// * dloss for the V real columns, 0 for the padding. lse2 = lse log2(e).
__device__ inline floatX dlogit(float f, int j, int V, int j0, int target, float lse, float lse2, float dloss) {
    const float p = classifier_exp(f, lse, lse2);
    const float indicator = j0 + j == target ? 1.0f : 0.0f;
    return from_float<floatX>(j < V ? (p - indicator) * dloss : 0.0f);
}

// Pass 2 over one row of Vp columns, in place: logit j (column j0 + j of the vocabulary) :=
// (softmax - onehot(target)) * dloss for the V real columns, 0 for the padding.
__device__ inline void dlogits_row(floatX* x, int V, int Vp, int j0, int target, float lse, float dloss) {
    const float lse2 = lse * LOG2E;
    for (int c = threadIdx.x * x128::size; c < Vp; c += blockDim.x * x128::size) {
        x128 v = c < V ? load128(x + c) : x128::zeros();
        x128 g;
        for (int k = 0; k < x128::size; k++) g[k] = dlogit(to_float(v[k]), c + k, V, j0, target, lse, lse2, dloss);
        store128cs(x + c, g);
    }
}

// logits (N,Vp), first V columns real. losses[row] = logsumexp - logits[target];
// with write_dlogits, logits[row] := (softmax - onehot(target)) * dloss, padding := 0.
// A target outside [0,V) gives a NaN loss (the trainer checks targets on the host).
__global__ void __launch_bounds__(CLASSIFIER_BLOCK)
classifier_kernel(floatX* logits, float* losses, const int* targets, float dloss, int N, int V, int Vp,
                  bool write_dlogits) {
    __shared__ float shared_m[CLASSIFIER_BLOCK / 32 + 1], shared_s[CLASSIFIER_BLOCK / 32 + 1];
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        floatX* x = logits + (size_t)row * Vp;
        const int target = targets[row];
        const bool target_ok = target >= 0 && target < V;
        // read before any thread starts overwriting the row
        float target_logit = (threadIdx.x == 0 && target_ok) ? to_float(x[target]) : 0.0f;
        // pass 1: online max and sum over the V real columns
        float m, s;
        block_softmax_stats(x, V, shared_m, shared_s, &m, &s);
        const float lse = m + logf(s);
        if (threadIdx.x == 0) losses[row] = target_ok ? lse - target_logit : NAN;
        // pass 2: dlogits, in place
        if (write_dlogits) dlogits_row(x, V, Vp, 0, target, lse, dloss);
    }
}

// classifier_kernel with each row kept in shared memory (Vp values of dynamic shared memory): pass 1
// stores the groups it loads there and pass 2 takes them back, so the logits are read once, not
// twice (a 100 KB row of GPT-2's: classifier_kernel's second read finds it in L2 only in part).
// A thread takes back only the groups it stored (the same columns in both passes), so the row's
// copy needs no barrier of its own, and the next row may overwrite it at once. The same sums in
// the same order: the same bits. Two blocks an SM at GPT-2's 50,304 in bf16 on an H100/H200.
__global__ void __launch_bounds__(CLASSIFIER_BLOCK)
classifier_smem_kernel(floatX* logits, float* losses, const int* targets, float dloss, int N, int V, int Vp,
                       bool write_dlogits) {
    // the row's copy, then block_softmax_merge's pairs (all of it dynamic: classifier_smem_bytes)
    extern __shared__ float4 classifier_smem4[];  // float4: 16-byte aligned, as the 16-byte accesses need
    floatX* kept = reinterpret_cast<floatX*>(classifier_smem4);
    float* shared_m = reinterpret_cast<float*>(kept + Vp);  // Vp values of floatX: a multiple of 16 bytes
    float* shared_s = shared_m + CLASSIFIER_BLOCK / 32 + 1;
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        floatX* x = logits + (size_t)row * Vp;
        const int target = targets[row];
        const bool target_ok = target >= 0 && target < V;
        float target_logit = (threadIdx.x == 0 && target_ok) ? to_float(x[target]) : 0.0f;
        float m = -INFINITY, s = 0.0f;
        for (int c = threadIdx.x * x128::size; c < V; c += blockDim.x * x128::size) {
            x128 v = load128(x + c);
            if (write_dlogits) store128(kept + c, v);
            thread_softmax_stats(v, c, V, m, s);
        }
        block_softmax_merge(m, s, shared_m, shared_s, &m, &s);  // every read of the row is done after it
        const float lse = m + logf(s);
        if (threadIdx.x == 0) losses[row] = target_ok ? lse - target_logit : NAN;
        if (!write_dlogits) continue;
        const float lse2 = lse * LOG2E;
        for (int c = threadIdx.x * x128::size; c < Vp; c += blockDim.x * x128::size) {
            x128 v = c < V ? load128(kept + c) : x128::zeros();
            x128 g;
            for (int k = 0; k < x128::size; k++) g[k] = dlogit(to_float(v[k]), c + k, V, 0, target, lse, lse2, dloss);
            store128cs(x + c, g);
        }
    }
}

// classifier_smem_kernel's dynamic shared memory for rows of Vp values, and whether a block has it
inline size_t classifier_smem_bytes(int Vp) {
    return (size_t)Vp * sizeof(floatX) + 2 * sizeof(float) * (CLASSIFIER_BLOCK / 32 + 1);
}
inline bool classifier_smem_fits(const CudaContext& ctx, int Vp) {
    return classifier_smem_bytes(Vp) <= ctx.props.sharedMemPerBlockOptin;
}

// -tp, vocab-parallel: this rank holds columns [v0, v0 + Vl) of the padded vocabulary, the first
// `real` of them real (V - v0, within 0..Vl). stats (N,3) := each row's (max, sum of exp(x - max),
// the target's logit if this rank holds it, else 0), for the group to all-gather.
__global__ void __launch_bounds__(CLASSIFIER_BLOCK)
classifier_tp_stats_kernel(const floatX* logits, const int* targets, float* stats, int N, int real, int Vl, int v0) {
    __shared__ float shared_m[CLASSIFIER_BLOCK / 32 + 1], shared_s[CLASSIFIER_BLOCK / 32 + 1];
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        const floatX* x = logits + (size_t)row * Vl;
        float m, s;
        block_softmax_stats(x, real, shared_m, shared_s, &m, &s);
        if (threadIdx.x == 0) {
            const int t = targets[row] - v0;
            stats[(size_t)row * 3 + 0] = m;
            stats[(size_t)row * 3 + 1] = s;
            stats[(size_t)row * 3 + 2] = t >= 0 && t < real ? to_float(x[t]) : 0.0f;
        }
    }
}

// The rows' whole-vocabulary logsumexp from every rank's stats (all: tp x (N,3), in rank order,
// merged in that order), then the losses (every rank the same) and this rank's columns of dlogits.
__global__ void __launch_bounds__(CLASSIFIER_BLOCK)
classifier_tp_finish_kernel(floatX* logits, float* losses, const int* targets, const float* all, int tp, float dloss,
                            int N, int V, int real, int Vl, int v0, bool write_dlogits) {
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        float m = -INFINITY, s = 0.0f, target_logit = 0.0f;
        for (int r = 0; r < tp; r++) {
            const float* st = all + ((size_t)r * N + row) * 3;
            softmax_merge(m, s, st[0], st[1]);
            target_logit += st[2];  // one rank holds it, the others add 0
        }
        const float lse = m + logf(s);
        const int target = targets[row];
        if (threadIdx.x == 0) losses[row] = target >= 0 && target < V ? lse - target_logit : NAN;
        if (write_dlogits) dlogits_row(logits + (size_t)row * Vl, real, Vl, v0, target, lse, dloss);
    }
}

// logits (N,Vp) with only the first V columns real; targets (N) on the device; losses (N).
// Writes losses; with write_dlogits also overwrites logits with dlogits, each row scaled
// by dloss (1 / (B*T*grad_accum_steps) for a mean loss). rows_in_flight > 0 sets the grid,
// each block then taking rows gridDim.x apart (dev/cuda/classifier times the choices; the
// result does not depend on it). in_smem: classifier_smem_kernel where a row fits it (the same
// bits; not the default until a GPU has timed it: dev/cuda/classifier --bench).
inline void classifier_forward_backward(const CudaContext& ctx, floatX* logits, float* losses,
                                        const int* targets, float dloss, int N, int V, int Vp,
                                        bool write_dlogits, int rows_in_flight = 0, bool in_smem = false) {
    CHECK(N > 0 && V > 0 && V <= Vp, "N=%d V=%d Vp=%d", N, V, Vp);
    CHECK(Vp % x128::size == 0, "Vp=%d must be a multiple of %d", Vp, x128::size);
    CHECK(is_aligned16(logits), "logits=%p not 16-byte aligned", (void*)logits);
    CHECK(N < (1 << 30), "N=%d", N);
    const int grid = rows_in_flight > 0 ? std::min(N, rows_in_flight) : N;
    const int block = classifier_block(Vp);
    if (in_smem && classifier_smem_fits(ctx, Vp)) {
        const size_t smem = classifier_smem_bytes(Vp);
        CHECK_CUDA(
            cudaFuncSetAttribute(classifier_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        classifier_smem_kernel<<<grid, block, smem, ctx.stream>>>(logits, losses, targets, dloss, N, V, Vp,
                                                                  write_dlogits);
    } else {
        classifier_kernel<<<grid, block, 0, ctx.stream>>>(logits, losses, targets, dloss, N, V, Vp, write_dlogits);
    }
    CHECK_LAUNCH();
}

// -tp: the vocab-parallel classifier in two launches around the group's all-gather of the stats
// (the model's: llmc/gpt2_cuda.cuh). logits (N,Vl) are this rank's columns [v0, v0 + Vl) of the
// padded vocabulary, V of whose columns are real in all. Each rank's max and sum of exps and
// the target's logit are all the others need: no rank builds a whole row of logits.
// classifier_tp_stats: mine (N,3) := this rank's stats, for the all-gather into all (tp,N,3)
inline void classifier_tp_stats(const CudaContext& ctx, const floatX* logits, const int* targets, float* mine, int N,
                                int V, int Vl, int v0) {
    CHECK(N > 0 && Vl > 0 && Vl % x128::size == 0 && v0 >= 0, "N=%d Vl=%d v0=%d", N, Vl, v0);
    CHECK(is_aligned16(logits), "logits=%p not 16-byte aligned", (const void*)logits);
    const int real = std::max(0, std::min(Vl, V - v0));
    classifier_tp_stats_kernel<<<N, classifier_block(Vl), 0, ctx.stream>>>(logits, targets, mine, N, real, Vl, v0);
    CHECK_LAUNCH();
}
// classifier_tp_finish: losses (N), and with write_dlogits this rank's columns of dlogits in
// place of the logits, as classifier_forward_backward's, from the gathered stats
inline void classifier_tp_finish(const CudaContext& ctx, floatX* logits, float* losses, const int* targets,
                                 const float* all, int tp, float dloss, int N, int V, int Vl, int v0,
                                 bool write_dlogits) {
    CHECK(N > 0 && tp >= 1 && Vl % x128::size == 0, "N=%d tp=%d Vl=%d", N, tp, Vl);
    const int real = std::max(0, std::min(Vl, V - v0));
    classifier_tp_finish_kernel<<<N, classifier_block(Vl), 0, ctx.stream>>>(logits, losses, targets, all, tp, dloss,
                                                                            N, V, real, Vl, v0, write_dlogits);
    CHECK_LAUNCH();
}
