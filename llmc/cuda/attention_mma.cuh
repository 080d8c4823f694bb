// attention_mma.cuh: causal attention on tensor cores, bf16 build only: the same contracts as
// attention_forward and attention_backward in attention.cuh, with every product (Q K^T, P V,
// dO V^T, dS K, P^T dO, dS^T Q) an mma.sync m16n8k16 of bf16 tiles accumulated in fp32, laid
// out as flash-attention 2 (Dao, 2023) does it. The bf16 trainer's attention wherever it
// applies (attention_chosen.cuh: -ak -1, the default; -ak 1 insists, -ak 0 takes attention.cuh's;
// -ak 2 is -ak 1 with the one-kernel backward below): it passes PyTorch's debug states on an
// H200 and on the emulated GPU (llmc/emu). dev/cuda/attention.cu checks it against the CPU
// reference and times it next to the CUDA-core kernels.
// defines: attention_forward_mma(_gqa), attention_backward_mma(_gqa), attention_mma_supported,
//          attention_mma_problem, attention_mma_dkv_warp_keys, att_dkv_next_step
// Grouped-query attention (Llama) as attention.cuh's: K and V of query head h read in place
// from its key/value head's columns of the qkv row (att_heads), no repeated copy.
//
// Tiles of 64 rows (queries or keys) x HS sit in shared memory as bf16, rows padded to HS+8:
// a row is then an odd number of 16-byte units, so the 8 row addresses of one ldmatrix phase
// fall in 8 different bank groups. Every mma operand comes from shared memory by ldmatrix
// (ptx.cuh): .x4 gives an A fragment, or the B fragments of two 8-column blocks; the operand
// whose k runs down the tile's rows (V in P V, K in dS K, dO and Q in dV and dK) is read with
// .trans, so K, V, Q and dO are stored once, row-major as they come, and serve both ways.
//
// The tiles a block streams through (K and V in the forward and dq kernels, Q and dO in the
// dk/dv kernel) are double-buffered with cp.async: at the top of step j each thread waits for
// its own copies of tile j, one __syncthreads makes tile j visible and tells that every warp is
// done with the other buffer (tile j-1), then tile j+1's copies are issued into it and stay in
// flight while tile j is computed. Rows at or past T are zero-filled by the copy (src-size 0).
//
// Forward: a block of 4 warps per (64-query tile, head, batch), heaviest tiles first. Warp w
// owns query rows 16w..16w+15. Per 64-key tile up to the diagonal: S (16 x 64, fp32) = Q K^T,
// Q's A fragments read from its tile each time (as flash-attention 2 does; the variant that
// holds them in registers, QREG, is the trainer's at HS=64, where an H200 ran it 5% faster); scale (base 2, so exp2 replaces exp);
// the causal mask on the diagonal tile only; online softmax per row (a row's 64 scores sit in
// the 4 lanes of a quad: max and sum by two shuffles); O = O * correction + P V, the S
// fragments of two adjacent 8-key blocks being, rounded to bf16, the A fragment of a 16-key
// chunk. Finally O /= l and lse = (m + log2 l) ln 2, the natural-log lse of the scaled scores.
//
// Backward, no atomics: D = dO . O by attention.cuh's preprocess kernel, then
//   dk, dv: a block of 8 warps per (64-key tile, key/value head), over the query heads of the
//     head's group (one without GQA) and for each the query tiles from the diagonal on, dk and
//     dv summed over all of them in registers (the Q/dO pipeline runs across the heads).
//     Phase 1: warp w computes S^T = K Q^T and dP^T = V dO^T for keys 16(w%4).. and queries
//     32(w/4).. (32 fp32 registers), P = exp2(s scale2 - lse2), dS = P (dP - D), and writes
//     P^T and dS^T as bf16 to shared memory. Phase 2: warp w accumulates dV += P^T dO and
//     dK += dS^T Q for keys 16(w%4).. and head columns (HS/2)(w/4).. . Each thread holds HS/2
//     accumulators instead of HS, and K and V are read from shared memory, not held: the
//     kernel that held both (4 warps, each 16 keys over the whole head) spilled at HS=128
//     with 255 registers and held 232 at HS=64. At head sizes 48 and 64, where three blocks fit an
//     SM (an H100/H200), the same with 4 warps of 32 keys: each fragment loaded feeds two row
//     blocks, a third fewer shared-memory reads (attention_dkv_mma_tile says more).
//   dq: a block of 4 warps per 64-query tile, over the key tiles up to the diagonal, each in
//     two halves of 32 keys: S = Q K^T and dP = dO V^T for the half (Q and dO read from their
//     tiles; at HS=64 their fragments held in registers instead, QREG), dS, dq += dS K (K read
//     .trans). Halves keep S and dP at 16 registers each.
// Every output element has one writer, and every sum runs in a fixed order (tiles ascending,
// 16-wide k chunks ascending, the mma's k), so results are bitwise reproducible.
// (attention_backward_mma with dq_accum, -ak 2: no dq kernel, each dk/dv block adding its dS K to an fp32
// dq by atomics, as flash-attention 2 does; 5 tile products instead of 7, and not bitwise
// reproducible. attention_backward_mma_launch<true>, dev/cuda/attention's variant on sm_90: the
// same by the TMA unit's bulk reductions from shared memory, as flash-attention 3 does.)
// Shared memory at HS=64 / 128: forward 5 tiles, 46,080 / 87,040 bytes; dq 6 tiles, 55,296 /
// 104,448; dk/dv 6 tiles and P^T, dS^T, 74,752 / 123,904: above the 48 KB default mostly, so
// the launchers raise the kernels' limit. ptxas (CUDA 13.0, sm_90), no spills at any head size;
// registers at HS=64: forward 104, dq 103, dk/dv 126 (32 keys a warp: 168, its __launch_bounds__'
// cap for 3 blocks); at HS=128: 128, 130, 128.
#pragma once
#include <cstdint>
#include <type_traits>  // std::true_type, std::false_type: the masked and unmasked copies of a loop
#include "common.cuh"      // defines: floatX, CudaContext, CHECK, CHECK_LAUNCH, ceil_div, LOG2E
#include "attention.cuh"   // defines: attention_check, attention_backward_preprocess, ATTENTION_CASES_16_TO_64/128
#include "ptx.cuh"         // defines: ptx_mma_m16n8k16_bf16_f32, ptx_ldmatrix_x4(_trans), ptx_cp_async_*, ptx_ex2_*

// Head sizes the tensor-core kernels take (the others stay on attention.cuh's).
// (those ATTENTION_CASES_16_TO_128 compiles: 112 is not among them)
inline bool attention_mma_supported(int HS) { return HS % 16 == 0 && HS >= 16 && HS <= 128 && HS != 112; }

// Why the tensor-core attention (-ak 1, 2) cannot run here; nullptr when it can.
inline const char* attention_mma_problem(const CudaContext& ctx, int head_size) {
    if (sizeof(floatX) != 2) return "the tensor-core attention is in the bf16 build only";
    if (!attention_mma_supported(head_size))
        return "the tensor-core attention needs a head size that is a multiple of 16, up to 128 (not 112)";
    if (ctx.props.major < 8) return "the tensor-core attention needs sm_80 or newer";
    return nullptr;
}

#ifdef ENABLE_BF16
constexpr int MMA_ATT_ROWS = 64;        // queries per tile
constexpr int MMA_ATT_KEYS = 64;        // keys per tile
constexpr int MMA_ATT_THREADS = 128;    // forward and dq: 4 warps of 16 queries
constexpr int MMA_ATT_DKV_THREADS = 256;  // dk/dv: 8 warps, 4 of 16 keys x 2 halves (of queries, of the head)
constexpr int MMA_ATT_DKV_W32_THREADS = 128;  // its variant: 4 warps, 2 of 32 keys x 2 halves
constexpr int MMA_ATT_PLD = MMA_ATT_ROWS + 8;  // row stride of the P^T and dS^T tiles

// Indices into shared memory, and into a thread's fragment arrays, stay int: the largest
// buffer (dk/dv's at HS=128, 123,904 bytes) is far below 2^31 elements; the lines that rely on
// it say int-bound(mma_tile).
static_assert(MMA_ATT_KEYS * (128 + 8) * 8 < (1 << 20), "shared-memory indices");  // int-bound: mma_tile

// bytes of one 64-row tile of head size HS in shared memory (rows padded to HS+8)
constexpr size_t mma_att_tile_bytes(int HS) { return (size_t)MMA_ATT_KEYS * (HS + 8) * sizeof(floatX); }
// forward: two stages of (K, V), Q (WM tiles of it); dq: the same and dO
constexpr size_t mma_att_fwd_smem(int HS, int WM = 1) { return (size_t)(4 + WM) * mma_att_tile_bytes(HS); }
constexpr size_t mma_att_dq_smem(int HS) { return 6 * mma_att_tile_bytes(HS); }
// dk/dv: K, V, two stages of (Q, dO), P^T, dS^T, two stages of (lse2, D); with dq by bulk
// reductions (dev/cuda/attention's variant) the dq tile in fp32 after them, each warp's 16 rows of
// HS/2 floats padded to HS/2 + 8 (so a row starts 16-byte aligned and the fragment stores spread
// over the banks)
__host__ __device__ constexpr int mma_att_dq_stage_ld(int HS) { return HS / 2 + 8; }
constexpr size_t mma_att_dkv_smem(int HS, bool dq_bulk = false) {
    return 6 * mma_att_tile_bytes(HS) + 2 * (size_t)MMA_ATT_KEYS * MMA_ATT_PLD * sizeof(floatX) +
           4 * (size_t)MMA_ATT_ROWS * sizeof(float) +
           (dq_bulk ? (size_t)(MMA_ATT_DKV_THREADS / 32) * 16 * mma_att_dq_stage_ld(HS) * sizeof(float) : 0);
}

// Every product is ptx_mma_m16n8k16_bf16_f32 (ptx.cuh): D += A B for one 16x8x16 tile, bf16 in,
// fp32 accumulate. Fragments, with g = lane / 4 and c = lane % 4, two bf16 per 32-bit register,
// the lower column (or k) in the low half:
//   A (16 x 16, rows x k): a0 (g, 2c), a1 (g+8, 2c), a2 (g, 2c+8), a3 (g+8, 2c+8)
//   B (16 x 8, k x n):     b0 (k 2c, n g), b1 (k 2c+8, n g)
//   D (16 x 8, fp32):      d0, d1 (g, 2c and 2c+1), d2, d3 (g+8, 2c and 2c+1)

// two floats as two bf16 in one register, lo in the low half
__device__ inline uint32_t mma_pack_floats(float lo, float hi) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
           ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}

// Issues the copies of dst (64, HS+8) bf16 = rows r0..r0+63 of src (row stride ld elements),
// 16 bytes a copy, spread over THREADS threads; rows at or past T become zeros (the copy reads
// nothing from them, but its source address must still be a valid aligned one: row T-1's).
// The caller commits and waits.
template <int HS, int THREADS>
__device__ inline void mma_att_copy_tile(floatX* dst, const floatX* src, size_t ld, int r0, int T) {
    constexpr int LD = HS + 8, CHUNKS = HS / 8;
    for (int idx = threadIdx.x; idx < MMA_ATT_KEYS * CHUNKS; idx += THREADS) {
        const int r = idx / CHUNKS, col = (idx % CHUNKS) * 8, row = r0 + r;
        ptx_cp_async_16_zfill(dst + r * LD + col, src + (size_t)min(row, T - 1) * ld + col, row < T ? 16 : 0);  // int-bound(mma_tile)
    }
}

// ldmatrix addressing, for lane l of a row-major tile with row stride LD (elements):
// A fragment of the 16 x 16 block at (row r0, column k0): matrices (r0, k0), (r0+8, k0),
// (r0, k0+8), (r0+8, k0+8), so lane l gives row r0 + l%16 at column k0 + 8(l/16)
template <int LD>
__device__ inline void mma_ldsm_a(uint32_t a[4], const floatX* tile, int r0, int k0, int lane) {
    ptx_ldmatrix_x4(a, tile + (r0 + (lane & 15)) * LD + k0 + 8 * (lane >> 4));  // int-bound(mma_tile)
}

// A fragment of the 16 x 16 block at (row r0, column k0) of A, from a tile whose row k holds
// column k of A (A = M^T: dS from dk/dv's dS^T): transposed 8x8 loads of M's (k0, r0), (k0, r0+8),
// (k0+8, r0), (k0+8, r0+8), which are A's (r0, k0), (r0+8, k0), (r0, k0+8), (r0+8, k0+8)
template <int LD>
__device__ inline void mma_ldsm_a_trans(uint32_t a[4], const floatX* tile, int r0, int k0, int lane) {
    ptx_ldmatrix_x4_trans(a, tile + (k0 + (lane & 7) + ((lane >> 4) << 3)) * LD + r0 + (((lane >> 3) & 1) << 3));  // int-bound(mma_tile)
}

// B fragments of two 8-column blocks n0.. and n0+8.. for the k chunk k0..k0+15, from a tile
// whose row n holds column n of B (B = M^T: K in Q K^T, Q in K Q^T): b[0], b[1] for block n0,
// b[2], b[3] for n0+8; matrices (n0, k0), (n0, k0+8), (n0+8, k0), (n0+8, k0+8)
template <int LD>
__device__ inline void mma_ldsm_b_rows(uint32_t b[4], const floatX* tile, int n0, int k0, int lane) {
    ptx_ldmatrix_x4(b, tile + (n0 + (lane & 7) + ((lane >> 4) << 3)) * LD + k0 + (((lane >> 3) & 1) << 3));  // int-bound(mma_tile)
}

// B fragments of two 8-column blocks n0.. and n0+8.. for the k chunk k0..k0+15, from a tile
// whose row k holds row k of B (V in P V, K in dS K): transposed 8x8 loads, matrices (k0, n0),
// (k0+8, n0), (k0, n0+8), (k0+8, n0+8); one block (.x2) when only n0 is left
template <int LD>
__device__ inline void mma_ldsm_b_cols(uint32_t b[4], const floatX* tile, int k0, int n0, int lane) {
    ptx_ldmatrix_x4_trans(b, tile + (k0 + (lane & 15)) * LD + n0 + 8 * (lane >> 4));  // int-bound(mma_tile)
}
template <int LD>
__device__ inline void mma_ldsm_b_cols1(uint32_t b[2], const floatX* tile, int k0, int n0, int lane) {
    ptx_ldmatrix_x2_trans(b, tile + (k0 + (lane & 15)) * LD + n0);  // lanes 16..31: not read; int-bound(mma_tile)
}

// s (16MI x 8NB, MI row blocks of 16) += A (16MI x 16, k chunk k0: one fragment a block) M^T,
// where rows n0..n0+8NB-1 of the tile M are the columns of s. Each B fragment loaded feeds the
// MI row blocks: MI = 2 halves the loads a product takes.
template <int LD, int NB, int MI>
__device__ inline void mma_chunks_times_rows(float s[MI][NB][4], const uint32_t a[MI][4], const floatX* M, int n0,
                                             int k0, int lane) {
    static_assert(NB % 2 == 0, "8-column blocks go in pairs");
#pragma unroll
    for (int nb = 0; nb < NB; nb += 2) {
        uint32_t b[4];
        mma_ldsm_b_rows<LD>(b, M, n0 + nb * 8, k0, lane);
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
            ptx_mma_m16n8k16_bf16_f32(s[mi][nb], a[mi], b[0], b[1]);
            ptx_mma_m16n8k16_bf16_f32(s[mi][nb + 1], a[mi], b[2], b[3]);
        }
    }
}
// one row block
template <int LD, int NB>
__device__ inline void mma_chunk_times_rows(float s[NB][4], const uint32_t a[4], const floatX* M, int n0, int k0,
                                            int lane) {
    mma_chunks_times_rows<LD, NB, 1>(reinterpret_cast<float(*)[NB][4]>(s), reinterpret_cast<const uint32_t(*)[4]>(a),
                                     M, n0, k0, lane);
}

// acc (16MI x 8ND) += A (16MI x 16, k chunk k0) M[k0..k0+15][n0..n0+8ND-1], each B fragment
// feeding the MI row blocks
template <int LD, int ND, int MI>
__device__ inline void mma_chunks_times_cols(float acc[MI][ND][4], const uint32_t a[MI][4], const floatX* M, int k0,
                                             int n0, int lane) {
#pragma unroll
    for (int nd = 0; nd + 1 < ND; nd += 2) {
        uint32_t b[4];
        mma_ldsm_b_cols<LD>(b, M, k0, n0 + nd * 8, lane);
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
            ptx_mma_m16n8k16_bf16_f32(acc[mi][nd], a[mi], b[0], b[1]);
            ptx_mma_m16n8k16_bf16_f32(acc[mi][nd + 1], a[mi], b[2], b[3]);
        }
    }
    if (ND % 2 == 1) {
        uint32_t b[2];
        mma_ldsm_b_cols1<LD>(b, M, k0, n0 + (ND - 1) * 8, lane);
#pragma unroll
        for (int mi = 0; mi < MI; mi++) ptx_mma_m16n8k16_bf16_f32(acc[mi][ND - 1], a[mi], b[0], b[1]);
    }
}
// one row block
template <int LD, int ND>
__device__ inline void mma_chunk_times_cols(float acc[ND][4], const uint32_t a[4], const floatX* M, int k0, int n0,
                                            int lane) {
    mma_chunks_times_cols<LD, ND, 1>(reinterpret_cast<float(*)[ND][4]>(acc),
                                     reinterpret_cast<const uint32_t(*)[4]>(a), M, k0, n0, lane);
}

// the A fragment of 16-column chunk t of a 16 x 8NB fp32 accumulator (blocks 2t and 2t+1),
// rounded to bf16: an mma's output layout is its A input layout, two blocks at a time
template <int NB>
__device__ inline void mma_acc_to_a(uint32_t a[4], const float s[NB][4], int t) {
    a[0] = mma_pack_floats(s[2 * t][0], s[2 * t][1]);  // int-bound(mma_tile)
    a[1] = mma_pack_floats(s[2 * t][2], s[2 * t][3]);  // int-bound(mma_tile)
    a[2] = mma_pack_floats(s[2 * t + 1][0], s[2 * t + 1][1]);
    a[3] = mma_pack_floats(s[2 * t + 1][2], s[2 * t + 1][3]);
}

template <int ND>
__device__ inline void mma_zero(float acc[ND][4]) {
#pragma unroll
    for (int nd = 0; nd < ND; nd++) acc[nd][0] = acc[nd][1] = acc[nd][2] = acc[nd][3] = 0.0f;
}

// 16 rows x 8ND columns of fragments, times mult, to global memory (row stride ld) at rows
// row0.., columns col0..; rows at or past T skipped
template <int ND>
__device__ inline void mma_store_rows(floatX* dst, size_t ld, const float acc[ND][4], int row0, int col0, int T,
                                      const float mult[2], int g, int c) {
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = row0 + g + 8 * i;
        if (r >= T) continue;
        floatX* d = dst + (size_t)r * ld + col0 + 2 * c;  // int-bound(mma_tile)
#pragma unroll
        for (int nd = 0; nd < ND; nd++)
            *reinterpret_cast<uint32_t*>(d + nd * 8) =  // int-bound(mma_tile)
                mma_pack_floats(acc[nd][2 * i] * mult[i], acc[nd][2 * i + 1] * mult[i]);
    }
}

// The forward of one tile of 64*WM queries (4 warps of 16*WM rows) against the key tiles up
// to its diagonal. WM = 1 without QREG is attention_forward_mma_kernel below; the others are
// the variants dev/cuda/attention --bench checks against the same reference and times beside
// it (issue 23). WM = 2: each K and V fragment loaded from shared memory feeds two mma, and a
// CTA's key tiles serve twice the queries; QREG: Q's fragments loaded once into registers, not
// at every key tile. The trainer runs <128, 2, false> at head size 128 (attention_forward_mma
// says why).
template <int HS, int WM, bool QREG>
__device__ __forceinline__ void attention_forward_mma_tile(floatX* out, float* lse, const floatX* qkv, int T, int NH,
                                                           int NKV, unsigned kv_magic) {
    static_assert(HS % 16 == 0 && HS <= 128, "head size: a multiple of 16, at most 128");
    static_assert(WM == 1 || WM == 2, "16 or 32 query rows a warp");
    constexpr int ROWS = MMA_ATT_ROWS * WM;  // queries per CTA
    constexpr int LD = HS + 8, TILE = MMA_ATT_KEYS * LD;
    constexpr int KC = HS / 16;           // k chunks of Q K^T
    constexpr int ND = HS / 8;            // 8-column blocks of O
    constexpr int NB = MMA_ATT_KEYS / 8;  // 8-key blocks of S
    static_assert(ND % 2 == 0 && NB % 2 == 0, "8-column blocks go in pairs");
    extern __shared__ float4 mma_att_smem4[];  // float4: 16-byte aligned, as ldmatrix and cp.async need
    floatX* smem = reinterpret_cast<floatX*>(mma_att_smem4);  // stage s: K at 2s TILE, V at (2s+1) TILE
    const floatX* Qs = smem + 4 * TILE;  // WM tiles of 64 rows; int-bound(mma_tile)

    const int qt = (T + ROWS - 1) / ROWS - 1 - blockIdx.x;  // heaviest (last) tiles first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const AttHeads hd = att_heads(h, att_kv_head(h, NH, NKV, kv_magic), NH, NKV, HS);
    const floatX* rows = qkv + (size_t)b * T * hd.ld;
    const int q0 = qt * ROWS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int r0 = warp * 16 * WM;  // this warp's first row in the tile; its m-tile w at r0 + 16w
    const int last_row = q0 + r0 + 16 * WM - 1;
    // scores in base 2: s * log2(e) / sqrt(HS), so exp2 replaces exp
    const float scale2 = LOG2E / sqrtf((float)HS);

    // Q and key tile 0: the loop's first wait and barrier make them everyone's
#pragma unroll
    for (int w = 0; w < WM; w++)
        mma_att_copy_tile<HS, MMA_ATT_THREADS>(smem + (4 + w) * TILE, rows + hd.q, hd.ld, q0 + w * MMA_ATT_ROWS, T);  // int-bound(mma_tile)
    mma_att_copy_tile<HS, MMA_ATT_THREADS>(smem, rows + hd.k, hd.ld, 0, T);
    mma_att_copy_tile<HS, MMA_ATT_THREADS>(smem + TILE, rows + hd.v, hd.ld, 0, T);
    ptx_cp_async_commit();
    float o[WM][ND][4];
    float m[WM][2], l[WM][2];
#pragma unroll
    for (int w = 0; w < WM; w++) {
        mma_zero<ND>(o[w]);
        m[w][0] = m[w][1] = -INFINITY;
        l[w][0] = l[w][1] = 0.0f;
    }
    uint32_t qreg[QREG ? WM : 1][QREG ? KC : 1][4];

    const int last_tile = (q0 + ROWS - 1) / MMA_ATT_KEYS;  // key tiles up to the diagonal
    for (int j = 0; j <= last_tile; j++) {
        ptx_cp_async_wait<0>();  // this thread's copies of tile j
        __syncthreads();         // everyone's; and the other stage (tile j-1) is read
        if (j < last_tile) {
            floatX* next = smem + ((j + 1) & 1) * 2 * TILE;  // int-bound(mma_tile)
            mma_att_copy_tile<HS, MMA_ATT_THREADS>(next, rows + hd.k, hd.ld, (j + 1) * MMA_ATT_KEYS, T);
            mma_att_copy_tile<HS, MMA_ATT_THREADS>(next + TILE, rows + hd.v, hd.ld, (j + 1) * MMA_ATT_KEYS, T);
            ptx_cp_async_commit();
        }
        if constexpr (QREG) {
            if (j == 0) {
#pragma unroll
                for (int w = 0; w < WM; w++)
#pragma unroll
                    for (int kc = 0; kc < KC; kc++) mma_ldsm_a<LD>(qreg[w][kc], Qs, r0 + 16 * w, kc * 16, lane);
            }
        }
        const int k0 = j * MMA_ATT_KEYS;
        if constexpr (WM > 1) {
            if (k0 > last_row) continue;  // every key of this tile is after this warp's rows (warp-uniform)
        }
        const floatX* Ks = smem + (j & 1) * 2 * TILE;  // int-bound(mma_tile)
        const floatX* Vs = Ks + TILE;
        // some key after some row of this warp (with 16 rows a warp: the last tile alone)
        const bool diagonal = WM == 1 ? j == last_tile : k0 + MMA_ATT_KEYS - 1 > q0 + r0;

        // S = Q K^T: each K fragment pair feeds the WM m-tiles
        float s[WM][NB][4];
#pragma unroll
        for (int w = 0; w < WM; w++) mma_zero<NB>(s[w]);
#pragma unroll
        for (int kc = 0; kc < KC; kc++) {
            uint32_t qa[WM][4];
#pragma unroll
            for (int w = 0; w < WM; w++) {
                if constexpr (QREG) {
#pragma unroll
                    for (int e = 0; e < 4; e++) qa[w][e] = qreg[w][kc][e];
                } else {
                    mma_ldsm_a<LD>(qa[w], Qs, r0 + 16 * w, kc * 16, lane);
                }
            }
#pragma unroll
            for (int nb = 0; nb < NB; nb += 2) {
                uint32_t kb[4];
                mma_ldsm_b_rows<LD>(kb, Ks, nb * 8, kc * 16, lane);
#pragma unroll
                for (int w = 0; w < WM; w++) {
                    ptx_mma_m16n8k16_bf16_f32(s[w][nb], qa[w], kb[0], kb[1]);
                    ptx_mma_m16n8k16_bf16_f32(s[w][nb + 1], qa[w], kb[2], kb[3]);
                }
            }
        }
        // the online softmax of the WM m-tiles' rows, in two copies: where keys pass rows -inf on
        // a diagonal tile, and no test per element on the others (a warp-uniform branch)
        auto softmax = [&](auto masked) {
#pragma unroll
            for (int w = 0; w < WM; w++) {
                // element e of block nb: row qi0 + 8 (e >> 1), key k0 + nb*8 + 2c + (e & 1). Keys
                // past T only meet rows past T (never stored).
                const int qi0 = q0 + r0 + 16 * w + g;
                float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
                for (int nb = 0; nb < NB; nb++) {
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        if constexpr (decltype(masked)::value) {
                            if (k0 + nb * 8 + 2 * c + (e & 1) > qi0 + 8 * (e >> 1)) s[w][nb][e] = -INFINITY;
                        }
                        mx[e >> 1] = fmaxf(mx[e >> 1], s[w][nb][e]);
                    }
                }
                // m is in base 2 and scaled (the max of s scale2: the scale is positive, so the max
                // of the scaled scores); key 0 is every row's, so m is finite from the first tile on
                float corr[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
                    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
                    const float m_new = fmaxf(m[w][i], mx[i] * scale2);
                    // 0 on the first tile (which every warp takes: key 0 is every row's), 1 where
                    // this tile masks the row entirely
                    corr[i] = ptx_ex2_approx_ftz(m[w][i] - m_new);
                    m[w][i] = m_new;
                }
                // p = 2^(s scale2 - m): one fused multiply-add and the unit's exp2 an element
#pragma unroll
                for (int nb = 0; nb < NB; nb++) {
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        // masked: 2^-inf = 0
                        const float p = ptx_ex2_approx_ftz(fmaf(s[w][nb][e], scale2, -m[w][e >> 1]));
                        s[w][nb][e] = p;
                        sum[e >> 1] += p;
                    }
                }
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 1);
                    sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 2);
                    l[w][i] = l[w][i] * corr[i] + sum[i];
                }
#pragma unroll
                for (int nd = 0; nd < ND; nd++) {
                    o[w][nd][0] *= corr[0];
                    o[w][nd][1] *= corr[0];
                    o[w][nd][2] *= corr[1];
                    o[w][nd][3] *= corr[1];
                }
            }
        };
        if (diagonal) softmax(std::true_type{});
        else softmax(std::false_type{});
        // O += P V, 16 keys at a time: each V fragment pair feeds the WM m-tiles
#pragma unroll
        for (int t = 0; t < NB / 2; t++) {
            uint32_t pa[WM][4];
#pragma unroll
            for (int w = 0; w < WM; w++) mma_acc_to_a<NB>(pa[w], s[w], t);
#pragma unroll
            for (int nd = 0; nd < ND; nd += 2) {
                uint32_t vb[4];
                mma_ldsm_b_cols<LD>(vb, Vs, t * 16, nd * 8, lane);
#pragma unroll
                for (int w = 0; w < WM; w++) {
                    ptx_mma_m16n8k16_bf16_f32(o[w][nd], pa[w], vb[0], vb[1]);
                    ptx_mma_m16n8k16_bf16_f32(o[w][nd + 1], pa[w], vb[2], vb[3]);
                }
            }
        }
    }

    // O /= l; lse in natural log
#pragma unroll
    for (int w = 0; w < WM; w++) {
        const int qi0 = q0 + r0 + 16 * w + g, qi1 = qi0 + 8;
        const float inv[2] = {1.0f / l[w][0], 1.0f / l[w][1]};
        mma_store_rows<ND>(out + (size_t)b * T * C + h * HS, C, o[w], q0 + r0 + 16 * w, 0, T, inv, g, c);  // int-bound(att_channels)
        if (c == 0) {
            if (qi0 < T) lse[((size_t)b * NH + h) * T + qi0] = (m[w][0] + log2f(l[w][0])) * 0.6931471805599453f;
            if (qi1 < T) lse[((size_t)b * NH + h) * T + qi1] = (m[w][1] + log2f(l[w][1])) * 0.6931471805599453f;
        }
    }
}

// the forward: 16 query rows a warp, Q's fragments read from shared memory at every key tile
template <int HS>
__global__ void __launch_bounds__(MMA_ATT_THREADS)
attention_forward_mma_kernel(floatX* out, float* lse, const floatX* qkv, int T, int NH, int NKV, unsigned kv_magic) {
    attention_forward_mma_tile<HS, 1, false>(out, lse, qkv, T, NH, NKV, kv_magic);
}
// at head sizes 16 and 32 held to 8 and 6 blocks an SM (64 and 80 registers, no spill), which
// ptxas reaches uncapped with fewer (80 and 84 registers: 6 and 5 blocks; CUDA 13.0, sm_90a). A
// minimum of blocks at the other head sizes changes what ptxas does there (at 64 it spills
// under the 4 blocks it reaches uncapped), so they keep none.
#define MMA_ATT_FWD_HELD(H, BLOCKS)                                                                              \
    template <>                                                                                                  \
    __global__ void __launch_bounds__(MMA_ATT_THREADS, BLOCKS) attention_forward_mma_kernel<H>(                  \
        floatX * out, float* lse, const floatX* qkv, int T, int NH, int NKV, unsigned kv_magic) {                \
        attention_forward_mma_tile<H, 1, false>(out, lse, qkv, T, NH, NKV, kv_magic);                            \
    }
MMA_ATT_FWD_HELD(16, 8)
MMA_ATT_FWD_HELD(32, 6)
#undef MMA_ATT_FWD_HELD

// the variants dev/cuda/attention --bench times beside it
template <int HS, int WM, bool QREG>
__global__ void __launch_bounds__(MMA_ATT_THREADS)
attention_fwd_variant_kernel(floatX* out, float* lse, const floatX* qkv, int T, int NH, int NKV, unsigned kv_magic) {
    attention_forward_mma_tile<HS, WM, QREG>(out, lse, qkv, T, NH, NKV, kv_magic);
}

// ---------------------------------------------------------------------------------------
// backward: P = exp2(s scale2 - lse2) rebuilt from the forward's lse (lse2 = lse log2 e),
// dS = P (dP - D).

// dq of one 64-query tile: for each key tile up to the diagonal, in halves of 32 keys,
// S = Q K^T, dP = dO V^T, dq += dS K; dq *= 1/sqrt(HS) at the end (the scale inside S).
// QREG: the warp's A fragments of Q and dO loaded from shared memory once, held in registers
// (KC x 8 of them), not at every half of every key tile: a quarter fewer shared-memory reads
// (the B fragments of K and V, and K's in dS K, remain); the same products in the same order.
template <int HS, bool QREG>
__device__ __forceinline__ void attention_backward_dq_mma_tile(floatX* dqkv, const floatX* dout, const floatX* qkv,
                                                               const float* lse, const float* D, int T, int NH,
                                                               int NKV, unsigned kv_magic) {
    constexpr int LD = HS + 8, TILE = MMA_ATT_KEYS * LD, KC = HS / 16, ND = HS / 8;
    constexpr int HALF = MMA_ATT_KEYS / 2, NB = HALF / 8;  // 32 keys, 4 blocks of 8, at a time
    extern __shared__ float4 mma_att_smem4[];
    floatX* smem = reinterpret_cast<floatX*>(mma_att_smem4);  // stage s: K at 2s TILE, V at (2s+1) TILE
    const floatX* Qs = smem + 4 * TILE;  // int-bound(mma_tile)
    const floatX* dOs = smem + 5 * TILE;  // int-bound(mma_tile)
    const int qt = (T + MMA_ATT_ROWS - 1) / MMA_ATT_ROWS - 1 - blockIdx.x;  // heaviest (last) tiles first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const size_t row_off = ((size_t)b * NH + h) * T;
    const AttHeads hd = att_heads(h, att_kv_head(h, NH, NKV, kv_magic), NH, NKV, HS);
    const floatX* rows = qkv + (size_t)b * T * hd.ld;
    // K; V is NKV heads on. V's address is written K's plus NKV heads (not rows + hd.v, as the
    // forward has it): the form that kept ptxas from spilling this kernel at head size 80
    const floatX* kv_rows = rows + hd.k;
    const floatX* dbase = dout + (size_t)b * T * C + h * HS;  // int-bound(att_channels)
    const int q0 = qt * MMA_ATT_ROWS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int r0 = warp * 16, qi0 = q0 + r0 + g;
    const float scale = 1.0f / sqrtf((float)HS), scale2 = LOG2E * scale;

    // Q, dO and key tile 0: the loop's first wait and barrier make them everyone's
    mma_att_copy_tile<HS, MMA_ATT_THREADS>(smem + 4 * TILE, rows + hd.q, hd.ld, q0, T);  // int-bound(mma_tile)
    mma_att_copy_tile<HS, MMA_ATT_THREADS>(smem + 5 * TILE, dbase, C, q0, T);  // int-bound(mma_tile)
    mma_att_copy_tile<HS, MMA_ATT_THREADS>(smem, kv_rows, hd.ld, 0, T);
    mma_att_copy_tile<HS, MMA_ATT_THREADS>(smem + TILE, kv_rows + NKV * HS, hd.ld, 0, T);  // int-bound(att_channels)
    ptx_cp_async_commit();
    float lse2[2], Dr[2];  // rows past T: any finite value (their dq is never stored)
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int qi = qi0 + 8 * i;
        lse2[i] = qi < T ? lse[row_off + qi] * LOG2E : 0.0f;
        Dr[i] = qi < T ? D[row_off + qi] : 0.0f;
    }
    float dq[ND][4];
    mma_zero<ND>(dq);
    uint32_t qreg[QREG ? KC : 1][4], doreg[QREG ? KC : 1][4];

    for (int j = 0; j <= qt; j++) {
        ptx_cp_async_wait<0>();
        __syncthreads();  // tile j is everyone's; the other stage (tile j-1) is read
        if (j < qt) {
            floatX* next = smem + ((j + 1) & 1) * 2 * TILE;  // int-bound(mma_tile)
            mma_att_copy_tile<HS, MMA_ATT_THREADS>(next, kv_rows, hd.ld, (j + 1) * MMA_ATT_KEYS, T);
            mma_att_copy_tile<HS, MMA_ATT_THREADS>(next + TILE, kv_rows + NKV * HS, hd.ld, (j + 1) * MMA_ATT_KEYS, T);  // int-bound(att_channels)
            ptx_cp_async_commit();
        }
        if constexpr (QREG) {
            if (j == 0) {
#pragma unroll
                for (int kc = 0; kc < KC; kc++) {
                    mma_ldsm_a<LD>(qreg[kc], Qs, r0, kc * 16, lane);
                    mma_ldsm_a<LD>(doreg[kc], dOs, r0, kc * 16, lane);
                }
            }
        }
        const floatX* Ks = smem + (j & 1) * 2 * TILE;  // int-bound(mma_tile)
        const floatX* Vs = Ks + TILE;
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int n0 = half * HALF;  // the half's first key within the tile
            float s[NB][4], dp[NB][4];
            mma_zero<NB>(s);
            mma_zero<NB>(dp);
#pragma unroll
            for (int kc = 0; kc < KC; kc++) {
                if constexpr (QREG) {
                    mma_chunk_times_rows<LD, NB>(s, qreg[kc], Ks, n0, kc * 16, lane);
                    mma_chunk_times_rows<LD, NB>(dp, doreg[kc], Vs, n0, kc * 16, lane);
                } else {
                    uint32_t a[4];
                    mma_ldsm_a<LD>(a, Qs, r0, kc * 16, lane);
                    mma_chunk_times_rows<LD, NB>(s, a, Ks, n0, kc * 16, lane);
                    mma_ldsm_a<LD>(a, dOs, r0, kc * 16, lane);
                    mma_chunk_times_rows<LD, NB>(dp, a, Vs, n0, kc * 16, lane);
                }
            }
            // dS = P (dP - D), 0 where keys pass rows: on the diagonal tile only, a block-uniform
            // branch between two copies of the loop (the other tiles test nothing per element)
            auto make_ds = [&](auto diagonal) {
#pragma unroll
                for (int nb = 0; nb < NB; nb++) {
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int i = e >> 1;
                        const float p = ptx_ex2_approx_ftz(fmaf(s[nb][e], scale2, -lse2[i]));
                        s[nb][e] = p * (dp[nb][e] - Dr[i]);
                        if constexpr (decltype(diagonal)::value) {
                            if (j * MMA_ATT_KEYS + n0 + nb * 8 + 2 * c + (e & 1) > qi0 + 8 * i) s[nb][e] = 0.0f;
                        }
                    }
                }
            };
            if (j == qt) make_ds(std::true_type{});
            else make_ds(std::false_type{});
#pragma unroll
            for (int t = 0; t < NB / 2; t++) {  // dq += dS K, 16 keys at a time
                uint32_t da[4];
                mma_acc_to_a<NB>(da, s, t);
                mma_chunk_times_cols<LD, ND>(dq, da, Ks, n0 + t * 16, 0, lane);
            }
        }
    }
    const float mult[2] = {scale, scale};
    mma_store_rows<ND>(dqkv + (size_t)b * T * hd.ld + hd.q, hd.ld, dq, q0 + r0, 0, T, mult, g, c);
}
template <int HS>
__global__ void __launch_bounds__(MMA_ATT_THREADS)
attention_backward_dq_mma_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                                 const float* D, int T, int NH, int NKV, unsigned kv_magic) {
    attention_backward_dq_mma_tile<HS, false>(dqkv, dout, qkv, lse, D, T, NH, NKV, kv_magic);
}
// QREG, at head size 64: capped at 128 registers, so that 4 blocks fit an SM as the plain
// kernel's (103 registers; with Q and dO held, 130 uncapped, 128 capped, no spill)
template <int HS>
__global__ void __launch_bounds__(MMA_ATT_THREADS, 4)
attention_backward_dq_mma_qreg_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                                      const float* D, int T, int NH, int NKV, unsigned kv_magic) {
    static_assert(HS <= 64, "Q and dO in registers: head sizes up to 64");
    attention_backward_dq_mma_tile<HS, true>(dqkv, dout, qkv, lse, D, T, NH, NKV, kv_magic);
}

// p[0] += x, p[1] += y (p 8-byte aligned, in global memory). From compute capability 9.0 one
// vector atomic (atomicAdd(float2*): each float atomic on its own), so a quad of lanes holding a
// fragment row's 8 floats adds one whole 32-byte sector in one instruction; before it, two float
// atomics, each instruction a quad's 4 floats spread over the sector.
__device__ __forceinline__ void mma_atomic_add_pair(float* p, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    atomicAdd(p, x);
    atomicAdd(p + 1, y);
#else
    atomicAdd(reinterpret_cast<float2*>(p), make_float2(x, y));
#endif
}

// 16 rows x 8ND columns of fragments added to fp32 global memory (row stride ld) at rows
// row0.., columns col0.., by mma_atomic_add_pair; rows at or past T skipped
template <int ND>
__device__ inline void mma_atomic_add_rows(float* dst, size_t ld, const float acc[ND][4], int row0, int col0, int T,
                                           int g, int c) {
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = row0 + g + 8 * i;
        if (r >= T) continue;
        float* d = dst + (size_t)r * ld + col0 + 2 * c;  // int-bound(mma_tile)
#pragma unroll
        for (int nd = 0; nd < ND; nd++) mma_atomic_add_pair(d + nd * 8, acc[nd][2 * i], acc[nd][2 * i + 1]);  // int-bound(mma_tile)
    }
}

// The dK/dV kernels' step after (query head h, query tile q0 of `rows` queries), over the query
// heads of a key/value head's group and for each the query tiles from the key tile's diagonal
// (k0) on: the next query tile, or the next head's first
__device__ __forceinline__ void att_dkv_next_step(int& h, int& q0, int k0, int T, int rows) {
    q0 += rows;
    if (q0 >= T) {
        q0 = k0;
        h++;
    }
}

// How the dk/dv kernel's dq leaves it: not at all (the dq kernel computes it), by float atomics
// (-ak 2), or by the TMA unit's bulk reductions from a shared-memory copy (sm_90; dev/cuda/attention's
// variant, not yet measured)
enum AttDq { ATT_DQ_NONE = 0, ATT_DQ_ATOMIC = 1, ATT_DQ_BULK = 2 };

// dk and dv of one 64-key tile: for each query tile from the diagonal on, phase 1 writes
// P^T and dS^T (64 keys x 64 queries, bf16) to shared memory, phase 2 accumulates dv += P^T dO
// and dk += dS^T Q from them; dk *= 1/sqrt(HS) at the end. WK keys a warp: 16 (8 warps,
// attention_backward_dkv_mma_kernel) or 32 (4 warps, attention_backward_dkv_mma_w32_kernel); warp
// w takes keys WK(w % (64/WK)).. in both phases, in phase 1 the queries 32(w / (64/WK)).. and in
// phase 2 the head columns (HS/2)(w / (64/WK)).. . A warp's tile of 32 keys x 32 queries (or
// columns) loads each of its fragments for two row blocks of 16: a third fewer shared-memory
// reads a pair of tiles (128 KB against 192 at head size 64: an H200's profile found the 16-key
// kernel bound by them, 2026-11-26), for twice the accumulators a thread (dk and dv of 32 keys x
// HS/2, 64 registers at head size 64). Every element sums the same products in the same order
// either way, so both give the same bits. DQ != ATT_DQ_NONE (attention_backward_mma with
// dq_accum; WK = 16 only): phase 3 adds this key tile's part of dq, dS K, to dq_accum (fp32,
// (B, T, C)), for warp w the queries 16(w%4).. and head columns (HS/2)(w/4)..: ATT_DQ_ATOMIC by
// atomics from the fragments, ATT_DQ_BULK by writing them to the warp's part of a shared-memory
// tile and one bulk reduction a query row (HS/2 floats), issued by lanes 0..15, which wait for the
// last tile's to have read the tile before it is written again.
template <int HS, int DQ, int WK>
__device__ __forceinline__ void attention_dkv_mma_tile(floatX* dqkv, const floatX* dout, const floatX* qkv,
                                                       const float* lse, const float* D, int T, int NH, int NKV,
                                                       int group, float* dq_accum) {
    static_assert(WK == 16 || WK == 32, "16 or 32 keys a warp");
    static_assert(DQ == ATT_DQ_NONE || WK == 16, "dq inside the dk/dv kernel: 16 keys a warp");
    constexpr int KW = MMA_ATT_KEYS / WK;   // warps along the keys; twice as many in the block
    constexpr int THREADS = 2 * KW * 32;
    constexpr int MI = WK / 16;             // row blocks of 16 keys a warp
    constexpr int LD = HS + 8, TILE = MMA_ATT_KEYS * LD, KC = HS / 16, PLD = MMA_ATT_PLD;
    constexpr int NB = MMA_ATT_ROWS / 2 / 8;  // phase 1: 8-query blocks of a warp's 32 queries
    constexpr int ND = HS / 2 / 8;            // phase 2: 8-column blocks of a warp's HS/2 columns
    static_assert(THREADS >= 2 * MMA_ATT_ROWS, "a thread a row statistic");
    extern __shared__ float4 mma_att_smem4[];
    floatX* Ks = reinterpret_cast<floatX*>(mma_att_smem4);
    floatX* Vs = Ks + TILE;
    floatX* QdO = Vs + TILE;  // stage s: Q at 2s TILE, dO at (2s+1) TILE
    floatX* Ps = QdO + 4 * TILE;  // P^T: row = key, column = query; int-bound(mma_tile)
    floatX* dSs = Ps + MMA_ATT_KEYS * PLD;  // int-bound(mma_tile)
    float* lse2_s = reinterpret_cast<float*>(dSs + MMA_ATT_KEYS * PLD);  // [2][64]: stage s at 64 s; int-bound(mma_tile)
    float* D_s = lse2_s + 2 * MMA_ATT_ROWS;                              // [2][64]; int-bound(mma_tile)
    constexpr int SLD = mma_att_dq_stage_ld(HS);
    float* dq_stage = D_s + 2 * MMA_ATT_ROWS;  // ATT_DQ_BULK: [8 warps][16][SLD], 16-byte aligned; int-bound(mma_tile)
    const int kt = blockIdx.x;  // the first key tiles see the most queries: launched first
    const int kvh = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const AttHeads kv = att_heads(kvh * group, kvh, NH, NKV, HS);  // this key/value head's k and v columns
    const floatX* rows = qkv + (size_t)b * T * kv.ld;
    const int k0 = kt * MMA_ATT_KEYS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int kr = (warp % KW) * WK;                   // this warp's WK keys (both phases)
    const int qc = (warp / KW) * (MMA_ATT_ROWS / 2);   // phase 1: its 32 queries
    const int dc = (warp / KW) * (HS / 2);             // phase 2: its HS/2 head columns
    const float scale = 1.0f / sqrtf((float)HS), scale2 = LOG2E * scale;
    // A step is a (query head, query tile): the heads of the group in turn (one, NKV = NH), for
    // each the query tiles from the diagonal on; counted, not divided out of the step's index
    // (AttHeadMap says why), att_dkv_next_step moving (h, q0) on by one.
    const int steps = group * ((T - k0 + MMA_ATT_ROWS - 1) / MMA_ATT_ROWS);
    // Q and dO of step (h, q0) into a stage
    auto copy_q_do = [&](floatX* stage, int h, int q0) {
        mma_att_copy_tile<HS, THREADS>(stage, rows + h * HS, kv.ld, q0, T);  // int-bound(att_channels)
        mma_att_copy_tile<HS, THREADS>(stage + TILE, dout + (size_t)b * T * C + h * HS, C, q0, T);  // int-bound(att_channels)
    };
    // the row statistics of step (h, q0): thread r < 64 loads lse2 of its row r, thread 64 + r
    // its D; rows past T get 0 (their Q and dO rows are zeros, and P is masked there)
    const bool stats_thread = threadIdx.x < 2 * MMA_ATT_ROWS, stats_d = threadIdx.x >= MMA_ATT_ROWS;
    auto stats_of = [&](int h, int q0) -> float {
        const int qi = q0 + (threadIdx.x & 63);
        if (qi >= T) return 0.0f;
        const size_t at = ((size_t)b * NH + h) * T + qi;
        return stats_d ? D[at] : lse[at] * LOG2E;
    };
    float* const stats_dst = (stats_d ? D_s : lse2_s) + (threadIdx.x & 63);  // stage 0's slot

    mma_att_copy_tile<HS, THREADS>(Ks, rows + kv.k, kv.ld, k0, T);
    mma_att_copy_tile<HS, THREADS>(Vs, rows + kv.v, kv.ld, k0, T);
    int h = kvh * group, q0 = k0;  // step j's
    copy_q_do(QdO, h, q0);
    ptx_cp_async_commit();
    if (stats_thread) stats_dst[0] = stats_of(h, q0);
    float dk[MI][ND][4], dv[MI][ND][4];
#pragma unroll
    for (int mi = 0; mi < MI; mi++) {
        mma_zero<ND>(dk[mi]);
        mma_zero<ND>(dv[mi]);
    }

    for (int j = 0; j < steps; j++) {
        const int st = j & 1;
        int h_next = h, q0_next = q0;
        att_dkv_next_step(h_next, q0_next, k0, T, MMA_ATT_ROWS);
        ptx_cp_async_wait<0>();
        __syncthreads();  // step j's tiles are everyone's; step j-1's (its stage, P^T, dS^T) are read
        float next_stat = 0.0f;
        if (j + 1 < steps) {
            copy_q_do(QdO + (st ^ 1) * 2 * TILE, h_next, q0_next);  // int-bound(mma_tile)
            ptx_cp_async_commit();
            if (stats_thread) next_stat = stats_of(h_next, q0_next);  // a load in flight, stored after phase 2
        }
        const floatX* Qs = QdO + st * 2 * TILE;  // int-bound(mma_tile)
        const floatX* dOs = Qs + TILE;

        // phase 1: S^T = K Q^T, dP^T = V dO^T for keys kr.., queries qc..
        float p[MI][NB][4], ds[MI][NB][4];
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
            mma_zero<NB>(p[mi]);
            mma_zero<NB>(ds[mi]);
        }
#pragma unroll
        for (int kc = 0; kc < KC; kc++) {
            uint32_t a[MI][4];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) mma_ldsm_a<LD>(a[mi], Ks, kr + 16 * mi, kc * 16, lane);
            mma_chunks_times_rows<LD, NB, MI>(p, a, Qs, qc, kc * 16, lane);
#pragma unroll
            for (int mi = 0; mi < MI; mi++) mma_ldsm_a<LD>(a[mi], Vs, kr + 16 * mi, kc * 16, lane);
            mma_chunks_times_rows<LD, NB, MI>(ds, a, dOs, qc, kc * 16, lane);
        }
        // element e of block nb of row block mi: key k0 + kr + 16 mi + g + 8 (e >> 1), query
        // q0 + qc + nb*8 + 2c + (e & 1); the mask only on the diagonal tile and the last one (rows past T)
        const bool edge = q0 == k0 || q0 + MMA_ATT_ROWS > T;
        const float* lse2_t = lse2_s + st * MMA_ATT_ROWS;  // int-bound(mma_tile)
        const float* D_t = D_s + st * MMA_ATT_ROWS;  // int-bound(mma_tile)
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
#pragma unroll
            for (int nb = 0; nb < NB; nb++) {
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int jq = qc + nb * 8 + 2 * c + (e & 1);
                    const float pv = ptx_ex2_approx_ftz(fmaf(p[mi][nb][e], scale2, -lse2_t[jq]));
                    p[mi][nb][e] = pv;
                    ds[mi][nb][e] = pv * (ds[mi][nb][e] - D_t[jq]);
                }
            }
            if (edge) {  // block-uniform: P and dS 0 where keys pass queries, and at queries past T
#pragma unroll
                for (int nb = 0; nb < NB; nb++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int qi = q0 + qc + nb * 8 + 2 * c + (e & 1), key = k0 + kr + 16 * mi + g + 8 * (e >> 1);
                        if (key > qi || qi >= T) p[mi][nb][e] = ds[mi][nb][e] = 0.0f;
                    }
            }
#pragma unroll
            for (int nb = 0; nb < NB; nb++) {
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const int off = (kr + 16 * mi + g + 8 * i) * PLD + qc + nb * 8 + 2 * c;
                    *reinterpret_cast<uint32_t*>(Ps + off) = mma_pack_floats(p[mi][nb][2 * i], p[mi][nb][2 * i + 1]);  // int-bound(mma_tile)
                    *reinterpret_cast<uint32_t*>(dSs + off) = mma_pack_floats(ds[mi][nb][2 * i], ds[mi][nb][2 * i + 1]);  // int-bound(mma_tile)
                }
            }
        }
        __syncthreads();  // P^T and dS^T are whole

        // phase 2: dv += P^T dO, dk += dS^T Q for keys kr.., head columns dc.., 16 queries at a time
#pragma unroll
        for (int t = 0; t < MMA_ATT_ROWS / 16; t++) {
            uint32_t a[MI][4];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) mma_ldsm_a<PLD>(a[mi], Ps, kr + 16 * mi, t * 16, lane);
            mma_chunks_times_cols<LD, ND, MI>(dv, a, dOs, t * 16, dc, lane);
#pragma unroll
            for (int mi = 0; mi < MI; mi++) mma_ldsm_a<PLD>(a[mi], dSs, kr + 16 * mi, t * 16, lane);
            mma_chunks_times_cols<LD, ND, MI>(dk, a, Qs, t * 16, dc, lane);
        }
        if constexpr (DQ != ATT_DQ_NONE) {  // phase 3: dq (queries kr.. of this query tile, columns dc..) += dS K
            float dq[ND][4];
            mma_zero<ND>(dq);
#pragma unroll
            for (int t = 0; t < MMA_ATT_KEYS / 16; t++) {
                uint32_t a[4];
                mma_ldsm_a_trans<PLD>(a, dSs, kr, t * 16, lane);
                mma_chunk_times_cols<LD, ND>(dq, a, Ks, t * 16, dc, lane);
            }
            if constexpr (DQ == ATT_DQ_ATOMIC) {
                mma_atomic_add_rows<ND>(dq_accum + (size_t)b * T * C + h * HS, C, dq, q0 + kr, dc, T, g, c);  // int-bound(att_channels)
            } else {
                float* st = dq_stage + warp * 16 * SLD;  // this warp's 16 queries x HS/2 columns; int-bound(mma_tile)
                if (j > 0) {  // the last tile's reductions have read st
                    if (lane < 16) ptx_bulk_wait_read<0>();
                    __syncwarp();
                }
#pragma unroll
                for (int i = 0; i < 2; i++) {
#pragma unroll
                    for (int nd = 0; nd < ND; nd++)
                        *reinterpret_cast<float2*>(st + (g + 8 * i) * SLD + nd * 8 + 2 * c) =  // int-bound(mma_tile)
                            make_float2(dq[nd][2 * i], dq[nd][2 * i + 1]);
                }
                ptx_fence_proxy_async_shared();  // the stores above, seen by the bulk reductions
                __syncwarp();
                const int qi = q0 + kr + lane;
                if (lane < 16 && qi < T)
                    ptx_bulk_reduce_add_f32(dq_accum + ((size_t)b * T + qi) * C + h * HS + dc,  // int-bound(att_channels)
                                            st + lane * SLD, (uint32_t)(HS / 2 * sizeof(float)));  // int-bound(mma_tile)
                if (lane < 16) ptx_bulk_commit();
            }
        }
        // stage st ^ 1's statistics were last read in phase 1 of step j-1; read again after the next barrier
        if (j + 1 < steps && stats_thread) stats_dst[(st ^ 1) * MMA_ATT_ROWS] = next_stat;  // int-bound(mma_tile)
        h = h_next;
        q0 = q0_next;
    }
    if constexpr (DQ == ATT_DQ_BULK) {
        if (lane < 16) ptx_bulk_wait<0>();  // the shared memory read, the sums in dq_accum
    }
    floatX* dst = dqkv + (size_t)b * T * kv.ld;
    const float mk[2] = {scale, scale}, mv[2] = {1.0f, 1.0f};
#pragma unroll
    for (int mi = 0; mi < MI; mi++) {
        mma_store_rows<ND>(dst + kv.k, kv.ld, dk[mi], k0 + kr + 16 * mi, dc, T, mk, g, c);
        mma_store_rows<ND>(dst + kv.v, kv.ld, dv[mi], k0 + kr + 16 * mi, dc, T, mv, g, c);
    }
}

// 16 keys a warp, 8 warps: the trainers' (and with DQ, -ak 2's)
template <int HS, int DQ>
__global__ void __launch_bounds__(MMA_ATT_DKV_THREADS)
attention_backward_dkv_mma_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                                  const float* D, int T, int NH, int NKV, int group, float* dq_accum) {
    attention_dkv_mma_tile<HS, DQ, 16>(dqkv, dout, qkv, lse, D, T, NH, NKV, group, dq_accum);
}

// 32 keys a warp, 4 warps, for head sizes up to 64 (at 128, dk and dv alone would be 128
// registers): 3 blocks an SM (12 warps) on an H100/H200, by registers and shared memory alike,
// where the 16-key kernel runs 2 of 8 warps; dev/cuda/attention's variant, timed beside it
template <int HS>
__global__ void __launch_bounds__(MMA_ATT_DKV_W32_THREADS, 3)
attention_backward_dkv_mma_w32_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                                      const float* D, int T, int NH, int NKV, int group) {
    static_assert(HS <= 64, "32 keys a warp: head sizes up to 64");
    attention_dkv_mma_tile<HS, ATT_DQ_NONE, 32>(dqkv, dout, qkv, lse, D, T, NH, NKV, group, nullptr);
}

// dispatches a templated launch on the head sizes the tensor-core kernels take
#define ATTENTION_MMA_DISPATCH(HSVAL, CALL)                                                   \
    switch (HSVAL) {                                                                          \
        ATTENTION_CASES_16_TO_128(CALL)                                                       \
        default: CHECK(false, "head size %d not compiled in", HSVAL);                         \
    }

// raises kernel's dynamic shared memory limit when it needs more than the default 48 KB
template <typename Kernel>
inline void attention_mma_smem_limit(const CudaContext& ctx, Kernel* kernel, size_t smem, const char* what) {
    CHECK(smem <= ctx.props.sharedMemPerBlockOptin, "%s needs %zu bytes of shared memory, the device allows %zu",
          what, smem, (size_t)ctx.props.sharedMemPerBlockOptin);
    if (smem > CUDA_SMEM_DEFAULT_LIMIT)
        CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
}

// attention_forward_mma with the forward variant <HS, WM, QREG> (head size 128's, and dev/cuda/attention --bench's)
template <int HS, int WM, bool QREG>
inline void attention_forward_mma_variant(const CudaContext& ctx, floatX* out, float* lse, const floatX* qkv, int B,
                                          int T, int NH, int NKV) {
    attention_check(B, T, NH, NKV, HS, out, qkv, qkv);
    CHECK(lse != nullptr, "lse must be given");
    const AttHeadMap hm = att_head_map(NH, NKV);
    constexpr int ROWS = MMA_ATT_ROWS * WM;  // queries per CTA
    dim3 grid((unsigned)ceil_div(T, ROWS), NH, B);
    const size_t smem = mma_att_fwd_smem(HS, WM);
    attention_mma_smem_limit(ctx, attention_fwd_variant_kernel<HS, WM, QREG>, smem, "attention forward");
    attention_fwd_variant_kernel<HS, WM, QREG><<<grid, MMA_ATT_THREADS, smem, ctx.stream>>>(out, lse, qkv, T, NH, NKV,
                                                                                          hm.kv_magic);
    CHECK_LAUNCH();
}

// The same contract as attention_forward_gqa (attention.cuh): out (B,T,NH*HS), lse (B,NH,T),
// qkv (B,T,(NH+2NKV)*HS).
inline void attention_forward_mma_gqa(const CudaContext& ctx, floatX* out, float* lse, const floatX* qkv, int B,
                                      int T, int NH, int NKV, int HS) {
    attention_check(B, T, NH, NKV, HS, out, qkv, qkv);
    CHECK(lse != nullptr, "lse must be given");
    const char* problem = attention_mma_problem(ctx, HS);
    CHECK(problem == nullptr, "%s (head size %d)", problem, HS);
    // head size 128: 32 query rows a warp (attention_fwd_variant_kernel<128, 2, false>), 1.40x and
    // 1.46x this kernel at T=1024 and 4096 on an H200 (2026-11-26, dev/cuda/attention --bench:
    // 218 and 264 TFLOP/s against 155 and 181; 221 and 267 against 221 and 263 on 2026-11-27).
    // Head size 64: 16 rows, Q's fragments held in registers (<64, 1, true>), 1.05x this kernel
    // (2026-11-27: 169.3 and 201.3 TFLOP/s against 161.5 and 190.4; 32 rows a warp 159 and 191 on
    // the 26th). The other head sizes were not measured.
    if (HS == 128) return attention_forward_mma_variant<128, 2, false>(ctx, out, lse, qkv, B, T, NH, NKV);
    if (HS == 64) return attention_forward_mma_variant<64, 1, true>(ctx, out, lse, qkv, B, T, NH, NKV);
    const AttHeadMap hm = att_head_map(NH, NKV);
    dim3 grid((unsigned)ceil_div(T, MMA_ATT_ROWS), NH, B);
    const size_t smem = mma_att_fwd_smem(HS);
#define ATT_MMA_FWD(H)                                                                                   \
    attention_mma_smem_limit(ctx, attention_forward_mma_kernel<H>, smem, "attention forward");               \
    attention_forward_mma_kernel<H><<<grid, MMA_ATT_THREADS, smem, ctx.stream>>>(out, lse, qkv, T, NH, NKV, hm.kv_magic)
    ATTENTION_MMA_DISPATCH(HS, ATT_MMA_FWD)
#undef ATT_MMA_FWD
    CHECK_LAUNCH();
}
// multi-head (GPT-2): qkv (B,T,3C), out (B,T,C)
inline void attention_forward_mma(const CudaContext& ctx, floatX* out, float* lse, const floatX* qkv, int B, int T,
                                  int C, int NH) {
    CHECK(NH > 0 && C > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    attention_forward_mma_gqa(ctx, out, lse, qkv, B, T, NH, NH, C / NH);
}

// dqkv's q part (columns 0..C-1 of each row of ld) = dq_accum (B, T, C) * scale, rounded
__global__ void attention_dq_finish_kernel(floatX* dqkv, const float* dq_accum, size_t n, int C, size_t ld,
                                           float scale) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const size_t bt = i / C, col = i % C;
    dqkv[bt * ld + col] = from_float<floatX>(dq_accum[i] * scale);
}

// The keys a warp of the dk/dv kernel the backward takes (without dq_accum) at head size HS: 32 at
// head sizes 48 and 64 where three of its blocks fit an SM's shared memory (an H100/H200: 12 warps
// an SM, against the 16-key kernel's 16, for a third fewer shared-memory reads; PREDICTED faster,
// not yet measured), else 16 (an A100 would run two blocks of 4 warps; at head sizes 16 and 32 the
// 16-key kernel holds 24 warps an SM).
inline int attention_mma_dkv_warp_keys(const CudaContext& ctx, int HS) {
    const size_t per_block = mma_att_dkv_smem(HS) + CUDA_SMEM_RESERVED_PER_BLOCK;
    return HS >= 48 && HS <= 64 && ctx.props.sharedMemPerMultiprocessor >= 3 * per_block ? 32 : 16;
}

// Whether the dq kernel the backward takes at head size HS holds Q's and dO's fragments in
// registers (QREG): at head size 64, where it fits 128 registers and so as many blocks an SM as
// the plain kernel (4 on an H100/H200; at 16 to 48 it would hold fewer than the plain kernel's 5
// to 7). PREDICTED faster by a quarter fewer shared-memory reads; not yet measured.
inline bool attention_mma_dq_qreg(int HS) { return HS == 64; }

// the dq kernel at head size H (QREG compiled at head size 64 only)
template <int H>
inline void attention_backward_dq_mma_run(const CudaContext& ctx, bool qreg, dim3 grid, size_t smem, floatX* dqkv,
                                          const floatX* dout, const floatX* qkv, const float* lse, const float* D,
                                          int T, int NH, int NKV, unsigned kv_magic) {
    if constexpr (H == 64) {
        if (qreg) {
            attention_mma_smem_limit(ctx, attention_backward_dq_mma_qreg_kernel<H>, smem, "attention backward dq");
            attention_backward_dq_mma_qreg_kernel<H><<<grid, MMA_ATT_THREADS, smem, ctx.stream>>>(
                dqkv, dout, qkv, lse, D, T, NH, NKV, kv_magic);
            return;
        }
    }
    CHECK(!qreg, "the dq kernel with Q and dO in registers takes head size 64 (%d)", H);
    attention_mma_smem_limit(ctx, attention_backward_dq_mma_kernel<H>, smem, "attention backward dq");
    attention_backward_dq_mma_kernel<H><<<grid, MMA_ATT_THREADS, smem, ctx.stream>>>(dqkv, dout, qkv, lse, D, T, NH,
                                                                                     NKV, kv_magic);
}

// The same contract as attention_backward_gqa (attention.cuh): dqkv (B,T,(NH+2NKV)*HS)
// overwritten, from dout, qkv and the forward's out and lse; D in ctx.workspace. Without dq_accum: the dk/dv
// kernel, then the dq kernel, bitwise reproducible. With dq_accum (B*T*C floats, the caller's,
// zeroed here; -ak 2): dq computed inside the dk/dv kernel, as flash-attention 2 does, 5 tile
// products a pair of tiles instead of 7 (the dq kernel recomputes S and dP); each key tile adds
// its part of dq by fp32 atomics, in the order the tiles happen to finish, so not bitwise
// reproducible (on an H200, 2026-11-28, with float atomics, 18% slower than the two kernels;
// float2 atomics since, not yet measured). BULK (dev/cuda/attention's variant, sm_90): the
// atomics replaced by the TMA unit's bulk reductions; only the dev program instantiates it (a
// non-template caller here would compile its kernels into every trainer).
// warp_keys, the dk/dv kernel's keys a warp without dq_accum: 16, 32 (head sizes up to 64), or 0:
// attention_mma_dkv_warp_keys's choice. Either gives the same bits. dq_qreg, the dq kernel's
// variant: 0 plain, 1 QREG (head size 64), -1 attention_mma_dq_qreg's choice; the same bits.
template <bool BULK>
inline void attention_backward_mma_launch(const CudaContext& ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                                          const floatX* out, const float* lse, int B, int T, int NH, int NKV,
                                          int HS, float* dq_accum, int warp_keys = 0, int dq_qreg = -1) {
    attention_check(B, T, NH, NKV, HS, dqkv, dout, qkv);
    CHECK(is_aligned16(out) && lse != nullptr, "out=%p lse=%p", (const void*)out, (const void*)lse);
    const char* problem = attention_mma_problem(ctx, HS);
    CHECK(problem == nullptr, "%s (head size %d)", problem, HS);
    const float* D = attention_backward_preprocess(ctx, out, dout, B, T, NH, HS);
    const AttHeadMap hm = att_head_map(NH, NKV);
    // dk/dv: a block per (key tile, key/value head), over its group's query heads; dq: per query head
    dim3 grid_kv((unsigned)ceil_div(T, MMA_ATT_KEYS), NKV, B), grid_q((unsigned)ceil_div(T, MMA_ATT_ROWS), NH, B);
    const int C = NH * HS;
    if constexpr (BULK) {
        CHECK(dq_accum != nullptr && ctx.props.major >= 9,
              "dq by bulk reductions needs a dq buffer and sm_90 (this GPU: sm_%d%d)", ctx.props.major, ctx.props.minor);
    }
    const size_t smem_kv = mma_att_dkv_smem(HS, BULK), smem_q = mma_att_dq_smem(HS);
    CHECK(warp_keys == 0 || warp_keys == 16 || warp_keys == 32, "warp_keys %d: 0, 16 or 32", warp_keys);
    CHECK(warp_keys != 32 || (dq_accum == nullptr && HS <= 64),
          "the dk/dv kernel of 32 keys a warp: head size up to 64 (%d), no dq buffer", HS);
    if (warp_keys == 0) warp_keys = dq_accum == nullptr ? attention_mma_dkv_warp_keys(ctx, HS) : 16;
    CHECK(dq_qreg >= -1 && dq_qreg <= 1, "dq_qreg %d: -1, 0 or 1", dq_qreg);
    const bool qreg = dq_qreg < 0 ? attention_mma_dq_qreg(HS) : dq_qreg == 1;
    constexpr int DQ_MODE = BULK ? ATT_DQ_BULK : ATT_DQ_ATOMIC;  // with dq_accum (dependent on BULK: the
                                                                 // bulk kernels compile only where BULK is true)
    const size_t n = (size_t)B * T * C;
    if (dq_accum != nullptr) CHECK_CUDA(cudaMemsetAsync(dq_accum, 0, n * sizeof(float), ctx.stream));
#define ATT_MMA_DKV(H, DQ, DQ_ACCUM)                                                                         \
    attention_mma_smem_limit(ctx, attention_backward_dkv_mma_kernel<H, DQ>, smem_kv, "attention backward dk/dv"); \
    attention_backward_dkv_mma_kernel<H, DQ><<<grid_kv, MMA_ATT_DKV_THREADS, smem_kv, ctx.stream>>>(         \
        dqkv, dout, qkv, lse, D, T, NH, NKV, hm.group, DQ_ACCUM)
#define ATT_MMA_DQ(H)                                                                                        \
    attention_backward_dq_mma_run<H>(ctx, qreg, grid_q, smem_q, dqkv, dout, qkv, lse, D, T, NH, NKV, hm.kv_magic)
#define ATT_MMA_BWD(H)                                                                                       \
    if (dq_accum != nullptr) {                                                                               \
        ATT_MMA_DKV(H, DQ_MODE, dq_accum);                                                                   \
    } else {                                                                                                 \
        ATT_MMA_DKV(H, ATT_DQ_NONE, nullptr);                                                                \
        CHECK_LAUNCH();                                                                                      \
        ATT_MMA_DQ(H);                                                                                       \
    }
#define ATT_MMA_BWD_W32(H)                                                                                   \
    attention_mma_smem_limit(ctx, attention_backward_dkv_mma_w32_kernel<H>, smem_kv, "attention backward dk/dv"); \
    attention_backward_dkv_mma_w32_kernel<H><<<grid_kv, MMA_ATT_DKV_W32_THREADS, smem_kv, ctx.stream>>>(     \
        dqkv, dout, qkv, lse, D, T, NH, NKV, hm.group);                                                      \
    CHECK_LAUNCH();                                                                                          \
    ATT_MMA_DQ(H)
    if (warp_keys == 32) {
        switch (HS) {
            ATTENTION_CASES_16_TO_64(ATT_MMA_BWD_W32)
            default: CHECK(false, "head size %d: the dk/dv kernel of 32 keys a warp takes 16, 32, 48 and 64", HS);
        }
    } else {
        ATTENTION_MMA_DISPATCH(HS, ATT_MMA_BWD)
    }
#undef ATT_MMA_BWD_W32
#undef ATT_MMA_BWD
#undef ATT_MMA_DQ
#undef ATT_MMA_DKV
    CHECK_LAUNCH();
    if (dq_accum == nullptr) return;
    attention_dq_finish_kernel<<<(unsigned)ceil_div(n, 256), 256, 0, ctx.stream>>>(
        dqkv, dq_accum, n, C, (size_t)(NH + 2 * NKV) * HS, 1.0f / sqrtf((float)HS));
    CHECK_LAUNCH();
}
inline void attention_backward_mma_gqa(const CudaContext& ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                                       const floatX* out, const float* lse, int B, int T, int NH, int NKV, int HS,
                                       float* dq_accum = nullptr) {
    attention_backward_mma_launch<false>(ctx, dqkv, dout, qkv, out, lse, B, T, NH, NKV, HS, dq_accum);
}
// multi-head (GPT-2): qkv and dqkv (B,T,3C), dout (B,T,C)
inline void attention_backward_mma(const CudaContext& ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                                   const floatX* out, const float* lse, int B, int T, int C, int NH,
                                   float* dq_accum = nullptr) {
    CHECK(NH > 0 && C > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    attention_backward_mma_gqa(ctx, dqkv, dout, qkv, out, lse, B, T, NH, NH, C / NH, dq_accum);
}
#endif  // ENABLE_BF16
