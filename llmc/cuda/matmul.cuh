// matmul.cuh: the fully connected layer on the GPU: cuBLASLt GEMMs with fp32 accumulation,
// bias and GELU in the epilogue, and a deterministic bias-gradient reduction.
// defines: matmul_cublaslt, matmul_forward, matmul_backward
// CPU reference: llmc/cpu/matmul.h (and llmc/cpu/gelu.h for the fused GELU)
//
// Row-major (B*T, C) activations are column-major (C, B*T) matrices to cuBLASLt, and a
// row-major weight (OC, C) is a column-major (C, OC) matrix. So the three products are
// (column-major, D = op(A) op(B), D is m x n, k the summed dimension):
//   forward   out^T  (OC, BT) = W^T (OC,C)  inp^T (C,BT)      m=OC n=BT k=C   A trans
//   backward  dinp^T (C, BT)  = W   (C,OC)  dout^T (OC,BT)    m=C  n=BT k=OC
//             dW^T   (C, OC)  = inp^T (C,BT) dout (BT,OC)     m=C  n=OC k=BT  B trans
// The bias (OC) is a vector along m, which is what the BIAS epilogue broadcasts.
#pragma once
#include <algorithm>
#include "common.cuh"
#include "gelu.cuh"
#include "matmul_algos.cuh"  // defines: MatmulTiming, MATMUL_TIMED_CANDIDATES, matmul_time_candidates

// ---------------------------------------------------------------------------------------
// the bias gradient: column sums of dout (BT, OC), two stages, chunks in a fixed order

__global__ void matmul_bias_partials_kernel(float* scratch, const floatX* dout, int BT, int OC,
                                            int rows_per_chunk) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= OC / x128::size) return;
    const int c = g * x128::size;
    const int r0 = blockIdx.y * rows_per_chunk, r1 = min(BT, r0 + rows_per_chunk);
    float acc[x128::size] = {};
    for (int row = r0; row < r1; row++) {
        x128 d = load128(dout + (size_t)row * OC + c);
        for (int k = 0; k < x128::size; k++) acc[k] += to_float(d[k]);
    }
    for (int k = 0; k < x128::size; k++) scratch[(size_t)blockIdx.y * OC + c + k] = acc[k];
}

// dbias (OC) += sum over the BT rows of dout (BT, OC). Uses ctx.workspace as scratch.
inline void matmul_bias_backward(const CudaContext& ctx, floatX* dbias, const floatX* dout, int BT, int OC) {
    CHECK(OC % x128::size == 0, "OC=%d must be a multiple of %d for the bias gradient", OC, x128::size);
    size_t max_chunks = ctx.workspace_bytes / ((size_t)OC * sizeof(float));
    CHECK(max_chunks >= 1, "OC=%d too large for workspace of %zu bytes", OC, ctx.workspace_bytes);
    int chunks = (int)std::min<size_t>({ceil_div(BT, 16), 512, max_chunks});
    int rows_per_chunk = (int)ceil_div(BT, chunks);
    chunks = (int)ceil_div(BT, rows_per_chunk);
    const int groups = OC / x128::size;
    const int block = std::min(256, (groups + 31) / 32 * 32);
    dim3 grid((unsigned)ceil_div(groups, block), (unsigned)chunks);
    float* scratch = (float*)ctx.workspace;
    matmul_bias_partials_kernel<<<grid, block, 0, ctx.stream>>>(scratch, dout, BT, OC, rows_per_chunk);
    CHECK_LAUNCH();
    column_sums_finish(ctx, dbias, nullptr, scratch, chunks, OC, OC);
}

// ---------------------------------------------------------------------------------------
// one cuBLASLt GEMM

#ifdef ENABLE_BF16
constexpr cudaDataType_t MATMUL_DATA_TYPE = CUDA_R_16BF;
#else
constexpr cudaDataType_t MATMUL_DATA_TYPE = CUDA_R_32F;
#endif

// the largest power of two (at most 256, cuBLASLt's default assumption) dividing p's address
inline uint32_t matmul_alignment(const void* p) {
    uint32_t align = 256;
    while (align > 1 && ((uintptr_t)p % align) != 0) align /= 2;
    return align;
}

// What the epilogue does with GELU: nothing; the forward (D := gelu(x), x written to aux);
// or the backward (D := x * gelu'(aux), aux holding the forward's GELU input).
enum MatmulGelu { MATMUL_GELU_NONE, MATMUL_GELU_FORWARD, MATMUL_GELU_BACKWARD };

// Column-major D (m,n) = op(A) op(B) [+ D if accumulate] [+ bias (m)] [GELU as `gelu` says,
// aux (m,n) beside D]. A is stored (k,m) if trans_a else (m,k); B is stored (n,k) if trans_b
// else (k,n); all tightly packed (ld = stored rows). With bias_grad_b, bias is instead an
// output: op(B)'s column sums (n), overwritten (cuBLASLt's BGRADB epilogue); with the GELU
// backward, a bias is an output too: D's row sums (m) after the GELU's gradient (DGELU_BGRAD:
// the bias gradient of the layer whose output aux was). Returns false
// (and runs nothing) when cuBLASLt has no algorithm for the combination; every other failure
// exits.
inline bool matmul_cublaslt(const CudaContext& ctx, floatX* d, const floatX* a, const floatX* b,
                            const floatX* bias, floatX* aux, int m, int n, int k, bool trans_a,
                            bool trans_b, bool accumulate, MatmulGelu gelu = MATMUL_GELU_NONE,
                            bool bias_grad_b = false) {
    CHECK(m > 0 && n > 0 && k > 0, "m=%d n=%d k=%d", m, n, k);
    CHECK(is_aligned16(d) && is_aligned16(a) && is_aligned16(b) && is_aligned16(bias) && is_aligned16(aux),
          "d=%p a=%p b=%p bias=%p aux=%p not 16-byte aligned", (void*)d, (const void*)a, (const void*)b,
          (const void*)bias, (void*)aux);
    CHECK((gelu == MATMUL_GELU_NONE) == (aux == nullptr), "a GELU epilogue needs aux, and only it");
    CHECK(!bias_grad_b || (bias != nullptr && gelu == MATMUL_GELU_NONE), "the bias-gradient epilogue needs bias, alone");
#ifdef ENABLE_BF16
    cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
#else
    cublasComputeType_t compute = ctx.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
#endif
    cublasLtMatmulDesc_t desc;
    CHECK_CUBLAS(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    cublasLtEpilogue_t epilogue;
    if (gelu == MATMUL_GELU_FORWARD) epilogue = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    else if (gelu == MATMUL_GELU_BACKWARD) epilogue = bias ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
    else if (bias_grad_b) epilogue = CUBLASLT_EPILOGUE_BGRADB;
    else epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (bias != nullptr) {
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    if (aux != nullptr) {
        int64_t aux_ld = m;  // aux has D's shape
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)));
    }
    cublasLtMatrixLayout_t la, lb, ld;
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&la, MATMUL_DATA_TYPE, trans_a ? k : m, trans_a ? m : k, trans_a ? k : m));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&lb, MATMUL_DATA_TYPE, trans_b ? n : k, trans_b ? k : n, trans_b ? n : k));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&ld, MATMUL_DATA_TYPE, m, n, m));
    // The heuristic never sees the A/B/C/D pointers and assumes 256-byte alignment unless
    // told otherwise; ours are only 16-byte aligned in general (a layer's slice of the
    // parameter buffer, a row of the KV cache), and an algorithm picked for 256 may then
    // fault or misread. (The bias and aux pointers are in desc: the heuristic checks those.)
    const uint32_t align_a = matmul_alignment(a), align_b = matmul_alignment(b), align_d = matmul_alignment(d);
    // the heuristic's answer depends only on what the key holds: asked once per key
    const uint64_t key[3] = {(uint64_t)m << 32 | (uint32_t)n,
                             (uint64_t)k << 32 | (uint32_t)compute << 16 | (uint32_t)epilogue << 2 | trans_a << 1 | trans_b,
                             (uint64_t)align_a << 36 | (uint64_t)align_b << 27 | (uint64_t)align_d << 18 |
                                 matmul_alignment(bias) << 9 | matmul_alignment(aux)};
    const MatmulAlgo* known = nullptr;
    for (const MatmulAlgo& e : *ctx.matmul_algos)
        if (e.key[0] == key[0] && e.key[1] == key[1] && e.key[2] == key[2]) known = &e;
    if (known == nullptr) {
        cublasLtMatmulPreference_t pref;
        CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
        uint64_t ws = ctx.workspace_bytes;
        CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
        CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                          sizeof(align_a)));
        CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                          sizeof(align_b)));
        CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
                                                          sizeof(align_d)));
        CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                                                          sizeof(align_d)));
        // -ma timed: several candidates, the fastest on this problem kept; else the first answer
        cublasLtMatmulHeuristicResult_t heuristic[MATMUL_TIMED_CANDIDATES] = {};
        int found = 0;
        const int asked = ctx.matmul_timing != nullptr ? MATMUL_TIMED_CANDIDATES : 1;
        cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, desc, la, lb, ld, ld, pref, asked, heuristic, &found);
        if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) CHECK_CUBLAS(st);
        CHECK_CUBLAS(cublasLtMatmulPreferenceDestroy(pref));
        MatmulAlgo e = {{key[0], key[1], key[2]}, heuristic[0].algo, st == CUBLAS_STATUS_SUCCESS && found > 0};
        if (e.found && ctx.matmul_timing != nullptr) {
            const size_t bias_out = bias_grad_b ? n : (gelu == MATMUL_GELU_BACKWARD && bias ? m : 0);
            const int pick = matmul_time_candidates(ctx, desc, la, lb, ld, a, b, m, n, accumulate ? 1.0f : 0.0f, aux,
                                                    gelu == MATMUL_GELU_FORWARD, bias, bias_out, heuristic, found);
            e.algo = heuristic[pick].algo;
        }
        // said once per problem, as the key is asked once: the caller runs the separate kernel
        if (!e.found && (gelu != MATMUL_GELU_NONE || bias_grad_b))
            printf("cuBLASLt offers no %s epilogue for m=%d n=%d k=%d: %s instead\n",
                   bias_grad_b                   ? "BGRADB"
                   : gelu == MATMUL_GELU_FORWARD ? "GELU"
                   : bias                        ? "DGELU_BGRAD"
                                                 : "DGELU",
                   m, n, k,
                   bias_grad_b || (gelu == MATMUL_GELU_BACKWARD && bias) ? "the separate bias-gradient kernel runs"
                                                                          : "the separate GELU kernel runs");
        ctx.matmul_algos->push_back(e);
        known = &ctx.matmul_algos->back();
    }
    bool ok = known->found;
    if (ok) {
        const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
        CHECK_CUBLAS(cublasLtMatmul(ctx.lt, desc, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &known->algo,
                                    ctx.workspace, ctx.workspace_bytes, ctx.stream));
    }
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(la));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(lb));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(ld));
    CHECK_CUBLAS(cublasLtMatmulDescDestroy(desc));
    return ok;
}

// ---------------------------------------------------------------------------------------
// the layer

// out (BT,OC) = inp (BT,C) @ weight (OC,C)^T + bias (OC); bias may be nullptr.
// With pre_gelu != nullptr: pre_gelu = that result and out = gelu(pre_gelu), in the
// cuBLASLt epilogue when ctx.gelu_fusion >= 1 and cuBLASLt offers it, else by gelu_forward.
inline void matmul_forward(const CudaContext& ctx, floatX* out, floatX* pre_gelu, const floatX* inp,
                           const floatX* weight, const floatX* bias, int BT, int C, int OC) {
    CHECK(BT > 0 && C > 0 && OC > 0, "BT=%d C=%d OC=%d", BT, C, OC);
    if (pre_gelu == nullptr) {
        bool ok = matmul_cublaslt(ctx, out, weight, inp, bias, nullptr, OC, BT, C, true, false, false);
        CHECK(ok, "cuBLASLt has no algorithm for the forward matmul BT=%d C=%d OC=%d", BT, C, OC);
        return;
    }
    CHECK(pre_gelu != out, "pre_gelu and out must differ");
    // the epilogue's aux leading dimension must be a multiple of 8
    if (ctx.gelu_fusion >= 1 && OC % 8 == 0 &&
        matmul_cublaslt(ctx, out, weight, inp, bias, pre_gelu, OC, BT, C, true, false, false, MATMUL_GELU_FORWARD)) {
        return;
    }
    bool ok = matmul_cublaslt(ctx, pre_gelu, weight, inp, bias, nullptr, OC, BT, C, true, false, false);
    CHECK(ok, "cuBLASLt has no algorithm for the forward matmul BT=%d C=%d OC=%d", BT, C, OC);
    gelu_forward(ctx, out, pre_gelu, (size_t)BT * OC);
}

// whether a bias gradient of n values fits ctx.bias_grad, where the bias-gradient epilogues write
inline bool matmul_bias_grad_fits(int n) { return (size_t)n * sizeof(floatX) <= CUDA_BIAS_GRAD_BYTES; }

// Gradients of matmul_forward, given dout (BT,OC):
//   dinp (BT,C) = dout @ weight     (+= when accumulate_dinp; skipped when dinp is nullptr)
//   dweight (OC,C) += dout^T @ inp
//   dbias (OC) += sum over rows of dout   (skipped when dbias is nullptr)
// The CPU reference accumulates all three; the trainer overwrites dinp, which saves a memset.
// The bias gradient comes from dweight's matmul epilogue (BGRADB: the column sums of its B,
// dout) when ctx.bias_grad_epilogue == 1 (-bg 1) and cuBLASLt offers it, into ctx.bias_grad and
// then added; else from a pass of its own over dout (matmul_bias_backward).
// With pre_gelu (BT,C) != nullptr, the GELU before this layer is taken back too: dinp =
// (dout @ weight) * gelu'(pre_gelu), where inp was gelu(pre_gelu); in the cuBLASLt epilogue
// when ctx.gelu_fusion == 2 (-ge 2) and cuBLASLt offers it, else by gelu_backward. Then
// dbias_pre (C), the bias gradient of the layer that made pre_gelu (GPT-2's fc), if not nullptr:
// += dinp's column sums, in that same epilogue (DGELU_BGRAD, into ctx.bias_grad and then added)
// when ctx.bias_grad_epilogue == 2 (-bg 2) and cuBLASLt offers it, else a pass of its own over
// dinp (matmul_bias_backward), as the layer's own backward would make it; but under -bg 1
// (every bias gradient in its own layer's weight-gradient epilogue) it is left to that layer.
// Returns whether dbias_pre was taken.
inline bool matmul_backward(const CudaContext& ctx, floatX* dinp, floatX* dweight, floatX* dbias,
                            const floatX* dout, const floatX* inp, const floatX* weight, int BT, int C,
                            int OC, bool accumulate_dinp, const floatX* pre_gelu = nullptr,
                            floatX* dbias_pre = nullptr) {
    CHECK(BT > 0 && C > 0 && OC > 0, "BT=%d C=%d OC=%d", BT, C, OC);
    CHECK(pre_gelu == nullptr || (dinp != nullptr && !accumulate_dinp), "the GELU backward overwrites dinp");
    CHECK(dbias_pre == nullptr || pre_gelu != nullptr, "dbias_pre comes with pre_gelu");
    if (ctx.bias_grad_epilogue == 1) dbias_pre = nullptr;
    const bool takes_dbias_pre = dbias_pre != nullptr;
    if (dinp != nullptr) {
        floatX* const aux = const_cast<floatX*>(pre_gelu);
        const bool gelu_epilogue = pre_gelu != nullptr && ctx.gelu_fusion == 2 && C % 8 == 0;
        floatX* const grad = (floatX*)ctx.bias_grad;
        const bool bias_in_epilogue = gelu_epilogue && dbias_pre != nullptr && ctx.bias_grad_epilogue == 2 &&
                                      matmul_bias_grad_fits(C) &&
                                      matmul_cublaslt(ctx, dinp, weight, dout, grad, aux, C, BT, OC, false, false, false,
                                                      MATMUL_GELU_BACKWARD);
        const bool fused = bias_in_epilogue || (gelu_epilogue && matmul_cublaslt(ctx, dinp, weight, dout, nullptr, aux,
                                                                                 C, BT, OC, false, false, false,
                                                                                 MATMUL_GELU_BACKWARD));
        if (!fused) {
            bool ok = matmul_cublaslt(ctx, dinp, weight, dout, nullptr, nullptr, C, BT, OC, false, false, accumulate_dinp);
            CHECK(ok, "cuBLASLt has no algorithm for dinp BT=%d C=%d OC=%d", BT, C, OC);
            if (pre_gelu != nullptr) gelu_backward(ctx, dinp, pre_gelu, dinp, (size_t)BT * C);
        }
        if (bias_in_epilogue) accumulate(ctx.stream, dbias_pre, grad, C);
        else if (dbias_pre != nullptr) matmul_bias_backward(ctx, dbias_pre, dinp, BT, C);
    }
    if (dbias != nullptr && ctx.bias_grad_epilogue == 1 && matmul_bias_grad_fits(OC)) {
        floatX* grad = (floatX*)ctx.bias_grad;
        if (matmul_cublaslt(ctx, dweight, inp, dout, grad, nullptr, C, OC, BT, false, true, true, MATMUL_GELU_NONE,
                            true)) {
            accumulate(ctx.stream, dbias, grad, OC);
            return takes_dbias_pre;
        }
    }
    bool ok = matmul_cublaslt(ctx, dweight, inp, dout, nullptr, nullptr, C, OC, BT, false, true, true);
    CHECK(ok, "cuBLASLt has no algorithm for dweight BT=%d C=%d OC=%d", BT, C, OC);
    if (dbias != nullptr) matmul_bias_backward(ctx, dbias, dout, BT, OC);
    return takes_dbias_pre;
}
