// test_emu_fp8_gemm.cpp: the emulated cuBLASLt's FP8 matmul (llmc/emu/cublaslt*.cpp) against a
// reference whose numbers nobody here wrote: every fp8 input is decoded by NVIDIA's own conversion
// (the table build/emu/fp8_reference.bin that test/fp8_reference.cpp wrote from the CUDA toolkit's
// cuda_fp8.h: each of the 256 codes of both formats widened to double), the products are summed in
// double, and an fp8 result is compared with that double rounded to the nearest number of NVIDIA's
// table (ties to the even code, saturated to the largest finite one). It never includes the
// emulator's cuda_fp8.h: the codes go to the device as bytes.
// Covered: E4M3 x E4M3, E4M3 x E5M2, E5M2 x E4M3 into bf16, fp32, E4M3 and E5M2; scale_A, scale_B
// and scale_D other than 1 (and none), D's amax, saturation; alpha and beta with C; BIAS and
// GELU_BIAS; padded leading dimensions; a strided batch; k up to 288; FAST_ACCUM. Then what cuBLASLt
// refuses, with its status (layouts other than TN, dimensions and leading dimensions that are not
// multiples of 16, E5M2 x E5M2, scale and compute types, the table's other gaps), and a scale in
// host memory stopping the program as it would fault on the GPU.
//
// Tolerances, with u = 2^-24:
//   - the sum: k products of fp8 numbers are summed exactly in fp32 when every product is a
//     multiple of 2^q and the sum of their magnitudes S is at most 2^(24 + q): every partial sum,
//     in any order, is then an integer times 2^q of at most 24 bits. The reference finds q and S
//     for each element ("exact sums" in the report); elsewhere the classic bound k u S.
//   - the fp32 epilogue: alpha scale_A scale_B (two products), times the sum, beta C, two
//     additions, the bias, scale_D: each rounds by at most u of its operands' magnitudes, 8 u mag
//     in all, mag the sum of the magnitudes of the terms. tol = 8 u mag with exact sums, else
//     (k + 8) u mag. But where the sum is exact and so is every one of those operations in
//     whatever order (each product, partial product and partial sum a float: "exact throughout"
//     in the report), tol = 0: such an element must be the exact result rounded once, and its
//     ties (to even) are checked exactly.
//   - fp32 D: |got - ref| <= tol; with exact sums that is within 1e-6 of mag (8 u = 4.8e-7).
//   - bf16 and fp8 D: got must be ref rounded to nearest even; where ref lies within tol of a
//     midpoint between two neighbours, either ("near a rounding boundary" in the report).
//   - GELU: 1.2 tol + 16 u (1 + |x|), as test_emu_cublaslt (tanhf's ulps, GELU's slope < 1.2).
//   - amax: |got - max |y|| <= the largest tol of an element, plus u amax.
// One PASS/FAIL line per check; exits 1 on any failure; 77 when there is no table (the numerical
// checks say SKIP, the refusals still run).
//
// usage: test_emu_fp8_gemm [TABLE]   (default build/emu/fp8_reference.bin)
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
#include "test/fp8_table.h"

#include "test/emu_report.h"  // defines: report, g_pass, g_fail

static void check_ok(cublasStatus_t st, const char* expr, int line) {
    if (st == CUBLAS_STATUS_SUCCESS) return;
    printf("FAIL: %s:%d: %s returned %s\n", __FILE__, line, expr, cublasLtGetStatusName(st));
    exit(1);
}
static void check_cu(cudaError_t e, const char* expr, int line) {
    if (e == cudaSuccess) return;
    printf("FAIL: %s:%d: %s returned %s\n", __FILE__, line, expr, cudaGetErrorName(e));
    exit(1);
}
#define CHECK_OK(x) check_ok((x), #x, __LINE__)
#define CHECK_CU(x) check_cu((x), #x, __LINE__)

static const double U = std::ldexp(1.0, -24);
static const cudaDataType_t E4M3 = CUDA_R_8F_E4M3, E5M2 = CUDA_R_8F_E5M2, BF16 = CUDA_R_16BF, F32 = CUDA_R_32F;

static size_t type_size(cudaDataType_t t) { return t == F32 ? 4 : t == BF16 ? 2 : 1; }
static const char* type_name(cudaDataType_t t) {
    return t == E4M3 ? "E4M3" : t == E5M2 ? "E5M2" : t == BF16 ? "bf16" : t == F32 ? "fp32" : "?";
}

// ---------------------------------------------------------------------------------------
// NVIDIA's values of the fp8 codes, and rounding to them

struct Fp8Format {
    double value[256];         // NVIDIA's widening of each code (NaN for the NaN codes)
    std::vector<double> pos;   // the non-negative finite values, pos[c] the value of code c
    std::vector<unsigned> finite;  // every code of a finite number, both signs
};
static Fp8Format g_fmt[2];  // E4M3, E5M2

static const Fp8Format& format_of(cudaDataType_t t) { return g_fmt[t == E4M3 ? 0 : 1]; }

// Reads the FP8_TABLE_TO_DOUBLE sections; false when there is no table.
static bool load_table(const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) return false;
    uint32_t head[2];
    bool ok = fread(head, sizeof(head), 1, f) == 1 && head[0] == FP8_TABLE_MAGIC && head[1] == FP8_TABLE_VERSION;
    int found = 0;
    Fp8TableSection s;
    while (ok && fread(&s, sizeof(s), 1, f) == 1) {
        std::vector<Fp8TableEntry> e(s.count);
        ok = fread(e.data(), sizeof(Fp8TableEntry), s.count, f) == s.count;
        if (!ok || s.op != FP8_TABLE_TO_DOUBLE || s.fp8 > 1 || s.count != 256) continue;
        for (const Fp8TableEntry& x : e) g_fmt[s.fp8].value[x.in[0] & 0xff] = bits_double(x.out);
        found |= 1 << s.fp8;
    }
    fclose(f);
    if (!ok || found != 3) return false;
    for (Fp8Format& F : g_fmt) {
        // the codes 0x00.. of the positive numbers are in order of magnitude, up to the largest finite
        for (unsigned c = 0; c < 0x80 && std::isfinite(F.value[c]); c++) F.pos.push_back(F.value[c]);
        for (unsigned c = 0; c < 256; c++)
            if (std::isfinite(F.value[c])) F.finite.push_back(c);
        for (size_t i = 1; i < F.pos.size(); i++)
            if (!(F.pos[i] > F.pos[i - 1])) return false;
    }
    return true;
}

// x rounded to the nearest finite value of the format, ties to the even code, beyond the largest
// finite to the largest finite (saturation)
static double round_fp8(double x, const Fp8Format& F) {
    const double a = std::fabs(x), top = F.pos.back();
    double r;
    if (a >= top) {
        r = top;
    } else {
        const size_t i = (size_t)(std::upper_bound(F.pos.begin(), F.pos.end(), a) - F.pos.begin()) - 1;  // pos[i] <= a
        const double lo = F.pos[i], hi = F.pos[i + 1], mid = 0.5 * (lo + hi);
        r = a < mid ? lo : a > mid ? hi : (i % 2 == 0 ? lo : hi);
    }
    return x < 0 ? -r : r;
}
// x rounded to bfloat16 (8 significant bits), to nearest even
static double round_bf16(double x) {
    if (x == 0.0 || !std::isfinite(x)) return x;
    int e;
    const double f = std::frexp(x, &e);
    return std::ldexp(std::nearbyint(std::ldexp(f, 8)), e - 8);
}
static uint16_t bf16_bits(float x) {  // x's upper half: x cut to bf16
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
}
static float bf16_value(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// the exponent of the lowest set bit of v (v = odd integer times 2^low_exp(v)); v finite, not 0
static int low_exp(double v) {
    int e;
    const double f = std::frexp(std::fabs(v), &e);
    uint64_t mant = (uint64_t)std::ldexp(f, 53);
    int tz = 0;
    while ((mant & 1u) == 0) mant >>= 1, tz++;
    return e - 53 + tz;
}

static uint32_t g_rng = 12345;
static uint32_t rnd_u32() { return g_rng = g_rng * 1664525u + 1013904223u; }
static double rnd() { return (double)(rnd_u32() >> 8) / (double)(1u << 23) - 1.0; }  // [-1, 1)

static void* dmalloc(size_t bytes) {
    void* p;
    CHECK_CU(cudaMalloc(&p, bytes));
    return p;
}
static void upload(void* dev, const std::vector<uint8_t>& host) {
    CHECK_CU(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice));
}
static void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void* v, size_t bytes) {
    CHECK_OK(cublasLtMatmulDescSetAttribute(d, a, v, bytes));
}

// ---------------------------------------------------------------------------------------
// the numerical checks: one matmul D = scale_D epilogue(alpha scale_A scale_B A^T B + beta C)

struct Case {
    const char* name;
    cudaDataType_t ta = E4M3, tb = E4M3, tc = BF16, td = BF16;
    int64_t m = 64, n = 32, k = 64, pad = 0;  // pad: elements added to every leading dimension
    int batch = 1;
    float alpha = 1.0f, beta = 0.0f;
    float scale_a = 0.0f, scale_b = 0.0f;  // 0: no pointer (1)
    double d_fill = 0.0;                   // fp8 D: scale_D = d_fill * largest finite / max |y|; 0: none
    bool scale_d_pow2 = false;             // ... rounded down to a power of 2
    bool amax = false;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    bool bias_type_set = false;  // BIAS_DATA_TYPE = CUDA_R_16BF set (else the default, -1)
    bool wide = false;           // codes of any magnitude (else 1/4 <= |x| < 4, or 0: sums exact)
    int8_t fast_accum = 0;
    uint32_t seed = 1;
};

static std::vector<uint8_t> g_last_d;  // the last case's D, as bytes

static bool run_case(cublasLtHandle_t lt, const Case& c) {
    g_rng = 12345u + 7919u * c.seed;
    const int64_t m = c.m, n = c.n, k = c.k;
    const int64_t lda = k + c.pad, ldb = k + c.pad, ldc = m + c.pad, ldd = m + c.pad;
    // batch strides: one member plus 16 elements (a multiple of 16 bytes for every type)
    const int64_t sa = lda * m + 16, sb = ldb * n + 16, sc = ldc * n + 16, sd = ldd * n + 16, sbias = m + 16;
    const size_t ec = type_size(c.tc), ed = type_size(c.td);
    const bool fp8_d = c.td == E4M3 || c.td == E5M2;
    const bool bias_in = c.epilogue & 4, gelu = c.epilogue & 32;
    const Fp8Format &FA = format_of(c.ta), &FB = format_of(c.tb);

    // inputs: fp8 codes from NVIDIA's list of finite codes; C and bias exact in their types
    auto codes = [&](const Fp8Format& F, size_t count) {
        std::vector<unsigned> pool;
        for (unsigned code : F.finite)
            if (c.wide || F.value[code] == 0.0 || (std::fabs(F.value[code]) >= 0.25 && std::fabs(F.value[code]) < 4.0))
                pool.push_back(code);
        std::vector<uint8_t> out(count);
        for (uint8_t& x : out) x = (uint8_t)pool[rnd_u32() % pool.size()];
        return out;
    };
    std::vector<uint8_t> A = codes(FA, (size_t)(sa * c.batch)), B = codes(FB, (size_t)(sb * c.batch));
    std::vector<double> Cv((size_t)(sc * c.batch)), biasv((size_t)(sbias * c.batch));
    std::vector<uint8_t> Cbytes(Cv.size() * ec), biasbytes(biasv.size() * 2);
    for (size_t i = 0; i < Cv.size(); i++) {
        const float x = (float)(4.0 * rnd());
        if (c.tc == F32) Cv[i] = x, memcpy(&Cbytes[i * 4], &x, 4);
        else {
            const uint16_t b = bf16_bits(x);  // x cut to bf16
            Cv[i] = bf16_value(b), memcpy(&Cbytes[i * 2], &b, 2);
        }
    }
    for (size_t i = 0; i < biasv.size(); i++) {
        const uint16_t b = bf16_bits((float)(2.0 * rnd()));
        biasv[i] = bf16_value(b), memcpy(&biasbytes[i * 2], &b, 2);
    }

    // the reference: x, y = epilogue(x), and y's tolerance, per element
    const double ab = (double)c.alpha * (c.scale_a ? c.scale_a : 1.0) * (c.scale_b ? c.scale_b : 1.0);
    const size_t elems = (size_t)(m * n * c.batch);
    std::vector<double> y(elems), tol(elems), xs(elems);
    std::vector<char> exact_x(elems);
    auto is_float = [](double v) { return (double)(float)v == v; };
    const double fa = c.alpha, fsa = c.scale_a ? c.scale_a : 1.0, fsb = c.scale_b ? c.scale_b : 1.0;
    const bool ab_exact = is_float(fa * fsa) && is_float(fa * fsb) && is_float(fsa * fsb) && is_float(ab);
    int exact = 0, exact_all = 0;
    double y_amax = 0.0, tol_max = 0.0;
    for (int b = 0; b < c.batch; b++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < m; i++) {
                double dot = 0.0, S = 0.0;
                int q = 1 << 20;
                for (int64_t p = 0; p < k; p++) {
                    const double prod = FA.value[A[b * sa + i * lda + p]] * FB.value[B[b * sb + j * ldb + p]];
                    dot += prod;  // exact: products of fp8 numbers, sums far below 2^53 of the smallest
                    S += std::fabs(prod);
                    if (prod != 0.0) q = std::min(q, low_exp(prod));
                }
                const bool sum_exact = S == 0.0 || S <= std::ldexp(1.0, 24 + q);
                exact += sum_exact;
                const double cterm = c.beta != 0.0f ? (double)c.beta * Cv[b * sc + j * ldc + i] : 0.0;
                const double bterm = bias_in ? biasv[b * sbias + i] : 0.0;
                const double x = ab * dot + cterm + bterm;
                const double mag = std::fabs(ab) * S + std::fabs(cterm) + std::fabs(bterm);
                const double t = ab * dot;  // the fp32 steps, in any order: each exact?
                const bool all = sum_exact && ab_exact && is_float(t) && is_float(cterm) && is_float(t + cterm) &&
                                 is_float(t + bterm) && is_float(cterm + bterm) && is_float(x) && !gelu;
                const double tol_x = all ? 0.0 : (sum_exact ? 8.0 : (double)(k + 8)) * U * mag;
                const size_t e = (size_t)((b * n + j) * m + i);
                exact_x[e] = all;
                xs[e] = x;
                y[e] = gelu ? 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) : x;
                tol[e] = gelu ? 1.2 * tol_x + 16 * U * (1.0 + std::fabs(x)) : tol_x;
                y_amax = std::max(y_amax, std::fabs(y[e]));
                tol_max = std::max(tol_max, tol[e]);
            }
    const double top = fp8_d ? format_of(c.td).pos.back() : 0.0;
    float scale_d = fp8_d && c.d_fill > 0.0 ? (float)(c.d_fill * top / y_amax) : 1.0f;
    if (c.scale_d_pow2) scale_d = (float)std::exp2(std::floor(std::log2((double)scale_d)));

    // the device's operands
    void *dA = dmalloc(A.size()), *dB = dmalloc(B.size()), *dC = dmalloc(Cbytes.size());
    void *dD = dmalloc((size_t)(sd * c.batch) * ed), *dbias = dmalloc(biasbytes.size());
    // scale_A, scale_B, scale_D, amax, 16 bytes apart ([G]: cuBLASLt refuses a scale pointer less aligned)
    float* dscal = (float*)dmalloc(16 * sizeof(float));
    upload(dA, A), upload(dB, B), upload(dC, Cbytes), upload(dbias, biasbytes);
    std::vector<uint8_t> Dinit((size_t)(sd * c.batch) * ed, 0x55);  // the padding must keep it
    upload(dD, Dinit);
    const float scal[16] = {c.scale_a, 0, 0, 0, c.scale_b, 0, 0, 0, scale_d, 0, 0, 0, -1.0f};
    CHECK_CU(cudaMemcpy(dscal, scal, sizeof(scal), cudaMemcpyHostToDevice));

    cublasLtMatmulDesc_t desc;
    CHECK_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const int32_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    set_attr(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, 4);
    set_attr(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, 4);
    set_attr(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &c.epilogue, 4);
    set_attr(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &c.fast_accum, 1);
    const float* ptr[4] = {dscal, dscal + 4, dscal + 8, dscal + 12};
    if (c.scale_a) set_attr(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ptr[0], sizeof(void*));
    if (c.scale_b) set_attr(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &ptr[1], sizeof(void*));
    if (fp8_d && c.d_fill > 0.0) set_attr(desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &ptr[2], sizeof(void*));
    if (c.amax) set_attr(desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &ptr[3], sizeof(void*));
    if (bias_in) {
        set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof(void*));
        set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &sbias, 8);
        const int32_t bt = CUDA_R_16BF;
        if (c.bias_type_set) set_attr(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, 4);
    }
    cublasLtMatrixLayout_t l[4];
    const cudaDataType_t types[4] = {c.ta, c.tb, c.tc, c.td};
    const int64_t rows[4] = {k, k, m, m}, cols[4] = {m, n, n, n};
    const int64_t lds[4] = {lda, ldb, ldc, ldd}, strides[4] = {sa, sb, sc, sd};
    for (int i = 0; i < 4; i++) {
        CHECK_OK(cublasLtMatrixLayoutCreate(&l[i], types[i], rows[i], cols[i], lds[i]));
        if (c.batch > 1) {
            CHECK_OK(cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &c.batch, 4));
            CHECK_OK(cublasLtMatrixLayoutSetAttribute(l[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], 8));
        }
    }
    cublasLtMatmulPreference_t pref;
    CHECK_OK(cublasLtMatmulPreferenceCreate(&pref));  // 256-byte alignment promised: cudaMalloc's
    const size_t ws_bytes = 1 << 22;
    void* ws = dmalloc(ws_bytes);
    uint64_t ws64 = ws_bytes;
    CHECK_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws64, 8));
    cublasLtMatmulHeuristicResult_t h = {};
    int found = 0;
    CHECK_OK(cublasLtMatmulAlgoGetHeuristic(lt, desc, l[0], l[1], l[2], l[3], pref, 1, &h, &found));
    CHECK_OK(cublasLtMatmul(lt, desc, &c.alpha, dA, l[0], dB, l[1], &c.beta, dC, l[2], dD, l[3], &h.algo, ws, ws_bytes,
                            nullptr));
    CHECK_CU(cudaDeviceSynchronize());
    std::vector<uint8_t> Dgot(Dinit.size());
    CHECK_CU(cudaMemcpy(Dgot.data(), dD, Dgot.size(), cudaMemcpyDeviceToHost));
    float got_scal16[16], got_scal[4];
    CHECK_CU(cudaMemcpy(got_scal16, dscal, sizeof(got_scal16), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < 4; i++) got_scal[i] = got_scal16[4 * i];
    g_last_d = Dgot;

    // the comparison
    int bad = 0, midpoints = 0, saturated = 0, ties = 0;
    double worst = 0.0;
    for (int b = 0; b < c.batch; b++)
        for (int64_t j = 0; j < n; j++) {
            for (int64_t i = 0; i < m; i++) {
                const size_t e = (size_t)((b * n + j) * m + i), at = (size_t)(b * sd + j * ldd + i);
                double g, lo, hi, r;
                if (c.td != E4M3 && c.td != E5M2) exact_all += exact_x[e];
                if (c.td == F32) {
                    float f;
                    memcpy(&f, &Dgot[at * 4], 4);
                    g = f, r = y[e], lo = r - tol[e], hi = r + tol[e];
                    worst = std::max(worst, tol[e] > 0.0 ? std::fabs(g - r) / tol[e] : g == r ? 0.0 : INFINITY);
                } else if (c.td == BF16) {
                    uint16_t bits;
                    memcpy(&bits, &Dgot[at * 2], 2);
                    g = bf16_value(bits), r = round_bf16(y[e]);
                    lo = round_bf16(y[e] - tol[e]), hi = round_bf16(y[e] + tol[e]);
                    ties += exact_x[e] &&
                            round_bf16(std::nextafter(y[e], 1e300)) != round_bf16(std::nextafter(y[e], -1e300));
                } else {
                    const Fp8Format& F = format_of(c.td);
                    const double v = (double)scale_d * y[e];
                    const bool v_exact = exact_x[e] && is_float(v);
                    const double tol_v = v_exact ? 0.0 : std::fabs((double)scale_d) * tol[e] + U * std::fabs(v);
                    exact_all += v_exact;
                    g = F.value[Dgot[at]], r = round_fp8(v, F);
                    lo = round_fp8(v - tol_v, F), hi = round_fp8(v + tol_v, F);
                    ties += v_exact && round_fp8(std::nextafter(v, 1e300), F) != round_fp8(std::nextafter(v, -1e300), F);
                    saturated += std::fabs(v) > F.pos.back();
                }
                midpoints += lo != hi && c.td != F32;
                if (!(g >= lo && g <= hi) && bad++ < 5)
                    printf("   D(%lld, %lld) batch %d: got %.9g, expected %.9g (accepted [%.9g, %.9g]; x %.9g)\n",
                           (long long)i, (long long)j, b, g, r, lo, hi, xs[e]);
            }
            for (int64_t i = m; i < ldd; i++)  // the padding rows
                for (size_t byte = 0; byte < ed; byte++)
                    if (Dgot[(size_t)(b * sd + j * ldd + i) * ed + byte] != 0x55 && bad++ < 5)
                        printf("   D's padding (%lld, %lld) written\n", (long long)i, (long long)j);
        }
    if (c.d_fill > 1.0 && saturated == 0 && bad++ < 5) printf("   scale_D should have saturated the largest\n");
    char amax_text[96] = "";
    if (c.amax) {
        const bool ok = std::fabs(got_scal[3] - y_amax) <= tol_max + U * y_amax;
        if (!ok) bad++;
        snprintf(amax_text, sizeof(amax_text), ", amax %.9g (%s %.9g)", got_scal[3], ok ? "reference" : "EXPECTED", y_amax);
    }
    for (cublasLtMatrixLayout_t x : l) CHECK_OK(cublasLtMatrixLayoutDestroy(x));
    CHECK_OK(cublasLtMatmulDescDestroy(desc));
    CHECK_OK(cublasLtMatmulPreferenceDestroy(pref));
    for (void* p : {dA, dB, dC, dD, dbias, (void*)dscal, ws}) CHECK_CU(cudaFree(p));
    char worst_text[48] = "";
    if (c.td == F32) snprintf(worst_text, sizeof(worst_text), ", max |err|/tol %.3g", worst);
    return report(bad == 0,
                  "%s: %s x %s -> %s (C %s), m=%lld n=%lld k=%lld batch %d: %zu elements, %d with exact sums, %d exact "
                  "throughout (%d of them ties), %d near a rounding boundary, %d saturated%s%s",
                  c.name, type_name(c.ta), type_name(c.tb), type_name(c.td), type_name(c.tc), (long long)m, (long long)n,
                  (long long)k, c.batch, elems, exact, exact_all, ties, midpoints, saturated, worst_text, amax_text);
}

static void numerical_checks(cublasLtHandle_t lt) {
    Case c{"no scales, alpha 1, beta 0"};
    run_case(lt, c);
    c = Case{"scale_A 0.37, scale_B -2.5, alpha 0.75, beta -0.5, lds padded by 16"};
    c.td = c.tc = F32, c.k = 256, c.m = 48, c.n = 80, c.pad = 16, c.scale_a = 0.37f, c.scale_b = -2.5f;
    c.alpha = 0.75f, c.beta = -0.5f, c.seed = 2;
    run_case(lt, c);
    c = Case{"BIAS (default bias type), scales, alpha 1.5, beta 0.25"};
    c.tb = E5M2, c.k = 288, c.m = 32, c.n = 48, c.epilogue = CUBLASLT_EPILOGUE_BIAS, c.scale_a = 1.25f, c.scale_b = 0.1f;
    c.alpha = 1.5f, c.beta = 0.25f, c.seed = 3;
    run_case(lt, c);
    c = Case{"scale_D, amax, BIAS (bf16 set), beta 1: the largest saturated"};
    c.ta = E5M2, c.td = E4M3, c.k = 128, c.epilogue = CUBLASLT_EPILOGUE_BIAS, c.bias_type_set = true;
    c.scale_a = 0.5f, c.scale_b = 3.0f, c.beta = 1.0f, c.d_fill = 1.2, c.amax = true, c.seed = 4;
    run_case(lt, c);
    c = Case{"scale_D, amax, nothing saturated"};
    c.tb = E5M2, c.td = E5M2, c.k = 96, c.m = 80, c.scale_a = 0.8f, c.scale_b = 0.3f, c.d_fill = 0.5, c.amax = true;
    c.pad = 32, c.seed = 5;
    run_case(lt, c);
    c = Case{"power-of-2 scales (exact throughout: ties checked exactly), beta 2, amax, saturated"};
    c.td = E4M3, c.k = 32, c.m = 96, c.scale_a = 0.5f, c.scale_b = 4.0f, c.alpha = 0.25f, c.beta = 2.0f, c.d_fill = 2.5;
    c.scale_d_pow2 = true, c.amax = true, c.seed = 11;
    run_case(lt, c);
    c = Case{"codes of every magnitude (sums not exact), scale_D, amax"};
    c.td = E4M3, c.k = 256, c.wide = true, c.scale_a = 0.01f, c.scale_b = 0.02f, c.d_fill = 0.9, c.amax = true, c.seed = 6;
    run_case(lt, c);
    c = Case{"codes of every magnitude into fp32, beta 1"};
    c.tc = c.td = F32, c.tb = E5M2, c.k = 160, c.wide = true, c.beta = 1.0f, c.seed = 7;
    run_case(lt, c);
    c = Case{"strided batch of 3, BIAS, scale_D, amax over the batch"};
    c.td = E4M3, c.batch = 3, c.m = 32, c.n = 16, c.k = 48, c.epilogue = CUBLASLT_EPILOGUE_BIAS, c.beta = 0.5f;
    c.scale_b = 0.75f, c.d_fill = 1.05, c.amax = true, c.seed = 8;
    run_case(lt, c);
    c = Case{"GELU_BIAS, alpha 0.125"};
    c.ta = E5M2, c.k = 64, c.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS, c.alpha = 0.125f, c.scale_a = 0.5f, c.seed = 9;
    run_case(lt, c);

    // FAST_ACCUM: [E] the emulator sums in fp32 with it as without (an assumption, see
    // cublaslt_compute.cpp): the result must match the reference and be bit for bit the one without it
    c = Case{"FAST_ACCUM 0"};
    c.tc = c.td = F32, c.k = 272, c.scale_a = 0.7f, c.scale_b = 1.3f, c.seed = 10;
    run_case(lt, c);
    const std::vector<uint8_t> without = g_last_d;
    c.name = "FAST_ACCUM 1", c.fast_accum = 1;
    run_case(lt, c);
    report(g_last_d == without, "FAST_ACCUM 1 gives the bits of FAST_ACCUM 0 (the emulator's stated assumption)");
}

// ---------------------------------------------------------------------------------------
// what cuBLASLt refuses, with the status it answers

// A valid FP8 problem (TN, m=32 n=16 k=32, E4M3 x E4M3 -> bf16) that each check spoils in one way.
struct Setup {
    cudaDataType_t ta = E4M3, tb = E4M3, tc = BF16, td = BF16, scale = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    cublasOperation_t op_a = CUBLAS_OP_T, op_b = CUBLAS_OP_N;
    int64_t m = 32, n = 16, k = 32, lda = 0, ldb = 0, ldc = 0, ldd = 0;  // 0: the smallest
    int32_t batch = 1;
    int64_t batch_stride_a = 0;
    bool d_row_major = false;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    std::function<void(cublasLtMatmulDesc_t)> desc_extra;
    uint32_t align_a = 256;
};
struct Built {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t l[4];
    cublasLtMatmulPreference_t pref;
    ~Built() {
        cublasLtMatmulDescDestroy(desc);
        for (cublasLtMatrixLayout_t x : l) cublasLtMatrixLayoutDestroy(x);
        cublasLtMatmulPreferenceDestroy(pref);
    }
};
static void build(const Setup& s, Built* b) {
    CHECK_OK(cublasLtMatmulDescCreate(&b->desc, s.compute, s.scale));
    set_attr(b->desc, CUBLASLT_MATMUL_DESC_TRANSA, &s.op_a, 4);
    set_attr(b->desc, CUBLASLT_MATMUL_DESC_TRANSB, &s.op_b, 4);
    set_attr(b->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, 4);
    if (s.desc_extra) s.desc_extra(b->desc);
    const bool ta = s.op_a != CUBLAS_OP_N, tb = s.op_b != CUBLAS_OP_N;
    const int64_t ar = ta ? s.k : s.m, ac = ta ? s.m : s.k, br = tb ? s.n : s.k, bc = tb ? s.k : s.n;
    CHECK_OK(cublasLtMatrixLayoutCreate(&b->l[0], s.ta, ar, ac, s.lda ? s.lda : ar));
    CHECK_OK(cublasLtMatrixLayoutCreate(&b->l[1], s.tb, br, bc, s.ldb ? s.ldb : br));
    CHECK_OK(cublasLtMatrixLayoutCreate(&b->l[2], s.tc, s.m, s.n, s.ldc ? s.ldc : s.m));
    CHECK_OK(cublasLtMatrixLayoutCreate(&b->l[3], s.td, s.m, s.n, s.ldd ? s.ldd : s.d_row_major ? s.n : s.m));
    if (s.d_row_major) {
        const int32_t row = CUBLASLT_ORDER_ROW;
        CHECK_OK(cublasLtMatrixLayoutSetAttribute(b->l[3], CUBLASLT_MATRIX_LAYOUT_ORDER, &row, 4));
    }
    if (s.batch > 1)
        for (int i = 0; i < 4; i++) {
            const int64_t stride = i == 0 ? s.batch_stride_a : 4096;
            CHECK_OK(cublasLtMatrixLayoutSetAttribute(b->l[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &s.batch, 4));
            CHECK_OK(cublasLtMatrixLayoutSetAttribute(b->l[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, 8));
        }
    CHECK_OK(cublasLtMatmulPreferenceCreate(&b->pref));
    uint64_t ws = 1 << 20;
    CHECK_OK(cublasLtMatmulPreferenceSetAttribute(b->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, 8));
    CHECK_OK(cublasLtMatmulPreferenceSetAttribute(b->pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &s.align_a, 4));
}
static void expect(cublasLtHandle_t lt, const char* what, const Setup& s, cublasStatus_t want) {
    Built b;
    build(s, &b);
    cublasLtMatmulHeuristicResult_t h = {};
    int found = -1;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt, b.desc, b.l[0], b.l[1], b.l[2], b.l[3], b.pref, 1, &h, &found);
    report(st == want && found == (want == CUBLAS_STATUS_SUCCESS ? 1 : 0), "heuristic, %s: %s (expected %s), %d algorithms",
           what, cublasLtGetStatusName(st), cublasLtGetStatusName(want), found);
}
template <typename T> static std::function<void(cublasLtMatmulDesc_t)> with(cublasLtMatmulDescAttributes_t a, T v) {
    return [a, v](cublasLtMatmulDesc_t d) { set_attr(d, a, &v, sizeof(v)); };
}

// runs f in a child process: true when it exits non-zero having printed `expect` on stderr
static bool dies_with(const char* expect, const std::function<void()>& f) {
    CHECK_CU(cudaDeviceSynchronize());  // no stream thread holds the runtime's lock at the fork
    fflush(stdout);
    fflush(stderr);
    int fds[2];
    if (pipe(fds) != 0) return false;
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        alarm(30);
        f();
        _exit(0);
    }
    close(fds[1]);
    std::string err;
    char chunk[512];
    for (ssize_t got; (got = read(fds[0], chunk, sizeof(chunk))) > 0;) err.append(chunk, got);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    const bool died = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!died || err.find(expect) == std::string::npos) printf("   child's stderr: %s", err.c_str());
    return died && err.find(expect) != std::string::npos;
}

static void refusal_checks(cublasLtHandle_t lt) {
    float* scal = (float*)dmalloc(64);
    const void* dev_scale = scal;
    const cublasStatus_t OK = CUBLAS_STATUS_SUCCESS, NS = CUBLAS_STATUS_NOT_SUPPORTED, IV = CUBLAS_STATUS_INVALID_VALUE;
    Setup ok, s;
    expect(lt, "TN E4M3 x E4M3 -> bf16 (the valid baseline)", ok, OK);
    // [D] "A must be transposed and B non-transposed (The "TN" format)"
    s = ok, s.op_a = CUBLAS_OP_N, s.op_b = CUBLAS_OP_N;
    expect(lt, "NN", s, NS);
    s = ok, s.op_a = CUBLAS_OP_N, s.op_b = CUBLAS_OP_T;
    expect(lt, "NT", s, NS);
    s = ok, s.op_b = CUBLAS_OP_T;
    expect(lt, "TT", s, NS);
    s = ok, s.d_row_major = true;
    expect(lt, "row-major D", s, NS);
    // [D] Tensor Core Usage's multiples of 16 bytes
    s = ok, s.lda = 40;
    expect(lt, "lda 40 (not a multiple of 16)", s, NS);
    s = ok, s.ldb = 36;
    expect(lt, "ldb 36", s, NS);
    s = ok, s.ldc = 36;
    expect(lt, "ldc 36 of a bf16 C (72 bytes)", s, NS);
    s = ok, s.ldd = 36;
    expect(lt, "ldd 36 of a bf16 D", s, NS);
    s = ok, s.k = 24, s.lda = s.ldb = 32;
    expect(lt, "k 24", s, NS);
    s = ok, s.m = 40, s.ldc = s.ldd = 48;
    expect(lt, "m 40", s, NS);
    s = ok, s.n = 24;
    expect(lt, "n 24", s, NS);
    s = ok, s.batch = 2, s.batch_stride_a = 32 * 32 + 8;
    expect(lt, "A's batch stride 1032 bytes (not a multiple of 16)", s, NS);
    s.batch_stride_a = 32 * 32 + 16;
    expect(lt, "A's batch stride 1040 bytes", s, OK);
    s = ok, s.align_a = 8;
    expect(lt, "A promised only 8-byte aligned", s, NS);
    // [D] the table of types; compute and scale types
    s = ok, s.ta = s.tb = E5M2;
    expect(lt, "E5M2 x E5M2", s, NS);
    s = ok, s.tb = E5M2;
    expect(lt, "E4M3 x E5M2", s, OK);
    s = ok, s.ta = E5M2;
    expect(lt, "E5M2 x E4M3", s, OK);
    s = ok, s.td = E5M2;
    expect(lt, "E4M3 x E4M3 -> E5M2", s, NS);
    s = ok, s.tb = E5M2, s.td = E5M2;
    expect(lt, "E4M3 x E5M2 -> E5M2 (C bf16)", s, OK);
    s = ok, s.tc = s.td = F32;
    expect(lt, "-> fp32 (C fp32)", s, OK);
    s = ok, s.tc = F32;
    expect(lt, "C fp32, D bf16", s, NS);
    s = ok, s.td = F32;
    expect(lt, "C bf16, D fp32", s, NS);
    s = ok, s.tc = F32, s.td = E4M3;
    expect(lt, "C fp32, D E4M3", s, NS);
    s = ok, s.tc = s.td = E4M3;
    expect(lt, "C E4M3, D E4M3", s, NS);
    s = ok, s.tc = s.td = CUDA_R_16F;
    expect(lt, "C and D fp16 (not emulated)", s, NS);
    s = ok, s.tb = BF16;
    expect(lt, "E4M3 x bf16", s, NS);
    s = ok, s.scale = BF16;
    expect(lt, "scale type bf16", s, NS);
    s = ok, s.compute = CUBLAS_COMPUTE_32F_PEDANTIC;
    expect(lt, "compute type 32F_PEDANTIC", s, NS);
    s = ok, s.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    expect(lt, "compute type 32F_FAST_TF32", s, NS);
    s = ok, s.compute = CUBLAS_COMPUTE_16F;
    expect(lt, "compute type 16F", s, NS);
    // [H] [N] [T] the scale and amax pointers
    s = ok, s.desc_extra = with(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, dev_scale);
    expect(lt, "A scale", s, OK);
    s = ok, s.desc_extra = with(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, dev_scale);
    expect(lt, "D scale of a bf16 D", s, IV);
    s = ok, s.desc_extra = with(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, dev_scale);
    expect(lt, "amax of a bf16 D", s, IV);
    s.tc = s.td = F32;
    expect(lt, "amax of an fp32 D", s, IV);
    s = ok, s.td = E4M3, s.desc_extra = [&](cublasLtMatmulDesc_t d) {
        with(CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, dev_scale)(d), with(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, dev_scale)(d);
    };
    expect(lt, "D scale and amax of an E4M3 D", s, OK);
    s = ok, s.desc_extra = with(CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, dev_scale);
    expect(lt, "C scale (no fp8 C in the table)", s, IV);
    s = ok, s.desc_extra = with<int32_t>(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, 1);
    expect(lt, "A scale mode 1 (block scaling)", s, IV);
    // [N] the epilogues
    auto bias = with(CUBLASLT_MATMUL_DESC_BIAS_POINTER, dev_scale);
    s = ok, s.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS, s.desc_extra = bias;
    expect(lt, "GELU_BIAS -> bf16", s, OK);
    s.td = E4M3;
    expect(lt, "GELU_BIAS -> E4M3", s, NS);
    s = ok, s.epilogue = CUBLASLT_EPILOGUE_GELU, s.tc = s.td = F32;
    expect(lt, "GELU -> fp32", s, NS);
    s = ok, s.epilogue = CUBLASLT_EPILOGUE_GELU_AUX;
    s.desc_extra = [&](cublasLtMatmulDesc_t d) {
        with(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, dev_scale)(d);
        with<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 32)(d);
    };
    expect(lt, "GELU_AUX", s, NS);
    s = ok, s.epilogue = CUBLASLT_EPILOGUE_BGRADA, s.desc_extra = bias;
    expect(lt, "BGRADA", s, NS);
    s = ok, s.epilogue = CUBLASLT_EPILOGUE_BIAS, s.tc = s.td = F32, s.desc_extra = bias;
    expect(lt, "BIAS -> fp32, bias type by default (the table's bf16)", s, OK);
    s.desc_extra = [&](cublasLtMatmulDesc_t d) { bias(d), with<int32_t>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, F32)(d); };
    expect(lt, "BIAS -> fp32 with an fp32 bias", s, NS);

    // cublasLtMatmul answers the same without a heuristic (algo NULL), and its own checks
    char* buf = (char*)dmalloc(1 << 16);
    const float one = 1.0f, zero = 0.0f;
    {
        Setup nn = ok;
        nn.op_a = CUBLAS_OP_N;
        Built b;
        build(nn, &b);
        const cublasStatus_t st = cublasLtMatmul(lt, b.desc, &one, buf, b.l[0], buf + 4096, b.l[1], &zero, buf + 8192, b.l[2],
                                                 buf + 16384, b.l[3], nullptr, nullptr, 0, nullptr);
        report(st == NS, "matmul (no algorithm given), NN: %s", cublasLtGetStatusName(st));
        Setup f8 = ok;
        f8.td = E4M3, f8.ldd = 64, f8.ldc = 32;  // C == D: ldc 32 bf16 elements, ldd 64 bytes, the same bytes
        Built b8;
        build(f8, &b8);
        const cublasStatus_t st8 = cublasLtMatmul(lt, b8.desc, &one, buf, b8.l[0], buf + 4096, b8.l[1], &one, buf + 8192,
                                                  b8.l[2], buf + 8192, b8.l[3], nullptr, nullptr, 0, nullptr);
        report(st8 == IV, "matmul in place (C == D) with a bf16 C and an E4M3 D: %s", cublasLtGetStatusName(st8));
        CHECK_CU(cudaDeviceSynchronize());
    }
    // [G] a scale pointer 4 or 8 bytes past a 16-byte boundary: the heuristic answers, and
    // cublasLtMatmul refuses its answer (an H200's cuBLASLt 13.1); 16 bytes past runs
    for (int attr : {0, 1})
        for (int offset : {1, 2, 4}) {
            Setup sc = ok;
            sc.desc_extra = with(attr == 0 ? CUBLASLT_MATMUL_DESC_A_SCALE_POINTER : CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                 (const void*)(scal + offset));
            Built b;
            build(sc, &b);
            cublasLtMatmulHeuristicResult_t h = {};
            int found = 0;
            const cublasStatus_t hs =
                cublasLtMatmulAlgoGetHeuristic(lt, b.desc, b.l[0], b.l[1], b.l[2], b.l[3], b.pref, 1, &h, &found);
            const cublasStatus_t st = hs != OK || found != 1 ? hs
                                      : cublasLtMatmul(lt, b.desc, &one, buf, b.l[0], buf + 4096, b.l[1], &zero, buf + 8192,
                                                       b.l[2], buf + 8192, b.l[3], &h.algo, buf + 32768, 16384, nullptr);
            CHECK_CU(cudaDeviceSynchronize());
            const cublasStatus_t want = offset % 4 == 0 ? OK : NS;
            report(hs == OK && found == 1 && st == want, "%s scale %d bytes past a 16-byte boundary: heuristic %s, "
                   "matmul %s (expected %s)", attr == 0 ? "A" : "B", 4 * offset, cublasLtGetStatusName(hs),
                   cublasLtGetStatusName(st), cublasLtGetStatusName(want));
        }
    // what would fault on the GPU: a scale the device cannot read
    static float host_scale = 2.0f;
    const bool stops = dies_with("A_SCALE_POINTER", [&] {
        Setup sh = ok;
        sh.desc_extra = with(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, (const void*)&host_scale);
        Built b;
        build(sh, &b);
        cublasLtMatmul(lt, b.desc, &one, buf, b.l[0], buf + 4096, b.l[1], &zero, buf + 8192, b.l[2], buf + 8192, b.l[3],
                       nullptr, nullptr, 0, nullptr);
    });
    report(stops, "A_SCALE_POINTER in host memory: stops (the GPU cannot read it)");
    CHECK_CU(cudaFree(buf));
    CHECK_CU(cudaFree(scal));
}

int main(int argc, char** argv) {
    const char* table = argc > 1 ? argv[1] : "build/emu/fp8_reference.bin";
    cublasLtHandle_t lt;
    CHECK_OK(cublasLtCreate(&lt));
    const bool have_table = load_table(table);
    if (have_table) numerical_checks(lt);
    else printf("SKIP the numerical checks: no table %s of NVIDIA's conversions (make build/emu/fp8_reference.bin "
                "needs the CUDA toolkit's cuda_fp8.h)\n", table);
    refusal_checks(lt);
    CHECK_OK(cublasLtDestroy(lt));
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0 ? 1 : have_table ? 0 : 77;
}
