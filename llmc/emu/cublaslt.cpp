// cublaslt.cpp: the emulated GPU's cuBLASLt (include/cublasLt.h). It has one algorithm (and the
// same with k split into parts, which rounds in another order), run on the CPU and queued on the
// stream like the library's kernels:
//   D = epilogue(alpha op(A) op(B) + beta C)      column-major, D and C m x n, op(A) m x k
// with leading dimensions, row-major order, strided batches and epilogues. This file takes the
// calls: the descriptors, layouts and preferences, the problem they describe and what it
// accepts (FP8's: fp8_types, fp8_shapes), the heuristic and the checks at the call.
// cublaslt_compute.cpp runs the work: the arithmetic, the epilogues, FP8's scales and AMAX_D,
// an fp8 D's rounding.
//
// Where each rule below, and in cublaslt_compute.cpp, comes from:
//   [H] NVIDIA's cublasLt.h (CUDA 13.1): the comment on the attribute, epilogue or call
//   [N] NVIDIA's own reference of the epilogues: simulate_epilog in nvmath-python's
//       tests/nvmath_tests/linalg/advanced/matmul/test_epilog.py, and what that test expects
//       cuBLASLt to refuse; for FP8 its test_fp8.py (the type combinations it runs, test_amax),
//       fp8_utils.py (fp8_matmul_reference), test_fp8_epilogs.py (what it lets cuBLASLt refuse)
//       and the checks of nvmath/linalg/advanced/matmulmod.py
//   [D] the cuBLAS documentation (docs.nvidia.com/cuda/cublas, section cublasLtMatmul); its FP8
//       requirements, table of types and Tensor Core Usage rules as quoted word for word in
//       pytorch/pytorch#106844 and in Modular's cuBLASLt binding (the page itself was not at hand)
//   [T] what cuBLASLt answered PyTorch, as its pull requests report: #122821 (amax "unsupported for
//       non-fp8 outputs", word from cuBLAS), #190452 (CUDA 13 answers INVALID_VALUE to a D scale
//       on a D that is not fp8)
//   [P] the PTX ISA (docs.nvidia.com/cuda/parallel-thread-execution), instruction cvt
//   [G] what a real GPU's cuBLASLt answered this project (dev/results/, the run named)
//   [E] the emulator's own choice where NVIDIA says nothing; each one says why
// A status answers what the real library answers with a status. What would fault or corrupt
// memory on the GPU instead (a pointer outside its allocation, less aligned than the chosen
// algorithm assumes, D overlapping an input) stops the program through emu::fatal, at the
// call, naming the operand.
#include "cublaslt_internal.h"  // View, Flags, Problem, Job, type_size, transposed, run

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

using namespace emu::cublaslt;

struct cublasLtContext { uint64_t magic; };

namespace {

constexpr uint64_t MAGIC_HANDLE = 0x4c5448414e444c45ull;  // "LTHANDLE"
constexpr uint64_t MAGIC_DESC = 0x4c544d4d44455343ull;    // "LTMMDESC"
constexpr uint64_t MAGIC_LAYOUT = 0x4c544c41594f5554ull;  // "LTLAYOUT"
constexpr uint64_t MAGIC_PREF = 0x4c54505245464552ull;    // "LTPREFER"
constexpr uint64_t MAGIC_ALGO = 0x4c54414c474f3031ull;    // "LTALGO01"

// ---------------------------------------------------------------------------------------
// descriptors: each attribute at a fixed place in the opaque words, the magic in the last

struct AttrTable {
    uint8_t count, size[40], offset[40];
    // sizes[attr]: the attribute's bytes, 0 where the enumeration has no such value; larger
    // attributes first, so each lands on a multiple of its size
    AttrTable(std::initializer_list<uint8_t> sizes, size_t capacity) : count((uint8_t)sizes.size()), size{}, offset{} {
        std::copy(sizes.begin(), sizes.end(), size);
        size_t at = 0;
        for (uint8_t bytes : {8, 4, 2, 1})
            for (int a = 0; a < count; a++)
                if (size[a] == bytes) offset[a] = (uint8_t)at, at += bytes;
        if (at > capacity) emu::fatal("cuBLASLt: a descriptor's attributes need %zu bytes of %zu", at, capacity);
    }
    bool has(int attr) const { return attr >= 0 && attr < count && size[attr] != 0; }
};

// The sizes [H] gives each attribute ("int32_t", "uint64_t", "void *", ...), in the order of
// the enumeration's values; the last word of the opaque struct holds the magic.
const AttrTable& desc_table() {
    static const AttrTable t({4, 4, 4, 4, 4, 4, 4, 4, 8, 0, 8, 8, 8, 8, 8, 4, 0, 8, 8, 8,  // 0-19
                              8, 8, 4, 8, 8, 1, 4, 0, 0, 0, 0, 4, 4, 4, 4, 4, 8, 4, 8},  // 20-38
                             sizeof(cublasLtMatmulDescOpaque_t) - 8);
    return t;
}
const AttrTable& layout_table() {
    static const AttrTable t({4, 4, 8, 8, 8, 4, 8, 8, 4}, sizeof(cublasLtMatrixLayoutOpaque_t) - 8);
    return t;
}
const AttrTable& pref_table() {
    static const AttrTable t({4, 8, 0, 4, 0, 4, 4, 4, 4, 4, 0, 0, 8}, sizeof(cublasLtMatmulPreferenceOpaque_t) - 8);
    return t;
}

template <typename O> uint64_t& magic_of(O* o) { return o->data[sizeof(o->data) / sizeof(uint64_t) - 1]; }
template <typename O> bool valid(const O* o, uint64_t magic) {
    return o != nullptr && o->data[sizeof(o->data) / sizeof(uint64_t) - 1] == magic;
}
template <typename T, typename O> T get(const AttrTable& t, const O* o, int attr) {
    T v;
    memcpy(&v, reinterpret_cast<const char*>(o->data) + t.offset[attr], sizeof(T));
    return v;
}
template <typename T, typename O> void put(const AttrTable& t, O* o, int attr, T v) {
    memcpy(reinterpret_cast<char*>(o->data) + t.offset[attr], &v, sizeof(T));
}

// [H] *SetAttribute: INVALID_VALUE "if buf is NULL or sizeInBytes doesn't match size of
// internal storage for selected attribute" (an unknown attribute likewise)
template <typename O>
cublasStatus_t set_attr(const AttrTable& t, O* o, uint64_t magic, int attr, const void* buf, size_t bytes) {
    if (!valid(o, magic) || !t.has(attr) || buf == nullptr || bytes != t.size[attr]) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(reinterpret_cast<char*>(o->data) + t.offset[attr], buf, bytes);
    return CUBLAS_STATUS_SUCCESS;
}
// [H] *GetAttribute: sizeInBytes 0 asks the size (sizeWritten required); otherwise buf must
// be non-NULL and sizeInBytes the attribute's size
template <typename O>
cublasStatus_t get_attr(const AttrTable& t, const O* o, uint64_t magic, int attr, void* buf, size_t bytes,
                        size_t* written) {
    if (!valid(o, magic) || !t.has(attr)) return CUBLAS_STATUS_INVALID_VALUE;
    if (bytes == 0) {
        if (written == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
        *written = t.size[attr];
        return CUBLAS_STATUS_SUCCESS;
    }
    if (buf == nullptr || bytes != t.size[attr]) return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(buf, reinterpret_cast<const char*>(o->data) + t.offset[attr], bytes);
    if (written != nullptr) *written = bytes;
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------
// the problem a descriptor and four layouts describe

bool is_fp8(cudaDataType_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

// the largest power of two, at most 256 (the preferences' default), dividing a
uint32_t pow2_align(uintptr_t a) {
    uint32_t al = 256;
    while (al > 1 && a % al != 0) al /= 2;
    return al;
}

// [H] cublasLtEpilogue_t; what each computes: [N] simulate_epilog
bool decode_epilogue(uint32_t e, Flags* f) {
    switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: case CUBLASLT_EPILOGUE_RELU: case CUBLASLT_EPILOGUE_RELU_AUX:
    case CUBLASLT_EPILOGUE_BIAS: case CUBLASLT_EPILOGUE_RELU_BIAS: case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DRELU: case CUBLASLT_EPILOGUE_DRELU_BGRAD: case CUBLASLT_EPILOGUE_GELU:
    case CUBLASLT_EPILOGUE_GELU_AUX: case CUBLASLT_EPILOGUE_GELU_BIAS: case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU: case CUBLASLT_EPILOGUE_DGELU_BGRAD: case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB: break;
    default: return false;
    }
    // the flags: 2 ReLU, 4 bias, 8 ReLU', 16 bias gradient, 32 GELU, 64 GELU', 128 aux
    *f = Flags{(e & 4) != 0, (e & 2) != 0, (e & 32) != 0, (e & 128) && (e & (2 | 32)), (e & 8) != 0, (e & 64) != 0,
               (e & 16) != 0, e == CUBLASLT_EPILOGUE_BGRADA, e == CUBLASLT_EPILOGUE_BGRADB};
    return true;
}

cublasStatus_t read_layout(cublasLtMatrixLayout_t l, View* v, int32_t* batch) {
    if (!valid(l, MAGIC_LAYOUT)) return CUBLAS_STATUS_INVALID_VALUE;
    const AttrTable& t = layout_table();
    const uint64_t rows = get<uint64_t>(t, l, CUBLASLT_MATRIX_LAYOUT_ROWS);
    const uint64_t cols = get<uint64_t>(t, l, CUBLASLT_MATRIX_LAYOUT_COLS);
    const int64_t ld = get<int64_t>(t, l, CUBLASLT_MATRIX_LAYOUT_LD);
    const int32_t order = get<int32_t>(t, l, CUBLASLT_MATRIX_LAYOUT_ORDER);
    *batch = get<int32_t>(t, l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
    // [E] an empty matrix or batch is refused: gptrain never asks for one
    if (rows == 0 || cols == 0 || *batch < 1) return CUBLAS_STATUS_INVALID_VALUE;
    // [H] ROWS, COLS: "usually only values that can be expressed as int32_t are supported"
    if (rows > INT32_MAX || cols > INT32_MAX) return CUBLAS_STATUS_NOT_SUPPORTED;
    // [E] COL32 and the other orders are int8 (IMMA) layouts; there is no int8 here
    if (order != CUBLASLT_ORDER_COL && order != CUBLASLT_ORDER_ROW) return CUBLAS_STATUS_NOT_SUPPORTED;
    // [H] LD: non-negative, and large enough that elements do not overlap (>= ROWS for COL)
    if (ld < 0 || (uint64_t)ld < (order == CUBLASLT_ORDER_COL ? rows : cols)) return CUBLAS_STATUS_INVALID_VALUE;
    // [H] PLANE_OFFSET is for planar complex data; [E] arrays of pointers are not emulated
    if (get<int64_t>(t, l, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET) != 0 ||
        get<uint32_t>(t, l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE) != CUBLASLT_BATCH_MODE_STRIDED)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const bool col = order == CUBLASLT_ORDER_COL;
    *v = View{nullptr, (cudaDataType_t)get<uint32_t>(t, l, CUBLASLT_MATRIX_LAYOUT_TYPE), (int64_t)rows, (int64_t)cols,
              col ? 1 : ld, col ? ld : 1, get<int64_t>(t, l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET)};
    return CUBLAS_STATUS_SUCCESS;
}

bool fast_compute(int32_t c) { return c == CUBLAS_COMPUTE_32F_FAST_TF32 || c == CUBLAS_COMPUTE_32F_FAST_16BF; }

// FP8's data types. [D] "The compute type must be CUBLAS_COMPUTE_32F. The scale type must be
// CUDA_R_32F", and the FP8 rows of the table of types:
//   A     B     C     D                    bias
//   E4M3  E4M3  BF16  BF16 or E4M3         BF16
//               FP16  FP16 or E4M3         FP16
//               FP32  FP32                 BF16
//   E4M3  E5M2  BF16  BF16, E4M3 or E5M2   BF16
//   (and  FP16  FP16, E4M3 or E5M2   FP16
//   E5M2  E4M3) FP32  FP32                 BF16
// and no E5M2 x E5M2. [N] test_fp8.py runs exactly these. [E] FP16 is not emulated: its rows,
// like every combination the table lacks, answer NOT_SUPPORTED (no algorithm).
cublasStatus_t fp8_types(const View& A, const View& B, const View& C, const View& D, int32_t compute, int32_t scale) {
    if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!is_fp8(A.type) || !is_fp8(B.type) || (A.type == CUDA_R_8F_E5M2 && B.type == CUDA_R_8F_E5M2))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const bool e5m2_in = A.type == CUDA_R_8F_E5M2 || B.type == CUDA_R_8F_E5M2;
    const bool row = (C.type == CUDA_R_16BF && (D.type == CUDA_R_16BF || D.type == CUDA_R_8F_E4M3 ||
                                                (e5m2_in && D.type == CUDA_R_8F_E5M2))) ||
                     (C.type == CUDA_R_32F && D.type == CUDA_R_32F);
    return row ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

// FP8's layouts, ls and vs in the order A, B, C, D; m, n, k of the product. [D] "A must be
// transposed and B non-transposed (The "TN" format)" ([E] CUBLAS_OP_T itself, column-major, the
// order the format is stated in) and "All matrix dimensions must meet the optimal requirements
// listed in Tensor Core Usage": there (k * A's type size) % 16 == 0, the same of B (for TN),
// (m * C's type size) % 16 == 0, and each of lda, ldb, ldc times its type's size a multiple of 16.
// [E] Beyond those: ldd likewise, m and n multiples of 16 (every shape NVIDIA's FP8 tests run,
// test_fp8.py, is), batch strides whole multiples of 16 bytes (each member's pointer as aligned
// as the first's). What cuBLASLt does with less is not documented; NOT_SUPPORTED is what it
// answers when no algorithm fits, and a caller then runs its own kernel.
cublasStatus_t fp8_shapes(const int32_t ops[2], cublasLtMatrixLayout_t const ls[4], const View* const vs[4], int64_t m,
                          int64_t n, int64_t k, int32_t batch) {
    if (ops[0] != CUBLAS_OP_T || ops[1] != CUBLAS_OP_N || m % 16 != 0 || n % 16 != 0 || k % 16 != 0)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const AttrTable& t = layout_table();
    for (int i = 0; i < 4; i++) {
        const int64_t es = (int64_t)type_size(vs[i]->type);
        if (get<int32_t>(t, ls[i], CUBLASLT_MATRIX_LAYOUT_ORDER) != CUBLASLT_ORDER_COL ||
            get<int64_t>(t, ls[i], CUBLASLT_MATRIX_LAYOUT_LD) * es % 16 != 0 || (batch > 1 && vs[i]->bs * es % 16 != 0))
            return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t make_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                            cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld, Problem* P) {
    if (!valid(desc, MAGIC_DESC)) return CUBLAS_STATUS_INVALID_VALUE;
    int32_t batch[4];
    View A, B, C, D;
    cublasStatus_t st;
    if ((st = read_layout(la, &A, &batch[0])) || (st = read_layout(lb, &B, &batch[1])) ||
        (st = read_layout(lc, &C, &batch[2])) || (st = read_layout(ld, &D, &batch[3])))
        return st;
    const AttrTable& t = desc_table();
    const int32_t compute = get<int32_t>(t, desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE);
    const int32_t scale = get<int32_t>(t, desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE);
    const int32_t ops[2] = {get<int32_t>(t, desc, CUBLASLT_MATMUL_DESC_TRANSA),
                            get<int32_t>(t, desc, CUBLASLT_MATMUL_DESC_TRANSB)};
    for (int32_t op : ops) {
        // [H] CUBLAS_OP_CONJG: "not supported in the current release"; OP_C of real data is OP_T
        if (op == CUBLAS_OP_CONJG) return CUBLAS_STATUS_NOT_SUPPORTED;
        if (op != CUBLAS_OP_N && op != CUBLAS_OP_T && op != CUBLAS_OP_C) return CUBLAS_STATUS_INVALID_VALUE;
    }
    // [H] TRANSC: "currently only CUBLAS_OP_N is supported"; [E] only the full fill mode
    if (get<int32_t>(t, desc, CUBLASLT_MATMUL_DESC_TRANSC) != CUBLAS_OP_N ||
        get<int32_t>(t, desc, CUBLASLT_MATMUL_DESC_FILL_MODE) != CUBLAS_FILL_MODE_FULL)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    // [D] the data types cublasLtMatmul supports with an fp32 accumulator and fp32 alpha/beta
    // (of which the emulator has the fp32 and bf16 ones): A and B alike; C and D alike; fp32
    // A/B with fp32 C/D, bf16 A/B with bf16 or fp32 C/D; the _FAST_ modes only for fp32 data.
    // [E] _FAST_16F and _EMULATED_16BFX9, fp16, int8 and fp64 are not emulated. FP8: fp8_types.
    const bool fp8 = is_fp8(A.type) || is_fp8(B.type);
    const bool compute_ok = compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC || fast_compute(compute);
    if (fp8) {
        if ((st = fp8_types(A, B, C, D, compute, scale)) != CUBLAS_STATUS_SUCCESS) return st;
    } else if (!compute_ok || scale != CUDA_R_32F || type_size(A.type) == 0 || A.type != B.type || C.type != D.type ||
               !(D.type == A.type || (A.type == CUDA_R_16BF && D.type == CUDA_R_32F)) ||
               (fast_compute(compute) && A.type != CUDA_R_32F)) {
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    // [E] the alpha/beta vector pointer modes are not emulated
    const int32_t pmode = get<int32_t>(t, desc, CUBLASLT_MATMUL_DESC_POINTER_MODE);
    if (pmode != CUBLASLT_POINTER_MODE_HOST && pmode != CUBLASLT_POINTER_MODE_DEVICE) return CUBLAS_STATUS_NOT_SUPPORTED;
    // [H] the fp8 attributes (scale and amax pointers 17-24, scale modes 31-37) and [E] the
    // emulation descriptor (38): "If set for an unsupported matrix data, scale, and compute type
    // combination, calling cublasLtMatmul() will return CUBLAS_INVALID_VALUE". With FP8 A and B
    // the emulator has A's and B's scales (17, 18), and D's scale and amax (20, 21) when D is
    // fp8: [N] nvmath's matmul refuses a scale of a C or D, or D's amax, that is not fp8; [T]
    // CUDA 13 refuses the D scale of a bf16 D, amax is "unsupported for non-fp8 outputs". No C of
    // the table is fp8: a C scale (19) is refused. Scale modes other than 0 (one fp32 scalar)
    // are the block scalings of later GPUs; the aux scale and amax (23, 24) go with the aux
    // epilogues, which FP8 here has not.
    const bool fp8_d = is_fp8(D.type);
    for (int attr : {17, 18, 19, 20, 21, 23, 24, 31, 32, 33, 34, 35, 36, 37, 38}) {
        const uint64_t v = t.size[attr] == 8 ? get<uint64_t>(t, desc, attr) : (uint64_t)get<uint32_t>(t, desc, attr);
        const bool ab_scale = attr == CUBLASLT_MATMUL_DESC_A_SCALE_POINTER || attr == CUBLASLT_MATMUL_DESC_B_SCALE_POINTER;
        const bool d_scale = attr == CUBLASLT_MATMUL_DESC_D_SCALE_POINTER || attr == CUBLASLT_MATMUL_DESC_AMAX_D_POINTER;
        const bool allowed = fp8 && (ab_scale || (fp8_d && d_scale));
        if (v != 0 && !allowed) return CUBLAS_STATUS_INVALID_VALUE;
    }

    // shapes: [H] cublasLtMatmul returns INVALID_VALUE "if parameters are in conflict"
    const View opA = ops[0] == CUBLAS_OP_N ? A : transposed(A), opB = ops[1] == CUBLAS_OP_N ? B : transposed(B);
    const int64_t m = D.rows, n = D.cols, k = opA.cols;
    if (opA.rows != m || opB.rows != k || opB.cols != n || C.rows != m || C.cols != n)
        return CUBLAS_STATUS_INVALID_VALUE;
    // [E] one batch count for all four (a member shared by all: batch stride 0)
    if (batch[0] != batch[3] || batch[1] != batch[3] || batch[2] != batch[3]) return CUBLAS_STATUS_INVALID_VALUE;
    const cublasLtMatrixLayout_t layouts[4] = {la, lb, lc, ld};
    const View* const views[4] = {&A, &B, &C, &D};
    if (fp8 && (st = fp8_shapes(ops, layouts, views, m, n, k, batch[3])) != CUBLAS_STATUS_SUCCESS) return st;

    Flags f;
    const uint32_t epilogue = get<uint32_t>(t, desc, CUBLASLT_MATMUL_DESC_EPILOGUE);
    if (!decode_epilogue(epilogue, &f)) return CUBLAS_STATUS_INVALID_VALUE;
    // FP8: [N] test_fp8_epilogs.py lets cuBLASLt refuse GELU and GELU_BIAS with an fp8 D and any
    // GELU with fp32 C and D; [E] of the rest the emulator has the epilogues without aux or
    // gradients (DEFAULT, BIAS, RELU, RELU_BIAS, GELU, GELU_BIAS): that test lets cuBLASLt refuse
    // most of the others too (every BGRAD, RELU_AUX of mixed A and B, DRELU and DGELU of an fp8
    // D, an fp8 aux but for one combination), and their fp8 aux types are not emulated
    if (fp8 && (f.aux() || f.bgrad_d || f.bgrad_a || f.bgrad_b || (f.gelu && (fp8_d || D.type == CUDA_R_32F))))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    void* bias = get<void*>(t, desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER);
    void* aux = get<void*>(t, desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER);
    const int64_t aux_ld = get<int64_t>(t, desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD);
    const int64_t aux_bs = get<int64_t>(t, desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE);
    if (f.bias_ptr()) {
        // [H] BIAS_POINTER: the bias (length D's rows) or the gradient written; it must be set
        if (bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
        // [H] BIAS_DATA_TYPE: "same type as the elements of output matrix (Dtype)" but for
        // int8 kernels (not emulated) and fp8 kernels with an fp32 or fp8 D, where [D]'s table
        // has it: BF16 beside a BF16 or FP32 C. [E] -1 (the default) means the table's type there
        const int32_t bias_type = get<int32_t>(t, desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE);
        if (bias_type != -1 && bias_type != (fp8 ? CUDA_R_16BF : D.type)) return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (f.aux()) {
        const bool relu = f.relu || f.drelu;
        // [H] AUX_POINTER "requires setting CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD"; AUX_LD: "no
        // less than the number of rows in the output matrix"
        if (aux == nullptr || aux_ld < m) return CUBLAS_STATUS_INVALID_VALUE;
        // [H] AUX_LD and AUX_BATCH_STRIDE "must be divisible by" 8 (GELU input, in elements) or
        // 128 (ReLU bit-mask, in bits). [E] NOT_SUPPORTED: NVIDIA gives no status; a caller
        // (gptrain) then runs its own kernel, as it would for any product without an algorithm
        const int64_t unit = relu ? 128 : 8;
        if (aux_ld % unit != 0 || (batch[3] > 1 && aux_bs % unit != 0)) return CUBLAS_STATUS_NOT_SUPPORTED;
        // [H] AUX_DATA_TYPE: GELU's input is D's type, ReLU's a bit-mask; another type for an
        // unsupported combination: "cublasLtMatmul() will return CUBLAS_INVALID_VALUE"
        const int32_t aux_type = get<int32_t>(t, desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE);
        if (aux_type != -1 && (relu || aux_type != D.type)) return CUBLAS_STATUS_INVALID_VALUE;
        // [E] NVIDIA defines aux only beside a column-major D
        if (D.rs != 1) return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    // [N] test_d_epilogs expects DRELU/DGELU(_BGRAD) with k == 1 to be refused ("not supported")
    if ((f.drelu || f.dgelu) && k == 1) return CUBLAS_STATUS_NOT_SUPPORTED;

    *P = Problem{compute, pmode, epilogue, f, m, n, k, batch[3], opA, opB, C, D,
                 f.bias_ptr() ? bias : nullptr, get<int64_t>(t, desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE),
                 f.aux() ? aux : nullptr, aux_ld, aux_bs, fp8 ? CUDA_R_16BF : D.type, fp8,
                 get<const float*>(t, desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER),
                 get<const float*>(t, desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER),
                 get<const float*>(t, desc, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER),
                 get<float*>(t, desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER),
                 fp8 && get<int8_t>(t, desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM) != 0};
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------
// the heuristic: up to SPLITK_CHOICES algorithms, described in cublasLtMatmulAlgo_t's words

struct AlgoRecord {
    uint64_t magic;
    uint32_t epilogue;
    int32_t compute;
    uint32_t types;     // A, B, C, D types, a byte each
    uint16_t align[6];  // the alignment it assumes of A, B, C, D, bias, aux (bytes)
    uint64_t workspace;
    uint32_t splits;    // [H] CUBLASLT_ALGO_CONFIG_SPLITK_NUM: k in this many parts (1: one sequence)
    uint32_t rank;      // its place in the heuristic's answer (0: the first), for EMU_CUBLASLT_FAST
};
static_assert(sizeof(AlgoRecord) <= sizeof(cublasLtMatmulAlgo_t), "AlgoRecord fits cublasLtMatmulAlgo_t");

uint32_t types_of(const Problem& P) {
    return (uint32_t)P.a.type | (uint32_t)P.b.type << 8 | (uint32_t)P.c.type << 16 | (uint32_t)P.d.type << 24;
}

struct Pref {
    uint32_t search;
    uint64_t max_workspace;
    uint32_t align[4];  // A, B, C, D
};
// [H] the defaults: best fit, no workspace, 256-byte alignment, every filter open
const Pref DEFAULT_PREF = {CUBLASLT_SEARCH_BEST_FIT, 0, {256, 256, 256, 256}};
Pref read_pref(cublasLtMatmulPreference_t p) {
    const AttrTable& t = pref_table();
    Pref r = {get<uint32_t>(t, p, CUBLASLT_MATMUL_PREF_SEARCH_MODE),
              get<uint64_t>(t, p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES), {}};
    for (int i = 0; i < 4; i++) r.align[i] = get<uint32_t>(t, p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i);
    return r;
}

// [E] The emulated algorithm claims workspace as the GPU's often do: one fp32 m x n
// partial product (at most 4 MiB, at most the preference's maximum), and overwrites it with
// NaN bytes when it runs. Whatever a caller keeps in the workspace does not survive a
// matmul here, as it need not on the GPU.
constexpr uint64_t WORKSPACE_CLAIM_MAX = 4u << 20;

cublasStatus_t choose_algo(const Problem& P, const Pref& pr, AlgoRecord* rec, float* waves) {
    *rec = AlgoRecord{MAGIC_ALGO, P.epilogue, P.compute, types_of(P), {}, 0, 1, 0};
    // [E] LIMITED_BY_ALGO_ID needs cublasLtMatmulAlgoInit's ids, which are not emulated
    if (pr.search != CUBLASLT_SEARCH_BEST_FIT) return CUBLAS_STATUS_NOT_SUPPORTED;
    // [H] MIN_ALIGNMENT_*: "selecting a smaller value will exclude algorithms that can not work
    // with" a less aligned matrix; [E] this one needs at least its elements' alignment, and for
    // FP8 16 bytes: [D] Tensor Core Usage's "intptr_t(A) % 16 == 0" (B, C likewise; [E] D too),
    // which FP8 must meet; [N] nvmath refuses an FP8 operand less aligned
    const View* mats[4] = {&P.a, &P.b, &P.c, &P.d};
    for (int i = 0; i < 4; i++) {
        if (pr.align[i] == 0 || pr.align[i] % type_size(mats[i]->type) != 0 || (P.fp8 && pr.align[i] < 16))
            return CUBLAS_STATUS_NOT_SUPPORTED;
        rec->align[i] = (uint16_t)pow2_align(pr.align[i]);
    }
    // [H] BIAS_POINTER, AUX_POINTER: the heuristic "depend[s] on its value to determine expected
    // pointer alignment"; [E] element alignment is required, as of A..D
    const size_t es = type_size(P.bias_type), aux_es = (P.f.relu || P.f.drelu) ? 1 : type_size(P.d.type);
    rec->align[4] = rec->align[5] = 1;
    if (P.bias != nullptr) {
        if ((uintptr_t)P.bias % es != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
        rec->align[4] = (uint16_t)pow2_align((uintptr_t)P.bias);
    }
    if (P.aux != nullptr) {
        if ((uintptr_t)P.aux % aux_es != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
        rec->align[5] = (uint16_t)pow2_align((uintptr_t)P.aux);
    }
    // [E] the filters on numerical traits, waves and reduction schemes (IMPL_MASK,
    // MAX_WAVES_COUNT, REDUCTION_SCHEME_MASK) are accepted and not applied
    *waves = (float)(((P.m + 127) / 128) * ((P.n + 127) / 128) * P.batch) / 132.0f;  // 128 x 128 tiles, 132 SMs
    const uint64_t claim = ((uint64_t)P.m * P.n * sizeof(float) + 255) / 256 * 256;
    rec->workspace = std::min({pr.max_workspace, WORKSPACE_CLAIM_MAX, claim});
    return CUBLAS_STATUS_SUCCESS;
}

// The answers after the first: the first's algorithm with k split into 2, 4 or 8 parts.
// [H] CUBLASLT_ALGO_CONFIG_SPLITK_NUM: "SPLITK_NUM parts of matrix multiplication will be
// computed in parallel. The results will be accumulated according to
// CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME"; [H] REDUCTION_SCHEME_COMPUTE_TYPE: "Intermediate
// results are stored in compute type in the workspace and reduced in a separate step". [E] So
// each part sums its run of k in fp32, in order, and the parts are then added in order of k
// (cublaslt_compute.cpp): another rounding order than one sequence, the way a GPU's other
// algorithms differ in the last bits. Each claims its parts' fp32 m x n partial products as
// workspace and is offered only where that fits the preference's MAX_WORKSPACE_BYTES ([H]
// "Maximum allowed workspace size in bytes"), and where each part gets 2 or more of k. Not for
// FP8, whose single answer stays the only one ([E]: the trainer asks it for one).
constexpr uint32_t SPLITK_CHOICES[] = {2, 4, 8};

int heuristic_answers(const Problem& P, const AlgoRecord& first, const Pref& pr, int requested, AlgoRecord* out) {
    int count = 0;
    out[count++] = first;
    for (uint32_t splits : SPLITK_CHOICES) {
        if (count >= requested || P.fp8 || P.k < 2 * (int64_t)splits) break;
        const uint64_t claim = (uint64_t)splits * P.m * P.n * P.batch * sizeof(float);
        if (claim > pr.max_workspace) break;
        AlgoRecord r = first;
        r.splits = splits;
        r.rank = (uint32_t)count;
        r.workspace = claim;
        out[count++] = r;
    }
    return count;
}

// ---------------------------------------------------------------------------------------
// what would fault on the GPU: checked at the call

struct Range { uintptr_t lo, hi; };  // bytes [lo, hi)
// the bytes v's batch members span; es: bytes an element (v.type's size but for a bit-mask)
Range range_of(const View& v, int32_t batch, size_t es = 0) {
    if (es == 0) es = type_size(v.type);
    const int64_t last = (int64_t)(batch - 1) * v.bs;
    const int64_t lo = std::min<int64_t>(0, last), hi = std::max<int64_t>(0, last) + (v.rows - 1) * v.rs + (v.cols - 1) * v.cs;
    return Range{(uintptr_t)v.p + lo * es, (uintptr_t)v.p + (hi + 1) * es};
}
bool overlap(Range a, Range b) { return a.lo < b.hi && b.lo < a.hi; }

Range check_operand(const char* name, const View& v, int32_t batch, uint32_t algo_align, size_t es = 0) {
    if (es == 0) es = type_size(v.type);
    const uintptr_t p = (uintptr_t)v.p;
    if (p % es != 0) emu::fatal("cublasLtMatmul: %s=%p is not aligned to its %zu-byte elements", name, v.p, es);
    if (pow2_align(p) < algo_align)
        emu::fatal("cublasLtMatmul: %s=%p is %u-byte aligned, but the algorithm was chosen for %u-byte alignment "
                   "(the preference's MIN_ALIGNMENT, or the pointer the heuristic saw in the descriptor): "
                   "on the GPU it may fault (misaligned address) or misread",
                   name, v.p, pow2_align(p), algo_align);
    const Range r = range_of(v, batch, es);
    if (!emu::device_range((const void*)r.lo, r.hi - r.lo))
        emu::fatal("cublasLtMatmul: %s (%zu bytes from %p) is not inside one device allocation", name,
                   (size_t)(r.hi - r.lo), (const void*)r.lo);
    return r;
}

// every operand: inside its allocation, aligned as the algorithm assumes, D apart from the inputs
void check_pointers(const Job& J, const AlgoRecord& rec, bool reads_c) {
    const Problem& P = J.P;
    const Range a = check_operand("A", P.a, P.batch, rec.align[0]), b = check_operand("B", P.b, P.batch, rec.align[1]);
    if (reads_c) check_operand("C", P.c, P.batch, rec.align[2]);
    const Range d = check_operand("D", P.d, P.batch, rec.align[3]);
    if (overlap(d, a) || overlap(d, b))
        emu::fatal("cublasLtMatmul: D overlaps A or B: on the GPU the result would depend on the order of tiles");
    if (P.bias != nullptr)
        check_operand("bias", View{P.bias, P.bias_type, P.f.bgrad_b ? P.n : P.m, 1, 1, 0, P.bias_bs}, P.batch, rec.align[4]);
    // FP8's scales and amax: [H] "Device pointer to the scale factor value", a float ([H] "the
    // same type as the compute type")
    const std::pair<const char*, const float*> scalars[4] = {{"A_SCALE_POINTER", P.scale_a},
                                                             {"B_SCALE_POINTER", P.scale_b},
                                                             {"D_SCALE_POINTER", P.scale_d},
                                                             {"AMAX_D_POINTER", P.amax_d}};
    for (const auto& sc : scalars)
        if (sc.second != nullptr &&
            ((uintptr_t)sc.second % alignof(float) != 0 || !emu::device_range(sc.second, sizeof(float))))
            emu::fatal("cublasLtMatmul: %s=%p is not a float in device memory", sc.first, (const void*)sc.second);
    if (P.aux != nullptr) {
        // a bit-mask as the bytes that hold its bits (its ld and batch stride count bits)
        const bool bits = P.f.relu || P.f.drelu;
        const View aux = bits ? View{P.aux, P.d.type, (P.m + 7) / 8, P.n, 1, P.aux_ld / 8, P.aux_bs / 8}
                              : View{P.aux, P.d.type, P.m, P.n, 1, P.aux_ld, P.aux_bs};
        const Range r = check_operand("aux", aux, P.batch, rec.align[5], bits ? 1 : 0);
        // (DGELU reading aux exactly where it writes D is element-wise, hence harmless)
        const bool in_place = !P.f.aux_out && !bits && P.aux == P.d.p && P.aux_ld == P.d.cs && P.aux_bs == P.d.bs;
        if (overlap(r, d) && !in_place) emu::fatal("cublasLtMatmul: aux=%p overlaps D=%p", P.aux, P.d.p);
    }
    if (J.workspace_bytes > 0 && !emu::device_range(J.workspace, J.workspace_bytes))
        emu::fatal("cublasLtMatmul: the workspace (%llu bytes at %p) is not inside one device allocation",
                   (unsigned long long)J.workspace_bytes, J.workspace);
}

bool valid_handle(cublasLtHandle_t h) { return h != nullptr && h->magic == MAGIC_HANDLE; }

// [E] destroying NULL does nothing; a descriptor never created (or destroyed) is INVALID_VALUE
template <typename O> cublasStatus_t destroy(O* o, uint64_t magic) {
    if (o == nullptr) return CUBLAS_STATUS_SUCCESS;
    if (!valid(o, magic)) return CUBLAS_STATUS_INVALID_VALUE;
    magic_of(o) = 0;
    delete o;
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// the API

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
    if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *handle = new cublasLtContext{MAGIC_HANDLE};
    return CUBLAS_STATUS_SUCCESS;
}

// [H] NOT_INITIALIZED "if cuBLASLt handle has not been initialized". Work already queued
// holds no reference to the handle.
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    if (!valid_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->magic = 0;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

namespace {
struct StatusText {
    cublasStatus_t status;
    const char *name, *text;
};
const StatusText STATUS_TEXTS[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
    {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE", "an invalid value was used as an argument"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH", "an absent device architectural feature is required"},
    {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"},
    {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR", "an error was detected when checking the license"},
};
}  // namespace

const char* cublasLtGetStatusName(cublasStatus_t status) {
    for (const StatusText& s : STATUS_TEXTS)
        if (s.status == status) return s.name;
    return "CUBLAS_STATUS_UNKNOWN";
}
const char* cublasLtGetStatusString(cublasStatus_t status) {
    for (const StatusText& s : STATUS_TEXTS)
        if (s.status == status) return s.text;
    return "unknown cuBLAS status";
}
size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }

// [H] *Init: ALLOC_FAILED "if size of the pre-allocated space is insufficient"
cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t l, size_t size, cudaDataType type,
                                                 uint64_t rows, uint64_t cols, int64_t ld) {
    if (l == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    if (size < sizeof(*l)) return CUBLAS_STATUS_ALLOC_FAILED;
    const AttrTable& t = layout_table();
    memset(l->data, 0, sizeof(l->data));
    put<uint32_t>(t, l, CUBLASLT_MATRIX_LAYOUT_TYPE, (uint32_t)type);
    put<int32_t>(t, l, CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_COL);
    put<uint64_t>(t, l, CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
    put<uint64_t>(t, l, CUBLASLT_MATRIX_LAYOUT_COLS, cols);
    put<int64_t>(t, l, CUBLASLT_MATRIX_LAYOUT_LD, ld);
    put<int32_t>(t, l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
    magic_of(l) = MAGIC_LAYOUT;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    if (l == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *l = new cublasLtMatrixLayoutOpaque_t;
    return cublasLtMatrixLayoutInit_internal(*l, sizeof(**l), type, rows, cols, ld);
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { return destroy(l, MAGIC_LAYOUT); }
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
    return set_attr(layout_table(), l, MAGIC_LAYOUT, attr, buf, bytes);
}
cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                void* buf, size_t bytes, size_t* written) {
    return get_attr(layout_table(), l, MAGIC_LAYOUT, attr, buf, bytes, written);
}

// [H] defaults: scale type as given, transposes N, fill FULL, epilogue DEFAULT, pointer mode
// HOST, aux and bias data types -1 (D's type), everything else 0 / NULL
cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t d, size_t size, cublasComputeType_t computeType,
                                               cudaDataType_t scaleType) {
    if (d == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    if (size < sizeof(*d)) return CUBLAS_STATUS_ALLOC_FAILED;
    const AttrTable& t = desc_table();
    memset(d->data, 0, sizeof(d->data));
    put<int32_t>(t, d, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, computeType);
    put<int32_t>(t, d, CUBLASLT_MATMUL_DESC_SCALE_TYPE, scaleType);
    put<int32_t>(t, d, CUBLASLT_MATMUL_DESC_FILL_MODE, CUBLAS_FILL_MODE_FULL);
    put<uint32_t>(t, d, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT);
    put<int32_t>(t, d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, -1);
    put<int32_t>(t, d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, -1);
    magic_of(d) = MAGIC_DESC;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
    if (d == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *d = new cublasLtMatmulDescOpaque_t;
    return cublasLtMatmulDescInit_internal(*d, sizeof(**d), computeType, scaleType);
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { return destroy(d, MAGIC_DESC); }
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
    return set_attr(desc_table(), d, MAGIC_DESC, attr, buf, bytes);
}
cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, void* buf,
                                              size_t bytes, size_t* written) {
    return get_attr(desc_table(), d, MAGIC_DESC, attr, buf, bytes, written);
}

cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t p, size_t size) {
    if (p == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    if (size < sizeof(*p)) return CUBLAS_STATUS_ALLOC_FAILED;
    const AttrTable& t = pref_table();
    memset(p->data, 0, sizeof(p->data));
    put<uint32_t>(t, p, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, CUBLASLT_REDUCTION_SCHEME_MASK);
    put<uint64_t>(t, p, CUBLASLT_MATMUL_PREF_IMPL_MASK, ~0ull);
    for (int i = 0; i < 4; i++) put<uint32_t>(t, p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i, DEFAULT_PREF.align[i]);
    magic_of(p) = MAGIC_PREF;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
    if (p == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    *p = new cublasLtMatmulPreferenceOpaque_t;
    return cublasLtMatmulPreferenceInit_internal(*p, sizeof(**p));
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { return destroy(p, MAGIC_PREF); }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
    return set_attr(pref_table(), p, MAGIC_PREF, attr, buf, bytes);
}
cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void* buf, size_t bytes,
                                                    size_t* written) {
    return get_attr(pref_table(), p, MAGIC_PREF, attr, buf, bytes, written);
}

// [H] INVALID_VALUE "if requestedAlgoCount is less or equal to zero"; NOT_SUPPORTED "if no
// heuristic function available for current configuration" (with no answers, as the real one
// when no algorithm fits: the trainer reads that as "run your own kernel")
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t pref, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t results[], int* returnAlgoCount) {
    if (!valid_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requestedAlgoCount <= 0 || results == nullptr || returnAlgoCount == nullptr || !valid(pref, MAGIC_PREF))
        return CUBLAS_STATUS_INVALID_VALUE;
    *returnAlgoCount = 0;
    Problem P;
    cublasStatus_t st = make_problem(desc, Adesc, Bdesc, Cdesc, Ddesc, &P);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    AlgoRecord rec;
    float waves = 0.0f;
    const Pref pr = read_pref(pref);
    if ((st = choose_algo(P, pr, &rec, &waves)) != CUBLAS_STATUS_SUCCESS) return st;
    // [H] requestedAlgoCount: "requested maximum number of algorithms to return";
    // heuristicResultsArray "ordered in increasing estimated compute time"; returnAlgoCount
    // "The number of heuristicResultsArray elements written". [E] The first answer is the one
    // algorithm the emulator always had (so a caller asking for one sees no change), the
    // split-K ones follow: the emulator's estimate puts fewer parts first.
    AlgoRecord recs[1 + sizeof(SPLITK_CHOICES) / sizeof(SPLITK_CHOICES[0])];
    const int count = heuristic_answers(P, rec, pr, requestedAlgoCount, recs);
    for (int i = 0; i < count; i++) {
        memset(&results[i], 0, sizeof(results[i]));
        memcpy(results[i].algo.data, &recs[i], sizeof(recs[i]));
        results[i].workspaceSize = recs[i].workspace;
        results[i].state = CUBLAS_STATUS_SUCCESS;
        results[i].wavesCount = waves * recs[i].splits;  // each part a wave of its own tiles
    }
    *returnAlgoCount = count;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
    if (!valid_handle(handle)) return CUBLAS_STATUS_NOT_INITIALIZED;
    auto job = std::make_shared<Job>();
    Problem& P = job->P;
    cublasStatus_t st = make_problem(desc, Adesc, Bdesc, Cdesc, Ddesc, &P);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (alpha == nullptr || beta == nullptr || A == nullptr || B == nullptr || D == nullptr)
        return CUBLAS_STATUS_INVALID_VALUE;
    // alpha and beta: [H] POINTER_MODE HOST (read now) or DEVICE (read by the work, on the stream)
    const bool on_device = P.pointer_mode == CUBLASLT_POINTER_MODE_DEVICE;
    const bool alpha_dev = emu::device_range(alpha, sizeof(float)), beta_dev = emu::device_range(beta, sizeof(float));
    if (on_device ? !(alpha_dev && beta_dev) : (alpha_dev || beta_dev))
        emu::fatal("cublasLtMatmul: alpha=%p (%s memory) beta=%p (%s memory) with pointer mode %s", alpha,
                   alpha_dev ? "device" : "host", beta, beta_dev ? "device" : "host", on_device ? "DEVICE" : "HOST");
    job->alpha = on_device ? 0.0f : *(const float*)alpha, job->beta = on_device ? 0.0f : *(const float*)beta;
    job->alpha_dev = on_device ? (const float*)alpha : nullptr, job->beta_dev = on_device ? (const float*)beta : nullptr;
    const bool reads_c = on_device || job->beta != 0.0f;
    // [E] C may be NULL only when it is certainly not read (host beta == 0)
    if (reads_c && C == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
    P.a.p = A, P.b.p = B, P.c.p = C, P.d.p = D;
    // [D] in place (C == D) needs C's layout to be D's; out of place they must not overlap
    if (C != nullptr) {
        const bool same = P.c.type == P.d.type && P.c.rs == P.d.rs && P.c.cs == P.d.cs && P.c.bs == P.d.bs;
        if (C == D ? !same : overlap(range_of(P.c, P.batch), range_of(P.d, P.batch)))
            return CUBLAS_STATUS_INVALID_VALUE;
    }
    // [D] algo NULL: "an implicit heuristics query with default search preferences"
    AlgoRecord rec;
    if (algo == nullptr) {
        float waves;
        if ((st = choose_algo(P, DEFAULT_PREF, &rec, &waves)) != CUBLAS_STATUS_SUCCESS) return st;
    } else {
        memcpy(&rec, algo->data, sizeof(rec));
        // [E] not an algorithm the heuristic gave: INVALID_VALUE; one it gave for another
        // epilogue, compute type or data types: NOT_SUPPORTED (it has no kernel for this one)
        if (rec.magic != MAGIC_ALGO) return CUBLAS_STATUS_INVALID_VALUE;
        if (rec.epilogue != P.epilogue || rec.compute != P.compute || rec.types != types_of(P))
            return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    // [H] INVALID_VALUE "when workspaceSizeInBytes is less than workspace required by configured algo"
    if (workspaceSizeInBytes < rec.workspace || (rec.workspace > 0 && workspace == nullptr))
        return CUBLAS_STATUS_INVALID_VALUE;
    job->workspace = workspace;
    job->workspace_bytes = rec.workspace;
    job->splits = rec.splits;
    // [G] A and B scale pointers 16-byte aligned: on an H200 (cuBLASLt 13.1, 2026-11-27,
    // dev/results/2026-11-27_gpu_h200.md) cublasLtMatmul answered NOT_SUPPORTED to each of the
    // heuristic's 8 answers for an A_SCALE_POINTER 4 bytes past a 16-byte boundary, the heuristic
    // having answered; with both 256-byte aligned it ran the same GEMMs. [T] #159957: cuBLAS's
    // word that scale tensors' start addresses must be 16-byte aligned.
    if ((uintptr_t)P.scale_a % 16 != 0 || (uintptr_t)P.scale_b % 16 != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    check_pointers(*job, rec, reads_c);
    // [E] EMU_CUBLASLT_FAST=i: every answer of the heuristic but the i-th (0: the first) takes
    // 20 ms longer on the stream (more than a busy machine's noise in the fastest of a few runs), so a caller that times the answers picks the i-th wherever it
    // is offered. The emulator's time says nothing of a GPU's; this lets a test decide which
    // answer a timed choice keeps (and make two runs choose differently).
    static const long fast = getenv("EMU_CUBLASLT_FAST") ? atol(getenv("EMU_CUBLASLT_FAST")) : -1;
    const bool slow = fast >= 0 && (long)rec.rank != fast;
    // [H] EXECUTION_FAILED "if cuda reported execution error from the device"
    // the operation's name, which EMU_PROFILE=1 counts launches by: an FP8 GEMM's says so, and
    // whether it asked for fast accumulation (which the emulator sums as without it)
    const char* name = !P.fp8 ? "cublasLtMatmul" : P.fast_accum ? "cublasLtMatmul FP8 FAST_ACCUM" : "cublasLtMatmul FP8";
    cudaError_t e = emu::stream_enqueue(stream, name, [job, slow]() {
        if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        run(*job);
    });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
