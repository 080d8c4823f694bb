// attention.cuh: causal multi-head self-attention on the GPU, flash-attention style: the
// T x T score matrix never exists in global memory. Forward and backward, fp32 arithmetic
// (CUDA cores) for both the fp32 and the bf16 build.
// defines: attention_forward(_gqa), attention_backward(_gqa), attention_backward_preprocess, AttHeadMap,
//          att_head_map, att_kv_head, AttHeads, att_heads, ATTENTION_HEAD_SIZES
// CPU reference: llmc/cpu/attention.h (which does store the T x T probabilities)
//
// Layout: qkv (B,T,3C) holds per position [q | k | v], head h at channels h*HS..(h+1)*HS-1
// of each; out (B,T,C); lse (B,NH,T) the log-sum-exp of each query's scaled scores,
// saved by the forward so the backward can rebuild any probability as exp(s - lse).
// Grouped-query attention (Llama, the _gqa launchers): NKV key/value heads, qkv rows
// [q (NH heads) | k (NKV) | v (NKV)], query head h reading key/value head h / (NH/NKV) in
// place (att_heads), as the CPU reference's attention_forward_gqa does: no repeated copy of K
// and V, and each key/value head's gradient summed over its group inside the dK/dV kernel (in
// fp32, rounded once).
//
// Tiles: 32 queries x 32 keys, 4 warps of 8 rows, fp32 tiles in shared memory with rows
// padded to HS+4 floats (the float4 reads of 8 lanes then hit 32 different banks).
// In a score step, warp w owns query rows 8w..8w+7 and lane j owns key j of the tile: one
// float4 of K per lane is reused against 8 broadcast float4s of Q.
//
// Forward, one block per (query tile, head, batch), heaviest (last) tiles launched first:
//   for each key tile up to the diagonal: S = Q K^T * scale, online softmax per row
//   (running max m and sum l, rescaling O), O += P V. Finally O /= l, lse = m + log l.
// Backward, no atomics (so deterministic), three kernels:
//   1. D_i = dO_i . O_i for every query row                              (into workspace)
//   2. one block per (key tile, key/value head): for each query head of the head's group and
//      each query tile from the diagonal on, rebuild P and dS = P * (dO V^T - D), accumulate
//      dV += P^T dO and dK += dS^T Q in registers.
//   3. one block per query tile: for each key tile up to the diagonal, rebuild dS,
//      accumulate dQ += dS K.
// Kernel 3 recomputes what kernel 2 computed (7 tile products instead of flash-attention
// 2's 5) but every output element has exactly one writer.
#pragma once
#include <cmath>
#include "common.cuh"

constexpr int ATT_TILE = 32;                        // queries and keys per tile
constexpr int ATT_WARPS = 4;
constexpr int ATT_RPW = ATT_TILE / ATT_WARPS;       // rows per warp: 8
constexpr int ATT_THREADS = ATT_WARPS * 32;
constexpr int ATT_PSTRIDE = ATT_TILE + 4;           // row stride of the P / dS tiles
// Indices into a shared-memory tile stay int: a tile is ATT_TILE rows of at most HS + 4 (HS up to
// 128) or ATT_PSTRIDE floats, far from 2^31; the lines that rely on it say int-bound(att_tile).
static_assert(ATT_TILE * (128 + 4) < (1 << 16) && ATT_TILE * ATT_PSTRIDE < (1 << 16), "tile indices");  // int-bound: att_tile
#define ATTENTION_HEAD_SIZES "8, 16, 32, 48, 64, 80, 96, 128"

// A qkv row holds NH query heads and NKV key/value heads, [q (NH) | k (NKV) | v (NKV)], HS
// channels each (GPT-2's NKV = NH is [q | k | v]); group = NH / NKV query heads share a
// key/value head, query head h reading head h / group. The kernels find it by a multiply,
// (h kv_magic) >> 32 with kv_magic = ceil(2^32 / group) made on the host (att_head_map, which
// checks it on every head it serves; exact for h below 2^16), and take these as plain int
// parameters: a division by the runtime group, or the map passed as a struct parameter, each
// cost the tensor-core forward ~30 registers (spills at head size 128, ptxas 13.0).
struct AttHeadMap {
    int NH, NKV, group;
    unsigned kv_magic;  // group > 1: ceil(2^32 / group)
};
__host__ __device__ __forceinline__ int att_kv_head(int h, int NH, int NKV, unsigned kv_magic) {
    return NKV == NH ? h : (int)(((unsigned long long)h * kv_magic) >> 32);
}
inline AttHeadMap att_head_map(int NH, int NKV) {
    CHECK(NH > 0 && NKV > 0 && NH % NKV == 0 && NH < (1 << 16), "NH=%d NKV=%d", NH, NKV);
    const int group = NH / NKV;
    const AttHeadMap m{NH, NKV, group, (unsigned)(((1ull << 32) + group - 1) / group)};
    for (int h = 0; h < NH; h++)
        CHECK(att_kv_head(h, NH, NKV, m.kv_magic) == h / group, "head %d of NH=%d NKV=%d", h, NH, NKV);
    return m;
}

// Where query head h's q and key/value head kv's k and v start in a qkv row, and the row's length.
struct AttHeads {
    size_t ld;    // elements in a qkv row: (NH + 2 NKV) HS
    int q, k, v;  // the first columns of q, k and v
};
__host__ __device__ __forceinline__ AttHeads att_heads(int h, int kv, int NH, int NKV, int HS) {
    return AttHeads{(size_t)(NH + 2 * NKV) * HS, h * HS, (NH + kv) * HS, (NH + NKV + kv) * HS};  // int-bound(att_channels)
}

// ---------------------------------------------------------------------------------------
// tile helpers

// dst (ATT_TILE, HS+4) fp32 = rows r0.. of src (row stride ld elements) times mult;
// rows at or past T are zero.
template <int HS>
__device__ inline void attention_load_tile(float* dst, const floatX* src, size_t ld, int r0, int T, float mult) {
    constexpr int PAD = HS + 4, GROUPS = HS / x128::size;
    for (int idx = threadIdx.x; idx < ATT_TILE * GROUPS; idx += ATT_THREADS) {
        int r = idx / GROUPS, c = (idx % GROUPS) * x128::size;
        float* d = dst + r * PAD + c;  // int-bound(att_tile)
        if (r0 + r < T) {
            x128 v = load128(src + (size_t)(r0 + r) * ld + c);
            for (int k = 0; k < x128::size; k++) d[k] = to_float(v[k]) * mult;
        } else {
            for (int k = 0; k < x128::size; k++) d[k] = 0.0f;
        }
    }
}

// acc[r] = A[row0 + r] . B[lane] over HS, for this warp's ATT_RPW rows of A
template <int HS>
__device__ inline void attention_dot_rows(float acc[ATT_RPW], const float* A, const float* Bm, int row0, int lane) {
    constexpr int PAD = HS + 4;
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) acc[r] = 0.0f;
    const float* b = Bm + lane * PAD;  // int-bound(att_tile)
#pragma unroll 4
    for (int d = 0; d < HS; d += 4) {
        float4 bv = *reinterpret_cast<const float4*>(b + d);
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            float4 av = *reinterpret_cast<const float4*>(A + (row0 + r) * PAD + d);  // int-bound(att_tile)
            acc[r] = fmaf(av.x, bv.x, acc[r]);
            acc[r] = fmaf(av.y, bv.y, acc[r]);
            acc[r] = fmaf(av.z, bv.z, acc[r]);
            acc[r] = fmaf(av.w, bv.w, acc[r]);
        }
    }
}

// acc[r][i] += sum_j W[(row0 + r)][j] * M[j][lane + 32 i], W (ATT_TILE rows, stride wstride),
// M (ATT_TILE, HS+4): a (rows x 32) by (32 x HS) product, lanes across the HS columns
template <int HS>
__device__ inline void attention_accumulate(float acc[ATT_RPW][(HS + 31) / 32], const float* W, int wstride,
                                            const float* M, int row0, int lane) {
    constexpr int PAD = HS + 4, NDIM = (HS + 31) / 32;
#pragma unroll 2
    for (int j = 0; j < ATT_TILE; j += 4) {
        float m[4][NDIM];
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
#pragma unroll
            for (int i = 0; i < NDIM; i++) {
                int d = lane + 32 * i;
                m[jj][i] = d < HS ? M[(j + jj) * PAD + d] : 0.0f;
            }
        }
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            float4 w = *reinterpret_cast<const float4*>(W + (row0 + r) * wstride + j);  // int-bound(att_tile)
#pragma unroll
            for (int i = 0; i < NDIM; i++) {
                acc[r][i] = fmaf(w.x, m[0][i], acc[r][i]);
                acc[r][i] = fmaf(w.y, m[1][i], acc[r][i]);
                acc[r][i] = fmaf(w.z, m[2][i], acc[r][i]);
                acc[r][i] = fmaf(w.w, m[3][i], acc[r][i]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// forward

template <int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attention_forward_kernel(floatX* out, float* lse, const floatX* qkv, int T, int NH, int NKV, unsigned kv_magic) {
    constexpr int PAD = HS + 4, NDIM = (HS + 31) / 32, TILE = ATT_TILE * PAD;
    extern __shared__ float4 smem4[];  // float4: the dynamic buffer is 16-byte aligned
    float* Qs = reinterpret_cast<float*>(smem4);
    float* Ks = Qs + TILE;
    float* Vs = Ks + TILE;
    float* Ps = Vs + TILE;  // (ATT_TILE, ATT_TILE): row r = query r's probabilities

    const int num_tiles = (T + ATT_TILE - 1) / ATT_TILE;
    const int qt = num_tiles - 1 - blockIdx.x;
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const AttHeads hd = att_heads(h, att_kv_head(h, NH, NKV, kv_magic), NH, NKV, HS);
    const floatX* rows = qkv + (size_t)b * T * hd.ld;
    const float scale = 1.0f / sqrtf((float)HS);
    const int q0 = qt * ATT_TILE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row0 = warp * ATT_RPW;

    attention_load_tile<HS>(Qs, rows + hd.q, hd.ld, q0, T, scale);
    float o[ATT_RPW][NDIM], m[ATT_RPW], l[ATT_RPW];
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
#pragma unroll
        for (int i = 0; i < NDIM; i++) o[r][i] = 0.0f;
    }
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * ATT_TILE;
        __syncthreads();  // the previous tile's K, V, P are no longer read
        attention_load_tile<HS>(Ks, rows + hd.k, hd.ld, k0, T, 1.0f);
        attention_load_tile<HS>(Vs, rows + hd.v, hd.ld, k0, T, 1.0f);
        __syncthreads();
        float s[ATT_RPW];
        attention_dot_rows<HS>(s, Qs, Ks, row0, lane);
        const int key = k0 + lane;
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            const int qi = q0 + row0 + r;  // rows past T compute harmlessly and are not stored
            // key 0 is valid for every row, so m is finite from the first tile on
            const bool valid = key <= qi && key < T;
            const float sv = valid ? s[r] : -INFINITY;
            const float m_new = fmaxf(m[r], warp_reduce_max(sv));
            const float p = valid ? expf(sv - m_new) : 0.0f;
            const float corr = expf(m[r] - m_new);  // 0 on the first tile
            l[r] = l[r] * corr + warp_reduce_sum(p);
            m[r] = m_new;
#pragma unroll
            for (int i = 0; i < NDIM; i++) o[r][i] *= corr;
            Ps[(row0 + r) * ATT_TILE + lane] = p;
        }
        __syncwarp();  // this warp's P rows are written
        attention_accumulate<HS>(o, Ps, ATT_TILE, Vs, row0, lane);
    }
    const int C_out = C;
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        const int qi = q0 + row0 + r;
        if (qi >= T) continue;
        const float inv = 1.0f / l[r];
        floatX* dst = out + ((size_t)b * T + qi) * C_out + h * HS;  // int-bound(att_channels)
#pragma unroll
        for (int i = 0; i < NDIM; i++) {
            int d = lane + 32 * i;
            if (d < HS) dst[d] = from_float<floatX>(o[r][i] * inv);
        }
        if (lane == 0) lse[((size_t)b * NH + h) * T + qi] = m[r] + logf(l[r]);
    }
}

// ---------------------------------------------------------------------------------------
// backward

// D[(b,h,t)] = dout[b,t,h] . out[b,t,h]; one warp per (b, t, h)
// G lanes a row (a power of two, 32 / G rows a warp), 16 bytes a load: lane l of its group
// reads the groups l, l + G, ... of the row's HS values, then the group sums by shuffles.
__global__ void attention_backward_preprocess_kernel(float* D, const floatX* out, const floatX* dout, int B, int T,
                                                     int NH, int HS, int G) {
    const size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / G;  // (b, t, h), h fastest
    const int sub = threadIdx.x % G;
    const size_t rows = (size_t)B * T * NH;
    float acc = 0.0f;
    if (row < rows) {
        const size_t off = row * HS;  // out and dout are (B, T, NH, HS)
        for (int d = sub * x128::size; d < HS; d += G * x128::size) {
            x128 o = load128cs(out + off + d), g = load128cs(dout + off + d);
            for (int k = 0; k < x128::size; k++) acc += to_float(g[k]) * to_float(o[k]);
        }
    }
    for (int m = G / 2; m > 0; m /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, m);  // every lane of the warp takes part
    if (row < rows && sub == 0) {
        const int h = (int)(row % NH);
        const size_t bt = row / NH;
        const int t = (int)(bt % T), b = (int)(bt / T);
        D[((size_t)b * NH + h) * T + t] = acc;
    }
}

// Rebuilds, for this warp's 8 query rows and lane's key, P = exp(s - lse) and
// dS = P * (dO . v - D), zero where masked. Qs holds scale * q.
template <int HS>
__device__ inline void attention_rebuild_ds(float p[ATT_RPW], float ds[ATT_RPW], const float* Qs, const float* dOs,
                                            const float* Ks, const float* Vs, const float* lse_s, const float* D_s,
                                            int q0, int k0, int T, int row0, int lane) {
    float s[ATT_RPW], dp[ATT_RPW];
    attention_dot_rows<HS>(s, Qs, Ks, row0, lane);
    attention_dot_rows<HS>(dp, dOs, Vs, row0, lane);
    const int key = k0 + lane;
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        const int qi = q0 + row0 + r;
        const bool valid = key <= qi && qi < T;
        p[r] = valid ? expf(s[r] - lse_s[row0 + r]) : 0.0f;
        ds[r] = valid ? p[r] * (dp[r] - D_s[row0 + r]) : 0.0f;
    }
}

// loads lse and D of query rows q0.. into shared (0 past T)
__device__ inline void attention_load_row_stats(float* lse_s, float* D_s, const float* lse, const float* D,
                                                size_t row_base, int q0, int T) {
    for (int r = threadIdx.x; r < ATT_TILE; r += ATT_THREADS) {
        bool in = q0 + r < T;
        lse_s[r] = in ? lse[row_base + q0 + r] : 0.0f;
        D_s[r] = in ? D[row_base + q0 + r] : 0.0f;
    }
}

// 2. dK, dV for one key tile of one key/value head, summed over the query heads of its group
template <int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attention_backward_dkdv_kernel(floatX* dqkv, const floatX* qkv, const floatX* dout, const float* lse, const float* D,
                               int T, int NH, int NKV, int group) {
    constexpr int PAD = HS + 4, NDIM = (HS + 31) / 32, TILE = ATT_TILE * PAD, PTILE = ATT_TILE * ATT_PSTRIDE;
    extern __shared__ float4 smem4[];
    float* Ks = reinterpret_cast<float*>(smem4);
    float* Vs = Ks + TILE;
    float* Qs = Vs + TILE;
    float* dOs = Qs + TILE;
    float* Ps = dOs + TILE;  // (query, key), stride ATT_PSTRIDE
    float* dSs = Ps + PTILE;
    float* lse_s = dSs + PTILE;
    float* D_s = lse_s + ATT_TILE;

    const int num_tiles = (T + ATT_TILE - 1) / ATT_TILE;
    const int kt = blockIdx.x;  // low key tiles see the most queries: launched first
    const int kvh = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const AttHeads kv = att_heads(kvh * group, kvh, NH, NKV, HS);  // k and v columns
    const floatX* rows = qkv + (size_t)b * T * kv.ld;
    const float scale = 1.0f / sqrtf((float)HS);
    const int k0 = kt * ATT_TILE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row0 = warp * ATT_RPW;

    attention_load_tile<HS>(Ks, rows + kv.k, kv.ld, k0, T, 1.0f);
    attention_load_tile<HS>(Vs, rows + kv.v, kv.ld, k0, T, 1.0f);
    float dk[ATT_RPW][NDIM], dv[ATT_RPW][NDIM];  // keys row0 + r of this tile, lane's columns
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
#pragma unroll
        for (int i = 0; i < NDIM; i++) dk[r][i] = dv[r][i] = 0.0f;
    }
    // the query heads of the group in turn, for each the query tiles from the diagonal on
    // (counted, not divided out of the step: AttHeadMap says why)
    int h = kvh * group, qt = kt - 1;
    for (int step = 0; step < group * (num_tiles - kt); step++) {
        if (++qt == num_tiles) {  // the next query head, from the diagonal again
            qt = kt;
            h++;
        }
        const int q0 = qt * ATT_TILE;
        const floatX* dout_base = dout + (size_t)b * T * C + h * HS;  // int-bound(att_channels)
        __syncthreads();  // the previous query tile is no longer read
        attention_load_tile<HS>(Qs, rows + h * HS, kv.ld, q0, T, scale);  // int-bound(att_channels)
        attention_load_tile<HS>(dOs, dout_base, C, q0, T, 1.0f);
        attention_load_row_stats(lse_s, D_s, lse, D, ((size_t)b * NH + h) * T, q0, T);
        __syncthreads();
        float p[ATT_RPW], ds[ATT_RPW];
        attention_rebuild_ds<HS>(p, ds, Qs, dOs, Ks, Vs, lse_s, D_s, q0, k0, T, row0, lane);
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) {
            Ps[(row0 + r) * ATT_PSTRIDE + lane] = p[r];
            dSs[(row0 + r) * ATT_PSTRIDE + lane] = ds[r];
        }
        __syncthreads();  // the products below read every warp's rows
        // dV[key] += sum_q P[q][key] dO[q];  dK[key] += sum_q dS[q][key] (scale q)
        // (the transposed reads: P^T row "key" is P column key)
#pragma unroll 2
        for (int q = 0; q < ATT_TILE; q++) {
            float qd[NDIM], dod[NDIM];
#pragma unroll
            for (int i = 0; i < NDIM; i++) {
                int d = lane + 32 * i;
                qd[i] = d < HS ? Qs[q * PAD + d] : 0.0f;
                dod[i] = d < HS ? dOs[q * PAD + d] : 0.0f;
            }
            const float4 p0 = *reinterpret_cast<const float4*>(Ps + q * ATT_PSTRIDE + row0);  // int-bound(att_tile)
            const float4 p1 = *reinterpret_cast<const float4*>(Ps + q * ATT_PSTRIDE + row0 + 4);  // int-bound(att_tile)
            const float4 s0 = *reinterpret_cast<const float4*>(dSs + q * ATT_PSTRIDE + row0);  // int-bound(att_tile)
            const float4 s1 = *reinterpret_cast<const float4*>(dSs + q * ATT_PSTRIDE + row0 + 4);  // int-bound(att_tile)
            const float pv[ATT_RPW] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
            const float sv[ATT_RPW] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
#pragma unroll
            for (int r = 0; r < ATT_RPW; r++) {
#pragma unroll
                for (int i = 0; i < NDIM; i++) {
                    dv[r][i] = fmaf(pv[r], dod[i], dv[r][i]);
                    dk[r][i] = fmaf(sv[r], qd[i], dk[r][i]);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        const int key = k0 + row0 + r;
        if (key >= T) continue;
        floatX* dst = dqkv + ((size_t)b * T + key) * kv.ld;
#pragma unroll
        for (int i = 0; i < NDIM; i++) {
            int d = lane + 32 * i;
            if (d < HS) {
                dst[kv.k + d] = from_float<floatX>(dk[r][i]);
                dst[kv.v + d] = from_float<floatX>(dv[r][i]);
            }
        }
    }
}

// 3. dQ for one query tile
template <int HS>
__global__ void __launch_bounds__(ATT_THREADS)
attention_backward_dq_kernel(floatX* dqkv, const floatX* qkv, const floatX* dout, const float* lse, const float* D,
                             int T, int NH, int NKV, unsigned kv_magic) {
    constexpr int PAD = HS + 4, NDIM = (HS + 31) / 32, TILE = ATT_TILE * PAD, PTILE = ATT_TILE * ATT_PSTRIDE;
    extern __shared__ float4 smem4[];
    float* Qs = reinterpret_cast<float*>(smem4);
    float* dOs = Qs + TILE;
    float* Ks = dOs + TILE;
    float* Vs = Ks + TILE;
    float* dSs = Vs + TILE;  // (query, key), stride ATT_PSTRIDE
    float* lse_s = dSs + PTILE;
    float* D_s = lse_s + ATT_TILE;

    const int num_tiles = (T + ATT_TILE - 1) / ATT_TILE;
    const int qt = num_tiles - 1 - blockIdx.x;
    const int h = blockIdx.y, b = blockIdx.z;
    const int C = NH * HS;
    const AttHeads hd = att_heads(h, att_kv_head(h, NH, NKV, kv_magic), NH, NKV, HS);
    const floatX* rows = qkv + (size_t)b * T * hd.ld;
    const floatX* dout_base = dout + (size_t)b * T * C + h * HS;  // int-bound(att_channels)
    const size_t row_base = ((size_t)b * NH + h) * T;
    const float scale = 1.0f / sqrtf((float)HS);
    const int q0 = qt * ATT_TILE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row0 = warp * ATT_RPW;

    attention_load_tile<HS>(Qs, rows + hd.q, hd.ld, q0, T, scale);
    attention_load_tile<HS>(dOs, dout_base, C, q0, T, 1.0f);
    attention_load_row_stats(lse_s, D_s, lse, D, row_base, q0, T);
    float dq[ATT_RPW][NDIM];
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
#pragma unroll
        for (int i = 0; i < NDIM; i++) dq[r][i] = 0.0f;
    }
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * ATT_TILE;
        __syncthreads();  // the previous K, V, dS are no longer read (and Q, dO, stats are loaded)
        attention_load_tile<HS>(Ks, rows + hd.k, hd.ld, k0, T, 1.0f);
        attention_load_tile<HS>(Vs, rows + hd.v, hd.ld, k0, T, 1.0f);
        __syncthreads();
        float p[ATT_RPW], ds[ATT_RPW];
        attention_rebuild_ds<HS>(p, ds, Qs, dOs, Ks, Vs, lse_s, D_s, q0, k0, T, row0, lane);
#pragma unroll
        for (int r = 0; r < ATT_RPW; r++) dSs[(row0 + r) * ATT_PSTRIDE + lane] = ds[r];
        __syncwarp();  // only this warp's own dS rows are read below
        attention_accumulate<HS>(dq, dSs, ATT_PSTRIDE, Ks, row0, lane);
    }
#pragma unroll
    for (int r = 0; r < ATT_RPW; r++) {
        const int qi = q0 + row0 + r;
        if (qi >= T) continue;
        floatX* dst = dqkv + ((size_t)b * T + qi) * hd.ld + hd.q;
#pragma unroll
        for (int i = 0; i < NDIM; i++) {
            int d = lane + 32 * i;
            if (d < HS) dst[d] = from_float<floatX>(dq[r][i] * scale);
        }
    }
}

// ---------------------------------------------------------------------------------------
// launchers

inline size_t attention_forward_smem(int HS) {
    return (3 * (size_t)ATT_TILE * (HS + 4) + (size_t)ATT_TILE * ATT_TILE) * sizeof(float);
}
inline size_t attention_dkdv_smem(int HS) {
    return (4 * (size_t)ATT_TILE * (HS + 4) + 2 * (size_t)ATT_TILE * ATT_PSTRIDE + 2 * (size_t)ATT_TILE) * sizeof(float);
}
inline size_t attention_dq_smem(int HS) {
    return (4 * (size_t)ATT_TILE * (HS + 4) + (size_t)ATT_TILE * ATT_PSTRIDE + 2 * (size_t)ATT_TILE) * sizeof(float);
}

inline void attention_check(int B, int T, int NH, int NKV, int HS, const void* a, const void* b, const void* c) {
    CHECK(B > 0 && T > 0 && NH > 0 && NKV > 0 && HS > 0 && NH % NKV == 0,
          "B=%d T=%d NH=%d NKV=%d HS=%d (NH a multiple of NKV)", B, T, NH, NKV, HS);
    CHECK(B <= 65535 && NH <= 65535, "B=%d NH=%d exceed the grid's y/z limits", B, NH);
    // the columns of a qkv row (att_heads: up to (NH + 2 NKV) HS) stay int inside the kernels
    CHECK((int64_t)(NH + 2 * NKV) * HS <= (1 << 26), "(NH + 2 NKV) HS = %lld above 2^26",  // int-bound: att_channels
          (long long)(NH + 2 * NKV) * HS);
    CHECK(is_aligned16(a) && is_aligned16(b) && is_aligned16(c), "pointers %p %p %p not 16-byte aligned", a, b, c);
}

// the head sizes from 16 up, as switch cases (attention_mma.cuh's dispatches take these too; its
// dk/dv kernel of 32 keys a warp only those up to 64)
#define ATTENTION_CASES_16_TO_64(CALL)                                                        \
    case 16: CALL(16); break;                                                                 \
    case 32: CALL(32); break;                                                                 \
    case 48: CALL(48); break;                                                                 \
    case 64: CALL(64); break;
#define ATTENTION_CASES_16_TO_128(CALL)                                                       \
    ATTENTION_CASES_16_TO_64(CALL)                                                            \
    case 80: CALL(80); break;                                                                 \
    case 96: CALL(96); break;                                                                 \
    case 128: CALL(128); break;

// dispatches a templated launch on the head size
#define ATTENTION_DISPATCH(HSVAL, CALL)                                                       \
    switch (HSVAL) {                                                                          \
        case 8: CALL(8); break;  /* the PyTorch debug state's "tiny" config */                \
        ATTENTION_CASES_16_TO_128(CALL)                                                       \
        default: CHECK(false, "head size %d not compiled in (have " ATTENTION_HEAD_SIZES ")", HSVAL); \
    }

// out (B,T,NH*HS) = causal softmax(q k^T / sqrt(HS)) v per query head, qkv (B,T,(NH+2NKV)*HS)
// as att_heads lays it out; lse (B,NH,T) for the backward.
inline void attention_forward_gqa(const CudaContext& ctx, floatX* out, float* lse, const floatX* qkv, int B, int T,
                                  int NH, int NKV, int HS) {
    attention_check(B, T, NH, NKV, HS, out, qkv, qkv);
    CHECK(lse != nullptr, "lse must be given");
    const AttHeadMap hm = att_head_map(NH, NKV);
    dim3 grid((unsigned)ceil_div(T, ATT_TILE), NH, B);
    const size_t smem = attention_forward_smem(HS);
#define ATT_FWD(H)                                                                                     \
    {                                                                                                  \
        CHECK(smem <= ctx.props.sharedMemPerBlockOptin, "attention forward needs %zu bytes of shared memory", smem); \
        if (smem > CUDA_SMEM_DEFAULT_LIMIT)                                                            \
            CHECK_CUDA(cudaFuncSetAttribute(attention_forward_kernel<H>,                               \
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));  \
        attention_forward_kernel<H><<<grid, ATT_THREADS, smem, ctx.stream>>>(out, lse, qkv, T, NH, NKV, hm.kv_magic); \
    }
    ATTENTION_DISPATCH(HS, ATT_FWD)
#undef ATT_FWD
    CHECK_LAUNCH();
}
// multi-head (GPT-2): qkv (B,T,3C), out (B,T,C)
inline void attention_forward(const CudaContext& ctx, floatX* out, float* lse, const floatX* qkv, int B, int T, int C,
                              int NH) {
    CHECK(NH > 0 && C > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    attention_forward_gqa(ctx, out, lse, qkv, B, T, NH, NH, C / NH);
}

// D (B,NH,T) = dout . out per row, in ctx.workspace: the backward's first step (here and in
// attention_mma.cuh). Returns D.
inline const float* attention_backward_preprocess(const CudaContext& ctx, const floatX* out, const floatX* dout, int B,
                                                  int T, int NH, int HS) {
    const size_t rows = (size_t)B * NH * T;
    CHECK(rows * sizeof(float) <= ctx.workspace_bytes, "B*NH*T=%zu floats do not fit the workspace (%zu bytes)", rows,
          ctx.workspace_bytes);
    CHECK(HS % x128::size == 0 && is_aligned16(out) && is_aligned16(dout),
          "head size %d (a multiple of %d), out=%p dout=%p (16-byte aligned)", HS, (int)x128::size, (const void*)out,
          (const void*)dout);
    float* D = (float*)ctx.workspace;
    int G = 1;  // lanes a row: the 16-byte groups of a head, rounded up to a power of two
    while (G < 32 && G * (int)x128::size < HS) G *= 2;
    const size_t pre_threads = rows * G;
    CHECK(ceil_div(pre_threads, 256) < (1u << 31), "B*NH*T=%zu", rows);
    attention_backward_preprocess_kernel<<<(unsigned)ceil_div(pre_threads, 256), 256, 0, ctx.stream>>>(
        D, out, dout, B, T, NH, HS, G);
    CHECK_LAUNCH();
    return D;
}

// dqkv (B,T,(NH+2NKV)*HS) = the gradient of attention_forward_gqa given dout (B,T,NH*HS), its
// inputs qkv, its outputs out and lse. Overwrites dqkv (every element has exactly one writer:
// a key/value head's dk and dv, summed over its group, come from one block); the CPU
// reference accumulates into a zeroed buffer, the same thing. Uses ctx.workspace for D
// (B*NH*T floats).
inline void attention_backward_gqa(const CudaContext& ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                                   const floatX* out, const float* lse, int B, int T, int NH, int NKV, int HS) {
    attention_check(B, T, NH, NKV, HS, dqkv, dout, qkv);
    CHECK(is_aligned16(out) && lse != nullptr, "out=%p lse=%p", (const void*)out, (const void*)lse);
    const float* D = attention_backward_preprocess(ctx, out, dout, B, T, NH, HS);
    const AttHeadMap hm = att_head_map(NH, NKV);
    dim3 grid_kv((unsigned)ceil_div(T, ATT_TILE), NKV, B), grid_q((unsigned)ceil_div(T, ATT_TILE), NH, B);
    const size_t smem_kv = attention_dkdv_smem(HS), smem_q = attention_dq_smem(HS);
    CHECK(smem_kv <= ctx.props.sharedMemPerBlockOptin && smem_q <= ctx.props.sharedMemPerBlockOptin,
          "attention backward needs %zu / %zu bytes of shared memory, device allows %zu", smem_kv, smem_q,
          (size_t)ctx.props.sharedMemPerBlockOptin);
#define ATT_BWD(H)                                                                                         \
    {                                                                                                      \
        if (smem_kv > CUDA_SMEM_DEFAULT_LIMIT)                                                             \
            CHECK_CUDA(cudaFuncSetAttribute(attention_backward_dkdv_kernel<H>,                             \
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_kv));   \
        attention_backward_dkdv_kernel<H><<<grid_kv, ATT_THREADS, smem_kv, ctx.stream>>>(dqkv, qkv, dout, lse, D, T, NH, NKV, \
                                                                                          hm.group);     \
        CHECK_LAUNCH();                                                                                    \
        if (smem_q > CUDA_SMEM_DEFAULT_LIMIT)                                                              \
            CHECK_CUDA(cudaFuncSetAttribute(attention_backward_dq_kernel<H>,                               \
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_q));    \
        attention_backward_dq_kernel<H><<<grid_q, ATT_THREADS, smem_q, ctx.stream>>>(dqkv, qkv, dout, lse, D, T, NH, NKV, \
                                                                                      hm.kv_magic);      \
        CHECK_LAUNCH();                                                                                    \
    }
    ATTENTION_DISPATCH(HS, ATT_BWD)
#undef ATT_BWD
}
// multi-head (GPT-2): qkv and dqkv (B,T,3C), dout (B,T,C)
inline void attention_backward(const CudaContext& ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                               const floatX* out, const float* lse, int B, int T, int C, int NH) {
    CHECK(NH > 0 && C > 0 && C % NH == 0, "C=%d NH=%d", C, NH);
    attention_backward_gqa(ctx, dqkv, dout, qkv, out, lse, B, T, NH, NH, C / NH);
}
