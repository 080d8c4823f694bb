// matmul.h: the fully connected layer on the CPU (fp32, OpenMP), forward and backward.
// defines: matmul_forward, matmul_backward, and the one GEMM they share: gemm_f32;
//          GEMM_KERNEL_NAME (which micro-kernel this build has, for benchmarks)
//
// All three products of a linear layer are the same GEMM, C (M,N) = A (M,K) @ B (K,N), with
// A and B read through strides, so one blocked kernel serves them all:
//   forward   out   = inp  @ weight^T   M=B*T  N=OC  K=C   (A row-major, B "transposed")
//   backward  dinp += dout @ weight     M=B*T  N=C   K=OC  (both row-major)
//             dW   += dout^T @ inp      M=OC   N=C   K=B*T (A "transposed", B row-major)
//
// Blocking scheme (Goto / BLIS style), sized for one core's caches (L1 32-48 KB, L2 1-2 MB):
//   C is cut into macro-tiles of MC x NC (C tile 811 KB, stays in L2 across K); threads take
//   whole macro-tiles, so no two threads ever write the same element of C (dweight needs no
//   atomics, no reduction). For each macro-tile, K is walked in slices of KC:
//     pack A's MC x KC block into micro-panels of MR rows  (k-major: a[k][0..MR))  -> L2
//     for each NR-wide column panel of the tile:
//       pack B's KC x NR micro-panel                       (k-major: b[k][0..NR))  -> L1
//       for each MR-tall panel of A (streams from L2):
//         micro-kernel: an MR x NR block of C held in registers, KC rank-1 updates.
//   Packing zero-pads the ragged edges, so the micro-kernel only ever sees full tiles;
//   edge tiles are computed into a small buffer and the valid part copied out.
//
// The micro-kernel is as big a tile of C as the vector registers hold, leaving room for one
// row of B and one broadcast of A. Per k it loads NR/W vectors of B (W floats each), and for
// each of the MR rows broadcasts one value of A and does NR/W FMAs into that row's accumulators:
//   AVX-512 (32 zmm, W=16): 12 x 32 tile = 24 accumulators + 2 of B + 1 of A; 24 FMA per 14 loads
//   AVX2+FMA (16 ymm, W=8):  6 x 16 tile = 12 accumulators + 2 of B + 1 of A; 12 FMA per 8 loads
//   anything else: a 12 x 32 tile written as plain loops the compiler vectorizes (NEON, SSE)
// -march picks it: __AVX512F__ -> AVX-512, else __AVX2__ and __FMA__ -> AVX2, else plain loops;
// -DGEMM_PLAIN forces the plain loops (tests and benchmarks compare against them).
// Two FMA pipes with a latency of 4-5 cycles need 8-10 independent FMAs in flight: 12 (or 24)
// accumulators keep them busy, and the loads that feed them (2 of B and MR broadcasts per k:
// 8 loads per 6 cycles with AVX2, 14 per 12 with AVX-512) fit in the 2-3 a core can issue per
// cycle. A smaller tile would leave the pipes waiting for their own results; a bigger one
// would spill accumulators to the stack.
//
// Summation order: every element of C is computed by one thread, as KC slices in ascending k;
// within a slice a register starting at zero takes one FMA per k in ascending order, then is
// added to C. Neither the thread count nor the tile shape changes that order, so results do
// not depend on OMP_NUM_THREADS, and the AVX-512 and AVX2 kernels give the same bits.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#if (defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))) && !defined(GEMM_PLAIN)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../utils.h"

// One vector of W floats and the five operations the micro-kernel needs.
#if defined(__AVX512F__) && !defined(GEMM_PLAIN)
#define GEMM_KERNEL_NAME "AVX-512 12x32"
#define GEMM_SIMD 1
constexpr int GEMM_MR = 12;  // rows of C per micro-tile (broadcasts of A per k)
constexpr int GEMM_NR = 32;  // columns of C per micro-tile (vectors of B per k: NR/W)
constexpr int GEMM_W = 16;   // floats per vector
typedef __m512 gemm_vec;
inline gemm_vec gemm_vec_zero() { return _mm512_setzero_ps(); }
inline gemm_vec gemm_vec_load(const float* p) { return _mm512_load_ps(p); }  // 64-byte aligned
inline gemm_vec gemm_vec_loadu(const float* p) { return _mm512_loadu_ps(p); }
inline void gemm_vec_storeu(float* p, gemm_vec x) { _mm512_storeu_ps(p, x); }
inline gemm_vec gemm_vec_broadcast(const float* p) { return _mm512_set1_ps(*p); }
inline gemm_vec gemm_vec_add(gemm_vec x, gemm_vec y) { return _mm512_add_ps(x, y); }
inline gemm_vec gemm_vec_fma(gemm_vec x, gemm_vec y, gemm_vec acc) { return _mm512_fmadd_ps(x, y, acc); }
#elif defined(__AVX2__) && defined(__FMA__) && !defined(GEMM_PLAIN)
#define GEMM_KERNEL_NAME "AVX2+FMA 6x16"
#define GEMM_SIMD 1
constexpr int GEMM_MR = 6;
constexpr int GEMM_NR = 16;
constexpr int GEMM_W = 8;
typedef __m256 gemm_vec;
inline gemm_vec gemm_vec_zero() { return _mm256_setzero_ps(); }
inline gemm_vec gemm_vec_load(const float* p) { return _mm256_load_ps(p); }  // 32-byte aligned
inline gemm_vec gemm_vec_loadu(const float* p) { return _mm256_loadu_ps(p); }
inline void gemm_vec_storeu(float* p, gemm_vec x) { _mm256_storeu_ps(p, x); }
inline gemm_vec gemm_vec_broadcast(const float* p) { return _mm256_broadcast_ss(p); }
inline gemm_vec gemm_vec_add(gemm_vec x, gemm_vec y) { return _mm256_add_ps(x, y); }
inline gemm_vec gemm_vec_fma(gemm_vec x, gemm_vec y, gemm_vec acc) { return _mm256_fmadd_ps(x, y, acc); }
#else
#define GEMM_KERNEL_NAME "plain loops 12x32"
constexpr int GEMM_MR = 12;
constexpr int GEMM_NR = 32;
#endif
// KC is the same for every kernel: it fixes where the sum over k is cut, and so the bits.
constexpr int GEMM_KC = 256;  // K slice: a B micro-panel is KC*NR*4 = 16-32 KB, fits L1
constexpr int GEMM_MC = 264;  // rows per macro-tile (22*12, 44*6): the B*T=256 rows of a step at once
constexpr int GEMM_NC = 768;  // most columns per macro-tile: C tile MC*NC*4 = 811 KB stays in L2
static_assert(GEMM_MC % GEMM_MR == 0 && GEMM_NC % GEMM_NR == 0, "macro-tiles are whole micro-tiles");
// A packed panel's indices stay int: p < kc <= KC rows of at most NR floats.
static_assert(GEMM_KC * 32 < (1 << 20), "panel indices");  // int-bound: gemm_panel

// A strided read-only view of a matrix: element (i, j) is at p[i*rs + j*cs].
// A transposed matrix is the same memory with rs and cs swapped.
struct GemmView {
    const float* p;
    size_t rs, cs;
    float at(size_t i, size_t j) const { return p[i * rs + j * cs]; }
};

// ----------------------------------------------------------------------------
// packing

// Copies rows [i0, i0+mc) x cols [p0, p0+kc) of A into ceil(mc/MR) micro-panels, each
// kc x MR with the MR rows contiguous per k; rows past mc are zero.
inline void gemm_pack_a(float* dst, GemmView A, size_t i0, int mc, size_t p0, int kc) {
    const size_t panel = (size_t)kc * GEMM_MR;  // floats per micro-panel
    if (A.cs == 1) {
        // rows of A are contiguous (forward's inp, backward's dout): read along each row, and
        // ask for the row two ahead while copying this one (rows of a wide dout are far apart,
        // each a short run the hardware prefetcher would start on too late)
        for (int i = 0; i < mc; i++) {
            const float* src = A.p + (i0 + i) * A.rs + p0;
            if (i + 2 < mc) {
                for (int p = 0; p < kc; p += 16) __builtin_prefetch(src + 2 * A.rs + p, 0, 2);
            }
            float* d = dst + (i / GEMM_MR) * panel + i % GEMM_MR;
            for (int p = 0; p < kc; p++) d[p * GEMM_MR] = src[p];  // int-bound(gemm_panel)
        }
    } else {
        // columns of A are contiguous (dout^T in dweight): read along each column, all mc
        // rows at once. Column p is a row of dout, far from the next: a panel at a time would
        // take only MR floats from each, and a TLB miss for each. Column p+2 is asked for
        // while p is copied, as above.
        for (int p = 0; p < kc; p++) {
            if (p + 2 < kc) {
                const float* ahead = &A.p[i0 * A.rs + (p0 + p + 2) * A.cs];
                for (int i = 0; i < mc; i += 16) __builtin_prefetch(ahead + i * A.rs, 0, 2);
            }
            float* d = dst + p * GEMM_MR;  // int-bound(gemm_panel)
            for (int ir = 0; ir < mc; ir += GEMM_MR, d += panel) {
                const int rows = std::min(GEMM_MR, mc - ir);
                for (int r = 0; r < rows; r++) d[r] = A.at(i0 + ir + r, p0 + p);
            }
        }
    }
    if (mc % GEMM_MR != 0) {
        float* d = dst + (mc / GEMM_MR) * panel;
        for (int p = 0; p < kc; p++) {
            for (int r = mc % GEMM_MR; r < GEMM_MR; r++) d[p * GEMM_MR + r] = 0.0f;
        }
    }
}

// Copies rows [p0, p0+kc) x cols [j0, j0+nc) of B into ceil(nc/NR) micro-panels, each
// kc x NR with the NR columns contiguous per k; columns past nc are zero.
inline void gemm_pack_b(float* dst, GemmView B, size_t p0, int kc, size_t j0, int nc) {
    for (int jr = 0; jr < nc; jr += GEMM_NR, dst += (size_t)kc * GEMM_NR) {
        int cols = std::min(GEMM_NR, nc - jr);
        if (B.cs == 1) {
            // rows of B are contiguous (inp, weight in backward): a plain copy per k. The
            // next panel (the next NR floats of each row) is fetched while this one is copied:
            // rows are far apart and each panel reads only 64-128 bytes of a row, too little
            // for the hardware prefetcher to see a stream.
            for (int p = 0; p < kc; p++) {
                const float* src = B.p + (p0 + p) * B.rs + j0 + jr;
                float* d = dst + p * GEMM_NR;  // int-bound(gemm_panel)
                for (int q = 0; q < GEMM_NR; q += 16) __builtin_prefetch(src + GEMM_NR + q, 0, 2);
                for (int c = 0; c < cols; c++) d[c] = src[c];
                for (int c = cols; c < GEMM_NR; c++) d[c] = 0.0f;
            }
        } else {
            // B = weight^T in forward: each column of B is a contiguous row of weight. The
            // weights stream from DRAM in short runs (kc floats per row), too short for the
            // hardware prefetcher: ask for the row PF columns ahead while copying this one.
            const int PF = 4;
            for (int c = 0; c < cols; c++) {
                const float* src = B.p + (j0 + jr + c) * B.cs + p0 * B.rs;
                if (c + PF < cols) {
                    const float* ahead = src + PF * B.cs;
                    for (int p = 0; p < kc; p += 16) __builtin_prefetch(ahead + p * B.rs, 0, 2);
                }
                for (int p = 0; p < kc; p++) dst[p * GEMM_NR + c] = src[p * B.rs];
            }
            for (int p = 0; p < kc; p++) {
                for (int c = cols; c < GEMM_NR; c++) dst[p * GEMM_NR + c] = 0.0f;
            }
        }
    }
}

// ----------------------------------------------------------------------------
// micro-kernel: one MR x NR tile of C
//   acc = sum over k < kc of a[k][0..MR) outer b[k][0..NR)
//   c[r][0..NR) = init[0..NR) + acc[r]   when init != nullptr (the first K slice of an overwrite)
//   c[r][0..NR) += acc[r]                 otherwise
// c has row stride ldc; a and b are packed micro-panels (64-byte aligned).

#ifdef GEMM_SIMD
// The same source for AVX-512 and AVX2: acc[r][v] holds row r, columns [v*W, v*W+W) of the
// tile. The loops over r and v have constant trip counts and are unrolled (GCC needs the
// pragma for r, and does v by itself), so every acc[r][v] is a register; a loop left rolled
// would index acc at run time and keep it on the stack.
inline void gemm_micro_kernel(int kc, const float* a, const float* b, float* c, size_t ldc,
                              const float* init) {
    constexpr int NV = GEMM_NR / GEMM_W;  // vectors per row of the tile
    // C is read and written only after the k loop: ask for its lines now, so that they arrive
    // while the loop runs (dweight's C is the whole weight gradient, mostly not in cache)
    for (int r = 0; r < GEMM_MR; r++) {
        __builtin_prefetch(c + r * ldc, 1, 3);
        __builtin_prefetch(c + r * ldc + GEMM_NR - 1, 1, 3);
    }
    gemm_vec acc[GEMM_MR][NV];
#pragma GCC unroll 12
    for (int r = 0; r < GEMM_MR; r++) {
        for (int v = 0; v < NV; v++) acc[r][v] = gemm_vec_zero();
    }
    for (int p = 0; p < kc; p++, a += GEMM_MR, b += GEMM_NR) {
        gemm_vec bv[NV];
        for (int v = 0; v < NV; v++) bv[v] = gemm_vec_load(b + v * GEMM_W);
#pragma GCC unroll 12
        for (int r = 0; r < GEMM_MR; r++) {
            gemm_vec ar = gemm_vec_broadcast(a + r);
            for (int v = 0; v < NV; v++) acc[r][v] = gemm_vec_fma(ar, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < GEMM_MR; r++) {
        float* cr = c + r * ldc;
        const float* base = init ? init : cr;
        for (int v = 0; v < NV; v++) {
            gemm_vec_storeu(cr + v * GEMM_W, gemm_vec_add(gemm_vec_loadu(base + v * GEMM_W), acc[r][v]));
        }
    }
}
#else
// Portable version of the same tile: the j loops vectorize (AVX2, NEON) and acc stays hot.
inline void gemm_micro_kernel(int kc, const float* a, const float* b, float* c, size_t ldc,
                              const float* init) {
    float acc[GEMM_MR][GEMM_NR] = {};
    for (int p = 0; p < kc; p++, a += GEMM_MR, b += GEMM_NR) {
        for (int r = 0; r < GEMM_MR; r++) {
            for (int j = 0; j < GEMM_NR; j++) acc[r][j] += a[r] * b[j];
        }
    }
    for (int r = 0; r < GEMM_MR; r++) {
        float* cr = c + r * ldc;
        const float* base = init ? init : cr;
        for (int j = 0; j < GEMM_NR; j++) cr[j] = base[j] + acc[r][j];
    }
}
#endif

// ----------------------------------------------------------------------------
// the GEMM

inline float* gemm_alloc(size_t n) {
    // round up: aligned_alloc wants a multiple of the alignment
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    float* p = (float*)aligned_alloc(64, bytes == 0 ? 64 : bytes);
    if (p == nullptr) fail("out of memory allocating %zu bytes", bytes);
    return p;
}

// C (M,N), row stride ldc:
//   accumulate: C += A @ B
//   otherwise:  C  = A @ B + bias (bias (N) broadcast over rows; nullptr means zero)
inline void gemm_f32(float* C, size_t ldc, GemmView A, GemmView B, const float* bias, int M,
                     int N, int K, bool accumulate) {
    if (M <= 0 || N <= 0) return;
    // the row every tile starts from when overwriting: bias, zero-padded to whole NR panels
    const int n_padded = (N + GEMM_NR - 1) / GEMM_NR * GEMM_NR;
    float* init_row = nullptr;
    if (!accumulate) {
        init_row = gemm_alloc(n_padded);
        for (int j = 0; j < n_padded; j++) init_row[j] = (bias && j < N) ? bias[j] : 0.0f;
    }
    if (K <= 0) {  // empty sum: C keeps its value, or becomes the bias
        if (!accumulate) {
            for (int i = 0; i < M; i++) memcpy(C + i * ldc, init_row, N * sizeof(float));
        }
        free(init_row);
        return;
    }
    // Macro-tiles: MC rows by nc columns. With few tiles, a count the threads cannot split
    // evenly idles a core (one tile of N=768 on 2 threads), so cut N finer until it splits.
#ifdef _OPENMP
    const int nthreads = omp_get_max_threads();
#else
    const int nthreads = 1;
#endif
    const int m_tiles = (M + GEMM_MC - 1) / GEMM_MC;
    const int n_panels = (N + GEMM_NR - 1) / GEMM_NR;
    int n_tiles = (N + GEMM_NC - 1) / GEMM_NC;
    while ((m_tiles * n_tiles) % nthreads != 0 && n_tiles < n_panels) n_tiles++;
    const int nc_max = (n_panels + n_tiles - 1) / n_tiles * GEMM_NR;
    n_tiles = (N + nc_max - 1) / nc_max;
#pragma omp parallel
    {
        // per-thread packing buffers, reused for every macro-tile this thread takes
        float* a_pack = gemm_alloc((size_t)GEMM_MC * GEMM_KC);
        float* b_pack = gemm_alloc((size_t)GEMM_KC * GEMM_NR);
        alignas(64) float edge[GEMM_MR * GEMM_NR];  // C tile that hangs over the matrix edge
#pragma omp for collapse(2) schedule(dynamic)
        for (int it = 0; it < m_tiles; it++) {
            for (int jt = 0; jt < n_tiles; jt++) {
                const size_t i0 = (size_t)it * GEMM_MC, j0 = (size_t)jt * nc_max;
                const int mc = std::min(GEMM_MC, M - (int)i0);
                const int nc = std::min(nc_max, N - (int)j0);
                for (int p0 = 0; p0 < K; p0 += GEMM_KC) {
                    const int kc = std::min(GEMM_KC, K - p0);
                    const bool first = (p0 == 0) && !accumulate;
                    gemm_pack_a(a_pack, A, i0, mc, p0, kc);
                    for (int jr = 0; jr < nc; jr += GEMM_NR) {
                        // one B micro-panel, packed right before use so it is hot in L1
                        const int cols = std::min(GEMM_NR, nc - jr);
                        gemm_pack_b(b_pack, B, p0, kc, j0 + jr, cols);
                        const float* bp = b_pack;
                        const float* init = first ? init_row + j0 + jr : nullptr;
                        for (int ir = 0; ir < mc; ir += GEMM_MR) {
                            const float* ap = a_pack + (size_t)(ir / GEMM_MR) * kc * GEMM_MR;
                            float* c = C + (i0 + ir) * ldc + j0 + jr;
                            const int rows = std::min(GEMM_MR, mc - ir);
                            if (rows == GEMM_MR && cols == GEMM_NR) {
                                gemm_micro_kernel(kc, ap, bp, c, ldc, init);
                                continue;
                            }
                            // ragged edge: run the full tile on a copy, write back what exists
                            for (int r = 0; r < rows; r++) {
                                for (int j = 0; j < cols; j++) edge[r * GEMM_NR + j] = c[r * ldc + j];
                            }
                            gemm_micro_kernel(kc, ap, bp, edge, GEMM_NR, init);
                            for (int r = 0; r < rows; r++) {
                                for (int j = 0; j < cols; j++) c[r * ldc + j] = edge[r * GEMM_NR + j];
                            }
                        }
                    }
                }
            }
        }
        free(a_pack);
        free(b_pack);
    }
    free(init_row);
}

// ----------------------------------------------------------------------------
// the layer

// out (B,T,OC) = inp (B,T,C) @ weight (OC,C)^T + bias (OC); bias may be nullptr
inline void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                           int B, int T, int C, int OC) {
    CHECK(B >= 0 && T >= 0 && C >= 0 && OC >= 0, "B=%d T=%d C=%d OC=%d", B, T, C, OC);
    const int BT = B * T;
    GemmView a = {inp, (size_t)C, 1};     // inp (BT, C)
    GemmView w_t = {weight, 1, (size_t)C};  // weight^T (C, OC)
    gemm_f32(out, OC, a, w_t, bias, BT, OC, C, false);
}

// Accumulates (+=) the gradients of matmul_forward, given dout (B,T,OC):
//   dinp (B,T,C) += dout @ weight;  dweight (OC,C) += dout^T @ inp;  dbias (OC) += sum_bt dout
// dbias may be nullptr (a layer without bias).
inline void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                            const float* inp, const float* weight, int B, int T, int C, int OC) {
    CHECK(B >= 0 && T >= 0 && C >= 0 && OC >= 0, "B=%d T=%d C=%d OC=%d", B, T, C, OC);
    const int BT = B * T;
    GemmView dout_v = {dout, (size_t)OC, 1};    // dout (BT, OC)
    GemmView dout_t = {dout, 1, (size_t)OC};    // dout^T (OC, BT)
    GemmView w = {weight, (size_t)C, 1};        // weight (OC, C)
    GemmView in = {inp, (size_t)C, 1};          // inp (BT, C)
    gemm_f32(dinp, C, dout_v, w, nullptr, BT, C, OC, true);
    gemm_f32(dweight, C, dout_t, in, nullptr, OC, C, BT, true);
    if (dbias != nullptr) {
        // each thread owns a range of o, and sums down the BT rows for it
#pragma omp parallel for schedule(static)
        for (int o0 = 0; o0 < OC; o0 += 64) {
            const int o1 = std::min(OC, o0 + 64);
            for (int bt = 0; bt < BT; bt++) {
                const float* row = dout + (size_t)bt * OC;
                for (int o = o0; o < o1; o++) dbias[o] += row[o];
            }
        }
    }
}
