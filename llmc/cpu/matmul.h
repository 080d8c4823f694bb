// matmul.h: the fully connected layer on the CPU (fp32, OpenMP), forward and backward.
// defines: matmul_forward, matmul_backward, and the one GEMM they share: gemm_f32
//
// All three products of a linear layer are the same GEMM, C (M,N) = A (M,K) @ B (K,N), with
// A and B read through strides, so one blocked kernel serves them all:
//   forward   out   = inp  @ weight^T   M=B*T  N=OC  K=C   (A row-major, B "transposed")
//   backward  dinp += dout @ weight     M=B*T  N=C   K=OC  (both row-major)
//             dW   += dout^T @ inp      M=OC   N=C   K=B*T (A "transposed", B row-major)
//
// Blocking scheme (Goto / BLIS style), sized for one core's caches (L1 48 KB, L2 2 MB):
//   C is cut into macro-tiles of MC x NC (C tile 811 KB, stays in L2 across K); threads take
//   whole macro-tiles, so no two threads ever write the same element of C (dweight needs no
//   atomics, no reduction). For each macro-tile, K is walked in slices of KC:
//     pack A's MC x KC block into micro-panels of MR rows  (k-major: a[k][0..MR))  -> L2
//     for each NR-wide column panel of the tile:
//       pack B's KC x NR micro-panel                       (k-major: b[k][0..NR))  -> L1, 32 KB
//       for each MR-tall panel of A (streams from L2):
//         micro-kernel: an MR x NR block of C held in registers, KC rank-1 updates.
//   Packing zero-pads the ragged edges, so the micro-kernel only ever sees full tiles;
//   edge tiles are computed into a small buffer and the valid part copied out.
// With AVX-512 the micro-kernel holds 12 x 32 floats = 24 zmm accumulators: per k it loads
// 2 vectors of B and broadcasts 12 scalars of A for 24 FMAs. Without AVX-512 the same tile
// is written as plain loops that the compiler vectorizes for whatever the target has.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#ifdef __AVX512F__
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../utils.h"

constexpr int GEMM_MR = 12;   // rows of C per micro-tile (broadcasts of A per k)
constexpr int GEMM_NR = 32;   // columns of C per micro-tile (2 zmm of B per k)
constexpr int GEMM_KC = 256;  // K slice: a B micro-panel is KC*NR*4 = 32 KB, fits L1
constexpr int GEMM_MC = 264;  // rows per macro-tile (22*MR): the B*T=256 rows of a step at once
constexpr int GEMM_NC = 768;  // most columns per macro-tile: C tile MC*NC*4 = 811 KB stays in L2

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
    for (int ir = 0; ir < mc; ir += GEMM_MR, dst += (size_t)kc * GEMM_MR) {
        int rows = std::min(GEMM_MR, mc - ir);
        if (A.cs == 1) {
            // rows of A are contiguous (forward's inp, backward's dout): read along each row
            for (int r = 0; r < rows; r++) {
                const float* src = A.p + (i0 + ir + r) * A.rs + p0;
                for (int p = 0; p < kc; p++) dst[p * GEMM_MR + r] = src[p];
            }
        } else {
            // columns of A are contiguous (dout^T in dweight): read along each column
            for (int p = 0; p < kc; p++) {
                for (int r = 0; r < rows; r++) dst[p * GEMM_MR + r] = A.at(i0 + ir + r, p0 + p);
            }
        }
        for (int r = rows; r < GEMM_MR; r++) {
            for (int p = 0; p < kc; p++) dst[p * GEMM_MR + r] = 0.0f;
        }
    }
}

// Copies rows [p0, p0+kc) x cols [j0, j0+nc) of B into ceil(nc/NR) micro-panels, each
// kc x NR with the NR columns contiguous per k; columns past nc are zero.
inline void gemm_pack_b(float* dst, GemmView B, size_t p0, int kc, size_t j0, int nc) {
    for (int jr = 0; jr < nc; jr += GEMM_NR, dst += (size_t)kc * GEMM_NR) {
        int cols = std::min(GEMM_NR, nc - jr);
        if (B.cs == 1) {
            // rows of B are contiguous (inp, weight in backward): a plain copy per k
            for (int p = 0; p < kc; p++) {
                const float* src = B.p + (p0 + p) * B.rs + j0 + jr;
                float* d = dst + p * GEMM_NR;
                for (int c = 0; c < cols; c++) d[c] = src[c];
                for (int c = cols; c < GEMM_NR; c++) d[c] = 0.0f;
            }
        } else {
            // B = weight^T in forward: each column of B is a contiguous row of weight
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

#ifdef __AVX512F__
inline void gemm_micro_kernel(int kc, const float* a, const float* b, float* c, size_t ldc,
                              const float* init) {
    static_assert(GEMM_NR == 32, "the AVX-512 micro-kernel holds 2 zmm per row");
    __m512 acc[GEMM_MR][2];
#pragma GCC unroll 12
    for (int r = 0; r < GEMM_MR; r++) {
        acc[r][0] = _mm512_setzero_ps();
        acc[r][1] = _mm512_setzero_ps();
    }
    for (int p = 0; p < kc; p++, a += GEMM_MR, b += GEMM_NR) {
        __m512 b0 = _mm512_load_ps(b);
        __m512 b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
        for (int r = 0; r < GEMM_MR; r++) {
            __m512 ar = _mm512_set1_ps(a[r]);
            acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < GEMM_MR; r++) {
        float* cr = c + r * ldc;
        const float* base = init ? init : cr;
        _mm512_storeu_ps(cr, _mm512_add_ps(_mm512_loadu_ps(base), acc[r][0]));
        _mm512_storeu_ps(cr + 16, _mm512_add_ps(_mm512_loadu_ps(base + 16), acc[r][1]));
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
