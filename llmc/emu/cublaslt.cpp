// cublaslt.cpp: the emulated GPU's cuBLASLt (include/cublasLt.h). It has one algorithm, run
// on the CPU and queued on the stream like the library's kernels:
//   D = epilogue(alpha op(A) op(B) + beta C)      column-major, D and C m x n, op(A) m x k
// with leading dimensions, row-major order, strided batches and the epilogues below.
//
// Arithmetic (what the GPU's kernels do, as far as NVIDIA says):
//   - products summed in fp32, in order of k (one fixed order: the result is deterministic);
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
// __NV_SATFINITE conversion). What FP8 accepts and refuses: fp8_types, fp8_shapes below.
// FAST_ACCUM: [H] "intermediate results will not periodically be promoted to a higher precision".
// [E] ASSUMPTION: with it the emulator still sums in fp32, exactly as without. NVIDIA documents no
// rule for the lower precision (DeepSeek-V3's report, arXiv 2412.19437, measured "around 14 bits"
// kept on H800, which is not a rounding rule), so the GPU with FAST_ACCUM may differ from the
// emulator by more than fp32's rounding; without it the GPU's periodic promotion to fp32 is what
// the emulator's fp32 sum models.
//
// Where each rule below comes from:
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
//   [E] the emulator's own choice where NVIDIA says nothing; each one says why
// A status answers what the real library answers with a status. What would fault or corrupt
// memory on the GPU instead (a pointer outside its allocation, less aligned than the chosen
// algorithm assumes, D overlapping an input) stops the program through emu::fatal, at the
// call, naming the operand.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

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

size_t type_size(cudaDataType_t t) {
    switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF: return 2;
    case CUDA_R_8F_E4M3: case CUDA_R_8F_E5M2: return 1;
    default: return 0;  // not emulated
    }
}
bool is_fp8(cudaDataType_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

// the largest power of two, at most 256 (the preferences' default), dividing a
uint32_t pow2_align(uintptr_t a) {
    uint32_t al = 256;
    while (al > 1 && a % al != 0) al /= 2;
    return al;
}

// A matrix as the computation sees it: element (r, c) of batch member b is at p + b * bs +
// r * rs + c * cs elements (a transpose, or row-major order, only swaps rs and cs).
struct View {
    const void* p;
    cudaDataType_t type;
    int64_t rows, cols, rs, cs, bs;
};

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
};

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

View transposed(View v) { return View{v.p, v.type, v.cols, v.rows, v.cs, v.rs, v.bs}; }

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
                 get<float*>(t, desc, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER)};
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------
// the heuristic: one algorithm, described in cublasLtMatmulAlgo_t's words

struct AlgoRecord {
    uint64_t magic;
    uint32_t epilogue;
    int32_t compute;
    uint32_t types;     // A, B, C, D types, a byte each
    uint16_t align[6];  // the alignment it assumes of A, B, C, D, bias, aux (bytes)
    uint64_t workspace;
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
    *rec = AlgoRecord{MAGIC_ALGO, P.epilogue, P.compute, types_of(P), {}, 0};
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

// ---------------------------------------------------------------------------------------
// the computation, when the stream reaches it

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
    else row_sums_t<__nv_bfloat16, TD>(out, v, b);  // (never fp8: make_problem refuses its gradients)
}

struct Job {
    Problem P;
    float alpha, beta;                  // host pointer mode: read at the call
    const float *alpha_dev, *beta_dev;  // device pointer mode: read when the work runs
    void* workspace;
    uint64_t workspace_bytes;
};

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
    const int64_t m = J.P.m, n = J.P.n, k = J.P.k;
    const int64_t blocks = (n + TILE_COLS - 1) / TILE_COLS;
#pragma omp parallel for schedule(dynamic) if (m * n * k >= PARALLEL_MIN_WORK)
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t j0 = blk * TILE_COLS;
        const float* bcol[TILE_COLS];  // a missing last column repeats the one before; not stored
        for (int64_t t = 0; t < TILE_COLS; t++) bcol[t] = bf + std::min(j0 + t, n - 1) * k;
        float acc[TILE_COLS][TILE_ROWS];
        for (int64_t i0 = 0; i0 < m; i0 += TILE_ROWS) {
            const int64_t rows = std::min(TILE_ROWS, m - i0);
            memset(acc, 0, sizeof(acc));
            for (int64_t p = 0; p < k; p++) {
                const float* a = af + p * m + i0;
                const float b0 = bcol[0][p], b1 = bcol[1][p], b2 = bcol[2][p], b3 = bcol[3][p];
#pragma omp simd
                for (int64_t i = 0; i < rows; i++) {
                    const float x = a[i];
                    acc[0][i] += x * b0;
                    acc[1][i] += x * b1;
                    acc[2][i] += x * b2;
                    acc[3][i] += x * b3;
                }
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
    const bool bits = P.f.relu || P.f.drelu;  // as check_pointers reads aux
    if (P.aux != nullptr)
        race_view(bits ? View{P.aux, P.d.type, (P.m + 7) / 8, P.n, 1, P.aux_ld / 8, P.aux_bs / 8}
                       : View{P.aux, P.d.type, P.m, P.n, 1, P.aux_ld, P.aux_bs},
                  P.batch, P.f.aux_out, bits ? 1 : 0);
    if (J.workspace_bytes > 0) emu::race_range(J.workspace, J.workspace_bytes, true);
    race_view(P.d, P.batch, true);
}

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
    if ((st = choose_algo(P, read_pref(pref), &rec, &waves)) != CUBLAS_STATUS_SUCCESS) return st;
    memset(&results[0], 0, sizeof(results[0]));
    memcpy(results[0].algo.data, &rec, sizeof(rec));
    results[0].workspaceSize = rec.workspace;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = waves;
    *returnAlgoCount = 1;
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
    check_pointers(*job, rec, reads_c);
    // [H] EXECUTION_FAILED "if cuda reported execution error from the device"
    cudaError_t e = emu::stream_enqueue(stream, "cublasLtMatmul", [job]() { run(*job); });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}
