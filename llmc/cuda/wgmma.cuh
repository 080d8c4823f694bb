// wgmma.cuh: what a kernel needs around ptx.cuh's wgmma instructions (Hopper's warpgroup MMA,
// sm_90a): the shared-memory matrix descriptor, and where a tile's elements go in the layouts
// the descriptors describe. dev/cuda/wgmma.cu checks the instructions, on every layout below,
// against a CPU product; the attention kernels of issue 23 are to be built on them.
// defines: WgmmaSwizzle, wgmma_desc, wgmma_sw128_offset, wgmma_interleave_offset
//
// Layouts (PTX ISA "Shared Memory Matrix Layout"), for 16-bit elements, of a tile whose rows
// are the operand's contiguous dimension (K for K-major A and B, M or N for MN-major ones):
//   128-byte swizzle: rows of 64 elements, 128 bytes apart, the tile 1024-byte aligned; the
//     16-byte unit u of row r sits at unit u ^ (r % 8) of its row (wgmma_sw128_offset). The
//     descriptor: stride byte offset 1024 (8 rows); K-major: each 16-wide k step starts 32
//     bytes further; MN-major: 16 rows (of k) further.
//   interleave (no swizzle): 8 x 8 core matrices of 128 contiguous bytes (8 rows of 16),
//     wgmma_interleave_offset's order: down the rows first, then along them. K-major (rows of
//     M or N): leading byte offset (the next 8 k) rows / 8 x 128, stride (the next 8 rows) 128,
//     a k step 2 leading offsets further; MN-major (rows of k): leading (the next 8 k) 128,
//     stride (the next 8 along M or N) rows / 8 x 128, a k step 256 bytes further.
#pragma once
#include <cstdint>
#include "ptx.cuh"  // defines: ptx_shared_address, ptx_wgmma_*

enum WgmmaSwizzle { WGMMA_SWIZZLE_NONE = 0, WGMMA_SWIZZLE_128B = 1, WGMMA_SWIZZLE_64B = 2, WGMMA_SWIZZLE_32B = 3 };

// the matrix descriptor ("Matrix Descriptor Format") of an operand at shared-window address
// addr: leading and stride dimension byte offsets, swizzle; base offset 0 (a swizzled tile
// starts on its pattern: 1024 bytes for 128-byte swizzling)
__host__ __device__ inline uint64_t wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, WgmmaSwizzle swizzle) {
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | ((uint64_t)swizzle << 62);
}

// byte offset of element (r, c) (row r, c along the row) of a tile of 64-element rows in the
// 128-byte swizzle
__host__ __device__ inline uint32_t wgmma_sw128_offset(int r, int c) {
    return (uint32_t)(r * 128 + ((((c >> 3) ^ r) & 7) << 4) + (c & 7) * 2);
}

// byte offset of element (r, c) of an interleaved tile of `rows` rows (a multiple of 8): core
// matrix (r / 8, c / 8) at ((c / 8) (rows / 8) + r / 8) x 128 bytes, its row r % 8 16 bytes apart
__host__ __device__ inline uint32_t wgmma_interleave_offset(int r, int c, int rows) {
    return (uint32_t)((((c >> 3) * (rows >> 3) + (r >> 3)) << 7) + (r & 7) * 16 + (c & 7) * 2);
}
