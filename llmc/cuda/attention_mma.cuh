// attention_mma.cuh: causal attention on tensor cores, bf16 build only: the same contracts as
// attention_forward and attention_backward in attention.cuh, with every product (Q K^T, P V,
// dO V^T, dS K, P^T dO, dS^T Q) an mma.sync m16n8k16 of bf16 tiles accumulated in fp32, as
// flash-attention 2 does them. A candidate, not yet the trainer's: it has not run on a GPU.
// dev/cuda/attention.cu checks it against the CPU reference and times it next to the
// CUDA-core kernels; the trainer runs it with -ak 1, and makes it the default once it has
// passed there.
// defines: attention_forward_mma, attention_backward_mma, attention_mma_supported,
//          attention_forward_chosen, attention_backward_chosen, attention_mma_problem
//
// One block of 4 warps per (64-query tile, head, batch), heaviest tiles first. Warp w owns
// query rows 16w..16w+15 of the tile: its Q stays in registers as mma A fragments for the
// whole block. For each 64-key tile up to the diagonal (K and V in shared memory, bf16, rows
// padded to HS+8 so the fragment loads of a warp hit 32 different banks):
//   S (16 x 64, fp32 fragments) = Q K^T; scale, causal mask; online softmax in base 2 per
//   row (a row's 64 scores sit in the 4 lanes of a quad: max and sum by two shuffles);
//   O (16 x HS) = O * correction + P V, where the S fragments of two adjacent 8-key blocks
//   are, rounded to bf16, exactly the A fragment of a 16-key chunk (no trip through memory).
// Finally O /= l and lse = (m + log2 l) ln 2, the natural-log lse of the scaled scores.
#pragma once
#include <cstdint>
#include "common.cuh"      // defines: floatX, CudaContext, CHECK, CHECK_LAUNCH, ceil_div
#include "attention.cuh"   // defines: attention_check
#include "ptx.cuh"         // defines: ptx_mma_m16n8k16_bf16_f32

// Head sizes the tensor-core kernels take (the others stay on attention.cuh's).
inline bool attention_mma_supported(int HS) { return HS % 16 == 0 && HS >= 16 && HS <= 128; }

// Why the tensor-core attention (-ak 1) cannot run here; nullptr when it can.
inline const char* attention_mma_problem(const CudaContext& ctx, int head_size) {
    if (sizeof(floatX) != 2) return "the tensor-core attention is in the bf16 build only";
    if (!attention_mma_supported(head_size))
        return "the tensor-core attention needs a head size that is a multiple of 16, up to 128";
    if (ctx.props.major < 8) return "the tensor-core attention needs sm_80 or newer";
    return nullptr;
}

#ifdef ENABLE_BF16
constexpr int MMA_ATT_ROWS = 64;  // queries per block, 16 per warp
constexpr int MMA_ATT_KEYS = 64;  // keys per tile
constexpr int MMA_ATT_THREADS = 128;

// Every product is ptx_mma_m16n8k16_bf16_f32 (ptx.cuh): D += A B for one 16x8x16 tile, bf16 in,
// fp32 accumulate. Fragments, with g = lane / 4 and c = lane % 4, two bf16 per 32-bit register,
// the lower column (or k) in the low half:
//   A (16 x 16, rows x k): a0 (g, 2c), a1 (g+8, 2c), a2 (g, 2c+8), a3 (g+8, 2c+8)
//   B (16 x 8, k x n):     b0 (k 2c, n g), b1 (k 2c+8, n g)
//   D (16 x 8, fp32):      d0, d1 (g, 2c and 2c+1), d2, d3 (g+8, 2c and 2c+1)

// two adjacent bf16 in shared memory (the first at an even index) as one register
__device__ inline uint32_t mma_load_pair(const floatX* p) { return *reinterpret_cast<const uint32_t*>(p); }

// two bf16 from anywhere, lo in the low half
__device__ inline uint32_t mma_pack(floatX lo, floatX hi) {
    return (uint32_t)__bfloat16_as_ushort(lo) | ((uint32_t)__bfloat16_as_ushort(hi) << 16);
}

__device__ inline uint32_t mma_pack_floats(float lo, float hi) {
    return mma_pack(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
}

// dst (64, HS+8) bf16 = rows r0.. of src (row stride ld elements); rows at or past T are zero
template <int HS>
__device__ inline void mma_att_load_tile(floatX* dst, const floatX* src, size_t ld, int r0, int T) {
    constexpr int LD = HS + 8, GROUPS = HS / 8;  // 8 bf16 = 16 bytes per load
    for (int idx = threadIdx.x; idx < MMA_ATT_KEYS * GROUPS; idx += MMA_ATT_THREADS) {
        int r = idx / GROUPS, col = (idx % GROUPS) * 8;
        int4 v = make_int4(0, 0, 0, 0);
        if (r0 + r < T) v = *reinterpret_cast<const int4*>(src + (size_t)(r0 + r) * ld + col);
        *reinterpret_cast<int4*>(dst + r * LD + col) = v;
    }
}

// A fragments of 16 rows (r0..r0+15) of a (64, HS+8) bf16 tile, over the HS columns
template <int HS>
__device__ inline void mma_load_a(uint32_t af[HS / 16][4], const floatX* tile, int r0, int g, int c) {
    constexpr int LD = HS + 8;
#pragma unroll
    for (int kc = 0; kc < HS / 16; kc++) {
        const floatX* a = tile + (r0 + g) * LD + kc * 16 + 2 * c;
        af[kc][0] = mma_load_pair(a);
        af[kc][1] = mma_load_pair(a + 8 * LD);
        af[kc][2] = mma_load_pair(a + 8);
        af[kc][3] = mma_load_pair(a + 8 * LD + 8);
    }
}

// s (16 x 64) = A M^T: A this warp's 16 rows (fragments over HS), M a (64, HS+8) tile whose
// rows are the 64 columns of s (B fragment (k = d, n = row j) = M[j][d]: adjacent in a row)
template <int HS>
__device__ inline void mma_rows_dot_tile(float s[MMA_ATT_KEYS / 8][4], const uint32_t af[HS / 16][4],
                                         const floatX* M, int g, int c) {
    constexpr int LD = HS + 8;
#pragma unroll
    for (int nb = 0; nb < MMA_ATT_KEYS / 8; nb++) {
        s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
        const floatX* m = M + (nb * 8 + g) * LD + 2 * c;
#pragma unroll
        for (int kc = 0; kc < HS / 16; kc++)
            ptx_mma_m16n8k16_bf16_f32(s[nb], af[kc], mma_load_pair(m + kc * 16), mma_load_pair(m + kc * 16 + 8));
    }
}

// acc (16 x HS) += P M: P this warp's (16 x 64) fragments of mma_rows_dot_tile, rounded to
// bf16 (the fragments of 8-column blocks 2t and 2t+1 are the A fragment of k chunk t), M a
// (64, HS+8) tile (B fragment (k = row 2c and 2c+1, n = column g): two rows apart, two
// 16-bit loads)
template <int HS>
__device__ inline void mma_rows_times_tile(float acc[HS / 8][4], const float p[MMA_ATT_KEYS / 8][4],
                                           const floatX* M, int g, int c) {
    constexpr int LD = HS + 8;
#pragma unroll
    for (int t = 0; t < MMA_ATT_KEYS / 16; t++) {
        const uint32_t pa[4] = {mma_pack_floats(p[2 * t][0], p[2 * t][1]), mma_pack_floats(p[2 * t][2], p[2 * t][3]),
                                mma_pack_floats(p[2 * t + 1][0], p[2 * t + 1][1]),
                                mma_pack_floats(p[2 * t + 1][2], p[2 * t + 1][3])};
        const floatX* m = M + (t * 16 + 2 * c) * LD + g;
#pragma unroll
        for (int nd = 0; nd < HS / 8; nd++) {
            const floatX* mn = m + nd * 8;
            ptx_mma_m16n8k16_bf16_f32(acc[nd], pa, mma_pack(mn[0], mn[LD]), mma_pack(mn[8 * LD], mn[9 * LD]));
        }
    }
}

// Rows (16 x HS fragments, times mult) to global memory rows (stride ld), rows at or past
// T skipped; row0 is the global row of the fragments' row 0.
template <int HS>
__device__ inline void mma_store_rows(floatX* dst, size_t ld, const float acc[HS / 8][4], int row0, int T,
                                      const float mult[2], int g, int c) {
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int r = row0 + g + 8 * i;
        if (r >= T) continue;
        floatX* d = dst + (size_t)r * ld + 2 * c;
#pragma unroll
        for (int nd = 0; nd < HS / 8; nd++)
            *reinterpret_cast<uint32_t*>(d + nd * 8) =
                mma_pack_floats(acc[nd][2 * i] * mult[i], acc[nd][2 * i + 1] * mult[i]);
    }
}

template <int HS>
__global__ void __launch_bounds__(MMA_ATT_THREADS)
attention_forward_mma_kernel(floatX* out, float* lse, const floatX* qkv, int T, int NH) {
    static_assert(HS % 16 == 0 && HS <= 128, "head size: a multiple of 16, at most 128");
    constexpr int LD = HS + 8;              // row stride in shared memory: 16 bytes of padding
    constexpr int KC = HS / 16;             // k chunks of Q K^T
    constexpr int ND = HS / 8;              // 8-column blocks of O
    constexpr int NB = MMA_ATT_KEYS / 8;    // 8-key blocks of S
    __shared__ alignas(16) floatX Ks[MMA_ATT_KEYS * LD];
    __shared__ alignas(16) floatX Vs[MMA_ATT_KEYS * LD];

    const int num_tiles = (T + MMA_ATT_ROWS - 1) / MMA_ATT_ROWS;
    const int qt = num_tiles - 1 - blockIdx.x;
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const floatX* base = qkv + (size_t)b * T * C3 + h * HS;
    const int q0 = qt * MMA_ATT_ROWS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int r0 = warp * 16;
    const int qi0 = q0 + r0 + g, qi1 = qi0 + 8;  // this thread's two query rows
    // scores in base 2: s * log2(e) / sqrt(HS), so exp2 replaces exp
    const float scale2 = 1.4426950408889634f / sqrtf((float)HS);

    // Q: the block's rows through Ks, then this warp's 16 rows into A fragments
    mma_att_load_tile<HS>(Ks, base, C3, q0, T);
    __syncthreads();
    uint32_t qf[KC][4];
    mma_load_a<HS>(qf, Ks, r0, g, c);
    float o[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    const int keys_end = min(q0 + MMA_ATT_ROWS, T);  // the diagonal: no key past the last query
    for (int k0 = 0; k0 < keys_end; k0 += MMA_ATT_KEYS) {
        __syncthreads();  // Q's fragments, or the previous tile's K and V, are read
        mma_att_load_tile<HS>(Ks, base + C, C3, k0, T);
        mma_att_load_tile<HS>(Vs, base + 2 * C, C3, k0, T);
        __syncthreads();

        float s[NB][4];
        mma_rows_dot_tile<HS>(s, qf, Ks, g, c);
        // scale and mask; element e of block nb: row e < 2 ? qi0 : qi1, key k0 + nb*8 + 2c + (e & 1).
        // Key 0 is valid for every row, so m is finite from the first tile on.
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = k0 + nb * 8 + 2 * c + (e & 1), qi = e < 2 ? qi0 : qi1;
                const float v = key <= qi && key < T ? s[nb][e] * scale2 : -INFINITY;
                s[nb][e] = v;
                mx[e >> 1] = fmaxf(mx[e >> 1], v);
            }
        }
        float corr[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
            const float m_new = fmaxf(m[i], mx[i]);
            corr[i] = exp2f(m[i] - m_new);  // 0 on the first tile
            m[i] = m_new;
        }
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float p = exp2f(s[nb][e] - m[e >> 1]);  // masked: exp2(-inf) = 0
                s[nb][e] = p;
                sum[e >> 1] += p;
            }
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 1);
            sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 2);
            l[i] = l[i] * corr[i] + sum[i];
        }
#pragma unroll
        for (int nd = 0; nd < ND; nd++) {
            o[nd][0] *= corr[0];
            o[nd][1] *= corr[0];
            o[nd][2] *= corr[1];
            o[nd][3] *= corr[1];
        }
        mma_rows_times_tile<HS>(o, s, Vs, g, c);  // O += P V
    }

    // O /= l; lse in natural log
    const float inv[2] = {1.0f / l[0], 1.0f / l[1]};
    mma_store_rows<HS>(out + (size_t)b * T * C + h * HS, C, o, q0 + r0, T, inv, g, c);
    if (c == 0) {
        if (qi0 < T) lse[((size_t)b * NH + h) * T + qi0] = (m[0] + log2f(l[0])) * 0.6931471805599453f;
        if (qi1 < T) lse[((size_t)b * NH + h) * T + qi1] = (m[1] + log2f(l[1])) * 0.6931471805599453f;
    }
}

// ---------------------------------------------------------------------------------------
// backward, as attention.cuh's (no atomics: dq by one kernel over query tiles, dk and dv by
// one over key tiles; D = dO . O by its preprocess kernel), with every product on tensor
// cores: P = exp2(s scale2 - lse2) rebuilt from the forward's lse, dS = P (dP - D).

// dq of one 64-query tile: for each key tile up to the diagonal, S = Q K^T, dP = dO V^T,
// dq += dS K; dq *= 1/sqrt(HS) at the end (the scale inside S).
template <int HS>
__global__ void __launch_bounds__(MMA_ATT_THREADS)
attention_backward_dq_mma_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                                 const float* D, int T, int NH) {
    constexpr int LD = HS + 8, KC = HS / 16, ND = HS / 8, NB = MMA_ATT_KEYS / 8;
    __shared__ alignas(16) floatX Ks[MMA_ATT_KEYS * LD];
    __shared__ alignas(16) floatX Vs[MMA_ATT_KEYS * LD];
    const int num_tiles = (T + MMA_ATT_ROWS - 1) / MMA_ATT_ROWS;
    const int qt = num_tiles - 1 - blockIdx.x;  // heaviest (last) tiles first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C, row_off = ((size_t)b * NH + h) * T;
    const floatX* base = qkv + (size_t)b * T * C3 + h * HS;
    const floatX* dbase = dout + (size_t)b * T * C + h * HS;
    const int q0 = qt * MMA_ATT_ROWS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int r0 = warp * 16, qi0 = q0 + r0 + g;
    const float scale = 1.0f / sqrtf((float)HS), scale2 = 1.4426950408889634f * scale;

    // Q and dO: this warp's rows as A fragments, through the K and V buffers
    mma_att_load_tile<HS>(Ks, base, C3, q0, T);
    mma_att_load_tile<HS>(Vs, dbase, C, q0, T);
    __syncthreads();
    uint32_t qf[KC][4], dof[KC][4];
    mma_load_a<HS>(qf, Ks, r0, g, c);
    mma_load_a<HS>(dof, Vs, r0, g, c);
    float lse2[2], Dr[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int qi = qi0 + 8 * i;
        lse2[i] = qi < T ? lse[row_off + qi] * 1.4426950408889634f : 0.0f;
        Dr[i] = qi < T ? D[row_off + qi] : 0.0f;
    }
    float dq[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++) dq[nd][0] = dq[nd][1] = dq[nd][2] = dq[nd][3] = 0.0f;

    const int keys_end = min(q0 + MMA_ATT_ROWS, T);
    for (int k0 = 0; k0 < keys_end; k0 += MMA_ATT_KEYS) {
        __syncthreads();  // the fragments above, or the previous tile, are read
        mma_att_load_tile<HS>(Ks, base + C, C3, k0, T);
        mma_att_load_tile<HS>(Vs, base + 2 * C, C3, k0, T);
        __syncthreads();
        float s[NB][4], dp[NB][4];
        mma_rows_dot_tile<HS>(s, qf, Ks, g, c);
        mma_rows_dot_tile<HS>(dp, dof, Vs, g, c);
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = k0 + nb * 8 + 2 * c + (e & 1), i = e >> 1, qi = qi0 + 8 * i;
                const float p = key <= qi && qi < T ? exp2f(s[nb][e] * scale2 - lse2[i]) : 0.0f;
                s[nb][e] = p * (dp[nb][e] - Dr[i]);  // dS
            }
        }
        mma_rows_times_tile<HS>(dq, s, Ks, g, c);  // dq += dS K
    }
    const float mult[2] = {scale, scale};
    mma_store_rows<HS>(dqkv + (size_t)b * T * C3 + h * HS, C3, dq, q0 + r0, T, mult, g, c);
}

// dk and dv of one 64-key tile: for each query tile from the diagonal on, S^T = K Q^T and
// dP^T = V dO^T (this warp's 16 keys as rows), dv += P^T dO, dk += dS^T Q; dk *= 1/sqrt(HS).
template <int HS>
__global__ void __launch_bounds__(MMA_ATT_THREADS)
attention_backward_dkv_mma_kernel(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse,
                                  const float* D, int T, int NH) {
    constexpr int LD = HS + 8, KC = HS / 16, ND = HS / 8, NB = MMA_ATT_ROWS / 8;
    __shared__ alignas(16) floatX Qs[MMA_ATT_ROWS * LD];
    __shared__ alignas(16) floatX dOs[MMA_ATT_ROWS * LD];
    __shared__ float lse2_s[MMA_ATT_ROWS], D_s[MMA_ATT_ROWS];
    const int kt = blockIdx.x;  // the first key tiles see the most queries: launched first
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C, row_off = ((size_t)b * NH + h) * T;
    const floatX* base = qkv + (size_t)b * T * C3 + h * HS;
    const floatX* dbase = dout + (size_t)b * T * C + h * HS;
    const int k0 = kt * MMA_ATT_KEYS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int r0 = warp * 16, key0 = k0 + r0 + g;
    const float scale = 1.0f / sqrtf((float)HS), scale2 = 1.4426950408889634f * scale;

    // K and V: this warp's 16 keys as A fragments, through the Q and dO buffers
    mma_att_load_tile<HS>(Qs, base + C, C3, k0, T);
    mma_att_load_tile<HS>(dOs, base + 2 * C, C3, k0, T);
    __syncthreads();
    uint32_t kf[KC][4], vf[KC][4];
    mma_load_a<HS>(kf, Qs, r0, g, c);
    mma_load_a<HS>(vf, dOs, r0, g, c);
    float dk[ND][4], dv[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++) {
        dk[nd][0] = dk[nd][1] = dk[nd][2] = dk[nd][3] = 0.0f;
        dv[nd][0] = dv[nd][1] = dv[nd][2] = dv[nd][3] = 0.0f;
    }

    for (int q0 = k0; q0 < T; q0 += MMA_ATT_ROWS) {  // queries before k0 see none of these keys
        __syncthreads();  // the fragments above, or the previous tile, are read
        mma_att_load_tile<HS>(Qs, base, C3, q0, T);
        mma_att_load_tile<HS>(dOs, dbase, C, q0, T);
        for (int j = threadIdx.x; j < MMA_ATT_ROWS; j += MMA_ATT_THREADS) {
            const int qi = q0 + j;
            lse2_s[j] = qi < T ? lse[row_off + qi] * 1.4426950408889634f : 0.0f;
            D_s[j] = qi < T ? D[row_off + qi] : 0.0f;
        }
        __syncthreads();
        float p[NB][4], ds[NB][4];
        mma_rows_dot_tile<HS>(p, kf, Qs, g, c);    // S^T
        mma_rows_dot_tile<HS>(ds, vf, dOs, g, c);  // dP^T
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int j = nb * 8 + 2 * c + (e & 1), qi = q0 + j, key = key0 + 8 * (e >> 1);
                const float pv = key <= qi && qi < T ? exp2f(p[nb][e] * scale2 - lse2_s[j]) : 0.0f;
                p[nb][e] = pv;
                ds[nb][e] = pv * (ds[nb][e] - D_s[j]);
            }
        }
        mma_rows_times_tile<HS>(dv, p, dOs, g, c);  // dv += P^T dO
        mma_rows_times_tile<HS>(dk, ds, Qs, g, c);  // dk += dS^T Q
    }
    floatX* dst = dqkv + (size_t)b * T * C3 + h * HS;
    const float mk[2] = {scale, scale}, mv[2] = {1.0f, 1.0f};
    mma_store_rows<HS>(dst + C, C3, dk, k0 + r0, T, mk, g, c);
    mma_store_rows<HS>(dst + 2 * C, C3, dv, k0 + r0, T, mv, g, c);
}

// dispatches a templated launch on the head sizes the tensor-core kernels take
#define ATTENTION_MMA_DISPATCH(HSVAL, CALL)                                                   \
    switch (HSVAL) {                                                                          \
        ATTENTION_CASES_16_TO_128(CALL)                                                       \
        default: CHECK(false, "head size %d not compiled in", HSVAL);                         \
    }

// The same contract as attention_forward (attention.cuh): out (B,T,C), lse (B,NH,T).
inline void attention_forward_mma(const CudaContext& ctx, floatX* out, float* lse, const floatX* qkv, int B, int T,
                                  int C, int NH) {
    attention_check(B, T, C, NH, out, qkv, qkv);
    CHECK(lse != nullptr, "lse must be given");
    const int HS = C / NH;
    const char* problem = attention_mma_problem(ctx, HS);
    CHECK(problem == nullptr, "%s (head size %d)", problem, HS);
    dim3 grid((unsigned)ceil_div(T, MMA_ATT_ROWS), NH, B);
#define ATT_MMA_FWD(H) attention_forward_mma_kernel<H><<<grid, MMA_ATT_THREADS, 0, ctx.stream>>>(out, lse, qkv, T, NH)
    ATTENTION_MMA_DISPATCH(HS, ATT_MMA_FWD)
#undef ATT_MMA_FWD
    CHECK_LAUNCH();
}

// The same contract as attention_backward (attention.cuh): dqkv (B,T,3C) overwritten, from
// dout, qkv and the forward's out and lse; D in ctx.workspace.
inline void attention_backward_mma(const CudaContext& ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                                   const floatX* out, const float* lse, int B, int T, int C, int NH) {
    attention_check(B, T, C, NH, dqkv, dout, qkv);
    CHECK(is_aligned16(out) && lse != nullptr, "out=%p lse=%p", (const void*)out, (const void*)lse);
    const int HS = C / NH;
    const char* problem = attention_mma_problem(ctx, HS);
    CHECK(problem == nullptr, "%s (head size %d)", problem, HS);
    const float* D = attention_backward_preprocess(ctx, out, dout, B, T, NH, HS);
    dim3 grid((unsigned)ceil_div(T, MMA_ATT_ROWS), NH, B);
#define ATT_MMA_BWD(H)                                                                                          \
    attention_backward_dkv_mma_kernel<H><<<grid, MMA_ATT_THREADS, 0, ctx.stream>>>(dqkv, dout, qkv, lse, D, T, NH); \
    CHECK_LAUNCH();                                                                                             \
    attention_backward_dq_mma_kernel<H><<<grid, MMA_ATT_THREADS, 0, ctx.stream>>>(dqkv, dout, qkv, lse, D, T, NH)
    ATTENTION_MMA_DISPATCH(HS, ATT_MMA_BWD)
#undef ATT_MMA_BWD
    CHECK_LAUNCH();
}
#endif  // ENABLE_BF16

// The trainer's attention: the tensor-core kernels when ctx.attention_mma (-ak 1, bf16 build),
// else attention.cuh's.
inline void attention_forward_chosen(const CudaContext& ctx, floatX* out, float* lse, const floatX* qkv, int B, int T,
                                     int C, int NH) {
#ifdef ENABLE_BF16
    if (ctx.attention_mma) return attention_forward_mma(ctx, out, lse, qkv, B, T, C, NH);
#endif
    attention_forward(ctx, out, lse, qkv, B, T, C, NH);
}

inline void attention_backward_chosen(const CudaContext& ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                                      const floatX* out, const float* lse, int B, int T, int C, int NH) {
#ifdef ENABLE_BF16
    if (ctx.attention_mma) return attention_backward_mma(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH);
#endif
    attention_backward(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH);
}


