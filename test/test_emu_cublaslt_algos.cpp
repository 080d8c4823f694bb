// test_emu_cublaslt_algos.cpp: the emulated cuBLASLt's heuristic when asked for more than one
// answer (llmc/emu/cublaslt.cpp, heuristic_answers), as `-ma timed` asks it
// (llmc/cuda/matmul.cuh): several answers come back, no more than requested, the first the
// one a request for one gets; each reports its workspace and is refused by cublasLtMatmul
// with less; each one's product is within fp32's bound of a naive double-precision product
// written here; and at least two of them differ in the last bits (the split-K answers sum k
// in another order), which is why the trainer saves its choice with each checkpoint.
// (test_emu_cublaslt.cpp checks the first answer's arithmetic in full; it is over 800 lines.)
// One PASS/FAIL line per check; exits non-zero on any failure.
//
// Tolerance, |got - ref| <= (k + 4) u sum |a_ip b_pj| (+ |beta c|) per element, u = 2^-24:
// gamma_k for a sum of k products in fp32 in any order (the bound does not depend on the
// order, so it holds for every split), alpha and beta C adding a few roundings more.
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <vector>

#include "test/emu_report.h"  // defines: report, g_pass, g_fail

#define CHECK_OK(x)                                                                                        \
    do {                                                                                                   \
        cublasStatus_t st_ = (x);                                                                          \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                \
            printf("FAIL: %s:%d: %s returned %s\n", __FILE__, __LINE__, #x, cublasLtGetStatusName(st_)); \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)
#define CHECK_CU(x)                                                                                      \
    do {                                                                                                 \
        cudaError_t e_ = (x);                                                                            \
        if (e_ != cudaSuccess) {                                                                         \
            printf("FAIL: %s:%d: %s returned %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_)); \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

static uint32_t g_rng = 777;
static float rnd() {  // uniform in [-1, 1)
    g_rng = g_rng * 1664525u + 1013904223u;
    return (float)((double)(g_rng >> 8) / (double)(1u << 23) - 1.0);
}

// column-major fp32 D (m, n) = A (m, k) B (k, n) + beta C, C == D, each candidate the heuristic
// gives for up to `requested` answers and a workspace of up to `max_ws` bytes
static void check_shape(cublasLtHandle_t lt, int m, int n, int k, float beta, int requested, uint64_t max_ws,
                        int expect) {
    std::vector<float> a((size_t)m * k), b((size_t)k * n), c((size_t)m * n);
    for (float& x : a) x = rnd();
    for (float& x : b) x = rnd();
    for (float& x : c) x = rnd();
    float *da, *db, *dd;
    void* ws;
    CHECK_CU(cudaMalloc(&da, a.size() * 4));
    CHECK_CU(cudaMalloc(&db, b.size() * 4));
    CHECK_CU(cudaMalloc(&dd, c.size() * 4));
    CHECK_CU(cudaMalloc(&ws, 32u << 20));
    CHECK_CU(cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CU(cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
    cublasLtMatmulDesc_t desc;
    CHECK_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t la, lb, ld;
    CHECK_OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m));
    CHECK_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k));
    CHECK_OK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m));
    cublasLtMatmulPreference_t pref;
    CHECK_OK(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                                  sizeof(max_ws)));
    cublasLtMatmulHeuristicResult_t one = {}, h[16] = {};
    int found_one = 0, found = 0;
    CHECK_OK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &one, &found_one));
    CHECK_OK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, requested, h, &found));
    char shape[128];
    snprintf(shape, sizeof(shape), "m=%d n=%d k=%d beta=%g, %d asked, workspace up to %llu", m, n, k, beta, requested,
             (unsigned long long)max_ws);
    report(found_one == 1 && found == expect, "%s: %d answers, %d expected (1 when 1 asked)", shape, found, expect);
    report(memcmp(&one.algo, &h[0].algo, sizeof(one.algo)) == 0 && one.workspaceSize == h[0].workspaceSize,
           "%s: the first answer is the one a request for one gets", shape);
    // the reference, in double
    std::vector<double> ref(c.size()), tol(c.size());
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0, mag = 0;
            for (int p = 0; p < k; p++) {
                s += (double)a[i + (size_t)p * m] * b[p + (size_t)j * k];
                mag += std::fabs((double)a[i + (size_t)p * m] * b[p + (size_t)j * k]);
            }
            const size_t at = i + (size_t)j * m;
            ref[at] = s + beta * (double)c[at];
            tol[at] = (k + 4) * std::ldexp(1.0, -24) * (mag + std::fabs(beta * (double)c[at]));
        }
    std::vector<std::vector<float>> got(found, std::vector<float>(c.size()));
    const float alpha = 1.0f;
    for (int r = 0; r < found; r++) {
        report(h[r].state == CUBLAS_STATUS_SUCCESS && h[r].workspaceSize <= max_ws,
               "%s: answer %d reports %zu workspace bytes, within the preference", shape, r, h[r].workspaceSize);
        if (h[r].workspaceSize > 0) {
            cublasStatus_t st = cublasLtMatmul(lt, desc, &alpha, da, la, db, lb, &beta, dd, ld, dd, ld, &h[r].algo, ws,
                                               h[r].workspaceSize - 1, nullptr);
            report(st == CUBLAS_STATUS_INVALID_VALUE, "%s: answer %d given a byte less workspace: %s", shape, r,
                   cublasLtGetStatusName(st));
        }
        CHECK_CU(cudaMemcpy(dd, c.data(), c.size() * 4, cudaMemcpyHostToDevice));
        CHECK_OK(cublasLtMatmul(lt, desc, &alpha, da, la, db, lb, &beta, dd, ld, dd, ld, &h[r].algo, ws,
                                h[r].workspaceSize, nullptr));
        CHECK_CU(cudaMemcpy(got[r].data(), dd, c.size() * 4, cudaMemcpyDeviceToHost));
        double worst = 0;
        size_t bad = 0;
        for (size_t e = 0; e < c.size(); e++) {
            const double err = std::fabs(got[r][e] - ref[e]);
            if (!(err <= tol[e])) bad++;
            worst = std::max(worst, err / tol[e]);
        }
        report(bad == 0, "%s: answer %d within (k+4)u of the double product (worst %.3g of the bound, %zu outside)",
               shape, r, worst, bad);
    }
    int differ = 0;  // answers whose bits differ from the first's somewhere
    for (int r = 1; r < found; r++) differ += memcmp(got[r].data(), got[0].data(), c.size() * 4) != 0;
    if (found > 1)
        report(differ > 0, "%s: %d of the %d other answers differ from the first in some bit", shape, differ,
               found - 1);
    CHECK_OK(cublasLtMatmulPreferenceDestroy(pref));
    for (cublasLtMatrixLayout_t l : {la, lb, ld}) CHECK_OK(cublasLtMatrixLayoutDestroy(l));
    CHECK_OK(cublasLtMatmulDescDestroy(desc));
    for (void* p : {(void*)da, (void*)db, (void*)dd, ws}) CHECK_CU(cudaFree(p));
}

int main() {
    cublasLtHandle_t lt;
    CHECK_OK(cublasLtCreate(&lt));
    const uint64_t MiB32 = 32u << 20;
    // the expected counts: the first answer and splits of 2, 4 and 8 where each part gets 2 of k
    // and the parts' fp32 products fit the workspace (llmc/emu/cublaslt.cpp, heuristic_answers)
    check_shape(lt, 37, 29, 203, 0.0f, 16, MiB32, 4);  // odd sizes: parts of unequal length
    check_shape(lt, 64, 48, 768, 1.0f, 16, MiB32, 4);  // accumulate (beta 1), as the weight gradients do
    check_shape(lt, 64, 48, 768, 0.0f, 2, MiB32, 2);   // no more than requested
    check_shape(lt, 64, 48, 768, 0.0f, 16, 0, 1);      // no workspace: only the algorithm that needs none
    check_shape(lt, 16, 8, 7, 0.0f, 16, MiB32, 2);     // k = 7: only 2 parts get 2 or more each
    CHECK_OK(cublasLtDestroy(lt));
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail == 0 ? 0 : 1;
}
