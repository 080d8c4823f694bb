// sequence_parallel.cuh: where a tensor-parallel layer's parts meet on the GPU (-tp), with or
// without sequence parallelism (-sp 1): the device side of llmc/tensor_parallel.h's TpStream,
// which the CPU trainer uses, over NCCL.
//
// -sp 1 (Korthikanti et al. 2022): between the tensor-parallel matmuls the residual stream, the
// norms and their outputs are split along T, each rank holding T/tp positions of every sequence
// (rank r's row i is position r T/tp + i % (T/tp) of sequence i / (T/tp), as llmc/tensor_parallel.h's
// sp_row). A norm's output is all-gathered before the column-parallel matmul that reads it, and a
// row-parallel matmul's partial sums are reduce-scattered (each rank summing its positions) where
// -tp alone all-reduces them. NCCL gathers and scatters rank by rank, so the rows go through a
// scratch buffer in that order and a permutation kernel puts them in (b, t) order, or takes them out.
// defines: sp_permute, GpuTpStream
#pragma once
#include "common.cuh"     // defines: floatX, CudaContext, x128, load128, store128, ceil_div
#include "comm_gpu.cuh"   // defines: GpuComm, gpu_all_reduce_sum, gpu_all_gather_x, gpu_reduce_scatter_sum

// Rows of C channels between (b, t) order (full: B T rows) and rank order (ranked: rank r's
// B T/parts rows, then rank r + 1's); to_full: ranked -> full, else full -> ranked. One thread per
// 16-byte group of a row.
__global__ void sp_permute_kernel(floatX* dst, const floatX* src, int B, int T, int C, int parts, bool to_full) {
    const int groups = C / x128::size, Tl = T / parts;
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)B * T * groups) return;
    const size_t f = idx / groups;  // the row in (b, t) order
    const int c = (int)(idx % groups) * x128::size;
    const int b = (int)(f / T), t = (int)(f % T), r = t / Tl;
    const size_t ranked = ((size_t)r * B + b) * Tl + t % Tl;  // rank r's row b Tl + t % Tl
    const size_t from = to_full ? ranked : f, to = to_full ? f : ranked;
    store128(dst + to * C + c, load128(src + from * C + c));
}

inline void sp_permute(const CudaContext& ctx, floatX* dst, const floatX* src, int B, int T, int C, int parts,
                       bool to_full) {
    CHECK(T % parts == 0 && C % x128::size == 0, "T=%d parts=%d C=%d", T, parts, C);
    const size_t threads = (size_t)B * T * (C / x128::size);
    sp_permute_kernel<<<(unsigned)ceil_div(threads, 256), 256, 0, ctx.stream>>>(dst, src, B, T, C, parts, to_full);
    CHECK_LAUNCH();
}

// What a family's forward and backward do where a layer's parts meet, for B x T positions of C
// channels (tp nullptr: one rank, nothing to do); rows: the residual stream's rows here (N, or
// N / tp under -sp). full and scratch: (N,C) buffers of the model's (-sp only).
//   whole(x)       the positions' rows of a buffer of the residual stream's: x itself, or (-sp)
//                  gathered from every rank into full
//   sum(x, out)    x (N rows) holds this rank's partial sums: the group's sum of every row, in
//                  place (out == x), or (-sp) of this rank's rows, into out (rows)
//   norm_grads     a norm's weight gradients, found from this rank's rows only under -sp, added
//                  over the group (keep: 2 x the values); without -sp compute() alone
struct GpuTpStream {
    const CudaContext& ctx;
    GpuComm* tp;
    bool sp;
    int B, T, C, N, rows, parts;
    floatX *full, *scratch, *keep;
    GpuTpStream(const CudaContext& c, GpuComm* group, bool seq, int B_, int T_, int C_, floatX* full_,
                floatX* scratch_, floatX* keep_)
        : ctx(c), tp(group), sp(group != nullptr && seq), B(B_), T(T_), C(C_), N(B_ * T_),
          rows(sp ? B_ * T_ / group->host->world : B_ * T_), parts(group != nullptr ? group->host->world : 1),
          full(full_), scratch(scratch_), keep(keep_) {}
    const floatX* whole(const floatX* x) const {
        if (!sp) return x;
        gpu_all_gather_x(tp, ctx, x, scratch, (size_t)rows * C);
        sp_permute(ctx, full, scratch, B, T, C, parts, true);
        return full;
    }
    void sum(floatX* x, floatX* out) const {
        if (tp == nullptr) return;
        if (!sp) {
            CHECK(out == x, "-tp without -sp sums in place");
            return gpu_all_reduce_sum(tp, ctx, x, (size_t)N * C);
        }
        sp_permute(ctx, scratch, x, B, T, C, parts, false);
        gpu_reduce_scatter_sum(tp, ctx, scratch, out, (size_t)rows * C);
    }
    // g[k] (n[k] values each, 2 sum(n) <= what keep holds) += this micro-step's gradient from
    // every rank's rows: the earlier micro-steps' sums kept aside, compute() on zeros, the parts
    // all-reduced, the sums back
    template <typename Fn>
    void norm_grads(floatX* const* g, const size_t* n, int count, Fn&& compute) const {
        if (!sp) return compute();
        size_t total = 0;
        for (int k = 0; k < count; k++) total += n[k];
        floatX* part = keep + total;
        for (size_t k = 0, at = 0; k < (size_t)count; at += n[k++]) {
            CHECK_CUDA(cudaMemcpyAsync(keep + at, g[k], n[k] * sizeof(floatX), cudaMemcpyDeviceToDevice, ctx.stream));
            CHECK_CUDA(cudaMemsetAsync(g[k], 0, n[k] * sizeof(floatX), ctx.stream));
        }
        compute();
        for (size_t k = 0, at = 0; k < (size_t)count; at += n[k++])
            CHECK_CUDA(cudaMemcpyAsync(part + at, g[k], n[k] * sizeof(floatX), cudaMemcpyDeviceToDevice, ctx.stream));
        gpu_all_reduce_sum(tp, ctx, part, total);
        for (size_t k = 0, at = 0; k < (size_t)count; at += n[k++]) {
            CHECK_CUDA(cudaMemcpyAsync(g[k], keep + at, n[k] * sizeof(floatX), cudaMemcpyDeviceToDevice, ctx.stream));
            accumulate(ctx.stream, g[k], part + at, n[k]);
        }
    }
};
