// gqa.cuh: grouped-query attention (Llama) on the GPU through the multi-head kernels: the
// NKV key/value heads are repeated to one per query head before the attention
// (gqa_expand), and the gradients of the repeats are summed back per key/value head after
// its backward (gqa_reduce), as Hugging Face's repeat_kv does. Both attention kernel families
// (attention.cuh on CUDA cores, attention_mma.cuh on tensor cores) then serve Llama as they
// are; the price is a (B,T,3C) buffer and two passes over it.
// defines: gqa_expand, gqa_reduce
// CPU reference: llmc/cpu/attention.h's attention_forward_gqa / attention_backward_gqa
//
// qkv_gqa (B,T,(NH+2NKV)*HS) = [q (NH heads) | k (NKV) | v (NKV)] per position;
// qkv_mha (B,T,3*NH*HS) = [q | k | v], NH heads each; query head h uses key/value head
// h / (NH/NKV). One thread per 16-byte group of an output row.
#pragma once
#include "common.cuh"

// dst row (3*NH*HS) from src row ((NH+2NKV)*HS): q as it is, k and v head h from head h/group
__global__ void gqa_expand_kernel(floatX* dst, const floatX* src, int rows, int NH, int NKV, int HS) {
    const int gpr = 3 * NH * HS / x128::size;  // groups per output row
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * gpr) return;
    const size_t row = i / gpr;
    const int c = (int)(i % gpr) * x128::size;  // output channel
    const int part = c / (NH * HS), within = c % (NH * HS), h = within / HS, d = within % HS;
    const int src_c = part == 0 ? c : NH * HS + (part - 1) * NKV * HS + (h / (NH / NKV)) * HS + d;
    store128(dst + row * 3 * NH * HS + c, load128(src + row * (size_t)(NH + 2 * NKV) * HS + src_c));
}

// dst row ((NH+2NKV)*HS): dq as it is; dk and dv of key/value head j = the sum over its group's
// query heads j*group .. j*group+group-1 of src's (in that order: the same bits every run)
__global__ void gqa_reduce_kernel(floatX* dst, const floatX* src, int rows, int NH, int NKV, int HS) {
    const int width = (NH + 2 * NKV) * HS, gpr = width / x128::size, group = NH / NKV;
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * gpr) return;
    const size_t row = i / gpr;
    const int c = (int)(i % gpr) * x128::size;
    const floatX* s = src + row * 3 * NH * HS;
    if (c < NH * HS) {
        store128(dst + row * width + c, load128(s + c));
        return;
    }
    const int part = (c - NH * HS) / (NKV * HS), within = (c - NH * HS) % (NKV * HS);  // 0: k, 1: v
    const int j = within / HS, d = within % HS;
    float acc[x128::size] = {};
    for (int g = 0; g < group; g++) {
        x128 v = load128(s + (1 + part) * NH * HS + (j * group + g) * HS + d);  // int-bound(gqa_row)
        for (int k = 0; k < x128::size; k++) acc[k] += to_float(v[k]);
    }
    x128 out;
    for (int k = 0; k < x128::size; k++) out[k] = from_float<floatX>(acc[k]);
    store128(dst + row * width + c, out);
}

inline void gqa_check(int B, int T, int NH, int NKV, int HS, const void* a, const void* b) {
    CHECK(B > 0 && T > 0 && NH > 0 && NKV > 0 && NH % NKV == 0, "B=%d T=%d NH=%d NKV=%d", B, T, NH, NKV);
    CHECK(HS > 0 && HS % x128::size == 0, "HS=%d must be a multiple of %d", HS, x128::size);
    CHECK(is_aligned16(a) && is_aligned16(b), "pointers %p %p not 16-byte aligned", a, b);
    CHECK(ceil_div((size_t)B * T * 3 * NH * HS / x128::size, 256) < (1u << 31), "too large for one grid");
    CHECK((size_t)(NH + 2 * NKV) * HS < (1u << 30), "NH=%d NKV=%d HS=%d: a row's offsets overflow int", NH, NKV, HS);  // int-bound: gqa_row
}

// qkv_mha (B,T,3*NH*HS) = qkv_gqa with every key/value head repeated for its query heads
inline void gqa_expand(const CudaContext& ctx, floatX* qkv_mha, const floatX* qkv_gqa, int B, int T, int NH, int NKV,
                       int HS) {
    gqa_check(B, T, NH, NKV, HS, qkv_mha, qkv_gqa);
    const size_t groups = (size_t)B * T * 3 * NH * HS / x128::size;
    gqa_expand_kernel<<<(unsigned)ceil_div(groups, 256), 256, 0, ctx.stream>>>(qkv_mha, qkv_gqa, B * T, NH, NKV, HS);
    CHECK_LAUNCH();
}

// dqkv_gqa (B,T,(NH+2NKV)*HS) = dqkv_mha with the repeats' gradients summed per key/value
// head. Overwrites dqkv_gqa (as the attention backward overwrites its dqkv).
inline void gqa_reduce(const CudaContext& ctx, floatX* dqkv_gqa, const floatX* dqkv_mha, int B, int T, int NH, int NKV,
                       int HS) {
    gqa_check(B, T, NH, NKV, HS, dqkv_gqa, dqkv_mha);
    const size_t groups = (size_t)B * T * (NH + 2 * NKV) * HS / x128::size;
    gqa_reduce_kernel<<<(unsigned)ceil_div(groups, 256), 256, 0, ctx.stream>>>(dqkv_gqa, dqkv_mha, B * T, NH, NKV, HS);
    CHECK_LAUNCH();
}
