// cublaslt_internal.h: what the emulated cuBLASLt's two files share (not for the sources it
// runs): the problem a descriptor and four layouts describe, which cublaslt.cpp checks at the
// call, and the job it queues, which cublaslt_compute.cpp runs when the stream reaches it.
// defines: emu::cublaslt::View, Flags, Problem, Job, type_size, transposed, run
#pragma once
#include <cublasLt.h>

namespace emu::cublaslt {

inline size_t type_size(cudaDataType_t t) {
    switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF: return 2;
    case CUDA_R_8F_E4M3: case CUDA_R_8F_E5M2: return 1;
    default: return 0;  // not emulated
    }
}

// A matrix as the computation sees it: element (r, c) of batch member b is at p + b * bs +
// r * rs + c * cs elements (a transpose, or row-major order, only swaps rs and cs).
struct View {
    const void* p;
    cudaDataType_t type;
    int64_t rows, cols, rs, cs, bs;
};
inline View transposed(View v) { return View{v.p, v.type, v.cols, v.rows, v.cs, v.rs, v.bs}; }

// what an epilogue does (decode_epilogue in cublaslt.cpp reads it from the descriptor)
struct Flags {
    bool bias_in;       // adds the bias (m) to every column before the activation
    bool relu, gelu;    // applies the activation
    bool aux_out;       // ... and writes its input (GELU) or its bit-mask (ReLU) to aux
    bool drelu, dgelu;  // multiplies by the activation's derivative at aux (an input)
    bool bgrad_d;       // bias gradient (m): the row sums of the result
    bool bgrad_a, bgrad_b;  // bias gradient: op(A)'s row sums (m), op(B)'s column sums (n)
    bool aux() const { return aux_out || drelu || dgelu; }
    bool bias_ptr() const { return bias_in || bgrad_d || bgrad_a || bgrad_b; }
};

// a matmul as make_problem (cublaslt.cpp) reads it from the descriptor and the four layouts
struct Problem {
    int32_t compute, pointer_mode;
    uint32_t epilogue;
    Flags f;
    int64_t m, n, k;
    int32_t batch;
    View a, b, c, d;  // op(A) m x k, op(B) k x n, C and D m x n; pointers set by cublasLtMatmul
    void* bias;       // nullptr unless the epilogue uses it
    int64_t bias_bs;
    void* aux;        // nullptr unless the epilogue uses it
    int64_t aux_ld, aux_bs;
    cudaDataType_t bias_type;  // D's, but for FP8 (the table's)
    bool fp8;                  // A and B are fp8: the scales below may be set
    const float *scale_a, *scale_b, *scale_d;  // device floats, nullptr: 1
    float* amax_d;                             // device float written, or nullptr
    bool fast_accum;                           // FAST_ACCUM set (fp8; summed as without it: cublaslt_compute.cpp)
};

// what cublasLtMatmul queues on the stream
struct Job {
    Problem P;
    float alpha, beta;                  // host pointer mode: read at the call
    const float *alpha_dev, *beta_dev;  // device pointer mode: read when the work runs
    void* workspace;
    uint64_t workspace_bytes;
    uint32_t splits;  // the algorithm's SPLITK_NUM: k summed in this many parts, then the parts
};

// D and the epilogue's outputs of J.P, computed now (cublaslt_compute.cpp): the work the
// stream runs when it reaches the cublasLtMatmul that queued J
void run(const Job& J);

}  // namespace emu::cublaslt
