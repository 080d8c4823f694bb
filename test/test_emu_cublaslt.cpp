// test_emu_cublaslt.cpp: the emulated cuBLASLt (llmc/emu/cublaslt.cpp) against a naive
// double-precision product written here, from cuBLASLt's documented column-major semantics:
// every transpose, odd sizes, padded leading dimensions, row-major A, strided batches,
// alpha/beta, in-place C == D, each epilogue, fp32 / bf16 / TF32, device pointer mode, stream
// order and graph capture; then the statuses of what cuBLASLt refuses, and the faults the
// emulator stops on. One PASS/FAIL line per check; exits non-zero on any failure.
//
// Build: g++ -std=c++17 -O2 -fopenmp -I llmc/emu/include -include llmc/emu/emu.h
//        test/test_emu_cublaslt.cpp llmc/emu/*.cpp -o build/test_emu_cublaslt
//
// Tolerances, |got - ref| <= tol per element, with u = 2^-24 (fp32's unit roundoff):
//   - a sum of k products in fp32: the classic bound gamma_k = k u / (1 - k u) times
//     sum |a_ip b_pj|; alpha, beta C and the bias add three more roundings: (k + 4) u times the
//     sum of magnitudes (mag below) bounds the fp32 value x before the epilogue.
//   - GELU (tanhf, a few ulps) and its derivative: their slope is below 1.2 in magnitude, so
//     1.2 tol_x + 16 u (1 + |x|) for GELU, |g| tol_x + 16 u |x| (1 + |g|) for x g(aux).
//   - a bf16 output adds half a bf16 ulp, 2^-8 |ref|, to the fp32 tolerance.
//   - integer-valued inputs ("exact" cases) make every partial sum exact in fp32 and every
//     result exact in bf16 (|D| < 128 in halves): tolerance 0, which checks layouts exactly.
//   - TF32: the reference rounds A and B the same way (nearest, ties away, written here with
//     frexp/ldexp rather than bits), so the fp32 tolerance still applies.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublasLt.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "test/emu_report.h"  // defines: report, g_pass, g_fail

// a call that must succeed for the test to go on
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

// ---------------------------------------------------------------------------------------
// host matrices: values as doubles, stored in the layout's element order

struct Mat {
    cudaDataType_t type = CUDA_R_32F;
    int64_t rows = 0, cols = 0, ld = 0;
    bool row_major = false;
    int batch = 1;
    int64_t stride = 0;
    std::vector<double> v;  // one per stored element (padding included)
    void* dev = nullptr;

    int64_t at(int64_t r, int64_t c, int b) const { return b * stride + (row_major ? r * ld + c : r + c * ld); }
    size_t elems() const { return (size_t)at(rows - 1, cols - 1, batch - 1) + 1; }
    size_t bytes() const { return elems() * (type == CUDA_R_32F ? 4 : 2); }
};

static uint32_t g_rng = 12345;
static double rnd() {  // uniform in [-1, 1)
    g_rng = g_rng * 1664525u + 1013904223u;
    return (double)(g_rng >> 8) / (double)(1u << 23) - 1.0;
}
// a value the type holds exactly: bf16 keeps the upper 16 bits of a float
static double representable(double x, cudaDataType_t t) {
    float f = (float)x;
    if (t == CUDA_R_16BF) {
        uint32_t u;
        memcpy(&u, &f, 4);
        u &= 0xffff0000u;
        memcpy(&f, &u, 4);
    }
    return f;
}

// rows x cols (x batch), ld = (rows or cols) + pad; values random (scale) or integers in [-2, 2]
static Mat make_mat(cudaDataType_t type, int64_t rows, int64_t cols, int64_t pad, bool row_major, int batch,
                    int64_t stride_pad, bool integers, double scale = 1.0) {
    Mat m;
    m.type = type;
    m.rows = rows;
    m.cols = cols;
    m.row_major = row_major;
    m.ld = (row_major ? cols : rows) + pad;
    m.batch = batch;
    m.stride = (row_major ? rows * m.ld : cols * m.ld) + stride_pad;
    m.v.resize(m.elems());
    for (double& x : m.v) x = integers ? std::floor(rnd() * 2.5 + 0.5) : representable(rnd() * scale, type);
    return m;
}

static void upload(Mat& m) {
    if (m.dev == nullptr) CHECK_CU(cudaMalloc(&m.dev, m.bytes()));
    std::vector<unsigned char> bytes(m.bytes());
    for (size_t i = 0; i < m.v.size(); i++) {
        float f = (float)m.v[i];
        if (m.type == CUDA_R_32F) memcpy(&bytes[i * 4], &f, 4);
        else memcpy(&bytes[i * 2], reinterpret_cast<unsigned char*>(&f) + 2, 2);  // little-endian upper half
    }
    CHECK_CU(cudaMemcpy(m.dev, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
}
// the device's values (every stored element) as doubles
static std::vector<double> download(const Mat& m) {
    std::vector<unsigned char> bytes(m.bytes());
    CHECK_CU(cudaMemcpy(bytes.data(), m.dev, bytes.size(), cudaMemcpyDeviceToHost));
    std::vector<double> out(m.v.size());
    for (size_t i = 0; i < out.size(); i++) {
        float f = 0.0f;
        if (m.type == CUDA_R_32F) memcpy(&f, &bytes[i * 4], 4);
        else memcpy(reinterpret_cast<unsigned char*>(&f) + 2, &bytes[i * 2], 2);
        out[i] = f;
    }
    return out;
}

static cublasLtMatrixLayout_t make_layout(const Mat& m) {
    cublasLtMatrixLayout_t l;
    CHECK_OK(cublasLtMatrixLayoutCreate(&l, m.type, m.rows, m.cols, m.ld));
    if (m.row_major) {
        int32_t order = CUBLASLT_ORDER_ROW;
        CHECK_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof(order)));
    }
    if (m.batch > 1) {
        int32_t batch = m.batch;
        CHECK_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
        CHECK_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.stride,
                                                  sizeof(m.stride)));
    }
    return l;
}

static uint32_t alignment_of(const void* p) {
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a != 0) a /= 2;
    return a;
}

// ---------------------------------------------------------------------------------------
// the reference, in double

static double tf32_ref(double x) {  // nearest with 11 significant bits, ties away from zero
    if (x == 0.0 || !std::isfinite(x)) return x;
    int e;
    const double f = std::frexp(x, &e);  // |f| in [0.5, 1)
    return std::ldexp(std::round(std::ldexp(f, 11)), e - 11);
}
static double gelu_ref(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
static double gelu_grad_ref(double x) {  // d/dx of gelu_ref, written with sech^2 = 1 / cosh^2
    const double s = std::sqrt(2.0 / M_PI), u = s * (x + 0.044715 * x * x * x), ch = std::cosh(u);
    return 0.5 * (1.0 + std::tanh(u)) + 0.5 * x * s * (1.0 + 3.0 * 0.044715 * x * x) / (ch * ch);
}

enum Check { CHECK_D, CHECK_AUX, CHECK_BIAS };

// one matmul, as gptrain's matmul_cublaslt calls it, and its check against the reference
struct Case {
    const char* name;
    cudaDataType_t ab = CUDA_R_32F, cd = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    bool ta = false, tb = false, a_row_major = false;
    int64_t m = 7, n = 5, k = 3, pad = 0;
    int batch = 1;
    float alpha = 1.0f, beta = 0.0f;
    bool in_place = true;  // C == D
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    int64_t aux_ld = 0;     // 0: the epilogue's smallest allowed (m rounded up to 8 or 128)
    bool integers = false;  // exact case
    bool device_scalars = false;
};

static bool run_case(cublasLtHandle_t lt, const Case& c) {
    const bool bias_in = c.epilogue & 4, relu = c.epilogue & 2, gelu = c.epilogue & 32, drelu = c.epilogue & 8,
               dgelu = c.epilogue & 64, bgrad_d = c.epilogue & 16, bgrad_a = c.epilogue == CUBLASLT_EPILOGUE_BGRADA,
               bgrad_b = c.epilogue == CUBLASLT_EPILOGUE_BGRADB, aux_out = (c.epilogue & 128) && (relu || gelu),
               aux_in = drelu || dgelu, bits = relu || drelu;
    const int64_t m = c.m, n = c.n, k = c.k;
    Mat A = make_mat(c.ab, c.ta ? k : m, c.ta ? m : k, c.pad, c.a_row_major, c.batch, 3 * c.pad, c.integers);
    Mat B = make_mat(c.ab, c.tb ? n : k, c.tb ? k : n, c.pad + 1, false, c.batch, 5, c.integers);
    Mat C = make_mat(c.cd, m, n, c.pad + 2, false, c.batch, 7, c.integers);
    Mat D = C;
    D.dev = nullptr;
    const double unwritten = representable(1e30, c.cd);  // D's padding must keep it
    for (double& x : D.v) x = unwritten;
    upload(A);
    upload(B);
    upload(C);
    if (!c.in_place) upload(D);
    // bias: the bias (m) added, or the gradient (m for DGELU/DRELU_BGRAD and BGRADA, n for BGRADB)
    Mat bias = make_mat(c.cd, bgrad_b ? n : m, 1, 0, false, c.batch, 3, c.integers);
    if (bgrad_d || bgrad_a || bgrad_b) bias.v.assign(bias.v.size(), NAN);  // a gradient not written shows
    if (bias_in || bgrad_d || bgrad_a || bgrad_b) upload(bias);
    // aux: the GELU input (D's type, ld a multiple of 8) or the ReLU bit-mask (ld a multiple of 128 bits)
    const int64_t aux_ld = c.aux_ld ? c.aux_ld : bits ? (m + 127) / 128 * 128 : (m + 7) / 8 * 8;
    const int64_t aux_bs = aux_ld * n + (bits ? 128 : 8);
    const size_t aux_bytes = bits ? (size_t)(aux_bs * c.batch / 8) : (size_t)(aux_bs * c.batch * (c.cd == CUDA_R_32F ? 4 : 2));
    std::vector<unsigned char> aux_host(aux_bytes);
    Mat aux_mat;  // GELU aux viewed as a matrix, for upload / download
    aux_mat.type = c.cd, aux_mat.rows = aux_ld, aux_mat.cols = n, aux_mat.ld = aux_ld, aux_mat.batch = c.batch;
    aux_mat.stride = aux_bs;
    aux_mat.v.assign(aux_mat.elems(), 1024.0);  // GELU_AUX: the padding rows must keep it
    void* aux_dev = nullptr;
    if (aux_out || aux_in) {
        if (bits) {
            for (auto& byte : aux_host) byte = (unsigned char)(g_rng = g_rng * 1664525u + 1013904223u) >> 24;
            CHECK_CU(cudaMalloc(&aux_dev, aux_bytes));
            CHECK_CU(cudaMemcpy(aux_dev, aux_host.data(), aux_bytes, cudaMemcpyHostToDevice));
        } else {
            if (aux_in)
                for (double& x : aux_mat.v) x = representable(3.0 * rnd(), c.cd);
            upload(aux_mat);
            aux_dev = aux_mat.dev;
        }
    }

    cublasLtMatmulDesc_t desc;
    CHECK_OK(cublasLtMatmulDescCreate(&desc, c.compute, CUDA_R_32F));
    const cublasOperation_t op_a = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CHECK_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    CHECK_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    CHECK_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &c.epilogue, sizeof(c.epilogue)));
    if (bias.dev) CHECK_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias.dev, sizeof(void*)));
    if (bias.dev && c.batch > 1)
        CHECK_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias.stride, 8));
    if (aux_dev) {
        CHECK_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_dev, sizeof(void*)));
        CHECK_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, 8));
        CHECK_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &aux_bs, 8));
    }
    float* scalars = nullptr;  // device pointer mode: alpha, beta in device memory
    const float host_scalars[2] = {c.alpha, c.beta};
    if (c.device_scalars) {
        int32_t mode = CUBLASLT_POINTER_MODE_DEVICE;
        CHECK_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof(mode)));
        CHECK_CU(cudaMalloc(&scalars, 2 * sizeof(float)));
        CHECK_CU(cudaMemcpy(scalars, host_scalars, sizeof(host_scalars), cudaMemcpyHostToDevice));
    }
    cublasLtMatrixLayout_t la = make_layout(A), lb = make_layout(B), lc = make_layout(C), ld = make_layout(D);
    void* d_ptr = c.in_place ? C.dev : D.dev;
    const size_t ws_bytes = 1 << 20;
    void* ws;
    CHECK_CU(cudaMalloc(&ws, ws_bytes));
    cublasLtMatmulPreference_t pref;
    CHECK_OK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws64 = ws_bytes;
    CHECK_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws64, 8));
    const void* ptrs[4] = {A.dev, B.dev, C.dev, d_ptr};
    for (int i = 0; i < 4; i++) {
        uint32_t al = alignment_of(ptrs[i]);
        CHECK_OK(cublasLtMatmulPreferenceSetAttribute(
            pref, (cublasLtMatmulPreferenceAttributes_t)(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i), &al, 4));
    }
    cublasLtMatmulHeuristicResult_t h = {};
    int found = 0;
    CHECK_OK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, ld, pref, 1, &h, &found));
    if (found != 1 || h.state != CUBLAS_STATUS_SUCCESS || h.workspaceSize > ws_bytes)
        return report(false, "%s: heuristic found=%d workspace=%zu", c.name, found, h.workspaceSize);
    CHECK_OK(cublasLtMatmul(lt, desc, c.device_scalars ? (const void*)scalars : &c.alpha, A.dev, la, B.dev, lb,
                            c.device_scalars ? (const void*)(scalars + 1) : &c.beta, C.dev, lc, d_ptr, ld, &h.algo, ws,
                            ws_bytes, nullptr));
    CHECK_CU(cudaDeviceSynchronize());
    Mat Dout = c.in_place ? C : D;
    Dout.dev = d_ptr;
    const std::vector<double> got = download(Dout);

    // the reference and the comparison
    auto opa = [&](int64_t i, int64_t p, int b) {
        double x = A.v[c.ta ? A.at(p, i, b) : A.at(i, p, b)];
        return c.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? tf32_ref(x) : x;
    };
    auto opb = [&](int64_t p, int64_t j, int b) {
        double x = B.v[c.tb ? B.at(j, p, b) : B.at(p, j, b)];
        return c.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? tf32_ref(x) : x;
    };
    const double half_ulp = c.cd == CUDA_R_16BF ? std::ldexp(1.0, -8) : 0.0;
    double worst = 0.0;  // the largest |err| / tol (exact cases: |err|)
    int bad = 0;
    auto compare = [&](double g, double r, double tol, const char* what, int64_t i, int64_t j, int b) {
        if (c.integers) tol = 0.0;
        else tol += half_ulp * std::fabs(r) + 1e-30;
        const double err = std::fabs(g - r);
        worst = std::max(worst, c.integers ? err : err / tol);
        if (!(err <= tol) && bad++ < 5)
            printf("   %s (%lld, %lld) batch %d: got %.9g expected %.9g (tol %.3g)\n", what, (long long)i, (long long)j,
                   b, g, r, tol);
    };
    std::vector<double> rowsum((size_t)m), rowsum_tol((size_t)m);
    std::vector<unsigned char> aux_got(aux_bytes);
    if (bits && aux_out) CHECK_CU(cudaMemcpy(aux_got.data(), aux_dev, aux_bytes, cudaMemcpyDeviceToHost));
    const std::vector<double> aux_after = aux_out && !bits ? download(aux_mat) : std::vector<double>();
    const std::vector<double> bias_after = bgrad_d || bgrad_a || bgrad_b ? download(bias) : std::vector<double>();
    for (int b = 0; b < c.batch; b++) {
        std::fill(rowsum.begin(), rowsum.end(), 0.0);
        std::fill(rowsum_tol.begin(), rowsum_tol.end(), 0.0);
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < m; i++) {
                double s = 0.0, mag = 0.0;
                for (int64_t p = 0; p < k; p++) {
                    s += opa(i, p, b) * opb(p, j, b);
                    mag += std::fabs(opa(i, p, b) * opb(p, j, b));
                }
                double x = c.alpha * s + (c.beta != 0.0f ? c.beta * C.v[C.at(i, j, b)] : 0.0);
                mag = std::fabs(c.alpha) * mag + std::fabs(c.beta != 0.0f ? c.beta * C.v[C.at(i, j, b)] : 0.0);
                if (bias_in) {
                    x += bias.v[bias.at(i, 0, b)];
                    mag += std::fabs(bias.v[bias.at(i, 0, b)]);
                }
                const double tol_x = (k + 4) * U * mag;
                double y = x, tol = tol_x;
                const int64_t bit = b * aux_bs + j * aux_ld + i;
                if (gelu) {
                    y = gelu_ref(x);
                    tol = 1.2 * tol_x + 16 * U * (1.0 + std::fabs(x));
                    if (aux_out) compare(aux_after[aux_mat.at(i, j, b)], x, tol_x, "aux", i, j, b);
                } else if (relu) {
                    y = x > 0.0 ? x : 0.0;
                    if (aux_out && std::fabs(x) > tol_x)  // a sign within rounding of 0 may go either way
                        compare((aux_got[bit / 8] >> (bit % 8)) & 1, x > 0.0 ? 1.0 : 0.0, 0.0, "aux bit", i, j, b);
                } else if (dgelu) {
                    const double g = gelu_grad_ref(aux_mat.v[aux_mat.at(i, j, b)]);
                    y = x * g;
                    tol = std::fabs(g) * tol_x + 16 * U * std::fabs(x) * (1.0 + std::fabs(g));
                } else if (drelu) {
                    y = ((aux_host[bit / 8] >> (bit % 8)) & 1) ? x : 0.0;
                }
                compare(got[Dout.at(i, j, b)], y, tol, "D", i, j, b);
                rowsum[i] += y;
                rowsum_tol[i] += tol + (n + 1) * U * std::fabs(y);
            }
        if (bgrad_d)
            for (int64_t i = 0; i < m; i++) compare(bias_after[bias.at(i, 0, b)], rowsum[i], rowsum_tol[i], "bgrad", i, 0, b);
        if (bgrad_a || bgrad_b)
            for (int64_t r = 0; r < (bgrad_a ? m : n); r++) {
                double s = 0.0, mag = 0.0;
                for (int64_t p = 0; p < k; p++) {
                    const double x = bgrad_a ? A.v[c.ta ? A.at(p, r, b) : A.at(r, p, b)] : B.v[c.tb ? B.at(r, p, b) : B.at(p, r, b)];
                    s += x;
                    mag += std::fabs(x);
                }
                compare(bias_after[bias.at(r, 0, b)], s, (k + 1) * U * mag, "bgrad", r, 0, b);
            }
    }
    // the padding of D (rows past m in each column) and of GELU's aux must be untouched
    if (!c.in_place)
        for (int b = 0; b < c.batch; b++)
            for (int64_t j = 0; j < n; j++)
                for (int64_t i = m; i < D.ld && (size_t)D.at(i, j, b) < got.size(); i++)
                    if (got[D.at(i, j, b)] != unwritten && bad++ < 5) printf("   D padding (%lld, %lld) written\n", (long long)i, (long long)j);
    if (aux_out && !bits)
        for (int b = 0; b < c.batch; b++)
            for (int64_t j = 0; j < n; j++)
                for (int64_t i = m; i < aux_ld && (size_t)aux_mat.at(i, j, b) < aux_after.size(); i++)
                    if (aux_after[aux_mat.at(i, j, b)] != 1024.0 && bad++ < 5) printf("   aux padding (%lld, %lld) written\n", (long long)i, (long long)j);

    for (cublasLtMatrixLayout_t l : {la, lb, lc, ld}) CHECK_OK(cublasLtMatrixLayoutDestroy(l));
    CHECK_OK(cublasLtMatmulDescDestroy(desc));
    CHECK_OK(cublasLtMatmulPreferenceDestroy(pref));
    for (void* p : {A.dev, B.dev, C.dev, D.dev, bias.dev, aux_dev, (void*)scalars, ws}) CHECK_CU(cudaFree(p));
    return report(bad == 0, "%s (m=%lld n=%lld k=%lld batch=%d): max %s %.3g", c.name, (long long)m, (long long)n,
                  (long long)k, c.batch, c.integers ? "|err|" : "|err|/tol", worst);
}

// ---------------------------------------------------------------------------------------
// the numerical checks

static void numerical_checks(cublasLtHandle_t lt) {
    // every transpose, both data types, padded leading dimensions, alpha/beta, C != D: exact
    for (cudaDataType_t t : {CUDA_R_32F, CUDA_R_16BF})
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                char name[96];
                snprintf(name, sizeof(name), "layout %s op(A)=%c op(B)=%c, lds padded, alpha 2 beta 0.5, C != D",
                         t == CUDA_R_32F ? "fp32" : "bf16", ta ? 'T' : 'N', tb ? 'T' : 'N');
                Case c{name};
                c.ab = c.cd = t;
                c.ta = ta, c.tb = tb, c.pad = 3, c.alpha = 2.0f, c.beta = 0.5f, c.in_place = false, c.integers = true;
                run_case(lt, c);
            }
    Case c{"row-major A (CUBLASLT_ORDER_ROW), exact"};
    c.a_row_major = true, c.pad = 2, c.integers = true, c.beta = 1.0f;
    run_case(lt, c);
    c = Case{"row-major A transposed, exact"};
    c.a_row_major = true, c.ta = true, c.integers = true;
    run_case(lt, c);
    c = Case{"strided batch of 3, in place, beta 1, exact"};
    c.batch = 3, c.pad = 1, c.beta = 1.0f, c.integers = true, c.ta = true;
    run_case(lt, c);
    c = Case{"bf16 inputs, fp32 C/D, exact"};
    c.ab = CUDA_R_16BF, c.integers = true, c.tb = true, c.beta = -1.0f;
    run_case(lt, c);
    // random values: the fp32 accumulation bound; sizes past one 4-column, 256-row tile
    c = Case{"fp32 random, alpha 0.75 beta -1.25"};
    c.m = 301, c.n = 67, c.k = 129, c.ta = true, c.alpha = 0.75f, c.beta = -1.25f;
    run_case(lt, c);
    c = Case{"bf16 random, output rounded to bf16"};
    c.ab = c.cd = CUDA_R_16BF, c.m = 67, c.n = 33, c.k = 257, c.tb = true, c.beta = 1.0f;
    run_case(lt, c);
    c = Case{"TF32 random (inputs rounded as the reference rounds them)"};
    c.compute = CUBLAS_COMPUTE_32F_FAST_TF32, c.m = 33, c.n = 17, c.k = 65, c.ta = true;
    run_case(lt, c);
    c = Case{"alpha, beta in device memory (CUBLASLT_POINTER_MODE_DEVICE)"};
    c.device_scalars = true, c.alpha = -0.5f, c.beta = 2.0f, c.m = 19, c.n = 9, c.k = 11;
    run_case(lt, c);

    // the epilogues, fp32 and bf16, random values
    const struct {
        cublasLtEpilogue_t e;
        const char* name;
    } epilogues[] = {
        {CUBLASLT_EPILOGUE_BIAS, "BIAS"}, {CUBLASLT_EPILOGUE_RELU, "RELU"}, {CUBLASLT_EPILOGUE_RELU_BIAS, "RELU_BIAS"},
        {CUBLASLT_EPILOGUE_RELU_AUX_BIAS, "RELU_AUX_BIAS"}, {CUBLASLT_EPILOGUE_DRELU, "DRELU"},
        {CUBLASLT_EPILOGUE_DRELU_BGRAD, "DRELU_BGRAD"}, {CUBLASLT_EPILOGUE_GELU, "GELU"},
        {CUBLASLT_EPILOGUE_GELU_BIAS, "GELU_BIAS"}, {CUBLASLT_EPILOGUE_GELU_AUX, "GELU_AUX"},
        {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, "GELU_AUX_BIAS"}, {CUBLASLT_EPILOGUE_DGELU, "DGELU"},
        {CUBLASLT_EPILOGUE_DGELU_BGRAD, "DGELU_BGRAD"}, {CUBLASLT_EPILOGUE_BGRADA, "BGRADA"},
        {CUBLASLT_EPILOGUE_BGRADB, "BGRADB"},
    };
    for (cudaDataType_t t : {CUDA_R_32F, CUDA_R_16BF})
        for (const auto& e : epilogues) {
            char name[96];
            snprintf(name, sizeof(name), "epilogue %s %s", e.name, t == CUDA_R_32F ? "fp32" : "bf16");
            Case c{name};
            c.ab = c.cd = t;
            c.epilogue = e.e, c.m = 21, c.n = 13, c.k = 17, c.ta = true, c.beta = 0.5f;
            run_case(lt, c);
        }
    c = Case{"epilogue GELU_AUX_BIAS bf16, batch of 2, aux ld 32"};
    c.ab = c.cd = CUDA_R_16BF, c.epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS, c.batch = 2, c.aux_ld = 32, c.m = 24;
    run_case(lt, c);
    c = Case{"epilogue DGELU_BGRAD fp32, batch of 2, trainer's layout (no transposes, beta 0)"};
    c.epilogue = CUBLASLT_EPILOGUE_DGELU_BGRAD, c.batch = 2, c.m = 16, c.n = 40, c.k = 24;
    run_case(lt, c);
    c = Case{"epilogue BIAS with TF32"};
    c.epilogue = CUBLASLT_EPILOGUE_BIAS, c.compute = CUBLAS_COMPUTE_32F_FAST_TF32, c.m = 40, c.n = 9, c.k = 31;
    run_case(lt, c);
}

// ---------------------------------------------------------------------------------------
// a 1 x 1 x 1 product's value, for the rounding checks

static float product_1x1(cublasLtHandle_t lt, float a, float b, cublasComputeType_t compute) {
    float *d_a, *d_b, *d_d;
    CHECK_CU(cudaMalloc(&d_a, 4));
    CHECK_CU(cudaMalloc(&d_b, 4));
    CHECK_CU(cudaMalloc(&d_d, 4));
    CHECK_CU(cudaMemcpy(d_a, &a, 4, cudaMemcpyHostToDevice));
    CHECK_CU(cudaMemcpy(d_b, &b, 4, cudaMemcpyHostToDevice));
    cublasLtMatmulDesc_t desc;
    CHECK_OK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
    cublasLtMatrixLayout_t l;
    CHECK_OK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 1, 1, 1));
    const float one = 1.0f, zero = 0.0f;
    CHECK_OK(cublasLtMatmul(lt, desc, &one, d_a, l, d_b, l, &zero, d_d, l, d_d, l, nullptr, nullptr, 0, nullptr));
    float d;
    CHECK_CU(cudaMemcpy(&d, d_d, 4, cudaMemcpyDeviceToHost));
    CHECK_OK(cublasLtMatrixLayoutDestroy(l));
    CHECK_OK(cublasLtMatmulDescDestroy(desc));
    for (float* p : {d_a, d_b, d_d}) CHECK_CU(cudaFree(p));
    return d;
}

static void rounding_checks(cublasLtHandle_t lt) {
    const float a = 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -13);  // 0.625 TF32 ulp above 1
    float d = product_1x1(lt, a, 1.0f, CUBLAS_COMPUTE_32F);
    report(d == a, "CUBLAS_COMPUTE_32F keeps fp32 inputs: 1 x (1 + 2^-11 + 2^-13) = %.9g", d);
    d = product_1x1(lt, a, 1.0f, CUBLAS_COMPUTE_32F_FAST_TF32);
    report(d == 1.0f + std::ldexp(1.0f, -10), "FAST_TF32 rounds A to 10 mantissa bits: 1 + 2^-11 + 2^-13 -> %.9g", d);
    d = product_1x1(lt, 1.0f + std::ldexp(1.0f, -11), 1.0f, CUBLAS_COMPUTE_32F_FAST_TF32);
    report(d == 1.0f + std::ldexp(1.0f, -10), "FAST_TF32 rounds a tie away from zero (cvt.rna): 1 + 2^-11 -> %.9g", d);
    d = product_1x1(lt, 3.0f, -(1.0f + std::ldexp(1.0f, -12)), CUBLAS_COMPUTE_32F_FAST_TF32);
    report(d == -3.0f, "FAST_TF32 rounds B (below half an ulp, negative): 3 x -(1 + 2^-12) -> %.9g", d);
    d = product_1x1(lt, 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -10), 1.0f, CUBLAS_COMPUTE_32F_FAST_16BF);
    report(d == 1.0f + std::ldexp(1.0f, -7), "FAST_16BF rounds A to bf16: 1 + 2^-8 + 2^-10 -> %.9g", d);
    d = product_1x1(lt, 1.0f + std::ldexp(1.0f, -8), 1.0f, CUBLAS_COMPUTE_32F_FAST_16BF);
    report(d == 1.0f, "FAST_16BF rounds a tie to even: 1 + 2^-8 -> %.9g", d);
}

// ---------------------------------------------------------------------------------------
// stream order: the work runs in the stream's order and reads device memory when it runs

static void stream_checks(cublasLtHandle_t lt) {
    const int64_t m = 16, n = 8, k = 8;
    float *a, *b, *d;
    CHECK_CU(cudaMalloc(&a, m * k * 4));
    CHECK_CU(cudaMalloc(&b, k * n * 4));
    CHECK_CU(cudaMalloc(&d, m * n * 4));
    std::vector<float> ones(m * k, 1.0f), twos(m * k, 2.0f), bh(k * n, 1.0f), dh(m * n);
    CHECK_CU(cudaMemcpy(b, bh.data(), bh.size() * 4, cudaMemcpyHostToDevice));
    cublasLtMatmulDesc_t desc;
    CHECK_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t la, lb, ld;
    CHECK_OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
    CHECK_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
    CHECK_OK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
    const float one = 1.0f, zero = 0.0f;
    cudaStream_t s;
    CHECK_CU(cudaStreamCreate(&s));
    // A is copied in on the stream just before the product: the product must see it
    CHECK_CU(cudaMemcpyAsync(a, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice, s));
    CHECK_OK(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, nullptr, nullptr, 0, s));
    CHECK_CU(cudaMemcpyAsync(a, twos.data(), twos.size() * 4, cudaMemcpyHostToDevice, s));
    CHECK_CU(cudaStreamSynchronize(s));
    CHECK_CU(cudaMemcpy(dh.data(), d, dh.size() * 4, cudaMemcpyDeviceToHost));
    report(dh[0] == (float)k && dh[m * n - 1] == (float)k, "stream order: the product reads A as the stream left it (%g, expected %g)",
           dh[0], (double)k);
    // captured into a graph: the replay reads A as it is at the replay, not at the capture
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK_CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK_OK(cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, nullptr, nullptr, 0, s));
    CHECK_CU(cudaStreamEndCapture(s, &g));
    CHECK_CU(cudaGraphInstantiate(&ge, g, 0));
    CHECK_CU(cudaMemcpy(a, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CU(cudaMemset(d, 0, m * n * 4));
    CHECK_CU(cudaGraphLaunch(ge, s));
    CHECK_CU(cudaStreamSynchronize(s));
    CHECK_CU(cudaMemcpy(dh.data(), d, dh.size() * 4, cudaMemcpyDeviceToHost));
    report(dh[0] == (float)k, "graph: a captured product replays with the memory of the replay (%g, expected %g)", dh[0],
           (double)k);
    CHECK_CU(cudaGraphExecDestroy(ge));
    CHECK_CU(cudaGraphDestroy(g));
    CHECK_CU(cudaStreamDestroy(s));
    for (cublasLtMatrixLayout_t l : {la, lb, ld}) CHECK_OK(cublasLtMatrixLayoutDestroy(l));
    CHECK_OK(cublasLtMatmulDescDestroy(desc));
    for (float* p : {a, b, d}) CHECK_CU(cudaFree(p));
}

// ---------------------------------------------------------------------------------------
// what cuBLASLt refuses, with the status it answers

// A valid fp32 problem (m=16 n=8 k=4, no transposes) that each check spoils in one way.
struct Setup {
    cudaDataType_t ta = CUDA_R_32F, tb = CUDA_R_32F, tc = CUDA_R_32F, td = CUDA_R_32F, scale = CUDA_R_32F;
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
    int64_t m = 16, n = 8, k = 4, kb = 4, lda = 16, ldc = 16;
    int batch_b = 1;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    std::function<void(cublasLtMatmulDesc_t)> desc_extra;
    std::function<void(cublasLtMatmulPreference_t)> pref_extra;
};
struct Built {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulPreference_t pref;
    ~Built() {
        cublasLtMatmulDescDestroy(desc);
        for (cublasLtMatrixLayout_t l : {la, lb, lc, ld}) cublasLtMatrixLayoutDestroy(l);
        cublasLtMatmulPreferenceDestroy(pref);
    }
};
static void build(const Setup& s, Built* b) {
    CHECK_OK(cublasLtMatmulDescCreate(&b->desc, s.compute, s.scale));
    CHECK_OK(cublasLtMatmulDescSetAttribute(b->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, sizeof(s.epilogue)));
    if (s.desc_extra) s.desc_extra(b->desc);
    CHECK_OK(cublasLtMatrixLayoutCreate(&b->la, s.ta, s.m, s.k, s.lda));
    CHECK_OK(cublasLtMatrixLayoutCreate(&b->lb, s.tb, s.kb, s.n, s.kb));
    CHECK_OK(cublasLtMatrixLayoutCreate(&b->lc, s.tc, s.m, s.n, s.ldc));
    CHECK_OK(cublasLtMatrixLayoutCreate(&b->ld, s.td, s.m, s.n, s.m));
    if (s.batch_b != 1) CHECK_OK(cublasLtMatrixLayoutSetAttribute(b->lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &s.batch_b, 4));
    CHECK_OK(cublasLtMatmulPreferenceCreate(&b->pref));
    uint64_t ws = 1 << 20;
    CHECK_OK(cublasLtMatmulPreferenceSetAttribute(b->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, 8));
    if (s.pref_extra) s.pref_extra(b->pref);
}
static cublasStatus_t heuristic(cublasLtHandle_t lt, const Setup& s, int* found) {
    Built b;
    build(s, &b);
    cublasLtMatmulHeuristicResult_t h = {};
    *found = -1;
    return cublasLtMatmulAlgoGetHeuristic(lt, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 1, &h, found);
}
static void expect_heuristic(cublasLtHandle_t lt, const char* what, const Setup& s, cublasStatus_t want) {
    int found;
    const cublasStatus_t st = heuristic(lt, s, &found);
    report(st == want && found == (want == CUBLAS_STATUS_SUCCESS ? 1 : 0), "heuristic, %s: %s (expected %s), %d algorithms",
           what, cublasLtGetStatusName(st), cublasLtGetStatusName(want), found);
}
template <typename T> static std::function<void(cublasLtMatmulDesc_t)> set_desc(cublasLtMatmulDescAttributes_t a, T v) {
    return [a, v](cublasLtMatmulDesc_t d) { CHECK_OK(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof(v))); };
}
static std::function<void(cublasLtMatmulDesc_t)> both(std::function<void(cublasLtMatmulDesc_t)> f,
                                                     std::function<void(cublasLtMatmulDesc_t)> g) {
    return [f, g](cublasLtMatmulDesc_t d) { f(d), g(d); };
}

static void rejection_checks(cublasLtHandle_t lt) {
    void *buf, *ws;  // 64 KiB of device memory for bias and aux pointers
    CHECK_CU(cudaMalloc(&buf, 1 << 16));
    CHECK_CU(cudaMalloc(&ws, 1 << 20));
    char* bufc = (char*)buf;
    Setup ok;
    expect_heuristic(lt, "the valid baseline", ok, CUBLAS_STATUS_SUCCESS);

    // descriptors' attributes [H]: size, NULL buffer, unknown attribute
    cublasLtMatmulDesc_t desc;
    CHECK_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int64_t eight = 1;
    cublasStatus_t st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &eight, sizeof(eight));
    report(st == CUBLAS_STATUS_INVALID_VALUE, "SetAttribute(TRANSA) with 8 bytes for an int32_t: %s", cublasLtGetStatusName(st));
    st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4);
    report(st == CUBLAS_STATUS_INVALID_VALUE, "SetAttribute(TRANSA) with a NULL buffer: %s", cublasLtGetStatusName(st));
    st = cublasLtMatmulDescSetAttribute(desc, (cublasLtMatmulDescAttributes_t)9, &eight, 8);
    report(st == CUBLAS_STATUS_INVALID_VALUE, "SetAttribute of attribute 9 (none such): %s", cublasLtGetStatusName(st));
    size_t written = 0;
    uint32_t epi = 0;
    st = cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, nullptr, 0, &written);
    report(st == CUBLAS_STATUS_SUCCESS && written == 4, "GetAttribute(EPILOGUE) size query: %s, %zu bytes",
           cublasLtGetStatusName(st), written);
    st = cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, 4, &written);
    report(st == CUBLAS_STATUS_SUCCESS && epi == CUBLASLT_EPILOGUE_DEFAULT, "GetAttribute(EPILOGUE) default: %u", epi);
    st = cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &eight, 8, &written);
    report(st == CUBLAS_STATUS_INVALID_VALUE, "GetAttribute(EPILOGUE) into 8 bytes: %s", cublasLtGetStatusName(st));
    CHECK_OK(cublasLtMatmulDescDestroy(desc));

    // the heuristic's own arguments [H]
    {
        Built b;
        build(ok, &b);
        cublasLtMatmulHeuristicResult_t h = {};
        int found = -1;
        st = cublasLtMatmulAlgoGetHeuristic(lt, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 0, &h, &found);
        report(st == CUBLAS_STATUS_INVALID_VALUE, "heuristic, requestedAlgoCount 0: %s", cublasLtGetStatusName(st));
        st = cublasLtMatmulAlgoGetHeuristic(nullptr, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 1, &h, &found);
        report(st == CUBLAS_STATUS_NOT_INITIALIZED, "heuristic, NULL handle: %s", cublasLtGetStatusName(st));
    }

    Setup s = ok;  // shapes and layouts
    s.kb = 5;
    expect_heuristic(lt, "A has k=4, B k=5", s, CUBLAS_STATUS_INVALID_VALUE);
    s = ok, s.lda = 8;
    expect_heuristic(lt, "lda 8 < rows 16", s, CUBLAS_STATUS_INVALID_VALUE);
    s = ok, s.batch_b = 2;
    expect_heuristic(lt, "B batch 2, the others 1", s, CUBLAS_STATUS_INVALID_VALUE);
    s = ok, s.desc_extra = set_desc<int32_t>(CUBLASLT_MATMUL_DESC_TRANSC, CUBLAS_OP_T);
    expect_heuristic(lt, "TRANSC = T", s, CUBLAS_STATUS_NOT_SUPPORTED);

    // data and compute types [D]
    s = ok, s.ta = s.tb = s.tc = s.td = CUDA_R_16BF, s.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
    expect_heuristic(lt, "TF32 compute with bf16 data", s, CUBLAS_STATUS_NOT_SUPPORTED);
    s = ok, s.tb = CUDA_R_16BF;
    expect_heuristic(lt, "A fp32, B bf16", s, CUBLAS_STATUS_NOT_SUPPORTED);
    s = ok, s.tc = s.td = CUDA_R_16BF;
    expect_heuristic(lt, "fp32 A/B, bf16 C/D", s, CUBLAS_STATUS_NOT_SUPPORTED);
    s = ok, s.ta = s.tb = s.tc = CUDA_R_16BF;
    expect_heuristic(lt, "C bf16, D fp32", s, CUBLAS_STATUS_NOT_SUPPORTED);
    s = ok, s.ta = s.tb = CUDA_R_16BF;
    expect_heuristic(lt, "bf16 A/B, fp32 C/D (supported)", s, CUBLAS_STATUS_SUCCESS);
    s = ok, s.scale = CUDA_R_16BF;
    expect_heuristic(lt, "scale type bf16", s, CUBLAS_STATUS_NOT_SUPPORTED);
    s = ok, s.ta = s.tb = s.tc = s.td = CUDA_R_16F;
    expect_heuristic(lt, "fp16 data (not emulated)", s, CUBLAS_STATUS_NOT_SUPPORTED);
    s = ok, s.desc_extra = set_desc<void*>(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, buf);
    expect_heuristic(lt, "an fp8 A scale pointer on fp32 data", s, CUBLAS_STATUS_INVALID_VALUE);

    // epilogues [H] [N]
    auto bias = set_desc<void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER, buf);
    auto aux = set_desc<void*>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, bufc + 4096);
    s = ok, s.epilogue = (cublasLtEpilogue_t)3;
    expect_heuristic(lt, "epilogue 3 (none such)", s, CUBLAS_STATUS_INVALID_VALUE);
    s = ok, s.epilogue = CUBLASLT_EPILOGUE_BIAS;
    expect_heuristic(lt, "BIAS without a bias pointer", s, CUBLAS_STATUS_INVALID_VALUE);
    s.desc_extra = bias;
    expect_heuristic(lt, "BIAS with one", s, CUBLAS_STATUS_SUCCESS);
    s.desc_extra = both(bias, set_desc<int32_t>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_16BF));
    expect_heuristic(lt, "BIAS of bf16 for an fp32 D", s, CUBLAS_STATUS_NOT_SUPPORTED);
    s = ok, s.epilogue = CUBLASLT_EPILOGUE_GELU_AUX, s.desc_extra = set_desc<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 16);
    expect_heuristic(lt, "GELU_AUX without an aux pointer", s, CUBLAS_STATUS_INVALID_VALUE);
    s.desc_extra = both(aux, set_desc<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 16));
    expect_heuristic(lt, "GELU_AUX, aux ld 16 (m 16)", s, CUBLAS_STATUS_SUCCESS);
    s.desc_extra = both(aux, set_desc<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 8));
    expect_heuristic(lt, "GELU_AUX, aux ld 8 < m 16", s, CUBLAS_STATUS_INVALID_VALUE);
    s.m = s.lda = s.ldc = 12, s.desc_extra = both(aux, set_desc<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 12));
    expect_heuristic(lt, "GELU_AUX, aux ld 12 (not a multiple of 8)", s, CUBLAS_STATUS_NOT_SUPPORTED);
    s = ok, s.epilogue = CUBLASLT_EPILOGUE_GELU_AUX;
    s.desc_extra = both(both(aux, set_desc<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 16)),
                        set_desc<int32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, CUDA_R_16BF));
    expect_heuristic(lt, "GELU_AUX, aux data type bf16 for an fp32 D", s, CUBLAS_STATUS_INVALID_VALUE);
    s = ok, s.epilogue = CUBLASLT_EPILOGUE_RELU_AUX;
    s.desc_extra = both(aux, set_desc<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 64));
    expect_heuristic(lt, "RELU_AUX, bit-mask ld 64 (not a multiple of 128)", s, CUBLAS_STATUS_NOT_SUPPORTED);
    s = ok, s.epilogue = CUBLASLT_EPILOGUE_DGELU, s.k = s.kb = 1;
    s.desc_extra = both(aux, set_desc<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 16));
    expect_heuristic(lt, "DGELU with k = 1", s, CUBLAS_STATUS_NOT_SUPPORTED);
    s = ok, s.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    expect_heuristic(lt, "BGRADB without a bias pointer", s, CUBLAS_STATUS_INVALID_VALUE);

    // alignment [H]: the preferences' promises, the pointers in the descriptor
    s = ok, s.pref_extra = [](cublasLtMatmulPreference_t p) {
        uint32_t two = 2;
        CHECK_OK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &two, 4));
    };
    expect_heuristic(lt, "fp32 A promised only 2-byte aligned", s, CUBLAS_STATUS_NOT_SUPPORTED);
    s = ok, s.ta = s.tb = s.tc = s.td = CUDA_R_16BF, s.epilogue = CUBLASLT_EPILOGUE_BIAS;
    s.desc_extra = set_desc<void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bufc + 1);
    expect_heuristic(lt, "a bf16 bias at an odd address", s, CUBLAS_STATUS_NOT_SUPPORTED);

    // cublasLtMatmul's own checks: algo, workspace, in place [H] [D]
    {
        Built b;
        build(ok, &b);
        cublasLtMatmulHeuristicResult_t h = {};
        int found = 0;
        CHECK_OK(cublasLtMatmulAlgoGetHeuristic(lt, b.desc, b.la, b.lb, b.lc, b.ld, b.pref, 1, &h, &found));
        float *a = (float*)bufc, *bm = a + 64, *d = bm + 64;  // 256-byte aligned, as promised
        const float one = 1.0f, zero = 0.0f;
        st = cublasLtMatmul(lt, b.desc, &one, a, b.la, bm, b.lb, &zero, d, b.lc, d, b.ld, &h.algo, ws, 1 << 20, nullptr);
        report(st == CUBLAS_STATUS_SUCCESS, "matmul with the heuristic's algorithm: %s", cublasLtGetStatusName(st));
        report(h.workspaceSize > 0, "the algorithm claims workspace (%zu bytes)", h.workspaceSize);
        st = cublasLtMatmul(lt, b.desc, &one, a, b.la, bm, b.lb, &zero, d, b.lc, d, b.ld, &h.algo, ws,
                            h.workspaceSize - 1, nullptr);
        report(st == CUBLAS_STATUS_INVALID_VALUE, "matmul, workspace 1 byte short of the algorithm's: %s",
               cublasLtGetStatusName(st));
        cublasLtMatmulAlgo_t zeros = {};
        st = cublasLtMatmul(lt, b.desc, &one, a, b.la, bm, b.lb, &zero, d, b.lc, d, b.ld, &zeros, ws, 1 << 20, nullptr);
        report(st == CUBLAS_STATUS_INVALID_VALUE, "matmul, an algorithm no heuristic gave: %s", cublasLtGetStatusName(st));
        st = cublasLtMatmul(nullptr, b.desc, &one, a, b.la, bm, b.lb, &zero, d, b.lc, d, b.ld, &h.algo, ws, 1 << 20, nullptr);
        report(st == CUBLAS_STATUS_NOT_INITIALIZED, "matmul, NULL handle: %s", cublasLtGetStatusName(st));
        Setup sb = ok;
        sb.epilogue = CUBLASLT_EPILOGUE_BIAS, sb.desc_extra = bias;
        Built bb;
        build(sb, &bb);
        st = cublasLtMatmul(lt, bb.desc, &one, a, bb.la, bm, bb.lb, &zero, d, bb.lc, d, bb.ld, &h.algo, ws, 1 << 20, nullptr);
        report(st == CUBLAS_STATUS_NOT_SUPPORTED, "matmul, BIAS with the DEFAULT epilogue's algorithm: %s",
               cublasLtGetStatusName(st));
        Setup sc = ok;
        sc.ldc = 20;
        Built bc;
        build(sc, &bc);
        st = cublasLtMatmul(lt, bc.desc, &one, a, bc.la, bm, bc.lb, &one, d, bc.lc, d, bc.ld, &h.algo, ws, 1 << 20, nullptr);
        report(st == CUBLAS_STATUS_INVALID_VALUE, "matmul in place (C == D) with ldc 20 != ldd 16: %s",
               cublasLtGetStatusName(st));
        CHECK_CU(cudaDeviceSynchronize());
    }
    report(strcmp(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED") == 0,
           "cublasLtGetStatusName(15) = %s", cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED));
    CHECK_CU(cudaFree(buf));
    CHECK_CU(cudaFree(ws));
}

// ---------------------------------------------------------------------------------------
// what would fault on the GPU stops the program (emu::fatal), naming the cause

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

static void fault_checks(cublasLtHandle_t lt) {
    const int64_t m = 16, n = 8, k = 4;
    char* buf;
    CHECK_CU(cudaMalloc(&buf, 4096));
    float *a = (float*)buf, *b = a + 256, *d = b + 256;
    const float one = 1.0f, zero = 0.0f;
    cublasLtMatmulDesc_t desc;
    CHECK_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t la, lb, ld, lbig;
    CHECK_OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
    CHECK_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
    CHECK_OK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
    CHECK_OK(cublasLtMatrixLayoutCreate(&lbig, CUDA_R_32F, k, 1000, k));  // 16,000 bytes: past the allocation
    cublasLtMatmulPreference_t pref;
    CHECK_OK(cublasLtMatmulPreferenceCreate(&pref));  // the default: 256-byte alignment promised
    cublasLtMatmulHeuristicResult_t h = {};
    int found = 0;
    CHECK_OK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &h, &found));
    bool ok = dies_with("aligned", [&] {
        cublasLtMatmul(lt, desc, &one, a + 4, la, b, lb, &zero, d, ld, d, ld, &h.algo, nullptr, 0, nullptr);
    });
    report(ok, "A 16-byte aligned with an algorithm chosen for 256: stops (misaligned address on the GPU)");
    ok = dies_with("not inside one device allocation", [&] {
        cublasLtMatrixLayout_t ldbig;  // (algo NULL: the implicit heuristic)
        CHECK_OK(cublasLtMatrixLayoutCreate(&ldbig, CUDA_R_32F, m, 1000, m));
        cublasLtMatmul(lt, desc, &one, a, la, b, lbig, &zero, d, ldbig, d, ldbig, nullptr, nullptr, 0, nullptr);
    });
    report(ok, "B and D reaching past their allocation: stops (illegal address on the GPU)");
    ok = dies_with("D overlaps A", [&] {
        cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, a, ld, a, ld, &h.algo, nullptr, 0, nullptr);
    });
    report(ok, "D == A: stops (the result would depend on the order of tiles)");
    ok = dies_with("pointer mode HOST", [&] {
        cublasLtMatmul(lt, desc, d, a, la, b, lb, &zero, d, ld, d, ld, &h.algo, nullptr, 0, nullptr);
    });
    report(ok, "alpha in device memory with the HOST pointer mode: stops (the host cannot read it)");
    for (cublasLtMatrixLayout_t l : {la, lb, ld, lbig}) CHECK_OK(cublasLtMatrixLayoutDestroy(l));
    CHECK_OK(cublasLtMatmulDescDestroy(desc));
    CHECK_OK(cublasLtMatmulPreferenceDestroy(pref));
    CHECK_CU(cudaFree(buf));
}

int main() {
    cublasLtHandle_t lt;
    CHECK_OK(cublasLtCreate(&lt));
    numerical_checks(lt);
    rounding_checks(lt);
    stream_checks(lt);
    rejection_checks(lt);
    fault_checks(lt);
    CHECK_OK(cublasLtDestroy(lt));
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail == 0 ? 0 : 1;
}
