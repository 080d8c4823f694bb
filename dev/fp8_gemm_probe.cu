// fp8_gemm_probe.cu: which of the FP8 GEMMs train_gpt_fp8 asks cuBLASLt for does this GPU's
// cuBLASLt run, variant by variant. For a lent GPU when an FP8 product stops with
// CUBLAS_STATUS_NOT_SUPPORTED (the first H200 run of train_gpt_fp8, 2026-11-27): each variant is
// one change from the trainer's call (llmc/cuda/fp8.cuh's fp8_matmul), and for each it prints
// the heuristic's status and answer count, then which of those answers cublasLtMatmul accepts.
// Not a test (nothing here is checked against a reference): a diagnosis. `make -f cuda.mk
// build/cuda/fp8_gemm_probe` (part of cuda-all, so it keeps compiling), then on the GPU
//   CUBLASLT_LOG_LEVEL=2 build/cuda/fp8_gemm_probe      (cuBLASLt's own error lines say why)
// Its first run (dev/results/2026-11-27_gpu_h200_fp8_gemm_probe.txt) ran every variant; the
// trainer's calls differed by a scale pointer 4 bytes past a 16-byte boundary, which cuBLASLt
// refuses (llmc/gpu_scratch.h, FP8_GEMM_SCALE_STRIDE).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

static void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

struct Variant {
    const char* name;
    cudaDataType_t ta, tb, td;
    bool bias, scales, fast;
    float beta;
    int order;  // 0: TN as the trainer; 1: A (m,k) N and B (k,n) N, for contrast
};

// one variant at m,n,k: "heuristic status, answers; how many cublasLtMatmul accepts (the first?)"
static void probe(cublasLtHandle_t lt, const Variant& v, int m, int n, int k, void* a, void* b, void* d, void* bias,
                  float* sa, float* sb, void* ws, size_t ws_bytes) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    const cublasOperation_t opa = v.order == 0 ? CUBLAS_OP_T : CUBLAS_OP_N, opb = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb));
    const int8_t fast = v.fast ? 1 : 0;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast));
    if (v.scales) {
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa));
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb));
    }
    const cublasLtEpilogue_t epi = v.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    if (v.bias) {
        const cudaDataType_t bt = CUDA_R_16BF;
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt));
    }
    cublasLtMatrixLayout_t la, lb, ld;
    if (v.order == 0) cublasLtMatrixLayoutCreate(&la, v.ta, k, m, k);
    else cublasLtMatrixLayoutCreate(&la, v.ta, m, k, m);
    cublasLtMatrixLayoutCreate(&lb, v.tb, k, n, k);
    cublasLtMatrixLayoutCreate(&ld, v.td, m, n, m);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t wsb = ws_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb));
    cublasLtMatmulHeuristicResult_t res[16] = {};
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 16, res, &found);
    int ok = 0, first = -1;
    cublasStatus_t first_status = CUBLAS_STATUS_SUCCESS;
    const float alpha = 1.0f;
    for (int i = 0; i < found; i++) {
        const cublasStatus_t s = cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &v.beta, d, ld, d, ld, &res[i].algo, ws,
                                                ws_bytes, 0);
        if (i == 0) first_status = s;
        if (s == CUBLAS_STATUS_SUCCESS) {
            ok++;
            if (first < 0) first = i;
        }
    }
    const cudaError_t e = cudaDeviceSynchronize();
    printf("%-34s m=%5d n=%5d k=%5d  heuristic %-28s answers %2d  run ok %2d  first answer %s%s\n", v.name, m, n, k,
           cublasLtGetStatusName(hs), found, ok, found == 0 ? "-" : cublasLtGetStatusName(first_status),
           e == cudaSuccess ? "" : "  (device error after the runs)");
    check_cuda(e, v.name);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
}

int main() {
    cudaDeviceProp p;
    check_cuda(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties");
    printf("%s sm_%d%d, cuBLASLt %zu, CUDA runtime %d\n", p.name, p.major, p.minor, cublasLtGetVersion(),
           (int)CUDART_VERSION);
    cublasLtHandle_t lt;
    cublasLtCreate(&lt);
    const size_t max_elems = (size_t)14336 * 8192, ws_bytes = 32u << 20;
    void *a, *b, *d, *bias, *ws;
    float *sa, *sb;
    check_cuda(cudaMalloc(&a, max_elems), "a");
    check_cuda(cudaMalloc(&b, max_elems), "b");
    check_cuda(cudaMalloc(&d, max_elems * 4), "d");
    check_cuda(cudaMalloc(&bias, 65536), "bias");
    check_cuda(cudaMalloc(&ws, ws_bytes), "ws");
    check_cuda(cudaMalloc(&sa, 4), "sa");
    check_cuda(cudaMalloc(&sb, 4), "sb");
    check_cuda(cudaMemset(a, 0, max_elems), "memset");
    check_cuda(cudaMemset(b, 0, max_elems), "memset");
    check_cuda(cudaMemset(d, 0, max_elems * 4), "memset");
    check_cuda(cudaMemset(bias, 0, 65536), "memset");
    const float one = 1.0f;
    check_cuda(cudaMemcpy(sa, &one, 4, cudaMemcpyHostToDevice), "sa");
    check_cuda(cudaMemcpy(sb, &one, 4, cudaMemcpyHostToDevice), "sb");
    const cudaDataType_t E4 = CUDA_R_8F_E4M3, E5 = CUDA_R_8F_E5M2, BF = CUDA_R_16BF, F32 = CUDA_R_32F;
    const Variant variants[] = {
        // the trainer's three calls, as fp8_matmul makes them
        {"fwd e4m3 x e4m3 -> bf16 bias fast", E4, E4, BF, true, true, true, 0.0f, 0},
        {"fwd e4m3 x e4m3 -> bf16 fast", E4, E4, BF, false, true, true, 0.0f, 0},
        {"fwd ... beta 1 (residual) fast", E4, E4, BF, false, true, true, 1.0f, 0},
        {"dinp e4m3 x e5m2 -> bf16", E4, E5, BF, false, true, false, 0.0f, 0},
        {"dinp ... beta 1", E4, E5, BF, false, true, false, 1.0f, 0},
        {"dweight e4m3 x e5m2 -> bf16 beta 1", E4, E5, BF, false, true, false, 1.0f, 0},
        // one change each
        {"fwd ... no fast accum", E4, E4, BF, false, true, false, 0.0f, 0},
        {"fwd ... no scale pointers", E4, E4, BF, false, false, true, 0.0f, 0},
        {"fwd ... -> fp32", E4, E4, F32, false, true, true, 0.0f, 0},
        {"dinp e5m2 x e4m3 -> bf16", E5, E4, BF, false, true, false, 0.0f, 0},
        {"dweight ... -> fp32 beta 1", E4, E5, F32, false, true, false, 1.0f, 0},
        {"dweight ... beta 0", E4, E5, BF, false, true, false, 0.0f, 0},
        {"fwd NN (not allowed: contrast)", E4, E4, BF, false, true, true, 0.0f, 1},
        {"bf16 x bf16 -> bf16 TN (contrast)", BF, BF, BF, false, false, false, 0.0f, 0},
    };
    // d48 (C 1600: QKV, attention projection, FC, FC projection) and an 8B-shaped layer, BT 8192
    // and 4096; forward m = OC, n = BT, k = C; dinp m = C, n = BT, k = OC; dweight m = C, n = OC, k = BT
    const int shapes[][3] = {{4800, 8192, 1600}, {1600, 8192, 1600}, {6400, 8192, 1600}, {1600, 8192, 6400},
                             {1600, 4800, 8192}, {6144, 4096, 4096}, {4096, 4096, 14336}, {4096, 14336, 4096},
                             {64, 64, 64}, {256, 128, 512}};
    for (const Variant& v : variants)
        for (const auto& s : shapes) probe(lt, v, s[0], s[1], s[2], a, b, d, bias, sa, sb, ws, ws_bytes);
    cublasLtDestroy(lt);
    return 0;
}
