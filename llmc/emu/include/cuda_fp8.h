// cuda_fp8.h for the emulated GPU (llmc/emu/emu.h): the two 8-bit floating-point formats of the
// OCP 8-bit Floating Point specification (OFP8, 2023) that the tensor cores of sm_89 and later
// multiply, under the names and with the results of CUDA's own cuda_fp8.h:
//
//   E4M3  1 sign, 4 exponent (bias 7), 3 mantissa bits. No infinities: the exponent field 1111
//         still holds numbers, except S.1111.111, the only NaN. Largest finite 448 (0x7E),
//         smallest normal 2^-6 (0x08), smallest subnormal 2^-9 (0x01).
//   E5M2  1 sign, 5 exponent (bias 15), 2 mantissa bits, laid out as IEEE 754 lays out a float:
//         S.11111.00 is infinity, S.11111.{01,10,11} NaN. Largest finite 57344 (0x7B), smallest
//         normal 2^-14 (0x04), smallest subnormal 2^-16 (0x01).
//
// Conversion from a wider format rounds to the nearest fp8 number, ties to the one with an even
// mantissa. What rounds beyond the largest finite number, and infinity, becomes what the
// saturation asked for says:
//   __NV_SATFINITE  the largest finite number of the same sign (what the classes' constructors use)
//   __NV_NOSAT      E4M3: NaN of the same sign (0x7F/0xFF, it has no infinity); E5M2: +-infinity
// A NaN stays a NaN: from a float it becomes 0x7F in both formats (NVIDIA's host code first
// replaces any float NaN by the positive all-ones NaN); from a double it keeps its sign, and in
// E5M2 also the second-highest bit of its significand, the highest (the quiet bit) set.
// Widening to float is exact; every NaN widens to the float 0x7FFFFFFF, as NVIDIA's host code
// gives it. These are the results of NVIDIA's host code (test_emu_fp8 compares them bit for bit);
// its device code on sm_89 and later converts with __NV_SATFINITE by the cvt instruction instead,
// which has not been compared with this header on a GPU yet (a NaN's bits are the likeliest to
// differ).
//
// Not here: __half (the emulator has no cuda_fp16.h), so neither __nv_cvt_fp8_to_halfraw nor
// the conversions from __half; the conversions to integers; double2/double4 and __nv_fp8_e8m0.
//
// defines: __nv_fp8_storage_t, __nv_fp8x2_storage_t, __nv_fp8x4_storage_t,
//          __nv_saturation_t (__NV_NOSAT, __NV_SATFINITE),
//          __nv_fp8_interpretation_t (__NV_E4M3, __NV_E5M2),
//          __nv_cvt_double_to_fp8, __nv_cvt_float_to_fp8, __nv_cvt_bfloat16raw_to_fp8,
//          __nv_cvt_float2_to_fp8x2, __nv_fp8_e4m3, __nv_fp8_e5m2, __nv_fp8x2_e4m3,
//          __nv_fp8x2_e5m2, __nv_fp8x4_e4m3, __nv_fp8x4_e5m2; and without a CUDA name,
//          emu_fp8::to_float (what the classes' operator float does)
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include "../emu.h"  // float2, float4
#include "cuda_bf16.h"

typedef unsigned char __nv_fp8_storage_t;     // one fp8 number's bits
typedef unsigned short __nv_fp8x2_storage_t;  // two, the first in the low byte
typedef unsigned int __nv_fp8x4_storage_t;    // four, the first in the low byte

typedef enum __nv_saturation_t {
    __NV_NOSAT,      // too large: E4M3 NaN, E5M2 infinity
    __NV_SATFINITE,  // too large: the largest finite number
} __nv_saturation_t;

typedef enum __nv_fp8_interpretation_t {
    __NV_E4M3,
    __NV_E5M2,
} __nv_fp8_interpretation_t;

namespace emu_fp8 {

// What tells the two formats apart, from the OFP8 specification's table of their parameters.
struct Format {
    int mantissa_bits;  // 3 (E4M3) or 2 (E5M2)
    int min_exponent;   // of the smallest normal number, 1 - bias: -6 or -14
    int max_exponent;   // of the largest finite number: 8 or 15
    unsigned max_code;  // the largest finite number's bits: 0x7E or 0x7B
    bool has_infinity;  // E5M2 has (0x7C), E4M3 has not
};

inline Format format_of(__nv_fp8_interpretation_t interpretation) {
    if (interpretation == __NV_E4M3) return Format{3, -6, 8, 0x7Eu, false};
    return Format{2, -14, 15, 0x7Bu, true};
}

// The result for a magnitude too large for the format (sign is 0x80 or 0).
inline __nv_fp8_storage_t too_large(unsigned sign, const Format& f, __nv_saturation_t saturate) {
    if (saturate == __NV_SATFINITE) return (__nv_fp8_storage_t)(sign | f.max_code);
    return (__nv_fp8_storage_t)(sign | (f.has_infinity ? 0x7Cu : 0x7Fu));
}

// A number (not NaN) to fp8. Every fp8 number near |x| is a whole multiple of one spacing,
// 2^(e - mantissa_bits) where e is the exponent of |x|'s binade (no lower than min_exponent:
// the subnormals share the smallest normals' spacing). Count |x| in that spacing, round the count
// to a whole number, and the count is the fp8 bits' low part: the encoding is in order of
// magnitude, so a count that rounds up into the next binade carries into the exponent field.
inline __nv_fp8_storage_t from_number(double x, __nv_saturation_t saturate, const Format& f) {
    const unsigned sign = std::signbit(x) ? 0x80u : 0u;
    const double magnitude = std::fabs(x);
    if (magnitude == 0.0) return (__nv_fp8_storage_t)sign;  // +-0 keep their sign
    if (std::isinf(magnitude)) return too_large(sign, f, saturate);
    int e;
    std::frexp(magnitude, &e);  // magnitude = m * 2^e with m in [0.5, 1): its binade is 2^(e-1)
    e -= 1;
    if (e > f.max_exponent) return too_large(sign, f, saturate);
    const int binade = e > f.min_exponent ? e : f.min_exponent;
    const double count = std::ldexp(magnitude, f.mantissa_bits - binade);  // exact: a power of 2
    double whole = std::floor(count);
    const double fraction = count - whole;  // exact too: count has at most 53 significant bits
    const bool whole_is_odd = std::fmod(whole, 2.0) == 1.0;
    if (fraction > 0.5 || (fraction == 0.5 && whole_is_odd)) whole += 1.0;  // to nearest, ties to even
    // each binade above the lowest adds 2^mantissa_bits codes; within the lowest, counts below
    // 2^mantissa_bits are the subnormals' codes and the rest (the implicit leading one counted)
    // the smallest normals', exponent field 1
    const unsigned code = ((unsigned)(binade - f.min_exponent) << f.mantissa_bits) + (unsigned)whole;
    if (code > f.max_code) return too_large(sign, f, saturate);  // rounded past the largest finite
    return (__nv_fp8_storage_t)(sign | code);
}

// fp8 to float: exact for every number; a NaN gives the float NaN 0x7FFFFFFF.
inline float to_float(__nv_fp8_storage_t bits, __nv_fp8_interpretation_t interpretation) {
    const Format f = format_of(interpretation);
    const unsigned magnitude = bits & 0x7Fu;
    const float sign = (bits & 0x80u) ? -1.0f : 1.0f;
    const bool is_nan = f.has_infinity ? magnitude > 0x7Cu : magnitude == 0x7Fu;
    if (is_nan) {
        const uint32_t nan_bits = 0x7FFFFFFFu;
        float nan;
        memcpy(&nan, &nan_bits, 4);
        return nan;
    }
    if (f.has_infinity && magnitude == 0x7Cu) return sign * INFINITY;
    const unsigned exponent_field = magnitude >> f.mantissa_bits;
    const unsigned mantissa = magnitude & ((1u << f.mantissa_bits) - 1u);
    if (exponent_field == 0)  // subnormal (or zero): mantissa steps of the smallest normals' spacing
        return sign * std::ldexp((float)mantissa, f.min_exponent - f.mantissa_bits);
    const unsigned significand = (1u << f.mantissa_bits) | mantissa;  // the implicit leading one
    const int exponent = (int)exponent_field - 1 + f.min_exponent;
    return sign * std::ldexp((float)significand, exponent - f.mantissa_bits);
}

// fp8 to bfloat16: every fp8 number is a bfloat16 number (8 exponent bits, 7 mantissa bits hold
// E5M2's range and E4M3's precision), so the float's upper half is exact; NaN gives 0x7FFF.
inline __nv_bfloat16 to_bfloat16(__nv_fp8_storage_t bits, __nv_fp8_interpretation_t interpretation) {
    const float f = to_float(bits, interpretation);
    uint32_t u;
    memcpy(&u, &f, 4);
    return __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)(u >> 16)});
}

}  // namespace emu_fp8

// ---------------------------------------------------------------------------------------
// CUDA's conversion functions

inline __nv_fp8_storage_t __nv_cvt_double_to_fp8(double x, __nv_saturation_t saturate,
                                                 __nv_fp8_interpretation_t interpretation) {
    const emu_fp8::Format f = emu_fp8::format_of(interpretation);
    if (std::isnan(x)) {
        uint64_t bits;
        memcpy(&bits, &x, 8);
        const unsigned sign = (unsigned)(bits >> 63) << 7;
        if (!f.has_infinity) return (__nv_fp8_storage_t)(sign | 0x7Fu);  // E4M3's only NaN
        // E5M2 narrows a NaN as IEEE 754 narrows one: the quiet bit (the mantissa's highest)
        // set, the payload's next bit (bit 50 of a double) kept
        return (__nv_fp8_storage_t)(sign | 0x7Eu | (unsigned)((bits >> 50) & 1u));
    }
    return emu_fp8::from_number(x, saturate, f);
}

inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t saturate,
                                                __nv_fp8_interpretation_t interpretation) {
    if (std::isnan(x)) return (__nv_fp8_storage_t)0x7Fu;  // any float NaN: the positive NaN
    return emu_fp8::from_number((double)x, saturate, emu_fp8::format_of(interpretation));
}

inline __nv_fp8_storage_t __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw x, __nv_saturation_t saturate,
                                                      __nv_fp8_interpretation_t interpretation) {
    return __nv_cvt_float_to_fp8(__bfloat162float(__nv_bfloat16(x)), saturate, interpretation);
}

inline __nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 x, __nv_saturation_t saturate,
                                                     __nv_fp8_interpretation_t interpretation) {
    const unsigned lo = __nv_cvt_float_to_fp8(x.x, saturate, interpretation);
    const unsigned hi = __nv_cvt_float_to_fp8(x.y, saturate, interpretation);
    return (__nv_fp8x2_storage_t)(lo | (hi << 8));
}

// ---------------------------------------------------------------------------------------
// CUDA's classes. As in CUDA, every constructor and conversion is explicit (an fp8 number never
// appears or disappears silently in an expression), construction saturates to the largest finite
// number (__NV_SATFINITE), and there is no arithmetic: compute in float or bfloat16.

namespace emu_fp8 {

template <__nv_fp8_interpretation_t F>
struct alignas(1) Scalar {
    __nv_fp8_storage_t __x;
    Scalar() = default;
    explicit Scalar(float f) : __x(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, F)) {}
    explicit Scalar(double f) : __x(__nv_cvt_double_to_fp8(f, __NV_SATFINITE, F)) {}
    explicit Scalar(__nv_bfloat16 f) : __x(__nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw(f), __NV_SATFINITE, F)) {}
    // the integers as CUDA's header converts them: to float first (rounding beyond 2^24)
    explicit Scalar(short i) : Scalar((float)i) {}
    explicit Scalar(unsigned short i) : Scalar((float)i) {}
    explicit Scalar(int i) : Scalar((float)i) {}
    explicit Scalar(unsigned int i) : Scalar((float)i) {}
    explicit Scalar(long i) : Scalar((float)i) {}
    explicit Scalar(unsigned long i) : Scalar((float)i) {}
    explicit Scalar(long long i) : Scalar((float)i) {}
    explicit Scalar(unsigned long long i) : Scalar((float)i) {}
    explicit operator float() const { return to_float(__x, F); }
    explicit operator double() const { return (double)to_float(__x, F); }
    explicit operator __nv_bfloat16() const { return to_bfloat16(__x, F); }
};

template <__nv_fp8_interpretation_t F>
struct alignas(2) Pair {
    __nv_fp8x2_storage_t __x;  // .x in the low byte
    Pair() = default;
    explicit Pair(float2 f) : __x(__nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, F)) {}
    explicit operator float2() const {
        return float2{to_float((__nv_fp8_storage_t)(__x & 0xFFu), F), to_float((__nv_fp8_storage_t)(__x >> 8), F)};
    }
};

template <__nv_fp8_interpretation_t F>
struct alignas(4) Quad {
    __nv_fp8x4_storage_t __x;  // .x in the low byte, .w in the high one
    Quad() = default;
    explicit Quad(float4 f)
        : __x((__nv_fp8x4_storage_t)__nv_cvt_float2_to_fp8x2(float2{f.x, f.y}, __NV_SATFINITE, F) |
              ((__nv_fp8x4_storage_t)__nv_cvt_float2_to_fp8x2(float2{f.z, f.w}, __NV_SATFINITE, F) << 16)) {}
    explicit operator float4() const {
        return float4{to_float((__nv_fp8_storage_t)__x, F), to_float((__nv_fp8_storage_t)(__x >> 8), F),
                      to_float((__nv_fp8_storage_t)(__x >> 16), F), to_float((__nv_fp8_storage_t)(__x >> 24), F)};
    }
};

}  // namespace emu_fp8

// CUDA's names, each its own type (as in CUDA: a __nv_fp8_e4m3 is not a __nv_fp8_e5m2)
struct __nv_fp8_e4m3 : emu_fp8::Scalar<__NV_E4M3> {
    using Scalar::Scalar;
};
struct __nv_fp8_e5m2 : emu_fp8::Scalar<__NV_E5M2> {
    using Scalar::Scalar;
};
struct __nv_fp8x2_e4m3 : emu_fp8::Pair<__NV_E4M3> {
    using Pair::Pair;
};
struct __nv_fp8x2_e5m2 : emu_fp8::Pair<__NV_E5M2> {
    using Pair::Pair;
};
struct __nv_fp8x4_e4m3 : emu_fp8::Quad<__NV_E4M3> {
    using Quad::Quad;
};
struct __nv_fp8x4_e5m2 : emu_fp8::Quad<__NV_E5M2> {
    using Quad::Quad;
};
