// attention_wgmma.cuh: causal attention on Hopper's warpgroup MMA (wgmma, sm_90a; issue 23,
// dev/results/NOTES.md (b)), attention_mma.cuh's forward and two-kernel backward with their
// products moved from mma.sync to wgmma. A first step, checked by dev/cuda/attention_wgmma
// against the CPU reference and timed beside attention_mma.cuh's; the trainers take it under
// -ak 3 (attention_chosen.cuh) where an H200 measured it faster (2026-11-28: the forward at head
// size 64, the backward at 128), not by default.
// defines: attention_forward_wgmma, attention_backward_wgmma, attention_wgmma_problem
//
// Forward: a block is one warpgroup (4 warps) per (64-query tile, head, batch), heaviest tiles
// first, or two (WG = 2: 128 queries, each warpgroup its own 64, sharing every key tile's
// loads). Q, and each 64-key tile's K and V (double-buffered, cp.async as attention_mma.cuh's),
// sit in shared memory in the 128-byte swizzle (wgmma.cuh: 64 columns, one 128-byte row, a
// tile; head size 128 takes two, each product summing or splitting over them). Per key tile up
// to the diagonal:
//   S (64 x 64, fp32) = Q K^T: four wgmma.m64n64k16 from descriptors, both operands K-major
//     (Q's rows and K's rows run along the head); S then sits as wgmma's D: warp w holds rows
//     16w.., as mma.m16n8k16's C;
//   the mask on the diagonal tile, the online softmax per row (a row's 64 scores in a quad's 4
//     lanes: two shuffles), O rescaled;
//   O (64 x 64) += P V: four wgmma with P from registers (the S fragments rounded to bf16 are
//     wgmma's A fragments, as mma.m16n8k16's C makes its A) and V from its tile, N-major (V's
//     rows run along the head, the product's n).
// Or (KN = 128, head size 64, one warpgroup; dev/cuda/attention_wgmma's variant until a GPU
// times it) key tiles of 128: S (64 x 128) by four wgmma.m64n128k16, O += P V by eight.
// Backward (below, head size 64 or 128): a dK/dV kernel per (64 WG keys, key/value head)
// streaming Q and dO, and a dQ kernel per (64 WG queries, head) streaming K and V: 4 + 3 products
// (64 x 64 x HS, four wgmma a 64-column chunk) a pair of tiles, as attention_mma.cuh's; or (a
// variant at head size 64, dq_accum) the dK/dV kernel alone, adding each key tile's dS K to an
// fp32 dQ by atomics: 5 products.
// The forward and the dQ kernel issue each key tile's last product (P V, dS K) one step late,
// beside the next tile's first ones: the order flash-attention 3's intra-warpgroup overlap
// needs. That overlap itself (both groups in flight, the softmax running while the tensor cores
// work; in the dK/dV kernel, P^T made while dP^T runs) was a variant here until 2026-11-28: on
// the H200 it changed nothing, within 2% either way, forward and backward
// (dev/results/2026-11-28_gpu_h200_wgmma.md), and it was removed. The next steps would be
// flash-attention 3's ping-pong of two warpgroups and its producer warp with TMA. Every result
// element has one writer and every sum a fixed order: bitwise reproducible (but the variant's dQ).
// Shared memory (1 KB of it alignment slack), WG = 1 or 2: forward 41 or 49 KB (head size 128:
// 81 or 97 KB; key tiles of 128: 73 KB), dK/dV 50 or 66 KB (58 with dQ by atomics; head size
// 128: 98 or 130 KB), dQ 57 or 73 KB (113 or 145 KB).
#pragma once
#include <cstdint>
#include <type_traits>
#include "common.cuh"         // defines: floatX, CudaContext, CHECK, CHECK_LAUNCH, ceil_div, LOG2E
#include "attention.cuh"      // defines: attention_check, att_heads, att_kv_head, att_head_map
#include "attention_mma.cuh"  // defines: mma_pack_floats, attention_mma_smem_limit, att_dkv_next_step
#include "ptx.cuh"            // defines: ptx_cp_async_*, ptx_fence_proxy_async_shared, ptx_wgmma_*, ptx_ex2_approx_ftz
#include "wgmma.cuh"          // defines: wgmma_desc, wgmma_sw128_offset

// *has = 1 where the code running is sm_90a's (wgmma exists in it), 0 where it is another
// target's (built for plain sm_90, say: ptx.cuh's wgmma would trap). The emulated GPU has wgmma.
__global__ void attention_wgmma_probe_kernel(int* has) {
#if defined(GPTRAIN_EMU) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
    *has = 1;
#else
    *has = 0;
#endif
}

// Why attention_forward_wgmma and attention_backward_wgmma cannot run here (head size HS);
// nullptr when they can. The first call on a Hopper launches the probe (one thread, synchronized).
inline const char* attention_wgmma_problem(const CudaContext& ctx, int HS) {
    if (sizeof(floatX) != 2) return "the wgmma attention is in the bf16 build only";
    if (HS != 64 && HS != 128) return "the wgmma attention takes head sizes 64 and 128 only (one or two 128-byte rows)";
    if (ctx.props.major != 9) return "the wgmma attention needs sm_90 (a Hopper)";
    static int built = -1;  // the probe's answer (one device a process)
    if (built < 0) {
        int* d_has;
        CHECK_CUDA(cudaMalloc(&d_has, sizeof(int)));
        attention_wgmma_probe_kernel<<<1, 1, 0, ctx.stream>>>(d_has);
        CHECK_LAUNCH();
        CHECK_CUDA(cudaMemcpyAsync(&built, d_has, sizeof(int), cudaMemcpyDeviceToHost, ctx.stream));
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        CHECK_CUDA(cudaFree(d_has));
    }
    if (built == 0) return "this build has no sm_90a code, which wgmma needs (cuda.mk builds it on a Hopper)";
    return nullptr;
}

#ifdef ENABLE_BF16
constexpr int WG_ATT_ROWS = 64, WG_ATT_THREADS = 128;  // queries (and keys) a tile; a warpgroup's threads
constexpr uint32_t WG_ATT_TILE = 64 * 128;              // bytes of a 64 x 64 tile
// Q (WG tiles a 64-column chunk of the head), then two stages of K and V (KN / 64 tiles a chunk
// each), and 1 KB of alignment slack
constexpr size_t wg_att_fwd_smem(int HS, int WG, int KN = 64) {
    return 1024 + (WG + 4 * (KN / 64)) * (size_t)(HS / 64) * WG_ATT_TILE;
}
// offsets inside the tiles and a row's columns stay int (the lines that say int-bound(wg_att_tile))
static_assert(16 * WG_ATT_TILE < (1u << 20), "tile offsets");  // int-bound: wg_att_tile

// the tiles' base: the first 1024-byte boundary in the dynamic shared memory (the swizzle's
// pattern), as a generic pointer and a shared-window address
struct WgAttTiles {
    unsigned char* ptr;
    uint32_t addr;
};
__device__ __forceinline__ WgAttTiles wg_att_tiles() {
    extern __shared__ float4 wg_att_smem4[];
    unsigned char* raw = reinterpret_cast<unsigned char*>(wg_att_smem4);
    const uint32_t raw_addr = ptx_shared_address(raw), base = (raw_addr + 1023u) & ~1023u;
    return WgAttTiles{raw + (base - raw_addr), base};
}

// the copies of rows r0..r0 + 64 TILES - 1 of src (row stride ld, HS columns) into tiles of 64
// rows x 64 columns in the 128-byte swizzle: column chunk c (columns 64c..) of row r at
// c TILES x 8 KB + r x 128 bytes (each chunk as one tile of 64 TILES rows), 16 bytes a cp.async
// by THREADS threads; rows at or past T are zeros (their source address row T-1's)
template <int TILES, int THREADS, int HS = 64>
__device__ inline void wg_att_copy_tile(unsigned char* dst, const floatX* src, size_t ld, int r0, int T) {
    constexpr int UNITS = HS / 8;  // 16-byte units a row
    for (int idx = threadIdx.x; idx < TILES * WG_ATT_ROWS * UNITS; idx += THREADS) {
        const int r = idx / UNITS, u = idx % UNITS, row = r0 + r;
        unsigned char* d = dst + (u / 8) * TILES * WG_ATT_TILE + wgmma_sw128_offset(r, 8 * (u % 8));  // int-bound(wg_att_tile)
        ptx_cp_async_16_zfill(d, src + (size_t)min(row, T - 1) * ld + 8 * u, row < T ? 16 : 0);  // int-bound(wg_att_tile)
    }
}

// the A fragments (16 k a step, KS steps) of a 64 x 16 KS accumulator's rows, rounded to bf16
template <int KS = 4>
__device__ __forceinline__ void wg_att_frag_to_a(uint32_t a[KS][4], const float d[8 * KS]) {
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
#pragma unroll
        for (int r = 0; r < 4; r++) a[ks][r] = mma_pack_floats(d[8 * ks + 2 * r], d[8 * ks + 2 * r + 1]);
}

// a D fragment (d[4 jb..4 jb + 3]: columns 8 jb..) as mma_store_rows's acc[jb][4]
template <int N>
__device__ __forceinline__ const float (*wg_att_blocks(const float (&d)[N]))[4] {
    return reinterpret_cast<const float(*)[4]>(d);
}

// d (64 x N) = A B^T over a head of 64 CH: A's 64 rows and B's N (64 or 128) run along the head
// (K-major, 128-byte swizzle), its 64-column chunk c at shared-window addresses a + c a_chunk and
// b + c b_chunk, four k steps of 16 a chunk
template <int CH = 1, int N = 64>
__device__ __forceinline__ void wg_att_rows_times_rows(float d[N / 2], uint32_t a, uint32_t b, uint32_t a_chunk = 0,
                                                       uint32_t b_chunk = 0) {
#pragma unroll
    for (int c = 0; c < CH; c++) {
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            const uint32_t ak = a + c * a_chunk + 32 * ks, bk = b + c * b_chunk + 32 * ks;
            ptx_wgmma_m64nNk16_bf16_f32_ss<N, 0, 0>(d, wgmma_desc(ak, 16, 1024, WGMMA_SWIZZLE_128B),
                                                    wgmma_desc(bk, 16, 1024, WGMMA_SWIZZLE_128B), c > 0 || ks > 0);
        }
    }
}

// d (64 x 64) += A M over 16 KS k: A from registers (wg_att_frag_to_a), M's rows the k (N-major,
// the tile at shared-window address m, its rows 128 bytes apart), 16 rows a step
template <int KS = 4>
__device__ __forceinline__ void wg_att_regs_times_tile(float d[32], const uint32_t a[KS][4], uint32_t m) {
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
        ptx_wgmma_m64n64k16_bf16_f32_rs<1>(d, a[ks], wgmma_desc(m + 2048 * ks, 0, 1024, WGMMA_SWIZZLE_128B), 1);
}

// A step of the one-late pipelines (the forward's P V, the dQ kernel's dS K): issue_last issues
// the last tile's product into the accumulator, issue_next this key tile's products, each waited
// for before the next is issued, and work makes this tile's operand of its own late product from
// the first products' results. Overlapping them (issue_next, issue_last, wait for the first
// group, work) would leave work beside the last tile's product, which reads work's A registers:
// the emulator stops a program that writes them before the wait. Each lambda fences its own
// operands.
template <class Next, class Last, class Work>
__device__ __forceinline__ void wg_att_late_step(Next issue_next, Last issue_last, Work work) {
    issue_last();
    ptx_wgmma_wait_group<0>();
    issue_next();
    ptx_wgmma_wait_group<0>();
    work();
}

// WG warpgroups a block, each its own 64 queries of the block's 64 WG, the key tiles shared.
// Head size 64 or 128 (CH = 1 or 2 chunks of 64 columns, each its own tiles): S sums the chunks'
// products, and O's chunk c (o[32c..]) is P times V's chunk c.
// Key tile j's O += P V is issued one step late, at step j + 1, beside S of tile j + 1: O is
// rescaled by tile j + 1's correction after it (the same operations on O in the same order as
// rescaling first and adding P V then: bitwise the same result). Each group is waited for before
// the next is issued (wg_att_late_step). The previous tile's P stays in registers (pa) and, so
// that K of tile j and V of tile j - 1 are resident together, copy K j + 1 and V j as one cp.async
// group at step j (into the stages of K j - 1 and V j - 2, read by then), two stages as before.
// Every wgmma is on a block-uniform path (a warpgroup-dependent one makes ptxas serialize them,
// C7520): the first and last steps are peeled, and a warpgroup past its diagonal takes the
// block's last key tile wholly masked rather than skipping it (P = 0: O and l unchanged, bit for
// bit; it would only wait at the barrier otherwise).
// (At head size 64, at most 128 registers: 16 warps an SM.)
// KN = 128 (head size 64, one warpgroup): key tiles of 128, flash-attention 3's width at head size
// 64. S = Q K^T is four wgmma.m64n128k16 (each B operand 128 keys: half the instructions, waits
// and barriers a key of 64's), the softmax takes a row's 128 scores at once (one rescale of O a
// 128 keys), and O += P V eight m64n64k16 (P's 8 k steps). 64 scores, 32 of P and 32 of O a
// thread: at most 168 registers, 3 blocks an SM (12 warps; 73 KB of shared memory each). Its
// diagonal tile is the one holding the block's last query: for half the blocks the diagonal's
// second 64 keys are all masked (computed, then P = 0).
template <int HS, int WG, int KN = 64>
__global__ void __launch_bounds__(WG_ATT_THREADS * WG, KN == 128 ? 3 : HS == 64 ? 4 / WG : 1)
attention_forward_wgmma_kernel(floatX* out, float* lse, const floatX* qkv, int T, int NH, int NKV, unsigned kv_magic) {
    static_assert(HS == 64 || HS == 128, "head size 64 or 128: one or two 128-byte rows");
    static_assert(WG == 1 || WG == 2, "one or two warpgroups");
    static_assert(KN == 64 || (KN == 128 && HS == 64 && WG == 1), "key tiles of 128 at head size 64, one warpgroup");
    constexpr int THREADS = WG_ATT_THREADS * WG, ROWS = WG_ATT_ROWS * WG, CH = HS / 64, KT = KN / 64, KS = KN / 16;
    constexpr uint32_t KV = CH * KT * WG_ATT_TILE;  // bytes of a key tile's K (or V), its chunks one after the other
    constexpr uint32_t QB = WG * CH * WG_ATT_TILE;  // bytes of Q
    // Q (chunk c of warpgroup w's at (c WG + w) tiles), then stage s's K at WG CH + 2s CH KT tiles
    // and V CH KT on (K's and V's chunk c KT tiles into theirs)
    const WgAttTiles tl = wg_att_tiles();
    const int qt = (T + ROWS - 1) / ROWS - 1 - blockIdx.x;  // heaviest (last) tiles first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const AttHeads hd = att_heads(h, att_kv_head(h, NH, NKV, kv_magic), NH, NKV, HS);
    const floatX* rows = qkv + (size_t)b * T * hd.ld;
    const int q0 = qt * ROWS;
    const int wg = threadIdx.x / WG_ATT_THREADS;  // this thread's warpgroup: queries q0 + 64 wg..
    const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float scale2 = LOG2E / sqrtf((float)HS);  // scores in base 2

    unsigned char* kv_tiles = tl.ptr + QB;  // int-bound(wg_att_tile)
    // key tile j's K (part 0) or V (part 1) into its stage, j & 1
    auto copy_part = [&](int part, int j) {
        const floatX* src = rows + (part == 0 ? hd.k : hd.v);
        wg_att_copy_tile<KT, THREADS, HS>(kv_tiles + (2 * (j & 1) + part) * KV, src, hd.ld, j * KN, T);  // int-bound(wg_att_tile)
    };
    wg_att_copy_tile<WG, THREADS, HS>(tl.ptr, rows + hd.q, hd.ld, q0, T);
    copy_part(0, 0);
    ptx_cp_async_commit();
    float o[32 * CH], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int v = 0; v < 32 * CH; v++) o[v] = 0.0f;
    uint32_t pa[KS][4];  // the last tile's P, rounded: the A fragments of its O += P V
    // element v of a thread's D fragment: row 16 warp + g + 8 ((v >> 1) & 1), column 8 (v >> 2) + 2t + (v & 1)
    const int row0 = q0 + WG_ATT_ROWS * wg + 16 * warp + g;  // this thread's rows: row0 and row0 + 8
    const uint32_t q_addr = tl.addr + wg * WG_ATT_TILE, kv_base = tl.addr + QB;
    const int last_tile = (q0 + ROWS - 1) / KN;                  // key tiles up to the block's diagonal
    const int wg_last = (q0 + WG_ATT_ROWS * (wg + 1) - 1) / KN;  // and this warpgroup's

    // step j's wait and barrier (K j and V j - 1 everyone's; K j - 1 and V j - 2, whose stages
    // the copies take, read), then K j + 1's and V j's copies
    auto step_tiles = [&](int j) {
        ptx_cp_async_wait<0>();          // this thread's copies
        ptx_fence_proxy_async_shared();  // seen by wgmma's reads
        __syncthreads();
        if (j <= last_tile) {
            if (j < last_tile) copy_part(0, j + 1);
            copy_part(1, j);
            ptx_cp_async_commit();
        }
    };
    // S = Q K^T of key tile j, 16 head columns a step; and O += P V of key tile j, P in pa
    auto issue_s = [&](float (&s)[KN / 2], int j) {
        ptx_wgmma_fence_operands(s);
        ptx_wgmma_fence();
        wg_att_rows_times_rows<CH, KN>(s, q_addr, kv_base + 2 * (j & 1) * KV, WG * WG_ATT_TILE, KT * WG_ATT_TILE);
        ptx_wgmma_commit_group();
        ptx_wgmma_fence_operands(s);
    };
    auto issue_pv = [&](int j) {
        const uint32_t v_addr = kv_base + (2 * (j & 1) + 1) * KV;
        ptx_wgmma_fence_operands(o);
        ptx_wgmma_fence_operands(pa);
        ptx_wgmma_fence();
#pragma unroll
        for (int c = 0; c < CH; c++) wg_att_regs_times_tile<KS>(o + 32 * c, pa, v_addr + c * KT * WG_ATT_TILE);
        ptx_wgmma_commit_group();
        ptx_wgmma_fence_operands(o);
        ptx_wgmma_fence_operands(pa);
    };
    // mask keys after the row (this warpgroup's diagonal tile, and every key of a tile past it:
    // P = 0 there, O and l unchanged bit for bit; a warpgroup-uniform branch, no test per element
    // on the other tiles); online softmax, m the scaled maximum (base 2); corr, O's rescale
    auto softmax = [&](float (&s)[KN / 2], int j, float (&corr)[2]) {
        if (j >= wg_last) {
            const int k0 = j * KN;
#pragma unroll
            for (int v = 0; v < KN / 2; v++)
                if (k0 + 8 * (v >> 2) + 2 * t + (v & 1) > row0 + 8 * ((v >> 1) & 1)) s[v] = -INFINITY;
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int v = 0; v < KN / 2; v++) mx[(v >> 1) & 1] = fmaxf(mx[(v >> 1) & 1], s[v]);
        float sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
            const float m_new = fmaxf(m[i], mx[i] * scale2);  // key 0 is every row's: finite from the first tile
            corr[i] = ptx_ex2_approx_ftz(m[i] - m_new);
            m[i] = m_new;
        }
#pragma unroll
        for (int v = 0; v < KN / 2; v++) {
            const int i = (v >> 1) & 1;
            s[v] = ptx_ex2_approx_ftz(fmaf(s[v], scale2, -m[i]));  // one fused multiply-add and the unit's exp2
            sum[i] += s[v];
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 1);
            sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 2);
            l[i] = l[i] * corr[i] + sum[i];
        }
    };

    // step 0: S of key tile 0 (O is zero: no rescale)
    float s[KN / 2], corr[2];
    step_tiles(0);
    issue_s(s, 0);
    ptx_wgmma_wait_group<0>();
    ptx_wgmma_fence_operands(s);
    softmax(s, 0, corr);
    wg_att_frag_to_a<KS>(pa, s);  // P's A fragment of keys 16ks.. is S's column blocks 2ks, 2ks+1
    // step j: S of key tile j and P V of tile j - 1, every warpgroup the block's key tiles (no
    // wgmma on a path only some take)
    for (int j = 1; j <= last_tile; j++) {
        step_tiles(j);
        wg_att_late_step([&] { issue_s(s, j); }, [&] { issue_pv(j - 1); },
                         [&] {
                             ptx_wgmma_fence_operands(s);
                             softmax(s, j, corr);
                         });
        ptx_wgmma_fence_operands(o);  // P V's, complete
#pragma unroll
        for (int v = 0; v < 32 * CH; v++) o[v] *= corr[(v >> 1) & 1];
        wg_att_frag_to_a<KS>(pa, s);
    }
    // the last step: P V of the last key tile
    step_tiles(last_tile + 1);
    issue_pv(last_tile);
    ptx_wgmma_wait_group<0>();
    ptx_wgmma_fence_operands(o);

    // O /= l; lse in natural log
    const float inv[2] = {1.0f / l[0], 1.0f / l[1]};
    mma_store_rows<8 * CH>(out + (size_t)b * T * C + h * HS, C, wg_att_blocks(o), row0 - g, 0, T, inv, g, t);  // int-bound(att_channels)
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = row0 + 8 * i;
        if (t == 0 && r < T) lse[((size_t)b * NH + h) * T + r] = (m[i] + log2f(l[i])) * 0.6931471805599453f;
    }
}

// The same contract as attention_forward_gqa (attention.cuh): out (B,T,NH*HS), lse (B,NH,T),
// head size 64 or 128. WG: warpgroups a block (1: 64 queries, 2: 128 sharing each key tile);
// KN: keys a tile (64, or 128 at head size 64 with one warpgroup)
template <int WG = 1, int KN = 64>
inline void attention_forward_wgmma(const CudaContext& ctx, floatX* out, float* lse, const floatX* qkv, int B, int T,
                                    int NH, int NKV, int HS) {
    attention_check(B, T, NH, NKV, HS, out, qkv, qkv);
    CHECK(lse != nullptr, "lse must be given");
    const char* problem = attention_wgmma_problem(ctx, HS);
    CHECK(problem == nullptr, "%s (head size %d, sm_%d%d)", problem, HS, ctx.props.major, ctx.props.minor);
    const AttHeadMap hm = att_head_map(NH, NKV);
    constexpr int rows = WG_ATT_ROWS * WG;  // queries a block
    dim3 grid((unsigned)ceil_div(T, rows), NH, B);
    const size_t smem = wg_att_fwd_smem(HS, WG, KN);
#define ATT_WGMMA_FWD(H)                                                                                        \
    attention_mma_smem_limit(ctx, attention_forward_wgmma_kernel<H, WG, KN>, smem, "attention forward (wgmma)"); \
    attention_forward_wgmma_kernel<H, WG, KN><<<grid, WG_ATT_THREADS * WG, smem, ctx.stream>>>(out, lse, qkv, T, NH, \
                                                                                               NKV, hm.kv_magic)
    if constexpr (KN == 128) {
        CHECK(HS == 64, "the wgmma forward's 128-key tiles are for head size 64 (not %d)", HS);
        ATT_WGMMA_FWD(64);
    } else if (HS == 64) {
        ATT_WGMMA_FWD(64);
    } else {
        ATT_WGMMA_FWD(128);
    }
#undef ATT_WGMMA_FWD
    CHECK_LAUNCH();
}

// ---------------------------------------------------------------------------------------
// backward, as attention_mma.cuh's two-kernel one (D = dO . O by attention.cuh's preprocess,
// P = exp2(s scale2 - lse2) rebuilt from the forward's lse, dS = P (dP - D)), its products on
// wgmma. Tiles as the forward's: 64 x 64 in the 128-byte swizzle, the streamed ones
// double-buffered; a thread's fragment element v is (row 16 warp + g + 8 ((v >> 1) & 1),
// column 8 (v >> 2) + 2t + (v & 1)), and its P (or dS) rounded is the A fragment of the next
// product (wg_att_frag_to_a).

// K, V (WG tiles a 64-column chunk of the head each), two stages of (Q, dO), with dQ the dS^T
// tile, two stages of (lse2, D) for 64 queries, 1 KB of slack
constexpr size_t wg_att_dkv_smem(int HS, int WG, bool DQ = false) {
    return 1024 + ((2 * WG + 4) * (size_t)(HS / 64) + (DQ ? 1 : 0)) * WG_ATT_TILE + sizeof(float) * 2 * 2 * 64;
}
// Q, dO (WG tiles a chunk each), three stages of K and two of V, 1 KB of slack
constexpr size_t wg_att_dq_smem(int HS, int WG) { return 1024 + (2 * WG + 5) * (size_t)(HS / 64) * WG_ATT_TILE; }

// dK and dV of 64 WG keys of a key/value head (warpgroup w its own 64), summed over the query
// heads of its group and, for each, the 64-query tiles from the block's diagonal on (a step: a
// (query head, query tile), counted as attention_backward_dkv_mma_kernel counts them):
//   S^T = K Q^T and dP^T = V dO^T (eight wgmma from descriptors, one group);
//   P^T, and dS^T = P^T (dP^T - D), with each column's (query's) lse2 and D from shared memory;
//   dV += P^T dO and dK += dS^T Q (eight wgmma, P^T and dS^T from registers, dO and Q N-major).
// A warpgroup skips the query tiles wholly before its keys. dK *= 1/sqrt(HS) at the end.
// Head size 128 (CH = 2 chunks of 64 columns, each its own tiles, as the forward's): S^T and dP^T
// sum the chunks' products, and dV's (dK's) chunk c is P^T (dS^T) times dO's (Q's) chunk c: 128
// accumulators a thread, 2 blocks an SM.
// (At head size 64, one warpgroup, at most 168 registers: 3 blocks an SM.)
// DQ (one warpgroup, head size 64; attention_backward_wgmma with dq_accum): also this key tile's
// part of dQ, dS K, as flash-attention 2 and 3 do (5 products a pair of tiles instead of 7): dS^T
// is written to a shared tile (row = key), which is dS's A operand M-major, K's tile N-major; the
// fp32 result is added to dq_accum (B, T, C) by float2 atomics, in whatever order blocks get there.
template <int HS, int WG, bool DQ = false>
__global__ void __launch_bounds__(WG_ATT_THREADS * WG, HS == 64 && WG == 1 && !DQ ? 3 : 1)
attention_backward_dkv_wgmma_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                                    const float* D, int T, int NH, int NKV, int group, float* dq_accum) {
    static_assert(HS == 64 || HS == 128, "head size 64 or 128: one or two 128-byte rows");
    static_assert(WG == 1 || WG == 2, "one or two warpgroups");
    static_assert(!DQ || (WG == 1 && HS == 64), "dQ's tile is written and read by the whole block: one warpgroup");
    constexpr int THREADS = WG_ATT_THREADS * WG, KEYS = WG_ATT_ROWS * WG, Q = WG_ATT_ROWS, CH = HS / 64;
    const WgAttTiles tl = wg_att_tiles();
    // K at tile 0 (chunk c of warpgroup w's at c WG + w), V at WG CH, stage s's Q at 2 WG CH + 2s CH
    // (its chunk c at c on) and dO CH on, (DQ) dS^T, then the statistics: [stage][lse2 64 | D 64]
    constexpr int STAGE0 = 2 * WG * CH, DS_TILE = STAGE0 + 4 * CH;
    float* stats = reinterpret_cast<float*>(tl.ptr + (DS_TILE + (DQ ? 1 : 0)) * WG_ATT_TILE);  // int-bound(wg_att_tile)
    const int kt = blockIdx.x;  // the first key tiles see the most queries: launched first
    const int kvh = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const AttHeads kv = att_heads(kvh * group, kvh, NH, NKV, HS);
    const floatX* rows = qkv + (size_t)b * T * kv.ld;
    const floatX* drows = dout + (size_t)b * T * C;
    const int k0 = kt * KEYS;
    const int wg = threadIdx.x / WG_ATT_THREADS;
    const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wk0 = k0 + Q * wg;           // this warpgroup's keys wk0..wk0 + 63
    const int key0 = wk0 + 16 * warp + g;  // this thread's rows: keys key0 and key0 + 8
    const float scale = 1.0f / sqrtf((float)HS), scale2 = LOG2E * scale;
    const int steps = group * ((T - k0 + Q - 1) / Q);  // (query head, query tile) pairs
    auto copy_q_do = [&](int stage, int h, int q0) {
        unsigned char* dst = tl.ptr + (STAGE0 + 2 * CH * stage) * WG_ATT_TILE;  // int-bound(wg_att_tile)
        wg_att_copy_tile<1, THREADS, HS>(dst, rows + h * HS, kv.ld, q0, T);  // int-bound(att_channels)
        wg_att_copy_tile<1, THREADS, HS>(dst + CH * WG_ATT_TILE, drows + h * HS, C, q0, T);  // int-bound(att_channels)
    };
    // thread r < 64 keeps lse2 of the step's query r, thread 64 + r its D; queries past T get 0
    // (their Q and dO rows are zeros, and P is masked there)
    const bool stats_thread = threadIdx.x < 2 * Q;
    auto stat_of = [&](int h, int q0) -> float {
        const int qi = q0 + (threadIdx.x & 63);
        if (qi >= T) return 0.0f;
        const size_t at = ((size_t)b * NH + h) * T + qi;
        return threadIdx.x >= Q ? D[at] : lse[at] * LOG2E;
    };

    wg_att_copy_tile<WG, THREADS, HS>(tl.ptr, rows + kv.k, kv.ld, k0, T);
    wg_att_copy_tile<WG, THREADS, HS>(tl.ptr + WG * CH * WG_ATT_TILE, rows + kv.v, kv.ld, k0, T);  // int-bound(wg_att_tile)
    int h = kvh * group, q0 = k0;  // step j's
    copy_q_do(0, h, q0);
    ptx_cp_async_commit();
    if (stats_thread) stats[threadIdx.x] = stat_of(h, q0);
    float dk[32 * CH], dv[32 * CH];
#pragma unroll
    for (int v = 0; v < 32 * CH; v++) dk[v] = dv[v] = 0.0f;
    const uint32_t k_addr = tl.addr + wg * WG_ATT_TILE, v_addr = k_addr + WG * CH * WG_ATT_TILE;

    for (int j = 0; j < steps; j++) {
        const int st = j & 1;
        int h_next = h, q0_next = q0;
        att_dkv_next_step(h_next, q0_next, k0, T, Q);
        ptx_cp_async_wait<0>();          // this thread's copies of step j
        ptx_fence_proxy_async_shared();  // seen by wgmma's reads
        __syncthreads();                 // everyone's; step j-1 (its stage and statistics) is read
        float next_stat = 0.0f;
        if (j + 1 < steps) {
            copy_q_do(st ^ 1, h_next, q0_next);
            ptx_cp_async_commit();
            if (stats_thread) next_stat = stat_of(h_next, q0_next);  // a load in flight, stored at the step's end
        }
        if (q0 >= wk0) {  // a query tile wholly before this warpgroup's keys is masked (warpgroup-uniform)
            const uint32_t q_addr = tl.addr + (STAGE0 + 2 * CH * st) * WG_ATT_TILE, do_addr = q_addr + CH * WG_ATT_TILE;
            // the mask on the diagonal tile and on the last (queries past T)
            const bool edge = q0 == wk0 || q0 + Q > T;
            const float* lse2_t = stats + st * 2 * Q;  // int-bound(wg_att_tile)
            const float* D_t = lse2_t + Q;
            float p[32], ds[32];
            uint32_t pa[4][4], dsa[4][4];
            auto make_p = [&] {  // P^T from S^T, then its A fragments
#pragma unroll
                for (int v = 0; v < 32; v++)
                    p[v] = ptx_ex2_approx_ftz(fmaf(p[v], scale2, -lse2_t[8 * (v >> 2) + 2 * t + (v & 1)]));
                if (edge) {  // warpgroup-uniform: 0 where keys pass queries, and at queries past T
#pragma unroll
                    for (int v = 0; v < 32; v++) {
                        const int qi = q0 + 8 * (v >> 2) + 2 * t + (v & 1), key = key0 + 8 * ((v >> 1) & 1);
                        if (key > qi || qi >= T) p[v] = 0.0f;
                    }
                }
                wg_att_frag_to_a(pa, p);
            };
            auto make_ds = [&] {  // dS^T = P^T (dP^T - D) from dP^T, then its A fragments
#pragma unroll
                for (int v = 0; v < 32; v++) ds[v] = p[v] * (ds[v] - D_t[8 * (v >> 2) + 2 * t + (v & 1)]);
                wg_att_frag_to_a(dsa, ds);
            };
            auto issue_dv = [&] {  // dV += P^T dO
#pragma unroll
                for (int c = 0; c < CH; c++) wg_att_regs_times_tile(dv + 32 * c, pa, do_addr + c * WG_ATT_TILE);
            };
            ptx_wgmma_fence_operands(p);
            ptx_wgmma_fence_operands(ds);
            ptx_wgmma_fence();
            wg_att_rows_times_rows<CH>(p, k_addr, q_addr, WG * WG_ATT_TILE, WG_ATT_TILE);  // S^T = K Q^T
            wg_att_rows_times_rows<CH>(ds, v_addr, do_addr, WG * WG_ATT_TILE, WG_ATT_TILE);  // dP^T = V dO^T
            ptx_wgmma_commit_group();
            ptx_wgmma_wait_group<0>();
            ptx_wgmma_fence_operands(p);
            ptx_wgmma_fence_operands(ds);
            make_p();
            make_ds();
            [[maybe_unused]] float dq[DQ ? 32 : 1];
            if constexpr (DQ) {
                // dS^T into its tile: dsa[ks][r] holds row 16 warp + g + 8 (r & 1), columns
                // 16 ks + 8 (r >> 1) + 2t and one on
                unsigned char* ds_tile = tl.ptr + DS_TILE * WG_ATT_TILE;  // int-bound(wg_att_tile)
#pragma unroll
                for (int ks = 0; ks < 4; ks++)
#pragma unroll
                    for (int r = 0; r < 4; r++)
                        *reinterpret_cast<uint32_t*>(ds_tile + wgmma_sw128_offset(16 * warp + g + 8 * (r & 1),
                                                                                  16 * ks + 8 * (r >> 1) + 2 * t)) =
                            dsa[ks][r];
                ptx_fence_proxy_async_shared();  // the stores above, seen by wgmma's reads
                __syncthreads();                 // everyone's (the block is one warpgroup)
            }
            ptx_wgmma_fence();
            issue_dv();
#pragma unroll
            for (int c = 0; c < CH; c++) wg_att_regs_times_tile(dk + 32 * c, dsa, q_addr + c * WG_ATT_TILE);  // dK += dS^T Q
            if constexpr (DQ) {  // dQ = dS K, 16 keys a step: dS M-major (dS^T's rows), K N-major
                const uint32_t ds_addr = tl.addr + DS_TILE * WG_ATT_TILE;
#pragma unroll
                for (int ks = 0; ks < 4; ks++) {
                    const uint64_t a = wgmma_desc(ds_addr + 2048 * ks, 0, 1024, WGMMA_SWIZZLE_128B);
                    ptx_wgmma_m64n64k16_bf16_f32_ss<1, 1>(
                        dq, a, wgmma_desc(k_addr + 2048 * ks, 0, 1024, WGMMA_SWIZZLE_128B), ks > 0);
                }
            }
            ptx_wgmma_commit_group();
            ptx_wgmma_wait_group<0>();
            if constexpr (DQ) {  // rows: queries q0 + 16 warp..
                float* dq_head = dq_accum + (size_t)b * T * C + h * HS;  // int-bound(att_channels)
                mma_atomic_add_rows<8>(dq_head, C, wg_att_blocks(dq), q0 + 16 * warp, 0, T, g, t);
            }
        }
        // the other stage's statistics were last read in step j-1; read again after the next barrier
        if (j + 1 < steps && stats_thread) stats[(st ^ 1) * 2 * Q + threadIdx.x] = next_stat;  // int-bound(wg_att_tile)
        h = h_next;
        q0 = q0_next;
    }
    floatX* dst = dqkv + (size_t)b * T * kv.ld;
    const float k_mult[2] = {scale, scale}, v_mult[2] = {1.0f, 1.0f};
    mma_store_rows<8 * CH>(dst + kv.k, kv.ld, wg_att_blocks(dk), key0 - g, 0, T, k_mult, g, t);
    mma_store_rows<8 * CH>(dst + kv.v, kv.ld, wg_att_blocks(dv), key0 - g, 0, T, v_mult, g, t);
}

// dQ of 64 WG queries of a head (warpgroup w its own 64), over the key tiles up to the block's
// diagonal: S = Q K^T and dP = dO V^T (eight wgmma from descriptors), dS = P (dP - D) with the
// thread's two rows' lse2 and D in registers, dQ += dS K (four wgmma, dS from registers, K
// N-major). dQ *= 1/sqrt(HS) at the end. Head size 128 as the dK/dV kernel's: S and dP sum two
// chunks' products, dQ's chunk c is dS times K's chunk c.
// Key tile j's dQ += dS K is issued one step late, at step j + 1, beside S and dP of tile j + 1
// (as the forward's P V): K in three stages, so that K j - 1 is resident beside tile j's K and V
// and tile j + 1's copies, V in two. The same products on dQ in the same order as issuing it at
// once: bit for bit. Each group is waited for before the next is issued (wg_att_late_step).
// Every wgmma is on a block-uniform path: the first and last steps are peeled, and a warpgroup
// past its diagonal takes the block's last key tile wholly masked (dS = 0).
template <int HS, int WG>
__global__ void __launch_bounds__(WG_ATT_THREADS * WG)
attention_backward_dq_wgmma_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                                   const float* D, int T, int NH, int NKV, unsigned kv_magic) {
    static_assert(HS == 64 || HS == 128, "head size 64 or 128: one or two 128-byte rows");
    static_assert(WG == 1 || WG == 2, "one or two warpgroups");
    constexpr int THREADS = WG_ATT_THREADS * WG, ROWS = WG_ATT_ROWS * WG, CH = HS / 64;
    constexpr uint32_t KV = CH * WG_ATT_TILE;  // bytes of a key tile's K (or V), its chunks one after the other
    const WgAttTiles tl = wg_att_tiles();
    // Q at tile 0 (chunk c of warpgroup w's at c WG + w), dO at WG CH, then key tile j's K at
    // stage j % 3 of three, and its V at stage j % 2 of two after them
    const int qt = (T + ROWS - 1) / ROWS - 1 - blockIdx.x;  // heaviest (last) tiles first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const AttHeads hd = att_heads(h, att_kv_head(h, NH, NKV, kv_magic), NH, NKV, HS);
    const floatX* rows = qkv + (size_t)b * T * hd.ld;
    const int q0 = qt * ROWS;
    const int wg = threadIdx.x / WG_ATT_THREADS;
    const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int row0 = q0 + WG_ATT_ROWS * wg + 16 * warp + g;  // this thread's rows: row0 and row0 + 8
    const float scale = 1.0f / sqrtf((float)HS), scale2 = LOG2E * scale;
    unsigned char* k_tiles = tl.ptr + 2 * WG * KV;  // int-bound(wg_att_tile)
    unsigned char* v_tiles = k_tiles + 3 * KV;      // int-bound(wg_att_tile)
    auto copy_kv = [&](int j) {
        wg_att_copy_tile<1, THREADS, HS>(k_tiles + (j % 3) * KV, rows + hd.k, hd.ld, j * WG_ATT_ROWS, T);  // int-bound(wg_att_tile)
        wg_att_copy_tile<1, THREADS, HS>(v_tiles + (j & 1) * KV, rows + hd.v, hd.ld, j * WG_ATT_ROWS, T);  // int-bound(wg_att_tile)
    };

    wg_att_copy_tile<WG, THREADS, HS>(tl.ptr, rows + hd.q, hd.ld, q0, T);
    const floatX* drows = dout + (size_t)b * T * C + h * HS;  // int-bound(att_channels)
    wg_att_copy_tile<WG, THREADS, HS>(tl.ptr + WG * KV, drows, C, q0, T);  // int-bound(wg_att_tile)
    copy_kv(0);
    ptx_cp_async_commit();
    float lse2[2], Dr[2];  // rows past T: any finite value (their dQ is never stored)
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int qi = row0 + 8 * i;
        const size_t at = ((size_t)b * NH + h) * T + qi;
        lse2[i] = qi < T ? lse[at] * LOG2E : 0.0f;
        Dr[i] = qi < T ? D[at] : 0.0f;
    }
    float dq[32 * CH];
#pragma unroll
    for (int v = 0; v < 32 * CH; v++) dq[v] = 0.0f;
    const uint32_t q_addr = tl.addr + wg * WG_ATT_TILE, do_addr = q_addr + WG * KV;
    const uint32_t k_base = tl.addr + 2 * WG * KV, v_base = k_base + 3 * KV;
    const int last_tile = (q0 + ROWS - 1) / WG_ATT_ROWS;                  // key tiles up to the block's diagonal
    const int wg_last = (q0 + WG_ATT_ROWS * (wg + 1) - 1) / WG_ATT_ROWS;  // and this warpgroup's

    // step j's wait and barrier (tile j everyone's; K j - 2's and V j - 1's stages, which the
    // copies take, read), then tile j + 1's copies
    auto step_tiles = [&](int j) {
        ptx_cp_async_wait<0>();
        ptx_fence_proxy_async_shared();
        __syncthreads();
        if (j < last_tile) {
            copy_kv(j + 1);
            ptx_cp_async_commit();
        }
    };
    // S = Q K^T and dP = dO V^T of key tile j; and dQ += dS K of key tile j, dS in dsa
    uint32_t dsa[4][4];
    auto issue_s_dp = [&](float (&s)[32], float (&dp)[32], int j) {
        const uint32_t k_addr = k_base + (j % 3) * KV, v_addr = v_base + (j & 1) * KV;
        ptx_wgmma_fence_operands(s);
        ptx_wgmma_fence_operands(dp);
        ptx_wgmma_fence();
        wg_att_rows_times_rows<CH>(s, q_addr, k_addr, WG * WG_ATT_TILE, WG_ATT_TILE);
        wg_att_rows_times_rows<CH>(dp, do_addr, v_addr, WG * WG_ATT_TILE, WG_ATT_TILE);
        ptx_wgmma_commit_group();
        ptx_wgmma_fence_operands(s);
        ptx_wgmma_fence_operands(dp);
    };
    auto issue_dq = [&](int j) {
        const uint32_t k_addr = k_base + (j % 3) * KV;
        ptx_wgmma_fence_operands(dq);
        ptx_wgmma_fence_operands(dsa);
        ptx_wgmma_fence();
#pragma unroll
        for (int c = 0; c < CH; c++) wg_att_regs_times_tile(dq + 32 * c, dsa, k_addr + c * WG_ATT_TILE);
        ptx_wgmma_commit_group();
        ptx_wgmma_fence_operands(dq);
        ptx_wgmma_fence_operands(dsa);
    };
    // dS = P (dP - D) into s, 0 after the row (this warpgroup's diagonal tile, and every key of
    // a tile past it: a warpgroup-uniform branch, no test per element on the other tiles)
    auto make_ds = [&](float (&s)[32], const float (&dp)[32], int j) {
#pragma unroll
        for (int v = 0; v < 32; v++) {
            const int i = (v >> 1) & 1;
            s[v] = ptx_ex2_approx_ftz(fmaf(s[v], scale2, -lse2[i])) * (dp[v] - Dr[i]);
        }
        if (j >= wg_last) {
            const int k0 = j * WG_ATT_ROWS;
#pragma unroll
            for (int v = 0; v < 32; v++)
                if (k0 + 8 * (v >> 2) + 2 * t + (v & 1) > row0 + 8 * ((v >> 1) & 1)) s[v] = 0.0f;
        }
    };

    // step 0: S and dP of key tile 0
    float s[32], dp[32];
    step_tiles(0);
    issue_s_dp(s, dp, 0);
    ptx_wgmma_wait_group<0>();
    ptx_wgmma_fence_operands(s);
    ptx_wgmma_fence_operands(dp);
    make_ds(s, dp, 0);
    wg_att_frag_to_a(dsa, s);
    // step j: S and dP of key tile j, dS K of tile j - 1
    for (int j = 1; j <= last_tile; j++) {
        step_tiles(j);
        wg_att_late_step([&] { issue_s_dp(s, dp, j); }, [&] { issue_dq(j - 1); },
                         [&] {
                             ptx_wgmma_fence_operands(s);
                             ptx_wgmma_fence_operands(dp);
                             make_ds(s, dp, j);
                         });
        ptx_wgmma_fence_operands(dq);  // dS K's, complete
        wg_att_frag_to_a(dsa, s);
    }
    // the last step: dS K of the last key tile
    issue_dq(last_tile);
    ptx_wgmma_wait_group<0>();
    ptx_wgmma_fence_operands(dq);
    const float mult[2] = {scale, scale};
    mma_store_rows<8 * CH>(dqkv + (size_t)b * T * hd.ld + hd.q, hd.ld, wg_att_blocks(dq), row0 - g, 0, T, mult, g, t);
}

// The same contract as attention_backward_gqa (attention.cuh): dqkv (B,T,(NH+2NKV)*HS)
// overwritten, from dout, qkv and the forward's out and lse; D in ctx.workspace. The dK/dV
// kernel, then the dQ kernel; bitwise reproducible. WG: warpgroups a block (64 keys or queries
// each). DQ_ATOMIC (WG = 1; dq_accum, B*T*C floats, the caller's, zeroed here): no dQ kernel, the
// dK/dV kernel adding each key tile's part of dQ by atomics (as attention_backward_mma's -ak 2):
// not bitwise reproducible. A template argument, so that the trainers, which take the two
// kernels, do not compile this one.
template <int WG = 1, bool DQ_ATOMIC = false>
inline void attention_backward_wgmma(const CudaContext& ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                                     const floatX* out, const float* lse, int B, int T, int NH, int NKV, int HS,
                                     float* dq_accum = nullptr) {
    static_assert(!DQ_ATOMIC || WG == 1, "dQ by atomics takes one warpgroup a block");
    attention_check(B, T, NH, NKV, HS, dqkv, dout, qkv);
    CHECK(!DQ_ATOMIC || HS == 64, "attention_backward_wgmma: dQ by atomics takes head size 64 only (HS %d)", HS);
    CHECK(is_aligned16(out) && lse != nullptr, "out=%p lse=%p", (const void*)out, (const void*)lse);
    CHECK((dq_accum != nullptr) == DQ_ATOMIC, "attention_backward_wgmma: dq_accum %p with DQ_ATOMIC %d",
          (void*)dq_accum, (int)DQ_ATOMIC);
    const char* problem = attention_wgmma_problem(ctx, HS);
    CHECK(problem == nullptr, "%s (head size %d, sm_%d%d)", problem, HS, ctx.props.major, ctx.props.minor);
    const float* D = attention_backward_preprocess(ctx, out, dout, B, T, NH, HS);
    const AttHeadMap hm = att_head_map(NH, NKV);
    constexpr int rows = WG_ATT_ROWS * WG;
    const dim3 grid_kv((unsigned)ceil_div(T, rows), NKV, B), grid_q((unsigned)ceil_div(T, rows), NH, B);
    const size_t n = (size_t)B * T * NH * HS;
    if (DQ_ATOMIC) CHECK_CUDA(cudaMemsetAsync(dq_accum, 0, n * sizeof(float), ctx.stream));
    auto launch = [&](auto head_size) {
        constexpr int H = decltype(head_size)::value;
        const size_t smem_kv = wg_att_dkv_smem(H, WG, DQ_ATOMIC), smem_q = wg_att_dq_smem(H, WG);
        attention_mma_smem_limit(ctx, attention_backward_dkv_wgmma_kernel<H, WG, DQ_ATOMIC>, smem_kv,
                                 "attention backward dk/dv (wgmma)");
        attention_backward_dkv_wgmma_kernel<H, WG, DQ_ATOMIC><<<grid_kv, WG_ATT_THREADS * WG, smem_kv, ctx.stream>>>(
            dqkv, dout, qkv, lse, D, T, NH, NKV, hm.group, dq_accum);
        CHECK_LAUNCH();
        if (DQ_ATOMIC) {
            attention_dq_finish_kernel<<<(unsigned)ceil_div(n, 256), 256, 0, ctx.stream>>>(
                dqkv, dq_accum, n, NH * HS, (size_t)(NH + 2 * NKV) * HS, 1.0f / sqrtf((float)HS));
        } else {
            attention_mma_smem_limit(ctx, attention_backward_dq_wgmma_kernel<H, WG>, smem_q,
                                     "attention backward dq (wgmma)");
            attention_backward_dq_wgmma_kernel<H, WG><<<grid_q, WG_ATT_THREADS * WG, smem_q, ctx.stream>>>(
                dqkv, dout, qkv, lse, D, T, NH, NKV, hm.kv_magic);
        }
        CHECK_LAUNCH();
    };
    if constexpr (DQ_ATOMIC) {
        launch(std::integral_constant<int, 64>{});
    } else if (HS == 64) {
        launch(std::integral_constant<int, 64>{});
    } else {
        launch(std::integral_constant<int, 128>{});
    }
}
#endif  // ENABLE_BF16
