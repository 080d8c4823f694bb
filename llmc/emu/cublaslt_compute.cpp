// cublaslt_compute.cpp: the emulated cuBLASLt's one algorithm (and its split-K forms), run on the CPU when the stream
// reaches the work that cublasLtMatmul queued (llmc/emu/cublaslt.cpp takes the calls, checks
// the problem and queues it):
//   D = epilogue(alpha op(A) op(B) + beta C)      column-major, D and C m x n, op(A) m x k
// the epilogues' definitions, FP8's scales, AMAX and the rounding of an fp8 D, and what the
// matmul reads and writes, for the race check.
//
// Arithmetic (what the GPU's kernels do, as far as NVIDIA says):
//   - products summed in fp32, in order of k (one fixed order: the result is deterministic);
//     with a split-K algorithm (Job::splits > 1, cublaslt.cpp's heuristic_answers) each of the
//     parts, k * s / splits to k * (s + 1) / splits, is summed so from zero and the parts' sums
//     are then added in order of s: the same products, rounded in another order;
//     bf16 inputs widen exactly; CUBLAS_COMPUTE_32F_FAST_TF32 first rounds fp32 A and B to
//     TF32 (10 mantissa bits), _FAST_16BF to bf16; C is added in fp32
//   - the epilogue works in fp32 on x = alpha * acc + beta * C (+ bias), then D is rounded
//     once to its type (bf16: to nearest even); C is not read when beta is 0 (it may be NaN)
//
// FP8 (A and B CUDA_R_8F_E4M3 or CUDA_R_8F_E5M2), [D]'s FP8 section and [N]'s reference of it
// (fp8_matmul_reference; test_amax holds amax to the result computed without scale_D):
//   D = scale_D * epilogue(alpha * scale_A * scale_B * op(A) op(B) + beta * C)
//   AMAX_D = max |epilogue(...)| over D's elements: the result before scale_D
// where scale_A, scale_B, scale_D are the device floats the descriptor's A_SCALE_POINTER,
// B_SCALE_POINTER, D_SCALE_POINTER name (NULL: 1) and AMAX_D_POINTER a device float written,
// all read and written when the stream reaches the work. The fp8 numbers widen exactly, their
// products are exact in fp32 and summed as above; an fp8 D is the fp32 value times scale_D,
// rounded to nearest even and saturated to the largest finite number, NaN staying NaN ([P]: the
// only conversion PTX has from f32 to fp8 is cvt.rn.satfinite; the emulated cuda_fp8.h's
// __NV_SATFINITE conversion). What FP8 accepts and refuses: fp8_types, fp8_shapes in cublaslt.cpp.
// FAST_ACCUM: [H] "intermediate results will not periodically be promoted to a higher precision".
// [E] ASSUMPTION: with it the emulator still sums in fp32, exactly as without. NVIDIA documents no
// rule for the lower precision (DeepSeek-V3's report, arXiv 2412.19437, measured "around 14 bits"
// kept on H800, which is not a rounding rule), so the GPU with FAST_ACCUM may differ from the
// emulator by more than fp32's rounding; without it the GPU's periodic promotion to fp32 is what
// the emulator's fp32 sum models.
//
// The letters name the sources, as cublaslt.cpp's opening comment lists them in full: [H] NVIDIA's
// cublasLt.h; [N] NVIDIA's own reference of the epilogues (nvmath-python's simulate_epilog) and of
// FP8 (fp8_matmul_reference, test_amax); [D] the cuBLAS documentation; [P] the PTX ISA; [E] the
// emulator's own choice where NVIDIA says nothing, each one saying why.
#include "cublaslt_internal.h"  // View, Flags, Problem, Job, type_size, transposed: the work queued

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace emu::cublaslt {

namespace {

inline float to_f(float x) { return x; }
inline float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
inline float to_f(__nv_fp8_e4m3 x) { return float(x); }
inline float to_f(__nv_fp8_e5m2 x) { return float(x); }
template <typename T> inline T from_f(float x);
template <> inline float from_f<float>(float x) { return x; }
template <> inline __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
// to nearest even, saturated to the largest finite number, NaN a NaN (the class's constructor:
// __NV_SATFINITE); [P] cvt.rn.satfinite, the only f32 to fp8 conversion the GPU has
template <> inline __nv_fp8_e4m3 from_f<__nv_fp8_e4m3>(float x) { return __nv_fp8_e4m3(x); }
template <> inline __nv_fp8_e5m2 from_f<__nv_fp8_e5m2>(float x) { return __nv_fp8_e5m2(x); }

enum Rounding { ROUND_NONE, ROUND_TF32, ROUND_BF16 };

// TF32 keeps 10 of fp32's 23 mantissa bits. NVIDIA does not say how cuBLAS gets there
// (PyTorch's notes say the tensor cores read the first 10 bits; CUTLASS rounds half an ulp
// away, PTX's cvt.rna.tf32.f32). [E] To nearest, ties away from zero; Inf and NaN kept.
inline float round_tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    u = (u + 0x1000u) & ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
}

inline float round_input(float x, Rounding r) {
    return r == ROUND_TF32 ? round_tf32(x) : r == ROUND_BF16 ? __bfloat162float(__float2bfloat16_rn(x)) : x;
}

// [N] GELU is the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and DGELU's
// factor its derivative (simulate_epilog's gelu and dgelu)
constexpr float GELU_K = 0.7978845608028654f;  // sqrt(2/pi)
inline float gelu(float x) { return 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x))); }
inline float gelu_grad(float x) {
    const float x2 = x * x, th = tanhf(GELU_K * (x + 0.044715f * x2 * x));
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * 0.044715f * x2);
}

// out (v.rows x v.cols, column-major, packed) = batch member b of v, rounded as r says
// OpenMP only where the work pays for waking the threads: the trainer's small products would
// otherwise spend their time in the team's barriers (ruinous on a busy machine)
constexpr int64_t PARALLEL_MIN_WORK = 1 << 22;

template <typename T> void pack_t(float* out, const View& v, int32_t b, Rounding r) {
    const T* base = static_cast<const T*>(v.p) + b * v.bs;
#pragma omp parallel for schedule(static) if (v.rows * v.cols >= PARALLEL_MIN_WORK / 16)
    for (int64_t c = 0; c < v.cols; c++)
        for (int64_t i = 0; i < v.rows; i++) out[c * v.rows + i] = round_input(to_f(base[i * v.rs + c * v.cs]), r);
}
void pack(float* out, const View& v, int32_t b, Rounding r) {
    if (v.type == CUDA_R_32F) pack_t<float>(out, v, b, r);
    else if (v.type == CUDA_R_16BF) pack_t<__nv_bfloat16>(out, v, b, r);
    else if (v.type == CUDA_R_8F_E4M3) pack_t<__nv_fp8_e4m3>(out, v, b, r);
    else pack_t<__nv_fp8_e5m2>(out, v, b, r);
}

// out[i] = the sum over c of v(i, c), in order of c, in fp32: a bias gradient
template <typename TS, typename TD> void row_sums_t(TD* out, const View& v, int32_t b) {
    const TS* base = static_cast<const TS*>(v.p) + b * v.bs;
#pragma omp parallel for schedule(static) if (v.rows * v.cols >= PARALLEL_MIN_WORK / 16)
    for (int64_t i = 0; i < v.rows; i++) {
        float s = 0.0f;
        for (int64_t c = 0; c < v.cols; c++) s += to_f(base[i * v.rs + c * v.cs]);
        out[i] = from_f<TD>(s);
    }
}
template <typename TD> void row_sums(TD* out, const View& v, int32_t b) {
    if (v.type == CUDA_R_32F) row_sums_t<float, TD>(out, v, b);
    else row_sums_t<__nv_bfloat16, TD>(out, v, b);  // (never fp8: make_problem, cublaslt.cpp, refuses its gradients)
}

// The scalars as the work reads them, and where the columns' amax go.
struct Scalars {
    float alpha, beta;  // alpha times FP8's scale_A and scale_B
    float scale_d;      // 1 but for an fp8 D
    float* col_amax;    // n floats: each column's largest |result| (AMAX_D), or nullptr
};

// the larger of a and |y|; a NaN stays ([E] NVIDIA does not say; a NaN in amax shows the overflow)
inline float amax_with(float a, float y) { return std::isnan(a) || std::isnan(y) ? NAN : std::max(a, std::fabs(y)); }

// Column j, rows i0 .. i0 + rows - 1, of batch member b: acc holds the fp32 sums of products.
// TC, TD, TB: the types of C, D and the bias.
template <typename TC, typename TD, typename TB>
void finish_column(const Job& J, const Scalars& s, int32_t b, int64_t i0, int64_t rows, int64_t j, const float* acc,
                   float* stage) {
    const Problem& P = J.P;
    const Flags& f = P.f;
    TD* d = (TD*)P.d.p + b * P.d.bs + j * P.d.cs;
    // [D] with beta == 0, C is not read: it may hold anything, NaN included
    const TC* c = s.beta != 0.0f ? (const TC*)P.c.p + b * P.c.bs + j * P.c.cs : nullptr;
    // [H] BIAS: "broadcasted to all columns and added before applying final postprocessing"
    const TB* bias = f.bias_in ? (const TB*)P.bias + b * P.bias_bs : nullptr;
    TD* aux = (f.gelu || f.dgelu) && P.aux ? (TD*)P.aux + b * P.aux_bs + j * P.aux_ld : nullptr;
    // [N] the ReLU bit-mask is column-major in bits: element (i, j) is bit (j ld + i) % 8 of
    // byte (j ld + i) / 8. With ld a multiple of 128 each column has bytes of its own.
    uint8_t* mask = (f.relu || f.drelu) && P.aux ? (uint8_t*)P.aux : nullptr;
    const int64_t bit0 = b * P.aux_bs + j * P.aux_ld;
    float amax = 0.0f;
    for (int64_t ii = 0; ii < rows; ii++) {
        const int64_t i = i0 + ii;
        float x = s.alpha * acc[ii];
        if (c != nullptr) x += s.beta * to_f(c[i * P.c.rs]);
        if (bias != nullptr) x += to_f(bias[i]);
        float y = x;
        if (f.gelu) {
            // [N] aux holds the GELU input after the bias (simulate_epilog: x + b)
            if (f.aux_out) aux[i] = from_f<TD>(x);
            y = gelu(x);
        } else if (f.relu) {
            // [E] ReLU(NaN) is 0, as NVIDIA's forum reports of cuBLASLt's RELU epilogue
            const bool on = x > 0.0f;
            const uint8_t bit = (uint8_t)(1u << ((bit0 + i) & 7));
            if (f.aux_out) mask[(bit0 + i) >> 3] = on ? mask[(bit0 + i) >> 3] | bit : mask[(bit0 + i) >> 3] & ~bit;
            y = on ? x : 0.0f;
        } else if (f.dgelu) {
            y = x * gelu_grad(to_f(aux[i]));
        } else if (f.drelu) {
            y = (mask[(bit0 + i) >> 3] >> ((bit0 + i) & 7) & 1) ? x : 0.0f;
        }
        if (f.bgrad_d) stage[j * P.m + i] = y;
        // [N] AMAX_D is taken before D's scale, which [E] multiplies in fp32 (1 exactly but for fp8)
        if (s.col_amax != nullptr) amax = amax_with(amax, y);
        d[i * P.d.rs] = from_f<TD>(s.scale_d * y);
    }
    if (s.col_amax != nullptr) s.col_amax[j] = amax_with(s.col_amax[j], amax);  // the thread owns column j
}

// Four columns of D at a time, 256 rows at a time: the inner loop runs down a column of
// op(A), contiguous after packing, and vectorises; each thread owns whole columns.
constexpr int64_t TILE_COLS = 4, TILE_ROWS = 256;

template <typename TC, typename TD, typename TB>
void multiply(const Job& J, const Scalars& s, int32_t b, const float* af, const float* bf, float* stage) {
    const int64_t m = J.P.m, n = J.P.n, k = J.P.k, splits = J.splits;
    const int64_t blocks = (n + TILE_COLS - 1) / TILE_COLS;
#pragma omp parallel for schedule(dynamic) if (m * n * k >= PARALLEL_MIN_WORK)
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t j0 = blk * TILE_COLS;
        const float* bcol[TILE_COLS];  // a missing last column repeats the one before; not stored
        for (int64_t t = 0; t < TILE_COLS; t++) bcol[t] = bf + std::min(j0 + t, n - 1) * k;
        float acc[TILE_COLS][TILE_ROWS], part[TILE_COLS][TILE_ROWS];
        for (int64_t i0 = 0; i0 < m; i0 += TILE_ROWS) {
            const int64_t rows = std::min(TILE_ROWS, m - i0);
            memset(acc, 0, sizeof(acc));
            for (int64_t s = 0; s < splits; s++) {
                // one sequence sums straight into acc; a split-K part into its own sums first
                float(*sum)[TILE_ROWS] = splits == 1 ? acc : part;
                if (splits > 1) memset(part, 0, sizeof(part));
                for (int64_t p = k * s / splits; p < k * (s + 1) / splits; p++) {
                    const float* a = af + p * m + i0;
                    const float b0 = bcol[0][p], b1 = bcol[1][p], b2 = bcol[2][p], b3 = bcol[3][p];
#pragma omp simd
                    for (int64_t i = 0; i < rows; i++) {
                        const float x = a[i];
                        sum[0][i] += x * b0;
                        sum[1][i] += x * b1;
                        sum[2][i] += x * b2;
                        sum[3][i] += x * b3;
                    }
                }
                if (splits > 1)
                    for (int64_t t = 0; t < TILE_COLS; t++)
                        for (int64_t i = 0; i < rows; i++) acc[t][i] += part[t][i];
            }
            for (int64_t t = 0; t < TILE_COLS && j0 + t < n; t++)
                finish_column<TC, TD, TB>(J, s, b, i0, rows, j0 + t, acc[t], stage);
        }
    }
}
static_assert(TILE_COLS == 4, "multiply's inner loop is written for four columns");

template <typename TC, typename TD, typename TB> void run_t(const Job& J, const Scalars& s) {
    const Problem& P = J.P;
    const Rounding r = P.compute == CUBLAS_COMPUTE_32F_FAST_TF32   ? ROUND_TF32
                       : P.compute == CUBLAS_COMPUTE_32F_FAST_16BF ? ROUND_BF16
                                                                   : ROUND_NONE;
    std::vector<float> af(P.m * P.k), bf(P.k * P.n), stage(P.f.bgrad_d ? P.m * P.n : 0);
    for (int32_t b = 0; b < P.batch; b++) {
        pack(af.data(), P.a, b, r);
        pack(bf.data(), P.b, b, r);
        multiply<TC, TD, TB>(J, s, b, af.data(), bf.data(), stage.data());
        TB* grad = P.f.bias_ptr() && !P.f.bias_in ? (TB*)P.bias + b * P.bias_bs : nullptr;
        if (P.f.bgrad_d) {
            // [N] DGELU_BGRAD / DRELU_BGRAD: the row sums of the result (result.sum(axis=1)),
            // here of its fp32 values, in order of columns
            std::vector<float> sum(P.m, 0.0f);
            for (int64_t j = 0; j < P.n; j++)
                for (int64_t i = 0; i < P.m; i++) sum[i] += stage[j * P.m + i];
            for (int64_t i = 0; i < P.m; i++) grad[i] = from_f<TB>(sum[i]);
        }
        // [H] BGRADA: length D's rows, "the reduction happens over the GEMM's k dimension" (of
        // op(A)); BGRADB: length D's columns, over k of op(B). [N] a.sum(axis=1), b.sum(axis=0)
        if (P.f.bgrad_a) row_sums<TB>(grad, P.a, b);
        if (P.f.bgrad_b) row_sums<TB>(grad, transposed(P.b), b);
    }
}

// The race check (EMU_RACECHECK=1): the bytes of v's elements, read or written by the matmul
void race_view(const View& v, int32_t batch, bool write, size_t es = 0) {
    if (es == 0) es = type_size(v.type);
    const bool by_row = v.cs == 1 && v.rs != 1;  // the contiguous runs: rows of a row-major view, else columns
    const int64_t inner = by_row ? v.cols : v.rows, outer = by_row ? v.rows : v.cols;
    const int64_t is = by_row ? v.cs : v.rs, os = by_row ? v.rs : v.cs;
    for (int32_t b = 0; b < batch; b++)
        for (int64_t o = 0; o < outer; o++) {
            const char* p = (const char*)v.p + (b * v.bs + o * os) * (int64_t)es;
            if (is == 1) emu::race_range(p, inner * es, write);
            else for (int64_t i = 0; i < inner; i++) emu::race_range(p + i * is * (int64_t)es, es, write);
        }
}
void race_job(const Job& J, float beta) {
    const Problem& P = J.P;
    race_view(P.a, P.batch, false);
    race_view(P.b, P.batch, false);
    if (beta != 0.0f) race_view(P.c, P.batch, false);
    if (J.alpha_dev) emu::race_range(J.alpha_dev, sizeof(float), false), emu::race_range(J.beta_dev, sizeof(float), false);
    if (P.bias != nullptr)
        race_view(View{P.bias, P.bias_type, P.f.bgrad_b ? P.n : P.m, 1, 1, 0, P.bias_bs}, P.batch, !P.f.bias_in);
    for (const float* scale : {P.scale_a, P.scale_b, P.scale_d})
        if (scale != nullptr) emu::race_range(scale, sizeof(float), false);
    if (P.amax_d != nullptr) emu::race_range(P.amax_d, sizeof(float), true);
    const bool bits = P.f.relu || P.f.drelu;  // as check_pointers (cublaslt.cpp) reads aux
    if (P.aux != nullptr)
        race_view(bits ? View{P.aux, P.d.type, (P.m + 7) / 8, P.n, 1, P.aux_ld / 8, P.aux_bs / 8}
                       : View{P.aux, P.d.type, P.m, P.n, 1, P.aux_ld, P.aux_bs},
                  P.batch, P.f.aux_out, bits ? 1 : 0);
    if (J.workspace_bytes > 0) emu::race_range(J.workspace, J.workspace_bytes, true);
    race_view(P.d, P.batch, true);
}

}  // namespace

void run(const Job& J) {
    const Problem& P = J.P;
    const float alpha = J.alpha_dev ? *J.alpha_dev : J.alpha, beta = J.beta_dev ? *J.beta_dev : J.beta;
    race_job(J, beta);
    if (J.workspace_bytes > 0) memset(J.workspace, 0xff, J.workspace_bytes);
    // FP8's scales, read now (device memory), NULL: 1. [E] alpha scale_A scale_B is formed in
    // fp32 in that order (NVIDIA does not say); for other types it is alpha itself
    const float sa = P.scale_a ? *P.scale_a : 1.0f, sb = P.scale_b ? *P.scale_b : 1.0f;
    std::vector<float> col_amax(P.amax_d ? P.n : 0, 0.0f);
    const Scalars s{alpha * sa * sb, beta, P.scale_d ? *P.scale_d : 1.0f, P.amax_d ? col_amax.data() : nullptr};
    using bf16 = __nv_bfloat16;
    switch (P.d.type) {
    case CUDA_R_32F: P.fp8 ? run_t<float, float, bf16>(J, s) : run_t<float, float, float>(J, s); break;
    case CUDA_R_8F_E4M3: run_t<bf16, __nv_fp8_e4m3, bf16>(J, s); break;
    case CUDA_R_8F_E5M2: run_t<bf16, __nv_fp8_e5m2, bf16>(J, s); break;
    default: run_t<bf16, bf16, bf16>(J, s);
    }
    if (P.amax_d != nullptr) {
        float amax = 0.0f;
        for (float a : col_amax) amax = amax_with(amax, a);
        *P.amax_d = amax;
    }
}

}  // namespace emu::cublaslt
