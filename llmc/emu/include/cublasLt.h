// cublasLt.h for the emulated GPU (llmc/emu/emu.h): the part of cuBLASLt that gptrain calls
// (llmc/cuda/matmul.cuh), with the names, signatures and numeric enum values of NVIDIA's
// cublasLt.h and cublas_api.h (CUDA 13), so the same source compiles against either.
// Implemented by llmc/emu/cublaslt.cpp, which documents what each call accepts and rejects,
// FP8 matmuls (CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2 in emu.h's cudaDataType_t) included.
//
// The descriptors are NVIDIA's semi-opaque structs of the same sizes (a descriptor may live
// on the caller's stack through the *Init functions); what the emulator keeps in them is its
// own. Enumerations are complete where the emulator reads the value (compute types,
// epilogues, attributes), so a value it does not emulate is refused with a status, not
// misread.
#pragma once
#include <cstddef>
#include <cstdint>
#include "../emu.h"  // cudaStream_t, cudaDataType_t (CUDA_R_32F, CUDA_R_16BF, ...)

#define CUBLASWINAPI

// the cuBLAS release whose headers this one follows
#define CUBLAS_VER_MAJOR 13
#define CUBLAS_VER_MINOR 1
#define CUBLAS_VER_PATCH 0
#define CUBLAS_VERSION (CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH)

// ---------------------------------------------------------------------------------------
// from cublas_api.h

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum { CUBLAS_FILL_MODE_LOWER = 0, CUBLAS_FILL_MODE_UPPER = 1, CUBLAS_FILL_MODE_FULL = 2 } cublasFillMode_t;

typedef enum {
    CUBLAS_OP_N = 0,
    CUBLAS_OP_T = 1,
    CUBLAS_OP_C = 2,         // conjugate transpose: the transpose, for real data
    CUBLAS_OP_HERMITAN = 2,  // another name of CUBLAS_OP_C
    CUBLAS_OP_CONJG = 3      // reserved by NVIDIA, not supported
} cublasOperation_t;

typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;

// the type the products are accumulated in; _PEDANTIC: exactly that arithmetic; _FAST_*:
// the multiplicands may first be rounded to the narrower type
typedef enum {
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_16F_PEDANTIC = 65,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
    CUBLAS_COMPUTE_32F_EMULATED_16BFX9 = 78,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_COMPUTE_64F_PEDANTIC = 71,
    CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT = 79,
    CUBLAS_COMPUTE_32I = 72,
    CUBLAS_COMPUTE_32I_PEDANTIC = 73,
} cublasComputeType_t;

// ---------------------------------------------------------------------------------------
// handles and descriptors

typedef struct cublasLtContext* cublasLtHandle_t;

typedef struct {
    uint64_t data[8];
} cublasLtMatrixLayoutOpaque_t;
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;

// an algorithm chosen by cublasLtMatmulAlgoGetHeuristic; plain data, copyable
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
    uint64_t data[32];
} cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;

typedef struct {
    uint64_t data[8];
} cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;

// ---------------------------------------------------------------------------------------
// enumerations

typedef enum {
    CUBLASLT_POINTER_MODE_HOST = CUBLAS_POINTER_MODE_HOST,
    CUBLASLT_POINTER_MODE_DEVICE = CUBLAS_POINTER_MODE_DEVICE,
    CUBLASLT_POINTER_MODE_DEVICE_VECTOR = 2,
    CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO = 3,
    CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST = 4,
} cublasLtPointerMode_t;

// the numerical traits of an algorithm (cublasLtMatmulPreference's IMPL_MASK filters on them)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_FMA (0x01ull << 0)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_HMMA (0x02ull << 0)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_IMMA (0x04ull << 0)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_DMMA (0x08ull << 0)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_TENSOR_OP_MASK (0xfeull << 0)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_OP_TYPE_MASK (0xffull << 0)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_16F (0x01ull << 8)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_32F (0x02ull << 8)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_64F (0x04ull << 8)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_32I (0x08ull << 8)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_TYPE_MASK (0xffull << 8)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16F (0x01ull << 16)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16BF (0x02ull << 16)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_TF32 (0x04ull << 16)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_32F (0x08ull << 16)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_64F (0x10ull << 16)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_8I (0x20ull << 16)
#define CUBLASLT_NUMERICAL_IMPL_FLAGS_OP_INPUT_TYPE_MASK (0xffull << 16)
typedef uint64_t cublasLtNumericalImplFlags_t;

// memory order of a matrix; the emulator implements COL and ROW (the others are int8 layouts)
typedef enum {
    CUBLASLT_ORDER_COL = 0,
    CUBLASLT_ORDER_ROW = 1,
    CUBLASLT_ORDER_COL32 = 2,
    CUBLASLT_ORDER_COL4_4R2_8C = 3,
    CUBLASLT_ORDER_COL32_2R_4R4 = 4,
} cublasLtOrder_t;

typedef enum {
    CUBLASLT_BATCH_MODE_STRIDED = 0,
    CUBLASLT_BATCH_MODE_POINTER_ARRAY = 1,
} cublasLtBatchMode_t;

// matrix layout attributes; the storage type of each in brackets
typedef enum {
    CUBLASLT_MATRIX_LAYOUT_TYPE = 0,                   // [uint32_t] cudaDataType
    CUBLASLT_MATRIX_LAYOUT_ORDER = 1,                  // [int32_t] cublasLtOrder_t, default COL
    CUBLASLT_MATRIX_LAYOUT_ROWS = 2,                   // [uint64_t]
    CUBLASLT_MATRIX_LAYOUT_COLS = 3,                   // [uint64_t]
    CUBLASLT_MATRIX_LAYOUT_LD = 4,                     // [int64_t] leading dimension, in elements
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,            // [int32_t] default 1
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,   // [int64_t] elements between batch members
    CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET = 7,           // [int64_t] planar complex only
    CUBLASLT_MATRIX_LAYOUT_BATCH_MODE = 8,             // [uint32_t] cublasLtBatchMode_t
} cublasLtMatrixLayoutAttribute_t;

// matmul descriptor attributes; the storage type of each in brackets
typedef enum {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,             // [int32_t] cublasComputeType_t
    CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,               // [int32_t] type of alpha and beta
    CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,             // [int32_t] cublasLtPointerMode_t
    CUBLASLT_MATMUL_DESC_TRANSA = 3,                   // [int32_t] cublasOperation_t
    CUBLASLT_MATMUL_DESC_TRANSB = 4,                   // [int32_t]
    CUBLASLT_MATMUL_DESC_TRANSC = 5,                   // [int32_t] only CUBLAS_OP_N
    CUBLASLT_MATMUL_DESC_FILL_MODE = 6,                // [int32_t] cublasFillMode_t, default FULL
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,                 // [uint32_t] cublasLtEpilogue_t
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,             // [void*] bias (input) or bias gradient (output)
    CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,       // [int64_t]
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,    // [void*] GELU input / ReLU bit-mask
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,         // [int64_t]
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13,  // [int64_t]
    CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE = 14,  // [int64_t]
    CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = 15,         // [int32_t]
    CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17,         // [void*] fp8: device float multiplying A, NULL: 1
    CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18,         // [void*] ... B
    CUBLASLT_MATMUL_DESC_C_SCALE_POINTER = 19,         // [void*] ... C (fp8 C only: refused here)
    CUBLASLT_MATMUL_DESC_D_SCALE_POINTER = 20,         // [void*] ... the result stored to an fp8 D
    CUBLASLT_MATMUL_DESC_AMAX_D_POINTER = 21,          // [void*] fp8 D: device float, max |result| before D's scale
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,  // [int32_t] default -1: D's type
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER = 23,  // [void*]
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER = 24,   // [void*]
    CUBLASLT_MATMUL_DESC_FAST_ACCUM = 25,              // [int8_t] fp8 only; the emulator sums in fp32 either way
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,          // [int32_t] default -1: D's type
    CUBLASLT_MATMUL_DESC_A_SCALE_MODE = 31,            // [int32_t]
    CUBLASLT_MATMUL_DESC_B_SCALE_MODE = 32,            // [int32_t]
    CUBLASLT_MATMUL_DESC_C_SCALE_MODE = 33,            // [int32_t]
    CUBLASLT_MATMUL_DESC_D_SCALE_MODE = 34,            // [int32_t]
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE = 35, // [int32_t]
    CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER = 36,     // [void*]
    CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE = 37,        // [int32_t]
    CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR = 38,    // [void*]
} cublasLtMatmulDescAttributes_t;

// what happens to alpha op(A) op(B) + beta C before it is stored (bit flags: 4 bias, 128 aux,
// 16 bias gradient); see llmc/emu/cublaslt_compute.cpp for each one's definition
typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_RELU_AUX = (CUBLASLT_EPILOGUE_RELU | 128),
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_RELU_BIAS = (CUBLASLT_EPILOGUE_RELU | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_RELU_AUX_BIAS = (CUBLASLT_EPILOGUE_RELU_AUX | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_DRELU = 8 | 128,
    CUBLASLT_EPILOGUE_DRELU_BGRAD = CUBLASLT_EPILOGUE_DRELU | 16,
    CUBLASLT_EPILOGUE_GELU = 32,
    CUBLASLT_EPILOGUE_GELU_AUX = (CUBLASLT_EPILOGUE_GELU | 128),
    CUBLASLT_EPILOGUE_GELU_BIAS = (CUBLASLT_EPILOGUE_GELU | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = (CUBLASLT_EPILOGUE_GELU_AUX | CUBLASLT_EPILOGUE_BIAS),
    CUBLASLT_EPILOGUE_DGELU = 64 | 128,
    CUBLASLT_EPILOGUE_DGELU_BGRAD = CUBLASLT_EPILOGUE_DGELU | 16,
    CUBLASLT_EPILOGUE_BGRADA = 256,
    CUBLASLT_EPILOGUE_BGRADB = 512,
} cublasLtEpilogue_t;

typedef enum {
    CUBLASLT_SEARCH_BEST_FIT = 0,
    CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID = 1,
    CUBLASLT_SEARCH_RESERVED_02 = 2,
    CUBLASLT_SEARCH_RESERVED_03 = 3,
    CUBLASLT_SEARCH_RESERVED_04 = 4,
    CUBLASLT_SEARCH_RESERVED_05 = 5,
    CUBLASLT_SEARCH_RESERVED_06 = 6,
    CUBLASLT_SEARCH_RESERVED_07 = 7,
    CUBLASLT_SEARCH_RESERVED_08 = 8,
    CUBLASLT_SEARCH_RESERVED_09 = 9,
} cublasLtMatmulSearch_t;

typedef enum {
    CUBLASLT_REDUCTION_SCHEME_NONE = 0,
    CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,
    CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2,
    CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4,
    CUBLASLT_REDUCTION_SCHEME_MASK = 0x7,
} cublasLtReductionScheme_t;

// heuristic preferences; the storage type of each in brackets
typedef enum {
    CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,              // [uint32_t] cublasLtMatmulSearch_t
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,      // [uint64_t] default 0
    CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,    // [uint32_t] default all
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,    // [uint32_t] default 256
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,    // [uint32_t] default 256
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,    // [uint32_t] default 256
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,    // [uint32_t] default 256
    CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT = 9,          // [float] default 0: no limit
    CUBLASLT_MATMUL_PREF_IMPL_MASK = 12,               // [uint64_t] default all
} cublasLtMatmulPreferenceAttributes_t;

// one answer of the heuristic: the other fields mean something only when state is SUCCESS
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;   // the workspace bytes cublasLtMatmul must be given with this algo
    cublasStatus_t state;
    float wavesCount;       // estimated device occupancy (1.0: every SM busy once)
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

// ---------------------------------------------------------------------------------------
// functions

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
const char* cublasLtGetStatusName(cublasStatus_t status);
const char* cublasLtGetStatusString(cublasStatus_t status);
size_t cublasLtGetVersion(void);

cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t layout, size_t size, cudaDataType type,
                                                 uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes);
cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                void* buf, size_t sizeInBytes, size_t* sizeWritten);

cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t desc, size_t size, cublasComputeType_t computeType,
                                               cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes);
cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              void* buf, size_t sizeInBytes, size_t* sizeWritten);

cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref, size_t size);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes);
cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void* buf,
                                                    size_t sizeInBytes, size_t* sizeWritten);

// At most requestedAlgoCount answers (the emulator has one algorithm: 1 answer, or none and
// CUBLAS_STATUS_NOT_SUPPORTED).
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount);

// D = epilogue(alpha op(A) op(B) + beta C), column-major, queued on stream; for FP8 A and B
// D = scale_D epilogue(alpha scale_A scale_B op(A) op(B) + beta C) (llmc/emu/cublaslt_compute.cpp).
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream);

}  // extern "C"

// descriptors in memory the caller owns
static inline cublasStatus_t cublasLtMatrixLayoutInit(cublasLtMatrixLayout_t layout, cudaDataType type, uint64_t rows,
                                                      uint64_t cols, int64_t ld) {
    return cublasLtMatrixLayoutInit_internal(layout, sizeof(*layout), type, rows, cols, ld);
}
static inline cublasStatus_t cublasLtMatmulDescInit(cublasLtMatmulDesc_t desc, cublasComputeType_t computeType,
                                                    cudaDataType_t scaleType) {
    return cublasLtMatmulDescInit_internal(desc, sizeof(*desc), computeType, scaleType);
}
static inline cublasStatus_t cublasLtMatmulPreferenceInit(cublasLtMatmulPreference_t pref) {
    return cublasLtMatmulPreferenceInit_internal(pref, sizeof(*pref));
}
