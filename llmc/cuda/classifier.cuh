// classifier.cuh: softmax + cross-entropy + its gradient, fused, on the GPU. A block takes
// a row of logits at a time: pass 1 finds the row's logsumexp (online max and sum), pass 2
// overwrites the logits with dlogits. No probabilities are ever stored. One block a row by
// default: bounding the rows in flight to the L2 cache's worth, so that pass 2 would find its
// row there, measured slower on an H200 (2026-11-26, 8192 rows of 50304: one block a row
// 0.75 ms; twice, once, half and a quarter the L2's worth of rows 0.81, 0.88, 1.08 and
// 1.55 ms): the occupancy it costs outweighs the reads it saves.
// defines: classifier_forward_backward
// CPU reference: llmc/cpu/crossentropy.h (crossentropy_forward + crossentropy_backward)
#pragma once
#include <algorithm>
#include <cmath>
#include "common.cuh"

constexpr int CLASSIFIER_BLOCK = 512;

// (m, s) pairs stand for s * exp(m): the sum of exp(x - m) over the values seen, m their
// max. Merging rescales both to the larger max; an empty pair is (-inf, 0).
__device__ inline void softmax_merge(float& m, float& s, float m2, float s2) {
    float M = fmaxf(m, m2);
    if (M == -INFINITY) return;  // both empty
    s = (m == -INFINITY ? 0.0f : s * expf(m - M)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - M));
    m = M;
}

// logits (N,Vp), first V columns real. losses[row] = logsumexp - logits[target];
// with write_dlogits, logits[row] := (softmax - onehot(target)) * dloss, padding := 0.
// A target outside [0,V) gives a NaN loss (the trainer checks targets on the host).
__global__ void __launch_bounds__(CLASSIFIER_BLOCK)
classifier_kernel(floatX* logits, float* losses, const int* targets, float dloss, int N, int V, int Vp,
                  bool write_dlogits) {
    __shared__ float shared_m[CLASSIFIER_BLOCK / 32], shared_s[CLASSIFIER_BLOCK / 32];
    __shared__ float shared_lse;
    // (the shared values are safe to reuse for the next row: every thread reads shared_lse
    // before the next row's first barrier, and warp 0 has read shared_m and shared_s before
    // this row's second)
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        floatX* x = logits + (size_t)row * Vp;
        const int target = targets[row];
        const bool target_ok = target >= 0 && target < V;
        // read before any thread starts overwriting the row
        float target_logit = (threadIdx.x == 0 && target_ok) ? to_float(x[target]) : 0.0f;

        // pass 1: online max and sum over the V real columns
        float m = -INFINITY, s = 0.0f;
        for (int c = threadIdx.x * x128::size; c < V; c += blockDim.x * x128::size) {
            x128 v = load128(x + c);
            for (int k = 0; k < x128::size && c + k < V; k++) {
                float f = to_float(v[k]);
                if (f > m) {
                    s = s * expf(m - f) + 1.0f;  // expf(-inf) = 0 for the first value
                    m = f;
                } else {
                    s += expf(f - m);
                }
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            softmax_merge(m, s, m2, s2);
        }
        const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
        if (lane == 0) {
            shared_m[warp] = m;
            shared_s[warp] = s;
        }
        __syncthreads();  // also: every thread is done reading pass 1 before pass 2 writes
        if (warp == 0) {
            const int num_warps = blockDim.x / 32;
            m = lane < num_warps ? shared_m[lane] : -INFINITY;
            s = lane < num_warps ? shared_s[lane] : 0.0f;
            for (int o = 16; o > 0; o >>= 1) {
                float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
                softmax_merge(m, s, m2, s2);
            }
            if (lane == 0) shared_lse = m + logf(s);
        }
        __syncthreads();
        const float lse = shared_lse;
        if (threadIdx.x == 0) losses[row] = target_ok ? lse - target_logit : NAN;
        if (!write_dlogits) continue;

        // pass 2: dlogits, in place; padded columns get 0
        for (int c = threadIdx.x * x128::size; c < Vp; c += blockDim.x * x128::size) {
            x128 v = c < V ? load128(x + c) : x128::zeros();
            x128 g;
            for (int k = 0; k < x128::size; k++) {
                int j = c + k;
                float p = j < V ? expf(to_float(v[k]) - lse) : 0.0f;
                float indicator = j == target ? 1.0f : 0.0f;
                g[k] = from_float<floatX>(j < V ? (p - indicator) * dloss : 0.0f);
            }
            store128cs(x + c, g);
        }
    }
}

// logits (N,Vp) with only the first V columns real; targets (N) on the device; losses (N).
// Writes losses; with write_dlogits also overwrites logits with dlogits, each row scaled
// by dloss (1 / (B*T*grad_accum_steps) for a mean loss). rows_in_flight > 0 sets the grid,
// each block then taking rows gridDim.x apart (dev/cuda/classifier times the choices; the
// result does not depend on it).
inline void classifier_forward_backward(const CudaContext& ctx, floatX* logits, float* losses,
                                        const int* targets, float dloss, int N, int V, int Vp,
                                        bool write_dlogits, int rows_in_flight = 0) {
    CHECK(N > 0 && V > 0 && V <= Vp, "N=%d V=%d Vp=%d", N, V, Vp);
    CHECK(Vp % x128::size == 0, "Vp=%d must be a multiple of %d", Vp, x128::size);
    CHECK(is_aligned16(logits), "logits=%p not 16-byte aligned", (void*)logits);
    CHECK(N < (1 << 30), "N=%d", N);
    const int grid = rows_in_flight > 0 ? std::min(N, rows_in_flight) : N;
    classifier_kernel<<<grid, CLASSIFIER_BLOCK, 0, ctx.stream>>>(logits, losses, targets, dloss, N, V, Vp,
                                                                 write_dlogits);
    CHECK_LAUNCH();
}
