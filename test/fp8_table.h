// fp8_table.h: the file of NVIDIA's FP8 conversion results that test/fp8_reference.cpp writes
// (built against the CUDA toolkit's own cuda_fp8.h) and test/test_emu_fp8.cu checks the emulated
// GPU's cuda_fp8.h against. Plain C++, no CUDA header: both programs include it.
//
// The file, little-endian: FP8_TABLE_MAGIC, FP8_TABLE_VERSION (uint32 each), then sections up to
// the end, each a Fp8TableSection and its count Fp8TableEntry records. An entry holds the
// input's bits and NVIDIA's result's bits, both zero-extended, as the op's comment says.
//
// defines: FP8_TABLE_MAGIC, FP8_TABLE_VERSION, Fp8TableOp, Fp8TableSection, Fp8TableEntry,
//          fp8_table_op_name, float_bits, bits_float, double_bits, bits_double
#pragma once
#include <cstdint>
#include <cstring>

constexpr uint32_t FP8_TABLE_MAGIC = 0x38504638u;  // "8FP8" as bytes
constexpr uint32_t FP8_TABLE_VERSION = 1;

// What an entry's input went through. "fp8" is the section's format (0: E4M3, 1: E5M2),
// "sat" its saturation (0: __NV_NOSAT, 1: __NV_SATFINITE; the constructors ignore it).
enum Fp8TableOp : uint32_t {
    FP8_TABLE_CVT_FLOAT = 0,  // __nv_cvt_float_to_fp8(in[0]'s float, sat, fp8) -> out: fp8 bits
    FP8_TABLE_CVT_DOUBLE,     // __nv_cvt_double_to_fp8(in[0]'s double, sat, fp8)
    FP8_TABLE_CVT_BF16,       // __nv_cvt_bfloat16raw_to_fp8(in[0]'s 16 bits, sat, fp8)
    FP8_TABLE_CVT_FLOAT2,     // __nv_cvt_float2_to_fp8x2({in[0], in[1]} as floats) -> 16 bits
    FP8_TABLE_CTOR_FLOAT,     // __nv_fp8_e4m3 / __nv_fp8_e5m2 (float) -> its __x
    FP8_TABLE_CTOR_DOUBLE,    // ... (double)
    FP8_TABLE_CTOR_BF16,      // ... (__nv_bfloat16)
    FP8_TABLE_CTOR_INT,       // ... (int), in[0] the int's 32 bits
    FP8_TABLE_CTOR_FLOAT4,    // __nv_fp8x4_e4m3 / _e5m2 (float4: in[0] x | y << 32, in[1] z | w << 32) -> __x
    FP8_TABLE_TO_FLOAT,       // float(fp8 whose __x is in[0]) -> out: the float's bits
    FP8_TABLE_TO_DOUBLE,      // double(...) -> the double's bits
    FP8_TABLE_TO_BF16,        // __nv_bfloat16(...) -> its 16 bits
    FP8_TABLE_TO_FLOAT2,      // float2(__nv_fp8x2_e4m3 / _e5m2 whose __x is in[0]) -> x | y << 32
    FP8_TABLE_OP_COUNT
};

struct Fp8TableSection {
    uint32_t op;      // Fp8TableOp
    uint32_t fp8;     // 0: E4M3, 1: E5M2
    uint32_t sat;     // 0: __NV_NOSAT, 1: __NV_SATFINITE
    uint32_t count;   // entries that follow
};

struct Fp8TableEntry {
    uint64_t in[2];
    uint64_t out;
};

inline const char* fp8_table_op_name(uint32_t op) {
    static const char* names[FP8_TABLE_OP_COUNT] = {
        "__nv_cvt_float_to_fp8", "__nv_cvt_double_to_fp8", "__nv_cvt_bfloat16raw_to_fp8",
        "__nv_cvt_float2_to_fp8x2", "constructor(float)", "constructor(double)",
        "constructor(__nv_bfloat16)", "constructor(int)", "x4 constructor(float4)", "operator float",
        "operator double", "operator __nv_bfloat16", "x2 operator float2"};
    return op < FP8_TABLE_OP_COUNT ? names[op] : "unknown op";
}

// A float or double as its bits (zero-extended, as an entry holds them) and back.
inline uint64_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
inline float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint64_t double_bits(double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}
inline double bits_double(uint64_t u) {
    double d;
    memcpy(&d, &u, 8);
    return d;
}
