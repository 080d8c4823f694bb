// ptx.cuh: the inline PTX of gptrain's kernels, one named device function per instruction.
// Kernels never write asm themselves. Under nvcc each function is the instruction; in the
// emulated build (llmc/emu/emu.h defines GPTRAIN_EMU) it is llmc/emu/ptx.h's implementation of
// the same instruction, written from the PTX ISA's tables, so a kernel that puts a fragment in
// the wrong place computes the wrong thing there too. The #ifdef switches these bodies only.
// defines: ptx_mma_m16n8k16_bf16_f32, ptx_ldmatrix_x1, ptx_ldmatrix_x2, ptx_ldmatrix_x4,
//          ptx_ldmatrix_x1_trans, ptx_ldmatrix_x2_trans, ptx_ldmatrix_x4_trans,
//          ptx_cp_async_16, ptx_cp_async_16_zfill, ptx_cp_async_commit, ptx_cp_async_wait,
//          ptx_cp_async_wait_all, ptx_bulk_reduce_add_f32, ptx_bulk_commit, ptx_bulk_wait_read,
//          ptx_bulk_wait, ptx_fence_proxy_async_shared, ptx_shared_address, ptx_wgmma_fence,
//          ptx_wgmma_commit_group, ptx_wgmma_wait_group, ptx_wgmma_m64n64k16_bf16_f32_ss (_rs),
//          ptx_wgmma_m64n128k16_bf16_f32_ss (_rs), ptx_wgmma_m64nNk16_bf16_f32_ss (_rs),
//          ptx_ex2_approx_ftz
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" and
// "ldmatrix"), with g = lane / 4 and t = lane % 4, two bf16 per 32-bit register, the lower
// column (or k) in the low half:
//   mma A (16 x 16, rows x k): a[0] (g, 2t), a[1] (g+8, 2t), a[2] (g, 2t+8), a[3] (g+8, 2t+8)
//   mma B (16 x 8, k x n):     b0 (k 2t, n g), b1 (k 2t+8, n g)
//   mma C, D (16 x 8, fp32):   d[0], d[1] (g, 2t and 2t+1), d[2], d[3] (g+8, 2t and 2t+1)
//   ldmatrix: lanes 8j..8j+7 give the shared-memory addresses (16-byte aligned) of rows 0..7 of
//   8x8 matrix j; r[j] of every lane = row g, columns 2t and 2t+1 of matrix j (.trans: column
//   g, rows 2t and 2t+1). So ldmatrix_x4 of a 16x16 row-major tile, lane l giving row l % 16
//   at column 8 * (l / 16), is mma's A fragment; ldmatrix_x2_trans of a 16 x 8 k-major tile
//   (lane l giving row l % 16) is its B fragment.
// mma and ldmatrix are warp-wide: all 32 lanes call them together. cp.async needs sm_80, the
// bulk reduction and its fence sm_90 (below sm_90 they trap: callers check the device first).
#pragma once
#include <cstdint>
#ifdef GPTRAIN_EMU
#include <emu_ptx.h>  // (llmc/emu/ptx.h, through the emulated build's -I llmc/emu/include) defines: emu::mma_m16n8k16_bf16_f32, emu::ldmatrix_m8n8_b16, emu::cp_async, ...
#endif

// d (16 x 8, fp32) += A (16 x 16, bf16) B (16 x 8, bf16)
__device__ inline void ptx_mma_m16n8k16_bf16_f32(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#ifndef GPTRAIN_EMU
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    ::emu::mma_m16n8k16_bf16_f32(d, a, b0, b1);
#endif
}

// ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16: row is this lane's row address (shared
// memory); lanes past 8N give none that is read
__device__ inline void ptx_ldmatrix_x1(uint32_t r[1], const void* row) {
#ifndef GPTRAIN_EMU
    const uint32_t p = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(p) : "memory");
#else
    ::emu::ldmatrix_m8n8_b16(1, false, r, row);
#endif
}

__device__ inline void ptx_ldmatrix_x2(uint32_t r[2], const void* row) {
#ifndef GPTRAIN_EMU
    const uint32_t p = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(p)
                 : "memory");
#else
    ::emu::ldmatrix_m8n8_b16(2, false, r, row);
#endif
}

__device__ inline void ptx_ldmatrix_x4(uint32_t r[4], const void* row) {
#ifndef GPTRAIN_EMU
    const uint32_t p = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(p)
                 : "memory");
#else
    ::emu::ldmatrix_m8n8_b16(4, false, r, row);
#endif
}

__device__ inline void ptx_ldmatrix_x1_trans(uint32_t r[1], const void* row) {
#ifndef GPTRAIN_EMU
    const uint32_t p = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(p) : "memory");
#else
    ::emu::ldmatrix_m8n8_b16(1, true, r, row);
#endif
}

__device__ inline void ptx_ldmatrix_x2_trans(uint32_t r[2], const void* row) {
#ifndef GPTRAIN_EMU
    const uint32_t p = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(p)
                 : "memory");
#else
    ::emu::ldmatrix_m8n8_b16(2, true, r, row);
#endif
}

__device__ inline void ptx_ldmatrix_x4_trans(uint32_t r[4], const void* row) {
#ifndef GPTRAIN_EMU
    const uint32_t p = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(p)
                 : "memory");
#else
    ::emu::ldmatrix_m8n8_b16(4, true, r, row);
#endif
}

// cp.async.cg.shared.global: 16 bytes from global memory to shared memory (both 16-byte
// aligned), asynchronously: the destination holds them only after a cp.async.wait_group (or
// wait_all) that covers the copy's group.
__device__ inline void ptx_cp_async_16(void* smem_dst, const void* gmem_src) {
#ifndef GPTRAIN_EMU
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(gmem_src) : "memory");
#else
    ::emu::cp_async(smem_dst, gmem_src, 16, 16);
#endif
}

// the same, reading only the first src_bytes (0..16) of gmem_src and writing zeros after them:
// a tile's rows past the end of a matrix, without a branch (src_bytes 0 reads nothing, but
// gmem_src must still be an aligned address)
__device__ inline void ptx_cp_async_16_zfill(void* smem_dst, const void* gmem_src, int src_bytes) {
#ifndef GPTRAIN_EMU
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(gmem_src), "r"(src_bytes)
                 : "memory");
#else
    ::emu::cp_async(smem_dst, gmem_src, 16, src_bytes);
#endif
}

// cp.async.commit_group: this thread's copies issued since the last commit become one group
// (an empty group if there were none)
__device__ inline void ptx_cp_async_commit() {
#ifndef GPTRAIN_EMU
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
    ::emu::cp_async_commit_group();
#endif
}

// cp.async.wait_group N: waits until at most the newest N of this thread's committed groups
// are pending. Other threads see the data after a __syncthreads that follows the wait.
template <int N>
__device__ inline void ptx_cp_async_wait() {
#ifndef GPTRAIN_EMU
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#else
    ::emu::cp_async_wait_group(N);
#endif
}

// cp.async.wait_all: every copy this thread issued, committed or not
__device__ inline void ptx_cp_async_wait_all() {
#ifndef GPTRAIN_EMU
    asm volatile("cp.async.wait_all;\n" ::: "memory");
#else
    ::emu::cp_async_wait_all();
#endif
}

// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [gmem_dst], [smem_src], bytes: the
// TMA unit adds bytes / 4 floats of shared memory into global memory, each element atomically,
// asynchronously (sm_90). gmem_dst and smem_src 16-byte aligned, bytes a multiple of 16. smem_src
// must be written before (by other lanes: then a __syncwarp or barrier) and behind a
// ptx_fence_proxy_async_shared of the writers, and not written again until a ptx_bulk_wait_read
// covering the operation's group.
__device__ inline void ptx_bulk_reduce_add_f32(float* gmem_dst, const float* smem_src, uint32_t bytes) {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();
#else
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem_src);
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(gmem_dst),
                 "r"(s), "r"(bytes)
                 : "memory");
#endif
#else
    ::emu::bulk_reduce_add_f32(gmem_dst, smem_src, bytes);
#endif
}

// cp.async.bulk.commit_group: this thread's bulk operations since the last commit become one group
__device__ inline void ptx_bulk_commit() {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();
#else
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
#else
    ::emu::bulk_commit_group();
#endif
}

// cp.async.bulk.wait_group.read N: at most the newest N groups may still be reading their
// sources (the shared memory of the older ones may be written again)
template <int N>
__device__ inline void ptx_bulk_wait_read() {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();
#else
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
#else
    ::emu::bulk_wait_group(N);
#endif
}

// cp.async.bulk.wait_group N: at most the newest N groups are not complete (writes included)
template <int N>
__device__ inline void ptx_bulk_wait() {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();
#else
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#endif
#else
    ::emu::bulk_wait_group(N);
#endif
}

// fence.proxy.async.shared::cta: this thread's shared-memory writes are seen by the async proxy
// (the bulk operations) issued after it (sm_90; nothing to do on the emulated GPU)
__device__ inline void ptx_fence_proxy_async_shared() {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap();
#else
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
#endif
}

// ---------------------------------------------------------------------------------------
// wgmma (sm_90a only: nvcc -gencode arch=compute_90a,code=sm_90a; elsewhere they trap, and
// their callers check the build and the device first). A warpgroup, 4 consecutive warps whose
// first is a multiple of 4, computes D (64 x N, fp32) = A (64 x 16, bf16) B (16 x N, bf16) +
// (accumulate ? D : 0), A and B read from shared memory through 64-bit matrix descriptors
// (wgmma.cuh makes them), or A from registers; asynchronously: the shared-memory operands may be
// read, and D written, until the wgmma.wait_group that completes the operation's group, so
// neither they nor D's registers may be touched before it. PTX ISA 9.7.15 "Asynchronous
// Warpgroup Level Matrix Multiply-Accumulate Instructions". Fragments:
//   D (64 x N, .f32, N/2 a thread): warp w of the group holds rows 16w..16w+15 as
//       mma.m16n8k16's C, 8 columns at a time: d[4j..4j+3] = C of columns 8j..8j+7
//       (d[4j], d[4j+1]: row 16w + g, columns 8j + 2t, +1; d[4j+2], d[4j+3]: row 16w + g + 8)
//   A in registers (64 x 16, .bf16, 4 registers a thread): warp w's rows 16w..16w+15 as
//       mma.m16n8k16's A fragment

// ex2.approx.ftz.f32: 2^x on the special function unit, one instruction. exp2f is
// ex2.approx.f32 without .ftz, which keeps subnormal results: ptxas wraps the unit's instruction
// in a range test and two multiplies (4 instructions: dev/sass_count.py counts 208 against 112
// for 32 of each at sm_90a). The attention kernels' probabilities take this one: a probability
// under 2^-126 (a score more than 126 below its row's maximum, in base 2) is 0 here, a change
// of less than 2^-126 where the row's largest is 1. PTX ISA, ex2: subnormal inputs and results
// are flushed to sign-preserving zero; ex2(-Inf) = +0, ex2(+Inf) = +Inf, ex2(NaN) = NaN.
__device__ __forceinline__ float ptx_ex2_approx_ftz(float x) {
#ifndef GPTRAIN_EMU
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return ::emu::ex2_approx_ftz(x);
#endif
}

// the shared-window address of p, a pointer into the block's dynamic shared memory (what a
// matrix descriptor holds)
__device__ inline uint32_t ptx_shared_address(const void* p) {
#ifndef GPTRAIN_EMU
    return (uint32_t)__cvta_generic_to_shared(p);
#else
    return ::emu::shared_address(p);
#endif
}

// wgmma.fence.sync.aligned: the registers the warpgroup wrote before it (accumulators, A
// fragments) are what the wgmma.mma_async after it read
__device__ inline void ptx_wgmma_fence() {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
    __trap();
#endif
#endif
}

// An empty asm that reads and writes each of the N registers: the compiler may neither move them
// across it nor reorder their uses around it, so a wgmma's accumulators stay where its issue and
// its wait see them (without it ptxas may copy them and inject warpgroup.arrive/wait, C7517/C7519).
// Nothing on the emulated GPU.
template <int N>
__device__ __forceinline__ void ptx_wgmma_fence_operands(float (&d)[N]) {
#ifndef GPTRAIN_EMU
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
#else
    (void)d;
#endif
}
// the same for A fragments held in registers (R k steps of N registers)
template <int R, int N>
__device__ __forceinline__ void ptx_wgmma_fence_operands(uint32_t (&a)[R][N]) {
#ifndef GPTRAIN_EMU
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int i = 0; i < N; i++) asm volatile("" : "+r"(a[r][i])::"memory");
#else
    (void)a;
#endif
}

// wgmma.commit_group.sync.aligned: the warpgroup's wgmma.mma_async since the last commit become one group
__device__ inline void ptx_wgmma_commit_group() {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
    __trap();
#endif
#else
    ::emu::wgmma_commit_group();
#endif
}

// wgmma.wait_group.sync.aligned N: at most the newest N groups are not complete
template <int N>
__device__ inline void ptx_wgmma_wait_group() {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
    __trap();
#endif
#else
    ::emu::wgmma_wait_group(N);
#endif
}

// wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16: d (64 x 64) = A B + (accumulate ? d : 0),
// A (64 x 16) and B (16 x 64) in shared memory by descriptors; TRANS_A 0: A K-major, 1: M-major;
// TRANS_B 0: B K-major (stored as 64 rows of n, k contiguous), 1: N-major (16 rows of k, n contiguous)
template <int TRANS_A, int TRANS_B>
__device__ inline void ptx_wgmma_m64n64k16_bf16_f32_ss(float d[32], uint64_t a_desc, uint64_t b_desc, int accumulate) {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %35, %36;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(a_desc), "l"(b_desc), "r"(accumulate), "n"(TRANS_A), "n"(TRANS_B)
        : "memory");
#else
    __trap();
#endif
#else
    ::emu::wgmma_m64nNk16_bf16_f32(64, d, nullptr, a_desc, b_desc, accumulate, TRANS_A, TRANS_B);
#endif
}

// the same with A from registers (4 a thread, above); TRANS_B as above
template <int TRANS_B>
__device__ inline void ptx_wgmma_m64n64k16_bf16_f32_rs(float d[32], const uint32_t a[4], uint64_t b_desc,
                                                        int accumulate) {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate), "n"(TRANS_B)
        : "memory");
#else
    __trap();
#endif
#else
    ::emu::wgmma_m64nNk16_bf16_f32(64, d, a, 0, b_desc, accumulate, 0, TRANS_B);
#endif
}

// wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16: the same with N = 128, d (64 x 128, 64
// accumulators a thread: columns 8j.. in d[4j..4j+3], as above); B (16 x 128) by its descriptor
template <int TRANS_A, int TRANS_B>
__device__ inline void ptx_wgmma_m64n128k16_bf16_f32_ss(float d[64], uint64_t a_desc, uint64_t b_desc, int accumulate) {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, %67, %68;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(a_desc), "l"(b_desc), "r"(accumulate), "n"(TRANS_A), "n"(TRANS_B)
        : "memory");
#else
    __trap();
#endif
#else
    ::emu::wgmma_m64nNk16_bf16_f32(128, d, nullptr, a_desc, b_desc, accumulate, TRANS_A, TRANS_B);
#endif
}

// the same with A from registers (4 a thread); TRANS_B as above
template <int TRANS_B>
__device__ inline void ptx_wgmma_m64n128k16_bf16_f32_rs(float d[64], const uint32_t a[4], uint64_t b_desc,
                                                         int accumulate) {
#ifndef GPTRAIN_EMU
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate), "n"(TRANS_B)
        : "memory");
#else
    __trap();
#endif
#else
    ::emu::wgmma_m64nNk16_bf16_f32(128, d, a, 0, b_desc, accumulate, 0, TRANS_B);
#endif
}

// the m64nNk16 of N = 64 or 128, chosen by N (d: N / 2 accumulators a thread)
template <int N, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void ptx_wgmma_m64nNk16_bf16_f32_ss(float d[N / 2], uint64_t a_desc, uint64_t b_desc,
                                                               int accumulate) {
    static_assert(N == 64 || N == 128, "wgmma m64n64k16 or m64n128k16");
    if constexpr (N == 64) ptx_wgmma_m64n64k16_bf16_f32_ss<TRANS_A, TRANS_B>(d, a_desc, b_desc, accumulate);
    else ptx_wgmma_m64n128k16_bf16_f32_ss<TRANS_A, TRANS_B>(d, a_desc, b_desc, accumulate);
}
template <int N, int TRANS_B>
__device__ __forceinline__ void ptx_wgmma_m64nNk16_bf16_f32_rs(float d[N / 2], const uint32_t a[4], uint64_t b_desc,
                                                               int accumulate) {
    static_assert(N == 64 || N == 128, "wgmma m64n64k16 or m64n128k16");
    if constexpr (N == 64) ptx_wgmma_m64n64k16_bf16_f32_rs<TRANS_B>(d, a, b_desc, accumulate);
    else ptx_wgmma_m64n128k16_bf16_f32_rs<TRANS_B>(d, a, b_desc, accumulate);
}
