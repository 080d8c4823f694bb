// attention_wgmma.cuh: the causal attention forward on Hopper's warpgroup MMA (wgmma, sm_90a; issue
// 23, dev/results/NOTES.md (b)), attention_mma.cuh's forward with its products moved from
// mma.sync to wgmma. A first step, a variant dev/cuda/attention_wgmma checks against the CPU
// reference and times beside attention_forward_mma: not in the trainers until a Hopper has
// measured it.
// defines: attention_forward_wgmma, attention_wgmma_problem
//
// A block is one warpgroup (4 warps) per (64-query tile, head, batch), heaviest tiles first, or
// two (WG = 2: 128 queries, each warpgroup its own 64, sharing every key tile's loads). Q,
// and each 64-key tile's K and V (double-buffered, cp.async as attention_mma.cuh's), sit in
// shared memory in the 128-byte swizzle (wgmma.cuh: head size 64, one 128-byte row a query or
// key). Per key tile up to the diagonal:
//   S (64 x 64, fp32) = Q K^T: four wgmma.m64n64k16 from descriptors, both operands K-major
//     (Q's rows and K's rows run along the head); S then sits as wgmma's D: warp w holds rows
//     16w.., as mma.m16n8k16's C;
//   the mask on the diagonal tile, the online softmax per row (a row's 64 scores in a quad's 4
//     lanes: two shuffles), O rescaled;
//   O (64 x 64) += P V: four wgmma with P from registers (the S fragments rounded to bf16 are
//     wgmma's A fragments, as mma.m16n8k16's C makes its A) and V from its tile, N-major (V's
//     rows run along the head, the product's n).
// Each wgmma group is waited for at once: no overlap of the softmax with the products yet
// (flash-attention 3's ping-pong of two warpgroups, and its producer warp with TMA, would be the
// next steps, when a measurement says where the time goes). Every result element has one
// writer and every sum a fixed order: bitwise reproducible.
// Shared memory: 1 KB of alignment slack and 4 + WG 8 KB tiles: 41 KB (WG = 1, 5 blocks an SM)
// or 49 KB (WG = 2, 4 blocks).
#pragma once
#include <cstdint>
#include "common.cuh"         // defines: floatX, CudaContext, CHECK, CHECK_LAUNCH, ceil_div
#include "attention.cuh"      // defines: attention_check, att_heads, att_kv_head, att_head_map
#include "attention_mma.cuh"  // defines: mma_pack_floats, attention_mma_smem_limit
#include "ptx.cuh"            // defines: ptx_cp_async_*, ptx_fence_proxy_async_shared, ptx_wgmma_*
#include "wgmma.cuh"          // defines: wgmma_desc, wgmma_sw128_offset

// Why attention_forward_wgmma cannot run here (head size HS); nullptr when it can.
inline const char* attention_wgmma_problem(const CudaContext& ctx, int HS) {
    if (sizeof(floatX) != 2) return "the wgmma attention is in the bf16 build only";
    if (HS != 64) return "the wgmma attention takes head size 64 only (a 128-byte row)";
    if (ctx.props.major != 9) return "the wgmma attention needs sm_90 (a Hopper) and a build for sm_90a";
    return nullptr;
}

#ifdef ENABLE_BF16
constexpr int WG_ATT_ROWS = 64, WG_ATT_THREADS = 128;  // queries (and keys) a tile; a warpgroup's threads
constexpr uint32_t WG_ATT_TILE = 64 * 128;              // bytes of a 64 x 64 tile
// Q (WG tiles), then two stages of K and V, and 1 KB of alignment slack
constexpr size_t wg_att_fwd_smem(int WG) { return 1024 + (WG + 4) * (size_t)WG_ATT_TILE; }
// offsets inside the tiles and a row's 64 columns stay int (the lines that say int-bound(wg_att_tile))
static_assert(8 * WG_ATT_TILE < (1u << 20), "tile offsets");  // int-bound: wg_att_tile

// the copies of rows r0..r0 + 64 TILES - 1 of src (row stride ld) into TILES 64 x 64 tiles, one
// after the other (so row r at r x 128 bytes, as one tile of 64 TILES rows) in the 128-byte
// swizzle, 16 bytes a cp.async by THREADS threads; rows at or past T are zeros (their source
// address row T-1's)
template <int TILES, int THREADS>
__device__ inline void wg_att_copy_tile(unsigned char* dst, const floatX* src, size_t ld, int r0, int T) {
    for (int idx = threadIdx.x; idx < TILES * WG_ATT_ROWS * 8; idx += THREADS) {
        const int r = idx / 8, u = idx % 8, row = r0 + r;
        ptx_cp_async_16_zfill(dst + wgmma_sw128_offset(r, 8 * u), src + (size_t)min(row, T - 1) * ld + 8 * u,  // int-bound(wg_att_tile)
                              row < T ? 16 : 0);
    }
}

// WG warpgroups a block, each its own 64 queries of the block's 64 WG, the key tiles shared
template <int HS, int WG>
__global__ void __launch_bounds__(WG_ATT_THREADS * WG)
attention_forward_wgmma_kernel(floatX* out, float* lse, const floatX* qkv, int T, int NH, int NKV, unsigned kv_magic) {
    static_assert(HS == 64, "head size 64: a 128-byte row");
    static_assert(WG == 1 || WG == 2, "one or two warpgroups");
    constexpr int THREADS = WG_ATT_THREADS * WG, ROWS = WG_ATT_ROWS * WG;
    extern __shared__ float4 wg_att_smem4[];
    unsigned char* raw = reinterpret_cast<unsigned char*>(wg_att_smem4);
    // the tiles on the swizzle's 1024-byte pattern: Q (WG tiles), then stage s's K at WG + 2s and V at WG + 1 + 2s
    const uint32_t raw_addr = ptx_shared_address(raw), base = (raw_addr + 1023u) & ~1023u;
    unsigned char* tiles = raw + (base - raw_addr);
    const int qt = (T + ROWS - 1) / ROWS - 1 - blockIdx.x;  // heaviest (last) tiles first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const AttHeads hd = att_heads(h, att_kv_head(h, NH, NKV, kv_magic), NH, NKV, HS);
    const floatX* rows = qkv + (size_t)b * T * hd.ld;
    const int q0 = qt * ROWS;
    const int wg = threadIdx.x / WG_ATT_THREADS;  // this thread's warpgroup: queries q0 + 64 wg..
    const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float scale2 = 1.4426950408889634f / sqrtf((float)HS);  // scores in base 2

    unsigned char* kv_tiles = tiles + WG * WG_ATT_TILE;  // int-bound(wg_att_tile)
    wg_att_copy_tile<WG, THREADS>(tiles, rows + hd.q, hd.ld, q0, T);
    wg_att_copy_tile<1, THREADS>(kv_tiles, rows + hd.k, hd.ld, 0, T);
    wg_att_copy_tile<1, THREADS>(kv_tiles + WG_ATT_TILE, rows + hd.v, hd.ld, 0, T);
    ptx_cp_async_commit();
    float o[32], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int v = 0; v < 32; v++) o[v] = 0.0f;
    // element v of a thread's D fragment: row 16 warp + g + 8 ((v >> 1) & 1), column 8 (v >> 2) + 2t + (v & 1)
    const int row0 = q0 + WG_ATT_ROWS * wg + 16 * warp + g;  // this thread's rows: row0 and row0 + 8
    const uint32_t q_addr = base + wg * WG_ATT_TILE, kv_base = base + WG * WG_ATT_TILE;
    const int last_tile = (q0 + ROWS - 1) / WG_ATT_ROWS;      // key tiles up to the block's diagonal
    const int wg_last = (q0 + WG_ATT_ROWS * (wg + 1) - 1) / WG_ATT_ROWS;  // and this warpgroup's

    for (int j = 0; j <= last_tile; j++) {
        ptx_cp_async_wait<0>();          // this thread's copies of tile j
        ptx_fence_proxy_async_shared();  // seen by wgmma's reads
        __syncthreads();                 // everyone's; and the other stage (tile j-1) is read
        if (j < last_tile) {
            unsigned char* next = kv_tiles + 2 * ((j + 1) & 1) * WG_ATT_TILE;  // int-bound(wg_att_tile)
            wg_att_copy_tile<1, THREADS>(next, rows + hd.k, hd.ld, (j + 1) * WG_ATT_ROWS, T);
            wg_att_copy_tile<1, THREADS>(next + WG_ATT_TILE, rows + hd.v, hd.ld, (j + 1) * WG_ATT_ROWS, T);
            ptx_cp_async_commit();
        }
        if (j > wg_last) continue;  // every key of the tile after this warpgroup's rows (warpgroup-uniform)
        const uint32_t k_addr = kv_base + 2 * (j & 1) * WG_ATT_TILE, v_addr = k_addr + WG_ATT_TILE;
        // S = Q K^T, 16 head columns a step
        float s[32];
        ptx_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
            ptx_wgmma_m64n64k16_bf16_f32_ss<0, 0>(s, wgmma_desc(q_addr + 32 * ks, 16, 1024, WGMMA_SWIZZLE_128B),
                                                  wgmma_desc(k_addr + 32 * ks, 16, 1024, WGMMA_SWIZZLE_128B), ks > 0);
        ptx_wgmma_commit_group();
        ptx_wgmma_wait_group<0>();
        // scale; mask keys after the row (the diagonal tile only); online softmax
        const int k0 = j * WG_ATT_ROWS;
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int v = 0; v < 32; v++) {
            const int i = (v >> 1) & 1, key = k0 + 8 * (v >> 2) + 2 * t + (v & 1);
            const float x = j < wg_last || key <= row0 + 8 * i ? s[v] * scale2 : -INFINITY;
            s[v] = x;
            mx[i] = fmaxf(mx[i], x);
        }
        float corr[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
            const float m_new = fmaxf(m[i], mx[i]);  // key 0 is every row's: finite from the first tile
            corr[i] = exp2f(m[i] - m_new);
            m[i] = m_new;
        }
#pragma unroll
        for (int v = 0; v < 32; v++) {
            const int i = (v >> 1) & 1;
            s[v] = exp2f(s[v] - m[i]);
            sum[i] += s[v];
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 1);
            sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 2);
            l[i] = l[i] * corr[i] + sum[i];
        }
#pragma unroll
        for (int v = 0; v < 32; v++) o[v] *= corr[(v >> 1) & 1];
        // O += P V, 16 keys a step: P's A fragment of keys 16ks.. is S's column blocks 2ks, 2ks+1
        uint32_t pa[4][4];
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
#pragma unroll
            for (int r = 0; r < 4; r++) pa[ks][r] = mma_pack_floats(s[8 * ks + 2 * r], s[8 * ks + 2 * r + 1]);
        ptx_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
            ptx_wgmma_m64n64k16_bf16_f32_rs<1>(o, pa[ks], wgmma_desc(v_addr + 2048 * ks, 0, 1024, WGMMA_SWIZZLE_128B), 1);
        ptx_wgmma_commit_group();
        ptx_wgmma_wait_group<0>();
    }

    // O /= l; lse in natural log
    const float inv[2] = {1.0f / l[0], 1.0f / l[1]};
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = row0 + 8 * i;
        if (r >= T) continue;
        floatX* dst = out + ((size_t)b * T + r) * C + h * HS + 2 * t;  // int-bound(att_channels)
#pragma unroll
        for (int jb = 0; jb < 8; jb++)
            *reinterpret_cast<uint32_t*>(dst + 8 * jb) =  // int-bound(wg_att_tile)
                mma_pack_floats(o[4 * jb + 2 * i] * inv[i], o[4 * jb + 2 * i + 1] * inv[i]);
        if (t == 0) lse[((size_t)b * NH + h) * T + r] = (m[i] + log2f(l[i])) * 0.6931471805599453f;
    }
}

// The same contract as attention_forward_gqa (attention.cuh): out (B,T,NH*HS), lse (B,NH,T).
// WG: warpgroups a block (1: 64 queries, 2: 128 sharing each key tile).
template <int WG = 1>
inline void attention_forward_wgmma(const CudaContext& ctx, floatX* out, float* lse, const floatX* qkv, int B, int T,
                                    int NH, int NKV, int HS) {
    attention_check(B, T, NH, NKV, HS, out, qkv, qkv);
    CHECK(lse != nullptr, "lse must be given");
    const char* problem = attention_wgmma_problem(ctx, HS);
    CHECK(problem == nullptr, "%s (head size %d, sm_%d%d)", problem, HS, ctx.props.major, ctx.props.minor);
    const AttHeadMap hm = att_head_map(NH, NKV);
    constexpr int rows = WG_ATT_ROWS * WG;  // queries a block
    dim3 grid((unsigned)ceil_div(T, rows), NH, B);
    const size_t smem = wg_att_fwd_smem(WG);
    attention_mma_smem_limit(ctx, attention_forward_wgmma_kernel<64, WG>, smem, "attention forward (wgmma)");
    attention_forward_wgmma_kernel<64, WG><<<grid, WG_ATT_THREADS * WG, smem, ctx.stream>>>(out, lse, qkv, T, NH, NKV,
                                                                                             hm.kv_magic);
    CHECK_LAUNCH();
}
#endif  // ENABLE_BF16
